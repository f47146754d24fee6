/* test_train_ops.c — the training ops of ops.h as recorded ops:
 *   - a small Llama-style block (two Linear, SwiGLU, RMSNorm, a Linear head,
 *     cross-entropy) recorded with its backward written out op by op: every
 *     parameter gradient against central finite differences of the loss;
 *   - SGD applies exactly p - lr * g, AdamW's step number is read at run time;
 *   - wrong shapes, aliasing and bad arguments are refused at recording with
 *     messages naming the op and the tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ot_test.h"
#include "omptensor/ops.h"

enum { R = 4, IN = 5, HID = 6, NC = 3, NPAR = 4 };

typedef struct block {
  ot_ctx *ctx;
  ot_program *p;
  ot_plan *plan;
  ot_tensor *t[32];
  int n;
  ot_tensor *x, *y, *loss, *par[NPAR], *grad[NPAR];
} block;

static ot_tensor *mk(block *b, const char *name, ot_dtype dt, int nd, int64_t d0, int64_t d1, uint64_t seed) {
  int64_t s[2] = {d0, d1};
  ot_tensor *t;
  OT_ASSERT_OK(ot_tensor_create(b->ctx, name, dt, nd, s, &t));
  b->t[b->n++] = t;
  if (seed && dt == OT_F32) {
    int64_t n = ot_tensor_numel(t);
    float *v = malloc((size_t)n * sizeof *v);
    ot_test_fill_uniform(v, n, seed, -1.0f, 1.0f);
    OT_ASSERT_OK(ot_tensor_write_f32(t, v, n));
    free(v);
  }
  return t;
}

/* gate = x Wg^T, up = x Wu^T, s = swiglu, y = rmsnorm(s) w, logits = y Wo^T, CE. */
static void build(block *b) {
  memset(b, 0, sizeof *b);
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = OT_BACKEND_HOST;
  OT_ASSERT_OK(ot_ctx_create(&o, &b->ctx));
  OT_ASSERT_OK(ot_program_create(b->ctx, &b->p));
  ot_program *p = b->p;
  b->x = mk(b, "x", OT_F32, 2, R, IN, 1);
  b->y = mk(b, "targets", OT_I32, 1, R, 1, 0);
  int32_t *y = ot_tensor_data(b->y);
  for (int i = 0; i < R; i++) y[i] = (i * 2 + 1) % NC;
  ot_tensor *Wg = b->par[0] = mk(b, "Wg", OT_F32, 2, HID, IN, 2);
  ot_tensor *Wu = b->par[1] = mk(b, "Wu", OT_F32, 2, HID, IN, 3);
  ot_tensor *rw = b->par[2] = mk(b, "rms_w", OT_F32, 1, HID, 1, 4);
  ot_tensor *Wo = b->par[3] = mk(b, "Wo", OT_F32, 2, NC, HID, 5);
  for (int i = 0; i < NPAR; i++) {
    char n[32];
    snprintf(n, sizeof n, "grad.%d", i);
    b->grad[i] = mk(b, n, OT_F32, ot_tensor_ndim(b->par[i]), ot_tensor_dim(b->par[i], 0), ot_tensor_dim(b->par[i], 1), 0);
  }
  ot_tensor *gate = mk(b, "gate", OT_F32, 2, R, HID, 0), *up = mk(b, "up", OT_F32, 2, R, HID, 0);
  ot_tensor *s = mk(b, "s", OT_F32, 2, R, HID, 0), *yv = mk(b, "y", OT_F32, 2, R, HID, 0);
  ot_tensor *logits = mk(b, "logits", OT_F32, 2, R, NC, 0), *losses = mk(b, "losses", OT_F32, 1, R, 1, 0);
  b->loss = mk(b, "loss", OT_F32, 1, 1, 1, 0);
  ot_tensor *dy = mk(b, "dy", OT_F32, 2, R, HID, 0), *ds = mk(b, "ds", OT_F32, 2, R, HID, 0);
  ot_tensor *dgate = mk(b, "dgate", OT_F32, 2, R, HID, 0);
  OT_ASSERT_OK(ot_op_matmul(p, gate, b->x, Wg, 1, 0));
  OT_ASSERT_OK(ot_op_matmul(p, up, b->x, Wu, 1, 0));
  OT_ASSERT_OK(ot_op_swiglu(p, s, gate, up));
  OT_ASSERT_OK(ot_op_rmsnorm(p, yv, s, rw, 1e-5f));
  OT_ASSERT_OK(ot_op_matmul(p, logits, yv, Wo, 1, 0));
  /* the logits become their own gradient */
  OT_ASSERT_OK(ot_op_cross_entropy(p, b->loss, losses, logits, logits, b->y, 1.0f));
  for (int i = 0; i < NPAR; i++) OT_ASSERT_OK(ot_op_zero(p, b->grad[i]));
  OT_ASSERT_OK(ot_op_matmul_backward(p, dy, b->grad[3], logits, yv, Wo, 1));
  OT_ASSERT_OK(ot_op_rmsnorm_backward(p, ds, b->grad[2], dy, s, rw, 1e-5f));
  /* dup may overwrite ds: it is not read again */
  OT_ASSERT_OK(ot_op_swiglu_backward(p, dgate, ds, gate, up, ds));
  OT_ASSERT_OK(ot_op_matmul_backward(p, NULL, b->grad[0], dgate, b->x, Wg, 1));
  OT_ASSERT_OK(ot_op_matmul_backward(p, NULL, b->grad[1], ds, b->x, Wu, 1));
  OT_ASSERT_OK(ot_program_mark_output(p, b->loss));
  for (int i = 0; i < NPAR; i++) OT_ASSERT_OK(ot_program_mark_output(p, b->grad[i]));
  ot_sched_opts so = ot_sched_opts_default();
  OT_ASSERT_OK(ot_sched_plan(b->ctx, p, &so, &b->plan));
}

