/*
 * gap.c - the duality gaps --tol compares (lasso.h): the Lasso's as
 * scikit-learn computes it, and the L1-regularised logistic loss's.
 */
#include <math.h>

#include "lasso.h"

double lasso_gap_squared(double rr, double ry, double l1, double gmax, double alpha,
                         double *primal) {
  /* The dual point r scaled into the dual's feasible set |X^T theta|_inf
   * <= alpha, as sklearn's enet_coordinate_descent does. */
  double c = 1, gap;
  if (gmax > alpha) {
    c = alpha / gmax;
    gap = 0.5 * (rr + rr * c * c);
  } else {
    gap = rr;
  }
  gap += alpha * l1 - c * ry;
  *primal = 0.5 * rr + alpha * l1;
  return gap;
}

double lasso_gap_logistic(double loss, double ent, double l1, double gmax, double lambda,
                          double *primal) {
  double s = gmax > lambda ? lambda / gmax : 1;
  *primal = loss + lambda * l1;
  return *primal - s * ent;
}
