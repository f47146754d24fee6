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

/* The trace's time origin (absolute ot_now_ns()), and the budget recorded. */
uint64_t ot_trace_t0(const ot_trace *t);
uint64_t ot_trace_budget(const ot_trace *t);

/* Number the next run will get. */
int ot_trace_next_run(ot_trace *t);

#endif
