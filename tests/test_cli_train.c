/* test_cli_train.c — `omptensor train` (beside the test, or $OT_CLI) on the tiny GPT-2 in
 * tests/data/models/gpt2_small with token files written here:
 *   - the loss falls over 5 steps on a periodic (learnable) sequence, and
 *     --json carries every step and the fields the README lists;
 *   - --save writes a model that `omptensor run` generates from, and that
 *     ot_gpt2_train_create loads back to the weights of the same 3 steps run here
 *     in-process (and not to the untrained ones);
 *   - --dry-run plans only: exit 0 and the plan under a fitting budget,
 *     exit 2 naming the budget under one too small;
 *   - bad input exits 2 with one error line naming the option or file.
 * In the asan build the command is instrumented too: a leak or a bad access
 * on any of these paths changes its exit status. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "omptensor/gpt2_train.h"
#include "omptensor/tokens.h"
#include "omptensor/npy.h"
#include "omptensor/omptensor.h"
#include <sys/stat.h>

#include "cli_test.h"
#include "memory/device.h"
#include "ot_testio.h"

static char *tmp;          /* scratch directory */
static char model[4096];   /* tests/data/models/gpt2_small */
static char tokens[4096];  /* tmp/tokens.npy: period-8 sequence, 600 ids */

typedef struct res {
  int status;
  char *out, *err; /* whole stdout; the last non-empty stderr line */
} res;

/* Runs `omptensor ARGS` (a shell word list; the paths here hold no spaces)
 * with one OpenMP thread and no OMPTENSOR_* settings from the caller. */
static res cli(const char *args) {
  const char *exe = ot_test_cli();
  assert_non_null(exe);
  char cmd[8192];
  snprintf(cmd, sizeof cmd,
           "env $(env | grep -o '^OMPTENSOR_[A-Z_]*' | sed 's/^/-u /') OMP_NUM_THREADS=1 '%s' %s "
           "</dev/null >'%s/out.txt' 2>'%s/err.txt'",
           exe, args, tmp, tmp);
  int rc = system(cmd);
  assert_true(rc != -1 && WIFEXITED(rc));
  res r = {.status = WEXITSTATUS(rc)};
  char p[4096];
  r.out = ot_read_file(ot_tmp_path(p, sizeof p, tmp, "out.txt"), NULL);
  char *err = ot_read_file(ot_tmp_path(p, sizeof p, tmp, "err.txt"), NULL);
  char *last = err, *line = err;
  for (char *c = err; *c; c++)
    if (*c == '\n') {
      *c = '\0';
      if (line[0]) last = line;
      line = c + 1;
    }
  if (line[0]) last = line;
  r.err = strdup(last);
  free(err);
  return r;
}

static void res_free(res *r) {
  free(r->out);
  free(r->err);
}

static void expect_ok(res *r, const char *args) {
  if (r->status != 0) fail_msg("omptensor %s: exit %d, stderr: %s\nstdout: %s", args, r->status, r->err, r->out);
}

/* Exit 2, nothing on stdout, and a last stderr line "omptensor train: ..."
 * that holds the needle. */
static void expect_bad(const char *args, const char *needle) {
  res r = cli(args);
  int ok = r.status == 2 && r.out[0] == '\0' && !strncmp(r.err, "omptensor train: ", 17) && strstr(r.err, needle);
  if (!ok) fail_msg("omptensor %s: exit %d (want 2), stdout '%s', error '%s' should name '%s'", args, r.status, r.out,
                    r.err, needle);
  print_message("  ok: %s\n", r.err);
  res_free(&r);
}

static int setup(void **state) {
  (void)state;
  tmp = ot_tmpdir_create();
  const char *data = getenv("OT_TEST_DATA");
  if (!tmp || !data) return -1;
  snprintf(model, sizeof model, "%s/models/gpt2_small", data);
  int32_t ids[600];
  for (int i = 0; i < 600; i++) ids[i] = (int32_t)(10 + (i % 8) * 3);
  int64_t n = 600;
  ot_tmp_path(tokens, sizeof tokens, tmp, "tokens.npy");
  return ot_npy_write(tokens, OT_I32, 1, &n, ids) == OT_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  ot_tmpdir_remove(tmp);
  return 0;
}

