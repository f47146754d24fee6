/* test_config_argparse.c — the CLI's option parser: --name VALUE,
 * --name=VALUE, switches, short options, positionals, `--`, and errors that
 * name the option; the settings' options routed to ot_settings_set_flag. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "omptensor/args.h"
#include "ot_testio.h"

enum { OPT_HELP = 1, OPT_PROMPT, OPT_MAX_NEW, OPT_OUT };

static const ot_opt run_opts[] = {
    {"help", 'h', NULL, "show this help", OPT_HELP},
    {"prompt-ids", 0, "IDS", "comma-separated token ids", OPT_PROMPT},
    {"max-new-tokens", 'n', "N", "tokens to generate", OPT_MAX_NEW},
    {"logits-out", 'o', "FILE", "write logits as .npy", OPT_OUT},
    {0},
};

typedef struct seen {
  char log[512];
  ot_settings settings;
  const char *config;
} seen;

static ot_status on_opt(void *user, const ot_opt *opt, const char *value) {
  seen *s = user;
  size_t n = strlen(s->log);
  if (!opt) {
    snprintf(s->log + n, sizeof s->log - n, "[pos %s]", value);
    return OT_OK;
  }
  if (opt->id == OT_OPT_SETTING) return ot_settings_set_flag(&s->settings, opt->name, value);
  if (opt->id == OT_OPT_CONFIG) {
    s->config = value;
    return OT_OK;
  }
  snprintf(s->log + n, sizeof s->log - n, "[%d %s]", opt->id, value ? value : "-");
  return OT_OK;
}

static ot_status run(seen *s, int argc, char **argv) {
  memset(s->log, 0, sizeof s->log);
  s->config = NULL;
  const ot_opt *tables[] = {run_opts, ot_settings_opts(), NULL};
  return ot_args_parse("omptensor run", argc, argv, tables, on_opt, s);
}

static void test_parse(void **state) {
  (void)state;
  seen s;
  ot_settings_init(&s.settings);
  char *argv[] = {"run", "models/tiny", "--prompt-ids", "1,2,3", "--max-new-tokens=8", "-o", "l.npy",
                  "--gpu-memory-limit=3.5GB", "--offload", "aggressive", "--json", "--config", "c.yaml",
                  "-h", "--", "--not-an-option", "-"};
  OT_ASSERT_OK(run(&s, (int)(sizeof argv / sizeof argv[0]), argv));
  assert_string_equal(s.log, "[pos models/tiny][2 1,2,3][3 8][4 l.npy][1 -][pos --not-an-option][pos -]");
  assert_string_equal(s.config, "c.yaml");
  assert_int_equal(s.settings.gpu_memory_limit.all.bytes, 3500000000ull);
  assert_int_equal(s.settings.offload, OT_STRATEGY_AGGRESSIVE);
  assert_int_equal(s.settings.json, 1);
  assert_int_equal(s.settings.source[OT_SET_OFFLOAD], OT_SRC_FLAG);
  ot_settings_release(&s.settings);
}

/* --offload alone means balanced; the next argument is its value unless it
 * is an option or a path that exists (a model directory after it stays
 * positional), so a misspelt strategy is still refused by name. */
static void test_offload_alone(void **state) {
  (void)state;
  static const struct {
    const char *argv[4];
    int argc;
    ot_strategy want;
    const char *log;
  } cases[] = {
      {{"run", "--offload"}, 2, OT_STRATEGY_BALANCED, ""},
      {{"run", "--offload", "/"}, 3, OT_STRATEGY_BALANCED, "[pos /]"}, /* an existing path */
      {{"run", "--offload", "Aggressive"}, 3, OT_STRATEGY_AGGRESSIVE, ""},
      {{"run", "--offload", "none", "m"}, 4, OT_STRATEGY_NONE, "[pos m]"},
      {{"run", "--offload", "--json"}, 3, OT_STRATEGY_BALANCED, ""},
      {{"run", "--offload=minimal"}, 2, OT_STRATEGY_MINIMAL, ""},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    seen s;
    ot_settings_init(&s.settings);
    s.settings.offload = OT_STRATEGY_MINIMAL + (cases[k].want == OT_STRATEGY_MINIMAL); /* not what is wanted */
    OT_ASSERT_OK(run(&s, cases[k].argc, (char **)cases[k].argv));
    assert_int_equal(s.settings.offload, cases[k].want);
    assert_int_equal(s.settings.source[OT_SET_OFFLOAD], OT_SRC_FLAG);
    assert_string_equal(s.log, cases[k].log);
    ot_settings_release(&s.settings);
  }
  seen s;
  ot_settings_init(&s.settings);
  char *bad[] = {"run", "--offload=lazy"}, *bad2[] = {"run", "--offload", "lazy"};
  OT_ASSERT_ERR(run(&s, 2, bad), OT_ERR_INVALID_ARG, "unknown offload strategy 'lazy'");
  OT_ASSERT_ERR(run(&s, 3, bad2), OT_ERR_INVALID_ARG, "unknown offload strategy 'lazy'");
  ot_settings_release(&s.settings);
}

