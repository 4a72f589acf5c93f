/*
 * Unit tests for comm/watch.c, the transport that stops when the run is
 * called off, over the loopback transport: calls are forwarded while the
 * run goes on; once the notice is in, every call fails with STRATA_EPEER
 * and no message, and every receive still outstanding has been taken back
 * (a message sent to it later lands nowhere); a failing call and the
 * owner's settle do the same; a notice that comes as the run ends shows at
 * finish; everything is freed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "leakcheck.h"

#include "comm/watch.h"
#include "strata/core.h"
#include "strata/transport.h"

/* The notice's tag (the engine uses TAG_ABORT of comm/protocol.h). */
#define NOTICE 18

typedef struct fixture {
  strata_loopback *lb;
  strata_transport coord, net; /* ranks 0 and 1 */
  strata__watch *w;
  strata_transport *t; /* rank 1, watched */
} fixture;

static void open_fixture(fixture *f) {
  strata_loopback_conf c = {.size = 2, .seed = 1};
  assert_int_equal(strata_loopback_open(&c, &f->lb), 0);
  assert_int_equal(strata_loopback_endpoint(f->lb, 0, &f->coord), 0);
  assert_int_equal(strata_loopback_endpoint(f->lb, 1, &f->net), 0);
  assert_int_equal(strata__watch_open(&f->net, 0, NOTICE, &f->w), 0);
  f->t = strata__watch_transport(f->w);
  assert_int_equal(f->t->rank, 1);
  assert_int_equal(f->t->size, 2);
}

static void close_fixture(fixture *f) {
  strata__watch_free(f->w);
  strata_loopback_close(f->lb);
}

/* Rank 0 sends the notice with `code` and waits until it is out. */
static void send_notice(fixture *f, int32_t *code) {
  strata_req rq = {0};
  assert_int_equal(f->coord.isend(f->coord.impl, code, sizeof *code, 1, NOTICE, &rq), 0);
  assert_int_equal(strata_comm_wait(&f->coord, &rq), 0);
}

/* Tests rq on the watched transport until a call fails (the notice is
 * checked at most every STRATA__WATCH_PERIOD); returns that call's code. */
static int test_until_failure(fixture *f, strata_req *rq) {
  double end = strata_now() + 5;
  while (strata_now() < end) {
    int done = 0, rc = f->t->test(f->t->impl, rq, &done);
    if (rc) return rc;
    assert_int_equal(done, 0);
  }
  fail_msg("no call failed within 5 s");
  return 0;
}

/* A message on `tag` from rank 0 that no receive took waits as unexpected:
 * poll finds it (the receive posted for it was taken back). */
static void expect_unmatched(fixture *f, int tag, int32_t want) {
  int got = 0, src = -1;
  void *buf = NULL;
  size_t len = 0;
  for (int i = 0; i < 10 && !got; i++)
    assert_int_equal(f->net.poll(f->net.impl, tag, &got, &src, &buf, &len), 0);
  assert_int_equal(got, 1);
  assert_int_equal(src, 0);
  assert_int_equal(len, sizeof want);
  assert_memory_equal(buf, &want, sizeof want);
  strata_free(buf);
}

static void test_forwards_then_finishes(void **state) {
  (void)state;
  fixture f;
  open_fixture(&f);
  int32_t out = 11, in = 0;
  strata_req s = {0}, r = {0}, reqs[2];
  assert_int_equal(f.t->isend(f.t->impl, &out, sizeof out, 0, 5, &s), 0);
  assert_int_equal(f.coord.irecv(f.coord.impl, &in, sizeof in, 1, 5, &r), 0);
  assert_int_equal(strata_comm_wait(&f.coord, &r), 0);
  assert_int_equal(strata_comm_wait(f.t, &s), 0);
  assert_int_equal(in, 11);
  /* Both ways, through test_all and the idle wait. */
  out = 12;
  assert_int_equal(f.coord.isend(f.coord.impl, &out, sizeof out, 1, 6, &s), 0);
  reqs[0] = (strata_req){0};
  reqs[1] = (strata_req){0};
  assert_int_equal(f.t->irecv(f.t->impl, &in, sizeof in, 0, 6, &reqs[1]), 0);
  assert_int_equal(strata_comm_wait_all_idle(f.t, reqs, 2), 0);
  assert_int_equal(strata_comm_wait(&f.coord, &s), 0);
  assert_int_equal(in, 12);
  assert_int_equal(strata__watch_check(f.w), 0);
  assert_int_equal(strata__watch_finish(f.w), 0);
  assert_int_equal(strata__watch_code(f.w), 0);
  close_fixture(&f);
}

