/* test_io_npy.c — .npy write/read round trips, the exact header layout, and
 * headers as NumPy writes them (v1 and v2, keys in any order); refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "io/npy_internal.h"
#include "omptensor/npy.h"
#include "ot_testio.h"

static int setup(void **state) {
  *state = ot_tmpdir_create();
  return 0;
}

static int teardown(void **state) {
  ot_tmpdir_remove(*state);
  return 0;
}

static size_t slurp(const char *path, unsigned char *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  size_t n = fread(buf, 1, cap, f);
  fclose(f);
  return n;
}

static void test_round_trip_f32(void **state) {
  char path[4096];
  ot_tmp_path(path, sizeof path, *state, "logits.npy");
  float x[2][3] = {{1.0f, -2.5f, 3.0f}, {4e-8f, 5e8f, -0.0f}};
  int64_t shape[2] = {2, 3};
  OT_ASSERT_OK(ot_npy_write(path, OT_F32, 2, shape, x));

  unsigned char raw[256];
  size_t n = slurp(path, raw, sizeof raw);
  assert_int_equal(n, 128 + sizeof x); /* 10 + 60-byte dict + \n, rounded up to 64 */
  assert_memory_equal(raw, "\x93NUMPY\x01\x00", 8);
  assert_int_equal(raw[8] | raw[9] << 8, 128 - 10);
  const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  assert_memory_equal(raw + 10, dict, sizeof dict - 1);
  for (size_t i = 10 + sizeof dict - 1; i < 127; i++) assert_int_equal(raw[i], ' ');
  assert_int_equal(raw[127], '\n');
  assert_memory_equal(raw + 128, x, sizeof x);

  ot_npy_array a;
  OT_ASSERT_OK(ot_npy_read(path, &a));
  assert_int_equal(a.dtype, OT_F32);
  assert_int_equal(a.ndim, 2);
  assert_int_equal(a.shape[0], 2);
  assert_int_equal(a.shape[1], 3);
  assert_int_equal(a.numel, 6);
  assert_memory_equal(a.data, x, sizeof x);
  ot_npy_free(&a);
  ot_npy_free(&a); /* idempotent */
}

static void test_round_trip_i32_shapes(void **state) {
  char path[4096];
  ot_tmp_path(path, sizeof path, *state, "ids.npy");
  int32_t ids[5] = {1, 15043, 3186, -7, 2147483647};
  int64_t shape1[1] = {5};
  OT_ASSERT_OK(ot_npy_write(path, OT_I32, 1, shape1, ids));
  unsigned char raw[256];
  slurp(path, raw, sizeof raw);
  char head[65];
  memcpy(head, raw, 64);
  head[64] = '\0'; /* a 1-d header fits in 64 bytes */
  assert_non_null(strstr(head + 10, "'shape': (5,)")); /* a 1-tuple has its comma */
  ot_npy_array a;
  OT_ASSERT_OK(ot_npy_read(path, &a));
  assert_int_equal(a.dtype, OT_I32);
  assert_int_equal(a.ndim, 1);
  assert_memory_equal(a.data, ids, sizeof ids);
  ot_npy_free(&a);

  float s = 3.5f; /* a 0-d array */
  OT_ASSERT_OK(ot_npy_write(path, OT_F32, 0, NULL, &s));
  OT_ASSERT_OK(ot_npy_read(path, &a));
  assert_int_equal(a.ndim, 0);
  assert_int_equal(a.numel, 1);
  assert_true(*(float *)a.data == 3.5f);
  ot_npy_free(&a);

  int64_t empty[3] = {4, 0, 2};
  OT_ASSERT_OK(ot_npy_write(path, OT_F32, 3, empty, NULL));
  OT_ASSERT_OK(ot_npy_read(path, &a));
  assert_int_equal(a.numel, 0);
  assert_int_equal(a.shape[2], 2);
  ot_npy_free(&a);

  OT_ASSERT_ERR(ot_npy_write(path, OT_BF16, 1, shape1, ids), OT_ERR_DTYPE, "bf16");
}

