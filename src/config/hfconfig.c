/* hfconfig.c — read a Hugging Face config.json (LlamaForCausalLM,
 * GPT2LMHeadModel) with jansson into ot_hf_config.
 *
 * Defaults follow transformers' LlamaConfig / GPT2Config for the keys that
 * save_pretrained may leave out (it drops values equal to PretrainedConfig's
 * defaults, e.g. GPT-2's tie_word_embeddings); sizes that define the weights
 * are required. Both "torch_dtype" and the newer "dtype", and both
 * "rope_theta" and the newer "rope_parameters" are understood.
 *
 * Every size is range-checked where it is read (issue 14): one table per
 * architecture gives each key its field and its allowed range [1, max], and
 * the same table checks a config a caller filled in itself
 * (ot_hf_config_check); the weights the sizes make must then be addressable
 * (checked arithmetic, core/checked.h). A model builder can trust every size
 * and every product of them it forms. */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "io/fileio.h"
#include "omptensor/gguf.h"
#include "io/json_util.h"
#include "omptensor/hfconfig.h"
#include "config/hf_internal.h"

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

/* One size of a config: its JSON key, the field it fills, whether it must be
 * given, and the largest value omptensor takes (the smallest is 1), with
 * why. Absent optional sizes are 0 here and derived after the table
 * (num_key_value_heads, head_dim, n_inner). */
typedef struct size_field {
  const char *key;
  size_t off;
  int required;
  int64_t max;
  const char *why;
} size_field;

#define FIELD(f) offsetof(ot_hf_config, f)
static const char WHY_LAYERS[] = "each layer has its own tensors and caches on the host; 500x the deepest published model",
                  WHY_WIDTH[] = "far wider than any published model", WHY_HEADS[] = "far more than any published model",
                  WHY_HEAD_DIM[] = "the attention kernels' limit", WHY_VOCAB[] = "token ids are 32-bit",
                  WHY_POS[] = "positions and sequence lengths are 32-bit";

static const size_field llama_sizes[] = {
    {"hidden_size", FIELD(hidden_size), 1, OT_HF_MAX_HIDDEN, WHY_WIDTH},
    {"intermediate_size", FIELD(intermediate_size), 1, OT_HF_MAX_INTERMEDIATE, WHY_WIDTH},
    {"num_hidden_layers", FIELD(num_layers), 1, OT_HF_MAX_LAYERS, WHY_LAYERS},
    {"num_attention_heads", FIELD(num_heads), 1, OT_HF_MAX_HEADS, WHY_HEADS},
    {"num_key_value_heads", FIELD(num_kv_heads), 0, OT_HF_MAX_HEADS, WHY_HEADS},
    {"vocab_size", FIELD(vocab_size), 1, OT_HF_MAX_VOCAB, WHY_VOCAB},
    {"max_position_embeddings", FIELD(max_position_embeddings), 1, OT_HF_MAX_POSITIONS, WHY_POS},
    {"head_dim", FIELD(head_dim), 0, OT_HF_MAX_HEAD_DIM, WHY_HEAD_DIM},
};
static const size_field gpt2_sizes[] = {
    {"n_embd", FIELD(hidden_size), 1, OT_HF_MAX_HIDDEN, WHY_WIDTH},
    {"n_layer", FIELD(num_layers), 1, OT_HF_MAX_LAYERS, WHY_LAYERS},
    {"n_head", FIELD(num_heads), 1, OT_HF_MAX_HEADS, WHY_HEADS},
    {"vocab_size", FIELD(vocab_size), 1, OT_HF_MAX_VOCAB, WHY_VOCAB},
    {"n_positions", FIELD(max_position_embeddings), 1, OT_HF_MAX_POSITIONS, WHY_POS},
    {"n_inner", FIELD(intermediate_size), 0, OT_HF_MAX_INTERMEDIATE, WHY_WIDTH},
};
#define N_OF(a) (sizeof a / sizeof a[0])

static int64_t *field_of(ot_hf_config *c, const size_field *f) { return (int64_t *)((char *)c + f->off); }
static int64_t field_val(const ot_hf_config *c, const size_field *f) {
  return *(const int64_t *)((const char *)c + f->off);
}

/* The size table of an architecture (NULL for an unknown one). */
static const size_field *size_table(ot_arch a, size_t *n) {
  *n = a == OT_ARCH_LLAMA ? N_OF(llama_sizes) : a == OT_ARCH_GPT2 ? N_OF(gpt2_sizes) : 0;
  return a == OT_ARCH_LLAMA ? llama_sizes : a == OT_ARCH_GPT2 ? gpt2_sizes : NULL;
}

/* The JSON key of a field for messages ("n_layer" for GPT-2's num_layers). */
static const char *key_of(ot_arch a, size_t off, const char *fallback) {
  size_t n;
  const size_field *t = size_table(a, &n);
  for (size_t i = 0; i < n; i++)
    if (t[i].off == off) return t[i].key;
  return fallback;
}

static ot_status out_of_range(ot_status st, const char *label, const size_field *f, int64_t v) {
  return ot_fail(st, "%s: \"%s\" is %lld, expected an integer in [1, %lld] (%s)", label, f->key, (long long)v,
                 (long long)f->max, f->why);
}

/* Reads size `f` from the JSON object into c, range-checked. */
static ot_status read_size(const reader *r, const size_field *f, ot_hf_config *c) {
  const json_t *v = get(r, f->key);
  if (!v) {
    if (f->required)
      return ot_fail(OT_ERR_FORMAT, "%s: missing \"%s\" (an integer in [1, %lld])", r->label, f->key,
                     (long long)f->max);
    *field_of(c, f) = 0;
    return OT_OK;
  }
  if (!json_is_integer(v))
    return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" is %s, expected an integer in [1, %lld]", r->label, f->key,
                   ot_json_kind(v), (long long)f->max);
  int64_t x = (int64_t)json_integer_value(v);
  if (x < 1 || x > f->max) return out_of_range(OT_ERR_FORMAT, r->label, f, x);
  *field_of(c, f) = x;
  return OT_OK;
}

