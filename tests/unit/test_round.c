/*
 * Rounds (strata/round.h): the byte buffers and the plan, the wire layout
 * of steps and pushes (every truncation and every bad length refused), and
 * the coordinator's state machine (scheduler/rounds.h) driven by simulated
 * workers that take their steps in a random order: the app's callbacks run
 * in the order the header promises, at every depth, and the results do not
 * depend on the number of workers or the order of arrival.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/round.h"
#include "scheduler/rounds.h"
#include "strata/app.h"
#include "strata/core.h"
#include "strata/round.h"

/* ---- bytes and plans ------------------------------------------------- */

static void test_bytes(void **st) {
  (void)st;
  strata_bytes b = {0};
  assert_non_null(strata_bytes_add(&b, 0));
  assert_int_equal(b.len, 0);
  for (int i = 0; i < 1000; i++) assert_int_equal(strata_bytes_put(&b, &i, sizeof i), 0);
  assert_int_equal(b.len, 1000 * sizeof(int));
  for (int i = 0; i < 1000; i++) assert_int_equal(((int *)b.buf)[i], i);
  char *at = strata_bytes_add(&b, 3);
  assert_non_null(at);
  assert_int_equal(b.len, 1000 * sizeof(int) + 3);
  strata__bytes_free(&b);
  assert_null(b.buf);
}

static void test_plan(void **st) {
  (void)st;
  strata_round_plan p;
  assert_int_equal(strata__plan_init(&p, 3), 0);
  assert_false(strata__plan_any(&p));
  uint32_t ids[] = {7, 8, 9};
  assert_int_equal(strata_round_assign(&p, -1, ids, 3, "ab", 2), 0);
  for (int w = 0; w < 3; w++) {
    strata_round_work k = strata_round_work_of(&p, w);
    assert_int_equal(k.n_ids, 3);
    assert_int_equal(k.ids[2], 9);
    assert_int_equal(k.payload_len, 2);
    assert_memory_equal(k.payload, "ab", 2);
  }
  /* One worker's work replaced; another's emptied. */
  assert_int_equal(strata_round_assign(&p, 1, ids, 1, NULL, 0), 0);
  assert_int_equal(strata_round_assign(&p, 2, NULL, 0, NULL, 0), 0);
  assert_int_equal(strata_round_work_of(&p, 1).n_ids, 1);
  assert_int_equal(strata_round_work_of(&p, 1).payload_len, 0);
  assert_null(strata_round_work_of(&p, 2).ids);
  assert_true(strata__plan_any(&p));
  assert_int_equal(strata_round_assign(&p, 3, ids, 1, NULL, 0), STRATA_EINVAL);
  assert_int_equal(strata_round_assign(&p, -2, ids, 1, NULL, 0), STRATA_EINVAL);
  assert_int_equal(strata_round_assign(&p, 0, NULL, 1, NULL, 0), STRATA_EINVAL);
  assert_int_equal(strata_round_work_of(&p, 5).n_ids, 0);
  strata__plan_clear(&p);
  assert_false(strata__plan_any(&p));
  strata__plan_free(&p);
}

/* ---- the wire --------------------------------------------------------- */

