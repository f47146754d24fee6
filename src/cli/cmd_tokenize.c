/* cmd_tokenize.c — `omptensor tokenize` and `omptensor detokenize`: text to
 * ids and back with a model's tokenizer.json (tokenizer.h), no Python. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "prompt.h"
#include "report.h"
#include "omptensor/args.h"
#include "omptensor/tokenizer.h"

#define MAX_TEXT (256u << 20) /* a text file: 256 MiB at most */

enum { OPT_HELP = 1, OPT_TEXT, OPT_TEXT_FILE, OPT_NO_SPECIAL, OPT_KEEP_SPECIAL, OPT_IDS, OPT_JSON };

static const ot_opt tok_opts[] = {
    {"help", 'h', NULL, "show this help", OPT_HELP},
    {"text", 0, "TEXT", "the text to tokenize", OPT_TEXT},
    {"text-file", 0, "FILE", "read the text from FILE (- for standard input)", OPT_TEXT_FILE},
    {"no-special", 0, NULL, "do not add the special tokens the tokenizer's template adds (BOS, ...)", OPT_NO_SPECIAL},
    {"json", 0, NULL, "print {\"ids\": [...], \"tokens\": [...]}", OPT_JSON},
    {0}};

static const ot_opt detok_opts[] = {
    {"help", 'h', NULL, "show this help", OPT_HELP},
    {"ids", 0, "IDS", "comma-separated token ids (\"\": none, the empty text)", OPT_IDS},
    {"keep-special", 0, NULL, "keep special tokens in the text (skipped by default)", OPT_KEEP_SPECIAL},
    {"json", 0, NULL, "print {\"text\": ...}", OPT_JSON},
    {0}};

typedef struct tok_args {
  int help, no_special, keep_special, json;
  const char *model, *text, *text_file, *ids;
} tok_args;

static ot_status on_opt(void *user, const ot_opt *o, const char *v) {
  tok_args *a = user;
  if (!o) {
    if (a->model) return ot_set_error(OT_ERR_INVALID_ARG, "unexpected argument '%s' (one MODEL_DIR only)", v);
    a->model = v;
    return OT_OK;
  }
  switch (o->id) {
  case OPT_HELP: a->help = 1; break;
  case OPT_TEXT: a->text = v; break;
  case OPT_TEXT_FILE: a->text_file = v; break;
  case OPT_NO_SPECIAL: a->no_special = 1; break;
  case OPT_KEEP_SPECIAL: a->keep_special = 1; break;
  case OPT_IDS: a->ids = v; break;
  case OPT_JSON: a->json = 1; break;
  }
  return OT_OK;
}

/* The options of `prog` (one table); prints the help (usage first) and
 * sets *done for --help; MODEL_DIR is required. */
static ot_status parse(const char *prog, int argc, char **argv, const ot_opt *opts, const char *usage, tok_args *a,
                       int *done) {
  const ot_opt *tables[] = {opts, NULL};
  *done = 0;
  OT_TRY(ot_args_parse(prog, argc, argv, tables, on_opt, a));
  if (a->help) {
    fputs(usage, stdout);
    ot_args_print_help(stdout, tables);
    *done = 1;
    return OT_OK;
  }
  if (!a->model) return ot_set_error(OT_ERR_INVALID_ARG, "give MODEL_DIR (see %s --help)", prog);
  return OT_OK;
}

