/* bench_step.c — where one resident decode step's time goes (issue 44).
 *
 * A synthetic Llama (Llama-2-7B's shapes by default, weights from a seed, no
 * checkpoint) decodes greedily with every weight resident. One decode step
 * is recorded three ways at once:
 *   - host time: the step's wall time, between the two tokens' callbacks;
 *   - the executor's trace: the ops it ran, and the host time inside them
 *     (launch, wait) against the time between them (the executor itself);
 *   - the GPU's own records (CUPTI, bench/support/gpu_activity.h): every
 *     kernel and copy the step ran, their summed durations and the time the
 *     GPU was busy at all. busy / wall is the GPU busy fraction.
 * Steps other than the profiled one run without CUPTI: their median wall is
 * printed beside it (what recording added).
 *
 *   bench_step [--layers N] [--dtype bf16|f32|q8b|q4b|...] [--prompt N] [--steps N]
 *              [--top N] [--json FILE] [--batch N] [--kv-dtype f32|bf16|f16]
 * Without a GPU (no CUPTI) it prints the host side only.
 *
 * --batch N (issue 44's batching target: resident batch 32 >= 20x batch 1)
 * instead decodes N prompts at once (ot_generate_batch, N slots, the same
 * model resident) and then the first of them alone as one prompt runs
 * (ot_generate), in the same process: the aggregate decode tokens/s of
 * each, their ratio, and the step time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "gpu_activity.h"
#include "omptensor/args.h"
#include "omptensor/models.h"
#include "memory/device.h"
#include "omptensor/memory.h"
#include "sched/trace_impl.h"
#include "kernels/step_gpu.h"
#include <omp.h>

enum { O_LAYERS = 1, O_DTYPE, O_PROMPT, O_STEPS, O_TOP, O_JSON, O_UNROLL, O_BATCH, O_KV, O_HELP, MAX_STEPS = 256 };

static const ot_opt bs_optv[] = {
    {"layers", 0, "N", "decoder layers (default 32: Llama-2-7B; the widths are its own)", O_LAYERS},
    {"dtype", 0, "DTYPE", "weight dtype: bf16 (default), f32, f16, q8b, q4b, ...", O_DTYPE},
    {"prompt", 0, "N", "prompt tokens before the decode steps (default 128)", O_PROMPT},
    {"steps", 0, "N", "decode steps; the one in the middle is profiled (default 9)", O_STEPS},
    {"top", 0, "N", "kernels listed, the most time first (default 12)", O_TOP},
    {"json", 0, "FILE", "also write the numbers as one JSON line to FILE ('-': stdout)", O_JSON},
    {"step-unroll", 0, "N", "step kernel: 16-byte loads in flight per lane in a 16-bit row: 4, 8 (default) or 16",
     O_UNROLL},
    {"batch", 0, "N", "decode N prompts at once against one alone: aggregate tokens/s, the ratio", O_BATCH},
    {"kv-dtype", 0, "DTYPE", "the KV caches' dtype: f32 (default, the library's), bf16 or f16", O_KV},
    {"help", 'h', NULL, "show this help", O_HELP},
    {0}};

typedef struct bs_opts {
  long layers, prompt, steps, top, unroll, batch;
  ot_dtype dt, kv;
  const char *json;
} bs_opts;

static ot_status on_opt(void *user, const ot_opt *opt, const char *v) {
  bs_opts *o = user;
  if (!opt) return ot_set_error(OT_ERR_INVALID_ARG, "unexpected argument '%s'", v);
  switch (opt->id) {
  case O_LAYERS: return bc_parse_int("--layers", v, 1, 1000, &o->layers);
  case O_DTYPE: return ot_dtype_parse(v, &o->dt);
  case O_PROMPT: return bc_parse_int("--prompt", v, 1, 4000, &o->prompt);
  case O_STEPS: return bc_parse_int("--steps", v, 3, MAX_STEPS - 1, &o->steps);
  case O_TOP: return bc_parse_int("--top", v, 0, 1000, &o->top);
  case O_JSON: o->json = v; return OT_OK;
  case O_UNROLL: {
    OT_TRY(bc_parse_int("--step-unroll", v, 4, 16, &o->unroll));
    return ot_kstep_tune((int)o->unroll);
  }
  case O_BATCH: return bc_parse_int("--batch", v, 1, 256, &o->batch);
  case O_KV:
    OT_TRY(ot_dtype_parse(v, &o->kv));
    if (o->kv != OT_F32 && o->kv != OT_BF16 && o->kv != OT_F16)
      return ot_set_error(OT_ERR_INVALID_ARG, "--kv-dtype %s: the KV caches take f32, bf16 or f16", v);
    return OT_OK;
  case O_HELP: bc_usage("bench_step", bs_optv);
  }
  return OT_OK;
}

/* Llama-2-7B's widths, `layers` deep. */
static void config(long layers, ot_hf_config *c) { ot_llama_synthetic_config(c, 4096, 11008, 32, 32, 32000, layers); }

