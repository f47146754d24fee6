/* gemv_gpu.h (internal to src/kernels) — the GPU decode matmul. */
#ifndef OT_KERNELS_GEMV_GPU_H
#define OT_KERNELS_GEMV_GPU_H

#include <stdint.h>

#include "omptensor/dtype.h"

/* Up to 64 rows (a batch of 64 sequences decoding), in register chunks of 8
 * (gemv_gpu.c); beyond that a GEMM reuses weights better. */
#define OT_GEMV_MAX_M 64
#define OT_GEMV_CHUNK 8
#define OT_GEMV_ROWS 4 /* weight rows per warp beyond one chunk */

/* Whether the fast path takes W [N, K] (row stride ldw elements) of dtype
 * wdt for M rows of activations: 16-byte aligned rows, K a multiple of the
 * vector width (a q8b block). */
int ot_kgemv_gpu_ok(const void *w, ot_dtype wdt, int64_t K, int64_t ldw, int64_t M);

/* c [M, N] (+)= a [M, K] @ W^T, a and c f32 with row strides lda, ldc and unit
 * column stride. Runs on a GPU device only. */
void ot_kgemv_gpu(int dev, float *c, int64_t ldc, const float *a, int64_t lda, const void *w, ot_dtype wdt,
                  int64_t ldw, int64_t M, int64_t N, int64_t K, int accumulate);

/* One weight of a multi-matrix GEMV: W [N, K] with row stride ldw, output
 * c [M, N] with row stride ldc. */
typedef struct ot_kgemv_mat {
  const void *w;
  ot_dtype wdt;
  int64_t ldw;
  float *c;
  int64_t ldc, N;
} ot_kgemv_mat;

/* 1-3 matrices sharing a (each c = a @ W^T); swiglu is ignored for now (see
 * gemv_gpu.c). */
void ot_kgemv_gpu_multi(int dev, const ot_kgemv_mat *mats, int n_mats, int swiglu, const float *a, int64_t lda,
                        int64_t M, int64_t K, int accumulate);

#endif
