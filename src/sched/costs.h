/* costs.h (internal) — the transfer rates the planner predicts with.
 *
 * Measured on the H200 (PCIe Gen5; ../docs/gpu.md, 2026-11-29 and
 * 2026-12-01). They only rank choices (remote against streamed, map against
 * usm) and give ot_plan_stats.predicted_s; results never depend on them. */
#ifndef OT_SCHED_COSTS_H
#define OT_SCHED_COSTS_H

#define OT_RATE_PINNED 54e9       /* pinned omp_target_memcpy, either way (bench_transfer) */
#define OT_RATE_PREFETCH_IN 45e9  /* cudaMemPrefetchAsync host -> device, 16-256 MiB calls: 37-51 */
#define OT_RATE_PREFETCH_OUT 14e9 /* cudaMemPrefetchAsync device -> host, any size */
#define OT_RATE_REMOTE 51e9       /* a kernel reading CPU-preferred, accessed-by managed memory in place */

#endif
