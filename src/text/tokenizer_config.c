/* tokenizer_config.c — what transformers (5.x, TokenizersBackend in
 * tokenization_utils_tokenizers.py) takes from tokenizer_config.json and
 * special_tokens_map.json beside tokenizer.json and that changes encode or
 * decode. Read (tokenizer.h lists them for users):
 *
 *   bos_token eos_token pad_token unk_token   a string or an AddedToken
 *       object {"content": ...}; each names a token of tokenizer.json
 *       (ot_tokenizer_role_id) and, as transformers' _post_init does, makes
 *       it a special added token. One that is not in tokenizer.json is
 *       refused: transformers would append it as a new token.
 *   additional_special_tokens / extra_special_tokens   the same, a list
 *   add_bos_token add_eos_token   checked to be booleans, and otherwise
 *       as transformers 5 has them beside a tokenizer.json: dropped, the
 *       file's post-processor is the template (transformers 4's
 *       LlamaTokenizerFast and GemmaTokenizerFast rebuilt it from them)
 *   clean_up_tokenization_spaces   decode applies clean_up_tokenization,
 *       but transformers 5 skips it for BPE models (all this reader reads)
 *       unless clean_up_tokenization_spaces_for_bpe_even_though_it_will_
 *       corrupt_output is true as well
 *   split_special_tokens   special tokens' text is encoded as plain text
 *   added_tokens_decoder   each entry must be the added token of
 *       tokenizer.json with that id (else refused); its flags (lstrip,
 *       rstrip, single_word, normalized, special) replace the file's, as
 *       transformers re-adds a token whose flags differ
 *
 * Every other key (chat_template, model_max_length, padding_side,
 * tokenizer_class, clean_up's neighbours, ...) describes the Python object
 * and leaves the ids and the text as they are. */
#include <jansson.h>
#include <stdio.h>

#include "io/json_util.h"
#include "omptensor/file.h"
#include "text/tokenizer_internal.h"

#define MAX_CONFIG (64u << 20)

typedef struct cfg {
  ot_tokenizer *tk;
  const char *path; /* for messages */
  const json_t *root;
} cfg;

static ot_status cfg_bad(const cfg *c, const char *field, const char *what) {
  return ot_fail(OT_ERR_FORMAT, "%s: %s: %s", c->path, field, what);
}

/* A boolean key: *out stays as it is when the key is absent or null. */
static ot_status cfg_bool(const cfg *c, const char *key, int *out) {
  return ot_tok_bool(c->path, c->root, "", key, TF_OPTIONAL, *out, out);
}

/* A token given as a string or as {"content": "..."} (NULL: null). */
static ot_status token_text(const cfg *c, const char *field, const json_t *v, const char **s, size_t *n) {
  *s = NULL;
  if (!v || json_is_null(v)) return OT_OK;
  const json_t *t = json_is_object(v) ? json_object_get(v, "content") : v;
  if (!json_is_string(t))
    return ot_fail(OT_ERR_FORMAT, "%s: %s: expected a token as a string or {\"content\": \"...\"}, found %s%s",
                   c->path, field, t == v ? "" : "content ", t ? ot_json_kind(t) : "no content");
  *s = json_string_value(t), *n = json_string_length(t);
  return OT_OK;
}

/* A named special token: its id, and it is special from now on (a
 * vocabulary token becomes a special added token, normalized false). */
static ot_status name_special(const cfg *c, const char *field, const json_t *v, int32_t *id_out) {
  ot_tokenizer *tk = c->tk;
  const char *s;
  size_t n;
  OT_TRY(token_text(c, field, v, &s, &n));
  if (!s) return OT_OK;
  const int32_t id = ot_tok_find(tk, s, n);
  if (id < 0)
    return ot_fail(OT_ERR_UNSUPPORTED,
                   "%s: %s '%.*s' is not a token of tokenizer.json (transformers would add it as a new token; this "
                   "reader does not): add it to tokenizer.json's added_tokens",
                   c->path, field, (int)n, s);
  if (id_out) *id_out = id;
  if (!ot_tok_added_by_id(tk, id)) {
    int32_t next = tk->n_ids; /* unused: the token has its id */
    const added_tok t = {(char *)s, n, id, 0, 0, 0, 0, 1};
    OT_TRY(ot_tok_add_token(tk, &t, &next));
  }
  ot_tok_added_by_id(tk, id)->special = 1;
  return OT_OK;
}

