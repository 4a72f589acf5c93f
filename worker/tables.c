/*
 * The table back-end (the parameter-server modes: bsp, absp, ssp, essp,
 * async, ...; each mode's consistency rule is comm/rules/). The app sees the same
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
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "comm/rule.h"
#include "core/prom.h"
#include "strata/core.h"
#include "strata/table.h"
#include "worker/backend.h"

/* The back-end's own figures (strata_worker_stats.mode_stats[0]): its
 * reads and their clock differentials (data age - reader clock). */
typedef struct table_stats {
  uint64_t reads;
  int64_t diff_sum;
  int32_t diff_min, pad;
  uint64_t hist[STRATA_TABLE_HIST]; /* hist[i] counts differential -i; the last everything older */
} table_stats;
_Static_assert(sizeof(table_stats) <= STRATA_MODE_STATS, "table_stats does not fit");
_Static_assert(STRATA_TABLE_RULE_STATS <= STRATA_MODE_STATS, "a rule's figures do not fit");

/* A pass whose report waits for its snapshot. */
typedef struct pending {
  pass_report rep;
  int ckpt;      /* a checkpoint follows the pass: its part is written from the snapshot */
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
  int dirty;       /* a chunk computed since the last clock (an empty one too) */
  int straggle;    /* this clock is ours to straggle in: sleep at the end of its work */
  double delay_s;
  /* scoring */
  int scores;          /* anything to score from the table (evaluate or block objectives) */
  uint32_t *need;      /* table rows a score reads, ascending */
  uint32_t n_need, n_rows;
  size_t *res_off;     /* per resident block: offset into pending.res, or SIZE_MAX */
  unsigned char *res_scored; /* per resident block: scoring reads it (else only a
                              checkpoint does) */
  size_t res_len;      /* bytes of the resident copies */
  /* checkpoints: the rows a checkpoint's snapshot asks for (the scoring
   * rows and this worker's shard), ascending */
  int ckpt;
  uint32_t *need_ck;
  uint32_t n_need_ck;
  pending *q;          /* waiting passes, oldest first: q[0..n_q) */
  int n_q;
  size_t cap_q;
  float **pool;        /* spare snapshot buffers (rows, then res) */
  int n_pool;
  size_t cap_pool;
  int32_t snap_id;     /* snapshot asked for in this pass, 0 none */
  int snap_ckpt;       /* ... and a checkpoint follows the pass */
  float *snap_rows;
  double scored_s;     /* time spent scoring earlier passes during this one */
  pending *ckpt_e;     /* the pass whose checkpoint part is being written */
  long chunks;         /* chunks per pass */
  long done;           /* chunks done in this pass */
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

/* An empty chunk reads no rows of its block but still the global rows:
 * compute runs on it and may add to them. */
static int tables_acquire(void *be, strata_task_view *tv, strata_worker_stats *st) {
  psw *p = be;
  strata__worker *w = p->w;
  (void)st;
  int r = tv->ids.rotating, rc = 0;
  uint32_t lo = tv->row_lo, hi = tv->row_hi;
  tv->clock = strata_table_current_clock(p->tb);
  if (hi > lo) {
    float *view = (float *)tv->rotating->buf + (size_t)lo * p->L;
    if ((rc = strata_table_get_rows(p->tb, p->off[r] + lo, p->off[r] + hi, -1, view))) return rc;
    memcpy(p->snap, view, (size_t)(hi - lo) * p->L * sizeof(float));
  }
  strata_block *g = w->global;
  uint32_t gfirst = p->off[w->sched.n_rotating];
  if (g) {
    if ((rc = strata_table_get_rows(p->tb, gfirst, gfirst + g->nrows, -1, g->buf))) return rc;
    memcpy(p->gsnap, g->buf, g->len);
  }
  return 0;
}

static int end_pass_clock(psw *p, int pass, int last);
static int drain(psw *p, int wait);

/* The chunk's changes go back as deltas; K clocks per pass end at the
 * chunks where done * K / chunks steps, empty chunks counted. */
static int tables_release(void *be, const strata_task_view *tv, strata_worker_stats *st) {
  psw *p = be;
  strata__worker *w = p->w;
  (void)st;
  int r = tv->ids.rotating, rc = 0;
  uint32_t lo = tv->row_lo, hi = tv->row_hi;
  strata_block *g = w->global;
  if (hi > lo)
    rc = send_deltas(p, p->off[r] + lo, hi - lo, (float *)tv->rotating->buf + (size_t)lo * p->L,
                     p->snap);
  if (!rc && g) rc = send_deltas(p, p->off[w->sched.n_rotating], g->nrows, g->buf, p->gsnap);
  if (!rc && (hi > lo || g)) rc = strata_table_serve(p->tb);
  p->dirty = 1;
  long done = ++p->done;
  if (!rc && p->per_pass && (done * p->per_pass) / p->chunks > ((done - 1) * p->per_pass) / p->chunks) {
    rc = done == p->chunks ? end_pass_clock(p, tv->pass, tv->pass == w->last_pass)
                           : end_clock(p);
    /* Earlier passes' snapshots may have come meanwhile. */
    if (!rc && p->n_q) rc = drain(p, 0);
  }
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
  p->res_scored = strata_malloc((size_t)w->sched.n_resident + 1);
  if (!p->need || !p->res_off || !p->res_scored)
    return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
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
  for (int i = 0; i < w->sched.n_resident; i++) p->res_scored[i] = p->res_off[i] != SIZE_MAX;
  if (!p->ckpt) return 0;
  /* A checkpoint keeps every resident block this worker owns as it was at
   * the pass's end, and its shard's rows of the snapshot. */
  for (int i = 0; i < w->sched.n_resident; i++)
    if (p->res_off[i] == SIZE_MAX && strata_schedule_resident_owner(&w->sched, i) == w->me) {
      p->res_off[i] = p->res_len;
      p->res_len += (w->res[i].len + 63) & ~(size_t)63;
    }
  p->need_ck = strata_malloc(((size_t)p->n_rows + 1) * sizeof *p->need_ck);
  if (!p->need_ck) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
  uint32_t i = 0;
  for (uint32_t g = 0; g < p->n_rows; g++) {
    while (i < p->n_need && p->need[i] < g) i++;
    if (g % (uint32_t)P == (uint32_t)w->me || (i < p->n_need && p->need[i] == g))
      p->need_ck[p->n_need_ck++] = g;
  }
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
  float **v = strata_grow(p->pool, (size_t)p->n_pool + 1, &p->cap_pool, SIZE_MAX, sizeof *v);
  if (!v) {
    strata_free(b);
    return;
  }
  p->pool = v;
  p->pool[p->n_pool++] = b;
}

/* Asks for the snapshot that scores pass `pass`: the table as it will be
 * once every worker has ended the clock this worker is about to end. The
 * last pass with --model-out asks for every row: the exported model; a pass
 * a checkpoint follows, also this worker's shard (the part it writes). */
static int request_snapshot(psw *p, int pass, int last) {
  strata__worker *w = p->w;
  int ckpt = strata__ckpt_due(w, pass);
  if (!p->scores && !(last && w->opts->model_out) && !ckpt) return 0;
  p->snap_rows = take_buffer(p);
  if (!p->snap_rows) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory for a snapshot", w->me);
  p->snap_id = strata_table_current_clock(p->tb) + 1;
  p->snap_ckpt = ckpt;
  if (last && w->opts->model_out) {
    for (uint32_t g = 0; g < p->n_rows; g++) p->need[g] = g;
    p->n_need = p->n_rows;
  }
  if (ckpt && p->n_need < p->n_rows)
    return strata_table_snapshot_request(p->tb, p->need_ck, p->n_need_ck, p->snap_rows);
  return strata_table_snapshot_request(p->tb, p->need, p->n_need, p->snap_rows);
}

/* Scores a pass from its snapshot: the rotating and global blocks point
 * into the snapshot, the resident blocks evaluate reads into their copies
 * (unless scored at once), for the duration of the callbacks. */
static int score(psw *p, pending *e) {
  strata__worker *w = p->w;
  int rc = 0, P = w->sched.n_workers, nrot = w->sched.n_rotating, nres = w->sched.n_resident;
  int pass = e->rep.pass;
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

/* The checkpoint's entries: the resident blocks this worker owns as they
 * were at the pass's end, and its shard's rows of the pass's snapshot
 * (table rows me, me + P, ...): every worker's updates of the clocks
 * before the snapshot's, none later. */
static int tables_ckpt_add(void *ctx, strata__part_writer *pw) {
  psw *p = ctx;
  pending *e = p->ckpt_e;
  strata__worker *w = p->w;
  int P = w->sched.n_workers, nres = w->sched.n_resident;
  void **bufs = strata_calloc((size_t)nres + 1, sizeof *bufs);
  if (!bufs) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
  for (int i = 0; i < nres && !e->res_live; i++)
    if (p->res_off[i] != SIZE_MAX) bufs[i] = (char *)e->res + p->res_off[i];
  int rc = strata__ckpt_add_residents(w, pw, bufs);
  strata_free(bufs);
  uint32_t n = p->n_rows > (uint32_t)w->me ? (p->n_rows - (uint32_t)w->me + (uint32_t)P - 1) / (uint32_t)P : 0;
  size_t row = (size_t)p->L * sizeof(float);
  if (!rc) rc = strata__part_open_entry(pw, STRATA__CK_TABLE_ROWS, w->me, p->L, (uint64_t)n * row);
  for (uint32_t g = (uint32_t)w->me; g < p->n_rows && !rc; g += (uint32_t)P)
    rc = strata__part_write(pw, e->rows + (size_t)g * p->L, row);
  return rc;
}

/* A pass whose snapshot is in (or that has none): scores it, keeps the
 * last pass's snapshot as the final model, reports it. The time counts as
 * scoring done outside the pass under way. */
static int complete(psw *p, pending *e) {
  strata__worker *w = p->w;
  double t0 = strata_now();
  int rc = e->snap ? score(p, e) : 0;
  if (!rc && e->ckpt) {
    p->ckpt_e = e;
    rc = strata__worker_ckpt(w, e->rep.pass, tables_ckpt_add, p);
  }
  if (!rc && e->rows && e->rep.pass == w->last_pass && w->opts->model_out)
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
  pending *v = strata_grow(p->q, (size_t)p->n_q + 1, &p->cap_q, SIZE_MAX, sizeof *v);
  if (!v) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
  p->q = v;
  pending *e = &p->q[p->n_q++];
  memset(e, 0, sizeof *e);
  e->rep = *rep;
  e->snap = p->snap_id;
  e->rows = p->snap_rows;
  e->ckpt = p->snap_ckpt;
  e->rep.unscored = !p->snap_id && p->scores;
  p->snap_id = 0;
  p->snap_rows = NULL;
  p->snap_ckpt = 0;
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
      if (p->res_off[i] != SIZE_MAX && w->res[i].len && (p->res_scored[i] || e->ckpt))
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
  table_stats t = {.reads = ts.reads, .diff_sum = ts.diff_sum, .diff_min = ts.diff_min};
  memcpy(t.hist, ts.hist, sizeof t.hist);
  STRATA__MODE_STATS_PUT(st->mode_stats[0], t);
  memcpy(st->mode_stats[1], ts.rule, sizeof ts.rule);
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
  strata_table_conf conf = {
      .n_rows = rows,
      .row_len = p->L,
      .value_len = w->value_len,
      .workers = w->sched.n_workers,
      .me = w->me,
      .rank_base = 1,
      .tag = TAG_PS,
      .mode = w->setup.mode,
      .settings = &o->mode_settings,
      .staleness = o->staleness,
      .prefetch = o->prefetch,
      .prefetch_period = strata__clocks_per_pass(o->wpc),
      .snapshots =
          (w->has_eval && w->app->evaluate) || w->app->block_objective || o->model_out || p->ckpt,
      .start_clock = p->per_pass ? w->start_pass * p->per_pass : w->start_pass / p->span};
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
static int tables_idle(void *be) {
  psw *p = be;
  int rc = strata_table_serve_for(p->tb, 200e-6, 0);
  return rc ? rc : drain(p, 0);
}

/* Ends the clock that closes pass `pass`, asking first for the snapshot
 * that scores it. */
static int end_pass_clock(psw *p, int pass, int last) {
  int rc = request_snapshot(p, pass, last);
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

static void tables_free(void *be) {
  psw *p = be;
  if (!p) return;
  if (p->tb) strata_table_free(p->tb);
  strata_free(p->off);
  strata_free(p->snap);
  strata_free(p->gsnap);
  strata_free(p->delta);
  strata_free(p->need);
  strata_free(p->res_off);
  strata_free(p->res_scored);
  strata_free(p->need_ck);
  for (int i = 0; i < p->n_q; i++) strata_free(p->q[i].rows);
  strata_free(p->q);
  for (int i = 0; i < p->n_pool; i++) strata_free(p->pool[i]);
  strata_free(p->pool);
  strata_free(p->snap_rows);
  strata_free(p);
}

static int tables_open(strata__worker *w, void **out) {
  psw *p = strata_calloc(1, sizeof *p);
  *out = p;
  if (!p) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
  p->w = w;
  int nrot = w->sched.n_rotating, rc;
  p->off = strata_calloc((size_t)nrot + 1, sizeof *p->off);
  if (!p->off) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
  p->ckpt = w->opts->checkpoint_dir != NULL;
  p->per_pass = strata__clocks_per_pass(w->opts->wpc);
  p->chunks = (long)strata__tasks_per_pass(w) * w->setup.depth;
  /* A sufficient-factor app syncs every minibatch (a task): FMS. */
  if (w->app->sf) p->per_pass = (int)p->chunks;
  p->span = p->per_pass ? 0 : (int)w->opts->wpc;
  if ((rc = open_table(p)) || (rc = plan_scoring(p))) return rc;
  uint32_t maxrows = 0;
  for (int r = 0; r < nrot; r++)
    if (w->rot[r].nrows > maxrows) maxrows = w->rot[r].nrows;
  p->snap = strata_malloc(((size_t)maxrows * p->L + 1) * sizeof(float));
  p->delta = strata_malloc(((size_t)p->L + 1) * sizeof(float));
  p->gsnap = strata_malloc(w->global ? w->global->len : 1);
  if (!p->snap || !p->delta || !p->gsnap)
    return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
  /* A straggler straggles in clocks c with c mod P == its index. */
  p->straggle = strata_table_current_clock(p->tb) % w->sched.n_workers == w->me;
  return 0;
}

static int tables_begin_pass(void *be, int pass, strata_worker_stats *st) {
  psw *p = be;
  (void)pass, (void)st;
  strata_table_reset_stats(p->tb);
  p->clocks = 0;
  p->done = 0;
  return 0;
}

static int tables_begin_subepoch(void *be, int pass, int s, strata_worker_stats *st) {
  (void)be, (void)pass, (void)s, (void)st;
  return 0;
}

static int tables_end_subepoch(void *be, int pass, int s, strata_worker_stats *st) {
  (void)be, (void)pass, (void)s, (void)st;
  return 0;
}

static int tables_end_pass(void *be, int pass, strata_worker_stats *st) {
  psw *p = be;
  (void)st;
  int rc = 0, last = pass == p->w->last_pass;
  if (p->span && (pass + 1) % p->span == 0) rc = end_pass_clock(p, pass, last);
  /* The last clock may be partial: its work must reach everyone. */
  if (!rc && last && p->dirty) rc = end_pass_clock(p, pass, last);
  return rc;
}

static void tables_stats(void *be, strata_worker_stats *st) {
  psw *p = be;
  st->time_s -= p->scored_s;
  take_table_stats(p, st);
  p->delay_s = 0;
}

static int tables_evaluate(void *be, int pass, pass_report *rep) {
  psw *p = be;
  strata__worker *w = p->w;
  strata_worker_stats *st = &rep->stats;
  double t0 = strata_now();
  int rc = 0;
  if (w->app->block_objective) rc = resident_objectives(p, pass, rep->partials);
  if (!rc && w->opts->score_view) rc = score_view(p, rep);
  st->eval_s += strata_now() - t0;
  strata__worker_stamp(w, st);
  if (!rc) rc = queue_pass(p, rep, pass == w->last_pass);
  p->scored_s = 0;
  return rc;
}

/* The part is written when the pass's snapshot lands (complete). */
static int tables_checkpoint(void *be, int pass) {
  (void)be, (void)pass;
  return 0;
}

static int tables_close(void *be, int stopped) {
  psw *p = be;
  /* After a stop every worker stops at the same pass, so every clock it
   * waits for has ended; the passes before still report (their snapshots
   * come). */
  int rc = stopped ? drain(p, 1) : 0;
  if (!rc) {
    rc = strata_table_close(p->tb);
    p->tb = NULL;
  }
  return rc;
}

/* ---- what the table modes answer (core/mode.h) ---- */

/* The settings every table mode shares: work per clock and prefetch (the
 * rule has fixed or checked its staleness). */
static int tables_resolve(strata_engine_opts *o, const strata__given *g) {
  if (g->wpc && !(o->wpc > 0 && isfinite(o->wpc)))
    return strata_err_set(STRATA_EUSAGE, "--wpc must be > 0, got %g", o->wpc);
  if (g->wpc && (o->wpc > 1e6 || o->wpc < 1e-6))
    return strata_err_set(STRATA_EUSAGE,
                          "--wpc %g is out of range: at most 1e6 passes per clock or clocks per pass",
                          o->wpc);
  /* Not given: the app's default (wpc > 0 on entry). */
  if (!g->wpc && !(o->wpc > 0)) o->wpc = 1;
  if (o->wpc >= 1 && o->wpc != floor(o->wpc))
    return strata_err_set(STRATA_EUSAGE, "--wpc above 1 must be a whole number of passes, got %g",
                          o->wpc);
  if (o->wpc < 1 && fabs(1.0 / o->wpc - (double)lround(1.0 / o->wpc)) > 1e-6)
    return strata_err_set(STRATA_EUSAGE,
                          "--wpc below 1 must divide a pass evenly (1/2, 1/3, ...), got %g", o->wpc);
  /* Aggressive everywhere, as LazyTables runs it: under SSP the
   * conservative prefetcher leaves each worker s clocks alone with its own
   * updates, and the model the workers' sums make swings (docs/cli.md,
   * "Prefetch", has the measurements). With s = 0 both ask for the same rows. */
  if (!g->prefetch) o->prefetch = STRATA_PREFETCH_AGGRESSIVE;
  if (o->checkpoint_dir && o->wpc > 1 && o->checkpoint_every % (int)o->wpc)
    return strata_err_set(STRATA_EUSAGE,
                          "--checkpoint-every %d ends inside a clock of --wpc %g passes: "
                          "make it a multiple of %g",
                          o->checkpoint_every, o->wpc, o->wpc);
  return 0;
}

/* Reads may be s clocks old; a clock is the --wpc's share of a pass, or a
 * sufficient-factor app's minibatch. */
static void tables_clock_rule(const strata_engine_opts *o, const strata_app *app, int *staleness,
                              double *wpc) {
  *staleness = o->staleness;
  *wpc = app->sf ? 0 : o->wpc;
}

/* The tables keep rotating rows in one float table and end K clocks per
 * pass at chunk boundaries: check both fit the problem. */
static int tables_check(const strata_engine_opts *o, const strata_app *app,
                        const strata_setup *setup, const strata_problem *p,
                        const strata_schedule *sched) {
  int depth = setup->depth;
  const char *mode = strata_mode_name(o->mode);
  if (!(app->flags & STRATA_APP_ADDITIVE))
    return strata_err_set(STRATA_EUSAGE,
                          "%s: --mode %s needs an app whose parameters merge by adding deltas; "
                          "this one runs in scheduled or serial mode",
                          app->name, mode);
  if (app->sf && o->wpc != 1)
    return strata_err_set(STRATA_EUSAGE,
                          "%s: a sufficient-factor app ends one clock per minibatch in every mode; "
                          "--wpc does not apply (change --minibatch instead)",
                          app->name);
  if (!p) return 0;
  uint32_t rb = 0;
  for (int i = 0; i < p->n_rotating; i++) {
    const strata_block *b = &p->rotating[i];
    if (!b->nrows) continue;
    if (!rb) rb = b->row_bytes;
    if (b->row_bytes != rb || rb % sizeof(float))
      return strata_err_set(STRATA_EINVAL,
                            "%s: --mode %s needs rotating rows of one size in whole floats "
                            "(block %d has %u bytes, others %u)",
                            app->name, mode, i, b->row_bytes, rb);
  }
  if (!rb) return strata_err_set(STRATA_EINVAL, "%s: no rotating rows to put in a table", app->name);
  if (p->global.len && p->global.row_bytes != rb)
    return strata_err_set(STRATA_EINVAL,
                          "%s: --mode %s keeps the global rows in the table: they need the rotating "
                          "rows' size (%u bytes, not %u)",
                          app->name, mode, rb, p->global.row_bytes);
  if (p->value_len > rb / sizeof(float))
    return strata_err_set(STRATA_EINVAL,
                          "%s: value_len %u is more than the %u floats of a table row (%s: "
                          "strata/problem.h)",
                          app->name, p->value_len, rb / (uint32_t)sizeof(float), mode);
  int K = strata__clocks_per_pass(o->wpc);
  for (int w = 0; w < sched->n_workers && K; w++) {
    long chunks = 0;
    for (int s = 0; s < sched->n_subepochs; s++) {
      int n;
      strata_schedule_tasks(sched, s, w, &n);
      chunks += (long)n * depth;
    }
    if (chunks < K)
      return strata_err_set(STRATA_EUSAGE,
                            "--wpc %g ends %d clocks per pass but worker %d has only %ld chunks "
                            "of work per pass: raise --depth or --strata",
                            o->wpc, K, w, chunks);
  }
  return 0;
}

/* Each worker keeps its shard of the table's rows. */
static unsigned tables_ckpt_parts(const strata_engine_opts *o, int P) {
  (void)o, (void)P;
  return STRATA__CKP_TABLE;
}

/* Blocks, cache, oplog, the open's copy of the initial rows, shard and its
 * snapshot (a P-th each), snapshot buffers of the passes in flight (s + 2
 * of them). */
static double tables_memory(const strata__mem_view *v) {
  double table = v->rot_all + v->global;
  int s = v->opts->staleness > 0 ? v->opts->staleness : 0;
  return v->resident + v->rot_all + v->global + 3 * table + 2 * table / v->P +
         (double)(s + 2) * table;
}

static void tables_stats_add(unsigned char *total, const unsigned char *in) {
  STRATA__MODE_STATS_GET(table_stats, a, total);
  STRATA__MODE_STATS_GET(table_stats, b, in);
  a.reads += b.reads;
  a.diff_sum += b.diff_sum;
  if (b.diff_min < a.diff_min) a.diff_min = b.diff_min;
  for (int i = 0; i < STRATA_TABLE_HIST; i++) a.hist[i] += b.hist[i];
  STRATA__MODE_STATS_PUT(total, a);
}

/* The clock differentials of t's reads: the ESSP paper's staleness profile. */
static void write_diffs(strata_json *j, const table_stats *t) {
  strata_json_object_begin(j, "clock_diff");
  strata_json_int(j, "reads", (int64_t)t->reads);
  strata_json_number(j, "mean", t->reads ? (double)t->diff_sum / (double)t->reads : 0.0);
  strata_json_int(j, "min", t->diff_min);
  strata_json_int(j, "max_staleness", -(int64_t)t->diff_min);
  int last = 0;
  for (int b = 0; b < STRATA_TABLE_HIST; b++)
    if (t->hist[b]) last = b;
  strata_json_array_begin(j, "hist");
  for (int b = 0; b <= last && t->reads; b++) strata_json_int(j, NULL, (int64_t)t->hist[b]);
  strata_json_array_end(j);
  strata_json_object_end(j);
}

/* The workers' figures summed: over the run (pass < 0) or of one pass. */
static table_stats sum_workers(const strata_run_result *r, int pass) {
  table_stats sum;
  memset(&sum, 0, sizeof sum);
  unsigned char acc[STRATA_MODE_STATS];
  memset(acc, 0, sizeof acc);
  for (int w = 0; w < r->workers; w++) {
    const strata_worker_stats *s =
        pass < 0 ? (r->worker_total ? &r->worker_total[w] : NULL)
                 : &r->per_pass_worker[(size_t)pass * (size_t)r->workers + (size_t)w];
    if (s) tables_stats_add(acc, s->mode_stats[0]);
  }
  memcpy(&sum, acc, sizeof sum);
  return sum;
}

/* The staleness the rule tells the app: -1 for none. */
static int rule_staleness(const strata_run_result *r) {
  const strata__table_rule *rule = strata__table_rule_of(r->mode);
  int s = r->opts->staleness;
  double wpc = r->opts->wpc;
  if (rule && rule->mode.clock_rule) rule->mode.clock_rule(r->opts, r->app, &s, &wpc);
  return s;
}

static void tables_metrics(strata_json *j, const strata_run_result *r, int slot) {
  (void)slot;
  static const char *const pf[] = {"none", "conservative", "aggressive"};
  const strata_engine_opts *o = r->opts;
  if (o) {
    strata_json_object_begin(j, "consistency");
    int s = rule_staleness(r);
    if (s >= 0)
      strata_json_int(j, "staleness", s);
    else
      strata_json_string(j, "staleness", "unbounded");
    strata_json_number(j, "wpc", o->wpc);
    strata_json_string(j, "prefetch", pf[o->prefetch]);
    strata_json_object_end(j);
  }
  /* Over every pass and worker: the ESSP paper's staleness profile. */
  table_stats sum = sum_workers(r, -1);
  write_diffs(j, &sum);
}

static void tables_metrics_pass(strata_json *j, const strata_run_result *r, int pass, int slot) {
  (void)slot;
  table_stats sum = sum_workers(r, pass);
  write_diffs(j, &sum);
}

static void tables_metrics_worker(strata_json *j, const strata_worker_stats *s, int slot) {
  STRATA__MODE_STATS_GET(table_stats, t, s->mode_stats[slot]);
  if (!t.reads) return;
  strata_json_int(j, "clocks", s->clocks);
  write_diffs(j, &t);
}

static void tables_echo(char *out, size_t n, const strata_engine_opts *o) {
  static const char *const pf[] = {"none", "conservative", "aggressive"};
  snprintf(out, n, "work per clock %g pass%s, prefetch %s", o->wpc, o->wpc == 1 ? "" : "es",
           pf[o->prefetch]);
}

static void tables_status(FILE *f, const strata_run_result *r, int done, int slot) {
  (void)done, (void)slot;
  table_stats sum = sum_workers(r, -1);
  /* differentials 0, -1, ...: the bound -b holds buckets b and older */
  uint64_t counts[STRATA_TABLE_HIST];
  double le[STRATA_TABLE_HIST];
  for (int i = 0; i < STRATA_TABLE_HIST; i++) {
    int b = STRATA_TABLE_HIST - 1 - i;
    counts[i] = sum.hist[b];
    le[i] = -b;
  }
  strata__prom_histogram(f, "strata_clock_differential",
                         "table row reads by clock differential (the row's clock minus "
                         "the reader's, in clocks; "
                         "0 is fresh, the lowest bucket also holds older reads)",
                         STRATA_TABLE_HIST, counts, le, (double)sum.diff_sum, sum.reads);
}

static const char *const tables_keys[] = {"consistency", "clock_diff", NULL};
static const char *const tables_pass_keys[] = {"clock_diff", NULL};

const strata__backend strata__table_backend = {
    .mode = {.name = "table",
             .takes = STRATA__TAKES_WPC | STRATA__TAKES_PREFETCH | STRATA__TAKES_VIEW,
             .resolve = tables_resolve,
             .clock_rule = tables_clock_rule,
             .check = tables_check,
             .all_rotating = 1,
             .counts_clocks = 1,
             .ckpt_parts = tables_ckpt_parts,
             .memory = tables_memory,
             .stats_add = tables_stats_add,
             .keys = tables_keys,
             .pass_keys = tables_pass_keys,
             .metrics = tables_metrics,
             .metrics_pass = tables_metrics_pass,
             .metrics_worker = tables_metrics_worker,
             .echo = tables_echo,
             .status = tables_status},
    .open = tables_open,
    .begin_pass = tables_begin_pass,
    .begin_subepoch = tables_begin_subepoch,
    .acquire = tables_acquire,
    .release = tables_release,
    .end_subepoch = tables_end_subepoch,
    .end_pass = tables_end_pass,
    .stats = tables_stats,
    .evaluate = tables_evaluate,
    .checkpoint = tables_checkpoint,
    .idle = tables_idle,
    .close = tables_close,
    .free = tables_free,
};
