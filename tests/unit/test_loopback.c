/*
 * Unit tests for comm/loopback.c, the in-process strata_transport: the
 * contract of strata/transport.h (copying sends, matching by source and
 * tag in posting order, the length check, null requests, poll from any
 * source, test_all) under delays and reordering, plus the loopback's own
 * promises (FIFO per channel, delays counted in calls, the same run for the
 * same seed and calls, everything freed on close).
 *
 * The randomised tests print their seed; STRATA_TEST_SEED=X replays it.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "leakcheck.h"

#include "strata/core.h"
#include "strata/error.h"
#include "strata/transport.h"

static uint64_t g_seed;

static strata_loopback *open_hub(int size, uint64_t seed, int max_delay, int reorder) {
  strata_loopback_conf c = {.size = size, .seed = seed, .max_delay = max_delay, .reorder = reorder};
  strata_loopback *lb = NULL;
  assert_int_equal(strata_loopback_open(&c, &lb), 0);
  assert_non_null(lb);
  return lb;
}

static strata_transport endpoint(strata_loopback *lb, int rank) {
  strata_transport t;
  assert_int_equal(strata_loopback_endpoint(lb, rank, &t), 0);
  assert_int_equal(t.rank, rank);
  return t;
}

/* Tests req on t until it completes; fails after `limit` calls. Returns the
 * calls it took. */
static int wait_req(const strata_transport *t, strata_req *req, int limit) {
  for (int calls = 1; calls <= limit; calls++) {
    int done = 0;
    assert_int_equal(t->test(t->impl, req, &done), 0);
    if (done) {
      assert_int_equal(req->h, 0);
      return calls;
    }
  }
  fail_msg("request not complete after %d calls", limit);
  return -1;
}

/* ---- configuration ---------------------------------------------------- */

static void test_open_invalid(void **state) {
  (void)state;
  strata_loopback *lb = (strata_loopback *)1;
  strata_loopback_conf c = {.size = 0};
  assert_int_equal(strata_loopback_open(&c, &lb), STRATA_EINVAL);
  assert_null(lb);
  c = (strata_loopback_conf){.size = 2, .max_delay = -1};
  assert_int_equal(strata_loopback_open(&c, &lb), STRATA_EINVAL);
  c = (strata_loopback_conf){.size = 2, .tag_ub = -5};
  assert_int_equal(strata_loopback_open(&c, &lb), STRATA_EINVAL);

  lb = open_hub(3, 1, 0, 0);
  strata_transport t;
  assert_int_equal(strata_loopback_endpoint(lb, 3, &t), STRATA_EINVAL);
  assert_int_equal(strata_loopback_endpoint(lb, -1, &t), STRATA_EINVAL);
  t = endpoint(lb, 2);
  assert_int_equal(t.size, 3);
  assert_int_equal(t.tag_ub, 32767);
  strata_loopback_close(lb);
  strata_loopback_close(NULL);

  c = (strata_loopback_conf){.size = 1, .tag_ub = 1 << 20};
  assert_int_equal(strata_loopback_open(&c, &lb), 0);
  t = endpoint(lb, 0);
  assert_int_equal(t.tag_ub, 1 << 20);
  strata_loopback_close(lb);
}

static void test_bad_peer_and_tag(void **state) {
  (void)state;
  strata_loopback *lb = open_hub(2, 1, 0, 0);
  strata_transport t = endpoint(lb, 0);
  char b[4] = {0};
  strata_req r = {0};
  assert_int_equal(t.isend(t.impl, b, sizeof b, 2, 1, &r), STRATA_ECOMM);
  assert_non_null(strstr(strata_err_msg(), "rank 2"));
  assert_int_equal(t.isend(t.impl, b, sizeof b, -1, 1, &r), STRATA_ECOMM);
  assert_int_equal(t.irecv(t.impl, b, sizeof b, 5, 1, &r), STRATA_ECOMM);
  /* No wildcard source: the engine names its peers. */
  assert_int_equal(t.irecv(t.impl, b, sizeof b, -1, 1, &r), STRATA_ECOMM);
  assert_int_equal(t.isend(t.impl, b, sizeof b, 1, 32768, &r), STRATA_ECOMM);
  assert_non_null(strstr(strata_err_msg(), "tag 32768"));
  assert_int_equal(t.isend(t.impl, b, sizeof b, 1, -1, &r), STRATA_ECOMM);
  assert_int_equal(t.isend(t.impl, b, (size_t)INT32_MAX + 1, 1, 1, &r), STRATA_ETOOBIG);
  assert_int_equal(t.irecv(t.impl, b, (size_t)INT32_MAX + 1, 1, 1, &r), STRATA_ETOOBIG);
  assert_int_equal(r.h, 0);
  strata_loopback_close(lb);
}

