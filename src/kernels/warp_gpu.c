/* warp_gpu.c — row kernels for a GPU with one warp per row: the shapes of
 * decode (one token: a handful of rows) leave the portable team-per-row
 * kernels (norm.c, attention.c) with a single team in OpenMP's generic mode,
 * 80-220 us each on the H200 for a few KiB of data. A warp per row needs no
 * shared memory and no barriers: lanes stride over the row, shuffles reduce.
 * Used only on GPU devices, for f32 rows with a unit last stride; everything
 * else takes the portable kernels, which remain the reference behaviour. */
#include "kernels/kcommon.h"
#include "kernels/warp_gpu.h"
#include "kernels/warp_ops.h"
#include "ot_gpu.h"

#define WARPS (256 / OT_WARP_SIZE) /* warps per block of 256 threads */

typedef struct __attribute__((aligned(16))) f4 {
  float x, y, z, w;
} f4;

/* One block of 256 threads per row: each thread holds up to NV float4 of the
 * row in registers (d <= 256 * 4 * NV), so the row is read once; the two
 * reductions go through shuffles and 8 shared partials. A single decode row
 * then costs two short passes instead of a latency-bound warp loop. */
#define NV 8
void ot_knorm_gpu(int dev, int layer, float *y, int64_t ys, const float *x, int64_t xs, const float *w, const float *b,
                  int64_t rows, int64_t d, float eps) {
  const int ln = layer;
  const int64_t nvec = d / 4;
  OT_GPU_KERNEL(dev, rows, 256, OT_DEVPTR(y, x, w, b) firstprivate(ys, xs, nvec, d, eps, ln))
  {
    float red[WARPS];
    OT_TEAM_SHARED(red)
    const int tid = (int)OT_GPU_THREAD_ID(), lane = OT_WARP_LANE(tid), warp = OT_WARP_INDEX(tid);
    const int64_t r = OT_GPU_BLOCK_ID();
    const f4 *xr = (const f4 *)(x + r * xs);
    f4 v[NV];
    float s = 0.0f;
    for (int i = 0; i < NV; i++) {
      const int64_t c = tid + 256 * i;
      v[i] = c < nvec ? xr[c] : (f4){0, 0, 0, 0};
      s += v[i].x + v[i].y + v[i].z + v[i].w;
    }
    float mean = 0.0f;
    if (ln) {
      for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) s += OT_WARP_SHFL_DOWN(s, o);
      if (lane == 0) red[warp] = s;
      OT_GPU_BLOCK_SYNC();
      float t = 0.0f;
      for (int i = 0; i < WARPS; i++) t += red[i];
      mean = t / (float)d;
      OT_GPU_BLOCK_SYNC(); /* red is reused below */
    }
    float ss = 0.0f;
    for (int i = 0; i < NV; i++)
      if (tid + 256 * i < nvec) {
        const float a = v[i].x - mean, bb = v[i].y - mean, c = v[i].z - mean, e = v[i].w - mean;
        ss += a * a + bb * bb + c * c + e * e;
      }
    for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) ss += OT_WARP_SHFL_DOWN(ss, o);
    if (lane == 0) red[warp] = ss;
    OT_GPU_BLOCK_SYNC();
    float t = 0.0f;
    for (int i = 0; i < WARPS; i++) t += red[i];
    const float rs = 1.0f / sqrtf(t / (float)d + eps);
    f4 *yr = (f4 *)(y + r * ys);
    const f4 *wv = (const f4 *)w, *bv = (const f4 *)b;
    for (int i = 0; i < NV; i++) {
      const int64_t c = tid + 256 * i;
      if (c < nvec) {
        const f4 g = wv[c], bb = ln ? bv[c] : (f4){0, 0, 0, 0};
        yr[c] = (f4){(v[i].x - mean) * rs * g.x + bb.x, (v[i].y - mean) * rs * g.y + bb.y,
                     (v[i].z - mean) * rs * g.z + bb.z, (v[i].w - mean) * rs * g.w + bb.w};
      }
    }
  }
}

