/* op_table_fwd.c — builders and plain C references of the forward ops for
 * the op table (op_table.h). Tensor k of a row is the k-th the builder made;
 * references read c->h[k] and write c->w[k], in double. */
#include <math.h>
#include <stdlib.h>

#define OC_PI 3.14159265358979323846

#include "op_table.h"
#include "ot_test.h"

double oc_silu(double x) { return x / (1.0 + exp(-x)); }

double oc_gelu(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / OC_PI) * (x + 0.044715 * x * x * x))); }

void oc_rope_ref(float *x, int64_t T, int64_t H, int64_t hd, int64_t pos, float theta) {
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++) {
      float *r = x + (t * H + h) * hd;
      for (int64_t i = 0; i < hd / 2; i++) {
        double ang = (double)(pos + t) * pow(theta, -2.0 * (double)i / (double)hd);
        double x1 = r[i], x2 = r[i + hd / 2];
        r[i] = (float)(x1 * cos(ang) - x2 * sin(ang));
        r[i + hd / 2] = (float)(x2 * cos(ang) + x1 * sin(ang));
      }
    }
}

void oc_attend_ref(float *out, const float *q, const float *k, const float *v, int64_t T, int64_t H, int64_t KV,
                   int64_t hd, int64_t pos, int64_t window) {
  double *s = malloc((size_t)(pos + T) * sizeof *s);
  assert_non_null(s);
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++) {
      int64_t kh = h / (H / KV), n = pos + t + 1, j0 = window && n > window ? n - window : 0;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = j0; j < n; j++) {
        double dot = 0;
        for (int64_t d = 0; d < hd; d++) dot += (double)q[(t * H + h) * hd + d] * k[(j * KV + kh) * hd + d];
        s[j] = dot / sqrt((double)hd);
        mx = fmax(mx, s[j]);
      }
      for (int64_t j = j0; j < n; j++) sum += s[j] = exp(s[j] - mx);
      for (int64_t d = 0; d < hd; d++) {
        double o = 0;
        for (int64_t j = j0; j < n; j++) o += s[j] / sum * v[(j * KV + kh) * hd + d];
        out[(t * H + h) * hd + d] = (float)o;
      }
    }
  free(s);
}

/* ---- matmul: arg = {w dtype, trans_w, accumulate, M, batch} ------------------ */

void oc_build_matmul(oc_case *c) {
  int dt = c->arg[0], tr = c->arg[1], acc = c->arg[2];
  int64_t B = c->arg[4] ? c->arg[4] : 1, M = c->arg[3], K = 96, N = 70;
  c->d[0] = B, c->d[1] = M, c->d[2] = K, c->d[3] = N;
  ot_tensor *a = c->arg[4] ? oc_in(c, "a", OT_F32, OC_SHAPE(B, M, K), -1, 1) : oc_in(c, "a", OT_F32, OC_SHAPE(M, K), -1, 1);
  ot_tensor *w = oc_in(c, "w", dt, tr ? OC_SHAPE(N, K) : OC_SHAPE(K, N), -1, 1);
  oc_shape ys = c->arg[4] ? OC_SHAPE(B, M, N) : OC_SHAPE(M, N);
  ot_tensor *y = acc ? oc_acc(c, "y", OT_F32, ys, -1, 1) : oc_out(c, "y", OT_F32, ys);
  OC_OK(ot_op_matmul(c->p, y, a, w, tr, acc));
}

void oc_ref_matmul(oc_case *c) {
  int64_t B = c->d[0], M = c->d[1], K = c->d[2], N = c->d[3];
  const float *A = c->h[0], *W = c->h[1];
  float *Y = c->w[2];
  for (int64_t b = 0; b < B; b++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double s = c->arg[2] ? Y[(b * M + m) * N + n] : 0;
        for (int64_t k = 0; k < K; k++) s += (double)A[(b * M + m) * K + k] * (c->arg[1] ? W[n * K + k] : W[k * N + n]);
        Y[(b * M + m) * N + n] = (float)s;
      }
}

