/*
 * Unit tests for comm/ps_parts.c, the MPI-free pieces of the parameter
 * server (comm/ps.h): the shard's vector clock, the per-clock oplog and its
 * UPDATE messages, the pure snapshot, the queue of reads waiting for the
 * shard's clock, and the length check every received message goes through.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "leakcheck.h"

#include "comm/ps.h"
#include "strata/core.h"
#include "strata/engine.h"
#include "strata/error.h"

/* ---- vector clock ---------------------------------------------------- */

static void tick_ok(ps_vclock *v, int w, int32_t stamp, int want_advanced, int32_t want_min) {
  int adv = -1;
  assert_int_equal(ps_vclock_tick(v, w, stamp, &adv), 0);
  assert_int_equal(adv, want_advanced);
  assert_int_equal(v->min, want_min);
}

static void test_vclock_in_order(void **state) {
  (void)state;
  ps_vclock v;
  assert_int_equal(ps_vclock_init(&v, 3), 0);
  assert_int_equal(v.n, 3);
  assert_int_equal(v.min, 0);
  for (int w = 0; w < 3; w++) assert_int_equal(v.c[w], 0);

  /* The minimum moves only when the slowest client's batch arrives. */
  tick_ok(&v, 0, 0, 0, 0);
  tick_ok(&v, 1, 0, 0, 0);
  tick_ok(&v, 2, 0, 1, 1);
  /* A fast client runs ahead: its entry advances, the minimum does not. */
  tick_ok(&v, 0, 1, 0, 1);
  tick_ok(&v, 0, 2, 0, 1);
  tick_ok(&v, 0, 3, 0, 1);
  assert_int_equal(v.c[0], 4);
  tick_ok(&v, 1, 1, 0, 1);
  tick_ok(&v, 2, 1, 1, 2); /* c = {4, 2, 2} */
  tick_ok(&v, 1, 2, 0, 2); /* c = {4, 3, 2}: 2 is still the slowest */
  tick_ok(&v, 2, 2, 1, 3); /* c = {4, 3, 3} */
  tick_ok(&v, 1, 3, 0, 3); /* c = {4, 4, 3} */
  tick_ok(&v, 2, 3, 1, 4); /* c = {4, 4, 4} */
  for (int w = 0; w < 3; w++) assert_int_equal(v.c[w], 4);
  ps_vclock_free(&v);
  assert_null(v.c);
  ps_vclock_free(&v); /* twice is harmless */
}

static void test_vclock_one_client(void **state) {
  (void)state;
  ps_vclock v;
  assert_int_equal(ps_vclock_init(&v, 1), 0);
  for (int32_t s = 0; s < 5; s++) tick_ok(&v, 0, s, 1, s + 1);
  ps_vclock_free(&v);
}

static void test_vclock_wrong_stamp(void **state) {
  (void)state;
  ps_vclock v;
  assert_int_equal(ps_vclock_init(&v, 2), 0);
  tick_ok(&v, 0, 0, 0, 0);
  int adv = 7;
  /* Ahead of the expected stamp (a batch skipped). */
  assert_int_equal(ps_vclock_tick(&v, 1, 1, &adv), STRATA_ECOMM);
  assert_int_equal(adv, 0);
  assert_non_null(strstr(strata_err_msg(), "expected 0"));
  /* A replay of a batch already applied. */
  adv = 7;
  assert_int_equal(ps_vclock_tick(&v, 0, 0, &adv), STRATA_ECOMM);
  assert_int_equal(adv, 0);
  assert_non_null(strstr(strata_err_msg(), "expected 1"));
  assert_int_equal(ps_vclock_tick(&v, 0, -1, &adv), STRATA_ECOMM);
  /* Nothing changed on the failures. */
  assert_int_equal(v.c[0], 1);
  assert_int_equal(v.c[1], 0);
  assert_int_equal(v.min, 0);
  /* And the clock still works. */
  tick_ok(&v, 1, 0, 1, 1);
  ps_vclock_free(&v);
}

static void test_vclock_worker_out_of_range(void **state) {
  (void)state;
  ps_vclock v;
  assert_int_equal(ps_vclock_init(&v, 3), 0);
  int adv = 7;
  assert_int_equal(ps_vclock_tick(&v, 3, 0, &adv), STRATA_ECOMM);
  assert_int_equal(adv, 0);
  assert_non_null(strstr(strata_err_msg(), "worker 3"));
  assert_int_equal(ps_vclock_tick(&v, -1, 0, &adv), STRATA_ECOMM);
  assert_int_equal(ps_vclock_tick(&v, 1000, 0, &adv), STRATA_ECOMM);
  for (int w = 0; w < 3; w++) assert_int_equal(v.c[w], 0);
  assert_int_equal(v.min, 0);
  ps_vclock_free(&v);
}

