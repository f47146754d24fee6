/* tensor.c — tensors, views and their storages. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/context_impl.h"
#include "core/error.h"
#include "memory/diskfile.h"
#include "memory/tensor_impl.h"

static atomic_uint_fast64_t next_storage_id = 1;

static char *dup_name(const char *s) {
  const char *n = s ? s : "";
  size_t len = strlen(n) + 1;
  char *d = malloc(len);
  if (d) memcpy(d, n, len);
  return d;
}

static ot_status check_shape(const char *name, ot_dtype dt, int ndim, const int64_t *shape, int64_t *numel) {
  if ((unsigned)dt >= OT_DTYPE_COUNT) return ot_fail(OT_ERR_DTYPE, "tensor '%s': invalid dtype %d", name, (int)dt);
  if (ndim < 1 || ndim > OT_MAX_DIMS)
    return ot_fail(OT_ERR_SHAPE, "tensor '%s': %d dims; omptensor supports 1 to %d", name, ndim, OT_MAX_DIMS);
  if (!shape) return ot_fail(OT_ERR_INVALID_ARG, "tensor '%s': shape is NULL", name);
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return ot_fail(OT_ERR_SHAPE, "tensor '%s': dim %d is negative (%lld)", name, i, (long long)shape[i]);
    if (shape[i] && n > INT64_MAX / 64 / shape[i])
      return ot_fail(OT_ERR_SHAPE, "tensor '%s': element count overflows", name);
    n *= shape[i];
  }
  const int blk = ot_dtype_block(dt);
  if (blk && (ndim < 1 || shape[ndim - 1] % blk))
    return ot_fail(OT_ERR_SHAPE, "tensor '%s': %s needs the last dim (%lld) to be a multiple of %d", name,
                   ot_dtype_name(dt), ndim ? (long long)shape[ndim - 1] : 0LL, blk);
  *numel = n;
  return OT_OK;
}

static ot_tensor *new_view(ot_storage *st, const char *name) {
  ot_tensor *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->name = dup_name(name);
  if (!t->name) {
    free(t);
    return NULL;
  }
  t->st = st;
  st->refs++;
  return t;
}

static void set_contiguous(ot_tensor *t, ot_dtype dt, int ndim, const int64_t *shape) {
  t->dt = dt;
  t->ndim = ndim;
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    t->ne[i] = shape[i];
    t->nb[i] = s;
    s *= shape[i];
  }
  for (int i = ndim; i < OT_MAX_DIMS; i++) {
    t->ne[i] = 1;
    t->nb[i] = 0;
  }
}

/* Every home the context allocates is counted (ot_ctx_host_bytes): a host
 * budget (ot_ctx_opts.host_budget_bytes) is checked against that sum. */
static ot_status home_alloc(ot_storage *st) {
  OT_TRY(ot_mem_alloc(st->space, st->home_dev, st->bytes, &st->home));
  if (st->home) atomic_fetch_add(&st->ctx->host_bytes, st->bytes);
  return OT_OK;
}

static void home_free(ot_storage *st) {
  if (st->home) atomic_fetch_sub(&st->ctx->host_bytes, st->bytes);
  ot_mem_free(st->space, st->home_dev, st->home);
  st->home = NULL;
}

static void storage_release(ot_storage *st) {
  if (!st || --st->refs > 0) return;
  if (st->owned) home_free(st);
  ot_disk_file_unref(st->file);
  free(st);
}

ot_status ot_storage_materialize(ot_storage *st) {
  if (!st->lazy || st->home || !st->bytes) return OT_OK;
  OT_TRY(home_alloc(st));
  if (!st->home) return OT_OK;
  if (!st->file) {
    memset(st->home, 0, st->bytes);
    return OT_OK;
  }
  ot_status s = ot_disk_file_read(st->file, st->home, st->bytes, st->file_off, "(host copy)");
  if (s != OT_OK) home_free(st);
  return s;
}

void ot_storage_drop_home(ot_storage *st) {
  if (st->file && st->home) home_free(st);
}

