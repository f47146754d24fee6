/* test_k_norm_bwd.c — LayerNorm and RMSNorm backward.
 *
 * The reference's dx, dw, db (dw/db accumulate: their change is compared)
 * against central finite differences of sum(dy * norm(x)) in double
 * (h = 1e-4, tolerance 1e-5 normalised), then the kernel against the
 * reference: 1e-5 (f32), 1e-2 (bf16 inputs or dx), 3e-3 (f16 inputs or dx):
 * the staged xhat, its rounding in a low-precision dx and the float sums
 * differ from the double reference by a few ulp. Finite differences only
 * for the small f32 cases. */
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

#define EPS 1e-5f

typedef struct nb_ctx {
  const double *x, *w, *b;
  const float *dy;
  int64_t rows, d;
  int layer, wrt; /* 0 x, 1 w, 2 b */
} nb_ctx;

static double nb_loss(const double *v, void *vc) {
  const nb_ctx *c = vc;
  const double *x = c->wrt == 0 ? v : c->x, *w = c->wrt == 1 ? v : c->w, *b = c->wrt == 2 ? v : c->b;
  double L = 0;
  for (int64_t r = 0; r < c->rows; r++) {
    const double *xr = x + r * c->d;
    double mean = 0, ss = 0;
    if (c->layer) {
      for (int64_t j = 0; j < c->d; j++) mean += xr[j];
      mean /= (double)c->d;
    }
    for (int64_t j = 0; j < c->d; j++) ss += (xr[j] - mean) * (xr[j] - mean);
    const double rs = 1 / sqrt(ss / (double)c->d + EPS);
    for (int64_t j = 0; j < c->d; j++)
      L += c->dy[r * c->d + j] * ((xr[j] - mean) * rs * w[j] + (c->layer ? b[j] : 0));
  }
  return L;
}

/* x, dy in dt, w in wdt, dx in ddt; [nb, rows / nb, d] views when nb > 1. */
static void check_mixed(int layer, ot_dtype dt, ot_dtype wdt, ot_dtype ddt, int64_t nb, int64_t rows, int64_t d,
                        uint64_t seed) {
  const int64_t n = rows * d;
  ot_tbuf X = ot_tbuf_rand(dt, n, seed, -2, 3), W = ot_tbuf_rand(wdt, d, seed + 1, 0.5f, 1.5f),
          G = ot_tbuf_rand(dt, n, seed + 2, -1, 1), DX = ot_tbuf_rand(ddt, n, seed + 3, -1, 1),
          DW = ot_tbuf_rand(OT_F32, d, seed + 4, -1, 1), DB = ot_tbuf_rand(OT_F32, d, seed + 5, -1, 1);
  const int nd = nb > 1 ? 3 : 2;
  const int64_t ne2[2] = {rows, d}, ne3[3] = {nb, rows / nb, d}, *ne = nd == 3 ? ne3 : ne2;
  assert_true(rows % nb == 0);
  ot_kview x = ot_tview(&X, 0, nd, ne, NULL), w = ot_tview(&W, 0, 1, &d, NULL), dy = ot_tview(&G, 0, nd, ne, NULL),
           dx = ot_tview(&DX, 0, nd, ne, NULL), dw = ot_tview(&DW, 0, 1, &d, NULL), db = ot_tview(&DB, 0, 1, &d, NULL);
  float *w0 = malloc(sizeof(float) * (size_t)d * 2);
  assert_non_null(w0);
  memcpy(w0, DW.h, sizeof(float) * (size_t)d);
  memcpy(w0 + d, DB.h, sizeof(float) * (size_t)d);
  assert_int_equal(layer ? ot_ref_layernorm_backward(dx, dw, db, dy, x, w, EPS) : ot_ref_rmsnorm_backward(dx, dw, dy, x, w, EPS),
                   OT_OK);
  char what[96];
  snprintf(what, sizeof what, "%s_backward [%lld, %lld] %s, w %s, dx %s", layer ? "layernorm" : "rmsnorm",
           (long long)rows, (long long)d, ot_dtype_name(dt), ot_dtype_name(wdt), ot_dtype_name(ddt));
  if (dt == OT_F32 && wdt == OT_F32 && ddt == OT_F32 && n <= 4096) {
    double *xd = ot_tfd_dup(X.h, n), *wd = ot_tfd_dup(W.h, d), *bd = calloc((size_t)d, sizeof *bd);
    assert_non_null(bd);
    for (int64_t j = 0; j < d; j++) {
      w0[j] = ((float *)DW.h)[j] - w0[j];
      w0[d + j] = ((float *)DB.h)[j] - w0[d + j];
    }
    nb_ctx c = {xd, wd, bd, G.h, rows, d, layer, 0};
    ot_tfd_check(what, nb_loss, &c, xd, n, DX.h, 1, 1e-4, 1e-5);
    c.wrt = 1;
    ot_tfd_check(what, nb_loss, &c, wd, d, w0, 1, 1e-4, 1e-5);
    if (layer) {
      c.wrt = 2;
      ot_tfd_check(what, nb_loss, &c, bd, d, w0 + d, 1, 1e-4, 1e-5);
    }
    free(xd);
    free(wd);
    free(bd);
  }
  const int dev = ot_test_dev();
  ot_status s = layer ? ot_k_layernorm_backward(dev, ot_tview_dev(dx, &DX), ot_tview_dev(dw, &DW), ot_tview_dev(db, &DB),
                                                ot_tview_dev(dy, &G), ot_tview_dev(x, &X), ot_tview_dev(w, &W), EPS)
                      : ot_k_rmsnorm_backward(dev, ot_tview_dev(dx, &DX), ot_tview_dev(dw, &DW), ot_tview_dev(dy, &G),
                                              ot_tview_dev(x, &X), ot_tview_dev(w, &W), EPS);
  if (s != OT_OK) fail_msg("%s: %s", what, ot_last_error());
  /* bf16 / f16 operands: the roundings of the inputs' products and of a
   * low-precision dx (which also stages the xhat that dw sees) */
  const int f16 = dt == OT_F16 || ddt == OT_F16, bf16 = dt == OT_BF16 || ddt == OT_BF16;
  const double tol = bf16 ? 1e-2 : f16 ? 3e-3 : 1e-5;
  ot_tcheck(what, &DX, dx, tol);
  ot_tcheck(what, &DW, dw, tol);
  ot_tcheck(what, &DB, db, tol);
  /* dx alone (no parameter gradients) gives the same dx */
  ot_tbuf_push(&DX);
  s = layer ? ot_k_layernorm_backward(dev, ot_tview_dev(dx, &DX), ot_kview_none(), ot_kview_none(), ot_tview_dev(dy, &G),
                                      ot_tview_dev(x, &X), ot_tview_dev(w, &W), EPS)
            : ot_k_rmsnorm_backward(dev, ot_tview_dev(dx, &DX), ot_kview_none(), ot_tview_dev(dy, &G),
                                    ot_tview_dev(x, &X), ot_tview_dev(w, &W), EPS);
  assert_int_equal(s, OT_OK);
  ot_tcheck(what, &DX, dx, tol);
  free(w0);
  ot_tbuf_free(&X);
  ot_tbuf_free(&W);
  ot_tbuf_free(&G);
  ot_tbuf_free(&DX);
  ot_tbuf_free(&DW);
  ot_tbuf_free(&DB);
}