static ot_status read_sizes(const reader *r, ot_hf_config *c) {
  size_t n;
  const size_field *t = size_table(c->arch, &n);
  for (size_t i = 0; i < n; i++) OT_TRY(read_size(r, &t[i], c));
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

/* A field that changes the math and that omptensor does not implement:
 * refused by name when it is given with a value other than the one we
 * compute (given as JSON text: "false", "1", ...; NULL = must be absent or
 * null). */
static ot_status refuse_unless(const reader *r, const char *key, const char *allowed, const char *why) {
  const json_t *v = get(r, key);
  if (!v) return OT_OK;
  char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
  ot_status s = OT_OK;
  if (!allowed || !text || strcmp(text, allowed) != 0)
    s = ot_fail(OT_ERR_UNSUPPORTED, "%s: \"%s\": %.60s is not supported: %s", r->label, key, text ? text : "?", why);
  free(text);
  return s;
}

/* model_type, or the class in architectures[0] when model_type is absent. */
static ot_status resolve_arch(const reader *r, ot_hf_config *c) {
  const json_t *archs = get(r, "architectures");
  if (archs && (!json_is_array(archs) || (json_array_size(archs) > 0 && !json_is_string(json_array_get(archs, 0)))))
    return ot_fail(OT_ERR_FORMAT, "%s: \"architectures\" must be a list of class names", r->label);
  if (archs && json_array_size(archs) > 0) snprintf(c->architecture, sizeof c->architecture, "%s",
                                                    json_string_value(json_array_get(archs, 0)));
  OT_TRY(get_str(r, "model_type", "", c->model_type, sizeof c->model_type));
  /* the families and their causal-LM classes: mistral, qwen2, gemma, phi3,
   * mixtral and qwen2_moe are Llama decoders, told apart by config fields
   * (hfconfig.h) */
  static const struct { const char *type, *cls; ot_arch arch; } fam[] = {
      {"llama", "LlamaForCausalLM", OT_ARCH_LLAMA},
      {"mistral", "MistralForCausalLM", OT_ARCH_LLAMA},
      {"qwen2", "Qwen2ForCausalLM", OT_ARCH_LLAMA},
      {"gemma", "GemmaForCausalLM", OT_ARCH_LLAMA},
      {"phi3", "Phi3ForCausalLM", OT_ARCH_LLAMA},
      {"mixtral", "MixtralForCausalLM", OT_ARCH_LLAMA},
      {"qwen2_moe", "Qwen2MoeForCausalLM", OT_ARCH_LLAMA},
      {"gpt2", "GPT2LMHeadModel", OT_ARCH_GPT2},
  };
  const size_t nf = sizeof fam / sizeof *fam;
  size_t f = 0;
  if (!c->model_type[0]) {
    while (f < nf && strcmp(c->architecture, fam[f].cls)) f++;
    if (f == nf)
      return ot_fail(OT_ERR_FORMAT, "%s: no \"model_type\" (expected \"llama\", \"mistral\", \"qwen2\", \"gemma\", \"phi3\", "
                     "\"mixtral\", \"qwen2_moe\" or \"gpt2\")",
                     r->label);
    snprintf(c->model_type, sizeof c->model_type, "%s", fam[f].type);
  }
  f = 0;
  while (f < nf && strcmp(c->model_type, fam[f].type)) f++;
  if (f == nf)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: model_type \"%s\" is not supported (omptensor runs \"llama\", \"mistral\", "
                                       "\"qwen2\", \"gemma\", \"phi3\", \"mixtral\", \"qwen2_moe\" and \"gpt2\")",
                   r->label, c->model_type);
  c->arch = fam[f].arch;
  /* the head: a causal LM's, not a classifier's or a bare model's */
  const char *cls = fam[f].cls;
  if (c->architecture[0] && strcmp(c->architecture, cls) != 0)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: architectures [\"%s\"] is not supported: omptensor runs %s for model_type \"%s\"",
                   r->label, c->architecture, cls, c->model_type);
  return refuse_unless(r, "quantization_config", NULL,
                       "quantized checkpoints are not read; give the unquantized weights (--dtype int8 quantizes them)");
}

/* The activations each architecture implements, by the names transformers
 * gives them: one check for run and train (train accepted any of them and
 * saved "gelu_new"; run refused all but gelu_new; a llama with a GELU
 * ran SiLU). gelu_new, gelu_pytorch_tanh and gelu_fast are one function
 * (the tanh form); exact-erf "gelu" is another and is refused. */
static const struct {
  const char *s;
  ot_act a;
  ot_arch arch;
} acts[] = {
    {"silu", OT_ACT_SILU, OT_ARCH_LLAMA},          {"swish", OT_ACT_SILU, OT_ARCH_LLAMA},
    {"gelu_new", OT_ACT_GELU_TANH, OT_ARCH_GPT2},  {"gelu_pytorch_tanh", OT_ACT_GELU_TANH, OT_ARCH_GPT2},
    {"gelu_fast", OT_ACT_GELU_TANH, OT_ARCH_GPT2},
};

static const char *act_key(ot_arch a) { return a == OT_ARCH_LLAMA ? "hidden_act" : "activation_function"; }
static ot_act arch_act(ot_arch a) { return a == OT_ARCH_LLAMA ? OT_ACT_SILU : OT_ACT_GELU_TANH; }
static const char *act_names(ot_arch a) {
  return a == OT_ARCH_LLAMA ? "silu (swish)" : "gelu_new (gelu_pytorch_tanh, gelu_fast)";
}

static ot_status get_act(const reader *r, ot_arch arch, const char *def, ot_act *out) {
  const char *key = act_key(arch);
  char name[32];
  OT_TRY(get_str(r, key, def, name, sizeof name));
  for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
    if (acts[i].arch == arch && !strcmp(name, acts[i].s)) {
      *out = acts[i].a;
      return OT_OK;
    }
  return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s \"%s\" is not supported: omptensor's %s computes %s", r->label, key, name,
                 ot_arch_name(arch), act_names(arch));
}

/* A number in [lo, hi] (def when absent), e.g. a dropout probability. */
static ot_status get_real_in(const reader *r, const char *key, double def, double lo, double hi, double *out) {
  const json_t *v = get(r, key);
  if (!v) {
    *out = def;
    return OT_OK;
  }
  if (!json_is_number(v) || !(json_number_value(v) >= lo && json_number_value(v) <= hi))
    return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" is %s, expected a number in [%g, %g]", r->label, key,
                   json_is_number(v) ? "out of range" : ot_json_kind(v), lo, hi);
  *out = json_number_value(v);
  return OT_OK;
}

/* The "type" of a RoPE parameter object: rope_type, or the older "type". */
static const char *rope_type(const json_t *v) {
  const json_t *t = json_object_get(v, "rope_type");
  if (!t) t = json_object_get(v, "type");
  return json_is_string(t) ? json_string_value(t) : NULL;
}

/* One number of a RoPE parameter object, required and positive. */
static ot_status rope_num(const reader *r, const json_t *v, const char *obj, const char *key, double *out) {
  const json_t *x = json_object_get(v, key);
  if (!json_is_number(x) || !(json_number_value(x) > 0))
    return ot_fail(OT_ERR_FORMAT, "%s: %s.%s is %s, expected a positive number (this RoPE type needs it)", r->label,
                   obj, key, x ? (json_is_number(x) ? "not positive" : ot_json_kind(x)) : "missing");
  *out = json_number_value(x);
  return OT_OK;
}

/* The keys a RoPE parameter object may have: any other (yarn's beta_fast,
 * attention_factor, mrope_section, ...) would change the numbers if ignored. */
