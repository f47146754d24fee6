/* test_ops_moe.c — the mixture-of-experts op (experts.h) against a plain C
 * reference, on every backend of the build, with windows of one expert up
 * to all of them and under budgets down to the feasibility bound:
 *   - h += the chosen experts' SwiGLU outputs times their routing weights,
 *     for decode (one token: no gather) and a prompt (rows gathered);
 *   - bitwise the same result whatever the window and the budget;
 *   - the trace within the budget, and its expert fills (uploads flagged
 *     OT_TRACE_FILL) naming only experts the router chose — each chosen
 *     expert once per use with a one-expert window, once in all with a
 *     window of every expert (kept between runs);
 *   - the routing (softmax, top-k, renormalisation) against its own
 *     reference, and the op's argument errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ot_test.h"

enum { L = 2, E = 5, K = 2, D = 40, F = 24 };

/* The reference routing: softmax in double, the top K by a full sort
 * (ties to the lower index), renormalised when asked. */
static void ref_route(const float *lg, int n, int k, int norm, int *choice, double *w) {
  double p[16], mx = -INFINITY, sum = 0;
  int idx[16];
  for (int i = 0; i < n; i++) mx = lg[i] > mx ? lg[i] : mx;
  for (int i = 0; i < n; i++) sum += p[i] = exp((double)lg[i] - mx);
  for (int i = 0; i < n; i++) {
    p[i] /= sum;
    idx[i] = i;
  }
  for (int i = 0; i < n; i++) /* insertion sort, descending, stable */
    for (int j = i; j > 0 && p[idx[j]] > p[idx[j - 1]]; j--) {
      int t = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = t;
    }
  double chosen = 0;
  for (int i = 0; i < k; i++) chosen += p[idx[i]];
  for (int i = 0; i < k; i++) {
    choice[i] = idx[i];
    w[i] = norm ? p[idx[i]] / chosen : p[idx[i]];
  }
}

typedef struct fixture {
  ot_ctx *ctx;
  ot_dtype dt;
  ot_tensor *w[L][E][3]; /* gate, up [F, D]; down [D, F] */
  float *wf[L][E][3];    /* their values in f32 (after rounding to dt) */
  ot_experts *ex;
} fixture;

static void make(fixture *f, ot_backend b, ot_dtype dt, uint64_t seed) {
  memset(f, 0, sizeof *f);
  f->ctx = ot_test_ctx(b);
  f->dt = dt;
  ot_experts_shape sh = {.n_layers = L, .n_experts = E, .top_k = K, .normalize = 1, .hidden = D, .intermediate = F,
                         .dtype = dt};
  OT_ASSERT_OK(ot_experts_create(f->ctx, &sh, &f->ex));
  for (int l = 0; l < L; l++)
    for (int e = 0; e < E; e++) {
      for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "layer%d.expert%d.%s", l, e, k == 0 ? "gate" : k == 1 ? "up" : "down");
        int64_t shape[2] = {k < 2 ? F : D, k < 2 ? D : F};
        OT_ASSERT_OK(ot_tensor_create(f->ctx, name, dt, 2, shape, &f->w[l][e][k]));
        float *v = malloc(F * D * sizeof *v);
        ot_test_fill_uniform(v, F * D, seed++, -0.3f, 0.3f);
        OT_ASSERT_OK(ot_convert(dt, ot_tensor_data(f->w[l][e][k]), OT_F32, v, F * D));
        OT_ASSERT_OK(ot_convert(OT_F32, v, dt, ot_tensor_data(f->w[l][e][k]), F * D)); /* what the kernels see */
        f->wf[l][e][k] = v;
      }
      OT_ASSERT_OK(ot_experts_set(f->ex, l, e, f->w[l][e][0], f->w[l][e][1], f->w[l][e][2]));
    }
}

static void unmake(fixture *f) {
  ot_experts_destroy(f->ex);
  for (int l = 0; l < L; l++)
    for (int e = 0; e < E; e++)
      for (int k = 0; k < 3; k++) {
        ot_tensor_destroy(f->w[l][e][k]);
        free(f->wf[l][e][k]);
      }
  ot_ctx_destroy(f->ctx);
}

