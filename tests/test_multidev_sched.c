/* test_multidev_sched.c — pipeline plans over 2, 3 and 4 emulated devices
 * (the host-offload plugin: separate memory per device, real copies):
 * random programs give bitwise the results of one device on the same
 * backend, no device holds more than its own budget, every stage's kernels
 * run on its own device; the split follows the budgets; with no offload
 * device (the plain host build) a pipeline is refused with a clear error and
 * OT_SCHED_ALL_DEVICES runs as one stage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "memory/device.h"
#include "sched_support.h"

#define RUNS 3
#define UNLIMITED (1ull << 40)

static const uint64_t seeds[] = {1, 2, 3, 5, 8, 13, 21, 34, 55, 89};

static ot_ctx *make_ctx(ot_backend b, int n_dev, const uint64_t *budgets) {
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = b;
  o.device = 0;
  o.n_devices = n_dev;
  for (int k = 0; budgets && k < n_dev; k++) o.budgets[k] = budgets[k];
  o.budget_bytes = UNLIMITED;
  ot_ctx *ctx = NULL;
  if (ot_ctx_create(&o, &ctx) != OT_OK) fail_msg("%s", ot_last_error());
  return ctx;
}

/* Runs the program of `seed` RUNS times under `plan`'s options; returns the
 * snapshots (RUNS * n floats, malloc'd). Checks the trace when devs given. */
static float *run_seed(ot_ctx *ctx, uint64_t seed, const ot_sched_opts *o, int64_t *n, ot_status *plan_status,
                       int n_dev, const int *devs, const uint64_t *budgets) {
  ts_randprog *rp = NULL;
  assert_int_equal(ts_randprog_create(ctx, seed, &rp), OT_OK);
  *n = ts_randprog_snapshot(rp, NULL);
  ot_plan *plan = NULL;
  *plan_status = ot_sched_plan(ctx, rp->p, o, &plan);
  float *v = NULL;
  if (*plan_status == OT_OK) {
    v = malloc((size_t)(*n * RUNS + 1) * sizeof *v);
    assert_non_null(v);
    ot_trace *tr;
    assert_int_equal(ot_trace_create(&tr), OT_OK);
    for (int r = 0; r < RUNS; r++) {
      ts_randprog_prepare_run(rp, r);
      if (ot_sched_run(plan, tr) != OT_OK) fail_msg("seed %llu run %d: %s", (unsigned long long)seed, r, ot_last_error());
      ts_randprog_snapshot(rp, v + r * *n);
    }
    ot_trace_summary sum = ot_trace_summarize(tr);
    assert_int_equal(sum.runs, RUNS);
    if (devs) {
      if (ot_trace_check_budgets(tr, n_dev, devs, budgets) != OT_OK)
        fail_msg("seed %llu %s: %s", (unsigned long long)seed, ot_strategy_name(o->strategy), ot_last_error());
      /* the stages are on their devices, and kernels ran on each */
      int stages = ot_plan_num_stages(plan);
      assert_int_equal(stages, n_dev);
      int next = 0;
      for (int k = 0; k < stages; k++) {
        ot_plan_stage_info si;
        assert_int_equal(ot_plan_stage(plan, k, &si), OT_OK);
        assert_int_equal(si.first_op, next);
        assert_true(si.n_ops > 0);
        assert_int_equal(si.device, devs[k]);
        next += si.n_ops;
        int kernels = 0;
        for (size_t i = 0; i < ot_trace_count(tr); i++) {
          const ot_trace_event *e = ot_trace_event_at(tr, i);
          if (e->kind != OT_TRACE_KERNEL || e->device != devs[k]) continue;
          kernels++;
          assert_true(e->op < si.n_ops); /* op numbers are the stage's own */
        }
        assert_int_equal(kernels, si.n_ops * RUNS);
      }
      assert_int_equal(next, ot_program_num_ops(rp->p));
    }
    ot_trace_destroy(tr);
    ot_plan_destroy(plan);
  }
  ts_randprog_destroy(rp);
  return v;
}

