/* tokenizer.c — tokenizer.json: loading (tokenizer.h); encoding is in
 * tokenizer_encode.c, decoding in tokenizer_decode.c.
 *
 * Encoding follows the tokenizers library's pipeline: added tokens are cut
 * out of the text first (longest match at each position); every other
 * stretch goes through the pre-tokenizers, each of which splits every piece
 * the one before left; each final piece goes through BPE (byte-level: its
 * bytes first mapped to GPT-2's printable alphabet). Pieces are ranges of a
 * byte buffer that each pre-tokenizer step rebuilds (ByteLevel's prefix
 * space is the only edit). */
#include <jansson.h>

#include "io/json_util.h"
#include "omptensor/file.h"
#include "omptensor/gguf.h"
#include "text/tokenizer_internal.h"

#define MAX_FILE (1u << 30)

/* ---- GPT-2's byte <-> printable-codepoint table -------------------------------- */
uint16_t ot_tok_b2u[256];
int16_t ot_tok_u2b[512];

void ot_tok_byte_table(void) {
  if (ot_tok_b2u['!']) return;
  int n = 0;
  for (int b = 0; b < 256; b++) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    ot_tok_b2u[b] = (uint16_t)(printable ? b : 256 + n++);
  }
  for (int i = 0; i < 512; i++) ot_tok_u2b[i] = -1;
  for (int b = 0; b < 256; b++) ot_tok_u2b[ot_tok_b2u[b]] = (int16_t)b;
}

/* ---- loading ---------------------------------------------------------------------- */
static ot_status bad(const ot_tokenizer *tk, const char *field, const char *fmt, const char *what) {
  return ot_fail(OT_ERR_FORMAT, "%s: %s: %s%s", tk->file, field, fmt, what ? what : "");
}

static ot_status unsupported(const ot_tokenizer *tk, const char *field, const char *value) {
  return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s '%s' is not supported by this reader (tokenizer.h lists what is)",
                 tk->file, field, value);
}

static const char *type_of(const json_t *o) {
  const json_t *t = json_is_object(o) ? json_object_get(o, "type") : NULL;
  return json_is_string(t) ? json_string_value(t) : NULL;
}

static int get_bool(const json_t *o, const char *k, int dflt) {
  const json_t *v = json_object_get(o, k);
  return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static ot_status compile(const ot_tokenizer *tk, const char *field, const char *pat, size_t len, int literal,
                         pcre2_code **out) {
  int err;
  PCRE2_SIZE at;
  /* a literal string takes no Unicode-property option (PCRE2 refuses the
   * pair); a regex is multi-line, as Oniguruma's Ruby syntax, which the
   * library compiles them in, always is (^ and $ at every line) */
  *out = pcre2_compile((PCRE2_SPTR)pat, len, PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_MULTILINE), &err,
                       &at, NULL);
  if (*out) {
    pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE); /* faster where PCRE2 has a JIT; fine without */
    return OT_OK;
  }
  PCRE2_UCHAR msg[160];
  pcre2_get_error_message(err, msg, sizeof msg);
  return ot_fail(OT_ERR_FORMAT, "%s: %s: the regular expression does not compile at offset %zu: %s", tk->file, field,
                 (size_t)at, (const char *)msg);
}

/* A copy of string field k of o (NULL: missing or not a string). */
static char *dup_str(const json_t *o, const char *k, size_t *n) {
  const json_t *v = json_object_get(o, k);
  if (!json_is_string(v)) return NULL;
  *n = json_string_length(v);
  char *s = malloc(*n + 1);
  if (s) memcpy(s, json_string_value(v), *n + 1);
  return s;
}

