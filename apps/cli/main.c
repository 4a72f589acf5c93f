/*
 * strata: the command-line front end. `strata APP ...` runs an app through
 * the shared driver (driver.h: options, MPI, summary, exit codes);
 * `strata mf-predict` queries an exported MF model.
 *
 * Exit codes: 0 ok, 2 usage error, 1 runtime error, 3 diverged; every rank exits with
 * the same code.
 */
#include <stdio.h>
#include <string.h>

#include "apps/cli/driver.h"
#include "apps/lda/lda_app.h"
#include "strata/core.h"
#include "strata/dml.h"
#include "strata/mf.h"
#include "strata/mlr.h"
#include "strata_build_info.h"

static const strata_app *const apps[] = {&strata_app_mf, &strata_app_lda, &strata_app_mlr,
                                           &strata_app_dml};
#define N_APPS (sizeof apps / sizeof apps[0])

static void usage_main(FILE *f) {
  fprintf(f,
          "strata %s: scheduled model parallelism for iterative-convergent ML\n\n"
          "Usage:\n"
          "  mpirun -np P+1 strata APP [options]   rank 0 coordinates, ranks 1..P work\n"
          "  strata APP --mode serial [options]    the same computation in one process\n"
          "  strata mf-predict --model DIR ...     score pairs or list top-N items\n"
          "  strata mlr-predict --model DIR ...    classify examples with an MLR model\n\n"
          "Apps:\n",
          STRATA_VERSION);
  for (size_t i = 0; i < N_APPS; i++) fprintf(f, "  %-12s %s\n", apps[i]->name, apps[i]->summary);
  fprintf(f,
          "  %-12s %s\n"
          "  %-12s %s\n\n"
          "Run 'strata APP --help' for an app's options.\n"
          "Exit codes: 0 ok, 1 runtime error, 2 usage error, 3 the run diverged.\n",
          "mf-predict", "score (user, item) pairs or recommend with an exported MF model",
          "mlr-predict", "classify LIBSVM examples with an exported MLR model");
}

int strata__predict_main(int argc, char **argv);
int strata__mlr_predict_main(int argc, char **argv);

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage_main(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("strata %s (git %s; %s; %s)\n", STRATA_VERSION, STRATA_GIT_REV, STRATA_BUILD_FLAGS,
           STRATA_COMPILER);
    return 0;
  }
  if (strcmp(argv[1], "mf-predict") == 0) return strata__predict_main(argc - 2, argv + 2);
  if (strcmp(argv[1], "mlr-predict") == 0) return strata__mlr_predict_main(argc - 2, argv + 2);
  for (size_t i = 0; i < N_APPS; i++)
    if (strcmp(argv[1], apps[i]->name) == 0) {
      char prog[64];
      snprintf(prog, sizeof prog, "strata %s", apps[i]->name);
      strata_driver d = {.prog = prog};
      return strata_driver_main(apps[i], &d, argc - 2, argv + 2, argc, argv);
    }
  char q[STRATA_QUOTE_SIZE];
  fprintf(stderr, "strata: unknown command '%s' (see strata --help)\n",
          strata_quote(q, sizeof q, argv[1], strlen(argv[1])));
  return 2;
}
