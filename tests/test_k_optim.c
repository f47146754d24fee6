/* test_k_optim.c — AdamW, SGD and gradient statistics.
 *
 * The references against the PyTorch update rules written here in double
 * over several steps (tolerance 1e-5 relative per element: the kernels work
 * in float as PyTorch does), the kernels against the references (1e-6
 * normalised: the same float operations, a GPU may fuse multiply-adds), and
 * one AdamW step by hand (step 1 moves each weight by lr * sign(g)). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ktest.h"

enum { N = 37, STEPS = 5 };

static void near(const char *what, double got, double want, double rel) {
  if (!(fabs(got - want) <= rel * (fabs(want) + 1e-3)))
    fail_msg("%s: %.9g, want %.9g", what, got, want);
}

static void test_adamw(void **st) {
  (void)st;
  const ot_kadamw h0 = {1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1, 1.0f};
  ot_tbuf P = ot_tbuf_rand(OT_F32, N, 1, -1, 1), M = ot_tbuf_rand(OT_F32, N, 2, 0, 1),
          V = ot_tbuf_rand(OT_F32, N, 3, 0, 1), C = ot_tbuf_rand(OT_BF16, N, 4, 0, 1);
  memset(M.h, 0, sizeof(float) * N);
  memset(V.h, 0, sizeof(float) * N);
  ot_tbuf_push(&M);
  ot_tbuf_push(&V);
  double p[N], m[N] = {0}, v[N] = {0};
  for (int i = 0; i < N; i++) p[i] = ((float *)P.h)[i];
  ot_kview pv = ot_tview(&P, 0, 1, (int64_t[]){N}, NULL), mv = ot_tview(&M, 0, 1, (int64_t[]){N}, NULL),
           vv = ot_tview(&V, 0, 1, (int64_t[]){N}, NULL), cv = ot_tview(&C, 0, 1, (int64_t[]){N}, NULL);
  for (int t = 1; t <= STEPS; t++) {
    ot_kadamw h = h0;
    h.t = t;
    h.grad_scale = t == 3 ? 0.5f : 1.0f; /* step 3: gradients arrive scaled by 2 */
    ot_tbuf G = ot_tbuf_rand(t == 2 ? OT_BF16 : OT_F32, N, 10 + t, -1, 1);
    if (t == 3) for (int i = 0; i < N; i++) ((float *)G.h)[i] *= 2;
    ot_tbuf_push(&G);
    ot_kview gv = ot_tview(&G, 0, 1, (int64_t[]){N}, NULL);
    double p1[N];
    for (int i = 0; i < N; i++) {
      const double g = (t == 2 ? ot_bf16_to_f32(((uint16_t *)G.h)[i]) : ((float *)G.h)[i]) * h.grad_scale;
      p[i] *= 1 - (double)h.lr * h.weight_decay;
      m[i] = h.beta1 * m[i] + (1 - (double)h.beta1) * g;
      v[i] = h.beta2 * v[i] + (1 - (double)h.beta2) * g * g;
      const double mh = m[i] / (1 - pow(h.beta1, t)), vh = v[i] / (1 - pow(h.beta2, t));
      p1[i] = p[i] - h.lr * mh / (sqrt(vh) + h.eps);
      if (t == 1) near("adamw step 1 by hand", p1[i], p[i] - h.lr * (g > 0 ? 1 : -1), 1e-5);
      p[i] = p1[i];
    }
    assert_int_equal(ot_ref_adamw(pv, gv, mv, vv, cv, h), OT_OK);
    for (int i = 0; i < N; i++) {
      near("adamw p", ((float *)P.h)[i], p[i], 1e-5);
      near("adamw m", ((float *)M.h)[i], m[i], 1e-5);
      near("adamw v", ((float *)V.h)[i], v[i], 1e-5);
      assert_true(ot_bf16_to_f32(((uint16_t *)C.h)[i]) == ot_bf16_to_f32(ot_f32_to_bf16(((float *)P.h)[i])));
    }
    assert_int_equal(ot_k_adamw(ot_test_dev(), ot_tview_dev(pv, &P), ot_tview_dev(gv, &G), ot_tview_dev(mv, &M),
                                ot_tview_dev(vv, &V), ot_tview_dev(cv, &C), h),
                     OT_OK);
    ot_tcheck("adamw p", &P, pv, 1e-6);
    ot_tcheck("adamw m", &M, mv, 1e-6);
    ot_tcheck("adamw v", &V, vv, 1e-6);
    ot_tcheck("adamw copy", &C, cv, 1e-2);
    /* continue from the device state so both stay in step */
    ot_test_download(P.h, P.d, P.bytes);
    ot_test_download(M.h, M.d, M.bytes);
    ot_test_download(V.h, V.d, V.bytes);
    ot_tbuf_free(&G);
  }
  ot_kadamw bad = h0;
  bad.t = 0;
  assert_int_equal(ot_ref_adamw(pv, pv, mv, vv, ot_kview_none(), bad), OT_ERR_INVALID_ARG);
  assert_int_equal(ot_k_adamw(ot_test_dev(), pv, pv, ot_kview_none(), vv, ot_kview_none(), h0), OT_ERR_INVALID_ARG);
  assert_int_equal(ot_k_adamw(ot_test_dev(), pv, ot_kview_1d(P.d, OT_F32, 3), mv, vv, ot_kview_none(), h0), OT_ERR_SHAPE);
  ot_tbuf_free(&P);
  ot_tbuf_free(&M);
  ot_tbuf_free(&V);
  ot_tbuf_free(&C);
}

