/* gpt2_step.c — recording one GPT-2 training step (B sequences of T
 * tokens, rows r = b*T + t):
 *
 *   h0 = wte[ids] + wpe[0..T)                                   [BT, D]
 *   layer l:  x1 = ln_1(h) ; q|k|v = x1 W_attn[:, q|k|v] + b      (column views of c_attn)
 *             att = causal_attention(q, k, v) over the batch ([B, T, H, hd] views)
 *             hm = h + (att W_proj + b_proj)
 *             x2 = ln_2(hm) ; f = x2 W_fc + b_fc ; a = gelu(f)
 *             h' = hm + (a W_fc2 + b_fc2)
 *   logits = ln_f(h) wte^T ; loss = mean cross-entropy(logits, targets)
 *   backward in reverse, op by op; AdamW on every parameter.
 *
 * Every activation is its own tensor (none is overwritten in place), so the
 * backward finds the forward's values and the scheduler sees each one die. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "train/gpt2_impl.h"

typedef struct rec {
  ot_gpt2_trainer *g;
  ot_program *p;
  int64_t B, T, D, H, hd, F, V;
  const char *rc;  /* "" or ".rc": suffix of the names of recomputed activations */
  char mb[16];     /* "" or ".mbN": suffix of micro-batch N's (N > 0) */
} rec;

/* A new activation named "name.l" (+ ".rc" when recomputed, + ".mbN" for
 * micro-batch N > 0). A trial
 * recording (shapes_only) wraps no memory: it is planned to see whether it
 * fits, never run, and costs no gigabytes of host memory. */
static ot_status act(rec *r, ot_dtype dt, int ndim, const int64_t *shape, ot_tensor **out, const char *name, int l) {
  ot_gpt2_trainer *g = r->g;
  return ot_tlist_add(&g->acts, g->ctx, dt, ndim, shape, g->shapes_only, out, "%s.%d%s%s", name, l, r->rc, r->mb);
}

static ot_status mat(rec *r, int64_t rows, int64_t cols, ot_tensor **out, const char *name, int l) {
  int64_t s[2] = {rows, cols};
  return act(r, OT_F32, 2, s, out, name, l);
}

static ot_status keep(rec *r, ot_status s, ot_tensor *t) { return s == OT_OK ? ot_tlist_keep(&r->g->acts, t) : s; }

/* Column block j (of width n) of a [rows, k*n] matrix, or block j of a 1-D [k*n] vector. */
static ot_status block(rec *r, ot_tensor *t, int j, int64_t n, ot_tensor **out) {
  ot_tensor *v = NULL;
  OT_TRY(keep(r, ot_tensor_slice(t, ot_tensor_ndim(t) - 1, j * n, n, &v), v));
  *out = v;
  return OT_OK;
}

/* Sequence b of a [BT, D] tensor as [T, H, hd] (or [T, D] with heads = 0). */
static ot_status seq(rec *r, ot_tensor *t, int64_t b, int heads, ot_tensor **out) {
  ot_tensor *rows = NULL, *v = NULL;
  OT_TRY(keep(r, ot_tensor_slice(t, 0, b * r->T, r->T, &rows), rows));
  if (!heads) {
    *out = rows;
    return OT_OK;
  }
  int64_t s3[3] = {r->T, ot_tensor_dim(t, 1) / r->hd, r->hd};
  OT_TRY(keep(r, ot_tensor_reshape(rows, 3, s3, &v), v));
  *out = v;
  return OT_OK;
}

/* A [BT, D] tensor as [B, T, H, hd] (the batched attention's view). */
static ot_status heads4(rec *r, ot_tensor *t, ot_tensor **out) {
  ot_tensor *v = NULL;
  int64_t s4[4] = {r->B, r->T, ot_tensor_dim(t, 1) / r->hd, r->hd};
  OT_TRY(keep(r, ot_tensor_reshape(t, 4, s4, &v), v));
  *out = v;
  return OT_OK;
}

/* y = x W + b (GPT-2's Conv1D), then y += res if res. */
static ot_status conv1d(rec *r, ot_tensor *y, ot_tensor *x, ot_tensor *W, ot_tensor *b, ot_tensor *res) {
  OT_TRY(ot_op_matmul(r->p, y, x, W, 0, 0));
  OT_TRY(ot_op_add(r->p, y, y, b));
  return res ? ot_op_add(r->p, y, y, res) : OT_OK;
}

