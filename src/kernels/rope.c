/* rope.c — rotary position embedding exactly as Hugging Face Llama applies
 * it (modeling_llama.py: apply_rotary_pos_emb with rotate_half):
 *   inv_freq[i] = 1 / theta^(2i/d)        (fp32, i < d/2; scaled as omptensor/rope.h says)
 *   ang = pos * inv_freq[i]               (fp32, as HF's fp32 matmul)
 *   out[i]       = x[i] cos(ang) - x[i + d/2] sin(ang)
 *   out[i + d/2] = x[i + d/2] cos(ang) + x[i] sin(ang)
 * Pairs are (i, i + d/2), not adjacent elements (that is GPT-NeoX/HF layout,
 * not Meta's interleaved one).
 *
 * Fast path (rope_fast): unit last stride, head_dim/2 % 8 == 0 and 16-byte
 * aligned heads, specialized per dtype: one iteration takes 8 pairs of a
 * run of heads at one position, computes their 8 angles once (powf, cosf
 * and sinf cost more than the bytes at HBM speed) and moves 16 bytes or
 * more per access. Same expressions per element as the generic loop. */
#include "kernels/kcommon.h"

static ot_status rope_check(ot_kview x) {
  OT_TRY(ot_kcheck("rope", "x", x, 3, 3, OT_KM_FLOAT));
  if (x.ne[2] % 2)
    return ot_fail(OT_ERR_SHAPE, "rope: head_dim of x %s must be even", ot_kshape_str(x));
  return OT_OK;
}

/* rope_fast_<T>: x [S, H, 2 half] in T, strides s0, s1 (last unit); each
 * iteration: position s, octet ic of the pairs, heads [g rh, (g+1) rh). */
#define ROPE_FAST(T)                                                                                           \
  static void rope_fast_##T(int dev, void *xp, int64_t S, int64_t H, int64_t half, int64_t s0, int64_t s1,     \
                            int64_t pos, ot_rope r, int64_t rh) {                                              \
    const int64_t d = 2 * half, nc = half / OT_KV, ng = (H + rh - 1) / rh;                                     \
    OT_PARFOR3(dev, OT_DEVPTR(xp) firstprivate(r))                                                             \
    for (int64_t s = 0; s < S; s++)                                                                            \
      for (int64_t g = 0; g < ng; g++)                                                                         \
        for (int64_t ic = 0; ic < nc; ic++) {                                                                  \
          float c[OT_KV], sn[OT_KV];                                                                           \
          OT_UNROLL                                                                                            \
          for (int k = 0; k < OT_KV; k++) {                                                                    \
            const float ang = ot_krope_angle(pos + s, ic * OT_KV + k, d, r);                                       \
            c[k] = cosf(ang) * ot_krope_scale(r);                                                              \
            sn[k] = sinf(ang) * ot_krope_scale(r);                                                             \
          }                                                                                                    \
          const int64_t h1 = (g + 1) * rh < H ? (g + 1) * rh : H;                                              \
          for (int64_t h = g * rh; h < h1; h++) {                                                              \
            const int64_t o1 = s * s0 + h * s1 + ic * OT_KV, o2 = o1 + half;                                   \
            float x1[OT_KV], x2[OT_KV], y1[OT_KV], y2[OT_KV];                                                  \
            ot_kld8_##T(xp, o1, x1);                                                                           \
            ot_kld8_##T(xp, o2, x2);                                                                           \
            OT_UNROLL                                                                                          \
            for (int k = 0; k < OT_KV; k++) {                                                                  \
              y1[k] = x1[k] * c[k] - x2[k] * sn[k];                                                            \
              y2[k] = x2[k] * c[k] + x1[k] * sn[k];                                                            \
            }                                                                                                  \
            ot_kst8_##T(xp, o1, y1);                                                                           \
            ot_kst8_##T(xp, o2, y2);                                                                           \
          }                                                                                                    \
        }                                                                                                      \
  }
