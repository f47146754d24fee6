/* plan.c — ot_sched_plan: checks, feasibility, the two schedules. */
#include <stdlib.h>
#include <string.h>

#include "memory/context_impl.h"
#include "core/env.h"
#include "core/error.h"
#include "memory/device.h"
#include "sched/executor.h"
#include "sched/disk.h"
#include "sched/plan_impl.h"

static const char *const strategy_names[OT_STRATEGY_COUNT] = {"none", "minimal", "balanced", "aggressive"};

const char *ot_strategy_name(ot_strategy s) { return (unsigned)s < OT_STRATEGY_COUNT ? strategy_names[s] : "?"; }

ot_status ot_strategy_parse(const char *s, ot_strategy *out) {
  const int i = ot_name_index(strategy_names, OT_STRATEGY_COUNT, s);
  if (i >= 0) {
    *out = (ot_strategy)i;
    return OT_OK;
  }
  return ot_fail(OT_ERR_INVALID_ARG, "unknown offload strategy '%s' (use none, minimal, balanced or aggressive)",
                 s ? s : "(null)");
}

static const char *const placement_names[OT_USM_PLACEMENT_COUNT] = {"auto", "resident", "streamed", "remote"};

const char *ot_usm_placement_name(ot_usm_placement p) {
  return (unsigned)p < OT_USM_PLACEMENT_COUNT ? placement_names[p] : "?";
}

ot_status ot_usm_placement_parse(const char *s, ot_usm_placement *out) {
  const int i = ot_name_index(placement_names, OT_USM_PLACEMENT_COUNT, s);
  if (i >= 0) {
    *out = (ot_usm_placement)i;
    return OT_OK;
  }
  return ot_fail(OT_ERR_INVALID_ARG, "unknown usm placement '%s' (use auto, resident, streamed or remote)",
                 s ? s : "(null)");
}

const char *ot_stage_copies_name(ot_stage_copies c) {
  static const char *const n[] = {"auto", "host", "peer"};
  return (unsigned)c < 3 ? n[c] : "?";
}

ot_status ot_stage_copies_parse(const char *s, ot_stage_copies *out) {
  for (int c = 0; s && out && c < 3; c++)
    if (!strcmp(s, ot_stage_copies_name((ot_stage_copies)c))) {
      *out = (ot_stage_copies)c;
      return OT_OK;
    }
  return ot_fail(OT_ERR_INVALID_ARG, "stage copies '%s': give auto, host or peer", s ? s : "(null)");
}

ot_sched_opts ot_sched_opts_default(void) {
  ot_sched_opts o;
  memset(&o, 0, sizeof o);
  o.strategy = OT_STRATEGY_BALANCED;
  return o;
}

static uint64_t working_set(const ot_program *p, int i) {
  uint64_t b = 0;
  for (int k = 0; k < p->ops[i].n_acc; k++) b += p->st[p->ops[i].acc[k].st].block;
  return b;
}

ot_status ot_sched_min_budget(const ot_program *prog, uint64_t *bytes, int *op) {
  if (!prog || !bytes) return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_min_budget: NULL argument");
  uint64_t best = 0;
  int at = -1;
  for (int i = 0; i < prog->n_ops; i++) {
    uint64_t w = working_set(prog, i);
    if (at < 0 || w > best) {
      best = w;
      at = i;
    }
  }
  *bytes = best;
  if (op) *op = at;
  return OT_OK;
}

ot_status ot_sched_total_bytes(const ot_program *prog, uint64_t *bytes) {
  if (!prog || !bytes) return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_total_bytes: NULL argument");
  uint64_t t = 0;
  for (int i = 0; i < prog->n_st; i++) t += prog->st[i].block;
  *bytes = t;
  return OT_OK;
}

