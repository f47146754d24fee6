/* tokenizer_vocab.c — tokenizer.json's BPE model (vocab, merges, flags),
 * its added tokens, and the id -> token table they fill.
 *
 * As the tokenizers library (models/bpe/serialization.rs and model.rs,
 * tokenizer/added_vocabulary.rs):
 *   - the vocabulary's ids are any u32, dense or not: the table is a hash
 *     map (ot_idmap) sized by the number of ids, never by the largest;
 *   - every merge names two tokens of model.vocab whose join is one too,
 *     else the file is refused (the library's MergeTokenOutOfVocabulary);
 *     a "#version" line of the legacy form is skipped, and a legacy merge
 *     is two tokens split by exactly one space (else BadMerges);
 *   - an added token's "id" is read for its type only: the library gives
 *     it the id of the same content in the vocabulary, or the next free
 *     id counting from the vocabulary's size (add_tokens). */
#include <stdio.h>

#include "io/json_util.h"
#include "text/tokenizer_internal.h"

/* ---- the id table ------------------------------------------------------------------- */
const tok_entry *ot_tok_entry(const ot_tokenizer *tk, int32_t id) {
  int32_t k;
  return ot_idmap_get(&tk->by_id, id, &k) ? &tk->ent[k] : NULL;
}

ot_status ot_tok_set_token(ot_tokenizer *tk, int32_t id, const char *s, size_t n) {
  char *t = malloc(n + 1);
  if (!t) return OOM();
  memcpy(t, s, n);
  t[n] = 0;
  int32_t k;
  if (!ot_idmap_get(&tk->by_id, id, &k)) {
    size_t cap = (size_t)tk->cap_ent;
    if (tk->n_ent == INT32_MAX || !grow_to((void **)&tk->ent, &cap, (size_t)tk->n_ent + 1, sizeof *tk->ent))
      return free(t), OOM();
    tk->cap_ent = (int32_t)(cap < INT32_MAX ? cap : INT32_MAX);
    ot_tok_work++;
    k = tk->n_ent;
    ot_status st = ot_idmap_put(&tk->by_id, id, k);
    if (st != OT_OK) return free(t), st;
    tk->ent[tk->n_ent++] = (tok_entry){NULL, 0, 0};
    if (id >= tk->n_ids) tk->n_ids = id + 1;
  }
  free(tk->ent[k].text);
  tk->ent[k].text = t;
  tk->ent[k].len = n;
  return OT_OK;
}

void ot_tok_set_special(ot_tokenizer *tk, int32_t id, int special) {
  int32_t k;
  if (ot_idmap_get(&tk->by_id, id, &k)) tk->ent[k].special = (unsigned char)special;
}

added_tok *ot_tok_added_by_id(const ot_tokenizer *tk, int32_t id) {
  int32_t k;
  return ot_idmap_get(&tk->add_ix, id, &k) ? &tk->add[k] : NULL;
}

int32_t ot_tok_find(const ot_tokenizer *tk, const char *s, size_t n) {
  int32_t id;
  if (ot_strmap_get(&tk->added_ids, s, n, &id) || ot_strmap_get(&tk->vocab, s, n, &id)) return id;
  return -1;
}

void ot_tok_free_vocab(ot_tokenizer *tk) {
  ot_strmap_free(&tk->vocab);
  ot_pairmap_free(&tk->merges);
  ot_strmap_free(&tk->added_ids);
  for (int32_t i = 0; i < tk->n_ent; i++) free(tk->ent[i].text);
  free(tk->ent);
  ot_idmap_free(&tk->by_id);
  ot_idmap_free(&tk->add_ix);
  for (int k = 0; k < tk->n_add; k++) free(tk->add[k].content);
  free(tk->add);
}

/* ---- the model ---------------------------------------------------------------------- */
static ot_status load_vocab(ot_tokenizer *tk, const json_t *vocab) {
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)vocab, key, v) {
    /* u32, as the library's AHashMap<String, u32>; this reader's ids are int32 */
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
      return ot_fail(OT_ERR_FORMAT, "%s: model.vocab: token '%s': expected an id 0..2^32-1, found %s", tk->file, key,
                     json_is_integer(v) ? "an integer outside it" : ot_json_kind(v));
    if (json_integer_value(v) > INT32_MAX - 1)
      return ot_fail(OT_ERR_UNSUPPORTED, "%s: model.vocab: token '%s': id %lld is past this reader's 2^31-2", tk->file,
                     key, (long long)json_integer_value(v));
    const size_t n = strlen(key); /* jansson keys hold no NUL */
    OT_TRY(ot_strmap_put(&tk->vocab, key, n, (int32_t)json_integer_value(v)));
    OT_TRY(ot_tok_set_token(tk, (int32_t)json_integer_value(v), key, n));
  }
  tk->n_vocab = (int32_t)json_object_size(vocab);
  return OT_OK;
}

/* One merge (a, b; rank i): both tokens and their join in the vocabulary,
 * kept by the two ids (a later merge of the same pair wins, as the
 * library's map collects them). */
