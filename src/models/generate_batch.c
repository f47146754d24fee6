/* generate_batch.c — batched generation (issue 19): one weight stream
 * serves up to n_slots sequences at once (lm.h, ot_generate_batch).
 *
 * Two kinds of step, both the model's batched steps (build_batch):
 *   - a prompt step: the prompts of the sequences that start now, packed
 *     one after another (T = the sum of their lengths, no padding), each
 *     row at its own slot and position, logits for each prompt's last row;
 *     recorded and planned for each start (its T changes);
 *   - the decode step: n_slots rows, row k the token of slot k (an idle
 *     slot's row is padding, slot -1), logits for every row; recorded once,
 *     replanned only after a prompt step ran.
 * The plans hand over to each other (ot_sched_plan_after): the decode plan
 * starts from what the prompt plan left on the device and back, so the
 * weights and caches stay where they are and the two plans never hold
 * device memory at once (the budget holds across the job).
 *
 * Refill: after every step, a slot whose sequence stopped (EOS, its
 * max_new_tokens) takes the job's next prompt; all slots freed by one step
 * start in one prompt step, then decode resumes for everyone. Stale cache
 * rows of the slot's previous sequence need no clearing: a row attends
 * only to positions up to its own, and those the new sequence has written.
 *
 * Determinism per sequence: a row's arithmetic does not depend on the
 * other rows of its step (attention_rows.c, and the row-wise kernels), and
 * its token is drawn from (seed, its stream, its step) (ot_gen_pick). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "models/generate_impl.h"
#include "omptensor/lm.h"
#include "omptensor/textstream.h"

typedef struct slot {
  int seq;        /* the job's sequence it runs, -1: idle */
  int max_new;
  int64_t pos;    /* the position of the token it feeds next */
  int32_t next;   /* its last token: what the next decode step feeds */
  ot_text_stream *ts;
} slot;

typedef struct run {
  ot_lm *m;
  const ot_gen_seq *seqs;
  int n, n_slots;
  const ot_gen_opts *o;
  ot_gen_batch_result *r;
  slot *sl;
  int *pack;         /* [n_slots] scratch: the slots a prompt step starts */
  int next_seq;      /* the next sequence of the job to start */
  int live;          /* slots running a sequence */
  ot_lm_step dec;    /* the decode step, recorded once */
  ot_lm_step pre;    /* the prompt step whose plan is `plan` (else empty) */
  ot_plan *plan;     /* the plan that ran last, or NULL */
  int plan_is_decode;
  int n_micro;       /* decode micro-batches (1: none): groups of `rows` slots, group g slots g*rows.. */
  int rows;          /* the decode step's rows: n_slots / n_micro rounded up */
  int *groups;       /* [n_micro] scratch: the groups a decode step runs */
  int n_live;        /* the decode step's live sequences, in pack (scratch) */
  double t0;         /* when the decode step started */
  int probe_seen;    /* the decode plan's budget probe is in the result */
  uint64_t done_tokens, all_tokens; /* for progress */
} run;

static int seq_max_new(const run *R, int i) {
  const int k = R->seqs[i].max_new_tokens;
  return k < 0 ? R->o->max_new_tokens : k;
}

static int longer_first(const void *a, const void *b) {
  const int x = *(const int *)a, y = *(const int *)b;
  return (x < y) - (x > y);
}

/* Every sequence checked before anything is recorded; the positions the
 * caches need (as ot_generate: prompt + new tokens, at least one) and the
 * most rows a prompt step can have (the n_slots longest prompts). */
