/* test_io_safetensors.c — safetensors write -> read round trip and every
 * kind of corrupt file the reader must refuse with a clear message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "io/st_internal.h"
#include "omptensor/safetensors.h"
#include "ot_testio.h"

static int setup(void **state) {
  *state = ot_tmpdir_create();
  return 0;
}

static int teardown(void **state) {
  ot_tmpdir_remove(*state);
  return 0;
}

/* ---- good path ------------------------------------------------------------ */

static void test_round_trip(void **state) {
  const char *dir = *state;
  float w[2][3] = {{1.5f, -2.0f, 3.25f}, {0.0f, 1e-30f, -7.0f}};
  uint16_t h[5] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000}; /* f16 bit patterns */
  uint16_t b[4] = {0x3f80, 0x4049, 0xff80, 0x0000};         /* bf16 */
  int32_t ids[3] = {7, -1, 2147483647};
  int8_t q[7] = {-128, -1, 0, 1, 2, 3, 127};
  float scalar = 42.0f;
  ot_st_tensor ts[] = {
      {"tiny.i8", OT_I8, 1, {7}, q},
      {"model.embed_tokens.weight", OT_F32, 2, {2, 3}, w},
      {"h", OT_F16, 1, {5}, h},
      {"b.bf16", OT_BF16, 4, {1, 2, 2, 1}, b},
      {"ids", OT_I32, 1, {3}, ids},
      {"scalar", OT_F32, 0, {0}, &scalar},
      {"empty", OT_F32, 2, {0, 4}, NULL},
  };
  const char *meta[] = {"format", "pt", "note", "round trip"};
  char path[4096];
  ot_tmp_path(path, sizeof path, dir, "rt.safetensors");
  OT_ASSERT_OK(ot_st_write(path, ts, 7, meta, 2));

  ot_st_file *f;
  OT_ASSERT_OK(ot_st_open(path, &f));
  assert_int_equal(ot_st_count(f), 7);
  assert_string_equal(ot_st_metadata(f, "format"), "pt");
  assert_string_equal(ot_st_metadata(f, "note"), "round trip");
  assert_null(ot_st_metadata(f, "absent"));
  for (int i = 1; i < ot_st_count(f); i++) /* sorted by name */
    assert_true(strcmp(ot_st_at(f, i - 1)->name, ot_st_at(f, i)->name) < 0);
  for (int i = 0; i < 7; i++) {
    const ot_st_info *info;
    OT_ASSERT_OK(ot_st_find(f, ts[i].name, &info));
    assert_int_equal(info->dtype, ts[i].dtype);
    assert_int_equal(info->ndim, ts[i].ndim);
    int64_t numel = 1;
    for (int d = 0; d < ts[i].ndim; d++) {
      assert_int_equal(info->shape[d], ts[i].shape[d]);
      numel *= ts[i].shape[d];
    }
    assert_int_equal(info->numel, numel);
    size_t bytes = ot_dtype_bytes(ts[i].dtype, numel);
    assert_int_equal(info->bytes, bytes);
    /* the writer aligns every tensor to its element size in the file */
    assert_int_equal(info->offset % ot_dtype_bytes(ts[i].dtype, 1), 0);
    unsigned char *got = malloc(bytes + 1);
    OT_ASSERT_OK(ot_st_read(f, info, got, bytes));
    if (bytes) assert_memory_equal(got, ts[i].data, bytes);
    const void *mapped;
    OT_ASSERT_OK(ot_st_map(f, info, &mapped));
    if (bytes) assert_memory_equal(mapped, ts[i].data, bytes);
    /* the wrong destination size is refused, naming the tensor */
    OT_ASSERT_ERR(ot_st_read(f, info, got, bytes + 1), OT_ERR_INVALID_ARG, ts[i].name);
    free(got);
  }
  const ot_st_info *none;
  OT_ASSERT_ERR(ot_st_find(f, "lm_head.weight", &none), OT_ERR_NOT_FOUND, "rt.safetensors", "lm_head.weight");
  ot_st_close(f);
  ot_st_close(NULL);
}

