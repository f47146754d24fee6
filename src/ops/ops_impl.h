/* ops_impl.h (internal) — recording an op whose run() calls a kernel. */
#ifndef OT_OPS_IMPL_H
#define OT_OPS_IMPL_H

#include "core/error.h"
#include "memory/tensor_impl.h"
#include "kernels/kernels.h"
#include "omptensor/ops.h"
#include "sched/batch.h"

/* The kernel view of tensor t whose element 0 is at address p. */
ot_kview ot_ops_view(const ot_tensor *t, void *p);

/* The operands of an op being recorded: the views it reads (in) and writes
 * (out), in the order its run() finds them in ot_op_exec. Either listed at
 * once, {.in = {x, w}, .n_in = 2, .out = {y}, .n_out = 1}, or added one by
 * one: optional tensors (NULL) are skipped, and each added tensor's position
 * in in[] / out[] is returned so run() can find it (-1 when absent). An
 * accumulated tensor (+=) is read and written. */
typedef struct ot_ops_args {
  ot_tensor *in[8], *out[8];
  int n_in, n_out;
  /* optional: the op's step-kernel encoder (sched/batch.h, kernels/step_gpu.h), for ops a
   * decode step runs many of: the executor then runs a stretch of them in one launch */
  ot_op_emit_fn emit;
} ot_ops_args;

int ot_ops_in(ot_ops_args *a, ot_tensor *t);  /* read */
int ot_ops_out(ot_ops_args *a, ot_tensor *t); /* overwritten */
int ot_ops_acc(ot_ops_args *a, ot_tensor *t); /* accumulated: read and written; returns its out[] index */

/* Appends an op named "<kind>(<tensor name>)" with the operands a (the one
 * way every op is recorded: through ot_program_add_op, with the bytes it
 * touches as its cost hint). */
ot_status ot_ops_record(ot_program *p, const char *kind, const ot_tensor *named, ot_op_fn run, const ot_ops_args *a,
                        const void *params, size_t params_bytes, double flops);

/* Run-time scalar `slot` of a running op into *v; a slot the program does not
 * have fails (OT_ERR_STATE), naming the op and, if not NULL, what the scalar is. */
ot_status ot_ops_scalar(const ot_op_exec *e, int slot, const char *what, int64_t *v);

/* Declares (ot_op_wrote) that the running op changed only rows [row, row +
 * n) of output k, whose view c (a KV cache) has them contiguous: n rows
 * along dim 0 of a [rows, ...] view, or along dim 1 of slot `slot` of a
 * [slots, rows, ...] view. Nothing declared (the output then counts as
 * written whole) where the layout is not contiguous. */
ot_status ot_ops_wrote_rows(const ot_op_exec *e, int k, ot_kview c, int64_t slot, int64_t row, int64_t n);

/* Shape checks with messages naming the op and tensors. */
ot_status ot_ops_same_shape(const char *op, const ot_tensor *a, const ot_tensor *b);
ot_status ot_ops_check_f32(const char *op, const ot_tensor *t);

#endif
