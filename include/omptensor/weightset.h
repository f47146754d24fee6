/* weightset.h — the weights of a model: loaded from a checkpoint (or
 * made synthetic), counted, destroyed together. */
#ifndef OMPTENSOR_WEIGHTSET_H
#define OMPTENSOR_WEIGHTSET_H

#include "omptensor/lm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ot_wset {
  ot_ctx *ctx;
  const ot_ckpt *ck;       /* NULL: synthetic */
  uint64_t seed;           /* synthetic weights: base seed */
  ot_tlist t;              /* the weights */
  uint64_t bytes;          /* bytes of all homes */
  uint64_t total;          /* expected bytes, for progress */
  ot_progress_fn progress;
  void *user;
  int dry;                 /* check names, shapes and dtypes only: tensors wrap no data */
} ot_wset;

/* Adds weight `name` [shape] in dtype dt: read from the checkpoint, or, if
 * synthetic, uniform in [-scale, scale] (`scale` < 0 means 1 + uniform(|scale|),
 * for norm weights). Names are formatted printf-style from fmt. */
ot_status ot_wset_add(ot_wset *w, ot_dtype dt, int ndim, const int64_t *shape, float scale, ot_tensor **out,
                      const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* Same, but the tensor is optional in a checkpoint: *out stays NULL when absent. */
ot_status ot_wset_add_optional(ot_wset *w, ot_dtype dt, int ndim, const int64_t *shape, ot_tensor **out,
                               const char *name);

void ot_wset_destroy(ot_wset *w);

/* The weight dtype for matmul weights: `want`, or the checkpoint's own dtype
 * of tensor `probe` when want is OT_DTYPE_KEEP (f32 when synthetic); for a
 * GGUF checkpoint OT_DTYPE_KEEP itself (its tensors mix types: each is
 * kept in its own, ot_lm_weight_dtype). */
ot_dtype ot_wset_matmul_dtype(const ot_wset *w, ot_dtype want, const char *probe);

/* The bytes of every tensor in the checkpoint (0 when synthetic). */
uint64_t ot_wset_ckpt_bytes(const ot_wset *w);

#ifdef __cplusplus
}
#endif
#endif
