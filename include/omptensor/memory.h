/* memory.h — memory spaces, one allocator interface, and the device arena.
 *
 * Three levels, as in ggml: memory space -> buffer (an arena) -> tensor (an
 * offset in it).
 *
 *   OT_MEM_HOST     pageable malloc memory
 *   OT_MEM_PINNED   page-locked host memory (cuMemAllocHost through
 *                   libomptarget); needed for asynchronous, full-speed copies
 *   OT_MEM_MANAGED  CUDA managed ("unified") memory, reachable from host and
 *                   GPU; what `requires unified_shared_memory` needs
 *   OT_MEM_DEVICE   device memory; tensors get it from the context's arena,
 *                   which is sized by the budget
 *
 * On a machine without a CUDA device, PINNED and MANAGED fall back to host
 * memory; the first such allocation says so once (a notice: on stderr, or
 * to the handler of ot_set_notice_handler, status.h).
 */
#ifndef OMPTENSOR_MEMORY_H
#define OMPTENSOR_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ot_mem_space {
  OT_MEM_HOST = 0,
  OT_MEM_PINNED,
  OT_MEM_MANAGED,
  OT_MEM_DEVICE,
  OT_MEM_SPACE_COUNT
} ot_mem_space;

const char *ot_mem_space_name(ot_mem_space s);

/* Allocates `bytes` (aligned to 256) in space `s` on device `dev` (ignored
 * for HOST; for PINNED/MANAGED the device whose runtime allocates). Zero
 * bytes gives a NULL pointer and OT_OK. Failure gives OT_ERR_OUT_OF_MEMORY
 * or OT_ERR_DEVICE_OOM with the bytes asked in the message. */
ot_status ot_mem_alloc(ot_mem_space s, int dev, size_t bytes, void **out);

/* Frees what ot_mem_alloc gave for the same space and device; NULL is fine. */
void ot_mem_free(ot_mem_space s, int dev, void *p);

/* Copies `bytes` between host memory (dev = OT_DEVICE_HOST, or the OpenMP
 * initial device) and device memory of an OpenMP device, in any direction.
 * Synchronous. In a build without offload targets every device is the host
 * and this is memcpy. */
ot_status ot_mem_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t bytes);

/* True if `s` really is what it says on this machine (false when PINNED or
 * MANAGED fall back to pageable host memory). */
int ot_mem_space_native(ot_mem_space s, int dev);

/* Host memory a new allocation can have now, in bytes: the smallest of the
 * kernel's MemAvailable and, in a container, the cgroup's limit minus its
 * usage (UINT64_MAX when neither is known). */
uint64_t ot_host_memory_available(void);

/* OT_OK if `bytes` fit in ot_host_memory_available(); else
 * OT_ERR_OUT_OF_MEMORY with "WHAT need N of host memory, but M is
 * available" (`what` is plural: "the weights", "the KV caches"). For sizes
 * that come from files, checked before they are allocated. */
ot_status ot_host_memory_check(uint64_t bytes, const char *what);

/* File homes (a host budget, ot_ctx_opts.host_budget_bytes): how many
 * checkpoint files this process opened to read weights from with O_DIRECT
 * (past the page cache) and without (the filesystem has no O_DIRECT, or
 * OMPTENSOR_DISK_IO=buffered). */
void ot_disk_files_opened(int *direct, int *buffered);

/* ---- arena: best-fit sub-allocation of one range, with coalescing frees ----
 *
 * Pure bookkeeping over offsets [0, capacity): the planner runs it on paper
 * to find placements before anything is allocated, the executor runs it on
 * the real device range. Every block is aligned to `align` (a power of two). */
typedef struct ot_arena ot_arena;

typedef struct ot_arena_stats {
  size_t capacity;
  size_t used;          /* bytes in live blocks (after alignment) */
  size_t peak;          /* highest `used` seen */
  size_t largest_free;  /* the biggest request that would succeed now */
  int n_free_blocks;
  int n_live_blocks;
} ot_arena_stats;

ot_status ot_arena_create(size_t capacity, size_t align, ot_arena **out);
void ot_arena_destroy(ot_arena *a);

/* Best fit: the smallest free block that holds `bytes`; ties go to the lowest
 * offset. OT_ERR_DEVICE_OOM if none does; the message gives the bytes asked,
 * the bytes free and the largest free block. */
ot_status ot_arena_alloc(ot_arena *a, size_t bytes, size_t *offset);

/* Allocates exactly [offset, offset + bytes) (offset aligned): the planner
 * uses it to restore a known layout (what a plan keeps resident between
 * runs). OT_ERR_DEVICE_OOM if that range is not entirely free. */
ot_status ot_arena_alloc_at(ot_arena *a, size_t offset, size_t bytes);

/* Frees the block at `offset`, merging it with free neighbours.
 * OT_ERR_INVALID_ARG if no live block starts there. */
ot_status ot_arena_free(ot_arena *a, size_t offset);

/* Size (after alignment) of the live block at offset, or 0. */
size_t ot_arena_block_size(const ot_arena *a, size_t offset);

void ot_arena_reset(ot_arena *a);
ot_arena_stats ot_arena_get_stats(const ot_arena *a);

#ifdef __cplusplus
}
#endif
#endif
