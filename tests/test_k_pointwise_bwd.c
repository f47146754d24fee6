/* test_k_pointwise_bwd.c — GELU, SiLU, SwiGLU and softmax backward.
 *
 * Each backward reference is checked against central finite differences of a
 * double forward pass written here (kgrad.h; h = 1e-4, tolerance 1e-5
 * normalised: the reference rounds its result to float once), then each
 * kernel against its reference: 1e-5 for f32 outputs, 1e-2 for bf16. */
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

#define FD_H 1e-4
#define FD_TOL 1e-5

static double gelu_d(double x) { return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double silu_d(double x) { return x / (1 + exp(-x)); }

typedef struct pw_ctx {
  const float *dy, *other; /* other: up for swiglu's gate, gate for its up */
  int64_t n;
  int kind; /* 0 gelu, 1 silu, 2 swiglu wrt gate, 3 swiglu wrt up */
} pw_ctx;

static double pw_loss(const double *x, void *vc) {
  const pw_ctx *c = vc;
  double L = 0;
  for (int64_t i = 0; i < c->n; i++) {
    double f = c->kind == 0 ? gelu_d(x[i]) : c->kind == 1 ? silu_d(x[i])
             : c->kind == 2 ? silu_d(x[i]) * c->other[i] : silu_d(c->other[i]) * x[i];
    L += c->dy[i] * f;
  }
  return L;
}

/* dx [rows, cols] (row stride cols + pad) for gelu/silu. */
static void check_unary(int kind, ot_dtype dt, int64_t rows, int64_t cols, int64_t pad, uint64_t seed) {
  const int64_t ld = cols + pad, n = rows * cols;
  ot_tbuf X = ot_tbuf_rand(OT_F32, n, seed, -4, 4), G = ot_tbuf_rand(OT_F32, n, seed + 1, -1, 1),
          D = ot_tbuf_rand(dt, rows * ld, seed + 2, -1, 1);
  ot_kview x = ot_tview(&X, 0, 2, (int64_t[]){rows, cols}, NULL), dy = ot_tview(&G, 0, 2, (int64_t[]){rows, cols}, NULL),
           dx = ot_tview(&D, 0, 2, (int64_t[]){rows, cols}, (int64_t[]){ld, 1});
  assert_int_equal(kind ? ot_ref_silu_backward(dx, x, dy) : ot_ref_gelu_backward(dx, x, dy), OT_OK);
  char what[96];
  snprintf(what, sizeof what, "%s_backward [%lld, %lld] %s", kind ? "silu" : "gelu", (long long)rows,
           (long long)cols, ot_dtype_name(dt));
  if (dt == OT_F32 && pad == 0) {
    double *xd = ot_tfd_dup(X.h, n);
    pw_ctx c = {G.h, NULL, n, kind};
    ot_tfd_check(what, pw_loss, &c, xd, n, D.h, 1, FD_H, FD_TOL);
    free(xd);
  }
  const int dev = ot_test_dev();
  ot_status s = kind ? ot_k_silu_backward(dev, ot_tview_dev(dx, &D), ot_tview_dev(x, &X), ot_tview_dev(dy, &G))
                     : ot_k_gelu_backward(dev, ot_tview_dev(dx, &D), ot_tview_dev(x, &X), ot_tview_dev(dy, &G));
  if (s != OT_OK) fail_msg("%s: %s", what, ot_last_error());
  ot_tcheck(what, &D, dx, dt == OT_F32 ? 1e-5 : 1e-2);
  ot_tbuf_free(&X);
  ot_tbuf_free(&G);
  ot_tbuf_free(&D);
}

static void test_gelu_silu(void **st) {
  (void)st;
  uint64_t seed = 1;
  for (int kind = 0; kind < 2; kind++) {
    check_unary(kind, OT_F32, 1, 1, 0, seed += 3);
    check_unary(kind, OT_F32, 7, 33, 0, seed += 3);
    check_unary(kind, OT_F32, 5, 17, 3, seed += 3);
    check_unary(kind, OT_BF16, 4, 65, 0, seed += 3);
  }
}

static void test_swiglu(void **st) {
  (void)st;
  static const int64_t shapes[][2] = {{1, 1}, {6, 35}, {3, 128}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const int64_t R = shapes[i][0], C = shapes[i][1], n = R * C;
    const uint64_t seed = 40 + 5 * i;
    ot_tbuf Ga = ot_tbuf_rand(OT_F32, n, seed, -4, 4), U = ot_tbuf_rand(OT_F32, n, seed + 1, -2, 2),
            G = ot_tbuf_rand(OT_F32, n, seed + 2, -1, 1), DG = ot_tbuf_rand(OT_F32, n, seed + 3, -1, 1),
            DU = ot_tbuf_rand(OT_F32, n, seed + 4, -1, 1);
    const int64_t ne[2] = {R, C};
    ot_kview gate = ot_tview(&Ga, 0, 2, ne, NULL), up = ot_tview(&U, 0, 2, ne, NULL), dy = ot_tview(&G, 0, 2, ne, NULL),
             dgate = ot_tview(&DG, 0, 2, ne, NULL), dup = ot_tview(&DU, 0, 2, ne, NULL);
    assert_int_equal(ot_ref_swiglu_backward(dgate, dup, gate, up, dy), OT_OK);
    double *gd = ot_tfd_dup(Ga.h, n), *ud = ot_tfd_dup(U.h, n);
    pw_ctx cg = {G.h, U.h, n, 2}, cu = {G.h, Ga.h, n, 3};
    ot_tfd_check("swiglu_backward dgate", pw_loss, &cg, gd, n, DG.h, 1, FD_H, FD_TOL);
    ot_tfd_check("swiglu_backward dup", pw_loss, &cu, ud, n, DU.h, 1, FD_H, FD_TOL);
    free(gd);
    free(ud);
    ot_status s = ot_k_swiglu_backward(ot_test_dev(), ot_tview_dev(dgate, &DG), ot_tview_dev(dup, &DU),
                                       ot_tview_dev(gate, &Ga), ot_tview_dev(up, &U), ot_tview_dev(dy, &G));
    if (s != OT_OK) fail_msg("swiglu_backward: %s", ot_last_error());
    ot_tcheck("swiglu_backward dgate", &DG, dgate, 1e-5);
    ot_tcheck("swiglu_backward dup", &DU, dup, 1e-5);
    ot_tbuf_free(&Ga);
    ot_tbuf_free(&U);
    ot_tbuf_free(&G);
    ot_tbuf_free(&DG);
    ot_tbuf_free(&DU);
  }
}

typedef struct sm_ctx {
  const float *dy;
  int64_t rows, S, n;
  double scale;
  int causal;
} sm_ctx;

static double sm_loss(const double *x, void *vc) {
  const sm_ctx *c = vc;
  double L = 0;
  for (int64_t r = 0; r < c->rows; r++) {
    const double *xr = x + r * c->n;
    int64_t m = c->causal ? r % c->S + c->n - c->S + 1 : c->n;
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < m; j++) mx = fmax(mx, c->scale * xr[j]);
    for (int64_t j = 0; j < m; j++) s += exp(c->scale * xr[j] - mx);
    for (int64_t j = 0; j < m; j++) L += c->dy[r * c->n + j] * exp(c->scale * xr[j] - mx) / s;
  }
  return L;
}

