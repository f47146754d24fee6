/* diskfile.h (internal) — a checkpoint file as the home of read-only
 * tensors (issue 23: models larger than host memory).
 *
 * A weight whose bytes sit in a safetensors file exactly as the tensor holds
 * them needs no host copy: the scheduler can read it from the file each time
 * it uploads it (sched/disk.c). One ot_disk_file per shard, shared by the
 * storages homed in it (reference counted), keeps its own descriptors open
 * for the life of those storages, so a checkpoint closed after loading
 * still serves them.
 *
 * A file that changes underneath must be an error, not garbage: the
 * identity (device, inode, size, mtime, ctime) is taken at open, and every
 * read compares the open file (fstat: truncated or rewritten in place; ctime,
 * which no user can set, catches a rewrite that restored the mtime) and the
 * path (stat: replaced by a rename, which would leave us reading the old
 * inode while the user believes the new one is in use). Then the bytes
 * themselves: a sample of each span read is hashed and compared with that
 * span's first read (bounded per read: OT_DISK_SAMPLE_BLOCKS blocks), for
 * what timestamps cannot prove (a clock set back, a network filesystem's
 * cached attributes).
 *
 * Reads for the staging ring go through O_DIRECT where the filesystem has
 * it, so the page cache (host memory outside any budget) is neither used nor
 * filled; OMPTENSOR_DISK_IO=buffered turns that off. Which one a file got is
 * reported (ot_disk_file_direct), never silently changed. */
#ifndef OT_MEMORY_DISKFILE_H
#define OT_MEMORY_DISKFILE_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/memory.h" /* ot_disk_files_opened */
#include "omptensor/status.h"

#define OT_DISK_ALIGN 4096u /* O_DIRECT: buffer, offset and length in these units */
#define OT_DISK_SAMPLE_BLOCKS 8 /* the content check hashes at most this many OT_DISK_ALIGN blocks per read */

typedef struct ot_disk_file ot_disk_file;

/* Opens `path` (a regular file) and records its identity. `expect_size`
 * (0: any) is the size the caller's parser saw: a file swapped between the
 * two opens is refused. */
ot_status ot_disk_file_open(const char *path, uint64_t expect_size, ot_disk_file **out);
ot_disk_file *ot_disk_file_ref(ot_disk_file *f);
void ot_disk_file_unref(ot_disk_file *f); /* NULL is fine; closes with the last reference */

const char *ot_disk_file_path(const ot_disk_file *f);
int ot_disk_file_direct(const ot_disk_file *f); /* reads of ot_disk_file_read_aligned bypass the page cache */

/* OT_OK if the file is still the one opened; OT_ERR_IO naming the file,
 * what changed and what to do otherwise. */
ot_status ot_disk_file_check(const ot_disk_file *f);

/* `bytes` at `off` into any buffer (buffered; a lazy home made host-resident). */
ot_status ot_disk_file_read(ot_disk_file *f, void *dst, size_t bytes, uint64_t off, const char *name);

/* The aligned span around [off, off + bytes): where it starts (*a0) and how
 * long it is; buf must hold it. */
size_t ot_disk_span(uint64_t off, size_t bytes, uint64_t *a0);
/* Reads that span into buf (OT_DISK_ALIGN-aligned, ot_disk_span bytes),
 * O_DIRECT where the file has it; the tensor starts at buf + (off - a0).
 * The end of the file inside the span is fine; before off + bytes it is
 * OT_ERR_IO (truncated). */
ot_status ot_disk_file_read_aligned(ot_disk_file *f, void *buf, uint64_t off, size_t bytes, const char *name);

/* The content check's hash of a span's bytes: all of them up to
 * OT_DISK_SAMPLE_BLOCKS x OT_DISK_ALIGN, else that many blocks spread from
 * the first byte to the last (the cost is bounded whatever the span). */
uint64_t ot_disk_sample_hash(const void *data, size_t bytes);

#endif
