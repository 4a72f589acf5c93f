/*
 * The coordinator's waits. Open MPI's blocking calls poll the network in a
 * tight loop, which on a machine with one core per worker would take a core
 * from the workers. Instead a libev loop wakes on a timer, tests the pending
 * requests, and doubles its sleep (50 us up to 10 ms) while nothing
 * completes; signals end the wait.
 */
#include <ev.h>
#include <signal.h>

#include "scheduler/protocol.h"

#define POLL_MIN 50e-6
#define POLL_MAX 10e-3

typedef struct waitset {
  const strata_transport *t;
  strata_req *reqs;
  int n;
  int rc;
  double interval;
  ev_timer timer;
  ev_signal sigint, sigterm;
} waitset;

static int live(const waitset *ws) {
  int n = 0;
  for (int i = 0; i < ws->n; i++) n += ws->reqs[i].h != 0;
  return n;
}

/* One test_all per wake-up: a single pass of MPI's progress engine however
 * many requests are pending. */
static int all_done(waitset *ws, int *progressed) {
  int before = live(ws), all = 0;
  int rc = ws->t->test_all(ws->t->impl, ws->reqs, ws->n, &all);
  if (rc) {
    ws->rc = rc;
    return 1;
  }
  *progressed = live(ws) < before;
  return all;
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)revents;
  waitset *ws = w->data;
  int progressed;
  if (all_done(ws, &progressed)) {
    ev_break(loop, EVBREAK_ONE);
    return;
  }
  ws->interval = progressed ? POLL_MIN : (ws->interval * 2 < POLL_MAX ? ws->interval * 2 : POLL_MAX);
  w->repeat = ws->interval;
  ev_timer_again(loop, w);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents) {
  (void)revents;
  waitset *ws = w->data;
  ws->rc = strata_err_set(STRATA_EINTR, "coordinator: interrupted by signal %d", w->signum);
  ev_break(loop, EVBREAK_ONE);
}

int strata__loop_wait_all(const strata_transport *t, strata_req *reqs, int n) {
  struct ev_loop *loop = ev_default_loop(EVFLAG_AUTO);
  if (!loop) return strata_err_set(STRATA_ECOMM, "coordinator: cannot create the event loop");
  waitset ws = {.t = t, .reqs = reqs, .n = n, .rc = 0, .interval = POLL_MIN};
  int progressed;
  if (all_done(&ws, &progressed)) return ws.rc;
  ev_timer_init(&ws.timer, on_timer, POLL_MIN, POLL_MIN);
  ws.timer.data = &ws;
  ev_signal_init(&ws.sigint, on_signal, SIGINT);
  ws.sigint.data = &ws;
  ev_signal_init(&ws.sigterm, on_signal, SIGTERM);
  ws.sigterm.data = &ws;
  ev_timer_start(loop, &ws.timer);
  ev_signal_start(loop, &ws.sigint);
  ev_signal_start(loop, &ws.sigterm);
  ev_run(loop, 0);
  ev_timer_stop(loop, &ws.timer);
  ev_signal_stop(loop, &ws.sigint);
  ev_signal_stop(loop, &ws.sigterm);
  return ws.rc;
}
