/* test_model_batch.c — batched generation (issue 19, ot_generate_batch) on
 * the reference models of tests/data/models: a dense Llama (llama_gqa), one
 * with a sliding window shorter than its prompt (mistral_tiny, window 8)
 * and a mixture of experts (mixtral_tiny).
 *
 * The job: slices of the manifest's prompt of different lengths (1 to 13
 * tokens), different max_new_tokens, more sequences than slots (so slots
 * are refilled while others decode). What must hold:
 *   - per sequence, the tokens of a batch of 1, 2 or 3 slots are those of
 *     ot_generate for that prompt alone (and for the whole prompt,
 *     transformers' greedy tokens), the logits of every step within 1e-5
 *     of the row's largest magnitude, bitwise where the kernels run on
 *     host threads (tol_on);
 *   - refill: sequences finish and start in the order the slots free up;
 *   - an EOS in one sequence stops only that one;
 *   - sampling draws from (seed, stream, step): the same tokens whatever
 *     the batch, stream 0 is ot_generate's;
 *   - at the job's feasibility bound (ot_generate_batch_min_budget), where
 *     the KV caches are evicted and reloaded, results are bitwise those of
 *     the unlimited run and the trace stays within the budget;
 *   - 16-bit KV caches (ot_gen_opts.kv_dtype): half the bytes; a batch is
 *     what each sequence gives alone with the same caches, also at the
 *     job's bound;
 *     the first logits stay near the f32 caches' but are not theirs;
 *   - what is refused is refused by name;
 *   - should_stop (a caller's Ctrl-C) stops at a token boundary with what
 *     was made (issue 43). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kcommon.h"
#include "model_test.h"
#include "omptensor/models.h"
#include "ot_test.h"

#define MAX_SEQ 12
#define MAX_NEW 16

typedef struct seq_log {
  float *rows;    /* [MAX_NEW, vocab]: each step's logits as on_logits gave them */
  int n_rows;
  int32_t tokens[MAX_NEW];
  int n_tokens, stopped;
} seq_log;

typedef struct capture {
  seq_log s[MAX_SEQ];
  int64_t vocab;
  int order[MAX_SEQ], n_done; /* on_seq_done's order */
} capture;

static ot_status on_logits(void *u, int seq, int index, const float *row, int64_t vocab) {
  capture *c = u;
  assert_true(seq >= 0 && seq < MAX_SEQ);
  seq_log *s = &c->s[seq];
  assert_int_equal(index, s->n_rows); /* every step, in order */
  assert_true(index < MAX_NEW);
  if (!s->rows) s->rows = calloc((size_t)(MAX_NEW * vocab), sizeof *s->rows);
  c->vocab = vocab;
  memcpy(s->rows + (int64_t)index * vocab, row, (size_t)vocab * sizeof *row);
  s->n_rows++;
  return OT_OK;
}

static ot_status on_done(void *u, int seq, const ot_gen_result *r) {
  capture *c = u;
  assert_true(c->n_done < MAX_SEQ);
  c->order[c->n_done++] = seq;
  c->s[seq].n_tokens = r->n_tokens;
  c->s[seq].stopped = r->stopped_at_eos;
  memcpy(c->s[seq].tokens, r->tokens, (size_t)r->n_tokens * sizeof *r->tokens);
  return OT_OK;
}

static void capture_free(capture *c) {
  for (int i = 0; i < MAX_SEQ; i++) free(c->s[i].rows);
  memset(c, 0, sizeof *c);
}

typedef struct job {
  ot_gen_seq seqs[MAX_SEQ];
  int n;
} job;

/* Sequence i: the first lens[i] tokens of the manifest's prompt, max_new[i] new tokens, stream i. */
static job make_job(const ot_test_manifest *mf, const int *lens, const int *max_new, int n) {
  job j = {.n = n};
  for (int i = 0; i < n; i++)
    j.seqs[i] = (ot_gen_seq){.prompt = mf->prompt, .n_prompt = lens[i], .max_new_tokens = max_new[i], .stream = (uint64_t)i};
  return j;
}

static ot_lm *load(ot_ctx *ctx, const char *set) {
  char *dir = ot_test_model_path(set, "");
  ot_lm *m;
  OT_ASSERT_OK(ot_model_load(ctx, dir, OT_DTYPE_KEEP, NULL, NULL, &m));
  free(dir);
  return m;
}

static ot_gen_opts greedy_opts(void) {
  ot_gen_opts g = ot_gen_opts_default();
  g.n_eos = 0;
  return g;
}