/* a [M, K] @ w[i]^T [N_i, K] -> y[i] [M, N_i]; tensor k of y[i] is 4 + i (weights 1..3) */
static void ref_linear(float *y, const float *a, const float *w, int64_t M, int64_t K, int64_t N) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) s += (double)a[m * K + k] * w[n * K + k];
      y[m * N + n] = (float)s;
    }
}

/* arg = {w dtype, M} */
void oc_build_matmul_multi(oc_case *c) {
  int64_t M = c->arg[1], K = 64, N[3] = {48, 16, 16};
  c->d[0] = M, c->d[1] = K;
  ot_tensor *a = oc_in(c, "x", OT_F32, OC_SHAPE(M, K), -1, 1), *w[3], *y[3];
  static const char *wn[3] = {"wq", "wk", "wv"}, *yn[3] = {"q", "k", "v"};
  for (int i = 0; i < 3; i++) w[i] = oc_in(c, wn[i], c->arg[0], OC_SHAPE(N[i], K), -1, 1);
  for (int i = 0; i < 3; i++) y[i] = oc_out(c, yn[i], OT_F32, OC_SHAPE(M, N[i]));
  for (int i = 0; i < 3; i++) c->d[2 + i] = N[i];
  OC_OK(ot_op_matmul_multi(c->p, 3, y, a, w));
}

void oc_ref_matmul_multi(oc_case *c) {
  for (int i = 0; i < 3; i++) ref_linear(c->w[4 + i], c->h[0], c->h[1 + i], c->d[0], c->d[1], c->d[2 + i]);
}

/* arg = {w dtype, M}: a 0, wg 1, wu 2, out 3, up 4 (scratch) */
void oc_build_matmul_swiglu(oc_case *c) {
  int64_t M = c->arg[1], K = 64, N = 72;
  c->d[0] = M, c->d[1] = K, c->d[2] = N;
  ot_tensor *a = oc_in(c, "x", OT_F32, OC_SHAPE(M, K), -1, 1);
  ot_tensor *wg = oc_in(c, "wg", c->arg[0], OC_SHAPE(N, K), -1, 1), *wu = oc_in(c, "wu", c->arg[0], OC_SHAPE(N, K), -1, 1);
  ot_tensor *y = oc_out(c, "y", OT_F32, OC_SHAPE(M, N)), *up = oc_scratch(c, "up", OT_F32, OC_SHAPE(M, N));
  OC_OK(ot_op_matmul_swiglu(c->p, y, up, a, wg, wu));
}

void oc_ref_matmul_swiglu(oc_case *c) {
  int64_t M = c->d[0], K = c->d[1], N = c->d[2];
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double g = 0, u = 0;
      for (int64_t k = 0; k < K; k++) {
        g += (double)c->h[0][m * K + k] * c->h[1][n * K + k];
        u += (double)c->h[0][m * K + k] * c->h[2][n * K + k];
      }
      c->w[3][m * N + n] = (float)(oc_silu(g) * u);
    }
}

/* ---- pointwise ------------------------------------------------------------------- */

enum { PR = 7, PC = 90 };

/* arg = {OC_ADD | OC_MUL, b broadcast over rows, in place}: a 0, b 1, out 2 (or a) */
void oc_build_binary(oc_case *c) {
  int bc = c->arg[1], inpl = c->arg[2];
  ot_tensor *a = inpl ? oc_acc(c, "a", OT_F32, OC_SHAPE(PR, PC), -2, 2) : oc_in(c, "a", OT_F32, OC_SHAPE(PR, PC), -2, 2);
  ot_tensor *b = bc ? oc_in(c, "b", OT_F32, OC_SHAPE(PC), -2, 2) : oc_in(c, "b", OT_F32, OC_SHAPE(PR, PC), -2, 2);
  ot_tensor *y = inpl ? a : oc_out(c, "y", OT_F32, OC_SHAPE(PR, PC));
  OC_OK(c->arg[0] == OC_ADD ? ot_op_add(c->p, y, a, b) : ot_op_mul(c->p, y, a, b));
}

