/* test_k_cross_entropy.c — fused cross-entropy loss and gradient.
 *
 * The reference's dlogits against central finite differences of the mean
 * loss written here in double (h = 1e-4, tolerance 1e-5 normalised); the
 * kernel's loss, per-row losses and dlogits against the reference (1e-5 for
 * f32, 2e-3 for f16 and 1e-2 for bf16 dlogits). */
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

typedef struct ce_ctx {
  const int32_t *t;
  int64_t rows, n, ld;
  double gs;
} ce_ctx;

static double ce_loss(const double *x, void *vc) {
  const ce_ctx *c = vc;
  double L = 0;
  int64_t cnt = 0;
  for (int64_t r = 0; r < c->rows; r++) {
    if (c->t[r] == -100) continue;
    const double *l = x + r * c->ld;
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < c->n; j++) mx = fmax(mx, l[j]);
    for (int64_t j = 0; j < c->n; j++) s += exp(l[j] - mx);
    L += mx + log(s) - l[c->t[r]];
    cnt++;
  }
  return cnt ? c->gs * L / (double)cnt : 0;
}

/* logits [rows, vocab] with row stride vocab + pad; every third target ignored
 * when `ignore`; dlogits in place over logits when `inplace`. */
/* The rows [skip, skip + rows) of a [skip + rows, vocab] buffer when skip > 0
 * (a slice of rows, as a trainer calling per chunk of rows passes). */
static void check_rows(ot_dtype ldt, ot_dtype ddt, int64_t skip, int64_t rows, int64_t vocab, int64_t pad, int ignore,
                       int inplace, float gs, uint64_t seed) {
  const int64_t ld = vocab + pad, all = skip + rows;
  ot_tbuf Lg = ot_tbuf_rand(ldt, all * ld, seed, -5, 5), T = ot_tbuf_rand(OT_I32, rows, seed + 1, 0, (float)vocab),
          Ls = ot_tbuf_rand(OT_F32, rows, seed + 2, 0, 1), L1 = ot_tbuf_rand(OT_F32, 1, seed + 3, 0, 1),
          D = ot_tbuf_rand(ddt, all * ld, seed + 4, 0, 1);
  if (ignore) {
    for (int64_t r = 0; r < rows; r += 3) ((int32_t *)T.h)[r] = -100;
    ot_tbuf_push(&T);
  }
  ot_kview lg = ot_tview(&Lg, 0, 2, (int64_t[]){rows, vocab}, (int64_t[]){ld, 1}),
           t = ot_tview(&T, 0, 1, (int64_t[]){rows}, NULL), ls = ot_tview(&Ls, 0, 1, (int64_t[]){rows}, NULL),
           l1 = ot_tview(&L1, 0, 1, (int64_t[]){1}, NULL);
  lg.p = (char *)lg.p + skip * ld * (int64_t)ot_dtype_bytes(ldt, 1);
  if (ddt == OT_F32) { /* the padding is outside the view: zero, so finite differences (0 there) agree */
    for (int64_t i = 0; i < all * ld; i++)
      if (i % ld >= vocab) ((float *)D.h)[i] = 0;
    ot_tbuf_push(&D);
  }
  assert_true(!inplace || pad == 0);
  ot_tbuf *out = inplace ? &Lg : &D;
  ot_kview d = inplace ? lg : ot_tview(&D, 0, 2, (int64_t[]){rows, vocab}, (int64_t[]){ld, 1});
  if (!inplace) d.p = (char *)d.p + skip * ld * (int64_t)ot_dtype_bytes(ddt, 1);
  double *xd = NULL;
  /* finite differences for the small f32 cases (each element costs a loss) */
  if (ldt == OT_F32 && skip == 0 && rows * ld <= 4096) xd = ot_tfd_dup(Lg.h, rows * ld);
  assert_int_equal(ot_ref_cross_entropy(l1, ls, d, lg, t, gs), OT_OK);
  char what[128];
  snprintf(what, sizeof what, "cross_entropy [%lld, %lld] +%lld rows %s->%s%s%s", (long long)rows, (long long)vocab,
           (long long)skip, ot_dtype_name(ldt), ot_dtype_name(ddt), ignore ? " ignore" : "", inplace ? " in place" : "");
  if (xd && ddt == OT_F32) {
    ce_ctx c = {T.h, rows, vocab, ld, gs};
    ot_tfd_check(what, ce_loss, &c, xd, rows * ld, out->h, 1, 1e-4, 1e-5);
    assert_true(fabs(((float *)L1.h)[0] - ce_loss(xd, &c) / gs) <= 1e-5 * fabs(ce_loss(xd, &c) / gs));
  }
  free(xd);
  ot_status s = ot_k_cross_entropy(ot_test_dev(), ot_tview_dev(l1, &L1), ot_tview_dev(ls, &Ls), ot_tview_dev(d, out),
                                   ot_tview_dev(lg, &Lg), ot_tview_dev(t, &T), gs);
  if (s != OT_OK) fail_msg("%s: %s", what, ot_last_error());
  ot_tcheck(what, &L1, l1, 1e-5);
  ot_tcheck(what, &Ls, ls, 1e-5);
  ot_tcheck(what, out, d, ddt == OT_F32 ? 1e-5 : ddt == OT_F16 ? 2e-3 : 1e-2);
  ot_tbuf_free(&Lg);
  ot_tbuf_free(&T);
  ot_tbuf_free(&Ls);
  ot_tbuf_free(&L1);
  ot_tbuf_free(&D);
}