/* Reading the header bytes back: the data section starts 64-byte aligned
 * and tensors are packed without holes (what the reference reader demands). */
static void test_layout_has_no_holes(void **state) {
  const char *dir = *state;
  int8_t a[3] = {1, 2, 3};
  float c[2] = {4, 5};
  ot_st_tensor ts[] = {{"a", OT_I8, 1, {3}, a}, {"c", OT_F32, 1, {2}, c}};
  char path[4096];
  ot_tmp_path(path, sizeof path, dir, "l.safetensors");
  OT_ASSERT_OK(ot_st_write(path, ts, 2, NULL, 0));
  ot_st_file *f;
  OT_ASSERT_OK(ot_st_open(path, &f));
  const ot_st_info *ia, *ic;
  OT_ASSERT_OK(ot_st_find(f, "a", &ia));
  OT_ASSERT_OK(ot_st_find(f, "c", &ic));
  uint64_t start = ic->offset; /* f32 first (larger element) */
  assert_int_equal(start % 64, 0);
  assert_int_equal(ia->offset, start + 8);
  assert_int_equal(ot_st_data_bytes(f), 11);
  ot_st_close(f);
}

static void test_writer_refuses_bad_input(void **state) {
  const char *dir = *state;
  float x[2] = {0};
  char path[4096];
  ot_tmp_path(path, sizeof path, dir, "w.safetensors");
  ot_st_tensor dup[] = {{"x", OT_F32, 1, {2}, x}, {"x", OT_F32, 1, {2}, x}};
  OT_ASSERT_ERR(ot_st_write(path, dup, 2, NULL, 0), OT_ERR_INVALID_ARG, "'x' given twice");
  ot_st_tensor q8[] = {{"q", OT_Q8B, 1, {32}, x}};
  OT_ASSERT_ERR(ot_st_write(path, q8, 1, NULL, 0), OT_ERR_DTYPE, "q8b");
  ot_st_tensor neg[] = {{"n", OT_F32, 1, {-2}, x}};
  OT_ASSERT_ERR(ot_st_write(path, neg, 1, NULL, 0), OT_ERR_INVALID_ARG, "bad shape");
  ot_st_tensor meta_name[] = {{"__metadata__", OT_F32, 1, {2}, x}};
  OT_ASSERT_ERR(ot_st_write(path, meta_name, 1, NULL, 0), OT_ERR_INVALID_ARG, "reserved");
  /* nothing half-written is left behind */
  ot_st_file *f;
  OT_ASSERT_ERR(ot_st_open(path, &f), OT_ERR_NOT_FOUND, "w.safetensors");
  assert_null(f);
}

/* ---- bad input ------------------------------------------------------------ */

static ot_status open_raw(const char *dir, const char *json, size_t data_bytes, ot_st_file **f) {
  ot_write_st_raw(dir, "bad.safetensors", json, data_bytes);
  char path[4096];
  return ot_st_open(ot_tmp_path(path, sizeof path, dir, "bad.safetensors"), f);
}

#define BAD(json, data, want, ...)                                                 \
  do {                                                                             \
    ot_st_file *f_ = (ot_st_file *)1;                                              \
    OT_ASSERT_ERR(open_raw(dir, json, data, &f_), want, "bad.safetensors", __VA_ARGS__); \
    assert_null(f_);                                                               \
  } while (0)

static void test_missing_file(void **state) {
  char path[4096];
  ot_st_file *f;
  OT_ASSERT_ERR(ot_st_open(ot_tmp_path(path, sizeof path, *state, "nope.safetensors"), &f), OT_ERR_NOT_FOUND,
                "nope.safetensors", "No such file");
  OT_ASSERT_ERR(ot_st_open(*state, &f), OT_ERR_IO, "directory");
}

