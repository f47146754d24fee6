/* test_cli_mpi.c — the command over MPI ranks (an OT_MPI=ON build; mpirun
 * is OT_TEST_MPIEXEC, or $OT_MPIEXEC), with the tiny models of tests/data:
 *   - a batch job (tests/data/models/llama_text, id prompts) on 2 and 3
 *     ranks (the work queue) and on 2 ranks with --batch 2 (the static
 *     split) writes one OUT with every id once, each line as the one-process
 *     run's (the timings aside);
 *   - a rank killed (SIGKILL) in the middle of a job leaves OUT with whole
 *     lines only, and a rerun on 2 ranks completes it to the one-process
 *     run's lines, each id once;
 *   - training (tests/data/models/gpt2_small) at a global batch of 6
 *     micro-batches: 2 ranks x --accum 3 and 3 ranks x --accum 2 give the
 *     one-process run's losses (--grad-reduce ordered) and saved weights
 *     bitwise, and a plain one-process run (local, in-place accumulation)
 *     within fp32 tolerance; allreduce at --accum 1 on 2 ranks is the ordered
 *     run's bitwise (a sum of two is the same in any order), through host
 *     staging and through the device memory (the emulated device's is the
 *     host's); a bad --grad-reduce is refused.
 * Each rank runs with one OpenMP thread: the suite shares two cores. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "omptensor/safetensors.h"
#include "cli_test.h"
#include "ot_testio.h"

#ifndef OT_TEST_MPIEXEC
#define OT_TEST_MPIEXEC "mpirun"
#endif
#ifndef OT_TEST_MPIEXEC_FLAGS
#define OT_TEST_MPIEXEC_FLAGS ""
#endif

static char *tmp;
static char llama[4096], gpt2[4096], tokens[4096];

static const char *mpiexec(void) {
  const char *e = getenv("OT_MPIEXEC");
  return e && *e ? e : OT_TEST_MPIEXEC;
}

/* The shell command that runs `omptensor ARGS` on `ranks` ranks (0: one
 * process, no launcher), output to tmp/NAME.out and tmp/NAME.err. */
static void command(char *cmd, size_t n, int ranks, const char *name, const char *args) {
  const char *exe = ot_test_cli();
  assert_non_null(exe);
  char launch[1024] = "";
  if (ranks) snprintf(launch, sizeof launch, "%s %s -n %d ", mpiexec(), OT_TEST_MPIEXEC_FLAGS, ranks);
  snprintf(cmd, n,
           "cd '%s' && env $(env | grep -o '^OMPTENSOR_[A-Z_]*' | sed 's/^/-u /') OMP_NUM_THREADS=1 %s'%s' %s "
           "</dev/null >'%s.out' 2>'%s.err'",
           tmp, launch, exe, args, name, name);
}

/* Runs it; the exit status. */
static int run(int ranks, const char *name, const char *args) {
  char cmd[16384];
  command(cmd, sizeof cmd, ranks, name, args);
  int rc = system(cmd);
  assert_true(rc != -1 && WIFEXITED(rc));
  return WEXITSTATUS(rc);
}

static char *slurp(const char *name) {
  char p[4096];
  return ot_read_file(ot_tmp_path(p, sizeof p, tmp, name), NULL);
}

static void expect_ok(int rc, const char *name) {
  if (rc == 0) return;
  char e[4200];
  snprintf(e, sizeof e, "%s.err", name);
  char *err = slurp(e);
  fail_msg("%s: exit %d, stderr:\n%s", name, rc, err);
}

/* ---- batch jobs ---- */

/* 40 id prompts, 24 new tokens each. */
static void write_prompts(const char *name, int n) {
  char p[4096];
  FILE *f = fopen(ot_tmp_path(p, sizeof p, tmp, name), "w");
  assert_non_null(f);
  for (int i = 0; i < n; i++)
    fprintf(f, "{\"id\": \"p%d\", \"prompt_ids\": [1, %d, %d, 42], \"max_new_tokens\": 24}\n", i, 3 + i % 200,
            7 + (i * 13) % 300);
  fclose(f);
}

/* OUT's lines by id, without the timings (which differ run to run); fails
 * on a line that is not whole JSON or an id seen twice. */
static json_t *results(const char *name) {
  char *text = slurp(name);
  json_t *by_id = json_object();
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    json_error_t e;
    json_t *o = json_loads(line, JSON_ALLOW_NUL, &e); /* a result's text may hold U+0000 */
    if (!o) fail_msg("%s: a line is not JSON (%s): %s", name, e.text, line);
    const char *id = json_string_value(json_object_get(o, "id"));
    assert_non_null(id);
    if (json_object_get(by_id, id)) fail_msg("%s: id %s twice", name, id);
    json_object_del(o, "prefill_ms");
    json_object_del(o, "decode_ms");
    json_object_del(o, "tokens_per_second");
    json_object_set_new(by_id, id, o);
  }
  free(text);
  return by_id;
}

