/* rows_gpu.h (internal to src/kernels) — block-per-row GPU kernels for the
 * norms and softmax in the dtype combinations that warp_gpu.c's f32 kernel
 * does not take (see rows_gpu.c). Callers check eligibility with
 * ot_krows8_ok and pick a combination with ot_knorm8_pick /
 * ot_ksoftmax8_pick; everything else takes the portable kernels, which
 * remain the reference behaviour. */
#ifndef OT_KERNELS_ROWS_GPU_H
#define OT_KERNELS_ROWS_GPU_H

#include <stdint.h>

#include "ot_pragmas.h"

/* Rows of up to this many elements are held in registers (one read). */
#define OT_KROWS8_MAX_D 8192

/* A row layout for the kernels: rows = n0 * n1 * n2 flattened as
 * ot_krow_off over strides s[0..2] (elements); the last dim has unit stride. */
typedef struct ot_krows8 {
  int64_t rows, d, n1, n2;
  int64_t xs[3], ys[3];
} ot_krows8;

/* Whether rows of x and y (dtypes xdt, ydt; 4-D extents ne and strides xs,
 * ys with xs[3] == ys[3] == 1 checked here) can take the kernels: a GPU
 * device, d % 8 == 0, d <= OT_KROWS8_MAX_D, every row start 16-byte aligned,
 * vec (w, b: NULL if none, dtype vdt, stride vs) too. */
int ot_krows8_ok(int dev, int xdt, const void *x, const int64_t *xs, int ydt, const void *y, const int64_t *ys,
                 const int64_t *ne, int vdt, const void *w, const void *b, int64_t vs);

/* Index of the kernel for x, w (and b), y dtypes, or -1 when none. */
int ot_knorm8_pick(int xdt, int wdt, int ydt);
/* y = norm(x) * w (+ b for LayerNorm) per row: the formulas of norm.c. */
void ot_knorm8_gpu(int dev, int pick, int layer, void *y, const void *x, const void *w, const void *b,
                   const ot_krows8 *rl, float eps);

/* Index of the kernel for x, y dtypes, or -1 when none. */
int ot_ksoftmax8_pick(int xdt, int ydt);
/* y = softmax(scale * x) per row, causal as softmax.c (rows r % S of dim -2,
 * S = rl->n2). */
void ot_ksoftmax8_gpu(int dev, int pick, void *y, const void *x, const ot_krows8 *rl, float scale, int causal);

/* Columns of row r that take part in the softmax: all, or with the causal
 * mask the query i = r % S (dim -2) sees keys j <= i + (n - S) (queries are
 * the last S positions of n keys). At least one column remains when n >= S. */
OT_DECLARE_TARGET_BEGIN
static inline int64_t ot_ksm_ncols(int causal, int64_t r, int64_t S, int64_t n) {
  if (!causal) return n;
  int64_t lim = r % S + (n - S) + 1;
  return lim < 0 ? 0 : lim > n ? n : lim;
}
OT_DECLARE_TARGET_END

#endif
