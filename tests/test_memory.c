/* test_memory.c — memory spaces, contexts, and (on offload-host) that a
 * device copy is really separate from its host home. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "memory/device.h"
#include "ot_pragmas.h"
#include "ot_test.h"

static void spaces_allocate(void **state) {
  (void)state;
  int dev = ot_test_dev();
  for (int s = 0; s < OT_MEM_SPACE_COUNT; s++) {
    void *p = (void *)1;
    OT_ASSERT_OK(ot_mem_alloc((ot_mem_space)s, dev, 0, &p));
    assert_null(p); /* zero bytes: NULL */
    OT_ASSERT_OK(ot_mem_alloc((ot_mem_space)s, dev, 1000, &p));
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 256 == 0 || s == OT_MEM_DEVICE || s == OT_MEM_PINNED || s == OT_MEM_MANAGED, 1);
    ot_mem_free((ot_mem_space)s, dev, p);
  }
  ot_mem_free(OT_MEM_HOST, dev, NULL);
  void *p;
  OT_ASSERT_FAILS(ot_mem_alloc(OT_MEM_HOST, dev, SIZE_MAX - 10, &p), OT_ERR_OUT_OF_MEMORY, "host memory");
}

/* Writes on the device are invisible on the host until copied back. On the
 * host-offload plugin this holds because the device buffer is a separate
 * allocation; on the plain host build device == host, so it is skipped. */
static void device_copy_is_separate(void **state) {
  (void)state;
  int dev = ot_test_dev();
  if (dev == omp_get_initial_device()) skip();
  enum { N = 1000 };
  float *home = malloc(N * sizeof *home);
  for (int i = 0; i < N; i++) home[i] = (float)i;
  float *d;
  OT_ASSERT_OK(ot_mem_alloc(OT_MEM_DEVICE, dev, N * sizeof *d, (void **)&d));
  assert_ptr_not_equal(d, home);
  OT_ASSERT_OK(ot_mem_copy(d, dev, home, OT_DEVICE_HOST, N * sizeof *d));
  OT_PARFOR(dev, OT_DEVPTR(d))
  for (int i = 0; i < N; i++) d[i] = d[i] * 2.0f + 1.0f;
  for (int i = 0; i < N; i++) assert_true(home[i] == (float)i); /* host unchanged */
  OT_ASSERT_OK(ot_mem_copy(home, OT_DEVICE_HOST, d, dev, N * sizeof *d));
  for (int i = 0; i < N; i++) assert_true(home[i] == 2.0f * (float)i + 1.0f);
  ot_mem_free(OT_MEM_DEVICE, dev, d);
  free(home);
}

static void context_choices(void **state) {
  (void)state;
  ot_ctx *ctx;
  ot_ctx_opts o = ot_ctx_opts_default();
  OT_ASSERT_OK(ot_ctx_create(&o, &ctx));
#ifdef OT_OFFLOAD
  assert_int_equal(ot_ctx_backend(ctx), OT_BACKEND_MAP);
  assert_int_equal(ot_ctx_device(ctx, 0), 0);
  if (ot_dev_is_gpu(0)) { /* default: 95 % of what the GPU reports free */
    uint64_t fr, tot;
    ot_device_memory(0, &fr, &tot);
    /* free memory shrinks once the CUDA context exists: compare with the total */
    assert_true(ot_ctx_budget(ctx, 0) <= tot && ot_ctx_budget(ctx, 0) >= tot / 2);
  } else {
    assert_int_equal(ot_ctx_budget(ctx, 0), 1ull << 30); /* emulated device default */
  }
#else
  assert_int_equal(ot_ctx_backend(ctx), OT_BACKEND_HOST);
  assert_int_equal(ot_ctx_device(ctx, 0), OT_DEVICE_HOST);
#endif
  ot_ctx_destroy(ctx);

  o.budget_bytes = 12345;
  o.backend = OT_BACKEND_HOST;
  OT_ASSERT_OK(ot_ctx_create(&o, &ctx));
  assert_int_equal(ot_ctx_budget(ctx, 0), 12345);
  assert_int_equal(ot_ctx_num_devices(ctx), 1);
  ot_ctx_destroy(ctx);

#ifdef OT_OFFLOAD
  o = ot_ctx_opts_default();
  o.device = omp_get_num_devices();
  OT_ASSERT_FAILS(ot_ctx_create(&o, &ctx), OT_ERR_INVALID_ARG, "offload device(s)"); /* never a silent host run */
  if (omp_get_num_devices() < 4) return; /* a one-GPU machine: the rest needs the emulated devices */
  /* several emulated devices, one budget each */
  o = ot_ctx_opts_default();
  o.device = 1;
  o.n_devices = 3;
  o.budget_bytes = 1 << 20;
  o.budgets[1] = 2 << 20;
  OT_ASSERT_OK(ot_ctx_create(&o, &ctx));
  assert_int_equal(ot_ctx_num_devices(ctx), 3);
  assert_int_equal(ot_ctx_device(ctx, 2), 3);
  assert_int_equal(ot_ctx_budget(ctx, 0), 1 << 20);
  assert_int_equal(ot_ctx_budget(ctx, 1), 2 << 20);
  ot_ctx_destroy(ctx);
  o.n_devices = 9;
  OT_ASSERT_FAILS(ot_ctx_create(&o, &ctx), OT_ERR_INVALID_ARG, "devices 1..9 asked");
#else
  o = ot_ctx_opts_default();
  o.backend = OT_BACKEND_MAP;
  OT_ASSERT_FAILS(ot_ctx_create(&o, &ctx), OT_ERR_UNSUPPORTED, "needs an offload device");
#endif
  ot_backend b;
  OT_ASSERT_FAILS(ot_backend_parse("cuda", &b), OT_ERR_INVALID_ARG, "unknown backend 'cuda'");
  OT_ASSERT_OK(ot_backend_parse("USM", &b));
  assert_int_equal(b, OT_BACKEND_USM);
  ot_ctx_destroy(NULL);
}

static void mandatory_without_device(void **state) {
  (void)state;
#ifdef OT_OFFLOAD
  skip(); /* devices exist here */
#else
  ot_ctx *ctx;
  setenv("OMP_TARGET_OFFLOAD", "MANDATORY", 1);
  ot_ctx_opts o = ot_ctx_opts_default();
  OT_ASSERT_FAILS(ot_ctx_create(&o, &ctx), OT_ERR_DEVICE, "MANDATORY");
  unsetenv("OMP_TARGET_OFFLOAD");
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(spaces_allocate),
      cmocka_unit_test(device_copy_is_separate),
      cmocka_unit_test(context_choices),
      cmocka_unit_test(mandatory_without_device),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