static void check(int layer, ot_dtype dt, int64_t rows, int64_t d, uint64_t seed) {
  check_mixed(layer, dt, dt, OT_F32, 1, rows, d, seed);
}

static void test_layernorm(void **st) {
  (void)st;
  check(1, OT_F32, 1, 3, 1); /* d 2 (LN) or 1 (RMS) have dx = 0 exactly: no relative check */
  check(1, OT_F32, 5, 17, 2);
  check(1, OT_F32, 3, 130, 3);
  check(1, OT_BF16, 4, 64, 4);
  /* the GPU paths: many rows (not a multiple of the column kernel's row
   * groups), GPT-2's width and odd ones, [B, T, D] views, f16/bf16 inputs
   * with f32 weights and f32 or low-precision dx */
  check_mixed(1, OT_F32, OT_F32, OT_F32, 1, 1037, 768, 5);
  check_mixed(1, OT_F32, OT_F32, OT_F32, 3, 771, 37, 6);
  check_mixed(1, OT_BF16, OT_F32, OT_F32, 1, 1037, 768, 7);
  check_mixed(1, OT_BF16, OT_F32, OT_BF16, 2, 514, 768, 8);
  check_mixed(1, OT_F16, OT_F32, OT_F16, 1, 300, 99, 9);
  check_mixed(1, OT_F16, OT_F16, OT_F32, 1, 129, 256, 10);
}

static void test_rmsnorm(void **st) {
  (void)st;
  check(0, OT_F32, 1, 2, 11);
  check(0, OT_F32, 6, 33, 12);
  check(0, OT_BF16, 2, 96, 13);
  check_mixed(0, OT_BF16, OT_F32, OT_BF16, 1, 777, 129, 14);
}

static void test_errors(void **st) {
  (void)st;
  float b[64];
  ot_kview v = ot_kview_2d(b, OT_F32, 3, 4), w = ot_kview_1d(b, OT_F32, 4);
  assert_int_equal(ot_k_layernorm_backward(ot_test_dev(), v, w, w, v, v, ot_kview_1d(b, OT_F32, 3), EPS), OT_ERR_SHAPE);
  assert_non_null(strstr(ot_last_error(), "layernorm_backward"));
  assert_int_equal(ot_k_rmsnorm_backward(ot_test_dev(), ot_kview_2d(b, OT_F32, 4, 3), w, v, v, w, EPS), OT_ERR_SHAPE);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_layernorm), cmocka_unit_test(test_rmsnorm),
                                     cmocka_unit_test(test_errors)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
