/* test_sched_trace_read.c — reading a trace back (ot_trace_read_chrome, used
 * by `omptensor trace summarize|plot`) validates every event (issue 14,
 * class 5): a field that is missing, of the wrong JSON type, out of range
 * (1e300 timestamps, negative bytes, counters past int64) or whose sums
 * overflow is OT_ERR_FORMAT naming the file, the event (traceEvents[i]) and
 * the field, never a 0, a wrapped value or undefined behaviour (the asan
 * preset runs this with UBSan). Also: a real trace reads back exactly; the
 * budget checker's and the summary's arithmetic is checked (events built
 * through the API); a FIFO or a directory is refused without blocking. */
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "memory/device.h"
#include "omptensor/omptensor.h"
#include "ot_testio.h"
#include "sched/trace_impl.h"
#include "sched_support.h"

static char *dir;

static int setup(void **state) {
  (void)state;
  dir = ot_tmpdir_create();
  return dir ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  ot_tmpdir_remove(dir);
  return 0;
}

/* A small valid trace as omptensor writes it: device metadata, a run, an
 * upload with its counter, a kernel, a write-back and a free. */
static json_t *base_trace(void) {
  json_error_t err;
  json_t *root = json_loads(
      "{\"traceEvents\": ["
      " {\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"device 0\"}},"
      " {\"name\":\"run 0\",\"cat\":\"run\",\"ph\":\"X\",\"ts\":0.0,\"dur\":0.0,\"pid\":0,\"tid\":1,"
      "  \"args\":{\"tensor\":\"\",\"bytes\":0,\"op\":0,\"run\":0,\"device_bytes\":0,\"block_delta\":0,\"flags\":0}},"
      " {\"name\":\"upload w0\",\"cat\":\"upload\",\"ph\":\"X\",\"ts\":1.5,\"dur\":2.0,\"pid\":0,\"tid\":2,"
      "  \"args\":{\"tensor\":\"w0\",\"bytes\":512,\"op\":0,\"run\":0,\"device_bytes\":512,\"block_delta\":512,"
      "\"flags\":16}},"
      " {\"name\":\"device bytes\",\"ph\":\"C\",\"ts\":1.5,\"pid\":0,\"args\":{\"bytes\":512}},"
      " {\"name\":\"op0\",\"cat\":\"kernel\",\"ph\":\"X\",\"ts\":4.0,\"dur\":3.25,\"pid\":0,\"tid\":1,"
      "  \"args\":{\"tensor\":\"op0\",\"bytes\":0,\"op\":0,\"run\":0,\"device_bytes\":512,\"block_delta\":0,"
      "\"flags\":1}},"
      " {\"name\":\"download w0\",\"cat\":\"download\",\"ph\":\"X\",\"ts\":8.0,\"dur\":1.0,\"pid\":0,\"tid\":2,"
      "  \"args\":{\"tensor\":\"w0\",\"bytes\":512,\"op\":0,\"run\":0,\"device_bytes\":512,\"block_delta\":0,"
      "\"flags\":0}},"
      " {\"name\":\"free w0\",\"cat\":\"free\",\"ph\":\"X\",\"ts\":9.0,\"dur\":0.0,\"pid\":0,\"tid\":3,"
      "  \"args\":{\"tensor\":\"w0\",\"bytes\":512,\"op\":-1,\"run\":0,\"device_bytes\":0,\"block_delta\":-512,"
      "\"flags\":2}}"
      "], \"displayTimeUnit\":\"ms\", \"otherData\":{\"producer\":\"omptensor\",\"budget_bytes\":1024}}",
      0, &err);
  assert_non_null(root);
  return root;
}

static char path[4096];

static void dump(json_t *root, const char *name) {
  ot_tmp_path(path, sizeof path, dir, name);
  assert_int_equal(json_dump_file(root, path, JSON_COMPACT), 0);
}

/* traceEvents[ev]: sets `field` ("ts", or "args.bytes") to v (NULL: removes it). */
static void set_field(json_t *root, size_t ev, const char *field, json_t *v) {
  json_t *e = json_array_get(json_object_get(root, "traceEvents"), ev);
  assert_non_null(e);
  if (!strncmp(field, "args.", 5)) {
    e = json_object_get(e, "args");
    field += 5;
  }
  if (v) assert_int_equal(json_object_set_new(e, field, v), 0);
  else assert_int_equal(json_object_del(e, field), 0);
}

