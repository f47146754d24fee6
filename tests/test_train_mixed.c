/* test_train_mixed.c — mixed precision (issue 7): the loss-scaling ops and
 * the MLP trainer's --precision bf16 / f16:
 *   - ot_op_loss_scale multiplies by 2^k of a run-time scalar, ot_op_grad_stats
 *     counts Inf/NaN and sums squares, AdamW's scale_slot unscales exactly
 *     like grad_scale = 2^-k and its skip_slot leaves param and moments alone
 *     while still writing the low-precision copy;
 *   - bf16 and f16 training: the loss falls below 0.6 x its first value, and
 *     the low-precision copies really feed the matmuls (the losses differ
 *     from fp32's, slightly);
 *   - f16 with an initial scale of 2^40: the first steps overflow and are
 *     skipped (parameters untouched), each skip halves the scale, then
 *     training proceeds and the loss falls;
 *   - under the smallest feasible budget every precision gives losses,
 *     parameters and skip counts BITWISE equal to the unlimited run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"
#include "ot_test.h"
#include "mlp_test.h"

/* ---- the ops ------------------------------------------------------------------ */

enum { N = 37 };

typedef struct op_fixture {
  ot_ctx *ctx;
  ot_tensor *pa, *pb, *ga, *gb, *ma, *va, *mb, *vb, *ca, *x, *gi, *stats;
} op_fixture;

static ot_tensor *vec(ot_ctx *ctx, const char *name, ot_dtype dt, int64_t n) {
  ot_tensor *t;
  OT_ASSERT_OK(ot_tensor_create(ctx, name, dt, 1, &n, &t));
  return t;
}

static void read_f32(const ot_tensor *t, float *dst, int64_t n) { OT_ASSERT_OK(ot_tensor_read_f32(t, dst, n)); }

static void assert_bits(const float *a, const float *b, int64_t n, const char *what) {
  for (int64_t i = 0; i < n; i++)
    if (memcmp(&a[i], &b[i], sizeof(float)))
      fail_msg("%s: element %lld is %.9g, want %.9g", what, (long long)i, a[i], b[i]);
}

/* One program: zero(stats); grad_stats over gi (2 non-finite) and gb;
 * loss_scale(x, k); adamw on pa from ga = 2^10 gb with scale_slot k and
 * skip_slot, writing the f16 copy ca; plain adamw on pb from gb. */
