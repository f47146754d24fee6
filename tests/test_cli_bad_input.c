/* test_cli_bad_input.c — issue 5's "Bad input" list, and issue 14's hostile
 * option values, through the `omptensor` command (beside the test, or
 * $OT_CLI): each case exits with status 2, prints nothing on stdout and
 * exactly one line on stderr, which names the file (or option) and the
 * problem; in the asan preset the command is built with ASan/LSan, so a
 * crash or a leak would change the exit status. */
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

/* stderr.txt (dir) as one line: its text without the newline in last[];
 * the number of lines; whether stdout.txt is empty. */
/* The lines of stderr text last[0..n) (NUL-terminated there); a final
 * newline is dropped. */
static int count_lines(char *last, size_t n) {
  int lines = 0;
  for (size_t i = 0; i < n; i++) lines += last[i] == '\n';
  if (n && last[n - 1] != '\n') lines++; /* an unterminated last line */
  else if (n) last[n - 1] = '\0';
  return lines;
}

static int read_outputs(char *last, size_t len, int *stdout_empty) {
  char p[256];
  snprintf(p, sizeof p, "%s/stderr.txt", dir);
  FILE *f = fopen(p, "rb");
  assert_non_null(f);
  size_t n = fread(last, 1, len - 1, f);
  last[n] = '\0';
  fclose(f);
  int lines = count_lines(last, n);
  snprintf(p, sizeof p, "%s/stdout.txt", dir);
  struct stat sb;
  *stdout_empty = stat(p, &sb) == 0 && sb.st_size == 0;
  return lines;
}

/* Runs `omptensor ARGS` (a shell word list) in dir; the exit status, stderr in last[]. */
static int cli(const char *args, char *last, size_t len, int *lines, int *stdout_empty) {
  const char *exe = ot_test_cli();
  assert_non_null(exe);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s </dev/null >stdout.txt 2>stderr.txt", dir, exe, args);
  int rc = system(cmd);
  assert_true(rc != -1 && WIFEXITED(rc));
  *lines = read_outputs(last, len, stdout_empty);
  return WEXITSTATUS(rc);
}

/* Exit 2, nothing on stdout, exactly one line on stderr, "omptensor...: "
 * and every needle (NULL-terminated) in it. */
static void check_bad(const char *what, int rc, int lines, int stdout_empty, const char *err,
                      const char *const *needles) {
  if (rc != 2) fail_msg("omptensor %s: exit status %d, want 2 (stderr: %s)", what, rc, err);
  if (lines != 1 || !stdout_empty || strncmp(err, "omptensor", 9))
    fail_msg("omptensor %s: want one line on stderr starting 'omptensor' and nothing on stdout; got %d lines%s: %s",
             what, lines, stdout_empty ? "" : " and output on stdout", err);
  for (int i = 0; needles[i]; i++)
    if (!strstr(err, needles[i])) fail_msg("omptensor %s: error '%s' should mention '%s'", what, err, needles[i]);
}

static void expect(const char *args, const char *needle1, const char *needle2) {
  char err[4096];
  int lines, empty;
  int rc = cli(args, err, sizeof err, &lines, &empty);
  check_bad(args, rc, lines, empty, err, (const char *const[]){needle1, needle2, NULL});
}

/* A failure found while running, after the input was accepted (the model
 * loaded and planned): exit 2, nothing on stdout, the error as the last
 * line with every needle; before it only what an accepted run prints on a
 * non-terminal: progress lines ("load: 40%") and the one-time notices of the
 * run ("omptensor: no GPU: ..."), never a second error. */
static void expect_after_start(const char *args, const char *needle1, const char *needle2) {
  char err[8192];
  int lines, empty;
  int rc = cli(args, err, sizeof err, &lines, &empty);
  if (rc != 2 || !empty) fail_msg("omptensor %s: exit %d%s, want 2 and nothing on stdout: %s", args, rc,
                                  empty ? "" : " with output on stdout", err);
  char *last = strrchr(err, '\n');
  last = last ? last + 1 : err;
  for (char *l = err; l < last;) {
    char *e = strchr(l, '\n');
    size_t n = (size_t)(e - l);
    const char *c = memchr(l, ':', n);
    int progress = c && c > l && c[1] == ' ' && n >= 2 && l[n - 1] == '%';
    for (const char *q = l; progress && q < c; q++) progress = *q >= 'a' && *q <= 'z';
    int notice = n > 11 && !strncmp(l, "omptensor: ", 11);
    if (!progress && !notice) fail_msg("omptensor %s: a line before the error is neither progress nor a notice: %.*s", args, (int)n, l);
    l = e + 1;
  }
  if (strncmp(last, "omptensor ", 10)) fail_msg("omptensor %s: the last line is not the error: %s", args, last);
  if (!strstr(last, needle1) || !strstr(last, needle2))
    fail_msg("omptensor %s: error '%s' should mention '%s' and '%s'", args, last, needle1, needle2);
}

