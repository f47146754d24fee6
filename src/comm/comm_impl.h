/* comm_impl.h (internal) — an ot_comm is a table of operations: one
 * process alone (comm.c) or MPI (mpi/comm_mpi.c, built with OT_MPI). */
#ifndef OT_COMM_IMPL_H
#define OT_COMM_IMPL_H

#include "omptensor/comm.h"

typedef struct ot_comm_ops {
  ot_status (*barrier)(ot_comm *c);
  ot_status (*allreduce_f32)(ot_comm *c, float *buf, size_t n);
  ot_status (*allreduce_i64)(ot_comm *c, int64_t *buf, int n, int max);
  ot_status (*allgather)(ot_comm *c, const void *send, size_t bytes, void *recv);
  ot_status (*exchange)(ot_comm *c, const float *buf, size_t n, float *recv);
  ot_status (*gather_segments)(ot_comm *c, float *buf, size_t n);
  ot_status (*bcast)(ot_comm *c, void *buf, size_t bytes, int root);
  ot_status (*send)(ot_comm *c, int dst, int tag, const void *buf, size_t bytes);
  ot_status (*recv)(ot_comm *c, int src, int tag, void **buf, size_t *bytes, int *from);
  void (*abort)(ot_comm *c, int code);
  void (*destroy)(ot_comm *c);
} ot_comm_ops;

struct ot_comm {
  const ot_comm_ops *ops;
  int rank, size, local_rank, local_size, cuda_aware;
  char describe[160];
  void *impl; /* the implementation's own state */
};

#ifdef OT_HAVE_MPI
/* mpi/comm_mpi.c */
ot_status ot_comm_mpi_world(ot_comm **out);
#endif

#endif
