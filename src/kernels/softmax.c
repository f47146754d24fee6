/* softmax.c — numerically stable softmax over the last dim, optional causal
 * mask; one team per row. On a GPU, rows with a unit last stride, d % 8 == 0
 * and d <= 8192 in f32, bf16 or f16 take rows_gpu.c's block per row
 * (specialized per dtype, the row read once with 16-byte loads). */
#include "kernels/kcommon.h"
#include "kernels/rows_gpu.h"

typedef struct sm_rows {
  int64_t rows, n, S, n1, n2;
  int64_t xs[4], ys[4];
} sm_rows;

static ot_status sm_check(ot_kview y, ot_kview x, sm_rows *r) {
  OT_TRY(ot_kcheck("softmax", "x", x, 1, 4, OT_KM_FLOAT));
  OT_TRY(ot_kcheck("softmax", "y", y, 1, 4, OT_KM_FLOAT));
  int same = x.ndim == y.ndim;
  for (int d = 0; same && d < x.ndim; d++) same = x.ne[d] == y.ne[d];
  if (!same)
    return ot_fail(OT_ERR_SHAPE, "softmax: x %s and y %s differ in shape", ot_kshape_str(x), ot_kshape_str(y));
  ot_kview x4 = ot_kview_4d(x), y4 = ot_kview_4d(y);
  r->n = x4.ne[3];
  r->S = x4.ne[2];
  r->n1 = x4.ne[1];
  r->n2 = x4.ne[2];
  r->rows = x4.ne[0] * x4.ne[1] * x4.ne[2];
  for (int d = 0; d < 4; d++) {
    r->xs[d] = x4.nb[d];
    r->ys[d] = y4.nb[d];
  }
  return OT_OK;
}

ot_status ot_k_softmax(int dev, ot_kview y, ot_kview x, float scale, int causal) {
  sm_rows sr;
  OT_TRY(sm_check(y, x, &sr));
  if (sr.rows == 0 || sr.n == 0) return OT_OK;
  const int pick = ot_ksoftmax8_pick(x.dt, y.dt);
  const int64_t ne4[4] = {sr.rows / (sr.n1 * sr.n2), sr.n1, sr.n2, sr.n};
  if (pick >= 0 && ot_krows8_ok(dev, x.dt, x.p, sr.xs, y.dt, y.p, sr.ys, ne4, 0, NULL, NULL, 1)) {
    const ot_krows8 rl = {sr.rows, sr.n, sr.n1, sr.n2, {sr.xs[0], sr.xs[1], sr.xs[2]}, {sr.ys[0], sr.ys[1], sr.ys[2]}};
    ot_ksoftmax8_gpu(dev, pick, y.p, x.p, &rl, scale, causal);
    return OT_OK;
  }
  const void *xp = x.p;
  void *yp = y.p;
  const int xdt = x.dt, ydt = y.dt;
  const int64_t rows = sr.rows, n = sr.n, S = sr.S, n1 = sr.n1, n2 = sr.n2;
  const int64_t xs0 = sr.xs[0], xs1 = sr.xs[1], xs2 = sr.xs[2], xs3 = sr.xs[3];
  const int64_t ys0 = sr.ys[0], ys1 = sr.ys[1], ys2 = sr.ys[2], ys3 = sr.ys[3];
  OT_TEAMS(dev, ot_kteams(dev, rows), OT_DEVPTR(xp, yp))
  for (int64_t r = 0; r < rows; r++) {
    const int64_t xo = ot_krow_off(r, n1, n2, xs0, xs1, xs2), yo = ot_krow_off(r, n1, n2, ys0, ys1, ys2);
    const int64_t m = ot_ksm_ncols(causal, r, S, n);
    float mx = -INFINITY, sum = 0.0f;
    OT_TEAM_REDUCE(max : mx)
    for (int64_t c = 0; c < m; c++) mx = fmaxf(mx, scale * ot_kld(xdt, xp, xo + c * xs3));
    OT_TEAM_REDUCE(+ : sum)
    for (int64_t c = 0; c < m; c++) sum += expf(scale * ot_kld(xdt, xp, xo + c * xs3) - mx);
    const float inv = 1.0f / sum;
    /* y may alias x: every read of x above finished before this loop */
    OT_TEAM_FOR
    for (int64_t c = 0; c < n; c++)
      ot_kst(ydt, yp, yo + c * ys3, c < m ? expf(scale * ot_kld(xdt, xp, xo + c * xs3) - mx) * inv : 0.0f);
  }
  return OT_OK;
}

