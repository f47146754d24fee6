/* tokenizer_gguf.c — a tokenizer from a GGUF file's metadata (tokenizer.h,
 * ot_tokenizer_from_gguf).
 *
 * A GGUF file holds no tokenizer.json, only llama.cpp's tokenizer keys.
 * We write the tokenizer.json they describe (jansson, which escapes) and
 * load it with ot_tokenizer_parse, so one encoder serves both. What is
 * written follows llama.cpp, the format's own reader, and transformers'
 * GGUF reader (integrations/gguf/gguf_tokenizer_mapping.py) where the two
 * agree; where they do not, llama.cpp, whose output a GGUF user compares:
 *
 *   "llama"  sentencepiece: BPE over tokenizer.ggml.tokens with merges
 *            from the scores (tokenizer_gguf_merges.c; the file's own
 *            tokenizer.ggml.merges where it has them), byte_fallback,
 *            fuse_unk, the unknown token; normalizers Prepend("▁") (unless
 *            add_space_prefix is false) and Replace(" ", "▁"), as
 *            sentencepiece and llama.cpp prepend one ▁ to a text and to
 *            each stretch after an added token (transformers 5 writes the
 *            Metaspace "first" pre-tokenizer, which does not add a ▁ to a
 *            text that starts with a space: "  hi" is ▁▁▁hi in
 *            sentencepiece and llama.cpp, ▁▁hi there); decoders Replace("▁",
 *            " "), ByteFallback, Fuse, Strip(1 left); BOS by add_bos_token
 *            (default true), EOS by add_eos_token (default false).
 *   "gpt2"   byte-level BPE over the tokens and tokenizer.ggml.merges;
 *            tokenizer.ggml.pre picks the split: missing, "default" or
 *            "gpt2": GPT-2's ByteLevel regex; the Llama 3 family ("llama3",
 *            "llama-bpe", ...): Llama 3's Split regex, ByteLevel without
 *            its own, and ignore_merges (llama.cpp sets it for these, as
 *            Llama 3's tokenizer.json does; transformers does not); the
 *            Qwen2 family: Qwen2's regex (no NFC: neither reader applies
 *            the normalizer of Qwen2's tokenizer.json). Another pre is
 *            refused. ByteLevel decoder; BOS only where add_bos_token is
 *            true.
 * Both: tokens of type control (3) are special added tokens, user-defined
 * (4) plain added tokens (matched whole, as llama.cpp matches them); the
 * unknown token is special too (transformers makes its unk_token special).
 * bos/eos/unknown/padding_token_id are the roles (ot_tokenizer_role_id);
 * "llama" without them has llama.cpp's defaults 1, 2 and 0.
 *
 * Everything is checked before the JSON is written: the arrays' types and
 * lengths, each token valid UTF-8, the ids inside the vocabulary, each
 * merge two tokens whose join is a token; a failure names the file and the
 * key. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "omptensor/gguf.h"
#include "text/tokenizer_gguf.h"

#define K_MODEL "tokenizer.ggml.model"
#define K_PRE "tokenizer.ggml.pre"
#define K_TOKENS "tokenizer.ggml.tokens"
#define K_SCORES "tokenizer.ggml.scores"
#define K_TYPES "tokenizer.ggml.token_type"
#define K_MERGES "tokenizer.ggml.merges"
#define K_ADD_BOS "tokenizer.ggml.add_bos_token"
#define K_ADD_EOS "tokenizer.ggml.add_eos_token"
#define K_SPACE "tokenizer.ggml.add_space_prefix"

enum { T_UNDEFINED = 0, T_NORMAL, T_UNKNOWN, T_CONTROL, T_USER, T_UNUSED, T_BYTE };

/* The role keys, in ot_token_role's order. */
static const char *const role_keys[N_ROLES] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                               "tokenizer.ggml.padding_token_id", "tokenizer.ggml.unknown_token_id"};

/* Split regexes (llama.cpp's llama-vocab.cpp; transformers' GGUF reader
 * has the same ones), by tokenizer.ggml.pre. */