static void test_step_wire(void **st) {
  (void)st;
  strata_round_plan p;
  assert_int_equal(strata__plan_init(&p, 2), 0);
  uint32_t ids[] = {1, 2, 3};
  assert_int_equal(strata_round_assign(&p, 1, ids, 3, "payload", 7), 0);
  strata_bytes msg = {0};
  strata__round_head h = {.index = 5, .apply_index = 3, .pass = 1, .in_pass = 2, .apply_len = 5};
  assert_int_equal(strata__round_pack(&msg, &h, "value", &p, 1), 0);
  strata__round_head got;
  const void *values;
  strata_round_work work;
  assert_int_equal(strata__round_unpack(msg.buf, msg.len, &got, &values, &work), 0);
  assert_int_equal(got.index, 5);
  assert_int_equal(got.apply_index, 3);
  assert_memory_equal(values, "value", 5);
  assert_int_equal(work.n_ids, 3);
  assert_int_equal(work.ids[1], 2);
  assert_int_equal((uintptr_t)work.ids % 4, 0);
  assert_memory_equal(work.payload, "payload", 7);
  /* Every cut of the message is refused. */
  for (size_t n = 0; n < msg.len; n++)
    assert_int_equal(strata__round_unpack(msg.buf, n, &got, &values, &work), STRATA_ECOMM);
  /* Lengths that do not add up, each way. */
  strata__round_head *mh = msg.buf;
  uint64_t keep = mh->apply_len;
  mh->apply_len = UINT64_MAX;
  assert_int_equal(strata__round_unpack(msg.buf, msg.len, &got, &values, &work), STRATA_ECOMM);
  mh->apply_len = keep;
  mh->n_ids = UINT32_MAX;
  assert_int_equal(strata__round_unpack(msg.buf, msg.len, &got, &values, &work), STRATA_ECOMM);
  mh->n_ids = 3;
  mh->payload_len = 6;
  assert_int_equal(strata__round_unpack(msg.buf, msg.len, &got, &values, &work), STRATA_ECOMM);
  mh->payload_len = 7;
  mh->index = -1; /* work without a round */
  assert_int_equal(strata__round_unpack(msg.buf, msg.len, &got, &values, &work), STRATA_ECOMM);
  /* A drain step: values only. */
  strata__round_head d = {.index = -1, .apply_index = 4, .flags = STRATA__ROUND_END_PASS,
                          .apply_len = 2};
  assert_int_equal(strata__round_pack(&msg, &d, "xy", &p, 1), 0);
  assert_int_equal(strata__round_unpack(msg.buf, msg.len, &got, &values, &work), 0);
  assert_int_equal(work.n_ids, 0);
  assert_int_equal(work.payload_len, 0);
  assert_int_equal(got.flags, STRATA__ROUND_END_PASS);
  strata__bytes_free(&msg);
  strata__plan_free(&p);
}

typedef struct parts_seen {
  int n;
  int data[8];
  size_t len[8];
} parts_seen;

static int take_seen(void *ud, int data, const void *bytes, size_t len) {
  parts_seen *s = ud;
  (void)bytes;
  s->data[s->n] = data;
  s->len[s->n++] = len;
  return 0;
}

static void test_push_wire(void **st) {
  (void)st;
  strata_bytes msg = {0};
  strata__push_head h = {.index = 9, .worker = 1};
  assert_int_equal(strata__push_begin(&msg, &h), 0);
  assert_int_equal(strata__push_add(&msg, 4, "abc", 3), 0);
  assert_int_equal(strata__push_add(&msg, 5, NULL, 0), 0);
  assert_int_equal(strata__push_add(&msg, 6, "0123456789", 10), 0);
  strata__push_end(&msg, 3);
  parts_seen s = {0};
  strata__push_head got;
  assert_int_equal(strata__push_unpack(msg.buf, msg.len, &got, take_seen, &s), 0);
  assert_int_equal(got.index, 9);
  assert_int_equal(s.n, 3);
  assert_int_equal(s.data[2], 6);
  assert_int_equal(s.len[2], 10);
  for (size_t n = 0; n < msg.len; n++) {
    parts_seen t = {0};
    assert_int_equal(strata__push_unpack(msg.buf, n, &got, take_seen, &t), STRATA_ECOMM);
  }
  strata__push_head *mh = msg.buf;
  mh->n_parts = 4;
  s.n = 0;
  assert_int_equal(strata__push_unpack(msg.buf, msg.len, &got, take_seen, &s), STRATA_ECOMM);
  mh->n_parts = -1;
  s.n = 0;
  assert_int_equal(strata__push_unpack(msg.buf, msg.len, &got, take_seen, &s), STRATA_ECOMM);
  strata__bytes_free(&msg);
}

