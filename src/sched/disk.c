/* disk.c — the reader thread and its staging ring (disk.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "memory/context_impl.h"
#include "memory/diskfile.h"
#include "omptensor/memory.h"
#include "sched/disk.h"
#include "sched/trace_impl.h"

typedef struct rd_req {
  struct rd_req *next;
  ot_disk_file *file; /* referenced while queued */
  uint64_t off;
  size_t bytes, span, pos, pad; /* pad: the ring's tail left unused when this read wrapped to 0 */
  uint64_t a0;
  const char *name;
  ot_trace *tr;
  size_t ev;
  int state; /* 0 queued, 1 reading, 2 done */
  ot_status st;
  char err[400];
} rd_req;

struct ot_disk {
  ot_ctx *ctx;
  int dev;
  char *ring;  /* OT_DISK_ALIGN-aligned (O_DIRECT) inside raw */
  void *raw;   /* the pinned allocation: cap + OT_DISK_ALIGN (pageable memory, without CUDA, is not page aligned) */
  size_t cap, used, wpos;
  pthread_t thread;
  int started, stop;
  pthread_mutex_t mu;
  pthread_cond_t work, done; /* work: a read queued or ring space freed; done: a read finished */
  rd_req *head, *tail;       /* oldest not taken .. newest */
  rd_req *next;              /* the next to read */
  int n;
};

static void req_free(rd_req *q) {
  ot_disk_file_unref(q->file);
  free(q);
}

/* Space for q's span: at wpos, or at 0 leaving the ring's end unused (q's
 * pad). 1 if placed. While reads are untaken, the occupied bytes run
 * circularly from the oldest one's start (its pos less its pad) to wpos. */
static int ring_place(ot_disk *d, rd_req *q) {
  q->pad = 0;
  if (d->used == 0) {
    d->wpos = q->pos = 0; /* empty: a span never exceeds the ring (ot_disk_queue) */
  } else {
    /* used > 0: the oldest untaken read is placed (reads are placed in order) */
    const size_t oldest = (d->head->pos + d->cap - d->head->pad) % d->cap;
    if (d->wpos > oldest) { /* free: [wpos, cap), then [0, oldest) */
      if (d->cap - d->wpos >= q->span) q->pos = d->wpos;
      else if (oldest >= q->span) q->pos = 0, q->pad = d->cap - d->wpos;
      else return 0;
    } else if (oldest - d->wpos >= q->span) { /* free: [wpos, oldest) */
      q->pos = d->wpos;
    } else {
      return 0;
    }
  }
  d->used += q->pad + q->span;
  d->wpos = q->pos + q->span;
  return 1;
}

static void *reader(void *arg) {
  ot_disk *d = arg;
  pthread_mutex_lock(&d->mu);
  for (;;) {
    while (!d->stop && (!d->next || !ring_place(d, d->next))) pthread_cond_wait(&d->work, &d->mu);
    if (d->stop) break;
    rd_req *q = d->next;
    d->next = q->next;
    q->state = 1;
    const uint64_t host = ot_ctx_host_bytes(d->ctx);
    pthread_mutex_unlock(&d->mu);
    const uint64_t t0 = ot_now_ns();
    ot_status s = ot_disk_file_read_aligned(q->file, d->ring + q->pos, q->off, q->bytes, q->name);
    const uint64_t t1 = ot_now_ns();
    if (s != OT_OK) snprintf(q->err, sizeof q->err, "%s", ot_last_error());
    if (q->tr && q->ev != (size_t)-1) {
      ot_trace_set_times(q->tr, q->ev, t0, t1);
      ot_trace_set_host_bytes(q->tr, q->ev, host);
    }
    pthread_mutex_lock(&d->mu);
    q->st = s;
    q->state = 2;
    pthread_cond_broadcast(&d->done);
  }
  pthread_mutex_unlock(&d->mu);
  return NULL;
}

ot_status ot_disk_create(ot_ctx *ctx, size_t ring_bytes, ot_disk **out) {
  *out = NULL;
  ot_disk *d = calloc(1, sizeof *d);
  if (!d) return ot_fail(OT_ERR_OUT_OF_MEMORY, "disk reader: no host memory");
  d->ctx = ctx;
  d->dev = ctx->dev[0];
  d->cap = (ring_bytes + OT_DISK_ALIGN - 1) / OT_DISK_ALIGN * OT_DISK_ALIGN;
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->work, NULL);
  pthread_cond_init(&d->done, NULL);
  ot_status s = ot_mem_alloc(OT_MEM_PINNED, d->dev, d->cap + OT_DISK_ALIGN, &d->raw);
  if (s != OT_OK) {
    ot_disk_destroy(d);
    return ot_fail_context(s, "the staging ring for weights read from disk (%zu bytes)", ring_bytes);
  }
  atomic_fetch_add(&ctx->host_bytes, d->cap + OT_DISK_ALIGN);
  d->ring = (char *)d->raw + (OT_DISK_ALIGN - (uintptr_t)d->raw % OT_DISK_ALIGN) % OT_DISK_ALIGN;
  if (pthread_create(&d->thread, NULL, reader, d) != 0) {
    ot_disk_destroy(d);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "cannot start the disk reader thread");
  }
  d->started = 1;
  *out = d;
  return OT_OK;
}