static void destroy(block *b) {
  ot_plan_destroy(b->plan);
  ot_program_destroy(b->p);
  for (int i = b->n - 1; i >= 0; i--) ot_tensor_destroy(b->t[i]);
  ot_ctx_destroy(b->ctx);
}

static double loss_now(block *b) {
  ot_sched_invalidate(b->plan); /* a weight's home changed */
  OT_ASSERT_OK(ot_sched_run(b->plan, NULL));
  return *(const float *)ot_tensor_data(b->loss);
}

static void gradients_match_finite_differences(void **state) {
  (void)state;
  block b;
  build(&b);
  loss_now(&b);
  for (int i = 0; i < NPAR; i++) {
    int64_t n = ot_tensor_numel(b.par[i]);
    float g[64];
    assert_true(n <= 64);
    OT_ASSERT_OK(ot_tensor_read_f32(b.grad[i], g, n));
    float *w = ot_tensor_data(b.par[i]);
    double gmax = 0;
    for (int64_t j = 0; j < n; j++) gmax = fmax(gmax, fabs(g[j]));
    assert_true(gmax > 1e-3); /* a gradient that is all zero would pass trivially */
    for (int64_t j = 0; j < n; j++) {
      /* small enough for the truncation error (the weights are not scaled down, so
       * the loss is curved), large enough for float32 losses */
      const float h = 2e-3f, w0 = w[j];
      w[j] = w0 + h;
      double lp = loss_now(&b);
      w[j] = w0 - h;
      double lm = loss_now(&b);
      w[j] = w0;
      double fd = (lp - lm) / (2.0 * h);
      if (fabs(fd - g[j]) > 2e-3 + 1e-2 * fabs(fd))
        fail_msg("d loss / d %s[%lld]: backward %.6f, finite differences %.6f", ot_tensor_name(b.par[i]),
                 (long long)j, g[j], fd);
    }
  }
  destroy(&b);
}