static ot_status apply_added_decoder(const cfg *c) {
  const json_t *dec = json_object_get(c->root, "added_tokens_decoder");
  if (!dec || json_is_null(dec)) return OT_OK;
  if (!json_is_object(dec)) return cfg_bad(c, "added_tokens_decoder", "expected an object of id: token");
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)dec, key, v) {
    char *end;
    long id = strtol(key, &end, 10);
    const json_t *ct = json_object_get(v, "content");
    if (*end || end == key || id < 0 || id > INT32_MAX || !json_is_object(v) || !json_is_string(ct))
      return cfg_bad(c, "added_tokens_decoder", "expected entries \"ID\": {\"content\": ..., flags}");
    added_tok *a = ot_tok_added_by_id(c->tk, (int32_t)id);
    if (!a || a->len != json_string_length(ct) || memcmp(a->content, json_string_value(ct), a->len))
      return ot_fail(OT_ERR_UNSUPPORTED,
                     "%s: added_tokens_decoder entry %s ('%s') is not that added token of tokenizer.json "
                     "(transformers would add it; this reader does not): make the two files agree",
                     c->path, key, json_string_value(ct));
    /* transformers makes AddedToken(**entry): a flag given must be a bool */
    static const char *const flags[5] = {"lstrip", "rstrip", "single_word", "normalized", "special"};
    unsigned char *const dst[5] = {&a->lstrip, &a->rstrip, &a->single_word, &a->normalized, &a->special};
    char at[64];
    ot_tok_path(at, sizeof at, "added_tokens_decoder", key, -1);
    for (int k = 0; k < 5; k++) {
      int f = *dst[k];
      OT_TRY(ot_tok_bool(c->path, v, at, flags[k], TF_DEFAULT, f, &f));
      *dst[k] = (unsigned char)f;
    }
  }
  return OT_OK;
}

static ot_status apply(cfg *c, const json_t *stmap) {
  ot_tokenizer *tk = c->tk;
  OT_TRY(apply_added_decoder(c));
  static const char *const roles[N_ROLES] = {"bos_token", "eos_token", "pad_token", "unk_token"};
  for (int r = 0; r < N_ROLES; r++) {
    const json_t *v = json_object_get(c->root, roles[r]);
    cfg m = *c;
    if (!v && stmap) { /* the older file */
      v = json_object_get(stmap, roles[r]);
      m.root = stmap;
    }
    OT_TRY(name_special(&m, roles[r], v, &tk->role[r]));
  }
  static const char *const lists[] = {"additional_special_tokens", "extra_special_tokens"};
  for (int k = 0; k < 2; k++) {
    const json_t *l = json_object_get(c->root, lists[k]);
    if (!l || json_is_null(l) || (json_is_object(l) && !json_object_size(l))) continue;
    if (!json_is_array(l)) return cfg_bad(c, lists[k], "expected a list of tokens");
    size_t i;
    const json_t *v;
    json_array_foreach(l, i, v) OT_TRY(name_special(c, lists[k], v, NULL));
  }
  /* transformers 5 drops these two when there is a tokenizer.json
   * (tokenization_utils_base.py, _from_pretrained): its post-processor is
   * the template. Read for their type only. */
  int add_bos = 0, add_eos = 0, clean = 0, force = 0;
  OT_TRY(cfg_bool(c, "add_bos_token", &add_bos));
  OT_TRY(cfg_bool(c, "add_eos_token", &add_eos));
  OT_TRY(cfg_bool(c, "clean_up_tokenization_spaces", &clean));
  OT_TRY(cfg_bool(c, "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output", &force));
  OT_TRY(cfg_bool(c, "split_special_tokens", &tk->split_special));
  tk->clean_up = clean && force; /* the model is BPE: transformers 5 cleans up only when forced */
  return ot_tok_build_added(tk);
}

/* dir/name parsed (*out NULL: no such file). */
static ot_status read_opt(const char *dir, const char *name, char **path, json_t **out) {
  *out = NULL;
  size_t n = strlen(dir) + strlen(name) + 2;
  if (!(*path = malloc(n))) return OOM();
  snprintf(*path, n, "%s/%s", dir, name);
  char *text = NULL;
  size_t len = 0;
  ot_status s = ot_file_read(*path, MAX_CONFIG, &text, &len);
  if (s == OT_ERR_NOT_FOUND) return OT_OK;
  /* transformers writes model_max_length as 1e30 spelled as an integer
   * (VERY_LARGE_INTEGER), past jansson's 64 bits; no integer here is read */
  if (s == OT_OK) s = ot_json_parse_flags(text, len, *path, "tokenizer config", JSON_DECODE_INT_AS_REAL, out);
  free(text);
  if (s == OT_OK && !json_is_object(*out)) s = ot_fail(OT_ERR_FORMAT, "%s: (top level): expected an object", *path);
  return s;
}

ot_status ot_tok_load_config(ot_tokenizer *tk, const char *dir) {
  char *p1 = NULL, *p2 = NULL;
  json_t *conf = NULL, *stmap = NULL;
  ot_status s = read_opt(dir, "tokenizer_config.json", &p1, &conf);
  if (s == OT_OK) s = read_opt(dir, "special_tokens_map.json", &p2, &stmap);
  if (s == OT_OK && (conf || stmap)) {
    json_t *empty = conf ? NULL : json_object();
    cfg c = {tk, conf ? p1 : p2, conf ? conf : empty};
    s = c.root ? apply(&c, stmap) : OOM();
    json_decref(empty);
  }
  json_decref(conf), json_decref(stmap);
  free(p1), free(p2);
  return s;
}