static void drop_all(ot_disk *d) {
  for (rd_req *q = d->head, *nx; q; q = nx) {
    nx = q->next;
    req_free(q);
  }
  d->head = d->tail = d->next = NULL;
  d->n = 0;
  d->used = d->wpos = 0;
}

void ot_disk_destroy(ot_disk *d) {
  if (!d) return;
  if (d->started) {
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    pthread_cond_broadcast(&d->work);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->thread, NULL);
  }
  drop_all(d);
  if (d->raw) {
    ot_mem_free(OT_MEM_PINNED, d->dev, d->raw);
    atomic_fetch_sub(&d->ctx->host_bytes, d->cap + OT_DISK_ALIGN);
  }
  pthread_cond_destroy(&d->work);
  pthread_cond_destroy(&d->done);
  pthread_mutex_destroy(&d->mu);
  free(d);
}

ot_status ot_disk_queue(ot_disk *d, const ot_storage *st, const char *name, ot_trace *tr, size_t ev) {
  rd_req *q = calloc(1, sizeof *q);
  if (!q) return ot_fail(OT_ERR_OUT_OF_MEMORY, "disk reader: no host memory to queue '%s'", name);
  q->file = ot_disk_file_ref(st->file);
  q->off = st->file_off;
  q->bytes = st->bytes;
  q->span = ot_disk_span(q->off, q->bytes, &q->a0);
  q->name = name;
  q->tr = tr;
  q->ev = ev;
  if (q->span > d->cap) {
    req_free(q);
    return ot_fail(OT_ERR_STATE, "'%s' (%zu bytes read) does not fit the staging ring of %zu bytes (homes.c bug)", name,
                   q->span, d->cap);
  }
  pthread_mutex_lock(&d->mu);
  if (d->tail) d->tail->next = q;
  else d->head = q;
  d->tail = q;
  if (!d->next) d->next = q;
  d->n++;
  pthread_cond_signal(&d->work);
  pthread_mutex_unlock(&d->mu);
  return OT_OK;
}

ot_status ot_disk_take(ot_disk *d, const void **data, size_t *bytes) {
  pthread_mutex_lock(&d->mu);
  rd_req *q = d->head;
  if (!q) {
    pthread_mutex_unlock(&d->mu);
    return ot_fail(OT_ERR_STATE, "disk reader: an upload from disk with no read queued (executor bug)");
  }
  while (q->state != 2 && !d->stop) pthread_cond_wait(&d->done, &d->mu);
  ot_status s = q->state == 2 ? q->st : OT_ERR_STATE;
  pthread_mutex_unlock(&d->mu);
  if (s != OT_OK) {
    ot_set_error(s, "%s", q->err[0] ? q->err : "disk reader stopped");
    ot_disk_release(d);
    return s;
  }
  *data = d->ring + q->pos + (q->off - q->a0);
  *bytes = q->bytes;
  return OT_OK;
}

void ot_disk_release(ot_disk *d) {
  pthread_mutex_lock(&d->mu);
  rd_req *q = d->head;
  if (q) {
    d->head = q->next;
    if (!d->head) d->tail = NULL;
    d->used -= q->pad + q->span;
    d->n--;
    req_free(q);
    pthread_cond_signal(&d->work);
  }
  pthread_mutex_unlock(&d->mu);
}

int ot_disk_pending(ot_disk *d) {
  pthread_mutex_lock(&d->mu);
  int n = d->n;
  pthread_mutex_unlock(&d->mu);
  return n;
}

void ot_disk_cancel(ot_disk *d) {
  if (!d) return;
  pthread_mutex_lock(&d->mu);
  d->next = NULL; /* nothing new starts */
  for (rd_req *q = d->head; q; q = q->next)
    while (q->state == 1) pthread_cond_wait(&d->done, &d->mu);
  drop_all(d);
  pthread_mutex_unlock(&d->mu);
}

size_t ot_disk_ring_bytes(const ot_disk *d) { return d ? d->cap : 0; }

size_t ot_disk_ring_footprint(size_t ring_bytes) {
  return ring_bytes ? (ring_bytes + OT_DISK_ALIGN - 1) / OT_DISK_ALIGN * OT_DISK_ALIGN + OT_DISK_ALIGN : 0;
}
