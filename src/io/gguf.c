/* gguf.c — the GGUF reader (gguf.h): header, metadata, tensor infos.
 *
 * The header is parsed from a buffer: from memory, or for a file its first
 * MiB, and again from a buffer twice as large whenever the parse runs off
 * the end of the one it has (up to the file's size), so a file whose
 * metadata holds a 128 000-token vocabulary reads in a few passes and a
 * hostile count cannot make us read (or allocate) more than the file.
 * Everything kept is copied out, so the buffer goes when the parse ends. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/error.h"
#include "io/fileio.h"
#include "omptensor/gguf.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define MAX_TENSORS (1 << 20)
#define MAX_KV (1 << 20)
#define MAX_STRING ((uint64_t)1 << 30)

typedef struct kv {
  char *key;
  ot_gguf_vtype type, elem; /* elem: arrays */
  uint64_t count;           /* arrays */
  union {
    uint64_t u;
    int64_t i;
    double f;
  } v;
  char *str;      /* string */
  char **strs;    /* array of strings */
  void *raw;      /* array of numbers: count elements of elem's size */
} kv;

struct ot_gguf {
  char *name;
  uint32_t version;
  uint64_t alignment, data_offset, file_size;
  int n_kv, n_t;
  kv *kvs;
  ot_gguf_tensor *t;
  char **tnames;
};

/* ---- types ------------------------------------------------------------------- */

typedef struct type_info {
  uint32_t type;
  const char *name;
  int block;       /* values per block */
  int block_bytes;
} type_info;

static const type_info types[] = {
    {OT_GGUF_F32, "F32", 1, 4},       {OT_GGUF_F16, "F16", 1, 2},        {OT_GGUF_Q4_0, "Q4_0", 32, 18},
    {OT_GGUF_Q4_1, "Q4_1", 32, 20},   {OT_GGUF_Q5_0, "Q5_0", 32, 22},    {OT_GGUF_Q5_1, "Q5_1", 32, 24},
    {OT_GGUF_Q8_0, "Q8_0", 32, 34},   {OT_GGUF_Q8_1, "Q8_1", 32, 36},    {OT_GGUF_Q2_K, "Q2_K", 256, 84},
    {OT_GGUF_Q3_K, "Q3_K", 256, 110}, {OT_GGUF_Q4_K, "Q4_K", 256, 144},  {OT_GGUF_Q5_K, "Q5_K", 256, 176},
    {OT_GGUF_Q6_K, "Q6_K", 256, 210}, {OT_GGUF_Q8_K, "Q8_K", 256, 292},  {OT_GGUF_I8, "I8", 1, 1},
    {OT_GGUF_I16, "I16", 1, 2},       {OT_GGUF_I32, "I32", 1, 4},        {OT_GGUF_I64, "I64", 1, 8},
    {OT_GGUF_F64, "F64", 1, 8},       {OT_GGUF_BF16, "BF16", 1, 2},
};

static const type_info *type_of(uint32_t t) {
  for (size_t k = 0; k < sizeof types / sizeof *types; k++)
    if (types[k].type == t) return &types[k];
  return NULL;
}

const char *ot_gguf_type_name(uint32_t type) {
  const type_info *ti = type_of(type);
  return ti ? ti->name : NULL;
}

