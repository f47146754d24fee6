/* op_table_train.c — builders and plain C references of the training ops
 * (loss, backward, optimizers, loss scaling) for the op table (op_table.h).
 * Parameter gradients accumulate onto their random start (c->w[k] begins
 * as c->h[k]); activation gradients are overwritten. */
#include <math.h>
#include <stdlib.h>

#define OC_PI 3.14159265358979323846

#include "op_table.h"
#include "ot_test.h"

/* ---- cross-entropy: arg = {dlogits in place of logits} -------------------------------
 * logits 0, targets 1 (row 3 ignored), loss 2, losses 3, dlogits 4 (or logits) */
enum { CR = 6, CV = 37 };

void oc_build_cross_entropy(oc_case *c) {
  int inpl = c->arg[0];
  ot_tensor *x = inpl ? oc_acc(c, "logits", OT_F32, OC_SHAPE(CR, CV), -3, 3) : oc_in(c, "logits", OT_F32, OC_SHAPE(CR, CV), -3, 3);
  ot_tensor *y = oc_in(c, "targets", OT_I32, OC_SHAPE(CR), 0, CV - 1);
  oc_i32(y)[3] = -100;
  ot_tensor *loss = oc_out(c, "loss", OT_F32, OC_SHAPE(1)), *losses = oc_out(c, "losses", OT_F32, OC_SHAPE(CR));
  ot_tensor *dx = inpl ? x : oc_out(c, "dlogits", OT_F32, OC_SHAPE(CR, CV));
  c->f[0] = 0.5f;
  OC_OK(ot_op_cross_entropy(c->p, loss, losses, dx, x, y, c->f[0]));
}

void oc_ref_cross_entropy(oc_case *c) {
  float *dx = c->w[c->arg[0] ? 0 : 4];
  int valid = 0;
  double total = 0;
  for (int r = 0; r < CR; r++) valid += (int)c->h[1][r] != -100;
  for (int r = 0; r < CR; r++) {
    const float *x = c->h[0] + r * CV;
    int t = (int)c->h[1][r];
    double mx = -INFINITY, se = 0;
    for (int i = 0; i < CV; i++) mx = fmax(mx, x[i]);
    for (int i = 0; i < CV; i++) se += exp(x[i] - mx);
    double lse = mx + log(se);
    c->w[3][r] = t == -100 ? 0.0f : (float)(lse - x[t]);
    if (t != -100) total += lse - x[t];
    for (int i = 0; i < CV; i++)
      dx[r * CV + i] = t == -100 ? 0.0f : (float)(c->f[0] * (exp(x[i] - lse) - (i == t)) / valid);
  }
  c->w[2][0] = (float)(total / valid);
}

/* ---- matmul backward: arg = {trans_w, batch, no da, no dw} ----------------------------
 * dout 0, a 1, w 2, then da and dw (indices in d[4], d[5]) */
void oc_build_matmul_backward(oc_case *c) {
  int tr = c->arg[0];
  int64_t B = c->arg[1] ? c->arg[1] : 1, M = 11, K = 40, N = 24;
  c->d[0] = B, c->d[1] = M, c->d[2] = K, c->d[3] = N;
  oc_shape os = c->arg[1] ? OC_SHAPE(B, M, N) : OC_SHAPE(M, N), as = c->arg[1] ? OC_SHAPE(B, M, K) : OC_SHAPE(M, K);
  oc_shape ws = tr ? OC_SHAPE(N, K) : OC_SHAPE(K, N);
  ot_tensor *dout = oc_in(c, "dout", OT_F32, os, -1, 1), *a = oc_in(c, "a", OT_F32, as, -1, 1);
  ot_tensor *w = oc_in(c, "w", OT_F32, ws, -1, 1), *da = NULL, *dw = NULL;
  c->d[4] = c->d[5] = -1;
  if (!c->arg[2]) c->d[4] = c->n, da = oc_out(c, "da", OT_F32, as);
  if (!c->arg[3]) c->d[5] = c->n, dw = oc_acc(c, "dw", OT_F32, ws, -1, 1);
  OC_OK(ot_op_matmul_backward(c->p, da, dw, dout, a, w, tr));
}

