/* tensor.h — tensors: dtype, shape, strides, name, and a home in host memory.
 *
 * A tensor is a view (dtype, up to 4 dims, strides in elements, an element
 * offset) of a storage: the bytes, whose *home* is host memory (pageable,
 * pinned or managed, by the context's backend) and which may have a device
 * copy while the scheduler needs one. Views (slice, reshape, transpose)
 * share the storage and never copy; the storage lives until its last view is
 * destroyed.
 *
 * Shapes are listed outermost first, like NumPy/PyTorch: a [rows, cols]
 * row-major matrix has strides {cols, 1}.
 *
 * Block-quantized tensors (OT_Q8B, OT_Q4B): the last dim must be contiguous
 * and a multiple of 32, and
 * views may not split a block.
 */
#ifndef OMPTENSOR_TENSOR_H
#define OMPTENSOR_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/context.h"
#include "omptensor/dtype.h"
#include "omptensor/memory.h"
#include "omptensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OT_MAX_DIMS 4

typedef struct ot_tensor ot_tensor;

/* A new contiguous tensor whose home is in the context's home space (pinned
 * for the map backend, managed for usm, host otherwise); contents are zero.
 * `name` is copied; it names the tensor in errors and traces. */
ot_status ot_tensor_create(ot_ctx *ctx, const char *name, ot_dtype dt, int ndim,
                           const int64_t *shape, ot_tensor **out);

/* Same, with an explicit home space. */
ot_status ot_tensor_create_in(ot_ctx *ctx, const char *name, ot_dtype dt, int ndim,
                              const int64_t *shape, ot_mem_space space, ot_tensor **out);

/* Same as ot_tensor_create, but the home is allocated only when needed:
 * when a plan moves the tensor between home and device (an upload, a
 * write-back, an eviction of a live copy), a host op or the caller uses it
 * (ot_tensor_data), it is marked input, output or persistent, or the
 * backend computes on homes (host, usm). An activation that lives and dies
 * on the device never takes host memory (ot_sched_plan). */
ot_status ot_tensor_create_lazy(ot_ctx *ctx, const char *name, ot_dtype dt, int ndim,
                                const int64_t *shape, ot_tensor **out);

/* A tensor over caller-owned memory (e.g. an mmap of a checkpoint). The
 * memory must outlive the tensor; `space` says what kind it is. */
ot_status ot_tensor_wrap(ot_ctx *ctx, const char *name, ot_dtype dt, int ndim,
                         const int64_t *shape, void *data, ot_mem_space space, ot_tensor **out);

/* Views: share storage, no copy. The result must be destroyed too. */
ot_status ot_tensor_slice(const ot_tensor *t, int dim, int64_t start, int64_t len, ot_tensor **out);
ot_status ot_tensor_reshape(const ot_tensor *t, int ndim, const int64_t *shape, ot_tensor **out);
ot_status ot_tensor_transpose(const ot_tensor *t, int d0, int d1, ot_tensor **out);

void ot_tensor_destroy(ot_tensor *t); /* NULL is fine */

const char *ot_tensor_name(const ot_tensor *t);
ot_status ot_tensor_set_name(ot_tensor *t, const char *name);
ot_dtype ot_tensor_dtype(const ot_tensor *t);
int ot_tensor_ndim(const ot_tensor *t);
int64_t ot_tensor_dim(const ot_tensor *t, int i);     /* 1 for i >= ndim */
int64_t ot_tensor_stride(const ot_tensor *t, int i);  /* elements; 0 for i >= ndim */
int64_t ot_tensor_offset(const ot_tensor *t);         /* elements from the storage start */
int64_t ot_tensor_numel(const ot_tensor *t);
int ot_tensor_is_contiguous(const ot_tensor *t);
size_t ot_tensor_nbytes(const ot_tensor *t);          /* numel * element size */
size_t ot_tensor_storage_bytes(const ot_tensor *t);   /* the whole storage */
ot_mem_space ot_tensor_home_space(const ot_tensor *t);
ot_ctx *ot_tensor_ctx(const ot_tensor *t);

/* Host address of element 0 of this view in its home. The home holds the
 * truth only while the tensor is not dirty on a device: the scheduler writes
 * device results home before a program run returns. */
void *ot_tensor_data(const ot_tensor *t);

/* Copies between a contiguous f32 host buffer of numel values and the view
 * (any strides), converting dtypes. */
ot_status ot_tensor_write_f32(ot_tensor *t, const float *src, int64_t n);
ot_status ot_tensor_read_f32(const ot_tensor *t, float *dst, int64_t n);

/* True if both views share a storage. */
int ot_tensor_same_storage(const ot_tensor *a, const ot_tensor *b);

#ifdef __cplusplus
}
#endif
#endif
