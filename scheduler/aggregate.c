/*
 * Metric aggregation (scheduler/aggregate.h): one place turns pass reports
 * into the run's figures and verdicts, for every mode.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm/live.h"
#include "scheduler/aggregate.h"
#include "strata/core.h"

static int decide(strata__agg *c, int k);

/* What objectives and pass_control see of the problem, the same in every
 * mode: the coordinator's side (meta, priv, a round app's coordinator
 * block, the counts of examples and rounds), none of the data or
 * parameter blocks, which are the workers' (in serial mode too, where the
 * one worker computes on them in place). */
static strata_problem coord_view(const strata_problem *p) {
  strata_problem v;
  memset(&v, 0, sizeof v);
  v.meta = p->meta;
  v.meta_len = p->meta_len;
  v.n_examples = p->n_examples;
  v.priv = p->priv;
  v.rounds_per_pass = p->rounds_per_pass;
  v.coord = p->coord;
  return v;
}

/* The app's convergence measure after pass pi (strata_app.tol; NaN when it
 * has none or cannot tell yet). */
static double tol_measure(const strata__agg *c, int pi) {
  const strata_tol *t = &c->app->tol;
  if (t->kind == STRATA_TOL_NONE || t->objective < 0 || t->objective >= c->app->n_objectives)
    return 0.0 / 0.0;
  double f = c->obj_hist[(size_t)pi * STRATA_MAX_OBJECTIVES + (size_t)t->objective];
  if (t->kind == STRATA_TOL_VALUE) return f;
  if (pi < 1) return 0.0 / 0.0;
  double prev = c->obj_hist[(size_t)(pi - 1) * STRATA_MAX_OBJECTIVES + (size_t)t->objective];
  return fabs(f - prev) / fabs(f);
}

/* Whether --tol says the run has converged after pass pi. */
static int converged(const strata__agg *c, int pi) {
  double tol = c->opts ? c->opts->tol : 0;
  return tol > 0 && tol_measure(c, pi) <= tol;
}

/* Whether the combined partials of pass `pass` (0-based) show no sign of
 * divergence (strata_partial_is_bad: a MAX or MIN partial still at its
 * infinite identity is fine); if they do, records the divergence message,
 * naming the objectives the bad partials make non-finite (those finite
 * once they are 1). */
static int check_finite(strata__agg *c, int pass, const double *values) {
  const strata_app *app = c->app;
  int bad = 0;
  double clean[STRATA_MAX_PARTIALS], cv[STRATA_MAX_OBJECTIVES];
  for (int i = 0; i < app->n_partials; i++) {
    int b = strata_partial_is_bad(app, i, c->partials[i]);
    bad |= b;
    clean[i] = b ? 1.0 : c->partials[i];
  }
  if (!bad) return 1;
  strata_problem view = coord_view(c->prob);
  app->objectives(c->cfg, &view, clean, cv);
  char names[160] = "";
  size_t used = 0;
  for (int i = 0; i < app->n_objectives && used < sizeof names; i++)
    if (!isfinite(values[i]) && isfinite(cv[i]))
      used += (size_t)snprintf(names + used, sizeof names - used, "%s%s is %s", used ? ", " : "",
                               app->objective_names[i], isnan(values[i]) ? "nan" : "infinite");
  snprintf(c->diverged, sizeof c->diverged, "the run diverged at pass %d: %s%s%s", pass + 1,
           used ? names : "its objectives are not finite", app->diverged_hint ? "; " : "",
           app->diverged_hint ? app->diverged_hint : "");
  c->diverged_pass = pass + 1;
  return 0;
}

/* Folds pass t of obj_hist into the rise check of the objectives that
 * must fall (app->falling); if one has stayed above its limit for
 * STRATA_RISE_PASSES passes, or is above it after the run's last pass,
 * records the divergence message and returns 0. */
