/* dp.c — the gradient reduction of data-parallel training (dp.h): the ops
 * a step records per bucket, the host staging memory, and the comm thread
 * that runs the collectives while the compute thread goes on with the
 * backward.
 *
 * Every rank records the same program, and its ops run in program order,
 * so the starts queue the buckets in the same order on every rank; the
 * comm thread takes them first in, first out, so the collectives match
 * across ranks without any further agreement. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "omptensor/memory.h"
#include "train/dp.h"

typedef struct dp_bucket {
  int n;
  ot_tensor **t;       /* [n] the gradients */
  size_t total;        /* elements in all */
  float *send;         /* [total] this rank's bucket of the round; after the last, the sum */
  float *recv;         /* ORDERED: [size][seg] every rank's piece of this rank's segment */
  float *acc;          /* ORDERED: [seg] the running sum of this rank's segment */
  size_t seg_off, seg; /* ORDERED: this rank's segment */
  int queued, done;    /* rounds of this step handed to the comm thread / finished by it */
} dp_bucket;

typedef struct dp_job {
  int bucket, round;
} dp_job;

struct ot_dp {
  ot_dp_opts o;
  dp_bucket *b;
  int n_b;
  int dev;              /* the pinned staging memory's device */
  /* the comm thread and its queue (a ring of at most n_b * rounds jobs a step) */
  pthread_t thread;
  int started, stop;
  pthread_mutex_t mu;
  pthread_cond_t work, done;
  dp_job *q;
  int q_cap, q_head, q_len;
  ot_grad_reduce_stats st; /* under mu */
  ot_status err;        /* the comm thread's first failure, with its message: */
  char err_msg[512];    /* ot_last_error is per thread, so the waiting op raises it again */
};

typedef struct dp_params {
  ot_dp *d;
  int bucket, round;
} dp_params;

ot_status ot_dp_create(const ot_dp_opts *o, ot_dp **out) {
  *out = NULL;
  if (!o || !o->comm || (o->mode != OT_GRAD_ORDERED && o->mode != OT_GRAD_ALLREDUCE) || o->rounds < 1 ||
      (o->direct && o->mode != OT_GRAD_ALLREDUCE))
    return ot_set_error(OT_ERR_INVALID_ARG, "data parallel: a comm, a mode (ordered or allreduce), rounds >= 1, and "
                                            "direct only with allreduce");
  ot_dp *d = calloc(1, sizeof *d);
  if (!d) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "data parallel: no host memory");
  d->o = *o;
  if (o->mode == OT_GRAD_ALLREDUCE) d->o.rounds = 1;
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->work, NULL);
  pthread_cond_init(&d->done, NULL);
  *out = d;
  return OT_OK;
}

static void bucket_free(ot_dp *d, dp_bucket *b) {
  ot_mem_free(OT_MEM_PINNED, d->dev, b->send);
  free(b->recv);
  free(b->acc);
  free(b->t);
}

void ot_dp_destroy(ot_dp *d) {
  if (!d) return;
  if (d->started) {
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    pthread_cond_broadcast(&d->work);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->thread, NULL);
  }
  for (int i = 0; i < d->n_b; i++) bucket_free(d, &d->b[i]);
  free(d->b);
  free(d->q);
  pthread_cond_destroy(&d->work);
  pthread_cond_destroy(&d->done);
  pthread_mutex_destroy(&d->mu);
  free(d);
}

ot_status ot_dp_add_bucket(ot_dp *d, int n, ot_tensor *const *grads, int *id) {
  if (d->started) return ot_set_error(OT_ERR_STATE, "data parallel: a bucket added after the staging was made");
  dp_bucket *nb = realloc(d->b, (size_t)(d->n_b + 1) * sizeof *nb);
  if (!nb) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "data parallel: no host memory");
  d->b = nb;
  dp_bucket *b = &d->b[d->n_b];
  memset(b, 0, sizeof *b);
  b->t = malloc((size_t)n * sizeof *b->t);
  if (!b->t) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "data parallel: no host memory");
  for (int k = 0; k < n; k++) {
    if (ot_tensor_dtype(grads[k]) != OT_F32 || !ot_tensor_is_contiguous(grads[k])) {
      free(b->t);
      return ot_set_error(OT_ERR_DTYPE, "data parallel: gradient '%s' must be contiguous f32",
                          ot_tensor_name(grads[k]));
    }
    b->t[k] = grads[k];
    b->total += (size_t)ot_tensor_numel(grads[k]);
  }
  b->n = n;
  *id = d->n_b++;
  return OT_OK;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

