/* test_train_gpt2.c — GPT-2 training steps (samples/gpt2_train) against the
 * PyTorch reference in tests/data/train/gpt2_small, as llm.c's test_gpt2.c:
 * step-0 logits, loss and every parameter gradient, the losses of 10 AdamW
 * steps on the same batch and the parameters after them, within the
 * tolerances of tests/data/README.md (the key slice of every c_attn bias has
 * a zero true gradient: only |after - before| <= steps * lr is checked
 * there; wpe rows past T must stay exactly unchanged), on the build's
 * default backend. Then, for every backend this build has, 2 steps under
 * the smallest feasible budget must give bitwise the unlimited run's losses
 * and parameters, within the budget. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_train.h"
#include "omptensor/npy.h"
#include "omptensor/safetensors.h"
#include "ot_test.h"

enum { MAX_BT = 64, MAX_STEPS = 10 };

typedef struct ref {
  int B, T, steps;
  int32_t inputs[MAX_BT], targets[MAX_BT];
  double losses[MAX_STEPS];
  float lr, beta1, beta2, eps, wd;
  char dir[512], model[512];
} ref;

static void read_ref(ref *r) {
  const char *root = getenv("OT_TEST_DATA");
  assert_non_null(root);
  snprintf(r->dir, sizeof r->dir, "%s/train/gpt2_small", root);
  snprintf(r->model, sizeof r->model, "%s/models/gpt2_small", root);
  char p[600];
  snprintf(p, sizeof p, "%s/manifest.json", r->dir);
  json_error_t err;
  json_t *m = json_load_file(p, 0, &err);
  if (!m) fail_msg("%s: %s", p, err.text);
  assert_string_equal(json_string_value(json_object_get(m, "magic")), "omptensor-reference");
  assert_int_equal(json_integer_value(json_object_get(m, "format_version")), 1);
  assert_string_equal(json_string_value(json_object_get(m, "kind")), "train");
  json_t *b = json_object_get(m, "batch");
  r->B = (int)json_integer_value(json_object_get(b, "B"));
  r->T = (int)json_integer_value(json_object_get(b, "T"));
  assert_true(r->B * r->T <= MAX_BT && r->B > 0 && r->T > 0);
  for (int i = 0; i < r->B; i++)
    for (int t = 0; t < r->T; t++) {
      r->inputs[i * r->T + t] = (int32_t)json_integer_value(json_array_get(json_array_get(json_object_get(b, "inputs"), i), t));
      r->targets[i * r->T + t] = (int32_t)json_integer_value(json_array_get(json_array_get(json_object_get(b, "targets"), i), t));
    }
  json_t *ps = json_object_get(json_object_get(m, "loss"), "per_step");
  r->steps = (int)json_array_size(ps);
  assert_true(r->steps > 0 && r->steps <= MAX_STEPS);
  for (int i = 0; i < r->steps; i++) r->losses[i] = json_real_value(json_array_get(ps, i));
  json_t *o = json_object_get(m, "optimizer");
  r->lr = (float)json_real_value(json_object_get(o, "lr"));
  r->beta1 = (float)json_real_value(json_object_get(o, "beta1"));
  r->beta2 = (float)json_real_value(json_object_get(o, "beta2"));
  r->eps = (float)json_real_value(json_object_get(o, "eps"));
  r->wd = (float)json_number_value(json_object_get(o, "weight_decay"));
  assert_int_equal(json_integer_value(json_object_get(o, "steps")), r->steps);
  json_decref(m);
}

static gpt2_trainer *make(ot_ctx *ctx, const ref *r, uint64_t budget) {
  gpt2t_opts o = gpt2t_opts_default();
  o.B = r->B;
  o.T = r->T;
  o.adam.lr = r->lr;
  o.adam.beta1 = r->beta1;
  o.adam.beta2 = r->beta2;
  o.adam.eps = r->eps;
  o.adam.weight_decay = r->wd;
  o.keep_grads = 1;
  o.keep_logits = 1;
  ot_sched_opts so = ot_sched_opts_default();
  so.budget_bytes = budget;
  gpt2_trainer *g;
  OT_ASSERT_OK(gpt2t_create(ctx, r->model, &o, &so, &g));
  return g;
}

static float *read_f32(const ot_tensor *t) {
  int64_t n = ot_tensor_numel(t);
  float *x = malloc((size_t)n * sizeof *x);
  assert_non_null(x);
  OT_ASSERT_OK(ot_tensor_read_f32(t, x, n));
  return x;
}

/* max |a - b| over n values, failing on a non-finite a */
static double max_err(const char *what, const float *a, const float *b, int64_t n, double *bmax) {
  double e = 0, m = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(a[i])) fail_msg("%s: value %lld is %g", what, (long long)i, a[i]);
    e = fmax(e, fabs((double)a[i] - b[i]));
    m = fmax(m, fabs((double)b[i]));
  }
  if (bmax) *bmax = m;
  return e;
}

