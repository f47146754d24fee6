/* gpt2_step.c — recording one GPT-2 training step (B sequences of T
 * tokens, rows r = b*T + t; "lp": the GEMMs' activation dtype, f32 or bf16
 * under mixed precision):
 *
 *   h0 = wte[ids] + wpe[0..T)                                    [BT, D] f32
 *   layer l:  x1 = ln_1(h) (lp) ; qkv = x1 W_attn + b_attn        [BT, 3D] lp, q|k|v its column blocks
 *             att = causal_attention(q, k, v) over the batch       lp
 *             hm = (h + b_proj) + att W_proj                       f32 (the GEMM accumulates onto it)
 *             x2 = ln_2(hm) (lp) ; f = x2 W_fc + b_fc ; a = gelu(f) lp
 *             h' = (hm + b_fc2) + a W_fc2                          f32
 *   xf = ln_f(h) (lp); per chunk of rows: logits = xf wte^T (lp), the mean
 *   cross-entropy, its gradient in place, and at once its backward GEMMs
 *   (the [BT, vocab] logits never exist whole);
 *   backward in reverse, op by op; AdamW on every parameter.
 *
 * Residual-stream gradients are f32; a copy in lp feeds the GEMMs that take
 * them. Every activation is its own tensor (none is overwritten in place),
 * so the backward finds the forward's values and the scheduler sees each
 * one die. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "train/gpt2_impl.h"

typedef struct rec {
  ot_gpt2_trainer *g;
  ot_program *p;
  int64_t B, T, D, H, hd, F, V;
  ot_dtype lp;     /* the GEMMs' activations: f32, or bf16 under mixed precision */
  const char *rc;  /* "" or ".rc": suffix of the names of recomputed activations */
  char mb[16];     /* "" or ".mbN": suffix of micro-batch N's (N > 0) */
} rec;

/* A new activation named "name.l" (+ ".rc" when recomputed, + ".mbN" for
 * micro-batch N > 0). A trial recording (shapes_only) wraps no memory: it
 * is planned to see whether it fits, never run, and costs no gigabytes of
 * host memory. */
static ot_status act(rec *r, ot_dtype dt, int ndim, const int64_t *shape, ot_tensor **out, const char *name, int l) {
  ot_gpt2_trainer *g = r->g;
  /* a real one's home is made only if the plan moves it (ot_tensor_create_lazy) */
  return ot_tlist_add(&g->acts, g->ctx, dt, ndim, shape, g->shapes_only ? OT_TLIST_NO_MEMORY : OT_TLIST_LAZY, out,
                      "%s.%d%s%s", name, l, r->rc, r->mb);
}

static ot_status mat(rec *r, ot_dtype dt, int64_t rows, int64_t cols, ot_tensor **out, const char *name, int l) {
  int64_t s[2] = {rows, cols};
  return act(r, dt, 2, s, out, name, l);
}

static ot_status keep(rec *r, ot_status s, ot_tensor *t) { return s == OT_OK ? ot_tlist_keep(&r->g->acts, t) : s; }

/* Rows [r0, r0 + n) of a 2-D tensor, or sequence b of a [BT, ..] one. */
static ot_status rows(rec *r, ot_tensor *t, int64_t r0, int64_t n, ot_tensor **out) {
  ot_tensor *v = NULL;
  OT_TRY(keep(r, ot_tensor_slice(t, 0, r0, n, &v), v));
  *out = v;
  return OT_OK;
}

/* Head block j (0 q, 1 k, 2 v) of qkv [BT, 3D] as [B, T, H, hd] (rows 3D apart). */
static ot_status heads(rec *r, ot_tensor *qkv, int j, ot_tensor **out) {
  ot_tensor *v = NULL, *w = NULL;
  int64_t s4[4] = {r->B, r->T, 3 * r->H, r->hd};
  OT_TRY(keep(r, ot_tensor_reshape(qkv, 4, s4, &v), v));
  OT_TRY(keep(r, ot_tensor_slice(v, 2, j * r->H, r->H, &w), w));
  *out = w;
  return OT_OK;
}