static void expect_same_results(const char *got, const char *want) {
  json_t *a = results(got), *b = results(want);
  if (!json_equal(a, b)) {
    char *x = json_dumps(a, JSON_COMPACT), *y = json_dumps(b, JSON_COMPACT);
    fail_msg("%s (%zu ids) differs from %s (%zu ids):\n%.2000s\n%.2000s", got, json_object_size(a), want,
             json_object_size(b), x, y);
  }
  json_decref(a);
  json_decref(b);
}

static void batch_ranks(void **state) {
  (void)state;
  write_prompts("in.jsonl", 40);
  char args[8192];
  snprintf(args, sizeof args, "run '%s' --prompts in.jsonl --out one.jsonl", llama);
  expect_ok(run(0, "one", args), "one");
  const struct { int ranks; const char *name, *extra; } cases[] = {
      {2, "two", ""}, {3, "three", ""}, {2, "two_b2", "--batch 2"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(args, sizeof args, "run '%s' --prompts in.jsonl --out %s.jsonl %s --json", llama, cases[i].name,
             cases[i].extra);
    expect_ok(run(cases[i].ranks, cases[i].name, args), cases[i].name);
    char f[256];
    snprintf(f, sizeof f, "%s.jsonl", cases[i].name);
    expect_same_results(f, "one.jsonl");
    /* rank 0 alone prints the job's summary, with every rank's counts */
    snprintf(f, sizeof f, "%s.out", cases[i].name);
    char *out = slurp(f);
    json_error_t e;
    json_t *o = json_loads(out, 0, &e);
    if (!o) fail_msg("%s: stdout is not one JSON object: %s", cases[i].name, out);
    assert_int_equal(json_integer_value(json_object_get(o, "ranks")), cases[i].ranks);
    assert_int_equal(json_integer_value(json_object_get(o, "done_now")), 40);
    json_decref(o);
    free(out);
  }
  /* a rerun finds everything done, on any number of ranks */
  snprintf(args, sizeof args, "run '%s' --prompts in.jsonl --out three.jsonl", llama);
  expect_ok(run(2, "again", args), "again");
  char *err = slurp("again.err");
  assert_non_null(strstr(err, "0 done now by 2 ranks, 40 already in three.jsonl"));
  free(err);
  expect_same_results("three.jsonl", "one.jsonl");
  /* --prompts - (stdin, issue 43) is one process's: every rank reads the prompts */
  snprintf(args, sizeof args, "run '%s' --prompts - --out four.jsonl", llama);
  assert_int_equal(run(2, "dash", args), 2);
  err = slurp("dash.err");
  if (!strstr(err, "--prompts -: under mpirun/srun every rank reads the prompts")) fail_msg("--prompts -: %s", err);
  free(err);
}

/* A child of `parent` whose environment holds `var` (NULL: any child);
 * 0 if none (yet). */
static pid_t child_with(pid_t parent, const char *var) {
  DIR *d = opendir("/proc");
  if (!d) return 0;
  pid_t found = 0;
  for (struct dirent *e; !found && (e = readdir(d));) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0) continue;
    char p[64];
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f) continue;
    long ppid = 0;
    int ok = fscanf(f, "%*d (%*[^)]) %*c %ld", &ppid) == 1;
    fclose(f);
    if (!ok || ppid != parent) continue;
    if (!var) {
      found = (pid_t)pid;
      break;
    }
    snprintf(p, sizeof p, "/proc/%ld/environ", pid);
    f = fopen(p, "r");
    if (!f) continue;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (size_t k = 0; k < n && !found; k += strlen(buf + k) + 1)
      if (!strcmp(buf + k, var)) found = (pid_t)pid;
  }
  closedir(d);
  return found;
}

