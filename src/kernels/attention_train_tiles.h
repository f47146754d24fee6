/* attention_train_tiles.h (internal to attention_train_gpu.c) — the three
 * tiled kernels of training attention for one head-dim class, written once
 * and included once per class (a C template). Before including, define:
 *   ATK_HD               the padded head dim (head dims up to it, zero-filled)
 *   ATK_SFX              the suffix of the functions' names
 *   ATK_F_BQ/_BK/_RM     forward: queries per block, keys per tile, rows per thread
 *   ATK_Q_BQ/_BK/_RM     dq pass: the same
 *   ATK_K_BK/_BQ/_RM     dk/dv pass: keys per block, queries per tile, keys per thread
 *
 * Every kernel has 128 threads in NY x NX: thread (ty, tx) owns a register
 * micro-tile of RM consecutive rows (ty*RM + i, read from a transposed
 * shared tile: a broadcast vector load) by CM columns tx + NX*j (strided:
 * neighbouring lanes read neighbouring words, no bank conflicts). The NX
 * lanes of a row group are consecutive lanes of one warp, so the row max and
 * sum of the online softmax are xor-shuffles within the group. Scores are
 * kept in the log2 domain (exp2f). Tiles past T and head dims past hd are
 * zero-filled on load; the causal mask makes keys past a row's own position
 * (hence past T) weigh 0. Each block writes only its own rows: no atomics,
 * fixed summation order (deterministic). */

#define ATK_CAT2(a, b) a##_##b
#define ATK_CAT(a, b) ATK_CAT2(a, b)
#define ATK_FN(n) ATK_CAT(n, ATK_SFX)
/* a thread's RM consecutive rows of a transposed tile, as one vector access
 * (the row offset ty * RM keeps them 4 * RM-byte aligned) */
#define ATK_VLD(x) (*(const rowv *)__builtin_assume_aligned(&(x), 4 * RM))
#define ATK_VST(x, val) (*(rowv *)__builtin_assume_aligned(&(x), 4 * RM) = (val))
#define ATK_ROWV(rm) ATK_CAT(atk_v, rm) /* atk_v_2, atk_v_4: attention_train_gpu.c */

/* Copies of the argument block's scalars: locals are what the regions see. */
#define ATK_LOCALS(a)                                                                                          \
  const void *q = (a)->q, *k = (a)->k, *v = (a)->v, *out = (a)->out, *dout = (a)->dout;                      \
  void *o = (a)->o, *dq = (a)->dq, *dk = (a)->dk, *dv = (a)->dv;                                               \
  float *ws = (a)->ws;                                                                                         \
  const int64_t B = (a)->B, T = (a)->T, H = (a)->H, KV = (a)->KV, hd = (a)->hd, grp = (a)->H / (a)->KV;     \
  const int qdt = (a)->qdt, kdt = (a)->kdt, vdt = (a)->vdt, odt = (a)->odt, gdt = (a)->gdt;                 \
  const int dqdt = (a)->dqdt, dkdt = (a)->dkdt, dvdt = (a)->dvdt;                                            \
  const int64_t q0 = (a)->qs[0], q1 = (a)->qs[1], q2 = (a)->qs[2], k0 = (a)->ks[0], k1 = (a)->ks[1],         \
                k2 = (a)->ks[2], v0 = (a)->vs[0], v1 = (a)->vs[1], v2 = (a)->vs[2];                           \
  const int64_t o0 = (a)->os[0], o1 = (a)->os[1], o2 = (a)->os[2], g0 = (a)->gs[0], g1 = (a)->gs[1],         \
                g2 = (a)->gs[2];                                                                               \
  const int64_t dq0 = (a)->dqs[0], dq1 = (a)->dqs[1], dq2 = (a)->dqs[2], dk0 = (a)->dks[0],                  \
                dk1 = (a)->dks[1], dk2 = (a)->dks[2], dv0 = (a)->dvs[0], dv1 = (a)->dvs[1],                   \
                dv2 = (a)->dvs[2];                                                                             \
  const int64_t w0 = (a)->w[0], w1 = (a)->w[1], w2 = (a)->w[2], w3 = (a)->w[3];                              \
  const float sl2 = (a)->scale * ATK_LOG2E, scale = (a)->scale;                                                \
  (void)q; (void)k; (void)v; (void)out; (void)dout; (void)o; (void)dq; (void)dk; (void)dv; (void)ws;          \
  (void)KV; (void)odt; (void)gdt; (void)dqdt; (void)dkdt; (void)dvdt; (void)sl2; (void)scale

