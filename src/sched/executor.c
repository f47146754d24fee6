/* executor.c — ot_sched_run: replays a schedule.
 *
 * Kernels run on the calling thread, synchronously; transfers go to the
 * plan's transfer thread (movement.h) and are waited for only where needed:
 * before op i runs, the executor waits for the uploads of op i's copies and
 * for write-backs still reading any range op i's copies occupy (a block
 * placed for an output may sit where a copy is still being written home).
 * An upload never needs such a wait: the queue is FIFO.
 *
 * Device memory: one range of the plan's extent (the highest arena offset it
 * uses, at most the budget) allocated on the first run with
 * ot_mem_alloc(OT_MEM_DEVICE); copies live at their planned offsets. On the
 * host backend, and for usm on a CUDA GPU, kernels use the homes and the
 * arena is bookkeeping only.
 *
 * usm on a CUDA GPU (OT_MV_PREFETCH): the home is the only copy of a
 * written storage (a prefetch moves its pages), and a read-mostly duplicate
 * of a storage no op writes. So:
 *   - at the first run, remote storages get "preferred location host,
 *     accessed by the device" and the other read-only ones read-mostly,
 *     before any kernel runs; ot_exec_release takes both back (dropping the
 *     duplicates kept between runs) and sends kept written pages home;
 *   - upload and alloc prefetch the pages to the device;
 *   - a write-back is due, not done: managed memory is coherent, so a copy
 *     that stays resident needs none; the pages go home when it is freed;
 *   - free: a read-only copy by dropping the duplicate (no PCIe traffic), a
 *     written one by a prefetch home unless it is dead (then discarded). */
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "memory/context_impl.h"
#include "core/error.h"
#include "core/vec.h"
#include "memory/copy.h"
#include "memory/device.h"
#include "sched/executor.h"
#include "memory/diskfile.h"
#include "sched/disk.h"
#include "sched/movement.h"
#include "sched/trace_impl.h"
#include "sched/verify.h"

typedef struct pending {
  size_t off, block;
  uint64_t ticket;
} pending;

/* Run state, on the stack of ot_sched_run. */
typedef struct run_state {
  ot_plan *plan;
  ot_trace *tr;
  int run, dev_num; /* dev_num: the plan's OpenMP device number */
  ot_mv_kind kind;
  uint64_t used;
  pending *pend;   /* write-backs that may still be reading the arena */
  int n_pend, cap_pend;
  /* ops encoded for one launch (batch.h), not run yet */
  struct {
    ot_op_launch_fn launch;
    size_t insn_bytes;
    unsigned char *insns; /* n_insns * insn_bytes */
    int n_insns, cap_bytes; /* (in bytes: launchers may differ in instruction size) */
    int *ops, n_ops, cap_ops;
    /* write-backs due while the batch was pending, run after it (defer_download) */
    const ot_plan_event **dl;
    int n_dl, cap_dl;
  } b;
} run_state;

ot_mv_kind ot_exec_mv_kind(const ot_ctx *ctx, int dev) {
  if (ctx->backend == OT_BACKEND_HOST || ot_dev_is_host(dev)) return OT_MV_NONE;
  if (ctx->backend == OT_BACKEND_USM && ot_dev_is_gpu(dev)) return OT_MV_PREFETCH;
  return OT_MV_COPY;
}

static ot_mv_kind mv_kind(const ot_plan *plan) { return ot_exec_mv_kind(plan->ctx, plan->dev); }

/* A home that is a mailbox on another device (pipeline_micro.c): copied to
 * and from device to device, where the executor copies at all. */
static int peer_home(const run_state *r, const ot_prog_storage *ps) {
  return ps->st->home_on && r->kind == OT_MV_COPY;
}

/* A lazy storage the plan moves without having given it a home (homes.c
 * decides which need one): a scheduler bug, refused rather than copied
 * through NULL. */
static ot_status no_home(const ot_prog_storage *ps) {
  return ot_fail(OT_ERR_STATE, "executor: '%s' has no host home (a lazy tensor) but the plan moves it (scheduler bug)",
                 ps->name);
}

static int read_only(const ot_prog_storage *ps) { return !(ps->role & OT_ROLE_WRITTEN); }

/* usm on a GPU: the advice of every managed home the plan uses, set (on = 1)
 * before the first run, taken back at release. Taking read-mostly back drops
 * every device duplicate at once, so kept weights leave without traffic. */
static void advise_homes(ot_plan *plan, int on) {
  const ot_program *src = plan->src;
  for (int i = 0; plan->place && i < src->n_st; i++) {
    const ot_prog_storage *ps = &src->st[i];
    if (!plan->place[i] || !read_only(ps)) continue;
    int a = plan->place[i] == OT_PLACE_REMOTE ? (on ? OT_ADVISE_REMOTE : OT_ADVISE_LOCAL)
                                               : (on ? OT_ADVISE_READ_MOSTLY : OT_ADVISE_DROP_DUPLICATES);
    ot_movement_advise(plan->mv, ps->st->home, ps->bytes, a, ps->name);
  }
}

void ot_exec_release(ot_plan *plan) {
  if (plan->mv && plan->xs && mv_kind(plan) == OT_MV_PREFETCH) {
    /* the written copies still on the device go home; the rest is advice */
    for (int i = 0; i < plan->prog->n_st; i++) {
      const ot_prog_storage *ps = &plan->prog->st[i];
      if (plan->xs[i].resident && ps->block && !read_only(ps) && !(ps->role & OT_ROLE_CACHE))
        ot_movement_download(plan->mv, ps->st->home, ps->st->home, ps->bytes, ps->name, NULL, NULL, (size_t)-1);
      plan->xs[i].resident = 0;
    }
    advise_homes(plan, 0);
  }
  if (plan->mv) ot_movement_wait_all(plan->mv);
  ot_movement_destroy(plan->mv);
  plan->mv = NULL;
  ot_disk_destroy(plan->disk); /* after the transfer thread: it takes reads (disk.h) */
  plan->disk = NULL;
  if (plan->base) ot_mem_free(OT_MEM_DEVICE, plan->dev, plan->base);
  plan->base = NULL;
  plan->base_bytes = 0;
  plan->inherited_live = 0; /* the handed-over copies went with it */
  free(plan->xs);
  plan->xs = NULL;
  for (int i = 0; plan->dirty && i < plan->prog->n_st; i++) free(plan->dirty[i].rg);
  free(plan->dirty);
  plan->dirty = NULL;
  free(plan->args);
  plan->args = NULL;
  free(plan->vrec); /* a failed run's homes are in an unknown state: forget them (verify.h) */
  plan->vrec = NULL;
}

