/* op_table.c — running one row of the op table (op_table.h). */
#include "op_table.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ot_test.h"
#include "sched_support.h"

/* ---- tensors made by builders ---------------------------------------------- */

static uint64_t seed_of(const char *name) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *name; name++) h = (h ^ (unsigned char)*name) * 1099511628211ull;
  return h;
}

float oc_rand(oc_case *c, float lo, float hi) { return ot_test_rand_uniform(&c->rng, lo, hi); }

float *oc_f32(ot_tensor *t) { return ot_tensor_data(t); }
int32_t *oc_i32(ot_tensor *t) { return ot_tensor_data(t); }

void oc_set(ot_tensor *t, int64_t i, float v) {
  ot_dtype dt = ot_tensor_dtype(t);
  OC_OK(ot_convert(dt, (char *)ot_tensor_data(t) + ot_dtype_bytes(dt, i), OT_F32, &v, 1));
}

int oc_scalar(oc_case *c, const char *name, int64_t v) {
  int slot;
  OC_OK(ot_program_scalar_create(c->p, name, &slot));
  OC_OK(ot_program_set_scalar(c->p, slot, v));
  return slot;
}

/* Writes t (numel values): random for RO/ACC, NaN (-777) otherwise. */
static void fill(oc_case *c, ot_tensor *t, oc_role r, float lo, float hi) {
  int64_t n = ot_tensor_numel(t);
  if (ot_tensor_dtype(t) == OT_I32) {
    int32_t *v = oc_i32(t); /* contiguous views only (dim-0 slices) */
    for (int64_t i = 0; i < n; i++)
      v[i] = (r == OC_RO || r == OC_ACC) ? (int32_t)lo + (int32_t)(ot_test_rand_u64(&c->rng) % (uint64_t)(hi - lo + 1))
                                         : -777;
    return;
  }
  float *v = malloc((size_t)n * sizeof *v);
  assert_non_null(v);
  for (int64_t i = 0; i < n; i++) v[i] = (r == OC_RO || r == OC_ACC) ? oc_rand(c, lo, hi) : NAN;
  OC_OK(ot_tensor_write_f32(t, v, n));
  free(v);
}

#define GUARD_VALUE 1234.5f

static ot_tensor *make(oc_case *c, oc_role r, const char *name, ot_dtype dt, oc_shape s, float lo, float hi) {
  if (c->n == OC_MAX_T) fail_msg("op table: more than %d tensors in one row", OC_MAX_T);
  int k = c->n++;
  ot_tensor *t;
  if (c->guard && (r == OC_OUT || r == OC_ACC) && !ot_dtype_block(dt)) {
    /* a view of rows 1..d0 of a storage with one guard row before and after */
    oc_shape ps = s;
    ps.d[0] += 2;
    char pn[64];
    snprintf(pn, sizeof pn, "%s.storage", name);
    OC_OK(ot_tensor_create(c->ctx, pn, dt, ps.nd, ps.d, &c->parent[k]));
    int64_t pn_el = ot_tensor_numel(c->parent[k]);
    if (dt == OT_I32) {
      for (int64_t i = 0; i < pn_el; i++) oc_i32(c->parent[k])[i] = 31337;
    } else {
      float *g = malloc((size_t)pn_el * sizeof *g);
      assert_non_null(g);
      for (int64_t i = 0; i < pn_el; i++) g[i] = GUARD_VALUE;
      OC_OK(ot_tensor_write_f32(c->parent[k], g, pn_el));
      free(g);
    }
    OC_OK(ot_tensor_slice(c->parent[k], 0, 1, s.d[0], &t));
    OC_OK(ot_tensor_set_name(t, name));
  } else {
    OC_OK(ot_tensor_create(c->ctx, name, dt, s.nd, s.d, &t));
  }
  c->t[k] = t;
  c->role[k] = r;
  fill(c, t, r, lo, hi);
  if (r == OC_OUT || r == OC_ACC) OC_OK(ot_program_mark_output(c->p, t));
  if (r == OC_RO && c->guard) OC_OK(ot_program_mark_input(c->p, t));
  return t;
}

ot_tensor *oc_in(oc_case *c, const char *name, ot_dtype dt, oc_shape s, float lo, float hi) {
  return make(c, OC_RO, name, dt, s, lo, hi);
}
ot_tensor *oc_out(oc_case *c, const char *name, ot_dtype dt, oc_shape s) { return make(c, OC_OUT, name, dt, s, 0, 0); }
ot_tensor *oc_acc(oc_case *c, const char *name, ot_dtype dt, oc_shape s, float lo, float hi) {
  return make(c, OC_ACC, name, dt, s, lo, hi);
}
ot_tensor *oc_scratch(oc_case *c, const char *name, ot_dtype dt, oc_shape s) {
  return make(c, OC_SCRATCH, name, dt, s, 0, 0);
}

