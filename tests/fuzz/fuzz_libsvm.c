/*
 * strata_libsvm_read, plain and gzip. Bit 0 of the header's choice reads
 * the file a second time as a test set against the first read's label map
 * and feature count; bit 1 gives 100 features to the first read, so an
 * index above 100 is an error naming its line.
 */
#include <math.h>

#include "fuzz.h"
#include "strata/apps/libsvm.h"

/* What the reader promises of a set it returns. */
static void check(const strata_libsvm *d, uint32_t n_features) {
  FUZZ_CHECK(d->n_rows > 0 && d->row_off && d->label && d->class_label, "an empty set returned");
  FUZZ_CHECK(d->n_classes > 0, "no classes");
  FUZZ_CHECK(!n_features || d->n_features == n_features, "n_features is not the count given");
  FUZZ_CHECK(d->row_off[0] == 0 && d->row_off[d->n_rows] == d->nnz, "bad row offsets");
  FUZZ_CHECK(d->nnz == 0 || (d->col && d->val), "features without arrays");
  for (uint32_t j = 1; j < d->n_classes; j++)
    FUZZ_CHECK(d->class_label[j - 1] < d->class_label[j], "a label map not strictly ascending");
  for (uint64_t i = 0; i < d->n_rows; i++) {
    FUZZ_CHECK(d->label[i] < d->n_classes, "a label beyond the classes");
    FUZZ_CHECK(d->row_off[i] <= d->row_off[i + 1], "row offsets decrease");
    for (uint64_t k = d->row_off[i]; k < d->row_off[i + 1]; k++) {
      FUZZ_CHECK(d->col[k] < d->n_features, "a column beyond the features");
      FUZZ_CHECK(k == d->row_off[i] || d->col[k - 1] < d->col[k], "columns do not increase");
      FUZZ_CHECK(isfinite(d->val[k]), "a value that is not finite");
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in;
  if (fuzz_input_begin(&in, data, size)) return 0;
  strata_libsvm_opts o = {.n_features = in.choice & 2 ? 100 : 0};
  strata_libsvm train, test = {0};
  int rc = strata_libsvm_read(fuzz_path(), &o, &train);
  if (rc == 0) {
    check(&train, o.n_features);
    if (in.choice & 1) {
      strata_libsvm_opts t;
      strata_libsvm_opts_for_test(&train, &t);
      rc = strata_libsvm_read(fuzz_path(), &t, &test);
      if (rc == 0) {
        check(&test, train.n_features);
        FUZZ_CHECK(test.n_rows == train.n_rows && test.nnz == train.nnz,
                   "the second read found a different set");
        for (uint64_t i = 0; i < test.n_rows; i++)
          FUZZ_CHECK(test.label[i] == train.label[i], "the label map moved a class");
      }
    }
  } else {
    FUZZ_CHECK(train.row_off == NULL && train.n_rows == 0, "a failed read left data");
  }
  strata_libsvm_close(&test);
  strata_libsvm_close(&train);
  fuzz_finish(rc, fuzz_path());
  return 0;
}