void oc_ref_binary(oc_case *c) {
  float *y = c->w[c->arg[2] ? 0 : 2];
  for (int64_t i = 0; i < PR * PC; i++) {
    double a = c->h[0][i], b = c->h[1][c->arg[1] ? i % PC : i];
    y[i] = (float)(c->arg[0] == OC_ADD ? a + b : a * b);
  }
}

/* arg = {OC_SCALE | OC_GELU | OC_SILU, in place}: x 0, out 1 (or x) */
void oc_build_unary(oc_case *c) {
  oc_shape s = OC_SHAPE(4, 6, 50);
  ot_tensor *x = c->arg[1] ? oc_acc(c, "x", OT_F32, s, -5, 5) : oc_in(c, "x", OT_F32, s, -5, 5);
  ot_tensor *y = c->arg[1] ? x : oc_out(c, "y", OT_F32, s);
  c->f[0] = -0.75f;
  switch (c->arg[0]) {
  case OC_SCALE: OC_OK(ot_op_scale(c->p, y, x, c->f[0])); break;
  case OC_GELU: OC_OK(ot_op_gelu(c->p, y, x)); break;
  default: OC_OK(ot_op_silu(c->p, y, x)); break;
  }
}

void oc_ref_unary(oc_case *c) {
  float *y = c->w[c->arg[1] ? 0 : 1];
  for (int64_t i = 0; i < 4 * 6 * 50; i++) {
    double x = c->h[0][i];
    y[i] = (float)(c->arg[0] == OC_SCALE ? c->f[0] * x : c->arg[0] == OC_GELU ? oc_gelu(x) : oc_silu(x));
  }
}

void oc_build_swiglu(oc_case *c) {
  ot_tensor *g = oc_in(c, "gate", OT_F32, OC_SHAPE(PR, PC), -5, 5), *u = oc_in(c, "up", OT_F32, OC_SHAPE(PR, PC), -2, 2);
  OC_OK(ot_op_swiglu(c->p, oc_out(c, "y", OT_F32, OC_SHAPE(PR, PC)), g, u));
}

void oc_ref_swiglu(oc_case *c) {
  for (int64_t i = 0; i < PR * PC; i++) c->w[2][i] = (float)(oc_silu(c->h[0][i]) * c->h[1][i]);
}

/* ---- norms: x 0, w 1, (b 2), out last --------------------------------------------- */

enum { NR = 6, ND = 80 };

void oc_build_rmsnorm(oc_case *c) {
  ot_tensor *x = oc_in(c, "x", OT_F32, OC_SHAPE(NR, ND), -2, 2), *w = oc_in(c, "w", OT_F32, OC_SHAPE(ND), 0.5f, 1.5f);
  c->f[0] = 1e-5f;
  OC_OK(ot_op_rmsnorm(c->p, oc_out(c, "y", OT_F32, OC_SHAPE(NR, ND)), x, w, c->f[0]));
}

void oc_ref_rmsnorm(oc_case *c) {
  for (int r = 0; r < NR; r++) {
    const float *x = c->h[0] + r * ND;
    double ss = 0;
    for (int i = 0; i < ND; i++) ss += (double)x[i] * x[i];
    double rs = 1.0 / sqrt(ss / ND + c->f[0]);
    for (int i = 0; i < ND; i++) c->w[2][r * ND + i] = (float)(x[i] * rs * c->h[1][i]);
  }
}

void oc_build_layernorm(oc_case *c) {
  /* an offset mean, so that a variance computed without subtracting it shows */
  ot_tensor *x = oc_in(c, "x", OT_F32, OC_SHAPE(NR, ND), 1, 5), *w = oc_in(c, "w", OT_F32, OC_SHAPE(ND), 0.5f, 1.5f);
  ot_tensor *b = oc_in(c, "b", OT_F32, OC_SHAPE(ND), -1, 1);
  c->f[0] = 1e-5f;
  OC_OK(ot_op_layernorm(c->p, oc_out(c, "y", OT_F32, OC_SHAPE(NR, ND)), x, w, b, c->f[0]));
}

