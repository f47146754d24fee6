/* chain_support.h — a small stateless program for the robustness tests
 * (fault injection, budget stress, integrity mode):
 *
 *     h_0 = mix(x, w_0);  h_i = mix(h_{i-1}, w_i)  (i < L);  y = mix(h_{L-1}, w_0)
 *
 * x is an input, w_i are weights (filled from a seed), y an output; every
 * tensor holds n floats. Under a budget below the weights' total the
 * weights are evicted and uploaded again each run, and y is written home:
 * uploads, write-backs and evictions on every run. Being stateless, a run
 * gives the same y however the run before it ended. */
#ifndef OT_TEST_CHAIN_SUPPORT_H
#define OT_TEST_CHAIN_SUPPORT_H

#include "omptensor/omptensor.h"

#define CS_MAX_LAYERS 16

typedef struct cs_chain {
  ot_program *p;
  ot_tensor *x, *y;
  ot_tensor *w[CS_MAX_LAYERS];
  ot_tensor *h[CS_MAX_LAYERS];
  int layers;
  int64_t n;
} cs_chain;

/* layers in [1, CS_MAX_LAYERS]; on failure everything made is destroyed. */
ot_status cs_chain_create(ot_ctx *ctx, int layers, int64_t n, cs_chain *out);
void cs_chain_destroy(cs_chain *c);
/* The working set of the largest op (the smallest feasible budget). */
uint64_t cs_chain_min_budget(const cs_chain *c);
/* y computed on the host from x and the weights' homes, into ref[n]. */
void cs_chain_reference(const cs_chain *c, float *ref);
/* Fails the cmocka test unless y's home matches ref[n] (within 1e-6
 * relative: the kernel and the reference may round differently). */
void cs_chain_expect(const cs_chain *c, const float *ref);

#endif
