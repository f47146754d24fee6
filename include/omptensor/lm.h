/* lm.h — causal language models: the contract a model implements, weight
 * loading from Hugging Face checkpoints, and generation.
 *
 * A model (the library's Llama and GPT-2, models.h, or your own) records its forward pass
 * for T tokens at a run-time position into a program (ops.h). Generation
 * records two steps — the prompt (prefill, T = prompt length) and one token
 * (decode, T = 1, replayed for every new token) — plans each under the budget
 * once, and replays.
 *
 *     ot_lm *m;   // from ot_llama_load / ot_gpt2_load / your own
 *     ot_gen_opts g = ot_gen_opts_default();
 *     g.max_new_tokens = 32;
 *     ot_gen_result r;
 *     ot_generate(m, prompt, n_prompt, &g, &r);
 *     ... r.tokens[0 .. r.n_tokens-1], r.decode_tokens_per_second ...
 *     ot_gen_result_free(&r);
 *     ot_lm_destroy(m);
 */
#ifndef OMPTENSOR_LM_H
#define OMPTENSOR_LM_H

#include <stdint.h>

#include "omptensor/context.h"
#include "omptensor/experts.h"
#include "omptensor/program.h"
#include "omptensor/safetensors.h"
#include "omptensor/sched.h"
#include "omptensor/tensor.h"
#include "omptensor/tlist.h"
#include "omptensor/tokenizer.h"
#include "omptensor/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One recorded step of a model. */
typedef struct ot_lm_step {
  ot_program *prog;
  ot_tensor *ids;    /* i32 [T], an input the caller writes before each run */
  ot_tensor *logits; /* f32 [T, vocab] (all_logits) or [1, vocab] (last row), an output */
  int pos_slot;      /* run-time scalar: position of ids[0] */
  int T;
  ot_tlist owned;    /* activations and caches the step owns (destroyed with it) */
} ot_lm_step;

typedef struct ot_lm ot_lm;
typedef struct ot_lm_vtable {
  const char *arch; /* "llama", "gpt2", ... */
  /* Records the forward pass of T tokens. all_logits: logits for every row
   * (else the last row only). */
  ot_status (*build)(ot_lm *m, int T, int all_logits, ot_lm_step *out);
  void (*destroy)(ot_lm *m);
  /* Optional (NULL: nothing to fit): sizes what the model keeps on the
   * device beside its program's tensors for a device budget of `budget`
   * bytes and prompts of n_prompt tokens (mixture of experts: the expert
   * window, experts.h). Called by ot_lm_fit before steps are recorded. */
  ot_status (*fit)(ot_lm *m, uint64_t budget, int n_prompt);
} ot_lm_vtable;

struct ot_lm {
  const ot_lm_vtable *vt;
  ot_ctx *ctx;
  int64_t vocab, max_seq;
  int64_t n_ctx;         /* positions the next recorded steps must hold (<= max_seq);
                            ot_generate sets it to prompt + new tokens */
  uint64_t weight_bytes; /* bytes of all weight homes */
  int n_weights;
  ot_experts *experts;   /* a mixture of experts: its experts (experts.h; owned by the model), else NULL */
  void *impl;
  /* ot_gen_opts.hold_device: the last generation's decode plan and step,
   * holding the weights on the device for the next (zero in a new model;
   * ot_lm_release_device frees them) */
  ot_plan *held_plan;
  ot_lm_step held_step;
};

void ot_lm_destroy(ot_lm *m); /* NULL is fine; releases what a generation held on the device first */
/* Frees the device memory a generation with hold_device left (nothing if none). */
void ot_lm_release_device(ot_lm *m);

/* Adds a tensor to the step's owned list (destroyed with the step); on
 * failure the tensor is destroyed and the status returned. */
ot_status ot_lm_step_own(ot_lm_step *s, ot_tensor *t);
/* Creates an f32 (or dt) activation owned by the step. */
ot_status ot_lm_step_tensor(ot_lm_step *s, ot_ctx *ctx, const char *name, ot_dtype dt, int ndim,
                            const int64_t *shape, ot_tensor **out);
void ot_lm_step_destroy(ot_lm_step *s);

/* Fits the model to a device budget before its steps are recorded (the
 * vtable's fit; a no-op for a model without one). A change releases what a
 * held generation kept on the device first (ot_lm_release_device), since
 * its plan refers to what is replaced. ot_generate calls it. */
ot_status ot_lm_fit(ot_lm *m, uint64_t budget, int n_prompt);

/* The smallest budget under which generating from a prompt of n_prompt
 * tokens can run (the larger of the prompt step's and the decode step's
 * largest working set, sched.h), with the model fitted to its smallest
 * (a mixture of experts: a window of one expert; the model stays fitted so). */
ot_status ot_lm_min_budget(ot_lm *m, int n_prompt, int all_logits, uint64_t *bytes);

/* ---- weights -------------------------------------------------------------
 * Progress of long loads: called after each tensor with the bytes done and
 * the total (may be NULL). */
typedef void (*ot_progress_fn)(void *user, const char *what, uint64_t done, uint64_t total);

/* Reads tensor `name` of the checkpoint into a new tensor of dtype `dt` in the
 * context's home space, checking its shape against `shape` (the model's
 * config); converts dtypes (f32/f16/bf16 -> f32/f16/bf16/q8b). Errors name
 * the checkpoint, the tensor and both shapes. */
ot_status ot_lm_load_weight(ot_ctx *ctx, const ot_ckpt *ck, const char *name, ot_dtype dt, int ndim,
                            const int64_t *shape, ot_tensor **out);

