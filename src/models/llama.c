/* llama.c — Llama-family inference on omptensor's public API: RMSNorm,
 * RoPE (rotate-half; the scalings of omptensor/rope.h), SwiGLU MLP,
 * grouped-query attention with a KV cache, tied or untied embeddings.
 *
 * The same code runs the Llama decoders of other names, by config fields
 * (hfconfig.h): MistralForCausalLM (a sliding window in the attention; the
 * KV cache keeps every position), Qwen2ForCausalLM (q/k/v biases),
 * GemmaForCausalLM (GELU (tanh) gate, RMSNorm by (1 + w), embeddings times
 * sqrt(hidden)) and Phi3ForCausalLM (q, k, v and gate, up as row slices of
 * its fused weights).
 *
 * The forward pass of T tokens starting at run-time position `pos`:
 *
 *   h = embed[ids]                                   // [T, D]
 *   for each layer:
 *     x = rmsnorm(h) ; q,k,v = x Wq^T, x Wk^T, x Wv^T // [T, H*hd], [T, KV*hd] (one op)
 *     rope(q, k at pos) ; append k,v to the cache at pos  // one op with the attention
 *     h += attention(q, cache) Wo^T
 *     x = rmsnorm(h) ; h += (silu(x Wg^T) * x Wu^T) Wd^T
 *   logits = rmsnorm(h) lm_head^T                   // [T or 1, V]
 *
 * Activations are shared by all layers (each is fully rewritten before it is
 * read again), so a step holds a handful of them whatever the depth. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "omptensor/experts.h"
#include "omptensor/ops.h"
#include "omptensor/models.h"
#include "omptensor/sched.h"
#include "models/decoder.h"
#include "omptensor/weightset.h"

/* A batched decode step's rows read as f32 by the GEMV kernel; more go to
 * the vendor GEMM in the weights' dtype (see the step's activations). */
#define DECODE_F32_ROWS 8

typedef struct layer {
  ot_tensor *ln1, *wq, *wk, *wv, *wo, *ln2, *wg, *wu, *wd; /* MoE: wg, wu, wd are the shared expert's (or NULL) */
  ot_tensor *bq, *bk, *bv; /* qwen2: the q/k/v biases (NULL otherwise) */
  ot_tensor *wqkv, *wgu;    /* phi3: the fused weights whose row slices wq, wk, wv and wg, wu are */
  ot_tensor *router, *wsg;  /* MoE: the router [E, D]; qwen2_moe: the shared expert's gate [1, D] */
} layer;

typedef struct llama {
  ot_hf_config cfg;
  ot_wset w;
  ot_tensor *embed, *norm, *lm_head; /* lm_head == embed when tied */
  layer *L;
  ot_kvcache kv;
  ot_tlist views; /* phi3: the row slices of the fused weights, beside them */
  ot_experts *ex; /* mixtral, qwen2_moe: the experts, outside the programs (experts.h) */
  uint64_t fit_budget; /* what the window was last fitted to (llama_fit): the same again changes nothing */
  int fit_prompt;
  int64_t fit_slots; /* and the batch's slots (m->n_slots) */
} llama;

static void llama_destroy(ot_lm *m) {
  llama *l = m->impl;
  if (l) {
    ot_experts_destroy(l->ex); /* the held programs that use its window went with ot_lm_destroy */
    ot_kvcache_release(&l->kv);
    ot_tlist_release(&l->views); /* before the weights they view */
    ot_wset_destroy(&l->w);
    free(l->L);
    free(l);
  }
  free(m);
}

/* The forward pass of T rows: one sequence from run-time position "pos"
 * (n_logits < 0; all_logits as the vtable's build), or a batched step
 * (build_batch: rows of several sequences, each with its KV cache slot and
 * position in st->rows; n_logits rows of logits). */