/* Runs omptensor with argv (no shell: any byte, empty words), output
 * files in dir (support/cli_test.c). */
static int cli_argv(const char *const *args, char *err, size_t len, int *lines, int *stdout_empty) {
  const ot_cli_run_opts o = {.out_dir = dir};
  ot_cli_res r = ot_test_cli_run_with(&o, args);
  if (r.status < 0) fail_msg("omptensor %s ...: killed by signal %d", args[0], r.signal);
  size_t n = strlen(r.err);
  if (n > len - 1) n = len - 1;
  memcpy(err, r.err, n);
  err[n] = '\0';
  *lines = count_lines(err, n);
  *stdout_empty = r.out[0] == '\0';
  const int status = r.status;
  ot_cli_res_free(&r);
  return status;
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
  /* found after the weights' load: stderr also has the progress lines of
   * a batch job (and, without a GPU, the notice the accepted run prints) */
  expect_after_start("run nan --prompt-ids 1,2,3 -n 3",
                     "the logits of the prefill (the prompt of 3 tokens) are not finite", "--dtype f32");
  expect_after_start("run nan --prompt-ids 1,2,3 -n 3 --logits-out nan.npy", "the logits of the prefill",
                     "NaN at position 0");
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
  if (!mkdtemp(dir)) return -1;
  /* the child's environment: no OMPTENSOR_* of the caller's shell */
  for (int k = 0; k < 64; k++) {
    extern char **environ;
    char **e = environ;
    while (*e && strncmp(*e, "OMPTENSOR_", 10)) e++;
    if (!*e) break;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(strchr(*e, '=') - *e), *e);
    unsetenv(name);
  }
  return 0;
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

/* Hostile option values (issue 14): each is refused while the options are
 * read or checked, before a weight is read, in one line that names the
 * option (and the value). "@M" is llama_gqa, "@G" gpt2_small, "@D" a valid
 * token file for it. */
typedef struct bad_case {
  const char *argv[16];
  const char *words[4];
} bad_case;

