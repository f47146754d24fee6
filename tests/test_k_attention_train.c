/* test_k_attention_train.c — causal attention of training over a batch of
 * sequences (ot_k_causal_attention, ot_k_causal_attention_backward) against
 * the double-precision references: batched 4-D and one-sequence 3-D views,
 * q/k/v as column blocks of one fused [B, T, (H + 2 KV) hd] matrix (row
 * stride != H hd), gradients into padded rows (the padding must stay
 * untouched), odd T (not a multiple of any tile), T = 1, GQA and MQA, head
 * dims 32, 64, 80 and 128, f32, bf16 and f16 storage. On a GPU the tiled
 * kernels run (attention_train_gpu.c), elsewhere the portable ones.
 * Tolerances (normalised error): 1e-5 for f32, 1e-2 for bf16, 5e-3 for f16;
 * the workspace (f32) 1e-5 after the forward and with the gradients' after
 * the backward. The forward runs first and the backward takes its out and
 * ws, as in training. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ktest.h"
#include "ot_test.h"

typedef struct cfg {
  int64_t B; /* 0: 3-D views of one sequence */
  int64_t T, H, KV, hd;
  ot_dtype dt;
  int fused; /* q, k, v column blocks of one matrix; gradients in padded rows */
} cfg;

/* A [B, T, heads, hd] view (3-D without B) at element `off` of `b`, rows of `rs` elements. */
static ot_kview view(const ot_tbuf *b, const cfg *c, int64_t heads, int64_t off, int64_t rs) {
  const int64_t B = c->B ? c->B : 1;
  int64_t ne[4] = {B, c->T, heads, c->hd}, nb[4] = {c->T * rs, rs, c->hd, 1};
  ot_kview v = c->B ? ot_tview(b, 0, 4, ne, nb) : ot_tview(b, 0, 3, ne + 1, nb + 1);
  v.p = (char *)v.p + ot_dtype_bytes(b->dt, off);
  return v;
}

static double tol_of(ot_dtype dt) { return dt == OT_F32 ? 1e-5 : dt == OT_BF16 ? 1e-2 : 5e-3; }

static void check(cfg c, uint64_t seed) {
  const int64_t B = c.B ? c.B : 1, rows = B * c.T, D = c.H * c.hd, Dk = c.KV * c.hd, pad = c.fused ? 8 : 0;
  const int dev = ot_test_dev();
  char what[128];
  snprintf(what, sizeof what, "causal_attention B%lld T%lld H%lld KV%lld hd%lld %s%s", (long long)c.B, (long long)c.T,
           (long long)c.H, (long long)c.KV, (long long)c.hd, ot_dtype_name(c.dt), c.fused ? " fused" : "");
  /* inputs: q, k, v (fused: one matrix), dout */
  ot_tbuf X[3], G = ot_tbuf_rand(c.dt, rows * D, seed + 3, -1, 1);
  ot_kview q, k, v;
  if (c.fused) {
    const int64_t rs = D + 2 * Dk;
    X[0] = ot_tbuf_rand(c.dt, rows * rs, seed, -1.5f, 1.5f);
    q = view(&X[0], &c, c.H, 0, rs), k = view(&X[0], &c, c.KV, D, rs), v = view(&X[0], &c, c.KV, D + Dk, rs);
  } else {
    for (int i = 0; i < 3; i++) X[i] = ot_tbuf_rand(c.dt, rows * (i ? Dk : D), seed + (uint64_t)i, -1.5f, 1.5f);
    q = view(&X[0], &c, c.H, 0, D), k = view(&X[1], &c, c.KV, 0, Dk), v = view(&X[2], &c, c.KV, 0, Dk);
  }
  ot_tbuf O = ot_tbuf_rand(c.dt, rows * D, seed + 4, -1, 1), W = ot_tbuf_rand(OT_F32, rows * c.H * 2, seed + 5, -1, 1);
  ot_tbuf DQ = ot_tbuf_rand(c.dt, rows * (D + pad), seed + 6, -1, 1), DK = ot_tbuf_rand(c.dt, rows * (Dk + pad), seed + 7, -1, 1);
  ot_tbuf DV = ot_tbuf_rand(c.dt, rows * (Dk + pad), seed + 8, -1, 1);
  ot_kview o = view(&O, &c, c.H, 0, D), g = view(&G, &c, c.H, 0, D);
  ot_kview dq = view(&DQ, &c, c.H, 0, D + pad), dk = view(&DK, &c, c.KV, 0, Dk + pad), dv = view(&DV, &c, c.KV, 0, Dk + pad);
  const int64_t wne[4] = {B, c.T, c.H, 2};
  ot_kview ws = c.B ? ot_tview(&W, 0, 4, wne, NULL) : ot_tview(&W, 0, 3, wne + 1, NULL);
  const ot_tbuf *xq = &X[0], *xk = c.fused ? &X[0] : &X[1], *xv = c.fused ? &X[0] : &X[2];

  assert_int_equal(ot_ref_causal_attention(o, ws, q, k, v), OT_OK);
  ot_status s = ot_k_causal_attention(dev, ot_tview_dev(o, &O), ot_tview_dev(ws, &W), ot_tview_dev(q, xq),
                                      ot_tview_dev(k, xk), ot_tview_dev(v, xv));
  if (s != OT_OK) fail_msg("%s: %s", what, ot_last_error());
  ot_tcheck(what, &O, o, tol_of(c.dt));
  ot_tcheck(what, &W, ws, 1e-5);

  assert_int_equal(ot_ref_causal_attention_backward(dq, dk, dv, ws, g, o, q, k, v), OT_OK);
  s = ot_k_causal_attention_backward(dev, ot_tview_dev(dq, &DQ), ot_tview_dev(dk, &DK), ot_tview_dev(dv, &DV),
                                     ot_tview_dev(ws, &W), ot_tview_dev(g, &G), ot_tview_dev(o, &O),
                                     ot_tview_dev(q, xq), ot_tview_dev(k, xk), ot_tview_dev(v, xv));
  if (s != OT_OK) fail_msg("%s backward: %s", what, ot_last_error());
  strncat(what, " backward", sizeof what - strlen(what) - 1);
  ot_tcheck(what, &DQ, dq, tol_of(c.dt));
  ot_tcheck(what, &DK, dk, tol_of(c.dt));
  ot_tcheck(what, &DV, dv, tol_of(c.dt));
  ot_tcheck(what, &W, ws, c.dt == OT_F32 ? 1e-5 : tol_of(c.dt)); /* D from out rounded to dt */
  for (int i = 0; i < (c.fused ? 1 : 3); i++) ot_tbuf_free(&X[i]);
  ot_tbuf *all[] = {&G, &O, &W, &DQ, &DK, &DV};
  for (int i = 0; i < 6; i++) ot_tbuf_free(all[i]);
}

