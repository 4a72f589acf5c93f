/*
 * The parameter-server back-end of the worker loop. The app sees the same
 * task views as on the ring: for each chunk of a task, the rows of its
 * rotating block are read from the table into the block's buffer under the
 * mode's staleness rule, compute updates them in place, and the change of
 * every row it touched goes back to the table as a delta. The worker owns
 * the data and resident blocks of its tasks (data-parallel by the resident
 * side, e.g. users for MF); clocks end after every 1/K of a pass (--wpc).
 *
 * Scoring: pass p is scored on the pure snapshot of the table at the pass's
 * last clock (every worker's updates of passes <= p, none later) and this
 * worker's resident blocks as they were at the end of p, the same model a
 * serial run would score. The snapshot comes once every worker has ended
 * that clock; until then this worker goes on with its next pass, keeping a
 * copy of the resident blocks it scores, and the pass's report waits
 * (reports go out in pass order). Scoring done during a later pass counts
 * as evaluation time of the pass it scores, not in the later pass's time.
 */
#include <stdint.h>
#include <string.h>

#include "scheduler/protocol.h"
#include "strata/core.h"
#include "strata/table.h"

/* A pass whose report waits for its snapshot. */
typedef struct pending {
  pass_report rep;
  int32_t snap;  /* the table snapshot that scores it; 0: unscored */
  float *rows;   /* snapshot rows, table layout */
  float *res;    /* copies of the resident blocks evaluate reads (res_off) */
  int res_live;  /* scored at once: the resident blocks are w->res as they are */
} pending;

typedef struct psw {
  strata__worker *w;
  strata_table *tb;
  uint32_t *off;   /* first table row of rotating block r; off[n_rotating]: the global rows */
  uint32_t L;      /* floats per row */
  float *snap;     /* the chunk's rows as read, to form deltas */
  float *gsnap;    /* the global rows as read */
  float *delta;
  int per_pass;    /* clocks per pass (wpc < 1) or 0 */
  int span;        /* passes per clock (wpc >= 1) or 0 */
  int clocks;      /* clocks ended in this pass */
  int dirty;       /* work since the last clock */
  int straggle;    /* this clock is ours to straggle in: sleep at the end of its work */
  double delay_s;
  /* scoring */
  int scores;          /* anything to score from the table (evaluate or block objectives) */
  uint32_t *need;      /* table rows a score reads, ascending */
  uint32_t n_need, n_rows;
  size_t *res_off;     /* per resident block: offset into pending.res, or SIZE_MAX */
  size_t res_len;      /* bytes of the resident copies */
  pending *q;          /* waiting passes, oldest first: q[0..n_q) */
  int n_q, cap_q;
  float **pool;        /* spare snapshot buffers (rows, then res) */
  int n_pool, cap_pool;
  int32_t snap_id;     /* snapshot asked for in this pass, 0 none */
  float *snap_rows;
  double scored_s;     /* time spent scoring earlier passes during this one */
} psw;

static int end_clock(psw *p) {
  /* A straggler sleeps at the end of its clock's work, before the clock
   * ends (as the LazyTables/NanTable experiments delay an iteration): the
   * others' reads of the next clock wait for it under BSP, and a clock with
   * no work (after the last pass) costs nothing. Its shard keeps answering
   * meanwhile: in the papers the server is another thread or process, which
   * a delayed application thread does not stop. */
  int rc = 0;
  if (p->straggle && p->dirty && p->w->opts->straggler_ms) {
    double t0 = strata_now();
    rc = strata_table_serve_for(p->tb, p->w->opts->straggler_ms / 1000.0,
                                p->w->opts->straggler_spin);
    p->delay_s += strata_now() - t0;
    if (rc) return rc;
  }
  rc = strata_table_clock(p->tb);
  if (rc) return rc;
  p->clocks++;
  p->dirty = 0;
  p->straggle = strata_table_current_clock(p->tb) % p->w->sched.n_workers == p->w->me;
  return 0;
}

/* Sends the change of n rows (view against snap) starting at table row
 * first; rows left alone send nothing. */