/* Its backward: db += sum dy, dW += x^T dy, dx = dy W^T (dx may be NULL). */
static ot_status conv1d_backward(rec *r, ot_tensor *dx, ot_tensor *dW, ot_tensor *db, ot_tensor *dy, ot_tensor *x,
                                 ot_tensor *W) {
  OT_TRY(ot_op_bias_backward(r->p, db, dy));
  return ot_op_matmul_backward(r->p, dx, dW, dy, x, W, 0);
}

typedef struct layer_acts {
  ot_tensor *h, *x1, *q, *k, *v, *att, *hm, *x2, *f, *a;
  ot_tensor *ws; /* attention's per-row log-sum-exp (and the backward's D) */
  ot_tensor *Wq[3], *bq[3], *dWq[3], *dbq[3]; /* q, k, v column views of c_attn and its gradient */
} layer_acts;

/* The layer's forward from A->h; h_out NULL: only its inner activations
 * (a checkpointed layer's recomputation). */
static ot_status forward_layer(rec *r, int l, layer_acts *A, ot_tensor **h_out) {
  ot_gpt2_trainer *g = r->g;
  const float eps = (float)g->cfg.norm_eps;
  const int64_t BT = r->B * r->T;
  ot_gt_param *P = ot_gt_layer(g, l, 0);
  for (int j = 0; j < 3; j++) {
    OT_TRY(block(r, P[GT_ATTN_W].w, j, r->D, &A->Wq[j]));
    OT_TRY(block(r, P[GT_ATTN_B].w, j, r->D, &A->bq[j]));
    OT_TRY(block(r, P[GT_ATTN_W].g, j, r->D, &A->dWq[j]));
    OT_TRY(block(r, P[GT_ATTN_B].g, j, r->D, &A->dbq[j]));
  }
  OT_TRY(mat(r, BT, r->D, &A->x1, "x1", l));
  OT_TRY(ot_op_layernorm(r->p, A->x1, A->h, P[GT_LN1_W].w, P[GT_LN1_B].w, eps));
  ot_tensor **qkv[3] = {&A->q, &A->k, &A->v};
  static const char *qn[3] = {"q", "k", "v"};
  for (int j = 0; j < 3; j++) {
    OT_TRY(mat(r, BT, r->D, qkv[j], qn[j], l));
    OT_TRY(conv1d(r, *qkv[j], A->x1, A->Wq[j], A->bq[j], NULL));
  }
  OT_TRY(mat(r, BT, r->D, &A->att, "att", l));
  int64_t sws[4] = {r->B, r->T, r->H, 2};
  OT_TRY(act(r, OT_F32, 4, sws, &A->ws, "attn_ws", l));
  ot_tensor *o, *q, *k, *v;
  OT_TRY(heads4(r, A->att, &o));
  OT_TRY(heads4(r, A->q, &q));
  OT_TRY(heads4(r, A->k, &k));
  OT_TRY(heads4(r, A->v, &v));
  OT_TRY(ot_op_causal_attention_train(r->p, o, A->ws, q, k, v));
  OT_TRY(mat(r, BT, r->D, &A->hm, "hm", l));
  OT_TRY(conv1d(r, A->hm, A->att, P[GT_PROJ_W].w, P[GT_PROJ_B].w, A->h));
  OT_TRY(mat(r, BT, r->D, &A->x2, "x2", l));
  OT_TRY(ot_op_layernorm(r->p, A->x2, A->hm, P[GT_LN2_W].w, P[GT_LN2_B].w, eps));
  OT_TRY(mat(r, BT, r->F, &A->f, "fc", l));
  OT_TRY(conv1d(r, A->f, A->x2, P[GT_FC_W].w, P[GT_FC_B].w, NULL));
  OT_TRY(mat(r, BT, r->F, &A->a, "gelu", l));
  OT_TRY(ot_op_gelu(r->p, A->a, A->f));
  if (!h_out) return OT_OK; /* recomputing for the backward: the output is not needed again */
  OT_TRY(mat(r, BT, r->D, h_out, "h", l + 1));
  return conv1d(r, *h_out, A->a, P[GT_FC2_W].w, P[GT_FC2_B].w, A->hm);
}

