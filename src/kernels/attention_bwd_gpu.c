/* attention_bwd_gpu.c — the causal attention backward (attention_bwd.c's
 * three passes) as warp-per-row GPU kernels. The portable passes give a
 * thread a whole row and were latency-bound on the H200 (127 ms per
 * 1024-token GPT-2 sequence, 12 heads). Here, as in the decode attention of
 * warp_gpu.c, a warp takes a row: the row's own vectors (q and dO, or k and
 * v) sit in shared memory, each lane scores one partner of a 32-wide tile
 * (its dot products), shuffles reduce and broadcast, and lanes own head-dim
 * slices of the accumulators, reading partner rows coalesced. Fixed order
 * everywhere: deterministic, no atomics (not bitwise the portable passes). */
#include <ompx.h>

#include "kernels/attention_bwd_gpu.h"
#include "kernels/kcommon.h"

#define ROWS 8 /* warps (rows) per block of 256 threads */

OT_DECLARE_TARGET_BEGIN
static inline float ab_bcast(float v, int lane) {
#ifdef __NVPTX__
  return __nvvm_shfl_sync_idx_f32(0xffffffffu, v, lane, 0x1f);
#else
  (void)lane;
  return v;
#endif
}
static inline float ab_wsum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += ompx_shfl_down_sync_f(~0ull, v, (unsigned)o, 32);
  return ab_bcast(v, 0);
}
static inline float ab_wmax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, ompx_shfl_down_sync_f(~0ull, v, (unsigned)o, 32));
  return ab_bcast(v, 0);
}
OT_DECLARE_TARGET_END

int ot_kattn_bwd_gpu_ok(int64_t hd) { return hd > 0 && hd <= OT_KATTN_BWD_MAX_D; }