/* SGD applies p -= lr * g exactly; AdamW reads its step at run time. */
static void optimizers(void **state) {
  (void)state;
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = OT_BACKEND_HOST;
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&o, &ctx));
  int64_t n = 10;
  ot_tensor *p1, *p2, *g, *m, *v;
  OT_ASSERT_OK(ot_tensor_create(ctx, "p1", OT_F32, 1, &n, &p1));
  OT_ASSERT_OK(ot_tensor_create(ctx, "p2", OT_F32, 1, &n, &p2));
  OT_ASSERT_OK(ot_tensor_create(ctx, "g", OT_F32, 1, &n, &g));
  OT_ASSERT_OK(ot_tensor_create(ctx, "m", OT_F32, 1, &n, &m));
  OT_ASSERT_OK(ot_tensor_create(ctx, "v", OT_F32, 1, &n, &v));
  float pv[10], gv[10], out[10];
  ot_test_fill_uniform(pv, n, 7, -1, 1);
  ot_test_fill_uniform(gv, n, 8, -1, 1);
  OT_ASSERT_OK(ot_tensor_write_f32(p1, pv, n));
  OT_ASSERT_OK(ot_tensor_write_f32(p2, pv, n));
  OT_ASSERT_OK(ot_tensor_write_f32(g, gv, n));
  ot_program *p;
  OT_ASSERT_OK(ot_program_create(ctx, &p));
  int slot;
  OT_ASSERT_OK(ot_program_scalar_create(p, "step", &slot));
  ot_sgd_opts so = {.lr = 0.5f, .grad_scale = 1.0f};
  OT_ASSERT_OK(ot_op_sgd(p, p1, g, NULL, NULL, &so));
  ot_adamw_opts ao = ot_adamw_opts_default();
  ao.weight_decay = 0;
  ao.step_slot = slot;
  OT_ASSERT_OK(ot_op_adamw(p, p2, g, m, v, NULL, &ao));
  ot_sched_opts sch = ot_sched_opts_default();
  ot_plan *plan;
  OT_ASSERT_OK(ot_sched_plan(ctx, p, &sch, &plan));
  /* step 0 is refused at run time: Adam counts from 1 */
  OT_ASSERT_FAILS(ot_sched_run(plan, NULL), OT_ERR_INVALID_ARG, "count from 1");
  ot_plan_destroy(plan);
  OT_ASSERT_OK(ot_tensor_write_f32(p1, pv, n));
  OT_ASSERT_OK(ot_sched_plan(ctx, p, &sch, &plan));
  OT_ASSERT_OK(ot_program_set_scalar(p, slot, 1));
  OT_ASSERT_OK(ot_sched_run(plan, NULL));
  OT_ASSERT_OK(ot_tensor_read_f32(p1, out, n));
  for (int i = 0; i < n; i++) assert_true(out[i] == pv[i] - 0.5f * gv[i]);
  /* AdamW's first step moves each weight by lr * sign(g) (m/sqrt(v) = +-1) */
  OT_ASSERT_OK(ot_tensor_read_f32(p2, out, n));
  for (int i = 0; i < n; i++) assert_true(fabsf(out[i] - (pv[i] - 1e-3f * (gv[i] > 0 ? 1.0f : -1.0f))) < 1e-6f);
  ot_plan_destroy(plan);
  ot_program_destroy(p);
  ot_tensor *all[] = {p1, p2, g, m, v};
  for (int i = 0; i < 5; i++) ot_tensor_destroy(all[i]);
  ot_ctx_destroy(ctx);
}

