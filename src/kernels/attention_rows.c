/* attention_rows.c — RoPE, KV append and causal GQA attention for a step
 * whose rows are tokens of several sequences (batched generation, issue 19).
 *
 * Each row carries its own KV cache slot and position, read on the device
 * from an i32 [T, 2] view (slot, position) that the step's program takes as
 * an input: the rows of a decode step are one token per sequence, those of
 * a packed prompt step every prompt token of the sequences that start, with
 * no padding between them. A row attends only to its own slot's positions,
 * so the cache layout [slots, max_seq, KV, hd] keeps sequences apart with no
 * mask tensor. Per row the arithmetic (loop order, tiles, expressions) is
 * that of ot_k_rope_append and the portable ot_k_attention_window, so a row
 * of a batch gives bitwise what the one-sequence kernels give for it where
 * those take their portable loops (every device but an NVIDIA GPU, whose
 * one-sequence decode takes the warp kernel, warp_gpu.c).
 *
 * Padding rows (a slot outside [0, slots) or a position outside
 * [0, max_seq); a generation marks idle slots' rows with slot -1) change
 * nothing and give zero output, so a step of B rows can run with fewer
 * live sequences.
 *
 * On an NVIDIA GPU the attention takes the warp kernel of one sequence
 * (warp_gpu.c, ot_kattn_rows_gpu): a row gives what that kernel gives for
 * it alone. Known limits: one block per (row, head), no split over a long
 * cache. RoPE and the append take a thread per (row, head, pair) there,
 * in the portable loop's arithmetic (ra_pair).
 *
 * The one-sequence RoPE + append (ot_k_rope_append: rows [pos, pos + T) of
 * caches [max_seq, KV, hd]) is here too, at the end: both forms run one
 * loop body, ra_rotate. */
#include "kernels/attention_tile.h"
#include "kernels/kcommon.h"
#include "kernels/rope_rows.h"
#include "kernels/warp_gpu.h"
#include "ot_gpu.h"

static ot_status rows_check(const char *op, ot_kview rows, int64_t T) {
  OT_TRY(ot_kcheck(op, "rows", rows, 2, 2, OT_KM(OT_I32)));
  if (rows.ne[0] != T || rows.ne[1] != 2)
    return ot_fail(OT_ERR_SHAPE, "%s: rows %s must be i32 [%lld, 2] (slot, position per row)", op, ot_kshape_str(rows),
                   (long long)T);
  return OT_OK;
}

static ot_status cache_check(const char *op, ot_kview kc, ot_kview vc) {
  OT_TRY(ot_kcheck(op, "k cache", kc, 4, 4, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "v cache", vc, 4, 4, OT_KM_FLOAT));
  for (int d = 0; d < 4; d++) OT_TRY(ot_kcheck_dim(op, "k cache", kc, d, "v cache", vc, d));
  return OT_OK;
}

static ot_status ra_rows_check(ot_kview q, ot_kview k, ot_kview v, ot_kview kc, ot_kview vc, ot_kview rows, ot_rope r) {
  static const char *op = "rope_append_rows";
  OT_TRY(ot_kcheck(op, "q", q, 3, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "k", k, 3, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "v", v, 3, 3, OT_KM_FLOAT));
  OT_TRY(cache_check(op, kc, vc));
  OT_TRY(rows_check(op, rows, q.ne[0]));
  if (q.ne[0] != k.ne[0] || q.ne[2] != k.ne[2] || q.ne[2] % 2 || k.ne[0] != v.ne[0] || k.ne[1] != v.ne[1] ||
      k.ne[2] != v.ne[2] || kc.ne[2] != k.ne[1] || kc.ne[3] != k.ne[2])
    return ot_fail(OT_ERR_SHAPE, "rope_append_rows: q %s, k %s, v %s, caches %s disagree (need [T, H, hd], "
                   "[T, KV, hd] with an even hd and caches [slots, max_seq, KV, hd])",
                   ot_kshape_str(q), ot_kshape_str(k), ot_kshape_str(v), ot_kshape_str(kc));
  if (r.type == OT_ROPE_DYNAMIC)
    return ot_fail(OT_ERR_UNSUPPORTED, "rope_append_rows: dynamic RoPE changes its frequencies with each sequence's "
                   "length; a batch of sequences is not implemented for it (generate one sequence at a time)");
  return OT_OK;
}

