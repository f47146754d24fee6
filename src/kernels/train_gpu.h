/* train_gpu.h (internal to src/kernels) — GPU fast paths of the training
 * kernels that are neither GEMMs nor attention: column sums (bias and norm
 * parameter gradients), cross-entropy rows, the multi-tensor AdamW. Each
 * returns 0 without doing anything when it does not take the arguments (not
 * an nvptx GPU, a layout it does not handle); the caller then runs the
 * portable kernel. The portable kernels and the ot_ref_* references stay
 * the definitions; these compute the same formulas, sums in other fixed
 * orders (AdamW: the same bits). */
#ifndef OT_KERNELS_TRAIN_GPU_H
#define OT_KERNELS_TRAIN_GPU_H

#include "kernels/colsum.h"
#include "kernels/optim_elem.h"

/* Whether the fast training paths may run on dev: ot_kfast_gpu(dev) and not
 * switched off by ot_ktrain_fast_set(0) (the benchmark's old-against-new
 * comparison; the default is on). */
int ot_ktrain_fast(int dev);
void ot_ktrain_fast_set(int on);

/* ot_kcolsum on a GPU: rows flattened over n1, n2 must have one row stride
 * per operand (a [rows, d] layout, any column stride). */
int ot_kcolsum_gpu(int dev, int64_t rows, int64_t d, int64_t n1, int64_t n2, ot_kcs_view a, ot_kcs_view b, int pdt,
                   void *prod, int64_t ps, int sdt, void *sum, int64_t ss);

/* Cross-entropy rows (loss.c's second pass) on a GPU, a block per row:
 * losses[r * s0] = lse - l[t]; dlogits row (if dp) = gs / cnt[0] * (softmax
 * - onehot), 0 for an ignored row. logits and dlogits have unit column
 * stride; dlogits may be logits (in place). */
typedef struct ot_kce_gpu_args {
  int64_t rows, n, l0, d0, t0, s0;
  int ldt, ddt;
  const void *lp;
  const int32_t *tp;
  void *dp; /* NULL: loss only */
  float *sp;
  const float *cnt; /* [1]: the count of rows not ignored (device) */
  float gs;
} ot_kce_gpu_args;
int ot_kce_rows_gpu(int dev, const ot_kce_gpu_args *a);

/* The AdamW update of n flat f32 tensors (optim.c's aw_elem on every
 * element) in a few launches: operands contiguous; copies may be absent
 * (cp[i] NULL); s the step's scalars (optim_elem.h). */
int ot_kadamw_multi_gpu(int dev, int n, float *const *p, const void *const *g, const int *gdt, float *const *m,
                        float *const *v, void *const *cp, const int *cdt, const int64_t *ne, ot_kaw_scal s);

#endif
