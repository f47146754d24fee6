/* test_k_norm.c — RMSNorm, LayerNorm, softmax and RoPE against their
 * references.
 *
 * Tolerances (normalised error): f32 1e-5 (fp32 statistics and expf/cosf
 * against double); bf16 outputs 1e-2 (one rounding). RoPE is also checked by
 * hand on a case where the rotation is known. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ktest.h"

static double tol_for(ot_dtype t) { return t == OT_F32 ? 1e-5 : t == OT_F16 ? 2e-3 : 1e-2; }

/* x, y [rows, d] with row stride d + pad; op 0 rmsnorm, 1 layernorm, 2 softmax, 3 causal softmax */
/* Row op `op` (0 rmsnorm, 1 layernorm, 2 softmax, 3 causal softmax): the
 * reference on the host views, the kernel on the device ones; its name. */
static const char *run_op(int op, ot_kview y, ot_kview x, ot_kview w, ot_kview b, ot_kview yd, ot_kview xd,
                          ot_kview wd, ot_kview bd) {
  const int dev = ot_test_dev();
  ot_status s = OT_OK;
  const char *name = "?";
  switch (op) {
  case 0: name = "rmsnorm"; assert_int_equal(ot_ref_rmsnorm(y, x, w, 1e-5f), OT_OK); s = ot_k_rmsnorm(dev, yd, xd, wd, 1e-5f); break;
  case 1: name = "layernorm"; assert_int_equal(ot_ref_layernorm(y, x, w, b, 1e-5f), OT_OK); s = ot_k_layernorm(dev, yd, xd, wd, bd, 1e-5f); break;
  case 2: name = "softmax"; assert_int_equal(ot_ref_softmax(y, x, 0.7f, 0), OT_OK); s = ot_k_softmax(dev, yd, xd, 0.7f, 0); break;
  default: name = "softmax causal"; assert_int_equal(ot_ref_softmax(y, x, 1.0f, 1), OT_OK); s = ot_k_softmax(dev, yd, xd, 1.0f, 1); break;
  }
  if (s != OT_OK) fail_msg("%s: %s", name, ot_last_error());
  return name;
}

static void run_rows(int op, ot_dtype dt, int64_t rows, int64_t d, int64_t pad, int inplace, uint64_t seed) {
  int64_t ld = d + pad;
  ot_tbuf X = ot_tbuf_rand(dt, rows * ld, seed, -3, 3), Y = ot_tbuf_rand(dt, rows * ld + 2, seed + 1, -1, 1);
  ot_tbuf W = ot_tbuf_rand(OT_F32, d, seed + 2, 0.5f, 1.5f), B = ot_tbuf_rand(OT_BF16, d, seed + 3, -1, 1);
  ot_tbuf *out = inplace ? &X : &Y;
  /* softmax causal: view as [2, rows/2.., d]? keep 2-D: S = rows queries over d keys */
  ot_kview x = ot_tview(&X, 0, 2, (int64_t[]){rows, d}, (int64_t[]){ld, 1});
  ot_kview y = inplace ? x : ot_tview(&Y, 0, 2, (int64_t[]){rows, d}, (int64_t[]){ld, 1});
  ot_kview w = ot_tview(&W, 0, 1, (int64_t[]){d}, NULL), b = ot_tview(&B, 0, 1, (int64_t[]){d}, NULL);
  const char *name = run_op(op, y, x, w, b, ot_tview_dev(y, out), ot_tview_dev(x, &X), ot_tview_dev(w, &W),
                            ot_tview_dev(b, &B));
  char what[128];
  snprintf(what, sizeof what, "%s [%lld, %lld] %s%s%s", name, (long long)rows, (long long)d, ot_dtype_name(dt),
           pad ? " strided" : "", inplace ? " in-place" : "");
  ot_tcheck(what, out, y, tol_for(dt));
  ot_tbuf_free(&X);
  ot_tbuf_free(&Y);
  ot_tbuf_free(&W);
  ot_tbuf_free(&B);
}

