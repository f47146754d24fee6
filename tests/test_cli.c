/* test_cli.c — the `omptensor` command as a user meets it, run as a
 * subprocess (posix_spawn, no shell; stdout and stderr captured in files).
 *
 * Bad input (issue 5): every case must exit 2 with exactly one line on stderr
 * that names the file or option and the problem, print nothing on stdout and
 * not crash; under the asan build the CLI itself is instrumented, so a leak
 * or a bad access on these paths fails here too. Good paths: `run` against
 * the reference model's greedy tokens and logits, --json, --prompt-ids-file,
 * settings precedence (flags > env > --config), inspect, trace summarize and
 * plot, demo, --help, --version and info. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "memory/device.h"
#include "omptensor/context.h"
#include "omptensor/npy.h"
#include "omptensor/safetensors.h"
#include "cli_test.h"
#include "omptensor/version.h"
#include "ot_testio.h"


static const char *cli_path, *data_dir;
static char *tmp;            /* per-test scratch directory */
static char gqa[4096];       /* tests/data/models/llama_gqa */

/* ---- running the CLI -------------------------------------------------------- */

typedef ot_cli_res cli_res;

/* Runs `omptensor ARGS...` (NULL-terminated) with extra environment `env`
 * ("K=V" strings, NULL-terminated; support/cli_test.c: ours without
 * OMPTENSOR_*, one OpenMP thread), output files in tmp. */
static cli_res cli_env(const char *const *env, ...) {
  const char *args[64];
  int n = 0;
  va_list ap;
  va_start(ap, env);
  const char *a;
  while ((a = va_arg(ap, const char *))) {
    assert_true(n < 63);
    args[n++] = a;
  }
  va_end(ap);
  args[n] = NULL;
  const ot_cli_run_opts o = {.out_dir = tmp, .extra_env = env};
  return ot_test_cli_run_with(&o, args);
}
#define cli(...) cli_env(NULL, __VA_ARGS__, (const char *)NULL)
#define cli_with(env, ...) cli_env(env, __VA_ARGS__, (const char *)NULL)

static void cli_free(cli_res *r) { ot_cli_res_free(r); }

static void show(const cli_res *r) {
  print_message("exit %d (signal %d)\n--- stdout\n%s--- stderr\n%s---\n", r->status, r->signal, r->out, r->err);
}

/* "load: 40%" / "generate: 100%": the plain progress lines of a non-terminal. */
static int is_progress_line(const char *l, size_t n) {
  const char *c = memchr(l, ':', n);
  if (!c || c == l || (size_t)(c - l) + 3 > n || c[1] != ' ') return 0;
  for (const char *p = l; p < c; p++)
    if (!(*p >= 'a' && *p <= 'z')) return 0;
  const char *p = c + 2, *e = l + n;
  if (p >= e || !(*p >= '0' && *p <= '9')) return 0;
  while (p < e && *p >= '0' && *p <= '9') p++;
  return p + 1 == e && *p == '%';
}

/* Exit 2, nothing on stdout, and stderr ending in exactly one error line,
 * "omptensor...: " then a message with every needle in it; before it only
 * progress lines. (The library's one-time notices, "omptensor: no GPU: ...",
 * are held back until the input is accepted, and dropped for bad input: no
 * line of theirs may come before an error of bad input.) */
static void expect_bad_(cli_res r, const char *what, ...) {
  int ok = r.status == 2 && r.signal == 0 && r.out[0] == '\0';
  const char *line = NULL;
  size_t line_len = 0;
  int lines = 0;
  size_t n = strlen(r.err);
  ok = ok && n > 0 && r.err[n - 1] == '\n';
  for (const char *p = r.err; ok && *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    int last = !e || !e[1];
    if (last || !is_progress_line(p, len)) {
      lines++;
      line = p;
      line_len = len;
    }
    p += len + (e ? 1 : 0);
  }
  ok = ok && lines == 1 && !strncmp(line, "omptensor", 9);
  char *msg = ok ? strndup(line, line_len) : NULL;
  /* the prefix once: "omptensor run: omptensor run: ..." is a bug */
  if (msg) {
    const char *colon = strstr(msg, ": ");
    ok = colon && strncmp(colon + 2, "omptensor", 9) != 0;
  }
  va_list ap;
  va_start(ap, what);
  const char *needle;
  while (ok && (needle = va_arg(ap, const char *)))
    if (!strstr(msg, needle)) {
      print_message("%s: the error does not mention '%s'\n", what, needle);
      ok = 0;
    }
  va_end(ap);
  if (!ok) {
    show(&r);
    free(msg);
    cli_free(&r);
    fail_msg("%s: expected exit 2, no stdout and a one-line error on stderr (%d lines)", what, lines);
  }
  print_message("  ok %-34s %s\n", what, msg);
  free(msg);
  cli_free(&r);
}
#define expect_bad(r, what, ...) expect_bad_((r), (what), __VA_ARGS__, (const char *)NULL)

/* Exit 0 without a sanitizer report. */
static void expect_ok(const cli_res *r, const char *what) {
  if (r->status != 0 || r->signal || strstr(r->err, "Sanitizer")) {
    show(r);
    fail_msg("%s: expected exit 0", what);
  }
}

/* ---- files ------------------------------------------------------------------ */

static char *path_in(char *buf, size_t cap, const char *name) { return ot_tmp_path(buf, cap, tmp, name); }

