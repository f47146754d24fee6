/* test_gpu_helpers.c — the "helper called from a bare kernel" miscompile
 * (issue 44), reduced. Issue 15 (H200, LLVM 19) saw every output of the
 * decode GEMV come out 0 when its dot product moved from a macro into a
 * static inline helper with four 16-byte loads in flight per lane, and a
 * fused GEMV with two dozen firstprivate scalars give wrong results. Here
 * one small bare kernel, y[n] = W[n, :] . x for bf16 W [N, K], is written
 * five ways:
 *   macro      the loop body in a macro (what gemv_gpu.c and step_gpu.c do)
 *   inline     the 16-byte dot product in a static inline helper
 *   always     the same helper, __attribute__((always_inline))
 *   four       four vectors loaded before use, passed by value to the helper
 *   scalars    the macro form with 24 firstprivate scalars
 * Each is compared with a host reference. The forms docs/writing-a-kernel.md
 * prescribes (macro, always) must be right; the others are reported
 * (reproduces / does not), which is what the rule rests on.
 * Skipped without a GPU the bare kernels run on (CI). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kcommon.h"
#include "memory/device.h"
#include "omptensor/memory.h"
#include "ot_gpu.h"
#include "ot_test.h"

enum { N = 512, K = 1024, WARPS = 8 };

typedef struct __attribute__((aligned(16))) v16 {
  uint32_t x, y, z, w;
} v16;

OT_DECLARE_TARGET_BEGIN
/* bf: kcommon.h's bit cast, a helper of the same kind (static inline) */
#define bf ot_kbits_f32
static inline float dot_inline(v16 q, const float *a) {
  return bf(q.x << 16) * a[0] + bf(q.x & 0xffff0000u) * a[1] + bf(q.y << 16) * a[2] + bf(q.y & 0xffff0000u) * a[3] +
         bf(q.z << 16) * a[4] + bf(q.z & 0xffff0000u) * a[5] + bf(q.w << 16) * a[6] + bf(q.w & 0xffff0000u) * a[7];
}
static inline __attribute__((always_inline)) float dot_always(v16 q, const float *a) { return dot_inline(q, a); }
OT_DECLARE_TARGET_END

#define DOT_MACRO(q, a)                                                                                        \
  (bf((q).x << 16) * (a)[0] + bf((q).x & 0xffff0000u) * (a)[1] + bf((q).y << 16) * (a)[2] +                    \
   bf((q).y & 0xffff0000u) * (a)[3] + bf((q).z << 16) * (a)[4] + bf((q).z & 0xffff0000u) * (a)[5] +            \
   bf((q).w << 16) * (a)[6] + bf((q).w & 0xffff0000u) * (a)[7])

/* The warp's sum over its lanes' s, written by lane 0 to y[n]. */
#define WARP_STORE(s)                                                                                          \
  do {                                                                                                         \
    for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) (s) += OT_WARP_SHFL_DOWN((s), o);                           \
    if (lane == 0) y[n] = (s);                                                                                 \
  } while (0)