static int rise_fold(strata__agg *c, int t) {
  const strata_app *app = c->app;
  double limit = app->rise_limit > 0 ? app->rise_limit : STRATA_RISE_LIMIT;
  const double *v = c->obj_hist + (size_t)t * STRATA_MAX_OBJECTIVES;
  for (int i = 0; i < app->n_objectives && i < STRATA_MAX_OBJECTIVES; i++) {
    /* NaN: not scored this pass (or not defined); an infinity is the
     * non-finite check's. */
    if (!(app->falling >> i & 1u) || !isfinite(v[i])) continue;
    int seen = c->rise_best_pass[i] >= 0;
    double best = c->rise_best[i];
    /* A ratio says nothing once the best is 0 or negative. */
    if (seen && best > 0 && v[i] > limit * best) {
      if (++c->rise_over[i] < STRATA_RISE_PASSES && t < c->setup.passes - 1) continue;
      snprintf(c->diverged, sizeof c->diverged,
               "the run diverged at pass %d: %s rose from %.4g (pass %d) to %.4g%s%s", t + 1,
               app->objective_names[i], best, c->rise_best_pass[i] + 1, v[i],
               app->diverged_hint ? "; " : "", app->diverged_hint ? app->diverged_hint : "");
      c->diverged_pass = t + 1;
      return 0;
    }
    c->rise_over[i] = 0;
    if (!seen || v[i] < best) {
      c->rise_best[i] = v[i];
      c->rise_best_pass[i] = t;
    }
  }
  return 1;
}

/* The rise check up to pass `pass`, whose objectives are in obj_hist. */
static int check_rise(strata__agg *c, int pass) {
  if (!c->app->falling) return 1;
  while (c->rise_seen <= pass)
    if (!rise_fold(c, c->rise_seen++)) return 0;
  return 1;
}

int strata__agg_open(strata__agg *c) {
  strata_run_result *r = c->res;
  int P = c->setup.workers, N = c->setup.passes;
  r->app = c->app;
  r->cfg = c->cfg;
  r->mode = c->setup.mode;
  r->opts = c->opts;
  r->workers = P;
  r->strata = c->setup.strata;
  r->depth = c->setup.depth;
  r->passes = N;
  r->worker_total = strata_calloc((size_t)P, sizeof *r->worker_total);
  if (!r->worker_total) return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  int rc = strata__agg_reserve(c, N < 1 ? N : 1);
  if (rc) return rc;
  r->checkpoint_last = -1;
  c->run_passes = N;
  strata_partials_init(c->app, c->partials);
  strata_partials_init(c->app, c->view_partials);
  c->rise_seen = 0;
  for (int i = 0; i < STRATA_MAX_OBJECTIVES; i++) {
    c->rise_best_pass[i] = -1;
    c->rise_over[i] = 0;
  }
  return 0;
}

/* p (room for *cap passes of `size` bytes) with room for `need`, the new
 * passes zeroed; NULL (p as it was) when out of memory. */
static void *grow_passes(void *p, size_t *cap, size_t need, size_t limit, size_t size) {
  size_t old = *cap;
  char *q = strata_grow(p, need, cap, limit, size);
  if (q) memset(q + old * size, 0, (*cap - old) * size);
  return q;
}

int strata__agg_reserve(strata__agg *c, int n) {
  strata_run_result *r = c->res;
  size_t need = n > 0 ? (size_t)n : 0, N = (size_t)c->setup.passes, P = (size_t)c->setup.workers;
  if (need > N) return strata_err_set(STRATA_EINVAL, "coordinator: pass %d of a run of %zu", n, N);
  if (need <= c->cap_pass && need <= c->cap_worker && need <= c->cap_ctl && need <= c->cap_obj)
    return 0;
  void *q = grow_passes(r->per_pass, &c->cap_pass, need, N, sizeof *r->per_pass);
  if (q) {
    r->per_pass = q;
    q = grow_passes(r->per_pass_worker, &c->cap_worker, need, N, P * sizeof *r->per_pass_worker);
  }
  if (q) {
    r->per_pass_worker = q;
    q = grow_passes(c->ctl, &c->cap_ctl, need, N, sizeof *c->ctl);
  }
  if (q) {
    c->ctl = q;
    q = grow_passes(c->obj_hist, &c->cap_obj, need, N, STRATA_MAX_OBJECTIVES * sizeof *c->obj_hist);
  }
  if (!q) {
    /* What the history would take, so the message says why. */
    double per = (double)sizeof *r->per_pass + (double)P * (double)sizeof *r->per_pass_worker +
                 (double)sizeof *c->ctl + STRATA_MAX_OBJECTIVES * (double)sizeof *c->obj_hist;
    return strata_err_set(STRATA_ENOMEM,
                          "coordinator: out of memory for the metrics of pass %d (%.1f MB for "
                          "the passes so far, %.0f bytes a pass)",
                          n, per * (double)need / 1e6, per);
  }
  c->obj_hist = q;
  return 0;
}

