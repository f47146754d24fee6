/* gpt2_plan.c — choosing the checkpointed layers (gpt2_train.h's
 * checkpoint modes) by planning trial recordings, then the plan. */
#include "train/gpt2_impl.h"

void ot_gt_release_recording(ot_gpt2_trainer *g) {
  ot_plan_destroy(g->plan);
  g->plan = NULL;
  ot_program_destroy(g->prog);
  g->prog = NULL;
  ot_tlist_release(&g->acts);
  for (int mb = 0; mb < g->o.accum; mb++) g->ids[mb] = g->targets[mb] = g->loss[mb] = NULL;
  g->logits = NULL;
}

/* Records again with g->recompute as set; a trial (shapes_only) is only planned. */
static ot_status rerecord(ot_gpt2_trainer *g, int shapes_only) {
  ot_gt_release_recording(g);
  g->shapes_only = shapes_only;
  ot_status s = ot_gt_record(g);
  g->shapes_only = 0;
  return s;
}

/* Does the recorded step run without offloading: no live copy is evicted
 * (to be uploaded again), in the first run or the replays? Not strategy
 * `none`, which needs every storage at once: a recomputed activation is a
 * new storage, but the one it replaces is dead by then and its space reused. */
static ot_status fits_resident(ot_gpt2_trainer *g, int *fits) {
  ot_plan *pl = NULL;
  ot_status s = ot_sched_plan(g->ctx, g->prog, &g->so, &pl);
  *fits = s == OT_OK && ot_plan_get_stats(pl, 0).evictions == 0 && ot_plan_get_stats(pl, 1).evictions == 0;
  ot_plan_destroy(pl);
  return s == OT_OK || s == OT_ERR_BUDGET ? OT_OK : s;
}

/* The first k layers are checkpoints (their activations would live longest). */
static ot_status trial_first_k(ot_gpt2_trainer *g, int k, int *fits) {
  for (int l = 0; l < g->cfg.num_layers; l++) g->recompute[l] = l < k;
  OT_TRY(rerecord(g, 1));
  return fits_resident(g, fits);
}

/* The cost model: recompute a layer iff its forward again (flops over
 * flops_per_s) is cheaper than writing its activations home and reading them
 * back (2 bytes over pcie_bytes_per_s). Per layer of B sequences of T: the
 * dropped activations are x1, q, k, v, att, hm, x2 [BT, D], fc, gelu [BT, F]
 * and the attention's [BT, H, 2] statistics; the forward is 2 BT D (4 D + 2 F)
 * flops of matmuls plus about 2 B T^2 D of causal attention. */
static int recompute_cheaper(const ot_gpt2_trainer *g) {
  const ot_hf_config *c = &g->cfg;
  double BT = (double)g->o.B * g->o.T, D = (double)c->hidden_size, F = (double)c->intermediate_size;
  double bytes = 4.0 * BT * (7 * D + 2 * F + 2.0 * (double)c->num_heads);
  double flops = 2.0 * BT * D * (4 * D + 2 * F) + 2.0 * BT * g->o.T * D;
  return flops / g->o.flops_per_s < 2.0 * bytes / g->o.pcie_bytes_per_s;
}

/* auto: nothing recomputed if everything fits; else the fewest checkpoints
 * (the first k layers, k by bisection: fitting is taken as monotone in k)
 * that make it run without offloading; else, the budget demanding offload anyway,
 * every layer the cost model finds cheaper to recompute than to offload.
 * Trials wrap no memory, so each costs a recording and a plan, not gigabytes. */
static ot_status choose_auto(ot_gpt2_trainer *g) {
  const int L = (int)g->cfg.num_layers;
  int fits;
  OT_TRY(trial_first_k(g, 0, &fits));
  if (fits) return OT_OK;
  OT_TRY(trial_first_k(g, L, &fits));
  if (!fits) {
    int cheaper = recompute_cheaper(g);
    for (int l = 0; l < L; l++) g->recompute[l] = cheaper;
    return OT_OK;
  }
  int lo = 1, hi = L; /* hi fits */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    OT_TRY(trial_first_k(g, mid, &fits));
    if (fits) hi = mid;
    else lo = mid + 1;
  }
  for (int l = 0; l < L; l++) g->recompute[l] = l < hi;
  return OT_OK;
}

ot_status ot_gt_choose_and_plan(ot_gpt2_trainer *g) {
  for (int l = 0; l < g->cfg.num_layers; l++) g->recompute[l] = g->o.checkpoint == OT_RECOMPUTE_ALL;
  if (g->o.checkpoint == OT_RECOMPUTE_AUTO) OT_TRY(choose_auto(g));
  OT_TRY(rerecord(g, g->o.plan_only));
  return ot_sched_plan(g->ctx, g->prog, &g->so, &g->plan);
}
