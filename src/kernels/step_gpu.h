/* step_gpu.h (internal) — a run of decode ops in one launch on a GPU: the
 * step kernel.
 *
 * Why: a resident decode step of a 7B model is ~230 ops and ~390 kernels of
 * a few microseconds each, and every synchronous launch costs ~15 us of
 * host and driver time (GPU.md, bench_step): the GPU sat idle most of the
 * step. Here the ops of a stretch with no transfer between them are encoded
 * as instructions (ot_kinsn: the op, its device addresses, sizes and
 * scalars of this run), copied to the device once, and one persistent grid
 * of blocks, as many as the GPU has multiprocessors (all resident at once),
 * executes them in order with a grid-wide barrier between instructions.
 *
 * Each instruction does what its op's kernels do, with the same arithmetic
 * (the bodies are those of gemv_gpu.c and warp_gpu.c, spread over the
 * persistent grid), in the same order per output except in two places made
 * for bandwidth: a q8b row sums two blocks per lane apart, and attention
 * over 64 keys or more splits the keys in ranges over the blocks and
 * combines their softmax sums (flash-decoding). Elsewhere results match the
 * per-op path bit for bit; tests/test_step_gpu.c compares the two.
 *
 * The encoders (ot_kstep_*) return the instructions written, or 0 where the
 * case is not one the step kernel covers (other dtypes, layouts, a host
 * device, a GPU build without the CUDA runtime, OMPTENSOR_STEP_KERNEL=0):
 * the op then runs alone as before. They check only what decides that; the
 * ops' own checks run at recording. */
#ifndef OT_KERNELS_STEP_GPU_H
#define OT_KERNELS_STEP_GPU_H

#include "kernels/kernels.h"
#include "kernels/rope_rows.h"

/* Instructions one op may emit (rope + attention: 2). */
#define OT_KSTEP_MAX_PER_OP 2

enum { OT_KI_NORM = 1, OT_KI_GEMV, OT_KI_ROPE_APPEND, OT_KI_ATTN, OT_KI_MMA, OT_KI_ROPE_ROWS };

typedef struct ot_ki_norm { /* rows of d f32, y = norm(x) * w (+ b): ot_knorm_gpu */
  const float *x, *w, *b;
  void *y;
  int64_t rows, d, xs, ys;
  float eps;
  int layer;
  int ydt; /* f32, or bf16: a batched step's GEMM input (llama.c rounds it to the weights' dtype) */
} ot_ki_norm;

typedef struct ot_ki_gemv { /* c_i[n] (+)= a . W_i[n, :] for one row a of K f32 (M = 1) */
  const float *a;
  int64_t K;
  int n_mats, accumulate, swiglu; /* swiglu: c0 = silu(a W0^T) * (a W1^T), c1 = a W1^T */
  int a_shared;                   /* a fits OT_KSTEP_MAX_K and is 16-byte aligned: each block reads it once */
  /* set by ot_kstep_run when an RMSNorm y = norm(x) * w comes right before
   * with y == a: each block normalizes x itself (pre_x, pre_w, pre_eps) into
   * its copy of a, and no grid barrier separates the two */
  const float *pre_x, *pre_w;
  float pre_eps;
  struct {
    const void *w;
    float *c;
    int64_t ldw, N;
    int wdt;
  } m[3];
} ot_ki_gemv;

typedef struct ot_ki_rope { /* one row: rotate q [H, d] and k [KV, d] in place, append k, v at row pos */
  void *q, *k, *kc, *vc;
  const void *v;
  int64_t H, KV, d, pos;
  int64_t q1, k1, v1, c0, c1, e0, e1; /* element strides (the last dim is contiguous) */
  int qt, kt, vt, kct, vct;
  ot_rope rope;
} ot_ki_rope;

/* Query rows over keys [0, pos] (the last `window` of them if > 0):
 * ot_kattn_gpu with S = 1; or, rows given, T rows each on its own cache
 * slot and position (rows[t * r0], rows[t * r0 + r1] of caches
 * [NS, P, KV, D], slot strides ks, vs): ot_kattn_rows_gpu. */
typedef struct ot_ki_attn {
  void *out; /* of dtype odt (f32 for one row) */
  const float *q;
  const void *k, *v; /* caches of dtype kvdt: f32, bf16 or f16 */
  int64_t o1, q1, k0, k1, v0, v1, H, group, D, pos, window;
  int kvdt;
  /* set by ot_kstep_run: the keys in `split` ranges, one block each (H
   * heads fill few of the GPU's blocks), their partial softmax sums in
   * part[H * split * (D + 2)] and combined after a grid barrier; 1: none */
  int split;
  float *part;
  const int32_t *rows;
  int64_t T, r0, r1, ks, vs, NS, P, q0, o0;
  int odt;
} ot_ki_attn;

