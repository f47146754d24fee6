/* rope_rows.h (internal to src/kernels) — the loop body of RoPE with the
 * KV-cache append for rows that each bring their own cache slot and
 * position (attention_rows.c), shared by its kernels and by the step
 * kernel's batched instruction (step_gpu.c), so that all of them compute a
 * row the same way. */
#ifndef OT_KERNELS_ROPE_ROWS_H
#define OT_KERNELS_ROPE_ROWS_H

#include <math.h>
#include <stdint.h>

#include "kernels/kcommon.h"
#include "kernels/kernels.h"

OT_DECLARE_TARGET_BEGIN
/* Row t's slot and position, or -1 for both if the row is padding. */
static inline void ar_row(const void *rp, int64_t r0, int64_t r1, int64_t t, int64_t slots, int64_t max_seq,
                          int64_t *slot, int64_t *pos) {
  const int64_t s = ((const int32_t *)rp)[t * r0], p = ((const int32_t *)rp)[t * r0 + r1];
  const int ok = s >= 0 && s < slots && p >= 0 && p < max_seq;
  *slot = ok ? s : -1;
  *pos = ok ? p : -1;
}
OT_DECLARE_TARGET_END

/* What rope_append_rows' loop body reads: the tensors' device addresses,
 * dtypes and strides, passed whole to either kernel. */
typedef struct ra_args {
  void *q, *k, *kc, *vc;
  const void *v, *rows;
  int qt, kt, vt, kct, vct;
  int64_t H, NS, P, d, half;
  int64_t q0, q1, q2, k0, k1, k2, v0, v1, v2, r0, r1, c0, c1, c2, c3, e0, e1, e2, e3;
  ot_rope r;
} ra_args;

OT_DECLARE_TARGET_BEGIN
/* Pair i of head h (a query head below H, else KV head h - H) of row s,
 * which goes to cache slot `slot` at position pos: rotated in place; a KV
 * head's pair also goes to the caches. The one loop body of both forms
 * (the one-sequence caches have no slot dimension: c0 = e0 = 0). */
static inline void ra_rotate(const ra_args *a, int64_t s, int64_t h, int64_t i, int64_t slot, int64_t pos) {
  const int64_t half = a->half;
  const float ang = ot_krope_angle(pos, i, a->d, a->r), c = cosf(ang) * ot_krope_scale(a->r),
              sn = sinf(ang) * ot_krope_scale(a->r);
  if (h < a->H) {
    const int64_t o1 = s * a->q0 + h * a->q1 + i * a->q2, o2 = o1 + half * a->q2;
    const float x1 = ot_kld(a->qt, a->q, o1), x2 = ot_kld(a->qt, a->q, o2);
    ot_kst(a->qt, a->q, o1, x1 * c - x2 * sn);
    ot_kst(a->qt, a->q, o2, x2 * c + x1 * sn);
    return;
  }
  const int64_t g = h - a->H, o1 = s * a->k0 + g * a->k1 + i * a->k2, o2 = o1 + half * a->k2;
  const float x1 = ot_kld(a->kt, a->k, o1), x2 = ot_kld(a->kt, a->k, o2);
  ot_kst(a->kt, a->k, o1, x1 * c - x2 * sn);
  ot_kst(a->kt, a->k, o2, x2 * c + x1 * sn);
  /* the cache gets what k now holds (rounded to k's dtype first) */
  const int64_t co = slot * a->c0 + pos * a->c1 + g * a->c2;
  ot_kst(a->kct, a->kc, co + i * a->c3, ot_kld(a->kt, a->k, o1));
  ot_kst(a->kct, a->kc, co + (i + half) * a->c3, ot_kld(a->kt, a->k, o2));
  const int64_t vo = s * a->v0 + g * a->v1, eo = slot * a->e0 + pos * a->e1 + g * a->e2;
  ot_kst(a->vct, a->vc, eo + i * a->e3, ot_kld(a->vt, a->v, vo + i * a->v2));
  ot_kst(a->vct, a->vc, eo + (i + half) * a->e3, ot_kld(a->vt, a->v, vo + (i + half) * a->v2));
}
/* Row s of a batch: its slot and position from the rows tensor; a padding row changes nothing. */
static inline void ra_pair(const ra_args *a, int64_t s, int64_t h, int64_t i) {
  int64_t slot, pos;
  ar_row(a->rows, a->r0, a->r1, s, a->NS, a->P, &slot, &pos);
  if (slot >= 0) ra_rotate(a, s, h, i, slot, pos);
}
OT_DECLARE_TARGET_END

/* The arguments of views q [T, H, d], k, v [T, KV, d], caches [slots,
 * max_seq, KV, d] and rows [T, 2] (checked by the caller). */
ra_args ot_kra_args(ot_kview q, ot_kview k, ot_kview v, ot_kview kc, ot_kview vc, ot_kview rows, ot_rope r);

#endif
