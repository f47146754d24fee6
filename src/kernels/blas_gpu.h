/* blas_gpu.h (internal to src/kernels) — the vendor GEMM path (cuBLAS). */
#ifndef OT_KERNELS_BLAS_GPU_H
#define OT_KERNELS_BLAS_GPU_H

#include <stdint.h>

#include "kernels/kernels.h"

/* Computes c (+)= a @ b with cuBLAS when it is selected (OMPTENSOR_GEMM),
 * the device is a GPU and the dtypes/strides are BLAS-expressible; sets
 * *done. Otherwise *done = 0 and the caller runs the portable kernel.
 * b is the [K, N] view (already transposed for trans_b); as/bs/cs are the
 * (batch, row, col) strides in elements. */
ot_status ot_kblas_gemm(int dev, ot_kview c, ot_kview a, ot_kview b, int64_t batch, int64_t M, int64_t N, int64_t K,
                        const int64_t as[3], const int64_t bs[3], const int64_t cs[3], int accumulate, int *done);

#endif
