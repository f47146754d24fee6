/* optim_gpu.c — the multi-tensor AdamW on a GPU: GPT-2 has 148 parameter
 * tensors, and an update per tensor paid 148 launches (7 ms a step on the
 * H200) for 1.5 GB of traffic. Here one bare kernel updates up to AWM_MAX
 * tensors: block b belongs to the tensor whose block range holds it, each
 * thread takes AWM_OCT octets of it with 16-byte loads (kcommon.h's
 * ot_kld8_*). Every element goes through OT_KAW_ELEM, the expressions of
 * the per-tensor kernel, so the bits are the same.
 *
 * The table of tensors is firstprivate; it is read with constant indices
 * only (an unrolled pick), so it stays in kernel parameters and registers
 * instead of a per-thread copy in local memory. */
#include "kernels/kcommon.h"
#include "kernels/train_gpu.h"
#include "ot_gpu.h"

#define AWM_MAX 16                    /* tensors per launch */
#define AWM_T 256                     /* threads per block */
#define AWM_OCT 4                     /* octets per thread */
#define AWM_E (AWM_T * OT_KV * AWM_OCT) /* elements per block */

typedef struct awm_tab {
  int64_t b0[AWM_MAX + 1]; /* first block of each tensor; unused entries INT64_MAX */
  float *p[AWM_MAX], *m[AWM_MAX], *v[AWM_MAX];
  const void *g[AWM_MAX];
  void *c[AWM_MAX];
  int64_t ne[AWM_MAX];
  int gdt[AWM_MAX], cdt[AWM_MAX], vec[AWM_MAX];
} awm_tab;

/* entry j of table field f, with constant indices only */
#define AWM_PICK(T, f, j, out)                         \
  do {                                                 \
    out = (T).f[0];                                    \
    OT_UNROLL                                          \
    for (int awm_k_ = 1; awm_k_ < AWM_MAX; awm_k_++)   \
      if ((j) == awm_k_) out = (T).f[awm_k_];          \
  } while (0)

static void awm_launch(int dev, const awm_tab *tab, int64_t nblk, ot_kaw_scal s) {
  const awm_tab T = *tab;
  OT_GPU_KERNEL(dev, (int)nblk, AWM_T, firstprivate(T, s))
  {
    const int tid = (int)OT_GPU_THREAD_ID();
    const int64_t b = OT_GPU_BLOCK_ID();
    int j = 0;
    OT_UNROLL
    for (int k = 1; k < AWM_MAX; k++)
      if (b >= T.b0[k]) j = k;
    float *p, *m, *v;
    const void *g;
    void *c;
    int64_t n;
    int gdt, cdt, vec;
    AWM_PICK(T, p, j, p);
    AWM_PICK(T, m, j, m);
    AWM_PICK(T, v, j, v);
    AWM_PICK(T, g, j, g);
    AWM_PICK(T, c, j, c);
    AWM_PICK(T, ne, j, n);
    AWM_PICK(T, gdt, j, gdt);
    AWM_PICK(T, cdt, j, cdt);
    AWM_PICK(T, vec, j, vec);
    int64_t b0;
    AWM_PICK(T, b0, j, b0);
    const int64_t base = (b - b0) * AWM_E;
    for (int o = 0; o < AWM_OCT; o++) {
      const int64_t i0 = base + ((int64_t)o * AWM_T + tid) * OT_KV;
      if (i0 >= n) break;
      if (vec && i0 + OT_KV <= n) {
        float pv[OT_KV], mv[OT_KV], vv[OT_KV], gv[OT_KV];
        ot_kld8_f32(p, i0, pv);
        ot_kld8_f32(m, i0, mv);
        ot_kld8_f32(v, i0, vv);
        if (gdt == OT_BF16) ot_kld8_bf16(g, i0, gv);
        else if (gdt == OT_F16) ot_kld8_f16(g, i0, gv);
        else ot_kld8_f32(g, i0, gv);
        OT_UNROLL
        for (int k = 0; k < OT_KV; k++) OT_KAW_ELEM(s, pv[k], gv[k], mv[k], vv[k]);
        ot_kst8_f32(p, i0, pv);
        ot_kst8_f32(m, i0, mv);
        ot_kst8_f32(v, i0, vv);
        if (c) {
          if (cdt == OT_BF16) ot_kst8_bf16(c, i0, pv);
          else if (cdt == OT_F16) ot_kst8_f16(c, i0, pv);
          else ot_kst8_f32(c, i0, pv);
        }
      } else {
        for (int64_t i = i0; i < n && i < i0 + OT_KV; i++) {
          float pe = p[i], me = m[i], ve = v[i];
          OT_KAW_ELEM(s, pe, ot_kld(gdt, g, i), me, ve);
          p[i] = pe;
          m[i] = me;
          v[i] = ve;
          if (c) ot_kst(cdt, c, i, pe);
        }
      }
    }
  }
}

int ot_kadamw_multi_gpu(int dev, int n, float *const *p, const void *const *g, const int *gdt, float *const *m,
                        float *const *v, void *const *cp, const int *cdt, const int64_t *ne, ot_kaw_scal s) {
  if (!ot_ktrain_fast(dev)) return 0;
  for (int i0 = 0; i0 < n; i0 += AWM_MAX) {
    awm_tab T = {0};
    int64_t nblk = 0;
    for (int k = 0; k < AWM_MAX; k++) {
      const int i = i0 + k;
      T.b0[k] = i < n ? nblk : INT64_MAX;
      if (i >= n) {
        T.p[k] = T.m[k] = T.v[k] = NULL;
        continue;
      }
      T.p[k] = p[i], T.m[k] = m[i], T.v[k] = v[i], T.g[k] = g[i], T.c[k] = cp[i];
      T.ne[k] = ne[i], T.gdt[k] = gdt[i], T.cdt[k] = cdt[i];
      const int64_t ge = ot_kfloat_bytes(gdt[i]), ce = cp[i] ? ot_kfloat_bytes(cdt[i]) : 4;
      T.vec[k] = ot_kalign16(p[i], 0, 4) && ot_kalign16(m[i], 0, 4) && ot_kalign16(v[i], 0, 4) &&
                 ge && ot_kalign16(g[i], 0, ge) && (!cp[i] || (ce && ot_kalign16(cp[i], 0, ce)));
      nblk += (ne[i] + AWM_E - 1) / AWM_E;
    }
    T.b0[AWM_MAX] = INT64_MAX;
    if (nblk > 0) awm_launch(dev, &T, nblk, s);
  }
  return 1;
}
