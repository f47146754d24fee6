/* bench_train_kernels.c — the training kernels that are neither GEMMs nor
 * attention, at GPT-2 124M's shapes (B = 8, T = 1024: 8192 rows, D = 768,
 * vocabulary 50257), timed with the fast GPU paths off (the portable
 * kernels, what ran before them: ot_ktrain_fast_set(0)) and on.
 *
 *   bench_train_kernels [--only PATTERNS] [--reps N] [--rows N]
 *
 * Per case: the median time of synchronous calls, old and new, the speed-up
 * and GB/s of the bytes the kernel must move (inputs read once, outputs
 * written once). AdamW compares 148 ot_k_adamw calls (one per GPT-2 tensor,
 * with bf16 copies) with one ot_k_adamw_multi. Cases over 1 s per call
 * are timed once. Prints; asserts nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "kernels/kernels.h"
#include "kernels/train_gpu.h"
#include "omptensor/args.h"

typedef enum { TK_BIAS, TK_CE, TK_LNB, TK_ADAMW, TK_ADD_BIAS, TK_GELU, TK_GELU_BWD } tk_kind;

typedef struct tk_case {
  tk_kind kind;
  const char *name;
  ot_dtype dt, dt2; /* activations; second dtype (db, dlogits, dx) */
  int64_t rows, n;
} tk_case;

enum { TK_INST = 6 }; /* buffer sets rotated over calls: the 50 MB L2 does not hold them all */

typedef struct tk_run {
  const tk_case *c;
  int dev, multi, ninst;
  void *bufs[TK_INST][6], **buf;
  /* adamw: the GPT-2 tensors */
  int nt;
  ot_kview *p, *g, *m, *v, *cp;
} tk_run;

static void *dalloc(int dev, ot_dtype dt, int64_t n, uint64_t seed, float amp) {
  void *p = NULL;
  if (ot_mem_alloc(OT_MEM_DEVICE, dev, ot_dtype_bytes(dt, n), &p) != OT_OK) return NULL;
  if (bc_fill(dev, p, dt, n, seed, amp) != OT_OK) {
    ot_mem_free(OT_MEM_DEVICE, dev, p);
    return NULL;
  }
  return p;
}

/* GPT-2 124M's parameter tensors, in the trainer's order: wte, wpe, 12
 * layers of 12, ln_f w and b. */
static int gpt2_sizes(int64_t *ne) {
  int k = 0;
  ne[k++] = 50257 * 768;
  ne[k++] = 1024 * 768;
  for (int l = 0; l < 12; l++) {
    const int64_t s[12] = {768, 768, 2304 * 768, 2304, 768 * 768, 768, 768, 768, 3072 * 768, 3072, 768 * 3072, 768};
    for (int i = 0; i < 12; i++) ne[k++] = s[i];
  }
  ne[k++] = 768;
  ne[k++] = 768;
  return k;
}

static ot_status tk_call(void *user, int rep) {
  tk_run *r = user;
  r->buf = r->bufs[rep % r->ninst];
  const tk_case *c = r->c;
  const int dev = r->dev;
  const int64_t R = c->rows, N = c->n;
  const ot_kview x2 = ot_kview_2d(r->buf[0], c->dt, R, N);
  switch (c->kind) {
  case TK_BIAS: return ot_k_bias_backward(dev, ot_kview_1d(r->buf[1], c->dt2, N), x2);
  case TK_CE: /* in place over the logits, as the trainer does */
    return ot_k_cross_entropy(dev, ot_kview_1d(r->buf[2], OT_F32, 1), ot_kview_1d(r->buf[3], OT_F32, R),
                              ot_kview_2d(r->buf[0], c->dt, R, N), x2, ot_kview_1d(r->buf[1], OT_I32, R), 1.0f);
  case TK_LNB:
    return ot_k_layernorm_backward(dev, ot_kview_2d(r->buf[2], c->dt2, R, N), ot_kview_1d(r->buf[4], OT_F32, N),
                                   ot_kview_1d(r->buf[5], OT_F32, N), ot_kview_2d(r->buf[1], c->dt, R, N), x2,
                                   ot_kview_1d(r->buf[3], OT_F32, N), 1e-5f);
  case TK_ADAMW: {
    const ot_kadamw h = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 1.0f};
    if (r->multi) return ot_k_adamw_multi(dev, r->nt, r->p, r->g, r->m, r->v, r->cp, h);
    for (int i = 0; i < r->nt; i++) OT_TRY(ot_k_adamw(dev, r->p[i], r->g[i], r->m[i], r->v[i], r->cp[i], h));
    return OT_OK;
  }
  case TK_ADD_BIAS: {
    ot_kview b = ot_kview_2d(r->buf[1], c->dt, 1, N);
    b.nb[0] = 0; /* broadcast over rows */
    b.ne[0] = R;
    return ot_k_add(dev, x2, x2, b);
  }
  case TK_GELU: return ot_k_gelu(dev, ot_kview_2d(r->buf[1], c->dt, R, N), x2);
  case TK_GELU_BWD:
    return ot_k_gelu_backward(dev, ot_kview_2d(r->buf[2], c->dt, R, N), x2, ot_kview_2d(r->buf[1], c->dt, R, N));
  }
  return OT_OK;
}

