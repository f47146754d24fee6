/* test_config_settings.c — settings from flags, environment and YAML with
 * precedence flags > env > file > defaults in any load order; YAML errors
 * with lines; context options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/env.h"
#include "memory/device.h"
#include "omptensor/settings.h"
#include "ot_testio.h"

static const char *const env_vars[] = {"OMPTENSOR_GPU_MEMORY_LIMIT", "OMPTENSOR_OFFLOAD", "OMPTENSOR_BACKEND",
                                       "OMPTENSOR_DEVICE",           "OMPTENSOR_TRACE",   "OMPTENSOR_DTYPE",
                                       "OMPTENSOR_JSON",             "OMPTENSOR_USM_PLACEMENT"};

static void clear_env(void) {
  for (size_t i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++) unsetenv(env_vars[i]);
}

static int setup(void **state) {
  clear_env();
  *state = ot_tmpdir_create();
  return 0;
}

static int teardown(void **state) {
  clear_env();
  ot_tmpdir_remove(*state);
  return 0;
}

static const char *full_yaml = "# settings for a batch job\n"
                               "memory:\n"
                               "  offload_strategy: aggressive\n"
                               "  max_gpu_memory: 3GB\n"
                               "  max_cpu_memory: 2GB\n"
                               "  usm_placement: remote\n"
                               "backend: map\n"
                               "compute: hybrid\n"
                               "device: 2\n"
                               "devices: 2\n"
                               "trace: file.trace.json\n"
                               "dtype: bf16\n"
                               "json: yes\n"
                               "generation:\n"
                               "  max_new_tokens: 64\n"
                               "  temperature: 0.7\n"
                               "  top_k: 40\n"
                               "  top_p: 0.9\n"
                               "  seed: 18446744073709551615\n"
                               "  greedy: true\n"
                               "  ignore_eos: on\n"
                               "  kv_dtype: bf16\n";

static void test_defaults(void **state) {
  (void)state;
  ot_settings s;
  ot_settings_init(&s);
  assert_int_equal(s.offload, OT_STRATEGY_BALANCED);
  assert_int_equal(s.backend, OT_BACKEND_AUTO);
  assert_int_equal(s.device, -1);
  assert_null(s.trace_path);
  assert_int_equal(s.has_dtype, 0);
  assert_int_equal(s.json, 0);
  assert_int_equal(s.compute, OT_COMPUTE_AUTO);
  assert_int_equal(s.gpu_memory_limit.all.kind, OT_SIZE_UNSET);
  for (int k = 0; k < OT_SET_COUNT; k++) assert_int_equal(s.source[k], OT_SRC_DEFAULT);
  ot_settings_release(&s);
}

static void test_yaml_file(void **state) {
  const char *dir = *state;
  ot_write_text(dir, "c.yaml", full_yaml);
  char path[4096];
  ot_settings s;
  ot_settings_init(&s);
  OT_ASSERT_OK(ot_settings_load_file(&s, ot_tmp_path(path, sizeof path, dir, "c.yaml")));
  assert_int_equal(s.offload, OT_STRATEGY_AGGRESSIVE);
  assert_int_equal(s.gpu_memory_limit.all.bytes, 3000000000ull);
  assert_int_equal(s.cpu_memory_limit.kind, OT_SIZE_BYTES);
  assert_int_equal(s.cpu_memory_limit.bytes, 2000000000ull);
  assert_int_equal(s.backend, OT_BACKEND_MAP);
  assert_int_equal(s.device, 2);
  assert_int_equal(s.devices, 2);
  assert_string_equal(s.trace_path, "file.trace.json");
  assert_int_equal(s.has_dtype, 1);
  assert_int_equal(s.dtype, OT_BF16);
  assert_int_equal(s.json, 1);
  assert_int_equal(s.usm_placement, OT_USM_REMOTE);
  assert_int_equal(s.compute, OT_COMPUTE_HYBRID);
  assert_int_equal(s.gen.max_new_tokens, 64);
  assert_true(s.gen.temperature == 0.7f && s.gen.top_p == 0.9f);
  assert_int_equal(s.gen.top_k, 40);
  assert_true(s.gen.seed == UINT64_MAX);
  assert_int_equal(s.gen.greedy, 1);
  assert_int_equal(s.gen.ignore_eos, 1);
  assert_int_equal(s.gen.kv_dtype, OT_BF16);
  for (int k = 0; k < OT_SET_COUNT; k++) assert_int_equal(s.source[k], OT_SRC_FILE);
  assert_string_equal(s.file, path);
  ot_settings_release(&s);
}

/* Each setting given by file, env and flag keeps the flag's value, whatever
 * the load order; one given by file and env keeps env's. */