static ot_status rope_keys(const reader *r, const json_t *v, const char *obj, int yarn) {
  static const char *const known[] = {"rope_type", "type", "factor", "low_freq_factor", "high_freq_factor",
                                      "original_max_position_embeddings", "rope_theta", "partial_rotary_factor",
                                      /* yarn only */
                                      "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor",
                                      "truncate"};
  const size_t n_known = yarn ? sizeof known / sizeof *known : 8;
  const char *k;
  const json_t *x;
  json_object_foreach((json_t *)v, k, x) {
    size_t n = 0;
    while (n < n_known && strcmp(k, known[n])) n++;
    if (n == n_known && !json_is_null(x))
      return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s.%s is not supported (omptensor's RoPE takes rope_type, factor, "
                                         "low_freq_factor, high_freq_factor, original_max_position_embeddings)",
                     r->label, obj, k);
  }
  return OT_OK;
}

/* An optional positive number of a RoPE object (def when absent or null). */
static ot_status rope_opt(const reader *r, const json_t *v, const char *obj, const char *key, double def, double *out) {
  const json_t *x = json_object_get(v, key);
  if (!x || json_is_null(x)) {
    *out = def;
    return OT_OK;
  }
  return rope_num(r, v, obj, key, out);
}

/* yarn, as transformers' _compute_yarn_parameters reads it: factor (or
 * max_position_embeddings / original), the original context (the config's
 * top-level original_max_position_embeddings first, as its
 * standardize_rope_params does, else the object's, else
 * max_position_embeddings), beta_fast 32, beta_slow 1, truncate, and the
 * attention factor (given, or from mscale / mscale_all_dim, or 0.1 ln factor + 1).
 * The correction range needs head_dim: finish_rope, after it is known. */
static double yarn_mscale(double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * log(scale) + 1.0; }

static ot_status read_yarn(const reader *r, const json_t *v, const char *obj, ot_hf_config *c) {
  c->rope_type = OT_ROPE_YARN;
  const json_t *top = get(r, "original_max_position_embeddings");
  const json_t *mp = get(r, "max_position_embeddings");
  if (top) {
    if (!json_is_number(top) || !(json_number_value(top) > 0))
      return ot_fail(OT_ERR_FORMAT, "%s: \"original_max_position_embeddings\" must be a positive number", r->label);
    c->rope_original_max_positions = json_number_value(top);
  } else {
    OT_TRY(rope_opt(r, v, obj, "original_max_position_embeddings", mp && json_is_number(mp) ? json_number_value(mp) : 0,
                    &c->rope_original_max_positions));
    if (!(c->rope_original_max_positions > 0))
      return ot_fail(OT_ERR_FORMAT, "%s: %s: yarn needs original_max_position_embeddings", r->label, obj);
  }
  OT_TRY(rope_opt(r, v, obj, "factor", 0, &c->rope_factor));
  if (!(c->rope_factor > 0)) {
    if (!mp || !json_is_number(mp))
      return ot_fail(OT_ERR_FORMAT, "%s: %s: yarn needs a factor (or max_position_embeddings)", r->label, obj);
    c->rope_factor = json_number_value(mp) / c->rope_original_max_positions;
  }
  OT_TRY(rope_opt(r, v, obj, "beta_fast", 32, &c->rope_beta_fast));
  OT_TRY(rope_opt(r, v, obj, "beta_slow", 1, &c->rope_beta_slow));
  const json_t *tr = json_object_get(v, "truncate");
  if (tr && !json_is_null(tr) && !json_is_boolean(tr))
    return ot_fail(OT_ERR_FORMAT, "%s: %s.truncate is %s, expected true or false", r->label, obj, ot_json_kind(tr));
  c->rope_truncate = !tr || json_is_null(tr) || json_is_true(tr);
  double af = 0, ms = 0, msa = 0;
  OT_TRY(rope_opt(r, v, obj, "attention_factor", 0, &af));
  OT_TRY(rope_opt(r, v, obj, "mscale", 0, &ms));
  OT_TRY(rope_opt(r, v, obj, "mscale_all_dim", 0, &msa));
  if (af > 0) c->rope_attention_factor = af;
  else if (ms > 0 && msa > 0) c->rope_attention_factor = yarn_mscale(c->rope_factor, ms) / yarn_mscale(c->rope_factor, msa);
  else c->rope_attention_factor = yarn_mscale(c->rope_factor, 1);
  return OT_OK;
}

/* What the RoPE takes from the rest of the config, once head_dim is known:
 * dynamic's original length, yarn's correction range over the pairs
 * (transformers' find_correction_range and linear_ramp_factor's singularity
 * guard). */
static void finish_rope(ot_hf_config *c) {
  /* dynamic: its original length is max_position_embeddings (_compute_dynamic_ntk_parameters) */
  if (c->arch == OT_ARCH_LLAMA && c->rope_type == OT_ROPE_DYNAMIC)
    c->rope_original_max_positions = (double)c->max_position_embeddings;
  if (c->arch != OT_ARCH_LLAMA || c->rope_type != OT_ROPE_YARN) return;
  const double dim = (double)c->head_dim, base = c->rope_theta, L = c->rope_original_max_positions;
  const double pi = 3.14159265358979323846;
  double lo = dim * log(L / (c->rope_beta_fast * 2 * pi)) / (2 * log(base));
  double hi = dim * log(L / (c->rope_beta_slow * 2 * pi)) / (2 * log(base));
  if (c->rope_truncate) lo = floor(lo), hi = ceil(hi);
  if (lo < 0) lo = 0;
  if (hi > dim - 1) hi = dim - 1;
  if (lo == hi) hi += 0.001;
  c->rope_ramp_lo = lo;
  c->rope_ramp_hi = hi;
}

/* The RoPE parameter object transformers uses: rope_scaling when it is a
 * non-empty object (4.x knows no other; 5.x's convert_rope_params_to_dict
 * takes "rope_scaling or rope_parameters"), else rope_parameters. The one
 * not used is said in a notice when it differs. *key: its name. */
static ot_status rope_object(const reader *r, const json_t **v, const char **key) {
  const json_t *sc = get(r, "rope_scaling"), *pa = get(r, "rope_parameters");
  const int use_sc = sc && (!json_is_object(sc) || json_object_size(sc) > 0);
  *v = use_sc ? sc : pa;
  *key = use_sc ? "rope_scaling" : "rope_parameters";
  if (*v && !json_is_object(*v))
    return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" is %s, expected an object or null", r->label, *key, ot_json_kind(*v));
  if (use_sc && pa && !json_equal((json_t *)sc, (json_t *)pa))
    ot_warn_once("hfconfig.rope_parameters_ignored",
                 "%s: rope_scaling and rope_parameters are both given and differ; transformers uses rope_scaling, "
                 "and so does omptensor: rope_parameters is ignored",
                 r->label);
  return OT_OK;
}

