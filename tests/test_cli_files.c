/* test_cli_files.c — hostile paths through the `omptensor` command (issue
 * 14, classes 3, 4 and 6), each run with a deadline: a command that does
 * not end in time is killed and fails the test.
 *
 *   - a FIFO as model.safetensors, config.json, --config, --data,
 *     --prompt-ids-file or a trace: exit 2 at once, one error line naming the
 *     path and "FIFO" (it used to block forever);
 *   - a directory, a dangling symbolic link or a loop of links in place of
 *     model.safetensors: three different messages naming the path (all
 *     were "no model.safetensors here");
 *   - 200 KB of '[' as --config: exit 2 naming the file, line and depth,
 *     well before the deadline (libyaml took 23 s);
 *   - demo --size 1000TB: exit 2 naming --size, the bytes and what is
 *     available, before allocating anything (it allocated until killed);
 *   - outputs checked before the work: train --save into a path under a
 *     file, train --trace naming a directory, run --logits-out into a
 *     missing folder: exit 2 before the first step or the load (train used
 *     to find a bad --save after its last step); train --data -, --save -
 *     and --trace - refused by name (they were files named -);
 *   - train --save over a checkpoint keeps its other files and leaves no
 *     temporaries. */
#include <setjmp.h>
#include <signal.h>
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

#include "cli_test.h"
#include "ot_testio.h"


static const char *cli_path, *data_dir;
static char *tmp;

/* A command that has not ended after this long is taken as hung. The asan
 * build starts slower; every case here ends in well under a second. */
#define DEADLINE_S 20

typedef ot_cli_res cli_res;

/* Runs `omptensor ARGS...` (NULL-terminated) in tmp, without OMPTENSOR_*
 * from our environment, one OpenMP thread; killed at the deadline
 * (support/cli_test.c). */
static cli_res cli_v(const char *first, ...) {
  const char *args[64];
  int n = 0;
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a; a = va_arg(ap, const char *)) {
    assert_true(n < 63);
    args[n++] = a;
  }
  va_end(ap);
  args[n] = NULL;
  return ot_test_cli_run(tmp, NULL, DEADLINE_S, args);
}
#define cli(...) cli_v(__VA_ARGS__, (const char *)NULL)

static void cli_free(cli_res *r) { ot_cli_res_free(r); }

/* "load: 40%": the plain progress lines of a non-terminal. */
static int is_progress_line(const char *l, size_t n) {
  const char *c = memchr(l, ':', n);
  if (!c || c == l || (size_t)(c - l) + 3 > n || c[1] != ' ') return 0;
  for (const char *p = l; p < c; p++)
    if (!(*p >= 'a' && *p <= 'z')) return 0;
  return l[n - 1] == '%';
}

/* The library's one-time notices ("omptensor: no GPU: ..."); whether an
 * error after them is one line is the CLI's own test (test_cli.c). */
static int is_notice_line(const char *l, size_t n) { return n > 11 && !strncmp(l, "omptensor: ", 11); }

/* Exit 2 in time, nothing on stdout, one error line on stderr (besides
 * progress and notices) holding every needle; returns the line (malloc'd). */
static char *expect_bad_(cli_res r, const char *what, ...) {
  int ok = !r.hung && r.status == 2 && r.signal == 0 && r.out[0] == '\0';
  const char *line = NULL;
  size_t line_len = 0;
  int lines = 0;
  for (const char *p = r.err; ok && *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (!(is_progress_line(p, len) || is_notice_line(p, len))) {
      lines++;
      line = p;
      line_len = len;
    }
    p += len + (e ? 1 : 0);
  }
  ok = ok && lines == 1 && !strncmp(line, "omptensor ", 10);
  char *msg = ok ? strndup(line, line_len) : NULL;
  va_list ap;
  va_start(ap, what);
  const char *needle;
  while (ok && (needle = va_arg(ap, const char *)))
    if (!strstr(msg, needle)) {
      print_message("%s: the error does not mention '%s'\n", what, needle);
      ok = 0;
    }
  va_end(ap);
  if (!ok) {
    print_message("%s: exit %d signal %d%s after %.1f s\n--- stdout\n%s--- stderr\n%s---\n", what, r.status, r.signal,
                  r.hung ? " (killed at the deadline: it hung)" : "", r.seconds, r.out, r.err);
    cli_free(&r);
    free(msg);
    fail_msg("%s: expected exit 2 in time, no stdout and a one-line error", what);
  }
  print_message("  ok %-28s %.2f s  %s\n", what, r.seconds, msg);
  cli_free(&r);
  return msg;
}
#define expect_bad(r, what, ...) free(expect_bad_((r), (what), __VA_ARGS__, (const char *)NULL))