static void test_precedence_any_order(void **state) {
  const char *dir = *state;
  char path[4096];
  ot_write_text(dir, "c.yaml", full_yaml);
  ot_tmp_path(path, sizeof path, dir, "c.yaml");
  setenv("OMPTENSOR_GPU_MEMORY_LIMIT", "2GiB", 1);
  setenv("OMPTENSOR_OFFLOAD", "minimal", 1);
  setenv("OMPTENSOR_TRACE", "env.json", 1);
  for (int order = 0; order < 6; order++) {
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    ot_settings s;
    ot_settings_init(&s);
    for (int step = 0; step < 3; step++) switch (perms[order][step]) {
      case 0: OT_ASSERT_OK(ot_settings_load_file(&s, path)); break;
      case 1: OT_ASSERT_OK(ot_settings_load_env(&s)); break;
      case 2:
        OT_ASSERT_OK(ot_settings_set_flag(&s, "gpu-memory-limit", "40%"));
        OT_ASSERT_OK(ot_settings_set_flag(&s, "trace", "flag.json"));
        break;
      }
    assert_int_equal(s.gpu_memory_limit.all.kind, OT_SIZE_FRACTION); /* flag */
    assert_int_equal(s.source[OT_SET_GPU_MEMORY_LIMIT], OT_SRC_FLAG);
    assert_string_equal(s.trace_path, "flag.json");                  /* flag */
    assert_int_equal(s.offload, OT_STRATEGY_MINIMAL);                 /* env over file */
    assert_int_equal(s.source[OT_SET_OFFLOAD], OT_SRC_ENV);
    assert_int_equal(s.backend, OT_BACKEND_MAP);                     /* file only */
    assert_int_equal(s.source[OT_SET_BACKEND], OT_SRC_FILE);
    ot_settings_release(&s);
  }
}

