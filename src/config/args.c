/* args.c — long/short options with values (args.h), for the CLI and the
 * samples; the numbers in option values; the one place that says which
 * option a refused value belongs to. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* v as it is quoted in messages: at most 64 bytes of it (then "..."), bytes
 * that are not printable ASCII as \xHH, so the message stays one line. */
void ot_option_value_shown(const char *v, char *buf, size_t n) {
  size_t k = 0, i = 0;
  for (; v[i] && k + 8 < n && i < 64; i++) {
    unsigned char c = (unsigned char)v[i];
    if (c < 0x20 || c >= 0x7f) k += (size_t)snprintf(buf + k, n - k, "\\x%02x", c);
    else buf[k++] = (char)c;
  }
  if (v[i] && k + 4 < n) memcpy(buf + k, "...", 3), k += 3;
  buf[k < n ? k : n - 1] = '\0';
}

/* Does m hold 'q' (q between single quotes)? */
static int quotes(const char *m, const char *q) {
  size_t n = strlen(q);
  for (const char *p = m; (p = strchr(p, '\'')) != NULL; p++)
    if (!strncmp(p + 1, q, n) && p[1 + n] == '\'') return 1;
  return 0;
}

ot_status ot_option_error(ot_status st, const char *name, const char *value) {
  const char *m = ot_last_error();
  size_t nl = strlen(name);
  /* Named already (ot_settings_set_flag names its flag for callers outside
   * the parser too). */
  if (!strncmp(m, "--", 2) && !strncmp(m + 2, name, nl) && (m[2 + nl] == ':' || m[2 + nl] == ' ')) return st;
  char shown[300];
  if (value) ot_option_value_shown(value, shown, sizeof shown);
  if (!value || quotes(m, value) || quotes(m, shown)) return ot_fail_context(st, "--%s", name);
  return ot_fail_context(st, "--%s '%s'", name, shown);
}

/* Digits after an optional sign, nothing else: 0 and the magnitude, or -1
 * (not a decimal integer), or 1 (beyond 64 bits). */
static int decimal(const char *v, int *neg, uint64_t *mag) {
  const char *p = v;
  *neg = *p == '-';
  if (*p == '-' || *p == '+') p++;
  if (*p < '0' || *p > '9') return -1;
  uint64_t m = 0;
  int over = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (__builtin_mul_overflow(m, 10, &m)) over = 1;
    if (__builtin_add_overflow(m, (uint64_t)(*p - '0'), &m)) over = 1;
  }
  if (*p) return -1;
  *mag = m;
  return over;
}

ot_status ot_args_int(const char *v, int64_t lo, int64_t hi, int64_t *out) {
  if (!v || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_args_int: NULL argument");
  char shown[300];
  ot_option_value_shown(v, shown, sizeof shown);
  int neg;
  uint64_t mag = 0;
  int r = decimal(v, &neg, &mag);
  if (r < 0)
    return ot_fail(OT_ERR_INVALID_ARG, "'%s' is not a decimal integer (give a whole number from %lld to %lld)", shown,
                   (long long)lo, (long long)hi);
  /* in range of int64 first: -2^63 .. 2^63-1 */
  int fits = !r && (neg ? mag <= (uint64_t)INT64_MAX + 1 : mag <= (uint64_t)INT64_MAX);
  int64_t x = !fits ? 0 : neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
  if (!fits || x < lo || x > hi)
    return ot_fail(OT_ERR_INVALID_ARG, "'%s' is out of range (give a whole number from %lld to %lld)", shown,
                   (long long)lo, (long long)hi);
  *out = x;
  return OT_OK;
}

ot_status ot_args_u64(const char *v, uint64_t lo, uint64_t hi, uint64_t *out) {
  if (!v || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_args_u64: NULL argument");
  char shown[300];
  ot_option_value_shown(v, shown, sizeof shown);
  int neg;
  uint64_t mag = 0;
  int r = decimal(v, &neg, &mag);
  if (r < 0)
    return ot_fail(OT_ERR_INVALID_ARG, "'%s' is not a decimal integer (give a whole number from %llu to %llu)", shown,
                   (unsigned long long)lo, (unsigned long long)hi);
  if (r || (neg && mag) || mag < lo || mag > hi)
    return ot_fail(OT_ERR_INVALID_ARG, "'%s' is out of range (give a whole number from %llu to %llu)", shown,
                   (unsigned long long)lo, (unsigned long long)hi);
  *out = mag;
  return OT_OK;
}

/* [sign] (digits [. [digits]] | . digits) [(e|E) [sign] digits], all of v. */
static int decimal_float_syntax(const char *p) {
  if (*p == '-' || *p == '+') p++;
  int digits = 0;
  while (*p >= '0' && *p <= '9') p++, digits++;
  if (*p == '.')
    for (p++; *p >= '0' && *p <= '9'; p++) digits++;
  if (!digits) return 0;
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '-' || *p == '+') p++;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
  }
  return *p == '\0';
}

