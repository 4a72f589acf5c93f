/*
 * strata/modes.h - the modes a run can move its parameters in.
 *
 * STRATA_MODES is the one list of them: each line names a mode and says
 * what runs it, and every list of modes strata shows (strata_mode, the
 * names, --mode's choices and help, the messages that name the modes a
 * flag applies to) is made from it. The columns:
 *
 *   ID       the enum value, STRATA_MODE_<ID>
 *   name     as the CLI, the metrics and messages spell the mode
 *   backend  the back-end that runs it (worker/backend.h): ring (the
 *            pipelined ring of rotating blocks), table (data-parallel
 *            workers on a sharded parameter-server table) or sfb
 *            (replicas and sufficient factors)
 *   rule     for a table mode, its consistency rule (comm/rule.h: when a
 *            read may go on, what reaches whom); none for the others
 *   summary  one line for --help
 *
 * A new back-end is its file plus its lines here; a new consistency rule
 * of the table is its file (comm/rules/) plus one line here
 * (docs/architecture.md, "Adding a mode").
 */
#ifndef STRATA_MODES_H
#define STRATA_MODES_H

#include <stdint.h>

#include "strata/error.h"

/* clang-format off */
#define STRATA_MODES(X)                                                                            \
  X(SCHEDULED, scheduled, ring, none,                                                              \
    "parameter blocks rotate on a ring of workers (the default)")                                  \
  X(SERIAL, serial, ring, none, "one process, no MPI: the ring's computation with one worker")     \
  X(BSP, bsp, table, bsp, "a parameter-server table, every worker synchronised every pass")        \
  X(ABSP, absp, table, absp, "a parameter-server table, every worker synchronised every clock")    \
  X(SSP, ssp, table, ssp, "a parameter-server table, reads at most --staleness clocks old")        \
  X(ESSP, essp, table, essp, "ssp's reads, with the shards pushing every change to its readers")   \
  X(ASYNC, async, table, async, "a parameter-server table whose reads never wait")                 \
  X(SFB, sfb, sfb, none, "replicas of a matrix, sufficient factors broadcast between workers")     \
  X(VAP, vap, table, vap, "a parameter-server table; no worker's updates in transit exceed --value-bound") \
  /* a new mode: one line above this one */
/* clang-format on */

/* How a run moves its parameters (the lines of STRATA_MODES, in order):
 * scheduled, the default, is 0. */
typedef enum strata_mode {
#define STRATA_MODE_ENUM_(id, name, backend, rule, summary) STRATA_MODE_##id,
  STRATA_MODES(STRATA_MODE_ENUM_)
#undef STRATA_MODE_ENUM_
      STRATA_N_MODES
} strata_mode;

/* The mode's name as the CLI spells it ("scheduled", "ssp", ...); "?" out of range. */
STRATA_EXPORT const char *strata_mode_name(strata_mode m);
/* The mode's one line for --help; "" out of range. */
STRATA_EXPORT const char *strata_mode_summary(strata_mode m);
/* Parses a mode name into *out; STRATA_EUSAGE with a message naming the
 * modes when it is none of them. */
STRATA_EXPORT int strata_mode_parse(const char *name, strata_mode *out);
/* Whether m runs data-parallel against parameter-server tables (the modes
 * of the table back-end: bsp, absp, ssp, essp, async, ...). */
STRATA_EXPORT int strata_mode_is_ps(strata_mode m);

/* The settings that belong to one mode alone (sfb's --peers, say), in the
 * layout of the back-end or rule that owns them: its options
 * (strata_mode_options) name their offsets in here. All zero is every
 * mode's defaults. */
#define STRATA_MODE_SETTINGS 64
typedef struct strata_mode_settings {
  _Alignas(8) unsigned char bytes[STRATA_MODE_SETTINGS];
} strata_mode_settings;

#endif
