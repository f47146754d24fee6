/* tokenizer_encode.c — text to ids (tokenizer.h): added tokens, normalizers,
 * pre-tokenizers, BPE. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem (glibc's is linear: two-way); CMakeLists.txt also passes it (amdgcn) */
#endif
#include <stdio.h>
#include <utf8proc.h>

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
    /* the text is valid UTF-8 (checked once in ot_tokenizer_encode): PCRE2
     * would check it again from pos to the end on every call, quadratic
     * in a long stretch */
    int rc = pcre2_match(q->re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
    size_t ms, me;
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) return ot_tok_regex_failed(rc);
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

/* Appends s[0..n) to b with every `from` (nf bytes, leftmost first, not
 * overlapping) replaced by to[0..nt); memmem keeps it linear in n + nf. */
int ot_tok_add_replaced(bytes *b, const char *s, size_t n, const char *from, size_t nf, const char *to, size_t nt) {
  size_t i = 0;
  for (const char *p; nf && i < n && (p = memmem(s + i, n - i, from, nf));) {
    if (!bytes_add(b, s + i, (size_t)(p - s) - i) || !bytes_add(b, to, nt)) return 0;
    i = (size_t)(p - s) + nf;
  }
  return bytes_add(b, s + i, n - i);
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

/* A piece's symbols during BPE: each one's length in the piece and id. */
typedef struct syms {
  uint32_t *len;
  int32_t *id;
  size_t n, cap;
} syms;

static int syms_add(syms *y, size_t len, int32_t id) {
  size_t c1 = y->cap, c2 = y->cap;
  if (!grow_to((void **)&y->len, &c1, y->n + 1, sizeof *y->len) || !grow_to((void **)&y->id, &c2, y->n + 1, sizeof *y->id))
    return 0;
  y->cap = c1 < c2 ? c1 : c2;
  y->len[y->n] = (uint32_t)len, y->id[y->n++] = id;
  return 1;
}

/* The symbols of w as the library's merge_word makes them: each character
 * that is a token; else (byte_fallback) its bytes as <0xHH> tokens, if the
 * vocabulary has them all; else the unknown token (a run of them one under
 * fuse_unk; the library adds a waiting one before the next token, after
 * byte tokens that came between); else nothing. */
static ot_status initial_symbols(const ot_tokenizer *tk, const bytes *w, syms *y) {
  size_t unk_len = 0; /* a waiting unknown token's bytes (0: none) */
  y->n = 0;
  for (size_t i = 0; i < w->n;) {
    size_t k = ot_utf8_len((const unsigned char *)w->p + i, w->n - i);
    if (!k) k = 1;
    int32_t id;
    if (ot_strmap_get(&tk->vocab, w->p + i, k, &id)) {
      if ((unk_len && !syms_add(y, unk_len, tk->unk)) || !syms_add(y, k, id)) return OOM();
      unk_len = 0;
    } else {
      size_t q = 0;
      int32_t bid[4];
      for (; tk->byte_fallback && q < k; q++) {
        char t[8];
        snprintf(t, sizeof t, "<0x%02X>", (unsigned char)w->p[i + q]);
        if (!ot_strmap_get(&tk->vocab, t, 6, &bid[q])) break;
      }
      if (tk->byte_fallback && q == k) {
        for (q = 0; q < k; q++)
          if (!syms_add(y, 1, bid[q])) return OOM();
      } else if (tk->unk >= 0) {
        if (unk_len && !tk->fuse_unk) {
          if (!syms_add(y, unk_len, tk->unk)) return OOM();
          unk_len = 0;
        }
        unk_len += k;
      }
    }
    i += k;
  }
  return unk_len && !syms_add(y, unk_len, tk->unk) ? OOM() : OT_OK;
}

/* A queued pair: symbols i and j (= next of i when queued, with those
 * lengths), merge rank r, the id they make. */
typedef struct qpair {
  int32_t r, id;
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

/* Queues the pair (i, j) if it is a merge (0: out of memory). */
static int queue_pair(const ot_tokenizer *tk, const syms *y, uint32_t i, uint32_t j, qpair **h, size_t *hn,
                      size_t *hcap) {
  int32_t r, id;
  ot_tok_work++;
  if (!ot_pairmap_get(&tk->merges, y->id[i], y->id[j], &r, &id)) return 1;
  return qpush(h, hn, hcap, (qpair){r, id, i, j, y->len[i], y->len[j]});
}

/* BPE of a long piece (sentencepiece-style files have no pre-tokenizer: a
 * piece can be a whole text): the same merges as the plain loop below, the
 * lowest rank first and the leftmost of equal ranks (the library's
 * merge_all), from a heap of candidate pairs over a linked list of
 * symbols, in O(n log n). */
static ot_status bpe_long(const ot_tokenizer *tk, syms *y) {
  const size_t n = y->n;
  if (n > UINT32_MAX - 1) return ot_fail(OT_ERR_INVALID_ARG, "tokenize: a piece of %zu characters", n);
  uint32_t *next = malloc(n * sizeof *next), *prev = malloc(n * sizeof *prev);
  unsigned char *dead = calloc(n, 1);
  qpair *h = NULL;
  size_t hn = 0, hcap = 0;
  ot_status st = next && dead && prev ? OT_OK : OOM();
  for (size_t i = 0; st == OT_OK && i < n; i++) {
    next[i] = (uint32_t)(i + 1 < n ? i + 1 : UINT32_MAX);
    prev[i] = (uint32_t)(i ? i - 1 : UINT32_MAX);
    if (i + 1 < n && !queue_pair(tk, y, (uint32_t)i, (uint32_t)(i + 1), &h, &hn, &hcap)) st = OOM();
  }
  while (st == OT_OK && hn) {
    qpair q = qpop(h, &hn);
    if (dead[q.i] || dead[q.j] || next[q.i] != q.j || y->len[q.i] != q.li || y->len[q.j] != q.lj) continue;
    y->len[q.i] += y->len[q.j]; /* merge j into i */
    y->id[q.i] = q.id;
    dead[q.j] = 1;
    next[q.i] = next[q.j];
    if (next[q.i] != UINT32_MAX) prev[next[q.i]] = q.i;
    if (prev[q.i] != UINT32_MAX && !queue_pair(tk, y, prev[q.i], q.i, &h, &hn, &hcap)) st = OOM();
    if (st == OT_OK && next[q.i] != UINT32_MAX && !queue_pair(tk, y, q.i, next[q.i], &h, &hn, &hcap)) st = OOM();
  }
  if (st == OT_OK) { /* the live symbols, in order */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
      if (!dead[i]) y->len[m] = y->len[i], y->id[m++] = y->id[i];
    y->n = m;
  }
  free(next), free(prev), free(dead), free(h);
  return st;
}

/* BPE of one piece (bytes s[0..n)) into d. */
static ot_status bpe(const ot_tokenizer *tk, const char *s, size_t n, bytes *w, syms *y, ids *d) {
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
  OT_TRY(initial_symbols(tk, w, y));
  if (y->n > 32) {
    OT_TRY(bpe_long(tk, y));
  } else {
    for (;;) { /* a short piece: the best pair by a scan (at most 32 symbols) */
      int32_t best = INT32_MAX, best_id = -1, r, nid;
      size_t at = 0;
      for (size_t j = 0; j + 1 < y->n; j++)
        if (ot_pairmap_get(&tk->merges, y->id[j], y->id[j + 1], &r, &nid) && r < best) best = r, best_id = nid, at = j;
      if (best == INT32_MAX) break;
      y->len[at] += y->len[at + 1];
      y->id[at] = best_id;
      memmove(y->len + at + 1, y->len + at + 2, (y->n - at - 2) * sizeof *y->len);
      memmove(y->id + at + 1, y->id + at + 2, (y->n - at - 2) * sizeof *y->id);
      y->n--;
    }
  }
  for (size_t j = 0; j < y->n; j++)
    if (!ids_add(d, y->id[j])) return OOM();
  return OT_OK;
}


ot_status ot_tok_regex_failed(int rc) {
  PCRE2_UCHAR msg[160];
  pcre2_get_error_message(rc, msg, sizeof msg);
  return ot_fail(OT_ERR_UNSUPPORTED, "tokenizer: a regular expression of the tokenizer gave up on this text (%s): "
                 "it backtracks past PCRE2's limit", (const char *)msg);
}

int ot_tok_add_replaced_re(bytes *b, const char *s, size_t n, const pcre2_code *re, pcre2_match_data *md,
                           const char *to, size_t nt) {
  /* Oniguruma's find_iter as the onig crate runs it: the leftmost match
   * from the last end; an empty match right where the previous match ended
   * is skipped by moving one character on. The library leaves an empty
   * text alone. */
  size_t pos = 0, done = 0, last_end = SIZE_MAX;
  while (n && pos <= n) {
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) return rc;
    if (rc < 0) break;
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    const size_t ms = ov[0], me = ov[1];
    if (ms == me && me == last_end) {
      if (pos >= n) break;
      size_t k = ot_utf8_len((const unsigned char *)s + pos, n - pos);
      pos += k ? k : 1;
      continue;
    }
    if (!bytes_add(b, s + done, ms - done) || !bytes_add(b, to, nt)) return 0;
    done = me, pos = me, last_end = me;
  }
  return bytes_add(b, s + done, n - done);
}

/* Unicode normalization form k of s[0..n) (valid UTF-8) appended to out,
 * by utf8proc (the tokenizers library uses Rust's
 * unicode-normalization-alignments: the same forms). */
static int add_unicode_nf(bytes *out, const char *s, size_t n, ed_kind k) {
  if (!n) return 1;
  const int opt = UTF8PROC_STABLE | (k == ED_NFC || k == ED_NFKC ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) |
                  (k == ED_NFKC || k == ED_NFKD ? UTF8PROC_COMPAT : 0);
  utf8proc_uint8_t *r = NULL;
  utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &r, (utf8proc_option_t)opt);
  if (m < 0) return free(r), 0; /* only out of memory: the text was checked */
  int ok = bytes_add(out, (const char *)r, (size_t)m);
  free(r);
  return ok;
}

