/* test_sched_batch.c — the executor's batches (sched/batch.h): runs of
 * encoded ops handed to one launch. On random programs under budgets that
 * make the plan upload, evict and write back between ops (the batches must
 * end before every such event), with every strategy and with slowed
 * transfers, three runs give results bitwise equal to the same program run
 * op by op, the trace holds the budget, and the launcher really got lists
 * of several ops. On the emulated device (the host-offload plugin), maps
 * copy for real: an op left in a batch past the write-back or the upload
 * that needed it changes the numbers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sched_support.h"

#define RUNS 3

static float *run(ot_ctx *ctx, uint64_t seed, int batch, ot_strategy strat, int budget_kind, unsigned delay_us,
                  int64_t *n) {
  ts_batch.on = batch;
  ts_randprog *rp;
  assert_int_equal(ts_randprog_create(ctx, seed, &rp), OT_OK);
  ts_batch.on = 0;
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = strat;
  o.transfer_delay_us = delay_us;
  ot_trace *tr;
  assert_int_equal(ot_trace_create(&tr), OT_OK);
  float *v;
  if (ts_randprog_runs(rp, &o, budget_kind, RUNS, tr, &v, n) != OT_OK) fail_msg("%s", ot_last_error());
  /* one KERNEL event per op and run, batched or not */
  int kernels = 0;
  for (size_t i = 0; i < ot_trace_count(tr); i++) kernels += ot_trace_event_at(tr, i)->kind == OT_TRACE_KERNEL;
  assert_int_equal(kernels, RUNS * ot_program_num_ops(rp->p));
  ot_trace_destroy(tr);
  ts_randprog_destroy(rp);
  return v;
}

static void test_batches_match_op_by_op(void **state) {
  (void)state;
  static const uint64_t seeds[] = {5, 34, 233, 1597, 4181};
  ot_ctx *ctx;
  assert_int_equal(ot_ctx_create(NULL, &ctx), OT_OK);
  ts_batch = (ts_batch_stats){0};
  for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++)
    for (int b = 0; b < 3; b++)
      for (int s = OT_STRATEGY_MINIMAL; s < OT_STRATEGY_COUNT; s++) {
        int64_t n, m;
        const unsigned delay = b == 0 && s == OT_STRATEGY_BALANCED ? 200 : 0;
        float *ref = run(ctx, seeds[i], 0, (ot_strategy)s, b, delay, &n);
        const long before = ts_batch.launches;
        float *v = run(ctx, seeds[i], 1, (ot_strategy)s, b, delay, &m);
        assert_int_equal(m, n);
        assert_true(ts_batch.launches > before);
        if (memcmp(v, ref, (size_t)(n * RUNS) * sizeof *v) != 0)
          fail_msg("seed %llu %s budget kind %d: batched runs differ from op-by-op runs", (unsigned long long)seeds[i],
                   ot_strategy_name((ot_strategy)s), b);
        free(v);
        free(ref);
      }
  printf("  %ld launches of %ld ops, the longest %ld\n", ts_batch.launches, ts_batch.insns, ts_batch.longest);
  assert_true(ts_batch.longest >= 3);
  assert_true(ts_batch.insns > ts_batch.launches);
  ot_ctx_destroy(ctx);
}

/* A chain of CHAIN ops on device temporaries between one input and one
 * output: once the weights stay resident, a run's only events are the
 * input's upload and the output's write-back, so the ops between run as
 * few launches (ops 0, 5, 10 run alone: mix_emit), with the chain's values. */
