/* op_table.h — a table-driven test of the recorded ops (ops.h), in the
 * spirit of ggml's test-backend-ops.
 *
 * A row of the table names an op (a variant of one), a builder and a plain C
 * reference. The builder makes the op's tensors with the oc_* helpers below
 * (seeded random contents) and records the op on c->p; the reference
 * computes, from the initial values c->h[k] of tensor k (k = the order in
 * which the builder made them; f32, q8b/f16/bf16 dequantized, i32 as
 * floats), what every written tensor k must hold after the run: c->w[k],
 * which starts as a copy of c->h[k] (so accumulating references add to it).
 *
 * oc_run_row runs a row on every backend this build has (host, map, and usm
 * where it offloads, ot_test_backends), each time in a program where
 * unrelated "filler" tensors stay live across the op, under the program's
 * smallest feasible budget (ot_sched_min_budget), so that the planner must
 * evict, for each strategy; then once more with every written tensor a view
 * inside a larger storage (guard rows around it), its read-only tensors
 * marked inputs, one budget block above the minimum. Every run:
 *   - its trace stays within the budget (ot_trace_check_budget), the
 *     minimum-budget runs evicted something;
 *   - every written tensor matches the reference within the row's tolerance
 *     |got - want| <= atol + rtol * |want|, and is finite (outputs start as
 *     NaN, so an element the op did not write is caught);
 *   - read-only tensors and guard rows are bitwise unchanged;
 *   - the filler result (computed from a copy that was evicted dirty and
 *     reloaded) is right. */
#ifndef OT_TEST_OP_TABLE_H
#define OT_TEST_OP_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/omptensor.h"
#include "omptensor/ops.h"

#define OC_MAX_T 16

typedef enum oc_role {
  OC_RO,      /* read only: must be bitwise unchanged */
  OC_OUT,     /* overwritten by the op: starts as NaN (-777 for i32), compared */
  OC_ACC,     /* read and written (in place, +=): random start, compared */
  OC_SCRATCH, /* written, contents unspecified: not compared */
} oc_role;

typedef struct oc_shape {
  int nd;
  int64_t d[4];
} oc_shape;
#define OC_SHAPE(...) ((oc_shape){(int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}})

typedef struct oc_case {
  ot_ctx *ctx;
  ot_program *p;
  const int *arg;        /* the row's arguments */
  uint64_t rng;          /* seeded per row: every build of a row is the same */
  int guard;             /* written tensors are views inside larger storages */
  int n;
  ot_tensor *t[OC_MAX_T];
  ot_tensor *parent[OC_MAX_T]; /* the guarded storage of t[k], or NULL */
  oc_role role[OC_MAX_T];
  float *h[OC_MAX_T];    /* initial values of t[k] (numel floats) */
  float *w[OC_MAX_T];    /* what t[k] must hold after the run (starts as h[k]) */
  int64_t d[8];          /* sizes and positions the builder chose, for the reference */
  float f[4];            /* float parameters, for the reference */
} oc_case;

typedef struct oc_row {
  const char *name;
  void (*build)(oc_case *c);
  void (*ref)(oc_case *c);
  double atol, rtol;
  int arg[6];
} oc_row;

/* ---- for builders ---- */
/* Random values uniform in [lo, hi) (i32: integers in [lo, hi]), read only. */
ot_tensor *oc_in(oc_case *c, const char *name, ot_dtype dt, oc_shape s, float lo, float hi);
/* Overwritten by the op; marked an output. */
ot_tensor *oc_out(oc_case *c, const char *name, ot_dtype dt, oc_shape s);
/* Random start as oc_in, read and written by the op; marked an output. */
ot_tensor *oc_acc(oc_case *c, const char *name, ot_dtype dt, oc_shape s, float lo, float hi);
/* Written by the op, not compared (a fused op's scratch). */
ot_tensor *oc_scratch(oc_case *c, const char *name, ot_dtype dt, oc_shape s);
/* The host home of t as f32 / i32 (to plant ties, NaNs or ids after creation). */
float *oc_f32(ot_tensor *t);
int32_t *oc_i32(ot_tensor *t);
/* A run-time scalar set to v; returns its slot. */
int oc_scalar(oc_case *c, const char *name, int64_t v);
float oc_rand(oc_case *c, float lo, float hi);
/* Sets element i (of a contiguous f32/f16/bf16 tensor's home) to v. */
void oc_set(ot_tensor *t, int64_t i, float v);
/* Records with OT_ASSERT_OK semantics: fails the test naming the call. */
#define OC_OK(expr) OT_ASSERT_OK(expr)

