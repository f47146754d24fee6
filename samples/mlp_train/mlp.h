/* mlp.h — training a multi-layer perceptron under a device memory budget, on
 * omptensor's public API (ops.h, program.h, sched.h): the sample of issue 7.
 *
 * The task has a known optimum: a fixed random teacher MLP labels random
 * inputs with its argmax class; the student (layers Linear + GELU, the last
 * Linear alone) learns them by cross-entropy, so the loss can fall to 0.
 *
 * The whole step — zeroing the gradients, forward and backward of every
 * micro-batch (backward written out per op), and the AdamW update — is
 * recorded ONCE as a program, planned once under the budget, and replayed
 * every step with a new batch: the inputs and labels are program inputs, the
 * weights and AdamW moments persistent, the step number a run-time scalar.
 *
 *     mlp_config c = mlp_config_default();
 *     mlp_trainer *t;
 *     mlp_trainer_create(ctx, &c, &sched_opts, &t);
 *     for (int s = 0; s < steps; s++) { float loss; mlp_trainer_step(t, trace, &loss); }
 *     mlp_trainer_destroy(t);
 *
 * Activations under a budget. The scheduler already offloads (writes home
 * and reloads) live activations when the budget is tight. Recomputation is
 * chosen here, when the step is recorded (mlp_config.recompute, sched.h's
 * ot_recompute: the GPT-2 trainer's policy):
 *   none  keep every activation (the scheduler may offload them);
 *   all   checkpoint every layer: its pre-activation z = h W^T + b is dropped
 *         after the forward (its last use is the GELU) and recorded again,
 *         into a fresh tensor, right before the layer's backward; the layer
 *         inputs h (the checkpoints) are kept;
 *   auto  no layer is a checkpoint; the step is planned with the
 *         scheduler's per-tensor recomputation (ot_sched_opts.recompute) at
 *         pcie_bytes_per_s / flops_per_s: an activation the plan must evict
 *         is rebuilt by its producing op where the cost model of
 *         mlp_recompute_cost (plus the producer's inputs to upload) says
 *         that is cheaper than offloading it.
 * The last layer is never a checkpoint: its z is the logits, which become
 * their own gradient.
 */
#ifndef OT_SAMPLES_MLP_H
#define OT_SAMPLES_MLP_H

#include <stdint.h>

#include "omptensor/omptensor.h"
#include "omptensor/ops.h"
#include "omptensor/sched.h"

/* Precision of the matmuls (issue 7). fp32: everything f32. bf16 / f16: the
 * forward and backward matmuls read a bf16 / f16 COPY of each weight, which
 * AdamW writes from the f32 master after every update (its `copy`);
 * activations and activation gradients stay f32. f16 adds dynamic loss
 * scaling: its weight/bias GRADIENTS are f16 too (with f32 gradients nothing
 * overflows or underflows and a scale would do nothing), the loss gradient
 * is multiplied by 2^k (ot_op_loss_scale), ot_op_grad_stats counts Inf/NaN in
 * the gradients, and the host, between replays, skips the update of a step
 * that overflowed and halves the scale, and doubles it after
 * scale_growth_interval good steps in a row. The optimizer unscales (2^-k).
 *
 * The skip needs the host between backward and update, but one replay runs
 * both. So with f16 the recorded step runs the update of the PREVIOUS step
 * first (AdamW's skip_slot set from that step's stats; its gradients are
 * persistent between replays), then zeroing, forward and backward of this
 * step: the forward still sees every update before it, as with fp32, but the
 * last step's update is still pending after it (mlp_trainer_read_params
 * shows the parameters the last forward used). One program and one plan
 * (one arena under the budget) instead of two plans with two arenas. */
typedef enum mlp_precision { MLP_FP32 = 0, MLP_BF16, MLP_F16 } mlp_precision;
const char *mlp_precision_name(mlp_precision p);
ot_status mlp_precision_parse(const char *s, mlp_precision *out); /* "fp32" | "bf16" | "f16" */