/* [BT, D] as [B, T, H, hd] (contiguous). */
static ot_status split_heads(rec *r, ot_tensor *t, ot_tensor **out) {
  ot_tensor *v = NULL;
  int64_t s4[4] = {r->B, r->T, r->H, r->hd};
  OT_TRY(keep(r, ot_tensor_reshape(t, 4, s4, &v), v));
  *out = v;
  return OT_OK;
}

/* x in the GEMMs' dtype: x itself in f32, else a new lp copy "name.lp". */
static ot_status to_lp(rec *r, ot_tensor *x, ot_tensor **out, const char *name, int l) {
  if (ot_tensor_dtype(x) == r->lp) {
    *out = x;
    return OT_OK;
  }
  OT_TRY(mat(r, r->lp, ot_tensor_dim(x, 0), ot_tensor_dim(x, 1), out, name, l));
  return ot_op_scale(r->p, *out, x, 1.0f);
}

/* y = x W + b (GPT-2's Conv1D) */
static ot_status conv1d(rec *r, ot_tensor *y, ot_tensor *x, ot_gt_param *W, ot_gt_param *b) {
  OT_TRY(ot_op_matmul(r->p, y, x, ot_gt_mm(W), 0, 0));
  return ot_op_add(r->p, y, y, b->w);
}

/* y = (res + b) + x W: the residual and the bias first, then the GEMM
 * accumulates onto them (one pass over y fewer than adding afterwards). */
static ot_status conv1d_res(rec *r, ot_tensor *y, ot_tensor *x, ot_gt_param *W, ot_gt_param *b, ot_tensor *res) {
  OT_TRY(ot_op_add(r->p, y, res, b->w));
  return ot_op_matmul(r->p, y, x, ot_gt_mm(W), 0, 1);
}

/* Its backward: db += sum dy, dW += x^T dy_lp, dx = dy_lp W^T (dx may be
 * NULL); dy_lp is dy in the GEMMs' dtype (dy itself in f32). */
static ot_status conv1d_backward(rec *r, ot_tensor *dx, ot_gt_param *W, ot_gt_param *b, ot_tensor *dy,
                                 ot_tensor *dy_lp, ot_tensor *x) {
  OT_TRY(ot_op_bias_backward(r->p, b->g, dy));
  return ot_op_matmul_backward(r->p, dx, W->g, dy_lp, x, ot_gt_mm(W), 0);
}

typedef struct layer_acts {
  ot_tensor *h, *x1, *qkv, *att, *ws, *hm, *x2, *f, *a; /* ws: attention's per-row log-sum-exp (and D) */
} layer_acts;

/* Causal attention of the B sequences in one op (the flash kernels take
 * [B, T, H, hd] views); ws [B, T, H, 2] keeps each row's log-sum-exp for
 * the backward, which also reads the forward's output. */
static ot_status attention(rec *r, ot_tensor *att, ot_tensor *ws, ot_tensor *qkv) {
  ot_tensor *o, *q, *k, *v;
  OT_TRY(split_heads(r, att, &o));
  OT_TRY(heads(r, qkv, 0, &q));
  OT_TRY(heads(r, qkv, 1, &k));
  OT_TRY(heads(r, qkv, 2, &v));
  return ot_op_causal_attention_train(r->p, o, ws, q, k, v);
}

static ot_status attention_backward(rec *r, ot_tensor *dqkv, ot_tensor *ws, ot_tensor *datt, ot_tensor *att,
                                    ot_tensor *qkv) {
  ot_tensor *dout, *out, *x[3], *dx[3];
  OT_TRY(split_heads(r, datt, &dout));
  OT_TRY(split_heads(r, att, &out));
  for (int j = 0; j < 3; j++) {
    OT_TRY(heads(r, qkv, j, &x[j]));
    OT_TRY(heads(r, dqkv, j, &dx[j]));
  }
  return ot_op_causal_attention_backward(r->p, dx[0], dx[1], dx[2], ws, dout, out, x[0], x[1], x[2]);
}

/* The layer's forward from A->h; h_out NULL: only its inner activations
 * (a checkpointed layer's recomputation). */
