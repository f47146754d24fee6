/* test_text_gguf_tokenizer.c — tokenizers rebuilt from a GGUF file's
 * metadata (ot_tokenizer_from_gguf) against the reference libraries: for
 * every file in tests/data/gguf/tok-*.gguf (made by
 * scripts/gen_gguf_tokenizer_ref.py) each text's ids without and with the
 * special tokens, the decoding with special tokens skipped and kept, and
 * the roles equal what the reference gave: sentencepiece for the "llama"
 * vocabulary (what llama.cpp reproduces), the tokenizers library for the
 * byte-level ones (pre gpt2, llama-bpe, qwen2).
 *
 * A case the script marks "known_difference" is one where sentencepiece
 * and llama.cpp's construction (which ours follows) disagree for a reason
 * it states: there the ids are checked against "ids_hf" (the tokenizers
 * library running the construction) and the reason is printed, not hidden.
 *
 * Then the refusals: tok-bad-*.gguf, each with one defect, must fail with
 * the status and a message naming the file and the key. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "omptensor/gguf.h"
#include "omptensor/tokenizer.h"
#include "ot_test.h"
#include "ot_testio.h"
#include "text/tokenizer_internal.h" /* ot_tok_work: the loops' step count */

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

static ot_tokenizer *load(const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/gguf/tok-%s.gguf", data_dir(), name);
  ot_gguf *g;
  OT_ASSERT_OK(ot_gguf_open(path, &g));
  ot_tokenizer *tk;
  OT_ASSERT_OK(ot_tokenizer_from_gguf(g, path, &tk));
  ot_gguf_close(g); /* the tokenizer keeps nothing of the file */
  return tk;
}

