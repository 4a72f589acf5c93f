/*
 * The coordinator (rank 0; internal to libstrata): loads the problem,
 * computes the schedule, ships each worker its blocks, then aggregates the
 * workers' reports and decides their verdicts. The engine layer calls it;
 * it knows nothing of the workers' code, only the wire protocol and the
 * facts of the run's mode the engine hands it here.
 */
#ifndef STRATA_SCHEDULER_COORDINATOR_H
#define STRATA_SCHEDULER_COORDINATOR_H

#include "core/mode.h"
#include "scheduler/view.h"
#include "strata/engine.h"

/* One run as the engine resolved it. */
typedef struct strata__run {
  const strata_app *app;
  const void *cfg;
  const strata_engine_opts *opts;
  strata_setup setup;
  const strata__facts *facts; /* the mode's */
  /* The mode's check of the problem: before loading (p and s NULL) and
   * after scheduling; NULL: none. */
  int (*check)(const strata_engine_opts *o, const strata_app *app, const strata_setup *setup,
               const strata_problem *p, const strata_schedule *s);
  const strata__view *view; /* NULL: nobody follows the run */
  /* After loading: refuses an app whose keys would collide in the metrics
   * (the engine's strata__metrics_check_keys); NULL: none. */
  int (*check_keys)(const strata_app *app, const void *cfg, const strata_problem *p);
} strata__run;

/* Loads the problem and its schedule, checked (also serial mode's load). */
int strata__coordinator_load(const strata__run *run, strata_problem *prob, strata_schedule *sched);
/* The whole run on rank 0: result gets the metrics and, in every case, the
 * problem (its data blocks freed by the caller). */
int strata__coordinator_run(const strata__run *run, strata_transport *t, strata_run_result *result);
/* Tells every worker the run failed before it began, so all ranks end. */
void strata__coordinator_fail(strata_transport *t, int code);

#endif
