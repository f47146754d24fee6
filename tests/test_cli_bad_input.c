/* test_cli_bad_input.c — issue 5's "Bad input" list through the
 * `omptensor` command (beside the test, or $OT_CLI): each case exits with status 2 and its
 * last stderr line names the file (or option) and the problem; in the asan
 * preset the command is built with ASan/LSan, so a crash or a leak would
 * change the exit status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_test.h"
#include "ot_test.h"

static char dir[64];

static void write_file(const char *name, const void *data, size_t n) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  fclose(f);
}

/* A safetensors file: 8-byte length, the header, `data` zero bytes. */
static void write_st(const char *name, const char *header, size_t data) {
  size_t hl = strlen(header), n = 8 + hl + data;
  unsigned char *b = calloc(1, n);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
  memcpy(b + 8, header, hl);
  write_file(name, b, n);
  free(b);
}

/* Runs `omptensor ARGS` in dir; returns the exit status, last stderr line in last[]. */
static int cli(const char *args, char *last, size_t len) {
  const char *exe = ot_test_cli();
  assert_non_null(exe);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s </dev/null >/dev/null 2>stderr.txt", dir, exe, args);
  int rc = system(cmd);
  assert_true(rc != -1 && WIFEXITED(rc));
  char p[256];
  snprintf(p, sizeof p, "%s/stderr.txt", dir);
  FILE *f = fopen(p, "r");
  assert_non_null(f);
  last[0] = 0;
  char line[1024];
  while (fgets(line, sizeof line, f))
    if (line[0] != '\n') snprintf(last, len, "%s", line);
  fclose(f);
  return WEXITSTATUS(rc);
}

static void expect(const char *args, const char *needle1, const char *needle2) {
  char last[1024];
  int rc = cli(args, last, sizeof last);
  if (rc != 2) fail_msg("omptensor %s: exit status %d, want 2 (stderr: %s)", args, rc, last);
  if (!strstr(last, needle1) || !strstr(last, needle2))
    fail_msg("omptensor %s: error '%s' should mention '%s' and '%s'", args, last, needle1, needle2);
}

/* Stricter: exit status 2, nothing on stdout and exactly one line on
 * stderr, holding every needle (NULL-ended). */
static void expect1(const char *args, ...) {
  const char *exe = ot_test_cli();
  assert_non_null(exe);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s </dev/null >stdout.txt 2>stderr.txt", dir, exe, args);
  int rc = system(cmd);
  assert_true(rc != -1 && WIFEXITED(rc));
  char p[256], text[4096] = "";
  snprintf(p, sizeof p, "%s/stderr.txt", dir);
  FILE *f = fopen(p, "r");
  assert_non_null(f);
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  int lines = 0;
  for (size_t i = 0; i < n; i++) lines += text[i] == '\n';
  if (WEXITSTATUS(rc) != 2 || lines != 1 || text[n - 1] != '\n')
    fail_msg("omptensor %s: exit status %d and %d lines on stderr, want 2 and one line:\n%s", args, WEXITSTATUS(rc),
             lines, text);
  va_list ap;
  va_start(ap, args);
  for (const char *needle; (needle = va_arg(ap, const char *));)
    if (!strstr(text, needle)) fail_msg("omptensor %s: error '%s' should mention '%s'", args, text, needle);
  va_end(ap);
  snprintf(p, sizeof p, "%s/stdout.txt", dir);
  struct stat st;
  assert_int_equal(stat(p, &st), 0);
  if (st.st_size != 0) fail_msg("omptensor %s: %lld bytes on stdout, want none", args, (long long)st.st_size);
}
#define EXPECT1(args, ...) expect1(args, __VA_ARGS__, (const char *)0)

/* dir/NAME: the reference set's config.json with `from` replaced by `to`
 * (checked to have happened), beside a link to its weights. */
static void edited_model(const char *name, const char *set, const char *from, const char *to) {
  const char *data = getenv("OT_TEST_DATA");
  assert_non_null(data);
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s/%s' && sed 's/%s/%s/' '%s/models/%s/config.json' > '%s/%s/config.json' && "
           "grep -q '%s' '%s/%s/config.json' && ln -sf '%s/models/%s/model.safetensors' '%s/%s/model.safetensors'",
           dir, name, from, to, data, set, dir, name, to, dir, name, data, set, dir, name);
  assert_int_equal(system(cmd), 0);
}

/* llm.c's token file: 256 int32 of header (magic, version, count), uint16 ids. */
static void write_tokens(const char *name, int n) {
  size_t bytes = 256 * 4 + (size_t)n * 2;
  unsigned char *b = calloc(1, bytes);
  int32_t h[3] = {20240520, 1, n};
  memcpy(b, h, sizeof h);
  for (int i = 0; i < n; i++) b[1024 + 2 * i] = (unsigned char)(i % 200);
  write_file(name, b, bytes);
  free(b);
}

/* Issue 14, class 1: sizes in config.json that overflowed or narrowed (a
 * heap-buffer overflow in train --init random, UB in llama.c's shapes, an
 * allocation abort) end in one line naming config.json and the field. */