static void check_family(const char *fam) {
  char path[4096];
  ot_tokenizer *tk = load(fam);
  snprintf(path, sizeof path, "%s/gguf/tok-%s.json", data_dir(), fam);
  json_error_t e;
  json_t *ref = json_load_file(path, 0, &e);
  if (!ref) fail_msg("%s: %s", path, e.text);
  const json_t *cases = json_object_get(ref, "cases");
  assert_true(json_array_size(cases) >= 10);
  size_t i, known = 0;
  const json_t *c;
  json_array_foreach(cases, i, c) {
    const json_t *t = json_object_get(c, "text");
    const char *text = json_string_value(t);
    const json_t *why = json_object_get(c, "known_difference");
    const char *ids_key = why ? "ids_hf" : "ids", *sp_key = why ? "ids_special_hf" : "ids_special";
    if (why) {
      print_message("  %s: \"%s\": the reference differs, checked against the construction: %s\n", fam, text,
                    json_string_value(why));
      known++;
    }
    int32_t *ids;
    size_t n;
    OT_ASSERT_OK(ot_tokenizer_encode(tk, text, json_string_length(t), 0, &ids, &n));
    ids_equal(fam, ids_key, text, ids, n, json_object_get(c, ids_key));
    free(ids);
    OT_ASSERT_OK(ot_tokenizer_encode(tk, text, json_string_length(t), 1, &ids, &n));
    ids_equal(fam, sp_key, text, ids, n, json_object_get(c, sp_key));
    free(ids);
    /* the decoding is of the reference's own ids (with special tokens) */
    const json_t *want_ids = json_object_get(c, "ids_special");
    n = json_array_size(want_ids);
    ids = malloc((n ? n : 1) * sizeof *ids);
    assert_non_null(ids);
    for (size_t k = 0; k < n; k++) ids[k] = (int32_t)json_integer_value(json_array_get(want_ids, k));
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
  const json_t *roles = json_object_get(ref, "roles");
  static const char *const role_names[] = {"bos", "eos", "pad", "unk"};
  for (int r = 0; r < 4; r++) {
    const json_t *want = json_object_get(roles, role_names[r]);
    assert_int_equal(ot_tokenizer_role_id(tk, (ot_token_role)r), want ? json_integer_value(want) : -1);
  }
  print_message("  %s: %zu texts (%zu known differences), %d tokens\n", fam, json_array_size(cases), known,
                ot_tokenizer_vocab_size(tk));
  json_decref(ref);
  ot_tokenizer_destroy(tk);
}

/* spm (tokenizer.ggml.model "llama": merges from the scores, byte
 * fallback, user-defined <tool>), gpt2, llama-bpe (Split + ByteLevel,
 * ignore_merges, BOS), qwen2 (Qwen2's regex), ties (a made-up "llama"
 * vocabulary of tied scores and repeated tokens: the merges' order). */
static void test_family(void **state) { check_family(*state); }

/* ot_tokenizer_load takes the .gguf path itself (what `omptensor run
 * model.gguf` and `tokenize` call). */
static void test_load_path(void **state) {
  (void)state;
  char path[4096];
  snprintf(path, sizeof path, "%s/gguf/tok-spm.gguf", data_dir());
  ot_tokenizer *tk;
  OT_ASSERT_OK(ot_tokenizer_load(path, &tk));
  int32_t *ids;
  size_t n;
  OT_ASSERT_OK(ot_tokenizer_encode(tk, "Hello", 5, 1, &ids, &n));
  assert_true(n >= 2);
  assert_int_equal(ids[0], 1); /* <s> */
  assert_true(ot_tokenizer_is_special(tk, 1));
  assert_true(ot_tokenizer_is_special(tk, 0)); /* <unk>: the unknown token is special */
  assert_false(ot_tokenizer_is_special(tk, 3)); /* <tool>: user-defined, added but not special */
  free(ids);
  ot_tokenizer_destroy(tk);
  /* a GGUF without tokenizer metadata: not found, naming the key */
  snprintf(path, sizeof path, "%s/gguf/tiny.gguf", data_dir());
  tk = NULL;
  OT_ASSERT_FAILS(ot_tokenizer_load(path, &tk), OT_ERR_NOT_FOUND, "tokenizer.ggml.model");
  assert_null(tk);
}

static void refused(const char *name, ot_status status, const char *needle) {
  char path[4096];
  snprintf(path, sizeof path, "%s/gguf/tok-bad-%s.gguf", data_dir(), name);
  ot_gguf *g;
  OT_ASSERT_OK(ot_gguf_open(path, &g));
  ot_tokenizer *tk = (ot_tokenizer *)1;
  ot_status s = ot_tokenizer_from_gguf(g, path, &tk);
  ot_gguf_close(g);
  if (s != status)
    fail_msg("%s: got %s, want %s (%s)", name, ot_status_str(s), ot_status_str(status), ot_last_error());
  assert_null(tk);
  if (!strstr(ot_last_error(), path)) fail_msg("the message does not name the file: %s", ot_last_error());
  if (!strstr(ot_last_error(), needle)) fail_msg("the message does not name '%s': %s", needle, ot_last_error());
  print_message("  ok: %s\n", ot_last_error());
}

static void test_bad_files(void **state) {
  (void)state;
  refused("model", OT_ERR_UNSUPPORTED, "tokenizer.ggml.model: 'bert'");
  refused("pre", OT_ERR_UNSUPPORTED, "tokenizer.ggml.pre: 'made-up'");
  refused("scores", OT_ERR_FORMAT, "tokenizer.ggml.scores: 6 entries for the 7 tokens");
  refused("types", OT_ERR_FORMAT, "tokenizer.ggml.token_type: 9 entries for the 7 tokens");
  refused("tokens", OT_ERR_FORMAT, "tokenizer.ggml.tokens: missing");
  refused("bos", OT_ERR_FORMAT, "tokenizer.ggml.bos_token_id: token id 7 is outside");
  refused("merge", OT_ERR_FORMAT, "tokenizer.ggml.merges: entry 1 ('a c')");
  /* no file at all */
  ot_tokenizer *tk = (ot_tokenizer *)1;
  assert_int_equal(ot_tokenizer_from_gguf(NULL, "x", &tk), OT_ERR_INVALID_ARG);
  assert_null(tk);
}

static void put(FILE *f, const void *p, size_t n) { assert_int_equal(fwrite(p, 1, n, f), n); }
static void put_str(FILE *f, const char *s, size_t n) {
  const uint64_t len = n;
  put(f, &len, 8), put(f, s, n);
}
/* A GGUF (version 3, no tensors) of a tokenizer: "llama" (tokens and their
 * scores) or "gpt2" (tokens and the n_merges merges). */
static void write_tok_gguf(const char *path, const char *model, const char *const *tok, const size_t *len, int n,
                           const char *const *merges, int n_merges) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  const uint32_t version = 3, t_str = 8, t_arr = 9, t_f32 = 6;
  const uint64_t n_tensors = 0, n_kv = 3, count = (uint64_t)n, mcount = (uint64_t)n_merges;
  put(f, "GGUF", 4), put(f, &version, 4), put(f, &n_tensors, 8), put(f, &n_kv, 8);
  put_str(f, "tokenizer.ggml.model", 20), put(f, &t_str, 4), put_str(f, model, strlen(model));
  put_str(f, "tokenizer.ggml.tokens", 21), put(f, &t_arr, 4), put(f, &t_str, 4), put(f, &count, 8);
  for (int k = 0; k < n; k++) put_str(f, tok[k], len[k]);
  if (merges) {
    put_str(f, "tokenizer.ggml.merges", 21), put(f, &t_arr, 4), put(f, &t_str, 4), put(f, &mcount, 8);
    for (int k = 0; k < n_merges; k++) put_str(f, merges[k], strlen(merges[k]));
  } else {
    put_str(f, "tokenizer.ggml.scores", 21), put(f, &t_arr, 4), put(f, &t_f32, 4), put(f, &count, 8);
    for (int k = 0; k < n; k++) {
      const float score = -(float)k;
      put(f, &score, 4);
    }
  }
  assert_int_equal(fclose(f), 0);
}

