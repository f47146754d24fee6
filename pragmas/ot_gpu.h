/* ot_gpu.h — what the bare GPU kernels (OT_GPU_KERNEL, ot_pragmas.h) call
 * inside their regions: CUDA-like indexing, the block barrier and warp
 * shuffles, over LLVM's kernel-language extensions (ompx.h). Like the
 * directives, these are spelled only here.
 *
 *     OT_GPU_KERNEL(dev, nblocks, 8 * OT_WARP_SIZE, OT_DEVPTR(x) firstprivate(n))
 *     {
 *       const int tid = OT_GPU_THREAD_ID(), lane = OT_WARP_LANE(tid), warp = OT_WARP_INDEX(tid);
 *       const int64_t b = OT_GPU_BLOCK_ID();
 *       ... s += OT_WARP_SHFL_DOWN(s, o) for o = OT_WARP_SIZE / 2 ... 1 ... OT_GPU_BLOCK_SYNC(); ...
 *     }
 *
 * Warps. The kernels are written for warps of OT_WARP_SIZE = 32 lanes: the
 * host sizes the grid from it (nthreads = warps * OT_WARP_SIZE, decided on
 * the host, which cannot know the device's wavefront at compile time) and
 * the device groups threads by it. On NVIDIA a warp is the hardware's.
 * Most AMD GPUs (gfx9: MI200, MI300) run wavefronts of 64: there a warp is
 * one half of a wavefront, and every warp operation here works within it
 * (the shuffles take the width, OT_WARP_SIZE, and stay in the caller's 32
 * lanes: LLVM 19's ompx_shfl_down_sync_f honours it on amdgcn, and
 * warp_ops.h's broadcasts and butterflies index within the half). AMD's
 * wave32 GPUs (gfx10+) are warps of 32 like NVIDIA's. OT_GPU_WAVEFRONT_SIZE
 * is the target's own width (32 on nvptx, __AMDGCN_WAVEFRONT_SIZE__ on
 * amdgcn, set by -mcpu); the build stops on a GPU target whose wavefront
 * is not a multiple of OT_WARP_SIZE, and on a GPU target this file does
 * not know (give it its wavefront and shuffles first). A host device
 * (plain host, the x86_64 offload plugin) compiles these regions too but
 * never runs them: ot_kfast_gpu(dev) keeps them to GPUs; ompx.h's host
 * fallbacks of the shuffles trap. */
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

/* Lanes of a warp as the kernels use them (see above). */
#define OT_WARP_SIZE 32

#if defined(__NVPTX__)
#define OT_GPU_WAVEFRONT_SIZE 32
#elif defined(__AMDGCN__)
#define OT_GPU_WAVEFRONT_SIZE __AMDGCN_WAVEFRONT_SIZE__
#elif defined(__SPIRV__) || defined(__SPIRV32__) || defined(__SPIRV64__)
#error "ot_gpu.h: a GPU target without a wavefront size and warp shuffles here: add them (see the comment above)"
#endif
#ifdef OT_GPU_WAVEFRONT_SIZE
_Static_assert(OT_GPU_WAVEFRONT_SIZE % OT_WARP_SIZE == 0,
               "the warp operations assume warps of OT_WARP_SIZE lanes inside this target's wavefront");
#endif

/* Thread `tid`'s lane in its warp and its warp's index in the block. */
#define OT_WARP_LANE(tid) ((int)((unsigned)(tid) % OT_WARP_SIZE))
#define OT_WARP_INDEX(tid) ((int)((unsigned)(tid) / OT_WARP_SIZE))

/* Float v of the lane `delta` lanes above the caller, within its warp of
 * OT_WARP_SIZE lanes (all lanes of the warp must take part; a lane past
 * the warp's end gets its own v). */
#define OT_WARP_SHFL_DOWN(v, delta) ompx_shfl_down_sync_f(~0ull, (v), (unsigned)(delta), OT_WARP_SIZE)

/* A fence of the whole device's memory (CUDA's __threadfence): LLVM 19's
 * NVPTX back end cannot select a seq_cst __atomic_thread_fence. */
#if defined(__NVPTX__)
#define OT_GPU_FENCE() __nvvm_membar_gl()
#elif defined(__AMDGCN__)
#define OT_GPU_FENCE() __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent")
#else
#define OT_GPU_FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

/* A barrier of every block of the grid, for a persistent kernel whose
 * blocks are all resident at once (no more blocks than the GPU holds at a
 * time: a block still waiting for a slot would never arrive). `bar` points
 * to a counter in device memory that only grows: every block adds 1 per
 * barrier, and the k-th barrier of a launch waits for (the counter's value
 * at the launch) + k * (blocks). Thread 0 of each block does the atomics:
 * the fence before its arrival publishes its block's writes (ordered by the
 * block barrier before it), the fence after the wait makes the other
 * blocks' writes visible to its block (ordered by the block barrier after
 * it). The counter is read volatile: a plain load could be hoisted out of
 * the loop or served from a stale cache line. The CUDA pattern
 * (__threadfence, atomicAdd, a volatile spin) as LLVM's builtins spell it.
 * A wait past OT_GPU_GRID_SYNC_CYCLES (about 20 s: a barrier of a decode
 * step waits microseconds) traps: blocks that are not all resident (an MPS
 * client limited to part of the SMs, a GPU shared with a kernel that never
 * ends) would otherwise hang the process and the GPU silently; a trapped
 * kernel is a launch error the runtime reports. */
#define OT_GPU_GRID_SYNC_CYCLES (1ull << 35)
#define OT_GPU_GRID_SYNC(tid, bar, target)                                                                    \
  do {                                                                                                        \
    OT_GPU_BLOCK_SYNC();                                                                                      \
    if ((tid) == 0) {                                                                                         \
      OT_GPU_FENCE();                                                                                         \
      __atomic_fetch_add((bar), (uint64_t)1, __ATOMIC_RELAXED);                                               \
      const uint64_t t0_ = __builtin_readcyclecounter();                                                      \
      while (*(volatile uint64_t *)(bar) < (target))                                                          \
        if (__builtin_readcyclecounter() - t0_ > OT_GPU_GRID_SYNC_CYCLES) __builtin_trap();                   \
      OT_GPU_FENCE();                                                                                         \
    }                                                                                                         \
    OT_GPU_BLOCK_SYNC();                                                                                      \
  } while (0)

#endif /* OT_GPU_H */
