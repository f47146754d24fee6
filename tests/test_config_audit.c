/* test_config_audit.c — issue 14, class 2: config.json fields that change
 * the math are implemented or refused by name, never ignored
 * (src/config/README.md has the audit). Through the models and the trainer:
 *   - GPT-2 with tie_word_embeddings false ran with wte as its head and
 *     ignored lm_head.weight: now lm_head.weight is the head (checked by
 *     logits of a head that is 2 x wte), and the trainer refuses it;
 *   - the trainer accepted an activation `run` refuses ("gelu", exact erf)
 *     and saved "gelu_new"; a Llama with hidden_act "gelu_new" ran SiLU:
 *     one table of activations per architecture now refuses both;
 *   - the trainer ignored dropout and initializer_range: dropout is refused
 *     by name, initializer_range is GPT-2's init's std.
 * Only the public API, so the test also builds against earlier versions. */
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

/* The status and both needles in the message (ot_testio.h's check). */
#define expect_err(s, want, what, n1, n2) ot_check_error(__FILE__, __LINE__, (s), (want), (what), (n1), (n2), (const char *)0)

/* dir/NAME/config.json: the reference set's with the sed script `edit`
 * applied (and `check` then found in it), beside a link to its weights. */
static const char *edited(const char *name, const char *set, const char *edit, const char *check) {
  static char p[256];
  char *src = ot_test_model_path(set, "");
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s/%s' && sed %s '%s/config.json' > '%s/%s/config.json' && grep -q '%s' '%s/%s/config.json' && "
           "ln -sf '%s/model.safetensors' '%s/%s/model.safetensors'",
           dir, name, edit, src, dir, name, check, dir, name, src, dir, name);
  free(src);
  if (system(cmd) != 0) fail_msg("%s", cmd);
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return p;
}

/* gpt2_small with its own head: every tensor of the reference, plus
 * lm_head.weight = scale x wte, and tie_word_embeddings false. */
static const char *untied_gpt2(const char *name, float scale) {
  char *src = ot_test_model_path("gpt2_small", "");
  ot_ckpt *ck;
  OT_ASSERT_OK(ot_ckpt_open(src, &ck));
  int n = ot_ckpt_count(ck);
  ot_st_tensor *ts = calloc((size_t)n + 1, sizeof *ts);
  void **bufs = calloc((size_t)n + 1, sizeof *bufs);
  const ot_st_info *wte = NULL;
  for (int i = 0; i < n; i++) {
    const ot_st_info *info = ot_ckpt_at(ck, i);
    bufs[i] = malloc(info->bytes ? info->bytes : 1);
    OT_ASSERT_OK(ot_ckpt_read(ck, info, bufs[i], info->bytes));
    ts[i] = (ot_st_tensor){.name = info->name, .dtype = info->dtype, .ndim = info->ndim, .data = bufs[i]};
    memcpy(ts[i].shape, info->shape, sizeof ts[i].shape);
    if (!strcmp(info->name, "transformer.wte.weight")) wte = info;
  }
  assert_non_null(wte);
  assert_int_equal(wte->dtype, OT_F32);
  float *head = malloc(wte->bytes);
  const float *w = NULL;
  for (int i = 0; i < n; i++)
    if (ot_ckpt_at(ck, i) == wte) w = bufs[i];
  for (int64_t j = 0; j < wte->numel; j++) head[j] = scale * w[j];
  bufs[n] = head;
  ts[n] = (ot_st_tensor){.name = "lm_head.weight", .dtype = OT_F32, .ndim = 2, .data = head};
  memcpy(ts[n].shape, wte->shape, sizeof ts[n].shape);
  const char *d = edited(name, "gpt2_small", "'s/\"tie_word_embeddings\": true/\"tie_word_embeddings\": false/'",
                         "\"tie_word_embeddings\": false");
  char p[512];
  snprintf(p, sizeof p, "%s/model.safetensors", d);
  unlink(p); /* the link edited() made */
  const char *meta[2] = {"format", "pt"};
  OT_ASSERT_OK(ot_st_write(p, ts, n + 1, meta, 1));
  for (int i = 0; i <= n; i++) free(bufs[i]);
  free(bufs);
  free(ts);
  ot_ckpt_close(ck);
  free(src);
  return d;
}

