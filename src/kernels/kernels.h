/* kernels.h (internal) — the kernel library: OpenMP target kernels and their
 * C references.
 *
 * Every kernel is
 *     ot_status ot_k_<op>(int dev, <views and scalars>)
 * where `dev` is an OpenMP device number (omp_get_initial_device() runs it on
 * host threads: the `host` backend). Views carry DEVICE addresses of memory
 * the caller has already placed on `dev`; kernels never move data. A kernel
 * validates shapes and dtypes (OT_ERR_SHAPE / OT_ERR_DTYPE with a message
 * naming the op), then runs synchronously.
 *
 * Beside each kernel, ot_ref_<op>(<same arguments but dev>) is a plain C
 * reference on HOST pointers: the test oracle and the definition of the
 * semantics. It accepts and rejects exactly what the kernel does.
 *
 * Gradient convention (training kernels): gradients of parameters ACCUMULATE
 * (+=, so micro-batches and tied weights add up; the caller zeroes them);
 * gradients of activations are overwritten.
 *
 * All arithmetic is fp32; f16/bf16/q8b are storage formats. Outputs written
 * in f16/bf16 are rounded to nearest even.
 */
#ifndef OT_KERNELS_KERNELS_H
#define OT_KERNELS_KERNELS_H

#include <stdint.h>

#include "omptensor/dtype.h"
#include "omptensor/rope.h"
#include "omptensor/status.h"

/* ---- views --------------------------------------------------------------
 * p    address of element 0 (device address for ot_k_*, host for ot_ref_*)
 * ne   dims, outermost first (ne[0..ndim-1])
 * nb   strides in ELEMENTS (not bytes); any non-negative values, 0 broadcasts.
 * For OT_Q8B the last dim must be contiguous (nb[ndim-1] == 1) and run over
 * whole blocks (ne[ndim-1] % 32 == 0, other strides % 32 == 0): element
 * offset o lives in block o/32, lane o%32 (dtype.h: {float scale; int8 q[32]}).
 * A view with zero elements may have p == NULL. */
typedef struct ot_kview {
  void *p;
  ot_dtype dt;
  int ndim; /* 1..4 */
  int64_t ne[4];
  int64_t nb[4];
} ot_kview;

#define OT_KVIEW_MAX_DIMS 4

/* Contiguous (row-major) views. */
ot_kview ot_kview_1d(void *p, ot_dtype dt, int64_t n0);
ot_kview ot_kview_2d(void *p, ot_dtype dt, int64_t n0, int64_t n1);
ot_kview ot_kview_3d(void *p, ot_dtype dt, int64_t n0, int64_t n1, int64_t n2);
ot_kview ot_kview_nd(void *p, ot_dtype dt, int ndim, const int64_t *ne);
/* The same view with its last two dims swapped (a transpose, no copy). */
ot_kview ot_kview_t(ot_kview v);
/* The view padded to 4 dims by leading 1s (stride 0). */
ot_kview ot_kview_4d(ot_kview v);
/* Product of the dims. */
int64_t ot_kview_numel(ot_kview v);
/* A "no view" for optional arguments (p == NULL, ndim 0). */
ot_kview ot_kview_none(void);

/* Whether GEMMs on OpenMP device `dev` go to the vendor library (cuBLAS:
 * a GPU, a build that has it, OMPTENSOR_GEMM not "portable"). Its GEMMs
 * take operands of one dtype only, so a model whose weights are bf16 or
 * f16 records its multi-row (prefill) activations in that dtype there. */
int ot_k_gemm_vendor(int dev);

