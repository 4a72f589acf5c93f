/*
 * The program layer shared by every strata executable (see driver.h): rank 0
 * echoes the configuration, progress and the summary; a worker prints only
 * an error of its own; every rank exits with the same code.
 */
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <math.h>
#include <stdlib.h>
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
  const char *mode, *staleness, *wpc, *prefetch, *straggler, *disrupt;
} cli_opts;

#define EOPT(field) offsetof(cli_opts, field)
static const strata_option engine_options[] = {
    {"mode", 'm', STRATA_OPT_CHOICE, EOPT(mode), "scheduled", "MODE", 0, 0,
     "scheduled|serial|bsp|absp|ssp|essp|async",
     "scheduled: parameter blocks rotate on a ring of workers; serial: one process, no MPI; "
     "bsp, absp, ssp, essp, async: data-parallel workers against a parameter-server table", NULL},
    {"staleness", 0, STRATA_OPT_STRING, EOPT(staleness), NULL, "S", 0, 0, NULL,
     "ssp/essp: read rows at most S clocks old (default 1; 0 is BSP)", NULL},
    {"wpc", 0, STRATA_OPT_STRING, EOPT(wpc), NULL, "W", 0, 0, NULL,
     "absp/ssp/essp/async: work per clock in passes, 1/K or a whole number (default 1)", NULL},
    {"prefetch", 0, STRATA_OPT_CHOICE, EOPT(prefetch), "auto", "POLICY", 0, 0,
     "auto|none|conservative|aggressive",
     "table prefetcher replaying last clock's reads; auto: aggressive (fresher reads; see "
     "docs/cli.md)", NULL},
    {"straggler", 0, STRATA_OPT_STRING, EOPT(straggler), NULL, "delay=MS[,spin=1]", 0, 0, NULL,
     "worker i sleeps MS at clocks i, i+P, ... (a clock is a pass in scheduled mode); "
     "spin=1: busy instead of asleep", NULL},
    {"disrupt", 0, STRATA_OPT_STRING, EOPT(disrupt), NULL, "prob=P,slot=MS", 0, 0, NULL,
     "each worker gets a CPU-burning thread for a random fraction P of MS-long slots", NULL},
    {"score-view", 0, STRATA_OPT_FLAG, EOPT(eng.score_view), NULL, NULL, 0, 0, NULL,
     "bsp/absp/ssp/essp/async: also score each worker's own view of the table at its pass end "
     "and report it per pass as view_<objective> (the objectives score the model)", NULL},
    {"strata", 'B', STRATA_OPT_INT, EOPT(eng.strata), "0", "B", 0, 4096, NULL,
     "strata per pass (blocking B x B); 0 = one per worker", NULL},
    {"depth", 0, STRATA_OPT_INT, EOPT(eng.depth), "8", "C", 1, 1024, NULL,
     "pipeline chunks per rotating block", NULL},
    {"passes", 'p', STRATA_OPT_INT, EOPT(eng.passes), "20", "N", 1, 1000000, NULL,
     "data passes", NULL},
    {"seed", 's', STRATA_OPT_U64, EOPT(seed), "1", "X", 0, 0, NULL,
     "seed for initialisation, block assignment and splits", NULL},
    {"metrics-out", 0, STRATA_OPT_STRING, EOPT(eng.metrics_out), NULL, "FILE", 0, 0, NULL,
     "write the JSON run summary here (atomically)", NULL},
    {"model-out", 0, STRATA_OPT_STRING, EOPT(eng.model_out), NULL, "DIR", 0, 0, NULL,
     "export the final model into this directory", NULL},
    {"quiet", 'q', STRATA_OPT_FLAG, EOPT(quiet), NULL, NULL, 0, 0, NULL,
     "no configuration echo or progress, errors only", NULL},
    {"verbose", 'v', STRATA_OPT_FLAG, EOPT(verbose), NULL, NULL, 0, 0, NULL, "debug messages", NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};

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
  printf("summary: %s %s, %d worker%s, %d strata, %d passes, %llu examples\n", app->name,
         strata_mode_name(r->mode),
         r->workers, r->workers == 1 ? "" : "s", r->strata, r->passes,
         (unsigned long long)r->n_examples);
  printf("  time per pass %.4f s (median of passes %s), %.2f M %s/s, training %.2f s, load %.2f s\n",
         r->time_per_pass_s, r->passes > 1 ? "2..N" : "1", r->updates_per_s / 1e6,
         app->unit ? app->unit : "updates", r->wall_s, r->load_s);
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

static int exit_code(int rc) {
  return rc == 0 ? 0 : rc == STRATA_EUSAGE ? 2 : rc == STRATA_EDIVERGED ? 3 : 1;
}

static int bad_value(const char *flag, const char *v, const char *want) {
  char q[STRATA_QUOTE_SIZE];
  return strata_err_set(STRATA_EUSAGE, "--%s: expected %s, got '%s'", flag, want,
                        strata_quote(q, sizeof q, v, strlen(v)));
}

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (!*v || *end || errno || x < lo || x > hi) {
    char want[96];
    snprintf(want, sizeof want, "a whole number in [%ld, %ld]", lo, hi);
    return bad_value(flag, v, want);
  }
  *out = x;
  return 0;
}

