/* bench_stream.c — the scheduler streaming weights under a budget (issue 4,
 * "Speed").
 *
 *   bench_stream [--quick] [--layer-bytes SIZE] [--layers N] [--budget SIZE]
 *                [--dtype f32|bf16] [--hidden K] [--replays N] [--heavy-factor X]
 *                [--backends map,usm] [--strategies balanced,aggressive]
 *                [--trace FILE] [--json FILE] [--summaries all|one|none]
 *
 * A program of L "layers": layer i reads its weight W_i [N, K] (--layer-bytes
 * each, total 4x the default budget) and does y (+)= x @ W_i^T, the decode
 * matrix-vector product (reads each weight byte once). Two variants:
 *   light  one pass per layer: the kernel takes a few percent of the layer's
 *          upload time, so a steady replay is bound by the uploads;
 *          judged: bytes to device / replay time >= 85 % of the pinned
 *          host->device bandwidth measured in this run.
 *   heavy  P passes per layer, P calibrated so that a layer's kernel takes
 *          --heavy-factor (1.2) x its upload time at the pinned bandwidth;
 *          judged: replay time <= 1.1 x max(compute alone, transfer alone),
 *          compute alone = a replay with every weight resident (strategy
 *          none), transfer alone = the replay's bytes to device at the pinned
 *          bandwidth.
 * Per backend (map, usm; a backend the context refuses is skipped) and
 * strategy (balanced, aggressive): one plan, a first run from an empty
 * device, then --replays steady replays (the median is reported). Prints a
 * table, the trace summary of one replay per backend (--summaries), checks
 * each replay's trace against the budget, and writes one Chrome trace per
 * configuration with --trace FILE (FILE-<backend>-<variant>-<strategy>.json).
 * y's checksum must agree across rows of one variant (same program, same
 * data). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "omptensor/args.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "memory/device.h"
#include "ot_pragmas.h"

enum { SB_MAX_LIST = 4 };

typedef struct sb_opts {
  int quick, layers, replays;
  uint64_t layer_bytes, budget;
  int64_t hidden;
  ot_dtype dt;
  double heavy_factor;
  int n_backends, n_strategies;
  ot_backend backends[SB_MAX_LIST];
  ot_strategy strategies[SB_MAX_LIST];
  const char *trace, *json, *summaries;
} sb_opts;

/* ---- the layer op -------------------------------------------------------------------- */
typedef struct sb_params {
  int accumulate; /* 0 for layer 0 (writes y), 1 after (y += ...) */
  int passes;
} sb_params;

static ot_kview view_of(const ot_tensor *t, void *p) {
  ot_kview v;
  memset(&v, 0, sizeof v);
  v.p = p;
  v.dt = ot_tensor_dtype(t);
  v.ndim = ot_tensor_ndim(t);
  for (int d = 0; d < v.ndim; d++) v.ne[d] = ot_tensor_dim(t, d), v.nb[d] = ot_tensor_stride(t, d);
  return v;
}

/* in: x [1, K], W [N, K] (and y [1, N] when accumulating); out: y [1, N] */
static ot_status layer_run(const ot_op_exec *e) {
  const sb_params *p = e->params;
  ot_kview x = view_of(e->in_t[0], e->in[0]), w = view_of(e->in_t[1], e->in[1]);
  ot_kview y = view_of(e->out_t[0], e->out[0]);
  for (int k = 0; k < p->passes; k++) OT_TRY(ot_k_matmul(e->device, y, x, w, 1, p->accumulate || k > 0));
  return OT_OK;
}

/* ---- the model: weights and programs ------------------------------------------------- */
typedef struct sb_model {
  ot_ctx *ctx;
  ot_tensor *x, *y;
  ot_tensor **w; /* [layers] */
  int layers;
  int64_t N, K;
} sb_model;

static void model_destroy(sb_model *m) {
  if (!m) return;
  for (int i = 0; m->w && i < m->layers; i++) ot_tensor_destroy(m->w[i]);
  free(m->w);
  ot_tensor_destroy(m->x);
  ot_tensor_destroy(m->y);
  ot_ctx_destroy(m->ctx);
  memset(m, 0, sizeof *m);
}

/* Fills a home with values in [-amp, amp) on host threads (weights of
 * several GiB: a serial loop would dominate the run). */
