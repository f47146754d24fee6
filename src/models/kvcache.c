/* kvcache.c — see kvcache.h. */
#include <stdio.h>
#include <stdlib.h>

#include "core/checked.h"
#include "core/error.h"
#include "models/kvcache.h"
#include "omptensor/memory.h"

void ot_kvcache_release(ot_kvcache *c) {
  for (int64_t i = 0; i < c->n_layers; i++) {
    if (c->k) ot_tensor_destroy(c->k[i]);
    if (c->v) ot_tensor_destroy(c->v[i]);
  }
  free(c->k);
  free(c->v);
  *c = (ot_kvcache){0};
}

ot_status ot_kvcache_ensure(ot_kvcache *c, ot_ctx *ctx, ot_dtype dt, int64_t n_layers, int64_t n_ctx, int64_t n_kv,
                            int64_t head_dim) {
  return ot_kvcache_ensure_slots(c, ctx, dt, n_layers, 0, n_ctx, n_kv, head_dim);
}

ot_status ot_kvcache_ensure_slots(ot_kvcache *c, ot_ctx *ctx, ot_dtype dt, int64_t n_layers, int64_t slots,
                                  int64_t n_ctx, int64_t n_kv, int64_t head_dim) {
  if (dt != OT_F32 && dt != OT_BF16 && dt != OT_F16)
    return ot_fail(OT_ERR_DTYPE, "KV caches: dtype %s; they are f32, bf16 or f16", ot_dtype_name(dt));
  if (c->k && c->n_ctx == n_ctx && c->n_layers == n_layers && c->slots == slots && c->dtype == dt) return OT_OK;
  ot_kvcache_release(c);
  /* 2 caches of [slots?, n_ctx, n_kv, head_dim] per layer: checked before any is made */
  int ovf = 0;
  int64_t bytes = ot_sz_mul(&ovf, ot_sz_mul3(&ovf, 2 * (int64_t)ot_dtype_bytes(dt, 1), n_layers, n_ctx),
                            ot_sz_mul3(&ovf, n_kv, head_dim, slots > 0 ? slots : 1));
  ot_status s0 = ovf ? OT_ERR_OUT_OF_MEMORY : ot_host_memory_check((uint64_t)bytes, "the KV caches");
  if (s0 != OT_OK) {
    char seqs[48] = "";
    if (slots > 0) snprintf(seqs, sizeof seqs, "%lld sequences x ", (long long)slots);
    return ot_set_error(s0, "KV caches of %s%lld positions x %lld layers x %lld kv heads x head_dim %lld: %s: generate "
                        "fewer tokens%s",
                        seqs, (long long)n_ctx, (long long)n_layers, (long long)n_kv, (long long)head_dim,
                        ovf ? "the byte count overflows" : ot_last_error(),
                        slots > 1 ? ", or run fewer sequences at once" : "");
  }
  c->k = calloc((size_t)n_layers, sizeof *c->k);
  c->v = calloc((size_t)n_layers, sizeof *c->v);
  c->n_layers = n_layers;
  c->n_ctx = n_ctx;
  c->slots = slots;
  c->dtype = dt;
  if (!c->k || !c->v) {
    ot_kvcache_release(c);
    return ot_set_error(OT_ERR_OUT_OF_MEMORY, "KV cache: no host memory");
  }
  const int64_t shape3[3] = {n_ctx, n_kv, head_dim}, shape4[4] = {slots, n_ctx, n_kv, head_dim};
  const int nd = slots > 0 ? 4 : 3;
  const int64_t *shape = slots > 0 ? shape4 : shape3;
  for (int64_t i = 0; i < n_layers; i++) {
    char name[64];
    ot_status s;
    snprintf(name, sizeof name, "layers.%lld.k_cache", (long long)i);
    s = ot_tensor_create(ctx, name, dt, nd, shape, &c->k[i]);
    if (s == OT_OK) {
      snprintf(name, sizeof name, "layers.%lld.v_cache", (long long)i);
      s = ot_tensor_create(ctx, name, dt, nd, shape, &c->v[i]);
    }
    if (s != OT_OK) {
      ot_kvcache_release(c);
      return s;
    }
  }
  return OT_OK;
}

ot_status ot_kvcache_mark(const ot_kvcache *c, ot_program *p) {
  for (int64_t i = 0; i < c->n_layers; i++) {
    ot_status s = ot_program_mark_persistent(p, c->k[i]);
    if (s == OT_OK) s = ot_program_mark_persistent(p, c->v[i]);
    if (s != OT_OK) return s;
  }
  return OT_OK;
}
