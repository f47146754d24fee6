/* gpu_activity.h — what the GPU itself ran over a window of host time:
 * every kernel and copy with its start and end on the GPU's clock, from
 * CUPTI's activity API (libcupti, loaded at run time from the CUDA
 * toolkit), summed into a busy fraction and a table per kernel.
 *
 * Why CUPTI and not ncu: ncu replays each kernel on its own, which hides
 * exactly what a decode step loses (the gaps between kernels), and takes
 * seconds per kernel. CUPTI's records come from the GPU's timestamps of the
 * kernels as they ran, with about a microsecond added per launch.
 *
 * Builds without the CUDA runtime (host, the host-offload plugin, amdgcn)
 * compile this file too; there bc_gpu_activity_start says it cannot. */
#ifndef OT_BENCH_GPU_ACTIVITY_H
#define OT_BENCH_GPU_ACTIVITY_H

#include <stdint.h>

#include "omptensor/status.h"

/* A named total: a kernel (its name is CUPTI's, the mangled OpenMP name
 * __omp_offloading_<id>_<function>_l<line>; ns the sum of its durations on
 * the GPU) or a CUDA driver function called on the host (cuLaunchKernel,
 * cuStreamSynchronize, ...: OpenMP's launches and waits, cuBLAS's, the
 * runtime's; ns the sum of the calls' host durations). */
typedef struct bc_named_sum {
  const char *name;
  int count;
  double ns;
} bc_named_sum;

typedef struct bc_gpu_window {
  int kernels, copies;
  double kernel_ns;   /* sum of kernel durations */
  double copy_ns;     /* sum of copy durations */
  double busy_ns;     /* the union of kernel and copy intervals: time the GPU was doing something */
  double span_ns;     /* first start to last end */
  int n_names;
  bc_named_sum *names; /* one per kernel name, the most time first (malloc'd) */
  int n_apis;
  bc_named_sum *apis;  /* one per driver function called, the most time first (malloc'd) */
} bc_gpu_window;

/* Starts recording (loads CUPTI on first use). OT_ERR_UNSUPPORTED, with the
 * reason, where this build has no CUDA runtime or libcupti is not found. */
ot_status bc_gpu_activity_start(void);

/* Stops recording, waits for the records of everything launched so far and
 * sums those since the start into *w. */
ot_status bc_gpu_activity_stop(bc_gpu_window *w);

void bc_gpu_window_free(bc_gpu_window *w);

/* An NVTX range around host work (push, then pop on the same thread), for
 * Nsight Compute's --nvtx --nvtx-include "NAME/": it then profiles only the
 * kernels launched inside it (a prompt's short step-kernel launches come
 * first in the launch order, so --launch-skip counted wrong: 2026-12-07).
 * No-ops in builds without the CUDA toolkit's headers. */
void bc_gpu_range_push(const char *name);
void bc_gpu_range_pop(void);

#endif
