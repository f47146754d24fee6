/* gpu_wait.h (internal) — how the host waits for a GPU: the CUDA primary
 * context's scheduling flag.
 *
 * libomptarget's CUDA plugin activates an inactive primary context with
 * CU_CTX_SCHED_BLOCKING_SYNC, so every synchronous target region ends in
 * an interrupt-driven wait: 30 µs per launch on the H200, against 11-15 µs
 * with a spinning wait (the resident 7 GB decode went from 49 to 86
 * tokens/s; ../GPU.md "Measured 2026-12-01"). omptensor sets the flag
 * itself for the GPUs a context uses, at ot_ctx_create: before the plugin
 * starts them where it has not yet, else on the live context
 * (cuCtxSetFlags), through the driver API
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

/* OMPTENSOR_GPU_WAIT itself: OT_ERR_INVALID_ARG naming a bad value. */
ot_status ot_gpu_wait_check(void);

/* Applies the mode to the primary contexts of the CUDA devices `devs` (the
 * OpenMP device numbers of a context's GPUs, which the CUDA plugin numbers
 * as CUDA does): before the OpenMP plugin or the CUDA runtime starts them
 * where it has not yet (the plugin then keeps an active context's flag),
 * else on the live context. Idempotent, thread-safe. No driver, or no CUDA
 * in this build, is not an error (nothing to set). */
ot_status ot_gpu_wait_apply(const int *devs, int n);

/* One line for `omptensor info`: the mode asked for, where from, and what
 * each device's context has now (read back from the driver). */
void ot_gpu_wait_describe(char *buf, size_t n);

#endif