/* The base trace with traceEvents[ev].field = v must fail naming the file,
 * "traceEvents[ev]" and the field, plus `what` (NULL: nothing more). */
static void expect_bad(size_t ev, const char *field, json_t *v, const char *what) {
  json_t *root = base_trace();
  set_field(root, ev, field, v);
  dump(root, "bad.json");
  json_decref(root);
  char at[64];
  snprintf(at, sizeof at, "traceEvents[%zu]", ev);
  ot_trace *t = (ot_trace *)1;
  uint64_t budget = 7;
  print_message("%s = ...: ", field);
  OT_ASSERT_ERR(ot_trace_read_chrome(path, &t, &budget), OT_ERR_FORMAT, path, at, field, what ? what : "");
  print_message("%s\n", ot_last_error());
  assert_null(t);
  assert_int_equal(budget, 0);
}

static void test_base_reads(void **state) {
  (void)state;
  json_t *root = base_trace();
  dump(root, "good.json");
  json_decref(root);
  ot_trace *t;
  uint64_t budget;
  OT_ASSERT_OK(ot_trace_read_chrome(path, &t, &budget));
  assert_int_equal(budget, 1024);
  assert_int_equal(ot_trace_count(t), 5);
  const ot_trace_event *up = ot_trace_event_at(t, 1), *k = ot_trace_event_at(t, 2);
  assert_int_equal(up->kind, OT_TRACE_UPLOAD);
  assert_string_equal(up->name, "w0");
  assert_int_equal(up->bytes, 512);
  assert_int_equal(up->flags, OT_TRACE_PREFETCH);
  assert_int_equal(up->start_ns, 1500);
  assert_int_equal(up->end_ns, 3500);
  assert_int_equal(k->start_ns, 4000);
  assert_int_equal(k->end_ns, 7250);
  assert_int_equal(up->issued_ns, 1500); /* no args.issued (files before issue 17): issued at ts */
  assert_int_equal(ot_trace_event_at(t, 4)->op, -1);
  assert_int_equal(ot_trace_event_at(t, 4)->block_delta, -512);
  OT_ASSERT_OK(ot_trace_check_budget(t, budget));
  ot_trace_summary s = ot_trace_summarize(t);
  assert_int_equal(s.bytes_to_device, 512);
  assert_int_equal(s.bytes_to_host, 512);
  assert_int_equal(s.peak_device_bytes, 512);
  ot_trace_destroy(t);
}

static void test_wrong_types(void **state) {
  (void)state;
  /* strings, reals, arrays, objects, booleans and null in place of numbers */
  expect_bad(2, "args.bytes", json_string("512"), "string");
  expect_bad(2, "args.bytes", json_real(512.5), "integer");
  expect_bad(2, "args.bytes", json_real(512.0), "integer");
  expect_bad(2, "args.bytes", json_true(), "integer");
  expect_bad(2, "args.bytes", json_null(), "integer");
  expect_bad(2, "args.bytes", json_object(), "object");
  expect_bad(2, "args.device_bytes", json_string("0"), "string");
  expect_bad(2, "args.block_delta", json_array(), "array");
  expect_bad(2, "args.op", json_string("op0"), "string");
  expect_bad(2, "args.run", json_real(0.5), "integer");
  expect_bad(2, "args.flags", json_string("16"), "string");
  expect_bad(2, "pid", json_string("0"), "string");
  expect_bad(2, "ts", json_string("1.5"), "string");
  expect_bad(2, "dur", json_false(), "number");
  expect_bad(2, "args.tensor", json_integer(5), "string");
  expect_bad(2, "args.issued", json_string("1.5"), "string"); /* optional, but a number when present */
  expect_bad(2, "args", json_array(), "object");
  expect_bad(2, "cat", json_integer(2), "string");
  expect_bad(2, "ph", json_integer(88), "string");
  expect_bad(0, "ph", json_null(), "string"); /* a metadata event too */
  /* a huge array where a number belongs */
  json_t *big = json_array();
  for (int i = 0; i < 100000; i++) json_array_append_new(big, json_integer(i));
  expect_bad(4, "args.bytes", big, "array");
}