/* Each sequence alone through ot_generate (on_logits gives its rows as seq 0). */
static void run_single(ot_lm *m, const ot_gen_opts *o, const job *j, capture *c) {
  memset(c, 0, sizeof *c);
  for (int i = 0; i < j->n; i++) {
    capture one = {0};
    ot_gen_opts g = *o;
    g.max_new_tokens = j->seqs[i].max_new_tokens;
    g.on_logits = on_logits;
    g.logits_user = &one;
    ot_gen_result r;
    OT_ASSERT_OK(ot_generate(m, j->seqs[i].prompt, j->seqs[i].n_prompt, &g, &r));
    c->s[i] = one.s[0];
    c->vocab = one.vocab;
    c->s[i].n_tokens = r.n_tokens;
    c->s[i].stopped = r.stopped_at_eos;
    memcpy(c->s[i].tokens, r.tokens, (size_t)r.n_tokens * sizeof *r.tokens);
    ot_gen_result_free(&r);
  }
}

static void run_batch(ot_lm *m, const ot_gen_opts *o, const job *j, int slots, capture *c, ot_gen_batch_result *out) {
  memset(c, 0, sizeof *c);
  ot_gen_opts g = *o;
  g.on_logits = on_logits;
  g.logits_user = c;
  g.on_seq_done = on_done;
  g.done_user = c;
  ot_gen_batch_result r;
  OT_ASSERT_OK(ot_generate_batch(m, j->seqs, j->n, slots, &g, &r));
  assert_int_equal(r.n, j->n);
  assert_int_equal(c->n_done, j->n);
  for (int i = 0; i < j->n; i++) { /* the result and what on_seq_done saw agree */
    assert_int_equal(r.seqs[i].n_tokens, c->s[i].n_tokens);
    assert_memory_equal(r.seqs[i].tokens, c->s[i].tokens, (size_t)c->s[i].n_tokens * sizeof(int32_t));
    assert_int_equal(r.seqs[i].stopped_at_eos, c->s[i].stopped);
  }
  if (out) *out = r;
  else ot_gen_batch_result_free(&r);
}

/* Sequence by sequence: the same tokens and stop, as many logits rows, each
 * value within tol of the row's largest magnitude (bitwise if tol is 0).
 * Returns how many values were not bitwise equal. */
static int64_t compare(const char *what, const capture *got, const capture *want, int n, double tol) {
  int64_t differ = 0;
  for (int i = 0; i < n; i++) {
    const seq_log *a = &got->s[i], *b = &want->s[i];
    int t0 = 0;
    while (t0 < a->n_tokens && t0 < b->n_tokens && a->tokens[t0] == b->tokens[t0]) t0++;
    if (a->n_tokens != b->n_tokens || t0 < a->n_tokens)
      fail_msg("%s: sequence %d: %d tokens where alone it made %d; token %d is %d, alone %d", what, i, a->n_tokens,
               b->n_tokens, t0, t0 < a->n_tokens ? a->tokens[t0] : -1, t0 < b->n_tokens ? b->tokens[t0] : -1);
    assert_int_equal(a->stopped, b->stopped);
    assert_int_equal(a->n_rows, b->n_rows);
    for (int t = 0; t < a->n_rows; t++) {
      const float *x = a->rows + (int64_t)t * want->vocab, *y = b->rows + (int64_t)t * want->vocab;
      double mag = 0, worst = 0;
      for (int64_t v = 0; v < want->vocab; v++) {
        mag = fmax(mag, fabs((double)y[v]));
        worst = fmax(worst, fabs((double)x[v] - (double)y[v]));
        differ += x[v] != y[v];
      }
      if (worst > tol * mag || (tol == 0 && worst > 0))
        fail_msg("%s: sequence %d step %d: logits differ by %.3g (row magnitude %.3g, tolerance %.1g)", what, i, t,
                 worst, mag, tol);
    }
  }
  return differ;
}

/* The logits' tolerance on ctx: bitwise where the kernels run on host
 * threads (every row-wise kernel then computes a row the same way whatever
 * the other rows; measured so on the host and offload-host builds), else
 * (a GPU: GEMMs of M = slots rows where one sequence has a GEMV, the warp
 * attention kernel) 1e-5 of the row's magnitude. */
static double tol_on(ot_ctx *ctx, ot_backend b) {
  return b == OT_BACKEND_HOST || ot_kruns_on_host(ot_ctx_device(ctx, 0)) ? 0 : 1e-5;
}

/* The same with 16-bit KV caches: where a batch's f32 keys differ from the
 * single run's in the last bit (the GPU case above), rounding them to the
 * cache's dtype can land on the neighbouring 16-bit value, so the logits may
 * differ by up to the cache's own precision (one ulp: 2^-8 for bf16, 2^-11
 * for f16; measured on the H200: 7e-5 of the row's magnitude with f16). A
 * wrong slot, position or row would be off by the row's magnitude. */
static double tol_kv(ot_ctx *ctx, ot_backend b, ot_dtype kv) {
  const double t = tol_on(ctx, b);
  if (t == 0 || kv == OT_F32) return t;
  return kv == OT_BF16 ? 0x1p-8 : 0x1p-11;
}