static void hostile_configs(void **state) {
  (void)state;
  write_tokens("tok.bin", 400);
  edited_model("g_layers", "gpt2_small", "\"n_layer\": 2", "\"n_layer\": 4294967297");
  EXPECT1("train g_layers --init random --data tok.bin --steps 1 --batch 1 --seq 8", "g_layers/config.json",
          "\"n_layer\" is 4294967297", "[1, 65536]");
  edited_model("g_layers31", "gpt2_small", "\"n_layer\": 2", "\"n_layer\": 2147483648");
  EXPECT1("train g_layers31 --init random --data tok.bin --steps 1 --batch 1 --seq 8", "g_layers31/config.json",
          "\"n_layer\" is 2147483648");
  EXPECT1("run g_layers --prompt-ids 1,2 -n 1", "g_layers/config.json", "\"n_layer\" is 4294967297");
  edited_model("l_hidden", "llama_gqa", "\"hidden_size\": 64", "\"hidden_size\": 9007199254740992");
  EXPECT1("run l_hidden --prompt-ids 1,2 -n 1", "l_hidden/config.json", "\"hidden_size\" is 9007199254740992");
  edited_model("l_vocab", "llama_gqa", "\"vocab_size\": 256", "\"vocab_size\": 9007199254740992");
  EXPECT1("run l_vocab --prompt-ids 1,2 -n 1", "l_vocab/config.json", "\"vocab_size\" is 9007199254740992");
  edited_model("l_layers", "llama_gqa", "\"num_hidden_layers\": 3", "\"num_hidden_layers\": 2147483648");
  EXPECT1("run l_layers --prompt-ids 1,2 -n 1", "l_layers/config.json", "\"num_hidden_layers\" is 2147483648");
}

/* Issue 14, class 2: a checkpoint whose final norm holds a NaN gave tokens
 * and exit 0 (the argmax of a NaN row is some id). The logits are checked
 * once per step: a line naming the step and what to check, exit 2 (the
 * weights, or the dtype asked for, are the input to fix). */
static void nonfinite_logits(void **state) {
  (void)state;
  const char *data = getenv("OT_TEST_DATA");
  assert_non_null(data);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/nan' && cp '%s/models/llama_gqa/config.json' '%s/nan/'", dir, data, dir);
  assert_int_equal(system(cmd), 0);
  char src[512];
  snprintf(src, sizeof src, "%s/models/llama_gqa/model.safetensors", data);
  FILE *f = fopen(src, "rb");
  assert_non_null(f);
  static unsigned char img[1 << 20];
  size_t n = fread(img, 1, sizeof img, f);
  fclose(f);
  /* every F32 weight's first bytes past the header: the data section starts
   * with the largest tensor; a quiet NaN in its first element */
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | img[i];
  const unsigned char qnan[4] = {0x00, 0x00, 0xc0, 0x7f};
  for (uint64_t at = 8 + hl; at + 4 <= n; at += 4096) memcpy(img + at, qnan, 4); /* a NaN every 1024 floats */
  write_file("nan/model.safetensors", img, n);
  /* the last line: after the weights' load, stderr also has the progress
   * lines of a batch job (and, without a GPU, the pinned-memory warning) */
  expect("run nan --prompt-ids 1,2,3 -n 3", "the logits of the prefill (the prompt of 3 tokens) are not finite",
         "--dtype f32");
  expect("run nan --prompt-ids 1,2,3 -n 3 --logits-out nan.npy", "the logits of the prefill", "NaN at position 0");
  char p[256];
  snprintf(p, sizeof p, "%s/nan.npy", dir);
  assert_int_not_equal(access(p, F_OK), 0); /* not written */
}

/* Issue 14, class 6: a safetensors file where a model directory belongs was
 * reported as "invalid JSON config". */