static ot_status add_merge(ot_tokenizer *tk, size_t i, const char *a, size_t na, const char *b, size_t nb, bytes *key) {
  int32_t ia, ib, id;
  const char *miss = !ot_strmap_get(&tk->vocab, a, na, &ia) ? a : !ot_strmap_get(&tk->vocab, b, nb, &ib) ? b : NULL;
  const size_t nm = miss == a ? na : nb;
  if (miss)
    return ot_fail(OT_ERR_FORMAT, "%s: model.merges[%zu] ('%.*s' '%.*s'): '%.*s' is not a token of model.vocab",
                   tk->file, i, (int)na, a, (int)nb, b, (int)nm, miss);
  key->n = 0;
  if (!bytes_add(key, a, na) || !bytes_add(key, b, nb)) return OOM();
  if (!ot_strmap_get(&tk->vocab, key->p, key->n, &id))
    return ot_fail(OT_ERR_FORMAT, "%s: model.merges[%zu] ('%.*s' '%.*s') makes '%.*s', which is not a token of "
                   "model.vocab", tk->file, i, (int)na, a, (int)nb, b, (int)key->n, key->p);
  if (i > INT32_MAX) return ot_fail(OT_ERR_UNSUPPORTED, "%s: model.merges: more than 2^31", tk->file);
  return ot_pairmap_put(&tk->merges, ia, ib, (int32_t)i, id);
}

/* The merges: all "a b" strings (the legacy form) or all ["a", "b"] pairs,
 * as the library's untagged MergeType takes them. */
static ot_status load_merges(ot_tokenizer *tk, const json_t *merges) {
  const json_t *first = json_array_get(merges, 0);
  const int legacy = json_is_string(first);
  bytes key = {0};
  ot_status st = OT_OK;
  size_t i;
  const json_t *v;
  json_array_foreach(merges, i, v) {
    const json_t *l = json_array_get(v, 0), *r = json_array_get(v, 1);
    if (legacy && json_is_string(v)) {
      const char *s = json_string_value(v), *sp = memchr(s, ' ', json_string_length(v));
      const size_t n = json_string_length(v);
      if (n >= 8 && !memcmp(s, "#version", 8)) continue; /* the library skips these lines */
      if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp - s) - 1))
        st = ot_fail(OT_ERR_FORMAT, "%s: model.merges[%zu]: '%s' is not two tokens split by one space", tk->file, i, s);
      else
        st = add_merge(tk, i, s, (size_t)(sp - s), sp + 1, n - (size_t)(sp - s) - 1, &key);
    } else if (!legacy && json_is_array(v) && json_array_size(v) == 2 && json_is_string(l) && json_is_string(r)) {
      st = add_merge(tk, i, json_string_value(l), json_string_length(l), json_string_value(r), json_string_length(r),
                     &key);
    } else {
      st = ot_fail(OT_ERR_FORMAT, "%s: model.merges[%zu]: expected %s (as merges[0]), found %s", tk->file, i,
                   legacy ? "a string \"a b\"" : "a pair [\"a\", \"b\"]",
                   json_is_array(v) ? "an array that is not two strings" : ot_json_kind(v));
    }
    if (st != OT_OK) break;
  }
  free(key.p);
  return st;
}

/* A string option the reader supports only as null or "" (the same as none). */
static ot_status no_affix(ot_tokenizer *tk, const json_t *m, const char *k) {
  const char *s;
  size_t n;
  OT_TRY(ot_tok_str(tk->file, m, "model", k, TF_STRING, TF_OPTIONAL, &s, &n));
  if (n) return ot_fail(OT_ERR_UNSUPPORTED, "%s: model.%s '%s' is not supported by this reader", tk->file, k, s);
  return OT_OK;
}

ot_status ot_tok_load_model(ot_tokenizer *tk, const json_t *m) {
  const char *t;
  size_t tn;
  OT_TRY(ot_tok_str(tk->file, m, "model", "type", TF_STRING, TF_REQUIRED, &t, &tn));
  if (strcmp(t, "BPE"))
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: model type '%s' is not supported by this reader (tokenizer.h lists what is)",
                   tk->file, t);
  const json_t *v, *vocab, *merges;
  OT_TRY(ot_tok_field(tk->file, m, "model", "dropout", TF_NUMBER, TF_OPTIONAL, &v));
  if (v && (json_number_value(v) < 0 || json_number_value(v) > 1))
    return ot_fail(OT_ERR_FORMAT, "%s: model.dropout: %g is not a probability 0..1", tk->file, json_number_value(v));
  if (v && json_number_value(v) != 0) /* 0: none, as the library takes it */
    return ot_fail(OT_ERR_UNSUPPORTED, "%s: model.dropout %g is not supported by this reader (it encodes at random)",
                   tk->file, json_number_value(v));
  OT_TRY(no_affix(tk, m, "continuing_subword_prefix"));
  OT_TRY(no_affix(tk, m, "end_of_word_suffix"));
  OT_TRY(ot_tok_bool(tk->file, m, "model", "byte_fallback", TF_OPTIONAL, 0, &tk->byte_fallback));
  OT_TRY(ot_tok_bool(tk->file, m, "model", "fuse_unk", TF_OPTIONAL, 0, &tk->fuse_unk));
  OT_TRY(ot_tok_bool(tk->file, m, "model", "ignore_merges", TF_OPTIONAL, 0, &tk->ignore_merges));
  OT_TRY(ot_tok_field(tk->file, m, "model", "vocab", TF_OBJECT, TF_REQUIRED, &vocab));
  OT_TRY(ot_tok_field(tk->file, m, "model", "merges", TF_ARRAY, TF_REQUIRED, &merges));
  OT_TRY(load_vocab(tk, vocab));
  OT_TRY(load_merges(tk, merges));
  const char *unk;
  size_t nu;
  tk->unk = -1;
  OT_TRY(ot_tok_str(tk->file, m, "model", "unk_token", TF_STRING, TF_OPTIONAL, &unk, &nu));
  if (unk && !ot_strmap_get(&tk->vocab, unk, nu, &tk->unk))
    return ot_fail(OT_ERR_FORMAT, "%s: model.unk_token: '%s' is not a token of model.vocab", tk->file, unk);
  return OT_OK;
}

