/* cmd_run.c — `omptensor run MODEL_DIR`: generate from a Hugging Face model,
 * text in and text out (tokenizer.json), or token ids; one prompt, or a
 * JSONL batch job (batch.c). */
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "interrupt.h"
#include "ranks.h"
#include "cli.h"
#include "common.h"
#include "prompt.h"
#include "report.h"
#include "omptensor/hfconfig.h"
#include "omptensor/models.h"
#include "omptensor/tokenizer.h"

enum { OPT_HELP = 1, OPT_TEXT, OPT_TEXT_FILE, OPT_IDS, OPT_IDS_FILE, OPT_PROMPTS, OPT_OUT, OPT_LOGITS, OPT_BATCH,
       OPT_MICRO, OPT_STAGE_COPIES };

static const ot_opt run_opts[] = {
    {"help", 'h', NULL, "show this help", OPT_HELP},
    {"prompt", 'p', "TEXT", "the prompt as text (the model's tokenizer.json encodes it)", OPT_TEXT},
    {"prompt-file", 0, "FILE", "the prompt as text from a file, or - for stdin", OPT_TEXT_FILE},
    {"prompt-ids", 0, "IDS", "the prompt as comma-separated token ids, e.g. 1,2,3", OPT_IDS},
    {"prompt-ids-file", 0, "FILE", "the prompt as token ids from a file (commas or whitespace), or - for stdin",
     OPT_IDS_FILE},
    {"prompts", 0, "IN.jsonl",
     "a batch job: one {\"id\": ..., \"prompt\": \"...\"} (or \"prompt_ids\": [...]) per line; - for stdin",
     OPT_PROMPTS},
    {"out", 'o', "OUT.jsonl", "the batch job's results, a line per prompt; a rerun skips the ids already there (- for "
     "stdout: nothing to resume from)", OPT_OUT},
    {"logits-out", 0, "FILE.npy", "write the prompt's logits, float32 [prompt_len, vocab]", OPT_LOGITS},
    {"batch", 0, "N", "with --prompts: decode up to N prompts at once, one weight stream for all (a finished "
     "prompt's place goes to the next at once); without it, one prompt after another", OPT_BATCH},
    {"micro-batches", 0, "M", "with --batch N and --devices 2 or more: each decode step's N sequences in M groups "
     "that are in different devices' stages at once (a pipeline; default 1: the step goes through the devices one "
     "after another)", OPT_MICRO},
    {"stage-copies", 0, "auto|host|peer", "with --micro-batches: how activations cross from one device's stage to "
     "the next: peer (device to device), host (through pinned host memory), auto (peer where the devices reach "
     "each other, the default)", OPT_STAGE_COPIES},
    {0}};

typedef struct run_args {
  ot_cli_session *s;
  const char *model;
  const char *text, *text_file, *ids_text, *ids_file, *prompts, *out, *logits_out;
  int help;
  int batch; /* --batch N (0: not given) */
  int micro; /* --micro-batches M (0: not given) */
  int copies_given;              /* --stage-copies given */
  ot_stage_copies stage_copies;  /* its value (default auto) */
} run_args;

static ot_status on_opt(void *user, const ot_opt *o, const char *v) {
  run_args *a = user;
  ot_status st;
  if (ot_cli_session_or_model(a->s, o, v, &a->model, &st)) return st;
  switch (o->id) {
  case OPT_HELP: a->help = 1; return OT_OK;
  case OPT_TEXT: a->text = v; return OT_OK;
  case OPT_TEXT_FILE: a->text_file = v; return OT_OK;
  case OPT_IDS: a->ids_text = v; return OT_OK;
  case OPT_IDS_FILE: a->ids_file = v; return OT_OK;
  case OPT_PROMPTS: a->prompts = v; return OT_OK;
  case OPT_OUT: a->out = v; return OT_OK;
  case OPT_LOGITS: a->logits_out = v; return OT_OK;
  case OPT_BATCH: return ot_cli_int(v, 1, 4096, &a->batch);
  case OPT_MICRO: return ot_cli_int(v, 1, 4096, &a->micro);
  case OPT_STAGE_COPIES: a->copies_given = 1; return ot_stage_copies_parse(v, &a->stage_copies);
  default: return ot_set_error(OT_ERR_INVALID_ARG, "unhandled option --%s", o->name);
  }
}

