/*
 * The watched transport (comm/watch.h): forwards every call, records the
 * outstanding sends and receives, and ends the transport's part in the run
 * once the coordinator's notice is in.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "comm/transport.h"
#include "comm/watch.h"
#include "strata/core.h"

/* Receives get a second to settle: a cancelled one completes at once, one
 * whose message is arriving as soon as its sender's transfer is done. */
#define SETTLE_S 1.0

struct strata__watch {
  strata_transport outer; /* what the worker calls: impl is the watch */
  strata_transport inner; /* the transport wrapped */
  pthread_mutex_t mu;
  atomic_int code;  /* the notice's code once it is in, else 0 */
  int ended;        /* settled: every call fails with STRATA_EPEER */
  int settle_rc;    /* what settling returned */
  int32_t notice;   /* the notice's buffer: nonzero once it landed */
  strata_req notice_req;
  int notice_cancelled;
  double last_check;
  /* The outstanding sends and receives, by handle: open addressing with
   * linear probing over cap slots (a power of two, at most half full); h 0
   * is an empty slot. */
  strata_req *live;
  size_t cap, n;
  strata_req *scratch; /* cap entries: the receives settling cancels */
  uint64_t *before;    /* test_all: the handles before the call */
  size_t cap_before;
};

static size_t home(uint64_t h, size_t cap) { return (size_t)strata_mix64(h) & (cap - 1); }

static void put(strata_req *slots, size_t cap, strata_req r) {
  size_t i = home(r.h, cap);
  while (slots[i].h) i = (i + 1) & (cap - 1);
  slots[i] = r;
}

/* Room for one more entry, so that adding never fails after the transport
 * has started an operation; settling never allocates either. */
static int reserve(strata__watch *w) {
  if ((w->n + 1) * 2 <= w->cap) return 0;
  size_t cap = w->cap ? 2 * w->cap : 64;
  strata_req *live = strata_calloc(cap, sizeof *live);
  strata_req *scratch = strata_malloc(cap * sizeof *scratch);
  if (!live || !scratch) {
    strata_free(live);
    strata_free(scratch);
    return strata_err_set(STRATA_ENOMEM, "out of memory recording a message");
  }
  for (size_t i = 0; i < w->cap; i++)
    if (w->live[i].h) put(live, cap, w->live[i]);
  strata_free(w->live);
  strata_free(w->scratch);
  w->live = live;
  w->scratch = scratch;
  w->cap = cap;
  return 0;
}

/* Forgets a completed operation (backward-shift deletion keeps every
 * probe run unbroken). */
static void drop(strata__watch *w, uint64_t h) {
  size_t mask = w->cap - 1, i = home(h, w->cap);
  while (w->live[i].h && w->live[i].h != h) i = (i + 1) & mask;
  if (!w->live[i].h) return;
  w->live[i].h = 0;
  w->n--;
  for (size_t j = (i + 1) & mask; w->live[j].h; j = (j + 1) & mask) {
    size_t k = home(w->live[j].h, w->cap);
    /* Entry j may move to the hole at i when i lies on its probe run. */
    if (((j - k) & mask) >= ((j - i) & mask)) {
      w->live[i] = w->live[j];
      w->live[j].h = 0;
      i = j;
    }
  }
}

/* Cancels and settles every outstanding receive; from now on every call
 * fails, so what is recorded no longer matters. Keeps the thread's message
 * (the failure being unwound). Called with mu held. */
static int settle_locked(strata__watch *w) {
  if (w->ended) return w->settle_rc;
  w->ended = 1;
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", strata_err_msg());
  int k = 0;
  for (size_t i = 0; i < w->cap; i++)
    if (w->live[i].h && w->live[i].expect) w->scratch[k++] = w->live[i];
  w->settle_rc = strata__comm_cancel(&w->inner, w->scratch, k, strata_now() + SETTLE_S);
  strata_err_set(0, "%s", msg);
  return w->settle_rc;
}

