/*
 * The line reader (strata/apps/lines.h): blocks of whole lines against one
 * line at a time, byte ranges that tile a file against the whole file, the
 * offset, gzip read whole and refused by ranges, the plain-decimal scanner
 * against strtod. Randomised contents print their seed
 * (STRATA_TEST_SEED=X reproduces).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/common/lines.h"
#include "strata/apps/lines.h"
#include "strata/core.h"

#include "tmpfiles.h"

static uint64_t g_seed;

/* Random text of about `size` bytes: lines of every length (empty, short,
 * longer than the reader's buffer), LF or CR LF ends, stray CRs, and a last
 * line with or without its '\n'. Caller frees. */
static char *random_text(strata_rng *rng, size_t size, size_t *len) {
  char *t = malloc(size + (1 << 20) + 16);
  assert_non_null(t);
  size_t n = 0;
  while (n < size) {
    uint64_t kind = strata_rng_below(rng, 100);
    size_t l = kind < 2    ? 300000 + strata_rng_below(rng, 400000)
               : kind < 10 ? 0
                           : strata_rng_below(rng, 40);
    for (size_t k = 0; k < l; k++) t[n++] = "0123456789 \t\r#x"[strata_rng_below(rng, 15)];
    if (strata_rng_below(rng, 4) == 0) t[n++] = '\r';
    t[n++] = '\n';
  }
  if (strata_rng_below(rng, 2)) n--; /* no '\n' at the end */
  *len = n;
  return t;
}

/* The lines of t as strata_lines_next returns them, each followed by '\n',
 * into out: the expected reading. Returns the line count. */
static size_t expected_lines(const char *t, size_t len, char *out, size_t *out_len) {
  size_t lines = 0, o = 0, s = 0;
  while (s < len) {
    const char *nl = memchr(t + s, '\n', len - s);
    size_t e = nl ? (size_t)(nl - t) : len, n = e - s;
    if (n && t[s + n - 1] == '\r') n--;
    memcpy(out + o, t + s, n);
    o += n;
    out[o++] = '\n';
    lines++;
    s = e + 1;
  }
  *out_len = o;
  return lines;
}

/* Reads rd to its end, by blocks (blocks = 1) or lines, appending each line
 * (CR LF as strata_lines_next gives it) and '\n' to out; checks lineno. */
static size_t read_all(strata_lines *rd, int blocks, char *out, size_t *out_len) {
  size_t o = 0, lines = 0;
  const char *s;
  size_t n;
  int rc;
  if (blocks) {
    while ((rc = strata_lines_block(rd, &s, &n)) == 1) {
      assert_int_equal(rd->lineno, lines);
      assert_true(n > 0 && s[n - 1] == '\n');
      for (size_t b = 0; b < n;) {
        const char *nl = memchr(s + b, '\n', n - b);
        assert_non_null(nl);
        size_t e = (size_t)(nl - s), l = e - b;
        if (l && s[b + l - 1] == '\r') l--;
        memcpy(out + o, s + b, l);
        o += l;
        out[o++] = '\n';
        lines++;
        b = e + 1;
      }
      rd->lineno = 12345; /* a caller may move it; the next call puts it right */
    }
  } else {
    while ((rc = strata_lines_next(rd, &s, &n)) == 1) {
      assert_int_equal(rd->lineno, ++lines);
      memcpy(out + o, s, n);
      o += n;
      out[o++] = '\n';
    }
  }
  assert_int_equal(rc, 0);
  assert_int_equal(rd->lineno, lines);
  *out_len = o;
  return lines;
}

