/* test_sched_belady.c — programs with a known optimal answer.
 *
 * Layers of equal size (one arena block each): op i computes
 * act[i+1] = mix(act[i], w[seq[i]]). With a budget of (k + 2) blocks the two
 * activations of the op take two blocks and k weights fit; the number of
 * weight uploads must be exactly what Belady's rule gives for the request
 * sequence seq with a cache of k (computed by the small reference below). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "memory/device.h"
#include "ot_test.h"
#include "sched_support.h"

#define W 64 /* floats per layer: 256 bytes, exactly one arena block */
#define MAXL 16
#define MAXN 64

/* Belady's MIN: misses of a cache of k slots serving seq[0..n). */
static int belady_misses(const int *seq, int n, int k) {
  int cache[MAXL], m = 0, misses = 0;
  for (int i = 0; i < n; i++) {
    int hit = 0;
    for (int c = 0; c < m; c++) hit |= cache[c] == seq[i];
    if (hit) continue;
    misses++;
    if (m < k) {
      cache[m++] = seq[i];
      continue;
    }
    int victim = 0, far = -1;
    for (int c = 0; c < m; c++) {
      int nu = n + 1; /* never again */
      for (int j = i + 1; j < n; j++)
        if (seq[j] == cache[c]) {
          nu = j;
          break;
        }
      if (nu > far) far = nu, victim = c;
    }
    cache[victim] = seq[i];
  }
  return misses;
}

typedef struct chain {
  ot_ctx *ctx;
  ot_program *p;
  ot_tensor *w[MAXL], *act[MAXN + 1];
  int n_w, n;
} chain;

static void chain_build(chain *c, ot_ctx *ctx, const int *seq, int n, int n_w) {
  memset(c, 0, sizeof *c);
  c->ctx = ctx;
  c->n = n;
  c->n_w = n_w;
  int64_t shape = W;
  assert_int_equal(ot_program_create(ctx, &c->p), OT_OK);
  for (int l = 0; l < n_w; l++) {
    char nm[16];
    snprintf(nm, sizeof nm, "w%d", l);
    assert_int_equal(ot_tensor_create(ctx, nm, OT_F32, 1, &shape, &c->w[l]), OT_OK);
    ts_fill(c->w[l], (uint64_t)l + 100);
  }
  for (int i = 0; i <= n; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "act%d", i);
    assert_int_equal(ot_tensor_create(ctx, nm, OT_F32, 1, &shape, &c->act[i]), OT_OK);
  }
  ts_fill(c->act[0], 1);
  for (int i = 0; i < n; i++) {
    ot_tensor *in[2] = {c->act[i], c->w[seq[i]]};
    ts_mix_params prm = {{0.5f, 0.25f, 0}, 0.125f, -1};
    assert_int_equal(ts_add_mix(c->p, "layer", in, 2, &c->act[i + 1], 1, &prm), OT_OK);
  }
  assert_int_equal(ot_program_mark_input(c->p, c->act[0]), OT_OK);
  assert_int_equal(ot_program_mark_output(c->p, c->act[n]), OT_OK);
}

static void chain_destroy(chain *c) {
  ot_program_destroy(c->p);
  for (int l = 0; l < c->n_w; l++) ot_tensor_destroy(c->w[l]);
  for (int i = 0; i <= c->n; i++) ot_tensor_destroy(c->act[i]);
}

/* Weight uploads of run `run` in the trace. */
static int weight_uploads(const ot_trace *tr, int run) {
  int u = 0;
  for (size_t i = 0; i < ot_trace_count(tr); i++) {
    const ot_trace_event *e = ot_trace_event_at(tr, i);
    if (e->run == run && e->kind == OT_TRACE_UPLOAD && e->name[0] == 'w') u++;
  }
  return u;
}

/* Plans seq with room for k weights, runs it `runs` times; returns the
 * weight uploads per run in ups[] and checks the result against an
 * unlimited budget. */
static void run_chain(ot_backend b, ot_strategy strat, const int *seq, int n, int n_w, int k, int runs, int *ups) {
  ot_ctx *ctx = ot_test_ctx(b);
  float ref[W], got[W];
  for (int pass = 0; pass < 2; pass++) {
    chain c;
    chain_build(&c, ctx, seq, n, n_w);
    ot_sched_opts o = ot_sched_opts_default();
    o.strategy = strat;
    o.budget_bytes = pass ? (uint64_t)(k + 2) * 256 : 1ull << 30;
    uint64_t minb;
    assert_int_equal(ot_sched_min_budget(c.p, &minb, NULL), OT_OK);
    assert_int_equal(minb, 3 * 256);
    ot_plan *plan;
    if (ot_sched_plan(ctx, c.p, &o, &plan) != OT_OK) fail_msg("%s", ot_last_error());
    ot_trace *tr;
    assert_int_equal(ot_trace_create(&tr), OT_OK);
    for (int r = 0; r < runs; r++) {
      if (ot_sched_run(plan, tr) != OT_OK) fail_msg("%s", ot_last_error());
      if (pass) ups[r] = weight_uploads(tr, r);
    }
    assert_int_equal(ot_trace_check_budget(tr, o.budget_bytes), OT_OK);
    assert_int_equal(ot_tensor_read_f32(c.act[n], pass ? got : ref, W), OT_OK);
    ot_trace_destroy(tr);
    ot_plan_destroy(plan);
    chain_destroy(&c);
  }
  assert_memory_equal(got, ref, sizeof ref);
  ot_ctx_destroy(ctx);
}

static void each_backend(void (*fn)(ot_backend)) {
  fn(OT_BACKEND_HOST);
  if (ot_num_devices() > 0) fn(OT_BACKEND_MAP);
}

