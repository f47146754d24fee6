/* rope.c — rotary position embedding exactly as Hugging Face Llama applies
 * it (modeling_llama.py: apply_rotary_pos_emb with rotate_half):
 *   inv_freq[i] = 1 / theta^(2i/d)        (fp32, i < d/2)
 *   ang = pos * inv_freq[i]               (fp32, as HF's fp32 matmul)
 *   out[i]       = x[i] cos(ang) - x[i + d/2] sin(ang)
 *   out[i + d/2] = x[i + d/2] cos(ang) + x[i] sin(ang)
 * Pairs are (i, i + d/2), not adjacent elements (that is GPT-NeoX/HF layout,
 * not Meta's interleaved one). */
#include "kernels/kcommon.h"

static ot_status rope_check(ot_kview x) {
  OT_TRY(ot_kcheck("rope", "x", x, 3, 3, OT_KM_FLOAT));
  if (x.ne[2] % 2)
    return ot_fail(OT_ERR_SHAPE, "rope: head_dim of x %s must be even", ot_kshape_str(x));
  return OT_OK;
}

OT_DECLARE_TARGET_BEGIN
static inline float rope_angle(int64_t pos, int64_t i, int64_t d, float theta) {
  const float inv = 1.0f / powf(theta, (float)(2 * i) / (float)d);
  return (float)pos * inv;
}
OT_DECLARE_TARGET_END

ot_status ot_k_rope(int dev, ot_kview x, int64_t pos, float theta) {
  OT_TRY(rope_check(x));
  const int64_t S = x.ne[0], H = x.ne[1], half = x.ne[2] / 2, d = x.ne[2];
  if (S == 0 || H == 0 || half == 0) return OT_OK;
  void *xp = x.p;
  const int dt = x.dt;
  const int64_t s0 = x.nb[0], s1 = x.nb[1], s2 = x.nb[2];
  OT_PARFOR3(dev, OT_DEVPTR(xp))
  for (int64_t s = 0; s < S; s++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < half; i++) {
        const float ang = rope_angle(pos + s, i, d, theta), c = cosf(ang), sn = sinf(ang);
        const int64_t o = s * s0 + h * s1, o1 = o + i * s2, o2 = o + (i + half) * s2;
        const float x1 = ot_kld(dt, xp, o1), x2 = ot_kld(dt, xp, o2);
        ot_kst(dt, xp, o1, x1 * c - x2 * sn);
        ot_kst(dt, xp, o2, x2 * c + x1 * sn);
      }
  return OT_OK;
}

ot_status ot_ref_rope(ot_kview x, int64_t pos, float theta) {
  OT_TRY(rope_check(x));
  const int64_t half = x.ne[2] / 2;
  for (int64_t s = 0; s < x.ne[0]; s++)
    for (int64_t h = 0; h < x.ne[1]; h++)
      for (int64_t i = 0; i < half; i++) {
        const double ang = rope_angle(pos + s, i, x.ne[2], theta), c = cos(ang), sn = sin(ang);
        const int64_t o = s * x.nb[0] + h * x.nb[1], o1 = o + i * x.nb[2], o2 = o + (i + half) * x.nb[2];
        const double x1 = ot_kld(x.dt, x.p, o1), x2 = ot_kld(x.dt, x.p, o2);
        ot_kst(x.dt, x.p, o1, (float)(x1 * c - x2 * sn));
        ot_kst(x.dt, x.p, o2, (float)(x2 * c + x1 * sn));
      }
  return OT_OK;
}