/* The step-0 logits, loss and gradients. */
static void check_step0(gpt2_trainer *g, const ref *r, float loss) {
  if (fabs(loss - r->losses[0]) > 1e-5) fail_msg("step-0 loss %.7f, reference %.7f", loss, r->losses[0]);
  char p[600];
  snprintf(p, sizeof p, "%s/logits.npy", r->dir);
  ot_npy_array L;
  OT_ASSERT_OK(ot_npy_read(p, &L));
  int64_t n = ot_tensor_numel(gpt2t_logits(g));
  assert_int_equal(L.shape[0] * L.shape[1] * L.shape[2], n);
  float *ours = read_f32(gpt2t_logits(g));
  float lo = INFINITY, hi = -INFINITY;
  const float *ref_l = L.data;
  for (int64_t i = 0; i < n; i++) lo = fminf(lo, ref_l[i]), hi = fmaxf(hi, ref_l[i]);
  double e = max_err("logits", ours, ref_l, n, NULL);
  if (e > 1e-4 * (hi - lo)) fail_msg("logits: max error %.3g > 1e-4 x range %.3g", e, (double)(hi - lo));
  free(ours);
  ot_npy_free(&L);

  snprintf(p, sizeof p, "%s/grads.safetensors", r->dir);
  ot_st_file *f;
  OT_ASSERT_OK(ot_st_open(p, &f));
  assert_int_equal(ot_st_count(f), gpt2t_num_params(g));
  for (int i = 0; i < gpt2t_num_params(g); i++) {
    const char *name = gpt2t_param_name(g, i);
    const ot_st_info *info;
    OT_ASSERT_OK(ot_st_find(f, name, &info));
    const ot_tensor *gt = gpt2t_grad(g, i);
    assert_int_equal(info->numel, ot_tensor_numel(gt));
    float *want = malloc(info->bytes), *got = read_f32(gt);
    assert_non_null(want);
    OT_ASSERT_OK(ot_st_read(f, info, want, info->bytes));
    double gmax, ge = max_err(name, got, want, info->numel, &gmax);
    if (ge > 1e-4 * gmax) fail_msg("gradient of %s: max error %.3g > 1e-4 x max|grad| %.3g", name, ge, gmax);
    free(want);
    free(got);
  }
  ot_st_close(f);
}

/* The parameters after all steps, against params_after and the start. */
static void check_after(gpt2_trainer *g, const ref *r, float *const *before) {
  char p[600];
  snprintf(p, sizeof p, "%s/params_after.safetensors", r->dir);
  ot_st_file *f;
  OT_ASSERT_OK(ot_st_open(p, &f));
  for (int i = 0; i < gpt2t_num_params(g); i++) {
    const char *name = gpt2t_param_name(g, i);
    const ot_st_info *info;
    OT_ASSERT_OK(ot_st_find(f, name, &info));
    int64_t n = info->numel;
    float *want = malloc(info->bytes), *got = read_f32(gpt2t_param(g, i));
    assert_non_null(want);
    OT_ASSERT_OK(ot_st_read(f, info, want, info->bytes));
    int64_t D = info->shape[0] / 3; /* c_attn.bias [3D]: the key slice [D, 2D) */
    int key_bias = strstr(name, "c_attn.bias") != NULL;
    int wpe = !strcmp(name, "transformer.wpe.weight");
    int64_t d = wpe ? info->shape[1] : 0;
    for (int64_t j = 0; j < n; j++) {
      if (!isfinite(got[j])) fail_msg("%s[%lld] is %g after training", name, (long long)j, got[j]);
      if (key_bias && j >= D && j < 2 * D) {
        if (fabsf(got[j] - before[i][j]) > (float)r->steps * r->lr * 1.001f)
          fail_msg("%s[%lld] (key bias) moved %.3g, more than steps x lr", name, (long long)j, got[j] - before[i][j]);
      } else if (wpe && j >= (int64_t)r->T * d) {
        if (got[j] != before[i][j]) fail_msg("wpe row %lld changed without a gradient", (long long)(j / d));
      } else if (fabsf(got[j] - want[j]) > 5e-5f) {
        fail_msg("%s[%lld] after %d steps: %.7f, reference %.7f", name, (long long)j, r->steps, got[j], want[j]);
      }
    }
    free(want);
    free(got);
  }
  ot_st_close(f);
}

