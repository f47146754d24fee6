/* test_io_gguf.c — the GGUF reader (gguf.h) against files written by the
 * `gguf` package (scripts/gen_gguf_ref.py, tests/data/gguf):
 *   - tiny.gguf (gguf.GGUFWriter): every metadata type read back as written,
 *     the tensors' names, shapes (outermost first), types, sizes and
 *     offsets (aligned to its general.alignment of 64); the values of the
 *     F32, F16, BF16, Q8_0 and Q4_0 tensors equal to gguf.quants.dequantize's,
 *     bit for bit (Q4_0 read as omptensor's q4b: the same layout);
 *   - random blocks of Q8_0, Q4_0, Q4_K and Q6_K dequantized bit for bit as
 *     gguf.quants does (blocks.json);
 *   - every prefix of it short of its last tensor byte is refused, and each
 *     bad-*.gguf for its one defect, naming the file and what is wrong;
 *   - files written here (tests/support/gguf_build.h) with one defect the
 *     gguf package cannot write: a key given twice, tensors sharing bytes,
 *     general.alignment of another type, a bad magic named; and a key read
 *     at its type (ot_gguf_expect) refused by name when it has another. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <jansson.h>

#include "gguf_build.h"
#include "omptensor/dtype.h"
#include "omptensor/gguf.h"
#include "omptensor/tokenizer.h"
#include "ot_test.h"
#include "ot_testio.h"

static char *path_of(const char *name) {
  const char *d = getenv("OT_TEST_DATA");
  assert_non_null(d);
  char *p = malloc(strlen(d) + strlen(name) + 8);
  assert_non_null(p);
  sprintf(p, "%s/gguf/%s", d, name);
  return p;
}

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(*len + 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, *len, f), *len);
  fclose(f);
  return b;
}

static void tiny_file(void **state) {
  (void)state;
  char *gp = path_of("tiny.gguf"), *jp = path_of("tiny.json");
  json_error_t jerr;
  json_t *ex = json_load_file(jp, 0, &jerr);
  if (!ex) fail_msg("%s: %s", jp, jerr.text);
  ot_gguf *g;
  OT_ASSERT_OK(ot_gguf_open(gp, &g));
  assert_int_equal(ot_gguf_version(g), 3);
  assert_int_equal(ot_gguf_alignment(g), 64);
  assert_int_equal(ot_gguf_data_offset(g) % 64, 0);
  /* metadata */
  json_t *md = json_object_get(ex, "metadata");
  const char *key;
  json_t *v;
  json_object_foreach(md, key, v) {
    if (!ot_gguf_has(g, key)) fail_msg("metadata '%s' missing", key);
    int64_t i;
    double f;
    if (json_is_string(v)) {
      assert_non_null(ot_gguf_get_string(g, key));
      assert_string_equal(ot_gguf_get_string(g, key), json_string_value(v));
    } else if (json_is_integer(v)) {
      assert_true(ot_gguf_get_int(g, key, &i));
      assert_true(i == (int64_t)json_integer_value(v));
    } else if (json_is_real(v)) {
      assert_true(ot_gguf_get_float(g, key, &f));
      assert_true(f == json_real_value(v) || (float)f == (float)json_real_value(v)); /* f32 keys hold floats */
    } else if (json_is_array(v)) {
      for (size_t j = 0; j < json_array_size(v); j++)
        assert_string_equal(ot_gguf_get_array_string(g, key, j), json_string_value(json_array_get(v, j)));
      assert_null(ot_gguf_get_array_string(g, key, json_array_size(v)));
    }
  }
  ot_gguf_vtype t, e;
  uint64_t count = 0;
  int found = 0;
  for (int k = 0; k < ot_gguf_num_kv(g); k++)
    if (strcmp(ot_gguf_key_at(g, k, &t, &e, &count), "t.ints") == 0) {
      found = 1;
      assert_int_equal(t, OT_GGUF_V_ARRAY);
      assert_int_equal(e, OT_GGUF_V_I32);
      assert_int_equal(count, 5);
    }
  assert_true(found);
  assert_null(ot_gguf_get_string(g, "t.u8")); /* the wrong type is no value */
  /* tensors */
  size_t flen;
  unsigned char *file = slurp(gp, &flen);
  json_t *ts = json_object_get(ex, "tensors");
  assert_int_equal(ot_gguf_num_tensors(g), (int)json_array_size(ts));
  for (size_t k = 0; k < json_array_size(ts); k++) {
    json_t *jt = json_array_get(ts, k);
    const char *name = json_string_value(json_object_get(jt, "name"));
    const ot_gguf_tensor *gt = ot_gguf_find_tensor(g, name);
    if (!gt) fail_msg("tensor '%s' missing", name);
    json_t *shape = json_object_get(jt, "shape");
    assert_int_equal(gt->ndim, (int)json_array_size(shape));
    int64_t n = 1;
    for (int d = 0; d < gt->ndim; d++) {
      assert_int_equal(gt->shape[d], json_integer_value(json_array_get(shape, (size_t)d)));
      n *= gt->shape[d];
    }
    const char *type = json_string_value(json_object_get(jt, "type"));
    assert_string_equal(ot_gguf_type_name(gt->type), type);
    assert_int_equal((gt->offset - ot_gguf_data_offset(g)) % 64, 0);
    assert_true(gt->offset + gt->bytes <= flen);
    json_t *vals = json_object_get(jt, "values");
    assert_int_equal(json_array_size(vals), (size_t)n);
    float *got = malloc((size_t)n * sizeof *got);
    assert_non_null(got);
    const void *src = file + gt->offset;
    ot_dtype dt = gt->type == OT_GGUF_F32    ? OT_F32
                  : gt->type == OT_GGUF_F16  ? OT_F16
                  : gt->type == OT_GGUF_BF16 ? OT_BF16
                  : gt->type == OT_GGUF_Q4_0 ? OT_Q4B
                                             : OT_DTYPE_COUNT;
    if (dt == OT_DTYPE_COUNT) { /* Q8_0: through ot_gguf_dequantize */
      assert_int_equal(gt->bytes, (uint64_t)(n / 32 * 34));
      OT_ASSERT_OK(ot_gguf_dequantize(gt->type, src, n, got));
    } else {
      assert_int_equal(gt->bytes, ot_dtype_bytes(dt, n));
      OT_ASSERT_OK(ot_convert(OT_F32, got, dt, src, n));
    }
    for (int64_t i = 0; i < n; i++)
      if (got[i] != (float)json_real_value(json_array_get(vals, (size_t)i)))
        fail_msg("%s (%s) value %lld: %.9g, gguf.quants.dequantize %.9g", name, type, (long long)i, got[i],
                 json_real_value(json_array_get(vals, (size_t)i)));
    free(got);
  }
  assert_null(ot_gguf_find_tensor(g, "nope"));
  uint64_t end = 0; /* past it the writer only pads */
  for (int k = 0; k < ot_gguf_num_tensors(g); k++)
    if (ot_gguf_tensor_at(g, k)->offset + ot_gguf_tensor_at(g, k)->bytes > end)
      end = ot_gguf_tensor_at(g, k)->offset + ot_gguf_tensor_at(g, k)->bytes;
  ot_gguf_close(g);
  /* every prefix that cuts into the header or a tensor is refused */
  for (size_t cut = 0; cut < end; cut++) {
    ot_gguf *p = NULL;
    ot_status s = ot_gguf_open_mem(file, cut, "tiny-prefix", &p);
    if (s == OT_OK) fail_msg("a prefix of %zu of %zu bytes was accepted", cut, flen);
    assert_int_equal(s, OT_ERR_FORMAT);
    assert_null(p);
    assert_non_null(strstr(ot_last_error(), "tiny-prefix"));
  }
  ot_gguf *whole = NULL;
  OT_ASSERT_OK(ot_gguf_open_mem(file, flen, "tiny", &whole));
  assert_int_equal(ot_gguf_num_tensors(whole), (int)json_array_size(ts));
  ot_gguf_close(whole);
  free(file);
  json_decref(ex);
  free(gp);
  free(jp);
}

