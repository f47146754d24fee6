/* test_budget_stress.c — the budget as a hard limit, and long replays
 * without growth (issue 8).
 *
 * 1. A chain program (chain_support.h) whose largest working set is W:
 *    budget W runs (the trace peaks at exactly W), W - 1 — one byte short
 *    of the working set — is refused with OT_ERR_BUDGET naming the op,
 *    100 W (far more than needed) keeps everything resident after the
 *    first run. The same for `none` at the sum of all storages.
 * 2. The chain, and the llama_gqa decode step (samples' model, T = 1),
 *    planned once under the smallest budget and replayed 3000 times (the
 *    decode step 300 times): after a warm-up, heap
 *    bytes in use do not grow (mallinfo2, or the sanitizer allocator's
 *    count under ASan), no device allocation happens (counted through
 *    core/fault.h), and the device bytes the trace sees at the end of each
 *    run stay the same, never above the budget. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain_support.h"
#include "core/fault.h"
#include "kernels/step_gpu.h"
#include "omptensor/models.h"
#include "ot_test.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OT_TEST_ASAN 1
#endif
#endif
#ifdef OT_TEST_ASAN
#include <sanitizer/allocator_interface.h>
#endif

#define N 1024 /* 4096 bytes: a whole number of 256-byte blocks */
#define LAYERS 6
#define REPLAYS 3000
#define DECODE_REPLAYS 300

static size_t heap_in_use(void) {
#ifdef OT_TEST_ASAN
  return __sanitizer_get_current_allocated_bytes();
#else
  return mallinfo2().uordblks;
#endif
}

/* Plans c under `budget` and runs it twice; the trace's summary. */
static ot_status plan_and_run(cs_chain *c, ot_strategy strat, uint64_t budget, ot_trace_summary *sm,
                              ot_trace_summary *steady) {
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = strat;
  o.budget_bytes = budget;
  ot_plan *plan;
  ot_status s = ot_sched_plan(ot_tensor_ctx(c->x), c->p, &o, &plan);
  if (s != OT_OK) return s;
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  OT_ASSERT_OK(ot_sched_run(plan, tr));
  OT_ASSERT_OK(ot_trace_check_budget(tr, budget));
  *sm = ot_trace_summarize(tr);
  ot_trace_clear(tr);
  OT_ASSERT_OK(ot_sched_run(plan, tr));
  OT_ASSERT_OK(ot_trace_check_budget(tr, budget));
  *steady = ot_trace_summarize(tr);
  ot_trace_destroy(tr);
  ot_plan_destroy(plan);
  return OT_OK;
}

static void exact_over_far(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  cs_chain c;
  OT_ASSERT_OK(cs_chain_create(ctx, LAYERS, N, &c));
  float ref[N];
  cs_chain_reference(&c, ref);
  const uint64_t ws = cs_chain_min_budget(&c); /* one layer: h_{i-1}, w_i, h_i */
  assert_int_equal(ws, 3 * N * 4);
  uint64_t minb;
  OT_ASSERT_OK(ot_sched_min_budget(c.p, &minb, NULL));
  assert_int_equal(minb, ws);
  ot_trace_summary first, steady;
  for (ot_strategy st = OT_STRATEGY_MINIMAL; st < OT_STRATEGY_COUNT; st++) {
    /* exactly the working set */
    OT_ASSERT_OK(plan_and_run(&c, st, ws, &first, &steady));
    assert_int_equal(first.peak_device_bytes, ws);
    assert_true(steady.peak_device_bytes <= ws);
    cs_chain_expect(&c, ref);
    /* one byte short */
    OT_ASSERT_FAILS(plan_and_run(&c, st, ws - 1, &first, &steady), OT_ERR_BUDGET, "layer");
    char bytes[32];
    snprintf(bytes, sizeof bytes, "%llu", (unsigned long long)ws);
    if (!strstr(ot_last_error(), bytes)) fail_msg("message '%s' should give the %s bytes needed", ot_last_error(), bytes);
    /* far more than needed: after the first run only x goes up, y comes down */
    OT_ASSERT_OK(plan_and_run(&c, st, 100 * ws, &first, &steady));
    assert_int_equal(first.evictions, 0);
    assert_int_equal(steady.uploads, 1);
    assert_int_equal(steady.bytes_to_device, N * 4);
    cs_chain_expect(&c, ref);
  }
  /* none: everything resident, so the bound is the sum of all storages */
  const uint64_t all = (uint64_t)(2 + 2 * LAYERS) * N * 4;
  OT_ASSERT_OK(plan_and_run(&c, OT_STRATEGY_NONE, all, &first, &steady));
  assert_int_equal(first.peak_device_bytes, all);
  assert_int_equal(first.evictions, 0);
  OT_ASSERT_FAILS(plan_and_run(&c, OT_STRATEGY_NONE, all - 1, &first, &steady), OT_ERR_BUDGET, "");
  cs_chain_destroy(&c);
  ot_ctx_destroy(ctx);
}

