/* test_sched_property.c — random programs under every budget, strategy and
 * backend give bitwise the same results as with an unlimited budget, never
 * hold more device bytes than the budget, and every op finds its tensors
 * resident. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "memory/device.h"
#include "sched_support.h"
#include "ot_test.h"

#define RUNS 3
#define UNLIMITED (1ull << 40)

static const uint64_t seeds[] = {1,   2,   3,    5,    8,    13,   21,   34,   55,    89,    144,
                                 233, 377, 610,  987,  1597, 2584, 4181, 6765, 10946, 17711, 28657,
                                 4,   6};

typedef struct result {
  float *v;        /* RUNS snapshots */
  int64_t n;       /* floats per snapshot */
  ot_status plan;  /* status of ot_sched_plan */
  ot_plan_stats st;
} result;

static ot_ctx *make_ctx(ot_backend b) {
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = b;
  /* not device 0: nothing may assume it */
  if (b != OT_BACKEND_HOST) o.device = ot_num_devices() > 1 ? 1 : 0;
  ot_ctx *ctx = NULL;
  assert_int_equal(ot_ctx_create(&o, &ctx), OT_OK);
  return ctx;
}

/* Builds the program of `seed` in `ctx`, plans it, runs it RUNS times. */
static result run_config(ot_ctx *ctx, uint64_t seed, ot_strategy strat, uint64_t budget) {
  result res = {0};
  ts_randprog *rp = NULL;
  assert_int_equal(ts_randprog_create(ctx, seed, &rp), OT_OK);
  res.n = ts_randprog_snapshot(rp, NULL);
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = strat;
  o.budget_bytes = budget;
  ot_plan *plan = NULL;
  res.plan = ot_sched_plan(ctx, rp->p, &o, &plan);
  if (res.plan == OT_OK) {
    res.st = ot_plan_get_stats(plan, 1);
    res.v = malloc((size_t)(res.n * RUNS + 1) * sizeof(float));
    assert_non_null(res.v);
    ot_trace *tr;
    assert_int_equal(ot_trace_create(&tr), OT_OK);
    for (int r = 0; r < RUNS; r++) {
      ts_randprog_prepare_run(rp, r);
      ot_status s = ot_sched_run(plan, tr);
      if (s != OT_OK) fail_msg("seed %llu %s budget %llu run %d: %s", (unsigned long long)seed,
                               ot_strategy_name(strat), (unsigned long long)budget, r, ot_last_error());
      ts_randprog_snapshot(rp, res.v + r * res.n);
    }
    if (ot_trace_check_budget(tr, budget) != OT_OK)
      fail_msg("seed %llu %s budget %llu: %s", (unsigned long long)seed, ot_strategy_name(strat),
               (unsigned long long)budget, ot_last_error());
    ot_trace_summary sum = ot_trace_summarize(tr);
    assert_true(sum.peak_device_bytes <= budget);
    assert_int_equal(sum.runs, RUNS);
    ot_trace_destroy(tr);
    ot_plan_destroy(plan);
  }
  ts_randprog_destroy(rp);
  return res;
}

static uint64_t total_bytes(ot_ctx *ctx, uint64_t seed, uint64_t *min_budget) {
  ts_randprog *rp;
  assert_int_equal(ts_randprog_create(ctx, seed, &rp), OT_OK);
  assert_int_equal(ot_sched_min_budget(rp->p, min_budget, NULL), OT_OK);
  /* strategy none with an unlimited budget reports what it keeps */
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = OT_STRATEGY_NONE;
  o.budget_bytes = UNLIMITED;
  ot_plan *plan;
  assert_int_equal(ot_sched_plan(ctx, rp->p, &o, &plan), OT_OK);
  uint64_t tot = ot_plan_get_stats(plan, 0).peak_bytes;
  ot_plan_destroy(plan);
  ts_randprog_destroy(rp);
  return tot;
}

static void check_backend(ot_backend b, const result *host_ref, int n_seed_idx) {
  ot_ctx *ctx = make_ctx(b);
  uint64_t seed = seeds[n_seed_idx];
  uint64_t minb, tot = total_bytes(ctx, seed, &minb);
  result ref = run_config(ctx, seed, OT_STRATEGY_MINIMAL, UNLIMITED);
  assert_int_equal(ref.plan, OT_OK);
  if (host_ref) {
    /* across backends: within a tolerance (different compilations of the kernel) */
    assert_int_equal(ref.n, host_ref->n);
    for (int64_t k = 0; k < ref.n * RUNS; k++)
      if (fabsf(ref.v[k] - host_ref->v[k]) > 1e-5f * (1.0f + fabsf(host_ref->v[k])))
        fail_msg("seed %llu backend %s: value %lld is %g, host backend gives %g", (unsigned long long)seed,
                 ot_backend_name(b), (long long)k, ref.v[k], host_ref->v[k]);
  }
  uint64_t budgets[] = {minb, minb + 255, minb + 256, minb + (tot - minb) / 3, tot, UNLIMITED};
  for (size_t bi = 0; bi < sizeof budgets / sizeof *budgets; bi++) {
    int uploads = -1;
    for (int s = 0; s < OT_STRATEGY_COUNT; s++) {
      result r = run_config(ctx, seed, (ot_strategy)s, budgets[bi]);
      if (s == OT_STRATEGY_NONE && budgets[bi] < tot) {
        assert_int_equal(r.plan, OT_ERR_BUDGET);
        continue;
      }
      if (r.plan != OT_OK)
        fail_msg("seed %llu %s budget %llu (min %llu): %s", (unsigned long long)seed, ot_strategy_name((ot_strategy)s),
                 (unsigned long long)budgets[bi], (unsigned long long)minb, ot_last_error());
      if (memcmp(r.v, ref.v, (size_t)(ref.n * RUNS) * sizeof(float)) != 0) {
        int64_t k = 0;
        while (r.v[k] == ref.v[k]) k++;
        fail_msg("seed %llu backend %s strategy %s budget %llu: value %lld (run %lld) is %.9g, unlimited gives %.9g",
                 (unsigned long long)seed, ot_backend_name(b), ot_strategy_name((ot_strategy)s),
                 (unsigned long long)budgets[bi], (long long)k, (long long)(k / ref.n), r.v[k], ref.v[k]);
      }
      /* balanced and aggressive place the same copies (one op ahead) and
       * differ only in when uploads are issued */
      if (s >= OT_STRATEGY_BALANCED) {
        if (uploads < 0) uploads = r.st.uploads;
        assert_int_equal(r.st.uploads, uploads);
      }
      free(r.v);
    }
  }
  free(ref.v);
  ot_ctx_destroy(ctx);
}

static void test_random_programs(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
    ot_ctx *hctx = make_ctx(OT_BACKEND_HOST);
    result host_ref = run_config(hctx, seeds[i], OT_STRATEGY_MINIMAL, UNLIMITED);
    assert_int_equal(host_ref.plan, OT_OK);
    ot_ctx_destroy(hctx);
    check_backend(OT_BACKEND_HOST, NULL, (int)i);
    if (ot_num_devices() > 0) {
      check_backend(OT_BACKEND_MAP, &host_ref, (int)i);
      if (ot_test_usm_offloads()) check_backend(OT_BACKEND_USM, &host_ref, (int)i);
    }
    free(host_ref.v);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_random_programs)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
