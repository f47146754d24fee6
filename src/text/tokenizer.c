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
#include <sys/stat.h>

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

/* ---- loading ----------------------------------------------------------------------
 * Each part's fields are read through ot_tok_field (tokenizer_field.c),
 * typed and required as the tokenizers library's serde types have them;
 * `at` is the part's JSON path, for messages. */
static ot_status unsupported(const ot_tokenizer *tk, const char *at, const char *what, const char *value) {
  return ot_fail(OT_ERR_UNSUPPORTED, "%s: %s: %s '%s' is not supported by this reader (tokenizer.h lists what is)",
                 tk->file, at, what, value);
}

/* The part's "type" (o must be an object). */
static ot_status type_of(const ot_tokenizer *tk, const json_t *o, const char *at, const char **t) {
  size_t n;
  if (!json_is_object(o))
    return ot_fail(OT_ERR_FORMAT, "%s: %s: expected an object with a \"type\", found %s", tk->file, at,
                   ot_json_kind(o));
  return ot_tok_str(tk->file, o, at, "type", TF_STRING, TF_REQUIRED, t, &n);
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

/* A copy of s[0..n) (NUL-terminated), or NULL. */
static char *dup_n(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n), d[n] = 0;
  return d;
}

/* A string field's copy (required). */
static ot_status dup_field(const ot_tokenizer *tk, const json_t *o, const char *at, const char *k, tf_type t,
                           char **out, size_t *n) {
  const char *s;
  OT_TRY(ot_tok_str(tk->file, o, at, k, t, TF_REQUIRED, &s, n));
  return (*out = dup_n(s, *n)) ? OT_OK : OOM();
}

/* Replace's or Split's pattern: {"String": s} or {"Regex": s}, one key (the
 * library's externally tagged enum). *src the string, *literal for String. */
static ot_status pattern_of(const ot_tokenizer *tk, const json_t *o, const char *at, const json_t **src, int *literal) {
  const json_t *p;
  char pa[256];
  OT_TRY(ot_tok_field(tk->file, o, at, "pattern", TF_OBJECT, TF_REQUIRED, &p));
  ot_tok_path(pa, sizeof pa, at, "pattern", -1);
  const json_t *str = json_object_get(p, "String"), *re = json_object_get(p, "Regex");
  if (json_object_size(p) != 1 || (!str && !re))
    return ot_fail(OT_ERR_FORMAT, "%s: %s: expected {\"String\": ...} or {\"Regex\": ...} (one key)", tk->file, pa);
  OT_TRY(ot_tok_field(tk->file, p, pa, str ? "String" : "Regex", TF_STRING, TF_REQUIRED, src));
  *literal = str != NULL;
  return OT_OK;
}

/* Metaspace's replacement character, prepend_scheme (default always) and
 * the older add_prefix_space (false needs prepend_scheme never), as the
 * library's MetaspaceHelper; split (default true) and str_rep typed. */
static ot_status metaspace_fields(const ot_tokenizer *tk, const json_t *o, const char *at, char **repl, size_t *n_repl,
                                  prepend_scheme *scheme, int *split) {
  const char *s, *str_rep;
  size_t n;
  int aps;
  OT_TRY(ot_tok_str(tk->file, o, at, "prepend_scheme", TF_STRING, TF_DEFAULT, &s, &n));
  OT_TRY(ot_tok_bool(tk->file, o, at, "add_prefix_space", TF_OPTIONAL, 1, &aps));
  OT_TRY(ot_tok_bool(tk->file, o, at, "split", TF_OPTIONAL, 1, split));
  OT_TRY(ot_tok_str(tk->file, o, at, "str_rep", TF_STRING, TF_OPTIONAL, &str_rep, &n));
  if (!s || !strcmp(s, "always")) *scheme = PS_ALWAYS;
  else if (!strcmp(s, "never")) *scheme = PS_NEVER;
  else if (!strcmp(s, "first")) *scheme = PS_FIRST;
  else return ot_fail(OT_ERR_FORMAT, "%s: %s.prepend_scheme: '%s' is none of always, first, never", tk->file, at, s);
  if (!aps && *scheme != PS_NEVER)
    return ot_fail(OT_ERR_FORMAT, "%s: %s: add_prefix_space false needs prepend_scheme \"never\"", tk->file, at);
  return dup_field(tk, o, at, "replacement", TF_CHAR, repl, n_repl);
}

