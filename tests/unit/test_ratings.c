#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "strata/core.h"
#include "strata/apps/ratings.h"

#include "quoted.h"
#include "tmpfiles.h"


static void assert_rating(const strata_ratings *rs, size_t k, uint32_t u, uint32_t i, double v) {
  assert_true(k < rs->n);
  assert_int_equal(rs->r[k].user, u);
  assert_int_equal(rs->r[k].item, i);
  assert_float_equal(rs->r[k].value, v, 1e-6);
}

static void assert_ids(const strata_idmap *m, const int64_t *ids, uint32_t n) {
  assert_int_equal(strata_idmap_size(m), n);
  for (uint32_t k = 0; k < n; k++) {
    assert_int_equal(strata_idmap_id(m, k), ids[k]);
    assert_int_equal(strata_idmap_find(m, ids[k]), k);
  }
}

/* ---- formats, push, close --------------------------------------------- */

static void test_format_names(void **state) {
  fixture *fx = *state;
  static const char *names[] = {"auto", "tsv", "dat", "csv", "libmf", "mm"};
  for (int k = 0; k < 6; k++) {
    strata_format f = STRATA_FMT_AUTO;
    assert_int_equal(strata_format_parse(names[k], &f), 0);
    assert_int_equal(f, k);
    assert_string_equal(strata_format_name(f), names[k]);
  }
  strata_format f = STRATA_FMT_TSV;
  assert_int_equal(strata_format_parse("xml", &f), STRATA_EUSAGE);
  assert_non_null(strstr(strata_err_msg(), "'xml'"));
  assert_int_equal(f, STRATA_FMT_TSV);
  assert_live(fx);
}

static void test_push_close(void **state) {
  fixture *fx = *state;
  strata_ratings rs = {0};
  strata_ratings_close(&rs);
  for (uint32_t k = 0; k < 5000; k++)
    assert_int_equal(strata_ratings_push(&rs, k, k * 2, (float)k), 0);
  assert_int_equal(rs.n, 5000);
  assert_true(rs.cap >= rs.n);
  assert_rating(&rs, 4321, 4321, 8642, 4321.0);
  strata_ratings_close(&rs);
  assert_null(rs.r);
  assert_int_equal(rs.n, 0);
  assert_int_equal(rs.cap, 0);
  assert_live(fx);
}

/* ---- good input, one test per format ----------------------------------- */

static void test_tsv_good(void **state) {
  fixture *fx = *state;
  const char *path = write_tmp(fx,
                               "196\t242\t3\t881250949\n"
                               "\n"
                               "186\t302\t3\t891717742\n"
                               "# a comment line\n"
                               "  \t# an indented one\n"
                               "196\t377\t1\t878887116\n"
                               "   \t \n"
                               "22\t242\t4.5"); /* no final newline */
  strata_ratings rs = {0};
  assert_int_equal(strata_ratings_read(path, STRATA_FMT_TSV, NULL, NULL, &rs), 0);
  assert_int_equal(rs.n, 4);
  assert_int_equal(rs.n_users, 3);
  assert_int_equal(rs.n_items, 3);
  assert_ids(rs.users, (const int64_t[]){196, 186, 22}, 3);
  assert_ids(rs.items, (const int64_t[]){242, 302, 377}, 3);
  assert_rating(&rs, 0, 0, 0, 3);
  assert_rating(&rs, 1, 1, 1, 3);
  assert_rating(&rs, 2, 0, 2, 1);
  assert_rating(&rs, 3, 2, 0, 4.5);
  strata_ratings_close(&rs);
  assert_null(rs.users);
  assert_live(fx);
}

static void test_dat_good(void **state) {
  fixture *fx = *state;
  const char *path = write_tmp(fx,
                               "1::1193::5::978300760\n"
                               "1::661::3::978302109\r\n"
                               "\n"
                               "2::1193::4\n"
                               "3::914::3.5");
  strata_ratings rs = {0};
  assert_int_equal(strata_ratings_read(path, STRATA_FMT_DAT, NULL, NULL, &rs), 0);
  assert_int_equal(rs.n, 4);
  assert_ids(rs.users, (const int64_t[]){1, 2, 3}, 3);
  assert_ids(rs.items, (const int64_t[]){1193, 661, 914}, 3);
  assert_rating(&rs, 0, 0, 0, 5);
  assert_rating(&rs, 1, 0, 1, 3);
  assert_rating(&rs, 2, 1, 0, 4);
  assert_rating(&rs, 3, 2, 2, 3.5);
  strata_ratings_close(&rs);
  assert_live(fx);
}

static void test_csv_good(void **state) {
  fixture *fx = *state;
  const char *path = write_tmp(fx,
                               "userId,movieId,rating,timestamp\r\n"
                               "1,1,4.0,964982703\r\n"
                               "1,3,4.5,964981247\r\n"
                               "\r\n"
                               "6, 1 ,0.5,1\r\n"
                               "10,50,5"); /* 3 fields, no newline */
  strata_ratings rs = {0};
  assert_int_equal(strata_ratings_read(path, STRATA_FMT_CSV, NULL, NULL, &rs), 0);
  assert_int_equal(rs.n, 4);
  assert_ids(rs.users, (const int64_t[]){1, 6, 10}, 3);
  assert_ids(rs.items, (const int64_t[]){1, 3, 50}, 3);
  assert_rating(&rs, 0, 0, 0, 4.0);
  assert_rating(&rs, 1, 0, 1, 4.5);
  assert_rating(&rs, 2, 1, 0, 0.5);
  assert_rating(&rs, 3, 2, 2, 5);
  strata_ratings_close(&rs);
  assert_live(fx);
}