/* Every generation here: greedy, the --steps decode steps, --kv-dtype caches. */
static ot_gen_opts gen_opts(const bs_opts *a) {
  ot_gen_opts g = ot_gen_opts_default();
  g.kv_dtype = a->kv;
  g.max_new_tokens = (int)a->steps + 1;
  g.greedy = 1;
  return g;
}

/* The tokens' callback: wall time per step, CUPTI around the profiled one. */
typedef struct bs_run {
  int profiled;          /* decode step index profiled (token index profiled + 1 ends it) */
  uint64_t at[MAX_STEPS]; /* ot_now_ns() at each token */
  int n;
  int have_gpu;          /* CUPTI started */
  ot_status gpu_st;
  bc_gpu_window win;
} bs_run;

static ot_status on_token(void *user, int32_t id, int index) {
  (void)id;
  bs_run *r = user;
  if (index < MAX_STEPS) r->at[index] = ot_now_ns(), r->n = index + 1;
  /* token `index` ends decode step `index` (token 0 comes from the prompt) */
  if (index == r->profiled - 1) {
    bc_gpu_range_push("bench_step_decode"); /* ncu --nvtx --nvtx-include "bench_step_decode/" */
    r->gpu_st = bc_gpu_activity_start();
    r->have_gpu = r->gpu_st == OT_OK;
    if (!r->have_gpu) fprintf(stderr, "bench_step: no GPU records: %s\n", ot_last_error());
    r->at[index] = ot_now_ns(); /* after CUPTI's start */
  } else if (index == r->profiled) {
    bc_gpu_range_pop();
    if (r->have_gpu) {
      r->gpu_st = bc_gpu_activity_stop(&r->win);
      if (r->gpu_st != OT_OK) r->have_gpu = 0;
    }
  }
  return OT_OK;
}

/* The executor's view of [t0, t1): ops run and the host time inside them. */
typedef struct bs_ops {
  int ops, host_ops;
  double in_ops_ns;
} bs_ops;

static bs_ops ops_between(const ot_trace *tr, uint64_t t0, uint64_t t1) {
  bs_ops o = {0};
  const uint64_t origin = ot_trace_t0(tr); /* the events' times are relative to it */
  t0 = t0 > origin ? t0 - origin : 0;
  t1 = t1 > origin ? t1 - origin : 0;
  for (size_t i = 0; i < ot_trace_count(tr); i++) {
    const ot_trace_event *e = ot_trace_event_at(tr, i);
    if (e->kind != OT_TRACE_KERNEL || e->start_ns < t0 || e->end_ns > t1) continue;
    o.ops++;
    if (e->flags & OT_TRACE_HOST) o.host_ops++;
    o.in_ops_ns += (double)(e->end_ns - e->start_ns);
  }
  return o;
}

/* The HBM ceiling measured here: a device-to-device copy of 1 GiB (read and
 * written: 2 GiB of traffic), the best of five, in GB/s; 0 off a GPU. */
