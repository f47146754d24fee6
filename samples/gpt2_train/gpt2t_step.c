/* gpt2t_step.c — recording one GPT-2 training step (B sequences of T
 * tokens, rows r = b*T + t):
 *
 *   h0 = wte[ids] + wpe[0..T)                                   [BT, D]
 *   layer l:  x1 = ln_1(h) ; q|k|v = x1 W_attn[:, q|k|v] + b      (column views of c_attn)
 *             att = causal_attention(q, k, v) per sequence
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

#include "gpt2t_impl.h"

typedef struct rec {
  gpt2_trainer *g;
  ot_program *p;
  int64_t B, T, D, H, hd, F, V;
  const char *tag; /* "" or ".rc": suffix of the names of recomputed activations */
} rec;

/* A new activation named "name.l" (".rc" when recomputed). A trial
 * recording (shapes_only) wraps no memory: it is planned to see whether it
 * fits, never run, and costs no gigabytes of host memory. */
static ot_status act(rec *r, ot_dtype dt, int ndim, const int64_t *shape, ot_tensor **out, const char *name, int l) {
  gpt2_trainer *g = r->g;
  return ot_tlist_add(&g->acts, g->ctx, dt, ndim, shape, g->shapes_only, out, "%s.%d%s", name, l, r->tag);
}

static ot_status mat(rec *r, int64_t rows, int64_t cols, ot_tensor **out, const char *name, int l) {
  int64_t s[2] = {rows, cols};
  return act(r, OT_F32, 2, s, out, name, l);
}

static ot_status keep(rec *r, ot_status s, ot_tensor *t) { return s == OT_OK ? ot_tlist_keep(&r->g->acts, t) : s; }

/* Column block j (of width n) of a [rows, k*n] matrix, or block j of a 1-D [k*n] vector. */
static ot_status block(rec *r, ot_tensor *t, int j, int64_t n, ot_tensor **out) {
  ot_tensor *v = NULL;
  GT_TRY(keep(r, ot_tensor_slice(t, ot_tensor_ndim(t) - 1, j * n, n, &v), v));
  *out = v;
  return OT_OK;
}

/* Sequence b of a [BT, D] tensor as [T, H, hd] (or [T, D] with heads = 0). */
static ot_status seq(rec *r, ot_tensor *t, int64_t b, int heads, ot_tensor **out) {
  ot_tensor *rows = NULL, *v = NULL;
  GT_TRY(keep(r, ot_tensor_slice(t, 0, b * r->T, r->T, &rows), rows));
  if (!heads) {
    *out = rows;
    return OT_OK;
  }
  int64_t s3[3] = {r->T, ot_tensor_dim(t, 1) / r->hd, r->hd};
  GT_TRY(keep(r, ot_tensor_reshape(rows, 3, s3, &v), v));
  *out = v;
  return OT_OK;
}

/* y = x W + b (GPT-2's Conv1D), then y += res if res. */
static ot_status conv1d(rec *r, ot_tensor *y, ot_tensor *x, ot_tensor *W, ot_tensor *b, ot_tensor *res) {
  GT_TRY(ot_op_matmul(r->p, y, x, W, 0, 0));
  GT_TRY(ot_op_add(r->p, y, y, b));
  return res ? ot_op_add(r->p, y, y, res) : OT_OK;
}

/* Its backward: db += sum dy, dW += x^T dy, dx = dy W^T (dx may be NULL). */
static ot_status conv1d_backward(rec *r, ot_tensor *dx, ot_tensor *dW, ot_tensor *db, ot_tensor *dy, ot_tensor *x,
                                 ot_tensor *W) {
  GT_TRY(ot_op_bias_backward(r->p, db, dy));
  return ot_op_matmul_backward(r->p, dx, dW, dy, x, W, 0);
}

typedef struct layer_acts {
  ot_tensor *h, *x1, *q, *k, *v, *att, *hm, *x2, *f, *a;
  ot_tensor *Wq[3], *bq[3], *dWq[3], *dbq[3]; /* q, k, v column views of c_attn and its gradient */
} layer_acts;

/* The layer's forward from A->h; h_out NULL: only its inner activations
 * (a checkpointed layer's recomputation). */
