/* colsum_gpu.c — column sums over many rows on a GPU (ot_kcolsum's fast
 * path): the bias gradient of a GPT-2 linear (dy [8192, 768]) took 641 us
 * with the portable kernel, whose teams run in OpenMP's generic mode with
 * CS_COLS = 32 columns each (24 teams for 768 columns).
 *
 * Here a block of CG_T threads owns ct adjacent columns (ct = 8, 16 or 32,
 * chosen from d alone so that there are enough blocks to fill the GPU) and
 * all rows: thread t sums column t % ct over the rows r = t / ct + k * rg
 * (rg = CG_T / ct row groups), four rows in flight per step but added in row
 * order; a tree over the row groups in shared memory, in a fixed shape,
 * then adds the groups. A warp thus reads 32 / ct rows of ct contiguous
 * columns per load (32 B of f32 at ct 8); rows of 16-byte aligned octets
 * take the octet kernel below instead. No atomics, no scratch memory: the
 * same bits on every run. */
#include "kernels/kcommon.h"
#include "kernels/train_gpu.h"
#include "ot_gpu.h"

#define CG_T 1024 /* threads per block */

/* The one row stride of a view's rows flattened over (n0, n1, n2), or 0
 * (refused) when the rows are not evenly spaced. */
static int cg_row_stride(int64_t rows, int64_t n1, int64_t n2, const ot_kcs_view *v, int64_t *rs) {
  const int64_t n0 = rows / (n1 * n2);
  const int64_t s = n2 > 1 ? v->s2 : n1 > 1 ? v->s1 : v->s0;
  if ((n2 > 1 && v->s2 != s) || (n1 > 1 && v->s1 != n2 * s) || (n0 > 1 && v->s0 != n1 * n2 * s)) return 0;
  *rs = s;
  return 1;
}

/* Sums of LA(ap, .) (and of LA * LB) down column c, rows grp, grp + rg, ... */
#define CG_LOOP(LA, LB)                                                                                       \
  do {                                                                                                        \
    int64_t r = grp;                                                                                          \
    for (; r + 3 * rg < rows; r += 4 * rg) {                                                                  \
      const float x0 = LA(ap, oa + r * ra), x1 = LA(ap, oa + (r + rg) * ra), x2 = LA(ap, oa + (r + 2 * rg) * ra), \
                  x3 = LA(ap, oa + (r + 3 * rg) * ra);                                                        \
      s += x0;                                                                                                \
      s += x1;                                                                                                \
      s += x2;                                                                                                \
      s += x3;                                                                                                \
      if (hb) {                                                                                               \
        const float y0 = LB(bp, ob + r * rb), y1 = LB(bp, ob + (r + rg) * rb), y2 = LB(bp, ob + (r + 2 * rg) * rb), \
                    y3 = LB(bp, ob + (r + 3 * rg) * rb);                                                      \
        q += x0 * y0;                                                                                         \
        q += x1 * y1;                                                                                         \
        q += x2 * y2;                                                                                         \
        q += x3 * y3;                                                                                         \
      }                                                                                                       \
    }                                                                                                         \
    for (; r < rows; r += rg) {                                                                               \
      const float x0 = LA(ap, oa + r * ra);                                                                   \
      s += x0;                                                                                                \
      if (hb) q += x0 * LB(bp, ob + r * rb);                                                                  \
    }                                                                                                         \
  } while (0)

#define CG_B(LA)                                         \
  do {                                                   \
    switch (bdt) {                                       \
    case OT_BF16: CG_LOOP(LA, ot_ld_bf16); break;        \
    case OT_F16: CG_LOOP(LA, ot_ld_f16); break;          \
    default: CG_LOOP(LA, ot_ld_f32); break;              \
    }                                                    \
  } while (0)

/* ---- octets: unit column stride, d % 8 == 0, 16-byte aligned rows -----------------
 * Block b owns columns 8b .. 8b+7, thread t the rows t, t + CG_T, ...: one
 * 16- or 32-byte load per row and operand, four rows in flight, added in row
 * order into 8 sums per thread; then a shuffle tree over each warp's 32
 * threads and the warps' partials in order. For GPT-2's [8192, 768] that is
 * 96 blocks of 8 rows per thread. */
#define CG8_LOOP(LA, LB)                                                                                      \
  do {                                                                                                        \
    for (int64_t r = tid; r < rows; r += CG_T) {                                                              \
      float va[OT_KV];                                                                                        \
      LA(ap, r * ra + c0, va);                                                                                \
      if (hb) {                                                                                               \
        float vb[OT_KV];                                                                                      \
        LB(bp, r * rb + c0, vb);                                                                              \
        OT_UNROLL                                                                                             \
        for (int k = 0; k < OT_KV; k++) q[k] += va[k] * vb[k];                                                \
      }                                                                                                       \
      OT_UNROLL                                                                                               \
      for (int k = 0; k < OT_KV; k++) s[k] += va[k];                                                          \
    }                                                                                                         \
  } while (0)

#define CG8_B(LA)                                          \
  do {                                                     \
    switch (bdt) {                                         \
    case OT_BF16: CG8_LOOP(LA, ot_kld8_bf16); break;       \
    case OT_F16: CG8_LOOP(LA, ot_kld8_f16); break;         \
    default: CG8_LOOP(LA, ot_kld8_f32); break;             \
    }                                                      \
  } while (0)