/* The prompt's logits of model directory d, divided by `scale`. */
static void logits_of(ot_ctx *ctx, const char *d, const ot_test_manifest *mf, float scale, ot_npy_array *out) {
  ot_lm *m;
  OT_ASSERT_OK(ot_model_load(ctx, d, OT_DTYPE_KEEP, NULL, NULL, &m));
  char npy[128];
  snprintf(npy, sizeof npy, "%s/logits.npy", dir);
  ot_gen_opts g = ot_gen_opts_default();
  g.max_new_tokens = 1;
  g.logits_out = npy;
  ot_gen_result r;
  OT_ASSERT_OK(ot_generate(m, mf->prompt, mf->n_prompt, &g, &r));
  OT_ASSERT_OK(ot_npy_read(npy, out));
  float *x = out->data;
  for (int64_t i = 0; i < out->shape[0] * out->shape[1]; i++) x[i] /= scale;
  ot_gen_result_free(&r);
  ot_lm_destroy(m);
}

static void test_gpt2_untied_head(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_HOST);
  ot_test_manifest mf;
  ot_test_read_manifest("gpt2_small", &mf);
  ot_npy_array a;
  /* a head equal to wte: transformers' logits, as tied */
  logits_of(ctx, untied_gpt2("same", 1.0f), &mf, 1.0f, &a);
  ot_test_expect_logits("gpt2_small", &a, 1e-4, "untied, lm_head = wte");
  ot_npy_free(&a);
  /* a head of 2 x wte doubles every logit: the head is lm_head.weight (it
   * was ignored, and the logits were the tied model's) */
  logits_of(ctx, untied_gpt2("double", 2.0f), &mf, 2.0f, &a);
  ot_test_expect_logits("gpt2_small", &a, 1e-4, "untied, lm_head = 2 wte, logits / 2");
  ot_npy_free(&a);
  /* untied without lm_head.weight: refused, naming it */
  ot_lm *m;
  const char *d = edited("nohead", "gpt2_small", "'s/\"tie_word_embeddings\": true/\"tie_word_embeddings\": false/'",
                         "\"tie_word_embeddings\": false");
  expect_err(ot_model_load(ctx, d, OT_DTYPE_KEEP, NULL, NULL, &m), OT_ERR_NOT_FOUND, "untied, no lm_head.weight",
             "nohead", "lm_head.weight");
  ot_ctx_destroy(ctx);
}

/* One table of activations per architecture, for run and train. */
static void test_activations(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_HOST);
  ot_lm *m;
  const char *d = edited("llama_gelu", "llama_gqa", "'s/\"hidden_act\": \"silu\"/\"hidden_act\": \"gelu_new\"/'",
                         "gelu_new");
  expect_err(ot_model_load(ctx, d, OT_DTYPE_KEEP, NULL, NULL, &m), OT_ERR_UNSUPPORTED, "llama, gelu_new",
             "llama_gelu/config.json", "hidden_act \"gelu_new\"");
  ot_gpt2_train_opts o = ot_gpt2_train_opts_default();
  o.T = 8;
  ot_gpt2_trainer *g;
  d = edited("gpt2_erf", "gpt2_small", "'s/\"gelu_new\"/\"gelu\"/'", "\"gelu\"");
  expect_err(ot_model_load(ctx, d, OT_DTYPE_KEEP, NULL, NULL, &m), OT_ERR_UNSUPPORTED, "run, gelu",
             "activation_function \"gelu\"", "gelu_new");
  expect_err(ot_gpt2_train_create(ctx, d, &o, NULL, &g), OT_ERR_UNSUPPORTED, "train, gelu",
             "activation_function \"gelu\"", "gelu_new");
  /* another name of the same function trains and runs */
  d = edited("gpt2_tanh", "gpt2_small", "'s/\"gelu_new\"/\"gelu_pytorch_tanh\"/'", "gelu_pytorch_tanh");
  OT_ASSERT_OK(ot_gpt2_train_create(ctx, d, &o, NULL, &g));
  ot_gpt2_train_destroy(g);
  OT_ASSERT_OK(ot_model_load(ctx, d, OT_DTYPE_KEEP, NULL, NULL, &m));
  ot_lm_destroy(m);
  ot_ctx_destroy(ctx);
}