static ot_status forward_layer(rec *r, int l, layer_acts *A, ot_tensor **h_out) {
  gpt2_trainer *g = r->g;
  const float eps = (float)g->cfg.norm_eps;
  const int64_t BT = r->B * r->T;
  gt_param *P = gt_layer(g, l, 0);
  for (int j = 0; j < 3; j++) {
    GT_TRY(block(r, P[GT_ATTN_W].w, j, r->D, &A->Wq[j]));
    GT_TRY(block(r, P[GT_ATTN_B].w, j, r->D, &A->bq[j]));
    GT_TRY(block(r, P[GT_ATTN_W].g, j, r->D, &A->dWq[j]));
    GT_TRY(block(r, P[GT_ATTN_B].g, j, r->D, &A->dbq[j]));
  }
  GT_TRY(mat(r, BT, r->D, &A->x1, "x1", l));
  GT_TRY(ot_op_layernorm(r->p, A->x1, A->h, P[GT_LN1_W].w, P[GT_LN1_B].w, eps));
  ot_tensor **qkv[3] = {&A->q, &A->k, &A->v};
  static const char *qn[3] = {"q", "k", "v"};
  for (int j = 0; j < 3; j++) {
    GT_TRY(mat(r, BT, r->D, qkv[j], qn[j], l));
    GT_TRY(conv1d(r, *qkv[j], A->x1, A->Wq[j], A->bq[j], NULL));
  }
  GT_TRY(mat(r, BT, r->D, &A->att, "att", l));
  for (int64_t b = 0; b < r->B; b++) {
    ot_tensor *o, *q, *k, *v;
    GT_TRY(seq(r, A->att, b, 1, &o));
    GT_TRY(seq(r, A->q, b, 1, &q));
    GT_TRY(seq(r, A->k, b, 1, &k));
    GT_TRY(seq(r, A->v, b, 1, &v));
    GT_TRY(ot_op_causal_attention(r->p, o, q, k, v));
  }
  GT_TRY(mat(r, BT, r->D, &A->hm, "hm", l));
  GT_TRY(conv1d(r, A->hm, A->att, P[GT_PROJ_W].w, P[GT_PROJ_B].w, A->h));
  GT_TRY(mat(r, BT, r->D, &A->x2, "x2", l));
  GT_TRY(ot_op_layernorm(r->p, A->x2, A->hm, P[GT_LN2_W].w, P[GT_LN2_B].w, eps));
  GT_TRY(mat(r, BT, r->F, &A->f, "fc", l));
  GT_TRY(conv1d(r, A->f, A->x2, P[GT_FC_W].w, P[GT_FC_B].w, NULL));
  GT_TRY(mat(r, BT, r->F, &A->a, "gelu", l));
  GT_TRY(ot_op_gelu(r->p, A->a, A->f));
  if (!h_out) return OT_OK; /* recomputing for the backward: the output is not needed again */
  GT_TRY(mat(r, BT, r->D, h_out, "h", l + 1));
  return conv1d(r, *h_out, A->a, P[GT_FC2_W].w, P[GT_FC2_B].w, A->hm);
}

