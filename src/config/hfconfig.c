/* hfconfig.c — read a Hugging Face config.json (LlamaForCausalLM,
 * GPT2LMHeadModel) with jansson into ot_hf_config.
 *
 * Defaults follow transformers' LlamaConfig / GPT2Config for the keys that
 * save_pretrained may leave out (it drops values equal to PretrainedConfig's
 * defaults, e.g. GPT-2's tie_word_embeddings); sizes that define the weights
 * are required. Both "torch_dtype" and the newer "dtype", and both
 * "rope_theta" and the newer "rope_parameters" are understood. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/fileio.h"
#include "io/json_util.h"
#include "omptensor/hfconfig.h"

#define OT_CONFIG_MAX_BYTES ((size_t)4 << 20)

typedef struct reader {
  const json_t *root;
  const char *label;
} reader;

/* A key that is absent or JSON null counts as not given. */
static const json_t *get(const reader *r, const char *key) {
  const json_t *v = json_object_get(r->root, key);
  return json_is_null(v) ? NULL : v;
}

static ot_status get_int(const reader *r, const char *key, int required, int64_t def, int64_t *out) {
  const json_t *v = get(r, key);
  if (!v) {
    if (required) return ot_fail(OT_ERR_FORMAT, "%s: missing \"%s\" (a positive integer)", r->label, key);
    *out = def;
    return OT_OK;
  }
  if (!json_is_integer(v))
    return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" is %s, expected a positive integer", r->label, key, ot_json_kind(v));
  if (json_integer_value(v) <= 0)
    return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" is %lld, expected a positive integer", r->label, key,
                   (long long)json_integer_value(v));
  *out = (int64_t)json_integer_value(v);
  return OT_OK;
}

static ot_status get_pos_real(const reader *r, const json_t *v, const char *key, double def, double *out) {
  if (!v) {
    *out = def;
    return OT_OK;
  }
  if (!json_is_number(v))
    return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" is %s, expected a positive number", r->label, key, ot_json_kind(v));
  if (!(json_number_value(v) > 0))
    return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" is %g, expected a positive number", r->label, key, json_number_value(v));
  *out = json_number_value(v);
  return OT_OK;
}

static ot_status get_bool(const reader *r, const char *key, int def, int *out) {
  const json_t *v = get(r, key);
  if (!v) {
    *out = def;
    return OT_OK;
  }
  if (!json_is_boolean(v))
    return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" is %s, expected true or false", r->label, key, ot_json_kind(v));
  *out = json_is_true(v);
  return OT_OK;
}

static ot_status get_str(const reader *r, const char *key, const char *def, char *buf, size_t cap) {
  const json_t *v = get(r, key);
  if (v && !json_is_string(v))
    return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" is %s, expected a string", r->label, key, ot_json_kind(v));
  const char *s = v ? json_string_value(v) : def;
  if (strlen(s) >= cap) return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" value \"%.40s...\" is too long", r->label, key, s);
  snprintf(buf, cap, "%s", s);
  return OT_OK;
}

/* model_type, or the class in architectures[0] when model_type is absent. */
static ot_status resolve_arch(const reader *r, ot_hf_config *c) {
  const json_t *archs = get(r, "architectures");
  if (archs && (!json_is_array(archs) || (json_array_size(archs) > 0 && !json_is_string(json_array_get(archs, 0)))))
    return ot_fail(OT_ERR_FORMAT, "%s: \"architectures\" must be a list of class names", r->label);
  if (archs && json_array_size(archs) > 0) snprintf(c->architecture, sizeof c->architecture, "%s",
                                                    json_string_value(json_array_get(archs, 0)));
  OT_TRY(get_str(r, "model_type", "", c->model_type, sizeof c->model_type));
  if (!c->model_type[0]) {
    if (!strcmp(c->architecture, "LlamaForCausalLM")) snprintf(c->model_type, sizeof c->model_type, "llama");
    else if (!strcmp(c->architecture, "GPT2LMHeadModel")) snprintf(c->model_type, sizeof c->model_type, "gpt2");
    else return ot_fail(OT_ERR_FORMAT, "%s: no \"model_type\" (expected \"llama\" or \"gpt2\")", r->label);
  }
  if (!strcmp(c->model_type, "llama")) c->arch = OT_ARCH_LLAMA;
  else if (!strcmp(c->model_type, "gpt2")) c->arch = OT_ARCH_GPT2;
  else
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: model_type \"%s\" is not supported (omptensor runs \"llama\" and \"gpt2\")",
                   r->label, c->model_type);
  return OT_OK;
}

