/* test_model_gguf.c — a Llama built from a GGUF file (issue 21).
 *
 * tests/data/gguf/llama-mixed.gguf (scripts/gen_gguf_model_ref.py, written
 * by the gguf package) holds llama_src's weights as llama.cpp lays them out:
 * llama.cpp's names, q/k rows permuted for its RoPE, metadata for
 * config.json, and each matrix in another ggml type (F32, F16, BF16, Q8_0,
 * Q4_0, Q4_K, Q6_K). Checked:
 *   - its prompt logits equal an independent NumPy forward pass over the
 *     file's own weights (gguf.quants.dequantize, unpermuted) within f32
 *     rounding: names, permutation, metadata and every type's kernels;
 *   - they are within the quantization's distance of llama_src's (the bf16
 *     model's) logits, and not at them (the file's blocks were used, not
 *     some float copy);
 *   - the weights keep their own types (a Q4_K matrix is q4k) and bytes;
 *   - --dtype f32 dequantizes to the same logits; under a budget the
 *     blocks stream and the logits are bitwise the unlimited run's, the
 *     budget held (trace);
 *   - model files the loader cannot build are refused, naming the file and
 *     what is unsupported. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model_test.h"
#include "kernels/kcommon.h"
#include "omptensor/hfconfig.h"
#include "omptensor/models.h"
#include "omptensor/trace.h"
#include "ot_test.h"

#define SET "../gguf/llama-mixed.gguf" /* ot_test_model_path is under models/ */
#define V 128

typedef struct ref {
  int32_t ids[16];
  int n;
  float *logits, *logits_src; /* [n, V] */
  double dist, range;
} ref;

static void read_ref(ref *r) {
  char *p = ot_test_model_path("../gguf", "llama-mixed.json");
  json_error_t err;
  json_t *root = json_load_file(p, 0, &err);
  if (!root) fail_msg("%s: %s", p, err.text);
  free(p);
  json_t *ids = json_object_get(root, "prompt_ids");
  r->n = (int)json_array_size(ids);
  assert_true(r->n > 0 && r->n <= 16);
  for (int i = 0; i < r->n; i++) r->ids[i] = (int32_t)json_integer_value(json_array_get(ids, i));
  r->logits = malloc((size_t)r->n * V * sizeof(float));
  r->logits_src = malloc((size_t)r->n * V * sizeof(float));
  for (int k = 0; k < 2; k++) {
    json_t *rows = json_object_get(root, k ? "logits_src" : "logits");
    assert_int_equal(json_array_size(rows), r->n);
    for (int i = 0; i < r->n; i++)
      for (int j = 0; j < V; j++)
        (k ? r->logits_src : r->logits)[i * V + j] = (float)json_number_value(json_array_get(json_array_get(rows, i), j));
  }
  r->dist = json_number_value(json_object_get(root, "quant_distance"));
  r->range = json_number_value(json_object_get(root, "logit_range"));
  json_decref(root);
}

static double max_diff(const ot_npy_array *got, const float *want, int n) {
  assert_true(got->shape[0] >= n && got->shape[1] == V);
  double worst = 0;
  const float *a = got->data;
  for (int i = 0; i < n * V; i++) {
    assert_true(isfinite(a[i]));
    worst = fmax(worst, fabs((double)a[i] - want[i]));
  }
  return worst;
}

static void logits_match_reference(void **state) {
  (void)state;
  ref r;
  read_ref(&r);
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  ot_test_gen g, s, f;
  ot_test_generate_as(ctx, SET, OT_DTYPE_KEEP, r.ids, r.n, 3, OT_STRATEGY_BALANCED, 0, NULL, &g);
  const double e = max_diff(&g.logits, r.logits, r.n);
  /* the bf16 checkpoint the file was made from, run the same way */
  ot_test_generate_as(ctx, "../gguf/llama_src", OT_DTYPE_KEEP, r.ids, r.n, 3, OT_STRATEGY_BALANCED, 0, NULL, &s);
  const double es = max_diff(&s.logits, r.logits_src, r.n), eq = max_diff(&g.logits, r.logits_src, r.n);
  ot_test_generate_as(ctx, SET, OT_F32, r.ids, r.n, 3, OT_STRATEGY_BALANCED, 0, NULL, &f);
  const double ef = max_diff(&f.logits, r.logits, r.n);
  printf("gguf: max |logit - numpy| %.3g (f32 %.3g); bf16 checkpoint %.3g; gguf vs bf16 %.3g (numpy: %.3g), range "
         "%.3g; weights %llu bytes (bf16 %llu, f32 %llu)\n",
         e, ef, es, eq, r.dist, r.range, (unsigned long long)g.weight_bytes, (unsigned long long)s.weight_bytes,
         (unsigned long long)f.weight_bytes);
  assert_true(e < 1e-4 * r.range);
  assert_true(ef < 1e-4 * r.range);
  /* bf16 weights on a GPU go through bf16 tensor-core GEMMs (activations
   * rounded to bf16: 1.9e-3 of the range on the H200); on host threads f32 */
  assert_true(es < (ot_kruns_on_host(ot_ctx_device(ctx, 0)) ? 1e-4 : 5e-3) * r.range);
  /* the quantization's distance, as NumPy measured it, and not less */
  assert_true(fabs(eq - r.dist) < 1e-3 * r.range && eq > 0.02 * r.range);
  assert_true(g.weight_bytes < s.weight_bytes && s.weight_bytes < f.weight_bytes);
  /* streamed under a budget a third of the weights: the same bits */
  ot_test_expect_streamed_same(ctx, SET, OT_DTYPE_KEEP, r.ids, r.n, 3, &g);
  ot_npy_free(&g.logits);
  ot_npy_free(&s.logits);
  ot_npy_free(&f.logits);
  ot_ctx_destroy(ctx);
  free(r.logits);
  free(r.logits_src);
}