static ot_status forward_layer(rec *r, int l, layer_acts *A, ot_tensor **h_out) {
  ot_gpt2_trainer *g = r->g;
  const float eps = (float)g->cfg.norm_eps;
  const int64_t BT = r->B * r->T;
  ot_gt_param *P = ot_gt_layer(g, l, 0);
  OT_TRY(mat(r, r->lp, BT, r->D, &A->x1, "x1", l));
  OT_TRY(ot_op_layernorm(r->p, A->x1, A->h, P[GT_LN1_W].w, P[GT_LN1_B].w, eps));
  OT_TRY(mat(r, r->lp, BT, 3 * r->D, &A->qkv, "qkv", l));
  OT_TRY(conv1d(r, A->qkv, A->x1, &P[GT_ATTN_W], &P[GT_ATTN_B]));
  OT_TRY(mat(r, r->lp, BT, r->D, &A->att, "att", l));
  int64_t sws[4] = {r->B, r->T, r->H, 2};
  OT_TRY(act(r, OT_F32, 4, sws, &A->ws, "attn_ws", l));
  OT_TRY(attention(r, A->att, A->ws, A->qkv));
  OT_TRY(mat(r, OT_F32, BT, r->D, &A->hm, "hm", l));
  OT_TRY(conv1d_res(r, A->hm, A->att, &P[GT_PROJ_W], &P[GT_PROJ_B], A->h));
  OT_TRY(mat(r, r->lp, BT, r->D, &A->x2, "x2", l));
  OT_TRY(ot_op_layernorm(r->p, A->x2, A->hm, P[GT_LN2_W].w, P[GT_LN2_B].w, eps));
  OT_TRY(mat(r, r->lp, BT, r->F, &A->f, "fc", l));
  OT_TRY(conv1d(r, A->f, A->x2, &P[GT_FC_W], &P[GT_FC_B]));
  OT_TRY(mat(r, r->lp, BT, r->F, &A->a, "gelu", l));
  OT_TRY(ot_op_gelu(r->p, A->a, A->f));
  if (!h_out) return OT_OK; /* recomputing for the backward: the output is not needed again */
  OT_TRY(mat(r, OT_F32, BT, r->D, h_out, "h", l + 1));
  return conv1d_res(r, *h_out, A->a, &P[GT_FC2_W], &P[GT_FC2_B], A->hm);
}

/* dh: the gradient of the layer's output; *dh_in gets that of its input. */
static ot_status backward_layer(rec *r, int l, layer_acts *A, ot_tensor *dh, ot_tensor **dh_in) {
  ot_gpt2_trainer *g = r->g;
  const float eps = (float)g->cfg.norm_eps;
  const int64_t BT = r->B * r->T;
  ot_gt_param *P = ot_gt_layer(g, l, 0);
  ot_tensor *dh_lp, *da, *dx2, *dhm, *dhm_lp, *datt, *dqkv, *dx1, *dh0;
  /* h' = hm + gelu(x2 W_fc + b_fc) W_fc2 + b_fc2 */
  OT_TRY(to_lp(r, dh, &dh_lp, "d.h.lp", l + 1));
  OT_TRY(mat(r, r->lp, BT, r->F, &da, "d.gelu", l));
  OT_TRY(conv1d_backward(r, da, &P[GT_FC2_W], &P[GT_FC2_B], dh, dh_lp, A->a));
  OT_TRY(ot_op_gelu_backward(r->p, da, A->f, da));
  OT_TRY(mat(r, OT_F32, BT, r->D, &dx2, "d.x2", l));
  OT_TRY(conv1d_backward(r, dx2, &P[GT_FC_W], &P[GT_FC_B], da, da, A->x2));
  OT_TRY(mat(r, OT_F32, BT, r->D, &dhm, "d.hm", l));
  OT_TRY(ot_op_layernorm_backward(r->p, dhm, P[GT_LN2_W].g, P[GT_LN2_B].g, dx2, A->hm, P[GT_LN2_W].w, eps));
  OT_TRY(ot_op_add(r->p, dhm, dhm, dh));
  /* hm = h + att W_proj + b_proj */
  OT_TRY(to_lp(r, dhm, &dhm_lp, "d.hm.lp", l));
  OT_TRY(mat(r, r->lp, BT, r->D, &datt, "d.att", l));
  OT_TRY(conv1d_backward(r, datt, &P[GT_PROJ_W], &P[GT_PROJ_B], dhm, dhm_lp, A->att));
  OT_TRY(mat(r, r->lp, BT, 3 * r->D, &dqkv, "d.qkv", l));
  OT_TRY(attention_backward(r, dqkv, A->ws, datt, A->att, A->qkv));
  /* qkv = x1 W_attn + b_attn */
  OT_TRY(mat(r, OT_F32, BT, r->D, &dx1, "d.x1", l));
  OT_TRY(conv1d_backward(r, dx1, &P[GT_ATTN_W], &P[GT_ATTN_B], dqkv, dqkv, A->x1));
  OT_TRY(mat(r, OT_F32, BT, r->D, &dh0, "d.h", l));
  OT_TRY(ot_op_layernorm_backward(r->p, dh0, P[GT_LN1_W].g, P[GT_LN1_B].g, dx1, A->h, P[GT_LN1_W].w, eps));
  OT_TRY(ot_op_add(r->p, dh0, dh0, dhm));
  *dh_in = dh0;
  return OT_OK;
}

