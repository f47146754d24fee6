/* homes.c — lazy homes (tensor.h, ot_tensor_create_lazy). Why: a training
 * step's activations each had a pinned host home although most never leave
 * the device: 2.9 MB per token for GPT-2 350M, which, not the device
 * budget, capped the batch (bench/RESULTS.md, issue 7). A storage created
 * lazily gets its home here, when the finished plan shows it needs one:
 *   - the backend computes on homes (host, usm, a host device): all do;
 *   - OMPTENSOR_VERIFY checksums homes: all do;
 *   - it is marked (input, output, persistent) or its first access reads the
 *     run's starting value: the caller or the next run reads its home;
 *   - a schedule uploads or writes it home (an eviction of a live copy
 *     included), or keeps it resident between runs (ot_sched_sync writes
 *     such copies home);
 *   - it has no device block (empty) or a host op uses it (hybrid compute).
 * Everything else lives and dies in the device arena. */
#include <stdlib.h>

#include "core/error.h"
#include "memory/context_impl.h"
#include "memory/device.h"
#include "memory/tensor_impl.h"
#include "sched/plan_impl.h"
#include "sched/verify.h"

static void mark_schedule(const ot_schedule *s, unsigned char *need) {
  for (int i = 0; i < s->n_ev; i++)
    if (s->ev[i].kind == OT_EV_UPLOAD || s->ev[i].kind == OT_EV_DOWNLOAD) need[s->ev[i].st] = 1;
  for (int i = 0; i < s->n_start; i++) need[s->start[i].st] = 1;
}

ot_status ot_plan_homes(ot_plan *plan) {
  const ot_program *p = plan->src;
  if (plan->n_stages) return OT_OK; /* each stage's plan gave its storages theirs */
  const int all = plan->ctx->backend != OT_BACKEND_MAP || ot_dev_is_host(plan->dev) || ot_verify_level() > 0 ||
                  plan->prog->n_st != p->n_st;
  unsigned char *need = calloc((size_t)(p->n_st ? p->n_st : 1), 1);
  if (!need) return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_sched_plan: no host memory");
  if (!all) {
    const unsigned marked = OT_ROLE_INPUT | OT_ROLE_OUTPUT | OT_ROLE_PERSIST | OT_ROLE_NEEDS_HOME | OT_ROLE_WRITEBACK;
    for (int i = 0; i < p->n_st; i++) need[i] = (p->st[i].role & marked) || !plan->prog->st[i].block;
    mark_schedule(&plan->first, need);
    mark_schedule(&plan->steady, need);
    for (int o = 0; plan->host_op && o < p->n_ops; o++)
      if (plan->host_op[o])
        for (int k = 0; k < p->ops[o].n_acc; k++) need[p->ops[o].acc[k].st] = 1;
  }
  uint64_t made = 0, skipped = 0;
  ot_status s = OT_OK;
  for (int i = 0; s == OT_OK && i < p->n_st; i++) {
    ot_storage *st = p->st[i].st;
    if (!st->lazy) continue;
    if (!all && !need[i]) {
      if (!st->home) skipped += st->bytes;
      continue;
    }
    if (!st->home) {
      s = ot_storage_materialize(st);
      if (s != OT_OK) s = ot_fail_context(s, "the host home of '%s' (%zu bytes)", p->st[i].name, st->bytes);
    }
    made += st->bytes;
  }
  free(need);
  plan->first.stats.lazy_home_bytes = plan->steady.stats.lazy_home_bytes = made;
  plan->first.stats.lazy_skipped_bytes = plan->steady.stats.lazy_skipped_bytes = skipped;
  return s;
}
