/* test_train_data.c — training tokens (src/io/tokens.c):
 * llm.c .bin and .npy (int32, int64, uint16) files written here are read
 * back window by window against the tokens written, including the wrap to
 * the start; every kind of bad file fails with the right status and a
 * message naming the file and the fault (and, under asan, without a leak). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "omptensor/tokens.h"
#include "ot_testio.h"

enum { N = 100, VOCAB = 50 };

static int setup(void **state) {
  *state = ot_tmpdir_create();
  return 0;
}

static int teardown(void **state) {
  ot_tmpdir_remove(*state);
  return 0;
}

/* The token at position i of every good file: not periodic in the window
 * length, so a window from the wrong place cannot match. */
static int32_t tok(int64_t i) { return (int32_t)((i * 7 + i / 13) % VOCAB); }

/* An llm.c .bin: header (magic, version, count as given) then `n` uint16 tokens. */
static void write_bin(const char *dir, const char *name, int32_t magic, int32_t version, int32_t count, int n) {
  size_t bytes = OT_TOKENS_BIN_HEADER_INTS * 4 + (size_t)n * 2;
  unsigned char *b = calloc(1, bytes);
  assert_non_null(b);
  int32_t h[3] = {magic, version, count};
  memcpy(b, h, sizeof h);
  for (int i = 0; i < n; i++) {
    uint16_t v = (uint16_t)tok(i);
    memcpy(b + OT_TOKENS_BIN_HEADER_INTS * 4 + 2 * i, &v, 2);
  }
  ot_write_bytes(dir, name, b, bytes);
  free(b);
}

/* A version 1.0 .npy of n tokens with the given descr ("<i4", "<i8", "<u2",
 * "<f4") and shape text ("(100,)"); returns where the data starts. */
static size_t write_npy(const char *dir, const char *name, const char *descr, const char *shape, int n) {
  int item = descr[2] - '0';
  char dict[128];
  int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
  size_t head = ((10 + (size_t)dl + 1 + 63) / 64) * 64;
  unsigned char *b = calloc(1, head + (size_t)n * (size_t)item);
  assert_non_null(b);
  memcpy(b, "\x93NUMPY\x01\x00", 8);
  b[8] = (unsigned char)(head - 10);
  memset(b + 10, ' ', head - 10);
  memcpy(b + 10, dict, (size_t)dl);
  b[head - 1] = '\n';
  for (int i = 0; i < n; i++) {
    int64_t v = tok(i);
    int32_t v4 = (int32_t)v;
    uint16_t v2 = (uint16_t)v;
    float vf = (float)v;
    const void *src = item == 8 ? (const void *)&v : item == 2 ? (const void *)&v2 : descr[1] == 'f' ? (const void *)&vf : (const void *)&v4;
    memcpy(b + head + (size_t)i * (size_t)item, src, (size_t)item);
  }
  ot_write_bytes(dir, name, b, head + (size_t)n * (size_t)item);
  free(b);
  return head;
}

/* Opens dir/name and checks windows of B x T against tok(): consecutive,
 * targets one ahead, and back to the start when a window would run past
 * the end. */
static void check_windows(const char *dir, const char *name) {
  char p[4096];
  ot_tokens *d;
  OT_ASSERT_OK(ot_tokens_open(ot_tmp_path(p, sizeof p, dir, name), VOCAB, &d));
  assert_int_equal(ot_tokens_count(d), N);
  enum { B = 3, T = 7 }; /* 21 tokens per window (+1): 4 windows fit in 100, the 5th wraps */
  int32_t in[B * T], tg[B * T];
  int64_t start = 0;
  for (int w = 0; w < 9; w++) {
    if (start + B * T + 1 > N) start = 0;
    OT_ASSERT_OK(ot_tokens_next(d, B, T, in, tg));
    for (int i = 0; i < B * T; i++) {
      assert_int_equal(in[i], tok(start + i));
      assert_int_equal(tg[i], tok(start + i + 1));
    }
    start += B * T;
  }
  /* A window larger than the file: refused, naming the file. */
  OT_ASSERT_ERR(ot_tokens_next(d, 10, 10, in, tg), OT_ERR_INVALID_ARG, name, "100 tokens", "101");
  ot_tokens_rewind(d);
  OT_ASSERT_OK(ot_tokens_next(d, 1, 5, in, tg));
  assert_int_equal(in[0], tok(0));
  ot_tokens_close(d);
}

static void test_bin(void **state) {
  write_bin(*state, "t.bin", OT_TOKENS_BIN_MAGIC, OT_TOKENS_BIN_VERSION, N, N);
  check_windows(*state, "t.bin");
}

static void test_npy(void **state) {
  static const char *descr[] = {"<i4", "<i8", "<u2"};
  for (int k = 0; k < 3; k++) {
    char name[32];
    snprintf(name, sizeof name, "t%d.npy", k);
    write_npy(*state, name, descr[k], "(100,)", N);
    check_windows(*state, name);
  }
}

/* Writes dir/name with `write`, expects open to fail with `want` and a
 * message holding name and every other needle; d stays NULL. */