/* The head and the loss, chunk by chunk of rows: logits = xf wte^T, the
 * chunk's mean cross-entropy into loss[c], its gradient in place (scaled
 * by the chunk's share of the rows and 1/accum: the step's loss is the
 * mean over all rows and micro-batches), then at once dxf's rows and wte's
 * gradient, so each chunk's logits die before the next chunk's exist. */
static ot_status head_and_loss(rec *r, int mb, ot_tensor *xf, ot_tensor *dxf) {
  ot_gpt2_trainer *g = r->g;
  const int64_t BT = r->B * r->T;
  ot_gt_param *wte = &g->P[0];
  for (int64_t c = 0; c < g->n_chunks; c++) {
    const int64_t r0 = c * g->chunk_rows, n = ot_gt_chunk_rows(g, c);
    ot_tensor *xc, *dxc, *tc, *lc, *losses, *logits, *dlogits;
    OT_TRY(rows(r, xf, r0, n, &xc));
    OT_TRY(rows(r, dxf, r0, n, &dxc));
    OT_TRY(rows(r, g->targets[mb], r0, n, &tc));
    OT_TRY(rows(r, g->loss[mb], c, 1, &lc));
    OT_TRY(mat(r, r->lp, n, r->V, &logits, "logits", (int)c));
    OT_TRY(ot_op_matmul(r->p, logits, xc, ot_gt_mm(wte), 1, 0)); /* tied head: wte [V, D] as a Linear */
    /* the loss gradient overwrites the logits unless they are wanted: the
     * two [rows, vocab] tensors are the step's largest */
    dlogits = logits;
    if (g->o.keep_logits) OT_TRY(mat(r, r->lp, n, r->V, &dlogits, "d.logits", (int)c));
    int64_t sn[1] = {n};
    OT_TRY(act(r, OT_F32, 1, sn, &losses, "losses", (int)c));
    /* the mean over every micro-batch of every rank: each gradient carries its share */
    const float share = (float)((double)n / (double)BT / (double)g->o.accum / (double)ot_gt_ranks(g));
    OT_TRY(ot_op_cross_entropy(r->p, lc, losses, dlogits, logits, tc, share));
    if (g->o.precision == OT_F16) OT_TRY(ot_op_loss_scale(r->p, dlogits, g->scale_slot)); /* x 2^k */
    OT_TRY(ot_op_matmul_backward(r->p, dxc, wte->g, dlogits, xc, ot_gt_mm(wte), 1));
    g->logits = logits;
  }
  return OT_OK;
}

/* Data parallel: bucket k's reduction starts after micro-batch mb's last
 * write to it: in every micro-batch (ORDERED: each is a round) or after
 * the last one's (ALLREDUCE: the ranks accumulate locally first). */
static ot_status dp_start(rec *r, int mb, int k) {
  ot_gpt2_trainer *g = r->g;
  if (!g->dp) return OT_OK;
  if (g->reduce == OT_GRAD_ORDERED) return ot_dp_record_start(g->dp, r->p, k, mb);
  return mb == g->o.accum - 1 ? ot_dp_record_start(g->dp, r->p, k, 0) : OT_OK;
}

