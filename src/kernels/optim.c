/* optim.c — SGD and AdamW updates on fp32 master weights, and gradient
 * statistics for loss scaling / clipping.
 *
 * AdamW follows torch.optim.AdamW (default foreach path, amsgrad off)
 * operation by operation, in float, with the scalars computed in double as
 * Python does:
 *   p  = p * (1 - lr*wd)
 *   m  = lerp(m, g, 1 - b1)             (m + w (g - m), w < 0.5)
 *   v  = v * b2;  v = v + (1 - b2) * g * g
 *   p  = p + (-lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * SGD follows torch.optim.SGD (dampening 0): g = g + wd * p;
 * buf = momentum * buf + g (a zeroed buffer gives PyTorch's first step
 * buf = g exactly); g = nesterov ? g + momentum * buf : buf; p = p - lr * g. */
#include <math.h>

#include "kernels/kcommon.h"
#include "kernels/optim_elem.h"
#include "kernels/train_gpu.h"

/* The 1-D operands of an update: same length, p/m/v f32, g any float,
 * copy f32/f16/bf16 or none. */
static ot_status op_check(const char *op, ot_kview p, ot_kview g, ot_kview m, ot_kview v, ot_kview copy) {
  OT_TRY(ot_kcheck(op, "p", p, 1, 1, OT_KM(OT_F32)));
  OT_TRY(ot_kcheck(op, "g", g, 1, 1, OT_KM_FLOAT));
  OT_TRY(ot_kcheck_dim(op, "p", p, 0, "g", g, 0));
  if (m.ndim) {
    OT_TRY(ot_kcheck(op, "m", m, 1, 1, OT_KM(OT_F32)));
    OT_TRY(ot_kcheck_dim(op, "p", p, 0, "m", m, 0));
  }
  if (v.ndim) {
    OT_TRY(ot_kcheck(op, "v", v, 1, 1, OT_KM(OT_F32)));
    OT_TRY(ot_kcheck_dim(op, "p", p, 0, "v", v, 0));
  }
  if (copy.ndim) {
    OT_TRY(ot_kcheck(op, "copy", copy, 1, 1, OT_KM_FLOAT));
    OT_TRY(ot_kcheck_dim(op, "p", p, 0, "copy", copy, 0));
  }
  return OT_OK;
}

typedef ot_kaw_scal aw_scal;

static ot_status aw_prep(ot_kview p, ot_kview g, ot_kview m, ot_kview v, ot_kview copy, ot_kadamw h, aw_scal *s) {
  static const char *op = "adamw";
  OT_TRY(op_check(op, p, g, m, v, copy));
  if (!m.ndim || !v.ndim) return ot_fail(OT_ERR_INVALID_ARG, "adamw: the moments m and v are required");
  if (h.t < 1) return ot_fail(OT_ERR_INVALID_ARG, "adamw: step t is %lld, counts from 1", (long long)h.t);
  if (!(h.beta1 >= 0 && h.beta1 < 1 && h.beta2 >= 0 && h.beta2 < 1))
    return ot_fail(OT_ERR_INVALID_ARG, "adamw: betas (%g, %g) must be in [0, 1)", (double)h.beta1, (double)h.beta2);
  const double bc1 = 1.0 - pow((double)h.beta1, (double)h.t), bc2 = 1.0 - pow((double)h.beta2, (double)h.t);
  *s = (aw_scal){(float)(1.0 - (double)h.lr * (double)h.weight_decay),
                 (float)(1.0 - (double)h.beta1),
                 h.beta2,
                 (float)(1.0 - (double)h.beta2),
                 (float)(-((double)h.lr / bc1)),
                 (float)sqrt(bc2),
                 h.eps,
                 h.grad_scale};
  return OT_OK;
}

OT_DECLARE_TARGET_BEGIN
static inline void aw_elem(aw_scal s, float *p, float gv, float *m, float *v) { OT_KAW_ELEM(s, *p, gv, *m, *v); }

static inline float sgd_elem(ot_ksgd h, float *p, float gv, float *buf) {
  float g = gv * h.grad_scale;
  if (h.weight_decay != 0.0f) g = g + h.weight_decay * *p;
  if (buf) {
    const float b = h.momentum * *buf + g;
    *buf = b;
    g = h.nesterov ? g + h.momentum * b : b;
  }
  *p = *p - h.lr * g;
  return *p;
}
OT_DECLARE_TARGET_END