#define MLP_MAX_LAYERS 16

typedef struct mlp_config {
  int in_dim, hidden, classes; /* student: in -> hidden -> ... -> hidden -> classes */
  int layers;                  /* Linear layers of the student, 2..MLP_MAX_LAYERS */
  int teacher_hidden;          /* the teacher: in -> teacher_hidden -> classes (GELU between) */
  int batch;                   /* rows per micro-batch */
  int micro_batches;           /* gradients accumulate over these, then one update */
  ot_recompute recompute;      /* none | all | auto (sched.h) */
  mlp_precision precision;
  int loss_scale_log2;         /* f16: the initial loss scale 2^k (16), -126..127 */
  int scale_growth_interval;   /* f16: double the scale after this many good steps (200) */
  /* the auto cost model's rates (the H200 figures in docs/gpu.md by default) */
  double pcie_bytes_per_s;     /* 55e9: pinned host <-> device */
  double flops_per_s;          /* 4.5e12: the naive OpenMP GEMM */
  ot_adamw_opts adam;          /* step_slot is set by the trainer */
  uint64_t seed;               /* teacher, student init and batches */
} mlp_config;

mlp_config mlp_config_default(void);

/* The cost model of `auto` (the planner applies it per activation) for an
 * activation of `bytes` whose producer costs `flops`:
 *   offload   = 2 * bytes / pcie_bytes_per_s  (written home after the
 *               forward, read back before the backward)
 *   recompute = flops / flops_per_s           (its producing op again)
 * Recompute iff recompute < offload (ot_recompute_cheaper); returns 1 to recompute. For the
 * output of a Linear layer of fan-in K (4 B H bytes, 2 B H K flops) that is
 * K < 4 * flops_per_s / pcie_bytes_per_s: narrow layers' outputs are worth
 * recomputing, wide ones' not (K < ~327 on the H200 figures). */
int mlp_recompute_cost(const mlp_config *c, double bytes, double flops);

typedef struct mlp_trainer mlp_trainer;

/* Builds teacher and student, records the step and plans it with `so` (NULL:
 * defaults). Errors (a budget below the minimum, bad sizes) name the cause. */
ot_status mlp_trainer_create(ot_ctx *ctx, const mlp_config *c, const ot_sched_opts *so, mlp_trainer **out);
void mlp_trainer_destroy(mlp_trainer *t); /* NULL is fine */

/* One training step (batch number = steps done so far): writes the batches,
 * runs the program, returns the mean loss over the micro-batches. */
ot_status mlp_trainer_step(mlp_trainer *t, ot_trace *trace, float *loss);
/* f16 loss scaling so far: steps whose update was skipped (gradients had
 * Inf/NaN), and the current scale's exponent (0 for fp32/bf16). */
int64_t mlp_trainer_skipped_steps(const mlp_trainer *t);
int mlp_trainer_loss_scale_log2(const mlp_trainer *t);

/* All student parameters, concatenated (W0, b0, W1, b1, ...), into dst
 * (mlp_trainer_num_params floats). */
int64_t mlp_trainer_num_params(const mlp_trainer *t);
ot_status mlp_trainer_read_params(const mlp_trainer *t, float *dst);

/* What was recorded and planned. */
const ot_program *mlp_trainer_program(const mlp_trainer *t);
const ot_plan *mlp_trainer_plan(const mlp_trainer *t);
int mlp_trainer_recomputed(const mlp_trainer *t, int layer); /* 1 if that layer is a checkpoint (all; never for auto,
                                                                whose choices are the plan's: ot_plan_get_stats) */
/* The smallest feasible budget of the recorded step (ot_sched_min_budget). */
ot_status mlp_trainer_min_budget(const mlp_trainer *t, uint64_t *bytes);
/* Bytes of every storage the step touches: the budget at which nothing moves. */
uint64_t mlp_trainer_total_bytes(const mlp_trainer *t);

#endif
