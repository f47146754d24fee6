/* blas_gpu.c — the vendor GEMM path: cuBLAS on the same device pointers the
 * portable kernels get, selected at run time (OMPTENSOR_GEMM=auto|portable|
 * cublas; auto takes cuBLAS where the build found it and the device is a
 * GPU, the portable GEMM everywhere else).
 *
 * libomptarget's CUDA plugin allocates in the device's primary context, which
 * is the context the CUDA runtime (and so cuBLAS) uses: the pointers from
 * omp_target_alloc are valid cuBLAS operands as they are. Calls run on the
 * legacy default stream and are synchronised before returning, like every
 * other kernel here (the executor relies on kernels being synchronous).
 *
 * Row-major C [M, N] = A [M, K] @ B [K, N] is computed as the column-major
 * C^T [N, M] = B^T A^T; a row-major operand with a unit column stride is the
 * column-major transpose as it lies, one with a unit row stride is passed
 * with CUBLAS_OP_T. Compute is CUBLAS_COMPUTE_32F (fp32 accumulation, no
 * TF32), the semantics of the portable kernels. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env.h"
#include "kernels/blas_gpu.h"
#include "kernels/kcommon.h"
#include "omptensor/context.h"

#ifdef OT_HAVE_CUBLAS
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#endif

static int choice = -1; /* 0 portable, 1 vendor, 2 vendor required */

/* ot_kblas_group_begin: -1 outside a group, else the group's device; queued:
 * a GEMM of the group not waited for yet */
static _Thread_local int group_dev = -1, queued;

void ot_kblas_group_begin(int dev) {
  group_dev = dev;
  queued = 0;
}

static int gemm_choice(void) {
  if (choice < 0) choice = ot_env_choice("OMPTENSOR_GEMM", 1); /* portable | auto | cublas (core/env.h) */
  return choice;
}

#ifdef OT_HAVE_CUBLAS
static cublasHandle_t handles[OT_MAX_DEVICES];

static cudaDataType cuda_type(ot_dtype t) {
  return t == OT_F32 ? CUDA_R_32F : t == OT_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

/* One operand as cuBLAS sees it: op and leading dimension, or -1 if its
 * strides are not expressible (no unit stride in either inner dim). rows x
 * cols is the row-major shape; the column-major matrix we want is its
 * transpose. */
static int operand(int64_t rows, int64_t cols, int64_t s_row, int64_t s_col, cublasOperation_t *op, int64_t *ld) {
  if (s_col == 1 || cols == 1) {
    *op = CUBLAS_OP_N;
    *ld = rows == 1 ? (cols > 1 ? cols : 1) : s_row;
    return *ld >= (cols > 1 ? cols : 1) ? 0 : -1;
  }
  if (s_row == 1 || rows == 1) {
    *op = CUBLAS_OP_T;
    *ld = cols == 1 ? (rows > 1 ? rows : 1) : s_col;
    return *ld >= (rows > 1 ? rows : 1) ? 0 : -1;
  }
  return -1;
}
#endif

int ot_k_gemm_vendor(int dev) {
#ifdef OT_HAVE_CUBLAS
  return gemm_choice() != 0 && ot_kfast_gpu(dev) && dev >= 0 && dev < OT_MAX_DEVICES;
#else
  (void)dev;
  return 0;
#endif
}

ot_status ot_kblas_gemm(int dev, ot_kview c, ot_kview a, ot_kview b, int64_t batch, int64_t M, int64_t N, int64_t K,
                        const int64_t as[3], const int64_t bs[3], const int64_t cs[3], int accumulate, int *done) {
  *done = 0;
  int want = gemm_choice();
  if (!want || !ot_kfast_gpu(dev)) {
    if (want == 2 && !ot_kruns_on_host(dev))
      return ot_fail(OT_ERR_UNSUPPORTED, "matmul: OMPTENSOR_GEMM=cublas but device %d is not an NVIDIA GPU", dev);
    return OT_OK;
  }
#ifdef OT_HAVE_CUBLAS
  const int types_ok = a.dt == b.dt && !ot_dtype_block((ot_dtype)a.dt) && (c.dt == OT_F32 || c.dt == a.dt);
  cublasOperation_t opx, opy;
  int64_t ldx, ldy;
  if (!types_ok || cs[2] != 1 || cs[1] < N || operand(K, N, bs[1], bs[2], &opx, &ldx) ||
      operand(M, K, as[1], as[2], &opy, &ldy) || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX ||
      ldx > INT32_MAX || ldy > INT32_MAX || cs[1] > INT32_MAX || batch > INT32_MAX) {
    if (want == 2) return ot_fail(OT_ERR_UNSUPPORTED, "matmul: OMPTENSOR_GEMM=cublas but these dtypes/strides are not BLAS-expressible");
    return OT_OK;
  }
  if (dev < 0 || dev >= OT_MAX_DEVICES) return OT_OK;
  if (cudaSetDevice(dev) != cudaSuccess) return ot_fail(OT_ERR_DEVICE, "matmul: cudaSetDevice(%d) failed", dev);
  if (!handles[dev] && cublasCreate(&handles[dev]) != CUBLAS_STATUS_SUCCESS)
    return ot_fail(OT_ERR_DEVICE, "matmul: cublasCreate failed on device %d", dev);
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  /* column-major C^T [N, M] = op(X) [N, K] @ op(Y) [K, M] with X from B, Y from A */
  cublasStatus_t st = cublasGemmStridedBatchedEx(
      handles[dev], opx, opy, (int)N, (int)M, (int)K, &one, b.p, cuda_type(b.dt), (int)ldx, (long long)bs[0], a.p,
      cuda_type(a.dt), (int)ldy, (long long)as[0], &beta, c.p, cuda_type(c.dt), (int)cs[1], (long long)cs[0],
      (int)batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) return ot_fail(OT_ERR_DEVICE, "matmul: cuBLAS GEMM failed (status %d)", (int)st);
  *done = 1;
  if (group_dev == dev) {
    queued = 1;
    return OT_OK;
  }
  if (cudaStreamSynchronize(0) != cudaSuccess) return ot_fail(OT_ERR_DEVICE, "matmul: cuBLAS GEMM did not complete");
  return OT_OK;
#else
  (void)c, (void)a, (void)b, (void)batch, (void)M, (void)N, (void)K, (void)as, (void)bs, (void)cs, (void)accumulate;
  if (want == 2) return ot_fail(OT_ERR_UNSUPPORTED, "matmul: OMPTENSOR_GEMM=cublas but this build has no cuBLAS");
  return OT_OK;
#endif
}

ot_status ot_kblas_group_end(int dev) {
  const int wait = queued && group_dev == dev;
  group_dev = -1;
  queued = 0;
  if (!wait) return OT_OK;
#ifdef OT_HAVE_CUBLAS
  if (cudaSetDevice(dev) != cudaSuccess || cudaStreamSynchronize(0) != cudaSuccess)
    return ot_fail(OT_ERR_DEVICE, "matmul: the cuBLAS GEMMs of a group did not complete on device %d", dev);
#endif
  return OT_OK;
}
