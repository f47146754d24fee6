/* attention_tile.h (internal to src/kernels) — the key tile and the largest
 * head_dim of the portable attention loops. attention.c (one sequence) and
 * attention_rows.c (a batch of sequences) share them: a row of a batch is
 * bitwise the one-sequence result only if both walk the keys in the same
 * tiles. */
#ifndef OT_KERNELS_ATTENTION_TILE_H
#define OT_KERNELS_ATTENTION_TILE_H

#define AT_TILE 64
#define AT_MAX_HEAD_DIM 256

#endif
