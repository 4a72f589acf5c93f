/*
 * Unit tests for core/options.c: the table-driven parser, --help and echo.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "strata/core.h"
#include "strata/options.h"

#include "quoted.h"

typedef struct cfg {
  int count;
  uint64_t seed;
  double rate;
  const char *name;
  int verbose;
  const char *mode;
  int nodef_int;
  double nodef_double;
  uint64_t nodef_u64;
  const char *nodef_str;
  const char *nodef_choice;
} cfg;

typedef struct cfg2 {
  int level;
  int quiet;
} cfg2;

#define O(f) offsetof(cfg, f)
static const strata_option opts[] = {
    {"count", 'c', STRATA_OPT_INT, O(count), "4", "N", 1, 64, NULL, "how many things", NULL},
    {"seed", 0, STRATA_OPT_U64, O(seed), "42", "S", 0, 0, NULL, "random seed", NULL},
    {"rate", 'r', STRATA_OPT_DOUBLE, O(rate), "0.25", "RATE", 0, 1, NULL, "learning rate", NULL},
    {"name", 'n', STRATA_OPT_STRING, O(name), "alice", "NAME", 0, 0, NULL, "who", NULL},
    {"verbose", 'v', STRATA_OPT_FLAG, O(verbose), NULL, NULL, 0, 0, NULL, "talk more", NULL},
    {"mode", 0, STRATA_OPT_CHOICE, O(mode), "fast", "MODE", 0, 0, "fast|slow|exact",
     "how to run", NULL},
    {"nodef-int", 0, STRATA_OPT_INT, O(nodef_int), NULL, "N", 0, 0, NULL, "no default int", NULL},
    {"nodef-double", 0, STRATA_OPT_DOUBLE, O(nodef_double), NULL, "X", 0, 0, NULL, "no default", NULL},
    {"nodef-u64", 0, STRATA_OPT_U64, O(nodef_u64), NULL, "U", 0, 0, NULL, "no default u64", NULL},
    {"nodef-str", 0, STRATA_OPT_STRING, O(nodef_str), NULL, "S", 0, 0, NULL, "no default str", NULL},
    {"nodef-choice", 0, STRATA_OPT_CHOICE, O(nodef_choice), NULL, "C", 0, 0, "x|y",
     "no default choice", NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};
#undef O

static const strata_option opts2[] = {
    {"level", 'l', STRATA_OPT_INT, offsetof(cfg2, level), "-3", "L", -10, 10, NULL, "a level", NULL},
    {"quiet", 'q', STRATA_OPT_FLAG, offsetof(cfg2, quiet), NULL, NULL, 0, 0, NULL, "say less", NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};

/* The types beyond plain values: an enum, optional values, a key=value
 * spec with an open lower bound, in a group of their own. */
typedef struct cfg3 {
  int color;
  strata_opt_int depth;
  strata_opt_double ratio;
  strata_opt_double nodef_ratio;
  double share;
  const char *load;
  int load_ms;
  double load_prob;
  int load_kind;
  uint64_t load_n;
} cfg3;

