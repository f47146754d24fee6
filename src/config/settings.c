/* settings.c — the settings table, precedence, environment, context options.
 *
 * One table row per setting gives its flag, environment variable and YAML
 * key and the function that parses its value, so every source goes through
 * the same validation and the same precedence rule. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "omptensor/args.h"
#include "omptensor/hfconfig.h"
#include "config/settings_internal.h"
#include "core/env.h"
#include "core/error.h"
#include "io/fileio.h"
#include "memory/device.h"

/* A parsed value before precedence decides whether it is kept. */
typedef union value {
  ot_mem_limit limit;
  ot_strategy offload;
  ot_backend backend;
  ot_usm_placement placement;
  ot_compute compute;
  int integer;
  float real;
  uint64_t u64;
  ot_dtype dtype;
  char *str;
} value;

static ot_status parse_limit(const char *v, value *out) { return ot_mem_limit_parse(v, &out->limit); }
/* One size for the host (a per-device list means nothing there). */
static ot_status parse_cpu_limit(const char *v, value *out) {
  OT_TRY(ot_mem_limit_parse(v, &out->limit));
  for (int d = 0; d < OT_MAX_DEVICES; d++)
    if (out->limit.per_device[d].kind != OT_SIZE_UNSET)
      return ot_fail(OT_ERR_INVALID_ARG, "'%s': the host has one memory; give one size (2GB, 25%%)", v);
  return OT_OK;
}
static ot_status parse_offload(const char *v, value *out) { return ot_strategy_parse(v, &out->offload); }
static ot_status parse_backend(const char *v, value *out) { return ot_backend_parse(v, &out->backend); }
static ot_status parse_placement(const char *v, value *out) { return ot_usm_placement_parse(v, &out->placement); }
static ot_status parse_compute(const char *v, value *out) { return ot_compute_parse(v, &out->compute); }
/* The weight storage types (--dtype): not every dtype the library knows (i32
 * holds ids, not weights). i8 and int8 mean the block-quantized q8b. */
static ot_status parse_dtype(const char *v, value *out) {
  ot_dtype t;
  if (ot_dtype_parse(v, &t) != OT_OK || t == OT_I32) {
    char shown[300];
    ot_option_value_shown(v, shown, sizeof shown);
    return ot_fail(OT_ERR_DTYPE,
                   "'%s' is not a weight storage type; use f32, f16, bf16, int8 (block-quantized, also q8b), int4 "
                   "(block-quantized 4-bit, GGUF's Q4_0 layout, also q4b), q4k or q6k (GGUF's Q4_K / Q6_K "
                   "super-blocks)", shown);
  }
  out->dtype = t;
  return OT_OK;
}
/* The KV caches' dtype (--kv-dtype): the float types attention reads. */
static ot_status parse_kv_dtype(const char *v, value *out) {
  ot_dtype t;
  if (ot_dtype_parse(v, &t) != OT_OK || (t != OT_F32 && t != OT_BF16 && t != OT_F16)) {
    char shown[300];
    ot_option_value_shown(v, shown, sizeof shown);
    return ot_fail(OT_ERR_DTYPE, "'%s' is not a KV cache dtype; use f32, bf16 or f16", shown);
  }
  out->dtype = t;
  return OT_OK;
}
static ot_status parse_trace(const char *v, value *out) {
  if (!v[0]) return ot_fail(OT_ERR_INVALID_ARG, "empty trace file name");
  return ot_io_strdup(v, &out->str);
}

static ot_status parse_device(const char *v, value *out) {
  int64_t d;
  if (ot_args_int(v, 0, 999999, &d) != OT_OK) {
    char shown[300];
    ot_option_value_shown(v, shown, sizeof shown);
    return ot_fail(OT_ERR_INVALID_ARG,
                   "bad device '%s' (an OpenMP device number 0, 1, ...; for no device use --backend host)", shown);
  }
  out->integer = (int)d;
  return OT_OK;
}

