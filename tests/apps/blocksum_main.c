/*
 * strata_blocksum: runs the blocksum app through the public engine API, the
 * way the strata CLI runs mf: one option table per program, MPI started
 * through strata_comm_init, rank 0 alone printing (a worker prints only an
 * error of its own), and every rank exiting with the same code.
 *
 * Exit codes: 0 ok (and, with --model-out, every check passed), 2 usage
 * error, 1 runtime error or a failed check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blocksum.h"
#include "strata/core.h"
#include "strata/engine.h"
#include "strata/options.h"
#include "strata/transport.h"

typedef struct main_opts {
  strata_engine_opts eng;
  int quiet, verbose;
  uint64_t seed;
} main_opts;

#define EOPT(field) offsetof(main_opts, field)
static const strata_option engine_options[] = {
    {"mode", 'm', STRATA_OPT_CHOICE, EOPT(eng.mode), "scheduled", "MODE", 0, 0, "scheduled|serial",
     "scheduled: coordinator + workers over MPI; serial: one process, no MPI traffic"},
    {"strata", 'B', STRATA_OPT_INT, EOPT(eng.strata), "0", "B", 0, 65536, NULL,
     "strata per pass (blocking B x B); 0 = one per worker"},
    {"depth", 0, STRATA_OPT_INT, EOPT(eng.depth), "2", "C", 1, 1024, NULL,
     "pipeline chunks per rotating block"},
    {"passes", 'p', STRATA_OPT_INT, EOPT(eng.passes), "3", "N", 1, 100000, NULL, "data passes"},
    {"seed", 's', STRATA_OPT_U64, EOPT(seed), "1", "X", 0, 0, NULL, "seed of the generated triples"},
    {"metrics-out", 0, STRATA_OPT_STRING, EOPT(eng.metrics_out), NULL, "FILE", 0, 0, NULL,
     "write the JSON run summary here (atomically)"},
    {"model-out", 0, STRATA_OPT_STRING, EOPT(eng.model_out), NULL, "DIR", 0, 0, NULL,
     "check the final blocks and write " BLOCKSUM_REPORT " into this directory"},
    {"quiet", 'q', STRATA_OPT_FLAG, EOPT(quiet), NULL, NULL, 0, 0, NULL,
     "no configuration echo or progress, errors only"},
    {"verbose", 'v', STRATA_OPT_FLAG, EOPT(verbose), NULL, NULL, 0, 0, NULL, "debug messages"},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL}};

static double t_start;
static int my_rank;

static void log_print(void *ud, strata_log_level level, const char *msg) {
  static const char *names[] = {"error", "warn", "info", "debug"};
  (void)ud;
  fprintf(stderr, "[%7.3fs %s%d %s] %s\n", strata_now() - t_start, my_rank ? "worker" : "coord",
          my_rank ? my_rank - 1 : 0, names[level], msg);
}

static void usage(FILE *f, const strata_optgroup *g, int ng) {
  fprintf(f,
          "Usage: mpirun -np P+1 strata_blocksum [options]\n"
          "       strata_blocksum --mode serial [options]\n\n%s\n",
          blocksum_app.summary);
  strata_options_help(f, g, ng);
  fprintf(f, "\nExamples:\n%s", blocksum_app.examples);
}

static void print_summary(const strata_run_result *r) {
  const strata_app *app = r->app;
  printf("summary: %s %s, %d worker%s, %d strata, depth %d, %d passes, %llu triples\n", app->name,
         r->mode, r->workers, r->workers == 1 ? "" : "s", r->strata, r->depth, r->passes,
         (unsigned long long)r->n_examples);
  printf("  last pass:");
  for (int i = 0; i < app->n_objectives; i++)
    printf(" %s %.0f", app->objective_names[i], r->objectives[i]);
  printf("\n");
}

static int exit_code(int rc) { return rc == 0 ? 0 : rc == STRATA_EUSAGE ? 2 : 1; }

int main(int argc, char **argv) {
  t_start = strata_now();
  strata_transport t;
  int rc = strata_comm_init(&argc, &argv, &t);
  if (rc) {
    fprintf(stderr, "strata_blocksum: %s\n", strata_err_msg());
    return 1;
  }
  my_rank = t.rank;
  main_opts mo;
  blocksum_config cfg;
  memset(&mo, 0, sizeof mo);
  memset(&cfg, 0, sizeof cfg);
  strata_optgroup groups[2] = {{"engine options", engine_options, &mo},
                               {"blocksum options", blocksum_app.options, &cfg}};
  strata_run_result result;
  memset(&result, 0, sizeof result);
  int help = 0;
  if ((rc = strata_options_defaults(groups, 2))) goto out;
  if ((rc = strata_options_parse(groups, 2, argc - 1, argv + 1, &help))) goto out;
  if (help) {
    if (t.rank == 0) usage(stdout, groups, 2);
    goto out;
  }
  mo.eng.seed = mo.seed;
  mo.eng.progress = !mo.quiet;
  int serial = strcmp(mo.eng.mode, "serial") == 0;
  int P = serial ? 1 : t.size - 1;
  if (serial && t.size != 1) {
    rc = strata_err_set(STRATA_EUSAGE, "--mode serial runs in one process; got %d MPI ranks",
                        t.size);
    goto out;
  }
  if (!serial && t.size < 2) {
    rc = strata_err_set(STRATA_EUSAGE,
                        "scheduled mode needs a coordinator and at least one worker: "
                        "run 'mpirun -np P+1 strata_blocksum ...' (P >= 1), or use --mode serial");
    goto out;
  }
  strata_setup setup = {.workers = P,
                        .strata = mo.eng.strata ? mo.eng.strata : P,
                        .depth = mo.eng.depth,
                        .passes = mo.eng.passes,
                        .seed = mo.eng.seed,
                        .worker = t.rank - 1,
                        .mode = mo.eng.mode,
                        .model_out = mo.eng.model_out};
  if ((rc = blocksum_app.check(&cfg, &setup))) goto out;
  strata_log_set(log_print, NULL,
                 mo.verbose ? STRATA_LOG_DEBUG : mo.quiet ? STRATA_LOG_WARN : STRATA_LOG_INFO);
  if (t.rank == 0 && !mo.quiet) {
    fprintf(stderr, "strata_blocksum: %s, %d worker%s, %d strata\n", mo.eng.mode, P,
            P == 1 ? "" : "s", setup.strata);
    strata_options_echo(stderr, "  ", groups, 2);
  }
  rc = strata_engine_run(&blocksum_app, &cfg, &mo.eng, serial ? NULL : &t, &result);
  if (rc == 0 && t.rank == 0) {
    print_summary(&result);
    if (mo.eng.model_out)
      printf("  checks passed; report in %s/%s\n", mo.eng.model_out, BLOCKSUM_REPORT);
    if (mo.eng.metrics_out)
      rc = strata_metrics_write(mo.eng.metrics_out, &result, (const char *const *)argv, argc);
  }
  /* As in the CLI: once the workers are through, all ranks take rank 0's
   * verdict, so a failure in export (a failed check) ends every rank alike. */
  if (!serial && ((t.rank == 0 && result.workers_done) || (t.rank > 0 && rc == 0))) {
    if (t.rank == 0 && rc) fprintf(stderr, "strata_blocksum: %s\n", strata_err_msg());
    int final = strata_engine_finish(&t, rc);
    if (t.rank == 0 && rc) strata_err_clear();
    rc = final;
  }
out:
  if (rc && strata_err_msg()[0] && (t.rank == 0 || rc != STRATA_EUSAGE))
    fprintf(stderr, "strata_blocksum: %s%s\n", t.rank ? "worker: " : "", strata_err_msg());
  int peers_blocked = result.peers_blocked;
  strata_run_result_close(&result);
  /* As in the CLI: only a failure that leaves peers blocked on this rank
   * (rank 0 mid-run, or a worker's own error) ends the job at once. */
  int stuck = t.rank == 0 ? peers_blocked : strata_err_msg()[0] && rc != STRATA_EUSAGE;
  if (rc && (stuck || rc == STRATA_ECOMM || rc == STRATA_EINTR)) {
    fflush(NULL);
    strata_comm_abort(&t, exit_code(rc));
  }
  strata_comm_finalize(&t);
  return exit_code(rc);
}