static ot_status check_job(const ot_lm *m, const ot_gen_seq *seqs, int n, int n_slots, const ot_gen_opts *o,
                           int64_t *n_ctx, int *max_pack) {
  if (n_slots < 1) return ot_fail(OT_ERR_INVALID_ARG, "generate_batch: %d slots; give at least 1", n_slots);
  if (o->logits_out)
    return ot_fail(OT_ERR_INVALID_ARG, "generate_batch: logits_out writes one prompt's logits; it does not go with a "
                                       "batch (use on_logits)");
  *n_ctx = 1;
  int *len = malloc((size_t)(n > 0 ? n : 1) * sizeof *len);
  if (!len) return ot_fail(OT_ERR_OUT_OF_MEMORY, "generate_batch: no host memory");
  int nl = 0;
  for (int i = 0; i < n; i++) {
    const ot_gen_seq *q = &seqs[i];
    const int k = q->max_new_tokens < 0 ? o->max_new_tokens : q->max_new_tokens;
    ot_status s = OT_OK;
    if (q->n_prompt < 1 || !q->prompt)
      s = ot_fail(OT_ERR_INVALID_ARG, "generate_batch: sequence %d: the prompt is empty (give at least one token id)", i);
    for (int j = 0; s == OT_OK && j < q->n_prompt; j++)
      if (q->prompt[j] < 0 || q->prompt[j] >= m->vocab)
        s = ot_fail(OT_ERR_INVALID_ARG, "generate_batch: sequence %d: prompt token %d is %d, outside the vocabulary "
                                        "[0, %lld)", i, j, q->prompt[j], (long long)m->vocab);
    if (s == OT_OK && (int64_t)q->n_prompt + k > m->max_seq)
      s = ot_fail(OT_ERR_INVALID_ARG, "generate_batch: sequence %d: %d prompt + %d new tokens exceed the model's %lld "
                                      "positions", i, q->n_prompt, k, (long long)m->max_seq);
    if (s != OT_OK) {
      free(len);
      return s;
    }
    if (k == 0) continue; /* done at once, never in a step */
    const int64_t need = (int64_t)q->n_prompt + (k > 0 ? k : 1);
    if (need > *n_ctx) *n_ctx = need;
    len[nl++] = q->n_prompt;
  }
  /* the n_slots longest prompts: sorted, so that the cost is the job's size
   * (a selection of n_slots by n_slots passes was slots x prompts) */
  if (nl > 1) qsort(len, (size_t)nl, sizeof *len, longer_first);
  int64_t pack = 0;
  for (int t = 0; t < n_slots && t < nl; t++) pack += len[t];
  free(len);
  if (pack > INT32_MAX)
    return ot_fail(OT_ERR_INVALID_ARG, "generate_batch: %lld prompt tokens in one prompt step; run fewer sequences "
                                       "at once", (long long)pack);
  *max_pack = (int)(pack > 0 ? pack : 1);
  return OT_OK;
}

/* A sequence's result is complete: its text, then whoever listens; its slot is free. */
static ot_status finish(run *R, int k) {
  slot *sl = &R->sl[k];
  ot_gen_result *g = &R->r->seqs[sl->seq];
  ot_status s = OT_OK;
  if (sl->ts) s = ot_gen_finish_text(R->o, sl->ts, g);
  if (g->n_tokens > 1 && g->decode_ms > 0) g->decode_tokens_per_second = (g->n_tokens - 1) / (g->decode_ms / 1e3);
  if (s == OT_OK && R->o->on_seq_done) s = R->o->on_seq_done(R->o->done_user, sl->seq, g);
  ot_text_stream_destroy(sl->ts);
  sl->ts = NULL;
  sl->seq = -1;
  R->live--;
  return s;
}

/* One row of logits of slot k's sequence: checked, shown, picked, kept;
 * the sequence finishes at an EOS id or its last token. `what` names the
 * step in a NaN message, pos the row's position. */
static ot_status took_row(run *R, int k, const float *row, int64_t pos, const char *what) {
  slot *sl = &R->sl[k];
  ot_gen_result *g = &R->r->seqs[sl->seq];
  const int64_t vocab = R->m->vocab;
  char msg[128];
  snprintf(msg, sizeof msg, "%s, sequence %d", what, sl->seq);
  OT_TRY(ot_gen_check_logits(row, 1, vocab, pos, msg, &g->logits_checksum));
  if (R->o->on_logits) OT_TRY(R->o->on_logits(R->o->logits_user, sl->seq, g->n_tokens, row, vocab));
  int32_t id;
  OT_TRY(ot_gen_pick(R->o, row, vocab, R->seqs[sl->seq].stream, (uint64_t)g->n_tokens, &id));
  g->tokens[g->n_tokens++] = id;
  sl->next = id;
  R->done_tokens++;
  if (R->o->progress) R->o->progress(R->o->progress_user, "generate", R->done_tokens, R->all_tokens);
  if (sl->ts) {
    const char *piece;
    size_t n;
    OT_TRY(ot_text_stream_push(sl->ts, id, &piece, &n)); /* kept for the text; on_text is one stream's */
  }
  g->stopped_at_eos = ot_gen_is_eos(R->o, id);
  if (g->stopped_at_eos || g->n_tokens >= sl->max_new) return finish(R, k);
  return OT_OK;
}