static const bad_case cases[] = {
    /* the weight dtype: only the storage types */
    {{"run", "@M", "--prompt-ids", "1", "--dtype", "i32"}, {"--dtype", "'i32'", "f32, f16, bf16, int8", "int4"}},
    {{"run", "@M", "--prompt-ids", "1", "--dtype", "f64"}, {"--dtype", "'f64'", "f32, f16, bf16, int8", "int4"}},
    {{"demo", "--dtype", "int32"}, {"--dtype", "'int32'"}},
    {{"train", "@G", "--data", "@D", "--dtype", "i32"}, {"--dtype", "'i32'"}},
    /* integers: decimal, whole, in range, all of the value */
    {{"run", "@M", "--prompt-ids", "1", "-n", "1.5"}, {"--max-new-tokens", "'1.5'", "not a decimal integer"}},
    {{"run", "@M", "--prompt-ids", "1", "-n", "0x10"}, {"--max-new-tokens", "'0x10'", "not a decimal integer"}},
    {{"run", "@M", "--prompt-ids", "1", "-n", "1e3"}, {"--max-new-tokens", "'1e3'"}},
    {{"run", "@M", "--prompt-ids", "1", "-n", " 5"}, {"--max-new-tokens", "' 5'"}},
    {{"run", "@M", "--prompt-ids", "1", "-n", "5x"}, {"--max-new-tokens", "'5x'"}},
    {{"run", "@M", "--prompt-ids", "1", "-n", "-"}, {"--max-new-tokens", "'-'"}},
    {{"run", "@M", "--prompt-ids", "1", "-n", ""}, {"--max-new-tokens", "empty value"}},
    {{"run", "@M", "--prompt-ids", "1", "--max-new-tokens", "2147483648"}, {"--max-new-tokens", "out of range", "1000000"}},
    {{"run", "@M", "--prompt-ids", "1", "--max-new-tokens", "99999999999999999999999"}, {"--max-new-tokens", "out of range"}},
    {{"run", "@M", "--prompt-ids", "1", "--top-k", "-1"}, {"--top-k", "'-1'", "out of range"}},
    {{"run", "@M", "--prompt-ids", "1", "--top-k", "2.5"}, {"--top-k", "'2.5'"}},
    {{"run", "@M", "--prompt-ids", "1", "--seed", "18446744073709551616"}, {"--seed", "out of range", "18446744073709551615"}},
    {{"run", "@M", "--prompt-ids", "1", "--seed", "-1"}, {"--seed", "'-1'"}},
    {{"run", "@M", "--prompt-ids", "1", "--seed", "1.8e19"}, {"--seed", "'1.8e19'"}},
    {{"demo", "--seed", "-1"}, {"--seed", "'-1'"}},
    {{"demo", "--seed", ""}, {"--seed", "empty value"}},
    {{"demo", "-n", "0"}, {"--max-new-tokens", "'0'", "1 to 4096"}},
    {{"demo", "-n", "1.5"}, {"--max-new-tokens", "'1.5'"}},
    {{"train", "@G", "--data", "@D", "--seq", "0"}, {"--seq", "'0'", "out of range"}},
    {{"train", "@G", "--data", "@D", "--batch", "2147483648"}, {"--batch", "'2147483648'", "out of range"}},
    {{"train", "@G", "--data", "@D", "--batch", "0"}, {"--batch", "'0'"}},
    {{"train", "@G", "--data", "@D", "--steps", "-1"}, {"--steps", "'-1'"}},
    {{"train", "@G", "--data", "@D", "--steps", "1.5"}, {"--steps", "'1.5'"}},
    {{"train", "@G", "--data", "@D", "--accum", "0x2"}, {"--accum", "'0x2'"}},
    {{"train", "@G", "--data", "@D", "--seed", "18446744073709551616"}, {"--seed", "out of range"}},
    {{"train", "@G", "--data", "@D", "--seq", "4096"}, {"--seq 4096", "n_positions"}},
    /* floats: decimal, finite, in range */
    {{"run", "@M", "--prompt-ids", "1", "--temperature", "nan"}, {"--temperature", "'nan'", "not a decimal number"}},
    {{"run", "@M", "--prompt-ids", "1", "--temperature", "inf"}, {"--temperature", "'inf'"}},
    {{"run", "@M", "--prompt-ids", "1", "--temperature", "1e400"}, {"--temperature", "'1e400'", "out of range"}},
    {{"run", "@M", "--prompt-ids", "1", "--temperature", "0x1p3"}, {"--temperature", "'0x1p3'"}},
    {{"run", "@M", "--prompt-ids", "1", "--temperature", "-1"}, {"--temperature", "'-1'", "0 to 100"}},
    {{"run", "@M", "--prompt-ids", "1", "--top-p", "2"}, {"--top-p", "'2'", "out of range"}},
    {{"run", "@M", "--prompt-ids", "1", "--top-p", "0"}, {"--top-p", "'0'", "above 0"}},
    {{"run", "@M", "--prompt-ids", "1", "--top-p", "1e-60"}, {"--top-p", "above 0"}},
    {{"train", "@G", "--data", "@D", "--lr", "nan"}, {"--lr", "'nan'"}},
    {{"train", "@G", "--data", "@D", "--lr", "-1"}, {"--lr", "'-1'"}},
    {{"train", "@G", "--data", "@D", "--weight-decay", "inf"}, {"--weight-decay", "'inf'"}},
    /* words */
    {{"train", "@G", "--data", "@D", "--checkpoint", "some"}, {"--checkpoint", "'some'", "none, all or auto"}},
    {{"train", "@G", "--data", "@D", "--init", "zeros"}, {"--init", "'zeros'", "random"}},
    {{"run", "@M", "--prompt-ids", "1", "--offload", "\x1b[2J"}, {"--offload", "\\x1b[2J"}},
    {{"run", "@M", "--prompt-ids", "1", "--backend", "gpu"}, {"--backend", "'gpu'"}},
    {{"run", "@M", "--prompt-ids", "1", "--device", "-1"}, {"--device", "'-1'"}},
    {{"run", "@M", "--prompt-ids", "1", "--device", "99999999"}, {"--device", "'99999999'"}},
    {{"run", "@M", "--prompt-ids", "1", "--devices", "0"}, {"--devices", "'0'"}},
    {{"run", "@M", "--prompt-ids", "1", "--json=yes"}, {"--json", "takes no value"}},
    {{"run", "@M", "--prompt-ids", "1", "-n"}, {"'-n'", "needs a value"}},
    /* sizes */
    {{"run", "@M", "--prompt-ids", "1", "--gpu-memory-limit", "0"}, {"--gpu-memory-limit", "'0'", "at least one byte"}},
    {{"run", "@M", "--prompt-ids", "1", "--gpu-memory-limit", "1e400"}, {"--gpu-memory-limit", "'1e400'"}},
    {{"run", "@M", "--prompt-ids", "1", "--gpu-memory-limit", "-1%"}, {"--gpu-memory-limit", "'-1%'", "negative"}},
    {{"run", "@M", "--prompt-ids", "1", "--gpu-memory-limit", "101%"}, {"--gpu-memory-limit", "'101%'"}},
    {{"run", "@M", "--prompt-ids", "1", "--gpu-memory-limit", "18446744073709551616"}, {"--gpu-memory-limit", "too large"}},
    {{"run", "@M", "--prompt-ids", "1", "--gpu-memory-limit", ""}, {"--gpu-memory-limit", "empty value"}},
    {{"demo", "--size", "0"}, {"--size", "'0'"}},
    {{"demo", "--size", "40%"}, {"--size", "'40%'", "not a percentage"}},
    {{"demo", "--size", "-1"}, {"--size", "'-1'"}},
    /* a budget too small names where it came from */
    {{"run", "@M", "--prompt-ids", "1", "--gpu-memory-limit", "1000B"}, {"--gpu-memory-limit", "budget is 1000 bytes"}},
    {{"train", "@G", "--data", "@D", "--seq", "8", "--gpu-memory-limit", "1000B"}, {"--gpu-memory-limit", "budget is 1000 bytes"}},
    /* 64KB: below the smallest synthetic model (issue 43: it was made
     * anyway, and its budget, a quarter of 64KB, found too small) */
    {{"demo", "--size", "64KB"}, {"--size 64KB", "smallest synthetic model"}},
    /* files and paths: never empty */
    {{"run", "@M", "--prompt-ids", ""}, {"--prompt-ids", "empty value"}},
    {{"run", "@M", "--prompt-ids-file", ""}, {"--prompt-ids-file", "empty value"}},
    {{"run", "@M", "--prompt-ids", "1", "--logits-out", ""}, {"--logits-out", "empty value"}},
    {{"run", "@M", "--prompt-ids", "1", "--trace", ""}, {"--trace", "empty value"}},
    {{"run", "@M", "--prompt-ids", "1", "--config", ""}, {"--config", "empty value"}},
    {{"train", "@G", "--data", ""}, {"--data", "empty value"}},
    {{"train", "@G", "--data", "@D", "--save", ""}, {"--save", "empty value"}},
    {{"demo", "extra"}, {"'extra'", "no model"}},
    {{"trace", "plot", "t.json", "-o"}, {"'-o'", "needs a value"}},
    {{"trace", "plot", "t.json", "-o", ""}, {"'-o'", "needs a value"}},
    /* the prompt's ids */
    {{"run", "@M", "--prompt-ids", "1,-2"}, {"--prompt-ids", "'-2'", "byte offset 2"}},
    {{"run", "@M", "--prompt-ids", "1,2x"}, {"--prompt-ids", "'2x'", "byte offset 3"}},
    {{"run", "@M", "--prompt-ids", "1,+2"}, {"--prompt-ids", "'+2'"}},
    {{"run", "@M", "--prompt-ids", "99999999999"}, {"--prompt-ids", "larger than 2147483647"}},
};