static const int64_t shapes[][2] = {{1, 1}, {3, 17}, {17, 3}, {5, 257}, {2, 1000}};

static void test_norms(void **st) {
  (void)st;
  uint64_t seed = 10;
  for (int op = 0; op < 2; op++)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
      run_rows(op, OT_F32, shapes[i][0], shapes[i][1], 0, 0, seed++);
      run_rows(op, OT_F32, shapes[i][0], shapes[i][1], 5, 0, seed++);
      run_rows(op, OT_BF16, shapes[i][0], shapes[i][1], 0, 1, seed++);
    }
}

static void test_softmax(void **st) {
  (void)st;
  uint64_t seed = 100;
  for (int op = 2; op < 4; op++)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
      run_rows(op, OT_F32, shapes[i][0], shapes[i][1], 0, 0, seed++);
      run_rows(op, OT_F32, shapes[i][0], shapes[i][1], 3, 1, seed++);
      run_rows(op, OT_BF16, shapes[i][0], shapes[i][1], 0, 0, seed++);
    }
  /* causal by hand: 2 queries over 3 keys -> row 0 sees keys 0..1, row 1 all */
  float x[6] = {1, 2, 3, 1, 2, 3}, y[6];
  assert_int_equal(ot_ref_softmax(ot_kview_2d(y, OT_F32, 2, 3), ot_kview_2d(x, OT_F32, 2, 3), 1.0f, 1), OT_OK);
  assert_true(y[2] == 0.0f);
  assert_true(fabsf(y[1] - 1.0f / (1.0f + expf(-1.0f))) < 1e-6f);
  assert_true(fabsf(y[3] + y[4] + y[5] - 1.0f) < 1e-6f);
}

/* The GPU's block-per-row kernels (rows_gpu.c; other devices run the same
 * cases through the portable loops): x [n0, S, d] in xt with row stride
 * d + pad and x starting xo elements into its buffer, y the same layout in
 * yt (or x itself), w and b [d] in wt. op as run_rows. The kernels take
 * d % 8 == 0 up to 8192 with every row start 16-byte aligned; the rest of
 * these cases check that what they refuse still computes right. */
static void run_rows3(int op, ot_dtype xt, ot_dtype wt, ot_dtype yt, int64_t n0, int64_t S, int64_t d, int64_t pad,
                      int64_t xo, int inplace, uint64_t seed) {
  const int64_t ld = d + pad, n = n0 * S * ld;
  if (inplace) yt = xt;
  ot_tbuf X = ot_tbuf_rand(xt, n + xo, seed, -3, 3), Y = ot_tbuf_rand(yt, n + xo + 2, seed + 1, -1, 1);
  ot_tbuf W = ot_tbuf_rand(wt, d, seed + 2, 0.5f, 1.5f), B = ot_tbuf_rand(wt, d, seed + 3, -1, 1);
  ot_tbuf *out = inplace ? &X : &Y;
  const int64_t ne[3] = {n0, S, d}, nb[3] = {S * ld, ld, 1};
  ot_kview x = ot_tview(&X, 0, 3, ne, nb), y = ot_tview(&Y, 0, 3, ne, nb);
  x.p = (char *)X.h + ot_dtype_bytes(xt, xo);
  y = inplace ? x : (ot_kview){(char *)Y.h + ot_dtype_bytes(yt, xo), yt, 3, {n0, S, d}, {S * ld, ld, 1}};
  ot_kview w = ot_tview(&W, 0, 1, (int64_t[]){d}, NULL), b = ot_tview(&B, 0, 1, (int64_t[]){d}, NULL);
  const char *name = run_op(op, y, x, w, b, ot_tview_dev(y, out), ot_tview_dev(x, &X), ot_tview_dev(w, &W),
                            ot_tview_dev(b, &B));
  char what[160];
  snprintf(what, sizeof what, "%s [%lld, %lld, %lld] x %s w %s y %s pad %lld offset %lld%s", name, (long long)n0,
           (long long)S, (long long)d, ot_dtype_name(xt), ot_dtype_name(wt), ot_dtype_name(yt), (long long)pad,
           (long long)xo, inplace ? " in-place" : "");
  ot_tcheck(what, out, y, tol_for(yt));
  ot_tbuf_free(&X);
  ot_tbuf_free(&Y);
  ot_tbuf_free(&W);
  ot_tbuf_free(&B);
}