/* ---- added tokens ------------------------------------------------------------------- */
ot_status ot_tok_add_token(ot_tokenizer *tk, const added_tok *t, int32_t *next_id) {
  if (!t->len) return OT_OK; /* the library ignores an empty token */
  int32_t id = ot_tok_find(tk, t->content, t->len);
  if (id < 0) {
    if (*next_id == INT32_MAX) return ot_fail(OT_ERR_UNSUPPORTED, "%s: added_tokens: more ids than 2^31", tk->file);
    id = (*next_id)++;
  }
  OT_TRY(ot_strmap_put(&tk->added_ids, t->content, t->len, id));
  int32_t k;
  if (!ot_idmap_get(&tk->add_ix, id, &k)) {
    size_t cap = (size_t)tk->cap_add;
    if (tk->n_add == INT32_MAX || !grow_to((void **)&tk->add, &cap, (size_t)tk->n_add + 1, sizeof *tk->add))
      return OOM();
    tk->cap_add = (int)(cap < INT32_MAX ? cap : INT32_MAX);
    k = tk->n_add;
    OT_TRY(ot_idmap_put(&tk->add_ix, id, k));
    tk->add[tk->n_add++] = (added_tok){0};
  }
  added_tok *a = &tk->add[k];
  char *c = malloc(t->len);
  if (!c) return OOM();
  memcpy(c, t->content, t->len);
  free(a->content);
  *a = *t;
  a->content = c;
  a->id = id;
  /* its text until ot_tok_build_added writes the normalized one */
  const tok_entry *e = ot_tok_entry(tk, id);
  if (!e) OT_TRY(ot_tok_set_token(tk, id, t->content, t->len));
  if (t->special) ot_tok_set_special(tk, id, 1);
  return OT_OK;
}

/* One entry of added_tokens (at path) into *t (content borrowed). */
static ot_status read_added(const ot_tokenizer *tk, const json_t *v, const char *path, added_tok *t) {
  if (!json_is_object(v))
    return ot_fail(OT_ERR_FORMAT, "%s: %s: expected an object, found %s", tk->file, path, ot_json_kind(v));
  const json_t *id;
  const char *c;
  int f[5];
  static const char *const flags[5] = {"single_word", "lstrip", "rstrip", "normalized", "special"};
  OT_TRY(ot_tok_field(tk->file, v, path, "id", TF_UINT, TF_REQUIRED, &id)); /* read, and given no weight, as the library */
  if (json_integer_value(id) > UINT32_MAX)
    return ot_fail(OT_ERR_FORMAT, "%s: %s.id: %lld is not a u32", tk->file, path, (long long)json_integer_value(id));
  OT_TRY(ot_tok_str(tk->file, v, path, "content", TF_STRING, TF_REQUIRED, &c, &t->len));
  for (int k = 0; k < 5; k++) OT_TRY(ot_tok_bool(tk->file, v, path, flags[k], TF_REQUIRED, 0, &f[k]));
  t->content = (char *)c;
  t->single_word = (unsigned char)f[0], t->lstrip = (unsigned char)f[1], t->rstrip = (unsigned char)f[2];
  t->normalized = (unsigned char)f[3], t->special = (unsigned char)f[4];
  return OT_OK;
}

ot_status ot_tok_load_added(ot_tokenizer *tk, const json_t *added) {
  /* the library's first id for a new token: the model's vocabulary size */
  int32_t next = tk->n_vocab;
  size_t i;
  const json_t *v;
  json_array_foreach(added, i, v) {
    char path[64];
    added_tok t = {0};
    OT_TRY(read_added(tk, v, ot_tok_path(path, sizeof path, "added_tokens", NULL, (long)i), &t));
    OT_TRY(ot_tok_add_token(tk, &t, &next));
  }
  return OT_OK;
}