static void scaling_ops(void **state) {
  (void)state;
  ot_ctx_opts co = ot_ctx_opts_default();
  op_fixture f;
  OT_ASSERT_OK(ot_ctx_create(&co, &f.ctx));
  float pv[N], gv[N], giv[N], xv[N], ga[N], zero[N] = {0}, out[N], out2[N], ref[N];
  ot_test_fill_uniform(pv, N, 1, -1, 1);
  ot_test_fill_uniform(gv, N, 2, -1, 1);
  ot_test_fill_uniform(giv, N, 3, -2, 2);
  ot_test_fill_uniform(xv, N, 4, -1, 1);
  giv[5] = INFINITY;
  giv[9] = NAN;
  for (int i = 0; i < N; i++) ga[i] = ldexpf(gv[i], 10);
  ot_tensor **all[12] = {&f.pa, &f.pb, &f.ga, &f.gb, &f.ma, &f.va, &f.mb, &f.vb, &f.ca, &f.x, &f.gi, &f.stats};
  static const char *names[12] = {"pa", "pb", "ga", "gb", "ma", "va", "mb", "vb", "ca", "x", "gi", "stats"};
  for (int i = 0; i < 12; i++) *all[i] = vec(f.ctx, names[i], i == 8 ? OT_F16 : OT_F32, i == 11 ? 2 : N);
  const float *init[11] = {pv, pv, ga, gv, zero, zero, zero, zero, zero, xv, giv};
  for (int i = 0; i < 11; i++) OT_ASSERT_OK(ot_tensor_write_f32(*all[i], init[i], N));

  ot_program *p;
  OT_ASSERT_OK(ot_program_create(f.ctx, &p));
  int step, k, skip;
  OT_ASSERT_OK(ot_program_scalar_create(p, "step", &step));
  OT_ASSERT_OK(ot_program_scalar_create(p, "k", &k));
  OT_ASSERT_OK(ot_program_scalar_create(p, "skip", &skip));
  OT_ASSERT_OK(ot_op_zero(p, f.stats));
  OT_ASSERT_OK(ot_op_grad_stats(p, f.stats, f.gi));
  OT_ASSERT_OK(ot_op_grad_stats(p, f.stats, f.gb));
  OT_ASSERT_OK(ot_op_loss_scale(p, f.x, k));
  ot_adamw_opts o = ot_adamw_opts_default();
  o.step_slot = step;
  OT_ASSERT_OK(ot_op_adamw(p, f.pb, f.gb, f.mb, f.vb, NULL, &o));
  o.scale_slot = k;
  o.skip_slot = skip;
  OT_ASSERT_OK(ot_op_adamw(p, f.pa, f.ga, f.ma, f.va, f.ca, &o));
  OT_ASSERT_OK(ot_program_mark_output(p, f.stats));
  ot_tensor *keep[] = {f.pa, f.pb, f.ma, f.va, f.mb, f.vb, f.ca, f.x};
  for (int i = 0; i < 8; i++) OT_ASSERT_OK(ot_program_mark_persistent(p, keep[i]));
  ot_sched_opts so = ot_sched_opts_default();
  ot_plan *plan;
  OT_ASSERT_OK(ot_sched_plan(f.ctx, p, &so, &plan));

  /* run 1: k = 10, no skip */
  OT_ASSERT_OK(ot_program_set_scalar(p, step, 1));
  OT_ASSERT_OK(ot_program_set_scalar(p, k, 10));
  OT_ASSERT_OK(ot_sched_run(plan, NULL));
  float st[2];
  read_f32(f.stats, st, 2);
  double ss = 0;
  for (int i = 0; i < N; i++) {
    if (isfinite(giv[i])) ss += (double)giv[i] * giv[i];
    ss += (double)gv[i] * gv[i];
  }
  assert_true(st[1] == 2.0f);
  if (!(fabs(st[0] - ss) < 1e-5 * ss)) fail_msg("grad_stats: sum of squares %.9g, want %.9g", st[0], ss);
  read_f32(f.x, out, N);
  for (int i = 0; i < N; i++) ref[i] = ldexpf(xv[i], 10);
  assert_bits(out, ref, N, "loss_scale by 2^10");
  /* 2^10 g unscaled by 2^-10 is g exactly: the same update as from g */
  read_f32(f.pa, out, N);
  read_f32(f.pb, ref, N);
  assert_bits(out, ref, N, "adamw with scale_slot 2^10");
  for (int i = 0; i < N; i++) assert_true(out[i] != pv[i]);
  /* the copy is the f16 rounding of the master */
  ot_tensor *r16 = vec(f.ctx, "r16", OT_F16, N);
  OT_ASSERT_OK(ot_tensor_write_f32(r16, out, N));
  read_f32(r16, ref, N);
  read_f32(f.ca, out2, N);
  assert_bits(out2, ref, N, "f16 copy after an update");

  /* run 2: skipped: param and moments unchanged, the copy rewritten */
  float pa1[N], ma1[N], va1[N];
  read_f32(f.pa, pa1, N);
  read_f32(f.ma, ma1, N);
  read_f32(f.va, va1, N);
  OT_ASSERT_OK(ot_program_set_scalar(p, step, 2));
  OT_ASSERT_OK(ot_program_set_scalar(p, skip, 1));
  OT_ASSERT_OK(ot_sched_run(plan, NULL));
  read_f32(f.pa, out, N);
  assert_bits(out, pa1, N, "skipped adamw: param");
  read_f32(f.ma, out, N);
  assert_bits(out, ma1, N, "skipped adamw: m");
  read_f32(f.va, out, N);
  assert_bits(out, va1, N, "skipped adamw: v");
  read_f32(f.ca, out2, N);
  assert_bits(out2, ref, N, "f16 copy after a skipped update");

  /* a scale that is no finite f32 is refused when the op runs */
  OT_ASSERT_OK(ot_program_set_scalar(p, skip, 0));
  OT_ASSERT_OK(ot_program_set_scalar(p, k, 200));
  OT_ASSERT_FAILS(ot_sched_run(plan, NULL), OT_ERR_INVALID_ARG, "2^200");
  OT_ASSERT_FAILS(ot_op_loss_scale(p, f.x, -1), OT_ERR_INVALID_ARG, "scale_slot");
  OT_ASSERT_FAILS(ot_op_grad_stats(p, f.x, f.gb), OT_ERR_SHAPE, "2 elements");
  o.skip_slot = -2;
  OT_ASSERT_FAILS(ot_op_adamw(p, f.pa, f.ga, f.ma, f.va, NULL, &o), OT_ERR_INVALID_ARG, "skip_slot");

  ot_plan_destroy(plan);
  ot_program_destroy(p);
  ot_tensor_destroy(r16);
  for (int i = 0; i < 12; i++) ot_tensor_destroy(*all[i]);
  ot_ctx_destroy(f.ctx);
}

