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

/* A stream of its own for ot_mem_prefetch: a non-blocking CUDA stream of
 * the calling thread's current device. 0, or -1 if the runtime gives none.
 * A build without the CUDA runtime has no streams: *out is NULL and the
 * result 0. */
typedef struct ot_mem_stream ot_mem_stream;
int ot_mem_stream_create(ot_mem_stream **out);
void ot_mem_stream_destroy(ot_mem_stream *s); /* NULL is fine */

/* Makes `dev` the calling thread's current device for the CUDA runtime
 * (a thread that prefetches calls it once); nothing without CUDA. */
void ot_mem_bind_thread(int dev);

/* Migrates the pages of managed memory [p, p + bytes) to device `dev`, or to
 * the host for OT_DEVICE_HOST, on stream s, and waits for it. 0, or -1 with
 * why[] set (always -1 without the CUDA runtime). */
int ot_mem_prefetch(ot_mem_stream *s, const void *p, size_t bytes, int dev, char *why, size_t why_len);

/* TEMPORARY until the usm-gpu branch lands */
typedef enum ot_mem_advice { OT_ADVISE_REMOTE = 0, OT_ADVISE_LOCAL, OT_ADVISE_READ_MOSTLY, OT_ADVISE_DROP_DUPLICATES } ot_mem_advice;
int ot_mem_advise(const void *p, size_t bytes, ot_mem_advice a, int dev, char *why, size_t why_len);
int ot_mem_discard(ot_mem_stream *s, const void *p, size_t bytes, char *why, size_t why_len);
int ot_mem_probe_alloc(int dev, uint64_t bytes);
#endif
