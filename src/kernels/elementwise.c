/* elementwise.c — add, mul, scale, bias add, GELU (tanh form), SiLU, SwiGLU,
 * and the backward of GELU and SiLU (a = x, b = dy).
 *
 * One kernel body serves all ops: y[i] = f(a[i], b[i]) over y's shape, with
 * numpy broadcasting of a and b (dims aligned from the right; a dim of 1
 * repeats). Any strides; contiguous same-shape operands take a flat loop
 * without index arithmetic. y may alias a or b exactly (residual add in
 * place). f32/f16/bf16 in any mix.
 *
 * Fast path (ew_fast): contiguous operands in one of the dtype combinations
 * the models use (all f32, all bf16, all f16; f32 = f32 op bf16/f16; and
 * for mixed-precision training bf16/f16 = bf16/f16 op f32 (an f32 bias) and
 * bf16/f16 = f32 op f32 (a cast)), b
 * either the same shape or a bias repeating along the last dim: the loop is
 * instantiated per combination at compile time (no dtype switch per
 * element) and moves 8 elements per step with 16-byte accesses. Everything
 * else takes the generic loops, which define the semantics: the fast path
 * computes each element with the same ew_apply. */
#include "kernels/kcommon.h"

enum { EW_ADD, EW_MUL, EW_SCALE, EW_GELU, EW_SILU, EW_SWIGLU, EW_GELU_BWD, EW_SILU_BWD };

static const char *const ew_names[] = {"add", "mul", "scale", "gelu", "silu", "swiglu", "gelu_backward",
                                       "silu_backward"};

#define GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K1 0.044715f

OT_DECLARE_TARGET_BEGIN
static inline float ew_apply(int op, float a, float b, float s) {
  switch (op) {
  case EW_ADD: return a + b;
  case EW_MUL: return a * b;
  case EW_SCALE: return a * s;
  case EW_GELU: return 0.5f * a * (1.0f + tanhf(GELU_K0 * (a + GELU_K1 * a * a * a)));
  case EW_SILU: return a / (1.0f + expf(-a));
  case EW_SWIGLU: return a / (1.0f + expf(-a)) * b;
  case EW_GELU_BWD: {
    const float t = tanhf(GELU_K0 * (a + GELU_K1 * a * a * a));
    return b * (0.5f * (1.0f + t) + 0.5f * a * (1.0f - t * t) * GELU_K0 * (1.0f + 3.0f * GELU_K1 * a * a));
  }
  default: { /* EW_SILU_BWD: silu' = s (1 + x (1 - s)) */
    const float sg = 1.0f / (1.0f + expf(-a));
    return b * sg * (1.0f + a * (1.0f - sg));
  }
  }
}
OT_DECLARE_TARGET_END

static double ew_apply_ref(int op, double a, double b, double s) {
  switch (op) {
  case EW_ADD: return a + b;
  case EW_MUL: return a * b;
  case EW_SCALE: return a * s;
  case EW_GELU: return 0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));
  case EW_SILU: return a / (1.0 + exp(-a));
  case EW_SWIGLU: return a / (1.0 + exp(-a)) * b;
  case EW_GELU_BWD: {
    const double k0 = 0.7978845608028654, k1 = 0.044715, t = tanh(k0 * (a + k1 * a * a * a));
    return b * (0.5 * (1.0 + t) + 0.5 * a * (1.0 - t * t) * k0 * (1.0 + 3.0 * k1 * a * a));
  }
  default: {
    const double sg = 1.0 / (1.0 + exp(-a));
    return b * sg * (1.0 + a * (1.0 - sg));
  }
  }
}

static int ew_binary(int op) { return op != EW_SCALE && op != EW_GELU && op != EW_SILU; }

/* Checks y, a (and b for binary ops); returns the operands as 4-D views
 * broadcast to y's shape (stride 0 where they repeat). */
