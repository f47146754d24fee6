/* kview.c — view constructors, validation shared by kernels and references,
 * team sizing. */
#include <stdio.h>
#include <string.h>

#include "kernels/kcommon.h"
#include "kernels/train_gpu.h"
#include "memory/device.h"

ot_kview ot_kview_nd(void *p, ot_dtype dt, int ndim, const int64_t *ne) {
  ot_kview v = {p, dt, ndim, {0}, {0}};
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    v.ne[d] = ne[d];
    v.nb[d] = s;
    s *= ne[d];
  }
  return v;
}

ot_kview ot_kview_1d(void *p, ot_dtype dt, int64_t n0) { return ot_kview_nd(p, dt, 1, (int64_t[]){n0}); }
ot_kview ot_kview_2d(void *p, ot_dtype dt, int64_t n0, int64_t n1) {
  return ot_kview_nd(p, dt, 2, (int64_t[]){n0, n1});
}
ot_kview ot_kview_3d(void *p, ot_dtype dt, int64_t n0, int64_t n1, int64_t n2) {
  return ot_kview_nd(p, dt, 3, (int64_t[]){n0, n1, n2});
}

ot_kview ot_kview_t(ot_kview v) {
  if (v.ndim < 2) return v;
  int a = v.ndim - 2, b = v.ndim - 1;
  int64_t t = v.ne[a];
  v.ne[a] = v.ne[b];
  v.ne[b] = t;
  t = v.nb[a];
  v.nb[a] = v.nb[b];
  v.nb[b] = t;
  return v;
}

int64_t ot_kview_numel(ot_kview v) {
  int64_t n = 1;
  for (int d = 0; d < v.ndim; d++) n *= v.ne[d];
  return n;
}

ot_kview ot_kview_none(void) {
  ot_kview v;
  memset(&v, 0, sizeof v);
  return v;
}

ot_kview ot_kview_4d(ot_kview v) {
  ot_kview r = v;
  int pad = 4 - v.ndim;
  for (int d = 0; d < 4; d++) {
    r.ne[d] = d < pad ? 1 : v.ne[d - pad];
    r.nb[d] = d < pad ? 0 : v.nb[d - pad];
  }
  r.ndim = 4;
  return r;
}

const char *ot_kshape_str(ot_kview v) {
  static _Thread_local char buf[4][96];
  static _Thread_local int slot;
  char *s = buf[slot++ & 3];
  int n = snprintf(s, 96, "[");
  for (int d = 0; d < v.ndim && d < 4; d++)
    n += snprintf(s + n, (size_t)(96 - n), "%s%lld", d ? ", " : "", (long long)v.ne[d]);
  snprintf(s + n, (size_t)(96 - n), "] %s", ot_dtype_name(v.dt));
  return s;
}

ot_status ot_kcheck(const char *op, const char *name, ot_kview v, int nmin, int nmax, unsigned mask) {
  if (v.ndim < nmin || v.ndim > nmax || v.ndim > OT_KVIEW_MAX_DIMS)
    return ot_fail(OT_ERR_SHAPE, "%s: %s has %d dims, needs %d..%d (shape %s)", op, name, v.ndim, nmin, nmax,
                   ot_kshape_str(v));
  if ((unsigned)v.dt >= OT_DTYPE_COUNT || !(mask & OT_KM(v.dt))) {
    char allowed[64] = "";
    for (int t = 0; t < OT_DTYPE_COUNT; t++)
      if (mask & OT_KM(t)) {
        strncat(allowed, allowed[0] ? "/" : "", sizeof allowed - strlen(allowed) - 1);
        strncat(allowed, ot_dtype_name((ot_dtype)t), sizeof allowed - strlen(allowed) - 1);
      }
    return ot_fail(OT_ERR_DTYPE, "%s: %s is %s, supported: %s", op, name, ot_dtype_name(v.dt), allowed);
  }
  for (int d = 0; d < v.ndim; d++)
    if (v.ne[d] < 0 || v.nb[d] < 0)
      return ot_fail(OT_ERR_SHAPE, "%s: %s has a negative dim or stride (shape %s)", op, name, ot_kshape_str(v));
  if (!v.p && ot_kview_numel(v) > 0)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: %s has no data pointer (shape %s)", op, name, ot_kshape_str(v));
  const int blk = ot_dtype_block((ot_dtype)v.dt);
  if (blk && v.ndim > 0) {
    int last = v.ndim - 1;
    int ok = v.nb[last] == 1 && v.ne[last] % blk == 0;
    for (int d = 0; d < last; d++) ok = ok && v.nb[d] % blk == 0;
    if (!ok)
      return ot_fail(OT_ERR_SHAPE,
                     "%s: %s is %s %s but its last dim is not contiguous whole blocks of %d "
                     "(quantize along the contiguous input dim; pass trans_b instead of a transposed view)",
                     op, name, ot_dtype_name((ot_dtype)v.dt), ot_kshape_str(v), blk);
  }
  return OT_OK;
}

ot_status ot_kcheck_dim(const char *op, const char *na, ot_kview a, int da, const char *nbn, ot_kview b, int db) {
  int ia = da < 0 ? a.ndim + da : da, ib = db < 0 ? b.ndim + db : db;
  if (ia < 0 || ia >= a.ndim || ib < 0 || ib >= b.ndim || a.ne[ia] != b.ne[ib])
    return ot_fail(OT_ERR_SHAPE, "%s: %s %s and %s %s disagree in dim %d vs %d", op, na, ot_kshape_str(a), nbn,
                   ot_kshape_str(b), da, db);
  return OT_OK;
}

/* Whether `dev` executes on host threads: the initial device, or any device
 * of a build whose offload target is the x86_64 host plugin. */
int ot_kruns_on_host(int dev) {
#ifdef OT_OFFLOAD
  if (strcmp(OT_OFFLOAD_NAME, "host") == 0) return 1;
  return ot_dev_is_host(dev);
#else
  (void)dev;
  return 1;
#endif
}

int ot_kfast_gpu(int dev) {
#ifdef OT_OFFLOAD
  /* the bare kernels assume 32-lane warps and NVPTX shuffles */
  return strcmp(OT_OFFLOAD_NAME, "nvptx") == 0 && !ot_kruns_on_host(dev);
#else
  (void)dev;
  return 0;
#endif
}

/* On unless the benchmark switches it off to time the portable kernels. */
static int ktrain_fast_on = 1;

int ot_ktrain_fast(int dev) { return ktrain_fast_on && ot_kfast_gpu(dev); }

void ot_ktrain_fast_set(int on) { ktrain_fast_on = on != 0; }

int ot_kteams(int dev, int64_t n) {
  if (n < 1) return 1;
  if (ot_kruns_on_host(dev)) return 1;
  /* a grid this wide is plenty; teams loop over the rest (distribute) */
  return n > 65536 ? 65536 : (int)n;
}
