/* attention_bwd_gpu.c — the causal attention backward (attention_bwd.c's
 * three passes) as tiled GPU kernels. The portable passes give a thread a
 * whole row; on the H200 they took 127 ms per 1024-token GPT-2 sequence (12
 * heads), and a warp per row whose lanes read their partner rows straight
 * from memory still took 12 ms. Here a block of 8 warps takes 8 consecutive
 * rows of one head (query rows for dq and the row statistics, key rows for
 * dk and dv), so the partner rows they all need are loaded once per block,
 * 32 at a time, coalesced, into shared memory (padded against bank
 * conflicts). Within a tile each lane scores one partner (its dot products
 * from shared memory), shuffles reduce and broadcast, and lanes own head-dim
 * slices of the accumulators. Fixed order everywhere: deterministic, no
 * atomics (not bitwise the portable passes). */
#include "kernels/attention_bwd_gpu.h"
#include "kernels/kcommon.h"
#include "kernels/warp_ops.h"
#include "ot_gpu.h"

#define ROWS 8               /* warps (rows) per block of ROWS * OT_WARP_SIZE = 256 threads */
#define TILE OT_WARP_SIZE    /* partner rows per shared tile: one per lane */
#define MD OT_KATTN_BWD_MAX_D
#define PD (MD + 1)          /* padded tile row: lane l reads bank (l * PD + d) % 32, all distinct */
#define PER (MD / OT_WARP_SIZE) /* head dims per lane */
_Static_assert(MD % OT_WARP_SIZE == 0, "lanes own MD / OT_WARP_SIZE head dims each");

int ot_kattn_bwd_gpu_ok(int64_t hd) { return hd > 0 && hd <= OT_KATTN_BWD_MAX_D; }

/* Passes 1 and 2 (mode 0: ws = {log-sum-exp, D_i}; mode 1: dq) over the
 * query rows; blocks by (head, 8 queries). */
static void query_pass(int dev, const ot_kattn_bwd_gpu_args *a, int mode) {
  const float *q = a->q, *k = a->k, *v = a->v, *go = a->dout;
  float *dq = a->dq, *ws = a->ws;
  const int64_t T = a->T, hd = a->hd, grp = a->H / a->Hk, qb = (a->T + ROWS - 1) / ROWS;
  const int64_t q0 = a->q0, q1 = a->q1, k0 = a->k0, k1 = a->k1, v0 = a->v0, v1 = a->v1, o0 = a->o0, o1 = a->o1;
  const int64_t dq0 = a->dq0, dq1 = a->dq1, w0 = a->w0, w1 = a->w1, w2 = a->w2;
  const float scale = a->scale;
  const int md = mode;
  OT_GPU_KERNEL(dev, a->H * qb, OT_WARP_SIZE * ROWS,
                OT_DEVPTR(q, k, v, go, ws, dq) firstprivate(T, hd, grp, qb, q0, q1, k0, k1, v0, v1, o0, o1, dq0, dq1,
                                                            w0, w1, w2, scale, md))
  {
    float sq[ROWS][MD], sg[ROWS][MD], sk[TILE][PD], sv[TILE][PD];
    OT_TEAM_SHARED(sq, sg, sk, sv)
    const int tid = (int)OT_GPU_THREAD_ID(), lane = OT_WARP_LANE(tid), w = OT_WARP_INDEX(tid);
    const int64_t b = OT_GPU_BLOCK_ID(), h = b / qb, ib = (b % qb) * ROWS, hk = h / grp, i = ib + w;
    const int64_t imax = ib + ROWS - 1 < T - 1 ? ib + ROWS - 1 : T - 1; /* the block's last query */
    const int valid = i < T;
    if (valid)
      for (int64_t d = lane; d < hd; d += OT_WARP_SIZE) {
        sq[w][d] = q[i * q0 + h * q1 + d];
        sg[w][d] = go[i * o0 + h * o1 + d];
      }
    float m = -INFINITY, l = 0.0f, dsum = 0.0f, lse = 0.0f, D = 0.0f, acc[PER];
    for (int t = 0; t < PER; t++) acc[t] = 0.0f;
    if (md && valid) {
      lse = ws[i * w0 + h * w1];
      D = ws[i * w0 + h * w1 + w2];
    }
    for (int64_t j0 = 0; j0 <= imax; j0 += TILE) {
      OT_GPU_BLOCK_SYNC(); /* the previous tile is consumed (and the rows above staged) */
      for (int64_t e = tid; e < TILE * hd; e += OT_WARP_SIZE * ROWS) {
        const int64_t jj = e / hd, d = e % hd, j = j0 + jj;
        sk[jj][d] = j <= imax ? k[j * k0 + hk * k1 + d] : 0.0f;
        sv[jj][d] = j <= imax ? v[j * v0 + hk * v1 + d] : 0.0f;
      }
      OT_GPU_BLOCK_SYNC();
      if (valid && j0 <= i) { /* uniform per warp */
        const int64_t j = j0 + lane;
        float s = 0.0f, dp = 0.0f;
        for (int64_t d = 0; d < hd; d++) {
          s += sq[w][d] * sk[lane][d];
          dp += sg[w][d] * sv[lane][d];
        }
        const float sc = j <= i ? s * scale : -INFINITY;
        if (!md) {
          const float m2 = fmaxf(m, ot_warp_max(sc)), alpha = expf(m - m2), p = j <= i ? expf(sc - m2) : 0.0f;
          const float ps = ot_warp_sum(p), pd = ot_warp_sum(p * dp);
          l = l * alpha + ps;
          dsum = dsum * alpha + pd;
          m = m2;
        } else {
          const float dS = j <= i ? expf(sc - lse) * (dp - D) : 0.0f;
          const int64_t nj = i - j0 + 1 < TILE ? i - j0 + 1 : TILE;
          for (int64_t jj = 0; jj < nj; jj++) {
            const float gj = ot_warp_bcast(dS, (int)jj);
            for (int t = 0; t < PER; t++)
              if (lane + OT_WARP_SIZE * t < hd) acc[t] += gj * sk[jj][lane + OT_WARP_SIZE * t];
          }
        }
      }
    }
    if (valid && !md && lane == 0) {
      ws[i * w0 + h * w1] = m + logf(l);
      ws[i * w0 + h * w1 + w2] = dsum / l;
    }
    if (valid && md)
      for (int t = 0; t < PER; t++)
        if (lane + OT_WARP_SIZE * t < hd) dq[i * dq0 + h * dq1 + lane + OT_WARP_SIZE * t] = scale * acc[t];
  }
}