static ot_status record(ot_lm *m, int T, int all_logits, int n_logits, ot_lm_step *st) {
  llama *l = m->impl;
  const ot_hf_config *c = &l->cfg;
  ot_ctx *ctx = m->ctx;
  int64_t D = c->hidden_size, H = c->num_heads, KV = c->num_kv_heads, hd = c->head_dim;
  int64_t F = c->intermediate_size;
  const int batched = n_logits >= 0;
  if (batched) OT_TRY(ot_decoder_batch_begin(m, &l->kv, c->num_layers, KV, hd, T, st));
  else OT_TRY(ot_decoder_step_begin(m, &l->kv, c->num_layers, KV, hd, T, st));
  ot_program *p = st->prog;
  int pos = st->pos_slot;

  ot_tensor *h, *x, *q, *k, *v, *att, *g, *u, *q3, *k3, *v3, *att3;
  int64_t sT[1] = {T}, sTD[2] = {T, D}, sTQ[2] = {T, H * hd}, sTK[2] = {T, KV * hd}, sTF[2] = {T, F};
  int64_t sQ3[3] = {T, H, hd}, sK3[3] = {T, KV, hd};
  OT_TRY(ot_lm_step_tensor(st, ctx, "ids", OT_I32, 1, sT, &st->ids));
  OT_TRY(ot_lm_step_tensor(st, ctx, "h", OT_F32, 2, sTD, &h));        /* residual stream [T, D] */
  /* The normed rows, the attention output and the MLP's hidden rows are
   * GEMM inputs: in the weights' dtype where the GEMMs go to cuBLAS and
   * there are several rows (the prefill), so they run on tensor cores (fp32
   * accumulation), as transformers' bf16 models do; f32 everywhere else
   * (decode's GEMV kernels read f32 rows, and CPUs gain nothing). */
  /* an MoE layer's input stays f32: the experts' kernels gather its rows (ops_moe.c) */
  /* a batched step where every row has its logits is decode (a token per
   * sequence): f32 as one sequence's decode up to DECODE_F32_ROWS rows (the
   * GEMV kernel reads each weight once for up to 8 rows, gemv_gpu.h); more
   * rows go to tensor cores like a prompt (issue 44: batch 32 through the
   * GEMV re-read every weight from L2 once per 8 rows: 98.7 ms a step of a
   * 7 GB model on the H100, 1.55x batch 1's tokens/s) */
  const int act_rows = batched && n_logits == T && T <= DECODE_F32_ROWS ? 1 : T;
  const ot_dtype adt = l->ex ? OT_F32 : ot_decoder_act_dtype(m, act_rows, ot_tensor_dtype(l->L[0].wq));
  OT_TRY(ot_lm_step_tensor(st, ctx, "x", adt, 2, sTD, &x));           /* normed [T, D] */
  OT_TRY(ot_lm_step_tensor(st, ctx, "q", OT_F32, 2, sTQ, &q));        /* [T, H*hd] */
  OT_TRY(ot_lm_step_tensor(st, ctx, "k", OT_F32, 2, sTK, &k));        /* [T, KV*hd] */
  OT_TRY(ot_lm_step_tensor(st, ctx, "v", OT_F32, 2, sTK, &v));
  OT_TRY(ot_lm_step_tensor(st, ctx, "att", adt, 2, sTQ, &att));       /* [T, H*hd], o_proj's input */
  ot_tensor *rl = NULL, *work = NULL, *sh = NULL, *sg = NULL;
  if (l->ex) { /* MoE: the router's logits, the experts' scratch; qwen2_moe: the shared expert's out and gate */
    int64_t sTE[2] = {T, c->n_experts}, sW[1] = {ot_experts_work_elems(l->ex, T)}, sT1[2] = {T, 1};
    F = c->shared_intermediate;
    sTF[1] = F;
    OT_TRY(ot_lm_step_tensor(st, ctx, "router_logits", OT_F32, 2, sTE, &rl));
    OT_TRY(ot_lm_step_tensor(st, ctx, "moe_work", OT_F32, 1, sW, &work));
    if (F) OT_TRY(ot_lm_step_tensor(st, ctx, "shared", OT_F32, 2, sTD, &sh));
    if (F) OT_TRY(ot_lm_step_tensor(st, ctx, "shared_gate", OT_F32, 2, sT1, &sg));
  }
  g = u = NULL;
  if (F) OT_TRY(ot_lm_step_tensor(st, ctx, "gate", adt, 2, sTF, &g)); /* [T, F] */
  if (F) OT_TRY(ot_lm_step_tensor(st, ctx, "up", adt, 2, sTF, &u));
  OT_TRY(ot_tensor_reshape(q, 3, sQ3, &q3));
  OT_TRY(ot_lm_step_own(st, q3));
  OT_TRY(ot_tensor_reshape(k, 3, sK3, &k3));
  OT_TRY(ot_lm_step_own(st, k3));
  OT_TRY(ot_tensor_reshape(v, 3, sK3, &v3));
  OT_TRY(ot_lm_step_own(st, v3));
  OT_TRY(ot_tensor_reshape(att, 3, sQ3, &att3));
  OT_TRY(ot_lm_step_own(st, att3));

  const float eps = (float)c->norm_eps;
  const ot_rope rope = ot_hf_config_rope(c);
  OT_TRY(ot_op_embedding(p, h, l->embed, st->ids));
  if (c->scale_embeddings) OT_TRY(ot_op_scale(p, h, h, sqrtf((float)D))); /* gemma: HF's normalizer, in fp32 */
  for (int64_t i = 0; i < c->num_layers; i++) {
    layer *y = &l->L[i];
    OT_TRY(ot_op_rmsnorm(p, x, h, y->ln1, eps));
    ot_tensor *qkv[3] = {q, k, v}, *wqkv[3] = {y->wq, y->wk, y->wv};
    OT_TRY(ot_op_matmul_multi(p, 3, qkv, x, wqkv));
    if (y->bq) { /* qwen2: broadcast over the rows */
      OT_TRY(ot_op_add(p, q, q, y->bq));
      OT_TRY(ot_op_add(p, k, k, y->bk));
      OT_TRY(ot_op_add(p, v, v, y->bv));
    }
    if (batched)
      OT_TRY(ot_op_rope_attention_rows(p, att3, q3, k3, v3, l->kv.k[i], l->kv.v[i], st->rows, rope, c->sliding_window));
    else
      OT_TRY(ot_op_rope_attention_window(p, att3, q3, k3, v3, l->kv.k[i], l->kv.v[i], pos, rope, c->sliding_window));
    OT_TRY(ot_op_matmul(p, h, att, y->wo, 1, 1));
    OT_TRY(ot_op_rmsnorm(p, x, h, y->ln2, eps));
    if (l->ex) { /* h += the chosen experts; qwen2_moe: h += sigmoid(x Wsg^T) * shared(x) */
      OT_TRY(ot_op_matmul(p, rl, x, y->router, 1, 0));
      OT_TRY(ot_op_moe(p, h, x, rl, l->ex, (int)i, work));
      if (!F) continue;
      OT_TRY(ot_op_matmul_swiglu(p, g, u, x, y->wg, y->wu));
      OT_TRY(ot_op_matmul(p, sh, g, y->wd, 1, 0));
      OT_TRY(ot_op_matmul(p, sg, x, y->wsg, 1, 0));
      OT_TRY(ot_op_sigmoid_gate_add(p, h, sh, sg));
      continue;
    }
    if (c->act == OT_ACT_GELU_TANH) { /* gemma: g = gelu_tanh(x Wg^T) * (x Wu^T) */
      OT_TRY(ot_op_matmul(p, g, x, y->wg, 1, 0));
      OT_TRY(ot_op_matmul(p, u, x, y->wu, 1, 0));
      OT_TRY(ot_op_gelu(p, g, g));
      OT_TRY(ot_op_mul(p, g, g, u));
    } else {
      OT_TRY(ot_op_matmul_swiglu(p, g, u, x, y->wg, y->wu)); /* g = silu(x Wg^T) * (x Wu^T); u scratch */
    }
    OT_TRY(ot_op_matmul(p, h, g, y->wd, 1, 1));
  }
  /* Only the rows whose logits are wanted go through the final norm and head. */
  ot_tensor *hl, *xl;
  if (batched) OT_TRY(ot_decoder_batch_head(m, st, n_logits, h, x, &hl, &xl));
  else OT_TRY(ot_decoder_step_head(m, st, all_logits, h, x, &hl, &xl));
  OT_TRY(ot_op_rmsnorm(p, xl, hl, l->norm, eps));
  OT_TRY(ot_op_matmul(p, st->logits, xl, l->lm_head, 1, 0));
  return ot_decoder_step_end(&l->kv, st);
}

