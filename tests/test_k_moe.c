/* test_k_moe.c — the mixture-of-experts row kernels (kernels.h:
 * scatter_add_rows, sigmoid_gate_add) against their plain C references, on
 * the test device (the GPU's or the emulated device's memory where there is
 * one), at odd sizes, with bytes around the outputs guarded (ot_tcheck). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
/* cmocka after its prerequisites */
#include <cmocka.h>

#include "kernels/kernels.h"
#include "ktest.h"

/* n of the T rows (distinct, in a scattered order) get x's rows times w. */
static void scatter(int64_t T, int64_t n, int64_t D, uint64_t seed) {
  ot_tbuf Y = ot_tbuf_rand(OT_F32, T * D, seed, -1, 1), X = ot_tbuf_rand(OT_F32, n * D, seed + 1, -1, 1),
          I = ot_tbuf_rand(OT_I32, n, seed + 2, 0, 1), W = ot_tbuf_rand(OT_F32, n, seed + 3, 0, 1);
  for (int64_t r = 0; r < n; r++) ((int32_t *)I.h)[r] = (int32_t)((r * 7 + 3) % T); /* distinct: 7 and T coprime */
  ot_tbuf_push(&I);
  ot_kview y = ot_tview(&Y, 0, 2, (int64_t[]){T, D}, NULL), x = ot_tview(&X, 0, 2, (int64_t[]){n, D}, NULL),
           ids = ot_tview(&I, 0, 1, (int64_t[]){n}, NULL), w = ot_tview(&W, 0, 1, (int64_t[]){n}, NULL);
  assert_int_equal(ot_ref_scatter_add_rows(y, x, ids, w), OT_OK);
  if (ot_k_scatter_add_rows(ot_test_dev(), ot_tview_dev(y, &Y), ot_tview_dev(x, &X), ot_tview_dev(ids, &I),
                            ot_tview_dev(w, &W)) != OT_OK)
    fail_msg("%s", ot_last_error());
  char what[80];
  snprintf(what, sizeof what, "scatter_add_rows T=%lld n=%lld D=%lld", (long long)T, (long long)n, (long long)D);
  ot_tcheck(what, &Y, y, 1e-6);
  ot_tbuf_free(&Y);
  ot_tbuf_free(&X);
  ot_tbuf_free(&I);
  ot_tbuf_free(&W);
}

static void gate(int64_t T, int64_t D, uint64_t seed) {
  ot_tbuf Y = ot_tbuf_rand(OT_F32, T * D, seed, -1, 1), X = ot_tbuf_rand(OT_F32, T * D, seed + 1, -1, 1),
          G = ot_tbuf_rand(OT_F32, T, seed + 2, -6, 6);
  ot_kview y = ot_tview(&Y, 0, 2, (int64_t[]){T, D}, NULL), x = ot_tview(&X, 0, 2, (int64_t[]){T, D}, NULL),
           g = ot_tview(&G, 0, 2, (int64_t[]){T, 1}, NULL);
  assert_int_equal(ot_ref_sigmoid_gate_add(y, x, g), OT_OK);
  if (ot_k_sigmoid_gate_add(ot_test_dev(), ot_tview_dev(y, &Y), ot_tview_dev(x, &X), ot_tview_dev(g, &G)) != OT_OK)
    fail_msg("%s", ot_last_error());
  char what[64];
  snprintf(what, sizeof what, "sigmoid_gate_add T=%lld D=%lld", (long long)T, (long long)D);
  ot_tcheck(what, &Y, y, 1e-6);
  ot_tbuf_free(&Y);
  ot_tbuf_free(&X);
  ot_tbuf_free(&G);
}

static void test_scatter_add_rows(void **st) {
  (void)st;
  scatter(1, 1, 4096, 1);  /* decode: the one token */
  scatter(13, 5, 67, 10);  /* a prompt: some of its rows */
  scatter(9, 9, 33, 20);   /* every row */
  ot_kview none = ot_kview_none();
  assert_int_equal(ot_k_scatter_add_rows(ot_test_dev(), none, none, none, none), OT_ERR_SHAPE);
}

static void test_sigmoid_gate_add(void **st) {
  (void)st;
  gate(1, 4096, 30);
  gate(13, 67, 40);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_scatter_add_rows), cmocka_unit_test(test_sigmoid_gate_add)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
