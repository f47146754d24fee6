/* test_fault_model.c — OMPTENSOR_FAULT on the path a user runs: load the
 * llama_gqa reference model (samples' ot_model_load) and generate under a
 * budget that forces offloading, with the N-th pinned allocation, device
 * allocation or transfer failing. Each failure is a status with a message;
 * the model (after a failed generate) generates again with the clean
 * result; everything is destroyed without leaks (asan preset). The same
 * for a batched job (ot_generate_batch: prompt steps, refills, decode). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fault.h"
#include "omptensor/models.h"
#include "ot_test.h"

#define NEW_TOKENS 3

static const int32_t prompt[] = {1, 5, 9, 2, 7};
#define NP ((int)(sizeof prompt / sizeof prompt[0]))

static char *model_dir(void) {
  const char *d = getenv("OT_TEST_DATA");
  assert_non_null(d);
  size_t n = strlen(d) + 32;
  char *p = malloc(n);
  snprintf(p, n, "%s/models/llama_gqa", d);
  return p;
}

/* Generates NEW_TOKENS under the model's smallest budget, ops placed by `compute`. */
static ot_status generate_on(ot_lm *m, int32_t *tokens, ot_compute compute) {
  ot_gen_opts g = ot_gen_opts_default();
  g.max_new_tokens = NEW_TOKENS;
  g.n_eos = 0;
  g.sched.strategy = OT_STRATEGY_BALANCED;
  g.sched.compute = compute;
  ot_status s = ot_lm_min_budget(m, NP, 0, &g.sched.budget_bytes);
  if (s != OT_OK) return s;
  ot_gen_result r;
  s = ot_generate(m, prompt, NP, &g, &r);
  if (s == OT_OK) {
    assert_int_equal(r.n_tokens, NEW_TOKENS);
    memcpy(tokens, r.tokens, NEW_TOKENS * sizeof *tokens);
    ot_gen_result_free(&r);
  }
  return s;
}

static ot_status generate(ot_lm *m, int32_t *tokens) { return generate_on(m, tokens, OT_COMPUTE_AUTO); }

/* The N-th pinned allocation of the load fails, for N spread over all. */
static void load_fails(void **state) {
  (void)state;
  char *dir = model_dir();
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  OT_ASSERT_OK(ot_fault_configure("pinned_alloc:4000000000"));
  ot_lm *m;
  OT_ASSERT_OK(ot_model_load(ctx, dir, OT_DTYPE_KEEP, NULL, NULL, &m));
  unsigned long k = ot_fault_count(OT_FAULT_PINNED_ALLOC);
  ot_lm_destroy(m);
#ifdef OT_OFFLOAD
  assert_true(k >= 10); /* one per weight at least */
#endif
  unsigned long ns[] = {1, 2, 3, k / 2, k - 1, k};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    if (ns[i] < 1 || ns[i] > k) continue;
    char spec[32];
    snprintf(spec, sizeof spec, "pinned_alloc:%lu", ns[i]);
    OT_ASSERT_OK(ot_fault_configure(spec));
    ot_status s = ot_model_load(ctx, dir, OT_DTYPE_KEEP, NULL, NULL, &m);
    if (s != OT_ERR_OUT_OF_MEMORY) fail_msg("%s: load gave %s (%s)", spec, ot_status_str(s), ot_last_error());
    if (!strstr(ot_last_error(), "OMPTENSOR_FAULT") || !strstr(ot_last_error(), "pinned"))
      fail_msg("%s: message '%s'", spec, ot_last_error());
  }
  OT_ASSERT_OK(ot_fault_configure(NULL));
  ot_ctx_destroy(ctx);
  free(dir);
}

/* Issue 43: hybrid compute measures the host's rates and a small copy's
 * latency once per process, each in a device buffer of its own; a refused
 * allocation there was dropped (the defaults taken, the message left set)
 * and generation went on. It is the generation's failure, and the model
 * then generates with the measurement made. Run before any other hybrid
 * plan of the process (the measurement is cached once it succeeds). */
