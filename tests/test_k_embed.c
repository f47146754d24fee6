/* test_k_embed.c — embedding lookup and argmax against their references
 * (both exact: tolerance 0). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/kcommon.h"
#include "ktest.h"

/* out [n, d] (row stride d + opad, starting ooff elements in) = table
 * [vocab, d] (row stride d + tpad) at ids, two of them out of range. */
static void run_embed2(ot_dtype tdt, ot_dtype odt, int64_t vocab, int64_t d, int64_t n, int64_t tpad, int64_t opad,
                       int64_t ooff, uint64_t seed) {
  ot_tbuf T = ot_tbuf_rand(tdt, vocab * (d + tpad), seed, -1, 1), I = ot_tbuf_rand(OT_I32, n, seed + 1, 0, (float)vocab);
  ot_tbuf O = ot_tbuf_rand(odt, n * (d + opad) + ooff, seed + 2, -1, 1);
  if (n > 2) { ((int32_t *)I.h)[1] = -1; ((int32_t *)I.h)[2] = (int32_t)vocab; ot_tbuf_push(&I); } /* out of range */
  ot_kview t = ot_tview(&T, 0, 2, (int64_t[]){vocab, d}, (int64_t[]){d + tpad, 1});
  ot_kview ids = ot_tview(&I, 0, 1, (int64_t[]){n}, NULL);
  ot_kview o = ot_tview(&O, 0, 2, (int64_t[]){n, d}, (int64_t[]){d + opad, 1});
  o.p = (char *)O.h + ot_dtype_bytes(odt, ooff);
  assert_int_equal(ot_ref_embedding(o, t, ids), OT_OK);
  assert_int_equal(ot_k_embedding(ot_test_dev(), ot_tview_dev(o, &O), ot_tview_dev(t, &T), ot_tview_dev(ids, &I)), OT_OK);
  char what[128];
  snprintf(what, sizeof what, "embedding vocab %lld d %lld n %lld %s->%s pads %lld/%lld offset %lld", (long long)vocab,
           (long long)d, (long long)n, ot_dtype_name(tdt), ot_dtype_name(odt), (long long)tpad, (long long)opad,
           (long long)ooff);
  ot_tcheck(what, &O, o, 0);
  ot_tbuf_free(&T); ot_tbuf_free(&I); ot_tbuf_free(&O);
}

static void run_embed(ot_dtype tdt, ot_dtype odt, int64_t vocab, int64_t d, int64_t n, uint64_t seed) {
  ot_tbuf T = ot_tbuf_rand(tdt, vocab * d, seed, -1, 1), I = ot_tbuf_rand(OT_I32, n, seed + 1, 0, (float)vocab);
  ot_tbuf O = ot_tbuf_rand(odt, n * (d + 2), seed + 2, -1, 1);
  if (n > 2) { ((int32_t *)I.h)[1] = -1; ((int32_t *)I.h)[2] = (int32_t)vocab; ot_tbuf_push(&I); } /* out of range */
  ot_kview t = ot_tview(&T, 0, 2, (int64_t[]){vocab, d}, NULL), ids = ot_tview(&I, 0, 1, (int64_t[]){n}, NULL);
  ot_kview o = ot_tview(&O, 0, 2, (int64_t[]){n, d}, (int64_t[]){d + 2, 1});
  assert_int_equal(ot_ref_embedding(o, t, ids), OT_OK);
  assert_int_equal(ot_k_embedding(ot_test_dev(), ot_tview_dev(o, &O), ot_tview_dev(t, &T), ot_tview_dev(ids, &I)), OT_OK);
  char what[96];
  snprintf(what, sizeof what, "embedding vocab %lld d %lld n %lld %s->%s", (long long)vocab, (long long)d, (long long)n,
           ot_dtype_name(tdt), ot_dtype_name(odt));
  ot_tcheck(what, &O, o, 0);
  /* the reference by hand: row 0 is the table row of ids[0] */
  int32_t id0 = ((int32_t *)I.h)[0];
  if (odt == OT_F32 && tdt == OT_F32) assert_true(((float *)O.h)[0] == ((float *)T.h)[id0 * d]);
  ot_tbuf_free(&T); ot_tbuf_free(&I); ot_tbuf_free(&O);
}

