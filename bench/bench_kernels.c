/* bench_kernels.c — the kernel library's speed against ceilings measured in
 * the same run (issue 3, "Speed").
 *
 *   bench_kernels [--quick] [--only PATTERNS] [--json FILE] [--reps N]
 *                 [--peer-fp32-tflops X] [--peer-bf16-tflops X] [--copy-bytes SIZE]
 *
 * Ceilings, measured first:
 *   copy bandwidth = the better of a plain OpenMP copy kernel and
 *   omp_target_memcpy device-to-device over --copy-bytes (1 GiB), counting
 *   read + write bytes; GEMM peers are passed in (torch.matmul in the same
 *   run: bench/torch_matmul.py; defaults from docs/gpu.md: 51 / 780 TFLOP/s).
 * Then per op and size: the median time of synchronous calls, GB/s (bytes the
 * op must move: inputs read + outputs written; matvec counts weight bytes,
 * attention K/V bytes) or TFLOP/s, the ratio to its ceiling, the target and
 * pass/miss. Ops whose working set is under 256 MiB rotate over several
 * copies of their buffers, so the GPU's 50 MB L2 does not serve them.
 * --only takes comma-separated substrings of op names (matvec,gemm).
 * --quick uses small sizes (a CPU smoke run). Exit status: 1 if a case failed. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "omptensor/args.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "ot_pragmas.h"

enum { BK_MAX_T = 5, BK_MAX_INST = 8 };
#define BK_L2_DEFEAT_BYTES (256.0 * 1048576.0)

typedef enum bk_kind {
  BK_COPY_KERNEL, BK_COPY_MEMCPY, BK_ADD, BK_MUL, BK_GELU, BK_SILU, BK_SWIGLU, BK_RMSNORM, BK_LAYERNORM,
  BK_SOFTMAX, BK_ROPE, BK_EMBED, BK_MATMUL, BK_ATTN
} bk_kind;

typedef enum bk_ceiling { BK_CEIL_NONE, BK_CEIL_COPY, BK_CEIL_FP32, BK_CEIL_BF16 } bk_ceiling;

typedef struct bk_tensor {
  ot_dtype dt;
  int ndim;
  int64_t ne[4];
  float amp; /* fill amplitude; for i32 ids the vocabulary */
} bk_tensor;

/* One row of the table: an op at one shape and dtype. Tensor order is the
 * kernel's argument order (outputs first). */
typedef struct bk_case {
  bk_kind kind;
  const char *op;
  char shape[48];
  ot_dtype dt;
  int nt;
  bk_tensor t[BK_MAX_T];
  int64_t pos;        /* rope, attention */
  int trans_b;        /* matmul */
  double bytes;       /* moved per call (GB/s), or 0 */
  double flops;       /* per call (TFLOP/s), or 0 */
  bk_ceiling ceil;
  double target;      /* fraction of the ceiling; 0: none */
} bk_case;

typedef struct bk_opts {
  int quick, reps;
  const char *only, *json;
  double peer_fp32, peer_bf16; /* TFLOP/s */
  uint64_t copy_bytes;
} bk_opts;

/* ---- building the list of cases --------------------------------------------------- */
typedef struct bk_list {
  bk_case c[96];
  int n;
} bk_list;

static bk_tensor tens(ot_dtype dt, int ndim, int64_t n0, int64_t n1, int64_t n2, float amp) {
  bk_tensor t = {dt, ndim, {n0, n1, n2, 1}, amp};
  return t;
}

static int64_t tens_numel(const bk_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->ne[d];
  return n;
}

static size_t tens_bytes(const bk_tensor *t) { return ot_dtype_bytes(t->dt, tens_numel(t)); }

static bk_case *add_case(bk_list *l, bk_kind kind, const char *op, ot_dtype dt, bk_ceiling ceil, double target) {
  if (l->n == (int)(sizeof l->c / sizeof l->c[0])) return NULL;
  bk_case *c = &l->c[l->n++];
  memset(c, 0, sizeof *c);
  c->kind = kind;
  c->op = op;
  c->dt = dt;
  c->ceil = ceil;
  c->target = target;
  return c;
}