/* h += expert layer l of x, routed by logits, in double. */
static void ref_moe(const fixture *f, int l, int T, const float *x, const float *lg, double *h) {
  for (int t = 0; t < T; t++) {
    int ch[K];
    double w[K];
    ref_route(lg + t * E, E, K, 1, ch, w);
    for (int k = 0; k < K; k++) {
      const float *G = f->wf[l][ch[k]][0], *U = f->wf[l][ch[k]][1], *Dn = f->wf[l][ch[k]][2];
      double a[F];
      for (int j = 0; j < F; j++) {
        double g = 0, u = 0;
        for (int i = 0; i < D; i++) {
          g += (double)G[j * D + i] * x[t * D + i];
          u += (double)U[j * D + i] * x[t * D + i];
        }
        a[j] = g / (1 + exp(-g)) * u;
      }
      for (int i = 0; i < D; i++) {
        double y = 0;
        for (int j = 0; j < F; j++) y += (double)Dn[i * F + j] * a[j];
        h[t * D + i] += w[k] * y;
      }
    }
  }
}

typedef struct result {
  float h[8 * D];
  ot_experts_stats stats;
  int fills;           /* FILL events in the traces */
  int bad_fill;        /* a FILL naming an expert the router did not choose for that layer */
} result;

/* Whether trace event name `nm` is a weight of an expert chosen in layer l for some token. */
static int chosen(const char *nm, int T, const float lg[L][8 * E]) {
  int l, e;
  char part[8];
  if (sscanf(nm, "layer%d.expert%d.%7s", &l, &e, part) != 3 || l < 0 || l >= L) return 0;
  for (int t = 0; t < T; t++) {
    int ch[K];
    double w[K];
    ref_route(lg[l] + t * E, E, K, 1, ch, w);
    for (int k = 0; k < K; k++)
      if (ch[k] == e) return 1;
  }
  return 0;
}

/* Both layers over T tokens, `runs` times, with a window of `slots`, under
 * `budget` (0: the context's). */
static void run_moe(fixture *f, int T, int slots, uint64_t budget, int runs, const float *x,
                    const float lg[L][8 * E], result *out) {
  memset(out, 0, sizeof *out);
  OT_ASSERT_OK(ot_experts_set_slots(f->ex, slots));
  assert_int_equal(ot_experts_slots(f->ex), slots);
  ot_experts_stats before = ot_experts_get_stats(f->ex);
  int64_t sTD[2] = {T, D}, sTE[2] = {T, E}, sW[1] = {ot_experts_work_elems(f->ex, T)};
  ot_tensor *xt, *h, *lt[L], *work;
  OT_ASSERT_OK(ot_tensor_create(f->ctx, "x", OT_F32, 2, sTD, &xt));
  OT_ASSERT_OK(ot_tensor_create(f->ctx, "h", OT_F32, 2, sTD, &h));
  OT_ASSERT_OK(ot_tensor_create(f->ctx, "work", OT_F32, 1, sW, &work));
  memcpy(ot_tensor_data(xt), x, (size_t)(T * D) * 4);
  ot_program *p;
  OT_ASSERT_OK(ot_program_create(f->ctx, &p));
  for (int l = 0; l < L; l++) {
    char nm[16];
    snprintf(nm, sizeof nm, "logits%d", l);
    OT_ASSERT_OK(ot_tensor_create(f->ctx, nm, OT_F32, 2, sTE, &lt[l]));
    memcpy(ot_tensor_data(lt[l]), lg[l], (size_t)(T * E) * 4);
    OT_ASSERT_OK(ot_program_mark_input(p, lt[l]));
    OT_ASSERT_OK(ot_op_moe(p, h, xt, lt[l], f->ex, l, work));
  }
  OT_ASSERT_OK(ot_program_mark_input(p, xt));
  OT_ASSERT_OK(ot_program_mark_input(p, h));
  OT_ASSERT_OK(ot_program_mark_output(p, h));
  ot_sched_opts so = ot_sched_opts_default();
  so.budget_bytes = budget;
  so.strategy = budget ? OT_STRATEGY_MINIMAL : OT_STRATEGY_BALANCED;
  ot_plan *plan;
  OT_ASSERT_OK(ot_sched_plan(f->ctx, p, &so, &plan));
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  for (int r = 0; r < runs; r++) {
    memset(ot_tensor_data(h), 0, (size_t)(T * D) * 4);
    OT_ASSERT_OK(ot_sched_run(plan, tr));
  }
  OT_ASSERT_OK(ot_trace_check_budget(tr, budget ? budget : ot_ctx_budget(f->ctx, 0)));
  for (size_t i = 0; i < ot_trace_count(tr); i++) {
    const ot_trace_event *ev = ot_trace_event_at(tr, i);
    if (!(ev->flags & OT_TRACE_FILL)) continue;
    out->fills++;
    if (ev->block_delta != 0 || !chosen(ev->name, T, lg)) out->bad_fill = 1;
  }
  memcpy(out->h, ot_tensor_data(h), (size_t)(T * D) * 4);
  ot_experts_stats now = ot_experts_get_stats(f->ex);
  out->stats = (ot_experts_stats){now.routed - before.routed, now.hits - before.hits, now.fills - before.fills,
                                  now.fill_bytes - before.fill_bytes};
  ot_trace_destroy(tr);
  ot_plan_destroy(plan);
  ot_program_destroy(p);
  for (int l = 0; l < L; l++) ot_tensor_destroy(lt[l]);
  ot_tensor_destroy(xt);
  ot_tensor_destroy(h);
  ot_tensor_destroy(work);
}

