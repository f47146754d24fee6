/* ops_attention_rows.c — attention for a step of several sequences
 * (batched generation, issue 19): every row brings its own KV cache slot
 * and position in an i32 [T, 2] tensor that the program takes as an input,
 * so the step is planned once and replayed with new rows each time. */
#include "kernels/step_gpu.h"
#include "ops/ops_impl.h"

typedef struct rows_params {
  ot_rope rope;
  int64_t window; /* the sliding window (0: none) */
} rows_params;

/* Declares the cache rows this step appends (ot_op_wrote): one [KV, hd] row
 * per live row of `rows`, so that writing the caches home copies those
 * instead of every slot's every position (a decode step of 32 sequences:
 * 32 rows of a cache of max_seq * 32). Only where the host knows the rows
 * (an input's home, ot_op_input_home) and a cache row is contiguous; else
 * the caches count as written whole (ot_ops_wrote_rows). Padding rows
 * write nothing. */
static ot_status declare_rows(const ot_op_exec *e, ot_kview kc, ot_kview vc) {
  const void *home = ot_op_input_home(e, 5);
  if (!home) return OT_OK;
  const ot_kview rows = ot_ops_view(e->in_t[5], (void *)home);
  const int32_t *r = rows.p;
  for (int64_t t = 0; t < rows.ne[0]; t++) {
    const int64_t slot = r[t * rows.nb[0]], pos = r[t * rows.nb[0] + rows.nb[1]];
    if (slot < 0 || slot >= kc.ne[0] || pos < 0 || pos >= kc.ne[1]) continue;
    OT_TRY(ot_ops_wrote_rows(e, 3, kc, slot, pos, 1));
    OT_TRY(ot_ops_wrote_rows(e, 4, vc, slot, pos, 1));
  }
  return OT_OK;
}

/* in: q, k, v, k_cache, v_cache, rows; out: q, k (rotated in place), out, k_cache, v_cache */
static ot_status run_rope_attention_rows(const ot_op_exec *e) {
  const rows_params *p = e->params;
  ot_kview q = ot_ops_view(e->out_t[0], e->out[0]), k = ot_ops_view(e->out_t[1], e->out[1]);
  ot_kview kc = ot_ops_view(e->out_t[3], e->out[3]), vc = ot_ops_view(e->out_t[4], e->out[4]);
  ot_kview rows = ot_ops_view(e->in_t[5], e->in[5]);
  OT_TRY(ot_k_rope_append_rows(e->device, q, k, ot_ops_view(e->in_t[2], e->in[2]), kc, vc, rows, p->rope));
  OT_TRY(declare_rows(e, kc, vc));
  return ot_k_attention_rows(e->device, ot_ops_view(e->out_t[2], e->out[2]), q, kc, vc, rows, p->window);
}

/* The step kernel's encoder (kernels/step_gpu.h): run's views and its
 * declared cache rows. */
static int emit_rope_attention_rows(const ot_op_exec *e, void *insns) {
  const rows_params *p = e->params;
  ot_kview q = ot_ops_view(e->out_t[0], e->out[0]), k = ot_ops_view(e->out_t[1], e->out[1]);
  ot_kview kc = ot_ops_view(e->out_t[3], e->out[3]), vc = ot_ops_view(e->out_t[4], e->out[4]);
  const int n = ot_kstep_rope_attention_rows(insns, e->device, ot_ops_view(e->out_t[2], e->out[2]), q, k,
                                             ot_ops_view(e->in_t[2], e->in[2]), kc, vc,
                                             ot_ops_view(e->in_t[5], e->in[5]), p->rope, p->window);
  return n && declare_rows(e, kc, vc) == OT_OK ? n : 0;
}

ot_status ot_op_rope_attention_rows(ot_program *p, ot_tensor *out, ot_tensor *q, ot_tensor *k, ot_tensor *v,
                                    ot_tensor *k_cache, ot_tensor *v_cache, ot_tensor *rows, ot_rope rope,
                                    int64_t window) {
  static const char *op = "rope_attention_rows";
  if (!p || !out || !q || !k || !v || !k_cache || !v_cache || !rows)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: NULL argument", op);
  if (window < 0) return ot_fail(OT_ERR_INVALID_ARG, "%s: sliding window %lld is negative", op, (long long)window);
  OT_TRY(ot_ops_same_shape(op, out, q));
  OT_TRY(ot_ops_same_shape(op, k, v));
  OT_TRY(ot_ops_same_shape(op, k_cache, v_cache));
  const int64_t T = ot_tensor_dim(q, 0);
  int ok = ot_tensor_ndim(q) == 3 && ot_tensor_ndim(k) == 3 && ot_tensor_ndim(k_cache) == 4 &&
           ot_tensor_dim(q, 2) % 2 == 0 && ot_tensor_dim(k, 0) == T && ot_tensor_dim(q, 2) == ot_tensor_dim(k, 2) &&
           ot_tensor_dim(k, 1) == ot_tensor_dim(k_cache, 2) && ot_tensor_dim(k, 2) == ot_tensor_dim(k_cache, 3) &&
           ot_tensor_dim(k, 1) > 0 && ot_tensor_dim(q, 1) % ot_tensor_dim(k, 1) == 0;
  if (!ok)
    return ot_fail(OT_ERR_SHAPE,
                   "%s: q '%s' [T, H, hd] (hd even), k/v [T, KV, hd] and caches [slots, max_seq, KV, hd] disagree, "
                   "or H is not a multiple of KV",
                   op, ot_tensor_name(q));
  if (ot_tensor_dtype(rows) != OT_I32 || ot_tensor_ndim(rows) != 2 || ot_tensor_dim(rows, 0) != T ||
      ot_tensor_dim(rows, 1) != 2)
    return ot_fail(OT_ERR_SHAPE, "%s: rows '%s' must be i32 [%lld, 2]: each row's KV cache slot and position", op,
                   ot_tensor_name(rows), (long long)T);
  if (rope.type == OT_ROPE_DYNAMIC)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: dynamic RoPE changes its frequencies with each sequence's length; a "
                   "batch of sequences is not implemented for it (generate one sequence at a time)", op);
  const char *why = ot_rope_problem(rope);
  if (why) return ot_fail(OT_ERR_INVALID_ARG, "%s: RoPE %s: %s", op, ot_rope_type_name(rope.type), why);
  rows_params prm = {rope, window};
  ot_ops_args a = {.in = {q, k, v, k_cache, v_cache, rows},
                   .n_in = 6,
                   .out = {q, k, out, k_cache, v_cache},
                   .n_out = 5,
                   .emit = emit_rope_attention_rows};
  /* each row reads at most its own slot's positions */
  double flops = 4.0 * (double)ot_tensor_numel(q) * (double)ot_tensor_dim(k_cache, 1);
  return ot_ops_record(p, window ? "rope_attention_rows_window" : "rope_attention_rows", k_cache,
                       run_rope_attention_rows, &a, &prm, sizeof prm, flops);
}
