/*
 * Serial mode: the same load, schedule and worker loop as a scheduled run,
 * in one process; the blocks move from the problem into the worker and
 * back, never copied.
 */
#include <string.h>

#include "engine/engine.h"
#include "scheduler/aggregate.h"
#include "scheduler/ckpt.h"
#include "scheduler/rounds.h"
#include "strata/core.h"
#include "worker/worker.h"

/* The worker's part of a checkpoint is on disk: the manifest follows. */
static int serial_ckpt_done(void *ud, const ckpt_note *n) {
  strata__agg *agg = ud;
  return strata__ckpt_note(agg->summed_ud, agg, n);
}

/* A round run in one process: the worker asks the coordinator's state
 * machine for its next step and hands it its push at once, so every step
 * the machine makes is ready when asked for. */
typedef struct serial_rounds {
  strata__rounds R;
  strata__agg *agg;
} serial_rounds;

static int serial_round_recv(void *ud, int pass, void **msg, size_t *len, double *wait_s) {
  serial_rounds *S = ud;
  *wait_s = 0;
  if (S->R.ended) strata__rounds_begin_pass(&S->R, pass);
  int a = strata__rounds_next(&S->R);
  if (a < 0) return a;
  if (a != STRATA__ROUNDS_SEND)
    return strata_err_set(STRATA_EINVAL, "serial: round %lld has no partial",
                          (long long)S->R.awaited);
  *len = S->R.msg[0].len;
  if (!(*msg = strata_malloc(*len ? *len : 1)))
    return strata_err_set(STRATA_ENOMEM, "serial: out of memory for a round step");
  memcpy(*msg, S->R.msg[0].buf, *len);
  return 0;
}

static int serial_round_send(void *ud, const void *msg, size_t len) {
  serial_rounds *S = ud;
  return strata__rounds_take(&S->R, 0, msg, len);
}

/* The pass's report, after its rounds: their figures go with it. */
static int serial_round_report(void *ud, const pass_report *rep) {
  serial_rounds *S = ud;
  int rc = strata__agg_reserve(S->agg, rep->pass + 1);
  if (rc) return rc;
  strata_pass_stats *ps = &S->agg->res->per_pass[rep->pass];
  strata__rounds_pass_stats(&S->R, &ps->rounds, &ps->round_latency_s);
  if (S->R.converged) strata__agg_end(S->agg, rep->pass, "tolerance");
  return strata__agg_report(S->agg, rep);
}

static int serial_round_ckpt_done(void *ud, const ckpt_note *n) {
  serial_rounds *S = ud;
  return serial_ckpt_done(S->agg, n);
}

static int serial_round_control(void *ud, int pass, pass_control *out) {
  serial_rounds *S = ud;
  return strata__agg_control(S->agg, pass, out);
}

int strata__serial_run(const strata__run *run, strata_run_result *result) {
  const strata_app *app = run->app;
  const strata_engine_opts *opts = run->opts;
  strata_problem *p = &result->problem;
  strata_schedule sched;
  memset(&sched, 0, sizeof sched);
  strata__ckpt_run ck;
  memset(&ck, 0, sizeof ck);
  strata__agg agg = {.app = app,
                     .cfg = run->cfg,
                     .opts = opts,
                     .setup = run->setup,
                     .prob = p,
                     .res = result,
                     .facts = run->facts,
                     .lag = run->facts->lag,
                     .summed = strata__ckpt_summed,
                     .summed_ud = &ck,
                     .view = run->view};
  strata__worker w;
  memset(&w, 0, sizeof w);
  strata__disrupt *dis = NULL;
  serial_rounds sr;
  memset(&sr, 0, sizeof sr);
  double t0 = strata_now();
  int rc = strata__agg_open(&agg);
  if (!rc) rc = strata__ckpt_open(&ck, app, opts, &run->setup, run->facts);
  if (!rc) rc = strata__coordinator_load(run, p, &sched);
  if (!rc) rc = strata__ckpt_loaded(&ck, p, &sched, &agg);
  if (rc) goto done;
  result->load_s = strata_now() - t0;
  w.backend = run->facts->backend;
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
  w.value_len = p->value_len;
  if (p->rounds_per_pass) {
    /* The coordinator sums every pass before the next one's first round. */
    agg.lag = 1;
    result->rounds_per_pass = p->rounds_per_pass;
    sr.agg = &agg;
    sr.R = (strata__rounds){.app = app, .cfg = run->cfg, .prob = p, .sched = &sched,
                            .depth = opts->round_depth, .stats = &result->rounds};
    if ((rc = strata__rounds_open(&sr.R, ck.start_pass)) ||
        (rc = strata__rounds_trace_open(&sr.R, opts->round_trace)))
      goto done;
    w.rounds_per_pass = p->rounds_per_pass;
    w.round_recv = serial_round_recv;
    w.round_send = serial_round_send;
    w.round_ud = &sr;
    w.report = serial_round_report;
    w.control = serial_round_control;
    w.ckpt_done = serial_round_ckpt_done;
    w.report_ud = &sr;
  }
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
  if (sr.R.app) {
    strata__rounds_trace_close(&sr.R, !rc);
    strata__rounds_close(&sr.R);
  }
  strata_schedule_close(&sched);
  strata__agg_close(&agg);
  strata__ckpt_close(&ck);
  return rc;
}
