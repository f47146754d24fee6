/* test_disk_home.c — weights homed in their checkpoint files under a host
 * budget (issue 23; memory/diskfile.h, sched/homes.c, sched/disk.c).
 *
 * What must hold, on the reference models (one file; four shards; bf16):
 *   - with a device budget a third of the weights and host budgets that
 *     force reads from disk, down to the smallest the homes pass accepts,
 *     the prompt's logits and the tokens are bitwise the unlimited run's
 *     (no host budget), the decode steps read weights from disk (DISK
 *     events after the first runs), the trace holds both budgets, and the
 *     host check fails one byte under the peak it recorded (it can fail);
 *   - a smaller host budget is OT_ERR_BUDGET naming --cpu-memory-limit;
 *   - a checkpoint truncated, rewritten in place (also with its mtime set
 *     back: ctime, and the bytes of a span read before) or replaced by a
 *     rename after loading makes the next generation fail with OT_ERR_IO
 *     naming the file (never garbage, never a crash; the model is still
 *     destroyed cleanly: ASan/LSan in CI);
 *   - a host budget on a backend that computes on homes is refused by name;
 *   - weights no file can home (a GGUF's) count under the host budget too. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "memory/diskfile.h"
#include "model_test.h"
#include "omptensor/models.h"
#include "ot_test.h"
#include "ot_testio.h"

/* File homes need a device to upload to (the map backend): the plain host
 * build has none, and its refusal is what refused_off_map checks. */
#ifdef OT_OFFLOAD
#define NEEDS_MAP()
#else
#define NEEDS_MAP() skip()
#endif

static ot_ctx *ctx_with(uint64_t host_budget) {
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = OT_BACKEND_MAP;
  co.host_budget_bytes = host_budget;
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&co, &ctx));
  return ctx;
}

/* Generates from dir (a model directory) into out; returns the status. */
static ot_status gen(ot_ctx *ctx, const char *dir, const ot_test_manifest *mf, uint64_t budget, ot_trace *tr,
                     ot_test_gen *out) {
  ot_lm *m;
  ot_status s = ot_model_load(ctx, dir, OT_DTYPE_KEEP, NULL, NULL, &m);
  if (s != OT_OK) return s;
  out->weight_bytes = m->weight_bytes;
  char npy[] = "/tmp/ot_disk_test_XXXXXX";
  int fd = mkstemp(npy);
  assert_true(fd >= 0);
  close(fd);
  ot_gen_opts g = ot_gen_opts_default();
  g.max_new_tokens = mf->n_gen < 8 ? mf->n_gen : 8;
  g.logits_out = npy;
  g.sched.strategy = OT_STRATEGY_AGGRESSIVE;
  g.sched.budget_bytes = budget;
  g.trace = tr;
  ot_gen_result r;
  s = ot_generate(m, mf->prompt, mf->n_prompt, &g, &r);
  if (s == OT_OK) {
    OT_ASSERT_OK(ot_npy_read(npy, &out->logits));
    out->n_tokens = r.n_tokens;
    memcpy(out->tokens, r.tokens, (size_t)r.n_tokens * sizeof *r.tokens);
    ot_gen_result_free(&r);
  }
  unlink(npy);
  ot_lm_destroy(m);
  return s;
}

static void expect_same(const ot_test_gen *a, const ot_test_gen *b, const char *what) {
  const size_t n = (size_t)(b->logits.shape[0] * b->logits.shape[1]);
  if ((size_t)(a->logits.shape[0] * a->logits.shape[1]) != n || memcmp(a->logits.data, b->logits.data, n * sizeof(float)))
    fail_msg("%s: prompt logits differ from the unlimited run's", what);
  if (a->n_tokens != b->n_tokens || memcmp(a->tokens, b->tokens, (size_t)b->n_tokens * sizeof(int32_t)))
    fail_msg("%s: tokens differ from the unlimited run's", what);
}

/* DISK events in runs after the first two (the prompt's and the first decode
 * step's): weights the decode steps read from their files. */
static int later_disk_reads(const ot_trace *tr) {
  int n = 0;
  for (size_t i = 0; i < ot_trace_count(tr); i++) {
    const ot_trace_event *e = ot_trace_event_at(tr, i);
    n += e->kind == OT_TRACE_DISK && e->run >= 2;
  }
  return n;
}

