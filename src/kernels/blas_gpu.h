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

/* A group of GEMMs that read none of one another's outputs (q, k and v of
 * one input; gate and up): between ot_kblas_group_begin and
 * ot_kblas_group_end a vendor GEMM returns once queued, and the end waits
 * once for all of them, so the host queues the next GEMM while the last
 * runs instead of paying a wait each (every other kernel here returns
 * complete, and the executor relies on that after an op). A portable kernel
 * inside a group runs while the queued GEMMs may still run. Per calling
 * thread; groups do not nest. */
void ot_kblas_group_begin(int dev);
/* Waits for the group's GEMMs (an error names what did not complete). */
ot_status ot_kblas_group_end(int dev);

#endif
