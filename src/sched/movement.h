/* movement.h (internal) — moving bytes between homes and a device, off the
 * compute thread.
 *
 * One transfer thread per plan runs a FIFO queue of blocking copies
 * (memory/copy.h, an OpenMP target memcpy: on a GPU from pinned memory it
 * runs at the PCIe bound on its own stream while the kernels of the main
 * thread run; docs/gpu.md). Every transfer gets a ticket; tickets complete in
 * order, so waiting for one means waiting until the queue has passed it, and
 * an upload queued after a write-back of the same region never overtakes
 * it.
 *
 * Kinds:
 *   OT_MV_NONE      the host backend: nothing moves; transfers complete at
 *                   once (and are still traced with their bytes)
 *   OT_MV_COPY      map (and usm on emulated devices): copies between the
 *                   home and the plan's device arena
 *   OT_MV_PREFETCH  usm on a CUDA GPU: kernels use the managed home itself;
 *                   an upload prefetches its pages to the device, a
 *                   write-back prefetches them home (cudaMemPrefetchAsync,
 *                   CUDA 13 signature, on the thread's own stream); advice
 *                   and discards drop copies without moving them
 *                   (executor.c says which). Tested on the GPU only
 *                   (tests/test_usm_gpu.c).
 */
#ifndef OT_SCHED_MOVEMENT_H
#define OT_SCHED_MOVEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/status.h"
#include "omptensor/trace.h"
#include "sched/verify.h"

typedef enum ot_mv_kind { OT_MV_NONE = 0, OT_MV_COPY, OT_MV_PREFETCH } ot_mv_kind;

typedef struct ot_movement ot_movement;

/* `dev`: OpenMP device number of the device side. `delay_us`: every
 * transfer first sleeps this long (0: no delay; ot_sched_opts's
 * transfer_delay_us, which makes a missing wait show up as wrong numbers). */
ot_status ot_movement_create(ot_mv_kind kind, int dev, unsigned delay_us, ot_movement **out);
void ot_movement_destroy(ot_movement *m); /* waits for the queue; NULL is fine */

/* Queue a copy of `bytes` home -> device (up) or device -> home (down);
 * `name` (the storage's, kept until the copy completes) goes into the
 * failure message; `rec` (may be NULL) is the home's OMPTENSOR_VERIFY
 * record, checked and updated on the transfer thread (verify.h). The trace event `ev` (of trace `tr`, may be NULL) gets the start and end
 * times. Returns the ticket. */
uint64_t ot_movement_upload(ot_movement *m, void *dev_dst, const void *home_src, size_t bytes, const char *name,
                            ot_verify_rec *rec, ot_trace *tr, size_t ev);
/* An upload of a file-homed storage with no host copy: the oldest read of
 * `disk` (disk.h; the executor queued it there in this order), copied to
 * dev_dst. */
struct ot_disk;
uint64_t ot_movement_upload_disk(ot_movement *m, void *dev_dst, struct ot_disk *disk, size_t bytes, const char *name,
                                 ot_trace *tr, size_t ev);
uint64_t ot_movement_download(ot_movement *m, void *home_dst, const void *dev_src, size_t bytes, const char *name,
                              ot_verify_rec *rec, ot_trace *tr, size_t ev);
/* A copy between the device and another device's memory (a micro-batched
 * pipeline's mailbox, sched/pipeline_micro.c): up from `src` on OpenMP
 * device src_dev into this queue's device, or down from this queue's
 * device into `dst` on dst_dev (peer to peer where the runtime can, through
 * a host buffer of libomptarget's where not). Never verified (verify.h
 * checksums host homes). */
uint64_t ot_movement_upload_peer(ot_movement *m, void *dev_dst, const void *src, int src_dev, size_t bytes,
                                 const char *name, ot_trace *tr, size_t ev);
uint64_t ot_movement_download_peer(ot_movement *m, void *dst, int dst_dev, const void *dev_src, size_t bytes,
                                   const char *name, ot_trace *tr, size_t ev);
/* A write-back of only some byte ranges of a copy: n pairs {offset, length}
 * in rg (copied; offsets from home_dst / dev_src) as one transfer (one
 * ticket, one trace event). `whole`: the storage's bytes, copied whole if
 * there is no host memory for the list. Never verified (verify.h checksums
 * whole homes: the executor writes those home whole). */
uint64_t ot_movement_download_ranges(ot_movement *m, void *home_dst, const void *dev_src, const size_t *rg, size_t n,
                                     size_t whole, const char *name, ot_trace *tr, size_t ev);
/* OT_MV_PREFETCH only (nothing, ticket 0, for the other kinds, where an
 * arena block is simply reused): queues memory advice (an ot_mem_advice of
 * memory/copy.h) on a managed home, or the discard of a dead one's device
 * pages. In queue order with the prefetches, so the advice that drops a
 * read-mostly duplicate lands after the prefetch that made it and before
 * the next one. */
uint64_t ot_movement_advise(ot_movement *m, const void *home, size_t bytes, int advice, const char *name);
uint64_t ot_movement_discard(ot_movement *m, const void *home, size_t bytes, const char *name);

/* Entries queued between plug and unplug wait for the unplug, so that
 * the thread takes them as one batch: the executor queues a launch's held
 * write-backs (one per KV row a decode step wrote) one call at a time, and
 * a thread woken by the first copied them one blocking copy each while the
 * rest were queued. A wait (ot_movement_wait, _wait_all) lifts the plug:
 * it never waits on entries held back. No-ops for OT_MV_NONE or NULL. */
void ot_movement_plug(ot_movement *m);
void ot_movement_unplug(ot_movement *m);

/* Tests: the write-backs so far that went home in batches of two or more
 * (queued one behind another: one wait for all). */
uint64_t ot_movement_batched(ot_movement *m);

/* Has ticket t completed? (never blocks) */
int ot_movement_done(ot_movement *m, uint64_t t);
/* Blocks until ticket t (0: nothing) has completed. OT_ERR_DEVICE (or
 * OT_ERR_INTEGRITY, verify.h) if any transfer so far failed (the message names the first failed one: tensor,
 * direction, bytes). The failure is sticky: the executor drops the whole
 * queue after a failed run (executor.c). */
ot_status ot_movement_wait(ot_movement *m, uint64_t t);
ot_status ot_movement_wait_all(ot_movement *m);

#endif
