/* gguf_build.h — small GGUF files written in memory by the tests, one key
 * or tensor at a time, so that a test can give one metadata key another
 * type, a tensor another offset, a key twice (the files of tests/data/gguf
 * come from the gguf package, which writes only well-formed ones).
 *
 *     ot_gb b;
 *     ot_gb_init(&b);
 *     ot_gb_llama(&b, "llama.rope.freq_base");   // a llama's metadata but that key
 *     ot_gb_i32(&b, "llama.rope.freq_base", 500000);
 *     ot_gb_finish(&b, 0);                       // b.p, b.len: the file
 *     ot_gb_free(&b);
 *
 * Keys come first, then tensors (the format's order); ot_gb_finish writes
 * the counts, pads to the alignment (32) and appends data_bytes of zeros. */
#ifndef OT_GGUF_BUILD_H
#define OT_GGUF_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/gguf.h"

typedef struct ot_gb {
  unsigned char *p;
  size_t len, cap;
  uint64_t n_kv, n_t;
} ot_gb;

void ot_gb_init(ot_gb *b);
void ot_gb_free(ot_gb *b);

/* One scalar key of type t; v holds the value in the type's width
 * (little-endian bytes), or for OT_GGUF_V_STRING a C string. */
void ot_gb_kv(ot_gb *b, const char *key, ot_gguf_vtype t, const void *v);
void ot_gb_u32(ot_gb *b, const char *key, uint32_t v);
void ot_gb_i32(ot_gb *b, const char *key, int32_t v);
void ot_gb_f32(ot_gb *b, const char *key, float v);
void ot_gb_str(ot_gb *b, const char *key, const char *v);
/* An array of n strings, or of n numbers of type t (v: n values of its width). */
void ot_gb_strs(ot_gb *b, const char *key, uint64_t n, const char *const *v);
void ot_gb_array(ot_gb *b, const char *key, ot_gguf_vtype t, uint64_t n, const void *v);

/* A llama's metadata (2 layers of width 64, 4 heads, 2 kv heads, vocab 32,
 * context 64, eps 1e-5, theta 10000, bos 1, eos 2) except the key `skip`
 * (NULL: all), which the caller then writes as it likes. */
void ot_gb_llama(ot_gb *b, const char *skip);

/* A tensor info: ndim dims, ne innermost first (GGUF's order). */
void ot_gb_tensor(ot_gb *b, const char *name, int ndim, const uint64_t *ne, uint32_t type, uint64_t offset);

void ot_gb_finish(ot_gb *b, size_t data_bytes);

#endif
