/* generate.c — prompt + decode loop over a model's recorded steps.
 *
 * The prompt step (T = prompt length) and the decode step (T = 1) are each
 * recorded and planned once; the decode plan is replayed for every new
 * token with the position as a run-time scalar. The decode plan is made
 * after the prompt has run, with ot_sched_plan_after: it takes over the
 * prompt plan's device memory with the weights and KV caches in it (7 GB
 * uploaded once, not twice: 140 ms on the H200), and the two plans never
 * hold device memory at the same time, so the budget holds across both.
 * With n_stages > 1
 * (the default OT_SCHED_ALL_DEVICES on a context with several devices) each
 * step is a pipeline over the devices (sched.h, "Several devices"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "kernels/kernels.h"
#include "memory/device.h"
#include "models/decoder.h"
#include "models/generate_impl.h"
#include "omptensor/lm.h"
#include "omptensor/npy.h"
#include "omptensor/textstream.h"

double ot_gen_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

ot_gen_opts ot_gen_opts_default(void) {
  ot_gen_opts o;
  memset(&o, 0, sizeof o);
  o.max_new_tokens = 32;
  o.greedy = 1;
  o.temperature = 1.0f;
  o.top_p = 1.0f;
  o.sched = ot_sched_opts_default();
  o.sched.n_stages = OT_SCHED_ALL_DEVICES; /* a context with several devices splits the model over them */
  return o;
}

void ot_gen_result_free(ot_gen_result *r) {
  if (!r) return;
  free(r->tokens);
  free(r->text);
  memset(r, 0, sizeof *r);
}

/* Picks the next token from one row of logits [vocab], in its host home:
 * the argmax and sampling kernels run on the host device (the ot_ref_*
 * versions are the tests' oracles, not the product's path). The draw
 * depends only on (seed, stream, step), so it is the same on every device
 * and, in a batch, whatever shares it (stream: the sequence's number). */
ot_status ot_gen_pick(const ot_gen_opts *o, const float *row, int64_t vocab, uint64_t stream, uint64_t step,
                      int32_t *tok) {
  ot_kview v = ot_kview_2d((void *)row, OT_F32, 1, vocab);
  ot_kview out = ot_kview_1d(tok, OT_I32, 1);
  const int host = ot_omp_device(OT_DEVICE_HOST);
  if (o->greedy) return ot_k_argmax(host, out, v);
  return ot_k_sample_from(host, out, v, o->temperature, o->top_k, o->top_p, o->seed, step, (int64_t)stream);
}

static double row_sum(const float *row, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += row[i];
  return s;
}

/* Issue 14: NaN or Inf in the logits would pass as tokens (the argmax of a
 * NaN row is some id) and as a checksum. Checked once per step on the rows
 * the step gave, in their host home: a row's sum in double is finite iff
 * every value is (float values cannot overflow a double sum), so the check
 * is the checksum's own pass; only a failure looks for the first bad value.
 * `step` names the step for the message, row r is position pos0 + r. Adds
 * the last row's sum to *sum. */
