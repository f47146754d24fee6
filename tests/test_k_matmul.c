/* test_k_matmul.c — ot_k_matmul against ot_ref_matmul.
 *
 * Tolerance (normalised error): f32 output 2e-5 (fp32 vs double accumulation
 * over K <= 130: about K * 2^-24 of the sum of |a*b|, and more of the result
 * where its terms cancel; one output of the host GEMV's 16 partial sums,
 * q8b, K = 96, N = 1, came to 1.13e-5 of its value); f16 output 2e-3 and bf16 output 1e-2 (one final rounding,
 * 2^-11 / 2^-8 relative, which flips where kernel and reference differ in the
 * last f32 bit). Inputs in f16/bf16/q8b are the same bytes for both sides, so
 * they add no error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/gemv_host.h"
#include "ktest.h"

typedef struct mm_case {
  int64_t batch, M, N, K;
  ot_dtype at, bt, ct;
  int trans_b;     /* B stored [N, K] (HF Linear) */
  int a_t;         /* A stored [K, M] and passed as a transposed view */
  int64_t c_pad;   /* extra elements after each row of C (strided rows) */
  int b_bcast;     /* B is 2-D, shared by every batch */
  int accumulate;
} mm_case;

static double tol_for(ot_dtype ct) { return ct == OT_F32 ? 2e-5 : ct == OT_F16 ? 2e-3 : 1e-2; }

static void run_case_tol(mm_case k, uint64_t seed, double tol) {
  int64_t bb = k.b_bcast ? 1 : k.batch;
  ot_tbuf A = ot_tbuf_rand(k.at, k.batch * k.M * k.K, seed, -1, 1);
  ot_tbuf B = ot_tbuf_rand(k.bt, bb * k.K * k.N, seed + 1, -1, 1);
  ot_tbuf C = ot_tbuf_rand(k.ct, k.batch * k.M * (k.N + k.c_pad) + 3, seed + 2, -1, 1);

  ot_kview a = k.a_t ? ot_kview_t(ot_tview(&A, 0, 3, (int64_t[]){k.batch, k.K, k.M}, NULL))
                     : ot_tview(&A, 0, 3, (int64_t[]){k.batch, k.M, k.K}, NULL);
  ot_kview b = k.trans_b ? ot_tview(&B, 0, 2, (int64_t[]){k.N, k.K}, NULL) : ot_tview(&B, 0, 2, (int64_t[]){k.K, k.N}, NULL);
  if (!k.b_bcast)
    b = k.trans_b ? ot_tview(&B, 0, 3, (int64_t[]){k.batch, k.N, k.K}, NULL)
                  : ot_tview(&B, 0, 3, (int64_t[]){k.batch, k.K, k.N}, NULL);
  int64_t ld = k.N + k.c_pad;
  ot_kview c = ot_tview(&C, 0, 3, (int64_t[]){k.batch, k.M, k.N}, (int64_t[]){k.M * ld, ld, 1});

  assert_int_equal(ot_ref_matmul(c, a, b, k.trans_b, k.accumulate), OT_OK);
  ot_status s = ot_k_matmul(ot_test_dev(), ot_tview_dev(c, &C), ot_tview_dev(a, &A), ot_tview_dev(b, &B),
                            k.trans_b, k.accumulate);
  if (s != OT_OK) fail_msg("ot_k_matmul: %s", ot_last_error());

  char what[160];
  snprintf(what, sizeof what, "matmul b%lld M%lld N%lld K%lld %s@%s%s->%s%s%s%s", (long long)k.batch,
           (long long)k.M, (long long)k.N, (long long)k.K, ot_dtype_name(k.at), ot_dtype_name(k.bt),
           k.trans_b ? "^T" : "", ot_dtype_name(k.ct), k.a_t ? " a^T" : "", k.c_pad ? " strided-c" : "",
           k.accumulate ? " +=" : "");
  ot_tcheck(what, &C, c, tol > 0 ? tol : tol_for(k.ct));
  ot_tbuf_free(&A);
  ot_tbuf_free(&B);
  ot_tbuf_free(&C);
}

static void run_case(mm_case k, uint64_t seed) { run_case_tol(k, seed, 0); }

/* Decode-length rows (K in the thousands) on every weight dtype, M = 1 to
 * 64 (batched decode): the GPU's GEMV issues four 16-byte loads per lane per step for M = 1
 * and finishes the rest one at a time (K / 8 = 129, 257, 512 vectors of bf16
 * cover an unrolled step, a remainder, none), so both parts are checked.
 * q8b and q4b at K = 4096 are whole 144-byte groups, which the GPU reads 16
 * bytes a lane with OMPTENSOR_GEMV_QG=1 (37 rows: a last q4b unit of one).
 * fp32 accumulation over K ~ 4096 against double: 1e-4. */