static ot_status ew_check(int op, ot_kview *y, ot_kview *a, ot_kview *b) {
  const char *name = ew_names[op];
  OT_TRY(ot_kcheck(name, "y", *y, 1, 4, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(name, "a", *a, 1, 4, OT_KM_FLOAT));
  if (ew_binary(op)) OT_TRY(ot_kcheck(name, "b", *b, 1, 4, OT_KM_FLOAT));
  else *b = *a;
  ot_kview y4 = ot_kview_4d(*y), ops[2] = {ot_kview_4d(*a), ot_kview_4d(*b)};
  for (int k = 0; k < 2; k++) {
    if ((k == 0 ? a : b)->ndim > y->ndim)
      return ot_fail(OT_ERR_SHAPE, "%s: operand %s has more dims than the output %s", name,
                     ot_kshape_str(k == 0 ? *a : *b), ot_kshape_str(*y));
    for (int d = 0; d < 4; d++) {
      if (ops[k].ne[d] == y4.ne[d]) continue;
      if (ops[k].ne[d] != 1)
        return ot_fail(OT_ERR_SHAPE, "%s: operand %s does not broadcast to the output %s", name,
                       ot_kshape_str(k == 0 ? *a : *b), ot_kshape_str(*y));
      ops[k].ne[d] = y4.ne[d];
      ops[k].nb[d] = 0;
    }
  }
  *y = y4;
  *a = ops[0];
  *b = ops[1];
  return OT_OK;
}

static int is_contig(ot_kview v) {
  int64_t s = 1;
  for (int d = 3; d >= 0; d--) {
    if (v.ne[d] != 1 && v.nb[d] != s) return 0;
    s *= v.ne[d];
  }
  return 1;
}

OT_DECLARE_TARGET_BEGIN
static inline int64_t ew_off(int64_t i, const int64_t ne[4], const int64_t nb[4]) {
  int64_t i3 = i % ne[3], q = i / ne[3];
  int64_t i2 = q % ne[2];
  q /= ne[2];
  return (q / ne[1]) * nb[0] + (q % ne[1]) * nb[1] + i2 * nb[2] + i3 * nb[3];
}
OT_DECLARE_TARGET_END

/* ---- the fast path ------------------------------------------------------------ */
OT_DECLARE_TARGET_BEGIN
/* a[k] = op(a[k], b[k]) for the 8 elements of a step: one (uniform) switch
 * per step, the op a constant inside each case. */
#define EW_CASE(OP)                                                    \
  case OP:                                                             \
    OT_UNROLL                                                          \
    for (int k = 0; k < OT_KV; k++) a[k] = ew_apply(OP, a[k], b[k], s); \
    break;
static inline void ew_apply8(int op, float a[OT_KV], const float b[OT_KV], float s) {
  switch (op) {
    EW_CASE(EW_ADD)
    EW_CASE(EW_MUL)
    EW_CASE(EW_SCALE)
    EW_CASE(EW_GELU)
    EW_CASE(EW_SILU)
    EW_CASE(EW_SWIGLU)
    EW_CASE(EW_GELU_BWD)
    default: EW_CASE(EW_SILU_BWD)
  }
}
#undef EW_CASE
OT_DECLARE_TARGET_END

/* ew_fast_<Y>_<A>_<B>: y = op(a, b) over n contiguous elements; Y, A, B the
 * dtypes (f32, bf16, f16). Elements [h, t) go 8 per step (16-byte aligned
 * there for every operand: h < 8 peels what comes before); the last
 * iteration does the h elements before and the n - t after one by one.
 * bn > 0: b is a row of bn elements repeating (a bias; then h == 0 and
 * bn % 8 == 0). unary: b is not read. */
#define EW_FAST(Y, A, B)                                                                                    \
  static void ew_fast_##Y##_##A##_##B(int dev, int op, void *yp, const void *ap, const void *bp, int64_t n, \
                                      int64_t h, int64_t bn, int unary, float s) {                          \
    const int64_t nv = (n - h) / OT_KV, t = h + nv * OT_KV;                                               \
    OT_PARFOR(dev, OT_DEVPTR(yp, ap, bp))                                                                  \
    for (int64_t v = 0; v <= nv; v++) {                                                                    \
      if (v < nv) {                                                                                         \
        const int64_t i = h + v * OT_KV;                                                                    \
        float x[OT_KV], z[OT_KV];                                                                           \
        ot_kld8_##A(ap, i, x);                                                                              \
        if (unary) {                                                                                        \
          OT_UNROLL                                                                                         \
          for (int k = 0; k < OT_KV; k++) z[k] = x[k];                                                      \
        } else {                                                                                            \
          ot_kld8_##B(bp, bn ? i % bn : i, z);                                                              \
        }                                                                                                   \
        ew_apply8(op, x, z, s);                                                                             \
        ot_kst8_##Y(yp, i, x);                                                                              \
      } else {                                                                                              \
        for (int64_t j = 0; j < h + (n - t); j++) {                                                         \
          const int64_t i = j < h ? j : t + (j - h);                                                        \
          const float x = ot_ld_##A(ap, i), z = unary ? x : ot_ld_##B(bp, bn ? i % bn : i);                 \
          ot_st_##Y(yp, i, ew_apply(op, x, z, s));                                                          \
        }                                                                                                   \
      }                                                                                                     \
    }                                                                                                       \
  }
EW_FAST(f32, f32, f32)
EW_FAST(bf16, bf16, bf16)
EW_FAST(f16, f16, f16)
EW_FAST(f32, f32, bf16)
EW_FAST(f32, f32, f16)
EW_FAST(bf16, bf16, f32)
EW_FAST(f16, f16, f32)
EW_FAST(bf16, f32, f32)
EW_FAST(f16, f32, f32)
#undef EW_FAST

