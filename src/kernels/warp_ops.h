/* warp_ops.h (internal to src/kernels) — warp-level reductions for the bare
 * GPU kernels (OT_WARP_SHFL_DOWN, ot_gpu.h): every lane gets the warp's sum or max.
 * Outside NVPTX (a host device compiling the same source) a "warp" is one
 * thread and these return their argument. */
#ifndef OT_KERNELS_WARP_OPS_H
#define OT_KERNELS_WARP_OPS_H

#include <math.h>

#include "ot_gpu.h"

OT_DECLARE_TARGET_BEGIN
/* lane `lane`'s v, to every lane */
static inline float ot_warp_bcast(float v, int lane) {
#ifdef __NVPTX__
  return __nvvm_shfl_sync_idx_f32(0xffffffffu, v, lane, 0x1f);
#else
  (void)lane;
  return v;
#endif
}
/* the v of lane (lane ^ mask): butterfly steps within aligned groups of lanes */
static inline float ot_warp_xor(float v, int mask) {
#ifdef __NVPTX__
  return __nvvm_shfl_sync_bfly_f32(0xffffffffu, v, mask, 0x1f);
#else
  (void)mask;
  return v;
#endif
}
static inline float ot_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += OT_WARP_SHFL_DOWN(v, o);
  return ot_warp_bcast(v, 0);
}
static inline float ot_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, OT_WARP_SHFL_DOWN(v, o));
  return ot_warp_bcast(v, 0);
}
OT_DECLARE_TARGET_END

#endif