static void test_long_rows(void **st) {
  (void)st;
  static const int64_t ks[] = {1032, 2056, 4096, 2052};
  /* the GEMV's rows of a go in register chunks of 8 up to 64 (a batch of
   * sequences decoding): one chunk, one and a remainder, two and a
   * remainder, eight full ones */
  static const int64_t ms[] = {1, 2, 9, 20, 64};
  static const ot_dtype wt[] = {OT_BF16, OT_F16, OT_F32, OT_Q8B, OT_Q4B};
  uint64_t seed = 900;
  for (int w = 0; w < 5; w++)
    for (int i = 0; i < 4; i++) {
      int64_t K = ks[i];
      if (wt[w] == OT_Q8B || wt[w] == OT_Q4B) K = (K + 31) / 32 * 32; /* whole blocks; 4096 is whole q8b/q4b groups
                                                                         (kernels/qgroup.h) */
      else if (wt[w] != OT_F32 && K % 8) continue;
      for (size_t im = 0; im < sizeof ms / sizeof *ms; im++)
        for (int acc = 0; acc < 2; acc++)
          run_case_tol((mm_case){1, ms[im], 37, K, OT_F32, wt[w], OT_F32, 1, 0, 0, 1, acc}, seed++, 1e-4);
    }
}

static const int64_t shapes[][3] = {{1, 1, 1}, {1, 17, 33}, {3, 5, 7}, {17, 33, 64}, {65, 70, 130}, {1, 257, 96}};

static void test_f32_shapes(void **st) {
  (void)st;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int tb = 0; tb < 2; tb++) {
      mm_case k = {1, shapes[i][0], shapes[i][1], shapes[i][2], OT_F32, OT_F32, OT_F32, tb, 0, 0, 1, 0};
      run_case(k, 100 + i * 2 + (uint64_t)tb);
    }
}

static void test_dtypes(void **st) {
  (void)st;
  const ot_dtype in[] = {OT_F32, OT_F16, OT_BF16};
  const ot_dtype out[] = {OT_F32, OT_F16, OT_BF16};
  uint64_t seed = 500;
  for (int ia = 0; ia < 3; ia++)
    for (int ib = 0; ib < 3; ib++)
      for (int ic = 0; ic < 3; ic++) {
        mm_case gemm = {1, 19, 21, 35, in[ia], in[ib], out[ic], ic & 1, 0, 0, 1, 0};
        run_case(gemm, seed++);
        mm_case mv = {1, 1, 45, 37, in[ia], in[ib], out[ic], (ic + 1) & 1, 0, 0, 1, 0};
        run_case(mv, seed++);
      }
}

static void test_q8b(void **st) {
  (void)st;
  uint64_t seed = 900;
  /* decode (M == 1) with the HF weight layout, the coalesced row path */
  for (int64_t n = 1; n <= 33; n += 16) run_case((mm_case){1, 1, n, 96, OT_F32, OT_Q8B, OT_F32, 1, 0, 0, 1, 0}, seed++);
  run_case((mm_case){1, 1, 17, 64, OT_BF16, OT_Q8B, OT_BF16, 1, 0, 0, 1, 0}, seed++);
  /* prefill GEMM with q8b weights, both layouts */
  run_case((mm_case){1, 9, 33, 64, OT_F32, OT_Q8B, OT_F32, 1, 0, 0, 1, 0}, seed++);
  run_case((mm_case){1, 9, 64, 33, OT_F32, OT_Q8B, OT_F32, 0, 0, 0, 1, 0}, seed++);
  run_case((mm_case){1, 1, 64, 33, OT_F32, OT_Q8B, OT_F32, 0, 0, 0, 1, 0}, seed++);
  /* the same with q4b (GGUF Q4_0 blocks): decode rows, and the GEMM both ways */
  for (int64_t n = 1; n <= 33; n += 16) run_case((mm_case){1, 1, n, 96, OT_F32, OT_Q4B, OT_F32, 1, 0, 0, 1, 0}, seed++);
  run_case((mm_case){1, 5, 17, 64, OT_F32, OT_Q4B, OT_F32, 1, 0, 0, 1, 0}, seed++);
  run_case((mm_case){1, 9, 33, 64, OT_F32, OT_Q4B, OT_F32, 1, 0, 0, 1, 0}, seed++);
  run_case((mm_case){1, 9, 64, 33, OT_F32, OT_Q4B, OT_F32, 0, 0, 0, 1, 0}, seed++);
  /* and the K-quants (GGUF Q4_K, Q6_K super-blocks of 256) */
  for (int k = 0; k < 2; k++) {
    const ot_dtype kt = k ? OT_Q6K : OT_Q4K;
    for (int64_t n = 1; n <= 33; n += 16) run_case((mm_case){1, 1, n, 512, OT_F32, kt, OT_F32, 1, 0, 0, 1, 0}, seed++);
    run_case((mm_case){1, 5, 17, 256, OT_F32, kt, OT_F32, 1, 0, 0, 1, 0}, seed++);
    run_case((mm_case){1, 9, 33, 256, OT_F32, kt, OT_F32, 1, 0, 0, 1, 0}, seed++);
    run_case((mm_case){1, 9, 256, 33, OT_F32, kt, OT_F32, 0, 0, 0, 1, 0}, seed++);
  }
}

