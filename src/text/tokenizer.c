/* tokenizer.c — tokenizer.json: loading, encoding, decoding (tokenizer.h).
 *
 * Encoding follows the tokenizers library's pipeline: added tokens are cut
 * out of the text first (longest match at each position); every other
 * stretch goes through the pre-tokenizers, each of which splits every piece
 * the one before left; each final piece goes through BPE (byte-level: its
 * bytes first mapped to GPT-2's printable alphabet). Pieces are ranges of a
 * byte buffer that each pre-tokenizer step rebuilds (ByteLevel's prefix
 * space is the only edit). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/json_util.h"
#include "omptensor/file.h"
#include "omptensor/tokenizer.h"
#include "text/strmap.h"

#define MAX_FILE (1u << 30)

typedef enum { PT_BYTELEVEL, PT_SPLIT, PT_METASPACE } pt_kind;
typedef enum { PS_ALWAYS, PS_NEVER, PS_FIRST } prepend_scheme;

/* Normalizers and decoders that edit text: Prepend (a = what), Replace (a
 * = the pattern, a string; b = its replacement); decoders also Strip (a =
 * the character, n_start / n_stop how many), Metaspace (a = the
 * replacement, scheme), ByteLevel, ByteFallback, Fuse. */
typedef enum { ED_PREPEND, ED_REPLACE, ED_BYTELEVEL, ED_BYTEFALLBACK, ED_FUSE, ED_STRIP, ED_METASPACE } ed_kind;
typedef struct edit {
  ed_kind kind;
  char *a, *b;
  size_t na, nb;
  int n_start, n_stop;
  prepend_scheme scheme;
} edit;
typedef enum { B_ISOLATED, B_REMOVED, B_PREV, B_NEXT, B_CONTIG } split_beh;

typedef struct pretok {
  pt_kind kind;
  int add_prefix_space, use_regex, invert;
  split_beh beh;
  char *repl; /* Metaspace: the replacement character (UTF-8) */
  size_t n_repl;
  prepend_scheme scheme;
  int split;
  pcre2_code *re; /* Split, or ByteLevel's GPT-2 pattern */
} pretok;

typedef struct added_tok {
  char *content;
  size_t len;
  int32_t id;
} added_tok;

struct ot_tokenizer {
  char *file; /* for messages */
  ot_strmap vocab, merges;
  char **tok;     /* [n_ids] id -> token text (NULL: no such id) */
  size_t *tok_len;
  unsigned char *special;
  int32_t n_ids;
  added_tok *add;
  int n_add;
  int add_first[256][2]; /* added tokens by first byte: [start, count) into add (sorted by first byte) */
  pretok *pt;
  int n_pt;
  int byte_level; /* a ByteLevel pre-tokenizer: BPE works on mapped bytes */
  edit *norm, *dec; /* the normalizers and the decoders, in order */
  int n_norm, n_dec;
  int ignore_merges, byte_fallback, fuse_unk;
  int32_t unk;
  int32_t *pre, *post; /* the template's special ids before and after $A */
  int n_pre, n_post;
};

/* ---- GPT-2's byte <-> printable-codepoint table -------------------------------- */
static uint16_t b2u[256];
static int16_t u2b[512];

static void byte_table(void) {
  if (b2u['!']) return;
  int n = 0;
  for (int b = 0; b < 256; b++) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    b2u[b] = (uint16_t)(printable ? b : 256 + n++);
  }
  for (int i = 0; i < 512; i++) u2b[i] = -1;
  for (int b = 0; b < 256; b++) u2b[b2u[b]] = (int16_t)b;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  o[0] = (char)(0xC0 | (cp >> 6));
  o[1] = (char)(0x80 | (cp & 0x3F));
  return 2;
}