/* Issue 43: settings accepted where they should be refused, or blamed on
 * the wrong option. Each case: exit 2, one line naming where the value came
 * from, and not naming an option it did not come from. */
static void settings_refused(void **state) {
  (void)state;
  const char *data = getenv("OT_TEST_DATA");
  assert_non_null(data);
  char m[512];
  snprintf(m, sizeof m, "%s/models/llama_gqa", data);
  const char yaml[] = "memory:\n  max_gpu_memory: 1GB\nbackend: map\nmemory:\n  offload_strategy: minimal\n";
  write_file("twice.yaml", yaml, sizeof yaml - 1);
  char twice[512];
  snprintf(twice, sizeof twice, "%s/twice.yaml", dir);
  const struct {
    const char *argv[10];
    const char *words[3], *not_word;
  } refused[] = {
      /* a demo --size below 4096 bytes read the budget as size/4 GB; --size 1
       * blamed --gpu-memory-limit */
      {{"demo", "--size", "1"}, {"--size 1:", "smallest synthetic model"}, "--gpu-memory-limit"},
      {{"demo", "--size", "4000"}, {"--size 4000:", "smallest synthetic model"}, "--gpu-memory-limit"},
      /* a repeated YAML section was merged */
      {{"run", m, "--prompt-ids", "1", "--config", twice}, {"twice.yaml:4", "'memory' given twice", "line 1"}, NULL},
      /* a limit for a device the run does not use was dropped */
      {{"run", m, "--prompt-ids", "1", "--gpu-memory-limit", "0:1MB,3:1MB"},
       {"--gpu-memory-limit", "a limit for device 3", "device 0 only"}, NULL},
      /* one rule for sizes: a number without a unit is bytes */
      {{"run", m, "--prompt-ids", "1", "--gpu-memory-limit", "2.5"},
       {"--gpu-memory-limit", "'2.5'", "without a unit is bytes"},
       NULL},
      /* 2^64-1 was a budget, reported as budget_bytes: null */
      {{"run", m, "--prompt-ids", "1", "--json", "--gpu-memory-limit", "18446744073709551615"},
       {"--gpu-memory-limit", "too large", "9223372036854775807"}, NULL},
      /* options a command does not take are refused, not ignored */
      {{"info", "--dtype", "bf16"}, {"unknown option '--dtype'"}, NULL},
      {{"demo", "--cpu-memory-limit", "1GB"}, {"unknown option '--cpu-memory-limit'"}, NULL},
  };
  int failed = 0;
  for (size_t c = 0; c < sizeof refused / sizeof refused[0]; c++) {
    char err[4096];
    int lines, empty;
    int rc = cli_argv(refused[c].argv, err, sizeof err, &lines, &empty);
    int ok = rc == 2 && lines == 1 && empty && !strncmp(err, "omptensor", 9);
    for (int i = 0; ok && i < 3 && refused[c].words[i]; i++) ok = strstr(err, refused[c].words[i]) != NULL;
    if (ok && refused[c].not_word) ok = !strstr(err, refused[c].not_word);
    failed += !ok;
    print_message("%s %s %s %s: exit %d, %d line(s)%s: %s\n", ok ? "  ok" : "FAIL", refused[c].argv[0],
                  refused[c].argv[1], refused[c].argv[2] ? refused[c].argv[2] : "", rc, lines,
                  empty ? "" : ", stdout not empty", err);
  }
  if (failed) fail_msg("%d of %zu settings not refused in one line naming where they came from", failed,
                       sizeof refused / sizeof refused[0]);
}