static void push(bk_case *c, bk_tensor t) {
  if (c && c->nt < BK_MAX_T) c->t[c->nt++] = t;
}

/* Bytes = every tensor read or written once (the streaming ops). */
static void bytes_all(bk_case *c) {
  c->bytes = 0;
  for (int i = 0; i < c->nt; i++) c->bytes += (double)tens_bytes(&c->t[i]);
}

static void add_streaming(bk_list *l, const bk_opts *o) {
  static const ot_dtype dts[] = {OT_F32, OT_BF16};
  /* >= 64 MiB per operand at f32 and bf16: 64 M elements */
  const int64_t R = o->quick ? 512 : 8192, C = o->quick ? 1024 : 8192;
  const int64_t rows = o->quick ? 256 : 16384, d = o->quick ? 1024 : 4096;
  const int64_t seq = o->quick ? 256 : 16384, heads = o->quick ? 8 : 32, hd = o->quick ? 64 : 128;
  const int64_t vocab = o->quick ? 1000 : 32000, ntok = o->quick ? 512 : 16384;
  static const struct { bk_kind k; const char *name; int nin; } ew[] = {
      {BK_ADD, "add", 2}, {BK_MUL, "mul", 2}, {BK_GELU, "gelu", 1}, {BK_SILU, "silu", 1}, {BK_SWIGLU, "swiglu", 2}};
  for (size_t e = 0; e < sizeof ew / sizeof ew[0]; e++)
    for (int j = 0; j < 2; j++) {
      bk_case *c = add_case(l, ew[e].k, ew[e].name, dts[j], BK_CEIL_COPY, 0.70);
      if (!c) return;
      for (int i = 0; i <= ew[e].nin; i++) push(c, tens(dts[j], 2, R, C, 1, 4.0f));
      snprintf(c->shape, sizeof c->shape, "[%lld,%lld]", (long long)R, (long long)C);
      bytes_all(c);
    }
  for (int j = 0; j < 2; j++) {
    bk_case *c = add_case(l, BK_RMSNORM, "rmsnorm", dts[j], BK_CEIL_COPY, 0.70);
    push(c, tens(dts[j], 2, rows, d, 1, 1)), push(c, tens(dts[j], 2, rows, d, 1, 1)), push(c, tens(dts[j], 1, d, 1, 1, 1));
    c = add_case(l, BK_LAYERNORM, "layernorm", dts[j], BK_CEIL_COPY, 0.70);
    push(c, tens(dts[j], 2, rows, d, 1, 1)), push(c, tens(dts[j], 2, rows, d, 1, 1)), push(c, tens(dts[j], 1, d, 1, 1, 1));
    push(c, tens(dts[j], 1, d, 1, 1, 1));
    c = add_case(l, BK_SOFTMAX, "softmax", dts[j], BK_CEIL_COPY, 0.70);
    push(c, tens(dts[j], 2, rows, d, 1, 1)), push(c, tens(dts[j], 2, rows, d, 1, 8));
    for (int k = 1; k <= 3; k++) {
      bk_case *x = &l->c[l->n - k];
      snprintf(x->shape, sizeof x->shape, "[%lld,%lld]", (long long)rows, (long long)d);
      bytes_all(x);
    }
    /* in place: read + write */
    c = add_case(l, BK_ROPE, "rope", dts[j], BK_CEIL_COPY, 0.70);
    push(c, tens(dts[j], 3, seq, heads, hd, 1));
    c->pos = 7;
    snprintf(c->shape, sizeof c->shape, "[%lld,%lld,%lld]", (long long)seq, (long long)heads, (long long)hd);
    c->bytes = 2.0 * (double)tens_bytes(&c->t[0]);
    /* rows of the table read + out written + ids */
    c = add_case(l, BK_EMBED, "embedding", dts[j], BK_CEIL_COPY, 0.70);
    push(c, tens(dts[j], 2, ntok, d, 1, 1)), push(c, tens(dts[j], 2, vocab, d, 1, 1)), push(c, tens(OT_I32, 1, ntok, 1, 1, (float)vocab));
    snprintf(c->shape, sizeof c->shape, "%lld of [%lld,%lld]", (long long)ntok, (long long)vocab, (long long)d);
    c->bytes = 2.0 * (double)tens_bytes(&c->t[0]) + (double)tens_bytes(&c->t[2]);
  }
}

