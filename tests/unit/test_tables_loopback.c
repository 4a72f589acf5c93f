/*
 * Unit tests of the table back-end (worker/tables.c) without mpiexec: P
 * worker threads run the worker's pass loop over endpoints of a loopback
 * transport (ranks 1..P) with seeded delivery delays and reordering, in each
 * table mode (bsp, ssp, essp, async, vap; --wpc 1 and 1/2).
 *
 * Every rotating row holds one column per worker, and each compute adds 1
 * to its worker's column of every row of its chunk. On the diagonal
 * schedule each worker's resident blocks meet every rotating block once a
 * pass, so worker q's column of any row after pass p is exactly
 * n_q (p + 1), n_q the resident blocks q owns. From that:
 *   - a chunk read at clock c under staleness s holds at least q's updates
 *     of the clocks before c - s (with wpc 1: n_q (c - s));
 *   - evaluate scores the pure snapshot of the pass's last clock: every
 *     column exactly n_q (p + 1) (when the pass ends a clock);
 *   - the reports come in pass order with the mode's clock count, and the
 *     tables leave cleanly.
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

extern const strata__backend strata__table_backend; /* the back-end under test */

enum { MAXP = 4, WATCHDOG_S = 60, COLS = MAXP };

typedef struct tcase {
  strata_mode mode;
  int P, B, depth, passes, s;
  double wpc;
  uint32_t rows; /* per rotating block */
  int max_delay, reorder;
  uint64_t seed;
  strata_schedule sched;
  strata_loopback *lb;
  strata_engine_opts opts;
} tcase;