static void fill_home(ot_tensor *t, uint64_t seed, float amp) {
  const int64_t n = ot_tensor_numel(t);
  const int bf = ot_tensor_dtype(t) == OT_BF16;
  void *d = ot_tensor_data(t);
  OT_HOST_PARFOR
  for (int64_t i = 0; i < n; i++) {
    uint64_t h = (seed + (uint64_t)i) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    float v = amp * ((float)(h >> 40) * (2.0f / 16777216.0f) - 1.0f);
    if (bf) ((uint16_t *)d)[i] = ot_f32_to_bf16(v);
    else ((float *)d)[i] = v;
  }
}

static ot_status model_create(ot_backend b, uint64_t ctx_budget, const sb_opts *o, sb_model *m) {
  memset(m, 0, sizeof *m);
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = b;
  co.budget_bytes = ctx_budget;
  OT_TRY(ot_ctx_create(&co, &m->ctx));
  m->K = o->hidden;
  m->N = (int64_t)(o->layer_bytes / ot_dtype_bytes(o->dt, m->K));
  m->layers = o->layers;
  if (m->N < 1) return ot_fail(OT_ERR_INVALID_ARG, "--layer-bytes %llu is less than one row of %lld %s values",
                               (unsigned long long)o->layer_bytes, (long long)m->K, ot_dtype_name(o->dt));
  const int64_t xs[2] = {1, m->K}, ys[2] = {1, m->N}, ws[2] = {m->N, m->K};
  OT_TRY(ot_tensor_create(m->ctx, "x", OT_F32, 2, xs, &m->x));
  OT_TRY(ot_tensor_create(m->ctx, "y", OT_F32, 2, ys, &m->y));
  fill_home(m->x, 1, 1.0f);
  m->w = calloc((size_t)m->layers, sizeof *m->w);
  if (!m->w) return ot_fail(OT_ERR_OUT_OF_MEMORY, "bench_stream: no memory");
  for (int i = 0; i < m->layers; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "w%d", i);
    OT_TRY(ot_tensor_create(m->ctx, nm, o->dt, 2, ws, &m->w[i]));
    fill_home(m->w[i], 1000u * (uint64_t)(i + 1), 0.05f);
  }
  return OT_OK;
}

static ot_status program_create(sb_model *m, int passes, ot_program **out) {
  ot_program *p;
  OT_TRY(ot_program_create(m->ctx, &p));
  *out = p;
  for (int i = 0; i < m->layers; i++) {
    sb_params prm = {i > 0, passes};
    ot_tensor *in[3] = {m->x, m->w[i], m->y}, *outs[1] = {m->y};
    char nm[32];
    snprintf(nm, sizeof nm, "layer%d", i);
    ot_op_desc d = {nm, layer_run, i > 0 ? 3 : 2, in, 1, outs, &prm, sizeof prm,
                    2.0 * (double)passes * (double)m->N * (double)m->K, (double)ot_tensor_nbytes(m->w[i])};
    OT_TRY(ot_program_add_op(p, &d));
  }
  OT_TRY(ot_program_mark_input(p, m->x));
  OT_TRY(ot_program_mark_output(p, m->y));
  return OT_OK;
}

static double checksum(const ot_tensor *y) {
  const float *d = ot_tensor_data(y);
  double s = 0;
  for (int64_t i = 0; i < ot_tensor_numel(y); i++) s += d[i];
  return s;
}

/* ---- ceilings ------------------------------------------------------------------------------- */
/* Pinned host -> device bandwidth with ot_mem_copy (best of 5). */
static ot_status pinned_h2d(int dev, uint64_t bytes, double *gbps) {
  void *pin = NULL, *d = NULL;
  ot_status s = ot_mem_alloc(OT_MEM_PINNED, dev, bytes, &pin);
  if (s == OT_OK) s = ot_mem_alloc(OT_MEM_DEVICE, dev, bytes, &d);
  double best = 1e30;
  if (s == OT_OK) {
    memset(pin, 1, bytes);
    s = ot_mem_copy(d, dev, pin, OT_DEVICE_HOST, bytes); /* warm-up */
  }
  for (int i = 0; i < 5 && s == OT_OK; i++) {
    double t = bc_now();
    s = ot_mem_copy(d, dev, pin, OT_DEVICE_HOST, bytes);
    t = bc_now() - t;
    if (t < best) best = t;
  }
  ot_mem_free(OT_MEM_DEVICE, dev, d);
  ot_mem_free(OT_MEM_PINNED, dev, pin);
  *gbps = s == OT_OK ? (double)bytes / best / 1e9 : 0;
  return s;
}

