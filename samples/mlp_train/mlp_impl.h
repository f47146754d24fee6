/* mlp_impl.h (sample-internal) — the trainer's state, shared by
 * mlp_model.c (weights, teacher, batches) and mlp_step.c (the recorded step). */
#ifndef OT_SAMPLES_MLP_IMPL_H
#define OT_SAMPLES_MLP_IMPL_H

#include "mlp.h"
#include "omptensor/tlist.h"
#include "omptensor/weightset.h"

struct mlp_trainer {
  ot_ctx *ctx;
  mlp_config c;
  ot_sched_opts so;
  int dims[MLP_MAX_LAYERS + 1];           /* dims[l] -> dims[l + 1] is layer l */
  /* student parameters (persistent) and their AdamW moments */
  ot_wset w;
  ot_tensor *W[MLP_MAX_LAYERS];            /* [dims[l + 1], dims[l]] (Linear: y = x W^T) */
  ot_tensor *b[MLP_MAX_LAYERS];            /* [dims[l + 1]] */
  ot_tensor *Wc[MLP_MAX_LAYERS];           /* bf16/f16: the low-precision copies the matmuls read (else W) */
  ot_tensor *mW[MLP_MAX_LAYERS], *vW[MLP_MAX_LAYERS], *mb[MLP_MAX_LAYERS], *vb[MLP_MAX_LAYERS];
  ot_tlist state;                         /* the moments */
  /* the teacher, on the host: [teacher_hidden, in], [th], [classes, th], [classes] */
  float *tW1, *tb1, *tW2, *tb2;
  /* the recorded step and its plan */
  ot_program *prog;
  ot_plan *plan;
  ot_tlist step;                          /* inputs, activations, gradients, losses of the recording */
  ot_tensor **x, **y, **loss;              /* [micro_batches] inputs [B, in], labels i32 [B], loss [1] */
  int step_slot;
  int scale_slot, unscale_slot, skip_slot;  /* f16: loss scale 2^k of this step, 2^k of the previous, skip flag */
  ot_tensor *stats;                        /* f16: [2] grad_stats of this step (output) */
  int scale_k, prev_k, pending_skip;       /* f16: host side of the loss scaling */
  int64_t updates, skipped;                /* applied updates (Adam's t), skipped steps */
  int good_run;                            /* good steps in a row (ot_loss_scale_next) */
  int recompute[MLP_MAX_LAYERS];
  int64_t steps_done;
  float *xbuf;                             /* [B, in] */
  int32_t *ybuf;                           /* [B] */
};

/* mlp_model.c */
ot_status mlp_model_init(mlp_trainer *t);  /* student params, moments, teacher */
void mlp_model_release(mlp_trainer *t);
/* Writes micro-batch `mb` of batch number `step` into t->x[mb], t->y[mb]. */
ot_status mlp_model_batch(mlp_trainer *t, int64_t step, int mb);

/* mlp_step.c */
ot_status mlp_step_record(mlp_trainer *t);
void mlp_step_release(mlp_trainer *t);

#endif
