/* kquant.c — see kquant.h. */
#include <math.h>

#include "core/kquant.h"

#pragma clang fp contract(off) /* the reference (numpy) does not fuse: neither may we */

void ot_q4k_dequant(const ot_q4k_block *b, float y[OT_QK_BLOCK]) {
  const float d = ot_f16_to_f32(b->d), dmin = ot_f16_to_f32(b->dmin);
  for (int c = 0; c < 4; c++) /* 32 bytes: sub-block 2c in the low nibbles, 2c + 1 in the high */
    for (int h = 0; h < 2; h++) {
      int s, m;
      ot_q4k_scale_min(2 * c + h, b->scales, &s, &m);
      const float ds = d * (float)s, dm = dmin * (float)m;
      for (int l = 0; l < 32; l++) y[64 * c + 32 * h + l] = ds * (float)((b->qs[32 * c + l] >> (4 * h)) & 15) - dm;
    }
}

void ot_q6k_dequant(const ot_q6k_block *b, float y[OT_QK_BLOCK]) {
  const float d = ot_f16_to_f32(b->d);
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < 128; i++) {
      const int lo = (b->ql[64 * h + i % 64] >> (4 * (i / 64))) & 15;
      const int hi = (b->qh[32 * h + i % 32] >> (2 * (i / 32))) & 3;
      const int q = (int)(int8_t)(lo | hi << 4) - 32;
      const float ds = d * (float)b->scales[(128 * h + i) / 16];
      y[128 * h + i] = ds * (float)q;
    }
}

static int clampi(long v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

void ot_q4k_quantize(const float x[OT_QK_BLOCK], ot_q4k_block *b) {
  float scale[8], mins[8], smax = 0.0f, mmax = 0.0f;
  for (int s = 0; s < 8; s++) {
    float lo = 0.0f, hi = 0.0f;
    for (int l = 0; l < 32; l++) lo = fminf(lo, x[32 * s + l]), hi = fmaxf(hi, x[32 * s + l]);
    scale[s] = (hi - lo) / 15.0f;
    mins[s] = -lo;
    smax = fmaxf(smax, scale[s]);
    mmax = fmaxf(mmax, mins[s]);
  }
  b->d = ot_f32_to_f16(smax / 63.0f);
  b->dmin = ot_f32_to_f16(mmax / 63.0f);
  const float d = ot_f16_to_f32(b->d), dmin = ot_f16_to_f32(b->dmin);
  int sc[8], m[8];
  for (int s = 0; s < 8; s++) {
    sc[s] = d > 0.0f ? clampi(lrintf(scale[s] / d), 0, 63) : 0;
    m[s] = dmin > 0.0f ? clampi(lrintf(mins[s] / dmin), 0, 63) : 0;
  }
  for (int j = 0; j < 4; j++) {
    b->scales[j] = (uint8_t)sc[j];
    b->scales[j + 4] = (uint8_t)m[j];
  }
  for (int j = 4; j < 8; j++) {
    b->scales[j + 4] = (uint8_t)((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
    b->scales[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
    b->scales[j] |= (uint8_t)((m[j] >> 4) << 6);
  }
  uint8_t q[OT_QK_BLOCK];
  for (int s = 0; s < 8; s++) {
    const float ds = d * (float)sc[s], dm = dmin * (float)m[s];
    for (int l = 0; l < 32; l++) q[32 * s + l] = ds > 0.0f ? (uint8_t)clampi(lrintf((x[32 * s + l] + dm) / ds), 0, 15) : 0;
  }
  for (int c = 0; c < 4; c++)
    for (int l = 0; l < 32; l++) b->qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
}

void ot_q6k_quantize(const float x[OT_QK_BLOCK], ot_q6k_block *b) {
  float scale[16], amax = 0.0f;
  for (int s = 0; s < 16; s++) {
    float a = 0.0f;
    for (int l = 0; l < 16; l++) a = fmaxf(a, fabsf(x[16 * s + l]));
    scale[s] = a / 31.0f;
    amax = fmaxf(amax, scale[s]);
  }
  b->d = ot_f32_to_f16(amax / 127.0f);
  const float d = ot_f16_to_f32(b->d);
  uint8_t q[OT_QK_BLOCK];
  for (int s = 0; s < 16; s++) {
    b->scales[s] = (int8_t)(d > 0.0f ? clampi(lrintf(scale[s] / d), -128, 127) : 0);
    const float ds = d * (float)b->scales[s];
    for (int l = 0; l < 16; l++) q[16 * s + l] = (uint8_t)((ds > 0.0f ? clampi(lrintf(x[16 * s + l] / ds), -32, 31) : 0) + 32);
  }
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < 128; i++) { /* the inverse of ot_q6k_dequant's indexing */
      const int v = q[128 * h + i];
      uint8_t *lo = &b->ql[64 * h + i % 64], *hi = &b->qh[32 * h + i % 32];
      if (i < 64) *lo = (uint8_t)(v & 15);
      else *lo |= (uint8_t)((v & 15) << 4);
      if (i < 32) *hi = (uint8_t)(v >> 4);
      else *hi |= (uint8_t)((v >> 4) << (2 * (i / 32)));
    }
}
