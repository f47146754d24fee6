/* planner.c — residency on paper: which copies are on the device before each
 * op, where in the arena, and what is evicted, written home or freed.
 *
 * The simulation walks the ops in order with an ot_arena of the budget's
 * size. Before op i, every storage op i touches must be resident; a missing
 * one is placed by best fit, and if no free block is large enough the
 * cheapest contiguous range of evictable copies is evicted (sched.h explains
 * the cost). After op i, outputs and persistent tensors whose last write was
 * op i are written home, and copies with no later use are freed unless they
 * may be kept for the next run.
 *
 * Next uses wrap around: a kept copy (weight, persistent) with no later use in
 * this run is next used at n_ops + its first use, so the copies the next run
 * needs first are the last to go. Between runs the plan keeps a fixed set S
 * of copies: a run starts with S and must end with S resident at the same
 * offsets. S is found by iteration: S0 = what the first run ends with;
 * S(k+1) = S(k) ∩ (what a run started from S(k) ends with); the sets shrink,
 * so this stops, at worst at the empty set. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/vec.h"
#include "memory/arena.h"
#include "memory/device.h"
#include "sched/plan_impl.h"

/* Most ops one rebuild runs (recomputation): a whole write and the writes
 * into it after (a bias placed, then a GEMM accumulating onto it). */
#define RC_CHAIN 4

typedef struct sim {
  const ot_program *p;
  /* hybrid compute (plan_impl.h): host[i] = 1 runs op i on the host; src
   * holds the accesses of those ops, which p (the view) does not */
  const unsigned char *host;
  const ot_program *src;
  ot_arena *arena;
  ot_schedule *out;
  int n_st;
  char *res, *dirty;
  size_t *off;
  int *pin;    /* op index that pins it (-1) */
  int *evicted; /* evicted earlier in this run */
  int lookahead; /* ops ahead whose uploads may be placed now (prefetch) */
  int defer;     /* defer_writeback: persistent copies stay dirty past their last write */
  ot_resident *tmp; /* [n_st] scratch for window search */
  double *cost;     /* [n_st] scratch for window search: eviction cost per resident copy (-1: not evictable) */
  double *psum;     /* [n_st + 1] scratch: prefix sums of cost (an estimate, see evict_window) */
  size_t *ends;     /* [n_st] scratch: where each resident copy ends */
  int *nu, *nu_at;  /* [n_st] next_use cache: nu[s] = next_use(s, nu_at[s]) (nu_at -1: none) */
  /* recomputation (ot_sched_opts.recompute, README "Recomputation") */
  int rc;           /* on: the plan asks for it and no op runs on the host */
  double rc_pcie, rc_flops;
  int *chain;       /* [n_st * RC_CHAIN] the ops that made its value: one that wrote it whole, then ones
                       that wrote into it (accumulated), each with it as its only written storage */
  unsigned char *chain_n; /* [n_st] their count (0: not rebuildable) */
  char *dropped;    /* [n_st] dropped for recomputation: its chain runs again before its next use */
  int *drop_need;   /* [n_st] dropped storages whose producer reads it: it must stay recoverable */
  int *stamp, gen;  /* [n_st] scratch marks for sets of storages (stamp[s] == gen: in the set) */
} sim;

void ot_schedule_free(ot_schedule *s) {
  free(s->ev);
  free(s->slot_start);
  free(s->start);
  memset(s, 0, sizeof *s);
}

ot_status ot_schedule_push(ot_schedule *s, ot_plan_event e) {
  OT_TRY(ot_grow((void **)&s->ev, &s->cap_ev, s->n_ev + 1, sizeof *s->ev, "planner events"));
  s->ev[s->n_ev++] = e;
  return OT_OK;
}

static void sim_free(sim *m) {
  ot_arena_destroy(m->arena);
  free(m->res);
  free(m->dirty);
  free(m->off);
  free(m->pin);
  free(m->evicted);
  free(m->tmp);
  free(m->cost);
  free(m->psum);
  free(m->ends);
  free(m->nu);
  free(m->nu_at);
  free(m->chain);
  free(m->chain_n);
  free(m->dropped);
  free(m->drop_need);
  free(m->stamp);
}

static ot_status sim_init(sim *m, const ot_program *p, size_t cap, ot_schedule *out) {
  memset(m, 0, sizeof *m);
  m->p = p;
  m->out = out;
  m->n_st = p->n_st;
  size_t n = (size_t)(p->n_st ? p->n_st : 1);
  m->res = calloc(n, 1);
  m->dirty = calloc(n, 1);
  m->off = calloc(n, sizeof *m->off);
  m->pin = malloc(n * sizeof *m->pin);
  m->evicted = calloc(n, sizeof *m->evicted);
  m->tmp = malloc(n * sizeof *m->tmp);
  m->cost = malloc(n * sizeof *m->cost);
  m->psum = malloc((n + 1) * sizeof *m->psum);
  m->ends = malloc(n * sizeof *m->ends);
  m->nu = malloc(n * sizeof *m->nu);
  m->nu_at = malloc(n * sizeof *m->nu_at);
  m->chain = malloc(n * RC_CHAIN * sizeof *m->chain);
  m->chain_n = calloc(n, 1);
  m->dropped = calloc(n, 1);
  m->drop_need = calloc(n, sizeof *m->drop_need);
  m->stamp = calloc(n, sizeof *m->stamp);
  if (!m->res || !m->dirty || !m->off || !m->pin || !m->evicted || !m->tmp || !m->cost || !m->psum || !m->ends ||
      !m->nu || !m->nu_at || !m->chain || !m->chain_n || !m->dropped || !m->drop_need || !m->stamp) {
    sim_free(m);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  }
  for (int i = 0; i < p->n_st; i++) m->pin[i] = -1, m->nu_at[i] = -1;
  ot_status s = ot_arena_create(cap, OT_SCHED_ALIGN, &m->arena);
  if (s != OT_OK) sim_free(m);
  return s;
}

static ot_status emit(sim *m, int slot, ot_ev_kind k, ot_ev_reason why, unsigned flags, int st) {
  if (k == OT_EV_UPLOAD && (m->p->st[st].role & OT_ROLE_CACHE)) k = OT_EV_ALLOC; /* its op fills it (program.h) */
  ot_plan_event e = {slot, slot, (unsigned char)k, (unsigned char)why, flags, st, m->off[st],
                     m->p->st[st].block, -1, -1, 0};
  return ot_schedule_push(m->out, e);
}

