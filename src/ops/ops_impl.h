/* ops_impl.h (internal) — recording an op whose run() calls a kernel. */
#ifndef OT_OPS_IMPL_H
#define OT_OPS_IMPL_H

#include "core/error.h"
#include "memory/tensor_impl.h"
#include "kernels/kernels.h"
#include "omptensor/ops.h"

/* The kernel view of tensor t whose element 0 is at address p. */
ot_kview ot_ops_view(const ot_tensor *t, void *p);

/* Appends an op named "<kind>(<tensor name>)" that reads in[0..n_in) and
 * writes out[0..n_out). */
ot_status ot_ops_record(ot_program *p, const char *kind, const ot_tensor *named, ot_op_fn run, ot_tensor *const *in,
                        int n_in, ot_tensor *const *out, int n_out, const void *params, size_t params_bytes,
                        double flops);

/* Shape checks with messages naming the op and tensors. */
ot_status ot_ops_same_shape(const char *op, const ot_tensor *a, const ot_tensor *b);
ot_status ot_ops_check_f32(const char *op, const ot_tensor *t);

#endif