/* Allocates what a run needs, once per plan (again after a failure). */
static ot_status prepare_once(ot_plan *plan) {
  const ot_program *p = plan->prog;
  ot_mv_kind kind = mv_kind(plan);
  plan->xs = calloc((size_t)(p->n_st ? p->n_st : 1), sizeof *plan->xs);
  plan->args = calloc((size_t)(p->max_args ? p->max_args : 1), sizeof *plan->args);
  plan->dirty = calloc((size_t)(p->n_st ? p->n_st : 1), sizeof *plan->dirty);
  if (!plan->xs || !plan->args || !plan->dirty) return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_sched_run: no host memory");
  /* OMPTENSOR_VERIFY (verify.h): one checksum record per storage. */
  if (kind == OT_MV_COPY && ot_verify_level() > 0) {
    plan->vrec = calloc((size_t)(p->n_st ? p->n_st : 1), sizeof *plan->vrec);
    if (!plan->vrec) return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_sched_run: no host memory for OMPTENSOR_VERIFY");
  }
  if (kind == OT_MV_COPY && plan->extent && !plan->base) { /* a handed-over arena is there already */
    ot_status s = ot_mem_alloc(OT_MEM_DEVICE, plan->dev, plan->extent, &plan->base);
    if (s != OT_OK)
      return ot_fail_context(s, "device %d: allocating the plan's arena of %zu bytes (budget %llu)", plan->dev,
                             plan->extent, (unsigned long long)plan->budget);
    plan->base_bytes = plan->extent;
  } else if (kind != OT_MV_COPY && !plan->base_bytes) {
    plan->base_bytes = plan->extent; /* no device memory: what a device would hold, for handoffs (plan.c) */
  }
  OT_TRY(ot_movement_create(kind, ot_omp_device(plan->dev), plan->transfer_delay_us, &plan->mv));
  if (kind == OT_MV_PREFETCH) {
    /* before any kernel: a remote home touched without its advice would
     * migrate by faults, past the budget */
    advise_homes(plan, 1);
    OT_TRY(ot_movement_wait_all(plan->mv));
  }
  return OT_OK;
}

static ot_status prepare(ot_plan *plan) {
  if (plan->mv) return OT_OK;
  ot_status s = prepare_once(plan);
  if (s != OT_OK) ot_exec_release(plan);
  return s;
}

/* Device address of byte 0 of storage s. */
static char *dev_addr(const run_state *r, int s) {
  const ot_plan *plan = r->plan;
  const ot_prog_storage *ps = &plan->prog->st[s];
  if (r->kind != OT_MV_COPY || !ps->block) return ps->st->home;
  return (char *)plan->base + plan->xs[s].off;
}

/* Storage s's OMPTENSOR_VERIFY record, or NULL when verification is off. */
static ot_verify_rec *vrec_of(ot_plan *plan, int s) { return plan->vrec ? &plan->vrec[s] : NULL; }

static size_t record(run_state *r, ot_trace_kind k, unsigned flags, int op, const char *name, uint64_t bytes,
                     int64_t delta) {
  if (!r->tr) return (size_t)-1;
  uint64_t t = ot_now_ns();
  /* issued_ns keeps this time: a transfer's start and end are set later, when it runs (movement.c) */
  ot_trace_event e = {k, flags, r->run, op, r->dev_num, name, t, t, bytes, delta, r->used, t, 0};
  return ot_trace_add(r->tr, &e);
}

static ot_status add_pending(run_state *r, size_t off, size_t block, uint64_t ticket) {
  int m = 0; /* drop finished ones first */
  for (int k = 0; k < r->n_pend; k++)
    if (!ot_movement_done(r->plan->mv, r->pend[k].ticket)) r->pend[m++] = r->pend[k];
  r->n_pend = m;
  if (ot_grow((void **)&r->pend, &r->cap_pend, r->n_pend + 1, sizeof *r->pend, "pending transfers") != OT_OK)
    return ot_movement_wait(r->plan->mv, ticket); /* no room to remember it: wait now */
  r->pend[r->n_pend++] = (pending){off, block, ticket};
  return OT_OK;
}

/* usm on a GPU: takes a freed copy's pages off the device (see the top). */
static void release_pages(run_state *r, const ot_plan_event *e, const ot_prog_storage *ps, const ot_exec_storage *x) {
  ot_movement *mv = r->plan->mv;
  void *home = ps->st->home;
  if (read_only(ps)) {
    ot_movement_advise(mv, home, ps->bytes, OT_ADVISE_DROP_DUPLICATES, ps->name);
    ot_movement_advise(mv, home, ps->bytes, OT_ADVISE_READ_MOSTLY, ps->name); /* for its next upload */
  } else if ((e->flags & OT_TRACE_DEAD) && !x->home_due) {
    ot_movement_discard(mv, home, ps->bytes, ps->name);
  } else {
    size_t ev = record(r, OT_TRACE_DOWNLOAD, e->flags & ~(OT_TRACE_DEAD | OT_TRACE_DIRTY | OT_TRACE_EVICT | OT_TRACE_CLEAN_DROP),
                       e->op, ps->name, ps->bytes, 0);
    ot_movement_download(mv, home, home, ps->bytes, ps->name, NULL, r->tr, ev);
  }
}

/* Cache epochs (program.h): unique in the process, so no two placements of
 * any cache, by any plan, share one. */
static uint64_t new_epoch(void) {
  static _Atomic uint64_t next = 1;
  return atomic_fetch_add(&next, 1);
}

/* Waits for the write-backs still reading arena range [off, off + block). */
static ot_status wait_pending(run_state *r, size_t off, size_t block) {
  for (int q = 0; q < r->n_pend; q++)
    if (r->pend[q].off < off + block && off < r->pend[q].off + r->pend[q].block)
      OT_TRY(ot_movement_wait(r->plan->mv, r->pend[q].ticket));
  return OT_OK;
}

/* Whether op i of the plan runs on the host's cores (hybrid compute). */
static int host_op(const ot_plan *plan, int i) { return plan->host_op && plan->host_op[i]; }

/* Hybrid compute: an activation crossing between a host op and a device
 * op is copied here, on the compute thread, synchronously: queued on the
 * transfer thread it would wait behind the weight uploads in its FIFO, and
 * the host op (or the device op after it) with it. The block may reuse
 * space a queued write-back still reads: that one finishes first. */
static ot_status cross_copy(run_state *r, const ot_plan_event *e, const ot_prog_storage *ps, ot_exec_storage *x,
                            int up) {
  ot_plan *plan = r->plan;
  if (up) OT_TRY(wait_pending(r, e->off, e->block));
  else OT_TRY(ot_movement_wait(plan->mv, x->ready));
  const uint64_t t0 = ot_now_ns();
  char *dev = dev_addr(r, e->st);
  ot_status s = up ? ot_mem_copy(dev, r->dev_num, ps->st->home, OT_DEVICE_HOST, ps->bytes)
                   : ot_mem_copy(ps->st->home, OT_DEVICE_HOST, dev, r->dev_num, ps->bytes);
  const uint64_t t1 = ot_now_ns();
  if (s != OT_OK)
    return ot_fail_context(s, "executor: copying activation '%s' %s for a host op", ps->name,
                           up ? "to the device" : "home");
  if (r->tr) {
    ot_trace_event ev = {up ? OT_TRACE_UPLOAD : OT_TRACE_DOWNLOAD, e->flags, r->run, e->op, r->dev_num, ps->name,
                         t0, t1, ps->bytes, up ? (int64_t)e->block : 0, r->used, t0, 0};
    ot_trace_add(r->tr, &ev);
  }
  x->ready = 0;
  x->home_ready = 0;
  plan->dirty[e->st].known = 1; /* copy and home now agree */
  plan->dirty[e->st].n = 0;
  return OT_OK;
}

