/* test_cli_jobfile.c — a batch job's files without a model (issue 43): the
 * command's reader of IN and OUT (src/cli/jobfile.c, built into this test).
 *
 *   - the cost of reading IN and OUT is bounded by their size: 100 000
 *     one-token lines take at most a few hash probes each (the duplicate-id
 *     check compared every line with every earlier one: 5 * 10^9 string
 *     comparisons, more than 120 s under ASan);
 *   - a repeated id is refused with both line numbers;
 *   - OUT is read only when it is this job's result file (jobfile.h): a
 *     binary file, text without a complete line, another job's results, or
 *     the prompts themselves are refused, naming the file and the line; an
 *     empty file (a job killed before its first line) and a cut last line
 *     are read; result text holding U+0000 is read back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobfile.h"
#include "ot_testio.h"

static ot_hf_config cfg;
static char last_bad[1024], all_bad[4096]; /* the last refused line; all of them, a line each */

static void on_bad(void *user, long line, const char *why) {
  (void)user;
  snprintf(last_bad, sizeof last_bad, "%ld: %s", line, why);
  const size_t n = strlen(all_bad);
  snprintf(all_bad + n, sizeof all_bad - n, "%s\n", last_bad);
}

static ot_cli_jobs jobs(void) {
  memset(&cfg, 0, sizeof cfg);
  cfg.vocab_size = 256;
  cfg.max_position_embeddings = 128;
  last_bad[0] = all_bad[0] = '\0';
  return (ot_cli_jobs){.model = "tiny", .cfg = &cfg, .max_new = 4, .max_new_from = "--max-new-tokens",
                       .on_bad = on_bad};
}

/* A growing text buffer. */
typedef struct text {
  char *s;
  size_t n, cap;
} text;

static void add(text *t, const char *fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  assert_true(k > 0 && (size_t)k < sizeof line);
  if (t->n + (size_t)k + 1 > t->cap) {
    t->cap = 2 * (t->n + (size_t)k + 1);
    t->s = realloc(t->s, t->cap);
    assert_non_null(t->s);
  }
  memcpy(t->s + t->n, line, (size_t)k + 1);
  t->n += (size_t)k;
}

enum { N_LINES = 100000 };

/* The cost of reading a job grows with its lines: each id costs a bounded
 * number of probes of the id table (growing it included), whatever the
 * number of lines. */
static void test_cost_is_linear(void **state) {
  (void)state;
  text in = {0}, out = {0};
  for (int i = 0; i < N_LINES; i++) add(&in, "{\"id\": %d, \"prompt_ids\": [%d]}\n", i, i % 256);
  add(&in, "{\"id\": 17, \"prompt_ids\": [1]}\n"); /* a repeat, the last line */
  ot_cli_jobs J = jobs();
  OT_ASSERT_OK(ot_cli_jobs_read(&J, in.s, in.n));
  assert_int_equal(J.n, N_LINES);
  assert_int_equal(J.bad, 1);
  assert_string_equal(last_bad, "100001: id 17 repeats line 18's; ids are how a rerun knows what is done");
  const uint64_t per_line = 8;
  if (J.ids.probes > per_line * (uint64_t)J.lines)
    fail_msg("reading %ld lines took %llu probes of the id table, more than %llu per line", J.lines,
             (unsigned long long)J.ids.probes, (unsigned long long)per_line);
  /* OUT with every other id: read at the same bounded cost */
  for (int i = 0; i < N_LINES; i += 2) add(&out, "{\"id\":%d,\"prompt_tokens\":1,\"tokens\":[5]}\n", i);
  unsigned char *done = calloc(J.n, 1);
  size_t keep = 0;
  const uint64_t before = J.ids.probes;
  OT_ASSERT_OK(ot_cli_out_scan(&J, "out.jsonl", out.s, out.n, done, &keep));
  assert_int_equal(keep, out.n);
  for (int i = 0; i < N_LINES; i++) assert_int_equal(done[i], i % 2 == 0);
  if (J.ids.probes - before > per_line * (N_LINES / 2))
    fail_msg("reading %d result lines took %llu probes", N_LINES / 2, (unsigned long long)(J.ids.probes - before));
  free(done);
  ot_cli_jobs_free(&J);
  free(in.s);
  free(out.s);
}

/* The job of three lines that the OUT cases below are checked against:
 * ids "a", 7 and the line number 3. */
static const char job_in[] = "{\"id\": \"a\", \"prompt_ids\": [1, 2]}\n"
                             "{\"id\": 7, \"prompt_ids\": [3], \"max_new_tokens\": 2}\n"
                             "{\"prompt_ids\": [4]}\n";

static ot_status scan(const char *out, size_t n, unsigned char done[3], size_t *keep) {
  ot_cli_jobs J = jobs();
  OT_ASSERT_OK(ot_cli_jobs_read(&J, job_in, strlen(job_in)));
  assert_int_equal(J.n, 3);
  ot_status st = ot_cli_out_scan(&J, "out.jsonl", out, n, done, keep);
  ot_cli_jobs_free(&J);
  return st;
}

