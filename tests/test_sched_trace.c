/* test_sched_trace.c — the trace: Chrome JSON export, summary, the budget
 * checker (which must be able to fail), and the plan printout. */
#include <fcntl.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "memory/device.h"
#include "sched/trace_impl.h"
#include "sched_support.h"

typedef struct setup {
  ot_ctx *ctx;
  ts_randprog *rp;
  ot_plan *plan;
  uint64_t budget;
} setup;

static void make_delayed(setup *s, ot_strategy strat, uint64_t seed, unsigned delay_us) {
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = ot_num_devices() > 0 ? OT_BACKEND_MAP : OT_BACKEND_HOST;
  assert_int_equal(ot_ctx_create(&o, &s->ctx), OT_OK);
  assert_int_equal(ts_randprog_create(s->ctx, seed, &s->rp), OT_OK);
  assert_int_equal(ot_sched_min_budget(s->rp->p, &s->budget, NULL), OT_OK);
  ot_sched_opts so = ot_sched_opts_default();
  so.strategy = strat;
  so.budget_bytes = s->budget;
  so.transfer_delay_us = delay_us;
  assert_int_equal(ot_sched_plan(s->ctx, s->rp->p, &so, &s->plan), OT_OK);
}

static void make(setup *s, ot_strategy strat, uint64_t seed) { make_delayed(s, strat, seed, 0); }

static void unmake(setup *s) {
  ot_plan_destroy(s->plan);
  ts_randprog_destroy(s->rp);
  ot_ctx_destroy(s->ctx);
}


static void test_chrome_export(void **state) {
  (void)state;
  setup s;
  /* every copy waits 200 us on the transfer thread (on a device), so that
   * uploads start after later events were issued: the counters must still
   * come out in time order */
  make_delayed(&s, OT_STRATEGY_AGGRESSIVE, 34, 200);
  ot_trace *tr;
  assert_int_equal(ot_trace_create(&tr), OT_OK);
  ts_randprog_prepare_run(s.rp, 0);
  assert_int_equal(ot_sched_run(s.plan, tr), OT_OK);
  ot_trace_summary sm = ot_trace_summarize(tr);
  ot_plan_stats ps = ot_plan_get_stats(s.plan, 0);
  assert_int_equal(sm.runs, 1);
  assert_int_equal(sm.kernels, ot_program_num_ops(s.rp->p));
  assert_int_equal(sm.uploads, ps.uploads);
  assert_int_equal(sm.downloads, ps.downloads);
  assert_int_equal(sm.evictions, ps.evictions);
  assert_int_equal(sm.bytes_to_device, ps.bytes_up);
  assert_int_equal(sm.bytes_to_host, ps.bytes_down);
  assert_int_equal(sm.peak_device_bytes, ps.peak_bytes);
  assert_true(sm.peak_device_bytes <= s.budget);
  assert_int_equal(sm.budget, s.budget);
  assert_true(sm.overlap_s >= 0 && sm.overlap_s <= sm.transfer_s + 1e-9);

  char path[] = "/tmp/ot_trace_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(ot_trace_write_chrome(tr, path), OT_OK);
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  unlink(path);
  assert_non_null(root);
  json_t *ev = json_object_get(root, "traceEvents");
  assert_true(json_is_array(ev));
  int kernels = 0, uploads = 0, counters = 0, names = 0, late = 0;
  double last_counter = -1;
  size_t i;
  json_t *e;
  json_array_foreach(ev, i, e) {
    const char *ph = json_string_value(json_object_get(e, "ph"));
    assert_non_null(ph);
    if (strcmp(ph, "M") == 0) {
      names++;
      continue;
    }
    assert_true(json_is_number(json_object_get(e, "ts")));
    if (strcmp(ph, "C") == 0) {
      counters++;
      json_int_t b = json_integer_value(json_object_get(json_object_get(e, "args"), "bytes"));
      assert_true(b >= 0 && (uint64_t)b <= s.budget);
      double t = json_number_value(json_object_get(e, "ts"));
      if (t < last_counter) fail_msg("traceEvents[%zu]: counter at %.3f us after one at %.3f us", i, t, last_counter);
      last_counter = t;
      continue;
    }
    assert_string_equal(ph, "X");
    assert_true(json_number_value(json_object_get(e, "dur")) >= 0);
    const char *cat = json_string_value(json_object_get(e, "cat"));
    int tid = (int)json_integer_value(json_object_get(e, "tid"));
    if (strcmp(cat, "kernel") == 0) {
      kernels++;
      assert_int_equal(tid, 1);
    } else if (strcmp(cat, "upload") == 0) {
      uploads++;
      double issued = json_number_value(json_object_get(json_object_get(e, "args"), "issued"));
      assert_true(issued <= json_number_value(json_object_get(e, "ts")));
      late += issued < json_number_value(json_object_get(e, "ts"));
      assert_int_equal(tid, 2);
    }
  }
  assert_int_equal(kernels, sm.kernels);
  assert_int_equal(uploads, sm.uploads);
  assert_true(counters > 0);
  if (ot_num_devices() > 0) assert_true(late > 0); /* the case the counters' order is about did arise */
  assert_int_equal(names, 6); /* process + five lanes (compute, transfers, memory, host compute, disk reads) for the one device */
  json_decref(root);
  assert_int_equal(ot_trace_write_chrome(tr, "/nonexistent-dir/x.json"), OT_ERR_IO);
  assert_non_null(strstr(ot_last_error(), "/nonexistent-dir/x.json"));

  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ot_trace_summary_print(&sm, f);
  fclose(f);
  assert_non_null(strstr(buf, "peak device bytes"));
  assert_non_null(strstr(buf, "write-backs avoided"));
  free(buf);
  ot_trace_destroy(tr);
  unmake(&s);
}

