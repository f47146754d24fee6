/* ops_attention.c — RoPE and causal attention with a KV cache. */
#include "kernels/step_gpu.h"
#include "ops/ops_impl.h"

typedef struct pos_params {
  int pos_slot;
  ot_rope rope;
  int64_t window; /* rope_attention: the sliding window (0: none) */
} pos_params;

/* A RoPE the kernels can use (omptensor/rope.h), named in the message. */
static ot_status check_rope(ot_rope r, const char *op) {
  const char *why = ot_rope_problem(r);
  if (!why) return OT_OK;
  return ot_fail(OT_ERR_INVALID_ARG,
                 "%s: RoPE %s (theta %g, factor %g, low/high_freq_factor %g/%g, original positions %g, ramp %g..%g, "
                 "attention factor %g): %s",
                 op, ot_rope_type_name(r.type), (double)r.theta, (double)r.factor, (double)r.low_freq_factor,
                 (double)r.high_freq_factor, (double)r.original_max_positions, (double)r.ramp_lo, (double)r.ramp_hi,
                 (double)r.attention_factor, why);
}

static ot_status pos_of(const ot_op_exec *e, int slot, int64_t *pos) {
  OT_TRY(ot_ops_scalar(e, slot, NULL, pos));
  if (*pos < 0) return ot_fail(OT_ERR_INVALID_ARG, "%s: position %lld is negative", e->name, (long long)*pos);
  return OT_OK;
}

/* The position of an attention op: rows [pos, pos + T) of the query must lie
 * inside the KV cache (in[3]). */
static ot_status cache_pos(const ot_op_exec *e, int64_t *pos) {
  OT_TRY(pos_of(e, ((const pos_params *)e->params)->pos_slot, pos));
  int64_t T = ot_tensor_dim(e->in_t[0], 0), max_seq = ot_tensor_dim(e->in_t[3], 0);
  if (*pos + T > max_seq)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: positions %lld..%lld are beyond the KV cache (%lld positions)", e->name,
                   (long long)*pos, (long long)(*pos + T - 1), (long long)max_seq);
  return OT_OK;
}

static ot_status run_rope(const ot_op_exec *e) {
  const pos_params *p = e->params;
  int64_t pos;
  OT_TRY(pos_of(e, p->pos_slot, &pos));
  return ot_k_rope(e->device, ot_ops_view(e->out_t[0], e->out[0]), pos, p->rope);
}

ot_status ot_op_rope(ot_program *p, ot_tensor *x, int pos_slot, ot_rope rope) {
  if (!p || !x) return ot_fail(OT_ERR_INVALID_ARG, "rope: NULL argument");
  if (ot_tensor_ndim(x) != 3 || ot_tensor_dim(x, 2) % 2)
    return ot_fail(OT_ERR_SHAPE, "rope: '%s' must be [seq, heads, head_dim] with an even head_dim", ot_tensor_name(x));
  OT_TRY(check_rope(rope, "rope"));
  pos_params prm = {pos_slot, rope, 0};
  ot_ops_args a = {.in = {x}, .n_in = 1, .out = {x}, .n_out = 1};
  return ot_ops_record(p, "rope", x, run_rope, &a, &prm, sizeof prm, 4.0 * (double)ot_tensor_numel(x));
}

/* in: q, k, v, k_cache, v_cache; out: out, k_cache, v_cache */
static ot_status run_attention(const ot_op_exec *e) {
  int64_t pos;
  OT_TRY(cache_pos(e, &pos));
  ot_kview kc = ot_ops_view(e->out_t[1], e->out[1]), vc = ot_ops_view(e->out_t[2], e->out[2]);
  OT_TRY(ot_k_kv_append(e->device, kc, ot_ops_view(e->in_t[1], e->in[1]), pos));
  OT_TRY(ot_k_kv_append(e->device, vc, ot_ops_view(e->in_t[2], e->in[2]), pos));
  /* the caches changed at rows [pos, pos + T) only: what a write-back copies */
  const int64_t T = ot_tensor_dim(e->in_t[0], 0);
  OT_TRY(ot_ops_wrote_rows(e, 1, kc, 0, pos, T));
  OT_TRY(ot_ops_wrote_rows(e, 2, vc, 0, pos, T));
  return ot_k_attention(e->device, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->in_t[0], e->in[0]), kc, vc, pos);
}

ot_status ot_op_attention(ot_program *p, ot_tensor *out, ot_tensor *q, ot_tensor *k, ot_tensor *v,
                          ot_tensor *k_cache, ot_tensor *v_cache, int pos_slot) {
  if (!p || !out || !q || !k || !v || !k_cache || !v_cache) return ot_fail(OT_ERR_INVALID_ARG, "attention: NULL argument");
  OT_TRY(ot_ops_same_shape("attention", out, q));
  OT_TRY(ot_ops_same_shape("attention", k, v));
  OT_TRY(ot_ops_same_shape("attention", k_cache, v_cache));
  int ok = ot_tensor_ndim(q) == 3 && ot_tensor_ndim(k) == 3 && ot_tensor_ndim(k_cache) == 3 &&
           ot_tensor_dim(q, 0) == ot_tensor_dim(k, 0) && ot_tensor_dim(q, 2) == ot_tensor_dim(k, 2) &&
           ot_tensor_dim(k, 1) == ot_tensor_dim(k_cache, 1) && ot_tensor_dim(k, 2) == ot_tensor_dim(k_cache, 2) &&
           ot_tensor_dim(k, 1) > 0 && ot_tensor_dim(q, 1) % ot_tensor_dim(k, 1) == 0;
  if (!ok)
    return ot_fail(OT_ERR_SHAPE,
                   "attention: q '%s' [T, H, hd], k/v [T, KV, hd] and caches [max_seq, KV, hd] disagree, or H is "
                   "not a multiple of KV",
                   ot_tensor_name(q));
  pos_params prm = {pos_slot, ot_rope_plain(0), 0};
  ot_ops_args a = {.in = {q, k, v, k_cache, v_cache}, .n_in = 5, .out = {out, k_cache, v_cache}, .n_out = 3};
  double flops = 4.0 * (double)ot_tensor_numel(q) * (double)ot_tensor_dim(k_cache, 0);
  return ot_ops_record(p, "attention", k_cache, run_attention, &a, &prm, sizeof prm, flops);
}

