/* cmd_info.c — `omptensor info`: what this build and machine offer, and the
 * budget a run would get here: from the same settings as every other
 * command (flags, OMPTENSOR_* variables, --config FILE; settings.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"

enum { OPT_HELP = 1 };

static const ot_opt info_opts[] = {{"help", 'h', NULL, "show this help", OPT_HELP}, {0}};

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

/* Where the budget printed above came from, as the user would change it. */
static void print_budget_source(const ot_cli_session *s, FILE *f) {
  const char *env = getenv("OMPTENSOR_GPU_MEMORY_LIMIT");
  switch (s->settings.source[OT_SET_GPU_MEMORY_LIMIT]) {
  case OT_SRC_FLAG: fprintf(f, "budget from: --gpu-memory-limit\n"); break;
  case OT_SRC_ENV: fprintf(f, "budget from: environment, OMPTENSOR_GPU_MEMORY_LIMIT=%s\n", env ? env : ""); break;
  case OT_SRC_FILE:
    fprintf(f, "budget from: %s, memory.max_gpu_memory\n", s->settings.file ? s->settings.file : s->config_path);
    break;
  default:
    fprintf(f, "budget from: default (all the memory the device reports, 1 GiB on an emulated device, no limit "
               "on the host backend); set --gpu-memory-limit, OMPTENSOR_GPU_MEMORY_LIMIT or memory.max_gpu_memory "
               "in a --config file\n");
  }
}

int ot_cli_info(int argc, char **argv) {
  const char *prog = "omptensor info";
  ot_cli_session s;
  ot_cli_session_init(&s, prog);
  info_args a = {.s = &s};
  const ot_opt *tables[] = {info_opts, ot_settings_opts(), ot_cli_common_opts(), NULL};
  ot_status st = ot_args_parse(prog, argc, argv, tables, on_opt, &a);
  if (st == OT_OK && a.help) {
    printf("usage: omptensor info [options]\n\nPrints the build's offload target, the OpenMP devices found, the movement\n"
           "backends available and the device memory budget that would apply, with where it\n"
           "came from: the same settings (flags, OMPTENSOR_* variables, --config FILE) as\n"
           "every other command.\n\noptions:\n");
    ot_args_print_help(stdout, tables);
    ot_cli_session_end(&s);
    return 0;
  }
  /* flags are already in; then the environment and the file, which never
   * override a higher source (settings.h) */
  if (st == OT_OK) st = ot_settings_load_env(&s.settings);
  if (st == OT_OK && s.config_path) st = ot_settings_load_file(&s.settings, s.config_path);
  ot_ctx_opts o = ot_ctx_opts_default();
  if (st == OT_OK) st = ot_settings_to_ctx_opts(&s.settings, &o);
  if (st != OT_OK) {
    int rc = ot_cli_fail(prog, st);
    ot_cli_session_end(&s);
    return rc;
  }
  ot_cli_input_accepted();
  if (s.verbose) ot_settings_print(stderr, &s.settings);
  ot_info_print(stdout, &o);
  print_budget_source(&s, stdout);
  ot_cli_session_end(&s);
  return 0;
}
