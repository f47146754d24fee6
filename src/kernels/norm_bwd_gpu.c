/* norm_bwd_gpu.c — the row passes of the norm backward (norm_bwd.c's
 * nb_row) as a warp per row on a GPU: the portable team-per-row passes run
 * in OpenMP's generic mode and took 33 ms per GPT-2 layernorm backward over
 * 2048 tokens on the H200. Lanes stride over the row (coalesced), shuffles
 * reduce. Any mix of f32/f16/bf16 operands: loads and stores go through
 * kcommon.h's ot_kld / ot_kst, whose dtype switch is the same for every lane
 * (bf16 x and dy were left on the portable passes before). Same formulas as
 * nb_row, sums in another fixed order. */
#include "kernels/kcommon.h"
#include "kernels/warp_gpu.h"
#include "kernels/warp_ops.h"
#include "ot_gpu.h"

#define NB_WARPS (256 / OT_WARP_SIZE) /* rows (warps) per block of 256 threads */

void ot_knorm_bwd_gpu(int dev, const ot_knorm_bwd_gpu_args *a) {
  const void *x = a->x, *g = a->g, *w = a->w;
  void *dx = a->dx;
  const int ln = a->layer, wdx = a->write_dx, xdt = a->xdt, gdt = a->gdt, wdt = a->wdt, ddt = a->ddt;
  const float eps = a->eps;
  const int64_t rows = a->rows, d = a->d, n1 = a->n1, n2 = a->n2, ws = a->ws;
  const int64_t x0 = a->xs[0], x1 = a->xs[1], x2 = a->xs[2], x3 = a->xs[3];
  const int64_t g0 = a->gs[0], g1 = a->gs[1], g2 = a->gs[2], g3 = a->gs[3];
  const int64_t d0 = a->ds[0], d1 = a->ds[1], d2 = a->ds[2], d3 = a->ds[3];
  OT_GPU_KERNEL(dev, (rows + NB_WARPS - 1) / NB_WARPS, 256,
                OT_DEVPTR(x, g, w, dx) firstprivate(ln, wdx, xdt, gdt, wdt, ddt, eps, rows, d, n1, n2, ws, x0, x1, x2, x3, g0, g1, g2, g3,
                                                    d0, d1, d2, d3))
  {
    const int tid = (int)OT_GPU_THREAD_ID(), lane = OT_WARP_LANE(tid);
    const int64_t r = (int64_t)OT_GPU_BLOCK_ID() * NB_WARPS + OT_WARP_INDEX(tid);
    if (r < rows) { /* uniform per warp; no block barrier below */
      const int64_t xo = ot_krow_off(r, n1, n2, x0, x1, x2), go = ot_krow_off(r, n1, n2, g0, g1, g2),
                    dO = ot_krow_off(r, n1, n2, d0, d1, d2);
#define XR(c) ot_kld(xdt, x, xo + (c) * x3)
#define GR(c) ot_kld(gdt, g, go + (c) * g3)
#define WR(c) ot_kld(wdt, w, (c) * ws)
      float mean = 0.0f;
      if (ln) {
        float s = 0.0f;
        for (int64_t c = lane; c < d; c += OT_WARP_SIZE) s += XR(c);
        mean = ot_warp_sum(s) / (float)d;
      }
      float ss = 0.0f;
      for (int64_t c = lane; c < d; c += OT_WARP_SIZE) {
        const float v = XR(c) - mean;
        ss += v * v;
      }
      const float rs = 1.0f / sqrtf(ot_warp_sum(ss) / (float)d + eps);
      if (!wdx) {
        for (int64_t c = lane; c < d; c += OT_WARP_SIZE) ot_kst(ddt, dx, dO + c * d3, (XR(c) - mean) * rs);
      } else {
        float sg = 0.0f, sgx = 0.0f;
        for (int64_t c = lane; c < d; c += OT_WARP_SIZE) {
          const float gv = WR(c) * GR(c);
          sg += gv;
          sgx += gv * (XR(c) - mean) * rs;
        }
        const float mg = ln ? ot_warp_sum(sg) / (float)d : 0.0f, mgx = ot_warp_sum(sgx) / (float)d;
        for (int64_t c = lane; c < d; c += OT_WARP_SIZE) {
          const float xh = (XR(c) - mean) * rs;
          ot_kst(ddt, dx, dO + c * d3, rs * (WR(c) * GR(c) - mg - xh * mgx));
        }
      }
    }
  }
}
#undef XR
#undef GR
#undef WR

