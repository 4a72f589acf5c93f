/*
 * Metric aggregation (internal to libstrata): folds the workers' pass
 * reports into a strata_run_result, checks each summed pass for divergence
 * and decides the verdicts (stop, control values) of later passes. The
 * coordinator feeds it reports from the wire; serial mode feeds it from
 * the in-process worker.
 */
#ifndef STRATA_SCHEDULER_AGGREGATE_H
#define STRATA_SCHEDULER_AGGREGATE_H

#include "comm/protocol.h"
#include "core/mode.h"
#include "scheduler/view.h"
#include "strata/engine.h"

typedef struct strata__agg {
  /* Set by the caller before strata__agg_open. */
  const strata_app *app;
  const void *cfg;
  const strata_engine_opts *opts;
  strata_setup setup;
  const strata_problem *prob; /* objectives and n_examples read it */
  strata_run_result *res;
  const strata__facts *facts; /* the mode's: how its own figures add up */
  int lag; /* verdict lag L: pass k's verdict once pass k - L is summed */
  /* Called with every verdict as it is decided (the coordinator sends it
   * to every worker); NULL: kept for strata__agg_control only. */
  int (*publish)(void *ud, const pass_control *v);
  void *publish_ud;
  /* Called once pass `pass` is summed and the verdicts that follow from it
   * are decided (a checkpoint may follow it); NULL: none. */
  int (*summed)(void *ud, struct strata__agg *agg, int pass);
  void *summed_ud;
  const strata__view *view; /* told of every summed pass; NULL: none */

  /* Internal. */
  double t_train0, cpu_train0;
  double last_progress;
  double partials[STRATA_MAX_PARTIALS];
  double view_partials[STRATA_MAX_PARTIALS];
  int reports_in; /* reports received for the pass being assembled */
  int unscored;   /* one of them says the pass was not scored */
  pass_control *ctl; /* ctl[k] for every pass k decided so far (n_decided) */
  int n_decided;
  /* Passes each per-pass array has room for (strata__agg_reserve). */
  size_t cap_pass, cap_worker, cap_ctl, cap_obj;
  int run_passes;    /* the passes the workers run (all, or to the stop) */
  const char *stop_reason; /* why run_passes < passes (strata__agg_end); NULL: none */
  int diverged_pass; /* 1-based, 0 none */
  char diverged[256];
  double *obj_hist;  /* STRATA_MAX_OBJECTIVES per pass, for pass_control */
  /* The rise check of app->falling: the passes of obj_hist folded into it
   * (a resumed run folds the checkpoint's passes first), and per objective
   * its lowest value so far (rise_best_pass -1: none yet) and the passes
   * in a row above the limit since. */
  int rise_seen;
  double rise_best[STRATA_MAX_OBJECTIVES];
  int rise_best_pass[STRATA_MAX_OBJECTIVES];
  int rise_over[STRATA_MAX_OBJECTIVES];
  /* A resumed run: its first pass, and the training time the passes
   * before it took. */
  int start_pass;
  double wall_before, cpu_before;
} strata__agg;

/* Sets up the result (its per-worker totals; the per-pass arrays start
 * small and grow with the passes done). */
int strata__agg_open(strata__agg *c);
/* Room for passes [0, n) (n at most the run's passes) in the per-pass
 * arrays: the result's per_pass and per_pass_worker, ctl and obj_hist,
 * the new entries zeroed (per_pass drift -1). They grow geometrically, so
 * rank 0's memory follows the passes done, not --passes. The arrays may
 * move: a pointer into them is good until the next call that grows them
 * (strata__agg_report makes room for its pass and the verdict that follows
 * on entry). Returns 0, or STRATA_ENOMEM with a message naming the pass
 * (the arrays as they were). */
int strata__agg_reserve(strata__agg *c, int n);
/* Training starts now (wall and CPU clocks of the result). */
void strata__agg_start(strata__agg *c);
/* The verdicts of the first L passes, which follow no summed pass (a
 * resumed run: the verdicts of its first L passes, decided before). */
int strata__agg_decide_first(strata__agg *c);
/* Folds one worker's report (ud: the aggregator); logs a completed pass
 * (rank 0's progress line), checks it for divergence (non-finite partials,
 * an objective of app->falling risen past its limit) and decides the
 * verdict that follows from it. */
int strata__agg_report(void *ud, const pass_report *rep);
/* Makes pass `last` the run's last (when that is earlier than it was): its
 * verdict, when still to be decided, says so (pass_control.last), and none
 * is decided after it. reason is the run's stop_reason ("tolerance"). */
void strata__agg_end(strata__agg *c, int last, const char *reason);
/* Pass `pass`'s verdict, decided already (serial mode's worker control). */
int strata__agg_control(void *ud, int pass, pass_control *out);
/* After the last report: STRATA_EDIVERGED with the message when a pass
 * diverged, else fills the result's summary figures. */
int strata__agg_finish(strata__agg *c);
void strata__agg_close(strata__agg *c);
/* The run so far: *out is a shallow copy of the result (sharing its
 * arrays) whose summary figures (time per pass, rates, wall and CPU time,
 * objectives) cover the first `done` passes, as strata__agg_finish would
 * compute them after that many. */
void strata__agg_snapshot(const strata__agg *c, int done, strata_run_result *out);

#endif
