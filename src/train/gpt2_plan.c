/* gpt2_plan.c — the GPT-2 trainer's side of choosing the checkpointed
 * layers (sched.h's ot_recompute_choose): its trial recordings and its cost
 * model; then the recording and the plan. */
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

/* ot_recompute_policy's trial: the step recorded with `recompute`, wrapping
 * no memory, planned with the trainer's options. */
static ot_status trial(void *user, const int *recompute, ot_plan **plan) {
  ot_gpt2_trainer *g = user;
  for (int l = 0; l < g->cfg.num_layers; l++) g->recompute[l] = recompute[l];
  OT_TRY(rerecord(g, 1));
  return ot_sched_plan(g->ctx, g->prog, &g->so, plan);
}

/* ot_recompute_policy's cost model (every layer alike). Per layer of B
 * sequences of T: the dropped activations are x1, att, x2 [BT, D], qkv
 * [BT, 3D], fc, gelu [BT, F] in the GEMMs' dtype, hm [BT, D] and the
 * attention's [BT, H, 2] statistics in f32; the forward is 2 BT D (4 D + 2 F)
 * flops of matmuls plus about 2 B T^2 D of causal attention. */
static void layer_cost(void *user, int layer, double *bytes, double *flops) {
  (void)layer;
  const ot_gpt2_trainer *g = user;
  const ot_hf_config *c = &g->cfg;
  double BT = (double)g->o.B * g->o.T, D = (double)c->hidden_size, F = (double)c->intermediate_size;
  const double lp = (double)ot_dtype_bytes(g->o.precision, 1);
  *bytes = BT * (lp * (6 * D + 2 * F) + 4.0 * (D + 2.0 * (double)c->num_heads));
  *flops = 2.0 * BT * D * (4 * D + 2 * F) + 2.0 * BT * g->o.T * D;
}

/* Chooses the checkpoints (sched.h, ot_recompute_choose: auto's trials wrap no
 * memory, so each costs a recording and a plan, not gigabytes), records the
 * step with them and plans it. */
ot_status ot_gt_choose_and_plan(ot_gpt2_trainer *g) {
  ot_recompute_policy po = {.mode = g->o.checkpoint, .layers = (int)g->cfg.num_layers, .trial = trial,
                            .cost = layer_cost, .user = g, .pcie_bytes_per_s = g->o.pcie_bytes_per_s,
                            .flops_per_s = g->o.flops_per_s};
  OT_TRY(ot_recompute_choose(&po, g->recompute));
  OT_TRY(rerecord(g, g->o.plan_only));
  return ot_sched_plan(g->ctx, g->prog, &g->so, &g->plan);
}
