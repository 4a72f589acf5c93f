/*
 * The DML app (strata/apps/dml.h): each factor its compute emits is the step of
 * the pair loss's gradient (checked against central differences of the
 * loss its evaluate reports), pairs are drawn deterministically and
 * balanced, differences are exact sparse unions, and data that cannot give
 * both kinds of pair is refused.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "apps/dml/dml_pairs.h"
#include "core/sf.h"
#include "strata/core.h"
#include "strata/apps/dml.h"
#include "strata/apps/libsvm.h"
#include "strata/sf.h"

#include "tmpfiles.h"

/* Four labelled examples of two classes with distinct features, so every
 * pair has a non-zero difference. */
static const char FOUR[] = "1 1:0.5 3:1.0\n"
                           "1 2:0.25 3:1.0 4:-0.5\n"
                           "2 1:1.0 4:0.75\n"
                           "2 2:-1 3:0.5\n";

static void config_defaults(strata_dml_config *cfg) {
  strata_optgroup g = {"dml", strata_app_dml.options, cfg};
  memset(cfg, 0, sizeof *cfg);
  assert_int_equal(strata_options_defaults(&g, 1), 0);
}

static strata_setup serial_setup(uint64_t seed) {
  return (strata_setup){.workers = 1, .strata = 1, .depth = 1, .passes = 1, .seed = seed,
                        .worker = -1, .mode = STRATA_MODE_SERIAL};
}

/* The loss the app reports for the pairs of data block d on prob's L. */
static double block_loss(void *w, strata_problem *prob, int d) {
  double partials[6] = {0};
  strata_task_view tv = {.data = &prob->eval[d], .train = &prob->data[d],
                         .rotating = &prob->rotating[0], .chunk = -1,
                         .row_hi = prob->rotating[0].nrows};
  assert_int_equal(strata_app_dml.evaluate(w, &tv, partials), 0);
  assert_true(partials[1] == 1); /* one training pair a block */
  return partials[0];
}

/* Runs compute on data block d into fs and returns the factor count, the
 * step they add up to going into step (D x k, zeroed first). */
static int block_step(void *w, strata_problem *prob, int d, strata_sf_factors *fs, float *step) {
  strata_block *L = &prob->rotating[0];
  uint32_t k = L->row_bytes / sizeof(float), D = L->nrows;
  assert_int_equal(strata__sf_reset(fs, 0, 0), 0);
  strata_task_view tv = {.data = &prob->data[d], .rotating = L, .factors = fs, .chunk = 0,
                         .row_hi = D};
  double partials[6] = {0};
  assert_int_equal(strata_app_dml.compute(w, &tv, partials), 0);
  memset(step, 0, (size_t)D * k * sizeof *step);
  strata_block S = {.buf = step, .len = (size_t)D * k * sizeof *step, .nrows = D,
                    .row_bytes = L->row_bytes};
  size_t pos = 0;
  strata_sf_factor f;
  int n = 0, rc;
  while ((rc = strata__sf_next(fs->buf, fs->len, k, D, &pos, &f)) == 1) {
    strata_sf_apply(&S, &f);
    n++;
  }
  assert_int_equal(rc, 0);
  return n;
}

/* With lr 1, no decay and one pair a clock (B = 1), the step a pair's
 * factor makes is minus the gradient of its loss in L: compared, entry by
 * entry, with central differences of the loss evaluate reports. The loss
 * is quadratic in each entry (the dissimilar pair stays inside the margin),
 * so the differences are exact but for rounding. */