static void test_truncated(void **state) {
  const char *dir = *state;
  char path[4096];
  ot_tmp_path(path, sizeof path, dir, "t.safetensors");
  ot_st_file *f;
  /* shorter than the length prefix */
  ot_write_bytes(dir, "t.safetensors", "\x10\x00\x00", 3);
  OT_ASSERT_ERR(ot_st_open(path, &f), OT_ERR_FORMAT, "t.safetensors", "truncated");
  /* a real file cut inside its data section */
  float w[64] = {0};
  ot_st_tensor ts[] = {{"w", OT_F32, 1, {64}, w}};
  OT_ASSERT_OK(ot_st_write(path, ts, 1, NULL, 0));
  FILE *fp = fopen(path, "rb");
  unsigned char buf[4096];
  size_t n = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  ot_write_bytes(dir, "t.safetensors", buf, n - 10);
  OT_ASSERT_ERR(ot_st_open(path, &f), OT_ERR_FORMAT, "t.safetensors", "'w'", "beyond the data section (246 bytes)");
  /* cut inside the header */
  ot_write_bytes(dir, "t.safetensors", buf, 20);
  OT_ASSERT_ERR(ot_st_open(path, &f), OT_ERR_FORMAT, "t.safetensors", "header length", "beyond the file (20 bytes)");
}

static void test_header_length_beyond_file(void **state) {
  const char *dir = *state;
  unsigned char buf[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
  ot_write_bytes(dir, "bad.safetensors", buf, 10);
  char path[4096];
  ot_st_file *f;
  OT_ASSERT_ERR(ot_st_open(ot_tmp_path(path, sizeof path, dir, "bad.safetensors"), &f), OT_ERR_FORMAT,
                "bad.safetensors", "header length 9223372036854775807 beyond the file (10 bytes)");
  /* the header cap, checked on the prefix alone (no 100 MB file needed) */
  unsigned char pre[8] = {0, 0, 0, 0x10, 0, 0, 0, 0}; /* 256 MiB */
  uint64_t n;
  OT_ASSERT_ERR(ot_st_check_prefix(pre, (uint64_t)1 << 40, "big.safetensors", &n), OT_ERR_FORMAT,
                "big.safetensors", "exceeds");
}

static void test_invalid_json(void **state) {
  const char *dir = *state;
  BAD("{\"w\": {\"dtype\": \"F32\", ", 0, OT_ERR_FORMAT, "invalid JSON header", "line 1");
  BAD("not json at all", 0, OT_ERR_FORMAT, "invalid JSON header");
  BAD("", 0, OT_ERR_FORMAT, "invalid JSON header");
  BAD("[1, 2, 3]", 0, OT_ERR_FORMAT, "the header is an array");
  BAD("{\"a\": {\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
      " \"a\": {\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
      8, OT_ERR_FORMAT, "duplicate");
  BAD("{\"w\": [1, 2]}", 0, OT_ERR_FORMAT, "'w'", "expected an object");
  BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, OT_ERR_FORMAT, "'w'", "no \"data_offsets\"");
}

static void test_unknown_dtype(void **state) {
  const char *dir = *state;
  BAD("{\"w\": {\"dtype\": \"F33\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, OT_ERR_DTYPE, "'w'",
      "unknown dtype \"F33\"");
  BAD("{\"w\": {\"dtype\": \"F64\", \"shape\": [1], \"data_offsets\": [0, 8]}}", 8, OT_ERR_DTYPE, "'w'",
      "unsupported dtype F64");
  BAD("{\"w\": {\"dtype\": \"BOOL\", \"shape\": [1], \"data_offsets\": [0, 1]}}", 1, OT_ERR_DTYPE,
      "unsupported dtype BOOL");
  BAD("{\"w\": {\"dtype\": 5, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, OT_ERR_FORMAT, "dtype is an integer");
}

static void test_bad_shape(void **state) {
  const char *dir = *state;
  BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [2, -1], \"data_offsets\": [0, 4]}}", 4, OT_ERR_FORMAT, "'w'",
      "shape element 1 is negative");
  BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [\"2\"], \"data_offsets\": [0, 8]}}", 8, OT_ERR_FORMAT,
      "shape element 0 is a string");
  BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": 4, \"data_offsets\": [0, 16]}}", 16, OT_ERR_FORMAT,
      "shape is an integer");
  BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,2], \"data_offsets\": [0, 8]}}", 8, OT_ERR_UNSUPPORTED,
      "'w' has 5 dimensions", "at most 4");
  BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 8]}}", 8,
      OT_ERR_FORMAT, "overflows");
  BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [2.5], \"data_offsets\": [0, 8]}}", 8, OT_ERR_FORMAT,
      "shape element 0 is a real number");
}

