/*
 * The ring back-end (scheduled and serial modes): the worker computes each
 * task chunk by chunk and streams every finished chunk of a rotating block
 * to the worker that needs it next while it computes the rest (the
 * pipelined ring of DSGD). In serial mode (no transport) the one worker
 * holds every block and nothing moves.
 */
#include <string.h>

#include "strata/core.h"
#include "worker/backend.h"

/* The global block on the ring: after each sub-epoch a worker sends its
 * change (copy minus the snapshot taken at the last exchange) to every other
 * worker, and adds theirs one sub-epoch later, in worker order, to its copy
 * and its snapshot; at the end of a pass everything is added. */
typedef struct gsync {
  size_t n;         /* floats */
  float *snap, *out, *in; /* in: P slots of n */
  strata_req *reqs; /* 2P */
  int pending;
} gsync;

typedef struct ring {
  strata__worker *w;
  gsync gs;
  int sync;           /* the global block is exchanged (workers > 1) */
  int S, P, depth;
  int *holder;        /* holder[s * n_rot + r]: worker using r in sub-epoch s */
  strata_req *recv;   /* [r * depth + c] */
  strata_req *send;   /* [r * depth + c] */
  int *incoming;      /* r: chunk receives posted and not yet consumed */
  int *sending;       /* r: chunk sends posted, maybe not complete */
  /* Double buffers: while the chunks of r still drain from rot[r].buf to the
   * next holder, the next copy of r lands in spare[r]; the two swap when r
   * is next computed. */
  void **spare;
  int *in_spare;      /* r: the posted receive targets spare[r] */
  int ckpt_pass;      /* the pass whose checkpoint is being written */
} ring;

static int holder(const strata__worker *w, const ring *rg, int s, int r) {
  return rg->holder[s * w->sched.n_rotating + r];
}

static int ensure_rot(strata__worker *w, int r) {
  strata_block *b = &w->rot[r];
  if (b->buf || b->len == 0) return 0;
  b->buf = strata_alloc_aligned(b->len);
  if (!b->buf) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory for block %d", w->me, r);
  return 0;
}

static size_t chunk_bytes(const strata_block *b, int depth, int c, size_t *off) {
  uint32_t lo, hi;
  strata_chunk_rows(b->nrows, depth, c, &lo, &hi);
  *off = (size_t)lo * b->row_bytes;
  return (size_t)(hi - lo) * b->row_bytes;
}

/* Waits for the outgoing chunks of r so that its buffer may be rewritten. */
static int finish_sends(strata__worker *w, ring *rg, int r, strata_worker_stats *st) {
  if (!rg->sending[r]) return 0;
  double t0 = strata_now();
  for (int c = 0; c < rg->depth; c++) {
    int rc = strata_comm_wait(w->t, &rg->send[r * rg->depth + c]);
    if (rc) return rc;
  }
  rg->sending[r] = 0;
  st->wait_s += strata_now() - t0;
  return 0;
}

/* Posts the chunk receives for every block this worker needs in sub-epoch s
 * that another worker holds in the sub-epoch before. */
static int post_receives(strata__worker *w, ring *rg, int s, strata_worker_stats *st) {
  int n;
  const strata_task *tk = strata_schedule_tasks(&w->sched, s, w->me, &n);
  int prev_s = (s + rg->S - 1) % rg->S;
  for (int i = 0; i < n; i++) {
    int r = tk[i].rotating;
    int from = holder(w, rg, prev_s, r);
    if (from == w->me) continue;
    int rc = ensure_rot(w, r);
    if (rc) return rc;
    strata_block *b = &w->rot[r];
    char *dst = b->buf;
    rg->in_spare[r] = 0;
    if (rg->sending[r]) {
      /* Its last chunks may still be on their way out of b->buf. */
      if (!rg->spare[r] && b->len && !(rg->spare[r] = strata_alloc_aligned(b->len)))
        return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory for block %d", w->me, r);
      dst = rg->spare[r];
      rg->in_spare[r] = 1;
    }
    for (int c = 0; c < rg->depth; c++) {
      size_t off, len = chunk_bytes(b, rg->depth, c, &off);
      rc = w->t->irecv(w->t->impl, dst + off, len, from + 1,
                       strata__chunk_tag(w->t, r, c, rg->depth), &rg->recv[r * rg->depth + c]);
      if (rc) return rc;
      st->bytes_recv += len;
    }
    rg->incoming[r] = 1;
  }
  return 0;
}

/* Makes the incoming copy of r the current one when it went to the spare
 * buffer; the old buffer's sends finished long ago (a whole sub-epoch). */