static void test_errors(void **state) {
  (void)state;
  seen s;
  ot_settings_init(&s.settings);
  struct {
    int argc;
    char *argv[4];
    const char *sub;
  } cases[] = {
      {2, {"run", "--fo"}, "omptensor run: unknown option '--fo' (see omptensor run --help)"},
      {2, {"run", "--fo=3"}, "unknown option '--fo'"},
      {2, {"run", "-x"}, "unknown option '-x'"},
      {2, {"run", "-hn"}, "unknown option '-hn'"},
      {2, {"run", "--prompt-ids"}, "option '--prompt-ids' needs a value (IDS)"},
      {2, {"run", "--help=yes"}, "option '--help' takes no value"},
      {3, {"run", "--gpu-memory-limit", "3XB"}, "--gpu-memory-limit: bad size '3XB'"},
      {2, {"run", "--offload=lazy"}, "--offload: unknown offload strategy 'lazy'"},
      {3, {"run", "--device", "0x1"}, "--device: bad device '0x1'"},
      {3, {"run", "--devices", "2.0"}, "--devices: bad device count '2.0'"},
      /* an empty value, whatever the option */
      {3, {"run", "--trace", ""}, "omptensor run: option '--trace' has an empty value (FILE)"},
      {2, {"run", "--max-new-tokens="}, "option '--max-new-tokens' has an empty value (N)"},
      {3, {"run", "-o", ""}, "option '--logits-out' has an empty value (FILE)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    OT_ASSERT_ERR(run(&s, cases[i].argc, cases[i].argv), OT_ERR_INVALID_ARG, cases[i].sub);
  /* --dtype: the weight storage types only (i32 holds ids) */
  char *i32[] = {"run", "--dtype", "i32"}, *f64[] = {"run", "--dtype", "f64"};
  OT_ASSERT_ERR(run(&s, 3, i32), OT_ERR_DTYPE, "--dtype: 'i32' is not a weight storage type; use f32, f16, bf16, int8 (block-quantized, also q8b), int4");
  OT_ASSERT_ERR(run(&s, 3, f64), OT_ERR_DTYPE, "--dtype: 'f64' is not a weight storage type");
  assert_int_equal(s.settings.has_dtype, 0);
  ot_settings_release(&s.settings);
}

/* The callback's message gets the option in front, and the value unless the
 * message quotes it: one form for every refused value. */
static ot_status refuse(void *user, const ot_opt *opt, const char *value) {
  (void)user;
  if (!opt) return OT_OK;
  if (opt->id == OPT_MAX_NEW) {
    int64_t n;
    return ot_args_int(value, 0, 100, &n);
  }
  if (opt->id == OPT_PROMPT) return ot_set_error(OT_ERR_INVALID_ARG, "ids are numbers");
  return ot_set_error(OT_ERR_INVALID_ARG, "--logits-out: named already");
}

static void test_value_errors(void **state) {
  (void)state;
  const ot_opt *tables[] = {run_opts, NULL};
  char *a1[] = {"run", "--max-new-tokens", "1.5"};
  OT_ASSERT_ERR(ot_args_parse("omptensor run", 3, a1, tables, refuse, NULL), OT_ERR_INVALID_ARG,
                "--max-new-tokens: '1.5' is not a decimal integer (give a whole number from 0 to 100)");
  char *a2[] = {"run", "-n", "101"};
  OT_ASSERT_ERR(ot_args_parse("omptensor run", 3, a2, tables, refuse, NULL), OT_ERR_INVALID_ARG,
                "--max-new-tokens: '101' is out of range (give a whole number from 0 to 100)");
  char *a3[] = {"run", "--prompt-ids", "a\nb\033"};
  OT_ASSERT_ERR(ot_args_parse("omptensor run", 3, a3, tables, refuse, NULL), OT_ERR_INVALID_ARG,
                "--prompt-ids 'a\\x0ab\\x1b': ids are numbers");
  char *a4[] = {"run", "-o", "x.npy"};
  OT_ASSERT_ERR(ot_args_parse("omptensor run", 3, a4, tables, refuse, NULL), OT_ERR_INVALID_ARG,
                "--logits-out: named already");
  assert_null(strstr(ot_last_error(), "--logits-out: --logits-out"));
  /* a long value is shown cut */
  char longv[300];
  memset(longv, '7', sizeof longv - 1);
  longv[sizeof longv - 1] = '\0';
  char *a5[] = {"run", "--prompt-ids", longv};
  OT_ASSERT_ERR(ot_args_parse("omptensor run", 3, a5, tables, refuse, NULL), OT_ERR_INVALID_ARG, "...': ids are numbers");
  assert_true(strlen(ot_last_error()) < 120);
}

/* The numbers of option values: decimal, all of the value, in range. */
static void test_numbers(void **state) {
  (void)state;
  int64_t i;
  uint64_t u;
  double d;
  OT_ASSERT_OK(ot_args_int("42", 0, 100, &i));
  assert_int_equal(i, 42);
  OT_ASSERT_OK(ot_args_int("-7", -10, 10, &i));
  assert_int_equal(i, -7);
  OT_ASSERT_OK(ot_args_int("+7", 0, 10, &i));
  assert_int_equal(i, 7);
  OT_ASSERT_OK(ot_args_int("007", 0, 10, &i));
  assert_int_equal(i, 7);
  OT_ASSERT_OK(ot_args_int("-9223372036854775808", INT64_MIN, INT64_MAX, &i));
  assert_true(i == INT64_MIN);
  OT_ASSERT_OK(ot_args_int("9223372036854775807", INT64_MIN, INT64_MAX, &i));
  assert_true(i == INT64_MAX);
  i = 5;
  const char *not_int[] = {"", " 1", "1 ", "1.5", "1.0", "1e3", "0x10", "0X10", "010x", "--1", "+-1", "-", "+",
                           "nan", "inf", "1,000", "\t1", "１"};
  for (size_t k = 0; k < sizeof not_int / sizeof not_int[0]; k++) {
    OT_ASSERT_ERR(ot_args_int(not_int[k], INT64_MIN, INT64_MAX, &i), OT_ERR_INVALID_ARG, "is not a decimal integer");
    OT_ASSERT_ERR(ot_args_u64(not_int[k], 0, UINT64_MAX, &u), OT_ERR_INVALID_ARG, "is not a decimal integer");
  }
  assert_int_equal(i, 5); /* untouched on failure */
  const char *out_of_int[] = {"9223372036854775808", "-9223372036854775809", "99999999999999999999999"};
  for (size_t k = 0; k < sizeof out_of_int / sizeof out_of_int[0]; k++)
    OT_ASSERT_ERR(ot_args_int(out_of_int[k], INT64_MIN, INT64_MAX, &i), OT_ERR_INVALID_ARG, "is out of range");
  OT_ASSERT_ERR(ot_args_int("2147483648", 0, INT32_MAX, &i), OT_ERR_INVALID_ARG,
                "'2147483648' is out of range (give a whole number from 0 to 2147483647)");
  OT_ASSERT_ERR(ot_args_int("-1", 0, 10, &i), OT_ERR_INVALID_ARG, "'-1' is out of range");
  OT_ASSERT_OK(ot_args_u64("18446744073709551615", 0, UINT64_MAX, &u));
  assert_true(u == UINT64_MAX);
  OT_ASSERT_OK(ot_args_u64("-0", 0, UINT64_MAX, &u));
  assert_true(u == 0);
  OT_ASSERT_ERR(ot_args_u64("18446744073709551616", 0, UINT64_MAX, &u), OT_ERR_INVALID_ARG, "is out of range");
  OT_ASSERT_ERR(ot_args_u64("-1", 0, UINT64_MAX, &u), OT_ERR_INVALID_ARG, "'-1' is out of range");

  OT_ASSERT_OK(ot_args_float("0.5", 0, 1, &d));
  assert_true(d == 0.5);
  OT_ASSERT_OK(ot_args_float(".5", 0, 1, &d));
  OT_ASSERT_OK(ot_args_float("5.", 0, 10, &d));
  OT_ASSERT_OK(ot_args_float("-2.5e-3", -1, 1, &d));
  assert_true(d == -2.5e-3);
  OT_ASSERT_OK(ot_args_float("1E2", 0, 100, &d));
  OT_ASSERT_OK(ot_args_float("1e-400", 0, 1, &d)); /* below double's range: 0, a number in range */
  assert_true(d == 0);
  const char *not_float[] = {"", ".", "e5", "1e", "1e+", "0x1p3", "nan", "inf", "-inf", "infinity", " 1", "1 ",
                             "1.5x", "1..5", "1,5", "+"};
  for (size_t k = 0; k < sizeof not_float / sizeof not_float[0]; k++)
    OT_ASSERT_ERR(ot_args_float(not_float[k], -1e300, 1e300, &d), OT_ERR_INVALID_ARG, "is not a decimal number");
  OT_ASSERT_ERR(ot_args_float("1e400", 0, 1e300, &d), OT_ERR_INVALID_ARG, "'1e400' is out of range");
  OT_ASSERT_ERR(ot_args_float("2", 0, 1, &d), OT_ERR_INVALID_ARG, "'2' is out of range (give a number from 0 to 1)");
  OT_ASSERT_ERR(ot_args_float("-0.001", 0, 1, &d), OT_ERR_INVALID_ARG, "is out of range");
}

static void test_help_text(void **state) {
  (void)state;
  char buf[4096] = {0};
  FILE *f = fmemopen(buf, sizeof buf - 1, "w");
  assert_non_null(f);
  const ot_opt *tables[] = {run_opts, ot_settings_opts(), NULL};
  ot_args_print_help(f, tables);
  fclose(f);
  assert_non_null(strstr(buf, "-h, --help"));
  assert_non_null(strstr(buf, "--prompt-ids IDS"));
  assert_non_null(strstr(buf, "--gpu-memory-limit SIZE"));
  assert_non_null(strstr(buf, "--offload [STRATEGY]")); /* its value may be left out */
  assert_non_null(strstr(buf, "--config FILE"));
  assert_non_null(strstr(buf, "--json "));
}

/* Issue 43: a command's table of only the settings it takes: its help lists
 * nothing else, and its parser refuses the rest by name. */
static void test_settings_subset(void **state) {
  (void)state;
  static const ot_setting mine[] = {OT_SET_JSON, OT_SET_GPU_MEMORY_LIMIT, OT_SET_SEED};
  ot_opt buf[3 + 2];
  const ot_opt *sub = ot_settings_opts_of(mine, 3, buf);
  assert_ptr_equal(sub, buf);
  static const char *const want[] = {"gpu-memory-limit", "json", "seed", "config"}; /* the table's order */
  for (int i = 0; i < 4; i++) assert_string_equal(sub[i].name, want[i]);
  assert_null(sub[4].name);
  assert_int_equal(sub[0].id, OT_OPT_SETTING);
  assert_int_equal(sub[3].id, OT_OPT_CONFIG);
  char help[4096] = {0};
  FILE *f = fmemopen(help, sizeof help - 1, "w");
  assert_non_null(f);
  const ot_opt *tables[] = {run_opts, sub, NULL};
  ot_args_print_help(f, tables);
  fclose(f);
  assert_non_null(strstr(help, "--gpu-memory-limit SIZE"));
  assert_null(strstr(help, "--offload"));
  assert_null(strstr(help, "--trace"));
  seen s;
  ot_settings_init(&s.settings);
  memset(s.log, 0, sizeof s.log);
  char *ok[] = {"info", "--json", "--gpu-memory-limit", "1MB", "--seed", "3"};
  OT_ASSERT_OK(ot_args_parse("omptensor info", 6, ok, tables, on_opt, &s));
  assert_int_equal(s.settings.json, 1);
  assert_true(s.settings.gen.seed == 3);
  char *bad[] = {"info", "--trace", "t.json"};
  OT_ASSERT_ERR(ot_args_parse("omptensor info", 3, bad, tables, on_opt, &s), OT_ERR_INVALID_ARG,
                "unknown option '--trace'");
  ot_settings_release(&s.settings);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_offload_alone),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_value_errors),
      cmocka_unit_test(test_numbers),
      cmocka_unit_test(test_help_text),
      cmocka_unit_test(test_settings_subset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