/* dh: the gradient of the layer's output; *dh_in gets that of its input. */
static ot_status backward_layer(rec *r, int l, layer_acts *A, ot_tensor *dh, ot_tensor **dh_in) {
  gpt2_trainer *g = r->g;
  const float eps = (float)g->cfg.norm_eps;
  const int64_t BT = r->B * r->T;
  gt_param *P = gt_layer(g, l, 0);
  ot_tensor *da, *dx2, *dhm, *datt, *dq[3], *dx1, *tmp, *dh0, *ws;
  /* h' = hm + gelu(x2 W_fc + b_fc) W_fc2 + b_fc2 */
  GT_TRY(mat(r, BT, r->F, &da, "d.gelu", l));
  GT_TRY(conv1d_backward(r, da, P[GT_FC2_W].g, P[GT_FC2_B].g, dh, A->a, P[GT_FC2_W].w));
  GT_TRY(ot_op_gelu_backward(r->p, da, A->f, da));
  GT_TRY(mat(r, BT, r->D, &dx2, "d.x2", l));
  GT_TRY(conv1d_backward(r, dx2, P[GT_FC_W].g, P[GT_FC_B].g, da, A->x2, P[GT_FC_W].w));
  GT_TRY(mat(r, BT, r->D, &dhm, "d.hm", l));
  GT_TRY(ot_op_layernorm_backward(r->p, dhm, P[GT_LN2_W].g, P[GT_LN2_B].g, dx2, A->hm, P[GT_LN2_W].w, eps));
  GT_TRY(ot_op_add(r->p, dhm, dhm, dh));
  /* hm = h + att W_proj + b_proj */
  GT_TRY(mat(r, BT, r->D, &datt, "d.att", l));
  GT_TRY(conv1d_backward(r, datt, P[GT_PROJ_W].g, P[GT_PROJ_B].g, dhm, A->att, P[GT_PROJ_W].w));
  static const char *dn[3] = {"d.q", "d.k", "d.v"};
  for (int j = 0; j < 3; j++) GT_TRY(mat(r, BT, r->D, &dq[j], dn[j], l));
  int64_t sws[3] = {BT, r->H, 2};
  GT_TRY(act(r, OT_F32, 3, sws, &ws, "attn_ws", l));
  for (int64_t b = 0; b < r->B; b++) {
    ot_tensor *v[8];
    ot_tensor *src[7] = {dq[0], dq[1], dq[2], datt, A->q, A->k, A->v};
    for (int j = 0; j < 7; j++) GT_TRY(seq(r, src[j], b, 1, &v[j]));
    ot_tensor *wsb;
    GT_TRY(keep(r, ot_tensor_slice(ws, 0, b * r->T, r->T, &wsb), wsb));
    GT_TRY(ot_op_causal_attention_backward(r->p, v[0], v[1], v[2], wsb, v[3], v[4], v[5], v[6]));
  }
  /* q|k|v = x1 W_attn + b_attn: dx1 sums the three */
  GT_TRY(mat(r, BT, r->D, &dx1, "d.x1", l));
  GT_TRY(mat(r, BT, r->D, &tmp, "d.x1.part", l));
  for (int j = 0; j < 3; j++) {
    GT_TRY(conv1d_backward(r, j ? tmp : dx1, A->dWq[j], A->dbq[j], dq[j], A->x1, A->Wq[j]));
    if (j) GT_TRY(ot_op_add(r->p, dx1, dx1, tmp));
  }
  GT_TRY(mat(r, BT, r->D, &dh0, "d.h", l));
  GT_TRY(ot_op_layernorm_backward(r->p, dh0, P[GT_LN1_W].g, P[GT_LN1_B].g, dx1, A->h, P[GT_LN1_W].w, eps));
  GT_TRY(ot_op_add(r->p, dh0, dh0, dhm));
  *dh_in = dh0;
  return OT_OK;
}

ot_status gt_record(gpt2_trainer *g) {
  const ot_hf_config *c = &g->cfg;
  rec r = {.g = g, .B = g->o.B, .T = g->o.T, .D = c->hidden_size, .H = c->num_heads, .hd = c->head_dim,
           .F = c->intermediate_size, .V = c->vocab_size, .tag = ""};
  const int64_t BT = r.B * r.T, L = c->num_layers;
  const float eps = (float)c->norm_eps;
  GT_TRY(ot_program_create(g->ctx, &g->prog));
  r.p = g->prog;
  GT_TRY(ot_program_scalar_create(r.p, "pos", &g->pos_slot));
  GT_TRY(ot_program_scalar_create(r.p, "step", &g->step_slot));
  int64_t sBT[1] = {BT}, s1[1] = {1};
  GT_TRY(act(&r, OT_I32, 1, sBT, &g->ids, "ids", 0));
  GT_TRY(act(&r, OT_I32, 1, sBT, &g->targets, "targets", 0));
  GT_TRY(act(&r, OT_F32, 1, s1, &g->loss, "loss", 0));
  gt_param *wte = &g->P[0], *wpe = &g->P[1], *lnf_w = &g->P[g->n_params - 2], *lnf_b = &g->P[g->n_params - 1];

  layer_acts *A = calloc((size_t)L, sizeof *A);
  if (!A) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "gpt2_train: no host memory");
  ot_status s = OT_OK;
