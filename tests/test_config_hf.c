/* test_config_hf.c — config.json for Llama and GPT-2: the fixtures as
 * transformers writes them, defaults, and refusals. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "omptensor/hfconfig.h"
#include "omptensor/status.h"
#include "ot_testio.h"

static const char *data_path(char *buf, size_t cap, const char *rel) {
  const char *root = getenv("OT_TEST_DATA");
  snprintf(buf, cap, "%s/%s", root ? root : "tests/data", rel);
  return buf;
}

static void test_llama_fixture(void **state) {
  (void)state;
  char path[4096];
  ot_hf_config c;
  OT_ASSERT_OK(ot_hf_config_load(data_path(path, sizeof path, "io/llama_tiny"), &c)); /* the directory */
  assert_int_equal(c.arch, OT_ARCH_LLAMA);
  assert_string_equal(c.model_type, "llama");
  assert_string_equal(c.architecture, "LlamaForCausalLM");
  assert_int_equal(c.hidden_size, 64);
  assert_int_equal(c.intermediate_size, 172);
  assert_int_equal(c.num_layers, 2);
  assert_int_equal(c.num_heads, 4);
  assert_int_equal(c.num_kv_heads, 2);
  assert_int_equal(c.head_dim, 16);
  assert_int_equal(c.vocab_size, 256);
  assert_int_equal(c.max_position_embeddings, 128);
  assert_true(c.norm_eps == 1e-5);
  assert_true(c.rope_theta == 500000.0);
  assert_int_equal(c.tie_word_embeddings, 0);
  assert_int_equal(c.attention_bias, 0);
  assert_int_equal(c.act, OT_ACT_SILU);
  assert_string_equal(c.torch_dtype, "float32");
  assert_int_equal(c.bos_token_id, 1);
  assert_int_equal(c.n_eos, 1);
  assert_int_equal(c.eos_token_ids[0], 2);
  assert_string_equal(ot_arch_name(c.arch), "llama");
}

static void test_gpt2_fixture(void **state) {
  (void)state;
  char path[4096];
  ot_hf_config c;
  OT_ASSERT_OK(ot_hf_config_load(data_path(path, sizeof path, "io/gpt2_tiny/config.json"), &c));
  assert_int_equal(c.arch, OT_ARCH_GPT2);
  assert_int_equal(c.hidden_size, 48);
  assert_int_equal(c.intermediate_size, 4 * 48); /* n_inner null */
  assert_int_equal(c.num_layers, 2);
  assert_int_equal(c.num_heads, 3);
  assert_int_equal(c.num_kv_heads, 3);
  assert_int_equal(c.head_dim, 16);
  assert_int_equal(c.vocab_size, 50257);
  assert_int_equal(c.max_position_embeddings, 64);
  assert_true(c.norm_eps == 1e-5);
  assert_int_equal(c.tie_word_embeddings, 1); /* GPT-2's default, left out by save_pretrained */
  assert_int_equal(c.act, OT_ACT_GELU_TANH);
  assert_int_equal(c.attention_bias, 1);
  assert_int_equal(c.eos_token_ids[0], 50256);
}

static ot_status parse(const char *json, ot_hf_config *c) {
  return ot_hf_config_parse(json, strlen(json), "config.json", c);
}

#define MISTRAL_SIZES                                                                                          \
  "\"model_type\": \"mistral\", \"architectures\": [\"MistralForCausalLM\"], \"hidden_size\": 32,"             \
  " \"intermediate_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"  \
  " \"vocab_size\": 100, \"max_position_embeddings\": 32768"
#define QWEN_SIZES                                                                                             \
  "\"model_type\": \"qwen2\", \"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 2,"          \
  " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 100, \"max_position_embeddings\": 64"
#define LLAMA_SIZES                                                                                 \
  "\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 1," \
  " \"num_attention_heads\": 4, \"vocab_size\": 100, \"max_position_embeddings\": 16"

