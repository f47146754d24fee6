/* st_write.c — write a safetensors file the reference reader accepts:
 * 8-byte length, JSON header padded with spaces so the data section starts
 * 64-byte aligned, then the tensors packed without holes, larger elements
 * first so every tensor is aligned to its element size. */
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "io/fileio.h"
#include "io/st_internal.h"

static ot_status check_tensor(const char *path, const ot_st_tensor *t, uint64_t *bytes) {
  if (!t->name) return ot_fail(OT_ERR_INVALID_ARG, "%s: a tensor without a name", path);
  if (strcmp(t->name, "__metadata__") == 0)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: '__metadata__' is reserved, not a tensor name", path);
  if (!ot_st_dtype_str(t->dtype))
    return ot_fail(OT_ERR_DTYPE, "%s: tensor '%s': dtype %s cannot be stored in safetensors (use f32, f16, bf16, i32, i8)",
                   path, t->name, ot_dtype_name(t->dtype));
  if (t->ndim < 0 || t->ndim > OT_ST_MAX_DIMS)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: tensor '%s': %d dimensions (0..%d allowed)", path, t->name, t->ndim,
                   OT_ST_MAX_DIMS);
  int64_t numel = 1;
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] < 0 || __builtin_mul_overflow(numel, t->shape[i], &numel))
      return ot_fail(OT_ERR_INVALID_ARG, "%s: tensor '%s': bad shape (dim %d is %" PRId64 ")", path, t->name, i,
                     t->shape[i]);
  *bytes = ot_dtype_bytes(t->dtype, numel);
  if (*bytes && !t->data) return ot_fail(OT_ERR_INVALID_ARG, "%s: tensor '%s': NULL data", path, t->name);
  return OT_OK;
}

typedef struct slot {
  const ot_st_tensor *t;
  uint64_t bytes;
  size_t elem;
  int order; /* position in the caller's list: keeps the sort stable */
} slot;

static int by_elem_desc(const void *a, const void *b) {
  const slot *x = a, *y = b;
  if (x->elem != y->elem) return x->elem > y->elem ? -1 : 1;
  return x->order - y->order;
}

static json_t *tensor_entry(const slot *s, uint64_t begin) {
  json_t *shape = json_array();
  for (int i = 0; i < s->t->ndim; i++) json_array_append_new(shape, json_integer(s->t->shape[i]));
  return json_pack("{s:s, s:o, s:[I,I]}", "dtype", ot_st_dtype_str(s->t->dtype), "shape", shape, "data_offsets",
                   (json_int_t)begin, (json_int_t)(begin + s->bytes));
}

/* Builds the header text, padded; *slots gets the write order. */
static ot_status build_header(const char *path, const ot_st_tensor *tensors, int n, const char *const *meta,
                              int n_meta, slot *slots, char **text, size_t *len) {
  json_t *root = json_object();
  if (!root) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory building the header", path);
  ot_status s = OT_OK;
  if (n_meta > 0) {
    json_t *m = json_object();
    for (int i = 0; i < n_meta && m; i++)
      if (!meta[2 * i] || !meta[2 * i + 1] || json_object_set_new(m, meta[2 * i], json_string(meta[2 * i + 1])) != 0) {
        s = ot_fail(OT_ERR_INVALID_ARG, "%s: metadata entry %d is NULL or not UTF-8", path, i);
        break;
      }
    json_object_set_new(root, "__metadata__", m);
  }
  for (int i = 0; i < n && s == OT_OK; i++) {
    slots[i] = (slot){.t = &tensors[i], .elem = ot_dtype_bytes(tensors[i].dtype, 1), .order = i};
    s = check_tensor(path, &tensors[i], &slots[i].bytes);
  }
  if (s == OT_OK) qsort(slots, (size_t)n, sizeof *slots, by_elem_desc);
  uint64_t at = 0;
  for (int i = 0; i < n && s == OT_OK; i++) {
    if (json_object_get(root, slots[i].t->name))
      s = ot_fail(OT_ERR_INVALID_ARG, "%s: tensor name '%s' given twice", path, slots[i].t->name);
    else if (json_object_set_new(root, slots[i].t->name, tensor_entry(&slots[i], at)) != 0)
      s = ot_fail(OT_ERR_INVALID_ARG, "%s: tensor name '%s' is not valid UTF-8", path, slots[i].t->name);
    at += slots[i].bytes;
  }
  char *dumped = s == OT_OK ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(root);
  if (s != OT_OK) return s;
  if (!dumped) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory writing the header", path);
  size_t raw = strlen(dumped), padded = ((8 + raw + 63) / 64) * 64 - 8;
  char *buf = malloc(8 + padded);
  if (!buf) {
    free(dumped);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory writing the header", path);
  }
  for (int i = 0; i < 8; i++) buf[i] = (char)(((uint64_t)padded >> (8 * i)) & 0xff);
  memcpy(buf + 8, dumped, raw);
  memset(buf + 8 + raw, ' ', padded - raw);
  free(dumped);
  *text = buf;
  *len = 8 + padded;
  return OT_OK;
}

ot_status ot_st_write(const char *path, const ot_st_tensor *tensors, int n, const char *const *meta, int n_meta) {
  if (!path || n < 0 || (n > 0 && !tensors) || n_meta < 0 || (n_meta > 0 && !meta))
    return ot_fail(OT_ERR_INVALID_ARG, "ot_st_write: NULL or negative argument");
  slot *slots = calloc(n ? (size_t)n : 1, sizeof *slots);
  if (!slots) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  char *head = NULL;
  size_t head_len = 0;
  ot_status s = build_header(path, tensors, n, meta, n_meta, slots, &head, &head_len);
  ot_afile *f = NULL;
  if (s == OT_OK) s = ot_afile_create(path, &f);
  if (s == OT_OK) s = ot_afile_write(f, head, head_len);
  for (int i = 0; i < n && s == OT_OK; i++) s = ot_afile_write(f, slots[i].t->data, (size_t)slots[i].bytes);
  if (f) {
    if (s == OT_OK) s = ot_afile_commit(f);
    else ot_afile_abandon(f);
  }
  free(head);
  free(slots);
  return s;
}
