/* cmd_info.c — `omptensor info`: what this build and machine offer, and the
 * budget a run would get here: from the same settings as every other
 * command (flags, OMPTENSOR_* variables, --config FILE; settings.h); as text,
 * or with --json as one object of the same facts. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"

enum { OPT_HELP = 1 };

static const ot_opt info_opts[] = {{"help", 'h', NULL, "show this help", OPT_HELP}, {0}};

/* The settings that decide what info reports: the context's (devices,
 * backend, budgets) and the output's; the others (--offload, --trace, ...)
 * would change nothing here, so info does not take them. */
static const ot_setting info_settings[] = {OT_SET_GPU_MEMORY_LIMIT, OT_SET_CPU_MEMORY_LIMIT, OT_SET_BACKEND,
                                           OT_SET_DEVICE, OT_SET_DEVICES, OT_SET_JSON};
#define N_INFO_SETTINGS (int)(sizeof info_settings / sizeof info_settings[0])

typedef struct info_args {
  ot_cli_session *s;
  int help;
} info_args;

static ot_status on_opt(void *user, const ot_opt *o, const char *v) {
  info_args *a = user;
  ot_status st;
  if (ot_cli_session_option(a->s, o, v, &st)) return st;
  if (!o) return ot_set_error(OT_ERR_INVALID_ARG, "unexpected argument '%s' (info takes options only; see omptensor info --help)", v);
  if (o->id == OPT_HELP) {
    a->help = 1;
    return OT_OK;
  }
  return ot_set_error(OT_ERR_INVALID_ARG, "unhandled option --%s", o->name);
}

/* Where the budget came from, as the user would change it: the source, the
 * option's name there, and the value or file where there is one. */
typedef struct budget_source {
  const char *source, *name, *value, *file;
} budget_source;

static budget_source source_of(const ot_cli_session *s) {
  budget_source b = {ot_setting_source_name(s->settings.source[OT_SET_GPU_MEMORY_LIMIT]), NULL, NULL, NULL};
  switch (s->settings.source[OT_SET_GPU_MEMORY_LIMIT]) {
  case OT_SRC_FLAG: b.name = "--gpu-memory-limit"; break;
  case OT_SRC_ENV:
    b.name = "OMPTENSOR_GPU_MEMORY_LIMIT";
    b.value = getenv(b.name);
    break;
  case OT_SRC_FILE:
    b.name = "memory.max_gpu_memory";
    b.file = s->settings.file ? s->settings.file : s->config_path;
    break;
  default: break;
  }
  return b;
}

/* Where the budget printed above came from, as the user would change it. */
static void print_budget_source(const ot_cli_session *s, FILE *f) {
  const budget_source b = source_of(s);
  switch (s->settings.source[OT_SET_GPU_MEMORY_LIMIT]) {
  case OT_SRC_FLAG: fprintf(f, "budget from: %s\n", b.name); break;
  case OT_SRC_ENV: fprintf(f, "budget from: environment, %s=%s\n", b.name, b.value ? b.value : ""); break;
  case OT_SRC_FILE: fprintf(f, "budget from: %s, %s\n", b.file, b.name); break;
  default:
    fprintf(f, "budget from: default (all the memory the device reports, 1 GiB on an emulated device, no limit "
               "on the host backend); set --gpu-memory-limit, OMPTENSOR_GPU_MEMORY_LIMIT or memory.max_gpu_memory "
               "in a --config file\n");
  }
}

/* A byte count, or null for "no limit" (UINT64_MAX) and "not reported" (0
 * where zero cannot be meant). No count here exceeds INT64_MAX otherwise:
 * the sizes a user gives are capped there (size.c), and devices are smaller. */
static json_t *bytes_or_null(uint64_t b, int zero_is_null) {
  return b == UINT64_MAX || (zero_is_null && !b) || b > INT64_MAX ? json_null() : json_integer((json_int_t)b);
}

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

static json_t *devices_json(const ot_info *in) {
  json_t *a = json_array();
  for (int d = 0; d < in->n_devices && d < OT_MAX_DEVICES; d++) {
    const ot_info_device *i = &in->dev[d];
    json_array_append_new(a, json_pack("{s:i, s:s, s:o, s:o, s:o}", "device", d, "kind", i->gpu ? "gpu" : "emulated",
                                       "memory_bytes", bytes_or_null(i->capacity, 1), "reported_total_bytes",
                                       bytes_or_null(i->total, 1), "free_bytes", bytes_or_null(i->free, 1)));
  }
  return a;
}

