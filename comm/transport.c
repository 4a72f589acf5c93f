/*
 * Waiting on transport requests (strata/transport.h): spinning on the
 * critical path, the shared back-off wait (core/wait.h) elsewhere.
 */
#include "comm/protocol.h"
#include "core/wait.h"
#include "strata/transport.h"

int strata_comm_wait(const strata_transport *t, strata_req *req) {
  int done = 0;
  while (!done) {
    int rc = t->test(t->impl, req, &done);
    if (rc) return rc;
  }
  return 0;
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

int strata__comm_wait_signals(const strata_transport *t, strata_req *reqs, int n, const char *who) {
  reqs_ctx c = {t, reqs, n};
  strata__wait_conf wc = {.ceiling = STRATA__WAIT_IDLE, .signals = 1, .who = who};
  return strata__wait(test_reqs, &c, &wc);
}