ra_args ot_kra_args(ot_kview q, ot_kview k, ot_kview v, ot_kview kc, ot_kview vc, ot_kview rows, ot_rope r) {
  return (ra_args){q.p,      k.p,      kc.p,     vc.p,     v.p,      rows.p,   q.dt,     k.dt,     v.dt,
                   kc.dt,    vc.dt,    q.ne[1],  kc.ne[0], kc.ne[1], q.ne[2],  q.ne[2] / 2, q.nb[0], q.nb[1],
                   q.nb[2],  k.nb[0],  k.nb[1],  k.nb[2],  v.nb[0],  v.nb[1],  v.nb[2],  rows.nb[0], rows.nb[1],
                   kc.nb[0], kc.nb[1], kc.nb[2], kc.nb[3], vc.nb[0], vc.nb[1], vc.nb[2], vc.nb[3], r};
}

/* Threads a block of the GPU kernel below. */
#define RA_T 128

ot_status ot_k_rope_append_rows(int dev, ot_kview q, ot_kview k, ot_kview v, ot_kview kc, ot_kview vc, ot_kview rows,
                                ot_rope r) {
  OT_TRY(ra_rows_check(q, k, v, kc, vc, rows, r));
  const int64_t T = q.ne[0], H = q.ne[1], KV = k.ne[1], d = q.ne[2], half = d / 2, HK = H + KV;
  if (T == 0 || d == 0 || HK == 0) return OT_OK;
  const ra_args a = ot_kra_args(q, k, v, kc, vc, rows, r);
  /* An NVIDIA GPU: a thread per (row, head, pair) in a bare kernel. The
   * portable loop below took 84 us a layer for batch 32 of a 7B-shaped
   * model on the H100 (bench/RESULTS.md), most of a decode step's non-GEMM
   * time; the arithmetic is the same function. */
  const int64_t per_row = HK * half, nb = (per_row + RA_T - 1) / RA_T;
  if (ot_kfast_gpu(dev) && T * nb <= INT32_MAX) {
    const int grid = (int)(T * nb);
    OT_GPU_KERNEL(dev, grid, RA_T, firstprivate(a, nb, per_row))
    {
      const int64_t b = OT_GPU_BLOCK_ID(), s = b / nb, t = (b % nb) * RA_T + OT_GPU_THREAD_ID();
      if (t < per_row) ra_pair(&a, s, t / a.half, t % a.half);
    }
    return OT_OK;
  }
  OT_PARFOR3(dev, firstprivate(a))
  for (int64_t s = 0; s < T; s++)
    for (int64_t h = 0; h < HK; h++)
      for (int64_t i = 0; i < half; i++) ra_pair(&a, s, h, i);
  return OT_OK;
}

/* A view of row t of x [T, ...] (host addresses: the references). */
static ot_kview row_view(ot_kview x, int64_t t) {
  x.p = (char *)x.p + ot_dtype_bytes(x.dt, t * x.nb[0]);
  x.ne[0] = 1;
  return x;
}

/* Slot s of a cache [slots, max_seq, KV, hd] as [max_seq, KV, hd]. */
static ot_kview slot_view(ot_kview c, int64_t s) {
  ot_kview v = c;
  v.p = (char *)c.p + ot_dtype_bytes(c.dt, s * c.nb[0]);
  v.ndim = 3;
  for (int d = 0; d < 3; d++) v.ne[d] = c.ne[d + 1], v.nb[d] = c.nb[d + 1];
  v.ne[3] = 1;
  v.nb[3] = 1;
  return v;
}

static void ref_row(ot_kview rows, int64_t t, int64_t slots, int64_t max_seq, int64_t *slot, int64_t *pos) {
  const int32_t *rp = rows.p;
  const int64_t s = rp[t * rows.nb[0]], p = rp[t * rows.nb[0] + rows.nb[1]];
  const int ok = s >= 0 && s < slots && p >= 0 && p < max_seq;
  *slot = ok ? s : -1;
  *pos = ok ? p : -1;
}

ot_status ot_ref_rope_append_rows(ot_kview q, ot_kview k, ot_kview v, ot_kview kc, ot_kview vc, ot_kview rows,
                                  ot_rope r) {
  OT_TRY(ra_rows_check(q, k, v, kc, vc, rows, r));
  for (int64_t t = 0; t < q.ne[0]; t++) {
    int64_t slot, pos;
    ref_row(rows, t, kc.ne[0], kc.ne[1], &slot, &pos);
    if (slot < 0) continue;
    const ot_kview kt = row_view(k, t);
    OT_TRY(ot_ref_rope(row_view(q, t), pos, r));
    OT_TRY(ot_ref_rope(kt, pos, r));
    OT_TRY(ot_ref_kv_append(slot_view(kc, slot), kt, pos));
    OT_TRY(ot_ref_kv_append(slot_view(vc, slot), row_view(v, t), pos));
  }
  return OT_OK;
}

