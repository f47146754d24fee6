/* test_cli_text.c — text in, text out: `omptensor run MODEL --prompt TEXT`
 * on the two models of tests/data/models that carry a tokenizer
 * (llama_text: sentencepiece-style with byte fallback; gpt2_text:
 * byte-level), against what transformers' greedy generate() + decode() made
 * of the same prompts (expected.json, scripts/gen_text_ref.py): the ids and
 * the text, stopping at the model's EOS ids from generation_config.json and
 * running to max_new_tokens with --ignore-eos; the text streamed on stdout;
 * generation_config's max_new_tokens under env and flags; a JSONL batch job
 * with a bad line, stopped by a failure and resumed, cut by a "kill" (a
 * half-written last line) and resumed; and the refusals. Issue 43: --out
 * is changed only when it is this job's result file (a binary file, a
 * file without a complete line, another job's results and the prompts
 * file itself are refused untouched; an empty file and a cut first line
 * resume); results whose text holds U+0000 are read back; - is stdin and
 * stdout; a batch line's max_new_tokens is named as its field; the text
 * report says why generation stopped; Ctrl-C stops at the next token with
 * the summary and exit 130 (a batch job resumable after it); a failed
 * --trace write comes before any --json success object. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_test.h"
#include "memory/device.h"
#include "ot_testio.h"

static char *tmp, data[4096];
static const char *const models[] = {"llama_text", "gpt2_text"};

static int setup(void **state) {
  (void)state;
  const char *d = getenv("OT_TEST_DATA");
  if (!d || !ot_test_cli()) return -1;
  snprintf(data, sizeof data, "%s", d);
  tmp = ot_tmpdir_create();
  return tmp ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  ot_tmpdir_remove(tmp);
  return 0;
}

static const char *model_dir(const char *name) {
  static char buf[2][4200];
  static int k;
  k ^= 1;
  snprintf(buf[k], sizeof buf[k], "%s/models/%s", data, name);
  return buf[k];
}

static json_t *expected(const char *name) {
  char p[4300];
  snprintf(p, sizeof p, "%s/expected.json", model_dir(name));
  json_error_t e;
  json_t *j = json_load_file(p, 0, &e);
  if (!j) fail_msg("%s: %s", p, e.text);
  return j;
}

static ot_cli_res run_env(const char *const *env, const char *const *args) {
  ot_cli_run_opts o = {.out_dir = tmp, .cwd = tmp, .extra_env = env, .deadline_s = 120};
  return ot_test_cli_run_with(&o, args);
}
static ot_cli_res run(const char *const *args) { return run_env(NULL, args); }

/* The "tokens" of a JSON result equal `want` (a JSON array of ids). */
static void same_ids(const json_t *got, const json_t *want, const char *what) {
  if (!json_equal((json_t *)got, (json_t *)want)) {
    char *g = json_dumps(got, JSON_COMPACT), *w = json_dumps(want, JSON_COMPACT);
    fail_msg("%s: tokens %s, transformers %s", what, g ? g : "(none)", w);
  }
}

static void same_text(const json_t *got, const char *want, const char *what) {
  if (!json_is_string(got) || strcmp(json_string_value(got), want))
    fail_msg("%s: text \"%s\", transformers \"%s\"", what, json_is_string(got) ? json_string_value(got) : "(none)",
             want);
}

/* Every reference prompt with --json: ids, text and why it stopped equal
 * transformers', with the model's EOS ids and with --ignore-eos. */
static void test_generate_matches_transformers(void **state) {
  (void)state;
  for (size_t k = 0; k < 2; k++) {
    json_t *ref = expected(models[k]);
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(ref, "cases"), i, c) {
      const char *prompt = json_string_value(json_object_get(c, "prompt"));
      for (int ignore = 0; ignore < 2; ignore++) {
        const char *args[] = {"run", model_dir(models[k]), "--prompt", prompt, "--json", ignore ? "--ignore-eos" : NULL,
                              NULL};
        ot_cli_res r = run(args);
        char what[512];
        snprintf(what, sizeof what, "%s \"%s\"%s", models[k], prompt, ignore ? " --ignore-eos" : "");
        json_t *o = json_loads(r.out, 0, NULL);
        if (r.status != 0 || !o) fail_msg("%s: exit %d, stdout %s, stderr %s", what, r.status, r.out, r.err);
        same_ids(json_object_get(o, "tokens"), json_object_get(c, ignore ? "ids_ignore_eos" : "ids"), what);
        same_text(json_object_get(o, "text"), json_string_value(json_object_get(c, ignore ? "text_ignore_eos" : "text")),
                  what);
        const char *stopped = json_string_value(json_object_get(o, "stopped"));
        assert_string_equal(stopped, ignore ? "length" : json_string_value(json_object_get(c, "stopped")));
        json_decref(o);
        ot_cli_res_free(&r);
      }
    }
    json_decref(ref);
  }
}

/* Without --json the continuation is all of stdout (and a newline), the
 * summary on stderr; --prompt-file and stdin give the same. */
