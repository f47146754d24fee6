/* norm_bwd_gpu.c — the row passes of the norm backward (norm_bwd.c's
 * nb_row) as a warp per row on a GPU: the portable team-per-row passes run
 * in OpenMP's generic mode and took 33 ms per GPT-2 layernorm backward over
 * 2048 tokens on the H200. Lanes stride over the row (coalesced), shuffles
 * reduce; f32 only. Same formulas as nb_row, sums in another fixed order. */
#include "kernels/kcommon.h"
#include "kernels/warp_gpu.h"
#include "kernels/warp_ops.h"
#include "ot_gpu.h"

void ot_knorm_bwd_gpu(int dev, const ot_knorm_bwd_gpu_args *a) {
  const float *x = a->x, *g = a->g, *w = a->w;
  float *dx = a->dx;
  const int ln = a->layer, wdx = a->write_dx;
  const float eps = a->eps;
  const int64_t rows = a->rows, d = a->d, n1 = a->n1, n2 = a->n2, ws = a->ws;
  const int64_t x0 = a->xs[0], x1 = a->xs[1], x2 = a->xs[2], x3 = a->xs[3];
  const int64_t g0 = a->gs[0], g1 = a->gs[1], g2 = a->gs[2], g3 = a->gs[3];
  const int64_t d0 = a->ds[0], d1 = a->ds[1], d2 = a->ds[2], d3 = a->ds[3];
  OT_GPU_KERNEL(dev, (rows + 7) / 8, 256,
                OT_DEVPTR(x, g, w, dx) firstprivate(ln, wdx, eps, rows, d, n1, n2, ws, x0, x1, x2, x3, g0, g1, g2, g3,
                                                    d0, d1, d2, d3))
  {
    const int tid = (int)OT_GPU_THREAD_ID(), lane = tid & 31;
    const int64_t r = (int64_t)OT_GPU_BLOCK_ID() * 8 + (tid >> 5);
    if (r < rows) { /* uniform per warp; no block barrier below */
      const float *xr = x + ot_krow_off(r, n1, n2, x0, x1, x2);
      const float *gr = g + ot_krow_off(r, n1, n2, g0, g1, g2);
      float *dr = dx + ot_krow_off(r, n1, n2, d0, d1, d2);
      float mean = 0.0f;
      if (ln) {
        float s = 0.0f;
        for (int64_t c = lane; c < d; c += 32) s += xr[c * x3];
        mean = ot_warp_sum(s) / (float)d;
      }
      float ss = 0.0f;
      for (int64_t c = lane; c < d; c += 32) {
        const float v = xr[c * x3] - mean;
        ss += v * v;
      }
      const float rs = 1.0f / sqrtf(ot_warp_sum(ss) / (float)d + eps);
      if (!wdx) {
        for (int64_t c = lane; c < d; c += 32) dr[c * d3] = (xr[c * x3] - mean) * rs;
      } else {
        float sg = 0.0f, sgx = 0.0f;
        for (int64_t c = lane; c < d; c += 32) {
          const float gv = w[c * ws] * gr[c * g3];
          sg += gv;
          sgx += gv * (xr[c * x3] - mean) * rs;
        }
        const float mg = ln ? ot_warp_sum(sg) / (float)d : 0.0f, mgx = ot_warp_sum(sgx) / (float)d;
        for (int64_t c = lane; c < d; c += 32) {
          const float xh = (xr[c * x3] - mean) * rs;
          dr[c * d3] = rs * (w[c * ws] * gr[c * g3] - mg - xh * mgx);
        }
      }
    }
  }
}