static void copy_file(const char *from, const char *to) {
  size_t n;
  char *b = ot_read_file(from, &n);
  FILE *f = fopen(to, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
  free(b);
}

/* tmp/name/ with llama_gqa's config.json, `from` in it replaced by `to`
 * (both NULL: unchanged); returns the directory in buf. */
static char *model_dir(char *buf, size_t cap, const char *name, const char *from, const char *to) {
  path_in(buf, cap, name);
  assert_int_equal(mkdir(buf, 0755), 0);
  char p[4096];
  snprintf(p, sizeof p, "%s/config.json", gqa);
  char *cfg = ot_read_file(p, NULL);
  if (from) {
    char *at = strstr(cfg, from);
    assert_non_null(at);
    size_t nf = strlen(from), nt = strlen(to), n = strlen(cfg);
    char *c2 = malloc(n - nf + nt + 1);
    assert_non_null(c2);
    memcpy(c2, cfg, (size_t)(at - cfg));
    memcpy(c2 + (at - cfg), to, nt);
    strcpy(c2 + (at - cfg) + nt, at + nf);
    free(cfg);
    cfg = c2;
  }
  ot_write_text(buf, "config.json", cfg);
  free(cfg);
  return buf;
}

/* The first `keep` bytes of llama_gqa's model.safetensors into dir. */
static void truncated_weights(const char *dir, size_t keep) {
  char p[4096];
  snprintf(p, sizeof p, "%s/model.safetensors", gqa);
  size_t n;
  char *b = ot_read_file(p, &n);
  assert_true(keep < n);
  ot_write_bytes(dir, "model.safetensors", b, keep);
  free(b);
}

/* llama_gqa's weights rewritten into dir with the tensor `rename` called `to`. */
static void renamed_weights(const char *dir, const char *rename, const char *to) {
  char p[4096];
  snprintf(p, sizeof p, "%s/model.safetensors", gqa);
  ot_st_file *f;
  OT_ASSERT_OK(ot_st_open(p, &f));
  int n = ot_st_count(f);
  ot_st_tensor *ts = calloc((size_t)n, sizeof *ts);
  assert_non_null(ts);
  int found = 0;
  for (int i = 0; i < n; i++) {
    const ot_st_info *in = ot_st_at(f, i);
    void *data = malloc(in->bytes ? in->bytes : 1);
    assert_non_null(data);
    OT_ASSERT_OK(ot_st_read(f, in, data, in->bytes));
    found += !strcmp(in->name, rename);
    ts[i] = (ot_st_tensor){!strcmp(in->name, rename) ? to : in->name, in->dtype, in->ndim, {0}, data};
    memcpy(ts[i].shape, in->shape, sizeof in->shape);
  }
  assert_int_equal(found, 1);
  snprintf(p, sizeof p, "%s/model.safetensors", dir);
  OT_ASSERT_OK(ot_st_write(p, ts, n, NULL, 0));
  for (int i = 0; i < n; i++) free((void *)ts[i].data);
  free(ts);
  ot_st_close(f);
}

/* The manifest's prompt as "1,17,42,..." and its greedy tokens. */
typedef struct manifest {
  char ids[1024];
  int n_prompt;
  int gen[64], n_gen;
} manifest;

static void read_manifest(manifest *m) {
  char p[4096];
  snprintf(p, sizeof p, "%s/manifest.json", gqa);
  json_error_t e;
  json_t *root = json_load_file(p, 0, &e);
  if (!root) fail_msg("%s: %s", p, e.text);
  json_t *pr = json_object_get(root, "prompt_ids");
  json_t *g = json_object_get(json_object_get(root, "generation"), "generated_ids");
  assert_true(json_is_array(pr) && json_is_array(g));
  m->n_prompt = (int)json_array_size(pr);
  int k = 0;
  for (int i = 0; i < m->n_prompt; i++)
    k += snprintf(m->ids + k, sizeof m->ids - (size_t)k, "%s%lld", i ? "," : "",
                  (long long)json_integer_value(json_array_get(pr, (size_t)i)));
  m->n_gen = (int)json_array_size(g);
  assert_true(m->n_gen >= 4 && m->n_gen <= 64);
  for (int i = 0; i < m->n_gen; i++) m->gen[i] = (int)json_integer_value(json_array_get(g, (size_t)i));
  json_decref(root);
}

/* stdout as one JSON object (and nothing else): returns it. */
static json_t *one_json_object(const cli_res *r) {
  size_t n = strlen(r->out);
  if (n == 0 || r->out[n - 1] != '\n' || strchr(r->out, '\n') != r->out + n - 1) {
    show(r);
    fail_msg("--json: stdout is not exactly one line");
  }
  json_error_t e;
  json_t *o = json_loads(r->out, 0, &e); /* fails on anything after the object */
  if (!json_is_object(o)) {
    show(r);
    fail_msg("--json: stdout is not one JSON object: %s", e.text);
  }
  return o;
}

static long long jint(const json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  if (!json_is_integer(v)) fail_msg("--json: \"%s\" is not an integer", key);
  return (long long)json_integer_value(v);
}

/* ---- fixtures ---------------------------------------------------------------- */

static int group_setup(void **state) {
  (void)state;
  cli_path = ot_test_cli();
  data_dir = getenv("OT_TEST_DATA");
  if (!data_dir) fprintf(stderr, "test_cli: set OT_TEST_DATA (tests/data)\n");
  if (!cli_path || !data_dir) return -1;
  snprintf(gqa, sizeof gqa, "%s/models/llama_gqa", data_dir);
  return 0;
}

static int setup(void **state) {
  (void)state;
  tmp = ot_tmpdir_create();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  ot_tmpdir_remove(tmp);
  tmp = NULL;
  return 0;
}

/* ---- bad input ------------------------------------------------------------------ */

static void test_bad_checkpoints(void **state) {
  (void)state;
  char d[4096], p[4096];

  path_in(p, sizeof p, "nope");
  expect_bad(cli("run", p, "--prompt-ids", "1"), "missing model dir", "nope", "No such file");
  path_in(p, sizeof p, "nope.safetensors");
  expect_bad(cli("inspect", p), "missing file (inspect)", "nope.safetensors", "No such file");

  /* truncated: cut in the data section, and shorter than the length prefix */
  model_dir(d, sizeof d, "cut", NULL, NULL);
  truncated_weights(d, 655112 - 100);
  expect_bad(cli("run", d, "--prompt-ids", "1"), "truncated (data)", "model.safetensors", "beyond the data section");
  ot_write_bytes(d, "model.safetensors", "\x10\x00\x00", 3);
  expect_bad(cli("run", d, "--prompt-ids", "1"), "truncated (prefix)", "model.safetensors", "truncated");

  /* header length beyond the file: the first 1000 bytes of a 3 KB header */
  model_dir(d, sizeof d, "short", NULL, NULL);
  truncated_weights(d, 1000);
  expect_bad(cli("run", d, "--prompt-ids", "1"), "header beyond the file", "model.safetensors", "header length",
             "beyond the file (1000 bytes)");

  /* the header itself */
  model_dir(d, sizeof d, "json", NULL, NULL);
  ot_write_st_raw(d, "model.safetensors", "{\"w\": {\"dtype\": \"F32\", ", 0);
  expect_bad(cli("run", d, "--prompt-ids", "1"), "invalid JSON header", "model.safetensors", "invalid JSON header");

  snprintf(p, sizeof p, "%s/model.safetensors", d);
  ot_write_st_raw(d, "model.safetensors",
                  "{\"lm_head.weight\": {\"dtype\": \"F32\", \"shape\": [256], \"data_offsets\": [0, 1024]}}", 512);
  expect_bad(cli("inspect", p), "offsets out of range", "model.safetensors", "'lm_head.weight'",
             "beyond the data section (512 bytes)");
  ot_write_st_raw(d, "model.safetensors",
                  "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
                  " \"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}",
                  32);
  expect_bad(cli("inspect", p), "overlapping offsets", "model.safetensors", "'a'", "'b'", "overlap");
  expect_bad(cli("run", d, "--prompt-ids", "1"), "overlapping offsets (run)", "model.safetensors", "overlap");
  ot_write_st_raw(d, "model.safetensors", "{\"w\": {\"dtype\": \"F33\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4);
  expect_bad(cli("inspect", p), "unknown dtype", "model.safetensors", "'w'", "unknown dtype \"F33\"");
  expect_bad(cli("run", d, "--prompt-ids", "1"), "unknown dtype (run)", "model.safetensors", "F33");
}

static void test_bad_model_for_config(void **state) {
  (void)state;
  char d[4096];
  /* a tensor missing: renamed in a rewritten file */
  model_dir(d, sizeof d, "missing", NULL, NULL);
  renamed_weights(d, "model.layers.2.mlp.down_proj.weight", "model.layers.2.mlp.down_projection.weight");
  expect_bad(cli("run", d, "--prompt-ids", "1"), "tensor missing", "missing", "model.layers.2.mlp.down_proj.weight");
  /* wrong shape for the config */
  model_dir(d, sizeof d, "shape", "\"intermediate_size\": 172", "\"intermediate_size\": 160");
  char src[4096];
  snprintf(src, sizeof src, "%s/model.safetensors", gqa);
  char dst[4096];
  snprintf(dst, sizeof dst, "%s/model.safetensors", d);
  copy_file(src, dst);
  expect_bad(cli("run", d, "--prompt-ids", "1"), "wrong shape", "shape", "mlp", "config.json", "160");
  /* more layers than the checkpoint has */
  model_dir(d, sizeof d, "layers", "\"num_hidden_layers\": 3", "\"num_hidden_layers\": 4");
  snprintf(dst, sizeof dst, "%s/model.safetensors", d);
  copy_file(src, dst);
  expect_bad(cli("run", d, "--prompt-ids", "1"), "layer missing", "model.layers.3.");
  /* config.json itself */
  model_dir(d, sizeof d, "cfg", "\"vocab_size\": 256", "\"vocab_size\": ");
  expect_bad(cli("run", d, "--prompt-ids", "1"), "config.json invalid", "config.json", "invalid JSON");
  model_dir(d, sizeof d, "cfg0", "\"vocab_size\": 256", "\"vocab_size\": 0");
  expect_bad(cli("run", d, "--prompt-ids", "1"), "config.json vocab 0", "config.json", "vocab_size");
}

static void test_bad_options(void **state) {
  (void)state;
  char y[4096], p[4096];
  ot_write_text(tmp, "bad.yaml", "memory:\n  offload_strategy: [balanced\n  max_gpu_memory: 3GB\n");
  path_in(y, sizeof y, "bad.yaml");
  expect_bad(cli("run", gqa, "--prompt-ids", "1", "--config", y), "malformed YAML", "bad.yaml", "YAML");
  ot_write_text(tmp, "bad2.yaml", "memory:\n  max_gpu_memory: 3XB\n");
  path_in(y, sizeof y, "bad2.yaml");
  expect_bad(cli("run", gqa, "--prompt-ids", "1", "--config", y), "bad size in YAML", "bad2.yaml", "max_gpu_memory",
             "3XB");
  ot_write_text(tmp, "bad3.yaml", "memory:\n  offload_strategy: sideways\n");
  path_in(y, sizeof y, "bad3.yaml");
  expect_bad(cli("demo", "--config", y), "bad strategy in YAML", "bad3.yaml", "sideways");
  path_in(y, sizeof y, "none.yaml");
  expect_bad(cli("run", gqa, "--prompt-ids", "1", "--config", y), "missing --config file", "none.yaml");

  expect_bad(cli("run", gqa, "--prompt-ids", "1", "--frobnicate"), "unknown option", "--frobnicate");
  expect_bad(cli("demo", "--frobnicate"), "unknown option (demo)", "--frobnicate");
  expect_bad(cli("info", "--frobnicate"), "unknown option (info)", "--frobnicate");
  expect_bad(cli("inspect", "--frobnicate"), "unknown option (inspect)", "--frobnicate");
  expect_bad(cli("inspect", gqa, gqa), "two paths (inspect)", "one FILE");
  expect_bad(cli("trace", "--frobnicate"), "trace without action", "summarize|plot");
  expect_bad(cli("trace", "draw", gqa), "unknown trace action", "'draw'");
  expect_bad(cli("frobnicate"), "unknown command", "frobnicate");
  expect_bad(cli("run", gqa, "--prompt-ids", "1", "--gpu-memory-limit", "3XB"), "bad size", "--gpu-memory-limit",
             "3XB");
  expect_bad(cli("demo", "--size", "3XB"), "bad size (demo --size)", "--size", "3XB");
  expect_bad(cli("run", gqa, "--prompt-ids", "1", "--offload", "sideways"), "bad --offload", "--offload",
             "sideways");
  expect_bad(cli("run", gqa, "--prompt-ids", "1", "--gpu-memory-limit"), "option without value",
             "--gpu-memory-limit");
  expect_bad(cli_with((const char *[]){"OMPTENSOR_GPU_MEMORY_LIMIT=lots", NULL}, "run", gqa, "--prompt-ids", "1"),
             "bad size in env", "OMPTENSOR_GPU_MEMORY_LIMIT", "lots");

  /* the prompt */
  ot_write_text(tmp, "prompt.txt", "1 2 3\n");
  path_in(p, sizeof p, "prompt.txt");
  expect_bad(cli("run", gqa, "--prompt-ids", "1", "--prompt-ids-file", p), "both prompt options", "--prompt-ids",
             "--prompt-ids-file");
  expect_bad(cli("run", gqa), "no prompt", "--prompt-ids", "--prompt-ids-file");
  expect_bad(cli("run", "--prompt-ids", "1"), "no model dir", "model");
  expect_bad(cli("run", gqa, "--prompt-ids", "1,x,3"), "bad id", "--prompt-ids", "'x'");
  expect_bad(cli("run", gqa, "--prompt-ids", ","), "no ids", "--prompt-ids", "no token ids");
  expect_bad(cli("run", gqa, "--prompt-ids", "1,256"), "id outside the vocab", "--prompt-ids", "256", "vocab");
  ot_write_text(tmp, "far.txt", "1\n9999\n");
  path_in(p, sizeof p, "far.txt");
  expect_bad(cli("run", gqa, "--prompt-ids-file", p), "id outside the vocab (file)", "far.txt", "9999", "vocab");
  path_in(p, sizeof p, "absent.txt");
  expect_bad(cli("run", gqa, "--prompt-ids-file", p), "missing prompt file", "absent.txt", "No such file");
  expect_bad(cli("run", gqa, "--prompt-ids", "1,2", "--max-new-tokens", "127"), "beyond the positions",
             "--max-new-tokens", "128");
  expect_bad(cli("run", gqa, "--prompt-ids", "1", "--max-new-tokens", "-3"), "negative --max-new-tokens",
             "--max-new-tokens", "-3");

  /* a budget no op fits: refused before the run, naming the op and the bytes */
  expect_bad(cli("run", gqa, "--prompt-ids", "1", "--gpu-memory-limit", "1000B"), "budget too small", "op '",
             "needs", "bytes", "budget is 1000 bytes");
}

/* ---- good paths ------------------------------------------------------------------- */

/* `run` against the reference: --json, greedy tokens, --logits-out, --trace,
 * then --prompt-ids-file in the human format, and the trace subcommands. */
static void test_run_reference(void **state) {
  (void)state;
  manifest m;
  read_manifest(&m);
  char npy[4096], trace[4096], svg[4096], pf[4096];
  path_in(npy, sizeof npy, "logits.npy");
  path_in(trace, sizeof trace, "trace.json");
  path_in(svg, sizeof svg, "timeline.svg");

  cli_res r = cli("run", gqa, "--prompt-ids", m.ids, "--max-new-tokens", "4", "--json", "--logits-out", npy,
                  "--trace", trace);
  expect_ok(&r, "run --json");
  json_t *o = one_json_object(&r);
  static const char *keys[] = {"backend", "device", "budget_bytes", "peak_device_bytes", "bytes_to_device",
                               "bytes_to_host", "evictions", "tokens", "tokens_per_second", "logits_checksum"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (!json_object_get(o, keys[i])) fail_msg("--json: no \"%s\" in %s", keys[i], r.out);
  assert_true(json_is_string(json_object_get(o, "backend")));
  assert_true(json_is_number(json_object_get(o, "tokens_per_second")));
  assert_true(json_is_number(json_object_get(o, "logits_checksum")));
  assert_true(jint(o, "peak_device_bytes") > 0);
  assert_true(jint(o, "bytes_to_device") >= jint(o, "weight_bytes")); /* every weight went up at least once */
  json_t *toks = json_object_get(o, "tokens");
  assert_int_equal(json_array_size(toks), 4);
  for (int i = 0; i < 4; i++) {
    if (json_integer_value(json_array_get(toks, (size_t)i)) != m.gen[i]) {
      show(&r);
      fail_msg("token %d is %lld, the reference's greedy token is %d", i,
               (long long)json_integer_value(json_array_get(toks, (size_t)i)), m.gen[i]);
    }
  }
  json_decref(o);
  cli_free(&r);

  /* --logits-out: a NumPy 1.0 file, '<f4', C order, [prompt_len, vocab], with
   * the reference's logits */
  size_t n;
  char *b = ot_read_file(npy, &n);
  assert_true(n > 10);
  assert_memory_equal(b, "\x93NUMPY\x01\x00", 8);
  size_t hlen = (size_t)(unsigned char)b[8] | (size_t)(unsigned char)b[9] << 8;
  assert_true(10 + hlen <= n);
  char *hdr = strndup(b + 10, hlen);
  char shape[64];
  snprintf(shape, sizeof shape, "'shape': (%d, 256)", m.n_prompt);
  if (!strstr(hdr, "'descr': '<f4'") || !strstr(hdr, "'fortran_order': False") || !strstr(hdr, shape))
    fail_msg("--logits-out header '%s' is not float32 C-order %s", hdr, shape);
  free(hdr);
  assert_int_equal((10 + hlen) % 64, 0);
  assert_int_equal(n, 10 + hlen + (size_t)m.n_prompt * 256 * 4);
  free(b);
  ot_npy_array got, want;
  char ref[4096];
  snprintf(ref, sizeof ref, "%s/logits.npy", gqa);
  OT_ASSERT_OK(ot_npy_read(npy, &got));
  OT_ASSERT_OK(ot_npy_read(ref, &want));
  assert_int_equal(got.numel, want.numel);
  float lo = 1e30f, hi = -1e30f, err = 0;
  for (int64_t i = 0; i < want.numel; i++) {
    float w = ((float *)want.data)[i], g = ((float *)got.data)[i], d = w > g ? w - g : g - w;
    lo = w < lo ? w : lo;
    hi = w > hi ? w : hi;
    err = d > err ? d : err;
  }
  if (!(err <= 1e-4f * (hi - lo))) fail_msg("--logits-out: max abs error %g against the reference", (double)err);
  ot_npy_free(&got);
  ot_npy_free(&want);

  /* --prompt-ids-file, commas and whitespace, in the human format */
  char *ids = strdup(m.ids);
  for (char *c = ids; *c; c++)
    if (*c == ',' && (c - ids) % 3 == 0) *c = '\n';
  ot_write_text(tmp, "prompt.txt", ids);
  free(ids);
  path_in(pf, sizeof pf, "prompt.txt");
  r = cli("run", gqa, "--prompt-ids-file", pf, "-n", "4");
  expect_ok(&r, "run --prompt-ids-file");
  char line[128];
  snprintf(line, sizeof line, "tokens: %d,%d,%d,%d\n", m.gen[0], m.gen[1], m.gen[2], m.gen[3]);
  if (strncmp(r.out, line, strlen(line))) {
    show(&r);
    fail_msg("run --prompt-ids-file: stdout does not start with '%s'", line);
  }
  assert_non_null(strstr(r.out, "tokens/s"));
  assert_non_null(strstr(r.err, "load: 100%\n"));
  assert_non_null(strstr(r.err, "generate: 100%\n"));
  /* An emulated device has no pinned memory: a run that starts says so once,
   * after the load and before the generation (held back until then, so that
   * bad input has its one line). */
  if (ot_num_devices() > 0 && !ot_dev_is_gpu(0)) {
    const char *notice = "omptensor: no GPU: pinned host memory falls back to pageable host memory\n";
    const char *at = strstr(r.err, notice);
    if (!at || strstr(at + 1, notice) || at < strstr(r.err, "load: 100%") || at > strstr(r.err, "generate: ")) {
      show(&r);
      fail_msg("run on an emulated device: the no-GPU notice once, between the load and the generation");
    }
  }
  cli_free(&r);

  /* trace summarize / plot on the trace of the first run */
  r = cli("trace", "summarize", trace);
  expect_ok(&r, "trace summarize");
  assert_non_null(strstr(r.out, "peak device bytes"));
  assert_non_null(strstr(r.out, "budget check: device bytes never exceeded"));
  cli_free(&r);
  r = cli("trace", "plot", trace, "-o", svg);
  expect_ok(&r, "trace plot");
  cli_free(&r);
  b = ot_read_file(svg, &n);
  assert_true(n > 100 && !strncmp(b, "<svg", 4));
  assert_non_null(strstr(b, "</svg>"));
  /* the phases ot_generate marks, recorded in the trace and drawn */
  const char *pre = strstr(b, ">prefill</text>"), *dec = strstr(b, ">decode</text>");
  assert_true(pre && dec && pre < dec);
  free(b);
  expect_bad(cli("trace", "summarize", npy), "trace summarize on a non-trace", "logits.npy");
  expect_bad(cli("trace", "plot", trace), "trace plot without -o", "-o");
}

/* --devices 2 with per-device limits: the model split over devices 0 and 1
 * (the reference's greedy tokens, a trace with kernels on both); on a build
 * without offload devices it runs on the host as one stage, saying so. */
static void test_run_devices(void **state) {
  (void)state;
  manifest m;
  read_manifest(&m);
  char trace[4096];
  path_in(trace, sizeof trace, "trace.json");
  cli_res r = cli("run", gqa, "--prompt-ids", m.ids, "-n", "4", "--json", "--devices", "2", "--gpu-memory-limit",
                  "0:200KB,1:300KB", "--trace", trace);
  if (ot_num_devices() == 1) {
    /* One device (the one-GPU machine): two cannot be had, and that is an
     * error naming what the runtime has, not a silent single-device run. */
    expect_bad(r, "run --devices 2 on one device", "devices 0..1 asked", "the runtime has 1");
    return;
  }
  expect_ok(&r, "run --devices 2");
  json_t *o = one_json_object(&r);
  json_t *toks = json_object_get(o, "tokens"), *devs = json_object_get(o, "devices");
  for (int i = 0; i < 4; i++) assert_int_equal(json_integer_value(json_array_get(toks, (size_t)i)), m.gen[i]);
  if (ot_num_devices() >= 2) {
    assert_int_equal(json_array_size(devs), 2);
    assert_int_equal(json_integer_value(json_array_get(devs, 1)), 1);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(o, "device_budgets_bytes"), 1)), 300000);
    assert_true(jint(o, "peak_device_bytes") <= 300000);
    size_t n;
    char *b = ot_read_file(trace, &n);
    assert_non_null(strstr(b, "\"name\":\"device 1\"")); /* a process (lane group) per device */
    free(b);
  } else {
    assert_int_equal(json_array_size(devs), 1);
    assert_non_null(strstr(r.err, "running on the host as one stage"));
  }
  json_decref(o);
  cli_free(&r);
}