static ot_status parse_devices(const char *v, value *out) {
  int64_t d;
  if (ot_args_int(v, 1, OT_MAX_DEVICES, &d) != OT_OK) {
    char shown[300];
    ot_option_value_shown(v, shown, sizeof shown);
    return ot_fail(OT_ERR_INVALID_ARG, "bad device count '%s' (1 to %d consecutive devices from --device)", shown,
                   OT_MAX_DEVICES);
  }
  out->integer = (int)d;
  return OT_OK;
}

ot_status ot_settings_parse_bool(const char *v, int *out) {
  static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(v, yes[i]) == 0) return *out = 1, OT_OK;
    if (strcasecmp(v, no[i]) == 0) return *out = 0, OT_OK;
  }
  return ot_fail(OT_ERR_INVALID_ARG, "bad boolean '%s' (true/false, yes/no, on/off, 1/0)", v);
}

static ot_status parse_json(const char *v, value *out) { return ot_settings_parse_bool(v ? v : "true", &out->integer); }

/* The generation settings' ranges: those of ot_gen_opts' fields that make
 * sense (a million new tokens is past any model's positions anyway). */
static ot_status parse_int_in(const char *v, int64_t lo, int64_t hi, value *out) {
  int64_t x;
  OT_TRY(ot_args_int(v, lo, hi, &x));
  out->integer = (int)x;
  return OT_OK;
}
static ot_status parse_max_new(const char *v, value *out) { return parse_int_in(v, 0, 1000000, out); }
static ot_status parse_top_k(const char *v, value *out) { return parse_int_in(v, 0, 1000000000, out); }
static ot_status parse_temperature(const char *v, value *out) {
  double x;
  OT_TRY(ot_args_float(v, 0, 100, &x));
  out->real = (float)x;
  return OT_OK;
}
static ot_status parse_top_p(const char *v, value *out) {
  double x;
  OT_TRY(ot_args_float(v, 0, 1, &x));
  if (!((float)x > 0.0f)) /* as the sampler holds it: 1e-60 is 0 in a float */
    return ot_fail(OT_ERR_INVALID_ARG, "'%s' keeps no token; give a number above 0 and at most 1 (1 keeps all)", v);
  out->real = (float)x;
  return OT_OK;
}
static ot_status parse_seed(const char *v, value *out) { return ot_args_u64(v, 0, UINT64_MAX, &out->u64); }

static void keep(ot_settings *s, ot_setting k, value *v) {
  switch (k) {
  case OT_SET_GPU_MEMORY_LIMIT: s->gpu_memory_limit = v->limit; break;
  case OT_SET_CPU_MEMORY_LIMIT: s->cpu_memory_limit = v->limit.all; break;
  case OT_SET_OFFLOAD: s->offload = v->offload; break;
  case OT_SET_BACKEND: s->backend = v->backend; break;
  case OT_SET_DEVICE: s->device = v->integer; break;
  case OT_SET_DEVICES: s->devices = v->integer; break;
  case OT_SET_TRACE: free(s->trace_path); s->trace_path = v->str; v->str = NULL; break;
  case OT_SET_DTYPE: s->dtype = v->dtype; s->has_dtype = 1; break;
  case OT_SET_JSON: s->json = v->integer; break;
  case OT_SET_USM_PLACEMENT: s->usm_placement = v->placement; break;
  case OT_SET_COMPUTE: s->compute = v->compute; break;
  case OT_SET_MAX_NEW_TOKENS: s->gen.max_new_tokens = v->integer; break;
  case OT_SET_TEMPERATURE: s->gen.temperature = v->real; break;
  case OT_SET_TOP_K: s->gen.top_k = v->integer; break;
  case OT_SET_TOP_P: s->gen.top_p = v->real; break;
  case OT_SET_SEED: s->gen.seed = v->u64; break;
  case OT_SET_GREEDY: s->gen.greedy = v->integer; break;
  case OT_SET_IGNORE_EOS: s->gen.ignore_eos = v->integer; break;
  case OT_SET_KV_DTYPE: s->gen.kv_dtype = v->dtype; break;
  case OT_SET_COUNT: break;
  }
}

