/* tokenizer_gguf_merges.c — BPE merges for a sentencepiece vocabulary
 * (tokenizer.ggml.model "llama"), which a GGUF file stores as tokens and
 * scores only.
 *
 * Sentencepiece's BPE encoder repeatedly joins the adjacent pair whose
 * joined text is the vocabulary piece with the highest score. A BPE model
 * with merges ranks pairs instead, so the merges are the vocabulary's
 * tokens cut in two, both halves tokens, ranked by the whole token's
 * score: the same choice at every step except between pairs that make
 * the same token, where sentencepiece takes the leftmost and BPE the
 * better-ranked cut. The order is exactly transformers'
 * (tokenization_utils_base.generate_merges, which its GGUF reader calls
 * with the scores), so a file gives the merges transformers would build:
 *
 *   for each token in the file's order (a repeated token once, where it
 *   first appears, with the score and id of its last appearance, as a
 *   Python dict built from the list keeps them), each cut at a character
 *   (code point) boundary whose two halves are tokens; the cuts of one
 *   token by (id of left, id of right); then all of them, stably, by
 *   (score, characters in left, characters in right), highest first. */
#include <stdlib.h>

#include "text/tokenizer_gguf.h"
#include "text/trie.h"

typedef struct cand {
  double score;
  int32_t ord, l, r; /* the token's first position; the halves' ids */
  int32_t nl, nr;    /* the halves' lengths in characters */
} cand;

/* Highest score first, then longer halves; ties as the stable sort leaves
 * them: the token's position, then the cut's (left id, right id). */
static int cmp_cand(const void *x, const void *y) {
  const cand *a = x, *b = y;
  if (a->score != b->score) return a->score > b->score ? -1 : 1;
  if (a->nl != b->nl) return a->nl > b->nl ? -1 : 1;
  if (a->nr != b->nr) return a->nr > b->nr ? -1 : 1;
  if (a->ord != b->ord) return a->ord < b->ord ? -1 : 1;
  if (a->l != b->l) return a->l < b->l ? -1 : 1;
  return (a->r > b->r) - (a->r < b->r);
}

static int add_cand(cand **v, size_t *n, size_t *cap, cand c) {
  if (!grow_to((void **)v, cap, *n + 1, sizeof **v)) return 0;
  (*v)[(*n)++] = c;
  return 1;
}

/* Which prefixes and suffixes of the tokens are tokens: a trie of the
 * vocabulary forwards and one backwards, each state the id of the token
 * that ends there (the vocabulary's id of that text), so a token's cuts
 * cost one walk each way over its bytes, never a lookup per cut (which
 * hashed both halves: the square of a token's length). */
typedef struct halves {
  ot_trie fw, bw;
  int32_t *fid, *bid; /* [states] */
} halves;

static void halves_free(halves *h) {
  ot_trie_free(&h->fw), ot_trie_free(&h->bw);
  free(h->fid), free(h->bid);
}

static ot_status halves_build(const ot_tok_gguf *t, halves *h) {
  size_t total = 1;
  for (int32_t j = 0; j < t->n; j++) total += t->len[j];
  OT_TRY(ot_trie_init(&h->fw, total));
  OT_TRY(ot_trie_init(&h->bw, total));
  h->fid = malloc(total * sizeof *h->fid), h->bid = malloc(total * sizeof *h->bid);
  if (!h->fid || !h->bid) return OOM();
  for (size_t s = 0; s < total; s++) h->fid[s] = h->bid[s] = -1;
  for (int32_t j = 0; j < t->n; j++) {
    int32_t id;
    ot_strmap_get(&t->vocab, t->tok[j], t->len[j], &id); /* every token is in it */
    h->fid[ot_trie_insert(&h->fw, t->tok[j], t->len[j], 0)] = id;
    h->bid[ot_trie_insert(&h->bw, t->tok[j], t->len[j], 1)] = id;
  }
  return OT_OK;
}

/* For token s[0..len): left[b] the id of s[0..b) and right[b] that of
 * s[b..len) (-1: not a token), for 0 < b < len. */
static void cuts(const halves *h, const char *s, size_t len, int32_t *left, int32_t *right) {
  int32_t st = 0;
  for (size_t b = 1; b < len; b++) {
    st = st >= 0 ? ot_trie_child(&h->fw, st, (unsigned char)s[b - 1]) : -1;
    left[b] = st >= 0 ? h->fid[st] : -1;
  }
  st = 0;
  for (size_t b = len - 1; b > 0; b--) {
    st = st >= 0 ? ot_trie_child(&h->bw, st, (unsigned char)s[b]) : -1;
    right[b] = st >= 0 ? h->bid[st] : -1;
  }
}

ot_status ot_tok_gguf_merges(const ot_tok_gguf *t, int32_t **pairs, size_t *n_pairs) {
  *pairs = NULL;
  *n_pairs = 0;
  cand *v = NULL;
  size_t n = 0, cap = 0, longest = 1;
  for (int32_t j = 0; j < t->n; j++)
    if (t->len[j] + 1 > longest) longest = t->len[j] + 1;
  ot_strmap seen = {0};
  halves h = {0};
  int32_t *left = malloc(longest * sizeof *left), *right = malloc(longest * sizeof *right);
  ot_status st = left && right ? halves_build(t, &h) : OOM();
  for (int32_t j = 0; st == OT_OK && j < t->n; j++) {
    const char *s = t->tok[j];
    const size_t len = t->len[j];
    int32_t id, dummy;
    if (ot_strmap_get(&seen, s, len, &dummy)) continue; /* a repeat: the dict has it where it first came */
    if ((st = ot_strmap_put(&seen, s, len, j)) != OT_OK) break;
    if (!ot_strmap_get(&t->vocab, s, len, &id) || len < 2) continue;
    int32_t chars = 0;
    for (size_t b = 0; b < len; b++) chars += ((unsigned char)s[b] & 0xC0) != 0x80;
    cuts(&h, s, len, left, right);
    /* a cut whose halves are both tokens is at a character boundary: tokens are UTF-8 */
    int32_t k = 0;
    for (size_t b = 1; st == OT_OK && b < len; b++) {
      k += ((unsigned char)s[b - 1] & 0xC0) != 0x80; /* the characters of s[0..b) */
      if (left[b] >= 0 && right[b] >= 0 &&
          !add_cand(&v, &n, &cap, (cand){t->score[id], j, left[b], right[b], k, chars - k}))
        st = OOM();
    }
  }
  free(left), free(right);
  halves_free(&h);
  ot_strmap_free(&seen);
  if (st != OT_OK) {
    free(v);
    return st;
  }
  /* the per-token (left id, right id) order is part of cmp_cand's ties:
   * one sort gives what transformers' two give */
  if (n) qsort(v, n, sizeof *v, cmp_cand); /* v is NULL with no merges (a vocab of whole words) */
  int32_t *p = malloc((n ? n : 1) * 2 * sizeof *p);
  if (!p) {
    free(v);
    return OOM();
  }
  for (size_t i = 0; i < n; i++) p[2 * i] = v[i].l, p[2 * i + 1] = v[i].r;
  free(v);
  *pairs = p;
  *n_pairs = n;
  return OT_OK;
}
