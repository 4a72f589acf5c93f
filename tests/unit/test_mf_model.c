/*
 * Unit tests for the exported MF model (apps/mf/model.c): a write and read
 * round trip, and the loader's refusals: a non-finite value anywhere (named
 * by file, row and column), bad or missing ids (quoted escaped), a
 * meta.json that does not describe a model.
 */
#define _GNU_SOURCE
#include <dirent.h>
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

#include "strata/core.h"
#include "strata/apps/mf.h"

#include "quoted.h"

static size_t live0;
static char dir[64];

static void remove_dir(void) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char p[512];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

static int setup(void **state) {
  (void)state;
  live0 = strata_alloc_live();
  strata_err_clear();
  snprintf(dir, sizeof dir, "/tmp/strata_test_mf_model.XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  strata_alloc_fail_after(0);
  strata_err_clear();
  remove_dir();
  assert_int_equal(strata_alloc_live(), live0);
  return 0;
}

/* ---- a small model ----------------------------------------------------- */

enum { K = 2, USERS = 2, ITEMS = 3 };

typedef struct {
  float W[USERS * K], H[ITEMS * K], bu[USERS], bi[ITEMS];
  int64_t uid[USERS], iid[ITEMS];
  strata_mf_model m;
} small_model;

static void small_init(small_model *s) {
  memset(s, 0, sizeof *s);
  for (int x = 0; x < USERS * K; x++) s->W[x] = 0.25f * (float)(x + 1);
  for (int x = 0; x < ITEMS * K; x++) s->H[x] = -0.5f * (float)(x + 1);
  s->bu[0] = 0.1f;
  s->bu[1] = -0.2f;
  for (int x = 0; x < ITEMS; x++) s->bi[x] = 0.05f * (float)x;
  s->uid[0] = 17;
  s->uid[1] = 1007;
  s->iid[0] = 5;
  s->iid[1] = 9;
  s->iid[2] = 12;
  s->m = (strata_mf_model){.k = K, .mu = 3.5f, .bias = 1, .n_users = USERS, .n_items = ITEMS,
                           .W = s->W, .H = s->H, .bu = s->bu, .bi = s->bi,
                           .user_ids = s->uid, .item_ids = s->iid};
}

static void write_small(const small_model *s) {
  int rc = strata_mf_model_write(dir, &s->m);
  if (rc) fail_msg("write: %s", strata_err_msg());
}

static void put_file(const char *name, const char *text) {
  char p[128];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
  assert_int_equal(fclose(f), 0);
}

/* Reading dir fails with code, the message starts with "DIR/" and holds
 * needle, and the model is left zeroed. */
static void expect_refused(int code, const char *needle) {
  strata_mf_model m;
  int rc = strata_mf_model_read(dir, &m);
  const char *msg = strata_err_msg();
  if (rc != code)
    fail_msg("got %s (%s), want %s", strata_err_name(rc), msg, strata_err_name(code));
  char where[80];
  snprintf(where, sizeof where, "%s/", dir);
  if (strncmp(msg, where, strlen(where)) != 0) fail_msg("message '%s' lacks '%s'", msg, where);
  if (!strstr(msg, needle)) fail_msg("message '%s' lacks '%s'", msg, needle);
  assert_null(strchr(msg, '\n'));
  assert_null(m.W);
  assert_null(m.user_ids);
  assert_int_equal(m.k, 0);
  assert_int_equal(strata_alloc_live(), live0);
}

/* ---- round trip -------------------------------------------------------- */

static void test_round_trip(void **state) {
  (void)state;
  small_model s;
  small_init(&s);
  write_small(&s);
  strata_mf_model m;
  int rc = strata_mf_model_read(dir, &m);
  if (rc) fail_msg("read: %s", strata_err_msg());
  assert_int_equal(m.k, K);
  assert_true(m.mu == 3.5f);
  assert_int_equal(m.bias, 1);
  assert_int_equal(m.n_users, USERS);
  assert_int_equal(m.n_items, ITEMS);
  assert_memory_equal(m.W, s.W, sizeof s.W);
  assert_memory_equal(m.H, s.H, sizeof s.H);
  assert_memory_equal(m.bu, s.bu, sizeof s.bu);
  assert_memory_equal(m.bi, s.bi, sizeof s.bi);
  assert_memory_equal(m.user_ids, s.uid, sizeof s.uid);
  assert_memory_equal(m.item_ids, s.iid, sizeof s.iid);
  strata_mf_model_close(&m);

  /* Blanks around ids, blank lines and the largest int64 id are fine. */
  put_file("users.txt", " 17\n\n9223372036854775807\t\n\n");
  assert_int_equal(strata_mf_model_read(dir, &m), 0);
  assert_true(m.user_ids[0] == 17);
  assert_true(m.user_ids[1] == INT64_MAX);
  strata_mf_model_close(&m);
}

/* ---- non-finite values ------------------------------------------------- */

static void test_non_finite_refused(void **state) {
  (void)state;
  static const struct {
    int which; /* 0 W, 1 H, 2 bu, 3 bi, 4 mu */
    int at;    /* element index */
    float value;
    const char *needle;
  } cases[] = {
      {0, 3, NAN, "/W.f32: row 2 (user 1007), column 2: non-finite value nan"},
      {0, 0, INFINITY, "/W.f32: row 1 (user 17), column 1: non-finite value inf"},
      {1, 4, -INFINITY, "/H.f32: row 3 (item 12), column 1: non-finite value -inf"},
      {1, 1, NAN, "/H.f32: row 1 (item 5), column 2: non-finite value nan"},
      {2, 1, NAN, "/bu.f32: row 2 (user 1007): non-finite value nan"},
      {3, 2, INFINITY, "/bi.f32: row 3 (item 12): non-finite value inf"},
      {4, 0, NAN, "/meta.json: mu: non-finite value nan"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    small_model s;
    small_init(&s);
    float *v[] = {s.W, s.H, s.bu, s.bi, &s.m.mu};
    v[cases[k].which][cases[k].at] = cases[k].value;
    write_small(&s);
    expect_refused(STRATA_ERANGE, cases[k].needle);
  }
}

/* ---- ids --------------------------------------------------------------- */

static void test_bad_ids(void **state) {
  (void)state;
  static const struct {
    const char *file, *text;
    int code;
    const char *needle;
  } cases[] = {
      {"users.txt", "17\n" GARBAGE "\n", STRATA_EPARSE,
       "/users.txt:2: id '" GARBAGE_QUOTED "' is not an integer"},
      {"items.txt", "5\n9\n18446744073709551615\n", STRATA_EPARSE,
       "/items.txt:3: id '18446744073709551615' is above the largest supported, "
       "9223372036854775807 (2^63 - 1)"},
      {"items.txt", "5\n9 9\n12\n", STRATA_EPARSE, "/items.txt:2: id '9 9' is not an integer"},
      {"users.txt", "17\n", STRATA_EPARSE, "/users.txt: 1 ids, meta.json declares 2"},
      {"users.txt", "17\n1007\n3\n", STRATA_EPARSE, "/users.txt:3: more ids than the 2"},
      {"users.txt", "", STRATA_EPARSE, "/users.txt: 0 ids, meta.json declares 2"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    small_model s;
    small_init(&s);
    write_small(&s);
    put_file(cases[k].file, cases[k].text);
    expect_refused(cases[k].code, cases[k].needle);
    assert_quoted_msg(strata_err_msg(), "");
  }
  /* A long garbage line shows a prefix only. */
  small_model s;
  small_init(&s);
  write_small(&s);
  char text[400];
  memset(text, 0x1b, 300);
  strcpy(text + 300, "\n1007\n");
  put_file("users.txt", text);
  expect_refused(STRATA_EPARSE, "/users.txt:1: id '\\x1b\\x1b");
  assert_quoted_msg(strata_err_msg(), "\\x1b...' is not an integer");
  /* A missing ids file. */
  write_small(&s);
  char p[128];
  snprintf(p, sizeof p, "%s/items.txt", dir);
  unlink(p);
  expect_refused(STRATA_ENOENT, "/items.txt: cannot open");
}

/* ---- meta.json and sizes ------------------------------------------------ */

static void test_bad_meta(void **state) {
  (void)state;
  static const char *const metas[] = {
      "",
      "{\"format\": \"other\", \"k\": 2, \"mu\": 1, \"bias\": true, \"users\": 2, \"items\": 3}",
      "{\"format\": \"strata-mf-1\", \"k\": 0, \"mu\": 1, \"bias\": true, \"users\": 2, \"items\": 3}",
      "{\"format\": \"strata-mf-1\", \"k\": 1.5, \"mu\": 1, \"bias\": true, \"users\": 2, "
      "\"items\": 3}",
      "{\"format\": \"strata-mf-1\", \"k\": 2, \"mu\": 1, \"bias\": true, \"users\": -1, "
      "\"items\": 3}",
      "{\"format\": \"strata-mf-1\", \"k\": 2, \"mu\": 1, \"bias\": true, \"users\": 2}",
      "{\"format\": \"strata-mf-1\", \"k\": null, \"mu\": 1, \"bias\": true, \"users\": 2, "
      "\"items\": 3}",
  };
  for (size_t k = 0; k < sizeof metas / sizeof metas[0]; k++) {
    small_model s;
    small_init(&s);
    write_small(&s);
    put_file("meta.json", metas[k]);
    expect_refused(STRATA_EPARSE, "/meta.json: not a strata MF model");
  }
  /* A factor file of the wrong size. */
  small_model s;
  small_init(&s);
  write_small(&s);
  put_file("H.f32", "12345");
  expect_refused(STRATA_EPARSE, "/H.f32: expected 24 bytes");
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_round_trip),
      T(test_non_finite_refused),
      T(test_bad_ids),
      T(test_bad_meta),
  };
  return cmocka_run_group_tests_name("mf_model", tests, NULL, NULL);
}
