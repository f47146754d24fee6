/* lm.c — model steps and their owned tensors. */
#include "core/error.h"
#include "omptensor/lm.h"

void ot_lm_release_device(ot_lm *m) {
  if (!m) return;
  ot_plan_destroy(m->held_plan);
  ot_lm_step_destroy(&m->held_step);
  m->held_plan = NULL;
}

void ot_lm_destroy(ot_lm *m) {
  ot_lm_release_device(m); /* before the model's tensors go */
  if (m && m->vt && m->vt->destroy) m->vt->destroy(m);
}

ot_status ot_lm_step_own(ot_lm_step *s, ot_tensor *t) { return ot_tlist_keep(&s->owned, t); }

ot_status ot_lm_step_tensor(ot_lm_step *s, ot_ctx *ctx, const char *name, ot_dtype dt, int ndim,
                            const int64_t *shape, ot_tensor **out) {
  *out = NULL;
  ot_tensor *t;
  OT_TRY(ot_tensor_create(ctx, name, dt, ndim, shape, &t));
  OT_TRY(ot_lm_step_own(s, t));
  *out = t;
  return OT_OK;
}

void ot_lm_step_destroy(ot_lm_step *s) {
  if (!s) return;
  ot_program_destroy(s->prog); /* the program references the tensors: destroy it first */
  ot_tlist_release(&s->owned);
  *s = (ot_lm_step){0};
}

ot_status ot_lm_fit(ot_lm *m, uint64_t budget, int n_prompt) {
  if (!m) return ot_fail(OT_ERR_INVALID_ARG, "ot_lm_fit: NULL model");
  return m->vt->fit ? m->vt->fit(m, budget, n_prompt) : OT_OK;
}

ot_status ot_lm_min_budget(ot_lm *m, int n_prompt, int all_logits, uint64_t *bytes) {
  *bytes = 0;
  OT_TRY(ot_lm_fit(m, 1, n_prompt)); /* a budget of one byte: the smallest of everything */
  const int T[2] = {n_prompt, 1}, all[2] = {all_logits, 0};
  for (int i = 0; i < 2; i++) {
    ot_lm_step st = {0};
    uint64_t b = 0;
    int op;
    ot_status s = m->vt->build(m, T[i], all[i], &st);
    if (s == OT_OK) s = ot_sched_min_budget(st.prog, &b, &op);
    ot_lm_step_destroy(&st);
    if (s != OT_OK) return s;
    if (b > *bytes) *bytes = b;
  }
  return OT_OK;
}
