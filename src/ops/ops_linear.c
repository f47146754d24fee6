/* ops_linear.c — matmul. */
#include "kernels/step_gpu.h"
#include "ops/ops_impl.h"

typedef struct mm_params {
  int trans_w, accumulate;
} mm_params;

static ot_status run_matmul(const ot_op_exec *e) {
  const mm_params *p = e->params;
  /* in: a, w (and out when accumulating); out: out */
  return ot_k_matmul(e->device, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->in_t[0], e->in[0]),
                     ot_ops_view(e->in_t[1], e->in[1]), p->trans_w, p->accumulate);
}

static int emit_matmul(const ot_op_exec *e, void *insns) {
  const mm_params *p = e->params;
  return ot_kstep_matmul(insns, e->device, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->in_t[0], e->in[0]),
                         ot_ops_view(e->in_t[1], e->in[1]), p->trans_w, p->accumulate);
}

ot_status ot_op_matmul(ot_program *p, ot_tensor *out, ot_tensor *a, ot_tensor *w, int trans_w, int accumulate) {
  if (!p || !out || !a || !w) return ot_fail(OT_ERR_INVALID_ARG, "matmul: NULL argument");
  int64_t K = ot_tensor_dim(a, ot_tensor_ndim(a) - 1);
  int64_t wk = ot_tensor_dim(w, ot_tensor_ndim(w) - (trans_w ? 1 : 2));
  int64_t wn = ot_tensor_dim(w, ot_tensor_ndim(w) - (trans_w ? 2 : 1));
  if (wk != K || wn != ot_tensor_dim(out, ot_tensor_ndim(out) - 1) ||
      ot_tensor_dim(a, ot_tensor_ndim(a) - 2) != ot_tensor_dim(out, ot_tensor_ndim(out) - 2))
    return ot_fail(OT_ERR_SHAPE, "matmul: '%s' [.., %lld, %lld] @ %s'%s' (K=%lld, N=%lld) does not give '%s' [.., %lld, %lld]",
                   ot_tensor_name(a), (long long)ot_tensor_dim(a, ot_tensor_ndim(a) - 2), (long long)K,
                   trans_w ? "transposed " : "", ot_tensor_name(w), (long long)wk, (long long)wn, ot_tensor_name(out),
                   (long long)ot_tensor_dim(out, ot_tensor_ndim(out) - 2),
                   (long long)ot_tensor_dim(out, ot_tensor_ndim(out) - 1));
  mm_params prm = {trans_w != 0, accumulate != 0};
  ot_ops_args args = {.in = {a, w, out}, .n_in = accumulate ? 3 : 2, .out = {out}, .n_out = 1, .emit = emit_matmul};
  double flops = 2.0 * (double)ot_tensor_numel(out) * (double)ot_tensor_dim(a, ot_tensor_ndim(a) - 1);
  return ot_ops_record(p, "matmul", w, run_matmul, &args, &prm, sizeof prm, flops);
}

/* in: a, w[0..n); out: out[0..n) */
static ot_status run_multi(const ot_op_exec *e) {
  ot_kview c[3], w[3];
  int n = e->n_out;
  for (int i = 0; i < n; i++) {
    c[i] = ot_ops_view(e->out_t[i], e->out[i]);
    w[i] = ot_ops_view(e->in_t[1 + i], e->in[1 + i]);
  }
  return ot_k_matmul_multi(e->device, n, c, ot_ops_view(e->in_t[0], e->in[0]), w);
}

static int emit_multi(const ot_op_exec *e, void *insns) {
  ot_kview c[3], w[3];
  const int n = e->n_out;
  for (int i = 0; i < n; i++) {
    c[i] = ot_ops_view(e->out_t[i], e->out[i]);
    w[i] = ot_ops_view(e->in_t[1 + i], e->in[1 + i]);
  }
  return ot_kstep_matmul_multi(insns, e->device, n, c, ot_ops_view(e->in_t[0], e->in[0]), w);
}