/* Exactly one prompt source, and the options that go with it. */
static ot_status check_sources(const run_args *a) {
  const int n = !!a->text + !!a->text_file + !!a->ids_text + !!a->ids_file + !!a->prompts;
  if (n != 1)
    return ot_set_error(OT_ERR_INVALID_ARG, "%s: give exactly one of --prompt, --prompt-file, --prompt-ids, "
                                            "--prompt-ids-file and --prompts (see omptensor run --help)",
                        n ? "more than one prompt" : "no prompt");
  if (a->prompts && !a->out)
    return ot_set_error(OT_ERR_INVALID_ARG, "--prompts %s: give --out OUT.jsonl for the results", a->prompts);
  if (a->out && !a->prompts)
    return ot_set_error(OT_ERR_INVALID_ARG, "--out %s is the batch job's results file; it needs --prompts IN.jsonl",
                        a->out);
  if (a->batch && !a->prompts)
    return ot_set_error(OT_ERR_INVALID_ARG, "--batch %d runs the prompts of a batch job at once; it needs --prompts "
                                            "IN.jsonl", a->batch);
  if (a->micro > 1 && a->batch < 2)
    return ot_set_error(OT_ERR_INVALID_ARG, "--micro-batches %d splits the sequences decoded at once; it needs "
                                            "--prompts IN.jsonl with --batch N of at least 2", a->micro);
  if (a->copies_given && a->micro < 2)
    return ot_set_error(OT_ERR_INVALID_ARG, "--stage-copies %s chooses how micro-batches cross between devices; it "
                                            "needs --micro-batches M of at least 2", ot_stage_copies_name(a->stage_copies));
  if (a->prompts && a->logits_out)
    return ot_set_error(OT_ERR_INVALID_ARG, "--logits-out writes one prompt's logits; it does not go with --prompts");
  return OT_OK;
}

/* A file's name in messages: "stdin" for -. */
static const char *stdin_or(const char *path) { return strcmp(path, "-") ? path : "stdin"; }

/* After the settings: what shares stdout or stdin. */
static ot_status check_streams(const run_args *a, const ot_cli_session *s) {
  const char *in = a->prompts ? "--prompts" : a->text_file ? "--prompt-file" : a->ids_file ? "--prompt-ids-file" : NULL;
  const char *path = a->prompts ? a->prompts : a->text_file ? a->text_file : a->ids_file;
  if (in && !strcmp(path, "-") && s->config_path && !strcmp(s->config_path, "-"))
    return ot_set_error(OT_ERR_INVALID_ARG, "%s - and --config - both read stdin; give one of them as a file", in);
  if (a->out && !strcmp(a->out, "-") && s->settings.json)
    return ot_set_error(OT_ERR_INVALID_ARG, "--out - writes the results to stdout, where --json's summary goes too: "
                                            "give --out a file, or leave out --json");
  if (a->prompts && !strcmp(a->prompts, "-") && ot_cli_ranks(s) > 1)
    return ot_set_error(OT_ERR_INVALID_ARG, "--prompts -: under mpirun/srun every rank reads the prompts, and only "
                                            "one has stdin; give a file");
  return OT_OK;
}

/* Where max_new_tokens came from, for a message about it. */
static const char *max_new_from(const ot_cli_session *s, char *buf, size_t cap) {
  switch (s->settings.source[OT_SET_MAX_NEW_TOKENS]) {
  case OT_SRC_FLAG: return "--max-new-tokens";
  case OT_SRC_ENV: return "OMPTENSOR_MAX_NEW_TOKENS";
  case OT_SRC_FILE:
    snprintf(buf, cap, "%s: generation.max_new_tokens", s->settings.file ? s->settings.file : "--config");
    return buf;
  case OT_SRC_MODEL: return "generation_config.json's max_new_tokens";
  default: return "max_new_tokens (generation_config.json's, else the default)";
  }
}

