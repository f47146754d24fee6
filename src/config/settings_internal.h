/* settings_internal.h (internal) — the table behind ot_settings, shared by
 * the environment, flag and YAML sources and by the CLI's option list. */
#ifndef OT_CONFIG_SETTINGS_INTERNAL_H
#define OT_CONFIG_SETTINGS_INTERNAL_H

#include "omptensor/settings.h"

union value;

typedef struct ot_setting_def {
  const char *flag;    /* "gpu-memory-limit" (used as --gpu-memory-limit) */
  const char *env;     /* "OMPTENSOR_GPU_MEMORY_LIMIT" */
  const char *yaml;    /* "memory.max_gpu_memory" */
  const char *metavar; /* "SIZE"; NULL for a switch */
  const char *help;
  ot_status (*parse)(const char *v, union value *out);
  const char *implicit; /* the flag's value when given alone (args.c says when that is); NULL: required */
  int generation;       /* a generation setting: an option of `run` only (ot_settings_gen_opts) */
  char short_name;      /* the option's one-letter form, 0: none */
} ot_setting_def;

extern const ot_setting_def ot_setting_defs[OT_SET_COUNT];

/* Validates v for setting k and keeps it if src ranks high enough; the
 * message says what is wrong with v (the caller adds where it came from). */
ot_status ot_settings_apply(ot_settings *s, ot_setting k, ot_setting_source src, const char *v);

ot_status ot_settings_parse_bool(const char *v, int *out);

/* The one form of a refused option value (args.c): this thread's message gets
 * "--NAME" in front, with " 'VALUE'" unless the message quotes the value
 * already or starts with "--NAME" itself. Returns st. */
ot_status ot_option_error(ot_status st, const char *name, const char *value);
/* v for a message: at most 64 bytes (then "..."), unprintable bytes as \xHH. */
void ot_option_value_shown(const char *v, char *buf, size_t n);

#endif
