/* movement.c — the transfer thread and its FIFO queue (movement.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/fault.h"
#include "memory/copy.h"
#include "memory/device.h"
#include "omptensor/context.h"
#include "sched/disk.h"
#include "sched/movement.h"
#include "sched/verify.h"
#include "sched/trace_impl.h"

typedef enum { XFER_UP, XFER_DOWN, XFER_ADVISE, XFER_DISCARD, XFER_UP_DISK } xfer_dir;

typedef struct xfer {
  struct xfer *next;
  xfer_dir dir;
  void *dst;
  const void *src;
  size_t bytes;
  const char *name; /* the tensor's storage, for the failure message */
  ot_verify_rec *rec; /* OMPTENSOR_VERIFY: the home's record (NULL: not verified) */
  ot_trace *tr;
  size_t ev;
  uint64_t ticket;
  int advice;         /* XFER_ADVISE: an ot_mem_advice (memory/copy.h) */
  size_t *rg, n_rg;   /* XFER_DOWN of some ranges: pairs {offset, length} (owned), or NULL: all bytes */
  ot_disk *disk;      /* XFER_UP_DISK: the reader whose oldest read this upload takes (disk.h) */
  int home_dev;       /* XFER_UP/XFER_DOWN: where the home side is: OT_DEVICE_HOST, or an OpenMP device
                         (a peer copy: ot_movement_upload_peer, ot_movement_download_peer) */
} xfer;

struct ot_movement {
  ot_mv_kind kind;
  int dev;
  unsigned delay_us;   /* every transfer sleeps this long first (ot_sched_opts.transfer_delay_us) */
  pthread_t thread;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t work, done_cv;
  xfer *head, *tail;
  uint64_t issued, done;
  uint64_t batched;    /* write-backs that went home in a batch of two or more (ot_movement_batched) */
  int stop;
  int plugged;         /* ot_movement_plug: entries queue but the thread leaves them until unplugged or waited on */
  int failed;          /* a transfer failed: everything after it is suspect */
  ot_status fail_status; /* OT_ERR_DEVICE, or OT_ERR_INTEGRITY (verify.h) */
  int verify;          /* OMPTENSOR_VERIFY level for this queue (0 unless kind is OT_MV_COPY) */
  char err[320];
  ot_mem_stream *stream; /* OT_MV_PREFETCH: the thread's own (memory/copy.h) */
  ot_mem_stream *home_stream; /* OT_MV_COPY on a GPU of a CUDA build: the batches' stream (run_home_batch); NULL:
                                 one blocking copy per piece */
};

/* One blocking transfer (memory/copy.h); 0, or -1 with why[] naming the
 * runtime call that failed. */
static int do_copy(ot_movement *m, const xfer *x, char *why, size_t why_len) {
  if (!x->bytes) return 0;
  if (x->rg && m->kind == OT_MV_COPY) {
    for (size_t i = 0; i < x->n_rg; i++)
      if (ot_mem_copy_raw((char *)x->dst + x->rg[2 * i], OT_DEVICE_HOST, (const char *)x->src + x->rg[2 * i], m->dev,
                          x->rg[2 * i + 1], why, why_len) != 0)
        return -1;
    return 0;
  }
  switch (m->kind) {
  case OT_MV_COPY:
    if (x->dir == XFER_UP) return ot_mem_copy_raw(x->dst, m->dev, x->src, x->home_dev, x->bytes, why, why_len);
    if (x->dir == XFER_DOWN) return ot_mem_copy_raw(x->dst, x->home_dev, x->src, m->dev, x->bytes, why, why_len);
    return 0;
  case OT_MV_PREFETCH:
    /* up: the pages to the device; a write-back: home. Advice is not
     * stream-ordered, but every prefetch before it on this thread has
     * completed (ot_mem_prefetch waits), and the kernels that read the
     * range ran before the executor queued it (they are synchronous). */
    switch (x->dir) {
    case XFER_UP: return ot_mem_prefetch(m->stream, x->dst, x->bytes, m->dev, why, why_len);
    case XFER_DOWN: return ot_mem_prefetch(m->stream, x->dst, x->bytes, OT_DEVICE_HOST, why, why_len);
    case XFER_ADVISE: return ot_mem_advise(x->src, x->bytes, (ot_mem_advice)x->advice, m->dev, why, why_len);
    case XFER_DISCARD: return ot_mem_discard(m->stream, x->src, x->bytes, why, why_len);
    case XFER_UP_DISK: return 0; /* transfer_from_disk; usm has no file homes (context.c) */
    }
  default: return 0;
  }
}

