/* matmul.c — batched matmul: matrix-vector fast path (decode), tiled GEMM,
 * and the reference.
 *
 * A vendor-BLAS path (cuBLAS through `target data use_device_ptr` / interop,
 * docs/design.md) plugs in at the top of ot_k_matmul: when the device is a CUDA
 * GPU, dtypes are f32/f16/bf16 and strides are BLAS-expressible (unit stride
 * in one of the two inner dims), call cublasGemmStridedBatchedEx on the same
 * device pointers; q8b and odd strides stay on the portable kernels below. */
#include "kernels/blas_gpu.h"
#include "kernels/gemv_gpu.h"
#include "kernels/gemv_host.h"
#include "kernels/kcommon.h"

/* The checked, normalised problem: A [batch, M, K], B [batch, K, N], C [batch,
 * M, N], each given by (batch, row, col) element strides; a broadcast operand
 * has batch stride 0. */
typedef struct mm_prob {
  int64_t batch, M, N, K;
  int64_t as[3], bs[3], cs[3];
} mm_prob;

static void mm_strides(ot_kview v, int64_t s[3]) {
  s[0] = v.ndim == 3 ? v.nb[0] : 0;
  s[1] = v.nb[v.ndim - 2];
  s[2] = v.nb[v.ndim - 1];
}

static ot_status mm_check(ot_kview c, ot_kview a, ot_kview b, int trans_b, mm_prob *pr) {
  static const char *op = "matmul";
  OT_TRY(ot_kcheck(op, "a", a, 2, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "b", b, 2, 3, OT_KM_FLOAT | OT_KM_BLOCK));
  OT_TRY(ot_kcheck(op, "c", c, 2, 3, OT_KM_FLOAT));
  if (trans_b) b = ot_kview_t(b);
  int64_t batch = c.ndim == 3 ? c.ne[0] : 1;
  int64_t ba = a.ndim == 3 ? a.ne[0] : 1, bb = b.ndim == 3 ? b.ne[0] : 1;
  int64_t M = c.ne[c.ndim - 2], N = c.ne[c.ndim - 1], K = a.ne[a.ndim - 1];
  if (a.ne[a.ndim - 2] != M || b.ne[b.ndim - 2] != K || b.ne[b.ndim - 1] != N || (ba != batch && ba != 1) ||
      (bb != batch && bb != 1) || c.ndim < a.ndim || c.ndim < b.ndim)
    return ot_fail(OT_ERR_SHAPE, "matmul: c %s = a %s @ %s %s: shapes disagree (need a [batch?, M, K], "
                   "op(b) [batch?, K, N], c [batch?, M, N])",
                   ot_kshape_str(c), ot_kshape_str(a), trans_b ? "b^T, b" : "b",
                   ot_kshape_str(trans_b ? ot_kview_t(b) : b));
  pr->batch = batch;
  pr->M = M;
  pr->N = N;
  pr->K = K;
  mm_strides(a, pr->as);
  mm_strides(b, pr->bs);
  mm_strides(c, pr->cs);
  if (ba == 1) pr->as[0] = 0;
  if (bb == 1) pr->bs[0] = 0;
  return OT_OK;
}

/* ---- reference ---------------------------------------------------------- */

ot_status ot_ref_matmul(ot_kview c, ot_kview a, ot_kview b, int trans_b, int accumulate) {
  mm_prob p;
  OT_TRY(mm_check(c, a, b, trans_b, &p));
  for (int64_t bi = 0; bi < p.batch; bi++)
    for (int64_t m = 0; m < p.M; m++)
      for (int64_t n = 0; n < p.N; n++) {
        double acc = 0.0;
        for (int64_t k = 0; k < p.K; k++)
          acc += (double)ot_kld(a.dt, a.p, bi * p.as[0] + m * p.as[1] + k * p.as[2]) *
                 (double)ot_kld(b.dt, b.p, bi * p.bs[0] + k * p.bs[1] + n * p.bs[2]);
        int64_t co = bi * p.cs[0] + m * p.cs[1] + n * p.cs[2];
        if (accumulate) acc += (double)ot_kld(c.dt, c.p, co);
        ot_kst(c.dt, c.p, co, (float)acc);
      }
  return OT_OK;
}

