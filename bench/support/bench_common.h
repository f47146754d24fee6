/* bench_common.h — what the benchmarks in bench/ share: timing, the device
 * they run on, filling device buffers with random data, option values.
 *
 * Benchmarks print numbers and ratios; they assert nothing. Every time is
 * the median of synchronous calls timed one by one with omp_get_wtime. */
#ifndef OT_BENCH_COMMON_H
#define OT_BENCH_COMMON_H

#include <stdint.h>
#include <stdio.h>

#include "omptensor/omptensor.h"

/* Seconds (omp_get_wtime). */
double bc_now(void);

/* Median of v[0..n) (sorts v). 0 for n == 0. */
double bc_median(double *v, int n);

/* The OpenMP device a benchmark runs on: 0 if the runtime has an offload
 * device, else the initial device (target regions on host threads). */
int bc_device(void);

/* "GPU", "emulated (host-offload plugin)" or "host (no offload device)". */
const char *bc_device_kind(int dev);

/* Fills n elements of device memory p (on OpenMP device dev) with
 * deterministic pseudo-random values from `seed`, by a kernel on dev:
 *   f32/f16/bf16  uniform in [-amp, amp)
 *   i32           integers in [0, amp)      (token ids: amp = vocab)
 *   i8            integers in [-127, 127]
 *   q8b           blocks with scale amp/127 and q in [-127, 127] (n % 32 == 0) */
ot_status bc_fill(int dev, void *p, ot_dtype dt, int64_t n, uint64_t seed, float amp);

/* A call to time; `rep` counts from 0 (warm-up calls included). */
typedef ot_status (*bc_call)(void *user, int rep);

/* Warms up with `warmup` calls, then times calls one by one until `budget_s`
 * seconds of calls or `max_reps` calls, but at least `min_reps`. *median_s
 * gets the median call time, *reps the number timed (may be NULL). */
ot_status bc_time(bc_call fn, void *user, int warmup, int min_reps, int max_reps, double budget_s, double *median_s,
                  int *reps);

/* Option values with errors that name the option. */
ot_status bc_parse_bytes(const char *opt, const char *v, uint64_t *out); /* "256MiB", "1GB", "4096" */
ot_status bc_parse_int(const char *opt, const char *v, long lo, long hi, long *out);
ot_status bc_parse_double(const char *opt, const char *v, double *out); /* > 0 */

/* --help: "usage: prog [options]" and the option table on stdout, then exit(0). */
struct ot_opt;
_Noreturn void bc_usage(const char *prog, const struct ot_opt *opts);

/* True if `name` contains one of the comma-separated substrings of
 * `patterns` (NULL or "" matches everything). */
int bc_match(const char *patterns, const char *name);

/* Opens `path` for writing ("-": stdout; NULL: returns NULL and OT_OK). A
 * file is checked at once and written atomically by bc_close_out (the old
 * file or the whole new one). */
ot_status bc_open_out(const char *path, FILE **out);
void bc_close_out(FILE *f);

#endif
