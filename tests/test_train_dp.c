/* test_train_dp.c — the GPT-2 trainer's data-parallel gradient reduction
 * (src/train/dp.h) on one process (ot_comm_self), in every build: the
 * library's side of what test_cli_mpi checks over MPI ranks.
 *   - allreduce on one rank is the plain trainer bitwise (in-place
 *     accumulation, a sum over one rank), through host staging and through
 *     the device memory where MPI may read it (the host's own; skipped by
 *     name on a GPU, whose memory one process's comm cannot read);
 *   - ordered (each micro-batch's gradient from zero, summed in order): the
 *     plain trainer's losses and gradients within fp32 rounding (not equal:
 *     other additions), and bitwise itself under the smallest budget that
 *     fits, with every layer checkpointed and with the optimizer on the
 *     host (a hybrid plan whose waits run on the host: bitwise the device
 *     optimizer where the device runs the host's code, close to it on a
 *     GPU, and bitwise itself with every layer checkpointed);
 *   - a trainer that only plans records the reduction's ops and runs none;
 *     bad modes are refused by name.
 * Under ASan (the asan preset) the staging memory and the comm thread are
 * checked for leaks and races with the plan's frees. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/kcommon.h"
#include "omptensor/gpt2_train.h"
#include "omptensor/omptensor.h"
#include "ot_testio.h"

enum { B = 2, T = 8, ACC = 3, STEPS = 3 };

static char model[4096];

typedef struct run_out {
  float loss[STEPS];
  float *params, *grads; /* all parameters, then the last step's gradients, concatenated */
  int64_t n;
} run_out;

static void tokens(int step, int32_t *in, int32_t *tg) {
  for (int i = 0; i < ACC * B * T; i++) {
    const int x = (step * 131 + i * 7 + i / T) % 61;
    in[i] = x;
    tg[i] = (x * 5 + 1) % 61;
  }
}

static run_out train(ot_grad_reduce mode, int direct, uint64_t budget, ot_recompute ck, int cpu_opt) {
  ot_ctx_opts co = ot_ctx_opts_default();
  co.budget_bytes = budget;
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&co, &ctx));
  ot_gpt2_train_opts o = ot_gpt2_train_opts_default();
  o.B = B, o.T = T, o.accum = ACC, o.keep_grads = 1, o.checkpoint = ck, o.cpu_optimizer = cpu_opt;
  o.grad_reduce = mode, o.grad_direct = direct;
  ot_sched_opts so = ot_sched_opts_default();
  ot_gpt2_trainer *g;
  OT_ASSERT_OK(ot_gpt2_train_create(ctx, model, &o, &so, &g));
  run_out r = {0};
  int32_t in[ACC * B * T], tg[ACC * B * T];
  for (int s = 0; s < STEPS; s++) {
    tokens(s, in, tg);
    OT_ASSERT_OK(ot_gpt2_train_step(g, in, tg, NULL, &r.loss[s]));
  }
  OT_ASSERT_OK(ot_gpt2_train_sync(g));
  for (int i = 0; i < ot_gpt2_train_num_params(g); i++) r.n += ot_tensor_numel(ot_gpt2_train_param(g, i));
  r.params = malloc((size_t)r.n * sizeof *r.params);
  r.grads = malloc((size_t)r.n * sizeof *r.grads);
  assert_non_null(r.params);
  assert_non_null(r.grads);
  int64_t at = 0;
  for (int i = 0; i < ot_gpt2_train_num_params(g); i++) {
    const ot_tensor *p = ot_gpt2_train_param(g, i), *d = ot_gpt2_train_grad(g, i);
    memcpy(r.params + at, ot_tensor_data(p), ot_tensor_nbytes(p));
    memcpy(r.grads + at, ot_tensor_data(d), ot_tensor_nbytes(d));
    at += ot_tensor_numel(p);
  }
  ot_gpt2_train_destroy(g);
  ot_ctx_destroy(ctx);
  return r;
}

static void run_free(run_out *r) {
  free(r->params);
  free(r->grads);
}

static void expect_bitwise(const char *what, const run_out *a, const run_out *b) {
  assert_int_equal(a->n, b->n);
  for (int s = 0; s < STEPS; s++)
    if (memcmp(&a->loss[s], &b->loss[s], sizeof a->loss[s]))
      fail_msg("%s: step %d loss %.9g against %.9g", what, s + 1, (double)a->loss[s], (double)b->loss[s]);
  if (memcmp(a->params, b->params, (size_t)a->n * sizeof *a->params)) fail_msg("%s: the parameters differ", what);
  if (memcmp(a->grads, b->grads, (size_t)a->n * sizeof *a->grads)) fail_msg("%s: the gradients differ", what);
}