/* First use of storage s at op >= i; wraps to the next run for kept copies. */
static int next_use(const ot_program *p, int s, int i) {
  const ot_prog_storage *ps = &p->st[s];
  const int lo = ot_uses_from(ps, i);
  if (lo < ps->n_uses) return ps->uses[lo];
  if ((ps->role & OT_ROLE_KEEP) && ps->n_uses) return p->n_ops + ps->first_use;
  return INT_MAX;
}

/* next_use for the simulation's op i, cached: the eviction search asks it of
 * every resident copy at every eviction, and a binary search each time was
 * a good part of planning a 10 000-op program (bench/bench_plan.c). The
 * cached answer for op j <= i is still right at i while it is >= i: no use
 * falls in [j, i). */
static int sim_next_use(sim *m, int s, int i) {
  if (m->nu_at[s] >= 0 && m->nu_at[s] <= i && m->nu[s] >= i) return m->nu[s];
  m->nu[s] = next_use(m->p, s, i);
  m->nu_at[s] = i;
  return m->nu[s];
}

/* ---- hybrid compute: host ops use homes (plan_impl.h) ---------------------- */

/* Does op o read (write) storage s? */
static int op_reads(const ot_op *o, int s) {
  const ot_access *a = ot_op_access(o, s);
  return a && a->read;
}

static int op_writes(const ot_op *o, int s) {
  const ot_access *a = ot_op_access(o, s);
  return a && a->write;
}

/* Does the next op after i that uses s run on the host and read it? Then a
 * dirty device copy must go home before it (a crossing activation). */
static int host_reads_next(const sim *m, int s, int i) {
  const ot_prog_storage *ps = &m->src->st[s];
  const int u = ot_uses_from(ps, i + 1);
  if (u >= ps->n_uses) return 0;
  const int j = ps->uses[u];
  return m->host[j] && op_reads(&m->src->ops[j], s);
}

/* Was storage s last written, before op i, by a host op? Then its home is
 * newer than any copy, and the upload that brings it back crosses. */
static int host_wrote_last(const sim *m, int s, int i) {
  const ot_prog_storage *ps = &m->src->st[s];
  if (!m->host || !(ps->role & OT_ROLE_WRITTEN)) return 0;
  for (int u = ot_uses_from(ps, i) - 1; u >= 0; u--) {
    const int j = ps->uses[u];
    if (op_writes(&m->src->ops[j], s)) return m->host[j];
  }
  return 0;
}

/* Does a host op in [i, j) write storage s? (an upload for op j must not be
 * issued before it: it would copy the stale home) */
static int host_writes_between(const sim *m, int s, int i, int j) {
  for (int q = i; m->host && q < j; q++)
    if (m->host[q] && op_writes(&m->src->ops[q], s)) return 1;
  return 0;
}

/* ---- recomputation (README "Recomputation") ------------------------------- */

/* Starts an empty set of storages (m->stamp); in_set/add_set below. */
static void new_set(sim *m) { m->gen++; }
static int add_set(sim *m, int s) {
  if (m->stamp[s] == m->gen) return 0;
  m->stamp[s] = m->gen;
  return 1;
}

/* Roles an activation that may be dropped and rebuilt has none of: its home
 * or the next run needs it (marked, kept, written home), it is a cache, or
 * its first access reads what the run starts with. */
#define RC_NOT_ACTIVATION                                                                                       \
  (OT_ROLE_INPUT | OT_ROLE_OUTPUT | OT_ROLE_PERSIST | OT_ROLE_KEEP | OT_ROLE_CACHE | OT_ROLE_WRITEBACK |        \
   OT_ROLE_NEEDS_HOME)

/* Adds the storages the ops of q's chain use to the set (new_set), their
 * blocks to *ws. */
static void add_chain_set(sim *m, int q, uint64_t *ws) {
  const ot_program *p = m->p;
  for (int c = 0; c < m->chain_n[q]; c++) {
    const ot_op *o = &p->ops[m->chain[q * RC_CHAIN + c]];
    for (int a = 0; a < o->n_acc; a++)
      if (add_set(m, o->acc[a].st)) *ws += p->st[o->acc[a].st].block;
  }
}

/* May the dirty copy of storage s, evicted before op i and next read by op
 * nu, be dropped instead of written home, and rebuilt right before nu by
 * running its chain again (the ops that made its value: one that wrote it
 * whole, then up to RC_CHAIN - 1 that wrote into it, each with s as its only
 * written storage; chain[s], set after each op)? Only if that gives bitwise
 * the same values and the plan can still run:
 *   - s is an activation (above) with a chain, not pinned by op i, next used
 *     in this run by an op that reads it;
 *   - s is no input of another dropped copy's chain (drop_need): that one's
 *     rebuild needs it, and rebuilding dropped inputs first is not done
 *     (depth 1: such an s is written home instead, as without
 *     recomputation);
 *   - every input t of every op c of the chain holds at nu what it held at
 *     c: no op in (c, nu) writes it, and it can be on the device at nu:
 *     resident, or brought back from a home that holds it (never written,
 *     kept, or live until nu, so an eviction writes it home: not freed dead
 *     before); not a cache (its contents are its op's) and not itself
 *     dropped;
 *   - op nu's working set with the inputs of every chain rebuilt there still
 *     fits the arena (so place_op can place them all);
 *   - cheaper: the chain's flops over the flop rate plus its inputs not
 *     resident now over PCIe, against s home and back (2 bytes over PCIe).
 *     An op without a flops hint counts as free to run (elementwise ops,
 *     memory bound at device bandwidth, far above PCIe's). */
