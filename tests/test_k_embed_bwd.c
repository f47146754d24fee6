/* test_k_embed_bwd.c — embedding and position-embedding backward.
 *
 * Both are linear, so the reference is checked against finite differences of
 * sum(dout * forward) (exact up to round-off; tolerance 1e-6 normalised on the
 * accumulated change), and the kernel against the reference (1e-6: the same
 * sums in the same order up to float vs double accumulation). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kgrad.h"
#include "ktest.h"

typedef struct eb_ctx {
  const int32_t *ids;
  const float *dout;
  int64_t n, d, vocab;
} eb_ctx;

static double eb_loss(const double *table, void *vc) {
  const eb_ctx *c = vc;
  double L = 0;
  for (int64_t r = 0; r < c->n; r++)
    if (c->ids[r] >= 0 && c->ids[r] < c->vocab)
      for (int64_t j = 0; j < c->d; j++) L += c->dout[r * c->d + j] * table[c->ids[r] * c->d + j];
  return L;
}

/* The accumulated part of a gradient buffer: now - before. */
static float *delta(const ot_tbuf *b, const float *before) {
  float *d = malloc(sizeof(float) * (size_t)b->n);
  assert_non_null(d);
  for (int64_t i = 0; i < b->n; i++) d[i] = ((const float *)b->h)[i] - before[i];
  return d;
}

static float *snapshot(const ot_tbuf *b) {
  float *s = malloc(sizeof(float) * (size_t)b->n);
  assert_non_null(s);
  memcpy(s, b->h, sizeof(float) * (size_t)b->n);
  return s;
}

static void check_embedding(int64_t n, int64_t vocab, int64_t d, uint64_t seed) {
  ot_tbuf I = ot_tbuf_rand(OT_I32, n, seed, 0, (float)vocab), G = ot_tbuf_rand(OT_F32, n * d, seed + 1, -1, 1),
          T = ot_tbuf_rand(OT_F32, vocab * d, seed + 2, -1, 1);
  if (n > 3) { /* a repeated id and one outside the vocabulary */
    ((int32_t *)I.h)[1] = ((int32_t *)I.h)[0];
    ((int32_t *)I.h)[2] = (int32_t)vocab;
    ot_tbuf_push(&I);
  }
  ot_kview ids = ot_tview(&I, 0, 1, &n, NULL), dout = ot_tview(&G, 0, 2, (int64_t[]){n, d}, NULL),
           dt = ot_tview(&T, 0, 2, (int64_t[]){vocab, d}, NULL);
  float *before = snapshot(&T);
  assert_int_equal(ot_ref_embedding_backward(dt, dout, ids), OT_OK);
  float *got = delta(&T, before);
  double *td = ot_tfd_dup(before, vocab * d);
  eb_ctx c = {I.h, G.h, n, d, vocab};
  ot_tfd_check("embedding_backward", eb_loss, &c, td, vocab * d, got, 1, 1e-2, 1e-6);
  assert_int_equal(ot_k_embedding_backward(ot_test_dev(), ot_tview_dev(dt, &T), ot_tview_dev(dout, &G),
                                           ot_tview_dev(ids, &I)),
                   OT_OK);
  ot_tcheck("embedding_backward", &T, dt, 1e-6);
  free(before);
  free(got);
  free(td);
  ot_tbuf_free(&I);
  ot_tbuf_free(&G);
  ot_tbuf_free(&T);
}

static void test_embedding(void **st) {
  (void)st;
  check_embedding(1, 1, 1, 1);
  check_embedding(9, 5, 7, 2);
  check_embedding(40, 13, 33, 3);
}

static void test_positions(void **st) {
  (void)st;
  const int64_t B = 3, T = 5, d = 6, max_pos = 9, pos = 2;
  ot_tbuf G = ot_tbuf_rand(OT_F32, B * T * d, 21, -1, 1), W = ot_tbuf_rand(OT_F32, max_pos * d, 22, -1, 1);
  ot_kview dout = ot_tview(&G, 0, 3, (int64_t[]){B, T, d}, NULL), dw = ot_tview(&W, 0, 2, (int64_t[]){max_pos, d}, NULL);
  float *before = snapshot(&W);
  assert_int_equal(ot_ref_positions_backward(dw, dout, pos), OT_OK);
  for (int64_t p = 0; p < max_pos; p++)
    for (int64_t j = 0; j < d; j++) {
      double want = before[p * d + j];
      if (p >= pos && p < pos + T)
        for (int64_t b = 0; b < B; b++) want += ((float *)G.h)[(b * T + p - pos) * d + j];
      assert_true(fabs(((float *)W.h)[p * d + j] - want) <= 1e-6 * (1 + fabs(want)));
    }
  assert_int_equal(ot_k_positions_backward(ot_test_dev(), ot_tview_dev(dw, &W), ot_tview_dev(dout, &G), pos), OT_OK);
  ot_tcheck("positions_backward", &W, dw, 1e-6);
  /* 2-D dout, and the errors */
  ot_kview d2 = ot_tview(&G, 0, 2, (int64_t[]){T, d}, NULL);
  assert_int_equal(ot_ref_positions_backward(dw, d2, 0), OT_OK);
  assert_int_equal(ot_k_positions_backward(ot_test_dev(), ot_tview_dev(dw, &W), ot_tview_dev(d2, &G), 0), OT_OK);
  ot_tcheck("positions_backward 2-D", &W, dw, 1e-6);
  assert_int_equal(ot_k_positions_backward(ot_test_dev(), ot_tview_dev(dw, &W), ot_tview_dev(d2, &G), 5), OT_ERR_SHAPE);
  assert_non_null(strstr(ot_last_error(), "positions_backward"));
  free(before);
  ot_tbuf_free(&G);
  ot_tbuf_free(&W);
}

static void test_errors(void **st) {
  (void)st;
  float b[64];
  int32_t ids[4] = {0};
  assert_int_equal(ot_k_embedding_backward(ot_test_dev(), ot_kview_2d(b, OT_F32, 4, 3), ot_kview_2d(b, OT_F32, 4, 2),
                                           ot_kview_1d(ids, OT_I32, 4)),
                   OT_ERR_SHAPE);
  assert_int_equal(ot_k_embedding_backward(ot_test_dev(), ot_kview_2d(b, OT_F32, 4, 3), ot_kview_2d(b, OT_F32, 4, 3),
                                           ot_kview_1d(ids, OT_F32, 4)),
                   OT_ERR_DTYPE);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_embedding), cmocka_unit_test(test_positions),
                                     cmocka_unit_test(test_errors)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
