/* attention_train.c — causal attention of training (no KV cache) over one
 * sequence or a batch of them, forward and backward: the checks, the choice
 * between the tiled GPU kernels (attention_train_gpu.c) and the portable
 * per-sequence kernels (attention.c, attention_bwd.c), and the references.
 *
 * Views are 3-D [T, heads, hd] or 4-D [B, T, heads, hd] (any strides); ws
 * [T, H, 2] / [B, T, H, 2] f32 holds per query row {log-sum-exp, D}. The
 * portable backward recomputes both statistics itself (it does not need
 * out or the forward's log-sum-exp); the GPU backward reads the
 * log-sum-exp the forward left and computes D from out. */
#include <stdlib.h>

#include "kernels/attention_train_gpu.h"
#include "kernels/kcommon.h"

typedef struct atr_geom {
  ot_kview q, k, v, o, g, dq, dk, dv, ws; /* as 4-D views */
  int64_t B, T, H, KV, hd;
  int has_ws;
} atr_geom;

static ot_status atr_view(const char *op, const char *name, ot_kview v, unsigned mask, ot_kview *v4) {
  OT_TRY(ot_kcheck(op, name, v, 3, 4, mask));
  *v4 = ot_kview_4d(v);
  return OT_OK;
}

static ot_status atr_same(const char *op, const char *na, ot_kview a, const char *nb, ot_kview b, int upto) {
  for (int d = 0; d < upto; d++) OT_TRY(ot_kcheck_dim(op, na, a, d, nb, b, d));
  return OT_OK;
}

/* q, k, v (and out) agree: q [B, T, H, hd], k, v [B, T, KV, hd], H % KV == 0; ws [B, T, H, 2] if given. */
static ot_status atr_qkv(const char *op, ot_kview q, ot_kview k, ot_kview v, ot_kview ws, atr_geom *g) {
  OT_TRY(atr_view(op, "q", q, OT_KM_FLOAT, &g->q));
  OT_TRY(atr_view(op, "k", k, OT_KM_FLOAT, &g->k));
  OT_TRY(atr_view(op, "v", v, OT_KM_FLOAT, &g->v));
  OT_TRY(atr_same(op, "k", g->k, "v", g->v, 4));
  OT_TRY(atr_same(op, "q", g->q, "k", g->k, 2));
  OT_TRY(ot_kcheck_dim(op, "q", g->q, 3, "k", g->k, 3));
  g->B = g->q.ne[0], g->T = g->q.ne[1], g->H = g->q.ne[2], g->KV = g->k.ne[2], g->hd = g->q.ne[3];
  if (g->KV == 0 || g->H % g->KV)
    return ot_fail(OT_ERR_SHAPE, "%s: %lld query heads are not a multiple of %lld kv heads", op, (long long)g->H,
                   (long long)g->KV);
  g->has_ws = ws.ndim != 0; /* ot_kview_none(): no workspace */
  if (!g->has_ws) return OT_OK;
  OT_TRY(atr_view(op, "ws", ws, OT_KM(OT_F32), &g->ws));
  OT_TRY(atr_same(op, "q", g->q, "ws", g->ws, 3));
  if (g->ws.ne[3] != 2) return ot_fail(OT_ERR_SHAPE, "%s: workspace ws %s must be [.., T, n_heads, 2]", op, ot_kshape_str(ws));
  return OT_OK;
}

static ot_status fwd_check(ot_kview out, ot_kview ws, ot_kview q, ot_kview k, ot_kview v, atr_geom *g) {
  static const char *op = "causal_attention";
  OT_TRY(atr_qkv(op, q, k, v, ws, g));
  OT_TRY(atr_view(op, "out", out, OT_KM_FLOAT, &g->o));
  return atr_same(op, "out", g->o, "q", g->q, 4);
}

static ot_status bwd_check(ot_kview dq, ot_kview dk, ot_kview dv, ot_kview ws, ot_kview dout, ot_kview out, ot_kview q,
                           ot_kview k, ot_kview v, atr_geom *g) {
  static const char *op = "causal_attention_backward";
  if (ws.ndim == 0) return ot_fail(OT_ERR_INVALID_ARG, "%s: the workspace ws is required", op);
  OT_TRY(atr_qkv(op, q, k, v, ws, g));
  OT_TRY(atr_view(op, "out", out, OT_KM_FLOAT, &g->o));
  OT_TRY(atr_view(op, "dout", dout, OT_KM_FLOAT, &g->g));
  OT_TRY(atr_view(op, "dq", dq, OT_KM_FLOAT, &g->dq));
  OT_TRY(atr_view(op, "dk", dk, OT_KM_FLOAT, &g->dk));
  OT_TRY(atr_view(op, "dv", dv, OT_KM_FLOAT, &g->dv));
  OT_TRY(atr_same(op, "out", g->o, "q", g->q, 4));
  OT_TRY(atr_same(op, "dout", g->g, "q", g->q, 4));
  OT_TRY(atr_same(op, "dq", g->dq, "q", g->q, 4));
  OT_TRY(atr_same(op, "dk", g->dk, "k", g->k, 4));
  return atr_same(op, "dv", g->dv, "v", g->v, 4);
}