typedef struct sb_pass {
  int dev;
  ot_kview y, x, w;
} sb_pass;

static ot_status one_pass(void *user, int rep) {
  (void)rep;
  sb_pass *p = user;
  return ot_k_matmul(p->dev, p->y, p->x, p->w, 1, 1);
}

/* Time of one layer pass on resident data (for the heavy variant's passes). */
static ot_status pass_time(int dev, const sb_opts *o, double *sec) {
  const int64_t K = o->hidden, N = (int64_t)(o->layer_bytes / ot_dtype_bytes(o->dt, K));
  void *x = NULL, *y = NULL, *w = NULL;
  ot_status s = ot_mem_alloc(OT_MEM_DEVICE, dev, ot_dtype_bytes(OT_F32, K), &x);
  if (s == OT_OK) s = ot_mem_alloc(OT_MEM_DEVICE, dev, ot_dtype_bytes(OT_F32, N), &y);
  if (s == OT_OK) s = ot_mem_alloc(OT_MEM_DEVICE, dev, ot_dtype_bytes(o->dt, N * K), &w);
  if (s == OT_OK) s = bc_fill(dev, x, OT_F32, K, 1, 1.0f);
  if (s == OT_OK) s = bc_fill(dev, y, OT_F32, N, 2, 1.0f);
  if (s == OT_OK) s = bc_fill(dev, w, o->dt, N * K, 3, 0.05f);
  if (s == OT_OK) {
    sb_pass p = {dev, ot_kview_2d(y, OT_F32, 1, N), ot_kview_2d(x, OT_F32, 1, K), ot_kview_2d(w, o->dt, N, K)};
    s = bc_time(one_pass, &p, 2, 5, 20, 0.2, sec, NULL);
  }
  ot_mem_free(OT_MEM_DEVICE, dev, x);
  ot_mem_free(OT_MEM_DEVICE, dev, y);
  ot_mem_free(OT_MEM_DEVICE, dev, w);
  return s;
}

/* ---- one configuration ---------------------------------------------------------------------- */
typedef struct sb_result {
  double replay_s;      /* median steady replay */
  ot_trace_summary sum; /* of the last replay */
  ot_plan_stats steady;
  double sum_y;
  const char *budget_check; /* "ok" or the error */
  char budget_err[160];
} sb_result;

static void trace_path(const char *base, const char *tag, char *out, size_t n) {
  const char *dot = strrchr(base, '.');
  if (dot && !strcmp(dot, ".json")) snprintf(out, n, "%.*s-%s.json", (int)(dot - base), base, tag);
  else snprintf(out, n, "%s-%s.json", base, tag);
}

/* Plans prog, runs it once from an empty device, then `replays` times. */
static ot_status run_config(sb_model *m, ot_program *prog, ot_strategy st, uint64_t budget, const sb_opts *o,
                            const char *tag, sb_result *r) {
  memset(r, 0, sizeof *r);
  ot_sched_opts so = ot_sched_opts_default();
  so.strategy = st;
  so.budget_bytes = budget;
  ot_plan *plan = NULL;
  ot_trace *tr = NULL;
  double *t = calloc((size_t)o->replays, sizeof *t);
  ot_status s = t ? OT_OK : ot_fail(OT_ERR_OUT_OF_MEMORY, "bench_stream: no memory");
  if (s == OT_OK) s = ot_sched_plan(m->ctx, prog, &so, &plan);
  if (s == OT_OK) s = ot_trace_create(&tr);
  if (s == OT_OK) s = ot_sched_run(plan, NULL); /* first run: from an empty device */
  for (int i = 0; i < o->replays && s == OT_OK; i++) {
    ot_trace_clear(tr);
    double t0 = bc_now();
    s = ot_sched_run(plan, tr);
    t[i] = bc_now() - t0;
  }
  if (s == OT_OK) {
    r->replay_s = bc_median(t, o->replays);
    r->sum = ot_trace_summarize(tr);
    r->steady = ot_plan_get_stats(plan, 1);
    r->sum_y = checksum(m->y);
    r->budget_check = "ok";
    if (ot_trace_check_budget(tr, budget) != OT_OK) {
      snprintf(r->budget_err, sizeof r->budget_err, "%s", ot_last_error());
      r->budget_check = r->budget_err;
    }
    if (o->trace) {
      char path[1024];
      trace_path(o->trace, tag, path, sizeof path);
      if (ot_trace_write_chrome(tr, path) != OT_OK) fprintf(stderr, "bench_stream: %s\n", ot_last_error());
    }
  }
  ot_trace_destroy(tr);
  ot_plan_destroy(plan);
  free(t);
  return s;
}

