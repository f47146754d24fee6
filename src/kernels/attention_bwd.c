/* attention_bwd.c — backward of causal multi-head attention without a cache
 * (training: T queries over the same T keys), with GQA.
 *
 * With s_ij = scale q_i . k_j (j <= i), P = softmax_j(s), O = P V, dP_ij =
 * dO_i . v_j and D_i = sum_j P_ij dP_ij:
 *   dS_ij = P_ij (dP_ij - D_i)
 *   dq_i  = scale sum_j dS_ij k_j
 *   dk_j  = scale sum_{i >= j, heads of the group} dS_ij q_i
 *   dv_j  = sum_{i >= j, heads of the group} P_ij dO_i
 * Not tiled: pass 1 (a thread per (i, h)) stores each row's log-sum-exp and
 * D_i in the workspace; passes 2 and 3 give each query row (dq) or key row
 * (dk, dv) and chunk of AB_CHUNK head dims one thread, which recomputes the
 * scores and dP it needs. Every sum has a fixed order: deterministic, no
 * atomics. (Measured on the H200, GPT-2 124M, T = 1024: one thread per
 * output element, recomputing P and dS per element, took 415 ms per
 * sequence; the place to tile next is sharing k/v rows through team memory.) */
#include <stdlib.h>

#include "kernels/attention_bwd_gpu.h"
#include "kernels/kcommon.h"

/* Head dims a pass-2/3 thread accumulates at once (registers/local memory). */
#define AB_CHUNK 64

typedef struct ab_geom {
  int64_t T, H, Hk, hd, g; /* g = H / Hk */
  int64_t q[3], k[3], v[3], o[3], dq[3], dk[3], dv[3], ws[3];
  int qdt, kdt, vdt, odt, dqdt, dkdt, dvdt;
  float scale;
} ab_geom;

static void strides3(ot_kview v, int64_t s[3]) {
  s[0] = v.nb[0];
  s[1] = v.nb[1];
  s[2] = v.nb[2];
}

static ot_status ab_check(ot_kview dq, ot_kview dk, ot_kview dv, ot_kview ws, ot_kview dout, ot_kview q, ot_kview k,
                          ot_kview v, ab_geom *g) {
  static const char *op = "attention_backward";
  const ot_kview *all[] = {&dq, &dk, &dv, &dout, &q, &k, &v};
  static const char *names[] = {"dq", "dk", "dv", "dout", "q", "k", "v"};
  for (int i = 0; i < 7; i++) OT_TRY(ot_kcheck(op, names[i], *all[i], 3, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "ws", ws, 3, 3, OT_KM(OT_F32)));
  for (int i = 0; i < 3; i++) {
    OT_TRY(ot_kcheck_dim(op, "q", q, i, "dq", dq, i));
    OT_TRY(ot_kcheck_dim(op, "q", q, i, "dout", dout, i));
    OT_TRY(ot_kcheck_dim(op, "k", k, i, "v", v, i));
    OT_TRY(ot_kcheck_dim(op, "k", k, i, "dk", dk, i));
    OT_TRY(ot_kcheck_dim(op, "v", v, i, "dv", dv, i));
  }
  OT_TRY(ot_kcheck_dim(op, "q", q, 0, "k", k, 0));
  OT_TRY(ot_kcheck_dim(op, "q", q, 2, "k", k, 2));
  OT_TRY(ot_kcheck_dim(op, "q", q, 0, "ws", ws, 0));
  OT_TRY(ot_kcheck_dim(op, "q", q, 1, "ws", ws, 1));
  if (ws.ne[2] != 2) return ot_fail(OT_ERR_SHAPE, "attention_backward: workspace ws %s must be [T, n_heads, 2]", ot_kshape_str(ws));
  if (k.ne[1] == 0 || q.ne[1] % k.ne[1] != 0)
    return ot_fail(OT_ERR_SHAPE, "attention_backward: %lld query heads are not a multiple of %lld kv heads",
                   (long long)q.ne[1], (long long)k.ne[1]);
  g->T = q.ne[0];
  g->H = q.ne[1];
  g->Hk = k.ne[1];
  g->hd = q.ne[2];
  g->g = g->H / g->Hk;
  strides3(q, g->q);
  strides3(k, g->k);
  strides3(v, g->v);
  strides3(dout, g->o);
  strides3(dq, g->dq);
  strides3(dk, g->dk);
  strides3(dv, g->dv);
  strides3(ws, g->ws);
  g->qdt = q.dt;
  g->kdt = k.dt;
  g->vdt = v.dt;
  g->odt = dout.dt;
  g->dqdt = dq.dt;
  g->dkdt = dk.dt;
  g->dvdt = dv.dt;
  g->scale = 1.0f / sqrtf((float)g->hd);
  return OT_OK;
}

