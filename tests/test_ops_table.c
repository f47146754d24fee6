/* test_ops_table.c — every recorded op of ops.h (ot_op_*), as a program run
 * by the scheduler on every backend of the build, against a plain C
 * reference, under budgets that force evictions (issue 13; in the spirit of
 * ggml's test-backend-ops). What one row checks: tests/support/op_table.h.
 *
 * One row per op or variant: name, builder and reference
 * (tests/support/op_table_fwd.c, op_table_train.c), tolerance
 * |got - want| <= atol + rtol * |want| (plus one f16/bf16 unit where the
 * tensor is stored in one), and the builder's arguments.
 *
 * Besides the rows:
 *   - every ot_op_* declared in include/omptensor/ops.h (the names read at
 *     configure time, tests/CMakeLists.txt) is recorded by some row;
 *   - the checks can fail: a reference off by 1e-3 in one element, an op
 *     that leaves an element unwritten, writes its input, or writes outside
 *     its view are each reported. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_table.h"
#include "ops_h_names.h" /* OT_OPS_H_NAMES, generated */
#include "ot_test.h"

#define ROW(name, op, atol, rtol, ...) {name, oc_build_##op, oc_ref_##op, atol, rtol, {__VA_ARGS__}}

static const oc_row rows[] = {
    /* matmul: {w dtype, trans_w, accumulate, M, batch}; K 96, N 70: M 67 and N run past one
     * 64-wide tile; M 1..8 is the GPU's GEMV */
    ROW("matmul", matmul, 5e-5, 5e-5, OT_F32, 1, 0, 67, 0),
    ROW("matmul_nt", matmul, 5e-5, 5e-5, OT_F32, 0, 0, 67, 0),
    ROW("matmul_accumulate", matmul, 5e-5, 5e-5, OT_F32, 1, 1, 67, 0),
    ROW("matmul_batched", matmul, 5e-5, 5e-5, OT_F32, 1, 0, 9, 3),
    ROW("matmul_batched_nt_accumulate", matmul, 5e-5, 5e-5, OT_F32, 0, 1, 9, 3),
    ROW("matmul_gemv", matmul, 5e-5, 5e-5, OT_F32, 1, 0, 1, 0),
    ROW("matmul_f16", matmul, 5e-5, 5e-5, OT_F16, 1, 0, 67, 0),
    ROW("matmul_f16_gemv", matmul, 5e-5, 5e-5, OT_F16, 1, 0, 1, 0),
    ROW("matmul_bf16_m5", matmul, 5e-5, 5e-5, OT_BF16, 1, 0, 5, 0),
    ROW("matmul_bf16", matmul, 5e-5, 5e-5, OT_BF16, 1, 0, 67, 0),
    ROW("matmul_bf16_nt", matmul, 5e-5, 5e-5, OT_BF16, 0, 0, 67, 0),
    ROW("matmul_q8b", matmul, 5e-5, 5e-5, OT_Q8B, 1, 0, 67, 0),
    ROW("matmul_q8b_gemv", matmul, 5e-5, 5e-5, OT_Q8B, 1, 0, 1, 0),
    ROW("matmul_q4b", matmul, 5e-5, 5e-5, OT_Q4B, 1, 0, 67, 0),
    ROW("matmul_q4b_gemv", matmul, 5e-5, 5e-5, OT_Q4B, 1, 0, 1, 0),
    /* fused: {w dtype, M} */
    ROW("matmul_multi", matmul_multi, 5e-5, 5e-5, OT_F32, 5),
    ROW("matmul_multi_bf16", matmul_multi, 5e-5, 5e-5, OT_BF16, 5),
    ROW("matmul_multi_q8b_gemv", matmul_multi, 5e-5, 5e-5, OT_Q8B, 1),
    ROW("matmul_multi_q4b_gemv", matmul_multi, 5e-5, 5e-5, OT_Q4B, 1),
    ROW("matmul_swiglu", matmul_swiglu, 5e-5, 5e-5, OT_F32, 5),
    ROW("matmul_swiglu_bf16_gemv", matmul_swiglu, 5e-5, 5e-5, OT_BF16, 1),
    /* elementwise: {kind, b broadcast over rows, in place} */
    ROW("add", binary, 1e-6, 1e-6, OC_ADD, 0, 0),
    ROW("add_broadcast", binary, 1e-6, 1e-6, OC_ADD, 1, 0),
    ROW("add_in_place", binary, 1e-6, 1e-6, OC_ADD, 0, 1),
    ROW("mul", binary, 1e-6, 1e-6, OC_MUL, 0, 0),
    ROW("mul_broadcast", binary, 1e-6, 1e-6, OC_MUL, 1, 0),
    ROW("mul_broadcast_in_place", binary, 1e-6, 1e-6, OC_MUL, 1, 1),
    /* {kind, in place} */
    ROW("scale", unary, 1e-6, 1e-6, OC_SCALE, 0),
    ROW("scale_in_place", unary, 1e-6, 1e-6, OC_SCALE, 1),
    ROW("gelu", unary, 1e-6, 1e-5, OC_GELU, 0),
    ROW("silu", unary, 1e-6, 1e-5, OC_SILU, 0),
    ROW("silu_in_place", unary, 1e-6, 1e-5, OC_SILU, 1),
    ROW("swiglu", swiglu, 1e-6, 1e-5, 0),
    ROW("rmsnorm", rmsnorm, 2e-6, 1e-5, 0),
    ROW("layernorm", layernorm, 5e-6, 1e-5, 0),
    ROW("rope", rope, 2e-6, 1e-5, 0),
    /* {T, pos} */
    ROW("attention", attention, 2e-6, 1e-5, 3, 2),
    ROW("attention_decode", attention, 2e-6, 1e-5, 1, 5),
    ROW("attention_long", attention, 2e-6, 1e-5, 3, 70),
    ROW("rope_attention", rope_attention, 2e-6, 1e-5, 3, 2),
    ROW("rope_attention_decode", rope_attention, 2e-6, 1e-5, 1, 7),
    /* {T, pos, window} */
    ROW("rope_attention_window", rope_attention, 2e-6, 1e-5, 3, 70, 5),
    ROW("rope_attention_window_decode", rope_attention, 2e-6, 1e-5, 1, 70, 20),
    /* a batch of sequences (issue 19): packed prompt rows, decode rows, padding; windows of none and 3 */
    ROW("rope_attention_rows", rope_attention_rows, 2e-6, 1e-5, 0),
    ROW("rope_attention_rows_window", rope_attention_rows, 2e-6, 1e-5, 3),
    /* {table dtype} */
    ROW("embedding", embedding, 0, 0, OT_F32),
    ROW("embedding_bf16", embedding, 0, 0, OT_BF16),
    ROW("embedding_q8b", embedding, 0, 0, OT_Q8B),
    ROW("embedding_q4b", embedding, 0, 0, OT_Q4B),
    ROW("add_positions", add_positions, 1e-6, 1e-6, 0),
    ROW("argmax", argmax, 0, 0, OT_F32),
    ROW("argmax_bf16", argmax, 0, 0, OT_BF16),
    /* training. cross_entropy: {dlogits in place of logits} */
    ROW("cross_entropy", cross_entropy, 1e-6, 1e-5, 0),
    ROW("cross_entropy_in_place", cross_entropy, 1e-6, 1e-5, 1),
    /* {trans_w, batch, no da, no dw} */
    ROW("matmul_backward", matmul_backward, 1e-5, 1e-5, 1, 0, 0, 0),
    ROW("matmul_backward_nt", matmul_backward, 1e-5, 1e-5, 0, 0, 0, 0),
    ROW("matmul_backward_batched", matmul_backward, 1e-5, 1e-5, 1, 2, 0, 0),
    ROW("matmul_backward_da_only", matmul_backward, 1e-5, 1e-5, 1, 0, 0, 1),
    ROW("matmul_backward_dw_only", matmul_backward, 1e-5, 1e-5, 0, 2, 1, 0),
    ROW("bias_backward", bias_backward, 2e-6, 1e-6, 0),
    /* {kind, dx in place of dy} */
    ROW("gelu_backward", act_backward, 1e-6, 1e-5, OC_GELU, 0),
    ROW("silu_backward", act_backward, 1e-6, 1e-5, OC_SILU, 0),
    ROW("silu_backward_in_place", act_backward, 1e-6, 1e-5, OC_SILU, 1),
    /* {dup in place of dy} */
    ROW("swiglu_backward", swiglu_backward, 1e-6, 1e-5, 0),
    ROW("swiglu_backward_in_place", swiglu_backward, 1e-6, 1e-5, 1),
    /* {no dw/db} */
    ROW("layernorm_backward", layernorm_backward, 1e-5, 1e-5, 0),
    ROW("layernorm_backward_dx_only", layernorm_backward, 1e-5, 1e-5, 1),
    ROW("rmsnorm_backward", rmsnorm_backward, 5e-6, 1e-5, 0),
    ROW("rmsnorm_backward_dx_only", rmsnorm_backward, 5e-6, 1e-5, 1),
    /* {T} */
    ROW("causal_attention", causal_attention, 2e-6, 1e-5, 7),
    ROW("causal_attention_long", causal_attention, 2e-6, 1e-5, 70),
    ROW("causal_attention_train", causal_attention_train, 2e-6, 1e-5, 7, 0),
    ROW("causal_attention_train_batch", causal_attention_train, 2e-6, 1e-5, 37, 3),
    ROW("causal_attention_backward", causal_attention_backward, 2e-6, 1e-5, 7),
    ROW("causal_attention_backward_long", causal_attention_backward, 2e-6, 1e-5, 70),
    ROW("embedding_backward", embedding_backward, 1e-6, 1e-6, 0),
    /* {batch} */
    ROW("positions_backward", positions_backward, 1e-6, 1e-6, 0),
    ROW("positions_backward_batched", positions_backward, 1e-6, 1e-6, 1),
    /* {dtype} */
    ROW("zero", zero, 0, 0, OT_F32),
    ROW("zero_bf16_odd_bytes", zero, 0, 0, OT_BF16),
    /* {grad dtype, bf16 copy, loss scale exponent, skip} */
    ROW("adamw", adamw, 1e-6, 1e-6, OT_F32, 0, 0, 0),
    ROW("adamw_bf16_grad_copy_scaled", adamw, 1e-6, 1e-6, OT_BF16, 1, 2, 0),
    ROW("adamw_skipped", adamw, 0, 0, OT_F32, 1, 0, 1),
    ROW("adamw_multi", adamw_multi, 1e-6, 1e-6, OT_F32, 0, 0, 0),
    ROW("adamw_multi_bf16_grad_copy_scaled", adamw_multi, 1e-6, 1e-6, OT_BF16, 1, 2, 0),
    ROW("adamw_multi_skipped", adamw_multi, 0, 0, OT_F32, 1, 0, 1),
    /* {0 plain, 1 momentum, 2 nesterov} */
    ROW("sgd", sgd, 1e-6, 1e-6, 0),
    ROW("sgd_momentum", sgd, 1e-6, 1e-6, 1),
    ROW("sgd_nesterov", sgd, 1e-6, 1e-6, 2),
    /* {dtype, exponent} */
    ROW("loss_scale", loss_scale, 0, 0, OT_F32, 5),
    ROW("loss_scale_bf16_down", loss_scale, 0, 0, OT_BF16, -3),
    /* {grad dtype} */
    ROW("grad_stats", grad_stats, 1e-5, 1e-5, OT_F32),
    ROW("grad_stats_f16", grad_stats, 1e-5, 1e-5, OT_F16),
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

static void run_row(void **state) {
  const oc_row *row = *state;
  char msg[600];
  int fails = oc_run_row(row, msg, sizeof msg);
  if (fails) fail_msg("%s: %d failed checks; the first: %s", row->name, fails, msg);
}

/* ---- every ot_op_* of ops.h has a row ---------------------------------------------- */

static void every_op_has_a_row(void **state) {
  (void)state;
  /* the names ops.h declares, read from it when the build was configured
   * (tests/CMakeLists.txt): not from a source tree at run time, which a
   * copied build does not have (issue 43: the GPU machine's run failed) */
  static const char *const declared_ops[] = {OT_OPS_H_NAMES};
  const int declared = (int)(sizeof declared_ops / sizeof *declared_ops);
  static char covered[256][48];
  int n_cov = 0;
  for (int r = 0; r < N_ROWS; r++) n_cov += oc_row_op_kinds(&rows[r], covered + n_cov, 256 - n_cov);
  int missing = 0;
  for (int d = 0; d < declared; d++) {
    int found = 0;
    for (int i = 0; i < n_cov && !found; i++) found = !strcmp(covered[i], declared_ops[d]);
    if (!found) print_message("ot_op_%s has no row in the op table\n", declared_ops[d]), missing++;
  }
  assert_true(declared >= 30); /* the parse found the declarations */
  assert_int_equal(missing, 0);
}

/* ---- the checks can fail ------------------------------------------------------------ */

static void ref_scale_off(oc_case *c) {
  oc_ref_unary(c);
  c->w[1][5] += 1e-3f;
}

static void broken_reference_is_caught(void **state) {
  (void)state;
  oc_row bad = ROW("scale, reference off by 1e-3", unary, 1e-6, 1e-6, OC_SCALE, 0);
  bad.ref = ref_scale_off;
  char msg[600];
  oc_quiet = 1;
  assert_true(oc_run_row_on(&bad, OT_BACKEND_HOST, 0, msg, sizeof msg) > 0);
  assert_non_null(strstr(msg, "'y'[5]"));
  assert_true(oc_run_row_on(&bad, ot_test_moving_backend(), 1, msg, sizeof msg) > 0);
  assert_non_null(strstr(msg, "'y'[5]"));
  oc_quiet = 0;
}

/* y = x, with a defect chosen by arg[0]. A host-only op: on the host backend
 * the addresses it is given are the homes. */
enum { COPY_OK, COPY_SKIPS_ONE, COPY_WRITES_INPUT, COPY_WRITES_BEFORE };

static ot_status bad_copy_run(const ot_op_exec *e) {
  int mode = *(const int *)e->params;
  float *x = e->in[0], *y = e->out[0];
  for (int64_t i = 0; i < ot_tensor_numel(e->in_t[0]); i++)
    if (!(mode == COPY_SKIPS_ONE && i == 7)) y[i] = x[i];
  if (mode == COPY_WRITES_INPUT) x[3] += 1.0f;
  if (mode == COPY_WRITES_BEFORE) y[-1] = 0.0f; /* the guard row before the view */
  return OT_OK;
}

static void build_bad_copy(oc_case *c) {
  ot_tensor *x = oc_in(c, "x", OT_F32, OC_SHAPE(64), -1, 1), *y = oc_out(c, "y", OT_F32, OC_SHAPE(64));
  ot_op_desc d = {.name = "bad_copy", .run = bad_copy_run, .n_in = 1, .in = &x, .n_out = 1, .out = &y,
                  .params = &c->arg[0], .params_bytes = sizeof(int)};
  OC_OK(ot_program_add_op(c->p, &d));
}

static void ref_copy(oc_case *c) {
  for (int i = 0; i < 64; i++) c->w[1][i] = c->h[0][i];
}

static void expect(int mode, int guard, const char *needle) {
  oc_row row = {"bad_copy", build_bad_copy, ref_copy, 0, 0, {mode}};
  char msg[600];
  oc_quiet = needle != NULL;
  int fails = oc_run_row_on(&row, OT_BACKEND_HOST, guard, msg, sizeof msg);
  oc_quiet = 0;
  if (!needle) {
    if (fails) fail_msg("a correct copy failed: %s", msg);
    return;
  }
  if (!fails) fail_msg("mode %d: the defect went unnoticed", mode);
  if (!strstr(msg, needle)) fail_msg("mode %d: '%s' does not mention '%s'", mode, msg, needle);
}

static void defects_are_caught(void **state) {
  (void)state;
  expect(COPY_OK, 0, NULL);
  expect(COPY_OK, 1, NULL);
  expect(COPY_SKIPS_ONE, 0, "'y'[7] = nan is not finite");
  expect(COPY_SKIPS_ONE, 1, "'y'[7] = nan is not finite");
  expect(COPY_WRITES_INPUT, 0, "read-only 'x' changed");
  expect(COPY_WRITES_BEFORE, 1, "guard row around 'y'");
}

int main(void) {
  static struct CMUnitTest tests[N_ROWS + 3];
  int n = 0;
  tests[n++] = (struct CMUnitTest){"every_op_has_a_row", every_op_has_a_row, NULL, NULL, NULL};
  tests[n++] = (struct CMUnitTest){"broken_reference_is_caught", broken_reference_is_caught, NULL, NULL, NULL};
  tests[n++] = (struct CMUnitTest){"defects_are_caught", defects_are_caught, NULL, NULL, NULL};
  for (int r = 0; r < N_ROWS; r++) tests[n++] = (struct CMUnitTest){rows[r].name, run_row, NULL, NULL, (void *)&rows[r]};
  return cmocka_run_group_tests_name("ops_table", tests, NULL, NULL);
}
