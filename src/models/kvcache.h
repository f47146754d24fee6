/* kvcache.h (models-internal) — the key/value caches of a model: one [n_ctx, KV, hd]
 * pair per layer, sized to the positions a generation needs (prompt + new
 * tokens), not to the model's maximum: at 4096 positions a 16-layer 7B-shaped
 * model's f32 caches would take 2 GiB of the budget for nothing.
 *
 * Their dtype is the generation's (ot_gen_opts.kv_dtype, m->kv_dtype): f32
 * by default; bf16 or f16 halve the bytes a budget must hold or stream for
 * them, which decides how many sequences a batch can run beside the weights
 * (transformers keeps a bf16 model's cache in bf16 too). Every kernel that
 * reads or appends to a cache takes any float dtype and computes in f32.
 *
 * A batched generation (issue 19) has a slot per sequence it runs at once:
 * one [slots, n_ctx, KV, hd] pair per layer, a tensor per layer as before,
 * so the planner keeps, evicts and reloads a layer's caches of every
 * sequence together (a decode step reads all of them). */
#ifndef OT_MODELS_KVCACHE_H
#define OT_MODELS_KVCACHE_H

#include "omptensor/lm.h"

typedef struct ot_kvcache {
  ot_tensor **k, **v; /* [n_layers] each [n_ctx, n_kv, head_dim], or [slots, n_ctx, n_kv, head_dim] */
  int64_t n_layers, n_ctx;
  ot_dtype dtype;
  int64_t slots; /* 0: one sequence (3-D caches) */
} ot_kvcache;

/* (Re)creates the caches of dtype dt (f32, bf16 or f16) when n_ctx or the
 * dtype changed or they had slots (contents start at zero). */
ot_status ot_kvcache_ensure(ot_kvcache *c, ot_ctx *ctx, ot_dtype dt, int64_t n_layers, int64_t n_ctx, int64_t n_kv,
                            int64_t head_dim);
/* The same with `slots` sequences (slots >= 1: 4-D caches; 0 as ot_kvcache_ensure). */
ot_status ot_kvcache_ensure_slots(ot_kvcache *c, ot_ctx *ctx, ot_dtype dt, int64_t n_layers, int64_t slots,
                                  int64_t n_ctx, int64_t n_kv, int64_t head_dim);

/* Marks every cache persistent in program p. */
ot_status ot_kvcache_mark(const ot_kvcache *c, ot_program *p);

void ot_kvcache_release(ot_kvcache *c);

#endif
