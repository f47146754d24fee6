/* test_nonfinite.c — issue 14, class 2: logits that hold NaN or Inf were
 * never detected (greedy decoding turns a NaN row into some token id, exit
 * 0). Generation now checks the logits once per step and fails with
 * OT_ERR_NUMERIC naming the step (the prefill, or decode step k) and what
 * to check; the trainer checks its loss once per step the same way.
 * Checkpoints with a NaN or an Inf in one weight are written here from
 * llama_gqa with the safetensors writer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_test.h"
#include "omptensor/gpt2_train.h"
#include "omptensor/models.h"
#include "omptensor/safetensors.h"
#include "ot_test.h"
#include "ot_testio.h"

static char *dir; /* a fresh temporary directory per test (ot_testio.h) */

static int setup(void **state) {
  (void)state;
  dir = ot_tmpdir_create();
  return dir ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  ot_tmpdir_remove(dir);
  dir = NULL;
  return 0;
}

/* dir/NAME: llama_gqa with element `at` of tensor `tensor` set to v. */
static const char *poisoned(const char *name, const char *tensor, int64_t at, float v) {
  static char d[256];
  snprintf(d, sizeof d, "%s/%s", dir, name);
  assert_int_equal(mkdir(d, 0777), 0);
  char *src = ot_test_model_path("llama_gqa", "");
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "cp '%s/config.json' '%s/'", src, d);
  assert_int_equal(system(cmd), 0);
  ot_ckpt *ck;
  OT_ASSERT_OK(ot_ckpt_open(src, &ck));
  int n = ot_ckpt_count(ck), hit = 0;
  ot_st_tensor *ts = calloc((size_t)n, sizeof *ts);
  for (int i = 0; i < n; i++) {
    const ot_st_info *info = ot_ckpt_at(ck, i);
    float *buf = malloc(info->bytes);
    OT_ASSERT_OK(ot_ckpt_read(ck, info, buf, info->bytes));
    assert_int_equal(info->dtype, OT_F32);
    if (!strcmp(info->name, tensor)) buf[at] = v, hit = 1;
    ts[i] = (ot_st_tensor){.name = info->name, .dtype = info->dtype, .ndim = info->ndim, .data = buf};
    memcpy(ts[i].shape, info->shape, sizeof ts[i].shape);
  }
  assert_true(hit);
  char p[512];
  snprintf(p, sizeof p, "%s/model.safetensors", d);
  OT_ASSERT_OK(ot_st_write(p, ts, n, NULL, 0));
  for (int i = 0; i < n; i++) free((void *)ts[i].data);
  free(ts);
  ot_ckpt_close(ck);
  free(src);
  return d;
}

static void expect_numeric(ot_status s, const char *what, const char *n1, const char *n2) {
  if (s != OT_ERR_NUMERIC) fail_msg("%s -> %s, expected OT_ERR_NUMERIC (%s)", what, ot_status_str(s), ot_last_error());
  if (!strstr(ot_last_error(), n1) || !strstr(ot_last_error(), n2))
    fail_msg("%s: message '%s' should mention '%s' and '%s'", what, ot_last_error(), n1, n2);
  printf("  %s: %s\n", what, ot_last_error());
}

static void generate_from(const char *d, int n_new, const char *logits_out, ot_status *s, ot_gen_result *r) {
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  ot_test_manifest mf;
  ot_test_read_manifest("llama_gqa", &mf);
  ot_lm *m;
  OT_ASSERT_OK(ot_model_load(ctx, d, OT_DTYPE_KEEP, NULL, NULL, &m));
  ot_gen_opts o = ot_gen_opts_default();
  o.max_new_tokens = n_new;
  o.logits_out = logits_out;
  *s = ot_generate(m, mf.prompt, mf.n_prompt, &o, r);
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
}

static void test_prefill(void **state) {
  (void)state;
  /* a NaN in the final norm: every logit of every row */
  const char *d = poisoned("norm_nan", "model.norm.weight", 3, NAN);
  ot_status s;
  ot_gen_result r;
  generate_from(d, 4, NULL, &s, &r);
  expect_numeric(s, "prefill, NaN", "the prefill (the prompt of 13 tokens)", "NaN at position 12, token id 0");
  assert_null(r.tokens); /* nothing handed out */
  assert_int_equal(r.n_tokens, 0);
  /* with --logits-out the rows are checked before the file is written */
  char npy[300];
  snprintf(npy, sizeof npy, "%s/logits.npy", dir);
  generate_from(d, 1, npy, &s, &r);
  expect_numeric(s, "prefill, NaN, logits-out", "NaN at position 0", "--dtype f32"); /* every row is checked */
  struct stat st;
  assert_int_not_equal(stat(npy, &st), 0);
  /* +Inf in a weight of the last layer's MLP: the logits overflow */
  d = poisoned("mlp_inf", "model.layers.2.mlp.down_proj.weight", 0, INFINITY);
  generate_from(d, 1, NULL, &s, &r);
  expect_numeric(s, "prefill, Inf", "the prefill", "check the checkpoint's weights");
}

/* The first generated token's embedding row is +Inf: the prompt's logits are
 * finite (a causal model's prompt never sees it), decode step 1 is not. */
static void test_decode(void **state) {
  (void)state;
  ot_test_manifest mf;
  ot_test_read_manifest("llama_gqa", &mf);
  int32_t t1 = mf.gen[0];
  for (int i = 0; i < mf.n_prompt; i++) assert_int_not_equal(mf.prompt[i], t1);
  const char *d = poisoned("embed_inf", "model.embed_tokens.weight", (int64_t)t1 * 64, INFINITY);
  ot_status s;
  ot_gen_result r;
  generate_from(d, 4, NULL, &s, &r);
  expect_numeric(s, "decode", "decode step 1 (position 13)", "NaN");
  /* one token is fine: only the prefill runs */
  generate_from(d, 1, NULL, &s, &r);
  OT_ASSERT_OK(s);
  assert_int_equal(r.n_tokens, 1);
  assert_int_equal(r.tokens[0], t1);
  ot_gen_result_free(&r);
}

/* A learning rate that makes the weights overflow: the step whose loss is
 * no longer finite is named. */
static void test_train_loss(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_HOST);
  ot_gpt2_train_opts o = ot_gpt2_train_opts_default();
  o.B = 1;
  o.T = 16;
  o.adam.lr = 1e30f;
  char *model = ot_test_model_path("gpt2_small", "");
  ot_gpt2_trainer *g;
  OT_ASSERT_OK(ot_gpt2_train_create(ctx, model, &o, NULL, &g));
  free(model);
  int32_t in[16], tg[16];
  for (int i = 0; i < 16; i++) in[i] = (i * 7) % 256, tg[i] = (i * 7 + 7) % 256;
  float loss;
  ot_status s = OT_OK;
  int step = 0;
  while (s == OT_OK && step < 5) step++, s = ot_gpt2_train_step(g, in, tg, NULL, &loss);
  char want[32];
  snprintf(want, sizeof want, "step %d:", step);
  expect_numeric(s, "train, lr 1e30", want, "--lr");
  assert_true(step >= 2); /* the first step's loss is the checkpoint's: finite */
  ot_gpt2_train_destroy(g);
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prefill),
      cmocka_unit_test(test_decode),
      cmocka_unit_test(test_train_loss),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