/* ---- matmul ---------------------------------------------------------------
 * c[b] (=|+=) a[b] @ op(b[b]),  op(B) = B or B^T (trans_b), fp32 accumulation.
 *   a  [batch?, M, K]   f32 | f16 | bf16      (any strides: a transposed view works)
 *   b  [batch?, K, N]   f32 | f16 | bf16 | q8b   (trans_b = 0)
 *      [batch?, N, K]                          (trans_b = 1: HF Linear W[out, in], y = x @ W^T)
 *   c  [batch?, M, N]   f32 | f16 | bf16
 * A 2-D operand broadcasts over c's batch. accumulate: c += instead of c =.
 * M == 1 takes the matrix-vector path (decode): with trans_b and a contiguous
 * weight row, one team per output element reduces over K, reading each weight
 * once, coalesced. Otherwise a 64x64 tiled GEMM with team-shared tiles.
 * (A vendor-BLAS path would plug in at the top of ot_k_matmul, see matmul.c.) */
ot_status ot_k_matmul(int dev, ot_kview c, ot_kview a, ot_kview b, int trans_b, int accumulate);

/* Bytes/s the host's threads read bf16 weights at in the decode matmul
 * (ot_k_matmul on a host device, M = 1) into *host_rate, measured once per
 * process and device over 256 MiB of its own; with `dev` a device (not
 * OT_DEVICE_HOST), while a thread streams 512 MiB of pinned memory to it
 * (both read host memory, as in a hybrid step), and *pcie_rate (may be
 * NULL) gets that stream's bytes/s.
 * An allocation or copy it cannot make is its status (the rates are not
 * cached then). Hybrid compute splits a step by them (sched.h,
 * ot_sched_opts.host_read_rate). */
ot_status ot_k_host_rates(int dev, double *host_rate, double *pcie_rate);
ot_status ot_ref_matmul(ot_kview c, ot_kview a, ot_kview b, int trans_b, int accumulate);

/* ---- elementwise -----------------------------------------------------------
 * y = f(a, b) over y's shape (1..4 dims), any strides, f32/f16/bf16 in any
 * mix. a and b broadcast numpy-style (dims aligned from the right, a dim of 1
 * repeats), so bias_add is add with a 1-D bias [cols]. y may alias an input
 * exactly (residual add in place: ot_k_add(dev, x, x, r)).
 *   add     y = a + b              mul     y = a * b
 *   scale   y = s * x              bias_add y[.., j] = x[.., j] + bias[j]
 *   gelu    y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (GPT-2 gelu_new)
 *   silu    y = x / (1 + exp(-x))
 *   swiglu  y = silu(gate) * up    (Llama MLP) */
ot_status ot_k_add(int dev, ot_kview y, ot_kview a, ot_kview b);
ot_status ot_k_mul(int dev, ot_kview y, ot_kview a, ot_kview b);
ot_status ot_k_bias_add(int dev, ot_kview y, ot_kview x, ot_kview bias);
ot_status ot_k_scale(int dev, ot_kview y, ot_kview x, float s);
ot_status ot_k_gelu(int dev, ot_kview y, ot_kview x);
ot_status ot_k_silu(int dev, ot_kview y, ot_kview x);
ot_status ot_k_swiglu(int dev, ot_kview y, ot_kview gate, ot_kview up);
ot_status ot_ref_add(ot_kview y, ot_kview a, ot_kview b);
ot_status ot_ref_mul(ot_kview y, ot_kview a, ot_kview b);
ot_status ot_ref_bias_add(ot_kview y, ot_kview x, ot_kview bias);
ot_status ot_ref_scale(ot_kview y, ot_kview x, float s);
ot_status ot_ref_gelu(ot_kview y, ot_kview x);
ot_status ot_ref_silu(ot_kview y, ot_kview x);
ot_status ot_ref_swiglu(ot_kview y, ot_kview gate, ot_kview up);

/* ---- mixture of experts (moe.c) ----------------------------------------------
 *   scatter_add_rows  y[ids[r]] += w[r] * x[r]   y [T, D], x [n, D], ids [n] i32, w [n]; f32; the ids of
 *                     one call distinct (one expert's tokens); an id outside [0, T) adds nothing
 *   sigmoid_gate_add  y += sigmoid(g) * x          y, x [T, D], g [T, 1]; f32 */