/* ---- the multi-tensor AdamW: the same bits as one ot_k_adamw per tensor ----
 * AWM_N tensors (more than one GPU launch takes), lengths around the GPU
 * kernel's octets and blocks (1, 7, 8, 33, 8193, 20000, ...), f32/bf16/f16
 * gradients, bf16/f16/f32/no copies, one view starting one element into its
 * buffer (unaligned) and one strided (the per-tensor path). Set A runs
 * ot_k_adamw_multi, set B ot_k_adamw tensor by tensor, from the same values,
 * for 3 steps; the device copies must agree byte for byte, and
 * ot_ref_adamw_multi with ot_ref_adamw likewise on the host. */
enum { AWM_N = 21 };

typedef struct awm_set {
  ot_tbuf P[AWM_N], G[AWM_N], M[AWM_N], V[AWM_N], C[AWM_N];
  ot_kview p[AWM_N], g[AWM_N], m[AWM_N], v[AWM_N], c[AWM_N];     /* host views */
  ot_kview pd[AWM_N], gd[AWM_N], md[AWM_N], vd[AWM_N], cd[AWM_N]; /* device views */
} awm_set;

static int64_t awm_len(int i) {
  static const int64_t len[] = {1, 7, 8, 33, 8193, 20000, 768, 2304, 3};
  return len[i % 9] + (i >= 9 ? 16 * i : 0);
}

static void awm_make(awm_set *S, uint64_t seed) {
  static const ot_dtype gdt[] = {OT_F32, OT_BF16, OT_F16}, cdt[] = {OT_BF16, OT_F16, OT_F32, OT_F32};
  for (int i = 0; i < AWM_N; i++) {
    const int64_t n = awm_len(i), off = i == 4 ? 1 : 0, st = i == 6 ? 2 : 1, tot = off + n * st;
    const uint64_t sd = seed + 10 * (uint64_t)i;
    const int has_copy = i % 4 != 3;
    S->P[i] = ot_tbuf_rand(OT_F32, tot, sd, -1, 1);
    S->G[i] = ot_tbuf_rand(gdt[i % 3], tot, sd + 1, -1, 1);
    S->M[i] = ot_tbuf_rand(OT_F32, tot, sd + 2, -0.1f, 0.1f);
    S->V[i] = ot_tbuf_rand(OT_F32, tot, sd + 3, 0, 0.01f);
    S->C[i] = ot_tbuf_rand(cdt[i % 4], tot, sd + 4, 0, 1);
    const int64_t ne[1] = {n}, nb[1] = {st};
    ot_tbuf *bufs[5] = {&S->P[i], &S->G[i], &S->M[i], &S->V[i], &S->C[i]};
    ot_kview *hv[5] = {S->p, S->g, S->m, S->v, S->c}, *dv[5] = {S->pd, S->gd, S->md, S->vd, S->cd};
    for (int k = 0; k < 5; k++) {
      ot_kview w = ot_tview(bufs[k], 0, 1, ne, nb);
      w.p = (char *)w.p + off * (int64_t)ot_dtype_bytes(bufs[k]->dt, 1);
      hv[k][i] = k == 4 && !has_copy ? ot_kview_none() : w;
      dv[k][i] = k == 4 && !has_copy ? ot_kview_none() : ot_tview_dev(w, bufs[k]);
    }
  }
}

static void awm_free(awm_set *S) {
  for (int i = 0; i < AWM_N; i++) {
    ot_tbuf_free(&S->P[i]);
    ot_tbuf_free(&S->G[i]);
    ot_tbuf_free(&S->M[i]);
    ot_tbuf_free(&S->V[i]);
    ot_tbuf_free(&S->C[i]);
  }
}