/* dh: the gradient of the layer's output; *dh_in gets that of its input. */
static ot_status backward_layer(rec *r, int l, layer_acts *A, ot_tensor *dh, ot_tensor **dh_in) {
  ot_gpt2_trainer *g = r->g;
  const float eps = (float)g->cfg.norm_eps;
  const int64_t BT = r->B * r->T;
  ot_gt_param *P = ot_gt_layer(g, l, 0);
  ot_tensor *da, *dx2, *dhm, *datt, *dq[3], *dx1, *tmp, *dh0;
  /* h' = hm + gelu(x2 W_fc + b_fc) W_fc2 + b_fc2 */
  OT_TRY(mat(r, BT, r->F, &da, "d.gelu", l));
  OT_TRY(conv1d_backward(r, da, P[GT_FC2_W].g, P[GT_FC2_B].g, dh, A->a, P[GT_FC2_W].w));
  OT_TRY(ot_op_gelu_backward(r->p, da, A->f, da));
  OT_TRY(mat(r, BT, r->D, &dx2, "d.x2", l));
  OT_TRY(conv1d_backward(r, dx2, P[GT_FC_W].g, P[GT_FC_B].g, da, A->x2, P[GT_FC_W].w));
  OT_TRY(mat(r, BT, r->D, &dhm, "d.hm", l));
  OT_TRY(ot_op_layernorm_backward(r->p, dhm, P[GT_LN2_W].g, P[GT_LN2_B].g, dx2, A->hm, P[GT_LN2_W].w, eps));
  OT_TRY(ot_op_add(r->p, dhm, dhm, dh));
  /* hm = h + att W_proj + b_proj */
  OT_TRY(mat(r, BT, r->D, &datt, "d.att", l));
  OT_TRY(conv1d_backward(r, datt, P[GT_PROJ_W].g, P[GT_PROJ_B].g, dhm, A->att, P[GT_PROJ_W].w));
  static const char *dn[3] = {"d.q", "d.k", "d.v"};
  for (int j = 0; j < 3; j++) OT_TRY(mat(r, BT, r->D, &dq[j], dn[j], l));
  ot_tensor *v[8];
  ot_tensor *src[8] = {dq[0], dq[1], dq[2], datt, A->att, A->q, A->k, A->v};
  for (int j = 0; j < 8; j++) OT_TRY(heads4(r, src[j], &v[j]));
  OT_TRY(ot_op_causal_attention_backward(r->p, v[0], v[1], v[2], A->ws, v[3], v[4], v[5], v[6], v[7]));
  /* q|k|v = x1 W_attn + b_attn: dx1 sums the three */
  OT_TRY(mat(r, BT, r->D, &dx1, "d.x1", l));
  OT_TRY(mat(r, BT, r->D, &tmp, "d.x1.part", l));
  for (int j = 0; j < 3; j++) {
    OT_TRY(conv1d_backward(r, j ? tmp : dx1, A->dWq[j], A->dbq[j], dq[j], A->x1, A->Wq[j]));
    if (j) OT_TRY(ot_op_add(r->p, dx1, dx1, tmp));
  }
  OT_TRY(mat(r, BT, r->D, &dh0, "d.h", l));
  OT_TRY(ot_op_layernorm_backward(r->p, dh0, P[GT_LN1_W].g, P[GT_LN1_B].g, dx1, A->h, P[GT_LN1_W].w, eps));
  OT_TRY(ot_op_add(r->p, dh0, dh0, dhm));
  *dh_in = dh0;
  return OT_OK;
}

/* Micro-batch mb: forward, the loss (its gradient scaled by 1/accum: the
 * step's loss is the mean over micro-batches), the gradients zeroed before
 * the first micro-batch's backward, then the backward, which accumulates.
 * A: [n_layer] scratch for the layer activations. */
