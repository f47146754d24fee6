/* test_sched_recompute.c — the planner's per-tensor choice between writing
 * an evicted activation home (and reading it back) and dropping it and
 * running its producer again before its next use (ot_sched_opts.recompute,
 * src/sched/README.md "Recomputation").
 *
 *   - a training-like chain (x -> "matmul" -> "gelu" -> ... forward, then a
 *     backward that reads every activation again) under budgets that force
 *     evictions: with recompute on, the results are bitwise the unlimited
 *     run's, the trace holds recompute kernels (and the plan's stats agree),
 *     fewer bytes go home than with recompute off, and the budget holds;
 *   - the same chain with huge flops hints: offloading is cheaper, nothing is
 *     recomputed, and the plan is the plain one;
 *   - a producer whose input is written in place before the next use is never
 *     run again (and is, without that write: the control);
 *   - recompute off (the default) gives the plain plan, event for event;
 *   - random programs (in-place ops, partial writes, persistent state) under
 *     every budget and strategy: bitwise the plain runs, within the budget,
 *     and some of them recompute. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "memory/device.h"
#include "ot_test.h"
#include "sched/trace_impl.h"
#include "sched_support.h"

#define N 1024 /* floats per tensor: 4 KiB, 16 arena blocks */
#define TB ((uint64_t)N * 4)
#define MAXL 8
#define UNLIMITED (1ull << 40)
#define RUNS 3

typedef struct chain {
  ot_program *p;
  int n_t;
  ot_tensor *t[8 * MAXL + 8];
  ot_tensor *out[MAXL + 1]; /* checked: the input's gradient and each layer's weight gradient */
  int n_out;
} chain;

static ot_tensor *tensor_n(ot_ctx *ctx, chain *c, const char *fmt, int l, int64_t n) {
  char nm[32];
  snprintf(nm, sizeof nm, fmt, l);
  int64_t shape = n;
  ot_tensor *t;
  OT_ASSERT_OK(ot_tensor_create(ctx, nm, OT_F32, 1, &shape, &t));
  c->t[c->n_t++] = t;
  return t;
}

static ot_tensor *tensor(ot_ctx *ctx, chain *c, const char *fmt, int l) { return tensor_n(ctx, c, fmt, l, N); }

static void op(chain *c, const char *name, ot_tensor *const *in, int n_in, ot_tensor *out, double flops) {
  static const ts_mix_params prm = {{0.5f, 0.25f, 0.125f}, 0.0625f, -1};
  ot_op_desc d = {name, ts_mix_run, n_in, in, 1, &out, &prm, sizeof prm, flops, 0};
  OT_ASSERT_OK(ot_program_add_op(c->p, &d));
}

/* Forward: h_l = mm(a_l, w_l) (flops mm_flops), a_{l+1} = gelu(h_l) (no
 * hint); backward: g_L = mix(a_L), then g_l = mix(g_{l+1}, h_l, a_l) and
 * dw_l = mix(g_{l+1}, a_l), reading every activation again in reverse.
 * inplace_at >= 0: after layer inplace_at's matmul, an op rewrites a_l in
 * place (h_l's input changes before h_l's next use). */
/* chain_build's bias: after each matmul, an op adds a bias into h_l in place
 * (h_l's value is then made by two ops: a rebuild runs both), the gelus get
 * a huge flops hint, so that the h, not the a, are the ones rebuilt, and the
 * weights and biases are small (a block each), so that uploading them for a
 * rebuild costs less than h's trip home and back */
static int with_bias;