/* ot_op_adamw_multi against one ot_op_adamw per tensor, on the backend that
 * really copies: AWN tensors (lengths around the GPU kernel's octets and
 * blocks, f32/bf16 gradients, bf16/f16/no copies), the same loss-scale and
 * skip scalars; every run must leave params, moments and copies BITWISE
 * equal. Runs: k = 3; skipped; k = 0 (the gradients are the same each run). */
enum { AWN = 6 };

static void adamw_multi_program(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  static const int64_t len[AWN] = {37, 8, 1000, 3, 20001, 768};
  static const ot_dtype gdt[AWN] = {OT_F32, OT_BF16, OT_F32, OT_F32, OT_BF16, OT_F32};
  static const ot_dtype cdt[AWN] = {OT_BF16, OT_F16, OT_F32, OT_BF16, OT_BF16, OT_F16};
  ot_tensor *t[2][5][AWN]; /* [set][p, g, m, v, copy][i]; copy NULL for i == 2 */
  ot_program *p[2];
  ot_tensor *stats[2]; /* skip_if: the host writes {sum, Inf/NaN count} before each run */
  int step[2], k[2], skip[2];
  for (int a = 0; a < 2; a++) {
    OT_ASSERT_OK(ot_program_create(ctx, &p[a]));
    OT_ASSERT_OK(ot_program_scalar_create(p[a], "step", &step[a]));
    OT_ASSERT_OK(ot_program_scalar_create(p[a], "k", &k[a]));
    OT_ASSERT_OK(ot_program_scalar_create(p[a], "skip", &skip[a]));
    for (int i = 0; i < AWN; i++) {
      float *v = malloc(sizeof(float) * (size_t)len[i]);
      assert_non_null(v);
      for (int j = 0; j < 5; j++) {
        char name[32];
        snprintf(name, sizeof name, "%c%d.%d", "pgmvc"[j], a, i);
        if (j == 4 && i == 2) {
          t[a][j][i] = NULL;
          continue;
        }
        t[a][j][i] = vec(ctx, name, j == 1 ? gdt[i] : j == 4 ? cdt[i] : OT_F32, len[i]);
        ot_test_fill_uniform(v, len[i], 100 + 10 * (uint64_t)i + (uint64_t)j, j == 3 ? 0 : -1, 1);
        if (j == 1)
          for (int64_t e = 0; e < len[i]; e++) v[e] = ldexpf(v[e], 3);
        if (j == 3)
          for (int64_t e = 0; e < len[i]; e++) v[e] *= 1e-3f;
        OT_ASSERT_OK(ot_tensor_write_f32(t[a][j][i], v, len[i]));
        if (j != 1) OT_ASSERT_OK(ot_program_mark_persistent(p[a], t[a][j][i]));
      }
      free(v);
    }
    stats[a] = vec(ctx, a ? "stats1" : "stats0", OT_F32, 2);
    OT_ASSERT_OK(ot_program_mark_input(p[a], stats[a]));
    ot_adamw_opts o = ot_adamw_opts_default();
    o.step_slot = step[a], o.scale_slot = k[a], o.skip_slot = skip[a], o.skip_if = stats[a];
    if (a == 0)
      OT_ASSERT_OK(ot_op_adamw_multi(p[a], AWN, t[a][0], t[a][1], t[a][2], t[a][3], t[a][4], &o));
    else
      for (int i = 0; i < AWN; i++)
        OT_ASSERT_OK(ot_op_adamw(p[a], t[a][0][i], t[a][1][i], t[a][2][i], t[a][3][i], t[a][4][i], &o));
  }
  assert_int_equal(ot_program_num_ops(p[0]), 1);
  ot_sched_opts so = ot_sched_opts_default();
  ot_plan *plan[2];
  for (int a = 0; a < 2; a++) OT_ASSERT_OK(ot_sched_plan(ctx, p[a], &so, &plan[a]));
  /* run 2 skips by the host's flag, run 3 by the device's Inf/NaN count */
  static const int64_t ks[4] = {3, 3, 0, 0}, skips[4] = {0, 1, 0, 0};
  static const float infs[4] = {0, 0, 1, 0};
  float *after1 = malloc(sizeof(float) * (size_t)len[0]), *now = malloc(sizeof(float) * (size_t)len[0]);
  assert_non_null(after1);
  assert_non_null(now);
  for (int r = 0; r < 4; r++) {
    for (int a = 0; a < 2; a++) {
      const float st[2] = {1.0f, infs[r]};
      OT_ASSERT_OK(ot_tensor_write_f32(stats[a], st, 2));
      OT_ASSERT_OK(ot_program_set_scalar(p[a], step[a], r + 1));
      OT_ASSERT_OK(ot_program_set_scalar(p[a], k[a], ks[r]));
      OT_ASSERT_OK(ot_program_set_scalar(p[a], skip[a], skips[r]));
      OT_ASSERT_OK(ot_sched_run(plan[a], NULL));
      OT_ASSERT_OK(ot_sched_sync(plan[a]));
    }
    read_f32(t[0][0][0], now, len[0]);
    if (r == 0) memcpy(after1, now, sizeof(float) * (size_t)len[0]);
    if (r == 1 || r == 2) assert_bits(now, after1, len[0], "a skipped update (host flag, then skip_if)");
    if (r == 3 && !memcmp(now, after1, sizeof(float) * (size_t)len[0])) fail_msg("run 4 did not update");
    for (int i = 0; i < AWN; i++)
      for (int j = 0; j < 5; j++) {
        if (!t[0][j][i]) continue;
        float *x = malloc(sizeof(float) * 2 * (size_t)len[i]);
        assert_non_null(x);
        read_f32(t[0][j][i], x, len[i]);
        read_f32(t[1][j][i], x + len[i], len[i]);
        char what[64];
        snprintf(what, sizeof what, "adamw_multi run %d: %c of tensor %d", r + 1, "pgmvc"[j], i);
        assert_bits(x, x + len[i], len[i], what);
        free(x);
      }
  }
  free(after1);
  free(now);
  /* recording errors name the op */
  ot_adamw_opts o = ot_adamw_opts_default();
  o.step_slot = step[0];
  OT_ASSERT_FAILS(ot_op_adamw_multi(p[0], 0, t[0][0], t[0][1], t[0][2], t[0][3], NULL, &o), OT_ERR_INVALID_ARG,
                  "adamw_multi");
  ot_tensor *two[2] = {t[0][0][0], t[0][0][1]}, *swapped[2] = {t[0][2][1], t[0][2][0]};
  OT_ASSERT_FAILS(ot_op_adamw_multi(p[0], 2, two, two, swapped, two, NULL, &o), OT_ERR_SHAPE, "adamw_multi");
  o.step_slot = -1;
  OT_ASSERT_FAILS(ot_op_adamw_multi(p[0], 1, two, two, two, two, NULL, &o), OT_ERR_INVALID_ARG, "step_slot");
  for (int a = 0; a < 2; a++) {
    ot_plan_destroy(plan[a]);
    ot_program_destroy(p[a]);
    for (int j = 0; j < 5; j++)
      for (int i = 0; i < AWN; i++) ot_tensor_destroy(t[a][j][i]);
    ot_tensor_destroy(stats[a]);
  }
  ot_ctx_destroy(ctx);
}