static int send_deltas(psw *p, uint32_t first, uint32_t n, const float *view, const float *snap) {
  int rc = 0;
  for (uint32_t i = 0; i < n && !rc; i++) {
    const float *a = view + (size_t)i * p->L, *b = snap + (size_t)i * p->L;
    int changed = 0;
    for (uint32_t j = 0; j < p->L; j++) {
      p->delta[j] = a[j] - b[j];
      changed |= a[j] != b[j];
    }
    if (changed) rc = strata_table_inc(p->tb, first + i, p->delta);
  }
  return rc;
}

static int run_chunk(psw *p, strata_task_view *tv, double *partials, double *compute_s) {
  strata__worker *w = p->w;
  int r = tv->ids.rotating;
  uint32_t lo = tv->row_lo, hi = tv->row_hi;
  if (hi == lo) return 0;
  size_t n = (size_t)(hi - lo) * p->L;
  float *view = (float *)tv->rotating->buf + (size_t)lo * p->L;
  int rc = strata_table_get_rows(p->tb, p->off[r] + lo, p->off[r] + hi, -1, view);
  if (rc) return rc;
  memcpy(p->snap, view, n * sizeof(float));
  strata_block *g = w->global;
  uint32_t gfirst = p->off[w->sched.n_rotating];
  if (g) {
    if ((rc = strata_table_get_rows(p->tb, gfirst, gfirst + g->nrows, -1, g->buf))) return rc;
    memcpy(p->gsnap, g->buf, g->len);
  }
  double t0 = strata_now();
  rc = w->app->compute(w->state, tv, partials);
  *compute_s += strata_now() - t0;
  if (rc) return rc;
  rc = send_deltas(p, p->off[r] + lo, hi - lo, view, p->snap);
  if (!rc && g) rc = send_deltas(p, gfirst, g->nrows, g->buf, p->gsnap);
  if (!rc) rc = strata_table_serve(p->tb);
  p->dirty = 1;
  return rc;
}

/* The table rows scoring reads: rotating blocks of this worker's eval tasks,
 * rotating blocks r with r mod P == this worker (block objectives), the
 * global rows; every row (all) for the exported model. */
static int plan_scoring(psw *p) {
  strata__worker *w = p->w;
  int P = w->sched.n_workers, nrot = w->sched.n_rotating;
  int do_eval = w->has_eval && w->app->evaluate;
  p->n_rows = p->off[nrot] + (w->global ? w->global->nrows : 0);
  p->need = strata_malloc(((size_t)p->n_rows + 1) * sizeof *p->need);
  p->res_off = strata_malloc(((size_t)w->sched.n_resident + 1) * sizeof *p->res_off);
  if (!p->need || !p->res_off) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
  for (int i = 0; i < w->sched.n_resident; i++) p->res_off[i] = SIZE_MAX;
  for (int r = 0; r < nrot; r++) {
    int need = w->app->block_objective && r % P == w->me;
    for (int e = 0; e < w->sched.n_subepochs && do_eval; e++) {
      int n;
      const strata_task *tk = strata_schedule_tasks(&w->sched, e, w->me, &n);
      for (int i = 0; i < n; i++) {
        if (!w->eval[tk[i].data].len) continue;
        need |= tk[i].rotating == r;
        if (p->res_off[tk[i].resident] == SIZE_MAX) {
          /* Blocks are 64-byte aligned, and apps' kernels rely on it. */
          p->res_off[tk[i].resident] = p->res_len;
          p->res_len += (w->res[tk[i].resident].len + 63) & ~(size_t)63;
        }
      }
    }
    for (uint32_t g = p->off[r]; need && g < p->off[r] + w->rot[r].nrows; g++) p->need[p->n_need++] = g;
  }
  if (w->global && (do_eval || (w->app->block_objective && w->me == 0)))
    for (uint32_t g = p->off[nrot]; g < p->n_rows; g++) p->need[p->n_need++] = g;
  p->scores = do_eval || w->app->block_objective;
  return 0;
}

/* Bytes of the rows part of a snapshot buffer, rounded up so that the
 * resident copies after it start 64-byte aligned. */
static size_t rows_bytes(const psw *p) {
  return ((size_t)p->n_rows * p->L * sizeof(float) + 63) & ~(size_t)63;
}

