/* pipeline.c — a plan over several devices: each stage's ops recorded again
 * as a sub-program (the same tensors, run functions, params and scalars),
 * marked so that values written in one stage and read in another pass
 * through their homes, and planned on its own device by the single-device
 * planner (sched.h, "Several devices"). */
#include <stdlib.h>
#include <string.h>

#include "memory/context_impl.h"
#include "core/error.h"
#include "memory/tensor_impl.h"
#include "sched/executor.h"
#include "sched/pipeline.h"

/* How stage k accesses storage s (bits of use[s * n + k]). */
enum { USE_ANY = 1, USE_WRITES = 2, USE_READS_FIRST = 4 };

static unsigned char *stage_uses(const ot_program *p, int n, const int *cut) {
  unsigned char *u = calloc((size_t)(p->n_st ? p->n_st : 1) * (size_t)n, 1);
  if (!u) return NULL;
  for (int k = 0; k < n; k++)
    for (int i = cut[k]; i < cut[k + 1]; i++)
      for (int a = 0; a < p->ops[i].n_acc; a++) {
        ot_access acc = p->ops[i].acc[a];
        unsigned char *f = &u[(size_t)acc.st * n + k];
        if (!*f && acc.read) *f |= USE_READS_FIRST;
        *f |= USE_ANY | (acc.write ? USE_WRITES : 0);
      }
  return u;
}

/* Any stage other than k with flag `bit` on storage s. */
static int elsewhere(const unsigned char *u, int n, int s, int k, unsigned bit) {
  for (int q = 0; q < n; q++)
    if (q != k && (u[(size_t)s * n + q] & bit)) return 1;
  return 0;
}

/* How storage s crosses stage k (*in, *out), as mark_storage marks it:
 *   in   an input of the program, or read before written here while
 *        another stage writes it (an activation passed in, or state
 *        another stage updates): uploaded from home, never kept;
 *   out  written here, and its home must hold it (the program's result or
 *        state, or another stage reads it before writing).
 * A cache crosses nothing (each device its own, like a weight). */
static void crossing(const ot_program *p, const unsigned char *u, int n, int k, int s, int *in, int *out) {
  const unsigned f = u[(size_t)s * n + k], role = p->st[s].role;
  *in = *out = 0;
  if (role & OT_ROLE_CACHE) return;
  *in = (role & OT_ROLE_INPUT) || ((f & USE_READS_FIRST) && elsewhere(u, n, s, k, USE_WRITES));
  *out = (f & USE_WRITES) && ((role & OT_ROLE_WRITEBACK) || elsewhere(u, n, s, k, USE_READS_FIRST));
}

/* Marks storage s (view t) in stage k's sub-program: input and output as
 * crossing() says, persistent as in the program. A storage no stage writes
 * stays a weight: every device using it keeps its own copy. */
static ot_status mark_storage(ot_program *sub, const ot_program *p, const unsigned char *u, int n, int k, int s,
                              const ot_tensor *t) {
  const unsigned role = p->st[s].role;
  if (role & OT_ROLE_CACHE) return ot_program_mark_cache(sub, t);
  int in, out;
  crossing(p, u, n, k, s, &in, &out);
  if (in) OT_TRY(ot_program_mark_input(sub, t));
  if (out) OT_TRY(ot_program_mark_output(sub, t));
  if (role & OT_ROLE_PERSIST) OT_TRY(ot_program_mark_persistent(sub, t));
  return OT_OK;
}

/* Micro-batches: the stage's private home of storage s, made at its first
 * use, and a view of it like t for the sub-program's op; t itself where s
 * does not cross the stage. Persistent state is the stage's own when no
 * other stage uses it (a layer's KV cache); one that other stages use too
 * is refused: with different micro-batches in different stages its value
 * would depend on the order they got there. So is a cache that ops of
 * several stages fill: the op's record of its contents is one (ot_experts),
 * which one stage after another re-fills safely but two at once would race
 * on. */