/* OMPTENSOR_VERIFY=2: the checksum of a device range, read back into a
 * scratch buffer (one more copy). 0 if it could not be read (no check). */
static int read_back(ot_movement *m, const void *dev_src, size_t bytes, uint64_t *sum) {
  void *tmp = malloc(bytes);
  if (!tmp) return 0;
  xfer rb = {NULL, XFER_DOWN, tmp, dev_src, bytes, NULL, NULL, NULL, (size_t)-1, 0, 0, NULL, 0, NULL, OT_DEVICE_HOST};
  char why[64];
  int ok = do_copy(m, &rb, why, sizeof why) == 0;
  if (ok) *sum = ot_checksum64(tmp, bytes);
  free(tmp);
  return ok;
}

/* One transfer with the integrity checks of verify.h around it. Returns
 * 0, or -1 with *st and why[] set (why: the complete message for an
 * integrity failure, the cause for a device failure). */
/* A file-homed weight: its read from the staging ring (disk.h), then the
 * copy; the ring space is released either way. */
static int transfer_from_disk(ot_movement *m, const xfer *x, ot_status *st, char *why, size_t why_len) {
  const void *src;
  size_t bytes;
  ot_status s = ot_disk_take(x->disk, &src, &bytes);
  if (s != OT_OK) {
    *st = s;
    snprintf(why, why_len, "%s", ot_last_error());
    return -1;
  }
  int rc = 0;
  if (x->bytes && ot_fault_hit(OT_FAULT_TRANSFER)) {
    snprintf(why, why_len, "injected by OMPTENSOR_FAULT");
    rc = -1;
  } else if (m->kind == OT_MV_COPY) {
    rc = ot_mem_copy_raw(x->dst, m->dev, src, OT_DEVICE_HOST, bytes, why, why_len);
  }
  ot_disk_release(x->disk);
  return rc;
}

static int transfer(ot_movement *m, const xfer *x, ot_status *st, char *why, size_t why_len) {
  *st = OT_ERR_DEVICE;
  if (x->dir == XFER_UP_DISK) return transfer_from_disk(m, x, st, why, why_len);
  /* OMPTENSOR_FAULT=transfer:N (core/fault.h) fails the N-th real transfer. */
  if ((x->dir == XFER_UP || x->dir == XFER_DOWN) && x->bytes && ot_fault_hit(OT_FAULT_TRANSFER)) {
    snprintf(why, why_len, "injected by OMPTENSOR_FAULT");
    return -1;
  }
  int v = x->rec && x->bytes && (x->dir == XFER_UP || x->dir == XFER_DOWN) ? m->verify : 0;
  uint64_t sum = 0, dev_sum;
  if (v && x->dir == XFER_UP) {
    sum = ot_checksum64(x->src, x->bytes);
    if (x->rec->has && x->rec->sum != sum) {
      *st = OT_ERR_INTEGRITY;
      snprintf(why, why_len,
               "integrity check (OMPTENSOR_VERIFY): the home of '%s' (%zu bytes) changed since it was last uploaded "
               "or written home (checksum %016llx, expected %016llx): it was modified without "
               "ot_sched_invalidate, or the memory is corrupt",
               x->name ? x->name : "?", x->bytes, (unsigned long long)sum, (unsigned long long)x->rec->sum);
      return -1;
    }
  }
  if (do_copy(m, x, why, why_len) != 0) return -1;
  if (!v) return 0;
  if (x->dir == XFER_DOWN) sum = ot_checksum64(x->dst, x->bytes);
  x->rec->sum = sum;
  x->rec->has = 1;
  if (v >= 2 && read_back(m, x->dir == XFER_UP ? x->dst : x->src, x->bytes, &dev_sum) && dev_sum != sum) {
    *st = OT_ERR_INTEGRITY;
    snprintf(why, why_len,
             "integrity check (OMPTENSOR_VERIFY=2): the device copy of '%s' (%zu bytes) differs from its home right "
             "after the %s (checksums %016llx and %016llx)",
             x->name ? x->name : "?", x->bytes, x->dir == XFER_UP ? "upload" : "write-back",
             (unsigned long long)dev_sum, (unsigned long long)sum);
    return -1;
  }
  return 0;
}