static void bitwise_under_host_budgets(const char *set) {
  ot_test_manifest mf;
  ot_test_read_manifest(set, &mf);
  char *dir = ot_test_model_path(set, "");
  ot_ctx *ctx = ctx_with(0);
  ot_test_gen ref;
  OT_ASSERT_OK(gen(ctx, dir, &mf, 0, NULL, &ref));
  ot_ctx_destroy(ctx);
  const uint64_t budget = ref.weight_bytes / 3;
  int accepted = 0, with_reads = 0, refused = 0;
  /* from all the weights down: each 15 % less, until the homes pass refuses */
  for (uint64_t host = ref.weight_bytes * 2; host > 4096 && !refused; host = host * 85 / 100) {
    ctx = ctx_with(host);
    ot_trace *tr;
    OT_ASSERT_OK(ot_trace_create(&tr));
    ot_test_gen got;
    ot_status s = gen(ctx, dir, &mf, budget, tr, &got);
    if (s == OT_ERR_BUDGET) {
      assert_non_null(strstr(ot_last_error(), "--cpu-memory-limit"));
      refused = 1;
    } else {
      OT_ASSERT_OK(s);
      char what[96];
      snprintf(what, sizeof what, "%s, host budget %llu", set, (unsigned long long)host);
      expect_same(&got, &ref, what);
      OT_ASSERT_OK(ot_trace_check_budget(tr, budget));
      OT_ASSERT_OK(ot_trace_check_host_budget(tr, host));
      const ot_trace_summary sm = ot_trace_summarize(tr);
      if (sm.disk_reads) {
        assert_true(sm.peak_host_bytes > 0 && sm.peak_host_bytes <= host);
        /* the check reads what the trace recorded: one byte less fails */
        assert_int_equal(ot_trace_check_host_budget(tr, sm.peak_host_bytes - 1), OT_ERR_BUDGET);
      }
      with_reads += later_disk_reads(tr) > 0;
      accepted++;
      ot_npy_free(&got.logits);
    }
    ot_trace_destroy(tr);
    ot_ctx_destroy(ctx);
  }
  print_message("  %s: %d host budgets run bitwise the unlimited run, %d of them reading weights in every decode "
                "step; then refused\n", set, accepted, with_reads);
  if (!refused) fail_msg("%s: no host budget was too small: the search proves nothing about the bound", set);
  if (with_reads < 2) fail_msg("%s: %d budgets read weights from disk during decode; expected several", set, with_reads);
  ot_npy_free(&ref.logits);
  free(dir);
}

static void one_file(void **state) {
  (void)state;
  NEEDS_MAP();
  bitwise_under_host_budgets("llama_gqa");
}
static void shards(void **state) {
  (void)state;
  NEEDS_MAP();
  bitwise_under_host_budgets("llama_sharded");
}
static void bf16(void **state) {
  (void)state;
  NEEDS_MAP();
  bitwise_under_host_budgets("llama_bf16");
}

/* A copy of llama_gqa in a temporary directory. */
static char *copy_model(void) {
  char *dir = ot_tmpdir_create();
  const char *files[] = {"config.json", "generation_config.json", "model.safetensors"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char *src = ot_test_model_path("llama_gqa", files[i]);
    size_t len;
    char *data = ot_read_file(src, &len);
    ot_write_bytes(dir, files[i], data, len);
    free(data);
    free(src);
  }
  return dir;
}

typedef enum { TRUNCATE, REWRITE, RESTORED, REPLACE } change;

/* Writes `bytes` at `off` of `path` in place, then sets its access and
 * modification times back to what they were (touch -d, utimensat): only
 * ctime, which no user can set, still says the file was written. */
static void write_keeping_mtime(const char *path, const void *bytes, size_t n, off_t off) {
  struct stat before;
  assert_int_equal(stat(path, &before), 0);
  int fd = open(path, O_WRONLY);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, bytes, n, off), (ssize_t)n);
  assert_int_equal(close(fd), 0);
  struct timespec ts[2] = {before.st_atim, before.st_mtim};
  assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
  struct stat after;
  assert_int_equal(stat(path, &after), 0);
  assert_true(after.st_size == before.st_size && after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
              after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
}

static void change_file(const char *dir, change how) {
  char p[600], q[600];
  ot_tmp_path(p, sizeof p, dir, "model.safetensors");
  size_t len;
  char *data = ot_read_file(p, &len);
  if (how == TRUNCATE) {
    assert_int_equal(truncate(p, (off_t)(len / 2)), 0);
  } else if (how == REWRITE) { /* same size, same bytes, a new mtime: still a change */
    struct timespec ts[2] = {{0, UTIME_NOW}, {1, 0}};
    assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
  } else if (how == RESTORED) { /* other weights in place, same size, the mtime set back (issue 43) */
    for (size_t i = len / 2; i < len; i++) data[i] = (char)(data[i] ^ 0x5a);
    write_keeping_mtime(p, data + len / 2, len - len / 2, (off_t)(len / 2));
  } else { /* a new file renamed over it, as a download tool does */
    ot_write_bytes(dir, "new.safetensors", data, len);
    ot_tmp_path(q, sizeof q, dir, "new.safetensors");
    assert_int_equal(rename(q, p), 0);
  }
  free(data);
}

