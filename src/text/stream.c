/* stream.c — see textstream.h. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "omptensor/textstream.h"

struct ot_text_stream {
  const ot_tokenizer *tk;
  int skip_special;
  int32_t *ids;
  size_t n, cap;
  char *text; /* decode of ids[0 .. n-1] */
  size_t len;
  size_t out; /* bytes of text handed out */
};

ot_status ot_text_stream_new(const ot_tokenizer *tk, int skip_special, ot_text_stream **out) {
  if (!tk || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_text_stream_new: NULL argument");
  ot_text_stream *ts = calloc(1, sizeof *ts);
  if (!ts || !(ts->text = calloc(1, 1))) {
    free(ts);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "text stream: no host memory");
  }
  ts->tk = tk;
  ts->skip_special = skip_special;
  *out = ts;
  return OT_OK;
}

void ot_text_stream_destroy(ot_text_stream *ts) {
  if (!ts) return;
  free(ts->ids);
  free(ts->text);
  free(ts);
}

/* The length of the part of s that later ids cannot change: s less what
 * may still become something else at its end — U+FFFD (a byte sequence the
 * decoder could not complete yet), the first bytes of a character that has
 * not all arrived (decoders that pass bytes through), and ASCII spaces
 * (transformers' clean-up joins " ." into "."; a space also shows with the
 * word after it soon enough). Repeated, since they can alternate. */
static size_t settled(const char *s, size_t n) {
  for (;;) {
    if (n >= 3 && !memcmp(s + n - 3, "\xEF\xBF\xBD", 3)) {
      n -= 3;
      continue;
    }
    if (n && s[n - 1] == ' ') {
      n--;
      continue;
    }
    /* an incomplete sequence: a lead byte within the last 3 whose length
     * runs past the end, with only continuation bytes after it */
    size_t k = 1;
    while (k <= 3 && k <= n && ((unsigned char)s[n - k] & 0xC0) == 0x80) k++;
    if (k <= 3 && k <= n) {
      unsigned char c = (unsigned char)s[n - k];
      size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (want > k) {
        n -= k;
        continue;
      }
    }
    return n;
  }
}

/* Decodes all ids and hands out text[out .. upto), where upto is settled()
 * or everything (finish). */
static ot_status advance(ot_text_stream *ts, int all, const char **piece, size_t *n) {
  char *t;
  size_t len;
  OT_TRY(ot_tokenizer_decode(ts->tk, ts->ids, ts->n, ts->skip_special, &t, &len));
  /* What was handed out cannot be taken back. The decoders in use only
   * change text at its end (settled() holds that back), so the new text
   * starts with it; if a decoder ever rewrote earlier text, the stream goes
   * on from the same offset and the caller's full decode
   * (ot_text_stream_text) stays the authority. */
  size_t upto = all ? len : settled(t, len);
  free(ts->text);
  ts->text = t;
  ts->len = len;
  *piece = t + (ts->out < len ? ts->out : len);
  *n = upto > ts->out ? upto - ts->out : 0;
  if (upto > ts->out) ts->out = upto;
  return OT_OK;
}

ot_status ot_text_stream_push(ot_text_stream *ts, int32_t id, const char **piece, size_t *n) {
  if (!ts || !piece || !n) return ot_fail(OT_ERR_INVALID_ARG, "ot_text_stream_push: NULL argument");
  *piece = "";
  *n = 0;
  if (ts->n == ts->cap) {
    size_t cap = ts->cap ? 2 * ts->cap : 256;
    int32_t *g = realloc(ts->ids, cap * sizeof *g);
    if (!g) return ot_fail(OT_ERR_OUT_OF_MEMORY, "text stream: no host memory for %zu ids", cap);
    ts->ids = g;
    ts->cap = cap;
  }
  ts->ids[ts->n++] = id;
  ot_status st = advance(ts, 0, piece, n);
  if (st != OT_OK) ts->n--;
  return st;
}

ot_status ot_text_stream_finish(ot_text_stream *ts, const char **piece, size_t *n) {
  if (!ts || !piece || !n) return ot_fail(OT_ERR_INVALID_ARG, "ot_text_stream_finish: NULL argument");
  return advance(ts, 1, piece, n);
}

const char *ot_text_stream_text(const ot_text_stream *ts, size_t *len) {
  if (len) *len = ts ? ts->len : 0;
  return ts ? ts->text : "";
}

const int32_t *ot_text_stream_ids(const ot_text_stream *ts, size_t *n) {
  if (n) *n = ts ? ts->n : 0;
  return ts ? ts->ids : NULL;
}