typedef void (*ew_fast_fn)(int dev, int op, void *yp, const void *ap, const void *bp, int64_t n, int64_t h,
                           int64_t bn, int unary, float s);

static ew_fast_fn ew_fast_pick(int ydt, int adt, int bdt) {
  if (ydt == adt && adt == bdt)
    return ydt == OT_F32 ? ew_fast_f32_f32_f32 : ydt == OT_BF16 ? ew_fast_bf16_bf16_bf16 : ew_fast_f16_f16_f16;
  if (ydt == OT_F32 && adt == OT_F32) return bdt == OT_BF16 ? ew_fast_f32_f32_bf16 : ew_fast_f32_f32_f16;
  /* mixed precision: a 16-bit activation plus an f32 bias, an f32 tensor into 16 bits (a cast) */
  if (bdt == OT_F32 && (ydt == OT_BF16 || ydt == OT_F16) && (adt == ydt || adt == OT_F32))
    return adt == ydt ? (ydt == OT_BF16 ? ew_fast_bf16_bf16_f32 : ew_fast_f16_f16_f32)
                      : (ydt == OT_BF16 ? ew_fast_bf16_f32_f32 : ew_fast_f16_f32_f32);
  return NULL;
}

/* b (4-D, broadcast to y) repeats one contiguous row along the last dim. */
static int is_bias_row(ot_kview b) { return b.nb[0] == 0 && b.nb[1] == 0 && b.nb[2] == 0 && b.nb[3] == 1; }

/* Runs the fast path if y, a, b (4-D, checked) qualify; returns whether it did. */
static int ew_fast(int dev, int op, ot_kview y, ot_kview a, ot_kview b, int64_t n, float s) {
  const int unary = !ew_binary(op);
  const int bias = !unary && !is_contig(b) && is_bias_row(b) && y.ne[3] % OT_KV == 0;
  if (!is_contig(y) || !is_contig(a) || !(unary || bias || is_contig(b))) return 0;
  ew_fast_fn f = ew_fast_pick(y.dt, a.dt, b.dt);
  if (!f) return 0;
  const int64_t ye = ot_kfloat_bytes(y.dt), ae = ot_kfloat_bytes(a.dt), be = ot_kfloat_bytes(b.dt);
  /* the first element from which every operand is 16-byte aligned (b's
   * offset is i % bn for a bias, so a bias needs h == 0) */
  int64_t h = 0;
  while (h < OT_KV && !(ot_kalign16(y.p, h, ye) && ot_kalign16(a.p, h, ae) &&
                        (unary || ot_kalign16(b.p, bias ? 0 : h, be)) && (!bias || h == 0)))
    h++;
  if (h == OT_KV) return 0; /* the operands' offsets disagree modulo 16 bytes */
  f(dev, op, y.p, a.p, b.p, n, h < n ? h : n, bias ? y.ne[3] : 0, unary, s);
  return 1;
}

static ot_status ew_run(int dev, int op, ot_kview y, ot_kview a, ot_kview b, float s) {
  OT_TRY(ew_check(op, &y, &a, &b));
  const int64_t n = ot_kview_numel(y);
  if (n == 0) return OT_OK;
  if (ew_fast(dev, op, y, a, b, n, s)) return OT_OK;
  void *yp = y.p;
  const void *ap = a.p, *bp = b.p;
  const int ydt = y.dt, adt = a.dt, bdt = b.dt;
  if (is_contig(y) && is_contig(a) && is_contig(b)) {
    OT_PARFOR(dev, OT_DEVPTR(yp, ap, bp))
    for (int64_t i = 0; i < n; i++) ot_kst(ydt, yp, i, ew_apply(op, ot_kld(adt, ap, i), ot_kld(bdt, bp, i), s));
    return OT_OK;
  }
  const int64_t ne[4] = {y.ne[0], y.ne[1], y.ne[2], y.ne[3]};
  const int64_t ynb[4] = {y.nb[0], y.nb[1], y.nb[2], y.nb[3]}, anb[4] = {a.nb[0], a.nb[1], a.nb[2], a.nb[3]},
                bnb[4] = {b.nb[0], b.nb[1], b.nb[2], b.nb[3]};
  OT_PARFOR(dev, OT_DEVPTR(yp, ap, bp) firstprivate(ne, ynb, anb, bnb))
  for (int64_t i = 0; i < n; i++)
    ot_kst(ydt, yp, ew_off(i, ne, ynb),
           ew_apply(op, ot_kld(adt, ap, ew_off(i, ne, anb)), ot_kld(bdt, bp, ew_off(i, ne, bnb)), s));
  return OT_OK;
}