static void test_bad_offsets(void **state) {
  const char *dir = *state;
  BAD("{\"lm_head.weight\": {\"dtype\": \"F32\", \"shape\": [249999], \"data_offsets\": [0, 999999]}}", 4096,
      OT_ERR_FORMAT, "tensor 'lm_head.weight' data_offsets [0, 999999] beyond the data section (4096 bytes)");
  BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 8, OT_ERR_FORMAT,
      "'w'", "hold 4 bytes but shape [2] of F32 needs 8");
  BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [8, 4]}}", 8, OT_ERR_FORMAT,
      "end before they begin");
  BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}", 8, OT_ERR_FORMAT,
      "two non-negative integers");
  BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4, 8]}}", 8, OT_ERR_FORMAT,
      "[begin, end]");
  BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 99999999999999999999]}}", 8,
      OT_ERR_FORMAT, "invalid JSON");
}

static void test_overlap(void **state) {
  const char *dir = *state;
  BAD("{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
      " \"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}",
      32, OT_ERR_FORMAT, "tensors 'a' data_offsets [0, 16] and 'b' [8, 24] overlap");
  /* a range inside a long one two entries earlier */
  BAD("{\"long\": {\"dtype\": \"I8\", \"shape\": [100], \"data_offsets\": [0, 100]},"
      " \"x\": {\"dtype\": \"I8\", \"shape\": [10], \"data_offsets\": [10, 20]},"
      " \"y\": {\"dtype\": \"I8\", \"shape\": [10], \"data_offsets\": [50, 60]}}",
      100, OT_ERR_FORMAT, "'long'", "overlap");
  /* identical ranges */
  BAD("{\"a\": {\"dtype\": \"I8\", \"shape\": [4], \"data_offsets\": [0, 4]},"
      " \"b\": {\"dtype\": \"I8\", \"shape\": [4], \"data_offsets\": [0, 4]}}",
      4, OT_ERR_FORMAT, "overlap");
  /* touching ranges and empty tensors at the boundaries tile the data section */
  ot_st_file *f;
  OT_ASSERT_OK(open_raw(dir,
                        "{\"a\": {\"dtype\": \"I8\", \"shape\": [4], \"data_offsets\": [0, 4]},"
                        " \"e\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 4]},"
                        " \"z\": {\"dtype\": \"F32\", \"shape\": [0, 3], \"data_offsets\": [0, 0]},"
                        " \"b\": {\"dtype\": \"I8\", \"shape\": [6], \"data_offsets\": [4, 10]},"
                        " \"c\": {\"dtype\": \"I8\", \"shape\": [2], \"data_offsets\": [10, 12]},"
                        " \"t\": {\"dtype\": \"I8\", \"shape\": [0], \"data_offsets\": [12, 12]}}",
                        12, &f));
  assert_int_equal(ot_st_count(f), 6);
  const ot_st_info *c;
  OT_ASSERT_OK(ot_st_find(f, "c", &c));
  unsigned char got[2];
  OT_ASSERT_OK(ot_st_read(f, c, got, 2));
  assert_int_equal(got[0], 10); /* ot_write_st_raw's counting pattern */
  assert_int_equal(got[1], 11);
  ot_st_close(f);
}

/* Issue 14: the data offsets must cover the data section exactly, as the
 * reference reader requires — no hole, nothing after the last tensor, no
 * empty tensor inside another's bytes. */