OT_DECLARE_TARGET_BEGIN
/* Dot over head_dim of row (r0, h0) of a and row (r1, h1) of b. */
static inline float ab_dot(int adt, const void *a, const int64_t as[3], int64_t r0, int64_t h0, int bdt, const void *b,
                           const int64_t bs[3], int64_t r1, int64_t h1, int64_t hd) {
  float s = 0.0f;
  for (int64_t d = 0; d < hd; d++) s += ot_kld(adt, a, r0 * as[0] + h0 * as[1] + d * as[2]) * ot_kld(bdt, b, r1 * bs[0] + h1 * bs[1] + d * bs[2]);
  return s;
}

/* Pass 1, row (i, h): ws[i, h] = {log-sum-exp of the scores, D_i}. */
static void ab_row(const ab_geom *g, int64_t r, const void *qp, const void *kp, const void *vp, const void *op, float *wsp) {
  const int64_t i = r / g->H, h = r % g->H, hk = h / g->g, n = i + 1;
  float mx = -INFINITY, l = 0.0f, dsum = 0.0f;
  for (int64_t j = 0; j < n; j++) mx = fmaxf(mx, g->scale * ab_dot(g->qdt, qp, g->q, i, h, g->kdt, kp, g->k, j, hk, g->hd));
  for (int64_t j = 0; j < n; j++) {
    const float e = expf(g->scale * ab_dot(g->qdt, qp, g->q, i, h, g->kdt, kp, g->k, j, hk, g->hd) - mx);
    l += e;
    dsum += e * ab_dot(g->odt, op, g->o, i, h, g->vdt, vp, g->v, j, hk, g->hd);
  }
  wsp[i * g->ws[0] + h * g->ws[1]] = mx + logf(l);
  wsp[i * g->ws[0] + h * g->ws[1] + g->ws[2]] = dsum / l;
}

/* P_ij and dS_ij for query (i, h), key j. */
static inline void ab_pds(const ab_geom *g, int64_t i, int64_t h, int64_t j, const void *qp, const void *kp,
                          const void *vp, const void *op, const float *wsp, float *P, float *dS) {
  const int64_t hk = h / g->g, w = i * g->ws[0] + h * g->ws[1];
  *P = expf(g->scale * ab_dot(g->qdt, qp, g->q, i, h, g->kdt, kp, g->k, j, hk, g->hd) - wsp[w]);
  *dS = *P * (ab_dot(g->odt, op, g->o, i, h, g->vdt, vp, g->v, j, hk, g->hd) - wsp[w + g->ws[2]]);
}
OT_DECLARE_TARGET_END

