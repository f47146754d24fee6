/* gpt2_train.h — GPT-2 (GPT2LMHeadModel) training steps on omptensor's
 * public API: the whole step (forward, backward written out per op, AdamW
 * on every parameter) recorded once, planned once under the budget, replayed
 * per step with new token ids.
 *
 *     ot_gpt2_train_opts o = ot_gpt2_train_opts_default();
 *     o.B = 2; o.T = 16;                   // o.accum = 4: 4 micro-batches of 2 x 16 per update
 *     ot_gpt2_trainer *g;
 *     ot_gpt2_train_create(ctx, "tests/data/models/gpt2_small", &o, NULL, &g);
 *     for (...) ot_gpt2_train_step(g, inputs, targets, trace, &loss);  // [B*T] ids each
 *     ot_gpt2_train_destroy(g);
 *
 * The weights are loaded as f32 master weights and updated in place. The
 * plan defers their write-backs (ot_sched_opts.defer_writeback): weights and
 * AdamW moments that stay on the device are not copied home every step;
 * ot_gpt2_train_sync brings the homes up to date (ot_gpt2_train_save and ot_gpt2_train_destroy do). Over several
 * devices (a pipeline: sched opts n_stages) a weight one stage updates and another reads goes home after every
 * step, the state a stage alone uses stays deferred, and the sync writes every stage's. Gradients follow
 * PyTorch: the mean cross-entropy over B*T tokens; lm_head is tied to wte,
 * whose gradient sums both uses. Attention runs per sequence (causal, no
 * KV cache); everything else over all B*T rows at once. */
#ifndef OMPTENSOR_GPT2_TRAIN_H
#define OMPTENSOR_GPT2_TRAIN_H

#include "omptensor/comm.h"
#include "omptensor/hfconfig.h"
#include "omptensor/omptensor.h"
#include "omptensor/ops.h"
#include "omptensor/sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the gradients of data-parallel ranks are summed (src/train/dp.h):
 *   LOCAL      one process, no reduction: the micro-batches accumulate in
 *              place (the default without a comm)
 *   ORDERED    each micro-batch's gradient from zero, summed in the order of
 *              the global micro-batches over an exchange of segments: the
 *              same model, bitwise, for any number of ranks at a fixed
 *              global batch (the default with a comm)
 *   ALLREDUCE  each rank accumulates in place, then MPI_Allreduce (MPI's
 *              order: the same model within fp32 rounding) */
typedef enum ot_grad_reduce { OT_GRAD_LOCAL = 0, OT_GRAD_ORDERED, OT_GRAD_ALLREDUCE } ot_grad_reduce;

const char *ot_grad_reduce_name(ot_grad_reduce r);
ot_status ot_grad_reduce_parse(const char *s, ot_grad_reduce *out); /* "local" | "ordered" | "allreduce" */