/* Decode: y[1, N] = x[1, K] @ W[N, K]^T, counted on weight bytes. Targets:
 * bf16, q8b and q4b 75 % of the copy ceiling (issue 44), f32 and f16 70 %. */
static void add_matvec(bk_list *l, const bk_opts *o) {
  static const int64_t full[][2] = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {32000, 4096}};
  static const int64_t quick[][2] = {{512, 1024}, {1024, 512}};
  static const struct { ot_dtype dt; double target; } dts[] = {
      {OT_F32, 0.70}, {OT_BF16, 0.75}, {OT_F16, 0.70}, {OT_Q8B, 0.75}, {OT_Q4B, 0.75}};
  const int64_t(*sh)[2] = o->quick ? quick : full;
  int nsh = o->quick ? 2 : 4;
  for (int s = 0; s < nsh; s++)
    for (size_t j = 0; j < sizeof dts / sizeof dts[0]; j++) {
      const int64_t N = sh[s][0], K = sh[s][1];
      bk_case *c = add_case(l, BK_MATMUL, "matvec", dts[j].dt, BK_CEIL_COPY, dts[j].target);
      if (!c) return;
      push(c, tens(OT_F32, 2, 1, N, 1, 1)), push(c, tens(OT_F32, 2, 1, K, 1, 1)), push(c, tens(dts[j].dt, 2, N, K, 1, 0.05f));
      c->trans_b = 1;
      snprintf(c->shape, sizeof c->shape, "W[%lld,%lld]", (long long)N, (long long)K);
      c->bytes = (double)tens_bytes(&c->t[2]);
    }
}

static void add_gemm(bk_list *l, const bk_opts *o) {
  const int64_t n = o->quick ? 256 : 4096;
  static const struct { ot_dtype dt; int tb; bk_ceiling ceil; double target; } g[] = {
      {OT_F32, 0, BK_CEIL_FP32, 0.25}, {OT_F32, 1, BK_CEIL_FP32, 0.25}, {OT_BF16, 1, BK_CEIL_BF16, 0.90}};
  for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
    bk_case *c = add_case(l, BK_MATMUL, "gemm", g[i].dt, g[i].ceil, g[i].target);
    if (!c) return;
    push(c, tens(OT_F32, 2, n, n, 1, 1)), push(c, tens(g[i].dt, 2, n, n, 1, 1)), push(c, tens(g[i].dt, 2, n, n, 1, 1));
    c->trans_b = g[i].tb;
    snprintf(c->shape, sizeof c->shape, "%lld^3 %s", (long long)n, g[i].tb ? "A@B^T" : "A@B");
    c->flops = 2.0 * (double)n * (double)n * (double)n;
  }
}

/* Decode attention: one query row per head over pos+1 cached keys; counted
 * on K and V bytes. No target in issue 3: reported against copy bandwidth. */