static void test_blocks_and_lines(void **state) {
  fixture *fx = *state;
  strata_rng rng;
  strata_rng_seed(&rng, g_seed);
  for (int round = 0; round < 6; round++) {
    size_t len, want_len, got_len;
    char *t = random_text(&rng, round < 3 ? 2000 : 3000000, &len);
    char *want = malloc(len + 16), *got = malloc(len + 16);
    size_t lines = expected_lines(t, len, want, &want_len);
    const char *path = write_tmp_len(fx, t, len);
    for (int blocks = 0; blocks < 2; blocks++) {
      strata_lines rd;
      assert_int_equal(strata_lines_open(&rd, path), 0);
      assert_null(rd.gz);
      assert_int_equal(rd.size, len);
      assert_int_equal(read_all(&rd, blocks, got, &got_len), lines);
      assert_int_equal(got_len, want_len);
      assert_memory_equal(got, want, want_len);
      assert_int_equal(strata_lines_offset(&rd), len + (blocks && len && t[len - 1] != '\n'));
      strata_lines_close(&rd);
    }
    /* Blocks and lines mixed, then rewound. */
    strata_lines rd;
    assert_int_equal(strata_lines_open(&rd, path), 0);
    const char *s;
    size_t n, k = 0;
    for (int rc; (rc = k % 3 ? strata_lines_next(&rd, &s, &n) : strata_lines_block(&rd, &s, &n));
         k++)
      assert_int_equal(rc, 1);
    assert_int_equal(rd.lineno, lines);
    assert_int_equal(strata_lines_rewind(&rd), 0);
    assert_int_equal(read_all(&rd, 1, got, &got_len), lines);
    assert_memory_equal(got, want, want_len);
    strata_lines_close(&rd);
    free(t);
    free(want);
    free(got);
    fx->n_paths--;
    unlink(path);
  }
  assert_live(fx);
}

/* The lines of range [start, stop) of path, joined by '|'. */
static void range_lines(const char *path, uint64_t start, uint64_t stop, char *out) {
  strata_lines rd;
  assert_int_equal(strata_lines_open_range(&rd, path, start, stop), 0);
  const char *s;
  size_t n;
  out[0] = 0;
  while (strata_lines_next(&rd, &s, &n) == 1) {
    if (out[0]) strcat(out, "|");
    strncat(out, s, n);
  }
  strata_lines_close(&rd);
}

/* An empty range holds no line, wherever it is: [0, 0) too, or a cut at 0
 * would read the first line twice. Cuts inside a line and at its end. */
static void test_ranges_edges(void **state) {
  fixture *fx = *state;
  const char *path = write_tmp(fx, "ab\ncd\n");
  char got[64];
  for (uint64_t at = 0; at <= 7; at++) {
    range_lines(path, at, at, got);
    assert_string_equal(got, "");
  }
  range_lines(path, 5, 2, got);
  assert_string_equal(got, "");
  range_lines(path, 0, 1, got);
  assert_string_equal(got, "ab");
  range_lines(path, 1, 3, got); /* "ab" starts before 1; "cd" at 3 */
  assert_string_equal(got, "");
  range_lines(path, 1, 4, got);
  assert_string_equal(got, "cd");
  range_lines(path, 0, UINT64_MAX, got);
  assert_string_equal(got, "ab|cd");
  assert_live(fx);
}

/* Ranges cut anywhere (in a line, at its '\n', just after it, past the end,
 * empty) tile the file: their lines, in order, are the file's. */
static void test_ranges_tile(void **state) {
  fixture *fx = *state;
  strata_rng rng;
  strata_rng_seed(&rng, g_seed + 1);
  for (int round = 0; round < 8; round++) {
    size_t len, want_len, got_len = 0, part_len;
    char *t = random_text(&rng, round < 4 ? 500 : 2000000, &len);
    char *want = malloc(len + 16), *got = malloc(len + 16);
    size_t lines = expected_lines(t, len, want, &want_len), total = 0;
    const char *path = write_tmp_len(fx, t, len);
    int parts = 1 + (int)strata_rng_below(&rng, 9);
    uint64_t cut[12];
    cut[0] = 0;
    for (int k = 1; k < parts; k++) cut[k] = strata_rng_below(&rng, len + 1);
    /* Sorted; some equal (empty ranges). */
    for (int a = 1; a < parts; a++)
      for (int b = a + 1; b < parts; b++)
        if (cut[b] < cut[a]) {
          uint64_t x = cut[a];
          cut[a] = cut[b];
          cut[b] = x;
        }
    cut[parts] = round % 2 ? UINT64_MAX : len + strata_rng_below(&rng, 3);
    for (int k = 0; k < parts; k++) {
      strata_lines rd;
      assert_int_equal(strata_lines_open_range(&rd, path, cut[k], cut[k + 1]), 0);
      total += read_all(&rd, k % 2, got + got_len, &part_len);
      got_len += part_len;
      strata_lines_close(&rd);
    }
    assert_int_equal(total, lines);
    assert_int_equal(got_len, want_len);
    assert_memory_equal(got, want, want_len);
    free(t);
    free(want);
    free(got);
    fx->n_paths--;
    unlink(path);
  }
  assert_live(fx);
}

