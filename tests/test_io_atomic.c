/* test_io_atomic.c — outputs survive failure (issue 14, class 3): every
 * file the library writes goes through one atomic layer (core/file.h), and
 * a checkpoint directory changes as a whole or not at all.
 *
 *   - a symbolic link planted at the old fixed temporary name (FILE.tmp) is
 *     never followed: the file it points to stays as it was;
 *   - OMPTENSOR_FAULT=write:N at every write point of a safetensors file, a
 *     .npy and a Chrome trace in turn: the destination is the old file or
 *     the complete new one and no temporary is left;
 *   - the same at every write point of ot_gpt2_train_save over an existing
 *     checkpoint: the directory is the old checkpoint or the new one (config
 *     and weights from the same save, never a new config beside old
 *     weights), ot_model_load loads it, no temporary is left, and the files
 *     it keeps (a tokenizer) are still there;
 *   - a save stopped by a real write error (the file size limit, EFBIG):
 *     the old checkpoint, whole;
 *   - a child process killed (SIGKILL from the fault hook) at every write
 *     point of a save: the same, and the next save removes what the killed
 *     one left behind;
 *   - strays of a dead process are removed, a live process's are not. */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/fault.h"
#include "core/file.h"
#include "sched/trace_impl.h"
#include "omptensor/omptensor.h"
#include "ot_testio.h"

/* ---- helpers ---- */

static char *slurp(const char *path, size_t *len) {
  char *b = NULL;
  size_t n = 0;
  if (ot_file_read(path, (size_t)64 << 20, &b, &n) != OT_OK) return NULL;
  if (len) *len = n;
  return b;
}

static int same_file(const char *path, const char *data, size_t len) {
  size_t n;
  char *b = slurp(path, &n);
  int same = b && n == len && !memcmp(b, data, len);
  free(b);
  return same;
}

/* Entries of dir whose name marks a temporary of the atomic layer. */
static int strays(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".ot-tmp.") || strstr(e->d_name, ".ot-old.") || strstr(e->d_name, ".tmp")) {
      print_message("stray in %s: %s\n", dir, e->d_name);
      n++;
    }
  closedir(d);
  return n;
}

static unsigned long count_writes(void) { return ot_fault_count(OT_FAULT_WRITE); }

/* ---- one file ---- */

/* A link at the name the old writer used for its temporary (FILE.tmp,
 * opened with O_TRUNC) must not be followed into the file it names. */
