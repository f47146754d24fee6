/* batch.c — JSONL batch jobs: one prompt per line in, one result per line
 * out, resumable.
 *
 * An HPC job of thousands of prompts gets killed (time limit, preemption)
 * and rerun. So each result line is written whole with one write() and
 * flushed to disk before the next prompt starts; a rerun reads the ids
 * already in OUT and skips them, and cuts off a last line that a kill left
 * half-written — once OUT is known to be this job's result file
 * (jobfile.h); any other file is refused untouched. The input is read and
 * checked first, all of it, before the model is loaded: a bad line is
 * reported with its number and the job goes on without it. Ctrl-C stops
 * the job at the next token: the prompt being generated is not written,
 * the finished lines stay, exit 130.
 *
 * Input lines: {"id": ID, "prompt": "text"} or {"id": ID, "prompt_ids":
 * [1, 2, 3]}, optionally "max_new_tokens"; ID a string or an integer (the
 * line number when absent). Blank lines are skipped. Output lines: {"id"
 * (first), "prompt_tokens", "tokens", "text" (with a tokenizer), "stopped"
 * ("eos" or "length"), "tokens_per_second", "prefill_ms", "decode_ms"}. IN
 * "-" is stdin, OUT "-" stdout (nothing to resume from).
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
#include "interrupt.h"
#include "jobfile.h"
#include "mpi_batch.h"
#include "prompt.h"
#include "ranks.h"
#include "report.h"
#include "omptensor/hfconfig.h"
#include "omptensor/models.h"

#define BATCH_IN_MAX ((size_t)1 << 30)

typedef struct batch {
  const char *model, *in, *out;
  const char *in_name, *out_name; /* in messages: the paths, or "stdin" / "stdout" for - */
  const ot_gen_opts *g;
  ot_cli_jobs J;           /* IN's prompts (jobfile.h) */
  unsigned char *done;     /* [J.n] 1: already in OUT */
  long refused;            /* prompts the model refused while running */
  int quiet;               /* a rank other than 0: the input's errors are rank 0's to print */
  size_t *todo;            /* [n_todo] the jobs not in OUT (indices into J.jobs), as rank 0 found them */
  size_t n_todo;
  size_t next;             /* one process: the next of todo to run */
  int fd;                  /* OUT, appended to (rank 0 only) */
  ot_cli_queue *q;         /* several ranks: rank 0's work queue and writer */
} batch;

static int is_dash(const char *path) { return !strcmp(path, "-"); }

static void line_error(const batch *b, long line, const char *what) {
  if (b->quiet) return;
  ot_cli_progress_end();
  fprintf(stderr, "omptensor run: %s:%ld: %s\n", b->in_name, line, what);
}

static void on_bad_line(void *user, long line, const char *why) { line_error(user, line, why); }

/* --out naming the file --prompts reads (the same name, a link to it, or
 * stdout redirected into it) would append results to the prompts: refused
 * before either is read. Only regular files are compared (a terminal is
 * both stdin and stdout). */
static ot_status check_not_input(const batch *b) {
  struct stat si, so;
  const int in_ok = is_dash(b->in) ? fstat(STDIN_FILENO, &si) == 0 : stat(b->in, &si) == 0;
  const int out_ok = is_dash(b->out) ? fstat(STDOUT_FILENO, &so) == 0 : stat(b->out, &so) == 0;
  if (in_ok && out_ok && S_ISREG(si.st_mode) && S_ISREG(so.st_mode) && si.st_dev == so.st_dev &&
      si.st_ino == so.st_ino)
    return ot_set_error(OT_ERR_INVALID_ARG, "--out %s is the file --prompts %s reads (the same device and inode): "
                                            "the results would go into the prompts; give --out another file",
                        b->out_name, b->in_name);
  return OT_OK;
}

/* Every line of IN: jobs for the good ones, an error on stderr for the rest. */
static ot_status read_in(batch *b) {
  char *buf;
  size_t len;
  OT_TRY(ot_cli_read_text(b->in, BATCH_IN_MAX, &buf, &len)); /* "-": stdin */
  ot_status st = ot_cli_jobs_read(&b->J, buf, len);
  free(buf);
  return st;
}

