/* args.h — long options for command-line programs built on omptensor (the
 * omptensor command, the samples, your own tools), with the settings
 * (settings.h) as options of their own.
 *
 *     enum { OPT_HELP = 1, OPT_PROMPT_IDS, ... };
 *     static const ot_opt run_opts[] = {
 *         {"help", 'h', NULL, "show this help", OPT_HELP},
 *         {"prompt-ids", 0, "IDS", "comma-separated token ids", OPT_PROMPT_IDS},
 *         {0}};
 *     const ot_opt *tables[] = {run_opts, ot_settings_opts(), NULL};
 *     ot_status s = ot_args_parse("omptensor run", argc, argv, tables, on_opt, &state);
 *
 * `--name VALUE`, `--name=VALUE`, `-x VALUE` for options with a metavar;
 * `--name`, `-x` for switches. `--` ends the options. Everything else is a
 * positional argument, passed to the callback with opt == NULL. argv[0] is
 * the subcommand name and is skipped. Errors (OT_ERR_INVALID_ARG) name the
 * option: "omptensor run: unknown option '--fo' (see omptensor run --help)".
 * An empty value ("--trace ''", "--seed=") is refused before the callback.
 * When the callback refuses a value, the parser puts the option in front of
 * its message, and the value too unless the message already quotes it:
 * "--max-new-tokens '1.5': not a decimal integer ...", "--offload: unknown
 * offload strategy 'lazy' ..."; the callback says only what is wrong with the
 * value and what to give instead (ot_args_int and friends below do).
 */
#ifndef OMPTENSOR_ARGS_H
#define OMPTENSOR_ARGS_H

#include <stdint.h>
#include <stdio.h>

#include "omptensor/settings.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ot_opt {
  const char *name;    /* long name without "--"; NULL ends a table */
  char short_name;     /* 0: none */
  const char *metavar; /* NULL: a switch; else it takes a value, shown in help as --name METAVAR */
  const char *help;
  int id;              /* the caller's key for this option */
} ot_opt;

/* Called per option (value NULL for a switch) and per positional argument
 * (opt NULL, value the argument). A non-OK return stops the parse and is
 * returned as is. */
typedef ot_status (*ot_opt_fn)(void *user, const ot_opt *opt, const char *value);

/* tables: NULL-terminated list of {0}-terminated option tables. */
ot_status ot_args_parse(const char *prog, int argc, char **argv, const ot_opt *const *tables, ot_opt_fn fn, void *user);

/* Option values as numbers, for the callbacks: all of v must be the number,
 * with nothing around it. Integers: decimal digits after an optional '+' or
 * '-' (no fraction, exponent, hex prefix or spaces), within [lo, hi].
 * Floats: decimal [sign] digits [. digits] [e [sign] digits], also ".5" and
 * "5." (no hex, inf or nan), within [lo, hi]. Anything else is
 * OT_ERR_INVALID_ARG with a message that quotes v and gives the range; *out
 * is set only on success. */
ot_status ot_args_int(const char *v, int64_t lo, int64_t hi, int64_t *out);
ot_status ot_args_u64(const char *v, uint64_t lo, uint64_t hi, uint64_t *out);
ot_status ot_args_float(const char *v, double lo, double hi, double *out);

/* "  --gpu-memory-limit SIZE   device memory budget ..." for each option. */
void ot_args_print_help(FILE *f, const ot_opt *const *tables);

/* The settings' options (every ot_setting but the generation ones, id = OT_OPT_SETTING); hand them to
 * ot_settings_set_flag(s, opt->name, value). */
#define OT_OPT_SETTING (-1000)
const ot_opt *ot_settings_opts(void);

/* The generation settings' options (--max-new-tokens, --temperature, ...,
 * id OT_OPT_SETTING), for commands that generate. */
const ot_opt *ot_settings_gen_opts(void);

/* Also the --config FILE option, id OT_OPT_CONFIG, for ot_settings_load_file. */
#define OT_OPT_CONFIG (-1001)

/* The options of only the settings a program takes (the n of `which`, in
 * the settings' order, generation ones too), then --config: for a command
 * whose help should list, and whose parser accept, nothing it would ignore.
 * buf holds at least n + 2 entries; returns buf.
 *
 *     static const ot_setting mine[] = {OT_SET_GPU_MEMORY_LIMIT, OT_SET_BACKEND, OT_SET_JSON};
 *     ot_opt buf[3 + 2];
 *     const ot_opt *tables[] = {my_opts, ot_settings_opts_of(mine, 3, buf), NULL}; */
const ot_opt *ot_settings_opts_of(const ot_setting *which, int n, ot_opt *buf);

#ifdef __cplusplus
}
#endif
#endif
