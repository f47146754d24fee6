/* batch.c — JSONL batch jobs: one prompt per line in, one result per line
 * out, resumable.
 *
 * An HPC job of thousands of prompts gets killed (time limit, preemption)
 * and rerun. So each result line is written whole with one write() and
 * flushed to disk before the next prompt starts; a rerun reads the ids
 * already in OUT and skips them, and cuts off a last line that a kill left
 * half-written. The input is read and checked first, all of it, before the
 * model is loaded: a bad line is reported with its number and the job goes
 * on without it.
 *
 * Input lines: {"id": ID, "prompt": "text"} or {"id": ID, "prompt_ids":
 * [1, 2, 3]}, optionally "max_new_tokens"; ID a string or an integer (the
 * line number when absent). Blank lines are skipped. Output lines: {"id",
 * "text" (with a tokenizer), "tokens", "prompt_tokens", "stopped" ("eos" or
 * "length"), "prefill_ms", "decode_ms", "tokens_per_second"}.
 *
 * Under mpirun / srun the ranks share the job (mpi_batch.h): every rank
 * reads IN (the same jobs, in the same order), rank 0 alone reads OUT and
 * names the prompts left, hands them out one at a time and writes every
 * rank's lines; with --batch N each rank takes every R-th of them (a
 * static split: ot_generate_batch wants its prompts at the start). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "mpi_batch.h"
#include "prompt.h"
#include "ranks.h"
#include "report.h"
#include "omptensor/hfconfig.h"
#include "omptensor/models.h"

#define BATCH_LINE_MAX ((size_t)64 << 20)

typedef struct job {
  char *key;  /* the id as compact JSON ("\"a\"", "7"): how OUT's lines are matched */
  json_t *id; /* as given, for the result line */
  long line;
  int32_t *ids;
  int n_ids;
  int max_new;
} job;

typedef struct batch {
  const char *model, *in, *out;
  const ot_tokenizer *tk;
  const ot_hf_config *cfg;
  const ot_gen_opts *g;
  job *jobs;
  size_t n, cap;
  char **done; /* sorted keys already in OUT */
  size_t n_done;
  long bad_lines; /* lines refused while reading IN */
  long refused;   /* prompts the model refused while running */
  int quiet;      /* a rank other than 0: the input's errors are rank 0's to print */
  size_t *todo;   /* [n_todo] the jobs not in OUT (indices into jobs), as rank 0 found them */
  size_t n_todo;
  size_t next;    /* one process: the next of todo to run */
  int fd;         /* OUT, appended to (rank 0 only) */
  ot_cli_queue *q; /* several ranks: rank 0's work queue and writer */
} batch;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void line_error(const batch *b, long line, const char *what) {
  if (b->quiet) return;
  ot_cli_progress_end();
  fprintf(stderr, "omptensor run: %s:%ld: %s\n", b->in, line, what);
}

static char *id_key(const json_t *id) { return json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT); }

