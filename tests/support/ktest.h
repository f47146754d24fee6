/* ktest.h — helpers for kernel tests (tests/test_k_*.c).
 *
 * A kernel test builds paired buffers: the same bytes on the host (for the C
 * reference) and on the test device (for the kernel), runs both, downloads
 * the device result and compares:
 *   - elements inside the output view: normalised error
 *     ||out - ref|| / ||ref|| <= tol, and every value finite;
 *   - every other byte of the buffer (padding between strided rows, and guard
 *     bytes before and after): bitwise unchanged.
 * Inputs are seeded random values, never zeros.
 *
 * The test device is offload device 0 where there is one (on the
 * offload-host build its memory is separate, so a missing copy or a host
 * pointer in a kernel fails), else the initial device. */
#ifndef OT_TESTS_KTEST_H
#define OT_TESTS_KTEST_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

int ot_test_dev(void); /* ot_test.h: device 0 if there is one, else the host */

/* device memory on ot_test_dev() and copies to/from it (assert on failure) */
void *ot_test_dev_alloc(size_t bytes);
void ot_test_dev_free(void *p);
void ot_test_upload(void *dev_dst, const void *host_src, size_t bytes);
void ot_test_download(void *host_dst, const void *dev_src, size_t bytes);

typedef struct ot_tbuf {
  ot_dtype dt;
  int64_t n;     /* elements (for q8b: values, a multiple of 32) */
  size_t bytes;  /* bytes of the n elements */
  void *h, *d;   /* host and device copies of element 0 (after the front guard) */
  void *hbase, *dbase;
} ot_tbuf;

/* n elements of dtype dt, filled with uniform random values in [lo, hi)
 * (i32: integers in [lo, hi)), guards included, identical on host and device. */
ot_tbuf ot_tbuf_rand(ot_dtype dt, int64_t n, uint64_t seed, float lo, float hi);
void ot_tbuf_free(ot_tbuf *b);
/* After changing b->h by hand: copy it (and the guards) to the device. */
void ot_tbuf_push(ot_tbuf *b);

/* A view of the buffer (host or device side); nb NULL = contiguous. */
ot_kview ot_tview(const ot_tbuf *b, int on_dev, int ndim, const int64_t *ne, const int64_t *nb);
ot_kview ot_tview_dev(ot_kview host_view, const ot_tbuf *b);  /* same view, device address */

/* Compares the device copy of `b` against its host copy (see top). `v` is
 * the output view (host or device side: its shape, strides and the offset
 * of its first element in the buffer are used).
 * Returns the normalised error; fails the cmocka test if above tol, if a
 * value is NaN/Inf, or if a byte outside the view changed. */
double ot_tcheck(const char *what, const ot_tbuf *b, ot_kview v, double tol);

/* deterministic random numbers for tests (splitmix64) */
uint64_t ot_trand_u64(uint64_t *state);
float ot_trand_f(uint64_t *state, float lo, float hi);

#endif