static void test_vclock_init_oom(void **state) {
  (void)state;
  ps_vclock v;
  strata_alloc_fail_after(1);
  assert_int_equal(ps_vclock_init(&v, 4), STRATA_ENOMEM);
  strata_alloc_fail_after(0);
  assert_null(v.c);
  ps_vclock_free(&v);
  assert_int_equal(strata_alloc_live(), live0);
}

/* ---- oplog ------------------------------------------------------------ */

static const float *row_of(const ps_oplog *o, uint32_t r) { return o->delta + (size_t)r * o->row_len; }

static void add3(ps_oplog *o, uint32_t row, float a, float b, float c) {
  const float d[3] = {a, b, c};
  ps_oplog_add(o, row, d);
}

static void test_oplog_coalesces(void **state) {
  (void)state;
  ps_oplog o;
  assert_int_equal(ps_oplog_init(&o, 10, 3), 0);
  assert_int_equal(o.n, 0);
  for (uint32_t r = 0; r < 10; r++) assert_null(ps_oplog_row(&o, r));

  add3(&o, 7, 1, 2, 3);
  add3(&o, 2, -1, 0, 0.5f);
  add3(&o, 7, 10, 20, 30);
  add3(&o, 7, 100, 200, 300);
  /* One entry per row, however many adds. */
  assert_int_equal(o.n, 2);
  assert_int_equal(o.list[0], 7);
  assert_int_equal(o.list[1], 2);
  assert_true(o.touched[7] & PS_OPLOG_PENDING);
  assert_true(o.touched[2] & PS_OPLOG_PENDING);
  const float *r7 = ps_oplog_row(&o, 7);
  assert_non_null(r7);
  assert_true(r7[0] == 111 && r7[1] == 222 && r7[2] == 333);
  const float *r2 = ps_oplog_row(&o, 2);
  assert_non_null(r2);
  assert_true(r2[0] == -1 && r2[1] == 0 && r2[2] == 0.5f);
  for (uint32_t r = 0; r < 10; r++) {
    if (r == 2 || r == 7) continue;
    assert_null(ps_oplog_row(&o, r));
    assert_int_equal(o.touched[r], 0);
    for (int j = 0; j < 3; j++) assert_true(row_of(&o, r)[j] == 0);
  }
  /* A zero delta still touches the row (it goes out as a zero row). */
  add3(&o, 9, 0, 0, 0);
  assert_int_equal(o.n, 3);
  assert_non_null(ps_oplog_row(&o, 9));
  ps_oplog_free(&o);
}

/* The UPDATE for shard X of P holds exactly the touched rows r with
 * r % P == X, ascending, with their sums. */
static void check_pack(const ps_oplog *o, int shard, int P, int from, int32_t stamp) {
  void *m = NULL;
  size_t len = 0;
  assert_int_equal(ps_oplog_pack(o, shard, P, from, stamp, 0, 0, NULL, 0, &m, &len), 0);
  assert_non_null(m);
  uint32_t want = 0;
  for (uint32_t r = 0; r < o->n_rows; r++) want += o->touched[r] && (int)(r % (uint32_t)P) == shard;
  ps_hdr *h = m;
  assert_int_equal(h->type, PS_UPDATE);
  assert_int_equal(h->from, from);
  assert_int_equal(h->clock, stamp);
  assert_int_equal(h->nrows, want);
  assert_int_equal(h->flags, 0);
  assert_int_equal(len, ps_msg_size(want, o->row_len, 1));
  assert_int_equal(ps_msg_check(m, len, o->row_len, 0), 0);
  const uint32_t *rows = ps_msg_rows(m);
  const float *vals = ps_msg_vals(m);
  uint32_t k = 0;
  for (uint32_t r = 0; r < o->n_rows; r++) {
    if (!o->touched[r] || (int)(r % (uint32_t)P) != shard) continue;
    assert_true(k < h->nrows);
    assert_int_equal(rows[k], r); /* ascending, none missing, none extra */
    assert_memory_equal(vals + (size_t)k * o->row_len, row_of(o, r), o->row_len * sizeof(float));
    k++;
  }
  assert_int_equal(k, h->nrows);
  strata_free(m);
}

