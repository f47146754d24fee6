/* gguf_dequant.c — ggml block types to f32 (gguf.h, ot_gguf_dequantize).
 *
 * The formulas are ggml's (ggml-quants.c, dequantize_row_*), computed in
 * the order the `gguf` package's numpy code computes them (a scale times
 * the sub-block's factor first, then the quant) and never fused into a
 * multiply-add, so the values are its own bit for bit: tests/test_io_gguf.c
 * checks random blocks of every type against it. */
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

/* Q4_K's 6-bit scale and min of sub-block j from its 12 packed bytes. */
static void scale_min_k4(int j, const unsigned char *q, int *sc, int *m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

static void q8_0(const unsigned char *b, float *y) { /* d (f16), qs[32] */
  const float d = h2f(b);
  for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

static void q4_k(const unsigned char *b, float *y) { /* d, dmin (f16), scales[12], qs[128] */
  const float d = h2f(b), dmin = h2f(b + 2);
  const unsigned char *sc = b + 4, *qs = b + 16;
  for (int c = 0; c < 4; c++) { /* 32 bytes: sub-block 2c in the low nibbles, 2c + 1 in the high */
    for (int h = 0; h < 2; h++) {
      int s, m;
      scale_min_k4(2 * c + h, sc, &s, &m);
      const float ds = d * (float)s, dm = dmin * (float)m;
      for (int l = 0; l < 32; l++) y[64 * c + 32 * h + l] = ds * (float)((qs[32 * c + l] >> (4 * h)) & 15) - dm;
    }
  }
}

static void q6_k(const unsigned char *b, float *y) { /* ql[128], qh[64], scales[16] (i8), d (f16) */
  const unsigned char *ql = b, *qh = b + 128;
  const int8_t *sc = (const int8_t *)(b + 192);
  const float d = h2f(b + 208);
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < 128; i++) {
      const int lo = (ql[64 * h + i % 64] >> (4 * (i / 64))) & 15, hi = (qh[32 * h + i % 32] >> (2 * (i / 32))) & 3;
      const int q = (int)(int8_t)(lo | hi << 4) - 32;
      const float ds = d * (float)sc[(128 * h + i) / 16];
      y[128 * h + i] = ds * (float)q;
    }
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
    for (int64_t k = 0; k < n / 256; k++) q4_k(b + 144 * k, dst + 256 * k);
    return OT_OK;
  case OT_GGUF_Q6_K:
    if (n % 256) break;
    for (int64_t k = 0; k < n / 256; k++) q6_k(b + 210 * k, dst + 256 * k);
    return OT_OK;
  default:
    return ot_fail(OT_ERR_UNSUPPORTED, "ggml type %s (%u) cannot be read yet (omptensor reads F32, F16, BF16, Q4_0, "
                   "Q8_0, Q4_K and Q6_K)", name ? name : "?", type);
  }
  return ot_fail(OT_ERR_SHAPE, "ot_gguf_dequantize: %lld values of %s are not whole blocks", (long long)n, name);
}