/* rope_theta: the RoPE object's own, else the top-level key, as
 * transformers 5 takes them (setdefault on the object); where both are
 * given and differ, a notice says which is used. */
static const json_t *rope_theta(const reader *r, const json_t *v, const char *key) {
  const json_t *top = get(r, "rope_theta"), *own = v ? json_object_get(v, "rope_theta") : NULL;
  if (own && json_is_null(own)) own = NULL;
  if (own && top && !json_equal((json_t *)own, (json_t *)top))
    ot_warn_once("hfconfig.rope_theta_twice",
                 "%s: \"rope_theta\" and %s.rope_theta differ; transformers 5 uses %s's, and so does omptensor",
                 r->label, key, key);
  return own ? own : top;
}

/* RoPE: plain, or linear, llama3, yarn or dynamic scaling (rope.h). Any
 * other scaling (longrope, su, ...) would silently change the numbers if
 * ignored: refused by name. */
static ot_status read_rope(const reader *r, ot_hf_config *c) {
  const json_t *v, *theta;
  const char *key;
  c->rope_type = OT_ROPE_DEFAULT;
  c->rope_factor = 1.0;
  OT_TRY(rope_object(r, &v, &key));
  theta = rope_theta(r, v, key);
  if (v) {
    const char *t = rope_type(v);
    if (t && strcmp(t, "linear") == 0) {
      c->rope_type = OT_ROPE_LINEAR;
      OT_TRY(rope_num(r, v, key, "factor", &c->rope_factor));
    } else if (t && strcmp(t, "llama3") == 0) {
      c->rope_type = OT_ROPE_LLAMA3;
      OT_TRY(rope_num(r, v, key, "factor", &c->rope_factor));
      OT_TRY(rope_num(r, v, key, "low_freq_factor", &c->rope_low_freq_factor));
      OT_TRY(rope_num(r, v, key, "high_freq_factor", &c->rope_high_freq_factor));
      OT_TRY(rope_num(r, v, key, "original_max_position_embeddings", &c->rope_original_max_positions));
      if (!(c->rope_high_freq_factor > c->rope_low_freq_factor))
        return ot_fail(OT_ERR_FORMAT, "%s: %s: high_freq_factor %g must be larger than low_freq_factor %g", r->label,
                       key, c->rope_high_freq_factor, c->rope_low_freq_factor);
    } else if (t && strcmp(t, "dynamic") == 0) {
      c->rope_type = OT_ROPE_DYNAMIC; /* against max_position_embeddings, as transformers: finish_rope */
      OT_TRY(rope_num(r, v, key, "factor", &c->rope_factor));
    } else if (t && strcmp(t, "yarn") == 0) {
      OT_TRY(read_yarn(r, v, key, c));
    } else if (!t || strcmp(t, "default") != 0) {
      return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s of type \"%s\" is not supported (omptensor implements RoPE "
                                         "default, linear, llama3, yarn and dynamic)",
                     r->label, key, t ? t : "(none given)");
    }
    OT_TRY(rope_keys(r, v, key, c->rope_type == OT_ROPE_YARN)); /* after the type: an unknown type is named first */
    const json_t *prf = json_object_get(v, "partial_rotary_factor");
    if (prf && !json_is_null(prf) && !(json_is_number(prf) && json_number_value(prf) == 1.0))
      return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s.partial_rotary_factor is not supported: RoPE rotates the whole head",
                     r->label, key);
  }
  const json_t *prf = get(r, "partial_rotary_factor");
  if (prf && !(json_is_number(prf) && json_number_value(prf) == 1.0))
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: \"partial_rotary_factor\" is not supported: RoPE rotates the whole head",
                   r->label);
  return get_pos_real(r, theta, "rope_theta", 10000.0, &c->rope_theta);
}

ot_status ot_hf_read_ids(const json_t *v, const char *label, const char *key, int64_t *ids, int *n) {
  *n = 0;
  if (!v || json_is_null(v)) return OT_OK;
  size_t k = json_is_array(v) ? json_array_size(v) : 1;
  if (k > OT_HF_MAX_EOS)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: %zu %s values; at most %d are supported", label, k, key, OT_HF_MAX_EOS);
  for (size_t i = 0; i < k; i++) {
    const json_t *x = json_is_array(v) ? json_array_get(v, i) : v;
    if (!json_is_integer(x) || json_integer_value(x) < 0)
      return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" must be a non-negative integer or a list of them", label, key);
    ids[(*n)++] = (int64_t)json_integer_value(x);
  }
  return OT_OK;
}

static ot_status read_tokens(const reader *r, ot_hf_config *c) {
  const json_t *bos = get(r, "bos_token_id");
  c->bos_token_id = -1;
  if (bos && (!json_is_integer(bos) || json_integer_value(bos) < 0))
    return ot_fail(OT_ERR_FORMAT, "%s: \"bos_token_id\" must be a non-negative integer", r->label);
  if (bos) c->bos_token_id = (int64_t)json_integer_value(bos);
  return ot_hf_read_ids(get(r, "eos_token_id"), r->label, "eos_token_id", c->eos_token_ids, &c->n_eos);
}

/* A per-layer list has one entry per layer: transformers raises
 * otherwise (its layer_type_validation), and a shorter one would leave
 * layers without a kind. */
static ot_status per_layer(const reader *r, const char *key, const json_t *list, const ot_hf_config *c) {
  if ((int64_t)json_array_size(list) == c->num_layers) return OT_OK;
  return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" has %zu entries for the %lld layers of %s: give one per layer", r->label,
                 key, json_array_size(list), (long long)c->num_layers,
                 key_of(c->arch, FIELD(num_layers), "num_hidden_layers"));
}

/* The sliding window (mistral, qwen2): sliding_window W >= 1 where it
 * applies (mistral: when given; qwen2: use_sliding_window true, or
 * "sliding_attention" entries in layer_types), else 0. A llama has none.
 * One window for every layer: a mix of windowed and full layers is refused. */