ot_status ot_k_adamw(int dev, ot_kview p, ot_kview g, ot_kview m, ot_kview v, ot_kview copy, ot_kadamw h) {
  aw_scal s;
  OT_TRY(aw_prep(p, g, m, v, copy, h, &s));
  const int64_t n = p.ne[0], ps = p.nb[0], gs = g.nb[0], ms = m.nb[0], vs = v.nb[0], cs = copy.ndim ? copy.nb[0] : 0;
  float *pp = p.p, *mp = m.p, *vp = v.p;
  const void *gp = g.p;
  void *cp = copy.ndim ? copy.p : NULL;
  const int gdt = g.dt, cdt = copy.dt;
  OT_PARFOR(dev, OT_DEVPTR(pp, mp, vp, gp, cp) firstprivate(s))
  for (int64_t i = 0; i < n; i++) {
    aw_elem(s, pp + i * ps, ot_kld(gdt, gp, i * gs), mp + i * ms, vp + i * vs);
    if (cp) ot_kst(cdt, cp, i * cs, pp[i * ps]);
  }
  return OT_OK;
}

ot_status ot_ref_adamw(ot_kview p, ot_kview g, ot_kview m, ot_kview v, ot_kview copy, ot_kadamw h) {
  aw_scal s;
  OT_TRY(aw_prep(p, g, m, v, copy, h, &s));
  for (int64_t i = 0; i < p.ne[0]; i++) {
    float *pi = (float *)p.p + i * p.nb[0];
    aw_elem(s, pi, ot_kld(g.dt, g.p, i * g.nb[0]), (float *)m.p + i * m.nb[0], (float *)v.p + i * v.nb[0]);
    if (copy.ndim) ot_kst(copy.dt, copy.p, i * copy.nb[0], *pi);
  }
  return OT_OK;
}

/* The multi-tensor form: every tensor checked first (one failure writes
 * nothing), then the GPU kernel over the contiguous ones and ot_k_adamw for
 * the rest (strided views; every tensor on devices that run on host threads). */
ot_status ot_k_adamw_multi(int dev, int n, const ot_kview *p, const ot_kview *g, const ot_kview *m, const ot_kview *v,
                           const ot_kview *copy, ot_kadamw h) {
  if (n < 0 || (n > 0 && (!p || !g || !m || !v || !copy)))
    return ot_fail(OT_ERR_INVALID_ARG, "adamw_multi: %d tensors with a NULL operand array", n);
  aw_scal s;
  for (int i = 0; i < n; i++) OT_TRY(aw_prep(p[i], g[i], m[i], v[i], copy[i], h, &s));
  if (n == 0) return OT_OK;
  enum { CH = 64 }; /* tensors per call of the GPU path (which launches per 16) */
  float *pp[CH], *mp[CH], *vp[CH];
  const void *gp[CH];
  void *cp[CH];
  int gdt[CH], cdt[CH], k = 0;
  int64_t ne[CH];
  const int fast = ot_ktrain_fast(dev);
  for (int i = 0; i < n; i++) {
    const int unit = p[i].nb[0] == 1 && g[i].nb[0] == 1 && m[i].nb[0] == 1 && v[i].nb[0] == 1 &&
                     (!copy[i].ndim || copy[i].nb[0] == 1);
    if (!fast || !unit || p[i].ne[0] == 0) {
      OT_TRY(ot_k_adamw(dev, p[i], g[i], m[i], v[i], copy[i], h));
      continue;
    }
    pp[k] = p[i].p, mp[k] = m[i].p, vp[k] = v[i].p, gp[k] = g[i].p, gdt[k] = g[i].dt;
    cp[k] = copy[i].ndim ? copy[i].p : NULL, cdt[k] = copy[i].ndim ? copy[i].dt : OT_F32, ne[k] = p[i].ne[0];
    if (++k == CH || i == n - 1) {
      if (!ot_kadamw_multi_gpu(dev, k, pp, gp, gdt, mp, vp, cp, cdt, ne, s))
        return ot_fail(OT_ERR_DEVICE, "adamw_multi: the GPU kernel refused %d tensors", k);
      k = 0;
    }
  }
  if (k && !ot_kadamw_multi_gpu(dev, k, pp, gp, gdt, mp, vp, cp, cdt, ne, s))
    return ot_fail(OT_ERR_DEVICE, "adamw_multi: the GPU kernel refused %d tensors", k);
  return OT_OK;
}