/* Micro-batch mb: forward, the loss, the gradients zeroed before the first
 * micro-batch's backward (ORDERED data parallel: before each one's, so
 * that each micro-batch's gradient is its own), then the backward, which
 * accumulates. A: [n_layer] scratch for the layer activations. */
static ot_status record_micro_batch(rec *r, int mb, layer_acts *A) {
  ot_gpt2_trainer *g = r->g;
  const ot_hf_config *c = &g->cfg;
  const int64_t BT = r->B * r->T, L = c->num_layers;
  const float eps = (float)c->norm_eps;
  r->mb[0] = '\0';
  if (mb) snprintf(r->mb, sizeof r->mb, ".mb%d", mb);
  int64_t sBT[1] = {BT}, sC[1] = {g->n_chunks};
  OT_TRY(act(r, OT_I32, 1, sBT, &g->ids[mb], "ids", 0));
  OT_TRY(act(r, OT_I32, 1, sBT, &g->targets[mb], "targets", 0));
  OT_TRY(act(r, OT_F32, 1, sC, &g->loss[mb], "loss", 0));
  ot_gt_param *wte = &g->P[0], *wpe = &g->P[1], *lnf_w = &g->P[g->n_params - 2], *lnf_b = &g->P[g->n_params - 1];
  /* forward */
  ot_tensor *h, *xf, *dxf, *dh;
  OT_TRY(mat(r, OT_F32, BT, r->D, &h, "h", 0));
  OT_TRY(ot_op_embedding(r->p, h, wte->w, g->ids[mb]));
  for (int64_t b = 0; b < r->B; b++) {
    ot_tensor *hb;
    OT_TRY(rows(r, h, b * r->T, r->T, &hb));
    OT_TRY(ot_op_add_positions(r->p, hb, wpe->w, g->pos_slot));
  }
  for (int l = 0; l < L; l++) {
    A[l] = (layer_acts){.h = h};
    OT_TRY(forward_layer(r, l, &A[l], &h));
  }
  OT_TRY(mat(r, r->lp, BT, r->D, &xf, "x.f", 0));
  OT_TRY(ot_op_layernorm(r->p, xf, h, lnf_w->w, lnf_b->w, eps));
  /* the gradients start at zero before the first accumulating op */
  const int fresh = mb == 0 || (g->dp && g->reduce == OT_GRAD_ORDERED);
  for (int i = 0; fresh && i < g->n_params; i++) OT_TRY(ot_op_zero(r->p, g->P[i].g));
  OT_TRY(mat(r, OT_F32, BT, r->D, &dxf, "d.x.f", 0));
  OT_TRY(head_and_loss(r, mb, xf, dxf));
  /* backward */
  OT_TRY(mat(r, OT_F32, BT, r->D, &dh, "d.h", (int)L));
  OT_TRY(ot_op_layernorm_backward(r->p, dh, lnf_w->g, lnf_b->g, dxf, h, lnf_w->w, eps));
  OT_TRY(dp_start(r, mb, (int)L + 2));
  for (int l = (int)L - 1; l >= 0; l--) {
    layer_acts *Al = &A[l], R = {.h = A[l].h};
    if (g->recompute[l]) { /* the checkpoint h is all that was kept of this layer */
      r->rc = ".rc";
      OT_TRY(forward_layer(r, l, &R, NULL));
      r->rc = "";
      Al = &R;
    }
    OT_TRY(backward_layer(r, l, Al, dh, &dh));
    OT_TRY(dp_start(r, mb, 2 + l));
  }
  OT_TRY(ot_op_embedding_backward(r->p, wte->g, dh, g->ids[mb]));
  OT_TRY(dp_start(r, mb, GT_GROUP_WTE));
  ot_tensor *dh3 = NULL;
  int64_t s3[3] = {r->B, r->T, r->D};
  OT_TRY(keep(r, ot_tensor_reshape(dh, 3, s3, &dh3), dh3));
  OT_TRY(ot_op_positions_backward(r->p, wpe->g, dh3, g->pos_slot));
  OT_TRY(dp_start(r, mb, GT_GROUP_WPE));
  OT_TRY(ot_program_mark_input(r->p, g->ids[mb]));
  OT_TRY(ot_program_mark_input(r->p, g->targets[mb]));
  return ot_program_mark_output(r->p, g->loss[mb]);
}

