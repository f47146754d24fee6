/* settings.h — run settings from flags, environment, a YAML file, defaults.
 *
 * Precedence: flags > OMPTENSOR_* environment > YAML file > defaults, no
 * matter in which order the sources are loaded: every field remembers where
 * its value came from and a lower source never overwrites a higher one.
 *
 *     ot_settings s;
 *     ot_settings_init(&s);
 *     ot_status st = ot_settings_load_file(&s, "omptensor.yaml");        // --config
 *     if (st == OT_OK) st = ot_settings_load_env(&s);
 *     if (st == OT_OK) st = ot_settings_set_flag(&s, "gpu-memory-limit", "3.5GB");
 *     ot_ctx_opts o = ot_ctx_opts_default();
 *     if (st == OT_OK) st = ot_settings_to_ctx_opts(&s, &o);
 *     ...
 *     ot_settings_release(&s);
 *
 * The YAML file:
 *
 *     memory:
 *       offload_strategy: balanced   # none | minimal | balanced | aggressive
 *       max_gpu_memory: 3GB          # or 3GiB, 40%, 123456789 (bytes), "0:20GB,1:30GB"
 *       usm_placement: auto          # auto | resident | streamed | remote (backend usm)
 *     backend: auto                  # auto | map | usm | host
 *     compute: auto                  # auto | gpu | hybrid (ops also on the host's cores, sched.h)
 *     device: 0
 *     devices: 2                     # layers split over devices 0 and 1 (sched.h, "Several devices")
 *     trace: run.trace.json
 *     dtype: bf16
 *     json: false
 *     generation:                    # omptensor run; over the model's generation_config.json
 *       max_new_tokens: 128
 *       temperature: 0.7             # sampling (any of temperature, top_k, top_p turns it on)
 *       top_k: 40
 *       top_p: 0.9
 *       seed: 1
 *       greedy: false                # true: argmax, whatever generation_config.json says
 *       ignore_eos: false            # true: go on past the model's EOS ids
 *       kv_dtype: bf16               # the KV caches: f32 (default) | bf16 | f16 (half the bytes)
 *
 * Unknown and repeated keys (at any level: a section too) are errors naming
 * the key and line. Environment:
 * OMPTENSOR_GPU_MEMORY_LIMIT, OMPTENSOR_OFFLOAD, OMPTENSOR_BACKEND,
 * OMPTENSOR_DEVICE, OMPTENSOR_DEVICES, OMPTENSOR_TRACE, OMPTENSOR_DTYPE, OMPTENSOR_JSON,
 * OMPTENSOR_USM_PLACEMENT, OMPTENSOR_COMPUTE, OMPTENSOR_MAX_NEW_TOKENS, OMPTENSOR_TEMPERATURE,
 * OMPTENSOR_TOP_K, OMPTENSOR_TOP_P, OMPTENSOR_SEED, OMPTENSOR_GREEDY,
 * OMPTENSOR_IGNORE_EOS, OMPTENSOR_KV_DTYPE.
 */
#ifndef OMPTENSOR_SETTINGS_H
#define OMPTENSOR_SETTINGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "omptensor/context.h"
#include "omptensor/dtype.h"
#include "omptensor/sched.h"
#include "omptensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- sizes: "3.5GB" (10^9), "3GiB" (2^30), "40%", "123456789" (bytes) ---- */
typedef enum ot_size_kind { OT_SIZE_UNSET = 0, OT_SIZE_BYTES, OT_SIZE_FRACTION } ot_size_kind;

typedef struct ot_size {
  ot_size_kind kind;
  uint64_t bytes;  /* OT_SIZE_BYTES */
  double fraction; /* OT_SIZE_FRACTION: (0, 1] of the device's memory */
} ot_size;

