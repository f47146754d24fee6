/* hybrid.c — hybrid compute: which ops run on the host's cores (sched.h,
 * ot_compute; src/sched/README.md "Hybrid compute").
 *
 * Under a budget a decode step streams the weights that do not fit over
 * PCIe, ~54 GB/s on the H200, while the host's cores can read host memory
 * about as fast again (90 GB/s for a torch matvec on the GPU machine's 16
 * cores, issue 20). An op run on the host reads its weights where they
 * live, so moving a share of the streamed ops there lets both read at once:
 * a step is bounded by non-resident bytes / (PCIe + host rate).
 *
 * The plan: first the all-device plan, which says how many bytes each op
 * makes stream (its uploads in the steady replay). Then a share f of those
 * bytes goes to the host, by error diffusion in program order (the host
 * ops spread through the step, so PCIe keeps streaming the device ops'
 * weights into the budget while the host computes; a block of host ops in
 * a row would leave the budget full and PCIe idle), and the plan is made
 * again: with fewer ops on the device, more of its weights may stay
 * resident, so the split is searched (bisection on f) until the predicted
 * PCIe time of the device ops and the host time of the host ops meet.
 * Predicted host time per op: max(bytes it reads / host rate, flops / host
 * flop rate) plus two activation crossings; ops where the host would be far
 * slower than streaming their weights (a prompt's GEMMs) are no candidates.
 *
 * How a host op runs (planner.c, executor.c): it places nothing; a dirty
 * device copy of what it reads goes home first, right after the device op
 * that wrote it, copied on the compute thread (OT_TRACE_CROSS); a copy of
 * what it writes is dropped (stale); the device op that reads its output
 * next uploads it, on the compute thread too. The planner works on a view
 * of the program in which host ops touch nothing and storages list only
 * the device ops' uses, so eviction distances and dead copies ignore the
 * host ops; the host ops' own accesses are read from the caller's program. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "memory/context_impl.h"
#include "memory/device.h"
#include "ot_pragmas.h"
#include "sched/costs.h"
#include "sched/plan_impl.h"

static const char *const compute_names[OT_COMPUTE_COUNT] = {"auto", "gpu", "hybrid"};

const char *ot_compute_name(ot_compute c) { return (unsigned)c < OT_COMPUTE_COUNT ? compute_names[c] : "?"; }

ot_status ot_compute_parse(const char *s, ot_compute *out) {
  const int i = ot_name_index(compute_names, OT_COMPUTE_COUNT, s);
  if (i >= 0) {
    *out = (ot_compute)i;
    return OT_OK;
  }
  return ot_fail(OT_ERR_INVALID_ARG, "unknown compute placement '%s' (use auto, gpu or hybrid)", s ? s : "(null)");
}

void ot_hybrid_free(ot_plan *plan) {
  free(plan->host_op);
  free(plan->view_ops);
  free(plan->view_uses);
  plan->host_op = NULL;
  plan->view_ops = NULL;
  plan->view_uses = NULL;
  plan->n_host_ops = 0;
}

/* The view for host ops `host` (NULL or none set: the caller's program). */
static ot_status make_view(ot_plan *plan, const unsigned char *host) {
  const ot_program *src = plan->src;
  ot_hybrid_free(plan);
  free(plan->view_st);
  plan->view_st = NULL;
  plan->prog = (ot_program *)src;
  int n_host = 0;
  for (int i = 0; host && i < src->n_ops; i++) n_host += host[i] != 0;
  if (!n_host) return OT_OK;
  size_t n_uses = 0;
  for (int i = 0; i < src->n_st; i++) n_uses += (size_t)src->st[i].n_uses;
  plan->host_op = malloc((size_t)src->n_ops);
  plan->view_ops = malloc((size_t)src->n_ops * sizeof *plan->view_ops);
  plan->view_st = malloc((size_t)(src->n_st ? src->n_st : 1) * sizeof *plan->view_st);
  plan->view_uses = malloc((n_uses ? n_uses : 1) * sizeof *plan->view_uses);
  if (!plan->host_op || !plan->view_ops || !plan->view_st || !plan->view_uses) {
    ot_hybrid_free(plan);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "hybrid compute: no host memory");
  }
  for (int i = 0; i < src->n_ops; i++) plan->host_op[i] = host[i] != 0;
  plan->n_host_ops = n_host;
  memcpy(plan->view_ops, src->ops, (size_t)src->n_ops * sizeof *plan->view_ops);
  for (int i = 0; i < src->n_ops; i++)
    if (plan->host_op[i]) plan->view_ops[i].n_acc = 0;
  memcpy(plan->view_st, src->st, (size_t)src->n_st * sizeof *plan->view_st);
  int *u = plan->view_uses;
  for (int s = 0; s < src->n_st; s++) {
    const ot_prog_storage *ps = &src->st[s];
    ot_prog_storage *vs = &plan->view_st[s];
    vs->uses = u;
    vs->n_uses = 0;
    vs->first_use = vs->last_use = vs->last_write = -1;
    for (int k = 0; k < ps->n_uses; k++) {
      const int i = ps->uses[k];
      if (plan->host_op[i]) continue;
      u[vs->n_uses++] = i;
      if (vs->first_use < 0) vs->first_use = i;
      vs->last_use = i;
      const ot_access *a = ot_op_access(&src->ops[i], s);
      if (a && a->write) vs->last_write = i;
    }
    u += vs->n_uses;
  }
  plan->view = *src;
  plan->view.ops = plan->view_ops;
  plan->view.st = plan->view_st;
  plan->prog = &plan->view;
  return OT_OK;
}