void ot_kattn_bwd_gpu(int dev, const ot_kattn_bwd_gpu_args *a) {
  const float *q = a->q, *k = a->k, *v = a->v, *go = a->dout;
  float *dq = a->dq, *dk = a->dk, *dv = a->dv, *ws = a->ws;
  const int64_t T = a->T, H = a->H, Hk = a->Hk, hd = a->hd, grp = a->H / a->Hk;
  const int64_t q0 = a->q0, q1 = a->q1, k0 = a->k0, k1 = a->k1, v0 = a->v0, v1 = a->v1, o0 = a->o0, o1 = a->o1;
  const int64_t dq0 = a->dq0, dq1 = a->dq1, dk0 = a->dk0, dk1 = a->dk1, dv0 = a->dv0, dv1 = a->dv1;
  const int64_t w0 = a->w0, w1 = a->w1, w2 = a->w2;
  const float scale = a->scale;
  const int64_t qrows = T * H, krows = T * Hk;

  /* pass 1, a warp per query row (i, h): ws = {log-sum-exp, D_i = sum_j P_ij dP_ij} */
  OT_GPU_KERNEL(dev, (qrows + ROWS - 1) / ROWS, 32 * ROWS,
                OT_DEVPTR(q, k, v, go, ws) firstprivate(T, H, hd, grp, q0, q1, k0, k1, v0, v1, o0, o1, w0, w1, w2,
                                                        scale, qrows))
  {
    float sh[ROWS][2][OT_KATTN_BWD_MAX_D];
    OT_TEAM_SHARED(sh)
    const int tid = (int)ompx_thread_id_x(), lane = tid & 31, w = tid >> 5;
    const int64_t r = (int64_t)ompx_block_id_x() * ROWS + w, i = r / H, h = r % H, hk = h / grp;
    if (r < qrows)
      for (int64_t d = lane; d < hd; d += 32) {
        sh[w][0][d] = q[i * q0 + h * q1 + d];
        sh[w][1][d] = go[i * o0 + h * o1 + d];
      }
    ompx_sync_block_acq_rel();
    if (r < qrows) {
      float m = -INFINITY, l = 0.0f, ds = 0.0f;
      for (int64_t j0 = 0; j0 <= i; j0 += 32) {
        const int64_t j = j0 + lane;
        float sc = -INFINITY, dp = 0.0f;
        if (j <= i) {
          float s = 0.0f;
          for (int64_t d = 0; d < hd; d++) {
            s += sh[w][0][d] * k[j * k0 + hk * k1 + d];
            dp += sh[w][1][d] * v[j * v0 + hk * v1 + d];
          }
          sc = s * scale;
        }
        const float m2 = fmaxf(m, ab_wmax(sc)), alpha = expf(m - m2), p = j <= i ? expf(sc - m2) : 0.0f;
        const float ps = ab_wsum(p), pd = ab_wsum(p * dp);
        l = l * alpha + ps;
        ds = ds * alpha + pd;
        m = m2;
      }
      if (lane == 0) {
        ws[i * w0 + h * w1] = m + logf(l);
        ws[i * w0 + h * w1 + w2] = ds / l;
      }
    }
  }

  /* pass 2, a warp per query row: dq_i = scale sum_j dS_ij k_j */
  OT_GPU_KERNEL(dev, (qrows + ROWS - 1) / ROWS, 32 * ROWS,
                OT_DEVPTR(q, k, v, go, ws, dq) firstprivate(T, H, hd, grp, q0, q1, k0, k1, v0, v1, o0, o1, dq0, dq1,
                                                            w0, w1, w2, scale, qrows))
  {
    float sh[ROWS][2][OT_KATTN_BWD_MAX_D];
    OT_TEAM_SHARED(sh)
    const int tid = (int)ompx_thread_id_x(), lane = tid & 31, w = tid >> 5;
    const int64_t r = (int64_t)ompx_block_id_x() * ROWS + w, i = r / H, h = r % H, hk = h / grp;
    if (r < qrows)
      for (int64_t d = lane; d < hd; d += 32) {
        sh[w][0][d] = q[i * q0 + h * q1 + d];
        sh[w][1][d] = go[i * o0 + h * o1 + d];
      }
    ompx_sync_block_acq_rel();
    if (r < qrows) {
      const float lse = ws[i * w0 + h * w1], D = ws[i * w0 + h * w1 + w2];
      float acc[OT_KATTN_BWD_MAX_D / 32];
      for (int t = 0; t < OT_KATTN_BWD_MAX_D / 32; t++) acc[t] = 0.0f;
      for (int64_t j0 = 0; j0 <= i; j0 += 32) {
        const int64_t j = j0 + lane;
        float dS = 0.0f;
        if (j <= i) {
          float s = 0.0f, dp = 0.0f;
          for (int64_t d = 0; d < hd; d++) {
            s += sh[w][0][d] * k[j * k0 + hk * k1 + d];
            dp += sh[w][1][d] * v[j * v0 + hk * v1 + d];
          }
          const float P = expf(s * scale - lse);
          dS = P * (dp - D);
        }
        const int64_t nj = i - j0 + 1 < 32 ? i - j0 + 1 : 32;
        for (int64_t jj = 0; jj < nj; jj++) {
          const float g = ab_bcast(dS, (int)jj);
          const float *kr = k + (j0 + jj) * k0 + hk * k1;
          for (int t = 0; t < OT_KATTN_BWD_MAX_D / 32 && lane + 32 * t < hd; t++) acc[t] += g * kr[lane + 32 * t];
        }
      }
      for (int t = 0; t < OT_KATTN_BWD_MAX_D / 32 && lane + 32 * t < hd; t++)
        dq[i * dq0 + h * dq1 + lane + 32 * t] = scale * acc[t];
    }
  }

  /* pass 3, a warp per key row (j, hk): dk_j = scale sum dS_ij q_i, dv_j = sum P_ij dO_i
   * over the group's heads h and the queries i >= j */
  OT_GPU_KERNEL(dev, (krows + ROWS - 1) / ROWS, 32 * ROWS,
                OT_DEVPTR(q, k, v, go, ws, dk, dv) firstprivate(T, Hk, hd, grp, q0, q1, k0, k1, v0, v1, o0, o1, dk0,
                                                                dk1, dv0, dv1, w0, w1, w2, scale, krows))
  {
    float sh[ROWS][2][OT_KATTN_BWD_MAX_D];
    OT_TEAM_SHARED(sh)
    const int tid = (int)ompx_thread_id_x(), lane = tid & 31, w = tid >> 5;
    const int64_t r = (int64_t)ompx_block_id_x() * ROWS + w, j = r / Hk, hk = r % Hk;
    if (r < krows)
      for (int64_t d = lane; d < hd; d += 32) {
        sh[w][0][d] = k[j * k0 + hk * k1 + d];
        sh[w][1][d] = v[j * v0 + hk * v1 + d];
      }
    ompx_sync_block_acq_rel();
    if (r < krows) {
      float ak[OT_KATTN_BWD_MAX_D / 32], av[OT_KATTN_BWD_MAX_D / 32];
      for (int t = 0; t < OT_KATTN_BWD_MAX_D / 32; t++) ak[t] = av[t] = 0.0f;
      for (int64_t h = hk * grp; h < (hk + 1) * grp; h++)
        for (int64_t i0 = j; i0 < T; i0 += 32) {
          const int64_t i = i0 + lane;
          float P = 0.0f, dS = 0.0f;
          if (i < T) {
            float s = 0.0f, dp = 0.0f;
            for (int64_t d = 0; d < hd; d++) {
              s += q[i * q0 + h * q1 + d] * sh[w][0][d];
              dp += go[i * o0 + h * o1 + d] * sh[w][1][d];
            }
            P = expf(s * scale - ws[i * w0 + h * w1]);
            dS = P * (dp - ws[i * w0 + h * w1 + w2]);
          }
          const int64_t ni = T - i0 < 32 ? T - i0 : 32;
          for (int64_t ii = 0; ii < ni; ii++) {
            const float pi = ab_bcast(P, (int)ii), gi = ab_bcast(dS, (int)ii);
            const float *qr = q + (i0 + ii) * q0 + h * q1, *orow = go + (i0 + ii) * o0 + h * o1;
            for (int t = 0; t < OT_KATTN_BWD_MAX_D / 32 && lane + 32 * t < hd; t++) {
              ak[t] += gi * qr[lane + 32 * t];
              av[t] += pi * orow[lane + 32 * t];
            }
          }
        }
      for (int t = 0; t < OT_KATTN_BWD_MAX_D / 32 && lane + 32 * t < hd; t++) {
        dk[j * dk0 + hk * dk1 + lane + 32 * t] = scale * ak[t];
        dv[j * dv0 + hk * dv1 + lane + 32 * t] = av[t];
      }
    }
  }
}
