/*
 * Serial mode: the same load, schedule and worker loop as a scheduled run,
 * in one process; the blocks move from the problem into the worker and
 * back, never copied.
 */
#include <string.h>

#include "engine/engine.h"
#include "scheduler/aggregate.h"
#include "scheduler/ckpt.h"
#include "strata/core.h"
#include "worker/worker.h"

/* The worker's part of a checkpoint is on disk: the manifest follows. */
static int serial_ckpt_done(void *ud, const ckpt_note *n) {
  strata__agg *agg = ud;
  return strata__ckpt_note(agg->summed_ud, agg, n);
}

int strata__serial_run(const strata__run *run, strata_run_result *result) {
  const strata_app *app = run->app;
  const strata_engine_opts *opts = run->opts;
  strata_problem *p = &result->problem;
  strata_schedule sched;
  memset(&sched, 0, sizeof sched);
  strata__ckpt_run ck;
  memset(&ck, 0, sizeof ck);
  strata__agg agg = {.app = app, .cfg = run->cfg, .opts = opts, .setup = run->setup,
                     .prob = p, .res = result, .lag = run->lag,
                     .summed = strata__ckpt_summed, .summed_ud = &ck, .view = run->view};
  strata__worker w;
  memset(&w, 0, sizeof w);
  strata__disrupt *dis = NULL;
  double t0 = strata_now();
  int rc = strata__agg_open(&agg);
  if (!rc) rc = strata__ckpt_open(&ck, app, opts, &run->setup, 0);
  if (!rc) rc = strata__coordinator_load(run, p, &sched);
  if (!rc) rc = strata__ckpt_loaded(&ck, p, &sched, &agg);
  if (rc) goto done;
  result->load_s = strata_now() - t0;
  w.app = app;
  w.cfg = run->cfg;
  w.setup = run->setup;
  w.setup.worker = 0;
  w.me = 0;
  w.has_eval = p->eval != NULL;
  w.report = strata__agg_report;
  w.ckpt_done = serial_ckpt_done;
  w.report_ud = &agg;
  w.start_pass = ck.start_pass;
  w.control = strata__agg_control;
  w.opts = opts;
  w.sched = sched;
  w.data = p->data;
  w.eval = p->eval;
  w.res = p->resident;
  w.rot = p->rotating;
  w.global = p->global.len ? &p->global : NULL;
  rc = app->worker_init(run->cfg, &w.setup, p->meta, p->meta_len, &w.state);
  strata__agg_start(&agg);
  if (!rc && run->view) run->view->phase(run->view->ud, STRATA__PHASE_RUNNING, &agg);
  if (!rc && opts->disrupt_prob > 0)
    rc = strata__disrupt_start(opts->disrupt_prob, opts->disrupt_slot_ms, opts->seed * 1000003u, &dis);
  if (!rc) rc = strata__agg_decide_first(&agg);
  if (!rc) rc = strata__worker_loop(&w);
  strata__disrupt_stop(dis);
  if (w.state && app->worker_free) app->worker_free(w.state);
  if (!rc) rc = strata__agg_finish(&agg);
  if (!rc) rc = strata__ckpt_finish(&ck);
  if (!rc && opts->model_out && app->export_model)
    rc = app->export_model(run->cfg, &run->setup, p, opts->model_out);
done:
  strata_schedule_close(&sched);
  strata__agg_close(&agg);
  strata__ckpt_close(&ck);
  return rc;
}
