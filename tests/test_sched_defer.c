/* test_sched_defer.c — defer_writeback (sched.h): random programs with
 * persistent state, replayed under every budget and strategy with the
 * write-backs of kept persistent copies deferred (strategy none too, where
 * everything fits), give after ot_sched_sync
 * (or ot_plan_destroy, or ot_sched_invalidate) bitwise the homes of the plain
 * runs, within the budget; and deferring really leaves homes stale and moves
 * fewer bytes where state stays resident (the case it exists for). */
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

#define RUNS 4
#define UNLIMITED (1ull << 40)

static const uint64_t seeds[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40};

typedef enum finish { BY_SYNC, BY_DESTROY, BY_INVALIDATE } finish;

typedef struct outcome {
  float *v;           /* the checked tensors after RUNS runs and the finish */
  int64_t n;
  int stale;          /* before the finish some checked home differed from the plain run's */
  uint64_t to_host;   /* bytes written home over the runs (trace) */
} outcome;

/* RUNS runs of program `seed` over `stages` devices of ctx; with defer,
 * finished by `how`. plain (may be NULL): the plain run's final values, to
 * detect stale homes before the finish. */
static outcome run_stages(ot_ctx *ctx, int stages, uint64_t seed, ot_strategy strat, uint64_t budget, int defer,
                          finish how, const float *plain) {
  outcome out = {0};
  ts_randprog *rp = NULL;
  OT_ASSERT_OK(ts_randprog_create(ctx, seed, &rp));
  out.n = ts_randprog_snapshot(rp, NULL);
  out.v = malloc((size_t)(out.n + 1) * sizeof(float));
  assert_non_null(out.v);
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = strat;
  o.budget_bytes = budget;
  o.defer_writeback = defer;
  o.n_stages = stages;
  ot_plan *plan = NULL;
  OT_ASSERT_OK(ot_sched_plan(ctx, rp->p, &o, &plan));
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  for (int r = 0; r < RUNS; r++) {
    ts_randprog_prepare_run(rp, r);
    if (ot_sched_run(plan, tr) != OT_OK)
      fail_msg("seed %llu %s budget %llu defer %d run %d: %s", (unsigned long long)seed, ot_strategy_name(strat),
               (unsigned long long)budget, defer, r, ot_last_error());
  }
  if (ot_trace_check_budget(tr, budget) != OT_OK)
    fail_msg("seed %llu %s budget %llu defer %d: %s", (unsigned long long)seed, ot_strategy_name(strat),
             (unsigned long long)budget, defer, ot_last_error());
  out.to_host = ot_trace_summarize(tr).bytes_to_host;
  ot_trace_destroy(tr);
  if (plain) {
    ts_randprog_snapshot(rp, out.v);
    out.stale = memcmp(out.v, plain, (size_t)out.n * sizeof(float)) != 0;
  }
  switch (how) {
  case BY_SYNC: OT_ASSERT_OK(ot_sched_sync(plan)); break;
  case BY_INVALIDATE: ot_sched_invalidate(plan); break;
  case BY_DESTROY: break;
  }
  if (how == BY_DESTROY) {
    ot_plan_destroy(plan);
    plan = NULL;
  }
  ts_randprog_snapshot(rp, out.v);
  ot_plan_destroy(plan);
  ts_randprog_destroy(rp);
  return out;
}

static outcome run(ot_ctx *ctx, uint64_t seed, ot_strategy strat, uint64_t budget, int defer, finish how,
                   const float *plain) {
  return run_stages(ctx, 1, seed, strat, budget, defer, how, plain);
}