static void test_oplog_pack(void **state) {
  (void)state;
  ps_oplog o;
  assert_int_equal(ps_oplog_init(&o, 20, 3), 0);
  /* Touched out of order, some twice. */
  const uint32_t order[] = {17, 3, 9, 4, 12, 0, 17, 15, 3, 19};
  for (size_t i = 0; i < sizeof order / sizeof *order; i++)
    add3(&o, order[i], (float)order[i], (float)i, 1);
  assert_int_equal(o.n, 8);

  /* P = 3, by hand: shard 0 gets 0 3 9 12 15, shard 1 gets 4 19, shard 2 gets 17. */
  void *m;
  size_t len;
  assert_int_equal(ps_oplog_pack(&o, 0, 3, 2, 41, 0, 0, NULL, 0, &m, &len), 0);
  ps_hdr *h = m;
  assert_int_equal(h->nrows, 5);
  const uint32_t want0[] = {0, 3, 9, 12, 15};
  assert_memory_equal(ps_msg_rows(m), want0, sizeof want0);
  /* Row 3 was added twice: (3, 1, 1) + (3, 8, 1). */
  const float *v3 = ps_msg_vals(m) + 1 * 3;
  assert_true(v3[0] == 6 && v3[1] == 9 && v3[2] == 2);
  strata_free(m);
  assert_int_equal(ps_oplog_pack(&o, 1, 3, 2, 41, 0, 0, NULL, 0, &m, &len), 0);
  h = m;
  assert_int_equal(h->nrows, 2);
  const uint32_t want1[] = {4, 19};
  assert_memory_equal(ps_msg_rows(m), want1, sizeof want1);
  strata_free(m);

  /* Every shard of several shard counts, including P = 1 and P > n_rows. */
  const int Ps[] = {1, 2, 3, 4, 7, 25};
  for (size_t i = 0; i < sizeof Ps / sizeof *Ps; i++)
    for (int X = 0; X < Ps[i]; X++) check_pack(&o, X, Ps[i], X, (int32_t)i);

  /* The message is a snapshot: later adds do not change it. */
  assert_int_equal(ps_oplog_pack(&o, 2, 3, 0, 5, 0, 0, NULL, 0, &m, &len), 0);
  h = m;
  assert_int_equal(h->nrows, 1);
  assert_int_equal(ps_msg_rows(m)[0], 17);
  float before = ps_msg_vals(m)[0];
  add3(&o, 17, 1000, 0, 0);
  assert_true(ps_msg_vals(m)[0] == before);
  strata_free(m);
  ps_oplog_free(&o);
}

/* ---- pure snapshot --------------------------------------------------- */

/* An UPDATE from worker `from` stamped `stamp` adding x to global row g
 * (P = 2, one float per row). */
static void *update1(int from, int32_t stamp, uint32_t g, float x, size_t *len) {
  ps_oplog o;
  assert_int_equal(ps_oplog_init(&o, 8, 1), 0);
  ps_oplog_add(&o, g, &x);
  void *m;
  assert_int_equal(ps_oplog_pack(&o, (int)(g % 2), 2, from, stamp, 0, 0, NULL, 0, &m, len), 0);
  ps_oplog_free(&o);
  return m;
}

static void test_snapshot_canonical_order(void **state) {
  (void)state;
  /* Shard 0 of P = 2: global rows 0, 2, 4, 6, one float each. Row 0 shows
   * the order of float additions: 1e8 - 1e8 + 1 is 1, 1e8 + 1 - 1e8 is 0. */
  const float init[4] = {1e8f, 10, 20, 30};
  ps_snapshot sn;
  assert_int_equal(ps_snapshot_init(&sn, 2, 4, 1, init), 0);
  /* One batch per (worker, stamp), arriving out of order. */
  struct {
    int from;
    int32_t stamp;
    uint32_t g;
    float x;
  } arrive[] = {{1, 0, 0, 1.0f}, {1, 1, 2, 5.0f}, {0, 0, 0, -1e8f},
                {1, 2, 4, 7.0f}, {0, 1, 0, 2.0f}, {0, 2, 6, 9.0f}};
  for (size_t i = 0; i < sizeof arrive / sizeof *arrive; i++) {
    size_t len;
    void *m = update1(arrive[i].from, arrive[i].stamp, arrive[i].g, arrive[i].x, &len);
    assert_int_equal(ps_snapshot_hold(&sn, m), 0); /* the snapshot owns it now */
  }
  assert_int_equal(sn.n_held, 6);
  ps_snapshot_advance(&sn, 1);
  /* Stamp 0 in worker order, whatever the arrival order. */
  assert_true(sn.vals[0] == 1.0f);
  assert_true(sn.vals[1] == 10 && sn.vals[2] == 20 && sn.vals[3] == 30);
  assert_int_equal(sn.clock, 1);
  assert_int_equal(sn.n_held, 4);
  ps_snapshot_advance(&sn, 2);
  assert_true(sn.vals[0] == 3.0f && sn.vals[1] == 15.0f);
  /* Stamp 2 is held, not in. */
  assert_true(sn.vals[2] == 20 && sn.vals[3] == 30);
  assert_int_equal(sn.n_held, 2);
  /* Advancing to where it already is changes nothing. */
  ps_snapshot_advance(&sn, 2);
  assert_int_equal(sn.n_held, 2);
  ps_snapshot_advance(&sn, 3);
  assert_true(sn.vals[2] == 27 && sn.vals[3] == 39);
  assert_int_equal(sn.n_held, 0);
  ps_snapshot_free(&sn);
}

