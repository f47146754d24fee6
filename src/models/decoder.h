/* decoder.h (models-internal) — what the recorded steps of the decoder
 * models (llama.c, gpt2.c) share around their layers:
 *
 *     OT_TRY(ot_decoder_step_begin(m, &kv, layers, n_kv, head_dim, T, st));  // caches, program, "pos"
 *     ... activations, embedding, layers ...
 *     OT_TRY(ot_decoder_step_head(m, st, all_logits, h, x, &hl, &xl));       // rows for the head, logits
 *     ... final norm xl = norm(hl), st->logits = xl head^T ...
 *     return ot_decoder_step_end(&kv, st);                                   // ids in, logits out, caches kept
 */
#ifndef OT_MODELS_DECODER_H
#define OT_MODELS_DECODER_H

#include "models/kvcache.h"

/* What the models' make functions share before they make a weight: the
 * label of their config in messages ("DIR/config.json" of the checkpoint,
 * or "the synthetic model's config" without one), and the check that the
 * weights' (or caches') bytes fit in host memory — OT_ERR_OUT_OF_MEMORY
 * "LABEL: WHAT need N of host memory, but M is available: TODO". */
#define OT_MODEL_WEIGHTS_TODO "load them in a smaller dtype (--dtype bf16 or int8), or use a smaller model or a machine with more memory"
void ot_model_config_label(char *buf, size_t cap, const ot_ckpt *ck);
ot_status ot_model_check_host_memory(const char *label, uint64_t bytes, const char *what, const char *todo);

/* Empties *st for a step of T tokens, sizes the caches to the positions the
 * next generation needs (m->n_ctx) and creates the program with its run-time
 * scalar "pos" (st->pos_slot). */
ot_status ot_decoder_step_begin(ot_lm *m, ot_kvcache *kv, int64_t n_layers, int64_t n_kv, int64_t head_dim, int T,
                                ot_lm_step *st);

/* The dtype of a step's GEMM-input activations for weights of dtype wt:
 * wt itself (bf16/f16) when the step has several rows and its GEMMs go to
 * the vendor library on the context's device (kernels.h,
 * ot_k_gemm_vendor), else f32. */
ot_dtype ot_decoder_act_dtype(const ot_lm *m, int T, ot_dtype wt);
/* OMPTENSOR_PREFILL_DTYPE: auto (unset: the weights' dtype where the GEMMs
 * go to cuBLAS) 0, weights (everywhere) 1, f32 (never: exact fp32 math,
 * slower prefill on a GPU) -1, anything else -2 (refused by
 * ot_generate). */
int ot_decoder_prefill_choice(void);

/* The rows of the residual stream h and the normed x [T, D] that go through
 * the final norm and the head: all of them (all_logits), or the last row
 * only (views the step owns); and st->logits [rows, vocab]. */
ot_status ot_decoder_step_head(ot_lm *m, ot_lm_step *st, int all_logits, ot_tensor *h, ot_tensor *x, ot_tensor **hl,
                               ot_tensor **xl);

/* A batched step (lm.h, build_batch): as ot_decoder_step_begin, with the
 * caches sized to m->n_slots sequences of m->n_ctx positions
 * ([slots, n_ctx, KV, hd]) and st->rows i32 [T, 2] made; no "pos" scalar
 * (st->pos_slot -1: each row brings its position). */
ot_status ot_decoder_batch_begin(ot_lm *m, ot_kvcache *kv, int64_t n_layers, int64_t n_kv, int64_t head_dim, int T,
                                 ot_lm_step *st);

/* A batched step's rows for the final norm and the head: all T rows when
 * n_logits == T (hl = h, xl = x), else the n_logits rows st->last names,
 * gathered from h into a [n_logits, D] activation (xl another, in x's
 * dtype); and st->logits [n_logits, vocab]. */
ot_status ot_decoder_batch_head(ot_lm *m, ot_lm_step *st, int n_logits, ot_tensor *h, ot_tensor *x, ot_tensor **hl,
                                ot_tensor **xl);

/* Marks st->ids (and st->rows, st->last) inputs, st->logits an output and
 * the caches persistent. */
ot_status ot_decoder_step_end(const ot_kvcache *kv, ot_lm_step *st);

#endif
