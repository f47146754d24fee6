/* fused.c — kernels that do in one launch what a decode step would otherwise
 * do in several. A synchronous launch costs ~26 us on the H200
 * (bench/RESULTS.md) while a decode step's small kernels do a few us of work
 * each, so launches, not bytes, bound a resident decode. RoPE with the
 * KV-cache append is one launch instead of four (attention_rows.c, beside
 * its batched form); the q/k/v and gate/up/SwiGLU forms are one op each but
 * still one GEMV launch per matrix (see gemv_gpu.c for why the
 * single-launch version is off).
 *
 * Each fused kernel has a fast path (GPU, eligible layouts) and falls back to
 * the separate kernels, which define its semantics; the references compose
 * the separate references. */
#include "kernels/blas_gpu.h"
#include "kernels/gemv_gpu.h"
#include "kernels/kcommon.h"

/* Whether c = a @ w^T can take the GPU GEMV; fills the matrix descriptor. */
static int gemv_eligible(int dev, ot_kview c, ot_kview a, ot_kview w, ot_kgemv_mat *m) {
  if (!ot_kfast_gpu(dev) || a.ndim != 2 || c.ndim != 2 || w.ndim != 2 || a.dt != OT_F32 || c.dt != OT_F32) return 0;
  if (a.nb[1] != 1 || c.nb[1] != 1 || w.nb[1] != 1 || c.ne[0] != a.ne[0] || w.ne[1] != a.ne[1] || c.ne[1] != w.ne[0])
    return 0;
  if (!ot_kgemv_gpu_ok(w.p, w.dt, a.ne[1], w.nb[0], a.ne[0])) return 0;
  *m = (ot_kgemv_mat){w.p, w.dt, w.nb[0], c.p, c.nb[0], w.ne[0]};
  return 1;
}

ot_status ot_k_matmul_multi(int dev, int n, const ot_kview *c, ot_kview a, const ot_kview *w) {
  if (n < 1 || n > 3) return ot_fail(OT_ERR_INVALID_ARG, "matmul_multi: %d matrices (1 to 3)", n);
  ot_kgemv_mat m[3];
  int fast = 1;
  for (int i = 0; i < n && fast; i++) fast = gemv_eligible(dev, c[i], a, w[i], &m[i]);
  if (fast) {
    ot_kgemv_gpu_multi(dev, m, n, 0, a.p, a.nb[0], a.ne[0], a.ne[1], 0);
    return OT_OK;
  }
  /* the outputs are distinct and none is an input: one wait for the GEMMs */
  ot_kblas_group_begin(dev);
  ot_status st = OT_OK;
  for (int i = 0; i < n && st == OT_OK; i++) st = ot_k_matmul(dev, c[i], a, w[i], 1, 0);
  const ot_status end = ot_kblas_group_end(dev);
  return st != OT_OK ? st : end;
}

ot_status ot_ref_matmul_multi(int n, const ot_kview *c, ot_kview a, const ot_kview *w) {
  if (n < 1 || n > 3) return ot_fail(OT_ERR_INVALID_ARG, "matmul_multi: %d matrices (1 to 3)", n);
  for (int i = 0; i < n; i++) OT_TRY(ot_ref_matmul(c[i], a, w[i], 1, 0));
  return OT_OK;
}

ot_status ot_k_matmul_swiglu(int dev, ot_kview y, ot_kview up, ot_kview a, ot_kview wg, ot_kview wu) {
  /* (the single-launch gate/up/SwiGLU GEMV is disabled: see gemv_gpu.c);
   * gate and up are one group of GEMMs (one wait), SwiGLU after both */
  ot_kblas_group_begin(dev);
  ot_status st = ot_k_matmul(dev, y, a, wg, 1, 0);
  if (st == OT_OK) st = ot_k_matmul(dev, up, a, wu, 1, 0);
  const ot_status end = ot_kblas_group_end(dev);
  OT_TRY(st != OT_OK ? st : end);
  return ot_k_swiglu(dev, y, y, up);
}

ot_status ot_ref_matmul_swiglu(ot_kview y, ot_kview up, ot_kview a, ot_kview wg, ot_kview wu) {
  OT_TRY(ot_ref_matmul(y, a, wg, 1, 0));
  OT_TRY(ot_ref_matmul(up, a, wu, 1, 0));
  return ot_ref_swiglu(y, y, up);
}
