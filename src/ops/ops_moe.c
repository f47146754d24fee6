/* ops_moe.c — the mixture-of-experts op (experts.h) and the gated add of a
 * shared expert.
 *
 * One run of the op for T tokens of one layer:
 *   1. the router's logits come to the host (T x experts floats) and each
 *      token is routed there (the choice decides what crosses the bus, so
 *      the host needs it anyway);
 *   2. the experts used, in index order; each one not in the window is
 *      filled into the least recently used slot that no later expert of
 *      this run holds (failing that, the one needed last), and the next
 *      expert's fill is issued before this one computes, so the bus works
 *      while the GPU does;
 *   3. every expert's token ids and weights go to the device in one copy;
 *   4. per expert: its tokens' rows gathered (skipped when it has them
 *      all, as in decode), y = (silu(x Wg^T) * x Wu^T) Wd^T, and
 *      h[token] += weight * y row by row.
 * The sum runs in expert order whatever the window held, so results do not
 * depend on the budget. */
#include <stdlib.h>
#include <string.h>

#include "memory/copy.h"
#include "ops/moe_impl.h"

enum { IN_X, IN_LOGITS, IN_WINDOW, IN_H };     /* e->in[] */
enum { OUT_WINDOW, OUT_H, OUT_WORK };          /* e->out[] */

typedef struct moe_params {
  ot_experts *x;
  int layer;
} moe_params;

/* The run's host scratch: logits [T, E], choice and weight [T, k], and the
 * ids and weights of every expert used, expert after expert ([n] ids then
 * [n] weights each, 2 T k words at most), copied to the device as one
 * before the first expert computes: a copy per expert put a synchronous
 * host-to-device copy at every expert boundary, measured on the H200 to
 * stall the next expert's fill by 0.35 ms (7 % of a decode step). */
typedef struct moe_host {
  float *logits, *weight;
  int *choice;
  int32_t *words;
} moe_host;

static ot_status host_scratch(ot_experts *x, int64_t T, moe_host *h) {
  const int64_t E = x->sh.n_experts, K = x->sh.top_k;
  if (T > x->cap_T) {
    void *p = realloc(x->host, (size_t)T * (size_t)(E + 4 * K) * 4);
    if (!p) return ot_fail(OT_ERR_OUT_OF_MEMORY, "moe: no host memory for the routing of %lld tokens", (long long)T);
    x->host = p;
    x->cap_T = T;
  }
  h->logits = x->host;
  h->weight = h->logits + T * E;
  h->choice = (int *)(h->weight + T * K);
  h->words = (int32_t *)(h->choice + T * K);
  return OT_OK;
}

static ot_tensor *expert_w(const ot_experts *x, int layer, int e, int k) {
  return x->w[((size_t)layer * (size_t)x->sh.n_experts + (size_t)e) * 3 + (size_t)k];
}

static int find_slot(const ot_experts *x, int layer, int e) {
  for (int i = 0; i < x->n_slots; i++)
    if (x->slot[i].layer == layer && x->slot[i].expert == e) return i;
  return -1;
}

/* The slot to fill with used[i]: the least recently used one that holds no
 * expert of used[i..]; failing that, the one holding the expert needed
 * last (it will be filled again when its turn comes). */
static int victim(const ot_experts *x, int layer, const int *used, int n_used, int i) {
  int best = -1, last = -1, last_at = -1;
  for (int s = 0; s < x->n_slots; s++) {
    int at = -1;
    for (int j = i; j < n_used && x->slot[s].layer == layer; j++)
      if (x->slot[s].expert == used[j]) at = j;
    if (at < 0) {
      if (best < 0 || x->slot[s].used < x->slot[best].used) best = s;
    } else if (at > i && at > last_at) {
      last = s;
      last_at = at;
    }
  }
  return best >= 0 ? best : last;
}

static ot_status fill(const ot_op_exec *e, ot_experts *x, int layer, int ex, int s, uint64_t *ticket) {
  ot_slot *sl = &x->slot[s];
  sl->layer = -1; /* until every part is issued */
  for (int k = 0; k < 3; k++) {
    uint64_t t;
    ot_tensor *w = expert_w(x, layer, ex, k);
    if (!w) return ot_fail(OT_ERR_STATE, "moe: expert %d of layer %d was never set (ot_experts_set)", ex, layer);
    OT_TRY(ot_op_fill(e, IN_WINDOW, (size_t)s * x->slot_bytes + x->part_off[k], w, &sl->where[k], &t));
    if (t) *ticket = t; /* FIFO: the last part's ticket covers all three */
    x->stats.fill_bytes += ot_tensor_nbytes(w);
  }
  sl->layer = layer;
  sl->expert = ex;
  x->stats.fills++;
  return OT_OK;
}

