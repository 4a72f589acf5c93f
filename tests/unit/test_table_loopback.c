/*
 * Unit tests for comm/table.c (strata/table.h) without mpiexec: P worker
 * threads, each on its own endpoint of a loopback transport (ranks 1..P,
 * rank 0 the idle coordinator as in the engine), with seeded delays and
 * reordering. Every worker adds to its own component of every row, in
 * amounts drawn from the seed, so that a value read tells exactly which of
 * that worker's clocks it includes: the SSP window, read-my-writes, ESSP
 * pushes, async progress, snapshots and the final sums are checked from
 * that. A table opened at a start clock S (a resumed run) holds in its
 * initial values every worker's amounts of the clocks before S, and runs
 * clocks S, S + 1, ...
 *
 * The randomised tests print their seed; STRATA_TEST_SEED=X replays it (the
 * same draws; thread timing still varies). A watchdog fails a test that
 * hangs.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
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
#include "strata/table.h"
#include "strata/transport.h"

enum { WATCHDOG_S = 20, TAG = 10, MAXP = 4 };

static uint64_t g_seed;
static char g_running[200]; /* the scenario under way, for the watchdog */

static void on_alarm(int sig) {
  (void)sig;
  static const char head[] = "\nwatchdog: hung in ";
  ssize_t rc = write(2, head, sizeof head - 1);
  rc = write(2, g_running, strlen(g_running));
  rc = write(2, "\n", 1);
  (void)rc;
  _exit(3);
}

/* ---- scenarios ---------------------------------------------------------- */

typedef enum { RUN = 0, PUSH, STALL, FIRST_READ } mode;

typedef struct scen {
  mode mode;
  int P;
  uint32_t N;
  int C; /* clocks every worker runs */
  strata_mode cons;
  int s;
  strata_prefetch prefetch;
  int snapshots;   /* RUN: request random snapshots along the way */
  int refresh;     /* RUN: refresh a random row every clock */
  int final_snap;  /* RUN: snapshot C of every row, checked exact */
  int early_close; /* RUN: worker 0 closes without the final read */
  int extra;       /* RUN, async: worker w runs extra * w more clocks */
  int start;       /* the table's start clock: clocks run [start, start + C) */
  int max_delay, reorder;
  uint64_t seed;
  int32_t *S; /* S[(w * N + r) * (Cmax + 1) + k]: worker w's sum on row r over clocks < k */
  int Cmax;
} scen;

/* The clock every worker ends at (the last clock of the run plus one). */
static int end_clock(const scen *sc) { return sc->start + sc->C; }

static int32_t prefix(const scen *sc, int w, uint32_t r, int k) {
  return sc->S[((size_t)w * sc->N + r) * (size_t)(sc->Cmax + 1) + (size_t)k];
}

/* What worker w adds to row r at clock c: 1..3, never 0, so that the sums
 * over its first k clocks differ for every k. */
static void scen_prepare(scen *sc) {
  sc->Cmax = sc->start + sc->C + sc->extra * (sc->P - 1);
  sc->S = malloc((size_t)sc->P * sc->N * (size_t)(sc->Cmax + 1) * sizeof *sc->S);
  assert_non_null(sc->S);
  for (int w = 0; w < sc->P; w++)
    for (uint32_t r = 0; r < sc->N; r++) {
      int32_t *p = sc->S + ((size_t)w * sc->N + r) * (size_t)(sc->Cmax + 1);
      p[0] = 0;
      for (int c = 0; c < sc->Cmax; c++)
        p[c + 1] = p[c] + 1 + (int32_t)(strata_mix64(sc->seed ^ strata_mix64(((uint64_t)w << 40) ^ ((uint64_t)c << 20) ^ r)) % 3);
    }
}

/* ---- one worker ------------------------------------------------------- */

typedef struct worker {
  scen *sc;
  strata_loopback *lb;
  pthread_barrier_t *bar;
  int me, C; /* C: the clock this worker ends at */
  strata_rng rng;
  strata_table *tb;
  float *buf;     /* N * P */
  int32_t *own;   /* this worker's increments so far, per row */
  float **snap;   /* RUN: snapshot t's buffer (at t - start), or NULL */
  int close_rc;
  strata_table_stats st;
  int peers_idle;   /* no other worker has written yet */
  uint64_t checked; /* values checked */
  int bad;
  char msg[640];
} worker;

