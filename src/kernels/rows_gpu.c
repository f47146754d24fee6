/* rows_gpu.c — RMSNorm/LayerNorm and softmax rows on a GPU, one block of 256
 * threads per row, specialized per dtype combination at compile time. The
 * portable team-per-row kernels run in OpenMP's generic mode and load one
 * element at a time through a dtype switch: bf16 norms reached 4-6 % and
 * softmax 11 % of copy bandwidth on the H200 (bench/RESULTS.md). Here each
 * thread holds 1, 2 or 4 octets of the row in registers, loaded with 16-byte
 * accesses (kcommon.h's ot_kld8_*), so the row is read once; block sums and
 * maxima go through warp shuffles and 8 shared partials.
 *
 * f32 norms keep warp_gpu.c's kernel (ot_knorm_gpu); these take bf16/f16
 * rows and the f32 rows with a bf16/f16 output (Llama's prefill). Same
 * formulas as norm.c and softmax.c, sums in another fixed order. */
#include "kernels/rows_gpu.h"

#include "kernels/kcommon.h"
#include "kernels/warp_ops.h"
#include "ot_gpu.h"

#define RT 256       /* threads per block (a row) */
#define RW (RT / OT_WARP_SIZE) /* warps per block */
/* Each kernel is built for NV = 1, 2 and 4 octets per thread (rows of up to
 * 2048, 4096, 8192 elements): the registers a row takes bound how many rows
 * an SM keeps in flight, so short rows take the smallest NV (ptxas, sm_90:
 * about 60 registers at NV 2, 90 at NV 4). */
static int rows_nv_index(int64_t d) { return d <= RT * OT_KV ? 0 : d <= 2 * RT * OT_KV ? 1 : 2; }

int ot_krows8_ok(int dev, int xdt, const void *x, const int64_t *xs, int ydt, const void *y, const int64_t *ys,
                 const int64_t *ne, int vdt, const void *w, const void *b, int64_t vs) {
  const int64_t xe = ot_kfloat_bytes(xdt), ye = ot_kfloat_bytes(ydt), d = ne[3];
  if (!ot_kfast_gpu(dev) || !xe || !ye || xs[3] != 1 || ys[3] != 1 || d % OT_KV != 0 || d > OT_KROWS8_MAX_D)
    return 0;
  if (ne[0] * ne[1] * ne[2] > INT32_MAX) return 0; /* one block per row */
  if (!ot_kalign16(x, 0, xe) || !ot_kalign16(y, 0, ye) || !ot_kstrides16(3, ne, xs, xe) ||
      !ot_kstrides16(3, ne, ys, ye))
    return 0;
  if (w) {
    const int64_t ve = ot_kfloat_bytes(vdt);
    if (!ve || vs != 1 || !ot_kalign16(w, 0, ve) || (b && !ot_kalign16(b, 0, ve))) return 0;
  }
  return 1;
}

OT_DECLARE_TARGET_BEGIN
/* Sum / max of v over the block: every thread gets it. red: RW team-shared
 * floats, free again on return (every thread passes both barriers). */
static inline float rows_sum(float v, float *red, int lane, int warp) {
  for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) v += OT_WARP_SHFL_DOWN(v, o);
  if (lane == 0) red[warp] = v;
  OT_GPU_BLOCK_SYNC();
  float t = 0.0f;
  for (int i = 0; i < RW; i++) t += red[i];
  OT_GPU_BLOCK_SYNC();
  return t;
}

static inline float rows_max(float v, float *red, int lane, int warp) {
  for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) v = fmaxf(v, OT_WARP_SHFL_DOWN(v, o));
  if (lane == 0) red[warp] = v;
  OT_GPU_BLOCK_SYNC();
  float t = -INFINITY;
  for (int i = 0; i < RW; i++) t = fmaxf(t, red[i]);
  OT_GPU_BLOCK_SYNC();
  return t;
}
OT_DECLARE_TARGET_END

/* ---- RMSNorm / LayerNorm ------------------------------------------------------------
 * norm8_<X>_<W>_<Y>: x [rows, d] in X, w (and b) [d] in W, y in Y. Octet c
 * of the row (elements 8c .. 8c+7) belongs to thread c % 256. */