/* What OUT, from an earlier run of the same job, already holds
 * (jobfile.h: only this job's result file is read, or changed). A last
 * line without its newline was cut by a kill: it is cut off the file, and
 * that prompt runs again. --out - (stdout) holds nothing to read. */
static ot_status read_out(batch *b) {
  b->done = calloc(b->J.n ? b->J.n : 1, 1);
  if (!b->done) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for %zu prompts", b->J.n);
  if (is_dash(b->out)) return OT_OK;
  char *buf;
  size_t len, keep = 0;
  ot_status st = ot_file_read(b->out, BATCH_IN_MAX, &buf, &len);
  if (st == OT_ERR_NOT_FOUND) return ot_clear_error(), OT_OK;
  OT_TRY(st);
  st = ot_cli_out_scan(&b->J, b->out, buf, len, b->done, &keep);
  free(buf);
  OT_TRY(st);
  if (keep < len) {
    if (truncate(b->out, (off_t)keep) != 0)
      return ot_set_error(OT_ERR_IO, "%s: cannot cut off its unfinished last line: %s", b->out, strerror(errno));
    ot_cli_notice("%s: its last line was unfinished (a killed run); cut off, that prompt runs again", b->out);
  }
  return OT_OK;
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
  return append(b->fd, b->out_name, line);
}

/* The position in todo of the next prompt to run (n_todo: none left, or
 * Ctrl-C: the job stops between prompts). */
static ot_status next_job(batch *b, size_t *pos) {
  if (ot_cli_interrupted()) {
    if (b->q) ot_cli_queue_stop(b->q); /* rank 0: hands out no more */
    *pos = b->n_todo;
    return OT_OK;
  }
  if (b->q) return ot_cli_queue_next(b->q, pos);
  *pos = b->next < b->n_todo ? b->next++ : b->n_todo;
  return OT_OK;
}

/* A finished prompt's line into OUT (through rank 0 with several ranks). */
static ot_status emit(batch *b, const char *line) { return b->q ? ot_cli_queue_emit(b->q, line) : write_line(b, line); }