/* ---- the trainer ------------------------------------------------------------- */

typedef struct run {
  float *loss; /* [steps] */
  float *params;
  int64_t n_params, skipped;
  int scale_log2;
} run;

static void run_free(run *r) {
  free(r->loss);
  free(r->params);
}

/* Trains `steps` steps; budget 0: the context's (else the trace is checked against it). */
static void train(ot_backend be, const mlp_config *c, ot_strategy st, uint64_t budget, int steps, run *r) {
  ot_ctx *ctx;
  mlp_trainer *t = ot_test_mlp_trainer(be, c, st, budget, &ctx);
  ot_trace *tr = NULL;
  if (budget) OT_ASSERT_OK(ot_trace_create(&tr));
  r->loss = malloc((size_t)steps * sizeof(float));
  assert_non_null(r->loss);
  for (int s = 0; s < steps; s++) {
    OT_ASSERT_OK(mlp_trainer_step(t, tr, &r->loss[s]));
    assert_true(isfinite(r->loss[s]));
  }
  if (tr) OT_ASSERT_OK(ot_trace_check_budget(tr, budget));
  r->params = ot_test_mlp_params(t, &r->n_params);
  r->skipped = mlp_trainer_skipped_steps(t);
  r->scale_log2 = mlp_trainer_loss_scale_log2(t);
  ot_trace_destroy(tr);
  mlp_trainer_destroy(t);
  ot_ctx_destroy(ctx);
}