static ot_status recompute(run_state *r, const ot_plan_event *e);

/* Queues storage st's copy home (its home exists): only the ranges ops
 * declared (ot_op_wrote) since copy and home last agreed, else whole
 * (verify mode checksums whole homes); traced with flags and op where the
 * run has a trace. Copy and home agree once the copy ran: the ticket. */
static uint64_t write_home(run_state *r, int st, unsigned flags, int op) {
  ot_plan *plan = r->plan;
  const ot_prog_storage *ps = &plan->prog->st[st];
  ot_exec_dirty *d = &plan->dirty[st];
  uint64_t t;
  if (d->known && !plan->vrec) {
    size_t bytes = 0;
    for (size_t q = 0; q < d->n; q++) bytes += d->rg[2 * q + 1];
    size_t ev = record(r, OT_TRACE_DOWNLOAD, flags | OT_TRACE_PARTIAL, op, ps->name, bytes, 0);
    t = ot_movement_download_ranges(plan->mv, ps->st->home, dev_addr(r, st), d->rg, d->n, ps->bytes, ps->name, r->tr,
                                    ev);
  } else {
    size_t ev = record(r, OT_TRACE_DOWNLOAD, flags, op, ps->name, ps->bytes, 0);
    t = ot_movement_download(plan->mv, ps->st->home, dev_addr(r, st), ps->bytes, ps->name, vrec_of(plan, st), r->tr, ev);
  }
  d->known = 1;
  d->n = 0;
  return t;
}

/* An upload that reads its storage from its checkpoint file: a file home
 * (memory/diskfile.h) the homes pass (homes.c) left without a host copy. */
static int from_disk(const run_state *r, const ot_plan_event *e, const ot_prog_storage *ps) {
  return r->kind == OT_MV_COPY && OT_UPLOAD_READS_FILE(e, ps);
}

static ot_status do_event(run_state *r, const ot_plan_event *e) {
  ot_plan *plan = r->plan;
  const ot_prog_storage *ps = &plan->prog->st[e->st];
  ot_exec_storage *x = &plan->xs[e->st];
  switch ((ot_ev_kind)e->kind) {
  case OT_EV_UPLOAD:
  case OT_EV_ALLOC: {
    if (x->resident) return ot_fail(OT_ERR_STATE, "executor: '%s' placed twice (planner bug)", ps->name);
    x->resident = 1;
    x->off = e->off;
    x->ready = 0;
    x->home_due = 0;
    r->used += e->block;
    if ((e->flags & OT_TRACE_CROSS) && e->kind == OT_EV_UPLOAD && r->kind == OT_MV_COPY)
      return cross_copy(r, e, ps, x, 1);
    /* an upload makes the copy its home's; anything else is unknown */
    plan->dirty[e->st].known = e->kind == OT_EV_UPLOAD && !(ps->role & OT_ROLE_CACHE);
    plan->dirty[e->st].n = 0;
    if (e->kind == OT_EV_ALLOC || (ps->role & OT_ROLE_CACHE)) {
      record(r, OT_TRACE_ALLOC, 0, e->op, ps->name, e->block, (int64_t)e->block);
      if (ps->role & OT_ROLE_CACHE) { /* contents lost (program.h); usm: its op reads homes in place */
        ps->st->cache_epoch = new_epoch();
        return OT_OK;
      }
      /* usm: the pages of an output go to the device before the kernel
       * writes them, not by faults (a copy of what they held; outputs of a
       * decode step are small) */
      if (r->kind == OT_MV_PREFETCH)
        x->ready = ot_movement_upload(plan->mv, ps->st->home, ps->st->home, ps->bytes, ps->name, NULL, NULL, (size_t)-1);
      return OT_OK;
    }
    if (!ps->st->home && !from_disk(r, e, ps)) return no_home(ps);
    const unsigned peer = peer_home(r, ps) ? OT_TRACE_PEER : 0;
    size_t ev = record(r, OT_TRACE_UPLOAD, e->flags | peer, e->op, ps->name, ps->bytes, (int64_t)e->block);
    if (peer) /* a mailbox on a device (pipeline_micro.c) */
      x->ready = ot_movement_upload_peer(plan->mv, dev_addr(r, e->st), ps->st->home, ps->st->home_on - 1, ps->bytes,
                                         ps->name, r->tr, ev);
    else if (!ps->st->home) /* a file home: run_schedule queued its read in this order */
      x->ready = ot_movement_upload_disk(plan->mv, dev_addr(r, e->st), plan->disk, ps->bytes, ps->name, r->tr, ev);
    else
      x->ready = ot_movement_upload(plan->mv, dev_addr(r, e->st), ps->st->home, ps->bytes, ps->name, vrec_of(plan, e->st),
                                    r->tr, ev);
    return OT_OK;
  }
  case OT_EV_DOWNLOAD: {
    if (!x->resident) return ot_fail(OT_ERR_STATE, "executor: write-back of '%s', not resident (planner bug)", ps->name);
    if (r->kind == OT_MV_PREFETCH) { /* coherent: due when freed (see the top) */
      x->home_due = 1;
      return OT_OK;
    }
    ot_exec_dirty *d = &plan->dirty[e->st];
    if (!ps->st->home) return no_home(ps);
    if ((e->flags & OT_TRACE_CROSS) && r->kind == OT_MV_COPY) return cross_copy(r, e, ps, x, 0);
    uint64_t t;
    if (peer_home(r, ps)) { /* into the next stage's mailbox, whole (pipeline_micro.c) */
      size_t ev = record(r, OT_TRACE_DOWNLOAD, e->flags | OT_TRACE_PEER, e->op, ps->name, ps->bytes, 0);
      t = ot_movement_download_peer(plan->mv, ps->st->home, ps->st->home_on - 1, dev_addr(r, e->st), ps->bytes,
                                    ps->name, r->tr, ev);
      d->known = 1;
      d->n = 0;
    } else {
      t = write_home(r, e->st, e->flags, e->op); /* later kernels wait for it: add_pending */
    }
    x->home_ready = t; /* a host op reading the home waits for it */
    return t ? add_pending(r, x->off, e->block, t) : OT_OK;
  }
  case OT_EV_FREE:
    if (!x->resident) return ot_fail(OT_ERR_STATE, "executor: free of '%s', not resident (planner bug)", ps->name);
    x->resident = 0;
    /* before the count drops: a write-back it records still holds the block */
    if (r->kind == OT_MV_PREFETCH && !(ps->role & OT_ROLE_CACHE)) release_pages(r, e, ps, x);
    r->used -= e->block;
    record(r, OT_TRACE_FREE, e->flags, e->op, ps->name, e->block, -(int64_t)e->block);
    return OT_OK;
  case OT_EV_RECOMPUTE:
    return recompute(r, e);
  }
  return OT_OK;
}

/* Waits until op i's copies are uploaded and no write-back still reads
 * their ranges; says whether all of them are resident where planned. */
static ot_status wait_for_op(run_state *r, int i, int *ok) {
  const ot_plan *plan = r->plan;
  const ot_op *o = &plan->prog->ops[i];
  *ok = 1;
  for (int k = 0; k < o->n_acc; k++) {
    int s = o->acc[k].st;
    const ot_prog_storage *ps = &plan->prog->st[s];
    const ot_exec_storage *x = &plan->xs[s];
    if (!ps->block) continue;
    if (!x->resident) {
      *ok = 0;
      continue;
    }
    OT_TRY(ot_movement_wait(plan->mv, x->ready));
    OT_TRY(wait_pending(r, x->off, ps->block));
  }
  return OT_OK;
}