/* tokenizer.ggml.merges as llama.cpp reads them: a repeated pair keeps its
 * first rank (so "a b" is merged before "b c" in "abc"; the repeat, last,
 * would put it after). */
static void test_merges_as_llama_cpp(void **state) {
  (void)state;
  const char *tok[] = {"a", "b", "c", "ab", "bc"};
  const size_t len[] = {1, 1, 1, 2, 2};
  const char *merges[] = {"a b", "b c", "a b"};
  char *dir = ot_tmpdir_create(), path[4096];
  ot_tmp_path(path, sizeof path, dir, "dup.gguf");
  write_tok_gguf(path, "gpt2", tok, len, 5, merges, 3);
  ot_tokenizer *tk;
  OT_ASSERT_OK(ot_tokenizer_load_gguf(path, &tk));
  int32_t *ids;
  size_t n;
  OT_ASSERT_OK(ot_tokenizer_encode(tk, "abc", 3, 0, &ids, &n));
  assert_int_equal(n, 2);
  assert_int_equal(ids[0], 3); /* ab */
  assert_int_equal(ids[1], 2); /* c */
  free(ids);
  ot_tokenizer_destroy(tk);
  ot_tmpdir_remove(dir);
}

/* The merges of a "llama" vocabulary are its tokens' cuts into two tokens:
 * found in steps that grow with the tokens' bytes, not with the square of
 * a token's length (a token of 20 000 bytes). Steps are counted
 * (ot_tok_work), not timed. */
static void test_merges_linear(void **state) {
  (void)state;
  enum { LONG = 20000 };
  char *long_tok = malloc(LONG);
  assert_non_null(long_tok);
  memset(long_tok, 'a', LONG);
  long_tok[LONG / 2] = 'b'; /* "a..ab" + "a..a": no cut of it is two tokens but one */
  const char *tok[] = {"<unk>", "<s>", "</s>", "a", "b", "aa", "ab", long_tok, long_tok + LONG / 2 + 1};
  size_t len[] = {5, 3, 4, 1, 1, 2, 2, LONG, LONG - LONG / 2 - 1};
  char *dir = ot_tmpdir_create(), path[4096];
  ot_tmp_path(path, sizeof path, dir, "long.gguf");
  /* the last token is the long one's tail, the one before it the long one: a cut of it */
  tok[8] = long_tok + LONG / 2 + 1;
  write_tok_gguf(path, "llama", tok, len, 9, NULL, 0);
  ot_tok_work = 0;
  ot_tokenizer *tk;
  OT_ASSERT_OK(ot_tokenizer_load_gguf(path, &tk));
  uint64_t bytes = 0;
  for (int k = 0; k < 9; k++) bytes += len[k];
  print_message("  %llu steps for %llu bytes of tokens\n", (unsigned long long)ot_tok_work, (unsigned long long)bytes);
  if (ot_tok_work > 16 * bytes + 10000) fail_msg("%llu steps for %llu bytes", (unsigned long long)ot_tok_work,
                                                 (unsigned long long)bytes);
  int32_t *ids;
  size_t n;
  OT_ASSERT_OK(ot_tokenizer_encode(tk, "aab", 3, 0, &ids, &n));
  assert_true(n >= 1);
  free(ids);
  ot_tokenizer_destroy(tk);
  ot_tmpdir_remove(dir);
  free(long_tok);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test_prestate(test_family, "spm"),
                                     cmocka_unit_test_prestate(test_family, "gpt2"),
                                     cmocka_unit_test_prestate(test_family, "llama-bpe"),
                                     cmocka_unit_test_prestate(test_family, "qwen2"),
                                     cmocka_unit_test_prestate(test_family, "ties"),
                                     cmocka_unit_test(test_load_path),
                                     cmocka_unit_test(test_bad_files), cmocka_unit_test(test_merges_linear),
                                     cmocka_unit_test(test_merges_as_llama_cpp)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
