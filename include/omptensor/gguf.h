/* gguf.h — GGUF files (llama.cpp's format): the header, the metadata and
 * the tensor infos, read and checked before any tensor byte is.
 *
 *     ot_gguf *g;
 *     ot_status s = ot_gguf_open("model.gguf", &g);
 *     for (int i = 0; s == OT_OK && i < ot_gguf_num_tensors(g); i++) {
 *       const ot_gguf_tensor *t = ot_gguf_tensor_at(g, i);
 *       ... t->name, t->shape, t->type, t->offset, t->bytes ...
 *     }
 *     const char *arch = ot_gguf_get_string(g, "general.architecture");
 *     ot_gguf_close(g);
 *
 * Versions 2 and 3 (what llama.cpp writes today is 3), little-endian.
 * Checked: the magic and version; every count, string and array length
 * against what is left of the file (and sane limits); known value types;
 * no metadata key twice; general.alignment a u32 power of two (default
 * 32); each tensor's dims (1 to 4, positive, no overflow), a known type
 * whose block divides the innermost dim, its offset aligned, and its bytes
 * inside the file; no two tensors with one name or with overlapping bytes.
 * A failure names the file and the field or tensor(s), with OT_ERR_FORMAT
 * (OT_ERR_IO, OT_ERR_NOT_FOUND for the file itself); a file that is not
 * GGUF says the magic it has. */
#ifndef OMPTENSOR_GGUF_H
#define OMPTENSOR_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ggml tensor types (ggml.h's numbers). */
typedef enum ot_gguf_type {
  OT_GGUF_F32 = 0,
  OT_GGUF_F16 = 1,
  OT_GGUF_Q4_0 = 2,
  OT_GGUF_Q4_1 = 3,
  OT_GGUF_Q5_0 = 6,
  OT_GGUF_Q5_1 = 7,
  OT_GGUF_Q8_0 = 8,
  OT_GGUF_Q8_1 = 9,
  OT_GGUF_Q2_K = 10,
  OT_GGUF_Q3_K = 11,
  OT_GGUF_Q4_K = 12,
  OT_GGUF_Q5_K = 13,
  OT_GGUF_Q6_K = 14,
  OT_GGUF_Q8_K = 15,
  OT_GGUF_I8 = 24,
  OT_GGUF_I16 = 25,
  OT_GGUF_I32 = 26,
  OT_GGUF_I64 = 27,
  OT_GGUF_F64 = 28,
  OT_GGUF_BF16 = 30,
} ot_gguf_type;

/* "F32", "Q4_0", "Q6_K", ...; NULL for a type this reader does not know. */
const char *ot_gguf_type_name(uint32_t type);

/* Metadata value types (GGUF's numbers). */
typedef enum ot_gguf_vtype {
  OT_GGUF_V_U8 = 0, OT_GGUF_V_I8, OT_GGUF_V_U16, OT_GGUF_V_I16, OT_GGUF_V_U32, OT_GGUF_V_I32,
  OT_GGUF_V_F32, OT_GGUF_V_BOOL, OT_GGUF_V_STRING, OT_GGUF_V_ARRAY, OT_GGUF_V_U64, OT_GGUF_V_I64,
  OT_GGUF_V_F64, OT_GGUF_V_COUNT
} ot_gguf_vtype;

const char *ot_gguf_vtype_name(ot_gguf_vtype t); /* "u32", "string", "array", ... */

typedef struct ot_gguf_tensor {
  const char *name;
  int ndim;
  int64_t shape[4];  /* outermost first, as tensor.h (GGUF stores the innermost first) */
  uint32_t type;     /* ot_gguf_type */
  uint64_t offset;   /* from the start of the file */
  uint64_t bytes;
} ot_gguf_tensor;

typedef struct ot_gguf ot_gguf;

ot_status ot_gguf_open(const char *path, ot_gguf **out);
/* The same on `len` bytes in memory (kept by reference until close);
 * `name` stands for the file in messages (the fuzzer, the tests). */
