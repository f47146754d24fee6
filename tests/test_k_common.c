/* test_k_common.c — the kernels' device-side conversions agree bit for bit
 * with dtype.c's, and the view helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/kcommon.h"
#include "ktest.h"

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void test_half_to_f32_exhaustive(void **st) {
  (void)st;
  for (uint32_t h = 0; h < 65536; h++) {
    float a = ot_kf16_f32((uint16_t)h), b = ot_f16_to_f32((uint16_t)h);
    if (bits(a) != bits(b)) fail_msg("f16 %04x: %08x vs %08x", h, bits(a), bits(b));
    assert_int_equal(bits(ot_kbf16_f32((uint16_t)h)), bits(ot_bf16_to_f32((uint16_t)h)));
  }
}

static void test_f32_to_half(void **st) {
  (void)st;
  uint64_t s = 7;
  for (int i = 0; i < 1 << 20; i++) {
    uint32_t u = (uint32_t)ot_trand_u64(&s);
    if (i < 65536) u = (uint32_t)i << 16 | (u & 0xffffu); /* every exponent/sign */
    float f = from_bits(u);
    assert_int_equal(ot_kf32_f16(f), ot_f32_to_f16(f));
    assert_int_equal(ot_kf32_bf16(f), ot_f32_to_bf16(f));
  }
}

static void test_views(void **st) {
  (void)st;
  ot_kview v = ot_kview_3d((void *)16, OT_F32, 2, 3, 5);
  assert_int_equal(v.nb[0], 15);
  assert_int_equal(v.nb[2], 1);
  ot_kview t = ot_kview_t(v);
  assert_int_equal(t.ne[1], 5);
  assert_int_equal(t.nb[1], 1);
  assert_int_equal(t.nb[2], 5);
  assert_int_equal(ot_kview_numel(v), 30);
  ot_kview v4 = ot_kview_4d(v);
  assert_int_equal(v4.ne[0], 1);
  assert_int_equal(v4.ne[3], 5);
  assert_int_equal(ot_kcheck("op", "x", v, 1, 2, OT_KM_FLOAT), OT_ERR_SHAPE);
  assert_int_equal(ot_kcheck("op", "x", v, 1, 3, OT_KM(OT_F16)), OT_ERR_DTYPE);
  assert_non_null(strstr(ot_last_error(), "op: x is f32"));
  assert_int_equal(ot_kcheck("op", "x", v, 3, 3, OT_KM_FLOAT), OT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_half_to_f32_exhaustive),
      cmocka_unit_test(test_f32_to_half),
      cmocka_unit_test(test_views),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