/* The checks of ot_lm_load_weight without reading anything: the tensor is in
 * the checkpoint, with that shape and a float dtype (*found may be NULL). */
ot_status ot_lm_check_weight(const ot_ckpt *ck, const char *name, int ndim, const int64_t *shape,
                             const ot_st_info **found);

/* ---- generation ----------------------------------------------------------- */
#define OT_GEN_MAX_EOS 8
typedef struct ot_gen_opts {
  int max_new_tokens;
  int greedy;            /* 1: argmax; 0: sample with temperature/top_k/top_p */
  float temperature;
  int top_k;             /* 0: off */
  float top_p;           /* 1: off */
  uint64_t seed;
  int n_eos;             /* stop after any of eos_ids[0 .. n_eos-1] (it is kept in the tokens, as
                            transformers does); 0: run to max_new_tokens */
  int32_t eos_ids[OT_GEN_MAX_EOS];
  ot_sched_opts sched;   /* strategy, device, budget; n_stages default OT_SCHED_ALL_DEVICES: layers split over the context's devices */
  ot_trace *trace;       /* may be NULL */
  const char *logits_out;/* .npy path: f32 [prompt_len, vocab] logits of the prompt, or NULL */
  ot_progress_fn progress;
  void *progress_user;
  /* Each new token as soon as it is picked (index from 0); a status other
   * than OT_OK stops the generation with it. May be NULL. */
  ot_status (*on_token)(void *user, int32_t id, int index);
  void *token_user;
  /* With a tokenizer: the result's text, and on_text (may be NULL) streams
   * it as it becomes final (textstream.h: UTF-8-whole pieces, special tokens
   * skipped); a status other than OT_OK stops the generation with it. */
  const ot_tokenizer *tokenizer;
  ot_status (*on_text)(void *user, const char *piece, size_t n);
  void *text_user;
  /* 1: after returning, the decode plan keeps its device memory with the
   * weights in it, and the next ot_generate on this model plans its prompt
   * after it (ot_sched_plan_after): a batch job uploads the weights once,
   * not once per prompt. The memory stays held (within the budget) until
   * the next generation, ot_lm_release_device or ot_lm_destroy. Backends
   * map and host (usm plans cannot hand over: nothing is held there). */
  int hold_device;
} ot_gen_opts;

ot_gen_opts ot_gen_opts_default(void);

/* The model's own defaults, as transformers' generate() takes them: EOS ids
 * from config.json, replaced by generation_config.json's when it gives
 * them; and from generation_config.json do_sample (with its temperature,
 * top_k — transformers' 50 when absent — and top_p) and max_new_tokens.
 * `model_dir` holds config.json; generation_config.json may be missing.
 * Keys the file sets that omptensor's generation does not implement (beam
 * search, repetition penalty, ...) are told once as a notice (status.h)
 * naming them. Callers apply their own settings on top. */
ot_status ot_gen_opts_from_model(const char *model_dir, ot_gen_opts *o);

typedef struct ot_gen_result {
  int32_t *tokens;       /* generated ids (malloc'd) */
  int n_tokens;
  double prefill_ms;     /* the prompt step */
  double decode_ms;      /* all decode steps */
  double decode_tokens_per_second;
  double logits_checksum;/* sum over the prompt's last-row logits and every decode step's logits */
  ot_plan_stats prefill_plan, decode_plan; /* the prompt's run, the decode replays */
  uint64_t handed_over_bytes; /* device copies (weights, KV caches) the decode plan took over from the prompt's
                                 plan instead of uploading them again (ot_sched_plan_after) */
  uint64_t prefill_handed_over_bytes; /* hold_device: those the prompt's plan took over from the last
                                 generation's decode plan */
  ot_budget_probe decode_probe;            /* the decode plan's independent budget check (sched.h); its
                                              seconds are not counted in decode_ms */
  ot_experts_stats decode_experts; /* a mixture of experts: what the decode steps routed and brought into
                                      the window (experts.h; zero for a dense model) */
  int stopped_at_eos;    /* 1: the last token is an EOS id; 0: max_new_tokens were made */
  char *text;            /* with opts.tokenizer: the tokens decoded, special ones skipped (malloc'd), else NULL */
  size_t text_len;
} ot_gen_result;

/* Records and plans the prompt and decode steps of a generation without
 * running them: the budget errors ot_generate would give, before any weight
 * is read (works on a shapes-only model). */
ot_status ot_generate_check(ot_lm *m, int n_prompt, const ot_gen_opts *o);

/* Runs the prompt, then one decode step per new token. The logits of every
 * step are checked (once per step, with the checksum's pass): NaN or Inf
 * fails with OT_ERR_NUMERIC naming the step (the prefill, or decode step k
 * and its position) before a token is picked or logits_out written. On
 * failure *r is left empty (calling ot_gen_result_free on it is harmless). */
ot_status ot_generate(ot_lm *m, const int32_t *prompt, int n_prompt, const ot_gen_opts *o, ot_gen_result *r);
void ot_gen_result_free(ot_gen_result *r);

/* Text in, text out: encodes `len` bytes of UTF-8 with the tokenizer (and the
 * special tokens its template adds, BOS...), then ot_generate with
 * opts.tokenizer = tk; r->text holds the continuation. *prompt_ids (may be
 * NULL) receives the prompt's ids (malloc'd), *n_prompt their count. */
ot_status ot_generate_text(ot_lm *m, const ot_tokenizer *tk, const char *text, size_t len, const ot_gen_opts *o,
                           ot_gen_result *r, int32_t **prompt_ids, int *n_prompt);

#ifdef __cplusplus
}
#endif
#endif