static void no_symlink_followed(void **state) {
  (void)state;
  char *dir = ot_tmpdir_create(), victim[4096], link[4096], out[4096];
  ot_write_text(dir, "victim", "precious");
  ot_tmp_path(victim, sizeof victim, dir, "victim");
  assert_int_equal(symlink(victim, ot_tmp_path(link, sizeof link, dir, "out.npy.tmp")), 0);
  float x[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  OT_ASSERT_OK(ot_npy_write(ot_tmp_path(out, sizeof out, dir, "out.npy"), OT_F32, 1, shape, x));
  assert_true(same_file(victim, "precious", 8));
  ot_npy_array a;
  OT_ASSERT_OK(ot_npy_read(out, &a));
  assert_int_equal(a.numel, 4);
  ot_npy_free(&a);
  struct stat st;
  assert_int_equal(lstat(link, &st), 0);
  assert_true(S_ISLNK(st.st_mode)); /* untouched */
  ot_tmpdir_remove(dir);
}

typedef ot_status (*write_fn)(const char *path, int version);

static ot_status write_st(const char *path, int version) {
  float a[64], b[3];
  for (int i = 0; i < 64; i++) a[i] = (float)(i * version);
  for (int i = 0; i < 3; i++) b[i] = (float)-version;
  ot_st_tensor t[2] = {{.name = "a", .dtype = OT_F32, .ndim = 2, .shape = {8, 8}, .data = a},
                       {.name = "b", .dtype = OT_F32, .ndim = 1, .shape = {3}, .data = b}};
  return ot_st_write(path, t, 2, NULL, 0);
}

static ot_status write_npy(const char *path, int version) {
  int32_t v[5] = {version, 2, 3, 4, 5};
  int64_t shape[1] = {5};
  return ot_npy_write(path, OT_I32, 1, shape, v);
}

static ot_status write_trace(const char *path, int version) {
  ot_trace *t;
  OT_TRY(ot_trace_create(&t));
  for (int i = 0; i < version; i++) {
    ot_trace_event e = {.kind = OT_TRACE_KERNEL, .name = "matmul", .bytes = 64};
    ot_trace_add(t, &e);
  }
  ot_status s = ot_trace_write_chrome(t, path);
  ot_trace_destroy(t);
  return s;
}

static ot_status write_raw(const char *path, int version) {
  char text[64];
  int n = snprintf(text, sizeof text, "version %d\n", version);
  return ot_file_write(path, text, (size_t)n);
}

/* Every write point of `fn` failing in turn over an existing file. */
static void each_point_one_file(write_fn fn, const char *name) {
  char *dir = ot_tmpdir_create(), path[4096];
  ot_tmp_path(path, sizeof path, dir, name);
  OT_ASSERT_OK(fn(path, 1));
  size_t old_len, new_len;
  char *old = slurp(path, &old_len);
  assert_non_null(old);
  char ref[4096];
  ot_tmp_path(ref, sizeof ref, dir, "reference");
  OT_ASSERT_OK(fn(ref, 2));
  char *neu = slurp(ref, &new_len);
  assert_non_null(neu);
  unlink(ref);
  assert_false(old_len == new_len && !memcmp(old, neu, old_len));
  int points = 0;
  for (unsigned long n = 1;; n++) {
    char spec[32];
    snprintf(spec, sizeof spec, "write:%lu", n);
    OT_ASSERT_OK(ot_fault_configure(spec));
    ot_status s = fn(path, 2);
    unsigned long seen = count_writes();
    OT_ASSERT_OK(ot_fault_configure(NULL));
    size_t len;
    char *now = slurp(path, &len);
    assert_non_null(now);
    int is_old = len == old_len && !memcmp(now, old, len), is_new = len == new_len && !memcmp(now, neu, len);
    free(now);
    if (!is_old && !is_new) fail_msg("%s, fault at write %lu: the file is neither the old nor the new one", name, n);
    assert_int_equal(strays(dir), 0);
    if (seen < n) { /* the fault was never reached: a complete write */
      OT_ASSERT_OK(s);
      assert_true(is_new);
      break;
    }
    OT_ASSERT_ERR(s, OT_ERR_IO, name, "injected by OMPTENSOR_FAULT");
    points++;
    if (is_new) OT_ASSERT_OK(fn(path, 1)); /* failed after the rename (the directory fsync): start over */
  }
  print_message("%s: %d write points, each failing in turn\n", name, points);
  assert_true(points >= 5); /* create, a write, fsync, close, rename, directory fsync */
  free(old);
  free(neu);
  ot_tmpdir_remove(dir);
}

static void faults_safetensors(void **state) {
  (void)state;
  each_point_one_file(write_st, "model.safetensors");
}
static void faults_npy(void **state) {
  (void)state;
  each_point_one_file(write_npy, "logits.npy");
}
static void faults_trace(void **state) {
  (void)state;
  each_point_one_file(write_trace, "run.json");
}
static void faults_raw(void **state) {
  (void)state;
  each_point_one_file(write_raw, "plot.svg");
}

/* Temporaries of a dead process are removed by the next write into their
 * directory (whatever they were for); those of a live one (PID 1 here) and
 * names that only look similar stay. */
static void strays_of_dead_processes(void **state) {
  (void)state;
  char *dir = ot_tmpdir_create(), path[4096], p[4096];
  pid_t child = fork();
  if (child == 0) _exit(0);
  assert_true(child > 0);
  assert_int_equal(waitpid(child, NULL, 0), child); /* reaped: its PID is free */
  char dead[128], live[128], other[128], deaddir[128], notours[128], notours2[128];
  snprintf(dead, sizeof dead, ".out.npy.ot-tmp.%ld.0123abcd", (long)child);
  snprintf(deaddir, sizeof deaddir, ".out.npy.ot-tmp.%ld.0123abce", (long)child);
  snprintf(live, sizeof live, ".out.npy.ot-tmp.1.0123abcd");
  snprintf(other, sizeof other, ".other.npy.ot-tmp.%ld.0123abcd", (long)child);
  snprintf(notours, sizeof notours, "out.npy.ot-tmp.%ld.0123abcd", (long)child);  /* no leading dot */
  snprintf(notours2, sizeof notours2, ".out.npy.ot-tmp.%ld.0123abcd.bak", (long)child);
  ot_write_text(dir, notours, "x");
  ot_write_text(dir, notours2, "x");
  ot_write_text(dir, dead, "x");
  ot_write_text(dir, live, "x");
  ot_write_text(dir, other, "x");
  assert_int_equal(mkdir(ot_tmp_path(p, sizeof p, dir, deaddir), 0777), 0);
  char inner[256];
  snprintf(inner, sizeof inner, "%s/config.json", deaddir);
  ot_write_text(dir, inner, "{}");
  OT_ASSERT_OK(write_npy(ot_tmp_path(path, sizeof path, dir, "out.npy"), 1));
  assert_false(ot_path_exists(ot_tmp_path(p, sizeof p, dir, dead)));
  assert_false(ot_path_exists(ot_tmp_path(p, sizeof p, dir, deaddir)));
  assert_false(ot_path_exists(ot_tmp_path(p, sizeof p, dir, other)));
  assert_true(ot_path_exists(ot_tmp_path(p, sizeof p, dir, live)));
  assert_true(ot_path_exists(ot_tmp_path(p, sizeof p, dir, notours)));
  assert_true(ot_path_exists(ot_tmp_path(p, sizeof p, dir, notours2)));
  /* an old checkpoint a killed swap left aside goes back into its empty place */
  char aside[128];
  snprintf(aside, sizeof aside, ".ck.ot-old.%ld.0123abcd", (long)child);
  assert_int_equal(mkdir(ot_tmp_path(p, sizeof p, dir, aside), 0777), 0);
  snprintf(inner, sizeof inner, "%s/config.json", aside);
  ot_write_text(dir, inner, "{}");
  OT_ASSERT_OK(write_npy(path, 2));
  assert_false(ot_path_exists(ot_tmp_path(p, sizeof p, dir, aside)));
  assert_true(ot_path_exists(ot_tmp_path(p, sizeof p, dir, "ck/config.json")));
  ot_tmpdir_remove(dir);
}

/* Refused before anything is written: a directory or a FIFO as the
 * destination, a missing folder, a name that is no name. */
static void bad_destinations(void **state) {
  (void)state;
  char *dir = ot_tmpdir_create(), p[4096];
  assert_int_equal(mkdir(ot_tmp_path(p, sizeof p, dir, "adir"), 0777), 0);
  OT_ASSERT_ERR(ot_file_write(p, "x", 1), OT_ERR_IO, "adir", "directory");
  OT_ASSERT_ERR(ot_file_check_output(p), OT_ERR_IO, "adir", "directory");
  assert_int_equal(mkfifo(ot_tmp_path(p, sizeof p, dir, "fifo"), 0666), 0);
  OT_ASSERT_ERR(ot_file_write(p, "x", 1), OT_ERR_IO, "fifo", "FIFO");
  OT_ASSERT_ERR(ot_file_check_output(ot_tmp_path(p, sizeof p, dir, "nodir/x.npy")), OT_ERR_IO, "nodir",
                "does not exist");
  OT_ASSERT_ERR(ot_file_write(p, "x", 1), OT_ERR_IO, "nodir");
  ot_write_text(dir, "file", "x");
  OT_ASSERT_ERR(ot_file_check_output_dir(ot_tmp_path(p, sizeof p, dir, "file")), OT_ERR_IO, "file", "regular file");
  OT_ASSERT_ERR(ot_file_check_output_dir(ot_tmp_path(p, sizeof p, dir, "file/sub")), OT_ERR_IO, "file/sub");
  OT_ASSERT_OK(ot_file_check_output_dir(ot_tmp_path(p, sizeof p, dir, "new/deeper/ckpt")));
  assert_int_equal(mkdir(ot_tmp_path(p, sizeof p, dir, "withsub"), 0777), 0);
  assert_int_equal(mkdir(ot_tmp_path(p, sizeof p, dir, "withsub/sub"), 0777), 0);
  OT_ASSERT_ERR(ot_file_check_output_dir(ot_tmp_path(p, sizeof p, dir, "withsub")), OT_ERR_IO, "withsub", "'sub'");
  OT_ASSERT_ERR(ot_file_write(ot_tmp_path(p, sizeof p, dir, ".."), "x", 1), OT_ERR_INVALID_ARG, "..");
  assert_int_equal(strays(dir), 0);
  ot_tmpdir_remove(dir);
}

/* ---- a checkpoint directory ---- */

static ot_ctx *host_ctx(void) {
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = OT_BACKEND_HOST;
  ot_ctx *ctx = NULL;
  OT_ASSERT_OK(ot_ctx_create(&co, &ctx));
  return ctx;
}

static const char *data_dir(void) {
  const char *d = getenv("OT_TEST_DATA");
  assert_non_null(d);
  return d;
}

/* A trainer: gpt2_small's weights (old) or, for `other`, a copy of its
 * config with 64 positions, initialized at random (new): the two saves
 * differ in config.json and in every weight. */
static ot_gpt2_trainer *trainer(ot_ctx *ctx, const char *model) {
  ot_gpt2_train_opts o = ot_gpt2_train_opts_default();
  o.B = 1;
  o.T = 8;
  char gpt2[4096];
  snprintf(gpt2, sizeof gpt2, "%s/models/gpt2_small", data_dir());
  o.init_random = model != NULL;
  o.seed = 7;
  ot_gpt2_trainer *g;
  OT_ASSERT_OK(ot_gpt2_train_create(ctx, model ? model : gpt2, &o, NULL, &g));
  return g;
}

/* A model dir holding gpt2_small's config.json with n_positions 64. */
static void make_other_model(const char *dir) {
  char src[4096];
  snprintf(src, sizeof src, "%s/models/gpt2_small/config.json", data_dir());
  size_t n;
  char *text = slurp(src, &n);
  assert_non_null(text);
  char *at = strstr(text, "\"n_positions\": 128");
  assert_non_null(at);
  memcpy(at, "\"n_positions\":  64", 18);
  mkdir(dir, 0777);
  char dst[4096];
  OT_ASSERT_OK(ot_file_write(ot_tmp_path(dst, sizeof dst, dir, "config.json"), text, n));
  free(text);
}

typedef struct ckpt_state {
  char *config, *weights;
  size_t config_len, weights_len;
} ckpt_state;

static ckpt_state read_state(const char *dir) {
  char p[4096];
  ckpt_state s = {0};
  s.config = slurp(ot_tmp_path(p, sizeof p, dir, "config.json"), &s.config_len);
  s.weights = slurp(ot_tmp_path(p, sizeof p, dir, "model.safetensors"), &s.weights_len);
  return s;
}

static int state_is(const ckpt_state *a, const ckpt_state *b) {
  return a->config && a->weights && b->config && b->weights && a->config_len == b->config_len &&
         a->weights_len == b->weights_len && !memcmp(a->config, b->config, a->config_len) &&
         !memcmp(a->weights, b->weights, a->weights_len);
}

static void free_state(ckpt_state *s) {
  free(s->config);
  free(s->weights);
}

/* The directory is exactly the old or the new checkpoint, loads, and kept
 * its tokenizer; returns 1 for new. */
static int check_ckpt(ot_ctx *ctx, const char *dir, const ckpt_state *old, const ckpt_state *neu, const char *what) {
  ckpt_state now = read_state(dir);
  int is_old = state_is(&now, old), is_new = state_is(&now, neu);
  free_state(&now);
  if (!is_old && !is_new)
    fail_msg("%s: %s is neither the old checkpoint nor the new one (a mix, or missing)", what, dir);
  ot_lm *m = NULL;
  OT_ASSERT_OK(ot_model_load(ctx, dir, OT_DTYPE_KEEP, NULL, NULL, &m));
  ot_lm_destroy(m);
  char p[4096];
  if (!same_file(ot_tmp_path(p, sizeof p, dir, "tokenizer.json"), "{\"kept\": true}", 14))
    fail_msg("%s: the checkpoint's tokenizer.json was not kept", what);
  return is_new;
}

typedef struct save_fixture {
  char *root, ck[4096], other[4096], ref_new[4096];
  ot_ctx *ctx;
  ot_gpt2_trainer *g_old, *g_new;
  ckpt_state old, neu;
} save_fixture;

static void fixture_setup(save_fixture *f) {
  memset(f, 0, sizeof *f);
  f->root = ot_tmpdir_create();
  ot_tmp_path(f->ck, sizeof f->ck, f->root, "ck");
  ot_tmp_path(f->other, sizeof f->other, f->root, "other_model");
  ot_tmp_path(f->ref_new, sizeof f->ref_new, f->root, "ref_new");
  make_other_model(f->other);
  f->ctx = host_ctx();
  f->g_old = trainer(f->ctx, NULL);
  f->g_new = trainer(f->ctx, f->other);
  OT_ASSERT_OK(ot_gpt2_train_save(f->g_new, f->ref_new));
  f->neu = read_state(f->ref_new);
  OT_ASSERT_OK(ot_gpt2_train_save(f->g_old, f->ck));
  ot_write_text(f->ck, "tokenizer.json", "{\"kept\": true}");
  f->old = read_state(f->ck);
  assert_false(state_is(&f->old, &f->neu));
}

static void fixture_teardown(save_fixture *f) {
  free_state(&f->old);
  free_state(&f->neu);
  ot_gpt2_train_destroy(f->g_old);
  ot_gpt2_train_destroy(f->g_new);
  ot_ctx_destroy(f->ctx);
  ot_tmpdir_remove(f->root);
}

#define STALE "model-00002-of-00002.safetensors"

/* Every write point of a save over an existing checkpoint failing in turn. */
static void save_faults(void **state) {
  (void)state;
  save_fixture f;
  fixture_setup(&f);
  /* A stale shard of an older save must go with the old directory, not be
   * carried over (it also tells which directory is in place). */
  ot_write_text(f.ck, STALE, "stale");
  int points = 0;
  for (unsigned long n = 1;; n++) {
    char spec[32];
    snprintf(spec, sizeof spec, "write:%lu", n);
    OT_ASSERT_OK(ot_fault_configure(spec));
    ot_status s = ot_gpt2_train_save(f.g_new, f.ck);
    unsigned long seen = count_writes();
    OT_ASSERT_OK(ot_fault_configure(NULL));
    char what[64];
    snprintf(what, sizeof what, "fault at write %lu", n);
    int is_new = 0;
    if (seen >= n) {
      OT_ASSERT_ERR(s, OT_ERR_IO, "injected by OMPTENSOR_FAULT");
      char p[4096];
      /* the old directory, stale shard and all, until the swap */
      if (!ot_path_exists(ot_tmp_path(p, sizeof p, f.ck, STALE))) is_new = 1;
      int st_new = check_ckpt(f.ctx, f.ck, &f.old, &f.neu, what);
      if (st_new != is_new) fail_msg("%s: stale shard present %d but checkpoint new %d", what, !is_new, st_new);
    } else {
      OT_ASSERT_OK(s);
      is_new = check_ckpt(f.ctx, f.ck, &f.old, &f.neu, what);
      assert_true(is_new);
    }
    assert_int_equal(strays(f.root), 0);
    if (seen < n) break;
    points++;
    if (is_new) { /* failed after the swap: back to the old checkpoint */
      OT_ASSERT_OK(ot_gpt2_train_save(f.g_old, f.ck));
      ot_write_text(f.ck, STALE, "stale");
    }
  }
  print_message("ot_gpt2_train_save: %d write points, each failing in turn\n", points);
  assert_true(points >= 10);
  fixture_teardown(&f);
}

/* A real failure, not an injected one: the file size limit (RLIMIT_FSIZE,
 * EFBIG as from a full disk) stops the save in the middle of the weights.
 * The old checkpoint stays whole; the old writer rewrote config.json in
 * place first and left it beside the old weights. */
static void save_file_size_limit(void **state) {
  (void)state;
  save_fixture f;
  fixture_setup(&f);
  struct rlimit old_lim, lim;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_lim), 0);
  void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
  lim = old_lim;
  lim.rlim_cur = 64 << 10; /* the weights are ~490 KB; config.json fits */
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  ot_status s = ot_gpt2_train_save(f.g_new, f.ck);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old_lim), 0);
  signal(SIGXFSZ, old_sig);
  OT_ASSERT_ERR(s, OT_ERR_IO, "model.safetensors", "File too large");
  assert_int_equal(check_ckpt(f.ctx, f.ck, &f.old, &f.neu, "file size limit"), 0);
  assert_int_equal(strays(f.root), 0);
  fixture_teardown(&f);
}

