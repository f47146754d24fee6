/* bench_plan.c — what planning and replaying cost on the host (issue 16,
 * "planning cost").
 *
 *   bench_plan [--sizes 1000,10000] [--cases random,llama,gpt2,replay]
 *              [--budgets fits,25%] [--strategies balanced,minimal]
 *              [--reps N] [--min-time S] [--json FILE]
 *
 * Planning: the time of ot_sched_plan (the median of --reps calls, at least
 * three and at least --min-time seconds of them; ot_plan_destroy is not
 * timed) for programs of about each size in ops:
 *   random  a generated program: weights read by many ops, inputs, KV-like
 *           persistent tensors updated in place, temporaries in chains and
 *           DAGs (inputs from the last value, the last 64, now and then any
 *           earlier one), in-place updates, partial writes, two-output ops
 *           and views; temporaries of 4 bytes to 12 KB, weights four
 *           times larger, so that they hold most of the bytes and 25 %
 *           offloads (a bench-local generator, in the spirit of tests'
 *           ts_randprog, scaled to N ops);
 *   llama   the decode step (T = 1) the library's Llama records, on a tiny
 *           shapes-only config (hidden 64) with as many layers as it takes
 *           to reach the size;
 *   gpt2    the GPT-2 training step (forward, backward, AdamW) the trainer
 *           records, plan_only, on a tiny config (n_embd 64, B 1, T 16) with
 *           as many layers as it takes.
 * Each under two budgets — "fits": the program's bytes (the sum of its
 * storages' blocks, what strategy none needs), nothing evicted; "25%": a
 * quarter of that (at least the smallest feasible budget), offloaded — and
 * strategies balanced (the default) and minimal. Targets (issue 16): 10 ms
 * for a 1 000-op program, 150 ms for 10 000 (sizes in between or beyond:
 * the target of the nearest of the two, scaled linearly by ops).
 *
 * Replay: ot_sched_run of a plan whose ops do nothing (an empty run
 * function, tensors of 1 .. 64 floats): host overhead per op = the median
 * replay time / ops, target 5 us; under both budgets, strategy balanced. A
 * second row per size runs a one-element kernel in every op (OT_PARFOR on
 * the op's first output): that includes a launch on the device, so it has
 * no target.
 *
 * Everything runs on the context's default device (OMP_TARGET_OFFLOAD=
 * MANDATORY on a GPU works unchanged). Prints a table, then one JSON line
 * per case (to --json FILE instead, if given): {"bench":"plan","case":...,
 * "ops":...,"plan_ms":...,"target_ms":...,"ratio":...}, ratio = time /
 * target (<= 1 meets it). Nothing is asserted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "omptensor/args.h"
#include "omptensor/gpt2_train.h"
#include "omptensor/models.h"
#include "ot_pragmas.h"

enum { BP_MAX_SIZES = 8, BP_WINDOW = 64 };

typedef struct bp_opts {
  int n_sizes;
  long sizes[BP_MAX_SIZES];
  const char *cases, *json, *budgets, *strategies;
  long reps;
  double min_time;
} bp_opts;

/* ---- results ------------------------------------------------------------------ */
typedef struct bp_out {
  FILE *json;     /* JSON lines: a file, or a buffer printed after the table */
  char *buf;
  size_t len;
  int n_pass, n_miss;
} bp_out;

static double target_plan_ms(int ops) {
  /* the two points; linear in ops around the nearer one */
  return ops <= 3162 ? 10.0 * ops / 1000.0 : 150.0 * ops / 10000.0;
}

static void verdict(bp_out *o, double ratio) {
  if (ratio <= 1.0) o->n_pass++;
  else o->n_miss++;
}

/* ---- the random program ---------------------------------------------------------- */
typedef struct bp_prog {
  ot_program *prog;
  ot_tensor **t; /* every tensor and view made, destroyed with the program */
  int n_t, cap_t;
  ot_tensor *in[2];
  int n_in;
} bp_prog;

static void prog_destroy(bp_prog *p) {
  ot_program_destroy(p->prog);
  for (int k = 0; k < p->n_t; k++) ot_tensor_destroy(p->t[k]);
  free(p->t);
  memset(p, 0, sizeof *p);
}