/* A file with header `dict` in format `major`.0, then `data_bytes` bytes. */
static void write_npy(const char *dir, int major, const char *dict, size_t data_bytes) {
  unsigned char buf[1024] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)major, 0};
  size_t fixed = major == 1 ? 10 : 12, hl = strlen(dict);
  buf[8] = (unsigned char)(hl & 0xff);
  buf[9] = (unsigned char)(hl >> 8);
  memcpy(buf + fixed, dict, hl);
  memset(buf + fixed + hl, 0x11, data_bytes);
  ot_write_bytes(dir, "in.npy", buf, fixed + hl + data_bytes);
}

static void test_numpy_headers(void **state) {
  const char *dir = *state;
  char path[4096];
  ot_tmp_path(path, sizeof path, dir, "in.npy");
  ot_npy_array a;
  /* as NumPy >= 1.21 writes it: growth padding, then '\n' */
  write_npy(dir, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }                     \n", 24);
  OT_ASSERT_OK(ot_npy_read(path, &a));
  assert_int_equal(a.shape[0], 3);
  ot_npy_free(&a);
  /* format 2.0, keys in another order, double quotes, no trailing comma */
  write_npy(dir, 2, "{\"shape\": (4,), \"fortran_order\": False, \"descr\": \"<i4\"}\n", 16);
  OT_ASSERT_OK(ot_npy_read(path, &a));
  assert_int_equal(a.dtype, OT_I32);
  assert_int_equal(a.shape[0], 4);
  assert_int_equal(((int32_t *)a.data)[3], 0x11111111);
  ot_npy_free(&a);
}

/* A header then raw little-endian bytes (what NumPy writes for '<i8', '<u2'). */
static void write_raw(const char *dir, const char *dict, const void *data, size_t n) {
  unsigned char buf[1024] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  size_t hl = strlen(dict);
  buf[8] = (unsigned char)(hl & 0xff);
  buf[9] = (unsigned char)(hl >> 8);
  memcpy(buf + 10, dict, hl);
  memcpy(buf + 10 + hl, data, n);
  ot_write_bytes(dir, "in.npy", buf, 10 + hl + n);
}

/* int64 (NumPy's default integer) and uint16 (token ids) arrays read as
 * int32; an int64 value outside int32 is refused, naming its index. */
static void test_int64_uint16(void **state) {
  const char *dir = *state;
  char path[4096];
  ot_tmp_path(path, sizeof path, dir, "in.npy");
  ot_npy_array a;
  const int64_t i8[4] = {0, -5, 2147483647, -2147483647 - 1};
  write_raw(dir, "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }          \n", i8, sizeof i8);
  OT_ASSERT_OK(ot_npy_read(path, &a));
  assert_int_equal(a.dtype, OT_I32);
  assert_int_equal(a.item_bytes, 8);
  for (int i = 0; i < 4; i++) assert_int_equal(((int32_t *)a.data)[i], (int32_t)i8[i]);
  ot_npy_free(&a);
  const uint16_t u2[3] = {0, 50256, 65535};
  write_raw(dir, "{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }          \n", u2, sizeof u2);
  OT_ASSERT_OK(ot_npy_read(path, &a));
  assert_int_equal(a.dtype, OT_I32);
  assert_int_equal(a.item_bytes, 2);
  for (int i = 0; i < 3; i++) assert_int_equal(((int32_t *)a.data)[i], (int32_t)u2[i]);
  ot_npy_free(&a);
  const int64_t big[2] = {7, (int64_t)1 << 40};
  write_raw(dir, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }          \n", big, sizeof big);
  assert_int_equal(ot_npy_read(path, &a), OT_ERR_FORMAT);
  assert_non_null(strstr(ot_last_error(), "at index 1 does not fit int32"));
}