/* ---- one build of a row: its tensors, the fillers around the op ------------- */

typedef struct storage_copy {
  ot_tensor *st; /* the tensor that owns the whole storage */
  void *bytes;
  size_t n;
} storage_copy;

typedef struct build {
  oc_case c;
  ot_tensor *fa, *ft, *fo;   /* fillers: weight, temporary live across the op, output */
  storage_copy raw[OC_MAX_T]; /* initial bytes of each op tensor's storage */
  storage_copy fraw[3];
  uint64_t budget;           /* the program's smallest feasible budget */
} build;

static void snap(storage_copy *s, ot_tensor *st) {
  s->st = st;
  s->n = ot_tensor_storage_bytes(st);
  s->bytes = malloc(s->n ? s->n : 1);
  assert_non_null(s->bytes);
  memcpy(s->bytes, ot_tensor_data(st), s->n);
}

static void restore(const storage_copy *s) { memcpy(ot_tensor_data(s->st), s->bytes, s->n); }

static ot_tensor *storage_of(const oc_case *c, int k) { return c->parent[k] ? c->parent[k] : c->t[k]; }

/* Values of t as floats (i32 converted). */
static float *values(ot_tensor *t) {
  int64_t n = ot_tensor_numel(t);
  float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  assert_non_null(v);
  if (ot_tensor_dtype(t) == OT_I32) {
    for (int64_t i = 0; i < n; i++) v[i] = (float)oc_i32(t)[i];
  } else {
    OC_OK(ot_tensor_read_f32(t, v, n));
  }
  return v;
}

static void free_case(oc_case *c) {
  ot_program_destroy(c->p);
  for (int k = 0; k < c->n; k++) {
    ot_tensor_destroy(c->t[k]);
    ot_tensor_destroy(c->parent[k]);
    free(c->h[k]);
    free(c->w[k]);
  }
  c->p = NULL;
  c->n = 0;
}

static void free_build(build *b) {
  free_case(&b->c);
  for (int k = 0; k < OC_MAX_T; k++) free(b->raw[k].bytes);
  for (int k = 0; k < 3; k++) free(b->fraw[k].bytes);
  ot_tensor_destroy(b->fa);
  ot_tensor_destroy(b->ft);
  ot_tensor_destroy(b->fo);
}

/* The row's working set alone: its program without fillers. */
static uint64_t probe(const oc_row *row, ot_ctx *ctx, int guard) {
  oc_case c = {.ctx = ctx, .arg = row->arg, .rng = seed_of(row->name), .guard = guard};
  OC_OK(ot_program_create(ctx, &c.p));
  row->build(&c);
  uint64_t w;
  OC_OK(ot_sched_min_budget(c.p, &w, NULL));
  free_case(&c);
  return w;
}

static ot_tensor *filler(ot_ctx *ctx, const char *name, int64_t n) {
  ot_tensor *t;
  OC_OK(ot_tensor_create(ctx, name, OT_F32, 1, &n, &t));
  return t;
}

/* f1: ft = mix(fa); the op; f2: fo = mix(ft, fa). fa and ft are live across
 * the op and together about as large as it: under the minimum budget the op
 * cannot run without evicting them. */
static void make_build(build *b, const oc_row *row, ot_ctx *ctx, int guard) {
  memset(b, 0, sizeof *b);
  uint64_t w = probe(row, ctx, guard);
  uint64_t fb = w > 768 ? (w - 256) / 2 / 256 * 256 : 256;
  int64_t nf = (int64_t)fb / 4;
  b->fa = filler(ctx, "filler_w", nf);
  b->ft = filler(ctx, "filler_t", nf);
  b->fo = filler(ctx, "filler_out", 64);
  ts_fill(b->fa, 99);
  for (int64_t i = 0; i < nf; i++) oc_f32(b->ft)[i] = NAN;
  for (int64_t i = 0; i < 64; i++) oc_f32(b->fo)[i] = NAN;
  oc_case *c = &b->c;
  *c = (oc_case){.ctx = ctx, .arg = row->arg, .rng = seed_of(row->name), .guard = guard};
  OC_OK(ot_program_create(ctx, &c->p));
  ts_mix_params m1 = {{0.5f, 0, 0}, 0.25f, -1}, m2 = {{0.5f, 0.5f, 0}, 0.25f, -1};
  ot_tensor *in2[2] = {b->ft, b->fa};
  OC_OK(ts_add_mix(c->p, "filler1", &b->fa, 1, &b->ft, 1, &m1));
  row->build(c);
  OC_OK(ts_add_mix(c->p, "filler2", in2, 2, &b->fo, 1, &m2));
  OC_OK(ot_program_mark_output(c->p, b->fo));
  OC_OK(ot_sched_min_budget(c->p, &b->budget, NULL));
  /* the starting state, after the builder planted whatever it wanted */
  for (int k = 0; k < c->n; k++) {
    c->h[k] = values(c->t[k]);
    c->w[k] = values(c->t[k]);
    snap(&b->raw[k], storage_of(c, k));
  }
  snap(&b->fraw[0], b->fa);
  snap(&b->fraw[1], b->ft);
  snap(&b->fraw[2], b->fo);
  row->ref(c);
}

