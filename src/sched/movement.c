/* movement.c — the transfer thread and its FIFO queue (movement.h). */
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/fault.h"
#include "sched/movement.h"
#include "sched/trace_impl.h"

#ifdef OT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef enum { XFER_UP, XFER_DOWN, XFER_RELEASE } xfer_dir;

typedef struct xfer {
  struct xfer *next;
  xfer_dir dir;
  void *dst;
  const void *src;
  size_t bytes;
  const char *name; /* the tensor's storage, for the failure message */
  ot_trace *tr;
  size_t ev;
  uint64_t ticket;
} xfer;

struct ot_movement {
  ot_mv_kind kind;
  int dev, host;
  pthread_t thread;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t work, done_cv;
  xfer *head, *tail;
  uint64_t issued, done;
  int stop;
  int failed;          /* a transfer failed: everything after it is suspect */
  char err[256];
#ifdef OT_HAVE_CUDA
  cudaStream_t stream;
#endif
};

/* One blocking transfer; returns 0 on success. */
static int do_copy(ot_movement *m, const xfer *x) {
  if (!x->bytes) return 0;
  switch (m->kind) {
  case OT_MV_COPY:
#ifdef OT_OFFLOAD
    if (x->dir == XFER_UP) return omp_target_memcpy(x->dst, x->src, x->bytes, 0, 0, m->dev, m->host);
    if (x->dir == XFER_DOWN) return omp_target_memcpy(x->dst, x->src, x->bytes, 0, 0, m->host, m->dev);
#else
    if (x->dir != XFER_RELEASE) memcpy(x->dst, x->src, x->bytes);
#endif
    return 0;
  case OT_MV_PREFETCH: {
#ifdef OT_HAVE_CUDA
    /* CUDA 13: cudaMemPrefetchAsync(ptr, bytes, struct cudaMemLocation, flags, stream) */
    struct cudaMemLocation loc;
    memset(&loc, 0, sizeof loc);
    loc.type = x->dir == XFER_UP ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
    loc.id = x->dir == XFER_UP ? m->dev : 0;
    const void *p = x->dir == XFER_UP ? x->dst : x->dir == XFER_DOWN ? x->dst : x->src;
    if (cudaMemPrefetchAsync(p, x->bytes, loc, 0, m->stream) != cudaSuccess) return -1;
    return cudaStreamSynchronize(m->stream) == cudaSuccess ? 0 : -1;
#else
    return -1;
#endif
  }
  default: return 0;
  }
}

unsigned ot_movement_test_delay_us = 0;

static void run_one(ot_movement *m, xfer *x) {
  if (ot_movement_test_delay_us) {
    struct timespec ts = {0, (long)ot_movement_test_delay_us * 1000L};
    nanosleep(&ts, NULL);
  }
  uint64_t t0 = ot_now_ns();
  /* OMPTENSOR_FAULT=transfer:N (core/fault.h) fails the N-th real transfer. */
  int injected = x->dir != XFER_RELEASE && x->bytes && ot_fault_hit(OT_FAULT_TRANSFER);
  int rc = injected ? -1 : do_copy(m, x);
  uint64_t t1 = ot_now_ns();
  if (x->tr && x->ev != (size_t)-1) ot_trace_set_times(x->tr, x->ev, t0, t1);
  pthread_mutex_lock(&m->mu);
  if (rc != 0 && !m->failed) {
    m->failed = 1;
    char why[64];
    if (injected) snprintf(why, sizeof why, "injected by OMPTENSOR_FAULT");
    else snprintf(why, sizeof why, "%s returned %d",
                  m->kind == OT_MV_PREFETCH ? "cudaMemPrefetchAsync" : "omp_target_memcpy", rc);
    char dir[48];
    if (x->dir == XFER_UP) snprintf(dir, sizeof dir, "host -> device %d", m->dev);
    else snprintf(dir, sizeof dir, "device %d -> host", m->dev);
    snprintf(m->err, sizeof m->err, "%s of '%s' (%zu bytes, %s) failed: %s",
             x->dir == XFER_UP ? "upload" : x->dir == XFER_DOWN ? "write-back" : "release", x->name ? x->name : "?",
             x->bytes, dir, why);
  }
  m->done = x->ticket;
  pthread_cond_broadcast(&m->done_cv);
  pthread_mutex_unlock(&m->mu);
}

static void *worker(void *arg) {
  ot_movement *m = arg;
#ifdef OT_HAVE_CUDA
  if (m->kind == OT_MV_PREFETCH) cudaSetDevice(m->dev);
#endif
  pthread_mutex_lock(&m->mu);
  for (;;) {
    while (!m->head && !m->stop) pthread_cond_wait(&m->work, &m->mu);
    if (!m->head) break;
    xfer *x = m->head;
    m->head = x->next;
    if (!m->head) m->tail = NULL;
    pthread_mutex_unlock(&m->mu);
    run_one(m, x);
    free(x);
    pthread_mutex_lock(&m->mu);
  }
  pthread_mutex_unlock(&m->mu);
  return NULL;
}

