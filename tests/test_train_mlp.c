/* test_train_mlp.c — the MLP training step of samples/mlp_train under a
 * budget (issue 7):
 *   - for every backend this build has, budgets from the smallest feasible
 *     to unlimited (every strategy at the smallest), and checkpoint
 *     none/all/auto, 3 steps (2 micro-batches each) give losses and parameters BITWISE equal to the
 *     unlimited run without recomputation; every trace respects its budget;
 *   - at the smallest budget without recomputation activations are written
 *     home and reloaded; with checkpoint all each run has more kernels (the
 *     recomputed layers);
 *   - auto (the planner's per-tensor recomputation) keeps everything when
 *     the step fits; under a budget it rebuilds activations where its cost
 *     model says so (fewer activation bytes home than none) and none where
 *     every op is dearer than its output's trip over PCIe;
 *   - the loss falls below half its first value on the teacher task. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"
#include "ot_test.h"
#include "mlp_test.h"

enum { STEPS = 3 };

typedef struct result {
  float loss[STEPS];
  float *params;
  int64_t n_params;
  int kernels_per_run; /* kernel events of the last run */
  int activation_writebacks, activation_reloads;
  int recompute_kernels;      /* kernels flagged OT_TRACE_RECOMPUTE, all runs */
  int activations_rebuilt;    /* their blocks (ALLOC flagged OT_TRACE_RECOMPUTE) that are activations, all runs */
  uint64_t bytes_home;        /* everything written home, all runs */
  double recompute_flops;     /* the plan's (first run + a replay): flops hints of the ops run again */
} result;

static mlp_config small_config(ot_recompute r) {
  mlp_config c = mlp_config_default();
  c.in_dim = 12;
  c.hidden = 48;
  c.classes = 6;
  c.layers = 4;
  c.batch = 16;
  c.micro_batches = 2;
  c.recompute = r;
  return c;
}

/* An activation of the step: z*, h*, dh* (see mlp_step.c's names). */
static int is_activation(const char *name) {
  return name && (name[0] == 'z' || name[0] == 'h' || !strncmp(name, "dh", 2));
}

static void count_trace(const ot_trace *tr, result *r) {
  int last_run = -1;
  for (size_t i = 0; i < ot_trace_count(tr); i++) {
    const ot_trace_event *e = ot_trace_event_at(tr, i);
    if (e->run > last_run) last_run = e->run, r->kernels_per_run = 0;
    if (e->kind == OT_TRACE_KERNEL) r->kernels_per_run++;
    if (e->kind == OT_TRACE_KERNEL && (e->flags & OT_TRACE_RECOMPUTE)) r->recompute_kernels++;
    if (e->kind == OT_TRACE_ALLOC && (e->flags & OT_TRACE_RECOMPUTE) && is_activation(e->name)) r->activations_rebuilt++;
    if (e->kind == OT_TRACE_DOWNLOAD && is_activation(e->name)) r->activation_writebacks++;
    if (e->kind == OT_TRACE_UPLOAD && is_activation(e->name)) r->activation_reloads++;
  }
}

/* Trains STEPS steps; budget 0: the context's (unlimited). */
static void train(ot_backend be, const mlp_config *c, ot_strategy st, uint64_t budget, result *r,
                  int *recomputed /* [layers] or NULL */) {
  ot_ctx *ctx;
  mlp_trainer *t = ot_test_mlp_trainer(be, c, st, budget, &ctx);
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  for (int s = 0; s < STEPS; s++) OT_ASSERT_OK(mlp_trainer_step(t, tr, &r->loss[s]));
  uint64_t checked = budget ? budget : ot_ctx_budget(ctx, 0);
  OT_ASSERT_OK(ot_trace_check_budget(tr, checked));
  r->kernels_per_run = r->activation_writebacks = r->activation_reloads = r->recompute_kernels = 0;
  r->activations_rebuilt = 0;
  count_trace(tr, r);
  r->bytes_home = ot_trace_summarize(tr).bytes_to_host;
  r->params = ot_test_mlp_params(t, &r->n_params);
  r->recompute_flops = ot_plan_get_stats(mlp_trainer_plan(t), 0).recompute_flops +
                       ot_plan_get_stats(mlp_trainer_plan(t), 1).recompute_flops;
  for (int l = 0; recomputed && l < c->layers; l++) recomputed[l] = mlp_trainer_recomputed(t, l);
  ot_trace_destroy(tr);
  mlp_trainer_destroy(t);
  ot_ctx_destroy(ctx);
}