/* Plans `st` after the plan that ran last (or from nothing), which goes,
 * with the prompt step it belonged to. */
static ot_status plan_next(run *R, ot_lm_step *st, int decode, ot_plan **out) {
  *out = NULL;
  ot_sched_opts so = decode ? ot_gen_decode_sched(R->o) : ot_gen_sched(R->o);
  if (decode && R->n_micro > 1) so.micro_batches = R->n_micro;
  ot_status s = R->plan ? ot_sched_plan_after(R->plan, st->prog, &so, out)
                        : ot_sched_plan(R->m->ctx, st->prog, &so, out);
  ot_plan_destroy(R->plan); /* after the handoff: it reads this plan's program */
  R->plan = NULL;
  ot_lm_step_destroy(&R->pre);
  if (s != OT_OK) {
    ot_plan_destroy(*out);
    *out = NULL;
  }
  return s;
}

/* Starts the job's next sequences in the idle slots with one packed prompt
 * step; *started: how many. */
static ot_status prefill(run *R, int *started) {
  *started = 0;
  int *pack = R->pack, np = 0;
  int64_t T = 0;
  for (int k = 0; k < R->n_slots && R->next_seq < R->n; k++) {
    if (R->sl[k].seq >= 0) continue;
    while (R->next_seq < R->n && seq_max_new(R, R->next_seq) == 0) { /* nothing to make: done at once */
      const int i = R->next_seq++;
      if (R->o->on_seq_done) OT_TRY(R->o->on_seq_done(R->o->done_user, i, &R->r->seqs[i]));
    }
    if (R->next_seq >= R->n) break;
    const int i = R->next_seq++;
    slot *sl = &R->sl[k];
    ot_gen_result *g = &R->r->seqs[i];
    sl->seq = i;
    sl->max_new = seq_max_new(R, i);
    sl->pos = R->seqs[i].n_prompt;
    R->live++;
    if (!(g->tokens = malloc((size_t)sl->max_new * sizeof *g->tokens)))
      return ot_fail(OT_ERR_OUT_OF_MEMORY, "generate_batch: no host memory");
    if (R->o->tokenizer) OT_TRY(ot_text_stream_new(R->o->tokenizer, 1, &sl->ts));
    pack[np++] = k;
    T += R->seqs[i].n_prompt;
  }
  if (!np) return OT_OK;
  ot_lm_step st = {0};
  ot_plan *plan = NULL;
  ot_status s = R->m->vt->build_batch(R->m, (int)T, np, &st);
  if (s == OT_OK) s = plan_next(R, &st, 0, &plan);
  if (s != OT_OK) {
    ot_lm_step_destroy(&st);
    return s;
  }
  R->pre = st;
  R->plan = plan;
  R->plan_is_decode = 0;
  int32_t *ids = ot_tensor_data(st.ids), *rows = ot_tensor_data(st.rows);
  int32_t *last = st.last ? ot_tensor_data(st.last) : NULL;
  int64_t at = 0;
  for (int j = 0; j < np; j++) {
    const ot_gen_seq *q = &R->seqs[R->sl[pack[j]].seq];
    for (int t = 0; t < q->n_prompt; t++, at++) {
      ids[at] = q->prompt[t];
      rows[2 * at] = pack[j];
      rows[2 * at + 1] = t;
    }
    if (last) last[j] = (int32_t)(at - 1);
  }
  OT_TRY(ot_trace_mark(R->o->trace, "prefill"));
  const double t0 = ot_gen_now_ms();
  OT_TRY(ot_sched_run(plan, R->o->trace));
  const double ms = ot_gen_now_ms() - t0;
  R->r->prefill_ms += ms;
  R->r->prefill_steps++;
  const float *logits = ot_tensor_data(st.logits);
  char what[96];
  snprintf(what, sizeof what, "the prompt step of %d sequence(s), %lld tokens", np, (long long)T);
  for (int j = 0; j < np; j++) {
    const int k = pack[j];
    R->r->seqs[R->sl[k].seq].prefill_ms = ms;
    OT_TRY(took_row(R, k, logits + (int64_t)j * R->m->vocab, R->sl[k].pos - 1, what));
  }
  *started = np;
  return OT_OK;
}