static int can_recompute(sim *m, int s, int i, int nu) {
  const ot_program *p = m->p;
  const ot_prog_storage *ps = &p->st[s];
  if (!m->rc || !m->chain_n[s] || nu >= p->n_ops || m->pin[s] == i || m->drop_need[s] ||
      (ps->role & RC_NOT_ACTIVATION) || !op_reads(&p->ops[nu], s))
    return 0;
  double up = 0, flops = 0;
  new_set(m); /* inputs counted once */
  for (int c = 0; c < m->chain_n[s]; c++) {
    const int k = m->chain[s * RC_CHAIN + c];
    const ot_op *o = &p->ops[k];
    flops += o->flops;
    for (int a = 0; a < o->n_acc; a++) {
      const int t = o->acc[a].st;
      const ot_prog_storage *pt = &p->st[t];
      if (t == s || !pt->block) continue;
      if ((pt->role & OT_ROLE_CACHE) || m->dropped[t]) return 0;
      if ((pt->role & OT_ROLE_WRITTEN) && !(pt->role & OT_ROLE_KEEP) && pt->last_use < nu) return 0;
      for (int u = ot_uses_from(pt, k + 1); u < pt->n_uses && pt->uses[u] < nu; u++)
        if (op_writes(&p->ops[pt->uses[u]], t)) return 0;
      if (!m->res[t] && add_set(m, t)) up += (double)pt->bytes;
    }
  }
  /* op nu's storages, the inputs of the chains rebuilt there, and s's */
  new_set(m);
  uint64_t ws = 0;
  const ot_op *on = &p->ops[nu];
  for (int a = 0; a < on->n_acc; a++) {
    const int q = on->acc[a].st;
    if (add_set(m, q)) ws += p->st[q].block;
    if (q == s || m->dropped[q]) add_chain_set(m, q, &ws);
  }
  if (ws > ot_arena_get_stats(m->arena).capacity) return 0;
  /* flops / rate + up / pcie < 2 bytes / pcie, i.e. sched.h's rule for bytes - up / 2 */
  return ot_recompute_cheaper((double)ps->bytes - up / 2.0, flops, m->rc_pcie, m->rc_flops);
}

/* Adds d (+1 or -1) to drop_need of every input of s's chain. */
static void chain_need(sim *m, int s, int d) {
  for (int c = 0; c < m->chain_n[s]; c++) {
    const ot_op *o = &m->p->ops[m->chain[s * RC_CHAIN + c]];
    for (int a = 0; a < o->n_acc; a++)
      if (o->acc[a].st != s) m->drop_need[o->acc[a].st] += d;
  }
}

/* After op i: the chains of what it wrote. An op that writes one storage
 * starts its chain by writing all of it, or extends it by writing into it
 * (reading it: an accumulation, an in-place update, a part); any other write
 * (an op with several outputs, a chain too long) ends it. */
static void note_writer(sim *m, int i) {
  const ot_op *o = &m->p->ops[i];
  int n_w = 0;
  for (int a = 0; a < o->n_acc; a++) n_w += o->acc[a].write != 0;
  for (int a = 0; a < o->n_acc; a++) {
    if (!o->acc[a].write) continue;
    const int s = o->acc[a].st;
    if (n_w == 1 && !o->acc[a].read) m->chain[s * RC_CHAIN] = i, m->chain_n[s] = 1;
    else if (n_w == 1 && m->chain_n[s] && m->chain_n[s] < RC_CHAIN) m->chain[s * RC_CHAIN + m->chain_n[s]++] = i;
    else m->chain_n[s] = 0;
  }
}

static ot_status evict(sim *m, int s, int i, ot_ev_reason why, int for_st) {
  int nu = sim_next_use(m, s, i);
  int live = nu != INT_MAX;
  unsigned fl = live ? OT_TRACE_EVICT : OT_TRACE_DEAD | (m->dirty[s] ? OT_TRACE_DIRTY : 0);
  if (m->dirty[s] && live && can_recompute(m, s, i, nu)) { /* dropped: rebuilt before op nu, not written home */
    m->dropped[s] = 1;
    chain_need(m, s, 1);
    fl |= OT_TRACE_RECOMPUTE;
  } else if (m->dirty[s] && live) {
    OT_TRY(emit(m, i, OT_EV_DOWNLOAD, why, 0, s));
    m->dirty[s] = 0;
  } else if (!m->dirty[s] && live) {
    fl |= OT_TRACE_CLEAN_DROP;
  }
  OT_TRY(emit(m, i, OT_EV_FREE, why, fl, s));
  m->out->ev[m->out->n_ev - 1].next_use = nu == INT_MAX ? -1 : nu;
  m->out->ev[m->out->n_ev - 1].for_st = for_st;
  OT_TRY(ot_arena_free(m->arena, m->off[s]));
  m->res[s] = 0;
  m->dirty[s] = 0;
  m->evicted[s] = 1;
  return OT_OK;
}

/* The resident copies in offset order, from the arena's live blocks (tagged
 * with their storage): no sort and no pass over every storage per eviction,
 * which made planning quadratic in the ops (bench/bench_plan.c). Fills
 * tmp[k] (storage, offset), ends[k], cost[k] (the eviction cost at op i; -1:
 * not evictable, pinned by op i or next used by op `after`) and the prefix
 * sums psum of the costs; returns their count. Copies placed without a tag
 * (the start set of a run) get theirs on the first call. */
static int residents_by_offset(sim *m, int i, int after) {
  int nb, r = 0, tagged = 0;
  const ot_arena_block *b = ot_arena_blocks(m->arena, &nb);
  m->psum[0] = 0;
  for (int k = 0; k < nb; k++) {
    if (b[k].free) continue;
    int s = b[k].tag;
    if (s < 0 && !tagged) { /* tag every resident copy once, then start over */
      for (int t = 0; t < m->n_st; t++)
        if (m->res[t]) ot_arena_set_tag(m->arena, m->off[t], t);
      tagged = 1;
      r = 0, k = -1;
      continue;
    }
    if (s < 0) { /* a block that is no resident copy (none today): it stays */
      if (r == m->n_st) return -1; /* more blocks than the scratch holds: no window */
      m->tmp[r] = (ot_resident){-1, b[k].off, 0};
      m->ends[r] = b[k].off + b[k].size;
      m->cost[r] = -1.0;
      m->psum[r + 1] = m->psum[r];
      r++;
      continue;
    }
    /* The cost of evicting it at op i: bytes to move back (twice for a
     * dirty copy, which is written home first) over the distance to its
     * next use. Its size is the arena block's (the storage's block, both
     * rounded up to OT_SCHED_ALIGN), not read from the program's storage
     * table, whose scattered reads cost more than the rest of this loop. */
    int nu = m->pin[s] == i ? -1 : sim_next_use(m, s, i);
    m->tmp[r] = (ot_resident){s, b[k].off, 0};
    m->ends[r] = b[k].off + b[k].size;
    m->cost[r] = nu < 0 || nu <= after ? -1.0
                 : nu == INT_MAX       ? 0.0
                                       : (double)b[k].size * (m->dirty[s] ? 2.0 : 1.0) / (double)(nu - i + 1);
    m->psum[r + 1] = m->psum[r] + (m->cost[r] > 0 ? m->cost[r] : 0);
    r++;
  }
  return r;
}

