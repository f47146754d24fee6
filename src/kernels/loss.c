/* loss.c — cross-entropy over the vocabulary with its gradient, fused.
 *
 * PyTorch semantics (F.cross_entropy, reduction "mean", ignore_index -100):
 * the mean runs over the rows whose target is not ignored. Three target
 * regions, all deterministic (no atomics, fixed reduction shapes):
 *   1. one team counts the rows that are not ignored, into loss[0];
 *   2. per row: log-sum-exp, losses[r], dlogits row (reads the count);
 *   3. one team: loss[0] = sum(losses) / count.
 * Kernels get no scratch memory, so the per-row losses are an output (llm.c
 * keeps them too: they are the per-token losses). On a GPU, pass 2 is
 * loss_gpu.c's block-per-row kernel for rows of unit column stride. */
#include "kernels/kcommon.h"
#include "kernels/train_gpu.h"

#define CE_IGNORE (-100)

typedef struct ce_geom {
  int64_t rows, n, l0, l1, d0, d1, t0, s0;
} ce_geom;

static ot_status ce_check(ot_kview loss, ot_kview losses, ot_kview dlogits, ot_kview logits, ot_kview targets,
                          ce_geom *g) {
  static const char *op = "cross_entropy";
  OT_TRY(ot_kcheck(op, "logits", logits, 2, 2, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "targets", targets, 1, 1, OT_KM(OT_I32)));
  OT_TRY(ot_kcheck(op, "loss", loss, 1, 1, OT_KM(OT_F32)));
  OT_TRY(ot_kcheck(op, "losses", losses, 1, 1, OT_KM(OT_F32)));
  OT_TRY(ot_kcheck_dim(op, "logits", logits, 0, "targets", targets, 0));
  OT_TRY(ot_kcheck_dim(op, "logits", logits, 0, "losses", losses, 0));
  if (loss.ne[0] != 1) return ot_fail(OT_ERR_SHAPE, "cross_entropy: loss %s must have 1 element", ot_kshape_str(loss));
  if (dlogits.ndim) {
    OT_TRY(ot_kcheck(op, "dlogits", dlogits, 2, 2, OT_KM_FLOAT));
    OT_TRY(ot_kcheck_dim(op, "logits", logits, 0, "dlogits", dlogits, 0));
    OT_TRY(ot_kcheck_dim(op, "logits", logits, 1, "dlogits", dlogits, 1));
  }
  *g = (ce_geom){logits.ne[0], logits.ne[1], logits.nb[0], logits.nb[1], dlogits.ndim ? dlogits.nb[0] : 0,
                 dlogits.ndim ? dlogits.nb[1] : 0, targets.nb[0], losses.nb[0]};
  return OT_OK;
}

OT_DECLARE_TARGET_BEGIN
/* One row: losses = lse - l[t] (0 if ignored, NaN for a target outside the
 * vocabulary: PyTorch raises there); dlogits = gs * (softmax - onehot). */
static void ce_row(int ldt, const void *lp, int64_t lo, int64_t l1, int64_t n, int32_t t, float *loss_r, int ddt,
                   void *dp, int64_t dO, int64_t d1, float gs) {
  float mx = -INFINITY, sum = 0.0f;
  OT_TEAM_REDUCE(max : mx)
  for (int64_t c = 0; c < n; c++) mx = fmaxf(mx, ot_kld(ldt, lp, lo + c * l1));
  OT_TEAM_REDUCE(+ : sum)
  for (int64_t c = 0; c < n; c++) sum += expf(ot_kld(ldt, lp, lo + c * l1) - mx);
  const float lse = mx + logf(sum);
  const int valid = t >= 0 && t < n;
  /* read before dlogits (which may be logits) is written */
  *loss_r = valid ? lse - ot_kld(ldt, lp, lo + t * l1) : t == CE_IGNORE ? 0.0f : NAN;
  if (!dp) return;
  OT_TEAM_FOR
  for (int64_t c = 0; c < n; c++) {
    const float p = expf(ot_kld(ldt, lp, lo + c * l1) - lse);
    ot_kst(ddt, dp, dO + c * d1, valid ? gs * (p - (c == t ? 1.0f : 0.0f)) : 0.0f);
  }
}
OT_DECLARE_TARGET_END