/* ---- the state machine -------------------------------------------------
 * A toy app whose result depends on the order of every callback: the
 * coordinator's x and each block's y. Round t gives worker w the id t unless
 * (t + w) % 3 == 0 (no work); push returns y_d + t; pull sets
 * x = x / 2 + the parts' sum (in block order) and sends x; apply adds it to
 * y_d. Every callback is logged. */

#define NB 6
typedef struct toy {
  double x;
  double y[NB];
  char log[1 << 16];
  size_t used;
  int64_t stop_at; /* schedule_round converges at this round (-1: never) */
  int uniform;     /* no work for anyone when t % 3 == 0, rather than by worker */
} toy;

static toy *g_toy;

static void logf_(toy *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  t->used += (size_t)vsnprintf(t->log + t->used, sizeof t->log - t->used, fmt, ap);
  va_end(ap);
}

static int toy_schedule(const void *cfg, strata_problem *prob, const strata_round *r,
                        strata_round_plan *plan) {
  (void)cfg, (void)prob;
  logf_(g_toy, "S%lld ", (long long)r->index);
  if (r->index == g_toy->stop_at) return STRATA_ROUND_CONVERGED;
  for (int w = 0; w < r->workers; w++) {
    uint32_t id = (uint32_t)r->index;
    int idle = g_toy->uniform ? r->index % 3 == 0 : (r->index + w) % 3 == 0;
    int rc = idle ? strata_round_assign(plan, w, NULL, 0, NULL, 0)
                  : strata_round_assign(plan, w, &id, 1, NULL, 0);
    if (rc) return rc;
  }
  return 0;
}

static int toy_push(void *state, const strata_round *r, const strata_task_view *tv,
                    const strata_round_work *work, strata_bytes *out) {
  (void)state;
  assert_int_equal(work->n_ids, 1);
  assert_int_equal(work->ids[0], (uint32_t)r->index);
  double v = g_toy->y[tv->ids.data] + (double)r->index;
  return strata_bytes_put(out, &v, sizeof v);
}

static int toy_pull(const void *cfg, strata_problem *prob, const strata_round *r,
                    const strata_round_plan *plan, const strata_round_part *parts,
                    strata_bytes *out) {
  (void)cfg, (void)prob, (void)plan;
  logf_(g_toy, "P%lld ", (long long)r->index);
  g_toy->x /= 2;
  for (int d = 0; d < NB; d++)
    if (parts[d].buf) g_toy->x += *(const double *)parts[d].buf;
  return strata_bytes_put(out, &g_toy->x, sizeof g_toy->x);
}

static int toy_apply(void *state, const strata_round *r, const strata_task_view *tv,
                     const void *values, size_t len) {
  (void)state, (void)r;
  assert_int_equal(len, sizeof(double));
  g_toy->y[tv->ids.data] += *(const double *)values;
  return 0;
}

static const strata_round_ops toy_ops = {toy_schedule, toy_push, toy_pull, toy_apply};
static const strata_app toy_app = {.name = "toy", .round = &toy_ops};

/* A simulated worker w: unpacks a step, applies, pushes its blocks. */
typedef struct sim {
  strata__rounds R;
  strata_schedule s;
  strata_problem prob;
  int P;
} sim;

