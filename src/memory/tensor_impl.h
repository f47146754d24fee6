/* tensor_impl.h (internal) — tensor and storage fields, for the runtime.
 *
 * The storage is the unit of residency: the scheduler moves storages, and
 * a view's device address is its storage's device address plus the view's
 * byte offset. */
#ifndef OT_CORE_TENSOR_IMPL_H
#define OT_CORE_TENSOR_IMPL_H

#include "omptensor/tensor.h"

typedef struct ot_storage {
  int refs;              /* views alive */
  ot_ctx *ctx;
  void *home;            /* host address of byte 0 */
  size_t bytes;
  ot_mem_space space;
  int owned;             /* home allocated by us (freed with the storage) */
  int home_dev;          /* device that allocated a pinned/managed home */
  uint64_t id;           /* unique per process, stable order for plans */
  uint64_t cache_epoch;  /* a cache (program.h): set anew each time a plan places its block */
  int lazy;              /* ot_tensor_create_lazy: home NULL until a plan (or the caller) needs it */
} ot_storage;

/* Gives a lazy storage its (zeroed) home if it has none yet; OT_OK for any
 * other storage. */
ot_status ot_storage_materialize(ot_storage *st);

struct ot_tensor {
  ot_storage *st;
  char *name;
  ot_dtype dt;
  int ndim;
  int64_t ne[OT_MAX_DIMS];
  int64_t nb[OT_MAX_DIMS]; /* strides in elements */
  int64_t off;             /* elements from the storage start */
};

/* Byte offset of the view's element 0 within its storage. */
size_t ot_tensor_byte_offset(const ot_tensor *t);

/* Bytes of the storage range the view touches [first, last]. */
void ot_tensor_byte_span(const ot_tensor *t, size_t *first, size_t *end);

#endif