/* Metaspace's prepend_scheme, or the older add_prefix_space. */
static ot_status get_scheme(const ot_tokenizer *tk, const json_t *o, const char *field, prepend_scheme *out) {
  const json_t *v = json_object_get(o, "prepend_scheme");
  if (!v) {
    *out = get_bool(o, "add_prefix_space", 1) ? PS_ALWAYS : PS_NEVER;
    return OT_OK;
  }
  const char *s = json_is_string(v) ? json_string_value(v) : "";
  if (!strcmp(s, "always")) *out = PS_ALWAYS;
  else if (!strcmp(s, "never")) *out = PS_NEVER;
  else if (!strcmp(s, "first")) *out = PS_FIRST;
  else return unsupported(tk, field, s);
  return OT_OK;
}

static void free_edits(edit *e, int n) {
  for (int k = 0; k < n; k++) free(e[k].a), free(e[k].b), pcre2_code_free(e[k].re);
  free(e);
}

/* One normalizer or decoder (decoder = 1) into *list. */
static ot_status add_edit(ot_tokenizer *tk, edit **list, int *n, const json_t *o, const char *field, int decoder) {
  const char *t = type_of(o);
  if (!t) return bad(tk, field, "expected an object with a \"type\"", NULL);
  if (!strcmp(t, "Sequence")) {
    const json_t *seq = json_object_get(o, decoder ? "decoders" : "normalizers");
    if (!json_is_array(seq)) return bad(tk, field, "Sequence without its list", NULL);
    size_t i;
    const json_t *x;
    json_array_foreach(seq, i, x) OT_TRY(add_edit(tk, list, n, x, field, decoder));
    return OT_OK;
  }
  edit e;
  memset(&e, 0, sizeof e);
  if (!strcmp(t, "Prepend") && !decoder) {
    e.kind = ED_PREPEND;
    if (!(e.a = dup_str(o, "prepend", &e.na))) return bad(tk, field, "Prepend without a \"prepend\" string", NULL);
  } else if (!strcmp(t, "Replace")) {
    e.kind = ED_REPLACE;
    const json_t *pat = json_object_get(o, "pattern");
    const json_t *re = json_is_object(pat) ? json_object_get(pat, "Regex") : NULL;
    const json_t *str = json_is_object(pat) ? json_object_get(pat, "String") : NULL;
    const json_t *src = json_is_string(re) ? re : json_is_string(str) ? str : NULL;
    if (!src) return bad(tk, field, "Replace needs a pattern {\"Regex\": ...} or {\"String\": ...}", NULL);
    if (!(e.b = dup_str(o, "content", &e.nb))) return bad(tk, field, "Replace without a \"content\" string", NULL);
    if (src == str && json_string_length(str)) { /* a string: matched byte for byte, no regex engine */
      if (!(e.a = dup_str(pat, "String", &e.na))) return free(e.b), OOM();
    } else { /* a Regex, or the empty string, which the library's escaped regex matches between characters */
      ot_status st = compile(tk, field, json_string_value(src), json_string_length(src), src == str, &e.re);
      if (st != OT_OK) return free(e.b), st;
    }
  } else if (!decoder && (!strcmp(t, "NFC") || !strcmp(t, "NFD") || !strcmp(t, "NFKC") || !strcmp(t, "NFKD"))) {
    e.kind = !strcmp(t, "NFC") ? ED_NFC : !strcmp(t, "NFD") ? ED_NFD : !strcmp(t, "NFKC") ? ED_NFKC : ED_NFKD;
  } else if (!decoder && !strcmp(t, "Strip")) {
    e.kind = ED_WSTRIP;
    e.n_start = get_bool(o, "strip_left", 0), e.n_stop = get_bool(o, "strip_right", 0);
  } else if (decoder && !strcmp(t, "ByteLevel")) {
    e.kind = ED_BYTELEVEL;
  } else if (decoder && !strcmp(t, "ByteFallback")) {
    e.kind = ED_BYTEFALLBACK;
  } else if (decoder && !strcmp(t, "Fuse")) {
    e.kind = ED_FUSE;
  } else if (decoder && !strcmp(t, "Strip")) {
    e.kind = ED_STRIP;
    const json_t *st = json_object_get(o, "start"), *sp = json_object_get(o, "stop");
    if (!(e.a = dup_str(o, "content", &e.na)) || !json_is_integer(st) || !json_is_integer(sp) ||
        json_integer_value(st) < 0 || json_integer_value(sp) < 0 || json_integer_value(st) > 64 ||
        json_integer_value(sp) > 64)
      return free(e.a), bad(tk, field, "Strip needs \"content\" and \"start\"/\"stop\" counts 0..64", NULL);
    e.n_start = (int)json_integer_value(st), e.n_stop = (int)json_integer_value(sp);
  } else if (decoder && !strcmp(t, "Metaspace")) {
    e.kind = ED_METASPACE;
    if (!(e.a = dup_str(o, "replacement", &e.na)) || !e.na)
      return free(e.a), bad(tk, field, "Metaspace without a \"replacement\"", NULL);
    ot_status s = get_scheme(tk, o, "decoder Metaspace prepend_scheme", &e.scheme);
    if (s != OT_OK) return free(e.a), s;
  } else {
    return unsupported(tk, decoder ? "decoder type" : "normalizer type", t);
  }
  edit *ne = realloc(*list, (size_t)(*n + 1) * sizeof *ne);
  if (!ne) {
    free(e.a), free(e.b), pcre2_code_free(e.re);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory");
  }
  *list = ne;
  (*list)[(*n)++] = e;
  return OT_OK;
}