/* The child of save_kills: saves the new model over DIR and is killed at
 * its `at`-th write. */
static int kill_at;
static void kill_hook(ot_fault_kind kind, unsigned long n) {
  if (kind == OT_FAULT_WRITE && n == (unsigned long)kill_at) raise(SIGKILL);
}

static int crash_child(const char *ck, const char *other, int at) {
  ot_ctx *ctx = host_ctx();
  ot_gpt2_trainer *g = trainer(ctx, other);
  kill_at = at;
  ot_fault_set_hook(kill_hook);
  ot_status s = ot_gpt2_train_save(g, ck);
  ot_fault_set_hook(NULL);
  ot_gpt2_train_destroy(g);
  ot_ctx_destroy(ctx);
  return s == OT_OK ? 0 : 3;
}

static const char *self_exe;

static void save_kills(void **state) {
  (void)state;
  save_fixture f;
  fixture_setup(&f);
  /* how many write points one save has */
  OT_ASSERT_OK(ot_fault_configure("write:4000000000"));
  OT_ASSERT_OK(ot_gpt2_train_save(f.g_old, f.ck));
  unsigned long total = count_writes();
  OT_ASSERT_OK(ot_fault_configure(NULL));
  assert_true(total >= 10);
  int killed = 0;
  for (unsigned long k = 1; k <= total + 1; k++) {
    char at[32];
    snprintf(at, sizeof at, "%lu", k);
    pid_t pid = fork();
    if (pid == 0) {
      execl(self_exe, self_exe, "--crash-child", f.ck, f.other, at, (char *)NULL);
      _exit(127);
    }
    assert_true(pid > 0);
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    char what[64];
    snprintf(what, sizeof what, "killed at write %lu of %lu", k, total);
    if (k <= total) {
      if (!WIFSIGNALED(ws) || WTERMSIG(ws) != SIGKILL) fail_msg("%s: the child was not killed (status %d)", what, ws);
      killed++;
    } else if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
      fail_msg("an unkilled save in the child failed (status %d)", ws);
    }
    check_ckpt(f.ctx, f.ck, &f.old, &f.neu, what);
    /* the next save cleans up what the killed one left */
    OT_ASSERT_OK(ot_gpt2_train_save(f.g_old, f.ck));
    assert_int_equal(strays(f.root), 0);
    assert_int_equal(check_ckpt(f.ctx, f.ck, &f.old, &f.neu, what), 0);
  }
  print_message("ot_gpt2_train_save: killed at each of %d write points\n", killed);
  fixture_teardown(&f);
}