/* The queue's first failure (m->mu held): everything after it is suspect. */
static void failed_locked(ot_movement *m, const xfer *x, ot_status st, const char *why) {
  if (m->failed) return;
  m->failed = 1;
  m->fail_status = st;
  char dir[48];
  if (x->dir == XFER_UP || x->dir == XFER_UP_DISK) snprintf(dir, sizeof dir, "host -> device %d", m->dev);
  else snprintf(dir, sizeof dir, "device %d -> host", m->dev);
  if (st == OT_ERR_INTEGRITY) snprintf(m->err, sizeof m->err, "%s", why);
  else
    snprintf(m->err, sizeof m->err, "%s of '%s' (%zu bytes, %s) failed: %s",
             x->dir == XFER_UP || x->dir == XFER_UP_DISK ? "upload" : x->dir == XFER_DOWN ? "write-back" : x->dir == XFER_ADVISE ? "memory advice" : "discard",
             x->name ? x->name : "?", x->bytes, dir, why);
}

static void run_one(ot_movement *m, xfer *x) {
  if (m->delay_us) {
    struct timespec ts = {(time_t)(m->delay_us / 1000000u), (long)(m->delay_us % 1000000u) * 1000L};
    nanosleep(&ts, NULL);
  }
  uint64_t t0 = ot_now_ns();
  ot_status st;
  char why[256];
  int rc = transfer(m, x, &st, why, sizeof why);
  uint64_t t1 = ot_now_ns();
  if (x->tr && x->ev != (size_t)-1) ot_trace_set_times(x->tr, x->ev, t0, t1);
  pthread_mutex_lock(&m->mu);
  if (rc != 0) failed_locked(m, x, st, why);
  m->done = x->ticket;
  pthread_cond_broadcast(&m->done_cv);
  pthread_mutex_unlock(&m->mu);
}

/* Write-backs that may share one wait (run_home_batch): plain copies of
 * device memory home, without the checks of OMPTENSOR_VERIFY or a delay.
 * Batched on every build, so that the CPU builds' tests run the batching
 * (their copies are one blocking copy per piece: ot_mem_copy_home with no
 * stream); only a GPU of a CUDA build issues a batch on a stream. */
enum { HOME_BATCH_MAX = 256 };
static int batchable(const ot_movement *m, const xfer *x) {
  return m->kind == OT_MV_COPY && x->dir == XFER_DOWN && x->home_dev == OT_DEVICE_HOST && x->bytes && !m->delay_us &&
         !(x->rec && m->verify);
}

/* xs[0 .. n): write-backs in queue order, issued together and waited for
 * once (ot_mem_copy_home); each traced over the batch's time. An injected
 * fault (OMPTENSOR_FAULT=transfer:N) fails its own entry, as run_one does,
 * and the others are copied. */
static void run_home_batch(ot_movement *m, xfer **xs, int n) {
  size_t np = 0;
  for (int i = 0; i < n; i++) np += xs[i]->rg ? xs[i]->n_rg : 1;
  ot_mem_piece *pc = malloc((np ? np : 1) * sizeof *pc);
  if (!pc) { /* one at a time, as before */
    for (int i = 0; i < n; i++) run_one(m, xs[i]);
    return;
  }
  int faulted = -1;
  np = 0;
  for (int i = 0; i < n; i++) {
    const xfer *x = xs[i];
    if (ot_fault_hit(OT_FAULT_TRANSFER)) {
      if (faulted < 0) faulted = i;
      continue;
    }
    if (!x->rg) pc[np++] = (ot_mem_piece){x->dst, x->src, x->bytes};
    for (size_t r = 0; x->rg && r < x->n_rg; r++)
      pc[np++] = (ot_mem_piece){(char *)x->dst + x->rg[2 * r], (const char *)x->src + x->rg[2 * r], x->rg[2 * r + 1]};
  }
  const uint64_t t0 = ot_now_ns();
  char why[256];
  const int rc = ot_mem_copy_home(m->home_stream, m->dev, pc, np, why, sizeof why);
  const uint64_t t1 = ot_now_ns();
  free(pc);
  for (int i = 0; i < n; i++)
    if (xs[i]->tr && xs[i]->ev != (size_t)-1) ot_trace_set_times(xs[i]->tr, xs[i]->ev, t0, t1);
  pthread_mutex_lock(&m->mu);
  if (faulted >= 0) failed_locked(m, xs[faulted], OT_ERR_DEVICE, "injected by OMPTENSOR_FAULT");
  if (rc != 0) failed_locked(m, xs[0], OT_ERR_DEVICE, why);
  m->batched += (uint64_t)n;
  m->done = xs[n - 1]->ticket;
  pthread_cond_broadcast(&m->done_cv);
  pthread_mutex_unlock(&m->mu);
}