/* data: wrapped memory; NULL: allocated here, or (lazy) when first needed. */
static ot_status make(ot_ctx *ctx, const char *name, ot_dtype dt, int ndim, const int64_t *shape, void *data,
                      int lazy, ot_mem_space space, ot_tensor **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "tensor '%s': out is NULL", name ? name : "");
  *out = NULL;
  if (!ctx) return ot_fail(OT_ERR_INVALID_ARG, "tensor '%s': context is NULL", name ? name : "");
  int64_t numel;
  OT_TRY(check_shape(name ? name : "", dt, ndim, shape, &numel));
  ot_storage *st = calloc(1, sizeof *st);
  if (!st) return ot_fail(OT_ERR_OUT_OF_MEMORY, "tensor '%s': no host memory", name);
  st->ctx = ctx;
  st->bytes = ot_dtype_bytes(dt, numel);
  st->space = space;
  st->home_dev = ctx->dev[0];
  st->id = atomic_fetch_add(&next_storage_id, 1);
  if (data) {
    st->home = data;
  } else if (lazy) {
    st->lazy = st->owned = 1;
  } else {
    ot_status s = home_alloc(st);
    if (s != OT_OK) {
      size_t bytes = st->bytes; /* read before the free (found by OMPTENSOR_FAULT under ASan) */
      free(st);
      return ot_fail_context(s, "tensor '%s' (%zu bytes)", name, bytes);
    }
    if (st->home) memset(st->home, 0, st->bytes);
    st->owned = 1;
  }
  ot_tensor *t = new_view(st, name);
  if (!t) {
    st->refs = 1;
    storage_release(st);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "tensor '%s': no host memory", name);
  }
  set_contiguous(t, dt, ndim, shape);
  *out = t;
  return OT_OK;
}

ot_status ot_tensor_create(ot_ctx *ctx, const char *name, ot_dtype dt, int ndim, const int64_t *shape,
                           ot_tensor **out) {
  return make(ctx, name, dt, ndim, shape, NULL, 0, ctx ? ctx->home_space : OT_MEM_HOST, out);
}

ot_status ot_tensor_create_lazy(ot_ctx *ctx, const char *name, ot_dtype dt, int ndim, const int64_t *shape,
                                ot_tensor **out) {
  return make(ctx, name, dt, ndim, shape, NULL, 1, ctx ? ctx->home_space : OT_MEM_HOST, out);
}

ot_status ot_tensor_create_on_file(ot_ctx *ctx, const char *name, ot_dtype dt, int ndim, const int64_t *shape,
                                   ot_disk_file *file, uint64_t off, ot_tensor **out) {
  if (!file) return ot_fail(OT_ERR_INVALID_ARG, "tensor '%s': no file", name ? name : "");
  OT_TRY(make(ctx, name, dt, ndim, shape, NULL, 1, ctx->home_space, out));
  (*out)->st->file = ot_disk_file_ref(file);
  (*out)->st->file_off = off;
  return OT_OK;
}

ot_status ot_tensor_create_in(ot_ctx *ctx, const char *name, ot_dtype dt, int ndim, const int64_t *shape,
                              ot_mem_space space, ot_tensor **out) {
  if ((unsigned)space >= OT_MEM_SPACE_COUNT || space == OT_MEM_DEVICE)
    return ot_fail(OT_ERR_INVALID_ARG, "tensor '%s': a home must be host, pinned or managed memory", name ? name : "");
  return make(ctx, name, dt, ndim, shape, NULL, 0, space, out);
}

ot_status ot_tensor_wrap(ot_ctx *ctx, const char *name, ot_dtype dt, int ndim, const int64_t *shape, void *data,
                         ot_mem_space space, ot_tensor **out) {
  if (!data) return ot_fail(OT_ERR_INVALID_ARG, "tensor '%s': wrapped data is NULL", name ? name : "");
  return make(ctx, name, dt, ndim, shape, data, 0, space, out);
}

static ot_status clone_view(const ot_tensor *t, const char *suffix, ot_tensor **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "view: out is NULL");
  *out = NULL;
  if (!t) return ot_fail(OT_ERR_INVALID_ARG, "view of a NULL tensor");
  size_t len = strlen(t->name) + strlen(suffix) + 1;
  char *nm = malloc(len);
  if (!nm) return ot_fail(OT_ERR_OUT_OF_MEMORY, "view of '%s': no host memory", t->name);
  snprintf(nm, len, "%s%s", t->name, suffix);
  ot_tensor *v = new_view(t->st, nm);
  free(nm);
  if (!v) return ot_fail(OT_ERR_OUT_OF_MEMORY, "view of '%s': no host memory", t->name);
  char *keep = v->name;
  *v = *t;
  v->name = keep;
  *out = v;
  return OT_OK;
}

ot_status ot_tensor_view_on(const ot_tensor *like, ot_storage *st, ot_tensor **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "view: out is NULL");
  *out = NULL;
  if (!like || !st) return ot_fail(OT_ERR_INVALID_ARG, "view: NULL tensor or storage");
  if (st->bytes != like->st->bytes)
    return ot_fail(OT_ERR_SHAPE, "view of '%s' on another storage: %zu bytes, its own has %zu", like->name, st->bytes,
                   like->st->bytes);
  ot_tensor *v = new_view(st, like->name);
  if (!v) return ot_fail(OT_ERR_OUT_OF_MEMORY, "view of '%s': no host memory", like->name);
  char *keep = v->name;
  *v = *like;
  v->name = keep;
  v->st = st;
  *out = v;
  return OT_OK;
}

