/* ops_train_seq.c — the sequence ops of training: causal attention without
 * a KV cache (forward and backward), embedding and learned-position
 * backward. */
#include "ops/ops_train_impl.h"

#define NULL_ARG(op) ot_fail(OT_ERR_INVALID_ARG, "%s: NULL argument", op)

/* q/out/dq [T, H, hd] or [B, T, H, hd], k/v/dk/dv [T, KV, hd] or [B, T, KV, hd]
 * (the same rank), H a multiple of KV. */
static ot_status check_qkv(const char *op, const ot_tensor *q, const ot_tensor *k, const ot_tensor *v) {
  OT_TRY(ot_ops_same_shape(op, k, v));
  const int nd = ot_tensor_ndim(q);
  int ok = (nd == 3 || nd == 4) && ot_tensor_ndim(k) == nd && ot_tensor_dim(k, nd - 2) > 0 &&
           ot_tensor_dim(q, nd - 2) % ot_tensor_dim(k, nd - 2) == 0 && ot_tensor_dim(q, nd - 1) == ot_tensor_dim(k, nd - 1);
  for (int d = 0; ok && d < nd - 2; d++) ok = ot_tensor_dim(q, d) == ot_tensor_dim(k, d);
  if (ok) return OT_OK;
  return ot_fail(OT_ERR_SHAPE,
                 "%s: q '%s' [(B,) T, H, hd] and k/v '%s' [(B,) T, KV, hd] disagree, or H is not a multiple of KV", op,
                 ot_tensor_name(q), ot_tensor_name(k));
}

/* ws [(B,) T, H, 2] f32 for q [(B,) T, H, hd] */
static ot_status check_ws(const char *op, const ot_tensor *ws, const ot_tensor *q) {
  OT_TRY(ot_ops_check_f32(op, ws));
  const int nd = ot_tensor_ndim(q);
  int ok = ot_tensor_ndim(ws) == nd && ot_tensor_dim(ws, nd - 1) == 2;
  for (int d = 0; ok && d < nd - 1; d++) ok = ot_tensor_dim(ws, d) == ot_tensor_dim(q, d);
  if (ok) return OT_OK;
  return ot_fail(OT_ERR_SHAPE, "%s: workspace '%s' must be [(B,) T, H, 2] for q '%s'", op, ot_tensor_name(ws),
                 ot_tensor_name(q));
}

static double attn_flops(const ot_tensor *q) {
  /* scores and the weighted sum, half of them masked */
  return 2.0 * (double)ot_tensor_numel(q) * (double)ot_tensor_dim(q, ot_tensor_ndim(q) - 3);
}

static ot_status run_attn(const ot_op_exec *e) {
  /* in: q, k, v; out: out (and ws) */
  const ot_kview ws = e->n_out > 1 ? ot_ops_view(e->out_t[1], e->out[1]) : ot_kview_none();
  return ot_k_causal_attention(e->device, ot_ops_view(e->out_t[0], e->out[0]), ws, ot_ops_view(e->in_t[0], e->in[0]),
                               ot_ops_view(e->in_t[1], e->in[1]), ot_ops_view(e->in_t[2], e->in[2]));
}

static ot_status record_attn(ot_program *p, const char *op, ot_tensor *out, ot_tensor *ws, ot_tensor *q, ot_tensor *k,
                             ot_tensor *v) {
  OT_TRY(ot_ops_same_shape(op, out, q));
  OT_TRY(check_qkv(op, q, k, v));
  if (ws) OT_TRY(check_ws(op, ws, q));
  ot_ops_args g = {0};
  ot_ops_in(&g, q);
  ot_ops_in(&g, k);
  ot_ops_in(&g, v);
  ot_ops_out(&g, out);
  if (ws) ot_ops_out(&g, ws);
  return ot_ops_record(p, op, out, run_attn, &g, NULL, 0, attn_flops(q));
}

ot_status ot_op_causal_attention(ot_program *p, ot_tensor *out, ot_tensor *q, ot_tensor *k, ot_tensor *v) {
  static const char *op = "causal_attention";
  if (!p || !out || !q || !k || !v) return NULL_ARG(op);
  return record_attn(p, op, out, NULL, q, k, v);
}

ot_status ot_op_causal_attention_train(ot_program *p, ot_tensor *out, ot_tensor *ws, ot_tensor *q, ot_tensor *k,
                                       ot_tensor *v) {
  static const char *op = "causal_attention_train";
  if (!p || !out || !ws || !q || !k || !v) return NULL_ARG(op);
  return record_attn(p, op, out, ws, q, k, v);
}

