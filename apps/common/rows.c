/*
 * Blocks of labelled sparse rows and their data (apps/common/rows.h).
 */
#include "apps/common/rows.h"

#include <string.h>

#include "strata/core.h"

typedef struct rows_head {
  uint32_t n, nnz, batch, pad;
} rows_head;

int strata__rows_alloc(strata_block *b, uint64_t n, uint64_t nnz, uint64_t batch, const char *app,
                       strata__rows *r) {
  if (n > UINT32_MAX - 1 || nnz > UINT32_MAX - 1 || batch > UINT32_MAX)
    return strata_err_set(STRATA_ETOOBIG, "%s: a minibatch of %llu rows and %llu stored entries is too large",
                          app, (unsigned long long)n, (unsigned long long)nnz);
  b->len = sizeof(rows_head) + ((size_t)n + 1 + 2 * (size_t)nnz + (size_t)n) * 4;
  if (!(b->buf = strata_alloc_aligned(b->len))) return strata_err_set(STRATA_ENOMEM, "%s: out of memory", app);
  rows_head *h = b->buf;
  *h = (rows_head){.n = (uint32_t)n, .nnz = (uint32_t)nnz, .batch = (uint32_t)batch};
  *r = strata__rows_of(b);
  r->off[0] = 0;
  return 0;
}

strata__rows strata__rows_of(const strata_block *b) {
  strata__rows r;
  memset(&r, 0, sizeof r);
  if (!b || b->len < sizeof(rows_head)) return r;
  rows_head *h = b->buf;
  r.n = h->n;
  r.nnz = h->nnz;
  r.batch = h->batch;
  r.off = (uint32_t *)(h + 1);
  r.col = r.off + h->n + 1;
  r.val = (float *)(r.col + h->nnz);
  r.label = (uint32_t *)(r.val + h->nnz);
  return r;
}

int strata__is_synth(const char *data) { return strncmp(data, "synth", 5) == 0; }

int strata__read_labelled(const char *data, const char *test, int with_synth_test,
                          strata_libsvm *train, strata_libsvm *test_out, int *has_test) {
  int rc;
  memset(train, 0, sizeof *train);
  memset(test_out, 0, sizeof *test_out);
  *has_test = 0;
  if (strata__is_synth(data)) {
    strata_libsvm_synth_spec spec;
    strata_libsvm_synth_defaults(&spec);
    if ((rc = strata_libsvm_synth_parse(data, &spec))) return rc;
    if (!with_synth_test) spec.test = 0;
    *has_test = spec.test > 0;
    return strata_libsvm_synth(&spec, train, test_out);
  }
  if ((rc = strata_libsvm_read(data, NULL, train))) return rc;
  if (test) {
    strata_libsvm_opts o;
    strata_libsvm_opts_for_test(train, &o);
    if ((rc = strata_libsvm_read(test, &o, test_out))) return rc;
    *has_test = 1;
  }
  return 0;
}
