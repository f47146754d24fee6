/* test_dtype.c — f16/bf16 conversion exact to IEEE round-to-nearest-even,
 * checked exhaustively over all 65536 bit patterns, plus q8b round trips. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ot_test.h"

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Reference decode of an f16 pattern in double arithmetic. */
static double f16_value(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

static void f16_decode_all(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    double want = f16_value((uint16_t)h);
    float got = ot_f16_to_f32((uint16_t)h);
    if (isnan(want)) {
      assert_true(isnan(got));
      continue;
    }
    if ((double)got != want || signbit(got) != signbit(want)) fail_msg("f16 %04x -> %g, want %g", h, got, want);
  }
}

static void f16_roundtrip_all(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    uint16_t back = ot_f32_to_f16(ot_f16_to_f32((uint16_t)h));
    if (((h >> 10) & 31) == 31 && (h & 1023)) assert_true(((back >> 10) & 31) == 31 && (back & 1023));
    else if (back != h) fail_msg("f16 %04x -> %04x", h, back);
  }
}

/* Between every pair of adjacent finite f16 values, the midpoint must round
 * to the even neighbour, and points just off it to the nearer one. The
 * midpoint of adjacent f16s is exact in f32 (f16 has 11 significant bits). */
static void f16_rounding_all_midpoints(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 0x7bff; h++) {
    for (int sign = 0; sign < 2; sign++) {
      uint16_t lo = (uint16_t)(h | (sign << 15)), hi = (uint16_t)((h + 1) | (sign << 15));
      double a = f16_value(lo), b = f16_value(hi);
      float mid = (float)((a + b) / 2);
      assert_true((double)mid == (a + b) / 2);
      uint16_t even = (lo & 1) ? hi : lo;
      uint16_t got = ot_f32_to_f16(mid);
      if (got != even) fail_msg("midpoint of %04x/%04x -> %04x, want %04x", lo, hi, got, even);
      float below = u2f(f2u(mid) - 1), above = u2f(f2u(mid) + 1); /* one f32 ulp off (magnitude) */
      if (mid != 0.0f) {
        assert_int_equal(ot_f32_to_f16(below), lo);
        assert_int_equal(ot_f32_to_f16(above), hi);
      }
    }
  }
  /* overflow threshold: 65520 and above round to infinity, just below to 65504 */
  assert_int_equal(ot_f32_to_f16(65520.0f), 0x7c00);
  assert_int_equal(ot_f32_to_f16(u2f(f2u(65520.0f) - 1)), 0x7bff);
  assert_int_equal(ot_f32_to_f16(-INFINITY), 0xfc00);
  assert_int_equal(ot_f32_to_f16(-0.0f), 0x8000);
  assert_int_equal(ot_f32_to_f16(0x1p-25f), 0x0000);        /* tie between 0 and the smallest subnormal -> even (0) */
  assert_int_equal(ot_f32_to_f16(0x1.000002p-25f), 0x0001); /* just above the tie */
  assert_int_equal(ot_f32_to_f16(0x1.8p-24f), 0x0002);      /* 1.5 ulp: tie -> even (2) */
  assert_true(isnan(ot_f16_to_f32(ot_f32_to_f16(NAN))));
}

static void bf16_all(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    float v = ot_bf16_to_f32((uint16_t)h);
    assert_int_equal(f2u(v), h << 16); /* decode is a shift */
    uint16_t back = ot_f32_to_bf16(v);
    if (isnan(v)) assert_true(isnan(ot_bf16_to_f32(back)));
    else assert_int_equal(back, h);
    /* rounding: midpoint to the next pattern rounds to even */
    if (!isnan(v) && (h & 0x7fff) < 0x7f7f) {
      uint32_t mid = (h << 16) | 0x8000u;
      uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
      assert_int_equal(ot_f32_to_bf16(u2f(mid)), even);
      assert_int_equal(ot_f32_to_bf16(u2f(mid - 1)), h);
      assert_int_equal(ot_f32_to_bf16(u2f(mid + 1)), h + 1);
    }
  }
}