/* The device (dev 1) or host (dev 0) copies of every buffer of A and B, byte for byte. */
static void awm_same(const char *what, awm_set *A, awm_set *B, int dev) {
  for (int i = 0; i < AWM_N; i++) {
    ot_tbuf *a[5] = {&A->P[i], &A->M[i], &A->V[i], &A->C[i], &A->G[i]}, *b[5] = {&B->P[i], &B->M[i], &B->V[i], &B->C[i], &B->G[i]};
    for (int k = 0; k < 5; k++) {
      void *x = malloc(a[k]->bytes), *y = malloc(b[k]->bytes);
      assert_non_null(x);
      assert_non_null(y);
      if (dev) {
        ot_test_download(x, a[k]->d, a[k]->bytes);
        ot_test_download(y, b[k]->d, b[k]->bytes);
      } else {
        memcpy(x, a[k]->h, a[k]->bytes);
        memcpy(y, b[k]->h, b[k]->bytes);
      }
      if (a[k]->bytes != b[k]->bytes || memcmp(x, y, a[k]->bytes) != 0)
        fail_msg("%s: tensor %d (length %lld) operand %d differs from the per-tensor update", what, i,
                 (long long)awm_len(i), k);
      free(x);
      free(y);
    }
  }
}

static void test_adamw_multi(void **st) {
  (void)st;
  awm_set *A = calloc(1, sizeof *A), *B = calloc(1, sizeof *B);
  assert_non_null(A);
  assert_non_null(B);
  awm_make(A, 100);
  awm_make(B, 100);
  const int dev = ot_test_dev();
  for (int t = 1; t <= 3; t++) {
    const ot_kadamw h = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t, t == 2 ? 0.25f : 1.0f};
    if (ot_k_adamw_multi(dev, AWM_N, A->pd, A->gd, A->md, A->vd, A->cd, h) != OT_OK)
      fail_msg("adamw_multi: %s", ot_last_error());
    for (int i = 0; i < AWM_N; i++)
      assert_int_equal(ot_k_adamw(dev, B->pd[i], B->gd[i], B->md[i], B->vd[i], B->cd[i], h), OT_OK);
    awm_same("adamw_multi on the device", A, B, 1);
    assert_int_equal(ot_ref_adamw_multi(AWM_N, A->p, A->g, A->m, A->v, A->c, h), OT_OK);
    for (int i = 0; i < AWM_N; i++) assert_int_equal(ot_ref_adamw(B->p[i], B->g[i], B->m[i], B->v[i], B->c[i], h), OT_OK);
    awm_same("ot_ref_adamw_multi", A, B, 0);
  }
  /* one bad tensor fails the call before anything is written */
  ot_kview bad[AWM_N];
  memcpy(bad, A->md, sizeof bad);
  bad[AWM_N - 1] = ot_kview_1d(A->M[0].d, OT_F32, 2);
  const ot_kadamw h = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 4, 1.0f};
  assert_int_equal(ot_k_adamw_multi(dev, AWM_N, A->pd, A->gd, bad, A->vd, A->cd, h), OT_ERR_SHAPE);
  awm_same("adamw_multi after a refused call", A, B, 1);
  assert_int_equal(ot_k_adamw_multi(dev, 0, NULL, NULL, NULL, NULL, NULL, h), OT_OK);
  assert_int_equal(ot_k_adamw_multi(dev, 2, NULL, NULL, NULL, NULL, NULL, h), OT_ERR_INVALID_ARG);
  awm_free(A);
  awm_free(B);
  free(A);
  free(B);
}

