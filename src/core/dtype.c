/* dtype.c — dtype names/sizes and exact f16/bf16 <-> f32 conversion.
 *
 * Conversions work on the bit patterns (no reliance on _Float16 or the FPU's
 * rounding mode), so they give the same answer on every host and are tested
 * exhaustively over all 65536 half patterns. */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/kquant.h"
#include "omptensor/dtype.h"
#include "ot_pragmas.h"

static const char *const names[OT_DTYPE_COUNT] = {"f32", "f16", "bf16", "i32", "i8", "q8b", "q4b", "q4k", "q6k"};

int ot_dtype_block(ot_dtype t) {
  return t == OT_Q8B ? OT_Q8B_BLOCK : t == OT_Q4B ? OT_Q4B_BLOCK : t == OT_Q4K || t == OT_Q6K ? OT_QK_BLOCK : 0;
}

const char *ot_dtype_name(ot_dtype t) {
  return (unsigned)t < OT_DTYPE_COUNT ? names[t] : "?";
}

ot_status ot_dtype_parse(const char *name, ot_dtype *out) {
  static const struct { const char *s; ot_dtype t; } aliases[] = {
      {"f32", OT_F32},   {"float32", OT_F32},  {"float", OT_F32},  {"fp32", OT_F32},
      {"f16", OT_F16},   {"float16", OT_F16},  {"half", OT_F16},   {"fp16", OT_F16},
      {"bf16", OT_BF16}, {"bfloat16", OT_BF16}, {"i32", OT_I32},   {"int32", OT_I32},
      {"i8", OT_I8},     {"int8", OT_I8},      {"q8b", OT_Q8B},    {"int8-block", OT_Q8B},
      {"q8_0", OT_Q8B},  {"q4b", OT_Q4B},      {"q4_0", OT_Q4B},   {"int4", OT_Q4B},
      {"q4k", OT_Q4K},   {"q4_k", OT_Q4K},     {"q6k", OT_Q6K},    {"q6_k", OT_Q6K},
  };
  if (!name || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_dtype_parse: NULL argument");
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcasecmp(name, aliases[i].s) == 0) {
      *out = aliases[i].t;
      return OT_OK;
    }
  return ot_fail(OT_ERR_DTYPE, "unknown dtype '%s' (use f32, f16, bf16, i32, i8, q8b, q4b, q4k or q6k)", name);
}

size_t ot_dtype_bytes(ot_dtype t, int64_t n) {
  if (n < 0) return 0;
  switch (t) {
  case OT_F32: case OT_I32: return (size_t)n * 4;
  case OT_F16: case OT_BF16: return (size_t)n * 2;
  case OT_I8: return (size_t)n;
  case OT_Q8B: return n % OT_Q8B_BLOCK ? 0 : (size_t)(n / OT_Q8B_BLOCK) * sizeof(ot_q8b_block);
  case OT_Q4B: return n % OT_Q4B_BLOCK ? 0 : (size_t)(n / OT_Q4B_BLOCK) * sizeof(ot_q4b_block);
  case OT_Q4K: return n % OT_QK_BLOCK ? 0 : (size_t)(n / OT_QK_BLOCK) * sizeof(ot_q4k_block);
  case OT_Q6K: return n % OT_QK_BLOCK ? 0 : (size_t)(n / OT_QK_BLOCK) * sizeof(ot_q6k_block);
  default: return 0;
  }
}

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

uint16_t ot_f32_to_bf16(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
  return (uint16_t)(u >> 16);
}

float ot_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t ot_f32_to_f16(float f) {
  uint32_t u = f2u(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u; /* NaN */
  if (a >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 rounds to inf */
  if (a < 0x38800000u) {
    /* f16 subnormal or zero: value = m * 2^-24 with m = round(a_value * 2^24) */
    if (a < 0x33000000u) return sign; /* < 2^-25: rounds to zero (ties to even at exactly 2^-25) */
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24: bits to drop to land on 2^-24 units */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return sign | (uint16_t)q;
  }
  /* normal: rebias exponent and round the 13 dropped mantissa bits */
  uint32_t r = a - 0x38000000u; /* exponent 127 -> 15 */
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | (uint16_t)(r >> 13);
}

float ot_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    float v = (float)m * 0x1p-24f; /* exact: m < 2^10 */
    return u2f(f2u(v) | sign);
  }
  if (e == 31) return u2f(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0));
  return u2f(sign | ((e + 112) << 23) | (m << 13));
}

static float load_f32(ot_dtype t, const void *p, int64_t i) {
  switch (t) {
  case OT_F32: return ((const float *)p)[i];
  case OT_F16: return ot_f16_to_f32(((const uint16_t *)p)[i]);
  case OT_BF16: return ot_bf16_to_f32(((const uint16_t *)p)[i]);
  default: return 0.0f;
  }
}

static void store_f32(ot_dtype t, void *p, int64_t i, float v) {
  switch (t) {
  case OT_F32: ((float *)p)[i] = v; break;
  case OT_F16: ((uint16_t *)p)[i] = ot_f32_to_f16(v); break;
  case OT_BF16: ((uint16_t *)p)[i] = ot_f32_to_bf16(v); break;
  default: break;
  }
}

static int is_float(ot_dtype t) { return t == OT_F32 || t == OT_F16 || t == OT_BF16; }