/* A snapshot buffer (64-byte aligned, as blocks are): n_rows rows, then
 * the resident copies. */
static float *take_buffer(psw *p) {
  if (p->n_pool) return p->pool[--p->n_pool];
  return strata_alloc_aligned(rows_bytes(p) + p->res_len + 64);
}

static void give_buffer(psw *p, float *b) {
  if (!b) return;
  if (p->n_pool == p->cap_pool) {
    int cap = p->cap_pool ? 2 * p->cap_pool : 4;
    float **v = strata_realloc(p->pool, (size_t)cap * sizeof *v);
    if (!v) {
      strata_free(b);
      return;
    }
    p->pool = v;
    p->cap_pool = cap;
  }
  p->pool[p->n_pool++] = b;
}

/* Asks for the snapshot that scores this pass: the table as it will be
 * once every worker has ended the clock this worker is about to end. The
 * last pass with --model-out asks for every row: the exported model. */
static int request_snapshot(psw *p, int last) {
  strata__worker *w = p->w;
  if (!p->scores && !(last && w->opts->model_out)) return 0;
  p->snap_rows = take_buffer(p);
  if (!p->snap_rows) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory for a snapshot", w->me);
  p->snap_id = strata_table_current_clock(p->tb) + 1;
  if (last && w->opts->model_out) {
    for (uint32_t g = 0; g < p->n_rows; g++) p->need[g] = g;
    p->n_need = p->n_rows;
  }
  return strata_table_snapshot_request(p->tb, p->need, p->n_need, p->snap_rows);
}

/* Scores a pass from its snapshot: the rotating and global blocks point
 * into the snapshot, the resident blocks evaluate reads into their copies
 * (unless scored at once), for the duration of the callbacks. */
static int score(psw *p, pending *e) {
  strata__worker *w = p->w;
  int rc = 0, P = w->sched.n_workers, nrot = w->sched.n_rotating, nres = w->sched.n_resident;
  int pass = e->rep.pass - 1;
  double t0 = strata_now();
  void **keep = strata_malloc(((size_t)nrot + (size_t)nres + 1) * sizeof *keep);
  if (!keep) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
  for (int r = 0; r < nrot; r++) {
    keep[r] = w->rot[r].buf;
    w->rot[r].buf = e->rows + (size_t)p->off[r] * p->L;
  }
  for (int i = 0; i < nres; i++) {
    keep[nrot + i] = w->res[i].buf;
    if (!e->res_live && p->res_off[i] != SIZE_MAX) w->res[i].buf = (char *)e->res + p->res_off[i];
  }
  void *gkeep = w->global ? w->global->buf : NULL;
  if (w->global) w->global->buf = e->rows + (size_t)p->off[nrot] * p->L;
  for (int r = w->me; r < nrot && !rc && w->app->block_objective; r += P)
    rc = w->app->block_objective(w->state, pass, STRATA_BLOCK_ROTATING, r, &w->rot[r], e->rep.partials);
  if (!rc && w->me == 0 && w->global && w->app->block_objective)
    rc = w->app->block_objective(w->state, pass, STRATA_BLOCK_GLOBAL, 0, w->global, e->rep.partials);
  if (!rc && w->has_eval && w->app->evaluate) rc = strata__worker_score(w, pass, e->rep.partials);
  for (int r = 0; r < nrot; r++) w->rot[r].buf = keep[r];
  for (int i = 0; i < nres; i++) w->res[i].buf = keep[nrot + i];
  if (w->global) w->global->buf = gkeep;
  strata_free(keep);
  e->rep.stats.eval_s += strata_now() - t0;
  return rc;
}

/* The final model: every block from the last pass's snapshot. */
static void adopt_snapshot(psw *p, const float *rows) {
  strata__worker *w = p->w;
  int nrot = w->sched.n_rotating;
  for (int r = 0; r < nrot; r++)
    if (w->rot[r].len) memcpy(w->rot[r].buf, rows + (size_t)p->off[r] * p->L, w->rot[r].len);
  if (w->global) memcpy(w->global->buf, rows + (size_t)p->off[nrot] * p->L, w->global->len);
}

/* A pass whose snapshot is in (or that has none): scores it, keeps the
 * last pass's snapshot as the final model, reports it. The time counts as
 * scoring done outside the pass under way. */
