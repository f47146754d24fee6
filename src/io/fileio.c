/* fileio.c — POSIX file helpers with status + message on every failure. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/fileio.h"

/* Large enough to run at disk/page-cache speed, small enough that one call
 * never exceeds what read(2) transfers at once (0x7ffff000 on Linux). */
#define OT_IO_CHUNK ((size_t)64 << 20)

static ot_status errno_fail(const char *path, const char *what) {
  int e = errno;
  return ot_fail(e == ENOENT ? OT_ERR_NOT_FOUND : OT_ERR_IO, "%s: cannot %s: %s", path, what, strerror(e));
}

ot_status ot_io_open_read(const char *path, int *fd, uint64_t *size) {
  if (!path || !fd || !size) return ot_fail(OT_ERR_INVALID_ARG, "ot_io_open_read: NULL argument");
  int f = open(path, O_RDONLY | O_CLOEXEC);
  if (f < 0) return errno_fail(path, "open");
  struct stat st;
  if (fstat(f, &st) != 0) {
    ot_status s = errno_fail(path, "stat");
    close(f);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    close(f);
    return ot_fail(OT_ERR_IO, "%s: not a regular file%s", path, S_ISDIR(st.st_mode) ? " (it is a directory)" : "");
  }
  *fd = f;
  *size = (uint64_t)st.st_size;
  return OT_OK;
}

ot_status ot_io_pread_full(int fd, void *dst, size_t bytes, uint64_t offset, const char *path) {
  char *p = dst;
  size_t done = 0;
  while (done < bytes) {
    size_t want = bytes - done < OT_IO_CHUNK ? bytes - done : OT_IO_CHUNK;
    ssize_t got = pread(fd, p + done, want, (off_t)(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ot_fail(OT_ERR_IO, "%s: read of %zu bytes at offset %llu failed: %s", path, want,
                     (unsigned long long)(offset + done), strerror(errno));
    }
    if (got == 0)
      return ot_fail(OT_ERR_FORMAT, "%s: truncated: the file ends at byte %llu, %zu bytes short of what was expected",
                     path, (unsigned long long)(offset + done), bytes - done);
    done += (size_t)got;
  }
  return OT_OK;
}

ot_status ot_io_write_full(int fd, const void *src, size_t bytes, const char *path) {
  const char *p = src;
  while (bytes > 0) {
    size_t want = bytes < OT_IO_CHUNK ? bytes : OT_IO_CHUNK;
    ssize_t put = write(fd, p, want);
    if (put < 0) {
      if (errno == EINTR) continue;
      return ot_fail(OT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    p += put;
    bytes -= (size_t)put;
  }
  return OT_OK;
}

ot_status ot_io_read_text(const char *path, size_t max_bytes, char **buf, size_t *len) {
  if (!buf || !len) return ot_fail(OT_ERR_INVALID_ARG, "ot_io_read_text: NULL argument");
  int fd;
  uint64_t size;
  OT_TRY(ot_io_open_read(path, &fd, &size));
  if (size > max_bytes) {
    close(fd);
    return ot_fail(OT_ERR_FORMAT, "%s: %llu bytes is too large for this kind of file (limit %zu)", path,
                   (unsigned long long)size, max_bytes);
  }
  char *b = malloc((size_t)size + 1);
  if (!b) {
    close(fd);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: cannot allocate %llu bytes to read it", path, (unsigned long long)size);
  }
  ot_status s = ot_io_pread_full(fd, b, (size_t)size, 0, path);
  close(fd);
  if (s != OT_OK) {
    free(b);
    return s;
  }
  b[size] = '\0';
  *buf = b;
  *len = (size_t)size;
  return OT_OK;
}

ot_status ot_io_create_tmp(const char *path, int *fd, char **tmp_path) {
  char *tmp = malloc(strlen(path) + 5);
  if (!tmp) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  sprintf(tmp, "%s.tmp", path);
  int f = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (f < 0) {
    ot_status s = ot_fail(OT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    free(tmp);
    return s;
  }
  *fd = f;
  *tmp_path = tmp;
  return OT_OK;
}

ot_status ot_io_commit(int fd, char *tmp_path, const char *path) {
  ot_status s = OT_OK;
  if (close(fd) != 0) s = ot_fail(OT_ERR_IO, "%s: close failed: %s", tmp_path, strerror(errno));
  else if (rename(tmp_path, path) != 0)
    s = ot_fail(OT_ERR_IO, "%s: cannot rename to %s: %s", tmp_path, path, strerror(errno));
  if (s != OT_OK) unlink(tmp_path);
  free(tmp_path);
  return s;
}

void ot_io_abandon(int fd, char *tmp_path) {
  close(fd);
  unlink(tmp_path);
  free(tmp_path);
}

char *ot_io_join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  char *p = malloc(a + b + 2);
  if (!p) return NULL;
  memcpy(p, dir, a);
  size_t n = a;
  if (a > 0 && dir[a - 1] != '/') p[n++] = '/';
  memcpy(p + n, name, b + 1);
  return p;
}

int ot_io_is_dir(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  return S_ISDIR(st.st_mode) ? 1 : 0;
}

ot_status ot_io_strdup(const char *s, char **out) {
  size_t n = strlen(s) + 1;
  *out = malloc(n);
  if (!*out) return ot_fail(OT_ERR_OUT_OF_MEMORY, "out of memory copying a %zu-byte string", n);
  memcpy(*out, s, n);
  return OT_OK;
}
