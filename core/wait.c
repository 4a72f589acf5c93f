/*
 * The back-off wait (core/wait.h) on a per-thread libev loop.
 */
#include <ev.h>
#include <pthread.h>
#include <sys/socket.h>

#include "core/interrupt.h"
#include "core/wait.h"
#include "strata/core.h"

typedef struct waiter {
  strata__poll_fn poll;
  void *ctx;
  const strata__wait_conf *conf;
  double interval;
  int rc;
  ev_timer timer;
  ev_io wake;
  int finished; /* the wait is over: a watcher pending in the same loop
                   iteration must not poll again (it would take a second
                   message, or lose the first) */
} waiter;

/* One loop per thread, made at its first wait and kept: the waits of the
 * table, the coordinator and set-up then allocate nothing while they poll. */
static pthread_key_t loop_key;
static pthread_once_t loop_once = PTHREAD_ONCE_INIT;

static void loop_free(void *loop) { ev_loop_destroy(loop); }
static void loop_key_make(void) { pthread_key_create(&loop_key, loop_free); }

static struct ev_loop *loop_for(void) {
  pthread_once(&loop_once, loop_key_make);
  struct ev_loop *loop = pthread_getspecific(loop_key);
  if (!loop && (loop = ev_loop_new(EVFLAG_AUTO)) && pthread_setspecific(loop_key, loop)) {
    ev_loop_destroy(loop);
    loop = NULL;
  }
  return loop;
}

/* Arms the timer for the next poll: the back-off step, cut at the deadline.
 * Returns 0 when the deadline has passed. */
static int arm(struct ev_loop *loop, waiter *wt, int progressed) {
  double ceil = wt->conf->ceiling > STRATA__WAIT_MIN ? wt->conf->ceiling : STRATA__WAIT_MIN;
  wt->interval = progressed ? STRATA__WAIT_MIN : (wt->interval * 2 < ceil ? wt->interval * 2 : ceil);
  wt->timer.repeat = wt->interval;
  if (wt->conf->until > 0) {
    double left = wt->conf->until - strata_now();
    if (left <= 0) return 0;
    if (left < wt->timer.repeat) wt->timer.repeat = left;
  }
  ev_timer_again(loop, &wt->timer);
  return 1;
}

/* Ends the wait: no watcher polls after this. */
static void finish(struct ev_loop *loop, waiter *wt) {
  wt->finished = 1;
  ev_break(loop, EVBREAK_ONE);
}

/* A signal noted by core/interrupt.h's handler, for a wait that asked. */
static int interrupted(const strata__wait_conf *conf) {
  int sig = conf->signals ? strata__interrupt_signal() : 0;
  if (!sig) return 0;
  return strata_err_set(STRATA_EINTR, "%s: interrupted by %s", conf->who ? conf->who : "strata",
                        strata__interrupt_name(sig));
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)revents;
  waiter *wt = w->data;
  if (wt->finished) return;
  int done = 0, progressed = 0;
  wt->rc = interrupted(wt->conf);
  if (!wt->rc) wt->rc = wt->poll(wt->ctx, &done, &progressed);
  if (wt->rc || done || !arm(loop, wt, progressed)) finish(loop, wt);
}

/* The doorbell rang: empty it and poll now; a message that rang may take
 * a second call of the progress engine to complete, so poll again while
 * the calls make progress (a few times at most). */
static void on_wake(struct ev_loop *loop, ev_io *w, int revents) {
  (void)revents;
  waiter *wt = w->data;
  char buf[64];
  while (recv(w->fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
  if (wt->finished) return;
  int done = 0, progressed = 1;
  for (int i = 0; i < 4 && !done && !wt->rc && (progressed || i < 2); i++)
    wt->rc = wt->poll(wt->ctx, &done, &progressed);
  if (wt->rc || done || !arm(loop, wt, 0)) finish(loop, wt);
}

_Atomic uint64_t strata__steps;
_Atomic int strata__waiting;

static int wait_loop(strata__poll_fn poll, void *ctx, const strata__wait_conf *conf);

int strata__wait(strata__poll_fn poll, void *ctx, const strata__wait_conf *conf) {
  strata__wait_enter();
  int rc = wait_loop(poll, ctx, conf);
  strata__wait_leave();
  return rc;
}

static int wait_loop(strata__poll_fn poll, void *ctx, const strata__wait_conf *conf) {
  int done = 0, progressed = 0;
  int rc = interrupted(conf);
  if (!rc) rc = poll(ctx, &done, &progressed);
  if (rc || done) return rc;
  if (conf->until > 0 && strata_now() >= conf->until) return 0;
  struct ev_loop *loop = loop_for();
  if (!loop) return strata_err_set(STRATA_ECOMM, "cannot create an event loop");
  /* With a doorbell the timer is only the fallback: it sleeps the whole
   * ceiling from the start. */
  waiter wt = {.poll = poll,
               .ctx = ctx,
               .conf = conf,
               .interval = conf->wake_fd > 0 ? conf->ceiling : STRATA__WAIT_MIN / 2};
  ev_init(&wt.timer, on_timer);
  wt.timer.data = &wt;
  if (conf->wake_fd > 0) {
    ev_io_init(&wt.wake, on_wake, conf->wake_fd, EV_READ);
    wt.wake.data = &wt;
    ev_io_start(loop, &wt.wake);
  }
  if (arm(loop, &wt, 0)) ev_run(loop, 0);
  ev_timer_stop(loop, &wt.timer);
  if (conf->wake_fd > 0) ev_io_stop(loop, &wt.wake);
  return wt.rc;
}