static ot_status build(ot_lm *m, int T, int all_logits, ot_lm_step *st) { return record(m, T, all_logits, -1, st); }

static ot_status build_batch(ot_lm *m, int T, int n_logits, ot_lm_step *st) {
  llama *l = m->impl;
  if (l->cfg.rope_type == OT_ROPE_DYNAMIC)
    return ot_fail(OT_ERR_UNSUPPORTED, "llama: this model's dynamic RoPE changes its frequencies with each "
                   "sequence's length; batched generation is not implemented for it (generate one sequence at a "
                   "time: --batch 1)");
  if (n_logits < 1 || n_logits > T)
    return ot_fail(OT_ERR_INVALID_ARG, "llama: a batched step of %d rows with %d rows of logits", T, n_logits);
  return record(m, T, 0, n_logits, st);
}

/* The largest window of experts the budget leaves room for. The dense
 * part (attention, norms, routers, embeddings, caches, activations: every
 * storage of a step but the window) is worth more on the device than
 * experts are (each of its bytes is read every token; an expert's only
 * when it is chosen), so it gets the budget first: when it fits whole, the
 * window takes what is left; when it does not, the dense part streams and
 * the window gets two slots (one computing while the next fills) if the
 * smallest plan leaves room for them, else one. Measured on 1-slot steps
 * of the prompt and of decode (the larger of each figure). */