/* The distinct experts the router chose over T tokens, summed over the layers. */
static int distinct_used(int T, const float lg[L][8 * E]) {
  int n = 0;
  for (int l = 0; l < L; l++) {
    int used[E] = {0};
    for (int t = 0; t < T; t++) {
      int ch[K];
      double w[K];
      ref_route(lg[l] + t * E, E, K, 1, ch, w);
      for (int k = 0; k < K; k++) used[ch[k]] = 1;
    }
    for (int e = 0; e < E; e++) n += used[e];
  }
  return n;
}

static void check_case(ot_backend b, ot_dtype dt, int T, uint64_t seed) {
  fixture f;
  make(&f, b, dt, seed);
  float x[8 * D], lg[L][8 * E];
  ot_test_fill_uniform(x, T * D, seed + 100, -1, 1);
  for (int l = 0; l < L; l++) ot_test_fill_uniform(lg[l], T * E, seed + 200 + l, -3, 3);
  double want[8 * D] = {0};
  for (int l = 0; l < L; l++) ref_moe(&f, l, T, x, lg[l], want);
  const int n_used = distinct_used(T, lg);
  result all, r;
  run_moe(&f, T, L * E, 0, 2, x, lg, &all);
  for (int i = 0; i < T * D; i++)
    if (fabs(all.h[i] - want[i]) > 2e-5 * (1 + fabs(want[i])))
      fail_msg("moe %s %s T=%d: h[%d] = %.7g, the reference %.7g", ot_backend_name(b), ot_dtype_name(dt), T, i,
               all.h[i], want[i]);
  /* every expert of both layers fits: each chosen one crosses once, the second run hits */
  assert_false(all.bad_fill);
  assert_int_equal(all.fills, 3 * n_used);
  assert_int_equal(all.stats.fills, n_used);
  assert_int_equal(all.stats.hits, n_used);
  assert_int_equal(all.stats.routed, 2 * L * T * K);
  const int slots[3] = {1, 2, 3};
  for (int s = 0; s < 3; s++) {
    /* the smallest budget the plan allows with this window, then that plus a little */
    OT_ASSERT_OK(ot_experts_set_slots(f.ex, slots[s]));
    for (int tight = 0; tight < 2; tight++) {
      uint64_t budget = 0; /* the context's, or the feasibility bound: */
      if (tight) { /* the op's working set, with the window */
        ot_program *p;
        int64_t sTD[2] = {T, D}, sTE[2] = {T, E}, sW[1] = {ot_experts_work_elems(f.ex, T)};
        ot_tensor *xt, *h, *lt, *work;
        OT_ASSERT_OK(ot_tensor_create(f.ctx, "x", OT_F32, 2, sTD, &xt));
        OT_ASSERT_OK(ot_tensor_create(f.ctx, "h", OT_F32, 2, sTD, &h));
        OT_ASSERT_OK(ot_tensor_create(f.ctx, "l", OT_F32, 2, sTE, &lt));
        OT_ASSERT_OK(ot_tensor_create(f.ctx, "w", OT_F32, 1, sW, &work));
        OT_ASSERT_OK(ot_program_create(f.ctx, &p));
        OT_ASSERT_OK(ot_op_moe(p, h, xt, lt, f.ex, 0, work));
        OT_ASSERT_OK(ot_sched_min_budget(p, &budget, NULL));
        ot_program_destroy(p);
        ot_tensor_destroy(xt);
        ot_tensor_destroy(h);
        ot_tensor_destroy(lt);
        ot_tensor_destroy(work);
      }
      run_moe(&f, T, slots[s], budget, 2, x, lg, &r);
      if (memcmp(r.h, all.h, (size_t)(T * D) * 4))
        fail_msg("moe %s %s T=%d: a window of %d expert(s)%s changed the result", ot_backend_name(b),
                 ot_dtype_name(dt), T, slots[s], tight ? " at the feasibility bound" : "");
      assert_false(r.bad_fill);
      assert_int_equal(r.fills, 3 * (int)r.stats.fills);
      assert_int_equal(r.stats.fills + r.stats.hits, 2 * (uint64_t)n_used); /* each use fills or hits */
      if (slots[s] == 1) assert_int_equal(r.stats.fills, 2 * n_used);       /* a different expert each time */
      assert_int_equal(r.stats.fill_bytes, r.stats.fills * 3 * (uint64_t)ot_dtype_bytes(dt, F * D));
    }
  }
  unmake(&f);
}

