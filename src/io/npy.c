/* npy.c — read and write .npy arrays (float32 / int32, C order). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "io/fileio.h"
#include "io/npy_internal.h"

/* The header dict, padded with spaces and ended by '\n' so that magic +
 * header is a multiple of 64 bytes (what NumPy writes, so the data is
 * aligned for memory mapping). */
static ot_status format_header(const char *path, ot_dtype dtype, int ndim, const int64_t *shape, char *buf,
                               size_t cap, size_t *len) {
  size_t n = (size_t)snprintf(buf + 10, cap - 10, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                              dtype == OT_F32 ? "<f4" : "<i4");
  for (int i = 0; i < ndim; i++)
    n += (size_t)snprintf(buf + 10 + n, cap - 10 - n, "%" PRId64 "%s", shape[i], ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
  n += (size_t)snprintf(buf + 10 + n, cap - 10 - n, "), }");
  size_t total = ((10 + n + 1 + 63) / 64) * 64; /* +1 for the final '\n' */
  if (total > cap || total - 10 > 0xffff) return ot_fail(OT_ERR_INVALID_ARG, "%s: .npy header too long", path);
  memset(buf + 10 + n, ' ', total - 10 - n);
  buf[total - 1] = '\n';
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (char)((total - 10) & 0xff);
  buf[9] = (char)((total - 10) >> 8);
  *len = total;
  return OT_OK;
}

ot_status ot_npy_write(const char *path, ot_dtype dtype, int ndim, const int64_t *shape, const void *data) {
  if (!path || (ndim > 0 && !shape)) return ot_fail(OT_ERR_INVALID_ARG, "ot_npy_write: NULL argument");
  if (dtype != OT_F32 && dtype != OT_I32)
    return ot_fail(OT_ERR_DTYPE, "%s: .npy output holds f32 or i32, not %s", path, ot_dtype_name(dtype));
  if (ndim < 0 || ndim > OT_NPY_MAX_DIMS)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: %d dimensions (0..%d allowed)", path, ndim, OT_NPY_MAX_DIMS);
  int64_t numel = 1;
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0 || __builtin_mul_overflow(numel, shape[i], &numel))
      return ot_fail(OT_ERR_INVALID_ARG, "%s: bad shape (dim %d is %" PRId64 ")", path, i, shape[i]);
  if (numel > 0 && !data) return ot_fail(OT_ERR_INVALID_ARG, "%s: NULL data", path);
  char head[512];
  size_t head_len;
  OT_TRY(format_header(path, dtype, ndim, shape, head, sizeof head, &head_len));
  ot_afile *f;
  OT_TRY(ot_afile_create(path, &f));
  ot_status s = ot_afile_write(f, head, head_len);
  if (s == OT_OK) s = ot_afile_write(f, data, (size_t)numel * 4);
  if (s == OT_OK) return ot_afile_commit(f);
  ot_afile_abandon(f);
  return s;
}

/* Integer arrays of int64 or uint16 become int32 in place: int64 walks
 * forward (element i moves from byte 8i down to 4i, after every element it
 * overwrites was read), uint16 backward (from 2i up to 4i). */
static ot_status to_int32(ot_npy_array *a, const char *path) {
  int32_t *dst = a->data;
  if (a->item_bytes == 8) {
    const unsigned char *src = a->data;
    for (int64_t i = 0; i < a->numel; i++) {
      int64_t v;
      memcpy(&v, src + 8 * i, 8);
      if (v < INT32_MIN || v > INT32_MAX)
        return ot_fail(OT_ERR_FORMAT, "%s: int64 value %" PRId64 " at index %" PRId64 " does not fit int32", path, v,
                       i);
      dst[i] = (int32_t)v;
    }
  } else {
    const unsigned char *src = a->data;
    for (int64_t i = a->numel - 1; i >= 0; i--) {
      uint16_t v;
      memcpy(&v, src + 2 * i, 2);
      dst[i] = v;
    }
  }
  return OT_OK;
}

static ot_status read_body(int fd, uint64_t size, const char *path, ot_npy_array *out) {
  unsigned char pre[OT_NPY_PREFIX] = {0};
  OT_TRY(ot_io_pread_full(fd, pre, size < OT_NPY_PREFIX ? (size_t)size : OT_NPY_PREFIX, 0, path));
  size_t total, off;
  OT_TRY(ot_npy_preamble_size(pre, size < OT_NPY_PREFIX ? (size_t)size : OT_NPY_PREFIX, path, &total));
  if (total > size)
    return ot_fail(OT_ERR_FORMAT, "%s: truncated: the .npy header needs %zu bytes, the file has %llu", path, total,
                   (unsigned long long)size);
  unsigned char *head = malloc(total);
  if (!head) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  ot_status s = ot_io_pread_full(fd, head, total, 0, path);
  if (s == OT_OK) s = ot_npy_parse_header(head, total, path, out, &off);
  free(head);
  OT_TRY(s);
  const int ib = out->item_bytes;
  if (out->numel > INT64_MAX / 8) return ot_fail(OT_ERR_FORMAT, "%s: .npy shape has too many elements", path);
  uint64_t need = (uint64_t)out->numel * (uint64_t)ib;
  if (size - off != need)
    return ot_fail(OT_ERR_FORMAT, "%s: %s data: the shape needs %llu bytes, the file holds %llu", path,
                   size - off < need ? "truncated" : "excess", (unsigned long long)need,
                   (unsigned long long)(size - off));
  /* Room for the file's elements and for the int32 result, whichever is larger. */
  uint64_t cap = (uint64_t)out->numel * (ib > 4 ? (uint64_t)ib : 4);
  out->data = malloc(cap ? (size_t)cap : 1);
  if (!out->data) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: cannot allocate %llu bytes", path, (unsigned long long)cap);
  OT_TRY(ot_io_pread_full(fd, out->data, (size_t)need, off, path));
  return ib == 4 ? OT_OK : to_int32(out, path);
}

ot_status ot_npy_read(const char *path, ot_npy_array *out) {
  if (!path || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_npy_read: NULL argument");
  memset(out, 0, sizeof *out);
  int fd;
  uint64_t size;
  OT_TRY(ot_io_open_read(path, &fd, &size));
  ot_status s = read_body(fd, size, path, out);
  close(fd);
  if (s != OT_OK) ot_npy_free(out);
  return s;
}

void ot_npy_free(ot_npy_array *a) {
  if (!a) return;
  free(a->data);
  memset(a, 0, sizeof *a);
}
