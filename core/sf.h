/*
 * A clock's set of sufficient factors (internal to libstrata; the app side
 * is strata/sf.h). The set is kept in the form it travels in between
 * workers in --mode sfb, so that sending it is one message and receiving it
 * needs no copy:
 *
 *   strata__sf_head   24 bytes: clock, sender, factor count, total nnz
 *   per factor        scale (float), nnz (uint32), dense flag (uint32),
 *                     u (J floats), then idx (nnz uint32, absent when
 *                     dense), val (nnz floats)
 *
 * Everything is 4-byte aligned; a factor costs 12 + 4 J + 8 nnz bytes
 * (4 nnz when dense).
 */
#ifndef STRATA_CORE_SF_H
#define STRATA_CORE_SF_H

#include <stddef.h>
#include <stdint.h>

#include "strata/sf.h"

typedef struct strata__sf_head {
  int64_t clock;  /* the clock the factors were computed in (run-wide, 0-based) */
  int32_t sender; /* worker */
  uint32_t n;     /* factors */
  uint64_t nnz;   /* stored entries of every v together */
} strata__sf_head;

#define STRATA__SF_FACTOR_HEAD 12

struct strata_sf_factors {
  uint32_t J, D;   /* u's length; the rows v may index */
  char *buf;       /* head, then the factors */
  size_t len, cap; /* bytes used, allocated */
};

/* An empty set for factors of a J x D matrix (J floats a row, D rows). */
void strata__sf_init(strata_sf_factors *f, uint32_t J, uint32_t D);
/* Empties the set for a new clock: the head alone (allocated on first use,
 * kept after). 0 or STRATA_ENOMEM. */
int strata__sf_reset(strata_sf_factors *f, int64_t clock, int sender);
void strata__sf_close(strata_sf_factors *f);
/* Exchanges the contents of two sets (a back-end keeping a set it sends). */
void strata__sf_swap(strata_sf_factors *a, strata_sf_factors *b);
static inline const strata__sf_head *strata__sf_head_of(const strata_sf_factors *f) {
  return (const strata__sf_head *)f->buf;
}

/* Walks the factors of a set's bytes in emission order: *pos starts at 0;
 * each call fills *out (pointing into buf) and advances. Returns 1 with a
 * factor, 0 at the end, or STRATA_ECOMM when the bytes do not hold
 * well-formed factors of a J x D matrix (a message off the wire is checked
 * before it is trusted). */
int strata__sf_next(const void *buf, size_t len, uint32_t J, uint32_t D, size_t *pos,
                    strata_sf_factor *out);
/* Checks a whole set's bytes (head and every factor) once. 0 or
 * STRATA_ECOMM with a message naming the sender. */
int strata__sf_check(const void *buf, size_t len, uint32_t J, uint32_t D);

/* Applies every factor of a checked set to W in order, through apply (the
 * app's, or strata_sf_apply when NULL). */
void strata__sf_apply_all(const void *buf, size_t len, strata_block *W,
                          void (*apply)(void *, strata_block *, const strata_sf_factor *),
                          void *state);

#endif
