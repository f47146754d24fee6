/* bench_common.c — see bench_common.h. */
#include "bench_common.h"

#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "omptensor/args.h"
#include "omptensor/file.h"
#include "core/error.h"
#include "kernels/kcommon.h"
#include "memory/device.h"
#include "omptensor/settings.h"
#include "ot_pragmas.h"

double bc_now(void) { return omp_get_wtime(); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bc_median(double *v, int n) {
  if (n <= 0) return 0.0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int bc_device(void) { return omp_get_num_devices() > 0 ? 0 : omp_get_initial_device(); }

const char *bc_device_kind(int dev) {
  if (ot_dev_is_host(dev)) return "host (no offload device)";
  return ot_dev_is_gpu(dev) ? "GPU" : "emulated (host-offload plugin)";
}

/* ---- fill --------------------------------------------------------------------
 * splitmix64 of (seed, index): the same values on every device and build. */
OT_DECLARE_TARGET_BEGIN
static inline uint64_t bc_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
/* uniform in [-1, 1) from the top 24 bits */
static inline float bc_unit(uint64_t h) { return (float)(h >> 40) * (2.0f / 16777216.0f) - 1.0f; }
OT_DECLARE_TARGET_END

ot_status bc_fill(int dev, void *p, ot_dtype dt, int64_t n, uint64_t seed, float amp) {
  if (n <= 0) return OT_OK;
  const uint64_t s = bc_mix(seed);
  switch (dt) {
  case OT_F32: {
    float *x = p;
    OT_PARFOR(dev, OT_DEVPTR(x))
    for (int64_t i = 0; i < n; i++) x[i] = amp * bc_unit(bc_mix(s ^ (uint64_t)i));
    return OT_OK;
  }
  case OT_F16:
  case OT_BF16: {
    uint16_t *x = p;
    const int bf = dt == OT_BF16;
    OT_PARFOR(dev, OT_DEVPTR(x))
    for (int64_t i = 0; i < n; i++) {
      const float v = amp * bc_unit(bc_mix(s ^ (uint64_t)i));
      x[i] = bf ? ot_kf32_bf16(v) : ot_kf32_f16(v);
    }
    return OT_OK;
  }
  case OT_I32: {
    int32_t *x = p;
    const uint64_t m = amp >= 1.0f ? (uint64_t)amp : 1;
    OT_PARFOR(dev, OT_DEVPTR(x))
    for (int64_t i = 0; i < n; i++) x[i] = (int32_t)(bc_mix(s ^ (uint64_t)i) % m);
    return OT_OK;
  }
  case OT_I8: {
    int8_t *x = p;
    OT_PARFOR(dev, OT_DEVPTR(x))
    for (int64_t i = 0; i < n; i++) x[i] = (int8_t)((int)(bc_mix(s ^ (uint64_t)i) % 255) - 127);
    return OT_OK;
  }
  case OT_Q8B: {
    if (n % OT_Q8B_BLOCK)
      return ot_fail(OT_ERR_SHAPE, "bench fill: %lld q8b elements is not a multiple of %d", (long long)n,
                     OT_Q8B_BLOCK);
    ot_q8b_block *b = p;
    const int64_t nb = n / OT_Q8B_BLOCK;
    const float scale = amp / 127.0f;
    OT_PARFOR(dev, OT_DEVPTR(b))
    for (int64_t i = 0; i < nb; i++) {
      b[i].scale = scale;
      for (int l = 0; l < OT_Q8B_BLOCK; l++)
        b[i].q[l] = (int8_t)((int)(bc_mix(s ^ (uint64_t)(i * OT_Q8B_BLOCK + l)) % 255) - 127);
    }
    return OT_OK;
  }
  case OT_Q4B: { /* random nibbles, one f16 scale (GGUF Q4_0's layout: dtype.h) */
    if (n % OT_Q4B_BLOCK)
      return ot_fail(OT_ERR_SHAPE, "bench fill: %lld q4b elements is not a multiple of %d", (long long)n,
                     OT_Q4B_BLOCK);
    ot_q4b_block *b = p;
    const int64_t nb = n / OT_Q4B_BLOCK;
    const uint16_t d = ot_kf32_f16(amp / 8.0f);
    OT_PARFOR(dev, OT_DEVPTR(b))
    for (int64_t i = 0; i < nb; i++) {
      b[i].d = d;
      for (int l = 0; l < OT_Q4B_BLOCK / 2; l++) b[i].qs[l] = (uint8_t)(bc_mix(s ^ (uint64_t)(i * OT_Q4B_BLOCK + l)) & 0xff);
    }
    return OT_OK;
  }
  default: return ot_fail(OT_ERR_DTYPE, "bench fill: dtype %s is not supported", ot_dtype_name(dt));
  }
}

/* ---- timing ------------------------------------------------------------------- */
ot_status bc_time(bc_call fn, void *user, int warmup, int min_reps, int max_reps, double budget_s, double *median_s,
                  int *reps) {
  int rep = 0;
  for (; rep < warmup; rep++) OT_TRY(fn(user, rep));
  if (max_reps < 1) max_reps = 1;
  if (min_reps > max_reps) min_reps = max_reps;
  double *t = malloc((size_t)max_reps * sizeof *t);
  if (!t) return ot_fail(OT_ERR_OUT_OF_MEMORY, "bench: no memory for %d times", max_reps);
  double spent = 0.0;
  int n = 0;
  ot_status s = OT_OK;
  while (n < max_reps && (n < min_reps || spent < budget_s)) {
    double t0 = bc_now();
    s = fn(user, rep++);
    t[n] = bc_now() - t0;
    if (s != OT_OK) break;
    spent += t[n++];
  }
  if (median_s) *median_s = bc_median(t, n);
  if (reps) *reps = n;
  free(t);
  return s;
}

/* ---- options -------------------------------------------------------------------- */
ot_status bc_parse_bytes(const char *opt, const char *v, uint64_t *out) {
  ot_size sz;
  if (ot_size_parse(v, &sz) != OT_OK || sz.kind != OT_SIZE_BYTES)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: '%s' is not a size in bytes (e.g. 256MiB, 2GiB, 1048576)", opt,
                   v ? v : "");
  *out = sz.bytes;
  return OT_OK;
}

ot_status bc_parse_int(const char *opt, const char *v, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long x = v ? strtol(v, &end, 10) : 0;
  if (!v || !*v || *end || errno || x < lo || x > hi)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: '%s' is not an integer in [%ld, %ld]", opt, v ? v : "", lo, hi);
  *out = x;
  return OT_OK;
}

ot_status bc_parse_double(const char *opt, const char *v, double *out) {
  char *end;
  errno = 0;
  double x = v ? strtod(v, &end) : 0.0;
  if (!v || !*v || *end || errno || !(x > 0.0))
    return ot_fail(OT_ERR_INVALID_ARG, "%s: '%s' is not a positive number", opt, v ? v : "");
  *out = x;
  return OT_OK;
}

int bc_match(const char *patterns, const char *name) {
  if (!patterns || !*patterns) return 1;
  const char *p = patterns;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len) {
      for (const char *q = name; strlen(q) >= len; q++)
        if (!strncmp(q, p, len)) return 1;
    }
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

/* The JSON lines go to memory and are written atomically at close
 * (omptensor/file.h): a run that fails or is killed leaves the old file or
 * none, never half of one. */
static struct bc_out {
  FILE *f;
  const char *path;
  char *buf;
  size_t len;
} outs[4];

ot_status bc_open_out(const char *path, FILE **out) {
  *out = NULL;
  if (!path) return OT_OK;
  if (!strcmp(path, "-")) {
    *out = stdout;
    return OT_OK;
  }
  OT_TRY(ot_file_check_output(path)); /* before the work, not after it */
  for (int i = 0; i < 4; i++)
    if (!outs[i].f) {
      outs[i].path = path;
      outs[i].f = open_memstream(&outs[i].buf, &outs[i].len);
      if (!outs[i].f) return ot_fail(OT_ERR_OUT_OF_MEMORY, "cannot buffer '%s': %s", path, strerror(errno));
      *out = outs[i].f;
      return OT_OK;
    }
  return ot_fail(OT_ERR_INVALID_ARG, "'%s': too many outputs open", path);
}

void bc_close_out(FILE *f) {
  if (!f || f == stdout) return;
  for (int i = 0; i < 4; i++)
    if (outs[i].f == f) {
      int bad = fclose(f) != 0;
      if (bad || ot_file_write(outs[i].path, outs[i].buf, outs[i].len) != OT_OK)
        fprintf(stderr, "%s\n", bad ? "cannot finish the JSON output" : ot_last_error());
      free(outs[i].buf);
      memset(&outs[i], 0, sizeof outs[i]);
      return;
    }
  fclose(f);
}

void bc_usage(const char *prog, const struct ot_opt *opts) {
  const ot_opt *tables[] = {opts, NULL};
  printf("usage: %s [options]\n", prog);
  ot_args_print_help(stdout, tables);
  exit(0);
}
