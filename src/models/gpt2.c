/* gpt2.c — GPT-2 inference (GPT2LMHeadModel) on omptensor's public API:
 * LayerNorm, learned positions, the fused c_attn projection, GELU (tanh
 * form, "gelu_new"), lm_head tied to the token embedding (or its own
 * lm_head.weight [vocab, n_embd] with tie_word_embeddings false).
 *
 * GPT-2 stores its projections as Conv1D weights [in, out] (y = x W + b),
 * not Linear [out, in]: its matmuls are not transposed. c_attn [D, 3D] is
 * read as three column slices (q, k, v), views of one weight storage.
 *
 *   h = wte[ids] + wpe[pos ..]                      // [T, D]
 *   for each layer:
 *     x = ln_1(h) ; q,k,v = x W_attn[:, 0:D|D:2D|2D:3D] + b
 *     h += attention(q, cache) W_proj + b
 *     x = ln_2(h) ; h += gelu(x W_fc + b) W_proj2 + b
 *   logits = ln_f(h) wte^T                          // or lm_head^T, untied */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/checked.h"
#include "omptensor/ops.h"
#include "omptensor/models.h"
#include "models/decoder.h"
#include "omptensor/weightset.h"

typedef struct layer {
  ot_tensor *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *fc2_w, *fc2_b;
  ot_tensor *wq, *wk, *wv, *bq, *bk, *bv; /* column views of attn_w / slices of attn_b */
} layer;

typedef struct gpt2 {
  ot_hf_config cfg;
  ot_wset w;
  ot_tensor *wte, *wpe, *lnf_w, *lnf_b, *lm_head; /* lm_head == wte when tied */
  layer *L;
  ot_tlist views; /* the q, k, v slices of c_attn and its bias, beside the weights */
  ot_kvcache kv;
} gpt2;

static void gpt2_destroy(ot_lm *m) {
  gpt2 *g = m->impl;
  if (g) {
    ot_kvcache_release(&g->kv);
    ot_tlist_release(&g->views);
    ot_wset_destroy(&g->w);
    free(g->L);
    free(g);
  }
  free(m);
}

static ot_status build(ot_lm *m, int T, int all_logits, ot_lm_step *st) {
  gpt2 *g = m->impl;
  const ot_hf_config *c = &g->cfg;
  ot_ctx *ctx = m->ctx;
  int64_t D = c->hidden_size, H = c->num_heads, hd = c->head_dim, F = c->intermediate_size;
  OT_TRY(ot_decoder_step_begin(m, &g->kv, c->num_layers, H, hd, T, st));
  ot_program *p = st->prog;
  int pos = st->pos_slot;

  ot_tensor *h, *x, *q, *k, *v, *att, *f, *q3, *k3, *v3, *att3;
  int64_t sT[1] = {T}, sTD[2] = {T, D}, sTF[2] = {T, F}, s3[3] = {T, H, hd};
  OT_TRY(ot_lm_step_tensor(st, ctx, "ids", OT_I32, 1, sT, &st->ids));
  OT_TRY(ot_lm_step_tensor(st, ctx, "h", OT_F32, 2, sTD, &h));
  OT_TRY(ot_lm_step_tensor(st, ctx, "x", OT_F32, 2, sTD, &x));
  OT_TRY(ot_lm_step_tensor(st, ctx, "q", OT_F32, 2, sTD, &q));
  OT_TRY(ot_lm_step_tensor(st, ctx, "k", OT_F32, 2, sTD, &k));
  OT_TRY(ot_lm_step_tensor(st, ctx, "v", OT_F32, 2, sTD, &v));
  OT_TRY(ot_lm_step_tensor(st, ctx, "att", OT_F32, 2, sTD, &att));
  OT_TRY(ot_lm_step_tensor(st, ctx, "fc", OT_F32, 2, sTF, &f));
  ot_tensor *src[4] = {q, k, v, att}, **dst[4] = {&q3, &k3, &v3, &att3};
  for (int i = 0; i < 4; i++) {
    OT_TRY(ot_tensor_reshape(src[i], 3, s3, dst[i]));
    OT_TRY(ot_lm_step_own(st, *dst[i]));
  }

  float eps = (float)c->norm_eps;
  OT_TRY(ot_op_embedding(p, h, g->wte, st->ids));
  OT_TRY(ot_op_add_positions(p, h, g->wpe, pos));
  for (int64_t i = 0; i < c->num_layers; i++) {
    layer *y = &g->L[i];
    OT_TRY(ot_op_layernorm(p, x, h, y->ln1_w, y->ln1_b, eps));
    OT_TRY(ot_op_matmul(p, q, x, y->wq, 0, 0));
    OT_TRY(ot_op_add(p, q, q, y->bq));
    OT_TRY(ot_op_matmul(p, k, x, y->wk, 0, 0));
    OT_TRY(ot_op_add(p, k, k, y->bk));
    OT_TRY(ot_op_matmul(p, v, x, y->wv, 0, 0));
    OT_TRY(ot_op_add(p, v, v, y->bv));
    OT_TRY(ot_op_attention(p, att3, q3, k3, v3, g->kv.k[i], g->kv.v[i], pos));
    OT_TRY(ot_op_matmul(p, h, att, y->proj_w, 0, 1));
    OT_TRY(ot_op_add(p, h, h, y->proj_b));
    OT_TRY(ot_op_layernorm(p, x, h, y->ln2_w, y->ln2_b, eps));
    OT_TRY(ot_op_matmul(p, f, x, y->fc_w, 0, 0));
    OT_TRY(ot_op_add(p, f, f, y->fc_b));
    OT_TRY(ot_op_gelu(p, f, f));
    OT_TRY(ot_op_matmul(p, h, f, y->fc2_w, 0, 1));
    OT_TRY(ot_op_add(p, h, h, y->fc2_b));
  }
  ot_tensor *hl, *xl;
  OT_TRY(ot_decoder_step_head(m, st, all_logits, h, x, &hl, &xl));
  OT_TRY(ot_op_layernorm(p, xl, hl, g->lnf_w, g->lnf_b, eps));
  OT_TRY(ot_op_matmul(p, st->logits, xl, g->lm_head, 1, 0)); /* [V, D] as a Linear: wte (tied) or lm_head */
  return ot_decoder_step_end(&g->kv, st);
}

