/*
 * The program layer shared by every strata executable (see driver.h): rank 0
 * echoes the configuration, progress and the summary, and prints every
 * failure, a worker's included (the engine brings its message to rank 0); a
 * worker prints only an error rank 0 could not be told of; every rank exits
 * with the same code.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
/* After a libc header, which defines __GLIBC__. */
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "cli/driver.h"
#include "comm/live.h"
#include "comm/transport.h"
#include "core/interrupt.h"
#include "engine/engine.h"
#include "strata/core.h"
#include "strata/options.h"
#include "strata/transport.h"
#include "strata/version.h"

typedef struct cli_opts {
  strata_engine_opts eng;
  /* Into eng.staleness and eng.wpc; whether each was given goes to strata_engine_resolve. */
  strata_opt_int staleness;
  strata_opt_double wpc;
  /* Each mode's own options (strata_mode_options), by mode: the chosen
   * mode's go to eng.mode_settings; another mode's given are refused. */
  strata_mode_settings mode_set[STRATA_N_MODES];
  strata_opt_int checkpoint_every; /* into eng.checkpoint_every */
  strata_opt_double stall_timeout; /* into eng.stall_timeout when given */
  double mem_limit_gb; /* into eng.mem_limit, in bytes */
  const char *straggler, *disrupt; /* the specs as given; their keys fill eng */
  int quiet, verbose;
} cli_opts;

/* strata_mode and strata_prefetch are filled as the int index of a choice. */
_Static_assert(sizeof(strata_mode) == sizeof(int), "strata_mode is not int-sized");
_Static_assert(sizeof(strata_prefetch) == sizeof(int), "strata_prefetch is not int-sized");

/* --prefetch's choices are the policies in strata_prefetch order, then
 * "auto": the mode's own policy, which strata_engine_resolve picks. */
#define PREFETCH_CHOICES "none|conservative|aggressive|auto"
#define PREFETCH_AUTO (STRATA_PREFETCH_AGGRESSIVE + 1)

#define EOPT(field) offsetof(cli_opts, field)
static const strata_option straggler_keys[] = {
    {.name = "delay",
     .type = STRATA_OPT_INT,
     .offset = EOPT(eng.straggler_ms),
     .metavar = "MS",
     .max = 3600000},
    {.name = "spin",
     .type = STRATA_OPT_INT,
     .offset = EOPT(eng.straggler_spin),
     .def = "0",
     .metavar = "0|1",
     .max = 1},
    {.name = NULL},
};

static const strata_option disrupt_keys[] = {
    {.name = "prob",
     .type = STRATA_OPT_DOUBLE | STRATA_OPT_OPEN_MIN,
     .offset = EOPT(eng.disrupt_prob),
     .metavar = "P",
     .max = 1},
    {.name = "slot",
     .type = STRATA_OPT_INT,
     .offset = EOPT(eng.disrupt_slot_ms),
     .metavar = "MS",
     .min = 1,
     .max = 3600000},
    {.name = NULL},
};

#define N_ENGINE_OPTS 27
/* Options that do not change what a run computes: a resume may change them. */
#define R STRATA_OPT_RESUMABLE

/* The engine's option table for one app, with the text its defaults need. */
typedef struct engine_table {
  strata_option opts[N_ENGINE_OPTS];
  char modes[256], passes[16], depth[16], wpc[32], tol[256];
  char mode_help[1536], staleness_help[512], wpc_help[512], prefetch_help[512], view_help[512];
  /* The groups of the modes' own options: the first mode of each owner. */
  int n_mode_groups;
  strata_mode group_mode[STRATA_N_MODES];
  char group_title[STRATA_N_MODES][160];
} engine_table;

static int takes_flag(const strata__mode_ops *const ops[2], void *ud) {
  unsigned flag = *(const unsigned *)ud;
  return (ops[0] && (ops[0]->takes & flag)) || (ops[1] && (ops[1]->takes & flag));
}