/* Decode micro-batch m: group R->groups[m]'s slots as the step's rows (an
 * idle slot's row, and the rows past n_slots, are padding). */
static ot_status fill_group(void *user, int m) {
  run *R = user;
  int32_t *ids = ot_tensor_data(R->dec.ids), *rows = ot_tensor_data(R->dec.rows);
  for (int j = 0; j < R->rows; j++) {
    const int k = R->groups[m] * R->rows + j;
    const slot *sl = k < R->n_slots ? &R->sl[k] : NULL;
    const int live = sl && sl->seq >= 0;
    ids[j] = live ? sl->next : 0;
    rows[2 * j] = live ? k : -1;
    rows[2 * j + 1] = live ? (int32_t)sl->pos : 0;
  }
  return OT_OK;
}

/* The decode step has run (every micro-batch of it): its time, less the
 * budget probe's, is every live sequence's decode time. */
static void step_ran(run *R) {
  double ms = ot_gen_now_ms() - R->t0;
  ot_budget_probe pr;
  if (!R->probe_seen && ot_plan_budget_probe(R->plan, &pr) == OT_OK && pr.done) {
    R->probe_seen = 1; /* made once per plan, in its first replay: not the product's work (lm.h) */
    R->r->decode_probe = pr;
    ms -= pr.seconds * 1e3;
  }
  R->r->decode_ms += ms;
  R->r->decode_steps++;
  for (int i = 0; i < R->n_live; i++) R->r->seqs[R->pack[i]].decode_ms += ms;
}

/* Micro-batch m's logits: a token for each live slot of its group. All
 * micro-batches have run when the first is taken (ot_sched_run_micro). */
static ot_status take_group(void *user, int m) {
  run *R = user;
  if (m == 0) step_ran(R);
  const float *logits = ot_tensor_data(R->dec.logits);
  for (int j = 0; j < R->rows; j++) {
    const int k = R->groups[m] * R->rows + j;
    if (k >= R->n_slots) break;
    slot *sl = &R->sl[k];
    if (sl->seq < 0) continue;
    char what[64];
    snprintf(what, sizeof what, "decode step %d (position %lld)", R->r->seqs[sl->seq].n_tokens, (long long)sl->pos);
    R->r->decode_tokens++;
    const int64_t pos = sl->pos++;
    OT_TRY(took_row(R, k, logits + (int64_t)j * R->m->vocab, pos, what));
  }
  return OT_OK;
}

/* One decode step: a token for every live slot, the groups with a live slot
 * as micro-batches (one group of every slot without micro-batches). */
static ot_status decode(run *R) {
  if (!R->plan_is_decode) {
    ot_plan *plan;
    OT_TRY(plan_next(R, &R->dec, 1, &plan));
    R->plan = plan;
    R->plan_is_decode = 1;
    R->probe_seen = 0;
    OT_TRY(ot_trace_mark(R->o->trace, "decode"));
  }
  int ng = 0;
  for (int g = 0; g < R->n_micro; g++) {
    int live = 0;
    for (int k = g * R->rows; k < (g + 1) * R->rows && k < R->n_slots; k++) live |= R->sl[k].seq >= 0;
    if (live) R->groups[ng++] = g;
  }
  R->n_live = 0;
  for (int k = 0; k < R->n_slots; k++)
    if (R->sl[k].seq >= 0) R->pack[R->n_live++] = R->sl[k].seq;
  R->t0 = ot_gen_now_ms();
  return ot_sched_run_micro(R->plan, ng, fill_group, take_group, R, R->o->trace);
}