/* Tests the notice's receive; settles when the notice is in. */
static void check_locked(strata__watch *w) {
  if (!w->notice_req.h) return;
  int done = 0;
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", strata_err_msg());
  int rc = w->inner.test(w->inner.impl, &w->notice_req, &done);
  strata_err_set(0, "%s", msg);
  if (rc || !done || !w->notice) return;
  atomic_store(&w->code, w->notice);
  settle_locked(w);
}

/* Before every call: the notice, at most every STRATA__WATCH_PERIOD, and
 * whether the run is over for this transport. */
static int gate(strata__watch *w) {
  if (!w->ended) {
    double now = strata_now();
    if (now - w->last_check >= STRATA__WATCH_PERIOD) {
      w->last_check = now;
      check_locked(w);
    }
  }
  if (!w->ended) return 0;
  strata_err_clear();
  return STRATA_EPEER;
}

/* A call of the wrapped transport failed: the worker's own failure, whose
 * unwinding may free the buffers of receives still outstanding. */
static int failed(strata__watch *w, int rc) {
  settle_locked(w);
  return rc;
}

/* After posting a request (rc: how the post went): a failure settles, a
 * request in flight is recorded. Called and returns with w->mu held. */
static int posted(strata__watch *w, int rc, const strata_req *req) {
  if (rc && rc != STRATA_EPEER) rc = failed(w, rc);
  if (!rc && req->h) {
    put(w->live, w->cap, *req);
    w->n++;
  }
  return rc;
}

static int w_isend(void *impl, const void *buf, size_t len, int dst, int tag, strata_req *req) {
  strata__watch *w = impl;
  pthread_mutex_lock(&w->mu);
  int rc = gate(w);
  if (!rc) rc = reserve(w);
  if (!rc) rc = w->inner.isend(w->inner.impl, buf, len, dst, tag, req);
  rc = posted(w, rc, req);
  pthread_mutex_unlock(&w->mu);
  return rc;
}

static int w_irecv(void *impl, void *buf, size_t len, int src, int tag, strata_req *req) {
  strata__watch *w = impl;
  pthread_mutex_lock(&w->mu);
  int rc = gate(w);
  if (!rc) rc = reserve(w);
  if (!rc) rc = w->inner.irecv(w->inner.impl, buf, len, src, tag, req);
  rc = posted(w, rc, req);
  pthread_mutex_unlock(&w->mu);
  return rc;
}

static int w_test(void *impl, strata_req *req, int *done) {
  strata__watch *w = impl;
  *done = 0;
  pthread_mutex_lock(&w->mu);
  int rc = gate(w);
  if (!rc) {
    uint64_t h = req->h;
    rc = w->inner.test(w->inner.impl, req, done);
    if (h && !req->h) drop(w, h);
    if (rc) rc = failed(w, rc);
  }
  pthread_mutex_unlock(&w->mu);
  return rc;
}

static int w_test_all(void *impl, strata_req *reqs, int n, int *all) {
  strata__watch *w = impl;
  *all = 0;
  pthread_mutex_lock(&w->mu);
  int rc = gate(w);
  if (!rc && (size_t)n > w->cap_before) {
    uint64_t *b = strata_grow(w->before, (size_t)n, &w->cap_before, SIZE_MAX, sizeof *b);
    if (b) w->before = b;
    else rc = failed(w, strata_err_set(STRATA_ENOMEM, "out of memory testing %d requests", n));
  }
  if (!rc) {
    for (int i = 0; i < n; i++) w->before[i] = reqs[i].h;
    rc = w->inner.test_all(w->inner.impl, reqs, n, all);
    for (int i = 0; i < n; i++)
      if (w->before[i] && !reqs[i].h) drop(w, w->before[i]);
    if (rc) rc = failed(w, rc);
  }
  pthread_mutex_unlock(&w->mu);
  return rc;
}

static int w_poll(void *impl, int tag, int *got, int *src, void **buf, size_t *len) {
  strata__watch *w = impl;
  *got = 0;
  *buf = NULL;
  *len = 0;
  pthread_mutex_lock(&w->mu);
  int rc = gate(w);
  if (!rc && (rc = w->inner.poll(w->inner.impl, tag, got, src, buf, len))) rc = failed(w, rc);
  pthread_mutex_unlock(&w->mu);
  return rc;
}

