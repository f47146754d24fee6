/* ckpt_internal.h (internal) — the checkpoint object, shared by ckpt.c
 * (safetensors shards) and ckpt_gguf.c (one GGUF file read as the same
 * table of tensors by Hugging Face names). */
#ifndef OT_IO_CKPT_INTERNAL_H
#define OT_IO_CKPT_INTERNAL_H

#include "omptensor/gguf.h"
#include "omptensor/safetensors.h"

/* How one table entry of a GGUF checkpoint is read from its file. */
typedef struct ot_ckpt_gguf_src {
  const ot_gguf_tensor *t; /* the file's tensor (its type, offset, bytes) */
  int unpermute_heads;     /* > 0: rows undo llama.cpp's q/k RoPE permutation over this many heads */
} ot_ckpt_gguf_src;

struct ot_ckpt {
  char *dir;            /* the folder of the shards; a GGUF checkpoint: the file itself */
  ot_st_file **shards;
  int n_shards;
  ot_st_info *infos;    /* [n] sorted by name; names point into the shards (GGUF: into names) */
  int n;
  /* GGUF (gg != NULL): infos[i] is read through src[i] */
  ot_gguf *gg;
  int fd;
  char **names;
  ot_ckpt_gguf_src *src;
  struct ot_disk_file **dfiles; /* [n_shards], opened on first ot_ckpt_disk_file (memory/diskfile.h) */
};

ot_status ot_ckpt_gguf_open(ot_ckpt *c, const char *path);
ot_status ot_ckpt_gguf_read(const ot_ckpt *c, const ot_st_info *info, void *dst, size_t bytes);
void ot_ckpt_gguf_free(ot_ckpt *c);

#endif
