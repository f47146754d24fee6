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
#include "text/tokenizer_internal.h" /* ot_tok_work: the loops' step count */
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

/* A copy of `family`'s tokenizer.json with the first `edit_from` replaced by
 * `edit_to` (NULL: cut in half), written into a new folder (*dir) and
 * loaded from its tokenizer.json path (*path). */
static ot_status load_edited(const char *family, const char *edit_from, const char *edit_to, char **dir, char *path,
                             size_t cap, ot_tokenizer **tk) {
  char src[4096];
  snprintf(src, sizeof src, "%s/tokenizers/%s/tokenizer.json", data_dir(), family);
  size_t n;
  char *buf = ot_read_file(src, &n);
  assert_non_null(buf);
  *dir = ot_tmpdir_create();
  ot_tmp_path(path, cap, *dir, "tokenizer.json");
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
    ot_write_text(*dir, "tokenizer.json", out);
    free(out);
  } else {
    ot_write_bytes(*dir, "tokenizer.json", buf, n / 2); /* truncated */
  }
  free(buf);
  *tk = NULL;
  return ot_tokenizer_load(path, tk);
}

/* family's tokenizer.json with one edit, loaded: the error must have
 * `status`, be one line, and name the file and `field`. */
static void refused_in(const char *family, const char *edit_from, const char *edit_to, ot_status status,
                       const char *field) {
  char *dir, path[4096];
  ot_tokenizer *tk;
  ot_status s = load_edited(family, edit_from, edit_to, &dir, path, sizeof path, &tk);
  if (s != status)
    fail_msg("edit '%s' -> '%s': got %s, want %s (%s)", edit_from ? edit_from : "(truncate)", edit_to ? edit_to : "",
             ot_status_str(s), ot_status_str(status), s == OT_OK ? "loaded" : ot_last_error());
  assert_null(tk);
  assert_non_null(strstr(ot_last_error(), path));
  assert_null(strchr(ot_last_error(), '\n'));
  if (field && !strstr(ot_last_error(), field)) fail_msg("the message does not name '%s': %s", field, ot_last_error());
  print_message("  ok: %s\n", ot_last_error());
  ot_tmpdir_remove(dir); /* frees dir */
}

static void refused(const char *edit_from, const char *edit_to, ot_status status, const char *field) {
  refused_in("llama3_style", edit_from, edit_to, status, field);
}

/* The same edit, accepted (as the tokenizers library accepts it): the
 * tokenizer, and its folder to remove. */
static ot_tokenizer *accepted(const char *edit_from, const char *edit_to, char **dir) {
  char path[4096];
  ot_tokenizer *tk;
  ot_status s = load_edited("llama3_style", edit_from, edit_to, dir, path, sizeof path, &tk);
  if (s != OT_OK) fail_msg("edit '%s' -> '%s' refused: %s", edit_from, edit_to, ot_last_error());
  return tk;
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
  refused("\"behavior\": \"Isolated\"", "\"behavior\": \"Sideways\"", OT_ERR_FORMAT,
          "pre_tokenizer.pretokenizers[0].behavior: 'Sideways'");
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
  config_refused("{\"added_tokens_decoder\": {\"0\": {\"content\": \"<unk>\", \"special\": \"yes\"}}}", OT_ERR_FORMAT,
                 "added_tokens_decoder.0.special: expected a boolean, found a string");
  config_refused("{\"added_tokens_decoder\": {\"0\": {\"content\": \"<unk>\", \"lstrip\": null}}}", OT_ERR_FORMAT,
                 "added_tokens_decoder.0.lstrip: expected a boolean, found null");
  config_refused("{\"split_special_tokens\": 1}", OT_ERR_FORMAT, "split_special_tokens: expected a boolean");
  config_refused("{\"clean_up_tokenization_spaces\": tru", OT_ERR_FORMAT, "tokenizer_config.json");
}

/* Every field the reader reads, of a type the tokenizers library refuses
 * (its serde types; null only where the field is an Option): refused in
 * one line naming the file, the field's JSON path, the type found and the
 * type expected, never read as the default. */
