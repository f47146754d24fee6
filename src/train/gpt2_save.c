/* gpt2_save.c — the trained weights as a Hugging Face checkpoint that
 * `omptensor run`, ot_gpt2_train_create and transformers load unchanged. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/gpt2_impl.h"
#include "omptensor/safetensors.h"

/* mkdir -p: every missing parent too. */
static ot_status make_dirs(const char *dir) {
  char *p = strdup(dir);
  if (!p) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory", dir);
  ot_status s = OT_OK;
  for (char *c = p + 1;; c++) {
    int end = *c == '\0';
    if (*c != '/' && !end) continue;
    *c = '\0';
    struct stat st;
    if (mkdir(p, 0777) != 0 && errno != EEXIST) s = ot_set_error(OT_ERR_IO, "%s: cannot create: %s", p, strerror(errno));
    else if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) s = ot_set_error(OT_ERR_IO, "%s: exists and is not a directory", p);
    if (s != OT_OK || end) break;
    *c = '/';
  }
  free(p);
  return s;
}

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
  int rc = json_dump_file(o, path, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
  json_decref(o);
  return rc == 0 ? OT_OK : ot_set_error(OT_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
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

ot_status ot_gpt2_train_save(ot_gpt2_trainer *g, const char *dir) {
  if (!dir || !dir[0]) return ot_set_error(OT_ERR_INVALID_ARG, "ot_gpt2_train_save: no directory given");
  if (g->o.plan_only) return ot_set_error(OT_ERR_INVALID_ARG, "ot_gpt2_train_save: a plan-only trainer holds no weights");
  ot_status s = ot_gpt2_train_sync(g); /* the weights the device still holds */
  if (s == OT_OK) s = make_dirs(dir);
  char *cfg = join(dir, "config.json"), *st = join(dir, "model.safetensors");
  if (s == OT_OK && (!cfg || !st)) s = ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory", dir);
  if (s == OT_OK) s = write_config(ot_gpt2_train_config(g), cfg);
  if (s == OT_OK) s = write_weights(g, st);
  free(cfg);
  free(st);
  return s;
}
