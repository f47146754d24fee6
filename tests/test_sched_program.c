/* test_sched_program.c — recording: argument checks, params copied at
 * recording, scalars, roles from use, empty programs and tensors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sched_support.h"

static ot_ctx *host_ctx(void) {
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = OT_BACKEND_HOST;
  ot_ctx *ctx;
  assert_int_equal(ot_ctx_create(&o, &ctx), OT_OK);
  return ctx;
}

static ot_tensor *vec(ot_ctx *ctx, const char *name, int64_t n) {
  ot_tensor *t;
  assert_int_equal(ot_tensor_create(ctx, name, OT_F32, 1, &n, &t), OT_OK);
  return t;
}

static void test_bad_ops(void **state) {
  (void)state;
  ot_ctx *ctx = host_ctx(), *other = host_ctx();
  ot_tensor *a = vec(ctx, "a", 8), *b = vec(ctx, "b", 8), *foreign = vec(other, "foreign", 8);
  ot_program *p;
  assert_int_equal(ot_program_create(NULL, &p), OT_ERR_INVALID_ARG);
  assert_int_equal(ot_program_create(ctx, NULL), OT_ERR_INVALID_ARG);
  assert_int_equal(ot_program_create(ctx, &p), OT_OK);
  ts_mix_params prm = {{1, 0, 0}, 0, -1};
  ot_op_desc d = {"noop", NULL, 1, &a, 1, &b, &prm, sizeof prm, 0, 0};
  assert_int_equal(ot_program_add_op(p, &d), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "noop"));
  d.run = ts_mix_run;
  d.in = (ot_tensor *const[]){foreign};
  assert_int_equal(ot_program_add_op(p, &d), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "foreign"));
  d.in = (ot_tensor *const[]){NULL};
  assert_int_equal(ot_program_add_op(p, &d), OT_ERR_INVALID_ARG);
  d.in = &a;
  d.params = NULL;
  assert_int_equal(ot_program_add_op(p, &d), OT_ERR_INVALID_ARG);
  d.params = &prm;
  d.n_in = -1;
  assert_int_equal(ot_program_add_op(p, &d), OT_ERR_INVALID_ARG);
  assert_int_equal(ot_program_add_op(NULL, &d), OT_ERR_INVALID_ARG);
  assert_int_equal(ot_program_num_ops(p), 0);
  assert_int_equal(ot_program_mark_output(p, foreign), OT_ERR_INVALID_ARG);
  assert_int_equal(ot_program_mark_input(p, NULL), OT_ERR_INVALID_ARG);
  ot_program_destroy(p);
  ot_program_destroy(NULL);
  ot_tensor_destroy(a);
  ot_tensor_destroy(b);
  ot_tensor_destroy(foreign);
  ot_ctx_destroy(ctx);
  ot_ctx_destroy(other);
}

static void test_scalars_and_params(void **state) {
  (void)state;
  ot_ctx *ctx = host_ctx();
  ot_tensor *a = vec(ctx, "a", 8), *b = vec(ctx, "b", 8);
  ts_fill(a, 3);
  ot_program *p;
  assert_int_equal(ot_program_create(ctx, &p), OT_OK);
  int s0, s1, dup;
  assert_int_equal(ot_program_scalar_create(p, "pos", &s0), OT_OK);
  assert_int_equal(ot_program_scalar_create(p, "len", &s1), OT_OK);
  assert_int_equal(ot_program_scalar_create(p, "pos", &dup), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "pos"));
  assert_int_equal(s1, 1);
  assert_int_equal(ot_program_get_scalar(p, s1), 0);
  assert_int_equal(ot_program_set_scalar(p, s1, -42), OT_OK);
  assert_int_equal(ot_program_get_scalar(p, s1), -42);
  assert_int_equal(ot_program_set_scalar(p, 7, 1), OT_ERR_INVALID_ARG);
  /* params are copied when the op is recorded */
  ts_mix_params prm = {{2, 0, 0}, 1, s1};
  assert_int_equal(ts_add_mix(p, "scale", &a, 1, &b, 1, &prm), OT_OK);
  prm.a[0] = 100;
  assert_string_equal(ot_program_op_name(p, 0), "scale");
  assert_string_equal(ot_program_op_name(p, 3), "?");
  assert_int_equal(ot_program_mark_output(p, b), OT_OK);
  ot_plan *plan;
  assert_int_equal(ot_sched_plan(ctx, p, NULL, &plan), OT_OK);
  ot_trace *tr;
  assert_int_equal(ot_trace_create(&tr), OT_OK);
  for (int64_t v = 0; v < 3; v++) {
    assert_int_equal(ot_program_set_scalar(p, s1, v), OT_OK);
    assert_int_equal(ot_sched_run(plan, tr), OT_OK);
    const float *x = ot_tensor_data(a), *y = ot_tensor_data(b);
    for (int j = 0; j < 8; j++) assert_float_equal(y[j], 0.5f * (1 + 0.25f * (float)v + 2 * x[j]), 1e-6);
  }
  assert_int_equal(ot_trace_check_budget(tr, ot_ctx_budget(ctx, 0)), OT_OK);
  ot_trace_destroy(tr);
  ot_plan_destroy(plan);
  ot_program_destroy(p);
  ot_tensor_destroy(a);
  ot_tensor_destroy(b);
  ot_ctx_destroy(ctx);
}

