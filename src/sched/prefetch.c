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
 *     stays put.
 * The result is checked by replaying it on an arena with exact offsets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/plan_impl.h"

static int overlaps(const ot_plan_event *a, const ot_plan_event *b) {
  return a->off < b->off + b->block && b->off < a->off + a->block;
}

/* Last use of storage s before op e, or -1. */
static int last_use_before(const ot_prog_storage *ps, int e) {
  int r = -1;
  for (int k = 0; k < ps->n_uses && ps->uses[k] < e; k++) r = ps->uses[k];
  return r;
}

static void move_evictions(ot_schedule *s, const ot_program *p) {
  for (int x = 0; x < s->n_ev; x++) {
    ot_plan_event *e = &s->ev[x];
    if (e->kind != OT_EV_FREE || (e->why != OT_WHY_EVICT && e->why != OT_WHY_RELOCATE)) continue;
    /* not before its last use, nor before (or in) the slot that placed it */
    int to = last_use_before(&p->st[e->st], e->slot) + 1;
    for (int y = x - 1; y >= 0; y--)
      if ((s->ev[y].kind == OT_EV_UPLOAD || s->ev[y].kind == OT_EV_ALLOC) && s->ev[y].st == e->st) {
        if (s->ev[y].slot + 1 > to) to = s->ev[y].slot + 1;
        break;
      }
    if (to >= e->slot) continue;
    /* its write-back (emitted right before it) moves with it */
    if (x > 0 && s->ev[x - 1].kind == OT_EV_DOWNLOAD && s->ev[x - 1].st == e->st && s->ev[x - 1].slot == e->slot)
      s->ev[x - 1].slot = to;
    e->slot = to;
  }
}

static void move_uploads(ot_schedule *s, ot_strategy strat) {
  for (int x = 0; x < s->n_ev; x++) {
    ot_plan_event *u = &s->ev[x];
    if (u->kind != OT_EV_UPLOAD) continue;
    int earliest = 0;
    for (int f = 0; f < x; f++) {
      const ot_plan_event *fr = &s->ev[f];
      if (fr->kind == OT_EV_FREE && (fr->st == u->st || overlaps(fr, u)) && fr->slot > earliest)
        earliest = fr->slot;
    }
    int to = strat == OT_STRATEGY_BALANCED ? (earliest > u->op - 1 ? earliest : u->op - 1) : earliest;
    if (to < u->slot) {
      u->slot = to;
      u->flags |= OT_TRACE_PREFETCH;
    }
  }
}

static int rank(const ot_plan_event *e) {
  return e->kind == OT_EV_DOWNLOAD ? 0 : e->kind == OT_EV_FREE ? 1 : 2;
}

/* Stable counting sort by (slot, rank): keeps the decision order within a
 * slot and rank. */
static ot_status sort_events(ot_schedule *s) {
  ot_plan_event *tmp = malloc((size_t)(s->n_ev ? s->n_ev : 1) * sizeof *tmp);
  if (!tmp) return ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  int max_slot = 0;
  for (int x = 0; x < s->n_ev; x++)
    if (s->ev[x].slot > max_slot) max_slot = s->ev[x].slot;
  int nkeys = (max_slot + 1) * 3;
  int *cnt = calloc((size_t)nkeys + 1, sizeof *cnt);
  if (!cnt) {
    free(tmp);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "planner: no host memory");
  }
  for (int x = 0; x < s->n_ev; x++) cnt[s->ev[x].slot * 3 + rank(&s->ev[x]) + 1]++;
  for (int k = 0; k < nkeys; k++) cnt[k + 1] += cnt[k];
  for (int x = 0; x < s->n_ev; x++) tmp[cnt[s->ev[x].slot * 3 + rank(&s->ev[x])]++] = s->ev[x];
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

ot_status ot_schedule_finish(ot_schedule *s, const ot_program *p, ot_strategy strat, size_t capacity) {
  if (strat == OT_STRATEGY_BALANCED || strat == OT_STRATEGY_AGGRESSIVE) {
    move_evictions(s, p);
    move_uploads(s, strat);
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
