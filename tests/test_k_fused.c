/* test_k_fused.c — the fused decode kernels against the composition of the
 * separate references (the fused kernels' definition). On a GPU build the
 * fast paths run (GEMV with 16-byte loads, fused SwiGLU); elsewhere the
 * fallbacks, so both are covered by the suite run on both. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
/* cmocka after its prerequisites */
#include <cmocka.h>

#include "kernels/kernels.h"
#include "ktest.h"

static double tol(ot_dtype t) { return t == OT_F32 ? 1e-5 : t == OT_F16 ? 2e-3 : 1e-2; }

/* c[i] [M, N_i] = a [M, K] @ w[i]^T, w[i] [N_i, K] of dtype wt */
static void multi(int64_t M, int64_t K, const int64_t *N, int n, ot_dtype wt, uint64_t seed) {
  ot_tbuf A = ot_tbuf_rand(OT_F32, M * K, seed, -1, 1), W[3], C[3];
  ot_kview a = ot_tview(&A, 0, 2, (int64_t[]){M, K}, NULL), c[3], w[3], cd[3], wd[3];
  for (int i = 0; i < n; i++) {
    W[i] = ot_tbuf_rand(wt, N[i] * K, seed + 1 + i, -1, 1);
    C[i] = ot_tbuf_rand(OT_F32, M * N[i], seed + 5 + i, -1, 1);
    w[i] = ot_tview(&W[i], 0, 2, (int64_t[]){N[i], K}, NULL);
    c[i] = ot_tview(&C[i], 0, 2, (int64_t[]){M, N[i]}, NULL);
    wd[i] = ot_tview_dev(w[i], &W[i]);
    cd[i] = ot_tview_dev(c[i], &C[i]);
  }
  assert_int_equal(ot_ref_matmul_multi(n, c, a, w), OT_OK);
  if (ot_k_matmul_multi(ot_test_dev(), n, cd, ot_tview_dev(a, &A), wd) != OT_OK) fail_msg("%s", ot_last_error());
  for (int i = 0; i < n; i++) {
    char what[96];
    snprintf(what, sizeof what, "matmul_multi %d/%d M=%lld K=%lld N=%lld %s", i, n, (long long)M, (long long)K,
             (long long)N[i], ot_dtype_name(wt));
    ot_tcheck(what, &C[i], c[i], tol(wt) * 10);
    ot_tbuf_free(&W[i]);
    ot_tbuf_free(&C[i]);
  }
  ot_tbuf_free(&A);
}

static void test_matmul_multi(void **st) {
  (void)st;
  const int64_t N3[3] = {64, 32, 32}, N1[1] = {96};
  static const ot_dtype dts[] = {OT_F32, OT_BF16, OT_F16, OT_Q8B};
  uint64_t seed = 1;
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    multi(1, 256, N3, 3, dts[d], seed += 10);
    multi(3, 128, N3, 3, dts[d], seed += 10);
    multi(1, 64, N1, 1, dts[d], seed += 10);
    if (dts[d] != OT_Q8B) multi(2, 40, N3, 2, dts[d], seed += 10); /* K not a multiple of the vector width */
  }
  ot_kview none[1] = {ot_kview_none()};
  assert_int_equal(ot_k_matmul_multi(ot_test_dev(), 4, none, none[0], none), OT_ERR_INVALID_ARG);
}

static void swiglu(int64_t M, int64_t K, int64_t N, ot_dtype wt, uint64_t seed) {
  ot_tbuf A = ot_tbuf_rand(OT_F32, M * K, seed, -1, 1), G = ot_tbuf_rand(wt, N * K, seed + 1, -1, 1),
          U = ot_tbuf_rand(wt, N * K, seed + 2, -1, 1), Y = ot_tbuf_rand(OT_F32, M * N, seed + 3, -1, 1),
          S = ot_tbuf_rand(OT_F32, M * N, seed + 4, -1, 1);
  ot_kview a = ot_tview(&A, 0, 2, (int64_t[]){M, K}, NULL), g = ot_tview(&G, 0, 2, (int64_t[]){N, K}, NULL),
           u = ot_tview(&U, 0, 2, (int64_t[]){N, K}, NULL), y = ot_tview(&Y, 0, 2, (int64_t[]){M, N}, NULL),
           s = ot_tview(&S, 0, 2, (int64_t[]){M, N}, NULL);
  assert_int_equal(ot_ref_matmul_swiglu(y, s, a, g, u), OT_OK);
  if (ot_k_matmul_swiglu(ot_test_dev(), ot_tview_dev(y, &Y), ot_tview_dev(s, &S), ot_tview_dev(a, &A),
                         ot_tview_dev(g, &G), ot_tview_dev(u, &U)) != OT_OK)
    fail_msg("%s", ot_last_error());
  char what[96];
  snprintf(what, sizeof what, "matmul_swiglu M=%lld K=%lld N=%lld %s", (long long)M, (long long)K, (long long)N,
           ot_dtype_name(wt));
  ot_tcheck(what, &Y, y, tol(wt) * 10);
  ot_tbuf_free(&A);
  ot_tbuf_free(&G);
  ot_tbuf_free(&U);
  ot_tbuf_free(&Y);
  ot_tbuf_free(&S);
}

