/* mlp_trainer.c — the trainer's public calls (mlp.h). */
#include <stdlib.h>
#include <string.h>

#include "mlp_impl.h"

static const char *const precision_names[] = {"fp32", "bf16", "f16"};

const char *mlp_precision_name(mlp_precision p) { return (unsigned)p < 3 ? precision_names[p] : "?"; }

ot_status mlp_precision_parse(const char *s, mlp_precision *out) {
  for (int i = 0; s && i < 3; i++)
    if (!strcmp(s, precision_names[i])) {
      *out = (mlp_precision)i;
      return OT_OK;
    }
  return ot_set_error(OT_ERR_INVALID_ARG, "--precision: '%s' is not one of fp32, bf16, f16", s ? s : "(null)");
}

mlp_config mlp_config_default(void) {
  mlp_config c = {.in_dim = 16, .hidden = 64, .classes = 8, .layers = 3, .teacher_hidden = 32, .batch = 64,
                  .micro_batches = 1, .recompute = OT_RECOMPUTE_NONE, .precision = MLP_FP32, .loss_scale_log2 = 16,
                  .scale_growth_interval = 200, .pcie_bytes_per_s = 55e9,
                  .flops_per_s = 4.5e12, .adam = ot_adamw_opts_default(), .seed = 1234};
  c.adam.lr = 3e-3f;
  c.adam.weight_decay = 0.0f;
  return c;
}

static ot_status check_config(const mlp_config *c) {
  if (c->layers < 2 || c->layers > MLP_MAX_LAYERS)
    return ot_set_error(OT_ERR_INVALID_ARG, "mlp: %d layers; use 2..%d", c->layers, MLP_MAX_LAYERS);
  if (c->in_dim < 1 || c->hidden < 1 || c->classes < 2 || c->teacher_hidden < 1 || c->batch < 1 ||
      c->micro_batches < 1)
    return ot_set_error(OT_ERR_INVALID_ARG,
                        "mlp: sizes must be positive (in %d, hidden %d, classes %d >= 2, teacher %d, batch %d, "
                        "micro-batches %d)",
                        c->in_dim, c->hidden, c->classes, c->teacher_hidden, c->batch, c->micro_batches);
  if ((unsigned)c->recompute > OT_RECOMPUTE_AUTO || !(c->pcie_bytes_per_s > 0) || !(c->flops_per_s > 0))
    return ot_set_error(OT_ERR_INVALID_ARG, "mlp: bad checkpoint mode or cost-model rates");
  if ((unsigned)c->precision > MLP_F16 || c->loss_scale_log2 < -126 || c->loss_scale_log2 > 127 ||
      c->scale_growth_interval < 1)
    return ot_set_error(OT_ERR_INVALID_ARG,
                        "mlp: precision %d, loss scale 2^%d, growth interval %d; use fp32/bf16/f16, an exponent in "
                        "-126..127 and an interval >= 1",
                        (int)c->precision, c->loss_scale_log2, c->scale_growth_interval);
  return OT_OK;
}

ot_status mlp_trainer_create(ot_ctx *ctx, const mlp_config *c, const ot_sched_opts *so, mlp_trainer **out) {
  *out = NULL;
  OT_TRY(check_config(c));
  mlp_trainer *t = calloc(1, sizeof *t);
  if (!t) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "mlp: no host memory for the trainer");
  t->ctx = ctx;
  t->c = *c;
  t->so = so ? *so : ot_sched_opts_default();
  t->scale_k = c->loss_scale_log2;
  t->prev_k = c->loss_scale_log2;
  t->pending_skip = 1; /* f16: the first replay has no previous gradients to apply */
  for (int l = 0; l <= c->layers; l++) t->dims[l] = l == 0 ? c->in_dim : l == c->layers ? c->classes : c->hidden;
  size_t nmb = (size_t)c->micro_batches;
  t->x = calloc(nmb, sizeof *t->x);
  t->y = calloc(nmb, sizeof *t->y);
  t->loss = calloc(nmb, sizeof *t->loss);
  ot_status s = !t->x || !t->y || !t->loss ? ot_set_error(OT_ERR_OUT_OF_MEMORY, "mlp: no host memory") : OT_OK;
  if (s == OT_OK) s = mlp_model_init(t);
  if (s == OT_OK) s = mlp_step_record(t);
  if (s != OT_OK) {
    mlp_trainer_destroy(t);
    return s;
  }
  *out = t;
  return OT_OK;
}

