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

/* "device 3", or "the host" for the host device: for messages. */
const char *ot_dev_label(int dev, char buf[32]);

/* Number of OpenMP offload devices (0 on a plain host build). */
int ot_num_devices(void);

#endif
