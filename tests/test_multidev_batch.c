/* test_multidev_batch.c — batched generation pipelined over 2 and 3
 * emulated devices with micro-batches (issue 26; sched.h, "Micro-batches"):
 * each decode step's sequences in groups that are in different devices'
 * stages at once, a thread per stage. What must hold:
 *   - every sequence's tokens and every step's logits are bitwise those of
 *     the same job on one device (rows are independent: a row's arithmetic
 *     does not depend on the other rows of its step, on host threads), with
 *     default budgets and with budgets that make every device offload;
 *   - no device ever holds more than its own budget (from the trace);
 *   - the stages overlap: kernels of different micro-batches (runs) ran at
 *     the same time on different devices, which the stages run one after
 *     another (micro_batches 1) never do;
 *   - each micro-batch is a run of the trace (more runs than steps), with
 *     kernels on every device;
 *   - a mixture of experts (one expert window for all layers) is refused
 *     by name.
 *   - activations cross between stages device to device (stage copies
 *     auto, the emulated devices reaching each other) or, asked, through
 *     the host: the same tokens and logits either way;
 * Skipped with fewer devices than asked (a build without the offload plugin). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/device.h"
#include "model_test.h"
#include "omptensor/models.h"
#include "ot_test.h"

#define MAX_SEQ 8
#define MAX_NEW 16

static const int lens[7] = {13, 5, 9, 1, 11, 3, 13}, news[7] = {16, 6, 10, 4, 16, 8, 16};

typedef struct capture {
  float *rows[MAX_SEQ]; /* [MAX_NEW, vocab]: each step's logits */
  int n_rows[MAX_SEQ];
  int32_t tokens[MAX_SEQ][MAX_NEW];
  int n_tokens[MAX_SEQ];
  int64_t vocab;
} capture;

static ot_status on_logits(void *u, int seq, int index, const float *row, int64_t vocab) {
  capture *c = u;
  assert_true(seq >= 0 && seq < MAX_SEQ && index == c->n_rows[seq] && index < MAX_NEW);
  if (!c->rows[seq]) c->rows[seq] = calloc((size_t)(MAX_NEW * vocab), sizeof(float));
  c->vocab = vocab;
  memcpy(c->rows[seq] + (int64_t)index * vocab, row, (size_t)vocab * sizeof *row);
  c->n_rows[seq]++;
  return OT_OK;
}

static ot_status on_done(void *u, int seq, const ot_gen_result *r) {
  capture *c = u;
  c->n_tokens[seq] = r->n_tokens;
  memcpy(c->tokens[seq], r->tokens, (size_t)r->n_tokens * sizeof *r->tokens);
  return OT_OK;
}

static void capture_free(capture *c) {
  for (int i = 0; i < MAX_SEQ; i++) free(c->rows[i]);
  memset(c, 0, sizeof *c);
}

static ot_ctx *make_ctx(int n_dev, uint64_t budget) {
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = OT_BACKEND_MAP;
  o.device = 0;
  o.n_devices = n_dev;
  for (int k = 0; k < n_dev; k++) o.budgets[k] = budget;
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&o, &ctx));
  return ctx;
}

/* The job: sequence i the first lens[i] tokens of the set's prompt, news[i] new ones, stream i. */
static void make_job(const char *set, ot_test_manifest *mf, ot_gen_seq *seqs) {
  ot_test_read_manifest(set, mf);
  for (int i = 0; i < 7; i++)
    seqs[i] = (ot_gen_seq){.prompt = mf->prompt, .n_prompt = lens[i], .max_new_tokens = news[i], .stream = (uint64_t)i};
}

static ot_lm *load(ot_ctx *ctx, const char *set) {
  char *dir = ot_test_model_path(set, "");
  ot_lm *m;
  OT_ASSERT_OK(ot_model_load(ctx, dir, OT_DTYPE_KEEP, NULL, NULL, &m));
  free(dir);
  return m;
}

typedef struct job_out {
  capture c;
  int runs, steps;  /* the trace's runs; the job's prompt + decode steps */
  int overlap;      /* kernels of different runs at once on different devices */
  uint64_t bytes_peer; /* copied device to device (stage copies) */
} job_out;