/* Whether the code point at s is White_Space (Rust's char::is_whitespace,
 * which the library's Strip normalizer and lstrip/rstrip use); its length. */
static size_t ws_at(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t k = ot_utf8_len(u, n);
  if (!k) return 0;
  unsigned c = k == 1   ? u[0]
               : k == 2 ? ((u[0] & 0x1Fu) << 6) | (u[1] & 0x3Fu)
               : k == 3 ? ((u[0] & 0x0Fu) << 12) | ((u[1] & 0x3Fu) << 6) | (u[2] & 0x3Fu)
                        : 0;
  int ws = (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
  return ws ? k : 0;
}

/* Bytes of whitespace at the start of s[0..n); at its end (trail). */
static size_t ws_lead(const char *s, size_t n) {
  size_t i = 0, k;
  while (i < n && (k = ws_at(s + i, n - i))) i += k;
  return i;
}
static size_t ws_trail(const char *s, size_t n) {
  size_t e = n;
  while (e) {
    size_t b = e - 1;
    while (b && ((unsigned char)s[b] & 0xC0) == 0x80) b--;
    if (ws_at(s + b, e - b) != e - b) break;
    e = b;
  }
  return n - e;
}

/* The normalizers over one stretch of text, into *out (Prepend only where
 * there is text, as the tokenizers library does per stretch). */
ot_status ot_tok_normalize(const ot_tokenizer *tk, const char *s, size_t n, pcre2_match_data *md, bytes *out) {
  bytes t = {0};
  out->n = 0;
  if (!bytes_add(out, s, n)) return OOM();
  for (int k = 0; k < tk->n_norm; k++) {
    const edit *e = &tk->norm[k];
    t.n = 0;
    int ok = 1;
    switch (e->kind) {
    case ED_PREPEND:
      if (!out->n) continue;
      ok = bytes_add(&t, e->a, e->na) && bytes_add(&t, out->p, out->n);
      break;
    case ED_REPLACE:
      ok = e->re ? ot_tok_add_replaced_re(&t, out->p, out->n, e->re, md, e->b, e->nb)
                 : ot_tok_add_replaced(&t, out->p, out->n, e->a, e->na, e->b, e->nb);
      if (ok < 0) return free(t.p), ot_tok_regex_failed(ok);
      break;
    case ED_WSTRIP: {
      size_t lo = e->n_start ? ws_lead(out->p, out->n) : 0;
      size_t hi = out->n - (e->n_stop && lo < out->n ? ws_trail(out->p + lo, out->n - lo) : 0);
      ok = bytes_add(&t, out->p + lo, hi - lo);
      break;
    }
    default: ok = add_unicode_nf(&t, out->p, out->n, e->kind); break;
    }
    if (!ok) return free(t.p), OOM();
    bytes x = *out;
    *out = t;
    t = x;
  }
  free(t.p);
  return OT_OK;
}

/* A stretch with no added token: pre-tokenize, then BPE each piece.
 * `s` is normalized already. */
static ot_status encode_plain(const ot_tokenizer *tk, const char *s, size_t n, int at_start, pcre2_match_data *md,
                              ids *d) {
  if (!n) return OT_OK;
  bytes b[2] = {{0}}, w = {0};
  spans sp[2] = {{0}};
  syms sym = {0};
  ot_status st = bytes_add(&b[0], s, n) && spans_add(&sp[0], 0, n) ? OT_OK : OOM();
  int cur = 0;
  for (int k = 0; st == OT_OK && k < tk->n_pt; k++) {
    b[!cur].n = 0, sp[!cur].n = 0;
    st = pretok_step(&tk->pt[k], &b[cur], &sp[cur], &b[!cur], &sp[!cur], md, at_start);
    cur = !cur;
  }
  for (size_t i = 0; st == OT_OK && i < sp[cur].n; i++)
    st = bpe(tk, b[cur].p + sp[cur].v[i].off, sp[cur].v[i].len, &w, &sym, d);
  free(b[0].p), free(b[1].p), free(w.p), free(sp[0].v), free(sp[1].v), free(sym.len), free(sym.id);
  return st;
}

/* Whether the character before s + at (at > 0) / at s (n > 0) is a word
 * character (Rust's \w, for single_word). */
static int word_before(const ot_tokenizer *tk, const char *s, size_t at, pcre2_match_data *md) {
  size_t b = at - 1;
  while (b && ((unsigned char)s[b] & 0xC0) == 0x80) b--;
  return pcre2_match(tk->word_re, (PCRE2_SPTR)s + b, at - b, 0, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, md, NULL) >= 0;
}
static int word_after(const ot_tokenizer *tk, const char *s, size_t n, pcre2_match_data *md) {
  size_t k = ot_utf8_len((const unsigned char *)s, n);
  return pcre2_match(tk->word_re, (PCRE2_SPTR)s, k ? k : 1, 0, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, md, NULL) >= 0;
}

/* A piece of the text: an added token's id, or text (id < 0). */
typedef struct seg {
  size_t off, len;
  int32_t id;
} seg;
typedef struct segs {
  seg *v;
  size_t n, cap;
} segs;

static int segs_add(segs *g, size_t off, size_t len, int32_t id) {
  if (!grow_to((void **)&g->v, &g->cap, g->n + 1, sizeof *g->v)) return 0;
  g->v[g->n++] = (seg){off, len, id};
  return 1;
}

/* The added tokens of one set in s[0..n), as the library's find_matches:
 * leftmost-longest matches, scanned on from each match's end; a
 * single_word token next to a word character, or a special token under
 * split_special_tokens, is passed over (its text stays text); lstrip /
 * rstrip take the whitespace before / after into the token (never before
 * the end of the previous one). */
static int find_added(const ot_tokenizer *tk, const added_set *set, const char *s, size_t n, pcre2_match_data *md,
                      segs *g) {
  size_t done = 0; /* start_offset */
  int32_t *longest = set->n && n ? malloc(n * sizeof *longest) : NULL;
  if (set->n && n && (!longest || ot_tok_added_longest(set, s, n, longest) != OT_OK)) return free(longest), 0;
  for (size_t i = 0; longest && i < n;) {
    if (longest[i] < 0) {
      i++;
      continue;
    }
    const added_match *m = &set->v[longest[i]];
    const added_tok *a = &tk->add[m->tok];
    size_t start = i, stop = i + m->len;
    i = stop;
    if (tk->split_special && a->special) continue;
    if (a->single_word &&
        ((start && word_before(tk, s, start, md)) || (stop < n && word_after(tk, s + stop, n - stop, md))))
      continue;
    if (a->lstrip) start -= ws_trail(s + done, start - done);
    if (a->rstrip) stop += ws_lead(s + stop, n - stop);
    if ((done < start && !segs_add(g, done, start - done, -1)) || !segs_add(g, start, stop - start, a->id))
      return free(longest), 0;
    done = stop;
  }
  free(longest);
  return done < n ? segs_add(g, done, n - done, -1) : 1;
}

/* Text in, ids out, as the library's extract_and_normalize: the
 * normalized=false added tokens cut the raw text; each stretch between
 * is normalized and cut by the normalized ones; what is left is
 * pre-tokenized and BPE'd. */
static ot_status encode_text(const ot_tokenizer *tk, const char *text, size_t len, pcre2_match_data *md, ids *d) {
  segs g1 = {0}, g2 = {0};
  bytes nb = {0};
  ot_status st = find_added(tk, &tk->sets[0], text, len, md, &g1) ? OT_OK : OOM();
  for (size_t i = 0; st == OT_OK && i < g1.n; i++) {
    const seg a = g1.v[i];
    if (a.id >= 0) {
      st = ids_add(d, a.id) ? OT_OK : OOM();
      continue;
    }
    st = ot_tok_normalize(tk, text + a.off, a.len, md, &nb);
    g2.n = 0;
    if (st == OT_OK && !find_added(tk, &tk->sets[1], nb.p, nb.n, md, &g2)) st = OOM();
    for (size_t j = 0; st == OT_OK && j < g2.n; j++) {
      const seg b = g2.v[j];
      st = b.id >= 0 ? (ids_add(d, b.id) ? OT_OK : OOM())
                     : encode_plain(tk, nb.p + b.off, b.len, a.off == 0 && b.off == 0, md, d);
    }
  }
  free(g1.v), free(g2.v), free(nb.p);
  return st;
}

ot_status ot_tokenizer_encode(const ot_tokenizer *tk, const char *text, size_t len, int add_special, int32_t **out,
                              size_t *n_out) {
  if (!tk || (!text && len) || !out || !n_out) return ot_fail(OT_ERR_INVALID_ARG, "ot_tokenizer_encode: NULL argument");
  *out = NULL;
  *n_out = 0;
  for (size_t i = 0; i < len;) {
    size_t k = ot_utf8_len((const unsigned char *)text + i, len - i);
    if (!k) return ot_fail(OT_ERR_INVALID_ARG, "the text is not valid UTF-8 at byte %zu", i);
    i += k;
  }
  ids d = {0};
  pcre2_match_data *md = pcre2_match_data_create(4, NULL);
  ot_status st = md ? OT_OK : OOM();
  for (int k = 0; st == OT_OK && add_special && k < tk->n_pre; k++) st = ids_add(&d, tk->pre[k]) ? OT_OK : OOM();
  if (st == OT_OK && len) st = encode_text(tk, text, len, md, &d);
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