static void test_csv_numeric_first_line(void **state) {
  fixture *fx = *state;
  const char *path = write_tmp(fx, "7,8,3.5\n9,8,2\n");
  strata_ratings rs = {0};
  assert_int_equal(strata_ratings_read(path, STRATA_FMT_CSV, NULL, NULL, &rs), 0);
  assert_int_equal(rs.n, 2);
  assert_ids(rs.users, (const int64_t[]){7, 9}, 2);
  assert_rating(&rs, 0, 0, 0, 3.5);
  assert_rating(&rs, 1, 1, 0, 2);
  strata_ratings_close(&rs);
  assert_live(fx);
}

static void test_libmf_good(void **state) {
  fixture *fx = *state;
  const char *path = write_tmp(fx,
                               "0 0 1.5\n"
                               "0  1   -2.25 \n"
                               "  3\t0 4e-1\n"
                               "# comment\n"
                               "+5 1 .5 123\n"
                               "9223372036854775807 1 0.1234567890123456789");
  strata_ratings rs = {0};
  assert_int_equal(strata_ratings_read(path, STRATA_FMT_LIBMF, NULL, NULL, &rs), 0);
  assert_int_equal(rs.n, 5);
  assert_ids(rs.users, (const int64_t[]){0, 3, 5, INT64_MAX}, 4);
  assert_ids(rs.items, (const int64_t[]){0, 1}, 2);
  assert_rating(&rs, 0, 0, 0, 1.5);
  assert_rating(&rs, 1, 0, 1, -2.25);
  assert_rating(&rs, 2, 1, 0, 0.4);
  assert_rating(&rs, 3, 2, 1, 0.5);
  assert_rating(&rs, 4, 3, 1, 0.1234567890123456789);
  strata_ratings_close(&rs);
  assert_live(fx);
}

static void test_mm_good(void **state) {
  fixture *fx = *state;
  const char *real = write_tmp(fx,
                               "%%MatrixMarket matrix coordinate real general\n"
                               "% a comment\n"
                               "%\n"
                               "\n"
                               "3 4 3\n"
                               "1 1 5.0\n"
                               "3 4 2.5\r\n"
                               "% comments may come between entries\n"
                               "2 1 1");
  strata_ratings rs = {0};
  assert_int_equal(strata_ratings_read(real, STRATA_FMT_MM, NULL, NULL, &rs), 0);
  assert_int_equal(rs.n, 3);
  /* Rows and columns are ids like any other: remapped in order of appearance. */
  assert_ids(rs.users, (const int64_t[]){1, 3, 2}, 3);
  assert_ids(rs.items, (const int64_t[]){1, 4}, 2);
  assert_rating(&rs, 0, 0, 0, 5);
  assert_rating(&rs, 1, 1, 1, 2.5);
  assert_rating(&rs, 2, 2, 0, 1);
  strata_ratings_close(&rs);

  const char *integer = write_tmp(fx,
                                  "%%MatrixMarket MATRIX Coordinate INTEGER General\n"
                                  "2 2 2\n"
                                  "2 2 4\n"
                                  "1 2 -1\n");
  assert_int_equal(strata_ratings_read(integer, STRATA_FMT_MM, NULL, NULL, &rs), 0);
  assert_int_equal(rs.n, 2);
  assert_rating(&rs, 0, 0, 0, 4);
  assert_rating(&rs, 1, 1, 0, -1);
  strata_ratings_close(&rs);
  assert_live(fx);
}

/* ---- auto detection ---------------------------------------------------- */

static void test_auto_detect(void **state) {
  fixture *fx = *state;
  static const struct {
    strata_format fmt;
    const char *text;
    size_t n;
  } cases[] = {
      {STRATA_FMT_TSV, "# leading comment\n\n1\t2\t3\t100\n4\t2\t5\n", 2},
      {STRATA_FMT_DAT, "1::2::3::100\n4::2::5\n", 2},
      {STRATA_FMT_CSV, "\nuser,item,rating\r\n1,2,3\r\n4,2,5\r\n", 2},
      {STRATA_FMT_CSV, "1,2,3\n4,2,5\n", 2},
      {STRATA_FMT_LIBMF, "1 2 3\n4 2 5\n5 5 5\n", 3},
      {STRATA_FMT_MM, "%%MatrixMarket matrix coordinate real general\n% c\n4 2 2\n1 2 3\n4 2 5\n",
       2},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    fx->n_paths = 0;
    const char *path = write_tmp(fx, cases[k].text);
    strata_ratings a = {0}, b = {0};
    assert_int_equal(strata_ratings_read(path, STRATA_FMT_AUTO, NULL, NULL, &a), 0);
    assert_int_equal(strata_ratings_read(path, cases[k].fmt, NULL, NULL, &b), 0);
    assert_int_equal(a.n, cases[k].n);
    assert_int_equal(a.n, b.n);
    assert_int_equal(a.n_users, b.n_users);
    assert_int_equal(a.n_items, b.n_items);
    assert_memory_equal(a.r, b.r, a.n * sizeof *a.r);
    assert_rating(&a, 1, 1, 0, 5);
    strata_ratings_close(&a);
    strata_ratings_close(&b);
    unlink(path);
  }
  fx->n_paths = 0;

  /* A file in one format read as another fails, so agreement above means
   * detection picked the right parser. */
  const char *dat = write_tmp(fx, "1::2::3\n");
  strata_ratings rs = {0};
  assert_int_equal(strata_ratings_read(dat, STRATA_FMT_LIBMF, NULL, NULL, &rs), STRATA_EPARSE);
  assert_live(fx);
}

