/* arena.c — best-fit sub-allocation over [0, capacity) with coalescing frees.
 *
 * Blocks are kept in one array sorted by offset, covering the whole range
 * without gaps; neighbours of a free block are never free (frees merge), so a
 * scan finds the best fit and a free finds its neighbours in O(n). Device
 * programs hold hundreds of tensors, not millions: a linear scan is faster
 * than a tree at that size and far easier to trust. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/vec.h"
#include "omptensor/memory.h"

typedef struct block {
  size_t off, size;
  int free;
} block;

struct ot_arena {
  size_t capacity, align, used, peak;
  block *b;
  int n, cap;
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
  if (!a->b) {
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
  free(a);
}

void ot_arena_reset(ot_arena *a) {
  a->n = a->capacity ? 1 : 0;
  a->b[0] = (block){0, a->capacity, 1};
  a->used = 0;
}

static ot_status insert_at(ot_arena *a, int i, block v) {
  OT_TRY(ot_grow((void **)&a->b, &a->cap, a->n + 1, sizeof *a->b, "arena block list"));
  memmove(a->b + i + 1, a->b + i, (size_t)(a->n - i) * sizeof *a->b);
  a->b[i] = v;
  a->n++;
  return OT_OK;
}

static void remove_at(ot_arena *a, int i) {
  memmove(a->b + i, a->b + i + 1, (size_t)(a->n - i - 1) * sizeof *a->b);
  a->n--;
}

ot_status ot_arena_alloc(ot_arena *a, size_t bytes, size_t *offset) {
  if (!a || !offset) return ot_fail(OT_ERR_INVALID_ARG, "ot_arena_alloc: NULL argument");
  size_t need = align_up(bytes ? bytes : 1, a->align);
  if (need < bytes) return ot_fail(OT_ERR_DEVICE_OOM, "arena: request of %zu bytes overflows", bytes);
  int best = -1;
  for (int i = 0; i < a->n; i++)
    if (a->b[i].free && a->b[i].size >= need && (best < 0 || a->b[i].size < a->b[best].size)) best = i;
  if (best < 0) {
    ot_arena_stats s = ot_arena_get_stats(a);
    return ot_fail(OT_ERR_DEVICE_OOM,
                   "device arena: cannot allocate %zu bytes: %zu of %zu bytes free, largest free block %zu",
                   bytes, s.capacity - s.used, s.capacity, s.largest_free);
  }
  block *b = &a->b[best];
  if (b->size > need) {
    block rest = {b->off + need, b->size - need, 1};
    b->size = need;
    b->free = 0;
    if (insert_at(a, best + 1, rest) != OT_OK) {
      a->b[best].size += rest.size; /* undo the split */
      a->b[best].free = 1;
      return OT_ERR_OUT_OF_MEMORY;
    }
  } else {
    b->free = 0;
  }
  *offset = a->b[best].off;
  a->used += need;
  if (a->used > a->peak) a->peak = a->used;
  return OT_OK;
}

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

ot_status ot_arena_free(ot_arena *a, size_t offset) {
  if (!a) return ot_fail(OT_ERR_INVALID_ARG, "ot_arena_free: arena is NULL");
  int i = find(a, offset);
  if (i < 0 || a->b[i].free)
    return ot_fail(OT_ERR_INVALID_ARG, "arena: no live block at offset %zu (double free?)", offset);
  a->used -= a->b[i].size;
  a->b[i].free = 1;
  if (i + 1 < a->n && a->b[i + 1].free) {
    a->b[i].size += a->b[i + 1].size;
    remove_at(a, i + 1);
  }
  if (i > 0 && a->b[i - 1].free) {
    a->b[i - 1].size += a->b[i].size;
    remove_at(a, i);
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
  for (int i = 0; i < a->n; i++) {
    if (a->b[i].free) {
      s.n_free_blocks++;
      if (a->b[i].size > s.largest_free) s.largest_free = a->b[i].size;
    } else {
      s.n_live_blocks++;
    }
  }
  return s;
}

ot_status ot_arena_alloc_at(ot_arena *a, size_t offset, size_t bytes) {
  if (!a) return ot_fail(OT_ERR_INVALID_ARG, "ot_arena_alloc_at: arena is NULL");
  size_t need = align_up(bytes ? bytes : 1, a->align);
  if (offset & (a->align - 1))
    return ot_fail(OT_ERR_INVALID_ARG, "arena: offset %zu is not aligned to %zu", offset, a->align);
  int i = 0;
  while (i < a->n && a->b[i].off + a->b[i].size <= offset) i++;
  if (i == a->n || !a->b[i].free || a->b[i].off + a->b[i].size < offset + need || need < bytes)
    return ot_fail(OT_ERR_DEVICE_OOM, "device arena: range [%zu, %zu) is not free", offset, offset + need);
  block f = a->b[i];
  /* Split the free block into [f.off, offset) free, the new block, and the rest. */
  if (f.off < offset) {
    a->b[i].size = offset - f.off;
    if (insert_at(a, i + 1, (block){offset, f.off + f.size - offset, 1}) != OT_OK) {
      a->b[i].size = f.size;
      return OT_ERR_OUT_OF_MEMORY;
    }
    i++;
  }
  if (a->b[i].size > need) {
    block rest = {offset + need, a->b[i].size - need, 1};
    a->b[i].size = need;
    if (insert_at(a, i + 1, rest) != OT_OK) {
      a->b[i].size += rest.size; /* leaves the arena consistent: nothing allocated */
      return OT_ERR_OUT_OF_MEMORY;
    }
  }
  a->b[i].free = 0;
  a->used += need;
  if (a->used > a->peak) a->peak = a->used;
  return OT_OK;
}