/* Sequence b of a 4-D view, as the 3-D view the one-sequence kernels take. */
static ot_kview atr_seq(ot_kview v4, int64_t b) {
  ot_kview r = v4;
  r.p = (char *)v4.p + ot_dtype_bytes(v4.dt, b * v4.nb[0]);
  r.ndim = 3;
  for (int d = 0; d < 3; d++) {
    r.ne[d] = v4.ne[d + 1];
    r.nb[d] = v4.nb[d + 1];
  }
  r.ne[3] = r.nb[3] = 0;
  return r;
}

static void strides3(ot_kview v4, int64_t s[3]) {
  for (int d = 0; d < 3; d++) s[d] = v4.nb[d];
}

/* The GPU kernels: a GPU, unit last strides, head_dim <= 128. */
static int atr_fast(int dev, const atr_geom *g, int bwd) {
  if (!ot_kfast_gpu(dev) || !ot_katrain_gpu_ok(g->hd)) return 0;
  const ot_kview *all[] = {&g->q, &g->k, &g->v, &g->o, &g->g, &g->dq, &g->dk, &g->dv};
  for (int i = 0; i < (bwd ? 8 : 4); i++)
    if (all[i]->nb[3] != 1 && g->hd > 1) return 0;
  return 1;
}

static ot_katrain_gpu_args atr_args(const atr_geom *g) {
  ot_katrain_gpu_args a = {0};
  a.q = g->q.p, a.k = g->k.p, a.v = g->v.p, a.out = g->o.p, a.dout = g->g.p;
  a.o = g->o.p, a.dq = g->dq.p, a.dk = g->dk.p, a.dv = g->dv.p;
  a.ws = g->has_ws ? g->ws.p : NULL;
  a.B = g->B, a.T = g->T, a.H = g->H, a.KV = g->KV, a.hd = g->hd;
  a.qdt = g->q.dt, a.kdt = g->k.dt, a.vdt = g->v.dt, a.odt = g->o.dt, a.gdt = g->g.dt;
  a.dqdt = g->dq.dt, a.dkdt = g->dk.dt, a.dvdt = g->dv.dt;
  strides3(g->q, a.qs), strides3(g->k, a.ks), strides3(g->v, a.vs), strides3(g->o, a.os);
  strides3(g->g, a.gs), strides3(g->dq, a.dqs), strides3(g->dk, a.dks), strides3(g->dv, a.dvs);
  if (g->has_ws)
    for (int d = 0; d < 4; d++) a.w[d] = g->ws.nb[d];
  a.scale = 1.0f / sqrtf((float)g->hd);
  return a;
}

/* Portable: ws[b, i, h] = {log-sum-exp of row (b, i, h)'s scaled scores, 0},
 * a thread per row, fp32, two passes over its keys. */
static ot_status atr_lse(int dev, const atr_geom *g) {
  const void *qp = g->q.p, *kp = g->k.p;
  float *wp = g->ws.p;
  const int qdt = g->q.dt, kdt = g->k.dt;
  const int64_t T = g->T, H = g->H, hd = g->hd, grp = g->H / g->KV, rows = g->B * g->T * g->H;
  const int64_t q0 = g->q.nb[0], q1 = g->q.nb[1], q2 = g->q.nb[2], q3 = g->q.nb[3];
  const int64_t k0 = g->k.nb[0], k1 = g->k.nb[1], k2 = g->k.nb[2], k3 = g->k.nb[3];
  const int64_t w0 = g->ws.nb[0], w1 = g->ws.nb[1], w2 = g->ws.nb[2], w3 = g->ws.nb[3];
  const float scale = 1.0f / sqrtf((float)hd);
  OT_PARFOR(dev, OT_DEVPTR(qp, kp, wp))
  for (int64_t r = 0; r < rows; r++) {
    const int64_t b = r / (T * H), i = (r / H) % T, h = r % H, hk = h / grp;
    float mx = -INFINITY, l = 0.0f;
    for (int pass = 0; pass < 2; pass++)
      for (int64_t j = 0; j <= i; j++) {
        float s = 0.0f;
        for (int64_t d = 0; d < hd; d++)
          s += ot_kld(qdt, qp, b * q0 + i * q1 + h * q2 + d * q3) * ot_kld(kdt, kp, b * k0 + j * k1 + hk * k2 + d * k3);
        s *= scale;
        if (pass == 0)
          mx = fmaxf(mx, s);
        else
          l += expf(s - mx);
      }
    wp[b * w0 + i * w1 + h * w2] = mx + logf(l);
    wp[b * w0 + i * w1 + h * w2 + w3] = 0.0f;
  }
  return OT_OK;
}