static void hostile_values(void **state) {
  (void)state;
  const char *data = getenv("OT_TEST_DATA");
  assert_non_null(data);
  char m[512], g[512], d[512];
  snprintf(m, sizeof m, "%s/models/llama_gqa", data);
  snprintf(g, sizeof g, "%s/models/gpt2_small", data);
  snprintf(d, sizeof d, "%s/tokens.bin", dir);
  /* llm.c's .bin: 256 int32 of header (magic, version, count), uint16 ids */
  enum { N = 4096 };
  static unsigned char bin[1024 + 2 * N];
  int32_t hdr[256] = {20240520, 1, N};
  memcpy(bin, hdr, sizeof hdr);
  for (int i = 0; i < N; i++) bin[1024 + 2 * i] = (unsigned char)(i % 200);
  write_file("tokens.bin", bin, sizeof bin);
  int failed = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const char *argv[16] = {0};
    char what[512];
    size_t k = 0;
    for (int i = 0; cases[c].argv[i]; i++) {
      const char *a = cases[c].argv[i];
      argv[i] = !strcmp(a, "@M") ? m : !strcmp(a, "@G") ? g : !strcmp(a, "@D") ? d : a;
      k += (size_t)snprintf(what + k, k < sizeof what ? sizeof what - k : 0, "%s'", i ? " " : "");
      for (const char *q = a; *q && k + 5 < sizeof what; q++) /* a control byte shown, not sent to the terminal */
        k += (size_t)snprintf(what + k, sizeof what - k, (unsigned char)*q < 0x20 ? "\\x%02x" : "%c", (unsigned char)*q);
      k += (size_t)snprintf(what + k, k < sizeof what ? sizeof what - k : 0, "'");
    }
    char err[4096];
    int lines, empty;
    int rc = cli_argv(argv, err, sizeof err, &lines, &empty);
    int ok = rc == 2 && lines == 1 && empty && !strncmp(err, "omptensor", 9);
    for (int i = 0; ok && i < 4 && cases[c].words[i]; i++) ok = strstr(err, cases[c].words[i]) != NULL;
    if (!ok) {
      failed++;
      print_message("FAIL omptensor %s: exit %d, %d line(s)%s: %s\n", what, rc, lines, empty ? "" : ", stdout not empty",
                    err);
    } else {
      print_message("  ok %s: %s\n", what, err);
    }
  }
  if (failed) fail_msg("%d of %zu hostile values not refused in one line naming the option", failed,
                       sizeof cases / sizeof cases[0]);
  /* Long values: refused in a short line that still says why (the value cut). */
  static char nines[5001], ctl[5001];
  memset(nines, '9', 5000);
  memset(ctl, 1, 5000);
  const struct {
    const char *argv[8];
    const char *word;
  } longs[] = {
      {{"run", m, "--prompt-ids", "1", "--offload", ctl}, "--offload: '\\x01"},
      {{"run", m, "--prompt-ids", "1", "--gpu-memory-limit", nines}, "5000 bytes long"},
      {{"demo", "--size", nines}, "too large"},
      {{"run", m, "--prompt-ids", nines}, "larger than 2147483647"},
      {{"run", m, "--prompt-ids", "1", "-n", nines}, "--max-new-tokens: '999"}, /* a setting now: its length check first */
  };
  for (size_t c = 0; c < sizeof longs / sizeof longs[0]; c++) {
    char err[8192];
    int lines, empty;
    int rc = cli_argv(longs[c].argv, err, sizeof err, &lines, &empty);
    if (rc != 2 || lines != 1 || !empty || !strstr(err, longs[c].word) || strlen(err) > 600)
      fail_msg("omptensor %s ... (a value of 5000 bytes): exit %d, %d line(s) of %zu bytes: %.700s", longs[c].argv[0],
               rc, lines, strlen(err), err);
  }
}