void mlp_trainer_destroy(mlp_trainer *t) {
  if (!t) return;
  mlp_step_release(t);
  mlp_model_release(t);
  free(t->x);
  free(t->y);
  free(t->loss);
  free(t);
}

/* f16: the run-time scalars of the next replay. Its update applies the
 * previous step's gradients (unless they overflowed) as Adam step t = updates + 1 (a skipped update ignores t). */
static ot_status set_scale_scalars(mlp_trainer *t) {
  OT_TRY(ot_program_set_scalar(t->prog, t->skip_slot, t->pending_skip));
  OT_TRY(ot_program_set_scalar(t->prog, t->unscale_slot, t->prev_k));
  OT_TRY(ot_program_set_scalar(t->prog, t->scale_slot, t->scale_k));
  return ot_program_set_scalar(t->prog, t->step_slot, t->updates + 1);
}

/* f16, after a replay: its update (if not skipped) is done; this step's
 * gradients decide the next skip flag and the scale (GradScaler's rule with
 * backoff 1/2 and growth 2). */
static void update_scale(mlp_trainer *t) {
  if (!t->pending_skip) t->updates++;
  float st[2];
  memcpy(st, ot_tensor_data(t->stats), sizeof st);
  t->prev_k = t->scale_k;
  t->pending_skip = st[1] != 0.0f;
  if (t->pending_skip) t->skipped++;
  ot_loss_scale_next(&t->scale_k, &t->good_run, t->c.scale_growth_interval, t->pending_skip);
}

ot_status mlp_trainer_step(mlp_trainer *t, ot_trace *trace, float *loss) {
  const int f16 = t->c.precision == MLP_F16;
  for (int mb = 0; mb < t->c.micro_batches; mb++) OT_TRY(mlp_model_batch(t, t->steps_done, mb));
  if (f16) OT_TRY(set_scale_scalars(t));
  else OT_TRY(ot_program_set_scalar(t->prog, t->step_slot, t->steps_done + 1));
  OT_TRY(ot_sched_run(t->plan, trace));
  t->steps_done++;
  if (f16) update_scale(t);
  else t->updates++;
  double sum = 0;
  for (int mb = 0; mb < t->c.micro_batches; mb++) sum += *(const float *)ot_tensor_data(t->loss[mb]);
  if (loss) *loss = (float)(sum / t->c.micro_batches);
  return OT_OK;
}

int64_t mlp_trainer_skipped_steps(const mlp_trainer *t) { return t->skipped; }
int mlp_trainer_loss_scale_log2(const mlp_trainer *t) { return t->c.precision == MLP_F16 ? t->scale_k : 0; }
int64_t mlp_trainer_num_params(const mlp_trainer *t) {
  int64_t n = 0;
  for (int l = 0; l < t->c.layers; l++) n += ot_tensor_numel(t->W[l]) + ot_tensor_numel(t->b[l]);
  return n;
}

ot_status mlp_trainer_read_params(const mlp_trainer *t, float *dst) {
  for (int l = 0; l < t->c.layers; l++) {
    const ot_tensor *pp[2] = {t->W[l], t->b[l]};
    for (int k = 0; k < 2; k++) {
      OT_TRY(ot_tensor_read_f32(pp[k], dst, ot_tensor_numel(pp[k])));
      dst += ot_tensor_numel(pp[k]);
    }
  }
  return OT_OK;
}

const ot_program *mlp_trainer_program(const mlp_trainer *t) { return t->prog; }
const ot_plan *mlp_trainer_plan(const mlp_trainer *t) { return t->plan; }

int mlp_trainer_recomputed(const mlp_trainer *t, int layer) {
  return layer >= 0 && layer < t->c.layers ? t->recompute[layer] : 0;
}

ot_status mlp_trainer_min_budget(const mlp_trainer *t, uint64_t *bytes) {
  return ot_sched_min_budget(t->prog, bytes, NULL);
}

static uint64_t block(const ot_tensor *x) {
  uint64_t b = ot_tensor_storage_bytes(x);
  return (b + OT_SCHED_ALIGN - 1) / OT_SCHED_ALIGN * OT_SCHED_ALIGN;
}

uint64_t mlp_trainer_total_bytes(const mlp_trainer *t) {
  uint64_t n = 0;
  for (int i = 0; i < t->step.n; i++) n += block(t->step.t[i]);
  for (int i = 0; i < t->state.n; i++) n += block(t->state.t[i]);
  for (int l = 0; l < t->c.layers; l++) n += block(t->W[l]) + block(t->b[l]);
  return n;
}
