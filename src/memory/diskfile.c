/* diskfile.c — checkpoint files as homes (diskfile.h). */
/* O_DIRECT: _GNU_SOURCE, which CMakeLists.txt also passes on the command line
 * (an amdgcn device pass reads glibc's features.h before this line). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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
  struct timespec mtime, ctime;
  /* the content check: each span's sample hash from its first read, by
   * offset and length (open addressing; offsets are stored + 1, 0: empty) */
  pthread_mutex_t mu;
  uint64_t *key, *len, *hash;
  size_t cap, n;
};

static int ts_equal(struct timespec a, struct timespec b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }
static int ts_after(struct timespec a, struct timespec b) {
  return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec > b.tv_nsec);
}

/* The kernel stamps ctime from its coarse clock (one tick, 1-10 ms), so a
 * write in the tick the file was stat'ed in can leave ctime as it was (the
 * "racy" case git knows for mtime). A file changed in the current tick is
 * stat'ed again once the coarse clock has passed its ctime: from then on
 * any write gives a later ctime. Waits at most a few ticks, and only for a
 * file written just before it is opened. */
static ot_status settle(ot_disk_file *f) {
  struct timespec now;
  for (int i = 0; i < 200; i++) {
    clock_gettime(CLOCK_REALTIME_COARSE, &now);
    if (ts_after(now, f->ctime)) break;
    nanosleep(&(struct timespec){0, 500000}, NULL);
  }
  if (!ts_after(now, f->ctime)) return OT_OK; /* a ctime in the future (another clock): the content check remains */
  struct stat sb;
  if (fstat(f->fd, &sb) != 0) return ot_fail(OT_ERR_IO, "%s: fstat failed: %s", f->path, strerror(errno));
  if (sb.st_size != f->size || !ts_equal(sb.st_ctim, f->ctime))
    return ot_fail(OT_ERR_IO, "%s: the file changed while being opened; load the model again once it is complete",
                   f->path);
  return OT_OK;
}

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
  pthread_mutex_init(&f->mu, NULL);
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
  f->ctime = sb.st_ctim; /* no user can set it: a rewrite that restores the mtime still moves it */
  s = settle(f);
  if (s != OT_OK) {
    ot_disk_file_unref(f);
    return s;
  }
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
  free(f->key);
  free(f->len);
  free(f->hash);
  pthread_mutex_destroy(&f->mu);
  free(f);
}

const char *ot_disk_file_path(const ot_disk_file *f) { return f ? f->path : ""; }
int ot_disk_file_direct(const ot_disk_file *f) { return f && f->fd_direct >= 0; }

/* Size, mtime and the path: what a read must pass before it starts; *sb
 * gets the open file's status for the ctime check after it (ctime_check). */
static ot_status identity(const ot_disk_file *f, struct stat *sb) {
  struct stat sp;
  if (fstat(f->fd, sb) != 0) return ot_fail(OT_ERR_IO, "%s: fstat failed: %s", f->path, strerror(errno));
  if (sb->st_size != f->size || !ts_equal(sb->st_mtim, f->mtime))
    return ot_fail(OT_ERR_IO, "%s: the checkpoint changed while in use (size %lld -> %lld bytes%s): its weights are "
                   "read from the file during the run (--cpu-memory-limit); do not modify it while a model "
                   "loaded from it runs, and load it again", f->path, (long long)f->size, (long long)sb->st_size,
                   sb->st_size == f->size ? ", modified in place" : "");
  if (stat(f->path, &sp) != 0 || sp.st_ino != f->ino || sp.st_dev != f->dev)
    return ot_fail(OT_ERR_IO, "%s: the checkpoint was replaced or removed while in use (the path no longer names the "
                   "file that was loaded): its weights are read from the file during the run "
                   "(--cpu-memory-limit); load the model again", f->path);
  return OT_OK;
}

/* ctime, which no user can set back: a write in place that restored the
 * mtime (touch -d, utimensat), or a change of the file's metadata. */
static ot_status ctime_check(const ot_disk_file *f, const struct stat *sb) {
  if (ts_equal(sb->st_ctim, f->ctime)) return OT_OK;
  return ot_fail(OT_ERR_IO, "%s: the checkpoint changed while in use (its status change time moved although its size "
                 "and modification time did not: written in place with the modification time set back, or its "
                 "metadata changed): its weights are read from the file during the run (--cpu-memory-limit); do not "
                 "modify it while a model loaded from it runs, and load it again", f->path);
}

ot_status ot_disk_file_check(const ot_disk_file *f) {
  struct stat sb;
  OT_TRY(identity(f, &sb));
  return ctime_check(f, &sb);
}

/* ---- the content check ----
 * What no timestamp can prove (a clock set back, a network filesystem's
 * cached attributes): the bytes themselves. Each read hashes a sample of the
 * span it read (all of it up to OT_DISK_SAMPLE_BLOCKS blocks, else that many
 * OT_DISK_ALIGN blocks spread from its first to its last byte) and compares
 * the hash with the span's first read; a different one is OT_ERR_IO. The
 * cost is bounded per read, whatever the tensor's size (docs/disk.md:
 * measured). */

static uint64_t mix(uint64_t h, uint64_t w) {
  h ^= w * 0x9E3779B97F4A7C15ull;
  h = (h << 31) | (h >> 33);
  return h * 0xC2B2AE3D27D4EB4Full;
}

