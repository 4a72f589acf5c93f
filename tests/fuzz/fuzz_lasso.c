/*
 * strata-lasso's inputs (apps/lasso/data.c, lasso_data_read), under the
 * harness's memory limit. The low two bits of the header's choice pick the
 * input: 0 and 1 the file as svmlight, 2 as a table ("tsv:PATH"), 3
 * "synth:" and the content up to a NUL or a newline as a generator's spec
 * (generated when it fits the limit; not a path, whose bytes a message
 * names as given). Bit 2 standardises a set that reads, whose dense copy
 * the memory check may refuse.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fuzz.h"

#include "apps/lasso/lasso.h"
#include "strata/core.h"

/* What a set that reads promises (lasso.h). */
static void check(const lasso_data *d) {
  FUZZ_CHECK(d->n > 0 && d->p > 0 && d->colptr && d->y, "an empty set returned");
  FUZZ_CHECK(d->colptr[0] == 0 && d->colptr[d->p] == d->nnz, "bad column offsets");
  for (uint32_t f = 0; f < d->p; f++) {
    FUZZ_CHECK(d->colptr[f] <= d->colptr[f + 1], "column offsets decrease");
    for (uint64_t x = d->colptr[f]; x < d->colptr[f + 1]; x++) {
      FUZZ_CHECK(d->row[x] < d->n, "a row beyond the examples");
      FUZZ_CHECK(x == d->colptr[f] || d->row[x - 1] < d->row[x], "rows do not increase");
      FUZZ_CHECK(isfinite(d->val[x]), "a value that is not finite");
    }
  }
  for (uint32_t i = 0; i < d->n; i++)
    FUZZ_CHECK(isfinite(d->y[i]), "a target that is not finite");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in;
  if (fuzz_input_begin(&in, data, size))
    return 0;
  char spec[4200];
  const char *prefix = fuzz_path();
  switch (in.choice & 3) {
  case 2:
    snprintf(spec, sizeof spec, "tsv:%s", fuzz_path());
    break;
  case 3: {
    size_t n = 0;
    while (n < in.size && n < 256 && in.data[n] && in.data[n] != '\n')
      n++;
    memcpy(spec, "synth:", 6);
    memcpy(spec + 6, in.data, n);
    spec[6 + n] = '\0';
    prefix = NULL; /* "--data 'synth:...': ..." */
    break;
  }
  default:
    snprintf(spec, sizeof spec, "%s", fuzz_path());
  }
  lasso_data d;
  int rc = lasso_data_read(spec, &d);
  if (rc == 0) {
    check(&d);
    if (in.choice & 4) {
      uint64_t nnz = d.nnz;
      rc = lasso_data_standardize(&d);
      if (rc == 0) {
        FUZZ_CHECK(d.nnz == (uint64_t)d.n * d.p, "standardised data is not dense");
        check(&d);
      } else {
        FUZZ_CHECK(d.nnz == nnz, "a failed standardisation changed the data");
      }
      prefix = NULL; /* "--standardize: ..." */
    }
  } else {
    FUZZ_CHECK(d.colptr == NULL && d.row == NULL && d.y == NULL, "a failed read left data");
  }
  lasso_data_close(&d);
  fuzz_finish(rc, prefix);
  return 0;
}