/* in: q, k, v, k_cache, v_cache; out: q, k (rotated in place), out, k_cache, v_cache */
static ot_status run_rope_attention(const ot_op_exec *e) {
  const pos_params *p = e->params;
  int64_t pos;
  OT_TRY(cache_pos(e, &pos));
  ot_kview q = ot_ops_view(e->out_t[0], e->out[0]), k = ot_ops_view(e->out_t[1], e->out[1]);
  ot_kview kc = ot_ops_view(e->out_t[3], e->out[3]), vc = ot_ops_view(e->out_t[4], e->out[4]);
  OT_TRY(ot_k_rope_append(e->device, q, k, ot_ops_view(e->in_t[2], e->in[2]), kc, vc, pos, p->rope));
  OT_TRY(ot_ops_wrote_rows(e, 3, kc, 0, pos, q.ne[0])); /* rows [pos, pos + T) only */
  OT_TRY(ot_ops_wrote_rows(e, 4, vc, 0, pos, q.ne[0]));
  return ot_k_attention_window(e->device, ot_ops_view(e->out_t[2], e->out[2]), q, kc, vc, pos, p->window);
}

/* The step kernel's encoder: run_rope_attention's views and bookkeeping,
 * for one row (kernels/step_gpu.h). A position the cache cannot hold is
 * left to run, which says so. */
static int emit_rope_attention(const ot_op_exec *e, void *insns) {
  const pos_params *p = e->params;
  int64_t pos;
  if (cache_pos(e, &pos) != OT_OK) return 0;
  ot_kview q = ot_ops_view(e->out_t[0], e->out[0]), k = ot_ops_view(e->out_t[1], e->out[1]);
  ot_kview kc = ot_ops_view(e->out_t[3], e->out[3]), vc = ot_ops_view(e->out_t[4], e->out[4]);
  const int n = ot_kstep_rope_attention(insns, e->device, ot_ops_view(e->out_t[2], e->out[2]), q, k,
                                        ot_ops_view(e->in_t[2], e->in[2]), kc, vc, pos, p->rope, p->window);
  if (n && (ot_ops_wrote_rows(e, 3, kc, 0, pos, q.ne[0]) != OT_OK || ot_ops_wrote_rows(e, 4, vc, 0, pos, q.ne[0]) != OT_OK))
    return 0; /* (cannot fail for these views; run would say why) */
  return n;
}

ot_status ot_op_rope_attention(ot_program *p, ot_tensor *out, ot_tensor *q, ot_tensor *k, ot_tensor *v,
                               ot_tensor *k_cache, ot_tensor *v_cache, int pos_slot, ot_rope rope) {
  return ot_op_rope_attention_window(p, out, q, k, v, k_cache, v_cache, pos_slot, rope, 0);
}

ot_status ot_op_rope_attention_window(ot_program *p, ot_tensor *out, ot_tensor *q, ot_tensor *k, ot_tensor *v,
                                      ot_tensor *k_cache, ot_tensor *v_cache, int pos_slot, ot_rope rope,
                                      int64_t window) {
  if (window < 0) return ot_fail(OT_ERR_INVALID_ARG, "rope_attention: sliding window %lld is negative", (long long)window);
  if (!p || !out || !q || !k || !v || !k_cache || !v_cache) return ot_fail(OT_ERR_INVALID_ARG, "rope_attention: NULL argument");
  OT_TRY(ot_ops_same_shape("rope_attention", out, q));
  OT_TRY(ot_ops_same_shape("rope_attention", k, v));
  OT_TRY(ot_ops_same_shape("rope_attention", k_cache, v_cache));
  if (ot_tensor_ndim(q) != 3 || ot_tensor_dim(q, 2) % 2)
    return ot_fail(OT_ERR_SHAPE, "rope_attention: q '%s' must be [T, H, head_dim] with an even head_dim", ot_tensor_name(q));
  OT_TRY(check_rope(rope, "rope_attention"));
  pos_params prm = {pos_slot, rope, window};
  ot_ops_args a = {.in = {q, k, v, k_cache, v_cache}, .n_in = 5, .out = {q, k, out, k_cache, v_cache}, .n_out = 5,
                   .emit = emit_rope_attention};
  double flops = 4.0 * (double)ot_tensor_numel(q) * (double)ot_tensor_dim(k_cache, 0);
  /* named for what it computes, in plans and traces */
  return ot_ops_record(p, window ? "rope_attention_window" : "rope_attention", k_cache, run_rope_attention, &a, &prm,
                       sizeof prm, flops);
}