static uint64_t hash_bytes(uint64_t h, const unsigned char *p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = mix(h, w);
  }
  for (; i < n; i++) h = mix(h, p[i]);
  return h;
}

uint64_t ot_disk_sample_hash(const void *data, size_t bytes) {
  const unsigned char *p = data;
  const size_t blk = OT_DISK_ALIGN, nb = OT_DISK_SAMPLE_BLOCKS;
  uint64_t h = mix(0x243F6A8885A308D3ull, bytes);
  if (bytes <= nb * blk) return hash_bytes(h, p, bytes);
  for (size_t k = 0; k < nb; k++) /* block k starts k/(nb-1) of the way: the first and the last included */
    h = hash_bytes(h, p + (uint64_t)(bytes - blk) * k / (nb - 1), blk);
  return h;
}

/* The slot of span [off, off + len), or the empty one it would take. */
static size_t slot_of(const ot_disk_file *f, uint64_t off, uint64_t len) {
  size_t i = (size_t)(mix(mix(0, off + 1), len) & (f->cap - 1));
  while (f->key[i] && (f->key[i] != off + 1 || f->len[i] != len)) i = (i + 1) & (f->cap - 1);
  return i;
}

static int grow(ot_disk_file *f) {
  const size_t cap = f->cap ? 2 * f->cap : 64;
  uint64_t *key = calloc(cap, sizeof *key), *len = calloc(cap, sizeof *len), *hash = calloc(cap, sizeof *hash);
  if (!key || !len || !hash) {
    free(key);
    free(len);
    free(hash);
    return 0;
  }
  uint64_t *ok = f->key, *ol = f->len, *oh = f->hash;
  const size_t ocap = f->cap;
  f->key = key, f->len = len, f->hash = hash, f->cap = cap;
  for (size_t i = 0; i < ocap; i++)
    if (ok[i]) {
      const size_t j = slot_of(f, ok[i] - 1, ol[i]);
      f->key[j] = ok[i], f->len[j] = ol[i], f->hash[j] = oh[i];
    }
  free(ok);
  free(ol);
  free(oh);
  return 1;
}

/* The span's sample against its first read's (recorded now if this is its
 * first; with no memory for the table the check is skipped, never failed). */
static ot_status content_check(ot_disk_file *f, const void *data, size_t bytes, uint64_t off, const char *name) {
  const uint64_t h = ot_disk_sample_hash(data, bytes);
  ot_status s = OT_OK;
  pthread_mutex_lock(&f->mu);
  if ((f->n + 1) * 2 <= f->cap || grow(f)) {
    const size_t i = slot_of(f, off, bytes);
    if (!f->key[i]) f->key[i] = off + 1, f->len[i] = bytes, f->hash[i] = h, f->n++;
    else if (f->hash[i] != h)
      s = ot_fail(OT_ERR_IO, "%s: tensor '%s' (%zu bytes at offset %llu) reads other bytes than when it was first "
                  "read: the checkpoint was modified in place while in use; do not modify it while a model loaded "
                  "from it runs, and load it again", f->path, name, bytes, (unsigned long long)off);
  }
  pthread_mutex_unlock(&f->mu);
  return s;
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

/* A read's checks: size, mtime and path before it; after it the bytes
 * against the span's first read, then ctime (from the status taken before:
 * no second fstat). Content before ctime so that each check is seen to
 * work on its own (test_disk_home). */
ot_status ot_disk_file_read(ot_disk_file *f, void *dst, size_t bytes, uint64_t off, const char *name) {
  struct stat sb;
  OT_TRY(identity(f, &sb));
  size_t got;
  OT_TRY(pread_loop(f, f->fd, dst, bytes, off, &got, name));
  /* the copy is in our budgeted home now: the page cache (host memory
   * outside any budget) need not keep the file's pages too */
  posix_fadvise(f->fd, (off_t)off, (off_t)bytes, POSIX_FADV_DONTNEED);
  if (got != bytes) return short_read(f, name, bytes, off);
  OT_TRY(content_check(f, dst, bytes, off, name));
  return ctime_check(f, &sb);
}

size_t ot_disk_span(uint64_t off, size_t bytes, uint64_t *a0) {
  *a0 = off / OT_DISK_ALIGN * OT_DISK_ALIGN;
  uint64_t a1 = (off + bytes + OT_DISK_ALIGN - 1) / OT_DISK_ALIGN * OT_DISK_ALIGN;
  return (size_t)(a1 - *a0);
}

ot_status ot_disk_file_read_aligned(ot_disk_file *f, void *buf, uint64_t off, size_t bytes, const char *name) {
  struct stat sb;
  OT_TRY(identity(f, &sb));
  uint64_t a0;
  const size_t span = ot_disk_span(off, bytes, &a0);
  size_t got;
  /* O_DIRECT reads whole aligned units: the span; the file's last unit may be short */
  OT_TRY(pread_loop(f, f->fd_direct >= 0 ? f->fd_direct : f->fd, buf, span, a0, &got, name));
  if (a0 + got < off + bytes) return short_read(f, name, bytes, off);
  OT_TRY(content_check(f, (const char *)buf + (off - a0), bytes, off, name));
  return ctime_check(f, &sb);
}