/* ByteLevel's fields (pre-tokenizer, decoder and post-processor alike). */
static ot_status byte_level_fields(const ot_tokenizer *tk, const json_t *o, const char *at, int *add_prefix_space,
                                   int *use_regex) {
  int trim;
  OT_TRY(ot_tok_bool(tk->file, o, at, "add_prefix_space", TF_REQUIRED, 0, add_prefix_space));
  OT_TRY(ot_tok_bool(tk->file, o, at, "trim_offsets", TF_REQUIRED, 0, &trim));
  return ot_tok_bool(tk->file, o, at, "use_regex", TF_DEFAULT, 1, use_regex);
}

/* A Sequence's list (key) of parts, each through one(): the element paths are at.key[i]. */
typedef ot_status (*part_fn)(ot_tokenizer *tk, const json_t *o, const char *at, void *user);
static ot_status each_part(ot_tokenizer *tk, const json_t *o, const char *at, const char *key, part_fn one,
                           void *user) {
  const json_t *list, *x;
  OT_TRY(ot_tok_field(tk->file, o, at, key, TF_ARRAY, TF_REQUIRED, &list));
  size_t i;
  json_array_foreach(list, i, x) {
    char el[256];
    OT_TRY(one(tk, x, ot_tok_path(el, sizeof el, at, key, (long)i), user));
  }
  return OT_OK;
}

static void free_edit(edit *e) { free(e->a), free(e->b), pcre2_code_free(e->re); }

static void free_edits(edit *e, int n) {
  for (int k = 0; k < n; k++) free_edit(&e[k]);
  free(e);
}

/* The fields of one normalizer or decoder of type t (not a Sequence) into *e. */
static ot_status read_edit(ot_tokenizer *tk, const json_t *o, const char *at, const char *t, int decoder, edit *e) {
  if (!strcmp(t, "Prepend") && !decoder) {
    e->kind = ED_PREPEND;
    return dup_field(tk, o, at, "prepend", TF_STRING, &e->a, &e->na);
  }
  if (!strcmp(t, "Replace")) {
    const json_t *src;
    int literal;
    e->kind = ED_REPLACE;
    OT_TRY(pattern_of(tk, o, at, &src, &literal));
    OT_TRY(dup_field(tk, o, at, "content", TF_STRING, &e->b, &e->nb));
    if (literal && json_string_length(src)) /* a string: matched byte for byte, no regex engine */
      return (e->a = dup_n(json_string_value(src), (e->na = json_string_length(src)))) ? OT_OK : OOM();
    /* a Regex, or the empty string, which the library's escaped regex matches between characters */
    return compile(tk, at, json_string_value(src), json_string_length(src), literal, &e->re);
  }
  if (!decoder && (!strcmp(t, "NFC") || !strcmp(t, "NFD") || !strcmp(t, "NFKC") || !strcmp(t, "NFKD"))) {
    e->kind = !strcmp(t, "NFC") ? ED_NFC : !strcmp(t, "NFD") ? ED_NFD : !strcmp(t, "NFKC") ? ED_NFKC : ED_NFKD;
    return OT_OK;
  }
  if (!decoder && !strcmp(t, "Strip")) {
    e->kind = ED_WSTRIP;
    OT_TRY(ot_tok_bool(tk->file, o, at, "strip_left", TF_REQUIRED, 0, &e->n_start));
    return ot_tok_bool(tk->file, o, at, "strip_right", TF_REQUIRED, 0, &e->n_stop);
  }
  if (decoder && !strcmp(t, "ByteLevel")) {
    int aps, re;
    e->kind = ED_BYTELEVEL;
    return byte_level_fields(tk, o, at, &aps, &re);
  }
  if (decoder && (!strcmp(t, "ByteFallback") || !strcmp(t, "Fuse"))) {
    e->kind = !strcmp(t, "Fuse") ? ED_FUSE : ED_BYTEFALLBACK;
    return OT_OK;
  }
  if (decoder && !strcmp(t, "Strip")) {
    int64_t start, stop;
    e->kind = ED_STRIP;
    /* usize in the library; the loop stops at the token's end, so any count is cheap */
    OT_TRY(ot_tok_uint(tk->file, o, at, "start", TF_REQUIRED, INT32_MAX, 0, &start));
    OT_TRY(ot_tok_uint(tk->file, o, at, "stop", TF_REQUIRED, INT32_MAX, 0, &stop));
    e->n_start = (int)start, e->n_stop = (int)stop;
    return dup_field(tk, o, at, "content", TF_CHAR, &e->a, &e->na);
  }
  if (decoder && !strcmp(t, "Metaspace")) {
    int split;
    e->kind = ED_METASPACE;
    return metaspace_fields(tk, o, at, &e->a, &e->na, &e->scheme, &split);
  }
  return unsupported(tk, at, decoder ? "decoder type" : "normalizer type", t);
}

