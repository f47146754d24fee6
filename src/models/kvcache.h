/* kvcache.h (models-internal) — the key/value caches of a model: one [n_ctx, KV, hd]
 * pair per layer, sized to the positions a generation needs (prompt + new
 * tokens), not to the model's maximum: at 4096 positions a 16-layer 7B-shaped
 * model's f32 caches would take 2 GiB of the budget for nothing.
 *
 * A batched generation (issue 19) has a slot per sequence it runs at once:
 * one [slots, n_ctx, KV, hd] pair per layer, a tensor per layer as before,
 * so the planner keeps, evicts and reloads a layer's caches of every
 * sequence together (a decode step reads all of them). */
#ifndef OT_MODELS_KVCACHE_H
#define OT_MODELS_KVCACHE_H

#include "omptensor/lm.h"

typedef struct ot_kvcache {
  ot_tensor **k, **v; /* [n_layers] each [n_ctx, n_kv, head_dim] f32, or [slots, n_ctx, n_kv, head_dim] */
  int64_t n_layers, n_ctx;
  int64_t slots; /* 0: one sequence (3-D caches) */
} ot_kvcache;

/* (Re)creates the caches when n_ctx changed or they had slots (contents
 * start at zero). */
ot_status ot_kvcache_ensure(ot_kvcache *c, ot_ctx *ctx, int64_t n_layers, int64_t n_ctx, int64_t n_kv, int64_t head_dim);
/* The same with `slots` sequences (slots >= 1: 4-D caches; 0 as ot_kvcache_ensure). */
ot_status ot_kvcache_ensure_slots(ot_kvcache *c, ot_ctx *ctx, int64_t n_layers, int64_t slots, int64_t n_ctx,
                                  int64_t n_kv, int64_t head_dim);

/* Marks every cache persistent in program p. */
ot_status ot_kvcache_mark(const ot_kvcache *c, ot_program *p);

void ot_kvcache_release(ot_kvcache *c);

#endif
