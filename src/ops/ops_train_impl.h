/* ops_train_impl.h (internal) — what the training ops share: views of
 * optional operands (ot_ops_args, ops_impl.h) and record-time checks. */
#ifndef OT_OPS_TRAIN_IMPL_H
#define OT_OPS_TRAIN_IMPL_H

#include "ops/ops_impl.h"

/* The kernel view of in[i] / out[i] of a running op; none for i < 0. */
ot_kview ot_targs_in_view(const ot_op_exec *e, int i);
ot_kview ot_targs_out_view(const ot_op_exec *e, int i);
/* out[i] / in[i] flattened to 1-D [numel] (the tensor is contiguous: checked at recording). */
ot_kview ot_targs_flat(const ot_tensor *t, void *p);

/* The loss scale exponent k of a running op: run-time scalar `slot`, which
 * must be in -126..127 (2^k a finite f32). */
ot_status ot_targs_scale_exponent(const ot_op_exec *e, int slot, int64_t *k);

/* Record-time checks with messages naming the op and tensors. */
ot_status ot_ops_check_dim(const char *op, const ot_tensor *a, int da, const ot_tensor *b, int db);
ot_status ot_ops_check_contiguous(const char *op, const ot_tensor *t);
ot_status ot_ops_check_numel(const char *op, const ot_tensor *a, const ot_tensor *b);

#endif
