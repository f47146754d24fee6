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

ot_status ot_tok_gguf_merges(const ot_tok_gguf *t, int32_t **pairs, size_t *n_pairs) {
  *pairs = NULL;
  *n_pairs = 0;
  cand *v = NULL;
  size_t n = 0, cap = 0;
  ot_strmap seen = {0};
  ot_status st = OT_OK;
  for (int32_t j = 0; st == OT_OK && j < t->n; j++) {
    const char *s = t->tok[j];
    const size_t len = t->len[j];
    int32_t id, dummy;
    if (ot_strmap_get(&seen, s, len, &dummy)) continue; /* a repeat: the dict has it where it first came */
    if ((st = ot_strmap_put(&seen, s, len, j)) != OT_OK) break;
    if (!ot_strmap_get(&t->vocab, s, len, &id)) continue; /* cannot happen: every token is in the vocabulary */
    /* the token's characters: its cuts, and the halves' lengths */
    int32_t chars = 0;
    for (size_t b = 0; b < len; b += utf8_len((const unsigned char *)s + b, len - b)) chars++;
    int32_t k = 0;
    for (size_t b = 0; b < len;) {
      b += utf8_len((const unsigned char *)s + b, len - b); /* tokens were checked to be UTF-8 */
      k++;
      if (b >= len) break;
      int32_t l, r;
      if (ot_strmap_get(&t->vocab, s, b, &l) && ot_strmap_get(&t->vocab, s + b, len - b, &r) &&
          !add_cand(&v, &n, &cap, (cand){t->score[id], j, l, r, k, chars - k}))
        st = OOM();
    }
  }
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
