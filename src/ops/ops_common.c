/* ops_common.c — what every recorded op shares. */
#include <stdio.h>
#include <string.h>

#include "kernels/step_gpu.h"
#include "ops/ops_impl.h"

ot_kview ot_ops_view(const ot_tensor *t, void *p) {
  ot_kview v;
  memset(&v, 0, sizeof v);
  v.p = p;
  v.dt = t->dt;
  v.ndim = t->ndim;
  for (int i = 0; i < OT_MAX_DIMS; i++) {
    v.ne[i] = i < t->ndim ? t->ne[i] : 1;
    v.nb[i] = i < t->ndim ? t->nb[i] : 0;
  }
  return v;
}

static int push(ot_tensor **list, int *n, ot_tensor *t) {
  if (!t) return -1;
  list[*n] = t;
  return (*n)++;
}

int ot_ops_in(ot_ops_args *a, ot_tensor *t) { return push(a->in, &a->n_in, t); }
int ot_ops_out(ot_ops_args *a, ot_tensor *t) { return push(a->out, &a->n_out, t); }

int ot_ops_acc(ot_ops_args *a, ot_tensor *t) {
  push(a->in, &a->n_in, t);
  return push(a->out, &a->n_out, t);
}

ot_status ot_ops_record(ot_program *p, const char *kind, const ot_tensor *named, ot_op_fn run, const ot_ops_args *a,
                        const void *params, size_t params_bytes, double flops) {
  char name[200];
  snprintf(name, sizeof name, "%s(%s)", kind, named ? ot_tensor_name(named) : "");
  ot_op_desc d = {.name = name, .run = run, .n_in = a->n_in, .in = a->in, .n_out = a->n_out, .out = a->out,
                  .params = params, .params_bytes = params_bytes, .flops = flops};
  double bytes = 0;
  for (int i = 0; i < a->n_in; i++) bytes += (double)ot_tensor_nbytes(a->in[i]);
  for (int i = 0; i < a->n_out; i++) bytes += (double)ot_tensor_nbytes(a->out[i]);
  d.bytes = bytes;
  OT_TRY(ot_program_add_op(p, &d));
  if (!a->emit) return OT_OK;
  return ot_program_set_batch(p, ot_program_num_ops(p) - 1, a->emit, ot_kstep_run, sizeof(ot_kinsn));
}

ot_status ot_ops_scalar(const ot_op_exec *e, int slot, const char *what, int64_t *v) {
  if (slot < 0 || slot >= e->n_scalars)
    return ot_fail(OT_ERR_STATE, "%s: run-time scalar %d%s%s%s does not exist", e->name, slot, what ? " (the " : "",
                   what ? what : "", what ? ")" : "");
  *v = e->scalars[slot];
  return OT_OK;
}

static void shape_str(char *b, size_t n, const ot_tensor *t) {
  size_t k = (size_t)snprintf(b, n, "[");
  for (int i = 0; i < t->ndim && k < n; i++) k += (size_t)snprintf(b + k, n - k, "%s%lld", i ? ", " : "", (long long)t->ne[i]);
  if (k < n) snprintf(b + k, n - k, "]");
}

ot_status ot_ops_same_shape(const char *op, const ot_tensor *a, const ot_tensor *b) {
  int same = a->ndim == b->ndim;
  for (int i = 0; same && i < a->ndim; i++) same = a->ne[i] == b->ne[i];
  if (same) return OT_OK;
  char sa[96], sb[96];
  shape_str(sa, sizeof sa, a);
  shape_str(sb, sizeof sb, b);
  return ot_fail(OT_ERR_SHAPE, "%s: '%s' %s and '%s' %s must have the same shape", op, a->name, sa, b->name, sb);
}

ot_status ot_ops_check_f32(const char *op, const ot_tensor *t) {
  if (t->dt == OT_F32) return OT_OK;
  return ot_fail(OT_ERR_DTYPE, "%s: '%s' is %s; activations must be f32", op, t->name, ot_dtype_name(t->dt));
}

ot_status ot_ops_wrote_rows(const ot_op_exec *e, int k, ot_kview c, int64_t slot, int64_t row, int64_t n) {
  const int d = c.ndim == 4 ? 1 : 0; /* the rows' dim: [rows, KV, hd] or [slots, rows, KV, hd] */
  int64_t inner = 1;
  for (int i = c.ndim - 1; i > d; i--) {
    if (c.nb[i] != inner) return OT_OK;
    inner *= c.ne[i];
  }
  if (c.nb[d] != inner || n <= 0) return OT_OK;
  const int64_t first = (d ? slot * c.nb[0] : 0) + row * c.nb[d];
  return ot_op_wrote(e, k, ot_dtype_bytes(c.dt, first), ot_dtype_bytes(c.dt, n * inner));
}
