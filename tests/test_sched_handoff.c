/* test_sched_handoff.c — ot_sched_plan_after (sched.h): a plan made after
 * another on its device starts from the copies that one keeps, in its
 * memory. Two programs share weights and a persistent state (a prompt step
 * and a decode step in miniature); A runs once, B is planned after it and
 * runs several times. Under every budget and strategy (defer on and off;
 * none where everything fits)
 * the homes equal those of plain, unlimited-budget plans bitwise; one trace
 * over both plans never holds more than the budget; where everything fits,
 * B's first run uploads no weight (the trace says so); a handed-over B
 * after ot_sched_invalidate uses weights changed in between, and after a
 * failed first run it uploads them again and gets the plain result; prev
 * cannot run once spent; wrong uses are refused by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/fault.h"
#include "ot_test.h"
#include "sched_support.h"

#define L 6
#define N 2048
#define RUNS 3
#define UNLIMITED (1ull << 40)

typedef struct pair {
  ot_ctx *ctx;
  ot_tensor *w[L], *xa, *xb, *ya, *yb, *state, *h[2 * L + 2];
  ot_program *a, *b;
  int64_t wn[L];
} pair;

static ot_tensor *f32(ot_ctx *ctx, const char *name, int64_t n) {
  ot_tensor *t;
  int64_t shape[1] = {n};
  OT_ASSERT_OK(ot_tensor_create(ctx, name, OT_F32, 1, shape, &t));
  return t;
}

static void mix(ot_program *p, const char *name, ot_tensor *x0, ot_tensor *x1, ot_tensor *y, float b) {
  ts_mix_params prm = {{0.5f, 0.25f, 0}, b, -1};
  ot_tensor *in[2] = {x0, x1};
  OT_ASSERT_OK(ts_add_mix(p, name, in, 2, &y, 1, &prm));
}

/* A: the weights in order (a prompt step); B: in reverse, from its own input
 * (a decode step). Both read and update `state` (a KV cache). `only` < L
 * makes A use the first `only` weights (a smaller arena than B's). */
static void make_pair(pair *q, ot_backend backend, int only) {
  memset(q, 0, sizeof *q);
  q->ctx = ot_test_ctx(backend);
  char nm[32];
  for (int i = 0; i < L; i++) {
    snprintf(nm, sizeof nm, "w%d", i);
    q->wn[i] = N + 256 * i;
    q->w[i] = f32(q->ctx, nm, q->wn[i]);
    ts_fill(q->w[i], 100 + (uint64_t)i);
  }
  q->xa = f32(q->ctx, "xa", N);
  q->xb = f32(q->ctx, "xb", N);
  q->ya = f32(q->ctx, "ya", N);
  q->yb = f32(q->ctx, "yb", N);
  q->state = f32(q->ctx, "state", N);
  ts_fill(q->xa, 1);
  ts_fill(q->xb, 2);
  ts_fill(q->state, 3);
  for (int i = 0; i < 2 * L + 2; i++) {
    snprintf(nm, sizeof nm, "h%d", i);
    q->h[i] = f32(q->ctx, nm, N);
  }
  OT_ASSERT_OK(ot_program_create(q->ctx, &q->a));
  OT_ASSERT_OK(ot_program_create(q->ctx, &q->b));
  ot_tensor *x = q->xa;
  for (int i = 0; i < only; i++, x = q->h[i - 1]) mix(q->a, "a.layer", x, q->w[i], q->h[i], 0.1f * (float)i);
  mix(q->a, "a.state", q->state, x, q->state, 0.3f);
  mix(q->a, "a.out", x, q->state, q->ya, 0.7f);
  x = q->xb;
  for (int i = L - 1, k = L; i >= 0; i--, k++) {
    mix(q->b, "b.layer", x, q->w[i], q->h[k], -0.1f * (float)i);
    x = q->h[k];
  }
  mix(q->b, "b.state", q->state, x, q->state, 0.2f);
  mix(q->b, "b.out", x, q->state, q->yb, 0.9f);
  OT_ASSERT_OK(ot_program_mark_input(q->a, q->xa));
  OT_ASSERT_OK(ot_program_mark_input(q->b, q->xb));
  OT_ASSERT_OK(ot_program_mark_output(q->a, q->ya));
  OT_ASSERT_OK(ot_program_mark_output(q->b, q->yb));
  OT_ASSERT_OK(ot_program_mark_persistent(q->a, q->state));
  OT_ASSERT_OK(ot_program_mark_persistent(q->b, q->state));
}

