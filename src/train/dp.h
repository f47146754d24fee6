/* dp.h (train-internal) — data-parallel training: the gradients of the
 * ranks of a comm (comm.h) summed inside a recorded step, before the
 * optimizer reads them.
 *
 * The gradients are grouped in buckets (the trainer's: those that become
 * final together, a layer's). Two ops per bucket and round go into the
 * program:
 *   dp_start  (reads the bucket) right after the backward's last write to
 *             it: copies it into host staging memory and queues it for the
 *             comm thread, which reduces it while the backward goes on;
 *   dp_wait   (writes the bucket whole) right before the optimizer's first
 *             read: waits for the reduction and copies the sum back.
 * So the reduction overlaps the rest of the backward, bucket by bucket,
 * and no device memory is held for it (a plan may evict the gradients in
 * between as it likes: the staging copy is the data).
 *
 * Modes (ot_grad_reduce, gpt2_train.h):
 *   ORDERED    each micro-batch's gradient is computed from zero, and the
 *              sum is formed in the order of the global micro-batches,
 *              S = ((g_0 + g_1) + g_2) + ..., whatever the number of ranks:
 *              rank r's local micro-batch j is global micro-batch
 *              j * size + r, one round per local micro-batch; in a round
 *              each rank receives its segment of every rank's bucket
 *              (ot_comm_exchange, a reduce-scatter's traffic) and adds the
 *              pieces onto its running segment in rank order; after the
 *              last round the segments are gathered (an all-gather's). The
 *              traffic of a ring all-reduce per round, and bitwise the
 *              same model for any number of ranks at a fixed global batch.
 *   ALLREDUCE  each rank accumulates its micro-batches in place, then one
 *              MPI_Allreduce per bucket (the order is MPI's: the same model
 *              within fp32 rounding). `direct` then passes the device
 *              memory itself to MPI (a CUDA-aware MPI, or device memory that
 *              is host memory): one synchronous in-place op per bucket,
 *              no staging and no overlap.
 * On ot_comm_self both run the same code on one process. */
#ifndef OT_TRAIN_DP_H
#define OT_TRAIN_DP_H

#include "omptensor/comm.h"
#include "omptensor/gpt2_train.h"
#include "omptensor/program.h"

typedef struct ot_dp ot_dp;

typedef struct ot_dp_opts {
  ot_comm *comm;         /* not owned; outlives the dp */
  ot_grad_reduce mode;   /* OT_GRAD_ORDERED or OT_GRAD_ALLREDUCE */
  int rounds;            /* ORDERED: local micro-batches per step (one exchange each); ALLREDUCE: 1 */
  int direct;            /* ALLREDUCE: MPI reads and writes the device memory (checked by the caller) */
} ot_dp_opts;

ot_status ot_dp_create(const ot_dp_opts *o, ot_dp **out);
void ot_dp_destroy(ot_dp *d); /* NULL is fine; stops the comm thread */

/* A bucket of n f32 tensors (contiguous); *id for the calls below. */
ot_status ot_dp_add_bucket(ot_dp *d, int n, ot_tensor *const *grads, int *id);

/* Records bucket id's start for `round` (0 .. rounds-1) / its wait. With
 * `direct`, start records the synchronous in-place reduction and wait
 * records nothing. */
ot_status ot_dp_record_start(ot_dp *d, ot_program *p, int id, int round);
ot_status ot_dp_record_wait(ot_dp *d, ot_program *p, int id);

/* What the reduction cost so far (ot_grad_reduce_stats, gpt2_train.h). */
ot_grad_reduce_stats ot_dp_stats(ot_dp *d);

/* The host staging memory and the comm thread, once the buckets are known
 * (not for a trainer that only plans). `dev`: the device whose runtime
 * pins the staging memory. */
ot_status ot_dp_prepare(ot_dp *d, int dev);

#endif