static mlp_config with_precision(mlp_precision p) {
  mlp_config c = mlp_config_default();
  c.batch = 32; /* with a larger step: fewer, cheaper steps (asan) */
  c.adam.lr = 1e-2f;
  c.precision = p;
  return c;
}

/* The mean of the last 10 losses is below 0.6 x the first. */
static void assert_falls(const run *r, int steps, const char *what) {
  float last10 = 0;
  for (int s = steps - 10; s < steps; s++) last10 += r->loss[s] / 10;
  if (!(last10 < 0.6f * r->loss[0]))
    fail_msg("%s: loss %.4f -> %.4f (mean of the last 10 steps): not below 0.6 x", what, r->loss[0], last10);
}

enum { FALL_STEPS = 70, HUGE_STEPS = 100 };

/* bf16 and f16 (initial scale 2^16) learn the teacher task; their losses are
 * close to fp32's but not equal to them (the matmuls read the copies). */
static void low_precision_loss_falls(void **state) {
  (void)state;
  run ref;
  mlp_config c = with_precision(MLP_FP32);
  train(OT_BACKEND_HOST, &c, OT_STRATEGY_NONE, 0, FALL_STEPS, &ref);
  static const mlp_precision ps[2] = {MLP_BF16, MLP_F16};
  for (int i = 0; i < 2; i++) {
    c = with_precision(ps[i]);
    run r;
    train(OT_BACKEND_HOST, &c, OT_STRATEGY_NONE, 0, FALL_STEPS, &r);
    const char *what = mlp_precision_name(ps[i]);
    assert_falls(&r, FALL_STEPS, what);
    int differ = 0;
    for (int s = 0; s < FALL_STEPS; s++) {
      differ |= r.loss[s] != ref.loss[s];
      if (!(fabsf(r.loss[s] - ref.loss[s]) < 0.05f * ref.loss[s]))
        fail_msg("%s: loss of step %d is %.6f, fp32 gave %.6f", what, s + 1, r.loss[s], ref.loss[s]);
    }
    if (!differ) fail_msg("%s: every loss equals fp32's: the matmuls do not read the low-precision copies", what);
    if (ps[i] == MLP_F16) assert_true(r.skipped == 0 && r.scale_log2 == 16); /* 2^16 never overflows here */
    run_free(&r);
  }
  run_free(&ref);
}

/* f16 from 2^40: the first steps overflow (f16 gradients > 65504), are
 * skipped and halve the scale; the parameters do not move meanwhile. */
static void f16_huge_scale_backs_off(void **state) {
  (void)state;
  mlp_config c = with_precision(MLP_F16);
  c.loss_scale_log2 = 40;
  c.scale_growth_interval = 1000; /* no growth: every skip shows in the exponent */
  run init, early, r;
  train(OT_BACKEND_HOST, &c, OT_STRATEGY_NONE, 0, 1, &init); /* nothing applied after one step */
  train(OT_BACKEND_HOST, &c, OT_STRATEGY_NONE, 0, 3, &early);
  assert_int_equal(early.skipped, 3);
  assert_int_equal(early.scale_log2, 37);
  assert_bits(early.params, init.params, init.n_params, "parameters after 3 overflowing steps");
  train(OT_BACKEND_HOST, &c, OT_STRATEGY_NONE, 0, HUGE_STEPS, &r);
  if (!(r.skipped > 3 && r.skipped < HUGE_STEPS / 2))
    fail_msg("%lld of %d steps skipped from 2^40", (long long)r.skipped, HUGE_STEPS);
  assert_int_equal(r.scale_log2, 40 - r.skipped);
  assert_falls(&r, HUGE_STEPS, "f16 from 2^40");
  run_free(&init);
  run_free(&early);
  run_free(&r);
}

