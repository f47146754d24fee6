/* test_text_tokenizer.c — tokenizer.json in C against Hugging Face
 * `tokenizers`: for every family in tests/data/tokenizers (made by
 * scripts/gen_tokenizer_ref.py, which trained each on the corpus it
 * carries), every text's ids without and with the special tokens, and the
 * decoded text with special tokens skipped and kept, equal the library's.
 * Then what the reader must refuse: broken and unsupported files name the
 * file and the field. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "omptensor/tokenizer.h"
#include "ot_test.h"
#include "ot_testio.h"

static const char *data_dir(void) {
  const char *d = getenv("OT_TEST_DATA");
  if (!d) fail_msg("OT_TEST_DATA is not set (ctest sets it to tests/data)");
  return d;
}

static void ids_equal(const char *fam, const char *what, const char *text, const int32_t *got, size_t n,
                      const json_t *want) {
  size_t k = 0;
  for (; k < n && k < json_array_size(want); k++)
    if (got[k] != json_integer_value(json_array_get(want, k))) break;
  if (k == n && n == json_array_size(want)) return;
  char g[512] = "", w[512] = "";
  for (size_t i = 0; i < n && strlen(g) < 480; i++) snprintf(g + strlen(g), sizeof g - strlen(g), "%d,", got[i]);
  for (size_t i = 0; i < json_array_size(want) && strlen(w) < 480; i++)
    snprintf(w + strlen(w), sizeof w - strlen(w), "%lld,", (long long)json_integer_value(json_array_get(want, i)));
  fail_msg("%s, %s of \"%s\": first difference at %zu\n  got  %s\n  want %s", fam, what, text, k, g, w);
}

static void check_family(const char *fam) {
  char dir[4096], path[4096];
  snprintf(dir, sizeof dir, "%s/tokenizers/%s", data_dir(), fam);
  ot_tokenizer *tk;
  OT_ASSERT_OK(ot_tokenizer_load(dir, &tk));
  snprintf(path, sizeof path, "%s/expected.json", dir);
  json_error_t e;
  json_t *ref = json_load_file(path, 0, &e);
  if (!ref) fail_msg("%s: %s", path, e.text);
  const json_t *cases = json_object_get(ref, "cases");
  assert_true(json_array_size(cases) > 10);
  size_t i;
  const json_t *c;
  json_array_foreach(cases, i, c) {
    const json_t *t = json_object_get(c, "text");
    const char *text = json_string_value(t);
    int32_t *ids;
    size_t n;
    OT_ASSERT_OK(ot_tokenizer_encode(tk, text, json_string_length(t), 0, &ids, &n));
    ids_equal(fam, "ids", text, ids, n, json_object_get(c, "ids"));
    free(ids);
    OT_ASSERT_OK(ot_tokenizer_encode(tk, text, json_string_length(t), 1, &ids, &n));
    ids_equal(fam, "ids with special tokens", text, ids, n, json_object_get(c, "ids_special"));
    for (int keep = 0; keep < 2; keep++) {
      char *out;
      size_t len;
      OT_ASSERT_OK(ot_tokenizer_decode(tk, ids, n, !keep, &out, &len));
      const json_t *want = json_object_get(c, keep ? "decoded_keep" : "decoded");
      if (len != json_string_length(want) || memcmp(out, json_string_value(want), len))
        fail_msg("%s: decoding \"%s\" (special tokens %s) gave \"%s\", want \"%s\"", fam, text,
                 keep ? "kept" : "skipped", out, json_string_value(want));
      free(out);
    }
    free(ids);
  }
  /* id lists that cut characters in half: the lossy UTF-8 of the decoders */
  const json_t *dc = json_object_get(ref, "decode_cases");
  assert_true(json_array_size(dc) > 10);
  json_array_foreach(dc, i, c) {
    const json_t *want_ids = json_object_get(c, "ids");
    size_t n = json_array_size(want_ids);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    assert_non_null(ids);
    for (size_t k = 0; k < n; k++) ids[k] = (int32_t)json_integer_value(json_array_get(want_ids, k));
    for (int keep = 0; keep < 2; keep++) {
      char *out;
      size_t len;
      OT_ASSERT_OK(ot_tokenizer_decode(tk, ids, n, !keep, &out, &len));
      const json_t *want = json_object_get(c, keep ? "decoded_keep" : "decoded");
      if (len != json_string_length(want) || memcmp(out, json_string_value(want), len))
        fail_msg("%s: decode case %zu (special tokens %s) gave \"%s\", want \"%s\"", fam, i, keep ? "kept" : "skipped",
                 out, json_string_value(want));
      free(out);
    }
    free(ids);
  }
  /* the tokens tokenizer_config.json names */
  const json_t *roles = json_object_get(ref, "roles");
  static const char *const role_names[] = {"bos", "eos", "pad", "unk"};
  for (int r = 0; r < 4; r++) {
    const json_t *want = json_object_get(roles, role_names[r]);
    assert_int_equal(ot_tokenizer_role_id(tk, (ot_token_role)r), want ? json_integer_value(want) : -1);
  }
  print_message("  %s: %zu texts, %zu decode cases, %d tokens\n", fam, json_array_size(cases), json_array_size(dc),
                ot_tokenizer_vocab_size(tk));
  json_decref(ref);
  ot_tokenizer_destroy(tk);
}

