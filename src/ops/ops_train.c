/* ops_train.c — loss and the backward of the dense ops (matmul, bias,
 * activations, norms). Parameter gradients accumulate; see ops.h. */
#include "ops/ops_train_impl.h"

#define NULL_ARG(op) ot_fail(OT_ERR_INVALID_ARG, "%s: NULL argument", op)

/* ---- cross-entropy -------------------------------------------------------- */

typedef struct ce_params {
  int loss, losses, dlogits, logits, targets; /* operand positions */
  float grad_scale;
} ce_params;

static ot_status run_ce(const ot_op_exec *e) {
  const ce_params *q = e->params;
  return ot_k_cross_entropy(e->device, ot_targs_out_view(e, q->loss), ot_targs_out_view(e, q->losses),
                            ot_targs_out_view(e, q->dlogits), ot_targs_in_view(e, q->logits),
                            ot_targs_in_view(e, q->targets), q->grad_scale);
}

ot_status ot_op_cross_entropy(ot_program *p, ot_tensor *loss, ot_tensor *losses, ot_tensor *dlogits,
                              ot_tensor *logits, ot_tensor *targets, float grad_scale) {
  static const char *op = "cross_entropy";
  if (!p || !loss || !losses || !logits || !targets) return NULL_ARG(op);
  if (ot_tensor_ndim(logits) != 2 || ot_tensor_dtype(targets) != OT_I32 || ot_tensor_ndim(targets) != 1 ||
      ot_tensor_numel(loss) != 1 || ot_tensor_ndim(losses) != 1)
    return ot_fail(OT_ERR_SHAPE, "%s: need logits '%s' [rows, V], targets '%s' i32 [rows], loss '%s' [1], "
                   "losses '%s' [rows]", op, ot_tensor_name(logits), ot_tensor_name(targets), ot_tensor_name(loss),
                   ot_tensor_name(losses));
  OT_TRY(ot_ops_check_dim(op, logits, 0, targets, 0));
  OT_TRY(ot_ops_check_dim(op, logits, 0, losses, 0));
  OT_TRY(ot_ops_check_f32(op, loss));
  OT_TRY(ot_ops_check_f32(op, losses));
  if (dlogits) OT_TRY(ot_ops_same_shape(op, dlogits, logits));
  ot_ops_args a = {0};
  ce_params prm = {.grad_scale = grad_scale};
  prm.logits = ot_ops_in(&a, logits);
  prm.targets = ot_ops_in(&a, targets);
  prm.loss = ot_ops_out(&a, loss);
  prm.losses = ot_ops_out(&a, losses);
  /* dlogits may be logits itself: listed once as an output too (in place) */
  prm.dlogits = ot_ops_out(&a, dlogits);
  return ot_ops_record(p, op, logits, run_ce, &a, &prm, sizeof prm, 5.0 * (double)ot_tensor_numel(logits));
}

/* ---- matmul / bias backward ------------------------------------------------- */

typedef struct mmb_params {
  int da, dw, dout, a, w;
  int trans_w;
} mmb_params;

static ot_status run_mmb(const ot_op_exec *e) {
  const mmb_params *q = e->params;
  return ot_k_matmul_backward(e->device, ot_targs_out_view(e, q->da), ot_targs_out_view(e, q->dw),
                              ot_targs_in_view(e, q->dout), ot_targs_in_view(e, q->a), ot_targs_in_view(e, q->w),
                              q->trans_w);
}