static void test_factor_is_gradient_step(void **state) {
  fixture *fx = *state;
  strata_dml_config cfg;
  config_defaults(&cfg);
  cfg.data = write_tmp(fx, FOUR);
  cfg.pairs = 2; /* pair 0 similar, pair 1 dissimilar */
  cfg.minibatch = 1;
  cfg.latent = 3;
  cfg.lr = 1;
  cfg.lr_decay = 0;
  cfg.margin = 100;
  strata_setup setup = serial_setup(7);
  strata_problem prob = {0};
  assert_int_equal(strata_app_dml.load(&cfg, &setup, &prob), 0);
  assert_int_equal(prob.n_data, 2);
  strata_block *L = &prob.rotating[0];
  uint32_t k = L->row_bytes / sizeof(float), D = L->nrows;
  assert_int_equal(k, 3);
  assert_int_equal(D, 4);
  void *w = NULL;
  setup.worker = 0;
  assert_int_equal(strata_app_dml.worker_init(&cfg, &setup, prob.meta, prob.meta_len, &w), 0);
  strata_sf_factors fs;
  strata__sf_init(&fs, k, D);
  float step[12], *Lv = L->buf;
  const double eps = 1e-2;
  for (int d = 0; d < 2; d++) {
    assert_int_equal(block_step(w, &prob, d, &fs, step), 1);
    double loss = block_loss(w, &prob, d);
    assert_true(loss > 0 && (d == 1 ? loss < cfg.margin : 1));
    for (uint32_t x = 0; x < D * k; x++) {
      float keep = Lv[x];
      Lv[x] = (float)(keep + eps);
      double up = block_loss(w, &prob, d);
      Lv[x] = (float)(keep - eps);
      double down = block_loss(w, &prob, d);
      Lv[x] = keep;
      double grad = (up - down) / (2 * eps), got = -step[x];
      if (fabs(got - grad) > 1e-3 * (1 + fabs(grad)))
        fail_msg("pair %d, L row %u column %u: factor step gives gradient %.6g, differences %.6g",
                 d, x % k, x / k, got, grad);
    }
  }
  /* A dissimilar pair beyond the margin has no loss and emits nothing. */
  cfg.margin = 1e-9;
  assert_int_equal(block_step(w, &prob, 1, &fs, step), 0);
  assert_true(block_loss(w, &prob, 1) == 0);
  strata__sf_close(&fs);
  strata_app_dml.worker_free(w);
  strata_problem_close(&prob);
}

static void test_delta_is_sparse_union(void **state) {
  fixture *fx = *state;
  strata_libsvm d;
  const char *path = write_tmp(fx, "1 1:1 2:2 4:3\n2 2:2 3:1 4:1 6:0\n");
  assert_int_equal(strata_libsvm_read(path, NULL, &d), 0);
  uint32_t idx[8];
  float val[8];
  assert_int_equal(strata__dml_delta(&d, 0, 1, NULL, NULL), 3);
  assert_int_equal(strata__dml_delta(&d, 0, 1, idx, val), 3);
  /* 0-based: feature 2 cancels, feature 6's stored 0 is dropped */
  assert_int_equal(idx[0], 0);
  assert_int_equal(idx[1], 2);
  assert_int_equal(idx[2], 3);
  assert_true(val[0] == 1 && val[1] == -1 && val[2] == 2);
  assert_int_equal(strata__dml_delta(&d, 1, 1, idx, val), 0);
  strata_libsvm_close(&d);
}

/* m pairs of d drawn with seed, checked for balance and for what each kind
 * of pair must be. */
static void draw_checked(const strata_libsvm *d, uint64_t m, uint64_t seed, uint64_t *a,
                         uint64_t *b, uint8_t *sim) {
  assert_int_equal(strata__dml_pairs(d, "synth", m, seed, a, b, sim), 0);
  uint64_t similar = 0;
  for (uint64_t i = 0; i < m; i++) {
    assert_true(a[i] < d->n_rows && b[i] < d->n_rows);
    assert_int_equal(sim[i], i % 2 == 0);
    similar += sim[i];
    if (sim[i]) {
      assert_true(a[i] != b[i]);
      assert_int_equal(d->label[a[i]], d->label[b[i]]);
    } else {
      assert_true(d->label[a[i]] != d->label[b[i]]);
    }
  }
  assert_int_equal(similar, (m + 1) / 2);
}

static void test_pairs_deterministic_and_balanced(void **state) {
  (void)state;
  strata_libsvm_synth_spec spec;
  strata_libsvm_synth_defaults(&spec);
  spec.classes = 5;
  spec.features = 50;
  spec.nnz = 5;
  spec.samples = 200;
  spec.test = 0;
  strata_libsvm d;
  assert_int_equal(strata_libsvm_synth(&spec, &d, NULL), 0);
  enum { M = 1001 };
  uint64_t *a = malloc(6 * M * sizeof *a);
  uint8_t *sim = malloc(3 * M);
  assert_non_null(a);
  assert_non_null(sim);
  uint64_t *b = a + M, *a2 = a + 2 * M, *b2 = a + 3 * M, *a3 = a + 4 * M, *b3 = a + 5 * M;
  draw_checked(&d, M, 11, a, b, sim);
  draw_checked(&d, M, 11, a2, b2, sim + M);
  assert_memory_equal(a, a2, M * sizeof *a);
  assert_memory_equal(b, b2, M * sizeof *b);
  assert_memory_equal(sim, sim + M, M);
  draw_checked(&d, M, 12, a3, b3, sim + 2 * M);
  assert_memory_not_equal(a, a3, M * sizeof *a);
  /* Every class shows up on both sides of the pairs. */
  uint64_t seen[5] = {0};
  for (uint64_t i = 0; i < M; i++) seen[d.label[a[i]]]++, seen[d.label[b[i]]]++;
  for (int c = 0; c < 5; c++) assert_true(seen[c] > M / 10);
  free(a);
  free(sim);
  strata_libsvm_close(&d);
}