/* One input line into a job, or a message in err. */
static ot_status parse_line(batch *b, const char *text, size_t len, long line, job *j) {
  json_error_t e;
  json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
  ot_status st = OT_OK;
  memset(j, 0, sizeof *j);
  j->line = line;
  j->max_new = b->g->max_new_tokens;
  if (!o) return ot_set_error(OT_ERR_FORMAT, "not JSON: %s (column %d)", e.text, e.column);
  if (!json_is_object(o)) {
    st = ot_set_error(OT_ERR_FORMAT, "a line is a JSON object, this is %s", json_is_array(o) ? "an array" : "a single value");
    goto done;
  }
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    if (strcmp(k, "id") && strcmp(k, "prompt") && strcmp(k, "prompt_ids") && strcmp(k, "max_new_tokens")) {
      st = ot_set_error(OT_ERR_FORMAT, "unknown key \"%s\" (a line has \"id\", \"prompt\" or \"prompt_ids\", and "
                                       "optionally \"max_new_tokens\")", k);
      goto done;
    }
  }
  json_t *id = json_object_get(o, "id"), *p = json_object_get(o, "prompt"), *pi = json_object_get(o, "prompt_ids"),
         *mn = json_object_get(o, "max_new_tokens");
  if (id && !json_is_string(id) && !json_is_integer(id)) {
    st = ot_set_error(OT_ERR_FORMAT, "\"id\" is a string or an integer");
    goto done;
  }
  j->id = id ? json_incref(id) : json_integer(line);
  j->key = id_key(j->id);
  if (!j->id || !j->key) {
    st = ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory");
    goto done;
  }
  if (!p == !pi) {
    st = ot_set_error(OT_ERR_FORMAT, "give exactly one of \"prompt\" (text) and \"prompt_ids\" (token ids)");
    goto done;
  }
  if (mn && (!json_is_integer(mn) || json_integer_value(mn) < 0 || json_integer_value(mn) > 1000000)) {
    st = ot_set_error(OT_ERR_FORMAT, "\"max_new_tokens\" is an integer from 0 to 1000000");
    goto done;
  }
  if (mn) j->max_new = (int)json_integer_value(mn);
  if (p) {
    size_t n = 0;
    if (!json_is_string(p)) st = ot_set_error(OT_ERR_FORMAT, "\"prompt\" is a string of text");
    else if (!b->tk)
      st = ot_set_error(OT_ERR_INVALID_ARG, "a text prompt needs the model's tokenizer.json, which %s does not have; "
                                            "give \"prompt_ids\"", b->model);
    else st = ot_tokenizer_encode(b->tk, json_string_value(p), json_string_length(p), 1, &j->ids, &n);
    if (st == OT_OK && (n == 0 || n > INT32_MAX))
      st = ot_set_error(OT_ERR_INVALID_ARG, "the prompt encodes to %s tokens", n ? "too many" : "no");
    j->n_ids = (int)n;
  } else {
    size_t n = json_is_array(pi) ? json_array_size(pi) : 0;
    if (!n || n > INT32_MAX) st = ot_set_error(OT_ERR_FORMAT, "\"prompt_ids\" is a non-empty array of token ids");
    else if (!(j->ids = malloc(n * sizeof *j->ids))) st = ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory");
    for (size_t i = 0; st == OT_OK && i < n; i++) {
      json_t *x = json_array_get(pi, i);
      if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
        st = ot_set_error(OT_ERR_FORMAT, "\"prompt_ids\"[%zu] is not a token id (an integer from 0)", i);
      else j->ids[i] = (int32_t)json_integer_value(x);
    }
    j->n_ids = (int)n;
  }
  if (st == OT_OK) st = ot_cli_check_prompt(b->cfg, b->model, j->ids, j->n_ids, j->max_new, "the prompt");
done:
  json_decref(o);
  return st;
}

static void job_free(job *j) {
  free(j->key);
  json_decref(j->id);
  free(j->ids);
}

static int is_blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
  return 1;
}

/* Every line of IN: jobs for the good ones, an error on stderr for the rest
 * (also for an id that repeats an earlier line's). */
static ot_status read_in(batch *b) {
  char *buf;
  size_t len;
  OT_TRY(ot_file_read(b->in, (size_t)1 << 30, &buf, &len));
  long line = 0;
  for (size_t at = 0; at < len;) {
    const char *nl = memchr(buf + at, '\n', len - at);
    size_t n = nl ? (size_t)(nl - (buf + at)) : len - at;
    const char *text = buf + at;
    at += n + (nl != NULL);
    line++;
    if (is_blank(text, n)) continue;
    if (b->n == b->cap) {
      size_t cap = b->cap ? 2 * b->cap : 64;
      job *g = realloc(b->jobs, cap * sizeof *g);
      if (!g) return free(buf), ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory for %zu prompts", b->in, cap);
      b->jobs = g;
      b->cap = cap;
    }
    job *j = &b->jobs[b->n];
    if (parse_line(b, text, n, line, j) != OT_OK) {
      line_error(b, line, ot_last_error());
      b->bad_lines++;
      job_free(j);
      continue;
    }
    int dup = 0;
    for (size_t i = 0; i < b->n && !dup; i++) /* fine for the thousands of lines of a job; see the note in README */
      if (!strcmp(b->jobs[i].key, j->key)) {
        char m[256];
        snprintf(m, sizeof m, "id %s repeats line %ld's; ids are how a rerun knows what is done", j->key,
                 b->jobs[i].line);
        line_error(b, line, m);
        b->bad_lines++;
        dup = 1;
      }
    if (dup) job_free(j);
    else b->n++;
  }
  free(buf);
  return OT_OK;
}

/* The ids in OUT, from an earlier run of the same job. A last line without
 * its newline was cut by a kill: it is cut off the file, and that prompt
 * runs again. */