int ot_knorm_gpu_ok(const void *y, int64_t ys, const void *x, int64_t xs, const void *w, const void *b, int64_t d) {
  return d % 4 == 0 && d <= 256 * 4 * NV && ys % 4 == 0 && xs % 4 == 0 && (uintptr_t)y % 16 == 0 &&
         (uintptr_t)x % 16 == 0 && (uintptr_t)w % 16 == 0 && (!b || (uintptr_t)b % 16 == 0);
}

/* Decode attention: one block of 8 warps per (query row, head). Warp w takes
 * key tiles w, w+8, ... of 32 keys; within a tile each lane scores one key
 * (its dot product over head_dim, q from shared memory), the warp does one
 * max/sum reduction per tile (not per key), then lanes own head_dim slices of
 * the output and accumulate the tile's V rows, read coalesced. The 8 warps'
 * partial (max, sum, acc) are merged through shared memory at the end. */

int ot_kattn_gpu_ok(int kvdt, const void *k, int64_t k0, int64_t k1, int64_t D) {
  if (D % OT_WARP_SIZE || D > OT_KATTN_MAX_D || (uintptr_t)k % 16) return 0;
  if (kvdt == OT_F32) return k0 % 4 == 0 && k1 % 4 == 0;
  return (kvdt == OT_BF16 || kvdt == OT_F16) && k0 % 8 == 0 && k1 % 8 == 0;
}

/* The kernel of ot_kattn_gpu and ot_kattn_rows_gpu. rows NULL: row s of q
 * is position pos + s of the one cache. rows given: row s is (slot, position)
 * rows[s * r0], rows[s * r0 + r1] of caches [NS, P, KVH, D] (slot strides
 * ks, vs); a row outside them is padding, its output 0. out's dtype odt. */
