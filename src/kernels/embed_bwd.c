/* embed_bwd.c — embedding and position-embedding backward.
 *
 * Deterministic without float atomics: each thread owns whole output columns
 * (embedding: one column c of a range of the table's rows, visiting the rows
 * of dout in order, so repeated ids add up in a fixed order; positions: one
 * (t, c), visiting the batch in order). */
#include "kernels/kcommon.h"

static ot_status eb_check(ot_kview dtable, ot_kview dout, ot_kview ids) {
  static const char *op = "embedding_backward";
  OT_TRY(ot_kcheck(op, "dtable", dtable, 2, 2, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "dout", dout, 2, 2, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "ids", ids, 1, 1, OT_KM(OT_I32)));
  OT_TRY(ot_kcheck_dim(op, "dout", dout, 0, "ids", ids, 0));
  return ot_kcheck_dim(op, "dout", dout, 1, "dtable", dtable, 1);
}

ot_status ot_k_embedding_backward(int dev, ot_kview dtable, ot_kview dout, ot_kview ids) {
  OT_TRY(eb_check(dtable, dout, ids));
  const int64_t n = dout.ne[0], d = dout.ne[1], vocab = dtable.ne[0];
  if (n == 0 || d == 0) return OT_OK;
  void *tp = dtable.p;
  const void *gp = dout.p, *ip = ids.p;
  const int tdt = dtable.dt, gdt = dout.dt;
  const int64_t t0 = dtable.nb[0], t1 = dtable.nb[1], g0 = dout.nb[0], g1 = dout.nb[1], i0 = ids.nb[0];
  /* Thread (j, c) owns column c of the ids in vocabulary range j of R: it
   * reads every id (the same for a whole warp) and adds only its range's
   * rows, in row order, so each element still sums in row order whatever R
   * is. With one range a thread per column walked all 8192 rows of a GPT-2
   * batch one dependent add after another: 4.3 ms on the H200; a GPU gets
   * 64 ranges (64 x d threads), a host core one (no re-reading of ids). */
  const int64_t R = ot_kfast_gpu(dev) ? (vocab < 64 ? vocab : 64) : 1;
  OT_PARFOR2(dev, OT_DEVPTR(tp, gp, ip))
  for (int64_t j = 0; j < R; j++)
    for (int64_t c = 0; c < d; c++)
      for (int64_t r = 0; r < n; r++) {
        const int64_t id = ((const int32_t *)ip)[r * i0];
        if (id < 0 || id >= vocab) continue; /* the forward gave a zero row: no gradient */
        if (R > 1 && id * R / vocab != j) continue;
        ot_kst(tdt, tp, id * t0 + c * t1, ot_kld(tdt, tp, id * t0 + c * t1) + ot_kld(gdt, gp, r * g0 + c * g1));
      }
  return OT_OK;
}

ot_status ot_ref_embedding_backward(ot_kview dtable, ot_kview dout, ot_kview ids) {
  OT_TRY(eb_check(dtable, dout, ids));
  for (int64_t r = 0; r < dout.ne[0]; r++) {
    const int64_t id = ((const int32_t *)ids.p)[r * ids.nb[0]];
    if (id < 0 || id >= dtable.ne[0]) continue;
    for (int64_t c = 0; c < dout.ne[1]; c++) {
      const int64_t to = id * dtable.nb[0] + c * dtable.nb[1];
      ot_kst(dtable.dt, dtable.p, to,
             ot_kld(dtable.dt, dtable.p, to) + ot_kld(dout.dt, dout.p, r * dout.nb[0] + c * dout.nb[1]));
    }
  }
  return OT_OK;
}

/* dout [T, d] or [B, T, d] as (batch, T, d) strides. */
typedef struct pb_geom {
  int64_t B, T, d, s0, s1, s2;
} pb_geom;

static ot_status pb_check(ot_kview dwpe, ot_kview dout, int64_t pos, pb_geom *g) {
  static const char *op = "positions_backward";
  OT_TRY(ot_kcheck(op, "dwpe", dwpe, 2, 2, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "dout", dout, 2, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck_dim(op, "dout", dout, -1, "dwpe", dwpe, 1));
  const int three = dout.ndim == 3;
  *g = (pb_geom){three ? dout.ne[0] : 1, dout.ne[three], dout.ne[three + 1], three ? dout.nb[0] : 0,
                 dout.nb[three], dout.nb[three + 1]};
  if (pos < 0 || pos + g->T > dwpe.ne[0])
    return ot_fail(OT_ERR_SHAPE, "positions_backward: positions [%lld, %lld) are outside dwpe %s", (long long)pos,
                   (long long)(pos + g->T), ot_kshape_str(dwpe));
  return OT_OK;
}

ot_status ot_k_positions_backward(int dev, ot_kview dwpe, ot_kview dout, int64_t pos) {
  pb_geom g;
  OT_TRY(pb_check(dwpe, dout, pos, &g));
  const int64_t B = g.B, T = g.T, d = g.d, s0 = g.s0, s1 = g.s1, s2 = g.s2, w0 = dwpe.nb[0], w1 = dwpe.nb[1];
  if (T == 0 || d == 0) return OT_OK;
  void *wp = dwpe.p;
  const void *gp = dout.p;
  const int wdt = dwpe.dt, gdt = dout.dt;
  OT_PARFOR2(dev, OT_DEVPTR(wp, gp))
  for (int64_t t = 0; t < T; t++)
    for (int64_t c = 0; c < d; c++) {
      float acc = 0.0f;
      for (int64_t b = 0; b < B; b++) acc += ot_kld(gdt, gp, b * s0 + t * s1 + c * s2);
      ot_kst(wdt, wp, (pos + t) * w0 + c * w1, ot_kld(wdt, wp, (pos + t) * w0 + c * w1) + acc);
    }
  return OT_OK;
}

ot_status ot_ref_positions_backward(ot_kview dwpe, ot_kview dout, int64_t pos) {
  pb_geom g;
  OT_TRY(pb_check(dwpe, dout, pos, &g));
  for (int64_t t = 0; t < g.T; t++)
    for (int64_t c = 0; c < g.d; c++) {
      const int64_t wo = (pos + t) * dwpe.nb[0] + c * dwpe.nb[1];
      double acc = ot_kld(dwpe.dt, dwpe.p, wo);
      for (int64_t b = 0; b < g.B; b++) acc += ot_kld(dout.dt, dout.p, b * g.s0 + t * g.s1 + c * g.s2);
      ot_kst(dwpe.dt, dwpe.p, wo, (float)acc);
    }
  return OT_OK;
}
