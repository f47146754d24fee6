/* fuzz_args.c — the command line: ot_args_parse (src/config/args.c) with the
 * real settings options (ot_settings_opts(): every setting and --config), a
 * table like `omptensor run`'s and `omptensor train`'s, and -v; argv is the
 * input split at NUL bytes (argv[0] is the subcommand). Settings options go
 * to ot_settings_set_flag as the CLI's do; --config is not loaded (no file
 * reads). The first byte picks a callback that fails at its k-th call.
 *
 * Promises checked: every option handed to the callback is one of the
 * tables' entries, with a value exactly when it has a metavar, and every
 * value points into argv (or is "balanced" for --offload given alone); positional arguments are never NULL; a callback
 * error comes back as it was; the parser's own errors are
 * OT_ERR_INVALID_ARG starting with "PROG: ". */
#include <stdio.h>

#include "fuzz_common.h"
#include "omptensor/args.h"

enum { OPT_HELP = 1, OPT_TEXT, OPT_TEXT_FILE, OPT_IDS, OPT_FILE, OPT_PROMPTS, OPT_OUT, OPT_LOGITS, OPT_DATA,
       OPT_BATCH, OPT_STEPS, OPT_SAVE, OPT_DRY, OPT_VERBOSE };

/* `run`'s own options (src/cli/cmd_run.c); its generation options come from
 * the settings table (ot_settings_gen_opts), as in the command. */
static const ot_opt run_opts[] = {
    {"help", 'h', NULL, "show this help", OPT_HELP},
    {"prompt", 'p', "TEXT", "the prompt as text", OPT_TEXT},
    {"prompt-file", 0, "FILE", "the prompt as text from a file", OPT_TEXT_FILE},
    {"prompt-ids", 0, "IDS", "prompt as comma-separated token ids", OPT_IDS},
    {"prompt-ids-file", 0, "FILE", "prompt from a file of token ids", OPT_FILE},
    {"prompts", 0, "IN.jsonl", "a batch job", OPT_PROMPTS},
    {"out", 'o', "OUT.jsonl", "the batch job's results", OPT_OUT},
    {"logits-out", 0, "FILE.npy", "write the prompt's logits", OPT_LOGITS},
    {0}};

static const ot_opt train_opts[] = {
    {"data", 0, "FILE", "training tokens", OPT_DATA},
    {"batch", 'b', "B", "sequences per micro-batch", OPT_BATCH},
    {"steps", 0, "N", "optimizer steps", OPT_STEPS},
    {"save", 0, "DIR", "write the trained model there", OPT_SAVE},
    {"dry-run", 0, NULL, "plan only", OPT_DRY},
    {0}};

static const ot_opt common_opts[] = {{"verbose", 'v', NULL, "print the settings", OPT_VERBOSE}, {0}};

#define MAX_ARGS 64

typedef struct state {
  int argc;
  char **argv;
  const ot_opt *const *tables;
  ot_settings settings;
  int calls, fail_at; /* fail_at: the call that returns an error (0: none) */
} state;

static int in_table(const ot_opt *const *tables, const ot_opt *o) {
  for (int t = 0; tables[t]; t++)
    for (const ot_opt *p = tables[t]; p->name; p++)
      if (p == o) return 1;
  return 0;
}

static int in_argv(const state *s, const char *v) {
  for (int i = 1; i < s->argc; i++)
    if (v >= s->argv[i] && v <= s->argv[i] + strlen(s->argv[i])) return 1;
  return 0;
}

static ot_status on_opt(void *user, const ot_opt *o, const char *v) {
  state *s = user;
  if (++s->calls > s->argc) abort(); /* at most one call per argument */
  if (o) {
    if (!in_table(s->tables, o) || !o->metavar != !v) abort();
  } else if (!v) {
    abort();
  }
  /* a value points into argv, or is --offload's implicit one (given alone) */
  if (v && !in_argv(s, v) && !(o && !strcmp(o->name, "offload") && !strcmp(v, "balanced"))) abort();
  if (s->calls == s->fail_at) return OT_ERR_UNSUPPORTED; /* a status the parser never makes itself */
  if (o && o->id == OT_OPT_SETTING) return ot_settings_set_flag(&s->settings, o->name, v);
  return OT_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull;
  if (!devnull) devnull = fopen("/dev/null", "w");
  if (size == 0) return 0;
  state s = {0};
  s.fail_at = data[0] & 0x80 ? (data[0] & 0x7f) + 1 : 0;
  data++, size--;
  /* argv from the input split at NUL bytes, each an exact-size heap block */
  char *argv[MAX_ARGS + 1];
  int argc = 0;
  argv[argc++] = ot_fuzz_cstr((const uint8_t *)"omptensor run", 13);
  for (size_t i = 0; argc < MAX_ARGS;) {
    size_t j = i;
    while (j < size && data[j]) j++;
    argv[argc++] = ot_fuzz_cstr(data + i, j - i);
    if (j >= size) break;
    i = j + 1;
  }
  argv[argc] = NULL;
  const ot_opt *tables[] = {run_opts, ot_settings_gen_opts(), train_opts, ot_settings_opts(), common_opts, NULL};
  s.argc = argc;
  s.argv = argv;
  s.tables = tables;
  ot_settings_init(&s.settings);
  ot_status st = ot_args_parse("omptensor run", argc, argv, tables, on_opt, &s);
  if (st != OT_OK) {
    if (s.fail_at && s.calls == s.fail_at) {
      if (st != OT_ERR_UNSUPPORTED) abort(); /* the callback's status, as it was */
    } else if (st == OT_ERR_INVALID_ARG && strncmp(ot_last_error(), "omptensor run: ", 15) &&
               strncmp(ot_last_error(), "--", 2)) {
      abort(); /* neither the parser's message nor a setting's ("--gpu-memory-limit: ...") */
    }
  } else {
    ot_ctx_opts o = ot_ctx_opts_default();
    (void)ot_settings_to_ctx_opts(&s.settings, &o);
    if (devnull) ot_settings_print(devnull, &s.settings);
  }
  ot_settings_release(&s.settings);
  for (int i = 0; i < argc; i++) free(argv[i]);
  return 0;
}
