/* fileio.c — POSIX file helpers with status + message on every failure. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "io/fileio.h"

/* Large enough to run at disk/page-cache speed, small enough that one call
 * never exceeds what read(2) transfers at once (0x7ffff000 on Linux). */
#define OT_IO_CHUNK ((size_t)64 << 20)

ot_status ot_io_open_read(const char *path, int *fd, uint64_t *size) { return ot_file_open_read(path, fd, size); }

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

ot_status ot_io_read_text(const char *path, size_t max_bytes, char **buf, size_t *len) {
  return ot_file_read(path, max_bytes, buf, len);
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