ot_status ot_k_scatter_add_rows(int dev, ot_kview y, ot_kview x, ot_kview ids, ot_kview w);
ot_status ot_ref_scatter_add_rows(ot_kview y, ot_kview x, ot_kview ids, ot_kview w);
ot_status ot_k_sigmoid_gate_add(int dev, ot_kview y, ot_kview x, ot_kview g);
ot_status ot_ref_sigmoid_gate_add(ot_kview y, ot_kview x, ot_kview g);

/* ---- normalisation (row-wise over the last dim; one team per row) ------------
 *   x, y [.., d] same shape (1..4 dims, any strides; y may be x), w, b [d];
 *   f32/f16/bf16, statistics in fp32.
 *   rmsnorm    y = x / sqrt(mean(x^2) + eps) * w                (Llama)
 *   layernorm  y = (x - mean) / sqrt(var + eps) * w + b, var biased (GPT-2) */
ot_status ot_k_rmsnorm(int dev, ot_kview y, ot_kview x, ot_kview w, float eps);
ot_status ot_k_layernorm(int dev, ot_kview y, ot_kview x, ot_kview w, ot_kview b, float eps);
ot_status ot_ref_rmsnorm(ot_kview y, ot_kview x, ot_kview w, float eps);
ot_status ot_ref_layernorm(ot_kview y, ot_kview x, ot_kview w, ot_kview b, float eps);

/* ---- softmax ---------------------------------------------------------------
 * y = softmax(scale * x) over the last dim, stable (max subtracted).
 *   x, y [.., S, n] same shape (1..4 dims; y may be x).
 * causal: row i of dim -2 (S queries, the LAST S positions of n keys) keeps
 * columns j <= i + n - S; masked columns get exactly 0. */
ot_status ot_k_softmax(int dev, ot_kview y, ot_kview x, float scale, int causal);
ot_status ot_ref_softmax(ot_kview y, ot_kview x, float scale, int causal);

/* ---- RoPE ------------------------------------------------------------------------
 * In place on x [seq, n_heads, head_dim] (q, or k with n_kv_heads), f32/f16/
 * bf16, any strides: row s is at position pos + s. HF Llama semantics
 * (rotate_half: pairs (i, i + head_dim/2)), inv_freq = theta^(-2i/head_dim),
 * angles in fp32 as HF computes them. Call once for q and once for k. */
ot_status ot_k_rope(int dev, ot_kview x, int64_t pos, ot_rope r);
ot_status ot_ref_rope(ot_kview x, int64_t pos, ot_rope r);

/* ---- attention with a KV cache ----------------------------------------------
 * kv_append: cache[pos + s, h, :] = x[s, h, :]
 *   cache [max_seq, n_kv_heads, head_dim], x [seq, n_kv_heads, head_dim];
 *   f32/f16/bf16 (converted on the way); pos is the runtime position.
 *   Call once for k and once for v.
 * attention: causal MHA with GQA, scale 1/sqrt(head_dim):
 *   out[s, h] = softmax_j<=pos+s(q[s, h] . k[j, h/g] * scale) @ v[:, h/g]
 *   q, out [seq, n_heads, head_dim]; k, v caches [max_seq, n_kv_heads, head_dim],
 *   g = n_heads / n_kv_heads; rows pos..pos+seq-1 must already be appended.
 *   head_dim <= 256. Tiled online softmax (any length, scores never stored). */
ot_status ot_k_kv_append(int dev, ot_kview cache, ot_kview x, int64_t pos);
ot_status ot_k_attention(int dev, ot_kview out, ot_kview q, ot_kview k, ot_kview v, int64_t pos);
ot_status ot_ref_kv_append(ot_kview cache, ot_kview x, int64_t pos);
ot_status ot_ref_attention(ot_kview out, ot_kview q, ot_kview k, ot_kview v, int64_t pos);
/* The same with a sliding window of `window` positions (0: none): row s sees
 * keys j with pos + s - window < j <= pos + s (Mistral's window, as
 * transformers masks it: the last `window` positions, itself included). */