static ot_status read_window(const reader *r, ot_hf_config *c) {
  c->sliding_window = 0;
  const int llama = !strcmp(c->model_type, "llama");
  const int qwen = !strcmp(c->model_type, "qwen2") || !strcmp(c->model_type, "qwen2_moe"); /* mixtral: as mistral */
  if (llama) {
    OT_TRY(refuse_unless(r, "sliding_window", NULL, "a llama's attention is full causal attention (no window)"));
    return refuse_unless(r, "use_sliding_window", "false", "a llama's attention is full causal attention (no window)");
  }
  int use = !qwen, any_sliding = 0, any_full = 0;
  if (qwen) OT_TRY(get_bool(r, "use_sliding_window", 0, &use));
  const json_t *lt = get(r, "layer_types");
  if (lt) {
    if (!json_is_array(lt))
      return ot_fail(OT_ERR_FORMAT, "%s: \"layer_types\" is %s, expected a list", r->label, ot_json_kind(lt));
    OT_TRY(per_layer(r, "layer_types", lt, c));
    size_t i;
    const json_t *e;
    json_array_foreach(lt, i, e) {
      const char *t = json_is_string(e) ? json_string_value(e) : "";
      if (!strcmp(t, "sliding_attention")) any_sliding = 1;
      else if (!strcmp(t, "full_attention")) any_full = 1;
      else
        return ot_fail(OT_ERR_UNSUPPORTED, "%s: layer_types[%zu] is \"%s\": omptensor runs full_attention and "
                                           "sliding_attention layers", r->label, i, t);
    }
    if (qwen) use = any_sliding;
  } else if (qwen && use) { /* transformers 4.x: layers from max_window_layers on are windowed */
    const json_t *mw = get(r, "max_window_layers");
    if (mw && (!json_is_integer(mw) || json_integer_value(mw) < 0))
      return ot_fail(OT_ERR_FORMAT, "%s: \"max_window_layers\" must be a non-negative integer", r->label);
    const int64_t from = mw ? (int64_t)json_integer_value(mw) : 0;
    if (from >= c->num_layers) use = 0;
    else any_sliding = 1, any_full = from > 0;
  }
  if (use && any_sliding && any_full)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: some layers use a sliding window and others full attention (layer_types, "
                                       "max_window_layers): omptensor takes one kind for every layer",
                   r->label);
  const json_t *w = get(r, "sliding_window");
  if (!use || !w) {
    if (any_sliding && !w)
      return ot_fail(OT_ERR_FORMAT, "%s: layer_types has sliding_attention layers but no \"sliding_window\"", r->label);
    return OT_OK;
  }
  if (!json_is_integer(w) || json_integer_value(w) < 1 || json_integer_value(w) > INT32_MAX)
    return ot_fail(OT_ERR_FORMAT, "%s: \"sliding_window\" must be a positive integer", r->label);
  c->sliding_window = (int64_t)json_integer_value(w);
  return OT_OK;
}

/* An integer size of the MoE keys in [1, max]; `def` when absent (0: required). */
static ot_status moe_size(const reader *r, const char *key, int64_t def, int64_t max, int64_t *out) {
  const json_t *v = get(r, key);
  if (!v && def) {
    *out = def;
    return OT_OK;
  }
  if (!v) return ot_fail(OT_ERR_FORMAT, "%s: missing \"%s\" (an integer in [1, %lld])", r->label, key, (long long)max);
  if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max)
    return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" must be an integer in [1, %lld]", r->label, key, (long long)max);
  *out = (int64_t)json_integer_value(v);
  return OT_OK;
}

/* Mixture of experts. mixtral: num_local_experts (8) SwiGLU experts of
 * intermediate_size, num_experts_per_tok (2) per token, the chosen weights
 * renormalised. qwen2_moe: num_experts (60) of moe_intermediate_size, top
 * num_experts_per_tok (4), renormalised when norm_topk_prob (default
 * false), plus a shared expert of shared_expert_intermediate_size whose
 * output is scaled by sigmoid(shared_expert_gate). What would change the
 * math and is not implemented is refused by name: router jitter (a
 * training-time noise, but a non-zero value says the checkpoint expects
 * it), qwen2_moe's dense layers (decoder_sparse_step > 1, mlp_only_layers).
 * The router's aux-loss keys only matter for training and are ignored. */
static ot_status read_moe(const reader *r, ot_hf_config *c) {
  const int mixtral = !strcmp(c->model_type, "mixtral"), qmoe = !strcmp(c->model_type, "qwen2_moe");
  c->n_experts = c->top_k = c->moe_intermediate = c->shared_intermediate = 0;
  c->norm_topk = 0;
  if (!mixtral && !qmoe) return OT_OK;
  OT_TRY(moe_size(r, mixtral ? "num_local_experts" : "num_experts", mixtral ? 8 : 60, OT_HF_MAX_EXPERTS,
                  &c->n_experts));
  OT_TRY(moe_size(r, "num_experts_per_tok", mixtral ? 2 : 4, OT_HF_MAX_EXPERTS, &c->top_k));
  if (c->top_k > c->n_experts)
    return ot_fail(OT_ERR_FORMAT, "%s: num_experts_per_tok %lld is more than the %lld experts", r->label,
                   (long long)c->top_k, (long long)c->n_experts);
  if (mixtral) {
    c->moe_intermediate = c->intermediate_size;
    c->norm_topk = 1;
    double jitter;
    OT_TRY(get_real_in(r, "router_jitter_noise", 0, 0, 1e9, &jitter));
    if (jitter != 0)
      return ot_fail(OT_ERR_UNSUPPORTED, "%s: \"router_jitter_noise\": %g is not supported: router jitter multiplies "
                                         "the router's input by noise; omptensor routes exactly (0)",
                     r->label, jitter);
    return OT_OK;
  }
  OT_TRY(moe_size(r, "moe_intermediate_size", 1408, OT_HF_MAX_INTERMEDIATE, &c->moe_intermediate));
  OT_TRY(moe_size(r, "shared_expert_intermediate_size", 5632, OT_HF_MAX_INTERMEDIATE, &c->shared_intermediate));
  OT_TRY(get_bool(r, "norm_topk_prob", 0, &c->norm_topk));
  OT_TRY(refuse_unless(r, "decoder_sparse_step", "1",
                       "only every layer sparse is implemented (a dense MLP every few layers is not)"));
  const json_t *only = get(r, "mlp_only_layers");
  if (only && !(json_is_array(only) && json_array_size(only) == 0))
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: \"mlp_only_layers\" is not supported: omptensor's qwen2_moe has experts in "
                                       "every layer (dense MLP layers are not implemented)",
                   r->label);
  return OT_OK;
}

/* Gemma: a Llama decoder with a GELU (tanh form) gate, RMSNorm weights
 * applied as (1 + w), and the embeddings scaled by sqrt(hidden_size). Its
 * activation is "hidden_activation"; transformers ignores "hidden_act" (the
 * first Gemma configs say "gelu" there and run the tanh form) and so does
 * this. An activation other than the tanh form is refused. */
static ot_status read_gemma(const reader *r, ot_hf_config *c) {
  char name[32];
  OT_TRY(get_str(r, "hidden_activation", "gelu_pytorch_tanh", name, sizeof name));
  if (strcmp(name, "gelu_pytorch_tanh") && strcmp(name, "gelu_new") && strcmp(name, "gelu_fast"))
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: hidden_activation \"%s\" is not supported: omptensor's gemma computes "
                                       "gelu_pytorch_tanh (gelu_new, gelu_fast)",
                   r->label, name);
  c->act = OT_ACT_GELU_TANH;
  c->norm_plus_one = 1;
  c->scale_embeddings = 1;
  return OT_OK;
}

