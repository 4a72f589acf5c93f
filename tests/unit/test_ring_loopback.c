/*
 * Unit tests of the ring back-end (worker/ring.c) without mpiexec: P worker
 * threads run the worker's pass loop over endpoints of a loopback transport
 * (ranks 1..P) with seeded delivery delays and reordering.
 *
 * Every row of every rotating block carries its own history: how many
 * times it was computed and by which worker last. A chunk computed on a
 * copy that had not yet received its previous holder's work, a block that
 * skipped a worker, or a chunk that overtook an earlier one would find a
 * count or a last worker other than the schedule says; after each pass
 * every worker's evaluation copy must hold every row's full count.
 *
 * The randomised tests print their seed; STRATA_TEST_SEED=X replays the
 * loopback's draws (thread timing still varies). A watchdog fails a test
 * that hangs.
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

#include "strata/core.h"
#include "worker/backend.h"
#include "worker/worker.h"

extern const strata__backend strata__ring_backend; /* the back-end under test */

enum { MAXP = 4, WATCHDOG_S = 20 };

typedef struct row_state {
  uint32_t count; /* sub-epochs that computed this row so far */
  int32_t last;   /* the worker that computed it last, -1 none */
} row_state;

typedef struct ring_case {
  int P, B, depth, passes;
  uint32_t rows; /* per rotating block */
  int max_delay, reorder;
  uint64_t seed;
  strata_schedule sched;
  strata_loopback *lb;
} ring_case;

/* One worker thread's state, also the app's state (tv->... reads it). */
typedef struct wctx {
  ring_case *rc;
  strata__worker w;
  strata_transport t;
  int reports; /* passes reported, in order */
  int fail;
  char msg[256];
} wctx;

static void failf(wctx *c, const char *fmt, ...) {
  if (c->fail++) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->msg, sizeof c->msg, fmt, ap);
  va_end(ap);
}

/* The worker that computed rotating block r in the sub-epoch before s of
 * `pass`; -1 before the first. */
static int prev_holder(const ring_case *rc, int pass, int s, int r) {
  int S = rc->sched.n_subepochs;
  if (pass == 0 && s == 0) return -1;
  return strata_schedule_rotating_holder(&rc->sched, r, (s + S - 1) % S);
}

static int ring_compute(void *state, const strata_task_view *tv, double *partials) {
  wctx *c = state;
  const ring_case *rc = c->rc;
  int S = rc->sched.n_subepochs, r = tv->ids.rotating;
  uint32_t want = (uint32_t)(tv->pass * S + tv->subepoch);
  int from = prev_holder(rc, tv->pass, tv->subepoch, r);
  row_state *rows = tv->rotating->buf;
  if (strata_schedule_rotating_holder(&rc->sched, r, tv->subepoch) != c->w.me)
    failf(c, "worker %d computed block %d in sub-epoch %d, not its holder", c->w.me, r, tv->subepoch);
  for (uint32_t i = tv->row_lo; i < tv->row_hi; i++) {
    if (rows[i].count != want || rows[i].last != from)
      failf(c,
            "worker %d, pass %d, sub-epoch %d, block %d chunk %d row %u: count %u last %d, "
            "want %u from worker %d",
            c->w.me, tv->pass, tv->subepoch, r, tv->chunk, i, rows[i].count, rows[i].last, want,
            from);
    rows[i].count++;
    rows[i].last = c->w.me;
  }
  partials[0] += tv->row_hi - tv->row_lo;
  return 0;
}

/* After pass p every worker's copy of every block holds the whole pass. */
static int ring_evaluate(void *state, const strata_task_view *tv, double *partials) {
  wctx *c = state;
  int S = c->rc->sched.n_subepochs;
  const row_state *rows = tv->rotating->buf;
  for (uint32_t i = 0; i < tv->rotating->nrows; i++)
    if (rows[i].count != (uint32_t)((tv->pass + 1) * S))
      failf(c, "worker %d evaluating pass %d: block %d row %u has count %u, want %d", c->w.me,
            tv->pass, tv->ids.rotating, i, rows[i].count, (tv->pass + 1) * S);
  partials[1] += 1;
  return 0;
}

static int take_report(void *ud, const pass_report *rep) {
  wctx *c = ud;
  if (rep->pass + 1 != ++c->reports) failf(c, "worker %d: report of pass %d out of order", c->w.me, rep->pass);
  return 0;
}

static const strata_app ring_app = {.name = "ringcheck",
                                    .n_partials = 2,
                                    .compute = ring_compute,
                                    .evaluate = ring_evaluate};

static int alloc_block(strata_block *b, size_t len, uint32_t nrows, uint32_t row_bytes, int init) {
  b->len = len;
  b->nrows = nrows;
  b->row_bytes = row_bytes;
  if (!init) return 0;
  b->buf = strata_alloc_aligned(len);
  if (!b->buf) return STRATA_ENOMEM;
  memset(b->buf, 0, len);
  return 0;
}

/* The worker as set-up would leave it: its data and eval blocks, and the
 * rotating blocks it holds in sub-epoch 0 (others get buffers on arrival). */