/* A host op (hybrid compute): on the host's cores, on the homes, once the
 * write-backs it reads from have landed. Its accesses are src's (the view
 * gives it none). */
static ot_status run_host_op(run_state *r, int i) {
  ot_plan *plan = r->plan;
  const ot_program *p = plan->src;
  const ot_op *o = &p->ops[i];
  for (int k = 0; k < o->n_acc; k++) OT_TRY(ot_movement_wait(plan->mv, plan->xs[o->acc[k].st].home_ready));
  for (int k = 0; k < o->n_in + o->n_out; k++) {
    char *base = p->st[o->ts[k]].st->home;
    plan->args[k] = base ? base + ot_tensor_byte_offset(o->t[k]) : NULL;
  }
  ot_op_exec e = {ot_omp_device(OT_DEVICE_HOST), i, o->name, o->n_in, o->n_out, plan->args, plan->args + o->n_in,
                  o->t, o->t + o->n_in, o->params, o->params_bytes, p->scalars, p->n_scalars, r};
  /* one core fewer for the op's threads: the transfer thread streams the
   * device ops' weights meanwhile and, waiting on its copies, holds a core
   * (on the H200 machine 15 threads of 16 gave 10.6 tokens/s, 16 gave 9.6) */
  const int nt = omp_get_max_threads();
  if (nt > 2) omp_set_num_threads(nt - 1);
  const uint64_t t0 = ot_now_ns();
  ot_status s = o->run(&e);
  const uint64_t t1 = ot_now_ns();
  if (nt > 2) omp_set_num_threads(nt);
  for (int k = 0; plan->vrec && k < o->n_acc; k++) /* its home changed outside any transfer (verify.h) */
    if (o->acc[k].write) plan->vrec[o->acc[k].st].has = 0;
  if (r->tr) {
    ot_trace_event ev = {OT_TRACE_KERNEL, OT_TRACE_RESIDENT_OK | OT_TRACE_HOST, r->run, i, r->dev_num, o->name,
                         t0, t1, 0, 0, r->used, t0, 0};
    ot_trace_add(r->tr, &ev);
  }
  if (s != OT_OK) return ot_fail_context(s, "op '%s' (#%d, on the host)", o->name, i);
  return OT_OK;
}

/* Recomputation (OT_EV_RECOMPUTE, ot_sched_opts.recompute): places the
 * dropped activation's block (the first op of its rebuild, OT_WHY_RECOMPUTE;
 * the later ones write into it) and runs op e->src_op again, on the device
 * addresses of now (its inputs were placed in this slot or stayed), once its
 * inputs' uploads landed and no write-back still reads the block. The
 * planner made sure the inputs hold what they held the first time, so the
 * block gets bitwise the same values. Traced as an ALLOC (first op only)
 * and a KERNEL of the op, both flagged OT_TRACE_RECOMPUTE. */
static ot_status recompute(run_state *r, const ot_plan_event *e) {
  ot_plan *plan = r->plan;
  ot_program *p = plan->prog;
  const ot_prog_storage *ps = &p->st[e->st];
  ot_exec_storage *x = &plan->xs[e->st];
  const int k = e->src_op;
  const ot_op *o = &p->ops[k];
  const int first = e->why == OT_WHY_RECOMPUTE;
  if (x->resident != !first)
    return ot_fail(OT_ERR_STATE, "executor: '%s' rebuilt while %sresident (planner bug)", ps->name, first ? "" : "not ");
  if (first) {
    x->resident = 1;
    x->off = e->off;
    x->ready = 0;
    x->home_due = 0;
    r->used += e->block;
    record(r, OT_TRACE_ALLOC, OT_TRACE_RECOMPUTE, e->op, ps->name, e->block, (int64_t)e->block);
  }
  int ok;
  OT_TRY(wait_for_op(r, k, &ok));
  if (!ok) {
    record(r, OT_TRACE_KERNEL, OT_TRACE_RECOMPUTE, k, o->name, 0, 0);
    return ot_fail(OT_ERR_STATE, "executor: recomputing '%s' by op '%s' (#%d) before op #%d without all of that op's "
                   "tensors on device %d (planner bug)", ps->name, o->name, k, e->op, plan->dev);
  }
  for (int a = 0; a < o->n_in + o->n_out; a++) {
    char *base = dev_addr(r, o->ts[a]);
    plan->args[a] = base ? base + ot_tensor_byte_offset(o->t[a]) : NULL;
  }
  ot_op_exec ex = {r->dev_num, k, o->name, o->n_in, o->n_out, plan->args, plan->args + o->n_in, o->t, o->t + o->n_in,
                   o->params, o->params_bytes, p->scalars, p->n_scalars, r};
  const uint64_t t0 = ot_now_ns();
  ot_status s = o->run(&ex);
  const uint64_t t1 = ot_now_ns();
  plan->dirty[e->st].known = 0; /* its home never had it */
  plan->dirty[e->st].n = 0;
  plan->dirty[e->st].marked = 0;
  if (r->tr) {
    ot_trace_event ev = {OT_TRACE_KERNEL, OT_TRACE_RESIDENT_OK | OT_TRACE_RECOMPUTE, r->run, k, r->dev_num, o->name,
                         t0, t1, 0, 0, r->used, t0, 0};
    ot_trace_add(r->tr, &ev);
  }
  if (s != OT_OK) return ot_fail_context(s, "op '%s' (#%d, recomputing '%s' for op #%d)", o->name, k, ps->name, e->op);
  return OT_OK;
}

/* Op i's KERNEL event (and the REMOTE events of what it read in place). */
static void trace_op(run_state *r, int i, uint64_t t0, uint64_t t1) {
  if (!r->tr) return;
  const ot_program *p = r->plan->prog;
  const ot_op *o = &p->ops[i];
  ot_trace_event ev = {OT_TRACE_KERNEL, OT_TRACE_RESIDENT_OK, r->run, i, r->dev_num, o->name, t0, t1, 0, 0, r->used, t0, 0};
  ot_trace_add(r->tr, &ev);
  for (int k = 0; r->plan->place && k < o->n_acc; k++) { /* what the kernel read in place */
    const int st = o->acc[k].st;
    if (r->plan->place[st] != OT_PLACE_REMOTE) continue;
    ot_trace_event rv = {OT_TRACE_REMOTE, 0, r->run, i, r->dev_num, p->st[st].name, t0, t1, p->st[st].bytes, 0, r->used, t0, 0};
    ot_trace_add(r->tr, &rv);
  }
}

/* Before op i runs (alone or encoded): its copies in place, its exec record
 * filled, its partial-write marks cleared. */
