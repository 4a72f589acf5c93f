/*
 * The coordinator's side of a round run (internal to libstrata;
 * strata/round.h): a state machine that says what goes to the workers
 * next, so that the coordinator over MPI (which waits for pushes in its
 * event loop) and serial mode (whose one worker pushes at once, in the same
 * process) call the app in the same order:
 *
 *   pull(t - d), schedule_round(t), then the step {values of t - d, work
 *   of t} to every worker; at the pass's end the rounds in flight drain,
 *   each pulled in turn and its values sent in a step of their own, the
 *   last step flagged STRATA__ROUND_END_PASS.
 */
#ifndef STRATA_SCHEDULER_ROUNDS_H
#define STRATA_SCHEDULER_ROUNDS_H

#include <stdio.h>

#include "core/round.h"
#include "strata/app.h"
#include "strata/engine.h"

typedef struct strata__round_slot strata__round_slot;

typedef struct strata__rounds {
  /* Set by the caller before strata__rounds_open. */
  const strata_app *app;
  const void *cfg;
  strata_problem *prob;
  const strata_schedule *sched;
  int depth;
  strata_round_stats *stats; /* the result's, filled as rounds complete */
  FILE *trace; /* NULL, or where each round's record goes as it completes (a JSON line) */
  char trace_path[4096], trace_tmp[4200];

  /* Internal. */
  int P;
  uint64_t per_pass;
  int pass;
  int64_t first, end;  /* this pass's rounds: [first, end) */
  int64_t next;        /* the next round to schedule */
  int64_t pull_next;   /* the next round to pull */
  int converged;       /* schedule_round said so: no more rounds in the run */
  int ended;           /* the pass's last step has gone */
  int64_t awaited;     /* with STRATA__ROUNDS_WAIT: the round whose pushes are missing */
  strata__round_slot *slots; /* depth of them: round t in slots[t % depth] */
  strata_bytes apply;  /* the values of round apply_index, pulled and not yet sent */
  int64_t apply_index;
  strata_bytes *msg;   /* per worker: the step to send (strata__ROUNDS_SEND) */
  strata_round_part *parts;
  int64_t pass_rounds; /* rounds pulled in this pass */
  double pass_latency_s;
} strata__rounds;

enum { STRATA__ROUNDS_SEND = 1, STRATA__ROUNDS_WAIT, STRATA__ROUNDS_DONE };

/* --round-trace PATH: each round's record as a JSON line, written to a
 * temporary file that becomes PATH when the run ends well (close with
 * ok = 1) and is removed otherwise. 0 or STRATA_EIO. */
int strata__rounds_trace_open(strata__rounds *R, const char *path);
void strata__rounds_trace_close(strata__rounds *R, int ok);
/* Opens the state of a run resumed at pass start_pass (0: a fresh run). 0
 * or STRATA_ENOMEM. */
int strata__rounds_open(strata__rounds *R, int start_pass);
void strata__rounds_close(strata__rounds *R);
/* Begins pass `pass`: its rounds are pass * rounds_per_pass onward. */
void strata__rounds_begin_pass(strata__rounds *R, int pass);
/* What to do next: STRATA__ROUNDS_SEND (R->msg[w] goes to every worker w,
 * now), STRATA__ROUNDS_WAIT (the pushes of round R->awaited are missing:
 * take them with strata__rounds_take), STRATA__ROUNDS_DONE (the pass's
 * last step went out), or a negative code (an app callback's, with its
 * message). */
int strata__rounds_next(strata__rounds *R);
/* A push message from worker w (checked: its round must be in flight and
 * expect w's push, its parts must be w's blocks). 0 or a negative code. */
int strata__rounds_take(strata__rounds *R, int w, const void *msg, size_t len);
/* Whether every push of round t has come (or t is no longer in flight). */
int strata__rounds_complete(const strata__rounds *R, int64_t t);
/* The pass's rounds and the mean of their latencies, for its stats. */
void strata__rounds_pass_stats(const strata__rounds *R, int64_t *rounds, double *latency_s);

#endif
