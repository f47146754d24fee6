/* gemv_gpu.c — the decode matmul on a GPU: c[m, n] = sum_k a[m, k] w[n, k]
 * for a few rows of a (M <= OT_GEMV_MAX_M: decode, or a batch of sequences
 * decoding together) and a row-major weight W [N, K]
 * (HF Linear, trans_b), the kernel that bounds decode speed.
 *
 * Why a bare kernel: the portable team-per-output version (matmul.c) spends
 * an OpenMP parallel region and a team reduction per output element and
 * reached ~150 GB/s on the H200 (bench/RESULTS.md). Here one warp owns one
 * output row n: its 32 lanes stream W[n, :] in 16-byte vector loads (8 bf16 /
 * 8 f16 / 4 f32, or one 36-byte q8b block per lane), so a warp reads 512
 * contiguous bytes per step, fully coalesced, then reduces with shuffles.
 * 4-bit weights (q4b, q4k) have an M = 1 kernel of their own (gemv1_q4). The
 * activations a [M, K] are small and stay in L1/L2. Every weight byte is read
 * once per call whatever M is, which is what a memory-bound decode needs.
 *
 * Tried on the H200 (2026-12-01, issue 15): four loads per lane issued
 * before use, the dot product in a static inline helper, to put more bytes
 * in flight for weights read in place over PCIe: every output came out 0
 * (the helper-in-a-bare-kernel miscompile noted in ot_kgemv_gpu_multi), so
 * the loop stays as it is; remote decode reads at ~40-43 GB/s with it. */
#include <stdlib.h>

#include "core/env.h"
#include "kernels/kcommon.h"
#include "kernels/gemv_gpu.h"
#include "kernels/qgroup.h"
#include "ot_gpu.h"

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
  /* 4-bit blocks: the M = 1 kernel only (gemv1; batches take the portable one) */
  case OT_Q4B: return M == 1 && K % 32 == 0 && w_row_stride % 32 == 0 && base % 2 == 0;
  case OT_Q4K: return M == 1 && K % 256 == 0 && w_row_stride % 256 == 0 && base % 16 == 0;
  default: return 0;
  }
}

/* One lane's share of a 16-byte weight vector q against 8 (4 for f32)
 * activations at x, added to acc. Macros, not helpers: a helper called from
 * a bare kernel miscompiled (see the top). */
#define DOT8_16(acc, q, xp, bf)                                                                                  \
  (acc) += lo16((q).x, bf) * (xp)[0] + hi16((q).x, bf) * (xp)[1] + lo16((q).y, bf) * (xp)[2] +                   \
           hi16((q).y, bf) * (xp)[3] + lo16((q).z, bf) * (xp)[4] + hi16((q).z, bf) * (xp)[5] +                   \
           lo16((q).w, bf) * (xp)[6] + hi16((q).w, bf) * (xp)[7]
#define DOT4_32(acc, q, xp)                                                                                      \
  (acc) += u2f((q).x) * (xp)[0] + u2f((q).y) * (xp)[1] + u2f((q).z) * (xp)[2] + u2f((q).w) * (xp)[3]

/* bf16 -> f32 of the low and high halves of a 32-bit word: shifts, no
 * dtype test per element (the shared lo16/hi16 pick bf16 or f16 per call
 * of the macro, which made bf16 half the speed of f32 on the H200) */
#define BFLO(u) u2f((u) << 16)
#define BFHI(u) u2f((u)&0xffff0000u)
#define DOT8_BF(acc, q, xp)                                                                                     \
  (acc) += BFLO((q).x) * (xp)[0] + BFHI((q).x) * (xp)[1] + BFLO((q).y) * (xp)[2] + BFHI((q).y) * (xp)[3] +      \
           BFLO((q).z) * (xp)[4] + BFHI((q).z) * (xp)[5] + BFLO((q).w) * (xp)[6] + BFHI((q).w) * (xp)[7]

#define DOT8_F16(acc, q, xp) DOT8_16(acc, q, xp, 0)

/* One row n of gemv1 for weights of element type T, ELEMS per 16-byte
 * vector, DOT adding one vector's products: four vectors per lane in flight,
 * then the rest one at a time (a macro for the reason above). */
