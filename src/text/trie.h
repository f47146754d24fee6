/* trie.h (internal) — a byte trie for the tokenizer: the added tokens'
 * automaton (tokenizer_added.c) and the prefixes and suffixes of a GGUF
 * vocabulary's tokens that are tokens (tokenizer_gguf_merges.c). Its
 * transitions are one hash table keyed by (state, byte), so a step costs
 * the same whatever a state's number of children, and walking a text costs
 * one step a byte. */
#ifndef OT_TEXT_TRIE_H
#define OT_TEXT_TRIE_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/status.h"

typedef struct ot_trie {
  int32_t n, cap;      /* states (0 is the root) and room for them */
  int32_t *parent;     /* [cap] each state's parent (the root's: 0) */
  unsigned char *byte; /* [cap] the byte from its parent */
  uint64_t *tkey;      /* transitions: (state << 8 | byte) + 1 (0: empty) */
  int32_t *tval;
  size_t tcap;         /* a power of two, at least twice cap */
} ot_trie;

/* Room for `states` states (the keys' total bytes + 1 is always enough). */
ot_status ot_trie_init(ot_trie *t, size_t states);
void ot_trie_free(ot_trie *t);
/* Adds key[0..len) (reverse: its bytes from the last to the first); its
 * final state. */
int32_t ot_trie_insert(ot_trie *t, const char *key, size_t len, int reverse);
/* The child of state s by byte b (-1: none). One step of ot_tok_work. */
int32_t ot_trie_child(const ot_trie *t, int32_t s, unsigned char b);

#endif
