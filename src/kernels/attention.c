/* attention.c — KV-cache append and causal multi-head attention with GQA,
 * tiled with an online softmax (flash-attention style: scores never go to
 * memory, any sequence length).
 *
 * One team per (query row, head). Keys come in tiles of AT_TILE: the team's
 * threads score the tile's keys into shared memory, every thread derives the
 * tile max and the new running max redundantly (no extra barrier), the
 * scores become weights, and the output accumulator (shared, [head_dim]) is
 * rescaled and updated with threads striding over head_dim, so V rows are
 * read coalesced.
 * Known limits, for the benchmark phase: K rows are read one thread per key
 * (not coalesced); each query row re-reads its K/V (no query tiling; heads of
 * one GQA group are separate teams); decode (seq 1) has only n_heads teams —
 * a split-K (flash-decoding) variant would fill the GPU. */
#include "kernels/attention_tile.h"
#include "kernels/kcommon.h"
#include "kernels/warp_gpu.h"
#include "ot_gpu.h"

static ot_status kv_check(ot_kview cache, ot_kview x, int64_t pos) {
  OT_TRY(ot_kcheck("kv_append", "cache", cache, 3, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck("kv_append", "x", x, 3, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck_dim("kv_append", "cache", cache, 1, "x", x, 1));
  OT_TRY(ot_kcheck_dim("kv_append", "cache", cache, 2, "x", x, 2));
  if (pos < 0 || pos + x.ne[0] > cache.ne[0])
    return ot_fail(OT_ERR_SHAPE, "kv_append: rows [%lld, %lld) do not fit the cache %s (max_seq %lld)",
                   (long long)pos, (long long)(pos + x.ne[0]), ot_kshape_str(cache), (long long)cache.ne[0]);
  return OT_OK;
}

ot_status ot_k_kv_append(int dev, ot_kview cache, ot_kview x, int64_t pos) {
  OT_TRY(kv_check(cache, x, pos));
  const int64_t S = x.ne[0], H = x.ne[1], D = x.ne[2];
  if (S == 0 || H == 0 || D == 0) return OT_OK;
  void *cp = cache.p;
  const void *xp = x.p;
  const int cdt = cache.dt, xdt = x.dt;
  const int64_t c0 = cache.nb[0], c1 = cache.nb[1], c2 = cache.nb[2], x0 = x.nb[0], x1 = x.nb[1], x2 = x.nb[2];
  OT_PARFOR3(dev, OT_DEVPTR(cp, xp))
  for (int64_t s = 0; s < S; s++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t d = 0; d < D; d++)
        ot_kst(cdt, cp, (pos + s) * c0 + h * c1 + d * c2, ot_kld(xdt, xp, s * x0 + h * x1 + d * x2));
  return OT_OK;
}

ot_status ot_ref_kv_append(ot_kview cache, ot_kview x, int64_t pos) {
  OT_TRY(kv_check(cache, x, pos));
  for (int64_t s = 0; s < x.ne[0]; s++)
    for (int64_t h = 0; h < x.ne[1]; h++)
      for (int64_t d = 0; d < x.ne[2]; d++)
        ot_kst(cache.dt, cache.p, (pos + s) * cache.nb[0] + h * cache.nb[1] + d * cache.nb[2],
               ot_kld(x.dt, x.p, s * x.nb[0] + h * x.nb[1] + d * x.nb[2]));
  return OT_OK;
}

static ot_status at_check(ot_kview out, ot_kview q, ot_kview k, ot_kview v, int64_t pos) {
  static const char *op = "attention";
  OT_TRY(ot_kcheck(op, "q", q, 3, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "out", out, 3, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "k cache", k, 3, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "v cache", v, 3, 3, OT_KM_FLOAT));
  for (int d = 0; d < 3; d++) {
    OT_TRY(ot_kcheck_dim(op, "out", out, d, "q", q, d));
    OT_TRY(ot_kcheck_dim(op, "k cache", k, d, "v cache", v, d));
  }
  OT_TRY(ot_kcheck_dim(op, "q", q, 2, "k cache", k, 2));
  if (k.ne[1] == 0 || q.ne[1] % k.ne[1])
    return ot_fail(OT_ERR_SHAPE, "attention: n_heads %lld of q is not a multiple of n_kv_heads %lld of the cache",
                   (long long)q.ne[1], (long long)k.ne[1]);
  if (q.ne[2] > AT_MAX_HEAD_DIM)
    return ot_fail(OT_ERR_UNSUPPORTED, "attention: head_dim %lld > %d is not supported", (long long)q.ne[2],
                   AT_MAX_HEAD_DIM);
  if (pos < 0 || pos + q.ne[0] > k.ne[0])
    return ot_fail(OT_ERR_SHAPE, "attention: queries at positions [%lld, %lld) exceed the cache of %lld rows",
                   (long long)pos, (long long)(pos + q.ne[0]), (long long)k.ne[0]);
  return OT_OK;
}

ot_status ot_k_attention(int dev, ot_kview out, ot_kview q, ot_kview k, ot_kview v, int64_t pos) {
  return ot_k_attention_window(dev, out, q, k, v, pos, 0);
}

ot_status ot_k_attention_window(int dev, ot_kview out, ot_kview q, ot_kview k, ot_kview v, int64_t pos,
                                int64_t window) {
  OT_TRY(at_check(out, q, k, v, pos));
  if (window < 0) return ot_fail(OT_ERR_INVALID_ARG, "attention: sliding window %lld is negative", (long long)window);
  /* a window no row reaches past is no window */
  if (window >= pos + q.ne[0]) window = 0;
  const int64_t S = q.ne[0], H = q.ne[1], D = q.ne[2], group = H / k.ne[1], nrows = S * H;
  if (nrows == 0 || D == 0) return OT_OK;
  const void *qp = q.p, *kp = k.p, *vp = v.p;
  void *op = out.p;
  const int qdt = q.dt, kdt = k.dt, vdt = v.dt, odt = out.dt;
  const int64_t q0 = q.nb[0], q1 = q.nb[1], q2 = q.nb[2], o0 = out.nb[0], o1 = out.nb[1], o2 = out.nb[2];
  const int64_t k0 = k.nb[0], k1 = k.nb[1], k2 = k.nb[2], v0 = v.nb[0], v1 = v.nb[1], v2 = v.nb[2];
  /* the warp kernel: f32 queries and outputs, f32 / bf16 / f16 caches (one dtype), windows */
  if (ot_kfast_gpu(dev) && q.dt == OT_F32 && out.dt == OT_F32 && v.dt == k.dt && q.nb[2] == 1 && k.nb[2] == 1 &&
      v.nb[2] == 1 && out.nb[2] == 1 && ot_kattn_gpu_ok(k.dt, k.p, k.nb[0], k.nb[1], D)) {
    ot_kattn_gpu(dev, out.p, out.nb[0], out.nb[1], q.p, q.nb[0], q.nb[1], k.p, k.nb[0], k.nb[1], v.p, v.nb[0], v.nb[1],
                 k.dt, S, H, k.ne[1], D, pos, window);
    return OT_OK;
  }
  const float scale = 1.0f / sqrtf((float)D);
  OT_TEAMS(dev, ot_kteams(dev, nrows), OT_DEVPTR(qp, kp, vp, op))
  for (int64_t t = 0; t < nrows; t++) {
    float sc[AT_TILE], acc[AT_MAX_HEAD_DIM], qs[AT_MAX_HEAD_DIM], run[2]; /* run: max, sum */
    OT_TEAM_SHARED(sc, acc, qs, run)
    const int64_t s = t / H, h = t % H, kh = h / group, nkeys = pos + s + 1;
    const int64_t first = window && nkeys > window ? nkeys - window : 0; /* the oldest key it sees */
    const int64_t qo = s * q0 + h * q1, kb = kh * k1, vb = kh * v1;
    OT_TEAM_PARALLEL
    {
      const int tid = OT_THREAD_ID(), nt = OT_NUM_THREADS();
      for (int64_t d = tid; d < D; d += nt) {
        acc[d] = 0.0f;
        qs[d] = ot_kld(qdt, qp, qo + d * q2) * scale;
      }
      if (tid == 0) {
        run[0] = -INFINITY;
        run[1] = 0.0f;
      }
      OT_TEAM_BARRIER
      for (int64_t j0 = first; j0 < nkeys; j0 += AT_TILE) {
        const int n = (int)(nkeys - j0 < AT_TILE ? nkeys - j0 : AT_TILE);
        for (int j = tid; j < n; j += nt) {
          float dot = 0.0f;
          for (int64_t d = 0; d < D; d++) dot += qs[d] * ot_kld(kdt, kp, (j0 + j) * k0 + kb + d * k2);
          sc[j] = dot;
        }
        OT_TEAM_BARRIER
        float mt = run[0];
        for (int j = 0; j < n; j++) mt = fmaxf(mt, sc[j]);
        const float alpha = expf(run[0] - mt); /* 0 on the first tile (exp(-inf)) */
        OT_TEAM_BARRIER /* everyone has read sc and run[0] */
        for (int j = tid; j < n; j += nt) sc[j] = expf(sc[j] - mt);
        OT_TEAM_BARRIER
        for (int64_t d = tid; d < D; d += nt) {
          float a = acc[d] * alpha;
          for (int j = 0; j < n; j++) a += sc[j] * ot_kld(vdt, vp, (j0 + j) * v0 + vb + d * v2);
          acc[d] = a;
        }
        if (tid == 0) {
          float l = run[1] * alpha;
          for (int j = 0; j < n; j++) l += sc[j];
          run[1] = l;
          run[0] = mt;
        }
        OT_TEAM_BARRIER
      }
      const float inv = 1.0f / run[1];
      for (int64_t d = tid; d < D; d += nt) ot_kst(odt, op, s * o0 + h * o1 + d * o2, acc[d] * inv);
    }
  }
  return OT_OK;
}

ot_status ot_ref_attention(ot_kview out, ot_kview q, ot_kview k, ot_kview v, int64_t pos) {
  return ot_ref_attention_window(out, q, k, v, pos, 0);
}

ot_status ot_ref_attention_window(ot_kview out, ot_kview q, ot_kview k, ot_kview v, int64_t pos, int64_t window) {
  OT_TRY(at_check(out, q, k, v, pos));
  if (window < 0) return ot_fail(OT_ERR_INVALID_ARG, "attention: sliding window %lld is negative", (long long)window);
  const int64_t S = q.ne[0], H = q.ne[1], D = q.ne[2], group = H / k.ne[1];
  const double scale = 1.0 / sqrt((double)D);
  for (int64_t s = 0; s < S; s++)
    for (int64_t h = 0; h < H; h++) {
      const int64_t kh = h / group, nkeys = pos + s + 1;
      double mx = -INFINITY, sum = 0.0, o[AT_MAX_HEAD_DIM] = {0};
      for (int pass = 0; pass < 2; pass++)
        for (int64_t j = window && nkeys > window ? nkeys - window : 0; j < nkeys; j++) {
          double dot = 0.0;
          for (int64_t d = 0; d < D; d++)
            dot += (double)ot_kld(q.dt, q.p, s * q.nb[0] + h * q.nb[1] + d * q.nb[2]) *
                   ot_kld(k.dt, k.p, j * k.nb[0] + kh * k.nb[1] + d * k.nb[2]);
          dot *= scale;
          if (pass == 0) { mx = fmax(mx, dot); continue; }
          const double w = exp(dot - mx);
          sum += w;
          for (int64_t d = 0; d < D; d++) o[d] += w * ot_kld(v.dt, v.p, j * v.nb[0] + kh * v.nb[1] + d * v.nb[2]);
        }
      for (int64_t d = 0; d < D; d++)
        ot_kst(out.dt, out.p, s * out.nb[0] + h * out.nb[1] + d * out.nb[2], (float)(o[d] / sum));
    }
  return OT_OK;
}