ot_status ot_k_cross_entropy(int dev, ot_kview loss, ot_kview losses, ot_kview dlogits, ot_kview logits,
                             ot_kview targets, float grad_scale) {
  ce_geom g;
  OT_TRY(ce_check(loss, losses, dlogits, logits, targets, &g));
  const int64_t rows = g.rows, n = g.n, l0 = g.l0, l1 = g.l1, d0 = g.d0, d1 = g.d1, t0 = g.t0, s0 = g.s0;
  const void *lp = logits.p, *tp = targets.p;
  void *dp = dlogits.ndim ? dlogits.p : NULL, *sp = losses.p;
  float *fp = loss.p;
  const int ldt = logits.dt, ddt = dlogits.dt;
  if (rows == 0 || n == 0) {
    OT_PARFOR(dev, OT_DEVPTR(fp))
    for (int i = 0; i < 1; i++) fp[i] = rows ? NAN : 0.0f;
    return OT_OK;
  }
  OT_TEAMS(dev, 1, OT_DEVPTR(fp, tp))
  for (int i = 0; i < 1; i++) {
    int64_t cnt = 0;
    OT_TEAM_REDUCE(+ : cnt)
    for (int64_t r = 0; r < rows; r++) cnt += ((const int32_t *)tp)[r * t0] != CE_IGNORE;
    fp[0] = (float)cnt;
  }
  const ot_kce_gpu_args ga = {rows, n, l0, d0, t0, s0, ldt, ddt, lp, tp, dp, sp, fp, grad_scale};
  const int on_gpu = l1 == 1 && (!dp || d1 == 1) && ot_kce_rows_gpu(dev, &ga);
  if (!on_gpu)
    OT_KROWS(dev, rows, r, OT_DEVPTR(lp, tp, dp, sp, fp),
           ce_row(ldt, lp, r * l0, l1, n, ((const int32_t *)tp)[r * t0], (float *)sp + r * s0, ddt, dp, r * d0, d1,
                  fp[0] > 0.0f ? grad_scale / fp[0] : 0.0f));
  OT_TEAMS(dev, 1, OT_DEVPTR(fp, sp))
  for (int i = 0; i < 1; i++) {
    double sum = 0.0;
    OT_TEAM_REDUCE(+ : sum)
    for (int64_t r = 0; r < rows; r++) sum += ((const float *)sp)[r * s0];
    fp[0] = fp[0] > 0.0f ? (float)(sum / fp[0]) : 0.0f;
  }
  return OT_OK;
}

ot_status ot_ref_cross_entropy(ot_kview loss, ot_kview losses, ot_kview dlogits, ot_kview logits, ot_kview targets,
                               float grad_scale) {
  ce_geom g;
  OT_TRY(ce_check(loss, losses, dlogits, logits, targets, &g));
  int64_t cnt = 0;
  for (int64_t r = 0; r < g.rows; r++) cnt += ((const int32_t *)targets.p)[r * g.t0] != CE_IGNORE;
  double sum = 0.0;
  for (int64_t r = 0; r < g.rows; r++) {
    const int32_t t = ((const int32_t *)targets.p)[r * g.t0];
    double mx = -INFINITY, se = 0.0;
    for (int64_t c = 0; c < g.n; c++) mx = fmax(mx, ot_kld(logits.dt, logits.p, r * g.l0 + c * g.l1));
    for (int64_t c = 0; c < g.n; c++) se += exp(ot_kld(logits.dt, logits.p, r * g.l0 + c * g.l1) - mx);
    const double lse = mx + log(se);
    const int valid = t >= 0 && t < g.n;
    const float lr = valid ? (float)(lse - ot_kld(logits.dt, logits.p, r * g.l0 + t * g.l1)) : t == CE_IGNORE ? 0.0f : NAN;
    ((float *)losses.p)[r * g.s0] = lr;
    sum += lr;
    if (!dlogits.ndim) continue;
    const double gs = cnt ? (double)grad_scale / (double)cnt : 0.0;
    for (int64_t c = 0; c < g.n; c++) {
      const double p = exp(ot_kld(logits.dt, logits.p, r * g.l0 + c * g.l1) - lse);
      ot_kst(dlogits.dt, dlogits.p, r * g.d0 + c * g.d1, valid ? (float)(gs * (p - (c == t))) : 0.0f);
    }
  }
  ((float *)loss.p)[0] = g.n == 0 && g.rows ? NAN : cnt ? (float)(sum / (double)cnt) : 0.0f;
  return OT_OK;
}