static void hybrid_measurement_fails(void **state) {
  (void)state;
#ifdef OT_OFFLOAD
  char *dir = model_dir();
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_MAP);
  ot_lm *m;
  OT_ASSERT_OK(ot_model_load(ctx, dir, OT_DTYPE_KEEP, NULL, NULL, &m));
  int32_t want[NEW_TOKENS], got[NEW_TOKENS];
  OT_ASSERT_OK(generate(m, want));
  OT_ASSERT_OK(ot_fault_configure("device_alloc:1"));
  ot_clear_error();
  ot_status s = generate_on(m, got, OT_COMPUTE_HYBRID);
  if (s != OT_ERR_DEVICE_OOM) fail_msg("device_alloc:1, compute hybrid: generate gave %s (%s)", ot_status_str(s),
                                       ot_last_error());
  if (!strstr(ot_last_error(), "OMPTENSOR_FAULT")) fail_msg("message '%s'", ot_last_error());
  OT_ASSERT_OK(ot_fault_configure(NULL));
  OT_ASSERT_OK(generate_on(m, got, OT_COMPUTE_HYBRID));
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
  free(dir);
#else
  skip(); /* no device: no hybrid compute */
#endif
}

/* Device allocations and transfers of a generate fail; the same model then
 * generates the clean tokens. */
static void generate_fails(void **state) {
  (void)state;
  char *dir = model_dir();
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  ot_lm *m;
  OT_ASSERT_OK(ot_model_load(ctx, dir, OT_DTYPE_KEEP, NULL, NULL, &m));
  int32_t want[NEW_TOKENS], got[NEW_TOKENS];
  /* counted on the second run: the first may also pay what a process
   * measures once (on a GPU, hybrid compute's rates: a device buffer each),
   * which the runs below do not repeat, so its count would name
   * allocations that never come (issue 43: "device_alloc:3" then hit
   * nothing on the H200, and the test saw the last failure's message) */
  OT_ASSERT_OK(generate(m, want));
  OT_ASSERT_OK(ot_fault_configure("transfer:4000000000,device_alloc:4000000000"));
  OT_ASSERT_OK(generate(m, want));
  unsigned long nt = ot_fault_count(OT_FAULT_TRANSFER), na = ot_fault_count(OT_FAULT_DEVICE_ALLOC);
#ifdef OT_OFFLOAD
  assert_true(nt > 20);  /* the weights stream under the smallest budget */
  assert_true(na >= 1);  /* the prefill plan's arena (the decode plan takes it over: ot_sched_plan_after) */
#else
  assert_int_equal(nt, 0);
  assert_int_equal(na, 0);
#endif
  char specs[16][48];
  int n_specs = 0;
  for (unsigned long a = 1; a <= na && a <= 3; a++) snprintf(specs[n_specs++], 48, "device_alloc:%lu", a);
  unsigned long ts[] = {1, 2, nt / 7, nt / 3, nt / 2, nt - 1, nt};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
    if (ts[i] >= 1 && ts[i] <= nt) snprintf(specs[n_specs++], 48, "transfer:%lu", ts[i]);
  for (int i = 0; i < n_specs; i++) {
    OT_ASSERT_OK(ot_fault_configure(specs[i]));
    ot_clear_error(); /* a message here is this run's */
    ot_status s = generate(m, got);
    ot_status want_s = strncmp(specs[i], "transfer", 8) == 0 ? OT_ERR_DEVICE : OT_ERR_DEVICE_OOM;
    if (s != want_s) fail_msg("%s: generate gave %s (%s)", specs[i], ot_status_str(s), ot_last_error());
    if (!strstr(ot_last_error(), "OMPTENSOR_FAULT")) fail_msg("%s: message '%s'", specs[i], ot_last_error());
    if (want_s == OT_ERR_DEVICE && !strstr(ot_last_error(), " of '"))
      fail_msg("%s: message '%s' names no tensor", specs[i], ot_last_error());
    OT_ASSERT_OK(ot_fault_configure(NULL));
    OT_ASSERT_OK(generate(m, got));
    assert_memory_equal(got, want, sizeof want);
  }
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
  free(dir);
}

/* A batched job (issue 19: 5 prompts, 2 slots, refills) at its smallest
 * budget; *done: how many sequences on_seq_done saw. */
static ot_status on_done_count(void *u, int seq, const ot_gen_result *r) {
  (void)seq;
  (void)r;
  int *n = u;
  return ++*n == n[1] ? ot_fail(OT_ERR_IO, "on_seq_done refused sequence %d", seq) : OT_OK;
}