static double sd_of(const ot_tensor *t) {
  int64_t n = ot_tensor_numel(t);
  float *x = malloc((size_t)n * sizeof *x);
  OT_ASSERT_OK(ot_tensor_read_f32(t, x, n));
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; i++) s += x[i], s2 += (double)x[i] * x[i];
  free(x);
  return sqrt(s2 / n - (s / n) * (s / n));
}

/* What the trainer does not do is refused by name; initializer_range is read. */
static void test_trainer_fields(void **state) {
  (void)state;
  ot_ctx *ctx = ot_test_ctx(OT_BACKEND_HOST);
  ot_gpt2_train_opts o = ot_gpt2_train_opts_default();
  o.T = 8;
  ot_gpt2_trainer *g;
  const char *d = untied_gpt2("untied_train", 1.0f);
  expect_err(ot_gpt2_train_create(ctx, d, &o, NULL, &g), OT_ERR_UNSUPPORTED, "train untied", "untied_train/config.json",
             "tie_word_embeddings false");
  d = edited("dropout", "gpt2_small", "'s/\"resid_pdrop\": 0.0/\"resid_pdrop\": 0.1/'", "\"resid_pdrop\": 0.1");
  expect_err(ot_gpt2_train_create(ctx, d, &o, NULL, &g), OT_ERR_UNSUPPORTED, "train with dropout",
             "dropout/config.json", "resid_pdrop 0.1");
  d = edited("nodrop", "gpt2_small", "-e '/\"attn_pdrop\"/d'", "resid_pdrop"); /* absent: GPT2Config's 0.1 */
  expect_err(ot_gpt2_train_create(ctx, d, &o, NULL, &g), OT_ERR_UNSUPPORTED, "train, attn_pdrop absent",
             "attn_pdrop 0.1", "set resid_pdrop, embd_pdrop and attn_pdrop to 0");
  /* ... unless the caller asks to train without it (omptensor train --no-dropout) */
  o.no_dropout = 1;
  OT_ASSERT_OK(ot_gpt2_train_create(ctx, d, &o, NULL, &g));
  ot_gpt2_train_destroy(g);
  o.no_dropout = 0;
  /* GPT-2's init draws normal(0, initializer_range) */
  o.init_random = 1;
  d = edited("init", "gpt2_small", "'s/\"initializer_range\": 0.02/\"initializer_range\": 0.005/'",
             "\"initializer_range\": 0.005");
  OT_ASSERT_OK(ot_gpt2_train_create(ctx, d, &o, NULL, &g));
  double sd = sd_of(ot_gpt2_train_param(g, 0)); /* wte */
  ot_gpt2_train_destroy(g);
  if (fabs(sd / 0.005 - 1) > 0.05) fail_msg("wte sd %g with initializer_range 0.005", sd);
  /* what the trainer saves it trains again: dropout 0 and the init's range are written */
  o.init_random = 0;
  char *src = ot_test_model_path("gpt2_small", "");
  OT_ASSERT_OK(ot_gpt2_train_create(ctx, src, &o, NULL, &g));
  free(src);
  char saved[128];
  snprintf(saved, sizeof saved, "%s/saved", dir);
  OT_ASSERT_OK(ot_gpt2_train_save(g, saved));
  ot_gpt2_train_destroy(g);
  OT_ASSERT_OK(ot_gpt2_train_create(ctx, saved, &o, NULL, &g));
  ot_gpt2_train_destroy(g);
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpt2_untied_head),
      cmocka_unit_test(test_activations),
      cmocka_unit_test(test_trainer_fields),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
