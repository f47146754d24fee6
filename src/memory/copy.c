/* copy.c — copies between host and device memory and CUDA prefetches of
 * managed memory: ot_mem_copy (memory.h) and the transfer thread's copies
 * (copy.h). */
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "memory/copy.h"
#include "memory/device.h"
#include "omptensor/context.h"
#include "omptensor/memory.h"

#ifdef OT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#ifndef OT_OFFLOAD
/* No libomptarget in a build without offload targets (space.c): every
 * device is the host. */
#define omp_target_memcpy(dst, src, n, doff, soff, ddev, sdev)                                                  \
  ((void)(doff), (void)(soff), (void)(ddev), (void)(sdev), memcpy((dst), (src), (n)), 0)
#endif

int ot_mem_copy_raw(void *dst, int dst_dev, const void *src, int src_dev, size_t bytes, char *why, size_t why_len) {
  if (bytes == 0) return 0;
  int dh = ot_dev_is_host(dst_dev), sh = ot_dev_is_host(src_dev);
  if (dh && sh) {
    memcpy(dst, src, bytes);
    return 0;
  }
  int host = omp_get_initial_device();
  int rc = omp_target_memcpy(dst, src, bytes, 0, 0, dh ? host : dst_dev, sh ? host : src_dev);
  if (rc == 0) return 0;
  snprintf(why, why_len, "omp_target_memcpy returned %d", rc);
  return -1;
}

ot_status ot_mem_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t bytes) {
  if (bytes == 0) return OT_OK;
  if (!dst || !src) return ot_fail(OT_ERR_INVALID_ARG, "ot_mem_copy: NULL pointer for %zu bytes", bytes);
  char why[64];
  if (ot_mem_copy_raw(dst, dst_dev, src, src_dev, bytes, why, sizeof why) != 0)
    return ot_fail(OT_ERR_DEVICE, "copy of %zu bytes from %s %d to %s %d failed in the OpenMP runtime", bytes,
                   ot_dev_is_host(src_dev) ? "host" : "device", src_dev, ot_dev_is_host(dst_dev) ? "host" : "device",
                   dst_dev);
  return OT_OK;
}

int ot_mem_copy_home(ot_mem_stream *s, int dev, const ot_mem_piece *p, size_t n, char *why, size_t why_len) {
#ifdef OT_HAVE_CUDA
  if (s) {
    cudaStream_t st = (cudaStream_t)s;
    cudaError_t e = cudaSuccess;
    for (size_t i = 0; i < n && e == cudaSuccess; i++)
      if (p[i].bytes) e = cudaMemcpyAsync(p[i].dst, p[i].src, p[i].bytes, cudaMemcpyDeviceToHost, st);
    /* waited for even after a failed issue: nothing may still write home when this returns */
    const cudaError_t w = cudaStreamSynchronize(st);
    if (e == cudaSuccess && w == cudaSuccess) return 0;
    cudaGetLastError();
    snprintf(why, why_len, "%s returned %d (%s)", e != cudaSuccess ? "cudaMemcpyAsync" : "cudaStreamSynchronize",
             (int)(e != cudaSuccess ? e : w), cudaGetErrorString(e != cudaSuccess ? e : w));
    return -1;
  }
#else
  (void)s;
#endif
  for (size_t i = 0; i < n; i++)
    if (ot_mem_copy_raw(p[i].dst, OT_DEVICE_HOST, p[i].src, dev, p[i].bytes, why, why_len) != 0) return -1;
  return 0;
}

/* An ot_mem_stream is the CUDA stream handle itself. */
int ot_mem_stream_create(ot_mem_stream **out) {
  *out = NULL;
#ifdef OT_HAVE_CUDA
  cudaStream_t st;
  if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) return -1;
  *out = (ot_mem_stream *)st;
#endif
  return 0;
}

void ot_mem_stream_destroy(ot_mem_stream *s) {
#ifdef OT_HAVE_CUDA
  if (s) cudaStreamDestroy((cudaStream_t)s);
#else
  (void)s;
#endif
}

void ot_mem_bind_thread(int dev) {
#ifdef OT_HAVE_CUDA
  cudaSetDevice(dev);
#else
  (void)dev;
#endif
}

int ot_mem_prefetch(ot_mem_stream *s, const void *p, size_t bytes, int dev, char *why, size_t why_len) {
  if (bytes == 0) return 0;
  int rc = -1;
#ifdef OT_HAVE_CUDA
  /* CUDA 13: cudaMemPrefetchAsync(ptr, bytes, struct cudaMemLocation, flags, stream) */
  struct cudaMemLocation loc;
  memset(&loc, 0, sizeof loc);
  loc.type = dev >= 0 ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  loc.id = dev >= 0 ? dev : 0;
  cudaStream_t st = (cudaStream_t)s;
  if (cudaMemPrefetchAsync(p, bytes, loc, 0, st) == cudaSuccess && cudaStreamSynchronize(st) == cudaSuccess) rc = 0;
#else
  (void)s, (void)p, (void)dev;
#endif
  if (rc != 0) snprintf(why, why_len, "cudaMemPrefetchAsync returned %d", rc);
  return rc;
}