static ot_status op_begin(run_state *r, int i, ot_op_exec *e) {
  ot_plan *plan = r->plan;
  ot_program *p = plan->prog;
  const ot_op *o = &p->ops[i];
  int ok;
  OT_TRY(wait_for_op(r, i, &ok));
  for (int k = 0; k < o->n_in + o->n_out; k++) {
    char *base = dev_addr(r, o->ts[k]); /* NULL for an empty home */
    plan->args[k] = base ? base + ot_tensor_byte_offset(o->t[k]) : NULL;
  }
  *e = (ot_op_exec){r->dev_num, i, o->name, o->n_in, o->n_out, plan->args, plan->args + o->n_in, o->t, o->t + o->n_in,
                    o->params, o->params_bytes, p->scalars, p->n_scalars, r};
  if (!ok) {
    record(r, OT_TRACE_KERNEL, 0, i, o->name, 0, 0);
    return ot_fail(OT_ERR_STATE, "executor: op '%s' (#%d) would run without all its tensors on device %d (planner bug)",
                   o->name, i, plan->dev);
  }
  for (int k = 0; k < o->n_acc; k++) plan->dirty[o->acc[k].st].marked = 0;
  return OT_OK;
}

/* After op i ran or was encoded: what it wrote without ot_op_wrote counts as written whole. */
static void op_end(run_state *r, int i) {
  const ot_op *o = &r->plan->prog->ops[i];
  for (int k = 0; k < o->n_acc; k++) {
    ot_exec_dirty *d = &r->plan->dirty[o->acc[k].st];
    if (o->acc[k].write && !d->marked) d->known = 0;
    d->marked = 0;
  }
}

/* Runs op i alone, op_begin done (e). */
static ot_status run_begun(run_state *r, int i, const ot_op_exec *e) {
  const ot_op *o = &r->plan->prog->ops[i];
  uint64_t t0 = ot_now_ns();
  ot_status s = o->run(e);
  uint64_t t1 = ot_now_ns();
  op_end(r, i);
  trace_op(r, i, t0, t1);
  if (s != OT_OK) return ot_fail_context(s, "op '%s' (#%d)", o->name, i);
  return OT_OK;
}

static ot_status run_op(run_state *r, int i) {
  if (host_op(r->plan, i)) return run_host_op(r, i);
  ot_op_exec e;
  OT_TRY(op_begin(r, i, &e));
  return run_begun(r, i, &e);
}

/* Whether storage st has a write-back held until the pending batch has run. */
static int deferred(const run_state *r, int st) { return r->plan->xs[st].held; }

/* Runs the ops encoded so far as one launch. Their KERNEL events share the
 * launch's time in equal slices, in order: the device does not report
 * where one instruction ends. */
static ot_status flush_batch(run_state *r) {
  const int n = r->b.n_ops;
  if (!n) return OT_OK;
  const uint64_t t0 = ot_now_ns();
  ot_status s = r->b.launch(r->dev_num, r->b.insns, r->b.n_insns);
  const uint64_t t1 = ot_now_ns();
  for (int j = 0; j < n; j++)
    trace_op(r, r->b.ops[j], t0 + (t1 - t0) * (uint64_t)j / (uint64_t)n, t0 + (t1 - t0) * (uint64_t)(j + 1) / (uint64_t)n);
  r->b.n_ops = r->b.n_insns = 0;
  for (int k = 0; k < r->b.n_dl; k++) r->plan->xs[r->b.dl[k]->st].held = 0;
  if (s != OT_OK) {
    r->b.n_dl = 0;
    const ot_op *a = &r->plan->prog->ops[r->b.ops[0]], *z = &r->plan->prog->ops[r->b.ops[n - 1]];
    return ot_fail_context(s, "ops '%s' (#%d) to '%s' (#%d), run as one launch", a->name, r->b.ops[0], z->name,
                           r->b.ops[n - 1]);
  }
  const int n_dl = r->b.n_dl;
  r->b.n_dl = 0;
  if (!n_dl) return OT_OK;
  /* queued as one batch: unplugged, the transfer thread woke on the first
   * and copied them one blocking copy at a time while the others were
   * queued (bench_step on the H100: 0.2 to 0.9 ms after a step's launch) */
  ot_movement_plug(r->plan->mv);
  ot_status st = OT_OK;
  for (int k = 0; k < n_dl && st == OT_OK; k++) st = do_event(r, r->b.dl[k]);
  ot_movement_unplug(r->plan->mv);
  return st;
}

/* Op i: into the batch where its encoder takes this call, else run alone,
 * after the batch (op_begin once either way: an encoder that declines,
 * as every one does off a GPU, costs no second wait and address pass). */
static ot_status run_or_batch(run_state *r, int i) {
  const ot_op *o = &r->plan->prog->ops[i];
  if (!o->emit || host_op(r->plan, i)) {
    OT_TRY(flush_batch(r));
    return run_op(r, i);
  }
  if (r->b.n_ops && (o->launch != r->b.launch || o->insn_bytes != r->b.insn_bytes)) OT_TRY(flush_batch(r));
  for (int k = 0; r->b.n_dl && k < o->n_acc; k++) /* a held write-back copies what the batch wrote, not this op */
    if (o->acc[k].write && deferred(r, o->acc[k].st)) OT_TRY(flush_batch(r));
  if ((size_t)(r->b.n_insns + OT_BATCH_MAX_PER_OP) * o->insn_bytes > INT32_MAX / 2) OT_TRY(flush_batch(r));
  const size_t need = (size_t)(r->b.n_insns + OT_BATCH_MAX_PER_OP) * o->insn_bytes;
  OT_TRY(ot_grow((void **)&r->b.insns, &r->b.cap_bytes, (int)need, 1, "executor: instructions"));
  OT_TRY(ot_grow((void **)&r->b.ops, &r->b.cap_ops, r->b.n_ops + 1, sizeof *r->b.ops, "executor: instructions"));
  ot_op_exec e;
  OT_TRY(op_begin(r, i, &e));
  const int k = o->emit(&e, r->b.insns + (size_t)r->b.n_insns * o->insn_bytes);
  if (k <= 0) {
    OT_TRY(flush_batch(r)); /* the ops before it first */
    return run_begun(r, i, &e);
  }
  r->b.launch = o->launch;
  r->b.insn_bytes = o->insn_bytes;
  r->b.n_insns += k;
  r->b.ops[r->b.n_ops++] = i;
  op_end(r, i);
  return OT_OK;
}

/* Sets the executor's view of what is resident when a schedule starts. */
static ot_status start_state(run_state *r, const ot_schedule *sc) {
  ot_plan *plan = r->plan;
  const ot_program *p = plan->prog;
  r->used = plan->reserved; /* held outside the arena all along (a stage's mailboxes): in every count */
  if (sc == &plan->first) {
    for (int i = 0; i < p->n_st; i++) {
      plan->xs[i] = (ot_exec_storage){0, 0, 0, 0, 0, 0};
      plan->dirty[i].known = 0;
      plan->dirty[i].n = 0;
    }
    /* copies handed over by the previous plan (ot_sched_plan_after) are
     * there, and clean: it synced the previous plan first, and a plan that
     * does not defer writes every copy home after its run. So only what
     * this plan's ops write goes home (a deferred KV cache: the rows decode
     * wrote, not the whole cache). After a failure or an invalidate
     * restore_start uploads them (known again from the upload). */
    for (int k = 0; plan->inherited_live && k < sc->n_start; k++) {
      plan->xs[sc->start[k].st] = (ot_exec_storage){1, sc->start[k].off, 0, 0, 0, 0};
      plan->dirty[sc->start[k].st].known = 1;
      r->used += p->st[sc->start[k].st].block;
    }
    return OT_OK;
  }
  for (int k = 0; k < sc->n_start; k++) {
    const ot_exec_storage *x = &plan->xs[sc->start[k].st];
    if (!x->resident || x->off != sc->start[k].off)
      return ot_fail(OT_ERR_STATE, "executor: kept copy '%s' is not where the plan left it (planner bug)",
                     p->st[sc->start[k].st].name);
    r->used += p->st[sc->start[k].st].block;
  }
  return OT_OK;
}