/* Every combination rows_gpu.c has a kernel for (and all f32, warp_gpu.c's),
 * at each register size (d up to 2048, 4096, 8192), then layouts it refuses. */
static void test_rows_fast(void **st) {
  (void)st;
  static const ot_dtype norm_combos[][3] = {{OT_BF16, OT_BF16, OT_BF16}, {OT_F16, OT_F16, OT_F16},
                                            {OT_BF16, OT_F32, OT_BF16},  {OT_F16, OT_F32, OT_F16},
                                            {OT_F32, OT_F32, OT_BF16},   {OT_F32, OT_F32, OT_F16},
                                            {OT_F32, OT_F32, OT_F32}};
  static const ot_dtype sm_combos[][3] = {{OT_F32, OT_F32, OT_F32}, {OT_BF16, OT_BF16, OT_BF16}, {OT_F16, OT_F16, OT_F16}};
  static const int64_t dims[][3] = {{1, 1, 8}, {2, 3, 64}, {1, 5, 2048}, {1, 2, 2056}, {3, 1, 4096}, {1, 2, 8192}};
  uint64_t seed = 5000;
  for (int op = 0; op < 4; op++) {
    const int nc = op < 2 ? 7 : 3;
    for (int c = 0; c < nc; c++) {
      const ot_dtype *t = op < 2 ? norm_combos[c] : sm_combos[c];
      for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        run_rows3(op, t[0], t[1], t[2], dims[i][0], dims[i][1], dims[i][2], 0, 0, 0, seed++);
      run_rows3(op, t[0], t[1], t[2], 2, 3, 64, 8, 0, 0, seed++);    /* row stride 72: aligned */
      run_rows3(op, t[0], t[1], t[2], 2, 3, 64, 8, 8, 1, seed++);    /* and in place */
      run_rows3(op, t[0], t[1], t[2], 2, 3, 64, 3, 0, 0, seed++);    /* row stride 67: refused */
      run_rows3(op, t[0], t[1], t[2], 2, 3, 64, 0, 1, 0, seed++);    /* start +1: refused */
      run_rows3(op, t[0], t[1], t[2], 1, 3, 68, 0, 0, 0, seed++);    /* d % 8 != 0: refused */
      run_rows3(op, t[0], t[1], t[2], 1, 2, 8200, 0, 0, 0, seed++);  /* d > 8192: refused */
    }
  }
  /* causal with more keys than queries: row i of S sees i + n - S + 1 keys */
  run_rows3(3, OT_BF16, OT_BF16, OT_BF16, 2, 5, 40, 0, 0, 0, seed++);
  run_rows3(3, OT_F32, OT_F32, OT_F32, 1, 7, 4096, 0, 0, 0, seed++);
}

static void run_rope(ot_dtype dt, int64_t S, int64_t H, int64_t hd, int64_t pos, int strided, uint64_t seed) {
  int64_t hs = strided ? hd + 3 : hd; /* strided: padding after each head */
  ot_tbuf X = ot_tbuf_rand(dt, S * H * hs, seed, -2, 2);
  ot_kview x = ot_tview(&X, 0, 3, (int64_t[]){S, H, hd}, (int64_t[]){H * hs, hs, 1});
  assert_int_equal(ot_ref_rope(x, pos, ot_rope_plain(10000.0f)), OT_OK);
  ot_status s = ot_k_rope(ot_test_dev(), ot_tview_dev(x, &X), pos, ot_rope_plain(10000.0f));
  if (s != OT_OK) fail_msg("rope: %s", ot_last_error());
  char what[96];
  snprintf(what, sizeof what, "rope [%lld, %lld, %lld] pos %lld %s", (long long)S, (long long)H, (long long)hd,
           (long long)pos, ot_dtype_name(dt));
  ot_tcheck(what, &X, x, tol_for(dt));
  ot_tbuf_free(&X);
}