#define ATK_FIRSTPRIVATE                                                                                       \
  firstprivate(B, T, H, KV, hd, grp, qdt, kdt, vdt, odt, gdt, dqdt, dkdt, dvdt, q0, q1, q2, k0, k1, k2, v0,  \
               v1, v2, o0, o1, o2, g0, g1, g2, dq0, dq1, dq2, dk0, dk1, dk2, dv0, dv1, dv2, w0, w1, w2, w3,   \
               sl2, scale)

/* ---- forward: a block per (sequence, head, BQ queries), key tiles of BK ---- */
static void ATK_FN(atk_fwd)(int dev, const ot_katrain_gpu_args *a) {
  enum { HD = ATK_HD, BQ = ATK_F_BQ, BK = ATK_F_BK, RM = ATK_F_RM, NY = BQ / RM, NX = ATK_NT / NY, CM = BK / NX, OC = HD / NX };
  _Static_assert(NX * NY == ATK_NT && CM * NX == BK && OC * NX == HD, "forward tile");
  _Static_assert(OT_WARP_SIZE % NX == 0, "a row group is NX aligned lanes of one warp");
  typedef ATK_ROWV(ATK_F_RM) rowv; /* a thread's RM rows */
  ATK_LOCALS(a);
  const int64_t nqb = (T + BQ - 1) / BQ, nbh = B * H;
  const int has_ws = ws != NULL;
  OT_GPU_KERNEL(dev, nbh * nqb, ATK_NT, OT_DEVPTR(q, k, v, o, ws) ATK_FIRSTPRIVATE firstprivate(nqb, nbh, has_ws))
  {
    float Qt[HD][BQ + 4] __attribute__((aligned(16))), Ks[BK][HD + 1], Vs[BK][HD];
    float Pt[BK][BQ + 4] __attribute__((aligned(16)));
    OT_TEAM_SHARED(Qt, Ks, Vs, Pt)
    const int tid = (int)OT_GPU_THREAD_ID(), tx = tid % NX, ty = tid / NX;
    const int64_t id = OT_GPU_BLOCK_ID(), qb = nqb - 1 - id / nbh, bh = id % nbh, b = bh / H, h = bh % H;
    const int64_t hk = h / grp, i0 = qb * BQ, imax = (i0 + BQ < T ? i0 + BQ : T) - 1;
    for (int e = tid; e < BQ * HD; e += ATK_NT) {
      const int r = e / HD, d = e % HD;
      const int64_t i = i0 + r;
      Qt[d][r] = i < T && d < hd ? ATK_LD(qdt, q, b * q0 + i * q1 + h * q2 + d) : 0.0f;
    }
    float acc[RM][OC], m[RM], l[RM];
    OT_UNROLL for (int i = 0; i < RM; i++) {
      m[i] = -INFINITY;
      l[i] = 0.0f;
      OT_UNROLL for (int c = 0; c < OC; c++) acc[i][c] = 0.0f;
    }
    for (int64_t j0 = 0; j0 <= imax; j0 += BK) {
      OT_GPU_BLOCK_SYNC(); /* the last tile is consumed (and Q staged) */
      for (int e = tid; e < BK * HD; e += ATK_NT) {
        const int c = e / HD, d = e % HD;
        const int64_t j = j0 + c;
        const int ok = j < T && d < hd;
        Ks[c][d] = ok ? ATK_LD(kdt, k, b * k0 + j * k1 + hk * k2 + d) : 0.0f;
        Vs[c][d] = ok ? ATK_LD(vdt, v, b * v0 + j * v1 + hk * v2 + d) : 0.0f;
      }
      OT_GPU_BLOCK_SYNC();
      float s[RM][CM];
      OT_UNROLL for (int i = 0; i < RM; i++) OT_UNROLL for (int j = 0; j < CM; j++) s[i][j] = 0.0f;
      for (int d = 0; d < HD; d++) {
        float kc[CM];
        const rowv qr = ATK_VLD(Qt[d][ty * RM]);
        OT_UNROLL for (int j = 0; j < CM; j++) kc[j] = Ks[tx + NX * j][d];
        OT_UNROLL for (int i = 0; i < RM; i++) OT_UNROLL for (int j = 0; j < CM; j++) s[i][j] += qr[i] * kc[j];
      }
      OT_UNROLL for (int i = 0; i < RM; i++) {
        const int64_t row = i0 + ty * RM + i;
        float mx = -INFINITY;
        OT_UNROLL for (int j = 0; j < CM; j++) {
          s[i][j] = j0 + tx + NX * j <= row ? s[i][j] * sl2 : -INFINITY;
          mx = fmaxf(mx, s[i][j]);
        }
        OT_UNROLL for (int x = 1; x < NX; x <<= 1) mx = fmaxf(mx, ot_warp_xor(mx, x));
        const float mn = fmaxf(m[i], mx), al = exp2f(m[i] - mn); /* al = 0 on the first tile */
        float ps = 0.0f;
        OT_UNROLL for (int j = 0; j < CM; j++) {
          s[i][j] = exp2f(s[i][j] - mn);
          ps += s[i][j];
        }
        OT_UNROLL for (int x = 1; x < NX; x <<= 1) ps += ot_warp_xor(ps, x);
        l[i] = l[i] * al + ps;
        m[i] = mn;
        OT_UNROLL for (int c = 0; c < OC; c++) acc[i][c] *= al;
      }
      OT_UNROLL for (int j = 0; j < CM; j++) {
        rowv p;
        OT_UNROLL for (int i = 0; i < RM; i++) p[i] = s[i][j];
        ATK_VST(Pt[tx + NX * j][ty * RM], p);
      }
      OT_GPU_BLOCK_SYNC();
      for (int c = 0; c < BK; c++) {
        float vc[OC];
        const rowv pr = ATK_VLD(Pt[c][ty * RM]);
        OT_UNROLL for (int x = 0; x < OC; x++) vc[x] = Vs[c][tx + NX * x];
        OT_UNROLL for (int i = 0; i < RM; i++) OT_UNROLL for (int x = 0; x < OC; x++) acc[i][x] += pr[i] * vc[x];
      }
    }
    OT_UNROLL for (int i = 0; i < RM; i++) {
      const int64_t row = i0 + ty * RM + i;
      if (row < T) {
        const float inv = 1.0f / l[i];
        OT_UNROLL for (int x = 0; x < OC; x++) {
          const int d = tx + NX * x;
          if (d < hd) ot_kst(odt, o, b * o0 + row * o1 + h * o2 + d, acc[i][x] * inv);
        }
        if (has_ws && tx == 0) {
          ws[b * w0 + row * w1 + h * w2] = (m[i] + log2f(l[i])) * ATK_LN2;
          ws[b * w0 + row * w1 + h * w2 + w3] = 0.0f; /* D: the backward's */
        }
      }
    }
  }
}