#define GEMV1_ROW(T, ELEMS, DOT)                                                                                \
  do {                                                                                                          \
    const u128 *row = (const u128 *)((const T *)w + n * ldw);                                                   \
    const int64_t nv = K / (ELEMS);                                                                             \
    int64_t v = lane;                                                                                           \
    for (; v + 3 * OT_WARP_SIZE < nv; v += 4 * OT_WARP_SIZE) {                                                  \
      const u128 q0 = row[v], q1 = row[v + OT_WARP_SIZE];                                                       \
      const u128 q2 = row[v + 2 * OT_WARP_SIZE], q3 = row[v + 3 * OT_WARP_SIZE];                                \
      DOT(s0, q0, a + v * (ELEMS));                                                                             \
      DOT(s1, q1, a + (v + OT_WARP_SIZE) * (ELEMS));                                                            \
      DOT(s2, q2, a + (v + 2 * OT_WARP_SIZE) * (ELEMS));                                                        \
      DOT(s3, q3, a + (v + 3 * OT_WARP_SIZE) * (ELEMS));                                                        \
    }                                                                                                           \
    for (; v < nv; v += OT_WARP_SIZE) {                                                                         \
      const u128 q0 = row[v];                                                                                   \
      DOT(s0, q0, a + v * (ELEMS));                                                                             \
    }                                                                                                           \
  } while (0)

/* Debugging knobs for measuring the decode GEMV on a GPU (read once):
 * OMPTENSOR_GEMV_GRID=B caps the grid at B blocks, each block's warps then
 * stride over the rows (0, the default: one row per warp);
 * OMPTENSOR_GEMV_M1=0 sends M = 1 to the M-row kernel (the one before);
 * OMPTENSOR_GEMV_QG=1 sends q8b and q4b rows of whole groups to gemv1_qg. */

/* M = 1 (a decode step): the accumulator in a register (the M-row kernel
 * keeps acc[] in local memory: its row count is a run-time value), and four
 * 16-byte loads per lane issued before any is used, so a warp has 2 KiB in
 * flight instead of 512 B; the remainder one vector at a time. */
static void gemv1(int dev, float *c, const float *a, const void *w, int wt, int64_t ldw, int64_t N, int64_t K,
                  int acc_in) {
  static int64_t cap = -1;
  if (cap < 0) cap = ot_env_int("OMPTENSOR_GEMV_GRID", 0);
  const int64_t rows_blocks = (N + WARPS - 1) / WARPS;
  const int64_t nteams = cap > 0 && cap < rows_blocks ? cap : rows_blocks;
  OT_GPU_KERNEL(dev, nteams, WARPS * OT_WARP_SIZE, OT_DEVPTR(c, a, w) firstprivate(ldw, N, K, wt, acc_in, nteams))
  {
    const int lane = OT_WARP_LANE(OT_GPU_THREAD_ID()), warp = OT_WARP_INDEX(OT_GPU_THREAD_ID());
    for (int64_t n = (int64_t)OT_GPU_BLOCK_ID() * WARPS + warp; n < N; n += nteams * WARPS) {
      float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
      if (wt == OT_BF16) GEMV1_ROW(uint16_t, 8, DOT8_BF);
      else if (wt == OT_F16) GEMV1_ROW(uint16_t, 8, DOT8_F16);
      else if (wt == OT_F32) GEMV1_ROW(float, 4, DOT4_32);
      else { /* q8b: one 36-byte block per lane and step */
        const ot_q8b_block *row = (const ot_q8b_block *)w + n * (ldw / 32);
        for (int64_t b = lane; b < K / 32; b += OT_WARP_SIZE) {
          const uint32_t *q = (const uint32_t *)row[b].q;
          const float sc = row[b].scale;
          const float *x = a + b * 32;
          float t = 0.0f;
          for (int j = 0; j < 8; j++) {
            const uint32_t u = q[j];
            t += (float)(int8_t)(u & 0xff) * x[4 * j] + (float)(int8_t)((u >> 8) & 0xff) * x[4 * j + 1] +
                 (float)(int8_t)((u >> 16) & 0xff) * x[4 * j + 2] + (float)(int8_t)(u >> 24) * x[4 * j + 3];
          }
          s0 += sc * t;
        }
      }
      float s = (s0 + s1) + (s2 + s3);
      for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) s += OT_WARP_SHFL_DOWN(s, o);
      if (lane == 0) c[n] = acc_in ? c[n] + s : s;
    }
  }
}