void oc_ref_matmul_backward(oc_case *c) {
  int64_t B = c->d[0], M = c->d[1], K = c->d[2], N = c->d[3];
  const float *dout = c->h[0], *a = c->h[1], *w = c->h[2];
  int tr = c->arg[0];
#define W_AT(k, n) (tr ? (n) * K + (k) : (k) * N + (n))
  if (c->d[4] >= 0)
    for (int64_t b = 0; b < B; b++)
      for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++) {
          double s = 0;
          for (int64_t n = 0; n < N; n++) s += (double)dout[(b * M + m) * N + n] * w[W_AT(k, n)];
          c->w[c->d[4]][(b * M + m) * K + k] = (float)s;
        }
  if (c->d[5] >= 0)
    for (int64_t k = 0; k < K; k++)
      for (int64_t n = 0; n < N; n++) {
        double s = c->w[c->d[5]][W_AT(k, n)];
        for (int64_t b = 0; b < B; b++)
          for (int64_t m = 0; m < M; m++) s += (double)a[(b * M + m) * K + k] * dout[(b * M + m) * N + n];
        c->w[c->d[5]][W_AT(k, n)] = (float)s;
      }
#undef W_AT
}

/* dy 0 [2, 5, 30], db 1 [30] += the sum over both leading dims */
void oc_build_bias_backward(oc_case *c) {
  ot_tensor *dy = oc_in(c, "dy", OT_F32, OC_SHAPE(2, 5, 30), -1, 1);
  OC_OK(ot_op_bias_backward(c->p, oc_acc(c, "db", OT_F32, OC_SHAPE(30), -1, 1), dy));
}

void oc_ref_bias_backward(oc_case *c) {
  for (int j = 0; j < 30; j++) {
    double s = c->w[1][j];
    for (int r = 0; r < 10; r++) s += c->h[0][r * 30 + j];
    c->w[1][j] = (float)s;
  }
}

/* ---- pointwise backward ------------------------------------------------------------- */

enum { GR = 7, GC = 90 };

static double dsilu(double x) {
  double s = 1.0 / (1.0 + exp(-x));
  return s * (1.0 + x * (1.0 - s));
}

