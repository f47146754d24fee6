/* mlp_test.h — shared by the MLP trainer tests. */
#ifndef OT_MLP_TEST_H
#define OT_MLP_TEST_H

#include "mlp.h"

/* The smallest feasible budget of the trainer `c` on backend `be`. */
uint64_t ot_test_mlp_min_budget(ot_backend be, const mlp_config *c);

#endif