#define EXPECT_BAD(dir, name, want, ...)                                                         \
  do {                                                                                           \
    char p_[4096];                                                                               \
    ot_tokens *d_ = (ot_tokens *)1;                                                            \
    OT_ASSERT_ERR(ot_tokens_open(ot_tmp_path(p_, sizeof p_, dir, name), VOCAB, &d_), want, name, \
                  __VA_ARGS__);                                                                  \
    assert_null(d_);                                                                             \
  } while (0)

static void test_bad_bin(void **state) {
  const char *dir = *state;
  write_bin(dir, "magic.bin", 1234, 1, N, N);
  EXPECT_BAD(dir, "magic.bin", OT_ERR_FORMAT, "not a token file", "20240520", "1234");
  write_bin(dir, "version.bin", OT_TOKENS_BIN_MAGIC, 2, N, N);
  EXPECT_BAD(dir, "version.bin", OT_ERR_FORMAT, "version 2");
  write_bin(dir, "short.bin", OT_TOKENS_BIN_MAGIC, 1, N, N - 10);
  EXPECT_BAD(dir, "short.bin", OT_ERR_FORMAT, "truncated", "says 100 tokens", "180 bytes");
  write_bin(dir, "long.bin", OT_TOKENS_BIN_MAGIC, 1, N - 10, N);
  EXPECT_BAD(dir, "long.bin", OT_ERR_FORMAT, "excess");
  write_bin(dir, "neg.bin", OT_TOKENS_BIN_MAGIC, 1, -5, 0);
  EXPECT_BAD(dir, "neg.bin", OT_ERR_FORMAT, "negative");
  int32_t cut[2] = {OT_TOKENS_BIN_MAGIC, 1}; /* magic and version, then the file ends */
  ot_write_bytes(dir, "header.bin", cut, sizeof cut);
  EXPECT_BAD(dir, "header.bin", OT_ERR_FORMAT, "truncated", "1024-byte header");
  ot_write_bytes(dir, "empty.bin", "", 0);
  EXPECT_BAD(dir, "empty.bin", OT_ERR_FORMAT, "not a token file");
  EXPECT_BAD(dir, "missing.bin", OT_ERR_NOT_FOUND, "cannot open");
  /* an id outside the vocabulary, at a known position */
  write_bin(dir, "vocab.bin", OT_TOKENS_BIN_MAGIC, 1, N, N);
  char p[4096];
  FILE *f = fopen(ot_tmp_path(p, sizeof p, dir, "vocab.bin"), "r+b");
  assert_non_null(f);
  uint16_t big = 60000;
  assert_int_equal(fseek(f, OT_TOKENS_BIN_HEADER_INTS * 4 + 2 * 37, SEEK_SET), 0);
  assert_int_equal(fwrite(&big, 2, 1, f), 1);
  fclose(f);
  EXPECT_BAD(dir, "vocab.bin", OT_ERR_FORMAT, "token 37", "id 60000", "0..49");
}

static void test_bad_npy(void **state) {
  const char *dir = *state;
  write_npy(dir, "f32.npy", "<f4", "(100,)", N);
  EXPECT_BAD(dir, "f32.npy", OT_ERR_FORMAT, "1-D integer array");
  write_npy(dir, "2d.npy", "<i4", "(10, 10)", N);
  EXPECT_BAD(dir, "2d.npy", OT_ERR_FORMAT, "1-D", "2-D");
  write_npy(dir, "cut.npy", "<i8", "(100,)", N - 1);
  EXPECT_BAD(dir, "cut.npy", OT_ERR_FORMAT, "truncated");
  write_npy(dir, "f8.npy", "<f8", "(100,)", N);
  EXPECT_BAD(dir, "f8.npy", OT_ERR_DTYPE, "'<f8'");
  /* int64 ids: one past int32, and one negative id */
  size_t head = write_npy(dir, "wide.npy", "<i8", "(100,)", N);
  char p[4096];
  FILE *f = fopen(ot_tmp_path(p, sizeof p, dir, "wide.npy"), "r+b");
  assert_non_null(f);
  int64_t v = (int64_t)1 << 40;
  assert_int_equal(fseek(f, (long)head + 8 * 5, SEEK_SET), 0);
  assert_int_equal(fwrite(&v, 8, 1, f), 1);
  fclose(f);
  EXPECT_BAD(dir, "wide.npy", OT_ERR_FORMAT, "1099511627776", "index 5", "int32");
  head = write_npy(dir, "neg.npy", "<i4", "(100,)", N);
  f = fopen(ot_tmp_path(p, sizeof p, dir, "neg.npy"), "r+b");
  assert_non_null(f);
  int32_t m = -3;
  assert_int_equal(fseek(f, (long)head + 4 * 99, SEEK_SET), 0);
  assert_int_equal(fwrite(&m, 4, 1, f), 1);
  fclose(f);
  EXPECT_BAD(dir, "neg.npy", OT_ERR_FORMAT, "token 99", "id -3");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_bin, setup, teardown),
      cmocka_unit_test_setup_teardown(test_npy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_bin, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_npy, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
