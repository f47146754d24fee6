/* test_fault_transfer.c — OMPTENSOR_FAULT=transfer:N on runs of the map
 * backend (offload-host: the emulated device's copies are real): every
 * transfer of a run fails in turn, on the first run and on a steady-state
 * replay, under each strategy. The run fails with OT_ERR_DEVICE and a
 * message naming the tensor and the direction; afterwards the plan either
 * runs again and gives the same numbers as a clean run, or is destroyed at
 * once; nothing leaks (asan preset). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain_support.h"
#include "core/fault.h"
#include "ot_test.h"

#define N 777
#define LAYERS 4

#ifdef OT_OFFLOAD
/* Transfers of one run of `plan` (first or steady, as the plan stands). */
static unsigned long count_transfers(ot_plan *plan) {
  OT_ASSERT_OK(ot_fault_configure("transfer:4000000000")); /* counts, never fires */
  OT_ASSERT_OK(ot_sched_run(plan, NULL));
  unsigned long n = ot_fault_count(OT_FAULT_TRANSFER);
  OT_ASSERT_OK(ot_fault_configure(NULL));
  return n;
}

static void check_message(const char *spec) {
  const char *m = ot_last_error();
  int up = strstr(m, "upload of '") && strstr(m, "host -> device");
  int down = strstr(m, "write-back of '") && strstr(m, "-> host");
  if (!(up || down) || !strstr(m, "OMPTENSOR_FAULT") || !strstr(m, "bytes"))
    fail_msg("%s: message '%s' should name the tensor, the direction and the injection", spec, m);
}

#endif

static void each_transfer(ot_strategy strat, int steady) {
#ifndef OT_OFFLOAD
  (void)strat;
  (void)steady;
  skip(); /* no offload device: the host backend moves nothing */
#else
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = OT_BACKEND_MAP;
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&co, &ctx));
  cs_chain c;
  OT_ASSERT_OK(cs_chain_create(ctx, LAYERS, N, &c));
  float ref[N];
  cs_chain_reference(&c, ref);
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = strat;
  /* the weights move every run, except with `none` (all resident) */
  o.budget_bytes = strat == OT_STRATEGY_NONE ? 0 : cs_chain_min_budget(&c);
  ot_plan *plan;
  OT_ASSERT_OK(ot_sched_plan(ctx, c.p, &o, &plan));
  if (steady) OT_ASSERT_OK(ot_sched_run(plan, NULL));
  unsigned long total = count_transfers(plan);
  if (!steady) ot_sched_invalidate(plan); /* the next run is a first run again */
  /* the weights (not on a replay with `none`), x up, y down */
  assert_true(total >= (steady && strat == OT_STRATEGY_NONE ? 2 : LAYERS + 2));
  for (unsigned long n = 1; n <= total; n++) {
    for (int again = 0; again <= 1; again++) {
      char spec[32];
      snprintf(spec, sizeof spec, "transfer:%lu", n);
      ot_plan *pl = plan;
      if (!again) OT_ASSERT_OK(ot_sched_plan(ctx, c.p, &o, &pl)); /* a plan to throw away */
      if (steady && !again) OT_ASSERT_OK(ot_sched_run(pl, NULL));
      memset(ot_tensor_data(c.y), 0, N * sizeof(float));
      OT_ASSERT_OK(ot_fault_configure(spec));
      ot_status s = ot_sched_run(pl, NULL);
      if (s != OT_ERR_DEVICE) fail_msg("%s: run gave %s, want a device error", spec, ot_status_str(s));
      check_message(spec);
      OT_ASSERT_OK(ot_fault_configure(NULL));
      if (!again) {
        ot_plan_destroy(pl); /* destroyable right after the failure */
        continue;
      }
      /* usable: the next run starts from nothing and gives the clean result */
      OT_ASSERT_OK(ot_sched_run(plan, NULL));
      cs_chain_expect(&c, ref);
      if (steady) OT_ASSERT_OK(ot_sched_run(plan, NULL)); /* back to steady state */
      else ot_sched_invalidate(plan);
      cs_chain_expect(&c, ref);
    }
  }
  ot_plan_destroy(plan);
  cs_chain_destroy(&c);
  ot_ctx_destroy(ctx);
#endif
}

static void first_minimal(void **state) {
  (void)state;
  each_transfer(OT_STRATEGY_MINIMAL, 0);
}
static void first_aggressive(void **state) {
  (void)state;
  each_transfer(OT_STRATEGY_AGGRESSIVE, 0);
}
static void steady_balanced(void **state) {
  (void)state;
  each_transfer(OT_STRATEGY_BALANCED, 1);
}
static void steady_none(void **state) {
  (void)state;
  each_transfer(OT_STRATEGY_NONE, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(first_minimal), cmocka_unit_test(first_aggressive),
                                     cmocka_unit_test(steady_balanced), cmocka_unit_test(steady_none)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