static void add_attention(bk_list *l, const bk_opts *o) {
  const int64_t heads = o->quick ? 4 : 32, hd = o->quick ? 64 : 128;
  const int64_t pos_full[] = {1024, 4096}, pos_quick[] = {64, 256};
  static const ot_dtype dts[] = {OT_F32, OT_BF16};
  for (int p = 0; p < 2; p++)
    for (int j = 0; j < 2; j++) {
      const int64_t pos = o->quick ? pos_quick[p] : pos_full[p];
      bk_case *c = add_case(l, BK_ATTN, "attention", dts[j], BK_CEIL_COPY, 0.0);
      if (!c) return;
      push(c, tens(OT_F32, 3, 1, heads, hd, 1)), push(c, tens(OT_F32, 3, 1, heads, hd, 1));
      push(c, tens(dts[j], 3, pos + 1, heads, hd, 1)), push(c, tens(dts[j], 3, pos + 1, heads, hd, 1));
      c->pos = pos;
      snprintf(c->shape, sizeof c->shape, "pos %lld h%lld d%lld", (long long)pos, (long long)heads, (long long)hd);
      c->bytes = (double)tens_bytes(&c->t[2]) + (double)tens_bytes(&c->t[3]);
    }
}

/* ---- running one case ------------------------------------------------------------------ */
typedef struct bk_run {
  const bk_case *c;
  int dev, n_inst;
  ot_kview v[BK_MAX_INST][BK_MAX_T];
} bk_run;

static void copy_kernel(int dev, float *dst, const float *src, int64_t n) {
  OT_PARFOR(dev, OT_DEVPTR(dst, src))
  for (int64_t i = 0; i < n; i++) dst[i] = src[i];
}

static ot_status call_case(void *user, int rep) {
  bk_run *r = user;
  const bk_case *c = r->c;
  const ot_kview *v = r->v[rep % r->n_inst];
  const int dev = r->dev;
  switch (c->kind) {
  case BK_COPY_KERNEL: copy_kernel(dev, v[0].p, v[1].p, ot_kview_numel(v[0])); return OT_OK;
  case BK_COPY_MEMCPY:
    if (ot_mem_copy(v[0].p, dev, v[1].p, dev, ot_dtype_bytes(v[0].dt, ot_kview_numel(v[0]))) != OT_OK)
      return ot_fail(OT_ERR_DEVICE, "omp_target_memcpy device-to-device failed on device %d", dev);
    return OT_OK;
  case BK_ADD: return ot_k_add(dev, v[0], v[1], v[2]);
  case BK_MUL: return ot_k_mul(dev, v[0], v[1], v[2]);
  case BK_GELU: return ot_k_gelu(dev, v[0], v[1]);
  case BK_SILU: return ot_k_silu(dev, v[0], v[1]);
  case BK_SWIGLU: return ot_k_swiglu(dev, v[0], v[1], v[2]);
  case BK_RMSNORM: return ot_k_rmsnorm(dev, v[0], v[1], v[2], 1e-5f);
  case BK_LAYERNORM: return ot_k_layernorm(dev, v[0], v[1], v[2], v[3], 1e-5f);
  case BK_SOFTMAX: return ot_k_softmax(dev, v[0], v[1], 1.0f, 0);
  case BK_ROPE: return ot_k_rope(dev, v[0], c->pos, ot_rope_plain(10000.0f));
  case BK_EMBED: return ot_k_embedding(dev, v[0], v[1], v[2]);
  case BK_MATMUL: return ot_k_matmul(dev, v[0], v[1], v[2], c->trans_b, 0);
  case BK_ATTN: return ot_k_attention(dev, v[0], v[1], v[2], v[3], c->pos);
  }
  return ot_fail(OT_ERR_INVALID_ARG, "bench: unknown case kind %d", (int)c->kind);
}

static void free_run(bk_run *r) {
  for (int i = 0; i < r->n_inst; i++)
    for (int t = 0; t < r->c->nt; t++) ot_mem_free(OT_MEM_DEVICE, r->dev, r->v[i][t].p);
}

/* Allocates and fills the case's buffers (several instances for small
 * working sets), then times it. */