static void test_offsets_tile_the_data(void **state) {
  const char *dir = *state;
  /* a hole between two tensors */
  BAD("{\"a\": {\"dtype\": \"I8\", \"shape\": [4], \"data_offsets\": [0, 4]},"
      " \"c\": {\"dtype\": \"I8\", \"shape\": [2], \"data_offsets\": [6, 8]}}",
      8, OT_ERR_FORMAT, "tensor 'c' data_offsets [6, 8] leave bytes [4, 6) of the data section unused", "after 'a'");
  /* the first tensor not at 0 */
  BAD("{\"a\": {\"dtype\": \"I8\", \"shape\": [4], \"data_offsets\": [2, 6]}}", 6, OT_ERR_FORMAT,
      "'a'", "leave bytes [0, 2)");
  /* bytes after the last tensor */
  BAD("{\"a\": {\"dtype\": \"I8\", \"shape\": [4], \"data_offsets\": [0, 4]}}", 7, OT_ERR_FORMAT,
      "the tensors end at byte 4 of the data section (last 'a') but it holds 7 bytes", "3 bytes after the last");
  /* data but no tensor */
  BAD("{\"__metadata__\": {\"format\": \"pt\"}}", 5, OT_ERR_FORMAT, "no tensor data", "holds 5 bytes");
  /* an empty tensor inside another's range */
  BAD("{\"a\": {\"dtype\": \"I8\", \"shape\": [4], \"data_offsets\": [0, 4]},"
      " \"e\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [2, 2]}}",
      4, OT_ERR_FORMAT, "'a'", "'e'", "overlap");
}

/* Issue 14's silent wrong answer: a header length a few bytes short of the
 * real one still parses (the JSON's padding is cut off), and every tensor
 * would be read from shifted offsets. It must fail naming the file. */
static void test_header_length_short(void **state) {
  const char *dir = *state;
  float w[4] = {1, 2, 3, 4};
  ot_st_tensor ts[] = {{"weight", OT_F32, 1, {4}, w}};
  char path[4096];
  ot_tmp_path(path, sizeof path, dir, "s.safetensors");
  OT_ASSERT_OK(ot_st_write(path, ts, 1, NULL, 0));
  unsigned char img[512];
  FILE *fp = fopen(path, "rb");
  size_t len = fread(img, 1, sizeof img, fp);
  fclose(fp);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | img[i];
  for (uint64_t k = 1; k <= 3; k++) assert_int_equal(img[8 + n - k], ' '); /* padded to 64-byte alignment */
  for (uint64_t cut = 1; cut <= 3; cut++) {
    uint64_t m = n - cut;
    for (int i = 0; i < 8; i++) img[i] = (unsigned char)(m >> (8 * i));
    ot_write_bytes(dir, "s.safetensors", img, len);
    ot_st_file *f = (ot_st_file *)1;
    char bytes[64];
    snprintf(bytes, sizeof bytes, "%llu bytes after the last tensor", (unsigned long long)cut);
    OT_ASSERT_ERR(ot_st_open(path, &f), OT_ERR_FORMAT, "s.safetensors", "'weight'", bytes, "header length");
    assert_null(f);
  }
}

static void test_metadata(void **state) {
  const char *dir = *state;
  BAD("{\"__metadata__\": {\"format\": 1}}", 0, OT_ERR_FORMAT, "__metadata__ value of 'format' is an integer");
  BAD("{\"__metadata__\": [\"x\"]}", 0, OT_ERR_FORMAT, "__metadata__ is an array");
  ot_st_file *f;
  OT_ASSERT_OK(open_raw(dir, "{\"__metadata__\": {\"format\": \"pt\"}}", 0, &f));
  assert_int_equal(ot_st_count(f), 0);
  assert_string_equal(ot_st_metadata(f, "format"), "pt");
  ot_st_close(f);
}

