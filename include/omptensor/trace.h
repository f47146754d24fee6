/* trace.h — what a run did, when, and how much device memory it held.
 *
 *     ot_trace *tr;
 *     ot_trace_create(&tr);
 *     ot_sched_run(plan, tr);
 *     ot_trace_summary s = ot_trace_summarize(tr);
 *     ot_trace_summary_print(&s, stdout);
 *     ot_trace_write_chrome(tr, "run.json");   // open in https://ui.perfetto.dev
 *     ot_trace_destroy(tr);
 *
 * Times are nanoseconds since the trace was created. One trace may hold
 * several runs (each starts with an OT_TRACE_RUN event). Recording is
 * thread-safe (the transfer thread fills in transfer times).
 */
#ifndef OMPTENSOR_TRACE_H
#define OMPTENSOR_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "omptensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ot_trace_kind {
  OT_TRACE_RUN = 0,  /* a run starts; device_bytes = bytes kept resident from the last run */
  OT_TRACE_KERNEL,   /* an op ran */
  OT_TRACE_UPLOAD,   /* home -> device copy into a newly placed block */
  OT_TRACE_DOWNLOAD, /* device -> home (write-back); the copy stays */
  OT_TRACE_ALLOC,    /* a block placed with no copy (an op's output) */
  OT_TRACE_FREE,     /* a block released (dead, dropped clean, or after write-back) */
  OT_TRACE_REMOTE,   /* usm remote placement: op `op` read this tensor in place over PCIe (bytes: its size;
                        the kernel's times); it takes no device bytes (block_delta 0) */
  OT_TRACE_MARK,     /* a phase of the program starts (ot_trace_mark): name is its label; device -1 (every
                        device), no bytes, start = end; the summary and the budget check pass over it */
  OT_TRACE_DISK,     /* a weight read from its checkpoint file into the host staging ring (a file home,
                        ot_ctx_opts.host_budget_bytes) before its UPLOAD: bytes read (the aligned span);
                        host_bytes: the host memory the context held then; no device bytes (block_delta 0) */
  OT_TRACE_KIND_COUNT
} ot_trace_kind;

/* flags */
#define OT_TRACE_RESIDENT_OK 1u /* KERNEL: every storage of the op was resident at the planned offset */
#define OT_TRACE_DEAD 2u        /* FREE: no later use in this run */
#define OT_TRACE_CLEAN_DROP 4u  /* FREE: live but clean: dropped without write-back */
#define OT_TRACE_EVICT 8u       /* FREE: evicted while live (it will be uploaded again) */
#define OT_TRACE_PREFETCH 16u   /* UPLOAD: issued before the slot of the op that needs it */
#define OT_TRACE_DIRTY 32u      /* FREE with DEAD: the copy differed from its home and needs no write-back */
#define OT_TRACE_STAGE 64u      /* RUN: a later pipeline stage of the run that the last unflagged RUN opened */
#define OT_TRACE_FILL 128u      /* UPLOAD (block_delta 0) or REMOTE: an op brought a tensor into a cache block
                                   already placed (ot_op_fill, program.h), e.g. the experts a router chose */
#define OT_TRACE_PARTIAL 256u   /* DOWNLOAD: only the ranges ops declared written (ot_op_wrote, program.h);
                                   bytes: their sum */
#define OT_TRACE_HOST 512u      /* KERNEL: the op ran on the host's cores on homes (hybrid compute); device
                                   is still the plan's, whose bytes the event records */
#define OT_TRACE_CROSS 1024u    /* UPLOAD/DOWNLOAD: an activation crossing between host and device compute,
                                   copied on the compute thread (not queued behind weight uploads) */
#define OT_TRACE_RECOMPUTE 2048u /* KERNEL: an op run again, before a later op, to rebuild an activation the
                                   plan dropped instead of writing it home (ot_sched_opts.recompute; op: the
                                   producing op); ALLOC: that activation's block; FREE: the drop */