static ot_status keep(bp_prog *p, ot_tensor *t) {
  if (p->n_t == p->cap_t) {
    int nc = p->cap_t ? 2 * p->cap_t : 1024;
    ot_tensor **nt = realloc(p->t, (size_t)nc * sizeof *nt);
    if (!nt) {
      ot_tensor_destroy(t);
      return ot_set_error(OT_ERR_OUT_OF_MEMORY, "bench_plan: no host memory");
    }
    p->t = nt;
    p->cap_t = nc;
  }
  p->t[p->n_t++] = t;
  return OT_OK;
}

static uint64_t rnd(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int rnd_int(uint64_t *s, int lo, int hi) { return lo + (int)(rnd(s) % (uint64_t)(hi - lo + 1)); }

/* What an op does when it runs: nothing (the replay's host overhead), or a
 * one-element kernel on its first output (a launch per op). */
static ot_status op_noop(const ot_op_exec *e) {
  (void)e;
  return OT_OK;
}

static ot_status op_touch(const ot_op_exec *e) {
  float *y = e->out[0];
  OT_PARFOR(e->device, OT_DEVPTR(y))
  for (int j = 0; j < 1; j++) y[j] = 1.0f;
  return OT_OK;
}

typedef struct gen {
  ot_ctx *ctx;
  bp_prog *p;
  uint64_t r;
  int tiny;                 /* sizes 1 .. 16 floats (the replay) instead of 1 .. ~3000 */
  ot_op_fn run;
  ot_tensor **w;            /* weights */
  int n_w;
  ot_tensor **kv;           /* persistent, updated in place */
  int n_kv;
  ot_tensor **all;          /* every produced value (for long skips) */
  int n_all;
  ot_tensor *win[BP_WINDOW]; /* the latest produced values (a ring) */
  int writable[BP_WINDOW];
  int n_win, head;
} gen;

static int64_t rand_size(gen *g) {
  static const int64_t base[] = {1, 17, 64, 100, 257, 640, 1000, 3000};
  if (g->tiny) return rnd_int(&g->r, 1, 16);
  return base[rnd_int(&g->r, 0, 7)] + rnd_int(&g->r, 0, 40);
}

static ot_status new_tensor(gen *g, const char *kind, int idx, int64_t n, ot_tensor **out) {
  char nm[32];
  snprintf(nm, sizeof nm, "%s%d", kind, idx);
  OT_TRY(ot_tensor_create(g->ctx, nm, OT_F32, 1, &n, out));
  return keep(g->p, *out);
}

static void push_value(gen *g, ot_tensor *t, int writable) {
  g->win[g->head] = t;
  g->writable[g->head] = writable;
  g->head = (g->head + 1) % BP_WINDOW;
  if (g->n_win < BP_WINDOW) g->n_win++;
  g->all[g->n_all++] = t;
}

static ot_tensor *latest(const gen *g) { return g->win[(g->head + BP_WINDOW - 1) % BP_WINDOW]; }

/* An input for an op: the latest value, a recent one, a weight, a KV
 * tensor, a program input, or (rarely) any earlier value: a long skip. */
static ot_tensor *pick_input(gen *g, int first) {
  int c = rnd_int(&g->r, 0, 99);
  if (first && c < 50) return latest(g);
  if (c < 70) return g->win[rnd_int(&g->r, 0, g->n_win - 1)];
  if (c < 90) return g->w[rnd_int(&g->r, 0, g->n_w - 1)];
  if (c < 94 && g->n_kv) return g->kv[rnd_int(&g->r, 0, g->n_kv - 1)];
  if (c < 97) return g->p->in[rnd_int(&g->r, 0, g->p->n_in - 1)];
  return g->all[rnd_int(&g->r, 0, g->n_all - 1)];
}

static ot_status add_op(gen *g, const char *nm, ot_tensor **in, int n_in, ot_tensor **out, int n_out) {
  ot_op_desc d = {.name = nm, .run = g->run, .n_in = n_in, .in = in, .n_out = n_out, .out = out};
  return ot_program_add_op(g->p->prog, &d);
}

/* Drops inputs that share a storage with out (an in-place op lists it once). */
static int distinct_from(ot_tensor **in, int n_in, const ot_tensor *out) {
  int m = 1;
  for (int k = 1; k < n_in; k++)
    if (!ot_tensor_same_storage(in[k], out)) in[m++] = in[k];
  return m;
}

static ot_status gen_op(gen *g, int i) {
  ot_tensor *in[3], *out[2];
  int n_in = rnd_int(&g->r, 1, 3), kind = rnd_int(&g->r, 0, 19);
  char nm[32];
  snprintf(nm, sizeof nm, "op%d", i);
  for (int k = 0; k < n_in; k++) in[k] = pick_input(g, k == 0);
  if (kind == 0 && g->n_kv) { /* a KV cache row written in place */
    in[0] = out[0] = g->kv[rnd_int(&g->r, 0, g->n_kv - 1)];
    return add_op(g, nm, in, distinct_from(in, n_in, out[0]), out, 1);
  }
  if (kind <= 3) { /* in place on a recent temporary */
    int c = rnd_int(&g->r, 0, g->n_win - 1);
    if (g->writable[c]) {
      in[0] = out[0] = g->win[c];
      return add_op(g, nm, in, distinct_from(in, n_in, out[0]), out, 1);
    }
  }
  if (kind == 4) { /* a partial write: a slice of a new temporary */
    ot_tensor *t, *v;
    int64_t n = rand_size(g) + 8;
    OT_TRY(new_tensor(g, "s", i, n, &t));
    OT_TRY(ot_tensor_slice(t, 0, n / 4, n / 2, &v));
    OT_TRY(keep(g->p, v));
    out[0] = v;
    OT_TRY(add_op(g, nm, in, n_in, out, 1));
    push_value(g, t, 0);
    return OT_OK;
  }
  int n_out = kind == 5 ? 2 : 1;
  for (int o = 0; o < n_out; o++) OT_TRY(new_tensor(g, "t", 2 * i + o, rand_size(g), &out[o]));
  OT_TRY(add_op(g, nm, in, n_in, out, n_out));
  for (int o = 0; o < n_out; o++) push_value(g, out[o], 1);
  if (kind == 6 && ot_tensor_numel(out[0]) > 4) { /* a view of it read later */
    ot_tensor *v;
    OT_TRY(ot_tensor_slice(out[0], 0, 1, ot_tensor_numel(out[0]) - 2, &v));
    OT_TRY(keep(g->p, v));
    push_value(g, v, 0);
  }
  return OT_OK;
}

static ot_status gen_body(gen *g, ot_ctx *ctx, int n_ops) {
  bp_prog *p = g->p;
  OT_TRY(ot_program_create(ctx, &p->prog));
  /* weights hold most of the bytes (as in a model), so a quarter of the
   * program's bytes cannot keep them all: the 25 % budget offloads */
  g->n_w = g->tiny ? n_ops / 2 : n_ops / 6;
  if (g->n_w < 4) g->n_w = 4;
  g->n_kv = n_ops / 100 > 1 ? n_ops / 100 : 1;
  g->w = malloc((size_t)g->n_w * sizeof *g->w);
  g->kv = malloc((size_t)g->n_kv * sizeof *g->kv);
  g->all = malloc((size_t)(3 * n_ops + 8) * sizeof *g->all);
  if (!g->w || !g->kv || !g->all) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "bench_plan: no host memory");
  for (int k = 0; k < g->n_w; k++) OT_TRY(new_tensor(g, "w", k, 4 * rand_size(g), &g->w[k]));
  for (int k = 0; k < g->n_kv; k++) {
    OT_TRY(new_tensor(g, "kv", k, rand_size(g), &g->kv[k]));
    OT_TRY(ot_program_mark_persistent(p->prog, g->kv[k]));
  }
  for (int k = 0; k < 2; k++) {
    OT_TRY(new_tensor(g, "x", k, rand_size(g), &p->in[k]));
    OT_TRY(ot_program_mark_input(p->prog, p->in[k]));
    p->n_in++;
    push_value(g, p->in[k], 0);
  }
  for (int i = 0; i < n_ops; i++) OT_TRY(gen_op(g, i));
  /* outputs: the last value and a few produced ones */
  OT_TRY(ot_program_mark_output(p->prog, latest(g)));
  for (int k = 0; k < 8; k++) {
    int c = rnd_int(&g->r, 0, g->n_win - 1);
    if (g->writable[c]) OT_TRY(ot_program_mark_output(p->prog, g->win[c]));
  }
  return OT_OK;
}