static ot_status llama_fit(ot_lm *m, uint64_t budget, int n_prompt) {
  llama *l = m->impl;
  if (!l->ex) return OT_OK;
  if (ot_experts_slots(l->ex) && budget == l->fit_budget && n_prompt == l->fit_prompt && m->n_slots == l->fit_slots)
    return OT_OK;
  const int all = (int)(l->cfg.num_layers * l->cfg.n_experts);
  const uint64_t slot = ot_experts_slot_bytes(l->ex);
  int want = 1;
  if (budget > 1) {
    if (ot_experts_slots(l->ex) != 1) ot_lm_release_device(m);
    OT_TRY(ot_experts_set_slots(l->ex, 1));
    uint64_t dense = 0, floor1 = 0;
    const int T[2] = {n_prompt > 0 ? n_prompt : 1, 1};
    for (int i = 0; i < 2; i++) {
      ot_lm_step st = {0};
      uint64_t total = 0, min = 0;
      /* a batched generation (m->n_slots): its packed prompt step of n_prompt rows and its decode step */
      const int rows = m->n_slots ? (i ? (int)m->n_slots : T[0]) : T[i];
      ot_status s = m->n_slots ? build_batch(m, rows, i || rows < m->n_slots ? rows : (int)m->n_slots, &st)
                               : build(m, T[i], 0, &st);
      if (s == OT_OK) s = ot_sched_total_bytes(st.prog, &total);
      if (s == OT_OK) s = ot_sched_min_budget(st.prog, &min, NULL);
      ot_lm_step_destroy(&st);
      if (s != OT_OK) return s;
      dense = total - slot > dense ? total - slot : dense;
      floor1 = min > floor1 ? min : floor1;
    }
    if (budget >= dense + 2 * slot) want = (int)((budget - dense) / slot < (uint64_t)all ? (budget - dense) / slot : all);
    else if (budget >= floor1 + slot) want = 2;
  }
  if (want != ot_experts_slots(l->ex)) ot_lm_release_device(m); /* its plan refers to the old window */
  OT_TRY(ot_experts_set_slots(l->ex, want));
  l->fit_budget = budget;
  l->fit_prompt = n_prompt;
  l->fit_slots = m->n_slots;
  return OT_OK;
}

static const ot_lm_vtable llama_vt = {"llama", build, llama_destroy, llama_fit, build_batch};