static ot_status private_view(ot_ctx *ctx, const ot_program *p, ot_stage *st, const unsigned char *u, int n, int k,
                              int s, ot_tensor *t, ot_tensor **view) {
  int in, out;
  crossing(p, u, n, k, s, &in, &out);
  *view = t;
  if ((p->st[s].role & OT_ROLE_CACHE) && elsewhere(u, n, s, k, USE_ANY))
    return ot_fail(OT_ERR_UNSUPPORTED, "pipeline: cache '%s' is filled by ops of more than one stage, which share "
                   "one record of what it holds (a mixture of experts' window); micro-batches (micro_batches > 1) "
                   "would run those ops at once on different devices: run without micro-batches", p->st[s].name);
  if (!in && !out) return OT_OK;
  if ((p->st[s].role & OT_ROLE_PERSIST) && !elsewhere(u, n, s, k, USE_ANY))
    return OT_OK; /* state of this stage alone (a layer's KV cache): only its thread touches it */
  if (p->st[s].role & OT_ROLE_PERSIST)
    return ot_fail(OT_ERR_UNSUPPORTED, "pipeline: persistent tensor '%s' is used by more than one stage; micro-batches "
                   "(micro_batches > 1) need each stage's state to be its own: run without micro-batches",
                   p->st[s].name);
  ot_stage_home *h = NULL;
  for (int i = 0; i < st->n_homes && !h; i++)
    if (st->homes[i].st == s) h = &st->homes[i];
  if (!h) {
    ot_stage_home *g = realloc(st->homes, (size_t)(st->n_homes + 1) * sizeof *g);
    if (!g) return ot_fail(OT_ERR_OUT_OF_MEMORY, "pipeline: no host memory");
    st->homes = g;
    h = &g[st->n_homes];
    memset(h, 0, sizeof *h);
    const int64_t bytes = (int64_t)p->st[s].bytes;
    OT_TRY(ot_tensor_create(ctx, p->st[s].name, OT_I8, 1, &bytes, &h->mine));
    h->st = s;
    h->in = (unsigned char)in;
    h->out = (unsigned char)out;
    st->n_homes++;
  }
  ot_tensor **g = realloc(st->views, (size_t)(st->n_views + 1) * sizeof *g);
  if (!g) return ot_fail(OT_ERR_OUT_OF_MEMORY, "pipeline: no host memory");
  st->views = g;
  OT_TRY(ot_tensor_view_on(t, h->mine->st, &g[st->n_views]));
  *view = g[st->n_views++];
  return OT_OK;
}

static ot_status build_sub(ot_ctx *ctx, const ot_program *p, const unsigned char *u, int n, int k, const int *cut,
                           int micro, ot_stage *stage) {
  ot_program *sub;
  OT_TRY(ot_program_create(ctx, &sub));
  stage->sub = sub; /* freed with the stage (ot_pipeline_free) */
  ot_status s = OT_OK;
  for (int i = 0; s == OT_OK && i < p->n_scalars; i++) {
    int slot;
    s = ot_program_scalar_create(sub, p->scalar_names[i], &slot); /* same slots, in order */
  }
  enum { MAX_T = 64 };
  ot_tensor *tv[MAX_T];
  for (int i = cut[k]; s == OT_OK && i < cut[k + 1]; i++) {
    const ot_op *o = &p->ops[i];
    ot_tensor **t = o->t;
    if (micro) {
      if (o->n_in + o->n_out > MAX_T)
        return ot_fail(OT_ERR_UNSUPPORTED, "pipeline: op #%d '%s' has %d tensors; micro-batches take ops of at most %d",
                       i, o->name, o->n_in + o->n_out, MAX_T);
      for (int x = 0; s == OT_OK && x < o->n_in + o->n_out; x++)
        s = private_view(ctx, p, stage, u, n, k, o->ts[x], o->t[x], &tv[x]);
      t = tv;
    }
    ot_op_desc d = {o->name, o->run, o->n_in, t, o->n_out, t + o->n_in, o->params, o->params_bytes, o->flops, o->bytes};
    if (s == OT_OK) s = ot_program_add_op(sub, &d);
  }
  /* every storage of the stage once, through one of its views (the private
   * one where there is one: the sub-program's own op tensors) */
  unsigned char *done = calloc((size_t)(p->n_st ? p->n_st : 1), 1);
  if (s == OT_OK && !done) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "pipeline: no host memory");
  for (int i = cut[k], j = 0; s == OT_OK && i < cut[k + 1]; i++, j++)
    for (int x = 0; s == OT_OK && x < p->ops[i].n_in + p->ops[i].n_out; x++) {
      int st = p->ops[i].ts[x];
      if (done[st]) continue;
      done[st] = 1;
      s = mark_storage(sub, p, u, n, k, st, sub->ops[j].t[x]);
    }
  free(done);
  return s;
}

