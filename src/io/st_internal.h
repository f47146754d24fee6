/* st_internal.h (internal) — the parsed safetensors header, shared by the
 * file reader, the checkpoint and (issue 8) the fuzz targets, which call the
 * parsers on a buffer without touching the file system. */
#ifndef OT_IO_ST_INTERNAL_H
#define OT_IO_ST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/safetensors.h"

/* Refused beyond this, as the reference implementation does, so a corrupt
 * length cannot make us allocate gigabytes. */
#define OT_ST_MAX_HEADER ((uint64_t)100 << 20)

typedef struct ot_st_header {
  ot_st_info *tensors; /* [n], sorted by name; names malloc'd */
  int n;
  char **meta;         /* [2 * n_meta]: key, value, key, value ... */
  int n_meta;
  uint64_t data_start; /* 8 + header length: file offset of the data section */
  uint64_t data_bytes; /* file size - data_start */
} ot_st_header;

/* Parses the JSON header text (json[0..len)) of a file whose data section
 * starts at data_start and holds data_bytes bytes; validates everything.
 * `label` names the file in messages. On failure *out is left empty. */
ot_status ot_st_header_parse(const char *json, size_t len, uint64_t data_start, uint64_t data_bytes,
                             const char *label, ot_st_header *out);

/* Parses a whole file image buf[0..len): length prefix, header, data. */
ot_status ot_st_parse_buffer(const void *buf, size_t len, const char *label, ot_st_header *out);

/* Checks the 8-byte prefix of a file of file_size bytes and gives the header
 * length. */
ot_status ot_st_check_prefix(const unsigned char prefix[8], uint64_t file_size, const char *label,
                             uint64_t *header_len);

void ot_st_header_free(ot_st_header *h);

/* Binary search in infos sorted by name; NULL if absent. */
const ot_st_info *ot_st_bsearch(const ot_st_info *infos, int n, const char *name);

/* Safetensors dtype string <-> ot_dtype ("F32" ...). */
const char *ot_st_dtype_str(ot_dtype t);

/* The index file of a sharded checkpoint: weight_map entries (tensor ->
 * shard file name) and the distinct shard names, sorted. */
typedef struct ot_st_index {
  char **tensor;  /* [n] */
  int *shard;     /* [n] index into shards */
  int n;
  char **shards;  /* [n_shards] */
  int n_shards;
} ot_st_index;

ot_status ot_st_index_parse(const char *json, size_t len, const char *label, ot_st_index *out);
void ot_st_index_free(ot_st_index *ix);

/* The file's size when it was opened (its header checked against it). */
uint64_t ot_st_file_size(const ot_st_file *f);

#endif