/* One family per test: its folder name is the test's state. The families:
 * gpt2_style, llama3_style, Llama 2 sentencepiece_style (Prepend/Replace
 * normalizers, byte fallback, fused unk, Replace/ByteFallback/Fuse/Strip
 * decoders), metaspace_style (Metaspace pre-tokenizer and decoder),
 * qwen2_style (NFC, Split, ByteLevel; a tokenizer_config.json without BOS),
 * digits_style (Digits, Punctuation, NFKC, Strip, Replace with a Regex in
 * normalizer and decoder), added_style (Llama 2 with added tokens flagged
 * lstrip, rstrip, single_word, normalized; add_bos_token + add_eos_token),
 * cleanup_style (GPT-2 with clean_up_tokenization_spaces forced and
 * split_special_tokens). The last three as transformers reads the folder. */
static void test_family(void **state) { check_family(*state); }

/* A copy of a family's tokenizer.json with one edit, loaded: the error
 * must have `status` and name the file and `field`. */
static void refused(const char *edit_from, const char *edit_to, ot_status status, const char *field) {
  char src[4096];
  snprintf(src, sizeof src, "%s/tokenizers/llama3_style/tokenizer.json", data_dir());
  FILE *f = fopen(src, "rb");
  assert_non_null(f);
  char *buf = malloc(1 << 20);
  assert_non_null(buf);
  size_t n = fread(buf, 1, (1 << 20) - 1, f);
  fclose(f);
  buf[n] = 0;
  char *dir = ot_tmpdir_create();
  char path[4096];
  ot_tmp_path(path, sizeof path, dir, "tokenizer.json");
  if (edit_from) {
    char *at = strstr(buf, edit_from);
    if (!at) fail_msg("the reference tokenizer.json has no '%s' to edit", edit_from);
    size_t a = strlen(edit_from), b = strlen(edit_to);
    char *out = malloc(n + b + 1);
    assert_non_null(out);
    size_t pre = (size_t)(at - buf);
    memcpy(out, buf, pre);
    memcpy(out + pre, edit_to, b);
    memcpy(out + pre + b, at + a, n - pre - a + 1);
    ot_write_text(dir, "tokenizer.json", out);
    free(out);
  } else {
    ot_write_bytes(dir, "tokenizer.json", buf, n / 2); /* truncated */
  }
  ot_tokenizer *tk = NULL;
  ot_status s = ot_tokenizer_load(path, &tk);
  if (s != status)
    fail_msg("edit '%s' -> '%s': got %s, want %s (%s)", edit_from ? edit_from : "(truncate)", edit_to ? edit_to : "",
             ot_status_str(s), ot_status_str(status), ot_last_error());
  assert_null(tk);
  assert_non_null(strstr(ot_last_error(), path));
  if (field && !strstr(ot_last_error(), field)) fail_msg("the message does not name '%s': %s", field, ot_last_error());
  print_message("  ok: %s\n", ot_last_error());
  ot_tmpdir_remove(dir); /* frees dir */
  free(buf);
}