static void test_wrong_types(void **state) {
  (void)state;
  const ot_status F = OT_ERR_FORMAT;
  refused("\"byte_fallback\": false", "\"byte_fallback\": \"yes\"", F,
          "model.byte_fallback: expected a boolean, found a string");
  refused("\"fuse_unk\": false", "\"fuse_unk\": 0", F, "model.fuse_unk: expected a boolean, found an integer");
  refused("\"ignore_merges\": true", "\"ignore_merges\": \"true\"", F, "model.ignore_merges");
  refused("\"unk_token\": null", "\"unk_token\": 5", F, "model.unk_token: expected a string, found an integer");
  refused("\"dropout\": null", "\"dropout\": \"0.1\"", F, "model.dropout: expected a number");
  refused("\"continuing_subword_prefix\": null", "\"continuing_subword_prefix\": 7", F,
          "model.continuing_subword_prefix");
  refused("\"vocab\": {", "\"vocab\": {\"zzz\": 2.0, ", F, "model.vocab: token 'zzz'");
  refused("\"vocab\": {", "\"vocab\": null, \"x\": {", F, "model.vocab: expected an object, found null");
  refused("\"lstrip\": false", "\"lstrip\": \"no\"", F, "added_tokens[0].lstrip: expected a boolean, found a string");
  refused("\"special\": true", "\"special\": null", F, "added_tokens[0].special: expected a boolean, found null");
  refused("\"single_word\": false,", "", F, "added_tokens[0].single_word: missing");
  refused("\"id\": 0,", "\"id\": \"0\",", F, "added_tokens[0].id: expected an integer, found a string");
  refused("\"added_tokens\": [", "\"added_tokens\": null, \"x\": [", F, "added_tokens: expected an array, found null");
  refused("\"version\": \"1.0\"", "\"version\": 1.0", F, "version: expected a string");
  refused("\"invert\": false", "\"invert\": 1", F, "pre_tokenizer.pretokenizers[0].invert");
  refused("\"add_prefix_space\": false,", "\"add_prefix_space\": \"no\",", F,
          "pre_tokenizer.pretokenizers[1].add_prefix_space");
  refused("\"use_regex\": false", "\"use_regex\": null", F, "pre_tokenizer.pretokenizers[1].use_regex: expected a "
                                                           "boolean, found null");
  refused("\"add_prefix_space\": true,", "\"add_prefix_space\": 1,", F, "decoder.add_prefix_space");
  refused("\"type_id\": 0", "\"type_id\": \"0\"", F, "post_processor.single[0].SpecialToken.type_id");
  refused("\"ids\": [", "\"ids\": [\"0\", ", F, "post_processor.special_tokens.<|begin_of_text|>.ids[0]");
  refused("\"pair\": [", "\"pair\": null, \"x\": [", F, "post_processor.pair: expected an array, found null");
  refused("\"normalizer\": null", "\"normalizer\": {\"type\": \"Strip\", \"strip_left\": \"yes\", \"strip_right\": true}",
          F, "normalizer.strip_left");
  refused("\"normalizer\": null",
          "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, {\"type\": \"Prepend\", "
          "\"prepend\": 1}]}",
          F, "normalizer.normalizers[1].prepend: expected a string, found an integer");
  refused("\"normalizer\": null",
          "\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \"a\", \"Regex\": \"b\"}, \"content\": \"\"}",
          F, "normalizer.pattern");
  refused("\"decoder\": {", "\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Strip\", \"content\": "
                            "\"ab\", \"start\": 1, \"stop\": 0}]}, \"x\": {",
          F, "decoder.decoders[0].content: expected one character");
  refused("\"decoder\": {", "\"decoder\": {\"type\": \"Strip\", \"content\": \" \", \"start\": -1, \"stop\": 0}, \"x\": {",
          F, "decoder.start: expected an integer, found a negative integer");
  refused("\"decoder\": {", "\"decoder\": {\"type\": \"Metaspace\", \"replacement\": \"_\", \"add_prefix_space\": false}, "
                            "\"x\": {",
          F, "decoder: add_prefix_space false needs prepend_scheme");
  refused("\"decoder\": {", "\"decoder\": {\"type\": \"Metaspace\", \"replacement\": \"_\", \"prepend_scheme\": null}, "
                            "\"x\": {",
          F, "decoder.prepend_scheme: expected a string, found null");
  refused("\"pre_tokenizer\": {", "\"pre_tokenizer\": {\"type\": \"Digits\"}, \"x\": {", F,
          "pre_tokenizer.individual_digits: missing (expected a boolean)");
  refused("\"pre_tokenizer\": {", "\"pre_tokenizer\": {\"type\": \"Punctuation\", \"behavior\": null}, \"x\": {", F,
          "pre_tokenizer.behavior: expected a string, found null");
}

/* Merges whose tokens, or whose join, are not in model.vocab are refused
 * (the library's MergeTokenOutOfVocabulary), naming the merge's index and
 * text; so are a legacy merge that is not two tokens and a list mixing the
 * two forms (its untagged MergeType). */
