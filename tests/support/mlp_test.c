/* mlp_test.c — see mlp_test.h. */
#include "mlp_test.h"
#include "ot_test.h"

uint64_t ot_test_mlp_min_budget(ot_backend be, const mlp_config *c) {
  ot_ctx_opts co = ot_ctx_opts_default();
  co.backend = be;
  ot_ctx *ctx;
  OT_ASSERT_OK(ot_ctx_create(&co, &ctx));
  mlp_trainer *t;
  OT_ASSERT_OK(mlp_trainer_create(ctx, c, NULL, &t));
  uint64_t b;
  OT_ASSERT_OK(mlp_trainer_min_budget(t, &b));
  mlp_trainer_destroy(t);
  ot_ctx_destroy(ctx);
  return b;
}
