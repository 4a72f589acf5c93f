/*
 * strata/apps/libsvm.h - the LIBSVM/SVMlight reader for classification data
 * (apps/common).
 *
 * A file holds one example a line: "label idx:val idx:val ...". The label is
 * an integer naming a class; indices are 1-based and strictly increasing
 * within a line; values are finite numbers. Blank lines and lines starting
 * with '#' are skipped, and so is a trailing "# ..." after the features, as
 * SVMlight writes. Spaces and tabs separate fields; a CR before the LF and a
 * last line without one are fine; gzip data is decompressed on the fly,
 * recognised by its content whatever the file's name.
 *
 * The examples are kept as a CSR matrix: row i's features are
 * col[row_off[i] .. row_off[i+1]) with values val[...], columns 0-based
 * (file index - 1) and increasing. Classes are 0..n_classes-1: the distinct
 * labels of the file in ascending order of value, or, for a test file, the
 * classes of a label map given in the options, so train and test agree on
 * what class j is.
 */
#ifndef STRATA_LIBSVM_H
#define STRATA_LIBSVM_H

#include <stdint.h>

#include "strata/error.h"

typedef struct strata_libsvm {
  uint64_t n_rows;
  uint64_t nnz;          /* stored features, row_off[n_rows] */
  uint32_t n_features;   /* D: every column is < D */
  uint32_t n_classes;    /* J: every label is < J */
  uint64_t *row_off;     /* n_rows + 1 offsets into col and val */
  uint32_t *col;         /* nnz 0-based feature indices */
  float *val;            /* nnz values */
  uint32_t *label;       /* n_rows class indices */
  int64_t *class_label;  /* n_classes labels as the file writes them, ascending:
                            class j is label class_label[j] (the label map) */
} strata_libsvm;

typedef struct strata_libsvm_opts {
  /* D, or 0: n_features is then the largest index seen. With D > 0 an index
   * above D is an error, and n_features is D even if no index reaches it. */
  uint32_t n_features;
  /* A label map to read against (a test file), or NULL to build one from
   * the file's labels (a training file). When given: n_classes labels,
   * strictly ascending; a label of the file not among them is an error.
   * Borrowed for the call only: the result holds its own copy. */
  const int64_t *class_label;
  uint32_t n_classes;
} strata_libsvm_opts;

/*
 * Options that read a test file against train: train's label map (borrowed,
 * so valid while train is open) and train's feature count, so that a test
 * index beyond the training set's features is an error naming its line.
 * A caller that would rather ignore such features sets o->n_features to 0
 * and skips columns >= train->n_features itself.
 */
STRATA_EXPORT void strata_libsvm_opts_for_test(const strata_libsvm *train,
                                               strata_libsvm_opts *o);

/*
 * Reads path into *out (zeroed first; on failure it is left zeroed, with
 * nothing allocated). o may be NULL for the defaults (all zero).
 * Errors, each with a one-line message; those about a line read
 * "PATH:LINE: ...", quoting the bad field through strata_quote:
 *   STRATA_ENOENT  the file cannot be opened (missing, a directory);
 *   STRATA_EPARSE  a line whose label is missing (it starts with a
 *                  feature) or not an integer (beyond int64_t included);
 *                  a feature without ':'; a "qid:" field (query ids are not
 *                  supported); an index that is not an integer, is 0 or
 *                  negative, is above 2^32 - 1, is above o->n_features, or
 *                  does not exceed the index before it on the line; a value
 *                  that is not a number, or not finite once stored as a
 *                  float; a label not in o->class_label; corrupt gzip data;
 *   STRATA_EEMPTY  no examples (the file is empty or holds only blank and
 *                  comment lines);
 *   STRATA_EINVAL  o->class_label not strictly ascending, or given with
 *                  n_classes 0;
 *   STRATA_ENOMEM  out of memory, or sizes that would overflow size_t.
 * Thread-safe for distinct out (the message is per thread).
 */
STRATA_EXPORT int strata_libsvm_read(const char *path, const strata_libsvm_opts *o,
                                     strata_libsvm *out);

/* Frees every array and zeroes d; safe on a zeroed set. */
STRATA_EXPORT void strata_libsvm_close(strata_libsvm *d);

/* ---- synthetic classification data ----------------------------------- */
/*
 * Sparse, text-like classification (the shape of the seed's Wikipedia
 * set): class j owns `support` characteristic features, drawn once from
 * the D features; a sample takes a uniformly drawn class, and each of its
 * nnz distinct features comes from its class's support with probability
 * `signal`, else from all D features; every value is 1/sqrt(nnz), so each
 * sample has unit norm. Samples 0..samples-1 are the training set and the
 * next `test` ones the test set, drawn alike; labels are 1..classes.
 */
typedef struct strata_libsvm_synth_spec {
  uint32_t classes;  /* J >= 2 */
  uint32_t features; /* D */
  uint32_t nnz;      /* features per sample, <= D / 2 */
  uint64_t samples;
  uint64_t test;     /* 0: no test set */
  uint32_t support;  /* characteristic features per class, <= D */
  double signal;     /* in [0, 1] */
  uint64_t seed;
} strata_libsvm_synth_spec;

/* The defaults: 10 classes, 1000 features, 20 per sample, 10000 samples,
 * 2000 test, support 40, signal 0.5, seed 1. */
STRATA_EXPORT void strata_libsvm_synth_defaults(strata_libsvm_synth_spec *spec);

/*
 * Parses "synth" or "synth:classes=J,features=D,nnz=N,samples=M,test=T,
 * support=S,signal=F,seed=X" (any subset, any order) over the values in
 * spec. STRATA_EUSAGE naming the key or value: unknown key, not a number,
 * a count of 0 (test may be 0), classes < 2, nnz above features / 2,
 * support above features, signal outside [0, 1].
 */
STRATA_EXPORT int strata_libsvm_synth_parse(const char *text, strata_libsvm_synth_spec *spec);

/*
 * Generates the training set into *train and, with spec->test > 0, the
 * test set into *test (test may be NULL when spec->test is 0), both
 * zeroed first. Deterministic for a spec: sample i depends only on the
 * seed and i. STRATA_ENOMEM (also for sizes beyond memory's reach), and
 * on failure both are left zeroed.
 */
STRATA_EXPORT int strata_libsvm_synth(const strata_libsvm_synth_spec *spec, strata_libsvm *train,
                                      strata_libsvm *test);

#endif
