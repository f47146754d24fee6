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
  /* A batched step (build_batch), else NULL: rows i32 [T, 2], each row's KV
   * cache slot and position (slot -1: a padding row); last i32 [n_logits],
   * the row each logits row is taken from (NULL when every row has its
   * logits). Inputs the caller writes before each run, like ids. */
  ot_tensor *rows, *last;
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
  /* Optional (NULL: the model generates one sequence at a time): records a
   * step whose T rows are tokens of several sequences, each in its own KV
   * cache slot (m->n_slots of them, m->n_ctx positions each): st->rows
   * gives each row's slot and position, the caller writes it before each
   * run. Logits [n_logits, vocab]: every row's (n_logits == T, decode: a
   * token per sequence), else those of rows st->last[0 .. n_logits-1] (a
   * packed prompt step: each sequence's last row). */
  ot_status (*build_batch)(ot_lm *m, int T, int n_logits, ot_lm_step *out);
} ot_lm_vtable;

struct ot_lm {
  const ot_lm_vtable *vt;
  ot_ctx *ctx;
  int64_t vocab, max_seq;
  int64_t n_ctx;         /* positions the next recorded steps must hold (<= max_seq);
                            ot_generate sets it to prompt + new tokens */
  int64_t n_slots;       /* KV cache slots (sequences at once) of the next batched steps (ot_generate_batch sets
                            it; 0: not batched) */
  ot_dtype kv_dtype;     /* the KV caches' dtype in the next recorded steps (ot_gen_opts.kv_dtype; the
                            generations set it) */
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

/* Reads tensor `name` of the checkpoint into a new tensor of dtype
 * ot_lm_weight_dtype(its info, dt, ...) in the context's home space,
 * checking its shape against `shape` (the model's config); converts dtypes
 * (f32/f16/bf16 -> any float or block dtype; a block dtype (GGUF) -> a
 * float one). Errors name the checkpoint, the tensor and both shapes. */
ot_status ot_lm_load_weight(ot_ctx *ctx, const ot_ckpt *ck, const char *name, ot_dtype dt, int ndim,
                            const int64_t *shape, ot_tensor **out);

/* The checks of ot_lm_load_weight without reading anything: the tensor is in
 * the checkpoint, with that shape and a float or block dtype (*found may be
 * NULL). */
ot_status ot_lm_check_weight(const ot_ckpt *ck, const char *name, int ndim, const int64_t *shape,
                             const ot_st_info **found);

/* The dtype a weight of `shape` asked for as `want` is kept in: a block
 * dtype (q8b, q4b, ...) needs whole blocks along rows, else f32 (norms,
 * biases); a checkpoint tensor already in blocks (info, may be NULL) stays
 * in its own when blocks are asked for, so one quantization is never
 * requantized into another; OT_DTYPE_KEEP (models.h): the tensor's own. */
ot_dtype ot_lm_weight_dtype(const ot_st_info *info, ot_dtype want, int ndim, const int64_t *shape);

/* ---- generation ----------------------------------------------------------- */
#define OT_GEN_MAX_EOS 8
struct ot_gen_result; /* below */
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
  /* Each step's row of logits [vocab] of a sequence, in host memory, before
   * its token is picked (index as on_token's; seq: the sequence's index in
   * ot_generate_batch's job, 0 for ot_generate); a status other than OT_OK
   * stops the generation with it. May be NULL. */
  ot_status (*on_logits)(void *user, int seq, int index, const float *row, int64_t vocab);
  void *logits_user;
  /* ot_generate_batch: each sequence's result as soon as it is finished
   * (seq: its index in the job), e.g. to write it out before the job ends;
   * the result stays the batch result's. May be NULL. */
  ot_status (*on_seq_done)(void *user, int seq, const struct ot_gen_result *r);
  void *done_user;
  /* The KV caches' dtype: OT_F32 (the default), OT_BF16 or OT_F16. A 16-bit
   * cache is half the bytes a budget must hold (or stream) per sequence and
   * position, so twice the sequences fit beside the weights; attention
   * still computes in f32, on keys and values rounded to it (transformers
   * keeps a bf16 model's cache in bf16). Anything else is OT_ERR_DTYPE. */
  ot_dtype kv_dtype;
  /* Asked at each token boundary (before every decode step, and before a
   * batch's next step): nonzero stops the generation there, as a success
   * with the tokens made so far and the result's `cancelled` set (a batch:
   * the sequences not finished are left out, on_seq_done is not called for
   * them). For a program's Ctrl-C: its own signal handler sets a flag that
   * this reads (the library installs no handler). May be NULL. */
  int (*should_stop)(void *user);
  void *stop_user;
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
  int stopped_at_eos;    /* 1: the last token is an EOS id; 0: max_new_tokens were made (or cancelled) */
  int cancelled;         /* 1: should_stop stopped it before an EOS id or max_new_tokens */
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

/* ---- batched generation (issue 19) -----------------------------------------
 * When the weights stream through a small budget, a decode step costs
 * about the bytes that cross, whatever its number of rows: one weight
 * stream can serve many sequences. ot_generate_batch runs a job of
 * prompts with up to n_slots sequences at once, each with its own KV cache
 * slot and positions:
 *   - a prompt step packs the prompts of the sequences that start, one
 *     after another (no padding; each row attends to its own sequence
 *     only), and gives each its first token;
 *   - then decode steps of n_slots rows, a token per live sequence (idle
 *     slots' rows are padding), recorded and planned once, replayed;
 *   - a sequence stops at an EOS id or its max_new_tokens; its slot takes
 *     the job's next prompt at once (a prompt step for the sequences that
 *     start, then decode resumes for all), so the batch never drains
 *     while prompts are left.
 * Every step is a program the planner plans under the budget like any
 * other (the prompt step after the decode plan and back,
 * ot_sched_plan_after: the weights stay where they are); the caches of all
 * slots are its tensors, kept, evicted and reloaded as it decides.
 * A sequence's tokens do not depend on what shares its batch: its rows are
 * computed as one sequence's (bitwise the same logits wherever the kernels
 * compute rows independently, as on the CPU; on a GPU within fp32
 * rounding), and sampling draws from (seed, stream, step). */
typedef struct ot_gen_seq {
  const int32_t *prompt;
  int n_prompt;
  int max_new_tokens; /* < 0: the options' */
  /* What its sampling draws from, with the seed and the step: give each
   * sequence of a job its own number (its index in the job, say) so that
   * two equal prompts sample differently; ot_generate draws as stream 0. */
  uint64_t stream;
} ot_gen_seq;

typedef struct ot_gen_batch_result {
  int n;                /* sequences */
  /* [n], in the job's order: tokens, text (with a tokenizer), stopped_at_eos,
   * logits_checksum (as ot_generate's), prefill_ms (the prompt step it
   * started in), decode_ms (the decode steps it took part in) and
   * decode_tokens_per_second (its own tokens over them) */
  ot_gen_result *seqs;
  int n_slots;
  int prefill_steps, decode_steps;
  double prefill_ms, decode_ms;     /* all prompt steps, all decode steps */
  int64_t decode_tokens;            /* tokens the decode steps made, over all sequences */
  double decode_tokens_per_second;  /* decode_tokens over decode_ms: what one weight stream served */
  double wall_ms;                   /* the whole job, planning included */
  ot_plan_stats decode_plan;        /* the last decode plan's replays */
  ot_budget_probe decode_probe;     /* the last decode plan's independent budget check (sched.h, done = 0 if
                                       none ran); its time is taken out of decode_ms, as ot_generate does */
  int cancelled;                    /* 1: should_stop stopped the job; the sequences whose on_seq_done was not
                                       called are not finished */
} ot_gen_batch_result;

/* Generates for seqs[0 .. n-1] with up to n_slots of them at once. The
 * options are ot_generate's for every sequence (max_new_tokens where a
 * sequence gives none), except: logits_out is refused (one prompt's
 * logits), hold_device does nothing (a device plan held from an earlier
 * generation is released first), and on_token/on_text are not called
 * (on_seq_done and on_logits are, with the sequence's index). A model
 * without batched steps (GPT-2) runs n_slots = 1 as ot_generate one prompt
 * after another and refuses more. A sequence with max_new_tokens 0 is done
 * at once with no tokens. On failure *r is left empty (results already
 * handed to on_seq_done stay valid for the caller only while it runs). */
ot_status ot_generate_batch(ot_lm *m, const ot_gen_seq *seqs, int n, int n_slots, const ot_gen_opts *o,
                            ot_gen_batch_result *r);
void ot_gen_batch_result_free(ot_gen_batch_result *r);

/* The smallest budget under which ot_generate_batch can run this job (its
 * largest prompt step, all n_slots prompts of the longest, and its decode
 * step), with the model fitted to its smallest as ot_lm_min_budget does. */
ot_status ot_generate_batch_min_budget(ot_lm *m, const ot_gen_seq *seqs, int n, int n_slots, const ot_gen_opts *o,
                                       uint64_t *bytes);

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
