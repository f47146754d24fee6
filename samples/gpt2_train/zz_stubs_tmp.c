/* TEMPORARY stubs until the lead merges the real implementations. */
#include <string.h>
#include "gpt2t_impl.h"
const char *gpt2t_checkpoint_name(gpt2t_checkpoint c) { return c == GPT2T_CKPT_ALL ? "all" : c == GPT2T_CKPT_AUTO ? "auto" : "none"; }
ot_status gpt2t_checkpoint_parse(const char *s, gpt2t_checkpoint *out) {
  if (!strcmp(s, "none")) *out = GPT2T_CKPT_NONE;
  else if (!strcmp(s, "all")) *out = GPT2T_CKPT_ALL;
  else if (!strcmp(s, "auto")) *out = GPT2T_CKPT_AUTO;
  else return ot_set_error(OT_ERR_INVALID_ARG, "checkpoint '%s': expected none, all or auto", s);
  return OT_OK;
}
const ot_plan *gpt2t_plan(const gpt2_trainer *g) { return g->plan; }
const ot_hf_config *gpt2t_config(const gpt2_trainer *g) { return &g->cfg; }
int gpt2t_recomputed(const gpt2_trainer *g, int layer) { (void)g; (void)layer; return 0; }
int64_t gpt2t_num_weights(const gpt2_trainer *g) {
  int64_t n = 0;
  for (int i = 0; i < g->n_params; i++) n += ot_tensor_numel(g->P[i].w);
  return n;
}