/* Folds one worker's report into the pass; logs the pass when complete. */
int strata__agg_report(void *ud, const pass_report *rep) {
  strata__agg *c = ud;
  strata_run_result *r = c->res;
  int P = c->setup.workers;
  if (rep->pass < c->start_pass || rep->pass >= c->setup.passes || rep->worker < 0 || rep->worker >= P)
    return strata_err_set(STRATA_ECOMM, "coordinator: bad report (pass %d, worker %d)", rep->pass,
                          rep->worker);
  int pi = rep->pass;
  /* Room for the pass and the verdict it leads to first: the pointers
   * below stay good through decide(). */
  int k_last = pi + c->lag < c->setup.passes ? pi + c->lag : c->setup.passes - 1;
  int room = strata__agg_reserve(c, k_last + 1);
  if (room) return room;
  strata_pass_stats *ps = &r->per_pass[pi];
  const strata_worker_stats *ws = &rep->stats;
  r->per_pass_worker[(size_t)pi * (size_t)P + (size_t)rep->worker] = *ws;
  strata_worker_stats *tot = &r->worker_total[rep->worker];
  tot->time_s += ws->time_s;
  tot->compute_s += ws->compute_s;
  tot->wait_s += ws->wait_s;
  tot->eval_s += ws->eval_s;
  tot->cpu_s += ws->cpu_s;
  tot->span_s += ws->span_s;
  tot->bytes_sent += ws->bytes_sent;
  tot->bytes_recv += ws->bytes_recv;
  tot->eval_bytes += ws->eval_bytes;
  tot->delay_s += ws->delay_s;
  tot->clocks += ws->clocks;
  tot->apply_s += ws->apply_s;
  if (c->facts) {
    strata__facts_stats_add(c->facts, tot, ws);
    strata__facts_pass_add(c->facts, ps, ws);
  }
  ps->pass = rep->pass;
  memcpy(ps->control, c->ctl[pi].ctl, sizeof ps->control);
  ps->time_s = fmax(ps->time_s, ws->time_s);
  ps->compute_s = fmax(ps->compute_s, ws->compute_s);
  ps->wait_s = fmax(ps->wait_s, ws->wait_s);
  ps->eval_s = fmax(ps->eval_s, ws->eval_s);
  ps->bytes_sent += ws->bytes_sent;
  ps->bytes_recv += ws->bytes_recv;
  strata_partials_combine(c->app, c->partials, rep->partials);
  c->unscored |= rep->unscored;
  if (rep->has_view) strata_partials_combine(c->app, c->view_partials, rep->view_partials);
  ps->has_view |= rep->has_view;
  if (++c->reports_in < P) return 0;

  c->reports_in = 0;
  strata__live_pass_time(ps->time_s);
  strata_problem view = coord_view(c->prob);
  c->app->objectives(c->cfg, &view, c->partials, ps->objectives);
  int sound = c->diverged_pass || check_finite(c, pi, ps->objectives);
  /* A pass that ended inside a clock (--wpc > 1) had no consistent model
   * to score: its partials are incomplete, so it reports none. */
  if (c->unscored)
    for (int i = 0; i < c->app->n_objectives; i++) ps->objectives[i] = 0.0 / 0.0;
  c->unscored = 0;
  if (ps->has_view) c->app->objectives(c->cfg, &view, c->view_partials, ps->view_objectives);
  strata_partials_init(c->app, c->view_partials);
  memcpy(c->obj_hist + (size_t)pi * STRATA_MAX_OBJECTIVES, ps->objectives, sizeof ps->objectives);
  if (sound && !c->diverged_pass) sound = check_rise(c, pi);
  /* The verdict on pass pi + L: a stop once a pass diverged (the workers
   * then run the passes before it), else its control values; when the run
   * has converged (--tol), pass pi + L is its last. */
  int k = pi + c->lag;
  if (sound && !c->diverged_pass && converged(c, pi)) strata__agg_end(c, k, "tolerance");
  if (c->n_decided == k && k < c->run_passes && (sound || !c->ctl[k - 1].stop)) {
    int rc = decide(c, k);
    if (rc) return rc;
  }
  if (!sound) c->run_passes = k < c->setup.passes ? k : c->setup.passes;
  strata_partials_init(c->app, c->partials);
  memcpy(r->objectives, ps->objectives, sizeof r->objectives);
  /* One line per pass; runs of many fast passes print at most one a second
   * (plus the last) so the log stays readable. */
  double now = strata_now();
  int show = c->setup.passes <= 100 || pi == c->setup.passes - 1 || now - c->last_progress >= 1.0;
  if (c->opts->progress && show) {
    c->last_progress = now;
    char obj[256] = "";
    size_t used = 0;
    for (int i = 0; i < c->app->n_objectives && used < sizeof obj; i++)
      if (!isnan(ps->objectives[i]))
        /* Four decimals, or four digits for a small value (an SSE of 1e-9). */
        used += (size_t)snprintf(obj + used, sizeof obj - used,
                                 fabs(ps->objectives[i]) >= 1e-3 || ps->objectives[i] == 0
                                     ? "  %s %.4f"
                                     : "  %s %.4g",
                                 c->app->objective_names[i], ps->objectives[i]);
    /* The views' objectives where they differ from the model's. */
    for (int i = 0; i < c->app->n_objectives && ps->has_view && used < sizeof obj; i++)
      if (!isnan(ps->view_objectives[i]) && ps->view_objectives[i] != ps->objectives[i])
        used += (size_t)snprintf(obj + used, sizeof obj - used,
                                 fabs(ps->view_objectives[i]) >= 1e-3 || ps->view_objectives[i] == 0
                                     ? "  view_%s %.4f"
                                     : "  view_%s %.4g",
                                 c->app->objective_names[i], ps->view_objectives[i]);
    double rate = ps->time_s > 0 ? (double)c->prob->n_examples / ps->time_s / 1e6 : 0;
    /* A count for people: pass 1 of N is pass index 0. */
    strata_log(STRATA_LOG_INFO, "pass %d/%d  %.3fs  %.1f M/s  wait %.1f%%%s", pi + 1,
               c->setup.passes, ps->time_s, rate,
               ps->time_s > 0 ? 100.0 * ps->wait_s / ps->time_s : 0.0, obj);
  }
  if (c->view) c->view->summed(c->view->ud, c, pi);
  /* A diverged run keeps its last good checkpoint. */
  if (c->summed && !c->diverged_pass) return c->summed(c->summed_ud, c, pi);
  return 0;
}

