/* test_step_gpu.c — the step kernel (kernels/step_gpu.h, issue 44) on a
 * real GPU: decode with runs of ops in one launch gives the tokens and the
 * logits of decode with one launch per op, for every weight dtype it
 * encodes, with grouped-query attention, past 256 keys (more than one
 * round of the attention's key tiles), and under a budget whose uploads cut
 * the runs short (the trace holds the budget). Each case also checks that
 * the step kernel ran (its launch count grew) or did not (forced off), and
 * that 16-bit KV caches and sliding windows stay inside it. A batched
 * step's GEMM rows on tensor cores (OT_KI_MMA) against cuBLAS's.
 *
 * Skipped where the step kernel does not run (no NVIDIA GPU: CI; the
 * per-op kernels it replaces are tested everywhere by test_ops_table and
 * the model tests). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/step_gpu.h"
#include "omptensor/omptensor.h"
#include "ot_test.h"

enum { VOCAB = 1000, MAX_NEW = 12 };

/* The KV caches' dtype and the sliding window of the next generations. */
static ot_dtype kv_dt = OT_F32;
static int64_t window = 0;

static void config(ot_hf_config *c, int layers) {
  /* grouped-query attention: 4 query heads per KV head */
  ot_llama_synthetic_config(c, 512, 1376, 8, 2, VOCAB, layers);
  c->max_position_embeddings = 512;
  c->sliding_window = window;
}

typedef struct gen_out {
  int32_t tokens[MAX_NEW];
  float *logits; /* [MAX_NEW, VOCAB] */
  uint64_t launches, insns;
} gen_out;

static ot_status keep_logits(void *user, int seq, int index, const float *row, int64_t vocab) {
  gen_out *g = user;
  (void)seq;
  if (index < MAX_NEW && vocab == VOCAB) memcpy(g->logits + (size_t)index * VOCAB, row, VOCAB * sizeof *row);
  return OT_OK;
}

/* One greedy generation of n_new tokens after n_prompt, the step kernel
 * forced on or off, on a map context with `budget` (0: everything fits). */
static void generate(ot_dtype wt, int layers, int n_prompt, int n_new, uint64_t budget, int step, gen_out *g) {
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = OT_BACKEND_MAP;
  co.budget_bytes = budget;
  ot_ctx *ctx = NULL;
  OT_ASSERT_OK(ot_ctx_create(&co, &ctx));
  ot_hf_config cfg;
  config(&cfg, layers);
  ot_lm *m = NULL;
  OT_ASSERT_OK(ot_llama_synthetic(ctx, &cfg, wt, 11, NULL, NULL, &m));
  int32_t *prompt = malloc((size_t)n_prompt * sizeof *prompt);
  assert_non_null(prompt);
  uint64_t x = 99;
  for (int i = 0; i < n_prompt; i++) prompt[i] = (int32_t)(ot_test_rand_u64(&x) % VOCAB);
  ot_trace *tr = NULL;
  OT_ASSERT_OK(ot_trace_create(&tr));
  ot_gen_opts o = ot_gen_opts_default();
  o.max_new_tokens = n_new;
  o.greedy = 1;
  o.kv_dtype = kv_dt;
  o.trace = tr;
  o.on_logits = keep_logits;
  o.logits_user = g;
  ot_gen_result r = {0};
  uint64_t l0, i0;
  ot_kstep_force(step);
  ot_kstep_counts(&l0, &i0);
  ot_status st = ot_generate(m, prompt, n_prompt, &o, &r);
  ot_kstep_counts(&g->launches, &g->insns);
  ot_kstep_force(-1);
  g->launches -= l0;
  g->insns -= i0;
  OT_ASSERT_OK(st);
  assert_int_equal(r.n_tokens, n_new);
  memcpy(g->tokens, r.tokens, (size_t)n_new * sizeof *r.tokens);
  if (budget) OT_ASSERT_OK(ot_trace_check_budget(tr, budget));
  ot_gen_result_free(&r);
  ot_trace_destroy(tr);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
  free(prompt);
}

/* The step kernel's run against the per-op run: same tokens, logits equal
 * to a tolerance of f32 rounding (the arithmetic per output is the same;
 * only the compiler's contraction of a multiply-add may differ). */
