/*
 * strata_blocksum: runs the blocksum app through strata_program_main
 * (strata/main.h) with a summary of its own.
 *
 * Exit codes: 0 ok (and, with --model-out, every check passed), 2 usage
 * error, 1 runtime error or a failed check.
 */
#include <stdio.h>

#include "blocksum.h"
#include "strata/main.h"

static void print_summary(const strata_run_result *r, void *ud) {
  (void)ud;
  const strata_app *app = r->app;
  printf("summary: %s %s, %d worker%s, %d strata, depth %d, %d passes, %llu triples\n", app->name,
         strata_mode_name(r->mode), r->workers, r->workers == 1 ? "" : "s", r->strata, r->depth, r->passes,
         (unsigned long long)r->n_examples);
  printf("  last pass:");
  for (int i = 0; i < app->n_objectives; i++)
    printf(" %s %.0f", app->objective_names[i], r->objectives[i]);
  printf("\n");
  if (r->opts->model_out) printf("  checks passed; report in %s/%s\n", r->opts->model_out, BLOCKSUM_REPORT);
}

int main(int argc, char **argv) {
  const strata_app *apps[] = {&blocksum_app};
  strata_program p = {.name = "strata_blocksum", .apps = apps, .n_apps = 1, .summary_fn = print_summary};
  return strata_program_main(&p, argc, argv);
}