static void test_llama_defaults_and_variants(void **state) {
  (void)state;
  ot_hf_config c;
  OT_ASSERT_OK(parse("{" LLAMA_SIZES "}", &c));
  assert_int_equal(c.num_kv_heads, 4);
  assert_int_equal(c.head_dim, 8);
  assert_true(c.norm_eps == 1e-6);
  assert_true(c.rope_theta == 10000.0);
  assert_int_equal(c.tie_word_embeddings, 0);
  assert_int_equal(c.bos_token_id, -1);
  assert_int_equal(c.n_eos, 0);
  assert_string_equal(c.torch_dtype, "float32");
  /* Llama 3 style: eos list, newer "dtype" key, rope_parameters of the default type */
  OT_ASSERT_OK(parse("{" LLAMA_SIZES ", \"eos_token_id\": [128001, 128008, 128009], \"dtype\": \"bfloat16\","
                     " \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 500000.0},"
                     " \"tie_word_embeddings\": true}",
                     &c));
  assert_int_equal(c.n_eos, 3);
  assert_int_equal(c.eos_token_ids[2], 128009);
  assert_string_equal(c.torch_dtype, "bfloat16");
  assert_true(c.rope_theta == 500000.0);
  assert_int_equal(c.tie_word_embeddings, 1);
  assert_int_equal(c.rope_type, OT_ROPE_DEFAULT);
  /* Llama 3.1's RoPE (4.x rope_scaling; 5.x rope_parameters), and linear */
  OT_ASSERT_OK(parse("{" LLAMA_SIZES ", \"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\","
                     " \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0,"
                     " \"original_max_position_embeddings\": 8192}}",
                     &c));
  assert_int_equal(c.rope_type, OT_ROPE_LLAMA3);
  assert_true(c.rope_factor == 8.0 && c.rope_low_freq_factor == 1.0 && c.rope_high_freq_factor == 4.0);
  assert_true(c.rope_original_max_positions == 8192.0 && c.rope_theta == 500000.0);
  OT_ASSERT_OK(parse("{" LLAMA_SIZES ", \"rope_parameters\": {\"type\": \"linear\", \"factor\": 2.5,"
                     " \"rope_theta\": 20000}}",
                     &c));
  assert_int_equal(c.rope_type, OT_ROPE_LINEAR);
  assert_true(c.rope_factor == 2.5 && c.rope_theta == 20000.0);
  /* yarn (Qwen2.5's long context): head_dim 8, theta 1e6, original 32768:
   * lo = floor(8 ln(32768 / (32 2 pi)) / (2 ln 1e6)) = 1, hi = ceil(8 ln(32768 / (2 pi)) / (2 ln 1e6)) = 3;
   * attention factor 0.1 ln 4 + 1 */
  OT_ASSERT_OK(parse("{" LLAMA_SIZES ", \"rope_theta\": 1000000.0, \"rope_scaling\": {\"rope_type\": \"yarn\","
                     " \"factor\": 4.0, \"original_max_position_embeddings\": 32768}}",
                     &c));
  assert_int_equal(c.rope_type, OT_ROPE_YARN);
  assert_true(c.rope_ramp_lo == 1.0 && c.rope_ramp_hi == 3.0);
  assert_true(fabs(c.rope_attention_factor - (0.1 * log(4.0) + 1.0)) < 1e-12);
  OT_ASSERT_OK(parse("{" LLAMA_SIZES ", \"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0}}", &c));
  assert_int_equal(c.rope_type, OT_ROPE_DYNAMIC);
  assert_true(c.rope_factor == 2.0 && c.rope_original_max_positions == 16.0); /* max_position_embeddings */
  /* Llama decoders of other names: mistral (a window where given), qwen2
   * (q/k/v biases; its window only with use_sliding_window or layer_types) */
  OT_ASSERT_OK(parse("{" MISTRAL_SIZES ", \"sliding_window\": 4096}", &c));
  assert_int_equal(c.arch, OT_ARCH_LLAMA);
  assert_int_equal(c.sliding_window, 4096);
  assert_int_equal(c.qkv_bias, 0);
  OT_ASSERT_OK(parse("{" MISTRAL_SIZES ", \"sliding_window\": null}", &c));
  assert_int_equal(c.sliding_window, 0);
  OT_ASSERT_OK(parse("{" QWEN_SIZES ", \"sliding_window\": 4096, \"use_sliding_window\": false}", &c));
  assert_int_equal(c.qkv_bias, 1);
  assert_int_equal(c.sliding_window, 0);
  OT_ASSERT_OK(parse("{" QWEN_SIZES ", \"sliding_window\": 64, \"layer_types\": [\"sliding_attention\", \"sliding_attention\"]}",
                     &c));
  assert_int_equal(c.sliding_window, 64);
  OT_ASSERT_OK(parse("{" QWEN_SIZES ", \"sliding_window\": 64, \"use_sliding_window\": true, \"max_window_layers\": 2}", &c));
  assert_int_equal(c.sliding_window, 0); /* no layer from 2 on */
  OT_ASSERT_OK(parse("{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 32, \"intermediate_size\": 64,"
                     " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"vocab_size\": 100,"
                     " \"max_position_embeddings\": 64}",
                     &c));
  assert_string_equal(c.model_type, "qwen2");
  /* gemma: the tanh GELU whatever hidden_act says (as transformers), (1 + w) norms, scaled embeddings, tied */
  OT_ASSERT_OK(parse("{\"model_type\": \"gemma\", \"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 1,"
                     " \"num_attention_heads\": 4, \"head_dim\": 24, \"vocab_size\": 100, \"max_position_embeddings\": 64,"
                     " \"hidden_act\": \"gelu\"}",
                     &c));
  assert_int_equal(c.act, OT_ACT_GELU_TANH);
  assert_true(c.norm_plus_one && c.scale_embeddings && c.tie_word_embeddings);
  assert_int_equal(c.head_dim, 24);
  /* phi3: fused projections; a longrope RoPE refused by name */
  OT_ASSERT_OK(parse("{\"model_type\": \"phi3\", \"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 1,"
                     " \"num_attention_heads\": 4, \"vocab_size\": 100, \"max_position_embeddings\": 64,"
                     " \"sliding_window\": 2047, \"original_max_position_embeddings\": 4096}",
                     &c));
  assert_true(c.fused_proj && c.sliding_window == 2047);
  OT_ASSERT_ERR(parse("{\"model_type\": \"phi3\", \"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 1,"
                      " \"num_attention_heads\": 4, \"vocab_size\": 100, \"max_position_embeddings\": 64,"
                      " \"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1], \"long_factor\": [1]}}",
                      &c),
                OT_ERR_UNSUPPORTED, "config.json", "of type \"longrope\" is not supported");
  /* mixture of experts: mixtral (renormalised top-k, a window like mistral's) and qwen2_moe (a gated
   * shared expert, norm_topk_prob, qkv_bias of 5.x), with what they leave out refused by name */
#define MIXTRAL_SIZES                                                                                          \
  "\"model_type\": \"mixtral\", \"architectures\": [\"MixtralForCausalLM\"], \"hidden_size\": 32,"             \
  " \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"  \
  " \"vocab_size\": 100, \"max_position_embeddings\": 64"
  OT_ASSERT_OK(parse("{" MIXTRAL_SIZES ", \"num_local_experts\": 8, \"num_experts_per_tok\": 2, \"sliding_window\": null,"
                     " \"router_jitter_noise\": 0, \"output_router_logits\": false, \"router_aux_loss_coef\": 0.02}",
                     &c));
  assert_true(c.n_experts == 8 && c.top_k == 2 && c.moe_intermediate == 64 && c.norm_topk && !c.shared_intermediate);
  assert_true(c.sliding_window == 0 && !c.qkv_bias);
  /* 2 x (attention 4 x 32 x 32 - 2 x 32 x 16 for GQA... counted: q, o 32x32, k, v 16x32; 8 x (3 x 64 x 32 + 32); norms) */
  assert_int_equal(ot_hf_config_num_params(&c), 100 * 32 * 2 + 2 * (2 * 32 * 32 + 2 * 16 * 32 + 8 * (3 * 64 * 32 + 32) + 2 * 32) + 32);
  OT_ASSERT_OK(parse("{" MIXTRAL_SIZES ", \"sliding_window\": 16}", &c)); /* MixtralConfig's defaults: 8, top 2 */
  assert_true(c.n_experts == 8 && c.top_k == 2 && c.sliding_window == 16);
  OT_ASSERT_ERR(parse("{" MIXTRAL_SIZES ", \"router_jitter_noise\": 0.01}", &c), OT_ERR_UNSUPPORTED, "config.json",
                "\"router_jitter_noise\": 0.01 is not supported");
  OT_ASSERT_ERR(parse("{" MIXTRAL_SIZES ", \"num_local_experts\": 2, \"num_experts_per_tok\": 3}", &c), OT_ERR_FORMAT,
                "config.json", "num_experts_per_tok 3 is more than the 2 experts");
  OT_ASSERT_ERR(parse("{" MIXTRAL_SIZES ", \"num_local_experts\": 1000}", &c), OT_ERR_FORMAT, "config.json",
                "\"num_local_experts\" must be an integer in [1, 256]");
#define QMOE_SIZES                                                                                             \
  "\"model_type\": \"qwen2_moe\", \"hidden_size\": 32, \"intermediate_size\": 5632, \"num_hidden_layers\": 2,"      \
  " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 100, \"max_position_embeddings\": 64,"  \
  " \"num_experts\": 4, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 40, \"shared_expert_intermediate_size\": 56"
  OT_ASSERT_OK(parse("{" QMOE_SIZES ", \"decoder_sparse_step\": 1, \"mlp_only_layers\": [], \"qkv_bias\": true,"
                     " \"use_sliding_window\": false, \"sliding_window\": 0, \"layer_types\": [\"full_attention\", \"full_attention\"]}",
                     &c));
  assert_true(c.n_experts == 4 && c.top_k == 2 && c.moe_intermediate == 40 && c.shared_intermediate == 56);
  assert_true(!c.norm_topk && c.qkv_bias && c.sliding_window == 0);
  OT_ASSERT_OK(parse("{" QMOE_SIZES ", \"norm_topk_prob\": true, \"qkv_bias\": false}", &c));
  assert_true(c.norm_topk && !c.qkv_bias);
  OT_ASSERT_ERR(parse("{" QMOE_SIZES ", \"decoder_sparse_step\": 2}", &c), OT_ERR_UNSUPPORTED, "config.json",
                "\"decoder_sparse_step\": 2 is not supported");
  OT_ASSERT_ERR(parse("{" QMOE_SIZES ", \"mlp_only_layers\": [1]}", &c), OT_ERR_UNSUPPORTED, "config.json",
                "\"mlp_only_layers\" is not supported");
  OT_ASSERT_ERR(parse("{\"model_type\": \"deepseek_v3\", \"hidden_size\": 32}", &c), OT_ERR_UNSUPPORTED, "config.json",
                "\"mixtral\", \"qwen2_moe\" and \"gpt2\"");
  /* no model_type: taken from architectures */
  OT_ASSERT_OK(parse("{\"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2,"
                     " \"vocab_size\": 10, \"n_positions\": 4, \"n_inner\": 20}",
                     &c));
  assert_int_equal(c.arch, OT_ARCH_GPT2);
  assert_int_equal(c.intermediate_size, 20);
}

