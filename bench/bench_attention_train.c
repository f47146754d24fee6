/* bench_attention_train.c — causal attention of training (no KV cache), the
 * batched ops' kernels against the per-sequence kernels they replace.
 *
 *   bench_attention_train [--quick] [B T H hd]     (default 8 1024 12 64: GPT-2 124M)
 *
 * For f32 and bf16 storage: the median time of one synchronous call of
 *   old  B calls of ot_k_attention / ot_k_attention_backward (one sequence each)
 *   new  one call of ot_k_causal_attention / ot_k_causal_attention_backward
 * per call and per sequence, with TFLOP/s (forward 2 B H T^2 hd: the causal
 * half of q k^T and p v; backward 2.5 times that), then the normalised
 * difference of the new results from the old ones (the old kernels are
 * tested against the references; on a GPU this checks the new kernels at
 * the full size). Prints numbers; asserts nothing. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "core/error.h"
#include "kernels/kernels.h"

enum { NB = 11 }; /* q k v out dout dq dk dv ws out2 dq2 */

typedef struct ab_run {
  int dev, old, bwd;
  int64_t B, T, H, hd;
  ot_dtype dt;
  void *p[NB];
} ab_run;

static ot_kview tv(const ab_run *r, int i, int64_t b) {
  const int ws = i == 8;
  const int64_t last = ws ? 2 : r->hd, per = r->T * r->H * last;
  const ot_dtype dt = ws ? OT_F32 : r->dt;
  void *p = (char *)r->p[i] + (b >= 0 ? ot_dtype_bytes(dt, b * per) : 0);
  if (b >= 0) return ot_kview_3d(p, dt, r->T, r->H, last);
  const int64_t ne[4] = {r->B, r->T, r->H, last};
  return ot_kview_nd(p, dt, 4, ne);
}

static ot_status call(void *user, int rep) {
  (void)rep;
  const ab_run *r = user;
  if (!r->old)
    return r->bwd ? ot_k_causal_attention_backward(r->dev, tv(r, 5, -1), tv(r, 6, -1), tv(r, 7, -1), tv(r, 8, -1),
                                                   tv(r, 4, -1), tv(r, 3, -1), tv(r, 0, -1), tv(r, 1, -1), tv(r, 2, -1))
                  : ot_k_causal_attention(r->dev, tv(r, 3, -1), tv(r, 8, -1), tv(r, 0, -1), tv(r, 1, -1), tv(r, 2, -1));
  for (int64_t b = 0; b < r->B; b++)
    OT_TRY(r->bwd ? ot_k_attention_backward(r->dev, tv(r, 5, b), tv(r, 6, b), tv(r, 7, b), tv(r, 8, b), tv(r, 4, b),
                                            tv(r, 0, b), tv(r, 1, b), tv(r, 2, b))
                  : ot_k_attention(r->dev, tv(r, 3, b), tv(r, 0, b), tv(r, 1, b), tv(r, 2, b), 0));
  return OT_OK;
}

/* ||a - b|| / ||b|| of n elements of device buffers */
static double diff(const ab_run *r, const void *a, const void *b, int64_t n) {
  const size_t bytes = ot_dtype_bytes(r->dt, n);
  void *ha = malloc(bytes), *hb = malloc(bytes);
  float *fa = malloc((size_t)n * sizeof(float)), *fb = malloc((size_t)n * sizeof(float));
  double num = 0, den = 0;
  const int host = omp_get_initial_device();
  if (ha && hb && fa && fb && ot_mem_copy(ha, host, a, r->dev, bytes) == OT_OK &&
      ot_mem_copy(hb, host, b, r->dev, bytes) == OT_OK && ot_convert(OT_F32, fa, r->dt, ha, n) == OT_OK &&
      ot_convert(OT_F32, fb, r->dt, hb, n) == OT_OK)
    for (int64_t i = 0; i < n; i++) {
      num += ((double)fa[i] - fb[i]) * ((double)fa[i] - fb[i]);
      den += (double)fb[i] * fb[i];
    }
  else
    num = NAN;
  free(ha), free(hb), free(fa), free(fb);
  return sqrt(num / (den > 0 ? den : 1));
}

