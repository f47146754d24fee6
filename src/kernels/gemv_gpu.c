/* gemv_gpu.c — the decode matmul on a GPU: c[m, n] = sum_k a[m, k] w[n, k]
 * for a few rows of a (M <= OT_GEMV_MAX_M) and a row-major weight W [N, K]
 * (HF Linear, trans_b), the kernel that bounds decode speed.
 *
 * Why a bare kernel: the portable team-per-output version (matmul.c) spends
 * an OpenMP parallel region and a team reduction per output element and
 * reached ~150 GB/s on the H200 (bench/RESULTS.md). Here one warp owns one
 * output row n: its 32 lanes stream W[n, :] in 16-byte vector loads (8 bf16 /
 * 8 f16 / 4 f32, or one 36-byte q8b block per lane), so a warp reads 512
 * contiguous bytes per step, fully coalesced, then reduces with shuffles. The
 * activations a [M, K] are small and stay in L1/L2. Every weight byte is read
 * once per call whatever M is, which is what a memory-bound decode needs. */
#include <ompx.h>

#include "kernels/kcommon.h"
#include "kernels/gemv_gpu.h"

#define WARPS 8 /* rows per block of 256 threads */

typedef struct __attribute__((aligned(16))) u128 {
  uint32_t x, y, z, w;
} u128;

OT_DECLARE_TARGET_BEGIN
static inline float lo16(uint32_t u, int bf) { return bf ? ot_kbf16_f32((uint16_t)u) : ot_kf16_f32((uint16_t)u); }
static inline float hi16(uint32_t u, int bf) { return bf ? ot_kbf16_f32((uint16_t)(u >> 16)) : ot_kf16_f32((uint16_t)(u >> 16)); }
static inline float u2f(uint32_t u) {
  ot_kfu x;
  x.u = u;
  return x.f;
}
OT_DECLARE_TARGET_END

int ot_kgemv_gpu_ok(const void *w, ot_dtype wdt, int64_t K, int64_t w_row_stride, int64_t M) {
  if (M < 1 || M > OT_GEMV_MAX_M) return 0;
  uintptr_t base = (uintptr_t)w;
  switch (wdt) {
  case OT_BF16:
  case OT_F16: return K % 8 == 0 && w_row_stride % 8 == 0 && base % 16 == 0;
  case OT_F32: return K % 4 == 0 && w_row_stride % 4 == 0 && base % 16 == 0;
  case OT_Q8B: return K % 32 == 0 && w_row_stride % 32 == 0 && base % 4 == 0;
  default: return 0;
  }
}

/* acc[m] += W[n, :] . a[m, :] for this lane's share of K (not yet reduced). */
OT_DECLARE_TARGET_BEGIN
static inline void row_dot(const void *w, int wt, int64_t ldw, int64_t n, const float *a, int64_t lda, int mm,
                           int64_t K, int lane, float *acc) {
  if (wt == OT_BF16 || wt == OT_F16) {
    const int bf = wt == OT_BF16;
    const u128 *row = (const u128 *)((const uint16_t *)w + n * ldw);
    /* unrolled so several 16-byte loads per lane are in flight at once */
#pragma unroll 4
    for (int64_t v = lane; v < K / 8; v += 32) {
      const u128 q = row[v];
      const float wv[8] = {lo16(q.x, bf), hi16(q.x, bf), lo16(q.y, bf), hi16(q.y, bf),
                           lo16(q.z, bf), hi16(q.z, bf), lo16(q.w, bf), hi16(q.w, bf)};
      for (int m = 0; m < mm; m++) {
        const float *x = a + m * lda + v * 8;
        float s = 0.0f;
        for (int j = 0; j < 8; j++) s += wv[j] * x[j];
        acc[m] += s;
      }
    }
  } else if (wt == OT_F32) {
    const u128 *row = (const u128 *)((const float *)w + n * ldw);
#pragma unroll 4
    for (int64_t v = lane; v < K / 4; v += 32) {
      const u128 q = row[v];
      for (int m = 0; m < mm; m++) {
        const float *x = a + m * lda + v * 4;
        acc[m] += u2f(q.x) * x[0] + u2f(q.y) * x[1] + u2f(q.z) * x[2] + u2f(q.w) * x[3];
      }
    }
  } else { /* q8b: one 36-byte block {scale, q[32]} per lane and step */
    const ot_q8b_block *row = (const ot_q8b_block *)w + n * (ldw / 32);
#pragma unroll 2
    for (int64_t b = lane; b < K / 32; b += 32) {
      const uint32_t *q = (const uint32_t *)row[b].q;
      const float sc = row[b].scale;
      for (int m = 0; m < mm; m++) {
        const float *x = a + m * lda + b * 32;
        float s = 0.0f;
        for (int j = 0; j < 8; j++) {
          const uint32_t u = q[j];
          s += (float)(int8_t)(u & 0xff) * x[4 * j] + (float)(int8_t)((u >> 8) & 0xff) * x[4 * j + 1] +
               (float)(int8_t)((u >> 16) & 0xff) * x[4 * j + 2] + (float)(int8_t)(u >> 24) * x[4 * j + 3];
        }
        acc[m] += sc * s;
      }
    }
  }
}

