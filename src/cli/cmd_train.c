/* cmd_train.c — `omptensor train MODEL_DIR --data FILE`: train a GPT-2
 * (GPT2LMHeadModel) on a token file under the device memory budget, with
 * the library's GPT-2 trainer (src/train): one step recorded and planned
 * once, replayed per batch. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "common.h"
#include "ranks.h"
#include "report.h"
#include "omptensor/gpt2_train.h"
#include "omptensor/tokenizer.h"
#include "omptensor/tokens.h"
#include "omptensor/hfconfig.h"

enum { OPT_HELP = 1, OPT_DATA, OPT_BATCH, OPT_ACCUM, OPT_SEQ, OPT_STEPS, OPT_LR, OPT_WD, OPT_CKPT, OPT_INIT, OPT_SEED, OPT_SAVE,
       OPT_DRY, OPT_NODROP, OPT_PREC, OPT_CHUNK, OPT_CPUOPT, OPT_GRED, OPT_GMEM };

/* The default sequence length: the model's whole context up to 256 tokens,
 * long enough to learn from and short enough that a first try on a small
 * budget plans quickly. */
#define TRAIN_DEFAULT_T 256

static const ot_opt train_opts[] = {
    {"help", 'h', NULL, "show this help", OPT_HELP},
    {"data", 0, "FILE", "training tokens: llm.c .bin (uint16) or .npy of int32/int64/uint16 ids (required)", OPT_DATA},
    {"batch", 'b', "B", "sequences per micro-batch (default 4)", OPT_BATCH},
    {"accum", 0, "N", "micro-batches per step: gradients accumulate over N x B sequences, then one update "
                      "(default 1)", OPT_ACCUM},
    {"seq", 0, "T", "tokens per sequence (default min(n_positions, 256))", OPT_SEQ},
    {"steps", 0, "N", "optimizer steps (default 10)", OPT_STEPS},
    {"lr", 0, "LR", "AdamW learning rate (default 1e-3)", OPT_LR},
    {"weight-decay", 0, "WD", "AdamW weight decay (default 0)", OPT_WD},
    {"checkpoint", 0, "MODE", "activation checkpointing: none | all | auto (default auto: the planner recomputes an "
                              "activation it must evict when running its producer again is cheaper than offloading "
                              "it)", OPT_CKPT},
    {"init", 0, "random", "ignore the weights: initialize as GPT-2 does, from config.json alone", OPT_INIT},
    {"seed", 0, "N", "seed for --init random (default 0)", OPT_SEED},
    {"save", 0, "DIR", "write the trained model there (config.json + model.safetensors, and the model's tokenizer and "
                       "generation files)", OPT_SAVE},
    {"no-dropout", 0, NULL, "train without the dropout config.json asks for (Hugging Face's gpt2 says 0.1; the trainer "
                            "implements none, so it is refused unless this is given; --save writes 0)", OPT_NODROP},
    {"precision", 0, "P", "fp32 (default), bf16 or f16: mixed precision as torch.autocast (16-bit GEMMs and "
                          "activations, f32 master weights, norms, loss and gradients; f16 with dynamic loss "
                          "scaling as GradScaler)", OPT_PREC},
    {"loss-chunk-rows", 0, "N", "compute the logits and the loss N rows at a time (default: 256 MiB of logits per "
                                "chunk)", OPT_CHUNK},
    {"cpu-optimizer", 0, NULL, "run AdamW on the host's cores on the state in host memory (ZeRO-Offload): the "
                               "moments never cross PCIe; turns checkpoint auto's recomputation off", OPT_CPUOPT},
    {"dry-run", 0, NULL, "record and plan the step only: print whether and how it fits the budget", OPT_DRY},
    {"grad-reduce", 0, "MODE", "under mpirun/srun, how the ranks' gradients are summed: ordered (default: each "
                               "micro-batch's gradient added in the global micro-batches' order, the same model "
                               "bitwise for any number of ranks at the same global batch) or allreduce "
                               "(MPI_Allreduce of each rank's accumulated gradients); on one process ordered runs "
                               "that reduction too, local (the default there) accumulates in place",
     OPT_GRED},
    {"grad-memory", 0, "WHERE", "allreduce: auto (default: the device memory itself with a CUDA-aware MPI on a GPU, "
                                "else host staging overlapped with the backward), host or device", OPT_GMEM},
    {0}};