static ot_status at_rows_check(ot_kview out, ot_kview q, ot_kview kc, ot_kview vc, ot_kview rows, int64_t window) {
  static const char *op = "attention_rows";
  OT_TRY(ot_kcheck(op, "q", q, 3, 3, OT_KM_FLOAT));
  OT_TRY(ot_kcheck(op, "out", out, 3, 3, OT_KM_FLOAT));
  OT_TRY(cache_check(op, kc, vc));
  OT_TRY(rows_check(op, rows, q.ne[0]));
  for (int d = 0; d < 3; d++) OT_TRY(ot_kcheck_dim(op, "out", out, d, "q", q, d));
  OT_TRY(ot_kcheck_dim(op, "q", q, 2, "k cache", kc, 3));
  if (kc.ne[2] == 0 || q.ne[1] % kc.ne[2])
    return ot_fail(OT_ERR_SHAPE, "attention_rows: n_heads %lld of q is not a multiple of n_kv_heads %lld of the cache",
                   (long long)q.ne[1], (long long)kc.ne[2]);
  if (q.ne[2] > AT_MAX_HEAD_DIM)
    return ot_fail(OT_ERR_UNSUPPORTED, "attention_rows: head_dim %lld > %d is not supported", (long long)q.ne[2],
                   AT_MAX_HEAD_DIM);
  if (window < 0) return ot_fail(OT_ERR_INVALID_ARG, "attention_rows: sliding window %lld is negative", (long long)window);
  return OT_OK;
}

int ot_kattn_rows_gpu_ok(ot_kview out, ot_kview q, ot_kview kc, ot_kview vc) {
  const int64_t D = q.ne[2];
  return q.dt == OT_F32 && vc.dt == kc.dt && q.nb[2] == 1 && out.nb[2] == 1 && kc.nb[3] == 1 && vc.nb[3] == 1 &&
         (out.dt == OT_F32 || out.dt == OT_BF16 || out.dt == OT_F16) &&
         ot_kattn_gpu_ok(kc.dt, kc.p, kc.nb[1], kc.nb[2], D) && ot_kattn_gpu_ok(vc.dt, vc.p, vc.nb[1], vc.nb[2], D) &&
         ot_kattn_gpu_ok(kc.dt, kc.p, kc.nb[0], kc.nb[0], D) && ot_kattn_gpu_ok(vc.dt, vc.p, vc.nb[0], vc.nb[0], D);
}

ot_status ot_k_attention_rows(int dev, ot_kview out, ot_kview q, ot_kview kc, ot_kview vc, ot_kview rows,
                              int64_t window) {
  OT_TRY(at_rows_check(out, q, kc, vc, rows, window));
  const int64_t S = q.ne[0], H = q.ne[1], D = q.ne[2], group = H / kc.ne[2], nrows = S * H;
  const int64_t NS = kc.ne[0], P = kc.ne[1];
  if (nrows == 0 || D == 0) return OT_OK;
  const void *qp = q.p, *kp = kc.p, *vp = vc.p, *rp = rows.p;
  void *op = out.p;
  const int qdt = q.dt, kdt = kc.dt, vdt = vc.dt, odt = out.dt;
  const int64_t q0 = q.nb[0], q1 = q.nb[1], q2 = q.nb[2], o0 = out.nb[0], o1 = out.nb[1], o2 = out.nb[2];
  const int64_t ks = kc.nb[0], k0 = kc.nb[1], k1 = kc.nb[2], k2 = kc.nb[3];
  const int64_t vs = vc.nb[0], v0 = vc.nb[1], v1 = vc.nb[2], v2 = vc.nb[3], r0 = rows.nb[0], r1 = rows.nb[1];
  /* an NVIDIA GPU: the warp kernel of one sequence's decode, each row on its
   * own slot and position (batch 32 of a 7B-shaped model on the H100: this
   * loop took 82 % of a step's kernel time). f32 queries, one cache dtype,
   * 16-byte aligned cache rows and slots. */
  if (ot_kfast_gpu(dev) && ot_kattn_rows_gpu_ok(out, q, kc, vc)) {
    ot_kattn_rows_gpu(dev, out.p, out.dt, out.nb[0], out.nb[1], q.p, q.nb[0], q.nb[1], kc.p, kc.nb[0], kc.nb[1],
                      kc.nb[2], vc.p, vc.nb[0], vc.nb[1], vc.nb[2], kc.dt, S, H, NS, P, kc.ne[2], D, rows.p, r0, r1,
                      window);
    return OT_OK;
  }
  const float scale = 1.0f / sqrtf((float)D);
  OT_TEAMS(dev, ot_kteams(dev, nrows), OT_DEVPTR(qp, kp, vp, op, rp))
  for (int64_t t = 0; t < nrows; t++) {
    float sc[AT_TILE], acc[AT_MAX_HEAD_DIM], qs[AT_MAX_HEAD_DIM], run[2]; /* run: max, sum */
    OT_TEAM_SHARED(sc, acc, qs, run)
    const int64_t s = t / H, h = t % H, kh = h / group;
    int64_t slot, pos;
    ar_row(rp, r0, r1, s, NS, P, &slot, &pos);
    /* padding: no keys (the loops below do nothing), output 0 */
    const int64_t nkeys = slot < 0 ? 0 : pos + 1;
    const int64_t first = window && nkeys > window ? nkeys - window : 0; /* the oldest key it sees */
    const int64_t qo = s * q0 + h * q1, kb = (slot < 0 ? 0 : slot) * ks + kh * k1,
                  vb = (slot < 0 ? 0 : slot) * vs + kh * v1;
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
      const float inv = nkeys ? 1.0f / run[1] : 0.0f;
      for (int64_t d = tid; d < D; d += nt) ot_kst(odt, op, s * o0 + h * o1 + d * o2, acc[d] * inv);
    }
  }
  return OT_OK;
}

