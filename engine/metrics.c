/*
 * The run summary: the JSON object benchmarks and plots consume.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "core/jsonr.h"
#include "engine/engine.h"
#include "strata/core.h"
#include "strata/engine.h"
#include "strata/version.h"
#include "strata_build_info.h"

typedef struct metrics_args {
  const strata_run_result *r;
  int done;
  const char *const *argv;
  int argc;
  int describe; /* the problem is loaded: the app may describe it */
  void (*extra)(strata_json *j, void *ud);
  void *ud;
} metrics_args;

static void write_stats(strata_json *j, const strata_worker_stats *s) {
  strata_json_number(j, "time_s", s->time_s);
  strata_json_number(j, "compute_s", s->compute_s);
  strata_json_number(j, "wait_s", s->wait_s);
  strata_json_number(j, "eval_s", s->eval_s);
  strata_json_number(j, "cpu_s", s->cpu_s);
  strata_json_number(j, "span_s", s->span_s);
  strata_json_int(j, "bytes_sent", (int64_t)s->bytes_sent);
  strata_json_int(j, "bytes_recv", (int64_t)s->bytes_recv);
  strata_json_int(j, "eval_bytes", (int64_t)s->eval_bytes);
  strata_json_number(j, "delay_s", s->delay_s);
}

/* A worker's figures: the engine's, then its mode's (NULL: none). */
static void write_worker(strata_json *j, const strata_worker_stats *s, const strata__facts *f) {
  write_stats(j, s);
  if (f) strata__facts_metrics_worker(f, j, s);
}

/* The engine's own keys of the metrics JSON: at the top level (the
 * status server's extras included) and in each per_pass entry; every
 * mode's own keys (core/mode.h) come on top. An app's objective, control
 * and describe keys must be none of them (and must differ from each
 * other): strata__metrics_check_keys refuses a run before any work
 * otherwise. test_engine renders a summary with every section on and
 * checks that these lists cover every key it holds. */
static const char *const top_keys[] = {"app",
                                       "mode",
                                       "workers",
                                       "strata",
                                       "depth",
                                       "passes",
                                       "stop_reason",
                                       "straggler_ms",
                                       "straggler_spin",
                                       "disrupt",
                                       "examples",
                                       "load_s",
                                       "setup_s",
                                       "wall_s",
                                       "time_per_pass_s",
                                       "updates_per_s",
                                       "mean_pass_s",
                                       "window_pass_s",
                                       "coordinator_cpu_s",
                                       "coordinator_wall_s",
                                       "coordinator_train_cpu_s",
                                       "coordinator_cpu_frac",
                                       "watch_refused",
                                       "resumed",
                                       "checkpoints",
                                       "rounds",
                                       "per_pass",
                                       "workers_total",
                                       "build",
                                       "machine",
                                       "argv",
                                       "status",
                                       "settings",
                                       NULL};
static const char *const pass_keys[] = {"pass",    "time_s",     "compute_s",        "wait_s",
                                        "eval_s",  "bytes_sent", "bytes_recv",       "view",
                                        "workers", "rounds",     "round_latency_us", NULL};

const char *const *strata__metrics_keys(int per_pass) { return per_pass ? pass_keys : top_keys; }

static int listed(const char *const *list, const char *key) {
  for (; list && *list; list++)
    if (!strcmp(*list, key)) return 1;
  return 0;
}

/* Whether key is the engine's, or any mode's, at the top level or (with
 * per_pass) in a per_pass entry. */
static int engine_key(const char *key, int per_pass) {
  if (listed(top_keys, key) || (per_pass && listed(pass_keys, key))) return 1;
  for (int m = 0; m < STRATA_N_MODES; m++)
    for (int i = 0; i < 2; i++)
      if (listed(strata__mode_keys((strata_mode)m, i, 0), key) ||
          (per_pass && listed(strata__mode_keys((strata_mode)m, i, 1), key)))
        return 1;
  return 0;
}

/* Refuses `key` (what: "objective", ...) when it is an engine key or one
 * the app has used already (seen[0..n)). */
