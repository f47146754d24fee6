/* fuzz_tokenizer.c — tokenizer.json and text through the tokenizer
 * (issue 17). First byte even: the rest is a tokenizer.json (every field
 * typed as the tokenizers library types it: the seeds json_tiny_* are small
 * complete files and files with one field of the wrong type, for the
 * mutations to reach each check); loaded, it encodes and decodes a fixed
 * text, and the ids streamed one at a time must make exactly the decode,
 * in pieces of whole UTF-8 (issue 43). Odd: the rest is text for a fixed
 * byte-level tokenizer (Llama 3's split pattern, a special token, two
 * merges), whose decode must give the text back byte for byte. */
#include <jansson.h>
#include <stdio.h>

#include "core/utf8.h"
#include "fuzz_common.h"
#include "omptensor/textstream.h"
#include "omptensor/tokenizer.h"

static ot_tokenizer *fixed;

static size_t put_cp(char *o, unsigned cp) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  o[0] = (char)(0xC0 | (cp >> 6));
  o[1] = (char)(0x80 | (cp & 0x3F));
  return 2;
}

/* Every byte as its GPT-2 printable character, "Ġt" and "he" merged. */
static ot_tokenizer *make_fixed(void) {
  json_t *vocab = json_object();
  int n = 0;
  for (int b = 0; b < 256; b++) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    char s[3] = {0};
    put_cp(s, printable ? (unsigned)b : 256u + (unsigned)n++);
    json_object_set_new(vocab, s, json_integer(b));
  }
  json_object_set_new(vocab, "\xc4\xa0t", json_integer(256)); /* "Ġt" */
  json_object_set_new(vocab, "he", json_integer(257));
  json_t *root = json_pack(
      "{s:[{s:i, s:s, s:b, s:b, s:b, s:b, s:b}], s:n, s:{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b, s:b}]}, "
      "s:{s:s, s:b, s:b}, s:{s:s, s:o, s:[s, s], s:b}}",
      "added_tokens", "id", 258, "content", "<|endoftext|>", "special", 1, "single_word", 0, "lstrip", 0, "rstrip", 0,
      "normalized", 0, "normalizer", "pre_tokenizer", "type", "Sequence", "pretokenizers", "type", "Split", "pattern",
      "Regex",
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      "behavior", "Isolated", "invert", 0, "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1, "use_regex",
      0, "decoder", "type", "ByteLevel", "add_prefix_space", 1, "trim_offsets", 1, "model", "type", "BPE", "vocab",
      vocab, "merges", "\xc4\xa0 t", "h e", "ignore_merges", 1);
  char *text = json_dumps(root, 0);
  json_decref(root);
  ot_tokenizer *tk = NULL;
  if (!text || ot_tokenizer_parse(text, strlen(text), "fuzz/fixed.json", &tk) != OT_OK) abort();
  free(text);
  return tk;
}


/* ids streamed one at a time (special ones skipped) make exactly their
 * decode, each piece whole UTF-8 (textstream.h's promise). */
static void stream_is_decode(const ot_tokenizer *tk, const int32_t *ids, size_t n) {
  char *dec = NULL;
  size_t dlen = 0;
  ot_text_stream *ts = NULL;
  if (ot_tokenizer_decode(tk, ids, n, 1, &dec, &dlen) != OT_OK || ot_text_stream_new(tk, 1, &ts) != OT_OK) abort();
  size_t at = 0;
  for (size_t i = 0; i <= n; i++) {
    const char *p;
    size_t k;
    if ((i < n ? ot_text_stream_push(ts, ids[i], &p, &k) : ot_text_stream_finish(ts, &p, &k)) != OT_OK) abort();
    if (!ot_utf8_valid(p, k) || at + k > dlen || memcmp(dec + at, p, k)) abort();
    at += k;
  }
  if (at != dlen) abort();
  ot_text_stream_destroy(ts);
  free(dec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  char *buf = ot_fuzz_copy(data + 1, size - 1);
  if (!buf) return 0;
  if (!(data[0] & 1)) {
    ot_tokenizer *tk = NULL;
    if (ot_tokenizer_parse(buf, size - 1, "fuzz/tokenizer.json", &tk) == OT_OK) {
      int32_t *ids = NULL;
      size_t n = 0;
      static const char text[] = "Hello, world! 123 😀 <|endoftext|>\r\n";
      if (ot_tokenizer_encode(tk, text, sizeof text - 1, 1, &ids, &n) == OT_OK) {
        char *back = NULL;
        if (ot_tokenizer_decode(tk, ids, n, 0, &back, NULL) == OT_OK) free(back);
        stream_is_decode(tk, ids, n);
        free(ids);
      }
      ot_tokenizer_destroy(tk);
    }
  } else {
    if (!fixed) fixed = make_fixed();
    int32_t *ids = NULL;
    size_t n = 0;
    if (ot_tokenizer_encode(fixed, buf, size - 1, 0, &ids, &n) == OT_OK) {
      char *back = NULL;
      size_t len = 0;
      if (ot_tokenizer_decode(fixed, ids, n, 0, &back, &len) != OT_OK) abort();
      if (len != size - 1 || memcmp(back, buf, len)) abort(); /* byte-level: lossless */
      free(back);
      free(ids);
    }
  }
  free(buf);
  return 0;
}
