/*
 * bench/synth_ratings.c - writes the synthetic rating generator's output as
 * LIBMF text files ("user item rating" per line, ids from 0), so that strata
 * and other systems (LIBMF through bench/libmf_run) read the very same
 * ratings from disk. A seeded fraction is held out into the test file
 * (strata_ratings_split, as `strata mf --test-fraction` splits).
 *
 * Each file is written atomically (a temporary name renamed on success).
 * Exit status 2 for a bad flag or spec, 1 for a failure to write.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "strata/core.h"
#include "strata/options.h"
#include "strata/apps/ratings.h"

#define PROG "synth_ratings"

typedef struct synth_opts {
  const char *data, *train_out, *test_out;
  double test_fraction;
  uint64_t seed;
} synth_opts;

#define O(field) offsetof(synth_opts, field)
static const strata_option synth_options[] = {
    {"data", 'd', STRATA_OPT_STRING, O(data),
     "synth:users=71567,items=10681,ratings=11111171,rank=10,noise=0.5,seed=1", "synth:...",
     0, 0, NULL, "the generator's spec, as strata mf --data takes it", NULL},
    {"test-fraction", 0, STRATA_OPT_DOUBLE, O(test_fraction), "0.1", "F", 0, 0.99, NULL,
     "hold out this fraction into --test-out (0: no test file)", NULL},
    {"seed", 's', STRATA_OPT_U64, O(seed), "1", "X", 0, 0, NULL, "seed of the split", NULL},
    {"train-out", 0, STRATA_OPT_STRING, O(train_out), NULL, "FILE", 0, 0, NULL,
     "training ratings, LIBMF text (required)", NULL},
    {"test-out", 0, STRATA_OPT_STRING, O(test_out), NULL, "FILE", 0, 0, NULL,
     "held-out ratings, LIBMF text (required with a test fraction)", NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};

static int fill(FILE *f, void *ud) {
  const strata_ratings *rs = ud;
  for (size_t j = 0; j < rs->n; j++)
    if (fprintf(f, "%u %u %.9g\n", rs->r[j].user, rs->r[j].item, (double)rs->r[j].value) < 0)
      return strata_err_set(STRATA_EIO, "write failed");
  return 0;
}

int main(int argc, char **argv) {
  synth_opts o;
  strata_optgroup g = {"options", synth_options, &o};
  int help = 0;
  int rc = strata_options_defaults(&g, 1);
  if (!rc) rc = strata_options_parse(&g, 1, argc - 1, argv + 1, &help);
  if (!rc && !help && !o.train_out)
    rc = strata_err_set(STRATA_EUSAGE, "--train-out is required");
  if (!rc && !help && o.test_fraction > 0 && !o.test_out)
    rc = strata_err_set(STRATA_EUSAGE, "--test-out is required with --test-fraction > 0");
  if (!rc && !help && strncmp(o.data, "synth:", 6) != 0)
    rc = strata_err_set(STRATA_EUSAGE, "--data: expected a synth: spec");
  if (rc || help) {
    if (rc) fprintf(stderr, PROG ": %s\n", strata_err_msg());
    else {
      printf("usage: " PROG " --train-out FILE [--test-out FILE] [options]\n"
             "Writes the synthetic ratings as LIBMF text files.\n\n");
      strata_options_help(stdout, &g, 1);
    }
    return rc ? 2 : 0;
  }
  strata_synth_spec spec;
  strata_ratings train, test;
  memset(&train, 0, sizeof train);
  memset(&test, 0, sizeof test);
  strata_synth_defaults(&spec);
  int code = 1;
  if ((rc = strata_synth_parse(o.data, &spec))) {
    code = 2;
    goto fail;
  }
  if ((rc = strata_synth_generate(&spec, &train))) goto fail;
  if (o.test_fraction > 0 && (rc = strata_ratings_split(&train, o.test_fraction, o.seed, &test)))
    goto fail;
  if ((rc = strata_write_atomic(o.train_out, fill, &train))) goto fail;
  if (o.test_fraction > 0 && (rc = strata_write_atomic(o.test_out, fill, &test))) goto fail;
  fprintf(stderr, PROG ": %zu training ratings to %s, %zu test ratings%s%s\n", train.n,
          o.train_out, test.n, o.test_fraction > 0 ? " to " : "",
          o.test_fraction > 0 ? o.test_out : "");
  code = 0;
fail:
  if (code) fprintf(stderr, PROG ": %s\n", strata_err_msg());
  strata_ratings_close(&train);
  strata_ratings_close(&test);
  return code;
}