const ot_setting_def ot_setting_defs[OT_SET_COUNT] = {
    [OT_SET_GPU_MEMORY_LIMIT] = {"gpu-memory-limit", "OMPTENSOR_GPU_MEMORY_LIMIT", "memory.max_gpu_memory", "SIZE",
                                 "device memory budget: 3.5GB, 3GiB, 40% (of the device's memory), or per device "
                                 "0:20GB,1:30GB; a number without a unit is bytes",
                                 parse_limit, NULL, 0, 0},
    [OT_SET_CPU_MEMORY_LIMIT] = {"cpu-memory-limit", "OMPTENSOR_CPU_MEMORY_LIMIT", "memory.max_cpu_memory", "SIZE",
                                 "host memory budget for every host home (weights, caches, staging; in train also "
                                 "gradients and optimizer state): 2GB, 25% (of the machine's memory); a run's "
                                 "safetensors weights that do not fit are read from the checkpoint's files every "
                                 "time they are uploaded (backend map); homes beyond it are refused",
                                 parse_cpu_limit, NULL, 0, 0},
    [OT_SET_OFFLOAD] = {"offload", "OMPTENSOR_OFFLOAD", "memory.offload_strategy", "STRATEGY",
                        "none | minimal | balanced | aggressive (default balanced; --offload alone: balanced)",
                        parse_offload, "balanced", 0, 0},
    [OT_SET_BACKEND] = {"backend", "OMPTENSOR_BACKEND", "backend", "NAME", "auto | map | usm | host (default auto)",
                        parse_backend, NULL, 0, 0},
    [OT_SET_DEVICE] = {"device", "OMPTENSOR_DEVICE", "device", "N", "OpenMP device number (default 0, or the host)",
                       parse_device, NULL, 0, 0},
    [OT_SET_DEVICES] = {"devices", "OMPTENSOR_DEVICES", "devices", "N",
                        "split the model over N devices from --device, layers by budget (default 1)", parse_devices, NULL, 0, 0},
    [OT_SET_TRACE] = {"trace", "OMPTENSOR_TRACE", "trace", "FILE", "write a Chrome-trace JSON of the run", parse_trace, NULL, 0, 0},
    [OT_SET_DTYPE] = {"dtype", "OMPTENSOR_DTYPE", "dtype", "TYPE",
                      "weight storage: f32 | f16 | bf16 | int8 (block-quantized, also q8b) | int4 (4-bit blocks, also q4b) | "
                      "q4k | q6k (GGUF K-quants); a GGUF file keeps its own types unless a float one is asked for",
                      parse_dtype, NULL, 0, 0},
    [OT_SET_JSON] = {"json", "OMPTENSOR_JSON", "json", NULL, "print one JSON summary on stdout", parse_json, NULL, 0, 0},
    [OT_SET_USM_PLACEMENT] = {"usm-placement", "OMPTENSOR_USM_PLACEMENT", "memory.usm_placement", "PLACEMENT",
                              "backend usm: auto | resident | streamed | remote (default auto: by predicted time)",
                              parse_placement, NULL, 0, 0},
    [OT_SET_COMPUTE] = {"compute", "OMPTENSOR_COMPUTE", "compute", "WHERE",
                        "auto | gpu | hybrid: where ops run; hybrid also runs ops whose weights would stream on the "
                        "host's cores, reading them in host memory while PCIe streams the rest (default auto: "
                        "hybrid where the plan predicts it faster)",
                        parse_compute, NULL, 0, 0},
    [OT_SET_MAX_NEW_TOKENS] = {"max-new-tokens", "OMPTENSOR_MAX_NEW_TOKENS", "generation.max_new_tokens", "N",
                               "tokens to generate (default: generation_config.json's max_new_tokens, else 32)",
                               parse_max_new, NULL, 1, 'n'},
    [OT_SET_TEMPERATURE] = {"temperature", "OMPTENSOR_TEMPERATURE", "generation.temperature", "T",
                            "sample with temperature T (0: greedy; default: generation_config.json, else greedy)",
                            parse_temperature, NULL, 1, 0},
    [OT_SET_TOP_K] = {"top-k", "OMPTENSOR_TOP_K", "generation.top_k", "K", "sample among the K most likely tokens",
                      parse_top_k, NULL, 1, 0},
    [OT_SET_TOP_P] = {"top-p", "OMPTENSOR_TOP_P", "generation.top_p", "P",
                      "sample from the smallest set with probability >= P", parse_top_p, NULL, 1, 0},
    [OT_SET_SEED] = {"seed", "OMPTENSOR_SEED", "generation.seed", "N", "random seed for sampling (default 0)",
                     parse_seed, NULL, 1, 0},
    [OT_SET_GREEDY] = {"greedy", "OMPTENSOR_GREEDY", "generation.greedy", NULL,
                       "pick the most likely token, whatever generation_config.json's do_sample says", parse_json,
                       NULL, 1, 0},
    [OT_SET_IGNORE_EOS] = {"ignore-eos", "OMPTENSOR_IGNORE_EOS", "generation.ignore_eos", NULL,
                           "go on past the model's EOS ids to --max-new-tokens", parse_json, NULL, 1, 0},
    [OT_SET_KV_DTYPE] = {"kv-dtype", "OMPTENSOR_KV_DTYPE", "generation.kv_dtype", "TYPE",
                         "the KV caches: f32 (default) | bf16 | f16; 16 bits hold twice the sequences or positions "
                         "in a budget (attention still computes in f32)",
                         parse_kv_dtype, NULL, 1, 0},
};

