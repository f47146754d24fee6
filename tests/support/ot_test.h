/* ot_test.h — shared helpers for omptensor's cmocka tests. */
#ifndef OT_TEST_H
#define OT_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the includes above first */
#include <cmocka.h>

#include "omptensor/omptensor.h"

/* Fails the test with the library's message when a call does not return OT_OK. */
#define OT_ASSERT_OK(expr)                                                           \
  do {                                                                               \
    ot_status ot_s_ = (expr);                                                        \
    if (ot_s_ != OT_OK)                                                              \
      fail_msg("%s -> %s: %s", #expr, ot_status_str(ot_s_), ot_last_error());       \
  } while (0)

/* Asserts a status and that the message contains `needle`. */
#define OT_ASSERT_FAILS(expr, status, needle)                                                      \
  do {                                                                                             \
    ot_status ot_s_ = (expr);                                                                      \
    if (ot_s_ != (status))                                                                         \
      fail_msg("%s -> %s, expected %s (%s)", #expr, ot_status_str(ot_s_), ot_status_str(status),   \
               ot_last_error());                                                                   \
    if (!strstr(ot_last_error(), (needle)))                                                        \
      fail_msg("%s: message '%s' does not mention '%s'", #expr, ot_last_error(), (needle));        \
  } while (0)

/* A deterministic PRNG for test data (splitmix64). */
uint64_t ot_test_rand_u64(uint64_t *state);
float ot_test_rand_uniform(uint64_t *state, float lo, float hi);
void ot_test_fill_uniform(float *x, int64_t n, uint64_t seed, float lo, float hi);

/* The device tests should run kernels on: device 0 when the build has an
 * offload device (on offload-host its memory is really separate), else the
 * initial (host) device. */
int ot_test_dev(void);

/* Whether the usm backend can be tested here with budgets below the
 * program's size: wherever there is an offload device (issue 15: on a GPU
 * its placements hold the budget too; emulated devices make the same
 * decisions with copies). */
int ot_test_usm_offloads(void);

/* The backends this build can test with offloading budgets: host, and map
 * (+ usm where it offloads) when there is a device. Returns how many. */
int ot_test_backends(ot_backend b[3]);

/* The backend that copies for real where this build has an offload device
 * (map: pinned homes, a device arena per plan), else the host backend. */
ot_backend ot_test_moving_backend(void);

/* A context on backend b, defaults otherwise; fails the test if it cannot be made. */
ot_ctx *ot_test_ctx(ot_backend b);

#endif