static char *result_line(const ot_cli_job *j, const ot_gen_result *r) {
  json_t *o = json_object();
  json_object_set(o, "id", j->id); /* first: a line cut by a kill still begins as this job's (jobfile.h) */
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

/* The generation options of every prompt of the job. */
static ot_gen_opts job_opts(const batch *b, const ot_cli_session *s) {
  ot_gen_opts g = *b->g;
  g.sched = s->sched;
  g.trace = s->trace;
  g.tokenizer = b->J.tk;
  g.should_stop = ot_cli_should_stop; /* Ctrl-C: the job stops at the next token */
  return g;
}

/* The prompts not done yet, in input order. A prompt the model refuses (its
 * plan does not fit the budget, NaN logits: exit-2 kinds) is reported and
 * skipped; anything else stops the job. A prompt that Ctrl-C stopped is
 * not written (a rerun runs it). */
static ot_status run_jobs(batch *b, ot_cli_session *s, ot_lm *m, size_t *ran) {
  ot_gen_opts g = job_opts(b, s);
  g.hold_device = 1; /* the weights go up once for the whole job (released by ot_lm_destroy) */
  char who[48] = "";
  if (ot_cli_ranks(s) > 1) snprintf(who, sizeof who, " [rank %d/%d]", ot_cli_rank(s), ot_cli_ranks(s));
  for (size_t k = 1;; k++) {
    size_t pos;
    OT_TRY(next_job(b, &pos));
    if (pos >= b->n_todo) break;
    ot_cli_job *j = &b->J.jobs[b->todo[pos]];
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
    if (r.cancelled) {
      ot_gen_result_free(&r);
      break;
    }
    char *l = result_line(j, &r);
    if (!l) st = ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for a result line");
    else st = emit(b, l);
    free(l);
    if (st == OT_OK) {
      (*ran)++;
      fprintf(stderr, "omptensor run%s: [%zu/%zu] id %s: %d tokens (%s), %.2f tokens/s\n", who, k, b->n_todo,
              j->key, r.n_tokens, ot_cli_stop_name(&r), r.decode_tokens_per_second);
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
  ot_cli_job **jobs; /* [n] the jobs being run, in the order given */
  size_t n, ran;
  json_t *per; /* --json: each prompt's id, tokens and tokens/s */
  char who[48]; /* " [rank r/R]" with several ranks */
} batched;

static ot_status batched_done(void *user, int seq, const ot_gen_result *r) {
  batched *x = user;
  const ot_cli_job *j = x->jobs[seq];
  char *l = result_line(j, r);
  ot_status st = l ? emit(x->b, l) : ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for a result line");
  free(l);
  OT_TRY(st);
  x->ran++;
  fprintf(stderr, "omptensor run%s: [%zu/%zu] id %s: %d tokens (%s), %.2f tokens/s\n", x->who, x->ran, x->n, j->key,
          r->n_tokens, ot_cli_stop_name(r), r->decode_tokens_per_second);
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
    ot_cli_job *j = &b->J.jobs[b->todo[me + k * R]];
    x.jobs[k] = j;
    seqs[k] = (ot_gen_seq){.prompt = j->ids, .n_prompt = j->n_ids, .max_new_tokens = j->max_new,
                           .stream = (uint64_t)j->line};
  }
  ot_gen_opts g = job_opts(b, s);
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
                      "goes on from there)\n", b->in_name, n_slots, ot_last_error(), b->out_name);
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
  b->todo = malloc((b->J.n ? b->J.n : 1) * sizeof *b->todo);
  if (!b->todo) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for %zu prompts", b->J.n);
  for (size_t i = 0; i < b->J.n; i++)
    if (!b->done || !b->done[i]) b->todo[b->n_todo++] = i;
  return OT_OK;
}

/* Several ranks: rank 0's list of the jobs left, to every rank (the
 * others have read IN alike, so an index names the same job there). */
static ot_status share_todo(batch *b, ot_comm *c) {
  const size_t N = b->J.n;
  uint64_t n = b->n_todo;
  OT_TRY(ot_comm_bcast(c, &n, sizeof n, 0));
  if (n > N)
    return ot_set_error(OT_ERR_STATE, "rank 0 has %llu prompts left of %zu in %s", (unsigned long long)n, N,
                        b->in_name);
  uint64_t *v = malloc((n ? n : 1) * sizeof *v);
  size_t *t = ot_comm_rank(c) ? malloc((n ? n : 1) * sizeof *t) : b->todo;
  ot_status st =
      v && t ? OT_OK : ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for %llu prompts", (unsigned long long)n);
  for (size_t i = 0; st == OT_OK && ot_comm_rank(c) == 0 && i < n; i++) v[i] = b->todo[i];
  if (st == OT_OK) st = ot_comm_bcast(c, v, n * sizeof *v, 0);
  for (size_t i = 0; st == OT_OK && i < n; i++) {
    if (v[i] >= N) st = ot_set_error(OT_ERR_STATE, "rank 0 names prompt %llu of %zu", (unsigned long long)v[i], N);
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

/* IN, then OUT (rank 0's alone: it reads what is done, names what is left
 * and writes every line), then OUT opened for appending when anything is
 * left: every check before the model loads. */
static ot_status read_job(batch *b, int root) {
  if (root) OT_TRY(check_not_input(b));
  OT_TRY(read_in(b));
  if (root) OT_TRY(read_out(b));
  OT_TRY(list_todo(b));
  if (!root || !b->n_todo) return OT_OK;
  if (is_dash(b->out)) {
    b->fd = STDOUT_FILENO;
    ot_cli_notice("--out -: the results go to stdout, which a rerun cannot read: a job stopped part way starts over");
    return OT_OK;
  }
  b->fd = open(b->out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (b->fd < 0) return ot_set_error(OT_ERR_IO, "--out %s: cannot open for appending: %s", b->out, strerror(errno));
  return OT_OK;
}

/* The job's summary on stderr, and with --json its object on stdout. */
static ot_status print_summary(batch *b, ot_cli_session *s, const char *model, size_t done_now, long refused,
                               json_t *summary, int ok) {
  const int R = ot_cli_ranks(s);
  const size_t lines = b->J.n + (size_t)b->J.bad;
  char ranks[48] = "";
  if (R > 1) snprintf(ranks, sizeof ranks, " by %d ranks", R);
  const int stopped = ot_cli_interrupted();
  fprintf(stderr, "omptensor run: %s: %zu prompts: %zu done now%s, %zu already in %s, %ld refused%s%s\n", b->in_name,
          lines, done_now, ranks, b->J.n - b->n_todo, b->out_name, refused, refused ? " (see above)" : "",
          stopped ? "; interrupted (Ctrl-C): a rerun goes on from there" : "");
  if (!ok || !s->settings.json) return OT_OK;
  /* the setup and the memory summary of the whole job (budget, peak device bytes, transfers), as a single run's
   * --json has them (rank 0's with several ranks), then the job's counts */
  const ot_trace_summary t = ot_trace_summarize(s->trace);
  json_t *o = ot_cli_json_base(s, model, &t);
  json_t *counts = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:i, s:b}", "kv_dtype",
                             ot_dtype_name(s->settings.gen.kv_dtype), "prompts_file", b->in, "out", b->out, "prompts",
                             (json_int_t)lines, "done_now", (json_int_t)done_now, "already_done",
                             (json_int_t)(b->J.n - b->n_todo), "refused", (json_int_t)refused, "ranks", R,
                             "interrupted", stopped);
  if (o && (!counts || json_object_update(o, counts))) o = (json_decref(o), NULL);
  json_decref(counts);
  if (o && summary) json_object_set(o, "batch", summary); /* --batch N: the aggregate and each prompt's rate */
  return ot_cli_json_print(o);
}

int ot_cli_run_batch(ot_cli_session *s, const char *model, const ot_tokenizer *tk, const ot_gen_opts *g,
                     const char *max_new_from, const char *in, const char *out, int n_slots) {
  const char *prog = "omptensor run";
  const int R = ot_cli_ranks(s), root = ot_cli_is_root(s);
  ot_hf_config cfg;
  batch b = {.model = model, .in = in, .out = out, .in_name = is_dash(in) ? "stdin" : in,
             .out_name = is_dash(out) ? "stdout" : out, .g = g, .quiet = !root, .fd = -1};
  b.J = (ot_cli_jobs){.model = model, .tk = tk, .cfg = &cfg, .max_new = g->max_new_tokens,
                      .max_new_from = max_new_from, .on_bad = on_bad_line, .user = &b};
  ot_status st = ot_hf_config_load(model, &cfg);
  if (st == OT_OK) st = read_job(&b, root);
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
  if (st == OT_OK && b.n_todo) {
    ot_cli_interrupt_arm(); /* Ctrl-C: the job stops at the next token, its finished lines kept */
    if (s->verbose && root)
      fprintf(stderr, "omptensor run: running the job; Ctrl-C stops it at the next token, the finished lines kept\n");
    st = n_slots ? run_jobs_batched(&b, s, m, n_slots, &ran, &summary) : run_jobs(&b, s, m, &ran);
  }
  if (b.q) { /* this rank's last line is out; rank 0 waits for every rank's */
    ot_status f = ot_cli_queue_finish(b.q);
    if (st == OT_OK) st = f;
  }
  ot_cli_interrupt_disarm();
  if (st == OT_OK && s->settings.trace_path) st = ot_trace_write_chrome(s->trace, s->settings.trace_path);
  if (b.fd > STDERR_FILENO) close(b.fd);
  ot_lm_destroy(m);
  /* several ranks: the job's counts and its worst status, by every rank (rank 0 prints them) */
  int64_t tot[2] = {(int64_t)ran, b.refused};
  if (R > 1 && b.q) {
    if (ot_comm_allreduce_i64(s->comm, tot, 2, 0) != OT_OK && st == OT_OK) st = OT_ERR_IO;
    st = ot_cli_ranks_agree(s, st, &quiet);
  }
  const long refused = b.J.bad + (long)tot[1];
  int rc = st == OT_OK ? (ot_cli_interrupted() ? OT_CLI_EXIT_INTERRUPTED : refused ? 2 : 0)
           : quiet     ? ot_cli_exit_code(st)
                       : ot_cli_fail(prog, st);
  if (root && (st == OT_OK || rc == 1)) {
    ot_status p = print_summary(&b, s, model, (size_t)tot[0], refused, summary, st == OT_OK);
    if (p != OT_OK) rc = ot_cli_fail(prog, p);
  }
  json_decref(summary);
  ot_cli_jobs_free(&b.J);
  free(b.todo);
  free(b.done);
  return ot_cli_ranks_exit(s, rc);
}