static void kattn(int dev, void *out, int odt, int64_t o0, int64_t o1, const float *q, int64_t q0, int64_t q1,
                  const void *k, int64_t k0, int64_t k1, const void *v, int64_t v0, int64_t v1, int kvdt, int64_t S,
                  int64_t H, int64_t KVH, int64_t D, int64_t pos, int64_t window, const int32_t *rows, int64_t r0,
                  int64_t r1, int64_t ks, int64_t vs, int64_t NS, int64_t P) {
  const int64_t nrows = S * H, group = H / KVH;
  const int per = (int)(D / OT_WARP_SIZE); /* dims per lane, <= OT_KATTN_MAX_D / OT_WARP_SIZE */
  const int dd = (int)D, by_row = rows != NULL;
  const float scale = 1.0f / sqrtf((float)D);
  OT_GPU_KERNEL(dev, nrows, 256,
                OT_DEVPTR(out, q, k, v, rows) firstprivate(o0, o1, q0, q1, k0, k1, v0, v1, kvdt, H, group, per, dd, scale,
                                                           pos, window, odt, by_row, r0, r1, ks, vs, NS, P))
  {
    float qs[OT_KATTN_MAX_D] __attribute__((aligned(16))), wm[WARPS], wl[WARPS], wacc[WARPS][OT_KATTN_MAX_D];
    OT_TEAM_SHARED(qs, wm, wl, wacc)
    const int tid = (int)OT_GPU_THREAD_ID(), lane = OT_WARP_LANE(tid), warp = OT_WARP_INDEX(tid);
    const int64_t t = OT_GPU_BLOCK_ID(), s = t / H, h = t % H, kh = h / group;
    int64_t nkeys = pos + s + 1, kb = kh * k1, vb = kh * v1;
    if (by_row) { /* its own slot and position (attention_rows.c) */
      const int64_t slot = rows[s * r0], p = rows[s * r0 + r1];
      const int live = slot >= 0 && slot < NS && p >= 0 && p < P;
      nkeys = live ? p + 1 : 0;
      kb += live ? slot * ks : 0;
      vb += live ? slot * vs : 0;
    }
    const int64_t first = window && nkeys > window ? nkeys - window : 0; /* the oldest key the row sees */
    const float *qr = q + s * q0 + h * q1;
    for (int d = tid; d < dd; d += 256) qs[d] = qr[d] * scale;
    OT_GPU_BLOCK_SYNC();
    float acc[OT_KATTN_MAX_D / OT_WARP_SIZE], mx = -INFINITY, sum = 0.0f;
    /* loops over acc unrolled to its full size (i < per inside): indexed at run time it goes to local memory */
    OT_UNROLL for (int i = 0; i < OT_KATTN_MAX_D / OT_WARP_SIZE; i++) acc[i] = 0.0f;
    for (int64_t j0 = first + (int64_t)warp * OT_WARP_SIZE; j0 < nkeys; j0 += WARPS * OT_WARP_SIZE) {
      const int64_t j = j0 + lane;
      float sc = -INFINITY;
      if (j < nkeys) { /* rows are 16-byte aligned: ot_kattn_gpu_ok */
        float dot = 0.0f;
        OT_KKV_DOT(dot, kvdt, k, j * k0 + kb, qs, dd);
        sc = dot;
      }
      const float m2 = fmaxf(mx, ot_warp_max(sc)), alpha = expf(mx - m2);
      const float p = j < nkeys ? expf(sc - m2) : 0.0f;
      float ps = p;
      for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) ps += OT_WARP_SHFL_DOWN(ps, o);
      sum = sum * alpha + ot_warp_bcast(ps, 0);
      OT_UNROLL for (int i = 0; i < OT_KATTN_MAX_D / OT_WARP_SIZE; i++) acc[i] *= alpha;
      const int64_t nj = nkeys - j0 < OT_WARP_SIZE ? nkeys - j0 : OT_WARP_SIZE;
      for (int jj = 0; jj < nj; jj++) {
        const float pj = ot_warp_bcast(p, jj);
        const int64_t vo = (j0 + jj) * v0 + vb + lane;
        OT_UNROLL for (int i = 0; i < OT_KATTN_MAX_D / OT_WARP_SIZE; i++)
          if (i < per) acc[i] += pj * OT_KKV_LD(kvdt, v, vo + OT_WARP_SIZE * i);
      }
      mx = m2;
    }
    /* merge the warps: rescale each to the overall max */
    if (lane == 0) {
      wm[warp] = mx;
      wl[warp] = sum;
    }
    OT_UNROLL for (int i = 0; i < OT_KATTN_MAX_D / OT_WARP_SIZE; i++)
      if (i < per) wacc[warp][lane + OT_WARP_SIZE * i] = acc[i];
    OT_GPU_BLOCK_SYNC();
    float M = -INFINITY;
    for (int w = 0; w < WARPS; w++) M = fmaxf(M, wm[w]);
    float L = 0.0f;
    for (int w = 0; w < WARPS; w++) L += wm[w] == -INFINITY ? 0.0f : wl[w] * expf(wm[w] - M);
    const int64_t ob = s * o0 + h * o1;
    for (int d = tid; d < dd; d += 256) {
      float a = 0.0f;
      for (int w = 0; w < WARPS; w++) a += wm[w] == -INFINITY ? 0.0f : wacc[w][d] * expf(wm[w] - M);
      const float r = L > 0.0f ? a / L : 0.0f; /* L = 0: a padding row, no keys */
      if (odt == OT_F32) ((float *)out)[ob + d] = r;
      else ot_kst(odt, out, ob + d, r);
    }
  }
}

void ot_kattn_gpu(int dev, float *out, int64_t o0, int64_t o1, const float *q, int64_t q0, int64_t q1, const void *k,
                  int64_t k0, int64_t k1, const void *v, int64_t v0, int64_t v1, int kvdt, int64_t S, int64_t H,
                  int64_t KVH, int64_t D, int64_t pos, int64_t window) {
  kattn(dev, out, OT_F32, o0, o1, q, q0, q1, k, k0, k1, v, v0, v1, kvdt, S, H, KVH, D, pos, window, NULL, 0, 0, 0, 0, 0,
        0);
}

void ot_kattn_rows_gpu(int dev, void *out, int odt, int64_t o0, int64_t o1, const float *q, int64_t q0, int64_t q1,
                       const void *k, int64_t ks, int64_t k0, int64_t k1, const void *v, int64_t vs, int64_t v0,
                       int64_t v1, int kvdt, int64_t S, int64_t H, int64_t NS, int64_t P, int64_t KVH, int64_t D,
                       const int32_t *rows, int64_t r0, int64_t r1, int64_t window) {
  kattn(dev, out, odt, o0, o1, q, q0, q1, k, k0, k1, v, v0, v1, kvdt, S, H, KVH, D, 0, window, rows, r0, r1, ks, vs, NS,
        P);
}
