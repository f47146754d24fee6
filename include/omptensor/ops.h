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
#include "omptensor/rope.h"
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
ot_status ot_op_rope(ot_program *p, ot_tensor *x, int pos_slot, ot_rope rope);

/* Causal attention with a KV cache.
 * Appends k, v [T, n_kv_heads, head_dim] at positions [pos, pos+T) of
 * k_cache, v_cache [max_seq, n_kv_heads, head_dim], then
 * out [T, n_heads, head_dim] = softmax(q k^T / sqrt(head_dim), causal) v over
 * positions [0, pos+t] for row t, with grouped-query sharing
 * (head h reads kv head h / (n_heads / n_kv_heads)). pos = scalars[pos_slot]. */
ot_status ot_op_attention(ot_program *p, ot_tensor *out, ot_tensor *q, ot_tensor *k, ot_tensor *v,
                          ot_tensor *k_cache, ot_tensor *v_cache, int pos_slot);

/* RoPE on q and k (in place; rope.h: ot_rope_plain(theta) or a scaled one) fused with the cache append, then
 * attention as ot_op_attention: the Llama attention block in two launches. */
ot_status ot_op_rope_attention(ot_program *p, ot_tensor *out, ot_tensor *q, ot_tensor *k, ot_tensor *v,
                               ot_tensor *k_cache, ot_tensor *v_cache, int pos_slot, ot_rope rope);
/* The same with a sliding window (Mistral): row t at position P attends to
 * the last `window` positions (P - window, P] (0: every earlier position).
 * The cache still holds every position. */
ot_status ot_op_rope_attention_window(ot_program *p, ot_tensor *out, ot_tensor *q, ot_tensor *k, ot_tensor *v,
                                      ot_tensor *k_cache, ot_tensor *v_cache, int pos_slot, ot_rope rope,
                                      int64_t window);

/* The attention block of a step whose T rows are tokens of several
 * sequences (batched generation: one token per sequence in decode, the
 * sequences' prompts packed one after another in a prompt step).
 * rows i32 [T, 2] holds row t's (KV cache slot, position): mark it an
 * input and write it before each run, like the ids, so one plan serves
 * every step. Caches k_cache, v_cache [slots, max_seq, n_kv_heads,
 * head_dim], one slot per sequence. RoPE at each row's position, k and v
 * written into the row's slot there, then causal attention over that slot
 * only: row t sees the slot's positions (pos - window, pos] (window 0: all
 * of [0, pos]), so a packed prompt's rows see their own sequence and no
 * other, without a mask. A row whose slot is -1 (outside the caches) is
 * padding: it writes no cache and its output is 0. Not for dynamic RoPE
 * (OT_ERR_UNSUPPORTED: its frequencies follow each sequence's length). */
ot_status ot_op_rope_attention_rows(ot_program *p, ot_tensor *out, ot_tensor *q, ot_tensor *k, ot_tensor *v,
                                    ot_tensor *k_cache, ot_tensor *v_cache, ot_tensor *rows, ot_rope rope,
                                    int64_t window);

/* out [T, n] = table[ids[t]] (table [vocab, n], ids i32 [T]). */
ot_status ot_op_embedding(ot_program *p, ot_tensor *out, ot_tensor *table, ot_tensor *ids);

/* out [T, n] += table[scalars[pos_slot] + t] (learned positions, GPT-2). */
ot_status ot_op_add_positions(ot_program *p, ot_tensor *out, ot_tensor *table, int pos_slot);

/* out i32 [rows] = argmax over the last dim of x [rows, n] (first on ties). */
ot_status ot_op_argmax(ot_program *p, ot_tensor *out, ot_tensor *x);


/* ---- training ------------------------------------------------------------
 * Backward ops written out per op (no autograd): the model records its
 * forward, then the backward of each op in reverse order, then the update.
 * Gradient convention (as the kernels): gradients of PARAMETERS accumulate
 * (+=: micro-batches and tied weights add up; record ot_op_zero on them
 * first), gradients of activations are overwritten. Activation gradients
 * are f32; parameter gradients f32 (f16/bf16 allowed where the kernel says). */

/* Fused mean cross-entropy (natural log, PyTorch "mean", target -100
 * ignored): logits [rows, V] f32, targets i32 [rows] ->
 * loss [1] f32 (the mean), losses [rows] f32 (per row), and, unless dlogits
 * is NULL, dlogits [rows, V] = grad_scale * (softmax - onehot) / valid rows
 * (grad_scale: 1, or 1/micro-batches to average accumulated gradients; may
 * be logits itself). */
