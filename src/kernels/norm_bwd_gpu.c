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

void ot_knorm_bwd_gpu(int dev, const ot_knorm_bwd_gpu_args *a) {
  const void *x = a->x, *g = a->g, *w = a->w;
  void *dx = a->dx;
  const int ln = a->layer, wdx = a->write_dx, xdt = a->xdt, gdt = a->gdt, wdt = a->wdt, ddt = a->ddt;
  const float eps = a->eps;
  const int64_t rows = a->rows, d = a->d, n1 = a->n1, n2 = a->n2, ws = a->ws;
  const int64_t x0 = a->xs[0], x1 = a->xs[1], x2 = a->xs[2], x3 = a->xs[3];
  const int64_t g0 = a->gs[0], g1 = a->gs[1], g2 = a->gs[2], g3 = a->gs[3];
  const int64_t d0 = a->ds[0], d1 = a->ds[1], d2 = a->ds[2], d3 = a->ds[3];
  OT_GPU_KERNEL(dev, (rows + 7) / 8, 256,
                OT_DEVPTR(x, g, w, dx) firstprivate(ln, wdx, xdt, gdt, wdt, ddt, eps, rows, d, n1, n2, ws, x0, x1, x2, x3, g0, g1, g2, g3,
                                                    d0, d1, d2, d3))
  {
    const int tid = (int)OT_GPU_THREAD_ID(), lane = tid & 31;
    const int64_t r = (int64_t)OT_GPU_BLOCK_ID() * 8 + (tid >> 5);
    if (r < rows) { /* uniform per warp; no block barrier below */
      const int64_t xo = ot_krow_off(r, n1, n2, x0, x1, x2), go = ot_krow_off(r, n1, n2, g0, g1, g2),
                    dO = ot_krow_off(r, n1, n2, d0, d1, d2);
#define XR(c) ot_kld(xdt, x, xo + (c) * x3)
#define GR(c) ot_kld(gdt, g, go + (c) * g3)
#define WR(c) ot_kld(wdt, w, (c) * ws)
      float mean = 0.0f;
      if (ln) {
        float s = 0.0f;
        for (int64_t c = lane; c < d; c += 32) s += XR(c);
        mean = ot_warp_sum(s) / (float)d;
      }
      float ss = 0.0f;
      for (int64_t c = lane; c < d; c += 32) {
        const float v = XR(c) - mean;
        ss += v * v;
      }
      const float rs = 1.0f / sqrtf(ot_warp_sum(ss) / (float)d + eps);
      if (!wdx) {
        for (int64_t c = lane; c < d; c += 32) ot_kst(ddt, dx, dO + c * d3, (XR(c) - mean) * rs);
      } else {
        float sg = 0.0f, sgx = 0.0f;
        for (int64_t c = lane; c < d; c += 32) {
          const float gv = WR(c) * GR(c);
          sg += gv;
          sgx += gv * (XR(c) - mean) * rs;
        }
        const float mg = ln ? ot_warp_sum(sg) / (float)d : 0.0f, mgx = ot_warp_sum(sgx) / (float)d;
        for (int64_t c = lane; c < d; c += 32) {
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

