/* test_k_attention.c — KV append and causal GQA attention against the
 * references (two-pass softmax in double).
 *
 * The whole cache is random, including rows after each query's position: a
 * kernel that looks past the causal limit fails. Tolerance (normalised
 * error): 1e-5 for f32, 1e-2 for bf16 outputs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ktest.h"
#include "ot_test.h"

static void run_w(int64_t S, int64_t H, int64_t KVH, int64_t D, int64_t pos, int64_t window, ot_dtype cdt, ot_dtype odt,
                  uint64_t seed) {
  int64_t max_seq = pos + S + 3;
  ot_tbuf Kc = ot_tbuf_rand(cdt, max_seq * KVH * D, seed, -1, 1), Vc = ot_tbuf_rand(cdt, max_seq * KVH * D, seed + 1, -1, 1);
  ot_tbuf Kn = ot_tbuf_rand(OT_F32, S * KVH * D, seed + 2, -1, 1), Vn = ot_tbuf_rand(OT_F32, S * KVH * D, seed + 3, -1, 1);
  ot_tbuf Q = ot_tbuf_rand(OT_F32, S * H * D, seed + 4, -2, 2), O = ot_tbuf_rand(odt, S * H * D, seed + 5, -1, 1);
  int dev = ot_test_dev();
  ot_kview kc = ot_tview(&Kc, 0, 3, (int64_t[]){max_seq, KVH, D}, NULL), vc = ot_tview(&Vc, 0, 3, (int64_t[]){max_seq, KVH, D}, NULL);
  ot_kview kn = ot_tview(&Kn, 0, 3, (int64_t[]){S, KVH, D}, NULL), vn = ot_tview(&Vn, 0, 3, (int64_t[]){S, KVH, D}, NULL);
  ot_kview q = ot_tview(&Q, 0, 3, (int64_t[]){S, H, D}, NULL), o = ot_tview(&O, 0, 3, (int64_t[]){S, H, D}, NULL);
  char what[128];
  snprintf(what, sizeof what, "attention S%lld H%lld KV%lld D%lld pos %lld window %lld cache %s out %s", (long long)S,
           (long long)H, (long long)KVH, (long long)D, (long long)pos, (long long)window, ot_dtype_name(cdt),
           ot_dtype_name(odt));

  assert_int_equal(ot_ref_kv_append(kc, kn, pos), OT_OK);
  assert_int_equal(ot_ref_kv_append(vc, vn, pos), OT_OK);
  assert_int_equal(ot_k_kv_append(dev, ot_tview_dev(kc, &Kc), ot_tview_dev(kn, &Kn), pos), OT_OK);
  assert_int_equal(ot_k_kv_append(dev, ot_tview_dev(vc, &Vc), ot_tview_dev(vn, &Vn), pos), OT_OK);
  /* only rows [pos, pos+S) may change: check with a view of exactly those rows */
  ot_kview rows = ot_tview(&Kc, 0, 3, (int64_t[]){S, KVH, D}, NULL);
  rows.p = (char *)Kc.h + ot_dtype_bytes(cdt, pos * KVH * D);
  ot_tcheck("kv_append k", &Kc, rows, 0); /* same conversion on both sides: exact */

  assert_int_equal(ot_ref_attention_window(o, q, kc, vc, pos, window), OT_OK);
  ot_status s = ot_k_attention_window(dev, ot_tview_dev(o, &O), ot_tview_dev(q, &Q), ot_tview_dev(kc, &Kc),
                                      ot_tview_dev(vc, &Vc), pos, window);
  if (s != OT_OK) fail_msg("%s: %s", what, ot_last_error());
  ot_tcheck(what, &O, o, odt == OT_F32 ? 1e-5 : 1e-2);
  ot_tbuf_free(&Kc); ot_tbuf_free(&Vc); ot_tbuf_free(&Kn); ot_tbuf_free(&Vn); ot_tbuf_free(&Q); ot_tbuf_free(&O);
}

static void run(int64_t S, int64_t H, int64_t KVH, int64_t D, int64_t pos, ot_dtype cdt, ot_dtype odt, uint64_t seed) {
  run_w(S, H, KVH, D, pos, 0, cdt, odt, seed);
}

/* A sliding window (Mistral): against the reference, rows that cross the
 * window's edge, a first key not on a tile edge, windows of 1 and of more
 * than every row sees; and, independently of the reference's window code,
 * one decode row with window W at position P equals full attention at
 * position W - 1 over the cache rows [P - W + 1, P] (a view). */