ot_status ot_op_matmul_backward(ot_program *p, ot_tensor *da, ot_tensor *dw, ot_tensor *dout, ot_tensor *a,
                                ot_tensor *w, int trans_w) {
  static const char *op = "matmul_backward";
  if (!p || !dout || !a || !w || (!da && !dw)) return NULL_ARG(op);
  /* the forward's shapes: a [.., M, K], w [K, N] (or [N, K] with trans_w), dout [.., M, N] */
  OT_TRY(ot_ops_check_dim(op, a, -2, dout, -2));
  OT_TRY(ot_ops_check_dim(op, a, -1, w, trans_w ? -1 : -2));
  OT_TRY(ot_ops_check_dim(op, dout, -1, w, trans_w ? -2 : -1));
  if (da) OT_TRY(ot_ops_same_shape(op, da, a));
  if (dw) OT_TRY(ot_ops_same_shape(op, dw, w));
  ot_ops_args g = {0};
  mmb_params prm = {.trans_w = trans_w != 0};
  prm.dout = ot_ops_in(&g, dout);
  prm.a = ot_ops_in(&g, a);
  prm.w = ot_ops_in(&g, w);
  prm.da = ot_ops_out(&g, da);
  prm.dw = ot_ops_acc(&g, dw);
  double flops = 2.0 * (double)ot_tensor_numel(dout) * (double)ot_tensor_dim(a, ot_tensor_ndim(a) - 1);
  return ot_ops_record(p, op, w, run_mmb, &g, &prm, sizeof prm, (da && dw ? 2 : 1) * flops);
}

static ot_status run_biasb(const ot_op_exec *e) {
  /* in: dy, db; out: db */
  return ot_k_bias_backward(e->device, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->in_t[0], e->in[0]));
}

ot_status ot_op_bias_backward(ot_program *p, ot_tensor *db, ot_tensor *dy) {
  static const char *op = "bias_backward";
  if (!p || !db || !dy) return NULL_ARG(op);
  if (ot_tensor_ndim(db) != 1)
    return ot_fail(OT_ERR_SHAPE, "%s: bias gradient '%s' must be 1-D [n]", op, ot_tensor_name(db));
  OT_TRY(ot_ops_check_dim(op, db, 0, dy, -1));
  ot_ops_args g = {0};
  ot_ops_in(&g, dy);
  ot_ops_acc(&g, db);
  return ot_ops_record(p, op, db, run_biasb, &g, NULL, 0, (double)ot_tensor_numel(dy));
}

/* ---- activations backward ------------------------------------------------------ */

typedef enum act_kind { ACT_GELU, ACT_SILU } act_kind;

static ot_status run_act(const ot_op_exec *e) {
  const act_kind *k = e->params;
  /* in: x, dy; out: dx */
  ot_kview dx = ot_ops_view(e->out_t[0], e->out[0]), x = ot_ops_view(e->in_t[0], e->in[0]),
           dy = ot_ops_view(e->in_t[1], e->in[1]);
  return *k == ACT_GELU ? ot_k_gelu_backward(e->device, dx, x, dy) : ot_k_silu_backward(e->device, dx, x, dy);
}

static ot_status act_backward(ot_program *p, const char *op, act_kind k, ot_tensor *dx, ot_tensor *x, ot_tensor *dy) {
  if (!p || !dx || !x || !dy) return NULL_ARG(op);
  OT_TRY(ot_ops_same_shape(op, dx, x));
  OT_TRY(ot_ops_same_shape(op, dy, x));
  ot_ops_args g = {0};
  ot_ops_in(&g, x);
  ot_ops_in(&g, dy);
  ot_ops_out(&g, dx);
  return ot_ops_record(p, op, x, run_act, &g, &k, sizeof k, 10.0 * (double)ot_tensor_numel(x));
}

ot_status ot_op_gelu_backward(ot_program *p, ot_tensor *dx, ot_tensor *x, ot_tensor *dy) {
  return act_backward(p, "gelu_backward", ACT_GELU, dx, x, dy);
}

ot_status ot_op_silu_backward(ot_program *p, ot_tensor *dx, ot_tensor *x, ot_tensor *dy) {
  return act_backward(p, "silu_backward", ACT_SILU, dx, x, dy);
}

static ot_status run_swiglub(const ot_op_exec *e) {
  /* in: gate, up, dy; out: dgate, dup */
  return ot_k_swiglu_backward(e->device, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->out_t[1], e->out[1]),
                              ot_ops_view(e->in_t[0], e->in[0]), ot_ops_view(e->in_t[1], e->in[1]),
                              ot_ops_view(e->in_t[2], e->in[2]));
}

