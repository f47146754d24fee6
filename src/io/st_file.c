/* st_file.c — one safetensors file: open and validate, look up, read, map.
 *
 * Only the header is read at open. Tensor bytes go from the file straight
 * into the caller's memory (its home, pinned or managed) with pread, so
 * they are copied once and never staged. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "io/fileio.h"
#include "io/st_internal.h"

struct ot_st_file {
  char *path;
  int fd;
  uint64_t size;
  ot_st_header h;
  void *map; /* whole-file private read-only mapping, made on first ot_st_map */
};

static ot_status read_header(ot_st_file *f) {
  unsigned char prefix[8] = {0};
  size_t have = f->size < 8 ? (size_t)f->size : 8;
  OT_TRY(ot_io_pread_full(f->fd, prefix, have, 0, f->path));
  uint64_t n;
  OT_TRY(ot_st_check_prefix(prefix, f->size, f->path, &n));
  char *json = malloc(n ? (size_t)n : 1);
  if (!json) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: cannot allocate %llu bytes for the header", f->path,
                            (unsigned long long)n);
  ot_status s = ot_io_pread_full(f->fd, json, (size_t)n, 8, f->path);
  if (s == OT_OK) s = ot_st_header_parse(json, (size_t)n, 8 + n, f->size - 8 - n, f->path, &f->h);
  free(json);
  return s;
}

ot_status ot_st_open(const char *path, ot_st_file **out) {
  if (!path || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_st_open: NULL argument");
  *out = NULL;
  ot_st_file *f = calloc(1, sizeof *f);
  if (!f) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  f->fd = -1;
  ot_status s = ot_io_strdup(path, &f->path);
  if (s == OT_OK) s = ot_io_open_read(path, &f->fd, &f->size);
  if (s == OT_OK) s = read_header(f);
  if (s != OT_OK) {
    ot_st_close(f);
    return s;
  }
  *out = f;
  return OT_OK;
}

void ot_st_close(ot_st_file *f) {
  if (!f) return;
  if (f->map) munmap(f->map, (size_t)f->size);
  if (f->fd >= 0) close(f->fd);
  ot_st_header_free(&f->h);
  free(f->path);
  free(f);
}

const char *ot_st_path(const ot_st_file *f) { return f ? f->path : ""; }
int ot_st_count(const ot_st_file *f) { return f ? f->h.n : 0; }
uint64_t ot_st_data_bytes(const ot_st_file *f) { return f ? f->h.data_bytes : 0; }
uint64_t ot_st_file_size(const ot_st_file *f) { return f ? f->size : 0; }

const ot_st_info *ot_st_at(const ot_st_file *f, int i) {
  return f && i >= 0 && i < f->h.n ? &f->h.tensors[i] : NULL;
}

ot_status ot_st_find(const ot_st_file *f, const char *name, const ot_st_info **out) {
  if (!f || !name || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_st_find: NULL argument");
  *out = ot_st_bsearch(f->h.tensors, f->h.n, name);
  if (!*out) return ot_fail(OT_ERR_NOT_FOUND, "%s: no tensor '%s'", f->path, name);
  return OT_OK;
}

const char *ot_st_metadata(const ot_st_file *f, const char *key) {
  if (!f || !key) return NULL;
  for (int i = 0; i < f->h.n_meta; i++)
    if (strcmp(f->h.meta[2 * i], key) == 0) return f->h.meta[2 * i + 1];
  return NULL;
}

static ot_status check_info(const ot_st_file *f, const ot_st_info *info, size_t bytes, const char *fn) {
  if (!f || !info) return ot_fail(OT_ERR_INVALID_ARG, "%s: NULL argument", fn);
  if (info->offset < f->h.data_start || info->offset + info->bytes > f->size)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: %s: tensor '%s' does not belong to this file", fn, f->path, info->name);
  if (bytes != info->bytes)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: %s: tensor '%s' holds %llu bytes, the destination %zu", fn, f->path,
                   info->name, (unsigned long long)info->bytes, bytes);
  return OT_OK;
}

ot_status ot_st_read(const ot_st_file *f, const ot_st_info *info, void *dst, size_t bytes) {
  OT_TRY(check_info(f, info, bytes, "ot_st_read"));
  if (bytes && !dst) return ot_fail(OT_ERR_INVALID_ARG, "ot_st_read: NULL destination for '%s'", info->name);
  ot_status s = ot_io_pread_full(f->fd, dst, bytes, info->offset, f->path);
  if (s != OT_OK) return ot_fail_context(s, "tensor '%s'", info->name);
  return OT_OK;
}

ot_status ot_st_map(ot_st_file *f, const ot_st_info *info, const void **out) {
  OT_TRY(check_info(f, info, info ? (size_t)info->bytes : 0, "ot_st_map"));
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_st_map: NULL argument");
  if (!f->map) {
    void *m = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
    if (m == MAP_FAILED) return ot_fail(OT_ERR_IO, "%s: mmap of %llu bytes failed", f->path, (unsigned long long)f->size);
    f->map = m;
  }
  *out = (const char *)f->map + info->offset;
  return OT_OK;
}