static void test_bad_configs(void **state) {
  (void)state;
  ot_hf_config c;
  struct {
    const char *json;
    ot_status want;
    const char *sub;
  } cases[] = {
      {"{\"model_type\": \"llama\", ", OT_ERR_FORMAT, "invalid JSON config at line 1"},
      {"[1]", OT_ERR_FORMAT, "the config is an array"},
      {"{\"model_type\": \"dbrx\"}", OT_ERR_UNSUPPORTED, "model_type \"dbrx\" is not supported"},
      {"{\"model_type\": \"gemma2\"}", OT_ERR_UNSUPPORTED, "model_type \"gemma2\" is not supported"},
      {"{\"model_type\": \"gemma\", \"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 1,"
       " \"num_attention_heads\": 4, \"vocab_size\": 100, \"max_position_embeddings\": 64, \"hidden_activation\": \"gelu\"}",
       OT_ERR_UNSUPPORTED, "hidden_activation \"gelu\" is not supported"},
      {"{" QWEN_SIZES ", \"use_sliding_window\": true, \"sliding_window\": 0}", OT_ERR_FORMAT,
       "\"sliding_window\" must be a positive integer"},
      {"{" QWEN_SIZES ", \"layer_types\": [\"full_attention\", \"chunked_attention\"]}", OT_ERR_UNSUPPORTED,
       "layer_types[1] is \"chunked_attention\""},
      {"{" QWEN_SIZES ", \"layer_types\": [\"sliding_attention\", \"sliding_attention\"]}", OT_ERR_FORMAT,
       "no \"sliding_window\""},
      /* issue 43: one entry per layer, as transformers' layer_type_validation */
      {"{" QWEN_SIZES ", \"layer_types\": [\"full_attention\"]}", OT_ERR_FORMAT,
       "\"layer_types\" has 1 entries for the 2 layers of num_hidden_layers"},
      {"{" QWEN_SIZES ", \"layer_types\": [\"full_attention\", \"full_attention\", \"full_attention\"]}", OT_ERR_FORMAT,
       "\"layer_types\" has 3 entries for the 2 layers"},
      {"{" MISTRAL_SIZES ", \"layer_types\": []}", OT_ERR_FORMAT, "\"layer_types\" has 0 entries for the 1 layers"},
      /* issue 43: a theta f32 cannot hold, named in config.json (was the op's message, or no rotation) */
      {"{" LLAMA_SIZES ", \"rope_theta\": 1e-50}", OT_ERR_FORMAT,
       "config.json: rope_theta 1e-50 is not a positive number"},
      {"{" LLAMA_SIZES ", \"rope_theta\": 1e50}", OT_ERR_FORMAT,
       "config.json: rope_theta 1e+50 is not a positive number"},
      {"{" LLAMA_SIZES ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 2,"
       " \"original_max_position_embeddings\": 1e300}}",
       OT_ERR_FORMAT, "beyond f32's range"},
      {"{" QWEN_SIZES ", \"sliding_window\": 8, \"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
       OT_ERR_UNSUPPORTED, "some layers use a sliding window and others full attention"},
      {"{" QWEN_SIZES ", \"sliding_window\": 8, \"use_sliding_window\": true, \"max_window_layers\": 1}",
       OT_ERR_UNSUPPORTED, "some layers use a sliding window"},
      {"{" QWEN_SIZES ", \"architectures\": [\"Qwen2ForSequenceClassification\"]}", OT_ERR_UNSUPPORTED,
       "omptensor runs Qwen2ForCausalLM for model_type \"qwen2\""},
      {"{\"architectures\": [\"BertModel\"]}", OT_ERR_FORMAT, "no \"model_type\""},
      {"{\"model_type\": \"llama\", \"intermediate_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
       " \"vocab_size\": 100, \"max_position_embeddings\": 16}",
       OT_ERR_FORMAT, "missing \"hidden_size\""},
      {"{" LLAMA_SIZES ", \"num_key_value_heads\": 0}", OT_ERR_FORMAT, "\"num_key_value_heads\" is 0"},
      {"{" LLAMA_SIZES ", \"num_key_value_heads\": 3}", OT_ERR_FORMAT, "not a multiple of num_key_value_heads (3)"},
      {"{" LLAMA_SIZES ", \"num_key_value_heads\": \"2\"}", OT_ERR_FORMAT, "\"num_key_value_heads\" is a string"},
      {"{" LLAMA_SIZES ", \"rms_norm_eps\": -1}", OT_ERR_FORMAT, "\"rms_norm_eps\" is -1"},
      {"{" LLAMA_SIZES ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}}", OT_ERR_FORMAT,
       "rope_scaling.low_freq_factor is missing"},
      {"{" LLAMA_SIZES ", \"rope_scaling\": {\"type\": \"linear\"}}", OT_ERR_FORMAT, "rope_scaling.factor is missing"},
      {"{" LLAMA_SIZES ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": -2}}", OT_ERR_FORMAT,
       "rope_scaling.factor is not positive"},
      {"{" LLAMA_SIZES ", \"rope_parameters\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 4,"
       " \"high_freq_factor\": 1, \"original_max_position_embeddings\": 8192}}",
       OT_ERR_FORMAT, "high_freq_factor 1 must be larger than low_freq_factor 4"},
      {"{" LLAMA_SIZES ", \"rope_parameters\": {\"rope_type\": \"su\"}}", OT_ERR_UNSUPPORTED,
       "of type \"su\" is not supported (omptensor implements RoPE default, linear, llama3, yarn and dynamic)"},
      {"{" LLAMA_SIZES ", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4, \"truncate\": 1}}", OT_ERR_FORMAT,
       "truncate is an integer, expected true or false"},
      {"{" LLAMA_SIZES ", \"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 4, \"beta_fast\": 1}}",
       OT_ERR_UNSUPPORTED, "rope_parameters.beta_fast is not supported"},
      {"{" LLAMA_SIZES ", \"rope_parameters\": {\"rope_type\": \"dynamic\"}}", OT_ERR_FORMAT,
       "rope_parameters.factor is missing"},
      {"{" LLAMA_SIZES ", \"rope_parameters\": {\"rope_type\": \"longrope\", \"factor\": 2}}", OT_ERR_UNSUPPORTED,
       "\"longrope\""},
      {"{" LLAMA_SIZES ", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2, \"attention_factor\": 0.5}}",
       OT_ERR_UNSUPPORTED, "rope_scaling.attention_factor is not supported"},
      {"{" LLAMA_SIZES ", \"rope_scaling\": 2}", OT_ERR_FORMAT, "\"rope_scaling\" is an integer"},
      {"{" LLAMA_SIZES ", \"hidden_act\": \"relu\"}", OT_ERR_UNSUPPORTED, "hidden_act \"relu\""},
      {"{" LLAMA_SIZES ", \"tie_word_embeddings\": 1}", OT_ERR_FORMAT, "expected true or false"},
      {"{" LLAMA_SIZES ", \"eos_token_id\": [1,2,3,4,5,6,7,8,9]}", OT_ERR_UNSUPPORTED, "9 eos_token_id values"},
      {"{" LLAMA_SIZES ", \"eos_token_id\": \"</s>\"}", OT_ERR_FORMAT, "\"eos_token_id\" must be"},
      {"{" LLAMA_SIZES ", \"hidden_size\": 30}", OT_ERR_FORMAT, "duplicate"},
      {"{\"model_type\": \"llama\", \"hidden_size\": 30, \"intermediate_size\": 64, \"num_hidden_layers\": 1,"
       " \"num_attention_heads\": 4, \"vocab_size\": 100, \"max_position_embeddings\": 16}",
       OT_ERR_FORMAT, "hidden size 30 is not divisible by the 4 attention heads"},
      {"{\"model_type\": \"llama\", \"hidden_size\": 36, \"intermediate_size\": 64, \"num_hidden_layers\": 1,"
       " \"num_attention_heads\": 4, \"vocab_size\": 100, \"max_position_embeddings\": 16}",
       OT_ERR_FORMAT, "head_dim 9 is odd"},
      {"{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, \"vocab_size\": 10}", OT_ERR_FORMAT,
       "missing \"n_positions\""},
      {"{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, \"vocab_size\": 10,"
       " \"n_positions\": 4, \"scale_attn_by_inverse_layer_idx\": true}",
       OT_ERR_UNSUPPORTED, "scale_attn_by_inverse_layer_idx"},
      {"{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, \"vocab_size\": 10,"
       " \"n_positions\": 4, \"activation_function\": \"relu\"}",
       OT_ERR_UNSUPPORTED, "activation_function \"relu\""},
      {"{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1.5, \"n_head\": 2, \"vocab_size\": 10,"
       " \"n_positions\": 4}",
       OT_ERR_FORMAT, "\"n_layer\" is a real number"},
      /* issue 14: every field that changes the math and is not implemented, refused by name */
      {"{" LLAMA_SIZES ", \"attention_bias\": true}", OT_ERR_UNSUPPORTED, "\"attention_bias\": true is not supported"},
      {"{" LLAMA_SIZES ", \"mlp_bias\": true}", OT_ERR_UNSUPPORTED, "\"mlp_bias\": true is not supported"},
      {"{" LLAMA_SIZES ", \"hidden_act\": \"gelu_new\"}", OT_ERR_UNSUPPORTED, "hidden_act \"gelu_new\" is not supported"},
      {"{" LLAMA_SIZES ", \"hidden_act\": \"gelu\"}", OT_ERR_UNSUPPORTED, "hidden_act \"gelu\""},
      {"{" LLAMA_SIZES ", \"sliding_window\": 4096}", OT_ERR_UNSUPPORTED, "\"sliding_window\": 4096"},
      {"{" LLAMA_SIZES ", \"use_sliding_window\": true}", OT_ERR_UNSUPPORTED, "\"use_sliding_window\": true"},
      {"{" LLAMA_SIZES ", \"partial_rotary_factor\": 0.5}", OT_ERR_UNSUPPORTED, "\"partial_rotary_factor\""},
      {"{" LLAMA_SIZES ", \"rope_parameters\": {\"rope_type\": \"default\", \"partial_rotary_factor\": 0.25}}",
       OT_ERR_UNSUPPORTED, "rope_parameters.partial_rotary_factor"},
      {"{" LLAMA_SIZES ", \"pretraining_tp\": 0}", OT_ERR_FORMAT, "\"pretraining_tp\" must be a positive integer"},
      {"{" LLAMA_SIZES ", \"attention_dropout\": \"0.1\"}", OT_ERR_FORMAT, "\"attention_dropout\" is a string"},
      {"{" LLAMA_SIZES ", \"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4}}", OT_ERR_UNSUPPORTED,
       "\"quantization_config\""},
      {"{" LLAMA_SIZES ", \"architectures\": [\"LlamaForSequenceClassification\"]}", OT_ERR_UNSUPPORTED,
       "architectures [\"LlamaForSequenceClassification\"] is not supported"},
      {"{\"model_type\": \"gpt2\", \"architectures\": [\"GPT2DoubleHeadsModel\"], \"n_embd\": 8, \"n_layer\": 1,"
       " \"n_head\": 2, \"vocab_size\": 10, \"n_positions\": 4}",
       OT_ERR_UNSUPPORTED, "GPT2DoubleHeadsModel"},
      {"{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, \"vocab_size\": 10,"
       " \"n_positions\": 4, \"activation_function\": \"gelu\"}",
       OT_ERR_UNSUPPORTED, "activation_function \"gelu\" is not supported"},
      {"{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, \"vocab_size\": 10,"
       " \"n_positions\": 4, \"add_cross_attention\": true}",
       OT_ERR_UNSUPPORTED, "\"add_cross_attention\": true"},
      {"{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, \"vocab_size\": 10,"
       " \"n_positions\": 4, \"reorder_and_upcast_attn\": \"yes\"}",
       OT_ERR_FORMAT, "\"reorder_and_upcast_attn\" is a string"},
      {"{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, \"vocab_size\": 10,"
       " \"n_positions\": 4, \"resid_pdrop\": 1.5}",
       OT_ERR_FORMAT, "\"resid_pdrop\" is out of range"},
      {"{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, \"vocab_size\": 10,"
       " \"n_positions\": 4, \"initializer_range\": 0}",
       OT_ERR_FORMAT, "\"initializer_range\" is 0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    OT_ASSERT_ERR(parse(cases[i].json, &c), cases[i].want, "config.json", cases[i].sub);
  }
  char path[4096];
  OT_ASSERT_ERR(ot_hf_config_load("/nonexistent/dir/config.json", &c), OT_ERR_NOT_FOUND,
                "/nonexistent/dir/config.json");
  OT_ASSERT_ERR(ot_hf_config_load(data_path(path, sizeof path, "io"), &c), OT_ERR_NOT_FOUND, "io/config.json");
  /* issue 14: a safetensors file for the model directory */
  OT_ASSERT_ERR(ot_hf_config_load(data_path(path, sizeof path, "models/gpt2_small/model.safetensors"), &c),
                OT_ERR_INVALID_ARG, "model.safetensors is a safetensors file, not a model directory",
                "omptensor inspect");
}

