/*
 * tableidle: a worker inside strata_table_serve_for (a straggler's delay)
 * still answers its peers, as a separate server thread would.
 *
 * Two ranks, staleness 0, a table of 2 rows of 1 float; row 0 lives on
 * rank 0's shard. Rank 0 adds 1 to row 0, ends clock 0 and keeps serving
 * for IDLE ms. Rank 1 waits LAG ms, so that its messages reach rank 0 in
 * the middle of that, adds 2 to row 0, ends clock 0 and reads row 0 at
 * clock 1 with staleness 0: rank 0's shard must have applied both clock-0
 * batches and answer. Rank 1 sends the time its read returned to rank 0,
 * which checks that it came while it was still serving (over IDLE/4 before
 * the delay ended: a shard that stopped for the delay would answer only
 * after it) and that the delay lasted IDLE ms; rank 1 checks the value, 3.
 *
 * usage: mpirun -n 2 tableidle IDLE_MS LAG_MS SPIN   (SPIN 0: sleep, 1: busy)
 * Prints one "tableidle: ok: ..." line from rank 0, or one error line per
 * failing rank; exit 0 or 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "strata/core.h"
#include "strata/error.h"
#include "strata/table.h"
#include "strata/transport.h"

#define PROG "tableidle"
#define TAG_TIME 9
#define TAG_SYNC 10
#define TAG_TABLE 20

static int failed(int me, const char *what) {
  fprintf(stderr, PROG ": rank %d: %s: %s\n", me, what, strata_err_msg());
  return 1;
}

int main(int argc, char **argv) {
  strata_transport t;
  if (strata_comm_init(&argc, &argv, &t)) {
    fprintf(stderr, PROG ": %s\n", strata_err_msg());
    return 1;
  }
  int me = t.rank, code = 0;
  if (argc != 4 || t.size != 2) {
    if (me == 0) fprintf(stderr, "usage: mpirun -n 2 " PROG " IDLE_MS LAG_MS SPIN\n");
    strata_comm_finalize(&t);
    return 2;
  }
  double idle = atof(argv[1]) / 1000, lag = atof(argv[2]) / 1000;
  int spin = atoi(argv[3]);
  float init[2] = {0, 0}, one = (float)(me + 1), got = -1;
  strata_table_conf conf = {.n_rows = 2,
                            .row_len = 1,
                            .workers = 2,
                            .me = me,
                            .tag = TAG_TABLE,
                            .mode = STRATA_MODE_SSP,
                            .staleness = 0,
                            .prefetch = STRATA_PREFETCH_NONE};
  strata_table *tb = NULL;
  if (strata_table_open(&t, &conf, init, &tb)) {
    code = failed(me, "strata_table_open");
    strata_comm_abort(&t, 1);
  }
  double t_read = 0;
  strata_req req = {0, 0};
  /* Start together: ranks may come out of start-up far apart on a busy
   * machine, and LAG counts from here. */
  char none = 0;
  int peer = 1 - me;
  for (int step = 0; step < 2 && !code; step++)
    if ((step == me ? t.isend(t.impl, &none, 0, peer, TAG_SYNC, &req)
                    : t.irecv(t.impl, &none, 0, peer, TAG_SYNC, &req)) ||
        strata_comm_wait_idle(&t, &req))
      code = failed(me, "starting together");
  if (me == 1) {
    struct timespec ts = {(time_t)lag, (long)((lag - (double)(time_t)lag) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
  }
  if (strata_table_inc(tb, 0, &one) || strata_table_clock(tb)) code = failed(me, "inc/clock");
  if (!code && me == 0) {
    double t_a = strata_now();
    if (strata_table_serve_for(tb, idle, spin)) code = failed(me, "strata_table_serve_for");
    double t_b = strata_now();
    /* Serving on while the time comes: a shard that failed to answer during
     * the delay still lets rank 1 finish, so the check fails, not hangs. */
    int done = 0;
    if (!code && t.irecv(t.impl, &t_read, sizeof t_read, 1, TAG_TIME, &req))
      code = failed(me, "receiving rank 1's time");
    while (!code && !done)
      if (t.test(t.impl, &req, &done) || (!done && strata_table_serve_for(tb, 1e-3, 0)))
        code = failed(me, "receiving rank 1's time");
    if (!code && t_b - t_a < idle) {
      fprintf(stderr, PROG ": rank 0: served %.3f s, asked for %.3f s\n", t_b - t_a, idle);
      code = 1;
    }
    /* Answered while serving: well before the delay's end (LAG is a small
     * part of IDLE); a shard stopped for the delay answers after it. */
    if (!code && !(t_read < t_b - idle / 4)) {
      fprintf(stderr, PROG ": rank 0: rank 1's read returned %.3f s into a %.3f s delay, not while "
              "rank 0 served (spin %d)\n", t_read - t_a, idle, spin);
      code = 1;
    }
    if (!code)
      printf(PROG ": ok: rank 1's read returned %.3f s into rank 0's %.3f s delay (spin %d)\n",
             t_read - t_a, t_b - t_a, spin);
  }
  if (!code && me == 1) {
    if (strata_table_get(tb, 0, 0, &got)) code = failed(me, "strata_table_get");
    t_read = strata_now();
    if (!code && got != 3) {
      fprintf(stderr, PROG ": rank 1: row 0 reads %g at clock 1, expected 3\n", got);
      code = 1;
    }
    if (t.isend(t.impl, &t_read, sizeof t_read, 0, TAG_TIME, &req) || strata_comm_wait_idle(&t, &req))
      code = failed(me, "sending the time");
  }
  if (strata_table_close(tb)) code = failed(me, "strata_table_close");
  strata_comm_finalize(&t);
  return code;
}
