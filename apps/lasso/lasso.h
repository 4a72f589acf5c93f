/*
 * lasso.h - the inputs of strata-lasso (data.c): a design matrix X kept by
 * columns (CSC, double values) and its targets y, read from a LIBSVM /
 * svmlight regression file, a tab-separated table with a header line (the
 * diabetes file), or generated (synth:...).
 */
#ifndef STRATA_LASSO_H
#define STRATA_LASSO_H

#include <stdint.h>

/* N x P, column f's rows row[colptr[f] .. colptr[f+1]) increasing, with
 * values val[...]; targets y[0..N). Every array strata_malloc'd. */
typedef struct lasso_data {
  uint32_t n, p;
  uint64_t nnz;
  uint64_t *colptr; /* p + 1 */
  uint32_t *row;    /* nnz */
  double *val;      /* nnz */
  double *y;        /* n */
} lasso_data;

/* The generator's spec: "synth:n=500,p=400000,density=0.05,nonzeros=100,
 * noise=0.1,seed=1" (any subset, any order). */
typedef struct lasso_synth {
  uint32_t n, p, nonzeros;
  double density, noise;
  uint64_t seed;
} lasso_synth;

/*
 * Reads or generates `spec` into *d (zeroed first; left zeroed on failure):
 *   "synth[:k=v,...]"          the generator (lasso_synth above);
 *   "tsv:PATH", or a PATH ending in ".tsv" or ".tab.txt"
 *                              a header line, then N lines of P + 1 numbers
 *                              separated by tabs (or blanks), the last the
 *                              target;
 *   any other PATH             LIBSVM/svmlight: "target idx:val ...",
 *                              real-valued target, 1-based increasing
 *                              indices; '#' comments and blank lines skipped.
 * Files are read through strata/apps/lines.h: gzip data is decompressed,
 * whatever the name. Errors carry one line naming the file and line:
 * STRATA_ENOENT (cannot open), STRATA_EPARSE (a malformed or non-finite
 * field, a wrong column count, a gzip stream cut short or without its
 * trailer), STRATA_EEMPTY (no examples), STRATA_EUSAGE (a bad synth spec),
 * STRATA_ENOMEM: at the line that brings it (a feature index sizes the
 * columns), or for a synth spec before generating, the estimate of what
 * reading needs outgrows the memory available (strata_mem_check).
 */
int lasso_data_read(const char *spec, lasso_data *d);

/* Centres and scales every column to unit population standard deviation
 * (divides by N) and centres y. A constant column becomes all zeros (its
 * coefficient then stays 0). The result is dense: N values per column.
 * 0 or STRATA_ENOMEM (d unchanged then), refused before allocating when
 * the dense copy would not fit in the memory available. */
int lasso_data_standardize(lasso_data *d);

/* Frees the arrays and zeroes d; safe on a zeroed one. */
void lasso_data_close(lasso_data *d);

#endif
