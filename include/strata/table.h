/*
 * strata/table.h - parameter-server tables with bounded staleness.
 *
 * A table is n_rows dense rows of row_len floats, sharded over the workers:
 * row g lives on the server shard of worker g mod P. Every worker is at the
 * same time a client (a process cache of the whole table) and the server of
 * its shard. Workers count clocks: clock() ends clock c and starts c + 1.
 *
 * Consistency: each table follows the rule of a parameter-server mode
 * (conf.mode; strata/modes.h). Under SSP (the rule of bsp, absp, ssp) a
 * worker at clock c reading with staleness s sees every update stamped
 * <= c - s - 1 by any worker, and all of its own updates (read-my-writes);
 * it may also see newer ones. s = 0 is BSP; async never waits. A row's
 * *data age* is the clock every worker had committed when its shard sent
 * it (all updates stamped < age are in it), so a read at clock c is fresh
 * enough when age >= c - s; its clock differential is age - c, in [-s, 0]
 * (BSP reads always see 0; the ESSP paper plots age - c - 1). Each rule's
 * promise is in docs/architecture.md, "Consistency rules".
 *
 * A BSP table (mode bsp, absp, or ssp with conf.staleness 0) is exact: a
 * row holds the other workers' updates stamped < its data age and none
 * later, so a read at clock c sees exactly every other worker's updates of
 * clocks <= c - 1 and all of its own, whenever the messages arrive. The shard sums those other
 * updates in stamp, then worker order, so their floats do not depend on
 * message timing either. A BSP run thus computes what one process applying
 * each clock's updates together would, up to float rounding.
 *
 * Writes: inc() adds a delta to the row in the cache at once and coalesces
 * it per row in the clock's oplog; clock() ships the oplog, one message per
 * shard (a rule may send rows earlier, and hold inc back). A shard applies a
 * client's batch when it arrives (a BSP shard: once its clock passes the
 * batch's stamp), advances that client's entry of its vector clock, answers
 * the reads waiting for its minimum clock and does what its rule adds (ESSP
 * pushes the rows changed since its last push to every client that has
 * read them).
 *
 * Threading and progress: one thread per rank calls the table
 * (MPI_THREAD_FUNNELED). Server work runs whenever that thread enters the
 * table (get, inc, clock, refresh, serve); while a read (or a rule's
 * inc) waits, it polls on strata's back-off wait (20 us doubling to 1 ms), so
 * a blocked worker never spins a core. Engines call strata_table_serve
 * between pieces of work so that peers' requests are answered promptly.
 */
#ifndef STRATA_TABLE_H
#define STRATA_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "strata/error.h"
#include "strata/modes.h"
#include "strata/transport.h"

typedef enum strata_prefetch {
  STRATA_PREFETCH_NONE = 0,
  STRATA_PREFETCH_CONSERVATIVE, /* at clock(): refresh rows read last clock that would be too old */
  STRATA_PREFETCH_AGGRESSIVE    /* at clock(): refresh every row read last clock not from the
                                   newest clock (LazyTables 3.3) */
} strata_prefetch;

/* Clock differentials are counted in buckets 0, -1, ..., -(N-2), and the last
 * bucket holds everything older. */
#define STRATA_TABLE_HIST 34
/* Bytes of a rule's own figures in strata_table_stats. */
#define STRATA_TABLE_RULE_STATS 384

typedef struct strata_table_conf {
  uint32_t n_rows;
  uint32_t row_len;   /* floats per row, >= 1 */
  uint32_t value_len; /* the first value_len floats of every row are model
                         values, the rest an optimiser's state that travels
                         with them (0 = all; at most row_len): a rule that
                         bounds the values in transit (strata/modes.h)
                         bounds these floats only, and the others ride in
                         the same messages, unbounded; every other rule
                         ignores it */
  int workers;        /* P */
  int me;             /* 0..P-1 */
  int rank_base;      /* MPI rank of worker w is rank_base + w */
  int tag;            /* two tags are used: tag (to servers), tag + 1 (to clients) */
  strata_mode mode;   /* whose consistency rule the table follows: a mode of the
                         table back-end (strata_mode_is_ps) */
  const strata_mode_settings *settings; /* the mode's own settings (strata_mode_options);
                                           NULL: its defaults */
  int staleness;                        /* s >= 0 (a rule without a staleness bound ignores it) */
  strata_prefetch prefetch;
  int prefetch_period; /* clocks per iteration of the app (>= 1; 0 = 1): at
                          clock c the prefetcher replays the reads of clock
                          c - period, the same place one iteration back */
  int snapshots;       /* 1: shards keep a pure snapshot, so that
                          strata_table_snapshot_request works; each shard then
                          holds a second copy of its rows and every batch
                          stamped after its clock (at most s + 1 clocks of
                          batches per worker under SSP; unbounded under async).
                          A BSP table keeps that copy and those batches
                          always (its reads are served from it), and each
                          client keeps its own batches until the shard's
                          clock passes them */
  int32_t start_clock; /* the clock every worker starts at (>= 0): init holds
                          every update stamped before it (0 for a new run; a
                          resumed run starts at its checkpoint's clock) */
} strata_table_conf;

