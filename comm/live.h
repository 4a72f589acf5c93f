/*
 * comm/live.h - noticing a lost rank (internal to libstrata).
 *
 * Open MPI 4 cannot go on past a dead process: MPI_Finalize would wait for
 * it, and a receive from it never completes. Without help, the job ends
 * when mpirun notices the death and kills the other ranks (a second or two
 * later, with its own messages and no word of which worker or pass), and a
 * rank that stops without dying (SIGSTOP, a hung host, a livelock) leaves
 * the job waiting forever. So every rank keeps its own TCP connection to the
 * coordinator, watched by a thread with its own libev loop, apart from MPI
 * and from the thread that computes:
 *  - a process that dies is noticed at once: its kernel closes the
 *    connection (a deliberate end says BYE first);
 *  - both sides send a heartbeat every STRATA__LIVE_BEAT seconds; a worker's
 *    carries its pass, its count of steps of work (core/wait.h) and whether
 *    it waits for other ranks. A rank whose heartbeats stop for the stall
 *    timeout is stalled (stopped, or its host hangs); a worker whose steps
 *    stand still for that long while it waits for nobody is stuck
 *    (livelocked, or hung in its own code);
 *  - the rank that notices says LOST to the ranks it watches (they end
 *    quietly), reports through on_lost (the coordinator, or worker 0 when
 *    the coordinator is the one lost, reports: the message names the lost
 *    rank and the pass), and ends its process with exit code 1 at once.
 * The stall timeout is --stall-timeout, or by default the larger of
 * STRATA__LIVE_FLOOR and STRATA__LIVE_FACTOR times the slowest pass seen;
 * the progress check starts once a pass has ended (the first pass may be
 * slow for reasons of its own) unless the timeout was given.
 *
 * Only the watch thread touches its sockets; the main thread talks to it
 * through atomics and an ev_async. The watch never calls MPI: rank 0 sends
 * its address to the workers over the transport in strata__live_start.
 */
#ifndef STRATA_COMM_LIVE_H
#define STRATA_COMM_LIVE_H

#include "strata/transport.h"

#define STRATA__LIVE_BEAT 0.2
#define STRATA__LIVE_FLOOR 5.0
#define STRATA__LIVE_FACTOR 10.0

typedef struct strata__live_conf {
  int passes;           /* the run's passes, for messages */
  double stall_timeout; /* > 0: fixed; 0: the default from pass times */
  void (*on_lost)(void *ud, const char *msg, int report);
  void *ud;
} strata__live_conf;

/*
 * Starts this rank's watch; every rank of a run over MPI calls it first
 * (rank 0 sends its address to every worker on t, tag `tag`). Returns 0,
 * also when the watch could not be set up (a warning is logged and the run
 * goes on unwatched), or the transport's error.
 */
int strata__live_start(strata_transport *t, int tag, const strata__live_conf *conf);
/* Ends the watch on purpose: the others hear BYE, so the close that
 * follows is no loss. A no-op without a watch. */
void strata__live_stop(void);
/* Ends the watch and tells the others to end too (LOST, quietly): this
 * rank is about to end the job itself (MPI_Abort). */
void strata__live_abandon(void);

/* The pass the computing thread is in (0-based), for the heartbeats. */
void strata__live_pass(int pass);
/* Rank 0: the next pass is summed; it took `seconds` (the default timeout
 * follows the slowest). */
void strata__live_pass_time(double seconds);
/* Rank 0: the last complete checkpoint, named in a loss's message. */
void strata__live_checkpoint(const char *dir, int passes);

#endif