/* "--mode bsp, absp, ssp, essp and sfb", the modes that take a flag. */
static void modes_taking(char *out, size_t n, unsigned flag) {
  strata__mode_list(out, n, takes_flag, &flag, " and ");
}

/* Whether mode m's own options are those of ud's mode. */
static int same_options(const strata__mode_ops *const ops[2], void *ud) {
  const strata_option *mine = ops[1] && ops[1]->options ? ops[1]->options : ops[0]->options;
  return mine && mine == strata_mode_options(*(const strata_mode *)ud);
}

/* Takes the row named `name` out of a NULL-terminated table. */
static void drop_option(strata_option *opts, const char *name) {
  int i = 0;
  while (opts[i].name && strcmp(opts[i].name, name)) i++;
  for (; opts[i].name; i++) opts[i] = opts[i + 1];
}

static void engine_table_init(engine_table *t, const strata_app *app) {
  const strata_app_defaults *d = &app->defaults;
  size_t used = 0, hused = 0;
  for (int m = 0; m < STRATA_N_MODES; m++) {
    used += (size_t)snprintf(t->modes + used, sizeof t->modes - used, "%s%s", m ? "|" : "",
                             strata_mode_name((strata_mode)m));
    if (hused < sizeof t->mode_help)
      hused += (size_t)snprintf(t->mode_help + hused, sizeof t->mode_help - hused, "%s%s: %s",
                                m ? "; " : "", strata_mode_name((strata_mode)m),
                                strata_mode_summary((strata_mode)m));
  }
  /* Each mode's default staleness, as its resolve fills it in. */
  char list[128], defs[256] = "";
  size_t dused = 0;
  for (int m = 0; m < STRATA_N_MODES; m++) {
    strata_engine_opts o;
    memset(&o, 0, sizeof o);
    o.mode = (strata_mode)m;
    o.staleness = -1;
    unsigned flag = STRATA__TAKES_STALENESS;
    const strata__mode_ops *ops[2] = {NULL, NULL};
    strata__facts f;
    if (strata__mode_facts(o.mode, NULL, 0, &f)) continue;
    ops[0] = f.ops[0], ops[1] = f.ops[1];
    if (!takes_flag(ops, &flag) || strata_engine_resolve(&o, 0, 0, 0)) continue;
    dused += (size_t)snprintf(defs + dused, sizeof defs - dused, "%s%s %d", dused ? ", " : "",
                              strata_mode_name(o.mode), o.staleness);
  }
  strata_err_clear();
  modes_taking(list, sizeof list, STRATA__TAKES_STALENESS);
  snprintf(t->staleness_help, sizeof t->staleness_help,
           "clocks a read (sfb: a factor) may lag, in --mode %s (0 is BSP; default: %s)", list,
           defs);
  modes_taking(list, sizeof list, STRATA__TAKES_WPC);
  snprintf(t->wpc_help, sizeof t->wpc_help,
           "work per clock in passes, 1/K or a whole number, in --mode %s", list);
  modes_taking(list, sizeof list, STRATA__TAKES_PREFETCH);
  snprintf(t->prefetch_help, sizeof t->prefetch_help,
           "table prefetcher replaying last clock's reads, in --mode %s; auto: aggressive "
           "(fresher reads; see docs/cli.md)",
           list);
  modes_taking(list, sizeof list, STRATA__TAKES_VIEW);
  snprintf(t->view_help, sizeof t->view_help,
           "in --mode %s, also score each worker's own view of the table at its pass end and "
           "report it per pass as view_<objective> (the objectives score the model)",
           list);
  /* One group per owner of options, titled by its modes. */
  t->n_mode_groups = 0;
  for (int m = 0; m < STRATA_N_MODES; m++) {
    const strata_option *o = strata_mode_options((strata_mode)m);
    int seen = !o;
    for (int g = 0; g < t->n_mode_groups && !seen; g++)
      seen = strata_mode_options(t->group_mode[g]) == o;
    if (seen) continue;
    strata_mode mm = (strata_mode)m;
    strata__mode_list(list, sizeof list, same_options, &mm, " and ");
    snprintf(t->group_title[t->n_mode_groups], sizeof t->group_title[0], "--mode %s options", list);
    t->group_mode[t->n_mode_groups++] = mm;
  }
  snprintf(t->passes, sizeof t->passes, "%d", d->passes ? d->passes : 20);
  snprintf(t->depth, sizeof t->depth, "%d", d->depth ? d->depth : 8);
  snprintf(t->wpc, sizeof t->wpc, "%g", d->wpc > 0 ? d->wpc : 1);
  snprintf(t->tol, sizeof t->tol, "stop once %s is at most X (0: run every pass)",
           app->tol.help                          ? app->tol.help
           : app->round                           ? "the app's convergence measure"
                                                  : "the convergence measure");
  const strata_option opts[N_ENGINE_OPTS] = {
      {.name = "mode",
       .short_name = 'm',
       .type = STRATA_OPT_ENUM,
       .offset = EOPT(eng.mode),
       .def = strata_mode_name(d->mode),
       .metavar = "MODE",
       .choices = t->modes,
       .help = t->mode_help},
      {.name = "staleness",
       .type = STRATA_OPT_INT_OPTIONAL,
       .offset = EOPT(staleness),
       .metavar = "S",
       .max = 1000000,
       .help = t->staleness_help},
      {.name = "wpc",
       .type = STRATA_OPT_DOUBLE_OPTIONAL,
       .offset = EOPT(wpc),
       .def = t->wpc,
       .metavar = "W",
       .help = t->wpc_help},
      {.name = "prefetch",
       .type = STRATA_OPT_ENUM,
       .offset = EOPT(eng.prefetch),
       .def = "auto",
       .metavar = "POLICY",
       .choices = PREFETCH_CHOICES,
       .help = t->prefetch_help},
      {.name = "straggler",
       .type = STRATA_OPT_SPEC | R,
       .offset = EOPT(straggler),
       .metavar = "delay=MS[,spin=1]",
       .help = "worker i sleeps MS at clocks i, i+P, ... (a clock is a pass in scheduled mode); "
               "spin=1: busy instead of asleep",
       .keys = straggler_keys},
      {.name = "disrupt",
       .type = STRATA_OPT_SPEC | R,
       .offset = EOPT(disrupt),
       .metavar = "prob=P,slot=MS",
       .help = "each worker gets a CPU-burning thread for a random fraction P of MS-long slots",
       .keys = disrupt_keys},
      {.name = "score-view",
       .type = STRATA_OPT_FLAG | R,
       .offset = EOPT(eng.score_view),
       .help = t->view_help},
      {.name = "strata",
       .short_name = 'B',
       .type = STRATA_OPT_INT,
       .offset = EOPT(eng.strata),
       .def = "0",
       .metavar = "B",
       .max = 4096,
       .help = "strata per pass (blocking B x B); 0 = one per worker"},
      {.name = "depth",
       .type = STRATA_OPT_INT,
       .offset = EOPT(eng.depth),
       .def = t->depth,
       .metavar = "C",
       .min = 1,
       .max = 1024,
       .help = "pipeline chunks per rotating block"},
      {.name = "round-depth",
       .type = STRATA_OPT_INT,
       .offset = EOPT(eng.round_depth),
       .def = "1",
       .metavar = "D",
       .min = 1,
       .max = 1024,
       .help = "rounds in flight: round t is scheduled from the model after round t-D (1: exact; "
               "more hides the coordinator's round trip behind the workers' work)"},
      {.name = "round-trace",
       .type = STRATA_OPT_STRING | R,
       .offset = EOPT(eng.round_trace),
       .metavar = "FILE",
       .help = "write every round's record (latency, bytes each way, the workers' compute and "
               "wait) as a JSON line into FILE"},
      {.name = "passes",
       .short_name = 'p',
       .type = STRATA_OPT_INT | R,
       .offset = EOPT(eng.passes),
       .def = t->passes,
       .metavar = "N",
       .min = 1,
       .max = 1000000,
       .help = "data passes (a resumed run: in all, the checkpoint's included)"},
      {.name = "tol",
       .type = STRATA_OPT_DOUBLE | R,
       .offset = EOPT(eng.tol),
       .def = "0",
       .metavar = "X",
       .max = 1e300,
       .help = t->tol},
      {.name = "seed",
       .short_name = 's',
       .type = STRATA_OPT_U64,
       .offset = EOPT(eng.seed),
       .def = "1",
       .metavar = "X",
       .help = "seed for initialisation, block assignment and splits"},
      {.name = "metrics-out",
       .type = STRATA_OPT_STRING | R,
       .offset = EOPT(eng.metrics_out),
       .metavar = "FILE",
       .help = "write the JSON run summary here (atomically)"},
      {.name = d->model_out_flag ? d->model_out_flag : "model-out",
       .type = STRATA_OPT_STRING | R,
       .offset = EOPT(eng.model_out),
       .metavar = "DIR",
       .help =
           d->model_out_help ? d->model_out_help : "export the final model into this directory"},
      {.name = "checkpoint",
       .type = STRATA_OPT_STRING | R,
       .offset = EOPT(eng.checkpoint_dir),
       .metavar = "DIR",
       .help = "write a checkpoint into DIR after every --checkpoint-every passes (each rank its "
               "own part, then a manifest; the one before is removed)"},
      {.name = "checkpoint-every",
       .type = STRATA_OPT_INT_OPTIONAL | R,
       .offset = EOPT(checkpoint_every),
       .def = "10",
       .metavar = "N",
       .min = 1,
       .max = 1000000,
       .help = "passes between checkpoints"},
      {.name = "resume",
       .type = STRATA_OPT_STRING | R,
       .offset = EOPT(eng.resume_dir),
       .metavar = "DIR",
       .help = "continue from the last complete checkpoint in DIR (the same app, mode, workers, "
               "data and settings; --passes counts the passes it holds)"},
      {.name = "stall-timeout",
       .type = STRATA_OPT_DOUBLE_OPTIONAL | R,
       .offset = EOPT(stall_timeout),
       .metavar = "SECONDS",
       .min = 0.1,
       .max = 1e6,
       .help = "end the run when a worker makes no progress for this long (default: from the pass "
               "times seen, at least 5 s)"},
      {.name = "watch-address",
       .type = STRATA_OPT_STRING | R,
       .offset = EOPT(eng.watch_address),
       .metavar = "ADDR",
       .help = "where rank 0 listens for the workers' liveness connections: an IPv4 address of "
               "its host, or any (every interface); default 127.0.0.1 when every rank is on one "
               "host, else its address on the workers' network"},
      {.name = "mem-limit",
       .type = STRATA_OPT_DOUBLE | R,
       .offset = EOPT(mem_limit_gb),
       .def = "0",
       .metavar = "GB",
       .max = 1e9,
       .help = "refuse a run whose ranks on one host would need more memory than this (0: what "
               "each host has available, measured at the start)"},
      {.name = "status",
       .type = STRATA_OPT_STRING | R,
       .offset = EOPT(eng.status_addr),
       .metavar = "HOST:PORT",
       .help = "serve the run live over HTTP: / (a page), /metrics (Prometheus), /status.json; "
               "port 0 picks a free one; the URL is printed at the start, also with -q"},
      {.name = "status-linger",
       .type = STRATA_OPT_DOUBLE | R,
       .offset = EOPT(eng.status_linger),
       .def = "0",
       .metavar = "SECONDS",
       .max = 1e6,
       .help = "keep serving --status this long after the run ends, for a last scrape"},
      {.name = "quiet",
       .short_name = 'q',
       .type = STRATA_OPT_FLAG | R,
       .offset = EOPT(quiet),
       .help = "no configuration echo or progress, errors only"},
      {.name = "verbose",
       .short_name = 'v',
       .type = STRATA_OPT_FLAG | R,
       .offset = EOPT(verbose),
       .help = "debug messages"},
      {.name = NULL},
  };
  memcpy(t->opts, opts, sizeof opts);
  /* Only a round app (strata/round.h) has rounds, and only an app with a
   * convergence measure a tolerance. */
  if (!app->round) drop_option(t->opts, "round-depth");
  if (!app->round) drop_option(t->opts, "round-trace");
  if (!app->round && app->tol.kind == STRATA_TOL_NONE) drop_option(t->opts, "tol");
}