static ot_status record_micro_batch(rec *r, int mb, layer_acts *A) {
  ot_gpt2_trainer *g = r->g;
  const ot_hf_config *c = &g->cfg;
  const int64_t BT = r->B * r->T, L = c->num_layers;
  const float eps = (float)c->norm_eps;
  r->mb[0] = '\0';
  if (mb) snprintf(r->mb, sizeof r->mb, ".mb%d", mb);
  int64_t sBT[1] = {BT}, s1[1] = {1};
  OT_TRY(act(r, OT_I32, 1, sBT, &g->ids[mb], "ids", 0));
  OT_TRY(act(r, OT_I32, 1, sBT, &g->targets[mb], "targets", 0));
  OT_TRY(act(r, OT_F32, 1, s1, &g->loss[mb], "loss", 0));
  ot_gt_param *wte = &g->P[0], *wpe = &g->P[1], *lnf_w = &g->P[g->n_params - 2], *lnf_b = &g->P[g->n_params - 1];
  /* forward */
  ot_tensor *h, *xf, *dlogits, *losses, *dxf, *dh;
  OT_TRY(mat(r, BT, r->D, &h, "h", 0));
  OT_TRY(ot_op_embedding(r->p, h, wte->w, g->ids[mb]));
  for (int64_t b = 0; b < r->B; b++) {
    ot_tensor *hb;
    OT_TRY(seq(r, h, b, 0, &hb));
    OT_TRY(ot_op_add_positions(r->p, hb, wpe->w, g->pos_slot));
  }
  for (int l = 0; l < L; l++) {
    A[l] = (layer_acts){.h = h};
    OT_TRY(forward_layer(r, l, &A[l], &h));
  }
  OT_TRY(mat(r, BT, r->D, &xf, "x.f", 0));
  OT_TRY(ot_op_layernorm(r->p, xf, h, lnf_w->w, lnf_b->w, eps));
  OT_TRY(mat(r, BT, r->V, &g->logits, "logits", 0));
  OT_TRY(ot_op_matmul(r->p, g->logits, xf, wte->w, 1, 0)); /* tied head: wte [V, D] as a Linear */
  /* the loss gradient overwrites the logits unless they are wanted: the two
   * [BT, vocab] tensors are the step's largest */
  dlogits = g->logits;
  if (g->o.keep_logits) OT_TRY(mat(r, BT, r->V, &dlogits, "d.logits", 0));
  OT_TRY(act(r, OT_F32, 1, sBT, &losses, "losses", 0));
  OT_TRY(ot_op_cross_entropy(r->p, g->loss[mb], losses, dlogits, g->logits, g->targets[mb], 1.0f / (float)g->o.accum));
  /* backward */
  for (int i = 0; mb == 0 && i < g->n_params; i++) OT_TRY(ot_op_zero(r->p, g->P[i].g));
  OT_TRY(mat(r, BT, r->D, &dxf, "d.x.f", 0));
  OT_TRY(ot_op_matmul_backward(r->p, dxf, wte->g, dlogits, xf, wte->w, 1));
  OT_TRY(mat(r, BT, r->D, &dh, "d.h", (int)L));
  OT_TRY(ot_op_layernorm_backward(r->p, dh, lnf_w->g, lnf_b->g, dxf, h, lnf_w->w, eps));
  for (int l = (int)L - 1; l >= 0; l--) {
    layer_acts *Al = &A[l], R = {.h = A[l].h};
    if (g->recompute[l]) { /* the checkpoint h is all that was kept of this layer */
      r->rc = ".rc";
      OT_TRY(forward_layer(r, l, &R, NULL));
      r->rc = "";
      Al = &R;
    }
    OT_TRY(backward_layer(r, l, Al, dh, &dh));
  }
  OT_TRY(ot_op_embedding_backward(r->p, wte->g, dh, g->ids[mb]));
  ot_tensor *dh3 = NULL;
  int64_t s3[3] = {r->B, r->T, r->D};
  OT_TRY(keep(r, ot_tensor_reshape(dh, 3, s3, &dh3), dh3));
  OT_TRY(ot_op_positions_backward(r->p, wpe->g, dh3, g->pos_slot));
  OT_TRY(ot_program_mark_input(r->p, g->ids[mb]));
  OT_TRY(ot_program_mark_input(r->p, g->targets[mb]));
  return ot_program_mark_output(r->p, g->loss[mb]);
}

ot_status ot_gt_record(ot_gpt2_trainer *g) {
  const ot_hf_config *c = &g->cfg;
  rec r = {.g = g, .B = g->o.B, .T = g->o.T, .D = c->hidden_size, .H = c->num_heads, .hd = c->head_dim,
           .F = c->intermediate_size, .V = c->vocab_size, .rc = ""};
  OT_TRY(ot_program_create(g->ctx, &g->prog));
  r.p = g->prog;
  OT_TRY(ot_program_scalar_create(r.p, "pos", &g->pos_slot));
  OT_TRY(ot_program_scalar_create(r.p, "step", &g->step_slot));
  layer_acts *A = calloc((size_t)c->num_layers, sizeof *A);
  if (!A) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "gpt2_train: no host memory");
  ot_status s = OT_OK;
  for (int mb = 0; s == OT_OK && mb < g->o.accum; mb++) s = record_micro_batch(&r, mb, A);
  free(A);
  /* update */
  ot_adamw_opts o = g->o.adam;
  o.step_slot = g->step_slot;
  for (int i = 0; s == OT_OK && i < g->n_params; i++) {
    ot_gt_param *q = &g->P[i];
    s = ot_op_adamw(r.p, q->w, q->g, q->m, q->v, NULL, &o);
    if (s == OT_OK) s = ot_program_mark_persistent(r.p, q->w);
    if (s == OT_OK) s = ot_program_mark_persistent(r.p, q->m);
    if (s == OT_OK) s = ot_program_mark_persistent(r.p, q->v);
    if (s == OT_OK && g->o.keep_grads) s = ot_program_mark_output(r.p, q->g);
  }
  if (s == OT_OK && g->o.keep_logits) s = ot_program_mark_output(r.p, g->logits);
  return s;
}