static ot_status gen_program(ot_ctx *ctx, int n_ops, int tiny, ot_op_fn run, uint64_t seed, bp_prog *p) {
  memset(p, 0, sizeof *p);
  gen g = {.ctx = ctx, .p = p, .r = seed, .tiny = tiny, .run = run};
  ot_status s = gen_body(&g, ctx, n_ops);
  free(g.w);
  free(g.kv);
  free(g.all);
  if (s != OT_OK) prog_destroy(p);
  return s;
}

/* ---- budgets ------------------------------------------------------------------- */
/* The program's bytes: what strategy none keeps resident (every storage's
 * block), read from its plan under an unlimited budget; and the smallest
 * feasible budget. */
static ot_status program_bytes(ot_ctx *ctx, const ot_program *prog, uint64_t *total, uint64_t *min) {
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = OT_STRATEGY_NONE;
  o.budget_bytes = (uint64_t)1 << 50;
  ot_plan *pl = NULL;
  OT_TRY(ot_sched_plan(ctx, prog, &o, &pl));
  *total = ot_plan_get_stats(pl, 0).peak_bytes;
  ot_plan_destroy(pl);
  return ot_sched_min_budget(prog, min, NULL);
}

typedef struct bp_budget {
  const char *name;
  uint64_t bytes;
  int at_min; /* 25 % was below the smallest feasible budget */
} bp_budget;

