/* ops_embed.c — embedding lookups, learned positions, argmax. */
#include "ops/ops_impl.h"

static ot_status run_embedding(const ot_op_exec *e) {
  return ot_k_embedding(e->device, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->in_t[0], e->in[0]),
                        ot_ops_view(e->in_t[1], e->in[1]));
}

ot_status ot_op_embedding(ot_program *p, ot_tensor *out, ot_tensor *table, ot_tensor *ids) {
  if (!p || !out || !table || !ids) return ot_fail(OT_ERR_INVALID_ARG, "embedding: NULL argument");
  if (ot_tensor_dtype(ids) != OT_I32 || ot_tensor_ndim(ids) != 1 || ot_tensor_ndim(table) != 2 ||
      ot_tensor_ndim(out) != 2 || ot_tensor_dim(out, 0) != ot_tensor_dim(ids, 0) ||
      ot_tensor_dim(out, 1) != ot_tensor_dim(table, 1))
    return ot_fail(OT_ERR_SHAPE, "embedding: ids '%s' must be i32 [T], table '%s' [vocab, d], out '%s' [T, d]",
                   ot_tensor_name(ids), ot_tensor_name(table), ot_tensor_name(out));
  ot_ops_args a = {.in = {table, ids}, .n_in = 2, .out = {out}, .n_out = 1};
  return ot_ops_record(p, "embedding", table, run_embedding, &a, NULL, 0, 0);
}

typedef struct posadd_params {
  int pos_slot;
} posadd_params;

/* in: out, table; out: out. The rows of the table are chosen at run time. */
static ot_status run_add_positions(const ot_op_exec *e) {
  const posadd_params *p = e->params;
  int64_t pos, T = ot_tensor_dim(e->out_t[0], 0);
  OT_TRY(ot_ops_scalar(e, p->pos_slot, NULL, &pos));
  const ot_tensor *tab = e->in_t[1];
  if (pos < 0 || pos + T > ot_tensor_dim(tab, 0))
    return ot_fail(OT_ERR_INVALID_ARG, "%s: positions %lld..%lld outside the %lld learned positions", e->name,
                   (long long)pos, (long long)(pos + T - 1), (long long)ot_tensor_dim(tab, 0));
  ot_kview rows = ot_ops_view(tab, (char *)e->in[1] + ot_dtype_bytes(tab->dt, pos * tab->nb[0]));
  rows.ne[0] = T;
  ot_kview y = ot_ops_view(e->out_t[0], e->out[0]);
  return ot_k_add(e->device, y, y, rows);
}

ot_status ot_op_add_positions(ot_program *p, ot_tensor *out, ot_tensor *table, int pos_slot) {
  if (!p || !out || !table) return ot_fail(OT_ERR_INVALID_ARG, "add_positions: NULL argument");
  if (ot_tensor_ndim(table) != 2 || ot_tensor_ndim(out) != 2 || ot_tensor_dim(out, 1) != ot_tensor_dim(table, 1) ||
      ot_dtype_block(ot_tensor_dtype(table)))
    return ot_fail(OT_ERR_SHAPE, "add_positions: table '%s' must be [positions, d] (not block-quantized) and out '%s' [T, d]",
                   ot_tensor_name(table), ot_tensor_name(out));
  posadd_params prm = {pos_slot};
  ot_ops_args a = {.in = {out, table}, .n_in = 2, .out = {out}, .n_out = 1};
  return ot_ops_record(p, "add_positions", table, run_add_positions, &a, &prm, sizeof prm,
                       (double)ot_tensor_numel(out));
}

static ot_status run_argmax(const ot_op_exec *e) {
  return ot_k_argmax(e->device, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->in_t[0], e->in[0]));
}

ot_status ot_op_argmax(ot_program *p, ot_tensor *out, ot_tensor *x) {
  if (!p || !out || !x) return ot_fail(OT_ERR_INVALID_ARG, "argmax: NULL argument");
  if (ot_tensor_dtype(out) != OT_I32 || ot_tensor_numel(out) * ot_tensor_dim(x, ot_tensor_ndim(x) - 1) != ot_tensor_numel(x))
    return ot_fail(OT_ERR_SHAPE, "argmax: out '%s' must be i32 with one element per row of '%s'", ot_tensor_name(out),
                   ot_tensor_name(x));
  ot_ops_args a = {.in = {x}, .n_in = 1, .out = {out}, .n_out = 1};
  return ot_ops_record(p, "argmax", x, run_argmax, &a, NULL, 0, 0);
}