/* Kernels of different runs on different devices whose times overlap. */
static int stages_overlap(const ot_trace *tr) {
  const size_t n = ot_trace_count(tr);
  for (size_t i = 0; i < n; i++) {
    const ot_trace_event *a = ot_trace_event_at(tr, i);
    if (a->kind != OT_TRACE_KERNEL) continue;
    for (size_t j = i + 1; j < n; j++) {
      const ot_trace_event *b = ot_trace_event_at(tr, j);
      if (b->kind == OT_TRACE_KERNEL && b->device != a->device && b->run != a->run && a->start_ns < b->end_ns &&
          b->start_ns < a->end_ns)
        return 1;
    }
  }
  return 0;
}

/* The job on devices 0..n_dev-1 under `budget` each (0: the default), 4 slots. */
static void run_job(const char *set, int n_dev, uint64_t budget, int micro, ot_stage_copies how, job_out *out) {
  memset(out, 0, sizeof *out);
  ot_test_manifest mf;
  ot_gen_seq seqs[7];
  make_job(set, &mf, seqs);
  ot_ctx *ctx = make_ctx(n_dev, budget);
  ot_lm *m = load(ctx, set);
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  ot_gen_opts g = ot_gen_opts_default();
  g.n_eos = 0;
  g.trace = tr;
  g.sched.micro_batches = micro;
  g.sched.stage_copies = how;
  g.sched.strategy = budget ? OT_STRATEGY_AGGRESSIVE : OT_STRATEGY_BALANCED;
  g.on_logits = on_logits;
  g.logits_user = &out->c;
  g.on_seq_done = on_done;
  g.done_user = &out->c;
  ot_gen_batch_result r;
  OT_ASSERT_OK(ot_generate_batch(m, seqs, 7, 4, &g, &r));
  out->steps = r.prefill_steps + r.decode_steps;
  ot_gen_batch_result_free(&r);
  int devs[4];
  uint64_t bud[4];
  for (int k = 0; k < n_dev; k++) devs[k] = ot_ctx_device(ctx, k), bud[k] = ot_ctx_budget(ctx, k);
  OT_ASSERT_OK(ot_trace_check_budgets(tr, n_dev, devs, bud));
  for (int k = 0; k < n_dev; k++) {
    int kernels = 0;
    for (size_t i = 0; i < ot_trace_count(tr); i++) {
      const ot_trace_event *e = ot_trace_event_at(tr, i);
      kernels += e->kind == OT_TRACE_KERNEL && e->device == devs[k];
    }
    if (!kernels) fail_msg("%s over %d devices: no kernel ran on device %d", set, n_dev, devs[k]);
  }
  out->runs = ot_trace_summarize(tr).runs;
  out->bytes_peer = ot_trace_summarize(tr).bytes_peer;
  out->overlap = stages_overlap(tr);
  ot_trace_destroy(tr);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
}

static void same_results(const char *what, const capture *got, const capture *want) {
  for (int i = 0; i < 7; i++) {
    if (got->n_tokens[i] != want->n_tokens[i] ||
        memcmp(got->tokens[i], want->tokens[i], (size_t)want->n_tokens[i] * sizeof(int32_t)))
      fail_msg("%s: sequence %d: not the tokens of one device", what, i);
    assert_int_equal(got->n_rows[i], want->n_rows[i]);
    if (memcmp(got->rows[i], want->rows[i], (size_t)(want->n_rows[i] * want->vocab) * sizeof(float)))
      fail_msg("%s: sequence %d: logits not bitwise those of one device", what, i);
  }
}

/* The smallest budget of the job's steps on one device: every stage fits it. */
static uint64_t job_floor(const char *set) {
  ot_test_manifest mf;
  ot_gen_seq seqs[7];
  make_job(set, &mf, seqs);
  ot_ctx *ctx = make_ctx(1, 0);
  ot_lm *m = load(ctx, set);
  ot_gen_opts g = ot_gen_opts_default();
  uint64_t b;
  OT_ASSERT_OK(ot_generate_batch_min_budget(m, seqs, 7, 4, &g, &b));
  assert_true(b > 0 && b < m->weight_bytes);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
  return b;
}

