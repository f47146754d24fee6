/* arena.c — best-fit sub-allocation over [0, capacity) with coalescing frees.
 *
 * Blocks are kept in one array sorted by offset, covering the whole range
 * without gaps; neighbours of a free block are never free (frees merge). A
 * second array lists the free blocks alone, also by offset: best fit scans
 * only those, and a block is found by offset with a binary search. Why the
 * second list: a plan of 10 000 ops keeps thousands of copies live on paper
 * (bench/bench_plan.c), and scanning every live block for each placement made
 * planning quadratic in the ops; free blocks stay few (frees merge). Blocks
 * carry a tag for the caller (the planner's storage index, memory/arena.h). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/vec.h"
#include "memory/arena.h"
#include "omptensor/memory.h"

typedef struct fblock {
  size_t off, size;
} fblock;

struct ot_arena {
  size_t capacity, align, used, peak;
  ot_arena_block *b;
  int n, cap;
  fblock *f; /* the free blocks, by offset */
  int nf, capf;
};

static size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

ot_status ot_arena_create(size_t capacity, size_t align, ot_arena **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_arena_create: out is NULL");
  *out = NULL;
  if (align == 0 || (align & (align - 1)))
    return ot_fail(OT_ERR_INVALID_ARG, "ot_arena_create: alignment %zu is not a power of two", align);
  ot_arena *a = calloc(1, sizeof *a);
  if (!a) return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_arena_create: no memory for the arena");
  a->capacity = capacity & ~(align - 1);
  a->align = align;
  a->cap = 16;
  a->b = malloc((size_t)a->cap * sizeof *a->b);
  a->capf = 16;
  a->f = malloc((size_t)a->capf * sizeof *a->f);
  if (!a->b || !a->f) {
    free(a->b);
    free(a->f);
    free(a);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_arena_create: no memory for the arena");
  }
  ot_arena_reset(a);
  *out = a;
  return OT_OK;
}

void ot_arena_destroy(ot_arena *a) {
  if (!a) return;
  free(a->b);
  free(a->f);
  free(a);
}

void ot_arena_reset(ot_arena *a) {
  a->n = a->capacity ? 1 : 0;
  a->b[0] = (ot_arena_block){0, a->capacity, 1, -1};
  a->nf = a->n;
  a->f[0] = (fblock){0, a->capacity};
  a->used = 0;
}

/* Room for two more blocks and two more free blocks, taken before a change
 * so that the change itself cannot fail halfway. */
static ot_status reserve(ot_arena *a) {
  OT_TRY(ot_grow((void **)&a->b, &a->cap, a->n + 2, sizeof *a->b, "arena block list"));
  return ot_grow((void **)&a->f, &a->capf, a->nf + 2, sizeof *a->f, "arena free list");
}

static void insert_at(ot_arena *a, int i, ot_arena_block v) {
  memmove(a->b + i + 1, a->b + i, (size_t)(a->n - i) * sizeof *a->b);
  a->b[i] = v;
  a->n++;
}

static void remove_at(ot_arena *a, int i) {
  memmove(a->b + i, a->b + i + 1, (size_t)(a->n - i - 1) * sizeof *a->b);
  a->n--;
}

static void finsert_at(ot_arena *a, int j, fblock v) {
  memmove(a->f + j + 1, a->f + j, (size_t)(a->nf - j) * sizeof *a->f);
  a->f[j] = v;
  a->nf++;
}

static void fremove_at(ot_arena *a, int j) {
  memmove(a->f + j, a->f + j + 1, (size_t)(a->nf - j - 1) * sizeof *a->f);
  a->nf--;
}

/* Index of the block starting at off, or -1. */
static int find(const ot_arena *a, size_t off) {
  int lo = 0, hi = a->n - 1;
  while (lo <= hi) {
    int m = (lo + hi) / 2;
    if (a->b[m].off == off) return m;
    if (a->b[m].off < off) lo = m + 1;
    else hi = m - 1;
  }
  return -1;
}

/* Index of the block holding off (off < capacity). */
static int find_holding(const ot_arena *a, size_t off) {
  int lo = 0, hi = a->n - 1;
  while (lo < hi) { /* the last block starting at or before off */
    int m = (lo + hi + 1) / 2;
    if (a->b[m].off <= off) lo = m;
    else hi = m - 1;
  }
  return lo;
}

/* Index in the free list of the first free block at or after off. */
static int ffind(const ot_arena *a, size_t off) {
  int lo = 0, hi = a->nf;
  while (lo < hi) {
    int m = (lo + hi) / 2;
    if (a->f[m].off < off) lo = m + 1;
    else hi = m;
  }
  return lo;
}

ot_status ot_arena_alloc(ot_arena *a, size_t bytes, size_t *offset) { return ot_arena_alloc_tag(a, bytes, -1, offset); }

