/* space.c — one allocator interface over host, pinned, managed and device
 * memory.
 *
 * Pinned and managed memory come from libomptarget's CUDA plugin
 * (llvm_omp_target_alloc_host -> cuMemAllocHost, _shared ->
 * cuMemAllocManaged), so the build needs no CUDA runtime for them. Where no
 * GPU is present they fall back to pageable host memory and say so once:
 * everything still runs, only without asynchronous full-speed copies. */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fault.h"
#include "memory/device.h"
#include "omptensor/memory.h"

#define OT_ALIGN 256

#ifdef OT_OFFLOAD
/* libomptarget entry points (exported, not declared in omp.h). */
void *llvm_omp_target_alloc_host(size_t size, int device_num);
void *llvm_omp_target_alloc_shared(size_t size, int device_num);
void llvm_omp_target_free_host(void *ptr, int device_num);
void llvm_omp_target_free_shared(void *ptr, int device_num);
#else
/* A build without offload targets has no libomptarget (linking it anyway
 * breaks omp_get_initial_device): every device is the host, and these are
 * never reached because no space is native there. */
#define llvm_omp_target_alloc_host(n, d) ((void)(n), (void)(d), (void *)0)
#define llvm_omp_target_alloc_shared(n, d) ((void)(n), (void)(d), (void *)0)
#define llvm_omp_target_free_host(p, d) ((void)(p), (void)(d))
#define llvm_omp_target_free_shared(p, d) ((void)(p), (void)(d))
#define omp_target_alloc(n, d) ((void)(n), (void)(d), (void *)0)
#define omp_target_free(p, d) ((void)(p), (void)(d))
#endif

const char *ot_mem_space_name(ot_mem_space s) {
  static const char *const n[] = {"host", "pinned", "managed", "device"};
  return (unsigned)s < OT_MEM_SPACE_COUNT ? n[s] : "?";
}

int ot_mem_space_native(ot_mem_space s, int dev) {
  switch (s) {
  case OT_MEM_HOST: return 1;
  case OT_MEM_PINNED:
  case OT_MEM_MANAGED: return ot_dev_is_gpu(dev);
  case OT_MEM_DEVICE: return !ot_dev_is_host(dev);
  default: return 0;
  }
}

static void *host_alloc(size_t bytes) {
  size_t n = (bytes + OT_ALIGN - 1) & ~(size_t)(OT_ALIGN - 1);
  if (n < bytes) return NULL;
  void *p = aligned_alloc(OT_ALIGN, n);
  if (p) memset(p, 0, n);
  return p;
}

ot_status ot_mem_alloc(ot_mem_space s, int dev, size_t bytes, void **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_mem_alloc: out is NULL");
  *out = NULL;
  if (bytes == 0) return OT_OK;
  void *p = NULL;
  int native = ot_mem_space_native(s, dev);
  /* OMPTENSOR_FAULT (core/fault.h): fail as the driver would, same status. */
  static const int fault_kind[OT_MEM_SPACE_COUNT] = {-1, OT_FAULT_PINNED_ALLOC, OT_FAULT_MANAGED_ALLOC,
                                                     OT_FAULT_DEVICE_ALLOC};
  if ((unsigned)s < OT_MEM_SPACE_COUNT && fault_kind[s] >= 0 && ot_fault_hit((ot_fault_kind)fault_kind[s]))
    return ot_fail(s == OT_MEM_DEVICE ? OT_ERR_DEVICE_OOM : OT_ERR_OUT_OF_MEMORY,
                   "cannot allocate %zu bytes of %s memory (injected by OMPTENSOR_FAULT)", bytes,
                   ot_mem_space_name(s));
  switch (s) {
  case OT_MEM_HOST: p = host_alloc(bytes); break;
  case OT_MEM_PINNED:
    if (native) p = llvm_omp_target_alloc_host(bytes, ot_omp_device(dev));
    else {
      ot_warn_once("pinned", "no GPU: pinned host memory falls back to pageable host memory");
      p = host_alloc(bytes);
    }
    break;
  case OT_MEM_MANAGED:
    if (native) p = llvm_omp_target_alloc_shared(bytes, ot_omp_device(dev));
    else {
      ot_warn_once("managed", "no GPU: managed memory falls back to pageable host memory");
      p = host_alloc(bytes);
    }
    break;
  case OT_MEM_DEVICE:
    p = native ? omp_target_alloc(bytes, ot_omp_device(dev)) : host_alloc(bytes);
    break;
  default: return ot_fail(OT_ERR_INVALID_ARG, "ot_mem_alloc: unknown memory space %d", (int)s);
  }
  if (!p)
    return ot_fail(s == OT_MEM_DEVICE ? OT_ERR_DEVICE_OOM : OT_ERR_OUT_OF_MEMORY,
                   "cannot allocate %zu bytes of %s memory%s", bytes, ot_mem_space_name(s),
                   s == OT_MEM_HOST ? "" : " (device budget or host limits?)");
  *out = p;
  return OT_OK;
}

void ot_mem_free(ot_mem_space s, int dev, void *p) {
  if (!p) return;
  int native = ot_mem_space_native(s, dev);
  switch (s) {
  case OT_MEM_PINNED:
    if (native) { llvm_omp_target_free_host(p, ot_omp_device(dev)); return; }
    break;
  case OT_MEM_MANAGED:
    if (native) { llvm_omp_target_free_shared(p, ot_omp_device(dev)); return; }
    break;
  case OT_MEM_DEVICE:
    if (native) { omp_target_free(p, ot_omp_device(dev)); return; }
    break;
  default: break;
  }
  free(p);
}
