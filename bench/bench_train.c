/* bench_train.c — GPT-2 training under a fixed device budget (issue 7's
 * benchmark): the largest micro-batch that fits with everything resident
 * against the largest with offload/recompute, and the tokens/s of each.
 *
 *   bench_train --model DIR --budget 8GiB [--seq 1024] [--max-batch 64] [--steps 5]
 *               [--only-plan] [--json FILE] [--batches 4,16] [--checkpoints none,auto]
 *               [--precision fp32|bf16|f16] [--loss-chunk-rows N] [--cpu-optimizer]
 *
 * DIR holds a GPT-2 config.json; the weights are initialized (GPT-2's init),
 * so no checkpoint is needed. Phase 1 (plans only, no activation memory):
 *   resident  the largest B whose plan (checkpoint none) evicts no live copy
 *             in the first run or the replays;
 *   offload   the largest B (<= --max-batch, the host memory's share) whose
 *             plan is feasible at all with checkpoint auto.
 * Phase 2 (--steps > 0): trains at each (B, checkpoint) on random tokens, one
 * warm-up step then --steps timed ones; prints the median step time and
 * tokens/s, the bytes moved per step (from the trace) and the peak device
 * bytes (checked against the budget). The ratio offload/resident tokens/s
 * is the target (>= 0.7); PyTorch's own step is timed by
 * bench/train_h200.py in the same run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "omptensor/gpt2_train.h"

typedef struct args {
  const char *model, *json, *trace; /* --trace: Chrome trace of the last timed step */
  uint64_t budget;
  long T, max_b, steps;
  int only_plan, cpu_opt;
  ot_dtype precision;
  long chunk_rows;
  char batches[256], ckpts[256]; /* explicit runs instead of the searched ones */
} args;

/* A trainer at batch B; plan_only: planned, never run. */
static ot_status make(ot_ctx *ctx, const args *a, int B, ot_recompute ck, int plan_only, ot_gpt2_trainer **g) {
  ot_gpt2_train_opts o = ot_gpt2_train_opts_default();
  o.B = B;
  o.T = (int)a->T;
  o.checkpoint = ck;
  o.init_random = 1;
  o.plan_only = plan_only;
  o.adam.lr = 3e-4f;
  o.precision = a->precision;
  o.loss_chunk_rows = (int)a->chunk_rows;
  o.cpu_optimizer = a->cpu_opt;
  ot_sched_opts so = ot_sched_opts_default();
  so.budget_bytes = a->budget;
  return ot_gpt2_train_create(ctx, a->model, &o, &so, g);
}

/* fits: 1 resident (no eviction), 2 feasible with moves, 0 infeasible. */
static ot_status probe(ot_ctx *ctx, const args *a, int B, ot_recompute ck, int *fits, int *recomputed) {
  ot_gpt2_trainer *g = NULL;
  ot_status s = make(ctx, a, B, ck, 1, &g);
  *fits = 0;
  *recomputed = 0;
  if (s == OT_ERR_BUDGET) return OT_OK;
  if (s != OT_OK) return s;
  const ot_plan *pl = ot_gpt2_train_plan(g);
  *fits = ot_plan_get_stats(pl, 0).evictions == 0 && ot_plan_get_stats(pl, 1).evictions == 0 ? 1 : 2;
  for (int l = 0; l < ot_gpt2_train_config(g)->num_layers; l++) *recomputed += ot_gpt2_train_recomputed(g, l);
  ot_gpt2_train_destroy(g);
  return OT_OK;
}

/* The largest B in [1, max_b] whose plan is resident (resident = 1) or
 * feasible (bisection; taken as monotone in B). 0 if not even B = 1. */
static ot_status largest(ot_ctx *ctx, const args *a, ot_recompute ck, int resident, int *out) {
  int lo = 0, hi = (int)a->max_b + 1, fits, rc; /* lo fits (0: vacuously), hi does not */
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    double t = bc_now();
    ot_status s = probe(ctx, a, mid, ck, &fits, &rc);
    if (s != OT_OK) return s;
    fprintf(stderr, "  plan B=%d checkpoint %s: %s (%d layers recomputed) [%.1f s]\n", mid, ot_recompute_name(ck),
            fits == 1 ? "resident" : fits == 2 ? "feasible with offload" : "infeasible", rc, bc_now() - t);
    if (resident ? fits == 1 : fits >= 1) lo = mid;
    else hi = mid;
  }
  *out = lo;
  return OT_OK;
}