static ot_status read_out(batch *b) {
  char *buf;
  size_t len;
  ot_status st = ot_file_read(b->out, (size_t)1 << 30, &buf, &len);
  if (st == OT_ERR_NOT_FOUND) return ot_clear_error(), OT_OK;
  OT_TRY(st);
  size_t keep = len;
  while (keep && buf[keep - 1] != '\n') keep--;
  if (keep < len) {
    if (truncate(b->out, (off_t)keep) != 0) {
      free(buf);
      return ot_set_error(OT_ERR_IO, "%s: cannot cut off its unfinished last line: %s", b->out, strerror(errno));
    }
    ot_cli_notice("%s: its last line was unfinished (a killed run); cut off, that prompt runs again", b->out);
  }
  long line = 0;
  for (size_t at = 0; at < keep;) {
    const char *nl = memchr(buf + at, '\n', keep - at);
    size_t n = (size_t)(nl - (buf + at));
    json_error_t e;
    json_t *o = json_loadb(buf + at, n, 0, &e), *id = json_object_get(o, "id");
    at += n + 1;
    line++;
    char *k = id ? id_key(id) : NULL;
    json_decref(o);
    if (!k) {
      free(buf);
      return ot_set_error(OT_ERR_FORMAT, "%s:%ld is not a result line (a JSON object with \"id\"); is --out another "
                                         "file? Give a new name, or move it away to start over",
                          b->out, line);
    }
    char **g = realloc(b->done, (b->n_done + 1) * sizeof *g);
    if (!g) return free(k), free(buf), ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory");
    b->done = g;
    b->done[b->n_done++] = k;
  }
  free(buf);
  qsort(b->done, b->n_done, sizeof *b->done, cmp_str);
  return OT_OK;
}

static int is_done(const batch *b, const char *key) {
  return b->n_done && bsearch(&key, b->done, b->n_done, sizeof *b->done, cmp_str) != NULL;
}

/* The whole line at once, then to disk: a kill leaves whole lines. */
static ot_status append(int fd, const char *path, const char *text) {
  size_t n = strlen(text);
  for (size_t w = 0; w < n;) {
    ssize_t k = write(fd, text + w, n - w);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return ot_set_error(OT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    w += (size_t)k;
  }
  if (fdatasync(fd) != 0 && errno != EINVAL)
    return ot_set_error(OT_ERR_IO, "%s: flush to disk failed: %s", path, strerror(errno));
  return OT_OK;
}

static ot_status write_line(void *user, const char *line) {
  const batch *b = user;
  return append(b->fd, b->out, line);
}

/* The position in todo of the next prompt to run (n_todo: none left). */
static ot_status next_job(batch *b, size_t *pos) {
  if (b->q) return ot_cli_queue_next(b->q, pos);
  *pos = b->next < b->n_todo ? b->next++ : b->n_todo;
  return OT_OK;
}

/* A finished prompt's line into OUT (through rank 0 with several ranks). */
static ot_status emit(batch *b, const char *line) { return b->q ? ot_cli_queue_emit(b->q, line) : write_line(b, line); }

static char *result_line(const job *j, const ot_gen_result *r) {
  json_t *o = json_object();
  json_object_set(o, "id", j->id);
  json_object_set_new(o, "prompt_tokens", json_integer(j->n_ids));
  ot_cli_json_gen(o, r);
  char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10));
  json_decref(o);
  if (!s) return NULL;
  size_t n = strlen(s);
  char *l = realloc(s, n + 2);
  if (!l) return free(s), NULL;
  l[n] = '\n';
  l[n + 1] = '\0';
  return l;
}

/* The prompts not done yet, in input order. A prompt the model refuses (its
 * plan does not fit the budget, NaN logits: exit-2 kinds) is reported and
 * skipped; anything else stops the job. */