static void file_for_model_dir(void **state) {
  (void)state;
  const char *data = getenv("OT_TEST_DATA");
  assert_non_null(data);
  char args[1024], cmd[1024];
  snprintf(args, sizeof args, "run '%s/models/gpt2_small/model.safetensors' --prompt-ids 1,2", data);
  EXPECT1(args, "gpt2_small/model.safetensors is a safetensors file, not a model directory", "config.json",
          "omptensor inspect");
  snprintf(cmd, sizeof cmd, "cp '%s/models/llama_gqa/model.safetensors' '%s/weights.bin'", data, dir);
  assert_int_equal(system(cmd), 0);
  EXPECT1("run weights.bin --prompt-ids 1,2", "weights.bin is a safetensors file, not a model directory");
  EXPECT1("train weights.bin --data weights.bin", "weights.bin is a safetensors file, not a model directory");
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/ot_badinput_XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void safetensors_files(void **state) {
  (void)state;
  expect("inspect missing.safetensors", "missing.safetensors", "cannot open");
  unsigned char trunc[5] = {1, 2, 3, 4, 5};
  write_file("short.safetensors", trunc, sizeof trunc);
  expect("inspect short.safetensors", "short.safetensors", "truncated");
  write_st("hlen.safetensors", "{}", 0);
  unsigned char big[10] = {0xff, 0xff, 0xff, 0, 0, 0, 0, 0, '{', '}'};
  write_file("hlen.safetensors", big, sizeof big);
  expect("inspect hlen.safetensors", "hlen.safetensors", "beyond the file");
  write_st("json.safetensors", "{\"a\": [1,", 0);
  expect("inspect json.safetensors", "json.safetensors", "invalid JSON");
  write_st("range.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8);
  expect("inspect range.safetensors", "range.safetensors", "'a'");
  write_st("overlap.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
           24);
  expect("inspect overlap.safetensors", "overlap.safetensors", "overlap");
  write_st("dtype.safetensors", "{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
  expect("inspect dtype.safetensors", "dtype.safetensors", "F33");
  /* issue 14: the tensors must cover the data section exactly */
  write_st("trail.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 7);
  expect("inspect trail.safetensors", "trail.safetensors", "3 bytes after the last tensor");
  write_st("gap.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
           12);
  expect("inspect gap.safetensors", "gap.safetensors", "unused");
}

/* Issue 14, class 2: a real checkpoint whose header length is 3 bytes short
 * (the JSON's padding cut off) parsed, and `run` read every tensor from
 * shifted offsets and printed plausible tokens with exit 0. */
static void shifted_header(void **state) {
  (void)state;
  const char *data = getenv("OT_TEST_DATA");
  assert_non_null(data);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/shifted' && cp '%s/models/llama_gqa/config.json' '%s/shifted/'", dir, data,
           dir);
  assert_int_equal(system(cmd), 0);
  char src[512];
  snprintf(src, sizeof src, "%s/models/llama_gqa/model.safetensors", data);
  FILE *f = fopen(src, "rb");
  assert_non_null(f);
  static unsigned char img[1 << 20];
  size_t n = fread(img, 1, sizeof img, f);
  fclose(f);
  assert_true(n > 8 && n < sizeof img);
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | img[i];
  assert_memory_equal(img + 8 + hl - 3, "   ", 3); /* the padding the cut removes */
  hl -= 3;
  for (int i = 0; i < 8; i++) img[i] = (unsigned char)(hl >> (8 * i));
  write_file("shifted/model.safetensors", img, n);
  expect("run shifted --prompt-ids 1,2 --max-new-tokens 2", "shifted/model.safetensors", "3 bytes after the last tensor");
}

/* A model directory whose config and checkpoint disagree. */
static void model_dirs(void **state) {
  (void)state;
  const char *data = getenv("OT_TEST_DATA");
  assert_non_null(data);
  char cmd[1024];
  /* wrong shape: intermediate_size 172 -> 170 */
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s/shape' && sed 's/\"intermediate_size\": 172/\"intermediate_size\": 170/' "
           "'%s/models/llama_gqa/config.json' > '%s/shape/config.json' && "
           "ln -sf '%s/models/llama_gqa/model.safetensors' '%s/shape/model.safetensors'",
           dir, data, dir, data, dir);
  assert_int_equal(system(cmd), 0);
  expect("run shape --prompt-ids 1,2 --max-new-tokens 1", "gate_proj", "shape");
  /* missing tensor: a checkpoint holding only lm_head */
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/missing' && cp '%s/models/llama_gqa/config.json' '%s/missing/'", dir,
           data, dir);
  assert_int_equal(system(cmd), 0);
  write_st("missing/model.safetensors", "{\"lm_head.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
  expect("run missing --prompt-ids 1,2 --max-new-tokens 1", "missing", "model.embed_tokens.weight");
  expect("run nowhere --prompt-ids 1", "nowhere", "");
}

static void options_and_config(void **state) {
  (void)state;
  const char *data = getenv("OT_TEST_DATA");
  char args[1024];
  snprintf(args, sizeof args, "run '%s/models/llama_gqa' --prompt-ids 1,2 --gpu-memory-limit 3XB", data);
  expect(args, "--gpu-memory-limit", "3XB");
  snprintf(args, sizeof args, "run '%s/models/llama_gqa' --prompt-ids 1,2 --bogus", data);
  expect(args, "--bogus", "unknown option");
  const char yaml[] = "memory:\n  max_gpu_memory: [1\n";
  write_file("bad.yaml", yaml, sizeof yaml - 1);
  snprintf(args, sizeof args, "run '%s/models/llama_gqa' --prompt-ids 1,2 --config bad.yaml", data);
  expect(args, "bad.yaml", "malformed YAML");
  const char unknown[] = "memory:\n  max_gpu_memroy: 3GB\n";
  write_file("typo.yaml", unknown, sizeof unknown - 1);
  snprintf(args, sizeof args, "run '%s/models/llama_gqa' --prompt-ids 1,2 --config typo.yaml", data);
  expect(args, "typo.yaml", "max_gpu_memroy");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(safetensors_files), cmocka_unit_test(shifted_header),
                                     cmocka_unit_test(hostile_configs), cmocka_unit_test(nonfinite_logits),
                                     cmocka_unit_test(file_for_model_dir),
                                     cmocka_unit_test(model_dirs),
                                     cmocka_unit_test(options_and_config)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