static double dgelu(double x) {
  const double k = sqrt(2.0 / OC_PI), u = k * (x + 0.044715 * x * x * x), t = tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

/* arg = {OC_GELU | OC_SILU, dx in place of dy}: x 0, dy 1, dx 2 (or dy) */
void oc_build_act_backward(oc_case *c) {
  int inpl = c->arg[1];
  ot_tensor *x = oc_in(c, "x", OT_F32, OC_SHAPE(GR, GC), -5, 5);
  ot_tensor *dy = inpl ? oc_acc(c, "dy", OT_F32, OC_SHAPE(GR, GC), -1, 1) : oc_in(c, "dy", OT_F32, OC_SHAPE(GR, GC), -1, 1);
  ot_tensor *dx = inpl ? dy : oc_out(c, "dx", OT_F32, OC_SHAPE(GR, GC));
  OC_OK(c->arg[0] == OC_GELU ? ot_op_gelu_backward(c->p, dx, x, dy) : ot_op_silu_backward(c->p, dx, x, dy));
}

void oc_ref_act_backward(oc_case *c) {
  float *dx = c->w[c->arg[1] ? 1 : 2];
  for (int i = 0; i < GR * GC; i++) {
    double x = c->h[0][i];
    dx[i] = (float)(c->h[1][i] * (c->arg[0] == OC_GELU ? dgelu(x) : dsilu(x)));
  }
}

/* arg = {dup in place of dy}: gate 0, up 1, dy 2, dgate 3, dup 4 (or dy) */
void oc_build_swiglu_backward(oc_case *c) {
  int inpl = c->arg[0];
  ot_tensor *g = oc_in(c, "gate", OT_F32, OC_SHAPE(GR, GC), -5, 5), *u = oc_in(c, "up", OT_F32, OC_SHAPE(GR, GC), -2, 2);
  ot_tensor *dy = inpl ? oc_acc(c, "dy", OT_F32, OC_SHAPE(GR, GC), -1, 1) : oc_in(c, "dy", OT_F32, OC_SHAPE(GR, GC), -1, 1);
  ot_tensor *dg = oc_out(c, "dgate", OT_F32, OC_SHAPE(GR, GC));
  ot_tensor *du = inpl ? dy : oc_out(c, "dup", OT_F32, OC_SHAPE(GR, GC));
  OC_OK(ot_op_swiglu_backward(c->p, dg, du, g, u, dy));
}

void oc_ref_swiglu_backward(oc_case *c) {
  float *du = c->w[c->arg[0] ? 2 : 4];
  for (int i = 0; i < GR * GC; i++) {
    double g = c->h[0][i], u = c->h[1][i], dy = c->h[2][i];
    c->w[3][i] = (float)(dy * u * dsilu(g));
    du[i] = (float)(dy * oc_silu(g));
  }
}

/* ---- norms backward: arg = {no dw/db} ---------------------------------------------------
 * dy 0, x 1, w 2, dx 3, dw 4, (db 5) */
enum { NR = 6, ND = 80 };

static void build_normb(oc_case *c, int ln) {
  ot_tensor *dy = oc_in(c, "dy", OT_F32, OC_SHAPE(NR, ND), -1, 1), *x = oc_in(c, "x", OT_F32, OC_SHAPE(NR, ND), 1, 4);
  ot_tensor *w = oc_in(c, "w", OT_F32, OC_SHAPE(ND), 0.5f, 1.5f), *dx = oc_out(c, "dx", OT_F32, OC_SHAPE(NR, ND));
  ot_tensor *dw = c->arg[0] ? NULL : oc_acc(c, "dw", OT_F32, OC_SHAPE(ND), -1, 1);
  ot_tensor *db = c->arg[0] || !ln ? NULL : oc_acc(c, "db", OT_F32, OC_SHAPE(ND), -1, 1);
  c->f[0] = 1e-5f;
  OC_OK(ln ? ot_op_layernorm_backward(c->p, dx, dw, db, dy, x, w, c->f[0])
           : ot_op_rmsnorm_backward(c->p, dx, dw, dy, x, w, c->f[0]));
}

/* y = xhat * w (+ b): xhat = (x - mean) * rstd (layernorm) or x * rstd (rmsnorm). */
static void ref_normb(oc_case *c, int ln) {
  const float *dy = c->h[0], *w = c->h[2];
  for (int r = 0; r < NR; r++) {
    const float *x = c->h[1] + r * ND;
    double mean = 0, ss = 0, xh[ND], g[ND], mg = 0, mgx = 0;
    if (ln)
      for (int i = 0; i < ND; i++) mean += x[i] / (double)ND;
    for (int i = 0; i < ND; i++) ss += (x[i] - mean) * (x[i] - mean) / ND;
    double rstd = 1.0 / sqrt(ss + c->f[0]);
    for (int i = 0; i < ND; i++) {
      xh[i] = (x[i] - mean) * rstd;
      g[i] = dy[r * ND + i] * w[i];
      mg += g[i] / ND;
      mgx += g[i] * xh[i] / ND;
    }
    for (int i = 0; i < ND; i++) {
      c->w[3][r * ND + i] = (float)(rstd * (g[i] - (ln ? mg : 0) - xh[i] * mgx));
      if (!c->arg[0]) c->w[4][i] += (float)(dy[r * ND + i] * xh[i]);
      if (!c->arg[0] && ln) c->w[5][i] += dy[r * ND + i];
    }
  }
}

void oc_build_layernorm_backward(oc_case *c) { build_normb(c, 1); }
void oc_ref_layernorm_backward(oc_case *c) { ref_normb(c, 1); }
void oc_build_rmsnorm_backward(oc_case *c) { build_normb(c, 0); }
void oc_ref_rmsnorm_backward(oc_case *c) { ref_normb(c, 0); }

/* ---- causal attention without a cache ---------------------------------------------------- */

/* arg = {T}; T 70 runs over several key tiles (CPU 64, GPU backward 32) */
enum { QH = 4, QKV = 2, QHD = 32 };

/* q 0, k 1, v 2, out 3 */
void oc_build_causal_attention(oc_case *c) {
  const int64_t QT = c->arg[0];
  ot_tensor *q = oc_in(c, "q", OT_F32, OC_SHAPE(QT, QH, QHD), -1, 1), *k = oc_in(c, "k", OT_F32, OC_SHAPE(QT, QKV, QHD), -1, 1);
  ot_tensor *v = oc_in(c, "v", OT_F32, OC_SHAPE(QT, QKV, QHD), -1, 1);
  OC_OK(ot_op_causal_attention(c->p, oc_out(c, "out", OT_F32, OC_SHAPE(QT, QH, QHD)), q, k, v));
}

void oc_ref_causal_attention(oc_case *c) { oc_attend_ref(c->w[3], c->h[0], c->h[1], c->h[2], c->arg[0], QH, QKV, QHD, 0, 0); }

/* The forward that leaves ws for the backward: arg = {T, B (0: 3-D views)}.
 * q 0, k 1, v 2, out 3, ws 4 */
void oc_build_causal_attention_train(oc_case *c) {
  const int64_t QT = c->arg[0], B = c->arg[1];
  ot_tensor *q, *k, *v, *out, *ws;
  if (B) {
    q = oc_in(c, "q", OT_F32, OC_SHAPE(B, QT, QH, QHD), -1, 1), k = oc_in(c, "k", OT_F32, OC_SHAPE(B, QT, QKV, QHD), -1, 1);
    v = oc_in(c, "v", OT_F32, OC_SHAPE(B, QT, QKV, QHD), -1, 1);
    out = oc_out(c, "out", OT_F32, OC_SHAPE(B, QT, QH, QHD)), ws = oc_out(c, "ws", OT_F32, OC_SHAPE(B, QT, QH, 2));
  } else {
    q = oc_in(c, "q", OT_F32, OC_SHAPE(QT, QH, QHD), -1, 1), k = oc_in(c, "k", OT_F32, OC_SHAPE(QT, QKV, QHD), -1, 1);
    v = oc_in(c, "v", OT_F32, OC_SHAPE(QT, QKV, QHD), -1, 1);
    out = oc_out(c, "out", OT_F32, OC_SHAPE(QT, QH, QHD)), ws = oc_out(c, "ws", OT_F32, OC_SHAPE(QT, QH, 2));
  }
  OC_OK(ot_op_causal_attention_train(c->p, out, ws, q, k, v));
}

/* per sequence: the output and ws = {log-sum-exp, 0} */
void oc_ref_causal_attention_train(oc_case *c) {
  const int64_t QT = c->arg[0], B = c->arg[1] ? c->arg[1] : 1, nq = QT * QH * QHD, nk = QT * QKV * QHD;
  const double sc = 1.0 / sqrt((double)QHD);
  for (int64_t b = 0; b < B; b++) {
    const float *q = c->h[0] + b * nq, *k = c->h[1] + b * nk;
    oc_attend_ref(c->w[3] + b * nq, q, k, c->h[2] + b * nk, QT, QH, QKV, QHD, 0, 0);
    float *ws = c->w[4] + b * QT * QH * 2;
    for (int64_t i = 0; i < QT; i++)
      for (int h = 0; h < QH; h++) {
        double mx = -INFINITY, l = 0, s[128];
        for (int64_t j = 0; j <= i; j++) {
          s[j] = 0;
          for (int d = 0; d < QHD; d++) s[j] += (double)q[(i * QH + h) * QHD + d] * k[(j * QKV + h / (QH / QKV)) * QHD + d];
          s[j] *= sc, mx = fmax(mx, s[j]);
        }
        for (int64_t j = 0; j <= i; j++) l += exp(s[j] - mx);
        ws[(i * QH + h) * 2] = (float)(mx + log(l)), ws[(i * QH + h) * 2 + 1] = 0;
      }
  }
}

/* dout 0, q 1, k 2, v 3, dq 4, dk 5, dv 6, ws 7, out 8: the forward
 * (causal_attention_train) then the backward, in one program */
void oc_build_causal_attention_backward(oc_case *c) {
  const int64_t QT = c->arg[0];
  ot_tensor *dout = oc_in(c, "dout", OT_F32, OC_SHAPE(QT, QH, QHD), -1, 1);
  ot_tensor *q = oc_in(c, "q", OT_F32, OC_SHAPE(QT, QH, QHD), -1, 1), *k = oc_in(c, "k", OT_F32, OC_SHAPE(QT, QKV, QHD), -1, 1);
  ot_tensor *v = oc_in(c, "v", OT_F32, OC_SHAPE(QT, QKV, QHD), -1, 1);
  ot_tensor *dq = oc_out(c, "dq", OT_F32, OC_SHAPE(QT, QH, QHD)), *dk = oc_out(c, "dk", OT_F32, OC_SHAPE(QT, QKV, QHD));
  ot_tensor *dv = oc_out(c, "dv", OT_F32, OC_SHAPE(QT, QKV, QHD)), *ws = oc_out(c, "ws", OT_F32, OC_SHAPE(QT, QH, 2));
  ot_tensor *out = oc_out(c, "out", OT_F32, OC_SHAPE(QT, QH, QHD));
  OC_OK(ot_op_causal_attention_train(c->p, out, ws, q, k, v));
  OC_OK(ot_op_causal_attention_backward(c->p, dq, dk, dv, ws, dout, out, q, k, v));
}

/* P = softmax(S), S = q k^T / sqrt(hd) (causal); dV = P^T dout; dP = dout v^T;
 * dS = P (dP - D), D = rowsum(P dP); dq = dS k / sqrt(hd), dk = dS^T q / sqrt(hd). */
void oc_ref_causal_attention_backward(oc_case *c) {
  const float *dout = c->h[0], *q = c->h[1], *k = c->h[2], *v = c->h[3];
  float *dq = c->w[4], *dk = c->w[5], *dv = c->w[6], *ws = c->w[7];
  const int QT = c->arg[0];
  const double sc = 1.0 / sqrt((double)QHD);
  double *dka = calloc((size_t)(4 * QT * QKV * QHD), sizeof(double)), *dva = dka + QT * QKV * QHD;
  double *P = dva + QT * QKV * QHD, *dP = P + QT;
  assert_non_null(dka);
#define Q(t, h, d) ((t) * QH * QHD + (h) * QHD + (d))
#define KV(t, h, d) ((t) * QKV * QHD + (h) * QHD + (d))
  for (int h = 0; h < QH; h++) {
    int kh = h / (QH / QKV);
    for (int i = 0; i < QT; i++) {
      double mx = -INFINITY, l = 0, D = 0;
      for (int j = 0; j <= i; j++) {
        double s = 0, t = 0;
        for (int d = 0; d < QHD; d++) {
          s += (double)q[Q(i, h, d)] * k[KV(j, kh, d)];
          t += (double)dout[Q(i, h, d)] * v[KV(j, kh, d)];
        }
        P[j] = s * sc, dP[j] = t, mx = fmax(mx, P[j]);
      }
      for (int j = 0; j <= i; j++) l += P[j] = exp(P[j] - mx);
      for (int j = 0; j <= i; j++) D += (P[j] /= l) * dP[j];
      ws[(i * QH + h) * 2] = (float)(mx + log(l));
      ws[(i * QH + h) * 2 + 1] = (float)D;
      for (int d = 0; d < QHD; d++) {
        double acc = 0;
        for (int j = 0; j <= i; j++) {
          double dS = P[j] * (dP[j] - D);
          acc += dS * k[KV(j, kh, d)];
          dka[KV(j, kh, d)] += sc * dS * q[Q(i, h, d)];
          dva[KV(j, kh, d)] += P[j] * dout[Q(i, h, d)];
        }
        dq[Q(i, h, d)] = (float)(sc * acc);
      }
    }
  }
  for (int i = 0; i < QT * QKV * QHD; i++) dk[i] = (float)dka[i], dv[i] = (float)dva[i];
  free(dka);
#undef Q
#undef KV
  oc_attend_ref(c->w[8], q, k, v, QT, QH, QKV, QHD, 0, 0);
}

/* ---- embedding / positions backward --------------------------------------------------- */

enum { BV = 20, BD = 24, BT = 9 };

/* dout 0, ids 1 (repeats, two outside the table), dtable 2 */
void oc_build_embedding_backward(oc_case *c) {
  ot_tensor *dout = oc_in(c, "dout", OT_F32, OC_SHAPE(BT, BD), -1, 1), *ids = oc_in(c, "ids", OT_I32, OC_SHAPE(BT), 0, BV - 1);
  oc_i32(ids)[3] = oc_i32(ids)[0];
  oc_i32(ids)[7] = oc_i32(ids)[0];
  oc_i32(ids)[4] = BV;
  oc_i32(ids)[8] = -1;
  OC_OK(ot_op_embedding_backward(c->p, oc_acc(c, "dtable", OT_F32, OC_SHAPE(BV, BD), -1, 1), dout, ids));
}

void oc_ref_embedding_backward(oc_case *c) {
  for (int t = 0; t < BT; t++) {
    int id = (int)c->h[1][t];
    if (id < 0 || id >= BV) continue;
    for (int i = 0; i < BD; i++) c->w[2][id * BD + i] += c->h[0][t * BD + i];
  }
}

enum { SP = 12, SB = 2, ST = 5 };

/* arg = {batch}: dout 0 [(B,) T, d], dtable 1 [P, d], rows pos.. += sum over B */
void oc_build_positions_backward(oc_case *c) {
  c->d[0] = c->arg[0] ? SB : 1;
  c->d[1] = 4; /* pos */
  ot_tensor *dout = c->arg[0] ? oc_in(c, "dout", OT_F32, OC_SHAPE(SB, ST, BD), -1, 1) : oc_in(c, "dout", OT_F32, OC_SHAPE(ST, BD), -1, 1);
  ot_tensor *dt = oc_acc(c, "dwpe", OT_F32, OC_SHAPE(SP, BD), -1, 1);
  OC_OK(ot_op_positions_backward(c->p, dt, dout, oc_scalar(c, "pos", c->d[1])));
}

void oc_ref_positions_backward(oc_case *c) {
  for (int64_t b = 0; b < c->d[0]; b++)
    for (int t = 0; t < ST; t++)
      for (int i = 0; i < BD; i++) c->w[1][(c->d[1] + t) * BD + i] += c->h[0][(b * ST + t) * BD + i];
}

/* ---- zero, optimizers, loss scaling --------------------------------------------------- */

/* arg = {dtype}: t 0 [13, 25] (bf16: 650 bytes, not whole words) */
void oc_build_zero(oc_case *c) { OC_OK(ot_op_zero(c->p, oc_out(c, "grad", c->arg[0], OC_SHAPE(13, 25)))); }

void oc_ref_zero(oc_case *c) {
  for (int i = 0; i < 13 * 25; i++) c->w[0][i] = 0;
}

enum { ON = 300 };

/* arg = {grad dtype, bf16 copy, loss scale exponent k (0: slot unused), skip}:
 * param 0, grad 1, m 2, v 3, (copy 4) */
void oc_build_adamw(oc_case *c) {
  ot_tensor *p = oc_acc(c, "param", OT_F32, OC_SHAPE(ON), -1, 1), *g = oc_in(c, "grad", c->arg[0], OC_SHAPE(ON), -1, 1);
  ot_tensor *m = oc_acc(c, "m", OT_F32, OC_SHAPE(ON), -0.1f, 0.1f), *v = oc_acc(c, "v", OT_F32, OC_SHAPE(ON), 0, 0.01f);
  ot_tensor *cp = c->arg[1] ? oc_out(c, "copy", OT_BF16, OC_SHAPE(ON)) : NULL;
  ot_adamw_opts o = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f,
                     .grad_scale = 0.5f, .scale_slot = -1, .skip_slot = -1};
  c->d[0] = 3; /* the step */
  o.step_slot = oc_scalar(c, "step", c->d[0]);
  if (c->arg[2]) o.scale_slot = oc_scalar(c, "scale", c->arg[2]);
  if (c->arg[3]) o.skip_slot = oc_scalar(c, "skip", 1);
  c->f[0] = o.lr, c->f[1] = o.weight_decay, c->f[2] = o.grad_scale;
  OC_OK(ot_op_adamw(c->p, p, g, m, v, cp, &o));
}