/* The independent budget probe (sched.h, ot_budget_probe), before op `op`:
 * every transfer first finishes, so the device holds what the plan says. */
static ot_status probe_budget(run_state *r, int op) {
  ot_plan *plan = r->plan;
  ot_budget_probe *pr = &plan->probe;
  memset(pr, 0, sizeof *pr);
  pr->free_at_start = plan->ctx->free_at_create[plan->dev_index];
  if (!pr->free_at_start || plan->budget >= pr->free_at_start ||
      pr->free_at_start - plan->budget <= OT_PROBE_MARGIN)
    return OT_OK; /* nothing to prove: the budget is the whole device */
  const uint64_t t0 = ot_now_ns();
  OT_TRY(ot_movement_wait_all(plan->mv));
  ot_device_memory(plan->dev, &pr->free_at_peak, NULL);
  pr->probe_bytes = pr->free_at_start - plan->budget - OT_PROBE_MARGIN;
  pr->planned_bytes = r->used;
  pr->op = op;
  int got = ot_mem_probe_alloc(plan->dev, pr->probe_bytes);
  if (got < 0) return OT_OK; /* no CUDA runtime: not done */
  pr->done = 1;
  pr->alloc_ok = got == 1;
  if (plan->ctx->backend != OT_BACKEND_USM) { /* device memory: cudaMalloc cannot evict it */
    pr->conclusive = 1;
    pr->ok = pr->alloc_ok;
  } else { /* managed memory: a cudaMalloc evicts live pages (sched.h); only a small drop decides */
    const uint64_t drop = pr->free_at_start > pr->free_at_peak ? pr->free_at_start - pr->free_at_peak : 0;
    pr->conclusive = drop <= plan->budget + OT_PROBE_MARGIN;
    pr->ok = pr->conclusive;
  }
  pr->seconds = (double)(ot_now_ns() - t0) * 1e-9;
  return OT_OK;
}

/* The first schedule's start copies that are not on the device (a handed-
 * over plan after a failure or an invalidate): uploaded to their offsets
 * before op 0, as the planner assumed them, as any planned upload. */
static ot_status restore_start(run_state *r, const ot_schedule *sc) {
  ot_plan *plan = r->plan;
  for (int k = 0; sc == &plan->first && k < sc->n_start; k++) {
    const int st = sc->start[k].st;
    if (plan->xs[st].resident) continue;
    const ot_plan_event up = {0, 0, OT_EV_UPLOAD, OT_WHY_RELOAD, 0, st, sc->start[k].off, plan->prog->st[st].block,
                              -1, -1, 0};
    OT_TRY(do_event(r, &up));
  }
  return OT_OK;
}

/* One read of a file-homed storage, queued on the reader (disk.h) and
 * traced as a DISK event issued now. */
static ot_status queue_read(run_state *r, const ot_prog_storage *ps, int op) {
  uint64_t a0;
  const size_t span = ot_disk_span(ps->st->file_off, ps->bytes, &a0);
  size_t ev = record(r, OT_TRACE_DISK, 0, op, ps->name, span, 0);
  return ot_disk_queue(r->plan->disk, ps->st, ps->name, r->tr, ev);
}

/* Every read the run's uploads will take, in the order they are issued
 * (restore_start's, then the schedule's): the reader runs ahead of them as
 * far as the staging ring allows, so the disk works while the device does. */
static ot_status queue_disk_reads(run_state *r, const ot_schedule *sc) {
  ot_plan *plan = r->plan;
  const ot_program *p = plan->prog;
  const ot_plan_event up = {0, 0, OT_EV_UPLOAD, OT_WHY_RELOAD, 0, 0, 0, 0, -1, -1, 0};
  size_t span_max = 0;
  int n = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (int k = 0; sc == &plan->first && k < sc->n_start; k++) {
      const int st = sc->start[k].st;
      if (plan->xs[st].resident || !from_disk(r, &up, &p->st[st])) continue;
      if (pass) OT_TRY(queue_read(r, &p->st[st], -1));
      else n++, span_max = p->st[st].bytes > span_max ? p->st[st].bytes : span_max;
    }
    for (int i = 0; i < sc->n_ev; i++) {
      const ot_plan_event *e = &sc->ev[i];
      if (!from_disk(r, e, &p->st[e->st])) continue;
      if (pass) OT_TRY(queue_read(r, &p->st[e->st], e->op));
      else n++, span_max = p->st[e->st].bytes > span_max ? p->st[e->st].bytes : span_max;
    }
    if (!n) return OT_OK;
    if (!pass && !plan->disk) {
      /* the homes pass sized the ring; a home dropped since (another plan's
       * pass) may need one it did not plan: twice the largest read */
      size_t ring = plan->ring_bytes ? plan->ring_bytes : 2 * (span_max + 2 * OT_DISK_ALIGN);
      if (ring < span_max + 2 * OT_DISK_ALIGN) ring = span_max + 2 * OT_DISK_ALIGN;
      OT_TRY(ot_disk_create(plan->ctx, ring, &plan->disk));
    }
  }
  return OT_OK;
}

/* Whether event e must wait for the ops of the batch: everything that moves
 * or reads data does. Placing an output's block (ALLOC) and dropping a
 * block (FREE) are bookkeeping on the copy and host backends: the ops
 * still run in order on the arena as it was when they were encoded, and
 * the first event that puts bytes into a dropped range (an upload) flushes
 * the batch before it. Not so for usm (prefetches move pages) or a cache
 * (its epoch changes). */
static int needs_flush(const run_state *r, const ot_plan_event *e) {
  if (e->kind == OT_EV_FREE && deferred(r, e->st)) return 1; /* its block could be reused before the copy */
  if (e->kind != OT_EV_ALLOC && e->kind != OT_EV_FREE) return 1;
  return r->kind == OT_MV_PREFETCH || (r->plan->prog->st[e->st].role & OT_ROLE_CACHE) || (e->flags & OT_TRACE_CROSS);
}

/* A write-back (a KV cache's new row, after its layer's attention) is
 * held until the pending batch has run instead of ending the batch: the
 * copy reads only what the batch's ops wrote, and the batch is flushed
 * first if a later op would write the storage again or its block is freed.
 * A decode step then stays one launch instead of one per layer. Copies
 * across devices and into a stage's mailbox keep their place, and so does
 * usm's write-back (it only marks the home due, see the top). */
