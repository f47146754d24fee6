/* test_config_size.c — size strings ("3.5GB", "3GiB", "40%", bytes) and
 * per-device limits, against exactly computed byte counts; and sizes
 * printed for people (ot_size_format), against the division done here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "omptensor/settings.h"
#include "ot_testio.h"

static void test_good_sizes(void **state) {
  (void)state;
  static const struct { const char *s; uint64_t bytes; } cases[] = {
      {"3.5GB", 3500000000ull},
      {"3GiB", 3ull << 30},
      {"123456789", 123456789ull},
      {"512MB", 512000000ull},
      {"512MiB", 512ull << 20},
      {"1.5TB", 1500000000000ull},
      {"1.5tib", 3ull << 39},
      {"3gb", 3000000000ull},
      {"1KB", 1000},
      {"1kib", 1024},
      {"7B", 7},
      {"1.0", 1},
      {"0.5KiB", 512},
      {"0.0015KB", 1}, /* 1.5 bytes, floored */
      {"9223372036854775807", INT64_MAX}, /* the largest: JSON's signed 64-bit integers */
      {"8EiB", 0},                         /* 2^63: too large, checked below */
      {"16777216TiB", 0}, /* 2^64: overflow, checked below */
  };
  for (size_t i = 0; i + 2 < sizeof cases / sizeof cases[0]; i++) {
    ot_size sz;
    OT_ASSERT_OK(ot_size_parse(cases[i].s, &sz));
    assert_int_equal(sz.kind, OT_SIZE_BYTES);
    if (sz.bytes != cases[i].bytes) fail_msg("'%s' gave %llu bytes, want %llu", cases[i].s,
                                             (unsigned long long)sz.bytes, (unsigned long long)cases[i].bytes);
    uint64_t b;
    OT_ASSERT_OK(ot_size_resolve(sz, 0, &b));
    assert_int_equal(b, cases[i].bytes);
  }
  ot_size sz;
  OT_ASSERT_ERR(ot_size_parse("16777216TiB", &sz), OT_ERR_INVALID_ARG, "'16777216TiB'", "too large");
  /* issue 43: 2^64-1 was a budget, reported as null (a signed JSON integer cannot hold it) */
  OT_ASSERT_ERR(ot_size_parse("8388608TiB", &sz), OT_ERR_INVALID_ARG, "'8388608TiB'", "at most 9223372036854775807");
  OT_ASSERT_ERR(ot_size_parse("18446744073709551615", &sz), OT_ERR_INVALID_ARG, "too large");
  OT_ASSERT_ERR(ot_size_parse("9223372036854775808", &sz), OT_ERR_INVALID_ARG, "too large");
}

static void test_percentages(void **state) {
  (void)state;
  ot_size sz;
  uint64_t b;
  OT_ASSERT_OK(ot_size_parse("40%", &sz));
  assert_int_equal(sz.kind, OT_SIZE_FRACTION);
  OT_ASSERT_OK(ot_size_resolve(sz, 1000, &b));
  assert_int_equal(b, 400);
  OT_ASSERT_OK(ot_size_parse("100%", &sz));
  OT_ASSERT_OK(ot_size_resolve(sz, 141ull << 30, &b));
  assert_int_equal(b, 141ull << 30);
  OT_ASSERT_OK(ot_size_parse("12.5%", &sz));
  OT_ASSERT_OK(ot_size_resolve(sz, 8ull << 30, &b));
  assert_int_equal(b, 1ull << 30);
  /* a fraction needs the device size */
  OT_ASSERT_ERR(ot_size_resolve(sz, 0, &b), OT_ERR_UNSUPPORTED, "12.5%", "in bytes");
}