/* ---- per backend ---------------------------------------------------------------------------- */
typedef struct sb_env {
  int dev;
  double pinned_gbps, pass_s;
  int heavy_passes;
  FILE *json;
  int passed, missed, failed, skipped;
} sb_env;

static void print_header(void) {
  printf("%-7s %-7s %-10s %4s %7s %9s %8s %5s %10s %9s %6s %7s %-6s %s\n", "backend", "variant", "strategy", "ups",
         "GB/rep", "replay ms", "up GB/s", "%pin", "compute ms", "xfer ms", "t/max", "target", "result", "checksum y");
}

static void report(sb_env *env, const char *backend, const char *variant, const char *strategy, int heavy,
                   ot_status s, const sb_result *r, double compute_s) {
  if (s != OT_OK) {
    printf("%-7s %-7s %-10s  error: %s\n", backend, variant, strategy, ot_last_error());
    env->failed++;
    if (env->json)
      fprintf(env->json, "{\"bench\":\"stream\",\"backend\":\"%s\",\"variant\":\"%s\",\"strategy\":\"%s\",\"result\":\"error\"}\n",
              backend, variant, strategy);
    return;
  }
  /* bytes that crossed PCIe: copied up, or read in place by the kernels
   * (usm remote placement: the same bytes, through the kernels' loads) */
  const double up = (double)r->sum.bytes_to_device + (double)r->sum.bytes_remote;
  const double gbps = r->replay_s > 0 ? up / r->replay_s / 1e9 : 0, pin = gbps / env->pinned_gbps;
  const double xfer_s = up / (env->pinned_gbps * 1e9);
  const double bound = compute_s > xfer_s ? compute_s : xfer_s, tmax = bound > 0 ? r->replay_s / bound : 0;
  int pass = heavy ? tmax <= 1.10 : pin >= 0.85;
  const char *result = pass ? "pass" : "miss";
  pass ? env->passed++ : env->missed++;
  printf("%-7s %-7s %-10s %4d %7.2f %9.2f %8.2f %4.0f%% %10.2f %9.2f %6.2f %7s %-6s %.6g%s%s\n", backend, variant,
         strategy, r->sum.uploads, up / 1e9, r->replay_s * 1e3, gbps, 100 * pin, compute_s * 1e3, xfer_s * 1e3, tmax,
         heavy ? "<=1.10" : ">=85%", result, r->sum_y, strcmp(r->budget_check, "ok") ? "  BUDGET: " : "",
         strcmp(r->budget_check, "ok") ? r->budget_check : "");
  fflush(stdout);
  if (!env->json) return;
  fprintf(env->json,
          "{\"bench\":\"stream\",\"backend\":\"%s\",\"variant\":\"%s\",\"strategy\":\"%s\",\"uploads\":%d,"
          "\"bytes_to_device\":%.0f,\"bytes_remote\":%llu,\"replay_ms\":%.6g,\"upload_gbps\":%.6g,\"pinned_gbps\":%.6g,\"ratio_pinned\":%.4f,"
          "\"compute_ms\":%.6g,\"xfer_ms\":%.6g,\"time_over_max\":%.4f,\"kernel_s\":%.6g,\"transfer_s\":%.6g,"
          "\"overlap_s\":%.6g,\"peak_device_bytes\":%llu,\"budget\":%llu,\"budget_check\":\"%s\",\"target\":\"%s\","
          "\"result\":\"%s\",\"checksum_y\":",
          backend, variant, strategy, r->sum.uploads, up, (unsigned long long)r->sum.bytes_remote, r->replay_s * 1e3, gbps, env->pinned_gbps, pin,
          compute_s * 1e3, xfer_s * 1e3, tmax, r->sum.kernel_s, r->sum.transfer_s, r->sum.overlap_s,
          (unsigned long long)r->sum.peak_device_bytes, (unsigned long long)r->sum.budget,
          strcmp(r->budget_check, "ok") ? "violated" : "ok", heavy ? "<=1.10" : ">=0.85", result);
  if (isfinite(r->sum_y)) fprintf(env->json, "%.9g}\n", r->sum_y);
  else fputs("null}\n", env->json); /* JSON has no NaN */
  fflush(env->json);
}