static inline float warp_reduce(float s) {
  for (int o = 16; o > 0; o >>= 1) s += ompx_shfl_down_sync_f(~0ull, s, (unsigned)o, 32);
  return s; /* valid in lane 0 */
}
OT_DECLARE_TARGET_END

void ot_kgemv_gpu_multi(int dev, const ot_kgemv_mat *mats, int n_mats, int swiglu, const float *a, int64_t lda,
                        int64_t M, int64_t K, int accumulate) {
  /* Up to 3 matrices sharing a and K, each with its own rows and output, in
   * one launch (q, k, v projections); with swiglu, two matrices of equal N
   * whose dot products combine as silu(g) * u into the first output (the
   * Llama MLP's gate and up in one pass, no intermediate). */
  const void *w0 = mats[0].w, *w1 = n_mats > 1 ? mats[1].w : mats[0].w, *w2 = n_mats > 2 ? mats[2].w : mats[0].w;
  float *c0 = mats[0].c, *c1 = n_mats > 1 ? mats[1].c : mats[0].c, *c2 = n_mats > 2 ? mats[2].c : mats[0].c;
  const int t0 = mats[0].wdt, t1 = n_mats > 1 ? mats[1].wdt : t0, t2 = n_mats > 2 ? mats[2].wdt : t0;
  const int64_t N0 = mats[0].N, N1 = n_mats > 1 && !swiglu ? mats[1].N : 0, N2 = n_mats > 2 ? mats[2].N : 0;
  const int64_t l0 = mats[0].ldw, l1 = n_mats > 1 ? mats[1].ldw : l0, l2 = n_mats > 2 ? mats[2].ldw : l0;
  const int64_t d0 = mats[0].ldc, d1 = n_mats > 1 ? mats[1].ldc : d0, d2 = n_mats > 2 ? mats[2].ldc : d0;
  const int64_t rows = N0 + N1 + N2, nteams = (rows + WARPS - 1) / WARPS;
  const int acc_in = accumulate, mm = (int)M, sw = swiglu;
  OT_GPU_KERNEL(dev, nteams, WARPS * 32,
                OT_DEVPTR(a, w0, w1, w2, c0, c1, c2)
                    firstprivate(lda, K, t0, t1, t2, N0, N1, l0, l1, l2, d0, d1, d2, rows, acc_in, mm, sw))
  {
    const int lane = (int)(ompx_thread_id_x() & 31), warp = (int)(ompx_thread_id_x() >> 5);
    const int64_t g = (int64_t)ompx_block_id_x() * WARPS + warp;
    if (g < rows) {
      /* which matrix and row */
      const int which = g < N0 ? 0 : g < N0 + N1 ? 1 : 2;
      const int64_t n = which == 0 ? g : which == 1 ? g - N0 : g - N0 - N1;
      const void *w = which == 0 ? w0 : which == 1 ? w1 : w2;
      float *c = which == 0 ? c0 : which == 1 ? c1 : c2;
      const int wt = which == 0 ? t0 : which == 1 ? t1 : t2;
      const int64_t ldw = which == 0 ? l0 : which == 1 ? l1 : l2, ldc = which == 0 ? d0 : which == 1 ? d1 : d2;
      float acc[OT_GEMV_MAX_M], acc2[OT_GEMV_MAX_M];
      for (int m = 0; m < OT_GEMV_MAX_M; m++) acc[m] = acc2[m] = 0.0f;
      row_dot(w, wt, ldw, n, a, lda, mm, K, lane, acc);
      if (sw) row_dot(w1, t1, l1, n, a, lda, mm, K, lane, acc2);
      for (int m = 0; m < mm; m++) {
        float s = warp_reduce(acc[m]);
        if (sw) {
          const float u = warp_reduce(acc2[m]);
          s = s / (1.0f + expf(-s)) * u;
        }
        if (lane == 0) c[m * ldc + n] = acc_in ? c[m * ldc + n] + s : s;
      }
    }
  }
}

void ot_kgemv_gpu(int dev, float *c, int64_t ldc, const float *a, int64_t lda, const void *w, ot_dtype wdt,
                  int64_t ldw, int64_t M, int64_t N, int64_t K, int accumulate) {
  ot_kgemv_mat m = {w, wdt, ldw, c, ldc, N};
  ot_kgemv_gpu_multi(dev, &m, 1, 0, a, lda, M, K, accumulate);
}