static void test_streamed_text(void **state) {
  (void)state;
  for (size_t k = 0; k < 2; k++) {
    json_t *ref = expected(models[k]);
    const json_t *c = json_array_get(json_object_get(ref, "cases"), 1);
    const char *prompt = json_string_value(json_object_get(c, "prompt"));
    char want[4096];
    snprintf(want, sizeof want, "%s\n", json_string_value(json_object_get(c, "text_ignore_eos")));
    ot_write_text(tmp, "prompt.txt", prompt);
    char in[4200];
    ot_tmp_path(in, sizeof in, tmp, "prompt.txt");
    const char *a1[] = {"run", model_dir(models[k]), "--prompt", prompt, "--ignore-eos", NULL};
    const char *a2[] = {"run", model_dir(models[k]), "--prompt-file", in, "--ignore-eos", NULL};
    const char *const *as[] = {a1, a2};
    for (int j = 0; j < 2; j++) {
      ot_cli_res r = run(as[j]);
      if (r.status != 0 || strcmp(r.out, want))
        fail_msg("%s %s: exit %d, stdout '%s', want '%s' (stderr %s)", models[k], as[j][2], r.status, r.out, want,
                 r.err);
      assert_non_null(strstr(r.err, "tokens/s")); /* the summary, out of the text's way */
      ot_cli_res_free(&r);
    }
    const char *a3[] = {"run", model_dir(models[k]), "--prompt-file", "-", "--ignore-eos", NULL};
    ot_cli_run_opts o = {.out_dir = tmp, .cwd = tmp, .stdin_path = in, .deadline_s = 120};
    ot_cli_res r = ot_test_cli_run_with(&o, a3);
    if (r.status != 0 || strcmp(r.out, want)) fail_msg("--prompt-file -: exit %d, stdout '%s'", r.status, r.out);
    ot_cli_res_free(&r);
    json_decref(ref);
  }
}

static long n_tokens(const ot_cli_res *r) {
  json_t *o = json_loads(r->out, 0, NULL);
  if (r->status != 0 || !o) fail_msg("exit %d, stdout %s, stderr %s", r->status, r->out, r->err);
  long n = (long)json_array_size(json_object_get(o, "tokens"));
  json_decref(o);
  return n;
}

/* generation_config.json's max_new_tokens (20) is the default; the
 * environment and a --config file go over it, a flag over all. */
static void test_generation_defaults(void **state) {
  (void)state;
  const char *m = model_dir("llama_text");
  const char *base[] = {"run", m, "--prompt", "12345 + 678 = ?", "--json", NULL};
  ot_cli_res r = run(base);
  assert_int_equal(n_tokens(&r), 20);
  ot_cli_res_free(&r);
  const char *env[] = {"OMPTENSOR_MAX_NEW_TOKENS=5", NULL};
  r = run_env(env, base);
  assert_int_equal(n_tokens(&r), 5);
  ot_cli_res_free(&r);
  ot_write_text(tmp, "gen.yaml", "generation:\n  max_new_tokens: 7\n");
  const char *yaml[] = {"run", m, "--prompt", "12345 + 678 = ?", "--json", "--config", "gen.yaml", NULL};
  r = run(yaml);
  assert_int_equal(n_tokens(&r), 7);
  ot_cli_res_free(&r);
  const char *flag[] = {"run", m, "--prompt", "12345 + 678 = ?", "--json", "-n", "3", NULL};
  r = run_env(env, flag);
  assert_int_equal(n_tokens(&r), 3);
  ot_cli_res_free(&r);
  /* issue 43: -v says where the values came from (it said [default]) */
  const char *verbose[] = {"run", m, "--prompt", "12345 + 678 = ?", "--json", "-v", NULL};
  r = run(verbose);
  assert_int_equal(n_tokens(&r), 20);
  if (!strstr(r.err, "  max-new-tokens     20   [generation_config.json]\n") ||
      !strstr(r.err, "  greedy             true   [generation_config.json]\n"))
    fail_msg("-v does not label generation_config.json's values: %s", r.err);
  ot_cli_res_free(&r);
}

/* The lines of a file as JSON objects, keyed by nothing: in file order. */
static json_t *read_jsonl(const char *name) {
  char p[4200];
  size_t len;
  char *text = ot_read_file(ot_tmp_path(p, sizeof p, tmp, name), &len);
  json_t *a = json_array();
  for (char *line = text, *nl; line && *line; line = nl + 1) {
    nl = strchr(line, '\n');
    if (!nl) fail_msg("%s: the last line has no newline", name);
    json_t *o = json_loadb(line, (size_t)(nl - line), JSON_ALLOW_NUL, NULL); /* a result's text may hold U+0000 */
    if (!o) fail_msg("%s: line '%.*s' is not JSON", name, (int)(nl - line), line);
    json_array_append_new(a, o);
  }
  free(text);
  return a;
}

/* Checks OUT against the reference: each id once, in order, with
 * transformers' ids and text. */
static void check_out(const json_t *ref, const json_t *lines) {
  const json_t *cases = json_object_get(ref, "cases");
  assert_int_equal(json_array_size(lines), json_array_size(cases) + 1); /* + the prompt_ids line */
  size_t i;
  const json_t *l;
  json_array_foreach(lines, i, l) {
    const json_t *id = json_object_get(l, "id");
    if (json_is_string(id)) { /* "p0".."p4": text prompts */
      const json_t *c = json_array_get(cases, (size_t)(json_string_value(id)[1] - '0'));
      same_ids(json_object_get(l, "tokens"), json_object_get(c, "ids"), json_string_value(id));
      same_text(json_object_get(l, "text"), json_string_value(json_object_get(c, "text")), json_string_value(id));
      assert_int_equal(json_integer_value(json_object_get(l, "prompt_tokens")),
                       json_array_size(json_object_get(c, "prompt_ids")));
    } else { /* id 99: the first case's prompt as ids */
      assert_int_equal(json_integer_value(id), 99);
      same_ids(json_object_get(l, "tokens"), json_object_get(json_array_get(cases, 0), "ids"), "prompt_ids line");
    }
  }
}

/* How many prompts a batch job finished when transfer n failed ("N done
 * now"); out.jsonl is removed after. */
static unsigned long done_when_transfer_fails(const char *const *args, unsigned long n) {
  char spec[64], p[4200];
  snprintf(spec, sizeof spec, "OMPTENSOR_FAULT=transfer:%lu", n);
  const char *env[] = {spec, NULL};
  ot_cli_res r = run_env(env, args);
  const char *at = strstr(r.err, " done now");
  while (at && at > r.err && at[-1] >= '0' && at[-1] <= '9') at--;
  unsigned long done = at ? strtoul(at, NULL, 10) : 0;
  ot_cli_res_free(&r);
  unlink(ot_tmp_path(p, sizeof p, tmp, "out.jsonl"));
  return done;
}