/* flags > OMPTENSOR_* > --config, seen in --json's budget_bytes and strategy;
 * and the tokens do not depend on either. */
static void test_precedence(void **state) {
  (void)state;
  char y[4096];
  ot_write_text(tmp, "c.yaml", "memory:\n  offload_strategy: minimal\n  max_gpu_memory: 3MB\n");
  path_in(y, sizeof y, "c.yaml");
  const char *env[] = {"OMPTENSOR_GPU_MEMORY_LIMIT=4MB", "OMPTENSOR_OFFLOAD=aggressive", NULL};
  struct {
    cli_res r;
    long long budget;
    const char *strategy;
  } c[3] = {
      {cli("run", gqa, "--prompt-ids", "1,2,3", "-n", "2", "--json", "--config", y), 3000000, "minimal"},
      {cli_with(env, "run", gqa, "--prompt-ids", "1,2,3", "-n", "2", "--json", "--config", y), 4000000, "aggressive"},
      {cli_with(env, "run", gqa, "--gpu-memory-limit", "5MB", "--prompt-ids", "1,2,3", "-n", "2", "--json",
                "--config", y, "--offload", "none"),
       5000000, "none"},
  };
  json_t *first_tokens = NULL;
  for (int i = 0; i < 3; i++) {
    expect_ok(&c[i].r, "run with settings");
    json_t *o = one_json_object(&c[i].r);
    if (jint(o, "budget_bytes") != c[i].budget ||
        strcmp(json_string_value(json_object_get(o, "strategy")), c[i].strategy)) {
      show(&c[i].r);
      fail_msg("case %d: expected budget %lld and strategy %s", i, c[i].budget, c[i].strategy);
    }
    assert_true(jint(o, "peak_device_bytes") <= c[i].budget);
    if (!first_tokens) first_tokens = json_incref(json_object_get(o, "tokens"));
    else assert_true(json_equal(first_tokens, json_object_get(o, "tokens")));
    json_decref(o);
    cli_free(&c[i].r);
  }
  json_decref(first_tokens);
}