typedef struct train_args {
  ot_cli_session *s;
  const char *model, *data, *save;
  ot_gpt2_train_opts o;
  int steps, dry, help, T_given;
  int seed_given, gmem_given; /* options that apply only beside another (check_inputs) */
} train_args;

static ot_status on_opt(void *user, const ot_opt *o, const char *v) {
  train_args *a = user;
  ot_status st;
  if (ot_cli_session_or_model(a->s, o, v, &a->model, &st)) return st;
  switch (o->id) {
  case OPT_HELP: a->help = 1; return OT_OK;
  case OPT_DATA: a->data = v; return OT_OK;
  case OPT_BATCH: return ot_cli_int(v, 1, 1 << 20, &a->o.B);
  case OPT_ACCUM: return ot_cli_int(v, 1, 1 << 16, &a->o.accum);
  case OPT_SEQ: a->T_given = 1; return ot_cli_int(v, 1, 1 << 24, &a->o.T);
  case OPT_STEPS: return ot_cli_int(v, 1, 1000000000, &a->steps);
  case OPT_LR: return ot_cli_float(v, 0, 10, &a->o.adam.lr);
  case OPT_WD: return ot_cli_float(v, 0, 10, &a->o.adam.weight_decay);
  case OPT_CKPT:
    if (ot_recompute_parse(v, &a->o.checkpoint) != OT_OK)
      return ot_set_error(OT_ERR_INVALID_ARG, "expected none, all or auto");
    return OT_OK;
  case OPT_INIT:
    if (strcmp(v, "random")) return ot_set_error(OT_ERR_INVALID_ARG, "only 'random' is known");
    a->o.init_random = 1;
    return OT_OK;
  case OPT_SEED: a->seed_given = 1; return ot_args_u64(v, 0, UINT64_MAX, &a->o.seed);
  case OPT_SAVE: a->save = v; return OT_OK;
  case OPT_DRY: a->dry = 1; return OT_OK;
  case OPT_NODROP: a->o.no_dropout = 1; return OT_OK;
  case OPT_PREC:
    if (!strcmp(v, "fp32") || !strcmp(v, "f32")) a->o.precision = OT_F32;
    else if (!strcmp(v, "bf16")) a->o.precision = OT_BF16;
    else if (!strcmp(v, "f16") || !strcmp(v, "fp16")) a->o.precision = OT_F16;
    else return ot_set_error(OT_ERR_INVALID_ARG, "expected fp32, bf16 or f16");
    return OT_OK;
  case OPT_CHUNK: return ot_cli_int(v, 1, 1 << 30, &a->o.loss_chunk_rows);
  case OPT_CPUOPT: a->o.cpu_optimizer = 1; return OT_OK;
  case OPT_GRED: return ot_grad_reduce_parse(v, &a->o.grad_reduce);
  case OPT_GMEM:
    a->gmem_given = 1;
    if (!strcmp(v, "auto")) a->o.grad_direct = -1;
    else if (!strcmp(v, "host")) a->o.grad_direct = 0;
    else if (!strcmp(v, "device")) a->o.grad_direct = 1;
    else return ot_set_error(OT_ERR_INVALID_ARG, "expected auto, host or device");
    return OT_OK;
  default: return ot_set_error(OT_ERR_INVALID_ARG, "unhandled option --%s", o->name);
  }
}

/* What can be checked before any weight is read: the model is a GPT-2, T
 * fits its positions, the token file is readable, in the vocabulary and
 * long enough for one step. */