static void check_n_devices(int n_dev) {
  if (ot_num_devices() < n_dev) skip();
  static const ot_strategy strat[] = {OT_STRATEGY_MINIMAL, OT_STRATEGY_BALANCED, OT_STRATEGY_AGGRESSIVE};
  int devs[4] = {0, 1, 2, 3};
  for (size_t si = 0; si < sizeof seeds / sizeof *seeds; si++) {
    uint64_t seed = seeds[si];
    /* the reference: one device, unlimited, same backend */
    ot_ctx *one = make_ctx(OT_BACKEND_MAP, 1, NULL);
    ot_sched_opts o = ot_sched_opts_default();
    o.strategy = OT_STRATEGY_MINIMAL;
    int64_t n;
    ot_status ps;
    float *ref = run_seed(one, seed, &o, &n, &ps, 0, NULL, NULL);
    assert_int_equal(ps, OT_OK);
    ts_randprog *rp;
    assert_int_equal(ts_randprog_create(one, seed, &rp), OT_OK);
    uint64_t minb;
    assert_int_equal(ot_sched_min_budget(rp->p, &minb, NULL), OT_OK);
    int n_ops = ot_program_num_ops(rp->p);
    ts_randprog_destroy(rp);
    ot_ctx_destroy(one);
    if (n_ops < n_dev) {
      free(ref);
      continue;
    }
    /* budgets: every device at the global minimum (tight everywhere), then
     * uneven ones, then unlimited */
    uint64_t sets[3][4];
    for (int k = 0; k < 4; k++) {
      sets[0][k] = minb;
      sets[1][k] = minb + (uint64_t)k * 3 * minb / 2 + 100;
      sets[2][k] = UNLIMITED;
    }
    for (int b = 0; b < 3; b++) {
      ot_ctx *ctx = make_ctx(OT_BACKEND_MAP, n_dev, sets[b]);
      for (size_t k = 0; k < sizeof strat / sizeof *strat; k++) {
        o.strategy = strat[k];
        o.n_stages = OT_SCHED_ALL_DEVICES;
        int64_t m;
        float *v = run_seed(ctx, seed, &o, &m, &ps, n_dev, devs, sets[b]);
        if (ps != OT_OK) fail_msg("seed %llu, %d devices, budgets %d: %s", (unsigned long long)seed, n_dev, b, ot_last_error());
        assert_int_equal(m, n);
        if (memcmp(v, ref, (size_t)(n * RUNS) * sizeof *v) != 0) {
          int64_t i = 0;
          while (v[i] == ref[i]) i++;
          fail_msg("seed %llu, %d devices, budgets %d, %s: value %lld (run %lld) is %.9g, one device gives %.9g",
                   (unsigned long long)seed, n_dev, b, ot_strategy_name(strat[k]), (long long)i, (long long)(i / n),
                   v[i], ref[i]);
        }
        free(v);
      }
      ot_ctx_destroy(ctx);
    }
    free(ref);
  }
}

static void two_devices(void **state) { (void)state; check_n_devices(2); }
static void three_devices(void **state) { (void)state; check_n_devices(3); }
static void four_devices(void **state) { (void)state; check_n_devices(4); }

/* A chain of 8 layers, each reading its own weight of 4 KiB, the first and
 * the last also the 1 KiB "embedding" E (like tied embeddings: each device
 * that uses it holds a copy). Loads (weights + ops) / budget: with budgets
 * 1:3, cutting after 2 layers gives max(9218, 25606 / 3) = 9218 and after 1
 * or 3 more (9901, 13315); with equal budgets the cut is in the middle. */
typedef struct chain {
  ot_tensor *x, *e, *w[8], *h[8];
  ot_program *p;
} chain;