typedef struct edit_list {
  edit **list;
  int *n;
  int decoder;
} edit_list;

/* One normalizer or decoder (a Sequence: each of its parts) into the list. */
static ot_status add_edit(ot_tokenizer *tk, const json_t *o, const char *at, void *user) {
  edit_list *l = user;
  const char *t;
  OT_TRY(type_of(tk, o, at, &t));
  if (!strcmp(t, "Sequence")) return each_part(tk, o, at, l->decoder ? "decoders" : "normalizers", add_edit, l);
  edit e;
  memset(&e, 0, sizeof e);
  ot_status st = read_edit(tk, o, at, t, l->decoder, &e);
  edit *ne = st == OT_OK ? realloc(*l->list, (size_t)(*l->n + 1) * sizeof *ne) : NULL;
  if (!ne) {
    free_edit(&e);
    return st != OT_OK ? st : OOM();
  }
  *l->list = ne;
  ne[(*l->n)++] = e;
  return OT_OK;
}

/* Split's and Punctuation's behavior (the library's SplitDelimiterBehavior). */
static ot_status behavior(const ot_tokenizer *tk, const json_t *o, const char *at, tf_presence p, split_beh *out) {
  static const char *const names[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
  const char *s;
  size_t n;
  OT_TRY(ot_tok_str(tk->file, o, at, "behavior", TF_STRING, p, &s, &n));
  int k = 0;
  while (s && k < 5 && strcmp(s, names[k])) k++;
  if (k == 5)
    return ot_fail(OT_ERR_FORMAT, "%s: %s.behavior: '%s' is none of Isolated, Removed, MergedWithPrevious, "
                   "MergedWithNext, Contiguous", tk->file, at, s);
  *out = s ? (split_beh)k : B_ISOLATED;
  return OT_OK;
}

/* GPT-2's pattern (the tokenizers library's ByteLevel with use_regex). */
static const char gpt2_pattern[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* The fields of one pre-tokenizer of type t (not a Sequence) into *q. */
static ot_status read_pretok(ot_tokenizer *tk, const json_t *p, const char *at, const char *t, pretok *q) {
  if (!strcmp(t, "ByteLevel")) {
    q->kind = PT_BYTELEVEL;
    OT_TRY(byte_level_fields(tk, p, at, &q->add_prefix_space, &q->use_regex));
    tk->byte_level = 1;
    return q->use_regex ? compile(tk, at, gpt2_pattern, sizeof gpt2_pattern - 1, 0, &q->re) : OT_OK;
  }
  if (!strcmp(t, "Metaspace")) {
    q->kind = PT_METASPACE;
    OT_TRY(metaspace_fields(tk, p, at, &q->repl, &q->n_repl, &q->scheme, &q->split));
    q->beh = B_NEXT; /* the pieces start at each replacement: MergedWithNext on it */
    return q->split ? compile(tk, at, q->repl, q->n_repl, 1, &q->re) : OT_OK;
  }
  if (!strcmp(t, "Split")) {
    const json_t *src;
    int literal;
    q->kind = PT_SPLIT;
    OT_TRY(pattern_of(tk, p, at, &src, &literal));
    OT_TRY(behavior(tk, p, at, TF_REQUIRED, &q->beh));
    OT_TRY(ot_tok_bool(tk->file, p, at, "invert", TF_REQUIRED, 0, &q->invert));
    return compile(tk, at, json_string_value(src), json_string_length(src), literal, &q->re);
  }
  if (!strcmp(t, "Digits")) {
    /* Rust's char::is_numeric is \p{N}; individual_digits isolates each,
     * else a run is one piece */
    int each;
    q->kind = PT_SPLIT;
    q->beh = B_ISOLATED;
    OT_TRY(ot_tok_bool(tk->file, p, at, "individual_digits", TF_REQUIRED, 0, &each));
    return compile(tk, at, each ? "\\p{N}" : "\\p{N}+", each ? 5 : 6, 0, &q->re);
  }
  if (!strcmp(t, "Punctuation")) {
    /* Rust's char::is_ascii_punctuation || Unicode P*, per character */
    static const char punct[] = "[\\p{P}!-/:-@\\[-`{-~]";
    q->kind = PT_SPLIT;
    OT_TRY(behavior(tk, p, at, TF_DEFAULT, &q->beh));
    return compile(tk, at, punct, sizeof punct - 1, 0, &q->re);
  }
  return unsupported(tk, at, "pre_tokenizer type", t);
}

static ot_status add_pretok(ot_tokenizer *tk, const json_t *p, const char *at, void *user) {
  const char *t;
  OT_TRY(type_of(tk, p, at, &t));
  if (!strcmp(t, "Sequence")) return each_part(tk, p, at, "pretokenizers", add_pretok, user);
  pretok q;
  memset(&q, 0, sizeof q);
  ot_status st = read_pretok(tk, p, at, t, &q);
  pretok *np = st == OT_OK ? realloc(tk->pt, (size_t)(tk->n_pt + 1) * sizeof *np) : NULL;
  if (!np) {
    free(q.repl);
    pcre2_code_free(q.re);
    return st != OT_OK ? st : OOM();
  }
  tk->pt = np;
  tk->pt[tk->n_pt++] = q;
  return OT_OK;
}

/* One piece of a template (at): {"Sequence": {"id": "A"|"B", "type_id": n}}
 * or {"SpecialToken": {"id": name, "type_id": n}}; *name NULL for a Sequence. */
static ot_status template_piece(const ot_tokenizer *tk, const json_t *item, const char *at, const char **name) {
  const json_t *seq = json_object_get(item, "Sequence"), *st = json_object_get(item, "SpecialToken");
  if (!json_is_object(item) || json_object_size(item) != 1 || (!seq && !st))
    return ot_fail(OT_ERR_FORMAT, "%s: %s: expected {\"Sequence\": ...} or {\"SpecialToken\": ...}", tk->file, at);
  char in[256];
  const json_t *v;
  const char *id;
  size_t n;
  ot_tok_path(in, sizeof in, at, seq ? "Sequence" : "SpecialToken", -1);
  OT_TRY(ot_tok_field(tk->file, item, at, seq ? "Sequence" : "SpecialToken", TF_OBJECT, TF_REQUIRED, &v));
  OT_TRY(ot_tok_str(tk->file, v, in, "id", TF_STRING, TF_REQUIRED, &id, &n));
  int64_t type_id;
  OT_TRY(ot_tok_uint(tk->file, v, in, "type_id", TF_REQUIRED, UINT32_MAX, 0, &type_id));
  if (seq && strcmp(id, "A") && strcmp(id, "B"))
    return ot_fail(OT_ERR_FORMAT, "%s: %s.id: '%s' is neither A nor B", tk->file, in, id);
  *name = seq ? NULL : id;
  return OT_OK;
}

/* special_tokens[name].ids, checked (entries typed as the library's SpecialToken). */
static ot_status special_ids(const ot_tokenizer *tk, const json_t *sp, const char *name, const json_t **ids) {
  char at[256];
  const json_t *def, *toks, *x;
  const char *s;
  size_t n, k;
  snprintf(at, sizeof at, "post_processor.special_tokens");
  OT_TRY(ot_tok_field(tk->file, sp, at, name, TF_OBJECT, TF_REQUIRED, &def));
  ot_tok_path(at, sizeof at, "post_processor.special_tokens", name, -1);
  OT_TRY(ot_tok_str(tk->file, def, at, "id", TF_STRING, TF_REQUIRED, &s, &n));
  OT_TRY(ot_tok_field(tk->file, def, at, "ids", TF_ARRAY, TF_REQUIRED, ids));
  OT_TRY(ot_tok_field(tk->file, def, at, "tokens", TF_ARRAY, TF_REQUIRED, &toks));
  json_array_foreach(toks, k, x) if (!json_is_string(x)) return ot_fail(OT_ERR_FORMAT,
                                                                        "%s: %s.tokens[%zu]: expected a string, found %s",
                                                                        tk->file, at, k, ot_json_kind(x));
  json_array_foreach(*ids, k, x) {
    if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > UINT32_MAX)
      return ot_fail(OT_ERR_FORMAT, "%s: %s.ids[%zu]: expected an id 0..2^32-1, found %s", tk->file, at, k,
                     json_is_integer(x) ? "an integer outside it" : ot_json_kind(x));
    if (json_integer_value(x) > INT32_MAX || !ot_tok_entry(tk, (int32_t)json_integer_value(x)))
      return ot_fail(OT_ERR_FORMAT, "%s: %s.ids[%zu]: %lld is no token's id", tk->file, at, k,
                     (long long)json_integer_value(x));
  }
  return OT_OK;
}

/* A template (single, or pair: checked only) of the post-processor at. */
static ot_status load_template_list(ot_tokenizer *tk, const json_t *pp, const json_t *sp, const char *key, int use) {
  const json_t *list, *item;
  OT_TRY(ot_tok_field(tk->file, pp, "post_processor", key, TF_ARRAY, TF_REQUIRED, &list));
  size_t i, n_ids = 0;
  int seen_a = 0;
  json_array_foreach(list, i, item) { /* sized first: the template's ids, before and after $A */
    char at[256];
    const char *name;
    const json_t *ids;
    OT_TRY(template_piece(tk, item, ot_tok_path(at, sizeof at, "post_processor", key, (long)i), &name));
    if (!name) continue;
    OT_TRY(special_ids(tk, sp, name, &ids));
    n_ids += json_array_size(ids);
  }
  if (!use) return OT_OK;
  if (!(tk->pre = malloc((n_ids ? n_ids : 1) * sizeof *tk->pre)) ||
      !(tk->post = malloc((n_ids ? n_ids : 1) * sizeof *tk->post)))
    return OOM();
  json_array_foreach(list, i, item) {
    const json_t *seq = json_object_get(item, "Sequence"), *x;
    if (seq) {
      seen_a = 1;
      continue;
    }
    const json_t *ids = json_object_get(json_object_get(sp, json_string_value(json_object_get(
                                                                json_object_get(item, "SpecialToken"), "id"))),
                                        "ids");
    size_t k;
    json_array_foreach(ids, k, x) {
      if (seen_a) tk->post[tk->n_post++] = (int32_t)json_integer_value(x);
      else tk->pre[tk->n_pre++] = (int32_t)json_integer_value(x);
    }
  }
  return OT_OK;
}

/* TemplateProcessing: "single" (special tokens before and after $A) is
 * what encoding adds; "pair" and "special_tokens" are typed as well. */
static ot_status load_template(ot_tokenizer *tk, const json_t *pp) {
  const json_t *sp;
  OT_TRY(ot_tok_field(tk->file, pp, "post_processor", "special_tokens", TF_OBJECT, TF_REQUIRED, &sp));
  OT_TRY(load_template_list(tk, pp, sp, "pair", 0));
  return load_template_list(tk, pp, sp, "single", 1);
}

/* The post-processor: ByteLevel (offsets only: the ids stay), one
 * TemplateProcessing, or a Sequence of those (Llama 3's files). */
static ot_status load_post(ot_tokenizer *tk, const json_t *pp, const char *at, void *user) {
  const char *t;
  OT_TRY(type_of(tk, pp, at, &t));
  if (!strcmp(t, "Sequence")) return each_part(tk, pp, at, "processors", load_post, user);
  if (!strcmp(t, "TemplateProcessing")) {
    if (tk->has_template) return unsupported(tk, at, "post_processor", "a second TemplateProcessing");
    tk->has_template = 1;
    return load_template(tk, pp);
  }
  int aps, re;
  if (!strcmp(t, "ByteLevel")) return byte_level_fields(tk, pp, at, &aps, &re);
  return unsupported(tk, at, "post_processor type", t);
}

static ot_status load_json(ot_tokenizer *tk, const json_t *root) {
  if (!json_is_object(root))
    return ot_fail(OT_ERR_FORMAT, "%s: (top level): expected an object, found %s", tk->file, ot_json_kind(root));
  const json_t *version, *norm, *added, *model, *pre, *pp, *dec;
  OT_TRY(ot_tok_field(tk->file, root, "", "version", TF_STRING, TF_DEFAULT, &version));
  if (version && strcmp(json_string_value(version), "1.0"))
    return ot_fail(OT_ERR_FORMAT, "%s: version: '%s' is not a tokenizer.json version this reader knows (1.0)",
                   tk->file, json_string_value(version));
  OT_TRY(ot_tok_field(tk->file, root, "", "normalizer", TF_OBJECT, TF_OPTIONAL, &norm));
  OT_TRY(ot_tok_field(tk->file, root, "", "added_tokens", TF_ARRAY, TF_DEFAULT, &added));
  OT_TRY(ot_tok_field(tk->file, root, "", "model", TF_OBJECT, TF_REQUIRED, &model));
  OT_TRY(ot_tok_field(tk->file, root, "", "pre_tokenizer", TF_OBJECT, TF_OPTIONAL, &pre));
  OT_TRY(ot_tok_field(tk->file, root, "", "post_processor", TF_OBJECT, TF_OPTIONAL, &pp));
  OT_TRY(ot_tok_field(tk->file, root, "", "decoder", TF_OBJECT, TF_OPTIONAL, &dec));
  edit_list nl = {&tk->norm, &tk->n_norm, 0}, dl = {&tk->dec, &tk->n_dec, 1};
  if (norm) OT_TRY(add_edit(tk, norm, "normalizer", &nl));
  OT_TRY(ot_tok_load_model(tk, model));
  if (added) OT_TRY(ot_tok_load_added(tk, added));
  OT_TRY(ot_tok_build_added(tk)); /* after the normalizer: normalized tokens are matched normalized */
  if (pre) OT_TRY(add_pretok(tk, pre, "pre_tokenizer", NULL));
  if (pp) OT_TRY(load_post(tk, pp, "post_processor", NULL));
  if (dec) OT_TRY(add_edit(tk, dec, "decoder", &dl));
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

/* A file given where a tokenizer is read that is neither GGUF nor *.json:
 * said as such, with its first bytes, rather than as "PATH/tokenizer.json:
 * a folder on the way is a file" (the message run gives, hfconfig.c). */
static ot_status not_a_tokenizer(const char *path) {
  unsigned char b[4];
  FILE *f = fopen(path, "rb");
  const size_t n = f ? fread(b, 1, sizeof b, f) : 0;
  if (f) fclose(f);
  char m[5];
  ot_gguf_magic_text(b, n, m);
  return ot_fail(OT_ERR_FORMAT, "%s: not a tokenizer: not a GGUF file (magic '%s', expected 'GGUF') nor a "
                 "tokenizer.json; give a model directory, its tokenizer.json or a .gguf file", path, m);
}

ot_status ot_tokenizer_load(const char *path, ot_tokenizer **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_load: out is NULL");
  *out = NULL;
  if (!path) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_load: path is NULL");
  if (ot_gguf_is_file(path)) return ot_tokenizer_load_gguf(path, out); /* its metadata (tokenizer_gguf.c) */
  size_t pl = strlen(path);
  struct stat sb;
  if (!(pl > 5 && !strcmp(path + pl - 5, ".json")) && stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode))
    return not_a_tokenizer(path);
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
  ot_tok_free_vocab(tk);
  ot_tok_free_added_sets(tk);
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
  const tok_entry *e = tk ? ot_tok_entry(tk, id) : NULL;
  return e ? e->text : NULL;
}
int ot_tokenizer_is_special(const ot_tokenizer *tk, int32_t id) {
  const tok_entry *e = tk ? ot_tok_entry(tk, id) : NULL;
  return e && e->special;
}
int32_t ot_tokenizer_role_id(const ot_tokenizer *tk, ot_token_role role) {
  return tk && (int)role >= 0 && (int)role < N_ROLES ? tk->role[role] : -1;
}