static void worker_step(sim *m, int w, const void *msg, size_t len, int *ended) {
  strata__round_head h;
  const void *values;
  strata_round_work work;
  assert_int_equal(strata__round_unpack(msg, len, &h, &values, &work), 0);
  int n;
  const strata_task *tk = strata_schedule_tasks(&m->s, 0, w, &n);
  strata_round r = {.index = h.apply_index, .workers = m->P};
  if (h.apply_index >= 0) {
    logf_(g_toy, "A%lld.%d ", (long long)h.apply_index, w);
    for (int i = 0; i < n; i++) {
      strata_task_view tv = {.ids = tk[i]};
      assert_int_equal(toy_apply(NULL, &r, &tv, values, (size_t)h.apply_len), 0);
    }
  }
  if (h.index >= 0 && work.n_ids) {
    logf_(g_toy, "U%lld.%d ", (long long)h.index, w);
    r.index = h.index;
    strata_bytes push = {0}, part = {0};
    strata__push_head ph = {.index = h.index, .worker = w};
    assert_int_equal(strata__push_begin(&push, &ph), 0);
    for (int i = 0; i < n; i++) {
      strata_task_view tv = {.ids = tk[i]};
      part.len = 0;
      assert_int_equal(toy_push(NULL, &r, &tv, &work, &part), 0);
      assert_int_equal(strata__push_add(&push, tk[i].data, part.buf, part.len), 0);
    }
    strata__push_end(&push, n);
    assert_int_equal(strata__rounds_take(&m->R, w, push.buf, push.len), 0);
    strata__bytes_free(&push);
    strata__bytes_free(&part);
  }
  *ended = (h.flags & STRATA__ROUND_END_PASS) != 0;
}

/* Steps waiting for a worker, oldest first. */
typedef struct queue {
  strata_bytes msg[64];
  int head, n;
} queue;

/* Runs `passes` passes of `per` rounds at depth d with P workers; the
 * workers take their steps in an order drawn from seed (serial: P = 1,
 * every step at once). */
static void run_sim(toy *t, int P, int d, int per, int passes, uint64_t seed, int64_t stop_at,
                    int uniform) {
  memset(t, 0, sizeof *t);
  t->stop_at = stop_at;
  t->uniform = uniform;
  g_toy = t;
  sim m;
  memset(&m, 0, sizeof m);
  m.P = P;
  m.prob.n_data = NB;
  m.prob.rounds_per_pass = (uint64_t)per;
  assert_int_equal(strata_schedule_shards(&m.s, P, NB), 0);
  strata_round_stats stats;
  memset(&stats, 0, sizeof stats);
  m.R = (strata__rounds){.app = &toy_app, .prob = &m.prob, .sched = &m.s, .depth = d,
                         .stats = &stats};
  assert_int_equal(strata__rounds_open(&m.R, 0), 0);
  strata_rng rng;
  strata_rng_seed(&rng, seed);
  queue *q = calloc((size_t)P, sizeof *q);
  for (int pass = 0; pass < passes && !m.R.converged; pass++) {
    strata__rounds_begin_pass(&m.R, pass);
    int *ended = calloc((size_t)P, sizeof *ended), n_ended = 0;
    for (int done = 0; !done;) {
      int a = strata__rounds_next(&m.R);
      assert_true(a > 0);
      if (a == STRATA__ROUNDS_SEND) {
        for (int w = 0; w < P; w++) {
          queue *qw = &q[w];
          assert_true(qw->n < 64);
          strata_bytes *slot = &qw->msg[(qw->head + qw->n++) % 64];
          slot->len = 0;
          assert_int_equal(strata_bytes_put(slot, m.R.msg[w].buf, m.R.msg[w].len), 0);
        }
        if (P > 1) continue;
      }
      if (a == STRATA__ROUNDS_DONE && n_ended == P) done = 1;
      /* Some worker with a step waiting takes it (serial: at once). */
      int cand[64], nc = 0;
      for (int w = 0; w < P; w++)
        if (q[w].n) cand[nc++] = w;
      if (!nc) {
        assert_true(a == STRATA__ROUNDS_DONE);
        continue;
      }
      int w = cand[strata_rng_below(&rng, (uint64_t)nc)];
      strata_bytes *msg = &q[w].msg[q[w].head];
      int e = 0;
      worker_step(&m, w, msg->buf, msg->len, &e);
      q[w].head = (q[w].head + 1) % 64;
      q[w].n--;
      if (e) {
        assert_false(ended[w]);
        ended[w] = 1;
        n_ended++;
      }
    }
    free(ended);
  }
  for (int w = 0; w < P; w++)
    for (int i = 0; i < 64; i++) strata__bytes_free(&q[w].msg[i]);
  free(q);
  strata__rounds_close(&m.R);
  strata_schedule_close(&m.s);
}

