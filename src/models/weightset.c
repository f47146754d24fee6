/* weightset.c — see weightset.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "omptensor/models.h"
#include "omptensor/weightset.h"
#include "ot_pragmas.h"

static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* Fills an f32 buffer deterministically from (seed, name): the same model
 * whatever order tensors are made in. Counter-based, so it parallelises. */
static void fill_synthetic(float *x, int64_t n, uint64_t seed, const char *name, float scale) {
  uint64_t base = mix(seed ^ name_hash(name));
  OT_HOST_PARFOR_IF(n > 65536)
  for (int64_t i = 0; i < n; i++) {
    float u = (float)((mix(base + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)) >> 40) * 0x1p-24) * 2.0f - 1.0f;
    x[i] = scale >= 0 ? u * scale : 1.0f + u * -scale;
  }
}

static ot_status keep(ot_wset *w, ot_tensor *t) {
  OT_TRY(ot_tlist_keep(&w->t, t));
  w->bytes += ot_tensor_storage_bytes(t);
  if (w->progress && !w->dry) w->progress(w->user, "load", w->bytes, w->total > w->bytes ? w->total : w->bytes);
  return OT_OK;
}

ot_status ot_wset_add(ot_wset *w, ot_dtype dt, int ndim, const int64_t *shape, float scale, ot_tensor **out,
                      const char *fmt, ...) {
  char name[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  *out = NULL;
  ot_tensor *t;
  ot_status s;
  if (w->dry) {
    /* A check before any byte is read: a wrong or incomplete checkpoint fails
     * at once, not after gigabytes of earlier layers. The tensor wraps one
     * byte it never reads, so the model's views can still be made. */
    static unsigned char nothing;
    const ot_st_info *info = NULL;
    s = w->ck ? ot_lm_check_weight(w->ck, name, ndim, shape, &info) : OT_OK;
    dt = ot_lm_weight_dtype(info, dt, ndim, shape);
    if (s == OT_OK) s = ot_tensor_wrap(w->ctx, name, dt, ndim, shape, &nothing, OT_MEM_HOST, &t);
  } else if (w->ck) {
    s = ot_lm_load_weight(w->ctx, w->ck, name, dt, ndim, shape, &t);
  } else {
    dt = ot_lm_weight_dtype(NULL, dt, ndim, shape);
    s = ot_tensor_create(w->ctx, name, dt, ndim, shape, &t);
    if (s == OT_OK) {
      int64_t n = ot_tensor_numel(t);
      float *tmp = malloc((size_t)n * sizeof *tmp);
      if (!tmp) {
        ot_tensor_destroy(t);
        return ot_set_error(OT_ERR_OUT_OF_MEMORY, "weights: no host memory to make '%s'", name);
      }
      fill_synthetic(tmp, n, w->seed, name, scale);
      s = ot_convert(dt, ot_tensor_data(t), OT_F32, tmp, n);
      free(tmp);
      if (s != OT_OK) ot_tensor_destroy(t);
    }
  }
  if (s != OT_OK) return s;
  s = keep(w, t);
  if (s == OT_OK) *out = t;
  return s;
}

ot_status ot_wset_add_optional(ot_wset *w, ot_dtype dt, int ndim, const int64_t *shape, ot_tensor **out,
                               const char *name) {
  *out = NULL;
  const ot_st_info *info;
  if (!w->ck || ot_ckpt_find(w->ck, name, &info) != OT_OK) {
    ot_clear_error();
    return OT_OK;
  }
  return ot_wset_add(w, dt, ndim, shape, 0.0f, out, "%s", name);
}

void ot_wset_destroy(ot_wset *w) {
  ot_tlist_release(&w->t);
}

ot_dtype ot_wset_matmul_dtype(const ot_wset *w, ot_dtype want, const char *probe) {
  if (want != OT_DTYPE_KEEP) return want;
  if (w->ck && ot_ckpt_is_gguf(w->ck)) return OT_DTYPE_KEEP; /* GGUF files mix types: each tensor its own */
  const ot_st_info *info;
  if (w->ck && ot_ckpt_find(w->ck, probe, &info) == OT_OK) return info->dtype;
  ot_clear_error();
  return OT_F32;
}

uint64_t ot_wset_ckpt_bytes(const ot_wset *w) {
  uint64_t n = 0;
  for (int i = 0; w->ck && i < ot_ckpt_count(w->ck); i++) n += ot_ckpt_at(w->ck, i)->bytes;
  return n;
}