/* The first op whose working set does not fit, named in the error. */
static ot_status check_feasible(const ot_plan *plan) {
  const ot_program *p = plan->prog;
  for (int i = 0; i < p->n_ops; i++) {
    uint64_t w = working_set(p, i);
    if (w <= plan->capacity) continue;
    const ot_op *o = &p->ops[i];
    char list[256] = "";
    size_t len = 0;
    for (int k = 0; k < o->n_acc && len < sizeof list - 1; k++) {
      const ot_prog_storage *s = &p->st[o->acc[k].st];
      int n = snprintf(list + len, sizeof list - len, "%s%s %zu", k ? ", " : "", s->name, s->block);
      if (n < 0) break;
      len += (size_t)n;
    }
    char lbl[32];
    return ot_fail(OT_ERR_BUDGET,
                   "op '%s' (#%d) needs %llu bytes on %s at once (%s; each rounded up to %d) but the budget "
                   "is %llu bytes; give a budget of at least %llu bytes",
                   o->name, i, (unsigned long long)w, ot_dev_label(plan->dev, lbl), list, OT_SCHED_ALIGN,
                   (unsigned long long)plan->budget, (unsigned long long)w);
  }
  return OT_OK;
}

static size_t extent_of(const ot_schedule *s, const ot_program *p) {
  size_t x = 0;
  for (int k = 0; k < s->n_ev; k++)
    if (s->ev[k].off + s->ev[k].block > x) x = s->ev[k].off + s->ev[k].block;
  for (int k = 0; k < s->n_start; k++) /* a handed-over copy nothing moves */
    if (s->start[k].off + p->st[s->start[k].st].block > x) x = s->start[k].off + p->st[s->start[k].st].block;
  return x;
}

ot_status ot_plan_schedules(ot_plan *plan) {
  ot_schedule_free(&plan->first);
  ot_schedule_free(&plan->steady);
  ot_status s = plan->strategy == OT_STRATEGY_NONE ? OT_OK : check_feasible(plan);
  if (s == OT_OK) s = ot_plan_build(plan);
  if (s == OT_OK) s = ot_schedule_finish(&plan->first, plan->prog, plan->strategy, plan->capacity, plan->host_op);
  if (s == OT_OK) s = ot_schedule_finish(&plan->steady, plan->prog, plan->strategy, plan->capacity, plan->host_op);
  if (s != OT_OK) return s;
  size_t e1 = extent_of(&plan->first, plan->prog), e2 = extent_of(&plan->steady, plan->prog);
  plan->extent = e1 > e2 ? e1 : e2;
  return OT_OK;
}

/* OMPTENSOR_DEBUG=plan,probe (core/env.h: an unknown word gets a notice) */
static int debug_has(const char *what) { return ot_env_word("OMPTENSOR_DEBUG", what); }

static int debug_plan(void) { return debug_has("plan"); }

/* The budget a plan with options o gets on its device, and the arena that
 * holds: the budget rounded down to OT_SCHED_ALIGN. */
static uint64_t plan_budget(const ot_ctx *ctx, const ot_sched_opts *o) {
  return o->budget_bytes ? o->budget_bytes : ctx->budget[o->device_index];
}

static size_t capacity_of(uint64_t budget) {
  const uint64_t cap = budget & ~(uint64_t)(OT_SCHED_ALIGN - 1);
  return cap > SIZE_MAX ? SIZE_MAX & ~(size_t)(OT_SCHED_ALIGN - 1) : (size_t)cap;
}

/* defer_writeback OT_DEFER_IF_RESIDENT: whether plan keeps everything on
 * the device, so deferring costs nothing it needs: backend map, one device,
 * no host ops (hybrid reads homes; it does not defer), and a steady replay
 * that uploads nothing but the inputs the caller rewrites every run
 * (strategy none always, where it fits at all). */
static int all_resident(const ot_plan *plan) {
  if (plan->ctx->backend != OT_BACKEND_MAP || plan->n_stages || plan->n_host_ops || plan->defer) return 0;
  const ot_schedule *sc = &plan->steady;
  for (int k = 0; k < sc->n_ev; k++)
    if (sc->ev[k].kind == OT_EV_UPLOAD && !(plan->prog->st[sc->ev[k].st].role & OT_ROLE_INPUT)) return 0;
  return 1;
}