static void chain_make(ot_ctx *ctx, chain *c) {
  int64_t n = 1024, ne = 256;
  assert_int_equal(ot_program_create(ctx, &c->p), OT_OK);
  assert_int_equal(ot_tensor_create(ctx, "x", OT_F32, 1, &n, &c->x), OT_OK);
  assert_int_equal(ot_tensor_create(ctx, "E", OT_F32, 1, &ne, &c->e), OT_OK);
  ts_fill(c->x, 1);
  ts_fill(c->e, 2);
  for (int l = 0; l < 8; l++) {
    char nm[16];
    snprintf(nm, sizeof nm, "w%d", l);
    assert_int_equal(ot_tensor_create(ctx, nm, OT_F32, 1, &n, &c->w[l]), OT_OK);
    ts_fill(c->w[l], 10 + (uint64_t)l);
    snprintf(nm, sizeof nm, "h%d", l);
    assert_int_equal(ot_tensor_create(ctx, nm, OT_F32, 1, &n, &c->h[l]), OT_OK);
    ot_tensor *in[3] = {l ? c->h[l - 1] : c->x, c->w[l], c->e};
    ts_mix_params prm = {{0.5f, 0.25f, 0.125f}, (float)l, -1};
    assert_int_equal(ts_add_mix(c->p, nm, in, l == 0 || l == 7 ? 3 : 2, &c->h[l], 1, &prm), OT_OK);
  }
  assert_int_equal(ot_program_mark_input(c->p, c->x), OT_OK);
  assert_int_equal(ot_program_mark_output(c->p, c->h[7]), OT_OK);
}

static void chain_free(chain *c) {
  ot_program_destroy(c->p);
  ot_tensor_destroy(c->x);
  ot_tensor_destroy(c->e);
  for (int l = 0; l < 8; l++) ot_tensor_destroy(c->w[l]), ot_tensor_destroy(c->h[l]);
}

static void split_follows_budgets(void **state) {
  (void)state;
  if (ot_num_devices() < 2) skip();
  const uint64_t unit = 1ull << 20;
  uint64_t budgets[2] = {unit, 3 * unit};
  ot_ctx *ctx = make_ctx(OT_BACKEND_MAP, 2, budgets);
  chain c;
  chain_make(ctx, &c);
  ot_sched_opts o = ot_sched_opts_default();
  o.n_stages = 2;
  ot_plan *plan;
  assert_int_equal(ot_sched_plan(ctx, c.p, &o, &plan), OT_OK);
  ot_plan_stage_info a, b;
  assert_int_equal(ot_plan_stage(plan, 0, &a), OT_OK);
  assert_int_equal(ot_plan_stage(plan, 1, &b), OT_OK);
  assert_int_equal(a.n_ops, 2);
  assert_int_equal(b.n_ops, 6);
  assert_int_equal(a.device, 0);
  assert_int_equal(b.device, 1);
  /* E is on both devices */
  assert_int_equal(a.weight_bytes, 2 * 4096 + 1024);
  assert_int_equal(b.weight_bytes, 6 * 4096 + 1024);
  /* the result matches the single-device plan bitwise */
  ot_trace *tr;
  assert_int_equal(ot_trace_create(&tr), OT_OK);
  assert_int_equal(ot_sched_run(plan, tr), OT_OK);
  assert_int_equal(ot_sched_run(plan, tr), OT_OK);
  float got[1024], want[1024];
  memcpy(got, ot_tensor_data(c.h[7]), sizeof got);
  int devs[2] = {0, 1};
  assert_int_equal(ot_trace_check_budgets(tr, 2, devs, budgets), OT_OK);
  /* a device left out of the check is an error, not a pass */
  assert_int_equal(ot_trace_check_budgets(tr, 1, devs, budgets), OT_ERR_STATE);
  ot_plan_destroy(plan);
  o.n_stages = 1;
  assert_int_equal(ot_sched_plan(ctx, c.p, &o, &plan), OT_OK);
  memset(ot_tensor_data(c.h[7]), 0, sizeof want);
  assert_int_equal(ot_sched_run(plan, NULL), OT_OK);
  memcpy(want, ot_tensor_data(c.h[7]), sizeof want);
  assert_memory_equal(got, want, sizeof got);
  ot_plan_destroy(plan);
  ot_trace_destroy(tr);
  chain_free(&c);
  ot_ctx_destroy(ctx);

  /* equal budgets: 4 and 4 */
  budgets[0] = budgets[1] = unit;
  ctx = make_ctx(OT_BACKEND_MAP, 2, budgets);
  chain_make(ctx, &c);
  o.n_stages = 2;
  assert_int_equal(ot_sched_plan(ctx, c.p, &o, &plan), OT_OK);
  assert_int_equal(ot_plan_stage(plan, 0, &a), OT_OK);
  assert_int_equal(a.n_ops, 4);
  ot_plan_destroy(plan);
  chain_free(&c);
  ot_ctx_destroy(ctx);
}

