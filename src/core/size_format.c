/* size_format.c — a byte count as people read it (settings.h's
 * ot_size_format). Here in core, not beside ot_size_parse in config, so
 * that every layer's messages and reports (memory's host-memory check,
 * sched's trace summary, the command's reports and plots) print sizes one
 * way. */
#include <stdio.h>

#include "omptensor/settings.h"

char *ot_size_format(uint64_t bytes, char *buf, size_t n) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (!buf || !n) return buf;
  if (bytes < 1024) {
    snprintf(buf, n, "%llu B", (unsigned long long)bytes);
    return buf;
  }
  double v = (double)bytes;
  int u = 0;
  /* 1023.7 KiB would print as "1024 KiB": from 1023.5 up it is the next unit */
  while (v >= 1023.5 && u < 6) {
    v /= 1024;
    u++;
  }
  /* three significant digits: 1.50 GiB, 12.3 MiB, 195 KiB */
  int prec = v < 9.995 ? 2 : v < 99.95 ? 1 : 0;
  snprintf(buf, n, "%.*f %s", prec, v, unit[u]);
  return buf;
}
