/* rope.h — the rotary position embedding's frequencies, as Hugging Face
 * computes them from a config (transformers' modeling_rope_utils):
 *
 *   inv_freq[i] = 1 / theta^(2i / head_dim)                     (default)
 *   linear:  inv_freq[i] / factor                               (position interpolation)
 *   llama3:  by wavelength w = 2 pi / inv_freq[i], with L = original_max_positions:
 *            w > L / low_freq_factor   -> inv_freq[i] / factor
 *            w < L / high_freq_factor  -> inv_freq[i]
 *            between, with s = (L / w - low_freq_factor) / (high_freq_factor - low_freq_factor):
 *                                         (1 - s) inv_freq[i] / factor + s inv_freq[i]
 *
 *   yarn:    with r(i) = clamp((i - ramp_lo) / (ramp_hi - ramp_lo), 0, 1) and
 *            e = 1 - r(i): inv_freq[i] / factor * (1 - e) + inv_freq[i] * e,
 *            and cos, sin multiplied by attention_factor (ramp_lo/hi and the
 *            factor as transformers' _compute_yarn_parameters derives them
 *            from beta_fast, beta_slow, mscale, ...: hfconfig.c)
 *
 *   dynamic: (NTK) for a forward whose last position is L - 1 with L > M =
 *            original_max_positions (max_position_embeddings): plain RoPE with
 *            theta (factor L / M - (factor - 1))^(d / (d - 2)); else plain
 *            (transformers' dynamic_rope_update: the frequencies of the
 *            longest sequence so far; cached keys keep theirs)
 *
 * All in fp32, as transformers does. longrope is not here yet; configs
 * naming it are refused (hfconfig.h). */
#ifndef OMPTENSOR_ROPE_H
#define OMPTENSOR_ROPE_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ot_rope_type {
  OT_ROPE_DEFAULT = 0,
  OT_ROPE_LINEAR,
  OT_ROPE_LLAMA3,
  OT_ROPE_YARN,
  OT_ROPE_DYNAMIC,
  OT_ROPE_TYPE_COUNT
} ot_rope_type;

typedef struct ot_rope {
  float theta;                  /* rope_theta (base) */
  int type;                     /* ot_rope_type */
  float factor;                 /* linear, llama3: the context extension factor (> 0) */
  float low_freq_factor;        /* llama3 */
  float high_freq_factor;       /* llama3 (> low_freq_factor) */
  float original_max_positions; /* llama3: original_max_position_embeddings; dynamic: max_position_embeddings */
  float ramp_lo, ramp_hi;       /* yarn: the correction range, in pairs (ramp_lo < ramp_hi) */
  float attention_factor;       /* yarn: cos and sin are multiplied by it (other types: unused, 1) */
} ot_rope;

/* Plain RoPE with base theta. */
static inline ot_rope ot_rope_plain(float theta) {
  ot_rope r = {theta, OT_ROPE_DEFAULT, 1.0f, 1.0f, 4.0f, 8192.0f, 0.0f, 1.0f, 1.0f};
  return r;
}

/* "default", "linear", "llama3", "yarn", "dynamic" ("?" for another value). */
static inline const char *ot_rope_type_name(int type) {
  static const char *const n[OT_ROPE_TYPE_COUNT] = {"default", "linear", "llama3", "yarn", "dynamic"};
  return type >= 0 && type < OT_ROPE_TYPE_COUNT ? n[type] : "?";
}

/* NULL if the kernels can use r (they divide by its numbers), else the
 * requirement it breaks. The one check of a RoPE, for the ops that take one
 * and for configs (hfconfig.h, which adds its own ranges). */
static inline const char *ot_rope_problem(ot_rope r) {
  if (!(r.theta > 0)) return "theta must be positive";
  if (r.type < 0 || r.type >= OT_ROPE_TYPE_COUNT) return "the type must be default, linear, llama3, yarn or dynamic";
  if (r.type != OT_ROPE_DEFAULT && !(r.factor > 0)) return "its factor must be positive";
  if (r.type == OT_ROPE_LLAMA3 &&
      !(r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor && r.original_max_positions > 0))
    return "llama3 needs 0 < low_freq_factor < high_freq_factor and a positive original_max_position_embeddings";
  if (r.type == OT_ROPE_YARN && !(r.ramp_hi > r.ramp_lo && r.attention_factor > 0))
    return "yarn needs ramp_lo < ramp_hi and a positive attention factor";
  if (r.type == OT_ROPE_DYNAMIC && !(r.original_max_positions > 0))
    return "dynamic needs a positive original_max_position_embeddings";
  return 0;
}

#ifdef __cplusplus
}
#endif
#endif