static void record(worker *w, const char *fmt, ...) STRATA_PRINTF(2, 3);
static void record(worker *w, const char *fmt, ...) {
  char line[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  /* Printed at once, so that a failure that hangs the others is seen. */
  fprintf(stderr, "  worker %d (seed %llu): %s\n", w->me, (unsigned long long)w->sc->seed, line);
  if (!w->bad) snprintf(w->msg, sizeof w->msg, "worker %d: %s [%s]", w->me, line, g_running);
  w->bad = 1;
}

static int api(worker *w, int rc, const char *what) {
  if (rc) record(w, "%s failed: %s (%s)", what, strata_err_name(rc), strata_err_msg());
  return rc;
}

/* The clock k of worker x whose prefix sum v is on row r, or -1. */
static int clocks_in(const scen *sc, int x, uint32_t r, float v) {
  for (int k = 0; k <= sc->Cmax; k++)
    if ((float)r + (float)prefix(sc, x, r, k) == v) return k;
  return -1;
}

/* Checks row r as read at clock c: this worker's component exact, every
 * other worker's a whole number of its clocks; with window, within what SSP
 * allows: at least the c - s clocks it guarantees, and at most c + s + 1,
 * since every worker reads every clock and so cannot pass clock c + s
 * before this one ends clock c; under BSP (SSP, s = 0) exactly c. */
static void check_row(worker *w, uint32_t r, const float *v, int c, int window, const char *how) {
  const scen *sc = w->sc;
  for (int x = 0; x < sc->P; x++) {
    w->checked++;
    if (x == w->me) {
      if (v[x] != (float)r + (float)w->own[r])
        record(w, "%s row %u at clock %d: own component %g, its writes sum to %d", how, r, c,
               (double)v[x], (int)r + w->own[r]);
      continue;
    }
    int k = clocks_in(sc, x, r, v[x]);
    if (k < 0) {
      record(w, "%s row %u at clock %d: worker %d's component %g is no sum of its first clocks",
             how, r, c, x, (double)v[x]);
      continue;
    }
    if (w->peers_idle && k != sc->start)
      record(w, "%s row %u at clock %d: has %d clocks of worker %d, which has not started", how, r,
             c, k, x);
    if (!window) continue;
    int bsp = sc->cons == STRATA_MODE_SSP && sc->s == 0;
    int lo = c - sc->s, hi = bsp ? c : c + sc->s + 1;
    if (hi > end_clock(sc)) hi = end_clock(sc);
    if (k < lo)
      record(w, "%s row %u at clock %d (s = %d): has %d clocks of worker %d, fewer than the %d guaranteed",
             how, r, c, sc->s, k, x, lo);
    if (k > hi)
      record(w, "%s row %u at clock %d (s = %d): has %d clocks of worker %d, more than the %d %s",
             how, r, c, sc->s, k, x, hi, bsp ? "a BSP read may see" : "it can have ended");
  }
}

static void check_exact(worker *w, uint32_t r, const float *v, int k, const char *how) {
  for (int x = 0; x < w->sc->P; x++) {
    w->checked++;
    float want = (float)r + (float)prefix(w->sc, x, r, k);
    if (v[x] != want)
      record(w, "%s row %u: worker %d's component %g, want %g (its first %d clocks)", how, r, x,
             (double)v[x], (double)want, k);
  }
}

static int get_check(worker *w, uint32_t lo, uint32_t hi, int c, int window) {
  int rc = api(w, strata_table_get_rows(w->tb, lo, hi, -1, w->buf), "get_rows");
  for (uint32_t r = lo; !rc && r < hi; r++)
    check_row(w, r, w->buf + (size_t)(r - lo) * w->sc->P, c, window, "get");
  return rc;
}

/* Adds this clock's amounts to every row, one unit at a time, checking
 * now and then that the worker sees each of them at once (through get when
 * may_get, which may ask for rows, else only through peek). */
static int add_clock(worker *w, int c, int window, int may_get) {
  const scen *sc = w->sc;
  float unit[MAXP] = {0};
  unit[w->me] = 1;
  for (uint32_t r = 0; r < sc->N; r++) {
    int32_t n = prefix(sc, w->me, r, c + 1) - prefix(sc, w->me, r, c);
    for (int32_t j = 0; j < n; j++) {
      int rc = api(w, strata_table_inc(w->tb, r, unit), "inc");
      if (rc) return rc;
      w->own[r]++;
      uint64_t d = strata_rng_below(&w->rng, 6);
      if (d == 0 && may_get) {
        if ((rc = get_check(w, r, r + 1, c, window))) return rc;
      } else if (d <= 1) {
        if ((rc = api(w, strata_table_peek_rows(w->tb, r, r + 1, w->buf), "peek"))) return rc;
        check_row(w, r, w->buf, c, 0, "peek");
      }
    }
  }
  return 0;
}

/* Varies the workers' pace in calls, not time. */
static int dawdle(worker *w) {
  uint64_t d = strata_rng_below(&w->rng, 8);
  if (d == 0) sched_yield();
  if (d < 2) return 0;
  if (d < 4)
    for (uint64_t i = strata_rng_below(&w->rng, 6); i > 0; i--)
      if (api(w, strata_table_serve(w->tb), "serve")) return -1;
  return 0;
}

static void check_snapshot(worker *w, int t, const uint8_t *asked) {
  const scen *sc = w->sc;
  for (uint32_t r = 0; r < sc->N; r++) {
    const float *v = w->snap[t - sc->start] + (size_t)r * sc->P;
    if (asked[r]) {
      char how[32];
      snprintf(how, sizeof how, "snapshot %d", t);
      check_exact(w, r, v, t, how);
    } else {
      for (int x = 0; x < sc->P; x++)
        if (v[x] != -7.0f) record(w, "snapshot %d wrote row %u, not asked for", t, r);
    }
  }
}

/* Tests (or with wait, completes) every snapshot still out. */
static int test_snapshots(worker *w, uint8_t **asked, int wait) {
  for (int t = w->sc->start + 1; t <= w->C; t++) {
    int k = t - w->sc->start;
    if (!w->snap[k]) continue;
    int done = 0;
    int rc = api(w, strata_table_snapshot_test(w->tb, t, wait, &done), "snapshot_test");
    if (rc) return rc;
    if (!done) {
      if (wait) record(w, "snapshot %d not done after a waiting test", t);
      continue;
    }
    check_snapshot(w, t, asked[k]);
    free(w->snap[k]);
    w->snap[k] = NULL;
  }
  return 0;
}

static int ask_snapshot(worker *w, uint8_t **asked, int all) {
  const scen *sc = w->sc;
  int t = strata_table_current_clock(w->tb) + 1, k = t - sc->start;
  uint32_t rows[64], n = 0;
  asked[k] = calloc(sc->N, 1);
  w->snap[k] = malloc((size_t)sc->N * sc->P * sizeof(float));
  if (!asked[k] || !w->snap[k]) {
    record(w, "out of memory");
    return -1;
  }
  for (size_t i = 0; i < (size_t)sc->N * sc->P; i++) w->snap[k][i] = -7.0f;
  for (uint32_t r = 0; r < sc->N; r++)
    if (all || strata_rng_below(&w->rng, 2)) rows[n++] = r;
  /* Any order will do. */
  for (uint32_t i = n; i > 1; i--) {
    uint32_t j = (uint32_t)strata_rng_below(&w->rng, i), x = rows[i - 1];
    rows[i - 1] = rows[j];
    rows[j] = x;
  }
  for (uint32_t i = 0; i < n; i++) asked[k][rows[i]] = 1;
  return api(w, strata_table_snapshot_request(w->tb, rows, n, w->snap[k]), "snapshot_request");
}

/* Clocks [from, to): reads, writes, maybe snapshots and refreshes. */
static int run_clocks(worker *w, int from, int to, uint8_t **asked) {
  const scen *sc = w->sc;
  int window = sc->cons != STRATA_MODE_ASYNC, rc = 0;
  for (int c = from; c < to && !rc; c++) {
    uint32_t lo = (uint32_t)strata_rng_below(&w->rng, sc->N);
    uint32_t hi = lo + 1 + (uint32_t)strata_rng_below(&w->rng, sc->N - lo);
    if ((rc = get_check(w, lo, hi, c, window))) break;
    if (sc->refresh &&
        (rc = api(w, strata_table_refresh(w->tb, (uint32_t)strata_rng_below(&w->rng, sc->N), -1), "refresh")))
      break;
    if ((rc = add_clock(w, c, window, 1))) break;
    if (sc->snapshots && strata_rng_below(&w->rng, 2) && (rc = ask_snapshot(w, asked, 0))) break;
    if (sc->final_snap && c == end_clock(sc) - 1 && (rc = ask_snapshot(w, asked, 1))) break;
    if ((rc = dawdle(w))) break;
    if ((sc->snapshots || sc->final_snap) && (rc = test_snapshots(w, asked, 0))) break;
    if ((rc = api(w, strata_table_clock(w->tb), "clock"))) break;
    if (strata_table_current_clock(w->tb) != c + 1) record(w, "clock %d after clock %d ended", strata_table_current_clock(w->tb), c);
  }
  return rc;
}

static int final_read(worker *w) {
  const scen *sc = w->sc;
  /* Staleness 0 at the end clock: every update of every worker. */
  int rc = api(w, strata_table_get_rows(w->tb, 0, sc->N, 0, w->buf), "final get_rows");
  for (uint32_t r = 0; !rc && r < sc->N; r++)
    check_exact(w, r, w->buf + (size_t)r * sc->P, end_clock(sc), "final");
  return rc;
}

/* Reads every row at the start clock with staleness 0, which the initial
 * values satisfy: exactly them, at once, with no request sent. */
static int start_read(worker *w) {
  const scen *sc = w->sc;
  w->peers_idle = 1;
  int rc = api(w, strata_table_get_rows(w->tb, 0, sc->N, 0, w->buf), "start get_rows");
  for (uint32_t r = 0; !rc && r < sc->N; r++)
    check_exact(w, r, w->buf + (size_t)r * sc->P, sc->start, "read at the start clock:");
  w->peers_idle = 0;
  strata_table_stats st;
  strata_table_get_stats(w->tb, &st);
  if (!rc && (st.requests != 0 || st.wait_s != 0 || st.reads != sc->N))
    record(w, "the read at the start clock sent %llu requests and waited %g s",
           (unsigned long long)st.requests, st.wait_s);
  if (!rc && (st.diff_min != 0 || st.hist[0] != sc->N))
    record(w, "the read at the start clock has differential %d", (int)st.diff_min);
  return rc;
}

/* ESSP (or, to compare, SSP): read every row once at the start clock, then only
 * write; after the last clock, serve and watch the cache through peek. */
static int run_push(worker *w) {
  const scen *sc = w->sc;
  /* No window: peers that no longer read are not held back (the bound
   * above c + s + 1 in check_row assumes every worker reads every clock). */
  int rc = get_check(w, 0, sc->N, sc->start, 0);
  for (int c = sc->start; c < end_clock(sc) && !rc; c++) {
    if ((rc = add_clock(w, c, 0, 0))) break;
    if ((rc = dawdle(w))) break;
    rc = api(w, strata_table_clock(w->tb), "clock");
  }
  if (rc) return rc;
  int essp = sc->cons == STRATA_MODE_ESSP;
  /* ESSP: the shards' pushes bring every row to its final value, no read
   * needed. SSP: nothing comes unasked, the cache keeps the initial values
   * plus this worker's own writes. */
  for (int i = 0; i < (essp ? 4000 : 20); i++) {
    if ((rc = api(w, strata_table_serve_for(w->tb, 1e-3, 0), "serve_for"))) return rc;
    if ((rc = api(w, strata_table_peek_rows(w->tb, 0, sc->N, w->buf), "peek"))) return rc;
    int final = 1;
    for (uint32_t r = 0; r < sc->N && final; r++)
      for (int x = 0; x < sc->P; x++)
        if (w->buf[(size_t)r * sc->P + x] != (float)r + (float)prefix(sc, x, r, end_clock(sc)))
          final = 0;
    if (essp && final) return 0;
  }
  for (uint32_t r = 0; r < sc->N; r++) {
    const float *v = w->buf + (size_t)r * sc->P;
    if (essp) {
      check_exact(w, r, v, end_clock(sc), "ESSP push, 4 s after the last clock,");
      continue;
    }
    for (int x = 0; x < sc->P; x++) {
      float want = (float)r + (float)prefix(sc, x, r, x == w->me ? end_clock(sc) : sc->start);
      if (v[x] != want)
        record(w, "SSP without reads: row %u component %d is %g, want %g", r, x, (double)v[x], (double)want);
    }
  }
  return 0;
}

static void *worker_main(void *p) {
  worker *w = p;
  const scen *sc = w->sc;
  strata_transport t;
  uint8_t *asked[256] = {0};
  float *snap[256] = {0};
  w->snap = snap;
  w->close_rc = -1;
  w->C = end_clock(sc) + (sc->cons == STRATA_MODE_ASYNC ? sc->extra * w->me : 0);
  strata_rng_seed(&w->rng, strata_mix64(sc->seed + 1000 * (uint64_t)(w->me + 1)));
  w->buf = malloc((size_t)sc->N * sc->P * sizeof(float));
  w->own = calloc(sc->N, sizeof *w->own);
  float *init = malloc((size_t)sc->N * sc->P * sizeof(float));
  if (!w->buf || !w->own || !init || w->C - sc->start > 255) {
    record(w, "out of memory");
    goto out;
  }
  /* The initial values hold every worker's clocks before the start. */
  for (uint32_t r = 0; r < sc->N; r++) {
    for (int x = 0; x < sc->P; x++)
      init[(size_t)r * sc->P + x] = (float)r + (float)prefix(sc, x, r, sc->start);
    w->own[r] = prefix(sc, w->me, r, sc->start);
  }
  strata_table_conf conf = {.n_rows = sc->N,
                            .row_len = (uint32_t)sc->P,
                            .workers = sc->P,
                            .me = w->me,
                            .rank_base = 1,
                            .tag = TAG,
                            .mode = sc->cons,
                            .staleness = sc->s,
                            .prefetch = sc->prefetch,
                            .snapshots = sc->snapshots || sc->final_snap,
                            .start_clock = sc->start};
  if (api(w, strata_loopback_endpoint(w->lb, 1 + w->me, &t), "endpoint") ||
      api(w, strata_table_open(&t, &conf, init, &w->tb), "open"))
    goto out;
  if (strata_table_current_clock(w->tb) != sc->start)
    record(w, "clock %d after opening at %d", strata_table_current_clock(w->tb), sc->start);
  int rc = 0;
  switch (sc->mode) {
    case RUN:
      rc = run_clocks(w, sc->start, w->C, asked);
      if (!rc && (sc->snapshots || sc->final_snap)) rc = test_snapshots(w, asked, 1);
      if (!rc && !(sc->early_close && w->me == 0) && !sc->extra) rc = final_read(w);
      break;
    case PUSH:
      rc = run_push(w);
      break;
    case STALL:
      /* Worker 0 runs every clock while the others have not started; its
       * reads must not wait for them. */
      if (w->me == 0) {
        w->peers_idle = 1;
        rc = run_clocks(w, sc->start, w->C, asked);
        w->peers_idle = 0;
        strata_table_stats st;
        strata_table_get_stats(w->tb, &st);
        if (st.wait_s != 0) record(w, "async reads waited %g s", st.wait_s);
      }
      pthread_barrier_wait(w->bar);
      if (!rc && w->me != 0) rc = run_clocks(w, sc->start, w->C, asked);
      if (!rc) rc = final_read(w);
      break;
    case FIRST_READ:
      /* Worker 0 reads every row at the start clock, with staleness 0,
       * while the others have not started: the initial values count as
       * every update before the start, so the read needs nobody (a read
       * that waited would hang and trip the watchdog). Then the others
       * do the same, and when all have, the run goes on. */
      if (w->me == 0) rc = start_read(w);
      pthread_barrier_wait(w->bar);
      if (!rc && w->me != 0) rc = start_read(w);
      pthread_barrier_wait(w->bar);
      if (!rc) rc = run_clocks(w, sc->start, w->C, asked);
      if (!rc) rc = final_read(w);
      break;
  }
  if (rc) goto out;
  strata_table_get_stats(w->tb, &w->st);
  w->close_rc = strata_table_close(w->tb);
  w->tb = NULL;
  api(w, w->close_rc, "close");
out:
  if (w->tb) strata_table_free(w->tb);
  for (int i = 0; i < 256; i++) {
    free(asked[i]);
    free(snap[i]);
  }
  free(init);
  free(w->buf);
  free(w->own);
  return NULL;
}

/* Runs one scenario: P threads, each a worker, on a fresh loopback. */
static void run_scen(scen *sc, worker *ws) {
  snprintf(
      g_running, sizeof g_running,
      "mode %d, %s s=%d, P=%d, N=%u, C=%d from %d, prefetch %d, delay %d, reorder %d, seed %llu",
      (int)sc->mode, strata_mode_name(sc->cons), sc->s, sc->P, sc->N, sc->C, sc->start,
      (int)sc->prefetch, sc->max_delay, sc->reorder, (unsigned long long)sc->seed);
  scen_prepare(sc);
  strata_loopback_conf lc = {.size = sc->P + 1, .seed = sc->seed, .max_delay = sc->max_delay,
                             .reorder = sc->reorder};
  strata_loopback *lb;
  assert_int_equal(strata_loopback_open(&lc, &lb), 0);
  pthread_barrier_t bar;
  assert_int_equal(pthread_barrier_init(&bar, NULL, (unsigned)sc->P), 0);
  pthread_t th[MAXP];
  assert_true(sc->P <= MAXP);
  for (int i = 0; i < sc->P; i++) {
    ws[i] = (worker){.sc = sc, .lb = lb, .bar = &bar, .me = i};
    assert_int_equal(pthread_create(&th[i], NULL, worker_main, &ws[i]), 0);
  }
  for (int i = 0; i < sc->P; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
  pthread_barrier_destroy(&bar);
  strata_loopback_close(lb);
  free(sc->S);
  sc->S = NULL;
  for (int i = 0; i < sc->P; i++) {
    if (ws[i].bad) fail_msg("%s", ws[i].msg);
    assert_int_equal(ws[i].close_rc, 0);
    assert_true(ws[i].checked > 0);
  }
}

/* The stats agree with the window: no read older than s clocks, and BSP
 * reads all from the current clock. */
static void check_window_stats(const scen *sc, const worker *ws) {
  for (int i = 0; i < sc->P; i++) {
    const strata_table_stats *st = &ws[i].st;
    assert_true(st->reads > 0);
    assert_true(st->diff_min >= -sc->s);
    uint64_t n = 0;
    for (int b = 0; b < STRATA_TABLE_HIST; b++) {
      if (b > sc->s) assert_int_equal(st->hist[b], 0);
      n += st->hist[b];
    }
    assert_int_equal(n, st->reads);
    if (sc->s == 0) assert_int_equal(st->hist[0], st->reads);
  }
}

static uint64_t sub_seed(int k) { return g_seed + (uint64_t)k; }

static void start(void) { alarm(WATCHDOG_S * STRATA_TEST_TIME_SCALE); }
static void stop(void) { alarm(0); }

/* ---- tests ------------------------------------------------------------ */

/* Every read at clock c sees at least c - s clocks of every worker; BSP
 * (s = 0) reads are all from the current clock. Prefetching varies. */
static void test_ssp_window(void **state) {
  (void)state;
  start();
  const int stal[] = {0, 1, 3};
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++) {
      scen sc = {.mode = RUN,
                 .P = 3,
                 .N = 7,
                 .C = 16,
                 .cons = STRATA_MODE_SSP,
                 .s = stal[i],
                 .prefetch = (strata_prefetch)k,
                 .max_delay = 3,
                 .reorder = 1,
                 .seed = sub_seed(10 * i + k)};
      worker ws[MAXP];
      run_scen(&sc, ws);
      check_window_stats(&sc, ws);
      uint64_t pushes = 0;
      for (int w = 0; w < sc.P; w++) pushes += ws[w].st.pushes;
      assert_int_equal(pushes, 0);
    }
  stop();
}

/* ESSP keeps the SSP window, and pushes. */
static void test_essp_window(void **state) {
  (void)state;
  start();
  for (int k = 0; k < 4; k++) {
    scen sc = {.mode = RUN,
               .P = 3,
               .N = 7,
               .C = 16,
               .cons = STRATA_MODE_ESSP,
               .s = k % 3,
               .prefetch = (strata_prefetch)(k % 3),
               .max_delay = 3,
               .reorder = 1,
               .seed = sub_seed(100 + k)};
    worker ws[MAXP];
    run_scen(&sc, ws);
    check_window_stats(&sc, ws);
    uint64_t pushes = 0;
    for (int w = 0; w < sc.P; w++) pushes += ws[w].st.pushes;
    assert_true(pushes > 0);
  }
  stop();
}

/* Rows read once are pushed by their shards until the cache holds the
 * final values, with no further read; plain SSP sends nothing unasked. */
static void test_essp_push(void **state) {
  (void)state;
  start();
  for (int k = 0; k < 4; k++) {
    scen sc = {.mode = PUSH,
               .P = 3,
               .N = 8,
               .C = 10,
               .cons = k < 3 ? STRATA_MODE_ESSP : STRATA_MODE_SSP,
               .s = k % 2,
               .max_delay = 3,
               .reorder = 1,
               .seed = sub_seed(200 + k)};
    worker ws[MAXP];
    run_scen(&sc, ws);
    for (int w = 0; w < sc.P; w++) {
      if (sc.cons == STRATA_MODE_ESSP)
        assert_true(ws[w].st.pushes > 0);
      else assert_int_equal(ws[w].st.pushes, 0);
      /* The only request: the subscription (ESSP), or none at all. */
      assert_int_equal(ws[w].st.requests, sc.cons == STRATA_MODE_ESSP ? sc.N : 0);
    }
  }
  stop();
}

/* The table rules of these tests, by index. */
static const strata_mode KINDS[3] = {STRATA_MODE_SSP, STRATA_MODE_ESSP, STRATA_MODE_ASYNC};

/* Read-my-writes under long delays, refreshes and aggressive prefetch, with
 * every consistency: the checks in add_clock read after single increments,
 * while replies that may or may not include the worker's own batches come
 * and go. */
static void test_read_my_writes(void **state) {
  (void)state;
  start();
  for (int k = 0; k < 3; k++) {
    scen sc = {.mode = RUN,
               .P = 3,
               .N = 5,
               .C = 14,
               .cons = KINDS[k],
               .s = 2,
               .prefetch = STRATA_PREFETCH_AGGRESSIVE,
               .refresh = 1,
               .max_delay = 8,
               .reorder = 1,
               .seed = sub_seed(300 + k)};
    worker ws[MAXP];
    run_scen(&sc, ws);
  }
  stop();
}

/* Async: worker 0 runs every clock while its peers have not started (they
 * wait on a barrier it reaches only at the end), so a read that waited would
 * hang and trip the watchdog. */
static void test_async_never_waits(void **state) {
  (void)state;
  start();
  for (int k = 0; k < 3; k++) {
    scen sc = {.mode = STALL,
               .P = 3,
               .N = 6,
               .C = 30,
               .cons = STRATA_MODE_ASYNC,
               .prefetch = (strata_prefetch)k,
               .refresh = 1,
               .max_delay = 3,
               .reorder = 1,
               .seed = sub_seed(400 + k)};
    worker ws[MAXP];
    run_scen(&sc, ws);
  }
  stop();
}

/* Shutdown: the final snapshot and the final read hold the exact sums, and
 * every close returns 0, also when worker 0 leaves first while the others
 * still read from its shard, and under async with workers ending at
 * different clocks. */
static void test_shutdown(void **state) {
  (void)state;
  start();
  for (int k = 0; k < 4; k++) {
    scen sc = {.mode = RUN,
               .P = k == 3 ? 4 : 3,
               .N = 7,
               .C = 8,
               .cons = k == 2 ? STRATA_MODE_ASYNC : STRATA_MODE_SSP,
               .s = 1 + k % 2,
               .final_snap = k != 2,
               .early_close = k % 2,
               .extra = k == 2 ? 5 : 0,
               .max_delay = 4,
               .reorder = 1,
               .seed = sub_seed(500 + k)};
    worker ws[MAXP];
    run_scen(&sc, ws);
  }
  stop();
}

/* Snapshot t holds exactly the updates stamped < t, and only the rows asked
 * for, whatever each worker's clock when it lands. */
static void test_snapshots_exact(void **state) {
  (void)state;
  start();
  for (int k = 0; k < 4; k++) {
    scen sc = {.mode = RUN,
               .P = 3,
               .N = 6,
               .C = 12,
               .cons = k == 3 ? STRATA_MODE_ASYNC : KINDS[k % 2],
               .s = k % 3,
               .snapshots = 1,
               .max_delay = 3,
               .reorder = 1,
               .seed = sub_seed(600 + k)};
    worker ws[MAXP];
    run_scen(&sc, ws);
  }
  stop();
}

/* No delays, no reordering: the plain path. */
static void test_no_delay(void **state) {
  (void)state;
  start();
  for (int k = 0; k < 3; k++) {
    scen sc = {.mode = RUN,
               .P = 1 + k,
               .N = 5,
               .C = 10,
               .cons = KINDS[k],
               .s = 1,
               .snapshots = 1,
               .seed = sub_seed(700 + k)};
    worker ws[MAXP];
    run_scen(&sc, ws);
  }
  stop();
}

/* ---- a table opened at a start clock (a resumed run) ------------------ */

/* Opened at start clock S, every worker runs clocks S, S + 1, ...: the SSP
 * window, read-my-writes and the final sums hold relative to S, and pure
 * snapshots S + 1, ... hold exactly the initial values (everything before
 * S) plus the clocks from S on, under every consistency. */
static void test_start_clock_runs(void **state) {
  (void)state;
  start();
  const int starts[] = {1, 1000};
  const struct {
    strata_mode cons;
    int s;
  } kinds[] = {
      {STRATA_MODE_SSP, 0}, {STRATA_MODE_SSP, 2}, {STRATA_MODE_ESSP, 1}, {STRATA_MODE_ASYNC, 0}};
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 4; k++) {
      scen sc = {.mode = RUN, .P = 3, .N = 6, .C = 8, .cons = kinds[k].cons, .s = kinds[k].s,
                 .prefetch = (strata_prefetch)((i + k) % 3), .snapshots = 1, .refresh = k == 3,
                 .start = starts[i], .max_delay = 3, .reorder = 1,
                 .seed = sub_seed(800 + 10 * i + k)};
      worker ws[MAXP];
      run_scen(&sc, ws);
      if (sc.cons != STRATA_MODE_ASYNC) check_window_stats(&sc, ws);
    }
  stop();
}

