/* mlp_step.c — recording one training step of the MLP as a program:
 *
 *   for each micro-batch i (own input, labels and activations):
 *     h0 = x_i
 *     layer l:  z_l = h_l W_l^T + b_l ;  h_{l+1} = gelu(z_l)  (the last layer: logits = z)
 *     loss_i, dlogits = cross_entropy(logits, y_i), scaled by 1/micro_batches
 *     backward, l = L-1 .. 0 (g: the gradient flowing down):
 *       [checkpointed layer: z_l recomputed into a fresh tensor here]
 *       g = gelu'(z_l) * g          (not for the last layer)
 *       db_l += sum_rows g ; dW_l += g^T h_l ; g = g W_l   (not below layer 0)
 *   AdamW on every W_l, b_l with t = scalar "step" (f16: first, for the
 *   previous step; see mlp.h)
 *
 * Every micro-batch has its own activation tensors: the scheduler's liveness
 * is per storage from first to last use, so reusing one tensor across
 * micro-batches would keep it live (and written home if evicted) in between.
 * Gradients of parameters are zeroed right before their first accumulation
 * and die at the update, so they do not occupy the device during the first
 * forward. */
#include <stdio.h>
#include <stdlib.h>

#include "mlp_impl.h"

static ot_status act(mlp_trainer *t, int64_t rows, int64_t cols, ot_tensor **out, const char *fmt, int a, int b) {
  int64_t shape[2] = {rows, cols};
  return ot_tlist_add(&t->step, t->ctx, OT_F32, 2, shape, 0, out, fmt, a, b);
}

/* z = h W^T + b */
static ot_status linear(ot_program *p, ot_tensor *z, ot_tensor *h, ot_tensor *W, ot_tensor *b) {
  OT_TRY(ot_op_matmul(p, z, h, W, 1, 0));
  return ot_op_add(p, z, z, b);
}

/* f16: dlogits carry the loss scale 2^k, so the f16 parameter gradients
 * neither underflow nor (when k is right) overflow. */
static ot_status record_micro_batch(mlp_trainer *t, int mb, ot_tensor **dW, ot_tensor **db) {
  const mlp_config *c = &t->c;
  ot_program *p = t->prog;
  const int L = c->layers, B = c->batch;
  ot_tensor *h[MLP_MAX_LAYERS + 1], *z[MLP_MAX_LAYERS], *losses;
  int64_t sB[1] = {B}, s1[1] = {1};
  int64_t sx[2] = {B, c->in_dim};
  OT_TRY(ot_tlist_add(&t->step, t->ctx, OT_F32, 2, sx, 0, &t->x[mb], "x.mb%d", mb));
  OT_TRY(ot_tlist_add(&t->step, t->ctx, OT_I32, 1, sB, 0, &t->y[mb], "y.mb%d", mb));
  OT_TRY(ot_tlist_add(&t->step, t->ctx, OT_F32, 1, s1, 0, &t->loss[mb], "loss.mb%d", mb));
  OT_TRY(ot_tlist_add(&t->step, t->ctx, OT_F32, 1, sB, 0, &losses, "losses.mb%d", mb));

  /* forward */
  h[0] = t->x[mb];
  for (int l = 0; l < L; l++) {
    OT_TRY(act(t, B, t->dims[l + 1], &z[l], "z%d.mb%d", l, mb));
    OT_TRY(linear(p, z[l], h[l], t->Wc[l], t->b[l]));
    if (l == L - 1) break;
    OT_TRY(act(t, B, t->dims[l + 1], &h[l + 1], "h%d.mb%d", l + 1, mb));
    OT_TRY(ot_op_gelu(p, h[l + 1], z[l]));
  }
  /* loss; the logits become their own gradient (in place) */
  ot_tensor *g = z[L - 1];
  OT_TRY(ot_op_cross_entropy(p, t->loss[mb], losses, g, g, t->y[mb], 1.0f / (float)c->micro_batches));
  if (c->precision == MLP_F16) OT_TRY(ot_op_loss_scale(p, g, t->scale_slot));

  /* backward */
  for (int l = L - 1; l >= 0; l--) {
    if (l < L - 1) {
      ot_tensor *zl = z[l];
      if (t->recompute[l]) {
        OT_TRY(act(t, B, t->dims[l + 1], &zl, "z%d.mb%d.recomputed", l, mb));
        OT_TRY(linear(p, zl, h[l], t->Wc[l], t->b[l]));
      }
      OT_TRY(ot_op_gelu_backward(p, g, zl, g));
    }
    if (mb == 0) {
      OT_TRY(ot_op_zero(p, db[l]));
      OT_TRY(ot_op_zero(p, dW[l]));
    }
    OT_TRY(ot_op_bias_backward(p, db[l], g));
    ot_tensor *dh = NULL;
    if (l > 0) OT_TRY(act(t, B, t->dims[l], &dh, "dh%d.mb%d", l, mb));
    OT_TRY(ot_op_matmul_backward(p, dh, dW[l], g, h[l], t->Wc[l], 1));
    g = dh;
  }
  OT_TRY(ot_program_mark_input(p, t->x[mb]));
  OT_TRY(ot_program_mark_input(p, t->y[mb]));
  return ot_program_mark_output(p, t->loss[mb]);
}