ot_status ot_op_cross_entropy(ot_program *p, ot_tensor *loss, ot_tensor *losses, ot_tensor *dlogits,
                              ot_tensor *logits, ot_tensor *targets, float grad_scale);

/* Backward of ot_op_matmul(out, a, w, trans_w, 0):
 * da [M, K] = dout @ op(w)^T (overwritten), dw += a^T dout (dout^T a for
 * trans_w: w [N, K]), summed over a batch dim. da or dw may be NULL. */
ot_status ot_op_matmul_backward(ot_program *p, ot_tensor *da, ot_tensor *dw, ot_tensor *dout, ot_tensor *a,
                                ot_tensor *w, int trans_w);
/* db [n] += sum over the rows of dy [.., n] (a bias broadcast over rows). */
ot_status ot_op_bias_backward(ot_program *p, ot_tensor *db, ot_tensor *dy);

/* dx = dy * f'(x) for out = gelu(x) / silu(x); dx may be dy (in place). */
ot_status ot_op_gelu_backward(ot_program *p, ot_tensor *dx, ot_tensor *x, ot_tensor *dy);
ot_status ot_op_silu_backward(ot_program *p, ot_tensor *dx, ot_tensor *x, ot_tensor *dy);
/* For out = silu(gate) * up: dgate (not aliasing an input), dup (may be dy). */
ot_status ot_op_swiglu_backward(ot_program *p, ot_tensor *dgate, ot_tensor *dup, ot_tensor *gate, ot_tensor *up,
                                ot_tensor *dy);

/* Backward of the row norms (statistics recomputed from x): dx [rows, n]
 * overwritten (not aliasing x or dy), dw/db [n] accumulate (each may be NULL). */
ot_status ot_op_layernorm_backward(ot_program *p, ot_tensor *dx, ot_tensor *dw, ot_tensor *db, ot_tensor *dy,
                                   ot_tensor *x, ot_tensor *w, float eps);
ot_status ot_op_rmsnorm_backward(ot_program *p, ot_tensor *dx, ot_tensor *dw, ot_tensor *dy, ot_tensor *x,
                                 ot_tensor *w, float eps);

/* Causal self-attention without a KV cache (training), one sequence or a
 * batch of them: out, q [T, H, hd] or [B, T, H, hd], k, v [T, KV, hd] or
 * [B, T, KV, hd] (views: any strides, e.g. column blocks of a fused qkv
 * matrix); query t sees keys 0..t of its own sequence. One op for the whole
 * batch. */
ot_status ot_op_causal_attention(ot_program *p, ot_tensor *out, ot_tensor *q, ot_tensor *k, ot_tensor *v);
/* The same, also writing ws [(B,) T, H, 2] f32: ws[.., 0] = each query
 * row's log-sum-exp, ws[.., 1] = 0 — what the backward needs. */
ot_status ot_op_causal_attention_train(ot_program *p, ot_tensor *out, ot_tensor *ws, ot_tensor *q, ot_tensor *k,
                                       ot_tensor *v);
/* Its backward: dq [(B,) T, H, hd], dk, dv [(B,) T, KV, hd] overwritten,
 * from dout, the forward's output out and ws as ot_op_causal_attention_train
 * wrote it (read: the log-sum-exp); ws[.., 1] gets D_i = dout_i . out_i.
 * Reading the forward's statistics instead of recomputing them is what lets
 * the GPU kernels run as two passes (dq; dk and dv), FlashAttention-2 style;
 * the portable path still recomputes both per sequence. */
ot_status ot_op_causal_attention_backward(ot_program *p, ot_tensor *dq, ot_tensor *dk, ot_tensor *dv, ot_tensor *ws,
                                          ot_tensor *dout, ot_tensor *out, ot_tensor *q, ot_tensor *k, ot_tensor *v);

/* dtable[ids[t]] += dout[t] (ids outside the table add nothing);
 * dtable [vocab, n], dout [T, n], ids i32 [T]. */
ot_status ot_op_embedding_backward(ot_program *p, ot_tensor *dtable, ot_tensor *dout, ot_tensor *ids);
/* Backward of ot_op_add_positions: dtable[pos + t] += dout[t] for
 * dout [T, n] (or [B, T, n], summed over B), pos = scalars[pos_slot]. */