/* A prompt file is read whole: a NUL or any other byte outside the id list is
 * an error naming the file and the byte's offset; a FIFO or a directory is
 * refused without blocking. */
static void prompt_files(void **state) {
  (void)state;
  const char *data = getenv("OT_TEST_DATA");
  char args[1024];
  write_file("nul.txt", "1 2\0 3\n", 7);
  snprintf(args, sizeof args, "run '%s/models/llama_gqa' --prompt-ids-file nul.txt -n 1", data);
  expect(args, "nul.txt: '2\\x00' at byte offset 3", "not a token id");
  write_file("tail.txt", "1 2 3\n\0\0", 8);
  snprintf(args, sizeof args, "run '%s/models/llama_gqa' --prompt-ids-file tail.txt -n 1", data);
  expect(args, "tail.txt", "byte offset 6");
  write_file("utf8.txt", "1, 2,\xc2\xa0" "3", 7);
  snprintf(args, sizeof args, "run '%s/models/llama_gqa' --prompt-ids-file utf8.txt -n 1", data);
  expect(args, "utf8.txt", "byte offset 5");
  char p[256];
  snprintf(p, sizeof p, "%s/fifo.txt", dir);
  assert_int_equal(mkfifo(p, 0600), 0);
  snprintf(args, sizeof args, "run '%s/models/llama_gqa' --prompt-ids-file fifo.txt -n 1", data);
  expect(args, "fifo.txt", "not a regular file");
  snprintf(p, sizeof p, "%s/adir", dir);
  assert_int_equal(mkdir(p, 0700), 0);
  snprintf(args, sizeof args, "run '%s/models/llama_gqa' --prompt-ids-file adir -n 1", data);
  expect(args, "adir", "directory");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(safetensors_files), cmocka_unit_test(shifted_header),
                                     cmocka_unit_test(hostile_configs), cmocka_unit_test(nonfinite_logits),
                                     cmocka_unit_test(file_for_model_dir), cmocka_unit_test(model_dirs),
                                     cmocka_unit_test(options_and_config), cmocka_unit_test(hostile_values),
                                     cmocka_unit_test(settings_refused),
                                     cmocka_unit_test(prompt_files)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