/* w[j] = 1 + w[j] for an f32 norm weight of n elements. */
static void plus_one(ot_tensor *t, int64_t n) {
  float *d = ot_tensor_data(t);
  for (int64_t j = 0; j < n; j++) d[j] += 1.0f;
}

/* The experts object of an MoE config, with a window of one expert until
 * llama_fit sizes it. q8b needs whole blocks along both expert widths (the
 * down projection's rows are intermediate wide); else the experts are f32. */
static ot_status make_experts(ot_lm *m, llama *l, ot_dtype wt) {
  const ot_hf_config *c = &l->cfg;
  ot_dtype xt = wt;
  if (ot_dtype_block(wt) && (c->hidden_size % 32 || c->moe_intermediate % 32)) xt = OT_F32;
  const ot_experts_shape sh = {.n_layers = (int)c->num_layers, .n_experts = (int)c->n_experts, .top_k = (int)c->top_k,
                               .normalize = c->norm_topk, .hidden = c->hidden_size,
                               .intermediate = c->moe_intermediate, .dtype = xt};
  OT_TRY(ot_experts_create(l->w.ctx, &sh, &l->ex));
  m->experts = l->ex;
  return ot_experts_set_slots(l->ex, 1);
}

/* One MoE layer's MLP weights, by the hub's names: mixtral's
 * block_sparse_moe.{gate, experts.E.w1 (gate), w3 (up), w2 (down)};
 * qwen2_moe's mlp.{gate, experts.E.{gate,up,down}_proj, shared_expert.*,
 * shared_expert_gate}. */
static ot_status add_experts(llama *l, layer *y, int i) {
  const ot_hf_config *c = &l->cfg;
  ot_wset *w = &l->w;
  const int mixtral = !strcmp(c->model_type, "mixtral");
  const char *mlp = mixtral ? "block_sparse_moe" : "mlp";
  const ot_dtype xt = ot_experts_dtype(l->ex);
  const int64_t D = c->hidden_size, Fm = c->moe_intermediate, Fs = c->shared_intermediate;
  const int64_t sED[2] = {c->n_experts, D}, sFD[2] = {Fm, D}, sDF[2] = {D, Fm};
  const float s_in = 1.0f / sqrtf((float)D), s_ff = 1.0f / sqrtf((float)Fm);
  /* the router in the experts' dtype unless q8b (its rows are few and read once) */
  ot_status s = ot_wset_add(w, ot_dtype_block(xt) ? OT_BF16 : xt, 2, sED, s_in, &y->router, "model.layers.%d.%s.gate.weight",
                            i, mlp);
  static const char *const mx[3] = {"w1", "w3", "w2"}, *const qw[3] = {"gate_proj", "up_proj", "down_proj"};
  for (int e = 0; s == OT_OK && e < c->n_experts; e++) {
    ot_tensor *t[3] = {NULL, NULL, NULL};
    for (int k = 0; s == OT_OK && k < 3; k++)
      s = ot_wset_add(w, xt, 2, k < 2 ? sFD : sDF, k < 2 ? s_in : s_ff, &t[k], "model.layers.%d.%s.experts.%d.%s.weight",
                      i, mlp, e, (mixtral ? mx : qw)[k]);
    if (s == OT_OK) s = ot_experts_set(l->ex, i, e, t[0], t[1], t[2]);
  }
  if (s != OT_OK || !Fs) return s;
  const ot_dtype wt = ot_tensor_dtype(y->wq);
  const int64_t sSD[2] = {Fs, D}, sDS[2] = {D, Fs}, s1D[2] = {1, D};
  s = ot_wset_add(w, wt, 2, sSD, s_in, &y->wg, "model.layers.%d.mlp.shared_expert.gate_proj.weight", i);
  if (s == OT_OK) s = ot_wset_add(w, wt, 2, sSD, s_in, &y->wu, "model.layers.%d.mlp.shared_expert.up_proj.weight", i);
  if (s == OT_OK)
    s = ot_wset_add(w, wt, 2, sDS, 1.0f / sqrtf((float)Fs), &y->wd, "model.layers.%d.mlp.shared_expert.down_proj.weight", i);
  if (s == OT_OK)
    s = ot_wset_add(w, ot_dtype_block(wt) ? OT_BF16 : wt, 2, s1D, s_in, &y->wsg, "model.layers.%d.mlp.shared_expert_gate.weight", i);
  return s;
}

