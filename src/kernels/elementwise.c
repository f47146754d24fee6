/* elementwise.c — add, mul, scale, bias add, GELU (tanh form), SiLU, SwiGLU,
 * and the backward of GELU and SiLU (a = x, b = dy).
 *
 * One kernel body serves all ops: y[i] = f(a[i], b[i]) over y's shape, with
 * numpy broadcasting of a and b (dims aligned from the right; a dim of 1
 * repeats). Any strides; contiguous same-shape operands take a flat loop
 * without index arithmetic. y may alias a or b exactly (residual add in
 * place). f32/f16/bf16 in any mix. */
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

static ot_status ew_run(int dev, int op, ot_kview y, ot_kview a, ot_kview b, float s) {
  OT_TRY(ew_check(op, &y, &a, &b));
  const int64_t n = ot_kview_numel(y);
  if (n == 0) return OT_OK;
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
