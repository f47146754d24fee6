/* context.h — the omptensor context: devices, budgets, backend, allocators.
 *
 *     ot_ctx_opts o = ot_ctx_opts_default();
 *     o.budget_bytes = 3ull << 30;      // 3 GiB on the chosen device
 *     ot_ctx *ctx;
 *     if (ot_ctx_create(&o, &ctx) != OT_OK) ... ot_last_error() ...
 *     ...
 *     ot_ctx_destroy(ctx);
 *
 * Device numbers are OpenMP device numbers (0 .. n-1). The host device (the
 * OpenMP initial device) is OT_DEVICE_HOST.
 */
#ifndef OMPTENSOR_CONTEXT_H
#define OMPTENSOR_CONTEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "omptensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OT_DEVICE_HOST (-1)
#define OT_MAX_DEVICES 16 /* OpenMP devices one context may use */

typedef enum ot_backend {
  OT_BACKEND_AUTO = 0, /* the fastest available: usm or map on a GPU, host otherwise */
  OT_BACKEND_MAP,      /* pinned host homes, target data maps/updates */
  OT_BACKEND_USM,      /* managed homes, prefetch/advise/discard */
  OT_BACKEND_HOST,     /* no device: kernels on host threads, moves are no-ops */
  OT_BACKEND_COUNT
} ot_backend;

const char *ot_backend_name(ot_backend b);
ot_status ot_backend_parse(const char *s, ot_backend *out);

typedef struct ot_ctx_opts {
  ot_backend backend;
  int device;            /* first device to use; -1: device 0 if any, else host */
  int n_devices;         /* how many consecutive devices from `device`; 0 or 1: one */
  uint64_t budget_bytes; /* per device; 0: 95 % of the memory free on a GPU, all of an emulated device's (ot_device_capacity) */
  uint64_t budgets[OT_MAX_DEVICES]; /* per-device override when non-zero (index = device - `device`) */
  int verbose;           /* print what was chosen on stderr */
  uint64_t host_budget_bytes; /* host memory for tensor homes and staging (0: no limit). With a limit (map
                                 backend only) the models' loaders home weights in their safetensors files
                                 and each plan keeps in host memory only what fits; the rest is read from
                                 the file every time it is uploaded (docs/disk.md) */
} ot_ctx_opts;

ot_ctx_opts ot_ctx_opts_default(void);

typedef struct ot_ctx ot_ctx;

ot_status ot_ctx_create(const ot_ctx_opts *opts, ot_ctx **out);
void ot_ctx_destroy(ot_ctx *ctx); /* NULL is fine */

ot_backend ot_ctx_backend(const ot_ctx *ctx);  /* the resolved backend (never AUTO) */
int ot_ctx_num_devices(const ot_ctx *ctx);     /* devices in use (>= 1; the host counts as one) */
int ot_ctx_device(const ot_ctx *ctx, int i);   /* OpenMP number of the i-th device in use */
uint64_t ot_ctx_budget(const ot_ctx *ctx, int i);
uint64_t ot_ctx_host_budget(const ot_ctx *ctx); /* ot_ctx_opts.host_budget_bytes (0: none) */
uint64_t ot_ctx_host_bytes(const ot_ctx *ctx);  /* host homes and staging rings the context holds now */

/* OpenMP offload devices the runtime reports (0 in a build without offload
 * targets, or with none found): the ranks of a job on one machine take
 * device local_rank % ot_device_count() (comm.h). */
int ot_device_count(void);

/* Device bytes free/total as the runtime reports them (0/0 when unknown). */
void ot_device_memory(int dev, uint64_t *free_bytes, uint64_t *total_bytes);

/* The memory of device dev as omptensor counts it, for budgets (a
 * percentage is of it; a budget may not exceed it): the total the runtime
 * reports for a GPU; OT_EMULATED_DEVICE_BYTES for a device that reports none
 * (the host-offload plugin's emulated devices: their default budget too);
 * 0 for the host (OT_DEVICE_HOST) or a number beyond the devices found. */
#define OT_EMULATED_DEVICE_BYTES (1ull << 30)
uint64_t ot_device_capacity(int dev);


/* What this build and machine offer, and what a context of some options
 * would get: what `omptensor info` shows (ot_info_print prints it; info
 * --json writes these fields). */
typedef struct ot_info_device {
  int gpu;           /* a GPU (else an emulated device of the host-offload plugin) */
  uint64_t total;    /* bytes the runtime reports (0: none) */
  uint64_t free;     /* free bytes it reports (0: none) */
  uint64_t capacity; /* what budgets count (ot_device_capacity) */
} ot_info_device;

typedef struct ot_info {
  const char *version;        /* ot_version() */
  const char *offload_target; /* "host", "nvptx", "amdgcn", or NULL: no offload target built in */
  int usm_build;              /* built with unified_shared_memory required */
  int cuda_linked;            /* the CUDA runtime linked */
  int n_devices;              /* OpenMP offload devices; dev[] has the first OT_MAX_DEVICES of them */
  int initial_device, host_threads;
  const char *omp_target_offload; /* OMP_TARGET_OFFLOAD, or NULL when unset */
  ot_info_device dev[OT_MAX_DEVICES];
  int map_available;          /* the map backend: an offload device exists */
  int usm_available;          /* 0: no device, 1: a GPU's managed memory, 2: emulated (no prefetch) */
  int selected;               /* a context of the options can be made: the fields below hold */
  char selected_error[512];   /* else why not */
  ot_backend backend;         /* the resolved backend */
  int n_selected;             /* devices the context uses */
  int selected_dev[OT_MAX_DEVICES]; /* their OpenMP numbers (OT_DEVICE_HOST: the host) */
  uint64_t budget[OT_MAX_DEVICES];  /* the budget of each (UINT64_MAX: no limit) */
  uint64_t host_budget;       /* ot_ctx_opts.host_budget_bytes (0: none) */
  char gpu_wait[512];         /* how the host waits for the GPUs (OMPTENSOR_GPU_WAIT) */
} ot_info;

/* Fills *out for a context of opts (NULL: the defaults). */
void ot_info_get(const ot_ctx_opts *opts, ot_info *out);

/* Prints ot_info_get's findings for people (what `omptensor info` shows). */
void ot_info_print(FILE *f, const ot_ctx_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
