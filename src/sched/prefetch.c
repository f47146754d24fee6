/* prefetch.c — when each decision is carried out.
 *
 * The planner decides residency just in time: a copy is placed right before
 * the op that needs it, and a victim is evicted right when its space is
 * needed. The prefetching strategies then move work earlier without changing
 * any offset, so the arena never holds two copies in one place:
 *   - a victim's eviction (and write-back) moves to right after its last use
 *     before the eviction: nothing reads it in between;
 *   - an upload moves to the slot where the last earlier copy overlapping its
 *     range was freed (and after its own previous eviction): `aggressive`
 *     goes there, `balanced` goes at most one op ahead of its use, `minimal`
 *     stays put. An upload of what a host op wrote (OT_TRACE_CROSS, hybrid
 *     compute) stays where the planner put it, after that op.
 * A recomputation (OT_EV_RECOMPUTE) stays where the planner put it, right
 * before the op that reads what it rebuilds, and counts as a use of its
 * producer's inputs: no eviction of one moves before it.
 * The result is checked by replaying it on an arena with exact offsets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/plan_impl.h"

static int overlaps(const ot_plan_event *a, const ot_plan_event *b) {
  return a->off < b->off + b->block && b->off < a->off + a->block;
}

/* Last use of storage s before op e, or -1 (uses are increasing: a binary
 * search, as a weight of a long program has many). */
static int last_use_before(const ot_prog_storage *ps, int e) {
  const int lo = ot_uses_from(ps, e);
  return lo ? ps->uses[lo - 1] : -1;
}

static ot_status move_evictions(ot_schedule *s, const ot_program *p) {
  /* placed[st]: slot of st's latest placement among the events before x
   * (-1: none), kept as x advances instead of a backward scan per eviction,
   * which was quadratic in the events; this pass moves frees and
   * write-backs only, so the placements' slots it reads do not change */
  int *placed = malloc((size_t)(p->n_st ? p->n_st : 1) * sizeof *placed);
  if (!placed) return ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  for (int k = 0; k < p->n_st; k++) placed[k] = -1;
  for (int x = 0; x < s->n_ev; x++) {
    ot_plan_event *e = &s->ev[x];
    if (e->kind == OT_EV_UPLOAD || e->kind == OT_EV_ALLOC || e->kind == OT_EV_RECOMPUTE) placed[e->st] = e->slot;
    if (e->kind == OT_EV_RECOMPUTE) { /* its producer reads these in this slot: not freed before the next */
      const ot_op *o = &p->ops[e->src_op];
      for (int a = 0; a < o->n_acc; a++)
        if (placed[o->acc[a].st] < e->slot) placed[o->acc[a].st] = e->slot;
    }
    if (e->kind != OT_EV_FREE || (e->why != OT_WHY_EVICT && e->why != OT_WHY_RELOCATE)) continue;
    /* not before its last use, nor before (or in) the slot that placed it */
    int to = last_use_before(&p->st[e->st], e->slot) + 1;
    if (placed[e->st] >= 0 && placed[e->st] + 1 > to) to = placed[e->st] + 1;
    if (to >= e->slot) continue;
    /* its write-back (emitted right before it) moves with it */
    if (x > 0 && s->ev[x - 1].kind == OT_EV_DOWNLOAD && s->ev[x - 1].st == e->st && s->ev[x - 1].slot == e->slot)
      s->ev[x - 1].slot = to;
    e->slot = to;
  }
  free(placed);
  return OT_OK;
}

/* The old scan of every earlier event per upload, kept for schedules with
 * empty blocks (the interval tree below needs non-empty ranges). */
/* balanced: how early an upload for op j may go: the slot of the device op
 * before j (op j - 1 without host ops; hybrid compute: past the host ops in
 * between, which leave the device and PCIe to it). */
static int balanced_slot(const unsigned char *host, int j) {
  int q = j - 1;
  while (host && q > 0 && host[q]) q--;
  return q;
}

static void move_uploads_scan(ot_schedule *s, ot_strategy strat, const unsigned char *host) {
  for (int x = 0; x < s->n_ev; x++) {
    ot_plan_event *u = &s->ev[x];
    if (u->kind != OT_EV_UPLOAD || (u->flags & OT_TRACE_CROSS)) continue; /* a crossing: after its host op */
    int earliest = 0;
    for (int f = 0; f < x; f++) {
      const ot_plan_event *fr = &s->ev[f];
      if (fr->kind == OT_EV_FREE && (fr->st == u->st || overlaps(fr, u)) && fr->slot > earliest)
        earliest = fr->slot;
    }
    const int bal = balanced_slot(host, u->op);
    int to = strat == OT_STRATEGY_BALANCED ? (earliest > bal ? earliest : bal) : earliest;
    if (to < u->slot) {
      u->slot = to;
      u->flags |= OT_TRACE_PREFETCH;
    }
  }
}

