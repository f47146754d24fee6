/* test_cli_trace.c — `omptensor trace summarize|plot` on hostile traces
 * (issue 14, class 5), through the command: each exits 2 with exactly one
 * line on stderr naming the file, the event (traceEvents[i]) and the field,
 * prints nothing on stdout, writes no picture, and does not hang on a FIFO.
 * Under the asan preset the command is instrumented (ASan, UBSan, LSan): a
 * sanitizer report changes the exit status. A valid hand-written trace
 * still summarizes (exit 0) and plots. */
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
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_hostile_traces), cmocka_unit_test(test_valid_trace)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
