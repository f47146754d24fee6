/* comm_mpi.c — ot_comm over MPI (built with OT_MPI=ON): MPI_COMM_WORLD
 * duplicated, so that the job's own use of the world cannot match our
 * messages, with MPI_ERRORS_RETURN, so that a failed call is a status
 * with MPI's message (the job is not ended from inside the library). */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* Open MPI: MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support */
#endif
#endif

#include "comm/comm_impl.h"
#include "core/error.h"

typedef struct mpi_impl {
  MPI_Comm comm;
  int finalize; /* MPI was initialized here */
} mpi_impl;

static MPI_Comm comm_of(ot_comm *c) { return ((mpi_impl *)c->impl)->comm; }

/* A failed MPI call as a status naming the call and MPI's reason. */
static ot_status mpi_check(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return OT_OK;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
  return ot_fail(OT_ERR_IO, "%s failed: %s", what, msg);
}

/* MPI counts are ints: refuse what does not fit rather than wrap. */
static ot_status fits_int(size_t n, const char *what) {
  return n <= INT_MAX ? OT_OK
                      : ot_fail(OT_ERR_UNSUPPORTED, "%s: %zu elements, more than one MPI call takes (%d); use smaller buckets",
                                what, n, INT_MAX);
}

static ot_status m_barrier(ot_comm *c) { return mpi_check(MPI_Barrier(comm_of(c)), "MPI_Barrier"); }

static ot_status m_allreduce_f32(ot_comm *c, float *buf, size_t n) {
  for (size_t at = 0; at < n;) { /* in pieces of at most 2^30 elements */
    const size_t k = n - at < ((size_t)1 << 30) ? n - at : (size_t)1 << 30;
    OT_TRY(mpi_check(MPI_Allreduce(MPI_IN_PLACE, buf + at, (int)k, MPI_FLOAT, MPI_SUM, comm_of(c)), "MPI_Allreduce"));
    at += k;
  }
  return OT_OK;
}

static ot_status m_allreduce_i64(ot_comm *c, int64_t *buf, int n, int max) {
  return mpi_check(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_INT64_T, max ? MPI_MAX : MPI_SUM, comm_of(c)),
                   "MPI_Allreduce");
}

static ot_status m_allgather(ot_comm *c, const void *send, size_t bytes, void *recv) {
  OT_TRY(fits_int(bytes, "ot_comm_allgather"));
  return mpi_check(MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, comm_of(c)), "MPI_Allgather");
}

/* Counts and displacements of the segments of n (ot_comm_segment). */
static ot_status segments(ot_comm *c, size_t n, int **cnt, int **dsp) {
  OT_TRY(fits_int(n, "a segmented buffer"));
  *cnt = malloc((size_t)c->size * sizeof **cnt);
  *dsp = malloc((size_t)c->size * sizeof **dsp);
  if (!*cnt || !*dsp) {
    free(*cnt), free(*dsp);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "MPI segments: no host memory");
  }
  for (int s = 0; s < c->size; s++) {
    size_t off, len;
    ot_comm_segment(c, n, s, &off, &len);
    (*cnt)[s] = (int)len, (*dsp)[s] = (int)off;
  }
  return OT_OK;
}

static ot_status m_exchange(ot_comm *c, const float *buf, size_t n, float *recv) {
  int *cnt, *dsp;
  OT_TRY(segments(c, n, &cnt, &dsp));
  int *rcnt = malloc((size_t)c->size * sizeof *rcnt), *rdsp = malloc((size_t)c->size * sizeof *rdsp);
  ot_status st = rcnt && rdsp ? OT_OK : ot_fail(OT_ERR_OUT_OF_MEMORY, "MPI segments: no host memory");
  for (int q = 0; st == OT_OK && q < c->size; q++) rcnt[q] = cnt[c->rank], rdsp[q] = q * cnt[c->rank];
  if (st == OT_OK && (int64_t)cnt[c->rank] * c->size > INT_MAX)
    st = ot_fail(OT_ERR_UNSUPPORTED, "ot_comm_exchange: %d ranks x %d elements do not fit one MPI call; use smaller "
                                     "buckets", c->size, cnt[c->rank]);
  if (st == OT_OK)
    st = mpi_check(MPI_Alltoallv(buf, cnt, dsp, MPI_FLOAT, recv, rcnt, rdsp, MPI_FLOAT, comm_of(c)), "MPI_Alltoallv");
  free(cnt), free(dsp), free(rcnt), free(rdsp);
  return st;
}

static ot_status m_gather(ot_comm *c, float *buf, size_t n) {
  int *cnt, *dsp;
  OT_TRY(segments(c, n, &cnt, &dsp));
  ot_status st = mpi_check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, dsp, MPI_FLOAT, comm_of(c)),
                           "MPI_Allgatherv");
  free(cnt), free(dsp);
  return st;
}

static ot_status m_bcast(ot_comm *c, void *buf, size_t bytes, int root) {
  OT_TRY(fits_int(bytes, "ot_comm_bcast"));
  return mpi_check(MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, comm_of(c)), "MPI_Bcast");
}

