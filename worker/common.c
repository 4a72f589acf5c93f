/*
 * What the pass loop and every back-end use: scoring the eval blocks,
 * stamping a report's CPU time, the clocks of a pass.
 */
#include <math.h>

#include "strata/core.h"
#include "worker/worker.h"

int strata__worker_score(strata__worker *w, int pass, double *partials) {
  int rc = 0;
  for (int s = 0; s < w->sched.n_subepochs && !rc; s++) {
    int n;
    const strata_task *tk = strata_schedule_tasks(&w->sched, s, w->me, &n);
    for (int i = 0; i < n && !rc; i++) {
      strata_block *eb = &w->eval[tk[i].data];
      if (!eb->len) continue;
      /* A round app's tasks have no rotating block. */
      strata_block *rot = tk[i].rotating >= 0 ? &w->rot[tk[i].rotating] : NULL;
      strata_task_view tv = {.pass = pass,
                             .subepoch = s,
                             .ids = tk[i],
                             .data = eb,
                             .train = &w->data[tk[i].data],
                             .resident = &w->res[tk[i].resident],
                             .rotating = rot,
                             .global = w->global,
                             .chunk = -1,
                             .clock = -1,
                             .row_lo = 0,
                             .row_hi = rot ? rot->nrows : 0};
      rc = w->app->evaluate(w->state, &tv, partials);
    }
  }
  return rc;
}

void strata__worker_stamp(const strata__worker *w, strata_worker_stats *st) {
  st->cpu_s = strata_cpu_seconds() - w->cpu_pass;
  st->span_s = strata_now() - w->t_pass;
}

int strata__clocks_per_pass(double wpc) {
  if (wpc >= 1) return 0;
  return (int)lround(1.0 / wpc);
}