ot_status ot_tensor_slice(const ot_tensor *t, int dim, int64_t start, int64_t len, ot_tensor **out) {
  if (out) *out = NULL;
  if (!t) return ot_fail(OT_ERR_INVALID_ARG, "slice of a NULL tensor");
  if (dim < 0 || dim >= t->ndim)
    return ot_fail(OT_ERR_SHAPE, "slice of '%s': dim %d out of range (ndim %d)", t->name, dim, t->ndim);
  if (start < 0 || len < 0 || start > t->ne[dim] - len)
    return ot_fail(OT_ERR_SHAPE, "slice of '%s': [%lld, %lld) outside dim %d of size %lld", t->name,
                   (long long)start, (long long)(start + len), dim, (long long)t->ne[dim]);
  const int blk = ot_dtype_block(t->dt);
  if (blk && dim == t->ndim - 1 && (start % blk || len % blk))
    return ot_fail(OT_ERR_SHAPE, "slice of %s '%s' would split a block of %d", ot_dtype_name(t->dt), t->name, blk);
  OT_TRY(clone_view(t, "[slice]", out));
  (*out)->ne[dim] = len;
  (*out)->off += start * t->nb[dim];
  return OT_OK;
}

ot_status ot_tensor_reshape(const ot_tensor *t, int ndim, const int64_t *shape, ot_tensor **out) {
  if (out) *out = NULL;
  if (!t) return ot_fail(OT_ERR_INVALID_ARG, "reshape of a NULL tensor");
  if (!ot_tensor_is_contiguous(t))
    return ot_fail(OT_ERR_SHAPE, "reshape of '%s': the view is not contiguous (copy it first)", t->name);
  int64_t numel;
  OT_TRY(check_shape(t->name, t->dt, ndim, shape, &numel));
  if (numel != ot_tensor_numel(t))
    return ot_fail(OT_ERR_SHAPE, "reshape of '%s': %lld elements into a shape of %lld", t->name,
                   (long long)ot_tensor_numel(t), (long long)numel);
  OT_TRY(clone_view(t, "[reshape]", out));
  int64_t off = t->off;
  set_contiguous(*out, t->dt, ndim, shape);
  (*out)->off = off;
  return OT_OK;
}

ot_status ot_tensor_transpose(const ot_tensor *t, int d0, int d1, ot_tensor **out) {
  if (out) *out = NULL;
  if (!t) return ot_fail(OT_ERR_INVALID_ARG, "transpose of a NULL tensor");
  if (d0 < 0 || d1 < 0 || d0 >= t->ndim || d1 >= t->ndim)
    return ot_fail(OT_ERR_SHAPE, "transpose of '%s': dims %d,%d out of range (ndim %d)", t->name, d0, d1, t->ndim);
  if (ot_dtype_block(t->dt) && d0 != d1)
    return ot_fail(OT_ERR_SHAPE, "transpose of %s '%s': blocks must stay along the last dim", ot_dtype_name(t->dt),
                   t->name);
  OT_TRY(clone_view(t, "[T]", out));
  int64_t e = (*out)->ne[d0], s = (*out)->nb[d0];
  (*out)->ne[d0] = (*out)->ne[d1];
  (*out)->nb[d0] = (*out)->nb[d1];
  (*out)->ne[d1] = e;
  (*out)->nb[d1] = s;
  return OT_OK;
}

void ot_tensor_destroy(ot_tensor *t) {
  if (!t) return;
  storage_release(t->st);
  free(t->name);
  free(t);
}

const char *ot_tensor_name(const ot_tensor *t) { return t ? t->name : "(null)"; }

ot_status ot_tensor_set_name(ot_tensor *t, const char *name) {
  if (!t) return ot_fail(OT_ERR_INVALID_ARG, "ot_tensor_set_name: tensor is NULL");
  char *n = dup_name(name);
  if (!n) return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_tensor_set_name: no host memory");
  free(t->name);
  t->name = n;
  return OT_OK;
}