/* Whether the default context's first device keeps its memory in the
 * host's (the host backend, the host-offload plugin's emulated devices):
 * then any MPI may read it, and the device's kernels are the host's code. */
static int device_memory_is_hosts(void) {
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(NULL, &ctx));
  const int yes = ot_kruns_on_host(ot_ctx_device(ctx, 0));
  ot_ctx_destroy(ctx);
  return yes;
}

static void allreduce_is_plain(void **state) {
  (void)state;
  run_out plain = train(OT_GRAD_LOCAL, -1, 0, OT_RECOMPUTE_NONE, 0);
  run_out staged = train(OT_GRAD_ALLREDUCE, 0, 0, OT_RECOMPUTE_NONE, 0);
  expect_bitwise("allreduce, host staging", &staged, &plain);
  run_free(&staged);
  /* grad_direct 1 hands MPI the device memory: on a GPU only a CUDA-aware
   * MPI reads it, which one process's comm is not (the trainer refuses) */
  if (!device_memory_is_hosts()) {
    run_free(&plain);
    print_message("allreduce_is_plain: the device-memory case skipped: device memory is not host memory here, and "
                  "one process's comm is not CUDA-aware (test_cli_mpi covers a CUDA-aware MPI)\n");
    skip();
  }
  run_out direct = train(OT_GRAD_ALLREDUCE, 1, 0, OT_RECOMPUTE_NONE, 0); /* the device memory is the host's here */
  expect_bitwise("allreduce, device memory", &direct, &plain);
  run_free(&plain), run_free(&direct);
}

/* The CPU optimizer's run against the device optimizer's, where the
 * device's AdamW is not the host's code (a GPU: the device compiler
 * contracts a*b+c into FMAs and has its own sqrtf): the losses within
 * rounding; Adam divides by sqrt(v) + eps, so where a gradient is near eps
 * one rounding step moves an update by up to lr: at most 0.1 % of the
 * parameters beyond rounding, none by more than 2 lr a step (as
 * test_train_gpt2's cpu_optimizer, measured on the H200). */
static void expect_close_optimizers(const run_out *cpu, const run_out *dev) {
  assert_int_equal(cpu->n, dev->n);
  const double lr = ot_adamw_opts_default().lr;
  for (int s = 0; s < STEPS; s++)
    if (fabsf(cpu->loss[s] - dev->loss[s]) > 1e-4f)
      fail_msg("cpu optimizer: step %d loss %.7g, device optimizer %.7g", s + 1, (double)cpu->loss[s],
               (double)dev->loss[s]);
  int64_t beyond = 0;
  double worst = 0;
  for (int64_t i = 0; i < cpu->n; i++) {
    const double d = fabs((double)cpu->params[i] - (double)dev->params[i]);
    beyond += d > 1e-5 + 1e-5 * fabs((double)dev->params[i]);
    worst = fmax(worst, d);
  }
  print_message("  cpu vs device optimizer: %lld of %lld parameters beyond rounding, worst |diff| %.3g\n",
                (long long)beyond, (long long)cpu->n, worst);
  if (beyond * 1000 > cpu->n || worst > 2.0 * lr * STEPS + 1e-5)
    fail_msg("cpu optimizer: %lld of %lld parameters beyond rounding of the device optimizer's, worst %.3g",
             (long long)beyond, (long long)cpu->n, worst);
}