static json_t *selected_json(const ot_info *in) {
  if (!in->selected) return json_null();
  json_t *budgets = json_array();
  for (int i = 0; i < in->n_selected; i++)
    json_array_append_new(budgets, json_pack("{s:o, s:o}", "device",
                                             in->selected_dev[i] == OT_DEVICE_HOST ? json_string("host")
                                                                                  : json_integer(in->selected_dev[i]),
                                             "budget_bytes", bytes_or_null(in->budget[i], 0)));
  return json_pack("{s:s, s:i, s:o, s:o}", "backend", ot_backend_name(in->backend), "n_devices", in->n_selected,
                   "budgets", budgets, "host_budget_bytes", bytes_or_null(in->host_budget, 1));
}

/* What the text prints, as one JSON object on stdout. */
static ot_status print_json(const ot_cli_session *s, const ot_ctx_opts *o) {
  ot_info in;
  ot_info_get(o, &in);
  const budget_source b = source_of(s);
  json_t *src = json_pack("{s:s, s:o, s:o, s:o}", "source", b.source, "name", str_or_null(b.name), "value",
                          str_or_null(b.value), "file", str_or_null(b.file));
  const char *usm = in.usm_available == 1 ? "yes" : in.usm_available == 2 ? "emulated" : "no";
  json_t *j = json_pack("{s:s, s:o, s:b, s:b, s:{s:i, s:i, s:i, s:o}, s:o, s:{s:b, s:b, s:s}, s:o, s:o, s:o, s:o, s:s}",
                        "version", in.version, "offload_target", str_or_null(in.offload_target), "usm_build",
                        in.usm_build, "cuda_linked", in.cuda_linked, "openmp", "offload_devices", in.n_devices,
                        "initial_device", in.initial_device, "host_threads", in.host_threads, "omp_target_offload",
                        str_or_null(in.omp_target_offload), "devices", devices_json(&in), "backends", "host", 1,
                        "map", in.map_available, "usm", usm, "selected", selected_json(&in), "error",
                        in.selected ? json_null() : json_string(in.selected_error), "budget_bytes",
                        in.selected ? bytes_or_null(in.budget[0], 0) : json_null(), "budget_source", src, "gpu_wait",
                        in.gpu_wait);
  if (!j) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "info --json: cannot build the JSON object");
  int rc = json_dumpf(j, stdout, JSON_COMPACT); /* one line, as every --json */
  json_decref(j);
  if (rc != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0)
    return ot_set_error(OT_ERR_IO, "writing the JSON object to stdout failed");
  return OT_OK;
}

int ot_cli_info(int argc, char **argv) {
  const char *prog = "omptensor info";
  ot_cli_session s;
  ot_cli_session_init(&s, prog);
  info_args a = {.s = &s};
  ot_opt settings[N_INFO_SETTINGS + 2];
  const ot_opt *tables[] = {info_opts, ot_settings_opts_of(info_settings, N_INFO_SETTINGS, settings),
                            ot_cli_common_opts(), NULL};
  ot_status st = ot_args_parse(prog, argc, argv, tables, on_opt, &a);
  if (st == OT_OK && a.help) {
    printf("usage: omptensor info [options]\n\nPrints the build's offload target, the OpenMP devices found, the movement\n"
           "backends available and the device memory budget that would apply, with where it\n"
           "came from: the same settings (flags, OMPTENSOR_* variables, --config FILE) as\n"
           "every other command. --json prints the same as one JSON object.\n\noptions:\n");
    ot_args_print_help(stdout, tables);
    ot_cli_session_end(&s);
    return 0;
  }
  /* flags are already in; then the environment and the file, which never
   * override a higher source (settings.h) */
  if (st == OT_OK) st = ot_cli_session_settings(&s);
  ot_ctx_opts o = ot_ctx_opts_default();
  if (st == OT_OK) st = ot_settings_to_ctx_opts(&s.settings, &o);
  if (st != OT_OK) {
    int rc = ot_cli_fail(prog, st);
    ot_cli_session_end(&s);
    return rc;
  }
  ot_cli_input_accepted();
  if (s.verbose) ot_settings_print(stderr, &s.settings);
  if (s.settings.json) {
    st = print_json(&s, &o);
  } else {
    ot_info_print(stdout, &o);
    print_budget_source(&s, stdout);
  }
  int rc = st == OT_OK ? 0 : ot_cli_fail(prog, st);
  ot_cli_session_end(&s);
  return rc;
}