/* x [S, H, hd] contiguous, starting off elements into its buffer */
static void run_rope_off(ot_dtype dt, int64_t S, int64_t H, int64_t hd, int64_t off) {
  ot_tbuf X = ot_tbuf_rand(dt, S * H * hd + off, 77 + (uint64_t)off, -2, 2);
  ot_kview x = ot_tview(&X, 0, 3, (int64_t[]){S, H, hd}, NULL);
  x.p = (char *)X.h + ot_dtype_bytes(dt, off);
  assert_int_equal(ot_ref_rope(x, 11, ot_rope_plain(10000.0f)), OT_OK);
  assert_int_equal(ot_k_rope(ot_test_dev(), ot_tview_dev(x, &X), 11, ot_rope_plain(10000.0f)), OT_OK);
  char what[96];
  snprintf(what, sizeof what, "rope [%lld, %lld, %lld] %s offset %lld", (long long)S, (long long)H, (long long)hd,
           ot_dtype_name(dt), (long long)off);
  ot_tcheck(what, &X, x, tol_for(dt));
  ot_tbuf_free(&X);
}

static void test_rope(void **st) {
  (void)st;
  run_rope(OT_F32, 1, 1, 2, 0, 0, 1);
  run_rope(OT_F32, 3, 4, 64, 0, 0, 2);
  run_rope(OT_F32, 5, 3, 18, 1021, 1, 3);
  run_rope(OT_BF16, 7, 2, 128, 4000, 0, 4);
  run_rope(OT_F16, 1, 8, 32, 17, 1, 5);
  /* the fast path (head_dim/2 % 8 == 0, aligned heads): one head per
   * iteration, several sharing the angles (12 x 6 heads at 64: 4 per
   * iteration on a host device, 4 + 2), all of them; padded heads; f16 */
  run_rope(OT_F32, 3, 2, 16, 5, 0, 6);
  run_rope(OT_F32, 12, 6, 64, 9, 0, 7);
  run_rope(OT_BF16, 64, 8, 128, 100, 0, 8);
  run_rope(OT_F16, 40, 4, 32, 3, 0, 9);
  run_rope(OT_BF16, 9, 3, 64, 2, 1, 10); /* head stride 67: generic */
  run_rope_off(OT_F32, 4, 2, 32, 1);      /* x starts 1 element in: generic */
  run_rope_off(OT_BF16, 4, 2, 32, 8);     /* 16 bytes in: fast */
  /* by hand: head_dim 4, pos 3: pair (0, 2) turns by 3 rad, pair (1, 3) by 3 * 10000^-0.5 */
  float x[4] = {1, 2, 3, 4};
  assert_int_equal(ot_ref_rope(ot_kview_3d(x, OT_F32, 1, 1, 4), 3, ot_rope_plain(10000.0f)), OT_OK);
  assert_true(fabs(x[0] - (cos(3.0) - 3 * sin(3.0))) < 1e-5);
  assert_true(fabs(x[2] - (3 * cos(3.0) + sin(3.0))) < 1e-5);
  double a1 = 3.0 / 100.0;
  assert_true(fabs(x[1] - (2 * cos(a1) - 4 * sin(a1))) < 1e-5);
  assert_int_equal(ot_ref_rope(ot_kview_3d(x, OT_F32, 1, 1, 3), 0, ot_rope_plain(1e4f)), OT_ERR_SHAPE);
}