static void test_merges_checked(void **state) {
  (void)state;
  const ot_status F = OT_ERR_FORMAT;
  refused("\"merges\": [", "\"merges\": [[\"zzq\", \"d\"], ", F, "model.merges[0] ('zzq' 'd'): 'zzq' is not a token");
  refused("\"merges\": [", "\"merges\": [[\"n\", \"d\"], [\"d\", \"n\"], ", F,
          "model.merges[1] ('d' 'n') makes 'dn', which is not a token");
  refused("\"merges\": [", "\"merges\": [\"n d\", \"a b c\"], \"x\": [", F, "model.merges[1]: 'a b c' is not two tokens");
  refused("\"merges\": [", "\"merges\": [\"n d\", [\"i\", \"n\"]], \"x\": [", F, "model.merges[1]: expected a string");
}

/* What the library accepts is accepted the same: null for an Option, a
 * "#version" line among legacy merges, a vocabulary id far past the others
 * (in memory that grows with the ids' count, not with the largest), and an
 * added token's "id", which the library does not read: it takes the id of
 * the same text in the vocabulary, or the next after the vocabulary's size
 * (670 entries here; ids by tokenizers 0.23). */
static void test_accepted_like_the_library(void **state) {
  (void)state;
  char *dir;
  ot_tokenizer *tk = accepted("\"byte_fallback\": false", "\"byte_fallback\": null", &dir);
  ot_tokenizer_destroy(tk), ot_tmpdir_remove(dir);
  tk = accepted("\"merges\": [", "\"merges\": [\"#version: 0.2\", \"n d\"], \"x\": [", &dir);
  int32_t *ids;
  size_t n;
  OT_ASSERT_OK(ot_tokenizer_encode(tk, "and", 3, 1, &ids, &n));
  assert_int_equal(n, 2); /* the library: [0, 306] */
  assert_int_equal(ids[0], 0);
  assert_int_equal(ids[1], 306);
  free(ids);
  ot_tokenizer_destroy(tk), ot_tmpdir_remove(dir);

  ot_tok_work = 0;
  tk = accepted("\"vocab\": {", "\"vocab\": {\"zzfar\": 2147483640, ", &dir);
  if (ot_tok_work > 20000) fail_msg("loading 671 tokens took %llu steps", (unsigned long long)ot_tok_work);
  assert_string_equal(ot_tokenizer_token(tk, 2147483640), "zzfar");
  assert_null(ot_tokenizer_token(tk, 2147483639));
  assert_int_equal(ot_tokenizer_vocab_size(tk), 2147483641);
  const int32_t far[] = {2147483640};
  char *text;
  OT_ASSERT_OK(ot_tokenizer_decode(tk, far, 1, 1, &text, &n));
  assert_string_equal(text, "zzfar");
  free(text);
  ot_tokenizer_destroy(tk), ot_tmpdir_remove(dir);

  tk = accepted("\"added_tokens\": [", "\"added_tokens\": [{\"id\": 99999, \"content\": \"<|new|>\", \"single_word\": "
                                       "false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, "
                                       "\"special\": true}, ",
                &dir);
  OT_ASSERT_OK(ot_tokenizer_encode(tk, "<|new|>", 7, 0, &ids, &n));
  assert_int_equal(n, 1);
  assert_int_equal(ids[0], 670);
  assert_null(ot_tokenizer_token(tk, 99999));
  assert_true(ot_tokenizer_is_special(tk, 670));
  free(ids);
  ot_tokenizer_destroy(tk), ot_tmpdir_remove(dir);

  /* a character with no token, no byte token and no unk_token is dropped,
   * as the library's merge_word drops it; with unk_token and fuse_unk, a
   * run of them is one unknown token (ids by tokenizers 0.23) */
  const char *bpe = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [[\"a\", "
                    "\"b\"]]%s}}";
  char json[512];
  snprintf(json, sizeof json, bpe, "");
  OT_ASSERT_OK(ot_tokenizer_parse(json, strlen(json), "drop.json", &tk));
  OT_ASSERT_OK(ot_tokenizer_encode(tk, "abxab", 5, 0, &ids, &n));
  assert_int_equal(n, 2);
  assert_true(ids[0] == 2 && ids[1] == 2);
  free(ids);
  ot_tokenizer_destroy(tk);
  snprintf(json, sizeof json, bpe, ", \"unk_token\": \"a\", \"fuse_unk\": true");
  OT_ASSERT_OK(ot_tokenizer_parse(json, strlen(json), "fuse.json", &tk));
  OT_ASSERT_OK(ot_tokenizer_encode(tk, "abxyab", 6, 0, &ids, &n));
  assert_int_equal(n, 3);
  assert_true(ids[0] == 2 && ids[1] == 0 && ids[2] == 2);
  free(ids);
  ot_tokenizer_destroy(tk);
}

/* Added tokens are found in time that grows with the text and the tokens'
 * size, never their product: 20 000 tokens that start with '<' and one of
 * 5 000 '<' then 'x', against 200 000 '<' and a few tokens, the long one last. Steps are
 * counted (ot_tok_work), not timed. */
static void test_added_tokens_linear(void **state) {
  (void)state;
  enum { N_TOK = 20000, LONG = 5000, TEXT = 200000 };
  size_t cap = (size_t)N_TOK * 160 + LONG + 4096, len = 0, tok_bytes = 0;
  char *list = malloc(cap);
  assert_non_null(list);
  len += (size_t)snprintf(list, cap, "\"added_tokens\": [");
  for (int k = 0; k < N_TOK; k++) {
    len += (size_t)snprintf(list + len, cap - len,
                            "{\"id\": %d, \"content\": \"<t%d>\", \"single_word\": false, \"lstrip\": false, "
                            "\"rstrip\": false, \"normalized\": false, \"special\": false}, ",
                            1000 + k, k);
    tok_bytes += 8;
  }
  len += (size_t)snprintf(list + len, cap - len, "{\"id\": 1, \"content\": \"");
  memset(list + len, '<', LONG);
  len += LONG;
  len += (size_t)snprintf(list + len, cap - len, "x\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
                                                 "\"normalized\": false, \"special\": false}, ");
  tok_bytes += LONG + 1;
  char *dir;
  ot_tok_work = 0;
  ot_tokenizer *tk = accepted("\"added_tokens\": [", list, &dir);
  const uint64_t load = ot_tok_work;
  char *text = malloc(TEXT + 64);
  assert_non_null(text);
  memset(text, '<', TEXT);
  size_t tn = (size_t)snprintf(text + TEXT, 64, "<t7><t19999>") + TEXT;
  text = realloc(text, tn + LONG + 1);
  assert_non_null(text);
  memset(text + tn, '<', LONG);
  tn += LONG;
  text[tn++] = 'x';
  int32_t *ids;
  size_t n;
  ot_tok_work = 0;
  OT_ASSERT_OK(ot_tokenizer_encode(tk, text, tn, 0, &ids, &n));
  const uint64_t enc = ot_tok_work;
  print_message("  load %llu steps for %zu bytes of tokens, encode %llu for %zu bytes\n", (unsigned long long)load,
                tok_bytes, (unsigned long long)enc, tn);
  if (load > 8 * tok_bytes + 100000) fail_msg("loading took %llu steps", (unsigned long long)load);
  if (enc > 8 * (uint64_t)tn) fail_msg("encoding took %llu steps", (unsigned long long)enc);
  /* the text ends "<t7>", "<t19999>", then the long token */
  assert_true(n >= 3);
  assert_int_equal(ids[n - 1], 670 + N_TOK);       /* the long one, added last */
  assert_int_equal(ids[n - 2], 670 + 19999);
  assert_int_equal(ids[n - 3], 670 + 7);
  free(ids);
  free(text);
  free(list);
  ot_tokenizer_destroy(tk), ot_tmpdir_remove(dir);
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
  /* a pattern that backtracks past PCRE2's limit on this text: refused,
   * never read as "no match" (which cut the text elsewhere, silently) */
  char *tmpdir;
  tk = accepted("\"Regex\": \"", "\"Regex\": \"(a+)+$|", &tmpdir);
  const char *aab = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab";
  assert_int_equal(ot_tokenizer_encode(tk, aab, strlen(aab), 0, &ids, &n), OT_ERR_UNSUPPORTED);
  assert_non_null(strstr(ot_last_error(), "gave up on this text"));
  assert_null(ids);
  ot_tokenizer_destroy(tk), ot_tmpdir_remove(tmpdir);
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
                                     cmocka_unit_test(test_wrong_types),
                                     cmocka_unit_test(test_merges_checked),
                                     cmocka_unit_test(test_accepted_like_the_library),
                                     cmocka_unit_test(test_added_tokens_linear),
                                     cmocka_unit_test(test_bad_config),
                                     cmocka_unit_test(test_bad_input)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