/* ---- matrix-vector (M == 1) -------------------------------------------------- */

/* Weight rows contiguous along K (trans_b of a row-major W[N, K]): one team
 * per output element; the team's threads stride over K together, so each
 * weight byte is read once and neighbouring threads read neighbouring bytes. */
static void mv_rows(int dev, ot_kview c, ot_kview a, ot_kview b, mm_prob p, int accumulate) {
  const void *ap = a.p, *bp = b.p;
  void *cp = c.p;
  const int adt = a.dt, bdt = b.dt, cdt = c.dt;
  const int64_t N = p.N, K = p.K, nout = p.batch * p.N;
  const int64_t as0 = p.as[0], ask = p.as[2], bs0 = p.bs[0], bsn = p.bs[2], cs0 = p.cs[0], csn = p.cs[2];
  OT_TEAMS(dev, ot_kteams(dev, nout), OT_DEVPTR(ap, bp, cp))
  for (int64_t t = 0; t < nout; t++) {
    const int64_t bi = t / N, n = t % N, ao = bi * as0, bo = bi * bs0 + n * bsn;
    float acc = 0.0f;
#define MV_ROW_LOOP(LDB)                                                                          \
    OT_TEAM_REDUCE(+ : acc)                                                                      \
    for (int64_t k = 0; k < K; k++) acc += ot_kld(adt, ap, ao + k * ask) * LDB(bp, bo + k);
    OT_KDISPATCH(bdt, MV_ROW_LOOP)
#undef MV_ROW_LOOP
    const int64_t co = bi * cs0 + n * csn;
    if (accumulate) acc += ot_kld(cdt, cp, co);
    ot_kst(cdt, cp, co, acc);
  }
}

/* Any other layout (B contiguous along N is the coalesced case): one thread
 * per output element, K loop inside. */
static void mv_cols(int dev, ot_kview c, ot_kview a, ot_kview b, mm_prob p, int accumulate) {
  const void *ap = a.p, *bp = b.p;
  void *cp = c.p;
  const int adt = a.dt, bdt = b.dt, cdt = c.dt;
  const int64_t batch = p.batch, N = p.N, K = p.K;
  const int64_t as0 = p.as[0], ask = p.as[2], bs0 = p.bs[0], bsk = p.bs[1], bsn = p.bs[2], cs0 = p.cs[0],
                csn = p.cs[2];
  OT_PARFOR2(dev, OT_DEVPTR(ap, bp, cp))
  for (int64_t bi = 0; bi < batch; bi++)
    for (int64_t n = 0; n < N; n++) {
      const int64_t ao = bi * as0, bo = bi * bs0 + n * bsn;
      float acc = 0.0f;
#define MV_COL_LOOP(LDB) \
      for (int64_t k = 0; k < K; k++) acc += ot_kld(adt, ap, ao + k * ask) * LDB(bp, bo + k * bsk);
      OT_KDISPATCH(bdt, MV_COL_LOOP)
#undef MV_COL_LOOP
      const int64_t co = bi * cs0 + n * csn;
      if (accumulate) acc += ot_kld(cdt, cp, co);
      ot_kst(cdt, cp, co, acc);
    }
}

/* ---- tiled GEMM ---------------------------------------------------------------
 * One team per 64x64 tile of C. Per K step of 16 the team loads an A and a B
 * tile into shared memory (as f32: conversion and q8b dequantisation happen
 * once per element here), then 256 "virtual threads" each update a 4x4
 * micro-tile of the C tile. The C tile also lives in shared memory, so the
 * code is correct for any team size (a host device may give 1 thread); each
 * micro-tile is loaded into registers once per K step (16 loads + 16 stores
 * against 256 FMAs). Tile loads pick their thread order from the operand's
 * unit-stride dim so global reads coalesce for both B and B^T. */
#define GT_M 64
#define GT_N 64
#define GT_K 16
#define GT_R 4                                  /* micro-tile edge */
#define GT_VT ((GT_M / GT_R) * (GT_N / GT_R))  /* virtual threads: 256 */

