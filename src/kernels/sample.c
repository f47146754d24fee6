/* sample.c — temperature / top-k / top-p sampling with a counter-based RNG.
 *
 * The same token on every device: after the per-element weight (computed
 * with only correctly rounded IEEE operations, see sp_exp) every decision is
 * made on integers, so a parallel reduction in any order gives the same
 * answer as the sequential reference:
 *   w_j  = exp((l_j - max) / T) in (0, 1], the max gets exactly 1, NaN gets 0;
 *   q_j  = floor(w_j * 2^40), a fixed-point weight (tokens with w < 2^-40,
 *          total mass < vocab * 2^-40, are never drawn);
 *   top-k: keep l_j >= the k-th largest logit (ties at the boundary all stay,
 *          as in HF's TopKLogitsWarper);
 *   top-p: among those, keep q_j >= t with t the largest threshold whose kept
 *          mass is >= top_p * (mass after top-k) (the smallest set, ties stay);
 *   draw:  u = uniform integer in [0, R), R = kept mass, from
 *          splitmix64(seed, step, row); the token is the first j whose
 *          running kept mass exceeds u.
 * The kernel finds the thresholds and the token by bisection over integer
 * reductions (about 90 passes over the row, no scratch memory, one team per
 * row); the reference sorts, so it checks the bisections independently. */
#include <stdlib.h>
#include <string.h>

#include "kernels/kcommon.h"

#define SP_QSCALE 0x1p40f
#define SP_QMAX ((uint64_t)1 << 40)
#define SP_MAX_VOCAB ((int64_t)1 << 23) /* vocab * 2^40 must fit in 63 bits */

OT_DECLARE_TARGET_BEGIN

/* exp(x) for x <= 0 from fmaf/mul/add only (each correctly rounded), so it
 * gives the same bits on a GPU and on the host, whatever the libm. Relative
 * error about 2 ulp; 0 below -87 (and for NaN). */
static inline float sp_exp(float x) {
  if (!(x > -87.0f)) return 0.0f;
  /* separate statements: a GPU compiler must not fuse these into an fma */
  const float y = x * 1.44269504f;
  const float n = floorf(y + 0.5f);
  float r = fmaf(n, -0.693145752f, x); /* ln2 split: hi has 16 significant bits */
  r = fmaf(n, -1.42860677e-06f, r);
  float p = 1.98412698e-4f;
  p = fmaf(p, r, 1.38888889e-3f);
  p = fmaf(p, r, 8.33333333e-3f);
  p = fmaf(p, r, 4.16666667e-2f);
  p = fmaf(p, r, 1.66666667e-1f);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  ot_kfu s;
  s.u = (uint32_t)((int32_t)n + 127) << 23; /* 2^n, n in [-126, 0] */
  return p * s.f;
}

/* Logit -> unsigned key with the float order; NaN sorts as -inf. */
static inline uint32_t sp_key(float l) {
  ot_kfu x;
  x.f = l != l ? -INFINITY : l;
  return (x.u & 0x80000000u) ? ~x.u : (x.u | 0x80000000u);
}

/* Fixed-point weight of logit l given the row max and 1/T. */
static inline uint64_t sp_q(float l, float mx, float inv_t) {
  if (l != l) return 0;
  if (l == mx) return SP_QMAX;
  return (uint64_t)(sp_exp((l - mx) * inv_t) * SP_QSCALE);
}

static inline uint64_t sp_mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform integer in [0, R) for (seed, step, row). */
static inline uint64_t sp_draw(uint64_t seed, uint64_t step, int64_t row, uint64_t R) {
  const uint64_t h = sp_mix(sp_mix(sp_mix(seed) ^ step) ^ (uint64_t)row);
  uint64_t u = (uint64_t)((double)(h >> 11) * 0x1p-53 * (double)R);
  return u < R ? u : R - 1;
}

/* The top-p target mass: top_p of the mass Q, at least 1 so the max stays. */
static inline uint64_t sp_target(float top_p, uint64_t Q) {
  const uint64_t t = (uint64_t)((double)top_p * (double)Q);
  return t < 1 ? 1 : t;
}

OT_DECLARE_TARGET_END