static ot_status defer_download(run_state *r, const ot_plan_event *e, int *held) {
  *held = 0;
  if (!r->b.n_ops || e->kind != OT_EV_DOWNLOAD || r->kind == OT_MV_PREFETCH || (e->flags & OT_TRACE_CROSS) ||
      peer_home(r, &r->plan->prog->st[e->st]))
    return OT_OK;
  OT_TRY(ot_grow((void **)&r->b.dl, &r->b.cap_dl, r->b.n_dl + 1, sizeof *r->b.dl, "executor: held write-backs"));
  r->b.dl[r->b.n_dl++] = e;
  r->plan->xs[e->st].held = 1;
  *held = 1;
  return OT_OK;
}

static ot_status run_schedule(run_state *r, const ot_schedule *sc, unsigned run_flags) {
  const ot_program *p = r->plan->prog;
  OT_TRY(start_state(r, sc));
  record(r, OT_TRACE_RUN, run_flags, -1, "run", 0, 0);
  OT_TRY(queue_disk_reads(r, sc));
  OT_TRY(restore_start(r, sc));
  /* the probe: once, in the first replay, where it holds the most */
  int probe = r->plan->probe_budget && r->plan->runs == 1 && ot_dev_is_gpu(r->plan->dev);
  for (int slot = 0; slot <= p->n_ops; slot++) {
    /* a batch runs before an event that moves data: such events wait for, or copy, what its ops write */
    if (slot == p->n_ops) OT_TRY(flush_batch(r));
    for (int x = sc->slot_start[slot]; x < sc->slot_start[slot + 1]; x++) {
      int held;
      OT_TRY(defer_download(r, &sc->ev[x], &held));
      if (held) continue;
      if (needs_flush(r, &sc->ev[x])) OT_TRY(flush_batch(r));
      OT_TRY(do_event(r, &sc->ev[x]));
    }
    if (probe && slot < p->n_ops && r->used >= sc->stats.peak_bytes) {
      probe = 0;
      OT_TRY(flush_batch(r));
      OT_TRY(probe_budget(r, slot));
    }
    if (slot == p->n_ops) break;
    OT_TRY(run_or_batch(r, slot));
  }
  return OT_OK;
}

ot_status ot_exec_runnable(const ot_plan *plan, const char *fn) {
  if (plan->version != plan->src->version)
    return ot_fail(OT_ERR_STATE, "%s: the program changed after it was planned (ops or marks added); plan it again",
                   fn);
  if (plan->spent)
    return ot_fail(OT_ERR_STATE, "%s: this plan handed its device memory to a later plan (ot_sched_plan_after) and "
                                 "cannot run; destroy it, or plan the program again", fn);
  return OT_OK;
}

ot_status ot_sched_run(ot_plan *plan, ot_trace *trace) {
  if (!plan) return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_run: plan is NULL");
  OT_TRY(ot_exec_runnable(plan, "ot_sched_run"));
  if (plan->n_stages) return ot_pipeline_run(plan, trace);
  return ot_exec_run(plan, trace, -1);
}

ot_status ot_exec_run(ot_plan *plan, ot_trace *trace, int stage_of_run) {
  OT_TRY(prepare(plan));
  run_state r = {0};
  r.plan = plan;
  r.tr = trace;
  r.dev_num = ot_omp_device(plan->dev);
  r.kind = mv_kind(plan);
  r.run = !trace ? 0 : stage_of_run >= 0 ? stage_of_run : ot_trace_next_run(trace);
  if (trace) ot_trace_set_budget(trace, plan->budget);
  const ot_schedule *sc = plan->runs ? &plan->steady : &plan->first;
  if (plan->vrec) /* inputs are rewritten between runs: verified only within one (verify.h) */
    for (int i = 0; i < plan->prog->n_st; i++)
      if (plan->prog->st[i].role & OT_ROLE_INPUT) plan->vrec[i].has = 0;
  plan->synced = 0;
  ot_status s = run_schedule(&r, sc, stage_of_run >= 0 ? OT_TRACE_STAGE : 0);
  ot_status w = ot_movement_wait_all(plan->mv);
  if (s == OT_OK) s = w;
  if (s == OT_OK && plan->disk && ot_disk_pending(plan->disk))
    s = ot_fail(OT_ERR_STATE, "executor: %d weights read from disk were never uploaded (executor bug)",
                ot_disk_pending(plan->disk));
  free(r.pend);
  free(r.b.insns);
  free(r.b.dl);
  free(r.b.ops);
  if (s != OT_OK) {
    plan->runs = 0; /* the device state is unknown: start the next run from nothing */
    /* issue 8: a failed transfer leaves the queue's error sticky and the
     * arena's contents unknown. Every transfer has completed (wait_all
     * above), so drop the queue and the arena now; the next run allocates
     * them again (prepare) and can succeed, and ot_plan_destroy has
     * nothing left to wait for. */
    ot_exec_release(plan);
    return s;
  }
  plan->runs++;
  plan->inherited_live = 0;
  return OT_OK;
}

ot_status ot_sched_sync(ot_plan *plan) {
  if (!plan) return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_sync: plan is NULL");
  /* a pipeline: each stage's plan defers its own state (issue 43: the
   * trained moments stayed on the last device, and a save read the homes) */
  for (int k = 0; k < plan->n_stages; k++) OT_TRY(ot_sched_sync(plan->stages[k].plan));
  /* usm on a GPU: managed homes are coherent; nothing is stale */
  if (!plan->defer || !plan->runs || !plan->mv || mv_kind(plan) != OT_MV_COPY || plan->synced) return OT_OK;
  /* after any run the copies kept are the steady schedule's start set */
  run_state r = {0};
  r.plan = plan;
  r.kind = mv_kind(plan);
  const ot_schedule *sc = &plan->steady;
  ot_status s = OT_OK;
  for (int k = 0; k < sc->n_start && s == OT_OK; k++) {
    if (!sc->start[k].dirty) continue;
    const int st = sc->start[k].st;
    const ot_prog_storage *ps = &plan->prog->st[st];
    /* only what the planner deferred: a kept scratch tensor is dirty too,
     * but its home need not hold anything (a decode step's activations) */
    if (!plan->xs[st].resident || !(ps->role & OT_ROLE_WRITEBACK)) continue;
    if (!ps->st->home) {
      s = no_home(ps);
      break;
    }
    if (!plan->dirty[st].known || plan->dirty[st].n || plan->vrec) write_home(&r, st, 0, -1); /* waited for below */
  }
  ot_status w = ot_movement_wait_all(plan->mv); /* after a failure too: nothing may copy into a freed home */
  if (s != OT_OK) return s;
  plan->synced = w == OT_OK;
  return w == OT_OK ? OT_OK : ot_fail_context(w, "ot_sched_sync");
}

void ot_sched_invalidate(ot_plan *plan) {
  if (!plan) return;
  if (plan->defer && ot_sched_sync(plan) != OT_OK)
    ot_warn_once("defer-invalidate", "ot_sched_invalidate: writing deferred persistent tensors home failed (%s)",
                 ot_last_error());
  for (int k = 0; k < plan->n_stages; k++) ot_sched_invalidate(plan->stages[k].plan);
  plan->runs = 0;
  plan->inherited_live = 0; /* handed-over copies may be stale now: uploaded again */
  if (plan->vrec) memset(plan->vrec, 0, (size_t)plan->prog->n_st * sizeof *plan->vrec); /* homes changed */
}

/* ---- ot_op_fill (program.h) ---------------------------------------------- */

