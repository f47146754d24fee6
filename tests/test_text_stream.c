/* test_text_stream.c — token ids to text one at a time (textstream.h), on
 * the reference tokenizers: every piece is whole UTF-8, the pieces put
 * together are the decode of all the ids (byte-fallback and byte-level
 * tokens that split a character held back until it is complete), and a
 * stream cut before a character's last byte hands out U+FFFD only at
 * finish. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "omptensor/textstream.h"
#include "ot_test.h"
#include "ot_testio.h"
#include "core/utf8.h"
#include "text/tokenizer_internal.h" /* ot_tok_work: ids decoded */

static const char *const families[] = {"sentencepiece_style", "gpt2_style",   "llama3_style", "metaspace_style",
                                       "qwen2_style",         "digits_style", "added_style",  "cleanup_style"};
static const char *const texts[] = {
    "Hello world", "emoji 😀 👍🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷", "東京の天気は晴れ、combining é and naïve",
    "  runs   of\tspaces\r\nand lines", "digits 1234567890 and 3.14159",
    "clean-up: a . b , c ! d ? it ' s don 't we 're I 'm they 've x ' y  .", ""};

static ot_tokenizer *load(const char *family) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tokenizers/%s", getenv("OT_TEST_DATA"), family);
  ot_tokenizer *tk;
  OT_ASSERT_OK(ot_tokenizer_load(path, &tk));
  return tk;
}

/* Streams ids[0 .. n) and returns the pieces joined (malloc'd); each piece
 * must be whole UTF-8. */
static char *stream_skip(const ot_tokenizer *tk, const int32_t *ids, size_t n, int finish, int skip, size_t *len) {
  ot_text_stream *ts;
  OT_ASSERT_OK(ot_text_stream_new(tk, skip, &ts));
  char *all = calloc(1, 1);
  *len = 0;
  for (size_t i = 0; i <= n; i++) {
    const char *p;
    size_t k;
    if (i < n) OT_ASSERT_OK(ot_text_stream_push(ts, ids[i], &p, &k));
    else if (finish) OT_ASSERT_OK(ot_text_stream_finish(ts, &p, &k));
    else break;
    if (!ot_utf8_valid(p, k)) fail_msg("piece %zu of %zu ('%.*s') is not whole UTF-8", i, n, (int)k, p);
    all = realloc(all, *len + k + 1);
    memcpy(all + *len, p, k);
    *len += k;
    all[*len] = 0;
  }
  if (finish) { /* what the stream says it handed out is what it handed out */
    size_t tl;
    const char *t = ot_text_stream_text(ts, &tl);
    assert_int_equal(tl, *len);
    assert_memory_equal(t, all, tl);
    assert_int_equal(t[tl], 0);
  }
  ot_text_stream_destroy(ts);
  return all;
}

static char *stream_all(const ot_tokenizer *tk, const int32_t *ids, size_t n, int finish, size_t *len) {
  return stream_skip(tk, ids, n, finish, 1, len);
}

static void test_pieces_make_the_decode(void **state) {
  (void)state;
  for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
    ot_tokenizer *tk = load(families[f]);
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
      int32_t *ids;
      size_t n, len, dlen;
      OT_ASSERT_OK(ot_tokenizer_encode(tk, texts[t], strlen(texts[t]), 1, &ids, &n));
      char *joined = stream_all(tk, ids, n, 1, &len), *dec;
      OT_ASSERT_OK(ot_tokenizer_decode(tk, ids, n, 1, &dec, &dlen));
      if (len != dlen || memcmp(joined, dec, len))
        fail_msg("%s \"%s\": streamed '%s', decoded '%s'", families[f], texts[t], joined, dec);
      free(joined);
      free(dec);
      free(ids);
    }
    ot_tokenizer_destroy(tk);
  }
}

/* An emoji in byte-fallback pieces, cut after its first bytes: nothing of
 * it is handed out until finish, which gives the decoder's U+FFFD. */