static int parse_real(const char *flag, const char *v, double *out) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (!*v || *end || errno || !isfinite(x)) return bad_value(flag, v, "a number");
  *out = x;
  return 0;
}

/* key=value[,key=value]: finds key's value in spec (copied into buf). */
static const char *kv(const char *spec, const char *key, char *buf, size_t cap) {
  size_t kl = strlen(key);
  for (const char *p = spec; p && *p;) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n > kl && !strncmp(p, key, kl) && p[kl] == '=' && n - kl - 1 < cap) {
      memcpy(buf, p + kl + 1, n - kl - 1);
      buf[n - kl - 1] = 0;
      return buf;
    }
    p = e ? e + 1 : NULL;
  }
  return NULL;
}

/* Keys of spec must all be among `keys` ("a|b"). */
static int only_keys(const char *flag, const char *spec, const char *keys, const char *want) {
  for (const char *p = spec; p && *p;) {
    const char *eq = strchr(p, '='), *e = strchr(p, ',');
    if (!eq || (e && eq > e)) return bad_value(flag, spec, want);
    size_t kl = (size_t)(eq - p);
    int ok = 0;
    for (const char *k = keys; *k;) {
      const char *bar = strchr(k, '|');
      size_t n = bar ? (size_t)(bar - k) : strlen(k);
      ok |= n == kl && !strncmp(k, p, kl);
      k += n + (bar != NULL);
    }
    if (!ok) return bad_value(flag, spec, want);
    p = e ? e + 1 : NULL;
  }
  return 0;
}

/* The parameter-server, straggler and disruption flags into engine terms. */
static int engine_flags(cli_opts *co, const strata_driver *drv) {
  strata_engine_opts *e = &co->eng;
  long v = 0;
  int rc = strata_mode_parse(co->mode, &e->mode);
  if (rc) return rc;
  e->staleness = -1;
  if (co->staleness && (rc = parse_long("staleness", co->staleness, 0, 1000000, &v))) return rc;
  if (co->staleness) e->staleness = (int)v;
  /* The app's default work per clock reaches resolve as a value not given. */
  const char *wpc = co->wpc ? co->wpc : drv->wpc_default;
  if (wpc && (rc = parse_real("wpc", wpc, &e->wpc))) return rc;
  int pf = strcmp(co->prefetch, "auto") != 0;
  e->prefetch = !strcmp(co->prefetch, "none")           ? STRATA_PREFETCH_NONE
                : !strcmp(co->prefetch, "aggressive")   ? STRATA_PREFETCH_AGGRESSIVE
                                                         : STRATA_PREFETCH_CONSERVATIVE;
  if ((rc = strata_engine_resolve(e, co->staleness != NULL, co->wpc != NULL, pf))) return rc;
  if (e->score_view && !strata_mode_is_ps(e->mode))
    return strata_err_set(STRATA_EUSAGE,
                          "--score-view applies to the parameter-server modes (bsp, absp, ssp, "
                          "essp, async), not --mode %s: there the model is what the workers see",
                          co->mode);
  char buf[64];
  if (co->straggler) {
    const char *want = "delay=MS[,spin=0|1]";
    int keyed = strchr(co->straggler, '=') != NULL;
    if ((rc = only_keys("straggler", keyed ? co->straggler : "delay=0", "delay|spin", want)))
      return rc;
    const char *d = keyed ? kv(co->straggler, "delay", buf, sizeof buf) : co->straggler;
    if (!d) return bad_value("straggler", co->straggler, want);
    if ((rc = parse_long("straggler", d, 0, 3600000, &v))) return rc;
    e->straggler_ms = (int)v;
    const char *sp = keyed ? kv(co->straggler, "spin", buf, sizeof buf) : NULL;
    if (sp && (rc = parse_long("straggler", sp, 0, 1, &v))) return rc;
    e->straggler_spin = sp ? (int)v : 0;
  }
  if (co->disrupt) {
    const char *want = "prob=P,slot=MS with 0 < P <= 1 and MS >= 1";
    if ((rc = only_keys("disrupt", co->disrupt, "prob|slot", want))) return rc;
    const char *p = kv(co->disrupt, "prob", buf, sizeof buf);
    if (!p || parse_real("disrupt", p, &e->disrupt_prob) || !(e->disrupt_prob > 0) ||
        e->disrupt_prob > 1)
      return bad_value("disrupt", co->disrupt, want);
    const char *sl = kv(co->disrupt, "slot", buf, sizeof buf);
    if (!sl || parse_long("disrupt", sl, 1, 3600000, &v)) return bad_value("disrupt", co->disrupt, want);
    e->disrupt_slot_ms = (int)v;
  }
  return 0;
}

