/* embed.c — embedding lookup and argmax.
 *
 * Embedding fast path (emb_fast): unit last strides, d % 8 == 0 and 16-byte
 * aligned rows, in the dtype pairs the models use (a f32/bf16/f16 table into
 * f32 rows; bf16 and f16 kept): copied 8 elements per step with 16-byte
 * accesses, specialized per pair; the values are those of the generic loop. */
#include "kernels/kcommon.h"

static ot_status emb_check(ot_kview out, ot_kview table, ot_kview ids) {
  OT_TRY(ot_kcheck("embedding", "out", out, 2, 2, OT_KM_FLOAT));
  OT_TRY(ot_kcheck("embedding", "table", table, 2, 2, OT_KM_FLOAT | OT_KM_BLOCK));
  OT_TRY(ot_kcheck("embedding", "ids", ids, 1, 1, OT_KM(OT_I32)));
  OT_TRY(ot_kcheck_dim("embedding", "out", out, 0, "ids", ids, 0));
  OT_TRY(ot_kcheck_dim("embedding", "out", out, 1, "table", table, 1));
  return OT_OK;
}

/* emb_fast_<T>_<O>: out [n, d] in O (row stride o0) = table [vocab, d] in T
 * (row stride t0) at ids (stride i0); a step is one octet of a row. */
#define EMB_FAST(T, O)                                                                                          \
  static void emb_fast_##T##_##O(int dev, void *op, const void *tp, const void *ip, int64_t n, int64_t d,       \
                                 int64_t vocab, int64_t o0, int64_t t0, int64_t i0) {                           \
    const int64_t nc = d / OT_KV;                                                                               \
    OT_PARFOR2(dev, OT_DEVPTR(op, tp, ip))                                                                      \
    for (int64_t r = 0; r < n; r++)                                                                             \
      for (int64_t c = 0; c < nc; c++) {                                                                        \
        const int64_t id = ((const int32_t *)ip)[r * i0];                                                       \
        float v[OT_KV];                                                                                         \
        if (id >= 0 && id < vocab) {                                                                            \
          ot_kld8_##T(tp, id * t0 + c * OT_KV, v);                                                              \
        } else {                                                                                                \
          OT_UNROLL                                                                                             \
          for (int k = 0; k < OT_KV; k++) v[k] = 0.0f;                                                          \
        }                                                                                                       \
        ot_kst8_##O(op, r * o0 + c * OT_KV, v);                                                                 \
      }                                                                                                         \
  }
EMB_FAST(f32, f32)
EMB_FAST(bf16, f32)
EMB_FAST(f16, f32)
EMB_FAST(bf16, bf16)
EMB_FAST(f16, f16)
#undef EMB_FAST

typedef void (*emb_fast_fn)(int dev, void *op, const void *tp, const void *ip, int64_t n, int64_t d, int64_t vocab,
                            int64_t o0, int64_t t0, int64_t i0);

/* Runs the fast path if the views qualify; returns whether it did. */
static int emb_fast(int dev, ot_kview out, ot_kview table, ot_kview ids) {
  emb_fast_fn f = NULL;
  if (out.dt == OT_F32)
    f = table.dt == OT_F32 ? emb_fast_f32_f32 : table.dt == OT_BF16 ? emb_fast_bf16_f32 : table.dt == OT_F16 ? emb_fast_f16_f32 : NULL;
  else if (out.dt == table.dt)
    f = out.dt == OT_BF16 ? emb_fast_bf16_bf16 : emb_fast_f16_f16;
  const int64_t oe = ot_kfloat_bytes(out.dt), te = ot_kfloat_bytes(table.dt);
  if (!f || out.nb[1] != 1 || table.nb[1] != 1 || out.ne[1] % OT_KV != 0 || !ot_kalign16(out.p, 0, oe) ||
      !ot_kalign16(table.p, 0, te) || !ot_kstrides16(1, out.ne, out.nb, oe) || !ot_kstrides16(1, table.ne, table.nb, te))
    return 0;
  f(dev, out.p, table.p, ids.p, out.ne[0], out.ne[1], table.ne[0], out.nb[0], table.nb[0], ids.nb[0]);
  return 1;
}

