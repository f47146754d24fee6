/* file.h — reading and writing whole files the way the library does.
 *
 * Every file omptensor reads goes through one open: only a regular file is
 * read (a directory, FIFO, device or socket is refused by name before it is
 * opened, and a FIFO swapped in afterwards cannot block the open), and a
 * missing file, a dangling symbolic link and a symbolic-link loop each get
 * their own message naming the path.
 *
 * Every file omptensor writes is written atomically: into a temporary
 * created exclusively (O_EXCL, a fresh name) in the destination's own
 * directory, flushed to disk, then renamed over the destination, whose
 * directory is flushed too. The destination is the old file or the complete
 * new one, never a part; a failed write removes its temporary, and one left
 * by a killed process (".NAME.ot-tmp.PID.*", PID no longer running) is
 * removed by the next write into the same directory.
 *
 *     char *text; size_t n;
 *     if (ot_file_read("prompt.txt", 1 << 20, &text, &n) != OT_OK) ... ot_last_error() ...
 *     ot_file_write("out.svg", svg, svg_len);
 */
#ifndef OMPTENSOR_FILE_H
#define OMPTENSOR_FILE_H

#include <stddef.h>

#include "omptensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the regular file `path` whole into a malloc'd buffer with a NUL
 * after the last byte (*len excludes it; the file may itself hold NULs).
 * A file larger than max_bytes is refused (OT_ERR_FORMAT) before anything
 * is allocated. A missing file is OT_ERR_NOT_FOUND; anything that is not a
 * regular file, or cannot be read, OT_ERR_IO. free() the buffer. */
ot_status ot_file_read(const char *path, size_t max_bytes, char **buf, size_t *len);

/* Writes `len` bytes as the whole new content of `path`, atomically (above). */
ot_status ot_file_write(const char *path, const void *data, size_t len);

/* Whether `path` can be written, checked before the work that produces it:
 * it is not a directory or anything else than a regular file (a symbolic
 * link to one is fine), and its directory exists and is writable.
 * OT_ERR_IO naming the path and the problem otherwise; nothing is created. */
ot_status ot_file_check_output(const char *path);

/* The same for a directory an output replaces as a whole (a checkpoint
 * directory): `dir` is a directory or does not exist yet, the nearest
 * existing folder above it is a writable directory, and an existing `dir`
 * holds only files (its subdirectories could not be carried over). */
ot_status ot_file_check_output_dir(const char *dir);

#ifdef __cplusplus
}
#endif
#endif