/* Parameter-server messages and snapshots are megabytes each and come and
 * go every clock. By default glibc maps such blocks afresh and returns
 * freed heap tops to the kernel, so every message would fault its pages in
 * again (a fault per 4 KiB, several microseconds each under a hypervisor):
 * on the 10M-rating MF set that was a tenth of a PS pass. Keep freed memory
 * for reuse instead. */
static void keep_freed_memory(void) {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
}

int strata_driver_main(const strata_app *app, const strata_driver *d, int argc, char **argv,
                       int full_argc, char **full_argv) {
  t_start = strata_now();
  keep_freed_memory();
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
  char wpc_help[160];
  memcpy(eopts, engine_options, sizeof eopts);
  for (strata_option *o = eopts; o->name; o++) {
    if (!strcmp(o->name, "passes") && d->passes_default) o->def = d->passes_default;
    if (!strcmp(o->name, "depth") && d->depth_default) o->def = d->depth_default;
    if (!strcmp(o->name, "model-out") && d->model_out_help) o->help = d->model_out_help;
    if (!strcmp(o->name, "model-out") && d->model_out_flag) o->name = d->model_out_flag;
    if (!strcmp(o->name, "wpc") && d->wpc_default) {
      snprintf(wpc_help, sizeof wpc_help,
               "absp/ssp/essp/async: work per clock in passes, 1/K or a whole number "
               "(default %s)",
               d->wpc_default);
      o->help = wpc_help;
    }
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
  if ((rc = engine_flags(&co, d))) goto out;
  int serial = co.eng.mode == STRATA_MODE_SERIAL;
  int P = serial ? 1 : t.size - 1;
  if (serial && t.size != 1) {
    rc = strata_err_set(STRATA_EUSAGE, "--mode serial runs in one process; got %d MPI ranks",
                        t.size);
    goto out;
  }
  if (!serial && t.size < 2) {
    rc = strata_err_set(STRATA_EUSAGE,
                        "--mode %s needs a coordinator and at least one worker: "
                        "run 'mpirun -np P+1 %s ...' (P >= 1), or use --mode serial",
                        co.mode, d->prog);
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
    fprintf(stderr, "  %s, %d worker%s, %d strata\n", co.mode, P, P == 1 ? "" : "s",
            setup.strata);
    if (strata_mode_is_ps(co.eng.mode)) {
      static const char *const pf[] = {"none", "conservative", "aggressive"};
      if (co.eng.mode != STRATA_MODE_ASYNC)
        fprintf(stderr, "  staleness %d, ", co.eng.staleness);
      else
        fprintf(stderr, "  no staleness bound, ");
      fprintf(stderr, "work per clock %g pass%s, prefetch %s\n", co.eng.wpc,
              co.eng.wpc == 1 ? "" : "es", pf[co.eng.prefetch]);
    }
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