static int adopt_incoming(strata__worker *w, ring *rg, int r, strata_worker_stats *st) {
  if (!rg->in_spare[r]) return 0;
  int rc = finish_sends(w, rg, r, st);
  if (rc) return rc;
  void *t = w->rot[r].buf;
  w->rot[r].buf = rg->spare[r];
  rg->spare[r] = t;
  rg->in_spare[r] = 0;
  return 0;
}

/* Tests outstanding sends so the transfers move while this rank computes. */
static int progress_sends(strata__worker *w, ring *rg) {
  /* One test drives the whole progress engine; with single-copy shared
   * memory the receiver pulls, so this also lets peers' chunks land. */
  for (int r = 0; r < w->sched.n_rotating; r++) {
    if (!rg->sending[r]) continue;
    int all = 1;
    for (int c = 0; c < rg->depth; c++) {
      int done;
      int rc = w->t->test(w->t->impl, &rg->send[r * rg->depth + c], &done);
      if (rc) return rc;
      all &= done;
    }
    if (all) rg->sending[r] = 0;
  }
  return 0;
}

/* The worker the chunks of r go to after sub-epoch s of `pass`, or -1 (it
 * keeps r, or nothing moves after the last pass). */
static int send_target(const ring *rg, int pass, int s, int r) {
  strata__worker *w = rg->w;
  if (!w->t || (s == rg->S - 1 && pass == w->last_pass)) return -1;
  int next = holder(w, rg, (s + 1) % rg->S, r);
  return next != w->me ? next : -1;
}

static int ring_acquire(void *be, strata_task_view *tv, strata_worker_stats *st) {
  ring *rg = be;
  strata__worker *w = rg->w;
  int r = tv->ids.rotating, rc = 0;
  if (!rg->incoming[r]) return 0;
  if (tv->chunk == 0 && (rc = adopt_incoming(w, rg, r, st))) return rc;
  int done = 0;
  strata_req *rq = &rg->recv[r * rg->depth + tv->chunk];
  rc = w->t->test(w->t->impl, rq, &done);
  if (!rc && !done) {
    double t0 = strata_now();
    rc = strata_comm_wait(w->t, rq);
    st->wait_s += strata_now() - t0;
  }
  return rc;
}

static int ring_release(void *be, const strata_task_view *tv, strata_worker_stats *st) {
  ring *rg = be;
  strata__worker *w = rg->w;
  int r = tv->ids.rotating, rc = 0;
  int send_to = send_target(rg, tv->pass, tv->subepoch, r);
  if (send_to >= 0) {
    size_t off, len = chunk_bytes(tv->rotating, rg->depth, tv->chunk, &off);
    rc = w->t->isend(w->t->impl, (char *)tv->rotating->buf + off, len, send_to + 1,
                     strata__chunk_tag(w->t, r, tv->chunk, rg->depth),
                     &rg->send[r * rg->depth + tv->chunk]);
    if (rc) return rc;
    st->bytes_sent += len;
    rg->sending[r] = 1;
  }
  if (w->t && (rc = progress_sends(w, rg))) return rc;
  if (tv->chunk == rg->depth - 1) rg->incoming[r] = 0;
  return 0;
}

/* The sub-epoch whose tasks name the rotating blocks a worker holds at the
 * end of `pass` once its transfers have landed: the next pass's first, or,
 * after the last pass (nothing is sent on), the final one. */
static int held_subepoch(const ring *rg, int pass, int passes) {
  return pass + 1 < passes ? 0 : rg->S - 1;
}

/* Completes every transfer: each rotating block is then where the next
 * pass starts it (after the last pass, where the last sub-epoch left it:
 * held_subepoch). The waiting counts where the caller's time goes
 * (evaluation, a checkpoint, the end), not as the pass's waits. */
static int settle_blocks(strata__worker *w, ring *rg) {
  strata_worker_stats drain = {0};
  int rc = 0;
  for (int r = 0; r < w->sched.n_rotating && !rc && w->t; r++) {
    for (int c = 0; c < rg->depth && rg->incoming[r] && !rc; c++)
      rc = strata_comm_wait(w->t, &rg->recv[r * rg->depth + c]);
    if (!rc) rc = finish_sends(w, rg, r, &drain);
    if (!rc) rc = adopt_incoming(w, rg, r, &drain);
  }
  return rc;
}

/* After a pass: complete every transfer, give every worker a copy of the
 * whole model, and score the eval blocks this worker owns. */