static ot_status sp_check(ot_kview idx, ot_kview logits, float temperature, int top_k, float top_p) {
  static const char *op = "sample";
  OT_TRY(ot_kcheck(op, "logits", logits, 1, 2, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "idx", idx, 1, 1, OT_KM(OT_I32)));
  const int64_t rows = logits.ndim == 2 ? logits.ne[0] : 1, n = logits.ne[logits.ndim - 1];
  if (idx.ne[0] != rows)
    return ot_fail(OT_ERR_SHAPE, "sample: idx %s needs one entry per row of logits %s", ot_kshape_str(idx),
                   ot_kshape_str(logits));
  if (n < 1 || n > SP_MAX_VOCAB)
    return ot_fail(OT_ERR_SHAPE, "sample: logits %s: the vocabulary must have 1..%lld entries",
                   ot_kshape_str(logits), (long long)SP_MAX_VOCAB);
  if (!(temperature > 0.0f) || !isfinite(temperature))
    return ot_fail(OT_ERR_INVALID_ARG, "sample: temperature %g must be > 0 (use argmax for greedy decoding)",
                   (double)temperature);
  if (top_k < 0) return ot_fail(OT_ERR_INVALID_ARG, "sample: top_k %d must be >= 0 (0 keeps all)", top_k);
  if (!(top_p > 0.0f))
    return ot_fail(OT_ERR_INVALID_ARG, "sample: top_p %g must be in (0, 1] (1 keeps all)", (double)top_p);
  return OT_OK;
}

/* Row r of `logits`: element c is at off(r) + c * cs. */
typedef struct sp_geom {
  int64_t rows, n, rs, cs, is;
} sp_geom;

static sp_geom sp_geometry(ot_kview idx, ot_kview logits) {
  sp_geom g = {idx.ne[0], logits.ne[logits.ndim - 1], logits.ndim == 2 ? logits.nb[0] : 0,
               logits.nb[logits.ndim - 1], idx.nb[0]};
  return g;
}

OT_DECLARE_TARGET_BEGIN
/* One row: the caller's team cooperates in every reduction (on host threads
 * called from a parallel loop over rows, the inner loops run serially). */
static void sp_row(int64_t r, int ldt, const void *lp, int64_t o, int64_t n, int64_t cs, int64_t k, int use_p,
                   float top_p, float inv_t, uint64_t seed, uint64_t step, int32_t *out) {
  float mx = -INFINITY;
  OT_TEAM_REDUCE(max : mx)
  for (int64_t c = 0; c < n; c++) {
    const float l = ot_kld(ldt, lp, o + c * cs);
    if (l == l) mx = l > mx ? l : mx;
  }
  /* top-k: the largest key t with count(key >= t) >= k */
  uint64_t klo = 0, khi = 0xffffffffull;
  while (k && klo < khi) {
    const uint64_t mid = klo + (khi - klo + 1) / 2;
    int64_t cnt = 0;
    OT_TEAM_REDUCE(+ : cnt)
    for (int64_t c = 0; c < n; c++) cnt += sp_key(ot_kld(ldt, lp, o + c * cs)) >= mid;
    if (cnt >= k) klo = mid;
    else khi = mid - 1;
  }
  const uint32_t kth = (uint32_t)klo;
  /* top-p: the largest t with kept mass(q >= t) >= target */
  uint64_t plo = 0, phi = SP_QMAX;
  if (use_p) {
    uint64_t Q = 0;
    OT_TEAM_REDUCE(+ : Q)
    for (int64_t c = 0; c < n; c++) {
      const float l = ot_kld(ldt, lp, o + c * cs);
      Q += sp_key(l) >= kth ? sp_q(l, mx, inv_t) : 0;
    }
    const uint64_t target = sp_target(top_p, Q);
    while (plo < phi) {
      const uint64_t mid = plo + (phi - plo + 1) / 2;
      uint64_t m = 0;
      OT_TEAM_REDUCE(+ : m)
      for (int64_t c = 0; c < n; c++) {
        const float l = ot_kld(ldt, lp, o + c * cs);
        const uint64_t q = sp_q(l, mx, inv_t);
        m += sp_key(l) >= kth && q >= mid ? q : 0;
      }
      if (m >= target) plo = mid;
      else phi = mid - 1;
    }
  }
  const uint64_t tp = plo;
  uint64_t R = 0;
  OT_TEAM_REDUCE(+ : R)
  for (int64_t c = 0; c < n; c++) {
    const float l = ot_kld(ldt, lp, o + c * cs);
    const uint64_t q = sp_q(l, mx, inv_t);
    R += sp_key(l) >= kth && q >= tp ? q : 0;
  }
  /* the token: the first j whose running kept mass exceeds u */
  int64_t jlo = 0, jhi = n - 1;
  const uint64_t u = R ? sp_draw(seed, step, r, R) : 0;
  while (R && jlo < jhi) {
    const int64_t mid = jlo + (jhi - jlo) / 2;
    uint64_t pre = 0;
    OT_TEAM_REDUCE(+ : pre)
    for (int64_t c = 0; c <= mid; c++) {
      const float l = ot_kld(ldt, lp, o + c * cs);
      const uint64_t q = sp_q(l, mx, inv_t);
      pre += sp_key(l) >= kth && q >= tp ? q : 0;
    }
    if (pre > u) jhi = mid;
    else jlo = mid + 1;
  }
  *out = (int32_t)jlo;
}
OT_DECLARE_TARGET_END