static void test_matmul_swiglu(void **st) {
  (void)st;
  swiglu(1, 256, 96, OT_BF16, 3);
  swiglu(1, 128, 40, OT_F32, 4);
  swiglu(4, 64, 33, OT_F16, 5);
  swiglu(1, 64, 17, OT_Q8B, 6);
}

/* q [T, H, d], k, v [T, KV, d], caches [S, KV, d]: rope + append at pos */
static void rope_append(int64_t T, int64_t H, int64_t KV, int64_t d, int64_t S, int64_t pos, uint64_t seed) {
  ot_tbuf Q = ot_tbuf_rand(OT_F32, T * H * d, seed, -1, 1), K = ot_tbuf_rand(OT_F32, T * KV * d, seed + 1, -1, 1),
          V = ot_tbuf_rand(OT_F32, T * KV * d, seed + 2, -1, 1), KC = ot_tbuf_rand(OT_F32, S * KV * d, seed + 3, -1, 1),
          VC = ot_tbuf_rand(OT_F32, S * KV * d, seed + 4, -1, 1);
  ot_kview q = ot_tview(&Q, 0, 3, (int64_t[]){T, H, d}, NULL), k = ot_tview(&K, 0, 3, (int64_t[]){T, KV, d}, NULL),
           v = ot_tview(&V, 0, 3, (int64_t[]){T, KV, d}, NULL), kc = ot_tview(&KC, 0, 3, (int64_t[]){S, KV, d}, NULL),
           vc = ot_tview(&VC, 0, 3, (int64_t[]){S, KV, d}, NULL);
  assert_int_equal(ot_ref_rope_append(q, k, v, kc, vc, pos, ot_rope_plain(10000.0f)), OT_OK);
  if (ot_k_rope_append(ot_test_dev(), ot_tview_dev(q, &Q), ot_tview_dev(k, &K), ot_tview_dev(v, &V),
                       ot_tview_dev(kc, &KC), ot_tview_dev(vc, &VC), pos, ot_rope_plain(10000.0f)) != OT_OK)
    fail_msg("%s", ot_last_error());
  ot_tcheck("rope_append q", &Q, q, 1e-5);
  ot_tcheck("rope_append k", &K, k, 1e-5);
  ot_tcheck("rope_append k_cache", &KC, kc, 1e-5); /* rows outside [pos, pos+T) must be untouched: compared too */
  ot_tcheck("rope_append v_cache", &VC, vc, 1e-6);
  ot_tbuf_free(&Q);
  ot_tbuf_free(&K);
  ot_tbuf_free(&V);
  ot_tbuf_free(&KC);
  ot_tbuf_free(&VC);
}

static void test_rope_append(void **st) {
  (void)st;
  rope_append(1, 8, 2, 16, 20, 7, 11);
  rope_append(5, 3, 1, 8, 9, 0, 12);
  rope_append(4, 4, 4, 128, 64, 60, 13);
  ot_tbuf Q = ot_tbuf_rand(OT_F32, 16, 1, -1, 1);
  ot_kview q = ot_tview(&Q, 0, 3, (int64_t[]){1, 1, 16}, NULL);
  assert_int_equal(ot_k_rope_append(ot_test_dev(), q, q, q, q, q, 1, ot_rope_plain(1e4f)), OT_ERR_SHAPE); /* cache of 1 row, pos 1 */
  ot_tbuf_free(&Q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_multi),
      cmocka_unit_test(test_matmul_swiglu),
      cmocka_unit_test(test_rope_append),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