/* ---- rows of up to 1024 elements in registers ---------------------------------------
 * The loop above loads one element per lane per step and reads x up to four
 * times (330 us of GPT-2's 400 us layernorm backward on the H200). Here a
 * warp still owns a row, but each lane holds up to NB_NV octets of it
 * (octet c = lane + OT_WARP_SIZE i), loaded once with 16-byte accesses; same formulas,
 * sums in another fixed order. x and dy share a dtype; w is f32 or that
 * dtype; dx any of f32/f16/bf16. */
#define NB_NV 4

#define NB8(X, D)                                                                                              \
  static void nb8_##X##_##D(int dev, const ot_knorm_bwd_gpu_args *a) {                                         \
    const void *x = a->x, *g = a->g, *w = a->w;                                                                \
    void *dx = a->dx;                                                                                          \
    const int ln = a->layer, wdx = a->write_dx, w32 = a->wdt == OT_F32;                                        \
    const float eps = a->eps;                                                                                  \
    const int64_t rows = a->rows, d = a->d, n1 = a->n1, n2 = a->n2;                                            \
    const int64_t x0 = a->xs[0], x1 = a->xs[1], x2 = a->xs[2], g0 = a->gs[0], g1 = a->gs[1], g2 = a->gs[2];    \
    const int64_t d0 = a->ds[0], d1 = a->ds[1], d2 = a->ds[2];                                                 \
    OT_GPU_KERNEL(dev, (rows + NB_WARPS - 1) / NB_WARPS, 256,                                                  \
                  OT_DEVPTR(x, g, w, dx) firstprivate(ln, wdx, w32, eps, rows, d, n1, n2, x0, x1, x2, g0, g1, g2, \
                                                      d0, d1, d2))                                             \
    {                                                                                                          \
      const int tid = (int)OT_GPU_THREAD_ID(), lane = OT_WARP_LANE(tid);                                       \
      const int64_t r = (int64_t)OT_GPU_BLOCK_ID() * NB_WARPS + OT_WARP_INDEX(tid), nv = d / OT_KV;            \
      if (r < rows) { /* uniform per warp; no block barrier below */                                          \
        const int64_t xo = ot_krow_off(r, n1, n2, x0, x1, x2), go = ot_krow_off(r, n1, n2, g0, g1, g2),        \
                      dO = ot_krow_off(r, n1, n2, d0, d1, d2);                                                 \
        float xv[NB_NV][OT_KV];                                                                                \
        float s = 0.0f;                                                                                        \
        OT_UNROLL                                                                                              \
        for (int i = 0; i < NB_NV; i++) {                                                                      \
          const int64_t c = lane + OT_WARP_SIZE * i;                                                           \
          if (c < nv) {                                                                                        \
            ot_kld8_##X(x, xo + c * OT_KV, xv[i]);                                                             \
          } else {                                                                                             \
            OT_UNROLL                                                                                          \
            for (int k = 0; k < OT_KV; k++) xv[i][k] = 0.0f;                                                   \
          }                                                                                                    \
          OT_UNROLL                                                                                            \
          for (int k = 0; k < OT_KV; k++) s += xv[i][k];                                                       \
        }                                                                                                      \
        const float mean = ln ? ot_warp_sum(s) / (float)d : 0.0f;                                              \
        float ss = 0.0f;                                                                                       \
        OT_UNROLL                                                                                              \
        for (int i = 0; i < NB_NV; i++)                                                                        \
          if (lane + OT_WARP_SIZE * i < nv) {                                                                  \
            OT_UNROLL                                                                                          \
            for (int k = 0; k < OT_KV; k++) {                                                                  \
              const float v = xv[i][k] - mean;                                                                 \
              ss += v * v;                                                                                     \
            }                                                                                                  \
          }                                                                                                    \
        const float rs = 1.0f / sqrtf(ot_warp_sum(ss) / (float)d + eps);                                       \
        if (!wdx) {                                                                                            \
          OT_UNROLL                                                                                            \
          for (int i = 0; i < NB_NV; i++) {                                                                    \
            const int64_t c = lane + OT_WARP_SIZE * i;                                                         \
            if (c < nv) {                                                                                      \
              float o[OT_KV];                                                                                  \
              OT_UNROLL                                                                                        \
              for (int k = 0; k < OT_KV; k++) o[k] = (xv[i][k] - mean) * rs;                                   \
              ot_kst8_##D(dx, dO + c * OT_KV, o);                                                              \
            }                                                                                                  \
          }                                                                                                    \
        } else {                                                                                               \
          float gw[NB_NV][OT_KV];                                                                              \
          float sg = 0.0f, sgx = 0.0f;                                                                         \
          OT_UNROLL                                                                                            \
          for (int i = 0; i < NB_NV; i++) {                                                                    \
            const int64_t c = lane + OT_WARP_SIZE * i;                                                         \
            if (c < nv) {                                                                                      \
              float wv[OT_KV];                                                                                 \
              ot_kld8_##X(g, go + c * OT_KV, gw[i]);                                                           \
              if (w32) ot_kld8_f32(w, c * OT_KV, wv);                                                          \
              else ot_kld8_##X(w, c * OT_KV, wv);                                                              \
              OT_UNROLL                                                                                        \
              for (int k = 0; k < OT_KV; k++) {                                                                \
                const float gv = wv[k] * gw[i][k];                                                             \
                gw[i][k] = gv;                                                                                 \
                sg += gv;                                                                                      \
                sgx += gv * (xv[i][k] - mean) * rs;                                                            \
              }                                                                                                \
            }                                                                                                  \
          }                                                                                                    \
          const float mg = ln ? ot_warp_sum(sg) / (float)d : 0.0f, mgx = ot_warp_sum(sgx) / (float)d;          \
          OT_UNROLL                                                                                            \
          for (int i = 0; i < NB_NV; i++) {                                                                    \
            const int64_t c = lane + OT_WARP_SIZE * i;                                                         \
            if (c < nv) {                                                                                      \
              float o[OT_KV];                                                                                  \
              OT_UNROLL                                                                                        \
              for (int k = 0; k < OT_KV; k++) {                                                                \
                const float xh = (xv[i][k] - mean) * rs;                                                       \
                o[k] = rs * (gw[i][k] - mg - xh * mgx);                                                        \
              }                                                                                                \
              ot_kst8_##D(dx, dO + c * OT_KV, o);                                                              \
            }                                                                                                  \
          }                                                                                                    \
        }                                                                                                      \
      }                                                                                                        \
    }                                                                                                          \
  }

