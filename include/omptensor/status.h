/* status.h — every fallible omptensor call returns an ot_status.
 *
 * The library never exits or aborts on bad input or a resource failure: it
 * returns a status, and records a message saying what was wrong, with which
 * file / tensor / op, and what to do. Read it with ot_last_error() on the
 * same thread, before the next failing call overwrites it.
 *
 *     ot_status s = ot_tensor_create(ctx, &desc, &t);
 *     if (s != OT_OK) fprintf(stderr, "error: %s\n", ot_last_error());
 */
#ifndef OMPTENSOR_STATUS_H
#define OMPTENSOR_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ot_status {
  OT_OK = 0,
  OT_ERR_INVALID_ARG,   /* a caller passed something the contract forbids */
  OT_ERR_OUT_OF_MEMORY, /* host or pinned/managed allocation failed */
  OT_ERR_DEVICE_OOM,    /* the device arena cannot hold the request */
  OT_ERR_BUDGET,        /* the plan cannot fit in the device budget */
  OT_ERR_SHAPE,         /* shapes or strides do not agree */
  OT_ERR_DTYPE,         /* a dtype not supported here */
  OT_ERR_IO,            /* open/read/write failed */
  OT_ERR_FORMAT,        /* a file is malformed (safetensors, JSON, YAML, npy) */
  OT_ERR_NOT_FOUND,     /* a named file, tensor or key is missing */
  OT_ERR_UNSUPPORTED,   /* valid, but this build or device cannot do it */
  OT_ERR_DEVICE,        /* the offload runtime or driver reported a failure */
  OT_ERR_STATE,         /* the call is not valid in the object's current state */
  OT_ERR_INTEGRITY,     /* a checksum did not match (OMPTENSOR_VERIFY) */
  OT_ERR_NUMERIC,       /* a result is not finite (NaN or Inf logits, loss): the weights or inputs */
  OT_STATUS_COUNT
} ot_status;

/* A short, static description of the status kind ("device out of memory"). */
const char *ot_status_str(ot_status s);

/* The detailed message of the last failure recorded on this thread, or "" if
 * none. The pointer stays valid until the next failing call on this thread. */
const char *ot_last_error(void);

/* Records a failure message (printf-style) for this thread and returns `s`:
 * for code built on omptensor (models, tools) to report errors the same way
 * the library does. */
ot_status ot_set_error(ot_status s, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Prefixes this thread's message with "context: " (e.g. the file or the
 * option being read) and returns `s`. */
ot_status ot_prefix_error(ot_status s, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Clears this thread's message. */
void ot_clear_error(void);

/* Notices: what the library says once per process that is not an error, e.g.
 * "no GPU: pinned host memory falls back to pageable host memory". By default
 * each is printed on stderr as "omptensor: MESSAGE" when it first arises. A
 * program that wants them elsewhere or later installs a handler: it gets each
 * notice once (from any thread; the message is valid during the call only).
 * The omptensor command holds them back until its input is accepted, so that
 * bad input gets exactly one line. NULL restores the default. Set it before
 * the library's threads start (e.g. first thing in main). */
typedef void (*ot_notice_fn)(void *user, const char *message);
void ot_set_notice_handler(ot_notice_fn fn, void *user);

/* Returns from the calling function with the status of `expr` when it is not
 * OT_OK (the message is already recorded):
 *
 *     OT_TRY(ot_tensor_create(ctx, "x", OT_F32, 2, shape, &x));
 */
#define OT_TRY(expr)              \
  do {                            \
    ot_status ot_try_s_ = (expr); \
    if (ot_try_s_ != OT_OK)       \
      return ot_try_s_;           \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif
