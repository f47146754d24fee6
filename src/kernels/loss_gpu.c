/* loss_gpu.c — the rows of the fused cross-entropy (loss.c) on a GPU: the
 * portable kernel runs a team per row in OpenMP's generic mode with three
 * passes of one-element loads through a dtype switch, 44.5 ms for GPT-2's
 * logits [8192, 50257] on the H200. Here a block of CE_T threads per row,
 * one kernel per (logits, dlogits) dtype pair:
 *   1. a running (max, sum of exp) per thread over octets loaded with
 *      16-byte accesses (kcommon.h's ot_kld8_*), the unaligned head and tail
 *      of the row one element at a time; pairs combined by warp shuffles and
 *      CE_W shared partials in a fixed order: lse = max + log(sum);
 *   2. dlogits = gs / cnt * (exp(l - lse) - onehot), in octets where the
 *      dlogits row has the logits row's alignment, else element by element.
 * The row is read twice and dlogits written once. The target logit is read
 * before the first barrier, so dlogits may be logits (in place). */
#include "kernels/kcommon.h"
#include "kernels/train_gpu.h"
#include "ot_gpu.h"

#define CE_T 512
#define CE_W (CE_T / OT_WARP_SIZE)

/* (m, s) += (m2, s2): running max and the sum of exp(x - max) */
#define CE_COMBINE(m, s, m2, s2)                          \
  do {                                                    \
    if ((m2) > (m)) {                                     \
      (s) = (s) * expf((m) - (m2)) + (s2);                \
      (m) = (m2);                                         \
    } else if ((m2) > -INFINITY) {                        \
      (s) += (s2) * expf((m2) - (m));                     \
    }                                                     \
  } while (0)

/* elements before the first 16-byte aligned one of a row at address a */
#define CE_HEAD(a, es, n) ((int64_t)(((16 - (a) % 16) % 16) / (es)) < (n) ? (int64_t)(((16 - (a) % 16) % 16) / (es)) : (n))

/* dlogits of logit x in column c (in a kernel below: valid, g, lse, t) */
#define CE_D(x, c) (valid ? g * (expf((x) - lse) - ((c) == t ? 1.0f : 0.0f)) : 0.0f)

