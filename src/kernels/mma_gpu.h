/* mma_gpu.h (internal to src/kernels) — a batched decode step's GEMM rows
 * on NVIDIA tensor cores, read straight from the activations and weights.
 *
 * Why: a decode step of 9 to 32 sequences multiplies M rows by every weight
 * matrix. On CUDA cores each weight value would be multiplied M times, and
 * the per-op path hands the rows to cuBLAS, which costs a launch and a wait
 * per GEMM (bench/RESULTS.md: about 7 of batch 32's 12.9 ms a step were
 * outside the kernels). Tensor cores inside the step kernel take the GEMMs
 * into its one launch. The warp-level mma.sync.m16n8k16 instruction (bf16
 * in, f32 sums; sm_80 and later) is written as inline PTX: clang 19 exposes
 * only the WMMA builtins, whose fragments must be loaded from memory with a
 * 16-row stride (no masking of rows past M, nor of weight rows past N).
 *
 * Fragments (PTX ISA, "mma.m16n8k16" for .bf16): lane l is in group
 * g = l / 4 and has t = l % 4. Its four A registers hold, two bf16 each (the
 * lower index in the low half), A[g][2t, 2t+1], A[g+8][2t, 2t+1],
 * A[g][2t+8, 2t+9] and A[g+8][2t+8, 2t+9]; its two B registers hold
 * B[2t, 2t+1][g] and B[2t+8, 2t+9][g]; its four f32 results are C[g][2t],
 * C[g][2t+1], C[g+8][2t] and C[g+8][2t+1].
 *
 * The sum runs over k, so any one-to-one map of the 16 k positions that A
 * and B share gives the same product. Here lane t's k positions
 * {2t, 2t+1, 2t+8, 2t+9} stand for the 4 consecutive memory positions from
 * 4t: both operands' registers are then 8-byte runs of a row. Two mma
 * instructions take a 32-wide chunk of k: lane t loads the 16 bytes at
 * 8t of its rows (8 bf16 values; the first 4 go to the first instruction,
 * the last 4 to the second). B[k][n] = W[n][k] (an HF Linear's W [N, K] is
 * "col" for mma), so every load, of A and of W, is 16 contiguous bytes of a
 * row: a row of A with lda a multiple of 8, a row of W with ldw a multiple
 * of 8, both 16-byte aligned, K a multiple of 32.
 *
 * A unit is 32 columns of C (four 8-column tiles) by up to 32 rows (two
 * 16-row tiles); its warp's sums are d[2][4][4] (tile of rows, tile of
 * columns, result register). Rows of A past M and rows of W past N load as
 * zeros and their results are not stored.
 *
 * tests/test_mma_rows.c runs these macros on the CPU for every lane of a
 * warp, with the instruction replaced by a model of the fragment layout
 * above, against a plain dot product; tests/test_step_gpu.c runs them on a
 * GPU inside the step kernel against the per-op path. */
#ifndef OT_KERNELS_MMA_GPU_H
#define OT_KERNELS_MMA_GPU_H

#include <stdint.h>

#include "kernels/kcommon.h"

#define OT_MMA_TILES_M 2 /* 16-row tiles of a unit */
#define OT_MMA_TILES_N 4 /* 8-column tiles of a unit */
#define OT_MMA_UNIT_N (8 * OT_MMA_TILES_N)
#define OT_MMA_CHUNK_K 32

/* D[0 .. 4) += A (registers A0-A3) @ B (B0, B1) for one 16x8x16 tile. Not
 * volatile: the instruction has no effect beyond its outputs, so the
 * compiler may move it among the loads (and keep the operands' addresses
 * in registers across it). */
#if defined(__NVPTX__)
#define OT_MMA_16816(D, A0, A1, A2, A3, B0, B1)                                                \
  __asm__("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, " \
          "{%8,%9}, {%0,%1,%2,%3};"                                                            \
          : "+f"((D)[0]), "+f"((D)[1]), "+f"((D)[2]), "+f"((D)[3])                             \
          : "r"(A0), "r"(A1), "r"(A2), "r"(A3), "r"(B0), "r"(B1))
#else /* not reached: the encoders give the instruction to NVIDIA GPUs only */
#define OT_MMA_16816(D, A0, A1, A2, A3, B0, B1) __builtin_trap()
#endif

/* The result register E (0-3) of tile (MT, J) in lane (G, T): its row of the
 * unit's 32 and its column of the unit's 32. */
#define OT_MMA_ROW(MT, E, G) (16 * (MT) + (G) + 8 * ((E) >> 1))
#define OT_MMA_COL(J, E, T) (8 * (J) + 2 * (T) + ((E) & 1))

/* A lane's loads for the chunk of k at K0 (a multiple of 32): XA[mt][h] the
 * 16 bytes of A's row 16 mt + 8 h + G, XW[j] those of W's row N0 + 8 j + G,
 * each at K0 + 8 T; zeros past M rows of A and N rows of W. */
