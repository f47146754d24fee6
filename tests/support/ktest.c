/* ktest.c — paired host/device buffers with guards, and the comparison. */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ktest.h"
#include "ot_test.h"
#include "omptensor/memory.h"

#define GUARD 64 /* bytes before and after each buffer */

/* ot_test_dev() and the random numbers come from ot_test.c (ot_test.h). */

void *ot_test_dev_alloc(size_t bytes) {
  void *p = NULL;
  assert_int_equal(ot_mem_alloc(OT_MEM_DEVICE, ot_test_dev(), bytes, &p), OT_OK);
  return p;
}

void ot_test_dev_free(void *p) { ot_mem_free(OT_MEM_DEVICE, ot_test_dev(), p); }

void ot_test_upload(void *dev_dst, const void *host_src, size_t bytes) {
  if (!bytes) return;
#ifndef OT_OFFLOAD
  memcpy(dev_dst, host_src, bytes); /* no libomptarget: the device is the host */
  return;
#endif
  assert_int_equal(omp_target_memcpy(dev_dst, host_src, bytes, 0, 0, ot_test_dev(), omp_get_initial_device()), 0);
}

void ot_test_download(void *host_dst, const void *dev_src, size_t bytes) {
  if (!bytes) return;
#ifndef OT_OFFLOAD
  memcpy(host_dst, dev_src, bytes);
  return;
#endif
  assert_int_equal(
      omp_target_memcpy(host_dst, dev_src, bytes, 0, 0, omp_get_initial_device(), ot_test_dev()), 0);
}

uint64_t ot_trand_u64(uint64_t *s) { return ot_test_rand_u64(s); }

float ot_trand_f(uint64_t *s, float lo, float hi) { return ot_test_rand_uniform(s, lo, hi); }

static size_t elem_bytes(ot_dtype dt) { return ot_dtype_block(dt) ? 0 : ot_dtype_bytes(dt, 1); }

ot_tbuf ot_tbuf_rand(ot_dtype dt, int64_t n, uint64_t seed, float lo, float hi) {
  ot_tbuf b = {dt, n, ot_dtype_bytes(dt, n), NULL, NULL, NULL, NULL};
  assert_true(b.bytes > 0 || n == 0);
  size_t total = b.bytes + 2 * GUARD;
  b.hbase = malloc(total);
  assert_non_null(b.hbase);
  b.h = (char *)b.hbase + GUARD;
  uint64_t s = seed * 0x2545f4914f6cdd1dull + 1;
  unsigned char *raw = b.hbase;
  for (size_t i = 0; i < total; i++) raw[i] = (unsigned char)ot_trand_u64(&s); /* guards + padding: noise */
  if (dt == OT_I32) {
    for (int64_t i = 0; i < n; i++) ((int32_t *)b.h)[i] = (int32_t)floorf(ot_trand_f(&s, lo, hi));
  } else {
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    assert_non_null(f);
    for (int64_t i = 0; i < n; i++) f[i] = ot_trand_f(&s, lo, hi);
    if (n) assert_int_equal(ot_convert(dt, b.h, OT_F32, f, n), OT_OK);
    free(f);
  }
  b.dbase = ot_test_dev_alloc(total);
  b.d = (char *)b.dbase + GUARD;
  ot_tbuf_push(&b);
  return b;
}

void ot_tbuf_push(ot_tbuf *b) { ot_test_upload(b->dbase, b->hbase, b->bytes + 2 * GUARD); }

void ot_tbuf_free(ot_tbuf *b) {
  free(b->hbase);
  ot_test_dev_free(b->dbase);
  memset(b, 0, sizeof *b);
}

ot_kview ot_tview(const ot_tbuf *b, int on_dev, int ndim, const int64_t *ne, const int64_t *nb) {
  ot_kview v = ot_kview_nd(on_dev ? b->d : b->h, b->dt, ndim, ne);
  if (nb)
    for (int d = 0; d < ndim; d++) v.nb[d] = nb[d];
  /* the view must stay inside the buffer */
  int64_t last = 0;
  for (int d = 0; d < ndim; d++) last += (ne[d] - 1) * v.nb[d];
  if (ot_kview_numel(v) > 0) assert_true(last < b->n);
  return v;
}

