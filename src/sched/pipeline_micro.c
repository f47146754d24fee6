/* pipeline_micro.c — running a pipeline's stages: one after another for a
 * run (ot_pipeline_run), or several runs in flight at once, a different
 * micro-batch in each stage, a thread per stage (ot_sched_run_micro; sched.h,
 * "Micro-batches"). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "memory/context_impl.h"
#include "memory/device.h"
#include "memory/tensor_impl.h"
#include "omptensor/memory.h"
#include "sched/executor.h"
#include "sched/program_impl.h"
#include "sched/pipeline.h"
#include "sched/trace_impl.h"

/* The program's own home of storage s (made now if it is lazy). */
static ot_status home_of(const ot_program *p, int s, unsigned char **out) {
  OT_TRY(ot_storage_materialize(p->st[s].st));
  *out = p->st[s].st->home;
  return OT_OK;
}

/* Where the value of storage s is between stages: packet pk, or with pk
 * NULL (one run at a time) the program's own home. */
static ot_status value_of(const ot_plan *plan, unsigned char *pk, int s, unsigned char **out) {
  if (!pk) return home_of(plan->prog, s, out);
  *out = pk + plan->pk_off[s];
  return OT_OK;
}

static int64_t *packet_scalars(const ot_plan *plan, unsigned char *pk) {
  return (int64_t *)(void *)(pk + plan->pk_bytes - (size_t)plan->prog->n_scalars * sizeof(int64_t));
}

/* A value crossing device to device (h->peer) in micro-batch m: mine's home
 * becomes the micro-batch's mailbox on the reading stage's device for the
 * stage's run (on = 1), and its host home again after it (on = 0). Only
 * this stage's thread touches mine. */
static void mailbox_swap(ot_plan *plan, ot_stage_home *h, int m, int on) {
  ot_storage *sto = h->mine->st;
  if (!on) {
    sto->home = h->host_home;
    sto->home_on = 0;
    return;
  }
  const ot_stage *rd = &plan->stages[h->mail_stage];
  h->host_home = sto->home;
  sto->home = (char *)rd->mail + (size_t)(m % rd->mail_slots) * rd->mail_slot_bytes + h->mail_off;
  sto->home_on = ot_omp_device(plan->ctx->dev[rd->dev_index]) + 1;
}

/* Stage k runs once: its scalars and (micro-batched) its private homes from
 * pk, its results back into pk; values crossing device to device go through
 * micro-batch m's mailboxes instead (pk only). run_no: the run's number in
 * the trace (the first stage opens it). */
static ot_status stage_run(ot_plan *plan, int k, unsigned char *pk, int m, int run_no, ot_trace *trace) {
  const ot_program *p = plan->prog;
  ot_stage *st = &plan->stages[k];
  if (p->n_scalars) /* the scalars set for this run */
    memcpy(st->sub->scalars, pk ? packet_scalars(plan, pk) : p->scalars, (size_t)p->n_scalars * sizeof *p->scalars);
  for (int i = 0; i < st->n_homes; i++) {
    ot_stage_home *h = &st->homes[i];
    unsigned char *v;
    if (h->peer && pk) {
      mailbox_swap(plan, h, m, 1);
      continue;
    }
    if (!h->in) continue;
    OT_TRY(value_of(plan, pk, h->st, &v));
    memcpy(h->mine->st->home, v, p->st[h->st].bytes);
  }
  ot_status s = ot_exec_run(st->plan, trace, k ? run_no : -1);
  for (int i = 0; i < st->n_homes; i++) {
    ot_stage_home *h = &st->homes[i];
    unsigned char *v;
    if (h->peer && pk) {
      mailbox_swap(plan, h, m, 0);
      continue;
    }
    if (!h->out || s != OT_OK) continue;
    s = value_of(plan, pk, h->st, &v);
    if (s == OT_OK) memcpy(v, h->mine->st->home, p->st[h->st].bytes);
  }
  return s;
}

ot_status ot_pipeline_run(ot_plan *plan, ot_trace *trace) {
  const int run_no = trace ? ot_trace_next_run(trace) : 0;
  for (int k = 0; k < plan->n_stages; k++) OT_TRY(stage_run(plan, k, NULL, 0, run_no, trace));
  return OT_OK;
}

/* ---- micro-batches in flight ---- */

typedef struct flight {
  ot_plan *plan;
  int n, run0;
  ot_trace *trace;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int *done;         /* [n_stages] micro-batches each stage has finished */
  int failed;
  ot_status err;
  char msg[1024];    /* the failing thread's message (messages are per thread) */
} flight;

typedef struct worker {
  flight *F;
  int k;
  pthread_t th;
} worker;

/* Does stage k have to wait before micro-batch m: the stage before has not
 * finished m, or a mailbox slot m would write into still holds micro-batch
 * m - slots for a later stage that has not finished it? */
static int must_wait(const flight *F, int k, int m) {
  const ot_plan *plan = F->plan;
  if (k > 0 && F->done[k - 1] <= m) return 1;
  for (int i = 0; i < plan->stages[k].n_homes; i++) {
    const ot_stage_home *h = &plan->stages[k].homes[i];
    if (h->peer && h->out && F->done[h->mail_stage] <= m - plan->stages[h->mail_stage].mail_slots) return 1;
  }
  return 0;
}

/* Stage k takes micro-batches 0..n-1 in order, each as soon as stage k - 1
 * is done with it (and its mailbox slot is free); the first failure stops
 * every stage at its next one. */
