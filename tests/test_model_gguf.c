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
 *     what is unsupported;
 *   - every metadata key the config reads, given another type than the one
 *     llama.cpp's loader reads it as (or a float not finite), is refused
 *     naming the file, the key and both types (tests/support/gguf_build.h
 *     writes the files); a missing rms epsilon too; llama.cpp's RoPE keys
 *     as it reads them (a factor without a type is linear, the older
 *     rope.scale_linear); a refusal of a field names its metadata key. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf_build.h"
#include "model_test.h"
#include "kernels/kcommon.h"
#include "omptensor/hfconfig.h"
#include "omptensor/models.h"
#include "omptensor/trace.h"
#include "ot_test.h"
#include "ot_testio.h"

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


/* One key of a llama's metadata given as type t with value v (NULL: left
 * out): the config's status, and on a refusal its message says each of
 * the strings. */
static void config_with(const char *key, ot_gguf_vtype t, const void *v, ot_status want, ...) {
  ot_gb b;
  ot_gb_init(&b);
  ot_gb_llama(&b, key);
  if (v) ot_gb_kv(&b, key, t, v);
  ot_gb_finish(&b, 0);
  ot_hf_config c;
  ot_status s = ot_hf_config_from_gguf_mem(b.p, b.len, "meta.gguf", &c);
  ot_gb_free(&b);
  if (s != want) fail_msg("%s as %s: status %d, want %d: %s", key, ot_gguf_vtype_name(t), (int)s, (int)want,
                          s ? ot_last_error() : "");
  if (s == OT_OK) return;
  va_list ap;
  va_start(ap, want);
  for (const char *w; (w = va_arg(ap, const char *));)
    if (!strstr(ot_last_error(), w)) fail_msg("%s: the message does not say '%s': %s", key, w, ot_last_error());
  va_end(ap);
  if (!strstr(ot_last_error(), "meta.gguf"))
    fail_msg("%s: the message does not name the file: %s", key, ot_last_error());
}

/* Each key the config reads, at the one type llama.cpp reads it as: any
 * other type was read as missing (its default, silently: theta 10000 for an
 * i32 freq_base, 1e-6 for a NaN epsilon, no scaling for a u32 type). */