static ot_status m_send(ot_comm *c, int dst, int tag, const void *buf, size_t bytes) {
  OT_TRY(fits_int(bytes, "ot_comm_send"));
  return mpi_check(MPI_Send(buf, (int)bytes, MPI_BYTE, dst, tag, comm_of(c)), "MPI_Send");
}

/* Matched probe: the message probed is the one received, whatever other
 * threads of this rank receive meanwhile. */
static ot_status m_recv(ot_comm *c, int src, int tag, void **buf, size_t *bytes, int *from) {
  *buf = NULL;
  *bytes = 0;
  MPI_Message msg;
  MPI_Status s;
  OT_TRY(mpi_check(MPI_Mprobe(src == OT_COMM_ANY ? MPI_ANY_SOURCE : src, tag, comm_of(c), &msg, &s), "MPI_Mprobe"));
  int n = 0;
  MPI_Get_count(&s, MPI_BYTE, &n);
  void *b = n > 0 ? malloc((size_t)n) : NULL;
  if (n > 0 && !b) {
    char dummy;
    MPI_Mrecv(&dummy, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE); /* take it off the queue all the same */
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_comm_recv: no host memory for %d bytes", n);
  }
  ot_status st = mpi_check(MPI_Mrecv(b, n, MPI_BYTE, &msg, MPI_STATUS_IGNORE), "MPI_Mrecv");
  if (st != OT_OK) return free(b), st;
  *buf = b;
  *bytes = (size_t)n;
  if (from) *from = s.MPI_SOURCE;
  return OT_OK;
}

static void m_abort(ot_comm *c, int code) { MPI_Abort(comm_of(c), code); }

static void m_destroy(ot_comm *c) {
  mpi_impl *m = c->impl;
  if (m) {
    if (m->comm != MPI_COMM_NULL) MPI_Comm_free(&m->comm);
    int fin = 0;
    MPI_Finalized(&fin);
    if (m->finalize && !fin) MPI_Finalize();
  }
  free(m);
  free(c);
}

static const ot_comm_ops mpi_ops = {m_barrier, m_allreduce_f32, m_allreduce_i64, m_allgather, m_exchange, m_gather,
                                    m_bcast,   m_send,          m_recv,          m_abort,     m_destroy};

static int cuda_aware(void) {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return 0;
#endif
}

/* The first line of MPI_Get_library_version ("Open MPI v4.1.4, ..."). */
static void library_name(char *buf, size_t n) {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(v, &len) != MPI_SUCCESS) snprintf(v, sizeof v, "unknown version");
  v[strcspn(v, "\n")] = '\0';
  snprintf(buf, n, "MPI (%.120s)", v);
}

ot_status ot_comm_mpi_world(ot_comm **out) {
  int inited = 0, fin = 0, provided = 0;
  MPI_Finalized(&fin);
  if (fin) return ot_fail(OT_ERR_STATE, "ot_comm_world: MPI was finalized already in this process");
  MPI_Initialized(&inited);
  if (!inited) OT_TRY(mpi_check(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread"));
  else MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    if (!inited) MPI_Finalize();
    return ot_fail(OT_ERR_UNSUPPORTED,
                   "this MPI library gives thread level %d, and omptensor needs MPI_THREAD_MULTIPLE (%d): the "
                   "gradient reduction and the batch job's work queue run on threads of their own; use an MPI built "
                   "with it (Open MPI 3 and later, MPICH: by default)",
                   provided, MPI_THREAD_MULTIPLE);
  }
  ot_comm *c = calloc(1, sizeof *c);
  mpi_impl *m = calloc(1, sizeof *m);
  if (!c || !m) {
    free(c), free(m);
    if (!inited) MPI_Finalize();
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_comm_world: no host memory");
  }
  m->comm = MPI_COMM_NULL;
  m->finalize = !inited;
  c->ops = &mpi_ops;
  c->impl = m;
  ot_status st = mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &m->comm), "MPI_Comm_dup");
  if (st == OT_OK) MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
  if (st == OT_OK) st = mpi_check(MPI_Comm_rank(m->comm, &c->rank), "MPI_Comm_rank");
  if (st == OT_OK) st = mpi_check(MPI_Comm_size(m->comm, &c->size), "MPI_Comm_size");
  MPI_Comm node = MPI_COMM_NULL;
  if (st == OT_OK)
    st = mpi_check(MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node),
                   "MPI_Comm_split_type");
  if (st == OT_OK) st = mpi_check(MPI_Comm_rank(node, &c->local_rank), "MPI_Comm_rank");
  if (st == OT_OK) st = mpi_check(MPI_Comm_size(node, &c->local_size), "MPI_Comm_size");
  if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
  if (st != OT_OK) {
    m_destroy(c);
    return ot_prefix_error(st, "ot_comm_world");
  }
  c->cuda_aware = cuda_aware();
  library_name(c->describe, sizeof c->describe);
  *out = c;
  return OT_OK;
}