static ot_status get_act(const reader *r, const char *key, const char *def, ot_act *out) {
  static const struct { const char *s; ot_act a; } acts[] = {
      {"silu", OT_ACT_SILU},           {"swish", OT_ACT_SILU},           {"gelu_new", OT_ACT_GELU_TANH},
      {"gelu_pytorch_tanh", OT_ACT_GELU_TANH}, {"gelu_fast", OT_ACT_GELU_TANH}, {"gelu", OT_ACT_GELU},
  };
  char name[32];
  OT_TRY(get_str(r, key, def, name, sizeof name));
  for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
    if (!strcmp(name, acts[i].s)) {
      *out = acts[i].a;
      return OT_OK;
    }
  return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s \"%s\" is not supported (silu, gelu, gelu_new, gelu_pytorch_tanh)",
                 r->label, key, name);
}

/* The "type" of a RoPE parameter object: rope_type, or the older "type". */
static const char *rope_type(const json_t *v) {
  const json_t *t = json_object_get(v, "rope_type");
  if (!t) t = json_object_get(v, "type");
  return json_is_string(t) ? json_string_value(t) : NULL;
}

/* Plain RoPE only: any scaling (linear, dynamic, yarn, llama3, ...) would
 * silently change the numbers if ignored. */
static ot_status read_rope(const reader *r, ot_hf_config *c) {
  const json_t *theta = get(r, "rope_theta");
  static const char *const keys[] = {"rope_scaling", "rope_parameters"};
  for (int i = 0; i < 2; i++) {
    const json_t *v = get(r, keys[i]);
    if (!v) continue;
    if (!json_is_object(v))
      return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" is %s, expected an object or null", r->label, keys[i],
                     ot_json_kind(v));
    const char *t = rope_type(v);
    if (!t || strcmp(t, "default") != 0)
      return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s of type \"%s\" is not supported (only plain RoPE with rope_theta)",
                     r->label, keys[i], t ? t : "(none given)");
    if (!theta) theta = json_object_get(v, "rope_theta");
  }
  return get_pos_real(r, theta, "rope_theta", 10000.0, &c->rope_theta);
}

static ot_status read_tokens(const reader *r, ot_hf_config *c) {
  const json_t *bos = get(r, "bos_token_id"), *eos = get(r, "eos_token_id");
  c->bos_token_id = -1;
  if (bos && (!json_is_integer(bos) || json_integer_value(bos) < 0))
    return ot_fail(OT_ERR_FORMAT, "%s: \"bos_token_id\" must be a non-negative integer", r->label);
  if (bos) c->bos_token_id = (int64_t)json_integer_value(bos);
  if (!eos) return OT_OK;
  size_t n = json_is_array(eos) ? json_array_size(eos) : 1;
  if (n > OT_HF_MAX_EOS)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: %zu eos_token_id values; at most %d are supported", r->label, n,
                   OT_HF_MAX_EOS);
  for (size_t i = 0; i < n; i++) {
    const json_t *v = json_is_array(eos) ? json_array_get(eos, i) : eos;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
      return ot_fail(OT_ERR_FORMAT, "%s: \"eos_token_id\" must be a non-negative integer or a list of them", r->label);
    c->eos_token_ids[c->n_eos++] = (int64_t)json_integer_value(v);
  }
  return OT_OK;
}

static ot_status read_llama(const reader *r, ot_hf_config *c) {
  OT_TRY(get_int(r, "hidden_size", 1, 0, &c->hidden_size));
  OT_TRY(get_int(r, "intermediate_size", 1, 0, &c->intermediate_size));
  OT_TRY(get_int(r, "num_hidden_layers", 1, 0, &c->num_layers));
  OT_TRY(get_int(r, "num_attention_heads", 1, 0, &c->num_heads));
  OT_TRY(get_int(r, "num_key_value_heads", 0, c->num_heads, &c->num_kv_heads));
  OT_TRY(get_int(r, "vocab_size", 1, 0, &c->vocab_size));
  OT_TRY(get_int(r, "max_position_embeddings", 1, 0, &c->max_position_embeddings));
  OT_TRY(get_int(r, "head_dim", 0, 0, &c->head_dim));
  OT_TRY(get_pos_real(r, get(r, "rms_norm_eps"), "rms_norm_eps", 1e-6, &c->norm_eps));
  OT_TRY(get_bool(r, "tie_word_embeddings", 0, &c->tie_word_embeddings));
  OT_TRY(get_bool(r, "attention_bias", 0, &c->attention_bias));
  OT_TRY(get_bool(r, "mlp_bias", 0, &c->mlp_bias));
  OT_TRY(get_act(r, "hidden_act", "silu", &c->act));
  return read_rope(r, c);
}