/* Managed memory beyond what the card has free can hang the GPU (docs/gpu.md):
 * usm runs only if the weights fit with room to spare. */
static int usm_fits(int dev, uint64_t total, const char **why) {
  if (!ot_dev_is_gpu(dev)) return 1;
  uint64_t fr = 0, tot = 0;
  ot_device_memory(dev, &fr, &tot);
  if (fr && total + (total >> 3) + (2ull << 30) < fr) return 1;
  *why = "the weights in managed memory would not fit in the device's free memory with room to spare";
  return 0;
}

static void run_backend(sb_env *env, ot_backend b, const sb_opts *o) {
  const char *bn = ot_backend_name(b);
  const uint64_t total = (uint64_t)o->layers * o->layer_bytes;
  const char *why = NULL;
  if (b == OT_BACKEND_USM && !usm_fits(env->dev, total, &why)) {
    printf("%-7s skipped: %s\n", bn, why);
    env->skipped++;
    return;
  }
  sb_model m;
  /* the resident runs need every weight on the device */
  const uint64_t resident_budget = total + 64ull * 1048576ull;
  ot_status s = model_create(b, resident_budget, o, &m);
  if (s != OT_OK) {
    printf("%-7s skipped: %s\n", bn, ot_last_error());
    env->skipped++;
    model_destroy(&m);
    return;
  }
  for (int heavy = 0; heavy < 2; heavy++) {
    const char *vn = heavy ? "heavy" : "light";
    ot_program *prog = NULL;
    s = program_create(&m, heavy ? env->heavy_passes : 1, &prog);
    if (s != OT_OK) {
      report(env, bn, vn, "-", heavy, s, NULL, 0);
      ot_program_destroy(prog);
      continue;
    }
    /* compute alone: every weight resident, no uploads in a replay */
    sb_result res;
    char tag[96];
    snprintf(tag, sizeof tag, "%s-%s-resident", bn, vn);
    sb_opts quiet = *o;
    quiet.trace = NULL;
    s = run_config(&m, prog, OT_STRATEGY_NONE, resident_budget, &quiet, tag, &res);
    const double compute_s = s == OT_OK ? res.replay_s : 0;
    if (s != OT_OK) printf("%-7s %-6s resident run failed: %s\n", bn, vn, ot_last_error());
    for (int k = 0; k < o->n_strategies; k++) {
      const char *sn = ot_strategy_name(o->strategies[k]);
      snprintf(tag, sizeof tag, "%s-%s-%s", bn, vn, sn);
      s = run_config(&m, prog, o->strategies[k], o->budget, o, tag, &res);
      report(env, bn, vn, sn, heavy, s, &res, compute_s);
      const int show = o->summaries && (!strcmp(o->summaries, "all") || (!strcmp(o->summaries, "one") && heavy && k == 0));
      if (s == OT_OK && show) {
        printf("  trace summary of one replay (%s):\n", tag);
        ot_trace_summary_print(&res.sum, stdout);
      }
    }
    ot_program_destroy(prog);
  }
  model_destroy(&m);
}

/* ---- options ------------------------------------------------------------------------------------ */
enum { O_QUICK = 1, O_LAYER, O_LAYERS, O_BUDGET, O_DTYPE, O_HIDDEN, O_REPLAYS, O_HEAVY, O_BACKENDS, O_STRATS, O_TRACE,
       O_JSON, O_SUMM, O_HELP };
static const ot_opt sb_optv[] = {
    {"quick", 0, NULL, "small sizes (a CPU smoke run): 16 layers of 4MiB, K 1024", O_QUICK},
    {"layer-bytes", 0, "SIZE", "bytes of one layer's weight (default 256MiB)", O_LAYER},
    {"layers", 0, "N", "number of layers (default 32)", O_LAYERS},
    {"budget", 0, "SIZE", "device budget (default a quarter of the weights)", O_BUDGET},
    {"dtype", 0, "f32|bf16", "weight dtype (default bf16)", O_DTYPE},
    {"hidden", 0, "K", "weight row length K (default 4096; --quick 1024)", O_HIDDEN},
    {"replays", 0, "N", "steady replays per configuration (default 3)", O_REPLAYS},
    {"heavy-factor", 0, "X", "heavy variant: kernel time per layer / upload time per layer (default 1.2)", O_HEAVY},
    {"backends", 0, "LIST", "comma-separated: map, usm, host (default map,usm)", O_BACKENDS},
    {"strategies", 0, "LIST", "comma-separated: minimal, balanced, aggressive (default balanced,aggressive)", O_STRATS},
    {"trace", 0, "FILE", "write a Chrome trace of one replay per configuration to FILE-<config>.json", O_TRACE},
    {"json", 0, "FILE", "also write each row as a JSON line to FILE", O_JSON},
    {"summaries", 0, "all|one|none", "trace summaries printed: one per backend (default), all, none", O_SUMM},
    {"help", 'h', NULL, "show this help", O_HELP},
    {0}};

