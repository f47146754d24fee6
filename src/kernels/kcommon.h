/* kcommon.h (internal to src/kernels) — what every kernel file shares:
 * element loads/stores callable on the device, view validation, team sizing.
 *
 * The f16/bf16 conversions repeat dtype.c's bit-exact algorithms as
 * declare-target inlines (dtype.c's functions are host-only); test_k_common
 * checks they agree bit for bit. */
#ifndef OT_KERNELS_KCOMMON_H
#define OT_KERNELS_KCOMMON_H

#include <math.h>
#include <stdint.h>

#include "core/error.h"
#include "kernels/kernels.h"
#include "ot_pragmas.h"

OT_DECLARE_TARGET_BEGIN

typedef union ot_kfu {
  float f;
  uint32_t u;
} ot_kfu;

static inline float ot_kbf16_f32(uint16_t h) {
  ot_kfu x;
  x.u = (uint32_t)h << 16;
  return x.f;
}

static inline uint16_t ot_kf32_bf16(float f) {
  ot_kfu x;
  x.f = f;
  uint32_t u = x.u;
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float ot_kf16_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  ot_kfu x;
  if (e == 0) {
    x.f = (float)m * 0x1p-24f;
    x.u |= sign;
  } else if (e == 31) {
    x.u = sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0);
  } else {
    x.u = sign | ((e + 112) << 23) | (m << 13);
  }
  return x.f;
}

static inline uint16_t ot_kf32_f16(float f) {
  ot_kfu x;
  x.f = f;
  uint32_t u = x.u;
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) {
    if (a < 0x33000000u) return sign;
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return sign | (uint16_t)q;
  }
  uint32_t r = a - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | (uint16_t)(r >> 13);
}

/* Typed loads of element offset i (in elements; for q8b see kernels.h). */
static inline float ot_ld_f32(const void *p, int64_t i) { return ((const float *)p)[i]; }
static inline float ot_ld_f16(const void *p, int64_t i) { return ot_kf16_f32(((const uint16_t *)p)[i]); }
static inline float ot_ld_bf16(const void *p, int64_t i) { return ot_kbf16_f32(((const uint16_t *)p)[i]); }
static inline float ot_ld_q8b(const void *p, int64_t i) {
  const ot_q8b_block *b = (const ot_q8b_block *)p + (i >> 5);
  return b->scale * (float)b->q[i & 31];
}
static inline float ot_ld_q4b(const void *p, int64_t i) { /* dtype.h: GGUF Q4_0's layout */
  const ot_q4b_block *b = (const ot_q4b_block *)p + (i >> 5);
  const int j = (int)(i & 31);
  const int q = j < 16 ? (b->qs[j] & 15) : (b->qs[j - 16] >> 4);
  return (float)(q - 8) * ot_kf16_f32(b->d);
}

/* K-quants (dtype.h): element i of super-blocks of 256. The same
 * products in the same order as ot_convert (core/kquant.c). */
