/* ckpt_disk.h (internal) — a checkpoint's shards as file homes of the
 * weights loaded from them (memory/diskfile.h; issue 23). */
#ifndef OT_IO_CKPT_DISK_H
#define OT_IO_CKPT_DISK_H

#include <stdint.h>

#include "memory/diskfile.h"
#include "omptensor/safetensors.h"

/* The shard file holding `info` as a file home, opened once per shard (the
 * checkpoint keeps a reference until it closes; each tensor homed in it
 * takes its own), and where the tensor's bytes start. A GGUF checkpoint has
 * none (its tensors are converted as they are read): OT_ERR_UNSUPPORTED. */
ot_status ot_ckpt_disk_file(const ot_ckpt *c, const ot_st_info *info, ot_disk_file **out, uint64_t *off);

#endif