/* ---- dq pass: a block per (sequence, head, BQ queries), key tiles of BK ----
 * D_i = dout_i . out_i first (into ws[..., 1] for the dk/dv pass), then per
 * tile S = Q K^T, dP = dO V^T, dS = P (dP - D), dQ += dS K. */
static void ATK_FN(atk_dq)(int dev, const ot_katrain_gpu_args *a) {
  enum { HD = ATK_HD, BQ = ATK_Q_BQ, BK = ATK_Q_BK, RM = ATK_Q_RM, NY = BQ / RM, NX = ATK_NT / NY, CM = BK / NX, OC = HD / NX };
  _Static_assert(NX * NY == ATK_NT && CM * NX == BK && OC * NX == HD && BK >= BQ, "dq tile");
  _Static_assert(OT_WARP_SIZE % NX == 0, "a row group is NX aligned lanes of one warp");
  typedef ATK_ROWV(ATK_Q_RM) rowv;
  ATK_LOCALS(a);
  const int64_t nqb = (T + BQ - 1) / BQ, nbh = B * H;
  OT_GPU_KERNEL(dev, nbh * nqb, ATK_NT, OT_DEVPTR(q, k, v, out, dout, dq, ws) ATK_FIRSTPRIVATE firstprivate(nqb, nbh))
  {
    float Qt[HD][BQ + 4] __attribute__((aligned(16))), Gt[HD][BQ + 4] __attribute__((aligned(16)));
    float Ks[BK][HD + 1], Vs[BK][HD + 1], St[BK][BQ + 4] __attribute__((aligned(16))), sl[BQ], sD[BQ];
    OT_TEAM_SHARED(Qt, Gt, Ks, Vs, St, sl, sD)
    const int tid = (int)OT_GPU_THREAD_ID(), tx = tid % NX, ty = tid / NX;
    const int64_t id = OT_GPU_BLOCK_ID(), qb = nqb - 1 - id / nbh, bh = id % nbh, b = bh / H, h = bh % H;
    const int64_t hk = h / grp, i0 = qb * BQ, imax = (i0 + BQ < T ? i0 + BQ : T) - 1;
    for (int e = tid; e < BQ * HD; e += ATK_NT) {
      const int r = e / HD, d = e % HD;
      const int64_t i = i0 + r;
      const int ok = i < T && d < hd;
      Qt[d][r] = ok ? ATK_LD(qdt, q, b * q0 + i * q1 + h * q2 + d) : 0.0f;
      Gt[d][r] = ok ? ATK_LD(gdt, dout, b * g0 + i * g1 + h * g2 + d) : 0.0f;
      Ks[r][d] = ok ? ATK_LD(odt, out, b * o0 + i * o1 + h * o2 + d) : 0.0f; /* out, staged for D */
    }
    OT_GPU_BLOCK_SYNC();
    for (int r = tid; r < BQ; r += ATK_NT) {
      const int64_t i = i0 + r;
      float D = 0.0f;
      for (int d = 0; d < HD; d++) D += Gt[d][r] * Ks[r][d];
      sD[r] = D;
      sl[r] = i < T ? ws[b * w0 + i * w1 + h * w2] * ATK_LOG2E : 0.0f;
      if (i < T) ws[b * w0 + i * w1 + h * w2 + w3] = D;
    }
    float acc[RM][OC];
    OT_UNROLL for (int i = 0; i < RM; i++) OT_UNROLL for (int x = 0; x < OC; x++) acc[i][x] = 0.0f;
    for (int64_t j0 = 0; j0 <= imax; j0 += BK) {
      OT_GPU_BLOCK_SYNC(); /* the last tile (or out) is consumed; sl, sD are written */
      for (int e = tid; e < BK * HD; e += ATK_NT) {
        const int c = e / HD, d = e % HD;
        const int64_t j = j0 + c;
        const int ok = j < T && d < hd;
        Ks[c][d] = ok ? ATK_LD(kdt, k, b * k0 + j * k1 + hk * k2 + d) : 0.0f;
        Vs[c][d] = ok ? ATK_LD(vdt, v, b * v0 + j * v1 + hk * v2 + d) : 0.0f;
      }
      OT_GPU_BLOCK_SYNC();
      float s[RM][CM], dp[RM][CM];
      OT_UNROLL for (int i = 0; i < RM; i++) OT_UNROLL for (int j = 0; j < CM; j++) s[i][j] = dp[i][j] = 0.0f;
      for (int d = 0; d < HD; d++) {
        float kc[CM], vc[CM];
        const rowv qr = ATK_VLD(Qt[d][ty * RM]), gr = ATK_VLD(Gt[d][ty * RM]);
        OT_UNROLL for (int j = 0; j < CM; j++) {
          kc[j] = Ks[tx + NX * j][d];
          vc[j] = Vs[tx + NX * j][d];
        }
        OT_UNROLL for (int i = 0; i < RM; i++) OT_UNROLL for (int j = 0; j < CM; j++) {
          s[i][j] += qr[i] * kc[j];
          dp[i][j] += gr[i] * vc[j];
        }
      }
      OT_UNROLL for (int j = 0; j < CM; j++) {
        rowv g;
        OT_UNROLL for (int i = 0; i < RM; i++) {
          const int r = ty * RM + i;
          const float p = j0 + tx + NX * j <= i0 + r ? exp2f(s[i][j] * sl2 - sl[r]) : 0.0f;
          g[i] = p * (dp[i][j] - sD[r]);
        }
        ATK_VST(St[tx + NX * j][ty * RM], g);
      }
      OT_GPU_BLOCK_SYNC();
      for (int c = 0; c < BK; c++) {
        float kc[OC];
        const rowv gr = ATK_VLD(St[c][ty * RM]);
        OT_UNROLL for (int x = 0; x < OC; x++) kc[x] = Ks[c][tx + NX * x];
        OT_UNROLL for (int i = 0; i < RM; i++) OT_UNROLL for (int x = 0; x < OC; x++) acc[i][x] += gr[i] * kc[x];
      }
    }
    OT_UNROLL for (int i = 0; i < RM; i++) {
      const int64_t row = i0 + ty * RM + i;
      if (row < T)
        OT_UNROLL for (int x = 0; x < OC; x++) {
          const int d = tx + NX * x;
          if (d < hd) ot_kst(dqdt, dq, b * dq0 + row * dq1 + h * dq2 + d, scale * acc[i][x]);
        }
    }
  }
}

