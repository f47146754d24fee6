/* test_sched_replay.c — a decode-like step recorded once, planned once and
 * replayed 1000 times with a changing run-time scalar (the position), under a
 * budget that forces the KV cache and the weights to move every step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "memory/device.h"
#include "ot_pragmas.h"
#include "sched_support.h"

#define NKV 1024 /* kv [NKV] */
#define NW 256   /* w [NW] */
#define NW2 1024 /* w2 [NW2] */
#define STEPS 1000

/* kv[pos] = x[0] * w[pos % NW]   (in place on kv: the rest is kept) */
static ot_status kv_write(const ot_op_exec *e) {
  float *kv = e->out[0];
  const float *x = e->in[1], *w = e->in[2];
  int64_t pos = e->scalars[0];
  OT_PARFOR(e->device, OT_DEVPTR(kv, x, w))
  for (int64_t j = pos; j < pos + 1; j++) kv[j] = x[0] * w[j % NW];
  return OT_OK;
}

/* y[0] = w[0] + sum(kv[0..pos]), summed in order by one thread */
static ot_status attend(const ot_op_exec *e) {
  const float *kv = e->in[0], *w = e->in[1];
  float *y = e->out[0];
  int64_t pos = e->scalars[0];
  OT_PARFOR(e->device, OT_DEVPTR(kv, w, y))
  for (int k = 0; k < 1; k++) {
    float s = w[0];
    for (int64_t j = 0; j <= pos; j++) s += kv[j];
    y[k] = s;
  }
  return OT_OK;
}

static void replay(ot_backend be, ot_strategy strat) {
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = be;
  ot_ctx *ctx;
  assert_int_equal(ot_ctx_create(&co, &ctx), OT_OK);
  int64_t n1 = 1, nkv = NKV, nw = NW, nw2 = NW2;
  ot_tensor *x, *kv, *w, *w2, *y, *z;
  assert_int_equal(ot_tensor_create(ctx, "x", OT_F32, 1, &n1, &x), OT_OK);
  assert_int_equal(ot_tensor_create(ctx, "kv", OT_F32, 1, &nkv, &kv), OT_OK);
  assert_int_equal(ot_tensor_create(ctx, "w", OT_F32, 1, &nw, &w), OT_OK);
  assert_int_equal(ot_tensor_create(ctx, "w2", OT_F32, 1, &nw2, &w2), OT_OK);
  assert_int_equal(ot_tensor_create(ctx, "y", OT_F32, 1, &n1, &y), OT_OK);
  assert_int_equal(ot_tensor_create(ctx, "z", OT_F32, 1, &n1, &z), OT_OK);
  ts_fill(w, 5);
  ts_fill(w2, 6);
  ot_program *p;
  assert_int_equal(ot_program_create(ctx, &p), OT_OK);
  int pos;
  assert_int_equal(ot_program_scalar_create(p, "pos", &pos), OT_OK);
  assert_int_equal(pos, 0);
  ot_tensor *in0[] = {kv, x, w}, *in1[] = {kv, w}, *in2[] = {w2, y};
  ot_op_desc d0 = {"kv_write", kv_write, 3, in0, 1, &kv, NULL, 0, 0, 0};
  ot_op_desc d1 = {"attend", attend, 2, in1, 1, &y, NULL, 0, 0, 0};
  assert_int_equal(ot_program_add_op(p, &d0), OT_OK);
  assert_int_equal(ot_program_add_op(p, &d1), OT_OK);
  ts_mix_params prm = {{0.5f, 0.5f, 0}, 0, -1};
  assert_int_equal(ts_add_mix(p, "head", in2, 2, &z, 1, &prm), OT_OK);
  assert_int_equal(ot_program_mark_input(p, x), OT_OK);
  assert_int_equal(ot_program_mark_persistent(p, kv), OT_OK);
  assert_int_equal(ot_program_mark_output(p, y), OT_OK);
  assert_int_equal(ot_program_mark_output(p, z), OT_OK);
  uint64_t minb;
  assert_int_equal(ot_sched_min_budget(p, &minb, NULL), OT_OK);
  assert_int_equal(minb, NKV * 4 + 256 + NW * 4); /* kv_write: kv + x + w; head (w2 + y + z) evicts kv and w */
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = strat;
  o.budget_bytes = minb;
  ot_plan *plan;
  if (ot_sched_plan(ctx, p, &o, &plan) != OT_OK) fail_msg("%s", ot_last_error());
  ot_trace *tr;
  assert_int_equal(ot_trace_create(&tr), OT_OK);
  float mirror[NKV] = {0};
  const float *wh = ot_tensor_data(w);
  for (int t = 0; t < STEPS; t++) {
    float xv = 1.0f + 0.001f * (float)t;
    ((float *)ot_tensor_data(x))[0] = xv;
    assert_int_equal(ot_program_set_scalar(p, pos, t % NKV), OT_OK);
    if (ot_sched_run(plan, tr) != OT_OK) fail_msg("step %d: %s", t, ot_last_error());
    int64_t ps = t % NKV;
    mirror[ps] = xv * wh[ps % NW];
    float s = wh[0];
    for (int64_t j = 0; j <= ps; j++) s += mirror[j];
    float yv = ((float *)ot_tensor_data(y))[0];
    if (yv != s) fail_msg("%s %s step %d: y = %.9g, want %.9g", ot_backend_name(be), ot_strategy_name(strat), t, yv, s);
    /* persistent state is home after every run */
    if (memcmp(ot_tensor_data(kv), mirror, sizeof mirror) != 0) fail_msg("step %d: kv home differs", t);
    float zv = 0.5f * (0.5f * ((float *)ot_tensor_data(w2))[0] + 0.5f * s);
    assert_float_equal(((float *)ot_tensor_data(z))[0], zv, 1e-6);
    if (t == 9) {
      /* keep the trace small: check and restart it */
      assert_int_equal(ot_trace_check_budget(tr, minb), OT_OK);
      ot_trace_summary sm = ot_trace_summarize(tr);
      assert_int_equal(sm.runs, 10);
      assert_true(sm.evictions >= 10); /* kv and w leave every step */
      ot_trace_clear(tr);
    }
  }
  assert_int_equal(ot_trace_check_budget(tr, minb), OT_OK);
  ot_trace_destroy(tr);
  ot_plan_destroy(plan);
  ot_program_destroy(p);
  ot_tensor_destroy(x);
  ot_tensor_destroy(kv);
  ot_tensor_destroy(w);
  ot_tensor_destroy(w2);
  ot_tensor_destroy(y);
  ot_tensor_destroy(z);
  ot_ctx_destroy(ctx);
}

static void test_replay_host(void **state) {
  (void)state;
  replay(OT_BACKEND_HOST, OT_STRATEGY_BALANCED);
}

static void test_replay_map(void **state) {
  (void)state;
  if (ot_num_devices() == 0) skip();
  replay(OT_BACKEND_MAP, OT_STRATEGY_MINIMAL);
  replay(OT_BACKEND_MAP, OT_STRATEGY_AGGRESSIVE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_replay_host),
      cmocka_unit_test(test_replay_map),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