ot_status ot_gen_check_logits(const float *x, int64_t rows, int64_t vocab, int64_t pos0, const char *step,
                             double *sum) {
  double last = 0;
  for (int64_t r = 0; r < rows; r++) {
    last = row_sum(x + r * vocab, vocab);
    if (isfinite(last)) continue;
    int64_t j = 0;
    while (j < vocab && isfinite(x[r * vocab + j])) j++;
    float v = j < vocab ? x[r * vocab + j] : (float)last;
    return ot_fail(OT_ERR_NUMERIC,
                   "generate: the logits of %s are not finite (%s at position %lld, token id %lld): the weights hold NaN "
                   "or Inf, or the activations overflowed; check the checkpoint's weights, and if they were "
                   "converted to a narrower dtype, load them as f32 (--dtype f32)",
                   step, isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf", (long long)(pos0 + r), (long long)j);
  }
  *sum += last;
  return OT_OK;
}

/* Builds, plans and runs one step; leaves the logits in the step's home. */
static ot_status run_step(ot_lm_step *st, ot_plan *plan, const int32_t *ids, int64_t pos, ot_trace *tr) {
  memcpy(ot_tensor_data(st->ids), ids, (size_t)st->T * sizeof *ids);
  OT_TRY(ot_program_set_scalar(st->prog, st->pos_slot, pos));
  return ot_sched_run(plan, tr);
}

int ot_gen_is_eos(const ot_gen_opts *o, int32_t id) {
  for (int i = 0; i < o->n_eos && i < OT_GEN_MAX_EOS; i++)
    if (o->eos_ids[i] == id) return 1;
  return 0;
}

/* on_logits (if set), then the pick: seq 0 (ot_generate is one sequence). */
static ot_status pick_logged(const ot_gen_opts *o, const float *row, int64_t vocab, uint64_t stream, uint64_t step,
                             int32_t *tok) {
  if (o->on_logits) OT_TRY(o->on_logits(o->logits_user, 0, (int)step, row, vocab));
  return ot_gen_pick(o, row, vocab, stream, step, tok);
}

/* Keeps a new token and tells whoever listens: progress, the token, the
 * text it completes. */
static ot_status took(const ot_gen_opts *o, ot_text_stream *ts, ot_gen_result *r, int32_t id) {
  r->tokens[r->n_tokens++] = id;
  if (o->progress) o->progress(o->progress_user, "generate", (uint64_t)r->n_tokens, (uint64_t)o->max_new_tokens);
  if (o->on_token) OT_TRY(o->on_token(o->token_user, id, r->n_tokens - 1));
  if (!ts) return OT_OK;
  const char *piece;
  size_t n;
  OT_TRY(ot_text_stream_push(ts, id, &piece, &n));
  return n && o->on_text ? o->on_text(o->text_user, piece, n) : OT_OK;
}

ot_status ot_gen_begin(ot_lm *m, const ot_gen_opts *o) {
  if (ot_decoder_prefill_choice() == -2)
    return ot_fail(OT_ERR_INVALID_ARG, "OMPTENSOR_PREFILL_DTYPE='%s': use auto (the weights' dtype where cuBLAS runs "
                                       "the prompt's GEMMs), weights or f32 (exact fp32 math)",
                   getenv("OMPTENSOR_PREFILL_DTYPE"));
  const ot_dtype kv = o->kv_dtype;
  if (kv != OT_F32 && kv != OT_BF16 && kv != OT_F16)
    return ot_fail(OT_ERR_DTYPE, "generate: KV cache dtype %s (%d); use f32, bf16 or f16",
                   ot_dtype_name(kv), (int)kv);
  m->kv_dtype = kv;
  return OT_OK;
}

/* The last plan and its step: kept in the model for the next generation
 * (hold_device, after a success), else destroyed. */
static void hold(ot_lm *m, const ot_gen_opts *o, ot_status s, ot_plan *plan, ot_lm_step *st) {
  /* not usm: its plans cannot hand over, and releasing one reads the homes of
   * the KV caches, which the next generation may have replaced by then */
  /* a deferring decode plan writes its KV rows home first: the next
   * generation may replace the caches before it hands the plan over */
  if (o->hold_device && s == OT_OK && plan && ot_ctx_backend(m->ctx) != OT_BACKEND_USM &&
      ot_sched_sync(plan) == OT_OK) {
    m->held_plan = plan;
    m->held_step = *st;
    *st = (ot_lm_step){0};
    return;
  }
  ot_plan_destroy(plan);
  ot_lm_step_destroy(st);
}

/* The budget the steps are planned under on their (first) device: the
 * options' or the context's. */
uint64_t ot_gen_budget(const ot_lm *m, const ot_gen_opts *o) {
  return o->sched.budget_bytes ? o->sched.budget_bytes : ot_ctx_budget(m->ctx, o->sched.device_index);
}

ot_sched_opts ot_gen_sched(const ot_gen_opts *o) {
  ot_sched_opts so = o->sched;
  if (!so.measure_rates) so.measure_rates = ot_k_host_rates;
  so.micro_batches = 0; /* only the batched decode step runs micro-batches (generate_batch.c, micro_groups) */
  return so;
}

/* A decode step writes one KV row a layer; written home after every step
 * that is 2 copies a layer a token (32 a token at 16 layers, 1024 at batch
 * 32), ~0.3 ms of a 5 ms resident step on the H100. Deferred, the rows go
 * home when the plan is synced: handed over to the next plan, destroyed.
 * Only where nothing streams: hybrid compute reads homes, and a budget that
 * evicts would write rows home anyway. */
ot_sched_opts ot_gen_decode_sched(const ot_gen_opts *o) {
  ot_sched_opts so = ot_gen_sched(o);
  if (!so.defer_writeback) so.defer_writeback = OT_DEFER_IF_RESIDENT;
  return so;
}

static ot_status generate(ot_lm *m, const int32_t *prompt, int n_prompt, const ot_gen_opts *o, uint64_t stream,
                          ot_text_stream *ts, ot_gen_result *r) {
  OT_TRY(ot_gen_begin(m, o));
  if (n_prompt < 1) return ot_fail(OT_ERR_INVALID_ARG, "generate: the prompt is empty (give at least one token id)");
  for (int i = 0; i < n_prompt; i++)
    if (prompt[i] < 0 || prompt[i] >= m->vocab)
      return ot_fail(OT_ERR_INVALID_ARG, "generate: prompt token %d is %d, outside the vocabulary [0, %lld)", i,
                     prompt[i], (long long)m->vocab);
  if ((int64_t)n_prompt + o->max_new_tokens > m->max_seq)
    return ot_fail(OT_ERR_INVALID_ARG, "generate: %d prompt + %d new tokens exceed the model's %lld positions",
                   n_prompt, o->max_new_tokens, (long long)m->max_seq);
  r->tokens = malloc((size_t)(o->max_new_tokens > 0 ? o->max_new_tokens : 1) * sizeof *r->tokens);
  if (!r->tokens) return ot_fail(OT_ERR_OUT_OF_MEMORY, "generate: no host memory");

  m->n_ctx = (int64_t)n_prompt + (o->max_new_tokens > 0 ? o->max_new_tokens : 1);
  OT_TRY(ot_lm_fit(m, ot_gen_budget(m, o), n_prompt)); /* before the held plan is taken: a change releases it */
  ot_lm_step st = {0};
  ot_plan *plan = NULL;
  /* the last generation's held plan (hold_device): the prompt starts from
   * the weights it left on the device; its memory is released either way */
  ot_plan *held = m->held_plan;
  ot_lm_step held_step = m->held_step;
  m->held_plan = NULL;
  m->held_step = (ot_lm_step){0};
  const ot_sched_opts so = ot_gen_sched(o);
  ot_status s = m->vt->build(m, n_prompt, o->logits_out != NULL, &st);
  if (s == OT_OK)
    s = held ? ot_sched_plan_after(held, st.prog, &so, &plan) : ot_sched_plan(m->ctx, st.prog, &so, &plan);
  ot_plan_destroy(held);
  ot_lm_step_destroy(&held_step);
  if (s == OT_OK) r->prefill_handed_over_bytes = ot_plan_get_stats(plan, 0).inherited_bytes;
  /* where each phase starts, for plots of the trace (trace.h) */
  if (s == OT_OK) s = ot_trace_mark(o->trace, "prefill");
  double t0 = ot_gen_now_ms();
  if (s == OT_OK) s = run_step(&st, plan, prompt, 0, o->trace);
  r->prefill_ms = ot_gen_now_ms() - t0;
  if (s == OT_OK) r->prefill_plan = ot_plan_get_stats(plan, 0);
  const float *logits = s == OT_OK ? ot_tensor_data(st.logits) : NULL;
  int64_t rows = s == OT_OK ? ot_tensor_dim(st.logits, 0) : 0;
  char what[96];
  snprintf(what, sizeof what, "the prefill (the prompt of %d tokens)", n_prompt);
  double prefill_sum = 0;
  /* before they are written or used; all rows with logits_out, else the last */
  if (s == OT_OK) s = ot_gen_check_logits(logits, rows, m->vocab, n_prompt - rows, what, &prefill_sum);
  if (s == OT_OK && o->logits_out) {
    int64_t shape[2] = {rows, m->vocab};
    s = ot_npy_write(o->logits_out, OT_F32, 2, shape, logits);
  }
  int32_t next = 0;
  if (s == OT_OK && o->max_new_tokens > 0) {
    const float *last = logits + (rows - 1) * m->vocab;
    r->logits_checksum += prefill_sum;
    s = pick_logged(o, last, m->vocab, stream, 0, &next);
  }
  if (s == OT_OK && o->max_new_tokens > 0) s = took(o, ts, r, next);
  if (s != OT_OK || o->max_new_tokens == 0) {
    hold(m, o, s, plan, &st);
    return s;
  }
  r->stopped_at_eos = ot_gen_is_eos(o, next);

  /* decode: one token per replay, planned to start from what the prompt
   * plan left on the device (recorded before the prompt's step goes: its
   * program is what the handoff reads) */
  ot_lm_step dst = {0};
  ot_plan *dplan = NULL;
  s = m->vt->build(m, 1, 0, &dst);
  const ot_sched_opts dso = ot_gen_decode_sched(o);
  if (s == OT_OK) s = ot_sched_plan_after(plan, dst.prog, &dso, &dplan);
  ot_plan_destroy(plan);
  ot_lm_step_destroy(&st);
  st = dst;
  plan = dplan;
  if (s == OT_OK) r->handed_over_bytes = ot_plan_get_stats(plan, 0).inherited_bytes;
  if (s == OT_OK && o->max_new_tokens > 1) s = ot_trace_mark(o->trace, "decode");
  const ot_experts_stats ex0 = ot_experts_get_stats(m->experts);
  t0 = ot_gen_now_ms();
  for (int i = 1; s == OT_OK && i < o->max_new_tokens && !r->stopped_at_eos; i++) {
    if (o->should_stop && o->should_stop(o->stop_user)) { /* a token boundary: stop with what was made */
      r->cancelled = 1;
      break;
    }
    s = run_step(&st, plan, &next, n_prompt + i - 1, o->trace);
    if (s != OT_OK) break;
    const float *row = ot_tensor_data(st.logits);
    snprintf(what, sizeof what, "decode step %d (position %d)", i, n_prompt + i - 1);
    s = ot_gen_check_logits(row, 1, m->vocab, n_prompt + i - 1, what, &r->logits_checksum);
    if (s != OT_OK) break;
    s = pick_logged(o, row, m->vocab, stream, (uint64_t)i, &next);
    if (s != OT_OK) break;
    s = took(o, ts, r, next);
    r->stopped_at_eos = ot_gen_is_eos(o, next);
  }
  r->decode_ms = ot_gen_now_ms() - t0;
  const ot_experts_stats ex1 = ot_experts_get_stats(m->experts);
  r->decode_experts = (ot_experts_stats){ex1.routed - ex0.routed, ex1.hits - ex0.hits, ex1.fills - ex0.fills,
                                         ex1.fill_bytes - ex0.fill_bytes};
  if (plan) ot_plan_budget_probe(plan, &r->decode_probe);
  r->decode_ms -= r->decode_probe.seconds * 1e3; /* the check is not the product's work (lm.h) */
  if (r->n_tokens > 1 && r->decode_ms > 0) r->decode_tokens_per_second = (r->n_tokens - 1) / (r->decode_ms / 1e3);
  if (plan) r->decode_plan = ot_plan_get_stats(plan, 1);
  hold(m, o, s, plan, &st);
  return s;
}

/* The stream's held-back end, then the whole text into the result. */
ot_status ot_gen_finish_text(const ot_gen_opts *o, ot_text_stream *ts, ot_gen_result *r) {
  const char *piece, *all;
  size_t n, len;
  OT_TRY(ot_text_stream_finish(ts, &piece, &n));
  if (n && o->on_text) OT_TRY(o->on_text(o->text_user, piece, n));
  all = ot_text_stream_text(ts, &len);
  if (!(r->text = malloc(len + 1))) return ot_fail(OT_ERR_OUT_OF_MEMORY, "generate: no host memory for the text");
  memcpy(r->text, all, len + 1);
  r->text_len = len;
  return OT_OK;
}

ot_status ot_gen_one(ot_lm *m, const int32_t *prompt, int n_prompt, const ot_gen_opts *o, uint64_t stream,
                     ot_gen_result *r) {
  memset(r, 0, sizeof *r);
  if (!m || !o || (!prompt && n_prompt)) return ot_fail(OT_ERR_INVALID_ARG, "ot_generate: NULL argument");
  ot_text_stream *ts = NULL;
  ot_status s = o->tokenizer ? ot_text_stream_new(o->tokenizer, 1, &ts) : OT_OK;
  if (s == OT_OK) s = generate(m, prompt, n_prompt, o, stream, ts, r);
  if (s == OT_OK && ts) s = ot_gen_finish_text(o, ts, r);
  ot_text_stream_destroy(ts);
  /* A failure leaves nothing to free (the token buffer leaked on failed
   * runs before; found by OMPTENSOR_FAULT under LeakSanitizer). */
  if (s != OT_OK) ot_gen_result_free(r);
  return s;
}

ot_status ot_generate(ot_lm *m, const int32_t *prompt, int n_prompt, const ot_gen_opts *o, ot_gen_result *r) {
  return ot_gen_one(m, prompt, n_prompt, o, 0, r);
}

ot_status ot_generate_check(ot_lm *m, int n_prompt, const ot_gen_opts *o) {
  OT_TRY(ot_gen_begin(m, o));
  m->n_ctx = (int64_t)n_prompt + (o->max_new_tokens > 0 ? o->max_new_tokens : 1);
  OT_TRY(ot_lm_fit(m, ot_gen_budget(m, o), n_prompt));
  const int T[2] = {n_prompt, 1}, all[2] = {o->logits_out != NULL, 0};
  for (int i = 0; i < (o->max_new_tokens > 1 ? 2 : 1); i++) {
    ot_lm_step st = {0};
    ot_plan *plan = NULL;
    ot_status s = m->vt->build(m, T[i], all[i], &st);
    const ot_sched_opts so = ot_gen_sched(o);
    if (s == OT_OK) s = ot_sched_plan(m->ctx, st.prog, &so, &plan);
    ot_plan_destroy(plan);
    ot_lm_step_destroy(&st);
    if (s != OT_OK) return s;
  }
  return OT_OK;
}

ot_status ot_generate_text(ot_lm *m, const ot_tokenizer *tk, const char *text, size_t len, const ot_gen_opts *o,
                           ot_gen_result *r, int32_t **prompt_ids, int *n_prompt) {
  memset(r, 0, sizeof *r);
  if (prompt_ids) *prompt_ids = NULL;
  if (n_prompt) *n_prompt = 0;
  if (!m || !tk || (!text && len) || !o) return ot_fail(OT_ERR_INVALID_ARG, "ot_generate_text: NULL argument");
  int32_t *ids;
  size_t n;
  OT_TRY(ot_tokenizer_encode(tk, text ? text : "", len, 1, &ids, &n));
  if (n > INT32_MAX) {
    free(ids);
    return ot_fail(OT_ERR_INVALID_ARG, "generate: the prompt is %zu tokens; at most %d", n, INT32_MAX);
  }
  ot_gen_opts with = *o;
  with.tokenizer = tk;
  ot_status s = ot_generate(m, ids, (int)n, &with, r);
  if (s == OT_OK && prompt_ids) *prompt_ids = ids;
  else free(ids);
  if (s == OT_OK && n_prompt) *n_prompt = (int)n;
  return s;
}
