/*
 * tablecheck: an MPI consistency checker for the parameter-server tables
 * (strata/table.h), driving the public API directly.
 *
 * Every rank is a worker. The table has --rows rows of P floats, one column
 * per writer: worker w only ever adds 1.0 to column w. What w adds is a pure
 * function of (seed, w, row, clock), so every worker knows, without asking,
 * how much any other worker had added to a row by the end of any clock.
 * Each clock, every worker does its increments, a few reads of random row
 * ranges and perhaps a refresh, in random order with random sleeps between
 * them, then calls clock(). Every read is checked against:
 *
 *   read-my-writes   column me == what this worker has added so far;
 *   lower bound      (ssp/essp) column v >= v's adds in clocks <= c - s - 1,
 *                    s the read's staleness (the SSP guarantee);
 *   upper bound      column v <= v's adds in clocks <= c + S (S the table's
 *                    staleness; async: all of v's adds). Visible stamps are
 *                    bounded because v ends clock t only after a read at
 *                    clock t that needed data age t - S, which proves this
 *                    worker had reached clock t - S: so t <= c + S;
 *   BSP is exact     (ssp, S = 0) column v == v's adds in clocks <= c - 1:
 *                    never a clock of c or later, though a peer that read
 *                    only other shards, or whose shard answers late, may
 *                    have ended clock c before this read reaches its shard;
 *   monotonic reads  no column of a row ever goes down between two reads;
 *   differential     (ssp/essp) the stats' diff_min >= -s;
 *   async never waits  (async) the stats' wait_s stays 0 across reads;
 *   everything arrives  a staleness-0 read of every row after the last
 *                    clock sees every worker's exact total;
 *   pure snapshots   before about half of its clocks c a worker asks for
 *                    snapshot c + 1 of a random row range; when it lands,
 *                    each column v of each row is exactly v's adds in
 *                    clocks <= c (nothing lost, counted twice or from a
 *                    later clock), and rows not asked for are untouched;
 *   clean teardown   close gives back every byte the table allocated.
 * Out-of-range rows must give STRATA_ERANGE. --fault drop-inc plants an
 * error (one inc skipped but counted) that the checks must catch.
 *
 * Exit codes: 0 every check passed; 1 a property was violated (one line on
 * stderr per failing rank, naming the property, rank, clock, row, column,
 * values and seed) or a table call failed; 2 bad flags (one line, rank 0).
 * Rank 0 prints the effective configuration, seed included, at start, so a
 * failure can be replayed with --seed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "strata/core.h"
#include "strata/error.h"
#include "strata/options.h"
#include "strata/table.h"
#include "strata/transport.h"

#define PROG "tablecheck"
#define TAG_SEED 7
#define TAG_TABLE 20

typedef struct tc_opts {
  const char *cons;
  int staleness;
  int clocks;
  int rows;
  const char *seed;
  int delay_us;
  const char *prefetch;
  int period;
  const char *fault;
} tc_opts;

static const strata_option tc_options[] = {
    {.name = "cons",
     .type = STRATA_OPT_CHOICE,
     .offset = offsetof(tc_opts, cons),
     .def = "ssp",
     .metavar = "MODEL",
     .choices = "ssp|essp|async",
     .help = "consistency model of the table"},
    {.name = "staleness",
     .short_name = 's',
     .type = STRATA_OPT_INT,
     .offset = offsetof(tc_opts, staleness),
     .def = "1",
     .metavar = "S",
     .max = 1000,
     .help = "the table's staleness (ssp, essp; 0 = BSP)"},
    {.name = "clocks",
     .short_name = 'c',
     .type = STRATA_OPT_INT,
     .offset = offsetof(tc_opts, clocks),
     .def = "30",
     .metavar = "C",
     .min = 1,
     .max = 100000,
     .help = "clocks every worker runs"},
    {.name = "rows",
     .short_name = 'r',
     .type = STRATA_OPT_INT,
     .offset = offsetof(tc_opts, rows),
     .def = "64",
     .metavar = "R",
     .min = 1,
     .max = 1000000,
     .help = "rows of the table (each of P floats, one column per worker)"},
    {.name = "seed",
     .type = STRATA_OPT_STRING,
     .offset = offsetof(tc_opts, seed),
     .metavar = "X",
     .help = "seed of the increments and the random reads and sleeps (default: from the time)"},
    {.name = "delay-us",
     .type = STRATA_OPT_INT,
     .offset = offsetof(tc_opts, delay_us),
     .def = "2000",
     .metavar = "MAX",
     .max = 10000000,
     .help = "random sleep of 0..MAX microseconds before each operation"},
    {.name = "prefetch",
     .type = STRATA_OPT_CHOICE,
     .offset = offsetof(tc_opts, prefetch),
     .def = "none",
     .metavar = "KIND",
     .choices = "none|conservative|aggressive",
     .help = "the table's prefetcher"},
    {.name = "prefetch-period",
     .type = STRATA_OPT_INT,
     .offset = offsetof(tc_opts, period),
     .def = "1",
     .metavar = "N",
     .min = 1,
     .max = 1000,
     .help = "clocks the prefetcher looks back (the table's prefetch_period)"},
    {.name = "fault",
     .type = STRATA_OPT_CHOICE,
     .offset = offsetof(tc_opts, fault),
     .def = "none",
     .metavar = "KIND",
     .choices = "none|drop-inc",
     .help =
         "checks the checker: drop-inc makes the last worker skip its first inc (but count it)"},
    {.name = NULL},
};

/* ---- the state of one worker's check ---- */

