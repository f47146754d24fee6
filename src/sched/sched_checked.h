/* sched_checked.h (internal) — overflow-checked integer arithmetic for the
 * trace reader and the trace checks (issue 14).
 *
 * A stand-in: src/core/checked.h (the shared checked add/mul, another part
 * of issue 14) was not on this branch yet. When it is, replace these with
 * its functions and delete this file; only trace.c and trace_read.c use it.
 * Each returns 1 and stores the result when it fits, 0 (storing nothing)
 * when it overflows. */
#ifndef OT_SCHED_CHECKED_H
#define OT_SCHED_CHECKED_H

#include <stdint.h>

static inline int ot_sched_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return 0;
  *out = r;
  return 1;
}

static inline int ot_sched_add_i64(int64_t a, int64_t b, int64_t *out) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return 0;
  *out = r;
  return 1;
}

/* a + b, or UINT64_MAX when that overflows. */
static inline uint64_t ot_sched_add_sat_u64(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

#endif