static void chain_build(ot_ctx *ctx, chain *c, int L, double mm_flops, int inplace_at) {
  memset(c, 0, sizeof *c);
  OT_ASSERT_OK(ot_program_create(ctx, &c->p));
  ot_tensor *a[MAXL + 1], *h[MAXL], *w[MAXL];
  a[0] = tensor(ctx, c, "x", 0);
  ts_fill(a[0], 1);
  for (int l = 0; l < L; l++) {
    w[l] = tensor_n(ctx, c, "w%d", l, with_bias ? 64 : N);
    ts_fill(w[l], 100 + (uint64_t)l);
    h[l] = tensor(ctx, c, "h%d", l);
    a[l + 1] = tensor(ctx, c, "a%d", l + 1);
    ot_tensor *in[2] = {a[l], w[l]};
    op(c, "matmul", in, 2, h[l], mm_flops);
    if (with_bias) {
      ot_tensor *b = tensor_n(ctx, c, "b%d", l, 64), *inb[2] = {h[l], b};
      ts_fill(b, 200 + (uint64_t)l);
      op(c, "bias", inb, 2, h[l], 0);
    }
    if (l == inplace_at) op(c, "scale_inplace", &a[l], 1, a[l], 0);
    op(c, "gelu", &h[l], 1, a[l + 1], with_bias ? 1e12 : 0);
  }
  ot_tensor *g = tensor(ctx, c, "g%d", L);
  op(c, "loss_grad", &a[L], 1, g, 0);
  for (int l = L - 1; l >= 0; l--) {
    ot_tensor *gl = tensor(ctx, c, "g%d", l), *dw = tensor(ctx, c, "dw%d", l);
    ot_tensor *in[3] = {g, h[l], a[l]};
    op(c, "backward", in, 3, gl, 0);
    ot_tensor *in2[2] = {g, a[l]};
    op(c, "wgrad", in2, 2, dw, 0);
    OT_ASSERT_OK(ot_program_mark_output(c->p, dw));
    c->out[c->n_out++] = dw;
    g = gl;
  }
  OT_ASSERT_OK(ot_program_mark_input(c->p, a[0]));
  OT_ASSERT_OK(ot_program_mark_output(c->p, g));
  c->out[c->n_out++] = g;
}

static void chain_destroy(chain *c) {
  ot_program_destroy(c->p);
  for (int k = 0; k < c->n_t; k++) ot_tensor_destroy(c->t[k]);
}

typedef struct result {
  float v[(MAXL + 1) * N];
  uint64_t to_host;
  int trace_recomputes; /* KERNEL events flagged OT_TRACE_RECOMPUTE */
  int bias_rebuilt;     /* of them, bias ops (the second op of h_l's rebuild) */
  int recompute_allocs; /* ALLOC events flagged OT_TRACE_RECOMPUTE */
  int chrome_recomputes; /* kernels named "... (recompute)" in the Chrome JSON */
  int read_back_recomputes; /* recomputes of that JSON read back (ot_trace_read_chrome_text) */
  ot_plan_stats first, steady;
} result;

static void run_chain(ot_ctx *ctx, int L, double mm_flops, int inplace_at, ot_strategy strat, uint64_t budget,
                      int recompute, result *out) {
  chain c;
  chain_build(ctx, &c, L, mm_flops, inplace_at);
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = strat;
  o.budget_bytes = budget;
  o.recompute = recompute;
  o.transfer_delay_us = 20; /* a recompute that ran before its inputs landed shows up as wrong numbers */
  ot_plan *plan = NULL;
  if (ot_sched_plan(ctx, c.p, &o, &plan) != OT_OK) fail_msg("plan (budget %llu): %s", (unsigned long long)budget, ot_last_error());
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  for (int r = 0; r < RUNS; r++)
    if (ot_sched_run(plan, tr) != OT_OK) fail_msg("run %d: %s", r, ot_last_error());
  if (ot_trace_check_budget(tr, budget) != OT_OK)
    fail_msg("%s budget %llu recompute %d: %s", ot_strategy_name(strat), (unsigned long long)budget, recompute,
             ot_last_error());
  ot_trace_summary sm = ot_trace_summarize(tr);
  out->to_host = sm.bytes_to_host;
  out->trace_recomputes = sm.recomputes;
  out->recompute_allocs = out->bias_rebuilt = 0;
  for (size_t i = 0; i < ot_trace_count(tr); i++) {
    const ot_trace_event *e = ot_trace_event_at(tr, i);
    out->bias_rebuilt += e->kind == OT_TRACE_KERNEL && (e->flags & OT_TRACE_RECOMPUTE) && !strcmp(e->name, "bias");
    if (e->kind == OT_TRACE_ALLOC && (e->flags & OT_TRACE_RECOMPUTE)) out->recompute_allocs++;
    if (e->kind == OT_TRACE_KERNEL && (e->flags & OT_TRACE_RECOMPUTE)) assert_true(e->flags & OT_TRACE_RESIDENT_OK);
  }
  /* Perfetto's view: the Chrome JSON names them, and reading it back keeps the flag */
  char *text;
  OT_ASSERT_OK(ot_trace_chrome_text(tr, &text));
  out->chrome_recomputes = 0;
  for (const char *q = text; (q = strstr(q, " (recompute)\"")) != NULL; q++) out->chrome_recomputes++;
  ot_trace *back;
  uint64_t bb;
  OT_ASSERT_OK(ot_trace_read_chrome_text(text, strlen(text), "recompute.json", &back, &bb));
  out->read_back_recomputes = ot_trace_summarize(back).recomputes;
  OT_ASSERT_OK(ot_trace_check_budget(back, budget));
  ot_trace_destroy(back);
  free(text);
  out->first = ot_plan_get_stats(plan, 0);
  out->steady = ot_plan_get_stats(plan, 1);
  for (int k = 0; k < c.n_out; k++) OT_ASSERT_OK(ot_tensor_read_f32(c.out[k], out->v + (size_t)k * N, N));
  ot_trace_destroy(tr);
  ot_plan_destroy(plan);
  chain_destroy(&c);
}