/* ---- point to point --------------------------------------------------- */

static void test_point_to_point(void **state) {
  (void)state;
  strata_loopback *lb = open_hub(2, g_seed, 3, 1);
  strata_transport a = endpoint(lb, 0), b = endpoint(lb, 1);
  char msg[] = "hello, rank 1";
  char got[sizeof msg];
  strata_req s = {0}, r = {0};
  assert_int_equal(a.isend(a.impl, msg, sizeof msg, 1, 7, &s), 0);
  assert_int_not_equal(s.h, 0);
  assert_int_equal(s.expect, 0);
  /* The send copied the bytes: the buffer is the caller's again at once. */
  memset(msg, 'x', sizeof msg);
  assert_int_equal(b.irecv(b.impl, got, sizeof got, 0, 7, &r), 0);
  assert_int_not_equal(r.h, 0);
  assert_int_equal(r.expect, sizeof got + 1);
  wait_req(&b, &r, 10);
  assert_string_equal(got, "hello, rank 1");
  /* The send completes on its sender's calls alone. */
  int calls = wait_req(&a, &s, 10);
  assert_true(calls >= 1 && calls <= 4);
  strata_loopback_close(lb);
}

static void test_self_send_and_empty(void **state) {
  (void)state;
  strata_loopback *lb = open_hub(1, g_seed, 2, 1);
  strata_transport t = endpoint(lb, 0);
  strata_req q[2] = {{0}};
  char none = 'z';
  assert_int_equal(t.isend(t.impl, NULL, 0, 0, 3, &q[0]), 0);
  assert_int_equal(t.irecv(t.impl, &none, 0, 0, 3, &q[1]), 0);
  wait_req(&t, &q[1], 10);
  wait_req(&t, &q[0], 10);
  assert_int_equal(none, 'z');
  strata_loopback_close(lb);
}

static void test_null_requests(void **state) {
  (void)state;
  strata_loopback *lb = open_hub(2, g_seed, 3, 1);
  strata_transport t = endpoint(lb, 0);
  strata_req r = {0};
  int done = 0;
  assert_int_equal(t.test(t.impl, &r, &done), 0);
  assert_int_equal(done, 1);
  strata_req v[3] = {{0}};
  int all = 0;
  assert_int_equal(t.test_all(t.impl, v, 3, &all), 0);
  assert_int_equal(all, 1);
  assert_int_equal(t.test_all(t.impl, NULL, 0, &all), 0);
  assert_int_equal(all, 1);
  strata_loopback_close(lb);
}

static void test_unknown_request(void **state) {
  (void)state;
  strata_loopback *lb = open_hub(2, g_seed, 0, 0);
  strata_transport a = endpoint(lb, 0);
  strata_req s = {0};
  int x = 1, done = 0;
  assert_int_equal(a.isend(a.impl, &x, sizeof x, 1, 1, &s), 0);
  strata_req copy = s;
  wait_req(&a, &s, 10);
  /* A completed request's handle is dead, even if its slot is reused. */
  assert_int_equal(a.test(a.impl, &copy, &done), STRATA_ECOMM);
  assert_int_equal(a.isend(a.impl, &x, sizeof x, 1, 1, &s), 0);
  assert_int_equal(a.test(a.impl, &copy, &done), STRATA_ECOMM);
  strata_req bogus = {.h = 12345};
  assert_int_equal(a.test(a.impl, &bogus, &done), STRATA_ECOMM);
  wait_req(&a, &s, 10);
  strata_loopback_close(lb);
}