/* Each worker's pass times from pass 2 on, in windows of P consecutive
 * passes (one straggler delay each when one comes every P-th clock): the
 * median of the window means, largest over workers. Falls back to
 * mean_pass_s with fewer than P passes after the first, or no memory. */
static double window_pass(const strata_run_result *r, int N, int P) {
  int nw = (N - 1) / P;
  double *win = nw > 0 ? strata_malloc((size_t)nw * sizeof *win) : NULL;
  if (!win) return r->mean_pass_s;
  double best = 0;
  for (int w = 0; w < P; w++) {
    for (int k = 0; k < nw; k++) {
      double sum = 0;
      for (int i = 1 + k * P; i < 1 + (k + 1) * P; i++)
        sum += r->per_pass_worker[(size_t)i * (size_t)P + (size_t)w].time_s;
      win[k] = sum / P;
    }
    double m = strata_median(win, nw);
    if (m > best) best = m;
  }
  strata_free(win);
  return best;
}

/* The summary figures of r over its first N passes (N >= 1). */
static void summarise(strata_run_result *r, int N, int P) {
  double *times = strata_malloc((size_t)N * sizeof *times);
  if (times) {
    for (int i = 0; i < N; i++) times[i] = r->per_pass[i].time_s;
    r->time_per_pass_s = N > 1 ? strata_median(times + 1, N - 1) : times[0];
  } else {
    r->time_per_pass_s = 0.0 / 0.0; /* reported as null rather than a made-up value */
  }
  strata_free(times);
  int first = N > 1 ? 1 : 0;
  r->mean_pass_s = 0;
  for (int w = 0; w < P; w++) {
    double sum = 0;
    for (int i = first; i < N; i++) sum += r->per_pass_worker[(size_t)i * (size_t)P + (size_t)w].time_s;
    if (sum / (N - first) > r->mean_pass_s) r->mean_pass_s = sum / (N - first);
  }
  r->window_pass_s = window_pass(r, N, P);
  r->updates_per_s = r->time_per_pass_s > 0 ? (double)r->n_examples / r->time_per_pass_s : 0;
}

