/* trie.c — see trie.h. */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_internal.h"
#include "text/trie.h"

static size_t slot(const ot_trie *t, uint64_t key) {
  const size_t mask = t->tcap - 1;
  for (size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & mask;; i = (i + 1) & mask)
    if (!t->tkey[i] || t->tkey[i] == key) return i;
}

ot_status ot_trie_init(ot_trie *t, size_t states) {
  memset(t, 0, sizeof *t);
  if (!states || states > INT32_MAX) return ot_fail(OT_ERR_UNSUPPORTED, "tokenizer: a trie of %zu states", states);
  t->tcap = 16;
  while (t->tcap < 2 * states) t->tcap *= 2;
  t->parent = malloc(states * sizeof *t->parent);
  t->byte = malloc(states);
  t->tkey = calloc(t->tcap, sizeof *t->tkey);
  t->tval = malloc(t->tcap * sizeof *t->tval);
  if (!t->parent || !t->byte || !t->tkey || !t->tval) return ot_trie_free(t), OOM();
  t->cap = (int32_t)states;
  t->n = 1;
  t->parent[0] = 0, t->byte[0] = 0;
  return OT_OK;
}

void ot_trie_free(ot_trie *t) {
  free(t->parent), free(t->byte), free(t->tkey), free(t->tval);
  memset(t, 0, sizeof *t);
}

int32_t ot_trie_insert(ot_trie *t, const char *key, size_t len, int reverse) {
  int32_t s = 0;
  for (size_t j = 0; j < len; j++) {
    const unsigned char b = (unsigned char)key[reverse ? len - 1 - j : j];
    const uint64_t k = ((uint64_t)s << 8 | b) + 1;
    const size_t i = slot(t, k);
    if (!t->tkey[i]) { /* the caller sized the trie: n < cap */
      t->tkey[i] = k, t->tval[i] = t->n;
      t->parent[t->n] = s, t->byte[t->n] = b;
      t->n++;
    }
    s = t->tval[i];
  }
  return s;
}

int32_t ot_trie_child(const ot_trie *t, int32_t s, unsigned char b) {
  ot_tok_work++;
  const size_t i = slot(t, ((uint64_t)s << 8 | b) + 1);
  return t->tkey[i] ? t->tval[i] : -1;
}