static void defer_matches_plain(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  int saw_stale = 0, saw_fewer = 0, saw_resident_fewer = 0, saw_none_fewer = 0;
  for (size_t si = 0; si < sizeof seeds / sizeof *seeds; si++) {
    const uint64_t seed = seeds[si];
    ts_randprog *rp;
    uint64_t minb;
    OT_ASSERT_OK(ts_randprog_create(ctx, seed, &rp));
    OT_ASSERT_OK(ot_sched_min_budget(rp->p, &minb, NULL));
    ts_randprog_destroy(rp);
    const uint64_t budgets[] = {minb, minb + 256, minb + 4096, minb + minb / 2, 2 * minb, 3 * minb, UNLIMITED};
    for (size_t bi = 0; bi < sizeof budgets / sizeof *budgets; bi++)
      for (int s = OT_STRATEGY_NONE; s < OT_STRATEGY_COUNT; s++) {
        if (s == OT_STRATEGY_NONE && budgets[bi] != UNLIMITED) continue; /* none keeps all or fails */
        outcome plain = run(ctx, seed, (ot_strategy)s, budgets[bi], 0, BY_SYNC, NULL);
        for (int k = 0; k < 2 * (BY_INVALIDATE + 1); k++) {
          /* defer_writeback 1, then OT_DEFER_IF_RESIDENT (a decode step's):
           * the same homes whichever it chooses */
          const int how = k % (BY_INVALIDATE + 1), defer = k <= BY_INVALIDATE ? 1 : OT_DEFER_IF_RESIDENT;
          outcome d = run(ctx, seed, (ot_strategy)s, budgets[bi], defer, (finish)how, plain.v);
          assert_int_equal(d.n, plain.n);
          if (memcmp(d.v, plain.v, (size_t)plain.n * sizeof(float))) {
            int64_t at = 0;
            while (d.v[at] == plain.v[at]) at++;
            fail_msg("seed %llu %s budget %llu, defer %d then %s: value %lld is %.9g, plain runs give %.9g",
                     (unsigned long long)seed, ot_strategy_name((ot_strategy)s), (unsigned long long)budgets[bi],
                     defer, how == BY_SYNC ? "sync" : how == BY_DESTROY ? "destroy" : "invalidate", (long long)at,
                     d.v[at], plain.v[at]);
          }
          /* with room for everything a deferred copy is written home at most
           * once (at the finish); under a tight budget it can be evicted and
           * written again, so only the unlimited case is held to this */
          if (budgets[bi] == UNLIMITED && d.to_host > plain.to_host)
            fail_msg("seed %llu %s budget %llu: deferring wrote %llu bytes home, the plain runs %llu",
                     (unsigned long long)seed, ot_strategy_name((ot_strategy)s), (unsigned long long)budgets[bi],
                     (unsigned long long)d.to_host, (unsigned long long)plain.to_host);
          saw_stale |= d.stale;
          saw_fewer |= d.to_host < plain.to_host;
          if (defer == OT_DEFER_IF_RESIDENT && budgets[bi] == UNLIMITED) saw_resident_fewer |= d.to_host < plain.to_host;
          if (s == OT_STRATEGY_NONE) saw_none_fewer |= d.to_host < plain.to_host;
          free(d.v);
        }
        free(plain.v);
      }
  }
#ifdef OT_OFFLOAD
  /* with real copies, some program must keep written state on the device */
  if (!saw_stale || !saw_fewer || !saw_resident_fewer || !saw_none_fewer)
    fail_msg("no case deferred anything (stale homes seen: %d, fewer bytes home: %d, OT_DEFER_IF_RESIDENT with "
             "everything resident: %d, strategy none: %d)", saw_stale, saw_fewer, saw_resident_fewer, saw_none_fewer);
#else
  (void)saw_stale;
  (void)saw_fewer;
  (void)saw_resident_fewer;
  (void)saw_none_fewer;
#endif
  ot_ctx_destroy(ctx);
}

/* Issue 43: over two devices (a pipeline, each stage planned with
 * defer_writeback), the same homes as the plain two-device runs after the
 * finish: state one stage updates and another reads goes home after every
 * run (an output of the stage), and ot_sched_sync writes home what each
 * stage kept for itself. Before, the first stage read stale state from
 * step 2 on and a sync wrote nothing (train --devices 2 saved the untrained
 * weights). */
static void defer_over_two_devices(void **state) {
  (void)state;
  if (ot_num_devices() < 2) skip();
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = ot_test_moving_backend();
  co.n_devices = 2;
  ot_ctx *ctx = NULL;
  OT_ASSERT_OK(ot_ctx_create(&co, &ctx));
  int saw_stale = 0;
  for (size_t si = 0; si < sizeof seeds / sizeof *seeds; si++) {
    ts_randprog *rp;
    OT_ASSERT_OK(ts_randprog_create(ctx, seeds[si], &rp));
    const int n_ops = ot_program_num_ops(rp->p);
    ts_randprog_destroy(rp);
    if (n_ops < 2) continue; /* one stage */
    for (int s = OT_STRATEGY_MINIMAL; s < OT_STRATEGY_COUNT; s++) {
      outcome plain = run_stages(ctx, 2, seeds[si], (ot_strategy)s, UNLIMITED, 0, BY_SYNC, NULL);
      for (int how = BY_SYNC; how <= BY_INVALIDATE; how++) {
        outcome d = run_stages(ctx, 2, seeds[si], (ot_strategy)s, UNLIMITED, 1, (finish)how, plain.v);
        assert_int_equal(d.n, plain.n);
        if (memcmp(d.v, plain.v, (size_t)plain.n * sizeof(float))) {
          int64_t k = 0;
          while (d.v[k] == plain.v[k]) k++;
          fail_msg("seed %llu %s, two devices, deferred then %s: value %lld is %.9g, plain runs give %.9g",
                   (unsigned long long)seeds[si], ot_strategy_name((ot_strategy)s),
                   how == BY_SYNC ? "sync" : how == BY_DESTROY ? "destroy" : "invalidate", (long long)k, d.v[k],
                   plain.v[k]);
        }
        saw_stale |= d.stale;
        if (d.stale) print_message("stale seed %llu\n", (unsigned long long)seeds[si]);
        free(d.v);
      }
      free(plain.v);
    }
  }
#ifdef OT_OFFLOAD
  if (!saw_stale) fail_msg("no stage deferred anything: the case this test exists for never happened");
#else
  (void)saw_stale;
#endif
  ot_ctx_destroy(ctx);
}

/* Without defer_writeback ot_sched_sync does nothing and succeeds; it
 * refuses NULL. */
static void sync_without_defer(void **state) {
  (void)state;
  assert_int_equal(ot_sched_sync(NULL), OT_ERR_INVALID_ARG);
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  outcome o = run(ctx, 1, OT_STRATEGY_BALANCED, UNLIMITED, 0, BY_SYNC, NULL);
  free(o.v);
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(defer_matches_plain),
      cmocka_unit_test(defer_over_two_devices),
      cmocka_unit_test(sync_without_defer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