static void cg8_run(int dev, int64_t rows, int64_t d, int hb, const void *ap, int adt, int64_t ra, const void *bp,
                    int bdt, int64_t rb, int pdt, void *prod, int64_t ps, int sdt, void *sum, int64_t ss) {
  const int64_t nblk = d / OT_KV;
  OT_GPU_KERNEL(dev, (int)nblk, CG_T,
                OT_DEVPTR(ap, bp, prod, sum) firstprivate(rows, hb, ra, rb, adt, bdt, pdt, ps, sdt, ss))
  {
    float ws[CG_T / OT_WARP_SIZE][OT_KV], wq[CG_T / OT_WARP_SIZE][OT_KV];
    OT_TEAM_SHARED(ws, wq)
    const int tid = (int)OT_GPU_THREAD_ID(), lane = OT_WARP_LANE(tid), warp = OT_WARP_INDEX(tid);
    const int64_t c0 = (int64_t)OT_GPU_BLOCK_ID() * OT_KV;
    float s[OT_KV], q[OT_KV];
    OT_UNROLL
    for (int k = 0; k < OT_KV; k++) s[k] = q[k] = 0.0f;
    switch (adt) {
    case OT_BF16: CG8_B(ot_kld8_bf16); break;
    case OT_F16: CG8_B(ot_kld8_f16); break;
    default: CG8_B(ot_kld8_f32); break;
    }
    OT_UNROLL
    for (int k = 0; k < OT_KV; k++) {
      for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) {
        s[k] += OT_WARP_SHFL_DOWN(s[k], o);
        q[k] += OT_WARP_SHFL_DOWN(q[k], o);
      }
      if (lane == 0) ws[warp][k] = s[k], wq[warp][k] = q[k];
    }
    OT_GPU_BLOCK_SYNC();
    if (tid < OT_KV) {
      float ts = 0.0f, tq = 0.0f;
      for (int w = 0; w < CG_T / OT_WARP_SIZE; w++) ts += ws[w][tid], tq += wq[w][tid];
      const int64_t c = c0 + tid;
      if (sum) ot_kst(sdt, sum, c * ss, ot_kld(sdt, sum, c * ss) + ts);
      if (prod) ot_kst(pdt, prod, c * ps, ot_kld(pdt, prod, c * ps) + tq);
    }
  }
}

int ot_kcolsum_gpu(int dev, int64_t rows, int64_t d, int64_t n1, int64_t n2, ot_kcs_view a, ot_kcs_view b, int pdt,
                   void *prod, int64_t ps, int sdt, void *sum, int64_t ss) {
  if (!ot_ktrain_fast(dev) || rows <= 0 || n1 <= 0 || n2 <= 0) return 0;
  const int hb = prod != NULL;
  int64_t ra = 0, rb = 0;
  if (!ot_kfloat_bytes(a.dt) || !cg_row_stride(rows, n1, n2, &a, &ra)) return 0;
  if (hb && (!ot_kfloat_bytes(b.dt) || !cg_row_stride(rows, n1, n2, &b, &rb))) return 0;
  const int64_t ae = ot_kfloat_bytes(a.dt), be = hb ? ot_kfloat_bytes(b.dt) : 4;
  if (d % OT_KV == 0 && d / OT_KV <= INT32_MAX && a.s3 == 1 && (!hb || b.s3 == 1) && ot_kalign16(a.p, 0, ae) &&
      (ra * ae) % 16 == 0 && (!hb || (ot_kalign16(b.p, 0, be) && (rb * be) % 16 == 0))) {
    cg8_run(dev, rows, d, hb, a.p, a.dt, ra, hb ? b.p : NULL, hb ? b.dt : OT_F32, rb, pdt, prod, ps, sdt, sum, ss);
    return 1;
  }
  int ct = 32; /* columns per block: narrower until there are blocks for every SM */
  while (ct > 8 && (d + ct - 1) / ct < 264) ct /= 2;
  const int64_t nblk = (d + ct - 1) / ct;
  if (nblk > INT32_MAX) return 0;
  const void *ap = a.p, *bp = hb ? b.p : NULL;
  const int adt = a.dt, bdt = hb ? b.dt : OT_F32;
  const int64_t a3 = a.s3, b3 = b.s3;
  OT_GPU_KERNEL(dev, (int)nblk, CG_T,
                OT_DEVPTR(ap, bp, prod, sum)
                    firstprivate(rows, d, ct, hb, ra, rb, a3, b3, adt, bdt, pdt, ps, sdt, ss))
  {
    float tq[CG_T], ts[CG_T];
    OT_TEAM_SHARED(tq, ts)
    const int tid = (int)OT_GPU_THREAD_ID(), lane = tid % ct, grp = tid / ct, rg = CG_T / ct;
    const int64_t c = (int64_t)OT_GPU_BLOCK_ID() * ct + lane;
    float s = 0.0f, q = 0.0f;
    if (c < d) {
      const int64_t oa = c * a3, ob = c * b3;
      switch (adt) {
      case OT_BF16: CG_B(ot_ld_bf16); break;
      case OT_F16: CG_B(ot_ld_f16); break;
      default: CG_B(ot_ld_f32); break;
      }
    }
    ts[tid] = s;
    tq[tid] = q;
    OT_GPU_BLOCK_SYNC();
    for (int h = rg / 2; h >= 1; h /= 2) { /* groups g and g + h, h = rg/2 .. 1 */
      if (grp < h) {
        ts[tid] += ts[tid + h * ct];
        tq[tid] += tq[tid + h * ct];
      }
      OT_GPU_BLOCK_SYNC();
    }
    if (grp == 0 && c < d) {
      if (sum) ot_kst(sdt, sum, c * ss, ot_kld(sdt, sum, c * ss) + ts[tid]);
      if (prod) ot_kst(pdt, prod, c * ps, ot_kld(pdt, prod, c * ps) + tq[tid]);
    }
  }
  return 1;
}