ot_status ot_gt_record(ot_gpt2_trainer *g) {
  const ot_hf_config *c = &g->cfg;
  rec r = {.g = g, .B = g->o.B, .T = g->o.T, .D = c->hidden_size, .H = c->num_heads, .hd = c->head_dim,
           .F = c->intermediate_size, .V = c->vocab_size, .lp = g->o.precision, .rc = ""};
  OT_TRY(ot_program_create(g->ctx, &g->prog));
  r.p = g->prog;
  OT_TRY(ot_program_scalar_create(r.p, "pos", &g->pos_slot));
  OT_TRY(ot_program_scalar_create(r.p, "step", &g->step_slot));
  const int f16 = g->o.precision == OT_F16;
  if (f16) OT_TRY(ot_program_scalar_create(r.p, "loss_scale_log2", &g->scale_slot));
  layer_acts *A = calloc((size_t)c->num_layers, sizeof *A);
  if (!A) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "gpt2_train: no host memory");
  ot_status s = OT_OK;
  for (int mb = 0; s == OT_OK && mb < g->o.accum; mb++) s = record_micro_batch(&r, mb, A);
  free(A);
  /* update: one multi-tensor AdamW per group (wte, wpe, each layer's 12,
   * ln_f's 2), so a group's tensors are on the device together (a layer of
   * GPT-2 1.5B: 0.55 GB with its state) and the update takes ~20 launches,
   * not one per tensor */
  ot_adamw_opts o = g->o.adam;
  o.step_slot = g->step_slot;
  /* data parallel and f16: every bucket's sum before the statistics that decide the skip */
  for (int k = 0; s == OT_OK && g->dp && f16 && k < ot_gt_num_groups(g); k++) s = ot_dp_record_wait(g->dp, r.p, k);
  if (s == OT_OK && f16) { /* the gradients carry 2^k: unscaled by AdamW, skipped if any overflowed */
    int64_t s2[1] = {2};
    s = ot_tlist_add(&g->acts, g->ctx, OT_F32, 1, s2, g->shapes_only, &g->stats, "grad_stats");
    if (s == OT_OK) s = ot_op_zero(r.p, g->stats);
    for (int i = 0; s == OT_OK && i < g->n_params; i++) s = ot_op_grad_stats(r.p, g->stats, g->P[i].g);
    if (s == OT_OK) s = ot_program_mark_output(r.p, g->stats);
    o.scale_slot = g->scale_slot;
    o.skip_if = g->stats;
  }
  enum { GROUP = GT_PER_LAYER };
  const int n_groups = ot_gt_num_groups(g);
  for (int j = 0; s == OT_OK && j < n_groups; j++) {
    /* data parallel: the last bucket reduced first (ln_f, the last layer, ...), each right after its
     * wait, so the update of one group overlaps the reduction of the next */
    const int grp = g->dp ? n_groups - 1 - j : j;
    int i0, n;
    ot_gt_group(g, grp, &i0, &n);
    if (g->dp && !f16) s = ot_dp_record_wait(g->dp, r.p, grp);
    ot_tensor *w[GROUP], *gr[GROUP], *m[GROUP], *v[GROUP], *cp[GROUP];
    for (int k = 0; k < n; k++) {
      ot_gt_param *q = &g->P[i0 + k];
      w[k] = q->w, gr[k] = q->g, m[k] = q->m, v[k] = q->v, cp[k] = q->c;
      if (s == OT_OK) s = ot_program_mark_persistent(r.p, q->w);
      if (s == OT_OK && q->c) s = ot_program_mark_persistent(r.p, q->c);
      if (s == OT_OK) s = ot_program_mark_persistent(r.p, q->m);
      if (s == OT_OK) s = ot_program_mark_persistent(r.p, q->v);
      if (s == OT_OK && g->o.keep_grads) s = ot_program_mark_output(r.p, q->g);
    }
    if (s == OT_OK) s = ot_op_adamw_multi(r.p, n, w, gr, m, v, cp, &o);
  }
  if (s == OT_OK && g->o.keep_logits) s = ot_program_mark_output(r.p, g->logits);
  return s;
}