ot_status ot_k_attention_backward(int dev, ot_kview dq, ot_kview dk, ot_kview dv, ot_kview ws, ot_kview dout,
                                  ot_kview q, ot_kview k, ot_kview v) {
  ab_geom g;
  OT_TRY(ab_check(dq, dk, dv, ws, dout, q, k, v, &g));
  if (g.T == 0 || g.H == 0 || g.hd == 0) return OT_OK;
  const ot_kview *f32[] = {&dq, &dk, &dv, &dout, &q, &k, &v};
  int fast = ot_kfast_gpu(dev) && ot_kattn_bwd_gpu_ok(g.hd) && ws.nb[2] == 1;
  for (int i = 0; i < 7; i++) fast = fast && f32[i]->dt == OT_F32 && f32[i]->nb[2] == 1;
  if (fast) {
    const ot_kattn_bwd_gpu_args ga = {q.p, k.p, v.p, dout.p, dq.p, dk.p, dv.p, ws.p, g.T, g.H, g.Hk, g.hd,
                                      q.nb[0], q.nb[1], k.nb[0], k.nb[1], v.nb[0], v.nb[1], dout.nb[0], dout.nb[1],
                                      dq.nb[0], dq.nb[1], dk.nb[0], dk.nb[1], dv.nb[0], dv.nb[1], ws.nb[0], ws.nb[1],
                                      ws.nb[2], g.scale};
    ot_kattn_bwd_gpu(dev, &ga);
    return OT_OK;
  }
  const void *qp = q.p, *kp = k.p, *vp = v.p, *op = dout.p;
  void *dqp = dq.p, *dkp = dk.p, *dvp = dv.p;
  float *wsp = ws.p;
  const int64_t T = g.T, H = g.H, Hk = g.Hk, hd = g.hd;
  /* One thread per row, sums in a fixed serial order. (A team per row with
   * team reductions, inside a called function with the geometry passed by
   * address, gave wrong results on the H200 though right on host devices.) */
  const int64_t rows = T * H;
  OT_PARFOR(dev, OT_DEVPTR(qp, kp, vp, op, wsp) firstprivate(g))
  for (int64_t r = 0; r < rows; r++) ab_row(&g, r, qp, kp, vp, op, wsp);
  /* Passes 2 and 3: a thread per query row (i, h) for dq and per key row
   * (j, hk) for dk, dv, each accumulating AB_CHUNK output columns at once,
   * so P and dS are computed once per (row, partner, chunk) instead of once
   * per output element (O(T^2 hd) work, not O(T^2 hd^2)). Each element still
   * sums over j (or h, i) in the same order as the reference's loops. */
  const int64_t nch = (hd + AB_CHUNK - 1) / AB_CHUNK;
  OT_PARFOR2(dev, OT_DEVPTR(qp, kp, vp, op, wsp, dqp) firstprivate(g))
  for (int64_t i = 0; i < T; i++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t c = 0; c < nch; c++) {
        const int64_t d0 = c * AB_CHUNK, nd = hd - d0 < AB_CHUNK ? hd - d0 : AB_CHUNK, hk = h / g.g;
        float acc[AB_CHUNK], P, dS;
        for (int64_t d = 0; d < nd; d++) acc[d] = 0.0f;
        for (int64_t j = 0; j <= i; j++) {
          ab_pds(&g, i, h, j, qp, kp, vp, op, wsp, &P, &dS);
          for (int64_t d = 0; d < nd; d++) acc[d] += dS * ot_kld(g.kdt, kp, j * g.k[0] + hk * g.k[1] + (d0 + d) * g.k[2]);
        }
        for (int64_t d = 0; d < nd; d++) ot_kst(g.dqdt, dqp, i * g.dq[0] + h * g.dq[1] + (d0 + d) * g.dq[2], g.scale * acc[d]);
      }
  OT_PARFOR2(dev, OT_DEVPTR(qp, kp, vp, op, wsp, dkp, dvp) firstprivate(g))
  for (int64_t j = 0; j < T; j++)
    for (int64_t hk = 0; hk < Hk; hk++)
      for (int64_t c = 0; c < nch; c++) {
        const int64_t d0 = c * AB_CHUNK, nd = hd - d0 < AB_CHUNK ? hd - d0 : AB_CHUNK;
        float ak[AB_CHUNK], av[AB_CHUNK], P, dS;
        for (int64_t d = 0; d < nd; d++) ak[d] = av[d] = 0.0f;
        for (int64_t h = hk * g.g; h < (hk + 1) * g.g; h++)
          for (int64_t i = j; i < T; i++) {
            ab_pds(&g, i, h, j, qp, kp, vp, op, wsp, &P, &dS);
            for (int64_t d = 0; d < nd; d++) {
              ak[d] += dS * ot_kld(g.qdt, qp, i * g.q[0] + h * g.q[1] + (d0 + d) * g.q[2]);
              av[d] += P * ot_kld(g.odt, op, i * g.o[0] + h * g.o[1] + (d0 + d) * g.o[2]);
            }
          }
        for (int64_t d = 0; d < nd; d++) {
          ot_kst(g.dkdt, dkp, j * g.dk[0] + hk * g.dk[1] + (d0 + d) * g.dk[2], g.scale * ak[d]);
          ot_kst(g.dvdt, dvp, j * g.dv[0] + hk * g.dv[1] + (d0 + d) * g.dv[2], av[d]);
        }
      }
  return OT_OK;
}