ot_status ot_op_swiglu_backward(ot_program *p, ot_tensor *dgate, ot_tensor *dup, ot_tensor *gate, ot_tensor *up,
                                ot_tensor *dy) {
  static const char *op = "swiglu_backward";
  if (!p || !dgate || !dup || !gate || !up || !dy) return NULL_ARG(op);
  OT_TRY(ot_ops_same_shape(op, gate, up));
  OT_TRY(ot_ops_same_shape(op, dy, up));
  OT_TRY(ot_ops_same_shape(op, dgate, up));
  OT_TRY(ot_ops_same_shape(op, dup, up));
  if (ot_tensor_same_storage(dgate, gate) || ot_tensor_same_storage(dgate, up) || ot_tensor_same_storage(dgate, dy))
    return ot_fail(OT_ERR_INVALID_ARG, "%s: dgate '%s' must not share storage with gate, up or dy", op,
                   ot_tensor_name(dgate));
  ot_ops_args g = {0};
  ot_ops_in(&g, gate);
  ot_ops_in(&g, up);
  ot_ops_in(&g, dy);
  ot_ops_out(&g, dgate);
  ot_ops_out(&g, dup);
  return ot_ops_record(p, op, gate, run_swiglub, &g, NULL, 0, 12.0 * (double)ot_tensor_numel(up));
}

/* ---- norms backward -------------------------------------------------------------- */

typedef struct normb_params {
  int dx, dw, db, dy, x, w;
  int layernorm;
  float eps;
} normb_params;

static ot_status run_normb(const ot_op_exec *e) {
  const normb_params *q = e->params;
  ot_kview dx = ot_targs_out_view(e, q->dx), dw = ot_targs_out_view(e, q->dw), dy = ot_targs_in_view(e, q->dy),
           x = ot_targs_in_view(e, q->x), w = ot_targs_in_view(e, q->w);
  if (q->layernorm)
    return ot_k_layernorm_backward(e->device, dx, dw, ot_targs_out_view(e, q->db), dy, x, w, q->eps);
  return ot_k_rmsnorm_backward(e->device, dx, dw, dy, x, w, q->eps);
}

static ot_status norm_backward(ot_program *p, const char *op, int ln, ot_tensor *dx, ot_tensor *dw, ot_tensor *db,
                               ot_tensor *dy, ot_tensor *x, ot_tensor *w, float eps) {
  if (!p || !dx || !dy || !x || !w) return NULL_ARG(op);
  OT_TRY(ot_ops_same_shape(op, dx, x));
  OT_TRY(ot_ops_same_shape(op, dy, x));
  if (ot_tensor_ndim(w) != 1) return ot_fail(OT_ERR_SHAPE, "%s: weight '%s' must be 1-D", op, ot_tensor_name(w));
  OT_TRY(ot_ops_check_dim(op, w, 0, x, -1));
  if (dw) OT_TRY(ot_ops_same_shape(op, dw, w));
  if (db) OT_TRY(ot_ops_same_shape(op, db, w));
  if (ot_tensor_same_storage(dx, x) || ot_tensor_same_storage(dx, dy))
    return ot_fail(OT_ERR_INVALID_ARG, "%s: dx '%s' must not share storage with x or dy", op, ot_tensor_name(dx));
  ot_ops_args g = {0};
  normb_params prm = {.layernorm = ln, .eps = eps};
  prm.dy = ot_ops_in(&g, dy);
  prm.x = ot_ops_in(&g, x);
  prm.w = ot_ops_in(&g, w);
  prm.dx = ot_ops_out(&g, dx);
  prm.dw = ot_ops_acc(&g, dw);
  prm.db = ot_ops_acc(&g, db);
  return ot_ops_record(p, op, w, run_normb, &g, &prm, sizeof prm, 12.0 * (double)ot_tensor_numel(x));
}

ot_status ot_op_layernorm_backward(ot_program *p, ot_tensor *dx, ot_tensor *dw, ot_tensor *db, ot_tensor *dy,
                                   ot_tensor *x, ot_tensor *w, float eps) {
  return norm_backward(p, "layernorm_backward", 1, dx, dw, db, dy, x, w, eps);
}

ot_status ot_op_rmsnorm_backward(ot_program *p, ot_tensor *dx, ot_tensor *dw, ot_tensor *dy, ot_tensor *x,
                                 ot_tensor *w, float eps) {
  return norm_backward(p, "rmsnorm_backward", 0, dx, dw, NULL, dy, x, w, eps);
}
