/* test_k_sample.c — sampling: the kernel picks exactly the reference's token,
 * the draws follow the (top-k / top-p restricted) softmax, and the greedy
 * limits equal argmax.
 *
 * Distribution check: N draws over a 6-token vocabulary, chi-square against
 * the expected probabilities computed here in double. The draws are
 * deterministic (seeded), so the test cannot flake; the bound 25 (5 degrees
 * of freedom, p ~ 1e-4 for a correct sampler) still fails a sampler whose
 * probabilities are off by a few percent at this N. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ktest.h"

typedef struct sp_args {
  float temp;
  int top_k;
  float top_p;
  uint64_t seed, step;
} sp_args;

/* Runs the kernel on the device and the reference on the host over the same
 * logits view; they must agree exactly. Leaves the tokens in I.h. */
static void run_both(const char *what, ot_tbuf *L, ot_kview lv, ot_tbuf *I, sp_args a) {
  ot_kview iv = ot_tview(I, 0, 1, (int64_t[]){lv.ndim == 2 ? lv.ne[0] : 1}, NULL);
  assert_int_equal(ot_ref_sample(iv, lv, a.temp, a.top_k, a.top_p, a.seed, a.step), OT_OK);
  ot_status s = ot_k_sample(ot_test_dev(), ot_tview_dev(iv, I), ot_tview_dev(lv, L), a.temp, a.top_k, a.top_p,
                            a.seed, a.step);
  if (s != OT_OK) fail_msg("%s: %s", what, ot_last_error());
  ot_tcheck(what, I, iv, 0.0);
}

/* Expected probabilities of the restricted softmax (ties do not occur here). */
static void expected(const float *l, int n, sp_args a, double *p) {
  int order[16];
  double mx = -INFINITY, sum = 0;
  for (int i = 0; i < n; i++) {
    order[i] = i;
    mx = fmax(mx, l[i]);
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (l[order[j]] > l[order[i]]) {
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
  for (int i = 0; i < n; i++) sum += p[i] = exp((l[i] - mx) / a.temp);
  int keep = a.top_k > 0 && a.top_k < n ? a.top_k : n;
  double acc = 0, kept = 0;
  for (int i = 0; i < keep; i++) kept += p[order[i]];
  for (int i = 0; i < keep; i++) {
    acc += p[order[i]] / kept;
    if (acc >= a.top_p) {
      keep = i + 1;
      break;
    }
  }
  for (int i = keep; i < n; i++) p[order[i]] = 0;
  sum = 0;
  for (int i = 0; i < n; i++) sum += p[i];
  for (int i = 0; i < n; i++) p[i] /= sum;
}

static void check_distribution(sp_args a) {
  static const float logits[6] = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.0f};
  enum { N = 3000, V = 6 };
  ot_tbuf L = ot_tbuf_rand(OT_F32, V, 1, 0, 1), I = ot_tbuf_rand(OT_I32, N, 2, 0, 100);
  memcpy(L.h, logits, sizeof logits);
  ot_tbuf_push(&L);
  /* N rows that all read the same logits (row stride 0): the row index is
   * part of the RNG counter, so each row is an independent draw */
  ot_kview lv = ot_tview(&L, 0, 2, (int64_t[]){N, V}, (int64_t[]){0, 1});
  char what[96];
  snprintf(what, sizeof what, "sample dist T=%g k=%d p=%g", (double)a.temp, a.top_k, (double)a.top_p);
  run_both(what, &L, lv, &I, a);
  double p[V], chi2 = 0;
  int count[V] = {0};
  expected(logits, V, a, p);
  for (int r = 0; r < N; r++) {
    int t = ((int32_t *)I.h)[r];
    assert_true(t >= 0 && t < V);
    count[t]++;
  }
  for (int i = 0; i < V; i++) {
    if (p[i] == 0) {
      if (count[i]) fail_msg("%s: token %d is outside the kept set but was drawn %d times", what, i, count[i]);
      continue;
    }
    double e = p[i] * N;
    chi2 += (count[i] - e) * (count[i] - e) / e;
  }
  if (chi2 > 25) fail_msg("%s: chi-square %.1f > 25", what, chi2);
  ot_tbuf_free(&L);
  ot_tbuf_free(&I);
}

static void test_distribution(void **st) {
  (void)st;
  check_distribution((sp_args){1.3f, 0, 1.0f, 11, 0});
  check_distribution((sp_args){0.8f, 0, 1.0f, 12, 5});
  check_distribution((sp_args){1.0f, 3, 1.0f, 13, 0});     /* keeps 2.0, 1.0, 0.5 */
  check_distribution((sp_args){1.0f, 0, 0.8f, 14, 0});     /* probs .53 .19 .12 ...: keeps 4 */
  check_distribution((sp_args){2.0f, 4, 0.6f, 15, 9});     /* both */
}

/* top_k = 1, and top_p tiny, are argmax. */
static void test_greedy_limits(void **st) {
  (void)st;
  enum { R = 37, V = 1000 };
  ot_tbuf L = ot_tbuf_rand(OT_F32, R * V, 21, -4, 4), I = ot_tbuf_rand(OT_I32, R, 22, 0, 1),
           A = ot_tbuf_rand(OT_I32, R, 23, 0, 1);
  ot_kview lv = ot_tview(&L, 0, 2, (int64_t[]){R, V}, NULL), av = ot_tview(&A, 0, 1, (int64_t[]){R}, NULL);
  assert_int_equal(ot_ref_argmax(av, lv), OT_OK);
  const sp_args cases[] = {{1.0f, 1, 1.0f, 5, 0}, {3.0f, 0, 1e-6f, 6, 1}, {0.5f, 1, 0.3f, 7, 2}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    run_both("sample greedy limit", &L, lv, &I, cases[c]);
    for (int r = 0; r < R; r++) assert_int_equal(((int32_t *)I.h)[r], ((int32_t *)A.h)[r]);
  }
  ot_tbuf_free(&L);
  ot_tbuf_free(&I);
  ot_tbuf_free(&A);
}

/* Kernel == reference over dtypes, strides, settings, and special values. */
static void test_kernel_matches_ref(void **st) {
  (void)st;
  static const struct { ot_dtype dt; int64_t rows, vocab, pad; } shapes[] = {
      {OT_F32, 5, 3001, 3}, {OT_BF16, 3, 257, 0}, {OT_F16, 4, 130, 1}, {OT_F32, 1, 1, 0}};
  static const sp_args settings[] = {{0.7f, 0, 1.0f, 1, 0},  {1.0f, 40, 1.0f, 2, 3}, {2.0f, 0, 0.9f, 3, 4},
                                     {1.0f, 10, 0.5f, 4, 7}, {0.05f, 0, 1.0f, 5, 8}};
  uint64_t seed = 100;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const int64_t R = shapes[s].rows, V = shapes[s].vocab, ld = V + shapes[s].pad;
    ot_tbuf L = ot_tbuf_rand(shapes[s].dt, R * ld, seed++, -3, 3), I = ot_tbuf_rand(OT_I32, R, seed++, 0, 1);
    if (shapes[s].dt == OT_F32 && V > 2) { /* special values are never drawn, and do not break the others */
      ((float *)L.h)[1] = NAN;
      ((float *)L.h)[2] = -INFINITY;
      ot_tbuf_push(&L);
    }
    ot_kview lv = ot_tview(&L, 0, 2, (int64_t[]){R, V}, (int64_t[]){ld, 1});
    for (size_t a = 0; a < sizeof settings / sizeof settings[0]; a++) {
      char what[96];
      snprintf(what, sizeof what, "sample [%lld, %lld] %s setting %zu", (long long)R, (long long)V,
               ot_dtype_name(shapes[s].dt), a);
      run_both(what, &L, lv, &I, settings[a]);
      if (shapes[s].dt == OT_F32 && V > 2) assert_true(((int32_t *)I.h)[0] != 1 && ((int32_t *)I.h)[0] != 2);
    }
    ot_tbuf_free(&L);
    ot_tbuf_free(&I);
  }
}