static uint64_t compare(ot_dtype wt, int layers, int n_prompt, int n_new, uint64_t budget) {
  gen_out a = {0}, b = {0};
  a.logits = calloc((size_t)MAX_NEW * VOCAB, sizeof(float));
  b.logits = calloc((size_t)MAX_NEW * VOCAB, sizeof(float));
  assert_true(a.logits && b.logits);
  generate(wt, layers, n_prompt, n_new, budget, 1, &a);
  generate(wt, layers, n_prompt, n_new, budget, 0, &b);
  /* on: at least one launch per decode step, each running some ops; off: none */
  assert_true(a.launches >= (uint64_t)(n_new - 1));
  assert_true(a.insns > a.launches);
  assert_int_equal(b.launches, 0);
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < (size_t)n_new * VOCAB; i++) {
    const double d = fabs((double)a.logits[i] - (double)b.logits[i]);
    if (d > max_diff) max_diff = d;
    if (fabs((double)b.logits[i]) > max_abs) max_abs = fabs((double)b.logits[i]);
  }
  printf("  %s, %d layers, prompt %d, budget %llu, %s caches, window %lld: %llu launches, %llu instructions; max "
         "|logit diff| %.3g of %.3g\n",
         ot_dtype_name(wt), layers, n_prompt, (unsigned long long)budget, ot_dtype_name(kv_dt), (long long)window,
         (unsigned long long)a.launches, (unsigned long long)a.insns, max_diff, max_abs);
  assert_true(max_abs > 0);
  assert_true(max_diff <= 1e-4 * max_abs);
  for (int i = 0; i < n_new; i++) assert_int_equal(a.tokens[i], b.tokens[i]);
  free(a.logits);
  free(b.logits);
  return a.launches;
}

/* Whether the step kernel can run here when asked for (the test asks, over
 * the environment's default). */
static int have_step(void) {
  ot_kstep_force(1);
  const int on = ot_kstep_enabled(0);
  ot_kstep_force(-1);
  if (on) return 1;
  printf("  (no GPU the step kernel runs on: skipped)\n");
  return 0;
}

static void test_dtypes_resident(void **state) {
  (void)state;
  if (!have_step()) skip();
  const ot_dtype dts[] = {OT_F32, OT_BF16, OT_F16, OT_Q8B, OT_Q4B, OT_Q4K};
  for (int i = 0; i < 6; i++) compare(dts[i], 3, 10, MAX_NEW, 0);
}

static void test_long_context(void **state) {
  (void)state;
  if (!have_step()) skip();
  compare(OT_BF16, 2, 300, 6, 0); /* keys 300..305: two rounds of 8 warps x 32 keys */
}

/* 16-bit KV caches and a sliding window: attention stays in the step
 * kernel (a decode step is as many launches as with f32 caches and no
 * window; an attention the kernel declined would end the run at every
 * layer), and its results are the per-op path's (whose warp kernel takes
 * the same caches and windows). Prompt 100, window 40: every decode row
 * sees its last 40 keys only. */
static void test_kv_caches(void **state) {
  (void)state;
  if (!have_step()) skip();
  const uint64_t f32 = compare(OT_BF16, 2, 100, 8, 0);
  const ot_dtype dts[] = {OT_BF16, OT_F16};
  for (int i = 0; i < 2; i++) {
    kv_dt = dts[i];
    assert_int_equal(compare(OT_BF16, 2, 100, 8, 0), f32);
  }
  kv_dt = OT_F32;
  window = 40;
  assert_int_equal(compare(OT_BF16, 2, 100, 8, 0), f32);
  kv_dt = OT_BF16;
  assert_int_equal(compare(OT_BF16, 2, 100, 8, 0), f32);
  kv_dt = OT_F32;
  window = 0;
}

static void test_under_budget(void **state) {
  (void)state;
  if (!have_step()) skip();
  /* 4 layers of bf16 (~5.5 MB each, with a 1 MB embedding and head): about
   * half of them resident, the rest streamed between the runs of ops */
  compare(OT_BF16, 4, 10, MAX_NEW, 12ull << 20);
}

/* ---- a batched step's GEMM rows on tensor cores (OT_KI_MMA) ----------------------- */

enum { BSEQ = 24, BNEW = 6 };

typedef struct batch_out {
  int32_t tokens[BSEQ][BNEW];
  int n_tokens[BSEQ];
  float *logits; /* [BSEQ][BNEW][VOCAB] */
  uint64_t launches;
  int decode_steps;
} batch_out;

static ot_status keep_batch_logits(void *user, int seq, int index, const float *row, int64_t vocab) {
  batch_out *b = user;
  if (seq >= 0 && seq < BSEQ && index >= 0 && index < BNEW && vocab == VOCAB)
    memcpy(b->logits + ((size_t)seq * BNEW + (size_t)index) * VOCAB, row, VOCAB * sizeof *row);
  return OT_OK;
}