typedef struct tc {
  strata_transport *t;
  tc_opts o;
  uint64_t seed;
  strata_mode cons;
  int P, me, R, C, S;
  strata_table *tb;
  strata_rng rng;
  /* cum[(v * R + r) * (C + 1) + t + 1]: v's adds to row r in clocks <= t,
   * t = -1 .. C - 1. */
  uint32_t *cum;
  uint32_t *own;  /* R: what this worker has added so far */
  float *seen;    /* R * P: the last value read, for monotonic reads */
  float *buf;     /* R * P */
  uint64_t rows_read;
  long violations;
  int clock;
  int dropped; /* --fault drop-inc has dropped its inc */
  /* Snapshots asked for and not yet landed, oldest first. */
  struct tc_snap {
    int32_t id;
    uint32_t lo, hi;
    float *buf; /* R * P */
  } snaps[64];
  int n_snaps;
  uint64_t snaps_checked;
} tc;

/* How many times worker v adds 1.0 to row r at clock c: 0 (5/8), 1 (2/8),
 * 2 (1/8). Twice in a clock exercises the oplog's coalescing. */
static uint32_t adds(uint64_t seed, int v, int r, int c) {
  uint64_t h = strata_mix64(seed ^ 0x7ab1ec4ecc5eedULL);
  h = strata_mix64(h ^ (uint64_t)(uint32_t)v);
  h = strata_mix64(h ^ (uint64_t)(uint32_t)r);
  h = strata_mix64(h ^ (uint64_t)(uint32_t)c);
  uint64_t k = h % 8;
  return k < 5 ? 0 : k < 7 ? 1 : 2;
}

/* v's adds to row r in clocks <= t (t clamped to -1 .. C - 1). */
static uint32_t cum_upto(const tc *k, int v, int r, int t) {
  if (t < -1) t = -1;
  if (t > k->C - 1) t = k->C - 1;
  return k->cum[((size_t)v * (size_t)k->R + (size_t)r) * (size_t)(k->C + 1) + (size_t)(t + 1)];
}

/* A table call failed: peers may be blocked on this rank, so end the job. */
static void die(tc *k, const char *what, int rc) {
  fprintf(stderr, PROG ": rank %d clock %d: %s failed: %s (%s) (seed %" PRIu64 ")\n", k->me,
          k->clock, what, strata_err_msg(), strata_err_name(rc), k->seed);
  fflush(stderr);
  strata_comm_abort(k->t, 1);
}

/* Records a violation; the first on each rank is printed. The run goes on so
 * that every rank still finishes the protocol and exits cleanly. */