/* Length of a valid UTF-8 sequence at s (0: invalid). */
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (!k || k > n || (k == 2 && c < 0xC2)) return 0;
  for (size_t i = 1; i < k; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  if (k == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0))) return 0;
  if (k == 4 && ((c == 0xF0 && s[1] < 0x90) || c > 0xF4 || (c == 0xF4 && s[1] >= 0x90))) return 0;
  return k;
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
  /* a literal string takes no Unicode-property option (PCRE2 refuses the pair) */
  *out = pcre2_compile((PCRE2_SPTR)pat, len, PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP), &err, &at, NULL);
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
  for (int k = 0; k < n; k++) free(e[k].a), free(e[k].b);
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
    if (json_is_object(pat) && json_object_get(pat, "Regex")) return unsupported(tk, field, "Replace with a Regex pattern");
    if (!json_is_object(pat) || !(e.a = dup_str(pat, "String", &e.na)) || !e.na)
      return free(e.a), bad(tk, field, "Replace without a {\"String\": ...} pattern", NULL);
    if (!(e.b = dup_str(o, "content", &e.nb))) return free(e.a), bad(tk, field, "Replace without a \"content\" string", NULL);
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
        json_integer_value(st) < 0 || json_integer_value(sp) < 0 || json_integer_value(st) > 64 || json_integer_value(sp) > 64)
      return free(e.a), bad(tk, field, "Strip needs \"content\" and \"start\"/\"stop\" counts 0..64", NULL);
    e.n_start = (int)json_integer_value(st), e.n_stop = (int)json_integer_value(sp);
  } else if (decoder && !strcmp(t, "Metaspace")) {
    e.kind = ED_METASPACE;
    if (!(e.a = dup_str(o, "replacement", &e.na)) || !e.na) return free(e.a), bad(tk, field, "Metaspace without a \"replacement\"", NULL);
    ot_status s = get_scheme(tk, o, "decoder Metaspace prepend_scheme", &e.scheme);
    if (s != OT_OK) return free(e.a), s;
  } else {
    return unsupported(tk, decoder ? "decoder type" : "normalizer type", t);
  }
  edit *ne = realloc(*list, (size_t)(*n + 1) * sizeof *ne);
  if (!ne) {
    free(e.a), free(e.b);
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
    if (!json_is_string(src)) return bad(tk, field, "Split needs a pattern {\"Regex\": ...} or {\"String\": ...}", NULL);
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
  if (id < 0 || id >= tk->n_ids) return ot_fail(OT_ERR_FORMAT, "%s: token id %d outside 0..%d", tk->file, id, tk->n_ids - 1);
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

static int cmp_added(const void *x, const void *y) {
  const added_tok *a = x, *b = y;
  unsigned char ca = a->len ? (unsigned char)a->content[0] : 0, cb = b->len ? (unsigned char)b->content[0] : 0;
  if (ca != cb) return ca < cb ? -1 : 1;
  return a->len > b->len ? -1 : a->len < b->len; /* longest first */
}

static ot_status load_added(ot_tokenizer *tk, const json_t *added) {
  tk->add = calloc(json_array_size(added) ? json_array_size(added) : 1, sizeof *tk->add);
  if (!tk->add) return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory");
  size_t i;
  const json_t *v;
  json_array_foreach(added, i, v) {
    const json_t *c = json_object_get(v, "content");
    if (!json_is_string(c) || !json_string_length(c)) return bad(tk, "added_tokens", "an entry has no \"content\" string", NULL);
    static const char *const flags[] = {"lstrip", "rstrip", "single_word"};
    for (int k = 0; k < 3; k++)
      if (get_bool(v, flags[k], 0)) return unsupported(tk, "added_tokens flag", flags[k]);
    int32_t id = (int32_t)json_integer_value(json_object_get(v, "id"));
    added_tok *a = &tk->add[tk->n_add++];
    a->len = json_string_length(c);
    a->content = malloc(a->len);
    if (!a->content) return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory");
    memcpy(a->content, json_string_value(c), a->len);
    a->id = id;
    OT_TRY(set_token(tk, id, a->content, a->len));
    tk->special[id] = (unsigned char)get_bool(v, "special", 0);
  }
  qsort(tk->add, (size_t)tk->n_add, sizeof *tk->add, cmp_added);
  for (int k = 0; k < tk->n_add; k++) {
    int *f = tk->add_first[(unsigned char)tk->add[k].content[0]];
    if (!f[1]) f[0] = k;
    f[1]++;
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
  json_decref(none);
  OT_TRY(s);
  const json_t *pre = json_object_get(root, "pre_tokenizer");
  if (pre && !json_is_null(pre)) OT_TRY(add_pretok(tk, pre, "pre_tokenizer"));
  const json_t *pp = json_object_get(root, "post_processor");
  if (pp && !json_is_null(pp)) {
    const char *t = type_of(pp);
    if (t && !strcmp(t, "TemplateProcessing")) OT_TRY(load_template(tk, pp));
    else if (!t || strcmp(t, "ByteLevel")) return unsupported(tk, "post_processor type", t ? t : "?");
  }
  const json_t *dec = json_object_get(root, "decoder");
  if (dec && !json_is_null(dec)) OT_TRY(add_edit(tk, &tk->dec, &tk->n_dec, dec, "decoder", 1));
  return OT_OK;
}

ot_status ot_tokenizer_parse(const char *json, size_t len, const char *label, ot_tokenizer **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_parse: out is NULL");
  *out = NULL;
  if (!json || !label) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_parse: NULL argument");
  byte_table();
  ot_tokenizer *tk = calloc(1, sizeof *tk);
  if (!tk || !(tk->file = strdup(label))) {
    free(tk);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory");
  }
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

/* ---- encoding -------------------------------------------------------------------- */
typedef struct bytes {
  char *p;
  size_t n, cap;
} bytes;

typedef struct span {
  size_t off, len;
} span;

typedef struct spans {
  span *v;
  size_t n, cap;
} spans;

typedef struct ids {
  int32_t *v;
  size_t n, cap;
} ids;

static int grow_to(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 1;
  size_t c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *np = realloc(*p, c * elem);
  if (!np) return 0;
  *p = np;
  *cap = c;
  return 1;
}

static int bytes_add(bytes *b, const char *s, size_t n) {
  if (!grow_to((void **)&b->p, &b->cap, b->n + n + 1, 1)) return 0;
  memcpy(b->p + b->n, s, n);
  b->n += n;
  return 1;
}

static int spans_add(spans *s, size_t off, size_t len) {
  if (!len) return 1;
  if (!grow_to((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) return 0;
  s->v[s->n++] = (span){off, len};
  return 1;
}

static int ids_add(ids *d, int32_t id) {
  if (!grow_to((void **)&d->v, &d->cap, d->n + 1, sizeof *d->v)) return 0;
  d->v[d->n++] = id;
  return 1;
}

#define OOM() ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory")

/* The matches of re in [s, s + n) as cut points: out gets the pieces per
 * the behavior. Piece offsets are relative to `base` (s's offset in the
 * buffer). */
static ot_status split_one(const pretok *q, const char *s, size_t n, size_t base, pcre2_match_data *md, spans *out,
                           split_beh beh, int invert) {
  /* intervals alternate gap, match, gap, ...; with invert the roles swap */
  size_t pos = 0, gap0 = 0;
  size_t pend_off = 0, pend_len = 0; /* MergedWithNext / Contiguous: a match waiting */
  int have_pend = 0;
  while (pos <= n) {
    int rc = pcre2_match(q->re, (PCRE2_SPTR)s, n, pos, 0, md, NULL);
    size_t ms, me;
    if (rc < 0) {
      ms = me = n; /* no more matches: the rest is a gap */
    } else {
      PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
      ms = ov[0], me = ov[1];
    }
    int last = rc < 0;
    if (!last && me == ms) { /* empty match: no cut; step one character */
      if (ms >= n) last = 1, ms = me = n;
      else {
        size_t k = 1;
        while (ms + k < n && ((unsigned char)s[ms + k] & 0xC0) == 0x80) k++;
        pos = ms + k;
        continue;
      }
    }
    /* gap [gap0, ms), match [ms, me) */
    size_t g_off = gap0, g_len = ms - gap0, m_off = ms, m_len = me - ms;
    if (invert) { /* the gap is the delimiter now */
      size_t t_off = g_off, t_len = g_len;
      g_off = m_off, g_len = m_len, m_off = t_off, m_len = t_len;
      /* order in the text: the (old) gap comes first */
      switch (beh) {
      case B_ISOLATED:
        if (!spans_add(out, base + m_off, m_len) || !spans_add(out, base + g_off, g_len)) return OOM();
        break;
      case B_REMOVED:
        if (!spans_add(out, base + g_off, g_len)) return OOM();
        break;
      default: return ot_fail(OT_ERR_UNSUPPORTED, "tokenizer: Split with invert supports Isolated and Removed");
      }
    } else {
      switch (beh) {
      case B_ISOLATED:
        if (!spans_add(out, base + g_off, g_len) || !spans_add(out, base + m_off, m_len)) return OOM();
        break;
      case B_REMOVED:
        if (!spans_add(out, base + g_off, g_len)) return OOM();
        break;
      case B_PREV: /* the match ends the piece before it */
        if (!spans_add(out, base + g_off, g_len + m_len)) return OOM();
        break;
      case B_NEXT: /* the match starts the piece after it */
        if (have_pend) {
          if (!spans_add(out, base + pend_off, pend_len + g_len)) return OOM();
        } else if (!spans_add(out, base + g_off, g_len)) {
          return OOM();
        }
        have_pend = m_len > 0, pend_off = m_off, pend_len = m_len;
        break;
      case B_CONTIG:
        if (g_len) {
          if (have_pend && !spans_add(out, base + pend_off, pend_len)) return OOM();
          have_pend = 0;
          if (!spans_add(out, base + g_off, g_len)) return OOM();
        }
        if (m_len) {
          if (have_pend) pend_len += m_len;
          else have_pend = 1, pend_off = m_off, pend_len = m_len;
        }
        break;
      }
    }
    if (last) break;
    gap0 = pos = me;
  }
  if (have_pend && !spans_add(out, base + pend_off, pend_len)) return OOM();
  return OT_OK;
}

/* One pre-tokenizer over every piece: the pieces of `in` (in buffer *b)
 * become the pieces of `out` in buffer *nb. */
/* Appends s[0..n) to b with every `from` (one byte) replaced by to[0..nt). */
static int add_replaced(bytes *b, const char *s, size_t n, const char *from, size_t nf, const char *to, size_t nt) {
  for (size_t i = 0; i < n;) {
    if (nf && i + nf <= n && !memcmp(s + i, from, nf)) {
      if (!bytes_add(b, to, nt)) return 0;
      i += nf;
    } else {
      if (!bytes_add(b, s + i, 1)) return 0;
      i++;
    }
  }
  return 1;
}

/* Metaspace over one piece: spaces become the replacement, the replacement
 * is prepended per the scheme (first: only where the input starts), then
 * the piece is cut before each replacement. */
static ot_status metaspace(const pretok *q, const char *s, size_t n, int at_start, bytes *nb, spans *out,
                           pcre2_match_data *md) {
  size_t start = nb->n;
  /* after the spaces are replaced: a leading space counts as the replacement */
  int starts = (n && s[0] == ' ') || (n >= q->n_repl && !memcmp(s, q->repl, q->n_repl));
  if ((q->scheme == PS_ALWAYS || (q->scheme == PS_FIRST && at_start)) && !starts && !bytes_add(nb, q->repl, q->n_repl))
    return OOM();
  if (!add_replaced(nb, s, n, " ", 1, q->repl, q->n_repl)) return OOM();
  size_t tot = nb->n - start;
  if (!q->split) return spans_add(out, start, tot) ? OT_OK : OOM();
  return split_one(q, nb->p + start, tot, start, md, out, B_NEXT, 0);
}

static ot_status pretok_step(const pretok *q, const bytes *b, const spans *in, bytes *nb, spans *out,
                             pcre2_match_data *md, int at_start) {
  for (size_t i = 0; i < in->n; i++) {
    const char *s = b->p + in->v[i].off;
    const size_t n = in->v[i].len, start = nb->n; /* the piece's offset in the new buffer */
    if (q->kind == PT_METASPACE) {
      OT_TRY(metaspace(q, s, n, at_start && in->v[i].off == 0, nb, out, md));
      continue;
    }
    if (q->kind == PT_BYTELEVEL && q->add_prefix_space && s[0] != ' ' && !bytes_add(nb, " ", 1)) return OOM();
    if (!bytes_add(nb, s, n)) return OOM();
    size_t tot = nb->n - start;
    if (q->kind == PT_BYTELEVEL && !q->use_regex) {
      if (!spans_add(out, start, tot)) return OOM();
      continue;
    }
    OT_TRY(split_one(q, nb->p + start, tot, start, md, out, q->kind == PT_BYTELEVEL ? B_ISOLATED : q->beh,
                     q->kind == PT_SPLIT && q->invert));
  }
  return OT_OK;
}

static ot_status emit_symbols(const ot_tokenizer *tk, const bytes *w, const spans *sym, ids *d);

/* A queued pair: symbols i and j (= next of i when queued, with those
 * lengths), merge rank r. */
typedef struct qpair {
  int32_t r;
  uint32_t i, j, li, lj;
} qpair;

static int qless(const qpair *a, const qpair *b) { return a->r != b->r ? a->r < b->r : a->i < b->i; }

static int qpush(qpair **h, size_t *n, size_t *cap, qpair x) {
  if (!grow_to((void **)h, cap, *n + 1, sizeof **h)) return 0;
  size_t k = (*n)++;
  while (k && qless(&x, &(*h)[(k - 1) / 2])) (*h)[k] = (*h)[(k - 1) / 2], k = (k - 1) / 2;
  (*h)[k] = x;
  return 1;
}

static qpair qpop(qpair *h, size_t *n) {
  qpair top = h[0], x = h[--(*n)];
  size_t k = 0;
  for (;;) {
    size_t c = 2 * k + 1;
    if (c >= *n) break;
    if (c + 1 < *n && qless(&h[c + 1], &h[c])) c++;
    if (!qless(&h[c], &x)) break;
    h[k] = h[c], k = c;
  }
  if (*n) h[k] = x;
  return top;
}

/* The merge rank of symbols a and b of w, or -1. */
static int32_t rank_of(const ot_tokenizer *tk, const bytes *w, span a, span b, bytes *key) {
  key->n = 0;
  if (!bytes_add(key, w->p + a.off, a.len) || !bytes_add(key, "", 1) || !bytes_add(key, w->p + b.off, b.len)) return -2;
  int32_t r;
  return ot_strmap_get(&tk->merges, key->p, key->n, &r) ? r : -1;
}

/* BPE of a long piece (sentencepiece-style files have no pre-tokenizer: a
 * piece can be a whole text): the same merges as the plain loop below, the
 * lowest rank first and the leftmost of equal ranks, from a heap of
 * candidate pairs over a linked list of symbols, in O(n log n). */
static ot_status bpe_long(const ot_tokenizer *tk, const bytes *w, spans *sym, bytes *key, ids *d) {
  const size_t n = sym->n;
  if (n > UINT32_MAX - 1) return ot_fail(OT_ERR_INVALID_ARG, "tokenize: a piece of %zu characters", n);
  uint32_t *next = malloc(n * sizeof *next);
  unsigned char *dead = calloc(n, 1);
  uint32_t *prev = malloc(n * sizeof *prev);
  qpair *h = NULL;
  size_t hn = 0, hcap = 0;
  ot_status st = next && dead && prev ? OT_OK : OOM();
  for (size_t i = 0; st == OT_OK && i < n; i++) {
    next[i] = (uint32_t)(i + 1 < n ? i + 1 : UINT32_MAX);
    prev[i] = (uint32_t)(i ? i - 1 : UINT32_MAX);
    if (i + 1 < n) {
      int32_t r = rank_of(tk, w, sym->v[i], sym->v[i + 1], key);
      if (r == -2) st = OOM();
      else if (r >= 0 && !qpush(&h, &hn, &hcap, (qpair){r, (uint32_t)i, (uint32_t)(i + 1), (uint32_t)sym->v[i].len, (uint32_t)sym->v[i + 1].len}))
        st = OOM();
    }
  }
  while (st == OT_OK && hn) {
    qpair q = qpop(h, &hn);
    if (dead[q.i] || dead[q.j] || next[q.i] != q.j || sym->v[q.i].len != q.li || sym->v[q.j].len != q.lj) continue;
    sym->v[q.i].len += sym->v[q.j].len; /* merge j into i */
    dead[q.j] = 1;
    next[q.i] = next[q.j];
    if (next[q.i] != UINT32_MAX) prev[next[q.i]] = q.i;
    uint32_t nb[2][2] = {{prev[q.i], q.i}, {q.i, next[q.i]}};
    for (int k = 0; st == OT_OK && k < 2; k++) {
      if (nb[k][0] == UINT32_MAX || nb[k][1] == UINT32_MAX) continue;
      int32_t r = rank_of(tk, w, sym->v[nb[k][0]], sym->v[nb[k][1]], key);
      if (r == -2) st = OOM();
      else if (r >= 0 && !qpush(&h, &hn, &hcap, (qpair){r, nb[k][0], nb[k][1], (uint32_t)sym->v[nb[k][0]].len, (uint32_t)sym->v[nb[k][1]].len}))
        st = OOM();
    }
  }
  if (st == OT_OK) { /* the live symbols, in order */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
      if (!dead[i]) sym->v[m++] = sym->v[i];
    sym->n = m;
    st = emit_symbols(tk, w, sym, d);
  }
  free(next), free(prev), free(dead), free(h);
  return st;
}

/* BPE of one piece (bytes s[0..n)) into d. */
static ot_status bpe(const ot_tokenizer *tk, const char *s, size_t n, bytes *w, spans *sym, bytes *key, ids *d) {
  w->n = 0;
  if (tk->byte_level) {
    for (size_t i = 0; i < n; i++) {
      char u[2];
      if (!bytes_add(w, u, put_utf8(u, b2u[(unsigned char)s[i]]))) return OOM();
    }
  } else if (!bytes_add(w, s, n)) {
    return OOM();
  }
  int32_t id;
  if (tk->ignore_merges && ot_strmap_get(&tk->vocab, w->p, w->n, &id)) return ids_add(d, id) ? OT_OK : OOM();
  sym->n = 0;
  for (size_t i = 0; i < w->n;) { /* one symbol per character */
    size_t k = utf8_len((const unsigned char *)w->p + i, w->n - i);
    if (!k) k = 1;
    if (!spans_add(sym, i, k)) return OOM();
    i += k;
  }
  if (sym->n > 32) return bpe_long(tk, w, sym, key, d);
  for (;;) {
    int32_t best = INT32_MAX;
    size_t at = 0;
    for (size_t j = 0; j + 1 < sym->n; j++) {
      const span a = sym->v[j], b = sym->v[j + 1];
      key->n = 0;
      if (!bytes_add(key, w->p + a.off, a.len) || !bytes_add(key, "", 1) || !bytes_add(key, w->p + b.off, b.len))
        return OOM();
      int32_t r;
      if (ot_strmap_get(&tk->merges, key->p, key->n, &r) && r < best) best = r, at = j;
    }
    if (best == INT32_MAX) break;
    sym->v[at].len += sym->v[at + 1].len;
    memmove(sym->v + at + 1, sym->v + at + 2, (sym->n - at - 2) * sizeof *sym->v);
    sym->n--;
  }
  return emit_symbols(tk, w, sym, d);
}

static ot_status emit_symbols(const ot_tokenizer *tk, const bytes *w, const spans *sym, ids *d) {
  int32_t id;
  int prev_unk = 0;
  for (size_t j = 0; j < sym->n; j++) {
    const char *y = w->p + sym->v[j].off;
    const size_t yl = sym->v[j].len;
    if (ot_strmap_get(&tk->vocab, y, yl, &id)) {
      if (!ids_add(d, id)) return OOM();
      prev_unk = 0;
      continue;
    }
    if (tk->byte_fallback) { /* <0xHH> per byte, if the vocabulary has them all */
      size_t base = d->n, q = 0;
      for (; q < yl; q++) {
        char tok[8];
        snprintf(tok, sizeof tok, "<0x%02X>", (unsigned char)y[q]);
        int32_t bid;
        if (!ot_strmap_get(&tk->vocab, tok, 6, &bid)) break;
        if (!ids_add(d, bid)) return OOM();
      }
      if (q == yl) {
        prev_unk = 0;
        continue;
      }
      d->n = base;
    }
    if ((id = tk->unk) >= 0) {
      if (!(tk->fuse_unk && prev_unk) && !ids_add(d, id)) return OOM();
      prev_unk = 1;
      continue;
    }
    return ot_fail(OT_ERR_FORMAT, "%s: no token for '%.*s' and no unk_token", tk->file, (int)sym->v[j].len,
                   w->p + sym->v[j].off);
  }
  return OT_OK;
}

/* A stretch with no added token: pre-tokenize, then BPE each piece. */
/* The normalizers over one stretch of text, into *out (Prepend only where
 * there is text, as the tokenizers library does per stretch). */
static ot_status normalize(const ot_tokenizer *tk, const char *s, size_t n, bytes *out) {
  bytes t = {0};
  out->n = 0;
  if (!bytes_add(out, s, n)) return OOM();
  for (int k = 0; k < tk->n_norm; k++) {
    const edit *e = &tk->norm[k];
    t.n = 0;
    int ok = 1;
    if (e->kind == ED_PREPEND) ok = !out->n || (bytes_add(&t, e->a, e->na) && bytes_add(&t, out->p, out->n));
    else ok = add_replaced(&t, out->p, out->n, e->a, e->na, e->b, e->nb);
    if (!ok) return free(t.p), OOM();
    if (e->kind == ED_PREPEND && !out->n) continue;
    bytes x = *out;
    *out = t;
    t = x;
  }
  free(t.p);
  return OT_OK;
}

static ot_status encode_plain(const ot_tokenizer *tk, const char *s, size_t n, int at_start, pcre2_match_data *md,
                              ids *d) {
  if (!n) return OT_OK;
  bytes b[2] = {{0}}, w = {0}, key = {0};
  spans sp[2] = {{0}}, sym = {0};
  ot_status st = normalize(tk, s, n, &b[0]);
  if (st == OT_OK) st = spans_add(&sp[0], 0, b[0].n) ? OT_OK : OOM();
  int cur = 0;
  for (int k = 0; st == OT_OK && k < tk->n_pt; k++) {
    b[!cur].n = 0, sp[!cur].n = 0;
    st = pretok_step(&tk->pt[k], &b[cur], &sp[cur], &b[!cur], &sp[!cur], md, at_start);
    cur = !cur;
  }
  for (size_t i = 0; st == OT_OK && i < sp[cur].n; i++)
    st = bpe(tk, b[cur].p + sp[cur].v[i].off, sp[cur].v[i].len, &w, &sym, &key, d);
  free(b[0].p), free(b[1].p), free(w.p), free(key.p), free(sp[0].v), free(sp[1].v), free(sym.v);
  return st;
}

/* The longest added token at s (NULL: none). */
static const added_tok *added_at(const ot_tokenizer *tk, const char *s, size_t n) {
  const int *f = tk->add_first[(unsigned char)s[0]];
  for (int k = f[0]; k < f[0] + f[1]; k++) /* longest first */
    if (tk->add[k].len <= n && !memcmp(tk->add[k].content, s, tk->add[k].len)) return &tk->add[k];
  return NULL;
}

ot_status ot_tokenizer_encode(const ot_tokenizer *tk, const char *text, size_t len, int add_special, int32_t **out,
                              size_t *n_out) {
  if (!tk || (!text && len) || !out || !n_out) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_encode: NULL argument");
  *out = NULL;
  *n_out = 0;
  for (size_t i = 0; i < len;) {
    size_t k = utf8_len((const unsigned char *)text + i, len - i);
    if (!k) return ot_fail(OT_ERR_INVALID_ARG, "the text is not valid UTF-8 at byte %zu", i);
    i += k;
  }
  ids d = {0};
  pcre2_match_data *md = pcre2_match_data_create(4, NULL);
  ot_status st = md ? OT_OK : OOM();
  for (int k = 0; st == OT_OK && add_special && k < tk->n_pre; k++) st = ids_add(&d, tk->pre[k]) ? OT_OK : OOM();
  size_t start = 0;
  for (size_t i = 0; st == OT_OK && i <= len;) {
    const added_tok *a = i < len ? added_at(tk, text + i, len - i) : NULL;
    if (i < len && !a) {
      i++;
      continue;
    }
    st = encode_plain(tk, text + start, i - start, start == 0, md, &d);
    if (!a) break;
    if (st == OT_OK) st = ids_add(&d, a->id) ? OT_OK : OOM();
    i += a->len;
    start = i;
  }
  for (int k = 0; st == OT_OK && add_special && k < tk->n_post; k++) st = ids_add(&d, tk->post[k]) ? OT_OK : OOM();
  pcre2_match_data_free(md);
  if (st != OT_OK) {
    free(d.v);
    return st;
  }
  *out = d.v ? d.v : malloc(sizeof(int32_t));
  if (!*out) return OOM();
  *n_out = d.n;
  return OT_OK;
}

/* ---- decoding --------------------------------------------------------------------
 * As the tokenizers library: the ids become their tokens (special ones
 * left out on request), each decoder rewrites that list of strings, and
 * the result is their concatenation. */
typedef struct toks {
  bytes *v;
  size_t n;
} toks;

static void toks_free(toks *t) {
  for (size_t i = 0; i < t->n; i++) free(t->v[i].p);
  free(t->v);
}

/* ByteLevel on one token: every character back to its byte, or, if any
 * character is outside the table, the token unchanged (added tokens such
 * as <|endoftext|> map to themselves). */
static void unbyte(bytes *t) {
  size_t w = 0;
  for (size_t j = 0; j < t->n;) {
    const unsigned char *c = (const unsigned char *)t->p + j;
    size_t k = utf8_len(c, t->n - j);
    unsigned cp = k == 1 ? c[0] : k == 2 ? ((c[0] & 0x1Fu) << 6) | (c[1] & 0x3Fu) : 0xFFFFu;
    if (!k || cp >= 512 || u2b[cp] < 0) return; /* keep the whole token */
    j += k;
  }
  w = 0;
  for (size_t j = 0; j < t->n;) {
    const unsigned char *c = (const unsigned char *)t->p + j;
    size_t k = utf8_len(c, t->n - j);
    unsigned cp = k == 1 ? c[0] : ((c[0] & 0x1Fu) << 6) | (c[1] & 0x3Fu);
    t->p[w++] = (char)u2b[cp];
    j += k;
  }
  t->n = w;
}

/* "<0xHH>" -> 1 and the byte. */
static int byte_token(const bytes *t, unsigned char *b) {
  if (t->n != 6 || memcmp(t->p, "<0x", 3) || t->p[5] != '>') return 0;
  unsigned v = 0;
  for (int i = 3; i < 5; i++) {
    char c = t->p[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return 0;
    v = v * 16 + (unsigned)d;
  }
  *b = (unsigned char)v;
  return 1;
}

static int valid_utf8(const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    size_t k = utf8_len((const unsigned char *)s + i, n - i);
    if (!k) return 0;
    i += k;
  }
  return 1;
}

/* ByteFallback: each run of <0xHH> tokens becomes one token of those bytes
 * if they are UTF-8, else one U+FFFD per byte. Builds a new list of copies
 * (t stays whole if memory runs out). */
static ot_status byte_fallback(toks *t) {
  toks o = {calloc(t->n ? t->n : 1, sizeof *o.v), 0};
  if (!o.v) return OOM();
  bytes run = {0};
  size_t run_n = 0;
  for (size_t i = 0; i <= t->n; i++) {
    unsigned char b;
    if (i < t->n && byte_token(&t->v[i], &b)) {
      if (!bytes_add(&run, (const char *)&b, 1)) goto oom;
      run_n++;
      continue;
    }
    if (run_n) {
      bytes x = {0};
      if (valid_utf8(run.p, run.n)) {
        if (!bytes_add(&x, run.p, run.n)) goto oom;
      } else {
        for (size_t k = 0; k < run_n; k++)
          if (!bytes_add(&x, "\xEF\xBF\xBD", 3)) goto oom;
      }
      o.v[o.n++] = x;
      run.n = 0, run_n = 0;
    }
    if (i < t->n) {
      bytes x = {0};
      if (!bytes_add(&x, t->v[i].p, t->v[i].n)) goto oom;
      o.v[o.n++] = x;
    }
  }
  free(run.p);
  toks_free(t);
  *t = o;
  return OT_OK;
oom:
  free(run.p);
  toks_free(&o);
  return OOM();
}

/* Strip: up to n_start leading and n_stop trailing copies of the character. */
static void strip(bytes *t, const edit *e) {
  size_t lo = 0, hi = t->n;
  for (int k = 0; k < e->n_start && lo + e->na <= hi && !memcmp(t->p + lo, e->a, e->na); k++) lo += e->na;
  for (int k = 0; k < e->n_stop && hi >= lo + e->na && !memcmp(t->p + hi - e->na, e->a, e->na); k++) hi -= e->na;
  memmove(t->p, t->p + lo, hi - lo);
  t->n = hi - lo;
}

static ot_status apply_decoder(const edit *e, toks *t) {
  switch (e->kind) {
  case ED_BYTELEVEL:
    for (size_t i = 0; i < t->n; i++) unbyte(&t->v[i]);
    return OT_OK;
  case ED_BYTEFALLBACK: return byte_fallback(t);
  case ED_FUSE:
    for (size_t i = 1; i < t->n; i++) {
      if (!bytes_add(&t->v[0], t->v[i].p, t->v[i].n)) return OOM();
      free(t->v[i].p);
    }
    if (t->n > 1) t->n = 1;
    return OT_OK;
  case ED_STRIP:
    for (size_t i = 0; i < t->n; i++) strip(&t->v[i], e);
    return OT_OK;
  case ED_REPLACE:
  case ED_METASPACE:
    for (size_t i = 0; i < t->n; i++) {
      bytes x = {0};
      int ok = e->kind == ED_REPLACE ? add_replaced(&x, t->v[i].p, t->v[i].n, e->a, e->na, e->b, e->nb)
                                     : add_replaced(&x, t->v[i].p, t->v[i].n, e->a, e->na, " ", 1);
      if (!ok) return free(x.p), OOM();
      /* Metaspace: the first token's prepended space goes */
      if (e->kind == ED_METASPACE && i == 0 && e->scheme != PS_NEVER && x.n && x.p[0] == ' ')
        memmove(x.p, x.p + 1, --x.n);
      free(t->v[i].p);
      t->v[i] = x;
    }
    return OT_OK;
  default: return OT_OK;
  }
}

ot_status ot_tokenizer_decode(const ot_tokenizer *tk, const int32_t *id, size_t n, int skip_special, char **text,
                              size_t *len) {
  if (!tk || (!id && n) || !text) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_decode: NULL argument");
  *text = NULL;
  toks t = {calloc(n ? n : 1, sizeof *t.v), 0};
  if (!t.v) return OOM();
  for (size_t i = 0; i < n; i++) {
    if (id[i] < 0 || id[i] >= tk->n_ids || !tk->tok[id[i]]) {
      toks_free(&t);
      return ot_fail(OT_ERR_INVALID_ARG, "id %d (position %zu) is not in the vocabulary of %s (%d ids)", id[i], i,
                     tk->file, tk->n_ids);
    }
    if (skip_special && tk->special[id[i]]) continue;
    bytes x = {0};
    if (!bytes_add(&x, tk->tok[id[i]], tk->tok_len[id[i]])) return toks_free(&t), OOM();
    t.v[t.n++] = x;
  }
  ot_status st = OT_OK;
  for (int k = 0; st == OT_OK && k < tk->n_dec; k++) st = apply_decoder(&tk->dec[k], &t);
  bytes o = {0};
  for (size_t i = 0; st == OT_OK && i < t.n; i++)
    if (!bytes_add(&o, t.v[i].p, t.v[i].n)) st = OOM();
  if (st == OT_OK && !bytes_add(&o, "", 1)) st = OOM();
  toks_free(&t);
  if (st != OT_OK) return free(o.p), st;
  *text = o.p;
  if (len) *len = o.n - 1;
  return OT_OK;
}
