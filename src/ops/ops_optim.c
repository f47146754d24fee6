/* ops_optim.c — optimizer updates (AdamW, SGD) with the step number read at
 * run time, and zero-fill for gradient accumulators. */
#include "ops/ops_train_impl.h"
#include "ot_pragmas.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>

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
  int p, g, s1, s2, copy, si; /* operand positions; s1/s2: m/v or buf; si: adam.skip_if (-1) */
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

/* The skip of a step: the host's flag (skip_slot), or the Inf/NaN count of
 * the gradient stats on the device (skip_if, operand `si`). */
static ot_status adamw_skip(const ot_op_exec *e, const ot_adamw_opts *o, int si, int64_t *skip) {
  *skip = 0;
  if (o->skip_slot >= 0) OT_TRY(ot_ops_scalar(e, o->skip_slot, "skip flag", skip));
  if (*skip || si < 0) return OT_OK;
  float st[2];
  OT_TRY(ot_mem_copy(st, OT_DEVICE_HOST, e->in[si], e->device, sizeof st));
  *skip = st[1] != 0.0f;
  return OT_OK;
}

static ot_status check_skip_if(const char *op, const ot_tensor *param, const ot_adamw_opts *o) {
  if (!o->skip_if) return OT_OK;
  if (ot_tensor_dtype(o->skip_if) != OT_F32 || ot_tensor_numel(o->skip_if) != 2 || !ot_tensor_is_contiguous(o->skip_if))
    return ot_fail(OT_ERR_SHAPE, "%s('%s'): skip_if '%s' must be the [2] f32 stats of ot_op_grad_stats", op,
                   ot_tensor_name(param), ot_tensor_name(o->skip_if));
  return OT_OK;
}

static ot_status run_adamw(const ot_op_exec *e) {
  const upd_params *q = e->params;
  const ot_adamw_opts *o = &q->adam;
  int64_t skip = 0, k = 0, t;
  OT_TRY(adamw_skip(e, o, q->si, &skip));
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
  OT_TRY(check_skip_if(op, param, o));
  ot_ops_args a = {0};
  upd_params prm = {.adam = *o};
  update_args(&a, &prm, param, grad, m, v, copy);
  prm.si = o->skip_if ? ot_ops_in(&a, (ot_tensor *)o->skip_if) : -1;
  prm.adam.skip_if = NULL; /* the op's operand from here on, not a pointer kept in params */
  return ot_ops_record(p, op, param, run_adamw, &a, &prm, sizeof prm, 12.0 * (double)ot_tensor_numel(param));
}

/* ---- the multi-tensor AdamW ------------------------------------------------------
 * Operands of n tensors: in = grads[0..n), params, m, v (read); out =
 * params, m, v (written), then the copies that exist. awm_params records
 * where tensor i's copy is in out[] (-1: none). */
typedef struct awm_params {
  ot_adamw_opts adam;
  int n, si; /* si: operand of adam.skip_if (-1: none) */
  int copy_at[]; /* [n] */
} awm_params;

static ot_kview awm_out(const ot_op_exec *e, int i) { return ot_targs_flat(e->out_t[i], e->out[i]); }

/* Runs on the views of tensors [0, n): per-tensor arrays built once, the
 * GPU kernel then takes all of them in a few launches. */
static ot_status run_adamw_multi(const ot_op_exec *e) {
  const awm_params *q = e->params;
  const ot_adamw_opts *o = &q->adam;
  const int n = q->n;
  int64_t skip = 0, k = 0, t;
  OT_TRY(adamw_skip(e, o, q->si, &skip));
  if (skip) { /* as skip_update: only the copies, from the params */
    for (int i = 0; i < n; i++)
      if (q->copy_at[i] >= 0) OT_TRY(ot_k_scale(e->device, awm_out(e, q->copy_at[i]), awm_out(e, i), 1.0f));
    return OT_OK;
  }
  if (o->scale_slot >= 0) OT_TRY(ot_targs_scale_exponent(e, o->scale_slot, &k));
  OT_TRY(ot_ops_scalar(e, o->step_slot, "step", &t));
  if (t < 1) return ot_fail(OT_ERR_INVALID_ARG, "%s: step %lld; AdamW steps count from 1 (set the step scalar)",
                            e->name, (long long)t);
  ot_kadamw h = {o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, t, ldexpf(o->grad_scale, (int)-k)};
  ot_kview *vw = malloc(sizeof *vw * 5 * (size_t)n);
  if (!vw) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: views of %d tensors", e->name, n);
  ot_kview *pv = vw, *gv = vw + n, *mv = vw + 2 * n, *vv = vw + 3 * n, *cv = vw + 4 * n;
  for (int i = 0; i < n; i++) {
    pv[i] = awm_out(e, i);
    mv[i] = awm_out(e, n + i);
    vv[i] = awm_out(e, 2 * n + i);
    gv[i] = ot_targs_flat(e->in_t[i], e->in[i]);
    cv[i] = q->copy_at[i] >= 0 ? awm_out(e, q->copy_at[i]) : ot_kview_none();
  }
  const ot_status s = ot_k_adamw_multi(e->device, n, pv, gv, mv, vv, cv, h);
  free(vw);
  return s;
}

