/* test_cli_tokenize.c — `omptensor tokenize` and `detokenize` on the
 * reference tokenizers of tests/data/tokenizers: the ids Hugging Face
 * `tokenizers` gives (expected.json), text from a flag, a file and standard
 * input, --json, the round trip, and bad input (exit 2 naming the file,
 * byte or id). */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_test.h"
#include "ot_testio.h"

static char *tmp, model[4096];
static json_t *ref;

static int setup(void **state) {
  (void)state;
  const char *d = getenv("OT_TEST_DATA");
  if (!d || !ot_test_cli()) return -1;
  snprintf(model, sizeof model, "%s/tokenizers/llama3_style", d);
  char path[4200];
  snprintf(path, sizeof path, "%s/expected.json", model);
  ref = json_load_file(path, 0, NULL);
  tmp = ot_tmpdir_create();
  return ref && tmp ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  json_decref(ref);
  ot_tmpdir_remove(tmp);
  return 0;
}

/* The reference case for `text`. */
static const json_t *case_of(const char *text) {
  size_t i;
  const json_t *c;
  json_array_foreach(json_object_get(ref, "cases"), i, c) if (!strcmp(json_string_value(json_object_get(c, "text")), text)) return c;
  fail_msg("no reference case for \"%s\"", text);
  return NULL;
}

static void ids_line(const json_t *ids, char *buf, size_t cap) {
  buf[0] = 0;
  size_t i;
  const json_t *v;
  json_array_foreach(ids, i, v) snprintf(buf + strlen(buf), cap - strlen(buf), "%s%lld", i ? "," : "", (long long)json_integer_value(v));
  snprintf(buf + strlen(buf), cap - strlen(buf), "\n");
}

static ot_cli_res run(const char *stdin_path, const char *const *args) { return ot_test_cli_run(tmp, stdin_path, 30, args); }

static void test_tokenize_matches_hf(void **state) {
  (void)state;
  static const char *const texts[] = {"Hello, world!", "emoji 😀 👍🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷 heart ❤️",
                                      "tabs\tand\t\tspaces    runs\n\n\nnewlines"};
  for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
    const json_t *c = case_of(texts[k]);
    char want[8192];
    /* from the flag, with the template's special tokens */
    ids_line(json_object_get(c, "ids_special"), want, sizeof want);
    const char *a1[] = {"tokenize", model, "--text", texts[k], NULL};
    ot_cli_res r = run(NULL, a1);
    if (r.status != 0 || strcmp(r.out, want)) fail_msg("tokenize \"%s\": exit %d, stdout '%s', want '%s' (stderr %s)", texts[k], r.status, r.out, want, r.err);
    ot_cli_res_free(&r);
    /* from a file and from standard input, without them */
    ot_write_text(tmp, "in.txt", texts[k]);
    char in[4200];
    ot_tmp_path(in, sizeof in, tmp, "in.txt");
    ids_line(json_object_get(c, "ids"), want, sizeof want);
    const char *a2[] = {"tokenize", model, "--text-file", in, "--no-special", NULL};
    r = run(NULL, a2);
    if (r.status != 0 || strcmp(r.out, want)) fail_msg("tokenize --text-file: stdout '%s', want '%s'", r.out, want);
    ot_cli_res_free(&r);
    const char *a3[] = {"tokenize", model, "--text-file", "-", "--no-special", NULL};
    r = run(in, a3);
    if (r.status != 0 || strcmp(r.out, want)) fail_msg("tokenize --text-file -: stdout '%s', want '%s'", r.out, want);
    ot_cli_res_free(&r);
    /* and back: the ids to the text */
    want[strlen(want) - 1] = 0;
    const char *a4[] = {"detokenize", model, "--ids", want, "--json", NULL};
    r = run(NULL, a4);
    json_t *o = json_loads(r.out, 0, NULL);
    if (r.status != 0 || !o || strcmp(json_string_value(json_object_get(o, "text")), texts[k]))
      fail_msg("detokenize --json of \"%s\": exit %d, stdout %s", texts[k], r.status, r.out);
    json_decref(o);
    ot_cli_res_free(&r);
  }
}

static void test_json_and_special(void **state) {
  (void)state;
  const char *a1[] = {"tokenize", model, "--text", "Hello, world!", "--json", NULL};
  ot_cli_res r = run(NULL, a1);
  assert_int_equal(r.status, 0);
  json_t *o = json_loads(r.out, 0, NULL);
  assert_non_null(o);
  const json_t *ids = json_object_get(o, "ids"), *toks = json_object_get(o, "tokens");
  assert_int_equal(json_array_size(ids), json_array_size(toks));
  assert_string_equal(json_string_value(json_array_get(toks, 0)), "<|begin_of_text|>"); /* the template's BOS */
  char line[4096] = "";
  size_t i;
  const json_t *v;
  json_array_foreach(ids, i, v) snprintf(line + strlen(line), sizeof line - strlen(line), "%s%lld", i ? "," : "", (long long)json_integer_value(v));
  json_decref(o);
  ot_cli_res_free(&r);
  /* special tokens are skipped unless kept */
  const char *a2[] = {"detokenize", model, "--ids", line, NULL};
  r = run(NULL, a2);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.out, "Hello, world!\n");
  ot_cli_res_free(&r);
  const char *a3[] = {"detokenize", model, "--ids", line, "--keep-special", NULL};
  r = run(NULL, a3);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.out, "<|begin_of_text|>Hello, world!\n");
  ot_cli_res_free(&r);
}