static double copy_ceiling(void) {
  const int dev = bc_device();
  if (dev == omp_get_initial_device() || !ot_dev_is_gpu(dev)) return 0;
  const size_t n = 1u << 30;
  void *a = NULL, *b = NULL;
  double best = 0;
  if (ot_mem_alloc(OT_MEM_DEVICE, dev, n, &a) == OT_OK && ot_mem_alloc(OT_MEM_DEVICE, dev, n, &b) == OT_OK)
    for (int i = 0; i < 5; i++) {
      const double t = bc_now();
      if (ot_mem_copy(b, dev, a, dev, n) != OT_OK) break;
      const double gbs = 2.0 * (double)n / (bc_now() - t) / 1e9;
      if (gbs > best) best = gbs;
    }
  if (a) ot_mem_free(OT_MEM_DEVICE, dev, a);
  if (b) ot_mem_free(OT_MEM_DEVICE, dev, b);
  return best;
}

static double step_ms(const bs_run *r, int k) { return (double)(r->at[k] - r->at[k - 1]) / 1e6; }

/* Where the host's time goes in an unprofiled step, from the trace: before
 * its first op (the token's copy, the replay's start), inside ops (launch
 * and wait; a batch's ops share its launch), between ops (the executor's
 * events, encoding the batch's instructions) and after its last op (the
 * logits' checks, sampling, the token's callback). Medians over steps 2..,
 * the profiled one left out, in ms. */
typedef struct bs_host {
  double before, inside, between, after;
  double after_wb; /* of `after`: until the last write-back of the step ended (its DOWNLOAD events) */
} bs_host;

static bs_host host_split(const ot_trace *tr, const bs_run *r) {
  double v[5][MAX_STEPS];
  int n = 0;
  const uint64_t origin = ot_trace_t0(tr);
  for (int k = 2; k < r->n; k++) {
    if (k == r->profiled || r->at[k - 1] < origin) continue;
    const uint64_t t0 = r->at[k - 1] - origin, t1 = r->at[k] - origin;
    uint64_t first = UINT64_MAX, last = 0, in = 0, wb = 0;
    for (size_t i = 0; i < ot_trace_count(tr); i++) {
      const ot_trace_event *e = ot_trace_event_at(tr, i);
      if (e->kind == OT_TRACE_DOWNLOAD && e->end_ns <= t1 && e->end_ns > wb) wb = e->end_ns;
      if (e->kind != OT_TRACE_KERNEL || e->start_ns < t0 || e->end_ns > t1) continue;
      if (e->start_ns < first) first = e->start_ns;
      if (e->end_ns > last) last = e->end_ns;
      in += e->end_ns - e->start_ns;
    }
    if (first == UINT64_MAX) continue;
    if (wb < last) wb = last; /* the write-backs after the last op: the part of `after` spent waiting for them */
    v[4][n] = (double)(wb - last) / 1e6;
    v[0][n] = (double)(first - t0) / 1e6;
    v[1][n] = (double)in / 1e6;
    v[2][n] = (double)(last - first - in) / 1e6;
    v[3][n] = (double)(t1 - last) / 1e6;
    n++;
  }
  bs_host h = {0};
  if (n)
    h = (bs_host){bc_median(v[0], n), bc_median(v[1], n), bc_median(v[2], n), bc_median(v[3], n), bc_median(v[4], n)};
  return h;
}

/* The window's kernels, the most time first, top of them. */
static void print_kernels(const bc_gpu_window *w, long top) {
  printf("\n  %-70s %6s %10s %8s %6s\n", "kernel", "calls", "total us", "us/call", "share");
  for (int i = 0; i < w->n_names && i < top; i++)
    printf("  %-70.70s %6d %10.1f %8.2f %5.1f%%\n", w->names[i].name, w->names[i].count, w->names[i].ns / 1e3,
           w->names[i].ns / 1e3 / w->names[i].count, 100.0 * w->names[i].ns / (w->kernel_ns > 0 ? w->kernel_ns : 1));
  if (w->n_apis) printf("\n  %-40s %6s %10s %8s   (host time in CUDA driver calls)\n", "driver call", "calls", "total us", "us/call");
  for (int i = 0; i < w->n_apis && i < top; i++)
    printf("  %-40.40s %6d %10.1f %8.2f\n", w->apis[i].name, w->apis[i].count, w->apis[i].ns / 1e3,
           w->apis[i].ns / 1e3 / w->apis[i].count);
}

