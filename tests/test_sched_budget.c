/* test_sched_budget.c — feasibility: an op whose tensors cannot fit is refused
 * before running, with its name, its bytes and the budget; a budget exactly
 * at the bound works, one byte below fails.
 *
 * The bound (sched.h): the largest over ops of the sum, over the distinct
 * storages an op touches, of the storage bytes rounded up to 256. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "memory/device.h"
#include "ot_test.h"
#include "sched_support.h"

typedef struct fixture {
  ot_ctx *ctx;
  ot_program *p;
  ot_tensor *a, *b, *c, *d, *a_view;
} fixture;

/* big: a[1000] (4000 B -> 4096), b[300] (1200 -> 1280) -> c[64] (256);
 * then d[10] = mix(c, a[view]) (40 -> 256): a view shares a's storage. */
static void build(fixture *f, ot_backend be) {
  memset(f, 0, sizeof *f);
  f->ctx = ot_test_ctx(be);
  int64_t na = 1000, nb = 300, nc = 64, nd = 10;
  assert_int_equal(ot_tensor_create(f->ctx, "a", OT_F32, 1, &na, &f->a), OT_OK);
  assert_int_equal(ot_tensor_create(f->ctx, "b", OT_F32, 1, &nb, &f->b), OT_OK);
  assert_int_equal(ot_tensor_create(f->ctx, "c", OT_F32, 1, &nc, &f->c), OT_OK);
  assert_int_equal(ot_tensor_create(f->ctx, "d", OT_F32, 1, &nd, &f->d), OT_OK);
  assert_int_equal(ot_tensor_slice(f->a, 0, 100, 50, &f->a_view), OT_OK);
  ts_fill(f->a, 1);
  ts_fill(f->b, 2);
  assert_int_equal(ot_program_create(f->ctx, &f->p), OT_OK);
  ts_mix_params prm = {{0.5f, 0.5f, 0}, 0.25f, -1};
  ot_tensor *in1[] = {f->a, f->b}, *in2[] = {f->c, f->a_view, f->a};
  assert_int_equal(ts_add_mix(f->p, "big_op", in1, 2, &f->c, 1, &prm), OT_OK);
  assert_int_equal(ts_add_mix(f->p, "small_op", in2, 3, &f->d, 1, &prm), OT_OK);
  assert_int_equal(ot_program_mark_output(f->p, f->d), OT_OK);
}

static void teardown(fixture *f) {
  ot_program_destroy(f->p);
  ot_tensor_destroy(f->a_view);
  ot_tensor_destroy(f->a);
  ot_tensor_destroy(f->b);
  ot_tensor_destroy(f->c);
  ot_tensor_destroy(f->d);
  ot_ctx_destroy(f->ctx);
}

static const uint64_t BOUND = 4096 + 1280 + 256;

static void test_bound(void **state) {
  (void)state;
  fixture f;
  build(&f, OT_BACKEND_HOST);
  uint64_t b;
  int op;
  assert_int_equal(ot_sched_min_budget(f.p, &b, &op), OT_OK);
  assert_int_equal(b, BOUND);
  assert_int_equal(op, 0);
  teardown(&f);
}

static void expect_refused(fixture *f, ot_strategy s, uint64_t budget) {
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = s;
  o.budget_bytes = budget;
  ot_plan *plan = (ot_plan *)&o; /* must be reset to NULL */
  assert_int_equal(ot_sched_plan(f->ctx, f->p, &o, &plan), OT_ERR_BUDGET);
  assert_null(plan);
  const char *m = ot_last_error();
  char bound[32], bud[32];
  snprintf(bound, sizeof bound, "%llu", (unsigned long long)BOUND);
  snprintf(bud, sizeof bud, "%llu", (unsigned long long)budget);
  if (!strstr(m, "big_op") || !strstr(m, bound) || !strstr(m, bud))
    fail_msg("message lacks the op, its bytes or the budget: %s", m);
}