/* ---- dk/dv pass: a block per (sequence, kv head, BK keys); over the
 * group's heads and the query tiles from the block's first key:
 * S^T = K Q^T, dP^T = V dO^T, P^T and dS^T, dV += P^T dO, dK += dS^T Q. */
static void ATK_FN(atk_dkv)(int dev, const ot_katrain_gpu_args *a) {
  enum { HD = ATK_HD, BK = ATK_K_BK, BQ = ATK_K_BQ, RM = ATK_K_RM, NY = BK / RM, NX = ATK_NT / NY, CM = BQ / NX, OC = HD / NX };
  _Static_assert(NX * NY == ATK_NT && CM * NX == BQ && OC * NX == HD, "dk/dv tile");
  _Static_assert(OT_WARP_SIZE % NX == 0, "a row group is NX aligned lanes of one warp");
  typedef ATK_ROWV(ATK_K_RM) rowv;
  ATK_LOCALS(a);
  const int64_t nkb = (T + BK - 1) / BK, nbk = B * KV;
  OT_GPU_KERNEL(dev, nbk * nkb, ATK_NT, OT_DEVPTR(q, k, v, dout, dk, dv, ws) ATK_FIRSTPRIVATE firstprivate(nkb, nbk))
  {
    float Kt[HD][BK + 4] __attribute__((aligned(16))), Vt[HD][BK + 4] __attribute__((aligned(16)));
    float Qs[BQ][HD + 1], Gs[BQ][HD + 1], Pt[BQ][BK + 4] __attribute__((aligned(16)));
    float St[BQ][BK + 4] __attribute__((aligned(16))), sl[BQ], sD[BQ];
    OT_TEAM_SHARED(Kt, Vt, Qs, Gs, Pt, St, sl, sD)
    const int tid = (int)OT_GPU_THREAD_ID(), tx = tid % NX, ty = tid / NX;
    const int64_t id = OT_GPU_BLOCK_ID(), kb = id / nbk, bk = id % nbk, b = bk / KV, hk = bk % KV;
    const int64_t j0 = kb * BK;
    for (int e = tid; e < BK * HD; e += ATK_NT) {
      const int c = e / HD, d = e % HD;
      const int64_t j = j0 + c;
      const int ok = j < T && d < hd;
      Kt[d][c] = ok ? ATK_LD(kdt, k, b * k0 + j * k1 + hk * k2 + d) : 0.0f;
      Vt[d][c] = ok ? ATK_LD(vdt, v, b * v0 + j * v1 + hk * v2 + d) : 0.0f;
    }
    float ak[RM][OC], av[RM][OC];
    OT_UNROLL for (int i = 0; i < RM; i++) OT_UNROLL for (int x = 0; x < OC; x++) ak[i][x] = av[i][x] = 0.0f;
    for (int64_t h = hk * grp; h < (hk + 1) * grp; h++)
      for (int64_t i0 = j0; i0 < T; i0 += BQ) {
        OT_GPU_BLOCK_SYNC(); /* the last tile is consumed (and K, V staged) */
        for (int e = tid; e < BQ * HD; e += ATK_NT) {
          const int r = e / HD, d = e % HD;
          const int64_t i = i0 + r;
          const int ok = i < T && d < hd;
          Qs[r][d] = ok ? ATK_LD(qdt, q, b * q0 + i * q1 + h * q2 + d) : 0.0f;
          Gs[r][d] = ok ? ATK_LD(gdt, dout, b * g0 + i * g1 + h * g2 + d) : 0.0f;
        }
        for (int r = tid; r < BQ; r += ATK_NT) {
          const int64_t i = i0 + r;
          sl[r] = i < T ? ws[b * w0 + i * w1 + h * w2] * ATK_LOG2E : 0.0f;
          sD[r] = i < T ? ws[b * w0 + i * w1 + h * w2 + w3] : 0.0f;
        }
        OT_GPU_BLOCK_SYNC();
        float s[RM][CM], dp[RM][CM];
        OT_UNROLL for (int i = 0; i < RM; i++) OT_UNROLL for (int j = 0; j < CM; j++) s[i][j] = dp[i][j] = 0.0f;
        for (int d = 0; d < HD; d++) {
          float qc[CM], gc[CM];
          const rowv kr = ATK_VLD(Kt[d][ty * RM]), vr = ATK_VLD(Vt[d][ty * RM]);
          OT_UNROLL for (int j = 0; j < CM; j++) {
            qc[j] = Qs[tx + NX * j][d];
            gc[j] = Gs[tx + NX * j][d];
          }
          OT_UNROLL for (int i = 0; i < RM; i++) OT_UNROLL for (int j = 0; j < CM; j++) {
            s[i][j] += kr[i] * qc[j];
            dp[i][j] += vr[i] * gc[j];
          }
        }
        OT_UNROLL for (int j = 0; j < CM; j++) {
          const int r = tx + NX * j;
          const int64_t qi = i0 + r;
          rowv pv, gv;
          OT_UNROLL for (int i = 0; i < RM; i++) {
            const int64_t kj = j0 + ty * RM + i;
            pv[i] = qi >= kj && qi < T ? exp2f(s[i][j] * sl2 - sl[r]) : 0.0f;
            gv[i] = pv[i] * (dp[i][j] - sD[r]);
          }
          ATK_VST(Pt[r][ty * RM], pv);
          ATK_VST(St[r][ty * RM], gv);
        }
        OT_GPU_BLOCK_SYNC();
        for (int r = 0; r < BQ; r++) {
          float gc[OC], qc[OC];
          const rowv pr = ATK_VLD(Pt[r][ty * RM]), gr = ATK_VLD(St[r][ty * RM]);
          OT_UNROLL for (int x = 0; x < OC; x++) {
            gc[x] = Gs[r][tx + NX * x];
            qc[x] = Qs[r][tx + NX * x];
          }
          OT_UNROLL for (int i = 0; i < RM; i++) OT_UNROLL for (int x = 0; x < OC; x++) {
            av[i][x] += pr[i] * gc[x];
            ak[i][x] += gr[i] * qc[x];
          }
        }
      }
    OT_UNROLL for (int i = 0; i < RM; i++) {
      const int64_t kj = j0 + ty * RM + i;
      if (kj < T)
        OT_UNROLL for (int x = 0; x < OC; x++) {
          const int d = tx + NX * x;
          if (d < hd) {
            ot_kst(dkdt, dk, b * dk0 + kj * dk1 + hk * dk2 + d, scale * ak[i][x]);
            ot_kst(dvdt, dv, b * dv0 + kj * dv1 + hk * dv2 + d, av[i][x]);
          }
        }
    }
  }
}

#undef ATK_HD
#undef ATK_SFX
#undef ATK_F_BQ
#undef ATK_F_BK
#undef ATK_F_RM
#undef ATK_Q_BQ
#undef ATK_Q_BK
#undef ATK_Q_RM
#undef ATK_K_BK
#undef ATK_K_BQ
#undef ATK_K_RM