/* AdamW in double on tensors P, G, M, V of the case (their indices) and, if
 * C >= 0, the copy C = the updated P; n elements. */
static void ref_adamw_at(oc_case *c, int P, int G, int M, int V, int C, int n) {
  const double lr = c->f[0], wd = c->f[1], b1 = 0.9, b2 = 0.999, eps = 1e-8, t = (double)c->d[0];
  for (int i = 0; i < n && !c->arg[3]; i++) {
    double g = c->h[G][i] * c->f[2] * ldexp(1.0, -c->arg[2]);
    double p = c->h[P][i] * (1 - lr * wd), m = b1 * c->h[M][i] + (1 - b1) * g, v = b2 * c->h[V][i] + (1 - b2) * g * g;
    p -= lr * (m / (1 - pow(b1, t))) / (sqrt(v / (1 - pow(b2, t))) + eps);
    c->w[P][i] = (float)p, c->w[M][i] = (float)m, c->w[V][i] = (float)v;
  }
  for (int i = 0; C >= 0 && i < n; i++) c->w[C][i] = c->w[P][i];
}

void oc_ref_adamw(oc_case *c) { ref_adamw_at(c, 0, 1, 2, 3, c->arg[1] ? 4 : -1, ON); }

/* arg as adamw's: two tensors of ON and ON / 3 elements in one multi-tensor
 * op, the bf16 copy (arg[1]) on the first only: param 0, grad 1, m 2, v 3,
 * param 4, grad 5, m 6, v 7, (copy 8) */
