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

/* Hybrid compute (hybrid.c). The host's weight-read rate comes from the
 * caller (ot_sched_opts.host_read_rate, or its measure_rates callback: the
 * models pass ot_k_host_rates); these are the rest. */
#define OT_RATE_HOST_READ 40e9            /* bytes/s when the caller gives none */
#define OT_RATE_HOST_FLOPS_PER_THREAD 30e9 /* host matvec flops/s per thread at batch 32 (37 measured, 2 cores) */
#define OT_CROSS_LATENCY_S 20e-6          /* one small synchronous copy between host and device */
#define OT_HYBRID_MIN_GAIN 0.9            /* auto takes hybrid only below 0.9x the all-device time */
#define OT_HYBRID_MIN_WEIGHT_SHARE 0.8    /* a host candidate's streamed bytes: at least this much weights */

#endif
