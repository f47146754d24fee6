/* placement.c — usm placements: which storages are resident, streamed or
 * remote (sched.h, "Unified memory placements").
 *
 * The planner knows only arena copies. A usm plan gives it a view of the
 * program (plan->view, a shallow copy whose storage table is the plan's
 * own): a remote storage gets block 0 there, which the planner and the
 * executor already treat as "nothing on the device, the kernel uses the
 * home"; a storage forced to stream loses OT_ROLE_KEEP, so no replay keeps
 * it. Resident and streamed then fall out of the schedules: a storage the
 * steady replay uploads is streamed, any other device copy resident.
 *
 * auto, when the program does not fit: remote candidates are the storages
 * no op writes whose every use is a low-intensity op, used at most twice a
 * run (decode weights: a matrix-vector product reads each byte once, so the
 * bytes cross PCIe once per use either way, and read in place at ~51 GB/s
 * they need no window, no copy engine and no drop). The plan with all of
 * them remote leaves (arena - its peak) free; the largest candidates that
 * fit there (first fit, largest first) stay resident instead, and the plan
 * is made again with those. If that plan does not keep them all (the
 * arena fragments), the smallest chosen one goes remote and it is tried
 * again. Weights of compute-heavy ops (a prefill GEMM reads each weight
 * byte T times from the tile caches) are left to the arena: streamed. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "memory/context_impl.h"
#include "sched/costs.h"
#include "sched/plan_impl.h"

/* flops per byte of the data an op touches above which its weights are
 * not read in place: a bf16 matvec does 1, an f32 one 0.5, a prefill
 * GEMM over T tokens T per byte (bf16) */
#define OT_REMOTE_MAX_INTENSITY 8.0
#define OT_REMOTE_MAX_USES 2
/* tries of the auto plan with fewer resident candidates */
#define OT_PLACE_TRIES 6

void ot_place_free(ot_plan *plan) {
  free(plan->view_st);
  free(plan->place);
  plan->view_st = NULL;
  plan->place = NULL;
  plan->prog = (ot_program *)plan->src;
}

static double op_intensity(const ot_program *p, const ot_op *o) {
  double bytes = o->bytes;
  if (bytes <= 0)
    for (int k = 0; k < o->n_acc; k++) bytes += (double)p->st[o->acc[k].st].bytes;
  return bytes > 0 ? o->flops / bytes : 0.0;
}

/* May storage s be read in place? (auto's candidates) */
static int remote_candidate(const ot_program *p, int s) {
  const ot_prog_storage *ps = &p->st[s];
  if (!ps->block || !ps->n_uses || (ps->role & OT_ROLE_WRITTEN)) return 0;
  if (ps->n_uses > OT_REMOTE_MAX_USES) return 0;
  for (int k = 0; k < ps->n_uses; k++)
    if (op_intensity(p, &p->ops[ps->uses[k]]) > OT_REMOTE_MAX_INTENSITY) return 0;
  return 1;
}

/* The view: the caller's program with remote[s] storages given no block and,
 * with no_keep, no storage kept between runs. */
static ot_status make_view(ot_plan *plan, const unsigned char *remote, int no_keep) {
  const ot_program *src = plan->src;
  if (!plan->view_st) {
    plan->view_st = malloc((size_t)(src->n_st ? src->n_st : 1) * sizeof *plan->view_st);
    if (!plan->view_st) return ot_fail(OT_ERR_OUT_OF_MEMORY, "usm placement: no host memory");
  }
  memcpy(plan->view_st, src->st, (size_t)src->n_st * sizeof *plan->view_st);
  for (int i = 0; i < src->n_st; i++) {
    if (remote && remote[i]) plan->view_st[i].block = 0;
    if (no_keep) plan->view_st[i].role &= ~(unsigned)OT_ROLE_KEEP;
  }
  plan->view = *src;
  plan->view.st = plan->view_st;
  plan->prog = &plan->view;
  return OT_OK;
}

static uint64_t peak_of(const ot_plan *plan) {
  uint64_t a = plan->first.stats.peak_bytes, b = plan->steady.stats.peak_bytes;
  return a > b ? a : b;
}

/* Does the steady replay keep every storage of `want` (none uploaded)? */
static int keeps_all(const ot_plan *plan, const unsigned char *want) {
  const ot_schedule *sc = &plan->steady;
  for (int k = 0; k < sc->n_ev; k++)
    if (sc->ev[k].kind == OT_EV_UPLOAD && want[sc->ev[k].st]) return 0;
  return 1;
}