/* Splits "a,b" and parses each item with parse(item, &value). */
static ot_status parse_list(const char *opt, const char *v, int *n, int *vals,
                            ot_status (*parse)(const char *, int *)) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s", v);
  *n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (*n == SB_MAX_LIST) return ot_fail(OT_ERR_INVALID_ARG, "%s: at most %d items", opt, SB_MAX_LIST);
    if (parse(tok, &vals[*n]) != OT_OK) {
      char why[256]; /* ot_fail overwrites the message it would quote */
      snprintf(why, sizeof why, "%s", ot_last_error());
      return ot_fail(OT_ERR_INVALID_ARG, "%s: %s", opt, why);
    }
    (*n)++;
  }
  return *n ? OT_OK : ot_fail(OT_ERR_INVALID_ARG, "%s: empty list", opt);
}

static ot_status parse_backend(const char *s, int *v) {
  ot_backend b;
  OT_TRY(ot_backend_parse(s, &b));
  *v = (int)b;
  return OT_OK;
}

static ot_status parse_strategy(const char *s, int *v) {
  ot_strategy st;
  OT_TRY(ot_strategy_parse(s, &st));
  if (st == OT_STRATEGY_NONE) return ot_fail(OT_ERR_INVALID_ARG, "strategy none cannot stream (it keeps everything resident)");
  *v = (int)st;
  return OT_OK;
}

static ot_status on_opt(void *user, const ot_opt *opt, const char *v) {
  sb_opts *o = user;
  long x;
  int vals[SB_MAX_LIST];
  if (!opt) return ot_fail(OT_ERR_INVALID_ARG, "bench_stream: unexpected argument '%s' (see --help)", v);
  switch (opt->id) {
  case O_QUICK: o->quick = 1; return OT_OK;
  case O_LAYER: return bc_parse_bytes("--layer-bytes", v, &o->layer_bytes);
  case O_LAYERS: OT_TRY(bc_parse_int("--layers", v, 1, 100000, &x)); o->layers = (int)x; return OT_OK;
  case O_BUDGET: return bc_parse_bytes("--budget", v, &o->budget);
  case O_DTYPE:
    OT_TRY(ot_dtype_parse(v, &o->dt));
    if (o->dt != OT_F32 && o->dt != OT_BF16) return ot_fail(OT_ERR_INVALID_ARG, "--dtype: use f32 or bf16");
    return OT_OK;
  case O_HIDDEN: OT_TRY(bc_parse_int("--hidden", v, 1, 1 << 20, &x)); o->hidden = x; return OT_OK;
  case O_REPLAYS: OT_TRY(bc_parse_int("--replays", v, 1, 1000, &x)); o->replays = (int)x; return OT_OK;
  case O_HEAVY: return bc_parse_double("--heavy-factor", v, &o->heavy_factor);
  case O_BACKENDS:
    OT_TRY(parse_list("--backends", v, &o->n_backends, vals, parse_backend));
    for (int i = 0; i < o->n_backends; i++) o->backends[i] = (ot_backend)vals[i];
    return OT_OK;
  case O_STRATS:
    OT_TRY(parse_list("--strategies", v, &o->n_strategies, vals, parse_strategy));
    for (int i = 0; i < o->n_strategies; i++) o->strategies[i] = (ot_strategy)vals[i];
    return OT_OK;
  case O_TRACE: o->trace = v; return OT_OK;
  case O_JSON: o->json = v; return OT_OK;
  case O_SUMM:
    if (strcmp(v, "all") && strcmp(v, "one") && strcmp(v, "none"))
      return ot_fail(OT_ERR_INVALID_ARG, "--summaries: use all, one or none");
    o->summaries = v;
    return OT_OK;
  case O_HELP: bc_usage("bench_stream", sb_optv);
  }
  return OT_OK;
}