/* The reference: the whole score matrix of each head in double. */
ot_status ot_ref_attention_backward(ot_kview dq, ot_kview dk, ot_kview dv, ot_kview ws, ot_kview dout, ot_kview q,
                                    ot_kview k, ot_kview v) {
  ab_geom g;
  OT_TRY(ab_check(dq, dk, dv, ws, dout, q, k, v, &g));
  const int64_t T = g.T, hd = g.hd;
#define LD(dt, p, s, r, h, d) ((double)ot_kld(dt, p, (r) * (s)[0] + (h) * (s)[1] + (d) * (s)[2]))
#define ST(dt, p, s, r, h, d, x) ot_kst(dt, p, (r) * (s)[0] + (h) * (s)[1] + (d) * (s)[2], (float)(x))
  double *dkv = calloc((size_t)(2 * T * g.Hk * hd + 2 * T + 1), sizeof(double));
  if (!dkv) return ot_fail(OT_ERR_OUT_OF_MEMORY, "attention_backward: no host memory for the reference");
  double *dka = dkv, *dva = dkv + T * g.Hk * hd, *P = dva + T * g.Hk * hd, *dP = P + T;
  for (int64_t h = 0; h < g.H; h++) {
    const int64_t hk = h / g.g;
    for (int64_t i = 0; i < T; i++) {
      double mx = -INFINITY, l = 0, D = 0;
      for (int64_t j = 0; j <= i; j++) {
        double s = 0, t = 0;
        for (int64_t d = 0; d < hd; d++) {
          s += LD(g.qdt, q.p, g.q, i, h, d) * LD(g.kdt, k.p, g.k, j, hk, d);
          t += LD(g.odt, dout.p, g.o, i, h, d) * LD(g.vdt, v.p, g.v, j, hk, d);
        }
        P[j] = s * g.scale;
        dP[j] = t;
        mx = fmax(mx, P[j]);
      }
      for (int64_t j = 0; j <= i; j++) l += P[j] = exp(P[j] - mx);
      for (int64_t j = 0; j <= i; j++) D += (P[j] /= l) * dP[j];
      ((float *)ws.p)[i * g.ws[0] + h * g.ws[1]] = (float)(mx + log(l));
      ((float *)ws.p)[i * g.ws[0] + h * g.ws[1] + g.ws[2]] = (float)D;
      for (int64_t d = 0; d < hd; d++) {
        double acc = 0;
        for (int64_t j = 0; j <= i; j++) {
          const double dS = P[j] * (dP[j] - D);
          acc += dS * LD(g.kdt, k.p, g.k, j, hk, d);
          dka[(j * g.Hk + hk) * hd + d] += g.scale * dS * LD(g.qdt, q.p, g.q, i, h, d);
          dva[(j * g.Hk + hk) * hd + d] += P[j] * LD(g.odt, dout.p, g.o, i, h, d);
        }
        ST(g.dqdt, dq.p, g.dq, i, h, d, g.scale * acc);
      }
    }
  }
  for (int64_t j = 0; j < T; j++)
    for (int64_t hk = 0; hk < g.Hk; hk++)
      for (int64_t d = 0; d < hd; d++) {
        ST(g.dkdt, dk.p, g.dk, j, hk, d, dka[(j * g.Hk + hk) * hd + d]);
        ST(g.dvdt, dv.p, g.dv, j, hk, d, dva[(j * g.Hk + hk) * hd + d]);
      }
#undef LD
#undef ST
  free(dkv);
  return OT_OK;
}