static int complete(psw *p, pending *e) {
  strata__worker *w = p->w;
  double t0 = strata_now();
  int rc = e->snap ? score(p, e) : 0;
  if (!rc && e->rows && e->rep.pass == w->setup.passes && w->opts->model_out)
    adopt_snapshot(p, e->rows);
  p->scored_s += strata_now() - t0;
  if (!rc) rc = w->report(w->report_ud, &e->rep);
  give_buffer(p, e->rows);
  return rc;
}

/* Scores and reports the waiting passes whose snapshots are in, oldest
 * first; with wait, all of them. */
static int drain(psw *p, int wait) {
  int rc = 0;
  while (p->n_q && !rc) {
    pending *e = &p->q[0];
    int done = 1;
    if (e->snap && (rc = strata_table_snapshot_test(p->tb, e->snap, wait, &done))) break;
    if (!done) break;
    rc = complete(p, e);
    memmove(p->q, p->q + 1, (size_t)--p->n_q * sizeof *p->q);
  }
  return rc;
}

/* Queues this pass's report behind the snapshot asked for in it (if any),
 * copying the resident blocks scoring reads unless it can be scored now. */
static int queue_pass(psw *p, const pass_report *rep, int last) {
  strata__worker *w = p->w;
  if (p->n_q == p->cap_q) {
    int cap = p->cap_q ? 2 * p->cap_q : 4;
    pending *v = strata_realloc(p->q, (size_t)cap * sizeof *v);
    if (!v) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
    p->q = v;
    p->cap_q = cap;
  }
  pending *e = &p->q[p->n_q++];
  memset(e, 0, sizeof *e);
  e->rep = *rep;
  e->snap = p->snap_id;
  e->rows = p->snap_rows;
  e->rep.unscored = !p->snap_id && p->scores;
  p->snap_id = 0;
  p->snap_rows = NULL;
  if (e->snap) {
    int done = 0, rc = 0;
    if (p->n_q == 1 && (rc = strata_table_snapshot_test(p->tb, e->snap, last, &done))) return rc;
    if (done) {
      e->res_live = 1;
      rc = complete(p, e);
      p->n_q--;
      return rc;
    }
    e->res = (float *)((char *)e->rows + rows_bytes(p));
    for (int i = 0; i < w->sched.n_resident; i++)
      if (p->res_off[i] != SIZE_MAX && w->res[i].len)
        memcpy((char *)e->res + p->res_off[i], w->res[i].buf, w->res[i].len);
  }
  return drain(p, last);
}

static void take_table_stats(psw *p, strata_worker_stats *st) {
  strata_table_stats ts;
  strata_table_get_stats(p->tb, &ts);
  st->wait_s += ts.wait_s;
  st->bytes_sent += ts.bytes_sent;
  st->bytes_recv += ts.bytes_recv;
  st->eval_bytes += ts.snapshot_bytes;
  st->reads = ts.reads;
  st->diff_sum = ts.diff_sum;
  st->diff_min = ts.diff_min;
  memcpy(st->hist, ts.hist, sizeof st->hist);
  st->clocks = p->clocks;
  st->delay_s = p->delay_s;
}

static int open_table(psw *p) {
  strata__worker *w = p->w;
  const strata_engine_opts *o = w->opts;
  int nrot = w->sched.n_rotating;
  uint32_t rows = 0, rb = 0;
  for (int r = 0; r < nrot; r++) {
    p->off[r] = rows;
    rows += w->rot[r].nrows;
    if (w->rot[r].nrows) rb = w->rot[r].row_bytes;
  }
  p->off[nrot] = rows;
  if (w->global) rows += w->global->nrows; /* same row size: checked by the coordinator */
  p->L = rb / sizeof(float);
  float *init = strata_malloc((size_t)rows * p->L * sizeof(float) + 1);
  if (!init) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory for the table", w->me);
  for (int r = 0; r < nrot; r++)
    if (w->rot[r].len) memcpy(init + (size_t)p->off[r] * p->L, w->rot[r].buf, w->rot[r].len);
  if (w->global) memcpy(init + (size_t)p->off[nrot] * p->L, w->global->buf, w->global->len);
  strata_consistency cons = !strcmp(w->setup.mode, "essp")    ? STRATA_CONS_ESSP
                            : !strcmp(w->setup.mode, "async") ? STRATA_CONS_ASYNC
                                                              : STRATA_CONS_SSP;
  strata_table_conf conf = {.n_rows = rows,
                            .row_len = p->L,
                            .workers = w->sched.n_workers,
                            .me = w->me,
                            .rank_base = 1,
                            .tag = TAG_PS,
                            .cons = cons,
                            .staleness = cons == STRATA_CONS_ASYNC ? 0 : o->staleness,
                            .prefetch = o->prefetch,
                            .prefetch_period = strata__clocks_per_pass(o->wpc),
                            .snapshots = (w->has_eval && w->app->evaluate) ||
                                         w->app->block_objective || o->model_out};
  int rc = strata_table_open(w->t, &conf, init, &p->tb);
  strata_free(init);
  return rc;
}