static char *plan_text(ot_ctx *ctx, ot_program *p) {
  ot_plan *plan;
  assert_int_equal(ot_sched_plan(ctx, p, NULL, &plan), OT_OK);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ot_plan_print(plan, f);
  fclose(f);
  ot_plan_destroy(plan);
  return buf;
}

static const char *line_of(const char *txt, const char *tensor) {
  static char line[256];
  char key[64];
  snprintf(key, sizeof key, "tensor %s ", tensor);
  const char *s = strstr(txt, key);
  assert_non_null(s);
  size_t n = strcspn(s, "\n");
  snprintf(line, sizeof line, "%.*s", (int)n, s);
  return line;
}

static void test_roles(void **state) {
  (void)state;
  ot_ctx *ctx = host_ctx();
  ot_tensor *w = vec(ctx, "w", 8), *x = vec(ctx, "x", 8), *t = vec(ctx, "t", 8), *y = vec(ctx, "y", 8),
            *kv = vec(ctx, "kv", 16), *st = vec(ctx, "st", 8), *kv_row;
  assert_int_equal(ot_tensor_slice(kv, 0, 4, 8, &kv_row), OT_OK);
  ot_program *p;
  assert_int_equal(ot_program_create(ctx, &p), OT_OK);
  ts_mix_params prm = {{0.5f, 0.5f, 0}, 0, -1};
  ot_tensor *in0[] = {x, w}, *in1[] = {t, w}, *in2[] = {t, st};
  assert_int_equal(ts_add_mix(p, "a", in0, 2, &t, 1, &prm), OT_OK);
  assert_int_equal(ts_add_mix(p, "b", in1, 2, &kv_row, 1, &prm), OT_OK); /* partial write */
  assert_int_equal(ts_add_mix(p, "c", in2, 2, &st, 1, &prm), OT_OK);     /* st in place: state */
  assert_int_equal(ts_add_mix(p, "d", &t, 1, &y, 1, &prm), OT_OK);
  assert_int_equal(ot_program_mark_input(p, x), OT_OK);
  assert_int_equal(ot_program_mark_output(p, y), OT_OK);
  char *txt = plan_text(ctx, p);
  assert_non_null(strstr(line_of(txt, "w"), "weight, read from home, may stay between runs"));
  assert_non_null(strstr(line_of(txt, "x"), "input, read from home"));
  assert_null(strstr(line_of(txt, "x"), "may stay"));
  assert_non_null(strstr(line_of(txt, "t"), "temporary"));
  assert_non_null(strstr(line_of(txt, "y"), "result, written home"));
  assert_null(strstr(line_of(txt, "y"), "may stay"));
  /* a write to part of kv keeps the rest: it needs kv's home and goes back home */
  assert_non_null(strstr(line_of(txt, "kv[slice]"), "read from home, written home"));
  assert_non_null(strstr(line_of(txt, "st"), "result, read from home, written home, may stay"));
  free(txt);
  ot_program_destroy(p);
  ot_tensor *all[] = {w, x, t, y, kv, st, kv_row};
  for (int i = 0; i < 7; i++) ot_tensor_destroy(all[i]);
  ot_ctx_destroy(ctx);
}

static void test_empty(void **state) {
  (void)state;
  ot_ctx *ctx = host_ctx();
  ot_program *p;
  assert_int_equal(ot_program_create(ctx, &p), OT_OK);
  ot_plan *plan;
  for (int s = 0; s < OT_STRATEGY_COUNT; s++) {
    ot_sched_opts o = ot_sched_opts_default();
    o.strategy = (ot_strategy)s;
    o.budget_bytes = 1;
    assert_int_equal(ot_sched_plan(ctx, p, &o, &plan), OT_OK);
    assert_int_equal(ot_sched_run(plan, NULL), OT_OK);
    ot_plan_destroy(plan);
  }
  /* a zero-element tensor takes no device memory */
  int64_t zero = 0;
  ot_tensor *e, *y = vec(ctx, "y", 4);
  assert_int_equal(ot_tensor_create(ctx, "empty", OT_F32, 1, &zero, &e), OT_OK);
  ts_mix_params prm = {{1, 0, 0}, 3, -1};
  assert_int_equal(ts_add_mix(p, "from_empty", &e, 1, &y, 1, &prm), OT_OK);
  assert_int_equal(ot_program_mark_output(p, y), OT_OK);
  uint64_t minb;
  assert_int_equal(ot_sched_min_budget(p, &minb, NULL), OT_OK);
  assert_int_equal(minb, 256);
  ot_sched_opts o = ot_sched_opts_default();
  o.budget_bytes = 256;
  assert_int_equal(ot_sched_plan(ctx, p, &o, &plan), OT_OK);
  assert_int_equal(ot_sched_run(plan, NULL), OT_OK);
  assert_float_equal(((float *)ot_tensor_data(y))[3], 1.5f, 0);
  ot_plan_destroy(plan);
  ot_program_destroy(p);
  ot_tensor_destroy(e);
  ot_tensor_destroy(y);
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_ops),
      cmocka_unit_test(test_scalars_and_params),
      cmocka_unit_test(test_roles),
      cmocka_unit_test(test_empty),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
