/* pipeline.h (internal) — a plan over several devices (sched.h, "Several
 * devices"): the split, and the stages' sub-programs. */
#ifndef OT_SCHED_PIPELINE_H
#define OT_SCHED_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "sched/plan_impl.h"

/* Cuts the (analysed) program's ops into n non-empty consecutive stages for
 * arenas of cap[0..n-1] bytes: stage k is ops [cut[k], cut[k+1]) (cut has
 * n + 1 entries, cut[0] = 0, cut[n] = n_ops) and weight[k] the bytes of
 * weights and persistent state it touches (pipeline_split.c).
 * OT_ERR_BUDGET when no split fits. Needs n <= n_ops. */
ot_status ot_pipeline_split(const ot_program *p, int n, const size_t *cap, int *cut, uint64_t *weight);

#endif