static void test_window(void **st) {
  (void)st;
  run_w(1, 4, 2, 64, 130, 40, OT_F32, OT_F32, 30);  /* decode: keys 91..130, two tiles */
  run_w(70, 2, 1, 33, 10, 25, OT_F32, OT_F32, 31);  /* prefill: early rows see all, later the last 25 */
  run_w(5, 6, 3, 64, 61, 1, OT_BF16, OT_F32, 32);   /* itself only */
  run_w(3, 4, 4, 16, 0, 100, OT_F32, OT_F32, 33);   /* wider than every row's reach */
  run_w(4, 4, 2, 128, 200, 7, OT_BF16, OT_BF16, 34);
  run_w(1, 8, 2, 128, 300, 100, OT_F16, OT_F32, 35); /* the GPU's warp kernel: f16 cache, window, ten tiles */
  run_w(1, 8, 2, 128, 300, 100, OT_BF16, OT_F32, 36);
  const int64_t P = 150, W = 37, H = 4, KVH = 2, D = 32, max_seq = P + 4;
  const int dev = ot_test_dev();
  ot_tbuf Kc = ot_tbuf_rand(OT_F32, max_seq * KVH * D, 40, -1, 1), Vc = ot_tbuf_rand(OT_F32, max_seq * KVH * D, 41, -1, 1);
  ot_tbuf Q = ot_tbuf_rand(OT_F32, H * D, 42, -2, 2), O1 = ot_tbuf_rand(OT_F32, H * D, 43, -1, 1);
  ot_tbuf O2 = ot_tbuf_rand(OT_F32, H * D, 44, -1, 1);
  ot_kview kc = ot_tview(&Kc, 0, 3, (int64_t[]){max_seq, KVH, D}, NULL), vc = ot_tview(&Vc, 0, 3, (int64_t[]){max_seq, KVH, D}, NULL);
  ot_kview q = ot_tview(&Q, 0, 3, (int64_t[]){1, H, D}, NULL);
  ot_kview o1 = ot_tview(&O1, 0, 3, (int64_t[]){1, H, D}, NULL), o2 = ot_tview(&O2, 0, 3, (int64_t[]){1, H, D}, NULL);
  OT_ASSERT_OK(ot_k_attention_window(dev, ot_tview_dev(o1, &O1), ot_tview_dev(q, &Q), ot_tview_dev(kc, &Kc),
                                     ot_tview_dev(vc, &Vc), P, W));
  ot_kview ks = ot_tview_dev(kc, &Kc), vs = ot_tview_dev(vc, &Vc); /* rows P - W + 1 .. */
  ks.p = (char *)ks.p + ot_dtype_bytes(OT_F32, (P - W + 1) * KVH * D);
  vs.p = (char *)vs.p + ot_dtype_bytes(OT_F32, (P - W + 1) * KVH * D);
  ks.ne[0] = vs.ne[0] = W;
  OT_ASSERT_OK(ot_k_attention(dev, ot_tview_dev(o2, &O2), ot_tview_dev(q, &Q), ks, vs, W - 1));
  float a[4 * 32], b[4 * 32];
  ot_test_download(a, O1.d, sizeof a);
  ot_test_download(b, O2.d, sizeof b);
  for (int i = 0; i < H * D; i++)
    if (fabsf(a[i] - b[i]) > 1e-5f) fail_msg("window %lld at %lld: element %d is %g, the shifted cache gives %g",
                                            (long long)W, (long long)P, i, (double)a[i], (double)b[i]);
  OT_ASSERT_FAILS(ot_k_attention_window(dev, ot_tview_dev(o1, &O1), ot_tview_dev(q, &Q), ot_tview_dev(kc, &Kc),
                                        ot_tview_dev(vc, &Vc), P, -1), OT_ERR_INVALID_ARG, "negative");
  ot_tbuf_free(&Kc); ot_tbuf_free(&Vc); ot_tbuf_free(&Q); ot_tbuf_free(&O1); ot_tbuf_free(&O2);
}

static void test_decode(void **st) {
  (void)st;
  run(1, 4, 2, 8, 0, OT_F32, OT_F32, 1);
  run(1, 4, 2, 8, 5, OT_F32, OT_F32, 2);
  run(1, 8, 1, 64, 130, OT_BF16, OT_F32, 3); /* MQA, three key tiles */
  run(1, 3, 3, 17, 64, OT_F16, OT_BF16, 4);
  run(1, 8, 2, 128, 300, OT_BF16, OT_F32, 5); /* the GPU's warp kernel on 16-bit caches, ten key tiles */
  run(1, 8, 2, 128, 300, OT_F16, OT_F32, 6);
}

static void test_prefill(void **st) {
  (void)st;
  run(3, 4, 4, 16, 0, OT_F32, OT_F32, 10);
  run(70, 2, 1, 33, 10, OT_F32, OT_F32, 11); /* crosses tile edges */
  run(5, 6, 3, 64, 61, OT_BF16, OT_F32, 12);
  run(5, 6, 3, 64, 61, OT_F32, OT_BF16, 14); /* a bf16 prompt's o_proj input (models/llama.c) */
  run(4, 4, 2, 128, 0, OT_BF16, OT_BF16, 15);
  run(1, 1, 1, 1, 0, OT_F32, OT_F32, 13);
}

static void test_errors(void **st) {
  (void)st;
  float x[256];
  int dev = ot_test_dev();
  ot_kview cache = ot_kview_3d(x, OT_F32, 4, 2, 8), q = ot_kview_3d(x, OT_F32, 2, 3, 8);
  assert_int_equal(ot_k_attention(dev, q, q, cache, cache, 0), OT_ERR_SHAPE); /* 3 heads, 2 kv heads */
  assert_non_null(strstr(ot_last_error(), "attention"));
  ot_kview q4 = ot_kview_3d(x, OT_F32, 2, 4, 8);
  assert_int_equal(ot_k_attention(dev, q4, q4, cache, cache, 3), OT_ERR_SHAPE); /* past max_seq */
  assert_int_equal(ot_k_kv_append(dev, cache, ot_kview_3d(x, OT_F32, 2, 2, 8), 3), OT_ERR_SHAPE);
  assert_int_equal(ot_k_kv_append(dev, cache, ot_kview_3d(x, OT_I32, 1, 2, 8), 0), OT_ERR_DTYPE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode), cmocka_unit_test(test_prefill), cmocka_unit_test(test_window),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
