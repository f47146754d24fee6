/* gpt2_train.h — GPT-2 (GPT2LMHeadModel) training steps on omptensor's
 * public API: the whole step (forward, backward written out per op, AdamW
 * on every parameter) recorded once, planned once under the budget, replayed
 * per step with new token ids.
 *
 *     gpt2t_opts o = gpt2t_opts_default();
 *     o.B = 2; o.T = 16;                   // o.accum = 4: 4 micro-batches of 2 x 16 per update
 *     gpt2_trainer *g;
 *     gpt2t_create(ctx, "tests/data/models/gpt2_small", &o, NULL, &g);
 *     for (...) gpt2t_step(g, inputs, targets, trace, &loss);  // [B*T] ids each
 *     gpt2t_destroy(g);
 *
 * The weights are loaded as f32 master weights and updated in place. The
 * plan defers their write-backs (ot_sched_opts.defer_writeback): weights and
 * AdamW moments that stay on the device are not copied home every step;
 * gpt2t_sync brings the homes up to date (gpt2t_save and gpt2t_destroy do). Gradients follow
 * PyTorch: the mean cross-entropy over B*T tokens; lm_head is tied to wte,
 * whose gradient sums both uses. Attention runs per sequence (causal, no
 * KV cache); everything else over all B*T rows at once. */
#ifndef OT_SAMPLES_GPT2_TRAIN_H
#define OT_SAMPLES_GPT2_TRAIN_H

#include "omptensor/hfconfig.h"
#include "omptensor/omptensor.h"
#include "omptensor/ops.h"

/* Activation checkpointing, chosen per layer when the step is recorded:
 *   none  every activation is kept (the scheduler offloads them to host
 *         memory and reloads them for the backward when the budget is tight);
 *   all   every layer is a checkpoint: only its input h is kept, and its
 *         forward is recorded again, into fresh tensors, right before its
 *         backward (the activations of the first forward die at once);
 *   auto  none if the whole step fits the budget (a plan with strategy
 *         `none` succeeds); otherwise recompute a layer when the cost model
 *         says recomputing is cheaper than offloading: its forward's flops
 *         over flops_per_s against twice its activation bytes over
 *         pcie_bytes_per_s (written home after the forward, read back). */
typedef enum gpt2t_checkpoint { GPT2T_CKPT_NONE = 0, GPT2T_CKPT_ALL, GPT2T_CKPT_AUTO } gpt2t_checkpoint;
const char *gpt2t_checkpoint_name(gpt2t_checkpoint c);
ot_status gpt2t_checkpoint_parse(const char *s, gpt2t_checkpoint *out); /* "none" | "all" | "auto" */

typedef struct gpt2t_opts {
  int B, T;             /* sequences per micro-batch and tokens per sequence (T <= n_positions) */
  int accum;            /* micro-batches per step (1): their gradients accumulate, then one update;
                           the step's loss and gradient are the mean over all accum * B * T tokens */
  ot_adamw_opts adam;   /* step_slot is set by the trainer */
  int keep_grads;       /* gradients become program outputs: readable after a step */
  int keep_logits;      /* the logits become an output (else the loss gradient overwrites them);
                           accum must be 1 */
  gpt2t_checkpoint checkpoint;
  double pcie_bytes_per_s; /* auto's cost model: host <-> device copy rate (55e9, the H200 in docs/gpu.md) */
  double flops_per_s;      /* auto's cost model: the layer forward's rate (20e12) */
  int init_random;      /* ignore any weights: initialize as GPT-2 does (normal(0, 0.02), the residual
                           projections 0.02/sqrt(2 n_layer), biases 0, norms 1) from config.json alone */
  uint64_t seed;        /* for init_random */
  int plan_only;        /* record and plan only: no tensor gets memory, no weight is read (the
                           checkpoint's names, shapes and dtypes are checked), gpt2t_step refuses:
                           checks a budget or a batch size without allocating gigabytes */
} gpt2t_opts;

/* B 1, T 64, AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 0, checkpoint
 * none, weights from the checkpoint. */
gpt2t_opts gpt2t_opts_default(void);

typedef struct gpt2_trainer gpt2_trainer;

ot_status gpt2t_create(ot_ctx *ctx, const char *model_dir, const gpt2t_opts *o, const ot_sched_opts *so,
                       gpt2_trainer **out);
void gpt2t_destroy(gpt2_trainer *g); /* NULL is fine */

/* One step on inputs/targets [accum*B*T] (row-major [accum, B, T]); *loss
 * gets the mean loss before the update. */
ot_status gpt2t_step(gpt2_trainer *g, const int32_t *inputs, const int32_t *targets, ot_trace *trace, float *loss);

/* Writes the weights and moments still on the device home (then
 * gpt2t_param's tensors hold the trained values). */
ot_status gpt2t_sync(gpt2_trainer *g);

/* Parameters in GPT2LMHeadModel.named_parameters() order; their homes are
 * current after gpt2t_sync. */
int gpt2t_num_params(const gpt2_trainer *g);
const char *gpt2t_param_name(const gpt2_trainer *g, int i);
const ot_tensor *gpt2t_param(const gpt2_trainer *g, int i);
const ot_tensor *gpt2t_grad(const gpt2_trainer *g, int i);  /* the last step's (keep_grads) */
const ot_tensor *gpt2t_logits(const gpt2_trainer *g);       /* [B*T, vocab] (keep_logits) */
const ot_program *gpt2t_program(const gpt2_trainer *g);
const ot_plan *gpt2t_plan(const gpt2_trainer *g);
const ot_hf_config *gpt2t_config(const gpt2_trainer *g);
int gpt2t_recomputed(const gpt2_trainer *g, int layer); /* 1 if that layer is a checkpoint */
int64_t gpt2t_num_weights(const gpt2_trainer *g);        /* parameters (numbers), wte counted once */

/* Writes the current weights as a Hugging Face checkpoint: DIR/config.json
 * (the model's, as loaded) and DIR/model.safetensors (F32, GPT2LMHeadModel
 * names; lm_head tied). Creates DIR if missing. */
ot_status gpt2t_save(gpt2_trainer *g, const char *dir);

#endif
