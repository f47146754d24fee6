/* decoder.c — see decoder.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "kernels/kernels.h"
#include "models/decoder.h"
#include "omptensor/memory.h"
#include "omptensor/ops.h"

void ot_model_config_label(char *buf, size_t cap, const ot_ckpt *ck) {
  if (ck) snprintf(buf, cap, ot_ckpt_is_gguf(ck) ? "%s" : "%s/config.json", ot_ckpt_dir(ck));
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
  OT_TRY(ot_kvcache_ensure(kv, m->ctx, m->kv_dtype, n_layers, m->n_ctx, n_kv, head_dim));
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

ot_status ot_decoder_batch_begin(ot_lm *m, ot_kvcache *kv, int64_t n_layers, int64_t n_kv, int64_t head_dim, int T,
                                 ot_lm_step *st) {
  memset(st, 0, sizeof *st);
  st->T = T;
  st->pos_slot = -1;
  if (m->n_slots < 1)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: a batched step needs n_slots >= 1 (ot_generate_batch sets it)", m->vt->arch);
  OT_TRY(ot_kvcache_ensure_slots(kv, m->ctx, m->kv_dtype, n_layers, m->n_slots, m->n_ctx, n_kv, head_dim));
  OT_TRY(ot_program_create(m->ctx, &st->prog));
  const int64_t sR[2] = {T, 2};
  return ot_lm_step_tensor(st, m->ctx, "rows", OT_I32, 2, sR, &st->rows);
}

ot_status ot_decoder_batch_head(ot_lm *m, ot_lm_step *st, int n_logits, ot_tensor *h, ot_tensor *x, ot_tensor **hl,
                                ot_tensor **xl) {
  *hl = h;
  *xl = x;
  if (n_logits != st->T) {
    const int64_t sL[1] = {n_logits}, sLD[2] = {n_logits, ot_tensor_dim(h, 1)};
    OT_TRY(ot_lm_step_tensor(st, m->ctx, "last", OT_I32, 1, sL, &st->last));
    OT_TRY(ot_lm_step_tensor(st, m->ctx, "h_last", ot_tensor_dtype(h), 2, sLD, hl));
    OT_TRY(ot_lm_step_tensor(st, m->ctx, "x_last", ot_tensor_dtype(x), 2, sLD, xl));
    /* a gather of rows chosen at run time: the embedding op, with h as its table */
    OT_TRY(ot_op_embedding(st->prog, *hl, h, st->last));
  }
  int64_t sL[2] = {n_logits, m->vocab};
  return ot_lm_step_tensor(st, m->ctx, "logits", OT_F32, 2, sL, &st->logits);
}

ot_status ot_decoder_step_end(const ot_kvcache *kv, ot_lm_step *st) {
  OT_TRY(ot_program_mark_input(st->prog, st->ids));
  if (st->rows) OT_TRY(ot_program_mark_input(st->prog, st->rows));
  if (st->last) OT_TRY(ot_program_mark_input(st->prog, st->last));
  OT_TRY(ot_program_mark_output(st->prog, st->logits));
  return ot_kvcache_mark(kv, st->prog);
}