/* ---- the length check ---------------------------------------------- */

/* cancel takes back a receive no message has reached (it completes with
 * nothing written, and the message waits for the next receive); one that
 * has its message, and a send, complete as usual. */
static void test_cancel(void **state) {
  (void)state;
  strata_loopback *lb = open_hub(2, g_seed, 0, 0);
  strata_transport a = endpoint(lb, 0), b = endpoint(lb, 1);
  int32_t got = 7, out = 5;
  strata_req r = {0}, s = {0};
  assert_int_equal(b.irecv(b.impl, &got, sizeof got, 0, 3, &r), 0);
  assert_int_equal(b.cancel(b.impl, &r), 0);
  assert_int_equal(wait_req(&b, &r, 1), 1);
  assert_int_equal(got, 7);
  /* The message sent after the cancel is the next receive's. */
  assert_int_equal(a.isend(a.impl, &out, sizeof out, 1, 3, &s), 0);
  assert_int_equal(b.irecv(b.impl, &got, sizeof got, 0, 3, &r), 0);
  wait_req(&b, &r, 10);
  assert_int_equal(got, 5);
  wait_req(&a, &s, 10);
  /* Matched before the cancel: delivered all the same. */
  out = 6;
  assert_int_equal(a.isend(a.impl, &out, sizeof out, 1, 3, &s), 0);
  assert_int_equal(b.irecv(b.impl, &got, sizeof got, 0, 3, &r), 0);
  int any = 0, src = 0;
  void *buf = NULL;
  size_t len = 0;
  assert_int_equal(b.poll(b.impl, 99, &any, &src, &buf, &len), 0); /* one call: it lands */
  assert_int_equal(any, 0);
  assert_int_equal(b.cancel(b.impl, &r), 0);
  assert_int_equal(wait_req(&b, &r, 1), 1);
  assert_int_equal(got, 6);
  wait_req(&a, &s, 10);
  /* A send is left alone. */
  assert_int_equal(a.isend(a.impl, &out, sizeof out, 1, 4, &s), 0);
  assert_int_equal(a.cancel(a.impl, &s), 0);
  wait_req(&a, &s, 10);
  assert_int_equal(b.irecv(b.impl, &got, sizeof got, 0, 4, &r), 0);
  wait_req(&b, &r, 10);
  strata_loopback_close(lb);
}

static void test_length_mismatch(void **state) {
  (void)state;
  strata_loopback *lb = open_hub(2, g_seed, 2, 1);
  strata_transport a = endpoint(lb, 0), b = endpoint(lb, 1);
  int32_t four[1] = {42};
  int64_t eight[1] = {-1};
  strata_req s[2] = {{0}}, r = {0};
  assert_int_equal(a.isend(a.impl, four, sizeof four, 1, 9, &s[0]), 0);
  assert_int_equal(a.isend(a.impl, eight, sizeof eight, 1, 9, &s[1]), 0);

  /* Shorter than posted. */
  int64_t big = 0;
  assert_int_equal(b.irecv(b.impl, &big, sizeof big, 0, 9, &r), 0);
  int rc = 0, done = 0;
  for (int i = 0; i < 10 && !done; i++) rc = b.test(b.impl, &r, &done);
  assert_int_equal(done, 1);
  assert_int_equal(rc, STRATA_ECOMM);
  assert_int_equal(r.h, 0);
  assert_non_null(strstr(strata_err_msg(), "has 4 bytes, expected 8"));

  /* Longer than posted: an error too, and nothing written past the buffer
   * (ASan watches the 4-byte heap buffer). */
  int32_t *small = strata_malloc(sizeof *small);
  assert_int_equal(b.irecv(b.impl, small, sizeof *small, 0, 9, &r), 0);
  done = 0;
  for (int i = 0; i < 10 && !done; i++) rc = b.test_all(b.impl, &r, 1, &done);
  assert_int_equal(done, 1);
  assert_int_equal(rc, STRATA_ECOMM);
  assert_int_equal(r.h, 0);
  assert_non_null(strstr(strata_err_msg(), "has 8 bytes, expected 4"));
  strata_free(small);

  int all = 0;
  for (int i = 0; i < 10 && !all; i++) assert_int_equal(a.test_all(a.impl, s, 2, &all), 0);
  assert_int_equal(all, 1);
  strata_loopback_close(lb);
}

