/* recompute.c — activation checkpointing: the modes' names and the choice
 * of the checkpointed layers (sched.h, ot_recompute_choose). */
#include <string.h>

#include "core/error.h"
#include "omptensor/sched.h"

static const char *const recompute_names[] = {"none", "all", "auto"};

const char *ot_recompute_name(ot_recompute c) { return (unsigned)c < 3 ? recompute_names[c] : "?"; }

ot_status ot_recompute_parse(const char *s, ot_recompute *out) {
  for (int i = 0; s && i < 3; i++)
    if (!strcmp(s, recompute_names[i])) {
      *out = (ot_recompute)i;
      return OT_OK;
    }
  return ot_fail(OT_ERR_INVALID_ARG, "--checkpoint: '%s' is not one of none, all, auto", s ? s : "(null)");
}

int ot_recompute_cheaper(double bytes, double flops, double pcie_bytes_per_s, double flops_per_s) {
  return flops / flops_per_s < 2.0 * bytes / pcie_bytes_per_s;
}

/* Does the step with recompute[] run without offloading: its plan evicts no
 * live copy, in the first run or the replays? (Not strategy `none`, which
 * needs every storage at once: a recomputed activation is a new storage, but
 * the one it replaces is dead by then and its space reused.) */
static ot_status fits_resident(const ot_recompute_policy *po, const int *recompute, int *fits) {
  ot_plan *pl = NULL;
  ot_status s = po->trial(po->user, recompute, &pl);
  *fits = s == OT_OK && ot_plan_get_stats(pl, 0).evictions == 0 && ot_plan_get_stats(pl, 1).evictions == 0;
  ot_plan_destroy(pl);
  return s == OT_OK || s == OT_ERR_BUDGET ? OT_OK : s;
}

/* The first k layers are checkpoints (their activations would live longest). */
static ot_status trial_first_k(const ot_recompute_policy *po, int *recompute, int k, int *fits) {
  for (int l = 0; l < po->layers; l++) recompute[l] = l < k;
  return fits_resident(po, recompute, fits);
}

/* auto: nothing recomputed if everything fits; else the fewest checkpoints
 * (the first k layers, k by bisection) that make it run without offloading;
 * else every layer the cost model finds cheaper to recompute than to offload. */
static ot_status choose_auto(const ot_recompute_policy *po, int *recompute) {
  const int L = po->layers;
  int fits;
  OT_TRY(trial_first_k(po, recompute, 0, &fits));
  if (fits) return OT_OK;
  OT_TRY(trial_first_k(po, recompute, L, &fits));
  if (!fits) {
    for (int l = 0; l < L; l++) {
      double bytes = 0, flops = 0;
      po->cost(po->user, l, &bytes, &flops);
      recompute[l] = ot_recompute_cheaper(bytes, flops, po->pcie_bytes_per_s, po->flops_per_s);
    }
    return OT_OK;
  }
  int lo = 1, hi = L; /* hi fits */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    OT_TRY(trial_first_k(po, recompute, mid, &fits));
    if (fits) hi = mid;
    else lo = mid + 1;
  }
  for (int l = 0; l < L; l++) recompute[l] = l < hi;
  return OT_OK;
}

ot_status ot_recompute_choose(const ot_recompute_policy *po, int *recompute) {
  if (!po || (po->layers > 0 && !recompute))
    return ot_fail(OT_ERR_INVALID_ARG, "ot_recompute_choose: NULL argument");
  if ((unsigned)po->mode > OT_RECOMPUTE_AUTO)
    return ot_fail(OT_ERR_INVALID_ARG, "checkpoint mode %d is not none, all or auto", (int)po->mode);
  for (int l = 0; l < po->layers; l++) recompute[l] = po->mode == OT_RECOMPUTE_ALL;
  if (po->mode != OT_RECOMPUTE_AUTO || po->layers <= 0) return OT_OK;
  if (!po->trial || !po->cost || !(po->pcie_bytes_per_s > 0) || !(po->flops_per_s > 0))
    return ot_fail(OT_ERR_INVALID_ARG, "ot_recompute_choose: auto needs a trial, a cost model and positive rates");
  return choose_auto(po, recompute);
}