static void test_snapshot_oom(void **state) {
  (void)state;
  const float init[2] = {1, 2};
  ps_snapshot sn;
  strata_alloc_fail_after(1);
  assert_int_equal(ps_snapshot_init(&sn, 2, 2, 1, init), STRATA_ENOMEM);
  strata_alloc_fail_after(0);
  assert_int_equal(ps_snapshot_init(&sn, 2, 2, 1, init), 0);
  size_t len;
  void *m = update1(0, 0, 0, 1.0f, &len);
  /* Failing, the caller keeps the message. */
  strata_alloc_fail_after(1);
  assert_int_equal(ps_snapshot_hold(&sn, m), STRATA_ENOMEM);
  strata_alloc_fail_after(0);
  assert_int_equal(sn.n_held, 0);
  assert_int_equal(ps_snapshot_hold(&sn, m), 0);
  /* Freeing frees what is held. */
  ps_snapshot_free(&sn);
}

static void test_oplog_pack_empty_shard(void **state) {
  (void)state;
  ps_oplog o;
  assert_int_equal(ps_oplog_init(&o, 12, 2), 0);
  void *m;
  size_t len;
  /* Nothing touched at all. */
  assert_int_equal(ps_oplog_pack(&o, 0, 2, 1, 3, 0, 0, NULL, 0, &m, &len), 0);
  ps_hdr *h = m;
  assert_int_equal(h->type, PS_UPDATE);
  assert_int_equal(h->from, 1);
  assert_int_equal(h->clock, 3);
  assert_int_equal(h->nrows, 0);
  assert_int_equal(len, sizeof(ps_hdr));
  assert_int_equal(ps_msg_check(m, len, 2, 0), 0);
  strata_free(m);
  /* Touched rows, none on shard 1 of 4 (rows 0, 2, 4 ... are even). */
  const float d[2] = {1, 2};
  ps_oplog_add(&o, 0, d);
  ps_oplog_add(&o, 6, d);
  ps_oplog_add(&o, 10, d);
  assert_int_equal(ps_oplog_pack(&o, 1, 4, 0, 0, 0, 0, NULL, 0, &m, &len), 0);
  h = m;
  assert_int_equal(h->nrows, 0);
  assert_int_equal(len, sizeof(ps_hdr));
  strata_free(m);
  assert_int_equal(ps_oplog_pack(&o, 3, 4, 0, 0, 0, 0, NULL, 0, &m, &len), 0);
  assert_int_equal(((ps_hdr *)m)->nrows, 0);
  strata_free(m);
  check_pack(&o, 2, 4, 0, 0); /* rows 6 and 10 */
  ps_oplog_free(&o);
}

static void test_oplog_clear(void **state) {
  (void)state;
  ps_oplog o;
  assert_int_equal(ps_oplog_init(&o, 8, 3), 0);
  add3(&o, 5, 1, 2, 3);
  add3(&o, 1, 4, 5, 6);
  add3(&o, 5, 1, 1, 1);
  /* Clear costs only the touched rows: a value planted in an untouched row
   * (which the oplog never does itself) shows that it is not scanned. */
  o.delta[3 * 3 + 1] = 42;
  ps_oplog_clear(&o);
  assert_int_equal(o.n, 0);
  for (uint32_t r = 0; r < 8; r++) {
    assert_int_equal(o.touched[r], 0);
    assert_null(ps_oplog_row(&o, r));
  }
  for (uint32_t r = 0; r < 8; r++)
    for (int j = 0; j < 3; j++)
      assert_true(row_of(&o, r)[j] == (r == 3 && j == 1 ? 42.0f : 0.0f));
  o.delta[3 * 3 + 1] = 0;

  /* Sums start again from zero. */
  add3(&o, 5, 2, 2, 2);
  assert_int_equal(o.n, 1);
  assert_int_equal(o.list[0], 5);
  const float *r5 = ps_oplog_row(&o, 5);
  assert_true(r5[0] == 2 && r5[1] == 2 && r5[2] == 2);
  void *m;
  size_t len;
  assert_int_equal(ps_oplog_pack(&o, 1, 2, 0, 1, 0, 0, NULL, 0, &m, &len), 0);
  assert_int_equal(((ps_hdr *)m)->nrows, 1);
  strata_free(m);
  assert_int_equal(ps_oplog_pack(&o, 0, 2, 0, 1, 0, 0, NULL, 0, &m, &len), 0);
  assert_int_equal(((ps_hdr *)m)->nrows, 0);
  strata_free(m);
  ps_oplog_clear(&o);
  ps_oplog_clear(&o); /* clearing an empty oplog is harmless */
  assert_int_equal(o.n, 0);
  ps_oplog_free(&o);
}