ot_status ot_gguf_open_mem(const void *data, size_t len, const char *name, ot_gguf **out);
void ot_gguf_close(ot_gguf *g); /* NULL is fine */
/* Whether `path` is to be read as a GGUF file: not a directory, and it
 * starts with GGUF's magic or is named *.gguf (so that a damaged or
 * mislabelled .gguf is refused by ot_gguf_open, which names its magic,
 * rather than read as something else). Nothing else is checked; errors are
 * not recorded. */
int ot_gguf_is_file(const char *path);
/* A file's first bytes (n of them, at most 4 used) as GGUF's messages show
 * a magic: printable ASCII as is, anything else (and bytes past n) '?', as
 * llama.cpp's reader shows them; m gets 4 characters and a NUL. */
void ot_gguf_magic_text(const void *first, size_t n, char m[5]);

uint32_t ot_gguf_version(const ot_gguf *g);
uint64_t ot_gguf_alignment(const ot_gguf *g);
uint64_t ot_gguf_data_offset(const ot_gguf *g); /* where the tensor data starts */

int ot_gguf_num_tensors(const ot_gguf *g);
const ot_gguf_tensor *ot_gguf_tensor_at(const ot_gguf *g, int i);
const ot_gguf_tensor *ot_gguf_find_tensor(const ot_gguf *g, const char *name); /* NULL: none */

/* Metadata: the i-th key, its type (arrays: *elem_type and *count, may be
 * NULL), and scalar reads by key. get_* return 0 (NULL) when the key is
 * missing or of another type; get_int reads any integer type. */
int ot_gguf_num_kv(const ot_gguf *g);
const char *ot_gguf_key_at(const ot_gguf *g, int i, ot_gguf_vtype *type, ot_gguf_vtype *elem_type, uint64_t *count);
int ot_gguf_has(const ot_gguf *g, const char *key);
/* A key read as llama.cpp's loader reads it: it must hold exactly type
 * `want` (a u32 key given as i32 or u64, a f32 one as f64, is refused, as
 * llama.cpp refuses it), and a float must be finite. OT_OK with *present 0
 * when the key is missing, 1 when it is there and right (then read it with
 * the get_* below); else OT_ERR_FORMAT, one line naming the file, the key,
 * the type found and the one expected. */
ot_status ot_gguf_expect(const ot_gguf *g, const char *key, ot_gguf_vtype want, int *present);
const char *ot_gguf_get_string(const ot_gguf *g, const char *key);
int ot_gguf_get_int(const ot_gguf *g, const char *key, int64_t *out);
int ot_gguf_get_float(const ot_gguf *g, const char *key, double *out); /* f32 or f64 */
/* An array of strings (tokenizer.ggml.tokens, .merges): element j, or NULL. */
const char *ot_gguf_get_array_string(const ot_gguf *g, const char *key, uint64_t j);
/* An array by key: 1 with its element type and count (may be NULL), 0 when
 * the key is missing or not an array. */
int ot_gguf_get_array(const ot_gguf *g, const char *key, ot_gguf_vtype *elem_type, uint64_t *count);
/* Element j of a numeric array (tokenizer.ggml.scores, .token_type): _f64
 * reads any number type (and bool) as a double, _int any integer type (and
 * bool; a u64 past INT64_MAX is refused). 0 when the key is missing, not
 * such an array, or j is past its end. */
int ot_gguf_get_array_f64(const ot_gguf *g, const char *key, uint64_t j, double *out);
int ot_gguf_get_array_int(const ot_gguf *g, const char *key, uint64_t j, int64_t *out);

/* n values of ggml type `type` at src (a tensor's bytes) as f32 into dst:
 * F32, F16, BF16, Q4_0, Q8_0, Q4_K and Q6_K, bit for bit what the gguf
 * package's dequantize gives; n whole blocks (32, or 256 for the K types).
 * Another type: OT_ERR_UNSUPPORTED naming it. */
ot_status ot_gguf_dequantize(uint32_t type, const void *src, int64_t n, float *dst);

#ifdef __cplusplus
}
#endif

#endif