/* ---- checks ------------------------------------------------------------------ */

int oc_quiet;

typedef struct report {
  int fails;
  char *msg;
  size_t size;
  char where[160];
} report;

static void failf(report *r, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (r->fails < 8 && !oc_quiet) print_message("  FAIL %s: %s\n", r->where, line);
  if (r->fails == 0 && r->msg) snprintf(r->msg, r->size, "%s: %s", r->where, line);
  r->fails++;
}

static void check_values(report *r, const oc_row *row, oc_case *c, int k) {
  float *got = values(c->t[k]);
  int64_t n = ot_tensor_numel(c->t[k]);
  /* a tensor stored in f16/bf16 holds the result rounded: one unit in the last place more */
  ot_dtype dt = ot_tensor_dtype(c->t[k]);
  double ulp = dt == OT_BF16 ? 0x1p-8 : dt == OT_F16 ? 0x1p-11 : 0;
  int bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double g = got[i], w = c->w[k][i];
    double err = fabs(g - w), lim = row->atol + (row->rtol + ulp) * fabs(w);
    if (isnan(w)) {
      if (!bad++) failf(r, "the reference left '%s'[%lld] unset", ot_tensor_name(c->t[k]), (long long)i);
    } else if (!isfinite(g) && isfinite(w)) {
      if (!bad++) failf(r, "'%s'[%lld] = %g is not finite (want %.7g)", ot_tensor_name(c->t[k]), (long long)i, g, w);
    } else if (!(err <= lim)) {
      if (!bad++) failf(r, "'%s'[%lld] = %.7g, want %.7g (error %.3g > %.3g)", ot_tensor_name(c->t[k]), (long long)i, g,
                        w, err, lim);
    }
    if (err > worst && isfinite(err)) worst = err;
  }
  if (bad > 1) failf(r, "'%s': %d of %lld elements wrong (largest error %.3g)", ot_tensor_name(c->t[k]), bad,
                     (long long)n, worst);
  free(got);
}

/* Bytes of the storage outside rows 1..d0 (the guard rows) unchanged. */
static void check_guards(report *r, const storage_copy *s, const ot_tensor *view) {
  size_t row = s->n / (size_t)(ot_tensor_dim(view, 0) + 2);
  const unsigned char *now = ot_tensor_data(s->st), *was = s->bytes;
  if (memcmp(now, was, row) || memcmp(now + s->n - row, was + s->n - row, row))
    failf(r, "a guard row around '%s' was written", ot_tensor_name(view));
}

static void check_unchanged(report *r, const storage_copy *s, const char *what) {
  if (memcmp(ot_tensor_data(s->st), s->bytes, s->n))
    failf(r, "read-only '%s' changed", what);
}

static void check_filler(report *r, build *b) {
  const float *a = oc_f32(b->fa), *o = oc_f32(b->fo);
  for (int j = 0; j < 64; j++) {
    float t = 0.5f * (0.25f + 0.5f * a[j]);
    float want = 0.5f * (0.25f + 0.5f * t + 0.5f * a[j]);
    if (!(fabsf(o[j] - want) <= 1e-6f)) {
      failf(r, "filler_out[%d] = %g, want %g (a copy evicted around the op came back wrong)", j, o[j], want);
      return;
    }
  }
  check_unchanged(r, &b->fraw[0], "filler_w");
}

static void check_trace(report *r, ot_trace *tr, uint64_t budget, int n_ops, int must_evict) {
  if (ot_trace_check_budget(tr, budget) != OT_OK) failf(r, "trace over budget: %s", ot_last_error());
  ot_trace_summary s = ot_trace_summarize(tr);
  /* the check must be able to fail */
  if (s.peak_device_bytes > 0 && ot_trace_check_budget(tr, s.peak_device_bytes - 1) == OT_OK)
    failf(r, "the trace check passes a budget below the peak (%llu bytes)", (unsigned long long)s.peak_device_bytes);
  if (s.kernels != n_ops) failf(r, "%d kernels ran, the program has %d ops", s.kernels, n_ops);
  if (must_evict && s.evictions < 1) failf(r, "nothing was evicted under the minimum budget %llu", (unsigned long long)budget);
}

