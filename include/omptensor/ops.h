/* ops.h — recording tensor operations into a program.
 *
 * These are the building blocks of a model: each call checks shapes and
 * dtypes now (so a wrong model fails at recording, naming the op and its
 * tensors) and appends one op to the program; nothing runs until the program
 * is planned and run (sched.h). Tensors are referenced, not owned.
 *
 * Shapes, outermost first. Activations are f32; weights may be f32, f16,
 * bf16 or q8b where a matmul reads them. "rows" means every dim but the
 * last: an op over rows treats a [..., n] tensor as a [rows, n] matrix.
 *
 *     ot_op_rmsnorm(p, x_norm, h, w_ln, 1e-5f);     // [T, D]
 *     ot_op_matmul(p, q, x_norm, w_q, 1, 0);        // [T, D] @ [D_out, D]^T -> [T, D_out]
 *
 * Run-time scalars (program.h) carry what changes between replays: the
 * position of the first row of a decode step is read when the op runs.
 */
#ifndef OMPTENSOR_OPS_H
#define OMPTENSOR_OPS_H

#include "omptensor/program.h"
#include "omptensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out [M, N] (=|+=) a [M, K] @ op(w), op(w) = w [K, N] or, with trans_w,
 * w [N, K] transposed (Hugging Face Linear: y = x @ W^T). Batched when a and
 * out have a leading batch dim. accumulate: out += (a residual connection). */
ot_status ot_op_matmul(ot_program *p, ot_tensor *out, ot_tensor *a, ot_tensor *w, int trans_w, int accumulate);

/* Fused forms that cost one launch where a decode step would pay several
 * (see src/kernels/fused.c): out[i] = a @ w[i]^T for 1..3 weights (the q, k, v
 * projections), and out = silu(a @ wg^T) * (a @ wu^T) (the Llama MLP's gate
 * and up; `up` [M, N] is scratch). */
ot_status ot_op_matmul_multi(ot_program *p, int n, ot_tensor *const *out, ot_tensor *a, ot_tensor *const *w);
ot_status ot_op_matmul_swiglu(ot_program *p, ot_tensor *out, ot_tensor *up, ot_tensor *a, ot_tensor *wg, ot_tensor *wu);

/* out = a + b, out = a * b (same shapes, or b broadcast over rows: b [n]).
 * out may be a (in place). */
ot_status ot_op_add(ot_program *p, ot_tensor *out, ot_tensor *a, ot_tensor *b);
ot_status ot_op_mul(ot_program *p, ot_tensor *out, ot_tensor *a, ot_tensor *b);
/* out = a * s */
ot_status ot_op_scale(ot_program *p, ot_tensor *out, ot_tensor *a, float s);

/* Activations: out = gelu_tanh(x) (GPT-2's gelu_new), silu(x), and
 * SwiGLU out = silu(gate) * up. */
ot_status ot_op_gelu(ot_program *p, ot_tensor *out, ot_tensor *x);
ot_status ot_op_silu(ot_program *p, ot_tensor *out, ot_tensor *x);
ot_status ot_op_swiglu(ot_program *p, ot_tensor *out, ot_tensor *gate, ot_tensor *up);

/* Row normalisation of x [rows, n] with weight w [n] (and bias b [n]). */
ot_status ot_op_rmsnorm(ot_program *p, ot_tensor *out, ot_tensor *x, ot_tensor *w, float eps);
ot_status ot_op_layernorm(ot_program *p, ot_tensor *out, ot_tensor *x, ot_tensor *w, ot_tensor *b, float eps);

/* In-place rotary embedding as Hugging Face Llama applies it (rotate-half):
 * x [T, heads, head_dim], row t at position scalars[pos_slot] + t. */
ot_status ot_op_rope(ot_program *p, ot_tensor *x, int pos_slot, float theta);

/* Causal attention with a KV cache.
 * Appends k, v [T, n_kv_heads, head_dim] at positions [pos, pos+T) of
 * k_cache, v_cache [max_seq, n_kv_heads, head_dim], then
 * out [T, n_heads, head_dim] = softmax(q k^T / sqrt(head_dim), causal) v over
 * positions [0, pos+t] for row t, with grouped-query sharing
 * (head h reads kv head h / (n_heads / n_kv_heads)). pos = scalars[pos_slot]. */
ot_status ot_op_attention(ot_program *p, ot_tensor *out, ot_tensor *q, ot_tensor *k, ot_tensor *v,
                          ot_tensor *k_cache, ot_tensor *v_cache, int pos_slot);

/* RoPE on q and k (in place, theta) fused with the cache append, then
 * attention as ot_op_attention: the Llama attention block in two launches. */
ot_status ot_op_rope_attention(ot_program *p, ot_tensor *out, ot_tensor *q, ot_tensor *k, ot_tensor *v,
                               ot_tensor *k_cache, ot_tensor *v_cache, int pos_slot, float theta);

/* out [T, n] = table[ids[t]] (table [vocab, n], ids i32 [T]). */
ot_status ot_op_embedding(ot_program *p, ot_tensor *out, ot_tensor *table, ot_tensor *ids);

/* out [T, n] += table[scalars[pos_slot] + t] (learned positions, GPT-2). */
ot_status ot_op_add_positions(ot_program *p, ot_tensor *out, ot_tensor *table, int pos_slot);

/* out i32 [rows] = argmax over the last dim of x [rows, n] (first on ties). */
ot_status ot_op_argmax(ot_program *p, ot_tensor *out, ot_tensor *x);

#ifdef __cplusplus
}
#endif
#endif
