/* test_multidev_model.c — the reference Llamas split over 2, 3 and 4
 * emulated devices by ot_generate (a context with several devices plans
 * every step as a pipeline): the prompt logits and the greedy tokens are
 * bitwise those of one device on the same backend (which match
 * transformers' logits.npy), no device holds more than its own budget, and
 * kernels run on every device. llama_tied shares its embedding between the
 * first stage (lookup) and the last (lm head): each device holds a copy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memory/device.h"
#include "model_test.h"
#include "omptensor/models.h"
#include "omptensor/npy.h"
#include "ot_test.h"

static const char *const sets[] = {"llama_gqa", "llama_tied"};

/* Prompt and the number of tokens to generate (the reference's own prompt
 * is in its manifest; these ids are valid for a 256-token vocabulary). */
static const int32_t prompt[] = {1, 17, 42, 99, 3, 250, 7, 64};
#define N_PROMPT ((int)(sizeof prompt / sizeof *prompt))
#define N_GEN 6

typedef ot_test_gen run_out;

static ot_ctx *make_ctx(int n_dev, const uint64_t *budgets) {
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = OT_BACKEND_MAP;
  o.device = 0;
  o.n_devices = n_dev;
  for (int k = 0; budgets && k < n_dev; k++) o.budgets[k] = budgets[k];
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&o, &ctx));
  return ctx;
}

/* Generates with `set` on devices 0..n_dev-1 (budgets NULL: the default). */
static void run_set(const char *set, int n_dev, const uint64_t *budgets, ot_strategy strategy, run_out *out) {
  ot_ctx *ctx = make_ctx(n_dev, budgets);
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  ot_test_generate(ctx, set, prompt, N_PROMPT, N_GEN, strategy, tr, out);
  int devs[4];
  uint64_t bud[4];
  for (int k = 0; k < n_dev; k++) devs[k] = ot_ctx_device(ctx, k), bud[k] = ot_ctx_budget(ctx, k);
  OT_ASSERT_OK(ot_trace_check_budgets(tr, n_dev, devs, bud));
  /* kernels ran on every device: the stages really are on different devices */
  for (int k = 0; k < n_dev; k++) {
    int kernels = 0;
    for (size_t i = 0; i < ot_trace_count(tr); i++) {
      const ot_trace_event *e = ot_trace_event_at(tr, i);
      kernels += e->kind == OT_TRACE_KERNEL && e->device == devs[k];
    }
    if (!kernels) fail_msg("%s over %d devices: no kernel ran on device %d", set, n_dev, devs[k]);
  }
  /* one prompt step and N_GEN - 1 decode steps, whatever the stage count */
  assert_int_equal(ot_trace_summarize(tr).runs, N_GEN);
  ot_trace_destroy(tr);
  ot_ctx_destroy(ctx);
}

/* The model's weight bytes and the smallest feasible budget of its steps. */
static void model_sizes(const char *set, uint64_t *weights, uint64_t *floor_b) {
  ot_ctx *ctx = make_ctx(1, NULL);
  char *dir = ot_test_model_path(set, "");
  ot_lm *m;
  OT_ASSERT_OK(ot_model_load(ctx, dir, OT_DTYPE_KEEP, NULL, NULL, &m));
  *weights = m->weight_bytes;
  OT_ASSERT_OK(ot_lm_min_budget(m, N_PROMPT, 1, floor_b));
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
  free(dir);
}

/* The single-device run against transformers' logits of the reference's own
 * prompt is test_model_parity's job; here the one-device run of the same
 * prompt is the oracle, bitwise. */
static void same_as_one_device(const char *set, int n_dev) {
  run_out one;
  run_set(set, 1, NULL, OT_STRATEGY_BALANCED, &one);
  uint64_t w, floor_b;
  model_sizes(set, &w, &floor_b);
  /* unlimited, then budgets that force offloading on every device, uneven */
  for (int tight = 0; tight < 2; tight++) {
    uint64_t bud[4];
    for (int k = 0; k < n_dev; k++) {
      bud[k] = (uint64_t)((double)w * (0.35 + 0.25 * k) / n_dev);
      if (bud[k] < floor_b) bud[k] = floor_b;
    }
    run_out r;
    run_set(set, n_dev, tight ? bud : NULL, tight ? OT_STRATEGY_AGGRESSIVE : OT_STRATEGY_MINIMAL, &r);
    assert_int_equal(r.logits.shape[0], one.logits.shape[0]);
    assert_int_equal(r.logits.shape[1], one.logits.shape[1]);
    if (memcmp(r.logits.data, one.logits.data, (size_t)(one.logits.shape[0] * one.logits.shape[1]) * 4))
      fail_msg("%s over %d devices (%s budgets): prompt logits differ from one device", set, n_dev,
               tight ? "tight" : "default");
    assert_int_equal(r.n_tokens, one.n_tokens);
    assert_memory_equal(r.tokens, one.tokens, (size_t)one.n_tokens * sizeof *one.tokens);
    ot_npy_free(&r.logits);
  }
  ot_npy_free(&one.logits);
}

/* The one-device run of the reference's own prompt matches logits.npy
 * (within 1e-4 of the range, as test_model_parity) and so does the split
 * one, bitwise equal to it. */
static void reference_logits(void **state) {
  (void)state;
  if (ot_num_devices() < 2) skip();
  ot_test_manifest mf;
  ot_test_read_manifest("llama_gqa", &mf);
  for (int n_dev = 1; n_dev <= 2; n_dev++) {
    ot_ctx *ctx = make_ctx(n_dev, NULL);
    run_out r;
    ot_test_generate(ctx, "llama_gqa", mf.prompt, mf.n_prompt, 0, ot_sched_opts_default().strategy, NULL, &r);
    char what[64];
    snprintf(what, sizeof what, "llama_gqa over %d device(s)", n_dev);
    ot_test_expect_logits("llama_gqa", &r.logits, 1e-4, what);
    ot_npy_free(&r.logits);
    ot_ctx_destroy(ctx);
  }
}

static void split(int n_dev) {
  if (ot_num_devices() < n_dev) skip();
  for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) same_as_one_device(sets[s], n_dev);
}

static void two_devices(void **state) { (void)state; split(2); }
static void three_devices(void **state) { (void)state; split(3); }
static void four_devices(void **state) { (void)state; split(4); }

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(reference_logits), cmocka_unit_test(two_devices),
                                     cmocka_unit_test(three_devices), cmocka_unit_test(four_devices)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
