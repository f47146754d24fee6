/* decoder.c — see decoder.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/kernels.h"
#include "models/decoder.h"
#include "omptensor/memory.h"

void ot_model_config_label(char *buf, size_t cap, const ot_ckpt *ck) {
  if (ck) snprintf(buf, cap, "%s/config.json", ot_ckpt_dir(ck));
  else snprintf(buf, cap, "the synthetic model's config");
}

ot_status ot_model_check_host_memory(const char *label, uint64_t bytes, const char *what, const char *todo) {
  ot_status s = ot_host_memory_check(bytes, what);
  if (s == OT_OK) return OT_OK;
  return ot_set_error(s, "%s: %s: %s", label, ot_last_error(), todo);
}

ot_status ot_decoder_step_begin(ot_lm *m, ot_kvcache *kv, int64_t n_layers, int64_t n_kv, int64_t head_dim, int T,
                                ot_lm_step *st) {
  memset(st, 0, sizeof *st);
  st->T = T;
  OT_TRY(ot_kvcache_ensure(kv, m->ctx, n_layers, m->n_ctx, n_kv, head_dim));
  OT_TRY(ot_program_create(m->ctx, &st->prog));
  return ot_program_scalar_create(st->prog, "pos", &st->pos_slot);
}

ot_status ot_decoder_step_head(ot_lm *m, ot_lm_step *st, int all_logits, ot_tensor *h, ot_tensor *x, ot_tensor **hl,
                               ot_tensor **xl) {
  *hl = h;
  *xl = x;
  if (!all_logits) {
    OT_TRY(ot_tensor_slice(h, 0, st->T - 1, 1, hl));
    OT_TRY(ot_lm_step_own(st, *hl));
    OT_TRY(ot_tensor_slice(x, 0, st->T - 1, 1, xl));
    OT_TRY(ot_lm_step_own(st, *xl));
  }
  int64_t sL[2] = {all_logits ? st->T : 1, m->vocab};
  return ot_lm_step_tensor(st, m->ctx, "logits", OT_F32, 2, sL, &st->logits);
}

int ot_decoder_prefill_choice(void) {
  const char *e = getenv("OMPTENSOR_PREFILL_DTYPE");
  if (!e || !*e || !strcasecmp(e, "auto")) return 0;
  if (!strcasecmp(e, "weights")) return 1;
  if (!strcasecmp(e, "f32")) return -1;
  return -2;
}

ot_dtype ot_decoder_act_dtype(const ot_lm *m, int T, ot_dtype wt) {
  const int choice = ot_decoder_prefill_choice();
  const int on = choice > 0 || (choice == 0 && ot_k_gemm_vendor(ot_ctx_device(m->ctx, 0)));
  return T > 1 && (wt == OT_BF16 || wt == OT_F16) && on ? wt : OT_F32;
}

ot_status ot_decoder_step_end(const ot_kvcache *kv, ot_lm_step *st) {
  OT_TRY(ot_program_mark_input(st->prog, st->ids));
  OT_TRY(ot_program_mark_output(st->prog, st->logits));
  return ot_kvcache_mark(kv, st->prog);
}
