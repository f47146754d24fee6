/* ot_gpu.h — what the bare GPU kernels (OT_GPU_KERNEL, ot_pragmas.h) call
 * inside their regions: CUDA-like indexing, the block barrier and warp
 * shuffles, over LLVM's kernel-language extensions (ompx.h). Like the
 * directives, these are spelled only here.
 *
 *     OT_GPU_KERNEL(dev, nblocks, 256, OT_DEVPTR(x) firstprivate(n))
 *     {
 *       const int tid = OT_GPU_THREAD_ID(), lane = tid & 31;
 *       const int64_t b = OT_GPU_BLOCK_ID();
 *       ... s += OT_WARP_SHFL_DOWN(s, 16) ... OT_GPU_BLOCK_SYNC(); ...
 *     }
 *
 * Only meaningful in code that runs on a GPU: ompx.h's host fallbacks of
 * the shuffles trap. */
#ifndef OT_GPU_H
#define OT_GPU_H

#include <ompx.h>

#include "ot_pragmas.h"

/* Thread index within the block (x dimension) and block index in the grid. */
#define OT_GPU_THREAD_ID() ompx_thread_id_x()
#define OT_GPU_BLOCK_ID() ompx_block_id_x()

/* Barrier of the block's threads, with acquire-release ordering of memory
 * (shared arrays, OT_TEAM_SHARED). */
#define OT_GPU_BLOCK_SYNC() ompx_sync_block_acq_rel()

/* Float v of the lane `delta` lanes above the caller, within the full warp
 * of 32 lanes (all lanes must take part). */
#define OT_WARP_SHFL_DOWN(v, delta) ompx_shfl_down_sync_f(~0ull, (v), (unsigned)(delta), 32)

#endif /* OT_GPU_H */