void ot_settings_init(ot_settings *s) {
  memset(s, 0, sizeof *s);
  s->offload = OT_STRATEGY_BALANCED;
  s->backend = OT_BACKEND_AUTO;
  s->device = -1;
  s->dtype = OT_F32;
  s->gen.max_new_tokens = 32;
  s->gen.temperature = 1.0f;
  s->gen.top_p = 1.0f;
}

void ot_settings_release(ot_settings *s) {
  if (!s) return;
  free(s->trace_path);
  free(s->file);
  s->trace_path = s->file = NULL;
}

ot_status ot_settings_apply(ot_settings *s, ot_setting k, ot_setting_source src, const char *v) {
  value parsed;
  memset(&parsed, 0, sizeof parsed);
  if (!v && ot_setting_defs[k].metavar) return ot_fail(OT_ERR_INVALID_ARG, "no value given");
  /* No value of a setting is long (a path at most PATH_MAX, a limit for
   * every device, a word): a longer one is refused here, before a parser
   * quotes all of it in its message. */
  size_t max = k == OT_SET_TRACE ? 4096 : k == OT_SET_GPU_MEMORY_LIMIT ? 1024 : 64, len = v ? strlen(v) : 0;
  if (len > max) {
    char shown[300];
    ot_option_value_shown(v, shown, sizeof shown);
    return ot_fail(OT_ERR_INVALID_ARG, "'%s' is %zu bytes long; no value of this setting is longer than %zu", shown, len,
                   max);
  }
  OT_TRY(ot_setting_defs[k].parse(v, &parsed));
  if (src >= s->source[k]) {
    keep(s, k, &parsed);
    s->source[k] = src;
  }
  if (k == OT_SET_TRACE) free(parsed.str); /* not kept: a higher source holds it */
  return OT_OK;
}

ot_status ot_settings_set(ot_settings *s, ot_setting_source src, const char *name, const char *value) {
  if (!s || !name) return ot_fail(OT_ERR_INVALID_ARG, "ot_settings_set: NULL argument");
  const char *flag = strncmp(name, "--", 2) == 0 ? name + 2 : name;
  for (int k = 0; k < OT_SET_COUNT; k++)
    if (strcmp(flag, ot_setting_defs[k].flag) == 0) {
      ot_status st = ot_settings_apply(s, (ot_setting)k, src, value);
      return st == OT_OK ? OT_OK : ot_option_error(st, flag, value);
    }
  return ot_fail(OT_ERR_INVALID_ARG, "unknown option '--%s'", flag);
}

ot_status ot_settings_set_flag(ot_settings *s, const char *name, const char *value) {
  return ot_settings_set(s, OT_SRC_FLAG, name, value);
}

/* An OMPTENSOR_* variable that nothing reads (a typo such as
 * OMPTENSOR_GPU_MEMORY_LIMT) would leave its setting at the default without
 * a word: one notice names every such variable. */