static void test_missing_fields(void **state) {
  (void)state;
  const char *fields[] = {"ts", "dur", "pid", "cat", "args", "args.tensor", "args.bytes", "args.op", "args.run",
                          "args.device_bytes", "args.block_delta", "args.flags"};
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) expect_bad(2, fields[i], NULL, "missing");
  expect_bad(3, "ph", NULL, "missing"); /* a counter event */
}

static void test_out_of_range(void **state) {
  (void)state;
  expect_bad(2, "ts", json_real(1e300), "1e+300");
  expect_bad(2, "ts", json_real(-1.0), "-1");
  expect_bad(2, "ts", json_integer(INT64_MAX), NULL);
  expect_bad(2, "ts", json_real(9.3e15), NULL); /* past 2^53 us: no longer an exact ns count in int64 */
  expect_bad(2, "dur", json_real(1e300), "1e+300");
  expect_bad(2, "dur", json_real(-0.5), "-0.5");
  expect_bad(2, "args.issued", json_real(-1.0), "-1");
  expect_bad(4, "dur", json_real(9007199254740990.0), "ts + dur"); /* each in range, the end is not */
  expect_bad(2, "args.bytes", json_integer(-1), "-1");
  expect_bad(2, "args.bytes", json_integer(INT64_MIN), NULL);
  expect_bad(2, "args.device_bytes", json_integer(-512), "-512");
  expect_bad(2, "args.block_delta", json_integer(INT64_MIN), NULL);
  expect_bad(2, "args.op", json_integer(-2), "-2");
  expect_bad(2, "args.op", json_integer((json_int_t)1 << 40), NULL);
  expect_bad(2, "args.run", json_integer(-1), "-1");
  expect_bad(2, "args.run", json_integer((json_int_t)INT32_MAX + 1), NULL);
  expect_bad(2, "args.flags", json_integer(-1), "-1");
  expect_bad(2, "args.flags", json_integer(1 << 20), NULL); /* bits no omptensor flag has */
  expect_bad(2, "pid", json_integer((json_int_t)1 << 33), NULL);
  expect_bad(2, "pid", json_integer(-7), "-7");
  expect_bad(2, "cat", json_string("launch"), "launch");
  expect_bad(2, "ph", json_string("B"), "'B'");
}

/* Every event in range, but their sums are not. */
static void test_sums_overflow(void **state) {
  (void)state;
  json_t *root = base_trace();
  set_field(root, 2, "args.bytes", json_integer(INT64_MAX));
  set_field(root, 5, "args.bytes", json_integer(INT64_MAX)); /* download: a sum of its own, fine */
  json_t *arr = json_object_get(root, "traceEvents");
  json_array_append_new(arr, json_deep_copy(json_array_get(arr, 2)));
  json_array_append_new(arr, json_deep_copy(json_array_get(arr, 2)));
  dump(root, "sum.json");
  json_decref(root);
  ot_trace *t = (ot_trace *)1;
  OT_ASSERT_ERR(ot_trace_read_chrome(path, &t, NULL), OT_ERR_FORMAT, path, "traceEvents[8]", "args.bytes",
                "add up");
  assert_null(t);

  /* device bytes in use recomputed from the blocks: int64 overflow in the
   * budget check is a failed check (OT_ERR_STATE), never signed overflow */
  assert_int_equal(ot_trace_create(&t), OT_OK);
  ot_trace_event e = {OT_TRACE_RUN, 0, 0, 0, 0, "r", ot_now_ns(), ot_now_ns(), 0, 0, (uint64_t)INT64_MAX, 0, 0};
  ot_trace_add(t, &e);
  e.kind = OT_TRACE_ALLOC;
  e.block_delta = INT64_MAX;
  ot_trace_add(t, &e);
  OT_ASSERT_ERR(ot_trace_check_budget(t, UINT64_MAX), OT_ERR_STATE, "trace event 1", "overflow");
  ot_trace_clear(t);
  /* a counter past INT64_MAX (only the API can record one) */
  e.kind = OT_TRACE_RUN;
  e.block_delta = 0;
  e.device_bytes = UINT64_MAX;
  ot_trace_add(t, &e);
  OT_ASSERT_ERR(ot_trace_check_budget(t, UINT64_MAX), OT_ERR_STATE, "trace event 0", "device bytes");
  ot_trace_clear(t);
  /* the summary's sums saturate instead of wrapping */
  e.device_bytes = 0;
  e.kind = OT_TRACE_UPLOAD;
  e.bytes = UINT64_MAX - 1;
  ot_trace_add(t, &e);
  ot_trace_add(t, &e);
  ot_trace_summary s = ot_trace_summarize(t);
  assert_int_equal(s.bytes_to_device, UINT64_MAX);
  assert_int_equal(s.uploads, 2);
  ot_trace_destroy(t);
}

