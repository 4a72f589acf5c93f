/*
 * The DML app's pairs (internal to apps/dml and its tests): how load draws
 * them from a labelled set and turns each into a sparse difference.
 */
#ifndef STRATA_APPS_DML_PAIRS_H
#define STRATA_APPS_DML_PAIRS_H

#include <stdint.h>

#include "strata/apps/libsvm.h"

/*
 * Draws m pairs of d's examples into a[0..m), b[0..m) (example indices)
 * and sim[0..m): pair i is similar (sim 1: two distinct examples of one
 * class) when i is even, dissimilar (sim 0: examples of two classes) when i
 * is odd. A similar pair takes a uniformly among the examples whose class
 * has another, then b uniformly among the others of its class; a dissimilar
 * one takes a uniformly, then b uniformly among the examples of other
 * classes. Deterministic for (d's labels, m, seed). `what` names the set in
 * messages. 0; STRATA_EINVAL when no two examples share a class (no similar
 * pair) or all share one (no dissimilar pair); STRATA_ENOMEM.
 */
int strata__dml_pairs(const strata_libsvm *d, const char *what, uint64_t m, uint64_t seed,
                      uint64_t *a, uint64_t *b, uint8_t *sim);

/*
 * Examples a - b of d as a sparse vector: the union of both supports in
 * ascending order, entries whose difference is exactly 0 dropped. Writes
 * idx and val (room for both rows' features together) unless idx is NULL,
 * and returns the entry count either way.
 */
uint32_t strata__dml_delta(const strata_libsvm *d, uint64_t a, uint64_t b, uint32_t *idx,
                           float *val);

#endif
