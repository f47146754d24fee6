/* gguf_config.c — a GGUF file's metadata as the config.json it stands for
 * (hfconfig.h, ot_hf_config_load on a .gguf path).
 *
 * Why through config.json: the keys are written out as the Hugging Face
 * config llama.cpp's converter read them from, and that text goes through
 * ot_hf_config_parse, so a GGUF model meets every check, default and
 * refusal a Hugging Face one does (one reader of the math, not two).
 *
 * Each key is read at the one type llama.cpp's loader reads it as (u32
 * sizes and token ids, f32 numbers, strings): another type, or a float
 * that is not finite, is refused by name, never taken as missing (which
 * would quietly give the default). A refusal of the config.json reader
 * names the metadata key its field came from. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "io/fileio.h"
#include "omptensor/gguf.h"
#include "omptensor/hfconfig.h"

typedef struct ctx {
  const ot_gguf *g;
  const char *path, *arch;
  const unsigned char *mem; /* the file's bytes when parsed from memory (NULL: read path) */
  json_t *o;
  json_t *from; /* {config.json field: the metadata key it came from}, for messages */
} ctx;

static const char *key(const ctx *c, const char *k) {
  static _Thread_local char buf[128];
  snprintf(buf, sizeof buf, "%s.%s", c->arch, k);
  return buf;
}

/* A key of exactly the type llama.cpp's loader reads it as (u32 sizes and
 * ids, f32 numbers, strings): another type or a float that is not finite is
 * refused by name (ot_gguf_expect), never read as missing. *has: given. */
static ot_status read_u32(const ctx *c, const char *k, int *has, int64_t *v) {
  OT_TRY(ot_gguf_expect(c->g, k, OT_GGUF_V_U32, has));
  if (*has) ot_gguf_get_int(c->g, k, v);
  return OT_OK;
}

static ot_status read_f32(const ctx *c, const char *k, int *has, double *v) {
  OT_TRY(ot_gguf_expect(c->g, k, OT_GGUF_V_F32, has));
  if (*has) ot_gguf_get_float(c->g, k, v);
  return OT_OK;
}

static ot_status read_str(const ctx *c, const char *k, const char **v) {
  int has;
  OT_TRY(ot_gguf_expect(c->g, k, OT_GGUF_V_STRING, &has));
  *v = has ? ot_gguf_get_string(c->g, k) : NULL;
  return OT_OK;
}

/* Field hf of config.json from metadata key k, remembered for messages. */
static void put(ctx *c, const char *hf, const char *k, json_t *v) {
  json_object_set_new(c->o, hf, v);
  json_object_set_new(c->from, hf, json_string(k));
}

/* {arch}.k (a u32) as the integer field hf; required: missing is an error
 * (llama.cpp's loader requires it too). */
static ot_status put_int(ctx *c, const char *k, const char *hf, int required) {
  int64_t v = 0;
  int has;
  OT_TRY(read_u32(c, key(c, k), &has, &v));
  if (!has && required)
    return ot_fail(OT_ERR_FORMAT, "%s: metadata key %s is missing; it gives %s", c->path, key(c, k), hf);
  if (has) put(c, hf, key(c, k), json_integer((json_int_t)v));
  return OT_OK;
}

/* Llama 3.1 / 3.2 files carry no rope scaling keys: llama.cpp's converter
 * stores the llama3 per-frequency factors as a tensor, rope_freqs.weight.
 * The config had llama3 scaling with factor 8 (3.1) or 32 (3.2), low 1,
 * high 4, original 8192: find the one whose factors equal the tensor's (so
 * a model with other factors is refused, never run with wrong RoPE). */
static ot_status llama3_from_tensor(ctx *c, const ot_gguf_tensor *t, int64_t head_dim, double theta) {
  const int64_t n = head_dim / 2;
  if (t->type != OT_GGUF_F32 || t->ndim != 1 || t->shape[0] != n)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: rope_freqs.weight is not %lld F32 values; its RoPE cannot be read", c->path,
                   (long long)n);
  float *f = malloc((size_t)n * sizeof *f);
  if (!f) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", c->path);
  int fd;
  uint64_t size;
  ot_status s = OT_OK;
  if (c->mem) { /* parsed from memory: the parser checked the tensor lies inside it */
    memcpy(f, c->mem + t->offset, (size_t)n * sizeof *f);
  } else if ((s = ot_io_open_read(c->path, &fd, &size)) == OT_OK) {
    s = ot_io_pread_full(fd, f, (size_t)n * sizeof *f, t->offset, c->path);
    close(fd);
  }
  static const double factors[] = {8, 32, 16, 4};
  const double low = 1, high = 4, orig = 8192;
  double found = 0;
  for (size_t k = 0; s == OT_OK && !found && k < sizeof factors / sizeof factors[0]; k++) {
    int ok = 1;
    for (int64_t i = 0; ok && i < n; i++) { /* transformers' _compute_llama3_parameters, as a divisor */
      const double freq = pow(theta, -2.0 * (double)i / (double)head_dim), wl = 2 * 3.14159265358979323846 / freq;
      double div = 1;
      if (wl > orig / low) div = factors[k];
      else if (wl >= orig / high) {
        const double sm = (orig / wl - low) / (high - low);
        div = 1 / ((1 - sm) / factors[k] + sm);
      }
      ok = fabs(f[i] - div) <= 1e-3 * div;
    }
    if (ok) found = factors[k];
  }
  free(f);
  OT_TRY(s);
  if (!found)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: rope_freqs.weight holds RoPE frequency factors that are not Llama 3's "
                   "(factor 4, 8, 16 or 32, low 1, high 4, original 8192): that scaling is not supported", c->path);
  json_t *r = json_object();
  json_object_set_new(r, "rope_type", json_string("llama3"));
  json_object_set_new(r, "factor", json_real(found));
  json_object_set_new(r, "low_freq_factor", json_real(low));
  json_object_set_new(r, "high_freq_factor", json_real(high));
  json_object_set_new(r, "original_max_position_embeddings", json_integer((json_int_t)orig));
  json_object_set_new(c->o, "rope_scaling", r);
  return OT_OK;
}

