/* gguf_config.c — a GGUF file's metadata as the config.json it stands for
 * (hfconfig.h, ot_hf_config_load on a .gguf path).
 *
 * Why through config.json: the keys are written out as the Hugging Face
 * config llama.cpp's converter read them from, and that text goes through
 * ot_hf_config_parse, so a GGUF model meets every check, default and
 * refusal a Hugging Face one does (one reader of the math, not two). */
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
  json_t *o;
} ctx;

static const char *key(const ctx *c, const char *k) {
  static _Thread_local char buf[128];
  snprintf(buf, sizeof buf, "%s.%s", c->arch, k);
  return buf;
}

/* {arch}.k as the integer field hf (required: a missing key is an error) */
static ot_status put_int(ctx *c, const char *k, const char *hf, int required) {
  int64_t v;
  if (!ot_gguf_get_int(c->g, key(c, k), &v)) {
    if (!required) return OT_OK;
    return ot_fail(OT_ERR_FORMAT, "%s: metadata key %s is missing (or not an integer); it gives %s", c->path, key(c, k), hf);
  }
  json_object_set_new(c->o, hf, json_integer((json_int_t)v));
  return OT_OK;
}

static ot_status put_real(ctx *c, const char *k, const char *hf) {
  double v;
  if (ot_gguf_get_float(c->g, key(c, k), &v)) json_object_set_new(c->o, hf, json_real(v));
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
  ot_status s = ot_io_open_read(c->path, &fd, &size);
  if (s == OT_OK) {
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

static ot_status rope(ctx *c, int64_t head_dim) {
  double theta = 10000;
  ot_gguf_get_float(c->g, key(c, "rope.freq_base"), &theta);
  json_object_set_new(c->o, "rope_theta", json_real(theta));
  int64_t dims;
  if (ot_gguf_get_int(c->g, key(c, "rope.dimension_count"), &dims) && dims != head_dim)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s is %lld but the heads are %lld wide: partial rotary embeddings are not "
                   "supported", c->path, key(c, "rope.dimension_count"), (long long)dims, (long long)head_dim);
  const char *type = ot_gguf_get_string(c->g, key(c, "rope.scaling.type"));
  const ot_gguf_tensor *freqs = ot_gguf_find_tensor(c->g, "rope_freqs.weight");
  if (freqs && (!type || !strcmp(type, "none"))) return llama3_from_tensor(c, freqs, head_dim, theta);
  if (!type || !strcmp(type, "none")) return OT_OK;
  double factor = 0;
  int64_t orig = 0;
  ot_gguf_get_float(c->g, key(c, "rope.scaling.factor"), &factor);
  json_t *r = json_object();
  json_object_set_new(r, "rope_type", json_string(type)); /* linear, yarn: the names transformers uses */
  json_object_set_new(r, "factor", json_real(factor));
  if (ot_gguf_get_int(c->g, key(c, "rope.scaling.original_context_length"), &orig))
    json_object_set_new(r, "original_max_position_embeddings", json_integer((json_int_t)orig));
  json_object_set_new(c->o, "rope_scaling", r);
  return OT_OK;
}

static ot_status fill(ctx *c) {
  const ot_gguf *g = c->g;
  if (!c->arch)
    return ot_fail(OT_ERR_FORMAT, "%s: no general.architecture: not a model file llama.cpp wrote", c->path);
  const int llama = !strcmp(c->arch, "llama"), qwen2 = !strcmp(c->arch, "qwen2");
  if (!llama && !qwen2)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported from GGUF (omptensor builds 'llama' "
                   "(Llama, Mistral) and 'qwen2' from GGUF files; for others give the Hugging Face checkpoint)",
                   c->path, c->arch);
  int64_t ne = 0;
  if (ot_gguf_get_int(g, key(c, "expert_count"), &ne) && ne > 0)
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s is %lld: mixture-of-experts GGUF files (ffn_*_exps tensors) are not "
                   "supported yet; give the Hugging Face checkpoint", c->path, key(c, "expert_count"), (long long)ne);
  json_object_set_new(c->o, "model_type", json_string(c->arch));
  OT_TRY(put_int(c, "embedding_length", "hidden_size", 1));
  OT_TRY(put_int(c, "feed_forward_length", "intermediate_size", 1));
  OT_TRY(put_int(c, "block_count", "num_hidden_layers", 1));
  OT_TRY(put_int(c, "attention.head_count", "num_attention_heads", 1));
  OT_TRY(put_int(c, "attention.head_count_kv", "num_key_value_heads", 0));
  OT_TRY(put_int(c, "context_length", "max_position_embeddings", 1));
  OT_TRY(put_real(c, "attention.layer_norm_rms_epsilon", "rms_norm_eps"));
  int64_t kl = 0, vl = 0, hidden = 0, heads = 0;
  ot_gguf_get_int(g, key(c, "embedding_length"), &hidden);
  ot_gguf_get_int(g, key(c, "attention.head_count"), &heads);
  const int has_kl = ot_gguf_get_int(g, key(c, "attention.key_length"), &kl);
  if (has_kl) {
    if (ot_gguf_get_int(g, key(c, "attention.value_length"), &vl) && vl != kl)
      return ot_fail(OT_ERR_UNSUPPORTED, "%s: key heads %lld wide and value heads %lld: not supported", c->path,
                     (long long)kl, (long long)vl);
    json_object_set_new(c->o, "head_dim", json_integer((json_int_t)kl));
  }
  const int64_t head_dim = has_kl ? kl : heads > 0 ? hidden / heads : 0;
  /* the vocabulary: the key, else the tokenizer's list, else the table's rows */
  int64_t vocab = 0;
  const ot_gguf_tensor *emb = ot_gguf_find_tensor(g, "token_embd.weight");
  uint64_t ntok = 0;
  ot_gguf_vtype et;
  if (!ot_gguf_get_array(g, "tokenizer.ggml.tokens", &et, &ntok)) ntok = 0;
  if (!ot_gguf_get_int(g, key(c, "vocab_size"), &vocab)) vocab = emb && emb->ndim == 2 ? emb->shape[0] : (int64_t)ntok;
  json_object_set_new(c->o, "vocab_size", json_integer((json_int_t)vocab));
  json_object_set_new(c->o, "tie_word_embeddings", json_boolean(!ot_gguf_find_tensor(g, "output.weight")));
  int64_t id;
  if (ot_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &id)) json_object_set_new(c->o, "bos_token_id", json_integer(id));
  if (ot_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &id)) json_object_set_new(c->o, "eos_token_id", json_integer(id));
  return rope(c, head_dim);
}

ot_status ot_hf_config_from_gguf(const char *path, ot_hf_config *out) {
  ot_gguf *g;
  OT_TRY(ot_gguf_open(path, &g));
  ctx c = {g, path, ot_gguf_get_string(g, "general.architecture"), json_object()};
  ot_status s = c.o ? fill(&c) : ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  char *text = s == OT_OK ? json_dumps(c.o, JSON_COMPACT) : NULL;
  if (s == OT_OK && !text) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  if (s == OT_OK) s = ot_hf_config_parse(text, strlen(text), path, out);
  free(text);
  json_decref(c.o);
  ot_gguf_close(g);
  return s;
}
