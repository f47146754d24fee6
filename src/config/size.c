/* size.c — memory sizes as people write them: "3.5GB", "3GiB", "40%",
 * "123456789", and per-device lists "0:20GB,1:30GB".
 *
 * One rule for every size, wherever it is given: a number without a unit is
 * bytes (as a YAML integer, Accelerate's integer max_memory and the byte
 * counts scripts compute), whatever its magnitude. It used to be gigabytes
 * below 1024 for a memory limit, so 1023 was 953 GiB and 1024 was 1 KiB.
 *
 * Parsed by hand on exact integers (not strtod, which would accept "1e999",
 * "inf", " -1", hex): a decimal mantissa M with k fraction digits times the
 * unit, divided by 10^k, in 128-bit arithmetic so overflow is detected. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config/settings_internal.h"
#include "core/error.h"
#include "omptensor/settings.h"

#define OT_SIZE_MAX_FRAC 19 /* 10^19 < 2^64 */

static const struct { const char *unit; uint64_t mult; } units[] = {
    {"", 1},          {"B", 1},           {"KB", 1000ull},        {"MB", 1000000ull},
    {"GB", 1000000000ull}, {"TB", 1000000000000ull}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20},
    {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
};

/* (s is quoted as messages show values: cut at 64 bytes, unprintable bytes as \xHH) */
static ot_status bad(const char *s, const char *why) {
  char shown[300];
  ot_option_value_shown(s, shown, sizeof shown);
  return ot_fail(OT_ERR_INVALID_ARG,
                 "bad size '%s': %s (write e.g. 3.5GB, 3GiB, 512MB, 40%% or a plain number of bytes)", shown, why);
}

static uint64_t pow10_of(int k) { /* k <= OT_SIZE_MAX_FRAC: fits */
  uint64_t p = 1;
  while (k-- > 0) p *= 10;
  return p;
}

/* digits[.digits] at the start of s: *m = all digits as an integer, *k =
 * digits after the point, *rest = what follows. */
static ot_status mantissa(const char *s, uint64_t *m, int *k, const char **rest) {
  const char *p = s;
  int frac = -1;
  *m = 0;
  if (*p == '-') return bad(s, "negative");
  if (*p < '0' || *p > '9') return bad(s, *p ? "does not start with a digit" : "empty");
  for (;; p++) {
    if (*p == '.' && frac < 0) {
      frac = 0;
      continue;
    }
    if (*p < '0' || *p > '9') break;
    if (frac >= 0 && ++frac > OT_SIZE_MAX_FRAC) return bad(s, "too many digits after the decimal point");
    if (__builtin_mul_overflow(*m, 10, m) || __builtin_add_overflow(*m, (uint64_t)(*p - '0'), m))
      return bad(s, "too large");
  }
  if (frac == 0) return bad(s, "no digit after the decimal point");
  *k = frac < 0 ? 0 : frac;
  *rest = p;
  return OT_OK;
}

ot_status ot_size_parse(const char *s, ot_size *out) {
  if (!s || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_size_parse: NULL argument");
  uint64_t m;
  int k;
  const char *rest;
  OT_TRY(mantissa(s, &m, &k, &rest));
  const uint64_t pow10 = pow10_of(k);
  if (strcmp(rest, "%") == 0) {
    double pct = (double)m / (double)pow10;
    if (pct <= 0.0) return bad(s, "must be more than 0%");
    if (pct > 100.0) return bad(s, "a percentage of the device cannot exceed 100%");
    *out = (ot_size){.kind = OT_SIZE_FRACTION, .fraction = pct / 100.0};
    return OT_OK;
  }
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcasecmp(rest, units[i].unit) != 0) continue;
    unsigned __int128 scaled = (unsigned __int128)m * units[i].mult;
    if (units[i].mult == 1 && scaled % pow10 != 0)
      return bad(s, units[i].unit[0] ? "not a whole number of bytes"
                                     : "not a whole number of bytes; a number without a unit is bytes");
    unsigned __int128 bytes = scaled / pow10;
    /* Sizes travel as signed 64-bit integers (JSON reports, trace files),
     * and 2^64-1 means "no limit" inside; 8 EiB is beyond any machine. */
    if (bytes > INT64_MAX) return bad(s, "too large (at most 9223372036854775807 bytes, 8 EiB)");
    if (bytes == 0) return bad(s, "must be at least one byte");
    *out = (ot_size){.kind = OT_SIZE_BYTES, .bytes = (uint64_t)bytes};
    return OT_OK;
  }
  char why[400], unit[300];
  ot_option_value_shown(rest, unit, sizeof unit);
  snprintf(why, sizeof why, "unknown unit '%.40s'", unit);
  return bad(s, why);
}