#define NORM8(NV, X, W, Y)                                                                                         \
  static void norm8_##NV##_##X##_##W##_##Y(int dev, int ln, void *y, const void *x, const void *w, const void *b,     \
                                     ot_krows8 L, float eps) {                                                 \
    OT_GPU_KERNEL(dev, (int)L.rows, RT, OT_DEVPTR(y, x, w, b) firstprivate(L, ln, eps))                        \
    {                                                                                                          \
      float red[RW];                                                                                           \
      OT_TEAM_SHARED(red)                                                                                      \
      const int tid = (int)OT_GPU_THREAD_ID(), lane = OT_WARP_LANE(tid), warp = OT_WARP_INDEX(tid);            \
      const int64_t r = OT_GPU_BLOCK_ID(), nv = L.d / OT_KV;                                                   \
      const int64_t xo = ot_krow_off(r, L.n1, L.n2, L.xs[0], L.xs[1], L.xs[2]);                                \
      const int64_t yo = ot_krow_off(r, L.n1, L.n2, L.ys[0], L.ys[1], L.ys[2]);                                \
      float v[NV][OT_KV];                                                                                     \
      float s = 0.0f;                                                                                          \
      OT_UNROLL                                                                                                \
      for (int i = 0; i < NV; i++) {                                                                          \
        const int64_t c = tid + (int64_t)RT * i;                                                               \
        if (c < nv) {                                                                                          \
          ot_kld8_##X(x, xo + c * OT_KV, v[i]);                                                                \
        } else {                                                                                               \
          OT_UNROLL                                                                                            \
          for (int k = 0; k < OT_KV; k++) v[i][k] = 0.0f;                                                      \
        }                                                                                                      \
        OT_UNROLL                                                                                              \
        for (int k = 0; k < OT_KV; k++) s += v[i][k];                                                          \
      }                                                                                                        \
      const float mean = ln ? rows_sum(s, red, lane, warp) / (float)L.d : 0.0f;                                \
      float ss = 0.0f;                                                                                         \
      OT_UNROLL                                                                                                \
      for (int i = 0; i < NV; i++)                                                                            \
        if (tid + (int64_t)RT * i < nv) {                                                                      \
          OT_UNROLL                                                                                            \
          for (int k = 0; k < OT_KV; k++) {                                                                    \
            const float a = v[i][k] - mean;                                                                    \
            ss += a * a;                                                                                       \
          }                                                                                                    \
        }                                                                                                      \
      const float rs = 1.0f / sqrtf(rows_sum(ss, red, lane, warp) / (float)L.d + eps);                         \
      OT_UNROLL                                                                                                \
      for (int i = 0; i < NV; i++) {                                                                          \
        const int64_t c = tid + (int64_t)RT * i;                                                               \
        if (c < nv) {                                                                                          \
          float g[OT_KV], h[OT_KV];                                                                            \
          ot_kld8_##W(w, c * OT_KV, g);                                                                        \
          if (ln) {                                                                                            \
            ot_kld8_##W(b, c * OT_KV, h);                                                                      \
          } else {                                                                                             \
            OT_UNROLL                                                                                          \
            for (int k = 0; k < OT_KV; k++) h[k] = 0.0f;                                                       \
          }                                                                                                    \
          OT_UNROLL                                                                                            \
          for (int k = 0; k < OT_KV; k++) {                                                                    \
            float o = (v[i][k] - mean) * rs * g[k];                                                            \
            if (ln) o += h[k];                                                                                 \
            v[i][k] = o;                                                                                       \
          }                                                                                                    \
          ot_kst8_##Y(y, yo + c * OT_KV, v[i]);                                                                \
        }                                                                                                      \
      }                                                                                                        \
    }                                                                                                          \
  }
#define NORM8_ALL(X, W, Y) NORM8(1, X, W, Y) NORM8(2, X, W, Y) NORM8(4, X, W, Y)
NORM8_ALL(bf16, bf16, bf16)
NORM8_ALL(f16, f16, f16)
NORM8_ALL(bf16, f32, bf16)
NORM8_ALL(f16, f32, f16)
NORM8_ALL(f32, f32, bf16)
NORM8_ALL(f32, f32, f16)
#undef NORM8_ALL
#undef NORM8

typedef void (*norm8_fn)(int dev, int ln, void *y, const void *x, const void *w, const void *b, ot_krows8 L,
                         float eps);
#define NORM8_ROW(X, W, Y) {OT_##X, OT_##W, OT_##Y, {norm8_1_##X##_##W##_##Y, norm8_2_##X##_##W##_##Y, norm8_4_##X##_##W##_##Y}}
#define OT_f32 OT_F32
#define OT_bf16 OT_BF16
#define OT_f16 OT_F16
static const struct {
  int x, w, y;
  norm8_fn f[3]; /* NV 1, 2, 4 */
} norm8_table[] = {
    NORM8_ROW(bf16, bf16, bf16), NORM8_ROW(f16, f16, f16), NORM8_ROW(bf16, f32, bf16),
    NORM8_ROW(f16, f32, f16),    NORM8_ROW(f32, f32, bf16), NORM8_ROW(f32, f32, f16),
};
#undef NORM8_ROW

int ot_knorm8_pick(int xdt, int wdt, int ydt) {
  for (int i = 0; i < (int)(sizeof norm8_table / sizeof norm8_table[0]); i++)
    if (norm8_table[i].x == xdt && norm8_table[i].w == wdt && norm8_table[i].y == ydt) return i;
  return -1;
}

void ot_knorm8_gpu(int dev, int pick, int layer, void *y, const void *x, const void *w, const void *b,
                   const ot_krows8 *rl, float eps) {
  norm8_table[pick].f[rows_nv_index(rl->d)](dev, layer, y, x, w, layer ? b : w, *rl, eps);
}