static void report(const bs_opts *a, const ot_hf_config *c, uint64_t wbytes, const bs_run *r, const bs_ops *o,
                   const bs_host *h, double ceiling, FILE *json) {
  const int k = r->profiled;
  const double wall = step_ms(r, k);
  double others[MAX_STEPS];
  int n = 0;
  for (int i = 2; i < r->n; i++) /* decode steps 2.. (step 1 may still settle in) */
    if (i != k) others[n++] = step_ms(r, i);
  const double med = bc_median(others, n);
  printf("decode step %d (position %ld): wall %.3f ms (profiled), %.3f ms median of the other %d steps (not profiled)\n", k,
         a->prompt + k - 1, wall, med, n);
  printf("  executor: %d ops (%d on the host), %.1f us wall per op, %.1f us of it inside the op (launch, wait), "
         "%.1f us between ops\n",
         o->ops, o->host_ops, o->ops ? wall * 1e3 / o->ops : 0.0, o->ops ? o->in_ops_ns / 1e3 / o->ops : 0.0,
         o->ops ? (wall * 1e6 - o->in_ops_ns) / 1e3 / o->ops : 0.0);
  printf("  unprofiled steps (medians): %.3f ms before the first op, %.3f ms inside ops (launch, wait), %.3f ms "
         "between ops (events, encoding), %.3f ms after the last op (%.3f ms of it until its last write-back "
         "ended, then the logits, sampling)\n",
         h->before, h->inside, h->between, h->after, h->after_wb);
  const double gbs = (double)wbytes / (med * 1e-3) / 1e9;
  printf("  weights %.2f GB per step: %.0f GB/s at the median step (%.1f tokens/s)\n", (double)wbytes / 1e9, gbs,
         1e3 / med);
  if (ceiling > 0)
    printf("  HBM ceiling measured here (device copy): %.0f GB/s; bound %.1f tokens/s; this step at %.1f %% of it\n",
           ceiling, ceiling * 1e9 / (double)wbytes, 100.0 * gbs / ceiling);
  const bc_gpu_window *w = &r->win;
  if (r->have_gpu) {
    /* CUPTI stretches the step it records (4.3 -> 11.7 ms on the H100):
     * its GPU time against the unprofiled median is the step's busy fraction */
    printf("  GPU: %d kernels (%.1f per op), %d copies; kernels %.3f ms, copies %.3f ms, busy %.3f ms of %.3f ms "
           "(the profiled step); busy fraction of the median step %.1f %%\n",
           w->kernels, o->ops ? (double)w->kernels / o->ops : 0.0, w->copies, w->kernel_ns / 1e6, w->copy_ns / 1e6,
           w->busy_ns / 1e6, wall, med > 0 ? 100.0 * w->busy_ns / 1e6 / med : 0.0);
    printf("  per kernel: %.1f us in the kernel, %.1f us of wall\n", w->kernels ? w->kernel_ns / 1e3 / w->kernels : 0.0,
           w->kernels ? wall * 1e3 / w->kernels : 0.0);
    print_kernels(w, a->top);
  }
  if (json)
    fprintf(json,
            "{\"bench\":\"step\",\"layers\":%lld,\"hidden\":%lld,\"dtype\":\"%s\",\"kv_dtype\":\"%s\",\"weight_bytes\":%llu,"
            "\"prompt\":%ld,\"step\":%d,\"wall_ms\":%.4f,\"median_wall_ms\":%.4f,\"ops\":%d,\"host_ops\":%d,"
            "\"in_ops_ms\":%.4f,\"gpu\":%s,\"kernels\":%d,\"copies\":%d,\"kernel_ms\":%.4f,\"copy_ms\":%.4f,"
            "\"busy_ms\":%.4f,\"busy_fraction\":%.4f,\"copy_ceiling_gbs\":%.1f,\"step_kernel\":%d,\"step_unroll\":%ld,"
            "\"host_before_ms\":%.4f,\"host_inside_ms\":%.4f,\"host_between_ms\":%.4f,\"host_after_ms\":%.4f,\"host_after_writeback_ms\":%.4f,\"busy_of_median\":%.4f}\n",
            (long long)c->num_layers, (long long)c->hidden_size, ot_dtype_name(a->dt), ot_dtype_name(a->kv),
            (unsigned long long)wbytes,
            a->prompt, k, wall, med, o->ops, o->host_ops, o->in_ops_ns / 1e6, r->have_gpu ? "true" : "false",
            w->kernels, w->copies, w->kernel_ns / 1e6, w->copy_ns / 1e6, w->busy_ns / 1e6,
            wall > 0 ? w->busy_ns / 1e6 / wall : 0.0, ceiling, ot_kstep_enabled(0), a->unroll, h->before,
            h->inside, h->between, h->after, h->after_wb, med > 0 ? w->busy_ns / 1e6 / med : 0.0);
}