static uint64_t rng(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static ot_status timed(ot_ctx *ctx, const args *a, int B, ot_recompute ck, const char *label, FILE *json) {
  ot_gpt2_trainer *g = NULL;
  double t0 = bc_now();
  ot_status s = make(ctx, a, B, ck, 0, &g);
  if (s != OT_OK) return s;
  double t_create = bc_now() - t0;
  fprintf(stderr, "  %s B=%d: trainer made and planned in %.1f s\n", label, B, t_create);
  int64_t V = ot_gpt2_train_config(g)->vocab_size, n = (int64_t)B * a->T;
  int32_t *in = malloc((size_t)n * sizeof *in), *tg = malloc((size_t)n * sizeof *tg);
  double *ms = calloc((size_t)a->steps, sizeof *ms);
  ot_trace *tr = NULL;
  if (!in || !tg || !ms) s = ot_set_error(OT_ERR_OUT_OF_MEMORY, "bench_train: no host memory");
  if (s == OT_OK) s = ot_trace_create(&tr);
  uint64_t seed = 42;
  float loss = 0, loss0 = 0;
  for (int step = 0; s == OT_OK && step <= a->steps; step++) {
    for (int64_t i = 0; i < n; i++) in[i] = (int32_t)(rng(&seed) % (uint64_t)V), tg[i] = (int32_t)(rng(&seed) % (uint64_t)V);
    /* the trace covers the last timed step only (moves per steady step) */
    if (step == a->steps) ot_trace_clear(tr);
    double t = bc_now();
    s = ot_gpt2_train_step(g, in, tg, step == a->steps ? tr : NULL, &loss);
    if (step > 0) ms[step - 1] = (bc_now() - t) * 1e3;
    if (step == 0) loss0 = loss;
    fprintf(stderr, "  %s B=%d step %d: %.1f ms, loss %.4f\n", label, B, step, (bc_now() - t) * 1e3, loss);
  }
  if (s == OT_OK) {
    /* the last step ran with the trace on: check it, but time the others */
    ot_trace_summary sm = ot_trace_summarize(tr);
    if (a->trace) s = ot_trace_write_chrome(tr, a->trace);
    if (s == OT_OK) ot_trace_summary_print(&sm, stderr);
    if (s == OT_OK) s = ot_trace_check_budget(tr, a->budget);
    int nt = a->steps > 1 ? (int)a->steps - 1 : 1;
    double med = bc_median(ms, nt), tok_s = (double)n / (med * 1e-3);
    int rc = 0;
    for (int l = 0; l < ot_gpt2_train_config(g)->num_layers; l++) rc += ot_gpt2_train_recomputed(g, l);
    const ot_plan_stats ps = ot_plan_get_stats(ot_gpt2_train_plan(g), 1);
    printf("%-9s %s B=%-3d T=%ld checkpoint %-4s recomputed %2d layers: step %8.1f ms  %8.0f tok/s  moved %.2f GB up "
           "%.2f GB down  peak %.2f GiB  budget ok=%s  loss %.3f -> %.3f  activation homes %.2f GB (%.2f GB not "
           "needed)  rebuilt %d tensors (%.2f GB)  (setup %.1f s)\n",
           label, ot_dtype_name(a->precision), B, a->T, ot_recompute_name(ck), rc, med, tok_s, (double)sm.bytes_to_device / 1e9,
           (double)sm.bytes_to_host / 1e9, (double)sm.peak_device_bytes / 1073741824.0, s == OT_OK ? "yes" : "NO", loss0,
           loss, (double)ps.lazy_home_bytes / 1e9, (double)ps.lazy_skipped_bytes / 1e9, ps.recomputes,
           (double)ps.recompute_bytes / 1e9, t_create);
    if (json)
      fprintf(json,
              "{\"bench\":\"train\",\"label\":\"%s\",\"precision\":\"%s\",\"B\":%d,\"T\":%ld,\"checkpoint\":\"%s\",\"recomputed\":%d,"
              "\"step_ms\":%.3f,\"tokens_per_second\":%.1f,\"bytes_up\":%llu,\"bytes_down\":%llu,\"peak\":%llu,"
              "\"budget\":%llu,\"budget_ok\":%s,\"loss_first\":%.5f,\"loss_last\":%.5f,\"lazy_home_bytes\":%llu,"
              "\"lazy_skipped_bytes\":%llu,\"recomputes\":%d,\"recompute_bytes\":%llu}\n",
              label, a->precision == OT_BF16 ? "bf16" : a->precision == OT_F16 ? "f16" : "fp32", B, a->T, ot_recompute_name(ck), rc, med, tok_s,
              (unsigned long long)sm.bytes_to_device,
              (unsigned long long)sm.bytes_to_host, (unsigned long long)sm.peak_device_bytes,
              (unsigned long long)a->budget, s == OT_OK ? "true" : "false", loss0, loss,
              (unsigned long long)ps.lazy_home_bytes, (unsigned long long)ps.lazy_skipped_bytes, ps.recomputes,
              (unsigned long long)ps.recompute_bytes);
  }
  ot_trace_destroy(tr);
  free(in);
  free(tg);
  free(ms);
  ot_gpt2_train_destroy(g);
  return s;
}

static ot_status parse(int argc, char **argv, args *a) {
  *a = (args){.T = 1024, .max_b = 64, .steps = 5};
  for (int i = 1; i < argc; i++) {
    const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(k, "--only-plan")) {
      a->only_plan = 1;
      continue;
    }
    if (!strcmp(k, "--cpu-optimizer")) {
      a->cpu_opt = 1;
      continue;
    }
    if (!v) return ot_set_error(OT_ERR_INVALID_ARG, "%s needs a value (see the top of bench/bench_train.c)", k);
    i++;
    if (!strcmp(k, "--model")) a->model = v;
    else if (!strcmp(k, "--json")) a->json = v;
    else if (!strcmp(k, "--trace")) a->trace = v;
    else if (!strcmp(k, "--budget")) OT_TRY(bc_parse_bytes(k, v, &a->budget));
    else if (!strcmp(k, "--seq")) OT_TRY(bc_parse_int(k, v, 1, 1 << 20, &a->T));
    else if (!strcmp(k, "--max-batch")) OT_TRY(bc_parse_int(k, v, 1, 4096, &a->max_b));
    else if (!strcmp(k, "--steps")) OT_TRY(bc_parse_int(k, v, 1, 1000, &a->steps));
    else if (!strcmp(k, "--batches")) snprintf(a->batches, sizeof a->batches, "%s", v);
    else if (!strcmp(k, "--checkpoints")) snprintf(a->ckpts, sizeof a->ckpts, "%s", v);
    else if (!strcmp(k, "--loss-chunk-rows")) OT_TRY(bc_parse_int(k, v, 0, 1 << 30, &a->chunk_rows));
    else if (!strcmp(k, "--precision")) {
      if (!strcmp(v, "fp32")) a->precision = OT_F32;
      else if (!strcmp(v, "bf16")) a->precision = OT_BF16;
      else if (!strcmp(v, "f16")) a->precision = OT_F16;
      else return ot_set_error(OT_ERR_INVALID_ARG, "--precision %s: fp32, bf16 or f16", v);
    } else return ot_set_error(OT_ERR_INVALID_ARG, "unknown option %s (see the top of bench/bench_train.c)", k);
  }
  if (!a->model || !a->budget) return ot_set_error(OT_ERR_INVALID_ARG, "--model DIR and --budget SIZE are required");
  return OT_OK;
}