static ot_status read_gpt2(const reader *r, ot_hf_config *c) {
  OT_TRY(get_int(r, "n_embd", 1, 0, &c->hidden_size));
  OT_TRY(get_int(r, "n_layer", 1, 0, &c->num_layers));
  OT_TRY(get_int(r, "n_head", 1, 0, &c->num_heads));
  OT_TRY(get_int(r, "vocab_size", 1, 0, &c->vocab_size));
  OT_TRY(get_int(r, "n_positions", 1, 0, &c->max_position_embeddings));
  if (c->hidden_size > INT64_MAX / 4) return ot_fail(OT_ERR_FORMAT, "%s: \"n_embd\" is too large", r->label);
  OT_TRY(get_int(r, "n_inner", 0, 4 * c->hidden_size, &c->intermediate_size));
  c->num_kv_heads = c->num_heads;
  OT_TRY(get_pos_real(r, get(r, "layer_norm_epsilon"), "layer_norm_epsilon", 1e-5, &c->norm_eps));
  OT_TRY(get_bool(r, "tie_word_embeddings", 1, &c->tie_word_embeddings));
  OT_TRY(get_act(r, "activation_function", "gelu_new", &c->act));
  c->rope_theta = 0;
  c->attention_bias = c->mlp_bias = 1;
  int scale, by_layer;
  OT_TRY(get_bool(r, "scale_attn_weights", 1, &scale));
  OT_TRY(get_bool(r, "scale_attn_by_inverse_layer_idx", 0, &by_layer));
  if (!scale || by_layer)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s is not supported (attention is scaled by 1/sqrt(head_dim))", r->label,
                   !scale ? "scale_attn_weights = false" : "scale_attn_by_inverse_layer_idx = true");
  return OT_OK;
}

/* Head counts must tile the hidden size the way the weights assume. */
static ot_status check_heads(const reader *r, ot_hf_config *c) {
  if (c->num_heads % c->num_kv_heads != 0)
    return ot_fail(OT_ERR_FORMAT, "%s: num_attention_heads (%lld) is not a multiple of num_key_value_heads (%lld)",
                   r->label, (long long)c->num_heads, (long long)c->num_kv_heads);
  if (!c->head_dim) {
    if (c->hidden_size % c->num_heads != 0)
      return ot_fail(OT_ERR_FORMAT, "%s: hidden size %lld is not divisible by the %lld attention heads", r->label,
                     (long long)c->hidden_size, (long long)c->num_heads);
    c->head_dim = c->hidden_size / c->num_heads;
  }
  if (c->arch == OT_ARCH_LLAMA && c->head_dim % 2 != 0)
    return ot_fail(OT_ERR_FORMAT, "%s: head_dim %lld is odd; RoPE rotates pairs of dimensions", r->label,
                   (long long)c->head_dim);
  return OT_OK;
}

static ot_status read_config(const reader *r, ot_hf_config *c) {
  if (!json_is_object(r->root))
    return ot_fail(OT_ERR_FORMAT, "%s: the config is %s, expected an object", r->label, ot_json_kind(r->root));
  OT_TRY(resolve_arch(r, c));
  OT_TRY(c->arch == OT_ARCH_LLAMA ? read_llama(r, c) : read_gpt2(r, c));
  OT_TRY(check_heads(r, c));
  OT_TRY(read_tokens(r, c));
  const char *dkey = get(r, "torch_dtype") ? "torch_dtype" : "dtype";
  return get_str(r, dkey, "float32", c->torch_dtype, sizeof c->torch_dtype);
}

ot_status ot_hf_config_parse(const char *json, size_t len, const char *label, ot_hf_config *out) {
  if (!json || !label || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_hf_config_parse: NULL argument");
  memset(out, 0, sizeof *out);
  json_t *root;
  OT_TRY(ot_json_parse(json, len, label, "config", &root));
  reader r = {root, label};
  ot_status s = read_config(&r, out);
  json_decref(root);
  return s;
}

ot_status ot_hf_config_load(const char *path, ot_hf_config *out) {
  if (!path || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_hf_config_load: NULL argument");
  char *file = ot_io_is_dir(path) == 1 ? ot_io_join(path, "config.json") : NULL;
  const char *p = file ? file : path;
  char *text;
  size_t len;
  ot_status s = ot_io_read_text(p, OT_CONFIG_MAX_BYTES, &text, &len);
  if (s == OT_OK) {
    s = ot_hf_config_parse(text, len, p, out);
    free(text);
  }
  free(file);
  return s;
}

const char *ot_arch_name(ot_arch a) {
  return a == OT_ARCH_LLAMA ? "llama" : a == OT_ARCH_GPT2 ? "gpt2" : "?";
}