/* ---- matching --------------------------------------------------------- */

/* Receives posted before the messages arrive and after: each message goes
 * to the earliest posted receive with its (source, tag), in send order. */
static void test_matching_order(void **state) {
  (void)state;
  for (int k = 0; k < 8; k++) {
    strata_loopback *lb = open_hub(3, g_seed + (uint64_t)k, k % 4, k % 2);
    strata_transport a = endpoint(lb, 0), c = endpoint(lb, 1), b = endpoint(lb, 2);
    enum { N = 6 };
    int32_t va[N], vc[N], ra[N], rc_[N];
    strata_req sa[N], sc[N], qa[N], qc[N];
    /* Half the receives first, then all the sends, then the rest. */
    for (int i = 0; i < N / 2; i++) {
      assert_int_equal(b.irecv(b.impl, &ra[i], sizeof ra[i], 0, 4, &qa[i]), 0);
      assert_int_equal(b.irecv(b.impl, &rc_[i], sizeof rc_[i], 1, 4, &qc[i]), 0);
    }
    for (int i = 0; i < N; i++) {
      va[i] = 100 + i;
      vc[i] = 200 + i;
      assert_int_equal(a.isend(a.impl, &va[i], sizeof va[i], 2, 4, &sa[i]), 0);
      assert_int_equal(c.isend(c.impl, &vc[i], sizeof vc[i], 2, 4, &sc[i]), 0);
    }
    /* Let some arrive unmatched before the remaining receives are posted. */
    int all = 0;
    assert_int_equal(b.test_all(b.impl, qa, N / 2, &all), 0);
    assert_int_equal(b.test_all(b.impl, qc, N / 2, &all), 0);
    for (int i = N / 2; i < N; i++) {
      assert_int_equal(b.irecv(b.impl, &ra[i], sizeof ra[i], 0, 4, &qa[i]), 0);
      assert_int_equal(b.irecv(b.impl, &rc_[i], sizeof rc_[i], 1, 4, &qc[i]), 0);
    }
    for (int i = 0; i < N; i++) {
      wait_req(&b, &qa[i], 50);
      wait_req(&b, &qc[i], 50);
      assert_int_equal(ra[i], 100 + i);
      assert_int_equal(rc_[i], 200 + i);
    }
    for (int i = 0; i < N; i++) {
      wait_req(&a, &sa[i], 50);
      wait_req(&c, &sc[i], 50);
    }
    strata_loopback_close(lb);
  }
}

/* A receive on another tag or from another source does not take the
 * message; the one that matches does, even posted later. */
static void test_matching_by_source_and_tag(void **state) {
  (void)state;
  strata_loopback *lb = open_hub(3, g_seed, 1, 1);
  strata_transport a = endpoint(lb, 0), b = endpoint(lb, 1);
  int32_t x = 5, y = 0, z = 0, w = 0;
  strata_req s = {0}, r1 = {0}, r2 = {0}, r3 = {0};
  assert_int_equal(b.irecv(b.impl, &y, sizeof y, 0, 8, &r1), 0);
  assert_int_equal(b.irecv(b.impl, &z, sizeof z, 2, 7, &r2), 0);
  assert_int_equal(a.isend(a.impl, &x, sizeof x, 1, 7, &s), 0);
  for (int i = 0; i < 10; i++) {
    int done = 0;
    assert_int_equal(b.test(b.impl, &r1, &done), 0);
    assert_int_equal(done, 0);
    assert_int_equal(b.test(b.impl, &r2, &done), 0);
    assert_int_equal(done, 0);
  }
  assert_int_equal(b.irecv(b.impl, &w, sizeof w, 0, 7, &r3), 0);
  wait_req(&b, &r3, 3);
  assert_int_equal(w, 5);
  assert_int_equal(y, 0);
  assert_int_equal(z, 0);
  wait_req(&a, &s, 10);
  /* Receives never matched are dropped with the hub. */
  strata_loopback_close(lb);
}