ot_status ot_ref_attention_rows(ot_kview out, ot_kview q, ot_kview kc, ot_kview vc, ot_kview rows, int64_t window) {
  OT_TRY(at_rows_check(out, q, kc, vc, rows, window));
  for (int64_t t = 0; t < q.ne[0]; t++) {
    int64_t slot, pos;
    ref_row(rows, t, kc.ne[0], kc.ne[1], &slot, &pos);
    const ot_kview o = row_view(out, t);
    if (slot >= 0) {
      OT_TRY(ot_ref_attention_window(o, row_view(q, t), slot_view(kc, slot), slot_view(vc, slot), pos, window));
      continue;
    }
    for (int64_t h = 0; h < o.ne[1]; h++)
      for (int64_t d = 0; d < o.ne[2]; d++) ot_kst(o.dt, o.p, h * o.nb[1] + d * o.nb[2], 0.0f);
  }
  return OT_OK;
}

/* ---- one sequence: rows [pos, pos + T) of caches [max_seq, KV, hd] ---------------- */

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
  const int64_t T = q.ne[0], H = q.ne[1], KV = k.ne[1], d = q.ne[2], half = d / 2, HK = H + KV;
  r = ot_krope_resolve(r, pos + T, d);
  if (T == 0 || d == 0) return OT_OK;
  /* the batched form's arguments, with no slot dimension and no rows tensor */
  const ra_args a = {q.p,     k.p,      kc.p,     vc.p,     v.p,      NULL,     q.dt,     k.dt,    v.dt,
                     kc.dt,   vc.dt,    H,        1,        kc.ne[0], d,        half,     q.nb[0], q.nb[1],
                     q.nb[2], k.nb[0],  k.nb[1],  k.nb[2],  v.nb[0],  v.nb[1],  v.nb[2],  0,       0,
                     0,       kc.nb[0], kc.nb[1], kc.nb[2], 0,        vc.nb[0], vc.nb[1], vc.nb[2], r};
  OT_PARFOR3(dev, firstprivate(a, pos))
  for (int64_t s = 0; s < T; s++)
    for (int64_t h = 0; h < HK; h++)
      for (int64_t i = 0; i < half; i++) ra_rotate(&a, s, h, i, 0, pos + s);
  return OT_OK;
}

ot_status ot_ref_rope_append(ot_kview q, ot_kview k, ot_kview v, ot_kview kc, ot_kview vc, int64_t pos, ot_rope r) {
  OT_TRY(ra_check(q, k, v, kc, vc, pos));
  OT_TRY(ot_ref_rope(q, pos, r));
  OT_TRY(ot_ref_rope(k, pos, r));
  OT_TRY(ot_ref_kv_append(kc, k, pos));
  return ot_ref_kv_append(vc, v, pos);
}
