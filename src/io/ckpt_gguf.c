/* ckpt_gguf.c — a GGUF file as a checkpoint (safetensors.h, ot_ckpt_is_gguf):
 * llama.cpp's tensor names mapped to the Hugging Face names the models ask
 * for, ggml types to omptensor dtypes, and the reads that undo what
 * llama.cpp's converter changed.
 *
 * Why a checkpoint and not a model loader of its own: the model builders
 * (llama.c) then load a GGUF file through the same checked path as a
 * safetensors one (names, shapes against the config, dtypes, progress,
 * host-memory checks), and the planner sees the same weights. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "io/ckpt_internal.h"
#include "io/fileio.h"
#include "io/st_internal.h"

/* llama.cpp's names (gguf-py's constants, MODEL_TENSOR) for the llama
 * family, and the Hugging Face names they were converted from. */
static const struct { const char *gguf, *hf; } GLOBAL[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};
static const struct { const char *gguf, *hf; } LAYER[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},     {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},     {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},     {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},      {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

/* The Hugging Face name of a GGUF tensor (malloc'd); a name with no
 * mapping keeps its GGUF name, so it is listed but no model asks for it. */
static char *hf_name(const char *g) {
  for (size_t i = 0; i < sizeof GLOBAL / sizeof GLOBAL[0]; i++)
    if (!strcmp(g, GLOBAL[i].gguf)) return strdup(GLOBAL[i].hf);
  int layer, used = 0;
  if (sscanf(g, "blk.%d.%n", &layer, &used) == 1 && used > 0 && layer >= 0)
    for (size_t i = 0; i < sizeof LAYER / sizeof LAYER[0]; i++)
      if (!strcmp(g + used, LAYER[i].gguf)) {
        char buf[128];
        snprintf(buf, sizeof buf, "model.layers.%d.%s", layer, LAYER[i].hf);
        return strdup(buf);
      }
  return strdup(g);
}

static int ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && !strcmp(s + a - b, tail);
}

static ot_status dtype_of(const char *path, const ot_gguf_tensor *t, ot_dtype *out) {
  switch (t->type) {
  case OT_GGUF_F32: *out = OT_F32; return OT_OK;
  case OT_GGUF_F16: *out = OT_F16; return OT_OK;
  case OT_GGUF_BF16: *out = OT_BF16; return OT_OK;
  case OT_GGUF_Q4_0: *out = OT_Q4B; return OT_OK;
  case OT_GGUF_Q8_0: *out = OT_Q8B; return OT_OK;
  case OT_GGUF_Q4_K: *out = OT_Q4K; return OT_OK;
  case OT_GGUF_Q6_K: *out = OT_Q6K; return OT_OK;
  default: {
    const char *n = ot_gguf_type_name(t->type);
    return ot_fail(OT_ERR_UNSUPPORTED,
                   "%s: tensor '%s' is ggml type %s (%u), which omptensor cannot run yet (it runs F32, F16, BF16, Q8_0, "
                   "Q4_0, Q4_K and Q6_K): convert the model with llama.cpp's llama-quantize to one of those "
                   "(e.g. Q4_K_M), or give the Hugging Face checkpoint",
                   path, t->name, n ? n : "?", t->type);
  }
  }
}

/* llama.cpp's convert_hf_to_gguf.py permutes the rows of llama's q_proj and
 * k_proj (LlamaModel.permute) so that each head's two RoPE halves are
 * interleaved, the layout its kernels rotate; the Hugging Face models
 * rotate halves. Other architectures (qwen2) are converted unpermuted. */
static ot_status heads_for(const ot_ckpt *c, const char *path, const ot_gguf_tensor *t, int llama, int *heads) {
  *heads = 0;
  if (!llama) return OT_OK;
  const int q = ends_with(t->name, ".attn_q.weight") || ends_with(t->name, ".attn_q.bias");
  const int k = ends_with(t->name, ".attn_k.weight") || ends_with(t->name, ".attn_k.bias");
  if (!q && !k) return OT_OK;
  int64_t h = 0, hkv = 0;
  int has_h, has_kv;
  OT_TRY(ot_gguf_expect(c->gg, "llama.attention.head_count", OT_GGUF_V_U32, &has_h));
  OT_TRY(ot_gguf_expect(c->gg, "llama.attention.head_count_kv", OT_GGUF_V_U32, &has_kv));
  if (!has_h || !ot_gguf_get_int(c->gg, "llama.attention.head_count", &h) || h < 1)
    return ot_fail(OT_ERR_FORMAT, "%s: llama.attention.head_count is missing or not positive", path);
  if (!has_kv || !ot_gguf_get_int(c->gg, "llama.attention.head_count_kv", &hkv)) hkv = h;
  const int64_t n = q ? h : hkv, rows = t->shape[0];
  if (n < 1 || rows % (2 * n))
    return ot_fail(OT_ERR_FORMAT, "%s: tensor '%s' has %lld rows, not a whole number of %lld heads of even size", path,
                   t->name, (long long)rows, (long long)n);
  *heads = (int)n;
  return OT_OK;
}

typedef struct ent {
  char *name;
  int src;
} ent;
static int by_name(const void *a, const void *b) { return strcmp(((const ent *)a)->name, ((const ent *)b)->name); }

