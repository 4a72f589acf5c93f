/*
 * The problem API (strata/problem.h).
 */
#include <string.h>

#include "strata/core.h"
#include "strata/problem.h"

void strata_problem_close(strata_problem *p) {
  strata_free(p->global.buf);
  strata_free(p->coord.buf);
  for (int i = 0; p->data && i < p->n_data; i++) strata_free(p->data[i].buf);
  for (int i = 0; p->eval && i < p->n_data; i++) strata_free(p->eval[i].buf);
  for (int i = 0; p->resident && i < p->n_resident; i++) strata_free(p->resident[i].buf);
  for (int i = 0; p->rotating && i < p->n_rotating; i++) strata_free(p->rotating[i].buf);
  strata_free(p->data);
  strata_free(p->eval);
  strata_free(p->resident);
  strata_free(p->rotating);
  strata_free(p->meta);
  if (p->priv && p->priv_free) p->priv_free(p->priv);
  memset(p, 0, sizeof *p);
}

int strata_problem_alloc(strata_problem *p, int n_data, int n_resident, int n_rotating,
                         int with_eval) {
  p->n_data = n_data;
  p->n_resident = n_resident;
  p->n_rotating = n_rotating;
  p->data = strata_calloc((size_t)n_data, sizeof(strata_block));
  p->eval = with_eval ? strata_calloc((size_t)n_data, sizeof(strata_block)) : NULL;
  p->resident = strata_calloc((size_t)n_resident, sizeof(strata_block));
  p->rotating = strata_calloc((size_t)n_rotating, sizeof(strata_block));
  if (!p->data || (with_eval && !p->eval) || !p->resident || !p->rotating) {
    strata_problem_close(p);
    return strata_err_set(STRATA_ENOMEM, "out of memory allocating the problem");
  }
  return 0;
}

int strata_problem_fits(const char *what, double bytes, const char *hint) {
  strata_mem_budget b;
  strata_mem_budget_init(&b);
  return strata_mem_check(&b, bytes, hint, "%s need", what);
}