/* ---- running ---- */
/* Nonzero: failed checks are only counted and returned, not printed (for
 * tests that expect them). */
extern int oc_quiet;
/* Runs the row (see the top). Returns the number of failed checks, the
 * first one described in msg. */
int oc_run_row(const oc_row *row, char *msg, size_t msg_size);
/* The same on one backend, one budget mode (guard = 0: minimum budget, every
 * strategy; 1: guarded views, one block above). */
int oc_run_row_on(const oc_row *row, ot_backend b, int guard, char *msg, size_t msg_size);

/* The kinds of the ops the row records ("matmul" for "matmul(w)"), at most
 * max, each up to 47 characters; returns how many. */
int oc_row_op_kinds(const oc_row *row, char (*kinds)[48], int max);

/* ---- the rows' builders and references (op_table_fwd.c, op_table_train.c) ---- */
#define OC_DECLARE(op)          \
  void oc_build_##op(oc_case *c); \
  void oc_ref_##op(oc_case *c)

OC_DECLARE(matmul);
OC_DECLARE(matmul_multi);
OC_DECLARE(matmul_swiglu);
OC_DECLARE(binary);  /* add, mul */
OC_DECLARE(unary);   /* scale, gelu, silu */
OC_DECLARE(swiglu);
OC_DECLARE(rmsnorm);
OC_DECLARE(layernorm);
OC_DECLARE(rope);
OC_DECLARE(attention);
OC_DECLARE(rope_attention);
OC_DECLARE(rope_attention_rows);
OC_DECLARE(embedding);
OC_DECLARE(add_positions);
OC_DECLARE(argmax);
OC_DECLARE(cross_entropy);
OC_DECLARE(matmul_backward);
OC_DECLARE(bias_backward);
OC_DECLARE(act_backward); /* gelu_backward, silu_backward */
OC_DECLARE(swiglu_backward);
OC_DECLARE(layernorm_backward);
OC_DECLARE(rmsnorm_backward);
OC_DECLARE(causal_attention);
OC_DECLARE(causal_attention_backward);
OC_DECLARE(causal_attention_train);
OC_DECLARE(embedding_backward);
OC_DECLARE(positions_backward);
OC_DECLARE(zero);
OC_DECLARE(adamw);
OC_DECLARE(adamw_multi);
OC_DECLARE(sgd);
OC_DECLARE(loss_scale);
OC_DECLARE(grad_stats);

/* reference pieces shared by the rows (op_table_fwd.c) */
double oc_silu(double x);
double oc_gelu(double x);
/* x [T, H, hd] rotated in place, row t at position pos + t (HF rotate-half). */
void oc_rope_ref(float *x, int64_t T, int64_t H, int64_t hd, int64_t pos, float theta);
/* out [T, H, hd] = causal softmax(q k^T / sqrt(hd)) v, query t seeing keys
 * 0..pos+t of k, v [>= pos+T, KV, hd] (with window > 0 only the last window
 * of them), head h reading kv head h / (H / KV). */
void oc_attend_ref(float *out, const float *q, const float *k, const float *v, int64_t T, int64_t H, int64_t KV,
                   int64_t hd, int64_t pos, int64_t window);

/* kinds for the parametrised rows (arg[0]) */
enum { OC_ADD, OC_MUL };
enum { OC_SCALE, OC_GELU, OC_SILU };

#endif
