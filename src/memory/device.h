/* device.h (internal) — what kind of OpenMP device a number names. */
#ifndef OT_MEMORY_DEVICE_H
#define OT_MEMORY_DEVICE_H

#include <stdint.h>

/* OpenMP device number for an omptensor device (OT_DEVICE_HOST -> the
 * initial device). */
int ot_omp_device(int dev);

/* The device is the host itself: no separate memory, moves are no-ops. */
int ot_dev_is_host(int dev);

/* The device is a real GPU driven by the CUDA runtime this build links
 * (false for the x86_64 host-offload plugin's emulated devices). */
int ot_dev_is_gpu(int dev);

/* Can a copy between devices a and b (OpenMP numbers) go from one to the
 * other directly? A CUDA build asks the driver (cudaDeviceCanAccessPeer,
 * both ways: NVLink or a PCIe switch; libomptarget's CUDA plugin then copies
 * with cuMemcpyPeer). The host-offload plugin's emulated devices are all
 * host memory: 1. Anything else (the host, one device with itself, AMD
 * GPUs, which are not asked yet): 0, and copies between them go through
 * host memory. */
int ot_dev_peer_access(int a, int b);

/* "device 3", or "the host" for the host device: for messages. */
const char *ot_dev_label(int dev, char buf[32]);

/* Number of OpenMP offload devices (0 on a plain host build). */
int ot_num_devices(void);

#endif
