/* test_k_attention_bwd.c — causal attention backward (no cache), with GQA.
 *
 * The reference's dq, dk, dv against central finite differences of
 * sum(dout * attention(q, k, v)) written here in double (h = 1e-4,
 * tolerance 1e-5 normalised), then the kernel against the reference
 * (1e-5 for f32, 1e-2 with bf16 inputs), workspace included. */
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

typedef struct ab_ctx {
  const double *q, *k, *v;
  const float *dout;
  int64_t T, H, Hk, hd;
  int wrt; /* 0 q, 1 k, 2 v */
} ab_ctx;

static double ab_loss(const double *x, void *vc) {
  const ab_ctx *c = vc;
  const double *q = c->wrt == 0 ? x : c->q, *k = c->wrt == 1 ? x : c->k, *v = c->wrt == 2 ? x : c->v;
  const int64_t T = c->T, H = c->H, Hk = c->Hk, hd = c->hd, g = H / Hk;
  double L = 0, s[64];
  for (int64_t i = 0; i < T; i++)
    for (int64_t h = 0; h < H; h++) {
      double mx = -INFINITY, l = 0;
      for (int64_t j = 0; j <= i; j++) {
        s[j] = 0;
        for (int64_t d = 0; d < hd; d++) s[j] += q[(i * H + h) * hd + d] * k[(j * Hk + h / g) * hd + d];
        s[j] /= sqrt((double)hd);
        mx = fmax(mx, s[j]);
      }
      for (int64_t j = 0; j <= i; j++) l += s[j] = exp(s[j] - mx);
      for (int64_t d = 0; d < hd; d++) {
        double o = 0;
        for (int64_t j = 0; j <= i; j++) o += s[j] / l * v[(j * Hk + h / g) * hd + d];
        L += c->dout[(i * H + h) * hd + d] * o;
      }
    }
  return L;
}

static void check(ot_dtype dt, int64_t T, int64_t H, int64_t Hk, int64_t hd, uint64_t seed) {
  const int64_t nq = T * H * hd, nk = T * Hk * hd, qne[3] = {T, H, hd}, kne[3] = {T, Hk, hd}, wne[3] = {T, H, 2};
  ot_tbuf Q = ot_tbuf_rand(dt, nq, seed, -1, 1), K = ot_tbuf_rand(dt, nk, seed + 1, -1, 1),
          V = ot_tbuf_rand(dt, nk, seed + 2, -1, 1), O = ot_tbuf_rand(dt, nq, seed + 3, -1, 1),
          DQ = ot_tbuf_rand(OT_F32, nq, seed + 4, -1, 1), DK = ot_tbuf_rand(OT_F32, nk, seed + 5, -1, 1),
          DV = ot_tbuf_rand(OT_F32, nk, seed + 6, -1, 1), W = ot_tbuf_rand(OT_F32, T * H * 2, seed + 7, -1, 1);
  ot_kview q = ot_tview(&Q, 0, 3, qne, NULL), k = ot_tview(&K, 0, 3, kne, NULL), v = ot_tview(&V, 0, 3, kne, NULL),
           o = ot_tview(&O, 0, 3, qne, NULL), dq = ot_tview(&DQ, 0, 3, qne, NULL), dk = ot_tview(&DK, 0, 3, kne, NULL),
           dv = ot_tview(&DV, 0, 3, kne, NULL), ws = ot_tview(&W, 0, 3, wne, NULL);
  assert_int_equal(ot_ref_attention_backward(dq, dk, dv, ws, o, q, k, v), OT_OK);
  char what[96];
  snprintf(what, sizeof what, "attention_backward T%lld H%lld Hk%lld hd%lld %s", (long long)T, (long long)H,
           (long long)Hk, (long long)hd, ot_dtype_name(dt));
  if (dt == OT_F32) {
    double *qd = ot_tfd_dup(Q.h, nq), *kd = ot_tfd_dup(K.h, nk), *vd = ot_tfd_dup(V.h, nk);
    ab_ctx c = {qd, kd, vd, O.h, T, H, Hk, hd, 0};
    ot_tfd_check(what, ab_loss, &c, qd, nq, DQ.h, 1, 1e-4, 1e-5);
    c.wrt = 1;
    ot_tfd_check(what, ab_loss, &c, kd, nk, DK.h, 1, 1e-4, 1e-5);
    c.wrt = 2;
    ot_tfd_check(what, ab_loss, &c, vd, nk, DV.h, 1, 1e-4, 1e-5);
    free(qd);
    free(kd);
    free(vd);
  }
  ot_status s = ot_k_attention_backward(ot_test_dev(), ot_tview_dev(dq, &DQ), ot_tview_dev(dk, &DK),
                                        ot_tview_dev(dv, &DV), ot_tview_dev(ws, &W), ot_tview_dev(o, &O),
                                        ot_tview_dev(q, &Q), ot_tview_dev(k, &K), ot_tview_dev(v, &V));
  if (s != OT_OK) fail_msg("%s: %s", what, ot_last_error());
  const double tol = dt == OT_F32 ? 1e-5 : 1e-2;
  ot_tcheck(what, &DQ, dq, tol);
  ot_tcheck(what, &DK, dk, tol);
  ot_tcheck(what, &DV, dv, tol);
  ot_tcheck(what, &W, ws, tol);
  ot_tbuf *all[] = {&Q, &K, &V, &O, &DQ, &DK, &DV, &W};
  for (int i = 0; i < 8; i++) ot_tbuf_free(all[i]);
}

static void test_attention_backward(void **st) {
  (void)st;
  check(OT_F32, 1, 1, 1, 1, 1);
  check(OT_F32, 5, 2, 2, 8, 2);   /* MHA */
  check(OT_F32, 7, 4, 2, 6, 3);   /* GQA, 2 query heads per kv head */
  check(OT_BF16, 9, 3, 1, 16, 4); /* MQA, bf16 inputs */
  check(OT_F32, 6, 2, 1, 80, 5);  /* head_dim over one chunk of the kernel (64): a partial second chunk */
}

static void test_errors(void **st) {
  (void)st;
  float b[256];
  ot_kview q = ot_kview_3d(b, OT_F32, 4, 3, 4), k = ot_kview_3d(b, OT_F32, 4, 2, 4), w = ot_kview_3d(b, OT_F32, 4, 3, 2);
  assert_int_equal(ot_k_attention_backward(ot_test_dev(), q, k, k, w, q, q, k, k), OT_ERR_SHAPE); /* 3 % 2 */
  assert_non_null(strstr(ot_last_error(), "attention_backward"));
  ot_kview k1 = ot_kview_3d(b, OT_F32, 4, 1, 4);
  assert_int_equal(ot_k_attention_backward(ot_test_dev(), q, k1, k1, ot_kview_3d(b, OT_F32, 4, 3, 1), q, q, k1, k1),
                   OT_ERR_SHAPE);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_attention_backward), cmocka_unit_test(test_errors)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