/* Issue 14: fields that are read and accepted because they do not change the
 * math here (src/config/README.md's audit), and those read for training. */
static void test_accepted_fields(void **state) {
  (void)state;
  ot_hf_config c;
  OT_ASSERT_OK(parse("{" LLAMA_SIZES ", \"hidden_act\": \"swish\", \"pretraining_tp\": 2, \"attention_dropout\": 0.1,"
                     " \"sliding_window\": null, \"use_sliding_window\": false, \"partial_rotary_factor\": 1.0,"
                     " \"attention_bias\": false, \"quantization_config\": null, \"architectures\": [\"LlamaForCausalLM\"]}",
                     &c));
  assert_int_equal(c.act, OT_ACT_SILU);
  static const char *const tanh_names[] = {"gelu_new", "gelu_pytorch_tanh", "gelu_fast"};
  for (int i = 0; i < 3; i++) {
    char json[512];
    snprintf(json, sizeof json,
             "{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, \"vocab_size\": 10,"
             " \"n_positions\": 4, \"activation_function\": \"%s\", \"reorder_and_upcast_attn\": true,"
             " \"add_cross_attention\": false, \"resid_pdrop\": 0.25, \"attn_pdrop\": 0, \"initializer_range\": 0.01,"
             " \"tie_word_embeddings\": false}",
             tanh_names[i]);
    OT_ASSERT_OK(parse(json, &c));
    assert_int_equal(c.act, OT_ACT_GELU_TANH);
    assert_true(c.resid_pdrop == 0.25 && c.attn_pdrop == 0 && c.embd_pdrop == 0.1); /* GPT2Config's default */
    assert_true(c.initializer_range == 0.01);
    assert_int_equal(c.tie_word_embeddings, 0); /* run reads lm_head.weight; the trainer refuses it */
  }
}