/* Touching every row: the list has room for all of them. */
static void test_oplog_every_row(void **state) {
  (void)state;
  ps_oplog o;
  assert_int_equal(ps_oplog_init(&o, 33, 1), 0);
  for (int pass = 0; pass < 3; pass++)
    for (uint32_t r = 33; r-- > 0;) {
      float d = (float)r;
      ps_oplog_add(&o, r, &d);
    }
  assert_int_equal(o.n, 33);
  for (uint32_t r = 0; r < 33; r++) assert_true(ps_oplog_row(&o, r)[0] == 3.0f * (float)r);
  for (int X = 0; X < 5; X++) check_pack(&o, X, 5, 1, 9);
  ps_oplog_free(&o);
}

static void test_oplog_init_oom(void **state) {
  (void)state;
  /* Fail each allocation in turn: each failure is reported, nothing leaks. */
  int failures = 0;
  for (long n = 1; n < 16; n++) {
    ps_oplog o;
    strata_alloc_fail_after(n);
    int rc = ps_oplog_init(&o, 100, 3);
    strata_alloc_fail_after(0);
    if (rc == 0) {
      add3(&o, 99, 1, 1, 1);
      assert_non_null(ps_oplog_row(&o, 99));
      ps_oplog_free(&o);
      break;
    }
    assert_int_equal(rc, STRATA_ENOMEM);
    assert_non_null(strstr(strata_err_msg(), "oplog"));
    assert_null(o.delta);
    assert_null(o.touched);
    assert_null(o.list);
    failures++;
    ps_oplog_free(&o);
    assert_int_equal(strata_alloc_live(), live0);
  }
  assert_int_equal(failures, 3);
}

static void test_oplog_pack_oom(void **state) {
  (void)state;
  ps_oplog o;
  assert_int_equal(ps_oplog_init(&o, 4, 2), 0);
  const float d[2] = {1, 1};
  ps_oplog_add(&o, 2, d);
  void *m = (void *)&o;
  size_t len = 123;
  strata_alloc_fail_after(1);
  assert_int_equal(ps_oplog_pack(&o, 0, 2, 0, 0, 0, 0, NULL, 0, &m, &len), STRATA_ENOMEM);
  strata_alloc_fail_after(0);
  /* The oplog is intact: the same pack works afterwards. */
  check_pack(&o, 0, 2, 0, 0);
  ps_oplog_free(&o);
}

/* ---- pending reads ----------------------------------------------------- */

static void take_ok(ps_pending *q, int32_t clock, int client, int32_t min_age, const uint32_t *rows,
                    uint32_t n) {
  ps_read rd;
  memset(&rd, 0xab, sizeof rd);
  assert_int_equal(ps_pending_take(q, clock, &rd), 1);
  assert_int_equal(rd.client, client);
  assert_int_equal(rd.min_age, min_age);
  assert_true(rd.min_age <= clock);
  assert_int_equal(rd.n, n);
  assert_non_null(rd.rows);
  if (n) assert_memory_equal(rd.rows, rows, n * sizeof *rows);
  strata_free(rd.rows);
}

static void take_none(ps_pending *q, int32_t clock) {
  ps_read rd;
  int before = q->n;
  assert_int_equal(ps_pending_take(q, clock, &rd), 0);
  assert_int_equal(q->n, before);
}