static const int lens7[7] = {13, 5, 9, 1, 11, 3, 13}, new7[7] = {16, 6, 10, 4, 16, 8, 16};

/* A batch run against the same sequences alone: its decode-token count, then
 * compare()'s tokens and logits; frees the batch's result and capture. */
static void check_against_alone(const char *what, ot_gen_batch_result *r, capture *got, const capture *alone,
                                const job *j, double tol) {
  int64_t toks = 0;
  for (int i = 0; i < j->n; i++) toks += r->seqs[i].n_tokens - 1;
  assert_int_equal(r->decode_tokens, toks);
  assert_true(r->decode_tokens_per_second > 0);
  const int64_t differ = compare(what, got, alone, j->n, tol);
  if (differ) printf("%s: %lld logits not bitwise those of one sequence (within %.0e)\n", what, (long long)differ, tol);
  ot_gen_batch_result_free(r);
  capture_free(got);
}

static const int lens12[12] = {13, 5, 9, 1, 11, 3, 13, 7, 2, 12, 6, 10},
                 new12[12] = {16, 6, 10, 4, 16, 8, 16, 12, 5, 9, 14, 7};

/* A step of more than 8 rows (DECODE_F32_ROWS in llama.c): on a GPU the
 * rows go to the GEMM (cuBLAS, f32 here: the reference weights are f32)
 * instead of the GEMV kernel, their RoPE and cache append to
 * rope_append_rows' bare kernel; 10 slots, 12 sequences, against each alone
 * (issue 44: the 1-3 slot cases never have more than 3 rows a step). */
static void wide_batch_matches_single(void **state) {
  (void)state;
  ot_backend bk[3];
  const int nb = ot_test_backends(bk);
  ot_test_manifest mf;
  ot_test_read_manifest("llama_gqa", &mf);
  const job j = make_job(&mf, lens12, new12, 12);
  for (int b = 0; b < nb; b++) {
    ot_ctx *ctx = ot_test_ctx(bk[b]);
    ot_lm *m = load(ctx, "llama_gqa");
    const ot_gen_opts g = greedy_opts();
    capture alone, got;
    run_single(m, &g, &j, &alone);
    char what[128];
    snprintf(what, sizeof what, "llama_gqa on %s, 10 slots", ot_backend_name(bk[b]));
    ot_gen_batch_result r;
    run_batch(m, &g, &j, 10, &got, &r);
    assert_int_equal(r.n_slots, 10);
    /* 1e-5 on every device: on host threads too, a packed prompt of ~80 rows
     * takes the tiled host GEMM, whose sums for a row depend on the rows
     * around it (measured: 6.1e-6 in a row of magnitude 5.6) */
    check_against_alone(what, &r, &got, &alone, &j, 1e-5);
    capture_free(&alone);
    ot_lm_destroy(m);
    ot_ctx_destroy(ctx);
  }
}

/* Batches of 1, 2 and 3 slots against each prompt alone, on every backend. */
static void batch_matches_single(void **state) {
  (void)state;
  static const char *sets[] = {"llama_gqa", "mistral_tiny", "mixtral_tiny"};
  ot_backend bk[3];
  const int nb = ot_test_backends(bk);
  for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
    ot_test_manifest mf;
    ot_test_read_manifest(sets[s], &mf);
    assert_int_equal(mf.n_prompt, 13);
    const job j = make_job(&mf, lens7, new7, 7);
    for (int b = 0; b < nb; b++) {
      ot_ctx *ctx = ot_test_ctx(bk[b]);
      ot_lm *m = load(ctx, sets[s]);
      const ot_gen_opts g = greedy_opts();
      capture alone;
      run_single(m, &g, &j, &alone);
      for (int i = 0; i < j.n; i++) /* the whole prompt: transformers' tokens */
        if (j.seqs[i].n_prompt == mf.n_prompt)
          assert_memory_equal(alone.s[i].tokens, mf.gen, (size_t)mf.n_gen * sizeof *mf.gen);
      for (int slots = 1; slots <= 3; slots++) {
        char what[128];
        snprintf(what, sizeof what, "%s on %s, %d slot(s)", sets[s], ot_backend_name(bk[b]), slots);
        capture got;
        ot_gen_batch_result r;
        run_batch(m, &g, &j, slots, &got, &r);
        assert_int_equal(r.n_slots, slots);
        assert_true(r.prefill_steps >= (slots == 1 ? 7 : 3)); /* refilled: more sequences than slots */
        check_against_alone(what, &r, &got, &alone, &j, tol_on(ctx, bk[b]));
      }
      capture_free(&alone);
      ot_lm_destroy(m);
      ot_ctx_destroy(ctx);
    }
  }
}

/* Two slots, five sequences of 8, 2, 3, 5 and 1 new tokens: 0 and 1 start;
 * 1 stops after decode step 1 and 2 takes its slot; 2 stops after step 3
 * and 3 takes it; 0 and 3 stop together after step 7 (slot order); 4 starts
 * and stops at its first token. Four prompt steps, seven decode steps. */