ot_status ot_k_embedding(int dev, ot_kview out, ot_kview table, ot_kview ids) {
  OT_TRY(emb_check(out, table, ids));
  const int64_t n = out.ne[0], d = out.ne[1], vocab = table.ne[0];
  if (n == 0 || d == 0) return OT_OK;
  if (emb_fast(dev, out, table, ids)) return OT_OK;
  void *op = out.p;
  const void *tp = table.p, *ip = ids.p;
  const int odt = out.dt, tdt = table.dt;
  const int64_t o0 = out.nb[0], o1 = out.nb[1], t0 = table.nb[0], t1 = table.nb[1], i0 = ids.nb[0];
  OT_PARFOR2(dev, OT_DEVPTR(op, tp, ip))
  for (int64_t r = 0; r < n; r++)
    for (int64_t c = 0; c < d; c++) {
      const int64_t id = ((const int32_t *)ip)[r * i0];
      /* an id outside the vocabulary gives a zero row rather than a wild read */
      const float v = (id >= 0 && id < vocab) ? ot_kld(tdt, tp, id * t0 + c * t1) : 0.0f;
      ot_kst(odt, op, r * o0 + c * o1, v);
    }
  return OT_OK;
}

ot_status ot_ref_embedding(ot_kview out, ot_kview table, ot_kview ids) {
  OT_TRY(emb_check(out, table, ids));
  for (int64_t r = 0; r < out.ne[0]; r++) {
    const int64_t id = ((const int32_t *)ids.p)[r * ids.nb[0]];
    for (int64_t c = 0; c < out.ne[1]; c++)
      ot_kst(out.dt, out.p, r * out.nb[0] + c * out.nb[1],
             (id >= 0 && id < table.ne[0]) ? ot_kld(table.dt, table.p, id * table.nb[0] + c * table.nb[1]) : 0.0f);
  }
  return OT_OK;
}

static ot_status am_check(ot_kview idx, ot_kview x) {
  OT_TRY(ot_kcheck("argmax", "x", x, 1, 2, OT_KM_FLOAT));
  OT_TRY(ot_kcheck("argmax", "idx", idx, 1, 1, OT_KM(OT_I32)));
  int64_t rows = x.ndim == 2 ? x.ne[0] : 1;
  if (idx.ne[0] != rows)
    return ot_fail(OT_ERR_SHAPE, "argmax: idx %s needs one entry per row of x %s", ot_kshape_str(idx), ot_kshape_str(x));
  if (x.ne[x.ndim - 1] == 0) return ot_fail(OT_ERR_SHAPE, "argmax: x %s has empty rows", ot_kshape_str(x));
  return OT_OK;
}

/* Largest value, ties to the lowest index (like torch.argmax); NaN never wins. */
ot_status ot_k_argmax(int dev, ot_kview idx, ot_kview x) {
  OT_TRY(am_check(idx, x));
  const int64_t rows = idx.ne[0], n = x.ne[x.ndim - 1];
  const int64_t xs0 = x.ndim == 2 ? x.nb[0] : 0, xs1 = x.nb[x.ndim - 1], is0 = idx.nb[0];
  const void *xp = x.p;
  void *ip = idx.p;
  const int xdt = x.dt;
  OT_TEAMS(dev, ot_kteams(dev, rows), OT_DEVPTR(xp, ip))
  for (int64_t r = 0; r < rows; r++) {
    float mx = -INFINITY;
    int64_t best = n;
    OT_TEAM_REDUCE(max : mx)
    for (int64_t c = 0; c < n; c++) mx = fmaxf(mx, ot_kld(xdt, xp, r * xs0 + c * xs1));
    OT_TEAM_REDUCE(min : best)
    for (int64_t c = 0; c < n; c++)
      if (ot_kld(xdt, xp, r * xs0 + c * xs1) == mx && c < best) best = c;
    ((int32_t *)ip)[r * is0] = (int32_t)(best < n ? best : 0);
  }
  return OT_OK;
}

ot_status ot_ref_argmax(ot_kview idx, ot_kview x) {
  OT_TRY(am_check(idx, x));
  const int64_t n = x.ne[x.ndim - 1], xs0 = x.ndim == 2 ? x.nb[0] : 0, xs1 = x.nb[x.ndim - 1];
  for (int64_t r = 0; r < idx.ne[0]; r++) {
    int64_t best = 0;
    float mx = -INFINITY;
    for (int64_t c = 0; c < n; c++) {
      float v = ot_kld(x.dt, x.p, r * xs0 + c * xs1);
      if (v > mx) { mx = v; best = c; }
    }
    ((int32_t *)idx.p)[r * idx.nb[0]] = (int32_t)best;
  }
  return OT_OK;
}