ot_status ot_movement_create(ot_mv_kind kind, int dev, ot_movement **out) {
  *out = NULL;
  ot_movement *m = calloc(1, sizeof *m);
  if (!m) return ot_fail(OT_ERR_OUT_OF_MEMORY, "transfer queue: no host memory");
  m->kind = kind;
  m->dev = dev;
  m->host = omp_get_initial_device();
  pthread_mutex_init(&m->mu, NULL);
  pthread_cond_init(&m->work, NULL);
  pthread_cond_init(&m->done_cv, NULL);
#ifdef OT_HAVE_CUDA
  if (kind == OT_MV_PREFETCH && cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking) != cudaSuccess) {
    ot_movement_destroy(m);
    return ot_fail(OT_ERR_DEVICE, "usm backend: cannot create a CUDA stream for prefetches on device %d", dev);
  }
#endif
  if (kind != OT_MV_NONE) {
    if (pthread_create(&m->thread, NULL, worker, m) != 0) {
      ot_movement_destroy(m);
      return ot_fail(OT_ERR_OUT_OF_MEMORY, "cannot start the transfer thread for device %d", dev);
    }
    m->started = 1;
  }
  *out = m;
  return OT_OK;
}

void ot_movement_destroy(ot_movement *m) {
  if (!m) return;
  if (m->started) {
    pthread_mutex_lock(&m->mu);
    m->stop = 1;
    pthread_cond_signal(&m->work);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL);
  }
#ifdef OT_HAVE_CUDA
  if (m->stream) cudaStreamDestroy(m->stream);
#endif
  pthread_cond_destroy(&m->work);
  pthread_cond_destroy(&m->done_cv);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static uint64_t enqueue(ot_movement *m, xfer_dir dir, void *dst, const void *src, size_t bytes, const char *name,
                        ot_trace *tr, size_t ev) {
  xfer local = {NULL, dir, dst, src, bytes, name, tr, ev, 0};
  if (m->kind == OT_MV_NONE) {
    uint64_t t = ot_now_ns();
    if (tr && ev != (size_t)-1) ot_trace_set_times(tr, ev, t, t);
    return 0;
  }
  xfer *x = malloc(sizeof *x);
  pthread_mutex_lock(&m->mu);
  uint64_t ticket = ++m->issued;
  local.ticket = ticket;
  if (x) {
    *x = local;
    if (m->tail) m->tail->next = x;
    else m->head = x;
    m->tail = x;
    pthread_cond_signal(&m->work);
    pthread_mutex_unlock(&m->mu);
    return ticket;
  }
  /* No memory for a queue entry: wait for the queue, then copy here (keeps
   * the order). */
  while (m->done + 1 < ticket) pthread_cond_wait(&m->done_cv, &m->mu);
  pthread_mutex_unlock(&m->mu);
  run_one(m, &local);
  return ticket;
}

uint64_t ot_movement_upload(ot_movement *m, void *dev_dst, const void *home_src, size_t bytes, const char *name,
                            ot_trace *tr, size_t ev) {
  return enqueue(m, XFER_UP, dev_dst, home_src, bytes, name, tr, ev);
}

uint64_t ot_movement_download(ot_movement *m, void *home_dst, const void *dev_src, size_t bytes, const char *name,
                              ot_trace *tr, size_t ev) {
  return enqueue(m, XFER_DOWN, home_dst, dev_src, bytes, name, tr, ev);
}

void ot_movement_release(ot_movement *m, void *home, size_t bytes) {
  if (m->kind == OT_MV_PREFETCH) enqueue(m, XFER_RELEASE, NULL, home, bytes, NULL, NULL, (size_t)-1);
}

void ot_movement_advise_read_mostly(ot_movement *m, void *home, size_t bytes) {
#ifdef OT_HAVE_CUDA
  if (m->kind == OT_MV_PREFETCH && bytes) {
    struct cudaMemLocation loc;
    memset(&loc, 0, sizeof loc);
    loc.type = cudaMemLocationTypeDevice;
    loc.id = m->dev;
    cudaMemAdvise(home, bytes, cudaMemAdviseSetReadMostly, loc);
  }
#else
  (void)m;
  (void)home;
  (void)bytes;
#endif
}

int ot_movement_done(ot_movement *m, uint64_t t) {
  if (m->kind == OT_MV_NONE || t == 0) return 1;
  pthread_mutex_lock(&m->mu);
  int d = m->done >= t;
  pthread_mutex_unlock(&m->mu);
  return d;
}

ot_status ot_movement_wait(ot_movement *m, uint64_t t) {
  if (m->kind == OT_MV_NONE) return OT_OK;
  pthread_mutex_lock(&m->mu);
  while (m->done < t) pthread_cond_wait(&m->done_cv, &m->mu);
  int failed = m->failed;
  pthread_mutex_unlock(&m->mu);
  return failed ? ot_fail(OT_ERR_DEVICE, "%s", m->err) : OT_OK;
}

ot_status ot_movement_wait_all(ot_movement *m) {
  if (m->kind == OT_MV_NONE) return OT_OK;
  pthread_mutex_lock(&m->mu);
  uint64_t t = m->issued;
  pthread_mutex_unlock(&m->mu);
  return ot_movement_wait(m, t);
}