#define O3(f) offsetof(cfg3, f)
static const strata_option load_keys[] = {
    {"ms", 0, STRATA_OPT_INT, O3(load_ms), NULL, "MS", 0, 1000, NULL, NULL, NULL},
    {"prob", 0, STRATA_OPT_DOUBLE | STRATA_OPT_OPEN_MIN, O3(load_prob), NULL, "P", 0, 1, NULL, NULL,
     NULL},
    {"kind", 0, STRATA_OPT_ENUM, O3(load_kind), "cpu", "K", 0, 0, "cpu|io", NULL, NULL},
    {"n", 0, STRATA_OPT_U64, O3(load_n), "7", "N", 1, 100, NULL, NULL, NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};

static const strata_option opts3[] = {
    {"color", 0, STRATA_OPT_ENUM, O3(color), "green", "C", 0, 0, "red|green|blue", "a color",
     NULL},
    {"depth", 0, STRATA_OPT_INT_OPTIONAL, O3(depth), NULL, "D", 0, 9, NULL, "optional int", NULL},
    {"ratio", 0, STRATA_OPT_DOUBLE_OPTIONAL, O3(ratio), "0.5", "R", 0, 1, NULL, "optional double",
     NULL},
    {"nodef-ratio", 0, STRATA_OPT_DOUBLE_OPTIONAL, O3(nodef_ratio), NULL, "R", 0, 0, NULL,
     "optional double without default", NULL},
    {"share", 0, STRATA_OPT_DOUBLE | STRATA_OPT_OPEN_MIN, O3(share), "1", "S", 0, 1, NULL,
     "a share above 0", NULL},
    {"load", 0, STRATA_OPT_SPEC, O3(load), NULL, "ms=MS,prob=P[,kind=K,n=N]", 0, 0, NULL,
     "a key=value spec", load_keys},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};
#undef O3

static size_t live0;
static cfg c;
static cfg2 c2;
static strata_optgroup groups[2];
static cfg3 c3;
static strata_optgroup group3;

static int setup(void **state) {
  (void)state;
  live0 = strata_alloc_live();
  strata_err_clear();
  memset(&c, 0xA5, sizeof c); /* garbage: defaults must overwrite every field */
  memset(&c2, 0xA5, sizeof c2);
  groups[0] = (strata_optgroup){"test options", opts, &c};
  groups[1] = (strata_optgroup){"more options", opts2, &c2};
  assert_int_equal(strata_options_defaults(groups, 2), 0);
  memset(&c3, 0xA5, sizeof c3);
  group3 = (strata_optgroup){"typed options", opts3, &c3};
  assert_int_equal(strata_options_defaults(&group3, 1), 0);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  assert_int_equal(strata_alloc_live(), live0);
  return 0;
}

/* Parses a NULL-terminated list of arguments. */
static int parse(int *help, ...) {
  char *argv[32];
  int argc = 0;
  va_list ap;
  va_start(ap, help);
  const char *a;
  while ((a = va_arg(ap, const char *)) && argc < 32) argv[argc++] = (char *)a;
  va_end(ap);
  return strata_options_parse(groups, 2, argc, argv, help);
}

/* Expects a usage error whose message names `flag`. */
#define expect_usage(flag, ...)                                       \
  do {                                                                \
    int help_ = -1;                                                   \
    strata_err_clear();                                               \
    assert_int_equal(parse(&help_, __VA_ARGS__, NULL), STRATA_EUSAGE); \
    assert_non_null(strstr(strata_err_msg(), flag));                  \
    assert_int_equal(help_, 0);                                       \
  } while (0)

static void test_defaults_land_in_struct(void **state) {
  (void)state;
  assert_int_equal(c.count, 4);
  assert_true(c.seed == 42);
  assert_true(c.rate == 0.25);
  assert_string_equal(c.name, "alice");
  assert_int_equal(c.verbose, 0);
  assert_string_equal(c.mode, "fast");
  assert_int_equal(c.nodef_int, 0);
  assert_true(c.nodef_double == 0.0);
  assert_true(c.nodef_u64 == 0);
  assert_null(c.nodef_str);
  assert_null(c.nodef_choice);
  assert_int_equal(c2.level, -3);
  assert_int_equal(c2.quiet, 0);
}

static void test_bad_default_is_einval(void **state) {
  (void)state;
  struct {
    int n;
  } bad;
  static const strata_option t[] = {
      {"width", 0, STRATA_OPT_INT, 0, "wide", "N", 0, 0, NULL, "a width", NULL},
      {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};
  strata_optgroup g = {"bad", t, &bad};
  assert_int_equal(strata_options_defaults(&g, 1), STRATA_EINVAL);
  /* A good default in the same kind of table passes. */
  static const strata_option good[] = {
      {"width", 0, STRATA_OPT_INT, 0, "12", "N", 0, 0, NULL, "a width", NULL},
      {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};
  g.opts = good;
  assert_int_equal(strata_options_defaults(&g, 1), 0);
  assert_int_equal(bad.n, 12);
  /* A default outside the bounds is a bad table too. */
  static const strata_option out[] = {
      {"width", 0, STRATA_OPT_INT, 0, "99", "N", 1, 10, NULL, "a width", NULL},
      {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};
  g.opts = out;
  assert_int_equal(strata_options_defaults(&g, 1), STRATA_EINVAL);
}

/*
 * A default that does not parse is refused with a message naming the
 * option and what is wrong with the default (built without reading the
 * message buffer it writes: the source and the destination of the format
 * must not overlap).
 */
static void test_bad_default_message(void **state) {
  (void)state;
  struct {
    int n;
  } bad;
  static const strata_option t[] = {
      {"width", 0, STRATA_OPT_INT, 0, "wide", "N", 0, 0, NULL, "a width", NULL},
      {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};
  strata_optgroup g = {"bad", t, &bad};
  assert_int_equal(strata_options_defaults(&g, 1), STRATA_EINVAL);
  assert_string_equal(strata_err_msg(), "default of --width: 'wide' is not an integer");
}

static void test_long_with_space(void **state) {
  (void)state;
  int help = -1;
  assert_int_equal(parse(&help, "--count", "7", "--seed", "123456789012", "--rate", "0.5",
                         "--name", "bob", "--mode", "exact", "--level", "-9", NULL),
                   0);
  assert_int_equal(help, 0);
  assert_int_equal(c.count, 7);
  assert_true(c.seed == UINT64_C(123456789012));
  assert_true(c.rate == 0.5);
  assert_string_equal(c.name, "bob");
  assert_string_equal(c.mode, "exact");
  assert_int_equal(c2.level, -9);
  assert_int_equal(c.verbose, 0);
}

static void test_long_with_equals(void **state) {
  (void)state;
  int help = -1;
  assert_int_equal(parse(&help, "--count=9", "--rate=1e-1", "--name=carol=x", "--mode=slow",
                         "--nodef-str=", NULL),
                   0);
  assert_int_equal(c.count, 9);
  assert_true(c.rate == 0.1);
  assert_string_equal(c.name, "carol=x"); /* only the first '=' splits */
  assert_string_equal(c.mode, "slow");
  assert_string_equal(c.nodef_str, "");
}

static void test_short_and_flags(void **state) {
  (void)state;
  int help = -1;
  assert_int_equal(parse(&help, "-c", "3", "-r", "0.75", "-v", "-n", "dave", "-q", NULL), 0);
  assert_int_equal(c.count, 3);
  assert_true(c.rate == 0.75);
  assert_int_equal(c.verbose, 1);
  assert_string_equal(c.name, "dave");
  assert_int_equal(c2.quiet, 1);
  assert_int_equal(help, 0);
}

static void test_string_points_into_argv(void **state) {
  (void)state;
  char val[] = "value";
  char flag[] = "--name";
  char *argv[] = {flag, val};
  int help;
  assert_int_equal(strata_options_parse(groups, 2, 2, argv, &help), 0);
  assert_ptr_equal(c.name, val);
}

static void test_last_value_wins_and_bounds_inclusive(void **state) {
  (void)state;
  int help;
  assert_int_equal(parse(&help, "--count", "1", "--count", "64", "--rate", "0", "--level",
                         "10", NULL),
                   0);
  assert_int_equal(c.count, 64);
  assert_true(c.rate == 0.0);
  assert_int_equal(c2.level, 10);
  assert_int_equal(parse(&help, "--rate", "1", "--level", "-10", NULL), 0);
  assert_true(c.rate == 1.0);
  assert_int_equal(c2.level, -10);
}

/*
 * STRATA_OPT_U64 takes the whole uint64_t range: 2^63 - 1 and 2^64 - 1 (a
 * 64-bit seed) parse to themselves.
 */
static void test_u64_full_range(void **state) {
  (void)state;
  int help;
  assert_int_equal(parse(&help, "--seed", "9223372036854775807", NULL), 0);
  assert_true(c.seed == UINT64_C(9223372036854775807));
  int rc = parse(&help, "--seed", "18446744073709551615", NULL);
  if (rc) print_message("--seed 18446744073709551615: %s\n", strata_err_msg());
  assert_int_equal(rc, 0);
  assert_true(c.seed == UINT64_MAX);
}

static void test_unknown_flag(void **state) {
  (void)state;
  expect_usage("--bogus", "--bogus", "1");
  expect_usage("--bogus", "--count", "2", "--bogus=1");
  expect_usage("-z", "-z");
  expect_usage("--coun", "--coun", "2"); /* no prefix matching */
}

static void test_missing_value(void **state) {
  (void)state;
  expect_usage("--count", "--count");
  expect_usage("--name", "-v", "--name");
  expect_usage("--rate", "-r");
}

static void test_not_a_number(void **state) {
  (void)state;
  expect_usage("--count", "--count", "abc");
  expect_usage("--count", "--count", "5x");
  expect_usage("--count", "--count", "");
  expect_usage("--count", "--count", "2.5");
  expect_usage("--count", "--count", "99999999999999999999");
  expect_usage("--seed", "--seed", "12ab");
  expect_usage("--rate", "--rate", "fast");
  expect_usage("--rate", "--rate", "0.5.1");
  expect_usage("--rate", "--rate", "nan");
  expect_usage("--rate", "--rate", "inf");
  expect_usage("--nodef-int", "--nodef-int", "3000000000"); /* beyond int */
}

static void test_out_of_bounds(void **state) {
  (void)state;
  expect_usage("--count", "--count", "0");  /* below min */
  expect_usage("--count", "--count", "65"); /* above max */
  expect_usage("--count", "-c", "-1");
  expect_usage("--rate", "--rate", "1.0001");
  expect_usage("--rate", "--rate", "-0.1");
  expect_usage("--level", "--level", "11");
  expect_usage("--level", "-l", "-11");
  expect_usage("--seed", "--seed", "-1"); /* u64 is never negative */
  /* The failed values did not land. */
  assert_int_equal(c.count, 4);
  assert_true(c.rate == 0.25);
  assert_int_equal(c2.level, -3);
}

static void test_bad_choice(void **state) {
  (void)state;
  expect_usage("--mode", "--mode", "medium");
  expect_usage("--mode", "--mode", "fas");    /* prefix of a choice */
  expect_usage("--mode", "--mode", "fastest"); /* extension of a choice */
  expect_usage("--mode", "--mode", "fast|slow");
  expect_usage("--mode", "--mode", "");
  assert_string_equal(c.mode, "fast");
  strata_err_clear();
  int help;
  assert_int_equal(parse(&help, "--mode", "medium", NULL), STRATA_EUSAGE);
  /* The message lists the choices. */
  assert_non_null(strstr(strata_err_msg(), "fast|slow|exact"));
}

static void test_stray_positional(void **state) {
  (void)state;
  expect_usage("stray", "stray");
  expect_usage("extra", "--count", "2", "extra");
  expect_usage("-xyz", "-xyz"); /* bundled short flags are not supported */
  expect_usage("-", "-");
}

/* Values, flags and stray arguments are quoted escaped in every message. */
static void test_garbage_quoted(void **state) {
  (void)state;
  static const char *const argvs[][3] = {
      {"--count", GARBAGE, "'" GARBAGE_QUOTED "' is not an integer"},
      {"--seed", GARBAGE, "'" GARBAGE_QUOTED "' is not a non-negative integer"},
      {"--rate", GARBAGE, "'" GARBAGE_QUOTED "' is not a finite number"},
      {"--mode", GARBAGE, "'" GARBAGE_QUOTED "' is not one of"},
      {"--" GARBAGE, "1", "unknown flag '--" GARBAGE_QUOTED "'"},
      {GARBAGE, NULL, "unexpected argument '" GARBAGE_QUOTED "'"},
  };
  for (size_t k = 0; k < sizeof argvs / sizeof argvs[0]; k++) {
    int help = -1;
    assert_int_equal(parse(&help, argvs[k][0], argvs[k][1], NULL), STRATA_EUSAGE);
    assert_quoted_msg(strata_err_msg(), argvs[k][2]);
  }
  /* A long value shows a prefix only. */
  int help = -1;
  assert_int_equal(parse(&help, "--count", "1234567890123456789012345678901234567890x", NULL),
                   STRATA_EUSAGE);
  assert_quoted_msg(strata_err_msg(), "'12345678901234567890123456789012...' is not an integer");
}

static void test_flag_given_value(void **state) {
  (void)state;
  expect_usage("--verbose", "--verbose=1");
  expect_usage("--quiet", "--quiet=");
  assert_int_equal(c.verbose, 0);
}

static void test_help(void **state) {
  (void)state;
  int help = -1;
  assert_int_equal(parse(&help, "--help", NULL), 0);
  assert_int_equal(help, 1);
  help = -1;
  assert_int_equal(parse(&help, "--count", "5", "-h", NULL), 0);
  assert_int_equal(help, 1);
  /* Parsing stops at --help: what follows is neither parsed nor an error. */
  help = -1;
  assert_int_equal(parse(&help, "--help", "--bogus", "--count", "zzz", NULL), 0);
  assert_int_equal(help, 1);
  /* A later --help does not rescue an earlier error. */
  help = -1;
  assert_int_equal(parse(&help, "--bogus", "--help", NULL), STRATA_EUSAGE);
  assert_int_equal(help, 0);
}

/* open_memstream's buffer and size live in static storage: GCC's
 * -Wdangling-pointer otherwise takes the result for a pointer to a local. */
static char *mem_buf;
static size_t mem_len;

static char *capture_help(void) {
  mem_buf = NULL;
  mem_len = 0;
  FILE *f = open_memstream(&mem_buf, &mem_len);
  assert_non_null(f);
  strata_options_help(f, groups, 2);
  fclose(f);
  return mem_buf;
}

static void test_help_lists_names_defaults_choices(void **state) {
  (void)state;
  char *out = capture_help();
  assert_non_null(out);
  /* Group titles. */
  assert_non_null(strstr(out, "test options"));
  assert_non_null(strstr(out, "more options"));
  /* Every long name, with its short form where there is one. */
  for (const strata_option *o = opts; o->name; o++) {
    char want[64];
    snprintf(want, sizeof want, "--%s", o->name);
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, o->help));
  }
  assert_non_null(strstr(out, "-c, --count N"));
  assert_non_null(strstr(out, "-v, --verbose"));
  assert_non_null(strstr(out, "--level"));
  /* Defaults and choices. */
  assert_non_null(strstr(out, "[default: 4]"));
  assert_non_null(strstr(out, "[default: 0.25]"));
  assert_non_null(strstr(out, "[default: alice]"));
  assert_non_null(strstr(out, "[default: fast]"));
  assert_non_null(strstr(out, "[default: -3]"));
  assert_non_null(strstr(out, "fast|slow|exact"));
  /* Each option on its own line, in table order. */
  const char *pc = strstr(out, "--count"), *pr = strstr(out, "--rate"),
             *pm = strstr(out, "--mode"), *pl = strstr(out, "--level");
  assert_true(pc < pr && pr < pm && pm < pl);
  int lines = 0;
  for (const char *p = out; *p; p++) lines += *p == '\n';
  assert_true(lines >= 11 + 2 + 2);
  free(out);
}

/*
 * The help lists each option's bounds beside its metavar, default and help,
 * as include/strata/options.h promises: "--count N ... [1..64]".
 */
static void test_help_lists_bounds(void **state) {
  (void)state;
  char *out = capture_help();
  assert_non_null(out);
  const char *line = strstr(out, "--count");
  assert_non_null(line);
  const char *eol = strchr(line, '\n');
  assert_non_null(eol);
  char one[256];
  snprintf(one, sizeof one, "%.*s", (int)(eol - line), line);
  free(out);
  int has_min = strstr(one, "1") != NULL && strstr(one, "64") != NULL;
  assert_true(has_min);
}

static char *capture_echo(const char *prefix) {
  mem_buf = NULL;
  mem_len = 0;
  FILE *f = open_memstream(&mem_buf, &mem_len);
  assert_non_null(f);
  strata_options_echo(f, prefix, groups, 2);
  fclose(f);
  return mem_buf;
}

static void test_echo_prints_effective_values(void **state) {
  (void)state;
  int help;
  assert_int_equal(parse(&help, "--count", "12", "--name", "eve", "-v", "--mode", "slow",
                         "--seed", "18446744073", "--rate", "0.125", NULL),
                   0);
  char *out = capture_echo("# ");
  assert_non_null(out);
  assert_non_null(strstr(out, "# test options:"));
  assert_non_null(strstr(out, "# more options:"));
  assert_non_null(strstr(out, " count=12"));
  assert_non_null(strstr(out, " name=eve"));
  assert_non_null(strstr(out, " verbose=on"));
  assert_non_null(strstr(out, " mode=slow"));
  assert_non_null(strstr(out, " seed=18446744073"));
  assert_non_null(strstr(out, " rate=0.125"));
  assert_non_null(strstr(out, " nodef-str=-"));
  assert_non_null(strstr(out, " level=-3"));
  assert_non_null(strstr(out, " quiet=off"));
  /* One line per group. */
  int lines = 0;
  for (const char *p = out; *p; p++) lines += *p == '\n';
  assert_int_equal(lines, 2);
  /* Every option appears exactly once. */
  for (const strata_option *o = opts; o->name; o++) {
    char want[64];
    snprintf(want, sizeof want, " %s=", o->name);
    const char *p = strstr(out, want);
    assert_non_null(p);
    assert_null(strstr(p + 1, want));
  }
  free(out);
}

/* ---- enum, optional values, specs ---- */

/* Parses first and the arguments after it, up to NULL, against group3. */
static int vparse3(const char *first, va_list ap) {
  char *argv[32];
  int argc = 0, help = -1;
  for (const char *a = first; a && argc < 32; a = va_arg(ap, const char *)) argv[argc++] = (char *)a;
  int rc = strata_options_parse(&group3, 1, argc, argv, &help);
  assert_int_equal(help, 0);
  return rc;
}

static int parse3(const char *first, ...) {
  va_list ap;
  va_start(ap, first);
  int rc = vparse3(first, ap);
  va_end(ap);
  return rc;
}

/* Expects a usage error, one line holding every one of the words. */
static void expect_usage3(const char *const *words, const char *first, ...) {
  va_list ap;
  va_start(ap, first);
  strata_err_clear();
  int rc = vparse3(first, ap);
  va_end(ap);
  assert_int_equal(rc, STRATA_EUSAGE);
  const char *msg = strata_err_msg();
  assert_null(strchr(msg, '\n'));
  for (; *words; words++)
    if (!strstr(msg, *words)) fail_msg("message '%s' lacks '%s'", msg, *words);
}
#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_typed_defaults(void **state) {
  (void)state;
  assert_int_equal(c3.color, 1);
  assert_int_equal(c3.depth.value, 0);
  assert_int_equal(c3.depth.given, 0);
  assert_true(c3.ratio.value == 0.5); /* a default lands but is not a value given */
  assert_int_equal(c3.ratio.given, 0);
  assert_int_equal(c3.nodef_ratio.given, 0);
  assert_true(c3.share == 1.0);
  /* A spec not given: no text, every key at its default (zero without one). */
  assert_null(c3.load);
  assert_int_equal(c3.load_ms, 0);
  assert_true(c3.load_prob == 0.0);
  assert_int_equal(c3.load_kind, 0);
  assert_true(c3.load_n == 7);
}

static void test_enum(void **state) {
  (void)state;
  assert_int_equal(parse3("--color", "red", NULL), 0);
  assert_int_equal(c3.color, 0);
  assert_int_equal(parse3("--color=blue", NULL), 0);
  assert_int_equal(c3.color, 2);
  expect_usage3(WORDS("--color", "'yellow'", "red|green|blue"), "--color", "yellow", NULL);
  expect_usage3(WORDS("--color", "'gree'"), "--color", "gree", NULL);
  expect_usage3(WORDS("--color", "''"), "--color", "", NULL);
  expect_usage3(WORDS("--color", "'red|green'"), "--color", "red|green", NULL);
  expect_usage3(WORDS("--color", "needs a value"), "--color", NULL);
  /* A flag where the value should be: the value is missing, said so. */
  expect_usage3(WORDS("--color needs a value", "'--ratio'", "--color=VALUE"), "--color", "--ratio",
                "2", NULL);
  assert_int_equal(c3.color, 2); /* the failures did not land */
  /* A value that starts with "--" goes as --NAME=VALUE; a negative number is a value. */
  assert_int_equal(parse3("--nodef-ratio", "-2", NULL), 0);
  assert_true(c3.nodef_ratio.value == -2);
}

static void test_optional_values(void **state) {
  (void)state;
  assert_int_equal(parse3("--depth", "0", "--nodef-ratio", "2.5", NULL), 0);
  assert_int_equal(c3.depth.value, 0);
  assert_int_equal(c3.depth.given, 1); /* given, even with the value it had */
  assert_true(c3.nodef_ratio.value == 2.5);
  assert_int_equal(c3.nodef_ratio.given, 1);
  assert_int_equal(c3.ratio.given, 0);
  assert_int_equal(parse3("--ratio=0.5", "--depth", "9", NULL), 0);
  assert_int_equal(c3.ratio.given, 1);
  assert_int_equal(c3.depth.value, 9);
  /* Bad values and bounds, with the value and its given flag untouched. */
  assert_int_equal(strata_options_defaults(&group3, 1), 0);
  expect_usage3(WORDS("--depth", "not an integer"), "--depth", "x", NULL);
  expect_usage3(WORDS("--depth", "not an integer"), "--depth", "1.5", NULL);
  expect_usage3(WORDS("--depth", "[0, 9]", "10"), "--depth", "10", NULL);
  expect_usage3(WORDS("--depth", "[0, 9]", "-1"), "--depth", "-1", NULL);
  expect_usage3(WORDS("--depth", "out of range"), "--depth", "3000000000", NULL);
  expect_usage3(WORDS("--ratio", "not a finite number"), "--ratio", "nan", NULL);
  expect_usage3(WORDS("--ratio", "[0, 1]", "1.5"), "--ratio", "1.5", NULL);
  expect_usage3(WORDS("--ratio", "needs a value"), "--ratio", NULL);
  assert_int_equal(c3.depth.given, 0);
  assert_int_equal(c3.ratio.given, 0);
  assert_true(c3.ratio.value == 0.5);
}

static void test_open_min(void **state) {
  (void)state;
  assert_int_equal(parse3("--share", "1e-300", NULL), 0);
  assert_true(c3.share == 1e-300);
  assert_int_equal(parse3("--share", "1", NULL), 0); /* max stays inclusive */
  expect_usage3(WORDS("--share", "(0, 1]", "got 0"), "--share", "0", NULL);
  expect_usage3(WORDS("--share", "(0, 1]"), "--share", "-0.5", NULL);
  expect_usage3(WORDS("--share", "(0, 1]"), "--share", "1.01", NULL);
}

static void test_spec_good(void **state) {
  (void)state;
  assert_int_equal(parse3("--load", "ms=20,prob=0.5", NULL), 0);
  assert_string_equal(c3.load, "ms=20,prob=0.5");
  assert_int_equal(c3.load_ms, 20);
  assert_true(c3.load_prob == 0.5);
  assert_int_equal(c3.load_kind, 0); /* defaults of the keys not given */
  assert_true(c3.load_n == 7);
  /* Any order, every key; bounds inclusive but prob's open minimum. */
  assert_int_equal(parse3("--load=n=100,kind=io,prob=1,ms=0", NULL), 0);
  assert_int_equal(c3.load_ms, 0);
  assert_true(c3.load_prob == 1.0);
  assert_int_equal(c3.load_kind, 1);
  assert_true(c3.load_n == 100);
  /* Given again, the keys left out go back to their defaults. */
  assert_int_equal(parse3("--load", "prob=0.25,ms=1000", NULL), 0);
  assert_int_equal(c3.load_kind, 0);
  assert_true(c3.load_n == 7);
  assert_int_equal(c3.load_ms, 1000);
}

static void test_spec_bare_value_is_first_key(void **state) {
  (void)state;
  /* Without any '=', the value is the first key's: here prob stays missing. */
  expect_usage3(WORDS("--load '15'", "missing prob=P"), "--load", "15", NULL);
  static const strata_option k[] = {
      {"delay", 0, STRATA_OPT_INT, offsetof(cfg3, load_ms), NULL, "MS", 0, 100, NULL, NULL, NULL},
      {"n", 0, STRATA_OPT_U64, offsetof(cfg3, load_n), "3", "N", 0, 0, NULL, NULL, NULL},
      {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};
  static const strata_option t[] = {
      {"lag", 0, STRATA_OPT_SPEC, offsetof(cfg3, load), NULL, "delay=MS[,n=N]", 0, 0, NULL,
       "a spec whose only required key is first", k},
      {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};
  strata_optgroup g = {"lag", t, &c3};
  assert_int_equal(strata_options_defaults(&g, 1), 0);
  char flag[] = "--lag", v[] = "42";
  char *argv[] = {flag, v};
  int help;
  assert_int_equal(strata_options_parse(&g, 1, 2, argv, &help), 0);
  assert_int_equal(c3.load_ms, 42);
  assert_true(c3.load_n == 3);
  char v2[] = "101";
  argv[1] = v2;
  assert_int_equal(strata_options_parse(&g, 1, 2, argv, &help), STRATA_EUSAGE);
  assert_non_null(strstr(strata_err_msg(), "--lag '101': delay: must be in [0, 100]"));
}

static void test_spec_bad(void **state) {
  (void)state;
  /* Every message names the flag, the text and, where there is one, the key. */
  expect_usage3(WORDS("--load 'ms=x,prob=1'", "ms:", "'x' is not an integer"), "--load",
                "ms=x,prob=1", NULL);
  expect_usage3(WORDS("--load 'ms=5,prob=abc'", "prob:", "not a finite number"), "--load",
                "ms=5,prob=abc", NULL);
  expect_usage3(WORDS("--load 'ms=5,prob=1,n=-1'", "n:", "not a non-negative integer"), "--load",
                "ms=5,prob=1,n=-1", NULL);
  expect_usage3(WORDS("--load 'ms=1001,prob=1'", "ms:", "[0, 1000]", "1001"), "--load",
                "ms=1001,prob=1", NULL);
  expect_usage3(WORDS("--load 'ms=5,prob=0'", "prob:", "(0, 1]", "got 0"), "--load",
                "ms=5,prob=0", NULL);
  expect_usage3(WORDS("--load 'ms=5,prob=2'", "prob:", "(0, 1]", "got 2"), "--load",
                "ms=5,prob=2", NULL);
  expect_usage3(WORDS("--load 'ms=5,prob=1,kind=gpu'", "kind:", "'gpu' is not one of cpu|io"),
                "--load", "ms=5,prob=1,kind=gpu", NULL);
  /* Unknown keys, including a prefix and a different case. */
  expect_usage3(WORDS("--load 'ms=5,foo=3'", "unknown key 'foo'", "(expected ms, prob, kind or n)"), "--load",
                "ms=5,foo=3", NULL);
  expect_usage3(WORDS("unknown key 'm'"), "--load", "m=5,prob=1", NULL);
  expect_usage3(WORDS("unknown key 'MS'"), "--load", "MS=5,prob=1", NULL);
  expect_usage3(WORDS("unknown key ''"), "--load", "=5,ms=1,prob=1", NULL);
  /* Missing required keys. */
  expect_usage3(WORDS("--load 'prob=0.5'", "missing ms=MS"), "--load", "prob=0.5", NULL);
  expect_usage3(WORDS("--load 'ms=5,kind=io'", "missing prob=P"), "--load", "ms=5,kind=io", NULL);
  /* Items that are not key=value. */
  expect_usage3(WORDS("--load 'ms=5,'", "'' is not key=value"), "--load", "ms=5,", NULL);
  expect_usage3(WORDS("'prob' is not key=value"), "--load", "ms=5,prob", NULL);
  expect_usage3(WORDS("'' is not key=value"), "--load", "ms=5,,prob=1", NULL);
  /* An empty value and one too long to be a number. */
  expect_usage3(WORDS("ms:", "'' is not an integer"), "--load", "ms=,prob=1", NULL);
  char long_value[300] = "prob=1,ms=";
  memset(long_value + strlen(long_value), '1', 200);
  long_value[sizeof long_value - 1] = 0;
  expect_usage3(WORDS("ms:", "too long"), "--load", long_value, NULL);
  expect_usage3(WORDS("--load", "needs a value"), "--load", NULL);
  /* Garbage is quoted, in the text and in the key. */
  strata_err_clear();
  expect_usage3(WORDS("unknown key"), "--load", GARBAGE "=1", NULL);
  assert_quoted_msg(strata_err_msg(), "'" GARBAGE_QUOTED "'");
}

static void test_spec_bad_table(void **state) {
  (void)state;
  /* Keys hold numbers or enums: a string key would point into a copy. */
  static const strata_option k[] = {
      {"path", 0, STRATA_OPT_STRING, offsetof(cfg3, load), NULL, "P", 0, 0, NULL, NULL, NULL},
      {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};
  static const strata_option t[] = {
      {"bad", 0, STRATA_OPT_SPEC, offsetof(cfg3, load), NULL, "path=P", 0, 0, NULL, "bad", k},
      {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};
  strata_optgroup g = {"bad", t, &c3};
  assert_int_equal(strata_options_defaults(&g, 1), STRATA_EINVAL);
  assert_non_null(strstr(strata_err_msg(), "--bad: path"));
  /* A key's default outside its bounds is a bad table too. */
  static const strata_option k2[] = {
      {"n", 0, STRATA_OPT_INT, offsetof(cfg3, load_ms), "5", "N", 1, 3, NULL, NULL, NULL},
      {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};
  static const strata_option t2[] = {
      {"bad", 0, STRATA_OPT_SPEC, offsetof(cfg3, load), NULL, "n=N", 0, 0, NULL, "bad", k2},
      {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};
  g.opts = t2;
  assert_int_equal(strata_options_defaults(&g, 1), STRATA_EINVAL);
  assert_non_null(strstr(strata_err_msg(), "default of --bad: n: must be in [1, 3]"));
}

/* group3's --help (help) or echo (!help), in a buffer to free. */
static char *capture3(int help) {
  mem_buf = NULL;
  mem_len = 0;
  FILE *f = open_memstream(&mem_buf, &mem_len);
  assert_non_null(f);
  if (help)
    strata_options_help(f, &group3, 1);
  else
    strata_options_echo(f, "", &group3, 1);
  fclose(f);
  return mem_buf;
}

static void test_typed_help_and_echo(void **state) {
  (void)state;
  char *out = capture3(1);
  assert_non_null(strstr(out, "--color C"));
  assert_non_null(strstr(out, "{red|green|blue} [default: green]"));
  assert_non_null(strstr(out, "optional int [0..9]\n"));
  assert_non_null(strstr(out, "optional double [0..1] [default: 0.5]"));
  assert_non_null(strstr(out, "a share above 0 (0..1] [default: 1]"));
  assert_non_null(strstr(out, "--load ms=MS,prob=P[,kind=K,n=N]"));
  assert_non_null(strstr(out, "(ms required [0..1000]; prob required (0..1]; kind {cpu|io} "
                              "[default: cpu]; n [1..100] [default: 7])"));
  free(out);

  assert_int_equal(parse3("--color", "blue", "--ratio", "0.75", "--load", "prob=0.5,ms=3", NULL),
                   0);
  out = capture3(0);
  assert_non_null(strstr(out, " color=blue "));
  assert_non_null(strstr(out, " depth=- ")); /* optional, not given */
  assert_non_null(strstr(out, " ratio=0.75 "));
  assert_non_null(strstr(out, " nodef-ratio=- "));
  assert_non_null(strstr(out, " load=ms=3,prob=0.5,kind=cpu,n=7\n"));
  free(out);
  /* A spec not given shows "-". */
  assert_int_equal(strata_options_defaults(&group3, 1), 0);
  out = capture3(0);
  assert_non_null(strstr(out, " load=-\n"));
  assert_non_null(strstr(out, " ratio=- "));
  free(out);
}

/* ---- resumable options and the run's settings ---- */

/* Every type of option, some marked STRATA_OPT_RESUMABLE (R_*), in two
 * groups; each table exists twice, with RB or-ed into every entry (0, or
 * STRATA_OPT_RESUMABLE to mark all of them), so that the bit's effect on
 * everything but the settings can be compared. */
typedef struct scfg {
  int alpha;
  const char *out;
  uint64_t beta;
  double gamma;
  int verbose;
  const char *name;
  int fast;
  const char *kind;
  int level;
  int passes;
  strata_opt_int opt_int;
  strata_opt_double opt_double;
  const char *spec;
  int spec_n;
  double spec_x;
  int spec_k;
  double rate_log;
  const char *load;
  int load_ms;
} scfg;

typedef struct scfg2 {
  uint64_t seed;
  const char *log;
  double tol;
} scfg2;

#define R STRATA_OPT_RESUMABLE
#define S(f) offsetof(scfg, f)
#define S2(f) offsetof(scfg2, f)
#define SETTINGS_TABLES(SUFFIX, RB)                                                                \
  static const strata_option spec_keys##SUFFIX[] = {                                               \
      {"n", 0, STRATA_OPT_INT | (RB), S(spec_n), NULL, "N", 1, 100, NULL, NULL, NULL},             \
      {"x", 0, STRATA_OPT_DOUBLE | STRATA_OPT_OPEN_MIN | (RB), S(spec_x), "0.5", "X", 0, 2, NULL,  \
       NULL, NULL},                                                                                \
      {"k", 0, STRATA_OPT_ENUM | (RB), S(spec_k), "off", "K", 0, 0, "off|on", NULL, NULL},         \
      {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};                                        \
  static const strata_option rload_keys##SUFFIX[] = {                                               \
      {"ms", 0, STRATA_OPT_INT | (RB), S(load_ms), "5", "MS", 0, 50, NULL, NULL, NULL},            \
      {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};                                        \
  static const strata_option sopts##SUFFIX[] = {                                                   \
      {"alpha", 'a', STRATA_OPT_INT | (RB), S(alpha), "3", "N", 1, 9, NULL, "an int", NULL},       \
      {"out", 'o', STRATA_OPT_STRING | R | (RB), S(out), "x.txt", "FILE", 0, 0, NULL,              \
       "an output (resumable)", NULL},                                                             \
      {"beta", 0, STRATA_OPT_U64 | (RB), S(beta), "12345678901", "U", 0, 0, NULL, "a u64", NULL},  \
      {"gamma", 0, STRATA_OPT_DOUBLE | STRATA_OPT_OPEN_MIN | (RB), S(gamma), "0.125", "G", 0, 1,   \
       NULL, "a double in (0, 1]", NULL},                                                          \
      {"verbose", 'v', STRATA_OPT_FLAG | R | (RB), S(verbose), NULL, NULL, 0, 0, NULL,             \
       "a flag (resumable)", NULL},                                                                \
      {"name", 'n', STRATA_OPT_STRING | (RB), S(name), NULL, "NAME", 0, 0, NULL, "a string",      \
       NULL},                                                                                      \
      {"fast", 0, STRATA_OPT_FLAG | (RB), S(fast), NULL, NULL, 0, 0, NULL, "a flag", NULL},        \
      {"kind", 0, STRATA_OPT_CHOICE | (RB), S(kind), "b", "K", 0, 0, "a|b|c", "a choice", NULL},   \
      {"level", 0, STRATA_OPT_ENUM | (RB), S(level), "mid", "L", 0, 0, "low|mid|high", "an enum",  \
       NULL},                                                                                      \
      {"passes", 'p', STRATA_OPT_INT | R | (RB), S(passes), "10", "N", 1, 1000, NULL,              \
       "passes (resumable)", NULL},                                                                \
      {"opt-int", 0, STRATA_OPT_INT_OPTIONAL | (RB), S(opt_int), NULL, "N", 0, 99, NULL,           \
       "an optional int", NULL},                                                                   \
      {"opt-double", 0, STRATA_OPT_DOUBLE_OPTIONAL | (RB), S(opt_double), "0.5", "X", 0, 1, NULL, \
       "an optional double", NULL},                                                                \
      {"spec", 0, STRATA_OPT_SPEC | (RB), S(spec), NULL, "n=N[,x=X,k=K]", 0, 0, NULL, "a spec",    \
       spec_keys##SUFFIX},                                                                         \
      {"rate-log", 0, STRATA_OPT_DOUBLE | STRATA_OPT_OPEN_MIN | R | (RB), S(rate_log), "2.5", "S",  \
       0, 10, NULL, "logging rate (resumable)", NULL},                                             \
      {"load", 0, STRATA_OPT_SPEC | R | (RB), S(load), NULL, "ms=MS", 0, 0, NULL,                  \
       "a spec (resumable)", rload_keys##SUFFIX},                                                   \
      {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};                                        \
  static const strata_option sopts2##SUFFIX[] = {                                                  \
      {"log", 0, STRATA_OPT_CHOICE | R | (RB), S2(log), "info", "LVL", 0, 0, "info|debug",         \
       "a choice (resumable)", NULL},                                                              \
      {"seed", 's', STRATA_OPT_U64 | (RB), S2(seed), "42", "S", 0, 0, NULL, "a seed", NULL},        \
      {"tol", 0, STRATA_OPT_DOUBLE | (RB), S2(tol), "1e-06", "T", 0, 0, NULL, "a tolerance", NULL}, \
      {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};

SETTINGS_TABLES(, 0)
SETTINGS_TABLES(_all_r, R)
#undef SETTINGS_TABLES
#undef S
#undef S2

static int is_resumable_name(const char *name) {
  static const char *const r[] = {"out", "verbose", "passes", "rate-log", "load", "log"};
  for (size_t i = 0; i < sizeof r / sizeof *r; i++)
    if (!strcmp(name, r[i])) return 1;
  return 0;
}

/* Both groups bound to fresh structs, defaults stored. */
static void settings_groups(strata_optgroup g[2], scfg *a, scfg2 *b, int all_r) {
  memset(a, 0xA5, sizeof *a);
  memset(b, 0xA5, sizeof *b);
  g[0] = (strata_optgroup){"run", all_r ? sopts_all_r : sopts, a};
  g[1] = (strata_optgroup){"misc", all_r ? sopts2_all_r : sopts2, b};
  assert_int_equal(strata_options_defaults(g, 2), 0);
}

static int parse_groups(strata_optgroup *g, int n, const char *const *args, int *help) {
  char *argv[40];
  int argc = 0;
  for (; args[argc]; argc++) argv[argc] = (char *)args[argc];
  return strata_options_parse(g, n, argc, argv, help);
}

static char *capture_groups(const strata_optgroup *g, int n, int help) {
  mem_buf = NULL;
  mem_len = 0;
  FILE *f = open_memstream(&mem_buf, &mem_len);
  assert_non_null(f);
  if (help) strata_options_help(f, g, n);
  else strata_options_echo(f, "> ", g, n);
  fclose(f);
  return mem_buf;
}

/* Whether a setting and an echo token say the same: the same text, or for
 * a double the value the echo's %g shows (settings write 17 digits). */
static int same_value(const char *set, const char *tok) {
  if (strcmp(set, tok) == 0) return 1;
  size_t n = strcspn(tok, "=");
  if (strncmp(set, tok, n + 1) != 0) return 0;
  char *end;
  double v = strtod(set + n + 1, &end);
  if (*end) return 0;
  char shown[64];
  snprintf(shown, sizeof shown, "%g", v);
  return strcmp(shown, tok + n + 1) == 0;
}

/* The settings against want (NULL-terminated), and against the echo: the
 * echo's "name=value" of every option not resumable, in the same order. */
static void check_settings(const strata_optgroup *g, const char *const *want) {
  char **set = NULL;
  int n = -1;
  size_t live = strata_alloc_live();
  assert_int_equal(strata_options_settings(g, 2, &set, &n), 0);
  assert_non_null(set);
  int k = 0;
  for (; want[k]; k++) {
    if (k >= n) fail_msg("settings end after %d entries, want '%s' next", n, want[k]);
    if (strcmp(set[k], want[k]) != 0) fail_msg("setting %d is '%s', want '%s'", k, set[k], want[k]);
  }
  assert_int_equal(n, k);
  char *echo = capture_groups(g, 2, 0);
  int e = 0;
  for (char *line = strtok(echo, "\n"); line; line = strtok(NULL, "\n")) {
    assert_memory_equal(line, "> ", 2);
    char *p = strchr(line, ':');
    assert_non_null(p);
    for (char *tok = strtok_r(p + 1, " ", &p); tok; tok = strtok_r(NULL, " ", &p)) {
      char name[64];
      snprintf(name, sizeof name, "%.*s", (int)strcspn(tok, "="), tok);
      if (is_resumable_name(name)) continue;
      if (e >= n || !same_value(set[e], tok))
        fail_msg("echo has '%s' where the settings have '%s'", tok, e < n ? set[e] : "(end)");
      e++;
    }
  }
  assert_int_equal(e, n);
  free(echo);
  strata_free(set);
  assert_int_equal(strata_alloc_live(), live);
}

static void test_settings_list_the_options_not_resumable(void **state) {
  (void)state;
  strata_optgroup g[2];
  scfg a;
  scfg2 b;
  settings_groups(g, &a, &b, 0);
  /* Defaults: every type as the echo writes it, resumable ones left out. */
  static const char *const defaults[] = {
      "alpha=3",    "beta=12345678901", "gamma=0.125", "name=-",      "fast=off",
      "kind=b",     "level=mid",        "opt-int=-",   "opt-double=-", "spec=-",
      "seed=42",    "tol=9.9999999999999995e-07", NULL};
  check_settings(g, defaults);
  /* After a command line, the values given. */
  static const char *const args[] = {"--alpha", "5", "--name=bob", "--fast", "--kind", "c",
                                     "--level", "high", "--opt-int", "7", "--opt-double", "0.25",
                                     "--spec", "n=4,x=1.5", "-s", "18446744073709551615",
                                     "--gamma", "1", "--tol", "0.001", "-o", "y.txt", "-p", "20",
                                     "-v", "--rate-log", "9", "--load", "ms=7", "--log", "debug",
                                     NULL};
  int help = -1;
  assert_int_equal(parse_groups(g, 2, args, &help), 0);
  assert_int_equal(help, 0);
  static const char *const given[] = {
      "alpha=5",   "beta=12345678901", "gamma=1",   "name=bob",     "fast=on",
      "kind=c",    "level=high",       "opt-int=7", "opt-double=0.25", "spec=n=4,x=1.5,k=off",
      "seed=18446744073709551615",     "tol=0.001", NULL};
  check_settings(g, given);
  /* The resumable options took their values, and they change no setting. */
  assert_string_equal(a.out, "y.txt");
  assert_int_equal(a.passes, 20);
  assert_int_equal(a.verbose, 1);
  assert_true(a.rate_log == 9.0);
  assert_int_equal(a.load_ms, 7);
  assert_string_equal(b.log, "debug");
  scfg a2;
  scfg2 b2;
  strata_optgroup g2[2];
  settings_groups(g2, &a2, &b2, 0);
  static const char *const same[] = {"--spec", "x=1.5,n=4", "--opt-double=0.25", "--opt-int", "7",
                                     "--level", "high", "--kind", "c", "--fast", "--name", "bob",
                                     "--alpha", "5", "--seed", "18446744073709551615", "--gamma",
                                     "1", "--tol", "1e-3", NULL};
  assert_int_equal(parse_groups(g2, 2, same, &help), 0);
  check_settings(g2, given);
  assert_string_equal(a2.out, "x.txt");
  assert_int_equal(a2.passes, 10);
  /* Doubles the echo's %g shows alike are different settings. */
  scfg a3;
  scfg2 b3;
  strata_optgroup g3[2];
  settings_groups(g3, &a3, &b3, 0);
  static const char *const close[] = {"--tol", "0.0010000001", NULL};
  assert_int_equal(parse_groups(g3, 2, close, &help), 0);
  char **set = NULL;
  int n = 0;
  assert_int_equal(strata_options_settings(g3, 2, &set, &n), 0);
  assert_string_equal(set[n - 1], "tol=0.0010000001000000001");
  strata_free(set);
}

/* Settings with nothing to list, and out of memory. */
static void test_settings_empty_and_oom(void **state) {
  (void)state;
  strata_optgroup g[2];
  scfg a;
  scfg2 b;
  settings_groups(g, &a, &b, 1);
  char **set = NULL;
  int n = -1;
  assert_int_equal(strata_options_settings(g, 2, &set, &n), 0);
  assert_int_equal(n, 0);
  strata_free(set);
  n = -1;
  assert_int_equal(strata_options_settings(g, 0, &set, &n), 0);
  assert_int_equal(n, 0);
  strata_free(set);
  settings_groups(g, &a, &b, 0);
  strata_alloc_fail_after(1);
  set = (char **)&set;
  n = -1;
  int rc = strata_options_settings(g, 2, &set, &n);
  strata_alloc_fail_after(0);
  assert_int_equal(rc, STRATA_ENOMEM);
  assert_null(set);
  assert_int_equal(n, 0);
  assert_int_equal(strata_alloc_live(), live0);
}

/* STRATA_OPT_RESUMABLE changes the settings and nothing else: the same
 * defaults, the same values parsed, the same errors, --help and echo byte
 * for byte, with the bit on every option or on none. */
static void test_resumable_bit_changes_nothing_else(void **state) {
  (void)state;
  strata_optgroup plain[2], marked[2];
  scfg pa, ma;
  scfg2 pb, mb;
  settings_groups(plain, &pa, &pb, 0);
  settings_groups(marked, &ma, &mb, 1);
  char *h1 = capture_groups(plain, 2, 1), *h2 = capture_groups(marked, 2, 1);
  assert_string_equal(h1, h2);
  assert_non_null(strstr(h1, "(0..1] [default: 0.125]")); /* the open minimum shows */
  free(h1);
  free(h2);
  const char *const *const lines[] = {
      (const char *const[]){NULL},
      (const char *const[]){"--alpha", "9", "-o", "z", "--beta", "0", "--gamma", "0.5", "-v",
                            "-n", "x", "--fast", "--kind=a", "--level", "low", "-p", "1000",
                            "--opt-int", "0", "--opt-double", "1", "--spec", "3",
                            "--rate-log", "10", "--load", "ms=50", "--log", "info", "-s", "7",
                            "--tol", "-2.5", NULL},
      (const char *const[]){"--spec", "n=100,k=on,x=2", "--load=ms=0", NULL},
  };
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
    int help1 = -1, help2 = -1;
    settings_groups(plain, &pa, &pb, 0);
    settings_groups(marked, &ma, &mb, 1);
    assert_int_equal(parse_groups(plain, 2, lines[i], &help1), 0);
    assert_int_equal(parse_groups(marked, 2, lines[i], &help2), 0);
    assert_int_equal(help1, help2);
    char *e1 = capture_groups(plain, 2, 0), *e2 = capture_groups(marked, 2, 0);
    assert_string_equal(e1, e2);
    free(e1);
    free(e2);
    /* The structs agree field by field (strings by content). */
    assert_int_equal(pa.alpha, ma.alpha);
    assert_true(pa.beta == ma.beta && pa.gamma == ma.gamma && pa.rate_log == ma.rate_log);
    assert_int_equal(pa.verbose, ma.verbose);
    assert_int_equal(pa.fast, ma.fast);
    assert_int_equal(pa.level, ma.level);
    assert_int_equal(pa.passes, ma.passes);
    assert_int_equal(pa.opt_int.value, ma.opt_int.value);
    assert_int_equal(pa.opt_int.given, ma.opt_int.given);
    assert_true(pa.opt_double.value == ma.opt_double.value);
    assert_int_equal(pa.opt_double.given, ma.opt_double.given);
    assert_int_equal(pa.spec_n, ma.spec_n);
    assert_true(pa.spec_x == ma.spec_x);
    assert_int_equal(pa.spec_k, ma.spec_k);
    assert_int_equal(pa.load_ms, ma.load_ms);
    assert_string_equal(pa.out, ma.out);
    assert_string_equal(pa.kind, ma.kind);
    assert_true((pa.name == NULL) == (ma.name == NULL));
    assert_true((pa.spec == NULL) == (ma.spec == NULL));
    assert_true(pb.seed == mb.seed && pb.tol == mb.tol);
    assert_string_equal(pb.log, mb.log);
  }
  /* Values the table refuses: the same code and message either way. */
  const char *const *const bad[] = {
      (const char *const[]){"--alpha", "10", NULL},  (const char *const[]){"--gamma", "0", NULL},
      (const char *const[]){"--rate-log", "0", NULL}, (const char *const[]){"--kind", "d", NULL},
      (const char *const[]){"--level", "top", NULL}, (const char *const[]){"-p", "0", NULL},
      (const char *const[]){"--opt-int", "100", NULL}, (const char *const[]){"--spec", "x=1", NULL},
      (const char *const[]){"--spec", "n=1,x=0", NULL}, (const char *const[]){"--load", "ms=51", NULL},
      (const char *const[]){"--verbose=1", NULL},    (const char *const[]){"--beta", "-1", NULL},
      (const char *const[]){"--log", "warn", NULL},  (const char *const[]){"--out", NULL},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    int help = -1;
    settings_groups(plain, &pa, &pb, 0);
    settings_groups(marked, &ma, &mb, 1);
    strata_err_clear();
    int rc1 = parse_groups(plain, 2, bad[i], &help);
    char msg1[512];
    snprintf(msg1, sizeof msg1, "%s", strata_err_msg());
    strata_err_clear();
    int rc2 = parse_groups(marked, 2, bad[i], &help);
    assert_int_equal(rc1, STRATA_EUSAGE);
    assert_int_equal(rc2, rc1);
    assert_string_equal(strata_err_msg(), msg1);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_defaults_land_in_struct, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_default_is_einval, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_default_message, setup, teardown),
      cmocka_unit_test_setup_teardown(test_long_with_space, setup, teardown),
      cmocka_unit_test_setup_teardown(test_long_with_equals, setup, teardown),
      cmocka_unit_test_setup_teardown(test_short_and_flags, setup, teardown),
      cmocka_unit_test_setup_teardown(test_string_points_into_argv, setup, teardown),
      cmocka_unit_test_setup_teardown(test_last_value_wins_and_bounds_inclusive, setup, teardown),
      cmocka_unit_test_setup_teardown(test_u64_full_range, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_flag, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_value, setup, teardown),
      cmocka_unit_test_setup_teardown(test_not_a_number, setup, teardown),
      cmocka_unit_test_setup_teardown(test_out_of_bounds, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_choice, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stray_positional, setup, teardown),
      cmocka_unit_test_setup_teardown(test_flag_given_value, setup, teardown),
      cmocka_unit_test_setup_teardown(test_help, setup, teardown),
      cmocka_unit_test_setup_teardown(test_help_lists_names_defaults_choices, setup, teardown),
      cmocka_unit_test_setup_teardown(test_help_lists_bounds, setup, teardown),
      cmocka_unit_test_setup_teardown(test_echo_prints_effective_values, setup, teardown),
      cmocka_unit_test_setup_teardown(test_garbage_quoted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_typed_defaults, setup, teardown),
      cmocka_unit_test_setup_teardown(test_enum, setup, teardown),
      cmocka_unit_test_setup_teardown(test_optional_values, setup, teardown),
      cmocka_unit_test_setup_teardown(test_open_min, setup, teardown),
      cmocka_unit_test_setup_teardown(test_spec_good, setup, teardown),
      cmocka_unit_test_setup_teardown(test_spec_bare_value_is_first_key, setup, teardown),
      cmocka_unit_test_setup_teardown(test_spec_bad, setup, teardown),
      cmocka_unit_test_setup_teardown(test_spec_bad_table, setup, teardown),
      cmocka_unit_test_setup_teardown(test_typed_help_and_echo, setup, teardown),
      cmocka_unit_test_setup_teardown(test_settings_list_the_options_not_resumable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_settings_empty_and_oom, setup, teardown),
      cmocka_unit_test_setup_teardown(test_resumable_bit_changes_nothing_else, setup, teardown),
  };
  return cmocka_run_group_tests_name("options", tests, NULL, NULL);
}