static void test_incomplete_character_held(void **state) {
  (void)state;
  ot_tokenizer *tk = load("sentencepiece_style");
  const char *text = "ok 🎉";
  int32_t *ids;
  size_t n, len;
  OT_ASSERT_OK(ot_tokenizer_encode(tk, text, strlen(text), 0, &ids, &n));
  assert_true(n >= 4); /* ... <0xF0> <0x9F> <0x8E> <0x89> */
  const char *last = ot_tokenizer_token(tk, ids[n - 1]);
  assert_non_null(last);
  assert_memory_equal(last, "<0x", 3); /* the emoji is byte tokens in this vocabulary */
  char *part = stream_all(tk, ids, n - 1, 0, &len);
  assert_string_equal(part, "ok "); /* the emoji's bytes wait: a later byte could make them U+FFFD */
  free(part);
  part = stream_all(tk, ids, n - 1, 1, &len);
  assert_non_null(strstr(part, "\xEF\xBF\xBD")); /* at finish: what the decoder makes of the cut bytes */
  free(part);
  part = stream_all(tk, ids, n, 0, &len);
  assert_string_equal(part, "ok "); /* whole, but still a run of byte tokens that may go on */
  free(part);
  part = stream_all(tk, ids, n, 1, &len);
  assert_string_equal(part, "ok 🎉");
  free(part);
  free(ids);
  /* a bad id is refused and the stream goes on */
  ot_text_stream *ts;
  OT_ASSERT_OK(ot_text_stream_new(tk, 1, &ts));
  const char *p;
  size_t k;
  OT_ASSERT_ERR(ot_text_stream_push(ts, 1 << 30, &p, &k), OT_ERR_INVALID_ARG, "");
  size_t nid;
  ot_text_stream_ids(ts, &nid);
  assert_int_equal(nid, 0);
  ot_text_stream_destroy(ts);
  ot_tokenizer_destroy(tk);
}

/* The id of token text t (a linear search: test vocabularies are small). */
static int32_t id_of(const ot_tokenizer *tk, const char *t) {
  for (int32_t i = 0; i < ot_tokenizer_vocab_size(tk); i++)
    if (ot_tokenizer_token(tk, i) && !strcmp(ot_tokenizer_token(tk, i), t)) return i;
  fail_msg("no token '%s'", t);
  return -1;
}

/* ids streamed (special tokens skipped or kept) and finished: the pieces,
 * each whole UTF-8, make exactly the decode. */
static void same_as_decode(const ot_tokenizer *tk, const char *what, const int32_t *ids, size_t n, int skip) {
  size_t len, dlen;
  char *joined = stream_skip(tk, ids, n, 1, skip, &len), *dec;
  OT_ASSERT_OK(ot_tokenizer_decode(tk, ids, n, skip, &dec, &dlen));
  if (len != dlen || memcmp(joined, dec, len)) {
    char list[512] = "";
    for (size_t i = 0; i < n && strlen(list) < 480; i++) snprintf(list + strlen(list), 32, "%d,", ids[i]);
    fail_msg("%s [%s] (skip %d): streamed '%s' (%zu bytes), decoded '%s' (%zu bytes)", what, list, skip, joined, len,
             dec, dlen);
  }
  free(joined);
  free(dec);
}

/* Byte-fallback tokens that regroup: "A" (<0x41>) then <0xE2> makes the
 * run one U+FFFD per byte, so "A" must not be handed out before the run
 * ends; a character split over pushes; a cut one at the end (U+FFFD, as
 * the decoder gives); a skipped special token inside a run (the library
 * drops it before the decoders: the run joins across); the leading space
 * Llama's Strip takes off. */