/* --score-view: the pass's partials with the scores taken on this worker's
 * cache as it stands (what its reads see) instead of the snapshot. */
static int score_view(psw *p, pass_report *rep) {
  pending v;
  memset(&v, 0, sizeof v);
  v.rep = *rep;
  v.res_live = 1;
  v.rows = take_buffer(p);
  if (!v.rows) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", p->w->me);
  int rc = 0;
  for (uint32_t i = 0, j; i < p->n_need && !rc; i = j) {
    for (j = i + 1; j < p->n_need && p->need[j] == p->need[j - 1] + 1; j++) {
    }
    rc = strata_table_peek_rows(p->tb, p->need[i], p->need[j - 1] + 1,
                                v.rows + (size_t)p->need[i] * p->L);
  }
  if (!rc) rc = score(p, &v);
  memcpy(rep->view_partials, v.rep.partials, sizeof rep->view_partials);
  rep->has_view = 1;
  rep->stats.eval_s = v.rep.stats.eval_s;
  give_buffer(p, v.rows);
  return rc;
}

/* While a verdict is on its way: the shard keeps serving, for a peer may
 * need it to finish the pass the verdict follows, and the passes whose
 * snapshots land are scored and reported, for the verdict may wait on
 * this worker's report. */
static int serve_a_while(void *ctx) {
  psw *p = ctx;
  int rc = strata_table_serve_for(p->tb, 200e-6, 0);
  return rc ? rc : drain(p, 0);
}

/* Ends the clock that closes a pass, asking first for the snapshot that
 * scores it. */
static int end_pass_clock(psw *p, int last) {
  int rc = request_snapshot(p, last);
  return rc ? rc : end_clock(p);
}

/* block_objective of this worker's own resident blocks, exact at its pass
 * end (they change nowhere else). */
static int resident_objectives(psw *p, int pass, double *partials) {
  strata__worker *w = p->w;
  int rc = 0;
  for (int i = 0; i < w->sched.n_resident && !rc; i++)
    if (strata_schedule_resident_owner(&w->sched, i) == w->me)
      rc = w->app->block_objective(w->state, pass, STRATA_BLOCK_RESIDENT, i, &w->res[i], partials);
  return rc;
}