static ot_status plan_auto(ot_plan *plan, unsigned char *remote) {
  const ot_program *src = plan->src;
  uint64_t total = 0;
  for (int i = 0; i < src->n_st; i++) total += src->st[i].n_uses ? src->st[i].block : 0;
  if (total <= plan->capacity) return ot_plan_schedules(plan); /* everything fits: resident */
  int *cand = malloc((size_t)(src->n_st ? src->n_st : 1) * sizeof *cand);
  unsigned char *chosen = calloc((size_t)(src->n_st ? src->n_st : 1), 1);
  ot_status s = cand && chosen ? OT_OK : ot_fail(OT_ERR_OUT_OF_MEMORY, "usm placement: no host memory");
  int nc = 0;
  for (int i = 0; s == OT_OK && i < src->n_st; i++)
    if (remote_candidate(src, i)) cand[nc++] = i;
  if (s == OT_OK && nc == 0) s = ot_plan_schedules(plan);
  if (s != OT_OK || nc == 0) goto done;
  /* 1. all candidates remote: what the rest needs */
  for (int k = 0; k < nc; k++) remote[cand[k]] = 1;
  s = make_view(plan, remote, 0);
  if (s == OT_OK) s = ot_plan_schedules(plan);
  if (s != OT_OK) goto done;
  uint64_t peak = peak_of(plan);
  uint64_t spare = plan->capacity > peak ? plan->capacity - peak : 0;
  /* 2. the largest candidates that fit in what is left stay resident */
  ot_sort_by_block_desc(cand, nc, src);
  int n_chosen = 0;
  for (int k = 0; k < nc; k++) {
    size_t b = src->st[cand[k]].block;
    if (b > spare) continue;
    spare -= b;
    chosen[cand[k]] = 1;
    remote[cand[k]] = 0;
    n_chosen++;
  }
  for (int t = 0; n_chosen && t < OT_PLACE_TRIES; t++) {
    s = make_view(plan, remote, 0);
    if (s == OT_OK) s = ot_plan_schedules(plan);
    if (s == OT_OK && keeps_all(plan, chosen)) goto done;
    if (s != OT_OK && s != OT_ERR_BUDGET) goto done;
    /* not all kept (fragmentation): the smallest chosen goes remote */
    for (int k = nc - 1; k >= 0; k--)
      if (chosen[cand[k]]) {
        chosen[cand[k]] = 0;
        remote[cand[k]] = 1;
        n_chosen--;
        break;
      }
  }
  /* 3. the all-remote plan, known to work */
  for (int k = 0; k < nc; k++) remote[cand[k]] = 1;
  s = make_view(plan, remote, 0);
  if (s == OT_OK) s = ot_plan_schedules(plan);
done:
  free(cand);
  free(chosen);
  return s;
}

ot_status ot_place_plan(ot_plan *plan) {
  const ot_program *src = plan->src;
  size_t n = (size_t)(src->n_st ? src->n_st : 1);
  unsigned char *remote = calloc(n, 1);
  plan->place = calloc(n, 1);
  if (!remote || !plan->place) {
    free(remote);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "usm placement: no host memory");
  }
  ot_status s = OT_OK;
  switch (plan->usm) {
  case OT_USM_RESIDENT:
    /* everything on the device for the whole run: strategy none's plan */
    plan->strategy = OT_STRATEGY_NONE;
    s = ot_plan_schedules(plan);
    if (s == OT_ERR_BUDGET)
      s = ot_fail_context(s, "usm placement resident keeps every tensor on the device; use placement auto, "
                             "streamed or remote for a program larger than the budget");
    break;
  case OT_USM_STREAMED:
    s = make_view(plan, NULL, 1);
    if (s == OT_OK) s = ot_plan_schedules(plan);
    break;
  case OT_USM_REMOTE:
    for (int i = 0; i < src->n_st; i++)
      remote[i] = src->st[i].block && src->st[i].n_uses && !(src->st[i].role & OT_ROLE_WRITTEN);
    s = make_view(plan, remote, 0);
    if (s == OT_OK) s = ot_plan_schedules(plan);
    break;
  default: s = plan_auto(plan, remote); break;
  }
  if (s == OT_OK) {
    const ot_program *p = plan->prog;
    for (int i = 0; i < src->n_st; i++) {
      if (!src->st[i].block || !src->st[i].n_uses) continue;
      plan->place[i] = !p->st[i].block ? OT_PLACE_REMOTE : OT_PLACE_RESIDENT;
    }
    /* an input crosses every run because the caller rewrites it: resident
     * if it stays for the run, streamed only if it is evicted and reloaded */
    const ot_schedule *sc = &plan->steady;
    for (int k = 0; k < sc->n_ev; k++)
      if (sc->ev[k].kind == OT_EV_UPLOAD && (!(src->st[sc->ev[k].st].role & OT_ROLE_INPUT) || sc->ev[k].why == OT_WHY_RELOAD))
        plan->place[sc->ev[k].st] = OT_PLACE_STREAMED;
  }
  free(remote);
  return s;
}

static void fill(ot_plan *plan, ot_plan_stats *st) {
  const int usm = plan->ctx->backend == OT_BACKEND_USM;
  st->predicted_s = usm ? (double)st->bytes_up / OT_RATE_PREFETCH_IN + (double)st->bytes_down / OT_RATE_PREFETCH_OUT
                        : (double)st->bytes_up / OT_RATE_PINNED + (double)st->bytes_down / OT_RATE_PINNED;
  if (!plan->place) return;
  const ot_program *src = plan->src;
  for (int i = 0; i < src->n_st; i++) {
    uint64_t b = src->st[i].bytes;
    switch ((ot_place)plan->place[i]) {
    case OT_PLACE_RESIDENT: st->n_resident++, st->resident_bytes += b; break;
    case OT_PLACE_STREAMED: st->n_streamed++, st->streamed_bytes += b; break;
    case OT_PLACE_REMOTE:
      st->n_remote++, st->remote_bytes += b;
      st->remote_read_bytes += b * (uint64_t)src->st[i].n_uses;
      break;
    default: break;
    }
  }
  st->predicted_s += (double)st->remote_read_bytes / OT_RATE_REMOTE;
}

void ot_place_stats(ot_plan *plan) {
  if (plan->n_stages) return; /* a pipeline sums its stages (ot_plan_get_stats) */
  fill(plan, &plan->first.stats);
  fill(plan, &plan->steady.stats);
}

const char *ot_place_name(int place) {
  static const char *const n[] = {"-", "resident", "streamed", "remote"};
  return place >= 0 && place <= OT_PLACE_REMOTE ? n[place] : "?";
}