ot_status ot_k_attention_window(int dev, ot_kview out, ot_kview q, ot_kview k, ot_kview v, int64_t pos,
                                int64_t window);
ot_status ot_ref_attention_window(ot_kview out, ot_kview q, ot_kview k, ot_kview v, int64_t pos, int64_t window);

/* ---- attention over a batch of sequences (attention_rows.c) ------------------
 * The rows of one step are tokens of several sequences, each with its own
 * KV cache slot: caches kc, vc [slots, max_seq, n_kv_heads, head_dim], and
 * rows i32 [T, 2] holding row t's (slot, position) on the device.
 *   rope_append_rows  rope(q[t]), rope(k[t]) at row t's position (in place),
 *                     then k[t], v[t] into row t's slot at that position
 *   attention_rows    out[t, h] = softmax(q[t, h] . k[slot, j, h/g] * scale) @ v
 *                     over the slot's positions j in (pos - window, pos]
 *                     (window 0: all of [0, pos]); rows pos' <= pos of the
 *                     slot must already be appended
 * q, out [T, n_heads, head_dim]; k, v [T, n_kv_heads, head_dim]. A row
 * whose slot or position is outside the caches is padding: no cache
 * changes, q and k stay as they are, its output is 0. Per row the same
 * arithmetic as ot_k_rope_append and the portable ot_k_attention_window
 * (bitwise the same results wherever those take their portable loops).
 * Not for dynamic RoPE (its frequencies follow each sequence's length:
 * OT_ERR_UNSUPPORTED). */
ot_status ot_k_rope_append_rows(int dev, ot_kview q, ot_kview k, ot_kview v, ot_kview kc, ot_kview vc, ot_kview rows,
                                ot_rope r);
ot_status ot_ref_rope_append_rows(ot_kview q, ot_kview k, ot_kview v, ot_kview kc, ot_kview vc, ot_kview rows,
                                  ot_rope r);
ot_status ot_k_attention_rows(int dev, ot_kview out, ot_kview q, ot_kview kc, ot_kview vc, ot_kview rows,
                              int64_t window);
ot_status ot_ref_attention_rows(ot_kview out, ot_kview q, ot_kview kc, ot_kview vc, ot_kview rows, int64_t window);

/* ---- embedding, argmax -------------------------------------------------------
 * embedding: out[r, :] = table[ids[r], :]
 *   ids [n] i32, table [vocab, d] f32/f16/bf16/q8b, out [n, d] f32/f16/bf16;
 *   an id outside [0, vocab) gives a zero row.
 * argmax: idx[r] = index of the largest x[r, :], ties to the lowest index
 *   (torch.argmax); x [rows, n] or [n] f32/f16/bf16, idx [rows] i32. */
ot_status ot_k_embedding(int dev, ot_kview out, ot_kview table, ot_kview ids);
ot_status ot_k_argmax(int dev, ot_kview idx, ot_kview x);
ot_status ot_ref_embedding(ot_kview out, ot_kview table, ot_kview ids);
ot_status ot_ref_argmax(ot_kview idx, ot_kview x);

/* ---- sampling -------------------------------------------------------------------
 * idx[r] = a token drawn from softmax(logits[r, :] / temperature), restricted
 * to the top_k largest logits (0 or >= vocab: all; ties at the k-th value all
 * stay) and then to the smallest set of most likely tokens whose probability
 * is >= top_p (>= 1: all), renormalised.
 *   logits [rows, vocab] or [vocab] f32/f16/bf16 (vocab <= 2^23), idx [rows] i32;
 *   temperature > 0; NaN logits are never drawn.
 * Deterministic: the draw is a counter-based RNG of (seed, step, row)
 * (splitmix64), and every decision is exact integer arithmetic on 40-bit
 * fixed-point weights (tokens with probability below ~2^-40 of the max are
 * never drawn), so every device and the reference pick the same token. */