/* ---- poll ------------------------------------------------------------- */

static void test_poll_any_source(void **state) {
  (void)state;
  strata_loopback *lb = open_hub(4, g_seed, 2, 1);
  strata_transport t[4];
  for (int r = 0; r < 4; r++) t[r] = endpoint(lb, r);
  strata_req s[3] = {{0}}, e = {0};
  int32_t v[3] = {10, 11, 12};
  for (int r = 0; r < 3; r++) assert_int_equal(t[r].isend(t[r].impl, &v[r], sizeof v[r], 3, 20, &s[r]), 0);
  assert_int_equal(t[0].isend(t[0].impl, NULL, 0, 3, 21, &e), 0);
  int seen[3] = {0}, got = 0, src = -1, calls = 0;
  void *buf = NULL;
  size_t len = 0;
  while (seen[0] + seen[1] + seen[2] < 3) {
    assert_true(++calls < 50);
    assert_int_equal(t[3].poll(t[3].impl, 20, &got, &src, &buf, &len), 0);
    if (!got) {
      assert_null(buf);
      continue;
    }
    assert_true(src >= 0 && src < 3);
    assert_int_equal(len, sizeof(int32_t));
    assert_int_equal(*(int32_t *)buf, 10 + src);
    seen[src]++;
    strata_free(buf);
  }
  assert_int_equal(seen[0] * seen[1] * seen[2], 1);
  /* Nothing more on tag 20; the empty message on 21 is a 1-byte buffer. */
  assert_int_equal(t[3].poll(t[3].impl, 20, &got, &src, &buf, &len), 0);
  assert_int_equal(got, 0);
  for (calls = 0; calls < 50; calls++) {
    assert_int_equal(t[3].poll(t[3].impl, 21, &got, &src, &buf, &len), 0);
    if (got) break;
  }
  assert_int_equal(got, 1);
  assert_int_equal(src, 0);
  assert_int_equal(len, 0);
  assert_non_null(buf);
  strata_free(buf);
  for (int r = 0; r < 3; r++) wait_req(&t[r], &s[r], 10);
  wait_req(&t[0], &e, 10);
  strata_loopback_close(lb);
}

/* ---- test_all --------------------------------------------------------- */

static void test_test_all(void **state) {
  (void)state;
  strata_loopback *lb = open_hub(2, g_seed, 4, 1);
  strata_transport a = endpoint(lb, 0), b = endpoint(lb, 1);
  enum { N = 9 };
  int32_t out[N], in[N];
  strata_req q[2 * N + 3];
  memset(q, 0, sizeof q);
  /* Null requests sprinkled among sends and receives on one endpoint. */
  for (int i = 0; i < N; i++) {
    out[i] = i * i;
    in[i] = -1;
    assert_int_equal(a.isend(a.impl, &out[i], sizeof out[i], 1, i % 3, &q[2 * i]), 0);
    assert_int_equal(a.irecv(a.impl, &in[i], sizeof in[i], 1, 50 + i % 2, &q[2 * i + 1]), 0);
  }
  int all = 0, calls = 0;
  assert_int_equal(a.test_all(a.impl, q, 2 * N + 3, &all), 0);
  assert_int_equal(all, 0); /* the receives cannot have completed */
  /* b echoes everything back, shifted by 1000. */
  int echoed = 0;
  strata_req back[N];
  memset(back, 0, sizeof back);
  int32_t bv[N];
  while (echoed < N) {
    assert_true(++calls < 200);
    for (int tag = 0; tag < 3; tag++) {
      int got, src;
      void *buf;
      size_t len;
      assert_int_equal(b.poll(b.impl, tag, &got, &src, &buf, &len), 0);
      if (!got) continue;
      assert_int_equal(src, 0);
      int32_t x;
      memcpy(&x, buf, sizeof x);
      strata_free(buf);
      bv[echoed] = x + 1000;
      assert_int_equal(b.isend(b.impl, &bv[echoed], sizeof bv[echoed], 0, 50 + echoed % 2, &back[echoed]), 0);
      echoed++;
    }
  }
  for (calls = 0; !all; calls++) {
    assert_true(calls < 200);
    assert_int_equal(a.test_all(a.impl, q, 2 * N + 3, &all), 0);
    int none = 1;
    assert_int_equal(b.test_all(b.impl, back, N, &none), 0);
  }
  for (int i = 0; i < 2 * N + 3; i++) assert_int_equal(q[i].h, 0);
  /* Each tag's echoes come back in order; tags 50 and 51 alternate. */
  int sum = 0;
  for (int i = 0; i < N; i++) {
    assert_true(in[i] >= 1000);
    sum += in[i] - 1000;
  }
  int want = 0;
  for (int i = 0; i < N; i++) want += i * i;
  assert_int_equal(sum, want);
  for (calls = 0; calls < 50; calls++) {
    assert_int_equal(b.test_all(b.impl, back, N, &all), 0);
    if (all) break;
  }
  assert_int_equal(all, 1);
  strata_loopback_close(lb);
}