static ot_status fill_target(const ot_op_exec *e, int k, const char *fn, const ot_prog_storage **ps) {
  const run_state *r = e ? e->run : NULL;
  if (!r) return ot_fail(OT_ERR_STATE, "%s: called outside a run", fn);
  if (k < 0 || k >= e->n_in)
    return ot_fail(OT_ERR_INVALID_ARG, "%s: op '%s' has no input %d (%d inputs)", fn, e->name, k, e->n_in);
  const ot_op *o = &r->plan->prog->ops[e->op_index];
  *ps = &r->plan->prog->st[o->ts[k]]; /* ts is the same in a hybrid view */
  if (!((*ps)->role & OT_ROLE_CACHE))
    return ot_fail(OT_ERR_INVALID_ARG, "%s: input %d of op '%s' ('%s') is not a cache (ot_program_mark_cache)", fn,
                   k, e->name, (*ps)->name);
  return OT_OK;
}

uint64_t ot_op_cache_epoch(const ot_op_exec *e, int k) {
  const ot_prog_storage *ps;
  return fill_target(e, k, "ot_op_cache_epoch", &ps) == OT_OK ? ps->st->cache_epoch : 0;
}

ot_status ot_op_fill(const ot_op_exec *e, int k, size_t off, const ot_tensor *src, void **where, uint64_t *ticket) {
  const ot_prog_storage *ps;
  OT_TRY(fill_target(e, k, "ot_op_fill", &ps));
  run_state *r = e->run;
  if (!src || !where || !ticket) return ot_fail(OT_ERR_INVALID_ARG, "ot_op_fill: NULL argument");
  const int on_host = host_op(r->plan, e->op_index); /* hybrid: it reads homes */
  *ticket = 0;
  size_t first, end;
  ot_tensor_byte_span(src, &first, &end);
  const size_t bytes = end - first, at = ot_tensor_byte_offset(src) - first;
  const size_t win = ot_tensor_byte_offset(e->in_t[k]);
  if (src->st->file && !src->st->home)
    return ot_fail(OT_ERR_UNSUPPORTED, "ot_op_fill: op '%s': '%s' is homed in its checkpoint file (a host memory "
                   "budget, --cpu-memory-limit): a cache fills from host memory; models with an expert window "
                   "cannot run under a host budget yet", e->name, src->name);
  if (!src->st->home || (bytes && off > ps->bytes - win) || bytes > ps->bytes - win - off)
    return ot_fail(OT_ERR_INVALID_ARG, "ot_op_fill: op '%s': '%s' (%zu bytes) does not fit in cache '%s' at byte %zu "
                   "(%zu bytes)", e->name, src->name, bytes, ps->name, off, ps->bytes - win);
  const char *home = (const char *)src->st->home + first;
  const uint64_t t = ot_now_ns();
  ot_trace_event ev = {OT_TRACE_UPLOAD, OT_TRACE_FILL, r->run, e->op_index, r->dev_num, src->name, t, t, bytes, 0,
                       r->used, t, 0};
  if (r->kind == OT_MV_COPY && !on_host) {
    char *dst = (char *)e->in[k] + off;
    size_t id = r->tr ? ot_trace_add(r->tr, &ev) : (size_t)-1;
    *ticket = ot_movement_upload(r->plan->mv, dst, home, bytes, src->name, NULL, r->tr, id);
    *where = dst + at;
    return OT_OK;
  }
  if (r->kind == OT_MV_PREFETCH && !on_host) { /* read in place: no device bytes, no page migration */
    ev.kind = OT_TRACE_REMOTE;
    OT_TRY(ot_movement_wait(r->plan->mv, ot_movement_advise(r->plan->mv, home, bytes, OT_ADVISE_REMOTE, src->name)));
  }
  if (r->tr && !on_host) ot_trace_add(r->tr, &ev);
  *where = (char *)home + at;
  return OT_OK;
}

ot_status ot_op_fill_wait(const ot_op_exec *e, uint64_t ticket) {
  const run_state *r = e ? e->run : NULL;
  if (!r) return ot_fail(OT_ERR_STATE, "ot_op_fill_wait: called outside a run");
  return ticket ? ot_movement_wait(r->plan->mv, ticket) : OT_OK;
}

/* ---- ot_op_wrote, ot_op_input_home (program.h) --------------------------- */

/* Beyond this many ranges a storage is simply written home whole: a list
 * that long costs more in copies of a few bytes than it saves. */
#define MAX_RANGES 65536

ot_status ot_op_wrote(const ot_op_exec *e, int k, size_t off, size_t len) {
  const run_state *r = e ? e->run : NULL;
  if (!r || !r->plan->dirty || r->kind == OT_MV_PREFETCH) return OT_OK; /* usm: pages, not ranges */
  if (host_op(r->plan, e->op_index)) return OT_OK; /* hybrid: wrote the home itself */
  if (k < 0 || k >= e->n_out)
    return ot_fail(OT_ERR_INVALID_ARG, "ot_op_wrote: op '%s' has no output %d (%d outputs)", e->name, k, e->n_out);
  const ot_op *o = &r->plan->prog->ops[e->op_index];
  const int s = o->ts[o->n_in + k];
  const ot_prog_storage *ps = &r->plan->prog->st[s];
  const size_t at = ot_tensor_byte_offset(e->out_t[k]);
  if (off > ps->bytes - at || len > ps->bytes - at - off)
    return ot_fail(OT_ERR_INVALID_ARG, "ot_op_wrote: op '%s': bytes [%zu, %zu) of output %d ('%s') are outside its "
                   "storage (%zu bytes from the view's start)", e->name, off, off + len, k, ps->name, ps->bytes - at);
  ot_exec_dirty *d = &r->plan->dirty[s];
  d->marked = 1;
  if (!d->known || !len) return OT_OK;
  off += at;
  if (d->n && d->rg[2 * (d->n - 1)] + d->rg[2 * (d->n - 1) + 1] == off) { /* extends the last one */
    d->rg[2 * (d->n - 1) + 1] += len;
    return OT_OK;
  }
  if (d->n >= MAX_RANGES) {
    d->known = 0;
    return OT_OK;
  }
  if (d->n == d->cap) {
    const size_t cap = d->cap ? 2 * d->cap : 64;
    size_t *g = realloc(d->rg, cap * 2 * sizeof *g);
    if (!g) { /* no room to remember: written whole, which is always right */
      d->known = 0;
      return OT_OK;
    }
    d->rg = g;
    d->cap = cap;
  }
  d->rg[2 * d->n] = off;
  d->rg[2 * d->n + 1] = len;
  d->n++;
  return OT_OK;
}

const void *ot_op_input_home(const ot_op_exec *e, int k) {
  const run_state *r = e ? e->run : NULL;
  if (!r || k < 0 || k >= e->n_in) return NULL;
  const ot_op *o = &r->plan->prog->ops[e->op_index];
  const ot_prog_storage *ps = &r->plan->prog->st[o->ts[k]];
  if (!(ps->role & OT_ROLE_INPUT) || (ps->role & OT_ROLE_WRITTEN) || !ps->st->home || ps->st->home_on) return NULL;
  return (const char *)ps->st->home + ot_tensor_byte_offset(e->in_t[k]);
}