ot_status ot_k_sample(int dev, ot_kview idx, ot_kview logits, float temperature, int top_k, float top_p,
                      uint64_t seed, uint64_t step);
ot_status ot_ref_sample(ot_kview idx, ot_kview logits, float temperature, int top_k, float top_p, uint64_t seed,
                        uint64_t step);
/* The same with row r drawn as row row0 + r: generation draws a sequence's
 * tokens as row (the sequence's number in its job), so what a sequence
 * samples does not depend on which others share its batch (issue 19);
 * ot_k_sample is row0 = 0. */
ot_status ot_k_sample_from(int dev, ot_kview idx, ot_kview logits, float temperature, int top_k, float top_p,
                           uint64_t seed, uint64_t step, int64_t row0);
ot_status ot_ref_sample_from(ot_kview idx, ot_kview logits, float temperature, int top_k, float top_p, uint64_t seed,
                             uint64_t step, int64_t row0);

/* ==== training ====================================================================
 * Backward kernels follow the gradient convention at the top: parameter
 * gradients (dw, db, dbias, dtable, dwpe, the matmul's db) ACCUMULATE, activation
 * gradients (dx, da, dq, dk, dv, dlogits, dgate, dup) are overwritten. No
 * float atomics anywhere: every reduction has a fixed order or shape, so a
 * rerun on the same device gives the same bits. */

/* ---- cross-entropy (fused loss + gradient) -----------------------------------------
 *   logits  [rows, vocab] f32/f16/bf16      targets [rows] i32 (-100: ignored)
 *   losses  [rows] f32: per-row loss (0 where ignored)   loss [1] f32: their mean
 *           over the rows not ignored (PyTorch reduction "mean"; 0 if all are)
 *   dlogits [rows, vocab] f32/f16/bf16 or none: grad_scale * (softmax - onehot)
 *           / (rows not ignored), zero rows where ignored; may be logits itself.
 * grad_scale is 1 normally; the loss scale for f16 training, or 1/micro-batches.
 * A target outside [0, vocab) other than -100 makes its loss (and the mean)
 * NaN (PyTorch raises). */
ot_status ot_k_cross_entropy(int dev, ot_kview loss, ot_kview losses, ot_kview dlogits, ot_kview logits,
                             ot_kview targets, float grad_scale);
ot_status ot_ref_cross_entropy(ot_kview loss, ot_kview losses, ot_kview dlogits, ot_kview logits, ot_kview targets,
                               float grad_scale);

/* ---- matmul / bias backward ------------------------------------------------------
 * For c = a @ op(b) (ot_k_matmul's shapes): da = dc @ op(b)^T (overwrite),
 * db += a^T @ dc, or dc^T @ a for trans_b (HF Linear W [out, in]). da or db may
 * be none. A 2-D db with a batched dc gets the sum over the batch. Runs
 * ot_k_matmul on transposed views.
 * bias_backward: dbias [n] += sum of dy [.., n] over all leading dims. */
ot_status ot_k_matmul_backward(int dev, ot_kview da, ot_kview db, ot_kview dc, ot_kview a, ot_kview b, int trans_b);
ot_status ot_k_bias_backward(int dev, ot_kview dbias, ot_kview dy);
ot_status ot_ref_matmul_backward(ot_kview da, ot_kview db, ot_kview dc, ot_kview a, ot_kview b, int trans_b);
ot_status ot_ref_bias_backward(ot_kview dbias, ot_kview dy);

