/* fuzz_batch.c — a batch job's files (issue 43): the command's reader of
 * the prompts file IN and of the results file OUT that a rerun resumes
 * from (src/cli/jobfile.c, built into this target: the command's code, not
 * the library's). The input is IN, a NUL byte, then OUT (no NUL byte: IN
 * alone, OUT absent); the model is a fixed config of 256 ids and 64
 * positions, without a tokenizer (a text prompt is refused by name).
 *
 * Promises checked: every line of IN is counted once, a job or a refusal
 * (blank lines neither); a job has 1.. ids inside the vocabulary, a
 * max_new_tokens that fits the positions and an id no other job has; OUT is
 * either refused as OT_ERR_FORMAT (nothing to keep) or read to a length
 * that ends at a newline (or 0), with no newline after it, marking at
 * most one job done per whole line. */
#include <stdio.h>

#include "fuzz_common.h"
#include "jobfile.h"

static long counted;

static void on_bad(void *user, long line, const char *why) {
  (void)user, (void)line;
  if (!why || !why[0]) abort(); /* a refusal says why */
  counted++;
}

static int is_blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
  return 1;
}

/* Lines of IN that are not blank (the reader's own rule, restated). */
static long non_blank_lines(const char *s, size_t n) {
  long k = 0;
  for (size_t at = 0; at < n;) {
    const char *nl = memchr(s + at, '\n', n - at);
    const size_t len = nl ? (size_t)(nl - (s + at)) : n - at;
    k += !is_blank(s + at, len);
    at += len + (nl != NULL);
  }
  return k;
}

static void check_jobs(ot_cli_jobs *J, const ot_hf_config *cfg) {
  for (size_t i = 0; i < J->n; i++) {
    const ot_cli_job *j = &J->jobs[i];
    if (j->n_ids < 1 || !j->key || !j->id || j->line < 1 || j->line > J->lines) abort();
    if ((int64_t)j->n_ids + j->max_new > cfg->max_position_embeddings || j->max_new < 0) abort();
    for (int k = 0; k < j->n_ids; k++)
      if (j->ids[k] < 0 || j->ids[k] >= cfg->vocab_size) abort();
    long at = -2;
    if (!ot_cli_idmap_get(&J->ids, j->key, &at) || at != (long)i) abort(); /* its own id, no one else's */
  }
}

static void check_out(ot_cli_jobs *J, const char *out, size_t n) {
  unsigned char *done = calloc(J->n ? J->n : 1, 1);
  if (!done) return;
  size_t keep = (size_t)-1;
  ot_status st = ot_cli_out_scan(J, "out.jsonl", out, n, done, &keep);
  if (st == OT_OK) {
    if (keep > n || (keep && out[keep - 1] != '\n') || memchr(out + keep, '\n', n - keep)) abort();
    size_t lines = 0, marked = 0;
    for (size_t i = 0; i < keep; i++) lines += out[i] == '\n';
    for (size_t i = 0; i < J->n; i++) marked += done[i] != 0;
    if (marked > lines) abort();
  } else if (st != OT_ERR_FORMAT && st != OT_ERR_OUT_OF_MEMORY) {
    abort();
  } else if (keep != (size_t)-1) {
    abort(); /* refused: nothing kept or cut */
  }
  free(done);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *sep = memchr(data, 0, size);
  const size_t n_in = sep ? (size_t)(sep - data) : size;
  char *in = ot_fuzz_copy(data, n_in), *out = sep ? ot_fuzz_copy(sep + 1, size - n_in - 1) : NULL;
  ot_hf_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.vocab_size = 256;
  cfg.max_position_embeddings = 64;
  ot_cli_jobs J = {.model = "fuzz-model", .cfg = &cfg, .max_new = 8, .max_new_from = "--max-new-tokens",
                   .on_bad = on_bad};
  counted = 0;
  if (in && ot_cli_jobs_read(&J, in, n_in) == OT_OK) {
    if ((long)J.n + counted != non_blank_lines(in, n_in) || counted != J.bad) abort();
    check_jobs(&J, &cfg);
    if (out) check_out(&J, out, size - n_in - 1);
  }
  ot_cli_jobs_free(&J);
  free(in);
  free(out);
  return 0;
}
