/* try.h — the samples' (and their tools') early return on a failed call:
 * the library has already recorded the message (ot_last_error). */
#ifndef OT_SAMPLES_TRY_H
#define OT_SAMPLES_TRY_H

#define TRY(x)                  \
  do {                          \
    ot_status s_ = (x);         \
    if (s_ != OT_OK) return s_; \
  } while (0)

#endif
