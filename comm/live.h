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
 *    rank and the pass), and ends its process with exit code 1 at once;
 *  - SIGINT and SIGTERM (core/interrupt.h) come to this thread too, on any
 *    rank: an interrupted worker says INT to rank 0, which reports it (or
 *    its own signal: "rank 0 (the coordinator) was interrupted by SIGTERM
 *    during pass 4 of 20") and says INT to the others; every rank ends its
 *    process with exit code 128 + the signal, as after a loss. One rank
 *    reports however many got the signal (mpirun signals every rank).
 * The stall timeout is --stall-timeout, or by default the larger of
 * STRATA__LIVE_FLOOR and STRATA__LIVE_FACTOR times the slowest pass seen;
 * the progress check starts once a pass has ended (the first pass may be
 * slow for reasons of its own) unless the timeout was given.
 *
 * Only the watch thread touches its sockets; the main thread talks to it
 * through atomics and an ev_async. The watch never calls MPI: the ranks
 * exchange what it needs over the transport in strata__live_start.
 *
 * The watch belongs to the job (docs/failure.md, "Threat model"). Before
 * any socket opens, every worker tells rank 0 its host and addresses
 * (strata__live_where), and rank 0 sends every worker the one address it
 * listens on and a secret of STRATA__LIVE_SECRET random bytes made for
 * this run (strata__live_addr), both over the transport. Rank 0 listens on
 * 127.0.0.1 when every rank is on its host, else on its address on the
 * workers' network (or where --watch-address says). A worker's first
 * message (HELLO) carries the secret; rank 0 acts on nothing a connection
 * says before its HELLO has proven it and closes, and counts, every
 * connection that says anything else first, or a wrong secret, or names
 * a worker already connected, or stays silent for STRATA__LIVE_HELLO_S;
 * once every worker is in, it closes new connections at once.
 */
#ifndef STRATA_COMM_LIVE_H
#define STRATA_COMM_LIVE_H

#include "strata/transport.h"

#include <stdint.h>

#define STRATA__LIVE_BEAT 0.2
#define STRATA__LIVE_FLOOR 5.0
#define STRATA__LIVE_FACTOR 10.0
/* Rank 0 waits this long at most for every worker's HELLO in
 * strata__live_start, and closes a connection silent for this long. */
#define STRATA__LIVE_HELLO_S 3.0

/* The wire format, for the watch and its tests. Every rank of a job runs
 * the same build, so the structs travel as they are in memory. */
#define STRATA__LIVE_MAGIC 0x7374726cu /* "strl" */
#define STRATA__LIVE_SECRET 32
#define STRATA__LIVE_MAX_ADDRS 8
enum {
  STRATA__LIVE_HELLO = 1,
  STRATA__LIVE_BEAT_MSG,
  STRATA__LIVE_LOST,
  STRATA__LIVE_BYE,
  STRATA__LIVE_INT /* interrupted: the signal in sig */
};

/* One message on a watch connection, either way. */
typedef struct strata__live_msg {
  uint32_t magic, type;
  int32_t worker, pass;
  uint64_t steps;
  int32_t waiting, pid;
  double timeout; /* rank 0's beats: the stall timeout in force */
  char host[64];  /* HELLO */
  unsigned char secret[STRATA__LIVE_SECRET]; /* HELLO: the run's secret */
  int32_t sig;    /* INT: the signal that interrupted the run */
} strata__live_msg;

/* A worker to rank 0 over the transport, first: where it runs. */
typedef struct strata__live_where {
  char host[64];
  int32_t n;
  uint32_t addr[STRATA__LIVE_MAX_ADDRS]; /* its non-loopback IPv4 addresses, network order */
} strata__live_where;

/* Rank 0 to every worker over the transport, then: where to connect and
 * the secret to prove. port 0: no watch this run. */
typedef struct strata__live_addr {
  int32_t port;
  int32_t any; /* listening on every interface: a worker on rank 0's host may use loopback */
  int32_t n;
  uint32_t addr[STRATA__LIVE_MAX_ADDRS]; /* IPv4, network order, to try in turn */
  char host[64];
  unsigned char secret[STRATA__LIVE_SECRET];
} strata__live_addr;

typedef struct strata__live_conf {
  int passes;           /* the run's passes, for messages */
  double stall_timeout; /* > 0: fixed; 0: the default from pass times */
  /* Where rank 0 listens: NULL picks (127.0.0.1 on one host, else its
   * address on the workers' network), "any" every interface, else an IPv4
   * address of rank 0's host (strata__live_check_address). */
  const char *address;
  void (*on_lost)(void *ud, const char *msg, int report);
  void *ud;
} strata__live_conf;

/* 0 when addr is NULL, "any" or an IPv4 address in dotted form, else
 * STRATA_EUSAGE with a message naming --watch-address. */
int strata__live_check_address(const char *addr);

/*
 * Starts this rank's watch; every rank of a run over MPI calls it first
 * (rank 0 sends its address to every worker on t, tag `tag`). Returns 0,
 * also when the watch could not be set up (a warning is logged and the run
 * goes on unwatched), or the transport's error.
 */
int strata__live_start(strata_transport *t, int tag, const strata__live_conf *conf);
/*
 * A serial run's watch: no connection, only the thread that acts on SIGINT
 * and SIGTERM (core/interrupt.h), which prints one line through on_lost and
 * ends the process with 128 + the signal. A no-op when nothing catches the
 * signals (strata__interrupt_catch not called). Returns 0 or STRATA_ENOMEM;
 * a thread that cannot start is a warning (strata__live_watching says so).
 */
int strata__live_start_solo(const strata__live_conf *conf);
/* Whether a watch runs (started, not yet stopped or abandoned). */
int strata__live_watching(void);
/* Ends the watch on purpose: the others hear BYE, so the close that
 * follows is no loss. A no-op without a watch. */
void strata__live_stop(void);
/* Ends the watch and tells the others to end too (LOST, quietly): this
 * rank is about to end itself (strata_comm_abort). */
void strata__live_abandon(void);

/* The pass the computing thread is in (0-based), for the heartbeats. */
void strata__live_pass(int pass);
/* Rank 0: the next pass is summed; it took `seconds` (the default timeout
 * follows the slowest). */
void strata__live_pass_time(double seconds);
/* Rank 0: the last complete checkpoint, named in a loss's message. */
void strata__live_checkpoint(const char *dir, int passes);
/* Rank 0: the connections its watch has refused so far (closed unproven;
 * comm/live.h above); 0 without a watch. Any thread. */
int strata__live_refused(void);

#endif