static void free_pair(pair *q) {
  ot_program_destroy(q->a);
  ot_program_destroy(q->b);
  ot_tensor *all[] = {q->xa, q->xb, q->ya, q->yb, q->state};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) ot_tensor_destroy(all[i]);
  for (int i = 0; i < L; i++) ot_tensor_destroy(q->w[i]);
  for (int i = 0; i < 2 * L + 2; i++) ot_tensor_destroy(q->h[i]);
  ot_ctx_destroy(q->ctx);
}

/* What is compared: ya, yb, state. */
static void snapshot(const pair *q, float *v) {
  memcpy(v, ot_tensor_data(q->ya), N * sizeof *v);
  memcpy(v + N, ot_tensor_data(q->yb), N * sizeof *v);
  memcpy(v + 2 * N, ot_tensor_data(q->state), N * sizeof *v);
}

/* The weights' device bytes (make_pair's sizes). */
static uint64_t weight_blocks(void) {
  uint64_t b = 0;
  for (int i = 0; i < L; i++) b += ts_block((uint64_t)(N + 256 * i) * 4);
  return b;
}

/* Plain plans, unlimited budget: A once, B RUNS times. */
static void reference(ot_backend backend, int only, float *v) {
  pair q;
  make_pair(&q, backend, only);
  ot_sched_opts o = ot_sched_opts_default();
  o.budget_bytes = UNLIMITED;
  ot_plan *p;
  OT_ASSERT_OK(ot_sched_plan(q.ctx, q.a, &o, &p));
  OT_ASSERT_OK(ot_sched_run(p, NULL));
  ot_plan_destroy(p);
  OT_ASSERT_OK(ot_sched_plan(q.ctx, q.b, &o, &p));
  for (int r = 0; r < RUNS; r++) OT_ASSERT_OK(ot_sched_run(p, NULL));
  ot_plan_destroy(p);
  snapshot(&q, v);
  free_pair(&q);
}

/* Uploads in run `run` of the trace of a tensor whose name starts with 'w'. */
static int weight_uploads(const ot_trace *tr, int run) {
  int n = 0;
  for (size_t i = 0; i < ot_trace_count(tr); i++) {
    const ot_trace_event *e = ot_trace_event_at(tr, i);
    n += e->kind == OT_TRACE_UPLOAD && e->run == run && e->name && e->name[0] == 'w';
  }
  return n;
}

/* A, then B after it, under `budget`; returns B's handed-over bytes. */
static uint64_t handed(ot_backend backend, int only, ot_strategy strat, uint64_t budget, int defer, float *v,
                       int *b_first_weight_uploads) {
  pair q;
  make_pair(&q, backend, only);
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = strat;
  o.budget_bytes = budget;
  o.defer_writeback = defer;
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  ot_plan *a, *b;
  OT_ASSERT_OK(ot_sched_plan(q.ctx, q.a, &o, &a));
  OT_ASSERT_OK(ot_sched_run(a, tr));
  OT_ASSERT_OK(ot_sched_plan_after(a, q.b, &o, &b));
  OT_ASSERT_FAILS(ot_sched_run(a, NULL), OT_ERR_STATE, "ot_sched_plan_after");
  OT_ASSERT_FAILS(ot_sched_plan_after(a, q.b, &o, &(ot_plan *){0}), OT_ERR_STATE, "already handed");
  ot_plan_destroy(a);
  for (int r = 0; r < RUNS; r++) OT_ASSERT_OK(ot_sched_run(b, tr));
  uint64_t got = ot_plan_get_stats(b, 0).inherited_bytes;
  if (ot_trace_check_budget(tr, budget) != OT_OK)
    fail_msg("%s budget %llu defer %d: %s", ot_strategy_name(strat), (unsigned long long)budget, defer,
             ot_last_error());
  if (b_first_weight_uploads) *b_first_weight_uploads = weight_uploads(tr, 1);
  ot_plan_destroy(b); /* writes deferred state home */
  ot_trace_destroy(tr);
  snapshot(&q, v);
  free_pair(&q);
  return got;
}

