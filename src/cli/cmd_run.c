/* cmd_run.c — `omptensor run MODEL_DIR`: generate from a Hugging Face model. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "prompt.h"
#include "report.h"
#include "omptensor/models.h"
#include "omptensor/hfconfig.h"

enum { OPT_HELP = 1, OPT_IDS, OPT_FILE, OPT_MAXNEW, OPT_TEMP, OPT_TOPK, OPT_TOPP, OPT_SEED, OPT_LOGITS };

static const ot_opt run_opts[] = {
    {"help", 'h', NULL, "show this help", OPT_HELP},
    {"prompt-ids", 0, "IDS", "prompt as comma-separated token ids, e.g. 1,2,3", OPT_IDS},
    {"prompt-file", 0, "FILE", "prompt from a file of token ids (commas or whitespace)", OPT_FILE},
    {"max-new-tokens", 'n', "N", "tokens to generate (default 32)", OPT_MAXNEW},
    {"temperature", 0, "T", "sample with temperature T (default: greedy)", OPT_TEMP},
    {"top-k", 0, "K", "sample among the K most likely tokens", OPT_TOPK},
    {"top-p", 0, "P", "sample from the smallest set with probability >= P", OPT_TOPP},
    {"seed", 0, "N", "random seed for sampling (default 0)", OPT_SEED},
    {"logits-out", 0, "FILE.npy", "write the prompt's logits, float32 [prompt_len, vocab]", OPT_LOGITS},
    {0}};

typedef struct run_args {
  ot_cli_session *s;
  const char *model;
  const char *ids_text, *ids_file;
  ot_gen_opts gen;
  int help, sample; /* sample: --temperature, --top-k or --top-p given */
} run_args;

static ot_status on_opt(void *user, const ot_opt *o, const char *v) {
  run_args *a = user;
  ot_status st;
  if (ot_cli_session_or_model(a->s, o, v, &a->model, &st)) return st;
  switch (o->id) {
  case OPT_HELP: a->help = 1; return OT_OK;
  case OPT_IDS: a->ids_text = v; return OT_OK;
  case OPT_FILE: a->ids_file = v; return OT_OK;
  case OPT_MAXNEW: return ot_cli_int(v, 0, 1000000, &a->gen.max_new_tokens);
  case OPT_TEMP: a->sample = 1; return ot_cli_float(v, 0, 100, &a->gen.temperature);
  case OPT_TOPK: a->sample = 1; return ot_cli_int(v, 0, 1000000000, &a->gen.top_k);
  case OPT_TOPP:
    a->sample = 1;
    OT_TRY(ot_cli_float(v, 0, 1, &a->gen.top_p));
    if (!(a->gen.top_p > 0.0f))
      return ot_set_error(OT_ERR_INVALID_ARG, "'%s' keeps no token; give a number above 0 and at most 1 (1 keeps all)", v);
    return OT_OK;
  case OPT_SEED: return ot_args_u64(v, 0, UINT64_MAX, &a->gen.seed);
  case OPT_LOGITS: a->gen.logits_out = v; return OT_OK;
  default: return ot_set_error(OT_ERR_INVALID_ARG, "unhandled option --%s", o->name);
  }
}

/* The prompt against the model's config.json, before any weight is read: a
 * bad id or length is the user's to fix, and should not wait for the load.
 * `label` is the option or file the ids came from. */
static ot_status check_prompt(const char *model, const int32_t *ids, int n, int max_new, const char *label) {
  ot_hf_config c;
  OT_TRY(ot_hf_config_load(model, &c));
  for (int i = 0; i < n; i++)
    if (ids[i] >= c.vocab_size)
      return ot_set_error(OT_ERR_INVALID_ARG, "%s: token id %d (number %d) is outside the vocabulary of %s (ids 0..%lld)",
                     label, ids[i], i + 1, model, (long long)c.vocab_size - 1);
  if ((int64_t)n + max_new > c.max_position_embeddings)
    return ot_set_error(OT_ERR_INVALID_ARG,
                   "--max-new-tokens %d: %d prompt + %d new tokens exceed the %lld positions of %s "
                   "(max_position_embeddings); generate at most %lld",
                   max_new, n, max_new, (long long)c.max_position_embeddings, model,
                   (long long)c.max_position_embeddings - n > 0 ? (long long)c.max_position_embeddings - n : 0);
  return OT_OK;
}

