/*
 * strata: the command-line front end. Parses options (one table per
 * program), starts MPI, runs the app through the engine, and alone prints:
 * rank 0 echoes the configuration, progress and the summary; a worker prints
 * only an error of its own.
 *
 * Exit codes: 0 ok, 2 usage error, 1 runtime error; every rank exits with
 * the same code.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strata/core.h"
#include "strata/engine.h"
#include "strata/mf.h"
#include "strata/options.h"
#include "strata/ratings.h"
#include "strata/transport.h"
#include "strata_build_info.h"

static const strata_app *const apps[] = {&strata_app_mf};
#define N_APPS (sizeof apps / sizeof apps[0])

typedef struct cli_opts {
  strata_engine_opts eng;
  int quiet, verbose;
  uint64_t seed;
} cli_opts;

#define EOPT(field) offsetof(cli_opts, field)
static const strata_option engine_options[] = {
    {"mode", 'm', STRATA_OPT_CHOICE, EOPT(eng.mode), "scheduled", "MODE", 0, 0, "scheduled|serial",
     "scheduled: coordinator + workers over MPI; serial: one process, no MPI traffic"},
    {"strata", 'B', STRATA_OPT_INT, EOPT(eng.strata), "0", "B", 0, 4096, NULL,
     "strata per pass (blocking B x B); 0 = one per worker"},
    {"depth", 0, STRATA_OPT_INT, EOPT(eng.depth), "8", "C", 1, 1024, NULL,
     "pipeline chunks per rotating block"},
    {"passes", 'p', STRATA_OPT_INT, EOPT(eng.passes), "20", "N", 1, 1000000, NULL,
     "data passes"},
    {"seed", 's', STRATA_OPT_U64, EOPT(seed), "1", "X", 0, 0, NULL,
     "seed for initialisation, block assignment and splits"},
    {"metrics-out", 0, STRATA_OPT_STRING, EOPT(eng.metrics_out), NULL, "FILE", 0, 0, NULL,
     "write the JSON run summary here (atomically)"},
    {"model-out", 0, STRATA_OPT_STRING, EOPT(eng.model_out), NULL, "DIR", 0, 0, NULL,
     "export the final model into this directory"},
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

static void usage_main(FILE *f) {
  fprintf(f,
          "strata %s: scheduled model parallelism for iterative-convergent ML\n\n"
          "Usage:\n"
          "  mpirun -np P+1 strata APP [options]   rank 0 coordinates, ranks 1..P work\n"
          "  strata APP --mode serial [options]    the same computation in one process\n"
          "  strata mf-predict --model DIR ...     score pairs or list top-N items\n\n"
          "Apps:\n",
          STRATA_VERSION);
  for (size_t i = 0; i < N_APPS; i++) fprintf(f, "  %-12s %s\n", apps[i]->name, apps[i]->summary);
  fprintf(f,
          "  %-12s %s\n\n"
          "Run 'strata APP --help' for an app's options.\n"
          "Exit codes: 0 ok, 1 runtime error, 2 usage error.\n",
          "mf-predict", "score (user, item) pairs or recommend with an exported MF model");
}

static void usage_app(FILE *f, const strata_app *app, const strata_optgroup *g, int ng) {
  fprintf(f, "Usage: mpirun -np P+1 strata %s [options]\n       strata %s --mode serial [options]\n\n%s\n",
          app->name, app->name, app->summary);
  strata_options_help(f, g, ng);
  fprintf(f, "\nExamples:\n%s", app->examples);
}

static void print_summary(const strata_run_result *r) {
  const strata_app *app = r->app;
  printf("summary: %s %s, %d worker%s, %d strata, %d passes, %llu examples\n", app->name, r->mode,
         r->workers, r->workers == 1 ? "" : "s", r->strata, r->passes,
         (unsigned long long)r->n_examples);
  printf("  time per pass %.4f s (median of passes %s), %.2f M updates/s, training %.2f s, load %.2f s\n",
         r->time_per_pass_s, r->passes > 1 ? "2..N" : "1", r->updates_per_s / 1e6, r->wall_s,
         r->load_s);
  printf("  objectives:");
  for (int i = 0; i < app->n_objectives; i++)
    if (!isnan(r->objectives[i])) printf(" %s %.4f", app->objective_names[i], r->objectives[i]);
  printf("\n");
  for (int w = 0; w < r->workers; w++) {
    const strata_worker_stats *s = &r->worker_total[w];
    printf("  worker %d: compute %.2f s, wait %.3f s (%.1f%% of %.2f s), sent %.1f MB\n", w,
           s->compute_s, s->wait_s, s->time_s > 0 ? 100 * s->wait_s / s->time_s : 0.0, s->time_s,
           (double)s->bytes_sent / 1e6);
  }
  printf("  coordinator cpu during training %.3f s of %.2f s (%.2f%%); %.2f s in all, loading included\n",
         r->coordinator_train_cpu_s, r->wall_s,
         r->wall_s > 0 ? 100 * r->coordinator_train_cpu_s / r->wall_s : 0.0, r->coordinator_cpu_s);
}

static int exit_code(int rc) { return rc == 0 ? 0 : rc == STRATA_EUSAGE ? 2 : 1; }

static int run_app(const strata_app *app, int argc, char **argv, int full_argc, char **full_argv) {
  strata_transport t;
  int rc = strata_comm_init(&full_argc, &full_argv, &t);
  if (rc) {
    fprintf(stderr, "strata: %s\n", strata_err_msg());
    return 1;
  }
  my_rank = t.rank;
  cli_opts co;
  memset(&co, 0, sizeof co);
  void *cfg = strata_calloc(1, app->config_size);
  strata_optgroup groups[2] = {{"engine options", engine_options, &co},
                               {"", app->options, cfg}};
  char title[64];
  snprintf(title, sizeof title, "%s options", app->name);
  groups[1].title = title;
  int help = 0;
  strata_run_result result;
  memset(&result, 0, sizeof result);
  if (!cfg) {
    rc = strata_err_set(STRATA_ENOMEM, "out of memory");
    goto out;
  }
  if ((rc = strata_options_defaults(groups, 2))) goto out;
  if ((rc = strata_options_parse(groups, 2, argc, argv, &help))) goto out;
  if (help) {
    if (t.rank == 0) usage_app(stdout, app, groups, 2);
    goto out;
  }
  co.eng.seed = co.seed;
  co.eng.progress = !co.quiet;
  int serial = strcmp(co.eng.mode, "serial") == 0;
  int P = serial ? 1 : t.size - 1;
  if (serial && t.size != 1) {
    rc = strata_err_set(STRATA_EUSAGE, "--mode serial runs in one process; got %d MPI ranks",
                        t.size);
    goto out;
  }
  if (!serial && t.size < 2) {
    rc = strata_err_set(STRATA_EUSAGE,
                        "scheduled mode needs a coordinator and at least one worker: "
                        "run 'mpirun -np P+1 strata %s ...' (P >= 1), or use --mode serial",
                        app->name);
    goto out;
  }
  strata_setup setup = {.workers = P,
                        .strata = co.eng.strata ? co.eng.strata : P,
                        .depth = co.eng.depth,
                        .passes = co.eng.passes,
                        .seed = co.eng.seed,
                        .worker = t.rank - 1,
                        .mode = co.eng.mode,
                        .model_out = co.eng.model_out};
  if (app->check && (rc = app->check(cfg, &setup))) goto out;
  strata_log_set(log_print, NULL,
                 co.verbose ? STRATA_LOG_DEBUG : co.quiet ? STRATA_LOG_WARN : STRATA_LOG_INFO);
  if (t.rank == 0 && !co.quiet) {
    fprintf(stderr, "strata %s (git %s; %s; %s)\n", STRATA_VERSION, STRATA_GIT_REV,
            STRATA_BUILD_FLAGS, STRATA_COMPILER);
    fprintf(stderr, "  %s, %d worker%s, %d strata\n", co.eng.mode, P, P == 1 ? "" : "s",
            setup.strata);
    strata_options_echo(stderr, "  ", groups, 2);
  }
  rc = strata_engine_run(app, cfg, &co.eng, serial ? NULL : &t, &result);
  if (rc == 0 && t.rank == 0) {
    print_summary(&result);
    if (co.eng.metrics_out) {
      rc = strata_metrics_write(co.eng.metrics_out, &result, (const char *const *)full_argv,
                                full_argc);
      if (!rc && !co.quiet) fprintf(stderr, "metrics written to %s\n", co.eng.metrics_out);
    }
    if (!rc && co.eng.model_out && !co.quiet)
      fprintf(stderr, "model written to %s/\n", co.eng.model_out);
  }
  /* Everyone leaves with rank 0's verdict once the workers are through. */
  if (!serial && ((t.rank == 0 && result.workers_done) || (t.rank > 0 && rc == 0))) {
    if (t.rank == 0 && rc) fprintf(stderr, "strata %s: %s\n", app->name, strata_err_msg());
    int final = strata_engine_finish(&t, rc);
    if (t.rank == 0 && rc) strata_err_clear(); /* already printed */
    rc = final;
  }
out:
  if (rc && strata_err_msg()[0] && (t.rank == 0 || rc != STRATA_EUSAGE))
    fprintf(stderr, "strata %s: %s%s\n", app->name, t.rank ? "worker: " : "", strata_err_msg());
  int peers_blocked = result.peers_blocked;
  strata_run_result_close(&result);
  strata_free(cfg);
  /* A failure in the middle of the passes can leave peers blocked on a
   * block that will never come: only then end the whole job at once. */
  int stuck = t.rank == 0 ? peers_blocked : strata_err_msg()[0] && rc != STRATA_EUSAGE;
  if (rc && (stuck || rc == STRATA_ECOMM || rc == STRATA_EINTR)) {
    fflush(NULL);
    strata_comm_abort(&t, exit_code(rc));
  }
  strata_comm_finalize(&t);
  return exit_code(rc);
}

int strata__predict_main(int argc, char **argv);

int main(int argc, char **argv) {
  t_start = strata_now();
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
  for (size_t i = 0; i < N_APPS; i++)
    if (strcmp(argv[1], apps[i]->name) == 0) return run_app(apps[i], argc - 2, argv + 2, argc, argv);
  fprintf(stderr, "strata: unknown command '%s' (see strata --help)\n", argv[1]);
  return 2;
}