/* The first transfer of the (k+1)-th prompt: the smallest n whose failure
 * leaves k prompts done, by bisection (done only grows with n). Counted,
 * not assumed: how many transfers a prompt makes depends on the plans (the
 * weights go up once per job: each prompt's plan starts from the last's). */
static unsigned long first_transfer_after(const char *const *args, unsigned long k) {
  unsigned long lo = 1, hi = 1ul << 16;
  while (lo < hi) {
    unsigned long mid = lo + (hi - lo) / 2;
    if (done_when_transfer_fails(args, mid) >= k) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/* The job file `name`: the reference's text prompts p0.., the first one's
 * ids as id 99 (third), and a bad line after the fourth (line 5). */
static void write_job(const json_t *cases, const char *name) {
  json_t *lines = json_array();
  for (size_t i = 0; i < json_array_size(cases); i++) {
    char id[8];
    snprintf(id, sizeof id, "p%zu", i);
    json_array_append_new(lines, json_pack("{s:s, s:O}", "id", id, "prompt",
                                           json_object_get(json_array_get(cases, i), "prompt")));
  }
  json_array_insert_new(lines, 2, json_pack("{s:i, s:O}", "id", 99, "prompt_ids",
                                            json_object_get(json_array_get(cases, 0), "prompt_ids")));
  char in[65536] = "";
  size_t i;
  const json_t *l;
  json_array_foreach(lines, i, l) {
    char *s = json_dumps(l, JSON_COMPACT);
    snprintf(in + strlen(in), sizeof in - strlen(in), "%s\n%s", s, i == 3 ? "{\"id\": \"bad\", \"promt\": \"x\"}\n\n" : "");
    free(s);
  }
  ot_write_text(tmp, name, in);
  json_decref(lines);
}

static void test_batch_job_resumes(void **state) {
  (void)state;
  json_t *ref = expected("llama_text");
  write_job(json_object_get(ref, "cases"), "in.jsonl");
  unlink(ot_tmp_path((char[4200]){0}, 4200, tmp, "out.jsonl"));
  const char *args[] = {"run", model_dir("llama_text"), "--prompts", "in.jsonl", "--out", "out.jsonl", NULL};
  /* A failure while running (a transfer of the third prompt refused) stops
   * the job with exit 1 and keeps the two finished lines; the rerun does
   * the rest. A build without transfers (host) runs it all at once. */
  char spec[64];
  snprintf(spec, sizeof spec, "OMPTENSOR_FAULT=transfer:%lu", first_transfer_after(args, 2));
  const char *fault[] = {spec, NULL};
  ot_cli_res r = run_env(fault, args);
  /* the bad line (line 5) is reported and the job goes on; exit 2 says one was refused */
  if (!strstr(r.err, "in.jsonl:5: unknown key \"promt\"")) fail_msg("batch: exit %d, stderr %s", r.status, r.err);
  if (r.status == 1) {
    if (!strstr(r.err, "injected by OMPTENSOR_FAULT") || !strstr(r.err, "2 done now, 0 already in out.jsonl"))
      fail_msg("batch stopped by a failure: stderr %s", r.err);
    json_t *part = read_jsonl("out.jsonl");
    assert_int_equal(json_array_size(part), 2); /* whole lines only */
    json_decref(part);
    ot_cli_res_free(&r);
    r = run(args);
    if (r.status != 2 || !strstr(r.err, "4 done now, 2 already in out.jsonl, 1 refused"))
      fail_msg("batch rerun after the failure: exit %d, stderr %s", r.status, r.err);
  } else if (r.status != 2 || !strstr(r.err, "6 done now, 0 already in out.jsonl, 1 refused")) {
    fail_msg("batch: exit %d, stderr %s", r.status, r.err);
  }
  ot_cli_res_free(&r);
  json_t *out = read_jsonl("out.jsonl");
  check_out(ref, out);
  json_decref(out);

  /* A kill part way: two whole lines and half of the third stay. */
  char p[4200];
  size_t len;
  char *text = ot_read_file(ot_tmp_path(p, sizeof p, tmp, "out.jsonl"), &len);
  char *cut = strchr(strchr(text, '\n') + 1, '\n') + 1;
  cut += (strchr(cut, '\n') - cut) / 2;
  ot_write_bytes(tmp, "out.jsonl", text, (size_t)(cut - text));
  free(text);
  r = run(args);
  if (r.status != 2 || !strstr(r.err, "4 done now, 2 already in out.jsonl, 1 refused") || !strstr(r.err, "unfinished"))
    fail_msg("resume: exit %d, stderr %s", r.status, r.err);
  ot_cli_res_free(&r);
  out = read_jsonl("out.jsonl");
  check_out(ref, out);
  json_decref(out);

  /* All done: nothing runs again. */
  r = run(args);
  if (r.status != 2 || !strstr(r.err, "0 done now, 6 already in out.jsonl")) fail_msg("rerun: %s", r.err);
  ot_cli_res_free(&r);
  json_decref(ref);
}

/* --batch 3 (issue 19): the same job with three prompts decoding at once —
 * each line transformers' ids and text (in the order the prompts finish;
 * some stop at an EOS id), --json with the aggregate decode rate and each
 * prompt's; a rerun skips them all. */
static void test_batch_slots(void **state) {
  (void)state;
  json_t *ref = expected("llama_text");
  write_job(json_object_get(ref, "cases"), "inb.jsonl");
  char p[4200];
  unlink(ot_tmp_path(p, sizeof p, tmp, "outb.jsonl"));
  const char *args[] = {"run", model_dir("llama_text"), "--prompts", "inb.jsonl", "--out", "outb.jsonl", "--batch", "3",
                        "--json", NULL};
  ot_cli_res r = run(args);
  if (r.status != 2 || !strstr(r.err, "6 done now, 0 already in outb.jsonl, 1 refused") ||
      !strstr(r.err, "3 prompts at once"))
    fail_msg("--batch 3: exit %d, stderr %s", r.status, r.err);
  json_t *o = json_loads(r.out, 0, NULL), *b = json_object_get(o, "batch");
  if (!b) fail_msg("--batch 3 --json: no \"batch\" in %s", r.out);
  assert_int_equal(json_integer_value(json_object_get(b, "slots")), 3);
  assert_true(json_real_value(json_object_get(b, "decode_tokens_per_second")) > 0);
  assert_true(json_integer_value(json_object_get(b, "prefill_steps")) >= 2); /* 6 prompts, 3 slots: refilled */
  const json_t *per = json_object_get(b, "sequences");
  assert_int_equal(json_array_size(per), 6);
  size_t i;
  const json_t *x;
  json_array_foreach(per, i, x) assert_non_null(json_object_get(x, "tokens_per_second"));
  json_decref(o);
  ot_cli_res_free(&r);
  json_t *out = read_jsonl("outb.jsonl");
  check_out(ref, out);
  json_decref(out);
  r = run(args);
  if (r.status != 2 || !strstr(r.err, "0 done now, 6 already in outb.jsonl")) fail_msg("--batch rerun: %s", r.err);
  ot_cli_res_free(&r);
  json_decref(ref);
}

/* --batch 3 --devices 2 --micro-batches 2 (issue 26): the model split over
 * two devices, each decode step's sequences in two groups in the two
 * stages at once: every line still transformers' ids and text. Needs two
 * devices (the emulated ones of offload-host). */
static void test_batch_micro(void **state) {
  (void)state;
  if (ot_num_devices() < 2) skip();
  json_t *ref = expected("llama_text");
  write_job(json_object_get(ref, "cases"), "inm.jsonl");
  /* activations between the devices peer to peer (the default, auto; and
   * peer asked for) and through host memory: the same lines */
  static const char *const copies[] = {"auto", "host", "peer"};
  for (int c = 0; c < 3; c++) {
    char p[4200];
    unlink(ot_tmp_path(p, sizeof p, tmp, "outm.jsonl"));
    const char *args[] = {"run",          model_dir("llama_text"), "--prompts",          "inm.jsonl",
                          "--out",        "outm.jsonl",            "--batch",            "3",
                          "--devices",    "2",                     "--micro-batches",    "2",
                          "--gpu-memory-limit", "0:400KB,1:400KB", "--stage-copies", copies[c], NULL};
    ot_cli_res r = run(args);
    if (r.status != 2 || !strstr(r.err, "6 done now, 0 already in outm.jsonl, 1 refused"))
      fail_msg("--micro-batches 2 --stage-copies %s: exit %d, stderr %s", copies[c], r.status, r.err);
    ot_cli_res_free(&r);
    json_t *out = read_jsonl("outm.jsonl");
    check_out(ref, out);
    json_decref(out);
  }
  json_decref(ref);
}

static void expect_refused(const char *const *args, const char *says) {
  ot_cli_res r = run(args);
  if (r.status != 2 || !strstr(r.err, says))
    fail_msg("%s %s: exit %d, stderr '%s', want exit 2 saying '%s'", args[0], args[2], r.status, r.err, says);
  ot_cli_res_free(&r);
}

static void test_refusals(void **state) {
  (void)state;
  const char *gqa = model_dir("llama_gqa"), *m = model_dir("llama_text");
  const char *a1[] = {"run", gqa, "--prompt", "Hello", NULL};
  expect_refused(a1, "has no tokenizer.json");
  const char *a2[] = {"run", m, "--prompt", "Hello", "--prompt-ids", "1,2", NULL};
  expect_refused(a2, "more than one prompt");
  const char *a3[] = {"run", m, "--out", "o.jsonl", "--prompt", "x", NULL};
  expect_refused(a3, "needs --prompts");
  const char *a4[] = {"run", m, "--prompts", "in.jsonl", NULL};
  expect_refused(a4, "give --out");
  const char *a4b[] = {"run", m, "--prompt", "x", "--batch", "2", NULL};
  expect_refused(a4b, "--batch 2 runs the prompts of a batch job at once; it needs --prompts");
  const char *a4c[] = {"run", m, "--prompts", "in.jsonl", "--out", "o.jsonl", "--batch", "0", NULL};
  expect_refused(a4c, "--batch");
  const char *a4d[] = {"run", m, "--prompts", "in.jsonl", "--out", "o.jsonl", "--micro-batches", "2", NULL};
  expect_refused(a4d, "--micro-batches 2 splits the sequences decoded at once; it needs --prompts IN.jsonl with --batch");
  const char *a4e[] = {"run", m, "--prompts", "in.jsonl", "--out", "o.jsonl", "--batch", "4", "--micro-batches", "2", NULL};
  expect_refused(a4e, "give --devices 2 or more");
  const char *a4f[] = {"run", m, "--prompts", "in.jsonl", "--out", "o.jsonl", "--micro-batches", "0", NULL};
  expect_refused(a4f, "--micro-batches");
  const char *a4g[] = {"run", m, "--prompts", "in.jsonl", "--out", "o.jsonl", "--batch", "4", "--stage-copies", "peer",
                       NULL};
  expect_refused(a4g, "--stage-copies peer chooses how micro-batches cross between devices; it needs --micro-batches");
  const char *a4h[] = {"run", m, "--prompts", "in.jsonl", "--out", "o.jsonl", "--batch", "4", "--micro-batches", "2",
                       "--stage-copies", "nvlink", NULL};
  expect_refused(a4h, "stage copies 'nvlink': give auto, host or peer");
  ot_write_text(tmp, "notres.jsonl", "hello\n");
  ot_write_text(tmp, "one.jsonl", "{\"prompt\": \"x\"}\n");
  const char *a5[] = {"run", m, "--prompts", "one.jsonl", "--out", "notres.jsonl", NULL};
  expect_refused(a5, "notres.jsonl:1 is not a result line");
  const char *a6[] = {"run", m, "--prompt", "", NULL};
  expect_refused(a6, "--prompt");
  /* a bad generation_config.json is named with its key */
  char cfg[4300], path[4300];
  snprintf(cfg, sizeof cfg, "%s/config.json", m);
  size_t len;
  char *c = ot_read_file(cfg, &len);
  mkdir(ot_tmp_path(path, sizeof path, tmp, "badgen"), 0700);
  ot_write_text(tmp, "badgen/config.json", c);
  free(c);
  ot_write_text(tmp, "badgen/generation_config.json", "{\"top_p\": 0}");
  const char *a7[] = {"run", ot_tmp_path(path, sizeof path, tmp, "badgen"), "--prompt-ids", "1,2", NULL};
  expect_refused(a7, "\"top_p\" is 0");
  ot_cli_res r;
  /* a batch line's max_new_tokens is named as the line's field, with the file and line (it was named as the
   * flag); the value of a setting by where it came from */
  ot_write_text(tmp, "maxnew.jsonl", "{\"id\": \"m\", \"prompt_ids\": [1, 2, 3], \"max_new_tokens\": 300}\n");
  const char *a9[] = {"run", m, "--prompts", "maxnew.jsonl", "--out", "maxnew_out.jsonl", NULL};
  r = run(a9);
  if (r.status != 2 || !strstr(r.err, "maxnew.jsonl:1: \"max_new_tokens\" 300: 3 prompt + 300 new tokens exceed") ||
      strstr(r.err, "--max-new-tokens"))
    fail_msg("a line's max_new_tokens: exit %d, stderr %s", r.status, r.err);
  ot_cli_res_free(&r);
  const char *env[] = {"OMPTENSOR_MAX_NEW_TOKENS=300", NULL};
  const char *a10[] = {"run", m, "--prompt-ids", "1,2,3", NULL};
  r = run_env(env, a10);
  if (r.status != 2 || !strstr(r.err, "OMPTENSOR_MAX_NEW_TOKENS 300: 3 prompt + 300 new tokens exceed"))
    fail_msg("max_new_tokens from the environment: exit %d, stderr %s", r.status, r.err);
  ot_cli_res_free(&r);
  /* ids in a text file: read as text, and the user is told */
  ot_write_text(tmp, "ids.txt", "1, 205, 156\n");
  const char *a8[] = {"run", m, "--prompt-file", "ids.txt", "-n", "1", NULL};
  r = run(a8);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.err, "--prompt-ids-file"));
  ot_cli_res_free(&r);
}