static size_t count_lines(const char *name) {
  char p[4096];
  FILE *f = fopen(ot_tmp_path(p, sizeof p, tmp, name), "r");
  if (!f) return 0;
  size_t n = 0;
  for (int c; (c = fgetc(f)) != EOF;) n += c == '\n';
  fclose(f);
  return n;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void batch_killed_rank(void **state) {
  (void)state;
  write_prompts("kin.jsonl", 160);
  char args[8192];
  snprintf(args, sizeof args, "run '%s' --prompts kin.jsonl --out kone.jsonl", llama);
  expect_ok(run(0, "kone", args), "kone");
  /* 2 ranks, rank 1 killed once a few lines are out */
  snprintf(args, sizeof args, "run '%s' --prompts kin.jsonl --out ktwo.jsonl", llama);
  char cmd[16384];
  command(cmd, sizeof cmd, 2, "killed", args);
  pid_t sh = fork();
  assert_true(sh >= 0);
  if (sh == 0) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  pid_t victim = 0;
  size_t lines = 0;
  int status = 0, ended = 0;
  for (int t = 0; t < 6000 && !victim && !ended; t++) { /* up to 60 s for the job to start */
    lines = count_lines("ktwo.jsonl");
    if (lines >= 3) {
      /* the launcher: the shell's child (env exec'ed into it), or the shell itself; the ranks: its children */
      pid_t launcher = child_with(sh, NULL);
      victim = child_with(launcher ? launcher : sh, "OMPI_COMM_WORLD_RANK=1");
      if (victim) break;
    }
    ended = waitpid(sh, &status, WNOHANG) == sh;
    sleep_ms(10);
  }
  if (victim) kill(victim, SIGKILL);
  if (!ended) waitpid(sh, &status, 0);
  if (!victim) {
    /* the job ended before a rank could be killed: then it must simply be complete */
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    print_message("the job finished before rank 1 could be killed (%zu lines seen); nothing was killed\n", lines);
  } else {
    assert_false(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* the launcher reports the killed rank */
  }
  const size_t kept = count_lines("ktwo.jsonl");
  json_t *partial = results("ktwo.jsonl"); /* whole lines only, each id once */
  assert_int_equal(json_object_size(partial), kept);
  json_decref(partial);
  /* the rerun goes on from there */
  expect_ok(run(2, "resume", args), "resume");
  expect_same_results("ktwo.jsonl", "kone.jsonl");
  if (victim) {
    assert_true(kept < 160);
    print_message("rank 1 killed with %zu of 160 lines in OUT; the rerun completed it\n", kept);
  }
}

/* ---- training ---- */

/* A period-8 sequence of ids, as .npy int32 (test_cli_train's). */
static void write_tokens(void) {
  enum { N = 1200 };
  int32_t ids[N];
  for (int i = 0; i < N; i++) ids[i] = (int32_t)((i % 8) * 7 + 3);
  char hdr[128];
  int h = snprintf(hdr, sizeof hdr, "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }", N);
  while (h < 117) hdr[h++] = ' ';
  hdr[h++] = '\n';
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)h, 0};
  size_t len = sizeof pre + (size_t)h + sizeof ids;
  unsigned char *b = malloc(len);
  assert_non_null(b);
  memcpy(b, pre, sizeof pre);
  memcpy(b + sizeof pre, hdr, (size_t)h);
  memcpy(b + sizeof pre + h, ids, sizeof ids);
  ot_write_bytes(tmp, "tokens.npy", b, len);
  free(b);
  ot_tmp_path(tokens, sizeof tokens, tmp, "tokens.npy");
}

/* The losses of a train --json run's steps. */
static void losses(const char *name, double *out, int n) {
  char f[256];
  snprintf(f, sizeof f, "%s.out", name);
  char *text = slurp(f);
  json_error_t e;
  json_t *o = json_loads(text, 0, &e);
  if (!o) fail_msg("%s: stdout is not one JSON object: %s", name, text);
  json_t *steps = json_object_get(o, "steps");
  assert_int_equal(json_array_size(steps), n);
  for (int i = 0; i < n; i++) out[i] = json_real_value(json_object_get(json_array_get(steps, (size_t)i), "loss"));
  json_decref(o);
  free(text);
}

/* Every tensor of two saved models: bitwise (tol 0), or close: AdamW's
 * step is lr whatever the gradient's size, so a weight whose gradient is
 * about 0 may step either way on another rounding; so no weight is more
 * than `tol` (2 lr per step) apart, and all but 1 % of them within 1e-5. */
