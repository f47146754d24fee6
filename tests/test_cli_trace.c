/* test_cli_trace.c — `omptensor trace summarize|plot` on hostile traces
 * (issue 14, class 5), through the command: each exits 2 with exactly one
 * line on stderr naming the file, the event (traceEvents[i]) and the field,
 * prints nothing on stdout, writes no picture, and does not hang on a FIFO.
 * Under the asan preset the command is instrumented (ASan, UBSan, LSan): a
 * sanitizer report changes the exit status. A valid hand-written trace
 * still summarizes (exit 0) and plots; the picture is read back: y-axis
 * ticks, the eviction lane, phase marks, the memory line in time order,
 * every device, and the PNG's header. */
#include <dlfcn.h>
#include <fcntl.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_test.h"
#include "ot_testio.h"

extern char **environ;

static char *dir;

typedef struct res {
  int status; /* exit status; -1 if killed */
  char *out, *err;
} res;

/* Runs `omptensor trace VERB FILE [-o SVG]`, killed after 60 s (a hang). */
static res run_trace(const char *verb, const char *file, const char *svg) {
  const char *exe = ot_test_cli();
  assert_non_null(exe);
  char outp[4096], errp[4096];
  ot_tmp_path(outp, sizeof outp, dir, "stdout.txt");
  ot_tmp_path(errp, sizeof errp, dir, "stderr.txt");
  const char *argv[] = {"timeout", "-s", "KILL", "60", exe, "trace", verb, file, svg ? "-o" : NULL, svg, NULL};
  posix_spawn_file_actions_t fa;
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int rc = posix_spawnp(&pid, "timeout", &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) fail_msg("cannot start timeout %s: %s", exe, strerror(rc));
  int ws;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  res r = {WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, ot_read_file(outp, NULL), ot_read_file(errp, NULL)};
  return r;
}

static void res_free(res *r) {
  free(r->out);
  free(r->err);
}

/* exit 2, nothing on stdout, one line on stderr holding the file and every
 * needle (NULL-terminated). */
static void expect_bad(const char *verb, const char *name, ...) {
  char file[4096], svg[4096];
  ot_tmp_path(file, sizeof file, dir, name);
  ot_tmp_path(svg, sizeof svg, dir, "out.svg");
  unlink(svg);
  res r = run_trace(verb, file, strcmp(verb, "plot") ? NULL : svg);
  size_t n = strlen(r.err);
  int one_line = n > 0 && r.err[n - 1] == '\n' && memchr(r.err, '\n', n - 1) == NULL;
  int ok = r.status == 2 && !r.out[0] && one_line && strstr(r.err, file) && access(svg, F_OK) != 0;
  va_list ap;
  va_start(ap, name);
  for (const char *w; (w = va_arg(ap, const char *));)
    if (!strstr(r.err, w)) {
      print_error("stderr lacks '%s'\n", w);
      ok = 0;
    }
  va_end(ap);
  if (!ok)
    fail_msg("omptensor trace %s %s: exit %d (want 2, one line naming the file), stdout '%s', stderr '%s'", verb, name,
             r.status, r.out, r.err);
  print_message("%s", r.err);
  res_free(&r);
}

#define HEAD "{\"traceEvents\":[{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"d\"}},"
#define TAIL "],\"otherData\":{\"producer\":\"omptensor\",\"budget_bytes\":4096}}"
/* an upload event with the given ts, dur and args.bytes (JSON text) */
#define UP(ts, dur, bytes)                                                                                     \
  "{\"cat\":\"upload\",\"ph\":\"X\",\"ts\":" ts ",\"dur\":" dur ",\"pid\":0,\"tid\":2,\"args\":{\"tensor\":" \
  "\"w\",\"bytes\":" bytes ",\"op\":0,\"run\":0,\"device_bytes\":256,\"block_delta\":256,\"flags\":0}}"
#define RUN                                                                                                    \
  "{\"cat\":\"run\",\"ph\":\"X\",\"ts\":0,\"dur\":0,\"pid\":0,\"tid\":1,\"args\":{\"tensor\":\"\",\"bytes\":0," \
  "\"op\":0,\"run\":0,\"device_bytes\":0,\"block_delta\":0,\"flags\":0}}"

