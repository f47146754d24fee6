/* file.c — checked opens and atomic outputs (file.h, omptensor/file.h). */
/* renameat2, RENAME_EXCHANGE (glibc >= 2.28): _GNU_SOURCE, which CMakeLists.txt also passes on the command line
 * (an amdgcn device pass reads glibc's features.h before this line). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fault.h"
#include "core/file.h"

/* Large enough to run at disk/page-cache speed, small enough that one call
 * never exceeds what read(2)/write(2) transfer at once (0x7ffff000). */
#define CHUNK ((size_t)64 << 20)
/* The part of a destination's name a temporary's name carries: NAME_MAX is
 * 255, and ".NAME.ot-tmp.PID.XXXXXXXX" must fit. */
#define BASE_KEEP 200
#define TMP_TAG ".ot-tmp."
#define OLD_TAG ".ot-old."

/* ---- what is at a path ---- */

static ot_path_kind kind_of_mode(mode_t m) {
  if (S_ISREG(m)) return OT_PATH_REGULAR;
  if (S_ISDIR(m)) return OT_PATH_DIR;
  if (S_ISFIFO(m)) return OT_PATH_FIFO;
  if (S_ISCHR(m)) return OT_PATH_CHAR_DEVICE;
  if (S_ISBLK(m)) return OT_PATH_BLOCK_DEVICE;
  if (S_ISSOCK(m)) return OT_PATH_SOCKET;
  return OT_PATH_OTHER;
}

ot_path_kind ot_path_kind_of(const char *path, int *err) {
  struct stat st;
  if (err) *err = 0;
  if (stat(path, &st) == 0) return kind_of_mode(st.st_mode);
  int e = errno;
  if (err) *err = e;
  if (e == ELOOP) return OT_PATH_LINK_LOOP;
  if (e == ENOTDIR) return OT_PATH_NOT_DIR;
  if (e != ENOENT) return OT_PATH_UNKNOWN;
  struct stat ls;
  if (lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode)) return OT_PATH_DANGLING_LINK;
  return OT_PATH_MISSING;
}

const char *ot_path_kind_name(ot_path_kind k) {
  switch (k) {
  case OT_PATH_MISSING: return "nothing (no such file)";
  case OT_PATH_REGULAR: return "a regular file";
  case OT_PATH_DIR: return "a directory";
  case OT_PATH_FIFO: return "a FIFO (named pipe)";
  case OT_PATH_CHAR_DEVICE: return "a character device";
  case OT_PATH_BLOCK_DEVICE: return "a block device";
  case OT_PATH_SOCKET: return "a socket";
  case OT_PATH_OTHER: return "a special file";
  case OT_PATH_DANGLING_LINK: return "a symbolic link to nothing";
  case OT_PATH_LINK_LOOP: return "a loop of symbolic links";
  case OT_PATH_NOT_DIR: return "a path through a file (a folder on the way is a file)";
  case OT_PATH_UNKNOWN: break;
  }
  return "something that cannot be examined";
}

int ot_path_exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

/* The message for `path` not being a readable regular file. */
static ot_status refuse_input(const char *path, ot_path_kind k, int e) {
  switch (k) {
  case OT_PATH_MISSING: return ot_fail(OT_ERR_NOT_FOUND, "%s: cannot open: %s", path, strerror(ENOENT));
  case OT_PATH_DANGLING_LINK: {
    char to[512];
    ssize_t n = readlink(path, to, sizeof to - 1);
    to[n > 0 ? n : 0] = '\0';
    return ot_fail(OT_ERR_NOT_FOUND, "%s: cannot open: it is a symbolic link to '%s', which does not exist (a dangling link)",
                   path, to);
  }
  case OT_PATH_LINK_LOOP:
    return ot_fail(OT_ERR_IO, "%s: cannot open: it is a loop of symbolic links that never reaches a file (%s)", path,
                   strerror(ELOOP));
  case OT_PATH_NOT_DIR:
    return ot_fail(OT_ERR_IO, "%s: cannot open: a folder on the way is a file (%s)", path, strerror(ENOTDIR));
  case OT_PATH_UNKNOWN: return ot_fail(OT_ERR_IO, "%s: cannot open: %s", path, strerror(e));
  case OT_PATH_DIR: return ot_fail(OT_ERR_IO, "%s: cannot read: it is a directory, not a file", path);
  default:
    return ot_fail(OT_ERR_IO, "%s: cannot read: it is %s, not a regular file (only regular files are read)", path,
                   ot_path_kind_name(k));
  }
}

