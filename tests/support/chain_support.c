/* chain_support.c — the chain program of the robustness tests (chain_support.h). */
#include "chain_support.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sched_support.h"

/* mix(a, b) with ts_mix_params {a = {1, 0.5}, b = 0}: 0.5 * (a + 0.5 b). */
static const ts_mix_params cs_prm = {{1.0f, 0.5f, 0.0f}, 0.0f, -1};

ot_status cs_chain_create(ot_ctx *ctx, int layers, int64_t n, cs_chain *out) {
  memset(out, 0, sizeof *out);
  if (layers < 1 || layers > CS_MAX_LAYERS) return OT_ERR_INVALID_ARG;
  out->layers = layers;
  out->n = n;
  char name[32];
  ot_status s = ot_tensor_create(ctx, "x", OT_F32, 1, &n, &out->x);
  if (s == OT_OK) s = ot_tensor_create(ctx, "y", OT_F32, 1, &n, &out->y);
  for (int i = 0; i < layers && s == OT_OK; i++) {
    snprintf(name, sizeof name, "w%d", i);
    s = ot_tensor_create(ctx, name, OT_F32, 1, &n, &out->w[i]);
    if (s == OT_OK) {
      ts_fill(out->w[i], 100 + (uint64_t)i);
      snprintf(name, sizeof name, "h%d", i);
      s = ot_tensor_create(ctx, name, OT_F32, 1, &n, &out->h[i]);
    }
  }
  if (s == OT_OK) {
    ts_fill(out->x, 7);
    s = ot_program_create(ctx, &out->p);
  }
  for (int i = 0; i < layers && s == OT_OK; i++) {
    ot_tensor *in[2] = {i ? out->h[i - 1] : out->x, out->w[i]};
    snprintf(name, sizeof name, "layer%d", i);
    s = ts_add_mix(out->p, name, in, 2, &out->h[i], 1, &cs_prm);
  }
  if (s == OT_OK) {
    ot_tensor *in[2] = {out->h[layers - 1], out->w[0]};
    s = ts_add_mix(out->p, "head", in, 2, &out->y, 1, &cs_prm);
  }
  if (s == OT_OK) s = ot_program_mark_input(out->p, out->x);
  if (s == OT_OK) s = ot_program_mark_output(out->p, out->y);
  if (s != OT_OK) cs_chain_destroy(out);
  return s;
}

void cs_chain_destroy(cs_chain *c) {
  ot_program_destroy(c->p);
  ot_tensor_destroy(c->x);
  ot_tensor_destroy(c->y);
  for (int i = 0; i < CS_MAX_LAYERS; i++) {
    ot_tensor_destroy(c->w[i]);
    ot_tensor_destroy(c->h[i]);
  }
  memset(c, 0, sizeof *c);
}

uint64_t cs_chain_min_budget(const cs_chain *c) { return 3 * ts_block((uint64_t)c->n * 4); }

void cs_chain_reference(const cs_chain *c, float *ref) {
  const float *x = ot_tensor_data(c->x);
  for (int64_t j = 0; j < c->n; j++) {
    float v = x[j];
    for (int i = 0; i < c->layers; i++) v = 0.5f * (1.0f * v + 0.5f * ((const float *)ot_tensor_data(c->w[i]))[j]);
    ref[j] = 0.5f * (1.0f * v + 0.5f * ((const float *)ot_tensor_data(c->w[0]))[j]);
  }
}

void cs_chain_expect(const cs_chain *c, const float *ref) {
  const float *y = ot_tensor_data(c->y);
  for (int64_t j = 0; j < c->n; j++)
    if (!(fabsf(y[j] - ref[j]) <= 1e-6f * fmaxf(1.0f, fabsf(ref[j]))))
      fail_msg("chain: y[%lld] = %.9g, want %.9g", (long long)j, y[j], ref[j]);
}