static void budgets(uint64_t total, uint64_t min, bp_budget b[2]) {
  uint64_t q = total / 4;
  b[0] = (bp_budget){"fits", total, 0};
  b[1] = (bp_budget){"25%", q < min ? min : q, q < min};
}

/* ---- planning ------------------------------------------------------------------ */
static ot_status time_plan(ot_ctx *ctx, const ot_program *prog, const ot_sched_opts *o, const bp_opts *a, double *ms,
                           int *reps, ot_plan_stats *steady) {
  int cap = (int)a->reps, n = 0;
  double *v = malloc((size_t)cap * sizeof *v), spent = 0;
  if (!v) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "bench_plan: no host memory");
  ot_status s = OT_OK;
  for (int rep = -1; s == OT_OK && n < cap && (n < 3 || spent < a->min_time); rep++) {
    ot_plan *pl = NULL;
    double t = bc_now();
    s = ot_sched_plan(ctx, prog, o, &pl);
    double dt = bc_now() - t;
    if (s == OT_OK && rep >= 0) v[n++] = dt, spent += dt; /* rep -1: warm-up (first analysis) */
    if (s == OT_OK) *steady = ot_plan_get_stats(pl, 1);
    ot_plan_destroy(pl);
  }
  *ms = bc_median(v, n) * 1e3;
  *reps = n;
  free(v);
  return s;
}