#define STEP(x) if (s == OT_OK) s = (x)
  /* forward */
  ot_tensor *h, *xf, *dlogits, *losses, *dxf, *dh;
  STEP(mat(&r, BT, r.D, &h, "h", 0));
  STEP(ot_op_embedding(r.p, h, wte->w, g->ids));
  for (int64_t b = 0; s == OT_OK && b < r.B; b++) {
    ot_tensor *hb;
    STEP(seq(&r, h, b, 0, &hb));
    STEP(ot_op_add_positions(r.p, hb, wpe->w, g->pos_slot));
  }
  for (int l = 0; s == OT_OK && l < L; l++) {
    A[l].h = h;
    STEP(forward_layer(&r, l, &A[l], &h));
  }
  STEP(mat(&r, BT, r.D, &xf, "x.f", 0));
  STEP(ot_op_layernorm(r.p, xf, h, lnf_w->w, lnf_b->w, eps));
  STEP(mat(&r, BT, r.V, &g->logits, "logits", 0));
  STEP(ot_op_matmul(r.p, g->logits, xf, wte->w, 1, 0)); /* tied head: wte [V, D] as a Linear */
  /* the loss gradient overwrites the logits unless they are wanted: the two
   * [BT, vocab] tensors are the step's largest */
  dlogits = g->logits;
  if (g->o.keep_logits) STEP(mat(&r, BT, r.V, &dlogits, "d.logits", 0));
  STEP(act(&r, OT_F32, 1, sBT, &losses, "losses", 0));
  STEP(ot_op_cross_entropy(r.p, g->loss, losses, dlogits, g->logits, g->targets, 1.0f));
  /* backward: gradients zeroed first (they accumulate) */
  for (int i = 0; s == OT_OK && i < g->n_params; i++) STEP(ot_op_zero(r.p, g->P[i].g));
  STEP(mat(&r, BT, r.D, &dxf, "d.x.f", 0));
  STEP(ot_op_matmul_backward(r.p, dxf, wte->g, dlogits, xf, wte->w, 1));
  STEP(mat(&r, BT, r.D, &dh, "d.h", (int)L));
  STEP(ot_op_layernorm_backward(r.p, dh, lnf_w->g, lnf_b->g, dxf, h, lnf_w->w, eps));
  for (int l = (int)L - 1; s == OT_OK && l >= 0; l--) {
    layer_acts *Al = &A[l];
    layer_acts R = {.h = A[l].h};
    if (g->recompute[l]) { /* the checkpoint h is all that was kept of this layer */
      r.tag = ".rc";
      STEP(forward_layer(&r, l, &R, NULL));
      r.tag = "";
      Al = &R;
    }
    STEP(backward_layer(&r, l, Al, dh, &dh));
  }
  STEP(ot_op_embedding_backward(r.p, wte->g, dh, g->ids));
  ot_tensor *dh3 = NULL;
  int64_t s3[3] = {r.B, r.T, r.D};
  STEP(keep(&r, ot_tensor_reshape(dh, 3, s3, &dh3), dh3));
  STEP(ot_op_positions_backward(r.p, wpe->g, dh3, g->pos_slot));
  /* update */
  ot_adamw_opts o = g->o.adam;
  o.step_slot = g->step_slot;
  for (int i = 0; s == OT_OK && i < g->n_params; i++) {
    gt_param *q = &g->P[i];
    STEP(ot_op_adamw(r.p, q->w, q->g, q->m, q->v, NULL, &o));
    STEP(ot_program_mark_persistent(r.p, q->w));
    STEP(ot_program_mark_persistent(r.p, q->m));
    STEP(ot_program_mark_persistent(r.p, q->v));
    if (g->o.keep_grads) STEP(ot_program_mark_output(r.p, q->g));
  }
  STEP(ot_program_mark_input(r.p, g->ids));
  STEP(ot_program_mark_input(r.p, g->targets));
  STEP(ot_program_mark_output(r.p, g->loss));
  if (g->o.keep_logits) STEP(ot_program_mark_output(r.p, g->logits));
#undef STEP
  free(A);
  return s;
}

void gt_release_recording(gpt2_trainer *g) {
  ot_plan_destroy(g->plan);
  g->plan = NULL;
  ot_program_destroy(g->prog);
  g->prog = NULL;
  ot_tlist_release(&g->acts);
  g->ids = g->targets = g->loss = g->logits = NULL;
}