#define CHAIN 12
static void test_chain_in_few_launches(void **state) {
  (void)state;
  ot_ctx *ctx;
  assert_int_equal(ot_ctx_create(NULL, &ctx), OT_OK);
  const int64_t n = 1000;
  ot_tensor *t[CHAIN + 1], *w;
  char nm[16];
  for (int i = 0; i <= CHAIN; i++) {
    snprintf(nm, sizeof nm, "t%d", i);
    assert_int_equal(ot_tensor_create(ctx, nm, OT_F32, 1, &n, &t[i]), OT_OK);
  }
  assert_int_equal(ot_tensor_create(ctx, "w", OT_F32, 1, &n, &w), OT_OK);
  ts_fill(t[0], 1);
  ts_fill(w, 2);
  float want[1000];
  for (int64_t j = 0; j < n; j++) want[j] = ((float *)ot_tensor_data(t[0]))[j];
  ot_program *p;
  assert_int_equal(ot_program_create(ctx, &p), OT_OK);
  ts_batch = (ts_batch_stats){0};
  ts_batch.on = 1;
  for (int i = 0; i < CHAIN; i++) {
    ot_tensor *in[2] = {t[i], w};
    const ts_mix_params prm = {{1.0f, 0.5f, 0}, 0.125f * (float)i, -1};
    snprintf(nm, sizeof nm, "op%d", i);
    assert_int_equal(ts_add_mix(p, nm, in, 2, &t[i + 1], 1, &prm), OT_OK);
    for (int64_t j = 0; j < n; j++) /* the reference: y = 0.5 (b + x + 0.5 w) */
      want[j] = 0.5f * (0.125f * (float)i + 1.0f * want[j] + 0.5f * ((float *)ot_tensor_data(w))[j]);
  }
  ts_batch.on = 0;
  assert_int_equal(ot_program_mark_input(p, t[0]), OT_OK);
  assert_int_equal(ot_program_mark_output(p, t[CHAIN]), OT_OK);
  ot_sched_opts o = ot_sched_opts_default();
  o.budget_bytes = 1ull << 30;
  ot_plan *plan;
  if (ot_sched_plan(ctx, p, &o, &plan) != OT_OK) fail_msg("%s", ot_last_error());
  for (int r = 0; r < 3; r++) {
    if (ot_sched_run(plan, NULL) != OT_OK) fail_msg("%s", ot_last_error());
    assert_memory_equal(ot_tensor_data(t[CHAIN]), want, sizeof want);
  }
  /* per run: the encoded ops between the alone ones, 0, 5 and 10 */
  printf("  %ld launches of %ld ops, the longest %ld\n", ts_batch.launches, ts_batch.insns, ts_batch.longest);
  assert_int_equal(ts_batch.insns, 3 * (CHAIN - 3));
  assert_int_equal(ts_batch.longest, 4);
  ot_plan_destroy(plan);
  ot_program_destroy(p);
  for (int i = 0; i <= CHAIN; i++) ot_tensor_destroy(t[i]);
  ot_tensor_destroy(w);
  ot_ctx_destroy(ctx);
}

/* A decode layer's pattern: each op writes one row of its own persistent
 * cache (in place: the rest keeps its value) beside its chained output. The
 * rows' write-backs are held until the batch has run, so ops 1 to 4 stay
 * one launch (not one per cache); the homes hold every row after each run. */