/* The same (seed, step) gives the same token; other steps give other draws. */
static void test_deterministic(void **st) {
  (void)st;
  enum { V = 50 };
  ot_tbuf L = ot_tbuf_rand(OT_F32, V, 31, -0.1f, 0.1f), I = ot_tbuf_rand(OT_I32, 1, 32, 0, 1);
  ot_kview lv = ot_tview(&L, 0, 1, (int64_t[]){V}, NULL);
  int seen[V] = {0}, distinct = 0;
  for (uint64_t step = 0; step < 20; step++) {
    run_both("sample step", &L, lv, &I, (sp_args){1.0f, 0, 1.0f, 42, step});
    int32_t t = ((int32_t *)I.h)[0];
    run_both("sample step again", &L, lv, &I, (sp_args){1.0f, 0, 1.0f, 42, step});
    assert_int_equal(((int32_t *)I.h)[0], t);
    distinct += !seen[t]++;
  }
  assert_true(distinct >= 8); /* 20 draws from ~uniform over 50 tokens */
  ot_tbuf_free(&L);
  ot_tbuf_free(&I);
}

static void test_errors(void **st) {
  (void)st;
  float x[8] = {0};
  int32_t i[2];
  ot_kview l = ot_kview_2d(x, OT_F32, 2, 4), iv = ot_kview_1d(i, OT_I32, 2);
  assert_int_equal(ot_ref_sample(iv, l, 0.0f, 0, 1.0f, 1, 0), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "temperature"));
  assert_int_equal(ot_k_sample(ot_test_dev(), iv, l, 1.0f, -1, 1.0f, 1, 0), OT_ERR_INVALID_ARG);
  assert_int_equal(ot_k_sample(ot_test_dev(), iv, l, 1.0f, 0, 0.0f, 1, 0), OT_ERR_INVALID_ARG);
  assert_int_equal(ot_k_sample(ot_test_dev(), ot_kview_1d(i, OT_I32, 1), l, 1.0f, 0, 1.0f, 1, 0), OT_ERR_SHAPE);
  assert_int_equal(ot_k_sample(ot_test_dev(), iv, ot_kview_2d(x, OT_I32, 2, 4), 1.0f, 0, 1.0f, 1, 0), OT_ERR_DTYPE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_distribution), cmocka_unit_test(test_greedy_limits),
      cmocka_unit_test(test_kernel_matches_ref), cmocka_unit_test(test_deterministic), cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