static const char llama3_split[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                   "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char qwen2_split[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                                  "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
typedef struct pre_entry {
  const char *name, *split; /* split NULL: GPT-2's ByteLevel regex */
  int ignore_merges;
} pre_entry;
static const pre_entry pres[] = {
    {"default", NULL, 0},        {"gpt2", NULL, 0},           {"llama3", llama3_split, 1},
    {"llama-v3", llama3_split, 1}, {"llama-bpe", llama3_split, 1}, {"falcon3", llama3_split, 1},
    {"qwen2", qwen2_split, 0},   {"deepseek-r1-qwen", qwen2_split, 0},
};

typedef struct conv {
  const ot_gguf *g;
  const char *file;
  ot_tok_gguf t;
  unsigned char *type; /* [n]: token_type (T_NORMAL where the file has none) */
  int32_t role[N_ROLES];
  int spm;             /* "llama" (else "gpt2") */
} conv;

static ot_status bad_key(const conv *c, ot_status s, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ot_status bad_key(const conv *c, ot_status s, const char *key, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return ot_fail(s, "%s: %s: %s", c->file, key, what);
}

/* An array key's element count: it must be an array of `want` (strings)
 * or, want == -1, of numbers; `need` >= 0: of that many elements. */
static ot_status array_of(const conv *c, const char *key, int want, int64_t need, uint64_t *count) {
  ot_gguf_vtype et;
  if (!ot_gguf_get_array(c->g, key, &et, count)) {
    if (ot_gguf_has(c->g, key)) return bad_key(c, OT_ERR_FORMAT, key, "expected an array");
    return bad_key(c, OT_ERR_FORMAT, key, "missing");
  }
  const int numeric = et != OT_GGUF_V_STRING;
  if (want == -1 ? !numeric : (int)et != want)
    return bad_key(c, OT_ERR_FORMAT, key, "expected an array of %s, not of %s",
                   want == -1 ? "numbers" : ot_gguf_vtype_name((ot_gguf_vtype)want), ot_gguf_vtype_name(et));
  if (need >= 0 && *count != (uint64_t)need)
    return bad_key(c, OT_ERR_FORMAT, key, "%llu entries for the %lld tokens of " K_TOKENS,
                   (unsigned long long)*count, (long long)need);
  return OT_OK;
}

/* tokenizer.ggml.tokens, .scores and .token_type. */
static ot_status read_vocab(conv *c) {
  uint64_t n;
  OT_TRY(array_of(c, K_TOKENS, OT_GGUF_V_STRING, -1, &n));
  if (!n || n > (uint64_t)INT32_MAX - 1)
    return bad_key(c, OT_ERR_FORMAT, K_TOKENS, "%llu tokens (1 to 2^31-2)", (unsigned long long)n);
  c->t.n = (int32_t)n;
  c->t.tok = calloc(n, sizeof *c->t.tok);
  c->t.len = calloc(n, sizeof *c->t.len);
  c->type = malloc(n);
  if (!c->t.tok || !c->t.len || !c->type) return OOM();
  for (int32_t j = 0; j < c->t.n; j++) {
    const char *s = ot_gguf_get_array_string(c->g, K_TOKENS, (uint64_t)j);
    const size_t len = strlen(s);
    for (size_t b = 0, k; b < len; b += k)
      if (!(k = ot_utf8_len((const unsigned char *)s + b, len - b)))
        return bad_key(c, OT_ERR_FORMAT, K_TOKENS, "token %d is not valid UTF-8 (at byte %zu)", j, b);
    c->t.tok[j] = s, c->t.len[j] = len;
    OT_TRY(ot_strmap_put(&c->t.vocab, s, len, j)); /* a repeat: the last id, as {token: index} */
    c->type[j] = T_NORMAL;
  }
  uint64_t m;
  if (ot_gguf_has(c->g, K_TYPES)) {
    OT_TRY(array_of(c, K_TYPES, -1, c->t.n, &m));
    for (int32_t j = 0; j < c->t.n; j++) {
      int64_t y;
      if (!ot_gguf_get_array_int(c->g, K_TYPES, (uint64_t)j, &y) || y < T_UNDEFINED || y > T_BYTE)
        return bad_key(c, OT_ERR_FORMAT, K_TYPES, "entry %d is not a token type 0..6", j);
      c->type[j] = (unsigned char)(y == T_UNDEFINED ? T_NORMAL : y);
    }
  }
  if (ot_gguf_has(c->g, K_SCORES)) {
    OT_TRY(array_of(c, K_SCORES, -1, c->t.n, &m));
    if (!(c->t.score = malloc((size_t)c->t.n * sizeof *c->t.score))) return OOM();
    for (int32_t j = 0; j < c->t.n; j++)
      if (!ot_gguf_get_array_f64(c->g, K_SCORES, (uint64_t)j, &c->t.score[j]) || isnan(c->t.score[j]))
        return bad_key(c, OT_ERR_FORMAT, K_SCORES, "entry %d is not a number", j);
  }
  return OT_OK;
}

/* A boolean key (dflt where missing). */
static ot_status get_flag(const conv *c, const char *key, int dflt, int *out) {
  int64_t v;
  int has;
  *out = dflt;
  OT_TRY(ot_gguf_expect(c->g, key, OT_GGUF_V_BOOL, &has)); /* a bool, as llama.cpp reads it */
  if (has && ot_gguf_get_int(c->g, key, &v)) *out = v != 0;
  return OT_OK;
}

static ot_status read_roles(conv *c) {
  for (int r = 0; r < N_ROLES; r++) {
    int64_t id;
    /* llama.cpp's defaults for a sentencepiece vocabulary: <unk> 0, <s> 1, </s> 2 */
    static const int spm_default[N_ROLES] = {1, 2, -1, 0};
    c->role[r] = c->spm && spm_default[r] < c->t.n ? spm_default[r] : -1;
    int has;
    OT_TRY(ot_gguf_expect(c->g, role_keys[r], OT_GGUF_V_U32, &has)); /* a u32, as llama.cpp reads it */
    if (!has || !ot_gguf_get_int(c->g, role_keys[r], &id)) continue;
    if (id < 0 || id >= c->t.n)
      return bad_key(c, OT_ERR_FORMAT, role_keys[r], "token id %lld is outside the %d tokens of " K_TOKENS,
                     (long long)id, c->t.n);
    c->role[r] = (int32_t)id;
  }
  return OT_OK;
}

/* ---- writing tokenizer.json ------------------------------------------------------ */

/* json_object_set_new / json_array_append_new, NULL values and all, as
 * one test (0: out of memory). */
static int put(json_t *o, const char *k, json_t *v) { return v && json_object_set_new(o, k, v) == 0; }
static int push(json_t *a, json_t *v) { return v && json_array_append_new(a, v) == 0; }
static json_t *str(const conv *c, int32_t id) { return json_stringn(c->t.tok[id], c->t.len[id]); }

/* {"type": "Replace", "pattern": {"String": from}, "content": to} */
static json_t *replace(const char *from, const char *to) {
  return json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String", from, "content", to);
}

static json_t *added_tokens(const conv *c) {
  json_t *a = json_array();
  for (int32_t j = 0; a && j < c->t.n; j++) {
    const int user = c->type[j] == T_USER;
    const int special = c->type[j] == T_CONTROL || (c->type[j] == T_UNKNOWN && j == c->role[ROLE_UNK]);
    if ((!user && !special) || !c->t.len[j]) continue; /* an empty token cannot be matched */
    json_t *e = json_pack("{s:i, s:o, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)j, "content", str(c, j),
                          "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0, "special", special);
    if (!push(a, e)) json_decref(a), a = NULL;
  }
  return a;
}

/* TemplateProcessing: [bos] $A [eos] (NULL: out of memory). */
static json_t *template(const conv *c, int bos, int eos) {
  json_t *single = json_array(), *sp = json_object(), *pp = NULL;
  int ok = single && sp;
  if (ok && bos)
    ok = push(single, json_pack("{s:{s:s, s:i}}", "SpecialToken", "id", "bos", "type_id", 0)) &&
         put(sp, "bos", json_pack("{s:s, s:[i], s:[o]}", "id", "bos", "ids", (json_int_t)c->role[ROLE_BOS], "tokens",
                                  str(c, c->role[ROLE_BOS])));
  ok = ok && push(single, json_pack("{s:{s:s, s:i}}", "Sequence", "id", "A", "type_id", 0));
  if (ok && eos)
    ok = push(single, json_pack("{s:{s:s, s:i}}", "SpecialToken", "id", "eos", "type_id", 0)) &&
         put(sp, "eos", json_pack("{s:s, s:[i], s:[o]}", "id", "eos", "ids", (json_int_t)c->role[ROLE_EOS], "tokens",
                                  str(c, c->role[ROLE_EOS])));
  /* the pair template the file format requires (never used here): the single one, then $B */
  json_t *pair = ok ? json_deep_copy(single) : NULL;
  ok = ok && push(pair, json_pack("{s:{s:s, s:i}}", "Sequence", "id", "B", "type_id", 1));
  if (ok)
    pp = json_pack("{s:s, s:O, s:O, s:O}", "type", "TemplateProcessing", "single", single, "pair", pair,
                   "special_tokens", sp);
  json_decref(single), json_decref(sp), json_decref(pair);
  return pp;
}

/* The model's merges: the file's or, for sentencepiece without them,
 * generated from the scores. The file's are read as llama.cpp reads them
 * (llama-vocab.cpp): split at the first space after the first byte, and
 * a repeated pair keeps its first rank (std::map::emplace); each must be
 * two tokens whose join is one (the tokenizers library's check, which
 * transformers' GGUF reader meets: llama.cpp would carry such a merge to
 * a piece it then spells in bytes). Written as [left, right] pairs, which
 * a left half with a space in it survives. */
static ot_status merges(const conv *c, json_t **out) {
  *out = NULL;
  json_t *a = json_array();
  if (!a) return OOM();
  ot_status st = OT_OK;
  if (ot_gguf_has(c->g, K_MERGES) || !c->spm) {
    uint64_t m;
    if ((st = array_of(c, K_MERGES, OT_GGUF_V_STRING, -1, &m)) != OT_OK) return json_decref(a), st;
    bytes joined = {0};
    ot_strmap seen = {0};
    for (uint64_t j = 0; st == OT_OK && j < m; j++) {
      const char *s = ot_gguf_get_array_string(c->g, K_MERGES, j), *sp = s[0] ? strchr(s + 1, ' ') : NULL;
      int32_t id;
      joined.n = 0;
      if (ot_strmap_get(&seen, s, strlen(s), &id)) continue; /* a repeat: llama.cpp keeps the first */
      if ((st = ot_strmap_put(&seen, s, strlen(s), 0)) != OT_OK) break;
      if (!sp) {
        st = bad_key(c, OT_ERR_FORMAT, K_MERGES, "entry %llu ('%s') is not \"left right\"", (unsigned long long)j, s);
      } else if (!ot_strmap_get(&c->t.vocab, s, (size_t)(sp - s), &id) ||
                 !ot_strmap_get(&c->t.vocab, sp + 1, strlen(sp + 1), &id)) {
        st = bad_key(c, OT_ERR_FORMAT, K_MERGES, "entry %llu ('%s') joins a piece that is not a token",
                     (unsigned long long)j, s);
      } else if (!bytes_add(&joined, s, (size_t)(sp - s)) || !bytes_add(&joined, sp + 1, strlen(sp + 1))) {
        st = OOM();
      } else if (!ot_strmap_get(&c->t.vocab, joined.p, joined.n, &id)) {
        st = bad_key(c, OT_ERR_FORMAT, K_MERGES, "entry %llu ('%s') makes '%.*s', which is not a token",
                     (unsigned long long)j, s, (int)joined.n, joined.p);
      } else if (!push(a, json_pack("[s#, s]", s, (int)(sp - s), sp + 1))) { /* UTF-8: both halves are tokens */
        st = OOM();
      }
    }
    free(joined.p);
    ot_strmap_free(&seen);
  } else {
    if (!c->t.score)
      return json_decref(a), bad_key(c, OT_ERR_FORMAT, K_SCORES, "missing (a \"llama\" vocabulary without "
                                                                 K_MERGES " needs the scores to rank its merges)");
    int32_t *p;
    size_t n;
    if ((st = ot_tok_gguf_merges(&c->t, &p, &n)) != OT_OK) return json_decref(a), st;
    for (size_t i = 0; st == OT_OK && i < n; i++)
      if (!push(a, json_pack("[o, o]", str(c, p[2 * i]), str(c, p[2 * i + 1])))) st = OOM();
    free(p);
  }
  if (st != OT_OK) return json_decref(a), st;
  *out = a;
  return OT_OK;
}

static ot_status model(const conv *c, int ignore_merges, json_t **out) {
  *out = NULL;
  json_t *vocab = json_object(), *m = NULL;
  if (!vocab) return OOM();
  for (int32_t j = 0; j < c->t.n; j++) {
    int32_t id;
    ot_strmap_get(&c->t.vocab, c->t.tok[j], c->t.len[j], &id);
    if (id == j && json_object_setn_new(vocab, c->t.tok[j], c->t.len[j], json_integer(j)))
      return json_decref(vocab), OOM();
  }
  json_t *mg;
  ot_status st = merges(c, &mg);
  if (st != OT_OK) return json_decref(vocab), st;
  const int unk = c->spm && c->role[ROLE_UNK] >= 0;
  m = json_pack("{s:s, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:o}", "type", "BPE", "dropout",
                "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", c->spm, "byte_fallback", c->spm,
                "ignore_merges", ignore_merges, "vocab", vocab, "merges", mg);
  if (m && unk && !put(m, "unk_token", str(c, c->role[ROLE_UNK]))) json_decref(m), m = NULL;
  if (!m) return OOM();
  *out = m;
  return OT_OK;
}

/* The pipeline around the model: normalizer, pre-tokenizer, decoder. */
static ot_status pipeline(const conv *c, json_t *root, int *ignore_merges) {
  *ignore_merges = 0;
  int ok;
  if (c->spm) {
    int space;
    OT_TRY(get_flag(c, K_SPACE, 1, &space));
    json_t *norm = json_array(), *dec = json_array();
    ok = norm && dec && (!space || push(norm, json_pack("{s:s, s:s}", "type", "Prepend", "prepend", "\u2581"))) &&
         push(norm, replace(" ", "\u2581")) && push(dec, replace("\u2581", " ")) &&
         push(dec, json_pack("{s:s}", "type", "ByteFallback")) && push(dec, json_pack("{s:s}", "type", "Fuse")) &&
         (!space || push(dec, json_pack("{s:s, s:s, s:i, s:i}", "type", "Strip", "content", " ", "start", 1, "stop", 0)));
    ok = ok && put(root, "normalizer", json_pack("{s:s, s:O}", "type", "Sequence", "normalizers", norm)) &&
         put(root, "decoder", json_pack("{s:s, s:O}", "type", "Sequence", "decoders", dec));
    json_decref(norm), json_decref(dec);
    return ok ? OT_OK : OOM();
  }
  const char *pre = ot_gguf_get_string(c->g, K_PRE);
  if (!pre && ot_gguf_has(c->g, K_PRE)) return bad_key(c, OT_ERR_FORMAT, K_PRE, "expected a string");
  const pre_entry *e = NULL;
  for (size_t k = 0; k < sizeof pres / sizeof *pres; k++)
    if (!strcmp(pre ? pre : "default", pres[k].name)) e = &pres[k];
  if (!e) {
    char names[256] = "";
    for (size_t k = 0; k < sizeof pres / sizeof *pres; k++)
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "", pres[k].name);
    return bad_key(c, OT_ERR_UNSUPPORTED, K_PRE, "'%s' is not a pre-tokenizer this reader knows (known: %s)", pre,
                   names);
  }
  *ignore_merges = e->ignore_merges;
  json_t *bl = json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0,
                         "use_regex", e->split == NULL);
  json_t *pt = e->split && bl ? json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, O]}", "type", "Sequence",
                                          "pretokenizers", "type", "Split", "pattern", "Regex", e->split, "behavior",
                                          "Isolated", "invert", 0, bl)
                              : json_incref(bl);
  json_decref(bl);
  /* the ByteLevel decoder transformers' GGUF reader writes (decoders.ByteLevel()'s defaults) */
  ok = put(root, "pre_tokenizer", pt) &&
       put(root, "decoder", json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 1,
                                      "trim_offsets", 1, "use_regex", 1));
  return ok ? OT_OK : OOM();
}

