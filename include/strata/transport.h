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
} strata_transport;

/*
 * Initialises MPI (MPI_THREAD_FUNNELED: one compute thread per rank calls MPI;
 * background work in libev loops runs on that same thread) and fills t.
 * Returns 0 or STRATA_ECOMM with a message.
 */
STRATA_EXPORT int strata_comm_init(int *argc, char ***argv, strata_transport *t);
/* Finalises MPI. Every rank must call it for a clean exit. */
STRATA_EXPORT void strata_comm_finalize(strata_transport *t);
/* Ends the whole job at once (a worker failed mid-run and peers would block). */
STRATA_EXPORT void strata_comm_abort(strata_transport *t, int code);

/* Spins on test until the request completes (critical-path waits). */
STRATA_EXPORT int strata_comm_wait(const strata_transport *t, strata_req *req);
/* Waits with sleeps that back off from 50 us to 5 ms between tests, so an
 * idle rank leaves its core to others (set-up and tear-down waits). */
STRATA_EXPORT int strata_comm_wait_idle(const strata_transport *t, strata_req *req);
/* The same for n requests at once (test_all between sleeps). */
STRATA_EXPORT int strata_comm_wait_all_idle(const strata_transport *t, strata_req *reqs, int n);

#endif
