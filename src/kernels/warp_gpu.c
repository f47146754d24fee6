/* warp_gpu.c — row kernels for a GPU with one warp per row: the shapes of
 * decode (one token: a handful of rows) leave the portable team-per-row
 * kernels (norm.c, attention.c) with a single team in OpenMP's generic mode,
 * 80-220 us each on the H200 for a few KiB of data. A warp per row needs no
 * shared memory and no barriers: lanes stride over the row, shuffles reduce.
 * Used only on GPU devices, for f32 rows with a unit last stride; everything
 * else takes the portable kernels, which remain the reference behaviour. */
#include <ompx.h>

#include "kernels/kcommon.h"
#include "kernels/warp_gpu.h"

#define WARPS 8 /* rows per block of 256 threads */

OT_DECLARE_TARGET_BEGIN
static inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += ompx_shfl_down_sync_f(~0ull, v, (unsigned)o, 32);
#ifdef __NVPTX__
  v = __nvvm_shfl_sync_idx_f32(0xffffffffu, v, 0, 0x1f); /* every lane gets lane 0's total */
#endif
  return v; /* (the host never runs these kernels: see ot_kfast_gpu) */
}
OT_DECLARE_TARGET_END

void ot_knorm_gpu(int dev, int layer, float *y, int64_t ys, const float *x, int64_t xs, const float *w, const float *b,
                  int64_t rows, int64_t d, float eps) {
  const int64_t nteams = (rows + WARPS - 1) / WARPS;
  const int ln = layer;
  OT_GPU_KERNEL(dev, nteams, WARPS * 32, OT_DEVPTR(y, x, w, b) firstprivate(ys, xs, rows, d, eps, ln))
  {
    const int lane = (int)(ompx_thread_id_x() & 31);
    const int64_t r = (int64_t)ompx_block_id_x() * WARPS + (ompx_thread_id_x() >> 5);
    if (r < rows) {
      const float *xr = x + r * xs;
      float mean = 0.0f;
      if (ln) {
        float s = 0.0f;
        for (int64_t c = lane; c < d; c += 32) s += xr[c];
        mean = warp_sum(s) / (float)d;
      }
      float ss = 0.0f;
      for (int64_t c = lane; c < d; c += 32) {
        const float v = xr[c] - mean;
        ss += v * v;
      }
      const float rs = 1.0f / sqrtf(warp_sum(ss) / (float)d + eps);
      float *yr = y + r * ys;
      for (int64_t c = lane; c < d; c += 32) yr[c] = (xr[c] - mean) * rs * w[c] + (ln ? b[c] : 0.0f);
    }
  }
}

void ot_kattn_gpu(int dev, float *out, int64_t o0, int64_t o1, const float *q, int64_t q0, int64_t q1, const float *k,
                  int64_t k0, int64_t k1, const float *v, int64_t v0, int64_t v1, int64_t S, int64_t H, int64_t KVH,
                  int64_t D, int64_t pos) {
  const int64_t nrows = S * H, nteams = (nrows + WARPS - 1) / WARPS, group = H / KVH;
  const int per = (int)(D / 32); /* dims per lane, <= OT_KATTN_MAX_D / 32 */
  const float scale = 1.0f / sqrtf((float)D);
  OT_GPU_KERNEL(dev, nteams, WARPS * 32,
                OT_DEVPTR(out, q, k, v) firstprivate(o0, o1, q0, q1, k0, k1, v0, v1, H, group, per, scale, pos, nrows))
  {
    const int lane = (int)(ompx_thread_id_x() & 31);
    const int64_t t = (int64_t)ompx_block_id_x() * WARPS + (ompx_thread_id_x() >> 5);
    if (t < nrows) {
      const int64_t s = t / H, h = t % H, kh = h / group, nkeys = pos + s + 1;
      float qv[OT_KATTN_MAX_D / 32], acc[OT_KATTN_MAX_D / 32];
      const float *qr = q + s * q0 + h * q1;
      for (int i = 0; i < per; i++) {
        qv[i] = qr[lane + 32 * i] * scale; /* lane holds dims lane, lane+32, ...: coalesced rows */
        acc[i] = 0.0f;
      }
      float mx = -INFINITY, sum = 0.0f;
      for (int64_t j = 0; j < nkeys; j++) {
        const float *kr = k + j * k0 + kh * k1, *vr = v + j * v0 + kh * v1;
        float dot = 0.0f;
        for (int i = 0; i < per; i++) dot += qv[i] * kr[lane + 32 * i];
        dot = warp_sum(dot);
        /* online softmax: rescale what was summed so far when the max grows */
        const float m2 = fmaxf(mx, dot), alpha = expf(mx - m2), p = expf(dot - m2);
        sum = sum * alpha + p;
        for (int i = 0; i < per; i++) acc[i] = acc[i] * alpha + p * vr[lane + 32 * i];
        mx = m2;
      }
      float *orow = out + s * o0 + h * o1;
      const float inv = 1.0f / sum;
      for (int i = 0; i < per; i++) orow[lane + 32 * i] = acc[i] * inv;
    }
  }
}