static void unknown_variables(void) {
  extern char **environ;
  char names[512] = "";
  size_t len = 0;
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "OMPTENSOR_", 10)) continue;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
    int known = ot_env_known(name);
    for (int k = 0; k < OT_SET_COUNT && !known; k++) known = !strcmp(name, ot_setting_defs[k].env);
    if (!known && len + strlen(name) + 8 < sizeof names)
      len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "", name);
  }
  if (len)
    ot_warn_once("env-unknown", "%s: not a variable omptensor reads, ignored (the OMPTENSOR_* settings are in the "
                 "README's Configuration)", names);
}

ot_status ot_settings_load_env(ot_settings *s) {
  if (!s) return ot_fail(OT_ERR_INVALID_ARG, "ot_settings_load_env: NULL argument");
  /* the library's own variables (core/env.h) told now, at the start, not when
   * the code that reads one first runs */
  ot_env_check();
  unknown_variables();
  for (int k = 0; k < OT_SET_COUNT; k++) {
    const char *v = getenv(ot_setting_defs[k].env);
    if (!v) continue;
    ot_status st = ot_settings_apply(s, (ot_setting)k, OT_SRC_ENV, v);
    if (st != OT_OK) return ot_fail_context(st, "environment %s=%s", ot_setting_defs[k].env, v);
  }
  return OT_OK;
}

/* Where setting k's value came from, as the user would change it: the flag,
 * the environment variable, the file and key; "the default". */
static const char *source_label(const ot_settings *s, ot_setting k, char *buf, size_t n) {
  switch (s->source[k]) {
  case OT_SRC_FLAG: snprintf(buf, n, "--%s", ot_setting_defs[k].flag); break;
  case OT_SRC_ENV: snprintf(buf, n, "%s", ot_setting_defs[k].env); break;
  case OT_SRC_FILE: snprintf(buf, n, "%s: %s", s->file ? s->file : "the config file", ot_setting_defs[k].yaml); break;
  case OT_SRC_DEFAULT: snprintf(buf, n, "the default %s", ot_setting_defs[k].flag); break;
  case OT_SRC_MODEL: snprintf(buf, n, "the model's generation_config.json"); break;
  }
  return buf;
}

/* A limit for a device the run does not use would be dropped without a
 * word (a typo in the device number, or --devices forgotten): refused. The
 * run uses devices first .. first + n - 1. */
static ot_status check_limit_devices(const ot_settings *s, int first, int n) {
  for (int d = 0; d < OT_MAX_DEVICES; d++) {
    if (s->gpu_memory_limit.per_device[d].kind == OT_SIZE_UNSET || (d >= first && d < first + n)) continue;
    char where[600], used[64];
    if (n == 1) snprintf(used, sizeof used, "device %d only", first);
    else snprintf(used, sizeof used, "%d devices, %d to %d", n, first, first + n - 1);
    return ot_fail(OT_ERR_INVALID_ARG,
                   "%s: a limit for device %d, which this run does not use (it uses %s); leave it out, or run on "
                   "that device (--device FIRST, --devices N)",
                   source_label(s, OT_SET_GPU_MEMORY_LIMIT, where, sizeof where), d, used);
  }
  return OT_OK;
}

/* The budget for device dev (OpenMP number) from the limit sz: a
 * percentage of the device's memory as omptensor counts it
 * (ot_device_capacity: an emulated device's too), and never more than
 * that memory: a budget the device cannot hold is a promise broken at run
 * time, so it is refused here, naming both. */
static ot_status device_budget(const ot_settings *s, ot_size sz, int dev, uint64_t *bytes) {
  const uint64_t cap = sz.kind == OT_SIZE_UNSET ? 0 : ot_device_capacity(dev);
  char where[600];
  ot_status st = ot_size_resolve(sz, cap, bytes);
  if (st != OT_OK)
    return ot_fail_context(st, "%s, device %d", source_label(s, OT_SET_GPU_MEMORY_LIMIT, where, sizeof where), dev);
  if (cap && *bytes > cap) {
    char want[OT_SIZE_FORMAT_LEN], have[OT_SIZE_FORMAT_LEN];
    uint64_t total = 0;
    ot_device_memory(dev, NULL, &total);
    return ot_fail(OT_ERR_INVALID_ARG,
                   "%s: %llu bytes (%s) for device %d, more than its memory, %llu bytes (%s%s); give at most that, "
                   "or a percentage of it",
                   source_label(s, OT_SET_GPU_MEMORY_LIMIT, where, sizeof where), (unsigned long long)*bytes,
                   ot_size_format(*bytes, want, sizeof want), dev, (unsigned long long)cap,
                   ot_size_format(cap, have, sizeof have),
                   total ? "" : ", the size omptensor gives an emulated device");
  }
  return OT_OK;
}

