/* experts.h — the experts of mixture-of-experts layers (Mixtral, Qwen2-MoE):
 * kept at home, brought to the device only when a router chooses them.
 *
 * Which experts a token uses is known only when its router has run, so no
 * plan made beforehand can name them. The expert weights are therefore not
 * tensors of the program: they stay in their homes, and each MoE op brings
 * the chosen ones into a window of the device budget (a cache tensor of the
 * program, program.h ot_program_mark_cache) of `slots` experts, shared by
 * every layer, keeping the most recently used ones across tokens. The
 * window is planned like any tensor, so the budget holds with it (and the
 * trace shows each expert that crossed, as an upload flagged
 * OT_TRACE_FILL).
 *
 *     ot_experts_shape sh = {.n_layers = L, .n_experts = 8, .top_k = 2, .normalize = 1,
 *                            .hidden = D, .intermediate = F, .dtype = OT_BF16};
 *     ot_experts *ex;
 *     ot_experts_create(ctx, &sh, &ex);
 *     ot_experts_set(ex, layer, e, w1, w3, w2);     // gate [F, D], up [F, D], down [D, F], borrowed
 *     ot_experts_set_slots(ex, 4);                  // the window: 4 experts
 *     ... per layer: ot_op_matmul(p, logits, x, router, 1, 0);
 *                    ot_op_moe(p, h, x, logits, ex, layer, work);   // h += sum of chosen experts
 *
 * Routing, as transformers computes it: softmax over all experts' logits,
 * the top_k largest (ties to the lower index), their weights divided by
 * their sum when `normalize` (Mixtral; Qwen2-MoE's norm_topk_prob), each
 * chosen expert's SwiGLU output times its weight added to h in expert-index
 * order (so the result does not depend on the window or the budget). */
#ifndef OMPTENSOR_EXPERTS_H
#define OMPTENSOR_EXPERTS_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/program.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ot_experts ot_experts;

typedef struct ot_experts_shape {
  int n_layers, n_experts, top_k;
  int normalize;               /* divide the chosen weights by their sum */
  int64_t hidden, intermediate;
  ot_dtype dtype;              /* of every expert weight (f32, bf16, f16 or q8b) */
} ot_experts_shape;

/* What crossed: routed = (token, expert) pairs computed; hits = experts found in the window;
 * fills = experts brought in, fill_bytes their bytes. */
typedef struct ot_experts_stats {
  uint64_t routed, hits, fills, fill_bytes;
} ot_experts_stats;

ot_status ot_experts_create(ot_ctx *ctx, const ot_experts_shape *shape, ot_experts **out);
void ot_experts_destroy(ot_experts *x); /* NULL is fine; destroy the programs that use it first */

/* Expert `e` of `layer`: gate and up [intermediate, hidden], down [hidden, intermediate], contiguous,
 * of the shape's dtype, in the experts' context (borrowed: they must outlive it). */
ot_status ot_experts_set(ot_experts *x, int layer, int e, ot_tensor *gate, ot_tensor *up, ot_tensor *down);

/* Bytes one expert takes in the window (its three weights, each rounded up to 256). */
size_t ot_experts_slot_bytes(const ot_experts *x);
/* The window holds n experts (clamped to 1 .. layers x experts); a new
 * count makes a new window tensor, so record programs after it. */
ot_status ot_experts_set_slots(ot_experts *x, int n);
int ot_experts_slots(const ot_experts *x);
ot_dtype ot_experts_dtype(const ot_experts *x);
int ot_experts_count(const ot_experts *x); /* layers x experts */
ot_experts_stats ot_experts_get_stats(const ot_experts *x);

/* f32 elements of the scratch `work` an MoE op over T tokens needs. */
int64_t ot_experts_work_elems(const ot_experts *x, int64_t T);

/* h [T, hidden] += the chosen experts of `layer` applied to x [T, hidden]
 * (f32 both), routed by logits [T, n_experts] (f32, the router's output);
 * work: an f32 scratch of ot_experts_work_elems elements. Marks the window
 * a cache of p. */
ot_status ot_op_moe(ot_program *p, ot_tensor *h, ot_tensor *x, ot_tensor *logits, ot_experts *ex, int layer,
                    ot_tensor *work);

/* h [T, D] += sigmoid(g) * s, g [T, 1] (Qwen2-MoE's gated shared expert); f32. */
ot_status ot_op_sigmoid_gate_add(ot_program *p, ot_tensor *h, ot_tensor *s, ot_tensor *g);

/* The routing of one token (for tests and peers): the top_k of n logits
 * after a softmax, in *choice (expert indices, largest weight first) and
 * *weight. */
void ot_experts_route(const float *logits, int n, int top_k, int normalize, int *choice, float *weight);

#ifdef __cplusplus
}
#endif
#endif
