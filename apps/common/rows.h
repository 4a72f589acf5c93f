/*
 * Blocks of labelled sparse rows, the data and eval blocks of the
 * sufficient-factor apps (mlr's examples, dml's pair differences), and the
 * reading of their labelled LIBSVM or synthetic data. Internal to the apps.
 *
 * Layout: a 16-byte header (rows, stored entries, the size of the global
 * minibatch the block belongs to), then row_off[n + 1], col[nnz],
 * val[nnz], label[n], 32 bits each.
 */
#ifndef STRATA_APPS_COMMON_ROWS_H
#define STRATA_APPS_COMMON_ROWS_H

#include <stdint.h>

#include "strata/apps/libsvm.h"
#include "strata/problem.h"

typedef struct strata__rows {
  uint32_t n, nnz;
  uint32_t batch; /* the clock's global minibatch, what a step divides by */
  uint32_t *off, *col, *label;
  float *val;
} strata__rows;

/* Allocates b for n rows of nnz entries in all, writes its header and
 * points *r at its arrays for the caller to fill (row_off[0] is 0).
 * STRATA_ETOOBIG (naming `app`) when the counts pass 32 bits, STRATA_ENOMEM. */
int strata__rows_alloc(strata_block *b, uint64_t n, uint64_t nnz, uint64_t batch, const char *app,
                       strata__rows *r);
/* The rows of a block strata__rows_alloc made; n = 0 for a block too short
 * to hold a header (or NULL). */
strata__rows strata__rows_of(const strata_block *b);

/* Whether --data names the generator ("synth" or "synth:..."). */
int strata__is_synth(const char *data);
/*
 * The labelled data of --data and --test: LIBSVM files (test read with
 * train's labels and features), or the generator with its own test set
 * (none when with_synth_test is 0, as when a fraction is held out instead).
 * *has_test says whether test holds a set. Both are zeroed first.
 */
int strata__read_labelled(const char *data, const char *test, int with_synth_test,
                          strata_libsvm *train, strata_libsvm *test_out, int *has_test);

#endif