static void gemm_tiled(int dev, ot_kview c, ot_kview a, ot_kview b, mm_prob p, int accumulate) {
  const void *ap = a.p, *bp = b.p;
  void *cp = c.p;
  const int adt = a.dt, bdt = b.dt, cdt = c.dt;
  const int64_t M = p.M, N = p.N, K = p.K;
  const int64_t as0 = p.as[0], asm_ = p.as[1], ask = p.as[2];
  const int64_t bs0 = p.bs[0], bsk = p.bs[1], bsn = p.bs[2];
  const int64_t cs0 = p.cs[0], csm = p.cs[1], csn = p.cs[2];
  const int a_kfast = ask == 1, b_kfast = bsk == 1 && bsn != 1;
  const int64_t tiles_m = (M + GT_M - 1) / GT_M, tiles_n = (N + GT_N - 1) / GT_N;
  const int64_t per_batch = tiles_m * tiles_n, ntiles = p.batch * per_batch;
  OT_TEAMS(dev, ot_kteams(dev, ntiles), OT_DEVPTR(ap, bp, cp))
  for (int64_t tile = 0; tile < ntiles; tile++) {
    float tA[GT_K][GT_M], tB[GT_K][GT_N], tC[GT_M][GT_N];
    OT_TEAM_SHARED(tA, tB, tC)
    const int64_t bi = tile / per_batch, r = tile % per_batch;
    const int64_t m0 = (r / tiles_n) * GT_M, n0 = (r % tiles_n) * GT_N;
    const int64_t ao = bi * as0, bo = bi * bs0, co = bi * cs0;
    OT_TEAM_PARALLEL
    {
      const int tid = OT_THREAD_ID(), nt = OT_NUM_THREADS();
      for (int i = tid; i < GT_M * GT_N; i += nt) tC[i / GT_N][i % GT_N] = 0.0f;
      for (int64_t k0 = 0; k0 < K; k0 += GT_K) {
        for (int i = tid; i < GT_M * GT_K; i += nt) {
          const int m = a_kfast ? i / GT_K : i % GT_M, kk = a_kfast ? i % GT_K : i / GT_M;
          const int64_t gm = m0 + m, gk = k0 + kk;
          tA[kk][m] = (gm < M && gk < K) ? ot_kld(adt, ap, ao + gm * asm_ + gk * ask) : 0.0f;
        }
        for (int i = tid; i < GT_N * GT_K; i += nt) {
          const int n = b_kfast ? i / GT_K : i % GT_N, kk = b_kfast ? i % GT_K : i / GT_N;
          const int64_t gn = n0 + n, gk = k0 + kk;
          tB[kk][n] = (gn < N && gk < K) ? ot_kld(bdt, bp, bo + gk * bsk + gn * bsn) : 0.0f;
        }
        OT_TEAM_BARRIER
        for (int v = tid; v < GT_VT; v += nt) {
          const int rm = (v / (GT_N / GT_R)) * GT_R, rn = (v % (GT_N / GT_R)) * GT_R;
          float acc[GT_R][GT_R];
          for (int i = 0; i < GT_R; i++)
            for (int j = 0; j < GT_R; j++) acc[i][j] = tC[rm + i][rn + j];
          for (int kk = 0; kk < GT_K; kk++) {
            float av[GT_R], bv[GT_R];
            for (int i = 0; i < GT_R; i++) av[i] = tA[kk][rm + i];
            for (int j = 0; j < GT_R; j++) bv[j] = tB[kk][rn + j];
            for (int i = 0; i < GT_R; i++)
              for (int j = 0; j < GT_R; j++) acc[i][j] += av[i] * bv[j];
          }
          for (int i = 0; i < GT_R; i++)
            for (int j = 0; j < GT_R; j++) tC[rm + i][rn + j] = acc[i][j];
        }
        OT_TEAM_BARRIER
      }
      for (int i = tid; i < GT_M * GT_N; i += nt) {
        const int64_t gm = m0 + i / GT_N, gn = n0 + i % GT_N;
        if (gm < M && gn < N) {
          const int64_t o = co + gm * csm + gn * csn;
          float v = tC[i / GT_N][i % GT_N];
          if (accumulate) v += ot_kld(cdt, cp, o);
          ot_kst(cdt, cp, o, v);
        }
      }
    }
  }
}

