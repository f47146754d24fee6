/* sched_support.c — test ops and random programs (sched_support.h). */
#include "sched_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/batch.h"
#include "ot_pragmas.h"

uint64_t ts_block(uint64_t bytes) { return (bytes + OT_SCHED_ALIGN - 1) / OT_SCHED_ALIGN * OT_SCHED_ALIGN; }

/* One output: y[n] from up to three inputs x_k[n_k] (NULL: absent). */
static void mix_kernel(int dev, float *y, int64_t n, const float *x0, int64_t n0, const float *x1, int64_t n1,
                       const float *x2, int64_t n2, float a0, float a1, float a2, float c) {
  OT_PARFOR(dev, OT_DEVPTR(y, x0, x1, x2))
  for (int64_t j = 0; j < n; j++) {
    float v = c;
    if (x0) v += a0 * x0[j % n0];
    if (x1) v += a1 * x1[j % n1];
    if (x2) v += a2 * x2[j % n2];
    y[j] = 0.5f * v;
  }
}

ot_status ts_mix_run(const ot_op_exec *e) {
  const ts_mix_params *prm = e->params;
  const float *x[TS_MAX_IN] = {NULL, NULL, NULL};
  int64_t n[TS_MAX_IN] = {1, 1, 1};
  for (int k = 0; k < e->n_in && k < TS_MAX_IN; k++) {
    x[k] = e->in[k];
    n[k] = ot_tensor_numel(e->in_t[k]);
    if (!n[k]) x[k] = NULL, n[k] = 1;
  }
  float s = prm->scalar_slot >= 0 ? (float)e->scalars[prm->scalar_slot] : 0.0f;
  for (int o = 0; o < e->n_out; o++) {
    float c = prm->b + (float)o + 0.25f * s;
    mix_kernel(e->device, e->out[o], ot_tensor_numel(e->out_t[o]), x[0], n[0], x[1], n[1], x[2], n[2], prm->a[0],
               prm->a[1], prm->a[2], c);
  }
  return OT_OK;
}

/* ---- batching: one mix op as an instruction, run by the launcher ---------------- */
ts_batch_stats ts_batch;

typedef struct mix_insn {
  int dev, n_out;
  const float *x[TS_MAX_IN];
  int64_t n[TS_MAX_IN];
  float a[TS_MAX_IN], c[TS_MAX_OUT];
  float *y[TS_MAX_OUT];
  int64_t ny[TS_MAX_OUT];
} mix_insn;

/* ts_mix_run's arguments, encoded */
static int mix_emit(const ot_op_exec *e, void *insns) {
  if (e->op_index % 5 == 0) return 0;
  const ts_mix_params *prm = e->params;
  mix_insn *m = insns;
  memset(m, 0, sizeof *m);
  m->dev = e->device;
  m->n_out = e->n_out;
  for (int k = 0; k < TS_MAX_IN; k++) {
    m->n[k] = 1;
    m->a[k] = prm->a[k];
  }
  for (int k = 0; k < e->n_in && k < TS_MAX_IN; k++) {
    m->x[k] = e->in[k];
    m->n[k] = ot_tensor_numel(e->in_t[k]);
    if (!m->n[k]) m->x[k] = NULL, m->n[k] = 1;
  }
  const float s = prm->scalar_slot >= 0 ? (float)e->scalars[prm->scalar_slot] : 0.0f;
  for (int o = 0; o < e->n_out; o++) {
    m->c[o] = prm->b + (float)o + 0.25f * s;
    m->y[o] = e->out[o];
    m->ny[o] = ot_tensor_numel(e->out_t[o]);
  }
  return 1;
}

