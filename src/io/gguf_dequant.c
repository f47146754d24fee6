/* gguf_dequant.c — ggml block types to f32 (gguf.h, ot_gguf_dequantize).
 *
 * The formulas are ggml's (ggml-quants.c, dequantize_row_*), computed in
 * the order the `gguf` package's numpy code computes them (a scale times
 * the sub-block's factor first, then the quant) and never fused into a
 * multiply-add, so the values are its own bit for bit: tests/test_io_gguf.c
 * checks random blocks of every type against it. Q4_0, Q4_K and Q6_K are
 * omptensor dtypes in the same layout (dtype.h): ot_convert decodes them. */
#include <string.h>

#include "core/error.h"
#include "omptensor/dtype.h"
#include "omptensor/gguf.h"

#pragma clang fp contract(off) /* numpy does not fuse: neither may we */

static float h2f(const unsigned char *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return ot_f16_to_f32(h);
}

static void q8_0(const unsigned char *b, float *y) { /* d (f16), qs[32] */
  const float d = h2f(b);
  for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

ot_status ot_gguf_dequantize(uint32_t type, const void *src, int64_t n, float *dst) {
  if ((!src || !dst) && n) return ot_fail(OT_ERR_INVALID_ARG, "ot_gguf_dequantize: NULL buffer");
  const char *name = ot_gguf_type_name(type);
  const unsigned char *b = src;
  switch (type) {
  case OT_GGUF_F32: memcpy(dst, src, (size_t)n * 4); return OT_OK;
  case OT_GGUF_F16: return ot_convert(OT_F32, dst, OT_F16, src, n);
  case OT_GGUF_BF16: return ot_convert(OT_F32, dst, OT_BF16, src, n);
  case OT_GGUF_Q4_0:
    if (n % 32) break;
    return ot_convert(OT_F32, dst, OT_Q4B, src, n); /* the same layout (dtype.h) */
  case OT_GGUF_Q8_0:
    if (n % 32) break;
    for (int64_t k = 0; k < n / 32; k++) q8_0(b + 34 * k, dst + 32 * k);
    return OT_OK;
  case OT_GGUF_Q4_K:
    if (n % 256) break;
    return ot_convert(OT_F32, dst, OT_Q4K, src, n); /* the same layout (dtype.h) */
  case OT_GGUF_Q6_K:
    if (n % 256) break;
    return ot_convert(OT_F32, dst, OT_Q6K, src, n);
  default:
    return ot_fail(OT_ERR_UNSUPPORTED, "ggml type %s (%u) cannot be read yet (omptensor reads F32, F16, BF16, Q4_0, "
                   "Q8_0, Q4_K and Q6_K)", name ? name : "?", type);
  }
  return ot_fail(OT_ERR_SHAPE, "ot_gguf_dequantize: %lld values of %s are not whole blocks", (long long)n, name);
}