#define OT_MMA_LOADS(XA, XW, A, LDA, M, W, LDW, N, N0, K0, G, T)                                                   \
  do {                                                                                                             \
    OT_UNROLL for (int mt_ = 0; mt_ < OT_MMA_TILES_M; mt_++) OT_UNROLL for (int h_ = 0; h_ < 2; h_++) {            \
      const int64_t r_ = 16 * mt_ + 8 * h_ + (G);                                                                  \
      (XA)[mt_][h_] =                                                                                              \
          r_ < (M) ? *(const ot_ku32x4 *)((A) + r_ * (LDA) + (K0) + 8 * (T)) : (ot_ku32x4){0u, 0u, 0u, 0u};        \
    }                                                                                                              \
    OT_UNROLL for (int j_ = 0; j_ < OT_MMA_TILES_N; j_++) {                                                        \
      const int64_t n_ = (N0) + 8 * j_ + (G);                                                                      \
      (XW)[j_] = n_ < (N) ? *(const ot_ku32x4 *)((W) + n_ * (LDW) + (K0) + 8 * (T)) : (ot_ku32x4){0u, 0u, 0u, 0u}; \
    }                                                                                                              \
  } while (0)

/* D[mt][j] += the chunk's products, by MMA (OT_MMA_16816, or the tests'
 * model): the first 4 values of each 16-byte load go to one instruction,
 * the last 4 to a second. A second row tile past M is skipped (the
 * condition is the same in every lane). */
#define OT_MMA_PRODUCTS(MMA, D, XA, XW, M)                                                                         \
  do {                                                                                                             \
    OT_UNROLL for (int mt_ = 0; mt_ < OT_MMA_TILES_M; mt_++) if (16 * mt_ < (M)) {                                 \
      OT_UNROLL for (int j_ = 0; j_ < OT_MMA_TILES_N; j_++) {                                                      \
        MMA((D)[mt_][j_], (XA)[mt_][0].x, (XA)[mt_][1].x, (XA)[mt_][0].y, (XA)[mt_][1].y, (XW)[j_].x, (XW)[j_].y); \
        MMA((D)[mt_][j_], (XA)[mt_][0].z, (XA)[mt_][1].z, (XA)[mt_][0].w, (XA)[mt_][1].w, (XW)[j_].z, (XW)[j_].w); \
      }                                                                                                            \
    }                                                                                                              \
  } while (0)

/* A warp's part of a unit: D (zeroed by the caller) += the chunks CH0,
 * CH0 + STRIDE, ... below NCH, U chunks' loads in flight before their
 * products (a decode GEMM is bound by the bytes in flight). The operands
 * are evaluated many times: pass local variables, not loads. */
#define OT_MMA_SPAN(MMA, U, D, A, LDA, M, W, LDW, N, N0, CH0, STRIDE, NCH, G, T)                                  \
  do {                                                                                                            \
    int64_t ch_ = (CH0);                                                                                          \
    for (; ch_ + ((U) - 1) * (STRIDE) < (NCH); ch_ += (U) * (STRIDE)) {                                           \
      ot_ku32x4 xa_[U][OT_MMA_TILES_M][2], xw_[U][OT_MMA_TILES_N];                                                \
      OT_UNROLL for (int u_ = 0; u_ < (U); u_++)                                                                  \
          OT_MMA_LOADS(xa_[u_], xw_[u_], A, LDA, M, W, LDW, N, N0, (ch_ + u_ * (STRIDE)) * OT_MMA_CHUNK_K, G, T); \
      OT_UNROLL for (int u_ = 0; u_ < (U); u_++) OT_MMA_PRODUCTS(MMA, D, xa_[u_], xw_[u_], M);                    \
    }                                                                                                             \
    for (; ch_ < (NCH); ch_ += (STRIDE)) {                                                                        \
      ot_ku32x4 xa_[OT_MMA_TILES_M][2], xw_[OT_MMA_TILES_N];                                                      \
      OT_MMA_LOADS(xa_, xw_, A, LDA, M, W, LDW, N, N0, ch_ *OT_MMA_CHUNK_K, G, T);                                \
      OT_MMA_PRODUCTS(MMA, D, xa_, xw_, M);                                                                       \
    }                                                                                                             \
  } while (0)

/* Whether rows of a (lda) and weights w (ldw) of K columns can be read so. */
static inline int ot_mma_rows_ok(const void *a, int64_t lda, const void *w, int64_t ldw, int64_t K) {
  return K > 0 && K % OT_MMA_CHUNK_K == 0 && lda % 8 == 0 && ldw % 8 == 0 && (uintptr_t)a % 16 == 0 &&
         (uintptr_t)w % 16 == 0;
}

#endif