static void ordered_is_close_and_bitwise_itself(void **state) {
  (void)state;
  run_out plain = train(OT_GRAD_LOCAL, -1, 0, OT_RECOMPUTE_NONE, 0);
  run_out ord = train(OT_GRAD_ORDERED, -1, 0, OT_RECOMPUTE_NONE, 0);
  /* the first step's loss is the same forward; after it, other roundings of the same sums */
  assert_memory_equal(&ord.loss[0], &plain.loss[0], sizeof ord.loss[0]);
  for (int s = 1; s < STEPS; s++) assert_true(fabsf(ord.loss[s] - plain.loss[s]) < 1e-4f);
  double worst = 0, scale = 0;
  size_t differ = 0;
  for (int64_t i = 0; i < ord.n; i++) {
    worst = fmax(worst, fabs((double)ord.grads[i] - (double)plain.grads[i]));
    scale = fmax(scale, fabs((double)plain.grads[i]));
    differ += ord.grads[i] != plain.grads[i];
  }
  if (!(worst <= 1e-5 * scale)) fail_msg("ordered: gradients %g apart (largest gradient %g)", worst, scale);
  assert_true(differ > 0); /* another order of additions, or the same code path by mistake */
  /* bitwise itself whatever the plan does */
  run_out tight = train(OT_GRAD_ORDERED, -1, 1u << 20, OT_RECOMPUTE_AUTO, 0);
  expect_bitwise("ordered at 1 MB", &tight, &ord);
  run_out all = train(OT_GRAD_ORDERED, -1, 0, OT_RECOMPUTE_ALL, 0);
  expect_bitwise("ordered, checkpoint all", &all, &ord);
  run_free(&plain), run_free(&tight), run_free(&all);
  if (strcmp(ot_version_offload(), "none")) { /* the optimizer on the host needs a device apart from it */
    run_out cpu = train(OT_GRAD_ORDERED, -1, 0, OT_RECOMPUTE_NONE, 1);
    /* bitwise the device optimizer where the device runs the host's code;
     * on a GPU close to it (issue 43: not bitwise on the H200), and in
     * either case bitwise itself whatever the plan does */
    expect_close_optimizers(&cpu, &ord);
    if (device_memory_is_hosts()) expect_bitwise("ordered, cpu_optimizer", &cpu, &ord);
    run_out cpu_all = train(OT_GRAD_ORDERED, -1, 0, OT_RECOMPUTE_ALL, 1);
    expect_bitwise("ordered, cpu_optimizer, checkpoint all", &cpu_all, &cpu);
    run_free(&cpu);
    run_free(&cpu_all);
  }
  run_free(&ord);
}

static void plan_only_and_bad_modes(void **state) {
  (void)state;
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(NULL, &ctx));
  ot_gpt2_train_opts o = ot_gpt2_train_opts_default();
  o.B = B, o.T = T, o.accum = ACC, o.grad_reduce = OT_GRAD_ORDERED, o.plan_only = 1;
  ot_gpt2_trainer *g;
  OT_ASSERT_OK(ot_gpt2_train_create(ctx, model, &o, NULL, &g));
  const ot_program *p = ot_gpt2_train_program(g);
  int starts = 0, waits = 0;
  for (int i = 0; i < ot_program_num_ops(p); i++) {
    starts += !strncmp(ot_program_op_name(p, i), "dp_start", 8);
    waits += !strncmp(ot_program_op_name(p, i), "dp_wait", 7);
  }
  const int buckets = (int)ot_gpt2_train_config(g)->num_layers + 3;
  assert_int_equal(starts, buckets * ACC); /* a round per micro-batch */
  assert_int_equal(waits, buckets);
  ot_gpt2_train_destroy(g);
  o.plan_only = 0;
  o.grad_reduce = (ot_grad_reduce)7;
  OT_ASSERT_ERR(ot_gpt2_train_create(ctx, model, &o, NULL, &g), OT_ERR_INVALID_ARG, "grad_reduce 7");
  ot_grad_reduce r;
  OT_ASSERT_ERR(ot_grad_reduce_parse("sideways", &r), OT_ERR_INVALID_ARG, "'sideways'", "ordered");
  OT_ASSERT_OK(ot_grad_reduce_parse("allreduce", &r));
  assert_int_equal(r, OT_GRAD_ALLREDUCE);
  ot_ctx_destroy(ctx);
}

/* ot_comm_self: rank 0 of 1, its collectives copies. */
static void comm_self(void **state) {
  (void)state;
  ot_comm *c;
  OT_ASSERT_OK(ot_comm_self(&c));
  assert_int_equal(ot_comm_size(c), 1);
  assert_int_equal(ot_comm_rank(c), 0);
  float a[5] = {1, 2, 3, 4, 5}, b[5] = {0};
  OT_ASSERT_OK(ot_comm_exchange(c, a, 5, b));
  assert_memory_equal(a, b, sizeof a);
  OT_ASSERT_OK(ot_comm_allreduce_f32(c, a, 5));
  assert_true(a[4] == 5.0f);
  OT_ASSERT_ERR(ot_comm_send(c, 1, 0, a, 4), OT_ERR_STATE, "one process");
  ot_comm_destroy(c);
  if (!ot_comm_mpi_built()) /* the world without MPI says how to get it */
    OT_ASSERT_ERR(ot_comm_world(&c), OT_ERR_UNSUPPORTED, "OT_MPI=OFF", "-DOT_MPI=ON");
}

int main(void) {
  const char *data = getenv("OT_TEST_DATA");
  if (!data) return fprintf(stderr, "OT_TEST_DATA is not set\n"), 1;
  snprintf(model, sizeof model, "%s/models/gpt2_small", data);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(allreduce_is_plain),
      cmocka_unit_test(ordered_is_close_and_bitwise_itself),
      cmocka_unit_test(plan_only_and_bad_modes),
      cmocka_unit_test(comm_self),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
