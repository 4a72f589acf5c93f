/*
 * The worker (internal to libstrata): one pass loop that walks the static
 * schedule and drives a back-end (worker/backend.h) for the parameters it
 * does not own. The engine layer builds a worker from the coordinator's
 * set-up (strata__worker_main) or, in serial mode, in-process.
 */
#ifndef STRATA_WORKER_WORKER_H
#define STRATA_WORKER_WORKER_H

#include "comm/protocol.h"
#include "core/ckpt.h"
#include "strata/app.h"
#include "strata/engine.h"
#include "strata/transport.h"

typedef struct strata__backend strata__backend;

/* A worker's view of the run; in serial mode built in-process. */
typedef struct strata__worker {
  const strata__backend *backend; /* the run's mode's (the engine's choice) */
  const strata_app *app;
  const void *cfg;
  strata_setup setup;
  void *state;
  strata_transport *t; /* NULL in serial mode */
  const strata_engine_opts *opts;
  strata_schedule sched;
  int me;
  int has_eval;
  strata_block *data, *eval, *res, *rot; /* indexed by block id */
  strata_block *global; /* NULL, or the worker's copy of the global block */
  uint32_t value_len;   /* strata_problem.value_len */
  /* called with each pass's report, in pass order (serial: the aggregator) */
  int (*report)(void *ud, const pass_report *rep);
  void *report_ud;
  /* gives pass k's control before the pass starts, waiting for it if need
   * be (serial: from the aggregator); NULL: no stop, no control values */
  int (*control)(void *ud, int pass, pass_control *out);
  /* while control waits: the back-end's idle work (a table keeps serving,
   * for peers may need this worker's shard to reach the pass summed) */
  int (*waiting)(void *ctx);
  void *waiting_ctx;
  /* On a failure (rc), before the loop frees anything: ends the run on
   * every rank (the failure protocol of comm/protocol.h) and returns the
   * code the worker leaves with; NULL (serial mode): rc stands. Sets
   * `blocked` when the run could not be ended so: then the worker's
   * buffers are kept, for MPI may still write into them, and the caller
   * ends the job. */
  int (*settle)(void *ud, int rc);
  int blocked;
  int stopped; /* the loop ended early on a stop verdict (the run diverged) */
  int last_pass; /* the run's last pass: passes - 1, or earlier once it converged */
  int start_pass; /* the first pass to run: 0, or what a resumed checkpoint holds */
  /* This worker's part of a checkpoint is on disk: tells the coordinator
   * (serial: the aggregator). */
  int (*ckpt_done)(void *ud, const ckpt_note *n);
  /* the pass under way: its start, and the process CPU time then */
  double t_pass, cpu_pass;
  /* Round runs (strata/round.h; rounds_per_pass > 0): the coordinator's
   * next step for this worker in pass `pass` (*msg strata_malloc'd, the
   * caller frees it; *wait_s the time waited for it), and this worker's push
   * going to the coordinator. Over MPI a receive and a send; in serial
   * mode the in-process coordinator (scheduler/rounds.h). */
  uint64_t rounds_per_pass;
  int (*round_recv)(void *ud, int pass, void **msg, size_t *len, double *wait_s);
  int (*round_send)(void *ud, const void *msg, size_t len);
  void *round_ud;
} strata__worker;

/* Runs every pass on a prepared worker (a round run: strata__worker_rounds). */
int strata__worker_loop(strata__worker *w);
/* The pass loop of a round run: each pass, the coordinator's steps until
 * the pass's last (apply, push), then block objectives, evaluation, the
 * report and a checkpoint when one follows. */
int strata__worker_rounds(strata__worker *w);
/* Scores this worker's eval blocks against w->res, w->rot and w->global as
 * they are. */
int strata__worker_score(strata__worker *w, int pass, double *partials);
/* Sets the report's CPU time and span from the pass's start. */
void strata__worker_stamp(const strata__worker *w, strata_worker_stats *st);
/* Tasks of this worker per pass (a sufficient-factor app's clocks). */
int strata__tasks_per_pass(const strata__worker *w);
/* Whether a checkpoint follows pass `pass` (0-based). */
int strata__ckpt_due(const strata__worker *w, int pass);
/* Writes this worker's part of the checkpoint after pass `pass`: `add`
 * writes its entries (strata__ckpt_add_residents and the back-end's own),
 * then the part goes on disk and the coordinator is told. */
int strata__worker_ckpt(strata__worker *w, int pass,
                        int (*add)(void *ctx, strata__part_writer *pw), void *ctx);
/* The resident blocks this worker owns, resident block i from bufs[i]
 * (bufs NULL, or bufs[i] NULL: w->res[i] as it is). */
int strata__ckpt_add_residents(strata__worker *w, strata__part_writer *pw, void *const *bufs);
/* Clocks per pass for wpc < 1 (round(1/wpc)), 0 when a clock spans passes. */
int strata__clocks_per_pass(double wpc);
/* A straggler's delay of ms milliseconds, asleep or (spin) busy; returns
 * the seconds it took. */
double strata__straggle_ms(int ms, int spin);

/* --disrupt: a thread that, in each slot of slot_ms, burns the CPU with
 * probability prob. */
typedef struct strata__disrupt strata__disrupt;
int strata__disrupt_start(double prob, int slot_ms, uint64_t seed, strata__disrupt **out);
void strata__disrupt_stop(strata__disrupt *d);
/* Every mode but serial, ranks >= 1: with the mode's back-end and this
 * worker's set-up (strata_engine_setup), receive the blocks, loop, export, on a
 * transport that watches for the coordinator's notice (comm/watch.h). A
 * failure, its own or another rank's, ends in the failure protocol of
 * comm/protocol.h: the worker returns the run's code with an empty message
 * (rank 0 reports it). Only when that protocol fails does it set
 * *own_failure, keep its buffers (MPI may still write into them) and
 * return its own code and message: the caller must end the job. */
int strata__worker_main(const strata_app *app, void *cfg, const strata_engine_opts *opts,
                        const strata__backend *backend, const strata_setup *setup,
                        strata_transport *t, int *own_failure);
/* Frees the worker's blocks, schedule and app state. */
void strata__worker_close(strata__worker *w);

#endif