static uint64_t min_budget(ot_backend backend) {
  pair q;
  make_pair(&q, backend, L);
  uint64_t a, b;
  OT_ASSERT_OK(ot_sched_min_budget(q.a, &a, NULL));
  OT_ASSERT_OK(ot_sched_min_budget(q.b, &b, NULL));
  free_pair(&q);
  return a > b ? a : b;
}

/* Every budget, strategy and defer setting gives the plain homes. */
static void same_results(void **state) {
  (void)state;
  const ot_backend be = ot_test_moving_backend();
  float ref[3 * N], got[3 * N];
  reference(be, L, ref);
  /* all: the weights, the state, the inputs, outputs and temporaries */
  const uint64_t lo = min_budget(be), all = weight_blocks() + (2 * L + 7) * ts_block(N * 4);
  const uint64_t budgets[] = {UNLIMITED, all, all / 2, lo + lo / 2, lo};
  const ot_strategy strats[] = {OT_STRATEGY_MINIMAL, OT_STRATEGY_BALANCED, OT_STRATEGY_AGGRESSIVE, OT_STRATEGY_NONE};
  for (size_t bi = 0; bi < sizeof budgets / sizeof *budgets; bi++)
    for (size_t si = 0; si < 4; si++)
      for (int defer = 0; defer < 2; defer++) {
        if (strats[si] == OT_STRATEGY_NONE && budgets[bi] != UNLIMITED) continue; /* none keeps all: infeasible */
        int ups = -1;
        uint64_t h = handed(be, L, strats[si], budgets[bi], defer, got, &ups);
        if (memcmp(got, ref, sizeof ref) != 0)
          fail_msg("%s budget %llu defer %d: the homes differ from the plain run's", ot_strategy_name(strats[si]),
                   (unsigned long long)budgets[bi], defer);
        /* everything fits: every weight and the state handed over, none uploaded again */
        if (budgets[bi] == UNLIMITED) {
          if (h != weight_blocks() + ts_block(N * 4))
            fail_msg("%s defer %d: %llu bytes handed over", ot_strategy_name(strats[si]), defer, (unsigned long long)h);
          if (ups != 0) fail_msg("%s defer %d: B's first run uploaded %d weights", ot_strategy_name(strats[si]), defer, ups);
        }
      }
}

/* A uses only w0: its arena is smaller than B needs. B is capped at A's
 * memory (or starts empty) and still gives the plain homes in the budget. */
static void smaller_arena(void **state) {
  (void)state;
  const ot_backend be = ot_test_moving_backend();
  float ref[3 * N], got[3 * N];
  reference(be, 1, ref);
  int ups = -1;
  uint64_t h = handed(be, 1, OT_STRATEGY_BALANCED, UNLIMITED, 0, got, &ups);
  assert_memory_equal(got, ref, sizeof ref);
  assert_true(h > 0); /* w0 and the state at least */
}

/* Weights written after the handoff + ot_sched_invalidate: B uploads them
 * again (its first run uses the new values); after a failed first run, B's
 * next run uploads the handed-over copies again and gives the plain result. */
