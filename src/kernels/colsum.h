/* colsum.h (internal) — column sums over the rows of a (4-D, strided) view:
 * the weight/bias gradients of norms and biases (sum over every token). */
#ifndef OT_KERNELS_COLSUM_H
#define OT_KERNELS_COLSUM_H

#include "kernels/kcommon.h"

/* One strided operand: element (r, c) is at ot_krow_off(r, n1, n2, s0, s1, s2) + c * s3. */
typedef struct ot_kcs_view {
  int dt;
  const void *p;
  int64_t s0, s1, s2, s3;
} ot_kcs_view;

/* For c < d:  prod[c * ps] += sum_r a(r, c) * b(r, c)   (if prod; b required)
 *             sum[c * ss]  += sum_r a(r, c)             (if sum)
 * over rows = n0 * n1 * n2 flattened rows. Deterministic: each column's sum
 * has a fixed order whatever the team size, and no atomics. */
ot_status ot_kcolsum(int dev, int64_t rows, int64_t d, int64_t n1, int64_t n2, ot_kcs_view a, ot_kcs_view b,
                     int pdt, void *prod, int64_t ps, int sdt, void *sum, int64_t ss);

#endif
