/* experts.c — the experts object (experts.h): the borrowed expert weights,
 * the window tensor and what it holds, the routing. */
#include <math.h>
#include <stdlib.h>

#include "core/checked.h"
#include "ops/moe_impl.h"

ot_status ot_experts_create(ot_ctx *ctx, const ot_experts_shape *sh, ot_experts **out) {
  if (!ctx || !sh || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_experts_create: NULL argument");
  *out = NULL;
  if (sh->n_layers < 1 || sh->n_experts < 1 || sh->top_k < 1 || sh->top_k > sh->n_experts || sh->hidden < 1 ||
      sh->intermediate < 1 || sh->n_experts > OT_MOE_MAX_EXPERTS)
    return ot_fail(OT_ERR_INVALID_ARG,
                   "ot_experts_create: %d layers of %d experts, top %d, hidden %lld, intermediate %lld: need at "
                   "least one of each, top_k <= experts <= %d", sh->n_layers, sh->n_experts, sh->top_k,
                   (long long)sh->hidden, (long long)sh->intermediate, OT_MOE_MAX_EXPERTS);
  ot_experts *x = calloc(1, sizeof *x);
  size_t n_w;
  if (!x || ot_mul_size((size_t)sh->n_layers * (size_t)sh->n_experts, 3, &n_w) ||
      !(x->w = calloc(n_w, sizeof *x->w))) {
    free(x);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_experts_create: no host memory");
  }
  x->ctx = ctx;
  x->sh = *sh;
  const size_t part = ot_sched_block_bytes(ot_dtype_bytes(sh->dtype, sh->hidden * sh->intermediate));
  for (int k = 0; k < 3; k++) x->part_off[k] = (size_t)k * part;
  x->slot_bytes = 3 * part;
  *out = x;
  return OT_OK;
}

void ot_experts_destroy(ot_experts *x) {
  if (!x) return;
  ot_tensor_destroy(x->window);
  free(x->slot);
  free(x->w);
  free(x->host);
  free(x);
}

ot_status ot_experts_set(ot_experts *x, int layer, int e, ot_tensor *gate, ot_tensor *up, ot_tensor *down) {
  if (!x || !gate || !up || !down) return ot_fail(OT_ERR_INVALID_ARG, "ot_experts_set: NULL argument");
  if (layer < 0 || layer >= x->sh.n_layers || e < 0 || e >= x->sh.n_experts)
    return ot_fail(OT_ERR_INVALID_ARG, "ot_experts_set: layer %d expert %d of %d x %d", layer, e, x->sh.n_layers,
                   x->sh.n_experts);
  ot_tensor *t[3] = {gate, up, down};
  const int64_t D = x->sh.hidden, F = x->sh.intermediate;
  for (int k = 0; k < 3; k++) {
    const int64_t r = k < 2 ? F : D, c = k < 2 ? D : F;
    if (ot_tensor_ndim(t[k]) != 2 || ot_tensor_dim(t[k], 0) != r || ot_tensor_dim(t[k], 1) != c ||
        ot_tensor_dtype(t[k]) != x->sh.dtype || !ot_tensor_is_contiguous(t[k]))
      return ot_fail(OT_ERR_SHAPE, "ot_experts_set: expert %d of layer %d: '%s' must be a contiguous [%lld, %lld] %s",
                     e, layer, ot_tensor_name(t[k]), (long long)r, (long long)c, ot_dtype_name(x->sh.dtype));
    x->w[((size_t)layer * (size_t)x->sh.n_experts + (size_t)e) * 3 + (size_t)k] = t[k];
  }
  return OT_OK;
}

size_t ot_experts_slot_bytes(const ot_experts *x) { return x ? x->slot_bytes : 0; }
int ot_experts_slots(const ot_experts *x) { return x ? x->n_slots : 0; }
int ot_experts_count(const ot_experts *x) { return x ? x->sh.n_layers * x->sh.n_experts : 0; }
ot_dtype ot_experts_dtype(const ot_experts *x) { return x ? x->sh.dtype : OT_F32; }
ot_experts_stats ot_experts_get_stats(const ot_experts *x) { return x ? x->stats : (ot_experts_stats){0}; }

ot_status ot_experts_set_slots(ot_experts *x, int n) {
  if (!x) return ot_fail(OT_ERR_INVALID_ARG, "ot_experts_set_slots: NULL experts");
  const int all = x->sh.n_layers * x->sh.n_experts;
  n = n < 1 ? 1 : n > all ? all : n;
  if (x->window && n == x->n_slots) return OT_OK;
  ot_slot *slot = calloc((size_t)n, sizeof *slot);
  size_t bytes;
  if (!slot || ot_mul_size(x->slot_bytes, (size_t)n, &bytes)) {
    free(slot);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_experts_set_slots: no host memory");
  }
  for (int i = 0; i < n; i++) slot[i].layer = -1;
  /* pageable host memory the kernels never touch (nothing is ever read
   * from or written to a cache's home), so it costs address space only */
  const int64_t shape[1] = {(int64_t)(bytes / 4)};
  ot_tensor *w;
  ot_status s = ot_tensor_create_in(x->ctx, "expert_window", OT_I32, 1, shape, OT_MEM_HOST, &w);
  if (s != OT_OK) {
    free(slot);
    return ot_fail_context(s, "the expert window of %d experts (%zu bytes)", n, bytes);
  }
  ot_tensor_destroy(x->window);
  free(x->slot);
  x->window = w;
  x->slot = slot;
  x->n_slots = n;
  x->epoch = 0;
  return OT_OK;
}

int64_t ot_experts_work_elems(const ot_experts *x, int64_t T) {
  return x ? T * (2 * x->sh.hidden + 2 * x->sh.intermediate + 2 * x->sh.top_k) : 0;
}

void ot_experts_route(const float *logits, int n, int top_k, int normalize, int *choice, float *weight) {
  float mx = -INFINITY, sum = 0.0f, p[OT_MOE_MAX_EXPERTS];
  for (int i = 0; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
  for (int i = 0; i < n; i++) sum += p[i] = expf(logits[i] - mx);
  for (int i = 0; i < n; i++) p[i] /= sum;
  float chosen = 0.0f;
  for (int k = 0; k < top_k; k++) { /* selection: n is small */
    int best = -1;
    for (int i = 0; i < n; i++) {
      int taken = 0;
      for (int j = 0; j < k; j++) taken |= choice[j] == i;
      if (!taken && (best < 0 || p[i] > p[best])) best = i;
    }
    choice[k] = best;
    weight[k] = p[best];
    chosen += p[best];
  }
  if (normalize)
    for (int k = 0; k < top_k; k++) weight[k] /= chosen;
}
