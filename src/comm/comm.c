/* comm.c — the calls of comm.h over an implementation's table, the
 * launcher's environment, and the one-process comm (ot_comm_self), whose
 * collectives are copies: data-parallel code then runs unchanged on one
 * process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "core/error.h"

int ot_comm_mpi_built(void) {
#ifdef OT_HAVE_MPI
  return 1;
#else
  return 0;
#endif
}

/* A positive integer from the environment, else 0. */
static int env_count(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  char *end;
  long n = strtol(v, &end, 10);
  return *end == '\0' && n > 0 && n < (1L << 30) ? (int)n : 0;
}

int ot_comm_launched_size(void) {
  /* Open MPI's mpirun, MPICH's Hydra and Slurm's PMI-2, MVAPICH, and srun
   * itself (SLURM_STEP_NUM_TASKS is set in a step, not in the batch script
   * that sbatch runs, whose SLURM_NTASKS counts the allocation) */
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    int n = env_count(vars[i]);
    if (n) return n;
  }
  return 0;
}

ot_status ot_comm_world(ot_comm **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_comm_world: NULL argument");
  *out = NULL;
#ifdef OT_HAVE_MPI
  return ot_comm_mpi_world(out);
#else
  return ot_fail(OT_ERR_UNSUPPORTED,
                 "this omptensor was built without MPI (OT_MPI=OFF), so its ranks cannot work together: rebuild with "
                 "cmake -DOT_MPI=ON (Debian: apt-get install libopenmpi-dev), or run one process");
#endif
}

/* ---- one process ---- */

static ot_status self_ok(ot_comm *c) {
  (void)c;
  return OT_OK;
}
static ot_status self_allreduce_f32(ot_comm *c, float *buf, size_t n) {
  (void)c, (void)buf, (void)n;
  return OT_OK;
}
static ot_status self_allreduce_i64(ot_comm *c, int64_t *buf, int n, int max) {
  (void)c, (void)buf, (void)n, (void)max;
  return OT_OK;
}
static ot_status self_allgather(ot_comm *c, const void *send, size_t bytes, void *recv) {
  (void)c;
  if (bytes) memmove(recv, send, bytes);
  return OT_OK;
}
static ot_status self_exchange(ot_comm *c, const float *buf, size_t n, float *recv) {
  (void)c;
  if (n) memmove(recv, buf, n * sizeof *buf);
  return OT_OK;
}
static ot_status self_gather(ot_comm *c, float *buf, size_t n) {
  (void)c, (void)buf, (void)n;
  return OT_OK;
}
static ot_status self_bcast(ot_comm *c, void *buf, size_t bytes, int root) {
  (void)c, (void)buf, (void)bytes;
  return root == 0 ? OT_OK : ot_fail(OT_ERR_INVALID_ARG, "ot_comm_bcast: root %d of a comm of one rank", root);
}
static ot_status self_send(ot_comm *c, int dst, int tag, const void *buf, size_t bytes) {
  (void)c, (void)tag, (void)buf, (void)bytes;
  return ot_fail(OT_ERR_STATE, "ot_comm_send to rank %d: a comm of one process has no other rank", dst);
}
static ot_status self_recv(ot_comm *c, int src, int tag, void **buf, size_t *bytes, int *from) {
  (void)c, (void)tag, (void)from;
  *buf = NULL;
  *bytes = 0;
  return ot_fail(OT_ERR_STATE, "ot_comm_recv from rank %d: a comm of one process has no other rank", src);
}
static void self_abort(ot_comm *c, int code) { (void)c, (void)code; }
static void self_destroy(ot_comm *c) { free(c); }

static const ot_comm_ops self_ops = {self_ok, self_allreduce_f32, self_allreduce_i64, self_allgather, self_exchange,
                                     self_gather, self_bcast, self_send, self_recv, self_abort, self_destroy};