/* ---- pointwise backward (shapes and broadcasting as the elementwise ops) ----------
 *   gelu_backward    dx = dy * gelu'(x)     (tanh form)
 *   silu_backward    dx = dy * silu'(x),  silu' = s (1 + x (1 - s)), s = sigmoid(x)
 *   swiglu_backward  dgate = dy * up * silu'(gate),  dup = dy * silu(gate)
 * dx may alias dy. dgate must not alias an input (it stages dy * up, rounded
 * to dgate's dtype); dup may alias dy.
 * softmax_backward: for y = softmax(scale * x) (causal or not): dx = scale * y
 *   * (dy - sum(dy * y)) per row; dx, y, dy same shape; dx may alias dy. */
ot_status ot_k_gelu_backward(int dev, ot_kview dx, ot_kview x, ot_kview dy);
ot_status ot_k_silu_backward(int dev, ot_kview dx, ot_kview x, ot_kview dy);
ot_status ot_k_swiglu_backward(int dev, ot_kview dgate, ot_kview dup, ot_kview gate, ot_kview up, ot_kview dy);
ot_status ot_k_softmax_backward(int dev, ot_kview dx, ot_kview y, ot_kview dy, float scale);
ot_status ot_ref_gelu_backward(ot_kview dx, ot_kview x, ot_kview dy);
ot_status ot_ref_silu_backward(ot_kview dx, ot_kview x, ot_kview dy);
ot_status ot_ref_swiglu_backward(ot_kview dgate, ot_kview dup, ot_kview gate, ot_kview up, ot_kview dy);
ot_status ot_ref_softmax_backward(ot_kview dx, ot_kview y, ot_kview dy, float scale);

/* ---- normalisation backward ---------------------------------------------------------
 * For y = layernorm(x; w, b, eps) / rmsnorm(x; w, eps) (shapes as forward;
 * statistics recomputed from x):
 *   dx  [.., d] overwritten; must not alias x or dy
 *   dw, db [d] accumulate (+=), each may be none (then dx alone is computed)
 * dw and db are reduced over rows in a fixed order (no atomics). With dw/db,
 * dx first stages xhat (see norm_bwd.c): give an f32 dx for exact dw. */
ot_status ot_k_layernorm_backward(int dev, ot_kview dx, ot_kview dw, ot_kview db, ot_kview dy, ot_kview x, ot_kview w,
                                  float eps);
ot_status ot_k_rmsnorm_backward(int dev, ot_kview dx, ot_kview dw, ot_kview dy, ot_kview x, ot_kview w, float eps);
ot_status ot_ref_layernorm_backward(ot_kview dx, ot_kview dw, ot_kview db, ot_kview dy, ot_kview x, ot_kview w,
                                    float eps);
ot_status ot_ref_rmsnorm_backward(ot_kview dx, ot_kview dw, ot_kview dy, ot_kview x, ot_kview w, float eps);

/* ---- embedding / positions backward ------------------------------------------------
 * embedding_backward: dtable[ids[r], :] += dout[r, :]
 *   dtable [vocab, d] f32/f16/bf16, dout [n, d], ids [n] i32; ids outside
 *   [0, vocab) add nothing (the forward gave them a zero row). Repeated ids add
 *   up in row order (one thread per column: deterministic, no atomics).
 * positions_backward: dwpe[pos + t, :] += sum over b of dout[b, t, :]
 *   dwpe [max_pos, d], dout [T, d] or [B, T, d]; rows [pos, pos + T) must fit. */
ot_status ot_k_embedding_backward(int dev, ot_kview dtable, ot_kview dout, ot_kview ids);
ot_status ot_k_positions_backward(int dev, ot_kview dwpe, ot_kview dout, int64_t pos);
ot_status ot_ref_embedding_backward(ot_kview dtable, ot_kview dout, ot_kview ids);
ot_status ot_ref_positions_backward(ot_kview dwpe, ot_kview dout, int64_t pos);