static void test_bad_npy(void **state) {
  const char *dir = *state;
  char path[4096];
  ot_tmp_path(path, sizeof path, dir, "in.npy");
  ot_npy_array a;
  struct {
    int major;
    const char *dict;
    size_t data;
    ot_status want;
    const char *sub;
  } cases[] = {
      {1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16, OT_ERR_DTYPE, "'<f8' is not supported"},
      {1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, OT_ERR_DTYPE, "'>f4'"},
      {1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, OT_ERR_UNSUPPORTED, "Fortran order"},
      {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 12, OT_ERR_FORMAT,
       "truncated data: the shape needs 16 bytes, the file holds 12"},
      {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 12, OT_ERR_FORMAT, "excess data"},
      {1, "{'descr': '<f4', 'fortran_order': False}", 0, OT_ERR_FORMAT, "missing 'shape'"},
      {1, "{'descr': '<f4', 'shape': (1,), 'shape': (1,), 'fortran_order': False}", 4, OT_ERR_FORMAT, "twice"},
      {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8, OT_ERR_FORMAT, "non-negative"},
      {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2 2), }", 8, OT_ERR_FORMAT, "expected ',' or ')'"},
      {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 8, OT_ERR_FORMAT,
       "too large"},
      {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }", 8, OT_ERR_FORMAT,
       "too many elements"},
      {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", 8, OT_ERR_FORMAT, "unknown key"},
      {1, "{'descr': '<f4", 0, OT_ERR_FORMAT, "unterminated string"},
      {4, "{}", 0, OT_ERR_FORMAT, "version 4.0 is not supported"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_npy(dir, cases[i].major, cases[i].dict, cases[i].data);
    OT_ASSERT_ERR(ot_npy_read(path, &a), cases[i].want, "in.npy", cases[i].sub);
    assert_null(a.data);
  }
  ot_write_bytes(dir, "in.npy", "PK\x03\x04", 4);
  OT_ASSERT_ERR(ot_npy_read(path, &a), OT_ERR_FORMAT, "not a .npy file");
  write_npy(dir, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
  ot_write_bytes(dir, "in.npy", "\x93NUMPY\x01\x00\xff\x00{'descr'", 18); /* header cut short */
  OT_ASSERT_ERR(ot_npy_read(path, &a), OT_ERR_FORMAT, "truncated");
  OT_ASSERT_ERR(ot_npy_read(ot_tmp_path(path, sizeof path, dir, "none.npy"), &a), OT_ERR_NOT_FOUND, "none.npy");
}

/* The fuzz entry point never reads past the buffer: every prefix of a
 * valid header fails cleanly (ASan checks the reads). */
static void test_parse_prefixes(void **state) {
  (void)state;
  const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }\n";
  size_t n = 10 + sizeof dict - 1;
  unsigned char *buf = malloc(n);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)(sizeof dict - 1);
  buf[9] = 0;
  memcpy(buf + 10, dict, sizeof dict - 1);
  ot_npy_array a;
  size_t off;
  OT_ASSERT_OK(ot_npy_parse_header(buf, n, "mem", &a, &off));
  assert_int_equal(off, n);
  for (size_t len = 0; len < n; len++) {
    unsigned char *cut = malloc(len ? len : 1);
    memcpy(cut, buf, len);
    assert_int_not_equal(ot_npy_parse_header(cut, len, "mem", &a, &off), OT_OK);
    free(cut);
  }
  /* and a header length field that cuts the dict short of its '}' */
  for (size_t hl = 0; hl < sizeof dict - 2; hl++) {
    buf[8] = (unsigned char)hl;
    assert_int_not_equal(ot_npy_parse_header(buf, 10 + hl, "mem", &a, &off), OT_OK);
  }
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip_f32, setup, teardown),
      cmocka_unit_test_setup_teardown(test_round_trip_i32_shapes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_numpy_headers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_npy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_int64_uint16, setup, teardown),
      cmocka_unit_test(test_parse_prefixes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