static void test_hostile_traces(void **state) {
  (void)state;
  ot_write_text(dir, "ts.json", HEAD RUN "," UP("1e300", "1", "256") TAIL);
  ot_write_text(dir, "dur.json", HEAD RUN "," UP("1", "1e300", "256") TAIL);
  ot_write_text(dir, "neg.json", HEAD RUN "," UP("1", "1", "-256") TAIL);
  ot_write_text(dir, "str.json", HEAD RUN "," UP("1", "1", "\"256\"") TAIL);
  ot_write_text(dir, "big.json", HEAD RUN "," UP("1", "1", "9223372036854775807") "," UP("2", "1", "9223372036854775807")
                                     "," UP("3", "1", "9223372036854775807") TAIL);
  ot_write_text(dir, "missing.json",
                HEAD RUN ",{\"cat\":\"kernel\",\"ph\":\"X\",\"ts\":1,\"dur\":1,\"pid\":0,\"tid\":1,\"args\":{}}" TAIL);
  for (int plot = 0; plot < 2; plot++) {
    const char *verb = plot ? "plot" : "summarize";
    expect_bad(verb, "ts.json", "traceEvents[2]", "ts", "1e+300", (char *)NULL);
    expect_bad(verb, "dur.json", "traceEvents[2]", "dur", (char *)NULL);
    expect_bad(verb, "neg.json", "traceEvents[2]", "args.bytes", "-256", (char *)NULL);
    expect_bad(verb, "str.json", "traceEvents[2]", "args.bytes", "string", (char *)NULL);
    expect_bad(verb, "big.json", "traceEvents[4]", "args.bytes", (char *)NULL);
    expect_bad(verb, "missing.json", "traceEvents[2]", "args.tensor", "missing", (char *)NULL);
  }
  char p[4096];
  ot_tmp_path(p, sizeof p, dir, "fifo.json");
  assert_int_equal(mkfifo(p, 0600), 0);
  expect_bad("summarize", "fifo.json", "not a regular file", (char *)NULL);
  expect_bad("plot", "fifo.json", "not a regular file", (char *)NULL);
  ot_tmp_path(p, sizeof p, dir, "folder.json");
  assert_int_equal(mkdir(p, 0700), 0);
  expect_bad("summarize", "folder.json", "directory", (char *)NULL);
}

static void test_valid_trace(void **state) {
  (void)state;
  ot_write_text(dir, "ok.json", HEAD RUN "," UP("1.5", "2", "256") TAIL);
  char file[4096], svg[4096];
  ot_tmp_path(file, sizeof file, dir, "ok.json");
  res r = run_trace("summarize", file, NULL);
  if (r.status != 0 || !strstr(r.out, "budget check: device bytes never exceeded the budget"))
    fail_msg("summarize ok.json: exit %d, stdout '%s', stderr '%s'", r.status, r.out, r.err);
  res_free(&r);
  ot_tmp_path(svg, sizeof svg, dir, "ok.svg");
  r = run_trace("plot", file, svg);
  if (r.status != 0 || access(svg, F_OK) != 0)
    fail_msg("plot ok.json: exit %d, stdout '%s', stderr '%s'", r.status, r.out, r.err);
  res_free(&r);
  /* - is stdin for the trace (issue 43: it was a file named -); -o - is refused by name */
  const char *a1[] = {"trace", "summarize", "-", NULL};
  ot_cli_run_opts o = {.out_dir = dir, .cwd = dir, .stdin_path = file, .deadline_s = 60};
  ot_cli_res c = ot_test_cli_run_with(&o, a1);
  if (c.status != 0 || !strstr(c.out, "budget check: device bytes never exceeded the budget"))
    fail_msg("summarize -: exit %d, stdout '%s', stderr '%s'", c.status, c.out, c.err);
  ot_cli_res_free(&c);
  const char *a2[] = {"trace", "plot", "-", "-o", "-", NULL};
  c = ot_test_cli_run_with(&o, a2);
  if (c.status != 2 || !strstr(c.err, "-o -: the picture is a file written whole"))
    fail_msg("plot -o -: exit %d, stderr '%s'", c.status, c.err);
  ot_cli_res_free(&c);
}