static void assert_same(const result *ref, const result *r, const char *what) {
  for (int s = 0; s < STEPS; s++)
    if (memcmp(&ref->loss[s], &r->loss[s], sizeof(float)))
      fail_msg("%s: loss of step %d is %.9g, the unlimited run gave %.9g", what, s + 1, r->loss[s], ref->loss[s]);
  assert_int_equal(ref->n_params, r->n_params);
  for (int64_t i = 0; i < r->n_params; i++)
    if (memcmp(&ref->params[i], &r->params[i], sizeof(float)))
      fail_msg("%s: parameter %lld is %.9g after %d steps, the unlimited run gave %.9g", what, (long long)i,
               r->params[i], STEPS, ref->params[i]);
}

static void backends(ot_backend *b, int *n) { *n = ot_test_backends(b); }

static void budgets_and_checkpoints(void **state) {
  (void)state;
  ot_backend bk[3];
  int nb;
  backends(bk, &nb);
  static const ot_recompute modes[] = {OT_RECOMPUTE_NONE, OT_RECOMPUTE_ALL, OT_RECOMPUTE_AUTO};
  for (int b = 0; b < nb; b++) {
    mlp_config c0 = small_config(OT_RECOMPUTE_NONE);
    result ref;
    train(bk[b], &c0, OT_STRATEGY_NONE, 0, &ref, NULL);
    int ref_kernels = ref.kernels_per_run;
    for (int m = 0; m < 3; m++) {
      mlp_config c = small_config(modes[m]);
      uint64_t lo = ot_test_mlp_min_budget(bk[b], &c);
      /* the smallest feasible budget with every strategy, one between, and
       * unlimited (the ref ran `none`) */
      const uint64_t budgets[5] = {lo, lo, lo, lo + lo / 2, 0};
      const ot_strategy strat[5] = {OT_STRATEGY_MINIMAL, OT_STRATEGY_BALANCED, OT_STRATEGY_AGGRESSIVE,
                                    OT_STRATEGY_BALANCED, OT_STRATEGY_AGGRESSIVE};
      for (int k = 0; k < 5; k++) {
        char what[160];
        snprintf(what, sizeof what, "%s, checkpoint %s, budget %llu, %s", ot_backend_name(bk[b]),
                 ot_recompute_name(modes[m]), (unsigned long long)budgets[k], ot_strategy_name(strat[k]));
        result r;
        int rec[MLP_MAX_LAYERS];
        train(bk[b], &c, strat[k], budgets[k], &r, rec);
        assert_same(&ref, &r, what);
        if (modes[m] == OT_RECOMPUTE_NONE && k == 0 &&
            (r.activation_writebacks == 0 || r.activation_reloads == 0))
          fail_msg("%s: no activation was written home and reloaded (%d write-backs, %d reloads)", what,
                   r.activation_writebacks, r.activation_reloads);
        /* all: layers 0..L-2 recomputed, 2 ops each per micro-batch */
        if (modes[m] == OT_RECOMPUTE_ALL) {
          int want = ref_kernels + 2 * (c.layers - 1) * c.micro_batches;
          if (r.kernels_per_run != want)
            fail_msg("%s: %d kernels per step, expected %d (recomputation)", what, r.kernels_per_run, want);
        }
        /* auto records no layer twice; with room for everything it recomputes nothing */
        for (int l = 0; modes[m] == OT_RECOMPUTE_AUTO && l < c.layers; l++) assert_int_equal(rec[l], 0);
        if (modes[m] == OT_RECOMPUTE_AUTO && budgets[k] == 0) {
          assert_int_equal(r.recompute_kernels, 0);
          assert_int_equal(r.kernels_per_run, ref_kernels);
        }
        if (modes[m] != OT_RECOMPUTE_AUTO) assert_int_equal(r.recompute_kernels, 0);
        free(r.params);
      }
    }
    free(ref.params);
  }
}

/* auto under tight budgets: the planner's per-tensor choice by the config's
 * rates. Cheap flops: some activations are rebuilt (recompute kernels in
 * the trace) and wherever anything is, fewer bytes go home than with none
 * at the same budget; every op with a flops hint dearer than its output's
 * trip over PCIe: none of them is run again (a zero, which has no hint,
 * still may: it is free). Always bitwise none's results. */