/* GPT-2's pattern (the tokenizers library's ByteLevel with use_regex). */
static const char gpt2_pattern[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static ot_status add_pretok(ot_tokenizer *tk, const json_t *p, const char *field) {
  const char *t = type_of(p);
  if (!t) return bad(tk, field, "expected an object with a \"type\"", NULL);
  if (!strcmp(t, "Sequence")) {
    const json_t *list = json_object_get(p, "pretokenizers");
    if (!json_is_array(list)) return bad(tk, field, "Sequence without a \"pretokenizers\" array", NULL);
    size_t i;
    const json_t *x;
    json_array_foreach(list, i, x) OT_TRY(add_pretok(tk, x, field));
    return OT_OK;
  }
  pretok q;
  memset(&q, 0, sizeof q);
  if (!strcmp(t, "ByteLevel")) {
    q.kind = PT_BYTELEVEL;
    q.add_prefix_space = get_bool(p, "add_prefix_space", 1);
    q.use_regex = get_bool(p, "use_regex", 1);
    if (q.use_regex) OT_TRY(compile(tk, field, gpt2_pattern, sizeof gpt2_pattern - 1, 0, &q.re));
    tk->byte_level = 1;
  } else if (!strcmp(t, "Metaspace")) {
    q.kind = PT_METASPACE;
    if (!(q.repl = dup_str(p, "replacement", &q.n_repl)) || !q.n_repl)
      return free(q.repl), bad(tk, field, "Metaspace without a \"replacement\"", NULL);
    ot_status s = get_scheme(tk, p, "pre_tokenizer Metaspace prepend_scheme", &q.scheme);
    if (s != OT_OK) return free(q.repl), s;
    q.split = get_bool(p, "split", 1);
    if (q.split) { /* the pieces start at each replacement: MergedWithNext on it */
      s = compile(tk, field, q.repl, q.n_repl, 1, &q.re);
      if (s != OT_OK) return free(q.repl), s;
      q.beh = B_NEXT;
    }
  } else if (!strcmp(t, "Split")) {
    q.kind = PT_SPLIT;
    const json_t *pat = json_object_get(p, "pattern");
    const json_t *re = json_is_object(pat) ? json_object_get(pat, "Regex") : NULL;
    const json_t *str = json_is_object(pat) ? json_object_get(pat, "String") : NULL;
    const json_t *src = json_is_string(re) ? re : str;
    if (!json_is_string(src))
      return bad(tk, field, "Split needs a pattern {\"Regex\": ...} or {\"String\": ...}", NULL);
    OT_TRY(compile(tk, field, json_string_value(src), json_string_length(src), src == str, &q.re));
    const json_t *b = json_object_get(p, "behavior");
    const char *bs = json_is_string(b) ? json_string_value(b) : "";
    static const char *const names[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    int k = 0;
    while (k < 5 && strcmp(bs, names[k])) k++;
    if (k == 5) {
      pcre2_code_free(q.re);
      return unsupported(tk, "pre_tokenizer Split behavior", bs);
    }
    q.beh = (split_beh)k;
    q.invert = get_bool(p, "invert", 0);
  } else if (!strcmp(t, "Digits")) {
    /* Rust's char::is_numeric is \p{N}; individual_digits isolates each,
     * else a run is one piece (Contiguous) */
    q.kind = PT_SPLIT;
    const int each = get_bool(p, "individual_digits", 0);
    OT_TRY(compile(tk, field, each ? "\\p{N}" : "\\p{N}+", each ? 5 : 6, 0, &q.re));
    q.beh = B_ISOLATED;
  } else if (!strcmp(t, "Punctuation")) {
    /* Rust's char::is_ascii_punctuation || Unicode P*, per character */
    static const char punct[] = "[\\p{P}!-/:-@\\[-`{-~]";
    q.kind = PT_SPLIT;
    OT_TRY(compile(tk, field, punct, sizeof punct - 1, 0, &q.re));
    const json_t *b = json_object_get(p, "behavior");
    const char *bs = json_is_string(b) ? json_string_value(b) : "Isolated";
    static const char *const names[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    int k = 0;
    while (k < 5 && strcmp(bs, names[k])) k++;
    if (k == 5) {
      pcre2_code_free(q.re);
      return unsupported(tk, "pre_tokenizer Punctuation behavior", bs);
    }
    q.beh = (split_beh)k;
  } else {
    return unsupported(tk, "pre_tokenizer type", t);
  }
  pretok *np = realloc(tk->pt, (size_t)(tk->n_pt + 1) * sizeof *np);
  if (!np) {
    free(q.repl);
    pcre2_code_free(q.re);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory");
  }
  tk->pt = np;
  tk->pt[tk->n_pt++] = q;
  return OT_OK;
}

static ot_status set_token(ot_tokenizer *tk, int32_t id, const char *s, size_t n) {
  if (id < 0 || id >= tk->n_ids)
    return ot_fail(OT_ERR_FORMAT, "%s: token id %d outside 0..%d", tk->file, id, tk->n_ids - 1);
  free(tk->tok[id]);
  tk->tok[id] = malloc(n + 1);
  if (!tk->tok[id]) return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory");
  memcpy(tk->tok[id], s, n);
  tk->tok[id][n] = 0;
  tk->tok_len[id] = n;
  return OT_OK;
}

static ot_status load_model(ot_tokenizer *tk, const json_t *m, const json_t *added) {
  const char *t = type_of(m);
  if (!t) return bad(tk, "model", "expected an object with a \"type\"", NULL);
  if (strcmp(t, "BPE")) return unsupported(tk, "model type", t);
  static const char *const nulls[] = {"dropout", "continuing_subword_prefix", "end_of_word_suffix"};
  for (int k = 0; k < 3; k++) {
    const json_t *v = json_object_get(m, nulls[k]);
    if (v && !json_is_null(v)) return unsupported(tk, "model field", nulls[k]);
  }
  tk->byte_fallback = get_bool(m, "byte_fallback", 0);
  tk->fuse_unk = get_bool(m, "fuse_unk", 0);
  tk->ignore_merges = get_bool(m, "ignore_merges", 0);
  const json_t *vocab = json_object_get(m, "vocab");
  if (!json_is_object(vocab)) return bad(tk, "model.vocab", "expected an object", NULL);
  /* ids: the vocabulary's and the added tokens' */
  int64_t top = -1;
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)vocab, key, v) {
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX - 1)
      return bad(tk, "model.vocab", "a token's id is not an integer in 0..2^31-2: ", key);
    if (json_integer_value(v) > top) top = json_integer_value(v);
  }
  size_t i;
  json_array_foreach(added, i, v) {
    const json_t *id = json_object_get(v, "id");
    if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > INT32_MAX - 1)
      return bad(tk, "added_tokens", "an entry's \"id\" is not an integer in 0..2^31-2", NULL);
    if (json_integer_value(id) > top) top = json_integer_value(id);
  }
  tk->n_ids = (int32_t)(top + 1);
  tk->tok = calloc((size_t)(tk->n_ids ? tk->n_ids : 1), sizeof *tk->tok);
  tk->tok_len = calloc((size_t)(tk->n_ids ? tk->n_ids : 1), sizeof *tk->tok_len);
  tk->special = calloc((size_t)(tk->n_ids ? tk->n_ids : 1), 1);
  if (!tk->tok || !tk->tok_len || !tk->special) return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory");
  json_object_foreach((json_t *)vocab, key, v) {
    size_t n = strlen(key); /* jansson keys hold no NUL */
    OT_TRY(ot_strmap_put(&tk->vocab, key, n, (int32_t)json_integer_value(v)));
    OT_TRY(set_token(tk, (int32_t)json_integer_value(v), key, n));
  }
  const json_t *merges = json_object_get(m, "merges");
  if (!json_is_array(merges)) return bad(tk, "model.merges", "expected an array", NULL);
  char *buf = NULL;
  size_t cap = 0;
  json_array_foreach(merges, i, v) {
    const char *a, *b;
    size_t na, nb;
    if (json_is_string(v)) { /* "a b" */
      a = json_string_value(v);
      const char *sp = strchr(a, ' ');
      if (!sp) {
        free(buf);
        return bad(tk, "model.merges", "a merge string without a space: ", a);
      }
      na = (size_t)(sp - a), b = sp + 1, nb = strlen(b);
    } else if (json_is_array(v) && json_array_size(v) == 2 && json_is_string(json_array_get(v, 0)) &&
               json_is_string(json_array_get(v, 1))) { /* ["a", "b"] */
      a = json_string_value(json_array_get(v, 0)), na = json_string_length(json_array_get(v, 0));
      b = json_string_value(json_array_get(v, 1)), nb = json_string_length(json_array_get(v, 1));
    } else {
      free(buf);
      return bad(tk, "model.merges", "an entry is neither \"a b\" nor [\"a\", \"b\"]", NULL);
    }
    if (na + nb + 1 > cap) {
      cap = 2 * (na + nb + 1);
      char *nbuf = realloc(buf, cap);
      if (!nbuf) {
        free(buf);
        return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory");
      }
      buf = nbuf;
    }
    memcpy(buf, a, na);
    buf[na] = 0; /* the pair's key: a NUL b (tokens hold no NUL) */
    memcpy(buf + na + 1, b, nb);
    ot_status s = ot_strmap_put(&tk->merges, buf, na + 1 + nb, (int32_t)i);
    if (s != OT_OK) {
      free(buf);
      return s;
    }
  }
  free(buf);
  tk->unk = -1;
  const json_t *unk = json_object_get(m, "unk_token");
  if (json_is_string(unk) && !ot_strmap_get(&tk->vocab, json_string_value(unk), json_string_length(unk), &tk->unk))
    return bad(tk, "model.unk_token", "not in the vocabulary: ", json_string_value(unk));
  return OT_OK;
}