/* ot_sched_plan; with a handoff (ot_sched_plan_after) the first schedule
 * starts from those copies, and cap_limit (non-zero) caps the arena at the
 * memory the previous plan hands over. */
static ot_status make_plan(ot_ctx *ctx, const ot_program *prog, const ot_sched_opts *opts, const ot_resident *handoff,
                           int n_handoff, size_t cap_limit, ot_plan **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_plan: out is NULL");
  *out = NULL;
  if (!ctx || !prog) return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_plan: context or program is NULL");
  if (prog->ctx != ctx) return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_plan: the program belongs to another context");
  ot_sched_opts o = opts ? *opts : ot_sched_opts_default();
  if ((unsigned)o.strategy >= OT_STRATEGY_COUNT)
    return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_plan: unknown strategy %d", (int)o.strategy);
  if ((unsigned)o.usm_placement >= OT_USM_PLACEMENT_COUNT)
    return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_plan: unknown usm placement %d", (int)o.usm_placement);
  /* no silent fallback: a placement asked of a backend that has none */
  if (o.usm_placement != OT_USM_AUTO && ctx->backend != OT_BACKEND_USM)
    return ot_fail(OT_ERR_INVALID_ARG,
                   "usm placement '%s' applies to the usm backend, but the context uses backend %s; use --backend "
                   "usm, or leave the placement at auto",
                   ot_usm_placement_name(o.usm_placement), ot_backend_name(ctx->backend));
  if (o.device_index < 0 || o.device_index >= ctx->n_dev)
    return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_plan: device index %d, but the context uses %d device(s)",
                   o.device_index, ctx->n_dev);
  int n_stages = o.n_stages == OT_SCHED_ALL_DEVICES ? ctx->n_dev - o.device_index : o.n_stages;
  if (n_stages < 0 || o.device_index + n_stages > ctx->n_dev)
    return ot_fail(OT_ERR_INVALID_ARG,
                   "ot_sched_plan: %d pipeline stages from device index %d, but the context uses %d device(s)%s",
                   o.n_stages, o.device_index, ctx->n_dev,
                   ctx->backend == OT_BACKEND_HOST ? " (the host backend has one: use n_stages 1 or OT_SCHED_ALL_DEVICES)"
                                                   : "; create the context with n_devices (--devices N)");
  /* The analysis is a cache inside the program (roles depend on the marks). */
  OT_TRY(ot_program_analyse((ot_program *)prog));
  ot_plan *plan = calloc(1, sizeof *plan);
  if (!plan) return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_sched_plan: no host memory");
  plan->ctx = ctx;
  plan->prog = (ot_program *)prog;
  plan->src = prog;
  plan->usm = o.usm_placement;
  plan->version = prog->version;
  plan->strategy = o.strategy;
  plan->defer = o.defer_writeback == 1 && n_stages <= 1;
  plan->transfer_delay_us = o.transfer_delay_us;
  /* recomputation (README "Recomputation"): not for usm, whose copies are the homes' pages (a drop
   * discards them), nor strategy none, which evicts nothing; a pipeline's stages each plan their own */
  plan->recompute = o.recompute && n_stages <= 1 && o.strategy != OT_STRATEGY_NONE && ctx->backend != OT_BACKEND_USM;
  plan->rc_pcie = o.pcie_bytes_per_s > 0 ? o.pcie_bytes_per_s : 54e9;
  plan->rc_flops = o.flops_per_s > 0 ? o.flops_per_s : 20e12;
  plan->probe_budget = o.probe_budget || debug_has("probe"); /* OMPTENSOR_DEBUG=probe */
  plan->dev_index = o.device_index;
  plan->dev = ctx->dev[o.device_index];
  plan->budget = plan_budget(ctx, &o);
  plan->capacity = capacity_of(plan->budget);
  if (cap_limit && cap_limit < plan->capacity) plan->capacity = cap_limit;
  plan->handoff = handoff;
  plan->n_handoff = n_handoff;
  if (n_stages > 1 && prog->n_ops > 1) {
    ot_status ps = ot_pipeline_plan(plan, &o, n_stages);
    if (ps != OT_OK) {
      ot_plan_destroy(plan);
      return ps;
    }
    if (debug_plan()) ot_plan_print(plan, stderr);
    *out = plan;
    return OT_OK;
  }
  if ((unsigned)o.compute >= OT_COMPUTE_COUNT) {
    ot_plan_destroy(plan);
    return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_plan: unknown compute placement %d", (int)o.compute);
  }
  if (ctx->backend == OT_BACKEND_USM && (o.compute == OT_COMPUTE_HYBRID || o.host_ops)) {
    ot_plan_destroy(plan);
    return ot_fail(OT_ERR_INVALID_ARG, "compute hybrid needs backend map (the usm backend places tensors its own "
                                       "way); use --backend map, or --compute gpu");
  }
  ot_status s = ctx->backend == OT_BACKEND_USM ? ot_place_plan(plan) : ot_hybrid_plan(plan, &o);
  if (s == OT_OK && o.defer_writeback == OT_DEFER_IF_RESIDENT && all_resident(plan)) {
    plan->defer = 1; /* planned again, still with the handoff: now without the write-backs */
    s = ot_plan_schedules(plan);
  }
  plan->handoff = NULL; /* first.start holds its copy */
  plan->n_handoff = 0;
  if (s != OT_OK) {
    ot_plan_destroy(plan);
    return s;
  }
  ot_place_stats(plan);
  if (n_handoff) plan->first.stats.inherited_bytes = plan->first.stats.kept_bytes;
  s = ot_plan_homes(plan);
  if (s != OT_OK) {
    ot_plan_destroy(plan);
    return s;
  }
  if (debug_plan()) ot_plan_print(plan, stderr);
  *out = plan;
  return OT_OK;
}

