/* mlp_test.h — shared by the MLP trainer tests. */
#ifndef OT_MLP_TEST_H
#define OT_MLP_TEST_H

#include "mlp.h"

/* A context on backend `be` (*ctx) and trainer `c` planned with strategy st
 * under `budget` (0: the context's); fails the test on any error. */
mlp_trainer *ot_test_mlp_trainer(ot_backend be, const mlp_config *c, ot_strategy st, uint64_t budget, ot_ctx **ctx);

/* The trainer's parameters (mlp_trainer_read_params), malloc'd; *n gets their count. */
float *ot_test_mlp_params(const mlp_trainer *t, int64_t *n);

/* The smallest feasible budget of the trainer `c` on backend `be`. */
uint64_t ot_test_mlp_min_budget(ot_backend be, const mlp_config *c);

#endif
