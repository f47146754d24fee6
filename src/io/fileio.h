/* fileio.h (internal) — the few POSIX file operations the readers and
 * writers share, each failing with a status and a message naming the path. */
#ifndef OT_IO_FILEIO_H
#define OT_IO_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/status.h"

/* Opens `path` for reading through the one checked open (core/file.h:
 * only a regular file, never blocking on a FIFO, a message naming what is
 * there otherwise). A missing file or dangling link gives OT_ERR_NOT_FOUND,
 * anything else OT_ERR_IO. */
ot_status ot_io_open_read(const char *path, int *fd, uint64_t *size);

/* Reads exactly `bytes` at `offset` into dst, in chunks, retrying short
 * reads; end of file before that is OT_ERR_FORMAT ("truncated"). */
ot_status ot_io_pread_full(int fd, void *dst, size_t bytes, uint64_t offset, const char *path);

/* Reads a whole (small) file into a malloc'd, NUL-terminated buffer
 * (ot_file_read). Files larger than max_bytes are refused (OT_ERR_FORMAT),
 * so a wrong path cannot make us allocate gigabytes. */
ot_status ot_io_read_text(const char *path, size_t max_bytes, char **buf, size_t *len);

/* Outputs are written through core/file.h's ot_afile (atomic: temporary,
 * fsync, rename). */

/* dir + "/" + name, malloc'd (NULL on out of memory). */
char *ot_io_join(const char *dir, const char *name);

/* 1 if `path` is a directory, 0 if it is something else, -1 if it does not
 * exist or cannot be examined. */
int ot_io_is_dir(const char *path);

/* strdup that records OT_ERR_OUT_OF_MEMORY. */
ot_status ot_io_strdup(const char *s, char **out);

#endif