typedef struct wctx {
  tcase *k;
  strata__worker w;
  strata_transport t;
  int reports, evals;
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

/* Resident blocks worker q owns. */
static int owned(const tcase *k, int q) {
  int n = 0;
  for (int i = 0; i < k->sched.n_resident; i++)
    n += strata_schedule_resident_owner(&k->sched, i) == q;
  return n;
}

static int t_compute(void *state, const strata_task_view *tv, double *partials) {
  wctx *c = state;
  const tcase *k = c->k;
  float *rows = tv->rotating->buf;
  /* wpc 1: the clock is the pass; a read at clock c holds every update of
   * clocks <= c - s - 1, n_q per clock (async: no bound). */
  for (uint32_t i = tv->row_lo; i < tv->row_hi; i++) {
    float *row = rows + (size_t)i * COLS;
    for (int q = 0; q < k->P && k->wpc == 1 && k->s >= 0; q++) {
      double least = (double)owned(k, q) * (double)(tv->clock - k->s);
      if (q != c->w.me && row[q] < least)
        failf(c, "worker %d, clock %lld, block %d row %u: worker %d's column %g, below %g", c->w.me,
              (long long)tv->clock, tv->ids.rotating, i, q, row[q], least);
    }
    row[c->w.me] += 1;
  }
  partials[0] += tv->row_hi - tv->row_lo;
  return 0;
}

/* The pure snapshot of the pass: every worker's column exactly. */
static int t_evaluate(void *state, const strata_task_view *tv, double *partials) {
  wctx *c = state;
  const tcase *k = c->k;
  const float *rows = tv->rotating->buf;
  for (uint32_t i = 0; i < tv->rotating->nrows; i++)
    for (int q = 0; q < k->P; q++) {
      float want = (float)(owned(k, q) * (tv->pass + 1));
      if (rows[(size_t)i * COLS + q] != want)
        failf(c, "worker %d evaluating pass %d: block %d row %u, worker %d's column %g, want %g",
              c->w.me, tv->pass, tv->ids.rotating, i, q, rows[(size_t)i * COLS + q], want);
    }
  partials[1] += 1;
  c->evals++;
  return 0;
}

static int take_report(void *ud, const pass_report *rep) {
  wctx *c = ud;
  if (rep->pass + 1 != ++c->reports)
    failf(c, "worker %d: report of pass %d out of order", c->w.me, rep->pass);
  int K = c->k->wpc < 1 ? (int)(1 / c->k->wpc + 0.5) : 1;
  if (rep->stats.clocks != K)
    failf(c, "worker %d: pass %d ended %d clocks, want %d", c->w.me, rep->pass, rep->stats.clocks,
          K);
  return 0;
}

static const strata_app t_app = {.name = "tablecheck",
                                 .flags = STRATA_APP_ADDITIVE,
                                 .n_partials = 2,
                                 .compute = t_compute,
                                 .evaluate = t_evaluate};

static int alloc_block(strata_block *b, size_t len, uint32_t nrows, uint32_t row_bytes) {
  b->len = len;
  b->nrows = nrows;
  b->row_bytes = row_bytes;
  b->buf = strata_alloc_aligned(len ? len : 1);
  if (!b->buf) return STRATA_ENOMEM;
  memset(b->buf, 0, len ? len : 1);
  return 0;
}

/* The worker as set-up leaves it in a table mode: its data and eval
 * blocks, its resident blocks and every rotating block. */
static int setup_worker(wctx *c, int me) {
  tcase *k = c->k;
  strata__worker *w = &c->w;
  const strata_schedule *s = &k->sched;
  w->app = &t_app;
  w->state = c;
  w->backend = &strata__table_backend;
  w->opts = &k->opts;
  w->me = me;
  w->has_eval = 1;
  strata_engine_setup(&t_app, &k->opts, k->P, me, &w->setup);
  w->report = take_report;
  w->report_ud = c;
  int err = strata_loopback_endpoint(k->lb, me + 1, &c->t);
  if (err) return err;
  w->t = &c->t;
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
    if (strata_schedule_data_owner(s, d) == me) err = alloc_block(&w->eval[d], 64, 0, 0);
  for (int i = 0; i < s->n_resident && !err; i++)
    if (strata_schedule_resident_owner(s, i) == me) err = alloc_block(&w->res[i], 64, 0, 0);
  for (int r = 0; r < s->n_rotating && !err; r++)
    err = alloc_block(&w->rot[r], (size_t)k->rows * COLS * sizeof(float), k->rows,
                      COLS * sizeof(float));
  return err;
}

static void *worker_main(void *arg) {
  wctx *c = arg;
  if (strata__worker_loop(&c->w)) failf(c, "worker %d: loop failed: %s", c->w.me, strata_err_msg());
  return NULL;
}

static uint64_t test_seed(void) {
  const char *e = getenv("STRATA_TEST_SEED");
  return e ? strtoull(e, NULL, 10) : (uint64_t)time(NULL);
}

static void run_case(tcase *k) {
  assert_int_equal(strata_schedule_diagonal(&k->sched, k->P, k->B), 0);
  strata_loopback_conf lc = {.size = k->P + 1,
                             .seed = k->seed,
                             .max_delay = k->max_delay,
                             .reorder = k->reorder,
                             .tag_ub = INT32_MAX};
  assert_int_equal(strata_loopback_open(&lc, &k->lb), 0);
  memset(&k->opts, 0, sizeof k->opts);
  k->opts.mode = k->mode;
  k->opts.depth = k->depth;
  k->opts.passes = k->passes;
  k->opts.staleness = k->s >= 0 ? k->s : -1;
  k->opts.wpc = k->wpc;
  if (k->mode == STRATA_MODE_VAP)
    assert_int_equal(strata_mode_set(&k->opts, "value-bound", "0.5"), 0);
  int s_given = k->mode == STRATA_MODE_SSP || k->mode == STRATA_MODE_ESSP;
  assert_int_equal(strata_engine_resolve(&k->opts, s_given, k->mode != STRATA_MODE_BSP, 0), 0);
  wctx ctx[MAXP];
  pthread_t th[MAXP];
  memset(ctx, 0, sizeof ctx);
  for (int i = 0; i < k->P; i++) {
    ctx[i].k = k;
    assert_int_equal(setup_worker(&ctx[i], i), 0);
  }
  for (int i = 0; i < k->P; i++)
    assert_int_equal(pthread_create(&th[i], NULL, worker_main, &ctx[i]), 0);
  for (int i = 0; i < k->P; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < k->P; i++) {
    if (ctx[i].fail)
      fail_msg("%s P=%d B=%d depth=%d s=%d wpc=%g delay=%d seed %llu: %s",
               strata_mode_name(k->mode), k->P, k->B, k->depth, k->s, k->wpc, k->max_delay,
               (unsigned long long)k->seed, ctx[i].msg);
    assert_int_equal(ctx[i].reports, k->passes);
    assert_true(ctx[i].evals > 0);
    strata__worker_close(&ctx[i].w);
  }
  strata_loopback_close(k->lb);
  strata_schedule_close(&k->sched);
}

/* Each table mode through the pass loop: reads within the mode's bound,
 * every pass scored on its exact snapshot, reports in order. */
static void test_table_modes(void **state) {
  (void)state;
  uint64_t seed = test_seed();
  fprintf(stderr, "seed %llu (STRATA_TEST_SEED)\n", (unsigned long long)seed);
  const struct {
    strata_mode mode;
    int P, B, depth, s;
    double wpc;
  } cases[] = {
      {STRATA_MODE_BSP, 2, 2, 4, 0, 1},    {STRATA_MODE_SSP, 3, 3, 3, 1, 1},
      {STRATA_MODE_SSP, 2, 4, 4, 2, 0.5},  {STRATA_MODE_ESSP, 3, 3, 2, 1, 1},
      {STRATA_MODE_ASYNC, 2, 2, 4, -1, 1}, {STRATA_MODE_VAP, 2, 3, 4, -1, 1},
      {STRATA_MODE_VAP, 3, 3, 2, -1, 0.5},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int reorder = 0; reorder < 2; reorder++) {
      tcase k = {.mode = cases[i].mode,
                 .P = cases[i].P,
                 .B = cases[i].B,
                 .depth = cases[i].depth,
                 .passes = 3,
                 .s = cases[i].s,
                 .wpc = cases[i].wpc,
                 .rows = 9,
                 .max_delay = 3,
                 .reorder = reorder,
                 .seed = seed + i};
      run_case(&k);
    }
}

int main(void) {
  alarm(WATCHDOG_S * STRATA_TEST_TIME_SCALE);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_modes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