/* Bytes the kernel must move. */
static double tk_bytes(const tk_run *r) {
  const tk_case *c = r->c;
  const double e = (double)ot_dtype_bytes(c->dt, 1), e2 = (double)ot_dtype_bytes(c->dt2, 1), rn = (double)c->rows * c->n;
  switch (c->kind) {
  case TK_BIAS: return rn * e;
  case TK_CE: return 2 * rn * e;
  case TK_LNB: return rn * (2 * e + e2);
  case TK_ADAMW: {
    double b = 0;
    for (int i = 0; i < r->nt; i++) b += (double)r->p[i].ne[0] * (4 * 3 * 2 + 4 + 2);
    return b;
  }
  case TK_ADD_BIAS: return 2 * rn * e;
  case TK_GELU: return 2 * rn * e;
  case TK_GELU_BWD: return 3 * rn * e;
  }
  return 0;
}

static ot_status tk_setup1(tk_run *r, void **b) {
  const tk_case *c = r->c;
  const int dev = r->dev;
  const int64_t R = c->rows, N = c->n;
  switch (c->kind) {
  case TK_BIAS:
    b[0] = dalloc(dev, c->dt, R * N, 1, 1.0f), b[1] = dalloc(dev, c->dt2, N, 2, 1.0f);
    break;
  case TK_CE:
    b[0] = dalloc(dev, c->dt, R * N, 1, 4.0f), b[1] = dalloc(dev, OT_I32, R, 2, (float)N);
    b[2] = dalloc(dev, OT_F32, 1, 3, 1.0f), b[3] = dalloc(dev, OT_F32, R, 4, 1.0f);
    break;
  case TK_LNB:
    b[0] = dalloc(dev, c->dt, R * N, 1, 2.0f), b[1] = dalloc(dev, c->dt, R * N, 2, 1.0f);
    b[2] = dalloc(dev, c->dt2, R * N, 3, 1.0f), b[3] = dalloc(dev, OT_F32, N, 4, 1.0f);
    b[4] = dalloc(dev, OT_F32, N, 5, 1.0f), b[5] = dalloc(dev, OT_F32, N, 6, 1.0f);
    break;
  case TK_ADAMW: {
    int64_t ne[160];
    if (r->p) return OT_OK; /* one set: 2.2 GB */
    r->nt = gpt2_sizes(ne);
    ot_kview *vw = calloc(5 * (size_t)r->nt, sizeof *vw);
    if (!vw) return OT_ERR_OUT_OF_MEMORY;
    r->p = vw, r->g = vw + r->nt, r->m = vw + 2 * r->nt, r->v = vw + 3 * r->nt, r->cp = vw + 4 * r->nt;
    for (int i = 0; i < r->nt; i++) {
      r->p[i] = ot_kview_1d(dalloc(dev, OT_F32, ne[i], 10 + i, 1.0f), OT_F32, ne[i]);
      r->g[i] = ot_kview_1d(dalloc(dev, OT_F32, ne[i], 20 + i, 1.0f), OT_F32, ne[i]);
      r->m[i] = ot_kview_1d(dalloc(dev, OT_F32, ne[i], 30 + i, 0.1f), OT_F32, ne[i]);
      r->v[i] = ot_kview_1d(dalloc(dev, OT_F32, ne[i], 40 + i, 0.0f), OT_F32, ne[i]);
      r->cp[i] = ot_kview_1d(dalloc(dev, OT_BF16, ne[i], 50 + i, 1.0f), OT_BF16, ne[i]);
      if (!r->p[i].p || !r->g[i].p || !r->m[i].p || !r->v[i].p || !r->cp[i].p) return OT_ERR_DEVICE_OOM;
    }
    return OT_OK;
  }
  case TK_ADD_BIAS: b[0] = dalloc(dev, c->dt, R * N, 1, 1.0f), b[1] = dalloc(dev, c->dt, N, 2, 1.0f); break;
  case TK_GELU: b[0] = dalloc(dev, c->dt, R * N, 1, 3.0f), b[1] = dalloc(dev, c->dt, R * N, 2, 1.0f); break;
  case TK_GELU_BWD:
    b[0] = dalloc(dev, c->dt, R * N, 1, 3.0f), b[1] = dalloc(dev, c->dt, R * N, 2, 1.0f);
    b[2] = dalloc(dev, c->dt, R * N, 3, 1.0f);
    break;
  }
  for (int i = 0; i < 6; i++)
    if (!b[i] && i < (c->kind == TK_LNB ? 6 : c->kind == TK_CE ? 4 : c->kind == TK_GELU_BWD ? 3 : 2))
      return OT_ERR_DEVICE_OOM;
  return OT_OK;
}