/* The coordinator's callbacks alone, in the order the header promises:
 * pull(t - d) before schedule(t) (within a pass), then the drain's pulls. */
static void expected_log(char *out, size_t cap, int d, int per, int passes, int64_t stop_at) {
  size_t used = 0;
  for (int pass = 0; pass < passes; pass++) {
    int64_t first = (int64_t)pass * per, end = first + per, pulled = first, t = first;
    int stop = 0;
    for (; t < end; t++) {
      if (t - d >= first) used += (size_t)snprintf(out + used, cap - used, "P%lld ", (long long)pulled++);
      used += (size_t)snprintf(out + used, cap - used, "S%lld ", (long long)t);
      if (t == stop_at) {
        stop = 1;
        break;
      }
    }
    for (; pulled < t; pulled++) used += (size_t)snprintf(out + used, cap - used, "P%lld ", (long long)pulled);
    if (stop) break;
  }
}

/* The coordinator's entries of a log (S and P). */
static void coordinator_part(const char *log, char *out, size_t cap) {
  size_t used = 0;
  for (const char *p = log; *p;) {
    const char *sp = strchr(p, ' ');
    size_t n = sp ? (size_t)(sp - p) + 1 : strlen(p);
    if ((p[0] == 'S' || p[0] == 'P') && used + n < cap) {
      memcpy(out + used, p, n);
      used += n;
    }
    p += n;
  }
  out[used] = '\0';
}

static uint64_t g_seed;

static void test_order_and_independence(void **st) {
  (void)st;
  uint64_t seed = g_seed;
  print_message("seed %llu (STRATA_TEST_SEED reproduces it)\n", (unsigned long long)seed);
  static toy serial, par;
  static char want[1 << 16], got[1 << 16];
  for (int d = 1; d <= 4; d++)
    for (int per = 1; per <= 7; per += 3)
      for (int64_t stop_at = -1; stop_at < 12; stop_at += 5) {
        run_sim(&serial, 1, d, per, 3, seed, stop_at, 1);
        expected_log(want, sizeof want, d, per, 3, stop_at);
        coordinator_part(serial.log, got, sizeof got);
        assert_string_equal(got, want);
        for (int P = 2; P <= NB; P++) {
          /* Work the same for every worker: the same x and y, bit for bit. */
          run_sim(&par, P, d, per, 3, seed + (uint64_t)P, stop_at, 1);
          coordinator_part(par.log, got, sizeof got);
          assert_string_equal(got, want);
          assert_memory_equal(&par.x, &serial.x, sizeof par.x);
          assert_memory_equal(par.y, serial.y, sizeof par.y);
          /* Work by worker, some idle each round: the order still holds. */
          run_sim(&par, P, d, per, 3, seed ^ (uint64_t)P, stop_at, 0);
          coordinator_part(par.log, got, sizeof got);
          assert_string_equal(got, want);
        }
      }
}

