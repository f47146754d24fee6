/* ops_linear.c — matmul. */
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
  ot_tensor *in[3] = {a, w, out};
  double flops = 2.0 * (double)ot_tensor_numel(out) * (double)ot_tensor_dim(a, ot_tensor_ndim(a) - 1);
  return ot_ops_record(p, "matmul", w, run_matmul, in, accumulate ? 3 : 2, &out, 1, &prm, sizeof prm, flops);
}