/* The host GEMV (gemv_host.h) gives the same bits with every instruction
 * set the CPU has (baseline, avx2+fma, avx512), for every weight dtype and
 * row count, K with and without a tail. */
static void test_host_isas(void **st) {
  (void)st;
  static const ot_dtype dts[7] = {OT_F32, OT_BF16, OT_F16, OT_Q8B, OT_Q4B, OT_Q4K, OT_Q6K};
  const int64_t N = 37;
  for (int d = 0; d < 7; d++)
    for (int64_t M = 1; M <= 6; M += 5)
      for (int64_t K = 64; K <= 512; K += K < 83 ? 19 : 512 - 83) { /* 64, 83, 512 */
        if (ot_dtype_block(dts[d]) && K % ot_dtype_block(dts[d])) continue;
        ot_tbuf A = ot_tbuf_rand(OT_F32, M * K, 77 + (uint64_t)K, -1, 1);
        ot_tbuf B = ot_tbuf_rand(dts[d], N * K, 78 + (uint64_t)d, -1, 1);
        float *out[3] = {NULL, NULL, NULL};
        for (int isa = 0; isa < 3; isa++) {
          if (ot_kgemv_host_use_isa(isa) != 0) continue;
          out[isa] = calloc((size_t)(M * N), sizeof(float));
          assert_non_null(out[isa]);
          ot_kgemv_host(out[isa], N, A.h, K, B.h, dts[d], K, M, N, K, 0);
          if (isa && out[0] && memcmp(out[isa], out[0], (size_t)(M * N) * sizeof(float)))
            fail_msg("host GEMV %s M=%lld K=%lld: instruction set %d differs from the baseline",
                     ot_dtype_name(dts[d]), (long long)M, (long long)K, isa);
        }
        ot_kgemv_host_use_isa(-1);
        for (int isa = 0; isa < 3; isa++) free(out[isa]);
        ot_tbuf_free(&A);
        ot_tbuf_free(&B);
      }
}

static void test_batched_strided(void **st) {
  (void)st;
  uint64_t seed = 1200;
  for (int tb = 0; tb < 2; tb++)
    for (int bc = 0; bc < 2; bc++) {
      run_case((mm_case){3, 17, 9, 33, OT_F32, OT_F32, OT_F32, tb, 1, 5, bc, 0}, seed++);
      run_case((mm_case){3, 1, 9, 33, OT_F32, OT_BF16, OT_F32, tb, 0, 3, bc, 0}, seed++);
      run_case((mm_case){2, 66, 3, 1, OT_F16, OT_F32, OT_F32, tb, 1, 1, bc, 1}, seed++);
    }
  run_case((mm_case){2, 5, 7, 9, OT_F32, OT_F32, OT_BF16, 1, 0, 2, 0, 1}, seed++);
  run_case((mm_case){2, 1, 7, 9, OT_F32, OT_F32, OT_F32, 1, 0, 2, 0, 1}, seed++);
}

static void test_errors(void **st) {
  (void)st;
  float x[64] = {0};
  int dev = ot_test_dev();
  ot_kview a = ot_kview_2d(x, OT_F32, 2, 3), b = ot_kview_2d(x, OT_F32, 4, 5), c = ot_kview_2d(x, OT_F32, 2, 5);
  assert_int_equal(ot_k_matmul(dev, c, a, b, 0, 0), OT_ERR_SHAPE);
  assert_non_null(strstr(ot_last_error(), "matmul"));
  assert_int_equal(ot_ref_matmul(c, a, b, 0, 0), OT_ERR_SHAPE);
  ot_kview ai = ot_kview_2d(x, OT_I32, 2, 4);
  assert_int_equal(ot_k_matmul(dev, c, ai, b, 0, 0), OT_ERR_DTYPE);
  ot_kview q = ot_kview_2d(x, OT_Q8B, 5, 4); /* last dim not whole blocks */
  assert_int_equal(ot_k_matmul(dev, c, ot_kview_2d(x, OT_F32, 2, 4), q, 1, 0), OT_ERR_SHAPE);
  ot_kview none = ot_kview_2d(NULL, OT_F32, 2, 4);
  assert_int_equal(ot_k_matmul(dev, c, none, b, 0, 0), OT_ERR_INVALID_ARG);
  /* empty problem: nothing to do, no pointer needed */
  ot_kview e = ot_kview_2d(NULL, OT_F32, 0, 5);
  assert_int_equal(ot_k_matmul(dev, e, ot_kview_2d(NULL, OT_F32, 0, 4), b, 0, 0), OT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_f32_shapes), cmocka_unit_test(test_dtypes), cmocka_unit_test(test_q8b), cmocka_unit_test(test_host_isas),
      cmocka_unit_test(test_long_rows),
      cmocka_unit_test(test_batched_strided), cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