/* Max-of-slots over arena ranges: a segment tree over the distinct event
 * boundaries; `chmax` raises every cell of a range, `max` reads a range. */
typedef struct slot_tree {
  int n;
  int *mx, *tag; /* [4n]: the max under a node, and a raise applied to its whole range */
} slot_tree;

static void tree_chmax(slot_tree *t, int node, int l, int r, int ql, int qr, int v) {
  if (qr <= l || r <= ql || t->tag[node] >= v) return; /* the whole range is already >= v */
  if (ql <= l && r <= qr) {
    if (v > t->tag[node]) t->tag[node] = v;
    if (v > t->mx[node]) t->mx[node] = v;
    return;
  }
  int m = (l + r) / 2;
  tree_chmax(t, 2 * node, l, m, ql, qr, v);
  tree_chmax(t, 2 * node + 1, m, r, ql, qr, v);
  int c = t->mx[2 * node] > t->mx[2 * node + 1] ? t->mx[2 * node] : t->mx[2 * node + 1];
  if (c > t->mx[node]) t->mx[node] = c;
}

static int tree_max(const slot_tree *t, int node, int l, int r, int ql, int qr) {
  if (qr <= l || r <= ql) return 0;
  if (ql <= l && r <= qr) return t->mx[node];
  int m = (l + r) / 2, a = tree_max(t, 2 * node, l, m, ql, qr), b = tree_max(t, 2 * node + 1, m, r, ql, qr);
  int c = a > b ? a : b;
  return c > t->tag[node] ? c : t->tag[node];
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return (x > y) - (x < y);
}

