/*
 * apps/cli/driver.h - running an app as a program (the CLI layer; the engine
 * library itself never prints).
 *
 * strata_driver_main starts MPI, parses the engine's options and the app's
 * (one table each; the engine's takes its defaults from app->defaults), checks the rank count, echoes version, build and every
 * effective option, runs the engine, prints the summary on rank 0, writes
 * --metrics-out, and makes every rank leave with one exit code: 0 ok,
 * 2 usage error, 1 runtime error. A failure that leaves peers blocked ends
 * the job with MPI_Abort; every other failure ends all ranks cleanly.
 */
#ifndef STRATA_CLI_DRIVER_H
#define STRATA_CLI_DRIVER_H

#include "strata/app.h"
#include "strata/engine.h"

typedef struct strata_driver {
  const char *prog; /* "strata mf": usage lines and error prefix */
  /* Rank 0, after a successful run: the summary on stdout (NULL: the
   * default one, strata_driver_summary). */
  void (*summary)(const strata_run_result *r, const strata_engine_opts *opts);
} strata_driver;

/* Runs app with options argv[0..argc); full_argc/full_argv are the whole
 * command line (MPI start, metrics). Returns the process exit code. */
int strata_driver_main(const strata_app *app, const strata_driver *d, int argc, char **argv,
                       int full_argc, char **full_argv);

/* The default summary: time per pass, rates, objectives, per-worker compute,
 * wait and traffic, coordinator CPU. */
void strata_driver_summary(const strata_run_result *r, const strata_engine_opts *opts);

#endif