static ot_status plan_cases(ot_ctx *ctx, const char *name, int size, const ot_program *prog, const bp_opts *a,
                            bp_out *out) {
  uint64_t total, min;
  OT_TRY(program_bytes(ctx, prog, &total, &min));
  bp_budget b[2];
  budgets(total, min, b);
  const ot_strategy strat[2] = {OT_STRATEGY_BALANCED, OT_STRATEGY_MINIMAL};
  int ops = ot_program_num_ops(prog);
  double target = target_plan_ms(ops);
  for (int k = 0; k < 2; k++)
    for (int q = 0; q < 2; q++) {
      if (!bc_match(a->budgets, b[k].name) || !bc_match(a->strategies, ot_strategy_name(strat[q]))) continue;
      ot_sched_opts o = ot_sched_opts_default();
      o.strategy = strat[q];
      o.budget_bytes = b[k].bytes;
      double ms;
      int reps;
      ot_plan_stats st;
      OT_TRY(time_plan(ctx, prog, &o, a, &ms, &reps, &st));
      double ratio = ms / target;
      verdict(out, ratio);
      printf("%-7s %6d %6d  %-4s %-8s %10.2f %8.1f %6.2f  %-4s %7d %7d  %5.1f MB\n", name, size, ops, b[k].name,
             ot_strategy_name(strat[q]), ms, target, ratio, ratio <= 1.0 ? "pass" : "MISS", st.uploads, st.evictions,
             (double)b[k].bytes / 1e6);
      fprintf(out->json,
              "{\"bench\":\"plan\",\"case\":\"%s\",\"size\":%d,\"ops\":%d,\"budget\":\"%s\",\"budget_bytes\":%llu,"
              "\"program_bytes\":%llu,\"budget_at_min\":%s,\"strategy\":\"%s\",\"plan_ms\":%.4f,\"target_ms\":%.2f,"
              "\"ratio\":%.4f,\"pass\":%s,\"reps\":%d,\"steady_uploads\":%d,\"steady_evictions\":%d,"
              "\"device\":\"%s\"}\n",
              name, size, ops, b[k].name, (unsigned long long)b[k].bytes, (unsigned long long)total,
              b[k].at_min ? "true" : "false", ot_strategy_name(strat[q]), ms, target, ratio,
              ratio <= 1.0 ? "true" : "false", reps, st.uploads, st.evictions, bc_device_kind(bc_device()));
    }
  return OT_OK;
}

static ot_status case_random(ot_ctx *ctx, int size, const bp_opts *a, bp_out *out) {
  bp_prog p;
  OT_TRY(gen_program(ctx, size, 0, op_noop, 0x5eed0000u + (uint64_t)size, &p));
  ot_status s = plan_cases(ctx, "random", size, p.prog, a, out);
  prog_destroy(&p);
  return s;
}

/* A tiny Llama (shapes only: no weight is made) with `layers` layers. */
static void llama_config(int64_t layers, ot_hf_config *c) {
  memset(c, 0, sizeof *c);
  c->arch = OT_ARCH_LLAMA;
  strcpy(c->model_type, "llama");
  strcpy(c->architecture, "LlamaForCausalLM (bench_plan)");
  c->hidden_size = 64;
  c->intermediate_size = 128;
  c->num_layers = layers;
  c->num_heads = 4;
  c->num_kv_heads = 2;
  c->head_dim = 16;
  c->vocab_size = 256;
  c->max_position_embeddings = 64;
  c->norm_eps = 1e-5;
  c->rope_theta = 10000;
  c->act = OT_ACT_SILU;
  c->bos_token_id = -1;
}

typedef struct llama_step {
  ot_lm *m;
  ot_lm_step st;
} llama_step;

static void llama_free(llama_step *l) {
  ot_lm_step_destroy(&l->st);
  ot_lm_destroy(l->m);
  memset(l, 0, sizeof *l);
}

static ot_status llama_make(ot_ctx *ctx, int64_t layers, llama_step *l) {
  memset(l, 0, sizeof *l);
  ot_hf_config c;
  llama_config(layers, &c);
  ot_status s = ot_llama_shapes(ctx, &c, NULL, OT_F32, &l->m);
  if (s == OT_OK) {
    l->m->n_ctx = 64; /* the KV caches hold 64 positions */
    s = l->m->vt->build(l->m, 1, 0, &l->st);
  }
  if (s != OT_OK) llama_free(l);
  return s;
}

/* GPT-2 trainers are made from a directory with config.json: a temporary one. */
static ot_status gpt2_dir(char *dir, size_t n, int64_t layers) {
  snprintf(dir, n, "/tmp/bench_plan_gpt2_XXXXXX");
  if (!mkdtemp(dir)) return ot_set_error(OT_ERR_IO, "bench_plan: cannot make a directory in /tmp");
  char path[512];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  if (!f) return ot_set_error(OT_ERR_IO, "bench_plan: cannot write %s", path);
  fprintf(f,
          "{\"model_type\": \"gpt2\", \"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 64, \"n_head\": 4, "
          "\"n_layer\": %lld, \"n_positions\": 64, \"vocab_size\": 256, \"resid_pdrop\": 0.0, \"embd_pdrop\": 0.0, "
          "\"attn_pdrop\": 0.0, \"tie_word_embeddings\": true}\n",
          (long long)layers);
  return fclose(f) == 0 ? OT_OK : ot_set_error(OT_ERR_IO, "bench_plan: cannot write %s", path);
}