/* ---- ordering --------------------------------------------------------- */

enum { SENDERS = 3, TAGS = 2, PER = 40 };

typedef struct trace {
  int src[SENDERS * TAGS * PER], tag[SENDERS * TAGS * PER], seq[SENDERS * TAGS * PER];
  int n;
  int calls;
} trace;

/* Senders 0..2 interleave messages on tags 0 and 1 to rank 3 (numbered in
 * send order), while rank 3 polls now and then; records what arrives. */
static void run_order(uint64_t seed, int max_delay, int reorder, trace *tr) {
  strata_loopback *lb = open_hub(SENDERS + 1, seed, max_delay, reorder);
  strata_transport t[SENDERS + 1];
  for (int r = 0; r <= SENDERS; r++) t[r] = endpoint(lb, r);
  strata_rng rng;
  strata_rng_seed(&rng, seed ^ 0x5eed);
  enum { TOTAL = SENDERS * TAGS * PER };
  static strata_req reqs[SENDERS][TAGS * PER];
  static int32_t vals[SENDERS][TAGS * PER];
  int sent[SENDERS] = {0};
  memset(tr, 0, sizeof *tr);
  int global = 0;
  while (tr->n < TOTAL) {
    assert_true(++tr->calls < 100000);
    int r = (int)strata_rng_below(&rng, SENDERS + 1);
    if (r < SENDERS && sent[r] < TAGS * PER) {
      int i = sent[r]++;
      vals[r][i] = global++;
      assert_int_equal(t[r].isend(t[r].impl, &vals[r][i], sizeof vals[r][i], SENDERS, i % TAGS, &reqs[r][i]), 0);
      continue;
    }
    for (int tag = 0; tag < TAGS; tag++) {
      int got, src;
      void *buf;
      size_t len;
      assert_int_equal(t[SENDERS].poll(t[SENDERS].impl, tag, &got, &src, &buf, &len), 0);
      if (!got) continue;
      assert_int_equal(len, sizeof(int32_t));
      int32_t v;
      memcpy(&v, buf, sizeof v);
      strata_free(buf);
      tr->src[tr->n] = src;
      tr->tag[tr->n] = tag;
      tr->seq[tr->n] = v;
      tr->n++;
    }
  }
  for (int r = 0; r < SENDERS; r++) {
    int all = 0;
    for (int k = 0; k < 100 && !all; k++) assert_int_equal(t[r].test_all(t[r].impl, reqs[r], TAGS * PER, &all), 0);
    assert_int_equal(all, 1);
  }
  strata_loopback_close(lb);
}

/* Messages of one (source, tag) never overtake each other. Returns how
 * often a message came after a later-sent one of its tag (from another
 * source): never without reorder, since poll takes a tag's messages in
 * arrival order. */
