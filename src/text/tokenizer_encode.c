/* tokenizer_encode.c — text to ids (tokenizer.h): added tokens, normalizers,
 * pre-tokenizers, BPE. */
#include <stdio.h>

#include "text/tokenizer_internal.h"


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
int ot_tok_add_replaced(bytes *b, const char *s, size_t n, const char *from, size_t nf, const char *to, size_t nt) {
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
  if (!ot_tok_add_replaced(nb, s, n, " ", 1, q->repl, q->n_repl)) return OOM();
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
      if (!bytes_add(w, u, put_utf8(u, ot_tok_b2u[(unsigned char)s[i]]))) return OOM();
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
    else ok = ot_tok_add_replaced(&t, out->p, out->n, e->a, e->na, e->b, e->nb);
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