#define CE_KERNEL(L, D, LES, DES)                                                                                \
  static void ce_rows_##L##_##D(int dev, const ot_kce_gpu_args *A) {                                            \
    const int64_t rows = A->rows, n = A->n, l0 = A->l0, d0 = A->d0, t0 = A->t0, s0 = A->s0;                     \
    const void *lp = A->lp;                                                                                    \
    const int32_t *tp = A->tp;                                                                                 \
    void *dp = A->dp;                                                                                          \
    float *sp = A->sp;                                                                                         \
    const float *cnt = A->cnt;                                                                                 \
    const float gsc = A->gs;                                                                                   \
    OT_GPU_KERNEL(dev, (int)rows, CE_T, OT_DEVPTR(lp, tp, dp, sp, cnt) firstprivate(n, l0, d0, t0, s0, gsc))     \
    {                                                                                                          \
      float rm[CE_W], rsum[CE_W];                                                                              \
      OT_TEAM_SHARED(rm, rsum)                                                                                 \
      const int tid = (int)OT_GPU_THREAD_ID(), lane = OT_WARP_LANE(tid), warp = OT_WARP_INDEX(tid);            \
      const int64_t r = OT_GPU_BLOCK_ID(), lo = r * l0;                                                        \
      const int32_t t = tp[r * t0];                                                                            \
      const int valid = t >= 0 && t < n;                                                                       \
      const float lt = tid == 0 && valid ? ot_ld_##L(lp, lo + t) : 0.0f;                                       \
      const int64_t h = CE_HEAD((uintptr_t)lp + (uintptr_t)(lo * LES), LES, n);                                \
      const int64_t nv = (n - h) / OT_KV, tail = h + nv * OT_KV;                                               \
      float m = -INFINITY, s = 0.0f;                                                                           \
      for (int64_t c = tid; c < h; c += CE_T) CE_COMBINE(m, s, ot_ld_##L(lp, lo + c), 1.0f);                   \
      for (int64_t c = tail + tid; c < n; c += CE_T) CE_COMBINE(m, s, ot_ld_##L(lp, lo + c), 1.0f);            \
      for (int64_t k = tid; k < nv; k += CE_T) {                                                               \
        float v[OT_KV];                                                                                        \
        ot_kld8_##L(lp, lo + h + k * OT_KV, v);                                                                \
        float mx = v[0];                                                                                       \
        OT_UNROLL                                                                                              \
        for (int e = 1; e < OT_KV; e++) mx = fmaxf(mx, v[e]);                                                  \
        if (mx > m) {                                                                                          \
          s = s * expf(m - mx);                                                                                \
          m = mx;                                                                                              \
        }                                                                                                      \
        if (m > -INFINITY) {                                                                                   \
          OT_UNROLL                                                                                            \
          for (int e = 0; e < OT_KV; e++) s += expf(v[e] - m);                                                 \
        }                                                                                                      \
      }                                                                                                        \
      for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) {                                                         \
        const float m2 = OT_WARP_SHFL_DOWN(m, o), s2 = OT_WARP_SHFL_DOWN(s, o);                                \
        CE_COMBINE(m, s, m2, s2);                                                                              \
      }                                                                                                        \
      if (lane == 0) {                                                                                         \
        rm[warp] = m;                                                                                          \
        rsum[warp] = s;                                                                                        \
      }                                                                                                        \
      OT_GPU_BLOCK_SYNC();                                                                                     \
      float bm = rm[0], bs = rsum[0];                                                                          \
      for (int w = 1; w < CE_W; w++) CE_COMBINE(bm, bs, rm[w], rsum[w]);                                       \
      const float lse = bm + logf(bs);                                                                         \
      if (tid == 0) sp[r * s0] = valid ? lse - lt : t == -100 ? 0.0f : NAN;                                    \
      if (dp) {                                                                                                \
        const float g = cnt[0] > 0.0f ? gsc / cnt[0] : 0.0f;                                  \
        const int64_t dO = r * d0;                                                                             \
        const int64_t hd = CE_HEAD((uintptr_t)dp + (uintptr_t)(dO * DES), DES, n);                             \
        if (hd == h) {                                                                                         \
          for (int64_t c = tid; c < h; c += CE_T)                                                              \
            ot_st_##D(dp, dO + c, CE_D(ot_ld_##L(lp, lo + c), c));          \
          for (int64_t c = tail + tid; c < n; c += CE_T)                                                       \
            ot_st_##D(dp, dO + c, CE_D(ot_ld_##L(lp, lo + c), c));          \
          for (int64_t k = tid; k < nv; k += CE_T) {                                                           \
            float v[OT_KV];                                                                                    \
            const int64_t c0 = h + k * OT_KV;                                                                  \
            ot_kld8_##L(lp, lo + c0, v);                                                                       \
            OT_UNROLL                                                                                          \
            for (int e = 0; e < OT_KV; e++) v[e] = CE_D(v[e], c0 + e);       \
            ot_kst8_##D(dp, dO + c0, v);                                                                       \
          }                                                                                                    \
        } else {                                                                                               \
          for (int64_t c = tid; c < n; c += CE_T)                                                              \
            ot_st_##D(dp, dO + c, CE_D(ot_ld_##L(lp, lo + c), c));          \
        }                                                                                                      \
      }                                                                                                        \
    }                                                                                                          \
  }

CE_KERNEL(f32, f32, 4, 4)
CE_KERNEL(bf16, bf16, 2, 2)
CE_KERNEL(f16, f16, 2, 2)
CE_KERNEL(bf16, f32, 2, 4)
CE_KERNEL(f16, f32, 2, 4)
CE_KERNEL(f32, bf16, 4, 2)
CE_KERNEL(f32, f16, 4, 2)
#undef CE_KERNEL

int ot_kce_rows_gpu(int dev, const ot_kce_gpu_args *a) {
  if (!ot_ktrain_fast(dev) || a->rows <= 0 || a->rows > INT32_MAX || a->n <= 0) return 0;
  const int ld = a->ldt, dd = a->dp ? a->ddt : a->ldt;
  if (ld == OT_F32 && dd == OT_F32) ce_rows_f32_f32(dev, a);
  else if (ld == OT_BF16 && dd == OT_BF16) ce_rows_bf16_bf16(dev, a);
  else if (ld == OT_F16 && dd == OT_F16) ce_rows_f16_f16(dev, a);
  else if (ld == OT_BF16 && dd == OT_F32) ce_rows_bf16_f32(dev, a);
  else if (ld == OT_F16 && dd == OT_F32) ce_rows_f16_f32(dev, a);
  else if (ld == OT_F32 && dd == OT_BF16) ce_rows_f32_bf16(dev, a);
  else if (ld == OT_F32 && dd == OT_F16) ce_rows_f32_f16(dev, a);
  else return 0;
  return 1;
}
