/* jobfile.c — a batch job's IN and OUT (jobfile.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobfile.h"
#include "prompt.h"

/* ---- ids to numbers ---- */

static uint64_t fnv1a(const char *s) {
  uint64_t h = 14695981039346656037ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* The slot of key, or the empty one where it would go (cap > n: one is empty). */
static ot_cli_idslot *find(ot_cli_idmap *m, const char *key, uint64_t h) {
  const size_t mask = m->cap - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    m->probes++;
    ot_cli_idslot *s = &m->slot[i];
    if (!s->key || (s->hash == h && !strcmp(s->key, key))) return s;
  }
}

static ot_status grow(ot_cli_idmap *m) {
  const size_t cap = m->cap ? 2 * m->cap : 64;
  ot_cli_idslot *old = m->slot, *nw = calloc(cap, sizeof *nw);
  if (!nw) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for %zu ids", m->n);
  const size_t oc = m->cap;
  m->slot = nw;
  m->cap = cap;
  for (size_t i = 0; i < oc; i++)
    if (old[i].key) *find(m, old[i].key, old[i].hash) = old[i];
  free(old);
  return OT_OK;
}

int ot_cli_idmap_get(ot_cli_idmap *m, const char *key, long *value) {
  if (!m->n) return 0;
  const ot_cli_idslot *s = find(m, key, fnv1a(key));
  if (!s->key) return 0;
  if (value) *value = s->value;
  return 1;
}

ot_status ot_cli_idmap_put(ot_cli_idmap *m, const char *key, long value) {
  if (2 * (m->n + 1) > m->cap) OT_TRY(grow(m)); /* at most half full: short probe runs */
  const uint64_t h = fnv1a(key);
  ot_cli_idslot *s = find(m, key, h);
  if (!s->key) {
    if (!(s->key = strdup(key))) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for an id");
    s->hash = h;
    m->n++;
  }
  s->value = value;
  return OT_OK;
}

void ot_cli_idmap_free(ot_cli_idmap *m) {
  for (size_t i = 0; m->slot && i < m->cap; i++) free(m->slot[i].key);
  free(m->slot);
  memset(m, 0, sizeof *m);
}

/* ---- IN ---- */

static char *id_key(const json_t *id) { return json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT); }

/* Text (a prompt, a result's text) may hold U+0000: what the project
 * writes it must read back, and a prompt is text like any other. */
#define LINE_FLAGS (JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL)

static ot_status text_prompt(const ot_cli_jobs *J, const json_t *p, ot_cli_job *j) {
  if (!json_is_string(p)) return ot_set_error(OT_ERR_FORMAT, "\"prompt\" is a string of text");
  if (!J->tk)
    return ot_set_error(OT_ERR_INVALID_ARG, "a text prompt needs the model's tokenizer.json, which %s does not have; "
                                            "give \"prompt_ids\"", J->model);
  size_t n = 0;
  OT_TRY(ot_tokenizer_encode(J->tk, json_string_value(p), json_string_length(p), 1, &j->ids, &n));
  if (n == 0 || n > INT32_MAX)
    return ot_set_error(OT_ERR_INVALID_ARG, "\"prompt\" encodes to %s tokens", n ? "too many" : "no");
  j->n_ids = (int)n;
  return OT_OK;
}

static ot_status id_prompt(const json_t *pi, ot_cli_job *j) {
  const size_t n = json_is_array(pi) ? json_array_size(pi) : 0;
  if (!n || n > INT32_MAX) return ot_set_error(OT_ERR_FORMAT, "\"prompt_ids\" is a non-empty array of token ids");
  if (!(j->ids = malloc(n * sizeof *j->ids))) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory");
  for (size_t i = 0; i < n; i++) {
    const json_t *x = json_array_get(pi, i);
    if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
      return ot_set_error(OT_ERR_FORMAT, "\"prompt_ids\"[%zu] is not a token id (an integer from 0)", i);
    j->ids[i] = (int32_t)json_integer_value(x);
  }
  j->n_ids = (int)n;
  return OT_OK;
}