/* The table a GGUF checkpoint gives: Hugging Face names, each tensor in its
 * own type; the config from the metadata. */
static void checkpoint_table(void **state) {
  (void)state;
  char *p = ot_test_model_path(SET, "");
  ot_ckpt *ck;
  OT_ASSERT_OK(ot_ckpt_open(p, &ck));
  assert_true(ot_ckpt_is_gguf(ck));
  static const struct { const char *name; ot_dtype dt; } want[] = {
      {"model.embed_tokens.weight", OT_Q8B},           {"lm_head.weight", OT_Q6K},
      {"model.norm.weight", OT_F32},                   {"model.layers.0.self_attn.q_proj.weight", OT_Q4B},
      {"model.layers.0.self_attn.k_proj.weight", OT_Q4K}, {"model.layers.0.self_attn.v_proj.weight", OT_Q6K},
      {"model.layers.0.self_attn.o_proj.weight", OT_Q8B}, {"model.layers.0.mlp.up_proj.weight", OT_F16},
      {"model.layers.0.mlp.down_proj.weight", OT_BF16}, {"model.layers.1.mlp.down_proj.weight", OT_Q4K},
      {"model.layers.1.post_attention_layernorm.weight", OT_F32},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    const ot_st_info *info;
    OT_ASSERT_OK(ot_ckpt_find(ck, want[i].name, &info));
    if (info->dtype != want[i].dt)
      fail_msg("%s: %s, want %s", want[i].name, ot_dtype_name(info->dtype), ot_dtype_name(want[i].dt));
  }
  assert_int_equal(ot_ckpt_count(ck), 3 + 2 * 9);
  ot_ckpt_close(ck);
  ot_hf_config c;
  OT_ASSERT_OK(ot_hf_config_load(p, &c));
  assert_int_equal(c.hidden_size, 256);
  assert_int_equal(c.num_layers, 2);
  assert_int_equal(c.num_heads, 4);
  assert_int_equal(c.num_kv_heads, 2);
  assert_int_equal(c.head_dim, 64);
  assert_int_equal(c.vocab_size, V);
  assert_int_equal(c.tie_word_embeddings, 0);
  assert_int_equal(c.bos_token_id, 1);
  assert_true(fabs(c.norm_eps - 1e-5) < 1e-12);
  free(p);
}

static void refused_models(void **state) {
  (void)state;
  static const struct { const char *file, *what; } bad[] = {
      {"bad-model-arch.gguf", "architecture 'gemma3'"},
      {"bad-model-moe.gguf", "llama.expert_count"},
      {"bad-model-q5k.gguf", "ggml type Q5_K"},
  };
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char *p = ot_test_model_path("../gguf", bad[i].file);
    ot_lm *m = NULL;
    ot_status s = ot_model_load(ctx, p, OT_DTYPE_KEEP, NULL, NULL, &m);
    if (s != OT_ERR_UNSUPPORTED) fail_msg("%s: status %d, '%s'", bad[i].file, (int)s, ot_last_error());
    assert_null(m);
    if (!strstr(ot_last_error(), bad[i].file) || !strstr(ot_last_error(), bad[i].what))
      fail_msg("%s: message '%s' does not name the file and '%s'", bad[i].file, ot_last_error(), bad[i].what);
    free(p);
  }
  ot_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(checkpoint_table),
      cmocka_unit_test(logits_match_reference),
      cmocka_unit_test(refused_models),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
