/* error.h (internal) — record a failure message and return its status.
 *
 *     if (!f) return ot_fail(OT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
 *
 * Messages say what was wrong, with which file/tensor/op, and what to do.
 */
#ifndef OT_CORE_ERROR_H
#define OT_CORE_ERROR_H

#include "omptensor/status.h"

#if defined(__GNUC__) || defined(__clang__)
#define OT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define OT_PRINTF(a, b)
#endif

/* The library's short names for ot_set_error (status.h) ... */
#define ot_fail ot_set_error

/* ... and for ot_prefix_error. */
#define ot_fail_context ot_prefix_error

/* Says something once per process per key (e.g. the fallback of pinned
 * memory to pageable host memory on a machine without CUDA): to the notice
 * handler if one is set (ot_set_notice_handler, status.h), else on stderr. */
void ot_warn_once(const char *key, const char *fmt, ...) OT_PRINTF(2, 3);

#endif
