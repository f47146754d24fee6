/* tokenizer_decode.c — ids to text (tokenizer.h): the decoder chain. */
#include "text/tokenizer_internal.h"

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
void ot_tok_unbyte(bytes *t) {
  size_t w = 0;
  for (size_t j = 0; j < t->n;) {
    const unsigned char *c = (const unsigned char *)t->p + j;
    size_t k = ot_utf8_len(c, t->n - j);
    unsigned cp = k == 1 ? c[0] : k == 2 ? ((c[0] & 0x1Fu) << 6) | (c[1] & 0x3Fu) : 0xFFFFu;
    if (!k || cp >= 512 || ot_tok_u2b[cp] < 0) return; /* keep the whole token */
    j += k;
  }
  w = 0;
  for (size_t j = 0; j < t->n;) {
    const unsigned char *c = (const unsigned char *)t->p + j;
    size_t k = ot_utf8_len(c, t->n - j);
    unsigned cp = k == 1 ? c[0] : ((c[0] & 0x1Fu) << 6) | (c[1] & 0x3Fu);
    t->p[w++] = (char)ot_tok_u2b[cp];
    j += k;
  }
  t->n = w;
}

/* "<0xHH>" -> 1 and the byte, as the tokenizers library reads it: Rust's
 * u8::from_str_radix of the two characters, which also takes "+H". */
int ot_tok_byte_token(const bytes *t, unsigned char *b) {
  if (t->n != 6 || memcmp(t->p, "<0x", 3) || t->p[5] != '>') return 0;
  unsigned v = 0;
  for (int i = t->p[3] == '+' ? 4 : 3; i < 5; i++) {
    char c = t->p[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                   : -1;
    if (d < 0) return 0;
    v = v * 16 + (unsigned)d;
  }
  *b = (unsigned char)v;
  return 1;
}

/* How many bytes at s (n > 0, not a valid sequence there) make the
 * maximal subpart of an ill-formed sequence: the lead byte and the
 * continuation bytes that could still have completed it (Unicode's
 * "substitution of maximal subparts", as Rust's String::from_utf8_lossy
 * and Python's decode('utf-8', 'replace') count them). At least 1. */
static size_t bad_run(const unsigned char *s, size_t n) {
  unsigned lo, hi;
  const size_t len = ot_utf8_lead(s[0], &lo, &hi), need = len ? len - 1 : 0;
  size_t k = 1;
  for (; k <= need && k < n; k++, lo = 0x80, hi = 0xBF)
    if (s[k] < lo || s[k] > hi) break;
  return k;
}

/* s[0..n) as UTF-8 with every maximal invalid subpart replaced by one
 * U+FFFD, appended to out. */
static int add_lossy(bytes *out, const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    const size_t k = ot_utf8_len((const unsigned char *)s + i, n - i);
    if (k) {
      size_t j = i + k; /* the whole valid stretch at once */
      for (size_t m; j < n && (m = ot_utf8_len((const unsigned char *)s + j, n - j));) j += m;
      if (!bytes_add(out, s + i, j - i)) return 0;
      i = j;
    } else {
      if (!bytes_add(out, "\xEF\xBF\xBD", 3)) return 0;
      i += bad_run((const unsigned char *)s + i, n - i);
    }
  }
  return 1;
}

static int valid_utf8(const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    size_t k = ot_utf8_len((const unsigned char *)s + i, n - i);
    if (!k) return 0;
    i += k;
  }
  return 1;
}

/* ByteFallback: each run of <0xHH> tokens becomes one token of those bytes
 * if they are UTF-8, else one U+FFFD token per byte (as the library does:
 * a later decoder sees them as separate tokens). Builds a new list of
 * copies (t stays whole if memory runs out). */