/* ---- optimizers (one parameter tensor per call, flattened to [n]) ----------------------
 *   p    [n] f32 master weights, updated in place
 *   g    [n] f32/f16/bf16 gradient, multiplied by grad_scale first (1/loss
 *        scale to unscale f16 gradients; 1 otherwise)
 *   m, v [n] f32 AdamW moments (zeroed before step 1); buf [n] f32 SGD momentum
 *        buffer (zeroed before the first step; none when momentum == 0)
 *   copy [n] f16/bf16/f32 or none: receives the updated p (rounded to nearest
 *        even), the low-precision weights the next forward reads.
 * AdamW is torch.optim.AdamW (decoupled decay p *= 1 - lr*wd first, then the
 * bias-corrected Adam step; see optim.c for the exact operation order); t is
 * the step number, from 1. SGD is torch.optim.SGD with dampening 0. */
typedef struct ot_kadamw {
  float lr, beta1, beta2, eps, weight_decay;
  int64_t t;
  float grad_scale;
} ot_kadamw;

typedef struct ot_ksgd {
  float lr, momentum, weight_decay;
  int nesterov;
  float grad_scale;
} ot_ksgd;

ot_status ot_k_adamw(int dev, ot_kview p, ot_kview g, ot_kview m, ot_kview v, ot_kview copy, ot_kadamw h);
ot_status ot_k_sgd(int dev, ot_kview p, ot_kview g, ot_kview buf, ot_kview copy, ot_ksgd h);
ot_status ot_ref_adamw(ot_kview p, ot_kview g, ot_kview m, ot_kview v, ot_kview copy, ot_kadamw h);
ot_status ot_ref_sgd(ot_kview p, ot_kview g, ot_kview buf, ot_kview copy, ot_ksgd h);

/* adamw_multi: n >= 0 AdamW updates with one set of hyperparameters, tensor
 * i being (p[i], g[i], m[i], v[i], copy[i]) as for ot_k_adamw (copy[i] may
 * be ot_kview_none()); the same bits as n ot_k_adamw calls. On a GPU the
 * contiguous tensors go in a few launches instead of n. Every tensor is
 * checked before anything is written. */
ot_status ot_k_adamw_multi(int dev, int n, const ot_kview *p, const ot_kview *g, const ot_kview *m, const ot_kview *v,
                           const ot_kview *copy, ot_kadamw h);
ot_status ot_ref_adamw_multi(int n, const ot_kview *p, const ot_kview *g, const ot_kview *m, const ot_kview *v,
                             const ot_kview *copy, ot_kadamw h);

/* ---- gradient statistics (loss scaling, clipping) -----------------------------------
 * stats [2] f32 ACCUMULATES over calls (zero it, then one call per gradient):
 *   stats[0] += sum of g^2 over the finite values (double inside),
 *   stats[1] += number of Inf/NaN values (> 0: skip the step, shrink the scale).
 * g [n] f32/f16/bf16. Global norm = sqrt(stats[0]); to clip or unscale, use
 * ot_k_scale in place, or the optimizers' grad_scale. One team: deterministic. */
ot_status ot_k_grad_stats(int dev, ot_kview stats, ot_kview g);
ot_status ot_ref_grad_stats(ot_kview stats, ot_kview g);

/* ---- attention backward (training: no cache) --------------------------------------------
 * For out = causal softmax(q k^T / sqrt(head_dim)) v per head, with GQA
 * (query i sees keys j <= i):
 *   q, dout, dq [T, n_heads, head_dim]; k, v, dk, dv [T, n_kv_heads, head_dim]
 *   (f32/f16/bf16, any strides); dq, dk, dv overwritten (dk, dv summed over
 *   the heads of their group).
 *   ws [T, n_heads, 2] f32 workspace: left holding each query row's
 *   log-sum-exp and D_i = sum_j P_ij (dout_i . v_j).
 * Straightforward and deterministic, one sequence: the portable path of
 * ot_k_causal_attention_backward (the tiled GPU kernels are
 * attention_train_gpu.c's). */
ot_status ot_k_attention_backward(int dev, ot_kview dq, ot_kview dk, ot_kview dv, ot_kview ws, ot_kview dout,
                                  ot_kview q, ot_kview k, ot_kview v);
