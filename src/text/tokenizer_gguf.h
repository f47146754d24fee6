/* tokenizer_gguf.h (internal) — what tokenizer_gguf.c (a tokenizer from a
 * GGUF file's metadata) and tokenizer_gguf_merges.c (merges for a
 * sentencepiece vocabulary) share. */
#ifndef OT_TEXT_TOKENIZER_GGUF_H
#define OT_TEXT_TOKENIZER_GGUF_H

#include "text/tokenizer_internal.h"

/* The vocabulary as read from tokenizer.ggml.tokens and .scores, checked:
 * n tokens, each valid UTF-8 (borrowed from the ot_gguf), their scores
 * (NULL: none in the file) and token -> id (the last id of a repeated
 * token, as transformers' {token: index} dict keeps it). */
typedef struct ot_tok_gguf {
  int32_t n;
  const char **tok;
  size_t *len;
  double *score;
  ot_strmap vocab;
} ot_tok_gguf;

/* The merges (pairs of ids: left, right, left, right, ...; malloc'ed) that
 * transformers generates from the vocabulary and the scores, best first. */
ot_status ot_tok_gguf_merges(const ot_tok_gguf *t, int32_t **pairs, size_t *n_pairs);

#endif
