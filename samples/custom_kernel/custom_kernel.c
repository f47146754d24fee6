/* custom_kernel.c — an op of your own in a planned program.
 *
 * softcap(x) = cap * tanh(x / cap) (the logit soft-capping of Gemma-style
 * models) is not one of omptensor's ops (ops.h). Here it is written once with
 * the directive layer (omptensor/ot_pragmas.h), so it builds for a GPU, the
 * emulated device and plain -fopenmp alike; recorded with ot_program_add_op
 * between built-in ops; planned under a budget too small for the weights, so
 * the plan must evict and re-upload them; run twice (the second run replays
 * the plan with a new input); and checked against a plain C loop.
 *
 *   for l in 0 .. L-1:   h = a @ W_l^T        ot_op_matmul (built-in)
 *                        s = softcap(h, cap)  the custom op
 *                        a = a + s            ot_op_add (built-in)
 *
 * Exit status 0 if every output matches the C loop, 1 otherwise. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "omptensor/omptensor.h"
#include "omptensor/ot_pragmas.h"

enum { T = 8, D = 64, L = 4 };
#define CAP 2.0f

/* The op's parameters: copied into the program when the op is recorded
 * (params_bytes), handed back as e->params whenever it runs. */
typedef struct softcap_params {
  float cap;
} softcap_params;

static int64_t n_runs, n_fallback_iters;

/* The kernel. The scheduler calls it when the op's turn comes, with its
 * tensors already on e->device: e->in[0] and e->out[0] are DEVICE addresses
 * of element 0 (valid during the call only), e->in_t / e->out_t the views
 * (shapes, strides). OT_DEVPTR tells OpenMP they are device pointers already
 * (nothing is mapped or copied: moving data is the scheduler's job); scalars
 * such as n and cap are copied into the region. The region is synchronous:
 * when run() returns, y is written. */
static ot_status run_softcap(const ot_op_exec *e) {
  const softcap_params *prm = e->params;
  const float *x = e->in[0];
  float *y = e->out[0];
  const int64_t n = ot_tensor_numel(e->out_t[0]);
  const float cap = prm->cap, inv_cap = 1.0f / prm->cap;
  /* on_host counts iterations that ran on the host. A program compiled
   * without omptensor's offload flags would run this region on the host:
   * a crash on a GPU, but on the emulated device (whose buffers are host
   * memory) a silently right answer. Counting makes it visible. */
  int64_t on_host = 0;
  OT_PARFOR(e->device, OT_DEVPTR(x, y) reduction(+ : on_host))
  for (int64_t i = 0; i < n; i++) {
    y[i] = cap * tanhf(x[i] * inv_cap);
    on_host += omp_is_initial_device();
  }
  if (e->device != omp_get_initial_device()) n_fallback_iters += on_host;
  n_runs++;
  return OT_OK;
}

/* Records y = softcap(x, cap). What the kernel assumes (f32, contiguous, the
 * same size) is checked now, at recording, as the built-in ops do: a wrong
 * call fails here with a message naming the tensors, not in the middle of a run. */
static ot_status op_softcap(ot_program *p, ot_tensor *y, ot_tensor *x, float cap) {
  int64_t n = ot_tensor_numel(y);
  if (ot_tensor_dtype(x) != OT_F32 || ot_tensor_dtype(y) != OT_F32 || !ot_tensor_is_contiguous(x) ||
      !ot_tensor_is_contiguous(y) || ot_tensor_numel(x) != n || !(cap > 0))
    return ot_set_error(OT_ERR_INVALID_ARG, "softcap('%s' -> '%s'): needs contiguous f32 tensors of one size, cap > 0",
                        ot_tensor_name(x), ot_tensor_name(y));
  softcap_params prm = {cap};
  ot_tensor *in[] = {x}, *out[] = {y};
  char name[96];
  snprintf(name, sizeof name, "softcap(%s)", ot_tensor_name(y)); /* names the op in plans, traces, errors */
  ot_op_desc d = {.name = name, .run = run_softcap, .n_in = 1, .in = in, .n_out = 1, .out = out,
                  .params = &prm, .params_bytes = sizeof prm,
                  .flops = 20.0 * (double)n, .bytes = 8.0 * (double)n}; /* cost hints */
  return ot_program_add_op(p, &d);
}

/* The same computation as plain C on the host. */
static void reference(const float *x, float w[L][D * D], float *out) {
  float a[T * D], h[T * D];
  for (int i = 0; i < T * D; i++) a[i] = x[i];
  for (int l = 0; l < L; l++) {
    for (int t = 0; t < T; t++)
      for (int o = 0; o < D; o++) {
        double acc = 0;
        for (int k = 0; k < D; k++) acc += (double)a[t * D + k] * w[l][o * D + k];
        h[t * D + o] = (float)acc;
      }
    for (int i = 0; i < T * D; i++) a[i] += CAP * tanhf(h[i] / CAP);
  }
  for (int i = 0; i < T * D; i++) out[i] = a[i];
}