static void test_loss_falls_json(void **state) {
  (void)state;
  char args[8192];
  snprintf(args, sizeof args, "train %s --data %s --steps 5 --batch 2 --seq 32 --lr 3e-3 --json", model, tokens);
  res r = cli(args);
  expect_ok(&r, args);
  json_error_t e;
  json_t *o = json_loads(r.out, 0, &e);
  if (!o) fail_msg("--json output is not JSON (%s): %s", e.text, r.out);
  json_t *steps = json_object_get(o, "steps");
  assert_true(json_is_array(steps));
  assert_int_equal(json_array_size(steps), 5);
  double first = 0, last = 0;
  for (size_t i = 0; i < 5; i++) {
    json_t *s = json_array_get(steps, i);
    assert_int_equal(json_integer_value(json_object_get(s, "step")), (json_int_t)i + 1);
    double loss = json_number_value(json_object_get(s, "loss")), ms = json_number_value(json_object_get(s, "ms"));
    assert_true(isfinite(loss) && loss > 0);
    assert_true(ms > 0);
    if (i == 0) first = loss;
    last = loss;
  }
  print_message("  loss %.4f -> %.4f\n", first, last);
  /* ln(256) = 5.55 for a uniform guess; 5 steps on a period-8 sequence must
   * learn a good part of it. */
  assert_true(first > 4.0);
  assert_true(last < first - 0.5);
  assert_int_equal(json_integer_value(json_object_get(o, "B")), 2);
  assert_int_equal(json_integer_value(json_object_get(o, "T")), 32);
  /* the key run --json uses too (train wrote "tokens_per_s" before issue 17) */
  assert_true(json_number_value(json_object_get(o, "tokens_per_second")) > 0);
  assert_null(json_object_get(o, "tokens_per_s"));
  assert_string_equal(json_string_value(json_object_get(o, "checkpoint")), "auto");
  assert_true(json_is_array(json_object_get(o, "recomputed_layers")));
  json_t *budget = json_object_get(o, "budget");
  assert_true(budget && (json_is_null(budget) || json_is_integer(budget)));
  assert_true(json_integer_value(json_object_get(o, "peak_device_bytes")) > 0);
  assert_int_equal(json_integer_value(json_object_get(o, "weights")), 124672); /* gpt2_small: wte counted once */
  json_decref(o);
  res_free(&r);
}

/* The losses of `steps` steps of `extra` options, from --json. */
static void losses_of(const char *extra, int steps, double *out, json_int_t *accum) {
  char args[8192];
  snprintf(args, sizeof args, "train %s --data %s --steps %d --seq 32 --lr 3e-3 --checkpoint none --json %s", model,
           tokens, steps, extra);
  res r = cli(args);
  expect_ok(&r, args);
  json_error_t e;
  json_t *o = json_loads(r.out, 0, &e);
  if (!o) fail_msg("--json output is not JSON (%s): %s", e.text, r.out);
  json_t *st = json_object_get(o, "steps");
  assert_int_equal(json_array_size(st), steps);
  for (int i = 0; i < steps; i++) out[i] = json_number_value(json_object_get(json_array_get(st, (size_t)i), "loss"));
  *accum = json_integer_value(json_object_get(o, "accum"));
  json_decref(o);
  res_free(&r);
}

/* --accum 2 --batch 1 takes the same windows as --batch 2 and must train the
 * same (up to the order of float sums: the gradients add per micro-batch). */
static void test_accumulation(void **state) {
  (void)state;
  double a[3], b[3];
  json_int_t na, nb;
  losses_of("--batch 2", 3, a, &na);
  losses_of("--batch 1 --accum 2", 3, b, &nb);
  assert_int_equal(na, 1);
  assert_int_equal(nb, 2);
  for (int i = 0; i < 3; i++)
    if (fabs(a[i] - b[i]) > 1e-4) fail_msg("step %d: loss %.6f with --accum 2, %.6f with --batch 2", i + 1, b[i], a[i]);
  char args[8192];
  snprintf(args, sizeof args, "train %s --data %s --accum 0", model, tokens);
  expect_bad(args, "--accum");
  snprintf(args, sizeof args, "train %s --data %s --accum 5 --batch 1 --seq 128", model, tokens); /* 641 > 600 */
  expect_bad(args, "needs 641");
}