static int evaluate(strata__worker *w, ring *rg, int pass, double *partials,
                    strata_worker_stats *st) {
  double t0 = strata_now();
  int rc = 0, nrot = w->sched.n_rotating;
  strata_req *reqs = NULL;
  if (w->t) {
    if ((rc = settle_blocks(w, rg))) return rc;
    int hs = held_subepoch(rg, pass, w->last_pass + 1);
    if (rg->P > 1) {
      reqs = strata_calloc((size_t)nrot * (size_t)rg->P, sizeof *reqs);
      if (!reqs) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
      for (int r = 0; r < nrot && !rc; r++) {
        int h = holder(w, rg, hs, r);
        int tag = TAG_EVAL_BASE + r % (TAG_CHUNK_BASE - TAG_EVAL_BASE);
        if (h == w->me) {
          for (int p = 0; p < rg->P && !rc; p++)
            if (p != w->me) {
              rc = w->t->isend(w->t->impl, w->rot[r].buf, w->rot[r].len, p + 1, tag,
                               &reqs[r * rg->P + p]);
              st->eval_bytes += w->rot[r].len;
            }
        } else if (!(rc = ensure_rot(w, r))) {
          rc = w->t->irecv(w->t->impl, w->rot[r].buf, w->rot[r].len, h + 1, tag,
                           &reqs[r * rg->P + w->me]);
        }
      }
      for (int i = 0; i < nrot * rg->P && !rc; i++) rc = strata_comm_wait(w->t, &reqs[i]);
      strata_free(reqs);
      if (rc) return rc;
    }
  }
  if (!rc) rc = strata__worker_score(w, pass, partials);
  st->eval_s += strata_now() - t0;
  return rc;
}

static int gsync_finish(strata__worker *w, gsync *g, strata_worker_stats *st) {
  if (!g->pending) return 0;
  int P = w->sched.n_workers, rc = 0;
  double t0 = strata_now();
  for (int i = 0; i < 2 * P && !rc; i++) rc = strata_comm_wait(w->t, &g->reqs[i]);
  st->wait_s += strata_now() - t0;
  if (rc) return rc;
  float *cur = w->global->buf;
  for (int p = 0; p < P; p++) {
    if (p == w->me) continue;
    const float *d = g->in + (size_t)p * g->n;
    for (size_t j = 0; j < g->n; j++) {
      cur[j] += d[j];
      g->snap[j] += d[j];
    }
  }
  g->pending = 0;
  return 0;
}

static int gsync_post(strata__worker *w, gsync *g, strata_worker_stats *st) {
  int rc = gsync_finish(w, g, st);
  if (rc) return rc;
  int P = w->sched.n_workers;
  float *cur = w->global->buf;
  for (size_t j = 0; j < g->n; j++) {
    g->out[j] = cur[j] - g->snap[j];
    g->snap[j] = cur[j];
  }
  size_t len = g->n * sizeof(float);
  for (int p = 0; p < P && !rc; p++) {
    if (p == w->me) continue;
    rc = w->t->irecv(w->t->impl, g->in + (size_t)p * g->n, len, p + 1, TAG_GSYNC, &g->reqs[p]);
    if (!rc) rc = w->t->isend(w->t->impl, g->out, len, p + 1, TAG_GSYNC, &g->reqs[P + p]);
    st->bytes_sent += len;
    st->bytes_recv += len;
  }
  g->pending = 1;
  return rc;
}

/* block_objective for the blocks this worker accounts for at the end of a
 * pass: its resident blocks, the rotating blocks it computed last (in the
 * final sub-epoch; each rotating block is used by one task per sub-epoch),
 * and on worker 0 the global block. */
static int block_objectives(strata__worker *w, int pass, double *partials) {
  int rc = 0, n;
  for (int i = 0; i < w->sched.n_resident && !rc; i++)
    if (strata_schedule_resident_owner(&w->sched, i) == w->me)
      rc = w->app->block_objective(w->state, pass, STRATA_BLOCK_RESIDENT, i, &w->res[i], partials);
  const strata_task *tk = strata_schedule_tasks(&w->sched, w->sched.n_subepochs - 1, w->me, &n);
  for (int i = 0; i < n && !rc; i++)
    rc = w->app->block_objective(w->state, pass, STRATA_BLOCK_ROTATING, tk[i].rotating,
                                 &w->rot[tk[i].rotating], partials);
  if (!rc && w->me == 0 && w->global)
    rc = w->app->block_objective(w->state, pass, STRATA_BLOCK_GLOBAL, 0, w->global, partials);
  return rc;
}