typedef struct ot_gpt2_train_opts {
  int B, T;             /* sequences per micro-batch and tokens per sequence (T <= n_positions) */
  int accum;            /* micro-batches per step (1): their gradients accumulate, then one update;
                           the step's loss and gradient are the mean over all accum * B * T tokens */
  ot_adamw_opts adam;   /* step_slot is set by the trainer */
  int keep_grads;       /* gradients become program outputs: readable after a step */
  int keep_logits;      /* the logits become an output (else the loss gradient overwrites them);
                           accum must be 1 */
  ot_recompute checkpoint; /* none | all | auto (sched.h: all records every layer's forward again before
                              its backward; auto plans with ot_sched_opts.recompute, the planner's
                              per-activation choice between offloading and running its producer again) */
  double pcie_bytes_per_s; /* auto's cost model: host <-> device copy rate (55e9, the H200's, docs/gpu.md) */
  double flops_per_s;      /* auto's cost model: the rate ops run again at (20e12) */
  int init_random;      /* ignore any weights: initialize as GPT-2 does (normal(0, r), the residual
                           projections r/sqrt(2 n_layer), biases 0, norms 1; r = config.json's
                           initializer_range, 0.02 by default) from config.json alone */
  uint64_t seed;        /* for init_random */
  int no_dropout;       /* train without the dropout config.json asks for (resid/embd/attn_pdrop;
                           absent means 0.1): the trainer implements none, so a non-zero rate is
                           refused unless this says so; the saved config says 0 */
  ot_dtype precision;   /* OT_F32 (the default) or OT_BF16, mixed precision as torch.autocast does it:
                           the matmul weights (wte for the head, c_attn, c_proj, c_fc, mlp.c_proj) get
                           bf16 copies that AdamW rewrites from the f32 masters after every update; the
                           norms' outputs, q/k/v, attention, the MLP's hidden activations and the
                           logits are bf16 into the GEMMs (f32 accumulation); the residual stream, the
                           norms' and softmax statistics, the loss and every gradient of a parameter
                           stay f32. OT_F16 the same in f16, with dynamic loss scaling as
                           torch.amp.GradScaler: the loss gradient is multiplied by 2^k, AdamW unscales,
                           and a step whose gradients hold Inf/NaN is skipped on the device (the Adam
                           step count does not advance) and halves the scale; scale_growth_interval good
                           steps in a row double it */
  int loss_scale_log2;       /* f16: the first k (16: GradScaler's 65536) */
  int scale_growth_interval; /* f16: good steps before the scale doubles (2000, GradScaler's) */
  int loss_chunk_rows;  /* the logits, the loss and its gradient are computed for this many rows of the
                           B*T at a time, so the [B*T, vocab] logits never exist whole (0: chunks of at
                           most 256 MiB of logits; keep_logits: one chunk). With more than one chunk a
                           target of -100 (ignored) is refused: each chunk's mean would count its own rows */
  int cpu_optimizer;    /* 1: AdamW runs on the host's cores, on the state's homes (ZeRO-Offload):
                           the moments never cross PCIe, the gradients go home and the updated
                           weights (or their 16-bit copies) come back when next used. A hybrid
                           plan (sched.h host_ops): the state is not kept on the device between
                           steps, and checkpoint auto's per-tensor recomputation is off */
  ot_comm *comm;        /* data parallel (NULL: one process): the ranks that train together, each on
                           its own device and budget; every rank creates the trainer with the same
                           options and passes the same global batch to ot_gpt2_train_step, of which
                           rank r takes micro-batches r, r + size, r + 2 size, ... (accum of them);
                           the gradients are summed across the ranks before AdamW, so every rank
                           holds the same weights after every step. Not owned */
  ot_grad_reduce grad_reduce; /* with a comm: ORDERED (LOCAL means ORDERED there) or ALLREDUCE; without
                           one, ORDERED or ALLREDUCE run the same reduction on one process (ORDERED:
                           bitwise the model R ranks train with accum / R each) */
  int grad_direct;      /* ALLREDUCE: -1 (the default) MPI on the device memory itself when it can
                           (a CUDA-aware MPI on a CUDA GPU, or the host's memory), else through host
                           staging; 0: always host staging (overlapped with the backward); 1: direct,
                           refused where MPI cannot read the device memory */
  int plan_only;        /* record and plan only: no tensor gets memory, no weight is read (the
                           checkpoint's names, shapes and dtypes are checked), ot_gpt2_train_step refuses:
                           checks a budget or a batch size without allocating gigabytes */
} ot_gpt2_train_opts;

/* B 1, T 64, AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 0, checkpoint
 * none, weights from the checkpoint. */
ot_gpt2_train_opts ot_gpt2_train_opts_default(void);

typedef struct ot_gpt2_trainer ot_gpt2_trainer;

ot_status ot_gpt2_train_create(ot_ctx *ctx, const char *model_dir, const ot_gpt2_train_opts *o, const ot_sched_opts *so,
                       ot_gpt2_trainer **out);
void ot_gpt2_train_destroy(ot_gpt2_trainer *g); /* NULL is fine */