/* BSEQ prompts of 3-9 tokens on `slots` slots of a resident bf16 model, the
 * step kernel and its tensor-core rows forced on or off. */
static void generate_batch(int slots, int step, int mma, batch_out *b) {
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = OT_BACKEND_MAP;
  ot_ctx *ctx = NULL;
  OT_ASSERT_OK(ot_ctx_create(&co, &ctx));
  ot_hf_config cfg;
  config(&cfg, 2);
  ot_lm *m = NULL;
  OT_ASSERT_OK(ot_llama_synthetic(ctx, &cfg, OT_BF16, 11, NULL, NULL, &m));
  int32_t prompts[BSEQ][9];
  ot_gen_seq seqs[BSEQ];
  uint64_t x = 7;
  for (int i = 0; i < BSEQ; i++) {
    for (int j = 0; j < 9; j++) prompts[i][j] = (int32_t)(ot_test_rand_u64(&x) % VOCAB);
    seqs[i] = (ot_gen_seq){prompts[i], 3 + i % 7, BNEW, (uint64_t)i};
  }
  ot_gen_opts o = ot_gen_opts_default();
  o.greedy = 1;
  o.on_logits = keep_batch_logits;
  o.logits_user = b;
  ot_gen_batch_result r;
  uint64_t l0, l1;
  ot_kstep_force(step);
  ot_kstep_force_mma(mma);
  ot_kstep_counts(&l0, NULL);
  const ot_status st = ot_generate_batch(m, seqs, BSEQ, slots, &o, &r);
  ot_kstep_counts(&l1, NULL);
  ot_kstep_force(-1);
  ot_kstep_force_mma(-1);
  OT_ASSERT_OK(st);
  b->launches = l1 - l0;
  b->decode_steps = r.decode_steps;
  for (int i = 0; i < BSEQ; i++) {
    b->n_tokens[i] = r.seqs[i].n_tokens;
    assert_int_equal(b->n_tokens[i], BNEW);
    memcpy(b->tokens[i], r.seqs[i].tokens, BNEW * sizeof(int32_t));
  }
  ot_gen_batch_result_free(&r);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
}

/* Decode steps of 24 and of 12 rows: with the tensor-core rows the norms
 * and GEMMs of a layer run in step-kernel launches (their count grows with
 * the decode steps; without them no batched op enters the kernel), and the
 * tokens and logits are the per-op path's (cuBLAS on the same bf16 rows:
 * the sums in another order, so a bf16 rounding of an activation may fall
 * the other way; the logits agree to 1e-2 of the largest). */
static void test_batch_mma(void **state) {
  (void)state;
  if (!have_step()) skip();
  const int slot_counts[] = {24, 12};
  for (int c = 0; c < 2; c++) {
    batch_out on = {0}, off = {0};
    on.logits = calloc((size_t)BSEQ * BNEW * VOCAB, sizeof(float));
    off.logits = calloc((size_t)BSEQ * BNEW * VOCAB, sizeof(float));
    assert_true(on.logits && off.logits);
    generate_batch(slot_counts[c], 1, 1, &on);
    generate_batch(slot_counts[c], 1, 0, &off);
    double max_diff = 0, max_abs = 0;
    int differ = 0;
    for (size_t i = 0; i < (size_t)BSEQ * BNEW * VOCAB; i++) {
      const double d = fabs((double)on.logits[i] - (double)off.logits[i]);
      if (d > max_diff) max_diff = d;
      if (fabs((double)off.logits[i]) > max_abs) max_abs = fabs((double)off.logits[i]);
    }
    for (int i = 0; i < BSEQ; i++)
      for (int j = 0; j < BNEW; j++) differ += on.tokens[i][j] != off.tokens[i][j];
    printf("  %d slots: %d decode steps, %llu launches with tensor-core rows, %llu without; max |logit diff| %.3g of "
           "%.3g; %d of %d tokens differ\n",
           slot_counts[c], on.decode_steps, (unsigned long long)on.launches, (unsigned long long)off.launches,
           max_diff, max_abs, differ, BSEQ * BNEW);
    assert_true(on.launches >= (uint64_t)on.decode_steps);
    assert_true(max_abs > 0);
    assert_true(max_diff <= 1e-2 * max_abs);
    assert_int_equal(differ, 0);
    free(on.logits);
    free(off.logits);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dtypes_resident),
      cmocka_unit_test(test_long_context),
      cmocka_unit_test(test_kv_caches),
      cmocka_unit_test(test_under_budget),
      cmocka_unit_test(test_batch_mma),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