/* One device's budget below every op's working set: no split with two
 * non-empty stages; the error says so. */
static void infeasible_split(void **state) {
  (void)state;
  if (ot_num_devices() < 2) skip();
  uint64_t budgets[2] = {1024, 1ull << 20};
  ot_ctx *ctx = make_ctx(OT_BACKEND_MAP, 2, budgets);
  chain c;
  chain_make(ctx, &c);
  ot_sched_opts o = ot_sched_opts_default();
  o.n_stages = 2;
  ot_plan *plan = (ot_plan *)&plan;
  assert_int_equal(ot_sched_plan(ctx, c.p, &o, &plan), OT_ERR_BUDGET);
  assert_null(plan);
  assert_non_null(strstr(ot_last_error(), "no split of 8 ops over 2 devices"));
  /* more stages than the context has devices */
  o.n_stages = 3;
  assert_int_equal(ot_sched_plan(ctx, c.p, &o, &plan), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "3 pipeline stages"));
  chain_free(&c);
  ot_ctx_destroy(ctx);
}

/* The host backend has one device: a pipeline of 2 is refused, "all devices"
 * is one stage. */
static void host_backend(void **state) {
  (void)state;
  ot_ctx *ctx = make_ctx(OT_BACKEND_HOST, 1, NULL);
  chain c;
  chain_make(ctx, &c);
  ot_sched_opts o = ot_sched_opts_default();
  o.n_stages = 2;
  ot_plan *plan = NULL;
  assert_int_equal(ot_sched_plan(ctx, c.p, &o, &plan), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "host backend has one"));
  o.n_stages = OT_SCHED_ALL_DEVICES;
  assert_int_equal(ot_sched_plan(ctx, c.p, &o, &plan), OT_OK);
  assert_int_equal(ot_plan_num_stages(plan), 1);
  assert_int_equal(ot_sched_run(plan, NULL), OT_OK);
  ot_plan_destroy(plan);
  chain_free(&c);
  ot_ctx_destroy(ctx);
}

/* ---- device-to-device crossings of micro-batched pipelines (ot_stage_copies) ---- */

#define MICRO 4 /* micro-batches in flight the plans are made for */

typedef struct micro_job {
  chain *c;
  float out[8][1024]; /* h7 of each micro-batch */
} micro_job;

static ot_status fill_x(void *user, int m) {
  micro_job *j = user;
  ts_fill(j->c->x, 100 + (uint64_t)m);
  return OT_OK;
}

static ot_status take_h7(void *user, int m) {
  micro_job *j = user;
  memcpy(j->out[m], ot_tensor_data(j->c->h[7]), sizeof j->out[m]);
  return OT_OK;
}

typedef struct peer_run {
  micro_job job;
  ot_plan_stage_info si[3];
  int peer_down[3], peer_up[3]; /* PEER events per device */
  uint64_t bytes_peer, to_host;
  uint64_t first_run_bytes[3]; /* device bytes of each device's first RUN event */
} peer_run;

/* n micro-batches of the chain over n_dev devices, values crossing as `how`
 * says; the plan's status (nothing else done when it fails). */