/* Load under a host budget that reads from disk, generate once, change the
 * file, generate again with the same model: OT_ERR_IO naming it. */
static void changed_checkpoint(void **state) {
  (void)state;
  NEEDS_MAP();
  ot_test_manifest mf;
  ot_test_read_manifest("llama_gqa", &mf);
  const char *names[] = {"truncated", "rewritten", "rewritten with its mtime restored", "replaced"};
  const char *says[] = {"changed", "changed", "while in use", "replaced"};
  for (int how = TRUNCATE; how <= REPLACE; how++) {
    char *dir = copy_model();
    /* the budget of the smallest accepted run is not known here: a third of
     * the weights on the host, which bitwise_under_host_budgets shows reads */
    ot_ctx *ctx = ctx_with(0);
    ot_test_gen ref;
    OT_ASSERT_OK(gen(ctx, dir, &mf, 0, NULL, &ref));
    ot_ctx_destroy(ctx);
    ctx = ctx_with(ref.weight_bytes / 2);
    ot_lm *m;
    OT_ASSERT_OK(ot_model_load(ctx, dir, OT_DTYPE_KEEP, NULL, NULL, &m));
    ot_gen_opts g = ot_gen_opts_default();
    g.max_new_tokens = 3;
    g.sched.budget_bytes = ref.weight_bytes / 3;
    ot_trace *tr;
    OT_ASSERT_OK(ot_trace_create(&tr));
    g.trace = tr;
    ot_gen_result r;
    OT_ASSERT_OK(ot_generate(m, mf.prompt, mf.n_prompt, &g, &r));
    ot_gen_result_free(&r);
    if (!ot_trace_summarize(tr).disk_reads) fail_msg("no weight was read from disk: the test proves nothing");
    ot_trace_destroy(tr);
    g.trace = NULL;
    change_file(dir, (change)how);
    ot_status s = ot_generate(m, mf.prompt, mf.n_prompt, &g, &r);
    if (s == OT_OK) {
      ot_gen_result_free(&r);
      fail_msg("a %s checkpoint still generated", names[how]);
    }
    assert_int_equal(s, OT_ERR_IO);
    const char *msg = ot_last_error();
    if (!strstr(msg, "model.safetensors") || !strstr(msg, says[how]))
      fail_msg("%s checkpoint: the message does not name the file and what happened: %s", names[how], msg);
    ot_lm_destroy(m);
    ot_ctx_destroy(ctx);
    ot_npy_free(&ref.logits);
    ot_tmpdir_remove(dir);
  }
}

/* Issue 43: the checks a read makes, each on its own, on a file written just
 * before it is opened (the kernel stamps ctime from a clock that ticks every
 * few ms: a write in the same tick as the open would leave ctime unchanged,
 * unless the open waits for the tick to pass), 20 times over:
 *   - the same bytes written in place, the mtime restored: ctime;
 *   - other bytes in a span read before, the mtime restored: the content
 *     check names the tensor (it runs before the ctime check). */
static void ctime_and_content(void **state) {
  (void)state;
  char *dir = ot_tmpdir_create(), path[600];
  ot_tmp_path(path, sizeof path, dir, "w.bin");
  enum { N = 64 * 1024 };
  unsigned char *data = malloc(N), *buf = malloc(N);
  assert_true(data && buf);
  for (int i = 0; i < N; i++) data[i] = (unsigned char)(i * 7 + 3);
  for (int round = 0; round < 20; round++) {
    for (int what = 0; what < 2; what++) {
      ot_write_bytes(dir, "w.bin", data, N);
      ot_disk_file *f;
      OT_ASSERT_OK(ot_disk_file_open(path, N, &f));
      /* what makes ctime reliable: the open returns once the clock the kernel
       * stamps ctime from has passed the file's ctime, so that any later write
       * stamps a later one (on a kernel with fine-grained ctime, 6.13 on, too) */
      struct stat sb;
      struct timespec now;
      assert_int_equal(stat(path, &sb), 0);
      clock_gettime(CLOCK_REALTIME_COARSE, &now);
      if (!(now.tv_sec > sb.st_ctim.tv_sec || (now.tv_sec == sb.st_ctim.tv_sec && now.tv_nsec > sb.st_ctim.tv_nsec)))
        fail_msg("round %d: the open returned in the clock tick of the file's last write (ctime %lld.%09ld, coarse "
                 "clock %lld.%09ld): a write now could keep that ctime", round, (long long)sb.st_ctim.tv_sec,
                 sb.st_ctim.tv_nsec, (long long)now.tv_sec, now.tv_nsec);
      OT_ASSERT_OK(ot_disk_file_read(f, buf, 8192, 4096, "w"));
      OT_ASSERT_OK(ot_disk_file_read(f, buf, 8192, 4096, "w")); /* the same bytes again: fine */
      unsigned char other[16];
      for (int i = 0; i < 16; i++) other[i] = (unsigned char)(data[5000 + i] ^ (what ? 0xff : 0));
      write_keeping_mtime(path, other, sizeof other, 5000);
      ot_status st = ot_disk_file_read(f, buf, 8192, 4096, "w");
      if (st != OT_ERR_IO) fail_msg("round %d: %s in place, the mtime restored: read %s", round,
                                    what ? "other bytes" : "the same bytes", st == OT_OK ? "ok" : ot_last_error());
      const char *want = what ? "tensor 'w' (8192 bytes at offset 4096) reads other bytes" : "status change time";
      if (!strstr(ot_last_error(), path) || !strstr(ot_last_error(), want))
        fail_msg("round %d: the message does not name the file and '%s': %s", round, want, ot_last_error());
      ot_disk_file_unref(f);
    }
  }
  free(data);
  free(buf);
  ot_tmpdir_remove(dir);
}

