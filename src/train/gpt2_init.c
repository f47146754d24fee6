/* gpt2_init.c — GPT-2's own initialization (transformers' GPT2PreTrainedModel
 * ._init_weights with config.json's initializer_range r, default 0.02), for
 * training from scratch:
 *   embeddings and Conv1D weights   normal(0, r)
 *   attn.c_proj / mlp.c_proj weight normal(0, r / sqrt(2 n_layer))  (the
 *                                   residual projections: the sum over layers
 *                                   keeps the residual stream's scale)
 *   biases 0, LayerNorm weights 1.
 * Draws are a counter-based hash (splitmix64) and Box-Muller: parameter i's
 * values depend only on (seed, i, element), whatever order they are made in. */
#include <math.h>
#include <string.h>

#include "train/gpt2_impl.h"

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double unit_open(uint64_t k) { return ((double)(mix(k) >> 11) + 0.5) * 0x1p-53; } /* (0, 1) */

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

ot_status ot_gt_init_param(ot_gpt2_trainer *g, int i) {
  ot_gt_param *p = &g->P[i];
  float *x = ot_tensor_data(p->w);
  int64_t n = ot_tensor_numel(p->w);
  int is_norm = strstr(p->name, ".ln_") != NULL;
  if (ends_with(p->name, ".bias") || is_norm) {
    float v = is_norm && ends_with(p->name, ".weight") ? 1.0f : 0.0f;
    for (int64_t j = 0; j < n; j++) x[j] = v;
    return OT_OK;
  }
  double std = g->cfg.initializer_range;
  if (ends_with(p->name, "c_proj.weight")) std /= sqrt(2.0 * (double)g->cfg.num_layers);
  uint64_t key = mix(g->o.seed ^ mix((uint64_t)i + 1));
  for (int64_t j = 0; j < n; j += 2) { /* Box-Muller: two normals per pair of uniforms */
    double r = sqrt(-2.0 * log(unit_open(key + (uint64_t)j))), t = 6.283185307179586 * unit_open(key + (uint64_t)j + 1);
    x[j] = (float)(std * r * cos(t));
    if (j + 1 < n) x[j + 1] = (float)(std * r * sin(t));
  }
  return OT_OK;
}
