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

#include "strata/core.h"
#include "strata/apps/ratings.h"

#include "quoted.h"

static size_t live0;

static int setup(void **state) {
  live0 = strata_alloc_live();
  strata_err_clear();
  return 0;
}

static int teardown(void **state) {
  strata_alloc_fail_after(0);
  assert_int_equal(strata_alloc_live(), live0);
  return 0;
}

static void assert_live(void) { assert_int_equal(strata_alloc_live(), live0); }

static strata_synth_spec small_spec(void) {
  return (strata_synth_spec){.users = 1000,
                             .items = 300,
                             .ratings = 50000,
                             .rank = 8,
                             .noise = 0.5,
                             .seed = 7,
                             .skew = 0.5};
}

/* Field by field: the struct has padding, which memcmp would compare. */
static void assert_spec_equal(const strata_synth_spec *a, const strata_synth_spec *b) {
  assert_int_equal(a->users, b->users);
  assert_int_equal(a->items, b->items);
  assert_true(a->ratings == b->ratings);
  assert_int_equal(a->rank, b->rank);
  assert_true(a->noise == b->noise);
  assert_true(a->seed == b->seed);
  assert_true(a->skew == b->skew);
}

/* ---- parsing ------------------------------------------------------------ */

static void test_defaults(void **state) {
  strata_synth_spec s;
  memset(&s, 0xff, sizeof s);
  strata_synth_defaults(&s);
  assert_int_equal(s.users, 96000);
  assert_int_equal(s.items, 3554);
  assert_int_equal(s.ratings, 4000000);
  assert_int_equal(s.rank, 10);
  assert_float_equal(s.noise, 0.5, 0);
  assert_int_equal(s.seed, 1);
  assert_float_equal(s.skew, 0.5, 0);
  assert_live();
}

static void test_parse_good(void **state) {
  strata_synth_spec s, d;
  strata_synth_defaults(&d);

  s = d;
  assert_int_equal(strata_synth_parse("synth", &s), 0);
  assert_spec_equal(&s, &d);
  assert_int_equal(strata_synth_parse("synth:", &s), 0);
  assert_spec_equal(&s, &d);

  assert_int_equal(strata_synth_parse("synth:users=10,items=20,ratings=300,rank=4,noise=0.1,"
                                      "seed=18446744073709551615,skew=1.5",
                                      &s),
                   0);
  assert_int_equal(s.users, 10);
  assert_int_equal(s.items, 20);
  assert_int_equal(s.ratings, 300);
  assert_int_equal(s.rank, 4);
  assert_float_equal(s.noise, 0.1, 0);
  assert_true(s.seed == UINT64_MAX);
  assert_float_equal(s.skew, 1.5, 0);

  /* A subset in any order; the rest keep what was there. */
  s = d;
  assert_int_equal(strata_synth_parse("synth:seed=0,users=4294967295,noise=0,skew=0", &s), 0);
  assert_int_equal(s.seed, 0);
  assert_int_equal(s.users, UINT32_MAX);
  assert_float_equal(s.noise, 0, 0);
  assert_float_equal(s.skew, 0, 0);
  assert_int_equal(s.items, d.items);
  assert_int_equal(s.ratings, d.ratings);
  assert_int_equal(s.rank, d.rank);

  s = d;
  assert_int_equal(strata_synth_parse("synth:ratings=10000000000,rank=3,rank=5", &s), 0);
  assert_true(s.ratings == 10000000000ULL);
  assert_int_equal(s.rank, 5); /* the last of a repeated key wins */
  assert_live();
}

