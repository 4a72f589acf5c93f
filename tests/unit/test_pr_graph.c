/*
 * strata-pagerank's graph reader (apps/pagerank/graph.c, compiled in: the
 * app is a program of its own): several threads, each scanning a byte range,
 * read the graph one thread reads (dense ids, sparse ids, ids beyond 2^32,
 * Matrix Market, the general path's lines among the fast ones), and word a
 * bad line's error the same, naming its line in the whole file. Randomised
 * graphs print their seed (STRATA_TEST_SEED=X reproduces).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "apps/pagerank/pr.h"
#include "strata/core.h"

#include "tmpfiles.h"

static uint64_t g_seed;

static void assert_same_graph(const pr_graph *a, const pr_graph *b) {
  assert_int_equal(a->n, b->n);
  assert_int_equal(a->m, b->m);
  assert_memory_equal(a->src, b->src, a->m * 4);
  assert_memory_equal(a->dst, b->dst, a->m * 4);
  assert_true((a->ids == NULL) == (b->ids == NULL));
  if (a->ids) assert_memory_equal(a->ids, b->ids, (size_t)a->n * 8);
}

/* A random SNAP list of about m edges: ids below `span` (plus an offset
 * past 2^32 when wide), comments, blank lines, CR LF, leading blanks,
 * a third field, tabs. Caller frees. */
static char *snap_text(strata_rng *rng, int m, uint64_t span, int wide, size_t *len) {
  size_t cap = (size_t)m * 64 + 64, n = 0;
  char *t = malloc(cap);
  assert_non_null(t);
  n += (size_t)snprintf(t + n, cap - n, "# Directed graph\n# FromNodeId\tToNodeId\n");
  for (int e = 0; e < m; e++) {
    uint64_t a = strata_rng_below(rng, span), b = strata_rng_below(rng, span);
    if (wide && e % 7 == 0) a += (uint64_t)1 << 33;
    uint64_t kind = strata_rng_below(rng, 40);
    const char *lead = kind == 0 ? "  " : "",
               *sep = kind == 1   ? "\t"
                      : kind == 2 ? " \t "
                                  : " ",
               *tail = kind == 3   ? "\r\n"
                       : kind == 4 ? " 1.5\n"
                       : kind == 5 ? "\t\r\n"
                                   : "\n";
    if (kind == 6) n += (size_t)snprintf(t + n, cap - n, "# a comment\n\n");
    n += (size_t)snprintf(t + n, cap - n, "%s%llu%s%llu%s", lead, (unsigned long long)a, sep,
                          (unsigned long long)b, tail);
  }
  *len = n;
  return t;
}

static void threads_read_the_same(void **state) {
  fixture *fx = *state;
  strata_rng rng;
  strata_rng_seed(&rng, g_seed);
  for (int round = 0; round < 6; round++) {
    size_t len;
    /* Dense ids (the bitmap), sparse (the hash table), beyond 2^32. */
    uint64_t span = round % 3 == 0 ? 5000 : round % 3 == 1 ? 1000000000000ull : 3000;
    int m = 20000 + (int)strata_rng_below(&rng, 20000);
    char *t = snap_text(&rng, m, span, round % 3 == 2, &len);
    const char *path = write_tmp_len(fx, t, len);
    pr_graph one, many;
    assert_int_equal(pr_graph_read_opts(path, &one, 1, 0), 0);
    assert_int_equal(pr_graph_read_opts(path, &many, 4, 1000), 0);
    assert_same_graph(&one, &many);
    assert_true(one.m >= 20000);
    for (uint32_t v = 0; v + 1 < one.n; v++) assert_true(one.ids[v] < one.ids[v + 1]);
    pr_graph_free(&one);
    pr_graph_free(&many);
    free(t);
  }
  assert_live(fx);
}

static void threads_read_matrix_market(void **state) {
  fixture *fx = *state;
  strata_rng rng;
  strata_rng_seed(&rng, g_seed + 1);
  size_t cap = 1 << 20, n = 0;
  char *t = malloc(cap);
  n += (size_t)snprintf(t + n, cap - n,
                        "%%%%MatrixMarket matrix coordinate real symmetric\n%% c\n%% c\n"
                        "900 1000 30000\n");
  for (int e = 0; e < 30000; e++)
    n += (size_t)snprintf(t + n, cap - n, e % 100 ? "%llu %llu %d.5\n" : "%% c\n%llu %llu %d\n",
                          (unsigned long long)(1 + strata_rng_below(&rng, 900)),
                          (unsigned long long)(1 + strata_rng_below(&rng, 1000)), e);
  const char *path = write_tmp_len(fx, t, n);
  pr_graph one, many;
  assert_int_equal(pr_graph_read_opts(path, &one, 1, 0), 0);
  assert_int_equal(pr_graph_read_opts(path, &many, 3, 4000), 0);
  assert_same_graph(&one, &many);
  assert_int_equal(one.n, 1000);
  assert_true(one.m > 30000); /* symmetric: twice each off the diagonal */
  pr_graph_free(&one);
  pr_graph_free(&many);
  free(t);
  assert_live(fx);
}

/* A bad line near the end, in the last thread's range: the message names
 * its line in the file, as one thread's does. */
static void threads_name_the_line(void **state) {
  fixture *fx = *state;
  strata_rng rng;
  strata_rng_seed(&rng, g_seed + 2);
  size_t len;
  char *t = snap_text(&rng, 30000, 100000, 0, &len);
  size_t lines = 0;
  for (size_t k = 0; k < len; k++) lines += t[k] == '\n';
  char *bad = malloc(len + 64);
  memcpy(bad, t, len);
  size_t n = len + (size_t)snprintf(bad + len, 64, "1 2\n3 x\n4 5\n");
  const char *path = write_tmp_len(fx, bad, n);
  char want[128];
  snprintf(want, sizeof want, ":%zu: expected two vertex ids, got '3 x'", lines + 2);
  for (int threads = 1; threads <= 4; threads += 3) {
    pr_graph g;
    assert_int_equal(pr_graph_read_opts(path, &g, threads, 1000), STRATA_EPARSE);
    assert_non_null(strstr(strata_err_msg(), want));
    assert_null(g.src);
    strata_err_clear();
  }
  free(t);
  free(bad);
  assert_live(fx);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
  const char *env = getenv("STRATA_TEST_SEED");
  g_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
  printf("seed %llu (STRATA_TEST_SEED=%llu reproduces)\n", (unsigned long long)g_seed,
         (unsigned long long)g_seed);
  const struct CMUnitTest tests[] = {
      T(threads_read_the_same),
      T(threads_read_matrix_market),
      T(threads_name_the_line),
  };
  return cmocka_run_group_tests_name("pr_graph", tests, NULL, NULL);
}
