/* plan_print.c — every decision of a plan with its reason
 * (ot_plan_print, OMPTENSOR_DEBUG=plan). */
#include <stdio.h>

#include "sched/plan_impl.h"

static void print_event(FILE *f, const ot_plan *plan, const ot_plan_event *e) {
  const ot_program *p = plan->prog;
  const ot_prog_storage *s = &p->st[e->st];
  int n = p->n_ops;
  static const char *const kind[] = {"download", "free", "upload", "alloc", "recompute"};
  fprintf(f, "    %-8s %-24s [%zu, +%zu) ", kind[e->kind], s->name, e->off, e->block);
  switch ((ot_ev_reason)e->why) {
  case OT_WHY_FIRST_USE: fprintf(f, "op #%d reads it; first use", e->op); break;
  case OT_WHY_RELOAD: fprintf(f, "op #%d reads it; evicted earlier", e->op); break;
  case OT_WHY_OUTPUT: fprintf(f, "op #%d writes all of it; nothing to copy", e->op); break;
  case OT_WHY_DEAD: fprintf(f, "dead: last use was op #%d", s->last_use); break;
  case OT_WHY_EVICT:
  case OT_WHY_RELOCATE:
    if (e->kind == OT_EV_DOWNLOAD) {
      fprintf(f, "dirty and used again: written home before eviction");
      break;
    }
    fprintf(f, "%s for '%s' at op #%d; next use %s#%d%s", e->why == OT_WHY_EVICT ? "evicted" : "relocated",
            e->for_st >= 0 ? p->st[e->for_st].name : "?", e->op, e->next_use >= n ? "next run op " : "op ",
            e->next_use >= n ? e->next_use - n : e->next_use,
            e->flags & OT_TRACE_CLEAN_DROP ? " (clean: dropped without write-back)"
            : e->flags & OT_TRACE_RECOMPUTE ? " (dropped without write-back: recomputed before it)"
                                            : "");
    break;
  case OT_WHY_LAST_WRITE: fprintf(f, "output/persistent: home after its last write (op #%d)", s->last_write); break;
  case OT_WHY_NOT_KEPT: fprintf(f, "not in the set kept between runs"); break;
  case OT_WHY_ALL_RESIDENT: fprintf(f, "strategy none: resident for the whole run"); break;
  case OT_WHY_KEEP_SET: fprintf(f, "into the set kept between runs (the handed-over copies were elsewhere)"); break;
  case OT_WHY_CROSS: fprintf(f, "host op reads it next (after op #%d)", e->op); break;
  case OT_WHY_HOST_WRITE: fprintf(f, "host op #%d writes its home: the copy is stale", e->op); break;
  case OT_WHY_RECOMPUTE:
    fprintf(f, "op #%d reads it; dropped earlier: op #%d %s runs again to rebuild it", e->op, e->src_op,
            p->ops[e->src_op].name);
    break;
  case OT_WHY_RECOMPUTE_MORE:
    fprintf(f, "  then op #%d %s, which wrote into it, again", e->src_op, p->ops[e->src_op].name);
    break;
  }
  if (e->flags & OT_TRACE_PREFETCH) fprintf(f, " (prefetched %d op(s) ahead)", e->op - e->slot);
  fputc('\n', f);
}

static void print_schedule(FILE *f, const ot_plan *plan, const ot_schedule *s, const char *title) {
  const ot_program *p = plan->prog;
  const ot_plan_stats *st = &s->stats;
  const int handed = s == &plan->first && s->n_start;
  fprintf(f, "  %s: starts with %d %s cop%s (%llu bytes); %d uploads (%llu bytes), %d write-backs (%llu bytes), "
             "%d evictions, %d allocs, %d rebuilt (%d kernels again), peak %llu bytes\n",
          title, s->n_start, handed ? "handed-over" : "kept", s->n_start == 1 ? "y" : "ies",
          (unsigned long long)st->kept_bytes, st->uploads,
          (unsigned long long)st->bytes_up, st->downloads, (unsigned long long)st->bytes_down, st->evictions,
          st->allocs, st->recomputes, st->recompute_kernels, (unsigned long long)st->peak_bytes);
  for (int k = 0; k < s->n_start; k++)
    fprintf(f, "    %-8s %-24s [%zu, +%zu)\n", handed ? "handed" : "kept", p->st[s->start[k].st].name, s->start[k].off,
            p->st[s->start[k].st].block);
  for (int slot = 0; slot <= p->n_ops; slot++) {
    for (int x = s->slot_start[slot]; x < s->slot_start[slot + 1]; x++) print_event(f, plan, &s->ev[x]);
    if (slot < p->n_ops) fprintf(f, "  op #%d %s\n", slot, p->ops[slot].name);
  }
}

void ot_plan_print(const ot_plan *plan, FILE *f) {
  if (!plan || !f) return;
  const ot_program *p = plan->prog;
  if (plan->n_stages) {
    fprintf(f, "pipeline plan: %d ops over %d devices\n", p->n_ops, plan->n_stages);
    for (int k = 0; k < plan->n_stages; k++) {
      const ot_stage *st = &plan->stages[k];
      fprintf(f, "stage %d: ops #%d..#%d (%s .. %s), device %d, budget %llu bytes, weights and state %llu bytes\n", k,
              st->first_op, st->first_op + st->n_ops - 1, p->ops[st->first_op].name,
              p->ops[st->first_op + st->n_ops - 1].name, st->plan->dev, (unsigned long long)st->plan->budget,
              (unsigned long long)st->weight_bytes);
      ot_plan_print(st->plan, f);
    }
    return;
  }
  fprintf(f, "plan: %d ops, %d tensors, strategy %s, device %d, budget %llu bytes (arena %zu, used up to %zu)\n",
          p->n_ops, p->n_st, ot_strategy_name(plan->strategy), plan->dev, (unsigned long long)plan->budget,
          plan->capacity, plan->extent);
  if (plan->place) {
    const ot_plan_stats *st = &plan->steady.stats;
    fprintf(f, "usm placement %s: %d resident (%llu bytes), %d streamed (%llu bytes per run), %d remote (%llu bytes, "
               "%llu read in place per run); predicted transfer time per run %.3f ms\n",
            ot_usm_placement_name(plan->usm), st->n_resident, (unsigned long long)st->resident_bytes, st->n_streamed,
            (unsigned long long)st->streamed_bytes, st->n_remote, (unsigned long long)st->remote_bytes,
            (unsigned long long)st->remote_read_bytes, st->predicted_s * 1e3);
  }
  for (int i = 0; i < p->n_st; i++) {
    const ot_prog_storage *s = &p->st[i];
    unsigned r = s->role;
    fprintf(f, "  tensor %-24s %10zu bytes, ops #%d..#%d, %s%s%s%s%s%s\n", s->name, s->bytes, s->first_use, s->last_use,
            r & OT_ROLE_CACHE ? "cache" : r & OT_ROLE_INPUT ? "input" : !(r & OT_ROLE_WRITTEN) ? "weight" : (r & OT_ROLE_WRITEBACK) ? "result" : "temporary",
            r & OT_ROLE_NEEDS_HOME ? ", read from home" : "", r & OT_ROLE_WRITEBACK ? ", written home" : "",
            r & OT_ROLE_KEEP ? ", may stay between runs" : "", plan->place && plan->place[i] ? ", " : "",
            plan->place && plan->place[i] ? ot_place_name(plan->place[i]) : "");
  }
  print_schedule(f, plan, &plan->first, "first run");
  print_schedule(f, plan, &plan->steady, "replays");
}