static int setup_worker(wctx *c, int me, const strata_engine_opts *opts) {
  ring_case *rc = c->rc;
  strata__worker *w = &c->w;
  const strata_schedule *s = &rc->sched;
  w->app = &ring_app;
  w->state = c;
  w->backend = &strata__ring_backend;
  w->opts = opts;
  w->me = me;
  w->has_eval = 1;
  w->setup = (strata_setup){.workers = rc->P, .strata = rc->B, .depth = rc->depth,
                            .passes = rc->passes, .seed = rc->seed, .worker = me,
                            .mode = STRATA_MODE_SCHEDULED};
  w->report = take_report;
  w->report_ud = c;
  int err = strata_loopback_endpoint(rc->lb, me + 1, &c->t);
  if (err) return err;
  w->t = &c->t;
  /* A private copy of the schedule, as each worker unpacks its own. */
  void *buf;
  size_t len;
  if ((err = strata_schedule_pack(s, &buf, &len))) return err;
  err = strata_schedule_unpack(&w->sched, buf, len);
  strata_free(buf);
  if (err) return err;
  w->data = strata_calloc((size_t)s->n_data, sizeof *w->data);
  w->eval = strata_calloc((size_t)s->n_data, sizeof *w->eval);
  w->res = strata_calloc((size_t)s->n_resident, sizeof *w->res);
  w->rot = strata_calloc((size_t)s->n_rotating, sizeof *w->rot);
  if (!w->data || !w->eval || !w->res || !w->rot) return STRATA_ENOMEM;
  for (int d = 0; d < s->n_data && !err; d++)
    if (strata_schedule_data_owner(s, d) == me) err = alloc_block(&w->eval[d], 64, 0, 0, 1);
  for (int r = 0; r < s->n_rotating && !err; r++) {
    err = alloc_block(&w->rot[r], rc->rows * sizeof(row_state), rc->rows, sizeof(row_state),
                      strata_schedule_rotating_holder(s, r, 0) == me);
    row_state *rows = w->rot[r].buf;
    for (uint32_t i = 0; rows && i < rc->rows; i++) rows[i].last = -1;
  }
  return err;
}

static void *worker_main(void *arg) {
  wctx *c = arg;
  int rc = strata__worker_loop(&c->w);
  if (rc) {
    failf(c, "worker %d: loop failed: %s", c->w.me, strata_err_msg());
    return NULL;
  }
  /* The blocks this worker computed last hold every sub-epoch of every pass. */
  const ring_case *k = c->rc;
  int S = k->sched.n_subepochs;
  for (int r = 0; r < k->sched.n_rotating; r++) {
    if (strata_schedule_rotating_holder(&k->sched, r, S - 1) != c->w.me) continue;
    const row_state *rows = c->w.rot[r].buf;
    for (uint32_t i = 0; i < k->rows; i++)
      if (rows[i].count != (uint32_t)(k->passes * S) || rows[i].last != c->w.me)
        failf(c, "worker %d at the end: block %d row %u has count %u", c->w.me, r, i, rows[i].count);
  }
  return NULL;
}

static uint64_t test_seed(void) {
  const char *e = getenv("STRATA_TEST_SEED");
  return e ? strtoull(e, NULL, 10) : (uint64_t)time(NULL);
}

static void run_case(int P, int B, int depth, int passes, uint32_t rows, int max_delay,
                     int reorder, uint64_t seed) {
  ring_case rc = {.P = P, .B = B, .depth = depth, .passes = passes, .rows = rows,
                  .max_delay = max_delay, .reorder = reorder, .seed = seed};
  assert_int_equal(strata_schedule_diagonal(&rc.sched, P, B), 0);
  strata_loopback_conf lc = {.size = P + 1, .seed = seed, .max_delay = max_delay,
                             .reorder = reorder, .tag_ub = INT32_MAX};
  assert_int_equal(strata_loopback_open(&lc, &rc.lb), 0);
  strata_engine_opts opts;
  memset(&opts, 0, sizeof opts);
  opts.mode = STRATA_MODE_SCHEDULED;
  opts.depth = depth;
  opts.passes = passes;
  wctx ctx[MAXP];
  pthread_t th[MAXP];
  memset(ctx, 0, sizeof ctx);
  for (int i = 0; i < P; i++) {
    ctx[i].rc = &rc;
    assert_int_equal(setup_worker(&ctx[i], i, &opts), 0);
  }
  for (int i = 0; i < P; i++) assert_int_equal(pthread_create(&th[i], NULL, worker_main, &ctx[i]), 0);
  for (int i = 0; i < P; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < P; i++) {
    if (ctx[i].fail) fail_msg("P=%d B=%d depth=%d delay=%d reorder=%d seed %llu: %s", P, B, depth,
                              max_delay, reorder, (unsigned long long)seed, ctx[i].msg);
    assert_int_equal(ctx[i].reports, passes);
    strata__worker_close(&ctx[i].w);
  }
  strata_loopback_close(rc.lb);
  strata_schedule_close(&rc.sched);
}

/* Every block visits every worker in schedule order, chunk after chunk,
 * whatever the delivery order; with B > P a block also stays on a worker
 * between sub-epochs, and empty chunks (rows < depth) pass through. */
static void test_ring_order(void **state) {
  (void)state;
  uint64_t seed = test_seed();
  fprintf(stderr, "seed %llu (STRATA_TEST_SEED)\n", (unsigned long long)seed);
  static const int cases[][6] = {
      /* P, B, depth, passes, rows, max_delay */
      {2, 2, 4, 4, 40, 0}, {2, 2, 4, 4, 40, 3}, {3, 3, 8, 3, 50, 4},
      {3, 6, 4, 3, 30, 2}, {4, 4, 2, 3, 17, 5}, {2, 4, 8, 2, 5, 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int reorder = 0; reorder < 2; reorder++)
      run_case(cases[i][0], cases[i][1], cases[i][2], cases[i][3], (uint32_t)cases[i][4],
               cases[i][5], reorder, seed + i);
}

/* One worker on the ring: nothing moves, every pass still reports. */
static void test_ring_one_worker(void **state) {
  (void)state;
  run_case(1, 3, 4, 3, 20, 2, 1, test_seed());
}

int main(void) {
  alarm(WATCHDOG_S * STRATA_TEST_TIME_SCALE);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_order),
      cmocka_unit_test(test_ring_one_worker),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
