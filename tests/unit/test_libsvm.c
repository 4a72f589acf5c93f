#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "strata/core.h"
#include "strata/apps/libsvm.h"

#include "quoted.h"
#include "tmpfiles.h"

/* Checks row i: its class and its features, given as "col:val col:val"
 * with 0-based columns. */
static void assert_row(const strata_libsvm *d, uint64_t i, uint32_t cls, const char *spec) {
  assert_true(i < d->n_rows);
  if (d->label[i] != cls) fail_msg("row %llu: class %u, want %u", (unsigned long long)i,
                                   d->label[i], cls);
  uint64_t k = d->row_off[i];
  const char *s = spec;
  while (*s) {
    char *end;
    unsigned long c = strtoul(s, &end, 10);
    assert_int_equal(*end, ':');
    double v = strtod(end + 1, &end);
    s = end;
    while (*s == ' ') s++;
    if (k >= d->row_off[i + 1]) fail_msg("row %llu: too few features", (unsigned long long)i);
    if (d->col[k] != c || d->val[k] != (float)v)
      fail_msg("row %llu feature %llu: %u:%g, want %lu:%g", (unsigned long long)i,
               (unsigned long long)(k - d->row_off[i]), d->col[k], (double)d->val[k], c, v);
    k++;
  }
  if (k != d->row_off[i + 1]) fail_msg("row %llu: too many features", (unsigned long long)i);
}

static void assert_zeroed(const strata_libsvm *d) {
  static const strata_libsvm zero = {0};
  assert_memory_equal(d, &zero, sizeof zero);
}

/* The format's corners in one file: comments (whole-line and trailing), blank
 * lines, tabs, CRLF, a row without features, signed and exponent values, a
 * last line without a newline. */
static const char good_text[] =
    "# a comment line\n"
    "1 1:0.5 3:-2 10:1e-3\r\n"
    "\n"
    "   \t\n"
    "3\t2:1\t4:+7.25 # trailing comment, with 5:5 inside\n"
    "#1 1:1\n"
    "1\n"
    "-2 1:0 10:1.5E2";

static void check_good(const strata_libsvm *d) {
  assert_int_equal(d->n_rows, 4);
  assert_int_equal(d->nnz, 7);
  assert_int_equal(d->n_features, 10);
  assert_int_equal(d->n_classes, 3);
  assert_int_equal(d->class_label[0], -2);
  assert_int_equal(d->class_label[1], 1);
  assert_int_equal(d->class_label[2], 3);
  assert_int_equal(d->row_off[0], 0);
  assert_row(d, 0, 1, "0:0.5 2:-2 9:1e-3");
  assert_row(d, 1, 2, "1:1 3:7.25");
  assert_row(d, 2, 1, "");
  assert_row(d, 3, 0, "0:0 9:150");
}

static void test_good(void **state) {
  fixture *fx = *state;
  strata_libsvm d;
  assert_int_equal(strata_libsvm_read(write_tmp(fx, good_text), NULL, &d), 0);
  check_good(&d);
  strata_libsvm_close(&d);
  assert_zeroed(&d);
  strata_libsvm_close(&d); /* again, and on NULL */
  strata_libsvm_close(NULL);

  assert_int_equal(strata_libsvm_read(write_tmp_gz(fx, good_text), NULL, &d), 0);
  check_good(&d);
  strata_libsvm_close(&d);
  assert_live(fx);
}

/* Classes follow the labels' values, not the order they appear in. */
static void test_label_order(void **state) {
  fixture *fx = *state;
  strata_libsvm d;
  const char *path = write_tmp(fx, "7 1:1\n-1 1:1\n7 2:1\n100 1:1\n3 1:1\n-1 3:1\n");
  assert_int_equal(strata_libsvm_read(path, NULL, &d), 0);
  static const int64_t want_map[] = {-1, 3, 7, 100};
  static const uint32_t want_label[] = {2, 0, 2, 3, 1, 0};
  assert_int_equal(d.n_classes, 4);
  assert_memory_equal(d.class_label, want_map, sizeof want_map);
  assert_memory_equal(d.label, want_label, sizeof want_label);
  strata_libsvm_close(&d);
  assert_live(fx);
}