/* The fuzz entry point: a whole file image in memory. */
static void test_parse_buffer(void **state) {
  (void)state;
  const char json[] = "{\"w\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,3]}}";
  unsigned char buf[128] = {sizeof json - 1};
  memcpy(buf + 8, json, sizeof json - 1);
  ot_st_header h;
  OT_ASSERT_OK(ot_st_parse_buffer(buf, 8 + sizeof json - 1 + 3, "mem", &h));
  assert_int_equal(h.n, 1);
  assert_int_equal(h.tensors[0].offset, 8 + sizeof json - 1);
  ot_st_header_free(&h);
  OT_ASSERT_ERR(ot_st_parse_buffer(buf, 8 + sizeof json - 1 + 2, "mem", &h), OT_ERR_FORMAT, "mem",
                "beyond the data section (2 bytes)");
  assert_int_equal(h.n, 0);
  for (size_t len = 0; len < 8 + sizeof json - 1; len++) /* every prefix fails cleanly */
    assert_int_not_equal(ot_st_parse_buffer(buf, len, "mem", &h), OT_OK);
}

/* Every single-byte corruption of a real file's prefix and header either
 * fails with a message or yields tensors that lie inside the buffer, do
 * not overlap and cover its data section (ASan checks the parser's own reads). */
static void test_mutations(void **state) {
  const char *dir = *state;
  float w[6] = {1, 2, 3, 4, 5, 6};
  uint16_t h[3] = {1, 2, 3};
  int8_t q[5] = {1, 2, 3, 4, 5};
  ot_st_tensor ts[] = {{"w", OT_F32, 2, {2, 3}, w}, {"h", OT_BF16, 1, {3}, h}, {"q", OT_I8, 1, {5}, q}};
  const char *meta[] = {"format", "pt"};
  char path[4096];
  ot_tmp_path(path, sizeof path, dir, "m.safetensors");
  OT_ASSERT_OK(ot_st_write(path, ts, 3, meta, 1));
  unsigned char img[1024];
  FILE *fp = fopen(path, "rb");
  size_t len = fread(img, 1, sizeof img, fp);
  fclose(fp);
  size_t head = 8 + (size_t)img[0] + ((size_t)img[1] << 8);
  static const unsigned char vals[] = {0x00, 0xff, '"', '9', ']', '{', ',', '-', 0x80};
  int ok = 0, failed = 0;
  for (size_t i = 0; i < head; i++)
    for (size_t v = 0; v < sizeof vals; v++) {
      unsigned char *m = malloc(len); /* exact size: ASan sees any read past the end */
      memcpy(m, img, len);
      m[i] = vals[v];
      ot_st_header hd;
      if (ot_st_parse_buffer(m, len, "mut", &hd) == OT_OK) {
        ok++;
        uint64_t covered = 0; /* the ranges tile the data section: their bytes add up to it */
        for (int t = 0; t < hd.n; t++) covered += hd.tensors[t].bytes;
        assert_int_equal(covered, hd.data_bytes);
        assert_int_equal(hd.data_start + hd.data_bytes, len);
        for (int t = 0; t < hd.n; t++) {
          assert_true(hd.tensors[t].offset >= hd.data_start);
          assert_true(hd.tensors[t].offset + hd.tensors[t].bytes <= len);
          assert_int_equal(hd.tensors[t].bytes, ot_dtype_bytes(hd.tensors[t].dtype, hd.tensors[t].numel));
        }
        ot_st_header_free(&hd);
      } else {
        failed++;
        assert_non_null(strstr(ot_last_error(), "mut"));
      }
      free(m);
    }
  assert_true(ok > 0 && failed > 0); /* both outcomes were exercised */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_layout_has_no_holes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_writer_refuses_bad_input, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
      cmocka_unit_test_setup_teardown(test_header_length_beyond_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_invalid_json, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_dtype, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_shape, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_offsets, setup, teardown),
      cmocka_unit_test_setup_teardown(test_overlap, setup, teardown),
      cmocka_unit_test_setup_teardown(test_offsets_tile_the_data, setup, teardown),
      cmocka_unit_test_setup_teardown(test_header_length_short, setup, teardown),
      cmocka_unit_test_setup_teardown(test_metadata, setup, teardown),
      cmocka_unit_test(test_parse_buffer),
      cmocka_unit_test_setup_teardown(test_mutations, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