/* Makes sure used[i] has a slot (filling it if not); its ticket in *ticket. */
static ot_status ensure(const ot_op_exec *e, ot_experts *x, int layer, const int *used, int n_used, int i,
                        uint64_t *ticket) {
  if (find_slot(x, layer, used[i]) >= 0) {
    x->stats.hits++;
    return OT_OK;
  }
  const int s = victim(x, layer, used, n_used, i);
  if (s < 0) return ot_fail(OT_ERR_STATE, "moe: no slot of the expert window is free (a bug)");
  return fill(e, x, layer, used[i], s, ticket);
}

/* The device copy of the routing words (after the four row buffers of work). */
static int32_t *device_words(const ot_op_exec *e, const ot_experts *x, int64_t T) {
  return (int32_t *)((float *)e->out[OUT_WORK] + T * (2 * x->sh.hidden + 2 * x->sh.intermediate));
}

/* One expert over its n tokens, whose ids and weights are the device words at `words`. */
static ot_status compute(const ot_op_exec *e, ot_experts *x, const ot_slot *sl, int64_t T, int64_t n,
                         int32_t *words) {
  const int64_t D = x->sh.hidden, F = x->sh.intermediate;
  const ot_dtype wt = x->sh.dtype;
  float *work = e->out[OUT_WORK];
  float *xe = work, *g = xe + T * D, *u = g + T * F, *ye = u + T * F;
  ot_kview ids = ot_kview_1d(words, OT_I32, n), wts = ot_kview_1d(words + n, OT_F32, n);
  ot_kview xin = ot_ops_view(e->in_t[IN_X], e->in[IN_X]);
  if (n < T) { /* gather the expert's rows */
    ot_kview rows = ot_kview_2d(xe, OT_F32, n, D);
    OT_TRY(ot_k_embedding(e->device, rows, xin, ids));
    xin = rows;
  }
  ot_kview gv = ot_kview_2d(g, OT_F32, n, F), uv = ot_kview_2d(u, OT_F32, n, F), yv = ot_kview_2d(ye, OT_F32, n, D);
  OT_TRY(ot_k_matmul_swiglu(e->device, gv, uv, xin, ot_kview_2d(sl->where[0], wt, F, D),
                            ot_kview_2d(sl->where[1], wt, F, D)));
  OT_TRY(ot_k_matmul(e->device, yv, gv, ot_kview_2d(sl->where[2], wt, D, F), 1, 0));
  return ot_k_scatter_add_rows(e->device, ot_ops_view(e->out_t[OUT_H], e->out[OUT_H]), yv, ids, wts);
}

static ot_status run_moe(const ot_op_exec *e) {
  const moe_params *pr = e->params;
  ot_experts *x = pr->x;
  const int layer = pr->layer, E = x->sh.n_experts, K = x->sh.top_k;
  const int64_t T = ot_tensor_dim(e->in_t[IN_X], 0);
  moe_host hs;
  OT_TRY(host_scratch(x, T, &hs));
  char why[256];
  if (ot_mem_copy_raw(hs.logits, OT_DEVICE_HOST, e->in[IN_LOGITS], e->device, (size_t)(T * E) * 4, why, sizeof why))
    return ot_fail(OT_ERR_DEVICE, "moe: copying the router's logits from device %d: %s", e->device, why);
  int count[OT_MOE_MAX_EXPERTS] = {0}, used[OT_MOE_MAX_EXPERTS], n_used = 0;
  for (int64_t t = 0; t < T; t++) {
    ot_experts_route(hs.logits + t * E, E, K, x->sh.normalize, hs.choice + t * K, hs.weight + t * K);
    for (int k = 0; k < K; k++) count[hs.choice[t * K + k]]++;
  }
  for (int i = 0; i < E; i++)
    if (count[i]) used[n_used++] = i;
  /* the tags hold while the window's block stays where it was (program.h) */
  const uint64_t epoch = ot_op_cache_epoch(e, IN_WINDOW);
  if (epoch != x->epoch || e->in[IN_WINDOW] != x->addr) {
    for (int s = 0; s < x->n_slots; s++) x->slot[s].layer = -1;
    x->epoch = epoch;
    x->addr = e->in[IN_WINDOW];
  }
  x->stats.routed += (uint64_t)(T * K);
  /* every expert's tokens, then their weights, expert after expert */
  int64_t at[OT_MOE_MAX_EXPERTS + 1], n_words = 0;
  for (int i = 0; i < n_used; i++) {
    int64_t n = 0;
    int32_t *w = hs.words + n_words;
    at[i] = n_words;
    for (int64_t t = 0; t < T; t++)
      for (int k = 0; k < K; k++)
        if (hs.choice[t * K + k] == used[i]) w[n++] = (int32_t)t;
    n = 0;
    for (int64_t t = 0; t < T; t++)
      for (int k = 0; k < K; k++)
        if (hs.choice[t * K + k] == used[i]) memcpy(&w[count[used[i]] + n++], &hs.weight[t * K + k], 4);
    n_words += 2 * n;
  }
  int32_t *dwords = device_words(e, x, T);
  if (ot_mem_copy_raw(dwords, e->device, hs.words, OT_DEVICE_HOST, (size_t)n_words * 4, why, sizeof why))
    return ot_fail(OT_ERR_DEVICE, "moe: copying the routing of %lld tokens to device %d: %s", (long long)T, e->device,
                   why);
  uint64_t ticket[OT_MOE_MAX_EXPERTS] = {0};
  unsigned char ready[OT_MOE_MAX_EXPERTS] = {0};
  for (int i = 0; i < n_used; i++) {
    if (!ready[i]) OT_TRY(ensure(e, x, layer, used, n_used, i, &ticket[i]));
    ready[i] = 1;
    const int s = find_slot(x, layer, used[i]);
    x->slot[s].used = ++x->clock;
    if (i + 1 < n_used && x->n_slots > 1) { /* the next expert crosses while this one computes */
      OT_TRY(ensure(e, x, layer, used, n_used, i + 1, &ticket[i + 1]));
      ready[i + 1] = 1;
    }
    OT_TRY(ot_op_fill_wait(e, ticket[i]));
    OT_TRY(compute(e, x, &x->slot[s], T, count[used[i]], dwords + at[i]));
  }
  return OT_OK;
}