static void finish_result(strata__agg *c) {
  strata_run_result *r = c->res;
  r->n_examples = c->prob->n_examples;
  r->wall_s = strata_now() - c->t_train0 + c->wall_before;
  r->coordinator_train_cpu_s = strata_cpu_seconds() - c->cpu_train0 + c->cpu_before;
  summarise(r, r->passes, c->setup.workers);
}

void strata__agg_snapshot(const strata__agg *c, int done, strata_run_result *out) {
  *out = *c->res;
  out->problem = *c->prob;
  out->n_examples = c->prob->n_examples;
  out->time_per_pass_s = out->mean_pass_s = out->window_pass_s = out->updates_per_s = 0;
  memset(out->objectives, 0, sizeof out->objectives);
  if (c->t_train0 > 0) {
    out->wall_s = strata_now() - c->t_train0 + c->wall_before;
    out->coordinator_train_cpu_s = strata_cpu_seconds() - c->cpu_train0 + c->cpu_before;
  }
  if (done < 1 || !out->per_pass) return;
  summarise(out, done, c->setup.workers);
  memcpy(out->objectives, out->per_pass[done - 1].objectives, sizeof out->objectives);
}

/* Fixes pass k's verdict and, with workers, sends it to each. */
static int decide(strata__agg *c, int k) {
  int rc = strata__agg_reserve(c, k + 1);
  if (rc) return rc;
  pass_control *v = &c->ctl[k];
  memset(v, 0, sizeof *v);
  v->pass = k;
  v->stop = c->diverged_pass != 0;
  v->last = !v->stop && c->stop_reason && k == c->run_passes - 1;
  if (!v->stop && c->app->pass_control) {
    int known = k - c->lag + 1;
    strata_problem view = coord_view(c->prob);
    c->app->pass_control(c->cfg, &view, k, c->obj_hist, known > 0 ? known : 0, k ? c->ctl[k - 1].ctl : NULL,
                         v->ctl);
  }
  c->n_decided = k + 1;
  return c->publish ? c->publish(c->publish_ud, v) : 0;
}

/* The verdicts of the first L passes, which follow no summed pass. */
int strata__agg_decide_first(strata__agg *c) {
  int rc = 0, first = c->start_pass;
  for (int k = first; k < c->n_decided && !rc; k++)
    rc = c->publish ? c->publish(c->publish_ud, &c->ctl[k]) : 0;
  for (int k = c->n_decided; k < first + c->lag && k < c->setup.passes && !rc; k++) rc = decide(c, k);
  return rc;
}

/* The run's end after a stop verdict: every worker ran the passes before
 * it; nothing is exported. */
static int diverged(strata__agg *c) {
  return strata_err_set(STRATA_EDIVERGED, "%s", c->diverged);
}

void strata__agg_end(strata__agg *c, int last, const char *reason) {
  if (last + 1 >= c->run_passes) return;
  c->run_passes = last + 1;
  c->stop_reason = reason;
}

/* Serial mode: the verdicts are decided in the same process, before the
 * passes they govern (the pass they follow was summed in take_report). */
int strata__agg_control(void *ud, int pass, pass_control *out) {
  strata__agg *c = ud;
  if (pass >= c->n_decided)
    return strata_err_set(STRATA_EINVAL, "serial: no verdict for pass %d", pass + 1);
  *out = c->ctl[pass];
  return 0;
}


void strata__agg_start(strata__agg *c) {
  c->t_train0 = strata_now();
  c->cpu_train0 = strata_cpu_seconds();
}

int strata__agg_finish(strata__agg *c) {
  if (c->diverged_pass) {
    c->res->stop_reason = "diverged";
    return diverged(c);
  }
  /* A run stopped early (--tol, a round app's convergence) reports the
   * passes it ran; the result holds every one of them (all summed by now). */
  int n = c->run_passes < c->setup.passes ? c->run_passes : c->setup.passes;
  if (n < 1) n = 1;
  int rc = strata__agg_reserve(c, n);
  if (rc) return rc;
  c->res->passes = n;
  c->res->stop_reason = c->stop_reason ? c->stop_reason : "passes";
  finish_result(c);
  /* Also when every pass came from a checkpoint. */
  memcpy(c->res->objectives, c->res->per_pass[n - 1].objectives, sizeof c->res->objectives);
  return 0;
}

void strata__agg_close(strata__agg *c) {
  strata_free(c->ctl);
  strata_free(c->obj_hist);
  c->ctl = NULL;
  c->obj_hist = NULL;
}
