/* tokens.h — a stream of training tokens from a file, cut into
 * windows of B sequences of T tokens with their next-token targets.
 *
 *     ot_tokens *d;
 *     ot_tokens_open("train.bin", cfg->vocab_size, &d);
 *     int32_t in[B * T], tg[B * T];
 *     ot_tokens_next(d, B, T, in, tg);   // tg[i] = the token after in[i]
 *     ot_tokens_close(d);
 *
 * Formats, by content (not by name):
 *   - llm.c's .bin: a header of 256 little-endian int32 (magic 20240520,
 *     version 1, number of tokens, the rest unused), then that many uint16;
 *   - .npy: a 1-D array of int32, int64 or uint16.
 * Every id is checked against the vocabulary when the file is opened, so a
 * bad file fails before any step runs. The whole file is held in memory as
 * int32 (4 bytes per token). */
#ifndef OMPTENSOR_TOKENS_H
#define OMPTENSOR_TOKENS_H

#include <stdint.h>

#include "omptensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OT_TOKENS_BIN_MAGIC 20240520
#define OT_TOKENS_BIN_VERSION 1
#define OT_TOKENS_BIN_HEADER_INTS 256

typedef struct ot_tokens ot_tokens;

/* Reads and validates the whole file. Errors name the file and what is
 * wrong: OT_ERR_NOT_FOUND / OT_ERR_IO (cannot read), OT_ERR_FORMAT (bad
 * magic, version, size, .npy not 1-D, an id outside [0, vocab)). */
ot_status ot_tokens_open(const char *path, int64_t vocab, ot_tokens **out);
void ot_tokens_close(ot_tokens *d); /* NULL is fine */

int64_t ot_tokens_count(const ot_tokens *d);

/* The next window of B*T+1 consecutive tokens: inputs [B*T] (row-major
 * [B, T]) are its first B*T, targets [B*T] the same shifted by one. The
 * next call starts B*T tokens later (the last token of a window is the
 * first of the next, as in llm.c's loader). OT_ERR_INVALID_ARG if the file
 * holds fewer than B*T+1 tokens. */
ot_status ot_tokens_next(ot_tokens *d, int B, int T, int32_t *inputs, int32_t *targets);

/* Back to the first token. */
void ot_tokens_rewind(ot_tokens *d);

#ifdef __cplusplus
}
#endif
#endif