static void expect_refused(const char *stdin_path, const char *const *args, const char *says) {
  ot_cli_res r = run(stdin_path, args);
  if (r.status != 2 || !strstr(r.err, says))
    fail_msg("%s %s: exit %d, stderr '%s', want exit 2 saying '%s'", args[0], args[1], r.status, r.err, says);
  print_message("  ok: %s", r.err);
  ot_cli_res_free(&r);
}

static void test_bad_input(void **state) {
  (void)state;
  const char *a1[] = {"tokenize", "/nonexistent", "--text", "x", NULL};
  expect_refused(NULL, a1, "/nonexistent/tokenizer.json: cannot open");
  ot_write_text(tmp, "bad.txt", "ok \xff text");
  char in[4200];
  ot_tmp_path(in, sizeof in, tmp, "bad.txt");
  const char *a2[] = {"tokenize", model, "--text-file", in, NULL};
  expect_refused(NULL, a2, "not valid UTF-8 at byte 3");
  const char *a3[] = {"detokenize", model, "--ids", "1,99999", NULL};
  expect_refused(NULL, a3, "id 99999 (position 1)");
  const char *a4[] = {"tokenize", model, NULL};
  expect_refused(NULL, a4, "give exactly one of --text and --text-file");
  const char *a5[] = {"tokenize", model, "--text", "a", "--text-file", in, NULL};
  expect_refused(NULL, a5, "give exactly one of --text and --text-file");
  ot_write_text(tmp, "tokenizer.json", "{\"model\": {\"type\": \"Unigram\"}}");
  const char *a6[] = {"tokenize", tmp, "--text", "a", NULL};
  expect_refused(NULL, a6, "model type 'Unigram' is not supported");
}

/* transformers decodes an empty list to "": so does detokenize --ids ""
 * (and --ids=), plain and --json. */
static void test_empty_ids(void **state) {
  (void)state;
  const char *a1[] = {"detokenize", model, "--ids", "", NULL};
  ot_cli_res r = run(NULL, a1);
  if (r.status != 0) fail_msg("detokenize --ids \"\": exit %d, %s", r.status, r.err);
  assert_string_equal(r.out, "\n");
  ot_cli_res_free(&r);
  const char *a2[] = {"detokenize", model, "--ids=", "--json", NULL};
  r = run(NULL, a2);
  assert_int_equal(r.status, 0);
  json_t *o = json_loads(r.out, 0, NULL);
  assert_non_null(o);
  assert_string_equal(json_string_value(json_object_get(o, "text")), "");
  json_decref(o);
  ot_cli_res_free(&r);
}

/* A field of the wrong type: exit 2, one line naming the file and the field. */
static void test_wrong_type_named(void **state) {
  (void)state;
  ot_write_text(tmp, "tokenizer.json",
                "{\"model\": {\"type\": \"BPE\", \"byte_fallback\": \"yes\", \"vocab\": {}, \"merges\": []}}");
  const char *a1[] = {"tokenize", tmp, "--text", "a", NULL};
  ot_cli_res r = run(NULL, a1);
  char want[4300];
  snprintf(want, sizeof want, "%s/tokenizer.json: model.byte_fallback: expected a boolean, found a string", tmp);
  if (r.status != 2 || !strstr(r.err, want) || strchr(r.err, '\n') != r.err + strlen(r.err) - 1)
    fail_msg("exit %d, stderr '%s', want exit 2 and one line saying '%s'", r.status, r.err, want);
  ot_cli_res_free(&r);
}

/* A file that is not a tokenizer, given as the model: named as such with
 * its first bytes (issue 43: "x.bin/tokenizer.json: a folder on the way is
 * a file"), for tokenize and detokenize alike. */
static void test_not_a_tokenizer(void **state) {
  (void)state;
  char path[4200], want[4300];
  ot_write_text(tmp, "x.bin", "hi\n");
  snprintf(path, sizeof path, "%s/x.bin", tmp);
  snprintf(want, sizeof want, "%s: not a tokenizer: not a GGUF file (magic 'hi?\?', expected 'GGUF')", path);
  const char *a1[] = {"tokenize", path, "--text", "a", NULL};
  const char *a2[] = {"detokenize", path, "--ids", "1", NULL};
  const char *const *as[] = {a1, a2};
  for (int k = 0; k < 2; k++) {
    ot_cli_res r = run(NULL, as[k]);
    if (r.status != 2 || !strstr(r.err, want) || strchr(r.err, '\n') != r.err + strlen(r.err) - 1)
      fail_msg("%s: exit %d, stderr '%s', want exit 2 and one line saying '%s'", as[k][0], r.status, r.err, want);
    ot_cli_res_free(&r);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_tokenize_matches_hf), cmocka_unit_test(test_json_and_special),
                                     cmocka_unit_test(test_bad_input), cmocka_unit_test(test_empty_ids),
                                     cmocka_unit_test(test_wrong_type_named), cmocka_unit_test(test_not_a_tokenizer)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
