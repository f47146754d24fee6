/* ops_pointwise.c — elementwise ops and activations. */
#include "ops/ops_impl.h"

typedef enum pw_kind { PW_ADD, PW_MUL, PW_SCALE, PW_GELU, PW_SILU, PW_SWIGLU } pw_kind;

typedef struct pw_params {
  pw_kind kind;
  float s;
} pw_params;

static ot_status run_pw(const ot_op_exec *e) {
  const pw_params *p = e->params;
  ot_kview y = ot_ops_view(e->out_t[0], e->out[0]), a = ot_ops_view(e->in_t[0], e->in[0]);
  ot_kview b = e->n_in > 1 ? ot_ops_view(e->in_t[1], e->in[1]) : ot_kview_none();
  switch (p->kind) {
  case PW_ADD: return ot_k_add(e->device, y, a, b);
  case PW_MUL: return ot_k_mul(e->device, y, a, b);
  case PW_SCALE: return ot_k_scale(e->device, y, a, p->s);
  case PW_GELU: return ot_k_gelu(e->device, y, a);
  case PW_SILU: return ot_k_silu(e->device, y, a);
  case PW_SWIGLU: return ot_k_swiglu(e->device, y, a, b);
  }
  return ot_fail(OT_ERR_STATE, "%s: unknown elementwise op", e->name);
}

/* b may broadcast over a's rows (b [n], a [.., n]) for add/mul. */
static ot_status check_binary(const char *op, const ot_tensor *out, const ot_tensor *a, const ot_tensor *b, int bcast) {
  OT_TRY(ot_ops_same_shape(op, out, a));
  if (bcast && ot_tensor_ndim(b) == 1 && ot_tensor_dim(b, 0) == ot_tensor_dim(a, ot_tensor_ndim(a) - 1)) return OT_OK;
  return ot_ops_same_shape(op, a, b);
}

static ot_status record(ot_program *p, const char *op, pw_kind k, float s, ot_tensor *out, ot_tensor *a, ot_tensor *b) {
  if (!p || !out || !a) return ot_fail(OT_ERR_INVALID_ARG, "%s: NULL argument", op);
  pw_params prm = {k, s};
  ot_ops_args args = {.in = {a, b}, .n_in = b ? 2 : 1, .out = {out}, .n_out = 1};
  return ot_ops_record(p, op, out, run_pw, &args, &prm, sizeof prm, (double)ot_tensor_numel(out));
}

ot_status ot_op_add(ot_program *p, ot_tensor *out, ot_tensor *a, ot_tensor *b) {
  if (out && a && b) OT_TRY(check_binary("add", out, a, b, 1));
  return record(p, "add", PW_ADD, 0, out, a, b);
}

ot_status ot_op_mul(ot_program *p, ot_tensor *out, ot_tensor *a, ot_tensor *b) {
  if (out && a && b) OT_TRY(check_binary("mul", out, a, b, 1));
  return record(p, "mul", PW_MUL, 0, out, a, b);
}

ot_status ot_op_scale(ot_program *p, ot_tensor *out, ot_tensor *a, float s) {
  if (out && a) OT_TRY(ot_ops_same_shape("scale", out, a));
  return record(p, "scale", PW_SCALE, s, out, a, NULL);
}

ot_status ot_op_gelu(ot_program *p, ot_tensor *out, ot_tensor *x) {
  if (out && x) OT_TRY(ot_ops_same_shape("gelu", out, x));
  return record(p, "gelu", PW_GELU, 0, out, x, NULL);
}

ot_status ot_op_silu(ot_program *p, ot_tensor *out, ot_tensor *x) {
  if (out && x) OT_TRY(ot_ops_same_shape("silu", out, x));
  return record(p, "silu", PW_SILU, 0, out, x, NULL);
}

ot_status ot_op_swiglu(ot_program *p, ot_tensor *out, ot_tensor *gate, ot_tensor *up) {
  if (out && gate && up) OT_TRY(check_binary("swiglu", out, gate, up, 0));
  return record(p, "swiglu", PW_SWIGLU, 0, out, gate, up);
}
