/* gpt2_save.c — the trained weights as a Hugging Face checkpoint that
 * `omptensor run`, ot_gpt2_train_create and transformers load unchanged. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "train/gpt2_impl.h"
#include "omptensor/safetensors.h"

/* config.json written from the trainer's config (not copied from the
 * source directory, which the trainer does not keep): the keys a GPT-2
 * loader needs, with GPT-2's names. */
static ot_status write_config(const ot_hf_config *c, const char *path) {
  /* dropout 0: the weights were trained without it (the trainer refuses a
   * non-zero one, and an absent key means GPT2Config's 0.1) */
  json_t *o = json_pack("{s:s, s:[s], s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:b, s:s, s:f, s:f, s:f}",
                        "model_type", "gpt2",
                        "architectures", "GPT2LMHeadModel", "activation_function", "gelu_new", "n_embd",
                        (json_int_t)c->hidden_size, "n_head", (json_int_t)c->num_heads, "n_layer",
                        (json_int_t)c->num_layers, "n_inner", (json_int_t)c->intermediate_size, "n_positions",
                        (json_int_t)c->max_position_embeddings, "vocab_size", (json_int_t)c->vocab_size,
                        "layer_norm_epsilon", c->norm_eps, "initializer_range", c->initializer_range,
                        "tie_word_embeddings", 1, "torch_dtype", "float32", "resid_pdrop", 0.0, "embd_pdrop", 0.0,
                        "attn_pdrop", 0.0);
  if (!o) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: cannot build the JSON", path);
  char *text = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
  json_decref(o);
  if (!text) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: cannot build the JSON", path);
  ot_status s = ot_file_write(path, text, strlen(text));
  free(text);
  return s;
}

/* model.safetensors: every parameter as F32 under its GPT2LMHeadModel name
 * (lm_head.weight left out: it is wte, as transformers saves tied models). */
static ot_status write_weights(const ot_gpt2_trainer *g, const char *path) {
  int n = ot_gpt2_train_num_params(g);
  ot_st_tensor *ts = calloc((size_t)n, sizeof *ts);
  if (!ts) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory", path);
  ot_status s = OT_OK;
  for (int i = 0; s == OT_OK && i < n; i++) {
    const ot_tensor *w = ot_gpt2_train_param(g, i);
    int64_t numel = ot_tensor_numel(w);
    float *buf = malloc((size_t)numel * sizeof *buf);
    ts[i] = (ot_st_tensor){.name = ot_gpt2_train_param_name(g, i), .dtype = OT_F32, .ndim = ot_tensor_ndim(w), .data = buf};
    for (int d = 0; d < ts[i].ndim; d++) ts[i].shape[d] = ot_tensor_dim(w, d);
    s = buf ? ot_tensor_read_f32(w, buf, numel) : ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory", path);
  }
  const char *meta[2] = {"format", "pt"};
  if (s == OT_OK) s = ot_st_write(path, ts, n, meta, 1);
  for (int i = 0; i < n; i++) free((void *)ts[i].data);
  free(ts);
  return s;
}

/* dir/name, malloc'd. */
static char *join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static int ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && !strcmp(s + a - b, tail);
}

/* The files of an existing checkpoint directory the new one keeps: all but
 * the checkpoint itself (config.json, the weights, a shard index), which
 * the new one replaces or which would contradict it (an index would be
 * loaded before the new model.safetensors). */
static int carry_file(const char *name) {
  return strcmp(name, "config.json") && !ends_with(name, ".safetensors") && !ends_with(name, ".safetensors.index.json");
}

ot_status ot_gpt2_train_check_save(const char *dir) {
  if (!dir || !dir[0]) return ot_set_error(OT_ERR_INVALID_ARG, "ot_gpt2_train_check_save: no directory given");
  return ot_file_check_output_dir(dir);
}

/* The directory changes as a whole (core/file.h, ot_adir): config.json and
 * model.safetensors are written into a fresh directory beside it, flushed,
 * and swapped in in one rename; a failure or a crash at any point leaves
 * the old checkpoint (or none) in place, never a new config beside old
 * weights. */
ot_status ot_gpt2_train_save(ot_gpt2_trainer *g, const char *dir) {
  if (!dir || !dir[0]) return ot_set_error(OT_ERR_INVALID_ARG, "ot_gpt2_train_save: no directory given");
  if (g->o.plan_only) return ot_set_error(OT_ERR_INVALID_ARG, "ot_gpt2_train_save: a plan-only trainer holds no weights");
  ot_status s = ot_gpt2_train_sync(g); /* the weights the device still holds */
  ot_adir *d = NULL;
  if (s == OT_OK) s = ot_adir_create(dir, carry_file, &d);
  char *cfg = d ? join(ot_adir_staging(d), "config.json") : NULL, *st = d ? join(ot_adir_staging(d), "model.safetensors") : NULL;
  if (s == OT_OK && (!cfg || !st)) s = ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory", dir);
  if (s == OT_OK) s = write_weights(g, st);
  if (s == OT_OK) s = write_config(ot_gpt2_train_config(g), cfg);
  if (s == OT_OK) s = ot_adir_commit(d);
  else ot_adir_abandon(d);
  /* Messages name the staging files; say which checkpoint it was. */
  if (s != OT_OK && d) ot_prefix_error(s, "saving %s", dir);
  free(cfg);
  free(st);
  return s;
}
