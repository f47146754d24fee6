/* norm_bwd.c — LayerNorm and RMSNorm backward.
 *
 * With xhat = (x - mean) * rstd (RMSNorm: mean = 0) and g = w * dy:
 *   dx  = rstd * (g - mean(g) - xhat * mean(g * xhat))   (RMSNorm: no mean(g))
 *   dw += sum over rows of dy * xhat,   db += sum over rows of dy.
 * The row statistics are recomputed from x (the forward keeps none). The
 * parameter gradients need them per row while reducing over rows, and kernels
 * get no scratch memory, so dx holds xhat first: pass 1 (per row) writes
 * xhat into dx, pass 2 (one thread per column, rows in order: deterministic,
 * no atomics; on a GPU colsum_gpu.c's kernel) accumulates dw and db, pass 3
 * (per row) overwrites dx. A bf16 dx therefore rounds the xhat that dw
 * sees; use an f32 dx for exact dw. */
#include "kernels/colsum.h"
#include "kernels/kcommon.h"
#include "kernels/train_gpu.h"
#include "kernels/warp_gpu.h"

typedef struct nb_geom {
  int64_t rows, d, n1, n2;
  int64_t xs[4], gs[4], ds[4];
} nb_geom;

static int same_shape(ot_kview a, ot_kview b) {
  int same = a.ndim == b.ndim;
  for (int i = 0; same && i < a.ndim; i++) same = a.ne[i] == b.ne[i];
  return same;
}

static ot_status nb_check(const char *op, int layer, ot_kview dx, ot_kview dw, ot_kview db, ot_kview dy, ot_kview x,
                          ot_kview w, nb_geom *g) {
  OT_TRY(ot_kcheck(op, "x", x, 1, 4, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "dy", dy, 1, 4, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "dx", dx, 1, 4, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "w", w, 1, 1, OT_KM_FLOAT));
  if (!same_shape(x, dy) || !same_shape(x, dx))
    return ot_fail(OT_ERR_SHAPE, "%s: x %s, dy %s and dx %s must have one shape", op, ot_kshape_str(x),
                   ot_kshape_str(dy), ot_kshape_str(dx));
  OT_TRY(ot_kcheck_dim(op, "x", x, -1, "w", w, 0));
  if (dw.ndim) {
    OT_TRY(ot_kcheck(op, "dw", dw, 1, 1, OT_KM_FLOAT));
    OT_TRY(ot_kcheck_dim(op, "x", x, -1, "dw", dw, 0));
  }
  if (layer && db.ndim) {
    OT_TRY(ot_kcheck(op, "db", db, 1, 1, OT_KM_FLOAT));
    OT_TRY(ot_kcheck_dim(op, "x", x, -1, "db", db, 0));
  }
  ot_kview x4 = ot_kview_4d(x), g4 = ot_kview_4d(dy), d4 = ot_kview_4d(dx);
  g->d = x4.ne[3];
  g->n1 = x4.ne[1];
  g->n2 = x4.ne[2];
  g->rows = x4.ne[0] * x4.ne[1] * x4.ne[2];
  for (int i = 0; i < 4; i++) {
    g->xs[i] = x4.nb[i];
    g->gs[i] = g4.nb[i];
    g->ds[i] = d4.nb[i];
  }
  return OT_OK;
}

