/* strmap.h (internal) — the tokenizer's hash maps (hundreds of thousands
 * of entries, looked up per symbol while encoding): byte strings to int32
 * (the vocabulary; FNV-1a, keys copied), token ids to int32 (the id table)
 * and pairs of ids to (rank, id) (the merges). Open addressing. */
#ifndef OT_TEXT_STRMAP_H
#define OT_TEXT_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/status.h"

typedef struct ot_strmap_slot {
  char *key; /* NULL: empty */
  uint32_t len, hash;
  int32_t value;
} ot_strmap_slot;

typedef struct ot_strmap {
  ot_strmap_slot *slot;
  size_t cap, n; /* cap a power of two */
} ot_strmap;

void ot_strmap_free(ot_strmap *m);
/* Adds or replaces; OT_ERR_OUT_OF_MEMORY. */
ot_status ot_strmap_put(ot_strmap *m, const char *key, size_t len, int32_t value);
/* 1 and *value if present. */
int ot_strmap_get(const ot_strmap *m, const char *key, size_t len, int32_t *value);

/* Token ids (>= 0) to int32: the id -> token table of a vocabulary whose ids
 * need not be dense (the tokenizers library takes any u32 id), in memory
 * that grows with the number of ids, not with the largest. */
typedef struct ot_idmap {
  int32_t *key; /* -1: empty */
  int32_t *value;
  size_t cap, n; /* cap a power of two */
} ot_idmap;

void ot_idmap_free(ot_idmap *m);
/* Adds or replaces (key >= 0); OT_ERR_OUT_OF_MEMORY. */
ot_status ot_idmap_put(ot_idmap *m, int32_t key, int32_t value);
/* 1 and *value if present. */
int ot_idmap_get(const ot_idmap *m, int32_t key, int32_t *value);

/* Pairs of token ids to (rank, id): a BPE model's merges, looked up by the
 * two symbols' ids as the library's merge map is (never by their text,
 * whose hashing would cost a symbol's length at every look-up). */
typedef struct ot_pairmap {
  uint64_t *key; /* (a << 32 | b) + 1; 0: empty */
  int32_t *rank, *id;
  size_t cap, n; /* cap a power of two */
} ot_pairmap;

void ot_pairmap_free(ot_pairmap *m);
/* Adds or replaces (a, b >= 0); OT_ERR_OUT_OF_MEMORY. */
ot_status ot_pairmap_put(ot_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id);
/* 1 and *rank, *id if present. */
int ot_pairmap_get(const ot_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *id);

#endif
