/* test_fault_alloc.c — OMPTENSOR_FAULT on allocations (core/fault.h):
 * the N-th pinned / managed / device allocation fails with a status and a
 * message naming the tensor or the plan, everything made before it can be
 * destroyed, nothing leaks (LeakSanitizer in the asan preset), and the
 * next attempt succeeds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain_support.h"
#include "core/fault.h"
#include "ot_test.h"

#define NT 4

/* The spec parser: good and bad forms. */
static void spec_parsing(void **state) {
  (void)state;
  OT_ASSERT_OK(ot_fault_configure("device_alloc:2,pinned_alloc:1,managed_alloc:3,transfer:10"));
  OT_ASSERT_OK(ot_fault_configure(""));
  OT_ASSERT_OK(ot_fault_configure(NULL));
  OT_ASSERT_FAILS(ot_fault_configure("transfer"), OT_ERR_INVALID_ARG, "not KIND:N");
  OT_ASSERT_FAILS(ot_fault_configure("disk:3"), OT_ERR_INVALID_ARG, "unknown kind 'disk'");
  OT_ASSERT_FAILS(ot_fault_configure("transfer:0"), OT_ERR_INVALID_ARG, ">= 1");
  OT_ASSERT_FAILS(ot_fault_configure("transfer:3x"), OT_ERR_INVALID_ARG, ">= 1");
  OT_ASSERT_FAILS(ot_fault_configure("transfer:-1"), OT_ERR_INVALID_ARG, ">= 1");
  /* a bad spec turns injection off */
  assert_int_equal(ot_fault_hit(OT_FAULT_TRANSFER), 0);
  assert_int_equal(ot_fault_count(OT_FAULT_TRANSFER), 0);
  OT_ASSERT_OK(ot_fault_configure("transfer:2"));
  assert_int_equal(ot_fault_hit(OT_FAULT_TRANSFER), 0);
  assert_int_equal(ot_fault_hit(OT_FAULT_TRANSFER), 1);
  assert_int_equal(ot_fault_hit(OT_FAULT_TRANSFER), 0); /* only the N-th */
  assert_int_equal(ot_fault_count(OT_FAULT_TRANSFER), 3);
  OT_ASSERT_OK(ot_fault_configure(NULL));
}

/* Creates NT tensors in `space` with the N-th allocation failing. */
static void homes_in(ot_mem_space space, const char *kind) {
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = OT_BACKEND_HOST;
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&co, &ctx));
  for (int n = 1; n <= NT; n++) {
    char spec[64];
    snprintf(spec, sizeof spec, "%s:%d", kind, n);
    OT_ASSERT_OK(ot_fault_configure(spec));
    ot_tensor *t[NT] = {0};
    for (int i = 0; i < NT; i++) {
      char name[16];
      snprintf(name, sizeof name, "t%d", i);
      int64_t shape[2] = {3, 5 + i};
      ot_status s = ot_tensor_create_in(ctx, name, OT_F32, 2, shape, space, &t[i]);
      if (i == n - 1) {
        assert_int_equal(s, OT_ERR_OUT_OF_MEMORY);
        assert_null(t[i]);
        if (!strstr(ot_last_error(), name) || !strstr(ot_last_error(), "OMPTENSOR_FAULT") ||
            !strstr(ot_last_error(), ot_mem_space_name(space)))
          fail_msg("%s: message '%s' should name %s, the space and the injection", spec, ot_last_error(), name);
      } else {
        OT_ASSERT_OK(s);
        /* usable: the home is there and zeroed */
        assert_float_equal(((float *)ot_tensor_data(t[i]))[shape[0] * shape[1] - 1], 0.0f, 0);
      }
    }
    assert_int_equal(ot_fault_count(space == OT_MEM_PINNED ? OT_FAULT_PINNED_ALLOC : OT_FAULT_MANAGED_ALLOC), NT);
    for (int i = 0; i < NT; i++) ot_tensor_destroy(t[i]);
  }
  OT_ASSERT_OK(ot_fault_configure(NULL));
  ot_ctx_destroy(ctx);
}

static void pinned_homes(void **state) {
  (void)state;
  homes_in(OT_MEM_PINNED, "pinned_alloc");
}

static void managed_homes(void **state) {
  (void)state;
  homes_in(OT_MEM_MANAGED, "managed_alloc");
}