static ot_status plan_stages(ot_plan *plan, const ot_sched_opts *o, int n, const int *cut, const uint64_t *weight) {
  const ot_program *p = plan->prog;
  unsigned char *u = stage_uses(p, n, cut);
  if (!u) return ot_fail(OT_ERR_OUT_OF_MEMORY, "pipeline: no host memory");
  ot_status s = OT_OK;
  for (int k = 0; s == OT_OK && k < n; k++) {
    ot_stage *st = &plan->stages[k];
    st->first_op = cut[k];
    st->n_ops = cut[k + 1] - cut[k];
    st->dev_index = o->device_index + k;
    st->weight_bytes = weight[k];
    plan->n_stages = k + 1; /* what ot_pipeline_free must release (st->sub too, once made) */
    s = build_sub(plan->ctx, p, u, n, k, cut, plan->micro, st);
    ot_sched_opts so = *o;
    so.device_index = st->dev_index;
    so.n_stages = 1;
    if (s == OT_OK) s = ot_sched_plan(plan->ctx, st->sub, &so, &st->plan);
    if (s != OT_OK)
      s = ot_fail_context(s, "pipeline stage %d of %d (ops #%d '%s' .. #%d '%s', device %d)", k, n, cut[k],
                          p->ops[cut[k]].name, cut[k + 1] - 1, p->ops[cut[k + 1] - 1].name,
                          plan->ctx->dev[st->dev_index]);
  }
  free(u);
  return s;
}

/* The packets' layout: every storage some stage copies in or out, once,
 * aligned; then the program's scalars. */
static ot_status packet_layout(ot_plan *plan) {
  const ot_program *p = plan->prog;
  if (!(plan->pk_off = malloc((size_t)(p->n_st ? p->n_st : 1) * sizeof *plan->pk_off)))
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "pipeline: no host memory");
  for (int i = 0; i < p->n_st; i++) plan->pk_off[i] = SIZE_MAX;
  size_t at = 0;
  for (int k = 0; k < plan->n_stages; k++)
    for (int i = 0; i < plan->stages[k].n_homes; i++) {
      const int st = plan->stages[k].homes[i].st;
      if (plan->pk_off[st] != SIZE_MAX) continue;
      plan->pk_off[st] = at;
      at += (p->st[st].bytes + 63) & ~(size_t)63;
    }
  plan->pk_bytes = at + (size_t)p->n_scalars * sizeof *p->scalars;
  return OT_OK;
}

ot_status ot_pipeline_plan(ot_plan *plan, const ot_sched_opts *o, int n_stages) {
  const ot_program *p = plan->prog;
  int n = n_stages < p->n_ops ? n_stages : p->n_ops; /* every stage gets an op */
  size_t *cap = calloc((size_t)n, sizeof *cap);
  int *cut = calloc((size_t)n + 1, sizeof *cut);
  uint64_t *weight = calloc((size_t)n, sizeof *weight);
  plan->stages = calloc((size_t)n, sizeof *plan->stages);
  plan->micro = o->micro_batches > 1 && n > 1;
  ot_status s = OT_OK;
  if (!cap || !cut || !weight || !plan->stages) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "pipeline: no host memory");
  for (int k = 0; s == OT_OK && k < n; k++) {
    uint64_t b = o->budget_bytes ? o->budget_bytes : plan->ctx->budget[o->device_index + k];
    uint64_t c = b & ~(uint64_t)(OT_SCHED_ALIGN - 1);
    cap[k] = c > SIZE_MAX ? SIZE_MAX & ~(size_t)(OT_SCHED_ALIGN - 1) : (size_t)c;
  }
  if (s == OT_OK) s = ot_pipeline_split(p, n, cap, cut, weight);
  if (s == OT_OK) s = plan_stages(plan, o, n, cut, weight);
  if (s == OT_OK && plan->micro) s = packet_layout(plan);
  free(cap);
  free(cut);
  free(weight);
  return s; /* on failure the caller destroys the plan (ot_pipeline_free) */
}

void ot_pipeline_free(ot_plan *plan) {
  for (int k = 0; k < plan->n_stages; k++) {
    ot_stage *st = &plan->stages[k];
    ot_plan_destroy(st->plan); /* before its program */
    ot_program_destroy(st->sub);
    for (int i = 0; i < st->n_views; i++) ot_tensor_destroy(st->views[i]); /* after the program that used them */
    for (int i = 0; i < st->n_homes; i++) ot_tensor_destroy(st->homes[i].mine);
    free(st->views);
    free(st->homes);
  }
  free(plan->stages);
  free(plan->pk_off);
  free(plan->packets);
  plan->stages = NULL;
  plan->pk_off = NULL;
  plan->packets = NULL;
  plan->n_stages = plan->n_packets = 0;
}
