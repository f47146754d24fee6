/* file.h (internal) — the one way the library opens an input file and the
 * one way it writes an output (public part: omptensor/file.h).
 *
 * In core, below io and sched, because both write files (io: safetensors,
 * .npy; sched: the Chrome trace; train: checkpoint directories) and both
 * read them (io: checkpoints, tokens, configs; sched: traces), and io and
 * sched are on the same level: neither may include the other.
 *
 * Reading: ot_file_open_read looks at the path first (stat, lstat for the
 * link itself) and refuses anything but a regular file without opening it,
 * then opens with O_NONBLOCK | O_CLOEXEC (a FIFO put there in between
 * cannot block the open), checks the open file again (fstat) and clears
 * O_NONBLOCK.
 *
 * Writing one file (ot_afile): a temporary ".NAME.ot-tmp.PID.RANDOM" made
 * with O_CREAT | O_EXCL in the destination's directory (never a fixed name,
 * never following a link someone put there), written, fsync'd, closed,
 * renamed over NAME, the directory fsync'd. Any failure unlinks the
 * temporary.
 *
 * Writing a directory as a whole (ot_adir): a staging directory
 * ".NAME.ot-tmp.PID.RANDOM" beside NAME, filled by the caller (with
 * ot_afile, so every file in it is on disk), fsync'd; the files of an
 * existing NAME that the caller keeps (tokenizer files and the like, not
 * the ones the new content replaces) are hard-linked into it; then the two are swapped in one step with
 * renameat2(RENAME_EXCHANGE) and the parent fsync'd; the old directory,
 * now under the staging name, is removed. Crash windows: before the swap
 * NAME is the old directory and the staging one is a stray temporary;
 * after it NAME is the new one and the stray is the old; at no point is
 * NAME missing or mixed. Where the filesystem cannot exchange (EINVAL,
 * ENOSYS) it falls back to rename NAME aside (".NAME.ot-old.PID.RANDOM"),
 * rename the new one in: a crash between those two leaves NAME missing and
 * the old directory aside, which the next save into the same parent puts
 * back before anything else.
 *
 * Strays: every create in a directory first removes the temporaries there
 * (of any destination) whose PID is no longer running (a killed run's), and
 * never those of a live process (a concurrent writer's); the names are
 * specific enough (".NAME.ot-tmp.PID.8-hex-digits") not to match a user's
 * file. PIDs are this machine's: on a filesystem shared between machines a
 * temporary of another machine's live process could be taken for a stray,
 * whose writer then fails at its rename (it never corrupts the output).
 *
 * Fault injection (core/fault.h, kind "write"): every step above that can
 * fail on a real system counts as one write operation: creating a
 * temporary, each ot_afile_write, fsync, close, rename or exchange, the
 * directory fsync, a hard link; the N-th fails as if the disk were full. */
#ifndef OT_CORE_FILE_H
#define OT_CORE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/file.h"
#include "omptensor/status.h"

/* What is at a path (stat, then lstat to tell a dangling link). */
typedef enum ot_path_kind {
  OT_PATH_MISSING = 0,
  OT_PATH_REGULAR,
  OT_PATH_DIR,
  OT_PATH_FIFO,
  OT_PATH_CHAR_DEVICE,
  OT_PATH_BLOCK_DEVICE,
  OT_PATH_SOCKET,
  OT_PATH_OTHER,         /* some other file type */
  OT_PATH_DANGLING_LINK, /* a symbolic link to nothing */
  OT_PATH_LINK_LOOP,     /* ELOOP: symbolic links that lead back to themselves */
  OT_PATH_NOT_DIR,       /* ENOTDIR: a component of the path is a file */
  OT_PATH_UNKNOWN        /* stat failed otherwise (EACCES, ...): *err says why */
} ot_path_kind;

/* Classifies `path`; *err (if not NULL) gets the errno behind MISSING,
 * LINK_LOOP, NOT_DIR or UNKNOWN (0 otherwise). */
ot_path_kind ot_path_kind_of(const char *path, int *err);

/* "a directory", "a FIFO (named pipe)", "a symbolic link to nothing", ... */
const char *ot_path_kind_name(ot_path_kind k);

/* 1 if something (even a dangling link) is at `path`. */
int ot_path_exists(const char *path);

/* Opens `path` for reading (above): *fd, *size. OT_ERR_NOT_FOUND for a
 * missing file or a dangling link, OT_ERR_IO for anything else; the message
 * names the path and what is there. */
ot_status ot_file_open_read(const char *path, int *fd, uint64_t *size);

/* ---- one output file ---- */
typedef struct ot_afile ot_afile;

ot_status ot_afile_create(const char *path, ot_afile **out);
ot_status ot_afile_write(ot_afile *f, const void *data, size_t len);
/* fsync, close, rename over the destination, fsync its directory; frees f.
 * On failure the destination is untouched and the temporary gone. */
ot_status ot_afile_commit(ot_afile *f);
/* Removes the temporary; frees f (NULL is fine). */
void ot_afile_abandon(ot_afile *f);
const char *ot_afile_path(const ot_afile *f); /* the destination, for messages */

/* ---- a directory replaced as a whole ---- */
typedef struct ot_adir ot_adir;

/* Prepares to replace (or create) directory `dir`: creates missing parents,
 * cleans the strays of earlier runs (restoring an old directory a crash
 * left aside), makes the staging directory. carry(name) says which files
 * of an existing `dir` the new one keeps (hard links; NULL: none); the rest
 * (the files the new content replaces or makes stale) go with the old one. */
ot_status ot_adir_create(const char *dir, int (*carry)(const char *name), ot_adir **out);
/* The staging directory: write the new content there (with ot_afile). */
const char *ot_adir_staging(const ot_adir *d);
/* Carries the old directory's other files over, swaps the new one in and
 * removes the old; frees d. On failure `dir` is unchanged (the old one or
 * nothing) and the staging directory removed. */
ot_status ot_adir_commit(ot_adir *d);
void ot_adir_abandon(ot_adir *d); /* NULL is fine */

#endif