static void q8b_roundtrip(void **state) {
  (void)state;
  enum { N = 4 * OT_Q8B_BLOCK };
  float x[N], y[N];
  ot_q8b_block q[N / OT_Q8B_BLOCK];
  ot_test_fill_uniform(x, N, 7, -3.0f, 3.0f);
  x[5] = 0.0f;
  OT_ASSERT_OK(ot_convert(OT_Q8B, q, OT_F32, x, N));
  OT_ASSERT_OK(ot_convert(OT_F32, y, OT_Q8B, q, N));
  for (int b = 0; b < N / OT_Q8B_BLOCK; b++) {
    float amax = 0;
    for (int j = 0; j < OT_Q8B_BLOCK; j++) amax = fmaxf(amax, fabsf(x[b * OT_Q8B_BLOCK + j]));
    assert_float_equal(q[b].scale, amax / 127.0f, 1e-7);
    for (int j = 0; j < OT_Q8B_BLOCK; j++) /* error at most half a quantisation step */
      assert_true(fabsf(y[b * OT_Q8B_BLOCK + j] - x[b * OT_Q8B_BLOCK + j]) <= q[b].scale * 0.5f + 1e-6f);
  }
  assert_int_equal(ot_dtype_bytes(OT_Q8B, N), sizeof q);
  assert_int_equal(ot_dtype_bytes(OT_Q8B, 33), 0);
  OT_ASSERT_FAILS(ot_convert(OT_Q8B, q, OT_F32, x, 33), OT_ERR_DTYPE, "q8b");
}

/* q4b is GGUF's Q4_0: d (f16) then 16 bytes, value j = (q_j - 8) * d,
 * q_j the low nibble of byte j (j < 16) or the high nibble of byte j - 16;
 * d = (the value of largest magnitude, signed) / -8. Values made exactly
 * representable give exactly those bytes back. */
static void q4b_layout_and_roundtrip(void **state) {
  (void)state;
  float x[32];
  uint8_t want_q[32];
  for (int j = 0; j < 32; j++) {
    want_q[j] = (uint8_t)((j * 5 + 3) % 16);
    x[j] = ((float)want_q[j] - 8.0f) * 0.5f;
  }
  want_q[0] = 0; /* -4: the largest magnitude, negative, so d = -4 / -8 = 0.5 */
  x[0] = -4.0f;
  ot_q4b_block b;
  OT_ASSERT_OK(ot_convert(OT_Q4B, &b, OT_F32, x, 32));
  assert_int_equal(sizeof b, 18);
  assert_int_equal(b.d, 0x3800); /* 0.5 in f16 */
  for (int j = 0; j < 16; j++) assert_int_equal(b.qs[j], want_q[j] | want_q[j + 16] << 4);
  float y[32];
  OT_ASSERT_OK(ot_convert(OT_F32, y, OT_Q4B, &b, 32));
  for (int j = 0; j < 32; j++) assert_true(y[j] == x[j]);
  /* random blocks: within one step (the top end clamps at q = 15, a whole
   * step off), half a step for all but the clamped ones */
  enum { N = 8 * 32 };
  float r[N], s[N];
  ot_q4b_block q[N / 32];
  ot_test_fill_uniform(r, N, 11, -3.0f, 3.0f);
  r[7] = 0.0f;
  OT_ASSERT_OK(ot_convert(OT_Q4B, q, OT_F32, r, N));
  OT_ASSERT_OK(ot_convert(OT_F32, s, OT_Q4B, q, N));
  int far = 0;
  for (int k = 0; k < N / 32; k++) {
    const float d = fabsf(ot_f16_to_f32(q[k].d));
    assert_true(d > 0);
    for (int j = 0; j < 32; j++) {
      const float e = fabsf(s[k * 32 + j] - r[k * 32 + j]);
      assert_true(e <= 1.01f * d + 1e-6f);
      far += e > 0.505f * d + 1e-6f;
    }
  }
  assert_true(far <= N / 32); /* at most the clamped value of each block */
  assert_int_equal(ot_dtype_bytes(OT_Q4B, N), sizeof q);
  assert_int_equal(ot_dtype_bytes(OT_Q4B, 48), 0);
  assert_int_equal(ot_dtype_block(OT_Q4B), 32);
  assert_int_equal(ot_dtype_block(OT_BF16), 0);
  OT_ASSERT_FAILS(ot_convert(OT_Q4B, q, OT_F32, r, 40), OT_ERR_DTYPE, "q4b");
  ot_dtype t;
  OT_ASSERT_OK(ot_dtype_parse("int4", &t));
  assert_int_equal(t, OT_Q4B);
  OT_ASSERT_OK(ot_dtype_parse("Q4_0", &t));
  assert_int_equal(t, OT_Q4B);
  assert_string_equal(ot_dtype_name(OT_Q4B), "q4b");
}

/* q4k / q6k (GGUF's K-quant super-blocks): sizes, names, and a
 * quantize-dequantize round trip within the fit's step. q4k: a 32's step is
 * its 6-bit scale times d (at most 63 d), half of it, plus the min's
 * rounding (dmin / 2) and what the scale's rounding leaves uncovered (15
 * steps of d / 2). q6k: a 16's step is at most 127 d, half of it plus 31
 * steps of d / 2. */