/* Explicit runs: --batches 4,16 with --checkpoints none,auto (pairwise). */
static ot_status explicit_runs(ot_ctx *ctx, const args *a, FILE *json) {
  char bs[256], cs[256];
  snprintf(bs, sizeof bs, "%s", a->batches);
  snprintf(cs, sizeof cs, "%s", a->ckpts[0] ? a->ckpts : "auto");
  char *sb = NULL, *sc = NULL, *b = strtok_r(bs, ",", &sb), *c = strtok_r(cs, ",", &sc);
  ot_recompute ck = OT_RECOMPUTE_AUTO;
  for (; b; b = strtok_r(NULL, ",", &sb)) {
    if (c) OT_TRY(ot_recompute_parse(c, &ck));
    OT_TRY(timed(ctx, a, atoi(b), ck, "explicit", json));
    if (c) c = strtok_r(NULL, ",", &sc);
  }
  return OT_OK;
}

static ot_status run(const args *a) {
  ot_ctx *ctx = NULL;
  FILE *json = NULL;
  ot_status s = ot_ctx_create(NULL, &ctx);
  if (s == OT_OK && a->json) s = bc_open_out(a->json, &json);
  if (s == OT_OK) printf("bench_train: %s, T=%ld, budget %.2f GiB on %s\n", a->model, a->T,
                         (double)a->budget / 1073741824.0, bc_device_kind(bc_device()));
  if (s == OT_OK && a->batches[0]) {
    s = explicit_runs(ctx, a, json);
  } else if (s == OT_OK) {
    int b_res = 0, b_off = 0;
    s = largest(ctx, a, OT_RECOMPUTE_NONE, 1, &b_res);
    if (s == OT_OK) s = largest(ctx, a, OT_RECOMPUTE_AUTO, 0, &b_off);
    if (s == OT_OK) {
      printf("largest micro-batch at this budget: resident B=%d, with offload/recompute B=%d%s (%.2fx)\n", b_res,
             b_off, b_off == a->max_b ? " (the --max-batch cap)" : "", b_res ? (double)b_off / b_res : INFINITY);
      if (json)
        fprintf(json, "{\"bench\":\"train_fit\",\"T\":%ld,\"budget\":%llu,\"resident_B\":%d,\"offload_B\":%d,"
                      "\"capped\":%s}\n",
                a->T, (unsigned long long)a->budget, b_res, b_off, b_off == a->max_b ? "true" : "false");
    }
    if (s == OT_OK && !a->only_plan && b_res) s = timed(ctx, a, b_res, OT_RECOMPUTE_NONE, "resident", json);
    if (s == OT_OK && !a->only_plan && b_off) s = timed(ctx, a, b_off, OT_RECOMPUTE_AUTO, "offload", json);
  }
  bc_close_out(json);
  ot_ctx_destroy(ctx);
  return s;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* progress reaches a pipe (the driver script) line by line */
  args a;
  ot_status s = parse(argc, argv, &a);
  if (s == OT_OK) s = run(&a);
  if (s != OT_OK) {
    fprintf(stderr, "bench_train: %s\n", ot_last_error());
    return s == OT_ERR_INVALID_ARG ? 2 : 1;
  }
  return 0;
}
