/* test_sched_hybrid.c — hybrid compute (sched.h, ot_compute): ops placed on
 * the host's cores.
 *
 * Random programs (weights, inputs, persistent state, in-place ops, partial
 * writes) with random sets of host ops, under budgets from the feasibility
 * bound to unlimited and every strategy, some with every transfer delayed,
 * give after each of several runs bitwise the homes of the all-device runs
 * where the device runs on host threads (the test op computes the same
 * expression on either side; on a GPU within 1e-5: the GPU contracts its
 * multiply-adds, the host may not), within the
 * budget (trace), with every host op traced on the host lane and the
 * activations that cross traced as such. Plus the choice itself (compute
 * hybrid puts streamed ops on the host) and the refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "kernels/kcommon.h"
#include "omptensor/trace.h"
#include "ot_test.h"
#include "chain_support.h"
#include "sched_support.h"

#define RUNS 3
#define UNLIMITED (1ull << 40)
#define N_SEEDS 24

typedef struct outcome {
  float *v; /* checked tensors after each run, one after the other */
  int64_t n;
  int host_kernels, cross;
} outcome;

/* RUNS runs of program `seed` with host ops from mask_seed (0: none; 1: all;
 * else each op with probability 1/3). */
static outcome run(ot_ctx *ctx, uint64_t seed, ot_strategy strat, uint64_t budget, uint64_t mask_seed, unsigned delay) {
  outcome out = {0};
  ts_randprog *rp = NULL;
  OT_ASSERT_OK(ts_randprog_create(ctx, seed, &rp));
  const int64_t n = ts_randprog_snapshot(rp, NULL);
  out.n = n * RUNS;
  out.v = malloc((size_t)(out.n + 1) * sizeof(float));
  assert_non_null(out.v);
  const int n_ops = ot_program_num_ops(rp->p);
  unsigned char *host = calloc((size_t)n_ops + 1, 1);
  assert_non_null(host);
  ts_rng g = {mask_seed * 0x9e3779b97f4a7c15ull + 7};
  int n_host = 0;
  for (int i = 0; mask_seed && i < n_ops; i++) {
    host[i] = mask_seed == 1 || ts_rand_int(&g, 0, 2) == 0;
    n_host += host[i];
  }
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = strat;
  o.budget_bytes = budget;
  o.transfer_delay_us = delay;
  o.host_ops = mask_seed ? host : NULL;
  ot_plan *plan = NULL;
  if (ot_sched_plan(ctx, rp->p, &o, &plan) != OT_OK)
    fail_msg("seed %llu %s budget %llu mask %llu: %s", (unsigned long long)seed, ot_strategy_name(strat),
             (unsigned long long)budget, (unsigned long long)mask_seed, ot_last_error());
  assert_int_equal(ot_plan_get_stats(plan, 1).n_host_ops, n_host);
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  for (int r = 0; r < RUNS; r++) {
    ts_randprog_prepare_run(rp, r);
    if (ot_sched_run(plan, tr) != OT_OK)
      fail_msg("seed %llu %s budget %llu mask %llu run %d: %s", (unsigned long long)seed, ot_strategy_name(strat),
               (unsigned long long)budget, (unsigned long long)mask_seed, r, ot_last_error());
    ts_randprog_snapshot(rp, out.v + r * n);
  }
  if (ot_trace_check_budget(tr, budget) != OT_OK)
    fail_msg("seed %llu %s budget %llu mask %llu: %s", (unsigned long long)seed, ot_strategy_name(strat),
             (unsigned long long)budget, (unsigned long long)mask_seed, ot_last_error());
  for (size_t i = 0; i < ot_trace_count(tr); i++) {
    const ot_trace_event *e = ot_trace_event_at(tr, i);
    if (e->kind == OT_TRACE_KERNEL && (e->flags & OT_TRACE_HOST)) {
      out.host_kernels++;
      if (!host[e->op]) fail_msg("seed %llu: op #%d traced on the host, not asked to be", (unsigned long long)seed, e->op);
    } else if (e->kind == OT_TRACE_KERNEL && host[e->op]) {
      fail_msg("seed %llu: op #%d asked on the host, traced on the device", (unsigned long long)seed, e->op);
    }
    out.cross += (e->flags & OT_TRACE_CROSS) != 0;
  }
  ot_trace_destroy(tr);
  ot_plan_destroy(plan);
  ts_randprog_destroy(rp);
  free(host);
  return out;
}

static void hybrid_matches_device(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  int total_cross = 0, cases = 0;
  for (uint64_t seed = 1; seed <= N_SEEDS; seed++) {
    ts_randprog *rp;
    uint64_t minb;
    OT_ASSERT_OK(ts_randprog_create(ctx, seed, &rp));
    OT_ASSERT_OK(ot_sched_min_budget(rp->p, &minb, NULL));
    ts_randprog_destroy(rp);
    const uint64_t budgets[] = {minb, minb + minb / 2, 3 * minb, UNLIMITED};
    for (size_t bi = 0; bi < sizeof budgets / sizeof *budgets; bi++)
      for (int s = OT_STRATEGY_MINIMAL; s < OT_STRATEGY_COUNT; s++) {
        outcome dev = run(ctx, seed, (ot_strategy)s, budgets[bi], 0, 0);
        for (uint64_t mask = 1; mask <= 4; mask++) {
          /* every transfer delayed in one case per program: a missing wait
           * (a host op reading a home still being written) shows */
          const unsigned delay = mask == 3 && bi == 0 ? 200 : 0;
          outcome h = run(ctx, seed, (ot_strategy)s, budgets[bi], mask == 1 ? 1 : mask * 131 + seed, delay);
          assert_int_equal(h.n, dev.n);
          const float tol = ot_kruns_on_host(ot_ctx_device(ctx, 0)) ? 0.0f : 1e-5f;
          int64_t k = 0;
          while (k < dev.n && fabsf(h.v[k] - dev.v[k]) <= tol * fmaxf(1.0f, fabsf(dev.v[k]))) k++;
          if (k < dev.n) {
            fail_msg("seed %llu %s budget %llu host mask %llu: value %lld (run %lld) is %.9g, all on the device %.9g",
                     (unsigned long long)seed, ot_strategy_name((ot_strategy)s), (unsigned long long)budgets[bi],
                     (unsigned long long)mask, (long long)k, (long long)(k / (dev.n / RUNS)), h.v[k], dev.v[k]);
          }
          total_cross += h.cross;
          cases++;
          free(h.v);
        }
        free(dev.v);
      }
  }
  /* the cases must have had activations crossing (else the test proves little) */
  assert_true(cases > 0);
  assert_true(total_cross > 0);
  ot_ctx_destroy(ctx);
}