/* The parameters of a trainer made from `dir` (gpt2_small's shapes), concatenated. */
static float *params_of(ot_ctx *ctx, const char *dir, int64_t *n) {
  ot_gpt2_train_opts o = ot_gpt2_train_opts_default();
  o.B = 1;
  o.T = 8;
  ot_gpt2_trainer *g;
  OT_ASSERT_OK(ot_gpt2_train_create(ctx, dir, &o, NULL, &g));
  int64_t total = 0;
  for (int i = 0; i < ot_gpt2_train_num_params(g); i++) total += ot_tensor_numel(ot_gpt2_train_param(g, i));
  float *w = malloc((size_t)total * sizeof *w), *p = w;
  assert_non_null(w);
  for (int i = 0; i < ot_gpt2_train_num_params(g); i++) {
    int64_t k = ot_tensor_numel(ot_gpt2_train_param(g, i));
    OT_ASSERT_OK(ot_tensor_read_f32(ot_gpt2_train_param(g, i), p, k));
    p += k;
  }
  ot_gpt2_train_destroy(g);
  *n = total;
  return w;
}

static double max_diff(const float *a, const float *b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
  return m;
}

static void test_save_and_reload(void **state) {
  (void)state;
  char saved[4096], args[8192];
  ot_tmp_path(saved, sizeof saved, tmp, "out/model"); /* two levels: mkdir -p */
  snprintf(args, sizeof args, "train %s --data %s --steps 3 --batch 2 --seq 16 --lr 3e-3 --checkpoint none --save %s",
           model, tokens, saved);
  res r = cli(args);
  expect_ok(&r, args);
  assert_non_null(strstr(r.out, "step 3/3"));
  res_free(&r);

  snprintf(args, sizeof args, "run %s --prompt-ids 10,13,16 -n 4", saved);
  r = cli(args);
  expect_ok(&r, args);
  assert_non_null(strstr(r.out, "tokens: "));
  res_free(&r);

  /* The same 3 steps here: same windows, same options. */
  ot_ctx_opts co = ot_ctx_opts_default();
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&co, &ctx));
  ot_gpt2_train_opts o = ot_gpt2_train_opts_default();
  o.B = 2;
  o.T = 16;
  o.adam.lr = 3e-3f;
  ot_gpt2_trainer *g;
  OT_ASSERT_OK(ot_gpt2_train_create(ctx, model, &o, NULL, &g));
  ot_tokens *d;
  OT_ASSERT_OK(ot_tokens_open(tokens, 256, &d));
  int32_t in[32], tg[32];
  for (int s = 0; s < 3; s++) {
    float loss;
    OT_ASSERT_OK(ot_tokens_next(d, 2, 16, in, tg));
    OT_ASSERT_OK(ot_gpt2_train_step(g, in, tg, NULL, &loss));
  }
  ot_tokens_close(d);
  char mine[4096];
  OT_ASSERT_OK(ot_gpt2_train_save(g, ot_tmp_path(mine, sizeof mine, tmp, "mine")));
  ot_gpt2_train_destroy(g);

  int64_t n0, n1, n2;
  float *orig = params_of(ctx, model, &n0), *cli_w = params_of(ctx, saved, &n1), *ours = params_of(ctx, mine, &n2);
  assert_int_equal(n0, n1);
  assert_int_equal(n0, n2);
  double moved = max_diff(orig, cli_w, n0), gap = max_diff(cli_w, ours, n0);
  print_message("  trained weights moved by up to %.3g; CLI vs in-process %.3g\n", moved, gap);
  assert_true(moved > 1e-3); /* 3 AdamW steps at lr 3e-3 move some weight by ~lr each */
  /* Bitwise: the same steps on the same backend with one thread each (the
   * key slice of c_attn.bias has a zero true gradient, so AdamW turns any
   * rounding difference there into steps of ~lr: no tolerance would do). */
  assert_true(gap == 0);
  free(orig);
  free(cli_w);
  free(ours);
  ot_ctx_destroy(ctx);
}