/* RoPE as llama.cpp's loader and context read it: rope.freq_base (default
 * 10000); rope.scaling.factor (or the older rope.scale_linear), 0 or 1
 * meaning none, with rope.scaling.type (default linear; "none" never
 * scales); Llama 3's factors as the tensor rope_freqs.weight. */
static ot_status rope(ctx *c, int64_t head_dim) {
  double theta = 10000, factor = 0;
  int64_t dims = 0, orig = 0;
  int has;
  OT_TRY(read_f32(c, key(c, "rope.freq_base"), &has, &theta));
  put(c, "rope_theta", key(c, "rope.freq_base"), json_real(theta));
  OT_TRY(read_u32(c, key(c, "rope.dimension_count"), &has, &dims));
  if (has && dims != head_dim)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s is %lld but the heads are %lld wide: partial rotary embeddings are not "
                   "supported", c->path, key(c, "rope.dimension_count"), (long long)dims, (long long)head_dim);
  const char *type;
  char fkey[128];
  OT_TRY(read_str(c, key(c, "rope.scaling.type"), &type));
  snprintf(fkey, sizeof fkey, "%s", key(c, "rope.scaling.factor"));
  OT_TRY(read_f32(c, fkey, &has, &factor));
  if (!has) {
    snprintf(fkey, sizeof fkey, "%s", key(c, "rope.scale_linear"));
    OT_TRY(read_f32(c, fkey, &has, &factor));
  }
  int has_orig;
  OT_TRY(read_u32(c, key(c, "rope.scaling.original_context_length"), &has_orig, &orig));
  /* llama.cpp: no type is linear, a factor of 0 or 1 no scaling, and
   * "none" never scales */
  if (!type) type = "linear";
  const int none = !strcmp(type, "none") || (!strcmp(type, "linear") && (factor == 0 || factor == 1));
  const ot_gguf_tensor *freqs = ot_gguf_find_tensor(c->g, "rope_freqs.weight");
  if (none) return freqs ? llama3_from_tensor(c, freqs, head_dim, theta) : OT_OK;
  if (freqs)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: rope_freqs.weight together with %s RoPE scaling (%s) is not supported",
                   c->path, type, key(c, "rope.scaling.type"));
  json_t *r = json_object();
  json_object_set_new(r, "rope_type", json_string(type)); /* linear, yarn: the names transformers uses */
  json_object_set_new(r, "factor", json_real(factor));
  if (has_orig) json_object_set_new(r, "original_max_position_embeddings", json_integer((json_int_t)orig));
  put(c, "rope_scaling", fkey, r);
  return OT_OK;
}

/* An integer field already put (0 when absent). */
static int64_t got(const ctx *c, const char *hf) { return (int64_t)json_integer_value(json_object_get(c->o, hf)); }

