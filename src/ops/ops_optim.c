/* ops_optim.c — optimizer updates (AdamW, SGD) with the step number read at
 * run time, and zero-fill for gradient accumulators. */
#include "ops/ops_train_impl.h"
#include "ot_pragmas.h"

#include <math.h>

#define NULL_ARG(op) ot_fail(OT_ERR_INVALID_ARG, "%s: NULL argument", op)

/* ---- zero ------------------------------------------------------------------
 * The kernel library has no fill kernel yet (ot_k_scale by 0 would read the
 * old bytes, and 0 * NaN of an uninitialised block is NaN), so the fill is
 * this one loop. It belongs in src/kernels as ot_k_fill when that exists. */
static void fill_words(int dev, uint32_t *w, int64_t n) {
  OT_PARFOR(dev, OT_DEVPTR(w))
  for (int64_t i = 0; i < n; i++) w[i] = 0u;
}

static void fill_bytes(int dev, unsigned char *b, int64_t n) {
  OT_PARFOR(dev, OT_DEVPTR(b))
  for (int64_t i = 0; i < n; i++) b[i] = 0u;
}

static ot_status run_zero(const ot_op_exec *e) {
  int64_t n = (int64_t)ot_tensor_nbytes(e->out_t[0]);
  if (n % 4 == 0 && (uintptr_t)e->out[0] % 4 == 0) fill_words(e->device, e->out[0], n / 4);
  else fill_bytes(e->device, e->out[0], n);
  return OT_OK;
}

ot_status ot_op_zero(ot_program *p, ot_tensor *t) {
  if (!p || !t) return NULL_ARG("zero");
  OT_TRY(ot_ops_check_contiguous("zero", t));
  ot_ops_args a = {.out = {t}, .n_out = 1};
  return ot_ops_record(p, "zero", t, run_zero, &a, NULL, 0, 0);
}

/* ---- optimizers ----------------------------------------------------------------- */

ot_adamw_opts ot_adamw_opts_default(void) {
  return (ot_adamw_opts){.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f,
                         .grad_scale = 1.0f, .step_slot = -1, .scale_slot = -1, .skip_slot = -1};
}

/* param, grad, m/v or buf, copy: the same number of elements, contiguous. */
static ot_status check_update(const char *op, ot_tensor *param, ot_tensor *grad, ot_tensor *s1, ot_tensor *s2,
                              ot_tensor *copy) {
  if (ot_tensor_dtype(param) != OT_F32)
    return ot_fail(OT_ERR_DTYPE, "%s: parameter '%s' is %s; master weights must be f32", op, ot_tensor_name(param),
                   ot_dtype_name(ot_tensor_dtype(param)));
  ot_tensor *all[5] = {param, grad, s1, s2, copy};
  for (int i = 0; i < 5; i++) {
    if (!all[i]) continue;
    OT_TRY(ot_ops_check_contiguous(op, all[i]));
    OT_TRY(ot_ops_check_numel(op, param, all[i]));
  }
  if (s1) OT_TRY(ot_ops_check_f32(op, s1));
  if (s2) OT_TRY(ot_ops_check_f32(op, s2));
  return OT_OK;
}

typedef struct upd_params {
  int p, g, s1, s2, copy; /* operand positions; s1/s2: m/v or buf */
  ot_adamw_opts adam;
  ot_sgd_opts sgd;
} upd_params;

static ot_kview flat_out(const ot_op_exec *e, int i) {
  return i < 0 ? ot_kview_none() : ot_targs_flat(e->out_t[i], e->out[i]);
}

/* The skipped update of a step whose gradients overflowed: only the
 * low-precision copy is written (it is an output: its old bytes may not be
 * on the device). */
static ot_status skip_update(const ot_op_exec *e, const upd_params *q) {
  if (q->copy < 0) return OT_OK;
  return ot_k_scale(e->device, flat_out(e, q->copy), flat_out(e, q->p), 1.0f);
}