static void violated(tc *k, const char *property, const char *fmt, ...) STRATA_PRINTF(3, 4);
static void violated(tc *k, const char *property, const char *fmt, ...) {
  if (k->violations++) return;
  char detail[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  fprintf(stderr, PROG ": rank %d clock %d: %s violated: %s (cons %s, staleness %d, seed %" PRIu64 ")\n",
          k->me, k->clock, property, detail, k->o.cons, k->S, k->seed);
  fflush(stderr);
}

static void sleep_us(long us) {
  if (us <= 0) return;
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* Checks rows [lo, hi) just read (in k->buf) with staleness s (< 0: the
 * table's). */
static void check_read(tc *k, uint32_t lo, uint32_t hi, int s) {
  int se = s < 0 ? k->S : s;
  int c = k->clock;
  for (uint32_t g = lo; g < hi; g++) {
    const float *row = k->buf + (size_t)(g - lo) * (size_t)k->P;
    float *seen = k->seen + (size_t)g * (size_t)k->P;
    for (int v = 0; v < k->P; v++) {
      float x = row[v];
      if (v == k->me) {
        if (x != (float)k->own[g])
          violated(k, "read-my-writes", "row %u column %d = %g, expected %u", g, v, (double)x,
                   k->own[g]);
      } else {
        int bsp = k->cons == STRATA_MODE_SSP && k->S == 0;
        int upto = k->cons == STRATA_MODE_ASYNC ? k->C - 1 : bsp ? c - 1 : c + k->S;
        uint32_t up = cum_upto(k, v, (int)g, upto);
        if (k->cons != STRATA_MODE_ASYNC) {
          uint32_t low = cum_upto(k, v, (int)g, c - se - 1);
          if (x < (float)low)
            violated(k, "lower bound (staleness)",
                     "row %u column %d = %g at read staleness %d, expected >= %u (worker %d's adds "
                     "in clocks <= %d)",
                     g, v, (double)x, se, low, v, c - se - 1);
        }
        if (x > (float)up)
          violated(k, bsp ? "upper bound (bsp)" : "upper bound",
                   "row %u column %d = %g, expected <= %u (worker %d's adds in clocks <= %d)", g, v,
                   (double)x, up, v, upto);
      }
      if (x < seen[v])
        violated(k, "monotonic reads", "row %u column %d = %g, read %g before", g, v, (double)x,
                 (double)seen[v]);
      if (x > seen[v]) seen[v] = x;
    }
  }
}

static void do_read(tc *k) {
  uint32_t R = (uint32_t)k->R, lo, hi;
  if (strata_rng_below(&k->rng, 10) == 0) {
    lo = 0, hi = R;
  } else {
    lo = (uint32_t)strata_rng_below(&k->rng, R);
    uint32_t room = R - lo < 8 ? R - lo : 8;
    hi = lo + 1 + (uint32_t)strata_rng_below(&k->rng, room);
  }
  /* Mostly the table's rule; in ssp/essp sometimes a stricter staleness. */
  int s = -1;
  if (k->cons != STRATA_MODE_ASYNC && strata_rng_below(&k->rng, 4) == 0)
    s = (int)strata_rng_below(&k->rng, (uint64_t)k->S + 1);
  strata_table_stats before, after;
  strata_table_get_stats(k->tb, &before);
  int rc = hi == lo + 1 && strata_rng_below(&k->rng, 2) ? strata_table_get(k->tb, lo, s, k->buf)
                                                        : strata_table_get_rows(k->tb, lo, hi, s, k->buf);
  if (rc) die(k, "strata_table_get_rows", rc);
  k->rows_read += hi - lo;
  check_read(k, lo, hi, s);
  strata_table_get_stats(k->tb, &after);
  if (after.reads != before.reads + (hi - lo))
    violated(k, "stats", "reads went from %" PRIu64 " to %" PRIu64 " over a read of %u rows",
             before.reads, after.reads, hi - lo);
  if (k->cons == STRATA_MODE_ASYNC) {
    if (after.wait_s != 0.0)
      violated(k, "async never waits", "rows [%u, %u): wait_s = %g after the read", lo, hi,
               after.wait_s);
  } else {
    int se = s < 0 ? k->S : s;
    if (after.diff_min < before.diff_min && after.diff_min < -se)
      violated(k, "clock differential", "rows [%u, %u) at read staleness %d: diff_min %d < %d", lo,
               hi, se, (int)after.diff_min, -se);
  }
}

static void do_inc(tc *k, uint32_t row) {
  float *delta = k->buf; /* not used by a read at the same time */
  memset(delta, 0, (size_t)k->P * sizeof *delta);
  delta[k->me] = 1.0f;
  k->own[row]++;
  if (!k->dropped && k->me == k->P - 1 && !strcmp(k->o.fault, "drop-inc")) {
    k->dropped = 1;
    return;
  }
  int rc = strata_table_inc(k->tb, row, delta);
  if (rc) die(k, "strata_table_inc", rc);
}

static void do_refresh(tc *k) {
  uint32_t row = (uint32_t)strata_rng_below(&k->rng, (uint64_t)k->R);
  int s = strata_rng_below(&k->rng, 2) ? -1 : (int)strata_rng_below(&k->rng, (uint64_t)k->S + 1);
  int rc = strata_table_refresh(k->tb, row, s);
  if (rc) die(k, "strata_table_refresh", rc);
}

/* Asks for the snapshot that ends this clock, of a random row range. */
static void ask_snapshot(tc *k) {
  if (k->n_snaps == (int)(sizeof k->snaps / sizeof *k->snaps)) return;
  uint32_t R = (uint32_t)k->R;
  uint32_t lo = (uint32_t)strata_rng_below(&k->rng, R);
  uint32_t hi = lo + 1 + (uint32_t)strata_rng_below(&k->rng, R - lo);
  struct tc_snap *sn = &k->snaps[k->n_snaps];
  sn->buf = strata_malloc((size_t)R * (size_t)k->P * sizeof *sn->buf);
  uint32_t *rows = strata_malloc((size_t)(hi - lo) * sizeof *rows);
  if (!sn->buf || !rows) {
    fprintf(stderr, PROG ": rank %d: out of memory for a snapshot\n", k->me);
    strata_comm_abort(k->t, 1);
  }
  for (size_t i = 0; i < (size_t)R * (size_t)k->P; i++) sn->buf[i] = -1.0f;
  /* Any order: descending here. */
  for (uint32_t i = 0; i < hi - lo; i++) rows[i] = hi - 1 - i;
  sn->id = strata_table_current_clock(k->tb) + 1;
  sn->lo = lo;
  sn->hi = hi;
  int rc = strata_table_snapshot_request(k->tb, rows, hi - lo, sn->buf);
  strata_free(rows);
  if (rc) die(k, "strata_table_snapshot_request", rc);
  k->n_snaps++;
}

/* Checks the snapshots that have landed (with wait: all of them). */
static void check_snapshots(tc *k, int wait) {
  int kept = 0;
  for (int i = 0; i < k->n_snaps; i++) {
    struct tc_snap *sn = &k->snaps[i];
    int done = 0;
    int rc = strata_table_snapshot_test(k->tb, sn->id, wait, &done);
    if (rc) die(k, "strata_table_snapshot_test", rc);
    if (!done) {
      k->snaps[kept++] = *sn;
      continue;
    }
    for (int r = 0; r < k->R; r++)
      for (int v = 0; v < k->P; v++) {
        float x = sn->buf[(size_t)r * (size_t)k->P + (size_t)v];
        int in = (uint32_t)r >= sn->lo && (uint32_t)r < sn->hi;
        float want = in ? (float)cum_upto(k, v, r, sn->id - 1) : -1.0f;
        if (x != want)
          violated(k, "pure snapshots", "snapshot %d (rows %u..%u): row %d column %d = %g, expected %g",
                   sn->id, sn->lo, sn->hi - 1, r, v, (double)x, (double)want);
      }
    k->snaps_checked++;
    strata_free(sn->buf);
  }
  k->n_snaps = kept;
}

/* Operations of one clock, encoded: row (inc), or a read / a refresh. */
#define OP_READ UINT32_MAX
#define OP_REFRESH (UINT32_MAX - 1)

static void run_clock(tc *k, uint32_t *ops) {
  size_t n = 0;
  for (int r = 0; r < k->R; r++)
    for (uint32_t a = adds(k->seed, k->me, r, k->clock); a > 0; a--) ops[n++] = (uint32_t)r;
  /* At least one read every clock: the upper bound relies on it. */
  int reads = 1 + (int)strata_rng_below(&k->rng, 3);
  for (int i = 0; i < reads; i++) ops[n++] = OP_READ;
  if (strata_rng_below(&k->rng, 2)) ops[n++] = OP_REFRESH;
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)strata_rng_below(&k->rng, i);
    uint32_t x = ops[i - 1];
    ops[i - 1] = ops[j];
    ops[j] = x;
  }
  for (size_t i = 0; i < n; i++) {
    if (k->o.delay_us > 0) sleep_us((long)strata_rng_below(&k->rng, (uint64_t)k->o.delay_us + 1));
    /* Between pieces of work, as engines do, most of the time. */
    if (strata_rng_below(&k->rng, 4)) {
      int rc = strata_table_serve(k->tb);
      if (rc) die(k, "strata_table_serve", rc);
    }
    if (ops[i] == OP_READ)
      do_read(k);
    else if (ops[i] == OP_REFRESH)
      do_refresh(k);
    else
      do_inc(k, ops[i]);
  }
  for (int r = 0; r < k->R; r++)
    if (k->own[r] != cum_upto(k, k->me, r, k->clock))
      violated(k, "checker bookkeeping", "row %d: %u adds recorded, %u expected", r, k->own[r],
               cum_upto(k, k->me, r, k->clock));
  if (strata_rng_below(&k->rng, 2)) ask_snapshot(k);
  int rc = strata_table_clock(k->tb);
  if (rc) die(k, "strata_table_clock", rc);
  k->clock++;
  check_snapshots(k, 0);
  if (strata_table_current_clock(k->tb) != k->clock)
    violated(k, "current clock", "strata_table_current_clock = %d, expected %d",
             strata_table_current_clock(k->tb), k->clock);
}

static void expect_erange(tc *k, const char *call, int rc) {
  if (rc != STRATA_ERANGE)
    violated(k, "out-of-range rows", "%s returned %d (%s), expected STRATA_ERANGE", call, rc,
             strata_err_name(rc));
  strata_err_clear();
}

static void check_bad_rows(tc *k) {
  uint32_t R = (uint32_t)k->R;
  float *delta = k->buf;
  memset(delta, 0, (size_t)k->P * sizeof *delta);
  delta[k->me] = 1000.0f; /* must not land anywhere */
  expect_erange(k, "strata_table_get(R)", strata_table_get(k->tb, R, -1, k->buf));
  expect_erange(k, "strata_table_get(UINT32_MAX)", strata_table_get(k->tb, UINT32_MAX, 0, k->buf));
  expect_erange(k, "strata_table_get_rows(R-1, R+1)",
                strata_table_get_rows(k->tb, R - 1, R + 1, -1, k->buf));
  expect_erange(k, "strata_table_get_rows(1, 0)", strata_table_get_rows(k->tb, 1, 0, -1, k->buf));
  expect_erange(k, "strata_table_inc(R)", strata_table_inc(k->tb, R, delta));
  expect_erange(k, "strata_table_refresh(R)", strata_table_refresh(k->tb, R, -1));
  /* An empty range is no error. */
  int rc = strata_table_get_rows(k->tb, R, R, -1, k->buf);
  if (rc) violated(k, "empty range", "strata_table_get_rows(R, R) returned %s", strata_err_name(rc));
  strata_table_stats st;
  strata_table_get_stats(k->tb, &st);
  if (st.reads != 0) violated(k, "stats", "%" PRIu64 " rows counted for failed reads", st.reads);
}

/* After the last clock: a staleness-0 read of every row sees every worker's
 * exact total. */
static void check_final(tc *k) {
  strata_table_stats st;
  strata_table_get_stats(k->tb, &st);
  if (k->cons == STRATA_MODE_ASYNC && st.wait_s != 0.0)
    violated(k, "async never waits", "wait_s = %g after %d clocks", st.wait_s, k->C);
  if (k->cons != STRATA_MODE_ASYNC && st.diff_min < -k->S)
    violated(k, "clock differential", "diff_min %d < -%d", (int)st.diff_min, k->S);
  uint64_t sum = 0;
  for (int b = 0; b < STRATA_TABLE_HIST; b++) sum += st.hist[b];
  if (sum != st.reads || st.reads != k->rows_read)
    violated(k, "stats", "%" PRIu64 " reads counted, histogram holds %" PRIu64 ", %" PRIu64 " rows read",
             st.reads, sum, k->rows_read);
  if (k->cons != STRATA_MODE_ASYNC && k->S == 0 && st.hist[0] != st.reads)
    violated(k, "clock differential", "BSP: %" PRIu64 " of %" PRIu64 " reads not at differential 0",
             st.reads - st.hist[0], st.reads);

  check_snapshots(k, 1);
  if (!k->snaps_checked && k->C >= 8)
    violated(k, "pure snapshots", "none asked for in %d clocks", k->C);
  int rc = strata_table_get_rows(k->tb, 0, (uint32_t)k->R, 0, k->buf);
  if (rc) die(k, "strata_table_get_rows (final)", rc);
  for (int r = 0; r < k->R; r++)
    for (int v = 0; v < k->P; v++) {
      float x = k->buf[(size_t)r * (size_t)k->P + (size_t)v];
      uint32_t want = cum_upto(k, v, r, k->C - 1);
      if (x != (float)want)
        violated(k, "everything arrives", "final staleness-0 read: row %d column %d = %g, expected %u",
                 r, v, (double)x, want);
    }
  strata_table_get_stats(k->tb, &st);
  if (k->cons != STRATA_MODE_ASYNC && st.diff_min < -k->S)
    violated(k, "clock differential", "diff_min %d < -%d after the final read", (int)st.diff_min, k->S);
}

/* ---- set-up ---- */

static int parse_seed(const char *s, uint64_t *out) {
  char *end = NULL;
  if (!*s || *s == '-' || *s == '+' || *s == ' ') goto bad;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || *end) goto bad;
  *out = v;
  return 0;
bad:
  char q[STRATA_QUOTE_SIZE];
  return strata_err_set(STRATA_EUSAGE, "--seed: '%s' is not a non-negative integer",
                        strata_quote(q, sizeof q, s, strlen(s)));
}

