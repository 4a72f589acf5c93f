/*
 * The coordinator (rank 0): loads the problem once, computes the static
 * schedule, ships each worker its blocks, then only listens: one report per
 * worker per pass, from which it prints progress and builds the metrics. It
 * is never between two sub-epochs of a worker.
 */
#include <limits.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scheduler/protocol.h"
#include "strata/core.h"

void strata_problem_close(strata_problem *p) {
  strata_free(p->global.buf);
  for (int i = 0; p->data && i < p->n_data; i++) strata_free(p->data[i].buf);
  for (int i = 0; p->eval && i < p->n_data; i++) strata_free(p->eval[i].buf);
  for (int i = 0; p->resident && i < p->n_resident; i++) strata_free(p->resident[i].buf);
  for (int i = 0; p->rotating && i < p->n_rotating; i++) strata_free(p->rotating[i].buf);
  strata_free(p->data);
  strata_free(p->eval);
  strata_free(p->resident);
  strata_free(p->rotating);
  strata_free(p->meta);
  if (p->priv && p->priv_free) p->priv_free(p->priv);
  memset(p, 0, sizeof *p);
}

int strata_problem_alloc(strata_problem *p, int n_data, int n_resident, int n_rotating,
                         int with_eval) {
  p->n_data = n_data;
  p->n_resident = n_resident;
  p->n_rotating = n_rotating;
  p->data = strata_calloc((size_t)n_data, sizeof(strata_block));
  p->eval = with_eval ? strata_calloc((size_t)n_data, sizeof(strata_block)) : NULL;
  p->resident = strata_calloc((size_t)n_resident, sizeof(strata_block));
  p->rotating = strata_calloc((size_t)n_rotating, sizeof(strata_block));
  if (!p->data || (with_eval && !p->eval) || !p->resident || !p->rotating) {
    strata_problem_close(p);
    return strata_err_set(STRATA_ENOMEM, "out of memory allocating the problem");
  }
  return 0;
}

/* A growing set of outstanding requests the coordinator waits on at once. */
typedef struct reqset {
  strata_req *r;
  int n, cap;
} reqset;

typedef struct coord {
  const strata_app *app;
  const void *cfg;
  const strata_engine_opts *opts;
  strata_setup setup;
  strata_problem prob;
  strata_schedule sched;
  strata_run_result *res;
  double t_train0, cpu_train0;
  double last_progress;
  double partials[STRATA_MAX_PARTIALS];
  double view_partials[STRATA_MAX_PARTIALS];
  int reports_in; /* reports received for the pass being assembled */
  int unscored;   /* one of them says the pass was not scored */
  /* Verdicts: lag L; ctl[k] for every pass k decided so far (n_decided);
   * the passes the workers run (all, or up to the diverged pass + L). */
  int lag;
  pass_control *ctl;
  int n_decided;
  int run_passes;
  int diverged_pass; /* 1-based, 0 none */
  char diverged[256];
  strata_transport *t; /* NULL in serial mode */
  reqset ctl_sends;
  double *obj_hist;    /* passes * STRATA_MAX_OBJECTIVES, for pass_control */
} coord;

static int decide(coord *c, int k);

/* Whether the summed partials of pass `pass` (0-based) are all finite; if
 * not, records the divergence message, naming the objectives the
 * non-finite partials make non-finite (those finite once they are 1). */