/* A cyclic chain of L layers: the first run uploads each once; a replay
 * keeps k-1 layers and cycles the last slot: L-k+1 uploads, the optimum for
 * a cyclic sequence (Belady keeps k-1 fixed and misses every other one). */
static void cyclic(ot_backend b) {
  int seq[MAXN];
  for (int L = 3; L <= 9; L += 3)
    for (int k = 1; k < L; k++)
      for (int s = OT_STRATEGY_MINIMAL; s < OT_STRATEGY_COUNT; s++) {
        for (int i = 0; i < L; i++) seq[i] = i;
        int ups[4];
        run_chain(b, (ot_strategy)s, seq, L, L, k, 4, ups);
        /* minimal is optimal; prefetching keeps one more slot free for the
         * next layer's upload (double buffering): at most one more per run */
        int extra = s == OT_STRATEGY_MINIMAL ? 0 : 1;
        assert_true(ups[0] >= belady_misses(seq, L, k) && ups[0] <= belady_misses(seq, L, k) + extra);
        for (int r = 1; r < 4; r++)
          if (ups[r] < L - k + 1 || ups[r] > L - k + 1 + extra)
            fail_msg("L %d k %d %s run %d: %d weight uploads, optimum %d", L, k, ot_strategy_name((ot_strategy)s), r,
                     ups[r], L - k + 1);
      }
}

static void test_cyclic_chain(void **state) {
  (void)state;
  each_backend(cyclic);
}

/* Random request sequences with reused weights: the first run is optimal; a
 * replay (starting warm) never needs more. */
static void random_seqs(ot_backend b) {
  ts_rng r = {12345};
  for (int t = 0; t < 24; t++) {
    int n_w = ts_rand_int(&r, 2, 8), n = ts_rand_int(&r, 4, 40), k = ts_rand_int(&r, 1, n_w);
    int seq[MAXN];
    for (int i = 0; i < n; i++) seq[i] = ts_rand_int(&r, 0, n_w - 1);
    /* every weight used at least once, so all of them are in the program */
    for (int l = 0; l < n_w && l < n; l++) seq[ts_rand_int(&r, 0, n - 1)] = l;
    int used[MAXL] = {0}, nu = 0;
    for (int i = 0; i < n; i++) nu += !used[seq[i]]++;
    int ups[2];
    ot_strategy s = (ot_strategy)(OT_STRATEGY_MINIMAL + t % 3);
    /* chain_build creates all n_w weights; unused ones are simply not in the program */
    run_chain(b, s, seq, n, n_w, k, 2, ups);
    int opt = belady_misses(seq, n, k);
    /* minimal must be optimal; the prefetching strategies can never beat it */
    if (s == OT_STRATEGY_MINIMAL ? ups[0] != opt : ups[0] < opt)
      fail_msg("case %d (%d weights, %d ops, k %d, %s): %d uploads, Belady %d", t, n_w, n, k, ot_strategy_name(s),
               ups[0], opt);
    if (s == OT_STRATEGY_MINIMAL) assert_true(ups[1] <= ups[0]);
    (void)nu;
  }
}

static void test_random_sequences(void **state) {
  (void)state;
  each_backend(random_seqs);
}

/* Streaming more layers than fit (the bench case): with balanced and
 * aggressive, every weight upload of a replay except op 0's is issued before
 * the previous op's kernel runs, so it can overlap it. */
static void streaming(ot_backend b) {
  enum { L = 12 };
  int seq[L];
  for (int i = 0; i < L; i++) seq[i] = i;
  for (int s = OT_STRATEGY_BALANCED; s < OT_STRATEGY_COUNT; s++)
    for (int k = 2; k <= 4; k++) {
      ot_ctx *ctx = ot_test_ctx(b);
      chain c;
      chain_build(&c, ctx, seq, L, L);
      ot_sched_opts o = ot_sched_opts_default();
      o.strategy = (ot_strategy)s;
      o.budget_bytes = (uint64_t)(k + 2) * 256;
      ot_plan *plan;
      assert_int_equal(ot_sched_plan(ctx, c.p, &o, &plan), OT_OK);
      ot_trace *tr;
      assert_int_equal(ot_trace_create(&tr), OT_OK);
      for (int r = 0; r < 3; r++) assert_int_equal(ot_sched_run(plan, tr), OT_OK);
      assert_int_equal(ot_trace_check_budget(tr, o.budget_bytes), OT_OK);
      int late = 0, total = 0;
      for (size_t x = 0; x < ot_trace_count(tr); x++) {
        const ot_trace_event *e = ot_trace_event_at(tr, x);
        if (e->run == 0 || e->kind != OT_TRACE_UPLOAD || e->name[0] != 'w' || e->op == 0) continue;
        total++;
        /* the kernel of op e->op - 1 of the same run must come later in the trace */
        int before = 0;
        for (size_t y = x + 1; y < ot_trace_count(tr); y++) {
          const ot_trace_event *f = ot_trace_event_at(tr, y);
          if (f->run == e->run && f->kind == OT_TRACE_KERNEL && f->op == e->op - 1) before = 1;
        }
        late += !before;
      }
      if (late) fail_msg("%s k %d: %d of %d weight uploads not issued ahead", ot_strategy_name((ot_strategy)s), k, late, total);
      assert_true(total >= 2 * (L - k));
      ot_trace_destroy(tr);
      ot_plan_destroy(plan);
      chain_destroy(&c);
      ot_ctx_destroy(ctx);
    }
}

static void test_streaming_prefetch(void **state) {
  (void)state;
  each_backend(streaming);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cyclic_chain),
      cmocka_unit_test(test_random_sequences),
      cmocka_unit_test(test_streaming_prefetch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