ot_status ot_file_open_read(const char *path, int *fd, uint64_t *size) {
  if (!path || !fd || !size) return ot_fail(OT_ERR_INVALID_ARG, "ot_file_open_read: NULL argument");
  int e;
  ot_path_kind k = ot_path_kind_of(path, &e);
  if (k != OT_PATH_REGULAR) return refuse_input(path, k, e); /* a FIFO or a device is never opened */
  /* O_NONBLOCK: if a FIFO took the file's place since the stat, the open
   * returns at once instead of waiting for a writer. */
  int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (f < 0) {
    e = errno;
    k = ot_path_kind_of(path, NULL);
    return refuse_input(path, k == OT_PATH_REGULAR ? OT_PATH_UNKNOWN : k, e);
  }
  struct stat st;
  if (fstat(f, &st) != 0) {
    e = errno;
    close(f);
    return ot_fail(OT_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(f);
    return refuse_input(path, kind_of_mode(st.st_mode), 0);
  }
  int fl = fcntl(f, F_GETFL);
  if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    e = errno;
    close(f);
    return ot_fail(OT_ERR_IO, "%s: cannot set up reading: %s", path, strerror(e));
  }
  *fd = f;
  *size = (uint64_t)st.st_size;
  return OT_OK;
}

ot_status ot_file_read(const char *path, size_t max_bytes, char **buf, size_t *len) {
  if (!path || !buf || !len) return ot_fail(OT_ERR_INVALID_ARG, "ot_file_read: NULL argument");
  *buf = NULL;
  *len = 0;
  int fd;
  uint64_t size;
  OT_TRY(ot_file_open_read(path, &fd, &size));
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
  size_t done = 0;
  ot_status s = OT_OK;
  while (s == OT_OK && done < (size_t)size) {
    size_t want = (size_t)size - done < CHUNK ? (size_t)size - done : CHUNK;
    ssize_t got = pread(fd, b + done, want, (off_t)done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) s = ot_fail(OT_ERR_IO, "%s: read failed at byte %zu: %s", path, done, strerror(errno));
    else if (got == 0)
      s = ot_fail(OT_ERR_FORMAT, "%s: truncated: the file ends at byte %zu, %zu bytes short of its size", path, done,
                  (size_t)size - done);
    else done += (size_t)got;
  }
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

/* ---- the write steps, each one a point of fault injection ---- */

/* Whether the last failed step was injected (for the message). */
static _Thread_local int injected;

static int inject(void) {
  injected = ot_fault_hit(OT_FAULT_WRITE);
  if (injected) errno = ENOSPC;
  return injected;
}

/* strerror(e), marked when injected; one buffer per thread. */
static const char *why(int e) {
  static _Thread_local char b[160];
  snprintf(b, sizeof b, "%s%s", strerror(e), injected ? " (injected by OMPTENSOR_FAULT)" : "");
  return b;
}

static int w_create(const char *p) {
  return inject() ? -1 : open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
}
static int w_mkdir(const char *p) { return inject() ? -1 : mkdir(p, 0777); }
static int w_fsync(int fd) { return inject() ? -1 : fsync(fd); }
static int w_rename(const char *a, const char *b) { return inject() ? -1 : rename(a, b); }
static int w_link(const char *a, const char *b) { return inject() ? -1 : link(a, b); }
static int w_symlink(const char *to, const char *p) { return inject() ? -1 : symlink(to, p); }
static int w_close(int fd) {
  int e = inject();
  int rc = close(fd); /* always closed: an injected failure must not leak the descriptor */
  if (e) {
    errno = ENOSPC;
    return -1;
  }
  return rc;
}
static int w_exchange(const char *a, const char *b) {
  if (inject()) return -1;
#ifdef RENAME_EXCHANGE
  return renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
#else
  (void)a, (void)b;
  errno = ENOSYS;
  return -1;
#endif
}

/* fsync of a directory (so a rename in it is on disk). */
static int w_fsync_dir(const char *dir) {
  if (inject()) return -1;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  int e = errno;
  close(fd);
  /* Some filesystems cannot fsync a directory; that is no failure of ours. */
  if (rc != 0 && (e == EINVAL || e == ENOTSUP)) return 0;
  errno = e;
  return rc;
}

/* ---- names ---- */

/* A copy of path without trailing slashes ("out/" -> "out"; "/" stays). */
static char *trimmed(const char *path) {
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') n--;
  char *p = malloc(n + 1);
  if (p) {
    memcpy(p, path, n);
    p[n] = '\0';
  }
  return p;
}

/* dir and base of a trimmed path: "a/b" -> "a", "b"; "b" -> ".", "b". */
static ot_status split(const char *path, char **dir, char **base) {
  const char *slash = strrchr(path, '/');
  const char *b = slash ? slash + 1 : path;
  size_t dn = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
  *dir = malloc(dn + 1);
  *base = malloc(strlen(b) + 1);
  if (!*dir || !*base) {
    free(*dir);
    free(*base);
    *dir = *base = NULL;
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  if (!slash) strcpy(*dir, ".");
  else {
    memcpy(*dir, slash == path ? "/" : path, dn);
    (*dir)[dn] = '\0';
  }
  strcpy(*base, b);
  if (!b[0] || !strcmp(b, ".") || !strcmp(b, "..")) {
    free(*dir);
    free(*base);
    *dir = *base = NULL;
    return ot_fail(OT_ERR_INVALID_ARG, "%s: not a name an output can be written to (give a file or folder name)", path);
  }
  return OT_OK;
}

static char *join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  char *p = malloc(a + b + 2);
  if (!p) return NULL;
  memcpy(p, dir, a);
  size_t n = a;
  if (a > 0 && dir[a - 1] != '/') p[n++] = '/';
  memcpy(p + n, name, b + 1);
  return p;
}

static uint32_t random32(void) {
  static atomic_ulong counter;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ ((uint64_t)getpid() << 16) ^
               (atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull);
  x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ull, x ^= x >> 27, x *= 0x94d049bb133111ebull, x ^= x >> 31;
  return (uint32_t)x;
}

/* dir/.BASE<tag>PID.XXXXXXXX, malloc'd. */
static char *temp_name(const char *dir, const char *base, const char *tag) {
  char name[BASE_KEEP + 64];
  snprintf(name, sizeof name, ".%.*s%s%ld.%08x", BASE_KEEP, base, tag, (long)getpid(), (unsigned)random32());
  return join(dir, name);
}

/* If `name` is a temporary of the atomic layer (".BASE<tag>PID.XXXXXXXX",
 * tag .ot-tmp. or .ot-old.), its PID, with *old = 1 for .ot-old. and
 * *base_len the length of BASE as it appears (cut at BASE_KEEP); else 0. */
static long temp_pid(const char *name, int *old, size_t *base_len) {
  size_t tl = strlen(TMP_TAG);
  const char *tag = NULL;
  for (const char *p = strstr(name, ".ot-"); p; p = strstr(p + 1, ".ot-"))
    if (!strncmp(p, TMP_TAG, tl) || !strncmp(p, OLD_TAG, tl)) tag = p; /* the last one */
  if (name[0] != '.' || !tag || tag == name + 1) return 0;
  *old = !strncmp(tag, OLD_TAG, tl);
  *base_len = (size_t)(tag - name - 1);
  const char *p = tag + tl;
  long pid = 0;
  int digits = 0;
  for (; *p >= '0' && *p <= '9' && digits < 10; p++, digits++) pid = pid * 10 + (*p - '0');
  if (!digits || *p != '.') return 0;
  p++;
  for (int i = 0; i < 8; i++, p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
  return *p ? 0 : pid;
}

static int pid_alive(long pid) { return pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno == EPERM; }

/* Removes path: a file or link, or a directory of our own making (files,
 * links and, at most a few levels down, directories). Best effort. */
static void remove_tree(const char *path, int depth) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    unlink(path);
    return;
  }
  DIR *d = depth < 8 ? opendir(path) : NULL;
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        char *p = join(path, e->d_name);
        if (p) remove_tree(p, depth + 1);
        free(p);
      }
    closedir(d);
  }
  rmdir(path);
}

