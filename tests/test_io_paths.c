/* test_io_paths.c — what is at a path, through the library (issue 14,
 * classes 4 and 6): every reader goes through one checked open
 * (core/file.h), so
 *
 *   - a FIFO as model.safetensors, a shard index, config.json, a --config
 *     YAML, a token file, a .npy or a trace is refused at once, naming the
 *     path and "FIFO" (an alarm fails the test if any read blocks);
 *   - a directory, a dangling symbolic link, a loop of symbolic links and a
 *     character device in place of model.safetensors each get their own
 *     message naming the path; a missing one still says "no
 *     model.safetensors";
 *   - ot_file_read reads a file whole, NUL bytes included, and refuses one
 *     above its limit before allocating;
 *   - a YAML configuration nested deeper than 64 levels (200 KB of '[') is
 *     refused with the file and line after scanning little of it, while 64
 *     levels still parse (and fail for what they are). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/file.h"
#include "omptensor/omptensor.h"
#include "ot_testio.h"

static void on_alarm(int sig) {
  (void)sig;
  static const char m[] = "test_io_paths: a read blocked (a FIFO was opened for reading)\n";
  ssize_t w = write(2, m, sizeof m - 1);
  (void)w;
  _exit(1);
}

static int setup(void **state) {
  *state = ot_tmpdir_create();
  signal(SIGALRM, on_alarm);
  alarm(120); /* a blocked open never returns: end the test instead */
  return 0;
}

static int teardown(void **state) {
  alarm(0);
  ot_tmpdir_remove(*state);
  return 0;
}

static char *path_in(const char *dir, const char *name) {
  static char buf[4][4096];
  static int k;
  k = (k + 1) % 4;
  return ot_tmp_path(buf[k], sizeof buf[k], dir, name);
}

static void make_fifo(const char *dir, const char *name) { assert_int_equal(mkfifo(path_in(dir, name), 0666), 0); }

static void copy_config(const char *dir, const char *model) {
  char src[4096];
  snprintf(src, sizeof src, "%s/models/%s/config.json", getenv("OT_TEST_DATA"), model);
  char *text;
  size_t n;
  OT_ASSERT_OK(ot_file_read(src, 1 << 20, &text, &n));
  ot_write_bytes(dir, "config.json", text, n);
  free(text);
}

static void fifo_everywhere(void **state) {
  const char *dir = *state;
  make_fifo(dir, "model.safetensors");
  ot_st_file *f;
  OT_ASSERT_ERR(ot_st_open(path_in(dir, "model.safetensors"), &f), OT_ERR_IO, "model.safetensors", "FIFO");
  ot_ckpt *ck;
  OT_ASSERT_ERR(ot_ckpt_open(dir, &ck), OT_ERR_IO, "model.safetensors", "FIFO");
  make_fifo(dir, "shards.index.json");
  OT_ASSERT_ERR(ot_ckpt_open(path_in(dir, "shards.index.json"), &ck), OT_ERR_IO, "shards.index.json", "FIFO");
  make_fifo(dir, "config.json");
  ot_hf_config c;
  OT_ASSERT_ERR(ot_hf_config_load(dir, &c), OT_ERR_IO, "config.json", "FIFO");
  make_fifo(dir, "settings.yaml");
  ot_settings s;
  ot_settings_init(&s);
  OT_ASSERT_ERR(ot_settings_load_file(&s, path_in(dir, "settings.yaml")), OT_ERR_IO, "settings.yaml", "FIFO");
  ot_settings_release(&s);
  make_fifo(dir, "train.bin");
  ot_tokens *t;
  OT_ASSERT_ERR(ot_tokens_open(path_in(dir, "train.bin"), 256, &t), OT_ERR_IO, "train.bin", "FIFO");
  make_fifo(dir, "ids.npy");
  ot_npy_array a;
  OT_ASSERT_ERR(ot_npy_read(path_in(dir, "ids.npy"), &a), OT_ERR_IO, "ids.npy", "FIFO");
  make_fifo(dir, "run.json");
  ot_trace *tr;
  uint64_t budget;
  OT_ASSERT_ERR(ot_trace_read_chrome(path_in(dir, "run.json"), &tr, &budget), OT_ERR_IO, "run.json", "FIFO");
  char *text;
  size_t n;
  OT_ASSERT_ERR(ot_file_read(path_in(dir, "run.json"), 100, &text, &n), OT_ERR_IO, "run.json", "FIFO");
}