static double t_start;
static int my_rank;

static void log_print(void *ud, strata_log_level level, const char *msg) {
  static const char *names[] = {"error", "warn", "info", "debug"};
  (void)ud;
  fprintf(stderr, "[%7.3fs %s%d %s] %s\n", strata_now() - t_start, my_rank ? "worker" : "coord",
          my_rank ? my_rank - 1 : 0, names[level], msg);
}

static void usage_app(FILE *f, const strata__driver *d, const strata_app *app,
                      const strata_optgroup *g, int ng) {
  fprintf(f, "Usage: mpirun -np P+1 %s [options]\n       %s --mode serial [options]\n\n", d->prog,
          d->prog);
  if (app->summary) fprintf(f, "%s\n", app->summary);
  strata_options_help(f, g, ng);
  if (app->examples) fprintf(f, "\nExamples:\n%s", app->examples);
}

void strata_print_summary(const strata_run_result *r) {
  const strata_app *app = r->app;
  printf("summary: %s %s, %d worker%s, %d strata, %d passes%s, %llu examples\n", app->name,
         strata_mode_name(r->mode), r->workers, r->workers == 1 ? "" : "s", r->strata, r->passes,
         r->stop_reason && !strcmp(r->stop_reason, "tolerance") ? " (stopped: converged to --tol)"
                                                                : "",
         (unsigned long long)r->n_examples);
  printf("  time per pass %.4f s (median of passes %s), %.2f M %s/s, training %.2f s, load %.2f s\n",
         r->time_per_pass_s, r->passes > 1 ? "2..N" : "1", r->updates_per_s / 1e6,
         app->unit ? app->unit : "updates", r->wall_s, r->load_s);
  printf("  objectives:");
  for (int i = 0; i < app->n_objectives; i++)
    if (!isnan(r->objectives[i]))
      printf(fabs(r->objectives[i]) >= 1e-3 || r->objectives[i] == 0 ? " %s %.4f" : " %s %.4g",
             app->objective_names[i], r->objectives[i]);
  printf("\n");
  for (int w = 0; w < r->workers; w++) {
    const strata_worker_stats *s = &r->worker_total[w];
    printf("  worker %d: compute %.2f s, wait %.3f s (%.1f%% of %.2f s), sent %.1f MB\n", w,
           s->compute_s, s->wait_s, s->time_s > 0 ? 100 * s->wait_s / s->time_s : 0.0, s->time_s,
           (double)s->bytes_sent / 1e6);
  }
  if (r->rounds_per_pass) {
    const strata_round_stats *s = &r->rounds;
    printf("  rounds: %lld (%llu a pass, %d in flight), latency median %.0f us (p90 %.0f, max %.0f), "
           "%.1f KB to the workers, %.1f KB back\n",
           (long long)s->count, (unsigned long long)r->rounds_per_pass, s->depth,
           strata_round_latency_quantile(s, 0.5) * 1e6, strata_round_latency_quantile(s, 0.9) * 1e6,
           s->latency_max_s * 1e6, (double)s->bytes_out / 1e3, (double)s->bytes_in / 1e3);
  }
  fflush(stdout);
  strata__mode_summary(stdout, r);
  printf("  coordinator cpu during training %.3f s of %.2f s (%.2f%%); %.2f s in all, loading included\n",
         r->coordinator_train_cpu_s, r->wall_s,
         r->wall_s > 0 ? 100 * r->coordinator_train_cpu_s / r->wall_s : 0.0, r->coordinator_cpu_s);
}