static ot_status check_inputs(train_args *a, ot_tokens **data) {
  if (!a->model) return ot_set_error(OT_ERR_INVALID_ARG, "no model directory given (see omptensor train --help)");
  if (!a->data)
    return ot_set_error(OT_ERR_INVALID_ARG, "--data FILE is required: the training tokens (see omptensor train --help)");
  /* an option that only applies beside another is refused alone, not ignored (issue 43) */
  if (a->seed_given && !a->o.init_random)
    return ot_set_error(OT_ERR_INVALID_ARG, "--seed seeds the initialization of --init random; without it the "
                                            "weights are read from the model directory: give --init random, or leave "
                                            "--seed out");
  if (a->gmem_given && a->o.grad_reduce != OT_GRAD_ALLREDUCE)
    return ot_set_error(OT_ERR_INVALID_ARG, "--grad-memory chooses where --grad-reduce allreduce sums the gradients; "
                                            "give --grad-reduce allreduce, or leave --grad-memory out");
  /* - is stdin/stdout where a stream can be read or written; these cannot */
  if (!strcmp(a->data, "-"))
    return ot_set_error(OT_ERR_INVALID_ARG, "--data -: the tokens are read in place (mapped, again at every pass "
                                            "over them), not from a stream; give a file");
  if (a->save && !strcmp(a->save, "-"))
    return ot_set_error(OT_ERR_INVALID_ARG, "--save -: the trained model is a directory of files, not a stream to "
                                            "stdout; give a directory");
  if (a->s->settings.has_dtype && a->s->settings.dtype != OT_F32)
    return ot_set_error(OT_ERR_INVALID_ARG, "--dtype %s: training keeps f32 master weights; leave --dtype out",
                   ot_dtype_name(a->s->settings.dtype));
  ot_hf_config c;
  OT_TRY(ot_hf_config_load(a->model, &c));
  if (c.arch != OT_ARCH_GPT2)
    return ot_set_error(OT_ERR_UNSUPPORTED, "%s: omptensor train trains GPT-2 models (model_type gpt2), not '%s'", a->model,
                   c.model_type);
  if (!a->T_given) a->o.T = c.max_position_embeddings < TRAIN_DEFAULT_T ? (int)c.max_position_embeddings : TRAIN_DEFAULT_T;
  if (a->o.T > c.max_position_embeddings)
    return ot_set_error(OT_ERR_INVALID_ARG, "--seq %d: longer than the %lld positions of %s (n_positions); use --seq %lld or less",
                   a->o.T, (long long)c.max_position_embeddings, a->model, (long long)c.max_position_embeddings);
  if ((int64_t)a->o.accum * a->o.B > INT32_MAX)
    return ot_set_error(OT_ERR_INVALID_ARG, "--accum %d x --batch %d: more than %d sequences per step; use fewer",
                        a->o.accum, a->o.B, INT32_MAX);
  OT_TRY(ot_tokens_open(a->data, c.vocab_size, data));
  const int R = ot_cli_ranks(a->s); /* data parallel: a step takes the micro-batches of every rank */
  if ((int64_t)R * a->o.accum * a->o.B > INT32_MAX)
    return ot_set_error(OT_ERR_INVALID_ARG, "%d ranks x --accum %d x --batch %d: more than %d sequences per step; use "
                                            "fewer", R, a->o.accum, a->o.B, INT32_MAX);
  int64_t need = (int64_t)R * a->o.accum * a->o.B * a->o.T + 1;
  if (ot_tokens_count(*data) < need)
    return ot_set_error(OT_ERR_INVALID_ARG, "--data %s: %lld tokens, but one step of %s--accum %d x --batch %d x --seq %d "
                   "needs %lld; use a longer file or a smaller --accum/--batch/--seq",
                   a->data, (long long)ot_tokens_count(*data), R > 1 ? "the ranks x " : "", a->o.accum, a->o.B, a->o.T,
                   (long long)need);
  return OT_OK;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* "950", "9.9k", "1.2M" */
static void fmt_rate(char *buf, size_t n, double v) {
  if (v < 1e3) snprintf(buf, n, "%.0f", v);
  else if (v < 1e6) snprintf(buf, n, "%.1fk", v / 1e3);
  else snprintf(buf, n, "%.1fM", v / 1e6);
}

/* The layers recomputed in the backward, as a JSON array and "0,1,5" (or "none"). */
static json_t *recomputed(const ot_gpt2_trainer *g, char *buf, size_t n) {
  json_t *arr = json_array();
  size_t k = 0;
  buf[0] = '\0';
  for (int l = 0; l < ot_gpt2_train_config(g)->num_layers; l++)
    if (ot_gpt2_train_recomputed(g, l)) {
      json_array_append_new(arr, json_integer(l));
      if (k < n) k += (size_t)snprintf(buf + k, n - k, "%s%d", k ? "," : "", l);
    }
  if (!buf[0]) snprintf(buf, n, "none");
  return arr;
}

typedef struct step_log {
  float *loss;
  double *ms;
  int n, cap;
} step_log;

/* Room for step n (0-based): the log grows with the steps done, so a large
 * --steps costs nothing before the steps are run. */
static ot_status log_room(step_log *L, int n) {
  if (n < L->cap) return OT_OK;
  int cap = L->cap ? (L->cap > (1 << 29) ? n + 1 : 2 * L->cap) : 64;
  float *loss = realloc(L->loss, (size_t)cap * sizeof *loss);
  if (loss) L->loss = loss;
  double *ms = loss ? realloc(L->ms, (size_t)cap * sizeof *ms) : NULL;
  if (ms) L->ms = ms;
  if (!loss || !ms) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "no host memory for the log of %d steps", n + 1);
  L->cap = cap;
  return OT_OK;
}