/* Overlapping kernels (or transfers), as a file may claim: the time under
 * compute is measured on the union of each lane, so it never exceeds the
 * transfer time (it was 7 us of 5 here: found by fuzz_trace). */
static void test_overlap_union(void **state) {
  (void)state;
  ot_trace *t;
  assert_int_equal(ot_trace_create(&t), OT_OK);
  uint64_t z = ot_trace_t0(t);
  const struct {
    ot_trace_kind k;
    uint64_t a, b; /* us */
  } iv[] = {{OT_TRACE_KERNEL, 0, 5},  {OT_TRACE_KERNEL, 0, 5},  {OT_TRACE_KERNEL, 1, 6},  {OT_TRACE_UPLOAD, 1, 2},
            {OT_TRACE_UPLOAD, 1, 2},  {OT_TRACE_DOWNLOAD, 1, 2}, {OT_TRACE_UPLOAD, 4, 6}};
  for (size_t i = 0; i < sizeof iv / sizeof *iv; i++) {
    ot_trace_event e = {iv[i].k, OT_TRACE_RESIDENT_OK, 0, 0, 0, "x", z + iv[i].a * 1000, z + iv[i].b * 1000, 0, 0, 0, 0, 0};
    ot_trace_add(t, &e);
  }
  ot_trace_summary s = ot_trace_summarize(t);
  assert_true(fabs(s.transfer_s - 5e-6) < 1e-12);
  assert_true(fabs(s.kernel_s - 15e-6) < 1e-12);
  if (!(fabs(s.overlap_s - 3e-6) < 1e-12)) fail_msg("overlap %g s, want 3e-6 (the union of each lane)", s.overlap_s);
  ot_trace_destroy(t);
}

/* Devices 0 and 64 are different devices in the budget check (they shared a
 * counter slot once: 64 % 64). */
