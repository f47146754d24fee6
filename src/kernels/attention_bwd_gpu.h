/* attention_bwd_gpu.h (internal to src/kernels) — the causal attention
 * backward as warp-per-row GPU kernels (attention_bwd_gpu.c). Callers check
 * eligibility: a GPU device, every operand f32 with a unit last stride. */
#ifndef OT_KERNELS_ATTENTION_BWD_GPU_H
#define OT_KERNELS_ATTENTION_BWD_GPU_H

#include <stdint.h>

#define OT_KATTN_BWD_MAX_D 128 /* shared memory: 8 rows + two padded 32-row tiles, < 48 KiB */

typedef struct ot_kattn_bwd_gpu_args {
  const float *q, *k, *v, *dout;   /* q, dout [T, H, hd]; k, v [T, Hk, hd] */
  float *dq, *dk, *dv, *ws;        /* like q / k / v; ws [T, H, 2] */
  int64_t T, H, Hk, hd;
  int64_t q0, q1, k0, k1, v0, v1, o0, o1, dq0, dq1, dk0, dk1, dv0, dv1, w0, w1, w2; /* strides, elements */
  float scale;
} ot_kattn_bwd_gpu_args;

int ot_kattn_bwd_gpu_ok(int64_t hd); /* hd <= OT_KATTN_BWD_MAX_D */
void ot_kattn_bwd_gpu(int dev, const ot_kattn_bwd_gpu_args *a);

#endif