static int check_fifo(const trace *tr) {
  int last[SENDERS][TAGS], prev[TAGS];
  for (int g = 0; g < TAGS; g++) {
    prev[g] = -1;
    for (int r = 0; r < SENDERS; r++) last[r][g] = -1;
  }
  int inversions = 0;
  for (int i = 0; i < tr->n; i++) {
    int *l = &last[tr->src[i]][tr->tag[i]];
    assert_true(tr->seq[i] > *l);
    *l = tr->seq[i];
    inversions += tr->seq[i] < prev[tr->tag[i]];
    prev[tr->tag[i]] = tr->seq[i];
  }
  return inversions;
}

static void test_fifo_under_reorder(void **state) {
  (void)state;
  static trace tr;
  int total_inv = 0;
  for (int k = 0; k < 6; k++) {
    uint64_t seed = g_seed + (uint64_t)k;
    run_order(seed, k % 3 * 2, 1, &tr);
    total_inv += check_fifo(&tr);
  }
  /* Reordering did happen across sources (240 messages per run). */
  assert_true(total_inv > 0);
}

/* Polling one tag at a time reorders tags by itself; what never changes
 * without reorder is each tag's order across sources, under any delay. */
static void test_no_reorder_keeps_send_order(void **state) {
  (void)state;
  static trace tr;
  for (int k = 0; k < 4; k++) {
    run_order(g_seed + (uint64_t)k, k, 0, &tr);
    assert_int_equal(check_fifo(&tr), 0);
  }
}

static void test_same_seed_same_run(void **state) {
  (void)state;
  static trace x, y;
  run_order(g_seed, 3, 1, &x);
  run_order(g_seed, 3, 1, &y);
  assert_int_equal(x.n, y.n);
  assert_memory_equal(x.seq, y.seq, sizeof x.seq);
  assert_memory_equal(x.src, y.src, sizeof x.src);
  assert_int_equal(x.calls, y.calls);
}

/* ---- delays ----------------------------------------------------------- */

static void test_delay_counted_in_calls(void **state) {
  (void)state;
  for (int D = 0; D <= 4; D++) {
    strata_loopback *lb = open_hub(2, g_seed + (uint64_t)D, D, 1);
    strata_transport a = endpoint(lb, 0), b = endpoint(lb, 1);
    int longest = 0;
    for (int i = 0; i < 60; i++) {
      strata_req s = {0};
      int32_t v = i;
      assert_int_equal(a.isend(a.impl, &v, sizeof v, 1, 1, &s), 0);
      /* The receiver's calls alone count, whatever time passes. */
      int calls = 0, got = 0, src;
      void *buf;
      size_t len;
      while (!got) {
        calls++;
        assert_true(calls <= D + 1);
        assert_int_equal(b.poll(b.impl, 1, &got, &src, &buf, &len), 0);
      }
      assert_int_equal(*(int32_t *)buf, i);
      strata_free(buf);
      if (calls > longest) longest = calls;
      int sc = wait_req(&a, &s, D + 1);
      if (sc > longest) longest = sc;
    }
    /* With 60 draws in [0, D], the longest delay is all but sure to occur. */
    assert_int_equal(longest, D + 1);
    strata_loopback_close(lb);
  }
}

/* ---- threads ---------------------------------------------------------- */

enum { TR = 4, TMSG = 300 };

typedef struct th_arg {
  strata_loopback *lb;
  int rank;
  int bad; /* first failure, described in msg */
  char msg[160];
} th_arg;

/* Every rank sends TMSG numbered messages to every other rank on two tags,
 * waiting on a random few receives at a time: each rank checks order per
 * (source, tag). CMocka's assertions belong to the main thread, so each
 * thread records its first failure. */