/* One step on inputs/targets [accum*B*T] (row-major [accum, B, T]); with
 * a comm of R ranks the global batch [R*accum*B*T], the same on every rank
 * (see comm above). *loss gets the mean loss before the update (with a
 * comm: over the global batch, the same on every rank). A loss that is not finite fails
 * with OT_ERR_NUMERIC naming the step (the update has been made: the
 * weights are no longer finite either). */
ot_status ot_gpt2_train_step(ot_gpt2_trainer *g, const int32_t *inputs, const int32_t *targets, ot_trace *trace, float *loss);

/* Data parallel: what the gradient reduction cost over the steps so far
 * (all 0 without it). reduce_s: the comm thread's time in the collectives
 * and the ordered sums, which overlaps the backward; wait_s: the time the
 * step waited for it (in dp_wait, or for a bucket's staging memory to be
 * free; the synchronous reduction of grad_direct counts here whole), the
 * part not hidden; copy_s: the staging copies device <-> host on the
 * step's thread; bytes: staging bytes each way. */
typedef struct ot_grad_reduce_stats {
  int64_t rounds; /* bucket reductions */
  double reduce_s, wait_s, copy_s;
  uint64_t bytes;
} ot_grad_reduce_stats;
ot_grad_reduce_stats ot_gpt2_train_reduce_stats(const ot_gpt2_trainer *g);

/* f16: steps whose update was skipped (their gradients overflowed), and the
 * loss scale's log2 the next step uses (0 in f32/bf16). */
int64_t ot_gpt2_train_skipped_steps(const ot_gpt2_trainer *g);
int ot_gpt2_train_loss_scale_log2(const ot_gpt2_trainer *g);

/* Writes the weights and moments still on the device home (then
 * ot_gpt2_train_param's tensors hold the trained values). */
ot_status ot_gpt2_train_sync(ot_gpt2_trainer *g);

/* Parameters in GPT2LMHeadModel.named_parameters() order; their homes are
 * current after ot_gpt2_train_sync. */
int ot_gpt2_train_num_params(const ot_gpt2_trainer *g);
const char *ot_gpt2_train_param_name(const ot_gpt2_trainer *g, int i);
const ot_tensor *ot_gpt2_train_param(const ot_gpt2_trainer *g, int i);
const ot_tensor *ot_gpt2_train_grad(const ot_gpt2_trainer *g, int i);  /* the last step's (keep_grads) */
const ot_tensor *ot_gpt2_train_logits(const ot_gpt2_trainer *g);       /* [B*T, vocab] (keep_logits) */
const ot_program *ot_gpt2_train_program(const ot_gpt2_trainer *g);
const ot_plan *ot_gpt2_train_plan(const ot_gpt2_trainer *g);
const ot_hf_config *ot_gpt2_train_config(const ot_gpt2_trainer *g);
int ot_gpt2_train_recomputed(const ot_gpt2_trainer *g, int layer); /* 1 if that layer is a checkpoint */
int64_t ot_gpt2_train_num_weights(const ot_gpt2_trainer *g);        /* parameters (numbers), wte counted once */

/* Writes the current weights as a Hugging Face checkpoint: DIR/config.json
 * (the model's, as loaded) and DIR/model.safetensors (F32, GPT2LMHeadModel
 * names; lm_head tied). Creates DIR (and missing parents) if missing. DIR
 * changes as a whole or not at all: both files are written into a fresh
 * directory beside DIR, flushed to disk and swapped in with one rename, so
 * a failure or a crash leaves the old checkpoint (or none), never a new
 * config beside old weights. Other files of an existing DIR (tokenizer,
 * generation config) are kept; its *.safetensors, shard index and
 * config.json are replaced. A DIR holding subdirectories is refused. */
ot_status ot_gpt2_train_save(ot_gpt2_trainer *g, const char *dir);

/* What ot_gpt2_train_save checks about DIR before it writes, without
 * writing: to call before training, so that a bad --save fails at once and
 * not after the last step (omptensor/file.h: ot_file_check_output_dir). */
ot_status ot_gpt2_train_check_save(const char *dir);

#ifdef __cplusplus
}
#endif
#endif
