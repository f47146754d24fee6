/* safetensors.h — read and write safetensors files and Hugging Face checkpoints.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of
 * JSON ({"name": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]},
 * "__metadata__": {"k": "v"}}), then the data section; offsets are relative
 * to the start of the data section. Opening a file validates the whole
 * header against the file size (dtype, shape, byte counts matching the
 * shape, and offsets that tile the data section exactly: sorted, each tensor
 * begins where the previous one ends, the first at 0, the last at the end of
 * the file, as the reference reader requires), so a later read can only
 * fail on an I/O error.
 *
 *     ot_st_file *f;
 *     if (ot_st_open("model.safetensors", &f) != OT_OK) ... ot_last_error() ...
 *     const ot_st_info *w;
 *     if (ot_st_find(f, "lm_head.weight", &w) == OT_OK)
 *       ot_st_read(f, w, home, w->bytes);   // straight into the home memory
 *     ot_st_close(f);
 *
 * A checkpoint (ot_ckpt) is a directory as transformers writes it: one
 * model.safetensors, or shards model-0000K-of-0000N.safetensors listed by
 * model.safetensors.index.json ({"weight_map": {tensor: shard}}). It finds a
 * tensor in whichever shard holds it.
 *
 * Supported dtypes: F32, F16, BF16, I32, I8. Other safetensors dtypes (F64,
 * I64, U8, BOOL, ...) are reported as unsupported; up to OT_ST_MAX_DIMS dims.
 */
#ifndef OMPTENSOR_SAFETENSORS_H
#define OMPTENSOR_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/dtype.h"
#include "omptensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OT_ST_MAX_DIMS 4

/* One tensor of a file; owned by the file (or checkpoint) that returned it,
 * valid until it is closed. */
typedef struct ot_st_info {
  const char *name;
  ot_dtype dtype;
  int ndim;                       /* 0 (a scalar) .. OT_ST_MAX_DIMS */
  int64_t shape[OT_ST_MAX_DIMS];  /* unused dims are 1 */
  int64_t numel;
  uint64_t bytes;                 /* numel * element size */
  uint64_t offset;                /* absolute offset of the first byte in the file */
  int shard;                      /* index of the file in its checkpoint (0 for a lone file) */
} ot_st_info;

/* ---- one file ------------------------------------------------------------ */
typedef struct ot_st_file ot_st_file;

/* Opens and validates `path`. Errors: OT_ERR_NOT_FOUND (no such file),
 * OT_ERR_IO (unreadable), OT_ERR_FORMAT (truncated, header beyond the file, bad JSON, bad shape or
 * offsets: overlapping, leaving a gap or bytes after the last tensor), OT_ERR_DTYPE (unknown or unsupported dtype), OT_ERR_UNSUPPORTED
 * (more than OT_ST_MAX_DIMS dims); the message names the file, the tensor
 * and the problem. */
ot_status ot_st_open(const char *path, ot_st_file **out);
void ot_st_close(ot_st_file *f); /* NULL is fine */

const char *ot_st_path(const ot_st_file *f);
int ot_st_count(const ot_st_file *f);
/* Tensors sorted by name; i in [0, ot_st_count). */
const ot_st_info *ot_st_at(const ot_st_file *f, int i);
/* OT_ERR_NOT_FOUND (naming the file and tensor) if absent. */
ot_status ot_st_find(const ot_st_file *f, const char *name, const ot_st_info **out);
/* Value of a "__metadata__" key, or NULL. */
const char *ot_st_metadata(const ot_st_file *f, const char *key);
/* Bytes in the data section. */
uint64_t ot_st_data_bytes(const ot_st_file *f);

/* Reads the tensor's bytes into dst (any host-addressable memory: pageable,
 * pinned or managed), once, in large chunks; `bytes` must equal info->bytes
 * (OT_ERR_INVALID_ARG otherwise). Safe to call from several threads at once
 * on the same file (pread). */
ot_status ot_st_read(const ot_st_file *f, const ot_st_info *info, void *dst, size_t bytes);

/* A read-only pointer to the tensor's bytes in a private mapping of the whole
 * file (made on first use, released by ot_st_close). The data may be
 * unaligned for its dtype if the writer did not align it (ours does). The
 * first call makes the mapping: do not make it from two threads at once. */
ot_status ot_st_map(ot_st_file *f, const ot_st_info *info, const void **out);

/* ---- a checkpoint: a directory, an index.json or a lone .safetensors ------ */
typedef struct ot_ckpt ot_ckpt;

/* `path` is a directory (model.safetensors.index.json is used if present,
 * else model.safetensors), an index .json file, or a .safetensors file.
 * Every shard is opened and validated; a tensor the index puts in a shard
 * that lacks it, or a tensor in two shards, is OT_ERR_FORMAT. */
ot_status ot_ckpt_open(const char *path, ot_ckpt **out);
void ot_ckpt_close(ot_ckpt *c); /* NULL is fine */

int ot_ckpt_count(const ot_ckpt *c);                 /* tensors over all shards */
const ot_st_info *ot_ckpt_at(const ot_ckpt *c, int i); /* sorted by name */
ot_status ot_ckpt_find(const ot_ckpt *c, const char *name, const ot_st_info **out);
ot_status ot_ckpt_read(const ot_ckpt *c, const ot_st_info *info, void *dst, size_t bytes);
int ot_ckpt_num_shards(const ot_ckpt *c);
ot_st_file *ot_ckpt_shard(const ot_ckpt *c, int i);
/* The directory that holds the shards (and config.json); for a GGUF file,
 * the file. */
const char *ot_ckpt_dir(const ot_ckpt *c);
/* Whether the checkpoint is one GGUF file (ot_ckpt_open takes a path to
 * one): its tensors appear by the Hugging Face names they stand for
 * (blk.3.attn_q.weight as model.layers.3.self_attn.q_proj.weight), with
 * the dtypes of dtype.h (Q4_0 as q4b, Q4_K as q4k, Q6_K as q6k, F32/F16/
 * BF16 as themselves; Q8_0 as q8b, its f16 scales widened to f32 on read,
 * exact); llama's q and k rows come back in the Hugging Face order
 * (llama.cpp's converter interleaves each head's RoPE halves). Any other
 * ggml type is refused at open, naming the tensor and the type. */
int ot_ckpt_is_gguf(const ot_ckpt *c);

/* ---- writing ------------------------------------------------------------- */
typedef struct ot_st_tensor {
  const char *name;
  ot_dtype dtype;               /* F32, F16, BF16, I32, I8 */
  int ndim;
  int64_t shape[OT_ST_MAX_DIMS];
  const void *data;             /* numel * element size bytes, host memory */
} ot_st_tensor;

/* Writes `n` tensors (names unique, not "__metadata__") and optional
 * metadata (n_meta key/value string pairs: meta[2i] = key, meta[2i+1] =
 * value) to `path`. As the reference writer does, the header is padded so the
 * data section starts 64-byte aligned and tensors are packed without holes,
 * larger elements first (each tensor aligned to its element size). The file is written to `path`.tmp and renamed, so
 * a failed write leaves no half file behind. */
ot_status ot_st_write(const char *path, const ot_st_tensor *tensors, int n, const char *const *meta,
                      int n_meta);

#ifdef __cplusplus
}
#endif
#endif