/* Single-byte corruptions of the Llama fixture: an error naming the file, or
 * a config whose sizes are all positive. */
static void test_mutations(void **state) {
  (void)state;
  char path[4096];
  FILE *f = fopen(data_path(path, sizeof path, "io/llama_tiny/config.json"), "rb");
  assert_non_null(f);
  char text[2048];
  size_t len = fread(text, 1, sizeof text, f);
  fclose(f);
  static const char vals[] = {'\0', '"', '-', '0', '}', ']', 'x', ','};
  for (size_t i = 0; i < len; i++)
    for (size_t v = 0; v < sizeof vals; v++) {
      char *m = malloc(len);
      memcpy(m, text, len);
      m[i] = vals[v];
      ot_hf_config c;
      if (ot_hf_config_parse(m, len, "mut.json", &c) == OT_OK) {
        assert_true(c.hidden_size > 0 && c.num_heads > 0 && c.num_kv_heads > 0 && c.head_dim > 0);
        assert_int_equal(c.num_heads % c.num_kv_heads, 0);
      } else {
        assert_non_null(strstr(ot_last_error(), "mut.json"));
      }
      free(m);
    }
}

static char notices[4][512];
static int n_notices;
static void take_notice(void *user, const char *m) {
  (void)user;
  if (n_notices < 4) snprintf(notices[n_notices++], sizeof notices[0], "%s", m);
}

