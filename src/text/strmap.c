/* strmap.c — the hash map of strmap.h. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "text/strmap.h"

static uint32_t fnv1a(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

void ot_strmap_free(ot_strmap *m) {
  for (size_t i = 0; m->slot && i < m->cap; i++) free(m->slot[i].key);
  free(m->slot);
  memset(m, 0, sizeof *m);
}

static ot_strmap_slot *find(const ot_strmap *m, const char *key, size_t len, uint32_t h) {
  size_t mask = m->cap - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    ot_strmap_slot *s = &m->slot[i];
    if (!s->key || (s->hash == h && s->len == len && !memcmp(s->key, key, len))) return s;
  }
}

static ot_status grow(ot_strmap *m) {
  size_t cap = m->cap ? m->cap * 2 : 1024;
  ot_strmap_slot *old = m->slot, *nw = calloc(cap, sizeof *nw);
  if (!nw) return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory for the vocabulary");
  size_t oc = m->cap;
  m->slot = nw;
  m->cap = cap;
  for (size_t i = 0; i < oc; i++)
    if (old[i].key) *find(m, old[i].key, old[i].len, old[i].hash) = old[i];
  free(old);
  return OT_OK;
}

ot_status ot_strmap_put(ot_strmap *m, const char *key, size_t len, int32_t value) {
  if (len > UINT32_MAX) return ot_fail(OT_ERR_INVALID_ARG, "tokenizer: a token of %zu bytes", len);
  if ((m->n + 1) * 2 > m->cap) OT_TRY(grow(m));
  uint32_t h = fnv1a(key, len);
  ot_strmap_slot *s = find(m, key, len, h);
  if (s->key) {
    s->value = value;
    return OT_OK;
  }
  s->key = malloc(len ? len : 1);
  if (!s->key) return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory for the vocabulary");
  memcpy(s->key, key, len);
  s->len = (uint32_t)len;
  s->hash = h;
  s->value = value;
  m->n++;
  return OT_OK;
}

int ot_strmap_get(const ot_strmap *m, const char *key, size_t len, int32_t *value) {
  if (!m->cap) return 0;
  const ot_strmap_slot *s = find(m, key, len, fnv1a(key, len));
  if (!s->key) return 0;
  *value = s->value;
  return 1;
}

/* ---- ot_idmap ---------------------------------------------------------------------- */
static size_t id_slot(const ot_idmap *m, int32_t key) {
  size_t mask = m->cap - 1;
  for (size_t i = ((uint32_t)key * 2654435761u) & mask;; i = (i + 1) & mask)
    if (m->key[i] < 0 || m->key[i] == key) return i;
}

void ot_idmap_free(ot_idmap *m) {
  free(m->key);
  free(m->value);
  memset(m, 0, sizeof *m);
}

static ot_status id_grow(ot_idmap *m) {
  ot_idmap g = {malloc((m->cap ? m->cap * 2 : 1024) * sizeof(int32_t)), NULL, m->cap ? m->cap * 2 : 1024, m->n};
  g.value = malloc(g.cap * sizeof(int32_t));
  if (!g.key || !g.value) {
    free(g.key), free(g.value);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory for the vocabulary");
  }
  memset(g.key, 0xFF, g.cap * sizeof(int32_t)); /* -1: empty */
  for (size_t i = 0; i < m->cap; i++)
    if (m->key[i] >= 0) {
      size_t j = id_slot(&g, m->key[i]);
      g.key[j] = m->key[i], g.value[j] = m->value[i];
    }
  free(m->key), free(m->value);
  *m = g;
  return OT_OK;
}

ot_status ot_idmap_put(ot_idmap *m, int32_t key, int32_t value) {
  if (key < 0) return ot_fail(OT_ERR_INVALID_ARG, "tokenizer: a negative token id %d", key);
  if ((m->n + 1) * 2 > m->cap) OT_TRY(id_grow(m));
  size_t i = id_slot(m, key);
  if (m->key[i] < 0) m->n++;
  m->key[i] = key, m->value[i] = value;
  return OT_OK;
}

int ot_idmap_get(const ot_idmap *m, int32_t key, int32_t *value) {
  if (!m->cap || key < 0) return 0;
  size_t i = id_slot(m, key);
  if (m->key[i] < 0) return 0;
  *value = m->value[i];
  return 1;
}

/* ---- ot_pairmap --------------------------------------------------------------------- */
static uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1; }

static size_t pair_slot(const ot_pairmap *m, uint64_t key) {
  const size_t mask = m->cap - 1;
  for (size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & mask;; i = (i + 1) & mask)
    if (!m->key[i] || m->key[i] == key) return i;
}

void ot_pairmap_free(ot_pairmap *m) {
  free(m->key), free(m->rank), free(m->id);
  memset(m, 0, sizeof *m);
}

static ot_status pair_grow(ot_pairmap *m) {
  ot_pairmap g = {NULL, NULL, NULL, m->cap ? m->cap * 2 : 1024, m->n};
  g.key = calloc(g.cap, sizeof *g.key), g.rank = malloc(g.cap * sizeof *g.rank), g.id = malloc(g.cap * sizeof *g.id);
  if (!g.key || !g.rank || !g.id) {
    ot_pairmap_free(&g);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "tokenizer: no host memory for the merges");
  }
  for (size_t i = 0; i < m->cap; i++)
    if (m->key[i]) {
      const size_t j = pair_slot(&g, m->key[i]);
      g.key[j] = m->key[i], g.rank[j] = m->rank[i], g.id[j] = m->id[i];
    }
  ot_pairmap_free(m);
  *m = g;
  return OT_OK;
}

ot_status ot_pairmap_put(ot_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id) {
  if ((m->n + 1) * 2 > m->cap) OT_TRY(pair_grow(m));
  const uint64_t k = pair_key(a, b);
  const size_t i = pair_slot(m, k);
  if (!m->key[i]) m->n++;
  m->key[i] = k, m->rank[i] = rank, m->id[i] = id;
  return OT_OK;
}

int ot_pairmap_get(const ot_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *id) {
  if (!m->cap || a < 0 || b < 0) return 0;
  const size_t i = pair_slot(m, pair_key(a, b));
  if (!m->key[i]) return 0;
  *rank = m->rank[i], *id = m->id[i];
  return 1;
}