/* ---- advice, discards and the probe of the usm backend ------------------
 * The OpenMP device number is the CUDA ordinal: libomptarget's CUDA plugin
 * numbers its devices as the driver does (the only plugin in a CUDA build). */

#ifdef OT_HAVE_CUDA
static struct cudaMemLocation location(int dev) {
  struct cudaMemLocation loc;
  memset(&loc, 0, sizeof loc);
  loc.type = dev >= 0 ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  loc.id = dev >= 0 ? dev : 0;
  return loc;
}

static int advise1(const void *p, size_t bytes, enum cudaMemoryAdvise a, int dev, const char *what, char *why,
                   size_t why_len) {
  cudaError_t e = cudaMemAdvise(p, bytes, a, location(dev));
  if (e == cudaSuccess) return 0;
  snprintf(why, why_len, "cudaMemAdvise(%s) returned %d (%s)", what, (int)e, cudaGetErrorString(e));
  cudaGetLastError(); /* not sticky: clear it for the next call */
  return -1;
}
#endif

int ot_mem_advise(const void *p, size_t bytes, ot_mem_advice a, int dev, char *why, size_t why_len) {
  if (!bytes) return 0;
#ifdef OT_HAVE_CUDA
  switch (a) {
  case OT_ADVISE_REMOTE:
    /* docs/gpu.md: both are needed; without accessed-by, GPU reads of
     * host-preferred pages fault (1-7 GB/s) instead of going over PCIe */
    if (advise1(p, bytes, cudaMemAdviseSetPreferredLocation, OT_DEVICE_HOST, "SetPreferredLocation host", why, why_len))
      return -1;
    return advise1(p, bytes, cudaMemAdviseSetAccessedBy, dev, "SetAccessedBy", why, why_len);
  case OT_ADVISE_LOCAL:
    if (advise1(p, bytes, cudaMemAdviseUnsetAccessedBy, dev, "UnsetAccessedBy", why, why_len)) return -1;
    return advise1(p, bytes, cudaMemAdviseUnsetPreferredLocation, OT_DEVICE_HOST, "UnsetPreferredLocation", why, why_len);
  case OT_ADVISE_READ_MOSTLY: return advise1(p, bytes, cudaMemAdviseSetReadMostly, dev, "SetReadMostly", why, why_len);
  case OT_ADVISE_DROP_DUPLICATES:
    return advise1(p, bytes, cudaMemAdviseUnsetReadMostly, dev, "UnsetReadMostly", why, why_len);
  }
  snprintf(why, why_len, "unknown memory advice %d", (int)a);
  return -1;
#else
  (void)p, (void)a, (void)dev, (void)why, (void)why_len;
  return 0;
#endif
}

/* Discarding works on whole pages: a range is shrunk to the 2 MiB pages it
 * covers entirely (a page may hold the end of one allocation and the start
 * of another, whose data must live); the ragged ends, small, are
 * prefetched home instead. */
#define OT_UVM_PAGE ((uintptr_t)2 << 20)

int ot_mem_discard(ot_mem_stream *s, const void *p, size_t bytes, char *why, size_t why_len) {
  if (!bytes) return 0;
#ifdef OT_HAVE_CUDA
  uintptr_t a = (uintptr_t)p, lo = (a + OT_UVM_PAGE - 1) & ~(OT_UVM_PAGE - 1), hi = (a + bytes) & ~(OT_UVM_PAGE - 1);
  if (hi <= lo) return ot_mem_prefetch(s, p, bytes, OT_DEVICE_HOST, why, why_len);
  if (lo > a && ot_mem_prefetch(s, p, lo - a, OT_DEVICE_HOST, why, why_len)) return -1;
  if (a + bytes > hi && ot_mem_prefetch(s, (const void *)hi, a + bytes - hi, OT_DEVICE_HOST, why, why_len)) return -1;
  void *ptr = (void *)lo;
  size_t n = hi - lo;
  cudaStream_t st = (cudaStream_t)s;
  cudaError_t e = cudaMemDiscardBatchAsync(&ptr, &n, 1, 0, st);
  if (e == cudaSuccess) e = cudaStreamSynchronize(st);
  if (e == cudaSuccess) return 0;
  cudaGetLastError();
  if (e == cudaErrorNotSupported) return ot_mem_prefetch(s, ptr, n, OT_DEVICE_HOST, why, why_len);
  snprintf(why, why_len, "cudaMemDiscardBatchAsync returned %d (%s)", (int)e, cudaGetErrorString(e));
  return -1;
#else
  (void)s, (void)p, (void)why, (void)why_len;
  return 0;
#endif
}

int ot_mem_probe_alloc(int dev, uint64_t bytes) {
#ifdef OT_HAVE_CUDA
  int old = 0;
  cudaGetDevice(&old);
  if (cudaSetDevice(dev) != cudaSuccess) return -1;
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, (size_t)bytes);
  if (e == cudaSuccess) cudaFree(p);
  else cudaGetLastError(); /* an allocation failure is not sticky; clear it */
  cudaSetDevice(old);
  return e == cudaSuccess;
#else
  (void)dev, (void)bytes;
  return -1;
#endif
}
