/*
 * sfb's own settings and figures (internal to libstrata): the layouts the
 * sfb back-end (worker/sfb.c) keeps in strata_engine_opts.mode_settings
 * and strata_worker_stats.mode_stats[0], for the back-end and its tests.
 */
#ifndef STRATA_WORKER_SFB_H
#define STRATA_WORKER_SFB_H

#include <stdint.h>

#include "strata/engine.h"

/* sfb's own settings (strata_engine_opts.mode_settings): all zero is full
 * broadcast without replica digests. */
typedef struct strata__sfb_settings {
  int peers;          /* out-peers Q per worker; 0: every other worker */
  int check_replicas; /* digest every replica at every clock end */
} strata__sfb_settings;
_Static_assert(sizeof(strata__sfb_settings) <= STRATA_MODE_SETTINGS, "sfb settings do not fit");

/* A worker's figures of a pass (strata_worker_stats.mode_stats[0]): factor
 * sets (one per other worker and clock) and factors this worker applied
 * from the others, and each factor's delay: the clock it was applied at
 * minus the clock it was made in minus 1, so 0 when it comes in time for
 * the next clock (always under staleness 0 and full broadcast; at most
 * tau (s + 1) - 1); delay_hist[d] counts delay d, the last bucket
 * everything later. factors_out: factors this worker computed (each sent
 * to every out-peer); from_mask: bit q set when a set made by worker q was
 * applied (q < 64). */
typedef struct strata__sfb_stats {
  uint64_t sets_in, factors_in, factors_out, delay_sum;
  int32_t delay_max, replica_checked; /* replica_digest is set (--check-replicas) */
  uint64_t delay_hist[STRATA_TABLE_HIST];
  uint64_t from_mask;
  uint64_t replica_digest; /* FNV-1a over the replica's bytes at each clock end of the pass */
  /* Worker 0's report: the largest |W_p - W_q| over every pair of workers'
   * replicas at the pass's end, taken over drift_rows rows of W (every row,
   * or an even sample of about 2^16 floats). */
  double drift;
  uint32_t drift_rows, drift_measured;
} strata__sfb_stats;
_Static_assert(sizeof(strata__sfb_stats) <= STRATA_MODE_STATS, "sfb stats do not fit");

#endif