static int check_key(const strata_app *app, const char *what, const char *key, int per_pass,
                     const char **seen, int n) {
  if (!key || !*key)
    return strata_err_set(STRATA_EINVAL, "%s: a %s has no name", app->name, what);
  if (engine_key(key, per_pass))
    return strata_err_set(STRATA_EINVAL,
                          "%s: the %s name '%s' is one of the engine's keys in the metrics JSON "
                          "(--metrics-out): rename it",
                          app->name, what, key);
  for (int i = 0; i < n; i++)
    if (!strcmp(seen[i], key))
      return strata_err_set(STRATA_EINVAL, "%s: the %s name '%s' is used twice in the metrics JSON",
                            app->name, what, key);
  return 0;
}

int strata__metrics_check_keys(const strata_app *app, const void *cfg, const strata_problem *prob) {
  /* Objectives are written at the top level and in each pass, controls in
   * each pass, the unit's rate and describe's keys at the top level. */
  const char *top[STRATA_MAX_OBJECTIVES + 1], *pass[STRATA_MAX_OBJECTIVES + STRATA_MAX_CONTROLS];
  int nt = 0, np = 0, rc = 0;
  char unit[80];
  for (int i = 0; i < app->n_objectives && !rc; i++) {
    rc = check_key(app, "objective", app->objective_names[i], 1, pass, np);
    top[nt++] = pass[np++] = app->objective_names[i];
  }
  for (int i = 0; i < app->n_controls && !rc; i++) {
    rc = check_key(app, "control", app->control_names[i], 1, pass, np);
    pass[np++] = app->control_names[i];
  }
  if (!rc && app->unit) {
    snprintf(unit, sizeof unit, "%s_per_s", app->unit);
    rc = check_key(app, "unit", unit, 0, top, nt);
    top[nt++] = unit;
  }
  if (rc || !app->describe || !prob) return rc;
  /* describe's keys: written once into memory and read back. */
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return strata_err_set(STRATA_ENOMEM, "out of memory checking the metrics keys");
  strata_json j;
  strata_json_init(&j, f);
  strata_json_object_begin(&j, NULL);
  app->describe(cfg, prob, &j);
  strata_json_object_end(&j);
  fclose(f);
  strata__json_doc *doc = NULL;
  rc = strata__json_parse(text, len, &doc);
  if (rc)
    rc = strata_err_set(STRATA_EINVAL, "%s: describe wrote no JSON object of members: %s",
                        app->name, strata_err_msg());
  const strata__jv *root = doc ? strata__json_root(doc) : NULL;
  for (const strata__jv *m = root ? root->child : NULL; m && !rc; m = m->next) {
    rc = check_key(app, "describe", m->key, 0, top, nt);
    for (const strata__jv *o = m->next; o && !rc; o = o->next)
      if (!strcmp(o->key, m->key))
        rc = strata_err_set(STRATA_EINVAL, "%s: describe writes the key '%s' twice", app->name,
                            m->key);
  }
  strata__json_free(doc);
  free(text);
  return rc;
}

double strata_round_latency_quantile(const strata_round_stats *s, double q) {
  uint64_t n = 0;
  for (int b = 0; b < STRATA_ROUND_HIST; b++) n += s->latency_hist[b];
  if (!n) return 0.0 / 0.0;
  /* The bucket holding the value of rank ceil(q n), at its geometric middle. */
  uint64_t want = (uint64_t)ceil(q * (double)n), seen = 0;
  if (want < 1) want = 1;
  for (int b = 0; b < STRATA_ROUND_HIST; b++) {
    seen += s->latency_hist[b];
    if (seen >= want) return 1e-6 * pow(1.05, b + 0.5);
  }
  return s->latency_max_s;
}

/* A round run's figures (strata_round_stats): latencies in microseconds. */
static void write_rounds(strata_json *j, const strata_run_result *r) {
  const strata_round_stats *s = &r->rounds;
  strata_json_object_begin(j, "rounds");
  strata_json_int(j, "per_pass", (int64_t)r->rounds_per_pass);
  strata_json_int(j, "depth", s->depth);
  strata_json_int(j, "count", s->count);
  strata_json_bool(j, "converged", s->converged);
  strata_json_number(j, "latency_us_median", strata_round_latency_quantile(s, 0.5) * 1e6);
  strata_json_number(j, "latency_us_p90", strata_round_latency_quantile(s, 0.9) * 1e6);
  strata_json_number(j, "latency_us_mean",
                     s->count ? s->latency_sum_s / (double)s->count * 1e6 : 0.0 / 0.0);
  strata_json_number(j, "latency_us_max", s->latency_max_s * 1e6);
  strata_json_int(j, "bytes_to_workers", (int64_t)s->bytes_out);
  strata_json_int(j, "bytes_from_workers", (int64_t)s->bytes_in);
  strata_json_int(j, "ids_to_workers", (int64_t)s->ids_out);
  strata_json_number(j, "worker_compute_s", s->worker_compute_s);
  strata_json_number(j, "worker_wait_s", s->worker_wait_s);
  strata_json_object_end(j);
}

