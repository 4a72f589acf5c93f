/*
 * Partial reductions (strata/app.h): the identity each partial starts a
 * pass at and how two values of one partial combine.
 */
#include <math.h>

#include "strata/app.h"

double strata_reduce_identity(strata_reduce op) {
  return op == STRATA_REDUCE_MAX ? -INFINITY : op == STRATA_REDUCE_MIN ? INFINITY : 0.0;
}

double strata_reduce_apply(strata_reduce op, double a, double b) {
  if (op != STRATA_REDUCE_MAX && op != STRATA_REDUCE_MIN) return a + b;
  /* fmax and fmin drop a NaN; a NaN partial must survive to the
   * divergence check, as it does in a sum. */
  if (isnan(a) || isnan(b)) return NAN;
  return op == STRATA_REDUCE_MAX ? (a > b ? a : b) : (a < b ? a : b);
}

static strata_reduce op_of(const strata_app *app, int i) {
  return app->partial_reduce ? app->partial_reduce[i] : STRATA_REDUCE_SUM;
}

void strata_partials_init(const strata_app *app, double *partials) {
  for (int i = 0; i < app->n_partials; i++) partials[i] = strata_reduce_identity(op_of(app, i));
}

void strata_partials_combine(const strata_app *app, double *acc, const double *in) {
  for (int i = 0; i < app->n_partials; i++) acc[i] = strata_reduce_apply(op_of(app, i), acc[i], in[i]);
}

int strata_partial_is_bad(const strata_app *app, int i, double v) {
  if (isnan(v)) return 1;
  /* A maximum nobody raised is still -INFINITY, its identity: no sign of
   * divergence. The opposite infinity is. */
  return isinf(v) && v != strata_reduce_identity(op_of(app, i));
}