ot_status ot_convert(ot_dtype dst_t, void *dst, ot_dtype src_t, const void *src, int64_t n) {
  if (!dst || !src || n < 0) return ot_fail(OT_ERR_INVALID_ARG, "ot_convert: NULL buffer or negative count");
  if (dst_t == src_t) {
    memcpy(dst, src, ot_dtype_bytes(src_t, n));
    return OT_OK;
  }
  if (is_float(dst_t) && is_float(src_t)) {
    OT_PRAGMA(omp parallel for schedule(static) if (n > (1 << 16)))
    for (int64_t i = 0; i < n; i++) store_f32(dst_t, dst, i, load_f32(src_t, src, i));
    return OT_OK;
  }
  if (n % OT_Q8B_BLOCK == 0 && (dst_t == OT_Q8B && is_float(src_t))) {
    ot_q8b_block *b = dst;
    OT_PRAGMA(omp parallel for schedule(static) if (n > (1 << 16)))
    for (int64_t k = 0; k < n / OT_Q8B_BLOCK; k++) {
      float amax = 0.0f;
      for (int j = 0; j < OT_Q8B_BLOCK; j++) amax = fmaxf(amax, fabsf(load_f32(src_t, src, k * OT_Q8B_BLOCK + j)));
      float scale = amax / 127.0f, inv = scale > 0.0f ? 1.0f / scale : 0.0f;
      b[k].scale = scale;
      for (int j = 0; j < OT_Q8B_BLOCK; j++)
        b[k].q[j] = (int8_t)lrintf(load_f32(src_t, src, k * OT_Q8B_BLOCK + j) * inv);
    }
    return OT_OK;
  }
  if (n % OT_Q8B_BLOCK == 0 && (src_t == OT_Q8B && is_float(dst_t))) {
    const ot_q8b_block *b = src;
    OT_PRAGMA(omp parallel for schedule(static) if (n > (1 << 16)))
    for (int64_t k = 0; k < n / OT_Q8B_BLOCK; k++)
      for (int j = 0; j < OT_Q8B_BLOCK; j++)
        store_f32(dst_t, dst, k * OT_Q8B_BLOCK + j, b[k].scale * (float)b[k].q[j]);
    return OT_OK;
  }
  if (n % OT_Q4B_BLOCK == 0 && dst_t == OT_Q4B && is_float(src_t)) {
    ot_q4b_block *b = dst;
    OT_PRAGMA(omp parallel for schedule(static) if (n > (1 << 16)))
    for (int64_t k = 0; k < n / OT_Q4B_BLOCK; k++) {
      /* llama.cpp's quantize_row_q4_0_ref: the signed value of largest
       * magnitude maps to -8, so the other end keeps its 7 steps */
      float amax = 0.0f, max = 0.0f;
      for (int j = 0; j < OT_Q4B_BLOCK; j++) {
        const float v = load_f32(src_t, src, k * OT_Q4B_BLOCK + j);
        if (fabsf(v) > amax) amax = fabsf(v), max = v;
      }
      const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
      b[k].d = ot_f32_to_f16(d);
      for (int j = 0; j < OT_Q4B_BLOCK / 2; j++) {
        const float x0 = load_f32(src_t, src, k * OT_Q4B_BLOCK + j) * id;
        const float x1 = load_f32(src_t, src, k * OT_Q4B_BLOCK + j + OT_Q4B_BLOCK / 2) * id;
        const int q0 = (int)(x0 + 8.5f) < 15 ? (int)(x0 + 8.5f) : 15, q1 = (int)(x1 + 8.5f) < 15 ? (int)(x1 + 8.5f) : 15;
        b[k].qs[j] = (uint8_t)(q0 | q1 << 4);
      }
    }
    return OT_OK;
  }
  if (n % OT_Q4B_BLOCK == 0 && src_t == OT_Q4B && is_float(dst_t)) {
    const ot_q4b_block *b = src;
    OT_PRAGMA(omp parallel for schedule(static) if (n > (1 << 16)))
    for (int64_t k = 0; k < n / OT_Q4B_BLOCK; k++) {
      const float d = ot_f16_to_f32(b[k].d);
      for (int j = 0; j < OT_Q4B_BLOCK / 2; j++) {
        store_f32(dst_t, dst, k * OT_Q4B_BLOCK + j, (float)((b[k].qs[j] & 15) - 8) * d);
        store_f32(dst_t, dst, k * OT_Q4B_BLOCK + j + OT_Q4B_BLOCK / 2, (float)((b[k].qs[j] >> 4) - 8) * d);
      }
    }
    return OT_OK;
  }
  const int k_src = src_t == OT_Q4K || src_t == OT_Q6K;
  if (n % OT_QK_BLOCK == 0 && ((k_src && is_float(dst_t)) || ((dst_t == OT_Q4K || dst_t == OT_Q6K) && is_float(src_t)))) {
    OT_PRAGMA(omp parallel for schedule(static) if (n > (1 << 16)))
    for (int64_t k = 0; k < n / OT_QK_BLOCK; k++) {
      float y[OT_QK_BLOCK];
      if (src_t == OT_Q4K) ot_q4k_dequant((const ot_q4k_block *)src + k, y);
      else if (src_t == OT_Q6K) ot_q6k_dequant((const ot_q6k_block *)src + k, y);
      else
        for (int j = 0; j < OT_QK_BLOCK; j++) y[j] = load_f32(src_t, src, k * OT_QK_BLOCK + j);
      if (dst_t == OT_Q4K) ot_q4k_quantize(y, (ot_q4k_block *)dst + k);
      else if (dst_t == OT_Q6K) ot_q6k_quantize(y, (ot_q6k_block *)dst + k);
      else
        for (int j = 0; j < OT_QK_BLOCK; j++) store_f32(dst_t, dst, k * OT_QK_BLOCK + j, y[j]);
    }
    return OT_OK;
  }
  return ot_fail(OT_ERR_DTYPE, "cannot convert %s to %s (%lld elements)", ot_dtype_name(src_t),
                 ot_dtype_name(dst_t), (long long)n);
}
