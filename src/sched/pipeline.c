/* pipeline.c — a plan over several devices: each stage's ops recorded again
 * as a sub-program (the same tensors, run functions, params and scalars),
 * marked so that values written in one stage and read in another pass
 * through their homes, and planned on its own device by the single-device
 * planner (sched.h, "Several devices"). */
#include <stdlib.h>
#include <string.h>

#include "memory/context_impl.h"
#include "core/error.h"
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

/* Marks storage s (view t) in stage k's sub-program:
 *   input       an input of the program, or read before written here while
 *               another stage writes it (an activation passed in, or state
 *               another stage updates): uploaded from home, never kept;
 *   output      written here, and its home must hold it (the program's
 *               result or state, or another stage reads it before writing);
 *   persistent  as in the program.
 * A storage no stage writes stays a weight: every device using it keeps its
 * own copy. */
static ot_status mark_storage(ot_program *sub, const ot_program *p, const unsigned char *u, int n, int k, int s,
                              const ot_tensor *t) {
  unsigned f = u[(size_t)s * n + k], role = p->st[s].role;
  if (role & OT_ROLE_CACHE) return ot_program_mark_cache(sub, t); /* each device its own, like a weight */
  if ((role & OT_ROLE_INPUT) || ((f & USE_READS_FIRST) && elsewhere(u, n, s, k, USE_WRITES)))
    OT_TRY(ot_program_mark_input(sub, t));
  if ((f & USE_WRITES) && ((role & OT_ROLE_WRITEBACK) || elsewhere(u, n, s, k, USE_READS_FIRST)))
    OT_TRY(ot_program_mark_output(sub, t));
  if (role & OT_ROLE_PERSIST) OT_TRY(ot_program_mark_persistent(sub, t));
  return OT_OK;
}

static ot_status build_sub(ot_ctx *ctx, const ot_program *p, const unsigned char *u, int n, int k, const int *cut,
                           ot_program **out) {
  ot_program *sub;
  OT_TRY(ot_program_create(ctx, &sub));
  ot_status s = OT_OK;
  for (int i = 0; s == OT_OK && i < p->n_scalars; i++) {
    int slot;
    s = ot_program_scalar_create(sub, p->scalar_names[i], &slot); /* same slots, in order */
  }
  for (int i = cut[k]; s == OT_OK && i < cut[k + 1]; i++) {
    const ot_op *o = &p->ops[i];
    ot_op_desc d = {o->name, o->run, o->n_in, o->t, o->n_out, o->t + o->n_in, o->params, o->params_bytes,
                    o->flops, o->bytes};
    s = ot_program_add_op(sub, &d);
  }
  /* every storage of the stage once, through one of its views */
  unsigned char *done = calloc((size_t)(p->n_st ? p->n_st : 1), 1);
  if (s == OT_OK && !done) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "pipeline: no host memory");
  for (int i = cut[k]; s == OT_OK && i < cut[k + 1]; i++)
    for (int x = 0; s == OT_OK && x < p->ops[i].n_in + p->ops[i].n_out; x++) {
      int st = p->ops[i].ts[x];
      if (done[st]) continue;
      done[st] = 1;
      s = mark_storage(sub, p, u, n, k, st, p->ops[i].t[x]);
    }
  free(done);
  if (s != OT_OK) {
    ot_program_destroy(sub);
    return s;
  }
  *out = sub;
  return OT_OK;
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
    plan->n_stages = k + 1; /* what ot_pipeline_free must release */
    s = build_sub(plan->ctx, p, u, n, k, cut, &st->sub);
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

ot_status ot_pipeline_plan(ot_plan *plan, const ot_sched_opts *o, int n_stages) {
  const ot_program *p = plan->prog;
  int n = n_stages < p->n_ops ? n_stages : p->n_ops; /* every stage gets an op */
  size_t *cap = calloc((size_t)n, sizeof *cap);
  int *cut = calloc((size_t)n + 1, sizeof *cut);
  uint64_t *weight = calloc((size_t)n, sizeof *weight);
  plan->stages = calloc((size_t)n, sizeof *plan->stages);
  ot_status s = OT_OK;
  if (!cap || !cut || !weight || !plan->stages) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "pipeline: no host memory");
  for (int k = 0; s == OT_OK && k < n; k++) {
    uint64_t b = o->budget_bytes ? o->budget_bytes : plan->ctx->budget[o->device_index + k];
    uint64_t c = b & ~(uint64_t)(OT_SCHED_ALIGN - 1);
    cap[k] = c > SIZE_MAX ? SIZE_MAX & ~(size_t)(OT_SCHED_ALIGN - 1) : (size_t)c;
  }
  if (s == OT_OK) s = ot_pipeline_split(p, n, cap, cut, weight);
  if (s == OT_OK) s = plan_stages(plan, o, n, cut, weight);
  free(cap);
  free(cut);
  free(weight);
  return s; /* on failure the caller destroys the plan (ot_pipeline_free) */
}

ot_status ot_pipeline_run(ot_plan *plan, ot_trace *trace) {
  const ot_program *p = plan->prog;
  for (int k = 0; k < plan->n_stages; k++) {
    ot_stage *st = &plan->stages[k];
    /* the scalars the caller set on the program, for this run */
    if (p->n_scalars) memcpy(st->sub->scalars, p->scalars, (size_t)p->n_scalars * sizeof *p->scalars);
    OT_TRY(ot_exec_run(st->plan, trace, k > 0));
  }
  return OT_OK;
}

void ot_pipeline_free(ot_plan *plan) {
  for (int k = 0; k < plan->n_stages; k++) {
    ot_plan_destroy(plan->stages[k].plan); /* before its program */
    ot_program_destroy(plan->stages[k].sub);
  }
  free(plan->stages);
  plan->stages = NULL;
  plan->n_stages = 0;
}