/* Pass 3: dk_j = scale sum dS_ij q_i, dv_j = sum P_ij dO_i over the group's
 * heads h and the queries i >= j; blocks by (kv head, 8 keys). */
static void key_pass(int dev, const ot_kattn_bwd_gpu_args *a) {
  const float *q = a->q, *k = a->k, *v = a->v, *go = a->dout, *ws = a->ws;
  float *dk = a->dk, *dv = a->dv;
  const int64_t T = a->T, hd = a->hd, grp = a->H / a->Hk, kb = (a->T + ROWS - 1) / ROWS;
  const int64_t q0 = a->q0, q1 = a->q1, k0 = a->k0, k1 = a->k1, v0 = a->v0, v1 = a->v1, o0 = a->o0, o1 = a->o1;
  const int64_t dk0 = a->dk0, dk1 = a->dk1, dv0 = a->dv0, dv1 = a->dv1, w0 = a->w0, w1 = a->w1, w2 = a->w2;
  const float scale = a->scale;
  OT_GPU_KERNEL(dev, a->Hk * kb, OT_WARP_SIZE * ROWS,
                OT_DEVPTR(q, k, v, go, ws, dk, dv) firstprivate(T, hd, grp, kb, q0, q1, k0, k1, v0, v1, o0, o1, dk0,
                                                                dk1, dv0, dv1, w0, w1, w2, scale))
  {
    float sk[ROWS][MD], sv[ROWS][MD], tq[TILE][PD], tg[TILE][PD], tl[TILE], tD[TILE];
    OT_TEAM_SHARED(sk, sv, tq, tg, tl, tD)
    const int tid = (int)OT_GPU_THREAD_ID(), lane = OT_WARP_LANE(tid), w = OT_WARP_INDEX(tid);
    const int64_t b = OT_GPU_BLOCK_ID(), hk = b / kb, jb = (b % kb) * ROWS, j = jb + w;
    const int valid = j < T;
    if (valid)
      for (int64_t d = lane; d < hd; d += OT_WARP_SIZE) {
        sk[w][d] = k[j * k0 + hk * k1 + d];
        sv[w][d] = v[j * v0 + hk * v1 + d];
      }
    float ak[PER], av[PER];
    for (int t = 0; t < PER; t++) ak[t] = av[t] = 0.0f;
    for (int64_t h = hk * grp; h < (hk + 1) * grp; h++)
      for (int64_t i0 = jb; i0 < T; i0 += TILE) { /* queries from the block's first key */
        OT_GPU_BLOCK_SYNC();
        for (int64_t e = tid; e < TILE * hd; e += OT_WARP_SIZE * ROWS) {
          const int64_t ii = e / hd, d = e % hd, i = i0 + ii;
          tq[ii][d] = i < T ? q[i * q0 + h * q1 + d] : 0.0f;
          tg[ii][d] = i < T ? go[i * o0 + h * o1 + d] : 0.0f;
        }
        if (tid < TILE) {
          const int64_t i = i0 + tid;
          tl[tid] = i < T ? ws[i * w0 + h * w1] : 0.0f;
          tD[tid] = i < T ? ws[i * w0 + h * w1 + w2] : 0.0f;
        }
        OT_GPU_BLOCK_SYNC();
        if (valid && i0 + TILE > j) { /* some query of the tile is >= j; uniform per warp */
          const int64_t i = i0 + lane;
          float s = 0.0f, dp = 0.0f;
          for (int64_t d = 0; d < hd; d++) {
            s += tq[lane][d] * sk[w][d];
            dp += tg[lane][d] * sv[w][d];
          }
          const int live = i >= j && i < T;
          const float P = live ? expf(s * scale - tl[lane]) : 0.0f, dS = live ? P * (dp - tD[lane]) : 0.0f;
          for (int ii = 0; ii < TILE; ii++) {
            const float pi = ot_warp_bcast(P, ii), gi = ot_warp_bcast(dS, ii);
            for (int t = 0; t < PER; t++)
              if (lane + OT_WARP_SIZE * t < hd) {
                ak[t] += gi * tq[ii][lane + OT_WARP_SIZE * t];
                av[t] += pi * tg[ii][lane + OT_WARP_SIZE * t];
              }
          }
        }
      }
    if (valid)
      for (int t = 0; t < PER; t++)
        if (lane + OT_WARP_SIZE * t < hd) {
          dk[j * dk0 + hk * dk1 + lane + OT_WARP_SIZE * t] = scale * ak[t];
          dv[j * dv0 + hk * dv1 + lane + OT_WARP_SIZE * t] = av[t];
        }
  }
}

void ot_kattn_bwd_gpu(int dev, const ot_kattn_bwd_gpu_args *a) {
  query_pass(dev, a, 0);
  query_pass(dev, a, 1);
  key_pass(dev, a);
}