static void check(ot_dtype ldt, ot_dtype ddt, int64_t rows, int64_t vocab, int64_t pad, int ignore, int inplace,
                  float gs, uint64_t seed) {
  check_rows(ldt, ddt, 0, rows, vocab, pad, ignore, inplace, gs, seed);
}

static void test_cross_entropy(void **st) {
  (void)st;
  check(OT_F32, OT_F32, 1, 1, 0, 0, 0, 1.0f, 1);
  check(OT_F32, OT_F32, 7, 33, 0, 0, 0, 1.0f, 2);
  check(OT_F32, OT_F32, 9, 50, 3, 1, 0, 1.0f, 3);
  check(OT_F32, OT_F32, 5, 257, 0, 1, 1, 0.25f, 4); /* in place, scaled */
  check(OT_BF16, OT_BF16, 4, 100, 0, 0, 0, 1.0f, 5);
  check(OT_BF16, OT_F32, 3, 64, 2, 1, 0, 1024.0f, 6);
}

/* The GPU kernel's cases: rows whose starts are not 16-byte aligned (odd
 * vocabularies), heads and tails around the octets, GPT-2's vocabulary, every
 * dtype pair, in place, row slices, and the target in the head, an octet
 * or the tail (random targets over many rows). */
static void test_cross_entropy_wide(void **st) {
  (void)st;
  check_rows(OT_F32, OT_F32, 0, 37, 5003, 0, 1, 0, 1.0f, 31);
  check_rows(OT_F32, OT_F32, 0, 9, 5001, 0, 0, 1, 0.5f, 32);
  check_rows(OT_F32, OT_F32, 0, 9, 5003, 1, 0, 0, 0.5f, 42); /* padded: rows start at other alignments */
  check_rows(OT_BF16, OT_BF16, 0, 19, 50257, 0, 1, 1, 1.0f, 33);
  check_rows(OT_F16, OT_F16, 0, 8, 4099, 0, 0, 0, 1.0f, 34);
  check_rows(OT_BF16, OT_F32, 0, 11, 1001, 3, 1, 0, 1.0f, 35);
  check_rows(OT_F16, OT_F32, 0, 5, 777, 0, 0, 0, 2.0f, 36);
  check_rows(OT_F32, OT_BF16, 0, 6, 2050, 0, 0, 0, 1.0f, 37);
  check_rows(OT_F32, OT_F16, 0, 7, 13, 0, 0, 0, 1.0f, 38);
  check_rows(OT_F32, OT_F32, 5, 13, 3001, 0, 1, 0, 1.0f, 39); /* a slice of rows */
  check_rows(OT_BF16, OT_BF16, 3, 6, 50257, 0, 0, 1, 1.0f, 40);
  check_rows(OT_F32, OT_F32, 0, 1, 3, 0, 0, 0, 1.0f, 41);
}

/* Hand-checked values: uniform logits give log(vocab); all rows ignored gives
 * 0 and zero gradients; a bad target gives NaN. */
static void test_special(void **st) {
  (void)st;
  float lg[8] = {0}, d[8], ls[2], l1[1];
  int32_t t[2] = {1, 3};
  ot_kview lv = ot_kview_2d(lg, OT_F32, 2, 4), dv = ot_kview_2d(d, OT_F32, 2, 4), sv = ot_kview_1d(ls, OT_F32, 2),
           one = ot_kview_1d(l1, OT_F32, 1), tv = ot_kview_1d(t, OT_I32, 2);
  assert_int_equal(ot_ref_cross_entropy(one, sv, dv, lv, tv, 1.0f), OT_OK);
  assert_true(fabsf(l1[0] - logf(4.0f)) < 1e-6f);
  assert_true(fabsf(d[1] - (0.25f - 1.0f) / 2) < 1e-7f && fabsf(d[0] - 0.25f / 2) < 1e-7f);
  t[0] = t[1] = -100;
  assert_int_equal(ot_ref_cross_entropy(one, sv, dv, lv, tv, 1.0f), OT_OK);
  assert_true(l1[0] == 0.0f && d[0] == 0.0f && d[5] == 0.0f);
  t[1] = 4;
  assert_int_equal(ot_ref_cross_entropy(one, sv, ot_kview_none(), lv, tv, 1.0f), OT_OK);
  assert_true(isnan(l1[0]));
  assert_int_equal(ot_k_cross_entropy(ot_test_dev(), one, sv, dv, lv, ot_kview_1d(t, OT_I32, 1), 1.0f), OT_ERR_SHAPE);
  assert_non_null(strstr(ot_last_error(), "cross_entropy"));
  assert_int_equal(ot_k_cross_entropy(ot_test_dev(), one, sv, dv, lv, ot_kview_1d(t, OT_F32, 2), 1.0f), OT_ERR_DTYPE);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_cross_entropy), cmocka_unit_test(test_cross_entropy_wide),
                                     cmocka_unit_test(test_special)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
