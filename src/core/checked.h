/* checked.h (internal) — overflow-checked integer arithmetic for every size
 * computed from a value read from a file (config.json, safetensors headers):
 * a size that overflows is refused with a message, never wrapped, cut to a
 * narrower type or left to undefined behaviour.
 *
 * One operation, a flag: each returns 1 when the exact result does not fit
 * (or, for the conversions, is out of range) and 0 when *r holds it.
 *
 *     int64_t numel;
 *     if (ot_mul_i64(rows, cols, &numel)) return ot_fail(OT_ERR_FORMAT, "%s: rows x cols overflows", label);
 *
 * A formula: sizes (non-negative int64_t) through a sticky flag, so the
 * formula reads as one and is checked once at the end. A negative operand
 * or an overflow sets *ovf and gives INT64_MAX (saturated, so a comparison
 * against a limit fails too):
 *
 *     int ovf = 0;
 *     int64_t per_layer = ot_sz_add(&ovf, ot_sz_mul3(&ovf, 4, D, D), ot_sz_mul3(&ovf, 2, D, F));
 *     int64_t total = ot_sz_mul(&ovf, L, per_layer);
 *     if (ovf) return ot_fail(OT_ERR_FORMAT, "%s: the weights' size overflows", label);
 */
#ifndef OT_CORE_CHECKED_H
#define OT_CORE_CHECKED_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

static inline int ot_add_i64(int64_t a, int64_t b, int64_t *r) { return __builtin_add_overflow(a, b, r); }
static inline int ot_mul_i64(int64_t a, int64_t b, int64_t *r) { return __builtin_mul_overflow(a, b, r); }
static inline int ot_add_u64(uint64_t a, uint64_t b, uint64_t *r) { return __builtin_add_overflow(a, b, r); }
static inline int ot_mul_u64(uint64_t a, uint64_t b, uint64_t *r) { return __builtin_mul_overflow(a, b, r); }
/* a + b, or UINT64_MAX when that overflows (sums that report, like a trace summary's bytes). */
static inline uint64_t ot_add_sat_u64(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}
static inline int ot_add_size(size_t a, size_t b, size_t *r) { return __builtin_add_overflow(a, b, r); }
static inline int ot_mul_size(size_t a, size_t b, size_t *r) { return __builtin_mul_overflow(a, b, r); }

/* Narrowing: 1 if `a` is outside the target type (negative for the unsigned ones). */
static inline int ot_i64_to_int(int64_t a, int *r) {
  if (a < INT_MIN || a > INT_MAX) return 1;
  *r = (int)a;
  return 0;
}
static inline int ot_i64_to_size(int64_t a, size_t *r) {
  if (a < 0 || (uint64_t)a > SIZE_MAX) return 1;
  *r = (size_t)a;
  return 0;
}
static inline int ot_u64_to_size(uint64_t a, size_t *r) {
  if (a > SIZE_MAX) return 1;
  *r = (size_t)a;
  return 0;
}

/* Sizes through a sticky flag (see above). */
static inline int64_t ot_sz_add(int *ovf, int64_t a, int64_t b) {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) {
    *ovf = 1;
    return INT64_MAX;
  }
  return r;
}
static inline int64_t ot_sz_mul(int *ovf, int64_t a, int64_t b) {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) {
    *ovf = 1;
    return INT64_MAX;
  }
  return r;
}
static inline int64_t ot_sz_mul3(int *ovf, int64_t a, int64_t b, int64_t c) {
  return ot_sz_mul(ovf, ot_sz_mul(ovf, a, b), c);
}

#endif