int main(int argc, char **argv) {
  sb_opts o;
  memset(&o, 0, sizeof o);
  o.replays = 3;
  o.dt = OT_BF16;
  o.heavy_factor = 1.2;
  o.summaries = "one";
  o.n_backends = 2, o.backends[0] = OT_BACKEND_MAP, o.backends[1] = OT_BACKEND_USM;
  o.n_strategies = 2, o.strategies[0] = OT_STRATEGY_BALANCED, o.strategies[1] = OT_STRATEGY_AGGRESSIVE;
  const ot_opt *tables[] = {sb_optv, NULL};
  if (ot_args_parse("bench_stream", argc, argv, tables, on_opt, &o) != OT_OK) {
    fprintf(stderr, "%s\n", ot_last_error());
    return 2;
  }
  if (!o.layer_bytes) o.layer_bytes = o.quick ? 4ull << 20 : 256ull << 20;
  if (!o.layers) o.layers = o.quick ? 16 : 32;
  if (!o.hidden) o.hidden = o.quick ? 1024 : 4096;
  if (!o.budget) o.budget = (uint64_t)o.layers * o.layer_bytes / 4;

  sb_env env;
  memset(&env, 0, sizeof env);
  env.dev = bc_device();
  if (bc_open_out(o.json, &env.json) != OT_OK) {
    fprintf(stderr, "bench_stream: %s\n", ot_last_error());
    return 2;
  }
  const uint64_t ceil_bytes = o.quick ? 16ull << 20 : 1ull << 30;
  ot_status s = pinned_h2d(env.dev, ceil_bytes, &env.pinned_gbps);
  if (s == OT_OK) s = pass_time(env.dev, &o, &env.pass_s);
  if (s != OT_OK) {
    fprintf(stderr, "bench_stream: measuring the ceilings: %s\n", ot_last_error());
    bc_close_out(env.json);
    return 1;
  }
  const double xfer_layer_s = (double)o.layer_bytes / (env.pinned_gbps * 1e9);
  env.heavy_passes = (int)ceil(o.heavy_factor * xfer_layer_s / env.pass_s);
  if (env.heavy_passes < 1) env.heavy_passes = 1;
  printf("bench_stream: device %d: %s; %d layers x %.1f MiB %s (W [%lld, %lld]) = %.2f GiB, budget %.2f GiB\n",
         env.dev, bc_device_kind(env.dev), o.layers, (double)o.layer_bytes / 1048576.0, ot_dtype_name(o.dt),
         (long long)(o.layer_bytes / ot_dtype_bytes(o.dt, o.hidden)), (long long)o.hidden,
         (double)o.layers * (double)o.layer_bytes / 1073741824.0, (double)o.budget / 1073741824.0);
  printf("pinned host->device (ot_mem_copy, %.0f MiB, pinned %s): %.2f GB/s; layer upload %.3f ms; "
         "one pass over a resident layer %.3f ms; heavy = %d passes (%.2fx the upload)\n",
         (double)ceil_bytes / 1048576.0, ot_mem_space_native(OT_MEM_PINNED, env.dev) ? "native" : "emulated",
         env.pinned_gbps, xfer_layer_s * 1e3, env.pass_s * 1e3, env.heavy_passes,
         env.heavy_passes * env.pass_s / xfer_layer_s);
  if (env.json)
    fprintf(env.json,
            "{\"bench\":\"stream\",\"kind\":\"ceilings\",\"pinned_gbps\":%.6g,\"layer_bytes\":%llu,\"layers\":%d,"
            "\"budget\":%llu,\"dtype\":\"%s\",\"pass_ms\":%.6g,\"heavy_passes\":%d,\"device\":\"%s\",\"quick\":%d}\n",
            env.pinned_gbps, (unsigned long long)o.layer_bytes, o.layers, (unsigned long long)o.budget,
            ot_dtype_name(o.dt), env.pass_s * 1e3, env.heavy_passes, bc_device_kind(env.dev), o.quick);
  print_header();
  for (int i = 0; i < o.n_backends; i++) run_backend(&env, o.backends[i], &o);
  printf("bench_stream: %d pass, %d miss, %d error, %d backend(s) skipped\n", env.passed, env.missed, env.failed,
         env.skipped);
  bc_close_out(env.json);
  return env.failed ? 1 : 0;
}