/* 4-bit weights (q4b, q4k), M = 1. Why its own kernel: a 4-bit weight byte
 * multiplies two activations, so with one row per warp a lane read 7-8x as
 * many activation bytes (from L1/L2) as weight bytes, and that, not HBM,
 * set the speed (q4b at ~110 GB/s resident on the H200, below bf16's
 * ~870). Here a warp owns Q4_ROWS rows: each lane loads its stretch of the
 * activations into registers once and applies it to every row. q4b: one
 * 18-byte block per lane and row (2-byte loads: blocks are 2-aligned);
 * q4k: a quarter of a 144-byte super-block per lane (two 16-byte loads),
 * sum(ds q x - dm x) = ds sum(q x) - dm sum(x), sum(x) shared by the rows. */
#define Q4_ROWS 4
static void gemv1_q4(int dev, float *c, const float *a, const void *w, int wt, int64_t ldw, int64_t N, int64_t K,
                     int acc_in) {
  const int64_t nteams = (N + WARPS * Q4_ROWS - 1) / (WARPS * Q4_ROWS);
  OT_GPU_KERNEL(dev, nteams, WARPS * OT_WARP_SIZE, OT_DEVPTR(c, a, w) firstprivate(ldw, N, K, wt, acc_in))
  {
    const int lane = OT_WARP_LANE(OT_GPU_THREAD_ID()), warp = OT_WARP_INDEX(OT_GPU_THREAD_ID());
    const int64_t n0 = ((int64_t)OT_GPU_BLOCK_ID() * WARPS + warp) * Q4_ROWS;
    if (n0 < N) {
      const int nr = N - n0 < Q4_ROWS ? (int)(N - n0) : Q4_ROWS;
      float acc[Q4_ROWS];
      for (int r = 0; r < Q4_ROWS; r++) acc[r] = 0.0f;
      if (wt == OT_Q4B) {
        const int64_t rb = ldw / 32;
        for (int64_t b = lane; b < K / 32; b += OT_WARP_SIZE) {
          float xv[32];
          for (int j = 0; j < 32; j++) xv[j] = a[b * 32 + j];
          for (int r = 0; r < Q4_ROWS; r++)
            if (r < nr) {
              const ot_q4b_block *blk = (const ot_q4b_block *)w + (n0 + r) * rb + b;
              const uint16_t *q = (const uint16_t *)blk->qs;
              float t = 0.0f;
              for (int j = 0; j < 8; j++) { /* bytes 2j, 2j+1: values 2j, 2j+1 (low nibbles), 2j+16, 2j+17 (high) */
                const uint32_t u = q[j];
                t += (float)((int)(u & 15) - 8) * xv[2 * j] + (float)((int)((u >> 8) & 15) - 8) * xv[2 * j + 1] +
                     (float)((int)((u >> 4) & 15) - 8) * xv[2 * j + 16] +
                     (float)((int)((u >> 12) & 15) - 8) * xv[2 * j + 17];
              }
              acc[r] += ot_kf16_f32(blk->d) * t;
            }
        }
      } else { /* q4k */
        const int64_t rb = ldw / 256;
        const int qc = lane & 3; /* the lane's 64 values: sub-blocks 2 qc (low nibbles) and 2 qc + 1 (high) */
        const int s_lo = 2 * qc, s_hi = 2 * qc + 1;
        for (int64_t b = lane >> 2; b < K / 256; b += OT_WARP_SIZE / 4) {
          float xl[32], xh[32], sl = 0.0f, sh = 0.0f;
          for (int j = 0; j < 32; j++) {
            xl[j] = a[b * 256 + 64 * qc + j], xh[j] = a[b * 256 + 64 * qc + 32 + j];
            sl += xl[j], sh += xh[j];
          }
          for (int r = 0; r < Q4_ROWS; r++)
            if (r < nr) {
              const ot_q4k_block *blk = (const ot_q4k_block *)w + (n0 + r) * rb + b;
              const u128 q0 = ((const u128 *)blk->qs)[2 * qc], q1 = ((const u128 *)blk->qs)[2 * qc + 1];
              const uint8_t *sc = blk->scales;
              const int sc0 = s_lo < 4 ? sc[s_lo] & 63 : (sc[s_lo + 4] & 0xF) | ((sc[s_lo - 4] >> 6) << 4);
              const int m0 = s_lo < 4 ? sc[s_lo + 4] & 63 : (sc[s_lo + 4] >> 4) | ((sc[s_lo] >> 6) << 4);
              const int sc1 = s_hi < 4 ? sc[s_hi] & 63 : (sc[s_hi + 4] & 0xF) | ((sc[s_hi - 4] >> 6) << 4);
              const int m1 = s_hi < 4 ? sc[s_hi + 4] & 63 : (sc[s_hi + 4] >> 4) | ((sc[s_hi] >> 6) << 4);
              const uint32_t u[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
              float tl = 0.0f, th = 0.0f;
              for (int j = 0; j < 8; j++)
                for (int k = 0; k < 4; k++) {
                  const uint32_t byte = (u[j] >> (8 * k)) & 0xff;
                  tl += (float)(byte & 15) * xl[4 * j + k];
                  th += (float)(byte >> 4) * xh[4 * j + k];
                }
              const float d = ot_kf16_f32(blk->d), dmin = ot_kf16_f32(blk->dmin);
              acc[r] += (d * (float)sc0 * tl - dmin * (float)m0 * sl) + (d * (float)sc1 * th - dmin * (float)m1 * sh);
            }
        }
      }
      for (int r = 0; r < Q4_ROWS; r++)
        if (r < nr) {
          float s = acc[r];
          for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) s += OT_WARP_SHFL_DOWN(s, o);
          if (lane == 0) c[n0 + r] = acc_in ? c[n0 + r] + s : s;
        }
    }
  }
}