static float rnd(uint64_t *s) { /* uniform in [-1, 1) */
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*s >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

#define CHECK(expr)                  \
  do {                               \
    if ((s = (expr)) != OT_OK) goto done; \
  } while (0)

int main(void) {
  static float w[L][D * D], x[T * D], got[T * D], want[T * D];
  ot_tensor *xt = NULL, *wt[L] = {0}, *h[L] = {0}, *sc[L] = {0}, *a[L + 1] = {0};
  ot_ctx *ctx = NULL;
  ot_program *p = NULL;
  ot_plan *plan = NULL;
  int bad = 0;
  uint64_t seed = 42;
  ot_status s;

  /* The first device if there is one, else the host; its whole memory as
   * the context's budget (the plan below asks for less). */
  ot_ctx_opts co = ot_ctx_opts_default();
  CHECK(ot_ctx_create(&co, &ctx));

  const int64_t act[] = {T, D}, wsh[] = {D, D};
  CHECK(ot_tensor_create(ctx, "x", OT_F32, 2, act, &xt));
  a[0] = xt;
  for (int l = 0; l < L; l++) {
    char nm[32];
    for (int i = 0; i < D * D; i++) w[l][i] = rnd(&seed) * 0.4f; /* |h| a few units: tanh is not linear there */
    snprintf(nm, sizeof nm, "w%d", l);
    CHECK(ot_tensor_create(ctx, nm, OT_F32, 2, wsh, &wt[l]));
    CHECK(ot_tensor_write_f32(wt[l], w[l], D * D)); /* weights: written once, before planning */
    snprintf(nm, sizeof nm, "h%d", l);
    CHECK(ot_tensor_create(ctx, nm, OT_F32, 2, act, &h[l]));
    snprintf(nm, sizeof nm, "s%d", l);
    CHECK(ot_tensor_create(ctx, nm, OT_F32, 2, act, &sc[l]));
    snprintf(nm, sizeof nm, "a%d", l + 1);
    CHECK(ot_tensor_create(ctx, nm, OT_F32, 2, act, &a[l + 1]));
  }

  /* Record: nothing runs yet; tensors are referenced, not owned. */
  CHECK(ot_program_create(ctx, &p));
  for (int l = 0; l < L; l++) {
    CHECK(ot_op_matmul(p, h[l], a[l], wt[l], 1, 0)); /* h = a @ W^T */
    CHECK(op_softcap(p, sc[l], h[l], CAP));
    CHECK(ot_op_add(p, a[l + 1], a[l], sc[l]));
  }
  CHECK(ot_program_mark_input(p, xt));      /* written before every run */
  CHECK(ot_program_mark_output(p, a[L]));   /* its home holds the result after a run */

  /* Plan under a budget that holds the largest op (a matmul: its input, its
   * weight, its output) and one more weight, but not all L weights: the plan
   * evicts weights and uploads them again, on every run. */
  uint64_t min_budget;
  int min_op;
  CHECK(ot_sched_min_budget(p, &min_budget, &min_op));
  ot_sched_opts so = ot_sched_opts_default(); /* strategy balanced: uploads overlap the previous op */
  so.budget_bytes = min_budget + sizeof w[0];
  CHECK(ot_sched_plan(ctx, p, &so, &plan));
  ot_plan_stats st = ot_plan_get_stats(plan, 1);
  printf("program: %d ops (%d x matmul, softcap, add), %d weights of %zu bytes\n", ot_program_num_ops(p), L, L,
         sizeof w[0]);
  printf("plan:    budget %llu bytes (the least possible is %llu, for op '%s'); per run %d uploads "
         "(%llu bytes), %d evictions, peak %llu bytes\n",
         (unsigned long long)so.budget_bytes, (unsigned long long)min_budget, ot_program_op_name(p, min_op),
         st.uploads, (unsigned long long)st.bytes_up, st.evictions, (unsigned long long)st.peak_bytes);
  if (st.evictions == 0) {
    printf("FAIL: the budget did not force any eviction\n");
    bad = 1;
  }

  /* Run twice: the second run replays the same plan with a new input. */
  for (int run = 1; run <= 2; run++) {
    for (int i = 0; i < T * D; i++) x[i] = rnd(&seed);
    CHECK(ot_tensor_write_f32(xt, x, T * D));
    CHECK(ot_sched_run(plan, NULL));
    CHECK(ot_tensor_read_f32(a[L], got, T * D));
    reference(x, w, want);
    float err = 0, scale = 1;
    for (int i = 0; i < T * D; i++) {
      err = fmaxf(err, fabsf(got[i] - want[i]));
      scale = fmaxf(scale, fabsf(want[i]));
    }
    int ok = err <= 1e-4f * scale; /* the matmul sums in another order than the C loop */
    printf("run %d:   max |omptensor - C loop| = %.3g (values up to %.3g): %s\n", run, (double)err, (double)scale,
           ok ? "ok" : "MISMATCH");
    bad |= !ok;
  }
  int dev = ot_ctx_device(ctx, 0);
  char where[32] = "the host";
  if (dev != OT_DEVICE_HOST && dev != omp_get_initial_device()) snprintf(where, sizeof where, "device %d", dev);
  printf("softcap: ran %lld times on %s (%s backend), %lld iterations fell back to the host\n", (long long)n_runs,
         where, ot_backend_name(ot_ctx_backend(ctx)), (long long)n_fallback_iters);
  if (n_fallback_iters)
    printf("FAIL: the kernel ran on the host: compile and link this program with omptensor's offload flags "
           "(omptensor::omptensor in CMake, pkg-config --cflags --libs omptensor)\n");
  if (n_runs != 2 * L || n_fallback_iters) bad = 1;

done:
  if (s != OT_OK) fprintf(stderr, "custom_kernel: %s: %s\n", ot_status_str(s), ot_last_error());
  ot_plan_destroy(plan);
  ot_program_destroy(p);
  for (int l = 0; l <= L; l++) ot_tensor_destroy(a[l]);
  for (int l = 0; l < L; l++) {
    ot_tensor_destroy(wt[l]);
    ot_tensor_destroy(h[l]);
    ot_tensor_destroy(sc[l]);
  }
  ot_ctx_destroy(ctx);
  return s != OT_OK || bad;
}