static inline float ot_ld_q4k(const void *p, int64_t i) {
  const ot_q4k_block *b = (const ot_q4k_block *)p + (i >> 8);
  const int j = (int)(i & 255), c = j >> 6, h = (j >> 5) & 1, s = 2 * c + h;
  const uint8_t *q = b->scales;
  const int sc = s < 4 ? q[s] & 63 : (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
  const int m = s < 4 ? q[s + 4] & 63 : (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  const float ds = ot_kf16_f32(b->d) * (float)sc, dm = ot_kf16_f32(b->dmin) * (float)m;
  return ds * (float)((b->qs[32 * c + (j & 31)] >> (4 * h)) & 15) - dm;
}
static inline float ot_ld_q6k(const void *p, int64_t i) {
  const ot_q6k_block *b = (const ot_q6k_block *)p + (i >> 8);
  const int j = (int)(i & 255), h = j >> 7, k = j & 127;
  const int lo = (b->ql[64 * h + (k & 63)] >> (4 * (k >> 6))) & 15, hi = (b->qh[32 * h + (k & 31)] >> (2 * (k >> 5))) & 3;
  return ot_kf16_f32(b->d) * (float)b->scales[j >> 4] * (float)((lo | hi << 4) - 32);
}

/* Any-dtype load/store (a uniform branch on the GPU). Integer dtypes load as
 * their value. */
static inline float ot_kld(int dt, const void *p, int64_t i) {
  switch (dt) {
  case OT_F32: return ot_ld_f32(p, i);
  case OT_F16: return ot_ld_f16(p, i);
  case OT_BF16: return ot_ld_bf16(p, i);
  case OT_Q8B: return ot_ld_q8b(p, i);
  case OT_Q4B: return ot_ld_q4b(p, i);
  case OT_Q4K: return ot_ld_q4k(p, i);
  case OT_Q6K: return ot_ld_q6k(p, i);
  case OT_I32: return (float)((const int32_t *)p)[i];
  default: return 0.0f;
  }
}

static inline void ot_kst(int dt, void *p, int64_t i, float v) {
  switch (dt) {
  case OT_F32: ((float *)p)[i] = v; break;
  case OT_F16: ((uint16_t *)p)[i] = ot_kf32_f16(v); break;
  case OT_BF16: ((uint16_t *)p)[i] = ot_kf32_bf16(v); break;
  default: break;
  }
}

/* Typed stores of element offset i, rounded to nearest even. */
static inline void ot_st_f32(void *p, int64_t i, float v) { ((float *)p)[i] = v; }
static inline void ot_st_f16(void *p, int64_t i, float v) { ((uint16_t *)p)[i] = ot_kf32_f16(v); }
static inline void ot_st_bf16(void *p, int64_t i, float v) { ((uint16_t *)p)[i] = ot_kf32_bf16(v); }

/* ---- 8 elements at a time: the dtype-specialized fast paths ------------------
 * ot_kld8_<t>(p, i, v) loads elements i .. i+7 of a buffer of dtype t into
 * float v[8]; ot_kst8_<t>(p, i, v) stores v there, rounded as ot_kst. The
 * address of element i must be 16-byte aligned (ot_kalign16): an f32 octet
 * is two 16-byte accesses, an f16/bf16 octet one (a GPU issues them as
 * ld.v4 / st.v4; 4-byte loads leave too few bytes in flight to reach HBM
 * speed). Values are those of ot_ld_<t> / ot_st_<t> bit for bit. The
 * vector types may alias anything, like char. */
typedef float ot_kf32x4 __attribute__((ext_vector_type(4), may_alias));
typedef uint32_t ot_ku32x4 __attribute__((ext_vector_type(4), may_alias));

#define OT_KV 8 /* elements per fast-path step */

static inline float ot_kbits_f32(uint32_t u) {
  ot_kfu x;
  x.u = u;
  return x.f;
}

static inline void ot_kld8_f32(const void *p, int64_t i, float v[OT_KV]) {
  const ot_kf32x4 *q = (const ot_kf32x4 *)((const float *)p + i);
  const ot_kf32x4 a = q[0], b = q[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

/* element 2k is the low half of 32-bit word k (little-endian: x86_64, nvptx, amdgcn) */
static inline void ot_kld8_bf16(const void *p, int64_t i, float v[OT_KV]) {
  const ot_ku32x4 u = *(const ot_ku32x4 *)((const uint16_t *)p + i);
  v[0] = ot_kbits_f32(u.x << 16), v[1] = ot_kbits_f32(u.x & 0xffff0000u);
  v[2] = ot_kbits_f32(u.y << 16), v[3] = ot_kbits_f32(u.y & 0xffff0000u);
  v[4] = ot_kbits_f32(u.z << 16), v[5] = ot_kbits_f32(u.z & 0xffff0000u);
  v[6] = ot_kbits_f32(u.w << 16), v[7] = ot_kbits_f32(u.w & 0xffff0000u);
}

static inline void ot_kld8_f16(const void *p, int64_t i, float v[OT_KV]) {
  const ot_ku32x4 u = *(const ot_ku32x4 *)((const uint16_t *)p + i);
  v[0] = ot_kf16_f32((uint16_t)u.x), v[1] = ot_kf16_f32((uint16_t)(u.x >> 16));
  v[2] = ot_kf16_f32((uint16_t)u.y), v[3] = ot_kf16_f32((uint16_t)(u.y >> 16));
  v[4] = ot_kf16_f32((uint16_t)u.z), v[5] = ot_kf16_f32((uint16_t)(u.z >> 16));
  v[6] = ot_kf16_f32((uint16_t)u.w), v[7] = ot_kf16_f32((uint16_t)(u.w >> 16));
}

static inline void ot_kst8_f32(void *p, int64_t i, const float v[OT_KV]) {
  ot_kf32x4 *q = (ot_kf32x4 *)((float *)p + i);
  q[0] = (ot_kf32x4){v[0], v[1], v[2], v[3]};
  q[1] = (ot_kf32x4){v[4], v[5], v[6], v[7]};
}

/* two values as the low and high halves of a 32-bit word */
#define OT_KPACK2(cvt, a, b) ((uint32_t)cvt(a) | (uint32_t)cvt(b) << 16)

static inline void ot_kst8_bf16(void *p, int64_t i, const float v[OT_KV]) {
  *(ot_ku32x4 *)((uint16_t *)p + i) =
      (ot_ku32x4){OT_KPACK2(ot_kf32_bf16, v[0], v[1]), OT_KPACK2(ot_kf32_bf16, v[2], v[3]),
                  OT_KPACK2(ot_kf32_bf16, v[4], v[5]), OT_KPACK2(ot_kf32_bf16, v[6], v[7])};
}

static inline void ot_kst8_f16(void *p, int64_t i, const float v[OT_KV]) {
  *(ot_ku32x4 *)((uint16_t *)p + i) =
      (ot_ku32x4){OT_KPACK2(ot_kf32_f16, v[0], v[1]), OT_KPACK2(ot_kf32_f16, v[2], v[3]),
                  OT_KPACK2(ot_kf32_f16, v[4], v[5]), OT_KPACK2(ot_kf32_f16, v[6], v[7])};
}

OT_DECLARE_TARGET_END

/* Whether the address p + off elements of `es` bytes is 16-byte aligned
 * (host side, on the device address: the fast paths' eligibility). */
static inline int ot_kalign16(const void *p, int64_t off, int64_t es) {
  return ((uintptr_t)p + (uintptr_t)(off * es)) % 16 == 0;
}

/* Whether every stride in s[0..n) with an extent above 1 keeps 16-byte
 * alignment (a multiple of 16 bytes of `es`-byte elements). */
static inline int ot_kstrides16(int n, const int64_t *ne, const int64_t *s, int64_t es) {
  for (int d = 0; d < n; d++)
    if (ne[d] > 1 && (s[d] * es) % 16 != 0) return 0;
  return 1;
}

/* Element size of the float dtypes (f32 4, f16/bf16 2), 0 for the others. */
static inline int64_t ot_kfloat_bytes(int dt) { return dt == OT_F32 ? 4 : dt == OT_F16 || dt == OT_BF16 ? 2 : 0; }

/* Expands STMT(loadfn) once per storage dtype of `dt`, so hot loops get a
 * typed load instead of a switch per element. */
#define OT_KDISPATCH(dt, STMT)                    \
  switch (dt) {                                   \
  case OT_F16: STMT(ot_ld_f16); break;            \
  case OT_BF16: STMT(ot_ld_bf16); break;          \
  case OT_Q8B: STMT(ot_ld_q8b); break;            \
  case OT_Q4B: STMT(ot_ld_q4b); break;            \
  case OT_Q4K: STMT(ot_ld_q4k); break;            \
  case OT_Q6K: STMT(ot_ld_q6k); break;            \
  default: STMT(ot_ld_f32); break;                \
  }

/* dtype masks for validation */
#define OT_KM(t) (1u << (t))
#define OT_KM_FLOAT (OT_KM(OT_F32) | OT_KM(OT_F16) | OT_KM(OT_BF16))
#define OT_KM_BLOCK (OT_KM(OT_Q8B) | OT_KM(OT_Q4B) | OT_KM(OT_Q4K) | OT_KM(OT_Q6K)) /* block-quantized weights */

/* Checks one view argument of `op`: ndim in [nmin, nmax], dtype in `mask`,
 * non-negative dims/strides, p set unless empty, q8b layout. `name` is the
 * argument's name for the message. */
ot_status ot_kcheck(const char *op, const char *name, ot_kview v, int nmin, int nmax, unsigned mask);

/* Fails with OT_ERR_SHAPE unless dim `da` of a equals dim `db` of b
 * (negative indices count from the end). */
ot_status ot_kcheck_dim(const char *op, const char *na, ot_kview a, int da, const char *nbn, ot_kview b,
                        int db);

/* "[3, 17, 64]" for messages (static per-thread buffer, 4 slots rotating). */
const char *ot_kshape_str(ot_kview v);

/* Number of teams for `n` independent team-sized items on device `dev`. A
 * device that runs on host threads gets one team (libomp cannot form more
 * teams than cores without warnings; one team of all cores is what it wants). */
int ot_kteams(int dev, int64_t n);

/* The device executes on host threads (the initial device, or any device of
 * the x86_64 host-offload build): kernels pick loop shapes for CPUs there. */
int ot_kruns_on_host(int dev);

/* The device is an NVIDIA GPU of an nvptx build: the bare warp-per-row
 * kernels (gemv_gpu.c, warp_gpu.c) may run there. */
int ot_kfast_gpu(int dev);

/* Runs STMT (a call of a declare-target row function using OT_TEAM_REDUCE /
 * OT_TEAM_FOR inside) for every row `r` in [0, rows): on a device executing
 * on host threads as a parallel loop over rows (the team loops inside then
 * run serially in each thread: independent outputs in parallel, as CPUs
 * like), elsewhere one team per row. */
#define OT_KROWS(dev, rows, r, clauses, STMT)                   \
  do {                                                          \
    const int64_t ot_krows_n_ = (rows);                         \
    if (ot_kruns_on_host(dev) && ot_krows_n_ > 1) {             \
      OT_PARFOR(dev, clauses)                                   \
      for (int64_t r = 0; r < ot_krows_n_; r++) STMT;           \
    } else {                                                    \
      OT_TEAMS(dev, ot_kteams(dev, ot_krows_n_), clauses)       \
      for (int64_t r = 0; r < ot_krows_n_; r++) STMT;           \
    }                                                           \
  } while (0)

/* The row offset (elements) of flattened row r of a 4-D view over its first
 * three dims. */
OT_DECLARE_TARGET_BEGIN
static inline int64_t ot_krow_off(int64_t r, int64_t n1, int64_t n2, int64_t s0, int64_t s1, int64_t s2) {
  int64_t i2 = r % n2, q = r / n2;
  return (q / n1) * s0 + (q % n1) * s1 + i2 * s2;
}
OT_DECLARE_TARGET_END

/* Host side, at a kernel's entry: dynamic RoPE for a forward of rows up to
 * position seq_len - 1 as the plain RoPE it then is (rope.h). */
static inline ot_rope ot_krope_resolve(ot_rope r, int64_t seq_len, int64_t d) {
  if (r.type != OT_ROPE_DYNAMIC) return r;
  r.type = OT_ROPE_DEFAULT;
  if ((double)seq_len > (double)r.original_max_positions && d > 2)
    r.theta = (float)((double)r.theta * pow((double)r.factor * (double)seq_len / (double)r.original_max_positions -
                                                (double)(r.factor - 1.0f),
                                            (double)d / (double)(d - 2)));
  return r;
}

/* RoPE inverse frequency of pair i of head_dim d (omptensor/rope.h), fp32
 * as transformers computes it; the one definition every rope kernel uses. */
OT_DECLARE_TARGET_BEGIN
static inline float ot_krope_inv(ot_rope r, int64_t i, int64_t d) {
  const float pf = powf(r.theta, (float)(2 * i) / (float)d), inv = 1.0f / pf;
  if (r.type == OT_ROPE_LINEAR) return inv / r.factor;
  if (r.type == OT_ROPE_YARN) {
    const float ramp = fminf(fmaxf(((float)i - r.ramp_lo) / (r.ramp_hi - r.ramp_lo), 0.0f), 1.0f), e = 1.0f - ramp;
    return 1.0f / (r.factor * pf) * (1.0f - e) + inv * e;
  }
  if (r.type != OT_ROPE_LLAMA3) return inv;
  const float w = 2.0f * 3.14159265358979323846f / inv;
  if (w > r.original_max_positions / r.low_freq_factor) return inv / r.factor;
  if (w < r.original_max_positions / r.high_freq_factor) return inv;
  const float sm = (r.original_max_positions / w - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  return (1.0f - sm) * inv / r.factor + sm * inv;
}

/* The angle of pair i at position pos: pos * inv_freq in fp32, as HF's fp32 matmul. */
static inline float ot_krope_angle(int64_t pos, int64_t i, int64_t d, ot_rope r) {
  return (float)pos * ot_krope_inv(r, i, d);
}

/* What cos and sin are multiplied by (yarn's attention factor; 1 otherwise). */
static inline float ot_krope_scale(ot_rope r) { return r.type == OT_ROPE_YARN ? r.attention_factor : 1.0f; }
OT_DECLARE_TARGET_END

#endif
