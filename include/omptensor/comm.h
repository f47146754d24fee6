/* comm.h — the processes ("ranks") of one job that runs on several
 * machines or GPUs: the MPI world when started by mpirun / srun, or one
 * process alone.
 *
 *     ot_comm *c;
 *     if (ot_comm_launched_size() > 0) st = ot_comm_world(&c);   // under mpirun / srun
 *     else st = ot_comm_self(&c);                                // rank 0 of 1
 *     ... ot_comm_rank(c), ot_comm_size(c), ot_comm_allreduce_f32(c, buf, n) ...
 *     ot_comm_destroy(c);                                        // MPI_Finalize for the world
 *
 * MPI is optional at build time (CMake -DOT_MPI=ON, Open MPI or MPICH):
 * without it ot_comm_world says so and ot_comm_self still works, so that
 * everything built on a comm (data-parallel training, gpt2_train.h) runs
 * the same code on one process. The world is MPI_COMM_WORLD duplicated,
 * initialized with MPI_THREAD_MULTIPLE (the data-parallel gradient
 * reduction and the batch job's work queue run on their own threads), its
 * errors returned as statuses rather than ending the job.
 *
 * Collectives must be called by every rank in the same order; calls from
 * several threads are fine as long as each collective's order is the same
 * on every rank.
 */
#ifndef OMPTENSOR_COMM_H
#define OMPTENSOR_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ot_comm ot_comm;

#define OT_COMM_ANY (-1) /* ot_comm_recv: from any rank */

/* 1 if this library was built with MPI (OT_MPI=ON). */
int ot_comm_mpi_built(void);

/* How many ranks the environment says this job has, when this process was
 * started by an MPI launcher (mpirun/mpiexec of Open MPI, MPICH or
 * MVAPICH; Slurm's srun): from OMPI_COMM_WORLD_SIZE, PMI_SIZE,
 * MV2_COMM_WORLD_SIZE or SLURM_STEP_NUM_TASKS. 0 when none is set (a
 * process started by hand, or a Slurm batch script itself). */
int ot_comm_launched_size(void);

/* The job's ranks (MPI_COMM_WORLD; MPI initialized here unless the
 * program did it already, then it also finalizes it). OT_ERR_UNSUPPORTED
 * without an MPI build, or when the MPI library cannot give
 * MPI_THREAD_MULTIPLE. */
ot_status ot_comm_world(ot_comm **out);

/* One process alone: rank 0 of 1; the collectives copy. */
ot_status ot_comm_self(ot_comm **out);

/* Frees c (NULL is fine); for the world made by ot_comm_world, MPI_Finalize. */
void ot_comm_destroy(ot_comm *c);

int ot_comm_rank(const ot_comm *c);
int ot_comm_size(const ot_comm *c);
/* This rank among those on its machine (MPI_COMM_TYPE_SHARED), and how
 * many those are: rank local_rank takes GPU local_rank % GPUs. */
int ot_comm_local_rank(const ot_comm *c);
int ot_comm_local_size(const ot_comm *c);
/* 1 if the MPI library reads and writes CUDA device memory itself
 * (CUDA-aware: MPIX_Query_cuda_support); 0 for host memory only. */
int ot_comm_cuda_aware(const ot_comm *c);
/* "MPI (Open MPI v4.1.4, ...)" or "one process": for summaries. */
const char *ot_comm_describe(const ot_comm *c);

ot_status ot_comm_barrier(ot_comm *c);

/* In place: buf[i] = the sum over ranks of buf[i], in an order of the
 * MPI library's choosing (a fixed order: ot_comm_exchange below). */
ot_status ot_comm_allreduce_f32(ot_comm *c, float *buf, size_t n);

/* In place over ranks: the sum (max = 0) or the maximum (max = 1). */
ot_status ot_comm_allreduce_i64(ot_comm *c, int64_t *buf, int n, int max);

/* Every rank's `bytes` bytes into recv [size][bytes], by rank. */
ot_status ot_comm_allgather(ot_comm *c, const void *send, size_t bytes, void *recv);

/* Segments of an n-element buffer: segment s is [n*s/size, n*(s+1)/size). */
void ot_comm_segment(const ot_comm *c, size_t n, int s, size_t *off, size_t *len);

/* A reduce-scatter without the reduction: this rank receives segment
 * `rank` of every rank's buf into recv [size][its segment's length], in
 * rank order, so that the caller can add them in an order it fixes. */
ot_status ot_comm_exchange(ot_comm *c, const float *buf, size_t n, float *recv);

/* In place: every rank's own segment of buf (at its offset) to every rank,
 * so that all hold the whole buffer (an all-gather of the segments). */
ot_status ot_comm_gather_segments(ot_comm *c, float *buf, size_t n);

ot_status ot_comm_bcast(ot_comm *c, void *buf, size_t bytes, int root);

/* Point to point, for small messages (a work queue). ot_comm_recv takes
 * the next message of `tag` from `src` (or OT_COMM_ANY) into *buf
 * (malloc'ed, the caller frees; NULL for an empty message). */
ot_status ot_comm_send(ot_comm *c, int dst, int tag, const void *buf, size_t bytes);
ot_status ot_comm_recv(ot_comm *c, int src, int tag, void **buf, size_t *bytes, int *from);

/* Ends every rank of the job with `code` (MPI_Abort): for a command whose
 * rank failed while the others may wait in a collective for it. The
 * library never calls it. Does nothing on ot_comm_self. */
void ot_comm_abort(ot_comm *c, int code);

#ifdef __cplusplus
}
#endif
#endif
