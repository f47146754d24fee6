/* models.c — choose the architecture from config.json; the ot_lm shell the
 * models share. */
#include <stdio.h>
#include <stdlib.h>

#include "omptensor/models.h"

/* config.json and the checkpoint of `dir`, then the architecture's loader:
 * the weights read, or (shapes) only checked. */
static ot_status load(ot_ctx *ctx, const char *dir, ot_dtype wdtype, int shapes, ot_progress_fn progress, void *user,
                      ot_lm **out) {
  *out = NULL;
  ot_hf_config cfg;
  ot_status s = ot_hf_config_load(dir, &cfg);
  if (s != OT_OK) return s;
  ot_ckpt *ck;
  s = ot_ckpt_open(dir, &ck);
  if (s != OT_OK) return s;
  if (cfg.arch == OT_ARCH_GPT2)
    s = shapes ? ot_gpt2_shapes(ctx, &cfg, ck, wdtype, out) : ot_gpt2_load(ctx, &cfg, ck, wdtype, progress, user, out);
  else
    s = shapes ? ot_llama_shapes(ctx, &cfg, ck, wdtype, out) : ot_llama_load(ctx, &cfg, ck, wdtype, progress, user, out);
  ot_ckpt_close(ck);
  return s;
}

ot_status ot_model_load(ot_ctx *ctx, const char *dir, ot_dtype wdtype, ot_progress_fn progress, void *user,
                        ot_lm **out) {
  return load(ctx, dir, wdtype, 0, progress, user, out);
}

ot_status ot_model_load_shapes(ot_ctx *ctx, const char *dir, ot_dtype wdtype, ot_lm **out) {
  return load(ctx, dir, wdtype, 1, NULL, NULL, out);
}

ot_lm *ot_model_shell(ot_ctx *ctx, const ot_lm_vtable *vt, void *impl, const ot_hf_config *cfg) {
  ot_lm *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->vt = vt;
  m->ctx = ctx;
  m->impl = impl;
  m->vocab = cfg->vocab_size;
  m->max_seq = m->n_ctx = cfg->max_position_embeddings;
  /* dynamic RoPE exists to run past max_position_embeddings: up to factor times it */
  if (cfg->arch == OT_ARCH_LLAMA && cfg->rope_type == OT_ROPE_DYNAMIC && cfg->rope_factor > 1)
    m->max_seq = (int64_t)((double)cfg->max_position_embeddings * cfg->rope_factor);
  return m;
}

ot_status ot_model_finish(ot_lm *m, uint64_t weight_bytes, int n_weights, ot_status s, ot_lm **out) {
  m->weight_bytes = weight_bytes;
  m->n_weights = n_weights;
  if (s != OT_OK) {
    ot_lm_destroy(m);
    return s;
  }
  *out = m;
  return OT_OK;
}
