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
static void unbyte(bytes *t) {
  size_t w = 0;
  for (size_t j = 0; j < t->n;) {
    const unsigned char *c = (const unsigned char *)t->p + j;
    size_t k = utf8_len(c, t->n - j);
    unsigned cp = k == 1 ? c[0] : k == 2 ? ((c[0] & 0x1Fu) << 6) | (c[1] & 0x3Fu) : 0xFFFFu;
    if (!k || cp >= 512 || ot_tok_u2b[cp] < 0) return; /* keep the whole token */
    j += k;
  }
  w = 0;
  for (size_t j = 0; j < t->n;) {
    const unsigned char *c = (const unsigned char *)t->p + j;
    size_t k = utf8_len(c, t->n - j);
    unsigned cp = k == 1 ? c[0] : ((c[0] & 0x1Fu) << 6) | (c[1] & 0x3Fu);
    t->p[w++] = (char)ot_tok_u2b[cp];
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
      int ok = e->kind == ED_REPLACE ? ot_tok_add_replaced(&x, t->v[i].p, t->v[i].n, e->a, e->na, e->b, e->nb)
                                     : ot_tok_add_replaced(&x, t->v[i].p, t->v[i].n, e->a, e->na, " ", 1);
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