static void compare_models(const char *a, const char *b, double tol) {
  char pa[4096], pb[4096], fa[4200], fb[4200];
  snprintf(fa, sizeof fa, "%s/model.safetensors", ot_tmp_path(pa, sizeof pa, tmp, a));
  snprintf(fb, sizeof fb, "%s/model.safetensors", ot_tmp_path(pb, sizeof pb, tmp, b));
  size_t la, lb;
  char *x = ot_read_file(fa, &la), *y = ot_read_file(fb, &lb);
  if (tol == 0) {
    if (la != lb || memcmp(x, y, la)) fail_msg("%s and %s differ", fa, fb);
  } else {
    ot_st_file *s, *t;
    assert_int_equal(ot_st_open(fa, &s), OT_OK);
    assert_int_equal(ot_st_open(fb, &t), OT_OK);
    assert_int_equal(ot_st_count(s), ot_st_count(t));
    double worst = 0;
    size_t far = 0, all = 0;
    for (int i = 0; i < ot_st_count(s); i++) {
      const ot_st_info *u = ot_st_at(s, i), *v;
      assert_int_equal(ot_st_find(t, u->name, &v), OT_OK);
      assert_int_equal(u->bytes, v->bytes);
      float *p = malloc(u->bytes), *q = malloc(v->bytes);
      assert_int_equal(ot_st_read(s, u, p, u->bytes), OT_OK);
      assert_int_equal(ot_st_read(t, v, q, v->bytes), OT_OK);
      for (size_t k = 0; k < u->bytes / sizeof *p; k++, all++) {
        const double d = fabs((double)p[k] - (double)q[k]);
        worst = fmax(worst, d);
        far += d > 1e-5;
      }
      free(p), free(q);
    }
    ot_st_close(s), ot_st_close(t);
    if (!(worst <= tol) || far * 100 > all)
      fail_msg("%s and %s: largest difference %g (at most %g), %zu of %zu weights more than 1e-5 apart", fa, fb, worst,
               tol, far, all);
    assert_true(memcmp(x, y, la < lb ? la : lb) != 0 || la != lb); /* and not equal by accident */
  }
  free(x), free(y);
}

static void train_args(char *buf, size_t n, int accum, const char *extra, const char *save) {
  snprintf(buf, n, "train '%s' --data '%s' --no-dropout --batch 2 --seq 16 --steps 3 --lr 3e-3 --accum %d --json "
                   "--save %s %s", gpt2, tokens, accum, save, extra);
}

static void train_ranks(void **state) {
  (void)state;
  write_tokens();
  char args[8192];
  enum { S = 3 };
  double ref[S], got[S];
  train_args(args, sizeof args, 6, "--grad-reduce ordered", "m_one");
  expect_ok(run(0, "t_one", args), "t_one");
  losses("t_one", ref, S);
  assert_true(ref[S - 1] < ref[0]); /* it learns */
  for (int R = 2; R <= 3; R++) { /* the same global batch of 6 micro-batches */
    char name[32], save[32];
    snprintf(name, sizeof name, "t_r%d", R);
    snprintf(save, sizeof save, "m_r%d", R);
    train_args(args, sizeof args, 6 / R, "", save);
    expect_ok(run(R, name, args), name);
    losses(name, got, S);
    for (int i = 0; i < S; i++)
      if (got[i] != ref[i]) fail_msg("%d ranks: step %d loss %.9g, one process %.9g", R, i + 1, got[i], ref[i]);
    compare_models(save, "m_one", 0);
  }
  /* in place on one process: other roundings, the same model within fp32 tolerance */
  train_args(args, sizeof args, 6, "", "m_local");
  expect_ok(run(0, "t_local", args), "t_local");
  losses("t_local", got, S);
  for (int i = 0; i < S; i++) assert_true(fabs(got[i] - ref[i]) < 1e-4);
  compare_models("m_local", "m_one", 2 * 3e-3 * S);
  /* allreduce of 2 ranks at accum 1 = the ordered sum of 2 micro-batches, host-staged or on the device memory */
  train_args(args, sizeof args, 2, "--grad-reduce ordered", "m_two_mb");
  expect_ok(run(0, "t_two_mb", args), "t_two_mb");
  train_args(args, sizeof args, 1, "--grad-reduce allreduce --grad-memory host", "m_ar_host");
  expect_ok(run(2, "t_ar_host", args), "t_ar_host");
  compare_models("m_ar_host", "m_two_mb", 0);
  train_args(args, sizeof args, 1, "--grad-reduce allreduce --grad-memory device", "m_ar_dev");
  expect_ok(run(2, "t_ar_dev", args), "t_ar_dev");
  compare_models("m_ar_dev", "m_two_mb", 0);
  /* a bad mode: exit 2, the option named */
  train_args(args, sizeof args, 1, "--grad-reduce sideways", "m_bad");
  assert_int_equal(run(2, "t_bad", args), 2);
  char *err = slurp("t_bad.err");
  assert_non_null(strstr(err, "--grad-reduce"));
  free(err);
}

static int setup(void **state) {
  (void)state;
  tmp = ot_tmpdir_create();
  const char *data = getenv("OT_TEST_DATA");
  if (!data) return fprintf(stderr, "OT_TEST_DATA is not set\n"), -1;
  snprintf(llama, sizeof llama, "%s/models/llama_text", data);
  snprintf(gpt2, sizeof gpt2, "%s/models/gpt2_small", data);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  ot_tmpdir_remove(tmp);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(batch_ranks),
      cmocka_unit_test(batch_killed_rank),
      cmocka_unit_test(train_ranks),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