/* A checkpoint directory that holds a subdirectory is refused, untouched. */
static void save_refuses_subdirs(void **state) {
  (void)state;
  save_fixture f;
  fixture_setup(&f);
  char p[4096];
  assert_int_equal(mkdir(ot_tmp_path(p, sizeof p, f.ck, "runs"), 0777), 0);
  OT_ASSERT_ERR(ot_gpt2_train_check_save(f.ck), OT_ERR_IO, "'runs'", "directory");
  OT_ASSERT_ERR(ot_gpt2_train_save(f.g_new, f.ck), OT_ERR_IO, "'runs'");
  rmdir(p);
  check_ckpt(f.ctx, f.ck, &f.old, &f.neu, "refused");
  assert_int_equal(strays(f.root), 0);
  fixture_teardown(&f);
}

int main(int argc, char **argv) {
  self_exe = argv[0];
  if (argc == 5 && !strcmp(argv[1], "--crash-child")) return crash_child(argv[2], argv[3], atoi(argv[4]));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(no_symlink_followed),   cmocka_unit_test(faults_safetensors),
      cmocka_unit_test(faults_npy),            cmocka_unit_test(faults_trace),
      cmocka_unit_test(faults_raw),            cmocka_unit_test(strays_of_dead_processes),
      cmocka_unit_test(bad_destinations),      cmocka_unit_test(save_faults),
      cmocka_unit_test(save_file_size_limit),  cmocka_unit_test(save_kills),
      cmocka_unit_test(save_refuses_subdirs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