static void stage_loop(flight *F, int k) {
  ot_plan *plan = F->plan;
  for (int m = 0; m < F->n; m++) {
    pthread_mutex_lock(&F->mu);
    while (!F->failed && must_wait(F, k, m)) pthread_cond_wait(&F->cv, &F->mu);
    const int stop = F->failed;
    pthread_mutex_unlock(&F->mu);
    if (stop) return;
    ot_status s = stage_run(plan, k, plan->packets + (size_t)m * plan->pk_bytes, m, F->run0 + m, F->trace);
    if (s != OT_OK)
      s = ot_fail_context(s, "micro-batch %d of %d, pipeline stage %d (device %d)", m, F->n, k,
                          plan->ctx->dev[plan->stages[k].dev_index]);
    pthread_mutex_lock(&F->mu);
    if (s != OT_OK && !F->failed) {
      F->failed = 1;
      F->err = s;
      snprintf(F->msg, sizeof F->msg, "%s", ot_last_error());
    }
    if (s == OT_OK) F->done[k]++;
    pthread_cond_broadcast(&F->cv);
    pthread_mutex_unlock(&F->mu);
    if (s != OT_OK) return;
  }
}

static void *stage_thread(void *arg) {
  worker *w = arg;
  stage_loop(w->F, w->k);
  return NULL;
}

/* Copies between the program's homes and packet m: `what` roles. */
static ot_status pack(ot_plan *plan, int m, unsigned what, int to_packet) {
  const ot_program *p = plan->prog;
  unsigned char *pk = plan->packets + (size_t)m * plan->pk_bytes;
  for (int s = 0; s < p->n_st; s++) {
    if (plan->pk_off[s] == SIZE_MAX || !(p->st[s].role & what)) continue;
    unsigned char *home;
    OT_TRY(home_of(p, s, &home));
    if (to_packet) memcpy(pk + plan->pk_off[s], home, p->st[s].bytes);
    else memcpy(home, pk + plan->pk_off[s], p->st[s].bytes);
  }
  if (to_packet && p->n_scalars) memcpy(packet_scalars(plan, pk), p->scalars, (size_t)p->n_scalars * sizeof *p->scalars);
  return OT_OK;
}

static ot_status fly(ot_plan *plan, int n, ot_trace *trace) {
  const int S = plan->n_stages;
  flight F = {.plan = plan, .n = n, .run0 = trace ? ot_trace_next_run(trace) : 0, .trace = trace};
  worker *w = calloc((size_t)S, sizeof *w);
  F.done = calloc((size_t)S, sizeof *F.done);
  if (!w || !F.done) {
    free(w);
    free(F.done);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_sched_run_micro: no host memory");
  }
  pthread_mutex_init(&F.mu, NULL);
  pthread_cond_init(&F.cv, NULL);
  int started = 1; /* stage 0 runs on the calling thread */
  for (; started < S; started++) {
    w[started] = (worker){.F = &F, .k = started};
    if (pthread_create(&w[started].th, NULL, stage_thread, &w[started])) {
      pthread_mutex_lock(&F.mu);
      F.failed = 1;
      F.err = ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_sched_run_micro: could not start the thread of pipeline stage %d",
                      started);
      snprintf(F.msg, sizeof F.msg, "%s", ot_last_error());
      pthread_cond_broadcast(&F.cv);
      pthread_mutex_unlock(&F.mu);
      break;
    }
  }
  if (!F.failed) stage_loop(&F, 0);
  for (int k = 1; k < started; k++) pthread_join(w[k].th, NULL);
  pthread_cond_destroy(&F.cv);
  pthread_mutex_destroy(&F.mu);
  free(w);
  free(F.done);
  if (F.failed) return ot_set_error(F.err, "%s", F.msg);
  return OT_OK;
}

ot_status ot_sched_run_micro(ot_plan *plan, int n, ot_micro_fn fill, ot_micro_fn take, void *user, ot_trace *trace) {
  if (!plan || !fill) return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_run_micro: plan or fill is NULL");
  if (n < 1) return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_run_micro: %d micro-batches; give at least 1", n);
  if (!plan->micro) { /* one device, or stages sharing homes: one run after another */
    for (int m = 0; m < n; m++) {
      OT_TRY(fill(user, m));
      OT_TRY(ot_sched_run(plan, trace));
      if (take) OT_TRY(take(user, m));
    }
    return OT_OK;
  }
  OT_TRY(ot_exec_runnable(plan, "ot_sched_run_micro"));
  for (int k = 0; k < plan->n_stages; k++) { /* the mailboxes, once (their bytes are in the stage's budget) */
    ot_stage *st = &plan->stages[k];
    if (!st->n_mail || st->mail) continue;
    ot_status s = ot_mem_alloc(OT_MEM_DEVICE, plan->ctx->dev[st->dev_index],
                               (size_t)st->mail_slots * st->mail_slot_bytes, &st->mail);
    if (s != OT_OK)
      return ot_fail_context(s, "ot_sched_run_micro: the mailboxes of pipeline stage %d (%d values x %d micro-batches)",
                             k, st->n_mail, st->mail_slots);
  }
  if (plan->n_packets < n) {
    unsigned char *g = realloc(plan->packets, (size_t)n * plan->pk_bytes);
    if (!g)
      return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_sched_run_micro: no host memory for %d packets of %zu bytes", n,
                     plan->pk_bytes);
    plan->packets = g;
    plan->n_packets = n;
  }
  for (int m = 0; m < n; m++) {
    OT_TRY(fill(user, m));
    OT_TRY(pack(plan, m, OT_ROLE_INPUT | OT_ROLE_NEEDS_HOME, 1)); /* what a run starts from */
  }
  OT_TRY(fly(plan, n, trace));
  for (int m = 0; m < n; m++) {
    OT_TRY(pack(plan, m, OT_ROLE_WRITEBACK, 0));
    if (take) OT_TRY(take(user, m));
  }
  return OT_OK;
}
