/*
 * comm/watch.h - a transport that stops when the run is called off
 * (internal to libstrata; the failure protocol of comm/protocol.h).
 *
 * A worker runs on a watched transport: one that forwards every call to
 * the transport it wraps and has the receive of the coordinator's notice
 * (TAG_ABORT) posted. Every wait in strata tests, test_alls or polls
 * its transport, so every wait notices the notice, wherever the worker is,
 * without knowing of it: once the notice is in, the watched transport
 * cancels every receive still outstanding through it, waits until the
 * transport is done with each, and from then on fails every call with
 * STRATA_EPEER and an empty message (the coordinator reports the failure),
 * so the worker unwinds. Since every receive has settled by then, nothing
 * lands in a buffer afterwards, on the stack or the heap: the worker may
 * free what it likes on the way out. Sends are left as they are (they are
 * only read). The same settling happens when a call fails (the worker's
 * own failure, whose unwinding frees buffers too) and when the owner asks
 * (strata__watch_settle).
 *
 * Cost: the notice's receive is tested at most every STRATA__WATCH_PERIOD
 * (a clock read per call otherwise), and each send and receive is recorded
 * in a hash set until a test sees it complete.
 *
 * Threading: the wrapped transport's rules hold (strata/transport.h); the
 * watch's own state is behind a mutex, and strata__watch_code is an
 * atomic read any thread may make.
 */
#ifndef STRATA_COMM_WATCH_H
#define STRATA_COMM_WATCH_H

#include <stdint.h>

#include "strata/transport.h"

#define STRATA__WATCH_PERIOD 50e-6

typedef struct strata__watch strata__watch;

/*
 * Wraps t (which must outlive the watch) and posts the receive of the
 * notice: an int32 code, nonzero, from rank src with tag `tag`. *out is the
 * watch, or NULL on failure. Returns 0, STRATA_ENOMEM, or the receive's
 * error.
 */
int strata__watch_open(const strata_transport *t, int src, int tag, strata__watch **out);

/* The watched transport, valid until strata__watch_free. */
strata_transport *strata__watch_transport(strata__watch *w);

/* The notice's code once it is in, else 0, from what the last check saw. */
int strata__watch_code(const strata__watch *w);

/* Checks for the notice now (settling when it has come) and returns
 * strata__watch_code. */
int strata__watch_check(strata__watch *w);

/*
 * Ends the watched transport's part in the run: cancels every receive
 * still outstanding through it and waits until the transport is done with
 * each (at most about a second); later calls fail with STRATA_EPEER. The
 * notice's receive stays posted. Returns 0, or STRATA_ECOMM with a message
 * when a receive did not settle (its buffer must then be kept).
 */
int strata__watch_settle(strata__watch *w);

/*
 * At a normal end: takes back the notice's receive. Returns 0, or
 * STRATA_EPEER with an empty message when the notice had come after all
 * (the run was called off as this worker finished): strata__watch_code
 * then gives it, and the transport is settled.
 */
int strata__watch_finish(strata__watch *w);

/* Frees the watch, taking back the notice's receive if it is still
 * posted. NULL is a no-op. */
void strata__watch_free(strata__watch *w);

#endif