static const int vsize[OT_GGUF_V_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const vnames[OT_GGUF_V_COUNT] = {"u8",     "i8",  "u16",   "i16", "u32", "i32", "f32",
                                                    "bool",   "string", "array", "u64", "i64", "f64"};

/* ---- the cursor -------------------------------------------------------------- */

typedef struct cur {
  const unsigned char *p;
  size_t len, at;
  uint64_t file;   /* the file's size (len, or more for a prefix) */
  ot_status err;   /* the failure's status (OT_OK: none yet) */
  int short_buf;   /* ran off the end of a buffer shorter than the file: read more and retry */
  int partial;     /* the buffer is a prefix of the file */
  const char *name;
} cur;

/* Records a failure (its message is the thread's error) and its status. */
#define FAIL(c, st, ...) ((c)->err = ot_fail(st, __VA_ARGS__))

/* Takes n bytes; 0 (with the error set, or short_buf) if they are not there. */
static int take(cur *c, size_t n, const void **out, const char *what) {
  if (n > c->len - c->at) {
    if (c->partial) c->short_buf = 1;
    else FAIL(c, OT_ERR_FORMAT, "%s: truncated: %s needs %zu bytes at offset %zu, the file has %zu", c->name, what, n,
                 c->at, c->len);
    return 0;
  }
  *out = c->p + c->at;
  c->at += n;
  return 1;
}

static int rd_u32(cur *c, uint32_t *v, const char *what) {
  const void *p;
  if (!take(c, 4, &p, what)) return 0;
  memcpy(v, p, 4);
  return 1;
}

static int rd_u64(cur *c, uint64_t *v, const char *what) {
  const void *p;
  if (!take(c, 8, &p, what)) return 0;
  memcpy(v, p, 8);
  return 1;
}

/* A GGUF string (u64 length, bytes) as a malloc'd C string; embedded NULs
 * are refused (they would cut the name short). */
static int rd_str(cur *c, char **out, const char *what) {
  uint64_t n;
  const void *p;
  *out = NULL;
  if (!rd_u64(c, &n, what)) return 0;
  if (n > MAX_STRING) {
    FAIL(c, OT_ERR_FORMAT, "%s: %s has length %llu at offset %zu (over 1 GiB)", c->name, what, (unsigned long long)n,
            c->at - 8);
    return 0;
  }
  if (!take(c, (size_t)n, &p, what)) return 0;
  if (memchr(p, 0, (size_t)n)) {
    FAIL(c, OT_ERR_FORMAT, "%s: %s at offset %zu holds a NUL byte", c->name, what, c->at - (size_t)n);
    return 0;
  }
  *out = malloc((size_t)n + 1);
  if (!*out) {
    FAIL(c, OT_ERR_OUT_OF_MEMORY, "%s: no host memory for %s (%llu bytes)", c->name, what, (unsigned long long)n);
    return 0;
  }
  memcpy(*out, p, (size_t)n);
  (*out)[n] = 0;
  return 1;
}

/* ---- parse ------------------------------------------------------------------- */

static void free_kv(kv *k) {
  free(k->key);
  free(k->str);
  for (uint64_t j = 0; k->strs && j < k->count; j++) free(k->strs[j]);
  free(k->strs);
  free(k->raw);
}

void ot_gguf_close(ot_gguf *g) {
  if (!g) return;
  for (int i = 0; i < g->n_kv; i++) free_kv(&g->kvs[i]);
  free(g->kvs);
  for (int i = 0; i < g->n_t; i++) free(g->tnames[i]);
  free(g->tnames);
  free(g->t);
  free(g->name);
  free(g);
}

static int rd_scalar(cur *c, ot_gguf_vtype t, kv *k, const char *key) {
  const void *p;
  if (!take(c, (size_t)vsize[t], &p, key)) return 0;
  uint64_t u = 0;
  memcpy(&u, p, (size_t)vsize[t]);
  switch (t) {
  case OT_GGUF_V_I8: k->v.i = (int8_t)u; break;
  case OT_GGUF_V_I16: k->v.i = (int16_t)u; break;
  case OT_GGUF_V_I32: k->v.i = (int32_t)u; break;
  case OT_GGUF_V_I64: k->v.i = (int64_t)u; break;
  case OT_GGUF_V_F32: {
    float f;
    memcpy(&f, p, 4);
    k->v.f = f;
    break;
  }
  case OT_GGUF_V_F64: memcpy(&k->v.f, p, 8); break;
  default: k->v.u = u; break;
  }
  return 1;
}

static int rd_kv(cur *c, kv *k, int index) {
  char what[64];
  snprintf(what, sizeof what, "metadata key %d", index);
  if (!rd_str(c, &k->key, what)) return 0;
  uint32_t t;
  if (!rd_u32(c, &t, k->key)) return 0;
  if (t >= OT_GGUF_V_COUNT) {
    FAIL(c, OT_ERR_FORMAT, "%s: metadata '%s' has value type %u (known: 0 to %d)", c->name, k->key, t,
            OT_GGUF_V_COUNT - 1);
    return 0;
  }
  k->type = (ot_gguf_vtype)t;
  if (t == OT_GGUF_V_STRING) return rd_str(c, &k->str, k->key);
  if (t != OT_GGUF_V_ARRAY) return rd_scalar(c, k->type, k, k->key);
  uint32_t e;
  if (!rd_u32(c, &e, k->key) || !rd_u64(c, &k->count, k->key)) return 0;
  if (e >= OT_GGUF_V_COUNT || e == OT_GGUF_V_ARRAY) {
    FAIL(c, OT_ERR_FORMAT, "%s: metadata '%s' is an array of type %u (%s)", c->name, k->key, e,
            e == OT_GGUF_V_ARRAY ? "nested arrays are not read" : "unknown");
    return 0;
  }
  k->elem = (ot_gguf_vtype)e;
  /* each element takes at least 1 byte (a string 8): a count past what is
   * left of the file is a lie, whatever the buffer */
  const uint64_t least = e == OT_GGUF_V_STRING ? 8 : (uint64_t)vsize[e];
  const uint64_t left = c->file - c->at;
  if (k->count > left / least) {
    FAIL(c, OT_ERR_FORMAT, "%s: metadata '%s' claims %llu elements, more than the file holds", c->name, k->key,
            (unsigned long long)k->count);
    return 0;
  }
  if (e != OT_GGUF_V_STRING) {
    const void *p;
    if (!take(c, (size_t)(k->count * least), &p, k->key)) return 0;
    k->raw = malloc((size_t)(k->count * least) + 1);
    if (!k->raw) {
      FAIL(c, OT_ERR_OUT_OF_MEMORY, "%s: no host memory for metadata '%s'", c->name, k->key);
      return 0;
    }
    memcpy(k->raw, p, (size_t)(k->count * least));
    return 1;
  }
  k->strs = calloc((size_t)(k->count ? k->count : 1), sizeof *k->strs);
  if (!k->strs) {
    FAIL(c, OT_ERR_OUT_OF_MEMORY, "%s: no host memory for metadata '%s' (%llu strings)", c->name, k->key,
            (unsigned long long)k->count);
    return 0;
  }
  for (uint64_t j = 0; j < k->count; j++)
    if (!rd_str(c, &k->strs[j], k->key)) return 0;
  return 1;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp((*(const ot_gguf_tensor *const *)a)->name, (*(const ot_gguf_tensor *const *)b)->name);
}

static int cmp_offset(const void *a, const void *b) {
  const uint64_t x = (*(const ot_gguf_tensor *const *)a)->offset, y = (*(const ot_gguf_tensor *const *)b)->offset;
  return x < y ? -1 : x > y ? 1 : cmp_name(a, b); /* ties by name: the message names them in one order */
}

static int cmp_key(const void *a, const void *b) {
  return strcmp((*(const kv *const *)a)->key, (*(const kv *const *)b)->key);
}

/* No key twice: a lookup would take the first value and hide the other
 * (llama.cpp's reader refuses such a file). Sorted, so n log n. */
static int unique_keys(cur *c, const ot_gguf *g) {
  const kv **by = malloc((size_t)(g->n_kv ? g->n_kv : 1) * sizeof *by);
  if (!by) {
    FAIL(c, OT_ERR_OUT_OF_MEMORY, "%s: no host memory", c->name);
    return 0;
  }
  for (int i = 0; i < g->n_kv; i++) by[i] = &g->kvs[i];
  qsort(by, (size_t)g->n_kv, sizeof *by, cmp_key);
  int ok = 1;
  for (int i = 1; ok && i < g->n_kv; i++)
    if (strcmp(by[i]->key, by[i - 1]->key) == 0) {
      const int x = (int)(by[i - 1] - g->kvs), y = (int)(by[i] - g->kvs);
      FAIL(c, OT_ERR_FORMAT, "%s: metadata key '%s' is given twice (entries %d and %d)", c->name, by[i]->key,
           x < y ? x : y, x < y ? y : x);
      ok = 0;
    }
  free(by);
  return ok;
}

/* No two tensors with one name, and no two whose bytes overlap (one
 * offset given twice would read one tensor's bytes as another's). */
static int distinct_tensors(cur *c, const ot_gguf *g) {
  const ot_gguf_tensor **by = malloc((size_t)(g->n_t ? g->n_t : 1) * sizeof *by);
  if (!by) {
    FAIL(c, OT_ERR_OUT_OF_MEMORY, "%s: no host memory", c->name);
    return 0;
  }
  for (int i = 0; i < g->n_t; i++) by[i] = &g->t[i];
  qsort(by, (size_t)g->n_t, sizeof *by, cmp_name);
  int ok = 1;
  for (int i = 1; ok && i < g->n_t; i++)
    if (strcmp(by[i]->name, by[i - 1]->name) == 0) {
      FAIL(c, OT_ERR_FORMAT, "%s: two tensors are named '%s'", c->name, by[i]->name);
      ok = 0;
    }
  if (ok) qsort(by, (size_t)g->n_t, sizeof *by, cmp_offset);
  for (int i = 1; ok && i < g->n_t; i++) {
    const ot_gguf_tensor *a = by[i - 1], *b = by[i];
    if (b->offset - a->offset < a->bytes) { /* sorted: b starts inside a */
      FAIL(c, OT_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap: '%s' is %llu bytes at data offset %llu, '%s' starts "
           "at %llu", c->name, a->name, b->name, a->name, (unsigned long long)a->bytes,
           (unsigned long long)(a->offset - g->data_offset), b->name, (unsigned long long)(b->offset - g->data_offset));
      ok = 0;
    }
  }
  free(by);
  return ok;
}

void ot_gguf_magic_text(const void *first, size_t n, char m[5]) {
  const unsigned char *p = first;
  for (size_t i = 0; i < 4; i++) m[i] = i < n && p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\'' ? (char)p[i] : '?';
  m[4] = 0;
}

/* 1: parsed; 0: failed (error set) or, with c->short_buf, needs more bytes. */
static int parse(cur *c, uint64_t file_size, ot_gguf *g) {
  uint32_t magic;
  uint64_t nt, nkv;
  if (!rd_u32(c, &magic, "the magic")) return 0;
  if (magic != GGUF_MAGIC) {
    char m[5];
    ot_gguf_magic_text(c->p, 4, m);
    FAIL(c, OT_ERR_FORMAT, "%s: not a GGUF file (magic '%s', expected 'GGUF')", c->name, m);
    return 0;
  }
  if (!rd_u32(c, &g->version, "the version")) return 0;
  if (g->version != 2 && g->version != 3) {
    FAIL(c, OT_ERR_FORMAT, "%s: GGUF version %u (this reader takes versions 2 and 3)", c->name, g->version);
    return 0;
  }
  if (!rd_u64(c, &nt, "the tensor count") || !rd_u64(c, &nkv, "the metadata count")) return 0;
  if (nt > MAX_TENSORS || nkv > MAX_KV) {
    FAIL(c, OT_ERR_FORMAT, "%s: %llu tensors and %llu metadata keys (at most %d each)", c->name,
            (unsigned long long)nt, (unsigned long long)nkv, MAX_TENSORS);
    return 0;
  }
  g->kvs = calloc((size_t)(nkv ? nkv : 1), sizeof *g->kvs);
  g->t = calloc((size_t)(nt ? nt : 1), sizeof *g->t);
  g->tnames = calloc((size_t)(nt ? nt : 1), sizeof *g->tnames);
  if (!g->kvs || !g->t || !g->tnames) {
    FAIL(c, OT_ERR_OUT_OF_MEMORY, "%s: no host memory for the header", c->name);
    return 0;
  }
  for (uint64_t i = 0; i < nkv; i++) {
    g->n_kv = (int)i + 1;
    if (!rd_kv(c, &g->kvs[i], (int)i)) return 0;
  }
  if (!unique_keys(c, g)) return 0;
  /* general.alignment: a u32 (llama.cpp reads no other type), a power of two */
  g->alignment = 32;
  int has_al;
  int64_t al = 0;
  if ((c->err = ot_gguf_expect(g, "general.alignment", OT_GGUF_V_U32, &has_al)) != OT_OK) return 0;
  if (has_al) {
    ot_gguf_get_int(g, "general.alignment", &al);
    if (al <= 0 || (al & (al - 1)) || al > (1 << 30)) {
      FAIL(c, OT_ERR_FORMAT, "%s: general.alignment is %lld, expected a power of two (at most 2^30)", c->name,
           (long long)al);
      return 0;
    }
    g->alignment = (uint64_t)al;
  }
  for (uint64_t i = 0; i < nt; i++) {
    ot_gguf_tensor *t = &g->t[i];
    char what[64];
    snprintf(what, sizeof what, "the name of tensor %llu", (unsigned long long)i);
    g->n_t = (int)i + 1;
    if (!rd_str(c, &g->tnames[i], what)) return 0;
    t->name = g->tnames[i];
    uint32_t nd;
    if (!rd_u32(c, &nd, t->name)) return 0;
    if (nd < 1 || nd > 4) {
      FAIL(c, OT_ERR_FORMAT, "%s: tensor '%s' has %u dims (1 to 4)", c->name, t->name, nd);
      return 0;
    }
    t->ndim = (int)nd;
    uint64_t ne[4], n = 1;
    for (uint32_t d = 0; d < nd; d++) {
      if (!rd_u64(c, &ne[d], t->name)) return 0;
      if (ne[d] == 0 || ne[d] > ((uint64_t)1 << 40) || n > ((uint64_t)1 << 50) / ne[d]) {
        FAIL(c, OT_ERR_FORMAT, "%s: tensor '%s' dim %u is %llu (each in 1 .. 2^40, at most 2^50 elements)", c->name,
                t->name, d, (unsigned long long)ne[d]);
        return 0;
      }
      n *= ne[d];
      t->shape[nd - 1 - d] = (int64_t)ne[d]; /* GGUF: innermost first */
    }
    uint64_t off;
    if (!rd_u32(c, &t->type, t->name) || !rd_u64(c, &off, t->name)) return 0;
    const type_info *ti = type_of(t->type);
    if (!ti) {
      FAIL(c, OT_ERR_FORMAT, "%s: tensor '%s' has ggml type %u, unknown to this reader", c->name, t->name, t->type);
      return 0;
    }
    if (ne[0] % (uint64_t)ti->block) {
      FAIL(c, OT_ERR_FORMAT, "%s: tensor '%s' is %s but its innermost dim %llu is not whole blocks of %d", c->name,
              t->name, ti->name, (unsigned long long)ne[0], ti->block);
      return 0;
    }
    if (off % g->alignment) {
      FAIL(c, OT_ERR_FORMAT, "%s: tensor '%s' starts at data offset %llu, not a multiple of the alignment %llu",
              c->name, t->name, (unsigned long long)off, (unsigned long long)g->alignment);
      return 0;
    }
    t->bytes = n / (uint64_t)ti->block * (uint64_t)ti->block_bytes;
    t->offset = off; /* from the data section for now */
  }
  /* the data section: the next multiple of the alignment */
  const uint64_t end = c->at;
  g->data_offset = (end + g->alignment - 1) / g->alignment * g->alignment;
  for (int i = 0; i < g->n_t; i++) {
    ot_gguf_tensor *t = &g->t[i];
    if (t->offset > file_size || g->data_offset > file_size - t->offset ||
        t->bytes > file_size - g->data_offset - t->offset) {
      FAIL(c, OT_ERR_FORMAT, "%s: tensor '%s' (%llu bytes at data offset %llu) runs past the end of the file "
              "(%llu bytes, data from %llu)", c->name, t->name, (unsigned long long)t->bytes,
              (unsigned long long)t->offset, (unsigned long long)file_size, (unsigned long long)g->data_offset);
      return 0;
    }
    t->offset += g->data_offset;
  }
  if (!distinct_tensors(c, g)) return 0;
  g->file_size = file_size;
  return 1;
}

static ot_status parse_buffer(const unsigned char *p, size_t len, uint64_t file_size, const char *name, int *short_buf,
                              ot_gguf **out) {
  *out = NULL;
  *short_buf = 0;
  ot_gguf *g = calloc(1, sizeof *g);
  if (!g || !(g->name = strdup(name))) {
    free(g);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: no host memory", name);
  }
  cur c = {p, len, 0, file_size, OT_OK, 0, len < file_size, name};
  if (!parse(&c, file_size, g)) {
    *short_buf = c.short_buf;
    ot_gguf_close(g);
    return c.short_buf ? OT_ERR_FORMAT : c.err != OT_OK ? c.err : OT_ERR_FORMAT;
  }
  *out = g;
  return OT_OK;
}

ot_status ot_gguf_open_mem(const void *data, size_t len, const char *name, ot_gguf **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_gguf_open_mem: out is NULL");
  *out = NULL;
  if (!data && len) return ot_fail(OT_ERR_INVALID_ARG, "ot_gguf_open_mem: NULL data");
  int sb;
  return parse_buffer(data, len, len, name ? name : "(memory)", &sb, out);
}

ot_status ot_gguf_open(const char *path, ot_gguf **out) {
  if (!out || !path) return ot_fail(OT_ERR_INVALID_ARG, "ot_gguf_open: NULL argument");
  *out = NULL;
  int fd;
  uint64_t size;
  OT_TRY(ot_io_open_read(path, &fd, &size));
  size_t have = size < ((size_t)1 << 20) ? (size_t)size : (size_t)1 << 20;
  ot_status s = OT_OK;
  for (;;) {
    unsigned char *buf = malloc(have ? have : 1);
    if (!buf) {
      s = ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: no host memory for %zu bytes of header", path, have);
      break;
    }
    s = ot_io_pread_full(fd, buf, have, 0, path);
    int sb = 0;
    if (s == OT_OK) s = parse_buffer(buf, have, size, path, &sb, out);
    free(buf);
    if (s == OT_OK || !sb || have == size) break;
    have = have > size / 2 ? (size_t)size : have * 2; /* the header goes on: read more */
  }
  close(fd);
  return s;
}

/* Whether the name ends in ".gguf", in any case. */
static int gguf_named(const char *path) {
  const size_t n = strlen(path);
  return n >= 5 && strcasecmp(path + n - 5, ".gguf") == 0;
}

int ot_gguf_is_file(const char *path) {
  int fd;
  uint64_t size;
  char m[4];
  if (!path || ot_io_is_dir(path) == 1) return 0;
  if (ot_io_open_read(path, &fd, &size) != OT_OK) {
    ot_clear_error();
    return gguf_named(path); /* its open, as GGUF, says what is wrong */
  }
  const int magic = size >= 4 && ot_io_pread_full(fd, m, 4, 0, path) == OT_OK && memcmp(m, "GGUF", 4) == 0;
  close(fd);
  ot_clear_error();
  return magic || gguf_named(path);
}

/* ---- queries ---------------------------------------------------------------- */

uint32_t ot_gguf_version(const ot_gguf *g) { return g ? g->version : 0; }
uint64_t ot_gguf_alignment(const ot_gguf *g) { return g ? g->alignment : 0; }
uint64_t ot_gguf_data_offset(const ot_gguf *g) { return g ? g->data_offset : 0; }
int ot_gguf_num_tensors(const ot_gguf *g) { return g ? g->n_t : 0; }
int ot_gguf_num_kv(const ot_gguf *g) { return g ? g->n_kv : 0; }

const ot_gguf_tensor *ot_gguf_tensor_at(const ot_gguf *g, int i) {
  return g && i >= 0 && i < g->n_t ? &g->t[i] : NULL;
}

const ot_gguf_tensor *ot_gguf_find_tensor(const ot_gguf *g, const char *name) {
  for (int i = 0; g && name && i < g->n_t; i++)
    if (strcmp(g->t[i].name, name) == 0) return &g->t[i];
  return NULL;
}

static const kv *find(const ot_gguf *g, const char *key) {
  for (int i = 0; g && key && i < g->n_kv; i++)
    if (strcmp(g->kvs[i].key, key) == 0) return &g->kvs[i];
  return NULL;
}

const char *ot_gguf_key_at(const ot_gguf *g, int i, ot_gguf_vtype *type, ot_gguf_vtype *elem_type, uint64_t *count) {
  if (!g || i < 0 || i >= g->n_kv) return NULL;
  const kv *k = &g->kvs[i];
  if (type) *type = k->type;
  if (elem_type) *elem_type = k->elem;
  if (count) *count = k->type == OT_GGUF_V_ARRAY ? k->count : 1;
  return k->key;
}

int ot_gguf_has(const ot_gguf *g, const char *key) { return find(g, key) != NULL; }

/* "u32", or "an array of u32" */
static void type_text(const kv *k, char *buf, size_t cap) {
  if (k->type == OT_GGUF_V_ARRAY) snprintf(buf, cap, "an array of %s", ot_gguf_vtype_name(k->elem));
  else snprintf(buf, cap, "%s", ot_gguf_vtype_name(k->type));
}

ot_status ot_gguf_expect(const ot_gguf *g, const char *key, ot_gguf_vtype want, int *present) {
  if (!g || !key || !present) return ot_fail(OT_ERR_INVALID_ARG, "ot_gguf_expect: NULL argument");
  const kv *k = find(g, key);
  *present = k != NULL;
  if (!k) return OT_OK;
  if (k->type != want) {
    char found[48];
    type_text(k, found, sizeof found);
    return ot_fail(OT_ERR_FORMAT, "%s: metadata key %s is %s, expected %s", g->name, key, found,
                   ot_gguf_vtype_name(want));
  }
  if ((want == OT_GGUF_V_F32 || want == OT_GGUF_V_F64) && !isfinite(k->v.f))
    return ot_fail(OT_ERR_FORMAT, "%s: metadata key %s is %s %g, expected a finite %s", g->name, key,
                   ot_gguf_vtype_name(want), k->v.f, ot_gguf_vtype_name(want));
  return OT_OK;
}

const char *ot_gguf_get_string(const ot_gguf *g, const char *key) {
  const kv *k = find(g, key);
  return k && k->type == OT_GGUF_V_STRING ? k->str : NULL;
}

int ot_gguf_get_int(const ot_gguf *g, const char *key, int64_t *out) {
  const kv *k = find(g, key);
  if (!k || !out) return 0;
  switch (k->type) {
  case OT_GGUF_V_U8: case OT_GGUF_V_U16: case OT_GGUF_V_U32: case OT_GGUF_V_BOOL:
    *out = (int64_t)k->v.u;
    return 1;
  case OT_GGUF_V_U64:
    if (k->v.u > (uint64_t)INT64_MAX) return 0;
    *out = (int64_t)k->v.u;
    return 1;
  case OT_GGUF_V_I8: case OT_GGUF_V_I16: case OT_GGUF_V_I32: case OT_GGUF_V_I64:
    *out = k->v.i;
    return 1;
  default: return 0;
  }
}

int ot_gguf_get_float(const ot_gguf *g, const char *key, double *out) {
  const kv *k = find(g, key);
  if (!k || !out || (k->type != OT_GGUF_V_F32 && k->type != OT_GGUF_V_F64)) return 0;
  *out = k->v.f;
  return 1;
}

const char *ot_gguf_get_array_string(const ot_gguf *g, const char *key, uint64_t j) {
  const kv *k = find(g, key);
  return k && k->type == OT_GGUF_V_ARRAY && k->elem == OT_GGUF_V_STRING && j < k->count ? k->strs[j] : NULL;
}

int ot_gguf_get_array(const ot_gguf *g, const char *key, ot_gguf_vtype *elem_type, uint64_t *count) {
  const kv *k = find(g, key);
  if (!k || k->type != OT_GGUF_V_ARRAY) return 0;
  if (elem_type) *elem_type = k->elem;
  if (count) *count = k->count;
  return 1;
}

/* Element j of numeric array k, widened: integers into *i (*is_int 1),
 * floats into *f. 0: not a numeric array or j past its end. The elements
 * are kept as the file's little-endian bytes (raw), unaligned: memcpy. */
static int array_elem(const kv *k, uint64_t j, int64_t *i, double *f, int *is_int) {
  if (!k || k->type != OT_GGUF_V_ARRAY || !k->raw || j >= k->count) return 0;
  const unsigned char *p = (const unsigned char *)k->raw + j * (uint64_t)vsize[k->elem];
  *is_int = 1;
  switch (k->elem) {
  case OT_GGUF_V_U8: case OT_GGUF_V_BOOL: *i = p[0]; return 1;
  case OT_GGUF_V_I8: *i = (int8_t)p[0]; return 1;
  case OT_GGUF_V_U16: { uint16_t v; memcpy(&v, p, 2); *i = v; return 1; }
  case OT_GGUF_V_I16: { int16_t v; memcpy(&v, p, 2); *i = v; return 1; }
  case OT_GGUF_V_U32: { uint32_t v; memcpy(&v, p, 4); *i = v; return 1; }
  case OT_GGUF_V_I32: { int32_t v; memcpy(&v, p, 4); *i = v; return 1; }
  case OT_GGUF_V_I64: memcpy(i, p, 8); return 1;
  case OT_GGUF_V_U64: {
    uint64_t v;
    memcpy(&v, p, 8);
    if (v > (uint64_t)INT64_MAX) return 0;
    *i = (int64_t)v;
    return 1;
  }
  case OT_GGUF_V_F32: { float v; memcpy(&v, p, 4); *f = v; *is_int = 0; return 1; }
  case OT_GGUF_V_F64: memcpy(f, p, 8); *is_int = 0; return 1;
  default: return 0;
  }
}

int ot_gguf_get_array_f64(const ot_gguf *g, const char *key, uint64_t j, double *out) {
  int64_t i = 0;
  double f = 0;
  int is_int;
  if (!out || !array_elem(find(g, key), j, &i, &f, &is_int)) return 0;
  *out = is_int ? (double)i : f;
  return 1;
}

int ot_gguf_get_array_int(const ot_gguf *g, const char *key, uint64_t j, int64_t *out) {
  int64_t i = 0;
  double f = 0;
  int is_int;
  if (!out || !array_elem(find(g, key), j, &i, &f, &is_int) || !is_int) return 0;
  *out = i;
  return 1;
}

const char *ot_gguf_vtype_name(ot_gguf_vtype t) { return (unsigned)t < OT_GGUF_V_COUNT ? vnames[t] : "?"; }