/* The model's defaults (generation_config.json, EOS ids), then the
 * settings from env, YAML and flags that were given. Sampling is on when
 * any of temperature, top-k, top-p is given, or when the model's
 * do_sample says so and --greedy is not given; a temperature of 0 is greedy. */
static ot_status gen_opts(const ot_cli_session *s, const char *model, ot_gen_opts *g) {
  *g = ot_gen_opts_default();
  OT_TRY(ot_gen_opts_from_model(model, g));
  const ot_gen_settings *gs = &s->settings.gen;
  const ot_setting_source *src = s->settings.source;
  if (src[OT_SET_MAX_NEW_TOKENS] != OT_SRC_DEFAULT) g->max_new_tokens = gs->max_new_tokens;
  if (src[OT_SET_TEMPERATURE] || src[OT_SET_TOP_K] || src[OT_SET_TOP_P]) g->greedy = 0;
  if (src[OT_SET_TEMPERATURE]) g->temperature = gs->temperature;
  if (src[OT_SET_TOP_K]) g->top_k = gs->top_k;
  if (src[OT_SET_TOP_P]) g->top_p = gs->top_p;
  if (src[OT_SET_SEED]) g->seed = gs->seed;
  if (g->temperature == 0.0f || gs->greedy) g->greedy = 1;
  if (gs->ignore_eos) g->n_eos = 0;
  g->kv_dtype = gs->kv_dtype; /* OT_F32 unless given */
  return OT_OK;
}

/* The model's tokenizer.json: required for text (`need`), else read if the
 * model has one (for the "text" of the results), and a file that cannot be
 * read then only costs the text, said as a notice. */
static ot_status load_tokenizer(const char *model, int need, ot_tokenizer **tk) {
  *tk = NULL;
  ot_status st = ot_tokenizer_load(model, tk);
  if (st == OT_OK || need) {
    if (st == OT_ERR_NOT_FOUND)
      return ot_set_error(st, "%s has no tokenizer.json to encode a text prompt; give token ids with --prompt-ids or "
                              "--prompt-ids-file, or copy the model's tokenizer.json there",
                          model);
    return st;
  }
  if (st != OT_ERR_NOT_FOUND) {
    char m[512];
    snprintf(m, sizeof m, "%s", ot_last_error());
    ot_cli_notice("the results have no text: %s", m);
  }
  ot_clear_error();
  return OT_OK;
}

/* One prompt as ids, from whichever source was given. */
static ot_status read_prompt(const run_args *a, const ot_tokenizer *tk, int32_t **ids, int *n) {
  if (a->ids_text) return ot_cli_parse_ids(a->ids_text, strlen(a->ids_text), "--prompt-ids", ids, n);
  if (a->ids_file) return ot_cli_read_ids_file(a->ids_file, ids, n);
  char *buf = NULL;
  size_t len;
  const char *text = a->text, *label = a->text ? "--prompt" : stdin_or(a->text_file);
  if (a->text_file) {
    OT_TRY(ot_cli_read_text(a->text_file, OT_CLI_PROMPT_MAX, &buf, &len));
    text = buf;
    if (ot_cli_looks_like_ids(buf, len))
      ot_cli_notice("%s holds only numbers; --prompt-file reads text, so they are encoded as text. "
                                   "For token ids use --prompt-ids-file",
                     a->text_file);
  } else {
    len = strlen(text);
  }
  size_t k = 0;
  ot_status st = ot_tokenizer_encode(tk, text, len, 1, ids, &k);
  free(buf);
  if (st != OT_OK) return ot_prefix_error(st, "%s", label);
  if (k == 0 || k > INT32_MAX) {
    free(*ids);
    *ids = NULL;
    return ot_set_error(OT_ERR_INVALID_ARG, "%s: %s", label,
                        k ? "the prompt is too long" : "the prompt encodes to no tokens; give some text");
  }
  *n = (int)k;
  return OT_OK;
}