ot_grad_reduce_stats ot_dp_stats(ot_dp *d) {
  pthread_mutex_lock(&d->mu);
  ot_grad_reduce_stats s = d->st;
  pthread_mutex_unlock(&d->mu);
  return s;
}

/* ---- the comm thread ---- */

/* One round of one bucket; the collective calls of every rank in the
 * same order (dp.c's header). */
static ot_status reduce(ot_dp *d, dp_bucket *b, int round) {
  ot_comm *c = d->o.comm;
  if (d->o.mode == OT_GRAD_ALLREDUCE) return ot_comm_allreduce_f32(c, b->send, b->total);
  OT_TRY(ot_comm_exchange(c, b->send, b->total, b->recv));
  const int R = ot_comm_size(c);
  float *acc = b->acc;
  const size_t n = b->seg;
  /* The pieces in rank order = the global micro-batches of the round in
   * order: one addition after another for every element, the same ones
   * for any number of ranks (dp.h). */
  for (int q = 0; q < R; q++) {
    const float *x = b->recv + (size_t)q * n;
    if (round == 0 && q == 0) memcpy(acc, x, n * sizeof *acc);
    else
      for (size_t i = 0; i < n; i++) acc[i] += x[i];
  }
  if (round < d->o.rounds - 1) return OT_OK;
  memcpy(b->send + b->seg_off, acc, n * sizeof *acc);
  return ot_comm_gather_segments(c, b->send, b->total);
}

static void *comm_thread(void *arg) {
  ot_dp *d = arg;
  pthread_mutex_lock(&d->mu);
  for (;;) {
    while (!d->stop && d->q_len == 0) pthread_cond_wait(&d->work, &d->mu);
    if (d->q_len == 0) break; /* stopped, nothing left */
    dp_job j = d->q[d->q_head];
    d->q_head = (d->q_head + 1) % d->q_cap;
    d->q_len--;
    const int failed = d->err != OT_OK;
    pthread_mutex_unlock(&d->mu);
    const double t0 = now_s();
    ot_status st = failed ? OT_OK : reduce(d, &d->b[j.bucket], j.round);
    const double t = now_s() - t0;
    pthread_mutex_lock(&d->mu);
    d->st.reduce_s += t;
    d->st.rounds++;
    if (st != OT_OK && d->err == OT_OK) {
      d->err = st;
      snprintf(d->err_msg, sizeof d->err_msg, "%s", ot_last_error());
    }
    d->b[j.bucket].done = j.round + 1;
    pthread_cond_broadcast(&d->done);
  }
  pthread_mutex_unlock(&d->mu);
  return NULL;
}

ot_status ot_dp_prepare(ot_dp *d, int dev) {
  if (d->started) return OT_OK;
  d->dev = dev;
  ot_comm *c = d->o.comm;
  const int R = ot_comm_size(c), me = ot_comm_rank(c);
  for (int i = 0; i < d->n_b && !d->o.direct; i++) {
    dp_bucket *b = &d->b[i];
    OT_TRY(ot_mem_alloc(OT_MEM_PINNED, dev, b->total * sizeof(float), (void **)&b->send));
    if (d->o.mode != OT_GRAD_ORDERED) continue;
    ot_comm_segment(c, b->total, me, &b->seg_off, &b->seg);
    b->recv = malloc((size_t)R * (b->seg ? b->seg : 1) * sizeof *b->recv);
    b->acc = malloc((b->seg ? b->seg : 1) * sizeof *b->acc);
    if (!b->recv || !b->acc)
      return ot_set_error(OT_ERR_OUT_OF_MEMORY, "data parallel: no host memory for the staging of %zu gradients",
                          b->total);
  }
  if (d->o.direct) return OT_OK;
  d->q_cap = d->n_b * d->o.rounds + 1;
  d->q = malloc((size_t)d->q_cap * sizeof *d->q);
  if (!d->q) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "data parallel: no host memory");
  if (pthread_create(&d->thread, NULL, comm_thread, d) != 0)
    return ot_set_error(OT_ERR_OUT_OF_MEMORY, "data parallel: cannot start the thread that reduces the gradients");
  d->started = 1;
  return OT_OK;
}

/* ---- the ops ---- */

static ot_status raise_err(ot_dp *d) {
  return ot_set_error(d->err, "the gradient reduction across %d ranks failed: %s", ot_comm_size(d->o.comm),
                      d->err_msg);
}

/* Waits until bucket b has finished `rounds` rounds of this step (reset:
 * a new step starts, the last one's wait saw every round done), the time
 * counted as waited for. */