/* An engine message that names the app ("mf: --mode sfb needs ...") under
 * a program name that ends with it ("strata mf", "mf"): the name once. */
static const char *own_text(const strata__driver *d, const strata_app *app, const char *msg) {
  size_t n = strlen(app->name), p = strlen(d->prog);
  int prog_names_it = p >= n && strcmp(d->prog + p - n, app->name) == 0 &&
                      (p == n || d->prog[p - n - 1] == ' ' || d->prog[p - n - 1] == '/');
  if (prog_names_it && strncmp(msg, app->name, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
    return msg + n + 2;
  return msg;
}

/* A lost rank or an interrupt (strata_engine_opts.on_lost, from the
 * engine's watch thread): the one rank that reports prints the message;
 * the engine then ends the process with exit code 1, or 128 + the signal. */
static void print_lost(void *ud, const char *msg, int report) {
  const strata__driver *d = ud;
  if (report) fprintf(stderr, "%s: %s\n", d->prog, msg);
}

/* The live status's address (strata_engine_opts.on_status), printed even
 * with -q: with port 0 it is the only way to learn the port. */
static void print_status_url(void *ud, const char *url) {
  const strata__driver *d = ud;
  fprintf(stderr, "%s: live status at %s\n", d->prog, url);
}

static int exit_code(int rc) {
  return rc == 0 ? 0 : rc == STRATA_EUSAGE ? 2 : rc == STRATA_EDIVERGED ? 3 : 1;
}

/* The first option of group g (a mode's own, base `set`) whose value
 * differs from its default (`def`); NULL: none. */
static const strata_option *changed_option(const strata_option *opts, const void *set,
                                           const void *def) {
  for (const strata_option *o = opts; o && o->name; o++) {
    size_t n = 0;
    switch (o->type & STRATA_OPT_TYPE_MASK) {
      case STRATA_OPT_INT:
      case STRATA_OPT_FLAG:
      case STRATA_OPT_ENUM: n = sizeof(int); break;
      case STRATA_OPT_U64: n = sizeof(uint64_t); break;
      case STRATA_OPT_DOUBLE: n = sizeof(double); break;
      case STRATA_OPT_INT_OPTIONAL: n = sizeof(strata_opt_int); break;
      case STRATA_OPT_DOUBLE_OPTIONAL: n = sizeof(strata_opt_double); break;
      default: n = sizeof(const char *); break;
    }
    if (memcmp((const char *)set + o->offset, (const char *)def + o->offset, n)) return o;
  }
  return NULL;
}

/* The mode's settings: its own options (another mode's, given, are
 * refused), and resolve gets what the command line gave. */
static int engine_resolve(cli_opts *co, const engine_table *et) {
  strata_engine_opts *e = &co->eng;
  for (int g = 0; g < et->n_mode_groups; g++) {
    strata_mode gm = et->group_mode[g];
    const strata_option *opts = strata_mode_options(gm);
    if (opts == strata_mode_options(e->mode)) continue;
    strata_mode_settings def;
    memset(&def, 0, sizeof def);
    strata_optgroup dg = {"", opts, &def};
    int rc = strata_options_defaults(&dg, 1);
    if (rc) return rc;
    const strata_option *o = changed_option(opts, &co->mode_set[g], &def);
    if (o) {
      char list[256];
      strata__mode_list(list, sizeof list, same_options, &gm, " and ");
      return strata_err_set(STRATA_EUSAGE, "--%s applies to --mode %s, not --mode %s", o->name,
                            list, strata_mode_name(e->mode));
    }
  }
  for (int g = 0; g < et->n_mode_groups; g++)
    if (strata_mode_options(et->group_mode[g]) == strata_mode_options(e->mode))
      e->mode_settings = co->mode_set[g];
  int prefetch_given = e->prefetch != PREFETCH_AUTO;
  if (!prefetch_given) e->prefetch = STRATA_PREFETCH_NONE; /* resolve picks the mode's */
  e->staleness = co->staleness.value;
  e->wpc = co->wpc.value;
  if (co->checkpoint_every.given && !e->checkpoint_dir)
    return strata_err_set(STRATA_EUSAGE, "--checkpoint-every needs --checkpoint DIR");
  e->checkpoint_every = e->checkpoint_dir ? co->checkpoint_every.value : 0;
  e->stall_timeout = co->stall_timeout.given ? co->stall_timeout.value : 0;
  e->mem_limit = (uint64_t)(co->mem_limit_gb * 1e9);
  if (e->status_linger > 0 && !e->status_addr)
    return strata_err_set(STRATA_EUSAGE, "--status-linger needs --status HOST:PORT");
  return strata_engine_resolve(e, co->staleness.given, co->wpc.given, prefetch_given);
}

/* The run's settings as a checkpoint records them: every option that
 * changes the result, with the mode's values as resolved (a default
 * staleness is the same setting as the same value given). */
static int run_settings(const cli_opts *co, const strata_optgroup *groups, int n_groups,
                        char ***out, int *n) {
  cli_opts r = *co;
  r.staleness = (strata_opt_int){co->eng.staleness, 1};
  r.wpc = (strata_opt_double){co->eng.wpc, 1};
  strata_optgroup g[2 + STRATA_N_MODES];
  memcpy(g, groups, (size_t)n_groups * sizeof *g);
  g[0].base = &r;
  /* The mode groups point into co: into r's copy instead. */
  for (int i = 1; i < n_groups - 1; i++)
    g[i].base = (char *)&r + ((const char *)groups[i].base - (const char *)co);
  return strata_options_settings(g, n_groups, out, n);
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

int strata__driver_main(const strata_app *app, const strata__driver *d, int argc, char **argv,
                        int full_argc, char **full_argv) {
  t_start = strata_now();
  keep_freed_memory();
  /* Before MPI starts threads: SIGINT and SIGTERM are noted from now on,
   * and the engine's watch ends the run on every rank with one line
   * (core/interrupt.h). */
  if (strata__interrupt_catch()) {
    fprintf(stderr, "%s: %s\n", d->prog, strata_err_msg());
    return 1;
  }
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
  engine_table et;
  engine_table_init(&et, app);
  /* The engine's options, each mode's own, the app's. */
  strata_optgroup groups[2 + STRATA_N_MODES];
  int ng = 0;
  groups[ng++] = (strata_optgroup){"engine options", et.opts, &co};
  for (int g = 0; g < et.n_mode_groups; g++)
    groups[ng++] = (strata_optgroup){et.group_title[g], strata_mode_options(et.group_mode[g]),
                                     &co.mode_set[g]};
  char title[64];
  snprintf(title, sizeof title, "%s options", app->name);
  groups[ng++] = (strata_optgroup){title, app->options, cfg};
  int help = 0, blocked = 0;
  char **settings = NULL;
  strata_run_result result;
  memset(&result, 0, sizeof result);
  if (!cfg) {
    /* The other ranks would wait for this one: end the job. */
    fprintf(stderr, "%s: out of memory\n", d->prog);
    strata_comm_abort(&t, 1);
  }
  if ((rc = strata_options_defaults(groups, ng))) goto out;
  if ((rc = strata_options_parse(groups, ng, argc, argv, &help))) goto out;
  if (help) {
    if (t.rank == 0) usage_app(stdout, d, app, groups, ng);
    goto out;
  }
  co.eng.progress = !co.quiet;
  co.eng.on_lost = print_lost;
  co.eng.on_lost_ud = (void *)d;
  co.eng.on_status = print_status_url;
  co.eng.on_status_ud = (void *)d;
  co.eng.argv = (const char *const *)full_argv;
  co.eng.argc = full_argc;
  if ((rc = engine_resolve(&co, &et))) goto out;
  if ((rc = run_settings(&co, groups, ng, &settings, &co.eng.n_settings))) goto out;
  co.eng.settings = (const char *const *)settings;
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
                        strata_mode_name(co.eng.mode), d->prog);
    goto out;
  }
  strata_setup setup;
  strata_engine_setup(app, &co.eng, P, t.rank - 1, &setup);
  if (app->check && (rc = app->check(cfg, &setup))) goto out;
  strata_log_set(log_print, NULL,
                 co.verbose ? STRATA_LOG_DEBUG : co.quiet ? STRATA_LOG_WARN : STRATA_LOG_INFO);
  if (t.rank == 0 && !co.quiet) {
    fprintf(stderr, "strata %s (%s)\n", strata_version(), strata_build_id());
    fprintf(stderr, "  %s, %d worker%s, %d strata\n", strata_mode_name(co.eng.mode), P, P == 1 ? "" : "s",
            setup.strata);
    char echo[512];
    strata__mode_echo(echo, sizeof echo, &co.eng);
    if (echo[0]) fprintf(stderr, "  %s\n", echo);
    /* The engine's options, the run's mode's own (if any) and the app's. */
    strata_optgroup shown[3];
    int ns = 0;
    shown[ns++] = groups[0];
    for (int g = 0; g < et.n_mode_groups; g++)
      if (strata_mode_options(et.group_mode[g]) == strata_mode_options(co.eng.mode))
        shown[ns++] = groups[1 + g];
    shown[ns++] = groups[ng - 1];
    strata_options_echo(stderr, "  ", shown, ns);
  }
  rc = strata_engine_run(app, cfg, &co.eng, serial ? NULL : &t, &result);
  if (rc == 0 && t.rank == 0) {
    if (d->summary)
      d->summary(&result, d->summary_ud);
    else
      strata_print_summary(&result);
    if (co.eng.metrics_out) {
      rc = strata_metrics_write(co.eng.metrics_out, &result, (const char *const *)full_argv,
                                full_argc);
      if (!rc && !co.quiet) fprintf(stderr, "metrics written to %s\n", co.eng.metrics_out);
    }
    if (!rc && co.eng.model_out && !co.quiet)
      fprintf(stderr, "model written to %s/\n", co.eng.model_out);
  }
  /* A failure during the run has ended it on every rank already (the
   * engine calls the run off: rank 0 has the failing worker's message, the
   * workers the code with an empty message). Otherwise everyone leaves
   * with rank 0's verdict once the workers are through. */
  blocked = result.peers_blocked;
  if (serial) {
    rc = strata_engine_finish(NULL, rc);
  } else if ((t.rank == 0 && result.workers_done) || (t.rank > 0 && rc == 0)) {
    if (t.rank == 0 && rc) fprintf(stderr, "%s: %s\n", d->prog, own_text(d, app, strata_err_msg()));
    int final = strata_engine_finish(&t, rc);
    /* The verdict did not travel (a worker's own message says why). */
    if (t.rank == 0 ? final != rc : final && strata_err_msg()[0]) blocked = 1;
    if (t.rank == 0 && rc) strata_err_clear(); /* already printed */
    rc = final;
  }
out:
  if (rc && strata_err_msg()[0] && (t.rank == 0 || rc != STRATA_EUSAGE))
    fprintf(stderr, "%s: %s%s\n", d->prog, t.rank ? "worker: " : "",
            own_text(d, app, strata_err_msg()));
  /* The last resort: peers may wait for this rank forever, and MPI may
   * still write into its buffers, so end the whole job before freeing. */
  if (rc && blocked) {
    fflush(NULL);
    strata_comm_abort(&t, exit_code(rc));
  }
  fflush(NULL);
  /* The run is over: no watch thread may act (and print, and _exit) while
   * this rank finalises and exits; SIGINT and SIGTERM no longer change
   * the exit code. The engine has stopped it on every path that gets
   * here; this makes sure. */
  strata__live_stop();
  strata_engine_status_close(&result, rc);
  strata_run_result_close(&result);
  strata_free(settings);
  strata_free(cfg);
  fflush(NULL);
  strata__comm_finalize(&t, exit_code(rc));
  return exit_code(rc);
}