static ot_status run_jobs(batch *b, ot_cli_session *s, ot_lm *m, size_t *ran) {
  ot_gen_opts g = *b->g;
  g.sched = s->sched;
  g.trace = s->trace;
  g.tokenizer = b->tk;
  g.hold_device = 1; /* the weights go up once for the whole job (released by ot_lm_destroy) */
  char who[48] = "";
  if (ot_cli_ranks(s) > 1) snprintf(who, sizeof who, " [rank %d/%d]", ot_cli_rank(s), ot_cli_ranks(s));
  for (size_t k = 1;; k++) {
    size_t pos;
    OT_TRY(next_job(b, &pos));
    if (pos >= b->n_todo) break;
    job *j = &b->jobs[b->todo[pos]];
    g.max_new_tokens = j->max_new;
    ot_gen_result r;
    ot_status st = ot_cli_budget_error(s, ot_generate(m, j->ids, j->n_ids, &g, &r));
    if (st != OT_OK && ot_cli_exit_code(st) == 2) {
      char msg[1024];
      snprintf(msg, sizeof msg, "id %s: %s", j->key, ot_last_error());
      line_error(b, j->line, msg);
      b->refused++;
      continue;
    }
    OT_TRY(st);
    char *l = result_line(j, &r);
    if (!l) st = ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for a result line");
    else st = emit(b, l);
    free(l);
    if (st == OT_OK) {
      (*ran)++;
      fprintf(stderr, "omptensor run%s: [%zu/%zu] id %s: %d tokens (%s), %.2f tokens/s\n", who, k, b->n_todo,
              j->key, r.n_tokens, r.stopped_at_eos ? "eos" : "length", r.decode_tokens_per_second);
    }
    ot_gen_result_free(&r);
    OT_TRY(st);
  }
  return OT_OK;
}

/* --batch N: the prompts not done yet through ot_generate_batch, up to N
 * at once; each result line is written (and flushed to disk) as its prompt
 * finishes, so a killed job keeps them as before. A sampled prompt draws
 * from its line number in IN (ot_gen_seq.stream): its tokens do not depend
 * on what shares its batch, nor on what a rerun skips. */
typedef struct batched {
  batch *b;
  job **jobs; /* [n] the jobs being run, in the order given */
  size_t n, ran;
  json_t *per; /* --json: each prompt's id, tokens and tokens/s */
  char who[48]; /* " [rank r/R]" with several ranks */
} batched;

static ot_status batched_done(void *user, int seq, const ot_gen_result *r) {
  batched *x = user;
  const job *j = x->jobs[seq];
  char *l = result_line(j, r);
  ot_status st = l ? emit(x->b, l) : ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for a result line");
  free(l);
  OT_TRY(st);
  x->ran++;
  fprintf(stderr, "omptensor run%s: [%zu/%zu] id %s: %d tokens (%s), %.2f tokens/s\n", x->who, x->ran, x->n, j->key,
          r->n_tokens, r->stopped_at_eos ? "eos" : "length", r->decode_tokens_per_second);
  if (x->per)
    json_array_append_new(x->per, json_pack("{s:O, s:i, s:f}", "id", j->id, "tokens", r->n_tokens, "tokens_per_second",
                                            r->decode_tokens_per_second));
  return OT_OK;
}