ROPE_FAST(f32)
ROPE_FAST(bf16)
ROPE_FAST(f16)
#undef ROPE_FAST

/* Runs the fast path if x qualifies; returns whether it did. Heads per
 * iteration: enough iterations left to fill the device (a GPU wants a few
 * hundred thousand; host threads a few dozen), the angles shared by the rest. */
static int rope_fast(int dev, ot_kview x, int64_t pos, ot_rope r) {
  const int64_t S = x.ne[0], H = x.ne[1], half = x.ne[2] / 2, es = ot_kfloat_bytes(x.dt);
  if (x.nb[2] != 1 || half % OT_KV != 0 || !ot_kalign16(x.p, 0, es) || !ot_kstrides16(2, x.ne, x.nb, es)) return 0;
  const int64_t want = ot_kruns_on_host(dev) ? 64 : 262144, its = S * H * (half / OT_KV);
  int64_t rh = its / want;
  rh = rh < 1 ? 1 : rh > H ? H : rh;
  switch (x.dt) {
  case OT_F32: rope_fast_f32(dev, x.p, S, H, half, x.nb[0], x.nb[1], pos, r, rh); return 1;
  case OT_BF16: rope_fast_bf16(dev, x.p, S, H, half, x.nb[0], x.nb[1], pos, r, rh); return 1;
  case OT_F16: rope_fast_f16(dev, x.p, S, H, half, x.nb[0], x.nb[1], pos, r, rh); return 1;
  default: return 0;
  }
}

ot_status ot_k_rope(int dev, ot_kview x, int64_t pos, ot_rope r) {
  OT_TRY(rope_check(x));
  r = ot_krope_resolve(r, pos + x.ne[0], x.ne[2]);
  const int64_t S = x.ne[0], H = x.ne[1], half = x.ne[2] / 2, d = x.ne[2];
  if (S == 0 || H == 0 || half == 0) return OT_OK;
  if (rope_fast(dev, x, pos, r)) return OT_OK;
  void *xp = x.p;
  const int dt = x.dt;
  const int64_t s0 = x.nb[0], s1 = x.nb[1], s2 = x.nb[2];
  OT_PARFOR3(dev, OT_DEVPTR(xp) firstprivate(r))
  for (int64_t s = 0; s < S; s++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < half; i++) {
        const float ang = ot_krope_angle(pos + s, i, d, r), c = cosf(ang) * ot_krope_scale(r),
                    sn = sinf(ang) * ot_krope_scale(r);
        const int64_t o = s * s0 + h * s1, o1 = o + i * s2, o2 = o + (i + half) * s2;
        const float x1 = ot_kld(dt, xp, o1), x2 = ot_kld(dt, xp, o2);
        ot_kst(dt, xp, o1, x1 * c - x2 * sn);
        ot_kst(dt, xp, o2, x2 * c + x1 * sn);
      }
  return OT_OK;
}

ot_status ot_ref_rope(ot_kview x, int64_t pos, ot_rope r) {
  OT_TRY(rope_check(x));
  r = ot_krope_resolve(r, pos + x.ne[0], x.ne[2]);
  const int64_t half = x.ne[2] / 2;
  for (int64_t s = 0; s < x.ne[0]; s++)
    for (int64_t h = 0; h < x.ne[1]; h++)
      for (int64_t i = 0; i < half; i++) {
        const double ang = ot_krope_angle(pos + s, i, x.ne[2], r), c = cos(ang) * ot_krope_scale(r),
                     sn = sin(ang) * ot_krope_scale(r);
        const int64_t o = s * x.nb[0] + h * x.nb[1], o1 = o + i * x.nb[2], o2 = o + (i + half) * x.nb[2];
        const double x1 = ot_kld(x.dt, x.p, o1), x2 = ot_kld(x.dt, x.p, o2);
        ot_kst(x.dt, x.p, o1, (float)(x1 * c - x2 * sn));
        ot_kst(x.dt, x.p, o2, (float)(x2 * c + x1 * sn));
      }
  return OT_OK;
}