/* Bytes op i reads (each storage once). */
static double read_bytes(const ot_program *p, int i) {
  double b = 0;
  for (int k = 0; k < p->ops[i].n_acc; k++)
    if (p->ops[i].acc[k].read) b += (double)p->st[p->ops[i].acc[k].st].bytes;
  return b;
}

/* Seconds a small synchronous copy between the host and device `dev`
 * takes (the cost of an activation crossing), measured once per process:
 * the fastest of 8 round trips of 4 KiB, halved. */
static ot_status measure_cross_latency(int dev, double *out) {
  static double cached = -1.0;
  double r;
  OT_CRITICAL(ot_cross_latency)
  r = cached;
  if (r >= 0) return *out = r, OT_OK;
  enum { BYTES = 4096 };
  static char host[BYTES];
  void *d = NULL;
  /* a refused allocation or copy is the plan's failure, not a default
   * (issue 43: the status was dropped here and generation went on) */
  ot_status s = ot_mem_alloc(OT_MEM_DEVICE, dev, BYTES, &d);
  double best = -1;
  for (int k = 0; s == OT_OK && k < 8; k++) {
    const double t0 = omp_get_wtime();
    s = ot_mem_copy(d, ot_omp_device(dev), host, OT_DEVICE_HOST, BYTES);
    if (s == OT_OK) s = ot_mem_copy(host, OT_DEVICE_HOST, d, ot_omp_device(dev), BYTES);
    const double t = (omp_get_wtime() - t0) / 2;
    if (s == OT_OK && (best < 0 || t < best)) best = t;
  }
  ot_mem_free(OT_MEM_DEVICE, dev, d);
  if (s != OT_OK) return ot_fail_context(s, "measuring a small copy's latency to device %d (hybrid compute)", dev);
  r = best > 0 ? best : OT_CROSS_LATENCY_S;
  OT_CRITICAL(ot_cross_latency)
  cached = r;
  *out = r;
  return OT_OK;
}

/* Why hybrid cannot run for this plan (NULL: it can). */
static const char *not_possible(const ot_plan *plan) {
  if (plan->ctx->backend == OT_BACKEND_HOST || ot_dev_is_host(plan->dev))
    return "there is no device apart from the host to split ops with (backend host); it needs a GPU, or the "
           "host-offload plugin, and backend map";
  if (plan->ctx->backend != OT_BACKEND_MAP) return "it needs backend map";
  if (plan->strategy == OT_STRATEGY_NONE) return "strategy none keeps everything on the device";
  if (plan->defer) return "it does not combine with defer_writeback (the trainers)";
  return NULL;
}

typedef struct split {
  const ot_program *p;
  double *up;     /* [n_ops] bytes each op makes stream in the all-device plan's steady replay */
  double *host_s; /* [n_ops] predicted host seconds (-1: no candidate) */
  double r_pcie;
} split;

/* Bytes the steady replay uploads per op (inputs excluded: the caller
 * rewrites them every run, wherever the op runs); ro_op: of those, the
 * bytes of storages no op writes (weights). */