static ot_status run_job(run *R) {
  while (R->live || R->next_seq < R->n) {
    if (R->o->should_stop && R->o->should_stop(R->o->stop_user)) { /* between steps: the unfinished stay so */
      R->r->cancelled = 1;
      break;
    }
    int started;
    do {
      OT_TRY(prefill(R, &started));
    } while (started && R->live < R->n_slots && R->next_seq < R->n); /* some stopped at their first token */
    if (R->live) OT_TRY(decode(R));
  }
  return OT_OK;
}

/* How many decode micro-batches: sched.micro_batches (at most one per slot)
 * when the step is a pipeline over several devices; else 1 (on one device a
 * micro-batch would stream the weights once more for fewer rows). */
static int micro_groups(const ot_lm *m, const ot_gen_opts *o, int n_slots) {
  const int n_dev = ot_ctx_num_devices(m->ctx) - o->sched.device_index;
  const int stages = o->sched.n_stages == OT_SCHED_ALL_DEVICES ? n_dev : o->sched.n_stages;
  if (o->sched.micro_batches <= 1 || stages <= 1) return 1;
  return o->sched.micro_batches < n_slots ? o->sched.micro_batches : n_slots;
}

/* A model without batched steps: n_slots 1 is ot_generate per sequence. */
static ot_status one_by_one(ot_lm *m, const ot_gen_seq *seqs, int n, const ot_gen_opts *o, ot_gen_batch_result *r) {
  for (int i = 0; i < n; i++) {
    if (o->should_stop && o->should_stop(o->stop_user)) {
      r->cancelled = 1;
      break;
    }
    ot_gen_opts g = *o;
    g.max_new_tokens = seqs[i].max_new_tokens < 0 ? o->max_new_tokens : seqs[i].max_new_tokens;
    g.hold_device = 1; /* the weights stay for the next prompt */
    g.on_token = NULL;
    g.on_text = NULL;
    ot_gen_result *q = &r->seqs[i];
    OT_TRY(ot_gen_one(m, seqs[i].prompt, seqs[i].n_prompt, &g, seqs[i].stream, q));
    if (q->cancelled) { /* not finished: left out, as the batched run leaves its unfinished */
      r->cancelled = 1;
      break;
    }
    r->prefill_steps++;
    r->prefill_ms += q->prefill_ms;
    r->decode_ms += q->decode_ms;
    r->decode_steps += q->n_tokens > 1 ? q->n_tokens - 1 : 0;
    r->decode_tokens += q->n_tokens > 1 ? q->n_tokens - 1 : 0;
    r->decode_plan = q->decode_plan;
    if (o->on_seq_done) OT_TRY(o->on_seq_done(o->done_user, i, q));
  }
  ot_lm_release_device(m);
  return OT_OK;
}

void ot_gen_batch_result_free(ot_gen_batch_result *r) {
  if (!r) return;
  for (int i = 0; r->seqs && i < r->n; i++) ot_gen_result_free(&r->seqs[i]);
  free(r->seqs);
  memset(r, 0, sizeof *r);
}

