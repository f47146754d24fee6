/* sched.h — planning a program under a device memory budget, and running it.
 *
 *     ot_sched_opts o = ot_sched_opts_default();
 *     o.strategy = OT_STRATEGY_BALANCED;
 *     ot_plan *plan;
 *     if (ot_sched_plan(ctx, prog, &o, &plan) != OT_OK) ... ot_last_error() ...
 *     for (token ...) { ...write inputs, set scalars...; ot_sched_run(plan, trace); }
 *     ot_plan_destroy(plan);
 *
 * The plan is computed once, before anything runs (liveness, placement of
 * every device copy at an offset of the budget arena, evictions, write-backs,
 * upload times); running it only replays those decisions. A replay does not
 * plan again.
 *
 * Budget and feasibility. Device copies live in one arena per plan of
 * floor(budget / 256) * 256 bytes; each storage takes its size rounded up to
 * 256 (OT_SCHED_ALIGN). An op's working set is the sum of those rounded sizes
 * over the distinct storages it reads or writes (zero-byte storages take
 * nothing). A budget is feasible iff it is >= the largest working set
 * (ot_sched_min_budget); otherwise ot_sched_plan fails with OT_ERR_BUDGET
 * naming the op, its bytes and the budget. Strategy `none` needs the sum over
 * all storages instead.
 *
 * Eviction: when space is needed, the planner evicts the contiguous range of
 * resident copies (not used by the current op) with the lowest cost, where a
 * copy costs reload_bytes / distance_to_next_use (reload_bytes doubles for a
 * dirty copy, which must be written home first). For equal sizes this is
 * Belady's rule (farthest next use first); clean copies go before dirty ones.
 * Searching contiguous ranges also resolves fragmentation; if the current
 * op's own copies block every range, they are relocated (written home if
 * dirty, reloaded), which always succeeds when the budget is feasible.
 * Dead copies are freed right after their last use; outputs and persistent
 * tensors are written home right after their last write.
 *
 * Prefetch strategies:
 *   none        everything resident for the whole run; fails if it does not fit
 *   minimal     each upload right before the op that needs it; the fewest
 *               transfers (Belady-optimal for equal sizes)
 *   balanced    the next op's uploads are placed while the current op runs
 *               (double buffering), evicting only copies needed later than
 *               them; this may cost a few more transfers than minimal
 *   aggressive  as balanced, then every upload is issued as soon as the space
 *               it will occupy is free
 *
 * Between runs the plan keeps resident a set of clean weights/persistent
 * copies (those a steady replay finds useful, chosen so that a run ends with
 * exactly the set it started from); the first run starts from an empty
 * device. ot_sched_invalidate forgets them.
 *
 * Set OMPTENSOR_DEBUG=plan to print every plan (decisions and reasons) on
 * stderr when it is made.
 */
#ifndef OMPTENSOR_SCHED_H
#define OMPTENSOR_SCHED_H

#include <stdint.h>
#include <stdio.h>

#include "omptensor/context.h"
#include "omptensor/program.h"
#include "omptensor/status.h"
#include "omptensor/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OT_SCHED_ALIGN 256

typedef enum ot_strategy {
  OT_STRATEGY_NONE = 0,
  OT_STRATEGY_MINIMAL,
  OT_STRATEGY_BALANCED,
  OT_STRATEGY_AGGRESSIVE,
  OT_STRATEGY_COUNT
} ot_strategy;

const char *ot_strategy_name(ot_strategy s);
ot_status ot_strategy_parse(const char *s, ot_strategy *out);

typedef struct ot_sched_opts {
  ot_strategy strategy;  /* default balanced */
  int device_index;      /* which of the context's devices (0 .. ot_ctx_num_devices-1) */
  uint64_t budget_bytes; /* 0: the context's budget for that device */
} ot_sched_opts;

ot_sched_opts ot_sched_opts_default(void);

typedef struct ot_plan ot_plan;

/* Plans `prog` (which must outlive the plan and not change while it is used). */
ot_status ot_sched_plan(ot_ctx *ctx, const ot_program *prog, const ot_sched_opts *opts, ot_plan **out);
void ot_plan_destroy(ot_plan *plan); /* NULL is fine; frees the plan's device memory */

/* The smallest feasible budget for the non-`none` strategies (the largest
 * working set, see above) and the op that needs it (may be NULL). */
ot_status ot_sched_min_budget(const ot_program *prog, uint64_t *bytes, int *op);

/* Runs the program once. Kernels run on the calling thread; transfers on the
 * plan's transfer thread. When it returns OT_OK every output and persistent
 * tensor's home holds its result. `trace` may be NULL. */
ot_status ot_sched_run(ot_plan *plan, ot_trace *trace);

/* Forgets the device copies kept between runs (after the caller wrote the
 * home of a weight or persistent tensor). */
void ot_sched_invalidate(ot_plan *plan);

/* Prints every decision with its reason. */
void ot_plan_print(const ot_plan *plan, FILE *f);

/* What the plan will do per run: for the first run (steady = 0) or the
 * replays (steady = 1). */
typedef struct ot_plan_stats {
  uint64_t arena_bytes;      /* the arena capacity (budget rounded down to 256) */
  uint64_t peak_bytes;       /* highest device bytes in use */
  uint64_t kept_bytes;       /* resident between runs */
  int uploads, downloads, evictions, allocs;
  uint64_t bytes_up, bytes_down;
} ot_plan_stats;

ot_plan_stats ot_plan_get_stats(const ot_plan *plan, int steady);

#ifdef __cplusplus
}
#endif
#endif