/* ot_k_rope_append_rows: T rows' RoPE and cache append, a thread per
 * (row, head, pair) over the grid (rope_rows.h's body). */
typedef struct ot_ki_rope_rows {
  ra_args a;
  int64_t T, KV;
} ot_ki_rope_rows;

/* c_i [M, N_i] (+)= a [M, K] @ W_i [N_i, K]^T for a batched decode step's
 * rows (2 <= M <= OT_KSTEP_MMA_MAX_M) of bf16 activations and bf16
 * weights, on tensor cores with f32 sums (kernels/mma_gpu.h): the GEMMs
 * the per-op path hands cuBLAS for such rows (ot_kblas_gemm), in another
 * order of the sums. c is f32 or bf16 (rounded once, as cuBLAS rounds its
 * output); swiglu: c0 = silu(g) * u and c1 = u of the rounded g and u, as
 * ot_k_matmul_swiglu's GEMMs then ot_k_swiglu. */
typedef struct ot_ki_mma {
  const uint16_t *a;
  int64_t M, K, lda;
  int n_mats, accumulate, swiglu;
  struct {
    const uint16_t *w;
    void *c;
    int64_t ldw, ldc, N;
    int cdt;
  } m[3];
} ot_ki_mma;

/* Rows a tensor-core instruction takes: two 16-row tiles (more rows run op
 * by op). */
#define OT_KSTEP_MMA_MAX_M 32

/* Activations of up to this many floats go to a block's shared memory. */
#define OT_KSTEP_MAX_K 8192

typedef struct ot_kinsn {
  int op;
  int no_barrier; /* set by ot_kstep_run: the next instruction may start before this one ends everywhere */
  union {
    ot_ki_norm norm;
    ot_ki_gemv gemv;
    ot_ki_rope rope;
    ot_ki_attn attn;
    ot_ki_mma mma;
    ot_ki_rope_rows rrows;
  } u;
} ot_kinsn;

/* Whether device dev runs the step kernel (an NVIDIA GPU of an nvptx build
 * with the CUDA runtime, unless OMPTENSOR_STEP_KERNEL=0). */
int ot_kstep_enabled(int dev);

int ot_kstep_norm(ot_kinsn *out, int dev, int layer, ot_kview y, ot_kview x, ot_kview w, ot_kview b, float eps);
/* c = a @ w^T (+ c): ot_k_matmul with trans_b, one row of a (a GEMV) or,
 * on tensor cores, 2 to OT_KSTEP_MMA_MAX_M bf16 rows of a batched step;
 * the same for the multi and SwiGLU forms */
int ot_kstep_matmul(ot_kinsn *out, int dev, ot_kview c, ot_kview a, ot_kview w, int trans_b, int accumulate);
int ot_kstep_matmul_multi(ot_kinsn *out, int dev, int n, const ot_kview *c, ot_kview a, const ot_kview *w);
int ot_kstep_matmul_swiglu(ot_kinsn *out, int dev, ot_kview y, ot_kview up, ot_kview a, ot_kview wg, ot_kview wu);
/* ot_k_rope_append then ot_k_attention_window (window 0) for one row: 2 instructions */
int ot_kstep_rope_attention(ot_kinsn *out, int dev, ot_kview att, ot_kview q, ot_kview k, ot_kview v, ot_kview kc,
                            ot_kview vc, int64_t pos, ot_rope rope, int64_t window);
/* ot_k_rope_append_rows then ot_k_attention_rows for the T rows of a
 * batched step (2 instructions; with the tensor-core rows, whose GEMMs
 * surround it: OMPTENSOR_STEP_MMA) */
int ot_kstep_rope_attention_rows(ot_kinsn *out, int dev, ot_kview att, ot_kview q, ot_kview k, ot_kview v,
                                 ot_kview kc, ot_kview vc, ot_kview rows, ot_rope rope, int64_t window);

/* Tests and benchmarks: 1 / 0 turns the step kernel on / off for every
 * device from now on (over OMPTENSOR_STEP_KERNEL), -1 goes back to the
 * environment's choice; and the launches and instructions run so far. */
void ot_kstep_force(int on);
/* The same for the tensor-core rows (OT_KI_MMA) over OMPTENSOR_STEP_MMA;
 * and whether they are on now. */
void ot_kstep_force_mma(int on);
int ot_kstep_mma_on(void);
/* Benchmarks: 16-byte loads each lane has in flight in a bf16/f16/f32 row
 * (4, 8 or 16; default 8). */
ot_status ot_kstep_tune(int unroll_loads);
void ot_kstep_counts(uint64_t *launches, uint64_t *insns);

/* Runs insns[0 .. n) (host memory) on device dev in one launch; returns when
 * they are done. Marks fused pairs in the list as it goes (ot_op_launch_fn:
 * the list is the caller's scratch). */
ot_status ot_kstep_run(int dev, void *insns, int n);

#endif
