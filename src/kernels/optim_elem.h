/* optim_elem.h (internal to src/kernels) — the AdamW update of one element,
 * shared by the per-tensor kernel (optim.c) and the multi-tensor GPU kernel
 * (optim_gpu.c) so that both compile the same expressions and give the same
 * bits (a macro, not a helper: bare GPU kernels keep their bodies
 * self-contained). */
#ifndef OT_KERNELS_OPTIM_ELEM_H
#define OT_KERNELS_OPTIM_ELEM_H

/* Host-side scalars of one AdamW step, as PyTorch computes them (optim.c). */
typedef struct ot_kaw_scal {
  float decay, w1, b2, w2, step, bc2s, eps, gs;
} ot_kaw_scal;

/* p, m, v: float lvalues updated in place; gv the gradient element as read. */
#define OT_KAW_ELEM(s, p, gv, m, v)                                                          \
  do {                                                                                       \
    const float aw_g_ = (gv) * (s).gs;                                                       \
    const float aw_pd_ = (p) * (s).decay;                                                    \
    const float aw_mo_ = (m);                                                                \
    const float aw_mn_ = (s).w1 < 0.5f ? aw_mo_ + (s).w1 * (aw_g_ - aw_mo_)                  \
                                       : aw_g_ - (aw_g_ - aw_mo_) * (1.0f - (s).w1);         \
    const float aw_vb_ = (v) * (s).b2;                                                       \
    const float aw_vn_ = aw_vb_ + (s).w2 * aw_g_ * aw_g_;                                    \
    const float aw_den_ = sqrtf(aw_vn_) / (s).bc2s + (s).eps;                                \
    (p) = aw_pd_ + (s).step * aw_mn_ / aw_den_;                                              \
    (m) = aw_mn_;                                                                            \
    (v) = aw_vn_;                                                                            \
  } while (0)

#endif
