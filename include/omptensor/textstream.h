/* textstream.h — token ids to text as they are generated, one piece at a time.
 *
 * A generated token is not always text on its own: byte-fallback tokens
 * (<0xF0><0x9F><0x98><0x80>) and byte-level tokens carry parts of one
 * character, a later byte can turn a whole run of byte tokens into U+FFFD,
 * and decoders such as Metaspace and Strip treat the text's start apart.
 * The stream hands out a stretch of ids only once later ids can no longer
 * change its text (a run of byte tokens when it ends, a byte-level
 * character when its last byte arrives), decoded as the continuation of
 * what came before, with transformers' clean-up (where the tokenizer has
 * it) held back only where " ." could still become ".". What every piece
 * put together makes is exactly ot_tokenizer_decode of all the ids, once
 * ot_text_stream_finish has handed out the rest; every piece is whole
 * UTF-8. (A decoder chain that rewrites the joined text, such as a Regex
 * Replace after ByteLevel, hands everything out at finish.)
 *
 *     ot_text_stream *ts;
 *     ot_text_stream_new(tk, 1, &ts);             // 1: skip special tokens
 *     for each new id:
 *       ot_text_stream_push(ts, id, &piece, &n);  // n may be 0
 *       fwrite(piece, 1, n, stdout);
 *     ot_text_stream_finish(ts, &piece, &n);      // what was held back
 *     ot_text_stream_destroy(ts);
 *
 * Each id is decoded once (or a few times while it waits): the cost of a
 * stream grows with its ids, not with their square.
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
/* Hands out what was held back; the stream ends (a later push is
 * OT_ERR_STATE; finishing again hands out nothing). */
ot_status ot_text_stream_finish(ot_text_stream *ts, const char **piece, size_t *n);

/* The text handed out so far, NUL-terminated (owned by the stream, valid
 * until the next call): after finish, the decode of all ids; and the ids
 * themselves. */
const char *ot_text_stream_text(const ot_text_stream *ts, size_t *len);
const int32_t *ot_text_stream_ids(const ot_text_stream *ts, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