static ot_status run_jobs_batched(batch *b, ot_cli_session *s, ot_lm *m, int n_slots, size_t *ran,
                                  json_t **summary) {
  /* this rank's share: every R-th prompt left, from its rank on */
  const size_t R = (size_t)ot_cli_ranks(s), me = (size_t)ot_cli_rank(s);
  const size_t todo = b->n_todo > me ? (b->n_todo - me + R - 1) / R : 0;
  *ran = 0;
  if (!todo) return OT_OK;
  batched x = {.b = b, .n = todo};
  if (R > 1) snprintf(x.who, sizeof x.who, " [rank %zu/%zu]", me, R);
  ot_gen_seq *seqs = calloc(todo, sizeof *seqs);
  x.jobs = calloc(todo, sizeof *x.jobs);
  if (!seqs || !x.jobs) {
    free(seqs);
    free(x.jobs);
    return ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for %zu prompts", todo);
  }
  for (size_t k = 0; k < todo; k++) {
    job *j = &b->jobs[b->todo[me + k * R]];
    x.jobs[k] = j;
    seqs[k] = (ot_gen_seq){.prompt = j->ids, .n_prompt = j->n_ids, .max_new_tokens = j->max_new,
                           .stream = (uint64_t)j->line};
  }
  ot_gen_opts g = *b->g;
  g.sched = s->sched;
  g.trace = s->trace;
  g.tokenizer = b->tk;
  g.on_seq_done = batched_done;
  g.done_user = &x;
  if (s->settings.json) x.per = json_array();
  ot_gen_batch_result r;
  ot_status st = ot_cli_budget_error(s, ot_generate_batch(m, seqs, (int)todo, n_slots, &g, &r));
  *ran = x.ran;
  if (st == OT_OK) {
    fprintf(stderr, "omptensor run: %d prompts at once: %lld decode tokens in %.1f ms, %.2f tokens/s; %d prompt steps "
                    "(%.1f ms), %d decode steps\n",
            r.n_slots, (long long)r.decode_tokens, r.decode_ms, r.decode_tokens_per_second, r.prefill_steps,
            r.prefill_ms, r.decode_steps);
    if (x.per)
      *summary = json_pack("{s:i, s:I, s:f, s:f, s:i, s:f, s:i, s:f, s:o}", "slots", r.n_slots, "decode_tokens",
                           (json_int_t)r.decode_tokens, "decode_ms", r.decode_ms, "decode_tokens_per_second",
                           r.decode_tokens_per_second, "prefill_steps", r.prefill_steps, "prefill_ms", r.prefill_ms,
                           "decode_steps", r.decode_steps, "wall_ms", r.wall_ms, "sequences", x.per);
    else json_decref(x.per);
    if (*summary) ot_cli_json_probe(*summary, &r.decode_probe);
    ot_gen_batch_result_free(&r);
  } else {
    json_decref(x.per);
    if (ot_cli_exit_code(st) == 2) { /* the model refused: said with the job's lines, the finished ones kept */
      ot_cli_progress_end();
      fprintf(stderr, "omptensor run: %s: --batch %d stopped: %s (the finished prompts' lines are in %s; a rerun "
                      "goes on from there)\n", b->in, n_slots, ot_last_error(), b->out);
      b->refused++;
      st = OT_OK;
    }
  }
  free(seqs);
  free(x.jobs);
  return st;
}

/* The jobs not yet in OUT, in input order. */
static ot_status list_todo(batch *b) {
  b->todo = malloc((b->n ? b->n : 1) * sizeof *b->todo);
  if (!b->todo) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for %zu prompts", b->n);
  for (size_t i = 0; i < b->n; i++)
    if (!is_done(b, b->jobs[i].key)) b->todo[b->n_todo++] = i;
  return OT_OK;
}

/* Several ranks: rank 0's list of the jobs left, to every rank (the
 * others have read IN alike, so an index names the same job there). */
static ot_status share_todo(batch *b, ot_comm *c) {
  uint64_t n = b->n_todo;
  OT_TRY(ot_comm_bcast(c, &n, sizeof n, 0));
  if (n > b->n) return ot_set_error(OT_ERR_STATE, "rank 0 has %llu prompts left of %zu in %s", (unsigned long long)n, b->n, b->in);
  uint64_t *v = malloc((n ? n : 1) * sizeof *v);
  size_t *t = ot_comm_rank(c) ? malloc((n ? n : 1) * sizeof *t) : b->todo;
  ot_status st = v && t ? OT_OK : ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for %llu prompts", (unsigned long long)n);
  for (size_t i = 0; st == OT_OK && ot_comm_rank(c) == 0 && i < n; i++) v[i] = b->todo[i];
  if (st == OT_OK) st = ot_comm_bcast(c, v, n * sizeof *v, 0);
  for (size_t i = 0; st == OT_OK && i < n; i++) {
    if (v[i] >= b->n) st = ot_set_error(OT_ERR_STATE, "rank 0 names prompt %llu of %zu", (unsigned long long)v[i], b->n);
    else t[i] = (size_t)v[i];
  }
  free(v);
  if (t != b->todo) {
    free(b->todo);
    b->todo = t;
  }
  b->n_todo = (size_t)n;
  return st;
}

