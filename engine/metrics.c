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

/* Clock differentials (data age - reader clock) of the reads in s. */
static void write_diffs(strata_json *j, const char *key, const strata_worker_stats *s) {
  strata_json_object_begin(j, key);
  strata_json_int(j, "reads", (int64_t)s->reads);
  strata_json_number(j, "mean", s->reads ? (double)s->diff_sum / (double)s->reads : 0.0);
  strata_json_int(j, "min", s->diff_min);
  strata_json_int(j, "max_staleness", -(int64_t)s->diff_min);
  /* hist[i] counts differential -i; the last bucket everything older. */
  int last = 0;
  for (int b = 0; b < STRATA_TABLE_HIST; b++)
    if (s->hist[b]) last = b;
  strata_json_array_begin(j, "hist");
  for (int b = 0; b <= last && s->reads; b++) strata_json_int(j, NULL, (int64_t)s->hist[b]);
  strata_json_array_end(j);
  strata_json_object_end(j);
}

static void add_diffs(strata_worker_stats *a, const strata_worker_stats *s) {
  a->reads += s->reads;
  a->diff_sum += s->diff_sum;
  if (s->diff_min < a->diff_min) a->diff_min = s->diff_min;
  for (int b = 0; b < STRATA_TABLE_HIST; b++) a->hist[b] += s->hist[b];
}

/* sfb: the factors applied from peers and their delays in clocks. */
static void write_delays(strata_json *j, const strata_worker_stats *s) {
  strata_json_object_begin(j, "factor_delay");
  strata_json_int(j, "sets", (int64_t)s->sets_in);
  strata_json_int(j, "factors", (int64_t)s->factors_in);
  strata_json_number(j, "mean", s->factors_in ? (double)s->delay_sum / (double)s->factors_in : 0.0);
  strata_json_int(j, "max", s->delay_max);
  int last = 0;
  for (int b = 0; b < STRATA_TABLE_HIST; b++)
    if (s->delay_hist[b]) last = b;
  /* hist[d] counts delay d; the last bucket everything later. */
  strata_json_array_begin(j, "hist");
  for (int b = 0; b <= last && s->factors_in; b++) strata_json_int(j, NULL, (int64_t)s->delay_hist[b]);
  strata_json_array_end(j);
  strata_json_object_end(j);
}

static void add_delays(strata_worker_stats *a, const strata_worker_stats *s) {
  a->sets_in += s->sets_in;
  a->factors_in += s->factors_in;
  a->delay_sum += s->delay_sum;
  if (s->delay_max > a->delay_max) a->delay_max = s->delay_max;
  for (int b = 0; b < STRATA_TABLE_HIST; b++) a->delay_hist[b] += s->delay_hist[b];
}

/* sfb's figures of one worker: clocks, traffic per clock, factors. */
static void write_sfb_stats(strata_json *j, const strata_worker_stats *s) {
  strata_json_int(j, "clocks", s->clocks);
  strata_json_number(j, "bytes_sent_per_clock", s->clocks ? (double)s->bytes_sent / s->clocks : 0.0);
  strata_json_number(j, "bytes_recv_per_clock", s->clocks ? (double)s->bytes_recv / s->clocks : 0.0);
  strata_json_number(j, "apply_s", s->apply_s);
  strata_json_int(j, "factors_out", (int64_t)s->factors_out);
  strata_json_array_begin(j, "from");
  for (int q = 0; q < 64; q++)
    if (s->from_mask >> q & 1) strata_json_int(j, NULL, q);
  strata_json_array_end(j);
  write_delays(j, s);
  if (s->replica_checked) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)s->replica_digest);
    strata_json_string(j, "replica_digest", hex);
  }
}

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
  if (s->reads) {
    strata_json_int(j, "clocks", s->clocks);
    write_diffs(j, "clock_diff", s);
  }
}

static void write_worker(strata_json *j, const strata_worker_stats *s, int sfb) {
  write_stats(j, s);
  if (sfb) write_sfb_stats(j, s);
}

/* The engine's own keys of the metrics JSON: at the top level (the
 * status server's extras included) and in each per_pass entry. An app's
 * objective, control and describe keys must be none of them (and must
 * differ from each other): strata__metrics_check_keys refuses a run
 * before any work otherwise. test_engine renders a summary with every
 * section on and checks that these lists cover every key it holds. */
static const char *const top_keys[] = {
    "app", "mode", "workers", "strata", "depth", "passes", "stop_reason", "consistency", "sfb",
    "straggler_ms", "straggler_spin", "disrupt", "examples", "load_s", "setup_s", "wall_s",
    "time_per_pass_s", "updates_per_s", "mean_pass_s", "window_pass_s", "coordinator_cpu_s",
    "coordinator_wall_s", "coordinator_train_cpu_s", "coordinator_cpu_frac", "watch_refused",
    "resumed", "checkpoints", "rounds", "clock_diff", "factor_delay", "per_pass", "workers_total",
    "build", "machine", "argv", "status", "settings", NULL};