ot_dtype ot_tensor_dtype(const ot_tensor *t) { return t->dt; }
int ot_tensor_ndim(const ot_tensor *t) { return t->ndim; }
int64_t ot_tensor_dim(const ot_tensor *t, int i) { return i >= 0 && i < t->ndim ? t->ne[i] : 1; }
int64_t ot_tensor_stride(const ot_tensor *t, int i) { return i >= 0 && i < t->ndim ? t->nb[i] : 0; }
int64_t ot_tensor_offset(const ot_tensor *t) { return t->off; }
ot_mem_space ot_tensor_home_space(const ot_tensor *t) { return t->st->space; }
ot_ctx *ot_tensor_ctx(const ot_tensor *t) { return t->st->ctx; }
size_t ot_tensor_storage_bytes(const ot_tensor *t) { return t->st->bytes; }
int ot_tensor_same_storage(const ot_tensor *a, const ot_tensor *b) { return a && b && a->st == b->st; }

int64_t ot_tensor_numel(const ot_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->ne[i];
  return n;
}

int ot_tensor_is_contiguous(const ot_tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->ne[i] != 1 && t->nb[i] != s) return 0;
    s *= t->ne[i];
  }
  return 1;
}

size_t ot_tensor_nbytes(const ot_tensor *t) { return ot_dtype_bytes(t->dt, ot_tensor_numel(t)); }

size_t ot_tensor_byte_offset(const ot_tensor *t) {
  const int blk = ot_dtype_block(t->dt);
  if (blk) return (size_t)(t->off / blk) * ot_dtype_bytes(t->dt, blk);
  return ot_dtype_bytes(t->dt, t->off);
}

void ot_tensor_byte_span(const ot_tensor *t, size_t *first, size_t *end) {
  int64_t last = t->off;
  for (int i = 0; i < t->ndim; i++) last += (t->ne[i] - 1) * t->nb[i];
  *first = ot_tensor_byte_offset(t);
  if (ot_tensor_numel(t) == 0) {
    *end = *first;
    return;
  }
  const int blk = ot_dtype_block(t->dt);
  if (blk) *end = (size_t)(last / blk + 1) * ot_dtype_bytes(t->dt, blk);
  else *end = ot_dtype_bytes(t->dt, last + 1);
}

void *ot_tensor_data(const ot_tensor *t) {
  /* a lazy home is made on first ask: the caller reads or writes it */
  if (t && !t->st->home && ot_storage_materialize(t->st) != OT_OK) return NULL;
  return t && t->st->home ? (char *)t->st->home + ot_tensor_byte_offset(t) : NULL;
}

/* Copies between the view (any strides) and a row-major f32 buffer. */
static ot_status strided_copy(const ot_tensor *t, float *buf, int64_t n, int to_tensor) {
  if (!t || !buf) return ot_fail(OT_ERR_INVALID_ARG, "tensor copy: NULL argument");
  int64_t numel = ot_tensor_numel(t);
  if (n != numel)
    return ot_fail(OT_ERR_SHAPE, "tensor '%s' has %lld elements, buffer %lld", t->name, (long long)numel, (long long)n);
  const int blk = ot_dtype_block(t->dt);
  if (t->dt != OT_F32 && t->dt != OT_F16 && t->dt != OT_BF16 && !blk)
    return ot_fail(OT_ERR_DTYPE, "tensor '%s': f32 copy of a %s tensor", t->name, ot_dtype_name(t->dt));
  if (blk) {
    /* Blocks run along the contiguous last dim: convert row by row. */
    int64_t rows = numel / t->ne[t->ndim - 1], cols = t->ne[t->ndim - 1];
    for (int64_t r = 0; r < rows; r++) {
      int64_t e = t->off, rem = r;
      for (int i = t->ndim - 2; i >= 0; i--) {
        e += (rem % t->ne[i]) * t->nb[i];
        rem /= t->ne[i];
      }
      void *p = (char *)t->st->home + (size_t)(e / blk) * ot_dtype_bytes(t->dt, blk);
      OT_TRY(to_tensor ? ot_convert(t->dt, p, OT_F32, buf + r * cols, cols)
                       : ot_convert(OT_F32, buf + r * cols, t->dt, p, cols));
    }
    return OT_OK;
  }
  size_t es = ot_dtype_bytes(t->dt, 1);
  for (int64_t k = 0; k < numel; k++) {
    int64_t e = t->off, rem = k;
    for (int i = t->ndim - 1; i >= 0; i--) {
      e += (rem % t->ne[i]) * t->nb[i];
      rem /= t->ne[i];
    }
    void *p = (char *)t->st->home + (size_t)e * es;
    if (to_tensor) ot_convert(t->dt, p, OT_F32, buf + k, 1);
    else ot_convert(OT_F32, buf + k, t->dt, p, 1);
  }
  return OT_OK;
}

ot_status ot_tensor_write_f32(ot_tensor *t, const float *src, int64_t n) {
  return strided_copy(t, (float *)src, n, 1);
}

ot_status ot_tensor_read_f32(const ot_tensor *t, float *dst, int64_t n) { return strided_copy(t, dst, n, 0); }