/* ---- softmax -------------------------------------------------------------------------
 * sm8_<X>_<Y>: y = softmax(scale * x) over the first m columns of each row
 * (ot_ksm_ncols), 0 after them. */
#define SM8(NV, X, Y)                                                                                              \
  static void sm8_##NV##_##X##_##Y(int dev, void *y, const void *x, ot_krows8 L, float scale, int causal) {            \
    OT_GPU_KERNEL(dev, (int)L.rows, RT, OT_DEVPTR(y, x) firstprivate(L, scale, causal))                        \
    {                                                                                                          \
      float red[RW];                                                                                           \
      OT_TEAM_SHARED(red)                                                                                      \
      const int tid = (int)OT_GPU_THREAD_ID(), lane = OT_WARP_LANE(tid), warp = OT_WARP_INDEX(tid);            \
      const int64_t r = OT_GPU_BLOCK_ID(), nv = L.d / OT_KV, m = ot_ksm_ncols(causal, r, L.n2, L.d);           \
      const int64_t xo = ot_krow_off(r, L.n1, L.n2, L.xs[0], L.xs[1], L.xs[2]);                                \
      const int64_t yo = ot_krow_off(r, L.n1, L.n2, L.ys[0], L.ys[1], L.ys[2]);                                \
      float v[NV][OT_KV];                                                                                     \
      float mx = -INFINITY;                                                                                    \
      OT_UNROLL                                                                                                \
      for (int i = 0; i < NV; i++) {                                                                          \
        const int64_t c = tid + (int64_t)RT * i;                                                               \
        if (c < nv) {                                                                                          \
          ot_kld8_##X(x, xo + c * OT_KV, v[i]);                                                                \
          OT_UNROLL                                                                                            \
          for (int k = 0; k < OT_KV; k++) {                                                                    \
            v[i][k] *= scale;                                                                                  \
            if (c * OT_KV + k < m) mx = fmaxf(mx, v[i][k]);                                                    \
          }                                                                                                    \
        }                                                                                                      \
      }                                                                                                        \
      mx = rows_max(mx, red, lane, warp);                                                                      \
      float sum = 0.0f;                                                                                        \
      OT_UNROLL                                                                                                \
      for (int i = 0; i < NV; i++) {                                                                          \
        const int64_t c = tid + (int64_t)RT * i;                                                               \
        if (c < nv) {                                                                                          \
          OT_UNROLL                                                                                            \
          for (int k = 0; k < OT_KV; k++) {                                                                    \
            const float e = c * OT_KV + k < m ? expf(v[i][k] - mx) : 0.0f;                                     \
            v[i][k] = e;                                                                                       \
            sum += e;                                                                                          \
          }                                                                                                    \
        }                                                                                                      \
      }                                                                                                        \
      const float inv = 1.0f / rows_sum(sum, red, lane, warp);                                                 \
      /* y may alias x: every thread writes only the octets it read */                                        \
      OT_UNROLL                                                                                                \
      for (int i = 0; i < NV; i++) {                                                                          \
        const int64_t c = tid + (int64_t)RT * i;                                                               \
        if (c < nv) {                                                                                          \
          OT_UNROLL                                                                                            \
          for (int k = 0; k < OT_KV; k++) v[i][k] = c * OT_KV + k < m ? v[i][k] * inv : 0.0f;                  \
          ot_kst8_##Y(y, yo + c * OT_KV, v[i]);                                                                \
        }                                                                                                      \
      }                                                                                                        \
    }                                                                                                          \
  }
#define SM8_ALL(X, Y) SM8(1, X, Y) SM8(2, X, Y) SM8(4, X, Y)
SM8_ALL(f32, f32)
SM8_ALL(bf16, bf16)
SM8_ALL(f16, f16)
#undef SM8_ALL
#undef SM8

typedef void (*sm8_fn)(int dev, void *y, const void *x, ot_krows8 L, float scale, int causal);
#define SM8_ROW(X, Y) {OT_##X, OT_##Y, {sm8_1_##X##_##Y, sm8_2_##X##_##Y, sm8_4_##X##_##Y}}
static const struct {
  int x, y;
  sm8_fn f[3]; /* NV 1, 2, 4 */
} sm8_table[] = {SM8_ROW(f32, f32), SM8_ROW(bf16, bf16), SM8_ROW(f16, f16)};
#undef SM8_ROW
#undef OT_f32
#undef OT_bf16
#undef OT_f16

int ot_ksoftmax8_pick(int xdt, int ydt) {
  for (int i = 0; i < (int)(sizeof sm8_table / sizeof sm8_table[0]); i++)
    if (sm8_table[i].x == xdt && sm8_table[i].y == ydt) return i;
  return -1;
}

void ot_ksoftmax8_gpu(int dev, int pick, void *y, const void *x, const ot_krows8 *rl, float scale, int causal) {
  sm8_table[pick].f[rows_nv_index(rl->d)](dev, y, x, *rl, scale, causal);
}
