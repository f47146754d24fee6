/* gpt2_impl.h (train-internal) — the GPT-2 trainer's state, shared by
 * gpt2_model.c (parameters, the public calls), gpt2_step.c (the recorded
 * step), gpt2_plan.c, gpt2_init.c and gpt2_save.c. */
#ifndef OT_TRAIN_GPT2_IMPL_H
#define OT_TRAIN_GPT2_IMPL_H

#include "omptensor/gpt2_train.h"
#include "omptensor/hfconfig.h"
#include "omptensor/safetensors.h"
#include "omptensor/tlist.h"
#include "train/dp.h"

/* One parameter: the f32 master weight, its gradient, AdamW moments, and
 * under mixed precision (matmul weights only) the low-precision copy the
 * GEMMs read, which AdamW rewrites after each update (NULL otherwise). */
typedef struct ot_gt_param {
  char name[96];
  ot_tensor *w, *g, *m, *v, *c;
} ot_gt_param;

/* The weight a GEMM reads: the copy, or the master itself in f32. */
static inline ot_tensor *ot_gt_mm(const ot_gt_param *p) { return p->c ? p->c : p->w; }

/* Indices into params of one layer's tensors, in named_parameters() order. */
enum { GT_LN1_W, GT_LN1_B, GT_ATTN_W, GT_ATTN_B, GT_PROJ_W, GT_PROJ_B, GT_LN2_W, GT_LN2_B, GT_FC_W, GT_FC_B,
       GT_FC2_W, GT_FC2_B, GT_PER_LAYER };

struct ot_gpt2_trainer {
  ot_ctx *ctx;
  ot_hf_config cfg;
  ot_gpt2_train_opts o;
  ot_sched_opts so;
  ot_gt_param *P;      /* [n_params]: wte, wpe, layers..., ln_f.weight, ln_f.bias */
  int n_params;
  ot_tlist keep;    /* parameters, gradients, moments */
  ot_tlist acts;    /* the recording's inputs, activations and views (released to re-record) */
  int shapes_only;  /* recording a trial: activations wrap no memory (planned, never run) */
  int *recompute;   /* [n_layer]: 1 if the layer is a checkpoint */
  ot_program *prog;
  ot_plan *plan;
  unsigned char *host_ops; /* cpu_optimizer: [n_ops] 1 for the AdamW ops (the plan's host ops) */
  ot_tensor **ids, **targets, **loss; /* [accum] per micro-batch: [B*T] ids, [B*T] targets, [chunks] the
                                         mean loss of each chunk of rows */
  ot_tensor *logits;                  /* the last micro-batch's last chunk's [rows, vocab] (keep_logits: all) */
  int64_t chunk_rows, n_chunks;       /* the loss's chunks of the B*T rows (the last may be shorter) */
  int pos_slot, step_slot;
  int64_t steps_done, updates; /* updates: AdamW's step count (f16 skips some) */
  /* f16 loss scaling: the run-time scalar of k, the [2] gradient stats the
   * step writes, k for the next step, good steps in a row, steps skipped */
  int scale_slot;
  ot_tensor *stats;
  int scale_k, good_run;
  int64_t skipped;
  /* data parallel (dp.h; NULL: one process, accumulating in place): the
   * buckets are the update's groups (ot_gt_group), bucket k = group k */
  ot_dp *dp;
  ot_comm *comm;     /* o.comm, or own_comm */
  ot_comm *own_comm; /* ot_comm_self, for a reduction asked for without a comm */
  ot_grad_reduce reduce;
  int32_t *mb_in, *mb_tg; /* [accum*B*T]: this rank's micro-batches of the global batch */
  float *losses;          /* [size][accum][n_chunks]: every rank's chunk losses, gathered */
};

/* The update's groups of parameters, in parameter order: wte, wpe, each
 * layer's 12, ln_f's 2 (a multi-tensor AdamW each, and a bucket each). */
static inline int ot_gt_num_groups(const ot_gpt2_trainer *g) { return (int)g->cfg.num_layers + 3; }
static inline void ot_gt_group(const ot_gpt2_trainer *g, int k, int *i0, int *n) {
  const int L = (int)g->cfg.num_layers;
  if (k < 2) *i0 = k, *n = 1;
  else if (k < L + 2) *i0 = 2 + (k - 2) * GT_PER_LAYER, *n = GT_PER_LAYER;
  else *i0 = g->n_params - 2, *n = 2;
}
enum { GT_GROUP_WTE = 0, GT_GROUP_WPE = 1 }; /* layer l: 2 + l; ln_f: n_layer + 2 */

/* The ranks training together (1 without data parallelism). */
static inline int ot_gt_ranks(const ot_gpt2_trainer *g) { return g->dp ? ot_comm_size(g->comm) : 1; }

/* Rows of the loss's chunk c (the last may be shorter). */
static inline int64_t ot_gt_chunk_rows(const ot_gpt2_trainer *g, int64_t c) {
  const int64_t BT = (int64_t)g->o.B * g->o.T, r0 = c * g->chunk_rows;
  return BT - r0 < g->chunk_rows ? BT - r0 : g->chunk_rows;
}

/* The parameter of layer l (-1: the embeddings / final norm by their index). */
static inline ot_gt_param *ot_gt_layer(ot_gpt2_trainer *g, int l, int which) { return &g->P[2 + l * GT_PER_LAYER + which]; }

/* gpt2_step.c: records the step with g->recompute as it is (into g->prog,
 * g->acts), and chooses g->recompute for the checkpoint mode, then plans. */
ot_status ot_gt_record(ot_gpt2_trainer *g);
void ot_gt_release_recording(ot_gpt2_trainer *g);
ot_status ot_gt_choose_and_plan(ot_gpt2_trainer *g);

/* gpt2_init.c: GPT-2's initialization of parameter i (by its name). */
ot_status ot_gt_init_param(ot_gpt2_trainer *g, int i);

#endif