int ot_cli_run_batch(ot_cli_session *s, const char *model, const ot_tokenizer *tk, const ot_gen_opts *g,
                     const char *in, const char *out, int n_slots) {
  const char *prog = "omptensor run";
  const int R = ot_cli_ranks(s), root = ot_cli_is_root(s);
  ot_hf_config cfg;
  batch b = {.model = model, .in = in, .out = out, .tk = tk, .cfg = &cfg, .g = g, .quiet = !root, .fd = -1};
  ot_status st = ot_hf_config_load(model, &cfg);
  /* OUT is rank 0's alone: it reads what is done (first: a wrong --out is the user's to fix before anything
   * runs), names what is left and writes every line */
  if (st == OT_OK && root) st = read_out(&b);
  if (st == OT_OK) st = read_in(&b);
  if (st == OT_OK) st = list_todo(&b);
  if (st == OT_OK && root && b.n_todo) {
    b.fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (b.fd < 0) st = ot_set_error(OT_ERR_IO, "--out %s: cannot open for appending: %s", out, strerror(errno));
  }
  if (st == OT_OK) st = ot_cli_session_start(s);
  if (st == OT_OK) st = ot_cli_check_trace(s);
  ot_lm *m = NULL;
  /* with several ranks only rank 0 knows yet whether anything is left: each loads the model */
  if (st == OT_OK && (b.n_todo || R > 1))
    st = ot_model_load(s->ctx, model, ot_cli_weight_dtype(&s->settings), ot_cli_progress, s, &m);
  int quiet = 0;
  if (R > 1) {
    st = ot_cli_ranks_agree(s, st, &quiet); /* every rank starts the work, or none does */
    if (st == OT_OK) st = share_todo(&b, s->comm);
    if (st == OT_OK) st = ot_cli_queue_start(s->comm, b.n_todo, write_line, &b, &b.q);
  }
  if (st == OT_OK) ot_cli_input_accepted();
  json_t *summary = NULL;
  size_t ran = 0;
  if (st == OT_OK && b.n_todo)
    st = n_slots ? run_jobs_batched(&b, s, m, n_slots, &ran, &summary) : run_jobs(&b, s, m, &ran);
  if (b.q) { /* this rank's last line is out; rank 0 waits for every rank's */
    ot_status f = ot_cli_queue_finish(b.q);
    if (st == OT_OK) st = f;
  }
  if (st == OT_OK && s->settings.trace_path) st = ot_trace_write_chrome(s->trace, s->settings.trace_path);
  if (b.fd >= 0) close(b.fd);
  ot_lm_destroy(m);
  /* several ranks: the job's counts and its worst status, by every rank (rank 0 prints them) */
  int64_t tot[2] = {(int64_t)ran, b.refused};
  if (R > 1 && b.q) {
    if (ot_comm_allreduce_i64(s->comm, tot, 2, 0) != OT_OK && st == OT_OK) st = OT_ERR_IO;
    st = ot_cli_ranks_agree(s, st, &quiet);
  }
  const long refused = b.bad_lines + (long)tot[1];
  const size_t lines = b.n + (size_t)b.bad_lines, done_now = (size_t)tot[0];
  int rc = st == OT_OK ? (refused ? 2 : 0) : quiet ? ot_cli_exit_code(st) : ot_cli_fail(prog, st);
  if (root && (st == OT_OK || rc == 1)) {
    char ranks[48] = "";
    if (R > 1) snprintf(ranks, sizeof ranks, " by %d ranks", R);
    fprintf(stderr, "omptensor run: %s: %zu prompts: %zu done now%s, %zu already in %s, %ld refused%s\n", in, lines,
            done_now, ranks, b.n - b.n_todo, out, refused, refused ? " (see above)" : "");
    if (st == OT_OK && s->settings.json) {
      /* the setup and the memory summary of the whole job (budget, peak device bytes, transfers), as a
       * single run's --json has them (rank 0's with several ranks), then the job's counts */
      const ot_trace_summary t = ot_trace_summarize(s->trace);
      json_t *o = ot_cli_json_base(s, model, &t);
      json_t *counts = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:i}", "kv_dtype",
                                 ot_dtype_name(s->settings.gen.kv_dtype), "prompts_file", in, "out", out, "prompts",
                                 (json_int_t)lines, "done_now", (json_int_t)done_now, "already_done",
                                 (json_int_t)(b.n - b.n_todo), "refused", (json_int_t)refused, "ranks", R);
      if (o && (!counts || json_object_update(o, counts))) o = (json_decref(o), NULL);
      json_decref(counts);
      if (o && summary) json_object_set(o, "batch", summary); /* --batch N: the aggregate and each prompt's rate */
      ot_cli_json_print(o);
    }
  }
  json_decref(summary);
  for (size_t i = 0; i < b.n; i++) job_free(&b.jobs[i]);
  free(b.jobs);
  free(b.todo);
  for (size_t i = 0; i < b.n_done; i++) free(b.done[i]);
  free(b.done);
  return ot_cli_ranks_exit(s, rc);
}