/* The text as it becomes final, straight to stdout. */
static ot_status print_text(void *user, const char *piece, size_t n) {
  (void)user;
  if (fwrite(piece, 1, n, stdout) != n || fflush(stdout) != 0)
    return ot_set_error(OT_ERR_IO, "writing the generated text to stdout failed");
  return OT_OK;
}

static void print_help(const ot_opt *const *tables) {
  printf("usage: omptensor run MODEL_DIR|MODEL.gguf (--prompt TEXT | --prompt-file FILE|- | --prompt-ids IDS |\n"
         "                               --prompt-ids-file FILE|- | --prompts IN.jsonl|- --out OUT.jsonl|-\n"
         "                               [--batch N])\n"
         "                              [options]\n\n"
         "Generates under the device memory budget from a Hugging Face model directory (config.json,\n"
         "model.safetensors or shards, tokenizer.json) of Llama 1-3, Mistral, Qwen2, Gemma, Phi-3,\n"
         "Mixtral, Qwen2-MoE or GPT-2, or from a llama.cpp GGUF file of architecture llama (Llama,\n"
         "Mistral) or qwen2 (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K tensors). A text prompt's\n"
         "continuation is streamed to stdout as it is generated, the summary goes to stderr; with\n"
         "--json one JSON object on stdout has it as \"text\" beside \"tokens\". Generation stops at the\n"
         "model's EOS ids (config.json / generation_config.json) unless --ignore-eos, and takes\n"
         "generation_config.json's defaults (do_sample, temperature, top_k, top_p, max_new_tokens)\n"
         "under the environment, the --config file and the flags. Ctrl-C stops at the next token and\n"
         "prints the summary of what was made (exit status 130); a batch job keeps its finished lines.\n"
         "- is stdin for --prompt-file, --prompt-ids-file, --prompts and --config, stdout for --out.\n\noptions:\n");
  ot_args_print_help(stdout, tables);
}