static void invalidate_and_failure(void **state) {
  (void)state;
  const ot_backend be = ot_test_moving_backend();
  for (int mode = 0; mode < 2; mode++) {
    float ref[3 * N], got[3 * N];
    pair q;
    make_pair(&q, be, L);
    ot_sched_opts o = ot_sched_opts_default();
    o.budget_bytes = UNLIMITED;
    ot_plan *a, *b;
    OT_ASSERT_OK(ot_sched_plan(q.ctx, q.a, &o, &a));
    OT_ASSERT_OK(ot_sched_run(a, NULL));
    OT_ASSERT_OK(ot_sched_plan_after(a, q.b, &o, &b));
    ot_plan_destroy(a);
    assert_true(ot_plan_get_stats(b, 0).inherited_bytes > 0);
    if (mode == 0) {
      ts_fill(q.w[3], 999); /* the home changes: the handed-over copy is stale */
      ot_sched_invalidate(b);
    } else {
#ifdef OT_OFFLOAD /* (the host backend makes no transfers to fail) */
      OT_ASSERT_OK(ot_fault_configure("transfer:1")); /* B's first transfer (its input) fails: nothing ran */
      OT_ASSERT_FAILS(ot_sched_run(b, NULL), OT_ERR_DEVICE, "OMPTENSOR_FAULT");
      OT_ASSERT_OK(ot_fault_configure(NULL));
#endif
    }
    ot_trace *tr;
    OT_ASSERT_OK(ot_trace_create(&tr));
    for (int r = 0; r < RUNS; r++) OT_ASSERT_OK(ot_sched_run(b, tr));
#ifdef OT_OFFLOAD
    assert_int_equal(weight_uploads(tr, 0), L); /* all of them again, at the start */
#endif
    ot_trace_destroy(tr);
    ot_plan_destroy(b);
    snapshot(&q, got);
    /* the plain run with the same weights */
    pair r;
    make_pair(&r, be, L);
    ot_plan *p;
    OT_ASSERT_OK(ot_sched_plan(r.ctx, r.a, &o, &p));
    OT_ASSERT_OK(ot_sched_run(p, NULL));
    ot_plan_destroy(p);
    if (mode == 0) ts_fill(r.w[3], 999); /* where the handed-over run changed it: after A */
    OT_ASSERT_OK(ot_sched_plan(r.ctx, r.b, &o, &p));
    for (int k = 0; k < RUNS; k++) OT_ASSERT_OK(ot_sched_run(p, NULL));
    ot_plan_destroy(p);
    snapshot(&r, ref);
    if (memcmp(got, ref, sizeof ref) != 0) fail_msg("%s: the homes differ from the plain run's", mode ? "failure" : "invalidate");
    free_pair(&r);
    free_pair(&q);
  }
}

/* A plan that never ran hands nothing over (and is spent); wrong uses are
 * refused by name. */
static void nothing_and_misuse(void **state) {
  (void)state;
  pair q;
  make_pair(&q, ot_test_moving_backend(), L);
  ot_sched_opts o = ot_sched_opts_default();
  ot_plan *a, *b = NULL;
  OT_ASSERT_OK(ot_sched_plan(q.ctx, q.a, &o, &a));
  OT_ASSERT_OK(ot_sched_plan_after(a, q.b, &o, &b));
  assert_int_equal(ot_plan_get_stats(b, 0).inherited_bytes, 0);
  OT_ASSERT_FAILS(ot_sched_run(a, NULL), OT_ERR_STATE, "handed its device memory");
  OT_ASSERT_OK(ot_sched_run(b, NULL));
  ot_plan_destroy(a);
  /* another context's program */
  pair other;
  make_pair(&other, ot_test_moving_backend(), L);
  ot_plan *c = (ot_plan *)&q, *d = NULL;
  OT_ASSERT_FAILS(ot_sched_plan_after(b, other.a, &o, &c), OT_ERR_INVALID_ARG, "different contexts");
  assert_null(c);
  o.device_index = 1;
  OT_ASSERT_FAILS(ot_sched_plan_after(b, q.a, &o, &d), OT_ERR_INVALID_ARG, "own device");
  OT_ASSERT_FAILS(ot_sched_plan_after(NULL, q.a, &o, &d), OT_ERR_INVALID_ARG, "NULL");
  ot_plan_destroy(b);
  free_pair(&other);
  free_pair(&q);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(same_results), cmocka_unit_test(smaller_arena),
                                     cmocka_unit_test(invalidate_and_failure), cmocka_unit_test(nothing_and_misuse)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
