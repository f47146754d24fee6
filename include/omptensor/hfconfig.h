/* hfconfig.h — the Hugging Face config.json of a Llama or GPT-2 model.
 *
 *     ot_hf_config cfg;
 *     if (ot_hf_config_load("path/to/model", &cfg) != OT_OK) ... ot_last_error() ...
 *     // cfg.hidden_size, cfg.num_layers, ...
 *
 * Both families are read into one struct with Llama's names; GPT-2's keys
 * (n_embd, n_layer, n_head, n_inner, n_positions, layer_norm_epsilon) fill
 * the same fields. Unknown model types, missing or non-positive sizes,
 * inconsistent head counts and every field that would change the math but
 * that omptensor does not implement (a RoPE scaling other than linear and
 * llama3, another activation,
 * biases in a llama, cross-attention, quantized weights, ...: the audit in
 * src/config/README.md) are refused with a message naming the file and key.
 *
 * Every size is range-checked where it is read, against the limits below
 * (the smallest value is 1), and the weights the sizes make must be
 * addressable (OT_HF_MAX_WEIGHT_BYTES in f32): a model built from a config
 * that loaded, or that passed ot_hf_config_check, can form every shape and
 * byte count without overflow. The message names the file, the key, the
 * value and the allowed range.
 */
#ifndef OMPTENSOR_HFCONFIG_H
#define OMPTENSOR_HFCONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/rope.h"
#include "omptensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ot_arch {
  OT_ARCH_LLAMA = 0, /* LlamaForCausalLM: RMSNorm, RoPE, SwiGLU, GQA */
  OT_ARCH_GPT2,      /* GPT2LMHeadModel: LayerNorm, learned positions, GELU, fused c_attn */
} ot_arch;

typedef enum ot_act {
  OT_ACT_SILU = 0,  /* llama "silu" */
  OT_ACT_GELU_TANH, /* gpt2 "gelu_new", "gelu_pytorch_tanh", "gelu_fast" */
  OT_ACT_GELU,      /* exact erf GELU: "gelu" */
} ot_act;

#define OT_HF_MAX_EOS 8

/* The sizes omptensor takes, each in [1, max] (src/config/README.md says why). */
#define OT_HF_MAX_LAYERS 65536           /* num_hidden_layers, n_layer */
#define OT_HF_MAX_HIDDEN (1 << 20)       /* hidden_size, n_embd */
#define OT_HF_MAX_INTERMEDIATE (1 << 22) /* intermediate_size, n_inner */
#define OT_HF_MAX_EXPERTS 256            /* num_local_experts, num_experts, num_experts_per_tok */
#define OT_HF_MAX_HEADS 65536            /* num_attention_heads, num_key_value_heads, n_head */
#define OT_HF_MAX_HEAD_DIM 256           /* head_dim, given or hidden / heads: the attention kernels' limit */
#define OT_HF_MAX_VOCAB 2147483647       /* vocab_size: token ids are int32 */
#define OT_HF_MAX_POSITIONS 2147483647   /* max_position_embeddings, n_positions */
#define OT_HF_MAX_WEIGHT_BYTES ((int64_t)1 << 47) /* all weights in f32: x86-64's user address space */

typedef struct ot_hf_config {
  ot_arch arch;
  char model_type[32];     /* "llama", "mistral", "qwen2", "gemma", "phi3", "mixtral", "qwen2_moe" | "gpt2" */
  char architecture[64];   /* architectures[0], or "" if absent */
  int64_t hidden_size;     /* n_embd */
  int64_t intermediate_size; /* n_inner; gpt2 default 4 * n_embd */
  int64_t num_layers;      /* num_hidden_layers, n_layer */
  int64_t num_heads;       /* num_attention_heads, n_head */
  int64_t num_kv_heads;    /* num_key_value_heads; default num_heads */
  int64_t head_dim;        /* "head_dim" if given, else hidden_size / num_heads */
  int64_t vocab_size;
  int64_t max_position_embeddings; /* n_positions */
  double norm_eps;         /* rms_norm_eps (default 1e-6) / layer_norm_epsilon (default 1e-5) */
  double rope_theta;       /* default 10000; unused by gpt2 */
  /* rope_scaling (4.x) / rope_parameters (5.x): rope.h's ot_rope_type and its
   * numbers (factor 1 and the rest 0 for default) */
  int rope_type;           /* ot_rope_type (rope.h) */
  double rope_factor, rope_low_freq_factor, rope_high_freq_factor, rope_original_max_positions;
  /* yarn: beta_fast/slow (32, 1), truncate (1); the correction range and the
   * attention factor derived from them as transformers does */
  double rope_beta_fast, rope_beta_slow, rope_ramp_lo, rope_ramp_hi, rope_attention_factor;
  int rope_truncate;
  int tie_word_embeddings; /* llama default 0, gpt2 default 1 */
  int attention_bias;      /* llama "attention_bias" (q/k/v/o biases); gpt2 always has biases: 1 */
  int mlp_bias;            /* llama "mlp_bias"; gpt2: 1 */
  int qkv_bias;            /* qwen2: the q/k/v projections have biases (o_proj none) */
  int norm_plus_one;       /* gemma: RMSNorm multiplies by (1 + weight) */
  int scale_embeddings;    /* gemma: the embeddings are multiplied by sqrt(hidden_size) */
  int fused_proj;          /* phi3: q, k, v are rows of one qkv_proj weight, gate and up of one gate_up_proj */
  int64_t sliding_window;  /* mistral, qwen2: attention to the last W positions where it applies; 0: full */
  /* mixture of experts (mixtral, qwen2_moe; 0 for a dense model): every
   * layer's MLP is n_experts SwiGLU experts of moe_intermediate, top_k of
   * them per token; qwen2_moe adds a shared expert of shared_intermediate
   * gated by sigmoid(x w^T) */
  int64_t n_experts;       /* num_local_experts (mixtral), num_experts (qwen2_moe) */
  int64_t top_k;           /* num_experts_per_tok */
  int64_t moe_intermediate;    /* mixtral: intermediate_size; qwen2_moe: moe_intermediate_size */
  int64_t shared_intermediate; /* qwen2_moe: shared_expert_intermediate_size; else 0 */
  int norm_topk;           /* the chosen weights divided by their sum (mixtral: always; qwen2_moe: norm_topk_prob) */
  ot_act act;              /* hidden_act (llama: SILU) / activation_function (gpt2: GELU_TANH) */
  char torch_dtype[16];    /* "torch_dtype" (or newer "dtype"); "float32" if absent */
  int64_t bos_token_id;    /* -1 if absent */
  int64_t eos_token_ids[OT_HF_MAX_EOS]; /* eos_token_id: one id or a list */
  int n_eos;
  /* gpt2, training only (inference runs without dropout, as transformers'
   * eval() does): dropout probabilities, GPT2Config's default 0.1 each; the
   * trainer refuses non-zero ones. 0 for llama. */
  double resid_pdrop, embd_pdrop, attn_pdrop;
  double initializer_range; /* gpt2 (default 0.02): the trainer's init_random; 0 for llama */
} ot_hf_config;