static void test_errors(void **st) {
  (void)st;
  float x[64];
  int dev = ot_test_dev();
  ot_kview v = ot_kview_2d(x, OT_F32, 4, 8);
  assert_int_equal(ot_k_rmsnorm(dev, v, v, ot_kview_1d(x, OT_F32, 7), 1e-5f), OT_ERR_SHAPE);
  assert_non_null(strstr(ot_last_error(), "rmsnorm"));
  assert_int_equal(ot_k_layernorm(dev, v, v, ot_kview_1d(x, OT_F32, 8), ot_kview_1d(x, OT_I32, 8), 1e-5f), OT_ERR_DTYPE);
  assert_int_equal(ot_k_softmax(dev, ot_kview_2d(x, OT_F32, 8, 4), v, 1.0f, 0), OT_ERR_SHAPE);
  assert_int_equal(ot_k_rope(dev, v, 0, ot_rope_plain(1e4f)), OT_ERR_SHAPE);
}

/* Scaled RoPE (omptensor/rope.h) on the kernel's fast and generic paths
 * against an independent double computation of transformers' frequencies
 * (modeling_rope_utils: _compute_linear_scaling_rope_parameters,
 * _compute_llama3_parameters). head_dim 32, theta 10000, original context 64:
 * the llama3 wavelengths 2 pi .. 2 pi 10000^(15/16) cover the scaled, the
 * smoothed and the kept band. */
