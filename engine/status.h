/*
 * engine/status.h - the live view of a run (internal to libstrata).
 *
 * With strata_engine_opts.status_addr, rank 0 serves the run over HTTP
 * while it goes on: /metrics (Prometheus text exposition format),
 * /status.json (the metrics summary so far, the run's phase and settings)
 * and / (a page that draws them; engine/status_page.html, built into the
 * library). docs/cli.md ("Live status") lists every metric.
 *
 * The server is libmicrohttpd, driven from a libev loop on a thread of its
 * own: it never waits on the coordinator, nor the coordinator on it. The
 * coordinator renders both documents on its own thread when the run
 * changes (a phase, a summed pass) and hands them over under a lock; every
 * request for one is answered from the same copy, which lives until the
 * last client sending it is done. Rendering is paced so that it takes at
 * most STRATA__STATUS_SHARE of the coordinator's time; a change left
 * waiting is rendered from the coordinator's next wait (or the next
 * change).
 *
 * What clients can hold is bounded: STRATA__STATUS_CONNS connections at
 * once (at most half the process's descriptors), half of them from one
 * address; a connection that moves no byte for STRATA__STATUS_TIMEOUT
 * seconds is closed; its buffers (request, headers) take at most
 * STRATA__STATUS_CONN_MEMORY bytes; and while older documents that slow
 * clients still hold take more than STRATA__STATUS_KEEP bytes, summed
 * passes are not rendered (phases and the run's end still are).
 *
 * One live view per process: the functions below act on it, and are
 * no-ops when there is none.
 */
#ifndef STRATA_ENGINE_STATUS_H
#define STRATA_ENGINE_STATUS_H

#include "scheduler/coordinator.h"
#include "strata/engine.h"

#define STRATA__STATUS_SHARE 0.01
#define STRATA__STATUS_MIN_GAP 0.1 /* seconds between renders at least */
#define STRATA__STATUS_CONNS 1024
#define STRATA__STATUS_TIMEOUT 10
#define STRATA__STATUS_CONN_MEMORY 16384
#define STRATA__STATUS_KEEP (8u << 20)

/*
 * Starts serving on addr ("HOST:PORT", "[IPv6]:PORT" or ":PORT" for every
 * address; port 0 picks a free one) for the run of app with options o.
 * Returns 0, or STRATA_EUSAGE for an address that does not parse or
 * resolve and STRATA_EIO for one it cannot listen on (in use, not this
 * host's), each with a message naming --status; nothing is left running
 * then.
 */
int strata__status_open(const char *addr, const strata_app *app, const strata_engine_opts *o,
                        int workers);
/* "http://HOST:PORT/" of the running view; "" without one. */
const char *strata__status_url(void);
/* The hooks the coordinator (and serial mode) calls (scheduler/coordinator.h). */
const strata__view *strata__status_view(void);
/* The run has ended with rc: its result r as strata_engine_run leaves it
 * (rc 0) or as far as it got; the phase becomes finished or failed (with
 * strata_err_msg()); a run already failed keeps its first message.
 * Rendered at once. */
void strata__status_end(const strata_run_result *r, int rc);
/* The run's status_linger (0 without a live view). */
double strata__status_linger(void);
/* Serves for `linger` more seconds (ended early by SIGINT or SIGTERM,
 * only on the main thread), then stops the server. */
void strata__status_close(double linger);

#endif