/* `path` is config.json itself or the directory that holds it (or a GGUF
 * file, below). Errors: OT_ERR_NOT_FOUND (no file), OT_ERR_FORMAT (bad JSON,
 * missing / wrong-typed / out-of-range field, weights too large to address;
 * a file that is neither GGUF nor JSON, said so with its first bytes),
 * OT_ERR_UNSUPPORTED (model type, rope_scaling, activation). */
ot_status ot_hf_config_load(const char *path, ot_hf_config *out);

/* A GGUF file (llama.cpp's format; ot_hf_config_load takes one too): its
 * metadata ({arch}.embedding_length, .block_count, .attention.head_count,
 * .rope.freq_base, ...) as the config.json it was converted from, through
 * the same checks. Architectures llama (Llama, Mistral) and qwen2; Llama 3
 * RoPE scaling recognized from rope_freqs.weight; mixture-of-experts files
 * and any other architecture are OT_ERR_UNSUPPORTED, named. */
ot_status ot_hf_config_from_gguf(const char *path, ot_hf_config *out);
/* The same on a GGUF file's `len` bytes in memory; label names it in
 * messages (the fuzzer, the tests). */
ot_status ot_hf_config_from_gguf_mem(const void *data, size_t len, const char *label, ot_hf_config *out);

/* The same on a buffer (label names it in messages). */
ot_status ot_hf_config_parse(const char *json, size_t len, const char *label, ot_hf_config *out);

/* The checks ot_hf_config_load makes, on a config a caller filled in itself
 * (every size in range, heads consistent, head_dim, epsilon, the weights
 * addressable): the model builders call it before they use a size.
 * OT_ERR_INVALID_ARG with a message starting "LABEL: ". */
ot_status ot_hf_config_check(const ot_hf_config *c, const char *label);

/* The config's RoPE as the kernels take it (rope.h). */
ot_rope ot_hf_config_rope(const ot_hf_config *c);

/* The number of parameters (weights and biases) the config's sizes make;
 * -1 if that overflows (never, for a config that passed the checks). */
int64_t ot_hf_config_num_params(const ot_hf_config *c);

const char *ot_arch_name(ot_arch a); /* "llama", "gpt2" */

/* ---- generation_config.json ------------------------------------------------
 * The defaults a model's authors chose for generate(): what transformers
 * applies when the caller says nothing. Each value has a has_ flag (absent or
 * null: not given). Keys that would change the output but that omptensor's
 * generation does not implement (beam search, repetition penalties, minimum
 * lengths, ...) are listed in not_applied with their values, for the caller
 * to tell the user; keys with no effect on the tokens (transformers_version,
 * pad_token_id, cache settings, ...) are read past. */
typedef struct ot_hf_gen_config {
  int found; /* the file exists */
  int has_do_sample, do_sample;
  int has_temperature;
  double temperature;
  int has_top_k;
  int64_t top_k;
  int has_top_p;
  double top_p;
  int has_max_new_tokens;
  int64_t max_new_tokens;
  int has_max_length;
  int64_t max_length; /* prompt + new tokens */
  int has_eos;        /* eos_token_id given (one id or a list; replaces config.json's) */
  int64_t eos_token_ids[OT_HF_MAX_EOS];
  int n_eos;
  int64_t bos_token_id; /* -1 if absent */
  char not_applied[512]; /* "num_beams 4, repetition_penalty 1.05" or "" */
} ot_hf_gen_config;

/* `path`: generation_config.json or the model directory holding it. A
 * missing file is OT_OK with found = 0 (most checkpoints have one, not all).
 * OT_ERR_FORMAT names the file and the key of a wrong-typed or out-of-range
 * value (temperature < 0, top_p outside (0, 1], top_k < 0, ...). */
ot_status ot_hf_gen_config_load(const char *path, ot_hf_gen_config *out);
ot_status ot_hf_gen_config_parse(const char *json, size_t len, const char *label, ot_hf_gen_config *out);


#ifdef __cplusplus
}
#endif
#endif