void oc_ref_layernorm(oc_case *c) {
  for (int r = 0; r < NR; r++) {
    const float *x = c->h[0] + r * ND;
    double mean = 0, var = 0;
    for (int i = 0; i < ND; i++) mean += x[i];
    mean /= ND;
    for (int i = 0; i < ND; i++) var += (x[i] - mean) * (x[i] - mean);
    double rs = 1.0 / sqrt(var / ND + c->f[0]);
    for (int i = 0; i < ND; i++) c->w[3][r * ND + i] = (float)((x[i] - mean) * rs * c->h[1][i] + c->h[2][i]);
  }
}

/* ---- RoPE and attention with a KV cache ------------------------------------------------ */

enum { RT = 5, RH = 3, RHD = 32 };

void oc_build_rope(oc_case *c) {
  ot_tensor *x = oc_acc(c, "x", OT_F32, OC_SHAPE(RT, RH, RHD), -1, 1);
  c->d[0] = 7; /* pos */
  c->f[0] = 10000.0f;
  OC_OK(ot_op_rope(c->p, x, oc_scalar(c, "pos", c->d[0]), ot_rope_plain(c->f[0])));
}

void oc_ref_rope(oc_case *c) { oc_rope_ref(c->w[0], RT, RH, RHD, c->d[0], c->f[0]); }

/* head_dim 32: the GPU's decode attention takes it (D % 32 == 0) */
enum { AH = 4, AKV = 2, AHD = 32 };

/* arg = {T, pos}: q 0, k 1, v 2, k_cache 3, v_cache 4, out 5; the caches
 * hold pos + T + 2 rows. Cache rows outside [pos, pos + T) start random
 * (earlier tokens, and two rows never read). pos 70: keys in two tiles of
 * the CPU kernel (64), three of the GPU's (32). */
static void build_attn(oc_case *c, int rope) {
  int64_t T = c->arg[0], ASEQ = c->arg[1] + T + 2;
  c->d[0] = T, c->d[1] = c->arg[1], c->d[2] = c->arg[2]; /* arg[2]: a sliding window (rope only; 0: none) */
  c->f[0] = 10000.0f;
  ot_tensor *q = rope ? oc_acc(c, "q", OT_F32, OC_SHAPE(T, AH, AHD), -1, 1) : oc_in(c, "q", OT_F32, OC_SHAPE(T, AH, AHD), -1, 1);
  ot_tensor *k = rope ? oc_acc(c, "k", OT_F32, OC_SHAPE(T, AKV, AHD), -1, 1) : oc_in(c, "k", OT_F32, OC_SHAPE(T, AKV, AHD), -1, 1);
  ot_tensor *v = oc_in(c, "v", OT_F32, OC_SHAPE(T, AKV, AHD), -1, 1);
  ot_tensor *kc = oc_acc(c, "k_cache", OT_F32, OC_SHAPE(ASEQ, AKV, AHD), -1, 1);
  ot_tensor *vc = oc_acc(c, "v_cache", OT_F32, OC_SHAPE(ASEQ, AKV, AHD), -1, 1);
  ot_tensor *out = oc_out(c, "out", OT_F32, OC_SHAPE(T, AH, AHD));
  int slot = oc_scalar(c, "pos", c->d[1]);
  if (rope && c->d[2]) OC_OK(ot_op_rope_attention_window(c->p, out, q, k, v, kc, vc, slot, ot_rope_plain(c->f[0]), c->d[2]));
  else OC_OK(rope ? ot_op_rope_attention(c->p, out, q, k, v, kc, vc, slot, ot_rope_plain(c->f[0]))
                  : ot_op_attention(c->p, out, q, k, v, kc, vc, slot));
}