static void test_parse_bad(void **state) {
  static const struct {
    const char *text;
    const char *needle;
  } cases[] = {
      {"synth:foo=1", "--data synth: unknown key 'foo'"},
      {"synth:users=5,Users=6", "unknown key 'Users'"},
      {"synth:users=x", "--data synth: bad value 'x' for 'users'"},
      {"synth:users=", "bad value '' for 'users'"},
      {"synth:users=0", "bad value '0' for 'users'"},
      {"synth:users=-5", "bad value '-5' for 'users'"},
      {"synth:users=4294967296", "bad value '4294967296' for 'users'"},
      {"synth:users= 5", "bad value ' 5' for 'users'"},
      {"synth:items=0", "for 'items'"},
      {"synth:ratings=0", "for 'ratings'"},
      {"synth:ratings=1e6", "bad value '1e6' for 'ratings'"},
      {"synth:ratings=99999999999999999999", "for 'ratings'"},
      {"synth:rank=0", "for 'rank'"},
      {"synth:noise=-1", "bad value '-1' for 'noise'"},
      {"synth:noise=nan", "for 'noise'"},
      {"synth:noise=inf", "for 'noise'"},
      {"synth:noise=0.5x", "for 'noise'"},
      {"synth:skew=-0.5", "bad value '-0.5' for 'skew'"},
      {"synth:seed=-1", "for 'seed'"},
      {"synth:users", "expected key=value, got 'users'"},
      {"synth:users=5,,items=3", "empty field"},
      {"synth:users=5,", "empty field"},
      {"synth:,", "empty field"},
      {"synthetic:users=5", "not a synthetic spec"},
      {"movielens", "not a synthetic spec"},
      /* Input text reaches the message escaped (strata_quote). */
      {"synth:" GARBAGE "=1", "unknown key '" GARBAGE_QUOTED "'"},
      {"synth:users=" GARBAGE, "bad value '" GARBAGE_QUOTED "' for 'users'"},
      {"synth:rank=5,noise=" GARBAGE, "bad value '" GARBAGE_QUOTED "' for 'noise'"},
      {"synth:" GARBAGE, "expected key=value, got '" GARBAGE_QUOTED "'"},
      {GARBAGE, "--data '" GARBAGE_QUOTED "': not a synthetic spec"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    strata_synth_spec s, d;
    strata_synth_defaults(&d);
    s = d;
    int rc = strata_synth_parse(cases[k].text, &s);
    if (rc != STRATA_EUSAGE)
      fail_msg("'%s': got %s, want STRATA_EUSAGE", cases[k].text, strata_err_name(rc));
    if (!strstr(strata_err_msg(), cases[k].needle))
      fail_msg("'%s': message '%s' lacks '%s'", cases[k].text, strata_err_msg(), cases[k].needle);
    assert_quoted_msg(strata_err_msg(), "");
    /* A rejected spec leaves the caller's values as they were. */
    assert_spec_equal(&s, &d);
  }
  assert_live();
}

/* ---- generation --------------------------------------------------------- */

static void test_deterministic(void **state) {
  strata_synth_spec s = small_spec();
  strata_ratings a = {0}, b = {0}, c = {0};
  assert_int_equal(strata_synth_generate(&s, &a), 0);
  assert_int_equal(strata_synth_generate(&s, &b), 0);
  assert_int_equal(a.n, b.n);
  assert_memory_equal(a.r, b.r, a.n * sizeof *a.r);
  s.seed = 8;
  assert_int_equal(strata_synth_generate(&s, &c), 0);
  assert_int_equal(c.n, a.n);
  assert_true(memcmp(a.r, c.r, a.n * sizeof *a.r) != 0);
  strata_ratings_close(&c);

  /* Noise changes values only, never which (user, item) pairs are drawn. */
  s.seed = 7;
  s.noise = 0;
  assert_int_equal(strata_synth_generate(&s, &c), 0);
  size_t differ = 0;
  for (size_t k = 0; k < a.n; k++) {
    assert_int_equal(a.r[k].user, c.r[k].user);
    assert_int_equal(a.r[k].item, c.r[k].item);
    differ += a.r[k].value != c.r[k].value;
  }
  assert_true(differ > a.n / 2);
  strata_ratings_close(&a);
  strata_ratings_close(&b);
  strata_ratings_close(&c);
  assert_live();
}

static void check_set(const strata_synth_spec *s, const strata_ratings *rs) {
  assert_int_equal(rs->n, s->ratings);
  assert_true(rs->cap >= rs->n);
  assert_int_equal(rs->n_users, s->users);
  assert_int_equal(rs->n_items, s->items);
  assert_null(rs->users);
  assert_null(rs->items);
  for (size_t k = 0; k < rs->n; k++) {
    assert_true(rs->r[k].user < s->users);
    assert_true(rs->r[k].item < s->items);
    assert_true(isfinite(rs->r[k].value));
  }
}

static void test_counts_and_moments(void **state) {
  strata_synth_spec s = small_spec();
  s.ratings = 200000;
  strata_ratings rs = {0};
  assert_int_equal(strata_synth_generate(&s, &rs), 0);
  check_set(&s, &rs);
  double sum = 0, sq = 0;
  for (size_t k = 0; k < rs.n; k++) sum += rs.r[k].value;
  double mean = sum / (double)rs.n;
  for (size_t k = 0; k < rs.n; k++) sq += (rs.r[k].value - mean) * (rs.r[k].value - mean);
  double sd = sqrt(sq / (double)rs.n);
  /* Biases (0.3 each), unit-variance signal and noise 0.5: sd about 1.2. */
  assert_true(fabs(mean - 3.5) < 0.15);
  assert_true(sd > 0.9 && sd < 1.6);
  strata_ratings_close(&rs);

  /* Degenerate sizes still work. */
  s = (strata_synth_spec){.users = 1, .items = 1, .ratings = 10, .rank = 1, .noise = 0, .seed = 3};
  assert_int_equal(strata_synth_generate(&s, &rs), 0);
  check_set(&s, &rs);
  for (size_t k = 1; k < rs.n; k++) assert_float_equal(rs.r[k].value, rs.r[0].value, 0);
  strata_ratings_close(&rs);
  assert_live();
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* Ratings per user, sorted ascending; *top gets the most popular user. */
static uint32_t *user_counts(const strata_ratings *rs, uint32_t n, uint32_t *top) {
  uint32_t *cnt = calloc(n, sizeof *cnt);
  assert_non_null(cnt);
  for (size_t k = 0; k < rs->n; k++) cnt[rs->r[k].user]++;
  *top = 0;
  for (uint32_t u = 1; u < n; u++)
    if (cnt[u] > cnt[*top]) *top = u;
  qsort(cnt, n, sizeof *cnt, cmp_u32);
  return cnt;
}

static void test_popularity_skew(void **state) {
  strata_synth_spec s = {.users = 1000,
                         .items = 100,
                         .ratings = 100000,
                         .rank = 4,
                         .noise = 0.1,
                         .seed = 11,
                         .skew = 1.0};
  strata_ratings rs = {0};
  assert_int_equal(strata_synth_generate(&s, &rs), 0);
  uint32_t top1, top2;
  uint32_t *cnt = user_counts(&rs, s.users, &top1);
  /* With skew 1 the top user gets 1/H(1000), about 13% of all ratings, the
   * median one about 1/500 of that. */
  uint32_t max = cnt[s.users - 1], median = cnt[s.users / 2];
  assert_true(max > 10 * median);
  assert_in_range(max, 11000, 16000);
  free(cnt);
  strata_ratings_close(&rs);

  /* The shuffle moves the favourite around with the seed. */
  s.seed = 12;
  assert_int_equal(strata_synth_generate(&s, &rs), 0);
  free(user_counts(&rs, s.users, &top2));
  assert_true(top1 != top2);
  strata_ratings_close(&rs);

  /* No skew: every user about equally likely (100 each, sd 10). */
  s.skew = 0;
  assert_int_equal(strata_synth_generate(&s, &rs), 0);
  cnt = user_counts(&rs, s.users, &top1);
  assert_true(cnt[s.users - 1] < 2 * cnt[s.users / 2]);
  assert_true(cnt[0] > 40);
  free(cnt);
  strata_ratings_close(&rs);
  assert_live();
}

static void test_invalid_spec(void **state) {
  strata_synth_spec bad[4];
  for (int k = 0; k < 4; k++) bad[k] = small_spec();
  bad[0].users = 0;
  bad[1].rank = 0;
  bad[2].noise = -1;
  bad[3].skew = NAN;
  for (int k = 0; k < 4; k++) {
    strata_ratings rs = {0};
    assert_int_equal(strata_synth_generate(&bad[k], &rs), STRATA_EINVAL);
    assert_null(rs.r);
    assert_non_null(strstr(strata_err_msg(), "synth"));
  }
  assert_live();
}

static void test_alloc_failure(void **state) {
  strata_synth_spec s = small_spec();
  for (long n = 1;; n++) {
    strata_ratings rs = {0};
    strata_alloc_fail_after(n);
    int rc = strata_synth_generate(&s, &rs);
    strata_alloc_fail_after(0);
    if (rc == 0) {
      strata_ratings_close(&rs);
      break;
    }
    assert_int_equal(rc, STRATA_ENOMEM);
    assert_null(rs.r);
    assert_live();
    assert_true(n < 100);
  }
  assert_live();
}

/* Refused before anything is allocated when the factors, samplers and
 * ratings would not fit in the memory available (a 64 MB limit here). */
static void test_too_large(void **state) {
  strata_mem_set_limit(64000000);
  strata_synth_spec s = small_spec();
  s.users = 4000000000u;
  strata_ratings rs = {0};
  int rc = strata_synth_generate(&s, &rs);
  strata_mem_set_limit(0);
  assert_int_equal(rc, STRATA_ENOMEM);
  const char *want = "--data synth: 4000000000 users, ";
  if (strncmp(strata_err_msg(), want, strlen(want)) != 0 ||
      !strstr(strata_err_msg(), "but this host has 64.0 MB available (--mem-limit): lower users"))
    fail_msg("message '%s'", strata_err_msg());
  assert_null(rs.r);
  assert_live();
}

/* ---- randomised: a fresh spec each run, reproducible from its seed ------- */

static void test_random_specs(void **state) {
  const char *env = getenv("STRATA_TEST_SEED");
  unsigned long long seed = env && *env
                                ? strtoull(env, NULL, 0)
                                : (unsigned long long)time(NULL) ^ (unsigned long long)clock();
  print_message("seed=%llu\n", seed);
  strata_rng rng;
  strata_rng_seed(&rng, seed);
  for (int round = 0; round < 20; round++) {
    strata_synth_spec s = {
        .users = 1 + (uint32_t)strata_rng_below(&rng, 500),
        .items = 1 + (uint32_t)strata_rng_below(&rng, 500),
        .ratings = 1 + strata_rng_below(&rng, 20000),
        .rank = 1 + (uint32_t)strata_rng_below(&rng, 16),
        .noise = 2 * strata_rng_uniform(&rng),
        .seed = strata_rng_next(&rng),
        .skew = 2 * strata_rng_uniform(&rng),
    };
    strata_ratings a = {0}, b = {0};
    assert_int_equal(strata_synth_generate(&s, &a), 0);
    check_set(&s, &a);
    assert_int_equal(strata_synth_generate(&s, &b), 0);
    assert_memory_equal(a.r, b.r, a.n * sizeof *a.r);

    /* The spec survives a round trip through its text form. */
    char text[256];
    snprintf(text, sizeof text,
             "synth:users=%u,items=%u,ratings=%llu,rank=%u,noise=%.17g,seed=%llu,skew=%.17g",
             s.users, s.items, (unsigned long long)s.ratings, s.rank, s.noise,
             (unsigned long long)s.seed, s.skew);
    strata_synth_spec p;
    strata_synth_defaults(&p);
    assert_int_equal(strata_synth_parse(text, &p), 0);
    assert_spec_equal(&p, &s);
    strata_ratings_close(&a);
    strata_ratings_close(&b);
  }
  assert_live();
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_defaults),      T(test_parse_good),         T(test_parse_bad),
      T(test_deterministic), T(test_counts_and_moments), T(test_popularity_skew),
      T(test_invalid_spec),  T(test_alloc_failure),      T(test_random_specs),
      T(test_too_large),
  };
  return cmocka_run_group_tests_name("synth", tests, NULL, NULL);
}