/* Every pinned allocation of a whole program's tensors failing in turn:
 * cs_chain_create cleans up what it made; the next attempt works. */
static void program_tensors(void **state) {
  (void)state;
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = ot_test_moving_backend();
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&co, &ctx));
  const int layers = 3, allocs = 2 + 2 * layers; /* x, y, w_i, h_i */
  for (int n = 1; n <= allocs; n++) {
    char spec[32];
    snprintf(spec, sizeof spec, "pinned_alloc:%d", n);
    OT_ASSERT_OK(ot_fault_configure(spec));
    cs_chain c;
    ot_status s = cs_chain_create(ctx, layers, 300, &c);
    if (co.backend == OT_BACKEND_MAP) {
      assert_int_equal(s, OT_ERR_OUT_OF_MEMORY);
      assert_non_null(strstr(ot_last_error(), "OMPTENSOR_FAULT"));
    } else {
      OT_ASSERT_OK(s); /* host homes are not pinned */
      cs_chain_destroy(&c);
    }
  }
  OT_ASSERT_OK(ot_fault_configure(NULL));
  ot_ctx_destroy(ctx);
}

/* Planning allocates no device memory and moves nothing; the first run
 * allocates the plan's arena: failing it fails the run with
 * OT_ERR_DEVICE_OOM naming the arena; the next run works (again = 1), or
 * the plan is destroyed right away (again = 0). On a GPU the first plan of
 * the process that weighs hybrid compute (compute auto, weights streaming)
 * measures a small copy's latency in a 4 KiB device buffer of its own, once
 * (hybrid.c): a plan made first, before any injection, takes that, so the
 * plans below are what the test claims on any device (issue 43: on the
 * H200 the measurement was the first device allocation counted, and it
 * swallowed the injected failure). */
static void plan_and_arena(void **state) {
  (void)state;
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = ot_test_moving_backend();
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&co, &ctx));
  cs_chain c;
  OT_ASSERT_OK(cs_chain_create(ctx, 4, 1000, &c));
  float ref[1000];
  cs_chain_reference(&c, ref);
  /* compute auto, and (map) hybrid asked for: what auto weighs on a GPU,
   * its measurement included, on any device */
  const int n_compute = co.backend == OT_BACKEND_MAP ? 2 : 1;
  for (int k = 0; k < n_compute; k++) {
    ot_sched_opts o = ot_sched_opts_default();
    o.budget_bytes = cs_chain_min_budget(&c);
    o.compute = k ? OT_COMPUTE_HYBRID : OT_COMPUTE_AUTO;
    ot_plan *plan;
    OT_ASSERT_OK(ot_sched_plan(ctx, c.p, &o, &plan)); /* the process's one-time measurement, if any */
    ot_plan_destroy(plan);
    for (int again = 0; again <= 1; again++) {
      OT_ASSERT_OK(ot_fault_configure("device_alloc:1,transfer:1"));
      OT_ASSERT_OK(ot_sched_plan(ctx, c.p, &o, &plan));
      assert_int_equal(ot_fault_count(OT_FAULT_DEVICE_ALLOC), 0);
      assert_int_equal(ot_fault_count(OT_FAULT_TRANSFER), 0);
      OT_ASSERT_OK(ot_fault_configure("device_alloc:1"));
      ot_status s = ot_sched_run(plan, NULL);
      if (co.backend == OT_BACKEND_MAP) {
        OT_ASSERT_FAILS(s, OT_ERR_DEVICE_OOM, "arena");
        assert_non_null(strstr(ot_last_error(), "OMPTENSOR_FAULT"));
        if (again) OT_ASSERT_OK(ot_sched_run(plan, NULL)); /* the 2nd allocation is not injected */
      } else {
        OT_ASSERT_OK(s);
        assert_int_equal(ot_fault_count(OT_FAULT_DEVICE_ALLOC), 0); /* the host backend has no arena */
      }
      if (again || co.backend != OT_BACKEND_MAP) cs_chain_expect(&c, ref);
      ot_plan_destroy(plan);
    }
  }
  OT_ASSERT_OK(ot_fault_configure(NULL));
  cs_chain_destroy(&c);
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(spec_parsing), cmocka_unit_test(pinned_homes),
                                     cmocka_unit_test(managed_homes), cmocka_unit_test(program_tensors),
                                     cmocka_unit_test(plan_and_arena)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