/* Mean tokens/s over the steps after the first (the first also pays for
 * the first uploads and the device arena); the first if it is the only one. */
static double mean_rate(const step_log *L, int64_t tokens_per_step) {
  double ms = 0;
  int from = L->n > 1 ? 1 : 0;
  for (int i = from; i < L->n; i++) ms += L->ms[i];
  return ms > 0 ? (double)tokens_per_step * (L->n - from) * 1e3 / ms : 0;
}

static ot_status report(train_args *a, ot_gpt2_trainer *g, const step_log *L) {
  ot_cli_session *s = a->s;
  /* every output before the summary: a failed trace write is the command's failure, never after a success */
  if (s->settings.trace_path && !a->dry) OT_TRY(ot_trace_write_chrome(s->trace, s->settings.trace_path));
  ot_trace_summary t = ot_trace_summarize(s->trace);
  ot_plan_stats ps = ot_plan_get_stats(ot_gpt2_train_plan(g), 1);
  char rec[256];
  json_t *layers = recomputed(g, rec, sizeof rec);
  const int R = ot_cli_ranks(s);
  double rate = mean_rate(L, (int64_t)R * a->o.accum * a->o.B * a->o.T);
  const ot_grad_reduce_stats gr = ot_gpt2_train_reduce_stats(g);
  const int n_steps = L->n > 0 ? L->n : 1;
  if (s->settings.json) {
    json_t *o = ot_cli_json_base(s, a->model, &t), *steps = json_array();
    for (int i = 0; i < L->n; i++)
      json_array_append_new(steps, json_pack("{s:i, s:f, s:f}", "step", i + 1, "loss", (double)L->loss[i], "ms", L->ms[i]));
    json_object_set_new(o, "data", json_string(a->data));
    json_object_set_new(o, "dry_run", json_boolean(a->dry));
    json_object_set_new(o, "B", json_integer(a->o.B));
    json_object_set_new(o, "accum", json_integer(a->o.accum));
    json_object_set_new(o, "ranks", json_integer(R)); /* data parallel: the global batch is ranks x accum x B */
    if (R > 1 || a->o.grad_reduce != OT_GRAD_LOCAL)
      json_object_set_new(o, "grad_reduce", json_string(ot_grad_reduce_name(
                                                a->o.grad_reduce == OT_GRAD_LOCAL ? OT_GRAD_ORDERED : a->o.grad_reduce)));
    json_object_set_new(o, "T", json_integer(a->o.T));
    json_object_set_new(o, "steps", steps);
    json_object_set_new(o, "tokens_per_second", json_real(rate));
    json_object_set(o, "budget", json_object_get(o, "budget_bytes")); /* the name the issue asks for */
    json_object_set_new(o, "checkpoint", json_string(ot_recompute_name(a->o.checkpoint)));
    json_object_set_new(o, "recomputed_layers", layers);
    json_object_set_new(o, "recomputed_tensors_per_step", json_integer(ps.recomputes)); /* auto's, per tensor */
    json_object_set_new(o, "weights", json_integer((json_int_t)ot_gpt2_train_num_weights(g)));
    json_object_set_new(o, "precision", json_string(ot_dtype_name(a->o.precision)));
    if (a->o.precision == OT_F16) {
      json_object_set_new(o, "skipped_steps", json_integer((json_int_t)ot_gpt2_train_skipped_steps(g)));
      json_object_set_new(o, "loss_scale_log2", json_integer(ot_gpt2_train_loss_scale_log2(g)));
    }
    if (gr.rounds) /* data parallel: what the gradient reduction cost per step (rank 0's) */
      json_object_set_new(o, "grad_reduce_per_step",
                          json_pack("{s:f, s:f, s:f, s:I, s:I}", "reduce_ms", gr.reduce_s * 1e3 / n_steps, "wait_ms",
                                    gr.wait_s * 1e3 / n_steps, "copy_ms", gr.copy_s * 1e3 / n_steps, "bytes",
                                    (json_int_t)(gr.bytes / (uint64_t)n_steps), "buckets",
                                    (json_int_t)(gr.rounds / n_steps)));
    json_object_set_new(o, "plan_peak_bytes", json_integer((json_int_t)ps.peak_bytes));
    json_object_set_new(o, "plan_bytes_up_per_step", json_integer((json_int_t)ps.bytes_up));
    json_object_set_new(o, "plan_bytes_down_per_step", json_integer((json_int_t)ps.bytes_down));
    if (a->save && !a->dry) json_object_set_new(o, "saved", json_string(a->save));
    if (ot_ctx_host_budget(s->ctx)) /* --cpu-memory-limit: what the homes it holds take (all in host memory) */
      json_object_set_new(o, "host", json_pack("{s:I, s:I}", "cpu_budget_bytes", (json_int_t)ot_ctx_host_budget(s->ctx),
                                               "host_bytes", (json_int_t)ot_ctx_host_bytes(s->ctx)));
    OT_TRY(ot_cli_json_print(o));
  } else {
    json_decref(layers);
    char pk[32], up[32], dn[32], r[32];
    ot_size_format(ps.peak_bytes, pk, sizeof pk);
    ot_size_format(ps.bytes_up, up, sizeof up);
    ot_size_format(ps.bytes_down, dn, sizeof dn);
    if (a->dry) printf("dry run: the step of %d x %d x %d tokens fits the budget\n", a->o.accum, a->o.B, a->o.T);
    else {
      fmt_rate(r, sizeof r, rate);
      char ranks[48] = "";
      if (R > 1) snprintf(ranks, sizeof ranks, "%d ranks x ", R);
      printf("trained %d steps of %s%d x %d x %d tokens: loss %.4f -> %.4f, %s tok/s (mean over steps %s)\n", L->n,
             ranks, a->o.accum, a->o.B, a->o.T, (double)L->loss[0], (double)L->loss[L->n - 1], r,
             L->n > 1 ? "2.." : "1");
      if (a->o.precision == OT_F16)
        printf("f16 loss scale: 2^%d now; %lld steps skipped (their gradients overflowed)\n",
               ot_gpt2_train_loss_scale_log2(g), (long long)ot_gpt2_train_skipped_steps(g));
    }
    if (gr.rounds) {
      double ms = 0;
      for (int i = 0; i < L->n; i++) ms += L->ms[i];
      ms /= n_steps;
      printf("gradient reduction (%s, %d ranks) per step: %.1f ms reducing (%.0f %% of the %.1f ms step), %.1f ms of it "
             "waited for, %.1f ms of staging copies\n",
             ot_grad_reduce_name(a->o.grad_reduce == OT_GRAD_LOCAL ? OT_GRAD_ORDERED : a->o.grad_reduce), R,
             gr.reduce_s * 1e3 / n_steps, ms > 0 ? 100 * gr.reduce_s * 1e3 / n_steps / ms : 0, ms,
             gr.wait_s * 1e3 / n_steps, gr.copy_s * 1e3 / n_steps);
    }
    printf("plan per step: peak %s, %s up, %s down; checkpoint %s, recomputed layers: %s, tensors: %d\n", pk, up,
           dn, ot_recompute_name(a->o.checkpoint), rec, ps.recomputes);
    ot_cli_print_setup(s, (uint64_t)ot_gpt2_train_num_weights(g) * sizeof(float), stdout);
    if (ot_ctx_host_budget(s->ctx)) { /* --cpu-memory-limit: what the homes it holds take */
      char hb[32], hh[32];
      printf("host budget %s: the weights, gradients, optimizer state and the activations at home take %s\n",
             ot_size_format(ot_ctx_host_budget(s->ctx), hb, sizeof hb),
             ot_size_format(ot_ctx_host_bytes(s->ctx), hh, sizeof hh));
    }
    if (!a->dry) ot_trace_summary_print(&t, stdout);
    if (a->save && !a->dry) printf("saved: %s\n", a->save);
  }
  return OT_OK;
}