static void test_flags(void **state) {
  (void)state;
  ot_settings s;
  ot_settings_init(&s);
  OT_ASSERT_OK(ot_settings_set_flag(&s, "--backend", "host"));
  OT_ASSERT_OK(ot_settings_set_flag(&s, "offload", "None"));
  OT_ASSERT_OK(ot_settings_set_flag(&s, "json", NULL));
  OT_ASSERT_OK(ot_settings_set_flag(&s, "device", "1"));
  OT_ASSERT_OK(ot_settings_set_flag(&s, "gpu-memory-limit", "0:20GB,1:30GB"));
  assert_int_equal(s.backend, OT_BACKEND_HOST);
  assert_int_equal(s.offload, OT_STRATEGY_NONE);
  assert_int_equal(s.json, 1);
  assert_int_equal(s.device, 1);
  assert_int_equal(ot_mem_limit_for(&s.gpu_memory_limit, 1).bytes, 30000000000ull);
  /* a later flag replaces an earlier one */
  OT_ASSERT_OK(ot_settings_set_flag(&s, "gpu-memory-limit", "1GB"));
  assert_int_equal(ot_mem_limit_for(&s.gpu_memory_limit, 1).bytes, 1000000000ull);

  OT_ASSERT_ERR(ot_settings_set_flag(&s, "gpu-memory-limit", "3XB"), OT_ERR_INVALID_ARG, "--gpu-memory-limit",
                "bad size '3XB'");
  OT_ASSERT_ERR(ot_settings_set_flag(&s, "offload", "lazy"), OT_ERR_INVALID_ARG, "--offload", "'lazy'");
  OT_ASSERT_ERR(ot_settings_set_flag(&s, "backend", "cuda"), OT_ERR_INVALID_ARG, "--backend", "cuda");
  OT_ASSERT_ERR(ot_settings_set_flag(&s, "device", "-1"), OT_ERR_INVALID_ARG, "--device", "bad device '-1'");
  OT_ASSERT_ERR(ot_settings_set_flag(&s, "dtype", "f64"), OT_ERR_DTYPE, "--dtype", "f64");
  /* a KV cache is a float type attention reads: int8 is a weight type only */
  OT_ASSERT_ERR(ot_settings_set_flag(&s, "kv-dtype", "int8"), OT_ERR_DTYPE, "--kv-dtype", "'int8' is not a KV cache dtype");
  OT_ASSERT_ERR(ot_settings_set_flag(&s, "trace", ""), OT_ERR_INVALID_ARG, "--trace", "empty");
  OT_ASSERT_ERR(ot_settings_set_flag(&s, "json", "maybe"), OT_ERR_INVALID_ARG, "--json", "maybe");
  OT_ASSERT_ERR(ot_settings_set_flag(&s, "gpu-memory", "1GB"), OT_ERR_INVALID_ARG, "unknown option '--gpu-memory'");
  OT_ASSERT_ERR(ot_settings_set_flag(&s, "offload", NULL), OT_ERR_INVALID_ARG, "--offload", "no value");
  /* failed sets changed nothing */
  assert_int_equal(s.offload, OT_STRATEGY_NONE);
  assert_int_equal(s.device, 1);
  ot_settings_release(&s);
}

static void test_env_errors(void **state) {
  (void)state;
  ot_settings s;
  ot_settings_init(&s);
  setenv("OMPTENSOR_GPU_MEMORY_LIMIT", "-1GB", 1);
  OT_ASSERT_ERR(ot_settings_load_env(&s), OT_ERR_INVALID_ARG, "OMPTENSOR_GPU_MEMORY_LIMIT=-1GB", "negative");
  setenv("OMPTENSOR_GPU_MEMORY_LIMIT", "512MiB", 1);
  setenv("OMPTENSOR_BACKEND", "tpu", 1);
  OT_ASSERT_ERR(ot_settings_load_env(&s), OT_ERR_INVALID_ARG, "OMPTENSOR_BACKEND=tpu");
  unsetenv("OMPTENSOR_BACKEND");
  OT_ASSERT_OK(ot_settings_load_env(&s));
  assert_int_equal(s.gpu_memory_limit.all.bytes, 512ull << 20);
  ot_settings_release(&s);
}

/* The notices of this process (ot_set_notice_handler), one per line. */
static char notices[4096];
static void on_notice(void *user, const char *m) {
  (void)user;
  size_t n = strlen(notices);
  snprintf(notices + n, sizeof notices - n, "%s\n", m);
}

/* Issue 43: junk in the library's own variables (OMPTENSOR_DEBUG,
 * OMPTENSOR_DISK_IO, ...) was a silent default, and a misspelt OMPTENSOR_*
 * name went unnoticed: each is one notice naming the variable, the value
 * and what it takes, once, at ot_settings_load_env. */
