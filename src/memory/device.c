/* device.c — device numbering and kinds. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memory/device.h"
#include "omptensor/context.h"

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

const char *ot_dev_label(int dev, char buf[32]) {
  if (dev < 0) return "the host";
  snprintf(buf, 32, "device %d", dev);
  return buf;
}

/* One number from a cgroup v2 file ("max": none); 0 if absent. */
static uint64_t cgroup_value(const char *path, int *is_max) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char buf[64] = {0};
  uint64_t v = 0;
  if (fgets(buf, sizeof buf, f)) {
    if (!strncmp(buf, "max", 3)) *is_max = 1;
    else v = strtoull(buf, NULL, 10);
  }
  fclose(f);
  return v;
}

uint64_t ot_host_memory_available(void) {
  uint64_t avail = 0;
  FILE *f = fopen("/proc/meminfo", "r");
  if (f) {
    char line[256];
    unsigned long long kb;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
        avail = (uint64_t)kb * 1024;
        break;
      }
    fclose(f);
  }
  if (!avail) {
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) avail = (uint64_t)pages * (uint64_t)page;
  }
  /* A container's limit (cgroup v2) is what this process can really have. */
  int unlimited = 0;
  uint64_t max = cgroup_value("/sys/fs/cgroup/memory.max", &unlimited);
  if (max && !unlimited) {
    int dummy = 0;
    uint64_t cur = cgroup_value("/sys/fs/cgroup/memory.current", &dummy);
    uint64_t left = max > cur ? max - cur : 0;
    if (!avail || left < avail) avail = left;
  }
  return avail;
}