static void at_bound(ot_backend be) {
  for (int s = OT_STRATEGY_MINIMAL; s < OT_STRATEGY_COUNT; s++) {
    fixture f;
    build(&f, be);
    expect_refused(&f, (ot_strategy)s, BOUND - 1);
    expect_refused(&f, (ot_strategy)s, 256);
    ot_sched_opts o = ot_sched_opts_default();
    o.strategy = (ot_strategy)s;
    o.budget_bytes = BOUND;
    ot_plan *plan;
    if (ot_sched_plan(f.ctx, f.p, &o, &plan) != OT_OK) fail_msg("%s", ot_last_error());
    ot_trace *tr;
    assert_int_equal(ot_trace_create(&tr), OT_OK);
    assert_int_equal(ot_sched_run(plan, tr), OT_OK);
    if (s == OT_STRATEGY_MINIMAL) {
      /* small_op needs room for d: the weight b is dropped clean (next used by
       * the next run); after small_op the temporary c dies dirty: two copies
       * that needed no write-back. d is written home. */
      ot_trace_summary sm = ot_trace_summarize(tr);
      assert_int_equal(sm.evictions, 1);
      assert_int_equal(sm.writebacks_avoided, 2);
      assert_int_equal(sm.downloads, 1);
      assert_int_equal(sm.bytes_to_host, 40);
      assert_int_equal(sm.bytes_to_device, 4000 + 1200);
    }
    assert_int_equal(ot_sched_run(plan, tr), OT_OK);
    assert_int_equal(ot_trace_check_budget(tr, BOUND), OT_OK);
    /* the check must be able to fail: the first op filled the arena */
    assert_int_equal(ot_trace_check_budget(tr, BOUND - 1), OT_ERR_BUDGET);
    /* d = 0.5 * (0.25 + 0.5 * c[j % 64] + 0.5 * a[100 + j]) with c = 0.5 * (0.25 + 0.5 a[j] + 0.5 b[j]) */
    const float *a = ot_tensor_data(f.a), *b = ot_tensor_data(f.b), *d = ot_tensor_data(f.d);
    for (int j = 0; j < 10; j++) {
      float c = 0.5f * (0.25f + 0.5f * a[j] + 0.5f * b[j]);
      float want = 0.5f * (0.25f + 0.5f * c + 0.5f * a[100 + j]);
      assert_float_equal(d[j], want, 1e-6);
    }
    ot_trace_destroy(tr);
    ot_plan_destroy(plan);
    teardown(&f);
  }
}

static void test_exact_bound(void **state) {
  (void)state;
  at_bound(OT_BACKEND_HOST);
  if (ot_num_devices() > 0) at_bound(OT_BACKEND_MAP);
}

static void test_none_needs_everything(void **state) {
  (void)state;
  fixture f;
  build(&f, OT_BACKEND_HOST);
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = OT_STRATEGY_NONE;
  uint64_t all = 4096 + 1280 + 256 + 256;
  o.budget_bytes = all - 1;
  ot_plan *plan;
  assert_int_equal(ot_sched_plan(f.ctx, f.p, &o, &plan), OT_ERR_BUDGET);
  assert_non_null(strstr(ot_last_error(), "none"));
  o.budget_bytes = all;
  assert_int_equal(ot_sched_plan(f.ctx, f.p, &o, &plan), OT_OK);
  assert_int_equal(ot_plan_get_stats(plan, 0).peak_bytes, all);
  assert_int_equal(ot_plan_get_stats(plan, 0).evictions, 0);
  /* replays keep the weights a and b: only nothing is uploaded again */
  assert_int_equal(ot_plan_get_stats(plan, 1).uploads, 0);
  assert_int_equal(ot_sched_run(plan, NULL), OT_OK);
  ot_plan_destroy(plan);
  teardown(&f);
}

static void test_bad_args(void **state) {
  (void)state;
  fixture f;
  build(&f, OT_BACKEND_HOST);
  ot_sched_opts o = ot_sched_opts_default();
  ot_plan *plan;
  o.device_index = 1;
  assert_int_equal(ot_sched_plan(f.ctx, f.p, &o, &plan), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "device index 1"));
  o.device_index = 0;
  o.strategy = OT_STRATEGY_COUNT;
  assert_int_equal(ot_sched_plan(f.ctx, f.p, &o, &plan), OT_ERR_INVALID_ARG);
  assert_int_equal(ot_sched_plan(NULL, f.p, NULL, &plan), OT_ERR_INVALID_ARG);
  assert_int_equal(ot_sched_plan(f.ctx, f.p, NULL, NULL), OT_ERR_INVALID_ARG);
  assert_int_equal(ot_sched_run(NULL, NULL), OT_ERR_INVALID_ARG);
  ot_strategy s;
  assert_int_equal(ot_strategy_parse("Aggressive", &s), OT_OK);
  assert_int_equal(s, OT_STRATEGY_AGGRESSIVE);
  assert_int_equal(ot_strategy_parse("lazy", &s), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "lazy"));
  /* a plan made before the program changed refuses to run */
  assert_int_equal(ot_sched_plan(f.ctx, f.p, NULL, &plan), OT_OK);
  assert_int_equal(ot_program_mark_output(f.p, f.c), OT_OK);
  assert_int_equal(ot_sched_run(plan, NULL), OT_ERR_STATE);
  assert_non_null(strstr(ot_last_error(), "plan it again"));
  ot_plan_destroy(plan);
  ot_plan_destroy(NULL);
  teardown(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bound),
      cmocka_unit_test(test_exact_bound),
      cmocka_unit_test(test_none_needs_everything),
      cmocka_unit_test(test_bad_args),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
