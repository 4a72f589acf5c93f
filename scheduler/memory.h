/*
 * Memory before work (internal to libstrata): the coordinator estimates
 * what every rank will hold, from the loaded problem, its schedule and the
 * mode, adds up the ranks of each host, and refuses a run that cannot fit
 * before anything is shipped. The estimate counts the blocks and the
 * engine's copies of them (receive bundles, the ring's second buffers,
 * the tables' cache, oplog, shard and snapshots, replicas), not an app's
 * own worker state.
 */
#ifndef STRATA_SCHEDULER_MEMORY_H
#define STRATA_SCHEDULER_MEMORY_H

#include <stdint.h>

#include "comm/protocol.h"
#include "core/mode.h"
#include "strata/engine.h"

/*
 * Checks that a run of app in opts's mode (its facts: what its workers
 * hold, core/mode.h) fits: hosts[0..P] are the ranks' hosts, each with
 * its resident bytes before any block (rank 0: now, the problem loaded);
 * `limit` > 0 replaces every host's available memory (--mem-limit).
 * Returns 0, or STRATA_ENOMEM with a message naming the host, the estimate
 * and what to change (the app's memory_hint).
 */
int strata__mem_check(const strata_app *app, const strata_engine_opts *opts,
                      const strata__facts *mode, const strata_problem *p, const strata_schedule *s,
                      const host_info *hosts, uint64_t limit);

#endif