static ot_status time_case(const bk_case *c, int dev, const bk_opts *o, double *sec, int *reps) {
  bk_run r;
  memset(&r, 0, sizeof r);
  r.c = c;
  r.dev = dev;
  double ws = 0;
  for (int t = 0; t < c->nt; t++) ws += (double)tens_bytes(&c->t[t]);
  r.n_inst = ws > 0 ? (int)(BK_L2_DEFEAT_BYTES / ws) + 1 : 1;
  if (r.n_inst > BK_MAX_INST) r.n_inst = BK_MAX_INST;
  if (o->quick || ws >= BK_L2_DEFEAT_BYTES) r.n_inst = 1;
  ot_status s = OT_OK;
  for (int i = 0; i < r.n_inst && s == OT_OK; i++)
    for (int t = 0; t < c->nt && s == OT_OK; t++) {
      const bk_tensor *bt = &c->t[t];
      void *p = NULL;
      s = ot_mem_alloc(OT_MEM_DEVICE, dev, tens_bytes(bt), &p);
      if (s == OT_OK) {
        r.v[i][t] = ot_kview_nd(p, bt->dt, bt->ndim, bt->ne);
        s = bc_fill(dev, p, bt->dt, tens_numel(bt), (uint64_t)(i * BK_MAX_T + t + 1), bt->amp);
      }
    }
  if (s == OT_OK) {
    const double budget = o->quick ? 0.05 : 0.25;
    s = bc_time(call_case, &r, r.n_inst > 1 ? r.n_inst : 2, 3, o->reps, budget, sec, reps);
  }
  free_run(&r);
  return s;
}

/* ---- the table ------------------------------------------------------------------------------ */
typedef struct bk_ceilings {
  double copy_kernel, memcpy, copy; /* GB/s */
  double fp32, bf16;                /* TFLOP/s */
} bk_ceilings;

static const char *ceil_name(bk_ceiling c) {
  switch (c) {
  case BK_CEIL_COPY: return "copy";
  case BK_CEIL_FP32: return "peer-fp32";
  case BK_CEIL_BF16: return "peer-bf16";
  default: return "";
  }
}

static double ceil_value(bk_ceiling c, const bk_ceilings *k) {
  switch (c) {
  case BK_CEIL_COPY: return k->copy;
  case BK_CEIL_FP32: return k->fp32;
  case BK_CEIL_BF16: return k->bf16;
  default: return 0;
  }
}

static void print_header(void) {
  printf("%-10s %-22s %-5s %10s %10s %-7s %6s %6s  %s\n", "op", "shape", "dtype", "time ms", "rate", "unit",
         "%ceil", "target", "result");
}

static void json_str(FILE *j, const char *key, const char *v) {
  fprintf(j, "\"%s\":\"", key);
  for (const char *p = v; *p; p++) {
    if (*p == '"' || *p == '\\') fputc('\\', j);
    if ((unsigned char)*p >= 0x20) fputc(*p, j);
  }
  fputc('"', j);
}

enum { BK_PASS, BK_MISS, BK_INFO, BK_ERROR };

/* Prints (and writes as a JSON line) the result of one case; returns BK_*. */
static int report(const bk_case *c, const bk_ceilings *k, ot_status s, double sec, int reps, FILE *j) {
  const int fl = c->flops > 0;
  const double rate = sec > 0 ? (fl ? c->flops / sec / 1e12 : c->bytes / sec / 1e9) : 0;
  const double cv = ceil_value(c->ceil, k), ratio = cv > 0 ? rate / cv : 0;
  const int res = s != OT_OK ? BK_ERROR : c->target <= 0 ? BK_INFO : ratio >= c->target ? BK_PASS : BK_MISS;
  static const char *const names[] = {"pass", "miss", "info", "error"};
  const char *result = names[res];
  if (s != OT_OK) {
    printf("%-10s %-22s %-5s  error: %s\n", c->op, c->shape, ot_dtype_name(c->dt), ot_last_error());
  } else {
    char tgt[16] = "-", pct[16] = "-";
    if (c->target > 0) snprintf(tgt, sizeof tgt, "%.0f%%", 100 * c->target);
    if (cv > 0) snprintf(pct, sizeof pct, "%.0f%%", 100 * ratio);
    printf("%-10s %-22s %-5s %10.3f %10.4g %-7s %6s %6s  %s\n", c->op, c->shape, ot_dtype_name(c->dt), sec * 1e3,
           rate, fl ? "TFLOP/s" : "GB/s", pct, tgt, result);
  }
  fflush(stdout);
  if (!j) return res;
  fputs("{\"bench\":\"kernels\",", j);
  json_str(j, "op", c->op);
  fputc(',', j);
  json_str(j, "shape", c->shape);
  fprintf(j, ",\"dtype\":\"%s\",\"ms\":%.6g,\"reps\":%d,\"bytes\":%.6g,\"flops\":%.6g,", ot_dtype_name(c->dt), sec * 1e3,
          reps, c->bytes, c->flops);
  fprintf(j, "\"%s\":%.6g,\"ceiling\":\"%s\",\"ceiling_value\":%.6g,\"ratio\":%.4f,\"target\":%.2f,\"result\":\"%s\"",
          fl ? "tflops" : "gbps", rate, ceil_name(c->ceil), cv, ratio, c->target, result);
  if (s != OT_OK) {
    fputc(',', j);
    json_str(j, "error", ot_last_error());
  }
  fputs("}\n", j);
  fflush(j);
  return res;
}