ot_status ot_ref_softmax(ot_kview y, ot_kview x, float scale, int causal) {
  sm_rows sr;
  OT_TRY(sm_check(y, x, &sr));
  for (int64_t r = 0; r < sr.rows; r++) {
    const int64_t xo = ot_krow_off(r, sr.n1, sr.n2, sr.xs[0], sr.xs[1], sr.xs[2]);
    const int64_t yo = ot_krow_off(r, sr.n1, sr.n2, sr.ys[0], sr.ys[1], sr.ys[2]);
    const int64_t m = ot_ksm_ncols(causal, r, sr.S, sr.n);
    double mx = -INFINITY, sum = 0.0;
    for (int64_t c = 0; c < m; c++) mx = fmax(mx, (double)scale * ot_kld(x.dt, x.p, xo + c * sr.xs[3]));
    for (int64_t c = 0; c < m; c++) sum += exp((double)scale * ot_kld(x.dt, x.p, xo + c * sr.xs[3]) - mx);
    for (int64_t c = 0; c < sr.n; c++) {
      double v = c < m ? exp((double)scale * ot_kld(x.dt, x.p, xo + c * sr.xs[3]) - mx) / sum : 0.0;
      ot_kst(y.dt, y.p, yo + c * sr.ys[3], (float)v);
    }
  }
  return OT_OK;
}

/* ---- backward: dx = scale * y * (dy - sum_c dy_c y_c), per row ------------------
 * Masked columns have y == 0, so the causal mask needs no special case. */
static ot_status smb_check(ot_kview dx, ot_kview y, ot_kview dy, sm_rows *r) {
  OT_TRY(sm_check(dx, y, r));
  OT_TRY(ot_kcheck("softmax_backward", "dy", dy, 1, 4, OT_KM_FLOAT));
  int same = dy.ndim == y.ndim;
  for (int d = 0; same && d < y.ndim; d++) same = dy.ne[d] == y.ne[d];
  if (!same)
    return ot_fail(OT_ERR_SHAPE, "softmax_backward: y %s and dy %s differ in shape", ot_kshape_str(y),
                   ot_kshape_str(dy));
  return OT_OK;
}

ot_status ot_k_softmax_backward(int dev, ot_kview dx, ot_kview y, ot_kview dy, float scale) {
  sm_rows sr;
  OT_TRY(smb_check(dx, y, dy, &sr));
  if (sr.rows == 0 || sr.n == 0) return OT_OK;
  ot_kview g4 = ot_kview_4d(dy);
  const void *yp = y.p, *gp = dy.p;
  void *dp = dx.p;
  const int ydt = y.dt, gdt = dy.dt, ddt = dx.dt;
  const int64_t rows = sr.rows, n = sr.n, n1 = sr.n1, n2 = sr.n2;
  const int64_t ys0 = sr.xs[0], ys1 = sr.xs[1], ys2 = sr.xs[2], ys3 = sr.xs[3];
  const int64_t ds0 = sr.ys[0], ds1 = sr.ys[1], ds2 = sr.ys[2], ds3 = sr.ys[3];
  const int64_t gs0 = g4.nb[0], gs1 = g4.nb[1], gs2 = g4.nb[2], gs3 = g4.nb[3];
  OT_TEAMS(dev, ot_kteams(dev, rows), OT_DEVPTR(yp, gp, dp))
  for (int64_t r = 0; r < rows; r++) {
    const int64_t yo = ot_krow_off(r, n1, n2, ys0, ys1, ys2), go = ot_krow_off(r, n1, n2, gs0, gs1, gs2),
                  dO = ot_krow_off(r, n1, n2, ds0, ds1, ds2);
    float dot = 0.0f;
    OT_TEAM_REDUCE(+ : dot)
    for (int64_t c = 0; c < n; c++) dot += ot_kld(ydt, yp, yo + c * ys3) * ot_kld(gdt, gp, go + c * gs3);
    /* dx may alias dy: every read of the row finished in the reduction */
    OT_TEAM_FOR
    for (int64_t c = 0; c < n; c++)
      ot_kst(ddt, dp, dO + c * ds3,
             scale * ot_kld(ydt, yp, yo + c * ys3) * (ot_kld(gdt, gp, go + c * gs3) - dot));
  }
  return OT_OK;
}

ot_status ot_ref_softmax_backward(ot_kview dx, ot_kview y, ot_kview dy, float scale) {
  sm_rows sr;
  OT_TRY(smb_check(dx, y, dy, &sr));
  ot_kview g4 = ot_kview_4d(dy);
  for (int64_t r = 0; r < sr.rows; r++) {
    const int64_t yo = ot_krow_off(r, sr.n1, sr.n2, sr.xs[0], sr.xs[1], sr.xs[2]);
    const int64_t dO = ot_krow_off(r, sr.n1, sr.n2, sr.ys[0], sr.ys[1], sr.ys[2]);
    const int64_t go = ot_krow_off(r, sr.n1, sr.n2, g4.nb[0], g4.nb[1], g4.nb[2]);
    double dot = 0.0;
    for (int64_t c = 0; c < sr.n; c++)
      dot += (double)ot_kld(y.dt, y.p, yo + c * sr.xs[3]) * ot_kld(dy.dt, dy.p, go + c * g4.nb[3]);
    for (int64_t c = 0; c < sr.n; c++)
      ot_kst(dx.dt, dx.p, dO + c * sr.ys[3],
             (float)(scale * ot_kld(y.dt, y.p, yo + c * sr.xs[3]) * (ot_kld(dy.dt, dy.p, go + c * g4.nb[3]) - dot)));
  }
  return OT_OK;
}