static void test_device_slots(void **state) {
  (void)state;
  ot_trace *t;
  assert_int_equal(ot_trace_create(&t), OT_OK);
  uint64_t now = ot_now_ns();
  ot_trace_event e[] = {
      {OT_TRACE_RUN, 0, 0, 0, 0, "r", now, now, 0, 0, 0, 0, 0},
      {OT_TRACE_RUN, OT_TRACE_STAGE, 0, 0, 64, "r", now, now, 0, 0, 0, 0, 0},
      {OT_TRACE_ALLOC, 0, 0, 0, 0, "a", now, now, 256, 256, 256, 0, 0},
      {OT_TRACE_ALLOC, 0, 0, 0, 64, "b", now, now, 256, 256, 256, 0, 0},
      {OT_TRACE_FREE, 0, 0, 0, 0, "a", now, now, 256, -256, 0, 0, 0},
      {OT_TRACE_FREE, 0, 0, 0, 64, "b", now, now, 256, -256, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof e / sizeof *e; i++) ot_trace_add(t, &e[i]);
  OT_ASSERT_OK(ot_trace_check_budget(t, 256));
  ot_trace_destroy(t);
}

static void test_document(void **state) {
  (void)state;
  const struct {
    const char *text, *want1, *want2;
  } cases[] = {
      {"[1,2,3]", "traceEvents", NULL},
      {"{\"traceEvents\":[],\"otherData\":{\"producer\":\"perfetto\",\"budget_bytes\":0}}", "producer", NULL},
      {"{\"traceEvents\":{},\"otherData\":{\"producer\":\"omptensor\",\"budget_bytes\":0}}", "traceEvents", NULL},
      {"{\"traceEvents\":[],\"otherData\":{\"producer\":\"omptensor\",\"budget_bytes\":\"1GB\"}}",
       "otherData.budget_bytes", "string"},
      {"{\"traceEvents\":[],\"otherData\":{\"producer\":\"omptensor\",\"budget_bytes\":-5}}",
       "otherData.budget_bytes", "-5"},
      {"{\"traceEvents\":[],\"otherData\":{\"producer\":\"omptensor\",\"budget_bytes\":1.5}}",
       "otherData.budget_bytes", "integer"},
      {"{\"traceEvents\":[],\"otherData\":{\"producer\":\"omptensor\"}}", "otherData.budget_bytes", "missing"},
      {"{\"traceEvents\":[7],\"otherData\":{\"producer\":\"omptensor\",\"budget_bytes\":0}}", "traceEvents[0]",
       "object"},
      {"{\"traceEvents\":[{\"ph\":\"M\"},\"x\"],\"otherData\":{\"producer\":\"omptensor\",\"budget_bytes\":0}}",
       "traceEvents[1]", "object"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "doc%zu.json", i);
    ot_write_text(dir, nm, cases[i].text);
    ot_tmp_path(path, sizeof path, dir, nm);
    ot_trace *t = (ot_trace *)1;
    OT_ASSERT_ERR(ot_trace_read_chrome(path, &t, NULL), OT_ERR_FORMAT, path, cases[i].want1,
                  cases[i].want2 ? cases[i].want2 : "");
    assert_null(t);
  }
  /* null is an unlimited budget; -1 is how earlier versions wrote it */
  const char *unlimited[] = {"null", "-1"};
  for (int i = 0; i < 2; i++) {
    char txt[128];
    snprintf(txt, sizeof txt, "{\"traceEvents\":[],\"otherData\":{\"producer\":\"omptensor\",\"budget_bytes\":%s}}",
             unlimited[i]);
    ot_write_text(dir, "unl.json", txt);
    ot_tmp_path(path, sizeof path, dir, "unl.json");
    ot_trace *t;
    uint64_t b = 0;
    OT_ASSERT_OK(ot_trace_read_chrome(path, &t, &b));
    assert_int_equal(b, UINT64_MAX);
    ot_trace_destroy(t);
  }
}

/* Not a regular file: refused at once (before this, a FIFO blocked the
 * reader forever: alarm() turns that hang into a failure). */
static void test_not_regular(void **state) {
  (void)state;
  ot_tmp_path(path, sizeof path, dir, "fifo.json");
  assert_int_equal(mkfifo(path, 0600), 0);
  alarm(60);
  ot_trace *t = (ot_trace *)1;
  OT_ASSERT_ERR(ot_trace_read_chrome(path, &t, NULL), OT_ERR_IO, path, "not a regular file");
  assert_null(t);
  ot_tmp_path(path, sizeof path, dir, "sub.json");
  assert_int_equal(mkdir(path, 0700), 0);
  OT_ASSERT_ERR(ot_trace_read_chrome(path, &t, NULL), OT_ERR_IO, path, "directory");
  alarm(0);
  ot_tmp_path(path, sizeof path, dir, "absent.json");
  OT_ASSERT_ERR(ot_trace_read_chrome(path, &t, NULL), OT_ERR_NOT_FOUND, path);
}

/* A real trace (a random program under its smallest budget, three runs)
 * written and read back: the same events, bit for bit; and a host-backend
 * trace, whose budget is unlimited, reads back unlimited. */
static void roundtrip(ot_backend b, uint64_t seed, int min_budget) {
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = b;
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&o, &ctx));
  ts_randprog *rp;
  OT_ASSERT_OK(ts_randprog_create(ctx, seed, &rp));
  ot_sched_opts so = ot_sched_opts_default();
  so.strategy = OT_STRATEGY_AGGRESSIVE;
  if (min_budget) OT_ASSERT_OK(ot_sched_min_budget(rp->p, &so.budget_bytes, NULL));
  ot_plan *plan;
  OT_ASSERT_OK(ot_sched_plan(ctx, rp->p, &so, &plan));
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  for (int r = 0; r < 3; r++) {
    ts_randprog_prepare_run(rp, r);
    OT_ASSERT_OK(ot_sched_run(plan, tr));
  }
  ot_tmp_path(path, sizeof path, dir, "real.json");
  OT_ASSERT_OK(ot_trace_write_chrome(tr, path));
  ot_trace *back;
  uint64_t budget;
  OT_ASSERT_OK(ot_trace_read_chrome(path, &back, &budget));
  assert_int_equal(budget, ot_trace_summarize(tr).budget);
  assert_int_equal(ot_trace_count(back), ot_trace_count(tr));
  for (size_t i = 0; i < ot_trace_count(tr); i++) {
    const ot_trace_event *x = ot_trace_event_at(tr, i), *y = ot_trace_event_at(back, i);
    assert_int_equal(x->kind, y->kind);
    assert_int_equal(x->flags, y->flags);
    assert_int_equal(x->run, y->run);
    assert_int_equal(x->op, y->op);
    assert_int_equal(x->device, y->device);
    assert_string_equal(x->name, y->name);
    assert_int_equal(x->start_ns, y->start_ns);
    assert_int_equal(x->end_ns, y->end_ns);
    assert_int_equal(x->issued_ns, y->issued_ns);
    assert_int_equal(x->bytes, y->bytes);
    assert_int_equal(x->block_delta, y->block_delta);
    assert_int_equal(x->device_bytes, y->device_bytes);
  }
  OT_ASSERT_OK(ot_trace_check_budget(back, budget));
  ot_trace_destroy(back);
  ot_trace_destroy(tr);
  ot_plan_destroy(plan);
  ts_randprog_destroy(rp);
  ot_ctx_destroy(ctx);
}