ot_status ot_sched_plan(ot_ctx *ctx, const ot_program *prog, const ot_sched_opts *opts, ot_plan **out) {
  return make_plan(ctx, prog, opts, NULL, 0, 0, out);
}

typedef struct st_index {
  uint64_t id;
  int i;
} st_index;

static int cmp_storage_id(const void *a, const void *b) {
  const uint64_t x = ((const st_index *)a)->id, y = ((const st_index *)b)->id;
  return x < y ? -1 : x > y;
}

/* The copies prev keeps between runs that `prog` can start from: the same
 * storages, used by prog, not rewritten by the caller before every run
 * (inputs), inside the arena of `capacity` bytes. Indices are prog's. */
static ot_status handoff_set(const ot_plan *prev, const ot_program *prog, size_t capacity, ot_resident **out, int *n) {
  *out = NULL;
  *n = 0;
  const ot_schedule *kept = &prev->steady; /* every successful run ends with its start set */
  const ot_program *pp = prev->prog;
  if (!kept->n_start) return OT_OK;
  st_index *idx = malloc((size_t)(prog->n_st ? prog->n_st : 1) * sizeof *idx);
  ot_resident *set = malloc((size_t)kept->n_start * sizeof *set);
  if (!idx || !set) {
    free(idx);
    free(set);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_sched_plan_after: no host memory");
  }
  for (int i = 0; i < prog->n_st; i++) idx[i] = (st_index){prog->st[i].id, i};
  qsort(idx, (size_t)prog->n_st, sizeof *idx, cmp_storage_id);
  for (int k = 0; k < kept->n_start; k++) {
    const ot_prog_storage *was = &pp->st[kept->start[k].st];
    st_index key = {was->id, 0}; /* by id: prev's tensors may be gone, their addresses reused */
    const st_index *hit = bsearch(&key, idx, (size_t)prog->n_st, sizeof *idx, cmp_storage_id);
    if (!hit) continue;
    const ot_prog_storage *ps = &prog->st[hit->i];
    if (!ps->n_uses || !ps->block || ps->block != was->block || (ps->role & OT_ROLE_INPUT)) continue;
    if (kept->start[k].off + ps->block > capacity) continue;
    set[(*n)++] = (ot_resident){hit->i, kept->start[k].off, 0}; /* clean: prev was synced */
  }
  free(idx);
  *out = set;
  return OT_OK;
}