/* Buffer sets: as many as keep the set rotation above 256 MB, at most TK_INST. */
static ot_status tk_setup(tk_run *r, const tk_case *c, int dev) {
  memset(r, 0, sizeof *r);
  r->c = c;
  r->dev = dev;
  r->buf = r->bufs[0];
  const double set = (double)c->rows * c->n * 3 * (double)ot_dtype_bytes(c->dt, 1);
  r->ninst = c->kind == TK_ADAMW || set <= 0 ? 1 : set >= 256e6 ? 1 : (int)(256e6 / set) + 1;
  if (r->ninst > TK_INST) r->ninst = TK_INST;
  for (int i = 0; i < r->ninst; i++) OT_TRY(tk_setup1(r, r->bufs[i]));
  return OT_OK;
}

static void tk_free(tk_run *r) {
  for (int k = 0; k < TK_INST; k++)
    for (int i = 0; i < 6; i++)
      if (r->bufs[k][i]) ot_mem_free(OT_MEM_DEVICE, r->dev, r->bufs[k][i]);
  for (int i = 0; i < 5 * r->nt; i++)
    if (r->p[i].p) ot_mem_free(OT_MEM_DEVICE, r->dev, r->p[i].p);
  free(r->p);
}

static double tk_time(tk_run *r, int reps) {
  double t1 = bc_now();
  if (tk_call(r, 0) != OT_OK) return -1; /* warm-up; tells how long a call takes */
  t1 = bc_now() - t1;
  double med = t1;
  if (t1 < 1.0 && bc_time(tk_call, r, 1, 3, reps, 2.0, &med, NULL) != OT_OK) return -1;
  return med;
}

enum { O_ONLY, O_REPS, O_ROWS, O_HELP };
static const ot_opt tk_optv[] = {
    {"only", 0, "PATTERNS", "comma-separated substrings of case names", O_ONLY},
    {"reps", 0, "N", "at most N timed calls per case (default 20)", O_REPS},
    {"rows", 0, "N", "rows (tokens, default 8192)", O_ROWS},
    {"help", 'h', NULL, "show this help", O_HELP},
    {0}};

typedef struct tk_opts {
  const char *only;
  long reps, rows;
} tk_opts;