/* Removes the temporaries in `dir` that killed runs left (those of any
 * destination there, whose process is gone); an old directory a killed swap
 * left aside whose place is empty is put back instead. Best effort: a stray
 * that cannot be removed only stays. */
static void clean_strays(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char **dead = NULL;
  int n = 0, cap = 0;
  while ((e = readdir(d))) {
    int old = 0;
    size_t bl = 0;
    long pid = temp_pid(e->d_name, &old, &bl);
    if (!pid || pid_alive(pid)) continue;
    char *p = join(dir, e->d_name);
    if (!p) continue;
    if (old && bl < BASE_KEEP) { /* the name is whole: the old directory, back in its place if that is empty */
      char base[BASE_KEEP + 1];
      memcpy(base, e->d_name + 1, bl);
      base[bl] = '\0';
      char *dest = join(dir, base);
      int back = dest && !ot_path_exists(dest) && rename(p, dest) == 0;
      free(dest);
      if (back) {
        free(p);
        continue;
      }
    }
    if (n == cap) {
      char **g = realloc(dead, (size_t)(cap = cap ? 2 * cap : 8) * sizeof *g);
      if (!g) {
        free(p);
        break;
      }
      dead = g;
    }
    dead[n++] = p;
  }
  closedir(d);
  for (int i = 0; i < n; i++) {
    remove_tree(dead[i], 0);
    free(dead[i]);
  }
  free(dead);
}

