/* trace_impl.h (internal) — recording into a trace (the executor's side). */
#ifndef OT_SCHED_TRACE_IMPL_H
#define OT_SCHED_TRACE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/trace.h"

/* Monotonic nanoseconds (process clock). */
uint64_t ot_now_ns(void);

/* Appends an event (its name is copied into the trace) and returns its
 * index; times are absolute ot_now_ns() values, made relative here.
 * Thread-safe. Returns (size_t)-1 if out of memory (the trace then records
 * nothing more and the check functions fail). */
size_t ot_trace_add(ot_trace *t, const ot_trace_event *e);

/* Sets the times of event `i` (absolute ot_now_ns() values). Thread-safe. */
void ot_trace_set_times(ot_trace *t, size_t i, uint64_t start, uint64_t end);
/* A disk read's host bytes (OT_TRACE_DISK), set when it runs (disk.c). */
void ot_trace_set_host_bytes(ot_trace *t, size_t i, uint64_t host_bytes);

/* The trace's time origin (absolute ot_now_ns()), and the budget recorded. */
uint64_t ot_trace_t0(const ot_trace *t);
uint64_t ot_trace_budget(const ot_trace *t);

/* Number the next run will get. */
int ot_trace_next_run(ot_trace *t);

/* Every OT_TRACE_* flag (trace.h) or'ed: the flags a trace file may hold. */
#define OT_TRACE_FLAGS_ALL                                                                              \
  (OT_TRACE_RESIDENT_OK | OT_TRACE_DEAD | OT_TRACE_CLEAN_DROP | OT_TRACE_EVICT | OT_TRACE_PREFETCH | \
   OT_TRACE_DIRTY | OT_TRACE_STAGE | OT_TRACE_FILL | OT_TRACE_PARTIAL | OT_TRACE_HOST | OT_TRACE_CROSS | \
   OT_TRACE_RECOMPUTE | OT_TRACE_PEER)

/* ot_trace_read_chrome_text (the reader on a text) is public: trace.h. */

/* The Chrome trace JSON that ot_trace_write_chrome writes, as a malloc'd
 * NUL-terminated string in *text (free() it). */
ot_status ot_trace_chrome_text(const ot_trace *t, char **text);

#endif
