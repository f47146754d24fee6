/* test_verify.c — integrity mode (OMPTENSOR_VERIFY, sched/verify.h) on the
 * map backend: a weight's or a persistent tensor's home changed between
 * runs without ot_sched_invalidate fails the next run with
 * OT_ERR_INTEGRITY naming the tensor; after ot_sched_invalidate the run
 * works and uses the new values; normal runs pass at levels 1 and 2; the
 * checksum itself notices single-bit changes anywhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain_support.h"
#include "ot_test.h"
#include "sched/verify.h"
#include "sched_support.h"

#define N 600
#define LAYERS 4

static void checksum_bits(void **state) {
  (void)state;
  unsigned char buf[203];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)(i * 37 + 11);
  for (size_t n = 0; n <= sizeof buf; n += 29) {
    uint64_t h = ot_checksum64(buf, n);
    for (size_t i = 0; i < n; i++)
      for (int b = 0; b < 8; b++) {
        buf[i] ^= (unsigned char)(1u << b);
        if (ot_checksum64(buf, n) == h) fail_msg("flipping bit %d of byte %zu of %zu keeps the checksum", b, i, n);
        buf[i] ^= (unsigned char)(1u << b);
      }
    assert_true(ot_checksum64(buf, n) == h);
  }
  /* the length counts: zeros of different lengths differ */
  static const unsigned char z[64] = {0};
  assert_true(ot_checksum64(z, 32) != ot_checksum64(z, 40));
}

#ifdef OT_OFFLOAD
static ot_ctx *map_ctx(void) {
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = OT_BACKEND_MAP;
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&co, &ctx));
  return ctx;
}

/* A weight modified behind the scheduler's back, at each level. */
static void weight_changed(int level) {
  ot_verify_set_level(level);
  ot_ctx *ctx = map_ctx();
  cs_chain c;
  OT_ASSERT_OK(cs_chain_create(ctx, LAYERS, N, &c));
  float ref[N];
  cs_chain_reference(&c, ref);
  ot_sched_opts o = ot_sched_opts_default();
  o.budget_bytes = cs_chain_min_budget(&c); /* every weight is uploaded every run */
  ot_plan *plan;
  OT_ASSERT_OK(ot_sched_plan(ctx, c.p, &o, &plan));
  for (int r = 0; r < 3; r++) { /* no false alarms */
    OT_ASSERT_OK(ot_sched_run(plan, NULL));
    cs_chain_expect(&c, ref);
  }
  float *w2 = ot_tensor_data(c.w[2]);
  w2[N / 2] += 1.0f;
  OT_ASSERT_FAILS(ot_sched_run(plan, NULL), OT_ERR_INTEGRITY, "'w2'");
  assert_non_null(strstr(ot_last_error(), "ot_sched_invalidate"));
  /* told: the new value is used */
  ot_sched_invalidate(plan);
  OT_ASSERT_OK(ot_sched_run(plan, NULL));
  cs_chain_reference(&c, ref);
  cs_chain_expect(&c, ref);
  OT_ASSERT_OK(ot_sched_run(plan, NULL));
  /* off: the same change goes unnoticed (the cost is zero) */
  ot_verify_set_level(0);
  ot_plan *plain;
  OT_ASSERT_OK(ot_sched_plan(ctx, c.p, &o, &plain));
  OT_ASSERT_OK(ot_sched_run(plain, NULL));
  w2[0] -= 1.0f;
  OT_ASSERT_OK(ot_sched_run(plain, NULL));
  ot_plan_destroy(plain);
  ot_plan_destroy(plan);
  cs_chain_destroy(&c);
  ot_ctx_destroy(ctx);
}

static void weight_level1(void **state) {
  (void)state;
  weight_changed(1);
}

static void weight_level2(void **state) {
  (void)state;
  weight_changed(2);
}

/* Persistent state s, updated in place and evicted (dirty, so written
 * home) while three big weights pass through: its home is checked when it
 * comes back within the run and at the start of the next run. */
static void persistent_changed(void **state) {
  (void)state;
  ot_verify_set_level(1);
  ot_ctx *ctx = map_ctx();
  int64_t n = N;
  ot_tensor *s, *w[3], *y;
  OT_ASSERT_OK(ot_tensor_create(ctx, "state", OT_F32, 1, &n, &s));
  OT_ASSERT_OK(ot_tensor_create(ctx, "y", OT_F32, 1, &n, &y));
  for (int i = 0; i < 3; i++) {
    char name[8];
    snprintf(name, sizeof name, "w%d", i);
    OT_ASSERT_OK(ot_tensor_create(ctx, name, OT_F32, 1, &n, &w[i]));
    ts_fill(w[i], 50 + (uint64_t)i);
  }
  ts_fill(s, 9);
  ot_program *p;
  OT_ASSERT_OK(ot_program_create(ctx, &p));
  ts_mix_params prm = {{1.0f, 0.5f, 0}, 0, -1};
  ot_tensor *in0[] = {s, w[0]}, *in1[] = {w[1], w[2]}, *in2[] = {s, y};
  OT_ASSERT_OK(ts_add_mix(p, "update", in0, 2, &s, 1, &prm)); /* s = mix(s, w0), in place */
  OT_ASSERT_OK(ts_add_mix(p, "big", in1, 2, &y, 1, &prm));    /* evicts s */
  OT_ASSERT_OK(ts_add_mix(p, "read", in2, 2, &y, 1, &prm));   /* s again */
  OT_ASSERT_OK(ot_program_mark_persistent(p, s));
  OT_ASSERT_OK(ot_program_mark_output(p, y));
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = OT_STRATEGY_MINIMAL;
  o.budget_bytes = 3 * ts_block(N * 4);
  ot_plan *plan;
  OT_ASSERT_OK(ot_sched_plan(ctx, p, &o, &plan));
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  OT_ASSERT_OK(ot_sched_run(plan, tr));
  OT_ASSERT_OK(ot_sched_run(plan, tr));
  ot_trace_summary sm = ot_trace_summarize(tr);
  assert_true(sm.downloads >= 4); /* state written home mid-run and at the end, y at the end */
  ot_trace_destroy(tr);
  ((float *)ot_tensor_data(s))[3] = 42.0f;
  OT_ASSERT_FAILS(ot_sched_run(plan, NULL), OT_ERR_INTEGRITY, "'state'");
  ot_sched_invalidate(plan);
  OT_ASSERT_OK(ot_sched_run(plan, NULL));
  ot_plan_destroy(plan);
  ot_program_destroy(p);
  ot_tensor_destroy(s);
  ot_tensor_destroy(y);
  for (int i = 0; i < 3; i++) ot_tensor_destroy(w[i]);
  ot_ctx_destroy(ctx);
  ot_verify_set_level(0);
}
#endif

static void offload_only(void **state) {
  (void)state;
#ifdef OT_OFFLOAD
  weight_level1(state);
  weight_level2(state);
  persistent_changed(state);
#else
  skip(); /* the host backend moves nothing: there is nothing to verify */
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(checksum_bits), cmocka_unit_test(offload_only)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