/* Issue 43: rope_scaling and rope_parameters together were merged (the
 * second's type over the first's). transformers takes rope_scaling when it
 * is a non-empty object (5.x: "rope_scaling or rope_parameters"; 4.x knows
 * no other), else rope_parameters; the one not used is said in a notice. */
static void test_rope_objects_as_transformers(void **state) {
  (void)state;
  ot_hf_config c;
  ot_set_notice_handler(take_notice, NULL);
  OT_ASSERT_OK(parse("{" LLAMA_SIZES ", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0},"
                     " \"rope_parameters\": {\"rope_type\": \"dynamic\", \"factor\": 4.0, \"rope_theta\": 5e5}}",
                     &c));
  assert_int_equal(c.rope_type, OT_ROPE_LINEAR);
  assert_true(c.rope_factor == 2.0 && c.rope_theta == 10000.0);
  assert_int_equal(n_notices, 1);
  assert_non_null(strstr(notices[0], "config.json: rope_scaling and rope_parameters are both given and differ"));
  /* the same object twice: no notice; an empty rope_scaling: rope_parameters */
  OT_ASSERT_OK(parse("{" LLAMA_SIZES ", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0},"
                     " \"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2.0}}",
                     &c));
  assert_int_equal(n_notices, 1);
  OT_ASSERT_OK(parse("{" LLAMA_SIZES ", \"rope_scaling\": {}, \"rope_parameters\": {\"rope_type\": \"linear\","
                     " \"factor\": 3.0}}",
                     &c));
  assert_true(c.rope_type == OT_ROPE_LINEAR && c.rope_factor == 3.0);
  /* the object's own theta over a top-level one, as transformers 5 (setdefault), said in a notice */
  OT_ASSERT_OK(parse("{" LLAMA_SIZES ", \"rope_theta\": 10000, \"rope_parameters\": {\"rope_type\": \"default\","
                     " \"rope_theta\": 5e5}}",
                     &c));
  assert_true(c.rope_theta == 5e5);
  assert_int_equal(n_notices, 2);
  assert_non_null(strstr(notices[1], "config.json: \"rope_theta\" and rope_parameters.rope_theta differ; "
                                     "transformers 5 uses rope_parameters's"));
  ot_set_notice_handler(NULL, NULL);
}