static void refill_order(void **state) {
  (void)state;
  ot_test_manifest mf;
  ot_test_read_manifest("llama_gqa", &mf);
  static const int lens[5] = {13, 4, 7, 2, 10}, news[5] = {8, 2, 3, 5, 1};
  const job j = make_job(&mf, lens, news, 5);
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  ot_lm *m = load(ctx, "llama_gqa");
  const ot_gen_opts g = greedy_opts();
  capture alone, got;
  run_single(m, &g, &j, &alone);
  ot_gen_batch_result r;
  run_batch(m, &g, &j, 2, &got, &r);
  static const int order[5] = {1, 2, 0, 3, 4};
  assert_memory_equal(got.order, order, sizeof order);
  assert_int_equal(r.prefill_steps, 4);
  assert_int_equal(r.decode_steps, 7);
  assert_int_equal(r.decode_tokens, 8 + 2 + 3 + 5 + 1 - 5);
  for (int i = 0; i < 5; i++) assert_int_equal(r.seqs[i].n_tokens, news[i]);
  compare("refill", &got, &alone, j.n, tol_on(ctx, ot_test_moving_backend()));
  ot_gen_batch_result_free(&r);
  capture_free(&got);
  capture_free(&alone);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
}

/* An EOS id that sequence 1 makes as its third token: it stops there; every
 * other sequence runs as without it, up to its own first EOS if it has one. */
static void eos_in_one_sequence(void **state) {
  (void)state;
  ot_test_manifest mf;
  ot_test_read_manifest("llama_gqa", &mf);
  const job j = make_job(&mf, lens7, new7, 7);
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  ot_lm *m = load(ctx, "llama_gqa");
  ot_gen_opts g = greedy_opts();
  capture free_run, got;
  run_batch(m, &g, &j, 3, &free_run, NULL);
  const int32_t eos = free_run.s[1].tokens[2];
  g.n_eos = 1;
  g.eos_ids[0] = eos;
  run_batch(m, &g, &j, 3, &got, NULL);
  int untouched = 0;
  for (int i = 0; i < j.n; i++) {
    const seq_log *f = &free_run.s[i], *e = &got.s[i];
    int stop = -1;
    for (int t = 0; t < f->n_tokens && stop < 0; t++)
      if (f->tokens[t] == eos) stop = t;
    const int want = stop >= 0 ? stop + 1 : f->n_tokens;
    if (e->n_tokens != want || memcmp(e->tokens, f->tokens, (size_t)want * sizeof *e->tokens))
      fail_msg("EOS %d: sequence %d made %d tokens, expected the first %d of its %d without EOS", eos, i, e->n_tokens,
               want, f->n_tokens);
    assert_int_equal(e->stopped, stop >= 0);
    untouched += stop < 0;
  }
  assert_true(got.s[1].stopped && got.s[1].n_tokens <= 3);
  assert_true(untouched >= 2); /* the check says something about the others */
  capture_free(&free_run);
  capture_free(&got);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
}

/* Sampled: a sequence's tokens are the same with 1 or 3 slots (its stream
 * is its index), stream 0 is ot_generate's draw, and two sequences of the
 * same prompt on streams 0 and 6 sample differently. */
static void sampling_per_sequence(void **state) {
  (void)state;
  ot_test_manifest mf;
  ot_test_read_manifest("llama_gqa", &mf);
  const job j = make_job(&mf, lens7, new7, 7);
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  ot_lm *m = load(ctx, "llama_gqa");
  ot_gen_opts g = greedy_opts();
  g.greedy = 0;
  g.temperature = 1.5f;
  g.top_k = 0;
  g.seed = 11;
  capture one, three, alone;
  run_batch(m, &g, &j, 1, &one, NULL);
  run_batch(m, &g, &j, 3, &three, NULL);
  compare("sampled, 3 slots against 1", &three, &one, j.n, tol_on(ctx, ot_test_moving_backend()));
  run_single(m, &g, &j, &alone); /* ot_generate draws as stream 0: sequence 0 only */
  assert_int_equal(alone.s[0].n_tokens, one.s[0].n_tokens);
  assert_memory_equal(alone.s[0].tokens, one.s[0].tokens, (size_t)one.s[0].n_tokens * sizeof(int32_t));
  assert_int_equal(j.seqs[6].n_prompt, j.seqs[0].n_prompt);
  if (!memcmp(one.s[0].tokens, one.s[6].tokens, (size_t)one.s[0].n_tokens * sizeof(int32_t)))
    fail_msg("the same prompt on streams 0 and 6 sampled the same %d tokens", one.s[0].n_tokens);
  capture_free(&one);
  capture_free(&three);
  capture_free(&alone);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
}

