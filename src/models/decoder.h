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

/* Empties *st for a step of T tokens, sizes the caches to the positions the
 * next generation needs (m->n_ctx) and creates the program with its run-time
 * scalar "pos" (st->pos_slot). */
ot_status ot_decoder_step_begin(ot_lm *m, ot_kvcache *kv, int64_t n_layers, int64_t n_kv, int64_t head_dim, int T,
                                ot_lm_step *st);

/* The rows of the residual stream h and the normed x [T, D] that go through
 * the final norm and the head: all of them (all_logits), or the last row
 * only (views the step owns); and st->logits [rows, vocab]. */
ot_status ot_decoder_step_head(ot_lm *m, ot_lm_step *st, int all_logits, ot_tensor *h, ot_tensor *x, ot_tensor **hl,
                               ot_tensor **xl);

/* Marks st->ids an input, st->logits an output and the caches persistent. */
ot_status ot_decoder_step_end(const ot_kvcache *kv, ot_lm_step *st);

#endif