ot_status ot_ckpt_gguf_open(ot_ckpt *c, const char *path) {
  OT_TRY(ot_io_strdup(path, &c->dir));
  OT_TRY(ot_gguf_open(path, &c->gg));
  uint64_t size;
  OT_TRY(ot_io_open_read(path, &c->fd, &size));
  int has_arch;
  OT_TRY(ot_gguf_expect(c->gg, "general.architecture", OT_GGUF_V_STRING, &has_arch));
  const char *arch = ot_gguf_get_string(c->gg, "general.architecture");
  const int llama = arch && !strcmp(arch, "llama");
  const int n = ot_gguf_num_tensors(c->gg);
  ent *e = calloc((size_t)n + 1, sizeof *e);
  c->infos = calloc((size_t)n + 1, sizeof *c->infos);
  c->src = calloc((size_t)n + 1, sizeof *c->src);
  c->names = calloc((size_t)n + 1, sizeof *c->names);
  ot_status s = e && c->infos && c->src && c->names ? OT_OK : ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  for (int i = 0; s == OT_OK && i < n; i++) {
    e[i].src = i;
    e[i].name = hf_name(ot_gguf_tensor_at(c->gg, i)->name);
    if (!e[i].name) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  if (s == OT_OK) qsort(e, (size_t)n, sizeof *e, by_name);
  for (int i = 0; i < n; i++) c->names[i] = e[i].name; /* owned from here, freed with the checkpoint */
  for (int i = 0; s == OT_OK && i < n; i++) {
    const ot_gguf_tensor *t = ot_gguf_tensor_at(c->gg, e[i].src);
    if (i && !strcmp(e[i - 1].name, e[i].name))
      s = ot_fail(OT_ERR_FORMAT, "%s: tensors '%s' and '%s' both stand for '%s'", path,
                  ot_gguf_tensor_at(c->gg, e[i - 1].src)->name, t->name, e[i].name);
    ot_st_info *f = &c->infos[i];
    if (s == OT_OK) s = dtype_of(path, t, &f->dtype);
    if (s == OT_OK) s = heads_for(c, path, t, llama, &c->src[i].unpermute_heads);
    if (s != OT_OK) break;
    c->src[i].t = t;
    f->name = e[i].name;
    f->ndim = t->ndim;
    f->numel = 1;
    for (int d = 0; d < OT_ST_MAX_DIMS; d++) f->shape[d] = d < t->ndim ? t->shape[d] : 1;
    for (int d = 0; d < t->ndim; d++) f->numel *= t->shape[d];
    f->bytes = ot_dtype_bytes(f->dtype, f->numel); /* q8b: wider than the file's Q8_0 */
    f->offset = t->offset;
    f->shard = 0;
    c->n++;
  }
  free(e);
  return s;
}

void ot_ckpt_gguf_free(ot_ckpt *c) {
  if (!c->gg) return;
  for (int i = 0; i < ot_gguf_num_tensors(c->gg); i++) free(c->names[i]);
  free(c->names);
  free(c->src);
  if (c->fd >= 0) close(c->fd);
  ot_gguf_close(c->gg);
  c->gg = NULL;
}

/* One row of the file's bytes (raw, `rb` of them) into the checkpoint's
 * dtype at dst: the same bytes, or Q8_0's {f16 d; int8 q[32]} widened to
 * q8b's {float scale; int8 q[32]} (exact). */
static void put_row(uint32_t type, const unsigned char *src, size_t rb, void *dst) {
  if (type != OT_GGUF_Q8_0) {
    memcpy(dst, src, rb);
    return;
  }
  ot_q8b_block *b = dst;
  for (size_t k = 0; k < rb / 34; k++) {
    uint16_t h;
    memcpy(&h, src + 34 * k, 2);
    b[k].scale = ot_f16_to_f32(h);
    memcpy(b[k].q, src + 34 * k + 2, 32);
  }
}

ot_status ot_ckpt_gguf_read(const ot_ckpt *c, const ot_st_info *info, void *dst, size_t bytes) {
  const ptrdiff_t i = info - c->infos;
  if (i < 0 || i >= c->n || !dst || bytes != info->bytes)
    return ot_fail(OT_ERR_INVALID_ARG, "ot_ckpt_read: %s: a tensor from another checkpoint, or %zu bytes for '%s' "
                   "(it has %llu)", c->dir, bytes, info->name, (unsigned long long)info->bytes);
  const ot_ckpt_gguf_src *g = &c->src[i];
  const int heads = g->unpermute_heads;
  if (!heads && g->t->type != OT_GGUF_Q8_0) /* straight into the home */
    return ot_io_pread_full(c->fd, dst, bytes, g->t->offset, c->dir);
  unsigned char *raw = malloc(g->t->bytes ? g->t->bytes : 1);
  if (!raw) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: no host memory to read '%s'", c->dir, g->t->name);
  ot_status s = ot_io_pread_full(c->fd, raw, g->t->bytes, g->t->offset, c->dir);
  /* rows: the outer dim (a bias vector: rows of one element) */
  const int64_t rows = info->ndim >= 2 ? info->shape[0] : info->numel;
  const size_t rb = g->t->bytes / (size_t)rows, db = info->bytes / (size_t)rows;
  const int64_t hd = heads ? rows / heads : rows, half = hd / 2;
  for (int64_t r = 0; s == OT_OK && r < rows; r++) {
    /* Hugging Face row r = head h, half j, index k  <-  file row h*hd + 2k + j */
    int64_t from = r;
    if (heads) {
      const int64_t h = r / hd, j = (r % hd) / half, k = r % half;
      from = h * hd + 2 * k + j;
    }
    put_row(g->t->type, raw + (size_t)from * rb, rb, (char *)dst + (size_t)r * db);
  }
  free(raw);
  return s;
}