ot_status ot_settings_to_ctx_opts(const ot_settings *s, ot_ctx_opts *o) {
  if (!s || !o) return ot_fail(OT_ERR_INVALID_ARG, "ot_settings_to_ctx_opts: NULL argument");
  o->backend = s->backend;
  o->device = s->device;
  if (s->devices > 0) o->n_devices = s->devices;
  /* On the host (asked for, or no offload device at all, where auto picks the
   * host) no device budget applies, so a percentage has nothing to resolve. */
  int on_host = s->backend == OT_BACKEND_HOST || ot_num_devices() == 0;
  int first = s->device < 0 ? 0 : s->device, n = o->n_devices < 1 ? 1 : o->n_devices;
  if (n > OT_MAX_DEVICES) n = OT_MAX_DEVICES;
  OT_TRY(check_limit_devices(s, first, n));
  for (int i = 0; i < n; i++) {
    ot_size sz = ot_mem_limit_for(&s->gpu_memory_limit, first + i);
    uint64_t bytes = 0;
    if (sz.kind == OT_SIZE_FRACTION && on_host) continue;
    if (!on_host && first + i >= ot_num_devices()) { /* ot_ctx_create names the devices there are */
      for (int j = i; j < n; j++) o->budgets[j] = 0; /* no value of an earlier call left behind */
      if (i == 0) o->budget_bytes = 0;
      break;
    }
    if (on_host) OT_TRY(ot_size_resolve(sz, 0, &bytes)); /* bytes: the host backend's plan budget */
    else OT_TRY(device_budget(s, sz, first + i, &bytes));
    if (i == 0) o->budget_bytes = bytes;
    o->budgets[i] = bytes;
  }
  if (s->cpu_memory_limit.kind != OT_SIZE_UNSET) {
    uint64_t total = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    char where[600];
    ot_status st = ot_size_resolve(s->cpu_memory_limit, total, &o->host_budget_bytes);
    if (st != OT_OK) return ot_fail_context(st, "%s", source_label(s, OT_SET_CPU_MEMORY_LIMIT, where, sizeof where));
  }
  return OT_OK;
}

const char *ot_setting_source_name(ot_setting_source src) {
  switch (src) {
  case OT_SRC_DEFAULT: return "default";
  case OT_SRC_MODEL: return "generation_config.json";
  case OT_SRC_FILE: return "config file";
  case OT_SRC_ENV: return "environment";
  case OT_SRC_FLAG: return "command line";
  }
  return "?";
}

/* Setting k takes v from the model where nothing higher gave it. */
#define FROM_MODEL(k, field, v)                   \
  do {                                           \
    if (s->source[k] == OT_SRC_DEFAULT) {        \
      s->gen.field = (v);                        \
      s->source[k] = OT_SRC_MODEL;               \
    }                                            \
  } while (0)