/* The cheapest run of consecutive resident copies whose eviction leaves a
 * free range of `need` bytes, among copies op i does not use and whose next
 * use comes after op `after`; evicts it. *found = 0 if there is none.
 *
 * Windows [a, b) are the copies a .. b-1; for each start a only the shortest
 * one that frees `need` counts (costs are >= 0). That shortest end only moves
 * right as a does, so the ends are found by two pointers (with a count of the
 * copies in the window that cannot go), not by a scan per start, and a
 * window's cost is estimated from prefix sums: it is summed exactly, left to
 * right as before (the same doubles, the same ties, the same plan), only
 * when the estimate does not already show it dearer than the best. Before,
 * every start scanned its window and a copy's cost was computed once per
 * window holding it: the bulk of planning an offloaded 10 000-op program. */
static ot_status evict_window(sim *m, int i, int after, size_t need, int for_st, int *found) {
  int r = residents_by_offset(m, i, after);
  *found = 0;
  if (r < 0) return OT_OK;
  size_t cap = ot_arena_get_stats(m->arena).capacity;
  /* |estimate - exact sum| <= (r + 1) * 2^-52 * the total, with room to spare */
  const double slack = 4.0 * (double)(r + 2) * 2.220446049250313e-16 * m->psum[r];
  int best_a = -1, best_b = -1, n_bad = 0; /* copies in [a, b) that cannot go */
  double best = 0;
  for (int a = 0, b = 0; a <= r; a++) {
    if (a > 0 && a - 1 < b && m->cost[a - 1] < 0) n_bad--; /* copy a-1 leaves the window */
    if (b < a) b = a, n_bad = 0;
    size_t lo = a == 0 ? 0 : m->ends[a - 1];
    while (b <= r && (b == r ? cap : m->tmp[b].off) - lo < need) {
      if (b < r && m->cost[b] < 0) n_bad++;
      b++;
    }
    if (b > r) break; /* nothing from here on frees enough */
    if (n_bad) continue;
    if (best_a >= 0 && m->psum[b] - m->psum[a] - slack >= best) continue;
    double cost = 0;
    for (int k = a; k < b && (best_a < 0 || cost < best); k++) cost += m->cost[k];
    if (best_a < 0 || cost < best) {
      best = cost;
      best_a = a;
      best_b = b;
    }
  }
  *found = best_a >= 0;
  for (int k = best_a; *found && k < best_b; k++) OT_TRY(evict(m, m->tmp[k].st, i, OT_WHY_EVICT, for_st));
  return OT_OK;
}

static int cmp_block_desc(const void *a, const void *b, void *pv) {
  const ot_program *p = pv;
  size_t x = p->st[*(const int *)a].block, y = p->st[*(const int *)b].block;
  if (x != y) return x > y ? -1 : 1;
  return *(const int *)a - *(const int *)b;
}

typedef struct blk_key {
  size_t block;
  int st;
} blk_key;

static int cmp_key_desc(const void *a, const void *b) {
  const blk_key *x = a, *y = b;
  if (x->block != y->block) return x->block > y->block ? -1 : 1;
  return x->st - y->st;
}

/* Insertion sort for an op's handful of storages; qsort for long lists
 * (placement.c's weights, strategy none's storages around a handoff: all of
 * a program's, where insertion was quadratic). One total order (block
 * descending, then index), so both give the same result. */
void ot_sort_by_block_desc(int *v, int n, const ot_program *p) {
  blk_key *k = n > 32 ? malloc((size_t)n * sizeof *k) : NULL;
  if (k) {
    for (int i = 0; i < n; i++) k[i] = (blk_key){p->st[v[i]].block, v[i]};
    qsort(k, (size_t)n, sizeof *k, cmp_key_desc);
    for (int i = 0; i < n; i++) v[i] = k[i].st;
    free(k);
    return;
  }
  for (int a = 1; a < n; a++)
    for (int b = a; b > 0 && cmp_block_desc(&v[b - 1], &v[b], (void *)p) > 0; b--) {
      int t = v[b];
      v[b] = v[b - 1];
      v[b - 1] = t;
    }
}

/* The storages op i needs resident in *need (m->stamp marks them): its own,
 * and the inputs of the producers that rebuild its dropped copies first
 * (recomputation). Returns their count. */
static int op_needs(sim *m, int i, int *need) {
  const ot_op *o = &m->p->ops[i];
  int n = 0;
  new_set(m);
  for (int k = 0; k < o->n_acc; k++)
    if (add_set(m, o->acc[k].st)) need[n++] = o->acc[k].st;
  for (int k = 0; k < o->n_acc; k++) {
    const int q = o->acc[k].st;
    for (int c = 0; m->dropped[q] && c < m->chain_n[q]; c++) {
      const ot_op *oc = &m->p->ops[m->chain[q * RC_CHAIN + c]];
      for (int b = 0; b < oc->n_acc; b++)
        if (add_set(m, oc->acc[b].st)) need[n++] = oc->acc[b].st;
    }
  }
  return n;
}

/* Makes every storage op i needs resident (op_needs); *missing gets those
 * placed. `need` is scratch of n_st entries. */
