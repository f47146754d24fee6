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

/* TEMPORARY until the usm-gpu branch lands */
int ot_mem_advise(const void *p, size_t bytes, ot_mem_advice a, int dev, char *why, size_t why_len) {
  (void)p, (void)bytes, (void)a, (void)dev;
#ifdef OT_HAVE_CUDA
  snprintf(why, why_len, "memory advice is not built yet");
  return -1;
#else
  (void)why, (void)why_len;
  return 0;
#endif
}
int ot_mem_discard(ot_mem_stream *s, const void *p, size_t bytes, char *why, size_t why_len) {
  (void)s, (void)p, (void)bytes;
#ifdef OT_HAVE_CUDA
  snprintf(why, why_len, "discard is not built yet");
  return -1;
#else
  (void)why, (void)why_len;
  return 0;
#endif
}
int ot_mem_probe_alloc(int dev, uint64_t bytes) {
  (void)dev, (void)bytes;
  return -1;
}