static ot_status batch_generate(ot_lm *m, int32_t *tokens, int *done, int fail_at) {
  static const int lens[5] = {5, 2, 4, 1, 3}, news[5] = {3, 1, 2, 3, 2};
  ot_gen_seq q[5];
  for (int i = 0; i < 5; i++) q[i] = (ot_gen_seq){prompt, lens[i], news[i], (uint64_t)i};
  ot_gen_opts g = ot_gen_opts_default();
  g.n_eos = 0;
  int cnt[2] = {0, fail_at};
  g.on_seq_done = on_done_count;
  g.done_user = cnt;
  ot_status s = ot_generate_batch_min_budget(m, q, 5, 2, &g, &g.sched.budget_bytes);
  ot_gen_batch_result r;
  if (s == OT_OK) s = ot_generate_batch(m, q, 5, 2, &g, &r);
  *done = cnt[0];
  if (s != OT_OK) return s;
  for (int i = 0, k = 0; i < 5; k += news[i++]) {
    assert_int_equal(r.seqs[i].n_tokens, news[i]);
    memcpy(tokens + k, r.seqs[i].tokens, (size_t)news[i] * sizeof *tokens);
  }
  ot_gen_batch_result_free(&r);
  return OT_OK;
}

/* Device allocations, transfers and the caller's on_seq_done failing part
 * way through a batched job: a status naming it, nothing left behind, and
 * the next job gives the clean tokens. */
static void batch_generate_fails(void **state) {
  (void)state;
  char *dir = model_dir();
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  ot_lm *m;
  OT_ASSERT_OK(ot_model_load(ctx, dir, OT_DTYPE_KEEP, NULL, NULL, &m));
  int32_t want[11], got[11];
  int done;
  OT_ASSERT_OK(batch_generate(m, want, &done, 0)); /* counted on the second run, as generate_fails */
  OT_ASSERT_OK(ot_fault_configure("transfer:4000000000,device_alloc:4000000000"));
  OT_ASSERT_OK(batch_generate(m, want, &done, 0));
  assert_int_equal(done, 5);
  unsigned long nt = ot_fault_count(OT_FAULT_TRANSFER), na = ot_fault_count(OT_FAULT_DEVICE_ALLOC);
  char specs[16][48];
  int n_specs = 0;
  for (unsigned long a = 1; a <= na && a <= 3; a++) snprintf(specs[n_specs++], 48, "device_alloc:%lu", a);
  unsigned long ts[] = {1, nt / 5, nt / 3, nt / 2, 2 * nt / 3, nt - 1, nt};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
    if (ts[i] >= 1 && ts[i] <= nt) snprintf(specs[n_specs++], 48, "transfer:%lu", ts[i]);
  for (int i = 0; i < n_specs; i++) {
    OT_ASSERT_OK(ot_fault_configure(specs[i]));
    ot_clear_error();
    ot_status s = batch_generate(m, got, &done, 0);
    ot_status want_s = strncmp(specs[i], "transfer", 8) == 0 ? OT_ERR_DEVICE : OT_ERR_DEVICE_OOM;
    if (s != want_s) fail_msg("batch, %s: gave %s (%s)", specs[i], ot_status_str(s), ot_last_error());
    if (!strstr(ot_last_error(), "OMPTENSOR_FAULT")) fail_msg("batch, %s: message '%s'", specs[i], ot_last_error());
    OT_ASSERT_OK(ot_fault_configure(NULL));
    OT_ASSERT_OK(batch_generate(m, got, &done, 0));
    assert_memory_equal(got, want, sizeof want);
  }
  for (int k = 1; k <= 5; k++) { /* the caller stops it after k sequences */
    OT_ASSERT_FAILS(batch_generate(m, got, &done, k), OT_ERR_IO, "on_seq_done refused");
    assert_int_equal(done, k);
  }
  OT_ASSERT_OK(batch_generate(m, got, &done, 0));
  assert_memory_equal(got, want, sizeof want);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(load_fails), cmocka_unit_test(hybrid_measurement_fails),
                                     cmocka_unit_test(generate_fails),
                                     cmocka_unit_test(batch_generate_fails)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