static int coord(const size_t *c, int n, size_t v) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (c[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Each upload moves to the latest slot of an earlier free of its storage or
 * of a range overlapping its own (no earlier: that space was still in use).
 * Asked of every earlier event per upload, that was quadratic in the events
 * (seconds for an offloaded 10 000-op program, bench/bench_plan.c); here the
 * frees go into a segment tree over the ranges as the pass advances, and a
 * per-storage maximum covers frees of the same storage elsewhere. The
 * frees' slots do not change in this pass, so the answers are the scan's. */
static ot_status move_uploads(ot_schedule *s, const ot_program *p, ot_strategy strat, const unsigned char *host) {
  for (int x = 0; x < s->n_ev; x++)
    if (!s->ev[x].block) {
      move_uploads_scan(s, strat, host);
      return OT_OK;
    }
  size_t ne = (size_t)(s->n_ev ? s->n_ev : 1), nc = 0;
  size_t *c = malloc(2 * ne * sizeof *c);
  int *freed = malloc((size_t)(p->n_st ? p->n_st : 1) * sizeof *freed);
  slot_tree t = {0, calloc(8 * ne, sizeof *t.mx), calloc(8 * ne, sizeof *t.tag)};
  ot_status r = c && freed && t.mx && t.tag ? OT_OK : ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  if (r == OT_OK) {
    for (int x = 0; x < s->n_ev; x++) c[nc++] = s->ev[x].off, c[nc++] = s->ev[x].off + s->ev[x].block;
    qsort(c, nc, sizeof *c, cmp_size);
    size_t u = 0;
    for (size_t k = 0; k < nc; k++)
      if (!u || c[k] != c[u - 1]) c[u++] = c[k];
    t.n = (int)u - 1 > 0 ? (int)u - 1 : 1; /* cells [c[k], c[k+1]) */
    for (int k = 0; k < p->n_st; k++) freed[k] = 0;
    for (int x = 0; x < s->n_ev; x++) {
      ot_plan_event *e = &s->ev[x];
      int lo = coord(c, (int)u, e->off), hi = coord(c, (int)u, e->off + e->block);
      if (e->kind == OT_EV_FREE) {
        tree_chmax(&t, 1, 0, t.n, lo, hi, e->slot);
        if (e->slot > freed[e->st]) freed[e->st] = e->slot;
        continue;
      }
      if (e->kind != OT_EV_UPLOAD || (e->flags & OT_TRACE_CROSS)) continue; /* a crossing: after its host op */
      int earliest = tree_max(&t, 1, 0, t.n, lo, hi);
      if (freed[e->st] > earliest) earliest = freed[e->st];
      const int bal = balanced_slot(host, e->op);
      int to = strat == OT_STRATEGY_BALANCED ? (earliest > bal ? earliest : bal) : earliest;
      if (to < e->slot) {
        e->slot = to;
        e->flags |= OT_TRACE_PREFETCH;
      }
    }
  }
  free(c);
  free(freed);
  free(t.mx);
  free(t.tag);
  return r;
}

/* Within a slot: write-backs, frees, placements, then recomputations (on
 * the copies the placements brought). */
#define N_RANKS 4
static int rank(const ot_plan_event *e) {
  return e->kind == OT_EV_DOWNLOAD ? 0 : e->kind == OT_EV_FREE ? 1 : e->kind == OT_EV_RECOMPUTE ? 3 : 2;
}

/* Stable counting sort by (slot, rank): keeps the decision order within a
 * slot and rank. */
static ot_status sort_events(ot_schedule *s) {
  ot_plan_event *tmp = malloc((size_t)(s->n_ev ? s->n_ev : 1) * sizeof *tmp);
  if (!tmp) return ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  int max_slot = 0;
  for (int x = 0; x < s->n_ev; x++)
    if (s->ev[x].slot > max_slot) max_slot = s->ev[x].slot;
  int nkeys = (max_slot + 1) * N_RANKS;
  int *cnt = calloc((size_t)nkeys + 1, sizeof *cnt);
  if (!cnt) {
    free(tmp);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  }
  for (int x = 0; x < s->n_ev; x++) cnt[s->ev[x].slot * N_RANKS + rank(&s->ev[x]) + 1]++;
  for (int k = 0; k < nkeys; k++) cnt[k + 1] += cnt[k];
  for (int x = 0; x < s->n_ev; x++) tmp[cnt[s->ev[x].slot * N_RANKS + rank(&s->ev[x])]++] = s->ev[x];
  if (s->n_ev) memcpy(s->ev, tmp, (size_t)s->n_ev * sizeof *tmp);
  free(tmp);
  free(cnt);
  return OT_OK;
}

/* Replays the schedule on an arena with exact offsets (no two copies in one
 * place, nothing beyond the capacity) and counts what it does. */
static ot_status verify(ot_schedule *s, const ot_program *p, size_t capacity) {
  ot_arena *a;
  OT_TRY(ot_arena_create(capacity, OT_SCHED_ALIGN, &a));
  ot_plan_stats st = {0};
  st.arena_bytes = capacity;
  uint64_t used = 0;
  ot_status r = OT_OK;
  for (int k = 0; r == OT_OK && k < s->n_start; k++) {
    r = ot_arena_alloc_at(a, s->start[k].off, p->st[s->start[k].st].block);
    used += p->st[s->start[k].st].block;
  }
  st.kept_bytes = used;
  st.peak_bytes = used;
  for (int x = 0; r == OT_OK && x < s->n_ev; x++) {
    const ot_plan_event *e = &s->ev[x];
    switch (e->kind) {
    case OT_EV_UPLOAD:
    case OT_EV_ALLOC:
      r = ot_arena_alloc_at(a, e->off, e->block);
      used += e->block;
      if (e->kind == OT_EV_UPLOAD) {
        st.uploads++;
        st.bytes_up += p->st[e->st].bytes;
      } else {
        st.allocs++;
      }
      break;
    case OT_EV_RECOMPUTE:
      if (e->why == OT_WHY_RECOMPUTE) { /* the first op of a rebuild places the block */
        r = ot_arena_alloc_at(a, e->off, e->block);
        used += e->block;
        st.recomputes++;
        st.recompute_bytes += p->st[e->st].bytes;
      }
      st.recompute_kernels++;
      st.recompute_flops += p->ops[e->src_op].flops;
      break;
    case OT_EV_FREE:
      r = ot_arena_free(a, e->off);
      used -= e->block;
      if (e->flags & OT_TRACE_EVICT) st.evictions++;
      break;
    case OT_EV_DOWNLOAD:
      st.downloads++;
      st.bytes_down += p->st[e->st].bytes;
      break;
    }
    if (used > st.peak_bytes) st.peak_bytes = used;
    if (r != OT_OK) {
      char why[256];
      snprintf(why, sizeof why, "%s", ot_last_error());
      r = ot_fail(OT_ERR_STATE, "planner bug: event %d (slot %d, storage '%s') is not consistent with the arena: %s",
                  x, e->slot, p->st[e->st].name, why);
    }
  }
  ot_arena_destroy(a);
  s->stats = st;
  return r;
}

ot_status ot_schedule_finish(ot_schedule *s, const ot_program *p, ot_strategy strat, size_t capacity,
                             const unsigned char *host) {
  if (strat == OT_STRATEGY_BALANCED || strat == OT_STRATEGY_AGGRESSIVE) {
    OT_TRY(move_evictions(s, p));
    /* hybrid compute: uploads as early as their space is free whatever the
     * strategy. Host ops leave PCIe idle unless the next device ops'
     * copies stream during them: one device op ahead (balanced) gave 89 ms
     * steps on the H200 where this gives 73 (25 % budget, 7 GB model) */
    OT_TRY(move_uploads(s, p, host ? OT_STRATEGY_AGGRESSIVE : strat, host));
  }
  OT_TRY(sort_events(s));
  free(s->slot_start);
  s->slot_start = malloc((size_t)(p->n_ops + 2) * sizeof *s->slot_start);
  if (!s->slot_start) return ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  int x = 0;
  for (int slot = 0; slot <= p->n_ops + 1; slot++) {
    while (x < s->n_ev && s->ev[x].slot < slot) x++;
    s->slot_start[slot] = x;
  }
  return verify(s, p, capacity);
}
