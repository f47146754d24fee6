/* model_test.c — see model_test.h. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model_test.h"
#include "omptensor/models.h"
#include "omptensor/trace.h"
#include "ot_test.h"

char *ot_test_model_path(const char *set, const char *file) {
  const char *root = getenv("OT_TEST_DATA");
  if (!root) fail_msg("OT_TEST_DATA is not set (ctest sets it to tests/data)");
  size_t n = strlen(root) + strlen(set) + strlen(file) + 16;
  char *p = malloc(n);
  snprintf(p, n, "%s/models/%s%s%s", root, set, file[0] ? "/" : "", file);
  return p;
}

void ot_test_generate(ot_ctx *ctx, const char *set, const int32_t *prompt, int n_prompt, int n_gen,
                      ot_strategy strategy, ot_trace *tr, ot_test_gen *out) {
  ot_test_generate_as(ctx, set, OT_DTYPE_KEEP, prompt, n_prompt, n_gen, strategy, 0, tr, out);
}

void ot_test_generate_as(ot_ctx *ctx, const char *set, ot_dtype dtype, const int32_t *prompt, int n_prompt, int n_gen,
                         ot_strategy strategy, uint64_t budget, ot_trace *tr, ot_test_gen *out) {
  assert_true(n_gen <= (int)(sizeof out->tokens / sizeof out->tokens[0]));
  char *dir = ot_test_model_path(set, "");
  ot_lm *m;
  OT_ASSERT_OK(ot_model_load(ctx, dir, dtype, NULL, NULL, &m));
  out->weight_bytes = m->weight_bytes;
  char npy[] = "/tmp/ot_model_test_XXXXXX";
  int fd = mkstemp(npy);
  assert_true(fd >= 0);
  close(fd);
  ot_gen_opts g = ot_gen_opts_default();
  g.max_new_tokens = n_gen;
  g.logits_out = npy;
  g.sched.strategy = strategy;
  g.sched.budget_bytes = budget;
  g.trace = tr;
  ot_gen_result r;
  OT_ASSERT_OK(ot_generate(m, prompt, n_prompt, &g, &r));
  OT_ASSERT_OK(ot_npy_read(npy, &out->logits));
  out->n_tokens = r.n_tokens;
  memcpy(out->tokens, r.tokens, (size_t)r.n_tokens * sizeof *r.tokens);
  unlink(npy);
  ot_gen_result_free(&r);
  ot_lm_destroy(m);
  free(dir);
}

void ot_test_expect_streamed_same(ot_ctx *ctx, const char *set, ot_dtype dtype, const int32_t *prompt, int n_prompt,
                                  int n_gen, const ot_test_gen *ref) {
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  ot_test_gen b;
  const uint64_t budget = ref->weight_bytes / 3;
  ot_test_generate_as(ctx, set, dtype, prompt, n_prompt, n_gen, OT_STRATEGY_AGGRESSIVE, budget, tr, &b);
  OT_ASSERT_OK(ot_trace_check_budget(tr, budget));
  assert_true(ot_trace_summarize(tr).evictions > 0);
  assert_int_equal(b.logits.shape[0] * b.logits.shape[1], ref->logits.shape[0] * ref->logits.shape[1]);
  assert_memory_equal(b.logits.data, ref->logits.data,
                      (size_t)(ref->logits.shape[0] * ref->logits.shape[1]) * sizeof(float));
  assert_int_equal(b.n_tokens, ref->n_tokens);
  assert_memory_equal(b.tokens, ref->tokens, (size_t)ref->n_tokens * sizeof(int32_t));
  ot_trace_destroy(tr);
  ot_npy_free(&b.logits);
}

void ot_test_read_manifest(const char *set, ot_test_manifest *m) {
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

void ot_test_expect_logits(const char *set, const ot_npy_array *got, double tol_rel, const char *what) {
  char *p = ot_test_model_path(set, "logits.npy");
  ot_npy_array ref;
  OT_ASSERT_OK(ot_npy_read(p, &ref));
  free(p);
  assert_int_equal(ref.ndim, 2);
  assert_int_equal(got->ndim, 2);
  assert_int_equal(got->shape[0], ref.shape[0]);
  assert_int_equal(got->shape[1], ref.shape[1]);
  const float *a = got->data, *b = ref.data;
  int64_t n = ref.shape[0] * ref.shape[1];
  float lo = INFINITY, hi = -INFINITY;
  for (int64_t i = 0; i < n; i++) lo = fminf(lo, b[i]), hi = fmaxf(hi, b[i]);
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(a[i])) fail_msg("%s: logit %lld is %g", what, (long long)i, a[i]);
    worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
  }
  if (worst > tol_rel * (hi - lo))
    fail_msg("%s: max |logit error| %.3g > %.1g x range %.3g", what, worst, tol_rel, (double)(hi - lo));
  ot_npy_free(&ref);
}