static ot_status place_op(sim *m, int i, int *missing, int *n_missing, int *needs, int *n_needed) {
  const int n_need = op_needs(m, i, needs);
  *n_needed = n_need;
  for (int k = 0; k < n_need; k++) m->pin[needs[k]] = i;
  int nm = 0;
  for (int k = 0; k < n_need; k++) {
    int s = needs[k];
    if (!m->res[s] && m->p->st[s].block) missing[nm++] = s;
  }
  ot_sort_by_block_desc(missing, nm, m->p);
  *n_missing = nm;
  for (int k = 0; k < nm; k++) {
    int s = missing[k];
    size_t need = m->p->st[s].block;
    int found = 1;
    while (found && ot_arena_alloc_tag(m->arena, need, s, &m->off[s]) != OT_OK)
      OT_TRY(evict_window(m, i, i, need, s, &found));
    if (found) {
      m->res[s] = 1;
      continue;
    }
    /* The op's own copies split the arena: undo this op's placements (no
     * event was emitted for them yet), evict everything (writing the op's
     * dirty copies home), and place all of the op's storages, largest first,
     * in the empty arena: that always fits when the working set does. */
    for (int q = 0; q < k; q++) {
      OT_TRY(ot_arena_free(m->arena, m->off[missing[q]]));
      m->res[missing[q]] = 0;
    }
    for (int t = 0; t < m->n_st; t++)
      if (m->res[t]) OT_TRY(evict(m, t, i, m->pin[t] == i ? OT_WHY_RELOCATE : OT_WHY_EVICT, s));
    nm = 0;
    for (int q = 0; q < n_need; q++)
      if (m->p->st[needs[q]].block) missing[nm++] = needs[q];
    ot_sort_by_block_desc(missing, nm, m->p);
    for (int q = 0; q < nm; q++) {
      OT_TRY(ot_arena_alloc_tag(m->arena, m->p->st[missing[q]].block, missing[q], &m->off[missing[q]]));
      m->res[missing[q]] = 1;
    }
    *n_missing = nm;
    break;
  }
  return OT_OK;
}

/* Prefetch on paper: before op i runs, places the copies the next
 * `lookahead` device ops read (ops i+1 .. i+lookahead without host ops), in order, while that needs no eviction of anything used
 * before them (victims must be next used after the op being served, Belady's
 * order); stops at the first copy that does not fit. The uploads are issued
 * in slot i, so they overlap op i. */
static ot_status prefetch_ahead(sim *m, int i) {
  const ot_program *p = m->p;
  /* ahead = device ops ahead: host ops (hybrid compute) place nothing, and
   * while they run PCIe is free for the next device op's copies */
  for (int j = i + 1, seen = 0; seen < m->lookahead && j < p->n_ops; j++) {
    if (m->host && m->host[j]) continue;
    seen++;
    const ot_op *o = &p->ops[j];
    for (int k = 0; k < o->n_acc; k++) {
      int s = o->acc[k].st;
      if (!o->acc[k].read || m->res[s] || !p->st[s].block) continue;
      if (host_writes_between(m, s, i, j)) continue; /* its home is not ready yet */
      if (m->dropped[s]) continue; /* rebuilt right before op j (place_op), not uploaded */
      int found = 1;
      while (found && ot_arena_alloc_tag(m->arena, p->st[s].block, s, &m->off[s]) != OT_OK)
        OT_TRY(evict_window(m, i, j, p->st[s].block, s, &found));
      if (!found) return OT_OK;
      m->res[s] = 1;
      const unsigned cross = host_wrote_last(m, s, j) ? OT_TRACE_CROSS : 0;
      OT_TRY(emit(m, i, OT_EV_UPLOAD, m->evicted[s] ? OT_WHY_RELOAD : OT_WHY_FIRST_USE, OT_TRACE_PREFETCH | cross, s));
      m->out->ev[m->out->n_ev - 1].op = j;
    }
  }
  return OT_OK;
}

/* A host op (hybrid compute): it places nothing; a dirty copy of what it
 * touches goes home first (a crossing activation; normally already sent
 * right after the device op that wrote it), and a copy of what it writes is
 * dropped, stale from then on. The uploads for the next op overlap it. */
static ot_status sim_host_op(sim *m, int i) {
  const ot_op *o = &m->src->ops[i];
  for (int k = 0; k < o->n_acc; k++) {
    const int s = o->acc[k].st;
    if (!m->p->st[s].block || !m->res[s]) continue;
    if (m->dirty[s] && o->acc[k].read) { /* (an output it writes whole needs no copy home) */
      OT_TRY(emit(m, i, OT_EV_DOWNLOAD, OT_WHY_CROSS, OT_TRACE_CROSS, s));
      m->dirty[s] = 0;
    }
    if (!o->acc[k].write) continue;
    OT_TRY(emit(m, i, OT_EV_FREE, OT_WHY_HOST_WRITE, 0, s));
    OT_TRY(ot_arena_free(m->arena, m->off[s]));
    m->res[s] = 0;
    m->evicted[s] = 1;
  }
  return prefetch_ahead(m, i);
}

/* defer_writeback (on): whether storage ps's copy stays dirty on the device
 * instead of going home after its last write. A persistent copy that may
 * stay; not an output: its home must hold it after every run, for the
 * caller or, in a pipeline stage, for the stages that read it from there
 * (issue 43: a trained weight the last stage updates and the first reads). */
static int defers(int defer, const ot_prog_storage *ps) {
  return defer && (ps->role & OT_ROLE_PERSIST) && (ps->role & OT_ROLE_KEEP) && !(ps->role & OT_ROLE_OUTPUT);
}