ot_status ot_args_float(const char *v, double lo, double hi, double *out) {
  if (!v || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_args_float: NULL argument");
  char shown[300];
  ot_option_value_shown(v, shown, sizeof shown);
  if (!decimal_float_syntax(v))
    return ot_fail(OT_ERR_INVALID_ARG, "'%s' is not a decimal number (give a number from %g to %g)", shown, lo, hi);
  errno = 0;
  double d = strtod(v, NULL); /* the syntax is strtod's decimal subset: it reads all of v */
  if (!isfinite(d) || !(d >= lo && d <= hi))
    return ot_fail(OT_ERR_INVALID_ARG, "'%s' is out of range (give a number from %g to %g)", shown, lo, hi);
  *out = d;
  return OT_OK;
}

/* The settings' definition of o if its value may be left out (settings.c:
 * --offload alone), else NULL. */
static const ot_setting_def *implicit_of(const ot_opt *o) {
  if (o->id != OT_OPT_SETTING) return NULL;
  for (int k = 0; k < OT_SET_COUNT; k++)
    if (!strcmp(ot_setting_defs[k].flag, o->name)) return ot_setting_defs[k].implicit ? &ot_setting_defs[k] : NULL;
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
  const char *v = NULL;
  const ot_setting_def *def;
  if (!o->metavar) {
    if (eq) return ot_fail(OT_ERR_INVALID_ARG, "%s: option '--%s' takes no value", prog, o->name);
  } else if (eq) {
    v = eq + 1;
  } else if ((def = implicit_of(o))) {
    /* A value that may be left out (--offload alone: balanced). The next
     * argument is the value unless it is an option or a path that exists,
     * so "--offload MODEL_DIR" keeps the model positional while a typo
     * ("--offload lazy") is still refused by name. */
    const char *next = *i + 1 < argc ? argv[*i + 1] : NULL;
    struct stat sb;
    v = next && next[0] != '-' && stat(next, &sb) != 0 ? argv[++*i] : def->implicit;
  } else {
    if (*i + 1 >= argc)
      return ot_fail(OT_ERR_INVALID_ARG, "%s: option '%s' needs a value (%s)", prog, arg, o->metavar);
    v = argv[++*i];
  }
  /* An empty value is never what was meant (an unset shell variable). */
  if (v && !v[0]) return ot_fail(OT_ERR_INVALID_ARG, "%s: option '--%s' has an empty value (%s)", prog, o->name, o->metavar);
  ot_status st = fn(user, o, v);
  return st == OT_OK ? OT_OK : ot_option_error(st, o->name, v);
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
      const int opt = implicit_of(o) != NULL; /* shown as --name [VALUE] */
      snprintf(lhs, sizeof lhs, "%s%c%s--%s%s%s%s%s", o->short_name ? "-" : "", o->short_name ? o->short_name : ' ',
               o->short_name ? ", " : " ", o->name, o->metavar ? " " : "", opt ? "[" : "", o->metavar ? o->metavar : "",
               opt ? "]" : "");
      fprintf(f, "  %-30s %s\n", lhs, o->help ? o->help : "");
    }
}

static ot_opt settings_opts[OT_SET_COUNT + 2], gen_opts[OT_SET_COUNT + 1];

/* Filled from the settings table so the two never disagree; the generation
 * settings in a table of their own, for the commands that generate. */
static void make_settings_opts(void) {
  int n = 0, g = 0;
  for (int k = 0; k < OT_SET_COUNT; k++) {
    const ot_setting_def *d = &ot_setting_defs[k];
    ot_opt o = {d->flag, d->short_name, d->metavar, d->help, OT_OPT_SETTING};
    if (d->generation) gen_opts[g++] = o;
    else settings_opts[n++] = o;
  }
  settings_opts[n] = (ot_opt){"config", 0, "FILE", "YAML settings file (flags > OMPTENSOR_* env > file)", OT_OPT_CONFIG};
}

static pthread_once_t opts_once = PTHREAD_ONCE_INIT;

const ot_opt *ot_settings_opts(void) {
  pthread_once(&opts_once, make_settings_opts);
  return settings_opts;
}

const ot_opt *ot_settings_gen_opts(void) {
  pthread_once(&opts_once, make_settings_opts);
  return gen_opts;
}

const ot_opt *ot_settings_opts_of(const ot_setting *which, int n, ot_opt *buf) {
  int k = 0;
  for (int t = 0; t < OT_SET_COUNT; t++) { /* the table's order, as in the other lists */
    int keep = 0;
    for (int i = 0; i < n; i++) keep |= which[i] == (ot_setting)t;
    const ot_setting_def *d = &ot_setting_defs[t];
    if (keep) buf[k++] = (ot_opt){d->flag, d->short_name, d->metavar, d->help, OT_OPT_SETTING};
  }
  buf[k++] = (ot_opt){"config", 0, "FILE", "YAML settings file (flags > OMPTENSOR_* env > file)", OT_OPT_CONFIG};
  buf[k] = (ot_opt){0};
  return buf;
}
