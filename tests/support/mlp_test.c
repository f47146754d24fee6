/* mlp_test.c — see mlp_test.h. */
#include <stdlib.h>

#include "mlp_test.h"
#include "ot_test.h"

mlp_trainer *ot_test_mlp_trainer(ot_backend be, const mlp_config *c, ot_strategy st, uint64_t budget, ot_ctx **ctx) {
  *ctx = ot_test_ctx(be);
  ot_sched_opts so = ot_sched_opts_default();
  so.strategy = st;
  so.budget_bytes = budget;
  mlp_trainer *t;
  OT_ASSERT_OK(mlp_trainer_create(*ctx, c, &so, &t));
  return t;
}

float *ot_test_mlp_params(const mlp_trainer *t, int64_t *n) {
  *n = mlp_trainer_num_params(t);
  float *p = malloc((size_t)*n * sizeof *p);
  assert_non_null(p);
  OT_ASSERT_OK(mlp_trainer_read_params(t, p));
  return p;
}

uint64_t ot_test_mlp_min_budget(ot_backend be, const mlp_config *c) {
  ot_ctx *ctx;
  mlp_trainer *t = ot_test_mlp_trainer(be, c, ot_sched_opts_default().strategy, 0, &ctx);
  uint64_t b;
  OT_ASSERT_OK(mlp_trainer_min_budget(t, &b));
  mlp_trainer_destroy(t);
  ot_ctx_destroy(ctx);
  return b;
}
