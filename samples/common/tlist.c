/* tlist.c — see tlist.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tlist.h"

ot_status ot_tlist_keep(ot_tlist *l, ot_tensor *t) {
  if (l->n == l->cap) {
    int nc = l->cap ? 2 * l->cap : 64;
    ot_tensor **nt = realloc(l->t, (size_t)nc * sizeof *nt);
    if (!nt) {
      ot_tensor_destroy(t);
      return ot_set_error(OT_ERR_OUT_OF_MEMORY, "no host memory for a list of tensors");
    }
    l->t = nt;
    l->cap = nc;
  }
  l->t[l->n++] = t;
  return OT_OK;
}

ot_status ot_tlist_new(ot_tlist *l, ot_ctx *ctx, ot_dtype dt, int ndim, const int64_t *shape, ot_tensor **out,
                       const char *fmt, ...) {
  char name[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  *out = NULL;
  ot_tensor *t;
  ot_status s = ot_tensor_create(ctx, name, dt, ndim, shape, &t);
  if (s == OT_OK) s = ot_tlist_keep(l, t);
  if (s == OT_OK) *out = t;
  return s;
}

void ot_tlist_release(ot_tlist *l) {
  for (int i = l->n - 1; i >= 0; i--) ot_tensor_destroy(l->t[i]);
  free(l->t);
  memset(l, 0, sizeof *l);
}