static void ring_free(void *be) {
  ring *rg = be;
  if (!rg) return;
  strata_free(rg->gs.snap);
  strata_free(rg->gs.out);
  strata_free(rg->gs.in);
  strata_free(rg->gs.reqs);
  for (int r = 0; rg->spare && r < rg->w->sched.n_rotating; r++) strata_free(rg->spare[r]);
  strata_free(rg->spare);
  strata_free(rg->in_spare);
  strata_free(rg->holder);
  strata_free(rg->recv);
  strata_free(rg->send);
  strata_free(rg->incoming);
  strata_free(rg->sending);
  strata_free(rg);
}

static int ring_open(strata__worker *w, void **out) {
  ring *rg = strata_calloc(1, sizeof *rg);
  *out = rg;
  if (!rg) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
  rg->w = w;
  int nrot = w->sched.n_rotating;
  rg->sync = w->global && w->t && w->sched.n_workers > 1;
  if (rg->sync) {
    gsync *g = &rg->gs;
    int P = w->sched.n_workers;
    g->n = w->global->len / sizeof(float);
    g->snap = strata_malloc(g->n * sizeof(float));
    g->out = strata_malloc(g->n * sizeof(float));
    g->in = strata_malloc(g->n * (size_t)P * sizeof(float));
    g->reqs = strata_calloc(2 * (size_t)P, sizeof *g->reqs);
    if (!g->snap || !g->out || !g->in || !g->reqs)
      return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
    memcpy(g->snap, w->global->buf, g->n * sizeof(float));
  }
  rg->S = w->sched.n_subepochs;
  rg->P = w->sched.n_workers;
  rg->depth = w->setup.depth;
  rg->holder = strata_malloc((size_t)rg->S * (size_t)nrot * sizeof(int) + 1);
  rg->recv = strata_calloc((size_t)nrot * (size_t)rg->depth + 1, sizeof(strata_req));
  rg->send = strata_calloc((size_t)nrot * (size_t)rg->depth + 1, sizeof(strata_req));
  rg->incoming = strata_calloc((size_t)nrot + 1, sizeof(int));
  rg->sending = strata_calloc((size_t)nrot + 1, sizeof(int));
  rg->spare = strata_calloc((size_t)nrot + 1, sizeof(void *));
  rg->in_spare = strata_calloc((size_t)nrot + 1, sizeof(int));
  if (!rg->holder || !rg->recv || !rg->send || !rg->incoming || !rg->sending || !rg->spare ||
      !rg->in_spare)
    return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
  for (int s = 0; s < rg->S; s++)
    for (int r = 0; r < nrot; r++)
      rg->holder[s * nrot + r] = strata_schedule_rotating_holder(&w->sched, r, s);
  return 0;
}

static int ring_begin_pass(void *be, int pass, strata_worker_stats *st) {
  (void)be, (void)pass, (void)st;
  return 0;
}

static int ring_begin_subepoch(void *be, int pass, int s, strata_worker_stats *st) {
  ring *rg = be;
  strata__worker *w = rg->w;
  /* A straggler here: a clock is a pass of the ring. */
  if (s == 0 && w->opts && w->opts->straggler_ms && pass % rg->P == w->me)
    st->delay_s += strata__straggle_ms(w->opts->straggler_ms, w->opts->straggler_spin);
  /* Receives for the next sub-epoch go up before this one's compute, so
   * each incoming block lands while this worker is busy. */
  if (w->t && !(s == rg->S - 1 && pass == w->last_pass))
    return post_receives(w, rg, (s + 1) % rg->S, st);
  return 0;
}

static int ring_end_subepoch(void *be, int pass, int s, strata_worker_stats *st) {
  ring *rg = be;
  (void)pass, (void)s;
  return rg->sync ? gsync_post(rg->w, &rg->gs, st) : 0;
}

static int ring_end_pass(void *be, int pass, strata_worker_stats *st) {
  ring *rg = be;
  (void)pass;
  return rg->sync ? gsync_finish(rg->w, &rg->gs, st) : 0;
}

static void ring_stats(void *be, strata_worker_stats *st) {
  (void)be, (void)st;
}

static int ring_evaluate(void *be, int pass, pass_report *rep) {
  ring *rg = be;
  strata__worker *w = rg->w;
  strata_worker_stats *st = &rep->stats;
  int rc = 0;
  if (w->app->block_objective) {
    double t0 = strata_now();
    rc = block_objectives(w, pass, rep->partials);
    st->eval_s += strata_now() - t0;
  }
  if (!rc && w->has_eval && w->app->evaluate) rc = evaluate(w, rg, pass, rep->partials, st);
  strata__worker_stamp(w, st);
  if (!rc) rc = w->report(w->report_ud, rep);
  return rc;
}

