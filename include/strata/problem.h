/*
 * strata/problem.h - the problem an app's load builds: its data blocks,
 * their evaluation parts, the parameter blocks (resident, rotating, global)
 * with their initial values, and the meta bytes every worker receives.
 * strata/app.h says who fills and reads which part.
 */
#ifndef STRATA_PROBLEM_H
#define STRATA_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "strata/error.h"

typedef struct strata_block {
  void *buf;          /* owned by whoever holds the block (strata_alloc_aligned) */
  size_t len;         /* bytes */
  uint32_t nrows;     /* rotating blocks: row count (len == nrows * row_bytes) */
  uint32_t row_bytes; /* rotating blocks: bytes per row; 0 for other blocks */
} strata_block;

/* What `load` produces on the coordinator. The engine takes ownership of
 * every buffer (freed with strata_free) once load returns 0.
 *
 * The engine treats every block and the meta bytes as plain bytes: it
 * ships them, writes parameter blocks into checkpoints and identifies the
 * data by a checksum over every byte of the meta, data and eval blocks
 * (a resume refuses data whose checksum differs). So load must set every
 * byte of them, padding inside structs and gaps left for alignment
 * included: an uninitialised byte makes the same data look like other data
 * to --resume. */
typedef struct strata_problem {
  void *meta;    /* bytes every worker receives before worker_init (may be NULL) */
  size_t meta_len;
  int n_data, n_resident, n_rotating;
  strata_block *data;     /* n_data entries (strata_malloc'd array) */
  strata_block *eval;     /* NULL, or n_data entries (len 0 = none for that block) */
  strata_block *resident; /* n_resident entries, initial values */
  strata_block *rotating; /* n_rotating entries, initial values */
  strata_block global;    /* len 0: none; else nrows rows of row_bytes, floats */
  /* Parameter-server modes, where the rotating and global rows are rows of
   * one table: the first value_len floats of every such row are model
   * values, the rest an optimiser's state that rides with them (AdaGrad's
   * sums of squared gradients); 0: every float is a model value. A rule that
   * bounds the values in transit (strata/modes.h) bounds those floats only,
   * and the other floats travel in the same messages, unbounded; every other
   * rule, and every other mode, ignores it. At most the floats of a row. */
  uint32_t value_len;
  uint64_t n_examples;    /* training examples processed per pass */
  /* Round apps (strata/round.h; app->round): the rounds that make one pass,
   * which makes this run a round run (0: the app's schedule and compute run
   * as in every other mode), and the coordinator block: bytes that
   * schedule_round and pull own and change (the model, priorities), no
   * pointers, kept by checkpoints (len 0: none). */
  uint64_t rounds_per_pass;
  strata_block coord;
  void *priv;             /* coordinator-only app state (id maps, ...) */
  void (*priv_free)(void *priv); /* releases priv; called by strata_problem_close */
} strata_problem;

/* Releases every buffer of a problem and zeroes it; safe on a zeroed one. */
STRATA_EXPORT void strata_problem_close(strata_problem *prob);

/*
 * For load, before it allocates its parameter blocks, `bytes` of them in
 * all: refuses (STRATA_ENOMEM) when they cannot fit in the memory this
 * process may take (strata_mem_available: the host's, the run's
 * --mem-limit, a ulimit), with the message "WHAT need about X GB, but this
 * host has Y GB available: HINT" (hint may be NULL; core.h's
 * strata_mem_check words the memory available), so that a model far too
 * large is refused rather than the coordinator killed for want of memory.
 * 0 when they fit, or when the memory available cannot be told. The engine
 * then checks every rank's share before set-up
 * (strata_engine_opts.mem_limit). A reader checks the sizes it reads the
 * same way, line by line, with strata_mem_check (core.h).
 */
STRATA_EXPORT int strata_problem_fits(const char *what, double bytes, const char *hint);

/* Allocates the block arrays of a problem (zeroed). 0 or STRATA_ENOMEM. */
STRATA_EXPORT int strata_problem_alloc(strata_problem *prob, int n_data, int n_resident,
                                       int n_rotating, int with_eval);

#endif