/* ---- test file read against training maps ------------------------------ */

static void test_test_file_maps(void **state) {
  fixture *fx = *state;
  const char *train_path = write_tmp(fx, "1 10 5\n2 20 4\n3 10 3\n");
  const char *test_path = write_tmp(fx, "2\t10\t1\n9\t20\t2\n1\t99\t3\n5\t77\t4\n");
  strata_ratings train = {0}, test = {0};
  assert_int_equal(strata_ratings_read(train_path, STRATA_FMT_AUTO, NULL, NULL, &train), 0);
  assert_int_equal(strata_ratings_read(test_path, STRATA_FMT_AUTO, train.users, train.items, &test),
                   0);
  assert_int_equal(test.n, 4);
  assert_null(test.users);
  assert_null(test.items);
  assert_int_equal(test.n_users, 3);
  assert_int_equal(test.n_items, 2);
  assert_rating(&test, 0, 1, 0, 1);
  assert_rating(&test, 1, STRATA_ID_UNSEEN, 1, 2);
  assert_rating(&test, 2, 0, STRATA_ID_UNSEEN, 3);
  assert_rating(&test, 3, STRATA_ID_UNSEEN, STRATA_ID_UNSEEN, 4);
  /* Lookup only: the training maps did not grow. */
  assert_int_equal(strata_idmap_size(train.users), 3);
  assert_int_equal(strata_idmap_size(train.items), 2);
  strata_ratings_close(&test);
  strata_ratings_close(&train);
  assert_live(fx);
}

/* Block-diagonal copies: indices shift by the bounds per copy, unseen
 * indices stay unseen, the maps grow with ids shifted past the largest. */
static void test_duplicate(void **state) {
  fixture *fx = *state;
  const char *train_path = write_tmp(fx, "1 10 5\n7 20 4\n3 10 3\n");
  const char *test_path = write_tmp(fx, "7\t10\t1\n9\t20\t2\n");
  strata_ratings train = {0}, test = {0};
  assert_int_equal(strata_ratings_read(train_path, STRATA_FMT_AUTO, NULL, NULL, &train), 0);
  assert_int_equal(strata_ratings_read(test_path, STRATA_FMT_AUTO, train.users, train.items, &test),
                   0);
  uint32_t U = train.n_users, I = train.n_items;
  assert_int_equal(strata_ratings_duplicate(&test, 3, U, I), 0);
  assert_int_equal(strata_ratings_duplicate(&train, 3, U, I), 0);
  assert_int_equal(train.n, 9);
  assert_int_equal(train.n_users, 9);
  assert_int_equal(train.n_items, 6);
  for (int c = 0; c < 3; c++) {
    assert_rating(&train, 3 * c + 0, 0 + 3 * c, 0 + 2 * c, 5);
    assert_rating(&train, 3 * c + 1, 1 + 3 * c, 1 + 2 * c, 4);
    assert_rating(&train, 3 * c + 2, 2 + 3 * c, 0 + 2 * c, 3);
    assert_rating(&test, 2 * c + 0, 1 + 3 * c, 0 + 2 * c, 1);
    assert_rating(&test, 2 * c + 1, STRATA_ID_UNSEEN, 1 + 2 * c, 2);
  }
  assert_int_equal(test.n_users, 9);
  /* Ids of copy c: x + c * (1 + largest id): users 1 7 3 -> 9 15 11 -> 17 23 19. */
  assert_int_equal(strata_idmap_size(train.users), 9);
  assert_int_equal(strata_idmap_id(train.users, 3), 9);
  assert_int_equal(strata_idmap_id(train.users, 7), 23);
  assert_int_equal(strata_idmap_find(train.items, 10 + 2 * 21), 4);
  /* One copy changes nothing; fewer is an error. */
  assert_int_equal(strata_ratings_duplicate(&train, 1, 9, 6), 0);
  assert_int_equal(train.n, 9);
  assert_int_equal(strata_ratings_duplicate(&train, 0, 9, 6), STRATA_EINVAL);
  assert_int_equal(strata_ratings_duplicate(&train, 2, 0x80000000u, 6), STRATA_ERANGE);
  strata_ratings_close(&test);
  strata_ratings_close(&train);
  assert_live(fx);
}

/* ---- bad input ----------------------------------------------------------- */

static void expect_fail(const char *path, strata_format fmt, int code, size_t line,
                        const char *needle) {
  strata_ratings rs = {0};
  int rc = strata_ratings_read(path, fmt, NULL, NULL, &rs);
  const char *msg = strata_err_msg();
  if (rc != code)
    fail_msg("%s as %s: got %s (%s), want %s", path, strata_format_name(fmt), strata_err_name(rc),
             msg, strata_err_name(code));
  assert_msg_at(msg, path, line, needle);
  assert_null(rs.r);
  assert_null(rs.users);
  assert_null(rs.items);
  assert_int_equal(rs.n, 0);
}