/* Leaves no transfer behind: export and free need settled buffers. */
static int ring_close(void *be, int stopped) {
  ring *rg = be;
  (void)stopped;
  return settle_blocks(rg->w, rg);
}

/* The checkpoint's entries: this worker's resident blocks, the rotating
 * blocks it holds once the pass's transfers have landed, its copy of the
 * global block (copies may differ in their last bits: each keeps its own). */
static int ring_ckpt_add(void *ctx, strata__part_writer *pw) {
  ring *rg = ctx;
  strata__worker *w = rg->w;
  int rc = strata__ckpt_add_residents(w, pw, NULL);
  int hs = held_subepoch(rg, rg->ckpt_pass, w->last_pass + 1);
  for (int r = 0; r < w->sched.n_rotating && !rc; r++)
    if (holder(w, rg, hs, r) == w->me && w->rot[r].len)
      rc = strata__part_add(pw, STRATA__CK_ROTATING, r, 0, w->rot[r].buf, w->rot[r].len);
  if (!rc && w->global)
    rc = strata__part_add(pw, STRATA__CK_GLOBAL, 0, 0, w->global->buf, w->global->len);
  return rc;
}

/* At a pass boundary nothing is half done: once the pass's transfers have
 * landed, every block holds exactly the pass's updates (the global copy
 * took every worker's last delta at end_pass). */
static int ring_checkpoint(void *be, int pass) {
  ring *rg = be;
  int rc = settle_blocks(rg->w, rg);
  rg->ckpt_pass = pass;
  return rc ? rc : strata__worker_ckpt(rg->w, pass, ring_ckpt_add, rg);
}

/* ---- what the ring's modes answer (core/mode.h) ---- */

/* Scheduled and serial modes take none of the table or sfb settings (the
 * engine has refused them); an app's default work per clock does not
 * apply. */
static int ring_resolve(strata_engine_opts *o, const strata__given *g) {
  (void)g;
  o->wpc = 0;
  return 0;
}

/* The ring hands each rotating block to one worker at a time: an app whose
 * workers all update the same matrix (a shared schedule) runs on it only
 * with one worker. */
static int ring_check(const strata_engine_opts *o, const strata_app *app, const strata_setup *setup,
                      const strata_problem *p, const strata_schedule *s) {
  (void)p;
  if (setup->workers > 1 && (app->sf || (s && s->shared)))
    return strata_err_set(STRATA_EUSAGE,
                          "%s: --mode %s hands each parameter block to one worker at a time, but "
                          "this app's workers all update one matrix: use --mode sfb, a "
                          "parameter-server mode (bsp, ssp, ...) or --mode serial",
                          app->name, strata_mode_name(o->mode));
  return 0;
}

/* A worker holds a rotating block alone while it computes on it, so its
 * reads are never stale; a clock is a pass (a sufficient-factor app's:
 * a minibatch, as in every mode). */
static void ring_clock_rule(const strata_engine_opts *o, const strata_app *app, int *staleness,
                            double *wpc) {
  (void)o;
  *staleness = 0;
  *wpc = app->sf ? 0 : 1;
}

/* Each rotating block comes from the worker that computed it last; each
 * worker keeps its own copy of the global block. */
static unsigned ring_ckpt_parts(const strata_engine_opts *o, int P) {
  (void)o, (void)P;
  return STRATA__CKP_ROTATING | STRATA__CKP_GLOBAL;
}

/* A second buffer for every block it sends on and, with evaluation, a copy
 * of every rotating block; the global block's copies of the sub-epochs in
 * flight and the deltas it exchanges. */
static double ring_memory(const strata__mem_view *v) {
  return v->resident + 2 * (v->eval ? v->rot_all : v->rot_held) +
         (v->P > 1 ? (3.0 + v->P) * v->global : v->global);
}

const strata__backend strata__ring_backend = {
    .mode = {.name = "ring",
             .resolve = ring_resolve,
             .clock_rule = ring_clock_rule,
             .check = ring_check,
             .runs_rounds = 1,
             .ckpt_parts = ring_ckpt_parts,
             .memory = ring_memory},
    .open = ring_open,
    .begin_pass = ring_begin_pass,
    .begin_subepoch = ring_begin_subepoch,
    .acquire = ring_acquire,
    .release = ring_release,
    .end_subepoch = ring_end_subepoch,
    .end_pass = ring_end_pass,
    .stats = ring_stats,
    .evaluate = ring_evaluate,
    .checkpoint = ring_checkpoint,
    .idle = NULL,
    .close = ring_close,
    .free = ring_free,
};