/* ---- issue 43: the batch job's files, -, the stop reason, Ctrl-C, --trace ---- */

/* Two prompts of ids, two tokens each: quick. */
static const char small_job[] = "{\"id\": \"a\", \"prompt_ids\": [1, 2]}\n{\"id\": \"b\", \"prompt_ids\": [3]}\n";

static char *file_bytes(const char *name, size_t *len) {
  char p[4200];
  return ot_read_file(ot_tmp_path(p, sizeof p, tmp, name), len);
}

/* Exit 2 with one line on stderr holding every NULL-terminated string. */
static void one_line_error(const ot_cli_res *r, const char *what, ...) {
  const char *nl = strchr(r->err, '\n');
  if (r->status != 2 || !nl || nl[1] || strstr(r->err, "runtime error"))
    fail_msg("%s: exit %d, stderr '%s': want exit 2 and one line", what, r->status, r->err);
  va_list ap;
  va_start(ap, what);
  for (const char *w = va_arg(ap, const char *); w; w = va_arg(ap, const char *))
    if (!strstr(r->err, w)) fail_msg("%s: stderr '%s' does not say '%s'", what, r->err, w);
  va_end(ap);
}

/* --out naming a file that holds `before` (n bytes): refused in one line
 * saying `says`, the file untouched. */