static void test_notice_ends_every_call(void **state) {
  (void)state;
  fixture f;
  open_fixture(&f);
  int32_t *buf = strata_malloc(sizeof *buf), code = STRATA_EDIVERGED, late = 77, out = 1;
  *buf = -5;
  strata_req r = {0}, s = {0};
  assert_int_equal(f.t->irecv(f.t->impl, buf, sizeof *buf, 0, 7, &r), 0);
  send_notice(&f, &code);
  strata_err_set(STRATA_EINVAL, "an older message");
  assert_int_equal(test_until_failure(&f, &r), STRATA_EPEER);
  assert_string_equal(strata_err_msg(), "");
  assert_int_equal(strata__watch_code(f.w), STRATA_EDIVERGED);
  /* The receive was taken back: its buffer may go, and what is sent to it
   * now stays unmatched. */
  strata_free(buf);
  strata_req ls = {0};
  assert_int_equal(f.coord.isend(f.coord.impl, &late, sizeof late, 1, 7, &ls), 0);
  expect_unmatched(&f, 7, 77);
  assert_int_equal(strata_comm_wait(&f.coord, &ls), 0);
  /* Every call fails from now on. */
  int done = 0, all = 0, got = 0, src = 0;
  void *pb = NULL;
  size_t len = 0;
  assert_int_equal(f.t->isend(f.t->impl, &out, sizeof out, 0, 8, &s), STRATA_EPEER);
  assert_int_equal(f.t->irecv(f.t->impl, &out, sizeof out, 0, 8, &s), STRATA_EPEER);
  assert_int_equal(f.t->test(f.t->impl, &s, &done), STRATA_EPEER);
  assert_int_equal(f.t->test_all(f.t->impl, &s, 1, &all), STRATA_EPEER);
  assert_int_equal(f.t->poll(f.t->impl, 8, &got, &src, &pb, &len), STRATA_EPEER);
  assert_int_equal(strata_comm_wait_idle(f.t, &s), STRATA_EPEER);
  assert_int_equal(strata__watch_finish(f.w), STRATA_EPEER);
  close_fixture(&f);
}

/* A failing call (here a message longer than its receive) is the worker's
 * own failure: its error comes back, with its message, and every other
 * receive is taken back before the worker unwinds. */
static void test_failure_settles(void **state) {
  (void)state;
  fixture f;
  open_fixture(&f);
  int64_t eight = 8;
  int32_t small = 0, other = -1, late = 9;
  strata_req r[2] = {{0}, {0}}, s = {0};
  assert_int_equal(f.t->irecv(f.t->impl, &small, sizeof small, 0, 5, &r[0]), 0);
  assert_int_equal(f.t->irecv(f.t->impl, &other, sizeof other, 0, 6, &r[1]), 0);
  assert_int_equal(f.coord.isend(f.coord.impl, &eight, sizeof eight, 1, 5, &s), 0);
  assert_int_equal(strata_comm_wait(&f.coord, &s), 0);
  int rc = 0, done = 0;
  for (int i = 0; i < 10 && !rc; i++) rc = f.t->test(f.t->impl, &r[0], &done);
  assert_int_equal(rc, STRATA_ECOMM);
  assert_non_null(strstr(strata_err_msg(), "has 8 bytes, expected 4"));
  assert_int_equal(f.coord.isend(f.coord.impl, &late, sizeof late, 1, 6, &s), 0);
  expect_unmatched(&f, 6, 9);
  assert_int_equal(other, -1);
  assert_int_equal(strata_comm_wait(&f.coord, &s), 0);
  assert_int_equal(f.t->test(f.t->impl, &r[1], &done), STRATA_EPEER);
  assert_int_equal(strata__watch_code(f.w), 0);
  /* No notice came: finish takes its receive back. */
  assert_int_equal(strata__watch_finish(f.w), 0);
  close_fixture(&f);
}