static int cmp_match(const void *x, const void *y) {
  const added_match *a = x, *b = y;
  unsigned char ca = (unsigned char)a->text[0], cb = (unsigned char)b->text[0];
  if (ca != cb) return ca < cb ? -1 : 1;
  return a->len > b->len ? -1 : a->len < b->len; /* longest first */
}

static void free_sets(ot_tokenizer *tk) {
  for (int s = 0; s < 2; s++) {
    for (int k = 0; k < tk->sets[s].n; k++) free(tk->sets[s].v[k].text);
    free(tk->sets[s].v);
    memset(&tk->sets[s], 0, sizeof tk->sets[s]);
  }
}

/* Rust regex's \w (Unicode): what single_word counts as a word character
 * next to the token. */
static const char word_pattern[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]";

ot_status ot_tok_build_added(ot_tokenizer *tk) {
  free_sets(tk);
  for (int s = 0; s < 2; s++)
    if (!(tk->sets[s].v = calloc(tk->n_add ? (size_t)tk->n_add : 1, sizeof *tk->sets[s].v))) return OOM();
  pcre2_match_data *md = pcre2_match_data_create(4, NULL);
  if (!md) return OOM();
  ot_status st = OT_OK;
  int word = 0;
  for (int k = 0; st == OT_OK && k < tk->n_add; k++) {
    const added_tok *a = &tk->add[k];
    added_set *set = &tk->sets[a->normalized];
    bytes t = {0};
    /* a normalized token is looked for as the normalizer writes it */
    st = a->normalized                       ? ot_tok_normalize(tk, a->content, a->len, md, &t)
         : bytes_add(&t, a->content, a->len) ? OT_OK
                                             : OOM();
    /* the library's decode (simple_id_to_token) gives a normalized token
     * as normalized, "▁[WORD]" for "[WORD]" after Prepend */
    if (st == OT_OK) st = a->normalized ? set_token(tk, a->id, t.p, t.n) : set_token(tk, a->id, a->content, a->len);
    if (st != OT_OK || !t.n) { /* nothing to match */
      free(t.p);
      continue;
    }
    set->v[set->n++] = (added_match){t.p, t.n, a};
    word |= a->single_word;
  }
  pcre2_match_data_free(md);
  OT_TRY(st);
  for (int s = 0; s < 2; s++) {
    added_set *set = &tk->sets[s];
    qsort(set->v, (size_t)set->n, sizeof *set->v, cmp_match);
    for (int k = 0; k < set->n; k++) {
      int *f = set->first[(unsigned char)set->v[k].text[0]];
      if (!f[1]) f[0] = k;
      f[1]++;
    }
  }
  if (word && !tk->word_re)
    OT_TRY(compile(tk, "added_tokens single_word", word_pattern, sizeof word_pattern - 1, 0, &tk->word_re));
  return OT_OK;
}

