/* pipeline.c — a plan over several devices: each stage's ops recorded again
 * as a sub-program (the same tensors, run functions, params and scalars),
 * marked so that values written in one stage and read in another pass
 * through their homes, and planned on its own device by the single-device
 * planner (sched.h, "Several devices"). */
#include <stdlib.h>
#include <string.h>

#include "memory/context_impl.h"
#include "core/error.h"
#include "memory/device.h"
#include "memory/tensor_impl.h"
#include "omptensor/memory.h"
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
 * stays a weight: every device using it keeps its own copy. Persistent
 * state of this stage alone that the program does not mark an output (a
 * layer's KV cache, a trained layer's AdamW moments) is not marked output
 * here: being persistent gives it its write-back, which the stage's
 * defer_writeback may defer until ot_sched_sync (no other stage reads its
 * home); an output is written home after every run (planner.c). */
static ot_status mark_storage(ot_program *sub, const ot_program *p, const unsigned char *u, int n, int k, int s,
                              const ot_tensor *t) {
  const unsigned role = p->st[s].role;
  if (role & OT_ROLE_CACHE) return ot_program_mark_cache(sub, t);
  int in, out;
  crossing(p, u, n, k, s, &in, &out);
  const int own_state = (role & OT_ROLE_PERSIST) && !(role & OT_ROLE_OUTPUT) && !elsewhere(u, n, s, k, USE_ANY);
  if (in) OT_TRY(ot_program_mark_input(sub, t));
  if (out && !own_state) OT_TRY(ot_program_mark_output(sub, t));
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
    if (s == OT_OK && o->emit) s = ot_program_set_batch(sub, sub->n_ops - 1, o->emit, o->launch, o->insn_bytes);
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

/* ---- device-to-device crossings (ot_stage_copies, sched.h) ---- */

/* Only where the executor copies between homes and arenas (map, or usm on
 * an emulated device) can a home be a mailbox on another device. */
static int copies_there(const ot_ctx *ctx, int dev) { return ot_exec_mv_kind(ctx, dev) == OT_MV_COPY; }

static ot_stage_home *home_for(ot_stage *st, int s) {
  for (int i = 0; i < st->n_homes; i++)
    if (st->homes[i].st == s) return &st->homes[i];
  return NULL;
}

/* The stage whose value of s stage k reads: the last one before k that
 * writes it out (-1: none, the program's own). */
static int writer_before(const ot_program *p, const unsigned char *u, int n, int k, int s) {
  for (int q = k - 1; q >= 0; q--) {
    int in, out;
    crossing(p, u, n, q, s, &in, &out);
    if (out) return q;
  }
  return -1;
}

/* The one stage that reads stage q's value of s (those after q that read
 * it first, up to the next that writes it out), or -1 if not exactly one. */
static int only_reader(const ot_program *p, const unsigned char *u, int n, int q, int s) {
  int found = -1;
  for (int j = q + 1; j < n; j++) {
    int in, out;
    crossing(p, u, n, j, s, &in, &out);
    if (in) {
      if (found >= 0) return -1;
      found = j;
    }
    if (out) break;
  }
  return found;
}

/* Marks the values that reach stage k device to device, and lays out its
 * mailbox slot: an activation stage k reads (in, not out here) that the last
 * stage before it to write it out, q, wrote (out, not in there), no stage but
 * k reads that value, and the program neither fills it nor wants it home;
 * between two devices that reach each other, neither stage running host ops.
 * Buffers a model reuses in every layer (a scratch "gate") qualify: each
 * stage's value of them is its own. Stage q is planned already (q < k). */
static void choose_peers(ot_plan *plan, const ot_sched_opts *o, const unsigned char *u, int n, int k) {
  const ot_program *p = plan->prog;
  ot_stage *st = &plan->stages[k];
  const int dev = plan->ctx->dev[st->dev_index];
  const unsigned stay = OT_ROLE_INPUT | OT_ROLE_OUTPUT | OT_ROLE_NEEDS_HOME | OT_ROLE_WRITEBACK | OT_ROLE_PERSIST |
                        OT_ROLE_CACHE;
  st->n_mail = 0;
  st->mail_slot_bytes = 0;
  if (!plan->micro || o->stage_copies == OT_STAGE_COPY_HOST || !copies_there(plan->ctx, dev)) return;
  for (int i = 0; i < st->n_homes; i++) {
    ot_stage_home *h = &st->homes[i];
    if (!h->in || h->out || (p->st[h->st].role & stay)) continue;
    const int q = writer_before(p, u, n, k, h->st);
    if (q < 0 || only_reader(p, u, n, q, h->st) != k) continue;
    ot_stage *from = &plan->stages[q];
    ot_stage_home *g = home_for(from, h->st);
    const int qdev = plan->ctx->dev[from->dev_index];
    if (!g || g->in || !g->out || from->plan->n_host_ops || !ot_dev_peer_access(qdev, dev)) continue;
    g->peer = h->peer = 1;
    g->mail_stage = h->mail_stage = k;
    g->mail_off = h->mail_off = st->mail_slot_bytes;
    st->mail_slot_bytes += p->st[h->st].block;
    st->n_mail++;
  }
  st->mail_slots = o->micro_batches;
}

/* Stage k goes back to the host path (no room for its mailboxes, or it runs
 * host ops): its values and their writers' homes unmarked. */
static void drop_peers(ot_plan *plan, int k) {
  for (int q = 0; q <= k; q++)
    for (int i = 0; i < plan->stages[q].n_homes; i++) {
      ot_stage_home *h = &plan->stages[q].homes[i];
      if (h->peer && h->mail_stage == k) h->peer = 0;
    }
  plan->stages[k].n_mail = 0;
  plan->stages[k].mail_slot_bytes = 0;
}

/* Stage k's plan: under its budget less its mailboxes where it has any.
 * Under AUTO a stage whose budget cannot also hold them (or that turns out
 * to run host ops) is planned again without them, on the host path; PEER
 * refuses instead, saying why. */
static ot_status plan_stage(ot_plan *plan, const ot_sched_opts *o, int k, uint64_t cap) {
  ot_stage *st = &plan->stages[k];
  ot_sched_opts so = *o;
  so.device_index = st->dev_index;
  so.n_stages = 1;
  /* host_ops flags the program's ops; the stage's sub-program numbers its
   * own from 0 (issue 43: the last stage's AdamW ran on the device under
   * the CPU optimizer, and the first stage's ops #k on the host) */
  so.host_ops = o->host_ops ? o->host_ops + st->first_op : NULL;
  const uint64_t mail = (uint64_t)st->mail_slot_bytes * (uint64_t)st->mail_slots;
  const int dev = plan->ctx->dev[st->dev_index];
  if (st->n_mail) {
    ot_status s = mail < cap ? OT_OK : OT_ERR_BUDGET;
    if (s == OT_OK) {
      so.budget_bytes = cap - mail;
      s = ot_sched_plan(plan->ctx, st->sub, &so, &st->plan);
    }
    if (s == OT_OK && !st->plan->n_host_ops) {
      st->plan->reserved = mail;
      return OT_OK;
    }
    if (o->stage_copies == OT_STAGE_COPY_PEER)
      return s != OT_OK ? ot_fail(OT_ERR_UNSUPPORTED,
                                  "stage copies peer: device %d's budget of %llu bytes has no room for the mailboxes "
                                  "of its %d values from the stage before (%llu bytes: %d micro-batches x %zu); give "
                                  "the device more memory, fewer micro-batches, or stage copies auto or host",
                                  dev, (unsigned long long)cap, st->n_mail, (unsigned long long)mail, st->mail_slots,
                                  st->mail_slot_bytes)
                        : ot_fail(OT_ERR_UNSUPPORTED,
                                  "stage copies peer: the stage on device %d runs ops on the host's cores (hybrid "
                                  "compute), which read homes a device-to-device copy would skip; use stage "
                                  "copies auto or host, or compute gpu", dev);
    ot_plan_destroy(st->plan);
    st->plan = NULL;
    drop_peers(plan, k);
    so.budget_bytes = o->budget_bytes;
  }
  return ot_sched_plan(plan->ctx, st->sub, &so, &st->plan);
}

/* PEER: every value that would cross device to device must. */
static ot_status peers_all_possible(const ot_plan *plan, const ot_sched_opts *o, int n) {
  for (int k = 1; k < n; k++) {
    const int a = plan->ctx->dev[o->device_index + k - 1], b = plan->ctx->dev[o->device_index + k];
    if (!copies_there(plan->ctx, a) || !copies_there(plan->ctx, b))
      return ot_fail(OT_ERR_UNSUPPORTED, "stage copies peer: the %s backend does not copy between homes and device "
                     "memory on devices %d and %d; use the map backend, or stage copies auto or host",
                     ot_backend_name(plan->ctx->backend), a, b);
    if (!ot_dev_peer_access(a, b))
      return ot_fail(OT_ERR_UNSUPPORTED, "stage copies peer: devices %d and %d cannot copy to each other directly "
                     "(no peer access: no NVLink or shared PCIe switch, or a GPU kind this build cannot ask); use "
                     "stage copies auto (host staging there) or host", a, b);
  }
  return OT_OK;
}

static ot_status plan_stages(ot_plan *plan, const ot_sched_opts *o, int n, const int *cut, const uint64_t *weight,
                             const size_t *cap) {
  const ot_program *p = plan->prog;
  unsigned char *u = stage_uses(p, n, cut);
  if (!u) return ot_fail(OT_ERR_OUT_OF_MEMORY, "pipeline: no host memory");
  ot_status s = OT_OK;
  if (plan->micro && o->stage_copies == OT_STAGE_COPY_PEER) s = peers_all_possible(plan, o, n);
  for (int k = 0; s == OT_OK && k < n; k++) {
    ot_stage *st = &plan->stages[k];
    st->first_op = cut[k];
    st->n_ops = cut[k + 1] - cut[k];
    st->dev_index = o->device_index + k;
    st->weight_bytes = weight[k];
    plan->n_stages = k + 1; /* what ot_pipeline_free must release (st->sub too, once made) */
    s = build_sub(plan->ctx, p, u, n, k, cut, plan->micro, st);
    if (s == OT_OK) choose_peers(plan, o, u, n, k);
    if (s == OT_OK) s = plan_stage(plan, o, k, cap[k]);
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
  if (s == OT_OK) s = plan_stages(plan, o, n, cut, weight, cap);
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
    ot_mem_free(OT_MEM_DEVICE, plan->ctx->dev[st->dev_index], st->mail);
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
