/* test_k_matmul_bwd.c — matmul and bias backward.
 *
 * The reference's da and db (db accumulates: its change is compared) against
 * central finite differences of sum(dc * (a @ op(b))) in double (h = 1e-3;
 * the loss is bilinear, so the differences are exact up to round-off;
 * tolerance 1e-5 normalised), then the kernel against the reference
 * (tolerance 1e-5: both accumulate in a different order). */
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

typedef struct mm_ctx {
  const double *a, *b; /* one of them is the x being perturbed */
  const float *dc;
  int wrt_b, trans_b;
  int64_t batch, ba, bb, M, N, K;
} mm_ctx;

static double mm_loss(const double *x, void *vc) {
  const mm_ctx *c = vc;
  const double *a = c->wrt_b ? c->a : x, *b = c->wrt_b ? x : c->b;
  double L = 0;
  for (int64_t i = 0; i < c->batch; i++) {
    const double *ai = a + (c->ba > 1 ? i : 0) * c->M * c->K, *bi = b + (c->bb > 1 ? i : 0) * c->K * c->N;
    for (int64_t m = 0; m < c->M; m++)
      for (int64_t n = 0; n < c->N; n++) {
        double s = 0;
        for (int64_t k = 0; k < c->K; k++) s += ai[m * c->K + k] * (c->trans_b ? bi[n * c->K + k] : bi[k * c->N + n]);
        L += c->dc[(i * c->M + m) * c->N + n] * s;
      }
  }
  return L;
}

static ot_kview view3(ot_tbuf *t, int64_t b, int64_t r, int64_t c, int three) {
  return three ? ot_tview(t, 0, 3, (int64_t[]){b, r, c}, NULL) : ot_tview(t, 0, 2, (int64_t[]){r, c}, NULL);
}

/* batch 0: plain 2-D; ba/bb: batch of a / b (1 = 2-D operand broadcast). */
static void check(int64_t batch, int64_t ba, int64_t bb, int64_t M, int64_t N, int64_t K, int trans_b, uint64_t seed) {
  const int three = batch > 0;
  if (!three) batch = ba = bb = 1;
  const int64_t na = ba * M * K, nbv = bb * K * N, nc = batch * M * N;
  ot_tbuf A = ot_tbuf_rand(OT_F32, na, seed, -1, 1), B = ot_tbuf_rand(OT_F32, nbv, seed + 1, -1, 1),
          DC = ot_tbuf_rand(OT_F32, nc, seed + 2, -1, 1), DA = ot_tbuf_rand(OT_F32, na, seed + 3, -1, 1),
          DB = ot_tbuf_rand(OT_F32, nbv, seed + 4, -1, 1);
  ot_kview a = view3(&A, ba, M, K, three && ba > 1), da = view3(&DA, ba, M, K, three && ba > 1),
           b = trans_b ? view3(&B, bb, N, K, three && bb > 1) : view3(&B, bb, K, N, three && bb > 1),
           db = trans_b ? view3(&DB, bb, N, K, three && bb > 1) : view3(&DB, bb, K, N, three && bb > 1),
           dc = view3(&DC, batch, M, N, three);
  float *db0 = malloc(sizeof(float) * (size_t)nbv);
  assert_non_null(db0);
  memcpy(db0, DB.h, sizeof(float) * (size_t)nbv);
  assert_int_equal(ot_ref_matmul_backward(da, db, dc, a, b, trans_b), OT_OK);
  char what[128];
  snprintf(what, sizeof what, "matmul_backward batch %lld (a %lld, b %lld) M%lld N%lld K%lld%s", (long long)batch,
           (long long)ba, (long long)bb, (long long)M, (long long)N, (long long)K, trans_b ? " trans_b" : "");
  double *ad = ot_tfd_dup(A.h, na), *bd = ot_tfd_dup(B.h, nbv);
  for (int64_t i = 0; i < nbv; i++) db0[i] = ((float *)DB.h)[i] - db0[i]; /* the accumulated part */
  mm_ctx c = {ad, bd, DC.h, 0, trans_b, batch, ba, bb, M, N, K};
  ot_tfd_check(what, mm_loss, &c, ad, na, DA.h, 1, 1e-3, 1e-5);
  c.wrt_b = 1;
  ot_tfd_check(what, mm_loss, &c, bd, nbv, db0, 1, 1e-3, 1e-5);
  ot_status s = ot_k_matmul_backward(ot_test_dev(), ot_tview_dev(da, &DA), ot_tview_dev(db, &DB),
                                     ot_tview_dev(dc, &DC), ot_tview_dev(a, &A), ot_tview_dev(b, &B), trans_b);
  if (s != OT_OK) fail_msg("%s: %s", what, ot_last_error());
  ot_tcheck(what, &DA, da, 1e-5);
  ot_tcheck(what, &DB, db, 1e-5);
  free(ad);
  free(bd);
  free(db0);
  ot_tbuf_free(&A);
  ot_tbuf_free(&B);
  ot_tbuf_free(&DC);
  ot_tbuf_free(&DA);
  ot_tbuf_free(&DB);
}

