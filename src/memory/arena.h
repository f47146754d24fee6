/* arena.h (internal) — what the planner needs of an arena beyond memory.h:
 * a tag per live block and the block list itself, so that it can walk the
 * resident copies in offset order without sorting them (sched/planner.c). */
#ifndef OT_MEMORY_ARENA_H
#define OT_MEMORY_ARENA_H

#include <stddef.h>

#include "omptensor/memory.h"

typedef struct ot_arena_block {
  size_t off, size;
  int free;
  int tag; /* the caller's (-1: none); a new block starts at -1 */
} ot_arena_block;

/* ot_arena_alloc, with the new block's tag. */
ot_status ot_arena_alloc_tag(ot_arena *a, size_t bytes, int tag, size_t *offset);

/* Sets the tag of the live block at offset (nothing if there is none). */
void ot_arena_set_tag(ot_arena *a, size_t offset, int tag);

/* Every block, free and live, sorted by offset and covering [0, capacity);
 * valid until the next change of the arena. */
const ot_arena_block *ot_arena_blocks(const ot_arena *a, int *n);

#endif