/* A given D fixes n_features even when no index reaches it. */
static void test_given_features(void **state) {
  fixture *fx = *state;
  strata_libsvm d;
  strata_libsvm_opts o = {.n_features = 50};
  assert_int_equal(strata_libsvm_read(write_tmp(fx, "1 3:1 50:2\n2 1:1\n"), &o, &d), 0);
  assert_int_equal(d.n_features, 50);
  assert_row(&d, 0, 0, "2:1 49:2");
  strata_libsvm_close(&d);
  assert_int_equal(strata_libsvm_read(write_tmp(fx, "1 3:1\n"), &o, &d), 0);
  assert_int_equal(d.n_features, 50);
  strata_libsvm_close(&d);
  /* Lines without features give D = 0 when none is given. */
  assert_int_equal(strata_libsvm_read(write_tmp(fx, "1\n2\n"), NULL, &d), 0);
  assert_int_equal(d.n_features, 0);
  assert_int_equal(d.nnz, 0);
  assert_int_equal(d.row_off[2], 0);
  strata_libsvm_close(&d);
  assert_live(fx);
}

/* The largest index is 2^32 - 1, which becomes column 2^32 - 2. */
static void test_largest_index(void **state) {
  fixture *fx = *state;
  strata_libsvm d;
  assert_int_equal(strata_libsvm_read(write_tmp(fx, "0 1:1 4294967295:2\n"), NULL, &d), 0);
  assert_int_equal(d.n_features, UINT32_MAX);
  assert_int_equal(d.col[1], UINT32_MAX - 1);
  strata_libsvm_close(&d);
  assert_live(fx);
}

/* A test file read with the training file's map and D: classes agree even
 * when the test file lacks some labels or lists them in another order. */
static void test_label_map_shared(void **state) {
  fixture *fx = *state;
  strata_libsvm train, test;
  strata_libsvm_opts o;
  assert_int_equal(strata_libsvm_read(write_tmp(fx, "2 1:1\n5 2:1\n9 3:1\n"), NULL, &train), 0);
  strata_libsvm_opts_for_test(&train, &o);
  assert_int_equal(o.n_features, 3);
  assert_int_equal(o.n_classes, 3);
  assert_ptr_equal(o.class_label, train.class_label);

  const char *tpath = write_tmp(fx, "9 1:1\n9 2:1\n2\n");
  assert_int_equal(strata_libsvm_read(tpath, &o, &test), 0);
  /* The test set owns its copy of the map. */
  strata_libsvm_close(&train);
  assert_int_equal(test.n_classes, 3);
  assert_int_equal(test.class_label[0], 2);
  assert_int_equal(test.class_label[2], 9);
  assert_int_equal(test.n_features, 3);
  assert_row(&test, 0, 2, "0:1");
  assert_row(&test, 1, 2, "1:1");
  assert_row(&test, 2, 0, "");
  strata_libsvm_close(&test);

  /* A label the map lacks is named with its line. */
  static const int64_t map[] = {2, 5, 9};
  o = (strata_libsvm_opts){.class_label = map, .n_classes = 3};
  const char *bad = write_tmp(fx, "2 1:1\n\n7 1:1\n");
  assert_int_equal(strata_libsvm_read(bad, &o, &test), STRATA_EPARSE);
  char want[160];
  snprintf(want, sizeof want, "%s:3: label 7 is not in the label map (3 classes, labels 2 to 9)",
           bad);
  assert_string_equal(strata_err_msg(), want);
  assert_zeroed(&test);

  /* A map that is not one is refused before the file is read. */
  static const int64_t unsorted[] = {2, 9, 5}, dup[] = {2, 2};
  o = (strata_libsvm_opts){.class_label = unsorted, .n_classes = 3};
  assert_int_equal(strata_libsvm_read(tpath, &o, &test), STRATA_EINVAL);
  assert_non_null(strstr(strata_err_msg(), "not strictly ascending (9 then 5)"));
  o = (strata_libsvm_opts){.class_label = dup, .n_classes = 2};
  assert_int_equal(strata_libsvm_read(tpath, &o, &test), STRATA_EINVAL);
  o = (strata_libsvm_opts){.class_label = map, .n_classes = 0};
  assert_int_equal(strata_libsvm_read(tpath, &o, &test), STRATA_EINVAL);
  assert_zeroed(&test);
  assert_live(fx);
}