static uint64_t chain_min_budget(ot_ctx *ctx, int L) { /* (with_bias: the same) */
  chain c;
  chain_build(ctx, &c, L, 0, -1);
  uint64_t m;
  OT_ASSERT_OK(ot_sched_min_budget(c.p, &m, NULL));
  chain_destroy(&c);
  return m;
}

/* Recompute on under tight budgets: bitwise the unlimited run, recompute
 * kernels in the trace (as many as the stats say), fewer bytes home than the
 * plain plan at the same budget, the budget held. */
static void chain_recomputes_run(void) {
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  const int L = 6;
  const double mm_flops = 2.0 * N * 64;
  static result ref, plain, rc;
  run_chain(ctx, L, mm_flops, -1, OT_STRATEGY_BALANCED, UNLIMITED, 1, &ref);
  assert_int_equal(ref.trace_recomputes, 0); /* nothing is evicted: nothing to recompute */
  const uint64_t minb = chain_min_budget(ctx, L);
  const uint64_t budgets[] = {minb, minb + TB, minb + 2 * TB, minb + 4 * TB};
  int any_fewer = 0, any_chain = 0;
  for (size_t b = 0; b < sizeof budgets / sizeof *budgets; b++)
    for (int s = OT_STRATEGY_MINIMAL; s < OT_STRATEGY_COUNT; s++) {
      const ot_strategy st = (ot_strategy)s;
      run_chain(ctx, L, mm_flops, -1, st, budgets[b], 0, &plain);
      run_chain(ctx, L, mm_flops, -1, st, budgets[b], 1, &rc);
      if (memcmp(rc.v, ref.v, sizeof ref.v))
        fail_msg("%s budget %llu: recomputed results differ from the unlimited run", ot_strategy_name(st),
                 (unsigned long long)budgets[b]);
      assert_memory_equal(plain.v, ref.v, sizeof ref.v);
      /* at the feasibility bound an op's own working set fills the arena: no
       * room for a producer's inputs, so nothing can be rebuilt there (an h
       * with its bias needs its matmul's w and bias b, small, beside the
       * backward's four) */
      const uint64_t room = minb + (with_bias ? 512 : 0);
      if (budgets[b] > room && (rc.first.recomputes == 0 || rc.steady.recomputes == 0))
        fail_msg("%s budget %llu: no recomputation planned (first %d, replays %d)", ot_strategy_name(st),
                 (unsigned long long)budgets[b], rc.first.recomputes, rc.steady.recomputes);
      /* the trace shows each planned recomputation: the first run's, then the replays' */
      assert_int_equal(rc.trace_recomputes, rc.first.recompute_kernels + (RUNS - 1) * rc.steady.recompute_kernels);
      assert_int_equal(rc.recompute_allocs, rc.first.recomputes + (RUNS - 1) * rc.steady.recomputes);
      /* with the bias, a rebuilt h runs the matmul and the bias again: more kernels than blocks */
      if (with_bias) any_chain |= rc.bias_rebuilt > 0 && rc.trace_recomputes > rc.recompute_allocs;
      else assert_int_equal(rc.recompute_allocs, rc.trace_recomputes);
      assert_int_equal(rc.chrome_recomputes, rc.trace_recomputes);
      assert_int_equal(rc.read_back_recomputes, rc.trace_recomputes);
      assert_int_equal(plain.trace_recomputes, 0);
      assert_int_equal(plain.first.recomputes, 0);
      if (rc.to_host > plain.to_host)
        fail_msg("%s budget %llu: %llu bytes home with recompute, %llu without", ot_strategy_name(st),
                 (unsigned long long)budgets[b], (unsigned long long)rc.to_host, (unsigned long long)plain.to_host);
      any_fewer |= rc.to_host < plain.to_host;
      if (budgets[b] > room) assert_true(rc.first.recompute_bytes >= TB);
      assert_true(rc.first.bytes_down <= plain.first.bytes_down);
    }
  assert_true(any_fewer); /* (the host backend copies nothing but records every planned write-back's bytes) */
  if (with_bias && !any_chain) fail_msg("no h was rebuilt by its matmul and its bias (the chain of writes)");
  ot_ctx_destroy(ctx);
}