ot_status ot_k_sample(int dev, ot_kview idx, ot_kview logits, float temperature, int top_k, float top_p,
                      uint64_t seed, uint64_t step) {
  return ot_k_sample_from(dev, idx, logits, temperature, top_k, top_p, seed, step, 0);
}

ot_status ot_k_sample_from(int dev, ot_kview idx, ot_kview logits, float temperature, int top_k, float top_p,
                           uint64_t seed, uint64_t step, int64_t row0) {
  OT_TRY(sp_check(idx, logits, temperature, top_k, top_p));
  const sp_geom g = sp_geometry(idx, logits);
  const int64_t rows = g.rows, n = g.n, rs = g.rs, cs = g.cs, is = g.is;
  const int64_t k = top_k > 0 && top_k < n ? top_k : 0; /* 0: no top-k */
  const int use_p = top_p < 1.0f;
  const float inv_t = 1.0f / temperature;
  const void *lp = logits.p;
  void *ip = idx.p;
  const int ldt = logits.dt;
  OT_KROWS(dev, rows, r, OT_DEVPTR(lp, ip),
           sp_row(row0 + r, ldt, lp, r * rs, n, cs, k, use_p, top_p, inv_t, seed, step, (int32_t *)ip + r * is));
  return OT_OK;
}

static int cmp_desc_u64(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The reference: the same definitions, thresholds found by sorting. */
ot_status ot_ref_sample(ot_kview idx, ot_kview logits, float temperature, int top_k, float top_p, uint64_t seed,
                        uint64_t step) {
  return ot_ref_sample_from(idx, logits, temperature, top_k, top_p, seed, step, 0);
}

ot_status ot_ref_sample_from(ot_kview idx, ot_kview logits, float temperature, int top_k, float top_p, uint64_t seed,
                             uint64_t step, int64_t row0) {
  OT_TRY(sp_check(idx, logits, temperature, top_k, top_p));
  const sp_geom g = sp_geometry(idx, logits);
  const float inv_t = 1.0f / temperature;
  uint64_t *key = malloc(sizeof *key * (size_t)g.n), *q = malloc(sizeof *q * (size_t)g.n),
           *srt = malloc(sizeof *srt * (size_t)g.n);
  if (!key || !q || !srt) {
    free(key);
    free(q);
    free(srt);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "sample: no host memory for a %lld-entry row", (long long)g.n);
  }
  for (int64_t r = 0; r < g.rows; r++) {
    float mx = -INFINITY;
    for (int64_t c = 0; c < g.n; c++) {
      const float l = ot_kld(logits.dt, logits.p, r * g.rs + c * g.cs);
      if (l > mx) mx = l;
    }
    for (int64_t c = 0; c < g.n; c++) {
      const float l = ot_kld(logits.dt, logits.p, r * g.rs + c * g.cs);
      key[c] = sp_key(l);
      q[c] = sp_q(l, mx, inv_t);
    }
    uint64_t kth = 0;
    if (top_k > 0 && top_k < g.n) {
      memcpy(srt, key, sizeof *srt * (size_t)g.n);
      qsort(srt, (size_t)g.n, sizeof *srt, cmp_desc_u64);
      kth = srt[top_k - 1];
    }
    uint64_t tp = 0, R = 0;
    int64_t m = 0;
    for (int64_t c = 0; c < g.n; c++)
      if (key[c] >= kth) srt[m++] = q[c];
    if (top_p < 1.0f) {
      uint64_t Q = 0, acc = 0;
      for (int64_t i = 0; i < m; i++) Q += srt[i];
      const uint64_t target = sp_target(top_p, Q);
      qsort(srt, (size_t)m, sizeof *srt, cmp_desc_u64);
      for (int64_t i = 0; i < m && acc < target; i++) {
        acc += srt[i];
        tp = srt[i];
      }
    }
    for (int64_t c = 0; c < g.n; c++) R += key[c] >= kth && q[c] >= tp ? q[c] : 0;
    int64_t tok = 0;
    if (R) {
      const uint64_t u = sp_draw(seed, step, row0 + r, R);
      uint64_t pre = 0;
      for (tok = 0; tok < g.n - 1; tok++) {
        pre += key[tok] >= kth && q[tok] >= tp ? q[tok] : 0;
        if (pre > u) break;
      }
    }
    ((int32_t *)idx.p)[r * idx.nb[0]] = (int32_t)tok;
  }
  free(key);
  free(q);
  free(srt);
  return OT_OK;
}
