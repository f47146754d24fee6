/* args.c — long/short options with values (args.h), for the CLI and the samples. */
#include <pthread.h>
#include <string.h>

#include "omptensor/args.h"
#include "config/settings_internal.h"
#include "core/error.h"

static const ot_opt *find_long(const ot_opt *const *tables, const char *name, size_t len) {
  for (int t = 0; tables[t]; t++)
    for (const ot_opt *o = tables[t]; o->name; o++)
      if (strlen(o->name) == len && strncmp(o->name, name, len) == 0) return o;
  return NULL;
}

static const ot_opt *find_short(const ot_opt *const *tables, char c) {
  for (int t = 0; tables[t]; t++)
    for (const ot_opt *o = tables[t]; o->name; o++)
      if (o->short_name && o->short_name == c) return o;
  return NULL;
}

/* One option at argv[*i]; *i moves past its value if it takes one. */
static ot_status one_option(const char *prog, int argc, char **argv, int *i, const ot_opt *const *tables, ot_opt_fn fn,
                            void *user) {
  const char *arg = argv[*i], *eq = NULL;
  const ot_opt *o;
  if (arg[1] == '-') {
    eq = strchr(arg + 2, '=');
    o = find_long(tables, arg + 2, eq ? (size_t)(eq - arg - 2) : strlen(arg + 2));
  } else {
    o = arg[2] ? NULL : find_short(tables, arg[1]);
  }
  if (!o)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: unknown option '%.*s' (see %s --help)", prog,
                   eq ? (int)(eq - arg) : (int)strlen(arg), arg, prog);
  if (!o->metavar) {
    if (eq) return ot_fail(OT_ERR_INVALID_ARG, "%s: option '--%s' takes no value", prog, o->name);
    return fn(user, o, NULL);
  }
  if (eq) return fn(user, o, eq + 1);
  if (*i + 1 >= argc)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: option '%s' needs a value (%s)", prog, arg, o->metavar);
  return fn(user, o, argv[++*i]);
}

ot_status ot_args_parse(const char *prog, int argc, char **argv, const ot_opt *const *tables, ot_opt_fn fn,
                        void *user) {
  if (!prog || !tables || !fn || (argc > 0 && !argv)) return ot_fail(OT_ERR_INVALID_ARG, "ot_args_parse: NULL argument");
  int options_done = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (!options_done && strcmp(arg, "--") == 0) {
      options_done = 1;
      continue;
    }
    if (options_done || arg[0] != '-' || arg[1] == '\0') {
      OT_TRY(fn(user, NULL, arg));
      continue;
    }
    OT_TRY(one_option(prog, argc, argv, &i, tables, fn, user));
  }
  return OT_OK;
}

void ot_args_print_help(FILE *f, const ot_opt *const *tables) {
  for (int t = 0; tables[t]; t++)
    for (const ot_opt *o = tables[t]; o->name; o++) {
      char lhs[64];
      snprintf(lhs, sizeof lhs, "%s%c%s--%s%s%s", o->short_name ? "-" : "", o->short_name ? o->short_name : ' ',
               o->short_name ? ", " : " ", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
      fprintf(f, "  %-30s %s\n", lhs, o->help ? o->help : "");
    }
}

static ot_opt settings_opts[OT_SET_COUNT + 2];

/* Filled from the settings table so the two never disagree. */
static void make_settings_opts(void) {
  for (int k = 0; k < OT_SET_COUNT; k++)
    settings_opts[k] = (ot_opt){ot_setting_defs[k].flag, 0, ot_setting_defs[k].metavar, ot_setting_defs[k].help,
                                OT_OPT_SETTING};
  settings_opts[OT_SET_COUNT] =
      (ot_opt){"config", 0, "FILE", "YAML settings file (flags > OMPTENSOR_* env > file)", OT_OPT_CONFIG};
}

const ot_opt *ot_settings_opts(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, make_settings_opts);
  return settings_opts;
}