/* Can prev hand its copies over? (sched.h, ot_sched_plan_after) */
static int can_hand_over(const ot_plan *prev, const ot_ctx *ctx, const ot_sched_opts *o) {
  const int stages = o->n_stages == OT_SCHED_ALL_DEVICES ? ctx->n_dev - o->device_index : o->n_stages;
  return prev->runs > 0 && !prev->n_stages && stages <= 1 && ctx->backend != OT_BACKEND_USM && !prev->place;
}

ot_status ot_sched_plan_after(ot_plan *prev, const ot_program *prog, const ot_sched_opts *opts, ot_plan **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_plan_after: out is NULL");
  *out = NULL;
  if (!prev || !prog) return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_plan_after: previous plan or program is NULL");
  if (prev->spent) return ot_fail(OT_ERR_STATE, "ot_sched_plan_after: the previous plan already handed its device "
                                                "memory to another plan");
  if (prog->ctx != prev->ctx)
    return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_plan_after: the program and the previous plan belong to different "
                                       "contexts");
  ot_sched_opts o = opts ? *opts : ot_sched_opts_default();
  if (o.device_index != prev->dev_index)
    return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_plan_after: the previous plan runs on device index %d, the new one "
                                       "would run on %d; a plan hands its memory over only on its own device",
                   prev->dev_index, o.device_index);
  OT_TRY(ot_program_analyse((ot_program *)prog)); /* roles, uses: handoff_set needs them */
  ot_plan *plan = NULL;
  ot_status s = OT_OK;
  /* deferred persistent copies go home first: whether handed over (the new
   * plan starts from clean copies) or not (their memory is freed); a
   * pipeline's stages defer their own (ot_sched_sync syncs each) */
  ot_status w = ot_sched_sync(prev);
  if (w != OT_OK) return ot_fail_context(w, "ot_sched_plan_after: the previous plan");
  /* its staging ring (disk.h) before the new plan's homes pass counts the
   * host memory: prev is between runs (every read taken), and a later run of
   * prev, if planning fails, makes a new one */
  ot_disk_destroy(prev->disk);
  prev->disk = NULL;
  /* The new plan reuses prev's memory as it is (base_bytes, set by its
   * first run; never grown: growing would hold both at once, past the
   * budget). So: planned with the whole budget if it fits in that memory,
   * else with the arena capped at it, else from an empty device. */
  const size_t have = prev->base_bytes;
  if (can_hand_over(prev, prev->ctx, &o)) {
    ot_resident *set;
    int n;
    OT_TRY(handoff_set(prev, prog, capacity_of(plan_budget(prev->ctx, &o)), &set, &n));
    if (n) {
      s = make_plan(prev->ctx, prog, &o, set, n, 0, &plan);
      if (s == OT_OK && plan->extent > have) {
        ot_plan_destroy(plan);
        plan = NULL;
        s = make_plan(prev->ctx, prog, &o, set, n, have, &plan);
      }
      if (s == OT_ERR_BUDGET) plan = NULL, s = OT_OK; /* the capped arena is too small: start empty */
    }
    free(set);
    if (s != OT_OK) return s;
  }
  if (!plan) OT_TRY(make_plan(prev->ctx, prog, &o, NULL, 0, 0, &plan));
  /* prev's memory: to the new plan if it starts from copies in it, else freed */
  if (plan->first.n_start) {
    plan->base = prev->base;
    plan->base_bytes = have;
    plan->inherited_live = 1;
    prev->base = NULL;
  }
  ot_exec_release(prev);
  prev->spent = 1;
  for (int k = 0; k < prev->n_stages; k++) { /* synced above: destroying them later must not write home again */
    ot_exec_release(prev->stages[k].plan);
    prev->stages[k].plan->spent = 1;
  }
  *out = plan;
  return OT_OK;
}