void oc_build_adamw_multi(oc_case *c) {
  ot_tensor *p[2], *g[2], *m[2], *v[2], *cp[2] = {NULL, NULL};
  for (int k = 0; k < 2; k++) {
    const int64_t n = k ? ON / 3 : ON;
    p[k] = oc_acc(c, "param", OT_F32, OC_SHAPE(n), -1, 1), g[k] = oc_in(c, "grad", c->arg[0], OC_SHAPE(n), -1, 1);
    m[k] = oc_acc(c, "m", OT_F32, OC_SHAPE(n), -0.1f, 0.1f), v[k] = oc_acc(c, "v", OT_F32, OC_SHAPE(n), 0, 0.01f);
  }
  if (c->arg[1]) cp[0] = oc_out(c, "copy", OT_BF16, OC_SHAPE(ON));
  ot_adamw_opts o = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f,
                     .grad_scale = 0.5f, .scale_slot = -1, .skip_slot = -1};
  c->d[0] = 3;
  o.step_slot = oc_scalar(c, "step", c->d[0]);
  if (c->arg[2]) o.scale_slot = oc_scalar(c, "scale", c->arg[2]);
  if (c->arg[3]) o.skip_slot = oc_scalar(c, "skip", 1);
  c->f[0] = o.lr, c->f[1] = o.weight_decay, c->f[2] = o.grad_scale;
  OC_OK(ot_op_adamw_multi(c->p, 2, p, g, m, v, cp, &o));
}