static double steady_uploads(const ot_plan *plan, double *per_op, double *ro_op) {
  const ot_schedule *sc = &plan->steady;
  double t = 0;
  for (int k = 0; k < sc->n_ev; k++) {
    const ot_plan_event *e = &sc->ev[k];
    const unsigned role = plan->src->st[e->st].role;
    if (e->kind != OT_EV_UPLOAD || (role & OT_ROLE_INPUT)) continue;
    const double b = (double)plan->src->st[e->st].bytes;
    if (per_op && e->op >= 0 && e->op < plan->src->n_ops) per_op[e->op] += b;
    if (ro_op && e->op >= 0 && e->op < plan->src->n_ops && !(role & OT_ROLE_WRITTEN)) ro_op[e->op] += b;
    t += b;
  }
  return t;
}

/* Host ops for share f of the streamed bytes, spread by error diffusion. */
static int choose(const split *sp, double f, unsigned char *host) {
  double debt = 0;
  int n = 0;
  for (int i = 0; i < sp->p->n_ops; i++) {
    host[i] = 0;
    if (sp->host_s[i] < 0) continue;
    debt += f * sp->up[i];
    if (debt >= 0.5 * sp->up[i]) {
      host[i] = 1;
      debt -= sp->up[i];
      n++;
    }
  }
  return n;
}

/* Plans with host ops `host`; predicted step seconds in *t (PCIe of the
 * device ops against the host's time, whichever is longer). */
static ot_status try_split(ot_plan *plan, const split *sp, const unsigned char *host, double *t, double *t_pcie,
                           double *t_host) {
  OT_TRY(make_view(plan, host));
  OT_TRY(ot_plan_schedules(plan));
  double th = 0;
  for (int i = 0; host && i < sp->p->n_ops; i++)
    if (host[i]) th += sp->host_s[i];
  *t_pcie = steady_uploads(plan, NULL, NULL) / sp->r_pcie;
  *t_host = th;
  *t = *t_pcie > th ? *t_pcie : th;
  return OT_OK;
}

static void fill_stats(ot_plan *plan) {
  const ot_program *src = plan->src;
  for (int pass = 0; pass < 2; pass++) {
    ot_schedule *sc = pass ? &plan->steady : &plan->first;
    sc->stats.n_host_ops = plan->n_host_ops;
    sc->stats.host_read_rate = plan->n_host_ops ? plan->host_rate : 0;
    sc->stats.host_read_bytes = 0;
    sc->stats.cross_bytes = 0;
    for (int i = 0; plan->host_op && i < src->n_ops; i++)
      if (plan->host_op[i]) sc->stats.host_read_bytes += (uint64_t)read_bytes(src, i);
    for (int k = 0; k < sc->n_ev; k++)
      if (sc->ev[k].flags & OT_TRACE_CROSS) sc->stats.cross_bytes += src->st[sc->ev[k].st].bytes;
  }
}