/* Upload events of the KV caches in a trace. */
static int cache_uploads(const ot_trace *tr) {
  int n = 0;
  const ot_trace_event *e;
  for (size_t i = 0; (e = ot_trace_event_at(tr, i)); i++)
    n += e->kind == OT_TRACE_UPLOAD && e->name && strstr(e->name, "_cache") != NULL;
  return n;
}

/* The largest upload of a KV cache in a trace, in bytes. */
static uint64_t cache_upload_bytes(const ot_trace *tr) {
  uint64_t b = 0;
  const ot_trace_event *e;
  for (size_t i = 0; (e = ot_trace_event_at(tr, i)); i++)
    if (e->kind == OT_TRACE_UPLOAD && e->name && strstr(e->name, "_cache") && e->bytes > b) b = e->bytes;
  return b;
}

/* The KV caches' write-backs in a trace: each must copy only the rows its
 * steps appended (OT_TRACE_PARTIAL, ot_op_wrote), so on average far less
 * than a whole cache (a decode step appends one row per slot of slots x
 * n_ctx; a prompt step at most the prompts' rows). Fails naming the first
 * whole write-back, or if they average a quarter of a cache or more. */
static void check_cache_writebacks(const char *what, const ot_trace *tr) {
  const uint64_t whole = cache_upload_bytes(tr);
  uint64_t sum = 0, n = 0;
  const ot_trace_event *e;
  for (size_t i = 0; (e = ot_trace_event_at(tr, i)); i++) {
    if (e->kind != OT_TRACE_DOWNLOAD || !e->name || !strstr(e->name, "_cache")) continue;
    if (!(e->flags & OT_TRACE_PARTIAL))
      fail_msg("%s: '%s' written home whole (%llu bytes), not the rows its steps appended", what, e->name,
               (unsigned long long)e->bytes);
    sum += e->bytes;
    n++;
  }
  if (n == 0 || sum == 0 || 4 * sum >= n * whole)
    fail_msg("%s: %llu cache write-backs of %llu bytes in all, caches of %llu bytes: not the appended rows", what,
             (unsigned long long)n, (unsigned long long)sum, (unsigned long long)whole);
}

/* At the job's feasibility bound, two strategies: bitwise the unlimited
 * run's tokens and logits, within the budget, the caches reloaded and
 * written home by the rows appended (so a row left out would show). */
static void budget_at_bound(void **state) {
  (void)state;
  static const char *sets[] = {"llama_gqa", "mistral_tiny", "mixtral_tiny"};
  for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
    ot_test_manifest mf;
    ot_test_read_manifest(sets[s], &mf);
    const job j = make_job(&mf, lens7, new7, 7);
    ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
    ot_lm *m = load(ctx, sets[s]);
    ot_gen_opts g = greedy_opts();
    ot_trace *tr;
    OT_ASSERT_OK(ot_trace_create(&tr));
    g.trace = tr;
    capture full, bound;
    run_batch(m, &g, &j, 3, &full, NULL);
    const int full_uploads = cache_uploads(tr);
    ot_trace_destroy(tr);
    uint64_t floor_b;
    OT_ASSERT_OK(ot_generate_batch_min_budget(m, j.seqs, j.n, 3, &g, &floor_b));
    assert_true(floor_b > 0 && floor_b < m->weight_bytes);
    static const ot_strategy strat[2] = {OT_STRATEGY_MINIMAL, OT_STRATEGY_AGGRESSIVE};
    for (int k = 0; k < 2; k++) {
      OT_ASSERT_OK(ot_trace_create(&tr));
      g.trace = tr;
      g.sched.budget_bytes = floor_b;
      g.sched.strategy = strat[k];
      run_batch(m, &g, &j, 3, &bound, NULL);
      char what[128];
      snprintf(what, sizeof what, "%s at the bound of %llu bytes (%s)", sets[s], (unsigned long long)floor_b,
               ot_strategy_name(strat[k]));
      compare(what, &bound, &full, j.n, 0);
      OT_ASSERT_OK(ot_trace_check_budget(tr, floor_b));
      check_cache_writebacks(what, tr);
      if (cache_uploads(tr) <= full_uploads)
        fail_msg("%s: the KV caches were uploaded %d times, %d without a budget: nothing was offloaded", what,
                 cache_uploads(tr), full_uploads);
      ot_trace_destroy(tr);
      capture_free(&bound);
    }
    capture_free(&full);
    ot_lm_destroy(m);
    ot_ctx_destroy(ctx);
  }
}

#ifdef OT_OFFLOAD
/* Host kernels in a trace (hybrid compute). */
static int host_kernels(const ot_trace *tr) {
  int n = 0;
  for (size_t i = 0; i < ot_trace_count(tr); i++) {
    const ot_trace_event *e = ot_trace_event_at(tr, i);
    n += e->kind == OT_TRACE_KERNEL && (e->flags & OT_TRACE_HOST);
  }
  return n;
}
#endif