static ot_status train(train_args *a, ot_gpt2_trainer *g, ot_tokens *data, step_log *L) {
  const int R = ot_cli_ranks(a->s); /* every rank reads the global batch; the trainer takes its share */
  size_t n = (size_t)R * (size_t)a->o.accum * (size_t)a->o.B * (size_t)a->o.T;
  int32_t *in = malloc(n * sizeof *in), *tg = malloc(n * sizeof *tg);
  ot_status st = in && tg ? OT_OK : ot_set_error(OT_ERR_OUT_OF_MEMORY, "no host memory for a batch");
  /* With --json stdout holds the one JSON object; the step lines go to stderr. */
  FILE *f = a->s->settings.json ? stderr : stdout;
  for (int i = 0; st == OT_OK && i < a->steps; i++) {
    st = log_room(L, i);
    if (st == OT_OK) st = ot_tokens_next(data, R * a->o.accum * a->o.B, a->o.T, in, tg); /* [ranks x accum, B, T] */
    double t0 = now_ms();
    if (st == OT_OK) st = ot_gpt2_train_step(g, in, tg, a->s->trace, &L->loss[i]);
    if (st != OT_OK) break;
    L->ms[i] = now_ms() - t0;
    L->n = i + 1;
    char r[32];
    fmt_rate(r, sizeof r, (double)n * 1e3 / (L->ms[i] > 0 ? L->ms[i] : 1e-3));
    if (!ot_cli_is_root(a->s)) continue; /* every rank has the same loss: rank 0 prints it */
    fprintf(f, "step %d/%d  loss %.4f  %.0f ms  %s tok/s\n", i + 1, a->steps, (double)L->loss[i], L->ms[i], r);
    fflush(f);
  }
  free(in);
  free(tg);
  return st;
}

