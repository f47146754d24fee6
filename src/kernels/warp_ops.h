/* warp_ops.h (internal to src/kernels) — warp-level operations for the bare
 * GPU kernels, over warps of OT_WARP_SIZE lanes (ot_gpu.h: on a wave64 AMD
 * GPU a warp is half a wavefront, and every operation here stays in the
 * caller's half): a lane's value to every lane, butterfly exchanges, and
 * the warp's sum or max to every lane. On NVPTX through the PTX shuffles,
 * on AMDGCN through ds_bpermute (any lane's value by lane index, within the
 * wavefront) addressed inside the caller's warp. A host device compiling
 * the same source (never running it: ot_kfast_gpu) sees one-lane warps. */
#ifndef OT_KERNELS_WARP_OPS_H
#define OT_KERNELS_WARP_OPS_H

#include <math.h>

#include "ot_gpu.h"

OT_DECLARE_TARGET_BEGIN
#ifdef __AMDGCN__
/* the calling lane's index in its wavefront (0 .. OT_GPU_WAVEFRONT_SIZE - 1) */
static inline int ot_amd_lane(void) { return (int)__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u)); }
/* v of wavefront lane `src` (a union: C's way to read a float's bits) */
static inline float ot_amd_read_lane(float v, int src) {
  union {
    float f;
    int i;
  } u = {.f = v};
  u.i = __builtin_amdgcn_ds_bpermute(src << 2, u.i);
  return u.f;
}
#endif
/* lane `lane`'s v (0 <= lane < OT_WARP_SIZE), to every lane of the warp */
static inline float ot_warp_bcast(float v, int lane) {
#if defined(__NVPTX__)
  return __nvvm_shfl_sync_idx_f32(0xffffffffu, v, lane, OT_WARP_SIZE - 1);
#elif defined(__AMDGCN__)
  return ot_amd_read_lane(v, (ot_amd_lane() & ~(OT_WARP_SIZE - 1)) | lane);
#else
  (void)lane;
  return v;
#endif
}
/* the v of lane (lane ^ mask), 0 < mask < OT_WARP_SIZE: butterfly steps
 * within aligned groups of lanes */
static inline float ot_warp_xor(float v, int mask) {
#if defined(__NVPTX__)
  return __nvvm_shfl_sync_bfly_f32(0xffffffffu, v, mask, OT_WARP_SIZE - 1);
#elif defined(__AMDGCN__)
  return ot_amd_read_lane(v, ot_amd_lane() ^ mask);
#else
  (void)mask;
  return v;
#endif
}
static inline float ot_warp_sum(float v) {
  for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) v += OT_WARP_SHFL_DOWN(v, o);
  return ot_warp_bcast(v, 0);
}
static inline float ot_warp_max(float v) {
  for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) v = fmaxf(v, OT_WARP_SHFL_DOWN(v, o));
  return ot_warp_bcast(v, 0);
}
OT_DECLARE_TARGET_END

#endif