static ot_status run_attnb(const ot_op_exec *e) {
  /* in: dout, out, q, k, v, ws; out: dq, dk, dv, ws */
  return ot_k_causal_attention_backward(
      e->device, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->out_t[1], e->out[1]),
      ot_ops_view(e->out_t[2], e->out[2]), ot_ops_view(e->out_t[3], e->out[3]), ot_ops_view(e->in_t[0], e->in[0]),
      ot_ops_view(e->in_t[1], e->in[1]), ot_ops_view(e->in_t[2], e->in[2]), ot_ops_view(e->in_t[3], e->in[3]),
      ot_ops_view(e->in_t[4], e->in[4]));
}

ot_status ot_op_causal_attention_backward(ot_program *p, ot_tensor *dq, ot_tensor *dk, ot_tensor *dv, ot_tensor *ws,
                                          ot_tensor *dout, ot_tensor *out, ot_tensor *q, ot_tensor *k, ot_tensor *v) {
  static const char *op = "causal_attention_backward";
  if (!p || !dq || !dk || !dv || !ws || !dout || !out || !q || !k || !v) return NULL_ARG(op);
  OT_TRY(check_qkv(op, q, k, v));
  OT_TRY(ot_ops_same_shape(op, dq, q));
  OT_TRY(ot_ops_same_shape(op, dout, q));
  OT_TRY(ot_ops_same_shape(op, out, q));
  OT_TRY(ot_ops_same_shape(op, dk, k));
  OT_TRY(ot_ops_same_shape(op, dv, v));
  OT_TRY(check_ws(op, ws, q));
  ot_ops_args g = {0};
  ot_ops_in(&g, dout);
  ot_ops_in(&g, out);
  ot_ops_in(&g, q);
  ot_ops_in(&g, k);
  ot_ops_in(&g, v);
  ot_ops_in(&g, ws); /* the forward's log-sum-exp */
  ot_ops_out(&g, dq);
  ot_ops_out(&g, dk);
  ot_ops_out(&g, dv);
  ot_ops_out(&g, ws);
  return ot_ops_record(p, op, dq, run_attnb, &g, NULL, 0, 2.5 * attn_flops(q));
}

static ot_status run_embb(const ot_op_exec *e) {
  /* in: dout, ids, dtable; out: dtable */
  return ot_k_embedding_backward(e->device, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->in_t[0], e->in[0]),
                                 ot_ops_view(e->in_t[1], e->in[1]));
}

ot_status ot_op_embedding_backward(ot_program *p, ot_tensor *dtable, ot_tensor *dout, ot_tensor *ids) {
  static const char *op = "embedding_backward";
  if (!p || !dtable || !dout || !ids) return NULL_ARG(op);
  if (ot_tensor_dtype(ids) != OT_I32 || ot_tensor_ndim(ids) != 1 || ot_tensor_ndim(dtable) != 2 ||
      ot_tensor_ndim(dout) != 2)
    return ot_fail(OT_ERR_SHAPE, "%s: ids '%s' must be i32 [T], dtable '%s' [vocab, d], dout '%s' [T, d]", op,
                   ot_tensor_name(ids), ot_tensor_name(dtable), ot_tensor_name(dout));
  OT_TRY(ot_ops_check_dim(op, dout, 0, ids, 0));
  OT_TRY(ot_ops_check_dim(op, dout, 1, dtable, 1));
  ot_ops_args g = {0};
  ot_ops_in(&g, dout);
  ot_ops_in(&g, ids);
  ot_ops_acc(&g, dtable);
  return ot_ops_record(p, op, dtable, run_embb, &g, NULL, 0, (double)ot_tensor_numel(dout));
}

typedef struct posb_params {
  int pos_slot;
} posb_params;

static ot_status run_posb(const ot_op_exec *e) {
  const posb_params *q = e->params;
  int64_t pos;
  OT_TRY(ot_ops_scalar(e, q->pos_slot, NULL, &pos));
  /* in: dout, dtable; out: dtable. The kernel checks the rows fit. */
  return ot_k_positions_backward(e->device, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->in_t[0], e->in[0]),
                                 pos);
}

ot_status ot_op_positions_backward(ot_program *p, ot_tensor *dtable, ot_tensor *dout, int pos_slot) {
  static const char *op = "positions_backward";
  if (!p || !dtable || !dout) return NULL_ARG(op);
  if (ot_tensor_ndim(dtable) != 2 || ot_tensor_ndim(dout) < 2 || ot_tensor_ndim(dout) > 3)
    return ot_fail(OT_ERR_SHAPE, "%s: dtable '%s' must be [positions, d] and dout '%s' [T, d] or [B, T, d]", op,
                   ot_tensor_name(dtable), ot_tensor_name(dout));
  OT_TRY(ot_ops_check_dim(op, dout, -1, dtable, 1));
  posb_params prm = {pos_slot};
  ot_ops_args g = {0};
  ot_ops_in(&g, dout);
  ot_ops_acc(&g, dtable);
  return ot_ops_record(p, op, dtable, run_posb, &g, &prm, sizeof prm, (double)ot_tensor_numel(dout));
}