static ot_status mix_launch(int dev, void *insns, int n) {
  const mix_insn *v = insns;
  for (int i = 0; i < n; i++) {
    if (v[i].dev != dev) return ot_fail(OT_ERR_STATE, "mix_launch: instruction for device %d on %d", v[i].dev, dev);
    for (int o = 0; o < v[i].n_out; o++)
      mix_kernel(dev, v[i].y[o], v[i].ny[o], v[i].x[0], v[i].n[0], v[i].x[1], v[i].n[1], v[i].x[2], v[i].n[2],
                 v[i].a[0], v[i].a[1], v[i].a[2], v[i].c[o]);
  }
  ts_batch.launches++;
  ts_batch.insns += n;
  if (n > ts_batch.longest) ts_batch.longest = n;
  return OT_OK;
}

ot_status ts_add_mix(ot_program *p, const char *name, ot_tensor *const *in, int n_in, ot_tensor *const *out,
                     int n_out, const ts_mix_params *prm) {
  double bytes = 0;
  for (int k = 0; k < n_in; k++) bytes += (double)ot_tensor_nbytes(in[k]);
  ot_op_desc d = {name, ts_mix_run, n_in, in, n_out, out, prm, sizeof *prm, 0, bytes};
  OT_TRY(ot_program_add_op(p, &d));
  if (!ts_batch.on) return OT_OK;
  return ot_program_set_batch(p, ot_program_num_ops(p) - 1, mix_emit, mix_launch, sizeof(mix_insn));
}

uint64_t ts_rand(ts_rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 2685821657736338717ull;
}

int ts_rand_int(ts_rng *r, int lo, int hi) { return lo + (int)(ts_rand(r) % (uint64_t)(hi - lo + 1)); }