static void auto_cost_model(void **state) {
  (void)state;
  mlp_config c = small_config(OT_RECOMPUTE_AUTO), c0 = small_config(OT_RECOMPUTE_NONE);
  uint64_t lo = ot_test_mlp_min_budget(OT_BACKEND_HOST, &c);
  int rebuilt = 0;
  for (uint64_t b = lo; b <= 2 * lo; b += lo / 4) {
    result none, cheap, dear;
    train(OT_BACKEND_HOST, &c0, OT_STRATEGY_BALANCED, b, &none, NULL);
    c.pcie_bytes_per_s = 55e9, c.flops_per_s = 20e12;
    train(OT_BACKEND_HOST, &c, OT_STRATEGY_BALANCED, b, &cheap, NULL);
    c.flops_per_s = 1e3; /* a microsecond of PCIe per activation against seconds per op */
    train(OT_BACKEND_HOST, &c, OT_STRATEGY_BALANCED, b, &dear, NULL);
    assert_same(&none, &cheap, "auto, cheap flops");
    assert_same(&none, &dear, "auto, dear flops");
    assert_true(dear.recompute_flops == 0);
    /* what it rebuilds is not written home: fewer bytes in all (the evictions
     * around a rebuild differ, so not necessarily fewer activation bytes) */
    if (cheap.recompute_kernels && !(cheap.bytes_home < none.bytes_home))
      fail_msg("budget %llu: %d kernels run again, yet %llu bytes home against none's %llu", (unsigned long long)b,
               cheap.recompute_kernels, (unsigned long long)cheap.bytes_home, (unsigned long long)none.bytes_home);
    rebuilt += cheap.activations_rebuilt > 0;
    free(none.params);
    free(cheap.params);
    free(dear.params);
  }
  if (!rebuilt) fail_msg("auto rebuilt no activation at any budget from %llu to %llu", (unsigned long long)lo,
                         (unsigned long long)(2 * lo));
  /* the model itself */
  c.pcie_bytes_per_s = 1e9;
  c.flops_per_s = 6e9;
  assert_int_equal(mlp_recompute_cost(&c, 4.0 * 16 * 48, 2.0 * 16 * 48 * 8), 1);
  assert_int_equal(mlp_recompute_cost(&c, 4.0 * 16 * 48, 2.0 * 16 * 48 * 48), 0);
}

static void loss_falls(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_AUTO);
  mlp_config c = mlp_config_default();
  mlp_trainer *t;
  OT_ASSERT_OK(mlp_trainer_create(ctx, &c, NULL, &t));
  float first = 0, last10 = 0, loss;
  for (int s = 0; s < 200; s++) {
    OT_ASSERT_OK(mlp_trainer_step(t, NULL, &loss));
    assert_true(isfinite(loss));
    if (s == 0) first = loss;
    if (s >= 190) last10 += loss / 10;
  }
  /* 8 classes: the first loss is near ln 8 */
  assert_true(fabsf(first - logf(8.0f)) < 0.3f);
  if (!(last10 < 0.5f * first)) fail_msg("loss %.4f -> %.4f (mean of the last 10 steps): not below half", first, last10);
  mlp_trainer_destroy(t);
  ot_ctx_destroy(ctx);
}

static void bad_options(void **state) {
  (void)state;
  ot_recompute r;
  OT_ASSERT_FAILS(ot_recompute_parse("some", &r), OT_ERR_INVALID_ARG, "none, all, auto");
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_HOST);
  mlp_config c = small_config(OT_RECOMPUTE_NONE);
  c.layers = 1;
  mlp_trainer *t;
  OT_ASSERT_FAILS(mlp_trainer_create(ctx, &c, NULL, &t), OT_ERR_INVALID_ARG, "layers");
  c = small_config(OT_RECOMPUTE_NONE);
  ot_sched_opts so = ot_sched_opts_default();
  so.budget_bytes = 1024; /* below every op's working set */
  OT_ASSERT_FAILS(mlp_trainer_create(ctx, &c, &so, &t), OT_ERR_BUDGET, "budget");
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(budgets_and_checkpoints),
      cmocka_unit_test(auto_cost_model),
      cmocka_unit_test(loss_falls),
      cmocka_unit_test(bad_options),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
