/* gguf_build.c — GGUF files in memory for the tests (gguf_build.h). */
#include "gguf_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(ot_gb *b, const void *v, size_t n) {
  if (b->len + n > b->cap) {
    b->cap = (b->len + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  memcpy(b->p + b->len, v, n);
  b->len += n;
}

static void put_u32(ot_gb *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(ot_gb *b, uint64_t v) { put(b, &v, 8); }
static void put_s(ot_gb *b, const char *s) {
  put_u64(b, strlen(s));
  put(b, s, strlen(s));
}

/* the width of a scalar of type t (0: string, array) */
static size_t width(ot_gguf_vtype t) {
  static const size_t w[OT_GGUF_V_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  return (unsigned)t < OT_GGUF_V_COUNT ? w[t] : 0;
}

void ot_gb_init(ot_gb *b) {
  memset(b, 0, sizeof *b);
  put(b, "GGUF", 4);
  put_u32(b, 3);
  put_u64(b, 0); /* tensors, keys: ot_gb_finish */
  put_u64(b, 0);
}

void ot_gb_free(ot_gb *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

void ot_gb_kv(ot_gb *b, const char *key, ot_gguf_vtype t, const void *v) {
  put_s(b, key);
  put_u32(b, (uint32_t)t);
  if (t == OT_GGUF_V_STRING) put_s(b, (const char *)v);
  else put(b, v, width(t));
  b->n_kv++;
}

void ot_gb_u32(ot_gb *b, const char *key, uint32_t v) { ot_gb_kv(b, key, OT_GGUF_V_U32, &v); }
void ot_gb_i32(ot_gb *b, const char *key, int32_t v) { ot_gb_kv(b, key, OT_GGUF_V_I32, &v); }
void ot_gb_f32(ot_gb *b, const char *key, float v) { ot_gb_kv(b, key, OT_GGUF_V_F32, &v); }
void ot_gb_str(ot_gb *b, const char *key, const char *v) { ot_gb_kv(b, key, OT_GGUF_V_STRING, v); }

void ot_gb_strs(ot_gb *b, const char *key, uint64_t n, const char *const *v) {
  put_s(b, key);
  put_u32(b, OT_GGUF_V_ARRAY);
  put_u32(b, OT_GGUF_V_STRING);
  put_u64(b, n);
  for (uint64_t i = 0; i < n; i++) put_s(b, v[i]);
  b->n_kv++;
}

void ot_gb_array(ot_gb *b, const char *key, ot_gguf_vtype t, uint64_t n, const void *v) {
  put_s(b, key);
  put_u32(b, OT_GGUF_V_ARRAY);
  put_u32(b, (uint32_t)t);
  put_u64(b, n);
  put(b, v, (size_t)n * width(t));
  b->n_kv++;
}

void ot_gb_llama(ot_gb *b, const char *skip) {
  static const struct { const char *key; uint32_t v; } sizes[] = {
      {"llama.embedding_length", 64}, {"llama.feed_forward_length", 128}, {"llama.block_count", 2},
      {"llama.attention.head_count", 4}, {"llama.attention.head_count_kv", 2}, {"llama.context_length", 64},
      {"llama.vocab_size", 32}, {"llama.rope.dimension_count", 16}, {"tokenizer.ggml.bos_token_id", 1},
      {"tokenizer.ggml.eos_token_id", 2},
  };
  if (!skip || strcmp(skip, "general.architecture")) ot_gb_str(b, "general.architecture", "llama");
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    if (!skip || strcmp(skip, sizes[i].key)) ot_gb_u32(b, sizes[i].key, sizes[i].v);
  if (!skip || strcmp(skip, "llama.attention.layer_norm_rms_epsilon"))
    ot_gb_f32(b, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
  if (!skip || strcmp(skip, "llama.rope.freq_base")) ot_gb_f32(b, "llama.rope.freq_base", 10000.0f);
}

void ot_gb_tensor(ot_gb *b, const char *name, int ndim, const uint64_t *ne, uint32_t type, uint64_t offset) {
  put_s(b, name);
  put_u32(b, (uint32_t)ndim);
  for (int d = 0; d < ndim; d++) put_u64(b, ne[d]);
  put_u32(b, type);
  put_u64(b, offset);
  b->n_t++;
}

void ot_gb_finish(ot_gb *b, size_t data_bytes) {
  memcpy(b->p + 8, &b->n_t, 8);
  memcpy(b->p + 16, &b->n_kv, 8);
  static const unsigned char zero[64];
  while (b->len % 32) put(b, zero, 1);
  for (size_t k = 0; k < data_bytes; k += sizeof zero)
    put(b, zero, data_bytes - k < sizeof zero ? data_bytes - k : sizeof zero);
}