/* Rank 0's seed, to every rank (through the transport: no MPI here). */
static int share_seed(strata_transport *t, uint64_t *seed) {
  if (t->size == 1) return 0;
  if (t->rank == 0) {
    strata_req *reqs = calloc((size_t)t->size, sizeof *reqs);
    if (!reqs) return strata_err_set(STRATA_ENOMEM, "out of memory");
    int rc = 0;
    for (int r = 1; r < t->size && !rc; r++) rc = t->isend(t->impl, seed, sizeof *seed, r, TAG_SEED, &reqs[r]);
    if (!rc) rc = strata_comm_wait_all_idle(t, reqs, t->size);
    free(reqs);
    return rc;
  }
  strata_req req = {0, 0};
  int rc = t->irecv(t->impl, seed, sizeof *seed, 0, TAG_SEED, &req);
  return rc ? rc : strata_comm_wait_idle(t, &req);
}

static void usage(FILE *f, const strata_optgroup *g) {
  fprintf(f,
          "usage: mpirun -n P " PROG " [options]\n"
          "Checks the parameter-server tables' consistency guarantees with P workers (one per rank).\n\n");
  strata_options_help(f, g, 1);
  fprintf(f,
          "\nExamples:\n"
          "  mpirun -n 3 " PROG " --cons ssp --staleness 2\n"
          "  mpirun -n 2 " PROG " --cons essp --staleness 1 --prefetch aggressive --seed 42\n"
          "  mpirun -n 3 " PROG " --cons async --clocks 50 --delay-us 500\n");
}

