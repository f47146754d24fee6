/* model_test.h — running the reference models of tests/data/models in tests. */
#ifndef OT_MODEL_TEST_H
#define OT_MODEL_TEST_H

#include <stdint.h>

#include "omptensor/lm.h"
#include "omptensor/npy.h"

/* $OT_TEST_DATA/models/<set>[/<file>], malloc'd. */
char *ot_test_model_path(const char *set, const char *file);

typedef struct ot_test_gen {
  ot_npy_array logits; /* f32 [n_prompt, vocab] of the prompt; ot_npy_free it */
  int32_t tokens[64];
  int n_tokens;
  uint64_t weight_bytes; /* the loaded model's */
} ot_test_gen;

/* Loads reference set `set` into ctx and generates n_gen (<= 64) greedy tokens
 * from the prompt under `strategy`, recording into tr (the caller checks the
 * trace against its budgets); fails the test on any error. */
void ot_test_generate(ot_ctx *ctx, const char *set, const int32_t *prompt, int n_prompt, int n_gen,
                      ot_strategy strategy, ot_trace *tr, ot_test_gen *out);

/* The same with the weights stored as `dtype` (OT_DTYPE_KEEP: as in the
 * checkpoint) under a device budget (0: the context's). */
void ot_test_generate_as(ot_ctx *ctx, const char *set, ot_dtype dtype, const int32_t *prompt, int n_prompt, int n_gen,
                         ot_strategy strategy, uint64_t budget, ot_trace *tr, ot_test_gen *out);

/* Runs `set` as `dtype` again under a budget a third of ref's weight bytes
 * (aggressive offload) and fails unless the trace holds the budget, shows
 * evictions, and the prompt logits and tokens are bitwise ref's (the
 * unlimited run of the same set, prompt and n_gen). */
void ot_test_expect_streamed_same(ot_ctx *ctx, const char *set, ot_dtype dtype, const int32_t *prompt, int n_prompt,
                                  int n_gen, const ot_test_gen *ref);

/* A reference set's manifest.json: its prompt and transformers' greedy tokens. */
typedef struct ot_test_manifest {
  int32_t prompt[64];
  int n_prompt;
  int32_t gen[64];
  int n_gen;
} ot_test_manifest;
void ot_test_read_manifest(const char *set, ot_test_manifest *m);

/* Fails the test unless `got` (f32 [n_prompt, vocab]) is finite and within
 * tol_rel x the logit range of the set's logits.npy; `what` names the run. */
void ot_test_expect_logits(const char *set, const ot_npy_array *got, double tol_rel, const char *what);

#endif