/* Runs all steps; returns losses and final parameters (concatenated). */
static float *train(ot_backend be, const ref *r, uint64_t budget, float *losses, int check, int64_t *n_out) {
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = be;
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&co, &ctx));
  gpt2_trainer *g = make(ctx, r, 0);
  if (budget == 1) { /* the smallest feasible budget */
    uint64_t b;
    OT_ASSERT_OK(ot_sched_min_budget(gpt2t_program(g), &b, NULL));
    gpt2t_destroy(g);
    g = make(ctx, r, budget = b);
  }
  int np = gpt2t_num_params(g);
  float **before = calloc((size_t)np, sizeof *before);
  assert_non_null(before);
  for (int i = 0; i < np; i++) before[i] = read_f32(gpt2t_param(g, i));
  ot_trace *tr;
  OT_ASSERT_OK(ot_trace_create(&tr));
  for (int s = 0; s < r->steps; s++) {
    OT_ASSERT_OK(gpt2t_step(g, r->inputs, r->targets, tr, &losses[s]));
    if (check && s == 0) check_step0(g, r, losses[s]);
    if (check && fabs(losses[s] - r->losses[s]) > 1e-4)
      fail_msg("loss before update %d: %.6f, reference %.6f", s, losses[s], r->losses[s]);
  }
  OT_ASSERT_OK(ot_trace_check_budget(tr, budget ? budget : ot_ctx_budget(ctx, 0)));
  if (check) check_after(g, r, before);
  int64_t n = 0;
  for (int i = 0; i < np; i++) n += ot_tensor_numel(gpt2t_param(g, i));
  float *all = malloc((size_t)n * sizeof *all), *q = all;
  assert_non_null(all);
  for (int i = 0; i < np; i++) {
    OT_ASSERT_OK(ot_tensor_read_f32(gpt2t_param(g, i), q, ot_tensor_numel(gpt2t_param(g, i))));
    q += ot_tensor_numel(gpt2t_param(g, i));
    free(before[i]);
  }
  free(before);
  *n_out = n;
  ot_trace_destroy(tr);
  gpt2t_destroy(g);
  ot_ctx_destroy(ctx);
  return all;
}

static void against_pytorch(void **state) {
  (void)state;
  ref r;
  read_ref(&r);
  float losses[MAX_STEPS];
  int64_t n;
  free(train(OT_BACKEND_AUTO, &r, 0, losses, 1, &n));
}

static void budget_is_bitwise(void **state) {
  (void)state;
  ref r;
  read_ref(&r);
  r.steps = 2; /* the second replays the recorded step from the kept state */
  ot_backend bk[3] = {OT_BACKEND_HOST};
  int nb = 1;
#ifdef OT_OFFLOAD
  bk[nb++] = OT_BACKEND_MAP;
  if (ot_test_usm_offloads()) bk[nb++] = OT_BACKEND_USM;
#endif
  for (int b = 0; b < nb; b++) {
    float l0[MAX_STEPS], l1[MAX_STEPS];
    int64_t n0, n1;
    float *p0 = train(bk[b], &r, 0, l0, 0, &n0);
    float *p1 = train(bk[b], &r, 1, l1, 0, &n1);
    assert_int_equal(n0, n1);
    if (memcmp(l0, l1, sizeof(float) * (size_t)r.steps))
      fail_msg("%s: losses under the smallest budget differ from the unlimited run", ot_backend_name(bk[b]));
    if (memcmp(p0, p1, sizeof(float) * (size_t)n0))
      fail_msg("%s: parameters under the smallest budget differ from the unlimited run", ot_backend_name(bk[b]));
    free(p0);
    free(p1);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(against_pytorch),
      cmocka_unit_test(budget_is_bitwise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