/* What stands in place of model.safetensors, each with its own message. */
static void weights_path_kinds(void **state) {
  const char *dir = *state;
  copy_config(dir, "llama_gqa");
  ot_ckpt *ck;
  OT_ASSERT_ERR(ot_ckpt_open(dir, &ck), OT_ERR_NOT_FOUND, dir, "no model.safetensors");
  char *w = path_in(dir, "model.safetensors");
  /* a directory */
  assert_int_equal(mkdir(w, 0777), 0);
  OT_ASSERT_ERR(ot_ckpt_open(dir, &ck), OT_ERR_IO, "model.safetensors", "is a directory");
  assert_int_equal(rmdir(w), 0);
  /* a dangling link */
  assert_int_equal(symlink("gone.safetensors", w), 0);
  OT_ASSERT_ERR(ot_ckpt_open(dir, &ck), OT_ERR_NOT_FOUND, "model.safetensors", "gone.safetensors", "dangling");
  assert_int_equal(unlink(w), 0);
  /* a loop of links */
  assert_int_equal(symlink("model.safetensors", w), 0);
  OT_ASSERT_ERR(ot_ckpt_open(dir, &ck), OT_ERR_IO, "model.safetensors", "loop of symbolic links");
  assert_int_equal(unlink(w), 0);
  /* a device */
  assert_int_equal(symlink("/dev/null", w), 0);
  OT_ASSERT_ERR(ot_ckpt_open(dir, &ck), OT_ERR_IO, "model.safetensors", "character device");
  assert_int_equal(unlink(w), 0);
  /* a path through a file */
  ot_write_text(dir, "plain", "x");
  OT_ASSERT_ERR(ot_ckpt_open(path_in(dir, "plain/model.safetensors"), &ck), OT_ERR_IO, "plain/model.safetensors",
                "is a file");
  /* a missing file named directly */
  OT_ASSERT_ERR(ot_ckpt_open(path_in(dir, "absent.safetensors"), &ck), OT_ERR_NOT_FOUND, "absent.safetensors",
                "No such file");
}

static void read_whole(void **state) {
  const char *dir = *state;
  ot_write_bytes(dir, "nul.txt", "1,2\0003,4", 7);
  char *text;
  size_t n;
  OT_ASSERT_OK(ot_file_read(path_in(dir, "nul.txt"), 100, &text, &n));
  assert_int_equal(n, 7);
  assert_memory_equal(text, "1,2\0003,4", 7);
  assert_int_equal(text[7], 0);
  free(text);
  OT_ASSERT_ERR(ot_file_read(path_in(dir, "nul.txt"), 6, &text, &n), OT_ERR_FORMAT, "nul.txt", "too large");
  assert_null(text);
  OT_ASSERT_ERR(ot_file_read(dir, 100, &text, &n), OT_ERR_IO, dir, "directory");
}

/* 200 KB of '[': refused for its depth, at line 1 column 65. */
static void yaml_depth(void **state) {
  const char *dir = *state;
  size_t n = 200000;
  char *deep = malloc(n + 1);
  assert_non_null(deep);
  memset(deep, '[', n);
  deep[n] = '\n';
  ot_write_bytes(dir, "deep.yaml", deep, n + 1);
  ot_settings s;
  ot_settings_init(&s);
  OT_ASSERT_ERR(ot_settings_load_file(&s, path_in(dir, "deep.yaml")), OT_ERR_FORMAT, "deep.yaml:1:65",
                "nested more than 64 levels");
  /* the same in a mapping, in block style too */
  OT_ASSERT_ERR(ot_settings_load_yaml(&s, deep, n, "text"), OT_ERR_FORMAT, "text:1:65", "nested");
  free(deep);
  char block[70 * 70 + 1];
  size_t k = 0;
  for (int d = 0; d < 70; d++) {
    for (int i = 0; i < d; i++) block[k++] = ' ';
    k += (size_t)snprintf(block + k, sizeof block - k, "k:\n");
  }
  OT_ASSERT_ERR(ot_settings_load_yaml(&s, block, k, "block.yaml"), OT_ERR_FORMAT, "block.yaml:65:", "nested");
  /* 64 levels are not refused for their depth, only for what they are */
  char ok[200];
  memset(ok, 0, sizeof ok);
  for (int i = 0; i < 63; i++) ok[i] = '[';
  snprintf(ok + 63, sizeof ok - 63, "{memory: 1}");
  for (int i = 0; i < 63; i++) strcat(ok, "]");
  ot_status st = ot_settings_load_yaml(&s, ok, strlen(ok), "ok.yaml");
  assert_int_equal(st, OT_ERR_FORMAT);
  assert_null(strstr(ot_last_error(), "nested"));
  OT_ASSERT_OK(ot_settings_load_yaml(&s, "memory: {max_gpu_memory: 3GB}\n", 30, "fine.yaml"));
  ot_settings_release(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(fifo_everywhere, setup, teardown),
      cmocka_unit_test_setup_teardown(weights_path_kinds, setup, teardown),
      cmocka_unit_test_setup_teardown(read_whole, setup, teardown),
      cmocka_unit_test_setup_teardown(yaml_depth, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