static void out_refused(const char *out, const void *before, size_t n, const char *says) {
  ot_write_text(tmp, "small.jsonl", small_job);
  ot_write_bytes(tmp, out, before, n);
  const char *args[] = {"run", model_dir("llama_text"), "--prompts", "small.jsonl", "--out", out, "-n", "2", NULL};
  ot_cli_res r = run(args);
  one_line_error(&r, out, out, says, "left as it is", (const char *)NULL);
  ot_cli_res_free(&r);
  size_t len;
  char *now = file_bytes(out, &len);
  if (len != n || memcmp(now, before, n)) fail_msg("--out %s: %zu bytes were changed into %zu", out, n, len);
  free(now);
}

/* A file is changed only once it is known to be this job's result file. */
static void test_batch_out_kept(void **state) {
  (void)state;
  /* a checkpoint-like binary with newlines: it used to be cut at its last one */
  static const char ck[] = "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'shape': (4,)}\n\x00\x00\x80?\n\x00\x00\x00@";
  out_refused("ck.npy", ck, sizeof ck - 1, "ck.npy:1 is not a result line of this job");
  /* no complete line: it used to be truncated to 0 bytes (and UBSan saw qsort(NULL, 0)) */
  out_refused("word.txt", "hello", 5, "no complete line");
  /* another job's results, whole lines */
  static const char other[] = "{\"id\":\"zz\",\"prompt_tokens\":1,\"tokens\":[4]}\n";
  out_refused("other.jsonl", other, sizeof other - 1, "id \"zz\" is not one of the prompts' ids");
  /* --out the prompts file itself, by its name, a symbolic link or a hard link: it used to lose its last line */
  char in[4200], ln[4200];
  ot_write_text(tmp, "small.jsonl", small_job);
  ot_tmp_path(in, sizeof in, tmp, "small.jsonl");
  unlink(ot_tmp_path(ln, sizeof ln, tmp, "sym.jsonl"));
  assert_int_equal(symlink("small.jsonl", ln), 0);
  unlink(ot_tmp_path(ln, sizeof ln, tmp, "hard.jsonl"));
  assert_int_equal(link(in, ln), 0);
  static const char *const outs[] = {"small.jsonl", "sym.jsonl", "hard.jsonl"};
  for (int i = 0; i < 3; i++) {
    const char *args[] = {"run", model_dir("llama_text"), "--prompts", "small.jsonl", "--out", outs[i], NULL};
    ot_cli_res r = run(args);
    one_line_error(&r, outs[i], "--out", outs[i], "is the file --prompts small.jsonl reads", (const char *)NULL);
    ot_cli_res_free(&r);
    size_t len;
    char *now = file_bytes("small.jsonl", &len);
    assert_int_equal(len, strlen(small_job));
    assert_memory_equal(now, small_job, len);
    free(now);
  }
}

