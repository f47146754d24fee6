/* ckpt.c — a Hugging Face checkpoint: one model.safetensors, or shards
 * listed by model.safetensors.index.json (the single file first where both
 * are, as transformers); one sorted table over all of them.
 * A GGUF file is a checkpoint too (ckpt_gguf.c): the same table, by the
 * Hugging Face names its tensors stand for. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "io/ckpt_disk.h"
#include "io/ckpt_internal.h"
#include "io/fileio.h"
#include "io/st_internal.h"
#include "memory/diskfile.h"

#define OT_INDEX_NAME "model.safetensors.index.json"
#define OT_SINGLE_NAME "model.safetensors"
#define OT_INDEX_MAX_BYTES ((size_t)64 << 20)


static int ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && strcmp(s + a - b, tail) == 0;
}

static ot_status dir_of(const char *path, char **out) {
  const char *slash = strrchr(path, '/');
  if (!slash) return ot_io_strdup(".", out);
  size_t n = slash == path ? 1 : (size_t)(slash - path);
  *out = malloc(n + 1);
  if (!*out) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  memcpy(*out, path, n);
  (*out)[n] = '\0';
  return OT_OK;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const ot_st_info *)a)->name, ((const ot_st_info *)b)->name);
}

/* One table over all shards; a name in two shards is ambiguous. */
static ot_status merge(ot_ckpt *c) {
  size_t total = 0;
  for (int i = 0; i < c->n_shards; i++) total += (size_t)ot_st_count(c->shards[i]);
  c->infos = calloc(total ? total : 1, sizeof *c->infos);
  if (!c->infos) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu tensor entries", c->dir, total);
  for (int i = 0; i < c->n_shards; i++)
    for (int j = 0; j < ot_st_count(c->shards[i]); j++) {
      c->infos[c->n] = *ot_st_at(c->shards[i], j);
      c->infos[c->n++].shard = i;
    }
  qsort(c->infos, (size_t)c->n, sizeof *c->infos, by_name);
  for (int i = 1; i < c->n; i++)
    if (strcmp(c->infos[i - 1].name, c->infos[i].name) == 0)
      return ot_fail(OT_ERR_FORMAT, "%s: tensor '%s' is in both %s and %s", c->dir, c->infos[i].name,
                     ot_st_path(c->shards[c->infos[i - 1].shard]), ot_st_path(c->shards[c->infos[i].shard]));
  return OT_OK;
}

static ot_status open_shard(ot_ckpt *c, const char *name) {
  char *p = ot_io_join(c->dir, name);
  if (!p) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", c->dir);
  ot_status s = ot_st_open(p, &c->shards[c->n_shards]);
  free(p);
  if (s == OT_OK) c->n_shards++;
  return s;
}

static ot_status open_indexed(ot_ckpt *c, const char *index_path) {
  char *text;
  size_t len;
  OT_TRY(ot_io_read_text(index_path, OT_INDEX_MAX_BYTES, &text, &len));
  ot_st_index ix;
  ot_status s = ot_st_index_parse(text, len, index_path, &ix);
  free(text);
  OT_TRY(s);
  c->shards = calloc((size_t)ix.n_shards, sizeof *c->shards);
  if (!c->shards) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", index_path);
  for (int i = 0; i < ix.n_shards && s == OT_OK; i++) s = open_shard(c, ix.shards[i]);
  for (int i = 0; i < ix.n && s == OT_OK; i++)
    if (!ot_st_bsearch(ot_st_at(c->shards[ix.shard[i]], 0), ot_st_count(c->shards[ix.shard[i]]), ix.tensor[i]))
      s = ot_fail(OT_ERR_FORMAT, "%s: weight_map puts tensor '%s' in %s, which does not hold it", index_path,
                  ix.tensor[i], ix.shards[ix.shard[i]]);
  ot_st_index_free(&ix);
  return s;
}

static ot_status open_single(ot_ckpt *c, const char *path) {
  c->shards = calloc(1, sizeof *c->shards);
  if (!c->shards) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  OT_TRY(ot_st_open(path, &c->shards[0]));
  c->n_shards = 1;
  return OT_OK;
}

/* A directory, in transformers' order (modeling_utils: SAFE_WEIGHTS_NAME is
 * taken when it is a file, before SAFE_WEIGHTS_INDEX_NAME): the single file
 * when it is a regular file, with a notice when an index is there too (its
 * shards are other weights, unused); else the index; else whatever stands
 * at the single file's name (a directory, a dangling link, a loop of
 * links, a FIFO) is opened, so that the one checked open says what it is. */