float ts_rand_float(ts_rng *r) { return (float)((double)(ts_rand(r) >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

void ts_fill(ot_tensor *t, uint64_t seed) {
  ts_rng r = {seed * 0x9E3779B97F4A7C15ull + 1};
  float *d = ot_tensor_data(t);
  for (int64_t j = 0; j < ot_tensor_numel(t); j++) d[j] = ts_rand_float(&r);
}

static ot_status keep(ts_randprog *rp, ot_tensor *t) {
  if (rp->n_t == rp->cap_t) {
    int nc = rp->cap_t ? rp->cap_t * 2 : 32;
    ot_tensor **nt = realloc(rp->t, (size_t)nc * sizeof *nt);
    if (!nt) return OT_ERR_OUT_OF_MEMORY;
    rp->t = nt;
    rp->cap_t = nc;
  }
  rp->t[rp->n_t++] = t;
  return OT_OK;
}

static ot_status new_tensor(ts_randprog *rp, const char *kind, int idx, int64_t n, ot_tensor **out) {
  char nm[32];
  snprintf(nm, sizeof nm, "%s%d", kind, idx);
  OT_TRY(ot_tensor_create(rp->ctx, nm, OT_F32, 1, &n, out));
  return keep(rp, *out);
}

/* Sizes spread over several arena blocks so that placement and
 * fragmentation matter: 1 .. ~3000 floats. */
static int64_t rand_size(ts_rng *r) {
  static const int64_t base[] = {1, 17, 64, 100, 257, 640, 1000, 3000};
  return base[ts_rand_int(r, 0, 7)] + ts_rand_int(r, 0, 40);
}

typedef struct gen {
  ts_randprog *rp;
  ts_rng r;
  int n_val;
  ot_tensor *val[96];  /* values ops may read */
  int writable[96];    /* a produced temporary or persistent (may be updated in place) */
} gen;

static ot_status add_value(gen *g, ot_tensor *t, int writable) {
  if (g->n_val == 96) return OT_OK;
  g->val[g->n_val] = t;
  g->writable[g->n_val++] = writable;
  return OT_OK;
}

static ot_status gen_op(gen *g, int i) {
  ts_randprog *rp = g->rp;
  ts_rng *r = &g->r;
  ts_mix_params prm = {{0.3f * ts_rand_float(r), 0.3f * ts_rand_float(r), 0.3f * ts_rand_float(r)},
                       0.1f * ts_rand_float(r), ts_rand_int(r, 0, 3) == 0 ? rp->scalar : -1};
  ot_tensor *in[TS_MAX_IN], *out[TS_MAX_OUT];
  int n_in = ts_rand_int(r, 1, TS_MAX_IN), n_out = 1;
  int kind = ts_rand_int(r, 0, 9);
  char nm[32];
  snprintf(nm, sizeof nm, "op%d", i);
  /* inputs: half the time the latest value (a chain), else any (a DAG) */
  for (int k = 0; k < n_in; k++)
    in[k] = g->val[(k == 0 && ts_rand_int(r, 0, 1)) ? g->n_val - 1 : ts_rand_int(r, 0, g->n_val - 1)];
  if (kind <= 1) {
    /* in place on a writable value: listed as input 0 and as the output;
     * no other input may share its storage (the kernel reads x[j % n]) */
    int w = -1;
    for (int tries = 0; tries < 8 && w < 0; tries++) {
      int c = ts_rand_int(r, 0, g->n_val - 1);
      if (g->writable[c]) w = c;
    }
    if (w >= 0) {
      in[0] = out[0] = g->val[w];
      int m = 1;
      for (int k = 1; k < n_in; k++)
        if (!ot_tensor_same_storage(in[k], out[0])) in[m++] = in[k];
      n_in = m;
      return ts_add_mix(rp->p, nm, in, n_in, out, 1, &prm);
    }
  }
  if (kind == 2) {
    /* a partial write: a slice of a new temporary (the rest keeps its home value) */
    ot_tensor *t, *v;
    int64_t n = rand_size(r) + 8;
    OT_TRY(new_tensor(rp, "s", i, n, &t));
    OT_TRY(ot_tensor_slice(t, 0, n / 4, n / 2, &v));
    OT_TRY(keep(rp, v));
    out[0] = v;
    OT_TRY(ts_add_mix(rp->p, nm, in, n_in, out, 1, &prm));
    return add_value(g, t, 0);
  }
  if (kind == 3) n_out = 2;
  for (int o = 0; o < n_out; o++) {
    OT_TRY(new_tensor(rp, "t", i * 2 + o, rand_size(r), &out[o]));
  }
  OT_TRY(ts_add_mix(rp->p, nm, in, n_in, out, n_out, &prm));
  for (int o = 0; o < n_out; o++) OT_TRY(add_value(g, out[o], 1));
  /* now and then a view of a produced value as a later input */
  if (ts_rand_int(r, 0, 4) == 0 && ot_tensor_numel(out[0]) > 4) {
    ot_tensor *v;
    OT_TRY(ot_tensor_slice(out[0], 0, 1, ot_tensor_numel(out[0]) - 2, &v));
    OT_TRY(keep(rp, v));
    OT_TRY(add_value(g, v, 0));
  }
  return OT_OK;
}

static ot_status build(ts_randprog *rp, uint64_t seed) {
  gen g = {0};
  g.rp = rp;
  g.r.s = seed * 0x2545F4914F6CDD1Dull + 7;
  OT_TRY(ot_program_create(rp->ctx, &rp->p));
  OT_TRY(ot_program_scalar_create(rp->p, "step", &rp->scalar));
  int nw = ts_rand_int(&g.r, 1, 5), ni = ts_rand_int(&g.r, 1, 2), np = ts_rand_int(&g.r, 0, 2);
  for (int k = 0; k < nw; k++) {
    ot_tensor *t;
    OT_TRY(new_tensor(rp, "w", k, rand_size(&g.r), &t));
    ts_fill(t, seed * 131 + (uint64_t)k);
    /* weights are listed several times: reused by many ops */
    OT_TRY(add_value(&g, t, 0));
    OT_TRY(add_value(&g, t, 0));
  }
  for (int k = 0; k < ni; k++) {
    ot_tensor *t;
    OT_TRY(new_tensor(rp, "x", k, rand_size(&g.r), &t));
    OT_TRY(ot_program_mark_input(rp->p, t));
    rp->in[rp->n_in++] = t;
    OT_TRY(add_value(&g, t, 0));
  }
  for (int k = 0; k < np; k++) {
    ot_tensor *t;
    OT_TRY(new_tensor(rp, "kv", k, rand_size(&g.r), &t));
    ts_fill(t, seed * 977 + (uint64_t)k);
    OT_TRY(ot_program_mark_persistent(rp->p, t));
    rp->chk[rp->n_chk++] = t;
    OT_TRY(add_value(&g, t, 1));
  }
  int n_ops = ts_rand_int(&g.r, 3, 18);
  for (int i = 0; i < n_ops; i++) OT_TRY(gen_op(&g, i));
  /* outputs: the last value and a few random produced ones */
  for (int k = 0; k < 3 && rp->n_chk < 32; k++) {
    int c = k == 0 ? g.n_val - 1 : ts_rand_int(&g.r, 0, g.n_val - 1);
    if (!g.writable[c]) continue;
    OT_TRY(ot_program_mark_output(rp->p, g.val[c]));
    rp->chk[rp->n_chk++] = g.val[c];
  }
  return OT_OK;
}

ot_status ts_randprog_create(ot_ctx *ctx, uint64_t seed, ts_randprog **out) {
  ts_randprog *rp = calloc(1, sizeof *rp);
  if (!rp) return OT_ERR_OUT_OF_MEMORY;
  rp->ctx = ctx;
  ot_status s = build(rp, seed);
  if (s != OT_OK) {
    ts_randprog_destroy(rp);
    return s;
  }
  *out = rp;
  return OT_OK;
}

void ts_randprog_destroy(ts_randprog *rp) {
  if (!rp) return;
  ot_program_destroy(rp->p);
  for (int k = 0; k < rp->n_t; k++) ot_tensor_destroy(rp->t[k]);
  free(rp->t);
  free(rp);
}

void ts_randprog_prepare_run(ts_randprog *rp, int run) {
  for (int k = 0; k < rp->n_in; k++) ts_fill(rp->in[k], (uint64_t)run * 7919 + (uint64_t)k + 1);
  ot_program_set_scalar(rp->p, rp->scalar, run + 1);
}

int64_t ts_randprog_snapshot(const ts_randprog *rp, float *dst) {
  int64_t n = 0;
  for (int k = 0; k < rp->n_chk; k++) {
    int64_t m = ot_tensor_numel(rp->chk[k]);
    if (dst) memcpy(dst + n, ot_tensor_data(rp->chk[k]), (size_t)m * sizeof(float));
    n += m;
  }
  return n;
}

ot_status ts_randprog_runs(ts_randprog *rp, ot_sched_opts *o, int budget_kind, int runs, ot_trace *tr, float **out,
                           int64_t *n) {
  *out = NULL;
  *n = ts_randprog_snapshot(rp, NULL);
  uint64_t minb;
  ot_status st = ot_sched_min_budget(rp->p, &minb, NULL);
  if (st != OT_OK) return st;
  o->budget_bytes = budget_kind == 0 ? minb : budget_kind == 1 ? minb * 2 : 1ull << 30;
  ot_plan *plan;
  if ((st = ot_sched_plan(rp->ctx, rp->p, o, &plan)) != OT_OK) return st;
  float *v = malloc((size_t)(*n * runs + 1) * sizeof *v);
  if (!v) st = OT_ERR_OUT_OF_MEMORY;
  for (int r = 0; st == OT_OK && r < runs; r++) {
    ts_randprog_prepare_run(rp, r);
    if ((st = ot_sched_run(plan, tr)) == OT_OK) ts_randprog_snapshot(rp, v + r * *n);
  }
  ot_plan_destroy(plan);
  if (st == OT_OK) st = ot_trace_check_budget(tr, o->budget_bytes);
  if (st != OT_OK) {
    free(v);
    return st;
  }
  *out = v;
  return OT_OK;
}