static ot_status sim_op(sim *m, int i, int *missing, int *need) {
  if (m->host && m->host[i]) return sim_host_op(m, i);
  const ot_program *p = m->p;
  const ot_op *o = &p->ops[i];
  int nm, n_need;
  OT_TRY(place_op(m, i, missing, &nm, need, &n_need));
  for (int k = 0; k < nm; k++) {
    const int s = missing[k];
    if (m->dropped[s]) continue; /* rebuilt below */
    const int read = op_reads(o, s) || !ot_op_access(o, s); /* (an input of a producer rebuilt here) */
    const unsigned cross = read && host_wrote_last(m, s, i) ? OT_TRACE_CROSS : 0;
    if (read) OT_TRY(emit(m, i, OT_EV_UPLOAD, m->evicted[s] ? OT_WHY_RELOAD : OT_WHY_FIRST_USE, cross, s));
    else OT_TRY(emit(m, i, OT_EV_ALLOC, OT_WHY_OUTPUT, 0, s));
  }
  /* recomputation: the dropped copies op i reads, rebuilt by their producers
   * on what is resident now (after this slot's placements, see plan_impl.h) */
  for (int k = 0; k < o->n_acc; k++) {
    const int s = o->acc[k].st;
    if (!m->dropped[s]) continue;
    for (int c = 0; c < m->chain_n[s]; c++) { /* the first places the block, the rest write into it */
      OT_TRY(emit(m, i, OT_EV_RECOMPUTE, c ? OT_WHY_RECOMPUTE_MORE : OT_WHY_RECOMPUTE, OT_TRACE_RECOMPUTE, s));
      m->out->ev[m->out->n_ev - 1].src_op = m->chain[s * RC_CHAIN + c];
    }
    chain_need(m, s, -1);
    m->dropped[s] = 0;
    m->dirty[s] = 1; /* its home never had it */
  }
  OT_TRY(prefetch_ahead(m, i));
  /* after the kernel: write-backs and frees go in slot i + 1 */
  for (int k = 0; k < o->n_acc; k++) {
    int s = o->acc[k].st;
    const ot_prog_storage *ps = &p->st[s];
    if (!ps->block) continue;
    if (o->acc[k].write && !(ps->role & OT_ROLE_CACHE)) m->dirty[s] = 1; /* a cache is dropped, never written home */
    if (m->host && m->dirty[s] && host_reads_next(m, s, i)) { /* hybrid: the host op needs it at home */
      OT_TRY(emit(m, i + 1, OT_EV_DOWNLOAD, OT_WHY_CROSS, OT_TRACE_CROSS, s));
      m->dirty[s] = 0;
    }
    /* defer_writeback: a persistent copy stays dirty; it is written home if
     * evicted (evict), if not kept at the end (drop_to), or by ot_sched_sync */
    const int deferred = defers(m->defer, ps);
    if (m->dirty[s] && (ps->role & OT_ROLE_WRITEBACK) && ps->last_write == i && !deferred) {
      OT_TRY(emit(m, i + 1, OT_EV_DOWNLOAD, OT_WHY_LAST_WRITE, 0, s));
      m->dirty[s] = 0;
    }
    if (ps->last_use == i && !(ps->role & OT_ROLE_KEEP)) {
      OT_TRY(emit(m, i + 1, OT_EV_FREE, OT_WHY_DEAD, OT_TRACE_DEAD | (m->dirty[s] ? OT_TRACE_DIRTY : 0), s));
      OT_TRY(ot_arena_free(m->arena, m->off[s]));
      m->res[s] = 0;
      m->dirty[s] = 0;
    }
  }
  /* an input of a producer rebuilt here that nothing uses any more (never
   * written, so clean: an input or a weight past its last use) goes now */
  for (int k = n_need - 1; k >= 0 && n_need > o->n_acc; k--) {
    const int t = need[k];
    const ot_prog_storage *pt = &p->st[t];
    if (ot_op_access(o, t) || !m->res[t] || (pt->role & OT_ROLE_KEEP) || pt->last_use > i) continue;
    OT_TRY(emit(m, i + 1, OT_EV_FREE, OT_WHY_DEAD, OT_TRACE_DEAD, t));
    OT_TRY(ot_arena_free(m->arena, m->off[t]));
    m->res[t] = 0;
  }
  if (m->rc) note_writer(m, i);
  /* (the inputs of producers rebuilt here stay pinned to op i: no later op
   * is i, and they had to stay put through this slot's prefetch) */
  for (int k = 0; k < o->n_acc; k++) m->pin[o->acc[k].st] = -1;
  return OT_OK;
}

/* How far ahead uploads are placed on paper: minimal none, balanced the
 * next op (double buffering), aggressive as far as the budget allows. */
static int lookahead(const ot_plan *plan) { return plan->strategy == OT_STRATEGY_MINIMAL ? 0 : 1; }

/* Simulates one run of the plan's program from `start` into `out` (events
 * in decision order, not yet timed) in its arena, with its strategy's
 * lookahead, defer setting and host ops; returns the kept copies resident
 * at the end in *end. */
static ot_status simulate(const ot_plan *plan, const ot_resident *start, int n_start, ot_schedule *out,
                          ot_resident *end, int *n_end) {
  const ot_program *p = plan->prog;
  sim m;
  OT_TRY(sim_init(&m, p, plan->capacity, out));
  m.host = plan->host_op;
  m.src = plan->src;
  m.lookahead = lookahead(plan);
  m.defer = plan->defer;
  m.rc = plan->recompute && !plan->host_op; /* hybrid: host ops write homes under the copies (not done) */
  m.rc_pcie = plan->rc_pcie;
  m.rc_flops = plan->rc_flops;
  ot_status s = OT_OK;
  /* an op's storages and, recomputing, the inputs of the producers it rebuilds: at most every storage */
  const size_t n_scratch = (size_t)(p->n_st > p->max_args ? p->n_st : p->max_args) + 1;
  int *missing = malloc(n_scratch * sizeof *missing), *need = malloc(n_scratch * sizeof *need);
  if (!missing || !need) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  for (int k = 0; s == OT_OK && k < n_start; k++) {
    int st = start[k].st;
    s = ot_arena_alloc_at(m.arena, start[k].off, p->st[st].block);
    m.res[st] = 1;
    m.off[st] = start[k].off;
    m.dirty[st] = (char)start[k].dirty;
  }
  for (int i = 0; s == OT_OK && i < p->n_ops; i++) s = sim_op(&m, i, missing, need);
  *n_end = 0;
  for (int st = 0; s == OT_OK && st < p->n_st; st++)
    if (m.res[st]) end[(*n_end)++] = (ot_resident){st, m.off[st], m.dirty[st]};
  free(missing);
  free(need);
  sim_free(&m);
  return s;
}

/* Frees at the end of the run the copies that are not kept (a dirty one,
 * deferred, is written home first). Membership by storage index (a copy is
 * kept iff its storage is in `keep` at the same offset), not a scan of
 * `keep` per copy: both sets hold every weight of a program that fits, and
 * that scan was quadratic in them (bench/bench_plan.c). */