static void ref_attn(oc_case *c, int rope) {
  int64_t T = c->d[0], pos = c->d[1], row = AKV * AHD;
  const float *q = c->h[0], *k = c->h[1];
  if (rope) {
    oc_rope_ref(c->w[0], T, AH, AHD, pos, c->f[0]);
    oc_rope_ref(c->w[1], T, AKV, AHD, pos, c->f[0]);
    q = c->w[0], k = c->w[1];
  }
  for (int64_t i = 0; i < T * row; i++) {
    c->w[3][pos * row + i] = k[i];
    c->w[4][pos * row + i] = c->h[2][i];
  }
  oc_attend_ref(c->w[5], q, c->w[3], c->w[4], T, AH, AKV, AHD, pos, c->d[2]);
}

void oc_build_attention(oc_case *c) { build_attn(c, 0); }
void oc_ref_attention(oc_case *c) { ref_attn(c, 0); }
void oc_build_rope_attention(oc_case *c) { build_attn(c, 1); }
void oc_ref_rope_attention(oc_case *c) { ref_attn(c, 1); }

/* rope_attention_rows, arg = {window}: q 0, k 1, v 2, k_cache 3, v_cache 4, rows 5, out 6.
 * Caches of BS slots x BP positions, random (earlier tokens of each slot).
 * Rows: a prompt of 3 packed in slot 2 (positions 0..2, each row seeing
 * the ones before it through the cache), a decode row of slot 0 at 70 (two
 * tiles of keys), a padding row (slot -1: nothing written, output 0), a row
 * of slot 1 at 5, and slot 0 again at 71 (it sees row 3's key at 70). */
enum { BS = 3, BP = 80, BT = 7 };
static const int32_t brows[BT][2] = {{2, 0}, {2, 1}, {2, 2}, {0, 70}, {-1, 0}, {1, 5}, {0, 71}};

void oc_build_rope_attention_rows(oc_case *c) {
  c->d[0] = c->arg[0];
  c->f[0] = 10000.0f;
  ot_tensor *q = oc_acc(c, "q", OT_F32, OC_SHAPE(BT, AH, AHD), -1, 1);
  ot_tensor *k = oc_acc(c, "k", OT_F32, OC_SHAPE(BT, AKV, AHD), -1, 1);
  ot_tensor *v = oc_in(c, "v", OT_F32, OC_SHAPE(BT, AKV, AHD), -1, 1);
  ot_tensor *kc = oc_acc(c, "k_cache", OT_F32, OC_SHAPE(BS, BP, AKV, AHD), -1, 1);
  ot_tensor *vc = oc_acc(c, "v_cache", OT_F32, OC_SHAPE(BS, BP, AKV, AHD), -1, 1);
  ot_tensor *rows = oc_in(c, "rows", OT_I32, OC_SHAPE(BT, 2), 0, 1);
  for (int t = 0; t < BT; t++) oc_i32(rows)[2 * t] = brows[t][0], oc_i32(rows)[2 * t + 1] = brows[t][1];
  ot_tensor *out = oc_out(c, "out", OT_F32, OC_SHAPE(BT, AH, AHD));
  OC_OK(ot_op_rope_attention_rows(c->p, out, q, k, v, kc, vc, rows, ot_rope_plain(c->f[0]), c->d[0]));
}