/* Hybrid compute (issue 20) on the moving backend: with ops of the prompt
 * and decode plans on the host's cores (rates that make every streamed op
 * worth moving: the split then depends on the plan alone), a batch job and
 * each sequence alone give the all-device runs' tokens and logits, bitwise
 * where the device runs on host threads (the host ops are the same kernels
 * there), on a GPU within 1e-4 of the row (other kernels: the GPU GEMV, its
 * contracted multiply-adds), within the budget;
 * mixtral_tiny's experts are then read from their homes by the host op. */
static void hybrid_matches_device(void **state) {
  (void)state;
#ifdef OT_OFFLOAD
  static const char *sets[] = {"llama_gqa", "mistral_tiny", "mixtral_tiny"};
  for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
    ot_test_manifest mf;
    ot_test_read_manifest(sets[s], &mf);
    const job j = make_job(&mf, lens7, new7, 7);
    ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
    ot_lm *m = load(ctx, sets[s]);
    ot_gen_opts g = greedy_opts();
    uint64_t floor_b;
    OT_ASSERT_OK(ot_generate_batch_min_budget(m, j.seqs, j.n, 3, &g, &floor_b));
    g.sched.budget_bytes = floor_b;
    g.sched.compute = OT_COMPUTE_GPU;
    capture dev, hyb, dev1, hyb1;
    run_batch(m, &g, &j, 3, &dev, NULL);
    run_single(m, &g, &j, &dev1);
    g.sched.compute = OT_COMPUTE_HYBRID;
    g.sched.host_read_rate = 1e15;
    g.sched.cross_latency_s = 1e-12;
    ot_trace *tr;
    OT_ASSERT_OK(ot_trace_create(&tr));
    g.trace = tr;
    run_batch(m, &g, &j, 3, &hyb, NULL);
    run_single(m, &g, &j, &hyb1);
    char what[128];
    snprintf(what, sizeof what, "%s hybrid at %llu bytes", sets[s], (unsigned long long)floor_b);
    const double tol = ot_kruns_on_host(ot_ctx_device(ctx, 0)) ? 0 : 1e-4;
    compare(what, &hyb, &dev, j.n, tol);
    compare(what, &hyb1, &dev1, j.n, tol);
    OT_ASSERT_OK(ot_trace_check_budget(tr, floor_b));
    if (host_kernels(tr) < j.n) fail_msg("%s: %d ops ran on the host", what, host_kernels(tr));
    ot_trace_destroy(tr);
    capture_free(&dev);
    capture_free(&hyb);
    capture_free(&dev1);
    capture_free(&hyb1);
    ot_lm_destroy(m);
    ot_ctx_destroy(ctx);
  }
#endif
}

/* The first step's logits of each sequence: within tol of the row's largest
 * magnitude of want's; returns how many values differ at all. */
static int64_t first_rows_near(const char *what, const capture *got, const capture *want, int n, double tol) {
  int64_t differ = 0;
  for (int i = 0; i < n; i++) {
    const float *x = got->s[i].rows, *y = want->s[i].rows;
    double mag = 0, worst = 0;
    for (int64_t v = 0; v < want->vocab; v++) {
      mag = fmax(mag, fabs((double)y[v]));
      worst = fmax(worst, fabs((double)x[v] - (double)y[v]));
      differ += x[v] != y[v];
    }
    if (worst > tol * mag)
      fail_msg("%s: sequence %d: first logits differ by %.3g (row magnitude %.3g, tolerance %.1g)", what, i, worst, mag,
               tol);
  }
  return differ;
}

/* bf16 and f16 KV caches on the moving backend: a batch of 3 slots gives
 * what each sequence gives alone with the same caches, and a cache is half
 * the bytes of an f32 one; at that job's feasibility bound, bitwise the
 * unlimited run, the budget held; the first logits within 2 % of the f32
 * caches' and not bitwise theirs. */