/* Issue 43: --devices 2 (the step split over two emulated devices) prints
 * the losses of --devices 1 and saves the weights it trained, bitwise the
 * one-device ones; it saved the untrained weights before, and its losses
 * left one device's from step 2 on. */
static void test_two_devices(void **state) {
  (void)state;
  if (ot_num_devices() < 2) skip();
  double loss[2][4];
  char saved[2][4096], args[8192];
  for (int d = 0; d < 2; d++) {
    ot_tmp_path(saved[d], sizeof saved[d], tmp, d ? "dev2" : "dev1");
    snprintf(args, sizeof args,
             "train %s --data %s --steps 4 --batch 2 --seq 16 --lr 3e-3 --checkpoint none --devices %d --save %s "
             "--json",
             model, tokens, d + 1, saved[d]);
    res r = cli(args);
    expect_ok(&r, args);
    json_t *o = json_loads(r.out, 0, NULL);
    assert_non_null(o);
    json_t *st = json_object_get(o, "steps");
    assert_int_equal(json_array_size(st), 4);
    for (int i = 0; i < 4; i++) loss[d][i] = json_number_value(json_object_get(json_array_get(st, (size_t)i), "loss"));
    json_decref(o);
    res_free(&r);
  }
  for (int i = 0; i < 4; i++)
    if (loss[0][i] != loss[1][i])
      fail_msg("step %d: loss %.6f with --devices 2, %.6f with 1", i + 1, loss[1][i], loss[0][i]);
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(NULL, &ctx));
  int64_t n0, n1, n2;
  float *orig = params_of(ctx, model, &n0), *one = params_of(ctx, saved[0], &n1), *two = params_of(ctx, saved[1], &n2);
  assert_int_equal(n0, n1);
  assert_int_equal(n0, n2);
  if (max_diff(orig, two, n0) == 0) fail_msg("--devices 2 --save wrote the untrained weights");
  if (memcmp(one, two, (size_t)n0 * sizeof *one)) fail_msg("--devices 2 saved other weights than --devices 1");
  free(orig);
  free(one);
  free(two);
  ot_ctx_destroy(ctx);
}

/* Issue 43: --cpu-memory-limit was accepted and ignored. The trainer's homes
 * (weights, gradients, AdamW moments: 16 bytes per parameter, 1.9 MiB for
 * gpt2_small) all live in host memory: a budget below them is refused by
 * name (exit 2, blamed on the host budget even beside --gpu-memory-limit),
 * one above them trains and reports what the homes take. */
static void test_cpu_memory_limit(void **state) {
  (void)state;
  char args[8192];
#ifndef OT_OFFLOAD /* the host backend computes on the homes: no host budget at all, refused by name */
  snprintf(args, sizeof args, "train %s --data %s --steps 1 --batch 2 --seq 16 --cpu-memory-limit 8MB", model, tokens);
  expect_bad(args, "a host memory budget (--cpu-memory-limit) needs the map backend");
  return;
#endif
  snprintf(args, sizeof args, "train %s --data %s --steps 1 --batch 2 --seq 16 --cpu-memory-limit 1MB "
           "--gpu-memory-limit 512MB", model, tokens);
  expect_bad(args, "host memory budget 977 KiB (--cpu-memory-limit) is too small");
  snprintf(args, sizeof args, "train %s --data %s --steps 1 --batch 2 --seq 16 --cpu-memory-limit 8MB --json", model,
           tokens);
  res r = cli(args);
  expect_ok(&r, args);
  json_t *o = json_loads(r.out, 0, NULL), *h = json_object_get(o, "host");
  assert_non_null(h);
  assert_int_equal(json_integer_value(json_object_get(h, "cpu_budget_bytes")), 8000000);
  const json_int_t held = json_integer_value(json_object_get(h, "host_bytes"));
  assert_true(held >= 124672 * 16 && held <= 8000000);
  json_decref(o);
  res_free(&r);
}