static void gpt2_rmdir(const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/config.json", dir);
  unlink(path);
  rmdir(dir);
}

static ot_status gpt2_make(ot_ctx *ctx, int64_t layers, ot_gpt2_trainer **g) {
  char dir[64];
  OT_TRY(gpt2_dir(dir, sizeof dir, layers));
  ot_gpt2_train_opts o = ot_gpt2_train_opts_default();
  o.B = 1;
  o.T = 16;
  o.init_random = 1;
  o.plan_only = 1; /* no memory, never run: the program and a plan */
  ot_sched_opts so = ot_sched_opts_default();
  so.budget_bytes = (uint64_t)1 << 40;
  ot_status s = ot_gpt2_train_create(ctx, dir, &o, &so, g);
  gpt2_rmdir(dir);
  return s;
}

/* The layer count whose step has about `size` ops: ops(L) = a + b L, from
 * L = 1 and 2. */
static int64_t layers_for(int size, int ops1, int ops2) {
  int per = ops2 - ops1 > 0 ? ops2 - ops1 : 1;
  int64_t l = (size - (ops1 - per) + per / 2) / per;
  return l < 1 ? 1 : l;
}

static ot_status case_llama(ot_ctx *ctx, int size, const bp_opts *a, bp_out *out) {
  llama_step l1, l2, l;
  OT_TRY(llama_make(ctx, 1, &l1));
  ot_status s = llama_make(ctx, 2, &l2);
  int o1 = ot_program_num_ops(l1.st.prog), o2 = s == OT_OK ? ot_program_num_ops(l2.st.prog) : 0;
  llama_free(&l1);
  llama_free(&l2);
  if (s == OT_OK) s = llama_make(ctx, layers_for(size, o1, o2), &l);
  if (s != OT_OK) return s;
  s = plan_cases(ctx, "llama", size, l.st.prog, a, out);
  llama_free(&l);
  return s;
}

static ot_status case_gpt2(ot_ctx *ctx, int size, const bp_opts *a, bp_out *out) {
  ot_gpt2_trainer *g1 = NULL, *g2 = NULL, *g = NULL;
  ot_status s = gpt2_make(ctx, 1, &g1);
  if (s == OT_OK) s = gpt2_make(ctx, 2, &g2);
  int o1 = g1 ? ot_program_num_ops(ot_gpt2_train_program(g1)) : 0;
  int o2 = g2 ? ot_program_num_ops(ot_gpt2_train_program(g2)) : 0;
  ot_gpt2_train_destroy(g1);
  ot_gpt2_train_destroy(g2);
  if (s == OT_OK) s = gpt2_make(ctx, layers_for(size, o1, o2), &g);
  if (s == OT_OK) s = plan_cases(ctx, "gpt2", size, ot_gpt2_train_program(g), a, out);
  ot_gpt2_train_destroy(g);
  return s;
}

/* ---- replay ------------------------------------------------------------------- */
static ot_status time_run(ot_plan *pl, const bp_opts *a, double *ms, int *reps) {
  int cap = (int)(a->reps > 5 ? a->reps : 5), n = 0;
  double *v = malloc((size_t)cap * sizeof *v), spent = 0;
  if (!v) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "bench_plan: no host memory");
  ot_status s = OT_OK;
  /* two untimed runs: the first from an empty device (arena allocation,
   * every upload), the second the first steady replay */
  for (int rep = -2; s == OT_OK && n < cap && (n < 5 || spent < a->min_time); rep++) {
    double t = bc_now();
    s = ot_sched_run(pl, NULL);
    double dt = bc_now() - t;
    if (s == OT_OK && rep >= 0) v[n++] = dt, spent += dt;
  }
  *ms = bc_median(v, n) * 1e3;
  *reps = n;
  free(v);
  return s;
}