static int check_finite(coord *c, int pass, const double *values) {
  const strata_app *app = c->app;
  int bad = 0;
  double clean[STRATA_MAX_PARTIALS], cv[STRATA_MAX_OBJECTIVES];
  for (int i = 0; i < app->n_partials; i++) {
    bad |= !isfinite(c->partials[i]);
    clean[i] = isfinite(c->partials[i]) ? c->partials[i] : 1.0;
  }
  if (!bad) return 1;
  app->objectives(c->cfg, &c->prob, clean, cv);
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

static int alloc_result(coord *c) {
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
  r->per_pass = strata_calloc((size_t)N, sizeof *r->per_pass);
  r->per_pass_worker = strata_calloc((size_t)N * (size_t)P, sizeof *r->per_pass_worker);
  r->worker_total = strata_calloc((size_t)P, sizeof *r->worker_total);
  c->ctl = strata_calloc((size_t)N, sizeof *c->ctl);
  c->obj_hist = strata_calloc((size_t)N * STRATA_MAX_OBJECTIVES, sizeof *c->obj_hist);
  if (!r->per_pass || !r->per_pass_worker || !r->worker_total || !c->ctl || !c->obj_hist)
    return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  c->lag = strata__control_lag(c->opts);
  c->run_passes = N;
  return 0;
}

/* Folds one worker's report into the pass; logs the pass when complete. */
static int take_report(void *ud, const pass_report *rep) {
  coord *c = ud;
  strata_run_result *r = c->res;
  int P = c->setup.workers;
  if (rep->pass < 1 || rep->pass > c->setup.passes || rep->worker < 0 || rep->worker >= P)
    return strata_err_set(STRATA_ECOMM, "coordinator: bad report (pass %d, worker %d)", rep->pass,
                          rep->worker);
  int pi = rep->pass - 1;
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
  tot->reads += ws->reads;
  tot->diff_sum += ws->diff_sum;
  if (ws->diff_min < tot->diff_min) tot->diff_min = ws->diff_min;
  for (int b = 0; b < STRATA_TABLE_HIST; b++) tot->hist[b] += ws->hist[b];
  ps->pass = rep->pass;
  memcpy(ps->control, c->ctl[pi].ctl, sizeof ps->control);
  ps->time_s = fmax(ps->time_s, ws->time_s);
  ps->compute_s = fmax(ps->compute_s, ws->compute_s);
  ps->wait_s = fmax(ps->wait_s, ws->wait_s);
  ps->eval_s = fmax(ps->eval_s, ws->eval_s);
  ps->bytes_sent += ws->bytes_sent;
  ps->bytes_recv += ws->bytes_recv;
  for (int i = 0; i < c->app->n_partials; i++) c->partials[i] += rep->partials[i];
  c->unscored |= rep->unscored;
  for (int i = 0; i < c->app->n_partials && rep->has_view; i++) c->view_partials[i] += rep->view_partials[i];
  ps->has_view |= rep->has_view;
  if (++c->reports_in < P) return 0;

  c->reports_in = 0;
  c->app->objectives(c->cfg, &c->prob, c->partials, ps->objectives);
  int finite = c->diverged_pass || check_finite(c, pi, ps->objectives);
  /* A pass that ended inside a clock (--wpc > 1) had no consistent model
   * to score: its partials are incomplete, so it reports none. */
  if (c->unscored)
    for (int i = 0; i < c->app->n_objectives; i++) ps->objectives[i] = 0.0 / 0.0;
  c->unscored = 0;
  if (ps->has_view) c->app->objectives(c->cfg, &c->prob, c->view_partials, ps->view_objectives);
  memset(c->view_partials, 0, sizeof c->view_partials);
  memcpy(c->obj_hist + (size_t)pi * STRATA_MAX_OBJECTIVES, ps->objectives, sizeof ps->objectives);
  /* The verdict on pass pi + L: a stop once a pass diverged (the workers
   * then run the passes before it), else its control values. */
  int k = pi + c->lag;
  if (c->n_decided == k && k < c->setup.passes && (finite || !c->ctl[k - 1].stop)) {
    int rc = decide(c, k);
    if (rc) return rc;
  }
  if (!finite) c->run_passes = k < c->setup.passes ? k : c->setup.passes;
  memset(c->partials, 0, sizeof c->partials);
  memcpy(r->objectives, ps->objectives, sizeof r->objectives);
  /* One line per pass; runs of many fast passes print at most one a second
   * (plus the last) so the log stays readable. */
  double now = strata_now();
  int show = c->setup.passes <= 100 || rep->pass == c->setup.passes || now - c->last_progress >= 1.0;
  if (c->opts->progress && show) {
    c->last_progress = now;
    char obj[256] = "";
    size_t used = 0;
    for (int i = 0; i < c->app->n_objectives && used < sizeof obj; i++)
      if (!isnan(ps->objectives[i]))
        used += (size_t)snprintf(obj + used, sizeof obj - used, "  %s %.4f",
                               c->app->objective_names[i], ps->objectives[i]);
    /* The views' objectives where they differ from the model's. */
    for (int i = 0; i < c->app->n_objectives && ps->has_view && used < sizeof obj; i++)
      if (!isnan(ps->view_objectives[i]) && ps->view_objectives[i] != ps->objectives[i])
        used += (size_t)snprintf(obj + used, sizeof obj - used, "  view_%s %.4f",
                               c->app->objective_names[i], ps->view_objectives[i]);
    double rate = ps->time_s > 0 ? (double)c->prob.n_examples / ps->time_s / 1e6 : 0;
    strata_log(STRATA_LOG_INFO, "pass %d/%d  %.3fs  %.1f M/s  wait %.1f%%%s", rep->pass,
               c->setup.passes, ps->time_s, rate,
               ps->time_s > 0 ? 100.0 * ps->wait_s / ps->time_s : 0.0, obj);
  }
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

static void finish_result(coord *c) {
  strata_run_result *r = c->res;
  r->n_examples = c->prob.n_examples;
  r->wall_s = strata_now() - c->t_train0;
  r->coordinator_train_cpu_s = strata_cpu_seconds() - c->cpu_train0;
  int N = c->setup.passes;
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
  for (int w = 0; w < c->setup.workers; w++) {
    double sum = 0;
    for (int i = first; i < N; i++) sum += r->per_pass_worker[(size_t)i * (size_t)c->setup.workers + (size_t)w].time_s;
    if (sum / (N - first) > r->mean_pass_s) r->mean_pass_s = sum / (N - first);
  }
  r->window_pass_s = window_pass(r, N, c->setup.workers);
  r->updates_per_s = r->time_per_pass_s > 0 ? (double)r->n_examples / r->time_per_pass_s : 0;
}


/* A fresh null slot at the end of the set, or NULL when memory runs out. */
static strata_req *reqset_next(reqset *s) {
  if (s->n == s->cap) {
    int nc = s->cap ? 2 * s->cap : 64;
    strata_req *nr = strata_realloc(s->r, (size_t)nc * sizeof *nr);
    if (!nr) return NULL;
    s->r = nr;
    s->cap = nc;
  }
  s->r[s->n] = (strata_req){0};
  return &s->r[s->n++];
}

static int send_all(strata_transport *t, reqset *rs, const void *buf, size_t len, int dst, int tag) {
  strata_req *rq = reqset_next(rs);
  if (!rq) return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  return t->isend(t->impl, buf, len, dst, tag, rq);
}

/* Fixes pass k's verdict and, with workers, sends it to each. */
static int decide(coord *c, int k) {
  pass_control *v = &c->ctl[k];
  memset(v, 0, sizeof *v);
  v->pass = k;
  v->stop = c->diverged_pass != 0;
  if (!v->stop && c->app->pass_control) {
    int known = k - c->lag + 1;
    c->app->pass_control(c->cfg, k, c->obj_hist, known > 0 ? known : 0, k ? c->ctl[k - 1].ctl : NULL,
                         v->ctl);
  }
  c->n_decided = k + 1;
  int rc = 0;
  for (int w = 0; c->t && w < c->setup.workers && !rc; w++)
    rc = send_all(c->t, &c->ctl_sends, v, sizeof *v, w + 1, TAG_CONTROL);
  return rc;
}

/* The verdicts of the first L passes, which follow no summed pass. */
static int decide_first(coord *c) {
  int rc = 0;
  for (int k = 0; k < c->lag && k < c->setup.passes && !rc; k++) rc = decide(c, k);
  return rc;
}

/* The run's end after a stop verdict: every worker ran the passes before
 * it; nothing is exported. */
static int diverged(coord *c) {
  c->res->peers_blocked = 0;
  c->res->workers_done = 1;
  return strata_err_set(STRATA_EDIVERGED, "%s", c->diverged);
}

static int recv_into(strata_transport *t, reqset *rs, strata_block *b, int src, int tag) {
  strata_req *rq = reqset_next(rs);
  if (!rq) return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  return t->irecv(t->impl, b->buf, b->len, src, tag, rq);
}

/* Waits until every worker is set up, then lets them all begin (protocol.h). */
static int start_together(strata_transport *t, int P) {
  char none[1];
  reqset rs = {0};
  int rc = 0;
  for (int w = 0; w < P && !rc; w++) {
    strata_req *rq = reqset_next(&rs);
    rc = rq ? t->irecv(t->impl, none, 0, w + 1, TAG_START, rq)
            : strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  }
  if (!rc) rc = strata__loop_wait_all(t, rs.r, rs.n);
  rs.n = 0;
  for (int w = 0; w < P && !rc; w++) rc = send_all(t, &rs, none, 0, w + 1, TAG_START);
  if (!rc) rc = strata__loop_wait_all(t, rs.r, rs.n);
  strata_free(rs.r);
  return rc;
}

/* Tells every worker the run failed before it began, so all ranks end. */
static void send_failure(strata_transport *t, int code) {
  setup_header h;
  memset(&h, 0, sizeof h);
  h.status = code;
  int P = t->size - 1;
  strata_req reqs[P > 0 ? P : 1];
  for (int w = 0; w < P; w++) {
    reqs[w] = (strata_req){0};
    t->isend(t->impl, &h, sizeof h, w + 1, TAG_HEADER, &reqs[w]);
  }
  strata__loop_wait_all(t, reqs, P);
}

static int ship(coord *c, strata_transport *t, void *sched_buf, size_t sched_len,
                block_desc *desc, setup_header *h) {
  strata_problem *p = &c->prob;
  int P = c->setup.workers, rc = 0;
  reqset rs = {0};
  strata_block **list = strata_malloc((2 * (size_t)p->n_data + (size_t)p->n_resident +
                                       (size_t)p->n_rotating) * sizeof *list);
  char **bundles = strata_calloc((size_t)P, sizeof *bundles);
  if (!list || !bundles) {
    strata_free(list);
    strata_free(bundles);
    return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  }
  size_t ndesc = (size_t)p->n_data * (h->has_eval ? 2 : 1) + (size_t)p->n_resident +
                 (size_t)p->n_rotating;
  for (int w = 0; w < P && !rc; w++) {
    int dst = w + 1;
    rc = send_all(t, &rs, h, sizeof *h, dst, TAG_HEADER);
    if (!rc && p->meta_len) rc = send_all(t, &rs, p->meta, p->meta_len, dst, TAG_META);
    if (!rc) rc = send_all(t, &rs, sched_buf, sched_len, dst, TAG_SCHED);
    if (!rc) rc = send_all(t, &rs, desc, ndesc * sizeof *desc, dst, TAG_DESC);
    /* One bundle per worker; the training data is not needed here once
     * copied, so it goes as the bundle grows. */
    size_t total;
    int n = strata__setup_blocks(&c->sched, w, strata_engine_is_ps(c->setup.mode), p->data, p->eval, p->resident, p->rotating, list,
                                 &total);
    char *bundle = strata_malloc(total ? total : 1);
    if (!bundle) {
      rc = strata_err_set(STRATA_ENOMEM, "coordinator: out of memory for worker %d's blocks", w);
      break;
    }
    bundles[w] = bundle;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
      memcpy(bundle + off, list[i]->buf, list[i]->len);
      off += list[i]->len;
      int is_data = list[i] >= p->data && list[i] < p->data + p->n_data;
      int is_eval = p->eval && list[i] >= p->eval && list[i] < p->eval + p->n_data;
      if (is_data || is_eval) {
        strata_free(list[i]->buf);
        list[i]->buf = NULL;
      }
    }
    for (size_t o = 0; o < total && !rc; o += STRATA__PIECE)
      rc = send_all(t, &rs, bundle + o, total - o < STRATA__PIECE ? total - o : STRATA__PIECE, dst,
                    TAG_BLOCK);
    if (!rc && p->global.len) rc = send_all(t, &rs, p->global.buf, p->global.len, dst, TAG_GLOBAL);
  }
  if (!rc) rc = strata__loop_wait_all(t, rs.r, rs.n);
  strata_free(rs.r);
  for (int w = 0; bundles && w < P; w++) strata_free(bundles[w]);
  strata_free(bundles);
  strata_free(list);
  return rc;
}

/* Parameter-server modes keep rotating rows in one float table and end K
 * clocks per pass at chunk boundaries: check both fit the problem. */
static int check_ps(coord *c) {
  const strata_problem *p = &c->prob;
  uint32_t rb = 0;
  for (int i = 0; i < p->n_rotating; i++) {
    const strata_block *b = &p->rotating[i];
    if (!b->nrows) continue;
    if (!rb) rb = b->row_bytes;
    if (b->row_bytes != rb || rb % sizeof(float))
      return strata_err_set(STRATA_EINVAL,
                            "%s: --mode %s needs rotating rows of one size in whole floats "
                            "(block %d has %u bytes, others %u)",
                            c->app->name, c->setup.mode, i, b->row_bytes, rb);
  }
  if (!rb) return strata_err_set(STRATA_EINVAL, "%s: no rotating rows to put in a table", c->app->name);
  if (p->global.len && p->global.row_bytes != rb)
    return strata_err_set(STRATA_EINVAL,
                          "%s: --mode %s keeps the global rows in the table: they need the rotating "
                          "rows' size (%u bytes, not %u)",
                          c->app->name, c->setup.mode, rb, p->global.row_bytes);
  int K = strata__clocks_per_pass(c->opts->wpc);
  for (int w = 0; w < c->setup.workers && K; w++) {
    long chunks = 0;
    for (int s = 0; s < c->sched.n_subepochs; s++) {
      int n;
      strata_schedule_tasks(&c->sched, s, w, &n);
      chunks += (long)n * c->setup.depth;
    }
    if (chunks < K)
      return strata_err_set(STRATA_EUSAGE,
                            "--wpc %g ends %d clocks per pass but worker %d has only %ld chunks "
                            "of work per pass: raise --depth or --strata",
                            c->opts->wpc, K, w, chunks);
  }
  return 0;
}

static int load_and_schedule(coord *c) {
  int ps = strata_engine_is_ps(c->setup.mode);
  if (ps && !(c->app->flags & STRATA_APP_ADDITIVE))
    return strata_err_set(STRATA_EUSAGE,
                          "%s: --mode %s needs an app whose parameters merge by adding deltas; "
                          "this one runs in scheduled or serial mode",
                          c->app->name, c->setup.mode);
  int rc = c->app->load(c->cfg, &c->setup, &c->prob);
  if (rc) return rc;
  if (c->prob.n_examples == 0) return strata_err_set(STRATA_EEMPTY, "no training examples");
  rc = c->app->schedule(c->cfg, &c->setup, &c->prob, &c->sched);
  if (rc) return rc;
  if (c->sched.n_workers != c->setup.workers || c->sched.n_data != c->prob.n_data ||
      c->sched.n_resident != c->prob.n_resident || c->sched.n_rotating != c->prob.n_rotating)
    return strata_err_set(STRATA_ESCHED, "%s: schedule does not match the problem's blocks",
                          c->app->name);
  for (int i = 0; i < c->prob.n_rotating; i++) {
    const strata_block *b = &c->prob.rotating[i];
    if ((size_t)b->nrows * b->row_bytes != b->len)
      return strata_err_set(STRATA_EINVAL, "%s: rotating block %d is not nrows x row_bytes",
                            c->app->name, i);
  }
  const strata_block *g = &c->prob.global;
  if (g->len && (!g->row_bytes || g->row_bytes % sizeof(float) || (size_t)g->nrows * g->row_bytes != g->len))
    return strata_err_set(STRATA_EINVAL, "%s: the global block is not nrows x row_bytes of floats",
                          c->app->name);
  if (g->len > INT_MAX)
    return strata_err_set(STRATA_ETOOBIG, "%s: the global block is over 2 GiB", c->app->name);
  /* Parameter blocks travel whole (evaluation exchange, export); refuse now
   * rather than after some workers were sent their set-up. Data blocks go
   * in bundle pieces and have no such limit. */
  const strata_problem *p = &c->prob;
  for (int i = 0; i < p->n_resident; i++)
    if (p->resident[i].len > INT_MAX)
      return strata_err_set(STRATA_ETOOBIG, "parameter block %d is over 2 GiB: use more --strata", i);
  for (int i = 0; i < p->n_rotating; i++)
    if (p->rotating[i].len > INT_MAX)
      return strata_err_set(STRATA_ETOOBIG, "parameter block %d is over 2 GiB: use more --strata", i);
  return ps ? check_ps(c) : 0;
}

static int export_model(coord *c) {
  if (!c->setup.model_out || !c->app->export_model) return 0;
  return c->app->export_model(c->cfg, &c->setup, &c->prob, c->setup.model_out);
}

static int run_coordinator(coord *c, strata_transport *t) {
  strata_problem *p = &c->prob;
  void *sched_buf = NULL;
  size_t sched_len = 0;
  block_desc *desc = NULL;
  pass_report *reps = NULL;
  strata_req *reqs = NULL;
  int P = c->setup.workers;
  double t0 = strata_now();
  int rc = load_and_schedule(c);
  if (!rc) rc = strata_schedule_pack(&c->sched, &sched_buf, &sched_len);
  if (rc) {
    send_failure(t, rc);
    goto done;
  }
  c->res->load_s = strata_now() - t0;

  setup_header h;
  memset(&h, 0, sizeof h);
  h.has_eval = p->eval != NULL;
  h.n_data = p->n_data;
  h.n_resident = p->n_resident;
  h.n_rotating = p->n_rotating;
  h.meta_len = p->meta_len;
  h.sched_len = sched_len;
  h.n_examples = p->n_examples;
  h.global = (block_desc){p->global.len, p->global.nrows, p->global.row_bytes};
  size_t nd = (size_t)p->n_data, ndesc = nd * (h.has_eval ? 2 : 1) + (size_t)p->n_resident +
                                         (size_t)p->n_rotating;
  desc = strata_malloc(ndesc * sizeof *desc);
  if (!desc) {
    rc = strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
    send_failure(t, rc);
    goto done;
  }
  size_t k = 0;
  for (size_t i = 0; i < nd; i++) desc[k++] = (block_desc){p->data[i].len, p->data[i].nrows, p->data[i].row_bytes};
  for (size_t i = 0; i < nd && h.has_eval; i++) desc[k++] = (block_desc){p->eval[i].len, p->eval[i].nrows, p->eval[i].row_bytes};
  for (int i = 0; i < p->n_resident; i++) desc[k++] = (block_desc){p->resident[i].len, p->resident[i].nrows, p->resident[i].row_bytes};
  for (int i = 0; i < p->n_rotating; i++) desc[k++] = (block_desc){p->rotating[i].len, p->rotating[i].nrows, p->rotating[i].row_bytes};

  double t1 = strata_now();
  /* From here until the model is in, workers depend on this rank. */
  c->res->peers_blocked = 1;
  if ((rc = ship(c, t, sched_buf, sched_len, desc, &h))) goto done;
  if ((rc = start_together(t, P))) goto done;
  c->t = t;
  if ((rc = decide_first(c))) goto done;
  c->res->setup_s = strata_now() - t1;
  c->t_train0 = strata_now();
  c->cpu_train0 = strata_cpu_seconds();
  reps = strata_malloc((size_t)P * sizeof *reps);
  reqs = strata_calloc((size_t)P, sizeof *reqs);
  if (!reps || !reqs) {
    rc = strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
    goto done;
  }
  for (int pass = 0; pass < c->run_passes && !rc; pass++) {
    for (int w = 0; w < P && !rc; w++)
      rc = t->irecv(t->impl, &reps[w], sizeof reps[w], w + 1, TAG_REPORT, &reqs[w]);
    if (!rc) rc = strata__loop_wait_all(t, reqs, P);
    for (int w = 0; w < P && !rc; w++) rc = take_report(c, &reps[w]);
  }
  /* Every verdict has been taken: a worker takes each before its pass. */
  if (!rc) rc = strata__loop_wait_all(t, c->ctl_sends.r, c->ctl_sends.n);
  if (rc) goto done;
  if (c->diverged_pass) {
    rc = diverged(c);
    goto done;
  }
  finish_result(c);

  if (c->setup.model_out) {
    reqset er = {0};
    int S = c->sched.n_subepochs;
    for (int w = 0; w < P && !rc; w++) {
      for (int i = 0; i < p->n_resident && !rc; i++)
        if (strata_schedule_resident_owner(&c->sched, i) == w && p->resident[i].len)
          rc = recv_into(t, &er, &p->resident[i], w + 1, TAG_EXPORT);
      for (int i = 0; i < p->n_rotating && !rc; i++)
        if (strata_schedule_rotating_holder(&c->sched, i, S - 1) == w && p->rotating[i].len)
          rc = recv_into(t, &er, &p->rotating[i], w + 1, TAG_EXPORT);
    }
    if (!rc && p->global.len) rc = recv_into(t, &er, &p->global, 1, TAG_GLOBAL);
    if (!rc) rc = strata__loop_wait_all(t, er.r, er.n);
    strata_free(er.r);
    if (!rc) {
      c->res->peers_blocked = 0;
      c->res->workers_done = 1;
      rc = export_model(c);
    }
  } else {
    c->res->peers_blocked = 0;
    c->res->workers_done = 1;
  }
done:
  strata_free(sched_buf);
  strata_free(desc);
  strata_free(reps);
  strata_free(reqs);
  return rc;
}

/* Serial mode: the verdicts are decided in the same process, before the
 * passes they govern (the pass they follow was summed in take_report). */
static int serial_control(void *ud, int pass, pass_control *out) {
  coord *c = ud;
  if (pass >= c->n_decided)
    return strata_err_set(STRATA_EINVAL, "serial: no verdict for pass %d", pass + 1);
  *out = c->ctl[pass];
  return 0;
}

/* Serial mode: the same load, schedule and worker loop in one process; the
 * blocks move from the problem into the worker and back, never copied. */
static int run_serial(coord *c) {
  strata_problem *p = &c->prob;
  strata__worker w;
  memset(&w, 0, sizeof w);
  double t0 = strata_now();
  int rc = load_and_schedule(c);
  if (rc) return rc;
  c->res->load_s = strata_now() - t0;
  w.app = c->app;
  w.cfg = c->cfg;
  w.setup = c->setup;
  w.setup.worker = 0;
  w.me = 0;
  w.has_eval = p->eval != NULL;
  w.report = take_report;
  w.report_ud = c;
  w.control = serial_control;
  w.opts = c->opts;
  w.sched = c->sched;
  w.data = p->data;
  w.eval = p->eval;
  w.res = p->resident;
  w.rot = p->rotating;
  w.global = p->global.len ? &p->global : NULL;
  rc = c->app->worker_init(c->cfg, &w.setup, p->meta, p->meta_len, &w.state);
  c->t_train0 = strata_now();
  c->cpu_train0 = strata_cpu_seconds();
  strata__disrupt *dis = NULL;
  if (!rc && c->opts->disrupt_prob > 0)
    rc = strata__disrupt_start(c->opts->disrupt_prob, c->opts->disrupt_slot_ms,
                               c->opts->seed * 1000003u, &dis);
  if (!rc) rc = decide_first(c);
  if (!rc) rc = strata__worker_loop(&w);
  strata__disrupt_stop(dis);
  if (w.state && c->app->worker_free) c->app->worker_free(w.state);
  if (rc) return rc;
  if (c->diverged_pass) return diverged(c);
  finish_result(c);
  return export_model(c);
}

/* The model directory may exist (files in it are replaced) or be creatable. */
static int check_model_dir(const char *dir) {
  struct stat st;
  if (stat(dir, &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return strata_err_set(STRATA_EIO, "%s: exists and is not a directory", dir);
    char probe[4096];
    if (snprintf(probe, sizeof probe, "%s/meta.json", dir) >= (int)sizeof probe)
      return strata_err_set(STRATA_EINVAL, "%s: path too long", dir);
    return strata_check_writable(probe);
  }
  return strata_check_writable(dir);
}

int strata_engine_run(const strata_app *app, void *cfg, const strata_engine_opts *opts,
                      strata_transport *t, strata_run_result *result) {
  int serial = t == NULL;
  int P = serial ? 1 : t->size - 1;
  if (!serial && t->rank > 0) {
    int own = 0;
    int rc = strata__worker_main(app, cfg, opts, t, &own);
    result->peers_blocked = own;
    return rc;
  }

  coord c;
  memset(&c, 0, sizeof c);
  c.app = app;
  c.cfg = cfg;
  c.opts = opts;
  c.res = result;
  c.setup = (strata_setup){.workers = P,
                           .strata = opts->strata ? opts->strata : P,
                           .depth = opts->depth,
                           .passes = opts->passes,
                           .seed = opts->seed,
                           .worker = -1,
                           .mode = opts->mode,
                           .model_out = opts->model_out};
  double cpu0 = strata_cpu_seconds(), wall0 = strata_now();
  int rc = alloc_result(&c);
  if (!rc && (app->n_partials > STRATA_MAX_PARTIALS || app->n_objectives > STRATA_MAX_OBJECTIVES ||
              app->n_controls > STRATA_MAX_CONTROLS))
    rc = strata_err_set(STRATA_EINVAL, "%s: at most %d partials, %d objectives and %d controls",
                        app->name, STRATA_MAX_PARTIALS, STRATA_MAX_OBJECTIVES, STRATA_MAX_CONTROLS);
  /* Output paths are checked before any work, so a typo costs nothing. */
  if (!rc && opts->metrics_out) rc = strata_check_writable(opts->metrics_out);
  if (!rc && opts->model_out) rc = check_model_dir(opts->model_out);
  if (rc) {
    if (!serial) send_failure(t, rc);
  } else {
    rc = serial ? run_serial(&c) : run_coordinator(&c, t);
  }
  result->coordinator_cpu_s = strata_cpu_seconds() - cpu0;
  result->coordinator_wall_s = strata_now() - wall0;
  strata_schedule_close(&c.sched);
  strata_free(c.ctl);
  strata_free(c.obj_hist);
  strata_free(c.ctl_sends.r);
  /* The result keeps the problem for describe() and the caller; training
   * data is no longer needed. */
  for (int i = 0; c.prob.data && i < c.prob.n_data; i++) {
    strata_free(c.prob.data[i].buf);
    c.prob.data[i].buf = NULL;
  }
  result->problem = c.prob;
  return rc;
}

int strata_engine_finish(strata_transport *t, int rc) {
  if (!t) return rc;
  int32_t code = rc;
  if (t->rank == 0) {
    /* One small message per worker, each waited for: nothing to allocate,
     * so even an out-of-memory rank 0 can still release its workers. */
    int err = 0;
    for (int w = 1; w < t->size && !err; w++) {
      strata_req rq = {0};
      err = t->isend(t->impl, &code, sizeof code, w, TAG_FINAL, &rq);
      if (!err) err = strata__loop_wait_all(t, &rq, 1);
    }
    return rc ? rc : err;
  }
  strata_req rq = {0};
  int err = t->irecv(t->impl, &code, sizeof code, 0, TAG_FINAL, &rq);
  if (!err) err = strata_comm_wait_idle(t, &rq);
  if (err) return err;
  /* The coordinator reports its own failure; this rank only follows. */
  if (code) strata_err_clear();
  return code;
}
