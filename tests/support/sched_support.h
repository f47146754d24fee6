/* sched_support.h — test ops and random programs for the scheduler tests.
 *
 * The "mix" op: for each output y (a contiguous f32 view of n elements),
 *     y[j] = 0.5 * (b + o + 0.25 * scalar + a0 * x0[j % n0] + a1 * x1[j % n1] + a2 * x2[j % n2])
 * computed on the op's device with OT_PARFOR from the DEVICE pointers it is
 * given: on an emulated device a missing upload or write-back changes the
 * numbers. An in-place op lists the same view as input and output. */
#ifndef OT_TEST_SCHED_SUPPORT_H
#define OT_TEST_SCHED_SUPPORT_H

#include <stdint.h>

#include "omptensor/omptensor.h"

#define TS_MAX_IN 3
#define TS_MAX_OUT 2

typedef struct ts_mix_params {
  float a[TS_MAX_IN];
  float b;
  int scalar_slot; /* -1: none */
} ts_mix_params;

ot_status ts_mix_run(const ot_op_exec *e);

/* Records a mix op. */
ot_status ts_add_mix(ot_program *p, const char *name, ot_tensor *const *in, int n_in, ot_tensor *const *out, int n_out,
                     const ts_mix_params *prm);

/* Batching (sched/batch.h): while ts_batch.on, ts_add_mix gives its ops an
 * encoder (every op but those whose index is a multiple of 5, which run
 * alone) and a launcher that runs a list of them in order with the same
 * kernel; the launcher counts its launches and the longest list. */
typedef struct ts_batch_stats {
  int on;
  long launches, insns, longest;
} ts_batch_stats;
extern ts_batch_stats ts_batch;

/* deterministic random numbers (xorshift64*) */
typedef struct ts_rng {
  uint64_t s;
} ts_rng;
uint64_t ts_rand(ts_rng *r);
int ts_rand_int(ts_rng *r, int lo, int hi); /* [lo, hi] */
float ts_rand_float(ts_rng *r);              /* [-1, 1) */

/* Fills a contiguous f32 tensor's home with values from the seed. */
void ts_fill(ot_tensor *t, uint64_t seed);

/* A random program: weights (some reused), inputs, persistent state,
 * temporaries, chains and DAGs, in-place ops, slices (partial writes). */
typedef struct ts_randprog {
  ot_ctx *ctx;
  ot_program *p;
  int n_t, cap_t;
  ot_tensor **t;       /* every tensor and view made (destroyed with it) */
  int n_in;
  ot_tensor *in[8];    /* inputs, rewritten before every run */
  int n_chk;
  ot_tensor *chk[32];  /* outputs and persistent tensors, compared */
  int scalar;          /* slot of the run-time scalar "step" */
} ts_randprog;

ot_status ts_randprog_create(ot_ctx *ctx, uint64_t seed, ts_randprog **out);
void ts_randprog_destroy(ts_randprog *rp);
/* Writes the inputs' homes for run number `run` and sets the scalar. */
void ts_randprog_prepare_run(ts_randprog *rp, int run);
/* Total number of floats in the checked tensors; copies them into dst. */
int64_t ts_randprog_snapshot(const ts_randprog *rp, float *dst);
/* Plans rp under *o, its budget set by budget_kind (0: the program's
 * minimum, 1: twice it, 2: 1 GiB), and runs it `runs` times into tr; checks
 * the trace's budget. *out gets every run's snapshot one after another
 * (malloc'ed, runs × *n floats). */
ot_status ts_randprog_runs(ts_randprog *rp, ot_sched_opts *o, int budget_kind, int runs, ot_trace *tr, float **out,
                           int64_t *n);

/* Number of bytes the arena needs for one storage (rounded like the planner). */
uint64_t ts_block(uint64_t bytes);

#endif
