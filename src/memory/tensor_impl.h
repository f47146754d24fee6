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
  int home_on;           /* 0: home is host memory. d + 1: home points, for now, into OpenMP device d's memory
                            (a micro-batched pipeline's mailbox, sched/pipeline_micro.c, swapped in for one
                            stage run): the executor copies to and from it device to device, and nothing
                            may read it on the host */
  uint64_t id;           /* unique per process, stable order for plans */
  uint64_t cache_epoch;  /* a cache (program.h): set anew each time a plan places its block */
  int lazy;              /* ot_tensor_create_lazy: home NULL until a plan (or the caller) needs it */
  struct ot_disk_file *file; /* a file home (diskfile.h): the bytes are file[file_off, + bytes); the host home,
                                if any, is a copy the plan chose to keep (sched/homes.c); lazy is set */
  uint64_t file_off;
} ot_storage;

/* Gives a lazy storage its (zeroed) home if it has none yet, a file-homed
 * one its bytes read from the file; OT_OK for any other storage. */
ot_status ot_storage_materialize(ot_storage *st);

/* A file-homed storage's host copy freed again (the file still has the
 * bytes: the next upload reads them from it). Nothing for any other. */
void ot_storage_drop_home(ot_storage *st);

/* A read-only tensor whose home is `file` at byte `off` (it must hold the
 * tensor's bytes exactly as the tensor stores them: same dtype, contiguous);
 * no host memory until a plan or a caller asks (ot_tensor_data reads it).
 * Takes a reference on the file. */
ot_status ot_tensor_create_on_file(ot_ctx *ctx, const char *name, ot_dtype dt, int ndim, const int64_t *shape,
                                   struct ot_disk_file *file, uint64_t off, ot_tensor **out);

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

/* A view with `like`'s name, dtype, shape, strides and offset on storage
 * `st`, which must have as many bytes as like's: a pipeline stage's private
 * home of a value (sched/pipeline.c). */
ot_status ot_tensor_view_on(const ot_tensor *like, ot_storage *st, ot_tensor **out);

#endif
