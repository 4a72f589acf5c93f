/*
 * Waiting on transport requests (strata/transport.h, comm/transport.h):
 * spinning on the critical path, the shared back-off wait (core/wait.h)
 * elsewhere, and letting go of receives when a rank leaves a run early.
 */
#include "comm/transport.h"
#include "core/wait.h"
#include "strata/core.h"
#include "strata/transport.h"

int strata_comm_wait(const strata_transport *t, strata_req *req) {
  int done = 0, rc = t->test(t->impl, req, &done);
  if (rc || done) return rc;
  strata__wait_enter();
  while (!rc && !done) rc = t->test(t->impl, req, &done);
  strata__wait_leave();
  return rc;
}

typedef struct reqs_ctx {
  const strata_transport *t;
  strata_req *reqs;
  int n;
} reqs_ctx;

static int live(const reqs_ctx *c) {
  int n = 0;
  for (int i = 0; i < c->n; i++) n += c->reqs[i].h != 0;
  return n;
}

/* One test_all per wake-up: a single pass of the progress engine however
 * many requests are pending. */
static int test_reqs(void *ctx, int *done, int *progressed) {
  reqs_ctx *c = ctx;
  int before = live(c);
  int rc = c->t->test_all(c->t->impl, c->reqs, c->n, done);
  *progressed = live(c) < before;
  return rc;
}

int strata_comm_wait_all_idle(const strata_transport *t, strata_req *reqs, int n) {
  reqs_ctx c = {t, reqs, n};
  strata__wait_conf wc = {.ceiling = STRATA__WAIT_IDLE};
  return strata__wait(test_reqs, &c, &wc);
}

int strata_comm_wait_idle(const strata_transport *t, strata_req *req) {
  return strata_comm_wait_all_idle(t, req, 1);
}

typedef struct settle_ctx {
  const strata_transport *t;
  strata_req *reqs;
  int n;
} settle_ctx;

static int receives_left(const settle_ctx *c) {
  int n = 0;
  for (int i = 0; i < c->n; i++) n += c->reqs[i].h != 0 && c->reqs[i].expect != 0;
  return n;
}

/* Errors are not the point here: a cancelled receive may report one (its
 * length), and the caller is ending its part in the run anyway. */
static int settle_poll(void *ctx, int *done, int *progressed) {
  settle_ctx *c = ctx;
  int before = receives_left(c), all = 0;
  if (c->t->test_all(c->t->impl, c->reqs, c->n, &all)) strata_err_clear();
  int after = receives_left(c);
  *progressed = after < before;
  *done = after == 0;
  return 0;
}

int strata__comm_cancel(const strata_transport *t, strata_req *reqs, int n, double until) {
  for (int i = 0; i < n; i++)
    if (reqs[i].h && reqs[i].expect && t->cancel && t->cancel(t->impl, &reqs[i]))
      strata_err_clear();
  settle_ctx c = {t, reqs, n};
  strata__wait_conf wc = {.ceiling = STRATA__WAIT_PROMPT, .until = until};
  strata__wait(settle_poll, &c, &wc);
  if (!receives_left(&c)) return 0;
  return strata_err_set(STRATA_ECOMM, "%d receive%s still outstanding after cancelling",
                        receives_left(&c), receives_left(&c) == 1 ? "" : "s");
}