static void test_pending_take_ready_in_order(void **state) {
  (void)state;
  ps_pending q;
  memset(&q, 0, sizeof q);
  uint32_t a[] = {1, 2}, b[] = {3}, c[] = {4, 5, 6}, e[] = {7};
  assert_int_equal(ps_pending_add(&q, 0, 5, a, 2), 0);
  assert_int_equal(ps_pending_add(&q, 1, 2, b, 1), 0);
  assert_int_equal(ps_pending_add(&q, 2, 5, c, 3), 0);
  assert_int_equal(ps_pending_add(&q, 1, 1, NULL, 0), 0);
  assert_int_equal(ps_pending_add(&q, 2, 3, e, 1), 0);
  assert_int_equal(q.n, 5);
  /* The queue owns copies: the caller's arrays may change. */
  a[0] = b[0] = c[0] = e[0] = 999;
  const uint32_t a0[] = {1, 2}, b0[] = {3}, c0[] = {4, 5, 6}, e0[] = {7};

  take_none(&q, 0);
  take_ok(&q, 1, 1, 1, NULL, 0);
  take_none(&q, 1);
  /* At 3, two are ready: first come, first out. */
  take_ok(&q, 3, 1, 2, b0, 1);
  take_ok(&q, 3, 2, 3, e0, 1);
  take_none(&q, 3);
  take_none(&q, 4);
  take_ok(&q, 5, 0, 5, a0, 2);
  /* A read arriving later queues behind the ready one. */
  assert_int_equal(ps_pending_add(&q, 0, 0, e0, 1), 0);
  take_ok(&q, 10, 2, 5, c0, 3);
  take_ok(&q, 10, 0, 0, e0, 1);
  take_none(&q, INT32_MAX);
  assert_int_equal(q.n, 0);
  ps_pending_free(&q);
  assert_null(q.v);
  assert_int_equal(q.n, 0);
}

static void test_pending_grows(void **state) {
  (void)state;
  ps_pending q;
  memset(&q, 0, sizeof q);
  /* 50 reads, min ages 0 1 2 0 1 2 ..., through several reallocations. */
  for (uint32_t i = 0; i < 50; i++) assert_int_equal(ps_pending_add(&q, (int)i, (int32_t)(i % 3), &i, 1), 0);
  assert_int_equal(q.n, 50);
  for (uint32_t i = 0; i < 50; i += 3) take_ok(&q, 0, (int)i, 0, &i, 1);
  take_none(&q, 0);
  for (uint32_t i = 0; i < 50; i++)
    if (i % 3) take_ok(&q, 2, (int)i, (int32_t)(i % 3), &i, 1);
  take_none(&q, 100);
  ps_pending_free(&q);
}

static void test_pending_free_with_leftovers(void **state) {
  (void)state;
  ps_pending q;
  memset(&q, 0, sizeof q);
  uint32_t rows[40];
  for (uint32_t i = 0; i < 40; i++) rows[i] = i;
  for (int i = 0; i < 20; i++) assert_int_equal(ps_pending_add(&q, i, 7 + i, rows, (uint32_t)(2 * i)), 0);
  take_ok(&q, 7, 0, 7, rows, 0);
  take_ok(&q, 9, 1, 8, rows, 2);
  assert_int_equal(q.n, 18);
  /* Freeing releases every queued read (leak check in teardown). */
  ps_pending_free(&q);
  assert_int_equal(q.n, 0);
  ps_pending_free(&q); /* twice is harmless */
}

static void test_pending_add_oom(void **state) {
  (void)state;
  ps_pending q;
  memset(&q, 0, sizeof q);
  uint32_t rows[] = {4, 8};
  /* The array of reads. */
  strata_alloc_fail_after(1);
  assert_int_equal(ps_pending_add(&q, 0, 1, rows, 2), STRATA_ENOMEM);
  strata_alloc_fail_after(0);
  assert_int_equal(q.n, 0);
  assert_non_null(strstr(strata_err_msg(), "queueing a read"));
  /* The copy of the rows (the array grew first). */
  strata_alloc_fail_after(2);
  assert_int_equal(ps_pending_add(&q, 0, 1, rows, 2), STRATA_ENOMEM);
  strata_alloc_fail_after(0);
  assert_int_equal(q.n, 0);
  /* The queue still works, and growing it past its capacity may fail too. */
  for (int i = 0; i < 8; i++) assert_int_equal(ps_pending_add(&q, i, i, rows, 2), 0);
  assert_int_equal(q.n, 8);
  strata_alloc_fail_after(1);
  assert_int_equal(ps_pending_add(&q, 8, 0, rows, 2), STRATA_ENOMEM);
  strata_alloc_fail_after(0);
  assert_int_equal(q.n, 8);
  for (int i = 0; i < 8; i++) take_ok(&q, 100, i, i, rows, 2);
  ps_pending_free(&q);
}

/* ---- message checks ---------------------------------------------------- */

/* A message of type t with n rows, sized for row_len L (values when vals). */
static void *make_msg(uint32_t t, uint32_t n, uint32_t L, int vals, size_t *len) {
  *len = ps_msg_size(n, L, vals);
  void *m = strata_calloc(1, *len + 64); /* room to claim a longer length */
  assert_non_null(m);
  *(ps_hdr *)m = (ps_hdr){.type = t, .from = 1, .clock = 2, .nrows = n};
  return m;
}