int ot_cli_run(int argc, char **argv) {
  const char *prog = "omptensor run";
  ot_cli_session s;
  ot_cli_session_init(&s, prog);
  run_args a = {.s = &s};
  const ot_opt *tables[] = {run_opts, ot_settings_gen_opts(), ot_settings_opts(), ot_cli_common_opts(), NULL};
  ot_status st = ot_args_parse(prog, argc, argv, tables, on_opt, &a);
  if (st == OT_OK && a.help) {
    print_help(tables);
    ot_cli_session_end(&s);
    return 0;
  }
  if (st == OT_OK && !a.model) st = ot_set_error(OT_ERR_INVALID_ARG, "no model directory given (see omptensor run --help)");
  if (st == OT_OK) st = check_sources(&a);
  if (st == OT_OK) st = ot_cli_session_settings(&s);
  /* under mpirun/srun the ranks share a batch job (batch.c); one prompt is one process's */
  if (st == OT_OK) st = ot_cli_ranks_start(&s);
  if (st == OT_OK && ot_cli_ranks(&s) > 1 && !a.prompts)
    st = ot_set_error(OT_ERR_INVALID_ARG, "under mpirun/srun (%d ranks) run takes a batch job, --prompts IN.jsonl "
                                          "--out OUT.jsonl, whose prompts the ranks share; run one prompt as one "
                                          "process",
                      ot_cli_ranks(&s));
  if (st == OT_OK) st = check_streams(&a, &s);
  ot_gen_opts g = ot_gen_opts_default();
  if (st == OT_OK) st = gen_opts(&s, a.model, &g);
  /* for --verbose: where each value came from */
  if (st == OT_OK) st = ot_settings_take_model_gen(&s.settings, a.model);
  if (st == OT_OK && a.micro > 1 && s.settings.devices < 2)
    st = ot_set_error(OT_ERR_INVALID_ARG, "--micro-batches %d overlaps the stages of a model split over several "
                                          "devices; give --devices 2 or more (one device has one stage)", a.micro);
  s.micro_batches = a.micro; /* into s.sched when the session starts */
  s.stage_copies = a.stage_copies;
  const int text_in = a.text || a.text_file;
  ot_tokenizer *tk = NULL;
  if (st == OT_OK) st = load_tokenizer(a.model, text_in, &tk);
  char from[4200];
  if (st == OT_OK && a.prompts) {
    int rc = ot_cli_run_batch(&s, a.model, tk, &g, max_new_from(&s, from, sizeof from), a.prompts, a.out, a.batch);
    ot_tokenizer_destroy(tk);
    ot_cli_session_end(&s);
    return rc;
  }
  int32_t *ids = NULL;
  int n_ids = 0;
  if (st == OT_OK) st = read_prompt(&a, tk, &ids, &n_ids);
  ot_hf_config cfg;
  if (st == OT_OK) st = ot_hf_config_load(a.model, &cfg);
  const char *label = a.ids_text ? "--prompt-ids"
                      : a.ids_file ? stdin_or(a.ids_file)
                      : a.text     ? "--prompt"
                                   : stdin_or(a.text_file ? a.text_file : "-");
  if (st == OT_OK)
    st = ot_cli_check_prompt(&cfg, a.model, ids, n_ids, g.max_new_tokens, label, max_new_from(&s, from, sizeof from));
  g.logits_out = a.logits_out;
  if (st == OT_OK) st = ot_cli_check_output("--logits-out", g.logits_out); /* before the work, not after it */
  if (st == OT_OK) st = ot_cli_session_start(&s);
  if (st == OT_OK) st = ot_cli_check_trace(&s);
  ot_lm *m = NULL;
  if (st == OT_OK) {
    /* Names, shapes and the plans under the budget, before any weight is read. */
    g.sched = s.sched;
    st = ot_model_load_shapes(s.ctx, a.model, ot_cli_weight_dtype(&s.settings), &m);
    if (st == OT_OK) st = ot_cli_budget_error(&s, ot_generate_check(m, n_ids, &g));
    ot_lm_destroy(m);
    m = NULL;
  }
  if (st == OT_OK) st = ot_model_load(s.ctx, a.model, ot_cli_weight_dtype(&s.settings), ot_cli_progress, &s, &m);
  ot_gen_result r = {0};
  /* A text prompt's answer is read as it comes: streamed to stdout, with
   * the summary on stderr (no progress bar over it); --json and id prompts
   * print what they always did, on stdout. */
  const int stream = text_in && !s.settings.json;
  if (st == OT_OK) {
    ot_cli_input_accepted();
    g.sched = s.sched;
    g.trace = s.trace;
    g.progress = stream ? NULL : ot_cli_progress;
    g.progress_user = &s;
    g.tokenizer = tk;
    g.on_text = stream ? print_text : NULL;
    g.should_stop = ot_cli_should_stop; /* Ctrl-C: stop at the next token, then the summary of what was made */
    ot_cli_interrupt_arm();
    if (s.verbose) fprintf(stderr, "omptensor run: generating; Ctrl-C stops at the next token, then the summary\n");
    st = ot_generate(m, ids, n_ids, &g, &r);
    ot_cli_interrupt_disarm();
    if (stream && st == OT_OK) st = print_text(NULL, "\n", 1);
  }
  if (st == OT_OK) st = ot_cli_report(&s, a.model, m, &r, stream ? stderr : stdout);
  /* several ranks reach here only refused, each alike: rank 0 says why */
  int rc = st == OT_OK ? (ot_cli_interrupted() ? OT_CLI_EXIT_INTERRUPTED : 0)
           : ot_cli_is_root(&s) ? ot_cli_fail(prog, st)
                                : ot_cli_exit_code(st);
  ot_gen_result_free(&r);
  ot_lm_destroy(m);
  ot_tokenizer_destroy(tk);
  free(ids);
  ot_cli_session_end(&s);
  return rc;
}