/* Copy bandwidth: a plain OpenMP copy kernel and omp_target_memcpy device to
 * device, read + write bytes. */
static ot_status measure_copy(int dev, const bk_opts *o, bk_ceilings *k, FILE *j) {
  const int64_t n = (int64_t)(o->copy_bytes / sizeof(float));
  char shape[48];
  snprintf(shape, sizeof shape, "%.0f MiB", (double)o->copy_bytes / 1048576.0);
  for (int m = 0; m < 2; m++) {
    bk_case c;
    memset(&c, 0, sizeof c);
    c.kind = m ? BK_COPY_MEMCPY : BK_COPY_KERNEL;
    c.op = m ? "memcpy-d2d" : "copy-kern";
    snprintf(c.shape, sizeof c.shape, "%s", shape);
    c.dt = OT_F32;
    c.nt = 2;
    c.t[0] = c.t[1] = tens(OT_F32, 1, n, 1, 1, 1);
    c.bytes = 2.0 * (double)n * sizeof(float);
    double sec = 0;
    int reps = 0;
    ot_status s = time_case(&c, dev, o, &sec, &reps);
    report(&c, k, s, sec, reps, j);
    if (s != OT_OK) continue;
    *(m ? &k->memcpy : &k->copy_kernel) = c.bytes / sec / 1e9;
  }
  k->copy = k->copy_kernel > k->memcpy ? k->copy_kernel : k->memcpy;
  if (k->copy <= 0) return ot_fail(OT_ERR_DEVICE, "could not measure the copy bandwidth on device %d", dev);
  return OT_OK;
}

/* ---- options --------------------------------------------------------------------------------- */
enum { O_QUICK = 1, O_ONLY, O_JSON, O_REPS, O_FP32, O_BF16, O_COPY, O_HELP };
static const ot_opt bk_optv[] = {
    {"quick", 0, NULL, "small sizes (a CPU smoke run)", O_QUICK},
    {"only", 0, "PATTERNS", "comma-separated substrings of op names to run (e.g. matvec,gemm)", O_ONLY},
    {"json", 0, "FILE", "also write each row as a JSON line to FILE", O_JSON},
    {"reps", 0, "N", "at most N timed calls per case (default 30)", O_REPS},
    {"peer-fp32-tflops", 0, "X", "torch.matmul fp32 TFLOP/s measured in this run (default 51, docs/gpu.md)", O_FP32},
    {"peer-bf16-tflops", 0, "X", "torch.matmul bf16 TFLOP/s measured in this run (default 780, docs/gpu.md)", O_BF16},
    {"copy-bytes", 0, "SIZE", "buffer for the copy-bandwidth ceiling (default 1GiB; --quick 16MiB)", O_COPY},
    {"help", 'h', NULL, "show this help", O_HELP},
    {0}};