ot_status ot_size_resolve(ot_size sz, uint64_t device_total, uint64_t *bytes) {
  if (!bytes) return ot_fail(OT_ERR_INVALID_ARG, "ot_size_resolve: NULL argument");
  switch (sz.kind) {
  case OT_SIZE_UNSET: *bytes = 0; return OT_OK;
  case OT_SIZE_BYTES: *bytes = sz.bytes; return OT_OK;
  case OT_SIZE_FRACTION:
    if (!device_total)
      return ot_fail(OT_ERR_UNSUPPORTED,
                     "a limit of %g%% needs the device's memory size, which the runtime does not report here "
                     "(emulated or host device); give the limit in bytes, e.g. 512MB",
                     sz.fraction * 100.0);
    *bytes = (uint64_t)((double)device_total * sz.fraction);
    if (!*bytes) *bytes = 1;
    return OT_OK;
  }
  return ot_fail(OT_ERR_INVALID_ARG, "ot_size_resolve: invalid size kind %d", (int)sz.kind);
}

/* "N:SIZE" items separated by commas. */
static ot_status parse_per_device(const char *s, ot_mem_limit *out) {
  char item[128], shown[300];
  ot_option_value_shown(s, shown, sizeof shown);
  const char *p = s;
  while (1) {
    size_t n = strcspn(p, ",");
    if (n == 0 || n >= sizeof item)
      return ot_fail(OT_ERR_INVALID_ARG, "bad per-device limit '%s': %s item (write e.g. 0:20GB,1:30GB)", shown,
                     n ? "an over-long" : "an empty");
    memcpy(item, p, n);
    item[n] = '\0';
    char *colon = strchr(item, ':');
    int dev = 0;
    const char *d = item;
    for (; d < colon && *d >= '0' && *d <= '9' && dev < OT_MAX_DEVICES; d++) dev = dev * 10 + (*d - '0');
    if (!colon || d != colon || colon == item || dev >= OT_MAX_DEVICES)
      return ot_fail(OT_ERR_INVALID_ARG,
                     "bad per-device limit '%s': '%.40s' is not DEVICE:SIZE with a device 0..%d (write e.g. 0:20GB,1:30GB)",
                     shown, item, OT_MAX_DEVICES - 1);
    if (out->per_device[dev].kind != OT_SIZE_UNSET)
      return ot_fail(OT_ERR_INVALID_ARG, "bad per-device limit '%s': device %d given twice", shown, dev);
    OT_TRY(ot_size_parse(colon + 1, &out->per_device[dev]));
    if (!p[n]) return OT_OK;
    p += n + 1;
  }
}

ot_status ot_mem_limit_parse(const char *s, ot_mem_limit *out) {
  if (!s || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_mem_limit_parse: NULL argument");
  ot_mem_limit l;
  memset(&l, 0, sizeof l);
  OT_TRY(strchr(s, ':') ? parse_per_device(s, &l) : ot_size_parse(s, &l.all));
  *out = l;
  return OT_OK;
}

ot_size ot_mem_limit_for(const ot_mem_limit *l, int dev) {
  if (dev >= 0 && dev < OT_MAX_DEVICES && l->per_device[dev].kind != OT_SIZE_UNSET) return l->per_device[dev];
  return l->all;
}