static ot_status build(conv *c, char **text) {
  const char *model_name = ot_gguf_get_string(c->g, K_MODEL);
  if (!model_name) {
    if (ot_gguf_has(c->g, K_MODEL)) return bad_key(c, OT_ERR_FORMAT, K_MODEL, "expected a string");
    return bad_key(c, OT_ERR_NOT_FOUND, K_MODEL, "missing: the file holds no tokenizer");
  }
  if (strcmp(model_name, "llama") && strcmp(model_name, "gpt2"))
    return bad_key(c, OT_ERR_UNSUPPORTED, K_MODEL,
                   "'%s' is not supported (this reader builds \"llama\" (sentencepiece BPE) and \"gpt2\" (byte-level "
                   "BPE) tokenizers)",
                   model_name);
  c->spm = !strcmp(model_name, "llama");
  OT_TRY(read_vocab(c));
  OT_TRY(read_roles(c));
  int add_bos, add_eos;
  OT_TRY(get_flag(c, K_ADD_BOS, c->spm, &add_bos));
  OT_TRY(get_flag(c, K_ADD_EOS, 0, &add_eos));
  if (add_bos && c->role[ROLE_BOS] < 0)
    return bad_key(c, OT_ERR_FORMAT, K_ADD_BOS, "true, but the file has no %s", role_keys[ROLE_BOS]);
  if (add_eos && c->role[ROLE_EOS] < 0)
    return bad_key(c, OT_ERR_FORMAT, K_ADD_EOS, "true, but the file has no %s", role_keys[ROLE_EOS]);
  json_t *root = json_object(), *m = NULL;
  if (!root) return OOM();
  int ignore_merges;
  ot_status st = pipeline(c, root, &ignore_merges);
  if (st == OT_OK) st = model(c, ignore_merges, &m);
  if (st == OT_OK && !put(root, "model", m)) st = OOM();
  if (st == OT_OK && !put(root, "added_tokens", added_tokens(c))) st = OOM();
  if (st == OT_OK && (add_bos || add_eos) && !put(root, "post_processor", template(c, add_bos, add_eos))) st = OOM();
  if (st == OT_OK && !(*text = json_dumps(root, JSON_COMPACT))) st = OOM();
  json_decref(root);
  return st;
}

ot_status ot_tokenizer_from_gguf(const ot_gguf *g, const char *label, ot_tokenizer **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_from_gguf: out is NULL");
  *out = NULL;
  if (!g) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_from_gguf: NULL file");
  conv c = {.g = g, .file = label ? label : "(gguf)"};
  char *text = NULL;
  ot_status st = build(&c, &text);
  if (st == OT_OK) st = ot_tokenizer_parse(text, strlen(text), c.file, out);
  if (st == OT_OK)
    for (int r = 0; r < N_ROLES; r++) (*out)->role[r] = c.role[r];
  free(text);
  free(c.t.tok), free(c.t.len), free(c.t.score), free(c.type);
  ot_strmap_free(&c.t.vocab);
  return st;
}

ot_status ot_tokenizer_load_gguf(const char *path, ot_tokenizer **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_load_gguf: out is NULL");
  *out = NULL;
  ot_gguf *g;
  OT_TRY(ot_gguf_open(path, &g));
  ot_status st = ot_tokenizer_from_gguf(g, path, out);
  ot_gguf_close(g);
  return st;
}