/* Marks (ot_trace_mark): written as global instant events, read back the
 * same; the summary and the budget check pass over them; an instant event
 * that is not a mark, or a mark that is not instant, is refused. */
static void test_marks(void **state) {
  (void)state;
  ot_trace *t;
  OT_ASSERT_OK(ot_trace_create(&t));
  uint64_t now = ot_now_ns();
  ot_trace_set_budget(t, 1024);
  OT_ASSERT_OK(ot_trace_mark(t, "prefill"));
  ot_trace_event e[] = {
      {OT_TRACE_RUN, 0, 0, -1, 0, "run", now, now, 0, 0, 0, 0, 0},
      {OT_TRACE_ALLOC, 0, 0, 0, 0, "a", now, now, 256, 256, 256, 0, 0},
      {OT_TRACE_FREE, OT_TRACE_DEAD, 0, 0, 0, "a", now, now, 256, -256, 0, 0, 0},
  };
  for (size_t i = 0; i < 3; i++) ot_trace_add(t, &e[i]);
  OT_ASSERT_OK(ot_trace_mark(t, "decode"));
  OT_ASSERT_OK(ot_trace_mark(NULL, "nothing"));
  assert_int_equal(ot_trace_count(t), 5);
  const ot_trace_event *m = ot_trace_event_at(t, 0);
  assert_int_equal(m->kind, OT_TRACE_MARK);
  assert_string_equal(m->name, "prefill");
  assert_int_equal(m->device, -1);
  assert_int_equal(m->start_ns, m->end_ns);
  assert_int_equal(ot_trace_event_at(t, 4)->run, 1); /* it belongs to the run that follows */
  OT_ASSERT_OK(ot_trace_check_budget(t, 1024));
  ot_trace_summary sm = ot_trace_summarize(t);
  assert_int_equal(sm.runs, 1);
  assert_int_equal(sm.current_device_bytes, 0);
  assert_int_equal(sm.peak_device_bytes, 256);

  char *text;
  OT_ASSERT_OK(ot_trace_chrome_text(t, &text));
  json_error_t err;
  json_t *root = json_loads(text, 0, &err), *ev = json_object_get(root, "traceEvents"), *x;
  size_t i;
  int marks = 0, counters = 0;
  json_array_foreach(ev, i, x) {
    const char *ph = json_string_value(json_object_get(x, "ph"));
    if (!strcmp(ph, "C")) counters++;
    if (strcmp(ph, "i")) continue;
    marks++;
    assert_string_equal(json_string_value(json_object_get(x, "s")), "g"); /* across every track */
    assert_string_equal(json_string_value(json_object_get(x, "cat")), "mark");
    assert_string_equal(json_string_value(json_object_get(x, "name")), marks == 1 ? "prefill" : "decode");
  }
  assert_int_equal(marks, 2);
  assert_int_equal(counters, 3); /* the run, the alloc, the free: none for a mark */
  ot_trace *back;
  uint64_t budget;
  OT_ASSERT_OK(ot_trace_read_chrome_text(text, strlen(text), "marks.json", &back, &budget));
  assert_int_equal(ot_trace_count(back), 5);
  for (size_t k = 0; k < 5; k++) {
    const ot_trace_event *a = ot_trace_event_at(t, k), *b = ot_trace_event_at(back, k);
    assert_int_equal(a->kind, b->kind);
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->device, b->device);
    assert_int_equal(a->run, b->run);
    assert_int_equal(a->start_ns, b->start_ns);
    assert_int_equal(a->end_ns, b->end_ns);
  }
  ot_trace_destroy(back);
  free(text);
  ot_trace_destroy(t);

  /* the phase and the kind must agree */
  json_t *mk = json_object_get(json_array_get(ev, 0), "ph");
  assert_string_equal(json_string_value(mk), "i");
  json_object_set_new(json_array_get(ev, 0), "ph", json_string("X"));
  json_object_set_new(json_array_get(ev, 0), "dur", json_real(0));
  dump(root, "mark_x.json");
  json_decref(root);
  OT_ASSERT_ERR(ot_trace_read_chrome(path, &back, &budget), OT_ERR_FORMAT, "traceEvents[0] (mark)",
                "a mark is an instant event");
  expect_bad(2, "ph", json_string("i"), "only marks are instant events");
}