static void test_gzip(void **state) {
  fixture *fx = *state;
  const char *gz = write_tmp_gz(fx, "1 2\r\n3 4\n\n5 6");
  strata_lines rd;
  assert_int_equal(strata_lines_open(&rd, gz), 0);
  assert_non_null(rd.gz);
  char got[64];
  size_t got_len;
  assert_int_equal(read_all(&rd, 1, got, &got_len), 4);
  assert_memory_equal(got, "1 2\n3 4\n\n5 6\n", got_len);
  assert_int_equal(strata_lines_offset(&rd), 0);
  strata_lines_close(&rd);
  assert_int_equal(strata_lines_open_range(&rd, gz, 0, 5), STRATA_EINVAL);
  assert_non_null(strstr(strata_err_msg(), "a gzip file cannot be read by ranges"));
  strata_lines_close(&rd);
  strata_err_clear();
  /* Whole, the range of a gzip file is fine. */
  assert_int_equal(strata_lines_open_range(&rd, gz, 0, UINT64_MAX), 0);
  strata_lines_close(&rd);
  /* A cut stream is an error by blocks too. */
  char text[40000];
  size_t n = 0;
  for (int k = 0; k < 3000; k++) n += (size_t)snprintf(text + n, sizeof text - n, "%d %d\n", k, k);
  const char *cut = write_tmp_gz_damaged(fx, text, 1);
  assert_int_equal(strata_lines_open(&rd, cut), 0);
  const char *s;
  int rc;
  while ((rc = strata_lines_block(&rd, &s, &n)) == 1) continue;
  assert_int_equal(rc, STRATA_EPARSE);
  assert_non_null(strstr(strata_err_msg(), "truncated gzip data"));
  strata_lines_close(&rd);
  strata_err_clear();
  assert_live(fx);
}

/* strata__scan_plain_f64 gives strtod's double, or leaves the text to
 * strata__scan_f64. */
static void test_plain_decimal(void **state) {
  fixture *fx = *state;
  static const char *const good[] = {"4",
                                     "3.5",
                                     "-0.25",
                                     "+7",
                                     "0.1",
                                     "5.",
                                     ".5",
                                     "-.5",
                                     "123456789012345",
                                     "0.000000000000000000001",
                                     "99999999999999.9",
                                     "00000000000000000000001"};
  static const char *const other[] = {
      "", "-", ".", "1e5", "1E5", "nan", "inf", "1234567890123456", "0.00000000000000000000001"};
  for (size_t k = 0; k < sizeof good / sizeof *good; k++) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s\n", good[k]);
    double v = -1;
    const char *e = strata__scan_plain_f64(buf, &v);
    assert_non_null(e);
    assert_int_equal(*e, '\n');
    assert_true(v == strtod(good[k], NULL));
  }
  for (size_t k = 0; k < sizeof other / sizeof *other; k++) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s\n", other[k]);
    double v;
    assert_null(strata__scan_plain_f64(buf, &v));
  }
  /* Random decimals of up to 15 digits: strtod's double, bit for bit. */
  strata_rng rng;
  strata_rng_seed(&rng, g_seed + 2);
  for (int k = 0; k < 100000; k++) {
    char buf[64];
    int digits = 1 + (int)strata_rng_below(&rng, 15);
    int point = (int)strata_rng_below(&rng, digits + 1);
    size_t n = 0;
    if (strata_rng_below(&rng, 2)) buf[n++] = '-';
    for (int d = 0; d < digits; d++) {
      if (d == point && d) buf[n++] = '.';
      buf[n++] = (char)('0' + strata_rng_below(&rng, 10));
    }
    buf[n] = ' ';
    buf[n + 1] = 0;
    double v;
    const char *e = strata__scan_plain_f64(buf, &v);
    assert_non_null(e);
    assert_int_equal(*e, ' ');
    assert_true(v == strtod(buf, NULL));
  }
  assert_live(fx);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
  const char *env = getenv("STRATA_TEST_SEED");
  g_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
  printf("seed %llu (STRATA_TEST_SEED=%llu reproduces)\n", (unsigned long long)g_seed,
         (unsigned long long)g_seed);
  const struct CMUnitTest tests[] = {
      T(test_blocks_and_lines), T(test_ranges_edges), T(test_ranges_tile), T(test_gzip),
      T(test_plain_decimal),
  };
  return cmocka_run_group_tests_name("lines", tests, NULL, NULL);
}
