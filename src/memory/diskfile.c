/* diskfile.c — checkpoint files as homes (diskfile.h). */
/* O_DIRECT: _GNU_SOURCE, which CMakeLists.txt also passes on the command line
 * (an amdgcn device pass reads glibc's features.h before this line). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/env.h"
#include "core/error.h"
#include "core/file.h"
#include "memory/diskfile.h"

struct ot_disk_file {
  atomic_int refs;
  char *path;
  int fd;        /* buffered reads and the identity checks */
  int fd_direct; /* O_DIRECT, or -1 (the filesystem has none, or OMPTENSOR_DISK_IO=buffered) */
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
};

static atomic_int n_direct, n_buffered; /* files opened each way (ot_disk_files_opened) */

void ot_disk_files_opened(int *direct, int *buffered) {
  *direct = atomic_load(&n_direct);
  *buffered = atomic_load(&n_buffered);
}

static int want_direct(void) { return ot_env_choice("OMPTENSOR_DISK_IO", 0) == 0; /* direct | buffered */ }

ot_status ot_disk_file_open(const char *path, uint64_t expect_size, ot_disk_file **out) {
  *out = NULL;
  ot_disk_file *f = calloc(1, sizeof *f);
  if (!f) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  f->fd = f->fd_direct = -1;
  atomic_init(&f->refs, 1);
  f->path = strdup(path);
  uint64_t size = 0;
  ot_status s = f->path ? ot_file_open_read(path, &f->fd, &size) : ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  struct stat sb;
  if (s == OT_OK && fstat(f->fd, &sb) != 0) s = ot_fail(OT_ERR_IO, "%s: fstat failed: %s", path, strerror(errno));
  if (s == OT_OK && expect_size && (uint64_t)sb.st_size != expect_size)
    s = ot_fail(OT_ERR_IO, "%s: the file is %lld bytes now, %llu when its header was read: it changed while being "
                "opened; load the model again once it is complete", path, (long long)sb.st_size,
                (unsigned long long)expect_size);
  if (s != OT_OK) {
    ot_disk_file_unref(f);
    return s;
  }
  f->dev = sb.st_dev;
  f->ino = sb.st_ino;
  f->size = sb.st_size;
  f->mtime = sb.st_mtim;
  /* EINVAL: tmpfs and some network filesystems have no O_DIRECT; reads then
   * go through the page cache and ot_disk_file_direct says so */
  if (want_direct()) f->fd_direct = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (f->fd_direct >= 0) {
    struct stat sd;
    if (fstat(f->fd_direct, &sd) != 0 || sd.st_ino != f->ino || sd.st_dev != f->dev) {
      close(f->fd_direct);
      ot_disk_file_unref(f);
      return ot_fail(OT_ERR_IO, "%s: replaced while being opened; load the model again", path);
    }
  }
  atomic_fetch_add(f->fd_direct >= 0 ? &n_direct : &n_buffered, 1);
  *out = f;
  return OT_OK;
}

ot_disk_file *ot_disk_file_ref(ot_disk_file *f) {
  if (f) atomic_fetch_add(&f->refs, 1);
  return f;
}

void ot_disk_file_unref(ot_disk_file *f) {
  if (!f || atomic_fetch_sub(&f->refs, 1) > 1) return;
  if (f->fd >= 0) close(f->fd);
  if (f->fd_direct >= 0) close(f->fd_direct);
  free(f->path);
  free(f);
}

const char *ot_disk_file_path(const ot_disk_file *f) { return f ? f->path : ""; }
int ot_disk_file_direct(const ot_disk_file *f) { return f && f->fd_direct >= 0; }

ot_status ot_disk_file_check(const ot_disk_file *f) {
  struct stat sb, sp;
  if (fstat(f->fd, &sb) != 0) return ot_fail(OT_ERR_IO, "%s: fstat failed: %s", f->path, strerror(errno));
  if (sb.st_size != f->size || sb.st_mtim.tv_sec != f->mtime.tv_sec || sb.st_mtim.tv_nsec != f->mtime.tv_nsec)
    return ot_fail(OT_ERR_IO, "%s: the checkpoint changed while in use (size %lld -> %lld bytes%s): its weights are "
                   "read from the file during the run (--cpu-memory-limit); do not modify it while a model "
                   "loaded from it runs, and load it again", f->path, (long long)f->size, (long long)sb.st_size,
                   sb.st_size == f->size ? ", modified in place" : "");
  if (stat(f->path, &sp) != 0 || sp.st_ino != f->ino || sp.st_dev != f->dev)
    return ot_fail(OT_ERR_IO, "%s: the checkpoint was replaced or removed while in use (the path no longer names the "
                   "file that was loaded): its weights are read from the file during the run "
                   "(--cpu-memory-limit); load the model again", f->path);
  return OT_OK;
}

/* Reads [off, off + len) with pread on fd, retrying short reads; stops at
 * the end of the file. *got: bytes read. */
static ot_status pread_loop(const ot_disk_file *f, int fd, char *dst, size_t len, uint64_t off, size_t *got,
                            const char *name) {
  *got = 0;
  while (*got < len) {
    ssize_t n = pread(fd, dst + *got, len - *got, (off_t)(off + *got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return ot_fail(OT_ERR_IO, "%s: reading tensor '%s' (%zu bytes at offset %llu) failed: %s", f->path, name, len,
                     (unsigned long long)off, strerror(errno));
    if (n == 0) break;
    *got += (size_t)n;
  }
  return OT_OK;
}

static ot_status short_read(const ot_disk_file *f, const char *name, size_t bytes, uint64_t off) {
  return ot_fail(OT_ERR_IO, "%s: tensor '%s' (%zu bytes at offset %llu) is cut off: the file was truncated while in "
                 "use; load the model again", f->path, name, bytes, (unsigned long long)off);
}

ot_status ot_disk_file_read(const ot_disk_file *f, void *dst, size_t bytes, uint64_t off, const char *name) {
  OT_TRY(ot_disk_file_check(f));
  size_t got;
  OT_TRY(pread_loop(f, f->fd, dst, bytes, off, &got, name));
  /* the copy is in our budgeted home now: the page cache (host memory
   * outside any budget) need not keep the file's pages too */
  posix_fadvise(f->fd, (off_t)off, (off_t)bytes, POSIX_FADV_DONTNEED);
  return got == bytes ? OT_OK : short_read(f, name, bytes, off);
}

size_t ot_disk_span(uint64_t off, size_t bytes, uint64_t *a0) {
  *a0 = off / OT_DISK_ALIGN * OT_DISK_ALIGN;
  uint64_t a1 = (off + bytes + OT_DISK_ALIGN - 1) / OT_DISK_ALIGN * OT_DISK_ALIGN;
  return (size_t)(a1 - *a0);
}

ot_status ot_disk_file_read_aligned(const ot_disk_file *f, void *buf, uint64_t off, size_t bytes, const char *name) {
  OT_TRY(ot_disk_file_check(f));
  uint64_t a0;
  const size_t span = ot_disk_span(off, bytes, &a0);
  size_t got;
  /* O_DIRECT reads whole aligned units: the span; the file's last unit may be short */
  OT_TRY(pread_loop(f, f->fd_direct >= 0 ? f->fd_direct : f->fd, buf, span, a0, &got, name));
  return a0 + got >= off + bytes ? OT_OK : short_read(f, name, bytes, off);
}
