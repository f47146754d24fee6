/* moe.c — the two row kernels a mixture-of-experts layer needs besides
 * GEMMs: adding an expert's output rows into the tokens that chose it, each
 * scaled by its routing weight, and Qwen2-MoE's shared expert added under
 * its sigmoid gate. f32 rows (the MoE layer keeps its activations in f32).
 *
 * An expert's tokens are distinct, so the rows one scatter writes never
 * collide: no atomics, and the sum over experts is in the order the caller
 * runs them (fixed: expert index), whatever the budget. */
#include "kernels/kcommon.h"

static ot_status scatter_check(ot_kview y, ot_kview x, ot_kview ids, ot_kview w) {
  OT_TRY(ot_kcheck("scatter_add_rows", "y", y, 2, 2, OT_KM(OT_F32)));
  OT_TRY(ot_kcheck("scatter_add_rows", "x", x, 2, 2, OT_KM(OT_F32)));
  OT_TRY(ot_kcheck("scatter_add_rows", "ids", ids, 1, 1, OT_KM(OT_I32)));
  OT_TRY(ot_kcheck("scatter_add_rows", "w", w, 1, 1, OT_KM(OT_F32)));
  OT_TRY(ot_kcheck_dim("scatter_add_rows", "x", x, 0, "ids", ids, 0));
  OT_TRY(ot_kcheck_dim("scatter_add_rows", "x", x, 0, "w", w, 0));
  OT_TRY(ot_kcheck_dim("scatter_add_rows", "x", x, 1, "y", y, 1));
  return OT_OK;
}

ot_status ot_k_scatter_add_rows(int dev, ot_kview y, ot_kview x, ot_kview ids, ot_kview w) {
  OT_TRY(scatter_check(y, x, ids, w));
  const int64_t n = x.ne[0], d = x.ne[1], rows = y.ne[0];
  if (n == 0 || d == 0) return OT_OK;
  float *yp = y.p;
  const float *xp = x.p, *wp = w.p;
  const int32_t *ip = ids.p;
  const int64_t y0 = y.nb[0], y1 = y.nb[1], x0 = x.nb[0], x1 = x.nb[1], i0 = ids.nb[0], w0 = w.nb[0];
  OT_PARFOR2(dev, OT_DEVPTR(yp, xp, ip, wp))
  for (int64_t r = 0; r < n; r++)
    for (int64_t c = 0; c < d; c++) {
      const int64_t t = ip[r * i0];
      if (t >= 0 && t < rows) yp[t * y0 + c * y1] += wp[r * w0] * xp[r * x0 + c * x1]; /* a bad id adds nothing */
    }
  return OT_OK;
}

ot_status ot_ref_scatter_add_rows(ot_kview y, ot_kview x, ot_kview ids, ot_kview w) {
  OT_TRY(scatter_check(y, x, ids, w));
  for (int64_t r = 0; r < x.ne[0]; r++) {
    const int64_t t = ((const int32_t *)ids.p)[r * ids.nb[0]];
    if (t < 0 || t >= y.ne[0]) continue;
    const float wr = ((const float *)w.p)[r * w.nb[0]];
    for (int64_t c = 0; c < x.ne[1]; c++)
      ((float *)y.p)[t * y.nb[0] + c * y.nb[1]] += wr * ((const float *)x.p)[r * x.nb[0] + c * x.nb[1]];
  }
  return OT_OK;
}

static ot_status gate_check(ot_kview y, ot_kview x, ot_kview g) {
  OT_TRY(ot_kcheck("sigmoid_gate_add", "y", y, 2, 2, OT_KM(OT_F32)));
  OT_TRY(ot_kcheck("sigmoid_gate_add", "x", x, 2, 2, OT_KM(OT_F32)));
  OT_TRY(ot_kcheck("sigmoid_gate_add", "g", g, 2, 2, OT_KM(OT_F32)));
  OT_TRY(ot_kcheck_dim("sigmoid_gate_add", "x", x, 0, "y", y, 0));
  OT_TRY(ot_kcheck_dim("sigmoid_gate_add", "x", x, 1, "y", y, 1));
  OT_TRY(ot_kcheck_dim("sigmoid_gate_add", "g", g, 0, "y", y, 0));
  if (g.ne[1] != 1) return ot_fail(OT_ERR_SHAPE, "sigmoid_gate_add: g must be [rows, 1], not [%lld, %lld]",
                                   (long long)g.ne[0], (long long)g.ne[1]);
  return OT_OK;
}

OT_DECLARE_TARGET_BEGIN
static inline float moe_sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }
OT_DECLARE_TARGET_END

ot_status ot_k_sigmoid_gate_add(int dev, ot_kview y, ot_kview x, ot_kview g) {
  OT_TRY(gate_check(y, x, g));
  const int64_t n = y.ne[0], d = y.ne[1];
  if (n == 0 || d == 0) return OT_OK;
  float *yp = y.p;
  const float *xp = x.p, *gp = g.p;
  const int64_t y0 = y.nb[0], y1 = y.nb[1], x0 = x.nb[0], x1 = x.nb[1], g0 = g.nb[0];
  OT_PARFOR2(dev, OT_DEVPTR(yp, xp, gp))
  for (int64_t r = 0; r < n; r++)
    for (int64_t c = 0; c < d; c++) yp[r * y0 + c * y1] += moe_sigmoid(gp[r * g0]) * xp[r * x0 + c * x1];
  return OT_OK;
}

ot_status ot_ref_sigmoid_gate_add(ot_kview y, ot_kview x, ot_kview g) {
  OT_TRY(gate_check(y, x, g));
  for (int64_t r = 0; r < y.ne[0]; r++) {
    const float s = 1.0f / (1.0f + expf(-((const float *)g.p)[r * g.nb[0]]));
    for (int64_t c = 0; c < y.ne[1]; c++)
      ((float *)y.p)[r * y.nb[0] + c * y.nb[1]] += s * ((const float *)x.p)[r * x.nb[0] + c * x.nb[1]];
  }
  return OT_OK;
}
