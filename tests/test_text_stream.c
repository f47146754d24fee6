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
#include "ot_testio.h"

static const char *const families[] = {"sentencepiece_style", "gpt2_style", "llama3_style", "metaspace_style"};
static const char *const texts[] = {
    "Hello world", "emoji 😀 👍🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷", "東京の天気は晴れ、combining é and naïve",
    "  runs   of\tspaces\r\nand lines", "digits 1234567890 and 3.14159", ""};

/* Whether s[0 .. n) is well-formed UTF-8. */
static int utf8_ok(const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)s[i];
    size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!k || i + k > n) return 0;
    for (size_t j = 1; j < k; j++)
      if (((unsigned char)s[i + j] & 0xC0) != 0x80) return 0;
    i += k;
  }
  return 1;
}

static ot_tokenizer *load(const char *family) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tokenizers/%s", getenv("OT_TEST_DATA"), family);
  ot_tokenizer *tk;
  OT_ASSERT_OK(ot_tokenizer_load(path, &tk));
  return tk;
}

/* Streams ids[0 .. n) and returns the pieces joined (malloc'd); each piece
 * must be whole UTF-8. */
static char *stream_all(const ot_tokenizer *tk, const int32_t *ids, size_t n, int finish, size_t *len) {
  ot_text_stream *ts;
  OT_ASSERT_OK(ot_text_stream_new(tk, 1, &ts));
  char *all = calloc(1, 1);
  *len = 0;
  for (size_t i = 0; i <= n; i++) {
    const char *p;
    size_t k;
    if (i < n) OT_ASSERT_OK(ot_text_stream_push(ts, ids[i], &p, &k));
    else if (finish) OT_ASSERT_OK(ot_text_stream_finish(ts, &p, &k));
    else break;
    if (!utf8_ok(p, k)) fail_msg("piece %zu of %zu ('%.*s') is not whole UTF-8", i, n, (int)k, p);
    all = realloc(all, *len + k + 1);
    memcpy(all + *len, p, k);
    *len += k;
    all[*len] = 0;
  }
  ot_text_stream_destroy(ts);
  return all;
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
  assert_string_equal(part, "ok"); /* the space waits for what follows it, the emoji's start for its end */
  free(part);
  part = stream_all(tk, ids, n - 1, 1, &len);
  assert_non_null(strstr(part, "\xEF\xBF\xBD")); /* at finish: what the decoder makes of the cut bytes */
  free(part);
  part = stream_all(tk, ids, n, 0, &len);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pieces_make_the_decode),
      cmocka_unit_test(test_incomplete_character_held),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