/* At the start clock, a read with staleness 0 is satisfied by the initial
 * values alone: worker 0 reads every row while its peers have not started
 * and gets them at once, with no request and no wait. */
static void test_start_clock_read_at_once(void **state) {
  (void)state;
  start();
  const int starts[] = {5, 1000};
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 3; k++) {
      scen sc = {.mode = FIRST_READ,
                 .P = 3,
                 .N = 7,
                 .C = 4,
                 .cons = k == 2 ? STRATA_MODE_ASYNC : STRATA_MODE_SSP,
                 .s = 2 * k,
                 .prefetch = (strata_prefetch)k,
                 .start = starts[i],
                 .max_delay = 2,
                 .reorder = 1,
                 .seed = sub_seed(900 + 10 * i + k)};
      worker ws[MAXP];
      run_scen(&sc, ws);
    }
  stop();
}

/* Shutdown from a start clock: the final snapshot and read are exact, also
 * when worker 0 leaves first; async with peers ending at different clocks;
 * and async reads from S never wait for peers that have not started. */
static void test_start_clock_shutdown_and_async(void **state) {
  (void)state;
  start();
  for (int k = 0; k < 3; k++) {
    scen sc = {.mode = RUN,
               .P = 3,
               .N = 5,
               .C = 6,
               .cons = k == 2 ? STRATA_MODE_ASYNC : STRATA_MODE_SSP,
               .s = 1,
               .final_snap = k != 2,
               .early_close = k == 1,
               .extra = k == 2 ? 3 : 0,
               .start = 3 + 20 * k,
               .max_delay = 4,
               .reorder = 1,
               .seed = sub_seed(950 + k)};
    worker ws[MAXP];
    run_scen(&sc, ws);
  }
  scen sc = {.mode = STALL,
             .P = 3,
             .N = 6,
             .C = 12,
             .cons = STRATA_MODE_ASYNC,
             .prefetch = STRATA_PREFETCH_AGGRESSIVE,
             .refresh = 1,
             .start = 40,
             .max_delay = 3,
             .reorder = 1,
             .seed = sub_seed(960)};
  worker ws[MAXP];
  run_scen(&sc, ws);
  stop();
}