ot_status ot_k_causal_attention(int dev, ot_kview out, ot_kview ws, ot_kview q, ot_kview k, ot_kview v) {
  atr_geom g;
  OT_TRY(fwd_check(out, ws, q, k, v, &g));
  if (g.B == 0 || g.T == 0 || g.H == 0 || g.hd == 0) return OT_OK;
  if (atr_fast(dev, &g, 0)) {
    const ot_katrain_gpu_args a = atr_args(&g);
    ot_katrain_fwd_gpu(dev, &a);
    return OT_OK;
  }
  for (int64_t b = 0; b < g.B; b++)
    OT_TRY(ot_k_attention(dev, atr_seq(g.o, b), atr_seq(g.q, b), atr_seq(g.k, b), atr_seq(g.v, b), 0));
  return g.has_ws ? atr_lse(dev, &g) : OT_OK;
}

ot_status ot_ref_causal_attention(ot_kview out, ot_kview ws, ot_kview q, ot_kview k, ot_kview v) {
  atr_geom g;
  OT_TRY(fwd_check(out, ws, q, k, v, &g));
  for (int64_t b = 0; b < g.B; b++)
    OT_TRY(ot_ref_attention(atr_seq(g.o, b), atr_seq(g.q, b), atr_seq(g.k, b), atr_seq(g.v, b), 0));
  if (!g.has_ws) return OT_OK;
  const double scale = 1.0 / sqrt((double)g.hd);
  for (int64_t b = 0; b < g.B; b++)
    for (int64_t i = 0; i < g.T; i++)
      for (int64_t h = 0; h < g.H; h++) {
        const int64_t hk = h / (g.H / g.KV);
        double mx = -INFINITY, l = 0.0;
        for (int pass = 0; pass < 2; pass++)
          for (int64_t j = 0; j <= i; j++) {
            double s = 0.0;
            for (int64_t d = 0; d < g.hd; d++)
              s += (double)ot_kld(g.q.dt, g.q.p, b * g.q.nb[0] + i * g.q.nb[1] + h * g.q.nb[2] + d * g.q.nb[3]) *
                   ot_kld(g.k.dt, g.k.p, b * g.k.nb[0] + j * g.k.nb[1] + hk * g.k.nb[2] + d * g.k.nb[3]);
            s *= scale;
            if (pass == 0)
              mx = fmax(mx, s);
            else
              l += exp(s - mx);
          }
        float *w = (float *)g.ws.p + b * g.ws.nb[0] + i * g.ws.nb[1] + h * g.ws.nb[2];
        w[0] = (float)(mx + log(l));
        w[g.ws.nb[3]] = 0.0f;
      }
  return OT_OK;
}

ot_status ot_k_causal_attention_backward(int dev, ot_kview dq, ot_kview dk, ot_kview dv, ot_kview ws, ot_kview dout,
                                         ot_kview out, ot_kview q, ot_kview k, ot_kview v) {
  atr_geom g;
  OT_TRY(bwd_check(dq, dk, dv, ws, dout, out, q, k, v, &g));
  if (g.B == 0 || g.T == 0 || g.H == 0 || g.hd == 0) return OT_OK;
  if (atr_fast(dev, &g, 1)) {
    const ot_katrain_gpu_args a = atr_args(&g);
    ot_katrain_bwd_gpu(dev, &a);
    return OT_OK;
  }
  for (int64_t b = 0; b < g.B; b++)
    OT_TRY(ot_k_attention_backward(dev, atr_seq(g.dq, b), atr_seq(g.dk, b), atr_seq(g.dv, b), atr_seq(g.ws, b),
                                   atr_seq(g.g, b), atr_seq(g.q, b), atr_seq(g.k, b), atr_seq(g.v, b)));
  return OT_OK;
}

ot_status ot_ref_causal_attention_backward(ot_kview dq, ot_kview dk, ot_kview dv, ot_kview ws, ot_kview dout,
                                           ot_kview out, ot_kview q, ot_kview k, ot_kview v) {
  atr_geom g;
  OT_TRY(bwd_check(dq, dk, dv, ws, dout, out, q, k, v, &g));
  for (int64_t b = 0; b < g.B; b++)
    OT_TRY(ot_ref_attention_backward(atr_seq(g.dq, b), atr_seq(g.dk, b), atr_seq(g.dv, b), atr_seq(g.ws, b),
                                     atr_seq(g.g, b), atr_seq(g.q, b), atr_seq(g.k, b), atr_seq(g.v, b)));
  return OT_OK;
}