static void pipelined(int n_dev) {
  if (ot_num_devices() < n_dev) skip();
  static const char *sets[] = {"llama_gqa", "mistral_tiny"};
  for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
    job_out one, seq;
    run_job(sets[s], 1, 0, 1, OT_STAGE_COPY_AUTO, &one);
    /* one step through the stages at a time: the same, and never two runs at once */
    run_job(sets[s], n_dev, 0, 1, OT_STAGE_COPY_AUTO, &seq);
    char what[160];
    snprintf(what, sizeof what, "%s over %d devices, no micro-batches", sets[s], n_dev);
    same_results(what, &seq.c, &one.c);
    if (seq.overlap) fail_msg("%s: kernels of two runs at once", what);
    assert_int_equal(seq.runs, seq.steps);
    capture_free(&seq.c);
    const uint64_t floor_b = job_floor(sets[s]);
    for (int tight = 0; tight < 2; tight++)
      for (int micro = 2; micro <= 4; micro += 2) {
        /* activations between stages device to device (auto: the emulated
         * devices reach each other) and, once, through the host */
        for (int how = OT_STAGE_COPY_AUTO; how <= (micro == 2 && !tight ? OT_STAGE_COPY_HOST : OT_STAGE_COPY_AUTO); how++) {
        job_out got;
        run_job(sets[s], n_dev, tight ? floor_b : 0, micro, (ot_stage_copies)how, &got);
        snprintf(what, sizeof what, "%s over %d devices, %d micro-batches, %s budgets, stage copies %s", sets[s], n_dev,
                 micro, tight ? "the job's floor as" : "default", ot_stage_copies_name((ot_stage_copies)how));
        same_results(what, &got.c, &one.c);
        if ((got.bytes_peer > 0) != (how == OT_STAGE_COPY_AUTO))
          fail_msg("%s: %llu bytes copied device to device", what, (unsigned long long)got.bytes_peer);
        if (got.runs <= got.steps)
          fail_msg("%s: %d runs in the trace for %d steps: the micro-batches did not run as runs", what, got.runs,
                   got.steps);
        if (!got.overlap) fail_msg("%s: no kernels of different micro-batches at once on different devices", what);
        capture_free(&got.c);
        }
      }
    capture_free(&one.c);
  }
}

/* A mixture of experts: every layer's experts share one window and one
 * record of what it holds, so micro-batches are refused by name (one stage
 * after another still runs, and gives one device's tokens). */
static void moe_refused(void **state) {
  (void)state;
  if (ot_num_devices() < 2) skip();
  ot_test_manifest mf;
  ot_test_read_manifest("mixtral_tiny", &mf);
  ot_gen_seq seqs[2] = {{.prompt = mf.prompt, .n_prompt = 5, .max_new_tokens = 4},
                        {.prompt = mf.prompt, .n_prompt = 3, .max_new_tokens = 4, .stream = 1}};
  ot_ctx *ctx = make_ctx(2, 0);
  ot_lm *m = load(ctx, "mixtral_tiny");
  ot_gen_opts g = ot_gen_opts_default();
  g.n_eos = 0;
  g.sched.micro_batches = 2;
  ot_gen_batch_result r;
  assert_int_equal(ot_generate_batch(m, seqs, 2, 2, &g, &r), OT_ERR_UNSUPPORTED);
  if (!strstr(ot_last_error(), "micro-batches") || !strstr(ot_last_error(), "cache"))
    fail_msg("the refusal does not say why: %s", ot_last_error());
  g.sched.micro_batches = 1;
  OT_ASSERT_OK(ot_generate_batch(m, seqs, 2, 2, &g, &r));
  ot_gen_batch_result_free(&r);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
}

static void two_devices(void **state) { (void)state; pipelined(2); }
static void three_devices(void **state) { (void)state; pipelined(3); }

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(two_devices), cmocka_unit_test(three_devices),
                                     cmocka_unit_test(moe_refused)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
