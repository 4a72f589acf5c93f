/*
 * blocksum - a second strata app, used by the MPI integration tests.
 *
 * It proves that the public app API serves something other than matrix
 * factorisation, and it checks what the engine promises about moving
 * blocks. The problem is a sparse integer matrix of (row, col, value)
 * triples drawn from --seed, blocked B x B with the diagonal schedule: rows
 * are the resident side, columns the rotating side. Every pass adds each
 * value into its row's and its column's accumulator, so after N passes every
 * accumulator holds exactly N times the true sum (integers: no rounding, in
 * any order).
 *
 * Every row of a rotating block also carries a visit trace, one slot per
 * (pass, sub-epoch), into which compute writes the worker that processed
 * that row's pipeline chunk; the trace therefore travels with the rows it
 * describes (chunk 0, finished and sent first, holds row 0). Resident blocks
 * keep the same trace in their header.
 *
 * With --model-out DIR the coordinator receives the final blocks and
 * export_model recomputes the sums from the regenerated triples, checks the
 * traces against the schedule and the rules of a DSGD rotation, and writes
 * DIR/blocksum_report.json. It returns STRATA_EINVAL (exit code 1) when any
 * check fails, so a test needs only the exit code and the report.
 */
#ifndef STRATA_TESTS_BLOCKSUM_H
#define STRATA_TESTS_BLOCKSUM_H

#include <stdint.h>

#include "strata/app.h"

typedef struct blocksum_config {
  int rows, cols;
  uint64_t nnz;
  int max_value;
  int no_eval;       /* skip the per-pass evaluation (and the model exchange) */
  const char *fault; /* "none", or a deliberate error the checks must catch */
} blocksum_config;

/* The app; its export writes blocksum_report.json. */
extern const strata_app blocksum_app;

/* Name of the report written into --model-out. */
#define BLOCKSUM_REPORT "blocksum_report.json"

#endif