void oc_ref_adamw_multi(oc_case *c) {
  ref_adamw_at(c, 0, 1, 2, 3, c->arg[1] ? 8 : -1, ON);
  ref_adamw_at(c, 4, 5, 6, 7, -1, ON / 3);
}

/* arg = {0: plain, 1: momentum, 2: nesterov}: param 0, grad 1, (buf 2) */
void oc_build_sgd(oc_case *c) {
  ot_tensor *p = oc_acc(c, "param", OT_F32, OC_SHAPE(ON), -1, 1), *g = oc_in(c, "grad", OT_F32, OC_SHAPE(ON), -1, 1);
  ot_tensor *buf = c->arg[0] ? oc_acc(c, "buf", OT_F32, OC_SHAPE(ON), -1, 1) : NULL;
  ot_sgd_opts o = {.lr = 0.1f, .momentum = c->arg[0] ? 0.9f : 0.0f, .weight_decay = 0.01f, .nesterov = c->arg[0] == 2,
                   .grad_scale = 2.0f};
  OC_OK(ot_op_sgd(c->p, p, g, buf, NULL, &o));
}

void oc_ref_sgd(oc_case *c) {
  for (int i = 0; i < ON; i++) {
    double p = c->h[0][i], g = c->h[1][i] * 2.0 + 0.01 * p;
    if (c->arg[0]) {
      double b = 0.9 * c->h[2][i] + g;
      c->w[2][i] = (float)b;
      g = c->arg[0] == 2 ? g + 0.9 * b : b;
    }
    c->w[0][i] = (float)(p - 0.1 * g);
  }
}