/* The owner settles (its own failure outside the transport), then waits
 * for the notice; the notice's receive stays posted through settling. */
static void test_settle_then_notice(void **state) {
  (void)state;
  fixture f;
  open_fixture(&f);
  int32_t in = -1, late = 3, code = STRATA_EINVAL;
  strata_req r = {0}, s = {0};
  assert_int_equal(f.t->irecv(f.t->impl, &in, sizeof in, 0, 5, &r), 0);
  assert_int_equal(strata__watch_settle(f.w), 0);
  int done = 0;
  assert_int_equal(f.t->test(f.t->impl, &r, &done), STRATA_EPEER);
  assert_int_equal(f.coord.isend(f.coord.impl, &late, sizeof late, 1, 5, &s), 0);
  expect_unmatched(&f, 5, 3);
  assert_int_equal(in, -1);
  assert_int_equal(strata_comm_wait(&f.coord, &s), 0);
  assert_int_equal(strata__watch_code(f.w), 0);
  send_notice(&f, &code);
  double end = strata_now() + 5;
  while (!strata__watch_check(f.w) && strata_now() < end) {
  }
  assert_int_equal(strata__watch_code(f.w), STRATA_EINVAL);
  close_fixture(&f);
}

/* The notice came as the worker finished, before any call saw it. */
static void test_notice_at_finish(void **state) {
  (void)state;
  fixture f;
  open_fixture(&f);
  int32_t code = STRATA_ENOMEM;
  send_notice(&f, &code);
  /* One call of the endpoint lets the notice land; the watch, checked
   * moments ago at open, does not look yet. */
  int got = 0, src = 0;
  void *buf = NULL;
  size_t len = 0;
  assert_int_equal(f.net.poll(f.net.impl, 99, &got, &src, &buf, &len), 0);
  strata_err_set(STRATA_EINVAL, "stale");
  assert_int_equal(strata__watch_finish(f.w), STRATA_EPEER);
  assert_string_equal(strata_err_msg(), "");
  assert_int_equal(strata__watch_code(f.w), STRATA_ENOMEM);
  close_fixture(&f);
}

/* Recording outstanding operations grows past its first table, and
 * completions leave it (many at once through test_all). */
static void test_many_outstanding(void **state) {
  (void)state;
  fixture f;
  open_fixture(&f);
  enum { N = 300 };
  int32_t *in = strata_calloc(N, sizeof *in), *out = strata_calloc(N, sizeof *out);
  strata_req *r = strata_calloc(N, sizeof *r), *s = strata_calloc(N, sizeof *s);
  for (int i = 0; i < N; i++) {
    out[i] = i;
    assert_int_equal(f.t->irecv(f.t->impl, &in[i], sizeof in[i], 0, 100 + i, &r[i]), 0);
  }
  for (int i = 0; i < N; i++)
    assert_int_equal(f.coord.isend(f.coord.impl, &out[i], sizeof out[i], 1, 100 + i, &s[i]), 0);
  assert_int_equal(strata_comm_wait_all_idle(f.t, r, N), 0);
  assert_int_equal(strata_comm_wait_all_idle(&f.coord, s, N), 0);
  for (int i = 0; i < N; i++) assert_int_equal(in[i], i);
  /* Half outstanding again when the notice comes: all taken back. */
  for (int i = 0; i < N; i += 2)
    assert_int_equal(f.t->irecv(f.t->impl, &in[i], sizeof in[i], 0, 100 + i, &r[i]), 0);
  int32_t code = STRATA_EINVAL;
  send_notice(&f, &code);
  assert_int_equal(test_until_failure(&f, &r[0]), STRATA_EPEER);
  strata_free(in);
  strata_free(out);
  strata_free(r);
  strata_free(s);
  close_fixture(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_forwards_then_finishes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_notice_ends_every_call, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failure_settles, setup, teardown),
      cmocka_unit_test_setup_teardown(test_settle_then_notice, setup, teardown),
      cmocka_unit_test_setup_teardown(test_notice_at_finish, setup, teardown),
      cmocka_unit_test_setup_teardown(test_many_outstanding, setup, teardown),
  };
  return cmocka_run_group_tests_name("watch", tests, NULL, NULL);
}