ot_status ot_arena_alloc_tag(ot_arena *a, size_t bytes, int tag, size_t *offset) {
  if (!a || !offset) return ot_fail(OT_ERR_INVALID_ARG, "ot_arena_alloc: NULL argument");
  size_t need = align_up(bytes ? bytes : 1, a->align);
  if (need < bytes) return ot_fail(OT_ERR_DEVICE_OOM, "arena: request of %zu bytes overflows", bytes);
  int best = -1;
  for (int j = 0; j < a->nf; j++)
    if (a->f[j].size >= need && (best < 0 || a->f[j].size < a->f[best].size)) best = j;
  if (best < 0) {
    ot_arena_stats s = ot_arena_get_stats(a);
    return ot_fail(OT_ERR_DEVICE_OOM,
                   "device arena: cannot allocate %zu bytes: %zu of %zu bytes free, largest free block %zu",
                   bytes, s.capacity - s.used, s.capacity, s.largest_free);
  }
  OT_TRY(reserve(a));
  int i = find(a, a->f[best].off);
  ot_arena_block *b = &a->b[i];
  if (b->size > need) {
    ot_arena_block rest = {b->off + need, b->size - need, 1, -1};
    b->size = need;
    b->free = 0;
    b->tag = tag;
    insert_at(a, i + 1, rest);
    a->f[best] = (fblock){rest.off, rest.size};
  } else {
    b->free = 0;
    b->tag = tag;
    fremove_at(a, best);
  }
  *offset = a->b[i].off;
  a->used += need;
  if (a->used > a->peak) a->peak = a->used;
  return OT_OK;
}

ot_status ot_arena_free(ot_arena *a, size_t offset) {
  if (!a) return ot_fail(OT_ERR_INVALID_ARG, "ot_arena_free: arena is NULL");
  int i = find(a, offset);
  if (i < 0 || a->b[i].free)
    return ot_fail(OT_ERR_INVALID_ARG, "arena: no live block at offset %zu (double free?)", offset);
  OT_TRY(reserve(a));
  a->used -= a->b[i].size;
  a->b[i].free = 1;
  a->b[i].tag = -1;
  int j = ffind(a, offset); /* the free list's entry for the next free block */
  int next_free = i + 1 < a->n && a->b[i + 1].free, prev_free = i > 0 && a->b[i - 1].free;
  if (next_free) {
    a->b[i].size += a->b[i + 1].size;
    remove_at(a, i + 1);
    fremove_at(a, j);
  }
  if (prev_free) {
    a->b[i - 1].size += a->b[i].size;
    remove_at(a, i);
    a->f[j - 1].size = a->b[i - 1].size;
  } else {
    finsert_at(a, j, (fblock){a->b[i].off, a->b[i].size});
  }
  return OT_OK;
}

size_t ot_arena_block_size(const ot_arena *a, size_t offset) {
  int i = a ? find(a, offset) : -1;
  return i >= 0 && !a->b[i].free ? a->b[i].size : 0;
}

ot_arena_stats ot_arena_get_stats(const ot_arena *a) {
  ot_arena_stats s = {0};
  if (!a) return s;
  s.capacity = a->capacity;
  s.used = a->used;
  s.peak = a->peak;
  s.n_free_blocks = a->nf;
  s.n_live_blocks = a->n - a->nf;
  for (int j = 0; j < a->nf; j++)
    if (a->f[j].size > s.largest_free) s.largest_free = a->f[j].size;
  return s;
}

const ot_arena_block *ot_arena_blocks(const ot_arena *a, int *n) {
  *n = a ? a->n : 0;
  return a ? a->b : NULL;
}

void ot_arena_set_tag(ot_arena *a, size_t offset, int tag) {
  int i = a ? find(a, offset) : -1;
  if (i >= 0 && !a->b[i].free) a->b[i].tag = tag;
}

ot_status ot_arena_alloc_at(ot_arena *a, size_t offset, size_t bytes) {
  if (!a) return ot_fail(OT_ERR_INVALID_ARG, "ot_arena_alloc_at: arena is NULL");
  size_t need = align_up(bytes ? bytes : 1, a->align);
  if (offset & (a->align - 1))
    return ot_fail(OT_ERR_INVALID_ARG, "arena: offset %zu is not aligned to %zu", offset, a->align);
  int i = offset < a->capacity ? find_holding(a, offset) : a->n;
  if (i == a->n || !a->b[i].free || a->b[i].off + a->b[i].size < offset + need || need < bytes ||
      offset + need < offset)
    return ot_fail(OT_ERR_DEVICE_OOM, "device arena: range [%zu, %zu) is not free", offset, offset + need);
  OT_TRY(reserve(a));
  ot_arena_block f = a->b[i];
  int j = ffind(a, f.off); /* its free-list entry */
  /* Split the free block into [f.off, offset) free, the new block, and the rest. */
  if (f.off < offset) {
    a->b[i].size = offset - f.off;
    a->f[j].size = offset - f.off;
    insert_at(a, i + 1, (ot_arena_block){offset, f.off + f.size - offset, 1, -1});
    i++;
    j++;
    finsert_at(a, j, (fblock){offset, f.off + f.size - offset});
  }
  if (a->b[i].size > need) {
    ot_arena_block rest = {offset + need, a->b[i].size - need, 1, -1};
    a->b[i].size = need;
    insert_at(a, i + 1, rest);
    a->f[j] = (fblock){rest.off, rest.size};
  } else {
    fremove_at(a, j);
  }
  a->b[i].free = 0;
  a->b[i].tag = -1;
  a->used += need;
  if (a->used > a->peak) a->peak = a->used;
  return OT_OK;
}
