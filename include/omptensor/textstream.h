/* textstream.h — token ids to text as they are generated, one piece at a time.
 *
 * A generated token is not always text on its own: byte-fallback tokens
 * (<0xF0><0x9F><0x98><0x80>) and byte-level tokens carry parts of one
 * character, and decoders such as Metaspace treat the first token apart.
 * The stream decodes the whole sequence so far, as ot_tokenizer_decode
 * would, and hands out only what can no longer change: the bytes after the
 * part already handed out, less a trailing incomplete character (which the
 * decoders show as U+FFFD until its last byte arrives). What every piece
 * put together makes is exactly the decode of all the ids, once
 * ot_text_stream_finish has handed out the rest.
 *
 *     ot_text_stream *ts;
 *     ot_text_stream_new(tk, 1, &ts);             // 1: skip special tokens
 *     for each new id:
 *       ot_text_stream_push(ts, id, &piece, &n);  // n may be 0
 *       fwrite(piece, 1, n, stdout);
 *     ot_text_stream_finish(ts, &piece, &n);      // what was held back
 *     ot_text_stream_destroy(ts);
 *
 * The cost of a push grows with the tokens so far (a decode of all of them):
 * microseconds for the thousands of tokens a generation makes.
 */
#ifndef OMPTENSOR_TEXTSTREAM_H
#define OMPTENSOR_TEXTSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/status.h"
#include "omptensor/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ot_text_stream ot_text_stream;

/* The tokenizer must outlive the stream. */
ot_status ot_text_stream_new(const ot_tokenizer *tk, int skip_special, ot_text_stream **out);
void ot_text_stream_destroy(ot_text_stream *ts); /* NULL is fine */

/* Adds one id; *piece (owned by the stream, valid until the next call) and
 * *n are the text that became final. An id outside the vocabulary is
 * OT_ERR_INVALID_ARG and leaves the stream as it was. */
ot_status ot_text_stream_push(ot_text_stream *ts, int32_t id, const char **piece, size_t *n);
/* Hands out what was held back; the stream can go on afterwards. */
ot_status ot_text_stream_finish(ot_text_stream *ts, const char **piece, size_t *n);

/* The decode of all ids so far (owned by the stream, valid until the next
 * call) and the ids themselves. */
const char *ot_text_stream_text(const ot_text_stream *ts, size_t *len);
const int32_t *ot_text_stream_ids(const ot_text_stream *ts, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
