/* dtype.h — element types and exact half-precision conversion.
 *
 * f16 and bf16 conversion rounds to nearest, ties to even, exactly as IEEE
 * 754 requires; NaN stays NaN (quiet), infinities and signed zeros are kept,
 * f16 subnormals are produced and read.
 *
 * OT_Q8B is the block-quantized int8: blocks of OT_Q8B_BLOCK consecutive
 * values along the last dimension share one f32 scale, value = scale * q.
 * A block is stored as {float scale; int8_t q[32]} (36 bytes), so the bytes
 * that cross PCIe are ~1.125 per weight.
 *
 * OT_Q4B is the block-quantized 4-bit type, in GGUF's Q4_0 layout (so a
 * GGUF file's Q4_0 tensors are read as they are): blocks of 32 values along
 * the last dimension, {uint16_t d (f16 scale); uint8_t qs[16]} (18 bytes,
 * 0.5625 per weight); value j is (q_j - 8) * d with q_j the low nibble of
 * qs[j] for j < 16 and the high nibble of qs[j - 16] for j >= 16.
 * Quantized as llama.cpp's reference does: d = (the value of largest
 * magnitude, with its sign) / -8, q = min(15, trunc(x / d + 8.5)).
 *
 * OT_Q4K and OT_Q6K are ggml's K-quants, in their GGUF layouts, so GGUF
 * files' Q4_K and Q6_K tensors are read as they are: super-blocks of 256
 * values along the last dimension.
 *   Q4_K (144 bytes, 4.5 bits a weight): f16 d and dmin, 12 bytes packing
 *   eight 6-bit scales and mins (one per 32 values), 128 bytes of nibbles;
 *   value = d * scale_s * q - dmin * min_s.
 *   Q6_K (210 bytes, 6.5625 bits): 128 bytes of low nibbles, 64 of high
 *   2-bit pairs, sixteen int8 scales (one per 16 values), f16 d;
 *   value = d * scale_s * (q - 32).
 * Quantizing to q4k (from f32/f16/bf16) takes each 32's min and max (a
 * plain min/max fit, not llama.cpp's iterative search), to q6k per 16 a
 * symmetric max|x| fit.
 */
#ifndef OMPTENSOR_DTYPE_H
#define OMPTENSOR_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ot_dtype {
  OT_F32 = 0,
  OT_F16,
  OT_BF16,
  OT_I32,
  OT_I8,
  OT_Q8B,
  OT_Q4B,
  OT_Q4K,
  OT_Q6K,
  OT_DTYPE_COUNT
} ot_dtype;

#define OT_Q8B_BLOCK 32
#define OT_Q4B_BLOCK 32
#define OT_QK_BLOCK 256 /* q4k, q6k */

typedef struct ot_q8b_block {
  float scale;
  int8_t q[OT_Q8B_BLOCK];
} ot_q8b_block;

typedef struct ot_q4b_block {
  uint16_t d; /* f16 */
  uint8_t qs[OT_Q4B_BLOCK / 2];
} ot_q4b_block;

typedef struct ot_q4k_block {
  uint16_t d, dmin; /* f16 */
  uint8_t scales[12];
  uint8_t qs[OT_QK_BLOCK / 2];
} ot_q4k_block;

typedef struct ot_q6k_block {
  uint8_t ql[OT_QK_BLOCK / 2];
  uint8_t qh[OT_QK_BLOCK / 4];
  int8_t scales[OT_QK_BLOCK / 16];
  uint16_t d; /* f16 */
} ot_q6k_block;

/* The values per block of a block-quantized dtype (q8b, q4b: 32; q4k,
 * q6k: 256), else 0:
 * such a tensor's last dimension is whole blocks, contiguous. */
int ot_dtype_block(ot_dtype t);

/* "f32", "f16", "bf16", "i32", "i8", "q8b", "q4b", "q4k", "q6k"; "?" for an invalid value. */
const char *ot_dtype_name(ot_dtype t);

/* Parses a name above (also "float32", "float16", "bfloat16", "F32", "BF16"
 * ...). Returns OT_ERR_DTYPE for anything else. */
ot_status ot_dtype_parse(const char *name, ot_dtype *out);

/* Bytes needed for n elements (for a block dtype, n must be a multiple of
 * the block; returns 0 otherwise). */
size_t ot_dtype_bytes(ot_dtype t, int64_t n);

uint16_t ot_f32_to_f16(float f);
float ot_f16_to_f32(uint16_t h);
uint16_t ot_f32_to_bf16(float f);
float ot_bf16_to_f32(uint16_t h);

/* Converts n elements between any two of f32, f16, bf16, and between those
 * and q8b (quantizing with scale = max|x| / 127 per block) or q4b (as above;
 * n a multiple of 32), and q4k / q6k (n a multiple of 256). */
ot_status ot_convert(ot_dtype dst_t, void *dst, ot_dtype src_t, const void *src, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