/* x, y, dy, dx [B, S, n]; dx in place over dy when inplace. */
static void check_softmax(int64_t B, int64_t S, int64_t n, float scale, int causal, int inplace, uint64_t seed) {
  const int64_t cnt = B * S * n, ne[3] = {B, S, n};
  ot_tbuf X = ot_tbuf_rand(OT_F32, cnt, seed, -3, 3), Y = ot_tbuf_rand(OT_F32, cnt, seed + 1, 0, 1),
          G = ot_tbuf_rand(OT_F32, cnt, seed + 2, -1, 1), D = ot_tbuf_rand(OT_F32, cnt, seed + 3, -1, 1);
  ot_kview x = ot_tview(&X, 0, 3, ne, NULL), y = ot_tview(&Y, 0, 3, ne, NULL), dy = ot_tview(&G, 0, 3, ne, NULL);
  ot_tbuf *out = inplace ? &G : &D;
  ot_kview dx = inplace ? dy : ot_tview(&D, 0, 3, ne, NULL);
  assert_int_equal(ot_ref_softmax(y, x, scale, causal), OT_OK);
  ot_tbuf_push(&Y);
  float *dy0 = malloc(sizeof(float) * (size_t)cnt);
  assert_non_null(dy0);
  memcpy(dy0, G.h, sizeof(float) * (size_t)cnt);
  assert_int_equal(ot_ref_softmax_backward(dx, y, dy, scale), OT_OK);
  double *xd = ot_tfd_dup(X.h, cnt);
  sm_ctx c = {dy0, B * S, S, n, scale, causal};
  char what[96];
  snprintf(what, sizeof what, "softmax_backward [%lld, %lld, %lld]%s%s", (long long)B, (long long)S, (long long)n,
           causal ? " causal" : "", inplace ? " in place" : "");
  ot_tfd_check(what, sm_loss, &c, xd, cnt, out->h, 1, FD_H, FD_TOL);
  ot_status s = ot_k_softmax_backward(ot_test_dev(), ot_tview_dev(dx, out), ot_tview_dev(y, &Y),
                                      ot_tview_dev(dy, &G), scale);
  if (s != OT_OK) fail_msg("%s: %s", what, ot_last_error());
  ot_tcheck(what, out, dx, 1e-5);
  free(xd);
  free(dy0);
  ot_tbuf_free(&X);
  ot_tbuf_free(&Y);
  ot_tbuf_free(&G);
  ot_tbuf_free(&D);
}

static void test_softmax(void **st) {
  (void)st;
  check_softmax(1, 1, 1, 1.0f, 0, 0, 60);
  check_softmax(2, 3, 17, 0.5f, 0, 0, 61);
  check_softmax(2, 5, 5, 0.37f, 1, 0, 62);
  check_softmax(1, 4, 9, 1.0f, 1, 1, 63); /* 4 queries, the last of 9 keys */
}

static void test_errors(void **st) {
  (void)st;
  float b[64];
  const int dev = ot_test_dev();
  ot_kview v = ot_kview_2d(b, OT_F32, 3, 4);
  assert_int_equal(ot_k_gelu_backward(dev, v, v, ot_kview_2d(b, OT_F32, 2, 4)), OT_ERR_SHAPE);
  assert_non_null(strstr(ot_last_error(), "gelu_backward"));
  assert_int_equal(ot_k_softmax_backward(dev, v, v, ot_kview_2d(b, OT_F32, 4, 3), 1.0f), OT_ERR_SHAPE);
  assert_int_equal(ot_k_silu_backward(dev, v, v, ot_kview_2d(b, OT_I32, 3, 4)), OT_ERR_DTYPE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gelu_silu), cmocka_unit_test(test_swiglu), cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
