/* tlist.h — a list of tensors a sample owns and destroys together
 * (activations, gradients, optimizer state, views). */
#ifndef OT_SAMPLES_TLIST_H
#define OT_SAMPLES_TLIST_H

#include "omptensor/tensor.h"

typedef struct ot_tlist {
  ot_tensor **t;
  int n, cap;
} ot_tlist;

/* Creates a zeroed tensor named printf-style and keeps it. */
ot_status ot_tlist_new(ot_tlist *l, ot_ctx *ctx, ot_dtype dt, int ndim, const int64_t *shape, ot_tensor **out,
                       const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* Keeps t (a view made by the caller); on failure t is destroyed. */
ot_status ot_tlist_keep(ot_tlist *l, ot_tensor *t);
/* Destroys every tensor (the newest first) and empties the list. */
void ot_tlist_release(ot_tlist *l);

#endif
