/*
 * The program layer shared by every strata executable (see driver.h): rank 0
 * echoes the configuration, progress and the summary; a worker prints only
 * an error of its own; every rank exits with the same code.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "apps/cli/driver.h"
#include "strata/core.h"
#include "strata/options.h"
#include "strata/transport.h"
#include "strata_build_info.h"

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

static void usage_app(FILE *f, const strata_driver *d, const strata_app *app,
                      const strata_optgroup *g, int ng) {
  fprintf(f, "Usage: mpirun -np P+1 %s [options]\n       %s --mode serial [options]\n\n%s\n",
          d->prog, d->prog, app->summary);
  strata_options_help(f, g, ng);
  fprintf(f, "\nExamples:\n%s", app->examples);
}

void strata_driver_summary(const strata_run_result *r, const strata_engine_opts *opts) {
  (void)opts;
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

int strata_driver_main(const strata_app *app, const strata_driver *d, int argc, char **argv,
                       int full_argc, char **full_argv) {
  t_start = strata_now();
  strata_transport t;
  int rc = strata_comm_init(&full_argc, &full_argv, &t);
  if (rc) {
    fprintf(stderr, "%s: %s\n", d->prog, strata_err_msg());
    return 1;
  }
  my_rank = t.rank;
  cli_opts co;
  memset(&co, 0, sizeof co);
  void *cfg = strata_calloc(1, app->config_size);
  /* The engine's table with this program's defaults. */
  strata_option eopts[sizeof engine_options / sizeof engine_options[0]];
  memcpy(eopts, engine_options, sizeof eopts);
  for (strata_option *o = eopts; o->name; o++) {
    if (!strcmp(o->name, "passes") && d->passes_default) o->def = d->passes_default;
    if (!strcmp(o->name, "depth") && d->depth_default) o->def = d->depth_default;
    if (!strcmp(o->name, "model-out") && d->model_out_help) o->help = d->model_out_help;
  }
  strata_optgroup groups[2] = {{"engine options", eopts, &co},
                               {"", app->options, cfg}};
  char title[64];
  snprintf(title, sizeof title, "%s options", app->name);
  groups[1].title = title;
  int help = 0;
  strata_run_result result;
  memset(&result, 0, sizeof result);
  if (!cfg) {
    /* The other ranks would wait for this one: end the job. */
    fprintf(stderr, "%s: out of memory\n", d->prog);
    strata_comm_abort(&t, 1);
  }
  if ((rc = strata_options_defaults(groups, 2))) goto out;
  if ((rc = strata_options_parse(groups, 2, argc, argv, &help))) goto out;
  if (help) {
    if (t.rank == 0) usage_app(stdout, d, app, groups, 2);
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
                        "run 'mpirun -np P+1 %s ...' (P >= 1), or use --mode serial",
                        d->prog);
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
    (d->summary ? d->summary : strata_driver_summary)(&result, &co.eng);
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
    if (t.rank == 0 && rc) fprintf(stderr, "%s: %s\n", d->prog, strata_err_msg());
    int final = strata_engine_finish(&t, rc);
    if (t.rank == 0 && rc) strata_err_clear(); /* already printed */
    rc = final;
  }
out:
  if (rc && strata_err_msg()[0] && (t.rank == 0 || rc != STRATA_EUSAGE))
    fprintf(stderr, "%s: %s%s\n", d->prog, t.rank ? "worker: " : "", strata_err_msg());
  int peers_blocked = result.peers_blocked;
  strata_run_result_close(&result);
  strata_free(cfg);
  /* A failure in the middle of the passes can leave peers blocked on a
   * block that will never come: only then end the whole job at once. */
  if (rc && (peers_blocked || rc == STRATA_ECOMM || rc == STRATA_EINTR)) {
    fflush(NULL);
    strata_comm_abort(&t, exit_code(rc));
  }
  strata_comm_finalize(&t);
  return exit_code(rc);
}