static void test_inspect(void **state) {
  (void)state;
  cli_res r = cli("inspect", gqa);
  expect_ok(&r, "inspect DIR");
  const char *want[] = {"model.embed_tokens.weight", "[256, 64]", "model.layers.2.mlp.down_proj.weight",
                        "[64, 172]", "30 tensors in 1 file(s)", "652032 bytes", "config: llama", "vocab 256"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(r.out, want[i])) {
      show(&r);
      fail_msg("inspect DIR: no '%s'", want[i]);
    }
  cli_free(&r);
  char f[4096];
  snprintf(f, sizeof f, "%s/model.safetensors", gqa);
  r = cli("inspect", f);
  expect_ok(&r, "inspect FILE");
  assert_non_null(strstr(r.out, "lm_head.weight"));
  assert_non_null(strstr(r.out, "30 tensors in 1 file(s)"));
  assert_null(strstr(r.out, "config:"));
  cli_free(&r);
  /* a GGUF file: its metadata and tensors; run builds the model a whole
   * one holds, says what a partial one lacks, and refuses a broken one for
   * what is wrong in it */
  char g[4096];
  snprintf(g, sizeof g, "%s/../../gguf/tiny.gguf", gqa);
  r = cli("inspect", g);
  expect_ok(&r, "inspect FILE.gguf");
  const char *gwant[] = {"GGUF version 3, architecture llama", "blk.0.attn_q.weight", "Q4_0", "[4, 64]",
                         "tokenizer.ggml.tokens", "array of 5 string", "5 tensors"};
  for (size_t i = 0; i < sizeof gwant / sizeof gwant[0]; i++)
    if (!strstr(r.out, gwant[i])) {
      show(&r);
      fail_msg("inspect FILE.gguf: no '%s'", gwant[i]);
    }
  cli_free(&r);
  expect_bad(cli("run", g, "--prompt-ids", "1"), "run a partial FILE.gguf", "tiny.gguf", "llama.embedding_length",
             "is missing");
  snprintf(g, sizeof g, "%s/../../gguf/llama-mixed.gguf", gqa);
  r = cli("run", g, "--prompt-ids", "1,17,42", "--max-new-tokens", "3");
  expect_ok(&r, "run FILE.gguf");
  if (!strstr(r.out, "tokens: 40,4,28")) { /* the reference pass's next token is 40 (llama-mixed.json) */
    show(&r);
    fail_msg("run FILE.gguf: not the reference's tokens");
  }
  cli_free(&r);
  snprintf(g, sizeof g, "%s/../../gguf/bad-model-arch.gguf", gqa);
  expect_bad(cli("run", g, "--prompt-ids", "1"), "run an unsupported GGUF", "bad-model-arch.gguf", "'gemma3'",
             "not supported");
  snprintf(g, sizeof g, "%s/../../gguf/bad-type.gguf", gqa);
  expect_bad(cli("inspect", g), "inspect a bad GGUF", "bad-type.gguf", "tensor 'w'", "ggml type 99");
  expect_bad(cli("run", g, "--prompt-ids", "1"), "run a bad GGUF", "bad-type.gguf", "ggml type 99");
}

