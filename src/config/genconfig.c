/* genconfig.c — read generation_config.json (the defaults transformers'
 * generate() takes from a checkpoint) with jansson into ot_hf_gen_config.
 *
 * Only what changes which tokens come out matters here. What omptensor's
 * generation applies is read and range-checked; what it does not implement
 * but would change the tokens (beam search, penalties, minimum lengths) is
 * listed in not_applied when it differs from transformers' default, so the
 * caller can say so instead of silently producing other text; the rest
 * (transformers_version, pad_token_id, cache and output settings) has no
 * effect on the tokens and is read past. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/hf_internal.h"
#include "core/error.h"
#include "omptensor/gguf.h"
#include "io/fileio.h"
#include "io/json_util.h"

#define OT_GENCONFIG_MAX_BYTES ((size_t)1 << 20)

static const json_t *get(const json_t *root, const char *key) {
  const json_t *v = json_object_get(root, key);
  return json_is_null(v) ? NULL : v;
}

static ot_status bad(const char *label, const char *key, const char *want, const json_t *v) {
  return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" must be %s (it is %s)", label, key, want, ot_json_kind(v));
}

/* A number in [lo, hi] (lo_open: lo itself excluded). */
static ot_status get_real(const json_t *root, const char *label, const char *key, double lo, int lo_open, double hi,
                          int *has, double *out) {
  const json_t *v = get(root, key);
  if (!v) return OT_OK;
  double x = json_is_number(v) ? json_number_value(v) : NAN;
  if (!json_is_number(v) || !(lo_open ? x > lo : x >= lo) || !(x <= hi)) {
    char want[96];
    snprintf(want, sizeof want, "a number %s %g and at most %g", lo_open ? "above" : "from", lo, hi);
    if (json_is_number(v))
      return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" is %g; it must be %s", label, key, x, want);
    return bad(label, key, want, v);
  }
  *has = 1;
  *out = x;
  return OT_OK;
}

static ot_status get_int(const json_t *root, const char *label, const char *key, int64_t lo, int64_t hi, int *has,
                         int64_t *out) {
  const json_t *v = get(root, key);
  if (!v) return OT_OK;
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
    char want[96];
    snprintf(want, sizeof want, "an integer from %lld to %lld", (long long)lo, (long long)hi);
    if (json_is_integer(v))
      return ot_fail(OT_ERR_FORMAT, "%s: \"%s\" is %lld; it must be %s", label, key, (long long)json_integer_value(v),
                     want);
    return bad(label, key, want, v);
  }
  *has = 1;
  *out = (int64_t)json_integer_value(v);
  return OT_OK;
}

/* Keys that change the tokens and that omptensor does not implement, with
 * the value that means "off" in transformers' GenerationConfig. A number
 * off: differs from it; NAN: any non-null value is on. */
static const struct {
  const char *key;
  double off;
} unapplied[] = {
    {"num_beams", 1},          {"num_beam_groups", 1},     {"repetition_penalty", 1},     {"no_repeat_ngram_size", 0},
    {"min_new_tokens", 0},     {"min_length", 0},          {"typical_p", 1},              {"epsilon_cutoff", 0},
    {"eta_cutoff", 0},         {"min_p", NAN},             {"encoder_repetition_penalty", 1}, {"penalty_alpha", NAN},
    {"diversity_penalty", 0},  {"bad_words_ids", NAN},     {"force_words_ids", NAN},      {"forced_bos_token_id", NAN},
    {"forced_eos_token_id", NAN}, {"suppress_tokens", NAN}, {"begin_suppress_tokens", NAN}, {"sequence_bias", NAN},
    {"guidance_scale", NAN},   {"exponential_decay_length_penalty", NAN}, {"renormalize_logits", NAN},
    {"stop_strings", NAN},     {"assistant_model", NAN},   {"prompt_lookup_num_tokens", NAN},
};