static ot_status load_added(ot_tokenizer *tk, const json_t *added) {
  tk->add = calloc(json_array_size(added) ? json_array_size(added) : 1, sizeof *tk->add);
  if (!tk->add) return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory");
  size_t i;
  const json_t *v;
  json_array_foreach(added, i, v) {
    const json_t *c = json_object_get(v, "content");
    if (!json_is_string(c) || !json_string_length(c))
      return bad(tk, "added_tokens", "an entry has no \"content\" string", NULL);
    int32_t id = (int32_t)json_integer_value(json_object_get(v, "id"));
    added_tok *a = &tk->add[tk->n_add++];
    a->len = json_string_length(c);
    a->content = malloc(a->len);
    if (!a->content) return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory");
    memcpy(a->content, json_string_value(c), a->len);
    a->id = id;
    /* the library's defaults: normalized = !special */
    a->special = (unsigned char)get_bool(v, "special", 0);
    a->lstrip = (unsigned char)get_bool(v, "lstrip", 0);
    a->rstrip = (unsigned char)get_bool(v, "rstrip", 0);
    a->single_word = (unsigned char)get_bool(v, "single_word", 0);
    a->normalized = (unsigned char)get_bool(v, "normalized", !a->special);
    OT_TRY(set_token(tk, id, a->content, a->len));
    tk->special[id] = a->special;
  }
  return OT_OK;
}

