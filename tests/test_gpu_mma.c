/* test_gpu_mma.c — tensor cores from a bare OpenMP kernel (issue 44: the
 * road to batched decode rows inside one persistent launch). clang 19
 * gives nvptx device code the WMMA builtins that CUDA's mma.h wraps
 * (docs/gpu.md, Toolchain); this runs them: y [M, N] = x [M, K] @ W^T for
 * bf16 x and W [N, K] (HF Linear, W row-major, so W^T is column-major with
 * leading dimension K) with f32 accumulation, M = 16 rows (a batch of 16
 * decode rows), each warp one 16-column tile of y, K in steps of 16, the
 * accumulator carried across steps. Against a host reference in double on
 * the same bf16 values: a wrong fragment layout or a dropped step is far
 * off, f32 rounding is not.
 *
 * The kernel only does something on an NVIDIA GPU (the builtins are
 * nvptx's): the test runs where the build has CUDA and a GPU the bare
 * kernels run on, and is skipped elsewhere (CI, the host-offload plugin,
 * amdgcn). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/kcommon.h"
#include "memory/device.h"
#include "omptensor/memory.h"
#include "ot_gpu.h"
#include "ot_test.h"

enum { M = 16, N = 64, K = 96, TILE = 16, WARPS = N / TILE };

#ifdef OT_HAVE_CUDA
/* one warp per 16 columns: acc = sum over k-steps of x[:, k..k+16) @ W[n..n+16, k..k+16)^T */
static void run_mma(int dev, float *y, const uint16_t *x, const uint16_t *w) {
  OT_GPU_KERNEL(dev, 1, WARPS * OT_WARP_SIZE, OT_DEVPTR(y, x, w)) {
#if defined(__NVPTX__)
    const int warp = OT_WARP_INDEX(OT_GPU_THREAD_ID()), n0 = warp * TILE;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int k0 = 0; k0 < K; k0 += TILE) {
      int fa[4], fb[4];
      __mma_bf16_m16n16k16_ld_a(fa, (const int *)(x + k0), K, 0);                       /* x row-major, ld K */
      __mma_bf16_m16n16k16_ld_b(fb, (const int *)(w + (int64_t)n0 * K + k0), K, 1);    /* W^T column-major, ld K */
      __mma_bf16_m16n16k16_mma_f32(acc, fa, fb, acc, 1, 0);                              /* a row, b col */
    }
    __hmma_m16n16k16_st_c_f32(y + n0, acc, N, 0); /* y row-major, ld N */
#else
    (void)y, (void)x, (void)w;
#endif
  }
}
#endif

static void test_bf16_tiles(void **state) {
  (void)state;
  const int dev = 0;
#ifndef OT_HAVE_CUDA
  (void)dev;
  printf("  (not an NVIDIA build: skipped)\n");
  skip();
#else
  if (ot_num_devices() == 0 || !ot_kfast_gpu(dev)) {
    printf("  (no GPU the bare kernels run on: skipped)\n");
    skip();
  }
  uint16_t *x = malloc(M * K * sizeof *x), *w = malloc(N * K * sizeof *w);
  float *got = malloc(M * N * sizeof *got);
  double *ref = malloc(M * N * sizeof *ref), *mag = malloc(M * N * sizeof *mag);
  assert_true(x && w && got && ref && mag);
  uint64_t st = 11;
  for (int i = 0; i < M * K; i++) x[i] = ot_kf32_bf16(ot_test_rand_uniform(&st, -1, 1));
  for (int i = 0; i < N * K; i++) w[i] = ot_kf32_bf16(ot_test_rand_uniform(&st, -1, 1));
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double s = 0, a = 0;
      for (int k = 0; k < K; k++) {
        const double p = (double)ot_kbf16_f32(x[m * K + k]) * ot_kbf16_f32(w[n * K + k]);
        s += p, a += fabs(p);
      }
      ref[m * N + n] = s, mag[m * N + n] = a;
    }
  void *dx, *dw, *dy;
  OT_ASSERT_OK(ot_mem_alloc(OT_MEM_DEVICE, dev, M * K * 2, &dx));
  OT_ASSERT_OK(ot_mem_alloc(OT_MEM_DEVICE, dev, N * K * 2, &dw));
  OT_ASSERT_OK(ot_mem_alloc(OT_MEM_DEVICE, dev, M * N * 4, &dy));
  OT_ASSERT_OK(ot_mem_copy(dx, dev, x, OT_DEVICE_HOST, M * K * 2));
  OT_ASSERT_OK(ot_mem_copy(dw, dev, w, OT_DEVICE_HOST, N * K * 2));
  memset(got, 0xff, M * N * sizeof *got); /* NaN: an element never stored fails */
  OT_ASSERT_OK(ot_mem_copy(dy, dev, got, OT_DEVICE_HOST, M * N * 4));
  run_mma(dev, dy, dx, dw);
  OT_ASSERT_OK(ot_mem_copy(got, OT_DEVICE_HOST, dy, dev, M * N * 4));
  double worst = 0;
  int bad = 0;
  for (int i = 0; i < M * N; i++) {
    const double e = fabs((double)got[i] - ref[i]);
    if (!(e <= 1e-4 * mag[i] + 1e-6)) bad++; /* NaN counts as bad */
    if (e > worst) worst = e;
  }
  printf("  y [%d, %d] = x [%d, %d] @ W [%d, %d]^T on tensor cores: max error %.3g, %d of %d outside f32 rounding\n", M,
         N, M, K, N, K, worst, bad, M * N);
  ot_mem_free(OT_MEM_DEVICE, dev, dx);
  ot_mem_free(OT_MEM_DEVICE, dev, dw);
  ot_mem_free(OT_MEM_DEVICE, dev, dy);
  free(x), free(w), free(got), free(ref), free(mag);
  assert_int_equal(bad, 0);
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_bf16_tiles)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