static void recording_errors(void **state) {
  (void)state;
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = OT_BACKEND_HOST;
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&o, &ctx));
  ot_program *p;
  OT_ASSERT_OK(ot_program_create(ctx, &p));
  int64_t s46[2] = {4, 6}, s65[2] = {6, 5}, s45[2] = {4, 5}, s4[1] = {4}, s1[1] = {1}, s6[1] = {6};
  ot_tensor *a, *w, *dout, *bad, *ids, *loss, *x6, *ws;
  OT_ASSERT_OK(ot_tensor_create(ctx, "a", OT_F32, 2, s45, &a));
  OT_ASSERT_OK(ot_tensor_create(ctx, "w", OT_F32, 2, s65, &w));
  OT_ASSERT_OK(ot_tensor_create(ctx, "dout", OT_F32, 2, s46, &dout));
  OT_ASSERT_OK(ot_tensor_create(ctx, "bad", OT_F32, 2, s46, &bad));
  OT_ASSERT_OK(ot_tensor_create(ctx, "ids", OT_F32, 1, s4, &ids));
  OT_ASSERT_OK(ot_tensor_create(ctx, "loss", OT_F32, 1, s1, &loss));
  OT_ASSERT_OK(ot_tensor_create(ctx, "x6", OT_F32, 1, s6, &x6));
  OT_ASSERT_OK(ot_tensor_transpose(w, 0, 1, &ws)); /* not contiguous */
  /* dw must have w's shape */
  OT_ASSERT_FAILS(ot_op_matmul_backward(p, NULL, bad, dout, a, w, 1), OT_ERR_SHAPE, "'bad'");
  OT_ASSERT_FAILS(ot_op_matmul_backward(p, NULL, bad, dout, a, w, 1), OT_ERR_SHAPE, "matmul_backward");
  /* without trans_w, w [6, 5] cannot multiply a [4, 5] */
  OT_ASSERT_FAILS(ot_op_matmul_backward(p, a, NULL, dout, a, w, 0), OT_ERR_SHAPE, "matmul_backward");
  OT_ASSERT_FAILS(ot_op_matmul_backward(p, NULL, NULL, dout, a, w, 1), OT_ERR_INVALID_ARG, "matmul_backward");
  /* targets must be i32 */
  OT_ASSERT_FAILS(ot_op_cross_entropy(p, loss, ids, NULL, dout, ids, 1.0f), OT_ERR_SHAPE, "targets 'ids'");
  OT_ASSERT_FAILS(ot_op_bias_backward(p, loss, dout), OT_ERR_SHAPE, "bias_backward");
  OT_ASSERT_FAILS(ot_op_swiglu_backward(p, dout, bad, dout, bad, bad), OT_ERR_INVALID_ARG, "dgate 'dout'");
  OT_ASSERT_FAILS(ot_op_layernorm_backward(p, dout, NULL, NULL, dout, bad, x6, 1e-5f), OT_ERR_INVALID_ARG,
                  "must not share");
  ot_adamw_opts ao = ot_adamw_opts_default();
  OT_ASSERT_FAILS(ot_op_adamw(p, w, w, w, w, NULL, &ao), OT_ERR_INVALID_ARG, "step_slot");
  ao.step_slot = 0;
  OT_ASSERT_FAILS(ot_op_adamw(p, ws, ws, ws, ws, NULL, &ao), OT_ERR_SHAPE, "contiguous");
  OT_ASSERT_FAILS(ot_op_adamw(p, w, a, w, w, NULL, &ao), OT_ERR_SHAPE, "elements");
  OT_ASSERT_FAILS(ot_op_zero(p, ws), OT_ERR_SHAPE, "zero");
  ot_sgd_opts so = {.lr = 0.1f, .momentum = 0.9f};
  OT_ASSERT_FAILS(ot_op_sgd(p, w, w, NULL, NULL, &so), OT_ERR_INVALID_ARG, "momentum buffer");
  OT_ASSERT_FAILS(ot_op_causal_attention(p, dout, dout, dout, dout), OT_ERR_SHAPE, "causal_attention");
  assert_int_equal(ot_program_num_ops(p), 0); /* nothing was recorded */
  ot_program_destroy(p);
  ot_tensor *all[] = {ws, a, w, dout, bad, ids, loss, x6};
  for (int i = 0; i < 8; i++) ot_tensor_destroy(all[i]);
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gradients_match_finite_differences),
      cmocka_unit_test(optimizers),
      cmocka_unit_test(recording_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