/* Records again with g->recompute as set; a trial (shapes_only) is only planned. */
static ot_status rerecord(gpt2_trainer *g, int shapes_only) {
  gt_release_recording(g);
  g->shapes_only = shapes_only;
  ot_status s = gt_record(g);
  g->shapes_only = 0;
  return s;
}

/* Does the recorded step run without offloading: no live copy is evicted
 * (to be uploaded again), in the first run or the replays? Not strategy
 * `none`, which needs every storage at once: a recomputed activation is a
 * new storage, but the one it replaces is dead by then and its space reused. */
static ot_status fits_resident(gpt2_trainer *g, int *fits) {
  ot_plan *pl = NULL;
  ot_status s = ot_sched_plan(g->ctx, g->prog, &g->so, &pl);
  *fits = s == OT_OK && ot_plan_get_stats(pl, 0).evictions == 0 && ot_plan_get_stats(pl, 1).evictions == 0;
  ot_plan_destroy(pl);
  return s == OT_OK || s == OT_ERR_BUDGET ? OT_OK : s;
}

/* The first k layers are checkpoints (their activations would live longest). */
static ot_status trial_first_k(gpt2_trainer *g, int k, int *fits) {
  for (int l = 0; l < g->cfg.num_layers; l++) g->recompute[l] = l < k;
  GT_TRY(rerecord(g, 1));
  return fits_resident(g, fits);
}

/* The cost model: recompute a layer iff its forward again (flops over
 * flops_per_s) is cheaper than writing its activations home and reading them
 * back (2 bytes over pcie_bytes_per_s). Per layer of B sequences of T: the
 * dropped activations are x1, q, k, v, att, hm, x2 [BT, D], fc, gelu [BT, F]
 * and the attention's [BT, H, 2] statistics; the forward is 2 BT D (4 D + 2 F)
 * flops of matmuls plus about 2 B T^2 D of causal attention. */
static int recompute_cheaper(const gpt2_trainer *g) {
  const ot_hf_config *c = &g->cfg;
  double BT = (double)g->o.B * g->o.T, D = (double)c->hidden_size, F = (double)c->intermediate_size;
  double bytes = 4.0 * BT * (7 * D + 2 * F + 2.0 * (double)c->num_heads);
  double flops = 2.0 * BT * D * (4 * D + 2 * F) + 2.0 * BT * g->o.T * D;
  return flops / g->o.flops_per_s < 2.0 * bytes / g->o.pcie_bytes_per_s;
}

/* auto: nothing recomputed if everything fits; else the fewest checkpoints
 * (the first k layers, k by bisection: fitting is taken as monotone in k)
 * that make it run without offloading; else, the budget demanding offload anyway,
 * every layer the cost model finds cheaper to recompute than to offload.
 * Trials wrap no memory, so each costs a recording and a plan, not gigabytes. */
static ot_status choose_auto(gpt2_trainer *g) {
  const int L = (int)g->cfg.num_layers;
  int fits;
  GT_TRY(trial_first_k(g, 0, &fits));
  if (fits) return OT_OK;
  GT_TRY(trial_first_k(g, L, &fits));
  if (!fits) {
    int cheaper = recompute_cheaper(g);
    for (int l = 0; l < L; l++) g->recompute[l] = cheaper;
    return OT_OK;
  }
  int lo = 1, hi = L; /* hi fits */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    GT_TRY(trial_first_k(g, mid, &fits));
    if (fits) hi = mid;
    else lo = mid + 1;
  }
  for (int l = 0; l < L; l++) g->recompute[l] = l < hi;
  return OT_OK;
}

ot_status gt_choose_and_plan(gpt2_trainer *g) {
  for (int l = 0; l < g->cfg.num_layers; l++) g->recompute[l] = g->o.checkpoint == GPT2T_CKPT_ALL;
  if (g->o.checkpoint == GPT2T_CKPT_AUTO) GT_TRY(choose_auto(g));
  GT_TRY(rerecord(g, g->o.plan_only));
  return ot_sched_plan(g->ctx, g->prog, &g->so, &g->plan);
}