static ot_status read_llama(const reader *r, ot_hf_config *c) {
  OT_TRY(read_sizes(r, c));
  if (!c->num_kv_heads) c->num_kv_heads = c->num_heads;
  OT_TRY(get_pos_real(r, get(r, "rms_norm_eps"), "rms_norm_eps", 1e-6, &c->norm_eps));
  const int gemma = !strcmp(c->model_type, "gemma");
  OT_TRY(get_bool(r, "tie_word_embeddings", gemma, &c->tie_word_embeddings)); /* GemmaConfig ties by default */
  OT_TRY(get_bool(r, "attention_bias", 0, &c->attention_bias));
  OT_TRY(get_bool(r, "mlp_bias", 0, &c->mlp_bias));
  OT_TRY(refuse_unless(r, "attention_bias", "false", "the q, k, v, o projections have no bias here"));
  OT_TRY(refuse_unless(r, "mlp_bias", "false", "the MLP projections have no bias here"));
  /* Qwen2's q/k/v projections have biases (o_proj none): always in 4.x,
   * by "qwen2_moe"'s qkv_bias key (default true) in 5.x */
  c->qkv_bias = 0;
  if (!strcmp(c->model_type, "qwen2") || !strcmp(c->model_type, "qwen2_moe"))
    OT_TRY(get_bool(r, "qkv_bias", 1, &c->qkv_bias));
  c->fused_proj = !strcmp(c->model_type, "phi3"); /* Phi-3: qkv_proj and gate_up_proj, one matrix each */
  if (gemma) OT_TRY(read_gemma(r, c));
  else OT_TRY(get_act(r, OT_ARCH_LLAMA, "silu", &c->act));
  /* same math: transformers' pretraining_tp > 1 sums slices of the same matmuls */
  const json_t *tp = get(r, "pretraining_tp");
  if (tp && (!json_is_integer(tp) || json_integer_value(tp) < 1))
    return ot_fail(OT_ERR_FORMAT, "%s: \"pretraining_tp\" must be a positive integer", r->label);
  double drop;
  OT_TRY(get_real_in(r, "attention_dropout", 0, 0, 1, &drop)); /* inference: no dropout */
  (void)drop;
  OT_TRY(read_window(r, c));
  OT_TRY(read_moe(r, c));
  return read_rope(r, c);
}

static ot_status read_gpt2(const reader *r, ot_hf_config *c) {
  OT_TRY(read_sizes(r, c));
  if (!c->intermediate_size) c->intermediate_size = 4 * c->hidden_size; /* n_embd <= 2^20: fits */
  c->num_kv_heads = c->num_heads;
  OT_TRY(get_pos_real(r, get(r, "layer_norm_epsilon"), "layer_norm_epsilon", 1e-5, &c->norm_eps));
  OT_TRY(get_bool(r, "tie_word_embeddings", 1, &c->tie_word_embeddings));
  OT_TRY(get_act(r, OT_ARCH_GPT2, "gelu_new", &c->act));
  c->rope_theta = 0;
  c->attention_bias = c->mlp_bias = 1;
  /* training only: GPT2Config's defaults; inference runs without dropout as
   * transformers' eval() does, the trainer refuses a non-zero one */
  OT_TRY(get_real_in(r, "resid_pdrop", 0.1, 0, 1, &c->resid_pdrop));
  OT_TRY(get_real_in(r, "embd_pdrop", 0.1, 0, 1, &c->embd_pdrop));
  OT_TRY(get_real_in(r, "attn_pdrop", 0.1, 0, 1, &c->attn_pdrop));
  OT_TRY(get_pos_real(r, get(r, "initializer_range"), "initializer_range", 0.02, &c->initializer_range));
  OT_TRY(refuse_unless(r, "add_cross_attention", "false", "GPT2LMHeadModel here has no cross-attention layers"));
  /* same math here: attention is computed in f32 whatever the weights' dtype */
  int upcast;
  OT_TRY(get_bool(r, "reorder_and_upcast_attn", 0, &upcast));
  (void)upcast;
  int scale, by_layer;
  OT_TRY(get_bool(r, "scale_attn_weights", 1, &scale));
  OT_TRY(get_bool(r, "scale_attn_by_inverse_layer_idx", 0, &by_layer));
  if (!scale || by_layer)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s is not supported (attention is scaled by 1/sqrt(head_dim))", r->label,
                   !scale ? "scale_attn_weights = false" : "scale_attn_by_inverse_layer_idx = true");
  return OT_OK;
}

/* head_dim when config.json does not give it: hidden_size / heads, which
 * must then divide evenly. */
static ot_status derive_head_dim(const reader *r, ot_hf_config *c) {
  if (c->head_dim) return OT_OK;
  if (c->hidden_size % c->num_heads != 0)
    return ot_fail(OT_ERR_FORMAT, "%s: hidden size %lld is not divisible by the %lld attention heads", r->label,
                   (long long)c->hidden_size, (long long)c->num_heads);
  c->head_dim = c->hidden_size / c->num_heads;
  return OT_OK;
}

/* ---- the checks on a whole config (parsed, or filled in by a caller) ---- */

/* The parameters the sizes make, by group, with checked arithmetic: a group
 * that overflows int64 is INT64_MAX. */
typedef struct weight_group {
  const char *what; /* the fields it is made of */
  int64_t numel;
} weight_group;