static ot_status drop_to(ot_schedule *s, const ot_program *p, const ot_resident *end, int n_end,
                         const ot_resident *keep, int n_keep) {
  size_t *kept_at = malloc((size_t)(p->n_st ? p->n_st : 1) * sizeof *kept_at); /* offset + 1; 0: not kept */
  if (!kept_at) return ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  memset(kept_at, 0, (size_t)p->n_st * sizeof *kept_at);
  for (int k = 0; k < n_keep; k++) kept_at[keep[k].st] = keep[k].off + 1;
  ot_status r = OT_OK;
  for (int k = 0; r == OT_OK && k < n_end; k++)
    if (kept_at[end[k].st] != end[k].off + 1) {
      ot_plan_event e = {p->n_ops, p->n_ops, OT_EV_FREE, OT_WHY_NOT_KEPT, OT_TRACE_DEAD, end[k].st, end[k].off,
                         p->st[end[k].st].block, -1, -1, 0};
      if (end[k].dirty) {
        ot_plan_event w = e;
        w.kind = OT_EV_DOWNLOAD;
        w.flags = 0;
        r = ot_schedule_push(s, w);
      }
      if (r == OT_OK) r = ot_schedule_push(s, e);
    }
  free(kept_at);
  return r;
}

static ot_status set_start(ot_schedule *s, const ot_resident *set, int n) {
  free(s->start);
  s->start = malloc((size_t)(n ? n : 1) * sizeof *set);
  if (!s->start) return ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  if (n) memcpy(s->start, set, (size_t)n * sizeof *set);
  s->n_start = n;
  return OT_OK;
}

/* Strategy none: every storage at a fixed offset for the whole run. Kept
 * copies (weights, persistent) stay between runs; inputs and temporaries are
 * placed at the start of every run (inputs uploaded) and freed at its end. */
static ot_status build_none(ot_plan *plan) {
  const ot_program *p = plan->prog;
  uint64_t total = 0;
  for (int i = 0; i < p->n_st; i++) total += p->st[i].n_uses ? p->st[i].block : 0;
  char lbl[32];
  if (total > plan->capacity)
    return ot_fail(OT_ERR_BUDGET,
                   "strategy none keeps all %d tensors resident: %llu bytes (each rounded up to %d), but the budget "
                   "on %s is %llu bytes; raise the budget or use strategy minimal, balanced or aggressive",
                   p->n_st, (unsigned long long)total, OT_SCHED_ALIGN, ot_dev_label(plan->dev, lbl),
                   (unsigned long long)plan->budget);
  ot_arena *a;
  OT_TRY(ot_arena_create(plan->capacity, OT_SCHED_ALIGN, &a));
  const size_t n = (size_t)(p->n_st ? p->n_st : 1);
  ot_resident *keep = malloc(n * sizeof *keep);
  size_t *at = malloc(n * sizeof *at);
  char *handed = calloc(n, 1);
  int *order = malloc(n * sizeof *order);
  ot_status s = keep && at && handed && order ? OT_OK : ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  int n_keep = 0, n_order = 0;
  /* copies handed over by the previous plan stay where they are */
  for (int k = 0; s == OT_OK && k < plan->n_handoff; k++) {
    s = ot_arena_alloc_at(a, plan->handoff[k].off, p->st[plan->handoff[k].st].block);
    handed[plan->handoff[k].st] = 1;
    at[plan->handoff[k].st] = plan->handoff[k].off;
  }
  for (int i = 0; s == OT_OK && i < p->n_st; i++)
    if (p->st[i].block && p->st[i].n_uses && !handed[i]) order[n_order++] = i;
  /* the rest in storage order from offset 0 (always fits: total <= capacity),
   * or, around handed-over copies, largest first into the holes they leave
   * (the holes of the activations of a program like the last one) */
  if (s == OT_OK && plan->n_handoff) ot_sort_by_block_desc(order, n_order, p);
  for (int k = 0; s == OT_OK && k < n_order; k++) s = ot_arena_alloc(a, p->st[order[k]].block, &at[order[k]]);
  if (s == OT_ERR_DEVICE_OOM && plan->n_handoff)
    s = ot_fail(OT_ERR_BUDGET, "strategy none: the %d copies handed over by the previous plan leave no room for the "
                               "rest in one piece each", plan->n_handoff);
  for (int i = 0; s == OT_OK && i < p->n_st; i++) {
    const ot_prog_storage *ps = &p->st[i];
    if (!ps->block || !ps->n_uses) continue;
    const size_t off = at[i];
    int kept = (ps->role & OT_ROLE_KEEP) != 0;
    /* defer_writeback: a kept persistent copy it writes stays dirty instead of going home */
    const int deferred = defers(plan->defer, ps) && (ps->role & OT_ROLE_WRITTEN);
    if (kept) keep[n_keep++] = (ot_resident){i, off, deferred};
    int up = (ps->role & OT_ROLE_NEEDS_HOME) != 0;
    ot_plan_event place = {0, ps->first_use, (unsigned char)(up ? OT_EV_UPLOAD : OT_EV_ALLOC), OT_WHY_ALL_RESIDENT,
                           0, i, off, ps->block, -1, -1, 0};
    ot_plan_event wb = {ps->last_write + 1, ps->last_write + 1, OT_EV_DOWNLOAD, OT_WHY_LAST_WRITE, 0, i, off,
                        ps->block, -1, -1, 0};
    unsigned dirty = (ps->role & OT_ROLE_WRITTEN) && !(ps->role & OT_ROLE_WRITEBACK) ? OT_TRACE_DIRTY : 0;
    ot_plan_event fr = {p->n_ops, p->n_ops, OT_EV_FREE, OT_WHY_NOT_KEPT, OT_TRACE_DEAD | dirty, i, off, ps->block, -1, -1, 0};
    for (int pass = 0; s == OT_OK && pass < 2; pass++) {
      ot_schedule *sc = pass ? &plan->steady : &plan->first;
      if (pass ? !kept : !handed[i]) s = ot_schedule_push(sc, place);
      if (s == OT_OK && (ps->role & OT_ROLE_WRITEBACK) && !deferred) s = ot_schedule_push(sc, wb);
      if (s == OT_OK && !kept) s = ot_schedule_push(sc, fr);
    }
  }
  if (s == OT_OK) s = set_start(&plan->steady, keep, n_keep);
  if (s == OT_OK) s = set_start(&plan->first, plan->handoff, plan->n_handoff);
  free(keep);
  free(at);
  free(handed);
  free(order);
  ot_arena_destroy(a);
  return s;
}