ot_status ot_op_adamw_multi(ot_program *p, int n, ot_tensor *const *params, ot_tensor *const *grads,
                            ot_tensor *const *m, ot_tensor *const *v, ot_tensor *const *copies,
                            const ot_adamw_opts *o) {
  static const char *op = "adamw_multi";
  if (!p || n < 1 || !params || !grads || !m || !v || !o)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: NULL argument or n %d < 1", op, n);
  for (int i = 0; i < n; i++) {
    if (!params[i] || !grads[i] || !m[i] || !v[i])
      return ot_fail(OT_ERR_INVALID_ARG, "%s: tensor %d has a NULL param, grad or moment", op, i);
    OT_TRY(check_update(op, params[i], grads[i], m[i], v[i], copies ? copies[i] : NULL));
  }
  if (o->step_slot < 0)
    return ot_fail(OT_ERR_INVALID_ARG, "%s('%s'): step_slot %d is not a run-time scalar (ot_program_scalar_create)",
                   op, ot_tensor_name(params[0]), o->step_slot);
  if (o->scale_slot < -1 || o->skip_slot < -1)
    return ot_fail(OT_ERR_INVALID_ARG, "%s('%s'): scale_slot %d / skip_slot %d: use -1 (off) or a run-time scalar", op,
                   ot_tensor_name(params[0]), o->scale_slot, o->skip_slot);
  OT_TRY(check_skip_if(op, params[0], o));
  const size_t pb = sizeof(awm_params) + sizeof(int) * (size_t)n;
  awm_params *prm = calloc(1, pb);
  ot_tensor **in = malloc(sizeof *in * (4 * (size_t)n + 1)), **out = malloc(sizeof *out * 4 * (size_t)n);
  if (!prm || !in || !out) {
    free(prm), free(in), free(out);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: operands of %d tensors", op, n);
  }
  prm->adam = *o;
  prm->adam.skip_if = NULL; /* an operand (in[4n]), not a pointer kept in params */
  prm->n = n;
  prm->si = o->skip_if ? 4 * n : -1;
  if (o->skip_if) in[4 * n] = (ot_tensor *)o->skip_if;
  int n_out = 3 * n;
  double bytes = 0, numel = 0;
  for (int i = 0; i < n; i++) {
    in[i] = grads[i], in[n + i] = params[i], in[2 * n + i] = m[i], in[3 * n + i] = v[i];
    out[i] = params[i], out[n + i] = m[i], out[2 * n + i] = v[i];
    ot_tensor *c = copies ? copies[i] : NULL;
    prm->copy_at[i] = c ? n_out : -1;
    if (c) out[n_out++] = c;
    numel += (double)ot_tensor_numel(params[i]);
  }
  for (int i = 0; i < 4 * n; i++) bytes += (double)ot_tensor_nbytes(in[i]);
  for (int i = 0; i < n_out; i++) bytes += (double)ot_tensor_nbytes(out[i]);
  char name[200];
  snprintf(name, sizeof name, "%s(%s+%d)", op, ot_tensor_name(params[0]), n - 1);
  ot_op_desc d = {.name = name, .run = run_adamw_multi, .n_in = 4 * n + (o->skip_if != NULL), .in = in, .n_out = n_out, .out = out,
                  .params = prm, .params_bytes = pb, .flops = 12.0 * numel, .bytes = bytes};
  const ot_status s = ot_program_add_op(p, &d);
  free(prm), free(in), free(out);
  return s;
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