static void chain_recomputes(void **state) {
  (void)state;
  with_bias = 0;
  chain_recomputes_run();
}

static int reset_bias(void **state) {
  (void)state;
  with_bias = 0;
  return 0;
}

/* The same with a bias added into each h in place after its matmul: a
 * rebuilt h runs both again, in order (bitwise the unlimited run). */
static void chain_of_writes(void **state) {
  (void)state;
  with_bias = 1;
  chain_recomputes_run();
  with_bias = 0;
}

/* Huge flops behind few bytes: running a matmul again costs more than its
 * output's trip home and back, so no matmul is ever run again (the gelus,
 * with no flops hint, may be); the results stay the plain run's. */
static void offload_when_cheaper(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  const int L = 6;
  const uint64_t minb = chain_min_budget(ctx, L);
  static result plain, rc;
  for (int s = OT_STRATEGY_MINIMAL; s < OT_STRATEGY_COUNT; s++) {
    /* the matmuls at 1e12 flops (50 ms at the default 20 Tflop/s) against
     * 4 KiB home and back (0.15 us at 54 GB/s) */
    run_chain(ctx, L, 1e12, -1, (ot_strategy)s, minb + TB, 0, &plain);
    run_chain(ctx, L, 1e12, -1, (ot_strategy)s, minb + TB, 1, &rc);
    assert_memory_equal(rc.v, plain.v, sizeof plain.v);
    /* the stats name the flops of what was run again: never a matmul */
    assert_true(rc.first.recompute_flops == 0 && rc.steady.recompute_flops == 0);
  }
  ot_ctx_destroy(ctx);
}

/* With the flop rate given as tiny, every op with a hint is dearer than its
 * output's trip over PCIe: only hint-less ops could be recomputed. A chain
 * whose every op carries flops then recomputes nothing and plans exactly as
 * recompute off. */
static void expensive_ops_never_recomputed(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  const int L = 4;
  chain c[2];
  ot_plan *plan[2];
  uint64_t minb = chain_min_budget(ctx, L);
  for (int k = 0; k < 2; k++) {
    memset(&c[k], 0, sizeof c[k]);
    OT_ASSERT_OK(ot_program_create(ctx, &c[k].p));
    ot_tensor *a = tensor(ctx, &c[k], "x", 0), *acts[2 * MAXL + 1];
    ts_fill(a, 1);
    int n = 0;
    acts[n++] = a;
    for (int l = 0; l < 2 * L; l++) {
      ot_tensor *y = tensor(ctx, &c[k], "act%d", l);
      op(&c[k], "layer", &acts[n - 1], 1, y, 1e6);
      acts[n++] = y;
    }
    ot_tensor *g = acts[n - 1];
    for (int l = n - 2; l >= 0; l--) {
      ot_tensor *gl = tensor(ctx, &c[k], "g%d", l), *in[2] = {g, acts[l]};
      op(&c[k], "backward", in, 2, gl, 1e6);
      g = gl;
    }
    OT_ASSERT_OK(ot_program_mark_input(c[k].p, a));
    OT_ASSERT_OK(ot_program_mark_output(c[k].p, g));
    ot_sched_opts o = ot_sched_opts_default();
    o.budget_bytes = minb + TB;
    o.recompute = k;
    o.flops_per_s = 1e9; /* 1 ms per op against 0.15 us home and back */
    OT_ASSERT_OK(ot_sched_plan(ctx, c[k].p, &o, &plan[k]));
  }
  for (int steady = 0; steady < 2; steady++) {
    ot_plan_stats a = ot_plan_get_stats(plan[0], steady), b = ot_plan_get_stats(plan[1], steady);
    assert_true(a.evictions > 0); /* the budget does force evictions */
    assert_int_equal(b.recomputes, 0);
    assert_int_equal(a.bytes_down, b.bytes_down);
    assert_int_equal(a.bytes_up, b.bytes_up);
    assert_int_equal(a.uploads, b.uploads);
  }
  /* and with the default rates the same program recomputes */
  ot_sched_opts o = ot_sched_opts_default();
  o.budget_bytes = minb + TB;
  o.recompute = 1;
  ot_plan *cheap;
  OT_ASSERT_OK(ot_sched_plan(ctx, c[1].p, &o, &cheap));
  assert_true(ot_plan_get_stats(cheap, 0).recomputes > 0);
  ot_plan_destroy(cheap);
  for (int k = 0; k < 2; k++) {
    ot_plan_destroy(plan[k]);
    chain_destroy(&c[k]);
  }
  ot_ctx_destroy(ctx);
}