#define SCAN_REFUSED(lit, ...)                                                                                         \
  do {                                                                                                                 \
    unsigned char d_[3];                                                                                               \
    size_t k_ = 12345;                                                                                                 \
    OT_ASSERT_ERR(scan(lit, sizeof lit - 1, d_, &k_), OT_ERR_FORMAT, "out.jsonl", __VA_ARGS__);                        \
    assert_int_equal(k_, 12345); /* nothing to keep or cut: the file is not touched */                                 \
  } while (0)

static void test_out_not_this_jobs(void **state) {
  (void)state;
  /* a binary file (a checkpoint): it used to be cut at its last newline */
  SCAN_REFUSED("\x93NUMPY\x01\x00v\x00{'descr': '<f4'}\n\x00\x00\x80?\x00\x00", "out.jsonl:1 is not a result line",
               "not JSON", "left as it is");
  /* text without a complete line: it used to be cut to 0 bytes */
  SCAN_REFUSED("hello", "5 bytes and no complete line", "left as it is");
  SCAN_REFUSED("{\"id\":\"zz\",\"prompt_tok", "no complete line");
  /* the prompts themselves: lines without "tokens" */
  SCAN_REFUSED("{\"id\": \"a\", \"prompt_ids\": [1, 2]}\n", "out.jsonl:1", "no \"tokens\" array");
  /* another job's results */
  SCAN_REFUSED("{\"id\":\"a\",\"tokens\":[1]}\n{\"id\":\"b\",\"tokens\":[1]}\n", "out.jsonl:2",
               "id \"b\" is not one of the prompts' ids");
  SCAN_REFUSED("[1, 2]\n", "out.jsonl:1", "not a JSON object");
  SCAN_REFUSED("\n", "out.jsonl:1", "not JSON");
}

static void test_out_this_jobs(void **state) {
  (void)state;
  unsigned char done[3];
  size_t keep = 0;
  /* empty: a job killed before its first line */
  OT_ASSERT_OK(scan("", 0, done, &keep));
  assert_int_equal(keep, 0);
  assert_true(!done[0] && !done[1] && !done[2]);
  /* a first line cut inside the write: it begins as this job's lines do */
  static const char cut1[] = "{\"id\":7,\"prompt_tokens\":1,\"tok";
  OT_ASSERT_OK(scan(cut1, sizeof cut1 - 1, done, &keep));
  assert_int_equal(keep, 0);
  assert_true(!done[0] && !done[1] && !done[2]);
  /* whole lines, one with U+0000 in its text, then a cut one */
  static const char two[] = "{\"id\":3,\"tokens\":[1],\"text\":\"a\\u0000b\"}\n"
                            "{\"id\":\"a\",\"tokens\":[]}\n{\"id\":7,\"to";
  OT_ASSERT_OK(scan(two, sizeof two - 1, done, &keep));
  assert_int_equal(keep, strchr(strchr(two, '\n') + 1, '\n') + 1 - two);
  assert_true(done[0] && !done[1] && done[2]);
}

/* Lines of IN: U+0000 in a prompt is text like any other; a bad
 * max_new_tokens is named as the line's field, not as the flag. */
static void test_in_lines(void **state) {
  (void)state;
  ot_cli_jobs J = jobs();
  static const char in[] = "{\"id\": \"n\", \"prompt\": \"a\\u0000b\"}\n"
                           "{\"id\": \"m\", \"prompt_ids\": [1, 2, 3], \"max_new_tokens\": 126}\n"
                           "{\"id\": \"d\", \"prompt_ids\": [1, 2, 3]}\n";
  cfg.max_position_embeddings = 128;
  J.max_new = 126;
  OT_ASSERT_OK(ot_cli_jobs_read(&J, in, sizeof in - 1));
  assert_int_equal(J.n, 0);
  assert_int_equal(J.bad, 3);
  if (!strstr(all_bad, "1: a text prompt needs the model's tokenizer.json")) fail_msg("refused: %s", all_bad);
  if (!strstr(all_bad, "2: \"max_new_tokens\" 126: 3 prompt + 126")) fail_msg("refused: %s", all_bad);
  assert_string_equal(last_bad, "3: --max-new-tokens 126: 3 prompt + 126 new tokens exceed the 128 positions of tiny "
                                "(max_position_embeddings); generate at most 125");
  ot_cli_jobs_free(&J);
  /* a string id holding U+0000 is an id like any other, matched in OUT */
  J = jobs();
  static const char nul[] = "{\"id\": \"a\\u0000b\", \"prompt_ids\": [1]}\n";
  OT_ASSERT_OK(ot_cli_jobs_read(&J, nul, sizeof nul - 1));
  assert_int_equal(J.n, 1);
  static const char res[] = "{\"id\":\"a\\u0000b\",\"tokens\":[2],\"text\":\"\\u0000\"}\n";
  unsigned char done[1] = {0};
  size_t keep = 0;
  OT_ASSERT_OK(ot_cli_out_scan(&J, "out.jsonl", res, sizeof res - 1, done, &keep));
  assert_int_equal(done[0], 1);
  ot_cli_jobs_free(&J);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cost_is_linear),
      cmocka_unit_test(test_out_not_this_jobs),
      cmocka_unit_test(test_out_this_jobs),
      cmocka_unit_test(test_in_lines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