/* A start clock below 0 is refused; 0 and a large one are not. */
static void test_start_clock_bounds(void **state) {
  (void)state;
  strata_loopback_conf lc = {.size = 2, .seed = g_seed};
  strata_loopback *lb;
  assert_int_equal(strata_loopback_open(&lc, &lb), 0);
  strata_transport t;
  assert_int_equal(strata_loopback_endpoint(lb, 1, &t), 0);
  const float init[4] = {1, 2, 3, 4};
  const int32_t clocks[] = {-1, INT32_MIN, 0, 123456};
  for (int i = 0; i < 4; i++) {
    strata_table_conf conf = {.n_rows = 4,
                              .row_len = 1,
                              .workers = 1,
                              .me = 0,
                              .rank_base = 1,
                              .tag = TAG,
                              .mode = STRATA_MODE_SSP,
                              .snapshots = 1,
                              .start_clock = clocks[i]};
    strata_table *tb = (strata_table *)&tb;
    strata_err_clear();
    int rc = strata_table_open(&t, &conf, init, &tb);
    if (clocks[i] < 0) {
      assert_int_equal(rc, STRATA_EINVAL);
      assert_null(tb);
      assert_non_null(strstr(strata_err_msg(), "invalid configuration"));
      continue;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(strata_table_current_clock(tb), clocks[i]);
    float out[4];
    assert_int_equal(strata_table_get_rows(tb, 0, 4, 0, out), 0);
    assert_memory_equal(out, init, sizeof out);
    /* One clock on, snapshot start + 2 holds the increment of clock start + 1. */
    const float one = 1;
    assert_int_equal(strata_table_inc(tb, 2, &one), 0);
    assert_int_equal(strata_table_clock(tb), 0);
    assert_int_equal(strata_table_current_clock(tb), clocks[i] + 1);
    float snap[4] = {0};
    const uint32_t rows[] = {3, 2, 1, 0};
    assert_int_equal(strata_table_snapshot_request(tb, rows, 4, snap), 0);
    assert_int_equal(strata_table_inc(tb, 0, &one), 0);
    assert_int_equal(strata_table_clock(tb), 0);
    int done = 0;
    assert_int_equal(strata_table_snapshot_test(tb, clocks[i] + 2, 1, &done), 0);
    assert_int_equal(done, 1);
    const float want[4] = {2, 2, 4, 4};
    assert_memory_equal(snap, want, sizeof snap);
    assert_int_equal(strata_table_close(tb), 0);
  }
  strata_loopback_close(lb);
}


/* ---- BSP reads hold exactly the clocks before theirs ------------------ */

/* Three workers of a BSP table (SSP, staleness 0) on one thread, stepped by
 * hand, so that what reaches a shard when is fixed by the script (and the
 * loopback's seed): each message arrives within rounds() serves of its
 * receiver. Worker x adds 2^c to column x of every row at clock c, so a
 * column's value names the clocks it holds. */
enum { BSP_P = 3, BSP_N = 6 };

typedef struct bsp_run {
  strata_transport t[BSP_P]; /* the tables keep pointers to them */
  strata_table *tb[BSP_P];
  int max_delay;
  float buf[BSP_N * BSP_P];
} bsp_run;

static int rounds(const bsp_run *b) { return 2 * b->max_delay + 4; }

/* Every table serves, in turn, until every message sent has arrived and been
 * answered. */
static void serve_all(bsp_run *b) {
  for (int i = 0; i < rounds(b); i++)
    for (int x = 0; x < BSP_P; x++) assert_int_equal(strata_table_serve(b->tb[x]), 0);
}

/* Worker x's writes of clock c, then its clock(). */
static void bsp_clock(bsp_run *b, int x, int c) {
  float d[BSP_P] = {0};
  d[x] = (float)(1u << c);
  for (uint32_t r = 0; r < BSP_N; r++) assert_int_equal(strata_table_inc(b->tb[x], r, d), 0);
  assert_int_equal(strata_table_clock(b->tb[x]), 0);
  assert_int_equal(strata_table_current_clock(b->tb[x]), c + 1);
}

/* Asks for every row at worker x's clock (no wait), lets everyone serve. */
static void bsp_refresh(bsp_run *b, int x) {
  for (uint32_t r = 0; r < BSP_N; r++) assert_int_equal(strata_table_refresh(b->tb[x], r, -1), 0);
  serve_all(b);
}

/* Column y of every row in b->buf holds exactly y's clocks < upto[y]. */
static void bsp_expect(const bsp_run *b, const int *upto, const char *what) {
  for (uint32_t r = 0; r < BSP_N; r++)
    for (int y = 0; y < BSP_P; y++) {
      float want = (float)((1u << upto[y]) - 1), got = b->buf[r * BSP_P + (uint32_t)y];
      if (got != want)
        fail_msg("%s: row %u column %d is %g, want %g (clocks < %d) [max_delay %d, seed %llu]",
                 what, r, y, (double)got, (double)want, upto[y], b->max_delay,
                 (unsigned long long)g_seed);
    }
}

static void *bsp_close(void *p) {
  return (void *)(intptr_t)strata_table_close(p);
}

static void bsp_script(int max_delay, int reorder, uint64_t seed) {
  bsp_run b = {.max_delay = max_delay};
  strata_loopback_conf lc = {.size = BSP_P + 1, .seed = seed, .max_delay = max_delay,
                             .reorder = reorder};
  strata_loopback *lb;
  assert_int_equal(strata_loopback_open(&lc, &lb), 0);
  float init[BSP_N * BSP_P] = {0};
  for (int x = 0; x < BSP_P; x++) {
    assert_int_equal(strata_loopback_endpoint(lb, 1 + x, &b.t[x]), 0);
    strata_table_conf conf = {.n_rows = BSP_N,
                              .row_len = BSP_P,
                              .workers = BSP_P,
                              .me = x,
                              .rank_base = 1,
                              .tag = TAG,
                              .mode = STRATA_MODE_SSP,
                              .staleness = 0,
                              .prefetch = STRATA_PREFETCH_NONE};
    assert_int_equal(strata_table_open(&b.t[x], &conf, init, &b.tb[x]), 0);
  }
  for (int x = 0; x < BSP_P; x++) bsp_clock(&b, x, 0);
  serve_all(&b);

  /* 1. Worker 1 reads at clock 1, writes and ends it before worker 0 asks
   * for its rows of clock 1: the shards answer at once, and must leave out
   * worker 1's clock 1. */
  bsp_refresh(&b, 1);
  assert_int_equal(strata_table_get_rows(b.tb[1], 0, BSP_N, -1, b.buf), 0);
  bsp_expect(&b, (int[]){1, 1, 1}, "worker 1 at clock 1");
  bsp_clock(&b, 1, 1);
  serve_all(&b);
  bsp_refresh(&b, 0);
  assert_int_equal(strata_table_get_rows(b.tb[0], 0, BSP_N, -1, b.buf), 0);
  bsp_expect(&b, (int[]){1, 1, 1}, "worker 0 at clock 1, after worker 1 ended it");

  /* 2. Worker 0 asks for clock 2 while worker 2 is still in clock 1; worker
   * 1 ends clock 2 without reading; when worker 2 ends clock 1 the shards
   * answer worker 0, and must leave out worker 1's clock 2. */
  bsp_clock(&b, 0, 1);
  bsp_refresh(&b, 0);
  bsp_clock(&b, 1, 2);
  serve_all(&b);
  bsp_clock(&b, 2, 1);
  serve_all(&b);
  assert_int_equal(strata_table_get_rows(b.tb[0], 0, BSP_N, -1, b.buf), 0);
  bsp_expect(&b, (int[]){2, 2, 2}, "worker 0 at clock 2, after worker 1 ended it");

  /* 3. Read-my-writes across a reply that comes after its reader moved on:
   * worker 1 asks for clock 3, ends it, and only then do the others end
   * clock 2; the rows hold clocks < 3 and worker 1's own clock 3 too. */
  bsp_refresh(&b, 1);
  bsp_clock(&b, 1, 3);
  serve_all(&b);
  bsp_clock(&b, 0, 2);
  bsp_clock(&b, 2, 2);
  serve_all(&b);
  assert_int_equal(strata_table_peek_rows(b.tb[1], 0, BSP_N, b.buf), 0);
  bsp_expect(&b, (int[]){3, 4, 3}, "worker 1's cache at clock 4");

  pthread_t th[BSP_P];
  for (int x = 0; x < BSP_P; x++)
    assert_int_equal(pthread_create(&th[x], NULL, bsp_close, b.tb[x]), 0);
  for (int x = 0; x < BSP_P; x++) {
    void *rc;
    assert_int_equal(pthread_join(th[x], &rc), 0);
    assert_int_equal((int)(intptr_t)rc, 0);
  }
  strata_loopback_close(lb);
}

/* A BSP read at clock c holds exactly every worker's clocks < c and its
 * own writes: never a clock of c or later of another worker, though a
 * shard has those by the time the read reaches it (the shard's worker ran
 * ahead, or a worker that read nothing ended its clock early). Deterministic:
 * one thread, the loopback's delays counted in calls. */
static void test_bsp_reads_exact(void **state) {
  (void)state;
  start();
  snprintf(g_running, sizeof g_running, "BSP exact reads, seed %llu", (unsigned long long)g_seed);
  bsp_script(0, 0, g_seed);
  bsp_script(3, 1, sub_seed(1000));
  stop();
}

int main(void) {
  const char *env = getenv("STRATA_TEST_SEED");
  g_seed = env && *env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
  fprintf(stderr, "test_table_loopback: seed %llu (STRATA_TEST_SEED=X replays its draws)\n",
          (unsigned long long)g_seed);
  signal(SIGALRM, on_alarm);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_ssp_window, setup, teardown),
      cmocka_unit_test_setup_teardown(test_essp_window, setup, teardown),
      cmocka_unit_test_setup_teardown(test_essp_push, setup, teardown),
      cmocka_unit_test_setup_teardown(test_read_my_writes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_async_never_waits, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shutdown, setup, teardown),
      cmocka_unit_test_setup_teardown(test_snapshots_exact, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_delay, setup, teardown),
      cmocka_unit_test_setup_teardown(test_start_clock_runs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_start_clock_read_at_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_start_clock_shutdown_and_async, setup, teardown),
      cmocka_unit_test_setup_teardown(test_start_clock_bounds, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bsp_reads_exact, setup, teardown),
  };
  return cmocka_run_group_tests_name("table_loopback", tests, NULL, NULL);
}