static ot_status tk_on_opt(void *user, const ot_opt *opt, const char *v) {
  tk_opts *o = user;
  if (!opt) return ot_fail(OT_ERR_INVALID_ARG, "bench_train_kernels: unexpected argument '%s' (see --help)", v);
  switch (opt->id) {
  case O_ONLY: o->only = v; return OT_OK;
  case O_REPS: return bc_parse_int("--reps", v, 1, 100000, &o->reps);
  case O_ROWS: return bc_parse_int("--rows", v, 1, 1 << 20, &o->rows);
  case O_HELP: bc_usage("bench_train_kernels", tk_optv);
  }
  return OT_OK;
}

int main(int argc, char **argv) {
  tk_opts o = {NULL, 20, 8192};
  const ot_opt *tables[] = {tk_optv, NULL};
  if (ot_args_parse("bench_train_kernels", argc, argv, tables, tk_on_opt, &o) != OT_OK) {
    fprintf(stderr, "%s\n", ot_last_error());
    return 2;
  }
  const int dev = bc_device();
  const int64_t R = o.rows;
  const tk_case cases[] = {
      {TK_BIAS, "bias_backward f32 [R, 768]", OT_F32, OT_F32, R, 768},
      {TK_BIAS, "bias_backward f32 [R, 3072]", OT_F32, OT_F32, R, 3072},
      {TK_BIAS, "bias_backward bf16 [R, 768]", OT_BF16, OT_F32, R, 768},
      {TK_BIAS, "bias_backward bf16 [R, 2304]", OT_BF16, OT_F32, R, 2304},
      {TK_LNB, "layernorm_backward f32 [R, 768]", OT_F32, OT_F32, R, 768},
      {TK_LNB, "layernorm_backward bf16 [R, 768] dx f32", OT_BF16, OT_F32, R, 768},
      {TK_LNB, "layernorm_backward bf16 [R, 768] dx bf16", OT_BF16, OT_BF16, R, 768},
      {TK_CE, "cross_entropy f32 [R, 50257] in place", OT_F32, OT_F32, R, 50257},
      {TK_CE, "cross_entropy bf16 [R, 50257] in place", OT_BF16, OT_BF16, R, 50257},
      {TK_ADAMW, "adamw gpt2 148 tensors f32 + bf16 copies", OT_F32, OT_BF16, 0, 0},
      {TK_ADD_BIAS, "add bias f32 [R, 3072]", OT_F32, OT_F32, R, 3072},
      {TK_ADD_BIAS, "add bias bf16 [R, 3072]", OT_BF16, OT_BF16, R, 3072},
      {TK_GELU, "gelu bf16 [R, 3072]", OT_BF16, OT_BF16, R, 3072},
      {TK_GELU_BWD, "gelu_backward bf16 [R, 3072]", OT_BF16, OT_BF16, R, 3072},
      {TK_GELU, "gelu f32 [R, 3072]", OT_F32, OT_F32, R, 3072},
      {TK_GELU_BWD, "gelu_backward f32 [R, 3072]", OT_F32, OT_F32, R, 3072},
  };
  printf("device %d: %s; rows %lld\n", dev, bc_device_kind(dev), (long long)R);
  printf("%-46s %12s %12s %8s %10s\n", "case", "old us", "new us", "speedup", "new GB/s");
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const tk_case *c = &cases[i];
    if (!bc_match(o.only, c->name)) continue;
    tk_run r;
    if (tk_setup(&r, c, dev) != OT_OK) {
      printf("%-46s setup failed (device memory)\n", c->name);
      tk_free(&r);
      bad = 1;
      continue;
    }
    ot_ktrain_fast_set(0);
    r.multi = 0;
    const double t_old = tk_time(&r, (int)o.reps);
    ot_ktrain_fast_set(1);
    r.multi = 1;
    const double t_new = tk_time(&r, (int)o.reps);
    if (t_old < 0 || t_new < 0) {
      printf("%-46s failed: %s\n", c->name, ot_last_error());
      bad = 1;
    } else {
      printf("%-46s %12.1f %12.1f %8.2f %10.1f\n", c->name, t_old * 1e6, t_new * 1e6, t_old / t_new,
             tk_bytes(&r) / t_new / 1e9);
    }
    fflush(stdout);
    tk_free(&r);
  }
  return bad;
}