/* Layer 2's matmul input (a2) is rewritten in place right after the matmul:
 * h2 cannot be rebuilt from it (the values would differ), so no plan runs
 * that matmul again, and the results stay the unlimited run's. Control:
 * without the in-place op, h2 is rebuilt (at every budget above the
 * minimum, as it happens). */
static void overwritten_input_never_recomputed(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  const int L = 6;
  const uint64_t minb = chain_min_budget(ctx, L);
  static result ref, rc;
  int control = 0;
  for (int inplace = -1; inplace <= 2; inplace += 3) {
    run_chain(ctx, L, 0, inplace, OT_STRATEGY_BALANCED, UNLIMITED, 0, &ref);
    for (uint64_t b = minb; b <= minb + 6 * TB; b += TB)
      for (int s = OT_STRATEGY_MINIMAL; s < OT_STRATEGY_COUNT; s++) {
        chain c;
        chain_build(ctx, &c, L, 0, inplace);
        ot_sched_opts o = ot_sched_opts_default();
        o.strategy = (ot_strategy)s;
        o.budget_bytes = b;
        o.recompute = 1;
        ot_plan *plan;
        OT_ASSERT_OK(ot_sched_plan(ctx, c.p, &o, &plan));
        ot_trace *tr;
        OT_ASSERT_OK(ot_trace_create(&tr));
        OT_ASSERT_OK(ot_sched_run(plan, tr));
        OT_ASSERT_OK(ot_sched_run(plan, tr));
        OT_ASSERT_OK(ot_trace_check_budget(tr, b));
        int h2_rebuilt = 0;
        for (size_t i = 0; i < ot_trace_count(tr); i++) {
          const ot_trace_event *e = ot_trace_event_at(tr, i);
          if (e->kind == OT_TRACE_ALLOC && (e->flags & OT_TRACE_RECOMPUTE) && !strcmp(e->name, "h2")) h2_rebuilt++;
        }
        if (inplace == 2 && h2_rebuilt)
          fail_msg("budget %llu %s: h2 rebuilt from an a2 that was overwritten since", (unsigned long long)b,
                   ot_strategy_name((ot_strategy)s));
        control |= inplace < 0 && h2_rebuilt;
        ot_plan_destroy(plan);
        ot_trace_destroy(tr);
        chain_destroy(&c);
        run_chain(ctx, L, 0, inplace, (ot_strategy)s, b, 1, &rc);
        assert_memory_equal(rc.v, ref.v, sizeof ref.v);
      }
  }
  if (!control) fail_msg("control: h2 was never rebuilt even without the in-place write (the test proves nothing)");
  ot_ctx_destroy(ctx);
}

/* The default (recompute 0) plans as before: no recompute events, and the
 * same stats as a plan that asks for it where nothing is evicted. */
