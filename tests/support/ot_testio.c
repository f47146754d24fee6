/* ot_testio.c — helpers for the I/O and configuration tests. */
#include <dirent.h>
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

#include "ot_testio.h"

char *ot_tmpdir_create(void) {
  const char *base = getenv("TMPDIR");
  if (!base || !base[0]) base = "/tmp";
  size_t n = strlen(base) + 32;
  char *p = malloc(n);
  assert_non_null(p);
  snprintf(p, n, "%s/ot_test_XXXXXX", base);
  assert_non_null(mkdtemp(p));
  return p;
}

static void remove_tree(const char *path) {
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      size_t n = strlen(path) + strlen(e->d_name) + 2;
      char *child = malloc(n);
      snprintf(child, n, "%s/%s", path, e->d_name);
      remove_tree(child);
      free(child);
    }
    closedir(d);
    rmdir(path);
  } else {
    unlink(path);
  }
}

void ot_tmpdir_remove(char *dir) {
  if (!dir) return;
  remove_tree(dir);
  free(dir);
}

char *ot_tmp_path(char *buf, size_t cap, const char *dir, const char *name) {
  snprintf(buf, cap, "%s/%s", dir, name);
  return buf;
}

void ot_write_bytes(const char *dir, const char *name, const void *data, size_t len) {
  char path[4096];
  FILE *f = fopen(ot_tmp_path(path, sizeof path, dir, name), "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

void ot_write_text(const char *dir, const char *name, const char *text) {
  ot_write_bytes(dir, name, text, strlen(text));
}

void ot_write_st_raw(const char *dir, const char *name, const char *json, size_t data_bytes) {
  size_t n = strlen(json), total = 8 + n + data_bytes;
  unsigned char *buf = malloc(total);
  assert_non_null(buf);
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(((uint64_t)n >> (8 * i)) & 0xff);
  memcpy(buf + 8, json, n);
  for (size_t i = 0; i < data_bytes; i++) buf[8 + n + i] = (unsigned char)i;
  ot_write_bytes(dir, name, buf, total);
  free(buf);
}

void ot_check_error(const char *file, int line, ot_status got, ot_status want, const char *where, ...) {
  const char *msg = ot_last_error();
  int ok = got == want;
  va_list ap;
  va_start(ap, where);
  for (const char *sub; (sub = va_arg(ap, const char *));)
    if (!strstr(msg, sub)) {
      print_error("%s: message lacks \"%s\"\n", where, sub);
      ok = 0;
    }
  va_end(ap);
  if (!ok) {
    print_error("%s: got status %s (want %s), message: %s\n", where, ot_status_str(got), ot_status_str(want), msg);
    _fail(file, line);
  }
}

void ot_check_ok(const char *file, int line, ot_status s, const char *where) {
  if (s != OT_OK) {
    print_error("%s failed: %s: %s\n", where, ot_status_str(s), ot_last_error());
    _fail(file, line);
  }
}

char *ot_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  size_t cap = 4096, n = 0, r;
  char *b = malloc(cap);
  assert_non_null(b);
  while ((r = fread(b + n, 1, cap - n - 1, f)) > 0) {
    n += r;
    if (n + 1 == cap) {
      b = realloc(b, cap *= 2);
      assert_non_null(b);
    }
  }
  fclose(f);
  b[n] = '\0';
  if (len) *len = n;
  return b;
}