static void metadata_types_refused(void **state) {
  (void)state;
  static const char *const u32_keys[] = {
      "llama.embedding_length", "llama.feed_forward_length", "llama.block_count", "llama.attention.head_count",
      "llama.attention.head_count_kv", "llama.context_length", "llama.vocab_size", "llama.rope.dimension_count",
      "llama.attention.key_length", "llama.attention.value_length", "llama.expert_count",
      "llama.rope.scaling.original_context_length", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"};
  static const char *const f32_keys[] = {"llama.rope.freq_base", "llama.attention.layer_norm_rms_epsilon",
                                         "llama.rope.scaling.factor", "llama.rope.scale_linear"};
  const int32_t i32 = 16;
  const uint64_t u64 = 16;
  const float f32 = 16, nan = NAN, inf = INFINITY, ninf = -INFINITY;
  const double f64 = 16;
  const uint8_t yes = 1;
  for (size_t i = 0; i < sizeof u32_keys / sizeof *u32_keys; i++) {
    config_with(u32_keys[i], OT_GGUF_V_I32, &i32, OT_ERR_FORMAT, u32_keys[i], "is i32, expected u32", NULL);
    config_with(u32_keys[i], OT_GGUF_V_U64, &u64, OT_ERR_FORMAT, u32_keys[i], "is u64, expected u32", NULL);
    config_with(u32_keys[i], OT_GGUF_V_F32, &f32, OT_ERR_FORMAT, u32_keys[i], "is f32, expected u32", NULL);
    config_with(u32_keys[i], OT_GGUF_V_STRING, "16", OT_ERR_FORMAT, u32_keys[i], "is string, expected u32", NULL);
  }
  for (size_t i = 0; i < sizeof f32_keys / sizeof *f32_keys; i++) {
    config_with(f32_keys[i], OT_GGUF_V_I32, &i32, OT_ERR_FORMAT, f32_keys[i], "is i32, expected f32", NULL);
    config_with(f32_keys[i], OT_GGUF_V_F64, &f64, OT_ERR_FORMAT, f32_keys[i], "is f64, expected f32", NULL);
    config_with(f32_keys[i], OT_GGUF_V_BOOL, &yes, OT_ERR_FORMAT, f32_keys[i], "is bool, expected f32", NULL);
    config_with(f32_keys[i], OT_GGUF_V_STRING, "1e6", OT_ERR_FORMAT, f32_keys[i], "is string, expected f32", NULL);
    config_with(f32_keys[i], OT_GGUF_V_F32, &nan, OT_ERR_FORMAT, f32_keys[i], "f32 nan, expected a finite f32", NULL);
    config_with(f32_keys[i], OT_GGUF_V_F32, &inf, OT_ERR_FORMAT, f32_keys[i], "f32 inf, expected a finite f32", NULL);
    config_with(f32_keys[i], OT_GGUF_V_F32, &ninf, OT_ERR_FORMAT, f32_keys[i], "f32 -inf, expected a finite f32", NULL);
  }
  const uint32_t two = 2;
  config_with("general.architecture", OT_GGUF_V_U32, &two, OT_ERR_FORMAT,
              "general.architecture is u32, expected string", NULL);
  config_with("llama.rope.scaling.type", OT_GGUF_V_U32, &two, OT_ERR_FORMAT,
              "llama.rope.scaling.type is u32, expected string", NULL);
  /* the right types load; a missing epsilon is refused (llama.cpp requires it) */
  config_with("llama.rope.freq_base", OT_GGUF_V_F32, &f32, OT_OK);
  config_with("llama.attention.layer_norm_rms_epsilon", OT_GGUF_V_F32, NULL, OT_ERR_FORMAT,
              "llama.attention.layer_norm_rms_epsilon is missing", NULL);
  /* a size out of range: config.json's field, and the key it came from */
  const uint32_t zero = 0;
  config_with("llama.context_length", OT_GGUF_V_U32, &zero, OT_ERR_FORMAT, "max_position_embeddings",
              "(metadata key llama.context_length)", NULL);
}

/* RoPE scaling as llama.cpp reads it: the type defaults to linear (a
 * factor without a type was read as no scaling), the factor may be the
 * older rope.scale_linear (was not read), a factor of 1 or the type "none"
 * is no scaling. */
static void rope_scaling_as_llama_cpp(void **state) {
  (void)state;
  static const struct { const char *type, *factor_key; float factor; int rope; double want; } cases[] = {
      {NULL, "llama.rope.scaling.factor", 4, OT_ROPE_LINEAR, 4},
      {NULL, "llama.rope.scale_linear", 2, OT_ROPE_LINEAR, 2},
      {"linear", "llama.rope.scaling.factor", 8, OT_ROPE_LINEAR, 8},
      {NULL, "llama.rope.scaling.factor", 1, OT_ROPE_DEFAULT, 1},
      {"none", "llama.rope.scaling.factor", 4, OT_ROPE_DEFAULT, 1}, /* llama.cpp: "never scale if ... none" */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    ot_gb b;
    ot_gb_init(&b);
    ot_gb_llama(&b, NULL);
    if (cases[i].type) ot_gb_str(&b, "llama.rope.scaling.type", cases[i].type);
    ot_gb_f32(&b, cases[i].factor_key, cases[i].factor);
    ot_gb_finish(&b, 0);
    ot_hf_config c;
    OT_ASSERT_OK(ot_hf_config_from_gguf_mem(b.p, b.len, "rope.gguf", &c));
    ot_gb_free(&b);
    if ((int)c.rope_type != cases[i].rope || c.rope_factor != cases[i].want)
      fail_msg("case %zu: rope type %d factor %g, want %d %g", i, (int)c.rope_type, c.rope_factor, cases[i].rope,
               cases[i].want);
    assert_true(c.rope_theta == 10000);
  }
}

/* A tensor whose shape the metadata does not imply: the message names the
 * metadata, not a config.json a GGUF file does not have. */
static void shape_against_metadata(void **state) {
  (void)state;
  ot_gb b;
  ot_gb_init(&b);
  ot_gb_llama(&b, NULL); /* hidden 64, vocab 32 */
  const uint64_t ne[2] = {48, 32};
  ot_gb_tensor(&b, "token_embd.weight", 2, ne, OT_GGUF_F32, 0);
  ot_gb_finish(&b, 48 * 32 * 4);
  char *dir = ot_tmpdir_create(), p[512];
  ot_write_bytes(dir, "shape.gguf", b.p, b.len);
  ot_gb_free(&b);
  ot_ctx *ctx = ot_test_ctx(ot_test_moving_backend());
  ot_lm *m = NULL;
  OT_ASSERT_ERR(ot_model_load(ctx, ot_tmp_path(p, sizeof p, dir, "shape.gguf"), OT_DTYPE_KEEP, NULL, NULL, &m),
                OT_ERR_SHAPE, "shape.gguf: tensor 'model.embed_tokens.weight' has shape [32, 48], but its metadata "
                "implies [32, 64]");
  assert_null(m);
  ot_ctx_destroy(ctx);
  ot_tmpdir_remove(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(checkpoint_table),
      cmocka_unit_test(logits_match_reference),
      cmocka_unit_test(refused_models),
      cmocka_unit_test(metadata_types_refused),
      cmocka_unit_test(rope_scaling_as_llama_cpp),
      cmocka_unit_test(shape_against_metadata),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