int strata__worker_loop_ps(strata__worker *w) {
  psw p;
  memset(&p, 0, sizeof p);
  p.w = w;
  int nrot = w->sched.n_rotating, depth = w->setup.depth, S = w->sched.n_subepochs;
  int rc = 0;
  p.off = strata_calloc((size_t)nrot + 1, sizeof *p.off);
  if (!p.off) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
  if ((rc = open_table(&p))) goto done;
  if ((rc = plan_scoring(&p))) goto done;
  uint32_t maxrows = 0;
  for (int r = 0; r < nrot; r++)
    if (w->rot[r].nrows > maxrows) maxrows = w->rot[r].nrows;
  p.snap = strata_malloc(((size_t)maxrows * p.L + 1) * sizeof(float));
  p.delta = strata_malloc(((size_t)p.L + 1) * sizeof(float));
  p.gsnap = strata_malloc(w->global ? w->global->len : 1);
  if (!p.snap || !p.delta || !p.gsnap) {
    rc = strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
    goto done;
  }
  p.per_pass = strata__clocks_per_pass(w->opts->wpc);
  p.straggle = w->me == 0; /* clock 0 */
  p.span = p.per_pass ? 0 : (int)w->opts->wpc;
  long chunks = 0; /* per pass */
  for (int s = 0; s < S; s++) {
    int n;
    strata_schedule_tasks(&w->sched, s, w->me, &n);
    chunks += (long)n * depth;
  }
  int passes = w->setup.passes;
  w->waiting = serve_a_while;
  w->waiting_ctx = &p;
  double ctl[STRATA_MAX_CONTROLS];
  for (int pass = 0; pass < passes && !rc; pass++) {
    pass_report rep;
    strata__report_begin(&rep, pass, w->me);
    strata_worker_stats *st = &rep.stats;
    strata_table_reset_stats(p.tb);
    p.clocks = 0;
    double t_pass = strata_now(), cpu0 = strata_cpu_seconds();
    long done = 0;
    int last = pass == passes - 1, stop = 0;
    if ((rc = strata__pass_verdict(w, pass, &stop, ctl))) break;
    if (stop) {
      /* Every worker stops here, so every clock it waits for has ended;
       * the passes before still report (their snapshots come). */
      w->stopped = 1;
      rc = drain(&p, 1);
      break;
    }
    double verdict_s = strata_now() - t_pass;
    for (int s = 0; s < S && !rc; s++) {
      int n;
      const strata_task *tk = strata_schedule_tasks(&w->sched, s, w->me, &n);
      for (int i = 0; i < n && !rc; i++) {
        strata_task_view tv = {.pass = pass,
                               .subepoch = s,
                               .ids = tk[i],
                               .data = &w->data[tk[i].data],
                               .resident = &w->res[tk[i].resident],
                               .rotating = &w->rot[tk[i].rotating],
                               .global = w->global,
                               .control = w->app->n_controls ? ctl : NULL};
        for (int c = 0; c < depth && !rc; c++) {
          tv.chunk = c;
          strata_chunk_rows(tv.rotating->nrows, depth, c, &tv.row_lo, &tv.row_hi);
          rc = run_chunk(&p, &tv, rep.partials, &st->compute_s);
          done++;
          /* K clocks per pass, at the chunks where done * K / chunks steps. */
          if (!rc && p.per_pass && (done * p.per_pass) / chunks > ((done - 1) * p.per_pass) / chunks) {
            rc = done == chunks ? end_pass_clock(&p, last) : end_clock(&p);
            /* Earlier passes' snapshots may have come meanwhile. */
            if (!rc && p.n_q) rc = drain(&p, 0);
          }
        }
      }
    }
    if (!rc && p.span && (pass + 1) % p.span == 0) rc = end_pass_clock(&p, last);
    /* The last clock may be partial: its work must reach everyone. */
    if (!rc && last && p.dirty) rc = end_pass_clock(&p, last);
    if (rc) break;
    st->time_s = strata_now() - t_pass - p.scored_s;
    take_table_stats(&p, st);
    st->wait_s += verdict_s;
    p.delay_s = 0;
    double t0 = strata_now();
    if (w->app->block_objective) rc = resident_objectives(&p, pass, rep.partials);
    if (!rc && w->opts->score_view) rc = score_view(&p, &rep);
    st->eval_s += strata_now() - t0;
    st->cpu_s = strata_cpu_seconds() - cpu0;
    st->span_s = strata_now() - t_pass;
    if (!rc) rc = queue_pass(&p, &rep, last);
    p.scored_s = 0;
  }
  if (!rc) {
    rc = strata_table_close(p.tb);
    p.tb = NULL;
  }
done:
  if (p.tb) strata_table_free(p.tb);
  strata_free(p.off);
  strata_free(p.snap);
  strata_free(p.gsnap);
  strata_free(p.delta);
  strata_free(p.need);
  strata_free(p.res_off);
  for (int i = 0; i < p.n_q; i++) strata_free(p.q[i].rows);
  strata_free(p.q);
  for (int i = 0; i < p.n_pool; i++) strata_free(p.pool[i]);
  strata_free(p.pool);
  strata_free(p.snap_rows);
  return rc;
}