ot_status ot_hybrid_plan(ot_plan *plan, const ot_sched_opts *o) {
  const ot_program *src = plan->src;
  const char *why = not_possible(plan);
  if (o->host_ops) { /* forced (tests) */
    if (why) return ot_fail(OT_ERR_INVALID_ARG, "ot_sched_plan: host ops given, but hybrid compute is off here: %s", why);
    plan->host_rate = o->host_read_rate > 0 ? o->host_read_rate : OT_RATE_HOST_READ;
    OT_TRY(make_view(plan, o->host_ops));
    OT_TRY(ot_plan_schedules(plan));
    fill_stats(plan);
    return OT_OK;
  }
  if (o->compute == OT_COMPUTE_HYBRID && why) {
    char lbl[32];
    return ot_fail(OT_ERR_INVALID_ARG, "compute hybrid on %s: %s; use --compute gpu (or auto)",
                   ot_dev_label(plan->dev, lbl), why);
  }
  OT_TRY(ot_plan_schedules(plan));
  if (o->compute == OT_COMPUTE_GPU || why || src->n_ops < 2) return OT_OK;
  if (o->compute == OT_COMPUTE_AUTO && !ot_dev_is_gpu(plan->dev)) return OT_OK; /* an emulated device: asked only */
  /* a host op reads its weights at home: under a host budget (file homes,
   * homes.c) that would keep them in host memory whatever the budget, so
   * auto leaves every op on the device there; --compute hybrid still asks */
  if (o->compute == OT_COMPUTE_AUTO && plan->ctx->host_budget) return OT_OK;
  const int n = src->n_ops;
  split sp = {src, calloc((size_t)n, sizeof(double)), malloc((size_t)n * sizeof(double)), 0};
  double *ro = calloc((size_t)n, sizeof(double));
  unsigned char *host = calloc((size_t)n, 1), *best_host = calloc((size_t)n, 1);
  ot_status s = sp.up && sp.host_s && ro && host && best_host ? OT_OK : ot_fail(OT_ERR_OUT_OF_MEMORY, "hybrid compute: no host memory");
  if (s != OT_OK) goto done;
  const double total = steady_uploads(plan, sp.up, ro);
  if (total <= 0) goto done; /* everything stays resident: nothing to gain */
  /* the rates: the caller's, else measured now by its callback (only a plan
   * that streams pays for the measurement), else defaults */
  double host_rate = o->host_read_rate, pcie_rate = o->pcie_rate;
  if (host_rate <= 0 && o->measure_rates)
    s = o->measure_rates(plan->dev, &host_rate, pcie_rate > 0 ? NULL : &pcie_rate);
  double cross = o->cross_latency_s;
  if (s == OT_OK && cross <= 0) s = measure_cross_latency(plan->dev, &cross);
  if (s != OT_OK) goto done;
  plan->host_rate = host_rate > 0 ? host_rate : OT_RATE_HOST_READ;
  sp.r_pcie = pcie_rate > 0 ? pcie_rate : OT_RATE_PINNED;
  const double t_gpu = total / sp.r_pcie;
  const double flops_rate = OT_RATE_HOST_FLOPS_PER_THREAD * (double)omp_get_max_threads();
  double cand_bytes = 0, cand_s = 0;
  for (int i = 0; i < n; i++) {
    sp.host_s[i] = -1;
    /* candidates: ops whose streamed bytes are weights (a matvec), not
     * state they write (an optimizer's parameters, a KV cache): moved to
     * the host, written state would only cross back every run */
    if (sp.up[i] <= 0 || ro[i] < OT_HYBRID_MIN_WEIGHT_SHARE * sp.up[i]) continue;
    const double rb = read_bytes(src, i), fl = src->ops[i].flops;
    const double h = (rb / plan->host_rate > fl / flops_rate ? rb / plan->host_rate : fl / flops_rate) +
                     2 * cross;
    if (h > 2.0 * sp.up[i] / sp.r_pcie) continue; /* the host would be far slower than streaming it */
    sp.host_s[i] = h;
    cand_bytes += sp.up[i];
    cand_s += h;
  }
  /* the best any split of the candidates can do: both sides busy to the end */
  if (cand_bytes <= 0) goto done;
  const double r_host = cand_bytes / cand_s;
  const double ideal = (total - cand_bytes) / sp.r_pcie + cand_bytes / (sp.r_pcie + r_host);
  if (o->compute == OT_COMPUTE_AUTO && ideal > OT_HYBRID_MIN_GAIN * t_gpu) goto done;
  double lo = 0, hi = 1, best = -1, tp, th, t;
  for (int it = 0; it < 8; it++) {
    const double f = 0.5 * (lo + hi);
    if (!choose(&sp, f, host)) {
      lo = f;
      continue;
    }
    s = try_split(plan, &sp, host, &t, &tp, &th);
    if (s != OT_OK) goto done;
    if (best < 0 || t < best) {
      memcpy(best_host, host, (size_t)n);
      best = t;
    }
    if (tp > th) lo = f;
    else hi = f;
  }
  /* auto: only a clear gain; hybrid (asked): the best split found, even if
   * predicted slower (the summary shows what it chose and predicted) */
  if (best < 0 || (o->compute == OT_COMPUTE_AUTO && best > OT_HYBRID_MIN_GAIN * t_gpu)) {
    s = make_view(plan, NULL); /* every op on the device */
    if (s == OT_OK) s = ot_plan_schedules(plan);
    goto done;
  }
  s = make_view(plan, best_host);
  if (s == OT_OK) s = ot_plan_schedules(plan);
done:
  if (s == OT_OK) fill_stats(plan);
  free(sp.up);
  free(sp.host_s);
  free(ro);
  free(host);
  free(best_host);
  return s;
}