static ot_status run(const bs_opts *a, FILE *json) {
  ot_hf_config c;
  config(a->layers, &c);
  ot_ctx *ctx = NULL;
  ot_lm *m = NULL;
  ot_trace *tr = NULL;
  ot_gen_result res = {0};
  bs_run r = {.profiled = (int)(a->steps + 1) / 2 + 1};
  int32_t *prompt = malloc((size_t)a->prompt * sizeof *prompt);
  ot_status s = prompt ? OT_OK : ot_set_error(OT_ERR_OUT_OF_MEMORY, "bench_step: the prompt");
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (long i = 0; prompt && i < a->prompt; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    prompt[i] = (int32_t)(x % (uint64_t)c.vocab_size);
  }
  if (s == OT_OK) s = ot_ctx_create(NULL, &ctx);
  if (s == OT_OK) s = ot_trace_create(&tr);
  if (s == OT_OK) {
    printf("bench_step on %s (device %d): synthetic Llama, %lld layers, hidden %lld, ffn %lld, vocab %lld, %s "
           "weights, prompt %ld, %ld decode steps; step kernel %s (%ld loads in flight per lane)\n",
           bc_device_kind(bc_device()), bc_device(), (long long)c.num_layers, (long long)c.hidden_size,
           (long long)c.intermediate_size, (long long)c.vocab_size, ot_dtype_name(a->dt), a->prompt, a->steps,
           ot_kstep_enabled(bc_device()) ? "on" : "off", a->unroll);
    s = ot_llama_synthetic(ctx, &c, a->dt, 1, NULL, NULL, &m);
  }
  const uint64_t wbytes = m ? m->weight_bytes : 0;
  if (s == OT_OK) {
    ot_gen_opts g = gen_opts(a);
    g.trace = tr;
    g.on_token = on_token;
    g.token_user = &r;
    s = ot_generate(m, prompt, (int)a->prompt, &g, &res);
  }
  if (s == OT_OK && r.n <= r.profiled)
    s = ot_set_error(OT_ERR_STATE, "bench_step: the generation stopped after %d tokens", r.n);
  if (s == OT_OK && (res.decode_plan.uploads || res.decode_plan.n_host_ops))
    fprintf(stderr, "bench_step: note: the decode plan uploads %d tensors and runs %d ops on the host per step: "
            "not all resident\n", res.decode_plan.uploads, res.decode_plan.n_host_ops);
  if (s == OT_OK) {
    bs_ops o = ops_between(tr, r.at[r.profiled - 1], r.at[r.profiled]);
    const bs_host h = host_split(tr, &r);
    report(a, &c, wbytes, &r, &o, &h, copy_ceiling(), json);
  }
  bc_gpu_window_free(&r.win);
  ot_gen_result_free(&res);
  ot_lm_destroy(m);
  ot_trace_destroy(tr);
  ot_ctx_destroy(ctx);
  free(prompt);
  return s;
}