/* ---- host threads ---------------------------------------------------------------
 * A device that runs on host threads gets one team (ot_kteams), so the team-
 * per-output kernels above would leave all but one core idle and pay a
 * parallel region per output element. There, threads split the columns of C
 * instead: each reads its column of B once (a row of W for trans_b, contiguous
 * along K) and reuses it from cache for every row of A. */
static void mm_host(int dev, ot_kview c, ot_kview a, ot_kview b, mm_prob p, int accumulate) {
  const void *ap = a.p, *bp = b.p;
  void *cp = c.p;
  const int adt = a.dt, bdt = b.dt, cdt = c.dt;
  const int64_t batch = p.batch, M = p.M, N = p.N, K = p.K;
  const int64_t as0 = p.as[0], asm_ = p.as[1], ask = p.as[2], bs0 = p.bs[0], bsk = p.bs[1], bsn = p.bs[2];
  const int64_t cs0 = p.cs[0], csm = p.cs[1], csn = p.cs[2];
  OT_PARFOR2(dev, OT_DEVPTR(ap, bp, cp))
  for (int64_t bi = 0; bi < batch; bi++)
    for (int64_t n = 0; n < N; n++)
      for (int64_t m = 0; m < M; m++) {
        const int64_t ao = bi * as0 + m * asm_, bo = bi * bs0 + n * bsn;
        float acc = 0.0f;
#define MM_HOST_LOOP(LDB) \
        for (int64_t k = 0; k < K; k++) acc += ot_kld(adt, ap, ao + k * ask) * LDB(bp, bo + k * bsk);
        OT_KDISPATCH(bdt, MM_HOST_LOOP)
#undef MM_HOST_LOOP
        const int64_t co = bi * cs0 + m * csm + n * csn;
        if (accumulate) acc += ot_kld(cdt, cp, co);
        ot_kst(cdt, cp, co, acc);
      }
}

ot_status ot_k_matmul(int dev, ot_kview c, ot_kview a, ot_kview b, int trans_b, int accumulate) {
  mm_prob p;
  OT_TRY(mm_check(c, a, b, trans_b, &p));
  if (p.batch == 0 || p.M == 0 || p.N == 0) return OT_OK;
  if (trans_b) b = ot_kview_t(b);
  /* The decode case on a GPU: a few f32 rows against a row-major weight. */
  if (ot_kfast_gpu(dev) && p.batch == 1 && a.dt == OT_F32 && c.dt == OT_F32 && p.as[2] == 1 && p.cs[2] == 1 &&
      p.bs[1] == 1 && ot_kgemv_gpu_ok(b.p, b.dt, p.K, p.bs[2], p.M)) {
    ot_kgemv_gpu(dev, c.p, p.cs[1], a.p, p.as[1], b.p, b.dt, p.bs[2], p.M, p.N, p.K, accumulate);
    return OT_OK;
  }
  /* The same on host threads (the host device of hybrid compute, the
   * host-offload plugin, plain host builds): vectorized, memory speed. */
  if (ot_kruns_on_host(dev) && p.batch == 1 && a.dt == OT_F32 && c.dt == OT_F32 && p.as[2] == 1 && p.cs[2] == 1 &&
      p.bs[1] == 1 && ot_kgemv_host_ok(b.dt, p.K, p.bs[2], p.M)) {
    ot_kgemv_host(c.p, p.cs[1], a.p, p.as[1], b.p, b.dt, p.bs[2], p.M, p.N, p.K, accumulate);
    return OT_OK;
  }
  /* The vendor GEMM (cuBLAS) where selected and expressible. */
  int done;
  OT_TRY(ot_kblas_gemm(dev, c, a, b, p.batch, p.M, p.N, p.K, p.as, p.bs, p.cs, accumulate, &done));
  if (done) return OT_OK;
  if (ot_kruns_on_host(dev)) mm_host(dev, c, a, b, p, accumulate);
  else if (p.M == 1 && p.bs[1] == 1) mv_rows(dev, c, a, b, p, accumulate);
  else if (p.M == 1) mv_cols(dev, c, a, b, p, accumulate);
  else gemm_tiled(dev, c, a, b, p, accumulate);
  return OT_OK;
}