static void test_msg_size(void **state) {
  (void)state;
  assert_int_equal(ps_msg_size(0, 5, 0), sizeof(ps_hdr));
  assert_int_equal(ps_msg_size(0, 5, 1), sizeof(ps_hdr));
  assert_int_equal(ps_msg_size(3, 5, 0), sizeof(ps_hdr) + 12);
  assert_int_equal(ps_msg_size(3, 5, 1), sizeof(ps_hdr) + 12 + 60);
  /* The accessors agree with the layout. */
  size_t len;
  void *m = make_msg(PS_ROWS, 3, 5, 1, &len);
  assert_ptr_equal((char *)ps_msg_rows(m), (char *)m + sizeof(ps_hdr));
  assert_ptr_equal((char *)ps_msg_vals(m), (char *)m + sizeof(ps_hdr) + 12);
  strata_free(m);
}

static void test_msg_check_good(void **state) {
  (void)state;
  const uint32_t L = 3;
  const struct {
    uint32_t type, n;
    int vals;
  } good[] = {{PS_UPDATE, 0, 1}, {PS_UPDATE, 4, 1}, {PS_READ, 0, 0}, {PS_READ, 5, 0},
              {PS_BYE, 0, 0},    {PS_ROWS, 0, 1},   {PS_ROWS, 2, 1}, {PS_FIN, 0, 0},
              {PS_SNAP, 0, 0},   {PS_SNAP, 3, 0}};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    size_t len;
    void *m = make_msg(good[i].type, good[i].n, L, good[i].vals, &len);
    assert_int_equal(ps_msg_check(m, len, L, 3), 0);
    strata_free(m);
  }
}

static void expect_bad(const void *m, size_t len, uint32_t L) {
  strata_err_clear();
  assert_int_equal(ps_msg_check(m, len, L, 5), STRATA_ECOMM);
  assert_non_null(strstr(strata_err_msg(), "rank 5"));
}

static void test_msg_check_bad(void **state) {
  (void)state;
  const uint32_t L = 3;
  size_t len;
  void *m = make_msg(PS_UPDATE, 2, L, 1, &len);
  /* Shorter than a header. */
  expect_bad(m, 0, L);
  expect_bad(m, sizeof(ps_hdr) - 1, L);
  /* Length off by one either way, or without the values. */
  expect_bad(m, len - 1, L);
  expect_bad(m, len + 1, L);
  expect_bad(m, ps_msg_size(2, L, 0), L);
  /* Sized for another row length. */
  expect_bad(m, len, L + 1);
  assert_int_equal(ps_msg_check(m, len, L, 5), 0);
  /* Types outside the protocol. */
  ((ps_hdr *)m)->type = 0;
  expect_bad(m, len, L);
  ((ps_hdr *)m)->type = PS_SNAP + 1;
  expect_bad(m, len, L);
  ((ps_hdr *)m)->type = UINT32_MAX;
  expect_bad(m, len, L);
  /* A READ carries no values; ROWS do. */
  ((ps_hdr *)m)->type = PS_READ;
  expect_bad(m, len, L);
  assert_int_equal(ps_msg_check(m, ps_msg_size(2, L, 0), L, 5), 0);
  ((ps_hdr *)m)->type = PS_ROWS;
  expect_bad(m, ps_msg_size(2, L, 0), L);
  /* Neither does a SNAP. */
  ((ps_hdr *)m)->type = PS_SNAP;
  expect_bad(m, len, L);
  assert_int_equal(ps_msg_check(m, ps_msg_size(2, L, 0), L, 5), 0);
  /* A BYE or FIN claiming rows it does not carry. */
  ((ps_hdr *)m)->type = PS_BYE;
  ((ps_hdr *)m)->nrows = 1;
  expect_bad(m, sizeof(ps_hdr), L);
  ((ps_hdr *)m)->type = PS_FIN;
  expect_bad(m, sizeof(ps_hdr), L);
  /* A row count far beyond the bytes received. */
  ((ps_hdr *)m)->type = PS_UPDATE;
  ((ps_hdr *)m)->nrows = UINT32_MAX;
  expect_bad(m, len, L);
  strata_free(m);
}

/* strata_engine_resolve: each mode's defaults, an app's default work per
 * clock (wpc > 0 on entry, not given), and the flags a mode refuses. */
static strata_engine_opts resolved(const char *mode, int s, double wpc, int s_given, int wpc_given,
                                   int *rc) {
  strata_engine_opts o;
  memset(&o, 0, sizeof o);
  assert_int_equal(strata_mode_parse(mode, &o.mode), 0);
  assert_string_equal(strata_mode_name(o.mode), mode);
  o.staleness = s;
  o.wpc = wpc;
  *rc = strata_engine_resolve(&o, s_given, wpc_given, 0);
  return o;
}

