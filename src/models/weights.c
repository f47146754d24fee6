/* weights.c — reading checkpoint tensors into their home memory, once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/ckpt_disk.h"
#include "memory/context_impl.h"
#include "memory/tensor_impl.h"
#include "omptensor/lm.h"
#include "omptensor/models.h"

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

ot_status ot_lm_check_weight(const ot_ckpt *ck, const char *name, int ndim, const int64_t *shape,
                             const ot_st_info **found) {
  const ot_st_info *info;
  OT_TRY(ot_ckpt_find(ck, name, &info));
  int same = info->ndim == ndim;
  for (int i = 0; same && i < ndim; i++) same = info->shape[i] == shape[i];
  if (!same) {
    char want[128], got[128];
    shape_str(want, sizeof want, ndim, shape);
    shape_str(got, sizeof got, info->ndim, info->shape);
    return ot_fail(OT_ERR_SHAPE, "%s: tensor '%s' has shape %s, but %s implies %s", ot_ckpt_dir(ck), name, got,
                   ot_ckpt_is_gguf(ck) ? "its metadata" : "config.json", want); /* a GGUF file has no config.json */
  }
  /* block dtypes come from GGUF files (ot_ckpt_is_gguf) */
  if (info->dtype != OT_F32 && info->dtype != OT_F16 && info->dtype != OT_BF16 && !ot_dtype_block(info->dtype))
    return ot_fail(OT_ERR_DTYPE, "%s: tensor '%s' is %s; weights must be F32, F16 or BF16", ot_ckpt_dir(ck), name,
                   ot_dtype_name(info->dtype));
  if (found) *found = info;
  return OT_OK;
}

ot_dtype ot_lm_weight_dtype(const ot_st_info *info, ot_dtype want, int ndim, const int64_t *shape) {
  /* as the file has it (a GGUF file mixes types by tensor) */
  if (want == OT_DTYPE_KEEP) return info ? info->dtype : OT_F32;
  /* A quantized weight stays in its own blocks when blocks are asked for:
   * requantizing one 4-bit fit into another only adds error. A float dtype
   * asked for dequantizes it. */
  if (info && ot_dtype_block(info->dtype) && ot_dtype_block(want)) return info->dtype;
  /* blocks need whole blocks along rows; vectors (norms, biases) stay f32 */
  if (ot_dtype_block(want) && (ndim < 2 || shape[ndim - 1] % ot_dtype_block(want))) return OT_F32;
  return want;
}

ot_status ot_lm_load_weight(ot_ctx *ctx, const ot_ckpt *ck, const char *name, ot_dtype dt, int ndim,
                            const int64_t *shape, ot_tensor **out) {
  *out = NULL;
  const ot_st_info *info;
  OT_TRY(ot_lm_check_weight(ck, name, ndim, shape, &info));
  ot_status s;
  dt = ot_lm_weight_dtype(info, dt, ndim, shape);
  ot_tensor *t;
  /* Under a host budget a weight stored as the file has it is homed in the
   * file (memory/diskfile.h): no host memory until a plan keeps it there
   * (sched/homes.c). A converted one must live converted in host memory. */
  if (ctx->host_budget && info->dtype == dt && !ot_ckpt_is_gguf(ck)) {
    ot_disk_file *df;
    uint64_t off;
    OT_TRY(ot_ckpt_disk_file(ck, info, &df, &off));
    return ot_tensor_create_on_file(ctx, name, dt, ndim, shape, df, off, out);
  }
  OT_TRY(ot_tensor_create(ctx, name, dt, ndim, shape, &t));
  if (info->dtype == dt) {
    s = ot_ckpt_read(ck, info, ot_tensor_data(t), info->bytes); /* straight into the home */
  } else {
    /* Different dtype: read into a staging buffer, convert into the home. */
    void *tmp = malloc(info->bytes ? info->bytes : 1);
    if (!tmp) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: no host memory to convert '%s'", ot_ckpt_dir(ck), name);
    else s = ot_ckpt_read(ck, info, tmp, info->bytes);
    if (s == OT_OK) s = ot_convert(dt, ot_tensor_data(t), info->dtype, tmp, info->numel);
    free(tmp);
  }
  if (s != OT_OK) {
    ot_tensor_destroy(t);
    return s;
  }
  *out = t;
  return OT_OK;
}