static void test_roundtrip(void **state) {
  (void)state;
  roundtrip(ot_num_devices() > 0 ? OT_BACKEND_MAP : OT_BACKEND_HOST, 34, 1);
  roundtrip(OT_BACKEND_HOST, 35, 0); /* the host backend: budget unlimited (UINT64_MAX) */
}

/* Many events: all read, summed right (100 000 kernels of 1 us). */
static void test_many_events(void **state) {
  (void)state;
  ot_tmp_path(path, sizeof path, dir, "many.json");
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("{\"traceEvents\":[", f);
  enum { N = 100000 };
  for (int i = 0; i < N; i++)
    fprintf(f, "%s{\"cat\":\"kernel\",\"ph\":\"X\",\"ts\":%d.0,\"dur\":1.0,\"pid\":0,\"tid\":1,\"args\":{\"tensor\":"
               "\"op%d\",\"bytes\":0,\"op\":%d,\"run\":0,\"device_bytes\":0,\"block_delta\":0,\"flags\":1}}",
            i ? "," : "", 2 * i, i % 100, i % 100);
  fputs("],\"otherData\":{\"producer\":\"omptensor\",\"budget_bytes\":0}}", f);
  assert_int_equal(fclose(f), 0);
  ot_trace *t;
  OT_ASSERT_OK(ot_trace_read_chrome(path, &t, NULL));
  assert_int_equal(ot_trace_count(t), N);
  ot_trace_summary s = ot_trace_summarize(t);
  assert_int_equal(s.kernels, N);
  assert_true(s.kernel_s > 0.0999 && s.kernel_s < 0.1001);
  ot_trace_destroy(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_base_reads),    cmocka_unit_test(test_wrong_types), cmocka_unit_test(test_missing_fields),
      cmocka_unit_test(test_out_of_range),  cmocka_unit_test(test_sums_overflow), cmocka_unit_test(test_device_slots),
      cmocka_unit_test(test_overlap_union),
      cmocka_unit_test(test_document),      cmocka_unit_test(test_not_regular), cmocka_unit_test(test_roundtrip),
      cmocka_unit_test(test_many_events),   cmocka_unit_test(test_marks),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
