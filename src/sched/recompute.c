/* recompute.c — activation checkpointing: the modes' names and the cost
 * rule shared by the planner's per-tensor choice (planner.c,
 * ot_sched_opts.recompute) and the trainers' documentation of it (sched.h). */
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
