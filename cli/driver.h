/*
 * cli/driver.h - running one app as a program (internal to cli/; the
 * public entry is strata/main.h). The rest of libstrata never prints; this
 * layer does.
 *
 * strata__driver_main starts MPI, parses the engine's options and the
 * app's (one table each; the engine's takes its defaults from
 * app->defaults), checks the rank count, echoes version, build and every
 * effective option, runs the engine, prints the summary on rank 0, writes
 * --metrics-out, and makes every rank leave with one exit code (main.h).
 */
#ifndef STRATA_CLI_DRIVER_H
#define STRATA_CLI_DRIVER_H

#include "strata/main.h"

typedef struct strata__driver {
  const char *prog; /* "strata mf": usage lines and error prefix */
  void (*summary)(const strata_run_result *r, void *ud); /* NULL: strata_print_summary */
  void *summary_ud;
} strata__driver;

/* Runs app with options argv[0..argc); full_argc/full_argv are the whole
 * command line (MPI start, metrics). Returns the process exit code. */
int strata__driver_main(const strata_app *app, const strata__driver *d, int argc, char **argv,
                        int full_argc, char **full_argv);

#endif
