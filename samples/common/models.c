/* models.c — choose the architecture from config.json. */
#include <stdio.h>

#include "models.h"

ot_status ot_model_load(ot_ctx *ctx, const char *dir, ot_dtype wdtype, ot_progress_fn progress, void *user,
                        ot_lm **out) {
  *out = NULL;
  ot_hf_config cfg;
  ot_status s = ot_hf_config_load(dir, &cfg);
  if (s != OT_OK) return s;
  ot_ckpt *ck;
  s = ot_ckpt_open(dir, &ck);
  if (s != OT_OK) return s;
  s = cfg.arch == OT_ARCH_GPT2 ? ot_gpt2_load(ctx, &cfg, ck, wdtype, progress, user, out)
                               : ot_llama_load(ctx, &cfg, ck, wdtype, progress, user, out);
  ot_ckpt_close(ck);
  return s;
}

ot_status ot_model_load_shapes(ot_ctx *ctx, const char *dir, ot_dtype wdtype, ot_lm **out) {
  *out = NULL;
  ot_hf_config cfg;
  ot_status s = ot_hf_config_load(dir, &cfg);
  if (s != OT_OK) return s;
  ot_ckpt *ck;
  s = ot_ckpt_open(dir, &ck);
  if (s != OT_OK) return s;
  s = cfg.arch == OT_ARCH_GPT2 ? ot_gpt2_shapes(ctx, &cfg, ck, wdtype, out) : ot_llama_shapes(ctx, &cfg, ck, wdtype, out);
  ot_ckpt_close(ck);
  return s;
}
