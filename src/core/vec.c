/* vec.c — see vec.h. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/vec.h"

ot_status ot_grow(void **p, int *cap, int need, size_t elem, const char *what) {
  if (need < 0) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: more than %d elements", what, INT_MAX);
  if (need <= *cap) return OT_OK;
  int nc = *cap > 0 ? *cap : 16;
  while (nc < need) nc = nc > INT_MAX / 2 ? need : 2 * nc;
  if (elem && (size_t)nc > SIZE_MAX / elem)
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: %d elements of %zu bytes do not fit in memory", what, nc, elem);
  void *np = realloc(*p, (size_t)nc * (elem ? elem : 1));
  if (!np) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: no host memory to grow to %d elements", what, nc);
  *p = np;
  *cap = nc;
  return OT_OK;
}