static void test_missing_file(void **state) {
  fixture *fx = *state;
  char path[64];
  strcpy(path, "/tmp/strata_test_missing_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  unlink(path);
  expect_fail(path, STRATA_FMT_AUTO, STRATA_ENOENT, 0, "cannot open: No such file");
  expect_fail("/tmp", STRATA_FMT_TSV, STRATA_ENOENT, 0, "cannot open");
  assert_live(fx);
}

static void test_bad_inputs(void **state) {
  fixture *fx = *state;
  static const char mm_head[] = "%%MatrixMarket matrix coordinate real general\n";
  static const struct {
    strata_format fmt;
    const char *text;
    int code;
    size_t line; /* 0: a whole-file message "FILE: ..." */
    const char *needle;
  } cases[] = {
      {STRATA_FMT_AUTO, "", STRATA_EEMPTY, 0, "no ratings"},
      {STRATA_FMT_LIBMF, "", STRATA_EEMPTY, 0, "no ratings"},
      {STRATA_FMT_TSV, "\n\n  \t\n\r\n", STRATA_EEMPTY, 0, "no ratings"},
      {STRATA_FMT_TSV, "# only a comment\n", STRATA_EEMPTY, 0, "no ratings"},
      {STRATA_FMT_CSV, "userId,movieId,rating,timestamp\r\n", STRATA_EEMPTY, 0, "no ratings"},
      {STRATA_FMT_AUTO, "userId,movieId,rating,timestamp\n\n", STRATA_EEMPTY, 0, "no ratings"},
      {STRATA_FMT_TSV, "1\t2\t3\n4\t5\t6\n7\t8\n", STRATA_EPARSE, 3, "expected 3 fields"},
      {STRATA_FMT_AUTO, "1\t2\t3\n\n7\t8\n", STRATA_EPARSE, 3, "got 2"},
      {STRATA_FMT_LIBMF, "1 2 3 4 5\n", STRATA_EPARSE, 1, "got 5"},
      {STRATA_FMT_LIBMF, "1 2 nan\n", STRATA_ERANGE, 1, "nan"},
      {STRATA_FMT_LIBMF, "1 2 3\n1 2 NaN\n", STRATA_ERANGE, 2, "rating"},
      {STRATA_FMT_LIBMF, "1 2 inf\n", STRATA_ERANGE, 1, "inf"},
      {STRATA_FMT_LIBMF, "1 2 -Infinity\n", STRATA_ERANGE, 1, NULL},
      {STRATA_FMT_LIBMF, "1 2 1e39\n", STRATA_ERANGE, 1, NULL},
      {STRATA_FMT_LIBMF, "1 2 1e400\n", STRATA_ERANGE, 1, NULL},
      {STRATA_FMT_LIBMF, "1 2 3\n-3 2 3\n", STRATA_ERANGE, 2, "negative user id -3"},
      {STRATA_FMT_TSV, "1\t-2\t3\n", STRATA_ERANGE, 1, "negative item id -2"},
      {STRATA_FMT_LIBMF, "99999999999999999999 2 3\n", STRATA_ERANGE, 1, "user id"},
      /* Ids are int64_t: 2^63 and up, 2^64 - 1 included, are refused with
       * the limit; 2^63 - 1 itself loads (test_largest_id). */
      {STRATA_FMT_LIBMF, "18446744073709551615 2 3\n", STRATA_ERANGE, 1,
       "user id '18446744073709551615' is above the largest supported, 9223372036854775807 "
       "(2^63 - 1)"},
      {STRATA_FMT_TSV, "1\t9223372036854775808\t3\n", STRATA_ERANGE, 1,
       "item id '9223372036854775808' is above the largest supported"},
      {STRATA_FMT_LIBMF, "-99999999999999999999 2 3\n", STRATA_ERANGE, 1,
       "user id '-99999999999999999999' is below the smallest supported, "
       "-9223372036854775808 (-2^63)"},
      {STRATA_FMT_LIBMF, "1 2 3\n1 x 3\n", STRATA_EPARSE, 2, "item id 'x'"},
      {STRATA_FMT_LIBMF, "1 2x 3\n", STRATA_EPARSE, 1, "'2x'"},
      {STRATA_FMT_LIBMF, "1 2 3.5abc\n", STRATA_EPARSE, 1, "'3.5abc'"},
      {STRATA_FMT_LIBMF, "1.5 2 3\n", STRATA_EPARSE, 1, "user id"},
      {STRATA_FMT_LIBMF, "1 2 4.0.0\n", STRATA_EPARSE, 1, NULL},
      {STRATA_FMT_LIBMF, "1 2 -\n", STRATA_EPARSE, 1, NULL},
      {STRATA_FMT_LIBMF, "1 2 3\n1 2 3\rx\n", STRATA_EPARSE, 2, NULL},
      {STRATA_FMT_DAT, "1::2\n", STRATA_EPARSE, 1, "got 2"},
      {STRATA_FMT_DAT, "1::2::3::4::5\n", STRATA_EPARSE, 1, "got 5"},
      {STRATA_FMT_DAT, "1::2::3\n1::2::x\n", STRATA_EPARSE, 2, "rating 'x'"},
      {STRATA_FMT_DAT, "1::2:3\n", STRATA_EPARSE, 1, NULL},
      {STRATA_FMT_CSV, "u,i,r\n1,2\n", STRATA_EPARSE, 2, "got 2"},
      {STRATA_FMT_CSV, "u,i,r\n1,,3\n", STRATA_EPARSE, 2, "item id"},
      {STRATA_FMT_CSV, "u,i,r\r\n1,2,3\r\n1,2,3 x\r\n", STRATA_EPARSE, 3, NULL},
      {STRATA_FMT_CSV, "u,i,r\r\n-1,2,3\r\n", STRATA_ERANGE, 2, "negative user id -1"},
      {STRATA_FMT_DAT, "# not a comment in dat\n", STRATA_EPARSE, 1, NULL},
      /* A numeric first line is data, so its errors are reported, not skipped. */
      {STRATA_FMT_CSV, "1.5,2,3\n1,2,3\n", STRATA_EPARSE, 1, "user id '1.5'"},
      {STRATA_FMT_CSV, "-3,2,3\n", STRATA_ERANGE, 1, "negative user id -3"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    fx->n_paths = 0;
    const char *path = write_tmp(fx, cases[k].text);
    expect_fail(path, cases[k].fmt, cases[k].code, cases[k].line, cases[k].needle);
    unlink(path);
    assert_live(fx);
  }

  static const struct {
    strata_format fmt;
    const char *head, *body;
    int code;
    size_t line;
    const char *needle;
  } mm[] = {
      {STRATA_FMT_MM, mm_head, "2 2 2\n1 1 1\n3 1 2\n", STRATA_ERANGE, 4, "row index 3"},
      {STRATA_FMT_AUTO, mm_head, "2 2 2\n1 0 1\n", STRATA_ERANGE, 3, "column index 0"},
      {STRATA_FMT_MM, mm_head, "2 2 1\n-1 1 1\n", STRATA_ERANGE, 3, "row index -1"},
      {STRATA_FMT_MM, mm_head, "2 2 3\n1 1 1\n2 2 2\n", STRATA_EPARSE, 0, "declares 3"},
      {STRATA_FMT_AUTO, mm_head, "2 2 1\n1 1 1\n2 2 2\n", STRATA_EPARSE, 4, "more entries"},
      {STRATA_FMT_MM, mm_head, "2 2 0\n", STRATA_EEMPTY, 0, "no ratings"},
      {STRATA_FMT_MM, mm_head, "% no size line\n", STRATA_EEMPTY, 0, "no ratings"},
      {STRATA_FMT_MM, mm_head, "2 2\n", STRATA_EPARSE, 2, "size line"},
      {STRATA_FMT_MM, mm_head, "2 2 1\n1 1\n", STRATA_EPARSE, 3, "got 2"},
      {STRATA_FMT_MM, mm_head, "2 2 1\n1 1 nan\n", STRATA_ERANGE, 3, NULL},
      {STRATA_FMT_MM, "%%MatrixMarket matrix coordinate pattern general\n", "2 2 1\n1 1\n",
       STRATA_EPARSE, 1, "pattern"},
      {STRATA_FMT_AUTO, "%%MatrixMarket matrix array real general\n", "2 2\n1\n2\n3\n4\n",
       STRATA_EPARSE, 1, "array"},
      {STRATA_FMT_MM, "%%MatrixMarket matrix coordinate real symmetric\n", "2 2 1\n1 1 1\n",
       STRATA_EPARSE, 1, NULL},
      {STRATA_FMT_MM, "", "1 1 1\n", STRATA_EPARSE, 1, "MatrixMarket"},
  };
  for (size_t k = 0; k < sizeof mm / sizeof mm[0]; k++) {
    char text[256];
    snprintf(text, sizeof text, "%s%s", mm[k].head, mm[k].body);
    fx->n_paths = 0;
    const char *path = write_tmp(fx, text);
    expect_fail(path, mm[k].fmt, mm[k].code, mm[k].line, mm[k].needle);
    unlink(path);
    assert_live(fx);
  }
  fx->n_paths = 0;
}

static void test_largest_id(void **state) {
  fixture *fx = *state;
  const char *path = write_tmp(fx, "9223372036854775807\t0\t3\n");
  strata_ratings rs = {0};
  assert_int_equal(strata_ratings_read(path, STRATA_FMT_AUTO, NULL, NULL, &rs), 0);
  assert_ids(rs.users, (const int64_t[]){INT64_MAX}, 1);
  assert_ids(rs.items, (const int64_t[]){0}, 1);
  strata_ratings_close(&rs);
  assert_live(fx);
}

/* A line of control characters and a terminal escape sequence, in every
 * format, reaches the message escaped. */
static void test_garbage_quoted(void **state) {
  fixture *fx = *state;
  static const struct {
    strata_format fmt;
    const char *text;
    int code;
    size_t line;
    const char *needle;
  } cases[] = {
      {STRATA_FMT_TSV, "1\t2\t3\n" GARBAGE "\t2\t3\n", STRATA_EPARSE, 2,
       "user id '" GARBAGE_QUOTED "' is not an integer"},
      {STRATA_FMT_AUTO, GARBAGE "\t2\t3\n", STRATA_EPARSE, 1, "user id '" GARBAGE_QUOTED "'"},
      {STRATA_FMT_DAT, "1::2::3\n1::" GARBAGE "::3\n", STRATA_EPARSE, 2,
       "item id '" GARBAGE_QUOTED "' is not an integer"},
      {STRATA_FMT_CSV, "u,i,r\n1,2,3\n1,2," GARBAGE "\n", STRATA_EPARSE, 3,
       "rating '" GARBAGE_QUOTED "' is not a number"},
      {STRATA_FMT_LIBMF, "1 2 3\n1 2 " GARBAGE "\n", STRATA_EPARSE, 2,
       "rating '" GARBAGE_QUOTED "' is not a number"},
      {STRATA_FMT_MM, "%%MatrixMarket matrix coordinate real general\n2 2 1\n" GARBAGE " 1 1\n",
       STRATA_EPARSE, 3, "row index '" GARBAGE_QUOTED "' is not an integer"},
      {STRATA_FMT_MM, "%%MatrixMarket matrix coordinate real general\n" GARBAGE " 2 1\n",
       STRATA_EPARSE, 2, "row count '" GARBAGE_QUOTED "' is not an integer"},
      {STRATA_FMT_AUTO, "%%MatrixMarket matrix " GARBAGE " real general\n2 2 1\n1 1 1\n",
       STRATA_EPARSE, 1, "unsupported Matrix Market header: '" GARBAGE_QUOTED "'"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    fx->n_paths = 0;
    const char *path = write_tmp(fx, cases[k].text);
    expect_fail(path, cases[k].fmt, cases[k].code, cases[k].line, cases[k].needle);
    assert_quoted_msg(strata_err_msg(), GARBAGE_QUOTED);
    unlink(path);
    assert_live(fx);
  }

  /* A long field shows its first STRATA_QUOTE_MAX bytes, then "...". */
  char text[1100], want[4 * STRATA_QUOTE_MAX + 8];
  int n = snprintf(text, sizeof text, "1 ");
  memset(text + n, 0x1b, 1000);
  strcpy(text + n + 1000, " 3\n");
  for (int i = 0; i < STRATA_QUOTE_MAX; i++) memcpy(want + 4 * i, "\\x1b", 4);
  strcpy(want + 4 * STRATA_QUOTE_MAX, "...'");
  fx->n_paths = 0;
  const char *path = write_tmp(fx, text);
  expect_fail(path, STRATA_FMT_LIBMF, STRATA_EPARSE, 1, "item id '\\x1b");
  assert_quoted_msg(strata_err_msg(), want);
  assert_true(strlen(strata_err_msg()) < strlen(path) + 200);
  unlink(path);
  fx->n_paths = 0;
  assert_live(fx);

  /* The format's name, as a flag's value, is quoted too. */
  strata_format f = STRATA_FMT_TSV;
  assert_int_equal(strata_format_parse(GARBAGE, &f), STRATA_EUSAGE);
  assert_quoted_msg(strata_err_msg(), "'" GARBAGE_QUOTED "'");
}

/* ---- id map ------------------------------------------------------------- */

static int64_t sparse_id(uint32_t k) { return (int64_t)(strata_mix64(k) >> 2); }

static void test_idmap_growth(void **state) {
  fixture *fx = *state;
  enum { N = 150000 };
  strata_idmap *m = strata_idmap_create();
  assert_non_null(m);
  assert_int_equal(strata_idmap_size(m), 0);
  assert_int_equal(strata_idmap_find(m, 42), STRATA_ID_UNSEEN);
  for (uint32_t k = 0; k < N; k++) {
    uint32_t idx = 0;
    assert_int_equal(strata_idmap_insert(m, sparse_id(k), &idx), 0);
    assert_int_equal(idx, k);
    /* Re-inserting an earlier id returns its index and adds nothing. */
    assert_int_equal(strata_idmap_insert(m, sparse_id(k / 2), &idx), 0);
    assert_int_equal(idx, k / 2);
  }
  assert_int_equal(strata_idmap_size(m), N);
  for (uint32_t k = 0; k < N; k++) {
    assert_int_equal(strata_idmap_find(m, sparse_id(k)), k);
    assert_int_equal(strata_idmap_id(m, k), sparse_id(k));
  }
  for (uint32_t k = N; k < N + 1000; k++)
    assert_int_equal(strata_idmap_find(m, sparse_id(k)), STRATA_ID_UNSEEN);

  /* Dense consecutive ids, the common case in files. */
  strata_idmap *d = strata_idmap_create();
  assert_non_null(d);
  for (int64_t id = 0; id < N; id++) {
    uint32_t idx;
    assert_int_equal(strata_idmap_insert(d, id * 1024, &idx), 0);
    assert_int_equal(idx, (uint32_t)id);
  }
  assert_int_equal(strata_idmap_find(d, 1024 * 777), 777);
  assert_int_equal(strata_idmap_find(d, 1024 * 777 + 1), STRATA_ID_UNSEEN);
  strata_idmap_free(d);
  strata_idmap_free(m);
  strata_idmap_free(NULL);
  assert_live(fx);
}

/* ---- big files: lines straddle read chunks, one line outgrows the buffer */

static void test_large_file(void **state) {
  fixture *fx = *state;
  enum { LINES = 200000, USERS = 50000 };
  size_t cap = (size_t)LINES * 32 + (3u << 20) + 64, len = 0;
  char *text = malloc(cap);
  assert_non_null(text);
  /* A 3 MiB comment line, longer than any read chunk. */
  text[len++] = '#';
  memset(text + len, 'x', 3u << 20);
  len += 3u << 20;
  text[len++] = '\n';
  for (uint32_t k = 0; k < LINES; k++)
    len += (size_t)snprintf(text + len, cap - len, "%u %u %u.%u\n", (k * 7919u) % USERS, k % 1000,
                            k % 5, k % 10);
  const char *path = write_tmp_len(fx, text, len);
  free(text);

  strata_ratings rs = {0};
  assert_int_equal(strata_ratings_read(path, STRATA_FMT_LIBMF, NULL, NULL, &rs), 0);
  assert_int_equal(rs.n, LINES);
  assert_int_equal(rs.n_users, USERS);
  assert_int_equal(rs.n_items, 1000);
  for (uint32_t k = 0; k < LINES; k++) {
    assert_int_equal(strata_idmap_id(rs.users, rs.r[k].user), (k * 7919u) % USERS);
    assert_int_equal(strata_idmap_id(rs.items, rs.r[k].item), k % 1000);
    assert_float_equal(rs.r[k].value, (k % 5) + 0.1 * (k % 10), 1e-6);
  }
  strata_ratings_close(&rs);
  assert_live(fx);
}

/* ---- allocation failure at every step leaves nothing behind ------------- */

static void test_alloc_failure(void **state) {
  fixture *fx = *state;
  char text[64 * 3000];
  size_t len = 0;
  for (int k = 0; k < 3000; k++)
    len += (size_t)snprintf(text + len, sizeof text - len, "%d %d 3\n", k, k % 700);
  const char *path = write_tmp_len(fx, text, len);
  int failures = 0;
  for (long n = 1;; n++) {
    strata_ratings rs = {0};
    strata_alloc_fail_after(n);
    int rc = strata_ratings_read(path, STRATA_FMT_AUTO, NULL, NULL, &rs);
    strata_alloc_fail_after(0);
    if (rc == 0) {
      assert_int_equal(rs.n, 3000);
      strata_ratings_close(&rs);
      break;
    }
    assert_int_equal(rc, STRATA_ENOMEM);
    assert_non_null(strstr(strata_err_msg(), path));
    assert_null(rs.r);
    assert_live(fx);
    failures++;
    assert_true(n < 1000);
  }
  assert_true(failures > 5);
  assert_live(fx);
}

/* ---- split --------------------------------------------------------------- */

static void fill_serial(strata_ratings *rs, uint32_t n) {
  for (uint32_t k = 0; k < n; k++)
    assert_int_equal(strata_ratings_push(rs, k % 97, k % 13, (float)k), 0);
  rs->n_users = 97;
  rs->n_items = 13;
}

static void test_split(void **state) {
  fixture *fx = *state;
  enum { N = 20000 };
  strata_ratings a = {0}, b = {0}, ta = {0}, tb = {0};
  fill_serial(&a, N);
  fill_serial(&b, N);
  assert_int_equal(strata_ratings_split(&a, 0.25, 42, &ta), 0);
  assert_int_equal(strata_ratings_split(&b, 0.25, 42, &tb), 0);
  /* Same seed, same split. */
  assert_int_equal(a.n, b.n);
  assert_int_equal(ta.n, tb.n);
  assert_memory_equal(a.r, b.r, a.n * sizeof *a.r);
  assert_memory_equal(ta.r, tb.r, ta.n * sizeof *ta.r);
  /* About a quarter: 5000 +- 6 sigma (sigma = 61). */
  assert_int_equal(a.n + ta.n, N);
  assert_in_range(ta.n, 5000 - 370, 5000 + 370);
  assert_int_equal(ta.n_users, 97);
  assert_int_equal(ta.n_items, 13);
  assert_null(ta.users);
  /* Both halves keep file order and together hold every rating once. */
  size_t i = 0, j = 0;
  for (uint32_t k = 0; k < N; k++) {
    const strata_rating *r = (i < a.n && a.r[i].value == (float)k)     ? &a.r[i++]
                             : (j < ta.n && ta.r[j].value == (float)k) ? &ta.r[j++]
                                                                       : NULL;
    assert_non_null(r);
    assert_int_equal(r->user, k % 97);
    assert_int_equal(r->item, k % 13);
  }
  strata_ratings_close(&b);
  strata_ratings_close(&tb);

  /* Another seed, another split. */
  fill_serial(&b, N);
  assert_int_equal(strata_ratings_split(&b, 0.25, 43, &tb), 0);
  assert_true(tb.n != ta.n || memcmp(tb.r, ta.r, ta.n * sizeof *ta.r) != 0);
  strata_ratings_close(&b);
  strata_ratings_close(&tb);

  /* Bad fractions are usage errors and leave train alone. */
  static const double bad[] = {0.0, 1.0, -0.1, 1.5};
  size_t before = a.n;
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    strata_ratings t = {0};
    assert_int_equal(strata_ratings_split(&a, bad[k], 1, &t), STRATA_EUSAGE);
    assert_int_equal(a.n, before);
    assert_null(t.r);
  }
  strata_ratings t = {0};
  assert_int_equal(strata_ratings_split(&a, NAN, 1, &t), STRATA_EUSAGE);
  assert_non_null(strstr(strata_err_msg(), "fraction"));
  strata_ratings_close(&a);
  strata_ratings_close(&ta);
  assert_live(fx);
}

/* ---- real data (skipped when the shared data folder is absent) ---------- */

static void test_movielens_100k(void **state) {
  fixture *fx = *state;
  const char *path = STRATA_SHARED_DATA "/movielens-100k/u.data";
  if (!have_file(path)) skip();
  strata_ratings rs = {0};
  assert_int_equal(strata_ratings_read(path, STRATA_FMT_AUTO, NULL, NULL, &rs), 0);
  assert_int_equal(rs.n, 100000);
  assert_int_equal(rs.n_users, 943);
  assert_int_equal(rs.n_items, 1682);
  assert_rating(&rs, 0, 0, 0, 3); /* 196 242 3 */
  assert_int_equal(strata_idmap_id(rs.users, 0), 196);
  strata_ratings_close(&rs);

  /* GroupLens' own split read the way a test file is. */
  const char *base = STRATA_SHARED_DATA "/movielens-100k/ua.base";
  const char *test = STRATA_SHARED_DATA "/movielens-100k/ua.test";
  if (have_file(base) && have_file(test)) {
    strata_ratings tr = {0}, te = {0};
    assert_int_equal(strata_ratings_read(base, STRATA_FMT_TSV, NULL, NULL, &tr), 0);
    assert_int_equal(strata_ratings_read(test, STRATA_FMT_TSV, tr.users, tr.items, &te), 0);
    assert_int_equal(tr.n, 90570);
    assert_int_equal(te.n, 9430);
    assert_int_equal(te.n_users, tr.n_users);
    for (size_t k = 0; k < te.n; k++) assert_true(te.r[k].user < te.n_users); /* all users seen */
    strata_ratings_close(&te);
    strata_ratings_close(&tr);
  }
  assert_live(fx);
}

static void test_movielens_latest_small(void **state) {
  fixture *fx = *state;
  const char *path = STRATA_SHARED_DATA "/movielens-latest-small/ratings.csv";
  if (!have_file(path)) skip();
  strata_ratings rs = {0};
  assert_int_equal(strata_ratings_read(path, STRATA_FMT_AUTO, NULL, NULL, &rs), 0);
  assert_int_equal(rs.n, 100836);
  assert_int_equal(rs.n_users, 610);
  assert_rating(&rs, 0, 0, 0, 4.0);
  for (size_t k = 0; k < rs.n; k++) assert_true(rs.r[k].value >= 0.5f && rs.r[k].value <= 5.0f);
  strata_ratings_close(&rs);
  assert_live(fx);
}

/* Cut short or without its trailer, a gzip stream is refused naming the
 * file, never read as fewer ratings. */
static int read_tsv(const char *path, void *ctx) {
  (void)ctx;
  strata_ratings rs = {0};
  int rc = strata_ratings_read(path, STRATA_FMT_TSV, NULL, NULL, &rs);
  if (rc) assert_null(rs.r);
  strata_ratings_close(&rs);
  return rc;
}

static void test_gzip_cut_or_trailerless(void **state) {
  fixture *fx = *state;
  static char text[16384];
  size_t n = 0;
  for (int k = 0; k < 600; k++)
    n += (size_t)snprintf(text + n, sizeof text - n, "%d\t%d\t%d\n", 1 + k % 37, 1 + (k * 13) % 101,
                          1 + k % 5);
  assert_gzip_damage_refused(fx, text, read_tsv, NULL);
}

/* Lines the scanner of plain lines takes ("user item rating" and a
 * timestamp) and lines it leaves to the general reader (exponents, long
 * mantissas, 19-digit ids, comments, stray CRs) read as the general reader
 * alone reads them: every line again with a blank in front, which only it
 * takes. */
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
  for (int row = 0; row < 20000; row++) {
    char line[256];
    uint64_t kind = strata_rng_below(&rng, 30), u = strata_rng_below(&rng, 3000),
             i = strata_rng_below(&rng, 500);
    if (kind == 0) u += 1000000000000000000ull; /* 19 digits */
    const char *sep = kind == 1 ? "\t" : kind == 2 ? "  " : " ";
    char val[64];
    if (kind == 3)
      snprintf(val, sizeof val, "%de-1", (int)strata_rng_below(&rng, 50));
    else if (kind == 4)
      snprintf(val, sizeof val, "3.1234567890123456");
    else
      snprintf(val, sizeof val, "%.*f", (int)(kind % 4), strata_rng_uniform(&rng) * 5);
    const char *tail = kind == 5   ? " 881250949\n"
                       : kind == 6 ? "\r\n"
                       : kind == 7 ? "\t\n"
                       : kind == 8 ? " 88125\r\n"
                                   : "\n";
    if (kind == 9)
      snprintf(line, sizeof line, "# a comment\n");
    else
      snprintf(line, sizeof line, "%llu%s%llu%s%s%s", (unsigned long long)u, sep,
               (unsigned long long)i, sep, val, tail);
    for (int v = 0; v < 2; v++)
      n[v] += (size_t)snprintf(text[v] + n[v], sizeof text[v] - n[v], "%s%s", v ? " " : "", line);
  }
  strata_ratings rs[2];
  for (int v = 0; v < 2; v++)
    assert_int_equal(
        strata_ratings_read(write_tmp_len(fx, text[v], n[v]), STRATA_FMT_AUTO, NULL, NULL, &rs[v]),
        0);
  assert_int_equal(rs[0].n, rs[1].n);
  assert_memory_equal(rs[0].r, rs[1].r, rs[0].n * sizeof *rs[0].r);
  assert_int_equal(rs[0].n_users, rs[1].n_users);
  assert_int_equal(rs[0].n_items, rs[1].n_items);
  for (uint32_t k = 0; k < rs[0].n_users; k++)
    assert_true(strata_idmap_id(rs[0].users, k) == strata_idmap_id(rs[1].users, k));
  for (uint32_t k = 0; k < rs[0].n_items; k++)
    assert_true(strata_idmap_id(rs[0].items, k) == strata_idmap_id(rs[1].items, k));
  for (int v = 0; v < 2; v++) strata_ratings_close(&rs[v]);
  assert_live(fx);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_format_names),
      T(test_push_close),
      T(test_tsv_good),
      T(test_dat_good),
      T(test_csv_good),
      T(test_csv_numeric_first_line),
      T(test_libmf_good),
      T(test_mm_good),
      T(test_auto_detect),
      T(test_test_file_maps),
      T(test_missing_file),
      T(test_bad_inputs),
      T(test_idmap_growth),
      T(test_large_file),
      T(test_alloc_failure),
      T(test_split),
      T(test_movielens_100k),
      T(test_movielens_latest_small),
      T(test_duplicate),
      T(test_largest_id),
      T(test_garbage_quoted),
      T(test_gzip_cut_or_trailerless),
      T(test_fast_lines_as_general),
  };
  return cmocka_run_group_tests_name("ratings", tests, NULL, NULL);
}
