/* status.c — status strings and the per-thread last-error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "ot_pragmas.h"

static _Thread_local char last_msg[1024];

const char *ot_status_str(ot_status s) {
  switch (s) {
  case OT_OK: return "ok";
  case OT_ERR_INVALID_ARG: return "invalid argument";
  case OT_ERR_OUT_OF_MEMORY: return "host out of memory";
  case OT_ERR_DEVICE_OOM: return "device out of memory";
  case OT_ERR_BUDGET: return "does not fit the device memory budget";
  case OT_ERR_SHAPE: return "shape mismatch";
  case OT_ERR_DTYPE: return "unsupported dtype";
  case OT_ERR_IO: return "I/O error";
  case OT_ERR_FORMAT: return "malformed input";
  case OT_ERR_NOT_FOUND: return "not found";
  case OT_ERR_UNSUPPORTED: return "unsupported";
  case OT_ERR_DEVICE: return "device error";
  case OT_ERR_STATE: return "invalid state";
  case OT_ERR_INTEGRITY: return "integrity check failed";
  case OT_ERR_NUMERIC: return "result is not finite";
  case OT_STATUS_COUNT: break;
  }
  return "unknown status";
}

const char *ot_last_error(void) { return last_msg; }

void ot_clear_error(void) { last_msg[0] = '\0'; }

static ot_status vset(ot_status s, const char *fmt, va_list ap) {
  /* format first: the arguments may quote the current message */
  char buf[sizeof last_msg];
  vsnprintf(buf, sizeof buf, fmt, ap);
  memcpy(last_msg, buf, sizeof buf);
  return s;
}

ot_status ot_set_error(ot_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vset(s, fmt, ap);
  va_end(ap);
  return s;
}

ot_status ot_prefix_error(ot_status s, const char *fmt, ...) {
  char prefix[512], old[sizeof last_msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, last_msg, sizeof old);
  snprintf(last_msg, sizeof last_msg, "%s: %s", prefix, old[0] ? old : ot_status_str(s));
  return s;
}

static ot_notice_fn notice_fn;
static void *notice_user;

void ot_set_notice_handler(ot_notice_fn fn, void *user) {
  OT_CRITICAL(ot_warn_once)
  {
    notice_fn = fn;
    notice_user = user;
  }
}

void ot_warn_once(const char *key, const char *fmt, ...) {
  /* A handful of distinct keys per process; a small table is enough, and a
   * key beyond it is simply printed again rather than lost. */
  static const char *seen[32];
  static int n_seen;
  int first = 1;
  ot_notice_fn fn = NULL;
  void *user = NULL;
  OT_CRITICAL(ot_warn_once)
  {
    for (int i = 0; i < n_seen; i++)
      if (strcmp(seen[i], key) == 0) first = 0;
    if (first && n_seen < (int)(sizeof seen / sizeof seen[0])) seen[n_seen++] = key;
    fn = notice_fn;
    user = notice_user;
  }
  if (!first) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (fn) fn(user, msg);
  else fprintf(stderr, "omptensor: %s\n", msg);
}