static ot_status run_adamw(const ot_op_exec *e) {
  const upd_params *q = e->params;
  const ot_adamw_opts *o = &q->adam;
  int64_t skip = 0, k = 0, t;
  if (o->skip_slot >= 0) OT_TRY(ot_ops_scalar(e, o->skip_slot, "skip flag", &skip));
  if (skip) return skip_update(e, q);
  if (o->scale_slot >= 0) OT_TRY(ot_targs_scale_exponent(e, o->scale_slot, &k));
  OT_TRY(ot_ops_scalar(e, o->step_slot, "step", &t));
  if (t < 1) return ot_fail(OT_ERR_INVALID_ARG, "%s: step %lld; AdamW steps count from 1 (set the step scalar)",
                            e->name, (long long)t);
  ot_kadamw h = {o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, t, ldexpf(o->grad_scale, (int)-k)};
  return ot_k_adamw(e->device, flat_out(e, q->p), ot_targs_flat(e->in_t[q->g], e->in[q->g]), flat_out(e, q->s1),
                    flat_out(e, q->s2), flat_out(e, q->copy), h);
}

/* Operands: grad read; param, m, v (buf) read and written; copy written. */
static void update_args(ot_ops_args *a, upd_params *prm, ot_tensor *param, ot_tensor *grad, ot_tensor *s1,
                        ot_tensor *s2, ot_tensor *copy) {
  prm->g = ot_ops_in(a, grad);
  prm->p = ot_ops_acc(a, param);
  prm->s1 = ot_ops_acc(a, s1);
  prm->s2 = ot_ops_acc(a, s2);
  prm->copy = ot_ops_out(a, copy);
}

ot_status ot_op_adamw(ot_program *p, ot_tensor *param, ot_tensor *grad, ot_tensor *m, ot_tensor *v, ot_tensor *copy,
                      const ot_adamw_opts *o) {
  static const char *op = "adamw";
  if (!p || !param || !grad || !m || !v || !o) return NULL_ARG(op);
  OT_TRY(check_update(op, param, grad, m, v, copy));
  if (o->step_slot < 0) /* a slot beyond the program's scalars fails when the op runs */
    return ot_fail(OT_ERR_INVALID_ARG, "%s('%s'): step_slot %d is not a run-time scalar (ot_program_scalar_create)",
                   op, ot_tensor_name(param), o->step_slot);
  if (o->scale_slot < -1 || o->skip_slot < -1)
    return ot_fail(OT_ERR_INVALID_ARG, "%s('%s'): scale_slot %d / skip_slot %d: use -1 (off) or a run-time scalar", op,
                   ot_tensor_name(param), o->scale_slot, o->skip_slot);
  ot_ops_args a = {0};
  upd_params prm = {.adam = *o};
  update_args(&a, &prm, param, grad, m, v, copy);
  return ot_ops_record(p, op, param, run_adamw, &a, &prm, sizeof prm, 12.0 * (double)ot_tensor_numel(param));
}

static ot_status run_sgd(const ot_op_exec *e) {
  const upd_params *q = e->params;
  const ot_sgd_opts *o = &q->sgd;
  ot_ksgd h = {o->lr, o->momentum, o->weight_decay, o->nesterov, o->grad_scale};
  return ot_k_sgd(e->device, flat_out(e, q->p), ot_targs_flat(e->in_t[q->g], e->in[q->g]), flat_out(e, q->s1),
                  flat_out(e, q->copy), h);
}

ot_status ot_op_sgd(ot_program *p, ot_tensor *param, ot_tensor *grad, ot_tensor *buf, ot_tensor *copy,
                    const ot_sgd_opts *o) {
  static const char *op = "sgd";
  if (!p || !param || !grad || !o) return NULL_ARG(op);
  if (o->momentum != 0.0f && !buf)
    return ot_fail(OT_ERR_INVALID_ARG, "%s('%s'): momentum %g needs a momentum buffer", op, ot_tensor_name(param),
                   (double)o->momentum);
  OT_TRY(check_update(op, param, grad, buf, NULL, copy));
  ot_ops_args a = {0};
  upd_params prm = {.sgd = *o};
  update_args(&a, &prm, param, grad, o->momentum != 0.0f ? buf : NULL, NULL, copy);
  return ot_ops_record(p, op, param, run_sgd, &a, &prm, sizeof prm, 6.0 * (double)ot_tensor_numel(param));
}