static ot_status case_replay(ot_ctx *ctx, int size, const bp_opts *a, bp_out *out) {
  for (int kernel = 0; kernel < 2; kernel++) {
    bp_prog p;
    OT_TRY(gen_program(ctx, size, 1, kernel ? op_touch : op_noop, 0x7e9a0000u + (uint64_t)size, &p));
    uint64_t total, min;
    ot_status s = program_bytes(ctx, p.prog, &total, &min);
    bp_budget b[2];
    budgets(total, min, b);
    const char *name = kernel ? "replay+kernel" : "replay";
    for (int k = 0; s == OT_OK && k < 2; k++) {
      if (!bc_match(a->budgets, b[k].name)) continue;
      ot_sched_opts o = ot_sched_opts_default();
      o.budget_bytes = b[k].bytes;
      ot_plan *pl = NULL;
      double ms = 0;
      int reps = 0;
      s = ot_sched_plan(ctx, p.prog, &o, &pl);
      ot_plan_stats st = ot_plan_get_stats(pl, 1);
      if (s == OT_OK) s = time_run(pl, a, &ms, &reps);
      ot_plan_destroy(pl);
      if (s != OT_OK) break;
      int ops = ot_program_num_ops(p.prog);
      double us = ms * 1e3 / ops, ratio = us / 5.0;
      char rs[16] = "-", vs[8] = "-";
      if (!kernel) { /* the kernel rows include a launch per op: no target */
        verdict(out, ratio);
        snprintf(rs, sizeof rs, "%.2f", ratio);
        snprintf(vs, sizeof vs, "%s", ratio <= 1.0 ? "pass" : "MISS");
      }
      printf("%-13s %6d %6d  %-4s %10.3f %9.2f %6s  %-4s %7d %7d  %5.1f KB\n", name, size, ops, b[k].name, ms, us, rs,
             vs, st.uploads, st.downloads, (double)b[k].bytes / 1e3);
      fprintf(out->json,
              "{\"bench\":\"plan\",\"case\":\"%s\",\"size\":%d,\"ops\":%d,\"budget\":\"%s\",\"budget_bytes\":%llu,"
              "\"strategy\":\"balanced\",\"run_ms\":%.4f,\"us_per_op\":%.4f,\"target_us\":%s,\"ratio\":%s,"
              "\"pass\":%s,\"reps\":%d,\"steady_uploads\":%d,\"steady_downloads\":%d,\"device\":\"%s\"}\n",
              name, size, ops, b[k].name, (unsigned long long)b[k].bytes, ms, us, kernel ? "null" : "5",
              kernel ? "null" : rs,
              kernel         ? "null"
              : ratio <= 1.0 ? "true"
                             : "false",
              reps, st.uploads, st.downloads, bc_device_kind(bc_device()));
    }
    prog_destroy(&p);
    OT_TRY(s);
  }
  return OT_OK;
}

/* ---- options, main ---------------------------------------------------------------- */
enum { O_SIZES = 1, O_CASES, O_BUDGETS, O_STRATEGIES, O_REPS, O_MIN_TIME, O_JSON, O_HELP };

static const ot_opt bp_optv[] = {
    {"sizes", 0, "N,N", "program sizes in ops (default 1000,10000)", O_SIZES},
    {"cases", 0, "LIST", "which cases: random,llama,gpt2,replay (substrings; default all)", O_CASES},
    {"budgets", 0, "LIST", "which budgets: fits,25% (default both)", O_BUDGETS},
    {"strategies", 0, "LIST", "which strategies: balanced,minimal (default both; replay: balanced)", O_STRATEGIES},
    {"reps", 0, "N", "most timed calls per case (default 15; at least 3 plans, 5 replays)", O_REPS},
    {"min-time", 0, "S", "seconds of timed calls per case before stopping (default 0.5)", O_MIN_TIME},
    {"json", 0, "FILE", "write the JSON lines to FILE instead of after the table", O_JSON},
    {"help", 'h', NULL, "show this help", O_HELP},
    {0}};