void oc_ref_rope_attention_rows(oc_case *c) {
  const int64_t row = AKV * AHD, slot_elems = BP * row;
  for (int t = 0; t < BT; t++) { /* every row appended first */
    const int64_t s = brows[t][0], pos = brows[t][1];
    if (s < 0) continue;
    oc_rope_ref(c->w[0] + t * AH * AHD, 1, AH, AHD, pos, c->f[0]);
    oc_rope_ref(c->w[1] + t * row, 1, AKV, AHD, pos, c->f[0]);
    for (int64_t i = 0; i < row; i++) {
      c->w[3][s * slot_elems + pos * row + i] = c->w[1][t * row + i];
      c->w[4][s * slot_elems + pos * row + i] = c->h[2][t * row + i];
    }
  }
  for (int t = 0; t < BT; t++) {
    const int64_t s = brows[t][0], pos = brows[t][1];
    float *o = c->w[6] + t * AH * AHD;
    if (s < 0) {
      for (int64_t i = 0; i < AH * AHD; i++) o[i] = 0.0f;
      continue;
    }
    oc_attend_ref(o, c->w[0] + t * AH * AHD, c->w[3] + s * slot_elems, c->w[4] + s * slot_elems, 1, AH, AKV, AHD, pos,
                  c->d[0]);
  }
}

/* ---- embedding, positions, argmax --------------------------------------------------- */

enum { EV = 50, ED = 64, ET = 9 };

/* arg = {table dtype}: table 0, ids 1, out 2; ids 2 and 5 are outside the table */
void oc_build_embedding(oc_case *c) {
  ot_tensor *tab = oc_in(c, "table", c->arg[0], OC_SHAPE(EV, ED), -1, 1);
  ot_tensor *ids = oc_in(c, "ids", OT_I32, OC_SHAPE(ET), 0, EV - 1);
  oc_i32(ids)[2] = EV;
  oc_i32(ids)[5] = -3;
  oc_i32(ids)[6] = oc_i32(ids)[1];
  OC_OK(ot_op_embedding(c->p, oc_out(c, "out", OT_F32, OC_SHAPE(ET, ED)), tab, ids));
}

void oc_ref_embedding(oc_case *c) {
  for (int t = 0; t < ET; t++) {
    int id = (int)c->h[1][t];
    for (int i = 0; i < ED; i++) c->w[2][t * ED + i] = id >= 0 && id < EV ? c->h[0][id * ED + i] : 0.0f;
  }
}

enum { PP = 16, PT = 6, PD = 40 };

/* table 0, out 1 (+= rows pos..pos+T-1) */
void oc_build_add_positions(oc_case *c) {
  ot_tensor *tab = oc_in(c, "wpe", OT_F32, OC_SHAPE(PP, PD), -1, 1);
  ot_tensor *x = oc_acc(c, "x", OT_F32, OC_SHAPE(PT, PD), -1, 1);
  c->d[0] = 5;
  OC_OK(ot_op_add_positions(c->p, x, tab, oc_scalar(c, "pos", c->d[0])));
}

void oc_ref_add_positions(oc_case *c) {
  for (int64_t i = 0; i < PT * PD; i++) c->w[1][i] = (float)((double)c->h[1][i] + c->h[0][c->d[0] * PD + i]);
}

enum { XR = 6, XN = 100 };

/* arg = {x dtype}: x 0, idx 1. Row 1 has a tie (the first wins), row 2 its
 * maximum last, row 3 first, row 4 all negative. */
void oc_build_argmax(oc_case *c) {
  ot_tensor *x = oc_in(c, "logits", c->arg[0], OC_SHAPE(XR, XN), -1, 1);
  oc_set(x, 1 * XN + 10, 5.0f);
  oc_set(x, 1 * XN + 70, 5.0f);
  oc_set(x, 2 * XN + XN - 1, 3.0f);
  oc_set(x, 3 * XN + 0, 3.0f);
  for (int i = 0; i < XN; i++) oc_set(x, 4 * XN + i, -2.0f - (float)((i * 37) % XN) / 64.0f);
  OC_OK(ot_op_argmax(c->p, oc_out(c, "idx", OT_I32, OC_SHAPE(XR)), x));
}

void oc_ref_argmax(oc_case *c) {
  for (int r = 0; r < XR; r++) {
    int best = 0;
    for (int i = 1; i < XN; i++)
      if (c->h[0][r * XN + i] > c->h[0][r * XN + best]) best = i;
    c->w[1][r] = (float)best;
  }
}