/* Loads (ck != NULL) or synthesises (seed) the weights. */
static ot_status make(ot_ctx *ctx, const ot_hf_config *cfg, const ot_ckpt *ck, ot_dtype wdtype, uint64_t seed,
                      int dry, ot_progress_fn progress, void *user, ot_lm **out) {
  *out = NULL;
  char label[512];
  ot_model_config_label(label, sizeof label, ck);
  /* every size in range and every product below addressable, whoever filled cfg in */
  OT_TRY(ot_hf_config_check(cfg, label));
  llama *l = calloc(1, sizeof *l);
  layer *L = calloc((size_t)cfg->num_layers, sizeof *L);
  ot_lm *m = l && L ? ot_model_shell(ctx, &llama_vt, l, cfg) : NULL;
  if (!m) {
    free(l);
    free(L);
    return ot_set_error(OT_ERR_OUT_OF_MEMORY, "llama: no host memory for the model");
  }
  l->cfg = *cfg;
  l->L = L;
  l->w = (ot_wset){.ctx = ctx, .ck = ck, .seed = seed, .progress = progress, .user = user, .dry = dry};

  int64_t D = cfg->hidden_size, H = cfg->num_heads, KV = cfg->num_kv_heads, hd = cfg->head_dim;
  int64_t F = cfg->intermediate_size, V = cfg->vocab_size;
  ot_wset *w = &l->w;
  ot_dtype wt = ot_wset_matmul_dtype(w, wdtype, cfg->fused_proj ? "model.layers.0.self_attn.qkv_proj.weight"
                                                                  : "model.layers.0.self_attn.q_proj.weight");
  /* The embedding table is read by rows: q8b would need a dequantising
   * lookup; keep it in bf16 then (or f32 when that is what was asked). */
  ot_dtype et = ot_dtype_block(wt) ? OT_BF16 : wt; /* OT_DTYPE_KEEP (a GGUF file): its own type, blocks too */
  /* bytes of the model (every matrix in wt, about a byte per q8b element, an upper bound for q4b),
   * for progress and for the host-memory check before anything is made */
  int ovf = 0;
  const int64_t wb = ot_dtype_block(wt) ? 1 : (int64_t)ot_dtype_bytes(wt, 1), eb = (int64_t)ot_dtype_bytes(et, 1);
  int64_t mlp = ot_sz_mul3(&ovf, 3, F, D);
  if (cfg->n_experts) /* the experts and the router; qwen2_moe: the shared expert and its gate */
    mlp = ot_sz_add(&ovf, ot_sz_mul(&ovf, cfg->n_experts, ot_sz_add(&ovf, ot_sz_mul3(&ovf, 3, cfg->moe_intermediate, D), D)),
                    ot_sz_add(&ovf, ot_sz_mul3(&ovf, 3, cfg->shared_intermediate, D), cfg->shared_intermediate ? D : 0));
  int64_t per_layer = ot_sz_add(&ovf, ot_sz_mul3(&ovf, 2 * H, hd, D),
                                ot_sz_add(&ovf, ot_sz_mul3(&ovf, 2 * KV, hd, D), mlp));
  int64_t mats = ot_sz_add(&ovf, ot_sz_mul(&ovf, cfg->num_layers, per_layer),
                           cfg->tie_word_embeddings ? 0 : ot_sz_mul(&ovf, V, D));
  int64_t vecs = ot_sz_mul(&ovf, ot_sz_add(&ovf, ot_sz_mul(&ovf, 2, cfg->num_layers), 1), D); /* norms, f32 */
  if (cfg->qkv_bias) vecs = ot_sz_add(&ovf, vecs, ot_sz_mul3(&ovf, cfg->num_layers, H + 2 * KV, hd)); /* biases */
  uint64_t total = (uint64_t)ot_sz_add(&ovf, ot_sz_add(&ovf, ot_sz_mul(&ovf, wb, mats), ot_sz_mul3(&ovf, eb, V, D)),
                                       ot_sz_mul(&ovf, 4, vecs));
  if (wt == OT_DTYPE_KEEP) total = ot_wset_ckpt_bytes(w); /* types by tensor: what the file holds */
  w->total = total;
  ot_status s = ovf ? ot_set_error(OT_ERR_INVALID_ARG, "%s: the weights' byte count overflows", label) : OT_OK;
  if (s == OT_OK && !dry) s = ot_model_check_host_memory(label, total, "the weights", OT_MODEL_WEIGHTS_TODO);
  if (s != OT_OK) {
    ot_lm_destroy(m);
    return s;
  }
  float s_in = 1.0f / sqrtf((float)D), s_ff = 1.0f / sqrtf((float)F);

  int64_t sVD[2] = {V, D}, sD[1] = {D}, sQD[2] = {H * hd, D}, sKD[2] = {KV * hd, D}, sDQ[2] = {D, H * hd};
  int64_t sFD[2] = {F, D}, sDF[2] = {D, F};
  if (cfg->n_experts) s = make_experts(m, l, wt);
  if (s == OT_OK) s = ot_wset_add(w, et, 2, sVD, 1.0f, &l->embed, "model.embed_tokens.weight");
  for (int64_t i = 0; s == OT_OK && i < cfg->num_layers; i++) {
    layer *y = &L[i];
    long long li = (long long)i;
    if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, sD, -0.1f, &y->ln1, "model.layers.%lld.input_layernorm.weight", li);
    if (s == OT_OK && cfg->fused_proj) {
      int64_t sQKV[2] = {(H + 2 * KV) * hd, D};
      s = ot_wset_add(w, wt, 2, sQKV, s_in, &y->wqkv, "model.layers.%lld.self_attn.qkv_proj.weight", li);
      const int64_t at[3] = {0, H * hd, (H + KV) * hd}, len[3] = {H * hd, KV * hd, KV * hd};
      ot_tensor **to[3] = {&y->wq, &y->wk, &y->wv};
      for (int j = 0; s == OT_OK && j < 3; j++) {
        s = ot_tensor_slice(y->wqkv, 0, at[j], len[j], to[j]);
        if (s == OT_OK) s = ot_tlist_keep(&l->views, *to[j]);
      }
    } else {
      if (s == OT_OK) s = ot_wset_add(w, wt, 2, sQD, s_in, &y->wq, "model.layers.%lld.self_attn.q_proj.weight", li);
      if (s == OT_OK) s = ot_wset_add(w, wt, 2, sKD, s_in, &y->wk, "model.layers.%lld.self_attn.k_proj.weight", li);
      if (s == OT_OK) s = ot_wset_add(w, wt, 2, sKD, s_in, &y->wv, "model.layers.%lld.self_attn.v_proj.weight", li);
    }
    if (s == OT_OK && cfg->qkv_bias) {
      int64_t sQ[1] = {H * hd}, sK[1] = {KV * hd};
      s = ot_wset_add(w, OT_F32, 1, sQ, 0.1f, &y->bq, "model.layers.%lld.self_attn.q_proj.bias", li);
      if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, sK, 0.1f, &y->bk, "model.layers.%lld.self_attn.k_proj.bias", li);
      if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, sK, 0.1f, &y->bv, "model.layers.%lld.self_attn.v_proj.bias", li);
    }
    if (s == OT_OK) s = ot_wset_add(w, wt, 2, sDQ, s_in, &y->wo, "model.layers.%lld.self_attn.o_proj.weight", li);
    if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, sD, -0.1f, &y->ln2, "model.layers.%lld.post_attention_layernorm.weight", li);
    if (s == OT_OK && l->ex) {
      s = add_experts(l, y, (int)i);
      continue;
    }
    if (s == OT_OK && cfg->fused_proj) { /* rows [0, F) gate, [F, 2F) up, as transformers chunks them */
      int64_t s2FD[2] = {2 * F, D};
      s = ot_wset_add(w, wt, 2, s2FD, s_in, &y->wgu, "model.layers.%lld.mlp.gate_up_proj.weight", li);
      if (s == OT_OK) s = ot_tensor_slice(y->wgu, 0, 0, F, &y->wg);
      if (s == OT_OK) s = ot_tlist_keep(&l->views, y->wg);
      if (s == OT_OK) s = ot_tensor_slice(y->wgu, 0, F, F, &y->wu);
      if (s == OT_OK) s = ot_tlist_keep(&l->views, y->wu);
    } else {
      if (s == OT_OK) s = ot_wset_add(w, wt, 2, sFD, s_in, &y->wg, "model.layers.%lld.mlp.gate_proj.weight", li);
      if (s == OT_OK) s = ot_wset_add(w, wt, 2, sFD, s_in, &y->wu, "model.layers.%lld.mlp.up_proj.weight", li);
    }
    if (s == OT_OK) s = ot_wset_add(w, wt, 2, sDF, s_ff, &y->wd, "model.layers.%lld.mlp.down_proj.weight", li);
  }
  if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, sD, -0.1f, &l->norm, "model.norm.weight");
  /* gemma's RMSNorm multiplies by (1 + w), computed in fp32 as transformers
   * does: folded into the loaded weights once */
  if (s == OT_OK && cfg->norm_plus_one && !dry) {
    for (int64_t i = 0; i < cfg->num_layers; i++) {
      plus_one(L[i].ln1, D);
      plus_one(L[i].ln2, D);
    }
    plus_one(l->norm, D);
  }
  if (s == OT_OK) {
    if (cfg->tie_word_embeddings) l->lm_head = l->embed;
    else s = ot_wset_add(w, wt, 2, sVD, s_in, &l->lm_head, "lm_head.weight");
  }
  return ot_model_finish(m, w->bytes, w->t.n, s, out);
}