/* compute hybrid chooses host ops for a chain whose weights stream (4 MiB
 * each: streaming one takes longer than the crossings a host op costs),
 * none when everything fits; the results stay right and the budget holds. */
static void hybrid_choice(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  cs_chain c;
  OT_ASSERT_OK(cs_chain_create(ctx, 12, 1 << 20, &c));
  float *ref = malloc((size_t)c.n * sizeof *ref);
  assert_non_null(ref);
  cs_chain_reference(&c, ref);
  ot_sched_opts o = ot_sched_opts_default();
  o.compute = OT_COMPUTE_HYBRID;
  o.host_read_rate = 100e9; /* the host about twice PCIe: a split must pay */
  o.budget_bytes = UNLIMITED;
  ot_plan *plan = NULL;
  OT_ASSERT_OK(ot_sched_plan(ctx, c.p, &o, &plan));
  assert_int_equal(ot_plan_get_stats(plan, 1).n_host_ops, 0); /* nothing streams: nothing to split */
  ot_plan_destroy(plan);
  const uint64_t budget = cs_chain_min_budget(&c) + 2 * ts_block((uint64_t)c.n * 4);
  o.budget_bytes = budget;
  OT_ASSERT_OK(ot_sched_plan(ctx, c.p, &o, &plan));
  const ot_plan_stats st = ot_plan_get_stats(plan, 1);
  if (st.n_host_ops < 1 || st.n_host_ops >= c.layers + 1)
    fail_msg("compute hybrid put %d of %d ops on the host", st.n_host_ops, c.layers + 1);
  assert_true(st.host_read_bytes > 0);
  assert_true(st.cross_bytes > 0);
  assert_true(st.host_read_rate == 100e9);
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  for (int r = 0; r < 2; r++) {
    OT_ASSERT_OK(ot_sched_run(plan, tr));
    cs_chain_expect(&c, ref);
  }
  OT_ASSERT_OK(ot_trace_check_budget(tr, budget));
  ot_trace_destroy(tr);
  ot_plan_destroy(plan);
  /* compute gpu: no host op whatever the rates */
  o.compute = OT_COMPUTE_GPU;
  OT_ASSERT_OK(ot_sched_plan(ctx, c.p, &o, &plan));
  assert_int_equal(ot_plan_get_stats(plan, 1).n_host_ops, 0);
  ot_plan_destroy(plan);
  free(ref);
  cs_chain_destroy(&c);
  ot_ctx_destroy(ctx);
}

static void refusals(void **state) {
  (void)state;
  ot_compute c;
  OT_ASSERT_OK(ot_compute_parse("hybrid", &c));
  assert_int_equal(c, OT_COMPUTE_HYBRID);
  OT_ASSERT_OK(ot_compute_parse("GPU", &c));
  assert_int_equal(c, OT_COMPUTE_GPU);
  assert_int_equal(ot_compute_parse("cpu", &c), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "auto, gpu or hybrid"));
  assert_string_equal(ot_compute_name(OT_COMPUTE_AUTO), "auto");
  /* the host backend has no device to split from */
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_HOST);
  ts_randprog *rp;
  OT_ASSERT_OK(ts_randprog_create(ctx, 3, &rp));
  ot_sched_opts o = ot_sched_opts_default();
  o.compute = OT_COMPUTE_HYBRID;
  ot_plan *plan = NULL;
  assert_int_equal(ot_sched_plan(ctx, rp->p, &o, &plan), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "backend map"));
  assert_null(plan);
  o.compute = (ot_compute)77;
  assert_int_equal(ot_sched_plan(ctx, rp->p, &o, &plan), OT_ERR_INVALID_ARG);
  o.compute = OT_COMPUTE_AUTO; /* auto on the host backend: just the plan */
  OT_ASSERT_OK(ot_sched_plan(ctx, rp->p, &o, &plan));
  assert_int_equal(ot_plan_get_stats(plan, 1).n_host_ops, 0);
  ot_plan_destroy(plan);
  ts_randprog_destroy(rp);
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest with_device[] = {
      cmocka_unit_test(hybrid_matches_device),
      cmocka_unit_test(hybrid_choice),
      cmocka_unit_test(refusals),
  };
#ifdef OT_OFFLOAD
  return cmocka_run_group_tests(with_device, NULL, NULL);
#else
  (void)with_device; /* a host build has no device to place ops away from */
  const struct CMUnitTest host_only[] = {
      cmocka_unit_test(refusals),
  };
  return cmocka_run_group_tests(host_only, NULL, NULL);
#endif
}