static void test_f32(void **st) {
  (void)st;
  check((cfg){2, 37, 4, 2, 64, OT_F32, 1}, 1);   /* batched, odd T, GQA, q/k/v of a fused matrix */
  check((cfg){0, 1, 2, 1, 64, OT_F32, 0}, 11);   /* one sequence (3-D), T = 1 */
  check((cfg){3, 130, 2, 1, 64, OT_F32, 0}, 21); /* several query blocks and key tiles, MQA */
  check((cfg){2, 70, 2, 2, 128, OT_F32, 1}, 31); /* head_dim 128 */
  check((cfg){1, 33, 3, 1, 80, OT_F32, 0}, 41);  /* head_dim 80: zero-padded in the 128 tiles */
  check((cfg){0, 29, 4, 4, 32, OT_F32, 1}, 51);  /* head_dim 32, 3-D, strided */
}

static void test_half(void **st) {
  (void)st;
  check((cfg){2, 45, 4, 2, 64, OT_BF16, 1}, 61);
  check((cfg){2, 50, 2, 1, 128, OT_BF16, 0}, 71);
  check((cfg){2, 20, 2, 1, 32, OT_F16, 1}, 81);
  check((cfg){0, 1, 2, 2, 64, OT_F16, 0}, 91);
}

static void test_errors(void **st) {
  (void)st;
  float b[1024];
  const int dev = ot_test_dev();
  const int64_t qn[4] = {2, 4, 3, 8}, kn[4] = {2, 4, 2, 8}, wn[4] = {2, 4, 3, 2}, k1n[4] = {2, 4, 1, 8};
  ot_kview q = ot_kview_nd(b, OT_F32, 4, qn), k = ot_kview_nd(b, OT_F32, 4, kn), w = ot_kview_nd(b, OT_F32, 4, wn);
  ot_kview k1 = ot_kview_nd(b, OT_F32, 4, k1n);
  assert_int_equal(ot_k_causal_attention(dev, q, w, q, k, k), OT_ERR_SHAPE); /* 3 heads, 2 kv heads */
  assert_non_null(strstr(ot_last_error(), "causal_attention"));
  assert_int_equal(ot_k_causal_attention(dev, q, q, q, k1, k1), OT_ERR_SHAPE); /* ws [.., 8] */
  assert_non_null(strstr(ot_last_error(), "ws"));
  assert_int_equal(ot_ref_causal_attention(q, ot_kview_none(), q, k1, ot_kview_nd(b, OT_F32, 4, qn)), OT_ERR_SHAPE);
  assert_int_equal(ot_k_causal_attention_backward(dev, q, k1, k1, ot_kview_none(), q, q, q, k1, k1), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "causal_attention_backward"));
  ot_kview i32 = q;
  i32.dt = OT_I32;
  assert_int_equal(ot_k_causal_attention_backward(dev, q, k1, k1, w, q, i32, q, k1, k1), OT_ERR_DTYPE);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_f32), cmocka_unit_test(test_half),
                                     cmocka_unit_test(test_errors)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