static void expect_fail(const char *path, const strata_libsvm_opts *o, int code, size_t line,
                        const char *needle) {
  strata_libsvm d;
  int rc = strata_libsvm_read(path, o, &d);
  const char *msg = strata_err_msg();
  if (rc != code)
    fail_msg("%s: got %s (%s), want %s", path, strata_err_name(rc), msg, strata_err_name(code));
  assert_msg_at(msg, path, line, needle);
  assert_zeroed(&d);
}

static void test_missing_file(void **state) {
  fixture *fx = *state;
  expect_fail("/nonexistent/strata/train.svm", NULL, STRATA_ENOENT, 0, "cannot open");
  expect_fail("/tmp", NULL, STRATA_ENOENT, 0, "cannot open");
  assert_live(fx);
}

#define ABOVE_U32 " is above the largest supported, 4294967295 (2^32 - 1)"

static void test_bad_inputs(void **state) {
  fixture *fx = *state;
  static const struct {
    uint32_t d; /* a given D, or 0 */
    const char *text;
    int code;
    size_t line; /* 0: a whole-file message "FILE: ..." */
    const char *needle;
  } cases[] = {
      /* no examples */
      {0, "", STRATA_EEMPTY, 0, "no examples"},
      {0, "\n\r\n  \t\n", STRATA_EEMPTY, 0, "no examples"},
      {0, "# only\n#comments 1 1:1\n", STRATA_EEMPTY, 0, "no examples"},
      /* labels */
      {0, "1 1:1\n1:1 2:1\n", STRATA_EPARSE, 2, "label missing: the line starts with '1:1'"},
      {0, "  3:0.5\n", STRATA_EPARSE, 1, "label missing"},
      {0, "qid:3 1:1\n", STRATA_EPARSE, 1, "label missing: the line starts with 'qid:3'"},
      {0, "1.5 1:1\n", STRATA_EPARSE, 1, "label '1.5' is not an integer"},
      {0, "+1 1:1\n\nx 1:1\n", STRATA_EPARSE, 3, "label 'x' is not an integer"},
      {0, "1e3 1:1\n", STRATA_EPARSE, 1, "label '1e3' is not an integer"},
      {0, "99999999999999999999 1:1\n", STRATA_EPARSE, 1,
       "label '99999999999999999999' is above the largest supported"},
      /* indices */
      {0, "1 0:1\n", STRATA_EPARSE, 1, "feature index '0' is not positive (indices start at 1)"},
      {0, "1 1:1\n2 2:1 -3:1\n", STRATA_EPARSE, 2, "feature index '-3' is not positive"},
      {0, "1 -99999999999999999999:1\n", STRATA_EPARSE, 1,
       "feature index '-99999999999999999999' is not positive"},
      {0, "1 2:1 2:1\n", STRATA_EPARSE, 1,
       "feature index 2 follows 2: indices must increase along a line"},
      {0, "1 5:1 3:1\n", STRATA_EPARSE, 1, "feature index 3 follows 5"},
      {0, "1 x:1\n", STRATA_EPARSE, 1, "feature index 'x' is not an integer"},
      {0, "1 :1\n", STRATA_EPARSE, 1, "feature index '' is not an integer"},
      {0, "1 1.0:1\n", STRATA_EPARSE, 1, "feature index '1.0' is not an integer"},
      {0, "1 4294967296:1\n", STRATA_EPARSE, 1, "feature index '4294967296'" ABOVE_U32},
      {0, "1 99999999999999999999:1\n", STRATA_EPARSE, 1,
       "feature index '99999999999999999999'" ABOVE_U32},
      {10, "1 3:1\n1 11:1\n", STRATA_EPARSE, 2, "feature index 11 is above the 10 features given"},
      /* separators and values */
      {0, "1 1:1 7\n", STRATA_EPARSE, 1, "feature '7' has no ':' (expected idx:val)"},
      {0, "1 1:1 qid:4 2:1\n", STRATA_EPARSE, 1,
       "'qid:4': qid (SVMlight query ids, for ranking) is not supported"},
      {0, "1 1:\n", STRATA_EPARSE, 1, "value '' of feature 1 is not a number"},
      {0, "1 1:abc\n", STRATA_EPARSE, 1, "value 'abc' of feature 1 is not a number"},
      {0, "1 4:1:2\n", STRATA_EPARSE, 1, "value '1:2' of feature 4 is not a number"},
      {0, "1 1:1 2:nan\n", STRATA_EPARSE, 1, "value 'nan' of feature 2 is not finite as a float"},
      {0, "1 1:inf\n", STRATA_EPARSE, 1, "value 'inf' of feature 1 is not finite"},
      {0, "1 1:-INF\n", STRATA_EPARSE, 1, "value '-INF' of feature 1 is not finite"},
      {0, "1 1:1e39\n", STRATA_EPARSE, 1, "value '1e39' of feature 1 is not finite as a float"},
      {0, "1 1:1\rx\n", STRATA_EPARSE, 1, "value '1\\x0dx' of feature 1 is not a number"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    fx->n_paths = 0;
    const char *path = write_tmp(fx, cases[k].text);
    strata_libsvm_opts o = {.n_features = cases[k].d};
    expect_fail(path, &o, cases[k].code, cases[k].line, cases[k].needle);
    unlink(path);
    assert_live(fx);
  }
  fx->n_paths = 0;
}

/* Binary garbage reaches the message escaped, plain and gzipped. */
static void test_garbage_quoted(void **state) {
  fixture *fx = *state;
  static const struct {
    const char *text;
    const char *needle;
  } cases[] = {
      {GARBAGE " 1:1\n", "label '" GARBAGE_QUOTED "' is not an integer"},
      {"1 " GARBAGE ":1\n", "feature index '" GARBAGE_QUOTED "' is not an integer"},
      {"1 1:" GARBAGE "\n", "value '" GARBAGE_QUOTED "' of feature 1 is not a number"},
      {"1 " GARBAGE "\n", "feature '" GARBAGE_QUOTED "' has no ':'"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    for (int gz = 0; gz < 2; gz++) {
      fx->n_paths = 0;
      const char *path = gz ? write_tmp_gz(fx, cases[k].text) : write_tmp(fx, cases[k].text);
      expect_fail(path, NULL, STRATA_EPARSE, 1, cases[k].needle);
      assert_quoted_msg(strata_err_msg(), GARBAGE_QUOTED);
      unlink(path);
      assert_live(fx);
    }
  }
  fx->n_paths = 0;
}

/* Every allocation the reader makes can fail; each failure is reported as
 * STRATA_ENOMEM naming the file and leaves nothing behind. */
static void test_alloc_failure(void **state) {
  fixture *fx = *state;
  /* Enough rows and features that the arrays grow past their first size. */
  enum { ROWS = 1500 };
  size_t cap = ROWS * 40, n = 0;
  char *text = malloc(cap);
  assert_non_null(text);
  for (int i = 0; i < ROWS; i++)
    n += (size_t)snprintf(text + n, cap - n, "%d 1:0.5 %d:1 %d:-1\n", i % 3, 2 + i % 7, 10 + i);
  const char *path = write_tmp(fx, text);
  free(text);
  static const int64_t map[] = {0, 1, 2};
  const strata_libsvm_opts with_map = {.class_label = map, .n_classes = 3};
  const strata_libsvm_opts *opts[] = {NULL, &with_map};
  for (int m = 0; m < 2; m++) {
    int failures = 0;
    for (long k = 1;; k++) {
      strata_libsvm d;
      strata_alloc_fail_after(k);
      int rc = strata_libsvm_read(path, opts[m], &d);
      strata_alloc_fail_after(0);
      if (rc == 0) {
        assert_int_equal(d.n_rows, ROWS);
        assert_int_equal(d.nnz, 3 * ROWS);
        assert_int_equal(d.n_classes, 3);
        strata_libsvm_close(&d);
        break;
      }
      if (rc != STRATA_ENOMEM)
        fail_msg("step %ld: %s (%s)", k, strata_err_name(rc), strata_err_msg());
      assert_non_null(strstr(strata_err_msg(), path));
      assert_zeroed(&d);
      assert_live(fx);
      failures++;
      assert_true(k < 1000);
    }
    assert_true(failures >= 5);
  }
  assert_live(fx);
}

/* ---- real data (skipped when the shared data folder is absent) ------- */

static void count_classes(const strata_libsvm *d, uint64_t *count) {
  memset(count, 0, d->n_classes * sizeof *count);
  for (uint64_t i = 0; i < d->n_rows; i++) count[d->label[i]]++;
}

static void test_dna(void **state) {
  fixture *fx = *state;
  const char *path = STRATA_SHARED_DATA "/libsvm-dna/dna.scale";
  const char *tpath = STRATA_SHARED_DATA "/libsvm-dna/dna.scale.t";
  if (!have_file(path)) skip();
  strata_libsvm train, test;
  uint64_t count[3];
  assert_int_equal(strata_libsvm_read(path, NULL, &train), 0);
  assert_int_equal(train.n_rows, 2000);
  assert_int_equal(train.n_features, 180);
  assert_int_equal(train.n_classes, 3);
  /* The file's own count (its ':' characters); data/README.md says 93,233. */
  assert_int_equal(train.nnz, 91233);
  assert_int_equal(train.class_label[0], 1);
  assert_int_equal(train.class_label[2], 3);
  count_classes(&train, count);
  assert_int_equal(count[0], 464);
  assert_int_equal(count[1], 485);
  assert_int_equal(count[2], 1051);
  /* The file opens with "3 2:1 7:1 12:1". */
  assert_int_equal(train.label[0], 2);
  assert_int_equal(train.col[0], 1);
  assert_int_equal(train.col[1], 6);
  assert_true(train.val[0] == 1.0f);
  if (have_file(tpath)) {
    strata_libsvm_opts o;
    strata_libsvm_opts_for_test(&train, &o);
    assert_int_equal(strata_libsvm_read(tpath, &o, &test), 0);
    assert_int_equal(test.n_rows, 1186);
    assert_int_equal(test.nnz, 53669);
    assert_int_equal(test.n_features, 180);
    count_classes(&test, count);
    assert_int_equal(count[0], 303);
    assert_int_equal(count[1], 280);
    assert_int_equal(count[2], 603);
    strata_libsvm_close(&test);
  }
  strata_libsvm_close(&train);
  assert_live(fx);
}

static void test_satimage(void **state) {
  fixture *fx = *state;
  const char *path = STRATA_SHARED_DATA "/libsvm-satimage/satimage.scale";
  const char *tpath = STRATA_SHARED_DATA "/libsvm-satimage/satimage.scale.t";
  if (!have_file(path)) skip();
  strata_libsvm train, test;
  uint64_t count[6];
  static const uint64_t want[6] = {1072, 479, 961, 415, 470, 1038};
  assert_int_equal(strata_libsvm_read(path, NULL, &train), 0);
  assert_int_equal(train.n_rows, 4435);
  assert_int_equal(train.n_features, 36);
  assert_int_equal(train.n_classes, 6);
  for (uint32_t j = 0; j < 6; j++) assert_int_equal(train.class_label[j], j + 1);
  count_classes(&train, count);
  assert_memory_equal(count, want, sizeof want);
  for (uint64_t k = 0; k < train.nnz; k++) assert_true(train.val[k] >= -1 && train.val[k] <= 1);
  if (have_file(tpath)) {
    strata_libsvm_opts o;
    strata_libsvm_opts_for_test(&train, &o);
    assert_int_equal(strata_libsvm_read(tpath, &o, &test), 0);
    assert_int_equal(test.n_rows, 2000);
    assert_int_equal(test.n_classes, 6);
    strata_libsvm_close(&test);
  }
  strata_libsvm_close(&train);
  assert_live(fx);
}

/* Cut short or without its trailer, a gzip stream is refused naming the
 * file, never read as fewer examples. */
static int read_plain(const char *path, void *ctx) {
  (void)ctx;
  strata_libsvm d = {0};
  int rc = strata_libsvm_read(path, NULL, &d);
  if (rc) assert_null(d.col);
  strata_libsvm_close(&d);
  return rc;
}

static void test_gzip_cut_or_trailerless(void **state) {
  fixture *fx = *state;
  static char text[16384];
  size_t n = 0;
  for (int k = 0; k < 300; k++)
    n += (size_t)snprintf(text + n, sizeof text - n, "%d %d:0.5 %d:%d\n", k % 3, 1 + k % 7,
                          10 + (k * 13) % 97, 1 + k % 9);
  assert_gzip_damage_refused(fx, text, read_plain, NULL);
}

/* The generator refuses, before it allocates, a spec whose samples would
 * not fit in the memory available. */
static void test_synth_too_large(void **state) {
  fixture *fx = *state;
  strata_mem_set_limit(64000000);
  strata_libsvm_synth_spec s;
  strata_libsvm_synth_defaults(&s);
  assert_int_equal(strata_libsvm_synth_parse("synth:samples=1000000000,nnz=20", &s), 0);
  strata_libsvm train = {0}, test = {0};
  assert_int_equal(strata_libsvm_synth(&s, &train, &test), STRATA_ENOMEM);
  const char *want = "--data synth: ";
  if (strncmp(strata_err_msg(), want, strlen(want)) != 0 ||
      !strstr(strata_err_msg(), "but this host has 64.0 MB available (--mem-limit)"))
    fail_msg("message '%s'", strata_err_msg());
  assert_null(train.col);
  assert_live(fx);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* Lines the scanner of plain lines takes (labels, indices, plain
 * decimals) and lines it leaves to the general reader (exponents, a
 * comment, long mantissas, CR LF) read as the general reader alone reads
 * them: every line again with a blank in front, which only it takes. */
static void test_fast_lines_as_general(void **state) {
  fixture *fx = *state;
  static char text[2][1 << 20];
  size_t n[2] = {0, 0};
  const char *env = getenv("STRATA_TEST_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
  printf("seed %llu (STRATA_TEST_SEED=%llu reproduces)\n", (unsigned long long)seed,
         (unsigned long long)seed);
  strata_rng rng;
  strata_rng_seed(&rng, seed);
  for (int row = 0; row < 5000; row++) {
    char line[512];
    size_t l = (size_t)snprintf(line, sizeof line, "%d", (int)strata_rng_below(&rng, 7) - 3);
    uint32_t idx = 0;
    int feats = (int)strata_rng_below(&rng, 6);
    for (int k = 0; k < feats; k++) {
      idx += 1 + (uint32_t)strata_rng_below(&rng, 50);
      uint64_t kind = strata_rng_below(&rng, 20);
      if (kind == 0)
        l += (size_t)snprintf(line + l, sizeof line - l, " %u:%de-3", idx,
                              (int)strata_rng_below(&rng, 100));
      else if (kind == 1)
        l += (size_t)snprintf(line + l, sizeof line - l, "\t%u:0.12345678901234567", idx);
      else
        l += (size_t)snprintf(line + l, sizeof line - l, " %u:%.*f", idx, (int)(kind % 5),
                              strata_rng_uniform(&rng) * 10 - 5);
    }
    uint64_t end = strata_rng_below(&rng, 10);
    l += (size_t)snprintf(line + l, sizeof line - l, "%s",
                          end == 0   ? " # comment\n"
                          : end == 1 ? "\r\n"
                          : end == 2 ? " \n"
                                     : "\n");
    for (int v = 0; v < 2; v++)
      n[v] += (size_t)snprintf(text[v] + n[v], sizeof text[v] - n[v], "%s%s", v ? " " : "", line);
  }
  strata_libsvm d[2];
  for (int v = 0; v < 2; v++)
    assert_int_equal(strata_libsvm_read(write_tmp_len(fx, text[v], n[v]), NULL, &d[v]), 0);
  assert_int_equal(d[0].n_rows, d[1].n_rows);
  assert_int_equal(d[0].nnz, d[1].nnz);
  assert_int_equal(d[0].n_features, d[1].n_features);
  assert_int_equal(d[0].n_classes, d[1].n_classes);
  assert_memory_equal(d[0].row_off, d[1].row_off, (d[0].n_rows + 1) * sizeof *d[0].row_off);
  assert_memory_equal(d[0].col, d[1].col, d[0].nnz * sizeof *d[0].col);
  assert_memory_equal(d[0].val, d[1].val, d[0].nnz * sizeof *d[0].val);
  assert_memory_equal(d[0].label, d[1].label, d[0].n_rows * sizeof *d[0].label);
  assert_memory_equal(d[0].class_label, d[1].class_label,
                      d[0].n_classes * sizeof *d[0].class_label);
  for (int v = 0; v < 2; v++) strata_libsvm_close(&d[v]);
  assert_live(fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_good),
      T(test_label_order),
      T(test_given_features),
      T(test_largest_index),
      T(test_label_map_shared),
      T(test_missing_file),
      T(test_bad_inputs),
      T(test_garbage_quoted),
      T(test_alloc_failure),
      T(test_dna),
      T(test_satimage),
      T(test_gzip_cut_or_trailerless),
      T(test_synth_too_large),
      T(test_fast_lines_as_general),
  };
  return cmocka_run_group_tests_name("libsvm", tests, NULL, NULL);
}