static ot_status bench_dt(ab_run *r) {
  const int64_t nq = r->B * r->T * r->H * r->hd, nw = r->B * r->T * r->H * 2;
  ot_status s = OT_OK;
  for (int i = 0; i < NB && s == OT_OK; i++) {
    const int64_t n = i == 8 ? nw : nq;
    const ot_dtype dt = i == 8 ? OT_F32 : r->dt;
    s = ot_mem_alloc(OT_MEM_DEVICE, r->dev, ot_dtype_bytes(dt, n), &r->p[i]);
    if (s == OT_OK) s = bc_fill(r->dev, r->p[i], dt, n, (uint64_t)i + 1, i < 3 ? 1.5f : 1.0f);
  }
  const double fl = 2.0 * (double)r->B * (double)r->H * (double)r->T * (double)r->T * (double)r->hd;
  double t[2][2] = {{0}};
  for (int old = 1; old >= 0 && s == OT_OK; old--)
    for (int bwd = 0; bwd < 2 && s == OT_OK; bwd++) {
      r->old = old, r->bwd = bwd;
      /* the old bf16 backward is the portable one: about a second a call */
      const int slow = old && r->dt != OT_F32;
      s = bc_time(call, r, 1, slow ? 1 : 3, slow ? 2 : 50, slow ? 0.1 : 0.5, &t[old][bwd], NULL);
      if (s != OT_OK) break;
      printf("%-4s %-4s %-8s B %lld T %lld H %lld hd %lld: %9.1f us per call, %8.1f us per sequence, %6.2f TFLOP/s\n",
             ot_dtype_name(r->dt), old ? "old" : "new", bwd ? "backward" : "forward", (long long)r->B,
             (long long)r->T, (long long)r->H, (long long)r->hd, t[old][bwd] * 1e6, t[old][bwd] * 1e6 / (double)r->B,
             (bwd ? 2.5 : 1.0) * fl / t[old][bwd] * 1e-12);
    }
  if (s == OT_OK)
    printf("%-4s speed-up new/old: forward %.1fx, backward %.1fx, together %.1fx\n", ot_dtype_name(r->dt),
           t[1][0] / t[0][0], t[1][1] / t[0][1], (t[1][0] + t[1][1]) / (t[0][0] + t[0][1]));
  /* results: old into out2/dq2, new into out/dq (ws from the new forward, as training has it) */
  if (s == OT_OK) {
    ab_run o = *r;
    o.p[3] = r->p[9], o.p[5] = r->p[10], o.old = 1, o.bwd = 0;
    s = call(&o, 0);
    if (s == OT_OK) o.bwd = 1, s = call(&o, 0);
    ab_run n = *r;
    n.old = 0, n.bwd = 0;
    if (s == OT_OK) s = call(&n, 0);
    if (s == OT_OK) n.bwd = 1, s = call(&n, 0);
    if (s == OT_OK)
      printf("%-4s new vs old: out %.2e, dq %.2e (normalised difference)\n", ot_dtype_name(r->dt),
             diff(r, r->p[3], r->p[9], nq), diff(r, r->p[5], r->p[10], nq));
  }
  for (int i = 0; i < NB; i++) ot_mem_free(OT_MEM_DEVICE, r->dev, r->p[i]);
  return s;
}

int main(int argc, char **argv) {
  int quick = argc > 1 && !strcmp(argv[1], "--quick");
  long v[4] = {8, 1024, 12, 64};
  if (quick) v[0] = 2, v[1] = 100, v[2] = 2;
  for (int i = 0; i < 4 && 1 + quick + i < argc; i++) v[i] = atol(argv[1 + quick + i]);
  ab_run r;
  memset(&r, 0, sizeof r);
  r.dev = bc_device();
  r.B = v[0], r.T = v[1], r.H = v[2], r.hd = v[3];
  printf("device %d (%s)\n", r.dev, bc_device_kind(r.dev));
  static const ot_dtype dts[] = {OT_F32, OT_BF16};
  for (int i = 0; i < 2; i++) {
    r.dt = dts[i];
    ot_status s = bench_dt(&r);
    if (s != OT_OK) {
      fprintf(stderr, "bench_attention_train %s: %s\n", ot_dtype_name(r.dt), ot_last_error());
      return 1;
    }
  }
  return 0;
}