static void off_by_default(void **state) {
  (void)state;
  ot_sched_opts o = ot_sched_opts_default();
  assert_int_equal(o.recompute, 0);
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  static result a;
  run_chain(ctx, 4, 0, -1, OT_STRATEGY_BALANCED, chain_min_budget(ctx, 4), 0, &a);
  assert_int_equal(a.trace_recomputes, 0);
  assert_int_equal(a.first.recomputes + a.steady.recomputes, 0);
  assert_true(a.first.evictions > 0);
  ot_ctx_destroy(ctx);
}

/* Random programs: bitwise the plain runs (recompute off, same budget and
 * strategy) over RUNS runs, within the budget; some recompute. */
static void random_programs(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  int recomputed = 0;
  for (uint64_t seed = 1; seed <= 30; seed++) {
    ts_randprog *rp;
    uint64_t minb;
    OT_ASSERT_OK(ts_randprog_create(ctx, seed, &rp));
    OT_ASSERT_OK(ot_sched_min_budget(rp->p, &minb, NULL));
    ts_randprog_destroy(rp);
    const uint64_t budgets[] = {minb, minb + 256, minb + 4096, minb + minb / 2, 2 * minb};
    for (size_t bi = 0; bi < sizeof budgets / sizeof *budgets; bi++)
      for (int s = OT_STRATEGY_MINIMAL; s < OT_STRATEGY_COUNT; s++) {
        float *v[2] = {NULL, NULL};
        int64_t n = 0;
        for (int rc = 0; rc < 2; rc++) {
          OT_ASSERT_OK(ts_randprog_create(ctx, seed, &rp));
          n = ts_randprog_snapshot(rp, NULL);
          v[rc] = malloc((size_t)(n + 1) * sizeof(float));
          assert_non_null(v[rc]);
          ot_sched_opts o = ot_sched_opts_default();
          o.strategy = (ot_strategy)s;
          o.budget_bytes = budgets[bi];
          o.recompute = rc;
          o.transfer_delay_us = rc ? 5 : 0;
          ot_plan *plan;
          if (ot_sched_plan(ctx, rp->p, &o, &plan) != OT_OK)
            fail_msg("seed %llu budget %llu %s recompute %d: %s", (unsigned long long)seed,
                     (unsigned long long)budgets[bi], ot_strategy_name((ot_strategy)s), rc, ot_last_error());
          recomputed += ot_plan_get_stats(plan, 0).recomputes + ot_plan_get_stats(plan, 1).recomputes;
          ot_trace *tr;
          OT_ASSERT_OK(ot_trace_create(&tr));
          for (int r = 0; r < RUNS; r++) {
            ts_randprog_prepare_run(rp, r);
            if (ot_sched_run(plan, tr) != OT_OK)
              fail_msg("seed %llu budget %llu %s recompute %d run %d: %s", (unsigned long long)seed,
                       (unsigned long long)budgets[bi], ot_strategy_name((ot_strategy)s), rc, r, ot_last_error());
          }
          if (ot_trace_check_budget(tr, budgets[bi]) != OT_OK)
            fail_msg("seed %llu budget %llu %s recompute %d: %s", (unsigned long long)seed,
                     (unsigned long long)budgets[bi], ot_strategy_name((ot_strategy)s), rc, ot_last_error());
          ts_randprog_snapshot(rp, v[rc]);
          ot_trace_destroy(tr);
          ot_plan_destroy(plan);
          ts_randprog_destroy(rp);
        }
        if (memcmp(v[0], v[1], (size_t)n * sizeof(float))) {
          int64_t k = 0;
          while (v[0][k] == v[1][k]) k++;
          fail_msg("seed %llu budget %llu %s: value %lld is %.9g recomputing, %.9g plain", (unsigned long long)seed,
                   (unsigned long long)budgets[bi], ot_strategy_name((ot_strategy)s), (long long)k, v[1][k], v[0][k]);
        }
        free(v[0]);
        free(v[1]);
      }
  }
  print_message("  random programs: %d recomputations planned\n", recomputed);
  assert_true(recomputed > 0);
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(chain_recomputes),
      cmocka_unit_test_teardown(chain_of_writes, reset_bias),
      cmocka_unit_test(offload_when_cheaper),
      cmocka_unit_test(expensive_ops_never_recomputed),
      cmocka_unit_test(overwritten_input_never_recomputed),
      cmocka_unit_test(off_by_default),
      cmocka_unit_test(random_programs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