OT_DECLARE_TARGET_BEGIN
/* One row. write_dx 0: dx = xhat; 1: dx = the input gradient. */
static void nb_row(int layer, int write_dx, float eps, int64_t d, int xdt, const void *xp, int64_t xo, int64_t xs,
                   int gdt, const void *gp, int64_t go, int64_t gs, int wdt, const void *wp, int64_t ws, int ddt,
                   void *dp, int64_t dO, int64_t ds) {
  float mean = 0.0f, ss = 0.0f;
  if (layer) {
    float s = 0.0f;
    OT_TEAM_REDUCE(+ : s)
    for (int64_t c = 0; c < d; c++) s += ot_kld(xdt, xp, xo + c * xs);
    mean = s / (float)d;
  }
  OT_TEAM_REDUCE(+ : ss)
  for (int64_t c = 0; c < d; c++) {
    const float v = ot_kld(xdt, xp, xo + c * xs) - mean;
    ss += v * v;
  }
  const float rs = 1.0f / sqrtf(ss / (float)d + eps);
  if (!write_dx) {
    OT_TEAM_FOR
    for (int64_t c = 0; c < d; c++) ot_kst(ddt, dp, dO + c * ds, (ot_kld(xdt, xp, xo + c * xs) - mean) * rs);
    return;
  }
  float sg = 0.0f, sgx = 0.0f;
  OT_TEAM_REDUCE(+ : sg, sgx)
  for (int64_t c = 0; c < d; c++) {
    const float gv = ot_kld(wdt, wp, c * ws) * ot_kld(gdt, gp, go + c * gs);
    sg += gv;
    sgx += gv * (ot_kld(xdt, xp, xo + c * xs) - mean) * rs;
  }
  const float mg = layer ? sg / (float)d : 0.0f, mgx = sgx / (float)d;
  /* dx may not alias x or dy: the reads below come after pass 1 wrote xhat */
  OT_TEAM_FOR
  for (int64_t c = 0; c < d; c++) {
    const float xh = (ot_kld(xdt, xp, xo + c * xs) - mean) * rs;
    ot_kst(ddt, dp, dO + c * ds, rs * (ot_kld(wdt, wp, c * ws) * ot_kld(gdt, gp, go + c * gs) - mg - xh * mgx));
  }
}
OT_DECLARE_TARGET_END

static ot_status nb_run(int dev, int layer, ot_kview dx, ot_kview dw, ot_kview db, ot_kview dy, ot_kview x, ot_kview w,
                        float eps) {
  const char *op = layer ? "layernorm_backward" : "rmsnorm_backward";
  nb_geom g;
  OT_TRY(nb_check(op, layer, dx, dw, db, dy, x, w, &g));
  if (g.rows == 0 || g.d == 0) return OT_OK;
  const void *xp = x.p, *gp = dy.p, *wp = w.p;
  void *dp = dx.p, *dwp = dw.ndim ? dw.p : NULL, *dbp = layer && db.ndim ? db.p : NULL;
  const int xdt = x.dt, gdt = dy.dt, wdt = w.dt, ddt = dx.dt, dwdt = dw.dt, dbdt = db.dt;
  const int64_t rows = g.rows, d = g.d, n1 = g.n1, n2 = g.n2, ws = w.nb[0], dws = dw.ndim ? dw.nb[0] : 0,
                dbs = dbp ? db.nb[0] : 0;
  const int64_t x0 = g.xs[0], x1 = g.xs[1], x2 = g.xs[2], x3 = g.xs[3], g0 = g.gs[0], g1 = g.gs[1], g2 = g.gs[2],
                g3 = g.gs[3], d0 = g.ds[0], d1 = g.ds[1], d2 = g.ds[2], d3 = g.ds[3];
  /* GPU: the row passes as a warp per row (any mix of f32/f16/bf16; the
   * bf16/f16 ones only with the fast training paths on) */
  const int all_f32 = xdt == OT_F32 && gdt == OT_F32 && wdt == OT_F32 && ddt == OT_F32;
  const int fast = ot_kfast_gpu(dev) && (all_f32 || ot_ktrain_fast(dev));
  ot_knorm_bwd_gpu_args ga = {layer, 0, eps, rows, d, n1, n2, xp, gp, wp, ws, dp, xdt, gdt, wdt, ddt,
                              {x0, x1, x2, x3}, {g0, g1, g2, g3}, {d0, d1, d2, d3}};
  if (dwp || dbp) {
    if (fast) {
      if (!(ot_ktrain_fast(dev) && ot_knorm_bwd8_gpu(dev, &ga))) ot_knorm_bwd_gpu(dev, &ga);
    } else
      OT_KROWS(dev, rows, r, OT_DEVPTR(xp, gp, wp, dp),
               nb_row(layer, 0, eps, d, xdt, xp, ot_krow_off(r, n1, n2, x0, x1, x2), x3, gdt, gp,
                      ot_krow_off(r, n1, n2, g0, g1, g2), g3, wdt, wp, ws, ddt, dp, ot_krow_off(r, n1, n2, d0, d1, d2),
                      d3));
    /* dw += sum_r dy * xhat (xhat staged in dx), db += sum_r dy */
    const ot_kcs_view gv = {gdt, gp, g0, g1, g2, g3}, xh = {ddt, dp, d0, d1, d2, d3};
    OT_TRY(ot_kcolsum(dev, rows, d, n1, n2, gv, xh, dwdt, dwp, dws, dbdt, dbp, dbs));
  }
  if (fast) {
    ga.write_dx = 1;
    if (!(ot_ktrain_fast(dev) && ot_knorm_bwd8_gpu(dev, &ga))) ot_knorm_bwd_gpu(dev, &ga);
    return OT_OK;
  }
  OT_KROWS(dev, rows, r, OT_DEVPTR(xp, gp, wp, dp),
           nb_row(layer, 1, eps, d, xdt, xp, ot_krow_off(r, n1, n2, x0, x1, x2), x3, gdt, gp,
                  ot_krow_off(r, n1, n2, g0, g1, g2), g3, wdt, wp, ws, ddt, dp, ot_krow_off(r, n1, n2, d0, d1, d2), d3));
  return OT_OK;
}

