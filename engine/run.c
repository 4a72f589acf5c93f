/*
 * The engine: strata_engine_run gives each rank its role (the coordinator,
 * a worker, or in serial mode both in one process) and strata_engine_finish
 * ends every rank alike. It is the one layer that knows both sides: it
 * asks the mode table (engine/modes.c) once for the facts of the run's
 * mode, hands the coordinator (scheduler/) those facts and the workers
 * (worker/) the mode's back-end.
 */
#include <string.h>
#include <sys/stat.h>

#include "comm/live.h"
#include "core/interrupt.h"
#include "core/wait.h"
#include "engine/engine.h"
#include "engine/status.h"
#include "scheduler/coordinator.h"
#include "strata/core.h"
#include "worker/worker.h"

/* The model directory may exist (files in it are replaced) or be creatable. */
static int check_model_dir(const char *dir) {
  struct stat st;
  if (stat(dir, &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return strata_err_set(STRATA_EIO, "%s: exists and is not a directory", dir);
    char probe[4096];
    if (snprintf(probe, sizeof probe, "%s/meta.json", dir) >= (int)sizeof probe)
      return strata_err_set(STRATA_EINVAL, "%s: path too long", dir);
    return strata_check_writable(probe);
  }
  return strata_check_writable(dir);
}

/* What every run checks before any work, so that a typo costs nothing. */
static int check_run(const strata_app *app, const strata_engine_opts *opts, const strata__facts *f,
                     int serial) {
  if (serial && f->all_rotating)
    return strata_err_set(STRATA_EUSAGE, "--mode %s needs workers over a transport, not a serial run",
                          strata_mode_name(opts->mode));
  if (app->n_partials > STRATA_MAX_PARTIALS || app->n_objectives > STRATA_MAX_OBJECTIVES ||
      app->n_controls > STRATA_MAX_CONTROLS)
    return strata_err_set(STRATA_EINVAL, "%s: at most %d partials, %d objectives and %d controls",
                          app->name, STRATA_MAX_PARTIALS, STRATA_MAX_OBJECTIVES, STRATA_MAX_CONTROLS);
  int rc = opts->metrics_out ? strata_check_writable(opts->metrics_out) : 0;
  if (!rc && opts->round_trace) rc = strata_check_writable(opts->round_trace);
  if (!rc && opts->model_out) rc = check_model_dir(opts->model_out);
  return rc;
}

int strata_engine_run(const strata_app *app, void *cfg, const strata_engine_opts *opts,
                      strata_transport *t, strata_run_result *result) {
  int serial = t == NULL;
  int P = serial ? 1 : t->size - 1;
  /* Every rank asks alike, so a mode out of range ends every rank here. */
  strata__facts facts;
  int frc = strata__mode_facts(opts->mode, opts, P, &facts);
  if (frc) return frc;
  /* The readers and load check their sizes against the run's limit too. */
  strata_mem_set_limit(opts->mem_limit);
  {
    /* Every rank watches from the start (comm/live.h): for a lost rank,
     * and for SIGINT and SIGTERM (core/interrupt.h), which end the run on
     * every rank from there; a serial run for the signals only. */
    strata__live_conf lc = {.passes = opts->passes, .stall_timeout = opts->stall_timeout,
                            .address = opts->watch_address, .on_lost = opts->on_lost,
                            .ud = opts->on_lost_ud};
    int rc = serial ? strata__live_start_solo(&lc) : strata__live_start(t, TAG_LIVE, &lc);
    if (rc) {
      result->peers_blocked = !serial;
      return rc;
    }
    /* Unwatched, nothing would act on a signal: it gets its default action. */
    if (!strata__live_watching()) strata__interrupt_release();
  }
  if (!serial && t->rank > 0) {
    int own = 0;
    strata_setup setup;
    strata_engine_setup(app, opts, P, t->rank - 1, &setup);
    int rc = strata__worker_main(app, cfg, opts, facts.backend, &setup, t, &own);
    result->peers_blocked = own;
    /* After a failure no verdict follows (strata_engine_finish): the run
     * is over for this rank. */
    if (rc && !own) strata__live_stop();
    return rc;
  }
  strata__run run = {.app = app,
                     .cfg = cfg,
                     .opts = opts,
                     .facts = &facts,
                     .check = strata__mode_check,
                     .check_keys = strata__metrics_check_keys};
  strata_engine_setup(app, opts, P, -1, &run.setup);
  double cpu0 = strata_cpu_seconds(), wall0 = strata_now();
  int rc = check_run(app, opts, &facts, serial);
  /* The live status listens before any work: a port in use costs nothing. */
  if (!rc && opts->status_addr) {
    rc = strata__status_open(opts->status_addr, app, opts, P);
    if (!rc && opts->on_status) opts->on_status(opts->on_status_ud, strata__status_url());
    run.view = strata__status_view();
  }
  /* Facts the mode makes before any work (sfb: its topology). */
  if (!rc) rc = strata__mode_prepare(opts, P, result);
  if (rc) {
    if (!serial) strata__coordinator_fail(t, rc);
  } else {
    rc = serial ? strata__serial_run(&run, result) : strata__coordinator_run(&run, t, result);
  }
  if (!serial) result->watch_refused = strata__live_refused();
  /* Without the workers through, no verdict follows: the run is over (a
   * serial run's ends in strata_engine_finish when it succeeded). */
  if (serial ? rc != 0 : !result->workers_done && !result->peers_blocked) strata__live_stop();
  result->coordinator_cpu_s = strata_cpu_seconds() - cpu0;
  result->coordinator_wall_s = strata_now() - wall0;
  strata__status_end(result, rc);
  /* The result keeps the problem for describe() and the caller; training
   * data is no longer needed. */
  strata_problem *p = &result->problem;
  for (int i = 0; p->data && i < p->n_data; i++) {
    strata_free(p->data[i].buf);
    p->data[i].buf = NULL;
  }
  return rc;
}

/* A worker's wait in strata_engine_finish: for the verdict (rq[0]), or
 * for the notice (rq[1]) while it has not been answered. */
typedef struct verdict_ctx {
  strata_transport *t;
  strata_req rq[2];
  int answered;
} verdict_ctx;

static int poll_verdict(void *ctx, int *done, int *progressed) {
  verdict_ctx *c = ctx;
  int all = 0, had = (c->rq[0].h != 0) + (c->rq[1].h != 0);
  int rc = c->t->test_all(c->t->impl, c->rq, 2, &all);
  *progressed = (c->rq[0].h != 0) + (c->rq[1].h != 0) < had;
  *done = !c->rq[0].h || (!c->rq[1].h && !c->answered);
  return rc;
}

void strata_run_result_close(strata_run_result *r) {
  strata__status_close(0);
  strata_free(r->per_pass);
  strata_free(r->per_pass_worker);
  strata_free(r->worker_total);
  strata__mode_release(r);
  strata_problem_close(&r->problem);
  memset(r, 0, sizeof *r);
}

void strata_engine_status_close(const strata_run_result *r, int rc) {
  if (rc) strata__status_end(r, rc);
  strata__status_close(strata__status_linger());
}

int strata_engine_finish(strata_transport *t, int rc) {
  if (!t) {
    strata__live_stop(); /* the serial run's watch for signals */
    return rc;
  }
  int32_t code = rc;
  if (t->rank == 0) {
    /* One small message per worker, each waited for: nothing to allocate,
     * so even an out-of-memory rank 0 can still release its workers. */
    int err = 0;
    for (int w = 1; w < t->size && !err; w++) {
      strata_req rq = {0};
      err = t->isend(t->impl, &code, sizeof code, w, TAG_FINAL, &rq);
      if (!err) err = strata_comm_wait_all_idle(t, &rq, 1);
    }
    if (!err) strata__live_stop();
    return rc ? rc : err;
  }
  /* A worker done with its passes may still be called off (another
   * worker failed late): it answers the notice, then takes the verdict
   * that follows (comm/protocol.h, "Failure"). */
  int32_t notice = 0;
  verdict_ctx c = {t, {{0}, {0}}, 0};
  int err = t->irecv(t->impl, &code, sizeof code, 0, TAG_FINAL, &c.rq[0]);
  if (!err) err = t->irecv(t->impl, &notice, sizeof notice, 0, TAG_ABORT, &c.rq[1]);
  strata__wait_conf wc = {.ceiling = STRATA__WAIT_IDLE};
  while (!err && c.rq[0].h) {
    if ((err = strata__wait(poll_verdict, &c, &wc))) break;
    if (!c.rq[1].h && !c.answered) {
      c.answered = 1;
      err = strata__fail_send(t, t->rank - 1, 0, NULL, strata_now() + STRATA__VERDICT_S);
    }
  }
  /* Neither receive may outlive this frame. */
  int settled = strata__comm_cancel(t, c.rq, 2, strata_now() + 1);
  if (!err) strata__live_stop();
  if (err) return err;
  if (settled) return settled;
  /* The coordinator reports its own failure; this rank only follows. */
  if (code) strata_err_clear();
  return code;
}
