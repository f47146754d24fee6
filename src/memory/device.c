/* device.c — device numbering and kinds. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memory/device.h"
#include "omptensor/context.h"

#ifdef OT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

int ot_num_devices(void) {
#ifdef OT_OFFLOAD
  return omp_get_num_devices();
#else
  return 0;
#endif
}

int ot_omp_device(int dev) { return dev < 0 ? omp_get_initial_device() : dev; }

int ot_dev_is_host(int dev) {
  return dev < 0 || dev >= ot_num_devices() || dev == omp_get_initial_device();
}

int ot_dev_is_gpu(int dev) {
#ifdef OT_HAVE_CUDA
  return !ot_dev_is_host(dev);
#else
  (void)dev;
  return 0;
#endif
}

int ot_dev_peer_access(int a, int b) {
  if (a == b || ot_dev_is_host(a) || ot_dev_is_host(b)) return 0;
#ifdef OT_HAVE_CUDA
  /* the OpenMP device number is the CUDA ordinal (copy.c) */
  int ab = 0, ba = 0;
  if (cudaDeviceCanAccessPeer(&ab, a, b) != cudaSuccess || cudaDeviceCanAccessPeer(&ba, b, a) != cudaSuccess) {
    cudaGetLastError(); /* not sticky */
    return 0;
  }
  return ab && ba;
#else
  return strcmp(OT_OFFLOAD_NAME, "host") == 0;
#endif
}

const char *ot_dev_label(int dev, char buf[32]) {
  if (dev < 0) return "the host";
  snprintf(buf, 32, "device %d", dev);
  return buf;
}