static ot_status run_micro(int n_dev, const uint64_t *budgets, ot_stage_copies how, int n, peer_run *r) {
  memset(r, 0, sizeof *r);
  ot_ctx *ctx = make_ctx(OT_BACKEND_MAP, n_dev, budgets);
  chain c;
  chain_make(ctx, &c);
  r->job.c = &c;
  ot_sched_opts o = ot_sched_opts_default();
  o.n_stages = n_dev;
  o.micro_batches = MICRO;
  o.stage_copies = how;
  ot_plan *plan = NULL;
  ot_status ps = ot_sched_plan(ctx, c.p, &o, &plan);
  if (ps == OT_OK) {
    ot_trace *tr;
    assert_int_equal(ot_trace_create(&tr), OT_OK);
    for (int k = 0; k < n_dev; k++) assert_int_equal(ot_plan_stage(plan, k, &r->si[k]), OT_OK);
    if (ot_sched_run_micro(plan, n, fill_x, take_h7, &r->job, tr) != OT_OK) fail_msg("%s", ot_last_error());
    int devs[3] = {0, 1, 2};
    if (ot_trace_check_budgets(tr, n_dev, devs, budgets) != OT_OK) fail_msg("%s", ot_last_error());
    int seen[3] = {0};
    for (size_t i = 0; i < ot_trace_count(tr); i++) {
      const ot_trace_event *e = ot_trace_event_at(tr, i);
      if (e->device < 0 || e->device >= n_dev) continue;
      if (e->kind == OT_TRACE_RUN && !seen[e->device]++) r->first_run_bytes[e->device] = e->device_bytes;
      if (!(e->flags & OT_TRACE_PEER)) continue;
      r->peer_down[e->device] += e->kind == OT_TRACE_DOWNLOAD;
      r->peer_up[e->device] += e->kind == OT_TRACE_UPLOAD;
    }
    ot_trace_summary sm = ot_trace_summarize(tr);
    r->bytes_peer = sm.bytes_peer;
    r->to_host = sm.bytes_to_host;
    ot_trace_destroy(tr);
    ot_plan_destroy(plan);
  }
  chain_free(&c);
  ot_ctx_destroy(ctx);
  return ps;
}

/* Each micro-batch's h7 as one device computes it, run by run. */
static void reference(int n, float (*want)[1024]) {
  ot_ctx *ctx = make_ctx(OT_BACKEND_MAP, 1, NULL);
  chain c;
  chain_make(ctx, &c);
  ot_sched_opts o = ot_sched_opts_default();
  ot_plan *plan;
  assert_int_equal(ot_sched_plan(ctx, c.p, &o, &plan), OT_OK);
  for (int m = 0; m < n; m++) {
    ts_fill(c.x, 100 + (uint64_t)m);
    assert_int_equal(ot_sched_run(plan, NULL), OT_OK);
    memcpy(want[m], ot_tensor_data(c.h[7]), sizeof want[m]);
  }
  ot_plan_destroy(plan);
  chain_free(&c);
  ot_ctx_destroy(ctx);
}

/* Values between stages go device to device (peer) or through the host:
 * the same results as one device either way; with peer each boundary's
 * activation (one h, 4 KiB) goes down into the next device's mailbox once
 * per micro-batch and never home, the mailboxes (MICRO x 4 KiB) are counted
 * from the reading device's first RUN on, and the budgets hold with them.
 * 6 micro-batches over 4 slots: a stage waits for its mailbox slot. */