/* A small demo: the default budget is a quarter of --size, the model is
 * larger than the budget (so it evicts), and the budget holds. */
static void test_demo(void **state) {
  (void)state;
  cli_res r = cli("demo", "--size", "20MB", "-n", "4", "--json");
  expect_ok(&r, "demo --json");
  json_t *o = one_json_object(&r);
  assert_int_equal(jint(o, "budget_bytes"), 5000000);
  assert_int_equal(json_array_size(json_object_get(o, "tokens")), 4);
  assert_true(jint(o, "weight_bytes") > 3 * 5000000);
  assert_true(jint(o, "weight_bytes") <= 20000000);
  assert_true(jint(o, "peak_device_bytes") <= 5000000);
  assert_true(jint(o, "evictions") > 0);
  json_decref(o);
  cli_free(&r);
}

static void test_help_and_info(void **state) {
  (void)state;
  const char *cmds[][3] = {{"--help", NULL}, {"run", "--help"}, {"demo", "--help"}, {"inspect", "--help"},
                           {"trace", "--help"}, {"info", "--help"}, {"run", "-h"}};
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    cli_res r = cmds[i][1] ? cli(cmds[i][0], cmds[i][1]) : cli(cmds[i][0]);
    expect_ok(&r, cmds[i][0]);
    if (strncmp(r.out, "usage: omptensor", 16) || r.err[0]) {
      show(&r);
      fail_msg("%s %s: expected usage on stdout only", cmds[i][0], cmds[i][1] ? cmds[i][1] : "");
    }
    if (i > 0 && !strstr(r.out, cmds[i][0])) fail_msg("%s --help does not name its command", cmds[i][0]);
    cli_free(&r);
  }
  cli_res r = cli("info");
  expect_ok(&r, "info");
  assert_non_null(strstr(r.out, "omptensor"));
  assert_non_null(strstr(r.out, "budget from: default"));
  cli_free(&r);
  /* the budget env and YAML set, and where it came from (info ignored
   * both before issue 17); a flag over both, as for every command */
  const char *env[] = {"OMPTENSOR_GPU_MEMORY_LIMIT=300KB", NULL};
  r = cli_with(env, "info");
  expect_ok(&r, "info with OMPTENSOR_GPU_MEMORY_LIMIT");
  if (!strstr(r.out, ": 293 KiB (300000 bytes)\n") ||
      !strstr(r.out, "budget from: environment, OMPTENSOR_GPU_MEMORY_LIMIT=300KB\n")) {
    show(&r);
    fail_msg("info: not the environment's budget");
  }
  cli_free(&r);
  char y[4096];
  path_in(y, sizeof y, "info.yaml");
  ot_write_text(tmp, "info.yaml", "memory:\n  max_gpu_memory: 1MB\n");
  r = cli("info", "--config", y);
  expect_ok(&r, "info --config");
  if (!strstr(r.out, ": 977 KiB (1000000 bytes)\n") || !strstr(r.out, "budget from: ") ||
      !strstr(r.out, "info.yaml, memory.max_gpu_memory\n")) {
    show(&r);
    fail_msg("info --config: not the file's budget");
  }
  cli_free(&r);
  r = cli_with(env, "info", "--config", y); /* the environment is above the file */
  expect_ok(&r, "info --config with OMPTENSOR_GPU_MEMORY_LIMIT");
  if (!strstr(r.out, "budget from: environment")) {
    show(&r);
    fail_msg("info: the file won over the environment");
  }
  cli_free(&r);
  r = cli_with(env, "info", "--config", y, "--gpu-memory-limit", "2MB");
  expect_ok(&r, "info --gpu-memory-limit");
  if (!strstr(r.out, ": 1.91 MiB (2000000 bytes)\n") || !strstr(r.out, "budget from: --gpu-memory-limit\n")) {
    show(&r);
    fail_msg("info --gpu-memory-limit: not the flag's budget");
  }
  cli_free(&r);
  expect_bad(cli("info", "--gpu-memory-limit", "3XB"), "bad size (info)", "--gpu-memory-limit", "3XB");
  /* no command at all: usage on stderr, exit 2 */
  r = cli_env(NULL, (const char *)NULL);
  assert_int_equal(r.status, 2);
  assert_non_null(strstr(r.err, "usage: omptensor"));
  assert_string_equal(r.out, "");
  cli_free(&r);
}

