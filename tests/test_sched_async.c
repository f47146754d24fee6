/* test_sched_async.c — the executor's waits. With every transfer slowed
 * down, a kernel that started before its upload finished, or wrote a block
 * a write-back was still reading, gives wrong numbers; results must stay
 * bitwise equal to the unlimited-budget run. Also: plans for the second of
 * two devices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "memory/device.h"
#include "sched_support.h"

#define RUNS 2

/* Runs the program of `seed` on device index `di` of ctx, every transfer
 * delayed by `delay_us`; returns snapshots. */
static float *run(ot_ctx *ctx, int di, uint64_t seed, ot_strategy strat, int budget_kind, unsigned delay_us,
                  int64_t *n) {
  ts_randprog *rp;
  assert_int_equal(ts_randprog_create(ctx, seed, &rp), OT_OK);
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = strat;
  o.device_index = di;
  o.transfer_delay_us = delay_us;
  ot_trace *tr;
  assert_int_equal(ot_trace_create(&tr), OT_OK);
  float *v;
  if (ts_randprog_runs(rp, &o, budget_kind, RUNS, tr, &v, n) != OT_OK) fail_msg("%s", ot_last_error());
  /* every event is on the planned device */
  int dev = ot_ctx_device(ctx, di);
  for (size_t i = 0; i < ot_trace_count(tr); i++) assert_int_equal(ot_trace_event_at(tr, i)->device, dev);
  ot_trace_destroy(tr);
  ts_randprog_destroy(rp);
  return v;
}

static ot_ctx *map_ctx(int n_devices) {
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = OT_BACKEND_MAP;
  o.device = 0;
  o.n_devices = n_devices;
  ot_ctx *ctx;
  assert_int_equal(ot_ctx_create(&o, &ctx), OT_OK);
  return ctx;
}

static void test_slow_transfers(void **state) {
  (void)state;
  if (ot_num_devices() == 0) skip();
  static const uint64_t seeds[] = {3, 21, 144, 610};
  ot_ctx *ctx = map_ctx(1);
  for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
    int64_t n, m;
    float *ref = run(ctx, 0, seeds[i], OT_STRATEGY_MINIMAL, 2, 0, &n);
    for (int s = OT_STRATEGY_MINIMAL; s < OT_STRATEGY_COUNT; s++)
      for (int b = 0; b < 2; b++) {
        float *v = run(ctx, 0, seeds[i], (ot_strategy)s, b, 300, &m);
        assert_int_equal(m, n);
        if (memcmp(v, ref, (size_t)(n * RUNS) * sizeof *v) != 0)
          fail_msg("seed %llu %s budget kind %d: results differ with slow transfers", (unsigned long long)seeds[i],
                   ot_strategy_name((ot_strategy)s), b);
        free(v);
      }
    free(ref);
  }
  ot_ctx_destroy(ctx);
}

static void test_second_device(void **state) {
  (void)state;
  if (ot_num_devices() < 2) skip();
  ot_ctx *ctx = map_ctx(2);
  assert_int_equal(ot_ctx_device(ctx, 1), 1);
  int64_t n, m;
  float *a = run(ctx, 0, 55, OT_STRATEGY_BALANCED, 0, 0, &n);
  float *b = run(ctx, 1, 55, OT_STRATEGY_BALANCED, 0, 0, &m);
  assert_int_equal(m, n);
  assert_memory_equal(a, b, (size_t)(n * RUNS) * sizeof *a);
  free(a);
  free(b);
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slow_transfers),
      cmocka_unit_test(test_second_device),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