int ot_cli_run(int argc, char **argv) {
  const char *prog = "omptensor run";
  ot_cli_session s;
  ot_cli_session_init(&s, prog);
  run_args a = {.s = &s, .gen = ot_gen_opts_default()};
  const ot_opt *tables[] = {run_opts, ot_settings_opts(), ot_cli_common_opts(), NULL};
  ot_status st = ot_args_parse(prog, argc, argv, tables, on_opt, &a);
  /* Greedy unless a sampling option is given, whatever their order; a
   * temperature of 0 (or one below float's range) is sampling's limit, greedy. */
  a.gen.greedy = !a.sample || a.gen.temperature == 0.0f;
  if (st == OT_OK && a.help) {
    printf("usage: omptensor run MODEL_DIR (--prompt-ids IDS | --prompt-file FILE) [options]\n\n"
           "Generates tokens from a Hugging Face model directory (config.json + *.safetensors,\n"
           "LlamaForCausalLM or GPT2LMHeadModel) under the device memory budget.\n\noptions:\n");
    ot_args_print_help(stdout, tables);
    ot_cli_session_end(&s);
    return 0;
  }
  if (st == OT_OK && !a.model) st = ot_set_error(OT_ERR_INVALID_ARG, "no model directory given (see omptensor run --help)");
  if (st == OT_OK && !a.ids_text == !a.ids_file)
    st = ot_set_error(OT_ERR_INVALID_ARG, "give exactly one of --prompt-ids and --prompt-file (see omptensor run --help)");
  int32_t *ids = NULL;
  int n_ids = 0;
  if (st == OT_OK)
    st = a.ids_text ? ot_cli_parse_ids(a.ids_text, strlen(a.ids_text), "--prompt-ids", &ids, &n_ids) : ot_cli_read_ids_file(a.ids_file, &ids, &n_ids);
  if (st == OT_OK)
    st = check_prompt(a.model, ids, n_ids, a.gen.max_new_tokens, a.ids_text ? "--prompt-ids" : a.ids_file);
  if (st == OT_OK) st = ot_cli_check_output("--logits-out", a.gen.logits_out); /* before the work, not after it */
  if (st == OT_OK) st = ot_cli_session_start(&s);
  if (st == OT_OK) st = ot_cli_check_trace(&s);
  ot_lm *m = NULL;
  if (st == OT_OK) {
    /* Names, shapes and the plans under the budget, before any weight is read. */
    a.gen.sched = s.sched;
    st = ot_model_load_shapes(s.ctx, a.model, ot_cli_weight_dtype(&s.settings), &m);
    if (st == OT_OK) st = ot_cli_budget_error(&s, ot_generate_check(m, n_ids, &a.gen));
    ot_lm_destroy(m);
    m = NULL;
  }
  if (st == OT_OK) st = ot_model_load(s.ctx, a.model, ot_cli_weight_dtype(&s.settings), ot_cli_progress, &s, &m);
  ot_gen_result r = {0};
  if (st == OT_OK) {
    ot_cli_input_accepted();
    a.gen.sched = s.sched;
    a.gen.trace = s.trace;
    a.gen.progress = ot_cli_progress;
    a.gen.progress_user = &s;
    st = ot_generate(m, ids, n_ids, &a.gen, &r);
  }
  if (st == OT_OK) st = ot_cli_report(&s, a.model, m, &r, stdout);
  int rc = st == OT_OK ? 0 : ot_cli_fail(prog, st);
  ot_gen_result_free(&r);
  ot_lm_destroy(m);
  free(ids);
  ot_cli_session_end(&s);
  return rc;
}
