/*
 * tablesum: every worker adds 1 to every row of a table once per clock and
 * checks what SSP promises. Every MPI rank is a worker (rank_base 0).
 */
#include <stdint.h>
#include <stdio.h>

#include "strata/table.h"

enum { ROWS = 1000, LEN = 4, CLOCKS = 10, S = 2 };

int main(int argc, char **argv) {
  strata_transport t;
  if (strata_comm_init(&argc, &argv, &t)) return 1;
  int P = t.size;
  strata_table_conf conf = {.n_rows = ROWS,
                            .row_len = LEN,
                            .workers = P,
                            .me = t.rank,
                            .rank_base = 0,
                            .tag = 20, /* tags 20 and 21 */
                            .mode = STRATA_MODE_SSP,
                            .staleness = S,
                            .prefetch = STRATA_PREFETCH_CONSERVATIVE};
  static float init[ROWS * LEN]; /* zeros, the same on every worker */
  float row[LEN], one[LEN] = {1, 1, 1, 1};
  strata_table *tb;
  int rc = strata_table_open(&t, &conf, init, &tb);
  if (rc) goto out;
  for (int c = 0; c < CLOCKS && !rc; c++) {
    for (uint32_t r = 0; r < ROWS && !rc; r++) {
      rc = strata_table_get(tb, r, -1, row); /* s < 0: the table's staleness */
      /* Own updates of clocks < c, everyone's of clocks < c - S. */
      int others = c - S > 0 ? c - S : 0;
      if (!rc && row[0] < (float)(c + (P - 1) * others))
        rc = strata_err_set(STRATA_EINVAL, "row %u is %g at clock %d", r, row[0], c);
      if (!rc) rc = strata_table_inc(tb, r, one);
    }
    if (!rc) rc = strata_table_clock(tb);
  }
  /* Staleness 0 after the last clock: waits for every worker's updates. */
  if (!rc) rc = strata_table_get(tb, 0, 0, row);
  strata_table_stats st;
  strata_table_get_stats(tb, &st);
  if (!rc)
    printf("rank %d: row 0 = %g, %llu reads, mean differential %.2f\n", t.rank, row[0],
           (unsigned long long)st.reads, (double)st.diff_sum / (double)st.reads);
  if (rc) {
    strata_table_free(tb); /* the job ends below */
  } else {
    rc = strata_table_close(tb); /* every worker must call it */
  }
out:
  if (rc) {
    fprintf(stderr, "tablesum (rank %d): %s\n", t.rank, strata_err_msg());
    strata_comm_abort(&t, 1);
  }
  strata_comm_finalize(&t);
  return 0;
}
