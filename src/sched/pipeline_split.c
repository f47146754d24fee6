/* pipeline_split.c — where a pipeline cuts the op list (sched.h, "Several
 * devices").
 *
 * Stage k takes ops [cut[k], cut[k+1]). Its load is
 *     (W + n_ops) / capacity_k
 * with W the arena blocks of the weights and persistent state (storages the
 * planner may keep between runs, OT_ROLE_KEEP) that any of its ops touch,
 * each counted once per stage: what the device would hold for good if it
 * could, so spreading W in proportion to the budgets is what keeps every
 * device offloading the same share. The op count is a tie-breaker for
 * programs without weights (1 byte per op). A stage whose largest op working
 * set exceeds its capacity is impossible. The cuts minimise the largest load
 * (a linear-partition DP, O(stages * ops^2 * accesses): milliseconds for a
 * few hundred ops). */
#include <float.h>
#include <stdlib.h>

#include "core/error.h"
#include "sched/pipeline.h"

static uint64_t working_set(const ot_program *p, int i) {
  uint64_t b = 0;
  for (int k = 0; k < p->ops[i].n_acc; k++) b += p->st[p->ops[i].acc[k].st].block;
  return b;
}

/* Running load of a growing range of ops [j, i) on one stage. */
typedef struct range_acc {
  uint64_t w, max_ws;
  int n;
} range_acc;

static void range_add(range_acc *r, const ot_program *p, int i, int *stamp, int mark, const uint64_t *ws) {
  const ot_op *o = &p->ops[i];
  for (int k = 0; k < o->n_acc; k++) {
    int s = o->acc[k].st;
    if (stamp[s] == mark) continue;
    stamp[s] = mark;
    if (p->st[s].role & OT_ROLE_KEEP) r->w += p->st[s].block;
  }
  if (ws[i] > r->max_ws) r->max_ws = ws[i];
  r->n++;
}

static double range_load(const range_acc *r, size_t cap) {
  if (!cap || r->max_ws > cap) return DBL_MAX;
  return ((double)r->w + (double)r->n) / (double)cap;
}

/* The error when no split works: the op with the largest working set and the
 * largest capacity, which it exceeds, or the stage count. */
static ot_status no_split(const ot_program *p, int n, const size_t *cap, const uint64_t *ws) {
  int worst = 0;
  for (int i = 1; i < p->n_ops; i++)
    if (ws[i] > ws[worst]) worst = i;
  size_t best = 0;
  for (int k = 0; k < n; k++)
    if (cap[k] > best) best = cap[k];
  return ot_fail(OT_ERR_BUDGET,
                 "no split of %d ops over %d devices fits the budgets: op '%s' (#%d) needs %llu bytes at once and the "
                 "largest budget is %zu bytes, or the ops that need the larger budgets cannot all be on their "
                 "devices; raise the budgets (--gpu-memory-limit 0:SIZE,1:SIZE) or use fewer devices",
                 p->n_ops, n, p->ops[worst].name, worst, (unsigned long long)ws[worst], best);
}

ot_status ot_pipeline_split(const ot_program *p, int n, const size_t *cap, int *cut, uint64_t *weight) {
  int N = p->n_ops;
  size_t cells = (size_t)n * (size_t)(N + 1);
  double *best = malloc(cells * sizeof *best);
  int *arg = malloc(cells * sizeof *arg);
  int *stamp = malloc((size_t)(p->n_st ? p->n_st : 1) * sizeof *stamp);
  uint64_t *ws = malloc((size_t)(N ? N : 1) * sizeof *ws);
  ot_status s = OT_OK;
  if (!best || !arg || !stamp || !ws) {
    s = ot_fail(OT_ERR_OUT_OF_MEMORY, "pipeline split: no host memory");
    goto done;
  }
  for (int i = 0; i < N; i++) ws[i] = working_set(p, i);
  for (int i = 0; i < p->n_st; i++) stamp[i] = -1;
  for (size_t c = 0; c < cells; c++) best[c] = DBL_MAX, arg[c] = -1;
  int mark = 0;
  /* best[k][i]: the lowest max load of ops [0, i) over stages 0..k, each non-empty */
  for (int k = 0; k < n; k++) {
    for (int j = k; j < N; j++) {
      double before = k ? best[(size_t)(k - 1) * (N + 1) + j] : 0;
      if (k && (j == 0 || before == DBL_MAX)) continue;
      if (!k && j) break; /* stage 0 starts at op 0 */
      range_acc r = {0, 0, 0};
      mark++;
      for (int i = j + 1; i <= N - (n - 1 - k); i++) {
        range_add(&r, p, i - 1, stamp, mark, ws);
        double l = range_load(&r, cap[k]);
        if (l == DBL_MAX) break; /* a longer range only holds more */
        double m = l > before ? l : before;
        double *b = &best[(size_t)k * (N + 1) + i];
        if (m < *b) *b = m, arg[(size_t)k * (N + 1) + i] = j;
      }
    }
  }
  if (best[(size_t)(n - 1) * (N + 1) + N] == DBL_MAX) {
    s = no_split(p, n, cap, ws);
    goto done;
  }
  cut[n] = N;
  for (int k = n - 1; k >= 0; k--) cut[k] = arg[(size_t)k * (N + 1) + cut[k + 1]];
  for (int k = 0; k < n; k++) {
    range_acc r = {0, 0, 0};
    mark++;
    for (int i = cut[k]; i < cut[k + 1]; i++) range_add(&r, p, i, stamp, mark, ws);
    weight[k] = r.w;
  }
done:
  free(best);
  free(arg);
  free(stamp);
  free(ws);
  return s;
}
