/* gpt2t_data.h — a stream of training tokens from a file, cut into
 * windows of B sequences of T tokens with their next-token targets.
 *
 *     gpt2t_data *d;
 *     gpt2t_data_open("train.bin", cfg->vocab_size, &d);
 *     int32_t in[B * T], tg[B * T];
 *     gpt2t_data_next(d, B, T, in, tg);   // tg[i] = the token after in[i]
 *     gpt2t_data_close(d);
 *
 * Formats, by content (not by name):
 *   - llm.c's .bin: a header of 256 little-endian int32 (magic 20240520,
 *     version 1, number of tokens, the rest unused), then that many uint16;
 *   - .npy: a 1-D array of int32, int64 or uint16.
 * Every id is checked against the vocabulary when the file is opened, so a
 * bad file fails before any step runs. The whole file is held in memory as
 * int32 (4 bytes per token). */
#ifndef OT_SAMPLES_GPT2T_DATA_H
#define OT_SAMPLES_GPT2T_DATA_H

#include <stdint.h>

#include "omptensor/status.h"

#define GPT2T_BIN_MAGIC 20240520
#define GPT2T_BIN_VERSION 1
#define GPT2T_BIN_HEADER_INTS 256

typedef struct gpt2t_data gpt2t_data;

/* Reads and validates the whole file. Errors name the file and what is
 * wrong: OT_ERR_NOT_FOUND / OT_ERR_IO (cannot read), OT_ERR_FORMAT (bad
 * magic, version, size, .npy not 1-D, an id outside [0, vocab)). */
ot_status gpt2t_data_open(const char *path, int64_t vocab, gpt2t_data **out);
void gpt2t_data_close(gpt2t_data *d); /* NULL is fine */

int64_t gpt2t_data_tokens(const gpt2t_data *d);

/* The next window of B*T+1 consecutive tokens: inputs [B*T] (row-major
 * [B, T]) are its first B*T, targets [B*T] the same shifted by one. The
 * next call starts B*T tokens later (the last token of a window is the
 * first of the next, as in llm.c's loader). OT_ERR_INVALID_ARG if the file
 * holds fewer than B*T+1 tokens. */
ot_status gpt2t_data_next(gpt2t_data *d, int B, int T, int32_t *inputs, int32_t *targets);

/* Back to the first token. */
void gpt2t_data_rewind(gpt2t_data *d);

#endif
