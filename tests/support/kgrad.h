/* kgrad.h — finite-difference gradient checks for backward kernels.
 *
 * A test writes its op's forward pass in double, as a scalar loss
 * L(x) = sum(dy * f(x)) with random weights dy, and compares the gradient
 * that the backward reference wrote (float) against central differences
 *     dL/dx_i ~ (L(x + h e_i) - L(x - h e_i)) / 2h
 * computed in double: truncation error ~ h^2 |L'''|, round-off ~ 1e-16 / h,
 * both far below the float rounding of the gradient (~6e-8 relative). */
#ifndef OT_TESTS_KGRAD_H
#define OT_TESTS_KGRAD_H

#include <stdint.h>

typedef double (*ot_tfd_fn)(const double *x, void *ctx);

/* Checks grad[i * gstride] (i < n) against the central differences of f at x
 * (x is perturbed and restored). Normalised error ||g - fd|| / ||fd|| <= tol,
 * else the cmocka test fails naming `what`. Returns the error. */
double ot_tfd_check(const char *what, ot_tfd_fn f, void *ctx, double *x, int64_t n, const float *grad,
                    int64_t gstride, double h, double tol);

/* Float buffer -> new double array (caller frees). */
double *ot_tfd_dup(const float *x, int64_t n);

#endif
