/* ops_norm.c — RMSNorm and LayerNorm over rows. */
#include "kernels/step_gpu.h"
#include "ops/ops_impl.h"

typedef struct norm_params {
  float eps;
} norm_params;

static ot_status run_rms(const ot_op_exec *e) {
  const norm_params *p = e->params;
  return ot_k_rmsnorm(e->device, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->in_t[0], e->in[0]),
                      ot_ops_view(e->in_t[1], e->in[1]), p->eps);
}

static ot_status run_ln(const ot_op_exec *e) {
  const norm_params *p = e->params;
  return ot_k_layernorm(e->device, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->in_t[0], e->in[0]),
                        ot_ops_view(e->in_t[1], e->in[1]), ot_ops_view(e->in_t[2], e->in[2]), p->eps);
}

/* The step kernel's encoders (kernels/step_gpu.h): the same views as run. */
static int emit_rms(const ot_op_exec *e, void *insns) {
  const norm_params *p = e->params;
  const ot_kview w = ot_ops_view(e->in_t[1], e->in[1]);
  return ot_kstep_norm(insns, e->device, 0, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->in_t[0], e->in[0]), w,
                       w, p->eps);
}

static int emit_ln(const ot_op_exec *e, void *insns) {
  const norm_params *p = e->params;
  return ot_kstep_norm(insns, e->device, 1, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->in_t[0], e->in[0]),
                       ot_ops_view(e->in_t[1], e->in[1]), ot_ops_view(e->in_t[2], e->in[2]), p->eps);
}

static ot_status check(const char *op, const ot_tensor *out, const ot_tensor *x, const ot_tensor *w, const ot_tensor *b) {
  OT_TRY(ot_ops_same_shape(op, out, x));
  int64_t d = ot_tensor_dim(x, ot_tensor_ndim(x) - 1);
  if (ot_tensor_ndim(w) != 1 || ot_tensor_dim(w, 0) != d || (b && (ot_tensor_ndim(b) != 1 || ot_tensor_dim(b, 0) != d)))
    return ot_fail(OT_ERR_SHAPE, "%s: weight '%s'%s must be [%lld] to normalise '%s'", op, ot_tensor_name(w),
                   b ? " and bias" : "", (long long)d, ot_tensor_name(x));
  return OT_OK;
}

ot_status ot_op_rmsnorm(ot_program *p, ot_tensor *out, ot_tensor *x, ot_tensor *w, float eps) {
  if (!p || !out || !x || !w) return ot_fail(OT_ERR_INVALID_ARG, "rmsnorm: NULL argument");
  OT_TRY(check("rmsnorm", out, x, w, NULL));
  norm_params prm = {eps};
  ot_ops_args a = {.in = {x, w}, .n_in = 2, .out = {out}, .n_out = 1, .emit = emit_rms};
  return ot_ops_record(p, "rmsnorm", w, run_rms, &a, &prm, sizeof prm, 4.0 * (double)ot_tensor_numel(x));
}

ot_status ot_op_layernorm(ot_program *p, ot_tensor *out, ot_tensor *x, ot_tensor *w, ot_tensor *b, float eps) {
  if (!p || !out || !x || !w || !b) return ot_fail(OT_ERR_INVALID_ARG, "layernorm: NULL argument");
  OT_TRY(check("layernorm", out, x, w, b));
  norm_params prm = {eps};
  ot_ops_args a = {.in = {x, w, b}, .n_in = 3, .out = {out}, .n_out = 1, .emit = emit_ln};
  return ot_ops_record(p, "layernorm", w, run_ln, &a, &prm, sizeof prm, 6.0 * (double)ot_tensor_numel(x));
}