static void kquant_roundtrip(void **state) {
  (void)state;
  enum { N = 4 * 256 };
  static float r[N], s[N];
  ot_test_fill_uniform(r, N, 21, -2.0f, 3.0f);
  for (int j = 256; j < 512; j++) r[j] *= 0.01f; /* a small-valued block */
  ot_q4k_block q4[N / 256];
  ot_q6k_block q6[N / 256];
  assert_int_equal(sizeof q4[0], 144);
  assert_int_equal(sizeof q6[0], 210);
  assert_int_equal(ot_dtype_bytes(OT_Q4K, N), sizeof q4);
  assert_int_equal(ot_dtype_bytes(OT_Q6K, N), sizeof q6);
  assert_int_equal(ot_dtype_bytes(OT_Q4K, 128), 0);
  assert_int_equal(ot_dtype_block(OT_Q6K), 256);
  OT_ASSERT_OK(ot_convert(OT_Q4K, q4, OT_F32, r, N));
  OT_ASSERT_OK(ot_convert(OT_F32, s, OT_Q4K, q4, N));
  for (int k = 0; k < N / 256; k++) {
    const float d = ot_f16_to_f32(q4[k].d), dmin = ot_f16_to_f32(q4[k].dmin);
    for (int j = 0; j < 256; j++) {
      const int i = 256 * k + j;
      assert_true(fabsf(s[i] - r[i]) <= 31.5f * d + 0.5f * dmin + 7.5f * d + 1e-6f);
    }
  }
  double e4 = 0, e6 = 0, n2 = 0;
  for (int i = 0; i < N; i++) e4 += (s[i] - r[i]) * (double)(s[i] - r[i]), n2 += r[i] * (double)r[i];
  OT_ASSERT_OK(ot_convert(OT_Q6K, q6, OT_F32, r, N));
  OT_ASSERT_OK(ot_convert(OT_BF16, (uint16_t *)s, OT_Q6K, q6, 256)); /* to a 16-bit float too */
  OT_ASSERT_OK(ot_convert(OT_F32, s, OT_Q6K, q6, N));
  for (int k = 0; k < N / 256; k++) {
    const float d = ot_f16_to_f32(q6[k].d);
    for (int j = 0; j < 256; j++) {
      const int i = 256 * k + j;
      assert_true(fabsf(s[i] - r[i]) <= 63.5f * d + 15.5f * d + 1e-6f);
      e6 += (s[i] - r[i]) * (double)(s[i] - r[i]);
    }
  }
  /* the relative errors a 4.5-bit and a 6.5-bit fit give on uniform data
   * (step / sqrt(12) over the rms: about 0.063 and 0.018) */
  print_message("q4k rms rel error %.4f, q6k %.4f\n", sqrt(e4 / n2), sqrt(e6 / n2));
  assert_true(sqrt(e4 / n2) < 0.08);
  assert_true(sqrt(e6 / n2) < 0.03);
  assert_true(e6 < e4 / 4);
  OT_ASSERT_FAILS(ot_convert(OT_Q4K, q4, OT_F32, r, 300), OT_ERR_DTYPE, "q4k");
  ot_dtype t;
  OT_ASSERT_OK(ot_dtype_parse("Q4_K", &t));
  assert_int_equal(t, OT_Q4K);
  OT_ASSERT_OK(ot_dtype_parse("q6k", &t));
  assert_int_equal(t, OT_Q6K);
  assert_string_equal(ot_dtype_name(OT_Q6K), "q6k");
}

static void names(void **state) {
  (void)state;
  ot_dtype t;
  OT_ASSERT_OK(ot_dtype_parse("bfloat16", &t));
  assert_int_equal(t, OT_BF16);
  OT_ASSERT_OK(ot_dtype_parse("F16", &t));
  assert_int_equal(t, OT_F16);
  OT_ASSERT_FAILS(ot_dtype_parse("f64", &t), OT_ERR_DTYPE, "f64");
  assert_string_equal(ot_dtype_name(OT_Q8B), "q8b");
  assert_int_equal(ot_dtype_bytes(OT_BF16, 3), 6);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(f16_decode_all),  cmocka_unit_test(f16_roundtrip_all),
      cmocka_unit_test(f16_rounding_all_midpoints), cmocka_unit_test(bf16_all),
      cmocka_unit_test(q8b_roundtrip),   cmocka_unit_test(q4b_layout_and_roundtrip), cmocka_unit_test(kquant_roundtrip),
      cmocka_unit_test(names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