/* Plans `p` under its smallest budget and replays it warm + replays times
 * (pos_slot >= 0: the position scalar, cycling below max_pos; ids: an i32
 * input rewritten each run, or NULL), checking the growth as described at
 * the top. */
static void replay_no_growth(ot_ctx *ctx, ot_program *p, int pos_slot, int64_t max_pos, ot_tensor *ids,
                             int64_t vocab, int replays) {
  ot_sched_opts o = ot_sched_opts_default();
  OT_ASSERT_OK(ot_sched_min_budget(p, &o.budget_bytes, NULL));
  ot_plan *plan;
  OT_ASSERT_OK(ot_sched_plan(ctx, p, &o, &plan));
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  OT_ASSERT_OK(ot_fault_configure("device_alloc:4000000000")); /* count device allocations */
  size_t heap0 = 0;
  unsigned long allocs0 = 0;
  uint64_t dev_end = 0, step0, step1;
  ot_kstep_counts(&step0, NULL);
  const int warm = 50;
  for (int t = 0; t < warm + replays; t++) {
    if (ids) ((int32_t *)ot_tensor_data(ids))[0] = (int32_t)(t * 7 % vocab);
    if (pos_slot >= 0) OT_ASSERT_OK(ot_program_set_scalar(p, pos_slot, t % max_pos));
    /* trace a few runs only (a trace grows with its events) */
    int traced = t == warm - 1 || t % 500 == 0 || t == warm + replays - 1;
    if (ot_sched_run(plan, traced ? tr : NULL) != OT_OK) fail_msg("replay %d: %s", t, ot_last_error());
    if (traced) {
      OT_ASSERT_OK(ot_trace_check_budget(tr, o.budget_bytes));
      ot_trace_summary sm = ot_trace_summarize(tr);
      if (t >= warm && sm.current_device_bytes != dev_end)
        fail_msg("replay %d ends with %llu device bytes, after the warm-up %llu", t,
                 (unsigned long long)sm.current_device_bytes, (unsigned long long)dev_end);
      if (t == warm - 1) dev_end = sm.current_device_bytes;
      ot_trace_clear(tr);
    }
    if (t == warm - 1) heap0 = heap_in_use(), allocs0 = ot_fault_count(OT_FAULT_DEVICE_ALLOC);
  }
  ot_kstep_counts(&step1, NULL);
  size_t heap1 = heap_in_use();
  /* A per-run leak would be at least `replays` heap chunks (>= 16 bytes
   * each); allow for one-off lazy allocations of the runtimes. */
  if (heap1 > heap0 + 2048) fail_msg("heap grew by %zu bytes over %d replays", heap1 - heap0, replays);
  /* The warm-up's allocations are one-off: the plan's arena at the first
   * run, and on a GPU the step kernel's instruction buffer and barrier
   * (kernels/step_gpu.c) the first time it runs in the process; the
   * replays after it allocate none. */
#ifdef OT_OFFLOAD
  assert_int_equal(allocs0, 1 + (step0 == 0 && step1 > 0 ? 2 : 0));
#else
  assert_int_equal(allocs0, 0);
#endif
  assert_int_equal(ot_fault_count(OT_FAULT_DEVICE_ALLOC), allocs0);
  OT_ASSERT_OK(ot_fault_configure(NULL));
  ot_trace_destroy(tr);
  ot_plan_destroy(plan);
}

static void chain_replays(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  cs_chain c;
  OT_ASSERT_OK(cs_chain_create(ctx, LAYERS, N, &c));
  float ref[N];
  cs_chain_reference(&c, ref);
  replay_no_growth(ctx, c.p, -1, 1, NULL, 1, REPLAYS);
  cs_chain_expect(&c, ref);
  cs_chain_destroy(&c);
  ot_ctx_destroy(ctx);
}

/* The llama_gqa decode step: ~100 kernels a step, ~10 ms on 2 CI cores, so
 * fewer replays than the chain (still enough for the per-run leak bound). */
static void decode_replays(void **state) {
  (void)state;
  const char *data = getenv("OT_TEST_DATA");
  assert_non_null(data);
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/models/llama_gqa", data);
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  ot_lm *m;
  OT_ASSERT_OK(ot_model_load(ctx, dir, OT_DTYPE_KEEP, NULL, NULL, &m));
  ot_lm_step st = {0};
  OT_ASSERT_OK(m->vt->build(m, 1, 0, &st));
  uint64_t minb;
  OT_ASSERT_OK(ot_sched_min_budget(st.prog, &minb, NULL));
  assert_true(minb < m->weight_bytes); /* the weights stream every step */
  replay_no_growth(ctx, st.prog, st.pos_slot, m->max_seq, st.ids, m->vocab, DECODE_REPLAYS);
  ot_lm_step_destroy(&st);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(exact_over_far), cmocka_unit_test(chain_replays),
                                     cmocka_unit_test(decode_replays)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