NB8(f32, f32)
NB8(bf16, f32)
NB8(bf16, bf16)
NB8(f16, f32)
NB8(f16, f16)
#undef NB8

int ot_knorm_bwd8_gpu(int dev, const ot_knorm_bwd_gpu_args *a) {
  const int64_t xe = ot_kfloat_bytes(a->xdt), de = ot_kfloat_bytes(a->ddt), d = a->d;
  if (!ot_kfast_gpu(dev) || !xe || !de || a->gdt != a->xdt || (a->wdt != OT_F32 && a->wdt != a->xdt)) return 0;
  if (d % OT_KV != 0 || d > OT_WARP_SIZE * NB_NV * OT_KV) return 0;
  if (a->xs[3] != 1 || a->gs[3] != 1 || a->ds[3] != 1 || a->ws != 1) return 0;
  const int64_t ne[3] = {a->rows / (a->n1 * a->n2), a->n1, a->n2};
  const int64_t we = ot_kfloat_bytes(a->wdt);
  if (!ot_kalign16(a->x, 0, xe) || !ot_kalign16(a->g, 0, xe) || !ot_kalign16(a->dx, 0, de) ||
      !ot_kalign16(a->w, 0, we) || !ot_kstrides16(3, ne, a->xs, xe) || !ot_kstrides16(3, ne, a->gs, xe) ||
      !ot_kstrides16(3, ne, a->ds, de))
    return 0;
  const int x = a->xdt, dd = a->ddt;
  if (x == OT_F32 && dd == OT_F32) nb8_f32_f32(dev, a);
  else if (x == OT_BF16 && dd == OT_F32) nb8_bf16_f32(dev, a);
  else if (x == OT_BF16 && dd == OT_BF16) nb8_bf16_bf16(dev, a);
  else if (x == OT_F16 && dd == OT_F32) nb8_f16_f32(dev, a);
  else if (x == OT_F16 && dd == OT_F16) nb8_f16_f16(dev, a);
  else return 0;
  return 1;
}