/* Issue 43: a file given as the model that is neither GGUF nor JSON was
 * "invalid JSON config"; a damaged .gguf was read as JSON too. */
static void test_not_a_model_file(void **state) {
  (void)state;
  char *dir = ot_tmpdir_create(), p[512];
  ot_write_bytes(dir, "weights.bin", "XXXXjunk", 8);
  ot_write_bytes(dir, "model.gguf", "XXXXjunk", 8);
  ot_hf_config c;
  OT_ASSERT_ERR(ot_hf_config_load(ot_tmp_path(p, sizeof p, dir, "weights.bin"), &c), OT_ERR_FORMAT,
                "weights.bin: not a model: not a GGUF file (magic 'XXXX', expected 'GGUF') nor a config.json");
  OT_ASSERT_ERR(ot_hf_config_load(ot_tmp_path(p, sizeof p, dir, "model.gguf"), &c), OT_ERR_FORMAT,
                "model.gguf: not a GGUF file (magic 'XXXX', expected 'GGUF')");
  ot_tmpdir_remove(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_fixture),
      cmocka_unit_test(test_gpt2_fixture),
      cmocka_unit_test(test_llama_defaults_and_variants),
      cmocka_unit_test(test_bad_configs),
      cmocka_unit_test(test_accepted_fields),
      cmocka_unit_test(test_mutations),
      cmocka_unit_test(test_rope_objects_as_transformers),
      cmocka_unit_test(test_not_a_model_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