static ot_status on_opt(void *user, const ot_opt *opt, const char *v) {
  bp_opts *o = user;
  long x;
  if (!opt) return ot_set_error(OT_ERR_INVALID_ARG, "unexpected argument '%s'", v);
  switch (opt->id) {
  case O_SIZES: {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    o->n_sizes = 0;
    char *sv = NULL;
    for (char *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
      if (o->n_sizes == BP_MAX_SIZES) return ot_set_error(OT_ERR_INVALID_ARG, "at most %d sizes", BP_MAX_SIZES);
      OT_TRY(bc_parse_int("--sizes", t, 1, 1000000, &x));
      o->sizes[o->n_sizes++] = x;
    }
    if (!o->n_sizes) return ot_set_error(OT_ERR_INVALID_ARG, "no size given");
    break;
  }
  case O_CASES: o->cases = v; break;
  case O_BUDGETS: o->budgets = v; break;
  case O_STRATEGIES: o->strategies = v; break;
  case O_REPS: OT_TRY(bc_parse_int("--reps", v, 1, 100000, &o->reps)); break;
  case O_MIN_TIME: OT_TRY(bc_parse_double("--min-time", v, &o->min_time)); break;
  case O_JSON: o->json = v; break;
  case O_HELP: bc_usage("bench_plan", bp_optv);
  }
  return OT_OK;
}

typedef ot_status (*bp_case)(ot_ctx *ctx, int size, const bp_opts *a, bp_out *out);

static ot_status run_all(const bp_opts *a, bp_out *out) {
  ot_ctx *ctx = NULL;
  OT_TRY(ot_ctx_create(NULL, &ctx));
  printf("bench_plan on %s (device %d of the context)\n\n", bc_device_kind(bc_device()), bc_device());
  static const char *const names[] = {"random", "llama", "gpt2", "replay"};
  static const bp_case fns[] = {case_random, case_llama, case_gpt2, case_replay};
  ot_status s = OT_OK;
  int header = 0;
  for (int c = 0; s == OT_OK && c < 4; c++) {
    if (!bc_match(a->cases, names[c])) continue;
    if (c < 3 && !header) {
      printf("planning (ot_sched_plan, median)\n%-7s %6s %6s  %-4s %-8s %10s %8s %6s  %-4s %7s %7s  %8s\n", "case",
             "size", "ops", "bdgt", "strategy", "plan ms", "target", "ratio", "", "uploads", "evicts", "budget");
      header = 1;
    }
    if (c == 3)
      printf("\nreplay (ot_sched_run of a steady replay, median; target 5 us per op)\n%-13s %6s %6s  %-4s %10s "
             "%9s %6s  %-4s %7s %7s  %8s\n",
             "case", "size", "ops", "bdgt", "run ms", "us/op", "ratio", "", "uploads", "downlds", "budget");
    for (int k = 0; s == OT_OK && k < a->n_sizes; k++) s = fns[c](ctx, (int)a->sizes[k], a, out);
  }
  ot_ctx_destroy(ctx);
  return s;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  bp_opts a = {.n_sizes = 2, .sizes = {1000, 10000}, .reps = 15, .min_time = 0.5};
  const ot_opt *tables[] = {bp_optv, NULL};
  if (ot_args_parse("bench_plan", argc, argv, tables, on_opt, &a) != OT_OK) {
    fprintf(stderr, "%s\n", ot_last_error());
    return 2;
  }
  bp_out out = {0};
  ot_status s = a.json ? bc_open_out(a.json, &out.json) : OT_OK;
  if (s == OT_OK && !a.json) {
    out.json = open_memstream(&out.buf, &out.len);
    if (!out.json) s = ot_set_error(OT_ERR_OUT_OF_MEMORY, "bench_plan: no host memory");
  }
  if (s == OT_OK) s = run_all(&a, &out);
  if (s == OT_OK)
    printf("\n%d cases meet their target, %d miss it (targets: 10 ms per 1000-op plan, 150 ms per 10000, 5 us per "
           "replayed op)\n",
           out.n_pass, out.n_miss);
  if (a.json) {
    bc_close_out(out.json);
  } else if (out.json) {
    fclose(out.json);
    if (s == OT_OK) printf("\n%s", out.buf ? out.buf : "");
    free(out.buf);
  }
  if (s != OT_OK) {
    fprintf(stderr, "bench_plan: %s\n", ot_last_error());
    return 1;
  }
  return 0;
}