static void test_bad_sizes(void **state) {
  (void)state;
  static const struct { const char *s, *why; } cases[] = {
      {"3XB", "unknown unit 'XB'"},
      {"", "empty"},
      {"-1GB", "negative"},
      {"1e999", "unknown unit 'e999'"},
      {"40%%", "unknown unit '%%'"},
      {"0", "at least one byte"},
      {"0GB", "at least one byte"},
      {"0%", "more than 0%"},
      {"101%", "cannot exceed 100%"},
      {"1.5", "a number without a unit is bytes"},
      {"1.5B", "not a whole number of bytes"},
      {"GB", "does not start with a digit"},
      {" 3GB", "does not start with a digit"},
      {"3 GB", "unknown unit ' GB'"},
      {"3.GB", "no digit after the decimal point"},
      {"1.2.3GB", "unknown unit '.3GB'"},
      {"+3GB", "does not start with a digit"},
      {"inf", "does not start with a digit"},
      {"0x10", "unknown unit 'x10'"},
      {"18446744073709551616", "too large"},
      {"99999999999999999999999", "too large"},
      {"1.00000000000000000001GB", "too many digits after the decimal point"},
      {"3G", "unknown unit 'G'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ot_size sz = {OT_SIZE_BYTES, 77, 0};
    char quoted[64];
    snprintf(quoted, sizeof quoted, "bad size '%s'", cases[i].s);
    OT_ASSERT_ERR(ot_size_parse(cases[i].s, &sz), OT_ERR_INVALID_ARG, quoted, cases[i].why);
  }
}

static void test_per_device(void **state) {
  (void)state;
  ot_mem_limit l;
  OT_ASSERT_OK(ot_mem_limit_parse("0:20GB,1:30GiB,3:50%", &l));
  assert_int_equal(l.all.kind, OT_SIZE_UNSET);
  assert_int_equal(ot_mem_limit_for(&l, 0).bytes, 20000000000ull);
  assert_int_equal(ot_mem_limit_for(&l, 1).bytes, 30ull << 30);
  assert_int_equal(ot_mem_limit_for(&l, 2).kind, OT_SIZE_UNSET);
  assert_int_equal(ot_mem_limit_for(&l, 3).kind, OT_SIZE_FRACTION);
  OT_ASSERT_OK(ot_mem_limit_parse("2GB", &l));
  assert_int_equal(ot_mem_limit_for(&l, 5).bytes, 2000000000ull);

  static const struct { const char *s, *why; } bad[] = {
      {"0:20GB,0:30GB", "device 0 given twice"},
      {"0:20GB,", "an empty item"},
      {"0:20GB,,1:3GB", "an empty item"},
      {"x:20GB", "'x:20GB' is not DEVICE:SIZE"},
      {":20GB", "is not DEVICE:SIZE"},
      {"99:1GB", "is not DEVICE:SIZE"},
      {"0:3XB", "bad size '3XB'"},
      {"0:20GB,1GB", "'1GB' is not DEVICE:SIZE"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    OT_ASSERT_ERR(ot_mem_limit_parse(bad[i].s, &l), OT_ERR_INVALID_ARG, bad[i].why);
}

/* Issue 43: one rule for a number without a unit, bytes, in a limit as in
 * any size, whatever its magnitude (it was gigabytes below 1024: 1023 was
 * 953 GiB and 1024 was 1 KiB); a fraction of a byte is refused, naming the
 * rule. */
static void test_bare_number_is_bytes(void **state) {
  (void)state;
  static const struct { const char *s; uint64_t bytes; } good[] = {
      {"40", 40ull}, {"1023", 1023ull}, {"1024", 1024ull}, {"123456789", 123456789ull}, {"512MB", 512000000ull},
      {"3GiB", 3ull << 30},
  };
  ot_mem_limit l;
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    OT_ASSERT_OK(ot_mem_limit_parse(good[i].s, &l));
    if (l.all.kind != OT_SIZE_BYTES || l.all.bytes != good[i].bytes)
      fail_msg("limit '%s': %llu bytes, want %llu", good[i].s, (unsigned long long)l.all.bytes,
               (unsigned long long)good[i].bytes);
    ot_size sz; /* the same as a plain size */
    OT_ASSERT_OK(ot_size_parse(good[i].s, &sz));
    assert_int_equal(sz.bytes, good[i].bytes);
  }
  OT_ASSERT_OK(ot_mem_limit_parse("0:3000,1:2048", &l));
  assert_int_equal(ot_mem_limit_for(&l, 0).bytes, 3000ull);
  assert_int_equal(ot_mem_limit_for(&l, 1).bytes, 2048ull);
  OT_ASSERT_ERR(ot_mem_limit_parse("3.5", &l), OT_ERR_INVALID_ARG, "bad size '3.5'", "a number without a unit is bytes");
  OT_ASSERT_ERR(ot_mem_limit_parse("0:2.5", &l), OT_ERR_INVALID_ARG, "bad size '2.5'", "3.5GB");
  OT_ASSERT_ERR(ot_mem_limit_parse("0", &l), OT_ERR_INVALID_ARG, "bad size '0': must be at least one byte");
  OT_ASSERT_ERR(ot_mem_limit_parse("3.", &l), OT_ERR_INVALID_ARG, "bad size '3.': no digit after the decimal point");
  OT_ASSERT_ERR(ot_mem_limit_parse("18446744073709551615", &l), OT_ERR_INVALID_ARG, "too large");
}

/* Fixed cases: the unit chosen by size, three significant digits, never
 * "1024 KiB" (the next unit instead). */
static void test_format_cases(void **state) {
  (void)state;
  static const struct { uint64_t b; const char *s; } c[] = {
      {0, "0 B"},
      {1, "1 B"},
      {1023, "1023 B"},
      {1024, "1.00 KiB"},
      {1536, "1.50 KiB"},
      {10240, "10.0 KiB"},
      {200000, "195 KiB"}, /* a 200 KB budget */
      {1023ull << 10, "1023 KiB"},
      {(1ull << 20) - 1, "1.00 MiB"},
      {128ull << 20, "128 MiB"},
      {3ull << 30, "3.00 GiB"},
      {3500000000ull, "3.26 GiB"},
      {1ull << 40, "1.00 TiB"},
      {UINT64_MAX, "16.0 EiB"},
  };
  char buf[OT_SIZE_FORMAT_LEN];
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    assert_ptr_equal(ot_size_format(c[i].b, buf, sizeof buf), buf);
    if (strcmp(buf, c[i].s)) fail_msg("%llu bytes: '%s', want '%s'", (unsigned long long)c[i].b, buf, c[i].s);
  }
  char small[5]; /* cut, never past the buffer */
  ot_size_format(3ull << 30, small, sizeof small);
  assert_string_equal(small, "3.00");
}

/* Many sizes: the number printed times its unit is the size within half a
 * unit of its last digit, and it lies in [1, 1024) of that unit. */
static void test_format_reads_back(void **state) {
  (void)state;
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  uint64_t b = 1;
  for (int i = 0; i < 4000 && b < (1ull << 63); i++, b = b * 1.013 + 7) { /* to 2^63: no overflow */
    char buf[OT_SIZE_FORMAT_LEN], u[8];
    double v;
    ot_size_format(b, buf, sizeof buf);
    if (sscanf(buf, "%lf %7s", &v, u) != 2) fail_msg("%llu bytes: '%s' is not 'NUMBER UNIT'", (unsigned long long)b, buf);
    int k = 0;
    while (k < 7 && strcmp(unit[k], u)) k++;
    if (k == 7) fail_msg("%llu bytes: unknown unit in '%s'", (unsigned long long)b, buf);
    double scale = 1;
    for (int j = 0; j < k; j++) scale *= 1024;
    const char *dot = strchr(buf, '.');
    double half = 0.5;
    for (const char *p = dot ? dot + 1 : buf + strlen(buf); dot && *p >= '0' && *p <= '9'; p++) half /= 10;
    double want = (double)b / scale;
    if (v < 1 || v >= 1024 || (k == 0) != (b < 1024) || want < v - half || want > v + half)
      fail_msg("%llu bytes: '%s' (exactly %.6f %s)", (unsigned long long)b, buf, want, u);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bare_number_is_bytes),
      cmocka_unit_test(test_good_sizes),
      cmocka_unit_test(test_percentages),
      cmocka_unit_test(test_bad_sizes),
      cmocka_unit_test(test_per_device),
      cmocka_unit_test(test_format_cases),
      cmocka_unit_test(test_format_reads_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