/* TemplateProcessing's "single": special tokens before and after $A. */
static ot_status load_template(ot_tokenizer *tk, const json_t *pp) {
  const json_t *single = json_object_get(pp, "single"), *sp = json_object_get(pp, "special_tokens");
  if (!json_is_array(single)) return bad(tk, "post_processor.single", "expected an array", NULL);
  size_t n = json_array_size(single), i;
  tk->pre = malloc((n ? n : 1) * 4 * sizeof *tk->pre);
  tk->post = malloc((n ? n : 1) * 4 * sizeof *tk->post);
  if (!tk->pre || !tk->post) return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory");
  int seen_a = 0;
  const json_t *item;
  json_array_foreach(single, i, item) {
    const json_t *seq = json_object_get(item, "Sequence"), *st = json_object_get(item, "SpecialToken");
    if (seq) {
      seen_a = 1;
      continue;
    }
    const json_t *name = st ? json_object_get(st, "id") : NULL;
    const json_t *def = json_is_string(name) ? json_object_get(sp, json_string_value(name)) : NULL;
    const json_t *ids = def ? json_object_get(def, "ids") : NULL;
    if (!json_is_array(ids) || json_array_size(ids) > 4)
      return bad(tk, "post_processor.single", "a SpecialToken whose special_tokens entry has no \"ids\" list", NULL);
    size_t k;
    const json_t *id;
    json_array_foreach(ids, k, id) {
      if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= tk->n_ids)
        return bad(tk, "post_processor.special_tokens", "an id outside the vocabulary", NULL);
      if (seen_a) tk->post[tk->n_post++] = (int32_t)json_integer_value(id);
      else tk->pre[tk->n_pre++] = (int32_t)json_integer_value(id);
    }
  }
  return OT_OK;
}