static ot_status wait_rounds(ot_dp *d, dp_bucket *b, int rounds, int reset) {
  const double t0 = now_s();
  pthread_mutex_lock(&d->mu);
  if (reset) b->queued = b->done = 0;
  while (b->done < rounds && d->err == OT_OK) pthread_cond_wait(&d->done, &d->mu);
  const ot_status err = d->err;
  d->st.wait_s += now_s() - t0;
  pthread_mutex_unlock(&d->mu);
  return err == OT_OK ? OT_OK : raise_err(d);
}

/* The bucket's tensors (the op's views) to the staging memory or back. */
static ot_status stage(ot_dp *d, const ot_op_exec *e, dp_bucket *b, int to_host) {
  const double t0 = now_s();
  size_t at = 0;
  for (int k = 0; k < b->n; k++) {
    const size_t bytes = ot_tensor_nbytes(to_host ? e->in_t[k] : e->out_t[k]);
    OT_TRY(to_host ? ot_mem_copy(b->send + at, OT_DEVICE_HOST, e->in[k], e->device, bytes)
                   : ot_mem_copy(e->out[k], e->device, b->send + at, OT_DEVICE_HOST, bytes));
    at += bytes / sizeof(float);
  }
  pthread_mutex_lock(&d->mu);
  d->st.copy_s += now_s() - t0;
  if (to_host) d->st.bytes += at * sizeof(float);
  pthread_mutex_unlock(&d->mu);
  return OT_OK;
}

/* Copies the bucket into the staging memory and queues it. The previous
 * round of the same bucket must have left the staging memory first. */
static ot_status run_start(const ot_op_exec *e) {
  const dp_params *p = e->params;
  ot_dp *d = p->d;
  dp_bucket *b = &d->b[p->bucket];
  if (!d->started) return ot_set_error(OT_ERR_STATE, "data parallel: ot_dp_prepare was not called");
  OT_TRY(wait_rounds(d, b, p->round, p->round == 0));
  OT_TRY(stage(d, e, b, 1));
  pthread_mutex_lock(&d->mu);
  d->q[(d->q_head + d->q_len) % d->q_cap] = (dp_job){p->bucket, p->round};
  d->q_len++;
  b->queued = p->round + 1;
  pthread_cond_signal(&d->work);
  pthread_mutex_unlock(&d->mu);
  return OT_OK;
}

/* Waits for the bucket's last round and copies the sum back. Running it
 * again gives the same bytes (the staging memory stays until the next
 * step's first start), so a plan may run it twice to rebuild a gradient. */
static ot_status run_wait(const ot_op_exec *e) {
  const dp_params *p = e->params;
  ot_dp *d = p->d;
  dp_bucket *b = &d->b[p->bucket];
  OT_TRY(wait_rounds(d, b, d->o.rounds, 0));
  return stage(d, e, b, 0);
}

/* direct: MPI on the device memory itself, in place, on the compute thread. */
static ot_status run_direct(const ot_op_exec *e) {
  const dp_params *p = e->params;
  ot_dp *d = p->d;
  const double t0 = now_s();
  for (int k = 0; k < e->n_out; k++)
    OT_TRY(ot_comm_allreduce_f32(d->o.comm, e->out[k], (size_t)ot_tensor_numel(e->out_t[k])));
  const double t = now_s() - t0;
  pthread_mutex_lock(&d->mu);
  d->st.reduce_s += t;
  d->st.wait_s += t;
  d->st.rounds++;
  pthread_mutex_unlock(&d->mu);
  return OT_OK;
}

static ot_status record(ot_dp *d, ot_program *p, int id, int round, const char *kind, ot_op_fn fn, int reads,
                        int writes) {
  dp_bucket *b = &d->b[id];
  dp_params prm = {d, id, round};
  char name[64];
  snprintf(name, sizeof name, "%s.%d", kind, id);
  ot_op_desc desc = {.name = name, .run = fn, .n_in = reads ? b->n : 0, .in = b->t, .n_out = writes ? b->n : 0,
                     .out = b->t, .params = &prm, .params_bytes = sizeof prm,
                     .bytes = (double)b->total * sizeof(float)};
  return ot_program_add_op(p, &desc);
}

ot_status ot_dp_record_start(ot_dp *d, ot_program *p, int id, int round) {
  if (d->o.direct) return record(d, p, id, round, "dp_allreduce", run_direct, 1, 1);
  return record(d, p, id, round, "dp_start", run_start, 1, 0);
}

ot_status ot_dp_record_wait(ot_dp *d, ot_program *p, int id) {
  if (d->o.direct) return OT_OK;
  return record(d, p, id, d->o.rounds - 1, "dp_wait", run_wait, 0, 1);
}