/* arg = {dtype, k}: x 0 *= 2^k */
void oc_build_loss_scale(oc_case *c) {
  ot_tensor *x = oc_acc(c, "dlogits", c->arg[0], OC_SHAPE(9, 31), -1, 1);
  OC_OK(ot_op_loss_scale(c->p, x, oc_scalar(c, "scale", c->arg[1])));
}

void oc_ref_loss_scale(oc_case *c) {
  for (int i = 0; i < 9 * 31; i++) c->w[0][i] = ldexpf(c->h[0][i], c->arg[1]);
}

/* arg = {grad dtype}: grad 0 (a NaN and an Inf planted), stats 1 += {sum g^2, non-finite} */
void oc_build_grad_stats(oc_case *c) {
  ot_tensor *g = oc_in(c, "grad", c->arg[0], OC_SHAPE(ON), -2, 2);
  oc_set(g, 17, NAN);
  oc_set(g, 200, -INFINITY);
  ot_tensor *st = oc_acc(c, "stats", OT_F32, OC_SHAPE(2), 1, 3);
  OC_OK(ot_op_grad_stats(c->p, st, g));
}

void oc_ref_grad_stats(oc_case *c) {
  double sq = 0;
  int bad = 0;
  for (int i = 0; i < ON; i++) {
    double g = c->h[0][i];
    if (isfinite(g)) sq += g * g;
    else bad++;
  }
  c->w[1][0] += (float)sq;
  c->w[1][1] += (float)bad;
}