static void peer_copies(void **state) {
  (void)state;
  for (int n_dev = 2; n_dev <= 3; n_dev++) {
    if (ot_num_devices() < n_dev) skip();
    const uint64_t unlimited[3] = {UNLIMITED, UNLIMITED, UNLIMITED};
    for (int n = MICRO; n <= MICRO + 2; n += 2) {
      float want[8][1024];
      reference(n, want);
      peer_run host, peer, aut;
      assert_int_equal(run_micro(n_dev, unlimited, OT_STAGE_COPY_HOST, n, &host), OT_OK);
      assert_int_equal(run_micro(n_dev, unlimited, OT_STAGE_COPY_PEER, n, &peer), OT_OK);
      assert_int_equal(run_micro(n_dev, unlimited, OT_STAGE_COPY_AUTO, n, &aut), OT_OK);
      for (int m = 0; m < n; m++) {
        if (memcmp(host.job.out[m], want[m], sizeof want[m])) fail_msg("host staging, micro-batch %d: not one device's", m);
        if (memcmp(peer.job.out[m], want[m], sizeof want[m])) fail_msg("peer copies, micro-batch %d: not one device's", m);
        if (memcmp(aut.job.out[m], want[m], sizeof want[m])) fail_msg("auto, micro-batch %d: not one device's", m);
      }
      for (int k = 0; k < n_dev; k++) {
        const int reads = k > 0; /* stage k > 0 reads one h from the stage before */
        assert_int_equal(host.si[k].peer_values, 0);
        assert_int_equal(host.si[k].mailbox_bytes, 0);
        assert_int_equal(host.peer_down[k] + host.peer_up[k], 0);
        assert_int_equal(peer.si[k].peer_values, reads);
        assert_int_equal(peer.si[k].mailbox_bytes, reads ? MICRO * 4096 : 0);
        assert_int_equal(aut.si[k].peer_values, reads); /* emulated devices reach each other */
        assert_int_equal(peer.peer_up[k], reads ? n : 0);          /* the mailbox into the arena */
        assert_int_equal(peer.peer_down[k], k < n_dev - 1 ? n : 0); /* into the next device's mailbox */
        /* the first run on a reading device starts with its mailboxes held */
        assert_int_equal(peer.first_run_bytes[k], reads ? MICRO * 4096 : 0);
        assert_int_equal(host.first_run_bytes[k], 0);
      }
      assert_int_equal(peer.bytes_peer, 2 * (uint64_t)n * (n_dev - 1) * 4096); /* down and up per boundary */
      assert_int_equal(host.bytes_peer, 0);
      assert_int_equal(host.to_host - peer.to_host, (uint64_t)n * (n_dev - 1) * 4096);
    }
  }
}

/* A reading device whose budget cannot also hold its mailboxes: peer is
 * refused, saying so; auto takes the host path there (and gives one
 * device's results). A backend that does not copy (host) refuses peer. */
static void peer_refused(void **state) {
  (void)state;
  if (ot_num_devices() < 2) skip();
  const uint64_t budgets[2] = {UNLIMITED, 20 * 1024};
  peer_run r;
  assert_int_equal(run_micro(2, budgets, OT_STAGE_COPY_PEER, MICRO, &r), OT_ERR_UNSUPPORTED);
  if (!strstr(ot_last_error(), "no room for the mailboxes") || !strstr(ot_last_error(), "device 1"))
    fail_msg("the refusal does not say why: %s", ot_last_error());
  assert_int_equal(run_micro(2, budgets, OT_STAGE_COPY_AUTO, MICRO, &r), OT_OK);
  assert_int_equal(r.si[1].peer_values, 0);
  assert_int_equal(r.bytes_peer, 0);
  float want[8][1024];
  reference(MICRO, want);
  for (int m = 0; m < MICRO; m++)
    if (memcmp(r.job.out[m], want[m], sizeof want[m])) fail_msg("auto on the host path, micro-batch %d", m);
  ot_stage_copies c;
  assert_int_equal(ot_stage_copies_parse("peer", &c), OT_OK);
  assert_int_equal(c, OT_STAGE_COPY_PEER);
  assert_int_equal(ot_stage_copies_parse("nvlink", &c), OT_ERR_INVALID_ARG);
  assert_non_null(strstr(ot_last_error(), "auto, host or peer"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(two_devices),      cmocka_unit_test(three_devices),    cmocka_unit_test(four_devices),
      cmocka_unit_test(split_follows_budgets), cmocka_unit_test(infeasible_split), cmocka_unit_test(host_backend),
      cmocka_unit_test(peer_copies),      cmocka_unit_test(peer_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