ot_kview ot_tview_dev(ot_kview host_view, const ot_tbuf *b) {
  host_view.p = (char *)b->d + ((char *)host_view.p - (char *)b->h);
  return host_view;
}

static float load(ot_dtype dt, const void *p, int64_t i) {
  switch (dt) {
  case OT_F32: return ((const float *)p)[i];
  case OT_F16: return ot_f16_to_f32(((const uint16_t *)p)[i]);
  case OT_BF16: return ot_bf16_to_f32(((const uint16_t *)p)[i]);
  case OT_I32: return (float)((const int32_t *)p)[i];
  default: return NAN;
  }
}

/* Element offset of v.p in b's host or device copy (0 when it is neither). */
static int64_t view_offset(const ot_tbuf *b, ot_kview v, size_t es) {
  const uintptr_t p = (uintptr_t)v.p, bases[2] = {(uintptr_t)b->h, (uintptr_t)b->d};
  for (int k = 0; k < 2; k++)
    if (bases[k] && p >= bases[k] && p < bases[k] + b->bytes) return (int64_t)((p - bases[k]) / es);
  return 0;
}

double ot_tcheck(const char *what, const ot_tbuf *b, ot_kview v, double tol) {
  size_t es = elem_bytes(b->dt), total = b->bytes + 2 * GUARD;
  assert_true(es > 0);
  unsigned char *got = malloc(total), *mask = calloc((size_t)(b->n ? b->n : 1), 1);
  assert_non_null(got);
  assert_non_null(mask);
  ot_test_download(got, b->dbase, total);
  const unsigned char *ref = b->hbase;
  /* guards */
  for (size_t i = 0; i < GUARD; i++)
    if (got[i] != ref[i] || got[total - 1 - i] != ref[total - 1 - i])
      fail_msg("%s: guard byte changed around the output buffer", what);
  /* mark the view's elements (from its first element's offset in the buffer) */
  ot_kview v4 = ot_kview_4d(v);
  const int64_t off = view_offset(b, v, es);
  for (int64_t i0 = 0; i0 < v4.ne[0]; i0++)
    for (int64_t i1 = 0; i1 < v4.ne[1]; i1++)
      for (int64_t i2 = 0; i2 < v4.ne[2]; i2++)
        for (int64_t i3 = 0; i3 < v4.ne[3]; i3++) {
          const int64_t i = off + i0 * v4.nb[0] + i1 * v4.nb[1] + i2 * v4.nb[2] + i3 * v4.nb[3];
          if (i < 0 || i >= b->n) fail_msg("%s: the output view leaves its buffer (element %lld)", what, (long long)i);
          mask[i] = 1;
        }
  const void *g = got + GUARD, *r = ref + GUARD;
  double num = 0.0, den = 0.0;
  int64_t bad_fin = -1;
  for (int64_t i = 0; i < b->n; i++) {
    if (!mask[i]) {
      if (memcmp((const char *)g + i * es, (const char *)r + i * es, es) != 0)
        fail_msg("%s: element %lld outside the output view changed", what, (long long)i);
      continue;
    }
    double x = load(b->dt, g, i), y = load(b->dt, r, i);
    if (!isfinite(x) && bad_fin < 0) bad_fin = i;
    num += (x - y) * (x - y);
    den += y * y;
  }
  free(got);
  free(mask);
  if (bad_fin >= 0) fail_msg("%s: output element %lld is not finite", what, (long long)bad_fin);
  double err = den > 0 ? sqrt(num / den) : sqrt(num);
  if (!(err <= tol)) fail_msg("%s: normalised error %.3g > tolerance %.3g", what, err, tol);
  return err;
}

/* libomptarget 19 leaks a few internal objects at exit (seen under LSan with
 * the offload-host plugin: operator new from libomptarget.so, ~5 KB); they
 * are not ours. LSan reads this hook when the test binary links it. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libomptarget\n"; }