static int weight_groups(const ot_hf_config *c, weight_group g[4], int64_t *total) {
  int ovf = 0;
  const int64_t D = c->hidden_size, F = c->intermediate_size, V = c->vocab_size, L = c->num_layers;
  const int64_t H = c->num_heads, KV = c->num_kv_heads, hd = c->head_dim, P = c->max_position_embeddings;
  int64_t embed = ot_sz_mul(&ovf, V, D), layer, pos = 0;
  int n = 0;
  if (c->arch == OT_ARCH_GPT2) { /* c_attn [D, 3D] + c_proj [D, D], c_fc [D, F] + c_proj [F, D], biases, 2 LayerNorms */
    int64_t attn = ot_sz_add(&ovf, ot_sz_mul3(&ovf, 4, D, D), ot_sz_mul(&ovf, 4, D));
    int64_t mlp = ot_sz_add(&ovf, ot_sz_mul3(&ovf, 2, D, F), ot_sz_add(&ovf, F, D));
    layer = ot_sz_add(&ovf, ot_sz_add(&ovf, attn, mlp), ot_sz_mul(&ovf, 4, D));
    pos = ot_sz_mul(&ovf, P, D);
    g[n++] = (weight_group){"vocab_size x n_embd (wte)", ot_sz_mul(&ovf, embed, c->tie_word_embeddings ? 1 : 2)};
    g[n++] = (weight_group){"n_positions x n_embd (wpe)", pos};
    g[n++] = (weight_group){"n_layer x the layers of n_embd, n_inner", ot_sz_mul(&ovf, L, layer)};
  } else { /* q, o [H hd, D], k, v [KV hd, D], gate, up, down [F, D], 2 RMSNorms */
    int64_t attn = ot_sz_add(&ovf, ot_sz_mul3(&ovf, 2 * H, hd, D), ot_sz_mul3(&ovf, 2 * KV, hd, D));
    int64_t mlp = ot_sz_mul3(&ovf, 3, F, D);
    if (c->n_experts) /* the experts, the router [E, D], the shared expert and its gate [1, D] */
      mlp = ot_sz_add(&ovf, ot_sz_mul(&ovf, c->n_experts, ot_sz_add(&ovf, ot_sz_mul3(&ovf, 3, c->moe_intermediate, D), D)),
                      c->shared_intermediate ? ot_sz_add(&ovf, ot_sz_mul3(&ovf, 3, c->shared_intermediate, D), D) : 0);
    layer = ot_sz_add(&ovf, ot_sz_add(&ovf, attn, mlp), ot_sz_mul(&ovf, 2, D));
    if (c->qkv_bias) layer = ot_sz_add(&ovf, layer, ot_sz_mul(&ovf, H + 2 * KV, hd));
    g[n++] = (weight_group){"vocab_size x hidden_size (embed_tokens, lm_head)",
                            ot_sz_mul(&ovf, embed, c->tie_word_embeddings ? 1 : 2)};
    g[n++] = (weight_group){"num_hidden_layers x the layers of hidden_size, intermediate_size, "
                            "num_attention_heads, num_key_value_heads, head_dim",
                            ot_sz_mul(&ovf, L, layer)};
  }
  g[n++] = (weight_group){"the final norm", ot_sz_mul(&ovf, c->arch == OT_ARCH_GPT2 ? 2 : 1, D)};
  int64_t t = 0;
  for (int i = 0; i < n; i++) t = ot_sz_add(&ovf, t, g[i].numel);
  *total = t;
  return n;
}

int64_t ot_hf_config_num_params(const ot_hf_config *c) {
  weight_group g[4];
  int64_t total;
  weight_groups(c, g, &total);
  return total == INT64_MAX ? -1 : total;
}

/* The weights, in f32, must fit in what a process can address. */
static ot_status check_weights(ot_status st, const ot_hf_config *c, const char *label) {
  weight_group g[4];
  int64_t total;
  int n = weight_groups(c, g, &total);
  if (total <= OT_HF_MAX_WEIGHT_BYTES / 4) return OT_OK;
  int big = 0;
  for (int i = 1; i < n; i++)
    if (g[i].numel > g[big].numel) big = i;
  return ot_fail(st,
                 "%s: these sizes make %.3g parameters, more than the %lld bytes (128 TiB, 2^47) a process can "
                 "address in f32; the largest part is %s: %.3g parameters. Check those fields",
                 label, (double)total, (long long)OT_HF_MAX_WEIGHT_BYTES, g[big].what, (double)g[big].numel);
}

/* Every size in range, the heads consistent, the weights addressable: what
 * the model builders rely on. `st` is the status of a failure (FORMAT for a
 * file, INVALID_ARG for a caller's struct). */
static ot_status check(ot_status st, const ot_hf_config *c, const char *label) {
  size_t n;
  const size_field *t = size_table(c->arch, &n);
  if (!t) return ot_fail(st, "%s: architecture %d is neither llama nor gpt2", label, (int)c->arch);
  for (size_t i = 0; i < n; i++) {
    int64_t v = field_val(c, &t[i]);
    if (v < 1 || v > t[i].max) return out_of_range(st, label, &t[i], v);
  }
  const char *heads = key_of(c->arch, FIELD(num_heads), "num_heads");
  const char *kv = key_of(c->arch, FIELD(num_kv_heads), "num_key_value_heads");
  if (c->num_kv_heads < 1 || c->num_heads % c->num_kv_heads != 0)
    return ot_fail(st, "%s: %s (%lld) is not a multiple of %s (%lld)", label, heads, (long long)c->num_heads, kv,
                   (long long)c->num_kv_heads);
  if (c->head_dim < 1 || c->head_dim > OT_HF_MAX_HEAD_DIM)
    return ot_fail(st, "%s: head_dim %lld (%s / %s) is outside [1, %d] (%s)", label, (long long)c->head_dim,
                   key_of(c->arch, FIELD(hidden_size), "hidden_size"), heads, OT_HF_MAX_HEAD_DIM, WHY_HEAD_DIM);
  if (c->arch == OT_ARCH_LLAMA && c->head_dim % 2 != 0)
    return ot_fail(st, "%s: head_dim %lld is odd; RoPE rotates pairs of dimensions", label, (long long)c->head_dim);
  if (c->arch == OT_ARCH_GPT2 && c->head_dim * c->num_heads != c->hidden_size)
    return ot_fail(st, "%s: n_head %lld x head_dim %lld is not n_embd %lld", label, (long long)c->num_heads,
                   (long long)c->head_dim, (long long)c->hidden_size);
  /* gemma: the Llama decoder with a GELU (tanh) gate */
  const ot_act want = c->arch == OT_ARCH_LLAMA && c->norm_plus_one ? OT_ACT_GELU_TANH : arch_act(c->arch);
  if (c->act != want)
    return ot_fail(st, "%s: %s %d is not supported: omptensor's %s computes %s", label, act_key(c->arch), (int)c->act,
                   ot_arch_name(c->arch), act_names(c->arch));
  if (c->arch == OT_ARCH_LLAMA && (c->attention_bias || c->mlp_bias))
    return ot_fail(st, "%s: %s is not supported: the llama projections have no biases here", label,
                   c->attention_bias ? "attention_bias" : "mlp_bias");
  if (c->n_experts && (c->arch != OT_ARCH_LLAMA || c->n_experts > OT_HF_MAX_EXPERTS || c->top_k < 1 ||
                       c->top_k > c->n_experts || c->moe_intermediate < 1 ||
                       c->moe_intermediate > OT_HF_MAX_INTERMEDIATE || c->shared_intermediate < 0 ||
                       c->shared_intermediate > OT_HF_MAX_INTERMEDIATE))
    return ot_fail(st, "%s: %lld experts, %lld per token, of intermediate %lld (shared %lld): need 1 <= "
                       "num_experts_per_tok <= experts <= %d and intermediate sizes in [1, %d] (a llama decoder's)",
                   label, (long long)c->n_experts, (long long)c->top_k, (long long)c->moe_intermediate,
                   (long long)c->shared_intermediate, OT_HF_MAX_EXPERTS, OT_HF_MAX_INTERMEDIATE);
  if (!(c->norm_eps > 0 && c->norm_eps <= DBL_MAX))
    return ot_fail(st, "%s: %s %g is not a positive number", label,
                   c->arch == OT_ARCH_LLAMA ? "rms_norm_eps" : "layer_norm_epsilon", c->norm_eps);
  /* RoPE computes its frequencies in f32 (transformers too): a theta that
   * f32 rounds to 0 or infinity gives no rotation or NaN */
  if (c->arch == OT_ARCH_LLAMA && !(c->rope_theta > 0 && c->rope_theta <= FLT_MAX && (float)c->rope_theta > 0))
    return ot_fail(st, "%s: rope_theta %g is not a positive number that f32 holds (%g to %g; RoPE computes in f32)",
                   label, c->rope_theta, (double)FLT_TRUE_MIN, (double)FLT_MAX);
  if (c->arch == OT_ARCH_LLAMA && c->rope_type != OT_ROPE_DEFAULT) {
    /* what the kernels need (rope.h), and a config's ranges on top; the
     * kernels take f32 (a larger double does not convert) */
    const double nums[] = {c->rope_factor, c->rope_low_freq_factor, c->rope_high_freq_factor,
                           c->rope_original_max_positions, c->rope_ramp_lo, c->rope_ramp_hi, c->rope_attention_factor};
    const char *why = NULL;
    for (size_t i = 0; !why && i < sizeof nums / sizeof *nums; i++)
      if (!(fabs(nums[i]) <= FLT_MAX)) why = "a number beyond f32's range";
    if (!why) why = ot_rope_problem(ot_hf_config_rope(c));
    const int dyn = c->rope_type == OT_ROPE_DYNAMIC, l3 = c->rope_type == OT_ROPE_LLAMA3;
    if (!why && !(c->rope_factor <= (dyn ? 1e3 : 1e6) && (!dyn || c->rope_factor >= 1)))
      why = "factor out of range (dynamic: 1 to 1000; others: at most 1e6)";
    if (!why && l3 && !(c->rope_high_freq_factor <= 1e6 && c->rope_original_max_positions <= 1e9))
      why = "high_freq_factor above 1e6 or original_max_position_embeddings above 1e9";
    if (!why && c->rope_type == OT_ROPE_YARN && !(c->rope_attention_factor <= 1e3))
      why = "attention factor above 1000";
    if (why)
      return ot_fail(st, "%s: RoPE %s with factor %g, low/high_freq_factor %g/%g, original_max_position_embeddings %g "
                         "is not usable: %s",
                     label, ot_rope_type_name(c->rope_type), c->rope_factor, c->rope_low_freq_factor,
                     c->rope_high_freq_factor, c->rope_original_max_positions, why);
  }
  return check_weights(st, c, label);
}

