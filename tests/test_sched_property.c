/* test_sched_property.c — random programs under every budget, strategy and
 * backend give bitwise the same results as with an unlimited budget, never
 * hold more device bytes than the budget (ot_trace_check_budget over the
 * trace of three runs), and every op finds its tensors resident.
 *
 * A case is one (seeded program, budget, strategy, backend). Per seed: nine
 * budgets (the smallest feasible one, +255 and +256 bytes, a third of the
 * way to everything resident, two random ones in between drawn from the
 * seed, everything resident less one byte, everything resident, unlimited)
 * x the four strategies x every backend the build has (host; map and usm
 * with an offload device; usm once per placement: auto, resident, streamed,
 * remote, each also checked for what it promises). Seeds run in order until the cases reach
 * OT_PROPERTY_CASES (default 10000: about 93 seeds on offload-host, 278 on
 * host), so each CI run checks at least 10 000 cases; the first 24 seeds are
 * the ones this test always had.
 *
 *     OT_PROPERTY_CASES=1000000 tests/test_sched_property   # long mode
 *     OT_PROPERTY_SEED=4242 tests/test_sched_property       # replay one seed
 *
 * A failure names its seed, budget, strategy and backend, and the line to
 * replay it. */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "memory/device.h"
#include "sched_support.h"
#include "ot_test.h"

#define RUNS 3
#define UNLIMITED (1ull << 40)
#define N_BUDGETS 9

/* The seeds the test ran before it grew (issue 14); later seeds count up from 29000. */
static const uint64_t first_seeds[] = {1,   2,   3,    5,    8,    13,   21,   34,   55,    89,    144,
                                       233, 377, 610,  987,  1597, 2584, 4181, 6765, 10946, 17711, 28657,
                                       4,   6};
#define N_FIRST (sizeof first_seeds / sizeof *first_seeds)

static uint64_t seed_at(uint64_t i) { return i < N_FIRST ? first_seeds[i] : 29000 + (i - N_FIRST); }

/* The case being checked, for failure messages. */
static struct {
  uint64_t seed, budget;
  const char *strategy, *backend, *placement;
} cur;

#define CASE_FAIL(...) case_fail(__LINE__, __VA_ARGS__)

