/* ops_train_impl.h (internal) — what the training ops share: optional
 * operands and the list of storages an op reads and writes. */
#ifndef OT_OPS_TRAIN_IMPL_H
#define OT_OPS_TRAIN_IMPL_H

#include "ops/ops_impl.h"

/* Operands of one op being recorded. Optional tensors (NULL) are skipped;
 * each added tensor's position in in[] / out[] is returned so run() can find
 * it (-1 when absent). An accumulated tensor (+=) is read and written. */
typedef struct ot_train_args {
  ot_tensor *in[8], *out[8];
  int n_in, n_out;
} ot_train_args;

int ot_targs_in(ot_train_args *a, ot_tensor *t);  /* read */
int ot_targs_out(ot_train_args *a, ot_tensor *t); /* overwritten */
int ot_targs_acc(ot_train_args *a, ot_tensor *t); /* accumulated: read and written; returns its out[] index */

/* The kernel view of in[i] / out[i] of a running op; none for i < 0. */
ot_kview ot_targs_in_view(const ot_op_exec *e, int i);
ot_kview ot_targs_out_view(const ot_op_exec *e, int i);
/* out[i] / in[i] flattened to 1-D [numel] (the tensor is contiguous: checked at recording). */
ot_kview ot_targs_flat(const ot_tensor *t, void *p);

/* Records the op named "<kind>(<named>)" with the args collected. */
ot_status ot_targs_record(ot_program *p, const char *kind, const ot_tensor *named, ot_op_fn run,
                          const ot_train_args *a, const void *params, size_t params_bytes, double flops);

/* Record-time checks with messages naming the op and tensors. */
ot_status ot_ops_check_dim(const char *op, const ot_tensor *a, int da, const ot_tensor *b, int db);
ot_status ot_ops_check_contiguous(const char *op, const ot_tensor *t);
ot_status ot_ops_check_numel(const char *op, const ot_tensor *a, const ot_tensor *b);

#endif
