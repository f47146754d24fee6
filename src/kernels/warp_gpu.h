/* warp_gpu.h (internal to src/kernels) — warp-per-row GPU kernels for the
 * decode shapes (see warp_gpu.c). Callers check eligibility: GPU device, f32,
 * unit last stride. */
#ifndef OT_KERNELS_WARP_GPU_H
#define OT_KERNELS_WARP_GPU_H

#include <stdint.h>

#include "kernels/kernels.h"

#define OT_KATTN_MAX_D 256

/* Whether ot_knorm_gpu takes these rows (16-byte aligned, d % 4 == 0, d <= 8192). */
int ot_knorm_gpu_ok(const void *y, int64_t ys, const void *x, int64_t xs, const void *w, const void *b, int64_t d);

/* y[r, :] = norm(x[r, :]) * w (+ b for LayerNorm), rows with strides ys, xs;
 * one block per row. */
void ot_knorm_gpu(int dev, int layer, float *y, int64_t ys, const float *x, int64_t xs, const float *w, const float *b,
                  int64_t rows, int64_t d, float eps);

/* Causal GQA attention over caches k, v [max_seq, KVH, D] of dtype kvdt
 * (f32, bf16 or f16: ot_kattn_gpu_ok) for q, out [S, H, D] f32 (strides
 * given for dims 0 and 1; dim 2 is unit), D % OT_WARP_SIZE == 0; window > 0:
 * a row sees its last `window` keys only (ot_k_attention_window). */
void ot_kattn_gpu(int dev, float *out, int64_t o0, int64_t o1, const float *q, int64_t q0, int64_t q1, const void *k,
                  int64_t k0, int64_t k1, const void *v, int64_t v0, int64_t v1, int kvdt, int64_t S, int64_t H,
                  int64_t KVH, int64_t D, int64_t pos, int64_t window);
/* The same for rows of several sequences (attention_rows.c): row s of q
 * [S, H, D] is (slot, position) rows[s * r0], rows[s * r0 + r1] of caches
 * [NS, P, KVH, D] (slot strides ks, vs; position and head strides k0, k1,
 * v0, v1); a row outside them gives 0. out [S, H, D] of dtype odt (f32,
 * bf16 or f16); the slot strides keep every cache row 16-byte aligned. */
void ot_kattn_rows_gpu(int dev, void *out, int odt, int64_t o0, int64_t o1, const float *q, int64_t q0, int64_t q1,
                       const void *k, int64_t ks, int64_t k0, int64_t k1, const void *v, int64_t vs, int64_t v0,
                       int64_t v1, int kvdt, int64_t S, int64_t H, int64_t NS, int64_t P, int64_t KVH, int64_t D,
                       const int32_t *rows, int64_t r0, int64_t r1, int64_t window);
/* Whether a cache (dtype, base, strides of dims 0 and 1 in elements) is
 * one the warp attention reads: f32, bf16 or f16, every row 16-byte aligned. */
int ot_kattn_gpu_ok(int kvdt, const void *k, int64_t k0, int64_t k1, int64_t D);
/* Whether ot_kattn_rows_gpu takes out, q [S, H, D] and caches [NS, P, KV, D]
 * (attention_rows.c): f32 queries, one cache dtype, a 32/16-bit output,
 * unit inner strides, 16-byte aligned cache rows and slots. */
int ot_kattn_rows_gpu_ok(ot_kview out, ot_kview q, ot_kview kc, ot_kview vc);

/* The cache reads of the warp attention kernels (ot_kattn_gpu and the step
 * kernel's), written once, as macros (docs/writing-a-kernel.md):
 * OT_KKV_DOT adds to `dot` the cache row at element offset `off` of
 * (kvdt, k) dotted with qs[0 .. dd) (floats, 16-byte aligned), 8 elements a
 * load, in the f32 kernel's order (4 products summed, then added);
 * OT_KKV_LD is element i of a cache as f32. */
#define OT_KKV_DOT(dot, kvdt, k, off, qs, dd)                                                                 \
  do {                                                                                                        \
    for (int d_ = 0; d_ < (dd); d_ += OT_KV) {                                                                \
      float kv_[OT_KV];                                                                                       \
      if ((kvdt) == OT_F32) ot_kld8_f32((k), (off) + d_, kv_);                                                \
      else if ((kvdt) == OT_BF16) ot_kld8_bf16((k), (off) + d_, kv_);                                         \
      else ot_kld8_f16((k), (off) + d_, kv_);                                                                 \
      const ot_kf32x4 qa_ = *(const ot_kf32x4 *)((qs) + d_), qb_ = *(const ot_kf32x4 *)((qs) + d_ + 4);      \
      (dot) += kv_[0] * qa_.x + kv_[1] * qa_.y + kv_[2] * qa_.z + kv_[3] * qa_.w;                             \
      (dot) += kv_[4] * qb_.x + kv_[5] * qb_.y + kv_[6] * qb_.z + kv_[7] * qb_.w;                             \
    }                                                                                                         \
  } while (0)
#define OT_KKV_LD(kvdt, p, i)                                                                                 \
  ((kvdt) == OT_F32 ? ot_ld_f32((p), (i)) : (kvdt) == OT_BF16 ? ot_ld_bf16((p), (i)) : ot_ld_f16((p), (i)))

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