/* --batch: n prompts of a.prompt tokens (their own seeds) decoded a.steps
 * tokens each in n slots; the result's aggregate decode tokens/s. */
static ot_status run_batch_of(ot_lm *m, const bs_opts *a, int n, ot_trace *tr, ot_gen_batch_result *r) {
  ot_gen_seq *seqs = calloc((size_t)n, sizeof *seqs);
  int32_t *ids = malloc((size_t)n * (size_t)a->prompt * sizeof *ids);
  ot_status s = seqs && ids ? OT_OK : ot_set_error(OT_ERR_OUT_OF_MEMORY, "bench_step: %d prompts", n);
  for (int i = 0; s == OT_OK && i < n; i++) {
    uint64_t x = 0x9e3779b97f4a7c15ull + (uint64_t)i * 0x632be59bd9b4e019ull;
    for (long j = 0; j < a->prompt; j++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      ids[i * a->prompt + j] = (int32_t)(x % (uint64_t)m->vocab);
    }
    seqs[i] = (ot_gen_seq){ids + i * a->prompt, (int)a->prompt, -1, (uint64_t)i};
  }
  if (s == OT_OK) {
    ot_gen_opts g = gen_opts(a);
    g.n_eos = 0; /* every sequence makes all its tokens: the steps are full */
    g.trace = tr;
    s = ot_generate_batch(m, seqs, n, n, &g, r);
  }
  free(seqs);
  free(ids);
  return s;
}

/* Where a batched decode step's time goes: from the trace, the decode
 * phase's ops (the events after its "decode" mark), the host time inside
 * them, its write-backs (count, bytes, the transfer thread's time); from
 * CUPTI (the whole run, prompt included: a per-step kernel has layers x
 * steps calls) the kernels, the most time first. */
static void batch_split(const ot_trace *tr, const ot_gen_batch_result *rb, const bc_gpu_window *w, long top) {
  uint64_t t0 = UINT64_MAX, t1 = 0, in = 0, dl_ns = 0, dl_bytes = 0, ul_bytes = 0;
  int ops = 0, dl = 0, ul = 0;
  for (size_t i = 0; i < ot_trace_count(tr); i++) {
    const ot_trace_event *e = ot_trace_event_at(tr, i);
    if (e->kind == OT_TRACE_MARK && e->name && !strcmp(e->name, "decode") && t0 == UINT64_MAX) t0 = e->start_ns;
    if (t0 == UINT64_MAX || e->start_ns < t0) continue;
    if (e->end_ns > t1) t1 = e->end_ns;
    if (e->kind == OT_TRACE_KERNEL) ops++, in += e->end_ns - e->start_ns;
    if (e->kind == OT_TRACE_DOWNLOAD) dl++, dl_ns += e->end_ns - e->start_ns, dl_bytes += e->bytes;
    if (e->kind == OT_TRACE_UPLOAD) ul++, ul_bytes += e->bytes;
  }
  const int st = rb->decode_steps > 0 ? rb->decode_steps : 1;
  /* the decode ops by kind (an op's name up to its '('): host time inside
   * them, launch and wait included, a step */
  enum { KINDS = 32 };
  struct { char name[48]; double ns; int n; } kind[KINDS];
  int nk = 0;
  for (size_t i = 0; t0 != UINT64_MAX && i < ot_trace_count(tr); i++) {
    const ot_trace_event *e = ot_trace_event_at(tr, i);
    if (e->kind != OT_TRACE_KERNEL || e->start_ns < t0 || !e->name) continue;
    const size_t len = strcspn(e->name, "(");
    int k = 0;
    while (k < nk && (strlen(kind[k].name) != len || strncmp(kind[k].name, e->name, len))) k++;
    if (k == nk) {
      if (nk == KINDS || len >= sizeof kind[0].name) continue;
      memcpy(kind[k].name, e->name, len);
      kind[k].name[len] = 0;
      kind[k].ns = 0;
      kind[k].n = 0;
      nk++;
    }
    kind[k].ns += (double)(e->end_ns - e->start_ns);
    kind[k].n++;
  }
  for (int a = 0; a < nk; a++) /* the most time first */
    for (int b = a + 1; b < nk; b++)
      if (kind[b].ns > kind[a].ns) {
        __typeof__(kind[0]) x = kind[a];
        kind[a] = kind[b];
        kind[b] = x;
      }
  for (int k = 0; k < nk && k < top; k++)
    printf("  decode op %-28s %5.1f a step, %8.3f ms a step (%.1f us each)\n", kind[k].name, (double)kind[k].n / st,
           kind[k].ns / 1e6 / st, kind[k].ns / 1e3 / kind[k].n);
  if (t0 != UINT64_MAX)
    printf("  decode, per step: %.1f ops, %.3f ms inside them (launch, wait) of %.3f ms; %.1f write-backs (%.1f KB, "
           "%.3f ms of copies), %.1f uploads (%.1f KB)\n",
           (double)ops / st, in / 1e6 / st, rb->decode_ms / st, (double)dl / st, dl_bytes / 1e3 / st, dl_ns / 1e6 / st,
           (double)ul / st, ul_bytes / 1e3 / st);
  if (!w) return;
  printf("  GPU over the whole run (prompt too): %d kernels %.1f ms, %d copies %.1f ms, busy %.1f ms\n", w->kernels,
         w->kernel_ns / 1e6, w->copies, w->copy_ns / 1e6, w->busy_ns / 1e6);
  print_kernels(w, top);
}