static void run_form(int dev, int form, float *y, const uint16_t *w, const float *x) {
  const int nb = N / WARPS, nv = K / 8;
  if (form == 0) {
    OT_GPU_KERNEL(dev, nb, WARPS * OT_WARP_SIZE, OT_DEVPTR(y, w, x) firstprivate(nv))
    {
      const int lane = OT_WARP_LANE(OT_GPU_THREAD_ID()), n = (int)OT_GPU_BLOCK_ID() * WARPS + OT_WARP_INDEX(OT_GPU_THREAD_ID());
      const v16 *row = (const v16 *)(w + (int64_t)n * K);
      float s = 0.0f;
      for (int v = lane; v < nv; v += OT_WARP_SIZE) s += DOT_MACRO(row[v], x + v * 8);
      WARP_STORE(s);
    }
  } else if (form == 1 || form == 2) {
    const int always = form == 2;
    OT_GPU_KERNEL(dev, nb, WARPS * OT_WARP_SIZE, OT_DEVPTR(y, w, x) firstprivate(nv, always))
    {
      const int lane = OT_WARP_LANE(OT_GPU_THREAD_ID()), n = (int)OT_GPU_BLOCK_ID() * WARPS + OT_WARP_INDEX(OT_GPU_THREAD_ID());
      const v16 *row = (const v16 *)(w + (int64_t)n * K);
      float s = 0.0f;
      for (int v = lane; v < nv; v += OT_WARP_SIZE) s += always ? dot_always(row[v], x + v * 8) : dot_inline(row[v], x + v * 8);
      WARP_STORE(s);
    }
  } else if (form == 3) {
    OT_GPU_KERNEL(dev, nb, WARPS * OT_WARP_SIZE, OT_DEVPTR(y, w, x) firstprivate(nv))
    {
      const int lane = OT_WARP_LANE(OT_GPU_THREAD_ID()), n = (int)OT_GPU_BLOCK_ID() * WARPS + OT_WARP_INDEX(OT_GPU_THREAD_ID());
      const v16 *row = (const v16 *)(w + (int64_t)n * K);
      float s = 0.0f;
      for (int v = lane; v < nv; v += 4 * OT_WARP_SIZE) {
        const v16 q0 = row[v], q1 = row[v + OT_WARP_SIZE], q2 = row[v + 2 * OT_WARP_SIZE], q3 = row[v + 3 * OT_WARP_SIZE];
        s += dot_inline(q0, x + v * 8) + dot_inline(q1, x + (v + OT_WARP_SIZE) * 8) +
             dot_inline(q2, x + (v + 2 * OT_WARP_SIZE) * 8) + dot_inline(q3, x + (v + 3 * OT_WARP_SIZE) * 8);
      }
      WARP_STORE(s);
    }
  } else {
    /* 24 scalars, all 1 or 0 so that the sum is unchanged: the kernel must read each one right */
    const int64_t s0 = 1, s1 = 0, s2 = 1, s3 = 0, s4 = 1, s5 = 0, s6 = 1, s7 = 0, s8 = 1, s9 = 0, s10 = 1, s11 = 0;
    const float f0 = 1, f1 = 0, f2 = 1, f3 = 0, f4 = 1, f5 = 0, f6 = 1, f7 = 0, f8 = 1, f9 = 0, f10 = 1, f11 = 0;
    OT_GPU_KERNEL(dev, nb, WARPS * OT_WARP_SIZE,
                  OT_DEVPTR(y, w, x) firstprivate(nv, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, f0, f1, f2, f3, f4,
                                                   f5, f6, f7, f8, f9, f10, f11))
    {
      const int lane = OT_WARP_LANE(OT_GPU_THREAD_ID()), n = (int)OT_GPU_BLOCK_ID() * WARPS + OT_WARP_INDEX(OT_GPU_THREAD_ID());
      const v16 *row = (const v16 *)(w + (int64_t)n * K);
      const float one = (float)(s0 * s2 * s4 * s6 * s8 * s10 + s1 + s3 + s5 + s7 + s9 + s11) * f0 * f2 * f4 * f6 * f8 * f10 +
                        f1 + f3 + f5 + f7 + f9 + f11;
      float s = 0.0f;
      for (int v = lane; v < nv; v += OT_WARP_SIZE) s += one * DOT_MACRO(row[v], x + v * 8);
      WARP_STORE(s);
    }
  }
}

static void test_helper_forms(void **state) {
  (void)state;
  const int dev = 0;
  if (ot_num_devices() == 0 || !ot_kfast_gpu(dev)) {
    printf("  (no GPU the bare kernels run on: skipped)\n");
    skip();
  }
  uint16_t *w = malloc((size_t)N * K * sizeof *w);
  float *x = malloc(K * sizeof *x), *ref = malloc(N * sizeof *ref), *got = malloc(N * sizeof *got);
  assert_true(w && x && ref && got);
  uint64_t st = 7;
  for (int i = 0; i < N * K; i++) w[i] = ot_kf32_bf16(ot_test_rand_uniform(&st, -1, 1));
  for (int i = 0; i < K; i++) x[i] = ot_test_rand_uniform(&st, -1, 1);
  double scale = 0;
  for (int n = 0; n < N; n++) {
    double s = 0;
    for (int k = 0; k < K; k++) s += (double)ot_kbf16_f32(w[(size_t)n * K + k]) * x[k];
    ref[n] = (float)s;
    if (fabs(s) > scale) scale = fabs(s);
  }
  void *dw, *dx, *dy;
  OT_ASSERT_OK(ot_mem_alloc(OT_MEM_DEVICE, dev, (size_t)N * K * 2, &dw));
  OT_ASSERT_OK(ot_mem_alloc(OT_MEM_DEVICE, dev, K * 4, &dx));
  OT_ASSERT_OK(ot_mem_alloc(OT_MEM_DEVICE, dev, N * 4, &dy));
  OT_ASSERT_OK(ot_mem_copy(dw, dev, w, OT_DEVICE_HOST, (size_t)N * K * 2));
  OT_ASSERT_OK(ot_mem_copy(dx, dev, x, OT_DEVICE_HOST, K * 4));
  static const char *const names[] = {"macro", "inline", "always", "four", "scalars"};
  int right[5];
  for (int f = 0; f < 5; f++) {
    memset(got, 0xff, N * sizeof *got);
    OT_ASSERT_OK(ot_mem_copy(dy, dev, got, OT_DEVICE_HOST, N * 4));
    run_form(dev, f, dy, dw, dx);
    OT_ASSERT_OK(ot_mem_copy(got, OT_DEVICE_HOST, dy, dev, N * 4));
    double err = 0;
    for (int n = 0; n < N; n++) err = fmax(err, fabs((double)got[n] - ref[n]));
    right[f] = err <= 1e-4 * scale;
    printf("  %-8s max error %.3g of %.3g: %s\n", names[f], err, scale,
           right[f] ? "right" : "WRONG (the miscompile reproduces)");
  }
  ot_mem_free(OT_MEM_DEVICE, dev, dw);
  ot_mem_free(OT_MEM_DEVICE, dev, dx);
  ot_mem_free(OT_MEM_DEVICE, dev, dy);
  free(w), free(x), free(ref), free(got);
  assert_true(right[0]); /* the forms the kernels use */
  assert_true(right[2]);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_helper_forms)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