static const char *const pass_keys[] = {
    "pass", "time_s", "compute_s", "wait_s", "eval_s", "bytes_sent", "bytes_recv", "view",
    "clock_diff", "drift", "drift_rows", "factor_delay", "workers", "rounds", "round_latency_us",
    NULL};

const char *const *strata__metrics_keys(int per_pass) { return per_pass ? pass_keys : top_keys; }

static int listed(const char *const *list, const char *key) {
  for (; *list; list++)
    if (!strcmp(*list, key)) return 1;
  return 0;
}

/* Refuses `key` (what: "objective", ...) when it is an engine key or one
 * the app has used already (seen[0..n)). */
static int check_key(const strata_app *app, const char *what, const char *key, int per_pass,
                     const char **seen, int n) {
  if (!key || !*key)
    return strata_err_set(STRATA_EINVAL, "%s: a %s has no name", app->name, what);
  if (listed(top_keys, key) || (per_pass && listed(pass_keys, key)))
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
  int is_ps = o && strata_mode_is_ps(r->mode);
  int sfb = r->mode == STRATA_MODE_SFB;
  if (is_ps) {
    static const char *const pf[] = {"none", "conservative", "aggressive"};
    strata_json_object_begin(&j, "consistency");
    if (r->mode != STRATA_MODE_ASYNC)
      strata_json_int(&j, "staleness", o->staleness);
    else
      strata_json_string(&j, "staleness", "unbounded");
    strata_json_number(&j, "wpc", o->wpc);
    strata_json_string(&j, "prefetch", pf[o->prefetch]);
    strata_json_object_end(&j);
  }
  if (sfb && o) {
    strata_json_object_begin(&j, "sfb");
    strata_json_int(&j, "staleness", o->staleness);
    strata_json_int(&j, "peers", r->sfb_peers);
    strata_json_bool(&j, "full_broadcast", r->sfb_peers == r->workers - 1);
    strata_json_int(&j, "tau", r->sfb_tau);
    strata_json_int(&j, "tau_lower_bound", r->sfb_tau_lower);
    strata_json_bool(&j, "tau_optimal", r->sfb_tau_optimal);
    /* topology[p]: worker p's out-peers */
    strata_json_array_begin(&j, "topology");
    for (int p = 0; r->sfb_topology && p < r->workers; p++) {
      strata_json_array_begin(&j, NULL);
      for (int q = 0; q < r->sfb_peers; q++) strata_json_int(&j, NULL, r->sfb_topology[p * r->sfb_peers + q]);
      strata_json_array_end(&j);
    }
    strata_json_array_end(&j);
    strata_json_bool(&j, "check_replicas", o->check_replicas);
    strata_json_object_end(&j);
  }
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
  if (is_ps) {
    /* Over every pass and worker: the ESSP paper's staleness profile. */
    strata_worker_stats sum;
    memset(&sum, 0, sizeof sum);
    for (int w = 0; w < r->workers && r->worker_total; w++) add_diffs(&sum, &r->worker_total[w]);
    write_diffs(&j, "clock_diff", &sum);
  }
  if (sfb) {
    strata_worker_stats sum;
    memset(&sum, 0, sizeof sum);
    for (int w = 0; w < r->workers && r->worker_total; w++) add_delays(&sum, &r->worker_total[w]);
    write_delays(&j, &sum);
  }
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
    if (is_ps) {
      strata_worker_stats sum;
      memset(&sum, 0, sizeof sum);
      for (int w = 0; w < r->workers; w++)
        add_diffs(&sum, &r->per_pass_worker[(size_t)p * (size_t)r->workers + (size_t)w]);
      write_diffs(&j, "clock_diff", &sum);
    }
    if (sfb) {
      /* drift: the largest |W_p - W_q| over every pair of replicas at the
       * pass's end, over drift_rows rows of W; null when not measured (one
       * worker) or not finite. */
      strata_json_number(&j, "drift", ps->drift < 0 ? 0.0 / 0.0 : ps->drift);
      strata_json_int(&j, "drift_rows", ps->drift_rows);
      strata_worker_stats sum;
      memset(&sum, 0, sizeof sum);
      for (int w = 0; w < r->workers; w++)
        add_delays(&sum, &r->per_pass_worker[(size_t)p * (size_t)r->workers + (size_t)w]);
      write_delays(&j, &sum);
    }
    strata_json_array_begin(&j, "workers");
    for (int w = 0; w < r->workers; w++) {
      strata_json_object_begin(&j, NULL);
      write_worker(&j, &r->per_pass_worker[(size_t)p * (size_t)r->workers + (size_t)w], sfb);
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
    write_worker(&j, &r->worker_total[w], sfb);
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