/* AdamW on every W_l, b_l (writing the low-precision copy of W_l). With
 * f16 it applies the PREVIOUS step's gradients, unscaled by that step's 2^k,
 * unless the host set the skip flag (see mlp.h). */
static ot_status record_update(mlp_trainer *t, ot_tensor **dW, ot_tensor **db) {
  const mlp_config *c = &t->c;
  ot_program *p = t->prog;
  ot_adamw_opts o = c->adam;
  o.step_slot = t->step_slot;
  if (c->precision == MLP_F16) {
    o.scale_slot = t->unscale_slot;
    o.skip_slot = t->skip_slot;
  }
  for (int l = 0; l < c->layers; l++) {
    ot_tensor *copy = c->precision == MLP_FP32 ? NULL : t->Wc[l];
    OT_TRY(ot_op_adamw(p, t->W[l], dW[l], t->mW[l], t->vW[l], copy, &o));
    OT_TRY(ot_op_adamw(p, t->b[l], db[l], t->mb[l], t->vb[l], NULL, &o));
    ot_tensor *keep[7] = {t->W[l], t->b[l], t->mW[l], t->vW[l], t->mb[l], t->vb[l], t->Wc[l]};
    for (int k = 0; k < 7; k++) OT_TRY(ot_program_mark_persistent(p, keep[k]));
  }
  return OT_OK;
}

/* f16: stats = {sum g^2, Inf/NaN count} over every parameter gradient. */
static ot_status record_stats(mlp_trainer *t, ot_tensor **dW, ot_tensor **db) {
  ot_program *p = t->prog;
  int64_t s2[1] = {2};
  OT_TRY(ot_tlist_add(&t->step, t->ctx, OT_F32, 1, s2, 0, &t->stats, "grad_stats"));
  OT_TRY(ot_op_zero(p, t->stats));
  for (int l = 0; l < t->c.layers; l++) {
    OT_TRY(ot_op_grad_stats(p, t->stats, dW[l]));
    OT_TRY(ot_op_grad_stats(p, t->stats, db[l]));
  }
  return ot_program_mark_output(p, t->stats);
}

/* Records the step with the layers' recompute flags as they are. */
static ot_status record(mlp_trainer *t) {
  const mlp_config *c = &t->c;
  const int f16 = c->precision == MLP_F16;
  OT_TRY(ot_program_create(t->ctx, &t->prog));
  ot_program *p = t->prog;
  OT_TRY(ot_program_scalar_create(p, "step", &t->step_slot));
  if (f16) {
    OT_TRY(ot_program_scalar_create(p, "loss_scale_log2", &t->scale_slot));
    OT_TRY(ot_program_scalar_create(p, "prev_loss_scale_log2", &t->unscale_slot));
    OT_TRY(ot_program_scalar_create(p, "skip_update", &t->skip_slot));
  }
  ot_dtype gdt = f16 ? OT_F16 : OT_F32;
  ot_tensor *dW[MLP_MAX_LAYERS], *db[MLP_MAX_LAYERS];
  for (int l = 0; l < c->layers; l++) {
    int64_t sW[2] = {t->dims[l + 1], t->dims[l]}, sb[1] = {t->dims[l + 1]};
    OT_TRY(ot_tlist_add(&t->step, t->ctx, gdt, 2, sW, 0, &dW[l], "dW%d", l));
    OT_TRY(ot_tlist_add(&t->step, t->ctx, gdt, 1, sb, 0, &db[l], "db%d", l));
  }
  if (f16) OT_TRY(record_update(t, dW, db));
  for (int mb = 0; mb < c->micro_batches; mb++) OT_TRY(record_micro_batch(t, mb, dW, db));
  return f16 ? record_stats(t, dW, db) : record_update(t, dW, db);
}
void mlp_step_release(mlp_trainer *t) {
  ot_plan_destroy(t->plan);
  t->plan = NULL;
  ot_program_destroy(t->prog);
  t->prog = NULL;
  ot_tlist_release(&t->step);
}

int mlp_recompute_cost(const mlp_config *c, double bytes, double flops) {
  return ot_recompute_cheaper(bytes, flops, c->pcie_bytes_per_s, c->flops_per_s);
}

/* The step recorded with the mode's checkpoints over layers 0..L-2 (the
 * last layer's z is the logits, which become their own gradient: nothing to
 * drop), and its plan. auto records none and plans with the scheduler's
 * per-tensor recomputation (sched.h, ot_sched_opts.recompute) at the
 * config's rates: the planner drops an activation it must evict and runs
 * its producer again where that beats writing it home and back. */
ot_status mlp_step_record(mlp_trainer *t) {
  const mlp_config *c = &t->c;
  for (int l = 0; l < c->layers; l++) t->recompute[l] = c->recompute == OT_RECOMPUTE_ALL && l < c->layers - 1;
  t->so.recompute = c->recompute == OT_RECOMPUTE_AUTO;
  t->so.pcie_bytes_per_s = c->pcie_bytes_per_s;
  t->so.flops_per_s = c->flops_per_s;
  mlp_step_release(t);
  OT_TRY(record(t));
  return ot_sched_plan(t->ctx, t->prog, &t->so, &t->plan);
}
