/* hostmem.c — how much host memory a new allocation can have, and the check
 * that sizes taken from files (a model's weights, its KV cache) are made
 * against before they are allocated (issue 14: a config.json with huge sizes
 * allocated until the process was killed, or aborted inside the allocator).
 *
 * Available = the smallest of /proc/meminfo's MemAvailable (what the kernel
 * can hand out without swapping) and, in a container, the cgroup's limit
 * minus its usage (v2 memory.max - memory.current, v1 limit_in_bytes -
 * usage_in_bytes). Without /proc: sysconf's available physical pages. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "omptensor/memory.h"
#include "omptensor/settings.h" /* ot_size_format */

/* The first unsigned number in `path` (a one-line kernel file); 0 if none or
 * if it says "max". */
static int read_u64_file(const char *path, uint64_t *out) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char buf[64] = {0};
  int ok = fgets(buf, sizeof buf, f) != NULL;
  fclose(f);
  if (!ok || strncmp(buf, "max", 3) == 0) return 0;
  char *end;
  unsigned long long v = strtoull(buf, &end, 10);
  if (end == buf) return 0;
  *out = (uint64_t)v;
  return 1;
}

static uint64_t meminfo_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (f) {
    char line[256];
    unsigned long long kb;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
        fclose(f);
        return kb > UINT64_MAX / 1024 ? UINT64_MAX : (uint64_t)kb * 1024;
      }
    fclose(f);
  }
  long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && size > 0) return (uint64_t)pages * (uint64_t)size;
  return UINT64_MAX; /* unknown: no limit to check against */
}

/* limit - usage of the cgroup at `dir` (files `lim_name`, `use_name`), or
 * UINT64_MAX without a limit there (none, "max", or v1's huge "unlimited"). */
static uint64_t cgroup_dir_available(const char *dir, const char *lim_name, const char *use_name) {
  char p[700];
  uint64_t lim, use;
  snprintf(p, sizeof p, "%s/%s", dir, lim_name);
  if (!read_u64_file(p, &lim) || lim >= ((uint64_t)1 << 60)) return UINT64_MAX;
  snprintf(p, sizeof p, "%s/%s", dir, use_name);
  if (!read_u64_file(p, &use)) use = 0;
  return lim > use ? lim - use : 0;
}

/* The tightest limit - usage over this process's memory cgroup (v2 and v1,
 * its own folder and the mount's root), or UINT64_MAX without a limit. */
static uint64_t cgroup_available(void) {
  char v2[512] = "", v1[512] = "";
  FILE *f = fopen("/proc/self/cgroup", "r");
  if (f) { /* "0::/path" (v2), "N:memory:/path" (v1) */
    char line[512];
    while (fgets(line, sizeof line, f)) {
      line[strcspn(line, "\n")] = '\0';
      const char *c = strchr(line, ':');
      if (!strncmp(line, "0::", 3)) snprintf(v2, sizeof v2, "%s", line + 3);
      else if (c && !strncmp(c + 1, "memory:", 7)) snprintf(v1, sizeof v1, "%s", c + 8);
    }
    fclose(f);
  }
  char d[600];
  uint64_t best = UINT64_MAX, a;
  snprintf(d, sizeof d, "/sys/fs/cgroup%s", v2);
  if ((a = cgroup_dir_available(d, "memory.max", "memory.current")) < best) best = a;
  if ((a = cgroup_dir_available("/sys/fs/cgroup", "memory.max", "memory.current")) < best) best = a;
  snprintf(d, sizeof d, "/sys/fs/cgroup/memory%s", v1);
  if ((a = cgroup_dir_available(d, "memory.limit_in_bytes", "memory.usage_in_bytes")) < best) best = a;
  if ((a = cgroup_dir_available("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes")) < best)
    best = a;
  return best;
}

uint64_t ot_host_memory_available(void) {
  uint64_t a = meminfo_available(), c = cgroup_available();
  return a < c ? a : c;
}


ot_status ot_host_memory_check(uint64_t bytes, const char *what) {
  uint64_t avail = ot_host_memory_available();
  if (bytes <= avail) return OT_OK;
  char need[OT_SIZE_FORMAT_LEN], have[OT_SIZE_FORMAT_LEN];
  return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s need %s (%" PRIu64 " bytes) of host memory, but %s is available", what,
                 ot_size_format(bytes, need, sizeof need), bytes, ot_size_format(avail, have, sizeof have));
}