/* The first run (from `start`) and the replays into *first and *steady. */
static ot_status build_pair(ot_plan *plan, const ot_resident *start, int n_start, ot_schedule *first,
                            ot_schedule *steady) {
  const ot_program *p = plan->prog;
  size_t n = (size_t)(p->n_st ? p->n_st : 1);
  ot_resident *end = malloc(n * sizeof *end), *keep = malloc(n * sizeof *keep);
  ot_status s = end && keep ? OT_OK : ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  int n_end = 0, n_keep = 0;
  if (s == OT_OK) s = simulate(plan, start, n_start, first, keep, &n_keep);
  int n_first_end = n_keep;
  ot_resident *first_end = NULL;
  if (s == OT_OK) {
    first_end = malloc(n * sizeof *first_end);
    if (first_end) memcpy(first_end, keep, (size_t)n_keep * sizeof *keep);
    else s = ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  }
  /* Shrink the kept set until a run started from it ends with it. */
  while (s == OT_OK) {
    ot_schedule_free(steady);
    s = simulate(plan, keep, n_keep, steady, end, &n_end);
    if (s != OT_OK) break;
    int m = 0, same = 1;
    for (int k = 0; k < n_keep; k++)
      for (int q = 0; q < n_end; q++)
        if (end[q].st == keep[k].st && end[q].off == keep[k].off) {
          /* A kept copy starts dirty if the first run or a replay may end
           * with it dirty (defer_writeback): assuming dirty only costs a
           * write-back when it is evicted, assuming clean would drop data.
           * The flags only grow, so this converges too. */
          const int d = keep[k].dirty | end[q].dirty;
          same &= d == keep[k].dirty;
          keep[m] = keep[k];
          keep[m++].dirty = d;
          break;
        }
    if (m == n_keep && same) break;
    n_keep = m;
  }
  if (s == OT_OK) s = drop_to(first, p, first_end, n_first_end, keep, n_keep);
  if (s == OT_OK) s = drop_to(steady, p, end, n_end, keep, n_keep);
  if (s == OT_OK) s = set_start(steady, keep, n_keep);
  if (s == OT_OK) s = set_start(first, start, n_start);
  free(end);
  free(keep);
  free(first_end);
  return s;
}

static uint64_t upload_bytes(const ot_schedule *sc, const ot_program *p) {
  uint64_t b = 0;
  for (int k = 0; k < sc->n_ev; k++)
    if (sc->ev[k].kind == OT_EV_UPLOAD) b += p->st[sc->ev[k].st].bytes;
  return b;
}

/* A first run from the handed-over copies that ends with `keep` (the kept
 * set of a plan started from an empty device): what it ends with outside
 * keep is dropped, what keep lacks is uploaded at the end. */
static ot_status build_bridged(ot_plan *plan, const ot_resident *keep, int n_keep, ot_schedule *first) {
  const ot_program *p = plan->prog;
  size_t n = (size_t)(p->n_st ? p->n_st : 1);
  ot_resident *end = malloc(n * sizeof *end);
  int n_end = 0;
  ot_status s = end ? OT_OK : ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  if (s == OT_OK) s = simulate(plan, plan->handoff, plan->n_handoff, first, end, &n_end);
  if (s == OT_OK) s = drop_to(first, p, end, n_end, keep, n_keep);
  size_t *end_at = s == OT_OK ? calloc(n, sizeof *end_at) : NULL; /* offset + 1 of what the run ends with */
  if (s == OT_OK && !end_at) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  for (int k = 0; s == OT_OK && k < n_end; k++) end_at[end[k].st] = end[k].off + 1;
  for (int k = 0; s == OT_OK && k < n_keep; k++) {
    if (end_at[keep[k].st] == keep[k].off + 1) continue;
    const int cache = (p->st[keep[k].st].role & OT_ROLE_CACHE) != 0;
    ot_plan_event up = {p->n_ops, p->n_ops, cache ? OT_EV_ALLOC : OT_EV_UPLOAD, OT_WHY_KEEP_SET, 0, keep[k].st, keep[k].off,
                        p->st[keep[k].st].block, -1, -1, 0};
    s = ot_schedule_push(first, up);
  }
  if (s == OT_OK) s = set_start(first, plan->handoff, plan->n_handoff);
  free(end_at);
  free(end);
  return s;
}

/* With copies handed over (ot_sched_plan_after), two ways to plan:
 *   A. the replays keep what a run from the handed-over copies keeps (where
 *      everything fits: the weights stay where the previous plan put them,
 *      nothing moves again);
 *   B. the replays are those of a plan from an empty device, and the first
 *      run bridges to their kept set (an offloaded plan: its kept set is
 *      laid out for the replays, which the handed-over offsets may not be).
 * B is taken only if its replays upload fewer bytes: every token pays the
 * replays, the bridge is paid once. */
static ot_status build_handed(ot_plan *plan) {
  const ot_program *p = plan->prog;
  ot_schedule fa = {0}, sa = {0}, fe = {0}, se = {0}, fb = {0};
  ot_status s = build_pair(plan, plan->handoff, plan->n_handoff, &fa, &sa);
  if (s == OT_OK) s = build_pair(plan, NULL, 0, &fe, &se);
  const int take_b = s == OT_OK && upload_bytes(&se, p) < upload_bytes(&sa, p);
  if (take_b) s = build_bridged(plan, se.start, se.n_start, &fb);
  if (s == OT_OK) {
    plan->first = take_b ? fb : fa;
    plan->steady = take_b ? se : sa;
    if (take_b) fb = (ot_schedule){0}, se = (ot_schedule){0};
    else fa = (ot_schedule){0}, sa = (ot_schedule){0};
  }
  ot_schedule_free(&fa);
  ot_schedule_free(&sa);
  ot_schedule_free(&fe);
  ot_schedule_free(&se);
  ot_schedule_free(&fb);
  return s;
}

ot_status ot_plan_build(ot_plan *plan) {
  if (plan->strategy == OT_STRATEGY_NONE) return build_none(plan);
  if (plan->n_handoff) return build_handed(plan);
  return build_pair(plan, NULL, 0, &plan->first, &plan->steady);
}
