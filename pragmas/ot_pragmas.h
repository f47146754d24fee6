/* ot_pragmas.h — the only place omptensor spells OpenMP directives.
 *
 * Kernels are written once against these macros and build unchanged for
 *   - a GPU offload target (nvptx64, amdgcn),
 *   - the x86_64 host-offload plugin (an emulated device whose maps copy),
 *   - plain -fopenmp, where target regions run on the host.
 *
 * Every kernel receives the device number it runs on (`dev`) and raw device
 * pointers, listed in OT_DEVPTR(...). The device may be the initial (host)
 * device: then the same region runs on host threads, which is how the `host`
 * backend executes a plan without moving data.
 *
 * Build switches (set by CMake, never by hand in a kernel):
 *   OT_USM      every TU with target code carries
 *               `#pragma omp requires unified_shared_memory` (docs/gpu.md: it must
 *               be all or none, or libomptarget aborts at start-up).
 *   OT_OFFLOAD  defined when an offload target is compiled in.
 */
#ifndef OT_PRAGMAS_H
#define OT_PRAGMAS_H

#include <omp.h>

#define OT_PRAGMA(x) _Pragma(#x)

#ifdef OT_USM
#pragma omp requires unified_shared_memory
#endif

/* Threads per team. Without thread_limit LLVM 19 compiles kernels for at
 * most 128 threads per block (docs/gpu.md); 256 is a good default for streaming
 * kernels on sm_90. */
#ifndef OT_TEAM_THREADS
#define OT_TEAM_THREADS 256
#endif

/* Pointers the kernel dereferences that are already device addresses.
 * A struct (or array) the kernel reads by value must be listed in
 * firstprivate(...): left implicit it is mapped tofrom, and under
 * `requires unified_shared_memory` a map passes the host address itself, so
 * the GPU reads the host stack (an illegal address on the H200: found by
 * the nvptx-usm build's AdamW and SGD kernels). */
#define OT_DEVPTR(...) is_device_ptr(__VA_ARGS__)

/* A 1-D data-parallel loop on device `dev`:
 *     OT_PARFOR(dev, OT_DEVPTR(x, y))
 *     for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
 * Compiles to SPMD mode (combined construct), synchronous. */
#define OT_PARFOR(dev, ...)                                                      \
  OT_PRAGMA(omp target teams distribute parallel for device(dev)                 \
            thread_limit(OT_TEAM_THREADS) __VA_ARGS__)

/* Same over a collapsed 2-D loop nest. */
#define OT_PARFOR2(dev, ...)                                                     \
  OT_PRAGMA(omp target teams distribute parallel for collapse(2) device(dev)     \
            thread_limit(OT_TEAM_THREADS) __VA_ARGS__)

/* Same over a collapsed 3-D loop nest. */
#define OT_PARFOR3(dev, ...)                                                     \
  OT_PRAGMA(omp target teams distribute parallel for collapse(3) device(dev)     \
            thread_limit(OT_TEAM_THREADS) __VA_ARGS__)

/* One team per outer index with a parallel inner loop (row-wise kernels:
 * norms, softmax). Use with OT_TEAM_FOR / OT_TEAM_REDUCE inside. */
#define OT_TEAMS(dev, nteams, ...)                                               \
  OT_PRAGMA(omp target teams distribute device(dev) num_teams(nteams)            \
            thread_limit(OT_TEAM_THREADS) __VA_ARGS__)
#define OT_TEAM_FOR OT_PRAGMA(omp parallel for)
#define OT_TEAM_REDUCE(...) OT_PRAGMA(omp parallel for reduction(__VA_ARGS__))

/* Tiled kernels: one explicit parallel region per team inside OT_TEAMS, with
 * team-shared arrays and barriers:
 *     OT_TEAMS(dev, nteams, OT_DEVPTR(a, c))
 *     for (int64_t tile = 0; tile < ntiles; tile++) {
 *       float tA[16][64];
 *       OT_TEAM_SHARED(tA)
 *       OT_TEAM_PARALLEL
 *       { int tid = OT_THREAD_ID(), nt = OT_NUM_THREADS(); ... OT_TEAM_BARRIER ... }
 *     }
 * Code must work for any team size nt (a GPU gives OT_TEAM_THREADS, a host
 * device as many threads as it has cores, maybe 1).
 * On a GPU the shared arrays go to shared memory (checked on nvptx: a static
 * .shared array, and the kernel still becomes SPMD). On host-executed devices a
 * team's locals are already shared by its threads, and libomp only warns
 * (once per team) that omp_pteam_mem_alloc "is not available". */
#if defined(__NVPTX__) || defined(__AMDGCN__)
#define OT_TEAM_SHARED(...) OT_PRAGMA(omp allocate(__VA_ARGS__) allocator(omp_pteam_mem_alloc))
#else
#define OT_TEAM_SHARED(...)
#endif
#define OT_TEAM_PARALLEL OT_PRAGMA(omp parallel)
#define OT_TEAM_BARRIER OT_PRAGMA(omp barrier)

/* Inside OT_TEAM_PARALLEL: the calling thread's number in its team,
 * 0 .. OT_NUM_THREADS() - 1, and the team's size. */
#define OT_THREAD_ID() omp_get_thread_num()
#define OT_NUM_THREADS() omp_get_num_threads()

/* A GPU kernel with an explicit grid ("bare": no OpenMP team/thread state,
 * CUDA-like indexing and warp shuffles through ot_gpu.h). Only for code
 * paths that run on a GPU device; host devices take the portable loops.
 * Scalars it reads must be firstprivate. */
#define OT_GPU_KERNEL(dev, nteams, nthreads, ...)                                \
  OT_PRAGMA(omp target teams ompx_bare num_teams(nteams) thread_limit(nthreads)  \
            device(dev) __VA_ARGS__)

/* Fully unrolls the loop that follows, whose trip count is a constant (the
 * 8 elements of a fast-path step), so that its arrays stay in registers: a
 * loop left rolled indexes them at run time, which puts them in (GPU local)
 * memory. A clang loop hint, not OpenMP. */
#define OT_UNROLL OT_PRAGMA(clang loop unroll(full))

/* A host-side critical section (named). */
#define OT_CRITICAL(name) OT_PRAGMA(omp critical(name))

/* Host-side parallel loop (references, conversion of large host buffers);
 * the _IF form runs on one thread unless `cond` holds (small buffers, where
 * starting the threads costs more than the loop). */
#define OT_HOST_PARFOR OT_PRAGMA(omp parallel for schedule(static))
#define OT_HOST_PARFOR_IF(cond) OT_PRAGMA(omp parallel for schedule(static) if (cond))
/* Host threads taking chunks of `chunk` iterations as they come free: for
 * loops that run beside a busy thread of ours (the transfer thread waiting
 * for a copy can hold a core), where a static split waits for the thread
 * that shares a core. */
#define OT_HOST_PARFOR_DYNAMIC_IF(chunk, cond) OT_PRAGMA(omp parallel for schedule(dynamic, chunk) if (cond))
/* The same with a sum into the named variables. */
#define OT_HOST_PARFOR_REDUCE(...) OT_PRAGMA(omp parallel for schedule(static) reduction(+ : __VA_ARGS__))

/* Functions called from target regions. */
#define OT_DECLARE_TARGET_BEGIN OT_PRAGMA(omp declare target)
#define OT_DECLARE_TARGET_END OT_PRAGMA(omp end declare target)

#endif /* OT_PRAGMAS_H */