/* An "X" event (JSON text) on device `pid`, issued at `issued` us. */
static void ev(char *out, size_t n, const char *cat, int pid, double ts, double dur, double issued, long long bytes,
               long long devbytes, long long delta, unsigned flags) {
  snprintf(out, n,
           "{\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":1,\"args\":{\"tensor\":\"t\","
           "\"bytes\":%lld,\"op\":0,\"run\":0,\"device_bytes\":%lld,\"block_delta\":%lld,\"flags\":%u,"
           "\"issued\":%.3f}},",
           cat, ts, dur, pid, bytes, devbytes, delta, flags, issued);
}

/* Appends to a growing JSON text. */
static void cat_to(char **buf, size_t *len, const char *piece) {
  size_t k = strlen(piece);
  *buf = realloc(*buf, *len + k + 1);
  assert_non_null(*buf);
  memcpy(*buf + *len, piece, k + 1);
  *len += k;
}

/* A trace over `ndev` devices with a 200000-byte budget (195 KiB): per
 * device a run, an upload issued at 1 us that ran at 50 us (after a later
 * alloc: the counters are out of order by start), a kernel, two
 * evictions, one clean drop, and a free; marks "prefill" and "decode". */
static void write_trace(const char *name, int ndev) {
  char *buf = NULL, e[512];
  size_t len = 0;
  cat_to(&buf, &len, "{\"traceEvents\":[");
  cat_to(&buf, &len, "{\"name\":\"prefill\",\"cat\":\"mark\",\"ph\":\"i\",\"s\":\"g\",\"ts\":0,\"pid\":-1,\"tid\":0,"
                     "\"args\":{\"tensor\":\"prefill\",\"bytes\":0,\"op\":-1,\"run\":0,\"device_bytes\":0,"
                     "\"block_delta\":0,\"flags\":0}},");
  for (int d = 0; d < ndev; d++) {
    ev(e, sizeof e, "run", d, 0, 0, 0, 0, 0, 0, 0), cat_to(&buf, &len, e);
    ev(e, sizeof e, "upload", d, 50, 10, 1, 100000, 100000, 100000, 0), cat_to(&buf, &len, e);
    ev(e, sizeof e, "alloc", d, 2, 0, 2, 50000, 150000, 50000, 0), cat_to(&buf, &len, e);
    ev(e, sizeof e, "kernel", d, 60, 20, 60, 0, 150000, 0, 1), cat_to(&buf, &len, e);
    ev(e, sizeof e, "free", d, 80, 0, 80, 50000, 100000, -50000, 8), cat_to(&buf, &len, e);   /* evicted */
    ev(e, sizeof e, "alloc", d, 81, 0, 81, 50000, 150000, 50000, 0), cat_to(&buf, &len, e);
    ev(e, sizeof e, "free", d, 90, 0, 90, 50000, 100000, -50000, 8), cat_to(&buf, &len, e);   /* evicted */
    ev(e, sizeof e, "free", d, 95, 0, 95, 100000, 0, -100000, 4), cat_to(&buf, &len, e);      /* dropped clean */
  }
  cat_to(&buf, &len, "{\"name\":\"decode\",\"cat\":\"mark\",\"ph\":\"i\",\"s\":\"g\",\"ts\":70,\"pid\":-1,\"tid\":0,"
                     "\"args\":{\"tensor\":\"decode\",\"bytes\":0,\"op\":-1,\"run\":1,\"device_bytes\":0,"
                     "\"block_delta\":0,\"flags\":0}}");
  cat_to(&buf, &len, "],\"otherData\":{\"producer\":\"omptensor\",\"budget_bytes\":200000}}");
  ot_write_text(dir, name, buf);
  free(buf);
}