/* M = 1, q8b or q4b rows read 16 bytes a lane in 144-byte groups
 * (qgroup.h: 27 lanes a warp, three groups per load) instead of gemv1's
 * 36-byte block per lane (4-byte loads) and gemv1_q4's 2-byte ones; q4b
 * rows in fours, sharing each piece's activations as gemv1_q4 does. Off
 * until measured on a GPU: OMPTENSOR_GEMV_QG=1 turns it on (the step
 * kernel's counterpart is its ST_QG build). */
#define QG_Q4_ROWS 4
static int qg_ok(ot_dtype wdt, const void *w, const float *a, int64_t K, int64_t ldw) {
  return (wdt == OT_Q8B || wdt == OT_Q4B) && OT_QG_ROWS_OK(wdt == OT_Q8B, w, K, ldw) && (uintptr_t)a % 16 == 0;
}
static void gemv1_qg(int dev, float *c, const float *a, const void *w, int q8, int64_t ldw, int64_t N, int64_t K,
                     int acc_in) {
  const int rows = q8 ? 1 : QG_Q4_ROWS;
  const int64_t nteams = (N + WARPS * rows - 1) / (WARPS * rows);
  OT_GPU_KERNEL(dev, nteams, WARPS * OT_WARP_SIZE, OT_DEVPTR(c, a, w) firstprivate(ldw, N, K, q8, rows, acc_in))
  {
    const int lane = OT_WARP_LANE(OT_GPU_THREAD_ID()), warp = OT_WARP_INDEX(OT_GPU_THREAD_ID());
    const int64_t n0 = ((int64_t)OT_GPU_BLOCK_ID() * WARPS + warp) * rows;
    if (n0 < N) { /* the whole warp or none of it: the loops shuffle */
      const int nr = N - n0 < rows ? (int)(N - n0) : rows;
      const ot_qg_lane L = ot_qg_lane_init(q8, lane);
      float acc[QG_Q4_ROWS] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (q8) {
        float s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        OT_QG_ROW8(L, 8, acc[0], s1, s2, s3, w, ldw, n0, a, K);
        acc[0] = (acc[0] + s1) + (s2 + s3);
      } else {
        OT_QG_ROWS4(L, 2, QG_Q4_ROWS, acc, w, ldw, n0, nr, a, K);
      }
      OT_UNROLL for (int r = 0; r < QG_Q4_ROWS; r++) {
        float s = acc[r];
        for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) s += OT_WARP_SHFL_DOWN(s, o);
        if (r < nr && lane == 0) c[n0 + r] = acc_in ? c[n0 + r] + s : s;
      }
    }
  }
}