static void check_sgd(ot_ksgd h, int with_buf, uint64_t seed) {
  ot_tbuf P = ot_tbuf_rand(OT_F32, N, seed, -1, 1), B = ot_tbuf_rand(OT_F32, N, seed + 1, 0, 1),
          C = ot_tbuf_rand(OT_F16, N, seed + 2, 0, 1);
  memset(B.h, 0, sizeof(float) * N);
  ot_tbuf_push(&B);
  double p[N], b[N] = {0};
  for (int i = 0; i < N; i++) p[i] = ((float *)P.h)[i];
  ot_kview pv = ot_tview(&P, 0, 1, (int64_t[]){N}, NULL), bv = with_buf ? ot_tview(&B, 0, 1, (int64_t[]){N}, NULL) : ot_kview_none(),
           cv = ot_tview(&C, 0, 1, (int64_t[]){N}, NULL);
  for (int t = 1; t <= STEPS; t++) {
    ot_tbuf G = ot_tbuf_rand(OT_F32, N, seed + 10 + t, -1, 1);
    ot_kview gv = ot_tview(&G, 0, 1, (int64_t[]){N}, NULL);
    for (int i = 0; i < N; i++) {
      double g = ((float *)G.h)[i] * (double)h.grad_scale + (double)h.weight_decay * p[i];
      if (with_buf && h.momentum != 0) {
        b[i] = t == 1 ? g : h.momentum * b[i] + g; /* PyTorch: the first step clones g */
        g = h.nesterov ? g + h.momentum * b[i] : b[i];
      }
      p[i] -= h.lr * g;
    }
    assert_int_equal(ot_ref_sgd(pv, gv, bv, cv, h), OT_OK);
    for (int i = 0; i < N; i++) near("sgd p", ((float *)P.h)[i], p[i], 1e-5);
    assert_int_equal(ot_k_sgd(ot_test_dev(), ot_tview_dev(pv, &P), ot_tview_dev(gv, &G),
                              with_buf ? ot_tview_dev(bv, &B) : bv, ot_tview_dev(cv, &C), h),
                     OT_OK);
    ot_tcheck("sgd p", &P, pv, 1e-6);
    ot_tcheck("sgd copy", &C, cv, 2e-3);
    if (with_buf) ot_tcheck("sgd buf", &B, bv, 1e-6);
    ot_test_download(P.h, P.d, P.bytes);
    ot_test_download(B.h, B.d, B.bytes);
    ot_tbuf_free(&G);
  }
  ot_tbuf_free(&P);
  ot_tbuf_free(&B);
  ot_tbuf_free(&C);
}

static void test_sgd(void **st) {
  (void)st;
  check_sgd((ot_ksgd){0.1f, 0.0f, 0.0f, 0, 1.0f}, 0, 30);
  check_sgd((ot_ksgd){0.05f, 0.9f, 0.01f, 0, 1.0f}, 1, 40);
  check_sgd((ot_ksgd){0.05f, 0.9f, 0.0f, 1, 0.25f}, 1, 50);
}

static void test_grad_stats(void **st) {
  (void)st;
  const int64_t n = 1000;
  ot_tbuf G = ot_tbuf_rand(OT_F32, n, 60, -2, 2), S = ot_tbuf_rand(OT_F32, 2, 61, 0, 1);
  ((float *)S.h)[0] = 1.5f; /* accumulates onto what is there */
  ((float *)S.h)[1] = 0.0f;
  ot_tbuf_push(&S);
  ot_kview g = ot_tview(&G, 0, 1, &n, NULL), s = ot_tview(&S, 0, 1, (int64_t[]){2}, NULL);
  double want = 1.5;
  for (int64_t i = 0; i < n; i++) want += (double)((float *)G.h)[i] * ((float *)G.h)[i];
  assert_int_equal(ot_ref_grad_stats(s, g), OT_OK);
  near("grad_stats sum of squares", ((float *)S.h)[0], want, 1e-6);
  assert_true(((float *)S.h)[1] == 0.0f);
  assert_int_equal(ot_k_grad_stats(ot_test_dev(), ot_tview_dev(s, &S), ot_tview_dev(g, &G)), OT_OK);
  ot_tcheck("grad_stats", &S, s, 1e-6);
  /* an Inf and a NaN are counted, and kept out of the sum */
  ((float *)G.h)[3] = INFINITY;
  ((float *)G.h)[700] = NAN;
  ot_tbuf_push(&G);
  ot_test_download(S.h, S.d, S.bytes);
  assert_int_equal(ot_ref_grad_stats(s, g), OT_OK);
  assert_true(((float *)S.h)[1] == 2.0f && isfinite(((float *)S.h)[0]));
  assert_int_equal(ot_k_grad_stats(ot_test_dev(), ot_tview_dev(s, &S), ot_tview_dev(g, &G)), OT_OK);
  ot_tcheck("grad_stats non-finite", &S, s, 1e-6);
  assert_int_equal(ot_k_grad_stats(ot_test_dev(), ot_kview_1d(S.d, OT_F32, 1), ot_tview_dev(g, &G)), OT_ERR_SHAPE);
  ot_tbuf_free(&G);
  ot_tbuf_free(&S);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_adamw), cmocka_unit_test(test_adamw_multi),
                                     cmocka_unit_test(test_sgd),
                                     cmocka_unit_test(test_grad_stats)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
