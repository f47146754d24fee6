/* kgrad.c — central finite differences in double. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "kgrad.h"

double ot_tfd_check(const char *what, ot_tfd_fn f, void *ctx, double *x, int64_t n, const float *grad,
                    int64_t gstride, double h, double tol) {
  double num = 0, den = 0, worst = 0;
  int64_t wi = -1;
  for (int64_t i = 0; i < n; i++) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double fp = f(x, ctx);
    x[i] = x0 - h;
    const double fm = f(x, ctx);
    x[i] = x0;
    const double fd = (fp - fm) / (2 * h), g = grad[i * gstride], e = fabs(g - fd);
    num += e * e;
    den += fd * fd;
    if (e > worst) {
      worst = e;
      wi = i;
    }
  }
  const double err = den > 0 ? sqrt(num / den) : sqrt(num);
  if (!(err <= tol))
    fail_msg("%s: gradient vs finite differences: normalised error %.3g > %.3g (worst element %lld, off by %.3g)",
             what, err, tol, (long long)wi, worst);
  return err;
}

double *ot_tfd_dup(const float *x, int64_t n) {
  double *d = malloc(sizeof *d * (size_t)(n ? n : 1));
  assert_non_null(d);
  for (int64_t i = 0; i < n; i++) d[i] = x[i];
  return d;
}