static void case_fail(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void case_fail(int line, const char *fmt, ...) {
  char what[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  fail_msg("line %d: seed %llu backend %s%s%s strategy %s budget %llu: %s\n  replay: OT_PROPERTY_SEED=%llu %s", line,
           (unsigned long long)cur.seed, cur.backend, cur.placement ? " placement " : "",
           cur.placement ? cur.placement : "", cur.strategy, (unsigned long long)cur.budget, what,
           (unsigned long long)cur.seed, "tests/test_sched_property");
}

typedef struct result {
  float *v;        /* RUNS snapshots */
  int64_t n;       /* floats per snapshot */
  ot_status plan;  /* status of ot_sched_plan */
  ot_plan_stats st;
} result;

static ot_ctx *make_ctx(ot_backend b) {
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = b;
  /* not device 0: nothing may assume it */
  if (b != OT_BACKEND_HOST) o.device = ot_num_devices() > 1 ? 1 : 0;
  ot_ctx *ctx = NULL;
  assert_int_equal(ot_ctx_create(&o, &ctx), OT_OK);
  return ctx;
}

/* Builds the program of `seed` in `ctx`, plans it, runs it RUNS times and
 * checks the trace against the budget. */
/* What a usm placement promises, from the trace of its runs: remote
 * tensors are never uploaded (and some are read in place iff the plan says
 * so); streamed keeps nothing between runs; resident uploads nothing in a
 * replay but the program's inputs. */
static long remote_cases[OT_USM_PLACEMENT_COUNT]; /* cases whose kernels read in place */

static void check_placement(ot_usm_placement pl, const ot_plan_stats *st, const ot_trace *tr) {
  int remote_reads = 0;
  for (size_t i = 0; i < ot_trace_count(tr); i++) {
    const ot_trace_event *e = ot_trace_event_at(tr, i);
    if (e->kind != OT_TRACE_REMOTE) continue;
    remote_reads++;
    for (size_t k = 0; k < ot_trace_count(tr); k++) {
      const ot_trace_event *u = ot_trace_event_at(tr, k);
      if (u->kind == OT_TRACE_UPLOAD && !strcmp(u->name, e->name))
        CASE_FAIL("'%s' is remote (read in place at op #%d) but was uploaded at op #%d", e->name, e->op, u->op);
    }
  }
  if (remote_reads) remote_cases[pl]++;
  if ((remote_reads > 0) != (st->n_remote > 0))
    CASE_FAIL("the plan has %d remote tensors, the trace %d reads in place", st->n_remote, remote_reads);
  if (pl == OT_USM_REMOTE && st->n_remote == 0 && st->n_resident + st->n_streamed == 0)
    CASE_FAIL("placement remote placed nothing");
  if (pl == OT_USM_STREAMED && st->kept_bytes) CASE_FAIL("placement streamed kept %llu bytes between runs",
                                                         (unsigned long long)st->kept_bytes);
  if (pl == OT_USM_RESIDENT && st->n_streamed) CASE_FAIL("placement resident streams %d tensors", st->n_streamed);
  if (pl != OT_USM_AUTO && pl != OT_USM_REMOTE && st->n_remote)
    CASE_FAIL("placement %s made %d tensors remote", ot_usm_placement_name(pl), st->n_remote);
}

static result run_config(ot_ctx *ctx, uint64_t seed, ot_strategy strat, uint64_t budget, ot_usm_placement pl) {
  result res = {0};
  cur.strategy = ot_strategy_name(strat);
  cur.budget = budget;
  ts_randprog *rp = NULL;
  if (ts_randprog_create(ctx, seed, &rp) != OT_OK) CASE_FAIL("cannot build the program: %s", ot_last_error());
  res.n = ts_randprog_snapshot(rp, NULL);
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = strat;
  o.budget_bytes = budget;
  o.usm_placement = pl;
  ot_plan *plan = NULL;
  res.plan = ot_sched_plan(ctx, rp->p, &o, &plan);
  if (res.plan == OT_OK) {
    res.st = ot_plan_get_stats(plan, 1);
    res.v = malloc((size_t)(res.n * RUNS + 1) * sizeof(float));
    assert_non_null(res.v);
    ot_trace *tr;
    assert_int_equal(ot_trace_create(&tr), OT_OK);
    for (int r = 0; r < RUNS; r++) {
      ts_randprog_prepare_run(rp, r);
      if (ot_sched_run(plan, tr) != OT_OK) CASE_FAIL("run %d: %s", r, ot_last_error());
      ts_randprog_snapshot(rp, res.v + r * res.n);
    }
    if (ot_trace_check_budget(tr, budget) != OT_OK) CASE_FAIL("budget check: %s", ot_last_error());
    ot_trace_summary sum = ot_trace_summarize(tr);
    if (sum.peak_device_bytes > budget)
      CASE_FAIL("peak %llu device bytes", (unsigned long long)sum.peak_device_bytes);
    if (sum.runs != RUNS) CASE_FAIL("the trace has %d runs, want %d", sum.runs, RUNS);
    if (ot_ctx_backend(ctx) == OT_BACKEND_USM) check_placement(pl, &res.st, tr);
    ot_trace_destroy(tr);
    ot_plan_destroy(plan);
  }
  ts_randprog_destroy(rp);
  return res;
}

/* Everything the program keeps resident (strategy none, unlimited budget,
 * under placement pl: remote tensors take nothing). */
static uint64_t total_bytes(ot_ctx *ctx, uint64_t seed, uint64_t *min_budget, ot_usm_placement pl) {
  ts_randprog *rp;
  assert_int_equal(ts_randprog_create(ctx, seed, &rp), OT_OK);
  assert_int_equal(ot_sched_min_budget(rp->p, min_budget, NULL), OT_OK);
  /* strategy none with an unlimited budget reports what it keeps */
  ot_sched_opts o = ot_sched_opts_default();
  o.strategy = OT_STRATEGY_NONE;
  o.budget_bytes = UNLIMITED;
  o.usm_placement = pl;
  ot_plan *plan;
  assert_int_equal(ot_sched_plan(ctx, rp->p, &o, &plan), OT_OK);
  uint64_t tot = ot_plan_get_stats(plan, 0).peak_bytes;
  ot_plan_destroy(plan);
  ts_randprog_destroy(rp);
  return tot;
}

/* Every budget, strategy of `seed` on the backend of ctx, against the
 * unlimited run there (bitwise) and the host backend's (within a tolerance:
 * another compilation of the kernel). Returns the number of cases. */
static long check_backend(ot_ctx *ctx, ot_backend b, const result *host_ref, uint64_t seed, ot_usm_placement pl) {
  cur.seed = seed;
  cur.backend = ot_backend_name(b);
  cur.placement = b == OT_BACKEND_USM ? ot_usm_placement_name(pl) : NULL;
  uint64_t minb, tot = total_bytes(ctx, seed, &minb, OT_USM_AUTO);
  /* remote tensors take no budget: what strategy none needs then */
  uint64_t tot_remote = b == OT_BACKEND_USM ? total_bytes(ctx, seed, &minb, OT_USM_REMOTE) : tot;
  result ref = run_config(ctx, seed, OT_STRATEGY_MINIMAL, UNLIMITED, pl);
  if (ref.plan != OT_OK) CASE_FAIL("%s", ot_last_error());
  if (host_ref) {
    assert_int_equal(ref.n, host_ref->n);
    for (int64_t k = 0; k < ref.n * RUNS; k++)
      if (fabsf(ref.v[k] - host_ref->v[k]) > 1e-5f * (1.0f + fabsf(host_ref->v[k])))
        CASE_FAIL("value %lld is %g, host backend gives %g", (long long)k, ref.v[k], host_ref->v[k]);
  }
  /* two budgets between the smallest and everything, drawn from the seed */
  ts_rng rng = {seed * 0x9E3779B97F4A7C15ull + 12345};
  uint64_t span = tot > minb ? tot - minb : 1;
  uint64_t budgets[N_BUDGETS] = {minb,           minb + 255, minb + 256, minb + (tot - minb) / 3,
                                 minb + ts_rand(&rng) % span, minb + ts_rand(&rng) % span,
                                 tot - 1,        tot,        UNLIMITED};
  long cases = 0;
  for (size_t bi = 0; bi < N_BUDGETS; bi++) {
    int uploads = -1;
    if (budgets[bi] < minb) continue; /* tot - 1 when everything is one block */
    for (int s = 0; s < OT_STRATEGY_COUNT; s++) {
      result r = run_config(ctx, seed, (ot_strategy)s, budgets[bi], pl);
      cases++;
      /* Everything on the device (strategy none, or placement resident
       * with any strategy) needs `tot`, or with every read-only tensor
       * remote `tot_remote`. Placement remote must fit iff the budget
       * holds tot_remote; auto (whose remote tensors are a subset of
       * remote's) must fit from tot on, must not below tot_remote, and may
       * either way in between. */
      const int usm = b == OT_BACKEND_USM;
      const int all_resident = s == OT_STRATEGY_NONE || pl == OT_USM_RESIDENT;
      const uint64_t need = usm && (pl == OT_USM_REMOTE || pl == OT_USM_AUTO) ? tot_remote : tot;
      if (all_resident && budgets[bi] < need) {
        if (r.plan != OT_ERR_BUDGET)
          CASE_FAIL("everything resident under %llu bytes, it takes %llu: got %s, want budget refused",
                    (unsigned long long)budgets[bi], (unsigned long long)need, ot_status_str(r.plan));
        continue;
      }
      if (all_resident && usm && pl == OT_USM_AUTO && budgets[bi] < tot && r.plan == OT_ERR_BUDGET) continue;
      if (r.plan != OT_OK) CASE_FAIL("plan (min budget %llu): %s", (unsigned long long)minb, ot_last_error());
      if (memcmp(r.v, ref.v, (size_t)(ref.n * RUNS) * sizeof(float)) != 0) {
        int64_t k = 0;
        while (r.v[k] == ref.v[k]) k++;
        CASE_FAIL("value %lld (run %lld) is %.9g, unlimited gives %.9g", (long long)k, (long long)(k / ref.n), r.v[k],
                  ref.v[k]);
      }
      /* balanced and aggressive place the same copies (one op ahead) and
       * differ only in when uploads are issued */
      if (s >= OT_STRATEGY_BALANCED) {
        if (uploads < 0) uploads = r.st.uploads;
        if (r.st.uploads != uploads) CASE_FAIL("%d uploads, balanced made %d", r.st.uploads, uploads);
      }
      free(r.v);
    }
  }
  free(ref.v);
  return cases;
}

static long env_long(const char *name, long dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || x < 0) fail_msg("%s=%s: expected a non-negative integer", name, v);
  return x;
}

static void test_random_programs(void **state) {
  (void)state;
  long want = env_long("OT_PROPERTY_CASES", 10000), only = env_long("OT_PROPERTY_SEED", -1);
  ot_backend bk[3];
  int nb = 1;
  bk[0] = OT_BACKEND_HOST;
  if (ot_num_devices() > 0) {
    bk[nb++] = OT_BACKEND_MAP;
    if (ot_test_usm_offloads()) bk[nb++] = OT_BACKEND_USM;
  }
  long per_placement[OT_USM_PLACEMENT_COUNT] = {0};
  ot_ctx *ctx[3];
  for (int b = 0; b < nb; b++) ctx[b] = make_ctx(bk[b]);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long cases = 0, seeds = 0;
  for (uint64_t i = 0; only >= 0 ? seeds < 1 : cases < want; i++, seeds++) {
    uint64_t seed = only >= 0 ? (uint64_t)only : seed_at(i);
    cur.seed = seed;
    cur.backend = "host";
    result host_ref = run_config(ctx[0], seed, OT_STRATEGY_MINIMAL, UNLIMITED, OT_USM_AUTO);
    if (host_ref.plan != OT_OK) CASE_FAIL("%s", ot_last_error());
    for (int b = 0; b < nb; b++)
      for (int pl = 0; pl < (bk[b] == OT_BACKEND_USM ? OT_USM_PLACEMENT_COUNT : 1); pl++) {
        long c = check_backend(ctx[b], bk[b], b ? &host_ref : NULL, seed, (ot_usm_placement)pl);
        cases += c;
        if (bk[b] == OT_BACKEND_USM) per_placement[pl] += c;
      }
    free(host_ref.v);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  for (int b = 0; b < nb; b++) ot_ctx_destroy(ctx[b]);
  print_message("%ld cases (%ld seeds x %d budgets x %d strategies x %d backends) in %.1f s\n", cases, seeds,
                N_BUDGETS, OT_STRATEGY_COUNT, nb, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  if (nb == 3) {
    print_message("usm cases per placement: auto %ld, resident %ld, streamed %ld, remote %ld; with reads in place: "
                  "auto %ld, remote %ld\n", per_placement[0], per_placement[1], per_placement[2], per_placement[3],
                  remote_cases[OT_USM_AUTO], remote_cases[OT_USM_REMOTE]);
    /* the placements were exercised, not only planned around */
    if (only < 0) assert_true(remote_cases[OT_USM_AUTO] > 0 && remote_cases[OT_USM_REMOTE] > 0);
  }
  if (only < 0) assert_true(cases >= want);
}

int main(void) {
  /* One OpenMP thread: a kernel here is at most a few thousand floats, so a
   * team's start and barriers cost more than its work (on the host preset,
   * on a loaded 2-core machine: 26 s instead of 2.3 s). Every value is
   * computed alone, so the numbers do not depend on it; the transfer
   * threads, which the executor's waits are about, are not OpenMP's. This
   * sets the host's; the emulated device's threads follow OMP_NUM_THREADS,
   * which CTest sets to 1 for this test (tests/CMakeLists.txt). */
  omp_set_num_threads(1);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_random_programs)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
