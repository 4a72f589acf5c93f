/*
 * The one way strata waits without spinning (internal to libstrata).
 *
 * A libev loop owned by the calling thread wakes on a timer, calls the
 * caller's poll function, and backs off while nothing moves: the sleep
 * starts at STRATA__WAIT_MIN, doubles after every poll that made no
 * progress up to the call's ceiling, and drops back to the minimum after
 * one that did. The loop is created once per thread, so polling allocates
 * nothing. Open MPI's blocking calls would poll the network in a tight
 * loop and take a core from the workers; this never does.
 */
#ifndef STRATA_CORE_WAIT_H
#define STRATA_CORE_WAIT_H

#include <stdatomic.h>
#include <stdint.h>

#define STRATA__WAIT_MIN 20e-6
/* Ceilings, by how soon the waiter must notice: a rank with nothing to do
 * until others report (the coordinator between reports, set-up, export)
 * wakes at least every 10 ms, which keeps its CPU near nothing; a worker
 * held up by peers (a table read waiting for fresh rows) every 1 ms; a wait
 * whose end every worker leaves together (the start of the passes) every
 * 100 us, so that no worker starts a pass late by more than that. */
#define STRATA__WAIT_IDLE 10e-3
#define STRATA__WAIT_PEERS 1e-3
#define STRATA__WAIT_PROMPT 100e-6
/* A round run's steps and pushes (strata/round.h): the round trip is the
 * run's critical path, so its waits poll at least this often. */
#define STRATA__WAIT_ROUND 50e-6
/* ... and with a doorbell (comm/bell.h), which wakes it at once, the timer
 * is only the fallback. */
#define STRATA__WAIT_BELL 2e-3

/* Polls once: 0 or a negative code; *done = 1 ends the wait; *progressed = 1
 * when something moved (the next sleep is the shortest again). */
typedef int (*strata__poll_fn)(void *ctx, int *done, int *progressed);

typedef struct strata__wait_conf {
  double ceiling;  /* longest sleep between polls, seconds */
  double until;    /* > 0: also end then (strata_now() time), never sleeping past it */
  int signals;     /* 1: a SIGINT or SIGTERM that core/interrupt.h noted ends
                      the wait with STRATA_EINTR, within one sleep (a wait
                      after the run: --status-linger; during a run the
                      liveness watch acts on signals) */
  const char *who; /* names the waiter in the interrupt message */
  int wake_fd;     /* > 0: a descriptor (a doorbell, comm/bell.h) whose becoming
                      readable ends the current sleep: it is emptied and poll runs
                      at once, and again while it makes progress (a message may
                      take two calls of the progress engine to complete) */
} strata__wait_conf;

/* Polls at once, then on the back-off timer until poll says done, the
 * deadline passes, poll fails, or (signals) a signal was noted. */
int strata__wait(strata__poll_fn poll, void *ctx, const strata__wait_conf *conf);

/* What this process is doing, as the liveness watch (comm/live.h) reports
 * it to the coordinator from another thread: a count of steps of work done
 * (a chunk computed, a pass ended) and how many waits for other ranks are
 * under way (every strata__wait and spinning transport wait counts). A
 * process whose count stands still while it waits for nobody is stuck. */
extern _Atomic uint64_t strata__steps;
extern _Atomic int strata__waiting;

static inline void strata__step(void) {
  atomic_fetch_add_explicit(&strata__steps, 1, memory_order_relaxed);
}
static inline void strata__wait_enter(void) {
  atomic_fetch_add_explicit(&strata__waiting, 1, memory_order_relaxed);
}
static inline void strata__wait_leave(void) {
  atomic_fetch_sub_explicit(&strata__waiting, 1, memory_order_relaxed);
}

#endif
