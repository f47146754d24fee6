/* executor.h (internal) — the executor's resources held by a plan. */
#ifndef OT_SCHED_EXECUTOR_H
#define OT_SCHED_EXECUTOR_H

#include "sched/plan_impl.h"

/* Waits for the plan's transfers and frees its device arena, transfer
 * thread and scratch (ot_plan_destroy calls it). */
void ot_exec_release(ot_plan *plan);

/* ot_sched_run of a single-device plan; later_stage: the plan is a later
 * stage of a pipeline run, so its RUN event shares the run number the first
 * stage opened and carries OT_TRACE_STAGE. */
ot_status ot_exec_run(ot_plan *plan, ot_trace *trace, int later_stage);

#endif