/* Units B, KB, MB, GB, TB (powers of 1000) and KiB, MiB, GiB, TiB (powers
 * of 1024), any case, no space; a decimal fraction is allowed with a unit
 * ("1.5TB", floored to whole bytes). A number without a unit is bytes,
 * whatever its size ("3.5" is refused: not whole bytes). A percentage is in
 * (0, 100]. Zero, negative, exponent forms, more than INT64_MAX bytes (8 EiB:
 * sizes are reported as signed 64-bit JSON integers) and anything else are
 * OT_ERR_INVALID_ARG with a message quoting the string. */
ot_status ot_size_parse(const char *s, ot_size *out);

/* The other way round: `bytes` for a person to read, in the binary unit its
 * size calls for, to three significant digits: "512 B", "195 KiB",
 * "12.3 MiB", "1.50 GiB" (up to EiB). Writes at most n bytes into buf
 * (OT_SIZE_FORMAT_LEN always suffices) and returns buf, so that it can
 * stand in a printf argument list. Every size the library and the command
 * print goes through it (the memory summary, reports, plots, messages). */
#define OT_SIZE_FORMAT_LEN 16
char *ot_size_format(uint64_t bytes, char *buf, size_t n);

/* Bytes for `sz` on a device with `device_total` bytes (0 = unknown, which
 * only a fraction cares about: OT_ERR_UNSUPPORTED). */
ot_status ot_size_resolve(ot_size sz, uint64_t device_total, uint64_t *bytes);

/* A limit for every device, optionally overridden per device:
 * "20GB" or "0:20GB,1:30GB". */
typedef struct ot_mem_limit {
  ot_size all;
  ot_size per_device[OT_MAX_DEVICES];
} ot_mem_limit;

/* Each size as ot_size_parse reads it (a number without a unit is bytes). */
ot_status ot_mem_limit_parse(const char *s, ot_mem_limit *out);

/* The limit that applies to device `dev` (its own entry, else `all`). */
ot_size ot_mem_limit_for(const ot_mem_limit *l, int dev);

/* ---- the settings -------------------------------------------------------- */
typedef enum ot_setting {
  OT_SET_GPU_MEMORY_LIMIT = 0,
  OT_SET_CPU_MEMORY_LIMIT,
  OT_SET_OFFLOAD,
  OT_SET_BACKEND,
  OT_SET_DEVICE,
  OT_SET_DEVICES,
  OT_SET_TRACE,
  OT_SET_DTYPE,
  OT_SET_JSON,
  OT_SET_USM_PLACEMENT,
  OT_SET_COMPUTE,
  /* generation (omptensor run): over the model's generation_config.json */
  OT_SET_MAX_NEW_TOKENS,
  OT_SET_TEMPERATURE,
  OT_SET_TOP_K,
  OT_SET_TOP_P,
  OT_SET_SEED,
  OT_SET_GREEDY,
  OT_SET_IGNORE_EOS,
  OT_SET_KV_DTYPE,
  OT_SET_COUNT
} ot_setting;

/* What generation settings say; a field counts only where its source (in
 * ot_settings.source) is not OT_SRC_DEFAULT: otherwise the model's
 * generation_config.json, then the library's defaults, apply. */
typedef struct ot_gen_settings {
  int max_new_tokens;
  float temperature; /* sampling; 0 is greedy */
  int top_k;         /* 0: off */
  float top_p;       /* 1: off */
  uint64_t seed;
  int greedy;        /* argmax whatever generation_config.json's do_sample says */
  int ignore_eos;    /* run to max_new_tokens past EOS */
  ot_dtype kv_dtype; /* the KV caches' (ot_gen_opts.kv_dtype): f32, bf16 or f16 */
} ot_gen_settings;

/* Where a setting's value came from, lowest first: a higher source
 * overrides a lower one. OT_SRC_MODEL: the model's generation_config.json
 * (ot_settings_take_model_gen), above the defaults, below all a user gives. */
typedef enum ot_setting_source {
  OT_SRC_DEFAULT = 0,
  OT_SRC_MODEL,
  OT_SRC_FILE,
  OT_SRC_ENV,
  OT_SRC_FLAG
} ot_setting_source;