static void test_dry_run(void **state) {
  (void)state;
  char args[8192];
  snprintf(args, sizeof args, "train %s --data %s --batch 2 --seq 16 --dry-run", model, tokens);
  res r = cli(args);
  expect_ok(&r, args);
  assert_non_null(strstr(r.out, "fits the budget"));
  assert_non_null(strstr(r.out, "recomputed layers"));
  assert_null(strstr(r.out, "step 1/")); /* nothing ran */
  res_free(&r);
  snprintf(args, sizeof args, "train %s --data %s --batch 2 --seq 16 --dry-run --gpu-memory-limit 16KB", model, tokens);
  expect_bad(args, "budget");
}

static void test_bad_input(void **state) {
  (void)state;
  char args[8192], p[4096];
  snprintf(args, sizeof args, "train %s --steps 2", model);
  expect_bad(args, "--data");
  snprintf(args, sizeof args, "train --data %s", tokens);
  expect_bad(args, "model directory");
  snprintf(args, sizeof args, "train %s --data %s --batch 0", model, tokens);
  expect_bad(args, "--batch");
  snprintf(args, sizeof args, "train %s --data %s --seq 200", model, tokens);
  expect_bad(args, "--seq 200");
  snprintf(args, sizeof args, "train %s --data %s --checkpoint sometimes", model, tokens);
  expect_bad(args, "--checkpoint");
  snprintf(args, sizeof args, "train %s --data %s --batch 8 --seq 128", model, tokens); /* 1025 > 600 tokens */
  expect_bad(args, "needs 1025");
  snprintf(args, sizeof args, "train %s --data %s/none.bin", model, tmp);
  expect_bad(args, "none.bin");
  ot_write_text(tmp, "junk.bin", "these are not tokens, just text that is long enough");
  snprintf(args, sizeof args, "train %s --data %s", model, ot_tmp_path(p, sizeof p, tmp, "junk.bin"));
  expect_bad(args, "not a token file");
  snprintf(args, sizeof args, "train %s/../llama_gqa --data %s", model, tokens);
  expect_bad(args, "GPT-2");
  /* issue 43: options that apply only beside another were accepted and ignored alone */
  snprintf(args, sizeof args, "train %s --data %s --steps 1 --batch 1 --seq 8 --seed 3", model, tokens);
  expect_bad(args, "--seed seeds the initialization of --init random");
  snprintf(args, sizeof args, "train %s --data %s --steps 1 --batch 1 --seq 8 --grad-memory host", model, tokens);
  expect_bad(args, "--grad-memory chooses where --grad-reduce allreduce");
  snprintf(args, sizeof args, "train %s --data %s --steps 1 --batch 1 --seq 8 --grad-reduce ordered --grad-memory host",
           model, tokens);
  expect_bad(args, "--grad-memory chooses where --grad-reduce allreduce");
}

/* Hugging Face's gpt2 asks for dropout 0.1 (an absent rate is GPT2Config's
 * 0.1): refused by name, and trained without it only when asked. */
static void test_dropout(void **state) {
  (void)state;
  char args[8192], dir[4096], cmd[8192];
  ot_tmp_path(dir, sizeof dir, tmp, "hf_dropout");
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s' && sed '/\"attn_pdrop\"/d' '%s/config.json' > '%s/config.json' && "
           "ln -sf '%s/model.safetensors' '%s/model.safetensors'",
           dir, model, dir, model, dir);
  assert_int_equal(system(cmd), 0);
  snprintf(args, sizeof args, "train %s --data %s --batch 1 --seq 8 --steps 1", dir, tokens);
  expect_bad(args, "attn_pdrop 0.1");
  snprintf(args, sizeof args, "train %s --data %s --batch 1 --seq 8 --steps 1 --no-dropout", dir, tokens);
  res r = cli(args);
  expect_ok(&r, args);
  assert_non_null(strstr(r.out, "step 1/1"));
  res_free(&r);
}