void ot_plan_destroy(ot_plan *plan) {
  if (!plan) return;
  if (plan->defer && !plan->spent && ot_sched_sync(plan) != OT_OK)
    ot_warn_once("defer-sync", "ot_plan_destroy: writing deferred persistent tensors home failed (%s); their homes hold the last "
            "sync", ot_last_error());
  ot_pipeline_free(plan);
  ot_exec_release(plan);
  ot_schedule_free(&plan->first);
  ot_schedule_free(&plan->steady);
  ot_hybrid_free(plan);
  ot_place_free(plan);
  free(plan);
}

ot_plan_stats ot_plan_get_stats(const ot_plan *plan, int steady) {
  ot_plan_stats z = {0};
  if (!plan) return z;
  if (!plan->n_stages) return steady ? plan->steady.stats : plan->first.stats;
  for (int k = 0; k < plan->n_stages; k++) { /* summed over the devices */
    ot_plan_stats a = ot_plan_get_stats(plan->stages[k].plan, steady);
    z.arena_bytes += a.arena_bytes;
    z.peak_bytes += a.peak_bytes;
    z.kept_bytes += a.kept_bytes;
    z.inherited_bytes += a.inherited_bytes;
    z.uploads += a.uploads, z.downloads += a.downloads, z.evictions += a.evictions, z.allocs += a.allocs;
    z.bytes_up += a.bytes_up, z.bytes_down += a.bytes_down;
    z.n_resident += a.n_resident, z.n_streamed += a.n_streamed, z.n_remote += a.n_remote;
    z.resident_bytes += a.resident_bytes, z.streamed_bytes += a.streamed_bytes, z.remote_bytes += a.remote_bytes;
    z.remote_read_bytes += a.remote_read_bytes;
    z.predicted_s += a.predicted_s; /* stages run one after the other */
    z.recomputes += a.recomputes, z.recompute_bytes += a.recompute_bytes, z.recompute_flops += a.recompute_flops;
    z.recompute_kernels += a.recompute_kernels;
    /* hybrid compute: each stage's own ops */
    z.n_host_ops += a.n_host_ops, z.host_read_bytes += a.host_read_bytes, z.cross_bytes += a.cross_bytes;
    if (a.host_read_rate > z.host_read_rate) z.host_read_rate = a.host_read_rate;
  }
  return z;
}

ot_status ot_plan_budget_probe(const ot_plan *plan, ot_budget_probe *out) {
  if (!plan || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_plan_budget_probe: NULL argument");
  *out = plan->probe;
  return OT_OK;
}

int ot_plan_num_stages(const ot_plan *plan) { return !plan ? 0 : plan->n_stages ? plan->n_stages : 1; }

ot_status ot_plan_stage(const ot_plan *plan, int k, ot_plan_stage_info *out) {
  if (!plan || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_plan_stage: NULL argument");
  if (k < 0 || k >= ot_plan_num_stages(plan))
    return ot_fail(OT_ERR_INVALID_ARG, "ot_plan_stage: stage %d, but the plan has %d", k, ot_plan_num_stages(plan));
  if (!plan->n_stages) {
    *out = (ot_plan_stage_info){0, plan->prog->n_ops, plan->dev_index, plan->dev, plan->budget, 0, plan, 0, 0};
    for (int i = 0; i < plan->prog->n_st; i++)
      if (plan->prog->st[i].role & OT_ROLE_KEEP) out->weight_bytes += plan->prog->st[i].block;
    return OT_OK;
  }
  const ot_stage *st = &plan->stages[k];
  *out = (ot_plan_stage_info){st->first_op, st->n_ops, st->dev_index, st->plan->dev, st->plan->budget,
                              st->weight_bytes, st->plan, st->n_mail, st->plan->reserved};
  return OT_OK;
}