/* Issue 43: info --json (it was ignored: the text was printed), each
 * command's help lists only the options it takes and refuses the others,
 * run --help names every family and GGUF, and budgets on the device. */
static void test_info_json_and_options(void **state) {
  (void)state;
  cli_res r = cli("info", "--json");
  expect_ok(&r, "info --json");
  json_t *o = one_json_object(&r);
  const json_t *devs = json_object_get(o, "devices"), *src = json_object_get(o, "budget_source");
  assert_true(json_is_array(devs));
  assert_int_equal(json_array_size(devs), ot_num_devices() < OT_MAX_DEVICES ? ot_num_devices() : OT_MAX_DEVICES);
  assert_true(json_is_object(json_object_get(o, "backends")));
  assert_true(json_is_object(json_object_get(o, "selected")));
  assert_string_equal(json_string_value(json_object_get(src, "source")), "default");
  if (ot_num_devices() > 0) {
    assert_int_equal(jint(json_array_get(devs, 0), "memory_bytes"), (long long)ot_device_capacity(0));
    if (!ot_dev_is_gpu(0)) assert_int_equal(jint(o, "budget_bytes"), (long long)ot_device_capacity(0));
  } else {
    assert_true(json_is_null(json_object_get(o, "budget_bytes"))); /* the host: no limit */
  }
  json_decref(o);
  cli_free(&r);
  const char *env[] = {"OMPTENSOR_GPU_MEMORY_LIMIT=300KB", NULL};
  r = cli_with(env, "info", "--json");
  expect_ok(&r, "info --json with OMPTENSOR_GPU_MEMORY_LIMIT");
  o = one_json_object(&r);
  src = json_object_get(o, "budget_source");
  assert_int_equal(jint(o, "budget_bytes"), 300000);
  assert_string_equal(json_string_value(json_object_get(src, "source")), "environment");
  assert_string_equal(json_string_value(json_object_get(src, "name")), "OMPTENSOR_GPU_MEMORY_LIMIT");
  assert_string_equal(json_string_value(json_object_get(src, "value")), "300KB");
  json_decref(o);
  cli_free(&r);

  /* a percentage of an emulated device is of the 1 GiB it is given (it was
   * refused); more than the device's memory is refused, naming it */
  if (ot_num_devices() > 0) {
    const long long cap = (long long)ot_device_capacity(0);
    r = cli("info", "--json", "--gpu-memory-limit", "25%");
    expect_ok(&r, "info --gpu-memory-limit 25%");
    o = one_json_object(&r);
    assert_int_equal(jint(o, "budget_bytes"), cap / 4);
    json_decref(o);
    cli_free(&r);
    r = cli("run", gqa, "--prompt-ids", "1,2", "-n", "1", "--json", "--gpu-memory-limit", "25%");
    expect_ok(&r, "run --gpu-memory-limit 25%");
    o = one_json_object(&r);
    assert_int_equal(jint(o, "budget_bytes"), cap / 4);
    json_decref(o);
    cli_free(&r);
    char over[32];
    snprintf(over, sizeof over, "%lld", cap + 1);
    expect_bad(cli("run", gqa, "--prompt-ids", "1", "--gpu-memory-limit", over), "run: a budget over the device",
               "--gpu-memory-limit", "more than its memory");
    expect_bad(cli("info", "--gpu-memory-limit", "100TB"), "info: a budget over the device", "--gpu-memory-limit",
               "for device 0, more than its memory");
  }

  /* help: only the options a command takes; the others refused */
  r = cli("info", "--help");
  expect_ok(&r, "info --help");
  assert_non_null(strstr(r.out, "--json"));
  assert_non_null(strstr(r.out, "--gpu-memory-limit"));
  static const char *const not_info[] = {"--trace", "--offload", "--dtype", "--compute", "--usm-placement", "--seed"};
  for (size_t i = 0; i < sizeof not_info / sizeof not_info[0]; i++)
    if (strstr(r.out, not_info[i])) fail_msg("info --help lists %s, which info does not take", not_info[i]);
  cli_free(&r);
  r = cli("demo", "--help");
  expect_ok(&r, "demo --help");
  assert_null(strstr(r.out, "--cpu-memory-limit"));
  assert_null(strstr(r.out, "--temperature"));
  assert_non_null(strstr(r.out, "--gpu-memory-limit"));
  cli_free(&r);
  r = cli("run", "--help");
  expect_ok(&r, "run --help");
  static const char *const families[] = {"Llama 1-3", "Mistral", "Qwen2,", "Gemma", "Phi-3", "Mixtral", "Qwen2-MoE",
                                         "GPT-2", "GGUF", "llama", "qwen2"};
  for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
    if (!strstr(r.out, families[i])) fail_msg("run --help does not name %s", families[i]);
  cli_free(&r);
  char t[4096];
  path_in(t, sizeof t, "t.json");
  expect_bad(cli("info", "--trace", t), "info --trace", "unknown option '--trace'");
  expect_bad(cli("info", "--offload", "aggressive"), "info --offload", "unknown option '--offload'");
  expect_bad(cli("demo", "--cpu-memory-limit", "1GB"), "demo --cpu-memory-limit",
             "unknown option '--cpu-memory-limit'");
  expect_bad(cli("demo", "--temperature", "0.5"), "demo --temperature", "unknown option '--temperature'");
}

