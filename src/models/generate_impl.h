/* generate_impl.h (models-internal) — what the one-sequence loop
 * (generate.c) and the batched one (generate_batch.c) share: the token
 * pick, the logits check, EOS, the budget, the text at the end. */
#ifndef OT_MODELS_GENERATE_IMPL_H
#define OT_MODELS_GENERATE_IMPL_H

#include "omptensor/lm.h"
#include "omptensor/textstream.h"

double ot_gen_now_ms(void);
/* The next token from one row of logits [vocab] in host memory; a sampled
 * draw depends on (seed, stream, step) only. */
ot_status ot_gen_pick(const ot_gen_opts *o, const float *row, int64_t vocab, uint64_t stream, uint64_t step,
                      int32_t *tok);
/* NaN/Inf in rows [rows, vocab] fails with OT_ERR_NUMERIC naming `step`
 * (row r at position pos0 + r); adds the last row's sum to *sum. */
ot_status ot_gen_check_logits(const float *x, int64_t rows, int64_t vocab, int64_t pos0, const char *step,
                              double *sum);
int ot_gen_is_eos(const ot_gen_opts *o, int32_t id);
/* What every generation checks before anything is recorded (a bad
 * OMPTENSOR_PREFILL_DTYPE, o->kv_dtype), and the options the model's steps
 * are then recorded with (m->kv_dtype). */
ot_status ot_gen_begin(ot_lm *m, const ot_gen_opts *o);
/* The budget steps are planned under on their (first) device. */
uint64_t ot_gen_budget(const ot_lm *m, const ot_gen_opts *o);
/* The options' plan options, measuring the host kernel's rates
 * (ot_k_host_rates, once per process) if a plan weighs hybrid compute. */
ot_sched_opts ot_gen_sched(const ot_gen_opts *o);
/* The same for a decode step's plan: defer_writeback where everything is
 * resident (OT_DEFER_IF_RESIDENT), unless the options set it. */
ot_sched_opts ot_gen_decode_sched(const ot_gen_opts *o);
/* The stream's held-back end (to on_text), then the whole text into r. */
ot_status ot_gen_finish_text(const ot_gen_opts *o, ot_text_stream *ts, ot_gen_result *r);
/* ot_generate drawing as `stream`. */
ot_status ot_gen_one(ot_lm *m, const int32_t *prompt, int n_prompt, const ot_gen_opts *o, uint64_t stream,
                     ot_gen_result *r);

#endif