typedef struct ot_settings {
  ot_mem_limit gpu_memory_limit; /* unset: the context's default budget */
  ot_size cpu_memory_limit;      /* unset: no host budget; else ot_ctx_opts.host_budget_bytes (a % of MemTotal) */
  ot_strategy offload;           /* default balanced (sched.h) */
  ot_backend backend;            /* default auto */
  int device;                    /* default -1: device 0 if any, else the host */
  int devices;                   /* default 0 (one): devices device, device + 1, ... to split the model over */
  char *trace_path;              /* NULL: no trace */
  ot_dtype dtype;                /* meaningful when has_dtype */
  int has_dtype;
  int json;                      /* print one JSON summary on stdout */
  ot_usm_placement usm_placement; /* backend usm: default auto (sched.h) */
  ot_compute compute;            /* where ops run: default auto (sched.h, ot_compute) */
  ot_gen_settings gen;           /* omptensor run (see ot_gen_settings) */
  ot_setting_source source[OT_SET_COUNT];
  char *file;                    /* the YAML file loaded, for messages; NULL if none */
} ot_settings;

void ot_settings_init(ot_settings *s);
void ot_settings_release(ot_settings *s); /* frees the strings; s may be re-initialised */

/* Sets one setting by its flag name ("gpu-memory-limit", "offload",
 * "backend", "device", "trace", "dtype", "json"; the value of "json" may be
 * NULL, meaning true) from `src`. The value is always validated; it is kept
 * only if src is at least as high as the current source. Errors name the
 * option and the bad value: "--gpu-memory-limit: bad size '3XB': ...". */
ot_status ot_settings_set(ot_settings *s, ot_setting_source src, const char *name, const char *value);
ot_status ot_settings_set_flag(ot_settings *s, const char *name, const char *value); /* src = OT_SRC_FLAG */

/* Reads the OMPTENSOR_* variables that are set. */
ot_status ot_settings_load_env(ot_settings *s);

/* Reads a YAML file (schema above). OT_ERR_NOT_FOUND if missing,
 * OT_ERR_FORMAT for malformed YAML (with libyaml's line and column) or an
 * unknown key (with its line), OT_ERR_INVALID_ARG for a bad value. */
ot_status ot_settings_load_file(ot_settings *s, const char *path);
/* The same on a buffer; label names it in messages. */
ot_status ot_settings_load_yaml(ot_settings *s, const char *text, size_t len, const char *label);

/* Fills backend, device, n_devices (when `devices` is set) and budgets of `o`
 * (budget_bytes and budgets[0 .. o->n_devices - 1], for devices device,
 * device + 1, ...), resolving percentages against each device's memory as
 * ot_device_capacity counts it (an emulated device's 1 GiB too). Refused
 * (OT_ERR_INVALID_ARG, naming where the limit came from: the flag, the
 * variable, or the file and key): a budget larger than the device's memory,
 * and a per-device limit for a device the run does not use. With the host
 * backend, or no offload device, percentages are skipped. */
ot_status ot_settings_to_ctx_opts(const ot_settings *s, ot_ctx_opts *o);

/* The generation settings nothing higher gave take the model's
 * generation_config.json values (what generation applies, as transformers'
 * generate() does: max_new_tokens; do_sample false as greedy unless a
 * sampling setting was given; do_sample true with its temperature, top_k,
 * top_p or transformers' defaults 1, 50, 1), with source OT_SRC_MODEL, so
 * that ot_settings_print says where each came from. `model`: a model
 * directory or file (a GGUF file has none: nothing changes). */
ot_status ot_settings_take_model_gen(ot_settings *s, const char *model);

/* "default", "generation_config.json", "config file", "environment", "command line". */
const char *ot_setting_source_name(ot_setting_source src);

/* One line per setting: value and where it came from (for --verbose). */
void ot_settings_print(FILE *f, const ot_settings *s);

#ifdef __cplusplus
}
#endif
#endif