static void note_unapplied(const json_t *root, ot_hf_gen_config *c) {
  size_t used = 0;
  for (size_t i = 0; i < sizeof unapplied / sizeof unapplied[0]; i++) {
    const json_t *v = get(root, unapplied[i].key);
    if (!v) continue;
    if (json_is_false(v)) continue; /* renormalize_logits: false is off */
    if (!isnan(unapplied[i].off) && json_is_number(v) && json_number_value(v) == unapplied[i].off) continue;
    char val[48];
    if (json_is_number(v)) snprintf(val, sizeof val, "%g", json_number_value(v));
    else snprintf(val, sizeof val, "(%s)", ot_json_kind(v));
    int k = snprintf(c->not_applied + used, sizeof c->not_applied - used, "%s%s %s", used ? ", " : "",
                     unapplied[i].key, val);
    if (k < 0 || (size_t)k >= sizeof c->not_applied - used) break; /* the list is long enough to make the point */
    used += (size_t)k;
  }
}

static ot_status read_gen(const json_t *root, const char *label, ot_hf_gen_config *c) {
  if (!json_is_object(root))
    return ot_fail(OT_ERR_FORMAT, "%s: the generation config is %s, expected an object", label, ot_json_kind(root));
  c->found = 1;
  const json_t *ds = get(root, "do_sample");
  if (ds && !json_is_boolean(ds)) return bad(label, "do_sample", "true or false", ds);
  if (ds) c->has_do_sample = 1, c->do_sample = json_is_true(ds);
  OT_TRY(get_real(root, label, "temperature", 0, 0, 100, &c->has_temperature, &c->temperature));
  OT_TRY(get_int(root, label, "top_k", 0, INT32_MAX, &c->has_top_k, &c->top_k));
  OT_TRY(get_real(root, label, "top_p", 0, 1, 1, &c->has_top_p, &c->top_p));
  OT_TRY(get_int(root, label, "max_new_tokens", 0, INT32_MAX, &c->has_max_new_tokens, &c->max_new_tokens));
  OT_TRY(get_int(root, label, "max_length", 1, INT32_MAX, &c->has_max_length, &c->max_length));
  int has_bos = 0;
  OT_TRY(get_int(root, label, "bos_token_id", 0, INT32_MAX, &has_bos, &c->bos_token_id));
  const json_t *eos = get(root, "eos_token_id");
  OT_TRY(ot_hf_read_ids(eos, label, "eos_token_id", c->eos_token_ids, &c->n_eos));
  c->has_eos = eos != NULL;
  note_unapplied(root, c);
  return OT_OK;
}

static void gen_init(ot_hf_gen_config *c) {
  memset(c, 0, sizeof *c);
  c->bos_token_id = -1;
}

ot_status ot_hf_gen_config_parse(const char *json, size_t len, const char *label, ot_hf_gen_config *out) {
  if (!json || !label || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_hf_gen_config_parse: NULL argument");
  gen_init(out);
  json_t *root;
  OT_TRY(ot_json_parse(json, len, label, "generation config", &root));
  ot_status s = read_gen(root, label, out);
  json_decref(root);
  if (s != OT_OK) gen_init(out);
  return s;
}

ot_status ot_hf_gen_config_load(const char *path, ot_hf_gen_config *out) {
  if (!path || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_hf_gen_config_load: NULL argument");
  gen_init(out);
  int dir = ot_io_is_dir(path) == 1;
  /* a GGUF file carries no generation defaults (llama.cpp has none to
   * store): transformers' defaults, as for a model without the file */
  if (!dir && ot_gguf_is_file(path)) return OT_OK;
  char *file = dir ? ot_io_join(path, "generation_config.json") : NULL;
  if (dir && !file) return ot_fail(OT_ERR_OUT_OF_MEMORY, "no memory for a path");
  const char *p = file ? file : path;
  char *text;
  size_t len;
  ot_status s = ot_io_read_text(p, OT_GENCONFIG_MAX_BYTES, &text, &len);
  if (s == OT_ERR_NOT_FOUND && dir) { /* the model has none: transformers' defaults */
    ot_clear_error();
    free(file);
    return OT_OK;
  }
  if (s == OT_OK) {
    s = ot_hf_gen_config_parse(text, len, p, out);
    free(text);
  }
  free(file);
  return s;
}