static ot_status line_object(const ot_cli_jobs *J, const json_t *o, ot_cli_job *j) {
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)o, k, v) {
    if (strcmp(k, "id") && strcmp(k, "prompt") && strcmp(k, "prompt_ids") && strcmp(k, "max_new_tokens"))
      return ot_set_error(OT_ERR_FORMAT, "unknown key \"%s\" (a line has \"id\", \"prompt\" or \"prompt_ids\", and "
                                         "optionally \"max_new_tokens\")", k);
  }
  json_t *id = json_object_get(o, "id"), *p = json_object_get(o, "prompt"), *pi = json_object_get(o, "prompt_ids"),
         *mn = json_object_get(o, "max_new_tokens");
  if (id && !json_is_string(id) && !json_is_integer(id))
    return ot_set_error(OT_ERR_FORMAT, "\"id\" is a string or an integer");
  j->id = id ? json_incref(id) : json_integer(j->line);
  if (!j->id || !(j->key = id_key(j->id))) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory");
  if (!p == !pi)
    return ot_set_error(OT_ERR_FORMAT, "give exactly one of \"prompt\" (text) and \"prompt_ids\" (token ids)");
  if (mn && (!json_is_integer(mn) || json_integer_value(mn) < 0 || json_integer_value(mn) > 1000000))
    return ot_set_error(OT_ERR_FORMAT, "\"max_new_tokens\" is an integer from 0 to 1000000");
  if (mn) j->max_new = (int)json_integer_value(mn);
  OT_TRY(p ? text_prompt(J, p, j) : id_prompt(pi, j));
  return ot_cli_check_prompt(J->cfg, J->model, j->ids, j->n_ids, j->max_new, p ? "\"prompt\"" : "\"prompt_ids\"",
                             mn ? "\"max_new_tokens\"" : J->max_new_from);
}

/* One line into a job; on failure j->key may still hold the id. */
static ot_status parse_line(const ot_cli_jobs *J, const char *text, size_t len, long line, ot_cli_job *j) {
  memset(j, 0, sizeof *j);
  j->line = line;
  j->max_new = J->max_new;
  json_error_t e;
  json_t *o = json_loadb(text, len, LINE_FLAGS, &e);
  if (!o) return ot_set_error(OT_ERR_FORMAT, "not JSON: %s (column %d)", e.text, e.column);
  ot_status st = json_is_object(o) ? line_object(J, o, j)
                                   : ot_set_error(OT_ERR_FORMAT, "a line is a JSON object, this is %s",
                                                  json_is_array(o) ? "an array" : "a single value");
  json_decref(o);
  return st;
}

static void job_free(ot_cli_job *j) {
  free(j->key);
  json_decref(j->id);
  free(j->ids);
  memset(j, 0, sizeof *j);
}

static int is_blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
  return 1;
}

static void bad(ot_cli_jobs *J, long line, const char *why) {
  J->bad++;
  if (J->on_bad) J->on_bad(J->user, line, why);
}

/* A parsed line into the job, or told as a repeated id. */
static ot_status add_job(ot_cli_jobs *J, ot_cli_job *j) {
  long at;
  if (ot_cli_idmap_get(&J->ids, j->key, &at) && at >= 0) {
    char m[512];
    snprintf(m, sizeof m, "id %.400s repeats line %ld's; ids are how a rerun knows what is done", j->key,
             J->jobs[at].line);
    bad(J, j->line, m);
    job_free(j);
    return OT_OK;
  }
  if (J->n == J->cap) {
    const size_t cap = J->cap ? 2 * J->cap : 64;
    ot_cli_job *g = realloc(J->jobs, cap * sizeof *g);
    if (!g) return job_free(j), ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for %zu prompts", cap);
    J->jobs = g;
    J->cap = cap;
  }
  ot_status st = ot_cli_idmap_put(&J->ids, j->key, (long)J->n);
  if (st != OT_OK) return job_free(j), st;
  J->jobs[J->n++] = *j;
  return OT_OK;
}

/* A refused line: told, and its id (where one was read) kept as one of
 * IN's, so that a result of it in OUT is still this job's. */
static ot_status refuse_line(ot_cli_jobs *J, ot_cli_job *j) {
  char m[1024];
  snprintf(m, sizeof m, "%s", ot_last_error());
  const long line = j->line;
  ot_status st = j->key && !ot_cli_idmap_get(&J->ids, j->key, NULL) ? ot_cli_idmap_put(&J->ids, j->key, -1) : OT_OK;
  job_free(j);
  if (st == OT_OK) bad(J, line, m);
  return st;
}

