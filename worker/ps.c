/*
 * The parameter-server back-end of the worker loop. The app sees the same
 * task views as on the ring: for each chunk of a task, the rows of its
 * rotating block are read from the table into the block's buffer under the
 * mode's staleness rule, compute updates them in place, and the change of
 * every row it touched goes back to the table as a delta. The worker owns
 * the data and resident blocks of its tasks (data-parallel by the resident
 * side, e.g. users for MF); clocks end after every 1/K of a pass (--wpc).
 */
#include <limits.h>
#include <string.h>

#include "scheduler/protocol.h"
#include "strata/core.h"
#include "strata/table.h"

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

/* Fills the rotating blocks of this worker's eval tasks (or, for the final
 * model, every block) from the table with staleness s. */
static int fill_blocks(psw *p, int all, int s) {
  strata__worker *w = p->w;
  int rc = 0;
  for (int r = 0; r < w->sched.n_rotating && !rc; r++) {
    int need = all;
    for (int e = 0; e < w->sched.n_subepochs && !need; e++) {
      int n;
      const strata_task *tk = strata_schedule_tasks(&w->sched, e, w->me, &n);
      for (int i = 0; i < n; i++) need |= tk[i].rotating == r && w->eval[tk[i].data].len;
    }
    if (need && w->rot[r].nrows)
      rc = strata_table_get_rows(p->tb, p->off[r], p->off[r] + w->rot[r].nrows, s, w->rot[r].buf);
  }
  if (!rc && w->global) {
    uint32_t first = p->off[w->sched.n_rotating];
    rc = strata_table_get_rows(p->tb, first, first + w->global->nrows, s, w->global->buf);
  }
  return rc;
}

/* block_objective in parameter-server modes: own resident blocks, rotating
 * blocks r with r mod P == this worker and, on worker 0, the global block,
 * read under staleness s. */
static int ps_block_objectives(psw *p, int pass, int s, double *partials) {
  strata__worker *w = p->w;
  int rc = 0, P = w->sched.n_workers;
  for (int i = 0; i < w->sched.n_resident && !rc; i++)
    if (strata_schedule_resident_owner(&w->sched, i) == w->me)
      rc = w->app->block_objective(w->state, pass, STRATA_BLOCK_RESIDENT, i, &w->res[i], partials);
  for (int r = w->me; r < w->sched.n_rotating && !rc; r += P) {
    strata_block *b = &w->rot[r];
    if (b->nrows) rc = strata_table_get_rows(p->tb, p->off[r], p->off[r] + b->nrows, s, b->buf);
    if (!rc) rc = w->app->block_objective(w->state, pass, STRATA_BLOCK_ROTATING, r, b, partials);
  }
  if (!rc && w->me == 0 && w->global) {
    uint32_t first = p->off[w->sched.n_rotating];
    rc = strata_table_get_rows(p->tb, first, first + w->global->nrows, s, w->global->buf);
    if (!rc) rc = w->app->block_objective(w->state, pass, STRATA_BLOCK_GLOBAL, 0, w->global, partials);
  }
  return rc;
}

static void take_table_stats(psw *p, strata_worker_stats *st) {
  strata_table_stats ts;
  strata_table_get_stats(p->tb, &ts);
  st->wait_s += ts.wait_s;
  st->bytes_sent += ts.bytes_sent;
  st->bytes_recv += ts.bytes_recv;
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
                            .prefetch_period = strata__clocks_per_pass(o->wpc)};
  int rc = strata_table_open(w->t, &conf, init, &p->tb);
  strata_free(init);
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
  int do_eval = w->has_eval && w->app->evaluate;
  for (int pass = 0; pass < passes && !rc; pass++) {
    pass_report rep;
    strata__report_begin(&rep, pass, w->me);
    strata_worker_stats *st = &rep.stats;
    strata_table_reset_stats(p.tb);
    p.clocks = 0;
    double t_pass = strata_now(), cpu0 = strata_cpu_seconds();
    long done = 0;
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
                               .global = w->global};
        for (int c = 0; c < depth && !rc; c++) {
          tv.chunk = c;
          strata_chunk_rows(tv.rotating->nrows, depth, c, &tv.row_lo, &tv.row_hi);
          rc = run_chunk(&p, &tv, rep.partials, &st->compute_s);
          done++;
          /* K clocks per pass, at the chunks where done * K / chunks steps. */
          if (!rc && p.per_pass && (done * p.per_pass) / chunks > ((done - 1) * p.per_pass) / chunks)
            rc = end_clock(&p);
        }
      }
    }
    if (!rc && p.span && (pass + 1) % p.span == 0) rc = end_clock(&p);
    /* The last clock may be partial: its work must reach everyone. */
    if (!rc && pass == passes - 1 && p.dirty) rc = end_clock(&p);
    if (rc) break;
    st->time_s = strata_now() - t_pass;
    take_table_stats(&p, st);
    p.delay_s = 0;
    int last = pass == passes - 1;
    double t0 = strata_now();
    /* After the last pass every worker reads the complete model (staleness
     * 0 once all have ended their last clock): what is scored and exported
     * is the model every update went into. */
    if (last && w->opts->model_out) rc = fill_blocks(&p, 1, 0);
    if (!rc && w->app->block_objective) rc = ps_block_objectives(&p, pass, last ? 0 : -1, rep.partials);
    if (!rc && do_eval) {
      rc = fill_blocks(&p, 0, last ? 0 : INT_MAX / 2); /* no wait: the cache as it is */
      if (!rc) rc = strata__worker_score(w, pass, rep.partials);
    }
    st->eval_s += strata_now() - t0;
    st->cpu_s = strata_cpu_seconds() - cpu0;
    st->span_s = strata_now() - t_pass;
    if (!rc) rc = w->report(w->report_ud, &rep);
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
  return rc;
}