static ot_status byte_fallback(toks *t) {
  toks o = {NULL, 0};
  size_t cap = 0;
  bytes run = {0};
  for (size_t i = 0; i <= t->n; i++) {
    unsigned char b;
    if (i < t->n && ot_tok_byte_token(&t->v[i], &b)) {
      if (!bytes_add(&run, (const char *)&b, 1)) goto oom;
      continue;
    }
    const int valid = run.n && valid_utf8(run.p, run.n);
    for (size_t k = 0; k < (valid ? 1 : run.n); k++) {
      if (!grow_to((void **)&o.v, &cap, o.n + 1, sizeof *o.v)) goto oom;
      bytes x = {0};
      if (!(valid ? bytes_add(&x, run.p, run.n) : bytes_add(&x, "\xEF\xBF\xBD", 3))) goto oom;
      o.v[o.n++] = x;
    }
    run.n = 0;
    if (i < t->n) {
      if (!grow_to((void **)&o.v, &cap, o.n + 1, sizeof *o.v)) goto oom;
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

/* ByteLevel: every token's characters back to their bytes (a token with a
 * character outside the table keeps its own bytes), all of them joined
 * and read as UTF-8 with each invalid stretch one U+FFFD: one token, as
 * the library's decoder gives (String::from_utf8_lossy). */
static ot_status byte_level(toks *t) {
  bytes all = {0}, x = {0};
  for (size_t i = 0; i < t->n; i++) {
    ot_tok_unbyte(&t->v[i]);
    if (!bytes_add(&all, t->v[i].p, t->v[i].n)) return free(all.p), OOM();
  }
  if (!bytes_add(&x, "", 0) || !add_lossy(&x, all.p, all.n)) return free(all.p), free(x.p), OOM();
  free(all.p);
  if (!t->n) return free(x.p), OT_OK;
  for (size_t i = 0; i < t->n; i++) free(t->v[i].p);
  t->v[0] = x;
  t->n = 1;
  return OT_OK;
}

/* Strip: up to n_start leading (none: skip_start) and n_stop trailing
 * copies of the character. */
static void strip(bytes *t, const edit *e, int skip_start) {
  size_t lo = 0, hi = t->n;
  for (int k = 0; !skip_start && k < e->n_start && lo + e->na <= hi && !memcmp(t->p + lo, e->a, e->na); k++) lo += e->na;
  for (int k = 0; k < e->n_stop && hi >= lo + e->na && !memcmp(t->p + hi - e->na, e->a, e->na); k++) hi -= e->na;
  memmove(t->p, t->p + lo, hi - lo);
  t->n = hi - lo;
}

/* Metaspace: the replacement becomes a space; in the first token it goes
 * altogether unless the scheme is never (the library drops every
 * replacement character of token 0, not only a leading one). */
static int metaspace_dec(const edit *e, size_t i, const bytes *in, bytes *x) {
  const int drop = i == 0 && e->scheme != PS_NEVER; /* i: SIZE_MAX for a list that continues another */
  return ot_tok_add_replaced(x, in->p, in->n, e->a, e->na, " ", drop ? 0 : 1);
}

/* One decoder over the list. cont: the list continues an earlier one (a
 * stream's later tokens): its first token is not the text's first
 * (Metaspace), and a Strip after the tokens were fused strips no start. */
static ot_status apply_decoder(const edit *e, toks *t, pcre2_match_data *md, int cont, int fused) {
  switch (e->kind) {
  case ED_BYTELEVEL: return byte_level(t);
  case ED_BYTEFALLBACK: return byte_fallback(t);
  case ED_FUSE:
    for (size_t i = 1; i < t->n; i++) {
      if (!bytes_add(&t->v[0], t->v[i].p, t->v[i].n)) return OOM();
      free(t->v[i].p);
    }
    if (t->n > 1) t->n = 1;
    return OT_OK;
  case ED_STRIP:
    for (size_t i = 0; i < t->n; i++) strip(&t->v[i], e, cont && fused);
    return OT_OK;
  case ED_REPLACE:
  case ED_METASPACE:
    for (size_t i = 0; i < t->n; i++) {
      bytes x = {0};
      int ok = e->kind == ED_METASPACE ? metaspace_dec(e, cont ? SIZE_MAX : i, &t->v[i], &x)
               : e->re                 ? ot_tok_add_replaced_re(&x, t->v[i].p, t->v[i].n, e->re, md, e->b, e->nb)
                                       : ot_tok_add_replaced(&x, t->v[i].p, t->v[i].n, e->a, e->na, e->b, e->nb);
      if (ok < 0) return free(x.p), ot_tok_regex_failed(ok);
      if (!ok || !bytes_add(&x, "", 0)) return free(x.p), OOM();
      free(t->v[i].p);
      t->v[i] = x;
    }
    return OT_OK;
  default: return OT_OK;
  }
}

/* transformers' clean_up_tokenization (tokenization_utils_base.py), the
 * same replacements in the same order. */
const char *const ot_tok_cleanup_from[OT_TOK_N_CLEANUP] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"};
const char *const ot_tok_cleanup_to[OT_TOK_N_CLEANUP] = {".", "?", "!", ",", "'", "n't", "'m", "'s", "'ve", "'re"};

static ot_status clean_up(bytes *o) {
  for (int k = 0; k < OT_TOK_N_CLEANUP; k++) {
    const char *from = ot_tok_cleanup_from[k], *to = ot_tok_cleanup_to[k];
    bytes x = {0};
    if (!bytes_add(&x, "", 0) || !ot_tok_add_replaced(&x, o->p, o->n, from, strlen(from), to, strlen(to)))
      return free(x.p), OOM();
    free(o->p);
    *o = x;
  }
  return OT_OK;
}

ot_status ot_tok_decode_list(const ot_tokenizer *tk, const int32_t *id, size_t n, int k0, int k1, int cont,
                             bytes *out) {
  toks t = {calloc(n ? n : 1, sizeof *t.v), 0};
  if (!t.v) return OOM();
  for (size_t i = 0; i < n; i++) {
    const tok_entry *e = ot_tok_entry(tk, id[i]);
    bytes x = {0};
    ot_tok_work++;
    if (!e) return toks_free(&t), ot_fail(OT_ERR_INVALID_ARG, "id %d is not in the vocabulary of %s", id[i], tk->file);
    if (!bytes_add(&x, e->text, e->len)) return toks_free(&t), OOM();
    t.v[t.n++] = x;
  }
  pcre2_match_data *md = pcre2_match_data_create(4, NULL);
  ot_status st = md ? OT_OK : OOM();
  int fused = 0;
  for (int k = k0; st == OT_OK && k < k1; k++) {
    st = apply_decoder(&tk->dec[k], &t, md, cont, fused);
    fused |= tk->dec[k].kind == ED_FUSE || tk->dec[k].kind == ED_BYTELEVEL;
  }
  pcre2_match_data_free(md);
  /* no decoder: the library joins the tokens with spaces (one before a continuing list) */
  for (size_t i = 0; st == OT_OK && i < t.n; i++)
    if (((i || cont) && !tk->n_dec && !bytes_add(out, " ", 1)) || !bytes_add(out, t.v[i].p, t.v[i].n)) st = OOM();
  toks_free(&t);
  return st;
}

ot_status ot_tokenizer_decode(const ot_tokenizer *tk, const int32_t *id, size_t n, int skip_special, char **text,
                              size_t *len) {
  if (!tk || (!id && n) || !text) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_decode: NULL argument");
  *text = NULL;
  int32_t *keep = malloc((n ? n : 1) * sizeof *keep);
  if (!keep) return OOM();
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    const tok_entry *e = ot_tok_entry(tk, id[i]);
    if (!e) {
      free(keep);
      return ot_fail(OT_ERR_INVALID_ARG, "id %d (position %zu) is not in the vocabulary of %s (%d ids)", id[i], i,
                     tk->file, tk->n_ids);
    }
    if (!(skip_special && e->special)) keep[m++] = id[i];
  }
  bytes o = {0};
  ot_status st = bytes_add(&o, "", 0) ? ot_tok_decode_list(tk, keep, m, 0, tk->n_dec, 0, &o) : OOM();
  free(keep);
  if (st == OT_OK && tk->clean_up) st = clean_up(&o);
  if (st == OT_OK && !bytes_add(&o, "", 1)) st = OOM();
  if (st != OT_OK) return free(o.p), st;
  *text = o.p;
  if (len) *len = o.n - 1;
  return OT_OK;
}