static void test_moe_against_reference(void **st) {
  (void)st;
  ot_backend bk[3];
  const int nb = ot_test_backends(bk);
  uint64_t seed = 1;
  for (int b = 0; b < nb; b++) {
    if (bk[b] == OT_BACKEND_USM) continue; /* the usm window: reads in place, covered by the GPU suite */
    check_case(bk[b], OT_F32, 1, seed += 1000);
    check_case(bk[b], OT_F32, 7, seed += 1000);
    check_case(bk[b], OT_BF16, 1, seed += 1000);
    check_case(bk[b], OT_BF16, 5, seed += 1000);
  }
}

static void test_route(void **st) {
  (void)st;
  uint64_t s = 7;
  for (int c = 0; c < 200; c++) {
    const int n = 2 + c % 9, k = 1 + c % n, norm = c % 2;
    float lg[16];
    for (int i = 0; i < n; i++) lg[i] = ot_test_rand_uniform(&s, -4, 4);
    if (c % 5 == 0) lg[1] = lg[0]; /* a tie: the lower index first */
    int ch[16], rc[16];
    float w[16];
    double rw[16];
    ot_experts_route(lg, n, k, norm, ch, w);
    ref_route(lg, n, k, norm, rc, rw);
    for (int i = 0; i < k; i++) {
      if (ch[i] != rc[i]) fail_msg("route case %d: choice %d is %d, the reference %d", c, i, ch[i], rc[i]);
      if (fabs(w[i] - rw[i]) > 1e-6) fail_msg("route case %d: weight %d is %g, the reference %g", c, i, w[i], rw[i]);
    }
  }
}

static void test_errors(void **st) {
  (void)st;
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_HOST);
  ot_experts *ex;
  ot_experts_shape sh = {.n_layers = 1, .n_experts = 4, .top_k = 5, .hidden = 8, .intermediate = 8, .dtype = OT_F32};
  OT_ASSERT_FAILS(ot_experts_create(ctx, &sh, &ex), OT_ERR_INVALID_ARG, "top_k <= experts");
  sh.top_k = 2;
  OT_ASSERT_OK(ot_experts_create(ctx, &sh, &ex));
  int64_t s88[2] = {8, 8}, s84[2] = {8, 4}, s1[2] = {1, 4};
  ot_tensor *w, *bad, *h, *lg;
  OT_ASSERT_OK(ot_tensor_create(ctx, "w", OT_F32, 2, s88, &w));
  OT_ASSERT_OK(ot_tensor_create(ctx, "bad", OT_BF16, 2, s88, &bad));
  OT_ASSERT_OK(ot_tensor_create(ctx, "h", OT_F32, 2, s84, &h));
  OT_ASSERT_OK(ot_tensor_create(ctx, "lg", OT_F32, 2, s1, &lg));
  OT_ASSERT_FAILS(ot_experts_set(ex, 0, 4, w, w, w), OT_ERR_INVALID_ARG, "layer 0 expert 4 of 1 x 4");
  OT_ASSERT_FAILS(ot_experts_set(ex, 0, 1, w, bad, w), OT_ERR_SHAPE, "'bad' must be a contiguous [8, 8] f32");
  ot_program *p;
  OT_ASSERT_OK(ot_program_create(ctx, &p));
  OT_ASSERT_FAILS(ot_op_moe(p, h, h, lg, ex, 0, h), OT_ERR_STATE, "no window yet");
  OT_ASSERT_OK(ot_experts_set_slots(ex, 100)); /* clamped to every expert */
  assert_int_equal(ot_experts_slots(ex), 4);
  OT_ASSERT_FAILS(ot_op_moe(p, h, h, lg, ex, 1, h), OT_ERR_INVALID_ARG, "layer 1 of 1");
  OT_ASSERT_FAILS(ot_op_moe(p, h, h, lg, ex, 0, h), OT_ERR_SHAPE, "must be [T, 8]");
  ot_program_destroy(p);
  ot_experts_destroy(ex);
  ot_tensor_destroy(w);
  ot_tensor_destroy(bad);
  ot_tensor_destroy(h);
  ot_tensor_destroy(lg);
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_route),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_moe_against_reference),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