/* Loads the same data twice with one seed and once with another: the
 * problems agree byte for byte, then differ. */
static void test_load_repeats(void **state) {
  (void)state;
  strata_dml_config cfg;
  config_defaults(&cfg);
  cfg.data = "synth:classes=3,features=40,nnz=4,samples=100,test=50";
  cfg.pairs = 300;
  cfg.test_pairs = 60;
  cfg.minibatch = 20;
  strata_setup setup = serial_setup(5);
  strata_problem p1 = {0}, p2 = {0}, p3 = {0};
  assert_int_equal(strata_app_dml.load(&cfg, &setup, &p1), 0);
  assert_int_equal(strata_app_dml.load(&cfg, &setup, &p2), 0);
  setup.seed = 6;
  assert_int_equal(strata_app_dml.load(&cfg, &setup, &p3), 0);
  assert_int_equal(p1.n_data, 15);
  assert_int_equal(p1.n_examples, 300);
  int differ = 0;
  for (int i = 0; i < p1.n_data; i++) {
    assert_int_equal(p1.data[i].len, p2.data[i].len);
    assert_memory_equal(p1.data[i].buf, p2.data[i].buf, p1.data[i].len);
    assert_int_equal(p1.eval[i].len, p2.eval[i].len);
    assert_memory_equal(p1.eval[i].buf, p2.eval[i].buf, p1.eval[i].len);
    differ |= p1.data[i].len != p3.data[i].len ||
              memcmp(p1.data[i].buf, p3.data[i].buf, p1.data[i].len) != 0;
  }
  assert_true(differ);
  assert_memory_equal(p1.rotating[0].buf, p2.rotating[0].buf, p1.rotating[0].len);
  strata_problem_close(&p1);
  strata_problem_close(&p2);
  strata_problem_close(&p3);
}

/* load on data that cannot give both kinds of pair: STRATA_EINVAL, with a
 * message naming the file and the reason. */
static void expect_refused(fixture *fx, const char *train, const char *test, const char *needle) {
  strata_dml_config cfg;
  config_defaults(&cfg);
  cfg.data = write_tmp(fx, train);
  if (test) cfg.test = write_tmp(fx, test);
  strata_setup setup = serial_setup(1);
  strata_problem prob = {0};
  assert_int_equal(strata_app_dml.load(&cfg, &setup, &prob), STRATA_EINVAL);
  const char *msg = strata_err_msg();
  const char *file = test ? cfg.test : cfg.data;
  if (strncmp(msg, file, strlen(file)) != 0 || !strstr(msg, needle))
    fail_msg("message '%s' lacks '%s' or '%s'", msg, file, needle);
  assert_null(prob.data);
  assert_live(fx);
}

static void test_refuses_one_class(void **state) {
  expect_refused(*state, "3 1:1\n3 2:1\n3 1:2\n", NULL, "no dissimilar pairs");
}

static void test_refuses_singleton_classes(void **state) {
  expect_refused(*state, "1 1:1\n2 2:1\n3 1:2\n", NULL, "no similar pairs");
}

static void test_refuses_one_class_test_set(void **state) {
  expect_refused(*state, FOUR, "2 1:1\n2 2:1\n", "no dissimilar pairs");
}

static void test_check_refuses_test_with_synth(void **state) {
  (void)state;
  strata_dml_config cfg;
  config_defaults(&cfg);
  cfg.test = "t.svm";
  strata_setup setup = serial_setup(1);
  assert_int_equal(strata_app_dml.check(&cfg, &setup), STRATA_EUSAGE);
  assert_non_null(strstr(strata_err_msg(), "--test"));
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_factor_is_gradient_step),
      T(test_delta_is_sparse_union),
      T(test_pairs_deterministic_and_balanced),
      T(test_load_repeats),
      T(test_refuses_one_class),
      T(test_refuses_singleton_classes),
      T(test_refuses_one_class_test_set),
      T(test_check_refuses_test_with_synth),
  };
  return cmocka_run_group_tests_name("dml", tests, NULL, NULL);
}