static ot_status fill(ctx *c) {
  const ot_gguf *g = c->g;
  OT_TRY(read_str(c, "general.architecture", &c->arch));
  if (!c->arch)
    return ot_fail(OT_ERR_FORMAT, "%s: no general.architecture: not a model file llama.cpp wrote", c->path);
  const int llama = !strcmp(c->arch, "llama"), qwen2 = !strcmp(c->arch, "qwen2");
  if (!llama && !qwen2)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported from GGUF (omptensor builds 'llama' "
                   "(Llama, Mistral) and 'qwen2' from GGUF files; for others give the Hugging Face checkpoint)",
                   c->path, c->arch);
  int64_t ne = 0, kl = 0, vl = 0, vocab = 0, id = 0;
  int has;
  OT_TRY(read_u32(c, key(c, "expert_count"), &has, &ne));
  if (ne > 0)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s is %lld: mixture-of-experts GGUF files (ffn_*_exps tensors) are not "
                   "supported yet; give the Hugging Face checkpoint", c->path, key(c, "expert_count"), (long long)ne);
  json_object_set_new(c->o, "model_type", json_string(c->arch));
  OT_TRY(put_int(c, "embedding_length", "hidden_size", 1));
  OT_TRY(put_int(c, "feed_forward_length", "intermediate_size", 1));
  OT_TRY(put_int(c, "block_count", "num_hidden_layers", 1));
  OT_TRY(put_int(c, "attention.head_count", "num_attention_heads", 1));
  OT_TRY(put_int(c, "attention.head_count_kv", "num_key_value_heads", 0));
  OT_TRY(put_int(c, "context_length", "max_position_embeddings", 1));
  double eps = 0;
  OT_TRY(read_f32(c, key(c, "attention.layer_norm_rms_epsilon"), &has, &eps));
  if (!has) /* llama.cpp requires it for these architectures: no default to guess */
    return ot_fail(OT_ERR_FORMAT, "%s: metadata key %s is missing; it gives rms_norm_eps", c->path,
                   key(c, "attention.layer_norm_rms_epsilon"));
  put(c, "rms_norm_eps", key(c, "attention.layer_norm_rms_epsilon"), json_real(eps));
  int has_kl, has_vl;
  OT_TRY(read_u32(c, key(c, "attention.key_length"), &has_kl, &kl));
  OT_TRY(read_u32(c, key(c, "attention.value_length"), &has_vl, &vl));
  if (has_kl && has_vl && vl != kl)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: key heads %lld wide and value heads %lld: not supported", c->path,
                   (long long)kl, (long long)vl);
  if (has_kl) put(c, "head_dim", key(c, "attention.key_length"), json_integer((json_int_t)kl));
  const int64_t hidden = got(c, "hidden_size"), heads = got(c, "num_attention_heads");
  const int64_t head_dim = has_kl ? kl : heads > 0 ? hidden / heads : 0;
  /* the vocabulary: the key, else the table's rows, else the tokenizer's list */
  const ot_gguf_tensor *emb = ot_gguf_find_tensor(g, "token_embd.weight");
  uint64_t ntok = 0;
  ot_gguf_vtype et;
  if (!ot_gguf_get_array(g, "tokenizer.ggml.tokens", &et, &ntok)) ntok = 0;
  OT_TRY(read_u32(c, key(c, "vocab_size"), &has, &vocab));
  if (has) put(c, "vocab_size", key(c, "vocab_size"), json_integer((json_int_t)vocab));
  else json_object_set_new(c->o, "vocab_size", json_integer(emb && emb->ndim == 2 ? emb->shape[0] : (json_int_t)ntok));
  json_object_set_new(c->o, "tie_word_embeddings", json_boolean(!ot_gguf_find_tensor(g, "output.weight")));
  OT_TRY(read_u32(c, "tokenizer.ggml.bos_token_id", &has, &id));
  if (has) put(c, "bos_token_id", "tokenizer.ggml.bos_token_id", json_integer(id));
  OT_TRY(read_u32(c, "tokenizer.ggml.eos_token_id", &has, &id));
  if (has) put(c, "eos_token_id", "tokenizer.ggml.eos_token_id", json_integer(id));
  return rope(c, head_dim);
}

/* A refusal of config.json's reader names config.json's fields: say which
 * metadata key the first one it names came from. */
static ot_status name_key(const ctx *c, ot_status s) {
  const char *msg = ot_last_error(), *first = NULL, *field, *k = NULL;
  json_t *v;
  json_object_foreach(c->from, field, v) {
    const char *at = strstr(msg, field);
    if (at && (!first || at < first)) first = at, k = json_string_value(v);
  }
  if (!k) return s;
  char m[1024];
  snprintf(m, sizeof m, "%s", msg);
  return ot_fail(s, "%s (metadata key %s)", m, k);
}

static ot_status from_gguf(const ot_gguf *g, const char *path, const unsigned char *mem, ot_hf_config *out) {
  ctx c = {g, path, NULL, mem, json_object(), json_object()};
  ot_status s = c.o && c.from ? fill(&c) : ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  char *text = s == OT_OK ? json_dumps(c.o, JSON_COMPACT) : NULL;
  if (s == OT_OK && !text) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  if (s == OT_OK && (s = ot_hf_config_parse(text, strlen(text), path, out)) != OT_OK) s = name_key(&c, s);
  free(text);
  json_decref(c.o);
  json_decref(c.from);
  return s;
}

ot_status ot_hf_config_from_gguf(const char *path, ot_hf_config *out) {
  if (!path || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_hf_config_from_gguf: NULL argument");
  ot_gguf *g;
  OT_TRY(ot_gguf_open(path, &g));
  ot_status s = from_gguf(g, path, NULL, out);
  ot_gguf_close(g);
  return s;
}

ot_status ot_hf_config_from_gguf_mem(const void *data, size_t len, const char *label, ot_hf_config *out) {
  if (!label || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_hf_config_from_gguf_mem: NULL argument");
  ot_gguf *g;
  OT_TRY(ot_gguf_open_mem(data, len, label, &g));
  ot_status s = from_gguf(g, label, data, out);
  ot_gguf_close(g);
  return s;
}