static void test_byte_runs_regroup(void **state) {
  (void)state;
  ot_tokenizer *tk = load("sentencepiece_style");
  const int32_t A = id_of(tk, "<0x41>"), E2 = id_of(tk, "<0xE2>"), x82 = id_of(tk, "<0x82>"),
                xAC = id_of(tk, "<0xAC>"), sp = id_of(tk, "\xE2\x96\x81"), s = id_of(tk, "<s>");
  const int32_t word = id_of(tk, "\xE2\x96\x81t"); /* "▁t" */
  const int32_t cases[][6] = {{A, E2, word, -1},          {A, E2, x82, xAC, word, -1}, {E2, x82, xAC, -1},
                              {word, E2, x82, -1},         {E2, s, x82, xAC, -1},       {sp, word, -1},
                              {sp, sp, A, word, -1},       {s, sp, E2, x82, xAC, -1},   {A, s, A, s, word, -1}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    size_t n = 0;
    while (cases[c][n] >= 0) n++;
    same_as_decode(tk, "sentencepiece_style", cases[c], n, 1);
    same_as_decode(tk, "sentencepiece_style", cases[c], n, 0);
  }
  /* the first: nothing of "A" before the run ends; then U+FFFD U+FFFD */
  size_t len;
  char *part = stream_all(tk, cases[0], 2, 0, &len);
  assert_int_equal(len, 0);
  free(part);
  part = stream_all(tk, cases[0], 3, 0, &len);
  assert_string_equal(part, "\xEF\xBF\xBD\xEF\xBF\xBD t");
  free(part);
  ot_tokenizer_destroy(tk);
}

/* Random ids of every family (byte tokens, special ones, anything), with
 * special tokens skipped and kept: the pieces make the decode. */
static void test_random_ids(void **state) {
  (void)state;
  uint64_t r = 0x9E3779B97F4A7C15ull;
  for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
    ot_tokenizer *tk = load(families[f]);
    const int32_t v = ot_tokenizer_vocab_size(tk);
    for (int k = 0; k < 300; k++) {
      int32_t ids[24];
      const size_t n = 1 + (size_t)(k % 24);
      for (size_t i = 0; i < n; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((r >> 33) % (uint64_t)v);
        if (!ot_tokenizer_token(tk, ids[i])) ids[i] = 0;
      }
      same_as_decode(tk, families[f], ids, n, k & 1);
    }
    ot_tokenizer_destroy(tk);
  }
}

/* Each id is decoded a bounded number of times, whatever the count:
 * 20 000 ids cost steps that grow with 20 000, not with its square (the
 * stream once decoded every id at every push). */
static void test_cost_linear(void **state) {
  (void)state;
  for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
    ot_tokenizer *tk = load(families[f]);
    int32_t *ids;
    size_t n;
    OT_ASSERT_OK(ot_tokenizer_encode(tk, texts[1], strlen(texts[1]), 0, &ids, &n));
    ot_text_stream *ts;
    OT_ASSERT_OK(ot_text_stream_new(tk, 1, &ts));
    enum { N = 20000 };
    ot_tok_work = 0;
    const char *p;
    size_t k;
    for (size_t i = 0; i < N; i++) OT_ASSERT_OK(ot_text_stream_push(ts, ids[i % n], &p, &k));
    OT_ASSERT_OK(ot_text_stream_finish(ts, &p, &k));
    print_message("  %s: %llu ids decoded for %d pushed\n", families[f], (unsigned long long)ot_tok_work, N);
    if (ot_tok_work > 4 * (uint64_t)N) fail_msg("%s: %llu decode steps for %d ids", families[f],
                                                (unsigned long long)ot_tok_work, N);
    OT_ASSERT_ERR(ot_text_stream_push(ts, ids[0], &p, &k), OT_ERR_STATE, "after ot_text_stream_finish");
    ot_text_stream_destroy(ts);
    free(ids);
    ot_tokenizer_destroy(tk);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pieces_make_the_decode),
      cmocka_unit_test(test_incomplete_character_held),
      cmocka_unit_test(test_byte_runs_regroup),
      cmocka_unit_test(test_random_ids),
      cmocka_unit_test(test_cost_linear),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
