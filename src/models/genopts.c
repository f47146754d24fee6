/* genopts.c — a model's own generation defaults (config.json's EOS ids,
 * generation_config.json) as ot_gen_opts, the way transformers' generate()
 * applies them when its caller gives nothing. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "omptensor/hfconfig.h"
#include "omptensor/lm.h"

ot_status ot_gen_opts_from_model(const char *model_dir, ot_gen_opts *o) {
  if (!model_dir || !o) return ot_fail(OT_ERR_INVALID_ARG, "ot_gen_opts_from_model: NULL argument");
  ot_hf_config c;
  ot_hf_gen_config g;
  OT_TRY(ot_hf_config_load(model_dir, &c));
  OT_TRY(ot_hf_gen_config_load(model_dir, &g));
  /* generate() takes generation_config's eos_token_id over the model
   * config's when the file gives one */
  const int64_t *eos = g.has_eos ? g.eos_token_ids : c.eos_token_ids;
  int n = g.has_eos ? g.n_eos : c.n_eos;
  o->n_eos = 0;
  for (int i = 0; i < n && i < OT_GEN_MAX_EOS; i++) {
    /* transformers runs such a checkpoint (tiny test models keep GPT-2's
     * 50256 over a small vocabulary): an id the model cannot produce never
     * stops generation, so it is said and left out */
    if (eos[i] >= c.vocab_size) {
      ot_warn_once("genopts.eos_outside_vocab",
                   "%s: eos_token_id %lld (%s) is outside the vocabulary of %lld ids: it can never be generated, so "
                   "it is ignored",
                   model_dir, (long long)eos[i], g.has_eos ? "generation_config.json" : "config.json",
                   (long long)c.vocab_size);
      continue;
    }
    o->eos_ids[o->n_eos++] = (int32_t)eos[i];
  }
  if (g.has_max_new_tokens) o->max_new_tokens = (int)g.max_new_tokens;
  if (g.has_do_sample && g.do_sample) {
    /* transformers' GenerationConfig defaults for what the file leaves out */
    o->greedy = 0;
    o->temperature = g.has_temperature ? (float)g.temperature : 1.0f;
    o->top_k = g.has_top_k ? (int)g.top_k : 50;
    o->top_p = g.has_top_p ? (float)g.top_p : 1.0f;
    if (o->temperature == 0.0f) o->greedy = 1;
  }
  if (g.not_applied[0])
    ot_warn_once("generation_config.not_applied",
                 "%s/generation_config.json sets %s; omptensor's generation does not implement %s, so its tokens "
                 "can differ from transformers' generate() with these defaults",
                 model_dir, g.not_applied, strchr(g.not_applied, ',') ? "these" : "it");
  return OT_OK;
}