int ot_cli_tokenize(int argc, char **argv) {
  const char *prog = "omptensor tokenize";
  tok_args a = {0};
  int done;
  ot_status st = parse(prog, argc, argv, tok_opts,
                       "usage: omptensor tokenize MODEL_DIR (--text TEXT | --text-file FILE|-) [--no-special] [--json]\n\n"
                       "Prints the token ids of the text, comma-separated, by the model's tokenizer.json\n"
                       "(only that file of MODEL_DIR is read; MODEL_DIR may also be the file).\n\n",
                       &a, &done);
  if (st == OT_OK && done) return 0;
  if (st == OT_OK && !a.text == !a.text_file)
    st = ot_set_error(OT_ERR_INVALID_ARG, "give exactly one of --text and --text-file (see omptensor tokenize --help)");
  char *text = NULL;
  size_t len = 0;
  if (st == OT_OK && a.text) len = strlen(a.text);
  else if (st == OT_OK) st = ot_cli_read_text(a.text_file, MAX_TEXT, &text, &len);
  ot_tokenizer *tk = NULL;
  if (st == OT_OK) st = ot_tokenizer_load(a.model, &tk);
  int32_t *ids = NULL;
  size_t n = 0;
  if (st == OT_OK) {
    st = ot_tokenizer_encode(tk, text ? text : a.text, len, !a.no_special, &ids, &n);
    if (st == OT_ERR_INVALID_ARG) st = a.text ? ot_prefix_error(st, "--text") : ot_prefix_error(st, "--text-file %s", a.text_file);
  }
  if (st == OT_OK && a.json) {
    json_t *o = json_object(), *ji = json_array(), *jt = json_array();
    for (size_t i = 0; i < n; i++) {
      json_array_append_new(ji, json_integer(ids[i]));
      json_array_append_new(jt, json_string(ot_tokenizer_token(tk, ids[i])));
    }
    json_object_set_new(o, "ids", ji);
    json_object_set_new(o, "tokens", jt);
    st = ot_cli_json_print(o);
  } else if (st == OT_OK) {
    for (size_t i = 0; i < n; i++) printf("%s%d", i ? "," : "", ids[i]);
    putchar('\n');
  }
  free(ids);
  free(text);
  ot_tokenizer_destroy(tk);
  return st == OT_OK ? 0 : ot_cli_fail(prog, st);
}

/* --ids "" (or --ids=) is a value here, the empty list, where the option
 * parser refuses every empty value (an unset shell variable): it reaches
 * the parser as a separator only. */
#define EMPTY_IDS " "
static void empty_ids_as_separator(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--")) return;
    if (!strcmp(argv[i], "--ids") && i + 1 < argc && !argv[i + 1][0]) argv[++i] = EMPTY_IDS;
    else if (!strcmp(argv[i], "--ids=")) argv[i] = "--ids=" EMPTY_IDS;
  }
}

int ot_cli_detokenize(int argc, char **argv) {
  const char *prog = "omptensor detokenize";
  tok_args a = {0};
  int done;
  empty_ids_as_separator(argc, argv);
  ot_status st = parse(prog, argc, argv, detok_opts,
                       "usage: omptensor detokenize MODEL_DIR --ids 1,2,3 [--keep-special] [--json]\n\n"
                       "Prints the text of the ids by the model's tokenizer.json; special tokens are\n"
                       "left out unless --keep-special.\n\n",
                       &a, &done);
  if (st == OT_OK && done) return 0;
  if (st == OT_OK && !a.ids) st = ot_set_error(OT_ERR_INVALID_ARG, "give --ids (see omptensor detokenize --help)");
  int32_t *ids = NULL;
  int n = 0;
  /* no ids at all is the empty list, which transformers decodes to "" */
  if (st == OT_OK && a.ids[strspn(a.ids, EMPTY_IDS)]) st = ot_cli_parse_ids(a.ids, strlen(a.ids), "--ids", &ids, &n);
  ot_tokenizer *tk = NULL;
  if (st == OT_OK) st = ot_tokenizer_load(a.model, &tk);
  char *text = NULL;
  size_t len = 0;
  if (st == OT_OK) {
    st = ot_tokenizer_decode(tk, ids, (size_t)n, !a.keep_special, &text, &len);
    if (st == OT_ERR_INVALID_ARG) st = ot_prefix_error(st, "--ids");
  }
  if (st == OT_OK && a.json) {
    json_t *o = json_object();
    json_object_set_new(o, "text", json_stringn(text, len));
    st = ot_cli_json_print(o);
  } else if (st == OT_OK) {
    fwrite(text, 1, len, stdout);
    putchar('\n');
  }
  free(text);
  free(ids);
  ot_tokenizer_destroy(tk);
  return st == OT_OK ? 0 : ot_cli_fail(prog, st);
}
