/* tlist.c — see tlist.h. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/vec.h"
#include "omptensor/tlist.h"

ot_status ot_tlist_keep(ot_tlist *l, ot_tensor *t) {
  ot_status s = ot_grow((void **)&l->t, &l->cap, l->n + 1, sizeof *l->t, "list of tensors");
  if (s != OT_OK) {
    ot_tensor_destroy(t);
    return s;
  }
  l->t[l->n++] = t;
  return OT_OK;
}

/* A new tensor named from fmt/ap: zeroed memory, none, or a lazy home (tlist.h). */
static ot_status add(ot_tlist *l, ot_ctx *ctx, ot_dtype dt, int ndim, const int64_t *shape, int no_memory,
                     ot_tensor **out, const char *fmt, va_list ap) {
  static max_align_t nothing; /* what a plan-only tensor "wraps": never read or written */
  char name[128];
  vsnprintf(name, sizeof name, fmt, ap);
  *out = NULL;
  ot_tensor *t;
  ot_status s = no_memory == OT_TLIST_LAZY ? ot_tensor_create_lazy(ctx, name, dt, ndim, shape, &t)
                : no_memory ? ot_tensor_wrap(ctx, name, dt, ndim, shape, &nothing, OT_MEM_HOST, &t)
                            : ot_tensor_create(ctx, name, dt, ndim, shape, &t);
  if (s == OT_OK) s = ot_tlist_keep(l, t);
  if (s == OT_OK) *out = t;
  return s;
}

ot_status ot_tlist_new(ot_tlist *l, ot_ctx *ctx, ot_dtype dt, int ndim, const int64_t *shape, ot_tensor **out,
                       const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ot_status s = add(l, ctx, dt, ndim, shape, 0, out, fmt, ap);
  va_end(ap);
  return s;
}

ot_status ot_tlist_add(ot_tlist *l, ot_ctx *ctx, ot_dtype dt, int ndim, const int64_t *shape, int no_memory,
                       ot_tensor **out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ot_status s = add(l, ctx, dt, ndim, shape, no_memory, out, fmt, ap);
  va_end(ap);
  return s;
}

void ot_tlist_release(ot_tlist *l) {
  for (int i = l->n - 1; i >= 0; i--) ot_tensor_destroy(l->t[i]);
  free(l->t);
  memset(l, 0, sizeof *l);
}