/* The post-processor: ByteLevel (offsets only: the ids stay), one
 * TemplateProcessing, or a Sequence of those (Llama 3's files). */
static ot_status load_post(ot_tokenizer *tk, const json_t *pp) {
  const char *t = type_of(pp);
  if (t && !strcmp(t, "Sequence")) {
    const json_t *list = json_object_get(pp, "processors");
    if (!json_is_array(list)) return bad(tk, "post_processor", "Sequence without a \"processors\" array", NULL);
    size_t i;
    const json_t *x;
    json_array_foreach(list, i, x) OT_TRY(load_post(tk, x));
    return OT_OK;
  }
  if (t && !strcmp(t, "TemplateProcessing")) {
    if (tk->has_template) return unsupported(tk, "post_processor", "a second TemplateProcessing");
    tk->has_template = 1;
    return load_template(tk, pp);
  }
  if (!t || strcmp(t, "ByteLevel")) return unsupported(tk, "post_processor type", t ? t : "?");
  return OT_OK;
}

static ot_status load_json(ot_tokenizer *tk, const json_t *root) {
  if (!json_is_object(root)) return bad(tk, "(top level)", "expected an object", NULL);
  const json_t *norm = json_object_get(root, "normalizer");
  if (norm && !json_is_null(norm)) OT_TRY(add_edit(tk, &tk->norm, &tk->n_norm, norm, "normalizer", 0));
  const json_t *added = json_object_get(root, "added_tokens");
  if (added && !json_is_array(added)) return bad(tk, "added_tokens", "expected an array", NULL);
  json_t *none = json_array();
  if (!none) return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory");
  if (!added) added = none;
  const json_t *model = json_object_get(root, "model");
  ot_status s = model ? load_model(tk, model, added) : bad(tk, "model", "missing", NULL);
  if (s == OT_OK) s = load_added(tk, added);
  if (s == OT_OK) s = ot_tok_build_added(tk); /* after the normalizer: normalized tokens are matched normalized */
  json_decref(none);
  OT_TRY(s);
  const json_t *pre = json_object_get(root, "pre_tokenizer");
  if (pre && !json_is_null(pre)) OT_TRY(add_pretok(tk, pre, "pre_tokenizer"));
  const json_t *pp = json_object_get(root, "post_processor");
  if (pp && !json_is_null(pp)) OT_TRY(load_post(tk, pp));
  const json_t *dec = json_object_get(root, "decoder");
  if (dec && !json_is_null(dec)) OT_TRY(add_edit(tk, &tk->dec, &tk->n_dec, dec, "decoder", 1));
  return OT_OK;
}

