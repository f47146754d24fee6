/* gpu_wait.h (internal) — how the host waits for a GPU: the CUDA primary
 * context's scheduling flag.
 *
 * libomptarget's CUDA plugin activates an inactive primary context with
 * CU_CTX_SCHED_BLOCKING_SYNC, so every synchronous target region ends in
 * an interrupt-driven wait: 30 µs per launch on the H200, against 11-15 µs
 * with a spinning wait (the resident 7 GB decode went from 49 to 86
 * tokens/s; ../GPU.md "Measured 2026-12-01"). omptensor sets the flag
 * itself, before the plugin starts where it can (a constructor) and on the
 * live context at ot_ctx_create (cuCtxSetFlags), through the driver API
 * reached by dlopen("libcuda.so.1"): builds and machines without a driver
 * need nothing.
 *
 * OMPTENSOR_GPU_WAIT=spin (default) | yield | block. A spinning wait holds a
 * host core per GPU while the GPU works; yield gives the core to other
 * threads between polls; block sleeps until an interrupt (the plugin's
 * default, the slowest launches). */
#ifndef OT_MEMORY_GPU_WAIT_H
#define OT_MEMORY_GPU_WAIT_H

#include <stddef.h>

#include "omptensor/status.h"

/* Applies the mode to every CUDA device's primary context (idempotent,
 * thread-safe). OT_ERR_INVALID_ARG for a bad OMPTENSOR_GPU_WAIT; no driver,
 * or no CUDA in this build, is not an error (nothing to set). */
ot_status ot_gpu_wait_apply(void);

/* One line for `omptensor info`: the mode asked for, where from, and what
 * each device's context has now (read back from the driver). */
void ot_gpu_wait_describe(char *buf, size_t n);

#endif
