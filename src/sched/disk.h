/* disk.h (internal) — reading file-homed weights ahead of their uploads
 * (issue 23; memory/diskfile.h).
 *
 * One reader thread per plan and one staging ring of pinned host memory
 * (its size chosen by the plan's homes pass, homes.c, inside the host
 * budget). At the start of a run the executor queues, in the order the
 * schedule will upload them, every file-homed storage it uploads without a
 * host copy; the reader reads them one after another into the ring as far
 * ahead as the ring has room (O_DIRECT where the file has it), so the disk
 * works while the GPU computes and PCIe carries earlier uploads. The
 * transfer thread (movement.c) takes the reads in the same order: it waits
 * for the oldest, copies it to the device and releases its space.
 *
 * Why a FIFO ring and not a pool of buffers: reads are consumed in exactly
 * the order they are issued (one transfer queue), so the ring never
 * fragments; a read that does not fit at the end wraps to the start. The
 * ring must hold the largest read (homes.c sizes it at least twice that, so
 * one read streams in while the previous one is uploaded). */
#ifndef OT_SCHED_DISK_H
#define OT_SCHED_DISK_H

#include <stddef.h>
#include <stdint.h>

#include "memory/tensor_impl.h"
#include "omptensor/status.h"
#include "omptensor/trace.h"

typedef struct ot_disk ot_disk;

/* Whether schedule event e (of storage ps) is an upload whose bytes come
 * from a file: a file home left without a host copy (homes.c), not a cache
 * (placed, never uploaded) nor a crossing (an activation). The executor
 * queues exactly these reads; the homes pass counts their bytes. */
#define OT_UPLOAD_READS_FILE(e, ps)                                                                  \
  ((e)->kind == OT_EV_UPLOAD && !((e)->flags & OT_TRACE_CROSS) && !((ps)->role & OT_ROLE_CACHE) &&    \
   (ps)->st->file && !(ps)->st->home)

/* A reader with a ring of ring_bytes of pinned memory on ctx's first device
 * (counted in ot_ctx_host_bytes). */
ot_status ot_disk_create(ot_ctx *ctx, size_t ring_bytes, ot_disk **out);
void ot_disk_destroy(ot_disk *d); /* drops what is queued; NULL is fine */

/* Queues the read of st's bytes from its file; `name` (kept by the caller
 * until the read is taken) for messages; trace event `ev` of `tr` (may be
 * NULL / -1) gets the read's times and the host bytes held then. */
ot_status ot_disk_queue(ot_disk *d, const ot_storage *st, const char *name, ot_trace *tr, size_t ev);

/* The transfer thread: waits for the oldest read not taken; *data points at
 * its bytes in the ring until ot_disk_release. A failed read returns its
 * error (the message names the file and tensor) and is released. */
ot_status ot_disk_take(ot_disk *d, const void **data, size_t *bytes);
void ot_disk_release(ot_disk *d);

/* Reads queued and not taken (0 after a complete run). */
int ot_disk_pending(ot_disk *d);
/* Drops every read not yet taken (after a failed run); waits for the one
 * being read. */
void ot_disk_cancel(ot_disk *d);

size_t ot_disk_ring_bytes(const ot_disk *d);
/* The host bytes a ring asked for as ring_bytes holds (rounded to whole
 * aligned units, plus the alignment slack): what the homes pass budgets. */
size_t ot_disk_ring_footprint(size_t ring_bytes);

#endif