static double hf_inv_freq(const ot_rope *r, int64_t i, int64_t d) {
  const double inv = 1.0 / pow(r->theta, (double)(2 * i) / (double)d);
  if (r->type == OT_ROPE_LINEAR) return inv / r->factor;
  if (r->type != OT_ROPE_LLAMA3) return inv;
  const double w = 2.0 * 3.14159265358979323846 / inv, L = r->original_max_positions;
  if (w > L / r->low_freq_factor) return inv / r->factor;
  if (w < L / r->high_freq_factor) return inv;
  const double sm = (L / w - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
  return (1.0 - sm) * inv / r->factor + sm * inv;
}

/* yarn (_compute_yarn_parameters): the interpolated and extrapolated
 * frequencies blended by a linear ramp over the pairs; cos and sin scaled. */
static double hf_yarn_inv(const ot_rope *r, int64_t i, int64_t d) {
  const double pf = pow(r->theta, (double)(2 * i) / (double)d);
  double ramp = ((double)i - r->ramp_lo) / (r->ramp_hi - r->ramp_lo);
  ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
  const double e = 1.0 - ramp;
  return 1.0 / (r->factor * pf) * (1.0 - e) + 1.0 / pf * e;
}

static void test_rope_scaled(void **st) {
  (void)st;
  const ot_rope rs[4] = {{10000.0f, OT_ROPE_LINEAR, 2.5f, 1, 4, 64, 0, 1, 1},
                         {10000.0f, OT_ROPE_LLAMA3, 8.0f, 1.0f, 4.0f, 64.0f, 0, 1, 1},
                         {500000.0f, OT_ROPE_LLAMA3, 32.0f, 1.0f, 4.0f, 8192.0f, 0, 1, 1},
                         {1000000.0f, OT_ROPE_YARN, 4.0f, 1, 4, 32768.0f, 3.0f, 9.0f, 1.1386294f}};
  const int64_t S = 3, H = 2, d = 32, pos = 40;
  for (int k = 0; k < 4; k++)
    for (int strided = 0; strided < 2; strided++) { /* strided: the generic loop; else the fast path */
      const int64_t hs = strided ? d + 3 : d;
      ot_tbuf X = ot_tbuf_rand(OT_F32, S * H * hs, 500 + (uint64_t)k, -2, 2);
      ot_kview x = ot_tview(&X, 0, 3, (int64_t[]){S, H, d}, (int64_t[]){H * hs, hs, 1});
      float *want = malloc((size_t)(S * H * hs) * sizeof *want);
      assert_non_null(want);
      memcpy(want, X.h, (size_t)(S * H * hs) * sizeof *want);
      for (int64_t s = 0; s < S; s++)
        for (int64_t h = 0; h < H; h++)
          for (int64_t i = 0; i < d / 2; i++) {
            const int yarn = rs[k].type == OT_ROPE_YARN;
            const double a = (double)(pos + s) * (yarn ? hf_yarn_inv(&rs[k], i, d) : hf_inv_freq(&rs[k], i, d));
            const double m = yarn ? rs[k].attention_factor : 1.0;
            float *p = want + s * H * hs + h * hs;
            const double x1 = p[i], x2 = p[i + d / 2];
            p[i] = (float)(x1 * m * cos(a) - x2 * m * sin(a));
            p[i + d / 2] = (float)(x2 * m * cos(a) + x1 * m * sin(a));
          }
      float *got = malloc(X.bytes);
      assert_non_null(got);
      if (ot_k_rope(ot_test_dev(), ot_tview_dev(x, &X), pos, rs[k]) != OT_OK) fail_msg("rope: %s", ot_last_error());
      ot_test_download(got, X.d, X.bytes);
      for (int64_t j = 0; j < S * H * hs; j++)
        if (fabs((double)got[j] - want[j]) > 2e-4)
          fail_msg("rope %s factor %g%s: element %lld is %g, transformers' frequencies give %g",
                   ot_rope_type_name(rs[k].type), (double)rs[k].factor, strided ? " strided" : "", (long long)j,
                   (double)got[j], (double)want[j]);
      free(got);
      free(want);
      ot_tbuf_free(&X);
    }
}

/* dynamic RoPE: rows up to position L - 1 past max_position_embeddings M run
 * plain RoPE with theta (factor L / M - (factor - 1))^(d / (d - 2))
 * (transformers' _compute_dynamic_ntk_parameters, in double here); up to M,
 * plain theta. */
static void test_rope_dynamic(void **st) {
  (void)st;
  const int64_t S = 3, H = 2, d = 32;
  const ot_rope dyn = {10000.0f, OT_ROPE_DYNAMIC, 2.0f, 1, 4, 32.0f, 0, 1, 1};
  const int64_t poss[2] = {40, 10}; /* L = 43 > 32; L = 13 <= 32 */
  for (int k = 0; k < 2; k++) {
    const int64_t L = poss[k] + S;
    const double th = L > 32 ? 10000.0 * pow(2.0 * (double)L / 32.0 - 1.0, (double)d / (double)(d - 2)) : 10000.0;
    ot_tbuf A = ot_tbuf_rand(OT_F32, S * H * d, 600 + (uint64_t)k, -2, 2), B = ot_tbuf_rand(OT_F32, S * H * d, 600 + (uint64_t)k, -2, 2);
    ot_kview a = ot_tview(&A, 0, 3, (int64_t[]){S, H, d}, NULL), b = ot_tview(&B, 0, 3, (int64_t[]){S, H, d}, NULL);
    if (ot_k_rope(ot_test_dev(), ot_tview_dev(a, &A), poss[k], dyn) != OT_OK) fail_msg("rope: %s", ot_last_error());
    if (ot_k_rope(ot_test_dev(), ot_tview_dev(b, &B), poss[k], ot_rope_plain((float)th)) != OT_OK)
      fail_msg("rope: %s", ot_last_error());
    float *x = malloc(A.bytes), *y = malloc(B.bytes);
    assert_non_null(x);
    assert_non_null(y);
    ot_test_download(x, A.d, A.bytes);
    ot_test_download(y, B.d, B.bytes);
    for (int64_t j = 0; j < S * H * d; j++)
      if (fabsf(x[j] - y[j]) > 1e-6f)
        fail_msg("dynamic rope at %lld: element %lld %g, plain theta %g gives %g", (long long)poss[k], (long long)j,
                 (double)x[j], th, (double)y[j]);
    free(x);
    free(y);
    ot_tbuf_free(&A);
    ot_tbuf_free(&B);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_norms), cmocka_unit_test(test_softmax), cmocka_unit_test(test_rows_fast),
      cmocka_unit_test(test_rope), cmocka_unit_test(test_rope_scaled),
      cmocka_unit_test(test_rope_dynamic),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