/* A push that no round in flight awaits is refused. */
static void test_take_refuses(void **st) {
  (void)st;
  toy t;
  memset(&t, 0, sizeof t);
  t.stop_at = -1;
  g_toy = &t;
  strata_schedule s;
  strata_problem prob;
  memset(&prob, 0, sizeof prob);
  prob.n_data = NB;
  prob.rounds_per_pass = 4;
  assert_int_equal(strata_schedule_shards(&s, 2, NB), 0);
  strata__rounds R = {.app = &toy_app, .prob = &prob, .sched = &s, .depth = 2};
  assert_int_equal(strata__rounds_open(&R, 0), 0);
  strata__rounds_begin_pass(&R, 0);
  assert_int_equal(strata__rounds_next(&R), STRATA__ROUNDS_SEND); /* round 0 */
  strata_bytes push = {0};
  double v = 1;
  /* Round 0: worker 0 has no work ((0 + 0) % 3 == 0), worker 1 has. */
  strata__push_head h = {.index = 0, .worker = 0};
  assert_int_equal(strata__push_begin(&push, &h), 0);
  strata__push_end(&push, 0);
  assert_int_equal(strata__rounds_take(&R, 0, push.buf, push.len), STRATA_ECOMM);
  /* A round not in flight. */
  h = (strata__push_head){.index = 3, .worker = 1};
  assert_int_equal(strata__push_begin(&push, &h), 0);
  strata__push_end(&push, 0);
  assert_int_equal(strata__rounds_take(&R, 1, push.buf, push.len), STRATA_ECOMM);
  /* The wrong worker in the head. */
  h = (strata__push_head){.index = 0, .worker = 0};
  assert_int_equal(strata__push_begin(&push, &h), 0);
  strata__push_end(&push, 0);
  assert_int_equal(strata__rounds_take(&R, 1, push.buf, push.len), STRATA_ECOMM);
  /* A part of a block worker 1 does not hold (block 0 is worker 0's). */
  h = (strata__push_head){.index = 0, .worker = 1};
  assert_int_equal(strata__push_begin(&push, &h), 0);
  assert_int_equal(strata__push_add(&push, 0, &v, sizeof v), 0);
  strata__push_end(&push, 1);
  assert_int_equal(strata__rounds_take(&R, 1, push.buf, push.len), STRATA_ECOMM);
  /* The right one is taken, once. */
  h = (strata__push_head){.index = 0, .worker = 1};
  assert_int_equal(strata__push_begin(&push, &h), 0);
  for (int d = 3; d < NB; d++) assert_int_equal(strata__push_add(&push, d, &v, sizeof v), 0);
  strata__push_end(&push, NB - 3);
  assert_int_equal(strata__rounds_take(&R, 1, push.buf, push.len), 0);
  assert_int_equal(strata__rounds_take(&R, 1, push.buf, push.len), STRATA_ECOMM);
  strata__bytes_free(&push);
  strata__rounds_close(&R);
  strata_schedule_close(&s);
}

static void test_shards(void **st) {
  (void)st;
  strata_schedule s;
  assert_int_equal(strata_schedule_shards(&s, 3, 4), 0);
  int want[] = {0, 0, 1, 2};
  for (int d = 0; d < 4; d++) assert_int_equal(strata_schedule_data_owner(&s, d), want[d]);
  assert_int_equal(s.n_rotating, 0);
  assert_int_equal(s.n_subepochs, 1);
  void *buf;
  size_t len;
  assert_int_equal(strata_schedule_pack(&s, &buf, &len), 0);
  strata_schedule u;
  assert_int_equal(strata_schedule_unpack(&u, buf, len), 0);
  assert_int_equal(strata_schedule_data_owner(&u, 3), 2);
  strata_free(buf);
  strata_schedule_close(&u);
  strata_schedule_close(&s);
  assert_int_equal(strata_schedule_shards(&s, 3, 2), STRATA_EINVAL);
  assert_int_equal(strata_schedule_shards(&s, 0, 2), STRATA_EINVAL);
}

int main(void) {
  const char *env = getenv("STRATA_TEST_SEED");
  g_seed = env && *env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bytes),        cmocka_unit_test(test_plan),
      cmocka_unit_test(test_step_wire),    cmocka_unit_test(test_push_wire),
      cmocka_unit_test(test_shards),       cmocka_unit_test(test_take_refuses),
      cmocka_unit_test(test_order_and_independence),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