/* The reference: the same formulas in double, straight from x (no xhat
 * staged in dx). */
static ot_status nb_ref(int layer, ot_kview dx, ot_kview dw, ot_kview db, ot_kview dy, ot_kview x, ot_kview w,
                        float eps) {
  nb_geom g;
  OT_TRY(nb_check(layer ? "layernorm_backward" : "rmsnorm_backward", layer, dx, dw, db, dy, x, w, &g));
  for (int64_t r = 0; r < g.rows; r++) {
    const int64_t xo = ot_krow_off(r, g.n1, g.n2, g.xs[0], g.xs[1], g.xs[2]),
                  go = ot_krow_off(r, g.n1, g.n2, g.gs[0], g.gs[1], g.gs[2]),
                  dO = ot_krow_off(r, g.n1, g.n2, g.ds[0], g.ds[1], g.ds[2]);
#define XV(c) ((double)ot_kld(x.dt, x.p, xo + (c) * g.xs[3]))
#define GV(c) ((double)ot_kld(dy.dt, dy.p, go + (c) * g.gs[3]))
#define WV(c) ((double)ot_kld(w.dt, w.p, (c) * w.nb[0]))
    double mean = 0, ss = 0, sg = 0, sgx = 0;
    if (layer) {
      for (int64_t c = 0; c < g.d; c++) mean += XV(c);
      mean /= (double)g.d;
    }
    for (int64_t c = 0; c < g.d; c++) ss += (XV(c) - mean) * (XV(c) - mean);
    const double rs = 1.0 / sqrt(ss / (double)g.d + eps);
    for (int64_t c = 0; c < g.d; c++) {
      sg += WV(c) * GV(c);
      sgx += WV(c) * GV(c) * (XV(c) - mean) * rs;
    }
    const double mg = layer ? sg / (double)g.d : 0, mgx = sgx / (double)g.d;
    for (int64_t c = 0; c < g.d; c++) {
      const double xh = (XV(c) - mean) * rs;
      if (dw.ndim) ot_kst(dw.dt, dw.p, c * dw.nb[0], (float)(ot_kld(dw.dt, dw.p, c * dw.nb[0]) + GV(c) * xh));
      if (layer && db.ndim) ot_kst(db.dt, db.p, c * db.nb[0], (float)(ot_kld(db.dt, db.p, c * db.nb[0]) + GV(c)));
      ot_kst(dx.dt, dx.p, dO + c * g.ds[3], (float)(rs * (WV(c) * GV(c) - mg - xh * mgx)));
    }
#undef XV
#undef GV
#undef WV
  }
  return OT_OK;
}

ot_status ot_k_layernorm_backward(int dev, ot_kview dx, ot_kview dw, ot_kview db, ot_kview dy, ot_kview x, ot_kview w,
                                  float eps) {
  return nb_run(dev, 1, dx, dw, db, dy, x, w, eps);
}
ot_status ot_k_rmsnorm_backward(int dev, ot_kview dx, ot_kview dw, ot_kview dy, ot_kview x, ot_kview w, float eps) {
  return nb_run(dev, 0, dx, dw, ot_kview_none(), dy, x, w, eps);
}
ot_status ot_ref_layernorm_backward(ot_kview dx, ot_kview dw, ot_kview db, ot_kview dy, ot_kview x, ot_kview w,
                                    float eps) {
  return nb_ref(1, dx, dw, db, dy, x, w, eps);
}
ot_status ot_ref_rmsnorm_backward(ot_kview dx, ot_kview dw, ot_kview dy, ot_kview x, ot_kview w, float eps) {
  return nb_ref(0, dx, dw, ot_kview_none(), dy, x, w, eps);
}