static int fill(FILE *f, void *ud) {
  const metrics_args *a = ud;
  const strata_run_result *r = a->r;
  const strata_app *app = r->app;
  strata_json j;
  strata_json_init(&j, f);
  strata_json_object_begin(&j, NULL);
  strata_json_string(&j, "app", app->name);
  strata_json_string(&j, "mode", strata_mode_name(r->mode));
  strata_json_int(&j, "workers", r->workers);
  strata_json_int(&j, "strata", r->strata);
  strata_json_int(&j, "depth", r->depth);
  strata_json_int(&j, "passes", r->passes);
  if (r->stop_reason) strata_json_string(&j, "stop_reason", r->stop_reason);
  const strata_engine_opts *o = r->opts;
  strata__facts facts, *mf = NULL;
  if (!strata__mode_facts(r->mode, o, r->workers, &facts)) mf = &facts;
  /* The mode's own sections: its settings and its figures over the run. */
  if (mf) strata__facts_metrics(mf, &j, r);
  if (o && o->straggler_ms) {
    strata_json_int(&j, "straggler_ms", o->straggler_ms);
    strata_json_bool(&j, "straggler_spin", o->straggler_spin);
  }
  if (o && o->disrupt_prob > 0) {
    strata_json_object_begin(&j, "disrupt");
    strata_json_number(&j, "prob", o->disrupt_prob);
    strata_json_int(&j, "slot_ms", o->disrupt_slot_ms);
    strata_json_object_end(&j);
  }
  if (app->describe && a->describe) app->describe(r->cfg, &r->problem, &j);
  strata_json_int(&j, "examples", (int64_t)r->n_examples);
  strata_json_number(&j, "load_s", r->load_s);
  strata_json_number(&j, "setup_s", r->setup_s);
  strata_json_number(&j, "wall_s", r->wall_s);
  strata_json_number(&j, "time_per_pass_s", r->time_per_pass_s);
  strata_json_number(&j, "updates_per_s", r->updates_per_s);
  if (app->unit) {
    char key[64];
    snprintf(key, sizeof key, "%s_per_s", app->unit);
    strata_json_number(&j, key, r->updates_per_s);
  }
  strata_json_number(&j, "mean_pass_s", r->mean_pass_s);
  strata_json_number(&j, "window_pass_s", r->window_pass_s);
  for (int i = 0; i < app->n_objectives; i++)
    strata_json_double(&j, app->objective_names[i], r->objectives[i]);
  strata_json_number(&j, "coordinator_cpu_s", r->coordinator_cpu_s);
  strata_json_number(&j, "coordinator_wall_s", r->coordinator_wall_s);
  strata_json_number(&j, "coordinator_train_cpu_s", r->coordinator_train_cpu_s);
  strata_json_number(&j, "coordinator_cpu_frac", r->wall_s > 0 ? r->coordinator_train_cpu_s / r->wall_s : 0);
  if (r->mode != STRATA_MODE_SERIAL) strata_json_int(&j, "watch_refused", r->watch_refused);
  if (o && o->resume_dir) {
    /* per_pass[0..passes) and the totals came from the checkpoint, as
     * the run that wrote it measured them. */
    strata_json_object_begin(&j, "resumed");
    strata_json_string(&j, "from", o->resume_dir);
    strata_json_int(&j, "passes", r->resumed_passes);
    strata_json_object_end(&j);
  }
  if (o && o->checkpoint_dir) {
    strata_json_object_begin(&j, "checkpoints");
    strata_json_string(&j, "dir", o->checkpoint_dir);
    strata_json_int(&j, "every", o->checkpoint_every);
    strata_json_int(&j, "written", r->checkpoints);
    strata_json_int(&j, "last_passes", r->checkpoint_last);
    strata_json_int(&j, "last_bytes", (int64_t)r->checkpoint_bytes);
    strata_json_number(&j, "write_s", r->checkpoint_s);
    strata_json_object_end(&j);
  }
  if (a->extra) a->extra(&j, a->ud);
  if (r->rounds_per_pass) write_rounds(&j, r);
  strata_json_array_begin(&j, "per_pass");
  for (int p = 0; p < a->done; p++) {
    const strata_pass_stats *ps = &r->per_pass[p];
    strata_json_object_begin(&j, NULL);
    strata_json_int(&j, "pass", ps->pass);
    strata_json_number(&j, "time_s", ps->time_s);
    strata_json_number(&j, "compute_s", ps->compute_s);
    strata_json_number(&j, "wait_s", ps->wait_s);
    strata_json_number(&j, "eval_s", ps->eval_s);
    strata_json_int(&j, "bytes_sent", (int64_t)ps->bytes_sent);
    strata_json_int(&j, "bytes_recv", (int64_t)ps->bytes_recv);
    /* Exact: a resumed run's passes compare with a straight run's. */
    for (int i = 0; i < app->n_objectives; i++)
      strata_json_double(&j, app->objective_names[i], ps->objectives[i]);
    for (int i = 0; i < app->n_controls; i++)
      strata_json_number(&j, app->control_names[i], ps->control[i]);
    if (r->rounds_per_pass) {
      strata_json_int(&j, "rounds", ps->rounds);
      strata_json_number(&j, "round_latency_us", ps->round_latency_s * 1e6);
    }
    if (ps->has_view) {
      strata_json_object_begin(&j, "view");
      for (int i = 0; i < app->n_objectives; i++)
        strata_json_double(&j, app->objective_names[i], ps->view_objectives[i]);
      strata_json_object_end(&j);
    }
    if (mf) strata__facts_metrics_pass(mf, &j, r, p);
    strata_json_array_begin(&j, "workers");
    for (int w = 0; w < r->workers; w++) {
      strata_json_object_begin(&j, NULL);
      write_worker(&j, &r->per_pass_worker[(size_t)p * (size_t)r->workers + (size_t)w], mf);
      strata_json_object_end(&j);
    }
    strata_json_array_end(&j);
    strata_json_object_end(&j);
  }
  strata_json_array_end(&j);
  strata_json_array_begin(&j, "workers_total");
  for (int w = 0; w < r->workers && r->worker_total; w++) {
    strata_json_object_begin(&j, NULL);
    strata_json_int(&j, "worker", w);
    write_worker(&j, &r->worker_total[w], mf);
    strata_json_object_end(&j);
  }
  strata_json_array_end(&j);
  strata_json_object_begin(&j, "build");
  strata_json_string(&j, "version", STRATA_VERSION);
  strata_json_string(&j, "git_rev", STRATA_GIT_REV);
  strata_json_string(&j, "flags", STRATA_BUILD_FLAGS);
  strata_json_string(&j, "compiler", STRATA_COMPILER);
  strata_json_object_end(&j);
  struct utsname u;
  char host[256] = "unknown";
  gethostname(host, sizeof host);
  strata_json_object_begin(&j, "machine");
  strata_json_string(&j, "host", host);
  if (uname(&u) == 0) {
    strata_json_string(&j, "os", u.sysname);
    strata_json_string(&j, "arch", u.machine);
  }
  strata_json_int(&j, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
  strata_json_object_end(&j);
  strata_json_array_begin(&j, "argv");
  for (int i = 0; i < a->argc; i++) strata_json_string(&j, NULL, a->argv[i]);
  strata_json_array_end(&j);
  strata_json_object_end(&j);
  return 0;
}

int strata_metrics_write(const char *path, const strata_run_result *r, const char *const *argv,
                         int argc) {
  metrics_args a = {r, r->passes, argv, argc, 1, NULL, NULL};
  return strata_write_atomic(path, fill, &a);
}

int strata__metrics_render(FILE *f, const strata_run_result *r, int done, const char *const *argv,
                           int argc, int describe, void (*extra)(strata_json *j, void *ud),
                           void *ud) {
  metrics_args a = {r, done, argv, argc, describe, extra, ud};
  return fill(f, &a);
}