int main(int argc, char **argv) {
  strata_transport t;
  int rc = strata_comm_init(&argc, &argv, &t);
  if (rc) {
    fprintf(stderr, PROG ": %s\n", strata_err_msg());
    return 1;
  }
  tc k;
  memset(&k, 0, sizeof k);
  k.t = &t;
  k.P = t.size;
  k.me = t.rank;
  strata_optgroup g = {"options", tc_options, &k.o};
  int help = 0, code = 0;
  if (!rc) rc = strata_options_defaults(&g, 1);
  if (!rc) rc = strata_options_parse(&g, 1, argc - 1, argv + 1, &help);
  if (!rc && k.o.seed) rc = parse_seed(k.o.seed, &k.seed);
  if (rc || help) {
    if (k.me == 0) {
      if (rc) fprintf(stderr, PROG ": %s\n", strata_err_msg());
      else usage(stdout, &g);
    }
    strata_comm_finalize(&t);
    return rc ? 2 : 0;
  }
  if (!k.o.seed) {
    k.seed = strata_mix64((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^
                          (uint64_t)(strata_now() * 1e9));
    if ((rc = share_seed(&t, &k.seed))) {
      fprintf(stderr, PROG ": rank %d: sharing the seed: %s\n", k.me, strata_err_msg());
      strata_comm_abort(&t, 1);
    }
  }
  k.cons = !strcmp(k.o.cons, "essp")    ? STRATA_MODE_ESSP
           : !strcmp(k.o.cons, "async") ? STRATA_MODE_ASYNC
                                        : STRATA_MODE_SSP;
  k.S = k.o.staleness;
  k.R = k.o.rows;
  k.C = k.o.clocks;
  if (k.me == 0) {
    printf(PROG ": workers=%d cons=%s staleness=%d clocks=%d rows=%d delay-us=%d prefetch=%s "
           "prefetch-period=%d fault=%s seed=%" PRIu64 "\n",
           k.P, k.o.cons, k.S, k.C, k.R, k.o.delay_us, k.o.prefetch, k.o.period, k.o.fault, k.seed);
    fflush(stdout);
  }
  strata_rng_seed(&k.rng, strata_mix64(k.seed ^ (0xa5a5000000000000ULL + (uint64_t)k.me)));

  size_t live0 = strata_alloc_live();
  size_t R = (size_t)k.R, P = (size_t)k.P, C = (size_t)k.C;
  k.cum = strata_malloc(P * R * (C + 1) * sizeof *k.cum);
  k.own = strata_calloc(R, sizeof *k.own);
  k.seen = strata_calloc(R * P, sizeof *k.seen);
  k.buf = strata_calloc(R * P, sizeof *k.buf);
  float *init = strata_calloc(R * P, sizeof *init);
  uint32_t *ops = strata_malloc((2 * R + 8) * sizeof *ops);
  if (!k.cum || !k.own || !k.seen || !k.buf || !init || !ops) {
    fprintf(stderr, PROG ": rank %d: out of memory for %zu rows\n", k.me, R);
    strata_comm_abort(&t, 1);
  }
  for (int v = 0; v < k.P; v++)
    for (int r = 0; r < k.R; r++) {
      uint32_t *c = k.cum + ((size_t)v * R + (size_t)r) * (C + 1);
      c[0] = 0;
      for (int cl = 0; cl < k.C; cl++) c[cl + 1] = c[cl] + adds(k.seed, v, r, cl);
    }

  strata_table_conf conf = {
      .n_rows = (uint32_t)k.R,
      .row_len = (uint32_t)k.P,
      .workers = k.P,
      .me = k.me,
      .rank_base = 0,
      .tag = TAG_TABLE,
      .mode = k.cons,
      .staleness = k.S,
      .prefetch = !strcmp(k.o.prefetch, "aggressive")     ? STRATA_PREFETCH_AGGRESSIVE
                  : !strcmp(k.o.prefetch, "conservative") ? STRATA_PREFETCH_CONSERVATIVE
                                                          : STRATA_PREFETCH_NONE,
      .prefetch_period = k.o.period,
      .snapshots = 1};
  if ((rc = strata_table_open(&t, &conf, init, &k.tb))) die(&k, "strata_table_open", rc);
  strata_free(init);
  if (strata_table_current_clock(k.tb) != 0)
    violated(&k, "current clock", "%d after open, expected 0", strata_table_current_clock(k.tb));

  double t0 = strata_now();
  check_bad_rows(&k);
  while (k.clock < k.C) run_clock(&k, ops);
  check_final(&k);
  strata_table_stats st;
  strata_table_get_stats(k.tb, &st);

  rc = strata_table_close(k.tb);
  k.tb = NULL;
  if (rc) {
    fprintf(stderr, PROG ": rank %d: strata_table_close failed: %s (seed %" PRIu64 ")\n", k.me,
            strata_err_msg(), k.seed);
    code = 1;
  }
  if (k.violations) code = 1;
  if (k.me == 0 && !code)
    printf(PROG ": ok: rank 0 read %" PRIu64 " rows, waited %.3f s, diff_min %d, %" PRIu64
           " rows requested, %" PRIu64 " pushed, %" PRIu64 " snapshots checked, %.2f s\n",
           st.reads, st.wait_s, (int)st.diff_min, st.requests, st.pushes, k.snaps_checked,
           strata_now() - t0);
  strata_free(k.cum);
  strata_free(k.own);
  strata_free(k.seen);
  strata_free(k.buf);
  strata_free(ops);
  /* Close gives back everything the table took, messages included. */
  if (strata_alloc_live() != live0) {
    violated(&k, "clean teardown", "%zu bytes still allocated after close", strata_alloc_live() - live0);
    code = 1;
  }
  strata_comm_finalize(&t);
  return code;
}