ot_status ot_ref_adamw_multi(int n, const ot_kview *p, const ot_kview *g, const ot_kview *m, const ot_kview *v,
                             const ot_kview *copy, ot_kadamw h) {
  if (n < 0 || (n > 0 && (!p || !g || !m || !v || !copy)))
    return ot_fail(OT_ERR_INVALID_ARG, "adamw_multi: %d tensors with a NULL operand array", n);
  aw_scal s;
  for (int i = 0; i < n; i++) OT_TRY(aw_prep(p[i], g[i], m[i], v[i], copy[i], h, &s));
  for (int i = 0; i < n; i++) OT_TRY(ot_ref_adamw(p[i], g[i], m[i], v[i], copy[i], h));
  return OT_OK;
}

ot_status ot_k_sgd(int dev, ot_kview p, ot_kview g, ot_kview buf, ot_kview copy, ot_ksgd h) {
  OT_TRY(op_check("sgd", p, g, buf, ot_kview_none(), copy));
  const int64_t n = p.ne[0], ps = p.nb[0], gs = g.nb[0], bs = buf.ndim ? buf.nb[0] : 0, cs = copy.ndim ? copy.nb[0] : 0;
  float *pp = p.p, *bp = buf.ndim && h.momentum != 0.0f ? buf.p : NULL;
  const void *gp = g.p;
  void *cp = copy.ndim ? copy.p : NULL;
  const int gdt = g.dt, cdt = copy.dt;
  OT_PARFOR(dev, OT_DEVPTR(pp, bp, gp, cp) firstprivate(h))
  for (int64_t i = 0; i < n; i++) {
    const float pn = sgd_elem(h, pp + i * ps, ot_kld(gdt, gp, i * gs), bp ? bp + i * bs : NULL);
    if (cp) ot_kst(cdt, cp, i * cs, pn);
  }
  return OT_OK;
}

ot_status ot_ref_sgd(ot_kview p, ot_kview g, ot_kview buf, ot_kview copy, ot_ksgd h) {
  OT_TRY(op_check("sgd", p, g, buf, ot_kview_none(), copy));
  for (int64_t i = 0; i < p.ne[0]; i++) {
    float *bi = buf.ndim && h.momentum != 0.0f ? (float *)buf.p + i * buf.nb[0] : NULL;
    const float pn = sgd_elem(h, (float *)p.p + i * p.nb[0], ot_kld(g.dt, g.p, i * g.nb[0]), bi);
    if (copy.ndim) ot_kst(copy.dt, copy.p, i * copy.nb[0], pn);
  }
  return OT_OK;
}

/* ---- gradient statistics ------------------------------------------------------
 * One team (a deterministic reduction without scratch memory; a gradient is
 * read once, so one team's bandwidth bounds it). */
static ot_status gs_check(ot_kview stats, ot_kview g) {
  OT_TRY(ot_kcheck("grad_stats", "stats", stats, 1, 1, OT_KM(OT_F32)));
  OT_TRY(ot_kcheck("grad_stats", "g", g, 1, 1, OT_KM_FLOAT));
  if (stats.ne[0] != 2)
    return ot_fail(OT_ERR_SHAPE, "grad_stats: stats %s must have 2 elements (sum of squares, non-finite count)",
                   ot_kshape_str(stats));
  return OT_OK;
}

ot_status ot_k_grad_stats(int dev, ot_kview stats, ot_kview g) {
  OT_TRY(gs_check(stats, g));
  const int64_t n = g.ne[0], gs = g.nb[0], ss = stats.nb[0];
  const void *gp = g.p;
  float *sp = stats.p;
  const int gdt = g.dt;
  OT_TEAMS(dev, 1, OT_DEVPTR(gp, sp))
  for (int i = 0; i < 1; i++) {
    double sq = 0.0;
    int64_t bad = 0;
    OT_TEAM_REDUCE(+ : sq, bad)
    for (int64_t j = 0; j < n; j++) {
      const float x = ot_kld(gdt, gp, j * gs);
      if (isfinite(x)) sq += (double)x * x;
      else bad++;
    }
    sp[0] = (float)(sp[0] + sq);
    sp[ss] = sp[ss] + (float)bad;
  }
  return OT_OK;
}

ot_status ot_ref_grad_stats(ot_kview stats, ot_kview g) {
  OT_TRY(gs_check(stats, g));
  double sq = 0.0;
  int64_t bad = 0;
  for (int64_t j = 0; j < g.ne[0]; j++) {
    const float x = ot_kld(g.dt, g.p, j * g.nb[0]);
    if (isfinite(x)) sq += (double)x * x;
    else bad++;
  }
  float *sp = stats.p;
  sp[0] = (float)(sp[0] + sq);
  sp[stats.nb[0]] += (float)bad;
  return OT_OK;
}