/* The content check hashes a bounded sample of each read: at most
 * OT_DISK_SAMPLE_BLOCKS blocks, whatever the span (the first and the last
 * included): a byte changed in the first or last block of a large span
 * changes the hash, one between the sampled blocks does not. */
static void content_sample_is_bounded(void **state) {
  (void)state;
  const size_t n = 64u << 20; /* 64 MiB: 16384 blocks, 8 of them hashed */
  unsigned char *d = calloc(n, 1);
  assert_non_null(d);
  const uint64_t h = ot_disk_sample_hash(d, n);
  d[0] = 1;
  assert_true(ot_disk_sample_hash(d, n) != h);
  d[0] = 0;
  d[n - 1] = 1;
  assert_true(ot_disk_sample_hash(d, n) != h);
  d[n - 1] = 0;
  d[OT_DISK_ALIGN + 17] = 1; /* in block 1: the second sampled block starts 1/7 of the way */
  assert_true(ot_disk_sample_hash(d, n) == h);
  free(d);
}

/* Issue 43: a host budget holds every home, not only file homes. A GGUF's
 * weights are never homed in their file (the loader keeps them in host
 * memory): under a host budget smaller than them generation is OT_ERR_BUDGET
 * naming the budget (it ran, ignoring the budget, before); one that holds
 * them runs. */
static void gguf_under_host_budget(void **state) {
  (void)state;
  NEEDS_MAP();
  char *path = ot_test_model_path("../gguf/llama-mixed.gguf", "");
  ot_test_manifest mf = {.prompt = {1, 5, 9, 13}, .n_prompt = 4, .n_gen = 2};
  ot_ctx *ctx = ctx_with(0);
  ot_test_gen ref;
  OT_ASSERT_OK(gen(ctx, path, &mf, 0, NULL, &ref));
  ot_ctx_destroy(ctx);
  ctx = ctx_with(ref.weight_bytes / 2);
  ot_test_gen got;
  assert_int_equal(gen(ctx, path, &mf, 0, NULL, &got), OT_ERR_BUDGET);
  if (!strstr(ot_last_error(), "host memory budget") || !strstr(ot_last_error(), "--cpu-memory-limit"))
    fail_msg("the refusal does not name the host budget: %s", ot_last_error());
  ot_ctx_destroy(ctx);
  ctx = ctx_with(ref.weight_bytes * 4);
  OT_ASSERT_OK(gen(ctx, path, &mf, 0, NULL, &got));
  expect_same(&got, &ref, "gguf, a host budget that holds its weights");
  ot_npy_free(&got.logits);
  ot_npy_free(&ref.logits);
  ot_ctx_destroy(ctx);
  free(path);
}

/* The host backend computes on homes, usm uses them as device memory:
 * neither can leave weights in their files. */
static void refused_off_map(void **state) {
  (void)state;
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = OT_BACKEND_HOST;
  co.host_budget_bytes = 1u << 20;
  ot_ctx *ctx = NULL;
  assert_int_equal(ot_ctx_create(&co, &ctx), OT_ERR_INVALID_ARG);
  assert_null(ctx);
  assert_non_null(strstr(ot_last_error(), "--cpu-memory-limit"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_file),
      cmocka_unit_test(shards),
      cmocka_unit_test(bf16),
      cmocka_unit_test(changed_checkpoint),
      cmocka_unit_test(ctime_and_content),
      cmocka_unit_test(content_sample_is_bounded),
      cmocka_unit_test(gguf_under_host_budget),
      cmocka_unit_test(refused_off_map),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
