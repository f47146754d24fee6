/* executor.h (internal) — the executor's resources held by a plan. */
#ifndef OT_SCHED_EXECUTOR_H
#define OT_SCHED_EXECUTOR_H

#include "sched/movement.h"
#include "sched/plan_impl.h"

/* Waits for the plan's transfers and frees its device arena, transfer
 * thread and scratch (ot_plan_destroy calls it). */
void ot_exec_release(ot_plan *plan);

/* How the executor moves a storage between its home and device `dev` (an
 * OpenMP number) under the context's backend (movement.h): nothing for the
 * host backend or the host itself, prefetches for usm on a GPU, copies
 * otherwise. */
ot_mv_kind ot_exec_mv_kind(const ot_ctx *ctx, int dev);

/* OT_OK if the plan can run now, else why not (fn: the caller, for the message). */
ot_status ot_exec_runnable(const ot_plan *plan, const char *fn);

/* ot_sched_run of a single-device plan. stage_of_run < 0: a run of its own
 * (its RUN event opens the trace's next run number); >= 0: the plan is a
 * later stage of that pipeline run, so its RUN event carries that number
 * and OT_TRACE_STAGE. The number is passed, not taken from the trace's
 * count, because micro-batched stages run while later runs open (the first
 * stage is already on the next micro-batch). */
ot_status ot_exec_run(ot_plan *plan, ot_trace *trace, int stage_of_run);

#endif