static ot_status run_batch(const bs_opts *a, FILE *json) {
  ot_hf_config c;
  config(a->layers, &c);
  ot_ctx *ctx = NULL;
  ot_lm *m = NULL;
  ot_gen_batch_result rb = {0};
  ot_gen_result r1 = {0};
  ot_trace *tr = NULL;
  bc_gpu_window win = {0};
  int have_gpu = 0;
  uint64_t l0 = 0, i0 = 0, l1 = 0, i1 = 0; /* step-kernel launches and instructions around the batch run */
  ot_status s = ot_ctx_create(NULL, &ctx);
  if (s == OT_OK) s = ot_llama_synthetic(ctx, &c, a->dt, 1, NULL, NULL, &m);
  if (s == OT_OK) {
    printf("bench_step --batch on %s (device %d): synthetic Llama, %lld layers, %s weights (%.2f GB), prompt %ld, "
           "%ld decode steps, %s KV caches; step kernel %s, its tensor-core rows %s (OMPTENSOR_STEP_MMA)\n",
           bc_device_kind(bc_device()), bc_device(), (long long)c.num_layers, ot_dtype_name(a->dt),
           (double)m->weight_bytes / 1e9, a->prompt, a->steps, ot_dtype_name(a->kv),
           ot_kstep_enabled(bc_device()) ? "on" : "off", ot_kstep_mma_on() ? "on" : "off");
    ot_status gs = bc_gpu_activity_start(); /* the whole batch run: its prefill kernels are the calls / layers */
    if (gs != OT_OK) fprintf(stderr, "bench_step: no GPU records: %s\n", ot_last_error());
    s = ot_trace_create(&tr);
    ot_kstep_counts(&l0, &i0);
    if (s == OT_OK) s = run_batch_of(m, a, (int)a->batch, tr, &rb);
    ot_kstep_counts(&l1, &i1);
    if (gs == OT_OK && bc_gpu_activity_stop(&win) == OT_OK) have_gpu = 1;
  }
  if (s == OT_OK) {
    printf("  step kernel over the batch run (prompt steps too): %llu launches, %llu instructions (%d prompt + %d "
           "decode steps)\n",
           (unsigned long long)(l1 - l0), (unsigned long long)(i1 - i0), rb.prefill_steps, rb.decode_steps);
    batch_split(tr, &rb, have_gpu ? &win : NULL, a->top);
  }
  /* batch 1 the way one prompt runs (ot_generate: the step kernel's path), on the batch's first prompt */
  int32_t *p1 = malloc((size_t)a->prompt * sizeof *p1);
  if (s == OT_OK && !p1) s = ot_set_error(OT_ERR_OUT_OF_MEMORY, "bench_step: the prompt");
  if (s == OT_OK) {
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (long j = 0; j < a->prompt; j++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      p1[j] = (int32_t)(x % (uint64_t)m->vocab);
    }
    ot_gen_opts g = gen_opts(a);
    s = ot_generate(m, p1, (int)a->prompt, &g, &r1);
  }
  free(p1);
  if (s == OT_OK) {
    const double ratio = r1.decode_tokens_per_second > 0 ? rb.decode_tokens_per_second / r1.decode_tokens_per_second : 0;
    const int st1 = r1.n_tokens - 1; /* decode steps: the first token is the prompt's */
    printf("  batch %3d: %d decode steps in %.1f ms (%.3f ms a step), %lld tokens: %.1f tokens/s aggregate\n",
           rb.n_slots, rb.decode_steps, rb.decode_ms, rb.decode_steps ? rb.decode_ms / rb.decode_steps : 0.0,
           (long long)rb.decode_tokens, rb.decode_tokens_per_second);
    printf("  batch   1 (ot_generate): %d decode steps in %.1f ms (%.3f ms a step): %.1f tokens/s\n", st1,
           r1.decode_ms, st1 > 0 ? r1.decode_ms / st1 : 0.0, r1.decode_tokens_per_second);
    printf("  batch %ld against batch 1: %.2fx aggregate tokens/s\n", a->batch, ratio);
    if (json)
      fprintf(json,
              "{\"bench\":\"step_batch\",\"layers\":%lld,\"dtype\":\"%s\",\"weight_bytes\":%llu,\"prompt\":%ld,"
              "\"batch\":%ld,\"batch_tokens_per_second\":%.3f,\"batch_step_ms\":%.4f,\"one_tokens_per_second\":%.3f,"
              "\"one_step_ms\":%.4f,\"ratio\":%.4f,\"step_kernel\":%d,\"step_mma\":%d,\"step_launches\":%llu}\n",
              (long long)c.num_layers, ot_dtype_name(a->dt), (unsigned long long)m->weight_bytes, a->prompt, a->batch,
              rb.decode_tokens_per_second, rb.decode_steps ? rb.decode_ms / rb.decode_steps : 0.0,
              r1.decode_tokens_per_second, r1.n_tokens > 1 ? r1.decode_ms / (r1.n_tokens - 1) : 0.0, ratio,
              ot_kstep_enabled(bc_device()), ot_kstep_mma_on(), (unsigned long long)(l1 - l0));
  }
  ot_gen_batch_result_free(&rb);
  ot_gen_result_free(&r1);
  bc_gpu_window_free(&win);
  ot_trace_destroy(tr);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
  return s;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  bs_opts a = {.layers = 32, .prompt = 128, .steps = 9, .top = 12, .unroll = 8, .dt = OT_BF16, .kv = OT_F32};
  const ot_opt *tables[] = {bs_optv, NULL};
  if (ot_args_parse("bench_step", argc, argv, tables, on_opt, &a) != OT_OK) {
    fprintf(stderr, "%s\n", ot_last_error());
    return 2;
  }
  FILE *json = NULL;
  ot_status s = bc_open_out(a.json, &json);
  if (s == OT_OK) s = a.batch ? run_batch(&a, json) : run(&a, json);
  if (json) bc_close_out(json);
  if (s != OT_OK) {
    fprintf(stderr, "bench_step: %s\n", ot_last_error());
    return 1;
  }
  return 0;
}