static const ot_lm_vtable gpt2_vt = {"gpt2", build, gpt2_destroy, NULL, NULL}; /* nothing to fit; one sequence at a time */

static ot_status make(ot_ctx *ctx, const ot_hf_config *cfg, const ot_ckpt *ck, ot_dtype wdtype, int dry,
                      ot_progress_fn progress, void *user, ot_lm **out) {
  *out = NULL;
  if (cfg->arch != OT_ARCH_GPT2)
    return ot_set_error(OT_ERR_INVALID_ARG, "gpt2: config is for '%s', not gpt2", ot_arch_name(cfg->arch));
  char label[512];
  ot_model_config_label(label, sizeof label, ck);
  /* every size in range and every product below addressable, whoever filled cfg in */
  OT_TRY(ot_hf_config_check(cfg, label));
  gpt2 *g = calloc(1, sizeof *g);
  layer *L = calloc((size_t)cfg->num_layers, sizeof *L);
  ot_lm *m = g && L ? ot_model_shell(ctx, &gpt2_vt, g, cfg) : NULL;
  if (!m) {
    free(g);
    free(L);
    return ot_set_error(OT_ERR_OUT_OF_MEMORY, "gpt2: no host memory for the model");
  }
  g->cfg = *cfg;
  g->L = L;
  g->w = (ot_wset){.ctx = ctx, .ck = ck, .progress = progress, .user = user, .dry = dry};
  ot_wset *w = &g->w;
  int64_t D = cfg->hidden_size, F = cfg->intermediate_size, V = cfg->vocab_size, P = cfg->max_position_embeddings;
  ot_dtype wt = ot_wset_matmul_dtype(w, wdtype, "transformer.h.0.mlp.c_fc.weight");
  /* wte is both the embedding table (rows) and the tied head: no q8b */
  ot_dtype et = ot_dtype_block(wt) ? OT_BF16 : wt;
  /* c_attn is sliced by columns: q8b blocks run along rows of [D, 3D], and a
   * column slice of D would cut them only if D % 32 != 0 */
  ot_dtype at = ot_dtype_block(wt) && D % 32 ? OT_BF16 : wt;
  /* bytes of the model (every matrix in wt, about a byte per q8b element, an upper bound for q4b),
   * for progress and for the host-memory check before anything is made */
  int ovf = 0;
  const int64_t NL = cfg->num_layers, wb = ot_dtype_block(wt) ? 1 : (int64_t)ot_dtype_bytes(wt, 1);
  const int64_t ab = ot_dtype_block(at) ? 1 : (int64_t)ot_dtype_bytes(at, 1), eb = (int64_t)ot_dtype_bytes(et, 1);
  int64_t mats = ot_sz_mul(&ovf, NL, ot_sz_add(&ovf, ot_sz_mul(&ovf, wb, ot_sz_add(&ovf, ot_sz_mul(&ovf, D, D),
                                                                                    ot_sz_mul3(&ovf, 2, D, F))),
                                                ot_sz_mul3(&ovf, ab, 3 * D, D)));
  int64_t vecs = ot_sz_add(&ovf, ot_sz_mul(&ovf, NL, ot_sz_add(&ovf, ot_sz_mul(&ovf, 8, D), F)), ot_sz_mul(&ovf, 2, D));
  uint64_t total = (uint64_t)ot_sz_add(&ovf, ot_sz_add(&ovf, mats, ot_sz_mul3(&ovf, cfg->tie_word_embeddings ? eb : eb + wb, V, D)),
                                       ot_sz_mul(&ovf, 4, ot_sz_add(&ovf, vecs, ot_sz_mul(&ovf, P, D))));
  w->total = total;
  ot_status s = ovf ? ot_set_error(OT_ERR_INVALID_ARG, "%s: the weights' byte count overflows", label) : OT_OK;
  if (s == OT_OK && !dry) s = ot_model_check_host_memory(label, total, "the weights", OT_MODEL_WEIGHTS_TODO);
  if (s != OT_OK) {
    ot_lm_destroy(m);
    return s;
  }

  int64_t sVD[2] = {V, D}, sPD[2] = {P, D}, sD[1] = {D}, sD3[2] = {D, 3 * D}, s3[1] = {3 * D}, sDD[2] = {D, D};
  int64_t sDF[2] = {D, F}, sF[1] = {F}, sFD[2] = {F, D};
  s = ot_wset_add(w, et, 2, sVD, 0.5f, &g->wte, "transformer.wte.weight");
  if (s == OT_OK) s = ot_wset_add(w, OT_F32, 2, sPD, 0.1f, &g->wpe, "transformer.wpe.weight");
  for (int64_t i = 0; s == OT_OK && i < cfg->num_layers; i++) {
    layer *y = &L[i];
    long long li = (long long)i;
    const float sw = 1.0f / sqrtf((float)D);
    if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, sD, -0.1f, &y->ln1_w, "transformer.h.%lld.ln_1.weight", li);
    if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, sD, 0.1f, &y->ln1_b, "transformer.h.%lld.ln_1.bias", li);
    if (s == OT_OK) s = ot_wset_add(w, at, 2, sD3, sw, &y->attn_w, "transformer.h.%lld.attn.c_attn.weight", li);
    if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, s3, 0.1f, &y->attn_b, "transformer.h.%lld.attn.c_attn.bias", li);
    if (s == OT_OK) s = ot_wset_add(w, wt, 2, sDD, sw, &y->proj_w, "transformer.h.%lld.attn.c_proj.weight", li);
    if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, sD, 0.1f, &y->proj_b, "transformer.h.%lld.attn.c_proj.bias", li);
    if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, sD, -0.1f, &y->ln2_w, "transformer.h.%lld.ln_2.weight", li);
    if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, sD, 0.1f, &y->ln2_b, "transformer.h.%lld.ln_2.bias", li);
    if (s == OT_OK) s = ot_wset_add(w, wt, 2, sDF, sw, &y->fc_w, "transformer.h.%lld.mlp.c_fc.weight", li);
    if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, sF, 0.1f, &y->fc_b, "transformer.h.%lld.mlp.c_fc.bias", li);
    if (s == OT_OK) s = ot_wset_add(w, wt, 2, sFD, 1.0f / sqrtf((float)F), &y->fc2_w, "transformer.h.%lld.mlp.c_proj.weight", li);
    if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, sD, 0.1f, &y->fc2_b, "transformer.h.%lld.mlp.c_proj.bias", li);
    /* q, k, v: column slices of c_attn, and slices of its bias */
    ot_tensor **wv[3] = {&y->wq, &y->wk, &y->wv}, **bv[3] = {&y->bq, &y->bk, &y->bv};
    for (int j = 0; s == OT_OK && j < 3; j++) {
      s = ot_tensor_slice(y->attn_w, 1, j * D, D, wv[j]);
      if (s == OT_OK) s = ot_tlist_keep(&g->views, *wv[j]);
      if (s == OT_OK) s = ot_tensor_slice(y->attn_b, 0, j * D, D, bv[j]);
      if (s == OT_OK) s = ot_tlist_keep(&g->views, *bv[j]);
    }
  }
  if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, sD, -0.1f, &g->lnf_w, "transformer.ln_f.weight");
  if (s == OT_OK) s = ot_wset_add(w, OT_F32, 1, sD, 0.1f, &g->lnf_b, "transformer.ln_f.bias");
  if (s == OT_OK) {
    if (cfg->tie_word_embeddings) g->lm_head = g->wte;
    else s = ot_wset_add(w, wt, 2, sVD, 1.0f / sqrtf((float)D), &g->lm_head, "lm_head.weight");
  }
  return ot_model_finish(m, w->bytes, w->t.n, s, out);
}

ot_status ot_gpt2_load(ot_ctx *ctx, const ot_hf_config *cfg, const ot_ckpt *ck, ot_dtype wdtype,
                       ot_progress_fn progress, void *user, ot_lm **out) {
  /* every tensor checked before the first byte is read */
  ot_lm *m;
  OT_TRY(make(ctx, cfg, ck, wdtype, 1, NULL, NULL, &m));
  ot_lm_destroy(m);
  return make(ctx, cfg, ck, wdtype, 0, progress, user, out);
}

ot_status ot_gpt2_shapes(ot_ctx *ctx, const ot_hf_config *cfg, const ot_ckpt *ck, ot_dtype wdtype, ot_lm **out) {
  return make(ctx, cfg, ck, wdtype, 1, NULL, NULL, out);
}
