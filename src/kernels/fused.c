/* fused.c — kernels that do in one launch what a decode step would otherwise
 * do in several. A synchronous launch costs ~26 us on the H200
 * (bench/RESULTS.md) while a decode step's small kernels do a few us of work
 * each, so launches, not bytes, bound a resident decode. RoPE with the
 * KV-cache append is one launch instead of four; the q/k/v and gate/up/SwiGLU
 * forms are one op each but still one GEMV launch per matrix (see
 * gemv_gpu.c for why the single-launch version is off).
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

/* ---- RoPE + KV-cache append ------------------------------------------------ */

static ot_status ra_check(ot_kview q, ot_kview k, ot_kview v, ot_kview kc, ot_kview vc, int64_t pos) {
  static const char *op = "rope_append";
  OT_TRY(ot_kcheck(op, "q", q, 3, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "k", k, 3, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "v", v, 3, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "k_cache", kc, 3, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "v_cache", vc, 3, 3, OT_KM_FLOAT));
  if (q.ne[0] != k.ne[0] || q.ne[2] != k.ne[2] || q.ne[2] % 2 || k.ne[0] != v.ne[0] || k.ne[1] != v.ne[1] ||
      k.ne[2] != v.ne[2] || kc.ne[1] != k.ne[1] || kc.ne[2] != k.ne[2] || vc.ne[0] != kc.ne[0] || vc.ne[1] != kc.ne[1] ||
      vc.ne[2] != kc.ne[2])
    return ot_fail(OT_ERR_SHAPE, "rope_append: q %s, k %s, v %s, caches %s / %s disagree (need [T, H, hd], "
                   "[T, KV, hd] with an even hd and caches [max_seq, KV, hd])",
                   ot_kshape_str(q), ot_kshape_str(k), ot_kshape_str(v), ot_kshape_str(kc), ot_kshape_str(vc));
  if (pos < 0 || pos + k.ne[0] > kc.ne[0])
    return ot_fail(OT_ERR_SHAPE, "rope_append: rows [%lld, %lld) do not fit the cache %s", (long long)pos,
                   (long long)(pos + k.ne[0]), ot_kshape_str(kc));
  return OT_OK;
}

/* Rotates q and k in place (as ot_k_rope), then appends the rotated k and v
 * at rows [pos, pos+T) of the caches (as ot_k_kv_append), in one launch over
 * (row, head of q or k, pair). */
ot_status ot_k_rope_append(int dev, ot_kview q, ot_kview k, ot_kview v, ot_kview kc, ot_kview vc, int64_t pos,
                           ot_rope r) {
  OT_TRY(ra_check(q, k, v, kc, vc, pos));
  const int64_t T = q.ne[0], H = q.ne[1], KV = k.ne[1], d = q.ne[2], half = d / 2;
  r = ot_krope_resolve(r, pos + T, d);
  if (T == 0 || d == 0) return OT_OK;
  void *qp = q.p, *kp = k.p, *kcp = kc.p, *vcp = vc.p;
  const void *vp = v.p;
  const int qt = q.dt, kt = k.dt, vt = v.dt, kct = kc.dt, vct = vc.dt;
  const int64_t q0 = q.nb[0], q1 = q.nb[1], q2 = q.nb[2], k0 = k.nb[0], k1 = k.nb[1], k2 = k.nb[2];
  const int64_t v0 = v.nb[0], v1 = v.nb[1], v2 = v.nb[2], c0 = kc.nb[0], c1 = kc.nb[1], c2 = kc.nb[2];
  const int64_t e0 = vc.nb[0], e1 = vc.nb[1], e2 = vc.nb[2], HK = H + KV;
  OT_PARFOR3(dev, OT_DEVPTR(qp, kp, vp, kcp, vcp) firstprivate(r))
  for (int64_t s = 0; s < T; s++)
    for (int64_t h = 0; h < HK; h++)
      for (int64_t i = 0; i < half; i++) {
        const float ang = ot_krope_angle(pos + s, i, d, r), c = cosf(ang) * ot_krope_scale(r),
                    sn = sinf(ang) * ot_krope_scale(r);
        if (h < H) {
          const int64_t o1 = s * q0 + h * q1 + i * q2, o2 = o1 + half * q2;
          const float x1 = ot_kld(qt, qp, o1), x2 = ot_kld(qt, qp, o2);
          ot_kst(qt, qp, o1, x1 * c - x2 * sn);
          ot_kst(qt, qp, o2, x2 * c + x1 * sn);
        } else {
          const int64_t g = h - H, o1 = s * k0 + g * k1 + i * k2, o2 = o1 + half * k2;
          const float x1 = ot_kld(kt, kp, o1), x2 = ot_kld(kt, kp, o2);
          const float y1 = x1 * c - x2 * sn, y2 = x2 * c + x1 * sn;
          ot_kst(kt, kp, o1, y1);
          ot_kst(kt, kp, o2, y2);
          /* the cache gets what k now holds (rounded to k's dtype first) */
          const int64_t co = (pos + s) * c0 + g * c1;
          ot_kst(kct, kcp, co + i * c2, ot_kld(kt, kp, o1));
          ot_kst(kct, kcp, co + (i + half) * c2, ot_kld(kt, kp, o2));
          const int64_t vo = s * v0 + g * v1, eo = (pos + s) * e0 + g * e1;
          ot_kst(vct, vcp, eo + i * e2, ot_kld(vt, vp, vo + i * v2));
          ot_kst(vct, vcp, eo + (i + half) * e2, ot_kld(vt, vp, vo + (i + half) * v2));
        }
      }
  return OT_OK;
}

ot_status ot_ref_rope_append(ot_kview q, ot_kview k, ot_kview v, ot_kview kc, ot_kview vc, int64_t pos, ot_rope r) {
  OT_TRY(ra_check(q, k, v, kc, vc, pos));
  OT_TRY(ot_ref_rope(q, pos, r));
  OT_TRY(ot_ref_rope(k, pos, r));
  OT_TRY(ot_ref_kv_append(kc, k, pos));
  return ot_ref_kv_append(vc, v, pos);
}