static void test_env_junk_noticed(void **state) {
  (void)state;
  ot_set_notice_handler(on_notice, NULL);
  notices[0] = '\0';
  setenv("OMPTENSOR_DISK_IO", "direkt", 1);
  setenv("OMPTENSOR_DEBUG", "io,plan", 1);
  setenv("OMPTENSOR_GEMV_GRID", "-3", 1);
  setenv("OMPTENSOR_GPU_MEMORY_LIMT", "1GB", 1);
  ot_settings s;
  ot_settings_init(&s);
  OT_ASSERT_OK(ot_settings_load_env(&s)); /* notices, not errors */
  static const char *const want[] = {
      "OMPTENSOR_DISK_IO='direkt' ignored: use direct", "OMPTENSOR_DEBUG='io,plan' ignored: use plan",
      "OMPTENSOR_GEMV_GRID='-3' ignored", "OMPTENSOR_GPU_MEMORY_LIMT: not a variable omptensor reads"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(notices, want[i])) fail_msg("no notice '%s'; the notices:\n%s", want[i], notices);
  int lines = 0;
  for (const char *p = notices; *p; p++) lines += *p == '\n';
  assert_int_equal(lines, 4); /* one line each */
  /* the readers read them as the notices say, and say nothing twice */
  notices[0] = '\0';
  assert_int_equal(ot_env_choice("OMPTENSOR_DISK_IO", 0), 0);
  assert_int_equal(ot_env_word("OMPTENSOR_DEBUG", "plan"), 1);
  assert_int_equal(ot_env_word("OMPTENSOR_DEBUG", "probe"), 0);
  assert_int_equal(ot_env_int("OMPTENSOR_GEMV_GRID", 0), 0);
  assert_string_equal(notices, "");
  setenv("OMPTENSOR_DISK_IO", "Buffered", 1);
  setenv("OMPTENSOR_DEBUG", "probe,plan", 1);
  setenv("OMPTENSOR_GEMV_GRID", "12", 1);
  assert_int_equal(ot_env_choice("OMPTENSOR_DISK_IO", 0), 1);
  assert_int_equal(ot_env_word("OMPTENSOR_DEBUG", "probe"), 1);
  assert_int_equal(ot_env_int("OMPTENSOR_GEMV_GRID", 0), 12);
  static const char *const vars[] = {"OMPTENSOR_DISK_IO", "OMPTENSOR_DEBUG", "OMPTENSOR_GEMV_GRID",
                                     "OMPTENSOR_GPU_MEMORY_LIMT"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
  ot_set_notice_handler(NULL, NULL);
  ot_settings_release(&s);
}

static ot_status load(ot_settings *s, const char *text) {
  return ot_settings_load_yaml(s, text, strlen(text), "conf.yaml");
}

static void test_yaml_errors(void **state) {
  (void)state;
  struct {
    const char *text;
    ot_status want;
    const char *sub1, *sub2;
  } cases[] = {
      {"memory:\n  offload_strategy: balanced\n  max_gpu_memory: 3XB\n", OT_ERR_INVALID_ARG,
       "conf.yaml:3: memory.max_gpu_memory", "bad size '3XB'"},
      {"memory:\n  offload: balanced\n", OT_ERR_FORMAT, "conf.yaml:2: unknown key 'memory.offload'",
       "expected max_gpu_memory, max_cpu_memory, offload_strategy"},
      {"backend: map\ngpus: 2\n", OT_ERR_FORMAT, "conf.yaml:2: unknown key 'gpus'", "memory, backend"},
      {"memory:\n  max_gpu_memory: 3GB\n max: 1\n", OT_ERR_FORMAT, "conf.yaml:3:", "malformed YAML"},
      {"memory: [1, 2\n", OT_ERR_FORMAT, "conf.yaml:2:1: malformed YAML", "flow sequence"},
      {"backend: \"map\n", OT_ERR_FORMAT, "conf.yaml:", "malformed YAML"},
      {"memory: 3GB\n", OT_ERR_FORMAT, "conf.yaml:1: 'memory' must be a mapping", ""},
      {"backend: [map, usm]\n", OT_ERR_FORMAT, "conf.yaml:1: 'backend' must be a single value, not a list", ""},
      {"backend: map\nbackend: usm\n", OT_ERR_FORMAT, "conf.yaml:2: 'backend' given twice", "first at line 1"},
      /* issue 43: a repeated key is refused at every level, a section too
       * (its two mappings were merged) */
      {"memory:\n  max_gpu_memory: 1GB\nbackend: map\nmemory:\n  offload_strategy: minimal\n", OT_ERR_FORMAT,
       "conf.yaml:4: 'memory' given twice", "first at line 1"},
      {"memory:\n  max_gpu_memory: 1GB\n  offload_strategy: minimal\n  max_gpu_memory: 2GB\n", OT_ERR_FORMAT,
       "conf.yaml:4: 'memory.max_gpu_memory' given twice", "first at line 2"},
      {"generation:\n  seed: 1\ngeneration:\n", OT_ERR_FORMAT, "conf.yaml:3: 'generation' given twice", ""},
      {"memory:\nmemory: {max_gpu_memory: 1GB}\n", OT_ERR_FORMAT, "conf.yaml:2: 'memory' given twice", ""},
      {"{backend: map, json: true, backend: usm}", OT_ERR_FORMAT, "conf.yaml:1: 'backend' given twice", ""},
      {"- backend\n- map\n", OT_ERR_FORMAT, "conf.yaml:1: the configuration must be a mapping", ""},
      {"backend: map\n---\nbackend: usm\n", OT_ERR_FORMAT, "conf.yaml:3: a second YAML document", ""},
      {"device: two\n", OT_ERR_INVALID_ARG, "conf.yaml:1: device", "bad device 'two'"},
      {"memory:\n  offload_strategy: fast\n", OT_ERR_INVALID_ARG, "conf.yaml:2: memory.offload_strategy", "'fast'"},
      {"[1, 2]: x\n", OT_ERR_FORMAT, "conf.yaml:1: a key must be a plain name", ""},
      {"\t- x", OT_ERR_FORMAT, "conf.yaml:1:", "malformed YAML"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ot_settings s;
    ot_settings_init(&s);
    OT_ASSERT_ERR(load(&s, cases[i].text), cases[i].want, cases[i].sub1, cases[i].sub2);
    ot_settings_release(&s);
  }
  ot_settings s;
  ot_settings_init(&s);
  OT_ASSERT_ERR(ot_settings_load_file(&s, "/nonexistent/omptensor.yaml"), OT_ERR_NOT_FOUND,
                "/nonexistent/omptensor.yaml");
  ot_settings_release(&s);
}

static void test_yaml_lenient_forms(void **state) {
  (void)state;
  ot_settings s;
  ot_settings_init(&s);
  OT_ASSERT_OK(load(&s, ""));                         /* empty file */
  OT_ASSERT_OK(load(&s, "# only a comment\n"));
  OT_ASSERT_OK(load(&s, "memory:\n  max_gpu_memory: ~\ntrace:\n")); /* nulls set nothing */
  assert_int_equal(s.source[OT_SET_GPU_MEMORY_LIMIT], OT_SRC_DEFAULT);
  assert_null(s.trace_path);
  OT_ASSERT_OK(load(&s, "{memory: {max_gpu_memory: \"0:1GB,1:2GB\"}, backend: usm}")); /* flow style */
  assert_int_equal(ot_mem_limit_for(&s.gpu_memory_limit, 1).bytes, 2000000000ull);
  assert_int_equal(s.backend, OT_BACKEND_USM);
  OT_ASSERT_OK(load(&s, "memory:\n  max_gpu_memory: 123456789\n")); /* a YAML integer is bytes */
  assert_int_equal(s.gpu_memory_limit.all.bytes, 123456789ull);
  ot_settings_release(&s);
}

/* The usm placement from each source, precedence, and a bad value named. */
static void test_usm_placement(void **state) {
  (void)state;
  ot_settings s;
  ot_settings_init(&s);
  assert_int_equal(s.usm_placement, OT_USM_AUTO);
  OT_ASSERT_OK(load(&s, "memory:\n  usm_placement: streamed\n"));
  assert_int_equal(s.usm_placement, OT_USM_STREAMED);
  assert_int_equal(s.source[OT_SET_USM_PLACEMENT], OT_SRC_FILE);
  OT_ASSERT_OK(ot_settings_set_flag(&s, "usm-placement", "remote"));
  assert_int_equal(s.usm_placement, OT_USM_REMOTE);
  OT_ASSERT_OK(load(&s, "memory:\n  usm_placement: resident\n")); /* a file never overrides a flag */
  assert_int_equal(s.usm_placement, OT_USM_REMOTE);
  assert_int_equal(ot_settings_set_flag(&s, "usm-placement", "sideways"), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "unknown usm placement 'sideways' (use auto, resident, streamed or remote)"));
  assert_int_equal(s.usm_placement, OT_USM_REMOTE);
  ot_settings_release(&s);
}

static void test_ctx_opts(void **state) {
  (void)state;
  ot_settings s;
  ot_settings_init(&s);
  ot_ctx_opts o = ot_ctx_opts_default();
  OT_ASSERT_OK(ot_settings_set_flag(&s, "gpu-memory-limit", "0:100MB,1:200MiB"));
  OT_ASSERT_OK(ot_settings_set_flag(&s, "backend", "map"));
  o.n_devices = 2;
  /* A device the machine lacks gets no budget here (ot_ctx_create names the
   * devices there are): a machine with one GPU fills only budgets[0]. With
   * no device at all (the host build) every budget is a plan budget. */
  const uint64_t dev1 = ot_num_devices() == 1 ? 0 : 200ull << 20;
  OT_ASSERT_OK(ot_settings_to_ctx_opts(&s, &o));
  assert_int_equal(o.backend, OT_BACKEND_MAP);
  assert_int_equal(o.budgets[0], 100000000ull);
  assert_int_equal(o.budgets[1], dev1);
  assert_int_equal(o.budget_bytes, 100000000ull);
  /* --devices sets the device count (and so how many budgets are filled) */
  OT_ASSERT_OK(ot_settings_set_flag(&s, "devices", "2"));
  o = ot_ctx_opts_default();
  OT_ASSERT_OK(ot_settings_to_ctx_opts(&s, &o));
  assert_int_equal(o.n_devices, 2);
  assert_int_equal(o.budgets[1], dev1);
  OT_ASSERT_ERR(ot_settings_set_flag(&s, "devices", "0"), OT_ERR_INVALID_ARG, "--devices", "bad device count '0'");
  OT_ASSERT_OK(ot_settings_set_flag(&s, "devices", "1"));
  /* per-device entries are absolute device numbers */
  OT_ASSERT_OK(ot_settings_set_flag(&s, "gpu-memory-limit", "1:200MiB"));
  OT_ASSERT_OK(ot_settings_set_flag(&s, "device", "1"));
  o.n_devices = 1;
  OT_ASSERT_OK(ot_settings_to_ctx_opts(&s, &o));
  assert_int_equal(o.device, 1);
  assert_int_equal(o.budgets[0], dev1);
  ot_settings_print(stderr, &s);
  ot_settings_release(&s);
}

/* Issue 43: what a budget may say about the devices of the run. */
static void test_ctx_opts_devices(void **state) {
  (void)state;
  ot_settings s;
  ot_settings_init(&s);
  ot_ctx_opts o = ot_ctx_opts_default();
  /* a limit for a device the run does not use was dropped without a word */
  OT_ASSERT_OK(ot_settings_set_flag(&s, "gpu-memory-limit", "0:100MB,1:200MB"));
  OT_ASSERT_ERR(ot_settings_to_ctx_opts(&s, &o), OT_ERR_INVALID_ARG, "--gpu-memory-limit: a limit for device 1",
                "it uses device 0 only");
  OT_ASSERT_OK(ot_settings_set_flag(&s, "device", "1"));
  OT_ASSERT_ERR(ot_settings_to_ctx_opts(&s, &o), OT_ERR_INVALID_ARG, "a limit for device 0", "device 1 only");
  OT_ASSERT_OK(ot_settings_set_flag(&s, "gpu-memory-limit", "0:100MB,5:1MB"));
  OT_ASSERT_OK(ot_settings_set_flag(&s, "device", "0"));
  OT_ASSERT_OK(ot_settings_set_flag(&s, "devices", "2"));
  OT_ASSERT_ERR(ot_settings_to_ctx_opts(&s, &o), OT_ERR_INVALID_ARG, "a limit for device 5", "2 devices, 0 to 1");
  ot_settings_release(&s);
  ot_settings_init(&s);
  setenv("OMPTENSOR_GPU_MEMORY_LIMIT", "3:1MB", 1); /* named by where it came from */
  OT_ASSERT_OK(ot_settings_load_env(&s));
  OT_ASSERT_ERR(ot_settings_to_ctx_opts(&s, &o), OT_ERR_INVALID_ARG,
                "OMPTENSOR_GPU_MEMORY_LIMIT: a limit for device 3");
  unsetenv("OMPTENSOR_GPU_MEMORY_LIMIT");
  ot_settings_release(&s);
  if (ot_num_devices() == 0) return; /* the rest is about a device's memory */

  /* a percentage of an emulated device (refused before) is of the size it
   * is given, and a budget beyond the device's memory is refused, naming it */
  const uint64_t cap = ot_device_capacity(0);
  uint64_t total = 0;
  ot_device_memory(0, NULL, &total);
  assert_int_equal(cap, total ? total : OT_EMULATED_DEVICE_BYTES);
  ot_settings_init(&s);
  OT_ASSERT_OK(ot_settings_set_flag(&s, "gpu-memory-limit", "25%"));
  o = ot_ctx_opts_default();
  OT_ASSERT_OK(ot_settings_to_ctx_opts(&s, &o));
  assert_int_equal(o.budget_bytes, cap / 4);
  OT_ASSERT_OK(ot_settings_set_flag(&s, "gpu-memory-limit", "100%"));
  OT_ASSERT_OK(ot_settings_to_ctx_opts(&s, &o));
  assert_int_equal(o.budget_bytes, cap);
  char over[32];
  snprintf(over, sizeof over, "%llu", (unsigned long long)cap + 1);
  OT_ASSERT_OK(ot_settings_set_flag(&s, "gpu-memory-limit", over));
  OT_ASSERT_ERR(ot_settings_to_ctx_opts(&s, &o), OT_ERR_INVALID_ARG, "--gpu-memory-limit", "more than its memory");
  OT_ASSERT_OK(load(&s, "memory:\n  max_gpu_memory: 1000TB\n"));
  OT_ASSERT_ERR(ot_settings_to_ctx_opts(&s, &o), OT_ERR_INVALID_ARG, "--gpu-memory-limit"); /* the flag still wins */
  ot_settings_release(&s);
  ot_settings_init(&s);
  OT_ASSERT_OK(load(&s, "memory:\n  max_gpu_memory: 1000TB\n"));
  OT_ASSERT_ERR(ot_settings_to_ctx_opts(&s, &o), OT_ERR_INVALID_ARG, "conf.yaml: memory.max_gpu_memory",
                "more than its memory");
  OT_ASSERT_OK(ot_settings_set_flag(&s, "backend", "host")); /* no device memory: no such bound */
  OT_ASSERT_OK(ot_settings_to_ctx_opts(&s, &o));
  ot_settings_release(&s);
}

/* Single-byte corruptions of a full file: an error or a clean load, never a
 * crash or a leak (ASan). */
static void test_yaml_mutations(void **state) {
  (void)state;
  size_t len = strlen(full_yaml);
  static const char vals[] = {'\0', ':', '-', '[', '{', '"', '\t', '\n', '&', '*', '%', '\x80'};
  for (size_t i = 0; i < len; i++)
    for (size_t v = 0; v < sizeof vals; v++) {
      char *m = malloc(len);
      memcpy(m, full_yaml, len);
      m[i] = vals[v];
      ot_settings s;
      ot_settings_init(&s);
      if (ot_settings_load_yaml(&s, m, len, "mut.yaml") != OT_OK) assert_non_null(strstr(ot_last_error(), "mut.yaml"));
      ot_settings_release(&s);
      free(m);
    }
}

/* The line ot_settings_print writes for one setting (flag name first). */
static void print_line(const ot_settings *s, const char *flag, char *line, size_t cap) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  ot_settings_print(f, s);
  fclose(f);
  char want[64];
  snprintf(want, sizeof want, "  %s ", flag);
  const char *at = strstr(buf, want), *end = at ? strchr(at, '\n') : NULL;
  assert_non_null(end);
  snprintf(line, cap, "%.*s", (int)(end - at), at);
  free(buf);
}

