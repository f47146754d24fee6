/* test_model_parity.c — omptensor's Llama and GPT-2 against Hugging Face
 * transformers: the reference sets in tests/data/models (written by
 * scripts/gen_reference.py) hold each model's config and safetensors, the fp32
 * logits of every prompt position and 16 greedy tokens. For every set, every
 * backend this build has, and budgets from unlimited down to ones that force
 * offloading, the logits must match within 1e-4 of the logit range and the
 * greedy tokens must be identical; offloaded runs must also match the
 * unlimited run bitwise (same backend) and the trace must respect the budget. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model_test.h"
#include "models.h"
#include "omptensor/npy.h"
#include "ot_test.h"

typedef struct ref_set {
  const char *name;
  double tol_rel; /* max |ours - ref| / range */
} ref_set;

/* fp32 sets at 1e-4 of the range (the bound); the bf16/f16 sets hold
 * fp32 logits of the exactly upcast weights, which our f32 compute matches
 * as tightly when the weights are kept in their checkpoint dtype. */
static const ref_set sets[] = {
    {"llama_gqa", 1e-4}, {"llama_tied", 1e-4}, {"llama_odd", 1e-4}, {"gpt2_small", 1e-4},
    {"llama_sharded", 1e-4}, {"llama_bf16", 1e-4}, {"llama_odd_f16", 1e-4},
};

typedef struct manifest {
  int32_t prompt[64];
  int n_prompt;
  int32_t gen[64];
  int n_gen;
} manifest;

static void read_manifest(const char *set, manifest *m) {
  char *p = ot_test_model_path(set, "manifest.json");
  json_error_t err;
  json_t *root = json_load_file(p, 0, &err);
  if (!root) fail_msg("%s: %s", p, err.text);
  assert_string_equal(json_string_value(json_object_get(root, "magic")), "omptensor-reference");
  assert_int_equal(json_integer_value(json_object_get(root, "format_version")), 1);
  json_t *pr = json_object_get(root, "prompt_ids"), *g = json_object_get(json_object_get(root, "generation"), "generated_ids");
  m->n_prompt = (int)json_array_size(pr);
  m->n_gen = (int)json_array_size(g);
  assert_true(m->n_prompt > 0 && m->n_prompt <= 64 && m->n_gen > 0 && m->n_gen <= 64);
  for (int i = 0; i < m->n_prompt; i++) m->prompt[i] = (int32_t)json_integer_value(json_array_get(pr, i));
  for (int i = 0; i < m->n_gen; i++) m->gen[i] = (int32_t)json_integer_value(json_array_get(g, i));
  json_decref(root);
  free(p);
}

typedef ot_test_gen run_out;

/* Runs one set on one backend under one budget (0 = unlimited). */
static void run_set(const char *set, ot_backend backend, uint64_t budget, ot_strategy strategy, const manifest *mf,
                    run_out *out) {
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = backend;
  o.budget_bytes = budget;
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&o, &ctx));
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  ot_test_generate(ctx, set, mf->prompt, mf->n_prompt, mf->n_gen, strategy, tr, out);
  OT_ASSERT_OK(ot_trace_check_budget(tr, ot_ctx_budget(ctx, 0)));
  ot_trace_destroy(tr);
  ot_ctx_destroy(ctx);
}

static void compare_to_reference(const char *set, double tol_rel, const run_out *o, const manifest *mf) {
  char *p = ot_test_model_path(set, "logits.npy");
  ot_npy_array ref;
  OT_ASSERT_OK(ot_npy_read(p, &ref));
  free(p);
  assert_int_equal(ref.ndim, 2);
  assert_int_equal(o->logits.ndim, 2);
  assert_int_equal(o->logits.shape[0], ref.shape[0]);
  assert_int_equal(o->logits.shape[1], ref.shape[1]);
  const float *a = o->logits.data, *b = ref.data;
  int64_t n = ref.shape[0] * ref.shape[1];
  float lo = INFINITY, hi = -INFINITY;
  for (int64_t i = 0; i < n; i++) lo = fminf(lo, b[i]), hi = fmaxf(hi, b[i]);
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(a[i])) fail_msg("%s: logit %lld is %g", set, (long long)i, a[i]);
    worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
  }
  if (worst > tol_rel * (hi - lo))
    fail_msg("%s: max |logit error| %.3g > %.1g x range %.3g", set, worst, tol_rel, (double)(hi - lo));
  for (int i = 0; i < mf->n_gen; i++)
    if (o->tokens[i] != mf->gen[i]) fail_msg("%s: greedy token %d is %d, transformers gave %d", set, i, o->tokens[i], mf->gen[i]);
  ot_npy_free(&ref);
}

static void backends(ot_backend *b, int *n) { *n = ot_test_backends(b); }

static void parity(void **state) {
  (void)state;
  ot_backend bk[3];
  int nb;
  backends(bk, &nb);
  for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
    manifest mf;
    read_manifest(sets[s].name, &mf);
    for (int b = 0; b < nb; b++) {
      run_out full;
      run_set(sets[s].name, bk[b], 0, OT_STRATEGY_BALANCED, &mf, &full);
      compare_to_reference(sets[s].name, sets[s].tol_rel, &full, &mf);
      /* Budgets that force offloading: a third and a tenth of the weights
       * (never below the feasibility bound the planner reports). */
      static const double fractions[] = {0.34, 0.1};
      static const ot_strategy strat[] = {OT_STRATEGY_MINIMAL, OT_STRATEGY_AGGRESSIVE};
      for (int f = 0; f < 2; f++) {
        ot_ctx_opts o = ot_ctx_opts_default();
        o.backend = bk[b];
        ot_ctx *ctx;
        OT_ASSERT_OK(ot_ctx_create(&o, &ctx));
        char *dir = ot_test_model_path(sets[s].name, "");
        ot_lm *m;
        OT_ASSERT_OK(ot_model_load(ctx, dir, OT_DTYPE_KEEP, NULL, NULL, &m));
        uint64_t budget = (uint64_t)((double)m->weight_bytes * fractions[f]), floor_b;
        OT_ASSERT_OK(ot_lm_min_budget(m, mf.n_prompt, 1, &floor_b));
        if (budget < floor_b) budget = floor_b; /* the exact feasibility bound must work too */
        ot_lm_destroy(m);
        ot_ctx_destroy(ctx);
        free(dir);
        run_out off;
        run_set(sets[s].name, bk[b], budget, strat[f], &mf, &off);
        /* same backend: bitwise the same as the unlimited run */
        assert_int_equal(off.logits.shape[0], full.logits.shape[0]);
        if (memcmp(off.logits.data, full.logits.data, (size_t)(full.logits.shape[0] * full.logits.shape[1]) * 4))
          fail_msg("%s on %s: logits with a budget of %llu bytes differ from the unlimited run", sets[s].name,
                   ot_backend_name(bk[b]), (unsigned long long)budget);
        assert_memory_equal(off.tokens, full.tokens, (size_t)full.n_tokens * 4);
        ot_npy_free(&off.logits);
      }
      ot_npy_free(&full.logits);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(parity)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
