/* norm.c — RMSNorm (Llama) and LayerNorm (GPT-2), row-wise: one team per
 * row, team reductions over the row. On a GPU, rows with a unit last
 * stride take a block per row instead: warp_gpu.c's kernel for f32,
 * rows_gpu.c's (specialized per dtype, 16-byte loads) for bf16/f16 rows and
 * f32 rows with a bf16/f16 output. */
#include "kernels/kcommon.h"
#include "kernels/rows_gpu.h"
#include "kernels/warp_gpu.h"

typedef struct norm_rows {
  int64_t rows, d, n1, n2;   /* rows = product of the leading dims */
  int64_t xs[4], ys[4];      /* 4-D strides of x and y */
} norm_rows;

/* x, y [.., d] (1..4 dims, any strides) with the same shape; w (and b) [d]. */
static ot_status norm_check(const char *op, ot_kview y, ot_kview x, ot_kview w, ot_kview b, int has_b,
                            norm_rows *nr) {
  OT_TRY(ot_kcheck(op, "x", x, 1, 4, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "y", y, 1, 4, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "w", w, 1, 1, OT_KM_FLOAT));
  if (has_b) OT_TRY(ot_kcheck(op, "b", b, 1, 1, OT_KM_FLOAT));
  int same = x.ndim == y.ndim;
  for (int d = 0; same && d < x.ndim; d++) same = x.ne[d] == y.ne[d];
  if (!same) return ot_fail(OT_ERR_SHAPE, "%s: x %s and y %s differ in shape", op, ot_kshape_str(x), ot_kshape_str(y));
  OT_TRY(ot_kcheck_dim(op, "x", x, -1, "w", w, 0));
  if (has_b) OT_TRY(ot_kcheck_dim(op, "x", x, -1, "b", b, 0));
  ot_kview x4 = ot_kview_4d(x), y4 = ot_kview_4d(y);
  nr->d = x4.ne[3];
  nr->n1 = x4.ne[1];
  nr->n2 = x4.ne[2];
  nr->rows = x4.ne[0] * x4.ne[1] * x4.ne[2];
  for (int d = 0; d < 4; d++) {
    nr->xs[d] = x4.nb[d];
    nr->ys[d] = y4.nb[d];
  }
  return OT_OK;
}

/* Row r starts at r * s[2] (the leading dims collapse into one, ignoring
 * dims of extent 1, whose strides do not matter). */
static int rows_uniform(const norm_rows *nr, const int64_t s[4]) {
  int64_t n0 = nr->rows / (nr->n1 * nr->n2);
  return (nr->n1 == 1 || s[1] == nr->n2 * s[2]) && (n0 == 1 || s[0] == nr->n1 * nr->n2 * s[2]);
}