static ot_status ew_ref(int op, ot_kview y, ot_kview a, ot_kview b, float s) {
  OT_TRY(ew_check(op, &y, &a, &b));
  const int64_t n = ot_kview_numel(y);
  for (int64_t i = 0; i < n; i++) {
    double va = ot_kld(a.dt, a.p, ew_off(i, y.ne, a.nb)), vb = ot_kld(b.dt, b.p, ew_off(i, y.ne, b.nb));
    ot_kst(y.dt, y.p, ew_off(i, y.ne, y.nb), (float)ew_apply_ref(op, va, vb, s));
  }
  return OT_OK;
}

ot_status ot_k_add(int dev, ot_kview y, ot_kview a, ot_kview b) { return ew_run(dev, EW_ADD, y, a, b, 0); }
ot_status ot_k_mul(int dev, ot_kview y, ot_kview a, ot_kview b) { return ew_run(dev, EW_MUL, y, a, b, 0); }
ot_status ot_k_bias_add(int dev, ot_kview y, ot_kview x, ot_kview bias) { return ew_run(dev, EW_ADD, y, x, bias, 0); }
ot_status ot_k_scale(int dev, ot_kview y, ot_kview x, float s) { return ew_run(dev, EW_SCALE, y, x, x, s); }
ot_status ot_k_gelu(int dev, ot_kview y, ot_kview x) { return ew_run(dev, EW_GELU, y, x, x, 0); }
ot_status ot_k_silu(int dev, ot_kview y, ot_kview x) { return ew_run(dev, EW_SILU, y, x, x, 0); }
ot_status ot_k_swiglu(int dev, ot_kview y, ot_kview gate, ot_kview up) { return ew_run(dev, EW_SWIGLU, y, gate, up, 0); }

ot_status ot_k_gelu_backward(int dev, ot_kview dx, ot_kview x, ot_kview dy) { return ew_run(dev, EW_GELU_BWD, dx, x, dy, 0); }
ot_status ot_k_silu_backward(int dev, ot_kview dx, ot_kview x, ot_kview dy) { return ew_run(dev, EW_SILU_BWD, dx, x, dy, 0); }

ot_status ot_ref_add(ot_kview y, ot_kview a, ot_kview b) { return ew_ref(EW_ADD, y, a, b, 0); }
ot_status ot_ref_mul(ot_kview y, ot_kview a, ot_kview b) { return ew_ref(EW_MUL, y, a, b, 0); }
ot_status ot_ref_bias_add(ot_kview y, ot_kview x, ot_kview bias) { return ew_ref(EW_ADD, y, x, bias, 0); }
ot_status ot_ref_scale(ot_kview y, ot_kview x, float s) { return ew_ref(EW_SCALE, y, x, x, s); }
ot_status ot_ref_gelu(ot_kview y, ot_kview x) { return ew_ref(EW_GELU, y, x, x, 0); }
ot_status ot_ref_silu(ot_kview y, ot_kview x) { return ew_ref(EW_SILU, y, x, x, 0); }
ot_status ot_ref_swiglu(ot_kview y, ot_kview gate, ot_kview up) { return ew_ref(EW_SWIGLU, y, gate, up, 0); }
ot_status ot_ref_gelu_backward(ot_kview dx, ot_kview x, ot_kview dy) { return ew_ref(EW_GELU_BWD, dx, x, dy, 0); }
ot_status ot_ref_silu_backward(ot_kview dx, ot_kview x, ot_kview dy) { return ew_ref(EW_SILU_BWD, dx, x, dy, 0); }

/* SwiGLU backward from the pieces above: dgate = silu'(gate) * (dy * up) (dy * up
 * staged in dgate), then dup = silu(gate) * dy (last, so dup may be dy). */
typedef ot_status (*ew_fn)(int dev, int op, ot_kview y, ot_kview a, ot_kview b, float s);

static ot_status ew_ref_dev(int dev, int op, ot_kview y, ot_kview a, ot_kview b, float s) {
  (void)dev;
  return ew_ref(op, y, a, b, s);
}

static ot_status swiglu_bwd(ew_fn f, int dev, ot_kview dgate, ot_kview dup, ot_kview gate, ot_kview up, ot_kview dy) {
  OT_TRY(f(dev, EW_MUL, dgate, dy, up, 0));
  OT_TRY(f(dev, EW_SILU_BWD, dgate, gate, dgate, 0));
  return f(dev, EW_SWIGLU, dup, gate, dy, 0);
}

ot_status ot_k_swiglu_backward(int dev, ot_kview dgate, ot_kview dup, ot_kview gate, ot_kview up, ot_kview dy) {
  return swiglu_bwd(ew_run, dev, dgate, dup, gate, up, dy);
}
ot_status ot_ref_swiglu_backward(ot_kview dgate, ot_kview dup, ot_kview gate, ot_kview up, ot_kview dy) {
  return swiglu_bwd(ew_ref_dev, 0, dgate, dup, gate, up, dy);
}