static int setup(void **state) {
  (void)state;
  cli_path = ot_test_cli();
  data_dir = getenv("OT_TEST_DATA");
  if (!cli_path || !data_dir) return -1;
  tmp = ot_tmpdir_create();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  ot_tmpdir_remove(tmp);
  tmp = NULL;
  return 0;
}

static const char *model(const char *name) {
  static char buf[4][4096];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/models/%s", data_dir, name);
  return buf[k];
}

static void sh(const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  if (system(cmd) != 0) fail_msg("setup command failed: %s", cmd);
}

/* An llm.c .bin of n zero tokens. */
static void write_tokens(const char *name, int n) {
  int32_t h[256] = {20240520, 1, n};
  size_t bytes = sizeof h + 2 * (size_t)n;
  unsigned char *b = calloc(1, bytes);
  assert_non_null(b);
  memcpy(b, h, sizeof h);
  ot_write_bytes(tmp, name, b, bytes);
  free(b);
}

static void fifo_inputs(void **state) {
  (void)state;
  sh("cd '%s' && mkdir m c && cp '%s/config.json' m/ && mkfifo m/model.safetensors && "
     "cp '%s/model.safetensors' c/ && mkfifo c/config.json fifo.yaml fifo.bin fifo.txt fifo.json",
     tmp, model("llama_gqa"), model("llama_gqa"));
  expect_bad(cli("run", "m", "--prompt-ids", "1,2", "--max-new-tokens", "1"), "run: weights a FIFO",
             "m/model.safetensors", "FIFO");
  expect_bad(cli("inspect", "m/model.safetensors"), "inspect: a FIFO", "m/model.safetensors", "FIFO");
  expect_bad(cli("run", "c", "--prompt-ids", "1,2", "--max-new-tokens", "1"), "run: config.json a FIFO",
             "c/config.json", "FIFO");
  expect_bad(cli("run", model("llama_gqa"), "--prompt-ids", "1,2", "--max-new-tokens", "1", "--config", "fifo.yaml"),
             "run: --config a FIFO", "fifo.yaml", "FIFO");
  expect_bad(cli("train", model("gpt2_small"), "--data", "fifo.bin", "--steps", "1"), "train: --data a FIFO",
             "fifo.bin", "FIFO");
  expect_bad(cli("run", model("llama_gqa"), "--prompt-ids-file", "fifo.txt", "--max-new-tokens", "1"),
             "run: --prompt-ids-file a FIFO", "fifo.txt", "FIFO");
  expect_bad(cli("trace", "summarize", "fifo.json"), "trace summarize: a FIFO", "fifo.json", "FIFO");
}

static void weights_path_kinds(void **state) {
  (void)state;
  const char *cfg = model("llama_gqa");
  sh("cd '%s' && for d in d l s n; do mkdir $d && cp '%s/config.json' $d/; done && mkdir d/model.safetensors && "
     "ln -s gone.safetensors l/model.safetensors && ln -s model.safetensors s/model.safetensors",
     tmp, cfg);
  char *a = expect_bad_(cli("run", "d", "--prompt-ids", "1", "--max-new-tokens", "1"), "directory as weights",
                        "d/model.safetensors", "directory", (const char *)NULL);
  char *b = expect_bad_(cli("run", "l", "--prompt-ids", "1", "--max-new-tokens", "1"), "dangling link as weights",
                        "l/model.safetensors", "gone.safetensors", "dangling", (const char *)NULL);
  char *c = expect_bad_(cli("run", "s", "--prompt-ids", "1", "--max-new-tokens", "1"), "link loop as weights",
                        "s/model.safetensors", "loop", (const char *)NULL);
  expect_bad(cli("run", "n", "--prompt-ids", "1", "--max-new-tokens", "1"), "no weights", "n", "no model.safetensors");
  expect_bad(cli("inspect", "l"), "inspect: dangling link", "l/model.safetensors", "dangling");
  assert_string_not_equal(a, b);
  assert_string_not_equal(b, c);
  assert_string_not_equal(a, c);
  free(a);
  free(b);
  free(c);
}