ot_status ot_cli_jobs_read(ot_cli_jobs *J, const char *buf, size_t len) {
  for (size_t at = 0; at < len;) {
    const char *nl = memchr(buf + at, '\n', len - at);
    const size_t n = nl ? (size_t)(nl - (buf + at)) : len - at;
    const char *text = buf + at;
    at += n + (nl != NULL);
    const long line = ++J->lines;
    if (is_blank(text, n)) continue;
    ot_cli_job j;
    ot_status st = parse_line(J, text, n, line, &j);
    if (st == OT_ERR_OUT_OF_MEMORY) return job_free(&j), st;
    OT_TRY(st == OT_OK ? add_job(J, &j) : refuse_line(J, &j));
  }
  return OT_OK;
}

void ot_cli_jobs_free(ot_cli_jobs *J) {
  for (size_t i = 0; i < J->n; i++) job_free(&J->jobs[i]);
  free(J->jobs);
  J->jobs = NULL;
  J->n = J->cap = 0;
  ot_cli_idmap_free(&J->ids);
}

/* ---- OUT ---- */

/* Whether text (a complete line) is a result line of this job: *job its
 * index (-1: a refused line's id), else why not in why. */
static int result_line(ot_cli_jobs *J, const char *text, size_t n, long *job, char *why, size_t cap) {
  json_error_t e;
  json_t *o = json_loadb(text, n, LINE_FLAGS, &e);
  const json_t *id = json_object_get(o, "id");
  char *k = id ? id_key(id) : NULL;
  int ok = 0;
  if (!o) snprintf(why, cap, "not JSON: %s (column %d)", e.text, e.column);
  else if (!json_is_object(o)) snprintf(why, cap, "not a JSON object");
  else if (!id) snprintf(why, cap, "no \"id\"");
  else if (!json_is_array(json_object_get(o, "tokens"))) snprintf(why, cap, "no \"tokens\" array");
  else if (!k) snprintf(why, cap, "no memory");
  else if (!(ok = ot_cli_idmap_get(&J->ids, k, job))) snprintf(why, cap, "id %.200s is not one of the prompts' ids", k);
  free(k);
  json_decref(o);
  return ok;
}

/* Whether a partial line begins as this job's result lines are written:
 * {"id":ID, with ID one of the prompts' ids (batch.c writes "id" first). */
static int starts_as_result(ot_cli_jobs *J, const char *text, size_t n) {
  static const char head[] = "{\"id\":";
  const size_t h = sizeof head - 1;
  if (n <= h || memcmp(text, head, h)) return 0;
  json_error_t e;
  json_t *id = json_loadb(text + h, n - h, JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL, &e);
  char *k = id ? id_key(id) : NULL;
  const size_t end = h + (size_t)e.position;
  const int ok = k && end < n && text[end] == ',' && ot_cli_idmap_get(&J->ids, k, NULL);
  free(k);
  json_decref(id);
  return ok;
}

ot_status ot_cli_out_scan(ot_cli_jobs *J, const char *out, const char *buf, size_t len, unsigned char *done,
                          size_t *keep) {
  if (J->n) memset(done, 0, J->n);
  size_t at = 0;
  long line = 0;
  for (const char *nl; at < len && (nl = memchr(buf + at, '\n', len - at)) != NULL;) {
    const size_t n = (size_t)(nl - (buf + at));
    long job;
    char why[320];
    line++;
    if (!result_line(J, buf + at, n, &job, why, sizeof why))
      return ot_set_error(OT_ERR_FORMAT, "%s:%ld is not a result line of this job (%s): the file is left as it is; "
                                         "give --out a new name, or move this file away to start over",
                          out, line, why);
    if (job >= 0) done[job] = 1;
    at += n + 1;
  }
  /* a tail without its newline: a kill inside a write, cut off once the
   * lines before it (or its own start) show that the file is this job's */
  if (at < len && !line && !starts_as_result(J, buf + at, len - at))
    return ot_set_error(OT_ERR_FORMAT, "%s holds %zu bytes and no complete line, and they do not begin as a result "
                                       "line of this job: the file is left as it is; give --out a new name, or move "
                                       "this file away to start over",
                        out, len);
  *keep = at;
  return OT_OK;
}
