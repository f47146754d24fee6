/* kquant.h — ggml's K-quant super-blocks (dtype.h's OT_Q4K, OT_Q6K) to
 * and from f32, one block of OT_QK_BLOCK values at a time: what
 * ot_convert and the GGUF reader's ot_gguf_dequantize share. */
#ifndef OT_CORE_KQUANT_H
#define OT_CORE_KQUANT_H

#include "omptensor/dtype.h"

/* Bit for bit what the gguf package's numpy dequantize gives (ggml's
 * formulas, a scale times its sub-block factor first, no fused multiply-add). */
void ot_q4k_dequant(const ot_q4k_block *b, float y[OT_QK_BLOCK]);
void ot_q6k_dequant(const ot_q6k_block *b, float y[OT_QK_BLOCK]);

/* Quantizes 256 values: per 32 a min/max fit (min clamped to <= 0, as
 * ggml's asymmetric 4-bit types keep zero representable), the eight scales
 * and mins as 6-bit multiples of the block's f16 d and dmin. */
void ot_q4k_quantize(const float x[OT_QK_BLOCK], ot_q4k_block *b);
/* Per 16 values a symmetric fit (scale = max|x| / 31), the sixteen scales
 * as int8 multiples of the block's f16 d. */
void ot_q6k_quantize(const float x[OT_QK_BLOCK], ot_q6k_block *b);

/* Q4_K's 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes. */
static inline void ot_q4k_scale_min(int j, const uint8_t *q, int *sc, int *m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

#endif
