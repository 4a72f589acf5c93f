/*
 * The worker's one pass loop: walks the static schedule task by task and
 * chunk by chunk, asks the mode's back-end for each chunk's rows, runs the
 * app's compute on them and hands them back. What differs between the ring
 * and the tables lives behind worker/backend.h.
 */
#include <string.h>

#include "comm/live.h"
#include "core/sf.h"
#include "core/wait.h"
#include "strata/core.h"
#include "worker/backend.h"

/* Pass `pass`'s verdict (w->control, or none): *stop = 1 when the run ends
 * before it; ctl gets its control values; a last pass (the run converged)
 * becomes w->last_pass. */
static int pass_verdict(strata__worker *w, int pass, int *stop, double *ctl) {
  pass_control v;
  memset(&v, 0, sizeof v);
  int rc = w->control ? w->control(w->report_ud, pass, &v) : 0;
  *stop = v.stop;
  if (v.last) w->last_pass = pass;
  memcpy(ctl, v.ctl, sizeof v.ctl);
  return rc;
}

/* A sufficient-factor app's clock on a back-end that does not take the
 * factors itself: they are applied to the task's rows here, in emission
 * order, then the app's end-of-clock step runs with this worker's share
 * (1/P: each worker's change is one of P that add up; strata/sf.h). */
static int apply_factors(strata__worker *w, const strata_task_view *tv, int64_t clock) {
  const strata_sf_ops *sf = w->app->sf;
  strata_sf_factors *f = tv->factors;
  strata__sf_apply_all(f->buf, f->len, tv->rotating, sf->apply, w->state);
  if (!sf->clock_end) return 0;
  strata_sf_clock ck = {.pass = tv->pass, .clock = clock, .share = 1.0 / w->sched.n_workers};
  return sf->clock_end(w->state, tv->rotating, &ck);
}

/* One pass's tasks, chunk by chunk. A sufficient-factor app's task is one
 * clock: its factors go into fs, which the back-end takes (takes_factors)
 * or which are applied here. */
static int run_pass(strata__worker *w, const strata__backend *b, void *be, int pass,
                    const double *ctl, strata_sf_factors *fs, int64_t *clock, pass_report *rep) {
  strata_worker_stats *st = &rep->stats;
  int rc = 0, depth = w->setup.depth;
  for (int s = 0; s < w->sched.n_subepochs && !rc; s++) {
    if ((rc = b->begin_subepoch(be, pass, s, st))) break;
    int n;
    const strata_task *tk = strata_schedule_tasks(&w->sched, s, w->me, &n);
    for (int i = 0; i < n && !rc; i++) {
      strata_task_view tv = {.pass = pass,
                             .subepoch = s,
                             .ids = tk[i],
                             .data = &w->data[tk[i].data],
                             .resident = &w->res[tk[i].resident],
                             .rotating = &w->rot[tk[i].rotating],
                             .global = w->global,
                             .control = w->app->n_controls ? ctl : NULL,
                             .factors = fs};
      for (int c = 0; c < depth && !rc; c++) {
        /* Empty chunks (row_lo == row_hi) are computed too, in every mode:
         * the app may have work for them (global rows) and the table modes
         * count them toward clock boundaries. */
        tv.chunk = c;
        strata_chunk_rows(tv.rotating->nrows, depth, c, &tv.row_lo, &tv.row_hi);
        tv.clock = fs ? *clock : pass;
        if (fs && (rc = strata__sf_reset(fs, *clock, w->me))) break;
        if ((rc = b->acquire(be, &tv, st))) break;
        double t0 = strata_now();
        rc = w->app->compute(w->state, &tv, rep->partials);
        double t1 = strata_now();
        if (!rc && fs && !b->mode.takes_factors) rc = apply_factors(w, &tv, *clock);
        double t2 = strata_now();
        st->compute_s += t2 - t0;
        st->apply_s += t2 - t1;
        if (!rc) rc = b->release(be, &tv, st);
        if (fs) ++*clock;
        strata__step();
      }
    }
    if (!rc) rc = b->end_subepoch(be, pass, s, st);
  }
  return rc;
}

int strata__worker_loop(strata__worker *w) {
  w->last_pass = w->setup.passes - 1;
  if (w->rounds_per_pass) return strata__worker_rounds(w);
  const strata__backend *b = w->backend;
  void *be = NULL;
  int rc = b->open(w, &be);
  if (rc) {
    if (w->settle) rc = w->settle(w->report_ud, rc);
    if (be && !w->blocked) b->free(be);
    return rc;
  }
  w->waiting = b->idle;
  w->waiting_ctx = be;
  /* A sufficient-factor app's factors, for a matrix of the rotating
   * block's shape (D rows of J floats); clocks count its tasks. */
  strata_sf_factors fs;
  int64_t clock = (int64_t)w->start_pass * strata__tasks_per_pass(w);
  if (w->app->sf) strata__sf_init(&fs, w->rot[0].row_bytes / sizeof(float), w->rot[0].nrows);
  double ctl[STRATA_MAX_CONTROLS];
  for (int pass = w->start_pass; pass <= w->last_pass && !rc; pass++) {
    pass_report rep;
    strata__live_pass(pass);
    strata__report_begin(&rep, pass, w->me);
    strata_partials_init(w->app, rep.partials);
    strata_worker_stats *st = &rep.stats;
    w->t_pass = strata_now();
    w->cpu_pass = strata_cpu_seconds();
    if ((rc = b->begin_pass(be, pass, st))) break;
    int stop = 0;
    if ((rc = pass_verdict(w, pass, &stop, ctl))) break;
    if (stop) {
      w->stopped = 1;
      break;
    }
    double verdict_s = strata_now() - w->t_pass;
    if ((rc = run_pass(w, b, be, pass, ctl, w->app->sf ? &fs : NULL, &clock, &rep))) break;
    if ((rc = b->end_pass(be, pass, st))) break;
    st->time_s = strata_now() - w->t_pass;
    b->stats(be, st);
    st->wait_s += verdict_s;
    rc = b->evaluate(be, pass, &rep);
    strata__step();
    if (!rc && strata__ckpt_due(w, pass)) rc = b->checkpoint(be, pass);
  }
  strata__live_pass(w->setup.passes);
  if (!rc) rc = b->close(be, w->stopped);
  w->waiting = NULL;
  w->waiting_ctx = NULL;
  /* A failure ends the run everywhere before the back-end lets go of its
   * buffers: peers may still be sending into them until then. */
  if (rc && w->settle) rc = w->settle(w->report_ud, rc);
  if (!w->blocked) b->free(be);
  if (w->app->sf) strata__sf_close(&fs);
  return rc;
}