static void test_cache_rows_in_one_launch(void **state) {
  (void)state;
  enum { OPS = 5, ROW = 64 };
  ot_ctx *ctx;
  assert_int_equal(ot_ctx_create(NULL, &ctx), OT_OK);
  const int64_t n = ROW, cs[2] = {OPS, ROW};
  ot_tensor *t[OPS + 1], *c[OPS], *row[OPS];
  char nm[32];
  for (int i = 0; i <= OPS; i++) {
    snprintf(nm, sizeof nm, "t%d", i);
    assert_int_equal(ot_tensor_create(ctx, nm, OT_F32, 1, &n, &t[i]), OT_OK);
  }
  for (int i = 0; i < OPS; i++) {
    snprintf(nm, sizeof nm, "cache%d", i);
    assert_int_equal(ot_tensor_create(ctx, nm, OT_F32, 2, cs, &c[i]), OT_OK);
    ts_fill(c[i], 10 + (uint64_t)i);
    ot_tensor *r2;
    assert_int_equal(ot_tensor_slice(c[i], 0, i, 1, &r2), OT_OK); /* row i: [1, ROW] */
    assert_int_equal(ot_tensor_reshape(r2, 1, &n, &row[i]), OT_OK);
    ot_tensor_destroy(r2);
  }
  ts_fill(t[0], 1);
  ot_program *p;
  assert_int_equal(ot_program_create(ctx, &p), OT_OK);
  ts_batch = (ts_batch_stats){0};
  ts_batch.on = 1;
  for (int i = 0; i < OPS; i++) { /* op 0 runs alone (ts_batch), 1 .. 4 are encoded */
    ot_tensor *in[2] = {t[i], row[i]}, *out[2] = {t[i + 1], row[i]};
    const ts_mix_params prm = {{1.0f, 0.25f, 0}, 0.5f * (float)i, -1};
    snprintf(nm, sizeof nm, "op%d", i);
    assert_int_equal(ts_add_mix(p, nm, in, 2, out, 2, &prm), OT_OK);
  }
  ts_batch.on = 0;
  assert_int_equal(ot_program_mark_input(p, t[0]), OT_OK);
  assert_int_equal(ot_program_mark_output(p, t[OPS]), OT_OK);
  for (int i = 0; i < OPS; i++) assert_int_equal(ot_program_mark_persistent(p, c[i]), OT_OK);
  /* the reference, op by op on the host: y = 0.5 (b + o + x + 0.25 r) for output o */
  float want_t[ROW], want_c[OPS][OPS * ROW], x[ROW];
  memcpy(x, ot_tensor_data(t[0]), sizeof x);
  for (int i = 0; i < OPS; i++) memcpy(want_c[i], ot_tensor_data(c[i]), sizeof want_c[i]);
  ot_sched_opts o = ot_sched_opts_default();
  o.budget_bytes = 1ull << 30;
  ot_plan *plan;
  if (ot_sched_plan(ctx, p, &o, &plan) != OT_OK) fail_msg("%s", ot_last_error());
  ot_trace *tr;
  assert_int_equal(ot_trace_create(&tr), OT_OK);
  for (int r = 0; r < 3; r++) {
    for (int i = 0; i < OPS; i++) {
      float *cr = want_c[i] + i * ROW, y[ROW];
      for (int j = 0; j < ROW; j++) {
        y[j] = 0.5f * (0.5f * (float)i + x[j] + 0.25f * cr[j]);
        cr[j] = 0.5f * (0.5f * (float)i + 1.0f + x[j] + 0.25f * cr[j]);
      }
      memcpy(x, y, sizeof x);
    }
    memcpy(want_t, x, sizeof want_t);
    const long l0 = ts_batch.launches;
    if (ot_sched_run(plan, tr) != OT_OK) fail_msg("%s", ot_last_error());
    if (r > 0) assert_int_equal(ts_batch.launches - l0, 1); /* (the first run uploads the caches between ops) */
    assert_memory_equal(ot_tensor_data(t[OPS]), want_t, sizeof want_t);
    for (int i = 0; i < OPS; i++) assert_memory_equal(ot_tensor_data(c[i]), want_c[i], sizeof want_c[i]);
    memcpy(x, ot_tensor_data(t[0]), sizeof x);
  }
  assert_int_equal(ot_trace_check_budget(tr, o.budget_bytes), OT_OK);
  ot_trace_destroy(tr);
  ot_plan_destroy(plan);
  ot_program_destroy(p);
  for (int i = 0; i < OPS; i++) ot_tensor_destroy(row[i]), ot_tensor_destroy(c[i]);
  for (int i = 0; i <= OPS; i++) ot_tensor_destroy(t[i]);
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batches_match_op_by_op),
      cmocka_unit_test(test_chain_in_few_launches),
      cmocka_unit_test(test_cache_rows_in_one_launch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