/* Random blocks of Q8_0, Q4_0, Q4_K and Q6_K (random quants and scales):
 * ot_gguf_dequantize gives gguf.quants.dequantize's values, bit for bit. */
static void dequantize_blocks(void **state) {
  (void)state;
  char *jp = path_of("blocks.json");
  json_error_t jerr;
  json_t *all = json_load_file(jp, 0, &jerr);
  if (!all) fail_msg("%s: %s", jp, jerr.text);
  assert_int_equal(json_array_size(all), 4);
  for (size_t k = 0; k < json_array_size(all); k++) {
    json_t *b = json_array_get(all, k);
    const char *type = json_string_value(json_object_get(b, "type")), *hex = json_string_value(json_object_get(b, "hex"));
    const uint32_t gt = (uint32_t)json_integer_value(json_object_get(b, "ggml_type"));
    const int64_t n = json_integer_value(json_object_get(b, "n"));
    assert_string_equal(ot_gguf_type_name(gt), type);
    const size_t nb = strlen(hex) / 2;
    unsigned char *raw = malloc(nb);
    float *got = malloc((size_t)n * sizeof *got);
    assert_non_null(raw);
    assert_non_null(got);
    for (size_t i = 0; i < nb; i++) {
      unsigned v;
      assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
      raw[i] = (unsigned char)v;
    }
    OT_ASSERT_OK(ot_gguf_dequantize(gt, raw, n, got));
    json_t *vals = json_object_get(b, "values");
    assert_int_equal(json_array_size(vals), (size_t)n);
    for (int64_t i = 0; i < n; i++)
      if (got[i] != (float)json_real_value(json_array_get(vals, (size_t)i)))
        fail_msg("%s value %lld: %.9g, gguf.quants.dequantize %.9g", type, (long long)i, got[i],
                 json_real_value(json_array_get(vals, (size_t)i)));
    OT_ASSERT_FAILS(ot_gguf_dequantize(gt, raw, n - 1, got), OT_ERR_SHAPE, "whole blocks");
    free(raw);
    free(got);
  }
  float y[256];
  unsigned char z[256] = {0};
  OT_ASSERT_FAILS(ot_gguf_dequantize(OT_GGUF_Q5_K, z, 256, y), OT_ERR_UNSUPPORTED, "Q5_K");
  json_decref(all);
  free(jp);
}

