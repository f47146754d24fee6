/* ops_train_common.c — operand views and checks shared by the training ops. */
#include "ops/ops_train_impl.h"

ot_kview ot_targs_in_view(const ot_op_exec *e, int i) {
  return i < 0 ? ot_kview_none() : ot_ops_view(e->in_t[i], e->in[i]);
}

ot_kview ot_targs_out_view(const ot_op_exec *e, int i) {
  return i < 0 ? ot_kview_none() : ot_ops_view(e->out_t[i], e->out[i]);
}

ot_kview ot_targs_flat(const ot_tensor *t, void *p) {
  return t ? ot_kview_1d(p, t->dt, ot_tensor_numel(t)) : ot_kview_none();
}

ot_status ot_targs_scale_exponent(const ot_op_exec *e, int slot, int64_t *k) {
  OT_TRY(ot_ops_scalar(e, slot, "loss scale exponent", k));
  if (*k < -126 || *k > 127)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: loss scale 2^%lld is not a finite f32; keep the exponent in -126..127",
                   e->name, (long long)*k);
  return OT_OK;
}

ot_status ot_ops_check_dim(const char *op, const ot_tensor *a, int da, const ot_tensor *b, int db) {
  int64_t x = ot_tensor_dim(a, da < 0 ? a->ndim + da : da), y = ot_tensor_dim(b, db < 0 ? b->ndim + db : db);
  if (x == y) return OT_OK;
  return ot_fail(OT_ERR_SHAPE, "%s: dim %d of '%s' (%lld) and dim %d of '%s' (%lld) must be equal", op, da, a->name,
                 (long long)x, db, b->name, (long long)y);
}

ot_status ot_ops_check_contiguous(const char *op, const ot_tensor *t) {
  if (ot_tensor_is_contiguous(t)) return OT_OK;
  return ot_fail(OT_ERR_SHAPE, "%s: '%s' must be contiguous (pass the whole parameter, not a strided view)", op,
                 t->name);
}

ot_status ot_ops_check_numel(const char *op, const ot_tensor *a, const ot_tensor *b) {
  if (ot_tensor_numel(a) == ot_tensor_numel(b)) return OT_OK;
  return ot_fail(OT_ERR_SHAPE, "%s: '%s' has %lld elements and '%s' %lld; they must match", op, a->name,
                 (long long)ot_tensor_numel(a), b->name, (long long)ot_tensor_numel(b));
}