static void test_resolve_defaults(void **state) {
  (void)state;
  int rc;
  strata_engine_opts o = resolved("ssp", -1, 0, 0, 0, &rc);
  assert_int_equal(rc, 0);
  assert_int_equal(o.staleness, 1);
  assert_true(o.wpc == 1);
  /* Aggressive prefetch in every mode (docs/cli.md has the measurements). */
  const char *all[] = {"bsp", "absp", "ssp", "essp", "async"};
  for (int i = 0; i < 5; i++) {
    o = resolved(all[i], -1, 0, 0, 0, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(o.prefetch, STRATA_PREFETCH_AGGRESSIVE);
  }
  /* An app default applies to ssp, essp, absp and async, never to bsp... */
  const char *takes[] = {"ssp", "essp", "absp", "async"};
  for (int i = 0; i < 4; i++) {
    o = resolved(takes[i], -1, 0.25, 0, 0, &rc);
    assert_int_equal(rc, 0);
    assert_true(o.wpc == 0.25);
  }
  o = resolved("bsp", -1, 0.25, 0, 0, &rc);
  assert_int_equal(rc, 0);
  assert_true(o.wpc == 1);
  /* ... and a given --wpc wins over it. */
  o = resolved("ssp", -1, 0.5, 0, 1, &rc);
  assert_int_equal(rc, 0);
  assert_true(o.wpc == 0.5);
  /* Scheduled and serial modes ignore an app default and refuse the flag. */
  o = resolved("scheduled", -1, 0.25, 0, 0, &rc);
  assert_int_equal(rc, 0);
  assert_true(o.wpc == 0);
  o = resolved("serial", -1, 0.25, 0, 1, &rc);
  assert_int_equal(rc, STRATA_EUSAGE);
  assert_non_null(strstr(strata_err_msg(), "--wpc"));
  o = resolved("bsp", 2, 0, 1, 0, &rc);
  assert_int_equal(rc, STRATA_EUSAGE);
  o = resolved("ssp", -1, 0.3, 0, 1, &rc);
  assert_int_equal(rc, STRATA_EUSAGE);
  assert_non_null(strstr(strata_err_msg(), "divide a pass"));
}

/* Mode names: every one parses back to itself; others are refused with
 * the list. */
static void test_mode_names(void **state) {
  (void)state;
  for (int m = 0; m < STRATA_N_MODES; m++) {
    strata_mode got;
    assert_int_equal(strata_mode_parse(strata_mode_name((strata_mode)m), &got), 0);
    assert_int_equal(got, m);
  }
  strata_mode got;
  assert_int_equal(strata_mode_parse("SSP", &got), STRATA_EUSAGE);
  assert_non_null(strstr(strata_err_msg(), "scheduled, serial, bsp, absp, ssp, essp, async"));
  assert_int_equal(strata_mode_parse(NULL, &got), STRATA_EUSAGE);
  assert_string_equal(strata_mode_name(STRATA_N_MODES), "?");
  assert_true(strata_mode_is_ps(STRATA_MODE_ESSP));
  assert_false(strata_mode_is_ps(STRATA_MODE_SERIAL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mode_names),
      cmocka_unit_test_setup_teardown(test_vclock_in_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_vclock_one_client, setup, teardown),
      cmocka_unit_test_setup_teardown(test_vclock_wrong_stamp, setup, teardown),
      cmocka_unit_test_setup_teardown(test_vclock_worker_out_of_range, setup, teardown),
      cmocka_unit_test_setup_teardown(test_vclock_init_oom, setup, teardown),
      cmocka_unit_test_setup_teardown(test_oplog_coalesces, setup, teardown),
      cmocka_unit_test_setup_teardown(test_oplog_pack, setup, teardown),
      cmocka_unit_test_setup_teardown(test_oplog_pack_empty_shard, setup, teardown),
      cmocka_unit_test_setup_teardown(test_snapshot_canonical_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_snapshot_oom, setup, teardown),
      cmocka_unit_test_setup_teardown(test_oplog_clear, setup, teardown),
      cmocka_unit_test_setup_teardown(test_oplog_every_row, setup, teardown),
      cmocka_unit_test_setup_teardown(test_oplog_init_oom, setup, teardown),
      cmocka_unit_test_setup_teardown(test_oplog_pack_oom, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pending_take_ready_in_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pending_grows, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pending_free_with_leftovers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pending_add_oom, setup, teardown),
      cmocka_unit_test_setup_teardown(test_msg_size, setup, teardown),
      cmocka_unit_test_setup_teardown(test_msg_check_good, setup, teardown),
      cmocka_unit_test_setup_teardown(test_msg_check_bad, setup, teardown),
      cmocka_unit_test_setup_teardown(test_resolve_defaults, setup, teardown),
  };
  return cmocka_run_group_tests_name("ps", tests, NULL, NULL);
}