ot_status ot_generate_batch(ot_lm *m, const ot_gen_seq *seqs, int n, int n_slots, const ot_gen_opts *o,
                            ot_gen_batch_result *r) {
  if (r) memset(r, 0, sizeof *r);
  if (!m || !o || !r || (!seqs && n) || n < 0) return ot_fail(OT_ERR_INVALID_ARG, "ot_generate_batch: NULL argument");
  OT_TRY(ot_gen_begin(m, o));
  int64_t n_ctx;
  int max_pack;
  OT_TRY(check_job(m, seqs, n, n_slots, o, &n_ctx, &max_pack));
  if (n_slots > n) n_slots = n > 0 ? n : 1; /* more slots than sequences would only cost cache */
  if (!m->vt->build_batch && n_slots > 1)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: batched generation is not implemented for this architecture; run one "
                                       "sequence at a time (n_slots 1, --batch 1)", m->vt->arch);
  const double t_start = ot_gen_now_ms();
  r->n = n;
  r->n_slots = n_slots;
  if (!(r->seqs = calloc((size_t)(n > 0 ? n : 1), sizeof *r->seqs)))
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "generate_batch: no host memory for %d results", n);
  ot_lm_release_device(m); /* a held plan refers to caches this job replaces */
  ot_status s;
  if (!m->vt->build_batch) {
    s = one_by_one(m, seqs, n, o, r);
  } else {
    run R = {.m = m, .seqs = seqs, .n = n, .n_slots = n_slots, .o = o, .r = r};
    for (int i = 0; i < n; i++) R.all_tokens += (uint64_t)seq_max_new(&R, i);
    m->n_slots = n_slots;
    m->n_ctx = n_ctx;
    R.sl = calloc((size_t)n_slots, sizeof *R.sl);
    R.pack = calloc((size_t)n_slots, sizeof *R.pack);
    s = R.sl && R.pack ? OT_OK : ot_fail(OT_ERR_OUT_OF_MEMORY, "generate_batch: no host memory");
    for (int k = 0; s == OT_OK && k < n_slots; k++) R.sl[k].seq = -1;
    R.n_micro = micro_groups(m, o, n_slots);
    R.rows = (n_slots + R.n_micro - 1) / R.n_micro;
    R.groups = calloc((size_t)R.n_micro, sizeof *R.groups);
    if (s == OT_OK && !R.groups) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "generate_batch: no host memory");
    if (s == OT_OK) s = ot_lm_fit(m, ot_gen_budget(m, o), max_pack);
    if (s == OT_OK) s = m->vt->build_batch(m, R.rows, R.rows, &R.dec);
    if (s == OT_OK) s = run_job(&R);
    if (R.plan && R.plan_is_decode) r->decode_plan = ot_plan_get_stats(R.plan, 1);
    ot_plan_destroy(R.plan);
    ot_lm_step_destroy(&R.pre);
    ot_lm_step_destroy(&R.dec);
    for (int k = 0; R.sl && k < n_slots; k++) ot_text_stream_destroy(R.sl[k].ts);
    free(R.sl);
    free(R.pack);
    free(R.groups);
    m->n_slots = 0; /* the next steps are one sequence's again (a fit measures those) */
  }
  if (s == OT_OK && r->decode_ms > 0) r->decode_tokens_per_second = (double)r->decode_tokens / (r->decode_ms / 1e3);
  r->wall_ms = ot_gen_now_ms() - t_start;
  if (s != OT_OK) ot_gen_batch_result_free(r);
  return s;
}

ot_status ot_generate_batch_min_budget(ot_lm *m, const ot_gen_seq *seqs, int n, int n_slots, const ot_gen_opts *o,
                                       uint64_t *bytes) {
  if (!m || !o || !bytes || (!seqs && n)) return ot_fail(OT_ERR_INVALID_ARG, "ot_generate_batch_min_budget: NULL argument");
  *bytes = 0;
  OT_TRY(ot_gen_begin(m, o));
  int64_t n_ctx;
  int max_pack;
  OT_TRY(check_job(m, seqs, n, n_slots, o, &n_ctx, &max_pack));
  if (n_slots > n) n_slots = n > 0 ? n : 1;
  if (!m->vt->build_batch) {
    if (n_slots > 1)
      return ot_fail(OT_ERR_UNSUPPORTED, "%s: batched generation is not implemented for this architecture",
                     m->vt->arch);
    m->n_ctx = n_ctx;
    return ot_lm_min_budget(m, max_pack, 0, bytes);
  }
  ot_lm_release_device(m);
  m->n_slots = n_slots;
  m->n_ctx = n_ctx;
  ot_status s = ot_lm_fit(m, 1, max_pack); /* the smallest of everything */
  const int T[2] = {max_pack, n_slots}, L[2] = {max_pack < n_slots ? max_pack : n_slots, n_slots};
  for (int i = 0; s == OT_OK && i < 2; i++) {
    ot_lm_step st = {0};
    uint64_t b = 0;
    int op;
    s = m->vt->build_batch(m, T[i], L[i], &st);
    if (s == OT_OK) s = ot_sched_min_budget(st.prog, &b, &op);
    ot_lm_step_destroy(&st);
    if (s == OT_OK && b > *bytes) *bytes = b;
  }
  m->n_slots = 0;
  return s;
}