#define OT_TRACE_PEER 4096u    /* UPLOAD/DOWNLOAD: a copy between two devices' memories, not over the host: a
                                   value crossing between stages of a micro-batched pipeline (sched.h,
                                   ot_sched_opts.stage_copies). DOWNLOAD: the producing stage's copy into the
                                   consuming device's mailbox; UPLOAD: that mailbox into the consumer's arena
                                   (both on the consumer's device). No bytes to or from the host */
typedef struct ot_trace_event {
  ot_trace_kind kind;
  unsigned flags;
  int run;                /* run number within this trace, from 0 */
  int op;                 /* op index it belongs to (-1: end of run) */
  int device;             /* OpenMP device number */
  const char *name;       /* tensor (transfers, alloc, free) or op (kernel) name; owned by the trace */
  uint64_t start_ns, end_ns;
  uint64_t bytes;         /* bytes copied (transfers) or the block size (alloc, upload, free) */
  int64_t block_delta;    /* change of device bytes in use: +block for UPLOAD/ALLOC, -block for FREE */
  uint64_t device_bytes;  /* device bytes in use after this event (as issued) */
  uint64_t issued_ns;     /* when the executor recorded (issued) it: the time of device_bytes. Events are
                             recorded in issue order, so this never decreases on one device; a transfer's
                             start_ns is later, when the transfer thread began the copy. 0 when adding:
                             start_ns */
  uint64_t host_bytes;    /* OT_TRACE_DISK: host bytes (homes + staging) the context held when the read ran;
                             0 for the other kinds */
} ot_trace_event;

typedef struct ot_trace ot_trace;

ot_status ot_trace_create(ot_trace **out);
void ot_trace_destroy(ot_trace *t); /* NULL is fine */
void ot_trace_clear(ot_trace *t);

size_t ot_trace_count(const ot_trace *t);
const ot_trace_event *ot_trace_event_at(const ot_trace *t, size_t i); /* NULL if out of range */

/* Records an OT_TRACE_MARK event now: where a phase of the program starts,
 * for people reading the trace. ot_generate marks "prefill" before the
 * prompt's run and "decode" before the first decode step; a program of
 * yours may mark its own phases. `omptensor trace plot` draws each as a
 * labelled line across every device, Perfetto as a global instant event.
 * NULL t: nothing to do (OT_OK); OT_ERR_OUT_OF_MEMORY if it cannot be
 * recorded (the trace is then incomplete, as for any event). */
ot_status ot_trace_mark(ot_trace *t, const char *label);

/* Chrome trace JSON: per device a process with lanes "compute" (kernels),
 * "transfers" (uploads, downloads, remote reads), "memory" (alloc/free), and a counter
 * "device bytes" whose samples are at each event's issued_ns (in time
 * order; args.issued of an "X" event holds it); marks as global instant
 * events ("ph": "i", "cat": "mark"). */
ot_status ot_trace_write_chrome(const ot_trace *t, const char *path);

/* Reads a file written by ot_trace_write_chrome back into a new trace (for
 * summaries and plots of earlier runs). *budget gets the budget the runs
 * declared (0 if none, UINT64_MAX if unlimited). The file is validated as
 * it is read: a path that is not a regular file (a FIFO, a directory) is
 * OT_ERR_IO before anything is read; every field read must be present and
 * of the type the writer gives it (a string where a number belongs is an
 * error, never 0), times 0 .. 2^53 us, byte counts 0 .. INT64_MAX, run, op
 * and device within int, flags among the OT_TRACE_* flags, and the bytes
 * moved each way must add up within uint64. Otherwise OT_ERR_FORMAT naming
 * the file, the event (traceEvents[i]) and the field. */
ot_status ot_trace_read_chrome(const char *path, ot_trace **out, uint64_t *budget);
/* The same on the text of such a file (len bytes, no terminator needed),
 * e.g. read from stdin; `name` stands for the file in messages. */
ot_status ot_trace_read_chrome_text(const char *text, size_t len, const char *name, ot_trace **out, uint64_t *budget);

typedef struct ot_trace_summary {
  int runs;
  uint64_t budget;              /* the largest budget a run declared (0: unknown) */
  uint64_t peak_device_bytes;
  uint64_t current_device_bytes; /* after the last event */
  uint64_t bytes_to_device, bytes_to_host; /* saturate at UINT64_MAX (a trace read from a file never gets there) */
  uint64_t bytes_peer;          /* transfers flagged OT_TRACE_PEER (device to device; not in the two above) */
  int kernels, uploads, downloads, allocs, frees;
  int evictions;                /* frees of live copies */
  int remote_reads;             /* REMOTE events: tensors kernels read in place (usm remote placement) */
  uint64_t bytes_remote;        /* their bytes (saturating) */
  int writebacks_avoided;       /* copies dropped without a write-back: clean live ones (weights) and
                                   dirty dead ones (activations) */
  double kernel_s, transfer_s;  /* busy time on each lane */
  double overlap_s;             /* transfer time during which a kernel ran */
  double wall_s;                /* first event start to last event end */
  int recomputes;               /* KERNEL events flagged OT_TRACE_RECOMPUTE (also counted in kernels) */
  int disk_reads;               /* DISK events: weights read from their checkpoint files */
  uint64_t bytes_from_disk;     /* their bytes (saturating) */
  uint64_t peak_host_bytes;     /* the most host bytes a DISK event saw the context hold (0: no disk reads) */
  double disk_s;                /* busy time reading */
} ot_trace_summary;

ot_trace_summary ot_trace_summarize(const ot_trace *t);
void ot_trace_summary_print(const ot_trace_summary *s, FILE *f);

/* Checks the trace never held more than `budget` device bytes on any device:
 * recomputes the bytes in use from the blocks placed and freed (from each
 * RUN event's starting bytes) and checks the recorded counter against it.
 * Also checks every KERNEL event has OT_TRACE_RESIDENT_OK. OT_ERR_BUDGET (or
 * OT_ERR_STATE) with the first offending event in the message. */
ot_status ot_trace_check_budget(const ot_trace *t, uint64_t budget);

/* The same per device: an event on devices[i] is checked against budgets[i];
 * an event on a device not listed is OT_ERR_STATE. */
ot_status ot_trace_check_budgets(const ot_trace *t, int n, const int *devices, const uint64_t *budgets);

/* Checks that no DISK event saw the context hold more than `host_budget`
 * bytes of host memory (homes and staging rings). OT_ERR_BUDGET naming the
 * first one that did; OT_OK when the trace has no disk reads. */
ot_status ot_trace_check_host_budget(const ot_trace *t, uint64_t host_budget);

/* Records the budget of the runs that follow (the executor calls it). */
void ot_trace_set_budget(ot_trace *t, uint64_t budget);

#ifdef __cplusplus
}
#endif
#endif