/* OUT that a killed job left: empty (killed before its first line), or a
 * first line cut inside its write. Both are this job's: the rerun goes on
 * (it used to truncate the cut line and, under UBSan, stop at qsort(NULL)). */
static void test_batch_out_resumes(void **state) {
  (void)state;
  ot_write_text(tmp, "small.jsonl", small_job);
  const char *args[] = {"run", model_dir("llama_text"), "--prompts", "small.jsonl", "--out", "res.jsonl", "-n", "2",
                        NULL};
  ot_write_bytes(tmp, "res.jsonl", "", 0);
  ot_cli_res r = run(args);
  if (r.status != 0 || !strstr(r.err, "2 done now, 0 already in res.jsonl") || strstr(r.err, "runtime error"))
    fail_msg("empty OUT: exit %d, stderr %s", r.status, r.err);
  ot_cli_res_free(&r);
  size_t len;
  char *whole = file_bytes("res.jsonl", &len);
  const char *second = strchr(whole, '\n') + 1;
  /* the second line, cut inside its write, and alone */
  ot_write_bytes(tmp, "res.jsonl", second, 12);
  r = run(args);
  if (r.status != 0 || !strstr(r.err, "2 done now, 0 already in res.jsonl") || !strstr(r.err, "unfinished"))
    fail_msg("a cut first line: exit %d, stderr %s", r.status, r.err);
  ot_cli_res_free(&r);
  json_t *out = read_jsonl("res.jsonl");
  assert_int_equal(json_array_size(out), 2);
  json_decref(out);
  free(whole);
}

/* Every reader of text the project wrote reads back all that it can write:
 * a result whose text holds U+0000 (a byte-fallback token of byte 0
 * decodes to it) is read back by a rerun and a resume; a prompt may hold
 * it too. It used to be "not a result line". */
static void test_batch_nul_text(void **state) {
  (void)state;
  ot_write_text(tmp, "nul.jsonl",
                "{\"id\": \"a\", \"prompt_ids\": [1, 2]}\n{\"id\": \"b\", \"prompt\": \"x\\u0000y\"}\n"
                "{\"id\": \"c\", \"prompt_ids\": [3]}\n");
  char p[4200];
  unlink(ot_tmp_path(p, sizeof p, tmp, "nulout.jsonl"));
  const char *args[] = {"run", model_dir("llama_text"), "--prompts", "nul.jsonl", "--out", "nulout.jsonl", "-n", "2",
                        NULL};
  ot_cli_res r = run(args);
  if (r.status != 0 || !strstr(r.err, "3 done now")) fail_msg("job: exit %d, stderr %s", r.status, r.err);
  ot_cli_res_free(&r);
  /* each line's text with U+0000 in it (as the writer escapes it), the last line cut by a "kill" */
  size_t len;
  char *text = file_bytes("nulout.jsonl", &len), edited[8192] = "";
  for (char *l = text, *nl; (nl = strchr(l, '\n')); l = nl + 1) {
    char *t = strstr(l, "\"text\":\"");
    assert_true(t && t < nl);
    t += 8;
    snprintf(edited + strlen(edited), sizeof edited - strlen(edited), "%.*s\\u0000%.*s\n", (int)(t - l), l,
             (int)(nl - t), t);
  }
  free(text);
  ot_write_text(tmp, "nulout.jsonl", edited);
  r = run(args);
  if (r.status != 0 || !strstr(r.err, "0 done now, 3 already in nulout.jsonl"))
    fail_msg("rerun of a job with U+0000 in its results: exit %d, stderr %s", r.status, r.err);
  ot_cli_res_free(&r);
  ot_write_bytes(tmp, "nulout.jsonl", edited, strlen(edited) - 10);
  r = run(args);
  if (r.status != 0 || !strstr(r.err, "1 done now, 2 already in nulout.jsonl"))
    fail_msg("resume of a job with U+0000 in its results: exit %d, stderr %s", r.status, r.err);
  ot_cli_res_free(&r);
}

/* - is stdin for --prompts, --prompt-ids-file and --config, stdout for
 * --out (it used to be a file named -); where it cannot be, it is refused
 * by name. */
