/*
 * The inputs of strata-lasso (apps/lasso/data.c): the table and svmlight
 * readers, their one-line errors, the generator's determinism and unit
 * columns, and standardisation. Each test gives back every byte.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "apps/lasso/lasso.h"
#include "strata/core.h"

#include "tmpfiles.h"

/* X[i][f] of a CSC matrix (0 where not stored). */
static double at(const lasso_data *d, uint32_t i, uint32_t f) {
  for (uint64_t x = d->colptr[f]; x < d->colptr[f + 1]; x++)
    if (d->row[x] == i)
      return d->val[x];
  return 0;
}

static void table_reads(void **state) {
  fixture *fx = *state;
  const char *path = write_tmp(fx, "A\tB\tY\n1\t0\t3.5\r\n\n-2\t4e1\t-6\n");
  char spec[96];
  snprintf(spec, sizeof spec, "tsv:%s", path);
  lasso_data d;
  assert_int_equal(lasso_data_read(spec, &d), 0);
  assert_int_equal(d.n, 2);
  assert_int_equal(d.p, 2);
  assert_int_equal(d.nnz, 3); /* the zero is not stored */
  assert_true(at(&d, 0, 0) == 1 && at(&d, 1, 0) == -2 && at(&d, 0, 1) == 0 && at(&d, 1, 1) == 40);
  assert_true(d.y[0] == 3.5 && d.y[1] == -6);
  lasso_data_close(&d);
}

static void svmlight_reads(void **state) {
  fixture *fx = *state;
  const char *path = write_tmp(fx, "# comment\n151.25 1:2 3:-0.5 # tail\n-7 2:1\r\n\n0.5 3:4\n");
  lasso_data d;
  assert_int_equal(lasso_data_read(path, &d), 0);
  assert_int_equal(d.n, 3);
  assert_int_equal(d.p, 3);
  assert_true(d.y[0] == 151.25 && d.y[1] == -7 && d.y[2] == 0.5);
  assert_true(at(&d, 0, 0) == 2 && at(&d, 0, 2) == -0.5 && at(&d, 1, 1) == 1 && at(&d, 2, 2) == 4);
  for (uint32_t f = 0; f < d.p; f++) /* rows increase within a column */
    for (uint64_t x = d.colptr[f] + 1; x < d.colptr[f + 1]; x++)
      assert_true(d.row[x - 1] < d.row[x]);
  lasso_data_close(&d);
}

static void bad_input_names_the_line(void **state) {
  fixture *fx = *state;
  lasso_data d;
  const char *path = write_tmp(fx, "A\tY\n1\t2\n3\tx\n");
  char spec[96];
  snprintf(spec, sizeof spec, "tsv:%s", path);
  assert_int_equal(lasso_data_read(spec, &d), STRATA_EPARSE);
  assert_msg_at(strata_err_msg(), path, 3, "'x' is not a number");
  path = write_tmp(fx, "A\tB\tY\n1\t2\t3\n4\t5\n");
  snprintf(spec, sizeof spec, "tsv:%s", path);
  assert_int_equal(lasso_data_read(spec, &d), STRATA_EPARSE);
  assert_msg_at(strata_err_msg(), path, 3, "2 fields, but the header names 3 columns");
  path = write_tmp(fx, "1 1:2\n2 2:1 1:3\n");
  assert_int_equal(lasso_data_read(path, &d), STRATA_EPARSE);
  assert_msg_at(strata_err_msg(), path, 2, "above the one before it");
  path = write_tmp(fx, "1 1:inf\n");
  assert_int_equal(lasso_data_read(path, &d), STRATA_EPARSE);
  assert_msg_at(strata_err_msg(), path, 1, "not finite");
  assert_int_equal(lasso_data_read("/nonexistent/x.tsv", &d), STRATA_ENOENT);
  assert_msg_at(strata_err_msg(), "/nonexistent/x.tsv", 0, "cannot open");
  assert_int_equal(lasso_data_read("synth:n=0", &d), STRATA_EUSAGE);
  assert_int_equal(lasso_data_read("synth:p=5,nonzeros=6", &d), STRATA_EUSAGE);
}

/* Column f depends on (seed, f) only: the first 50 columns of p = 50 and of
 * p = 80 are the same; every column has unit norm. */
static void synth_columns_are_fixed(void **state) {
  (void)state;
  lasso_data a, b;
  assert_int_equal(lasso_data_read("synth:n=40,p=50,density=0.2,nonzeros=5,seed=7", &a), 0);
  assert_int_equal(lasso_data_read("synth:n=40,p=80,density=0.2,nonzeros=5,seed=7", &b), 0);
  for (uint32_t f = 0; f < 50; f++) {
    assert_int_equal(a.colptr[f + 1] - a.colptr[f], b.colptr[f + 1] - b.colptr[f]);
    double ss = 0;
    for (uint64_t x = a.colptr[f], y = b.colptr[f]; x < a.colptr[f + 1]; x++, y++) {
      assert_int_equal(a.row[x], b.row[y]);
      assert_true(a.val[x] == b.val[y]);
      ss += a.val[x] * a.val[x];
    }
    assert_true(fabs(ss - 1) < 1e-12);
  }
  lasso_data_close(&a);
  lasso_data_close(&b);
}