static void test_bad_files(void **state) {
  (void)state;
  refused(NULL, NULL, OT_ERR_FORMAT, NULL); /* truncated JSON */
  refused("\"type\": \"BPE\"", "\"type\": \"WordPiece\"", OT_ERR_UNSUPPORTED, "model type 'WordPiece'");
  refused("\"normalizer\": null", "\"normalizer\": {\"type\": \"Precompiled\"}", OT_ERR_UNSUPPORTED,
          "normalizer type 'Precompiled'");
  refused("\"normalizer\": null",
          "\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \"(\"}, \"content\": \"\"}", OT_ERR_FORMAT,
          "regular expression");
  refused("\"behavior\": \"Isolated\"", "\"behavior\": \"Sideways\"", OT_ERR_UNSUPPORTED, "Split behavior 'Sideways'");
  refused("\"vocab\": {", "\"vocab\": {\"broken\": \"x\", ", OT_ERR_FORMAT, "model.vocab");
  refused("\"merges\": [", "\"merges\": [42, ", OT_ERR_FORMAT, "model.merges");
  refused("\"Regex\": \"", "\"Regex\": \"(unclosed", OT_ERR_FORMAT, "regular expression");
  refused("\"decoder\": {\n    \"type\": \"ByteLevel\"", "\"decoder\": {\"type\": \"WordPiece\"", OT_ERR_UNSUPPORTED,
          "decoder type 'WordPiece'");
  refused("\"post_processor\": {", "\"post_processor\": {\"type\": \"RobertaProcessing\"}, \"x\": {",
          OT_ERR_UNSUPPORTED, "post_processor type 'RobertaProcessing'");
}

/* A family's folder with tokenizer_config.json written as `config`: the
 * load must fail with `status`, naming tokenizer_config.json and `field`. */
static void config_refused(const char *config, ot_status status, const char *field) {
  char src[4096], path[4096];
  snprintf(src, sizeof src, "%s/tokenizers/sentencepiece_style/tokenizer.json", data_dir());
  char *dir = ot_tmpdir_create();
  size_t n;
  char *buf = ot_read_file(src, &n);
  assert_non_null(buf);
  ot_write_bytes(dir, "tokenizer.json", buf, n);
  ot_write_text(dir, "tokenizer_config.json", config);
  ot_tokenizer *tk = NULL;
  ot_status s = ot_tokenizer_load(dir, &tk);
  if (s != status)
    fail_msg("config %s: got %s, want %s (%s)", config, ot_status_str(s), ot_status_str(status), ot_last_error());
  assert_null(tk);
  ot_tmp_path(path, sizeof path, dir, "tokenizer_config.json");
  assert_non_null(strstr(ot_last_error(), path));
  if (!strstr(ot_last_error(), field)) fail_msg("the message does not name '%s': %s", field, ot_last_error());
  print_message("  ok: %s\n", ot_last_error());
  free(buf);
  ot_tmpdir_remove(dir);
}

static void test_bad_config(void **state) {
  (void)state;
  config_refused("{\"add_bos_token\": \"yes\"}", OT_ERR_FORMAT, "add_bos_token");
  config_refused("{\"eos_token\": \"<never-seen>\"}", OT_ERR_UNSUPPORTED, "eos_token '<never-seen>'");
  config_refused("{\"bos_token\": {\"content\": 5}}", OT_ERR_FORMAT, "bos_token");
  config_refused("{\"added_tokens_decoder\": {\"1\": {\"content\": \"<new>\"}}}", OT_ERR_UNSUPPORTED,
                 "added_tokens_decoder entry 1");
  config_refused("[1, 2]", OT_ERR_FORMAT, "(top level)");
  config_refused("{\"clean_up_tokenization_spaces\": tru", OT_ERR_FORMAT, "tokenizer_config.json");
}

static void test_bad_input(void **state) {
  (void)state;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/tokenizers/gpt2_style", data_dir());
  ot_tokenizer *tk;
  OT_ASSERT_OK(ot_tokenizer_load(dir, &tk));
  int32_t *ids = NULL;
  size_t n;
  assert_int_equal(ot_tokenizer_encode(tk, "ok \xff\xfe", 5, 0, &ids, &n), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "not valid UTF-8 at byte 3"));
  const int32_t bad[] = {1, 999999};
  char *text = NULL;
  assert_int_equal(ot_tokenizer_decode(tk, bad, 2, 1, &text, NULL), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "id 999999 (position 1)"));
  assert_null(text);
  ot_tokenizer_destroy(tk);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test_prestate(test_family, "gpt2_style"),
                                     cmocka_unit_test_prestate(test_family, "llama3_style"),
                                     cmocka_unit_test_prestate(test_family, "sentencepiece_style"),
                                     cmocka_unit_test_prestate(test_family, "metaspace_style"),
                                     cmocka_unit_test_prestate(test_family, "qwen2_style"),
                                     cmocka_unit_test_prestate(test_family, "digits_style"),
                                     cmocka_unit_test_prestate(test_family, "added_style"),
                                     cmocka_unit_test_prestate(test_family, "cleanup_style"),
                                     cmocka_unit_test(test_bad_files),
                                     cmocka_unit_test(test_bad_config),
                                     cmocka_unit_test(test_bad_input)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