ot_status ot_op_positions_backward(ot_program *p, ot_tensor *dtable, ot_tensor *dout, int pos_slot);

/* t = 0 (gradient accumulators before the first accumulating op). The op
 * only writes t: its old contents are never read or uploaded. */
ot_status ot_op_zero(ot_program *p, ot_tensor *t);

/* Optimizers, one parameter tensor per op; the step number t (from 1, for
 * Adam's bias correction) is read from run-time scalar step_slot when the
 * op runs, so one recorded update replays for every step. */
typedef struct ot_adamw_opts {
  float lr, beta1, beta2, eps, weight_decay; /* torch.optim.AdamW's */
  float grad_scale;                          /* gradients are multiplied by it first (1: none) */
  int step_slot;                             /* run-time scalar holding t >= 1 */
  /* Dynamic loss scaling (both -1: off). scale_slot: run-time scalar k, the
   * gradients are also multiplied by 2^-k (they carry a loss scale 2^k, see
   * ot_op_loss_scale). skip_slot: run-time scalar; nonzero skips the update
   * (param, m, v unchanged; copy rewritten from param), for a step whose
   * gradients overflowed (ot_op_grad_stats). */
  int scale_slot, skip_slot;
  /* NULL, or the [2] f32 stats of ot_op_grad_stats over this step's
   * gradients: the update is skipped (as with skip_slot) when its Inf/NaN
   * count is non-zero, read on the device when the op runs, so a step
   * decides its own skip without a round trip through the host between
   * backward and update (one small copy per op instead). */
  const ot_tensor *skip_if;
} ot_adamw_opts;
ot_adamw_opts ot_adamw_opts_default(void); /* lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 0.01, scale 1, slots -1 */

/* param [..] f32 updated in place from grad (same numel, f32/f16/bf16);
 * m, v [..] f32 moments (persistent, zero before step 1); copy NULL or a
 * low-precision copy of param written after the update. */
ot_status ot_op_adamw(ot_program *p, ot_tensor *param, ot_tensor *grad, ot_tensor *m, ot_tensor *v, ot_tensor *copy,
                      const ot_adamw_opts *o);

/* n >= 1 AdamW updates in one op, the same as n ot_op_adamw ops with the same
 * options bit for bit (loss scale and skip included): params[i], grads[i],
 * m[i], v[i] as for ot_op_adamw, copies NULL or an array whose entries may
 * be NULL. The op lists every tensor as its operand; on a GPU it runs in a
 * few launches instead of n (GPT-2: 148 tensors). */
ot_status ot_op_adamw_multi(ot_program *p, int n, ot_tensor *const *params, ot_tensor *const *grads,
                            ot_tensor *const *m, ot_tensor *const *v, ot_tensor *const *copies,
                            const ot_adamw_opts *o);

/* Dynamic loss scaling (f16 gradients): the scale is a power of two, 2^k
 * with k = scalars[scale_slot] read when the op runs, so one recorded step
 * replays with a changing scale. x [..] f32/f16/bf16 contiguous *= 2^k in
 * place (record it on the loss gradient, e.g. dlogits after ot_op_cross_entropy). */
ot_status ot_op_loss_scale(ot_program *p, ot_tensor *x, int scale_slot);
/* The host's rule for the next scale, torch.amp.GradScaler's with backoff
 * 1/2 and growth 2: after a step whose gradients overflowed *k drops by one
 * and *good_run restarts; after `growth_interval` good steps in a row *k
 * rises by one. k stays within [-126, 127] (2^k a normal f32). */
void ot_loss_scale_next(int *k, int *good_run, int growth_interval, int overflowed);
/* stats [2] f32 += {sum of g^2 over the finite values, number of Inf/NaN in g}
 * for grad [..] f32/f16/bf16 contiguous. Record ot_op_zero(stats) first, then
 * one op per gradient; mark stats an output and read it after the run. */
ot_status ot_op_grad_stats(ot_program *p, ot_tensor *stats, ot_tensor *grad);

typedef struct ot_sgd_opts {
  float lr, momentum, weight_decay;
  int nesterov;
  float grad_scale;
} ot_sgd_opts;
/* torch.optim.SGD (dampening 0); buf [..] f32 momentum buffer (NULL when
 * momentum == 0). */
ot_status ot_op_sgd(ot_program *p, ot_tensor *param, ot_tensor *grad, ot_tensor *buf, ot_tensor *copy,
                    const ot_sgd_opts *o);

#ifdef __cplusplus
}
#endif
#endif