static ot_status on_opt(void *user, const ot_opt *opt, const char *v) {
  bk_opts *o = user;
  long x;
  if (!opt) return ot_fail(OT_ERR_INVALID_ARG, "bench_kernels: unexpected argument '%s' (see --help)", v);
  switch (opt->id) {
  case O_QUICK: o->quick = 1; return OT_OK;
  case O_ONLY: o->only = v; return OT_OK;
  case O_JSON: o->json = v; return OT_OK;
  case O_REPS: OT_TRY(bc_parse_int("--reps", v, 1, 100000, &x)); o->reps = (int)x; return OT_OK;
  case O_FP32: return bc_parse_double("--peer-fp32-tflops", v, &o->peer_fp32);
  case O_BF16: return bc_parse_double("--peer-bf16-tflops", v, &o->peer_bf16);
  case O_COPY: return bc_parse_bytes("--copy-bytes", v, &o->copy_bytes);
  case O_HELP: bc_usage("bench_kernels", bk_optv);
  }
  return OT_OK;
}

int main(int argc, char **argv) {
  bk_opts o = {0, 30, NULL, NULL, 51.0, 780.0, 0};
  const ot_opt *tables[] = {bk_optv, NULL};
  if (ot_args_parse("bench_kernels", argc, argv, tables, on_opt, &o) != OT_OK) {
    fprintf(stderr, "%s\n", ot_last_error());
    return 2;
  }
  if (!o.copy_bytes) o.copy_bytes = o.quick ? 16ull << 20 : 1ull << 30;
  FILE *j = NULL;
  if (bc_open_out(o.json, &j) != OT_OK) {
    fprintf(stderr, "bench_kernels: %s\n", ot_last_error());
    return 2;
  }
  const int dev = bc_device();
  printf("bench_kernels: device %d: %s%s; peers fp32 %.1f, bf16 %.1f TFLOP/s\n", dev, bc_device_kind(dev),
         o.quick ? "; --quick sizes" : "", o.peer_fp32, o.peer_bf16);
  print_header();
  bk_ceilings k = {0, 0, 0, o.peer_fp32, o.peer_bf16};
  if (measure_copy(dev, &o, &k, j) != OT_OK) {
    fprintf(stderr, "bench_kernels: %s\n", ot_last_error());
    bc_close_out(j);
    return 1;
  }
  printf("copy bandwidth (ceiling): %.1f GB/s (%s)\n", k.copy, k.copy_kernel >= k.memcpy ? "copy kernel" : "omp_target_memcpy");
  if (j)
    fprintf(j, "{\"bench\":\"kernels\",\"op\":\"ceilings\",\"copy_kernel_gbps\":%.6g,\"memcpy_gbps\":%.6g,"
               "\"copy_gbps\":%.6g,\"peer_fp32_tflops\":%.6g,\"peer_bf16_tflops\":%.6g,\"device\":\"%s\",\"quick\":%d}\n",
            k.copy_kernel, k.memcpy, k.copy, k.fp32, k.bf16, bc_device_kind(dev), o.quick);

  bk_list *l = calloc(1, sizeof *l);
  if (!l) return 1;
  add_streaming(l, &o);
  add_matvec(l, &o);
  add_gemm(l, &o);
  add_attention(l, &o);
  int failed = 0, missed = 0, passed = 0;
  for (int i = 0; i < l->n; i++) {
    const bk_case *c = &l->c[i];
    if (!bc_match(o.only, c->op)) continue;
    double sec = 0;
    int reps = 0;
    ot_status s = time_case(c, dev, &o, &sec, &reps);
    int res = report(c, &k, s, sec, reps, j);
    failed += res == BK_ERROR, missed += res == BK_MISS, passed += res == BK_PASS;
  }
  printf("bench_kernels: %d pass, %d miss, %d error\n", passed, missed, failed);
  free(l);
  bc_close_out(j);
  return failed ? 1 : 0;
}