static void standardize_population_sd(void **state) {
  (void)state;
  lasso_data d;
  assert_int_equal(lasso_data_read("synth:n=30,p=6,density=0.5,nonzeros=2,seed=3", &d), 0);
  assert_int_equal(lasso_data_standardize(&d), 0);
  assert_int_equal(d.nnz, 30 * 6);
  for (uint32_t f = 0; f < d.p; f++) {
    double s = 0, ss = 0;
    for (uint64_t x = d.colptr[f]; x < d.colptr[f + 1]; x++)
      s += d.val[x], ss += d.val[x] * d.val[x];
    assert_true(fabs(s) < 1e-12);
    assert_true(fabs(ss / d.n - 1) < 1e-12); /* over N, not N - 1 */
  }
  double ys = 0;
  for (uint32_t i = 0; i < d.n; i++)
    ys += d.y[i];
  assert_true(fabs(ys) < 1e-12);
  lasso_data_close(&d);
}

/* Both readers take gzip (by content), and refuse a stream cut short or
 * without its trailer, naming the file. */
static int read_as(const char *path, void *ctx) {
  char spec[96];
  snprintf(spec, sizeof spec, "%s%s", ctx ? "tsv:" : "", path);
  lasso_data d;
  int rc = lasso_data_read(spec, &d);
  if (rc == 0)
    assert_true(d.n == 400 && d.p >= 3);
  lasso_data_close(&d);
  return rc;
}

static void gzip_cut_or_trailerless(void **state) {
  fixture *fx = *state;
  static char svm[16384], tsv[16384];
  size_t a = 0, b = (size_t)snprintf(tsv, sizeof tsv, "A\tB\tC\tY\n");
  for (int k = 0; k < 400; k++) {
    a += (size_t)snprintf(svm + a, sizeof svm - a, "%d.5 1:%d %d:0.25\n", k, k % 7, 2 + k % 3);
    b += (size_t)snprintf(tsv + b, sizeof tsv - b, "%d\t%d\t0.5\t%d.25\n", k % 5, k % 11, k);
  }
  assert_gzip_damage_refused(fx, svm, read_as, NULL);
  assert_gzip_damage_refused(fx, tsv, read_as, fx);
}

/* Sizes are refused against the memory available (a 64 MB limit here)
 * before anything is allocated for them: a feature index (it sizes the
 * columns) at its line, a synth spec, and the dense copy --standardize
 * would make. */
static void sizes_refused(void **state) {
  fixture *fx = *state;
  strata_mem_set_limit(64000000);
  lasso_data d;
  const char *path = write_tmp(fx, "1.5 1:2\n2 4000000000:1\n");
  assert_int_equal(lasso_data_read(path, &d), STRATA_ENOMEM);
  assert_msg_at(strata_err_msg(), path, 2,
                "feature index 4000000000: the data (2 examples, 4000000000 features, 2 stored "
                "values) needs about 32.0 GB, but this host has 64.0 MB available (--mem-limit)");
  assert_int_equal(lasso_data_read("synth:p=1e9", &d), STRATA_ENOMEM);
  const char *want = "--data 'synth:p=1e9': 500 x 1000000000 at density 0.05 needs about ";
  if (strncmp(strata_err_msg(), want, strlen(want)) != 0)
    fail_msg("message '%s'", strata_err_msg());
  /* 100 x 100000 reads sparse (one value a row) but not dense. */
  static char text[2048];
  size_t n = 0;
  for (int k = 0; k < 100; k++)
    n += (size_t)snprintf(text + n, sizeof text - n, "%d 100000:1\n", k);
  assert_int_equal(lasso_data_read(write_tmp(fx, text), &d), 0);
  assert_int_equal(lasso_data_standardize(&d), STRATA_ENOMEM);
  assert_int_equal(d.nnz, 100); /* unchanged */
  want = "--standardize: the 100 x 100000 matrix made dense needs about 120.8 MB, but this host "
         "has 64.0 MB available (--mem-limit)";
  if (strncmp(strata_err_msg(), want, strlen(want)) != 0)
    fail_msg("message '%s'", strata_err_msg());
  lasso_data_close(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(table_reads, setup, teardown),
      cmocka_unit_test_setup_teardown(svmlight_reads, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_input_names_the_line, setup, teardown),
      cmocka_unit_test_setup_teardown(synth_columns_are_fixed, setup, teardown),
      cmocka_unit_test_setup_teardown(standardize_population_sd, setup, teardown),
      cmocka_unit_test_setup_teardown(gzip_cut_or_trailerless, setup, teardown),
      cmocka_unit_test_setup_teardown(sizes_refused, setup, teardown),
  };
  return cmocka_run_group_tests_name("lasso_data", tests, NULL, NULL);
}
