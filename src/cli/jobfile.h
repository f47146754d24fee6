/* jobfile.h (internal) — the two files of a batch job (batch.c): IN, one
 * prompt per line, and OUT, one result per line. Read here, apart from the
 * run, so that the fuzzers and the tests reach them without a model.
 *
 * OUT is this job's result file when every complete line of it is a result
 * line of this job — a JSON object whose "id" is an id of IN and whose
 * "tokens" is an array — and it is empty, or holds such lines, or holds
 * only part of a first line that begins as this job's result lines do
 * ({"id":ID, with ID an id of IN: a kill inside the first write). Only such
 * a file is changed: a last line without its newline (a kill inside a
 * write) is cut off, and results are appended. Anything else is refused
 * untouched, naming the file and its line. */
#ifndef OT_CLI_JOBFILE_H
#define OT_CLI_JOBFILE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "omptensor/hfconfig.h"
#include "omptensor/status.h"
#include "omptensor/tokenizer.h"

/* Ids (as compact JSON text) to a number: a hash table with open
 * addressing, so that reading a job costs its size, not its size squared.
 * `probes` counts the slots looked at (tests bound the cost by it). */
typedef struct ot_cli_idslot {
  char *key; /* NULL: empty */
  uint64_t hash;
  long value;
} ot_cli_idslot;

typedef struct ot_cli_idmap {
  ot_cli_idslot *slot;
  size_t cap, n; /* cap a power of two */
  uint64_t probes;
} ot_cli_idmap;

/* 1 and *value (may be NULL) when key is in m; 0 otherwise. */
int ot_cli_idmap_get(ot_cli_idmap *m, const char *key, long *value);
/* Adds key (copied) with value, or sets key's value. OT_ERR_OUT_OF_MEMORY. */
ot_status ot_cli_idmap_put(ot_cli_idmap *m, const char *key, long value);
void ot_cli_idmap_free(ot_cli_idmap *m); /* m may be all zero */

typedef struct ot_cli_job {
  char *key;  /* the id as compact JSON ("\"a\"", "7"): how OUT's lines are matched */
  json_t *id; /* as given (the line number when absent), for the result line */
  long line;
  int32_t *ids;
  int n_ids;
  int max_new;
} ot_cli_job;

typedef struct ot_cli_jobs {
  /* what each line is checked against (the caller's) */
  const char *model;          /* the model's name in messages */
  const ot_tokenizer *tk;     /* NULL: a text prompt is refused (give "prompt_ids") */
  const ot_hf_config *cfg;    /* the vocabulary and the positions */
  int max_new;                /* max_new_tokens of a line that gives none */
  const char *max_new_from;   /* where that value comes from, in messages ("--max-new-tokens") */
  void (*on_bad)(void *user, long line, const char *why); /* a refused line; may be NULL */
  void *user;
  /* what was read */
  ot_cli_job *jobs;           /* [n] the good lines, in order */
  size_t n, cap;
  long lines, bad;            /* lines read (blank ones too), lines refused */
  ot_cli_idmap ids;           /* every id of IN (a refused line's too, where it was read) -> its job, or -1 */
} ot_cli_jobs;

/* Each line of IN's text (len bytes; NUL bytes are bytes): a job for a good
 * one, on_bad for any other, also for an id that repeats an earlier good
 * line's (ids are how a rerun knows what is done). Blank lines are skipped.
 * Fails only when out of memory. */
ot_status ot_cli_jobs_read(ot_cli_jobs *J, const char *buf, size_t len);
void ot_cli_jobs_free(ot_cli_jobs *J);

/* OUT's text (len bytes) against the job read into J (above): done[i] = 1
 * for each job i it holds (done has J->n entries), *keep the bytes that
 * stay (len, or less when its last line has no newline). OT_ERR_FORMAT
 * naming `out` and why when it is not this job's result file. */
ot_status ot_cli_out_scan(ot_cli_jobs *J, const char *out, const char *buf, size_t len, unsigned char *done,
                          size_t *keep);

#endif
