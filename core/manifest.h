/*
 * The checkpoint manifest (internal to libstrata): what a checkpoint says
 * of itself, written and read as JSON. core/ckpt.h has the files around it,
 * scheduler/ckpt.c what a run writes into it and checks against it.
 *
 * Reading is strict: every field present with its type and range, every
 * part named exactly once (the coordinator's, worker -1, and one per
 * worker), file names without a '/', checksums of 16 hex digits. A manifest
 * that reads back is one strata__manifest_write could have written.
 */
#ifndef STRATA_CORE_MANIFEST_H
#define STRATA_CORE_MANIFEST_H

#include <stdint.h>
#include <stdio.h>

#define STRATA__MANIFEST_FORMAT "strata-checkpoint-1"
#define STRATA__MANIFEST_WORKERS 1000000

typedef struct strata__manifest_part {
  char file[64];
  int32_t worker; /* -1: the coordinator's */
  uint64_t bytes, sum;
} strata__manifest_part;

typedef struct strata__manifest {
  char strata[64], build[256], written[32];
  char app[64], mode[32], byte_order[16], layout[160];
  int workers, passes;
  int64_t next_clock; /* -1: none (a clock is a minibatch) */
  uint64_t data_bytes, data_sum;
  uint64_t seed;
  /* "name=value" each, in one allocation with the array */
  char **settings;
  int n_settings;
  /* workers + 1 of them, the coordinator's first, then worker by worker */
  strata__manifest_part *parts;
} strata__manifest;

/* Writes m as the manifest's JSON (the format and the random streams' rule
 * are added). 0, or STRATA_EIO when f failed. */
int strata__manifest_write(FILE *f, const strata__manifest *m);

/* Reads text[0..len): 0 with *m filled (free with strata__manifest_free),
 * or STRATA_EPARSE with a message ("line L, column C: ...", or the field
 * that is missing or wrong), or STRATA_ENOMEM. *m is zeroed on failure. */
int strata__manifest_read(const char *text, size_t len, strata__manifest *m);
void strata__manifest_free(strata__manifest *m);

/* The value of setting `name` ("rank"), or NULL. */
const char *strata__manifest_setting(const strata__manifest *m, const char *name);

#endif