static void *worker(void *arg) {
  ot_movement *m = arg;
  if (m->kind == OT_MV_PREFETCH) ot_mem_bind_thread(m->dev);
  /* a stream of this thread's for batches of write-backs; none (NULL: one
   * blocking copy each) without the CUDA runtime or where it gives none */
  if (m->kind == OT_MV_COPY && ot_dev_is_gpu(m->dev)) {
    ot_mem_bind_thread(m->dev);
    if (ot_mem_stream_create(&m->home_stream) != 0) m->home_stream = NULL;
  }
  xfer *batch[HOME_BATCH_MAX];
  pthread_mutex_lock(&m->mu);
  for (;;) {
    while (!m->stop && (!m->head || m->plugged)) pthread_cond_wait(&m->work, &m->mu);
    if (!m->head) break;
    int n = 0;
    do { /* the first entry, and the write-backs right behind it that can share its wait */
      xfer *x = m->head;
      m->head = x->next;
      if (!m->head) m->tail = NULL;
      batch[n++] = x;
    } while (n < HOME_BATCH_MAX && batchable(m, batch[0]) && m->head && batchable(m, m->head));
    pthread_mutex_unlock(&m->mu);
    if (n > 1) run_home_batch(m, batch, n);
    else run_one(m, batch[0]);
    for (int i = 0; i < n; i++) {
      free(batch[i]->rg);
      free(batch[i]);
    }
    pthread_mutex_lock(&m->mu);
  }
  pthread_mutex_unlock(&m->mu);
  ot_mem_stream_destroy(m->home_stream);
  m->home_stream = NULL;
  return NULL;
}