ot_rope ot_hf_config_rope(const ot_hf_config *c) {
  ot_rope r = {(float)c->rope_theta,
               c->rope_type,
               (float)c->rope_factor,
               (float)c->rope_low_freq_factor,
               (float)c->rope_high_freq_factor,
               (float)c->rope_original_max_positions,
               (float)c->rope_ramp_lo,
               (float)c->rope_ramp_hi,
               (float)c->rope_attention_factor};
  return r;
}

ot_status ot_hf_config_check(const ot_hf_config *c, const char *label) {
  if (!c) return ot_fail(OT_ERR_INVALID_ARG, "ot_hf_config_check: NULL config");
  return check(OT_ERR_INVALID_ARG, c, label ? label : "config");
}

static ot_status read_config(const reader *r, ot_hf_config *c) {
  if (!json_is_object(r->root))
    return ot_fail(OT_ERR_FORMAT, "%s: the config is %s, expected an object", r->label, ot_json_kind(r->root));
  OT_TRY(resolve_arch(r, c));
  OT_TRY(c->arch == OT_ARCH_LLAMA ? read_llama(r, c) : read_gpt2(r, c));
  OT_TRY(derive_head_dim(r, c));
  finish_rope(c);
  OT_TRY(check(OT_ERR_FORMAT, c, r->label));
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

/* A file that is a safetensors checkpoint, by its name or its first bytes
 * (an 8-byte little-endian header length that fits, then '{'). */
static int is_safetensors(const char *path, const char *text, size_t len) {
  size_t n = strlen(path);
  if (n >= 12 && !strcmp(path + n - 12, ".safetensors")) return 1;
  if (!text || len < 10) return 0;
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | (unsigned char)text[i];
  return hl <= len - 8 && text[8] == '{';
}

/* Issue 14: `run MODEL/model.safetensors` said "invalid JSON config". */
static ot_status not_a_model_dir(const char *path) {
  return ot_fail(OT_ERR_INVALID_ARG,
                 "%s is a safetensors file, not a model directory: give the directory that holds config.json and "
                 "the weights (model.safetensors or its shards); omptensor inspect reads a single .safetensors file",
                 path);
}

/* A file given as the model that is none of what a model can be (a
 * directory, a GGUF file, a config.json): said as such, with its first
 * bytes, rather than as a JSON syntax error. */
static ot_status not_a_model(const char *path, const char *text, size_t len) {
  char m[5];
  ot_gguf_magic_text(text, len, m);
  return ot_fail(OT_ERR_FORMAT, "%s: not a model: not a GGUF file (magic '%s', expected 'GGUF') nor a config.json "
                 "(JSON); give a model directory or a .gguf file", path, m);
}

/* Whether a file that failed to parse as JSON was meant to be JSON: named
 * *.json, or it starts (after white space) with '{'. */
static int meant_as_json(const char *path, const char *text, size_t len) {
  size_t n = strlen(path), i = 0;
  if (n >= 5 && !strcmp(path + n - 5, ".json")) return 1;
  while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) i++;
  return i < len && text[i] == '{';
}

ot_status ot_hf_config_load(const char *path, ot_hf_config *out) {
  if (!path || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_hf_config_load: NULL argument");
  int dir = ot_io_is_dir(path) == 1;
  if (!dir && is_safetensors(path, NULL, 0)) return not_a_model_dir(path);
  /* a GGUF file: its metadata as the config.json it stands for */
  if (!dir && ot_gguf_is_file(path)) return ot_hf_config_from_gguf(path, out);
  char *file = dir ? ot_io_join(path, "config.json") : NULL;
  const char *p = file ? file : path;
  char *text;
  size_t len;
  ot_status s = ot_io_read_text(p, OT_CONFIG_MAX_BYTES, &text, &len);
  if (s == OT_OK) {
    s = ot_hf_config_parse(text, len, p, out);
    if (s == OT_ERR_FORMAT && !dir && is_safetensors(p, text, len)) s = not_a_model_dir(path);
    else if (s == OT_ERR_FORMAT && !dir && !meant_as_json(p, text, len)) s = not_a_model(path, text, len);
    free(text);
  }
  free(file);
  return s;
}

const char *ot_arch_name(ot_arch a) {
  return a == OT_ARCH_LLAMA ? "llama" : a == OT_ARCH_GPT2 ? "gpt2" : "?";
}
