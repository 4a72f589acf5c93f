/*
 * strata_blocksum: runs the blocksum app through the same driver as the
 * strata CLI (apps/cli/driver.h): one option table per program, rank 0 alone
 * printing (a worker prints only an error of its own), and every rank
 * exiting with the same code.
 *
 * Exit codes: 0 ok (and, with --model-out, every check passed), 2 usage
 * error, 1 runtime error or a failed check.
 */
#include <stdio.h>

#include "apps/cli/driver.h"
#include "blocksum.h"

static void print_summary(const strata_run_result *r, const strata_engine_opts *opts) {
  const strata_app *app = r->app;
  printf("summary: %s %s, %d worker%s, %d strata, depth %d, %d passes, %llu triples\n", app->name,
         strata_mode_name(r->mode), r->workers, r->workers == 1 ? "" : "s", r->strata, r->depth, r->passes,
         (unsigned long long)r->n_examples);
  printf("  last pass:");
  for (int i = 0; i < app->n_objectives; i++)
    printf(" %s %.0f", app->objective_names[i], r->objectives[i]);
  printf("\n");
  if (opts->model_out) printf("  checks passed; report in %s/%s\n", opts->model_out, BLOCKSUM_REPORT);
}

int main(int argc, char **argv) {
  strata_driver d = {.prog = "strata_blocksum", .summary = print_summary};
  return strata_driver_main(&blocksum_app, &d, argc - 1, argv + 1, argc, argv);
}