static void kv_dtype_16bit(void **state) {
  (void)state;
  static const char *sets[] = {"llama_gqa", "mixtral_tiny"};
  static const ot_dtype kvs[2] = {OT_BF16, OT_F16};
  const ot_backend bk = ot_test_moving_backend();
  for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
    ot_test_manifest mf;
    ot_test_read_manifest(sets[s], &mf);
    const job j = make_job(&mf, lens7, new7, 7);
    ot_ctx *ctx = ot_test_ctx(bk);
    ot_lm *m = load(ctx, sets[s]);
    ot_gen_opts g = greedy_opts();
    capture f32, f32b;
    run_single(m, &g, &j, &f32);
    ot_trace *tr;
    OT_ASSERT_OK(ot_trace_create(&tr));
    g.trace = tr;
    run_batch(m, &g, &j, 3, &f32b, NULL); /* the caches' bytes as f32 */
    const uint64_t f32_bytes = cache_upload_bytes(tr);
    ot_trace_destroy(tr);
    capture_free(&f32b);
    for (int k = 0; k < 2; k++) {
      char what[128];
      snprintf(what, sizeof what, "%s with %s KV caches", sets[s], ot_dtype_name(kvs[k]));
      g = greedy_opts();
      g.kv_dtype = kvs[k];
      capture alone, got, bound;
      run_single(m, &g, &j, &alone);
      if (first_rows_near(what, &alone, &f32, j.n, 0.02) == 0)
        fail_msg("%s: the first logits are bitwise those of f32 caches", what);
      OT_ASSERT_OK(ot_trace_create(&tr));
      g.trace = tr;
      run_batch(m, &g, &j, 3, &got, NULL);
      const uint64_t b16 = cache_upload_bytes(tr);
      ot_trace_destroy(tr);
      if (b16 == 0 || 2 * b16 > f32_bytes)
        fail_msg("%s: a cache uploads %llu bytes, %llu as f32: not half", what, (unsigned long long)b16,
                 (unsigned long long)f32_bytes);
      compare(what, &got, &alone, j.n, tol_kv(ctx, bk, kvs[k]));
      g.trace = NULL;
      uint64_t floor_b;
      OT_ASSERT_OK(ot_generate_batch_min_budget(m, j.seqs, j.n, 3, &g, &floor_b));
      OT_ASSERT_OK(ot_trace_create(&tr));
      g.trace = tr;
      g.sched.budget_bytes = floor_b;
      run_batch(m, &g, &j, 3, &bound, NULL);
      compare(what, &bound, &got, j.n, 0);
      OT_ASSERT_OK(ot_trace_check_budget(tr, floor_b));
      ot_trace_destroy(tr);
      capture_free(&alone);
      capture_free(&got);
      capture_free(&bound);
    }
    capture_free(&f32);
    ot_lm_destroy(m);
    ot_ctx_destroy(ctx);
  }
}

/* Arguments and models that cannot run, refused by name; GPT-2 (no batched
 * steps) runs one slot as ot_generate, one prompt after another. */
static void refusals(void **state) {
  (void)state;
  ot_test_manifest mf;
  ot_test_read_manifest("llama_gqa", &mf);
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_HOST);
  ot_lm *m = load(ctx, "llama_gqa");
  ot_gen_opts g = greedy_opts();
  g.max_new_tokens = 4;
  ot_gen_seq q[2] = {{mf.prompt, 5, -1, 0}, {mf.prompt, 3, -1, 1}};
  ot_gen_batch_result r;
  OT_ASSERT_FAILS(ot_generate_batch(m, q, 2, 0, &g, &r), OT_ERR_INVALID_ARG, "0 slots");
  g.logits_out = "/tmp/never.npy";
  OT_ASSERT_FAILS(ot_generate_batch(m, q, 2, 2, &g, &r), OT_ERR_INVALID_ARG, "logits_out");
  g.logits_out = NULL;
  q[1].n_prompt = 0;
  OT_ASSERT_FAILS(ot_generate_batch(m, q, 2, 2, &g, &r), OT_ERR_INVALID_ARG, "sequence 1: the prompt is empty");
  const int32_t bad[2] = {3, 9999};
  q[1] = (ot_gen_seq){bad, 2, -1, 1};
  OT_ASSERT_FAILS(ot_generate_batch(m, q, 2, 2, &g, &r), OT_ERR_INVALID_ARG, "sequence 1: prompt token 1 is 9999");
  q[1] = (ot_gen_seq){mf.prompt, 3, 1000, 1};
  OT_ASSERT_FAILS(ot_generate_batch(m, q, 2, 2, &g, &r), OT_ERR_INVALID_ARG, "sequence 1: 3 prompt + 1000 new tokens");
  assert_null(r.seqs);
  q[1] = (ot_gen_seq){mf.prompt, 3, -1, 1};
  g.kv_dtype = OT_Q8B; /* a weight type, not one attention reads */
  OT_ASSERT_FAILS(ot_generate_batch(m, q, 2, 2, &g, &r), OT_ERR_DTYPE, "KV cache dtype q8b");
  OT_ASSERT_FAILS(ot_generate(m, mf.prompt, 3, &g, &(ot_gen_result){0}), OT_ERR_DTYPE, "KV cache dtype q8b");
  g.kv_dtype = OT_F32;
  /* max_new_tokens 0: done at once, nothing made */
  q[1] = (ot_gen_seq){mf.prompt, 3, 0, 1};
  OT_ASSERT_OK(ot_generate_batch(m, q, 2, 2, &g, &r));
  assert_int_equal(r.seqs[0].n_tokens, 4);
  assert_int_equal(r.seqs[1].n_tokens, 0);
  ot_gen_batch_result_free(&r);
  ot_lm_destroy(m);
  /* dynamic RoPE: its frequencies follow each sequence's length */
  m = load(ctx, "llama_rope_dynamic");
  q[1] = (ot_gen_seq){mf.prompt, 3, -1, 1};
  OT_ASSERT_FAILS(ot_generate_batch(m, q, 2, 2, &g, &r), OT_ERR_UNSUPPORTED, "dynamic RoPE");
  ot_lm_destroy(m);
  /* GPT-2: one slot, sequence after sequence, as ot_generate */
  ot_test_manifest gm;
  ot_test_read_manifest("gpt2_small", &gm);
  m = load(ctx, "gpt2_small");
  ot_gen_seq gq[2] = {{gm.prompt, gm.n_prompt, -1, 0}, {gm.prompt, 2, -1, 1}};
  OT_ASSERT_FAILS(ot_generate_batch(m, gq, 2, 2, &g, &r), OT_ERR_UNSUPPORTED, "gpt2: batched generation is not");
  OT_ASSERT_OK(ot_generate_batch(m, gq, 2, 1, &g, &r));
  for (int i = 0; i < 2; i++) {
    ot_gen_result one;
    OT_ASSERT_OK(ot_generate(m, gq[i].prompt, gq[i].n_prompt, &g, &one));
    assert_int_equal(one.n_tokens, r.seqs[i].n_tokens);
    assert_memory_equal(one.tokens, r.seqs[i].tokens, (size_t)one.n_tokens * sizeof *one.tokens);
    ot_gen_result_free(&one);
  }
  assert_memory_equal(r.seqs[0].tokens, gm.gen, 4 * sizeof *gm.gen);
  ot_gen_batch_result_free(&r);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
}