/* How often `needle` occurs in s. */
static int count(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

/* The texts of <text class="CLS" ...>TEXT</text>, in order, into out[]. */
static int texts(const char *svg, const char *cls, char out[][64], int max) {
  char open[64];
  snprintf(open, sizeof open, "<text class=\"%s\"", cls);
  int n = 0;
  for (const char *p = svg; (p = strstr(p, open)) && n < max; p++) {
    const char *a = strchr(p, '>'), *b = a ? strstr(a, "</text>") : NULL;
    assert_non_null(b);
    snprintf(out[n++], 64, "%.*s", (int)(b - a - 1), a + 1);
  }
  return n;
}

static void plot_ok(const char *trace, const char *out) {
  char file[4096], pic[4096];
  ot_tmp_path(file, sizeof file, dir, trace);
  ot_tmp_path(pic, sizeof pic, dir, out);
  res r = run_trace("plot", file, pic);
  if (r.status != 0) fail_msg("plot %s -o %s: exit %d, stdout '%s', stderr '%s'", trace, out, r.status, r.out, r.err);
  res_free(&r);
}

static char *read_out(const char *name, size_t *n) {
  char p[4096];
  ot_tmp_path(p, sizeof p, dir, name);
  char *b = ot_read_file(p, n);
  assert_non_null(b);
  return b;
}

static void test_svg_picture(void **state) {
  (void)state;
  write_trace("one.json", 1);
  plot_ok("one.json", "one.svg");
  char *svg = read_out("one.svg", NULL);
  /* human units: 195 KiB, not 0.000 GiB; ticks at round steps up to the budget */
  assert_non_null(strstr(svg, "peak 146 KiB, budget 195 KiB"));
  assert_null(strstr(svg, "GiB"));
  char t[16][64];
  int n = texts(svg, "ytick", t, 16);
  const char *want[] = {"0", "50 KiB", "100 KiB", "150 KiB", "200 KiB"};
  assert_int_equal(n, 5);
  for (int i = 0; i < 5; i++) assert_string_equal(t[i], want[i]);
  n = texts(svg, "budget", t, 16);
  assert_int_equal(n, 1);
  assert_string_equal(t[0], "budget 195 KiB");
  /* the eviction lane: two evictions, one clean drop, each a mark in it */
  n = texts(svg, "lane", t, 16);
  assert_int_equal(n, 4);
  assert_string_equal(t[3], "evictions");
  assert_int_equal(count(svg, "<line class=\"evict\""), 2);
  assert_int_equal(count(svg, "<line class=\"drop\""), 1);
  /* the phases marked, labelled, in order */
  n = texts(svg, "mark", t, 16);
  assert_int_equal(n, 2);
  assert_string_equal(t[0], "prefill");
  assert_string_equal(t[1], "decode");
  assert_int_equal(count(svg, "<line class=\"run\""), 1);
  /* the memory line never runs backwards in time, though the upload
   * started (50 us) after the alloc issued at 2 us */
  const char *pts = strstr(svg, "<polyline class=\"memory\"");
  assert_non_null(pts);
  pts = strstr(pts, "points=\"") + 8;
  double last_x = -1, x, y;
  int k, used, npts = 0;
  while ((k = sscanf(pts, "%lf,%lf%n", &x, &y, &used)) == 2) {
    if (x < last_x) fail_msg("memory line point %d at x = %.2f after x = %.2f", npts, x, last_x);
    last_x = x, pts += used, npts++;
  }
  assert_int_equal(npts, 2 + 2 * 7); /* start, end and a step per counter sample (run, upload, alloc x2, free x3) */
  free(svg);
}

/* 20 devices: every one gets its block (at most 16 were drawn, silently). */
static void test_svg_many_devices(void **state) {
  (void)state;
  write_trace("twenty.json", 20);
  plot_ok("twenty.json", "twenty.svg");
  char *svg = read_out("twenty.svg", NULL);
  char t[32][64];
  int n = texts(svg, "device", t, 32);
  assert_int_equal(n, 20);
  for (int d = 0; d < 20; d++) {
    char want[32];
    snprintf(want, sizeof want, "device %d", d);
    assert_string_equal(t[d], want);
  }
  assert_non_null(strstr(svg, "20 devices"));
  assert_int_equal(count(svg, "<line class=\"evict\""), 40);
  free(svg);
}

static uint32_t be32(const unsigned char *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }

/* Whether librsvg can be loaded here, as trace plot loads it (trace_png.c:
 * dlopen at run time; a GPU machine that carries only the runtime has none).
 * Asked in a child process: loading and unloading librsvg here leaves glib's
 * allocations behind an unloaded module, which LeakSanitizer reports against
 * this test (_exit skips its check in the child). */
static int have_librsvg(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(dlopen("librsvg-2.so.2", RTLD_NOW | RTLD_LOCAL) ? 0 : 1);
  int status = 0;
  assert_true(pid > 0 && waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* -o x.png: a PNG (signature, IHDR first, the SVG's size); another
 * extension is refused before anything is written. Without librsvg at run
 * time the PNG is refused by name, saying how to get it, and the PNG's
 * checks are skipped by name (issue 43: they failed on the H200). */
static void test_png_and_extensions(void **state) {
  (void)state;
  write_trace("png.json", 2);
  char file[4096], pic[4096];
  ot_tmp_path(file, sizeof file, dir, "png.json");
  const char *bad[] = {"p.jpg", "p.svg.gz", "noext"};
  for (int i = 0; i < 3; i++) {
    ot_tmp_path(pic, sizeof pic, dir, bad[i]);
    res r = run_trace("plot", file, pic);
    size_t m = strlen(r.err);
    if (r.status != 2 || r.out[0] || !m || memchr(r.err, '\n', m - 1) || !strstr(r.err, pic) ||
        !strstr(r.err, "FILE.svg or FILE.png") || access(pic, F_OK) == 0)
      fail_msg("plot -o %s: exit %d (want 2, one line naming it, no file), stdout '%s', stderr '%s'", bad[i], r.status,
               r.out, r.err);
    print_message("%s", r.err);
    res_free(&r);
  }
  plot_ok("png.json", "p.svg");
  char *svg = read_out("p.svg", NULL);
  int w = 0, h = 0;
  const char *at = strstr(svg, "width=\"");
  assert_non_null(at);
  assert_int_equal(sscanf(at, "width=\"%d\" height=\"%d\"", &w, &h), 2);
  free(svg);
  ot_tmp_path(pic, sizeof pic, dir, "p.png");
  res r = run_trace("plot", file, pic);
#ifndef OT_TEST_HAVE_PNG
  /* a build without librsvg's headers refuses it, saying how to get it */
  if (r.status == 2 && strstr(r.err, "librsvg2-dev")) {
    res_free(&r);
    skip();
  }
#endif
  if (!have_librsvg()) {
    if (r.status != 2 || !strstr(r.err, "librsvg at run time") || !strstr(r.err, "FILE.svg") ||
        access(pic, F_OK) == 0)
      fail_msg("plot -o p.png without librsvg: exit %d (want 2 naming librsvg, no file), stderr '%s'", r.status,
               r.err);
    res_free(&r);
    print_message("test_png_and_extensions: the PNG checks skipped: librsvg-2.so.2 is not installed here (the "
                  "refusal was checked)\n");
    skip();
  }
  if (r.status != 0) fail_msg("plot -o p.png: exit %d, stdout '%s', stderr '%s'", r.status, r.out, r.err);
  res_free(&r);
  size_t n;
  unsigned char *png = (unsigned char *)read_out("p.png", &n);
  assert_true(n > 33);
  assert_memory_equal(png, "\x89PNG\r\n\x1a\n", 8);
  assert_int_equal(be32(png + 8), 13); /* IHDR's length */
  assert_memory_equal(png + 12, "IHDR", 4);
  assert_int_equal(be32(png + 16), (uint32_t)w);
  assert_int_equal(be32(png + 20), (uint32_t)h);
  free(png);
  /* the same name in capitals is a PNG too */
  plot_ok("png.json", "P2.PNG");
}

static int setup(void **state) {
  (void)state;
  dir = ot_tmpdir_create();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  ot_tmpdir_remove(dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_hostile_traces), cmocka_unit_test(test_valid_trace),
                                     cmocka_unit_test(test_svg_picture), cmocka_unit_test(test_svg_many_devices),
                                     cmocka_unit_test(test_png_and_extensions)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