static void bad_files(void **state) {
  (void)state;
  static const struct {
    const char *file, *says;
  } cases[] = {
      {"bad-magic.gguf", "not a GGUF file"},
      {"bad-version.gguf", "GGUF version 7"},
      {"bad-alignment.gguf", "general.alignment"},
      {"bad-offset.gguf", "tensor 'w'"},
      {"bad-unaligned.gguf", "not a multiple of the alignment"},
      {"bad-type.gguf", "ggml type 99"},
      {"bad-blocks.gguf", "whole blocks of 32"},
      {"bad-dup.gguf", "two tensors are named 'w'"},
      {"bad-truncated.gguf", "bad-truncated.gguf"},
      {"bad-dims.gguf", "dim 1 is 0"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    char *p = path_of(cases[k].file);
    ot_gguf *g = NULL;
    ot_status s = ot_gguf_open(p, &g);
    if (s == OT_OK) fail_msg("%s was accepted", cases[k].file);
    assert_int_equal(s, OT_ERR_FORMAT);
    assert_null(g);
    if (!strstr(ot_last_error(), cases[k].says) || !strstr(ot_last_error(), cases[k].file))
      fail_msg("%s: the message does not say '%s' and name the file: %s", cases[k].file, cases[k].says,
               ot_last_error());
    free(p);
  }
  ot_gguf *g = NULL;
  assert_int_equal(ot_gguf_open("/nonexistent/x.gguf", &g), OT_ERR_NOT_FOUND);
  assert_int_equal(ot_gguf_open_mem(NULL, 4, "x", &g), OT_ERR_INVALID_ARG);
  ot_gguf_close(NULL);
}


/* A file written here, opened from memory: its status, and the message
 * names the file and says every one of the strings. */
static void expect_refused(const ot_gb *b, const char *label, ...) {
  ot_gguf *g = NULL;
  ot_status s = ot_gguf_open_mem(b->p, b->len, label, &g);
  if (s == OT_OK) fail_msg("%s was accepted", label);
  assert_int_equal(s, OT_ERR_FORMAT);
  assert_null(g);
  printf("%s\n", ot_last_error());
  assert_non_null(strstr(ot_last_error(), label));
  va_list ap;
  va_start(ap, label);
  for (const char *w; (w = va_arg(ap, const char *));)
    if (!strstr(ot_last_error(), w)) fail_msg("%s: the message does not say '%s': %s", label, w, ot_last_error());
  va_end(ap);
}

/* llama.cpp's reader refuses a key given twice; ours took the first value. */
static void duplicate_key(void **state) {
  (void)state;
  ot_gb b;
  ot_gb_init(&b);
  ot_gb_u32(&b, "llama.block_count", 2);
  ot_gb_str(&b, "general.architecture", "llama");
  ot_gb_u32(&b, "llama.block_count", 40);
  ot_gb_finish(&b, 0);
  expect_refused(&b, "dup-key.gguf", "metadata key 'llama.block_count' is given twice (entries 0 and 2)", NULL);
  ot_gb_free(&b);
}

/* Two tensors whose bytes overlap (one offset, or one starting inside the
 * other) are refused naming both; tensors side by side are fine. */
static void overlapping_tensors(void **state) {
  (void)state;
  static const uint64_t eight[1] = {8}, sixteen[1] = {16};
  static const struct {
    uint64_t off_b;
    const uint64_t *ne_a;
    int ok;
  } cases[] = {{0, eight, 0}, {32, sixteen, 0}, {32, eight, 1}, {64, sixteen, 1}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    ot_gb b;
    ot_gb_init(&b);
    ot_gb_str(&b, "general.architecture", "llama");
    ot_gb_tensor(&b, "b.weight", 1, eight, OT_GGUF_F32, cases[k].off_b); /* listed first, lies second */
    ot_gb_tensor(&b, "a.weight", 1, cases[k].ne_a, OT_GGUF_F32, 0);
    ot_gb_finish(&b, 128);
    if (cases[k].ok) {
      ot_gguf *g;
      OT_ASSERT_OK(ot_gguf_open_mem(b.p, b.len, "side-by-side.gguf", &g));
      ot_gguf_close(g);
    } else {
      expect_refused(&b, "overlap.gguf", "tensors 'a.weight' and 'b.weight' overlap", NULL);
    }
    ot_gb_free(&b);
  }
}

/* general.alignment is a u32 in llama.cpp (its reader takes no other); a
 * bad magic is named as found. */
static void alignment_type_and_magic(void **state) {
  (void)state;
  ot_gb b;
  ot_gb_init(&b);
  ot_gb_i32(&b, "general.alignment", 64);
  ot_gb_finish(&b, 0);
  expect_refused(&b, "align-i32.gguf", "general.alignment is i32, expected u32", NULL);
  memcpy(b.p, "GGUX", 4);
  expect_refused(&b, "magic.gguf", "not a GGUF file (magic 'GGUX', expected 'GGUF')", NULL);
  b.p[3] = 0;
  expect_refused(&b, "magic0.gguf", "(magic 'GGU?', expected 'GGUF')", NULL);
  ot_gb_free(&b);
  ot_gb_init(&b);
  ot_gb_u32(&b, "general.alignment", 64);
  ot_gb_finish(&b, 0);
  ot_gguf *g;
  OT_ASSERT_OK(ot_gguf_open_mem(b.p, b.len, "align-u32.gguf", &g));
  assert_int_equal(ot_gguf_alignment(g), 64);
  ot_gguf_close(g);
  ot_gb_free(&b);
}

/* ot_gguf_expect: the exact type or a refusal that names the file, the key,
 * the type found and the one expected; a float must be finite. */
static void expect_types(void **state) {
  (void)state;
  ot_gb b;
  ot_gb_init(&b);
  ot_gb_u32(&b, "k.u32", 7);
  ot_gb_i32(&b, "k.i32", 7);
  ot_gb_f32(&b, "k.f32", 1.5f);
  ot_gb_f32(&b, "k.nan", NAN);
  ot_gb_f32(&b, "k.inf", -INFINITY);
  ot_gb_strs(&b, "k.strs", 1, (const char *const[]){"x"});
  ot_gb_finish(&b, 0);
  ot_gguf *g;
  OT_ASSERT_OK(ot_gguf_open_mem(b.p, b.len, "types.gguf", &g));
  int has = -1;
  OT_ASSERT_OK(ot_gguf_expect(g, "k.u32", OT_GGUF_V_U32, &has));
  assert_int_equal(has, 1);
  OT_ASSERT_OK(ot_gguf_expect(g, "k.none", OT_GGUF_V_U32, &has));
  assert_int_equal(has, 0);
  OT_ASSERT_OK(ot_gguf_expect(g, "k.f32", OT_GGUF_V_F32, &has));
  assert_int_equal(has, 1);
  OT_ASSERT_ERR(ot_gguf_expect(g, "k.i32", OT_GGUF_V_U32, &has), OT_ERR_FORMAT,
                "types.gguf: metadata key k.i32 is i32, expected u32");
  OT_ASSERT_ERR(ot_gguf_expect(g, "k.u32", OT_GGUF_V_F32, &has), OT_ERR_FORMAT, "k.u32 is u32, expected f32");
  OT_ASSERT_ERR(ot_gguf_expect(g, "k.nan", OT_GGUF_V_F32, &has), OT_ERR_FORMAT, "k.nan is f32 nan, expected a finite");
  OT_ASSERT_ERR(ot_gguf_expect(g, "k.inf", OT_GGUF_V_F32, &has), OT_ERR_FORMAT, "k.inf is f32 -inf, expected a finite");
  OT_ASSERT_ERR(ot_gguf_expect(g, "k.strs", OT_GGUF_V_STRING, &has), OT_ERR_FORMAT,
                "k.strs is an array of string, expected string");
  ot_gguf_close(g);
  ot_gb_free(&b);
}

/* A file named *.gguf is read as GGUF whatever its first bytes (so its
 * refusal names the magic); a directory never is. */
static void is_file_by_name_or_magic(void **state) {
  (void)state;
  char *dir = ot_tmpdir_create(), p[512];
  ot_write_bytes(dir, "model.gguf", "XXXXjunk", 8);
  ot_write_bytes(dir, "model.bin", "XXXXjunk", 8);
  ot_write_bytes(dir, "magic.bin", "GGUF", 4);
  assert_true(ot_gguf_is_file(ot_tmp_path(p, sizeof p, dir, "model.gguf")));
  ot_gguf *g = NULL;
  OT_ASSERT_ERR(ot_gguf_open(p, &g), OT_ERR_FORMAT, "model.gguf: not a GGUF file (magic 'XXXX', expected 'GGUF')");
  assert_false(ot_gguf_is_file(ot_tmp_path(p, sizeof p, dir, "model.bin")));
  assert_true(ot_gguf_is_file(ot_tmp_path(p, sizeof p, dir, "magic.bin")));
  assert_true(ot_gguf_is_file(ot_tmp_path(p, sizeof p, dir, "missing.GGUF"))); /* its open says it is missing */
  ot_tmp_path(p, sizeof p, dir, "d.gguf");
  assert_int_equal(mkdir(p, 0700), 0);
  assert_false(ot_gguf_is_file(p));
  ot_tmpdir_remove(dir);
}

/* The tokenizer's scalar keys at llama.cpp's types: the flags bool, the
 * token ids u32 (a u8 flag or an i32 id was read as any integer). */
static void tokenizer_key_types(void **state) {
  (void)state;
  static const char *const toks[] = {"<unk>", "<s>", "</s>", "a"};
  static const struct { const char *key; ot_gguf_vtype t; const char *says; } cases[] = {
      {NULL, OT_GGUF_V_BOOL, NULL},
      {"tokenizer.ggml.add_bos_token", OT_GGUF_V_U8, "tokenizer.ggml.add_bos_token is u8, expected bool"},
      {"tokenizer.ggml.add_space_prefix", OT_GGUF_V_I32, "tokenizer.ggml.add_space_prefix is i32, expected bool"},
      {"tokenizer.ggml.eos_token_id", OT_GGUF_V_I32, "tokenizer.ggml.eos_token_id is i32, expected u32"},
      {"tokenizer.ggml.unknown_token_id", OT_GGUF_V_U64, "tokenizer.ggml.unknown_token_id is u64, expected u32"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    ot_gb b;
    ot_gb_init(&b);
    ot_gb_str(&b, "tokenizer.ggml.model", "llama");
    ot_gb_strs(&b, "tokenizer.ggml.tokens", 4, toks);
    static const float scores[4] = {0, 0, 0, -1};
    ot_gb_array(&b, "tokenizer.ggml.scores", OT_GGUF_V_F32, 4, scores);
    const uint64_t one = 1; /* in the width of any type above */
    if (cases[k].key) ot_gb_kv(&b, cases[k].key, cases[k].t, &one);
    ot_gb_finish(&b, 0);
    ot_gguf *g;
    OT_ASSERT_OK(ot_gguf_open_mem(b.p, b.len, "tok.gguf", &g));
    ot_tokenizer *tk = NULL;
    ot_status s = ot_tokenizer_from_gguf(g, "tok.gguf", &tk);
    if (!cases[k].says) OT_ASSERT_OK(s);
    else OT_ASSERT_ERR(s, OT_ERR_FORMAT, "tok.gguf", cases[k].says);
    ot_tokenizer_destroy(tk);
    ot_gguf_close(g);
    ot_gb_free(&b);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(tiny_file),           cmocka_unit_test(dequantize_blocks),
                                     cmocka_unit_test(bad_files),           cmocka_unit_test(duplicate_key),
                                     cmocka_unit_test(overlapping_tensors), cmocka_unit_test(alignment_type_and_magic),
                                     cmocka_unit_test(expect_types),        cmocka_unit_test(is_file_by_name_or_magic),
                                     cmocka_unit_test(tokenizer_key_types)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