static void assert_same(const run *ref, const run *r, int steps, const char *what) {
  assert_bits(r->loss, ref->loss, steps, what);
  assert_int_equal(ref->n_params, r->n_params);
  assert_bits(r->params, ref->params, r->n_params, what);
  if (r->skipped != ref->skipped || r->scale_log2 != ref->scale_log2)
    fail_msg("%s: %lld skipped, scale 2^%d; the unlimited run: %lld, 2^%d", what, (long long)r->skipped,
             r->scale_log2, (long long)ref->skipped, ref->scale_log2);
}

enum { BUDGET_STEPS = 6 };

/* Every precision, every backend: the smallest budget (two strategies)
 * changes nothing. f16 starts at a scale that overflows for a few steps, so
 * skipped and applied updates both happen within the run. */
static void budgets_bitwise(void **state) {
  (void)state;
  ot_backend bk[3];
  int nb = ot_test_backends(bk);
  static const mlp_precision ps[3] = {MLP_FP32, MLP_BF16, MLP_F16};
  for (int b = 0; b < nb; b++)
    for (int i = 0; i < 3; i++) {
      mlp_config c = with_precision(ps[i]);
      c.hidden = 48;
      c.batch = 16;
      c.layers = 4;
      c.micro_batches = 2;
      c.loss_scale_log2 = 19;
      run ref;
      train(bk[b], &c, OT_STRATEGY_NONE, 0, BUDGET_STEPS, &ref);
      if (ps[i] == MLP_F16 && !(ref.skipped > 0 && ref.skipped < BUDGET_STEPS - 1))
        fail_msg("f16 from 2^19: %lld of %d steps skipped; the test wants some of both", (long long)ref.skipped,
                 BUDGET_STEPS);
      uint64_t lo = ot_test_mlp_min_budget(bk[b], &c);
      static const ot_strategy st[2] = {OT_STRATEGY_MINIMAL, OT_STRATEGY_AGGRESSIVE};
      for (int k = 0; k < 2; k++) {
        char what[128];
        snprintf(what, sizeof what, "%s, %s, budget %llu, %s", ot_backend_name(bk[b]), mlp_precision_name(ps[i]),
                 (unsigned long long)lo, ot_strategy_name(st[k]));
        run r;
        train(bk[b], &c, st[k], lo, BUDGET_STEPS, &r);
        assert_same(&ref, &r, BUDGET_STEPS, what);
        run_free(&r);
      }
      run_free(&ref);
    }
}

static void bad_options(void **state) {
  (void)state;
  mlp_precision p;
  OT_ASSERT_FAILS(mlp_precision_parse("fp8", &p), OT_ERR_INVALID_ARG, "fp32, bf16, f16");
  OT_ASSERT_OK(mlp_precision_parse("bf16", &p));
  assert_int_equal(p, MLP_BF16);
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_HOST);
  mlp_config c = with_precision(MLP_F16);
  c.loss_scale_log2 = 128;
  mlp_trainer *t;
  OT_ASSERT_FAILS(mlp_trainer_create(ctx, &c, NULL, &t), OT_ERR_INVALID_ARG, "2^128");
  c = with_precision(MLP_F16);
  c.scale_growth_interval = 0;
  OT_ASSERT_FAILS(mlp_trainer_create(ctx, &c, NULL, &t), OT_ERR_INVALID_ARG, "interval");
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(scaling_ops),
      cmocka_unit_test(adamw_multi_program),
      cmocka_unit_test(low_precision_loss_falls),
      cmocka_unit_test(f16_huge_scale_backs_off),
      cmocka_unit_test(budgets_bitwise),
      cmocka_unit_test(bad_options),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