/* The caller tests its own cancelled receive to completion: settling
 * must not cancel it again, so it is recorded as a send from now on. */
static int w_cancel(void *impl, strata_req *req) {
  strata__watch *w = impl;
  pthread_mutex_lock(&w->mu);
  int rc = w->inner.cancel ? w->inner.cancel(w->inner.impl, req) : 0;
  if (req->h) {
    size_t i = home(req->h, w->cap);
    while (w->live[i].h && w->live[i].h != req->h) i = (i + 1) & (w->cap - 1);
    if (w->live[i].h) w->live[i].expect = 0;
  }
  pthread_mutex_unlock(&w->mu);
  return rc;
}

int strata__watch_open(const strata_transport *t, int src, int tag, strata__watch **out) {
  *out = NULL;
  strata__watch *w = strata_calloc(1, sizeof *w);
  if (!w) return strata_err_set(STRATA_ENOMEM, "out of memory for the transport's watch");
  if (pthread_mutex_init(&w->mu, NULL)) {
    strata_free(w);
    return strata_err_set(STRATA_ECOMM, "cannot create a mutex");
  }
  w->inner = *t;
  w->outer = *t;
  w->outer.impl = w;
  w->outer.isend = w_isend;
  w->outer.irecv = w_irecv;
  w->outer.test = w_test;
  w->outer.test_all = w_test_all;
  w->outer.poll = w_poll;
  w->outer.cancel = w_cancel;
  atomic_init(&w->code, 0);
  int rc = reserve(w);
  if (!rc) rc = t->irecv(t->impl, &w->notice, sizeof w->notice, src, tag, &w->notice_req);
  if (rc) {
    pthread_mutex_destroy(&w->mu);
    strata_free(w->live);
    strata_free(w->scratch);
    strata_free(w);
    return rc;
  }
  w->last_check = strata_now();
  *out = w;
  return 0;
}

strata_transport *strata__watch_transport(strata__watch *w) { return &w->outer; }

int strata__watch_code(const strata__watch *w) { return atomic_load(&((strata__watch *)w)->code); }

int strata__watch_check(strata__watch *w) {
  pthread_mutex_lock(&w->mu);
  w->last_check = strata_now();
  check_locked(w);
  pthread_mutex_unlock(&w->mu);
  return strata__watch_code(w);
}

int strata__watch_settle(strata__watch *w) {
  pthread_mutex_lock(&w->mu);
  int rc = settle_locked(w);
  pthread_mutex_unlock(&w->mu);
  return rc;
}

/* Takes back the notice's receive; true when the notice had landed. A
 * request is cancelled once only: Open MPI crashes on a second cancel. */
static int take_back_notice(strata__watch *w) {
  if (w->notice_req.h && !w->notice_cancelled) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", strata_err_msg());
    w->notice_cancelled = 1;
    strata__comm_cancel(&w->inner, &w->notice_req, 1, strata_now() + SETTLE_S);
    strata_err_set(0, "%s", msg);
  }
  return w->notice != 0;
}

int strata__watch_finish(strata__watch *w) {
  pthread_mutex_lock(&w->mu);
  if (!strata__watch_code(w) && take_back_notice(w)) {
    atomic_store(&w->code, w->notice);
    settle_locked(w);
  }
  int code = strata__watch_code(w);
  pthread_mutex_unlock(&w->mu);
  if (!code) return 0;
  strata_err_clear();
  return STRATA_EPEER;
}

void strata__watch_free(strata__watch *w) {
  if (!w) return;
  take_back_notice(w);
  /* The notice's buffer is the watch's own: keep it while it may still
   * be written (the receive would not settle). */
  if (w->notice_req.h) return;
  pthread_mutex_destroy(&w->mu);
  strata_free(w->live);
  strata_free(w->scratch);
  strata_free(w->before);
  strata_free(w);
}
