/* tlist.h — a list of tensors a model or trainer owns and destroys together
 * (activations, gradients, optimizer state, views). */
#ifndef OMPTENSOR_TLIST_H
#define OMPTENSOR_TLIST_H

#include "omptensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ot_tlist {
  ot_tensor **t;
  int n, cap;
} ot_tlist;

/* Creates a zeroed tensor named printf-style and keeps it. */
ot_status ot_tlist_new(ot_tlist *l, ot_ctx *ctx, ot_dtype dt, int ndim, const int64_t *shape, ot_tensor **out,
                       const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* The same, or with no_memory OT_TLIST_NO_MEMORY (or any true value other
 * than OT_TLIST_LAZY) a tensor of that name, dtype and shape that wraps no
 * memory: for programs that are recorded and planned (to check a budget)
 * but never run; with OT_TLIST_LAZY one whose home is made only when a plan
 * needs it (ot_tensor_create_lazy). */
enum { OT_TLIST_MEMORY = 0, OT_TLIST_NO_MEMORY = 1, OT_TLIST_LAZY = 2 };
ot_status ot_tlist_add(ot_tlist *l, ot_ctx *ctx, ot_dtype dt, int ndim, const int64_t *shape, int no_memory,
                       ot_tensor **out, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
/* Keeps t (a view made by the caller); on failure t is destroyed. */
ot_status ot_tlist_keep(ot_tlist *l, ot_tensor *t);
/* Destroys every tensor (the newest first) and empties the list. */
void ot_tlist_release(ot_tlist *l);

#ifdef __cplusplus
}
#endif
#endif