static void test_dash_streams(void **state) {
  (void)state;
  char in[4200], p[4200];
  ot_write_text(tmp, "small.jsonl", small_job);
  ot_tmp_path(in, sizeof in, tmp, "small.jsonl");
  unlink(ot_tmp_path(p, sizeof p, tmp, "-"));
  const char *m = model_dir("llama_text");
  ot_cli_run_opts o = {.out_dir = tmp, .cwd = tmp, .stdin_path = in, .deadline_s = 120};
  const char *a1[] = {"run", m, "--prompts", "-", "--out", "-", "-n", "2", NULL};
  ot_cli_res r = ot_test_cli_run_with(&o, a1);
  if (r.status != 0 || !strstr(r.err, "stdin: 2 prompts: 2 done now, 0 already in stdout") ||
      !strstr(r.out, "{\"id\":\"a\",") || !strstr(r.out, "{\"id\":\"b\",") || !strstr(r.err, "cannot read"))
    fail_msg("--prompts - --out -: exit %d, stdout '%s', stderr %s", r.status, r.out, r.err);
  ot_cli_res_free(&r);
  assert_int_equal(access(p, F_OK), -1); /* no file named - */
  /* --prompt-ids-file - and --config - */
  ot_write_text(tmp, "ids.txt", "1, 2, 3\n");
  ot_write_text(tmp, "gen.yaml", "generation:\n  max_new_tokens: 3\n");
  ot_tmp_path(in, sizeof in, tmp, "ids.txt");
  const char *a2[] = {"run", m, "--prompt-ids-file", "-", "-n", "2", "--json", NULL};
  r = ot_test_cli_run_with(&o, a2);
  assert_int_equal(n_tokens(&r), 2);
  ot_cli_res_free(&r);
  ot_tmp_path(in, sizeof in, tmp, "gen.yaml");
  const char *a3[] = {"run", m, "--prompt-ids", "1,2", "--config", "-", "--json", NULL};
  r = ot_test_cli_run_with(&o, a3);
  assert_int_equal(n_tokens(&r), 3);
  ot_cli_res_free(&r);
  /* refused by name, in one line */
  const char *b1[] = {"run", m, "--prompts", "small.jsonl", "--out", "-", "--json", NULL};
  const char *b2[] = {"run", m, "--prompt-ids", "1", "--logits-out", "-", NULL};
  const char *b3[] = {"run", m, "--prompt-ids", "1", "--trace", "-", NULL};
  const char *b4[] = {"run", m, "--prompt-file", "-", "--config", "-", NULL};
  const char *const *bs[] = {b1, b2, b3, b4};
  static const char *const says[] = {"--out - writes the results to stdout, where --json's summary goes too",
                                     "--logits-out -: this output is a file written whole",
                                     "--trace -: this output is a file written whole",
                                     "--prompt-file - and --config - both read stdin"};
  for (int i = 0; i < 4; i++) {
    r = run(bs[i]);
    one_line_error(&r, says[i], says[i], (const char *)NULL);
    ot_cli_res_free(&r);
  }
  assert_int_equal(access(p, F_OK), -1);
}

/* The text report says why generation stopped (--json's "stopped"). */
static void test_stop_reason(void **state) {
  (void)state;
  const char *m = model_dir("llama_text");
  const char *a1[] = {"run", m, "--prompt", "Hello world", NULL}; /* transformers stops it at EOS id 677 */
  ot_cli_res r = run(a1);
  if (r.status != 0 || !strstr(r.err, "stopped: at EOS id 677\n")) fail_msg("EOS: exit %d, stderr %s", r.status, r.err);
  ot_cli_res_free(&r);
  const char *a2[] = {"run", m, "--prompt-ids", "1,2", "-n", "3", "--ignore-eos", NULL};
  r = run(a2);
  if (r.status != 0 || !strstr(r.out, "stopped: max_new_tokens reached (3 tokens)\n"))
    fail_msg("length: exit %d, stdout %s", r.status, r.out);
  ot_cli_res_free(&r);
}

/* Ctrl-C: a pipe as the command's stdout, filled so that the command's
 * first piece of streamed text blocks it; SIGINT once it says that it is
 * generating (-v), then the pipe is drained. Deterministic: the command
 * cannot finish before the signal. */
typedef struct sigint_at {
  const char *says; /* SIGINT once stderr holds this */
  int rd;           /* the pipe's read end, or -1 */
  int sent;
} sigint_at;

static void sigint_when(void *user, int pid) {
  sigint_at *x = user;
  char p[4200], buf[4096];
  if (!x->sent) {
    char *err = ot_read_file(ot_tmp_path(p, sizeof p, tmp, "cli.stderr"), NULL);
    if (strstr(err, x->says)) {
      assert_int_equal(kill(pid, SIGINT), 0);
      x->sent = 1;
    }
    free(err);
  }
  while (x->sent && x->rd >= 0 && read(x->rd, buf, sizeof buf) > 0) {
  }
}