/* Issue 43: a failure while running (exit 1) is one line too: what the
 * library noticed before it ("no GPU: pinned host memory falls back ...")
 * follows the error on its line; it was a line of its own before it. */
static void test_runtime_error_one_line(void **state) {
  (void)state;
  if (ot_num_devices() == 0) return; /* the host backend allocates no pinned memory to fail */
  const char *env[] = {"OMPTENSOR_FAULT=pinned_alloc:3", NULL};
  cli_res r = cli_with(env, "run", gqa, "--prompt-ids", "1,2", "-n", "2");
  int lines = 0;
  const char *line = NULL;
  for (const char *p = r.err; *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (!is_progress_line(p, len)) lines++, line = p;
    p += len + (e ? 1 : 0);
  }
  if (r.status != 1 || lines != 1 || strncmp(line, "omptensor run: ", 15) ||
      !strstr(line, "injected by OMPTENSOR_FAULT") ||
      (!ot_dev_is_gpu(0) && !strstr(line, "(noticed before: no GPU: pinned host memory"))) {
    show(&r);
    fail_msg("a failure while running: want exit 1 and one line (besides progress) with the notice on it");
  }
  cli_free(&r);
}

/* --version: the library's version, which is the headers' (version.h, from
 * the project's VERSION), and the offload target of the build. */