static void help(const ot_opt *const *tables) {
  printf("usage: omptensor train MODEL_DIR --data FILE [options]\n\n"
         "Trains a GPT-2 (GPT2LMHeadModel: config.json + *.safetensors, f32) on a token file with AdamW,\n"
         "under the device memory budget: the whole step is recorded and planned once, then replayed\n"
         "for each batch of B consecutive windows of T tokens (targets: the next token). At the end of\n"
         "the file it starts over. Prints one line per step and a summary; --json prints one object.\n"
         "Exit status: 0 ok, 2 bad input or a budget too small for one step, 1 a failure while running.\n\n"
         "options:\n");
  ot_args_print_help(stdout, tables);
}

int ot_cli_train(int argc, char **argv) {
  const char *prog = "omptensor train";
  ot_cli_session s;
  ot_cli_session_init(&s, prog);
  train_args a = {.s = &s, .o = ot_gpt2_train_opts_default(), .steps = 10};
  a.o.B = 4;
  a.o.checkpoint = OT_RECOMPUTE_AUTO;
  const ot_opt *tables[] = {train_opts, ot_settings_opts(), ot_cli_common_opts(), NULL};
  ot_status st = ot_args_parse(prog, argc, argv, tables, on_opt, &a);
  if (st == OT_OK && a.help) {
    help(tables);
    ot_cli_session_end(&s);
    return 0;
  }
  ot_tokens *data = NULL;
  ot_gpt2_trainer *g = NULL;
  step_log L = {0};
  /* under mpirun/srun: the ranks train one model together (data parallel), rank 0 prints and saves */
  if (st == OT_OK) st = ot_cli_ranks_start(&s);
  a.o.comm = s.comm;
  const int root = ot_cli_is_root(&s);
  if (st == OT_OK) st = check_inputs(&a, &data);
  /* The outputs before the first step: a bad --save or --trace must not
   * wait for the end of training to be found. */
  if (st == OT_OK && root && a.save && !a.dry && (st = ot_gpt2_train_check_save(a.save)) != OT_OK)
    ot_prefix_error(st, "--save");
  if (st == OT_OK) st = ot_cli_session_start(&s);
  if (st == OT_OK && !a.dry) st = ot_cli_check_trace(&s);
  a.o.plan_only = a.dry; /* a dry run allocates no activation memory */
  if (st == OT_OK) st = ot_cli_budget_error(&s, ot_gpt2_train_create(s.ctx, a.model, &a.o, &s.sched, &g));
  int quiet = 0;
  if (s.comm) st = ot_cli_ranks_agree(&s, st, &quiet); /* all ranks start the steps, or none does */
  if (st == OT_OK && s.verbose) ot_plan_print(ot_gpt2_train_plan(g), stderr);
  if (st == OT_OK) ot_cli_input_accepted(); /* the model is loaded and the step planned: the work starts */
  if (st == OT_OK && !a.dry) st = train(&a, g, data, &L);
  if (st == OT_OK && root && a.save && !a.dry) st = ot_gpt2_train_save(g, a.save);
  if (st == OT_OK && root && a.save && !a.dry) /* with the model's tokenizer: a directory transformers loads */
    st = ot_tokenizer_copy_files(a.model, a.save, NULL);
  if (st == OT_OK && root) st = report(&a, g, &L);
  else if (st == OT_OK && s.settings.trace_path && !a.dry) st = ot_trace_write_chrome(s.trace, s.settings.trace_path);
  int rc = st == OT_OK ? 0 : quiet ? ot_cli_exit_code(st) : ot_cli_fail(prog, st);
  rc = ot_cli_ranks_exit(&s, rc);
  free(L.loss);
  free(L.ms);
  ot_gpt2_train_destroy(g);
  ot_tokens_close(data);
  ot_cli_session_end(&s);
  return rc;
}
