/* fileio.h (internal) — the few POSIX file operations the readers and
 * writers share, each failing with a status and a message naming the path. */
#ifndef OT_IO_FILEIO_H
#define OT_IO_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/status.h"

/* Opens `path` for reading; it must be a regular file. ENOENT gives
 * OT_ERR_NOT_FOUND, anything else OT_ERR_IO. */
ot_status ot_io_open_read(const char *path, int *fd, uint64_t *size);

/* Reads exactly `bytes` at `offset` into dst, in chunks, retrying short
 * reads; end of file before that is OT_ERR_FORMAT ("truncated"). */
ot_status ot_io_pread_full(int fd, void *dst, size_t bytes, uint64_t offset, const char *path);

/* Writes all of `bytes`, retrying short writes. */
ot_status ot_io_write_full(int fd, const void *src, size_t bytes, const char *path);

/* Reads a whole (small) file into a malloc'd, NUL-terminated buffer. Files
 * larger than max_bytes are refused (OT_ERR_FORMAT), so a wrong path cannot
 * make us allocate gigabytes. */
ot_status ot_io_read_text(const char *path, size_t max_bytes, char **buf, size_t *len);

/* Creates `path`.tmp for writing; ot_io_commit closes and renames it over
 * `path`, ot_io_abandon closes and removes it. */
ot_status ot_io_create_tmp(const char *path, int *fd, char **tmp_path);
ot_status ot_io_commit(int fd, char *tmp_path, const char *path); /* frees tmp_path */
void ot_io_abandon(int fd, char *tmp_path);                       /* frees tmp_path */

/* dir + "/" + name, malloc'd (NULL on out of memory). */
char *ot_io_join(const char *dir, const char *name);

/* 1 if `path` is a directory, 0 if it is something else, -1 if it does not
 * exist or cannot be examined. */
int ot_io_is_dir(const char *path);

/* strdup that records OT_ERR_OUT_OF_MEMORY. */
ot_status ot_io_strdup(const char *s, char **out);

#endif