/* layer: LayerNorm (subtract the mean, add b) else RMSNorm. */
static ot_status norm_run(int dev, int layer, ot_kview y, ot_kview x, ot_kview w, ot_kview b, float eps) {
  const char *op = layer ? "layernorm" : "rmsnorm";
  norm_rows nr;
  OT_TRY(norm_check(op, y, x, w, b, layer, &nr));
  if (nr.rows == 0 || nr.d == 0) return OT_OK;
  /* GPU, f32 rows with a unit last stride laid out as a matrix: a warp per row */
  if (ot_kfast_gpu(dev) && x.dt == OT_F32 && y.dt == OT_F32 && w.dt == OT_F32 && w.nb[0] == 1 &&
      (!layer || (b.dt == OT_F32 && b.nb[0] == 1)) && nr.xs[3] == 1 && nr.ys[3] == 1 && rows_uniform(&nr, nr.xs) &&
      rows_uniform(&nr, nr.ys) && ot_knorm_gpu_ok(y.p, nr.ys[2], x.p, nr.xs[2], w.p, layer ? b.p : NULL, nr.d)) {
    ot_knorm_gpu(dev, layer, y.p, nr.ys[2], x.p, nr.xs[2], w.p, layer ? b.p : w.p, nr.rows, nr.d, eps);
    return OT_OK;
  }
  /* GPU, other dtypes: a block per row, specialized per combination */
  const int pick = ot_knorm8_pick(x.dt, w.dt, y.dt);
  const int64_t ne4[4] = {nr.rows / (nr.n1 * nr.n2), nr.n1, nr.n2, nr.d};
  if (pick >= 0 && (!layer || (b.dt == w.dt && b.nb[0] == 1)) &&
      ot_krows8_ok(dev, x.dt, x.p, nr.xs, y.dt, y.p, nr.ys, ne4, w.dt, w.p, layer ? b.p : NULL, w.nb[0])) {
    const ot_krows8 rl = {nr.rows, nr.d, nr.n1, nr.n2, {nr.xs[0], nr.xs[1], nr.xs[2]}, {nr.ys[0], nr.ys[1], nr.ys[2]}};
    ot_knorm8_gpu(dev, pick, layer, y.p, x.p, w.p, layer ? b.p : NULL, &rl, eps);
    return OT_OK;
  }
  const void *xp = x.p, *wp = w.p, *bp = layer ? b.p : w.p;
  void *yp = y.p;
  const int xdt = x.dt, ydt = y.dt, wdt = w.dt, bdt = layer ? b.dt : w.dt;
  const int64_t rows = nr.rows, d = nr.d, n1 = nr.n1, n2 = nr.n2, ws = w.nb[0], bs = layer ? b.nb[0] : 0;
  const int64_t xs0 = nr.xs[0], xs1 = nr.xs[1], xs2 = nr.xs[2], xs3 = nr.xs[3];
  const int64_t ys0 = nr.ys[0], ys1 = nr.ys[1], ys2 = nr.ys[2], ys3 = nr.ys[3];
  OT_TEAMS(dev, ot_kteams(dev, rows), OT_DEVPTR(xp, wp, bp, yp))
  for (int64_t r = 0; r < rows; r++) {
    const int64_t xo = ot_krow_off(r, n1, n2, xs0, xs1, xs2), yo = ot_krow_off(r, n1, n2, ys0, ys1, ys2);
    float mean = 0.0f, ss = 0.0f;
    if (layer) {
      float s = 0.0f;
      OT_TEAM_REDUCE(+ : s)
      for (int64_t c = 0; c < d; c++) s += ot_kld(xdt, xp, xo + c * xs3);
      mean = s / (float)d;
    }
    OT_TEAM_REDUCE(+ : ss)
    for (int64_t c = 0; c < d; c++) {
      const float v = ot_kld(xdt, xp, xo + c * xs3) - mean;
      ss += v * v;
    }
    const float rs = 1.0f / sqrtf(ss / (float)d + eps);
    OT_TEAM_FOR
    for (int64_t c = 0; c < d; c++) {
      float v = (ot_kld(xdt, xp, xo + c * xs3) - mean) * rs * ot_kld(wdt, wp, c * ws);
      if (layer) v += ot_kld(bdt, bp, c * bs);
      ot_kst(ydt, yp, yo + c * ys3, v);
    }
  }
  return OT_OK;
}

static ot_status norm_ref(int layer, ot_kview y, ot_kview x, ot_kview w, ot_kview b, float eps) {
  norm_rows nr;
  OT_TRY(norm_check(layer ? "layernorm" : "rmsnorm", y, x, w, b, layer, &nr));
  for (int64_t r = 0; r < nr.rows; r++) {
    const int64_t xo = ot_krow_off(r, nr.n1, nr.n2, nr.xs[0], nr.xs[1], nr.xs[2]);
    const int64_t yo = ot_krow_off(r, nr.n1, nr.n2, nr.ys[0], nr.ys[1], nr.ys[2]);
    double mean = 0.0, ss = 0.0;
    if (layer) {
      for (int64_t c = 0; c < nr.d; c++) mean += ot_kld(x.dt, x.p, xo + c * nr.xs[3]);
      mean /= (double)nr.d;
    }
    for (int64_t c = 0; c < nr.d; c++) {
      double v = ot_kld(x.dt, x.p, xo + c * nr.xs[3]) - mean;
      ss += v * v;
    }
    double rs = 1.0 / sqrt(ss / (double)nr.d + eps);
    for (int64_t c = 0; c < nr.d; c++) {
      double v = (ot_kld(x.dt, x.p, xo + c * nr.xs[3]) - mean) * rs * ot_kld(w.dt, w.p, c * w.nb[0]);
      if (layer) v += ot_kld(b.dt, b.p, c * b.nb[0]);
      ot_kst(y.dt, y.p, yo + c * nr.ys[3], (float)v);
    }
  }
  return OT_OK;
}

ot_status ot_k_rmsnorm(int dev, ot_kview y, ot_kview x, ot_kview w, float eps) {
  return norm_run(dev, 0, y, x, w, w, eps);
}
ot_status ot_k_layernorm(int dev, ot_kview y, ot_kview x, ot_kview w, ot_kview b, float eps) {
  return norm_run(dev, 1, y, x, w, b, eps);
}
ot_status ot_ref_rmsnorm(ot_kview y, ot_kview x, ot_kview w, float eps) { return norm_ref(0, y, x, w, w, eps); }
ot_status ot_ref_layernorm(ot_kview y, ot_kview x, ot_kview w, ot_kview b, float eps) {
  return norm_ref(1, y, x, w, b, eps);
}