typedef struct strata_table_stats {
  double wait_s;                /* blocked on freshness (get) or on close */
  uint64_t bytes_sent, bytes_recv; /* every message but the snapshots' */
  uint64_t reads;               /* rows read by get */
  uint64_t hist[STRATA_TABLE_HIST];
  int64_t diff_sum;             /* sum of (age - clock) over reads */
  int32_t diff_min;             /* most negative differential seen (0 if none) */
  uint64_t requests, replies, pushes; /* rows requested; rows received in replies;
                                         rows this shard pushed (ESSP) */
  uint64_t snapshot_bytes;      /* sent for snapshots, requests and rows (not in
                                   bytes_sent) */
  /* The rule's own figures, in its own layout (the engine shows them in the
   * metrics of its mode). */
  _Alignas(8) unsigned char rule[STRATA_TABLE_RULE_STATS];
} strata_table_stats;

typedef struct strata_table strata_table;

/*
 * Opens this worker's side of a table; every worker calls it with the same
 * conf (except me) and the same initial values init (n_rows * row_len
 * floats), which count as stamped before clock conf->start_clock, so caches
 * start valid.
 * Does not communicate. Returns 0, STRATA_EINVAL (also when the workers'
 * ranks or the two tags do not fit the transport, or conf->mode has no
 * table rule), STRATA_EUSAGE (the mode's settings refused) or
 * STRATA_ENOMEM.
 */
STRATA_EXPORT int strata_table_open(strata_transport *t, const strata_table_conf *conf,
                                    const float *init, strata_table **out);

/* Copies rows [lo, hi) into out once each is fresh enough for this worker's
 * clock with staleness s (s < 0: the table's own rule), waiting when not.
 * STRATA_ERANGE for rows beyond the table. */
STRATA_EXPORT int strata_table_get_rows(strata_table *tb, uint32_t lo, uint32_t hi, int s,
                                        float *out);
/* One row: strata_table_get_rows(tb, row, row + 1, s, out). */
STRATA_EXPORT int strata_table_get(strata_table *tb, uint32_t row, int s, float *out);

/* Adds delta (row_len floats) to the row: visible to this worker's reads at
 * once, to others after clock(). STRATA_ERANGE beyond the table. */
STRATA_EXPORT int strata_table_inc(strata_table *tb, uint32_t row, const float *delta);

/* Asks for a copy of the row fresh enough under staleness s without
 * waiting (a prefetch); a no-op when the cached copy already is. */
STRATA_EXPORT int strata_table_refresh(strata_table *tb, uint32_t row, int s);

/* Copies rows [lo, hi) of this worker's cache as they are: no wait, no
 * request, not counted as reads nor remembered by the prefetcher (an
 * observer's look at what the worker's reads would see). STRATA_ERANGE. */
STRATA_EXPORT int strata_table_peek_rows(const strata_table *tb, uint32_t lo, uint32_t hi,
                                         float *out);

/* Ends this worker's clock: ships the oplog and runs the prefetcher. */
STRATA_EXPORT int strata_table_clock(strata_table *tb);

/* This worker's clock (conf.start_clock before the first strata_table_clock). */
STRATA_EXPORT int strata_table_current_clock(const strata_table *tb);

/*
 * Pure snapshots (conf.snapshots = 1; the bounded-staleness paper's §3.3),
 * taken while the run goes on. strata_table_snapshot_request asks for
 * rows[0..n) (any order, no repeats) as they stand in snapshot t = this
 * worker's current clock + 1: every update stamped < t by every worker, and
 * none later, whatever each worker's own clock is when it arrives. The
 * values are the same on every worker and independent of message timing
 * (batches are added in stamp, then worker order). Call it before the
 * strata_table_clock() that ends clock t - 1. Row g lands at
 * out + g * row_len (out holds n_rows rows and stays the caller's, untouched
 * by the table once the snapshot is complete); the rows come as soon as
 * every worker has ended clock t - 1, while this worker goes on. Snapshot
 * traffic counts in snapshot_bytes. STRATA_EINVAL without conf.snapshots,
 * STRATA_ERANGE for a row beyond the table.
 */
STRATA_EXPORT int strata_table_snapshot_request(strata_table *tb, const uint32_t *rows, uint32_t n,
                                                float *out);
/* Serves, then sets *done to 1 when every row of snapshot t has landed
 * (after which t is forgotten); with wait, serves until then, sleeping
 * between polls (not counted in wait_s). STRATA_EINVAL when t was not
 * asked for or was already reported done. */
STRATA_EXPORT int strata_table_snapshot_test(strata_table *tb, int32_t t, int wait, int *done);

/* Answers peers' requests and takes in replies, without blocking. */
STRATA_EXPORT int strata_table_serve(strata_table *tb);

/* Keeps serving for `seconds` of wall time while the caller computes
 * nothing (a straggler's delay: the shard, a separate server in the papers,
 * stays responsive). spin = 0 sleeps between polls with the waits' back-off
 * (at most 1 ms late); spin = 1 polls without pause, holding the core as a
 * busy process would. Not counted as waiting. Returns 0 or the table's
 * error. */
STRATA_EXPORT int strata_table_serve_for(strata_table *tb, double seconds, int spin);

/* Statistics since open or the last reset. */
STRATA_EXPORT void strata_table_get_stats(const strata_table *tb, strata_table_stats *st);
STRATA_EXPORT void strata_table_reset_stats(strata_table *tb);

/*
 * Leaves the table: tells every shard this worker is done and keeps serving
 * its own shard until every worker has left, then frees everything. Every
 * worker must call it (peers may still read from this shard). Returns 0 or
 * the first error; tb is freed either way.
 */
STRATA_EXPORT int strata_table_close(strata_table *tb);

/* Frees without the leaving protocol (after a failure that ends the job). */
STRATA_EXPORT void strata_table_free(strata_table *tb);

#endif