ot_status ot_op_matmul_multi(ot_program *p, int n, ot_tensor *const *out, ot_tensor *a, ot_tensor *const *w) {
  if (!p || !out || !a || !w || n < 1 || n > 3) return ot_fail(OT_ERR_INVALID_ARG, "matmul_multi: 1 to 3 weights, none NULL");
  ot_ops_args args = {.in = {a}, .n_in = n + 1, .n_out = n, .emit = emit_multi};
  double flops = 0;
  for (int i = 0; i < n; i++) {
    if (!out[i] || !w[i]) return ot_fail(OT_ERR_INVALID_ARG, "matmul_multi: NULL tensor");
    if (ot_tensor_ndim(w[i]) != 2 || ot_tensor_dim(w[i], 1) != ot_tensor_dim(a, ot_tensor_ndim(a) - 1) ||
        ot_tensor_ndim(out[i]) != 2 || ot_tensor_dim(out[i], 1) != ot_tensor_dim(w[i], 0) ||
        ot_tensor_dim(out[i], 0) != ot_tensor_dim(a, 0))
      return ot_fail(OT_ERR_SHAPE, "matmul_multi: '%s' @ '%s'^T does not give '%s'", ot_tensor_name(a),
                     ot_tensor_name(w[i]), ot_tensor_name(out[i]));
    args.in[1 + i] = w[i];
    args.out[i] = out[i];
    flops += 2.0 * (double)ot_tensor_numel(out[i]) * (double)ot_tensor_dim(a, 1);
  }
  return ot_ops_record(p, "matmul_multi", w[0], run_multi, &args, NULL, 0, flops);
}

/* in: a, wg, wu; out: out, up */
static ot_status run_swiglu(const ot_op_exec *e) {
  return ot_k_matmul_swiglu(e->device, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->out_t[1], e->out[1]),
                            ot_ops_view(e->in_t[0], e->in[0]), ot_ops_view(e->in_t[1], e->in[1]),
                            ot_ops_view(e->in_t[2], e->in[2]));
}

static int emit_swiglu(const ot_op_exec *e, void *insns) {
  return ot_kstep_matmul_swiglu(insns, e->device, ot_ops_view(e->out_t[0], e->out[0]),
                                ot_ops_view(e->out_t[1], e->out[1]), ot_ops_view(e->in_t[0], e->in[0]),
                                ot_ops_view(e->in_t[1], e->in[1]), ot_ops_view(e->in_t[2], e->in[2]));
}

ot_status ot_op_matmul_swiglu(ot_program *p, ot_tensor *out, ot_tensor *up, ot_tensor *a, ot_tensor *wg, ot_tensor *wu) {
  if (!p || !out || !up || !a || !wg || !wu) return ot_fail(OT_ERR_INVALID_ARG, "matmul_swiglu: NULL argument");
  OT_TRY(ot_ops_same_shape("matmul_swiglu", out, up));
  OT_TRY(ot_ops_same_shape("matmul_swiglu", wg, wu));
  if (ot_tensor_ndim(wg) != 2 || ot_tensor_dim(wg, 1) != ot_tensor_dim(a, 1) || ot_tensor_dim(out, 1) != ot_tensor_dim(wg, 0) ||
      ot_tensor_dim(out, 0) != ot_tensor_dim(a, 0))
    return ot_fail(OT_ERR_SHAPE, "matmul_swiglu: '%s' @ '%s'^T does not give '%s'", ot_tensor_name(a),
                   ot_tensor_name(wg), ot_tensor_name(out));
  ot_ops_args args = {.in = {a, wg, wu}, .n_in = 3, .out = {out, up}, .n_out = 2, .emit = emit_swiglu};
  double flops = 4.0 * (double)ot_tensor_numel(out) * (double)ot_tensor_dim(a, 1);
  return ot_ops_record(p, "matmul_swiglu", wg, run_swiglu, &args, NULL, 0, flops);
}