ot_status ot_movement_create(ot_mv_kind kind, int dev, unsigned delay_us, ot_movement **out) {
  *out = NULL;
  ot_movement *m = calloc(1, sizeof *m);
  if (!m) return ot_fail(OT_ERR_OUT_OF_MEMORY, "transfer queue: no host memory");
  m->kind = kind;
  m->dev = dev;
  m->delay_us = delay_us;
  m->verify = kind == OT_MV_COPY ? ot_verify_level() : 0;
  pthread_mutex_init(&m->mu, NULL);
  pthread_cond_init(&m->work, NULL);
  pthread_cond_init(&m->done_cv, NULL);
  if (kind == OT_MV_PREFETCH && ot_mem_stream_create(&m->stream) != 0) {
    ot_movement_destroy(m);
    return ot_fail(OT_ERR_DEVICE, "usm backend: cannot create a CUDA stream for prefetches on device %d", dev);
  }
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
  ot_mem_stream_destroy(m->stream);
  pthread_cond_destroy(&m->work);
  pthread_cond_destroy(&m->done_cv);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

/* A wait must not wait on entries the plug holds back: it lifts the plug. */
static void unplug_locked(ot_movement *m) {
  if (!m->plugged) return;
  m->plugged = 0;
  pthread_cond_signal(&m->work);
}

void ot_movement_plug(ot_movement *m) {
  if (!m || m->kind == OT_MV_NONE) return;
  pthread_mutex_lock(&m->mu);
  m->plugged = 1;
  pthread_mutex_unlock(&m->mu);
}

void ot_movement_unplug(ot_movement *m) {
  if (!m || m->kind == OT_MV_NONE) return;
  pthread_mutex_lock(&m->mu);
  unplug_locked(m);
  pthread_mutex_unlock(&m->mu);
}

/* rg (may be NULL): ranges, owned by the entry from here on */
static uint64_t enqueue_x(ot_movement *m, xfer_dir dir, void *dst, const void *src, size_t bytes, const char *name,
                          ot_verify_rec *rec, ot_trace *tr, size_t ev, int advice, size_t *rg, size_t n_rg,
                          ot_disk *disk, int home_dev) {
  xfer local = {NULL, dir, dst, src, bytes, name, rec, tr, ev, 0, advice, rg, n_rg, disk, home_dev};
  if (m->kind == OT_MV_NONE) {
    uint64_t t = ot_now_ns();
    if (tr && ev != (size_t)-1) ot_trace_set_times(tr, ev, t, t);
    free(rg);
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
    if (!m->plugged) pthread_cond_signal(&m->work);
    pthread_mutex_unlock(&m->mu);
    return ticket;
  }
  /* No memory for a queue entry: wait for the queue, then copy here (keeps
   * the order). */
  unplug_locked(m);
  while (m->done + 1 < ticket) pthread_cond_wait(&m->done_cv, &m->mu);
  pthread_mutex_unlock(&m->mu);
  run_one(m, &local);
  free(rg);
  return ticket;
}

static uint64_t enqueue(ot_movement *m, xfer_dir dir, void *dst, const void *src, size_t bytes, const char *name,
                        ot_verify_rec *rec, ot_trace *tr, size_t ev) {
  return enqueue_x(m, dir, dst, src, bytes, name, rec, tr, ev, 0, NULL, 0, NULL, OT_DEVICE_HOST);
}

uint64_t ot_movement_upload(ot_movement *m, void *dev_dst, const void *home_src, size_t bytes, const char *name,
                            ot_verify_rec *rec, ot_trace *tr, size_t ev) {
  return enqueue(m, XFER_UP, dev_dst, home_src, bytes, name, rec, tr, ev);
}

uint64_t ot_movement_upload_disk(ot_movement *m, void *dev_dst, ot_disk *disk, size_t bytes, const char *name,
                                 ot_trace *tr, size_t ev) {
  return enqueue_x(m, XFER_UP_DISK, dev_dst, NULL, bytes, name, NULL, tr, ev, 0, NULL, 0, disk, OT_DEVICE_HOST);
}

uint64_t ot_movement_download(ot_movement *m, void *home_dst, const void *dev_src, size_t bytes, const char *name,
                              ot_verify_rec *rec, ot_trace *tr, size_t ev) {
  return enqueue(m, XFER_DOWN, home_dst, dev_src, bytes, name, rec, tr, ev);
}

uint64_t ot_movement_upload_peer(ot_movement *m, void *dev_dst, const void *src, int src_dev, size_t bytes,
                                 const char *name, ot_trace *tr, size_t ev) {
  return enqueue_x(m, XFER_UP, dev_dst, src, bytes, name, NULL, tr, ev, 0, NULL, 0, NULL, src_dev);
}

uint64_t ot_movement_download_peer(ot_movement *m, void *dst, int dst_dev, const void *dev_src, size_t bytes,
                                   const char *name, ot_trace *tr, size_t ev) {
  return enqueue_x(m, XFER_DOWN, dst, dev_src, bytes, name, NULL, tr, ev, 0, NULL, 0, NULL, dst_dev);
}

uint64_t ot_movement_download_ranges(ot_movement *m, void *home_dst, const void *dev_src, const size_t *rg, size_t n,
                                     size_t whole, const char *name, ot_trace *tr, size_t ev) {
  size_t bytes = 0;
  for (size_t i = 0; i < n; i++) bytes += rg[2 * i + 1];
  size_t *own = n ? malloc(n * 2 * sizeof *own) : NULL;
  if (n && !own) return enqueue(m, XFER_DOWN, home_dst, dev_src, whole, name, NULL, tr, ev);
  if (n) memcpy(own, rg, n * 2 * sizeof *own);
  return enqueue_x(m, XFER_DOWN, home_dst, dev_src, bytes, name, NULL, tr, ev, 0, own, n, NULL, OT_DEVICE_HOST);
}

uint64_t ot_movement_advise(ot_movement *m, const void *home, size_t bytes, int advice, const char *name) {
  if (m->kind != OT_MV_PREFETCH) return 0;
  return enqueue_x(m, XFER_ADVISE, NULL, home, bytes, name, NULL, NULL, (size_t)-1, advice, NULL, 0, NULL, OT_DEVICE_HOST);
}

uint64_t ot_movement_discard(ot_movement *m, const void *home, size_t bytes, const char *name) {
  if (m->kind != OT_MV_PREFETCH) return 0;
  return enqueue(m, XFER_DISCARD, NULL, home, bytes, name, NULL, NULL, (size_t)-1);
}

uint64_t ot_movement_batched(ot_movement *m) {
  pthread_mutex_lock(&m->mu);
  const uint64_t n = m->batched;
  pthread_mutex_unlock(&m->mu);
  return n;
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
  if (m->done < t) unplug_locked(m);
  while (m->done < t) pthread_cond_wait(&m->done_cv, &m->mu);
  int failed = m->failed;
  pthread_mutex_unlock(&m->mu);
  return failed ? ot_fail(m->fail_status, "%s", m->err) : OT_OK;
}

ot_status ot_movement_wait_all(ot_movement *m) {
  if (m->kind == OT_MV_NONE) return OT_OK;
  pthread_mutex_lock(&m->mu);
  uint64_t t = m->issued;
  pthread_mutex_unlock(&m->mu);
  return ot_movement_wait(m, t);
}
