/* warp_gpu.h (internal to src/kernels) — warp-per-row GPU kernels for the
 * decode shapes (see warp_gpu.c). Callers check eligibility: GPU device, f32,
 * unit last stride. */
#ifndef OT_KERNELS_WARP_GPU_H
#define OT_KERNELS_WARP_GPU_H

#include <stdint.h>

#define OT_KATTN_MAX_D 256

/* Whether ot_knorm_gpu takes these rows (16-byte aligned, d % 4 == 0, d <= 8192). */
int ot_knorm_gpu_ok(const void *y, int64_t ys, const void *x, int64_t xs, const void *w, const void *b, int64_t d);

/* y[r, :] = norm(x[r, :]) * w (+ b for LayerNorm), rows with strides ys, xs;
 * one block per row. */
void ot_knorm_gpu(int dev, int layer, float *y, int64_t ys, const float *x, int64_t xs, const float *w, const float *b,
                  int64_t rows, int64_t d, float eps);

/* Causal GQA attention over caches k, v [max_seq, KVH, D] for q, out
 * [S, H, D] (strides given for dims 0 and 1; dim 2 is unit), D % OT_WARP_SIZE == 0. */
void ot_kattn_gpu(int dev, float *out, int64_t o0, int64_t o1, const float *q, int64_t q0, int64_t q1, const float *k,
                  int64_t k0, int64_t k1, const float *v, int64_t v0, int64_t v1, int64_t S, int64_t H, int64_t KVH,
                  int64_t D, int64_t pos);

/* The row passes of the norm backward (norm_bwd.c): write_dx 0: dx = xhat;
 * 1: dx = the input gradient. Rows flattened as ot_krow_off over [4] strides. */
typedef struct ot_knorm_bwd_gpu_args {
  int layer, write_dx;
  float eps;
  int64_t rows, d, n1, n2;
  const void *x, *g, *w; /* x, g (dy) [rows, d]; w [d] with stride ws */
  int64_t ws;
  void *dx;
  int xdt, gdt, wdt, ddt; /* f32, f16 or bf16 each */
  int64_t xs[4], gs[4], ds[4];
} ot_knorm_bwd_gpu_args;
void ot_knorm_bwd_gpu(int dev, const ot_knorm_bwd_gpu_args *a);
/* The same for rows held in registers: unit column strides, 16-byte aligned
 * rows, d % 8 == 0, d <= 1024, dy in x's dtype, w f32 or x's dtype. 0 (and
 * nothing run) when the arguments do not fit. */
int ot_knorm_bwd8_gpu(int dev, const ot_knorm_bwd_gpu_args *a);

#endif