ot_status ot_llama_load(ot_ctx *ctx, const ot_hf_config *cfg, const ot_ckpt *ck, ot_dtype wdtype,
                        ot_progress_fn progress, void *user, ot_lm **out) {
  if (cfg->arch != OT_ARCH_LLAMA)
    return ot_set_error(OT_ERR_INVALID_ARG, "llama: config is for '%s', not llama", ot_arch_name(cfg->arch));
  /* every tensor checked before the first byte is read */
  ot_lm *m;
  OT_TRY(make(ctx, cfg, ck, wdtype, 0, 1, NULL, NULL, &m));
  ot_lm_destroy(m);
  return make(ctx, cfg, ck, wdtype, 0, 0, progress, user, out);
}

ot_status ot_llama_shapes(ot_ctx *ctx, const ot_hf_config *cfg, const ot_ckpt *ck, ot_dtype wdtype, ot_lm **out) {
  return make(ctx, cfg, ck, wdtype, 0, 1, NULL, NULL, out);
}

ot_status ot_llama_synthetic(ot_ctx *ctx, const ot_hf_config *cfg, ot_dtype wdtype, uint64_t seed,
                             ot_progress_fn progress, void *user, ot_lm **out) {
  return make(ctx, cfg, NULL, wdtype, seed, 0, progress, user, out);
}

void ot_llama_synthetic_config(ot_hf_config *c, int64_t hidden, int64_t intermediate, int64_t heads, int64_t kv_heads,
                               int64_t vocab, int64_t layers) {
  memset(c, 0, sizeof *c);
  c->arch = OT_ARCH_LLAMA;
  strcpy(c->model_type, "llama");
  strcpy(c->architecture, "LlamaForCausalLM (synthetic)");
  c->hidden_size = hidden;
  c->intermediate_size = intermediate;
  c->num_heads = heads;
  c->num_kv_heads = kv_heads;
  c->head_dim = heads > 0 ? hidden / heads : 0;
  c->vocab_size = vocab;
  c->num_layers = layers;
  c->max_position_embeddings = 4096;
  c->norm_eps = 1e-5;
  c->rope_theta = 10000;
  c->act = OT_ACT_SILU;
  c->bos_token_id = -1;
}
