/* gpt2_plan.c — the GPT-2 trainer's recording and plan for its checkpoint
 * mode: `all` records every layer's forward again before its backward;
 * `auto` records none and lets the planner choose per activation between
 * keeping it, writing it home (offload) and running its producer again
 * (ot_sched_opts.recompute, src/sched/README.md "Recomputation"), with the
 * trainer's rates as its cost model. */
#include <stdlib.h>
#include <string.h>

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

/* Records the step with the layers' checkpoints of the mode (auto: none; a
 * plan_only recording wraps no memory) and plans it. Why per tensor for
 * auto, not the per-layer trials it replaced: a layer is all or nothing,
 * while its activations differ (a layer norm's or a GELU's output is cheap
 * to redo from an input kept anyway, a GEMM's output is not); and where the
 * plan fits, the planner evicts nothing, so auto is the plain plan without
 * trial recordings. */
ot_status ot_gt_choose_and_plan(ot_gpt2_trainer *g) {
  for (int l = 0; l < g->cfg.num_layers; l++) g->recompute[l] = g->o.checkpoint == OT_RECOMPUTE_ALL;
  g->so.recompute = g->o.checkpoint == OT_RECOMPUTE_AUTO;
  g->so.pcie_bytes_per_s = g->o.pcie_bytes_per_s;
  g->so.flops_per_s = g->o.flops_per_s;
  ot_gt_release_recording(g);
  g->shapes_only = g->o.plan_only;
  ot_status s = ot_gt_record(g);
  g->shapes_only = 0;
  OT_TRY(s);
  if (g->o.cpu_optimizer) { /* the update on the host's cores: its ops are the plan's host ops */
    const int n = ot_program_num_ops(g->prog);
    free(g->host_ops);
    g->host_ops = calloc((size_t)(n ? n : 1), 1);
    if (!g->host_ops) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "gpt2_train: no host memory");
    /* and the data-parallel waits before them: the sums go straight into the homes AdamW reads there */
    for (int i = 0; i < n; i++)
      g->host_ops[i] = !strncmp(ot_program_op_name(g->prog, i), "adamw", 5) ||
                       !strncmp(ot_program_op_name(g->prog, i), "dp_wait", 7);
    g->so.host_ops = g->host_ops;
    g->so.defer_writeback = 0; /* the state lives at home: nothing to defer (and hybrid plans do not defer) */
    s = ot_sched_plan(g->ctx, g->prog, &g->so, &g->plan);
    if (s != OT_OK)
      return ot_prefix_error(s, "gpt2_train: cpu_optimizer (--cpu-optimizer) needs a device apart from the host");
    return OT_OK;
  }
  return ot_sched_plan(g->ctx, g->prog, &g->so, &g->plan);
}