static void test_embedding(void **st) {
  (void)st;
  run_embed(OT_F32, OT_F32, 1, 1, 1, 1);
  run_embed(OT_F32, OT_F32, 50, 17, 9, 2);
  run_embed(OT_BF16, OT_F32, 257, 33, 5, 3);
  run_embed(OT_F16, OT_BF16, 10, 8, 3, 4);
  run_embed(OT_Q8B, OT_F32, 20, 64, 7, 5);
  run_embed(OT_Q4B, OT_F32, 20, 64, 7, 6);
  /* the fast path's pairs (d % 8 == 0, aligned rows), then layouts it refuses */
  static const ot_dtype pairs[][2] = {{OT_F32, OT_F32}, {OT_BF16, OT_F32}, {OT_F16, OT_F32}, {OT_BF16, OT_BF16},
                                      {OT_F16, OT_F16}, {OT_F32, OT_BF16}};
  uint64_t seed = 100;
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    run_embed2(pairs[i][0], pairs[i][1], 37, 64, 11, 0, 0, 0, seed++);
    run_embed2(pairs[i][0], pairs[i][1], 5, 8, 1, 0, 0, 0, seed++);
    run_embed2(pairs[i][0], pairs[i][1], 40, 24, 9, 8, 16, 8, seed++); /* padded rows, aligned */
    run_embed2(pairs[i][0], pairs[i][1], 40, 24, 9, 1, 0, 0, seed++);  /* table rows of 25: generic */
    run_embed2(pairs[i][0], pairs[i][1], 40, 24, 9, 0, 0, 1, seed++);  /* out starts +1: generic */
    run_embed2(pairs[i][0], pairs[i][1], 40, 20, 9, 0, 0, 0, seed++);  /* d % 8 != 0: generic */
  }
}

static void run_argmax(ot_dtype dt, int64_t rows, int64_t n, int ties, uint64_t seed) {
  ot_tbuf X = ot_tbuf_rand(dt, rows * n, seed, -5, 5), I = ot_tbuf_rand(OT_I32, rows + 1, seed + 1, -9, 9);
  if (ties) { /* a repeated maximum: the lowest index must win */
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = n / 3; c < n; c += n / 3 + 1) ot_kst(dt, X.h, r * n + c, 7.0f);
    ot_tbuf_push(&X);
  }
  ot_kview x = ot_tview(&X, 0, 2, (int64_t[]){rows, n}, NULL), idx = ot_tview(&I, 0, 1, (int64_t[]){rows}, NULL);
  assert_int_equal(ot_ref_argmax(idx, x), OT_OK);
  assert_int_equal(ot_k_argmax(ot_test_dev(), ot_tview_dev(idx, &I), ot_tview_dev(x, &X)), OT_OK);
  char what[64];
  snprintf(what, sizeof what, "argmax [%lld, %lld] %s%s", (long long)rows, (long long)n, ot_dtype_name(dt), ties ? " ties" : "");
  ot_tcheck(what, &I, idx, 0);
  if (ties) assert_int_equal(((int32_t *)I.h)[0], n / 3);
  ot_tbuf_free(&X); ot_tbuf_free(&I);
}

static void test_argmax(void **st) {
  (void)st;
  run_argmax(OT_F32, 1, 1, 0, 1);
  run_argmax(OT_F32, 3, 17, 0, 2);
  run_argmax(OT_BF16, 5, 1000, 0, 3);
  run_argmax(OT_F32, 4, 33, 1, 4);
  run_argmax(OT_F16, 2, 257, 1, 5);
}

static void test_errors(void **st) {
  (void)st;
  float x[64];
  int dev = ot_test_dev();
  assert_int_equal(ot_k_embedding(dev, ot_kview_2d(x, OT_F32, 3, 4), ot_kview_2d(x, OT_F32, 5, 4), ot_kview_1d(x, OT_F32, 3)), OT_ERR_DTYPE);
  assert_non_null(strstr(ot_last_error(), "embedding"));
  assert_int_equal(ot_k_embedding(dev, ot_kview_2d(x, OT_F32, 3, 4), ot_kview_2d(x, OT_F32, 5, 5), ot_kview_1d(x, OT_I32, 3)), OT_ERR_SHAPE);
  assert_int_equal(ot_k_argmax(dev, ot_kview_1d(x, OT_I32, 2), ot_kview_2d(x, OT_F32, 3, 4)), OT_ERR_SHAPE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embedding), cmocka_unit_test(test_argmax), cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