static void test_version(void **state) {
  (void)state;
  char parts[64];
  snprintf(parts, sizeof parts, "%d.%d.%d", OT_VERSION_MAJOR, OT_VERSION_MINOR, OT_VERSION_PATCH);
  assert_string_equal(parts, OT_VERSION_STRING);
  assert_int_equal(OT_VERSION_NUMBER, OT_VERSION_MAJOR * 10000 + OT_VERSION_MINOR * 100 + OT_VERSION_PATCH);
  assert_string_equal(ot_version(), OT_VERSION_STRING);
#ifdef OT_OFFLOAD
  assert_true(strcmp(ot_version_offload(), "none") != 0);
#else
  assert_string_equal(ot_version_offload(), "none");
#endif
  cli_res r = cli("--version");
  expect_ok(&r, "--version");
  char want[256];
  snprintf(want, sizeof want, "omptensor %s (offload: %s)\n", OT_VERSION_STRING, ot_version_offload());
  if (strcmp(r.out, want) || r.err[0]) {
    show(&r);
    fail_msg("--version: expected exactly '%s' on stdout", want);
  }
  cli_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_bad_checkpoints, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_model_for_config, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_options, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_reference, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_devices, setup, teardown),
      cmocka_unit_test_setup_teardown(test_precedence, setup, teardown),
      cmocka_unit_test_setup_teardown(test_inspect, setup, teardown),
      cmocka_unit_test_setup_teardown(test_demo, setup, teardown),
      cmocka_unit_test_setup_teardown(test_help_and_info, setup, teardown),
      cmocka_unit_test_setup_teardown(test_info_json_and_options, setup, teardown),
      cmocka_unit_test_setup_teardown(test_runtime_error_one_line, setup, teardown),
      cmocka_unit_test_setup_teardown(test_version, setup, teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, NULL);
}