static void yaml_too_deep(void **state) {
  (void)state;
  size_t n = 200000;
  char *deep = malloc(n + 1);
  assert_non_null(deep);
  memset(deep, '[', n);
  deep[n] = '\n';
  ot_write_bytes(tmp, "deep.yaml", deep, n + 1);
  free(deep);
  expect_bad(cli("run", model("llama_gqa"), "--prompt-ids", "1", "--max-new-tokens", "1", "--config", "deep.yaml"),
             "--config 200 KB of [", "deep.yaml:1:65", "nested more than 64 levels");
}

static void demo_size_checked(void **state) {
  (void)state;
  expect_bad(cli("demo", "--size", "1000TB"), "demo --size 1000TB", "--size 1000TB", "bytes", "available");
}

static void outputs_checked_first(void **state) {
  (void)state;
  write_tokens("tok.bin", 200);
  ot_write_text(tmp, "afile", "x");
  sh("mkdir '%s/adir'", tmp);
  const char *g = model("gpt2_small");
  expect_bad(cli("train", g, "--data", "tok.bin", "--steps", "1", "--batch", "1", "--seq", "16", "--save", "afile/ck"),
             "train --save under a file", "--save", "afile/ck");
  expect_bad(cli("train", g, "--data", "tok.bin", "--steps", "1", "--batch", "1", "--seq", "16", "--save", "afile"),
             "train --save a file", "--save", "afile", "regular file");
  expect_bad(cli("train", g, "--data", "tok.bin", "--steps", "1", "--batch", "1", "--seq", "16", "--trace", "adir"),
             "train --trace a directory", "--trace", "adir", "directory");
  cli_res r = cli("run", model("llama_gqa"), "--prompt-ids", "1", "--max-new-tokens", "1", "--logits-out", "no/l.npy");
  int loaded = strstr(r.err, "load:") != NULL;
  expect_bad(r, "run --logits-out, no folder", "--logits-out", "no/l.npy", "does not exist");
  assert_false(loaded); /* refused before the weights were read */
  /* - is stdin or stdout where a stream can be; an input read in place or an output written whole is refused by
   * name (issue 43: they were files named -) */
  expect_bad(cli("train", g, "--data", "-", "--steps", "1"), "train --data -", "--data -", "not from a stream");
  expect_bad(cli("train", g, "--data", "tok.bin", "--steps", "1", "--save", "-"), "train --save -", "--save -",
             "not a stream");
  expect_bad(cli("train", g, "--data", "tok.bin", "--steps", "1", "--batch", "1", "--seq", "16", "--trace", "-"),
             "train --trace -", "--trace -", "not a stream");
  expect_bad(cli("demo", "--trace", "-"), "demo --trace -", "--trace -", "not a stream");
  char dash[4096];
  assert_int_equal(access(ot_tmp_path(dash, sizeof dash, tmp, "-"), F_OK), -1);
}

static void train_save_keeps_files(void **state) {
  (void)state;
  write_tokens("tok.bin", 200);
  const char *g = model("gpt2_small");
  for (int i = 0; i < 2; i++) {
    cli_res r = cli("train", g, "--data", "tok.bin", "--steps", "1", "--batch", "1", "--seq", "16", "--save", "out/ck");
    if (r.status != 0) fail_msg("train --save: exit %d\n%s", r.status, r.err);
    cli_free(&r);
    if (i == 0) ot_write_text(tmp, "out/ck/tokenizer.json", "{}");
  }
  char p[4096];
  struct stat st;
  assert_int_equal(stat(ot_tmp_path(p, sizeof p, tmp, "out/ck/tokenizer.json"), &st), 0);
  assert_int_equal(stat(ot_tmp_path(p, sizeof p, tmp, "out/ck/model.safetensors"), &st), 0);
  sh("cd '%s/out' && test \"$(ls -A)\" = ck", tmp); /* no temporaries beside it */
  cli_res r = cli("run", "out/ck", "--prompt-ids", "1,2", "--max-new-tokens", "2");
  if (r.status != 0) fail_msg("run on the saved checkpoint: exit %d\n%s", r.status, r.err);
  cli_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(fifo_inputs, setup, teardown),
      cmocka_unit_test_setup_teardown(weights_path_kinds, setup, teardown),
      cmocka_unit_test_setup_teardown(yaml_too_deep, setup, teardown),
      cmocka_unit_test_setup_teardown(demo_size_checked, setup, teardown),
      cmocka_unit_test_setup_teardown(outputs_checked_first, setup, teardown),
      cmocka_unit_test_setup_teardown(train_save_keeps_files, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