ot_status ot_op_moe(ot_program *p, ot_tensor *h, ot_tensor *xin, ot_tensor *logits, ot_experts *x, int layer,
                    ot_tensor *work) {
  if (!p || !h || !xin || !logits || !x || !work) return ot_fail(OT_ERR_INVALID_ARG, "moe: NULL argument");
  if (!x->window) return ot_fail(OT_ERR_STATE, "moe: the experts have no window yet (ot_experts_set_slots)");
  if (layer < 0 || layer >= x->sh.n_layers)
    return ot_fail(OT_ERR_INVALID_ARG, "moe: layer %d of %d", layer, x->sh.n_layers);
  const int64_t T = ot_tensor_dim(xin, 0), D = x->sh.hidden;
  OT_TRY(ot_ops_same_shape("moe", h, xin));
  OT_TRY(ot_ops_check_f32("moe", h));
  OT_TRY(ot_ops_check_f32("moe", xin));
  OT_TRY(ot_ops_check_f32("moe", logits));
  OT_TRY(ot_ops_check_f32("moe", work));
  if (ot_tensor_ndim(xin) != 2 || ot_tensor_dim(xin, 1) != D || ot_tensor_ndim(logits) != 2 ||
      ot_tensor_dim(logits, 0) != T || ot_tensor_dim(logits, 1) != x->sh.n_experts || !ot_tensor_is_contiguous(logits) ||
      !ot_tensor_is_contiguous(work) || (int64_t)ot_tensor_numel(work) < ot_experts_work_elems(x, T))
    return ot_fail(OT_ERR_SHAPE, "moe: '%s' must be [T, %lld], '%s' [T, %d] and '%s' %lld contiguous f32 elements",
                   ot_tensor_name(xin), (long long)D, ot_tensor_name(logits), x->sh.n_experts, ot_tensor_name(work),
                   (long long)ot_experts_work_elems(x, T));
  OT_TRY(ot_program_mark_cache(p, x->window));
  ot_ops_args a = {0};
  ot_ops_in(&a, xin);
  ot_ops_in(&a, logits);
  ot_ops_acc(&a, x->window);
  ot_ops_acc(&a, h);
  ot_ops_out(&a, work);
  const moe_params pr = {x, layer};
  const double flops = 6.0 * (double)T * x->sh.top_k * (double)D * (double)x->sh.intermediate;
  /* named for the layer's first expert: the trace and the plan show which layer */
  ot_tensor *named = expert_w(x, layer, 0, 0);
  return ot_ops_record(p, "moe", named ? named : h, run_moe, &a, &pr, sizeof pr, flops);
}

static ot_status run_gate_add(const ot_op_exec *e) {
  return ot_k_sigmoid_gate_add(e->device, ot_ops_view(e->out_t[0], e->out[0]), ot_ops_view(e->in_t[1], e->in[1]),
                               ot_ops_view(e->in_t[2], e->in[2]));
}

ot_status ot_op_sigmoid_gate_add(ot_program *p, ot_tensor *h, ot_tensor *s, ot_tensor *g) {
  if (!p || !h || !s || !g) return ot_fail(OT_ERR_INVALID_ARG, "sigmoid_gate_add: NULL argument");
  OT_TRY(ot_ops_same_shape("sigmoid_gate_add", h, s));
  ot_ops_args a = {0};
  ot_ops_acc(&a, h); /* in[0], out[0] */
  ot_ops_in(&a, s);
  ot_ops_in(&a, g);
  return ot_ops_record(p, "sigmoid_gate_add", h, run_gate_add, &a, NULL, 0, 2.0 * (double)ot_tensor_numel(h));
}