/* Issue 43: -v labelled values from generation_config.json "[default]".
 * The settings nothing higher gave take the model's values, labelled with
 * their source; what the user gave stays theirs. */
static void test_model_gen_source(void **state) {
  const char *dir = *state;
  char model[4096], line[256];
  /* max_new_tokens 20, do_sample false */
  snprintf(model, sizeof model, "%s/models/llama_text", getenv("OT_TEST_DATA"));
  ot_settings s;
  ot_settings_init(&s);
  OT_ASSERT_OK(ot_settings_take_model_gen(&s, model));
  assert_int_equal(s.gen.max_new_tokens, 20);
  assert_int_equal(s.source[OT_SET_MAX_NEW_TOKENS], OT_SRC_MODEL);
  assert_int_equal(s.gen.greedy, 1);
  print_line(&s, "max-new-tokens", line, sizeof line);
  assert_non_null(strstr(line, "20   [generation_config.json]"));
  print_line(&s, "seed", line, sizeof line);
  assert_non_null(strstr(line, "[default]"));
  /* the user's flags win; a sampling flag makes do_sample false no longer greedy */
  ot_settings_init(&s);
  OT_ASSERT_OK(ot_settings_set_flag(&s, "max-new-tokens", "5"));
  OT_ASSERT_OK(ot_settings_set_flag(&s, "temperature", "0.5"));
  OT_ASSERT_OK(ot_settings_take_model_gen(&s, model));
  assert_int_equal(s.gen.max_new_tokens, 5);
  assert_int_equal(s.source[OT_SET_MAX_NEW_TOKENS], OT_SRC_FLAG);
  assert_int_equal(s.source[OT_SET_GREEDY], OT_SRC_DEFAULT);
  /* do_sample true: its temperature, and transformers' top_k 50 where it has none */
  ot_write_text(dir, "generation_config.json", "{\"do_sample\": true, \"temperature\": 0.6}");
  ot_settings_init(&s);
  OT_ASSERT_OK(ot_settings_take_model_gen(&s, dir));
  assert_true(s.gen.temperature == 0.6f && s.gen.top_k == 50 && s.gen.top_p == 1.0f);
  assert_int_equal(s.source[OT_SET_TOP_K], OT_SRC_MODEL);
  print_line(&s, "temperature", line, sizeof line);
  assert_non_null(strstr(line, "0.6   [generation_config.json]"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
      cmocka_unit_test_setup_teardown(test_yaml_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_precedence_any_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_flags, setup, teardown),
      cmocka_unit_test_setup_teardown(test_env_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_env_junk_noticed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_yaml_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_yaml_lenient_forms, setup, teardown),
      cmocka_unit_test_setup_teardown(test_usm_placement, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ctx_opts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ctx_opts_devices, setup, teardown),
      cmocka_unit_test_setup_teardown(test_model_gen_source, setup, teardown),
      cmocka_unit_test(test_yaml_mutations),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
