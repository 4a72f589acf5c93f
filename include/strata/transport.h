/*
 * strata/transport.h - the message layer the engine sees.
 *
 * The engine moves bytes between ranks through this struct of function
 * pointers; comm/ implements it over MPI (the only code that includes mpi.h)
 * and tests may fake it. Rank 0 is the coordinator; ranks 1..size-1 are
 * workers 0..size-2.
 *
 * Threading: only the thread that created the transport may call it (the MPI
 * implementation initialises MPI_THREAD_FUNNELED).
 */
#ifndef STRATA_TRANSPORT_H
#define STRATA_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "strata/error.h"

/* An outstanding operation. A zeroed request is "null": testing it reports
 * done. Completed requests are reset to null. */
typedef struct strata_req {
  uint64_t h;
  uint64_t expect; /* receives: expected length + 1 (checked on completion); sends: 0 */
} strata_req;

typedef struct strata_transport {
  void *impl;
  int rank;
  int size;
  int tag_ub; /* largest usable tag */
  /* Start a send/receive of len bytes (len <= INT_MAX, else STRATA_ETOOBIG).
   * The buffer must stay untouched until the request completes. */
  int (*isend)(void *impl, const void *buf, size_t len, int dst, int tag, strata_req *req);
  int (*irecv)(void *impl, void *buf, size_t len, int src, int tag, strata_req *req);
  /* Sets *done to 1 and nulls *req when the operation has completed. For a
   * receive, a message whose length differs from the posted one is an error
   * (STRATA_ECOMM). Also drives progress of every outstanding operation. */
  int (*test)(void *impl, strata_req *req, int *done);
  /* Tests n requests at once (null ones included), nulling the completed
   * ones; *all is 1 when none is left. One call drives progress once, so a
   * rank waiting on many requests pays for one pass of the progress engine. */
  int (*test_all)(void *impl, strata_req *reqs, int n, int *all);
  /* Receives one message with this tag from any rank, if one has arrived:
   * sets *got, *src (rank), *buf (strata_malloc'd, the caller frees it; a
   * 1-byte allocation for an empty message) and *len. *got = 0 when none is waiting. Messages
   * from one rank with one tag arrive in the order they were sent. Used by
   * the parameter-server tables, whose requests come from anyone. */
  int (*poll)(void *impl, int tag, int *got, int *src, void **buf, size_t *len);
  /* Asks that an outstanding receive be called off: one no message has
   * matched yet completes without one (test then reports it done, with no
   * error, and nothing lands in its buffer); one already matched completes
   * as usual. Either way it must still be tested until done, and only then
   * may its buffer go. A send is left as it is (MPI cannot take one back):
   * it completes when its receiver takes it, if ever. At most once per
   * request (Open MPI crashes on a second cancel). NULL in a transport that
   * cannot cancel. */
  int (*cancel)(void *impl, strata_req *req);
} strata_transport;

/*
 * Initialises MPI (MPI_THREAD_FUNNELED: one compute thread per rank calls MPI;
 * background work in libev loops runs on that same thread) and fills t.
 * Returns 0 or STRATA_ECOMM with a message.
 */
STRATA_EXPORT int strata_comm_init(int *argc, char ***argv, strata_transport *t);
/* Finalises MPI. Every rank must call it for a clean exit. */
STRATA_EXPORT void strata_comm_finalize(strata_transport *t);
/* Ends the whole job at once: the last resort when a failure could not be
 * ended on every rank (strata_run_result.peers_blocked). With the engine's
 * liveness watch running (during strata_engine_run), every rank it keeps
 * ends by itself (exit code 1) and this process exits with `code`;
 * otherwise MPI_Abort. Does not return. */
STRATA_EXPORT void strata_comm_abort(strata_transport *t, int code);

/* Spins on test until the request completes (critical-path waits). */
STRATA_EXPORT int strata_comm_wait(const strata_transport *t, strata_req *req);
/* Waits with sleeps that back off from 50 us to 5 ms between tests, so an
 * idle rank leaves its core to others (set-up and tear-down waits). */
STRATA_EXPORT int strata_comm_wait_idle(const strata_transport *t, strata_req *req);
/* The same for n requests at once (test_all between sleeps). */
STRATA_EXPORT int strata_comm_wait_all_idle(const strata_transport *t, strata_req *reqs, int n);

/*
 * Loopback: an in-process transport for tests, one endpoint per rank, so
 * that code written against strata_transport runs without mpiexec (one
 * thread per rank). It keeps the contract above to the letter: isend copies
 * the bytes; a receive matches by (source, tag) the earliest arrived message
 * in MPI's order and fails with STRATA_ECOMM when the lengths differ; cancel
 * takes back a receive no message has reached yet; poll
 * hands out a strata_malloc'd buffer (1 byte for an empty message);
 * requests are nulled on completion. Sources must be ranks (no wildcard)
 * and tags in [0, tag_ub], else isend and irecv fail with STRATA_ECOMM, as
 * MPI would; testing a request that is not outstanding is STRATA_ECOMM.
 *
 * Delays and reordering are counted in calls, never in time: a message sent
 * to rank r arrives at r's (1 + d)-th test/test_all/poll call after the send
 * (later if a message it may not overtake arrives later), and a send
 * completes at its sender's (1 + d)-th call after isend, each d drawn in
 * [0, max_delay] by the sender's generator. Messages with one (source,
 * destination, tag) never overtake each other; without reorder, no message
 * to a rank overtakes another; with reorder, the messages arriving in one
 * call reach the receiver in a shuffled order (drawn by the receiver's
 * generator). Given the seed and the interleaving of calls on the
 * endpoints, what happens is fixed.
 *
 * Threading: endpoints share a hub behind a mutex; each endpoint must be
 * called by one thread at a time (any thread, unlike MPI's FUNNELED rule).
 */
typedef struct strata_loopback strata_loopback;

typedef struct strata_loopback_conf {
  int size;         /* ranks, >= 1 */
  uint64_t seed;    /* drives delays and reordering */
  int max_delay;    /* >= 0; 0: every message arrives at the receiver's next call */
  int reorder;      /* 1: shuffle what MPI may reorder (different source or tag) */
  int tag_ub;       /* largest usable tag; 0: 32767, the least MPI guarantees */
} strata_loopback_conf;

/* Creates the hub. Returns 0, STRATA_EINVAL (size < 1, max_delay < 0 or
 * tag_ub < 0) or STRATA_ENOMEM; *out is NULL on failure. */
STRATA_EXPORT int strata_loopback_open(const strata_loopback_conf *c, strata_loopback **out);
/* Fills t as the transport of `rank`; t stays valid until the hub is
 * closed. Returns 0 or STRATA_EINVAL for a rank outside [0, size). */
STRATA_EXPORT int strata_loopback_endpoint(strata_loopback *lb, int rank, strata_transport *t);
/* Frees the hub with every message still in it; outstanding requests
 * become invalid. Call it after every thread has stopped using its
 * endpoint. NULL is a no-op. */
STRATA_EXPORT void strata_loopback_close(strata_loopback *lb);

#endif
