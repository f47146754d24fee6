/* warp_ops.h (internal to src/kernels) — warp-level reductions for the bare
 * GPU kernels (ompx.h shuffles): every lane gets the warp's sum or max.
 * Outside NVPTX (a host device compiling the same source) a "warp" is one
 * thread and these return their argument. */
#ifndef OT_KERNELS_WARP_OPS_H
#define OT_KERNELS_WARP_OPS_H

#include <math.h>
#include <ompx.h>

#include "ot_pragmas.h"

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
static inline float ot_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += ompx_shfl_down_sync_f(~0ull, v, (unsigned)o, 32);
  return ot_warp_bcast(v, 0);
}
static inline float ot_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, ompx_shfl_down_sync_f(~0ull, v, (unsigned)o, 32));
  return ot_warp_bcast(v, 0);
}
OT_DECLARE_TARGET_END

#endif
