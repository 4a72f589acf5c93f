/*
 * strata/main.h - a whole program for your apps in one call.
 *
 * strata_main gives a program the command line of `strata` for the apps it
 * passes: the engine options (--mode, --passes, --staleness, ...), each
 * app's own options, --help built from the option tables, the
 * configuration echo, progress on rank 0, the summary, --metrics-out and
 * --model-out, and one exit code on every rank:
 *   0 ok, 1 runtime error, 2 usage error, 3 the run diverged, 130 and 143
 *   interrupted by SIGINT and SIGTERM.
 * A failure on any rank (an app callback returning an error on worker 2,
 * say, or the engine running out of memory there) is printed once, by
 * rank 0, with that rank's own message ("PROGRAM: worker 2: MESSAGE"), and
 * every rank exits with the same code, in every mode: the engine calls the
 * run off on every rank (strata/engine.h), and the job ends without
 * MPI_Abort. Only when that cannot be done (a worker that does not stop
 * within seconds, ranks that cannot reach each other) is the job ended at
 * once, every rank by the engine's liveness watch. SIGINT and SIGTERM to any
 * rank, or to a serial run, end the run on every rank with one line that
 * names the signal and the rank, and exit code 128 + the signal; strata_main
 * installs the handler for them before MPI starts.
 *
 * It calls MPI_Init and MPI_Finalize itself (through the transport): call it
 * from main() and return what it returns, with no MPI calls around it.
 *
 *   int main(int argc, char **argv) {
 *     const strata_app *apps[] = {&my_app};
 *     return strata_main(argc, argv, apps, 1);
 *   }
 *
 * With one app and no commands, the app's options follow the program name
 * (`mpirun -np 3 ./myprog --passes 5`); naming the app first works too.
 * With several, the first argument names one (`./myprog NAME [options]`),
 * and `./myprog --help` lists them. The `strata` program itself is built
 * this way on the bundled apps (strata/apps/bundled.h).
 */
#ifndef STRATA_MAIN_H
#define STRATA_MAIN_H

#include "strata/app.h"
#include "strata/engine.h"

/* A subcommand that is not an app (e.g. `strata mf-predict`): main gets
 * the arguments after its name (argv[0] is the name) and returns the exit
 * code. It runs without MPI. */
typedef struct strata_command {
  const char *name;
  const char *summary; /* one line for --help */
  int (*main)(int argc, char **argv);
} strata_command;

typedef struct strata_program {
  const char *name;     /* in usage lines and error messages; NULL: argv[0]'s base name */
  const char *summary;  /* first line of --help; NULL: none */
  const strata_app *const *apps;
  int n_apps;
  const strata_command *commands; /* may be NULL */
  int n_commands;
  /* Rank 0, after a successful run, on the thread that called
   * strata_program_main: prints the summary on stdout instead of
   * strata_print_summary (NULL: that one), with summary_ud as given. r and
   * everything it points to are valid during the call: the app's
   * coordinator state is r->problem.priv (what load and export_model left
   * there), its config r->cfg. */
  void (*summary_fn)(const strata_run_result *r, void *ud);
  void *summary_ud;
  /* 1: a first argument NAME that is neither an app nor a command runs the
   * program PROG-NAME (PROG being the program's name), looked up beside
   * this program, then on PATH, with the remaining arguments: so apps built
   * as programs of their own on the installed library (strata_main) join
   * the command line without being linked into it, and --help lists those
   * beside it. NAME may hold only letters, digits, '-' and '_'. The
   * `strata` program sets it: `strata lasso` runs strata-lasso. */
  int external;
} strata_program;

/* The whole CLI for apps[0..n_apps): see above. Returns the exit code. */
STRATA_EXPORT int strata_main(int argc, char **argv, const strata_app *const *apps, int n_apps);

/* The same, with a name, subcommands and a summary of the program's own. */
STRATA_EXPORT int strata_program_main(const strata_program *prog, int argc, char **argv);

/* The default summary on stdout: time per pass, rates, objectives,
 * per-worker compute, wait and traffic, coordinator CPU. */
STRATA_EXPORT void strata_print_summary(const strata_run_result *r);

#endif
