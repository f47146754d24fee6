/* ops_scale.c — dynamic loss scaling: the run-time power-of-two scale of the
 * loss gradient and the gradient statistics that tell the host whether a
 * step overflowed (the update then skips through ot_adamw_opts.skip_slot). */
#include <math.h>

#include "ops/ops_train_impl.h"

#define NULL_ARG(op) ot_fail(OT_ERR_INVALID_ARG, "%s: NULL argument", op)

static ot_status run_loss_scale(const ot_op_exec *e) {
  int64_t k;
  OT_TRY(ot_targs_scale_exponent(e, *(const int *)e->params, &k));
  ot_kview x = ot_targs_flat(e->out_t[0], e->out[0]);
  return ot_k_scale(e->device, x, x, ldexpf(1.0f, (int)k));
}

ot_status ot_op_loss_scale(ot_program *p, ot_tensor *x, int scale_slot) {
  static const char *op = "loss_scale";
  if (!p || !x) return NULL_ARG(op);
  if (scale_slot < 0)
    return ot_fail(OT_ERR_INVALID_ARG, "%s('%s'): scale_slot %d is not a run-time scalar (ot_program_scalar_create)",
                   op, ot_tensor_name(x), scale_slot);
  OT_TRY(ot_ops_check_contiguous(op, x));
  ot_ops_args a = {0};
  ot_ops_acc(&a, x);
  return ot_ops_record(p, op, x, run_loss_scale, &a, &scale_slot, sizeof scale_slot, (double)ot_tensor_numel(x));
}

static ot_status run_grad_stats(const ot_op_exec *e) {
  /* in: grad, stats; out: stats */
  return ot_k_grad_stats(e->device, ot_targs_flat(e->out_t[0], e->out[0]), ot_targs_flat(e->in_t[0], e->in[0]));
}

ot_status ot_op_grad_stats(ot_program *p, ot_tensor *stats, ot_tensor *grad) {
  static const char *op = "grad_stats";
  if (!p || !stats || !grad) return NULL_ARG(op);
  if (ot_tensor_numel(stats) != 2)
    return ot_fail(OT_ERR_SHAPE, "%s: stats '%s' must have 2 elements (sum of squares, non-finite count)", op,
                   ot_tensor_name(stats));
  OT_TRY(ot_ops_check_f32(op, stats));
  OT_TRY(ot_ops_check_contiguous(op, stats));
  OT_TRY(ot_ops_check_contiguous(op, grad));
  ot_ops_args a = {0};
  ot_ops_in(&a, grad);
  ot_ops_acc(&a, stats);
  return ot_ops_record(p, op, grad, run_grad_stats, &a, NULL, 0, 2.0 * (double)ot_tensor_numel(grad));
}

void ot_loss_scale_next(int *k, int *good_run, int growth_interval, int overflowed) {
  if (overflowed) {
    *good_run = 0;
    if (*k > -126) (*k)--;
  } else if (++*good_run >= growth_interval) {
    *good_run = 0;
    if (*k < 127) (*k)++;
  }
}