static void *th_main(void *p) {
  th_arg *ar = p;
  strata_transport t;
  if (strata_loopback_endpoint(ar->lb, ar->rank, &t)) goto bad;
  static _Thread_local int32_t out[TR][TMSG], in[TR][TMSG];
  static _Thread_local strata_req sq[TR][TMSG], rq[TR][TMSG];
  memset(sq, 0, sizeof sq);
  memset(rq, 0, sizeof rq);
  for (int i = 0; i < TMSG; i++)
    for (int r = 0; r < TR; r++) {
      if (r == ar->rank) continue;
      out[r][i] = ar->rank * 100000 + i;
      if (t.isend(t.impl, &out[r][i], sizeof out[r][i], r, i % 2, &sq[r][i])) goto bad;
      if (t.irecv(t.impl, &in[r][i], sizeof in[r][i], r, i % 2, &rq[r][i])) goto bad;
    }
  for (int r = 0; r < TR; r++) {
    for (;;) {
      int a = 0, b = 0;
      if (t.test_all(t.impl, sq[r], TMSG, &a) || t.test_all(t.impl, rq[r], TMSG, &b)) goto bad;
      if (a && b) break;
    }
  }
  for (int r = 0; r < TR; r++)
    for (int i = 0; r != ar->rank && i < TMSG; i++)
      if (in[r][i] != r * 100000 + i) {
        snprintf(ar->msg, sizeof ar->msg, "rank %d got %d from %d at %d", ar->rank, in[r][i], r, i);
        ar->bad = 1;
        return NULL;
      }
  return NULL;
bad:
  snprintf(ar->msg, sizeof ar->msg, "rank %d: %s", ar->rank, strata_err_msg());
  ar->bad = 1;
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  for (int k = 0; k < 3; k++) {
    strata_loopback *lb = open_hub(TR, g_seed + (uint64_t)k, 3, 1);
    pthread_t th[TR];
    th_arg ar[TR];
    for (int r = 0; r < TR; r++) {
      ar[r] = (th_arg){.lb = lb, .rank = r};
      assert_int_equal(pthread_create(&th[r], NULL, th_main, &ar[r]), 0);
    }
    for (int r = 0; r < TR; r++) assert_int_equal(pthread_join(th[r], NULL), 0);
    for (int r = 0; r < TR; r++)
      if (ar[r].bad) fail_msg("%s", ar[r].msg);
    strata_loopback_close(lb);
  }
}

/* ---- teardown --------------------------------------------------------- */

static void test_close_frees_in_flight(void **state) {
  (void)state;
  strata_loopback *lb = open_hub(3, g_seed, 5, 1);
  strata_transport a = endpoint(lb, 0), b = endpoint(lb, 1);
  char big[4096] = {1};
  strata_req s[8] = {{0}}, r = {0};
  for (int i = 0; i < 8; i++) assert_int_equal(a.isend(a.impl, big, sizeof big, 1 + i % 2, i, &s[i]), 0);
  int got, src;
  void *buf;
  size_t len;
  /* Some arrive and stay unreceived, some stay in flight. */
  for (int i = 0; i < 2; i++) assert_int_equal(b.poll(b.impl, 99, &got, &src, &buf, &len), 0);
  assert_int_equal(b.irecv(b.impl, big, sizeof big, 2, 0, &r), 0);
  strata_loopback_close(lb);
  /* The teardown checks that every byte went back. */
}

int main(void) {
  const char *env = getenv("STRATA_TEST_SEED");
  g_seed = env && *env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
  printf("test_loopback: seed %llu (STRATA_TEST_SEED=X replays it)\n", (unsigned long long)g_seed);
  fflush(stdout);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_open_invalid, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_peer_and_tag, setup, teardown),
      cmocka_unit_test_setup_teardown(test_point_to_point, setup, teardown),
      cmocka_unit_test_setup_teardown(test_self_send_and_empty, setup, teardown),
      cmocka_unit_test_setup_teardown(test_null_requests, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_request, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_length_mismatch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_matching_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_matching_by_source_and_tag, setup, teardown),
      cmocka_unit_test_setup_teardown(test_poll_any_source, setup, teardown),
      cmocka_unit_test_setup_teardown(test_test_all, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fifo_under_reorder, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_reorder_keeps_send_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_same_seed_same_run, setup, teardown),
      cmocka_unit_test_setup_teardown(test_delay_counted_in_calls, setup, teardown),
      cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
      cmocka_unit_test_setup_teardown(test_close_frees_in_flight, setup, teardown),
  };
  return cmocka_run_group_tests_name("loopback", tests, NULL, NULL);
}
