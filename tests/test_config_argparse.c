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
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    OT_ASSERT_ERR(run(&s, cases[i].argc, cases[i].argv), OT_ERR_INVALID_ARG, cases[i].sub);
  ot_settings_release(&s.settings);
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
  assert_non_null(strstr(buf, "--offload STRATEGY"));
  assert_non_null(strstr(buf, "--config FILE"));
  assert_non_null(strstr(buf, "--json "));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_help_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
