/* ot_test.c — shared helpers for tests. */
#include <omp.h>
#include <string.h>

#include "memory/device.h"
#include "ot_test.h"

uint64_t ot_test_rand_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float ot_test_rand_uniform(uint64_t *s, float lo, float hi) {
  return lo + (hi - lo) * (float)((ot_test_rand_u64(s) >> 40) * 0x1p-24);
}

void ot_test_fill_uniform(float *x, int64_t n, uint64_t seed, float lo, float hi) {
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i++) x[i] = ot_test_rand_uniform(&s, lo, hi);
}

int ot_test_dev(void) {
#ifdef OT_OFFLOAD
  if (omp_get_num_devices() > 0) return 0;
#endif
  return omp_get_initial_device();
}

int ot_test_usm_offloads(void) {
#ifdef OT_OFFLOAD
  return omp_get_num_devices() > 0;
#else
  return 0;
#endif
}

int ot_test_backends(ot_backend b[3]) {
  int n = 0;
  b[n++] = OT_BACKEND_HOST;
#ifdef OT_OFFLOAD
  b[n++] = OT_BACKEND_MAP;
  if (ot_test_usm_offloads()) b[n++] = OT_BACKEND_USM;
#endif
  return n;
}

ot_backend ot_test_moving_backend(void) {
#ifdef OT_OFFLOAD
  return OT_BACKEND_MAP;
#else
  return OT_BACKEND_HOST;
#endif
}

ot_ctx *ot_test_ctx(ot_backend b) {
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = b;
  ot_ctx *ctx = NULL;
  OT_ASSERT_OK(ot_ctx_create(&o, &ctx));
  return ctx;
}