static void test_help(void **state) {
  (void)state;
  res r = cli("train --help");
  expect_ok(&r, "train --help");
  static const char *opts[] = {"--data", "--batch", "--accum", "--seq", "--steps", "--lr", "--checkpoint", "--init",
                               "--save", "--dry-run", "--gpu-memory-limit", "--json"};
  for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
    if (!strstr(r.out, opts[i])) fail_msg("train --help does not mention %s", opts[i]);
  res_free(&r);
}

/* A file's bytes equal another's. */
static int same_bytes(const char *a, const char *b) {
  size_t na, nb;
  char *x = ot_read_file(a, &na), *y = ot_read_file(b, &nb);
  int same = x && y && na == nb && !memcmp(x, y, na);
  free(x), free(y);
  return same;
}

/* train --save from a model directory with a tokenizer: the saved
 * directory holds the source's tokenizer and generation files, byte for
 * byte, and tokenizes as the source does (a loadable HF directory). */
static void test_save_keeps_tokenizer(void **state) {
  (void)state;
  static const char *const copy[] = {"config.json", "model.safetensors", "generation_config.json"};
  static const char *const tok[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                    "generation_config.json"};
  char src[4096], saved[4096], p[4096], q[4096], args[8192];
  ot_tmp_path(src, sizeof src, tmp, "with_tokenizer");
  assert_int_equal(mkdir(src, 0755), 0);
  for (size_t k = 0; k < 3; k++) {
    size_t n;
    snprintf(p, sizeof p, "%s/%s", model, copy[k]);
    char *b = ot_read_file(p, &n);
    assert_non_null(b);
    ot_write_bytes(src, copy[k], b, n);
    free(b);
  }
  snprintf(p, sizeof p, "%s/tokenizers/gpt2_style/tokenizer.json", getenv("OT_TEST_DATA"));
  size_t n;
  char *b = ot_read_file(p, &n);
  assert_non_null(b);
  ot_write_bytes(src, "tokenizer.json", b, n);
  free(b);
  ot_write_text(src, "tokenizer_config.json", "{\"eos_token\": \"<|endoftext|>\", \"clean_up_tokenization_spaces\": false}");
  ot_write_text(src, "special_tokens_map.json", "{\"eos_token\": \"<|endoftext|>\"}");
  ot_tmp_path(saved, sizeof saved, tmp, "saved_tok");
  snprintf(args, sizeof args, "train %s --data %s --steps 1 --batch 2 --seq 16 --checkpoint none --save %s", src, tokens,
           saved);
  res r = cli(args);
  expect_ok(&r, args);
  res_free(&r);
  for (size_t k = 0; k < sizeof tok / sizeof *tok; k++)
    if (!same_bytes(ot_tmp_path(p, sizeof p, src, tok[k]), ot_tmp_path(q, sizeof q, saved, tok[k])))
      fail_msg("--save: %s is not the source's", tok[k]);
  char *out[2];
  const char *dirs[2] = {src, saved};
  for (int k = 0; k < 2; k++) {
    snprintf(args, sizeof args, "tokenize %s --text-file %s/tokenizer_config.json", dirs[k], src);
    r = cli(args);
    expect_ok(&r, args);
    out[k] = strdup(r.out);
    res_free(&r);
  }
  assert_string_equal(out[0], out[1]);
  assert_true(strlen(out[0]) > 10);
  free(out[0]), free(out[1]);
}

int main(void) {
  /* As the command runs (cli()): one OpenMP thread, set before the runtime starts. */
  setenv("OMP_NUM_THREADS", "1", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_help),
      cmocka_unit_test(test_loss_falls_json),
      cmocka_unit_test(test_accumulation),
      cmocka_unit_test(test_save_and_reload),
      cmocka_unit_test(test_two_devices),
      cmocka_unit_test(test_cpu_memory_limit),
      cmocka_unit_test(test_save_keeps_tokenizer),
      cmocka_unit_test(test_dry_run),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_dropout),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