/* ot_gen_opts.should_stop (issue 43: Ctrl-C in the command) is asked at
 * each token boundary; when it says stop, ot_generate returns the tokens
 * made so far, cancelled, and ot_generate_batch leaves the unfinished
 * sequences out (on_seq_done is not called for them). The library installs
 * no signal handler: the caller's handler sets what should_stop reads. */
typedef struct stop_after {
  int asked, at;
} stop_after;

static int stop_when(void *u) {
  stop_after *s = u;
  return ++s->asked >= s->at;
}

static void should_stop_at_a_token(void **state) {
  (void)state;
  ot_test_manifest mf;
  ot_test_read_manifest("llama_gqa", &mf);
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  ot_lm *m = load(ctx, "llama_gqa");
  ot_gen_opts g = greedy_opts();
  g.max_new_tokens = 12;
  ot_gen_result all, cut;
  OT_ASSERT_OK(ot_generate(m, mf.prompt, mf.n_prompt, &g, &all));
  assert_false(all.cancelled);
  stop_after s = {0, 4};
  g.should_stop = stop_when;
  g.stop_user = &s;
  OT_ASSERT_OK(ot_generate(m, mf.prompt, mf.n_prompt, &g, &cut));
  assert_true(cut.cancelled);
  assert_false(cut.stopped_at_eos);
  assert_int_equal(cut.n_tokens, 4); /* the prompt's token and three decode steps: asked before each */
  assert_memory_equal(cut.tokens, all.tokens, 4 * sizeof *cut.tokens);
  ot_gen_result_free(&all);
  ot_gen_result_free(&cut);
  /* a batch: the sequences finished before the stop are whole and as before, the others left out */
  const job j = make_job(&mf, lens7, new7, 7);
  capture free_run, got = {0};
  ot_gen_opts b = greedy_opts();
  run_batch(m, &b, &j, 3, &free_run, NULL);
  stop_after t = {0, 8};
  b.should_stop = stop_when;
  b.stop_user = &t;
  b.on_seq_done = on_done;
  b.done_user = &got;
  ot_gen_batch_result r;
  OT_ASSERT_OK(ot_generate_batch(m, j.seqs, j.n, 3, &b, &r));
  assert_true(r.cancelled);
  assert_true(got.n_done >= 1 && got.n_done < j.n);
  for (int k = 0; k < got.n_done; k++) {
    const int i = got.order[k];
    assert_int_equal(got.s[i].n_tokens, free_run.s[i].n_tokens);
    assert_memory_equal(got.s[i].tokens, free_run.s[i].tokens, (size_t)got.s[i].n_tokens * sizeof(int32_t));
  }
  ot_gen_batch_result_free(&r);
  capture_free(&free_run);
  capture_free(&got);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(should_stop_at_a_token),
      cmocka_unit_test(batch_matches_single), cmocka_unit_test(wide_batch_matches_single), cmocka_unit_test(refill_order),
      cmocka_unit_test(eos_in_one_sequence),  cmocka_unit_test(sampling_per_sequence),
      cmocka_unit_test(budget_at_bound),      cmocka_unit_test(kv_dtype_16bit), cmocka_unit_test(hybrid_matches_device),
      cmocka_unit_test(refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