ot_status ot_comm_self(ot_comm **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_comm_self: NULL argument");
  ot_comm *c = calloc(1, sizeof *c);
  if (!c) return *out = NULL, ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_comm_self: no host memory");
  c->ops = &self_ops;
  c->size = c->local_size = 1;
  snprintf(c->describe, sizeof c->describe, "one process");
  *out = c;
  return OT_OK;
}

/* ---- the calls ---- */

void ot_comm_destroy(ot_comm *c) {
  if (c) c->ops->destroy(c);
}
int ot_comm_rank(const ot_comm *c) { return c ? c->rank : 0; }
int ot_comm_size(const ot_comm *c) { return c ? c->size : 1; }
int ot_comm_local_rank(const ot_comm *c) { return c ? c->local_rank : 0; }
int ot_comm_local_size(const ot_comm *c) { return c ? c->local_size : 1; }
int ot_comm_cuda_aware(const ot_comm *c) { return c ? c->cuda_aware : 0; }
const char *ot_comm_describe(const ot_comm *c) { return c ? c->describe : "one process"; }

void ot_comm_segment(const ot_comm *c, size_t n, int s, size_t *off, size_t *len) {
  const size_t R = (size_t)ot_comm_size(c);
  /* n * s / R without overflow for any n a float buffer can have */
  const size_t a = n / R * (size_t)s + n % R * (size_t)s / R, b = n / R * (size_t)(s + 1) + n % R * (size_t)(s + 1) / R;
  *off = a;
  *len = b - a;
}

#define OT_COMM_CHECK(c, what)                                                                                         \
  do {                                                                                                                 \
    if (!(c)) return ot_fail(OT_ERR_INVALID_ARG, "%s: NULL comm", what);                                              \
  } while (0)

ot_status ot_comm_barrier(ot_comm *c) {
  OT_COMM_CHECK(c, "ot_comm_barrier");
  return c->ops->barrier(c);
}
ot_status ot_comm_allreduce_f32(ot_comm *c, float *buf, size_t n) {
  OT_COMM_CHECK(c, "ot_comm_allreduce_f32");
  return c->ops->allreduce_f32(c, buf, n);
}
ot_status ot_comm_allreduce_i64(ot_comm *c, int64_t *buf, int n, int max) {
  OT_COMM_CHECK(c, "ot_comm_allreduce_i64");
  return c->ops->allreduce_i64(c, buf, n, max);
}
ot_status ot_comm_allgather(ot_comm *c, const void *send, size_t bytes, void *recv) {
  OT_COMM_CHECK(c, "ot_comm_allgather");
  return c->ops->allgather(c, send, bytes, recv);
}
ot_status ot_comm_exchange(ot_comm *c, const float *buf, size_t n, float *recv) {
  OT_COMM_CHECK(c, "ot_comm_exchange");
  return c->ops->exchange(c, buf, n, recv);
}
ot_status ot_comm_gather_segments(ot_comm *c, float *buf, size_t n) {
  OT_COMM_CHECK(c, "ot_comm_gather_segments");
  return c->ops->gather_segments(c, buf, n);
}
ot_status ot_comm_bcast(ot_comm *c, void *buf, size_t bytes, int root) {
  OT_COMM_CHECK(c, "ot_comm_bcast");
  return c->ops->bcast(c, buf, bytes, root);
}
ot_status ot_comm_send(ot_comm *c, int dst, int tag, const void *buf, size_t bytes) {
  OT_COMM_CHECK(c, "ot_comm_send");
  return c->ops->send(c, dst, tag, buf, bytes);
}
ot_status ot_comm_recv(ot_comm *c, int src, int tag, void **buf, size_t *bytes, int *from) {
  OT_COMM_CHECK(c, "ot_comm_recv");
  return c->ops->recv(c, src, tag, buf, bytes, from);
}
void ot_comm_abort(ot_comm *c, int code) {
  if (c) c->ops->abort(c, code);
}