ot_status ot_tokenizer_parse(const char *json, size_t len, const char *label, ot_tokenizer **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_parse: out is NULL");
  *out = NULL;
  if (!json || !label) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_parse: NULL argument");
  ot_tok_byte_table();
  ot_tokenizer *tk = calloc(1, sizeof *tk);
  if (!tk || !(tk->file = strdup(label))) {
    free(tk);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory");
  }
  for (int r = 0; r < N_ROLES; r++) tk->role[r] = -1;
  json_t *root = NULL;
  ot_status s = ot_json_parse(json, len, tk->file, "tokenizer", &root);
  if (s == OT_OK) s = load_json(tk, root);
  json_decref(root);
  if (s != OT_OK) {
    ot_tokenizer_destroy(tk);
    return s;
  }
  *out = tk;
  return OT_OK;
}

ot_status ot_tokenizer_load(const char *path, ot_tokenizer **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_load: out is NULL");
  *out = NULL;
  if (!path) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_load: path is NULL");
  if (ot_gguf_is_file(path)) return ot_tokenizer_load_gguf(path, out); /* its metadata (tokenizer_gguf.c) */
  size_t pl = strlen(path);
  char *file = malloc(pl + 16);
  if (!file) return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory");
  /* a folder: its tokenizer.json */
  int dir = pl > 5 && !strcmp(path + pl - 5, ".json") ? 0 : 1;
  snprintf(file, pl + 16, dir ? "%s/tokenizer.json" : "%s", path);
  char *text = NULL;
  size_t len = 0;
  ot_status s = ot_file_read(file, MAX_FILE, &text, &len);
  if (s == OT_OK) s = ot_tokenizer_parse(text, len, file, out);
  free(text);
  free(file);
  if (s == OT_OK && dir && (s = ot_tok_load_config(*out, path)) != OT_OK) { /* what transformers adds */
    ot_tokenizer_destroy(*out);
    *out = NULL;
  }
  return s;
}

void ot_tokenizer_destroy(ot_tokenizer *tk) {
  if (!tk) return;
  ot_strmap_free(&tk->vocab);
  ot_strmap_free(&tk->merges);
  for (int32_t i = 0; tk->tok && i < tk->n_ids; i++) free(tk->tok[i]);
  free(tk->tok);
  free(tk->tok_len);
  free(tk->special);
  for (int k = 0; k < tk->n_add; k++) free(tk->add[k].content);
  free(tk->add);
  free_sets(tk);
  pcre2_code_free(tk->word_re);
  for (int k = 0; k < tk->n_pt; k++) pcre2_code_free(tk->pt[k].re), free(tk->pt[k].repl);
  free(tk->pt);
  free_edits(tk->norm, tk->n_norm);
  free_edits(tk->dec, tk->n_dec);
  free(tk->pre);
  free(tk->post);
  free(tk->file);
  free(tk);
}

int32_t ot_tokenizer_vocab_size(const ot_tokenizer *tk) { return tk ? tk->n_ids : 0; }
const char *ot_tokenizer_token(const ot_tokenizer *tk, int32_t id) {
  return tk && id >= 0 && id < tk->n_ids ? tk->tok[id] : NULL;
}
int ot_tokenizer_is_special(const ot_tokenizer *tk, int32_t id) {
  return tk && id >= 0 && id < tk->n_ids && tk->special[id];
}
int32_t ot_tokenizer_role_id(const ot_tokenizer *tk, ot_token_role role) {
  return tk && (int)role >= 0 && (int)role < N_ROLES ? tk->role[role] : -1;
}
