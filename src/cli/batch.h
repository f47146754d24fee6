/* batch.h (internal) — `omptensor run MODEL --prompts IN.jsonl --out OUT.jsonl`. */
#ifndef OT_CLI_BATCH_H
#define OT_CLI_BATCH_H

#include "common.h"
#include "omptensor/tokenizer.h"

/* Runs every prompt of `in` whose id is not yet in `out`, appending one
 * result line per prompt to `out` as it finishes; returns the exit status
 * (0: all done; 2: some lines were bad or some prompts were refused, each
 * said on stderr with its line; 1: a failure while running stopped the
 * job, the finished lines kept). tk may be NULL (then text prompts are
 * refused line by line). */
/* n_slots (--batch N; 0: not given): decode up to N prompts at once with
 * ot_generate_batch, each line written as its prompt finishes; a prompt
 * the model refuses then stops the job (the finished lines kept). */
/* max_new_from: where g->max_new_tokens came from, for messages about a
 * line that gives none ("--max-new-tokens"). in "-": stdin; out "-":
 * stdout (nothing to resume from). Ctrl-C stops the job at the next token
 * (exit 130), the finished lines kept. */
int ot_cli_run_batch(ot_cli_session *s, const char *model, const ot_tokenizer *tk, const ot_gen_opts *g,
                     const char *max_new_from, const char *in, const char *out, int n_slots);

#endif
