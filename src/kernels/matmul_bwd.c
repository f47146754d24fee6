/* matmul_bwd.c — backward of c = a @ op(b), and of a bias add, on top of
 * ot_k_matmul with transposed views (no new GEMM code):
 *   da  = dc @ op(b)^T                (overwrite)
 *   db += a^T @ dc        (op = id)    db += dc^T @ a   (trans_b)
 * A 2-D b shared by a batched a (a weight) gets the sum over the batch:
 * one accumulating matmul per batch entry, in batch order (deterministic). */
#include "kernels/colsum.h"
#include "kernels/kcommon.h"

typedef ot_status (*mm_fn)(int dev, ot_kview c, ot_kview a, ot_kview b, int trans_b, int accumulate);

static ot_status mm_ref_dev(int dev, ot_kview c, ot_kview a, ot_kview b, int trans_b, int accumulate) {
  (void)dev;
  return ot_ref_matmul(c, a, b, trans_b, accumulate);
}

/* Entry i of a 3-D view's batch as a 2-D view. */
static ot_kview batch_entry(ot_kview v, int64_t i) {
  ot_kview e = v;
  e.p = (char *)v.p + (size_t)(i * v.nb[0]) * ot_dtype_bytes(v.dt, 1);
  e.ndim = 2;
  e.ne[0] = v.ne[1];
  e.ne[1] = v.ne[2];
  e.nb[0] = v.nb[1];
  e.nb[1] = v.nb[2];
  return e;
}

static ot_status mmb_run(mm_fn mm, int dev, ot_kview da, ot_kview db, ot_kview dc, ot_kview a, ot_kview b,
                         int trans_b) {
  if (da.ndim) OT_TRY(mm(dev, da, dc, b, !trans_b, 0));
  if (!db.ndim) return OT_OK;
  if (db.ndim == 3 || dc.ndim == 2) /* per-batch (or unbatched) weight gradient */
    return trans_b ? mm(dev, db, ot_kview_t(dc), a, 0, 1) : mm(dev, db, ot_kview_t(a), dc, 0, 1);
  OT_TRY(ot_kcheck("matmul_backward", "dc", dc, 3, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck("matmul_backward", "a", a, 2, 3, OT_KM_FLOAT));
  if (a.ndim == 3 && a.ne[0] != dc.ne[0])
    return ot_fail(OT_ERR_SHAPE, "matmul_backward: a %s and dc %s disagree in batch", ot_kshape_str(a),
                   ot_kshape_str(dc));
  for (int64_t i = 0; i < dc.ne[0]; i++) {
    const ot_kview ai = a.ndim == 3 ? batch_entry(a, i) : a, ci = batch_entry(dc, i);
    OT_TRY(trans_b ? mm(dev, db, ot_kview_t(ci), ai, 0, 1) : mm(dev, db, ot_kview_t(ai), ci, 0, 1));
  }
  return OT_OK;
}

ot_status ot_k_matmul_backward(int dev, ot_kview da, ot_kview db, ot_kview dc, ot_kview a, ot_kview b, int trans_b) {
  return mmb_run(ot_k_matmul, dev, da, db, dc, a, b, trans_b);
}

ot_status ot_ref_matmul_backward(ot_kview da, ot_kview db, ot_kview dc, ot_kview a, ot_kview b, int trans_b) {
  return mmb_run(mm_ref_dev, 0, da, db, dc, a, b, trans_b);
}

/* ---- bias backward: dbias[j] += sum over rows of dy[.., j] ----------------------
 * One thread per column, rows in order: deterministic, coalesced across
 * threads on a GPU. */
static ot_status bb_check(ot_kview dbias, ot_kview dy) {
  OT_TRY(ot_kcheck("bias_backward", "dbias", dbias, 1, 1, OT_KM_FLOAT));
  OT_TRY(ot_kcheck("bias_backward", "dy", dy, 1, 4, OT_KM_FLOAT));
  return ot_kcheck_dim("bias_backward", "dbias", dbias, 0, "dy", dy, -1);
}

ot_status ot_k_bias_backward(int dev, ot_kview dbias, ot_kview dy) {
  OT_TRY(bb_check(dbias, dy));
  const ot_kview g = ot_kview_4d(dy);
  const int64_t n = dbias.ne[0], rows = g.ne[0] * g.ne[1] * g.ne[2], n1 = g.ne[1], n2 = g.ne[2];
  const int64_t s0 = g.nb[0], s1 = g.nb[1], s2 = g.nb[2], s3 = g.nb[3], bs = dbias.nb[0];
  if (n == 0) return OT_OK;
  const void *gp = dy.p;
  void *bp = dbias.p;
  const int gdt = dy.dt, bdt = dbias.dt;
  const ot_kcs_view gv = {gdt, gp, s0, s1, s2, s3};
  return ot_kcolsum(dev, rows, n, n1, n2, gv, gv, 0, NULL, 0, bdt, bp, bs);
}

ot_status ot_ref_bias_backward(ot_kview dbias, ot_kview dy) {
  OT_TRY(bb_check(dbias, dy));
  const ot_kview g = ot_kview_4d(dy);
  const int64_t rows = g.ne[0] * g.ne[1] * g.ne[2];
  for (int64_t j = 0; j < dbias.ne[0]; j++) {
    double acc = ot_kld(dbias.dt, dbias.p, j * dbias.nb[0]);
    for (int64_t r = 0; r < rows; r++)
      acc += ot_kld(dy.dt, dy.p, ot_krow_off(r, g.ne[1], g.ne[2], g.nb[0], g.nb[1], g.nb[2]) + j * g.nb[3]);
    ot_kst(dbias.dt, dbias.p, j * dbias.nb[0], (float)acc);
  }
  return OT_OK;
}