static ot_status open_dir(ot_ckpt *c) {
  char *ix = ot_io_join(c->dir, OT_INDEX_NAME), *one = ot_io_join(c->dir, OT_SINGLE_NAME);
  ot_status s;
  if (!ix || !one) {
    s = ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", c->dir);
  } else if (ot_path_kind_of(one, NULL) == OT_PATH_REGULAR) {
    if (ot_path_exists(ix))
      ot_warn_once("ckpt.index_not_used", "%s: both " OT_SINGLE_NAME " and " OT_INDEX_NAME " are here; transformers "
                   "loads " OT_SINGLE_NAME ", and so does omptensor: " OT_INDEX_NAME " and its shards are not used",
                   c->dir);
    s = open_single(c, one);
  } else if (ot_path_exists(ix)) {
    s = open_indexed(c, ix);
  } else if (ot_path_exists(one)) {
    s = open_single(c, one);
  } else {
    s = ot_fail(OT_ERR_NOT_FOUND, "%s: no %s or %s here; is this a Hugging Face checkpoint directory?", c->dir,
                OT_INDEX_NAME, OT_SINGLE_NAME);
  }
  free(ix);
  free(one);
  return s;
}

ot_status ot_ckpt_open(const char *path, ot_ckpt **out) {
  if (!path || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_ckpt_open: NULL argument");
  *out = NULL;
  ot_ckpt *c = calloc(1, sizeof *c);
  if (!c) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  c->fd = -1;
  int is_dir = ot_io_is_dir(path);
  if (is_dir != 1 && ot_gguf_is_file(path)) {
    ot_status g = ot_ckpt_gguf_open(c, path);
    if (g != OT_OK) ot_ckpt_close(c);
    else *out = c;
    return g;
  }
  ot_status s = is_dir == 1 ? ot_io_strdup(path, &c->dir) : dir_of(path, &c->dir);
  if (s == OT_OK) {
    if (is_dir == 1) s = open_dir(c);
    else if (ends_with(path, ".json")) s = open_indexed(c, path);
    else s = open_single(c, path);
  }
  if (s == OT_OK) s = merge(c);
  if (s != OT_OK) {
    ot_ckpt_close(c);
    return s;
  }
  *out = c;
  return OT_OK;
}

void ot_ckpt_close(ot_ckpt *c) {
  if (!c) return;
  ot_ckpt_gguf_free(c);
  for (int i = 0; i < c->n_shards; i++) {
    ot_st_close(c->shards[i]);
    if (c->dfiles) ot_disk_file_unref(c->dfiles[i]);
  }
  free(c->dfiles);
  free(c->shards);
  free(c->infos);
  free(c->dir);
  free(c);
}

int ot_ckpt_count(const ot_ckpt *c) { return c ? c->n : 0; }
int ot_ckpt_num_shards(const ot_ckpt *c) { return c ? c->n_shards : 0; }
int ot_ckpt_is_gguf(const ot_ckpt *c) { return c && c->gg; }
const char *ot_ckpt_dir(const ot_ckpt *c) { return c ? c->dir : ""; }

const ot_st_info *ot_ckpt_at(const ot_ckpt *c, int i) { return c && i >= 0 && i < c->n ? &c->infos[i] : NULL; }

ot_st_file *ot_ckpt_shard(const ot_ckpt *c, int i) { return c && i >= 0 && i < c->n_shards ? c->shards[i] : NULL; }

ot_status ot_ckpt_find(const ot_ckpt *c, const char *name, const ot_st_info **out) {
  if (!c || !name || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_ckpt_find: NULL argument");
  *out = ot_st_bsearch(c->infos, c->n, name);
  if (!*out) return ot_fail(OT_ERR_NOT_FOUND, "%s: the checkpoint has no tensor '%s'", c->dir, name);
  return OT_OK;
}

ot_status ot_ckpt_read(const ot_ckpt *c, const ot_st_info *info, void *dst, size_t bytes) {
  if (c && info && c->gg) return ot_ckpt_gguf_read(c, info, dst, bytes);
  if (!c || !info || info->shard < 0 || info->shard >= c->n_shards)
    return ot_fail(OT_ERR_INVALID_ARG, "ot_ckpt_read: NULL argument or a tensor from another checkpoint");
  return ot_st_read(c->shards[info->shard], info, dst, bytes);
}

ot_status ot_ckpt_disk_file(const ot_ckpt *c, const ot_st_info *info, ot_disk_file **out, uint64_t *off) {
  if (!c || !info || !out || !off) return ot_fail(OT_ERR_INVALID_ARG, "ot_ckpt_disk_file: NULL argument");
  if (c->gg) return ot_fail(OT_ERR_UNSUPPORTED, "%s: a GGUF file cannot be a file home", c->dir);
  if (info->shard < 0 || info->shard >= c->n_shards)
    return ot_fail(OT_ERR_INVALID_ARG, "ot_ckpt_disk_file: a tensor from another checkpoint");
  ot_ckpt *m = (ot_ckpt *)c; /* the shards' file homes are a cache of the checkpoint */
  if (!m->dfiles && !(m->dfiles = calloc((size_t)c->n_shards, sizeof *m->dfiles)))
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", c->dir);
  ot_st_file *f = c->shards[info->shard];
  if (!m->dfiles[info->shard])
    OT_TRY(ot_disk_file_open(ot_st_path(f), ot_st_file_size(f), &m->dfiles[info->shard]));
  *out = m->dfiles[info->shard];
  *off = info->offset;
  return OT_OK;
}