/* ---- one output file ---- */

struct ot_afile {
  char *dest, *dir, *tmp;
  int fd;
};

static void afile_free(ot_afile *f) {
  if (!f) return;
  free(f->dest);
  free(f->dir);
  free(f->tmp);
  free(f);
}

const char *ot_afile_path(const ot_afile *f) { return f ? f->dest : ""; }

ot_status ot_afile_create(const char *path, ot_afile **out) {
  if (!path || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_afile_create: NULL argument");
  *out = NULL;
  ot_afile *f = calloc(1, sizeof *f);
  char *base = NULL;
  if (!f || !(f->dest = trimmed(path))) {
    afile_free(f);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  f->fd = -1;
  ot_status s = split(f->dest, &f->dir, &base);
  if (s == OT_OK) {
    int e;
    ot_path_kind k = ot_path_kind_of(f->dest, &e);
    if (k == OT_PATH_DIR) s = ot_fail(OT_ERR_IO, "%s: cannot write: it is a directory; give a file name", path);
    else if (k != OT_PATH_MISSING && k != OT_PATH_REGULAR && k != OT_PATH_DANGLING_LINK)
      s = ot_fail(OT_ERR_IO, "%s: cannot write: it is %s, not a regular file", path, ot_path_kind_name(k));
  }
  if (s == OT_OK) clean_strays(f->dir);
  for (int tries = 0; s == OT_OK && f->fd < 0; tries++) {
    free(f->tmp);
    f->tmp = temp_name(f->dir, base, TMP_TAG);
    if (!f->tmp) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    else if ((f->fd = w_create(f->tmp)) < 0 && (errno != EEXIST || tries >= 100))
      s = ot_fail(OT_ERR_IO, "%s: cannot create a file in %s: %s", path, f->dir, why(errno));
  }
  free(base);
  if (s != OT_OK) {
    if (f->fd >= 0) close(f->fd);
    afile_free(f);
    return s;
  }
  *out = f;
  return OT_OK;
}

ot_status ot_afile_write(ot_afile *f, const void *data, size_t len) {
  if (!f || (len && !data)) return ot_fail(OT_ERR_INVALID_ARG, "ot_afile_write: NULL argument");
  if (inject()) return ot_fail(OT_ERR_IO, "%s: write failed: %s", f->dest, why(errno));
  const char *p = data;
  while (len > 0) {
    size_t want = len < CHUNK ? len : CHUNK;
    ssize_t put = write(f->fd, p, want);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return ot_fail(OT_ERR_IO, "%s: write failed: %s", f->dest, why(put < 0 ? errno : ENOSPC));
    p += put;
    len -= (size_t)put;
  }
  return OT_OK;
}

ot_status ot_afile_commit(ot_afile *f) {
  if (!f) return ot_fail(OT_ERR_INVALID_ARG, "ot_afile_commit: NULL argument");
  ot_status s = OT_OK;
  int renamed = 0;
  if (w_fsync(f->fd) != 0) s = ot_fail(OT_ERR_IO, "%s: cannot flush to disk: %s", f->dest, why(errno));
  if (w_close(f->fd) != 0 && s == OT_OK) s = ot_fail(OT_ERR_IO, "%s: close failed: %s", f->dest, why(errno));
  f->fd = -1;
  if (s == OT_OK) {
    if (w_rename(f->tmp, f->dest) != 0) s = ot_fail(OT_ERR_IO, "%s: cannot put the new file in place: %s", f->dest, why(errno));
    else renamed = 1;
  }
  if (s == OT_OK && w_fsync_dir(f->dir) != 0)
    s = ot_fail(OT_ERR_IO, "%s: written, but its directory %s could not be flushed to disk: %s", f->dest, f->dir,
                why(errno));
  if (!renamed) unlink(f->tmp);
  afile_free(f);
  return s;
}

void ot_afile_abandon(ot_afile *f) {
  if (!f) return;
  if (f->fd >= 0) close(f->fd);
  unlink(f->tmp);
  afile_free(f);
}

ot_status ot_file_write(const char *path, const void *data, size_t len) {
  ot_afile *f;
  OT_TRY(ot_afile_create(path, &f));
  ot_status s = ot_afile_write(f, data, len);
  if (s != OT_OK) {
    ot_afile_abandon(f);
    return s;
  }
  return ot_afile_commit(f);
}

/* ---- checks before the work ---- */

/* The folder an output goes into exists and is writable. */
static ot_status check_parent(const char *path, const char *dir) {
  int e;
  ot_path_kind k = ot_path_kind_of(dir, &e);
  if (k == OT_PATH_MISSING || k == OT_PATH_DANGLING_LINK)
    return ot_fail(OT_ERR_IO, "%s: cannot write there: the folder %s does not exist", path, dir);
  if (k != OT_PATH_DIR)
    return ot_fail(OT_ERR_IO, "%s: cannot write there: %s is %s, not a directory", path, dir, ot_path_kind_name(k));
  if (access(dir, W_OK | X_OK) != 0)
    return ot_fail(OT_ERR_IO, "%s: cannot write there: the folder %s is not writable (%s)", path, dir, strerror(errno));
  return OT_OK;
}

ot_status ot_file_check_output(const char *path) {
  if (!path || !path[0]) return ot_fail(OT_ERR_INVALID_ARG, "an output path is empty");
  char *p = trimmed(path), *dir = NULL, *base = NULL;
  if (!p) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  ot_status s = split(p, &dir, &base);
  if (s == OT_OK) {
    int e;
    ot_path_kind k = ot_path_kind_of(p, &e);
    if (k == OT_PATH_DIR) s = ot_fail(OT_ERR_IO, "%s: cannot write: it is a directory; give a file name", path);
    else if (k != OT_PATH_MISSING && k != OT_PATH_REGULAR && k != OT_PATH_DANGLING_LINK)
      s = ot_fail(OT_ERR_IO, "%s: cannot write: it is %s, not a regular file", path, ot_path_kind_name(k));
    else s = check_parent(path, dir);
  }
  free(p);
  free(dir);
  free(base);
  return s;
}

/* An existing directory an output replaces holds only files and links
 * (which can be carried over); `what` for the message. */
static ot_status check_only_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return ot_fail(OT_ERR_IO, "%s: cannot list the directory: %s", dir, strerror(errno));
  ot_status s = OT_OK;
  struct dirent *e;
  while (s == OT_OK && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char *p = join(dir, e->d_name);
    struct stat st;
    if (!p) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
    else if (lstat(p, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
      s = ot_fail(OT_ERR_IO,
                  "%s: holds %s '%s'; the directory is replaced as a whole and only files can be carried over: "
                  "choose a new directory (or move '%s' out)",
                  dir, ot_path_kind_name(kind_of_mode(st.st_mode)), e->d_name, e->d_name);
    free(p);
  }
  closedir(d);
  return s;
}

/* A directory given as a symbolic link: the directory it names. */
static char *resolved_dir(const char *dir) {
  struct stat ls;
  if (lstat(dir, &ls) == 0 && S_ISLNK(ls.st_mode)) {
    char *r = realpath(dir, NULL);
    if (r) return r;
  }
  return trimmed(dir);
}

ot_status ot_file_check_output_dir(const char *path) {
  if (!path || !path[0]) return ot_fail(OT_ERR_INVALID_ARG, "an output directory is empty");
  char *p = resolved_dir(path), *dir = NULL, *base = NULL;
  if (!p) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  ot_status s = split(p, &dir, &base);
  int e;
  ot_path_kind k = s == OT_OK ? ot_path_kind_of(p, &e) : OT_PATH_UNKNOWN;
  if (s != OT_OK) {
  } else if (k == OT_PATH_DIR) {
    s = check_only_files(p);
    if (s == OT_OK) s = check_parent(path, dir);
  } else if (k != OT_PATH_MISSING) {
    s = ot_fail(OT_ERR_IO, "%s: cannot write a directory there: it is %s", path, ot_path_kind_name(k));
  } else {
    /* Created with its missing parents: the nearest existing one must be a
     * writable directory. */
    while (s == OT_OK && (k = ot_path_kind_of(dir, &e)) == OT_PATH_MISSING) {
      char *up = NULL, *b2 = NULL;
      if (!strcmp(dir, ".") || !strcmp(dir, "/")) break;
      s = split(dir, &up, &b2);
      free(b2);
      if (s == OT_OK) {
        free(dir);
        dir = up;
      }
    }
    if (s == OT_OK) s = check_parent(path, dir);
  }
  free(p);
  free(dir);
  free(base);
  return s;
}

/* ---- a directory replaced as a whole ---- */

struct ot_adir {
  char *dest, *parent, *base, *stage;
  int (*carry)(const char *name);
};

static void adir_free(ot_adir *d) {
  if (!d) return;
  free(d->dest);
  free(d->parent);
  free(d->base);
  free(d->stage);
  free(d);
}

const char *ot_adir_staging(const ot_adir *d) { return d ? d->stage : ""; }

/* mkdir -p dir (every missing parent). */
static ot_status make_dirs(const char *dir) {
  char *p = trimmed(dir);
  if (!p) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
  ot_status s = OT_OK;
  for (char *c = p + 1;; c++) {
    int end = *c == '\0';
    if (*c != '/' && !end) continue;
    *c = '\0';
    struct stat st;
    if (stat(p, &st) == 0) {
      if (!S_ISDIR(st.st_mode)) s = ot_fail(OT_ERR_IO, "%s: exists and is not a directory", p);
    } else if (w_mkdir(p) != 0 && errno != EEXIST) {
      s = ot_fail(OT_ERR_IO, "%s: cannot create: %s", p, why(errno));
    }
    if (s != OT_OK || end) break;
    *c = '/';
  }
  free(p);
  return s;
}

ot_status ot_adir_create(const char *dir, int (*carry)(const char *name), ot_adir **out) {
  if (!dir || !dir[0] || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_adir_create: no directory given");
  *out = NULL;
  ot_adir *d = calloc(1, sizeof *d);
  if (!d || !(d->dest = resolved_dir(dir))) {
    adir_free(d);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
  }
  d->carry = carry;
  ot_status s = split(d->dest, &d->parent, &d->base);
  if (s == OT_OK) s = make_dirs(d->parent);
  if (s == OT_OK) clean_strays(d->parent);
  if (s == OT_OK) {
    int e;
    ot_path_kind k = ot_path_kind_of(d->dest, &e);
    if (k == OT_PATH_DIR) s = check_only_files(d->dest);
    else if (k != OT_PATH_MISSING) s = ot_fail(OT_ERR_IO, "%s: cannot write a directory there: it is %s", dir, ot_path_kind_name(k));
  }
  for (int tries = 0; s == OT_OK && !d->stage; tries++) {
    d->stage = temp_name(d->parent, d->base, TMP_TAG);
    if (!d->stage) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
    else if (w_mkdir(d->stage) != 0) {
      int e = errno;
      free(d->stage);
      d->stage = NULL;
      if (e != EEXIST || tries >= 100) s = ot_fail(OT_ERR_IO, "%s: cannot create a directory in %s: %s", dir, d->parent, why(e));
    }
  }
  if (s != OT_OK) {
    adir_free(d);
    return s;
  }
  *out = d;
  return OT_OK;
}

/* The old directory's files that the new one keeps, as hard links (links
 * as links); anything else there fails (check_only_files refused it). */
static ot_status carry_over(ot_adir *d) {
  DIR *dd = opendir(d->dest);
  if (!dd) return ot_fail(OT_ERR_IO, "%s: cannot list the directory: %s", d->dest, strerror(errno));
  ot_status s = OT_OK;
  struct dirent *e;
  while (s == OT_OK && (e = readdir(dd))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char *from = join(d->dest, e->d_name), *to = join(d->stage, e->d_name);
    struct stat st;
    if (!from || !to) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", d->dest);
    else if (lstat(from, &st) != 0) {
      /* gone meanwhile */
    } else if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
      s = check_only_files(d->dest);
    } else if (ot_path_exists(to) || !d->carry || !d->carry(e->d_name)) {
      /* replaced by the new content, or stale with it: goes with the old directory */
    } else if (S_ISREG(st.st_mode)) {
      if (w_link(from, to) != 0) s = ot_fail(OT_ERR_IO, "%s: cannot carry it over to the new directory: %s", from, why(errno));
    } else {
      char target[4096];
      ssize_t n = readlink(from, target, sizeof target - 1);
      if (n < 0) s = ot_fail(OT_ERR_IO, "%s: cannot read the link: %s", from, strerror(errno));
      else {
        target[n] = '\0';
        if (w_symlink(target, to) != 0)
          s = ot_fail(OT_ERR_IO, "%s: cannot carry it over to the new directory: %s", from, why(errno));
      }
    }
    free(from);
    free(to);
  }
  closedir(dd);
  return s;
}

ot_status ot_adir_commit(ot_adir *d) {
  if (!d) return ot_fail(OT_ERR_INVALID_ARG, "ot_adir_commit: NULL argument");
  struct stat old;
  int have_old = stat(d->dest, &old) == 0 && S_ISDIR(old.st_mode);
  ot_status s = have_old ? carry_over(d) : OT_OK;
  if (s == OT_OK && have_old) chmod(d->stage, old.st_mode & 07777);
  if (s == OT_OK && w_fsync_dir(d->stage) != 0)
    s = ot_fail(OT_ERR_IO, "%s: cannot flush the new directory to disk: %s", d->dest, why(errno));
  char *gone = NULL; /* where the old directory ends up, to remove */
  if (s == OT_OK && !have_old) {
    if (w_rename(d->stage, d->dest) != 0) s = ot_fail(OT_ERR_IO, "%s: cannot put the new directory in place: %s", d->dest, why(errno));
  } else if (s == OT_OK) {
    if (w_exchange(d->stage, d->dest) == 0) {
      gone = d->stage; /* the exchange put the old one under the staging name */
      d->stage = NULL;
    } else if (!injected && (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP)) {
      /* No exchange here: rename the old one aside, the new one in. */
      char *aside = temp_name(d->parent, d->base, OLD_TAG);
      if (!aside) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", d->dest);
      else if (w_rename(d->dest, aside) != 0) {
        s = ot_fail(OT_ERR_IO, "%s: cannot move the old directory aside: %s", d->dest, why(errno));
      } else if (w_rename(d->stage, d->dest) != 0) {
        s = ot_fail(OT_ERR_IO, "%s: cannot put the new directory in place: %s", d->dest, why(errno));
        if (rename(aside, d->dest) != 0) { /* the old one stays aside; the next save puts it back */
        }
      } else {
        gone = aside;
        aside = NULL;
      }
      free(aside);
    } else {
      s = ot_fail(OT_ERR_IO, "%s: cannot swap the new directory in: %s", d->dest, why(errno));
    }
  }
  int swapped = s == OT_OK;
  if (swapped && w_fsync_dir(d->parent) != 0)
    s = ot_fail(OT_ERR_IO, "%s: written, but its folder %s could not be flushed to disk: %s", d->dest, d->parent,
                why(errno));
  if (gone) remove_tree(gone, 0);
  if (!swapped && d->stage) remove_tree(d->stage, 0);
  free(gone);
  adir_free(d);
  return s;
}

void ot_adir_abandon(ot_adir *d) {
  if (!d) return;
  if (d->stage) remove_tree(d->stage, 0);
  adir_free(d);
}