void ot_kgemv_gpu(int dev, float *c, int64_t ldc, const float *a, int64_t lda, const void *w, ot_dtype wdt,
                  int64_t ldw, int64_t M, int64_t N, int64_t K, int accumulate) {
  static int64_t m1 = -1, qg = -1;
  if (m1 < 0) m1 = ot_env_choice("OMPTENSOR_GEMV_M1", 1);
  if (qg < 0) qg = ot_env_choice("OMPTENSOR_GEMV_QG", 0);
  if (M == 1 && qg && qg_ok(wdt, w, a, K, ldw)) {
    gemv1_qg(dev, c, a, w, wdt == OT_Q8B, ldw, N, K, accumulate);
    return;
  }
  if (M == 1 && (wdt == OT_Q4B || wdt == OT_Q4K)) { /* (the M-row kernel has no 4-bit path) */
    gemv1_q4(dev, c, a, w, (int)wdt, ldw, N, K, accumulate);
    return;
  }
  if (M == 1 && m1) {
    gemv1(dev, c, a, w, (int)wdt, ldw, N, K, accumulate);
    return;
  }
  const int wt = (int)wdt, acc_in = accumulate, mm = (int)M;
  /* Rows of a in chunks of OT_GEMV_CHUNK, and beyond one chunk
   * OT_GEMV_ROWS weight rows per warp: a chunk's accumulators stay in
   * registers (fixed bounds, unrolled, warp-uniform guards). Why several
   * weight rows: a warp reads all of a's chunk for each weight row it owns,
   * so with one row per warp the activations crossed L1 M * 4 / 2 times
   * more bytes than the bf16 weights did (batch 32 of a 7B-shaped layer ran
   * at ~58 GB/s of weights on the H200, issue 19); four rows share each
   * activation load. The weight rows are read from HBM by the first chunk,
   * later chunks find them in L1/L2. Each output (m, n) is summed in the
   * same order whatever M and the rows per warp (per lane over its vectors,
   * then the warp's shuffles), so M <= OT_GEMV_CHUNK gives what it gave
   * before chunks. */
  const int rr = mm > OT_GEMV_CHUNK ? OT_GEMV_ROWS : 1;
  const int64_t nteams = (N + (int64_t)WARPS * rr - 1) / ((int64_t)WARPS * rr);
  OT_GPU_KERNEL(dev, nteams, WARPS * OT_WARP_SIZE,
                OT_DEVPTR(c, a, w) firstprivate(ldc, lda, ldw, N, K, wt, acc_in, mm, rr))
  {
    const int lane = OT_WARP_LANE(OT_GPU_THREAD_ID()), warp = OT_WARP_INDEX(OT_GPU_THREAD_ID());
    const int64_t n0 = ((int64_t)OT_GPU_BLOCK_ID() * WARPS + warp) * rr;
    if (n0 < N) {
      const int nr = N - n0 < rr ? (int)(N - n0) : rr;
      for (int m0 = 0; m0 < mm; m0 += OT_GEMV_CHUNK) {
        const int mb = mm - m0 < OT_GEMV_CHUNK ? mm - m0 : OT_GEMV_CHUNK;
        const float *a0 = a + m0 * lda;
        float acc[OT_GEMV_ROWS][OT_GEMV_CHUNK];
        for (int r = 0; r < OT_GEMV_ROWS; r++)
          for (int m = 0; m < OT_GEMV_CHUNK; m++) acc[r][m] = 0.0f;
        if (wt == OT_BF16 || wt == OT_F16) {
          const int bf = wt == OT_BF16;
          for (int64_t v = lane; v < K / 8; v += OT_WARP_SIZE) {
            float wv[OT_GEMV_ROWS][8];
            for (int r = 0; r < OT_GEMV_ROWS; r++)
              if (r < nr) {
                const u128 q = ((const u128 *)((const uint16_t *)w + (n0 + r) * ldw))[v];
                wv[r][0] = lo16(q.x, bf), wv[r][1] = hi16(q.x, bf), wv[r][2] = lo16(q.y, bf), wv[r][3] = hi16(q.y, bf);
                wv[r][4] = lo16(q.z, bf), wv[r][5] = hi16(q.z, bf), wv[r][6] = lo16(q.w, bf), wv[r][7] = hi16(q.w, bf);
              }
            for (int m = 0; m < OT_GEMV_CHUNK; m++)
              if (m < mb) {
                const float *x = a0 + m * lda + v * 8;
                float xv[8];
                for (int j = 0; j < 8; j++) xv[j] = x[j];
                for (int r = 0; r < OT_GEMV_ROWS; r++)
                  if (r < nr) {
                    float s = 0.0f;
                    for (int j = 0; j < 8; j++) s += wv[r][j] * xv[j];
                    acc[r][m] += s;
                  }
              }
          }
        } else if (wt == OT_F32) {
          for (int64_t v = lane; v < K / 4; v += OT_WARP_SIZE) {
            float wv[OT_GEMV_ROWS][4];
            for (int r = 0; r < OT_GEMV_ROWS; r++)
              if (r < nr) {
                const u128 q = ((const u128 *)((const float *)w + (n0 + r) * ldw))[v];
                wv[r][0] = u2f(q.x), wv[r][1] = u2f(q.y), wv[r][2] = u2f(q.z), wv[r][3] = u2f(q.w);
              }
            for (int m = 0; m < OT_GEMV_CHUNK; m++)
              if (m < mb) {
                const float *x = a0 + m * lda + v * 4;
                for (int r = 0; r < OT_GEMV_ROWS; r++)
                  if (r < nr) acc[r][m] += wv[r][0] * x[0] + wv[r][1] * x[1] + wv[r][2] * x[2] + wv[r][3] * x[3];
              }
          }
        } else { /* q8b: one 36-byte block {scale, q[32]} per lane and step */
          for (int r = 0; r < OT_GEMV_ROWS; r++)
            if (r < nr) {
              const ot_q8b_block *row = (const ot_q8b_block *)w + (n0 + r) * (ldw / 32);
              for (int64_t b = lane; b < K / 32; b += OT_WARP_SIZE) {
                const uint32_t *q = (const uint32_t *)row[b].q;
                const float sc = row[b].scale;
                for (int m = 0; m < OT_GEMV_CHUNK; m++)
                  if (m < mb) {
                    const float *x = a0 + m * lda + b * 32;
                    float s = 0.0f;
                    for (int j = 0; j < 8; j++) {
                      const uint32_t u = q[j];
                      s += (float)(int8_t)(u & 0xff) * x[4 * j] + (float)(int8_t)((u >> 8) & 0xff) * x[4 * j + 1] +
                           (float)(int8_t)((u >> 16) & 0xff) * x[4 * j + 2] + (float)(int8_t)(u >> 24) * x[4 * j + 3];
                    }
                    acc[r][m] += sc * s;
                  }
              }
            }
        }
        for (int r = 0; r < OT_GEMV_ROWS; r++)
          if (r < nr)
            for (int m = 0; m < OT_GEMV_CHUNK; m++)
              if (m < mb) {
                float s = acc[r][m];
                for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) s += OT_WARP_SHFL_DOWN(s, o);
                const int64_t co = (int64_t)(m0 + m) * ldc + n0 + r;
                if (lane == 0) c[co] = acc_in ? c[co] + s : s;
              }
      }
    }
  }
}

void ot_kgemv_gpu_multi(int dev, const ot_kgemv_mat *mats, int n_mats, int swiglu, const float *a, int64_t lda,
                        int64_t M, int64_t K, int accumulate) {
  /* One launch per matrix. A single launch over all of them (rows of every
   * matrix as one grid, gate/up combined as silu(g) * u) was tried twice on
   * the H200 (2026-11-29): with the row loop in a helper and two dozen
   * firstprivate scalars it gave wrong results; with the operands in one
   * struct it was right but no faster (46.4 vs 48.1 tokens/s resident on
   * 7B-shaped layers), so the simple form stays. */
  (void)swiglu;
  for (int i = 0; i < n_mats; i++)
    ot_kgemv_gpu(dev, mats[i].c, mats[i].ldc, a, lda, mats[i].w, mats[i].wdt, mats[i].ldw, M, mats[i].N, K, accumulate);
}
