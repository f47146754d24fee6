/* copy.h (internal) — the copies of the transfer thread (sched/movement.c),
 * on the same path as ot_mem_copy (memory.h).
 *
 * They run on a thread of their own, so they record no error (ot_fail would
 * set that thread's last error, which nobody reads): a failure returns -1
 * and says in why[] which runtime call failed, e.g. "omp_target_memcpy
 * returned -1"; the caller composes the message. */
#ifndef OT_MEMORY_COPY_H
#define OT_MEMORY_COPY_H

#include <stddef.h>
#include <stdint.h>

/* ot_mem_copy without its argument checks and its message: a blocking copy
 * of `bytes` (0 bytes: nothing) between host memory (dev OT_DEVICE_HOST or
 * the OpenMP initial device) and an OpenMP device's memory. 0, or -1 with
 * why[] set. */
int ot_mem_copy_raw(void *dst, int dst_dev, const void *src, int src_dev, size_t bytes, char *why, size_t why_len);

/* One piece of a batch of copies home (ot_mem_copy_home). */
typedef struct ot_mem_piece {
  void *dst;       /* host memory */
  const void *src; /* device memory */
  size_t bytes;
} ot_mem_piece;

typedef struct ot_mem_stream ot_mem_stream;
/* Copies n pieces of device `dev`'s memory home: every copy issued on
 * stream s (cudaMemcpyAsync), then one wait. Why: a decode step's
 * write-backs are dozens of KV rows of a few KB, each a microsecond of
 * PCIe but ~20 us as a blocking omp_target_memcpy (H100: 0.8 ms of a 5.3 ms
 * step for 32 rows). Without the CUDA runtime, or s NULL, one
 * ot_mem_copy_raw each. 0, or -1 with why[] naming the call that failed. */
int ot_mem_copy_home(ot_mem_stream *s, int dev, const ot_mem_piece *p, size_t n, char *why, size_t why_len);

/* A stream of its own for ot_mem_prefetch: a non-blocking CUDA stream of
 * the calling thread's current device. 0, or -1 if the runtime gives none.
 * A build without the CUDA runtime has no streams: *out is NULL and the
 * result 0. */
int ot_mem_stream_create(ot_mem_stream **out);
void ot_mem_stream_destroy(ot_mem_stream *s); /* NULL is fine */

/* Makes `dev` the calling thread's current device for the CUDA runtime
 * (a thread that prefetches calls it once); nothing without CUDA. */
void ot_mem_bind_thread(int dev);

/* Migrates the pages of managed memory [p, p + bytes) to device `dev`, or to
 * the host for OT_DEVICE_HOST, on stream s, and waits for it. 0, or -1 with
 * why[] set (always -1 without the CUDA runtime). */
int ot_mem_prefetch(ot_mem_stream *s, const void *p, size_t bytes, int dev, char *why, size_t why_len);

/* Advice on managed memory [p, p + bytes) for OpenMP device dev, for the
 * usm backend's placements (sched.h):
 *   REMOTE           preferred location host + accessed by dev: kernels on
 *                    dev read it in place over PCIe, no page migrates
 *                    (H200: 51 GB/s, docs/gpu.md)
 *   LOCAL            undoes REMOTE
 *   READ_MOSTLY      a prefetch to dev makes a read-only duplicate
 *   DROP_DUPLICATES  unsets READ_MOSTLY: collapses to the host copy,
 *                    dropping device duplicates without PCIe traffic
 * Not stream-ordered: the caller makes sure no kernel or prefetch uses the
 * range. 0, or -1 with why[] naming the call. Nothing (0) without CUDA. */
typedef enum ot_mem_advice { OT_ADVISE_REMOTE = 0, OT_ADVISE_LOCAL, OT_ADVISE_READ_MOSTLY, OT_ADVISE_DROP_DUPLICATES } ot_mem_advice;
int ot_mem_advise(const void *p, size_t bytes, ot_mem_advice a, int dev, char *why, size_t why_len);

/* Takes the device pages of dead managed data away without copying them
 * (cudaMemDiscardBatchAsync on stream s, waited for): their contents become
 * undefined. Only whole 2 MiB pages inside the range are discarded; the
 * ends, which may share a page with live data, go home by prefetch (as all
 * of it does where the driver does not support discards). 0, or -1 with
 * why[]; nothing (0) without CUDA. */
int ot_mem_discard(ot_mem_stream *s, const void *p, size_t bytes, char *why, size_t why_len);

/* The budget probe (sched.h, ot_budget_probe): 1 if a cudaMalloc of `bytes`
 * on device dev succeeds (freed at once), 0 if not, -1 without CUDA. */
int ot_mem_probe_alloc(int dev, uint64_t bytes);
#endif
