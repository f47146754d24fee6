/* vec.h (internal) — growing a heap array by doubling.
 *
 *     OT_TRY(ot_grow((void **)&p->ops, &p->cap_ops, p->n_ops + 1, sizeof *p->ops, "the program's ops"));
 *     p->ops[p->n_ops++] = op;
 */
#ifndef OT_CORE_VEC_H
#define OT_CORE_VEC_H

#include <stddef.h>

#include "omptensor/status.h"

/* Makes the array *p of *cap elements of `elem` bytes hold at least `need`:
 * nothing when it does already, else the capacity doubles (from 16) until it
 * does and *p is reallocated. Sizes are checked for overflow. On failure
 * (OT_ERR_OUT_OF_MEMORY, with a message naming `what`) *p and *cap are
 * unchanged. */
ot_status ot_grow(void **p, int *cap, int need, size_t elem, const char *what);

#endif