ot_status ot_settings_take_model_gen(ot_settings *s, const char *model) {
  if (!s || !model) return ot_fail(OT_ERR_INVALID_ARG, "ot_settings_take_model_gen: NULL argument");
  ot_hf_gen_config g;
  OT_TRY(ot_hf_gen_config_load(model, &g));
  if (g.has_max_new_tokens) FROM_MODEL(OT_SET_MAX_NEW_TOKENS, max_new_tokens, (int)g.max_new_tokens);
  const int user_sampling = s->source[OT_SET_TEMPERATURE] > OT_SRC_MODEL || s->source[OT_SET_TOP_K] > OT_SRC_MODEL ||
                            s->source[OT_SET_TOP_P] > OT_SRC_MODEL;
  if (g.has_do_sample && !g.do_sample && !user_sampling) FROM_MODEL(OT_SET_GREEDY, greedy, 1);
  if (g.has_do_sample && g.do_sample) { /* transformers' GenerationConfig defaults where the file has none */
    FROM_MODEL(OT_SET_TEMPERATURE, temperature, g.has_temperature ? (float)g.temperature : 1.0f);
    FROM_MODEL(OT_SET_TOP_K, top_k, g.has_top_k ? (int)g.top_k : 50);
    FROM_MODEL(OT_SET_TOP_P, top_p, g.has_top_p ? (float)g.top_p : 1.0f);
  }
  return OT_OK;
}
#undef FROM_MODEL

static void print_size(FILE *f, ot_size sz) {
  if (sz.kind == OT_SIZE_UNSET) fputs("(whole device)", f);
  else if (sz.kind == OT_SIZE_FRACTION) fprintf(f, "%g%%", sz.fraction * 100.0);
  else fprintf(f, "%llu bytes", (unsigned long long)sz.bytes);
}

void ot_settings_print(FILE *f, const ot_settings *s) {
  for (int k = 0; k < OT_SET_COUNT; k++) {
    fprintf(f, "  %-18s ", ot_setting_defs[k].flag);
    switch ((ot_setting)k) {
    case OT_SET_GPU_MEMORY_LIMIT:
      print_size(f, s->gpu_memory_limit.all);
      for (int d = 0; d < OT_MAX_DEVICES; d++)
        if (s->gpu_memory_limit.per_device[d].kind != OT_SIZE_UNSET) {
          fprintf(f, ", device %d: ", d);
          print_size(f, s->gpu_memory_limit.per_device[d]);
        }
      break;
    case OT_SET_CPU_MEMORY_LIMIT:
      if (s->cpu_memory_limit.kind == OT_SIZE_UNSET) fputs("none", f);
      else print_size(f, s->cpu_memory_limit);
      break;
    case OT_SET_OFFLOAD: fputs(ot_strategy_name(s->offload), f); break;
    case OT_SET_BACKEND: fputs(ot_backend_name(s->backend), f); break;
    case OT_SET_DEVICE: s->device < 0 ? fputs("auto", f) : fprintf(f, "%d", s->device); break;
    case OT_SET_DEVICES: fprintf(f, "%d", s->devices > 0 ? s->devices : 1); break;
    case OT_SET_TRACE: fputs(s->trace_path ? s->trace_path : "(none)", f); break;
    case OT_SET_DTYPE: fputs(s->has_dtype ? ot_dtype_name(s->dtype) : "(as stored)", f); break;
    case OT_SET_JSON: fputs(s->json ? "true" : "false", f); break;
    case OT_SET_USM_PLACEMENT: fputs(ot_usm_placement_name(s->usm_placement), f); break;
    case OT_SET_COMPUTE: fputs(ot_compute_name(s->compute), f); break;
    case OT_SET_MAX_NEW_TOKENS: fprintf(f, "%d", s->gen.max_new_tokens); break;
    case OT_SET_TEMPERATURE: fprintf(f, "%g", s->gen.temperature); break;
    case OT_SET_TOP_K: fprintf(f, "%d", s->gen.top_k); break;
    case OT_SET_TOP_P: fprintf(f, "%g", s->gen.top_p); break;
    case OT_SET_SEED: fprintf(f, "%llu", (unsigned long long)s->gen.seed); break;
    case OT_SET_GREEDY: fputs(s->gen.greedy ? "true" : "false", f); break;
    case OT_SET_IGNORE_EOS: fputs(s->gen.ignore_eos ? "true" : "false", f); break;
    case OT_SET_KV_DTYPE: fputs(ot_dtype_name(s->gen.kv_dtype), f); break;
    case OT_SET_COUNT: break;
    }
    fprintf(f, "   [%s%s%s]\n", ot_setting_source_name(s->source[k]),
            s->source[k] == OT_SRC_FILE && s->file ? " " : "", s->source[k] == OT_SRC_FILE && s->file ? s->file : "");
  }
}