static size_t add(ot_trace *t, ot_trace_kind k, unsigned flags, int64_t delta, uint64_t used) {
  ot_trace_event e = {k, flags, 0, 0, 0, "x", ot_now_ns(), ot_now_ns(), 256, delta, used, 0, 0};
  return ot_trace_add(t, &e);
}

static void test_check_budget_fails(void **state) {
  (void)state;
  ot_trace *t;
  assert_int_equal(ot_trace_create(&t), OT_OK);
  add(t, OT_TRACE_RUN, 0, 0, 0);
  add(t, OT_TRACE_UPLOAD, 0, 512, 512);
  add(t, OT_TRACE_KERNEL, OT_TRACE_RESIDENT_OK, 0, 512);
  assert_int_equal(ot_trace_check_budget(t, 512), OT_OK);
  assert_int_equal(ot_trace_check_budget(t, 511), OT_ERR_BUDGET);
  add(t, OT_TRACE_KERNEL, 0, 0, 512); /* an op without its tensors */
  assert_int_equal(ot_trace_check_budget(t, 512), OT_ERR_STATE);
  ot_trace_clear(t);
  assert_int_equal(ot_trace_count(t), 0);
  add(t, OT_TRACE_RUN, 0, 0, 256); /* a run starting with 256 bytes kept */
  add(t, OT_TRACE_ALLOC, 0, 256, 256); /* counter disagrees with the blocks */
  assert_int_equal(ot_trace_check_budget(t, 1024), OT_ERR_STATE);
  ot_trace_clear(t);
  add(t, OT_TRACE_RUN, 0, 0, 0);
  add(t, OT_TRACE_FREE, 0, -256, 0); /* frees what it never had */
  assert_int_equal(ot_trace_check_budget(t, 1024), OT_ERR_STATE);
  ot_trace_destroy(t);
  ot_trace_destroy(NULL);
}

/* The summary prints each size exactly and in the unit its size calls for:
 * at a 200 KB budget KiB (it said "0.19 MiB"; the plot said "0.000 GiB"). */
static void test_summary_units(void **state) {
  (void)state;
  ot_trace *t;
  assert_int_equal(ot_trace_create(&t), OT_OK);
  ot_trace_set_budget(t, 200000);
  add(t, OT_TRACE_RUN, 0, 0, 0);
  add(t, OT_TRACE_ALLOC, 0, 150000, 150000);
  add(t, OT_TRACE_FREE, 0, -150000, 512);
  ot_trace_summary sm = ot_trace_summarize(t);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ot_trace_summary_print(&sm, f);
  fclose(f);
  assert_non_null(strstr(buf, "200000 bytes (195 KiB)"));
  assert_non_null(strstr(buf, "150000 bytes (146 KiB)")); /* the peak */
  assert_non_null(strstr(buf, "512 bytes (512 B)"));      /* current */
  assert_null(strstr(buf, "MiB"));
  free(buf);
  ot_trace_destroy(t);
}

static char *print_plan(const ot_plan *plan) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ot_plan_print(plan, f);
  fclose(f);
  return buf;
}

static void test_plan_print(void **state) {
  (void)state;
  setup s;
  make(&s, OT_STRATEGY_AGGRESSIVE, 377);
  char *txt = print_plan(s.plan);
  assert_non_null(strstr(txt, "strategy aggressive"));
  assert_non_null(strstr(txt, "op #0 op0"));
  assert_non_null(strstr(txt, "first run"));
  assert_non_null(strstr(txt, "replays"));
  if (ot_plan_get_stats(s.plan, 0).evictions) assert_non_null(strstr(txt, "evicted for"));
  free(txt);
  unmake(&s);

  /* OMPTENSOR_DEBUG=plan prints the plan on stderr when it is made */
  char path[] = "/tmp/ot_plan_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  setenv("OMPTENSOR_DEBUG", "plan", 1);
  make(&s, OT_STRATEGY_MINIMAL, 5);
  unsetenv("OMPTENSOR_DEBUG");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char got[64] = {0};
  assert_true(pread(fd, got, sizeof got - 1, 0) > 0);
  close(fd);
  unlink(path);
  assert_non_null(strstr(got, "plan:"));
  unmake(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chrome_export),
      cmocka_unit_test(test_check_budget_fails),
      cmocka_unit_test(test_summary_units),
      cmocka_unit_test(test_plan_print),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
