/* executor.h (internal) — the executor's resources held by a plan. */
#ifndef OT_SCHED_EXECUTOR_H
#define OT_SCHED_EXECUTOR_H

#include "sched/plan_impl.h"

/* Waits for the plan's transfers and frees its device arena, transfer
 * thread and scratch (ot_plan_destroy calls it). */
void ot_exec_release(ot_plan *plan);

#endif