static void test_sigint(void **state) {
  (void)state;
  const char *m = model_dir("llama_text");
  /* one prompt, streamed: the summary of the tokens so far, exit 130 */
  int fd[2];
  assert_int_equal(pipe(fd), 0);
  assert_int_equal(fcntl(fd[0], F_SETFD, FD_CLOEXEC), 0);
  int fl = fcntl(fd[1], F_GETFL);
  assert_int_equal(fcntl(fd[1], F_SETFL, fl | O_NONBLOCK), 0);
  char fill[4096];
  memset(fill, 'x', sizeof fill);
  while (write(fd[1], fill, sizeof fill) > 0) {
  }
  while (write(fd[1], fill, 1) > 0) { /* full to the byte */
  }
  assert_int_equal(fcntl(fd[1], F_SETFL, fl), 0);
  assert_int_equal(fcntl(fd[0], F_SETFL, fcntl(fd[0], F_GETFL) | O_NONBLOCK), 0);
  sigint_at x = {"generating; Ctrl-C", fd[0], 0};
  ot_cli_run_opts o = {.out_dir = tmp, .cwd = tmp, .deadline_s = 120, .stdout_fd = fd[1], .on_wait = sigint_when,
                       .wait_user = &x};
  const char *a1[] = {"run", m, "--prompt", "Hello", "-n", "200", "--ignore-eos", "-v", NULL};
  ot_cli_res r = ot_test_cli_run_with(&o, a1);
  close(fd[0]);
  assert_true(x.sent);
  if (r.status != 130 || !strstr(r.err, "stopped: interrupted (Ctrl-C) after ") || !strstr(r.err, "tokens/s"))
    fail_msg("Ctrl-C during run --prompt: exit %d (signal %d), stderr %s", r.status, r.signal, r.err);
  const char *n = strstr(r.err, "after ") + 6;
  assert_true(atoi(n) >= 1 && atoi(n) < 200);
  ot_cli_res_free(&r);

  /* a batch job: the prompt running is left out, the finished lines stay,
   * the summary says so, exit 130; the rerun does the rest */
  char job[65536] = "", p[4200];
  for (int i = 0; i < 64; i++)
    snprintf(job + strlen(job), sizeof job - strlen(job), "{\"id\": %d, \"prompt_ids\": [%d, 7]}\n", i, i + 1);
  ot_write_text(tmp, "many.jsonl", job);
  unlink(ot_tmp_path(p, sizeof p, tmp, "many_out.jsonl"));
  sigint_at y = {"] id 0: ", -1, 0}; /* the first prompt's line is out */
  ot_cli_run_opts ob = {.out_dir = tmp, .cwd = tmp, .deadline_s = 300, .on_wait = sigint_when, .wait_user = &y};
  const char *a2[] = {"run", m, "--prompts", "many.jsonl", "--out", "many_out.jsonl", "-n", "200", "--ignore-eos",
                      NULL};
  r = ot_test_cli_run_with(&ob, a2);
  assert_true(y.sent);
  if (r.status != 130 || !strstr(r.err, "interrupted (Ctrl-C): a rerun goes on from there"))
    fail_msg("Ctrl-C during a batch job: exit %d (signal %d), stderr %s", r.status, r.signal, r.err);
  ot_cli_res_free(&r);
  json_t *lines = read_jsonl("many_out.jsonl"); /* whole lines, each finished */
  const size_t done = json_array_size(lines);
  assert_true(done >= 1 && done < 64);
  size_t i;
  json_t *l;
  json_array_foreach(lines, i, l) assert_int_equal(json_array_size(json_object_get(l, "tokens")), 200);
  json_decref(lines);
  r = run(a2);
  char want[96];
  snprintf(want, sizeof want, "%zu done now, %zu already in many_out.jsonl", 64 - done, done);
  if (r.status != 0 || !strstr(r.err, want)) fail_msg("rerun after Ctrl-C: exit %d, stderr %s", r.status, r.err);
  ot_cli_res_free(&r);
}

/* --trace failing to write (a full disk: the first write step of an output
 * fails) comes before the --json success object, never after it; the
 * object failing to be written is a failure too. */
static void test_trace_fails_first(void **state) {
  (void)state;
  const char *env[] = {"OMPTENSOR_FAULT=write:1", NULL};
  const char *m = model_dir("llama_text");
  ot_write_text(tmp, "small.jsonl", small_job);
  char p[4200];
  unlink(ot_tmp_path(p, sizeof p, tmp, "tr_out.jsonl"));
  const char *a1[] = {"run", m, "--prompt-ids", "1,2", "-n", "2", "--trace", "t.json", "--json", NULL};
  const char *a2[] = {"run", m, "--prompts", "small.jsonl", "--out", "tr_out.jsonl", "-n", "2", "--trace", "t.json",
                      "--json", NULL};
  const char *const *as[] = {a1, a2};
  for (int i = 0; i < 2; i++) {
    ot_cli_res r = run_env(env, as[i]);
    if (r.status == 0 || r.out[0] || !strstr(r.err, "t.json") || !strstr(r.err, "injected by OMPTENSOR_FAULT"))
      fail_msg("%s: exit %d, stdout '%s', stderr %s: want a failure and no JSON object", as[i][2], r.status, r.out,
               r.err);
    ot_cli_res_free(&r);
  }
  /* the --json object itself on a full disk (stdout /dev/full): a failure, not exit 0 */
  const char *a3[] = {"run", m, "--prompt-ids", "1,2", "-n", "2", "--json", NULL};
  for (int i = 0; i < 2; i++) {
    const int full = open("/dev/full", O_WRONLY | O_CLOEXEC);
    assert_true(full > 0);
    ot_cli_run_opts o = {.out_dir = tmp, .cwd = tmp, .deadline_s = 120, .stdout_fd = full};
    ot_cli_res r = ot_test_cli_run_with(&o, i ? a2 : a3);
    if (r.status == 0 || !strstr(r.err, "writing the JSON summary to stdout failed"))
      fail_msg("--json to /dev/full: exit %d, stderr %s", r.status, r.err);
    ot_cli_res_free(&r);
    unlink(ot_tmp_path(p, sizeof p, tmp, "tr_out.jsonl"));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batch_out_kept),   cmocka_unit_test(test_batch_out_resumes),
      cmocka_unit_test(test_batch_nul_text),   cmocka_unit_test(test_dash_streams),
      cmocka_unit_test(test_stop_reason),      cmocka_unit_test(test_sigint),
      cmocka_unit_test(test_trace_fails_first),
      cmocka_unit_test(test_generate_matches_transformers), cmocka_unit_test(test_streamed_text),
      cmocka_unit_test(test_generation_defaults),           cmocka_unit_test(test_batch_job_resumes),
      cmocka_unit_test(test_batch_slots),                   cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_batch_micro),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