static void test_matmul_backward(void **st) {
  (void)st;
  check(0, 1, 1, 1, 1, 1, 0, 1);
  check(0, 1, 1, 5, 7, 3, 0, 2);
  check(0, 1, 1, 6, 9, 11, 1, 3);   /* Linear: y = x @ W^T */
  check(0, 1, 1, 1, 13, 8, 1, 4);   /* one row (matrix-vector forward) */
  check(3, 3, 1, 4, 6, 5, 1, 5);    /* batched activations, shared weight: db sums the batch */
  check(2, 2, 2, 3, 5, 4, 0, 6);    /* batched both (attention-like) */
  check(2, 2, 1, 7, 3, 65, 0, 7);
}

static void test_bias_backward(void **st) {
  (void)st;
  const int64_t R = 2, S = 5, N = 7;
  ot_tbuf G = ot_tbuf_rand(OT_F32, R * S * N, 11, -1, 1), D = ot_tbuf_rand(OT_F32, N, 12, -1, 1);
  ot_kview dy = ot_tview(&G, 0, 3, (int64_t[]){R, S, N}, NULL), db = ot_tview(&D, 0, 1, (int64_t[]){N}, NULL);
  float want[7];
  for (int64_t j = 0; j < N; j++) {
    double s = ((float *)D.h)[j];
    for (int64_t r = 0; r < R * S; r++) s += ((float *)G.h)[r * N + j];
    want[j] = (float)s;
  }
  assert_int_equal(ot_ref_bias_backward(db, dy), OT_OK);
  for (int64_t j = 0; j < N; j++) assert_true(fabsf(((float *)D.h)[j] - want[j]) <= 1e-6f * (1 + fabsf(want[j])));
  assert_int_equal(ot_k_bias_backward(ot_test_dev(), ot_tview_dev(db, &D), ot_tview_dev(dy, &G)), OT_OK);
  ot_tcheck("bias_backward", &D, db, 1e-6);
  assert_int_equal(ot_k_bias_backward(ot_test_dev(), ot_kview_1d(D.d, OT_F32, 3), ot_tview_dev(dy, &G)), OT_ERR_SHAPE);
  ot_tbuf_free(&G);
  ot_tbuf_free(&D);
}

/* Shapes for the GPU column-sum kernel: rows not a multiple of its row
 * groups, widths odd or GPT-2's, f32/bf16/f16 dy, f32/bf16 db, rows with a
 * padded stride (evenly spaced: the GPU kernel) and [B, T, n] with padding
 * between batches (not evenly spaced: the portable kernel). Against the
 * reference: 1e-5 (f32 db: float sums in another order), 1e-2 (bf16 db). */
static void check_bias(ot_dtype gdt, ot_dtype bdt, int64_t B, int64_t T, int64_t n, int64_t pad, int64_t bpad,
                       uint64_t seed) {
  const int64_t ld = n + pad, bs = T * ld + bpad;
  ot_tbuf G = ot_tbuf_rand(gdt, B * bs, seed, -1, 1), D = ot_tbuf_rand(bdt, n, seed + 1, -1, 1);
  ot_kview dy = ot_tview(&G, 0, 3, (int64_t[]){B, T, n}, (int64_t[]){bs, ld, 1}),
           db = ot_tview(&D, 0, 1, (int64_t[]){n}, NULL);
  assert_int_equal(ot_ref_bias_backward(db, dy), OT_OK);
  assert_int_equal(ot_k_bias_backward(ot_test_dev(), ot_tview_dev(db, &D), ot_tview_dev(dy, &G)), OT_OK);
  char what[96];
  snprintf(what, sizeof what, "bias_backward [%lld, %lld, %lld] pad %lld/%lld %s -> %s", (long long)B, (long long)T,
           (long long)n, (long long)pad, (long long)bpad, ot_dtype_name(gdt), ot_dtype_name(bdt));
  ot_tcheck(what, &D, db, bdt == OT_F32 ? 1e-5 : 1e-2);
  ot_tbuf_free(&G);
  ot_tbuf_free(&D);
}

static void test_bias_backward_shapes(void **st) {
  (void)st;
  check_bias(OT_F32, OT_F32, 1, 1037, 768, 0, 0, 21);
  check_bias(OT_F32, OT_F32, 3, 343, 37, 0, 0, 22);
  check_bias(OT_F32, OT_F32, 2, 129, 77, 3, 0, 23);
  check_bias(OT_F32, OT_F32, 2, 65, 40, 0, 5, 24);
  check_bias(OT_BF16, OT_F32, 1, 2051, 3072, 0, 0, 25);
  check_bias(OT_F16, OT_F32, 4, 250, 99, 0, 0, 26);
  check_bias(OT_BF16, OT_BF16, 1, 300, 2304, 0, 0, 27);
  check_bias(OT_F32, OT_F32, 1, 1, 5, 0, 0, 28);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_matmul_backward), cmocka_unit_test(test_bias_backward),
                                     cmocka_unit_test(test_bias_backward_shapes)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