ot_status ot_ref_attention_backward(ot_kview dq, ot_kview dk, ot_kview dv, ot_kview ws, ot_kview dout, ot_kview q,
                                    ot_kview k, ot_kview v);

/* ---- causal attention of training (attention_train.c) -------------------------
 * One sequence or a batch, no KV cache: query t of a sequence sees its keys
 * 0..t, scale 1/sqrt(head_dim), GQA.
 *   q, out, dout, dq  [T, H, hd] or [B, T, H, hd]
 *   k, v, dk, dv      [T, KV, hd] or [B, T, KV, hd]    (H a multiple of KV)
 *   ws                [T, H, 2] or [B, T, H, 2] f32: per query row
 *                     {log-sum-exp of its scaled scores, D = dout . out}
 * f32/f16/bf16 storage in any mix, any strides; fp32 arithmetic.
 * causal_attention: out = softmax(q k^T scale) v; with ws (not
 *   ot_kview_none()) also ws[.., 0] = the log-sum-exp, ws[.., 1] = 0.
 * causal_attention_backward: dq, dk, dv overwritten (dk, dv summed over the
 *   heads of their group), from dout, the forward's out and ws as the forward
 *   left it; leaves ws = {log-sum-exp, D}. On a GPU (head_dim <= 128, unit
 *   last strides) tiled flash-attention kernels that read the forward's
 *   log-sum-exp (attention_train_gpu.c); elsewhere the per-sequence
 *   ot_k_attention / ot_k_attention_backward, which recompute both
 *   statistics (so out and ws's input are not read there). The references
 *   are those kernels' references per sequence (double precision). */
ot_status ot_k_causal_attention(int dev, ot_kview out, ot_kview ws, ot_kview q, ot_kview k, ot_kview v);
ot_status ot_ref_causal_attention(ot_kview out, ot_kview ws, ot_kview q, ot_kview k, ot_kview v);
ot_status ot_k_causal_attention_backward(int dev, ot_kview dq, ot_kview dk, ot_kview dv, ot_kview ws, ot_kview dout,
                                         ot_kview out, ot_kview q, ot_kview k, ot_kview v);
ot_status ot_ref_causal_attention_backward(ot_kview dq, ot_kview dk, ot_kview dv, ot_kview ws, ot_kview dout,
                                           ot_kview out, ot_kview q, ot_kview k, ot_kview v);

/* ---- fused (decode) ----------------------------------------------------------
 * One launch for what would be several (see fused.c); semantics are exactly
 * those of the separate kernels, which are the fallback and the reference.
 *   matmul_multi   c[i] = a @ w[i]^T for n = 1..3 weights (q, k, v projections)
 *   matmul_swiglu  y = silu(a @ wg^T) * (a @ wu^T); `up` is scratch [M, N] for
 *                  the fallback (untouched by the GPU path)
 *   rope_append    rope(q), rope(k) in place at positions pos.., then append k
 *                  and v at rows pos.. of the caches */
ot_status ot_k_matmul_multi(int dev, int n, const ot_kview *c, ot_kview a, const ot_kview *w);
ot_status ot_ref_matmul_multi(int n, const ot_kview *c, ot_kview a, const ot_kview *w);
ot_status ot_k_matmul_swiglu(int dev, ot_kview y, ot_kview up, ot_kview a, ot_kview wg, ot_kview wu);
ot_status ot_ref_matmul_swiglu(ot_kview y, ot_kview up, ot_kview a, ot_kview wg, ot_kview wu);
ot_status ot_k_rope_append(int dev, ot_kview q, ot_kview k, ot_kview v, ot_kview kc, ot_kview vc, int64_t pos,
                           ot_rope r);
ot_status ot_ref_rope_append(ot_kview q, ot_kview k, ot_kview v, ot_kview kc, ot_kview vc, int64_t pos, ot_rope r);

#endif