static void run_once(report *r, const oc_row *row, build *b, ot_strategy strat, uint64_t budget, int must_evict,
                     ot_usm_placement pl) {
  oc_case *c = &b->c;
  for (int k = 0; k < c->n; k++) restore(&b->raw[k]);
  for (int k = 0; k < 3; k++) restore(&b->fraw[k]);
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = strat;
  o.budget_bytes = budget;
  o.usm_placement = pl;
  ot_plan *plan = NULL;
  ot_trace *tr = NULL;
  OC_OK(ot_trace_create(&tr));
  if (ot_sched_plan(c->ctx, c->p, &o, &plan) != OT_OK) {
    failf(r, "plan: %s", ot_last_error());
  } else if (ot_sched_run(plan, tr) != OT_OK) {
    failf(r, "run: %s", ot_last_error());
  } else {
    check_trace(r, tr, budget, ot_program_num_ops(c->p), must_evict);
    for (int k = 0; k < c->n; k++) {
      if (c->role[k] == OC_OUT || c->role[k] == OC_ACC) check_values(r, row, c, k);
      if (c->role[k] == OC_RO) check_unchanged(r, &b->raw[k], ot_tensor_name(c->t[k]));
      if (c->parent[k]) check_guards(r, &b->raw[k], c->t[k]);
    }
    check_filler(r, b);
  }
  ot_plan_destroy(plan);
  ot_trace_destroy(tr);
}

int oc_run_row_on(const oc_row *row, ot_backend be, int guard, char *msg, size_t msg_size) {
  report r = {0, msg, msg_size, ""};
  if (msg && msg_size) msg[0] = 0;
  ot_ctx *ctx = ot_test_ctx(be);
  build b;
  make_build(&b, row, ctx, guard);
  /* usm: every op's kernels on copies streamed through the minimum budget
   * (which must evict, as with map) and reading its read-only tensors in
   * place (remote: nothing to evict) */
  static const ot_usm_placement usm_pl[] = {OT_USM_STREAMED, OT_USM_REMOTE};
  const int n_pl = be == OT_BACKEND_USM ? 2 : 1;
  for (int q = 0; q < n_pl; q++)
    for (int s = OT_STRATEGY_MINIMAL; s < OT_STRATEGY_COUNT; s++) {
      const ot_usm_placement pl = be == OT_BACKEND_USM ? usm_pl[q] : OT_USM_AUTO;
      uint64_t budget = b.budget + (guard ? OT_SCHED_ALIGN : 0);
      snprintf(r.where, sizeof r.where, "%s on %s%s%s, %s, budget %llu%s", row->name, ot_backend_name(be),
               be == OT_BACKEND_USM ? " " : "", be == OT_BACKEND_USM ? ot_usm_placement_name(pl) : "",
               ot_strategy_name((ot_strategy)s), (unsigned long long)budget, guard ? ", guarded views" : "");
      run_once(&r, row, &b, (ot_strategy)s, budget, !guard && pl != OT_USM_REMOTE, pl);
    }
  free_build(&b);
  ot_ctx_destroy(ctx);
  return r.fails;
}

int oc_run_row(const oc_row *row, char *msg, size_t msg_size) {
  ot_backend be[3];
  int nb = ot_test_backends(be), fails = 0;
  for (int i = 0; i < nb; i++)
    for (int guard = 0; guard < 2; guard++) {
      char m[600];
      int f = oc_run_row_on(row, be[i], guard, m, sizeof m);
      if (f && !fails && msg) snprintf(msg, msg_size, "%s", m);
      fails += f;
    }
  return fails;
}

int oc_row_op_kinds(const oc_row *row, char (*kinds)[48], int max) {
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_HOST);
  oc_case c = {.ctx = ctx, .arg = row->arg, .rng = seed_of(row->name)};
  OC_OK(ot_program_create(ctx, &c.p));
  row->build(&c);
  int n = 0;
  for (int i = 0; i < ot_program_num_ops(c.p) && n < max; i++) {
    const char *name = ot_program_op_name(c.p, i);
    size_t len = strcspn(name, "(");
    snprintf(kinds[n++], 48, "%.*s", (int)(len < 47 ? len : 47), name);
  }
  free_case(&c);
  ot_ctx_destroy(ctx);
  return n;
}
