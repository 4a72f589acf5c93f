/*
 * The worker: walks the static schedule, computes each task chunk by chunk,
 * and streams every finished chunk of a rotating block to the worker that
 * needs it next while it computes the rest (the pipelined ring of DSGD).
 */
#include <string.h>

#include "scheduler/protocol.h"
#include "strata/core.h"

typedef struct ring {
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

static int run_task(strata__worker *w, ring *rg, int pass, int s, const strata_task *task,
                    int send_to, const double *ctl, double *partials, strata_worker_stats *st) {
  int r = task->rotating;
  strata_task_view tv = {
      .pass = pass,
      .subepoch = s,
      .ids = *task,
      .data = &w->data[task->data],
      .resident = &w->res[task->resident],
      .rotating = &w->rot[r],
      .global = w->global,
      .control = w->app->n_controls ? ctl : NULL,
  };
  if (rg->incoming[r]) {
    int rc = adopt_incoming(w, rg, r, st);
    if (rc) return rc;
  }
  for (int c = 0; c < rg->depth; c++) {
    if (rg->incoming[r]) {
      int done = 0;
      strata_req *rq = &rg->recv[r * rg->depth + c];
      int rc = w->t->test(w->t->impl, rq, &done);
      if (!rc && !done) {
        double t0 = strata_now();
        rc = strata_comm_wait(w->t, rq);
        st->wait_s += strata_now() - t0;
      }
      if (rc) return rc;
    }
    tv.chunk = c;
    strata_chunk_rows(tv.rotating->nrows, rg->depth, c, &tv.row_lo, &tv.row_hi);
    double t0 = strata_now();
    int rc = w->app->compute(w->state, &tv, partials);
    st->compute_s += strata_now() - t0;
    if (rc) return rc;
    if (send_to >= 0) {
      size_t off, len = chunk_bytes(tv.rotating, rg->depth, c, &off);
      rc = w->t->isend(w->t->impl, (char *)tv.rotating->buf + off, len, send_to + 1,
                       strata__chunk_tag(w->t, r, c, rg->depth), &rg->send[r * rg->depth + c]);
      if (rc) return rc;
      st->bytes_sent += len;
      rg->sending[r] = 1;
    }
    if (w->t && (rc = progress_sends(w, rg))) return rc;
  }
  rg->incoming[r] = 0;
  return 0;
}

/* The sub-epoch whose tasks name the rotating blocks a worker holds at the
 * end of `pass` once its transfers have landed: the next pass's first, or,
 * after the last pass (nothing is sent on), the final one. */
static int held_subepoch(const ring *rg, int pass, int passes) {
  return pass + 1 < passes ? 0 : rg->S - 1;
}

/* After a pass: complete every transfer, give every worker a copy of the
 * whole model, and score the eval blocks this worker owns. */
static int evaluate(strata__worker *w, ring *rg, int pass, double *partials,
                    strata_worker_stats *st) {
  double t0 = strata_now();
  int rc = 0, nrot = w->sched.n_rotating;
  strata_req *reqs = NULL;
  if (w->t) {
    /* Draining belongs to evaluation (eval_s), not to the pass's waits. */
    strata_worker_stats drain = {0};
    for (int r = 0; r < nrot; r++) {
      for (int c = 0; c < rg->depth && rg->incoming[r]; c++)
        if ((rc = strata_comm_wait(w->t, &rg->recv[r * rg->depth + c]))) return rc;
      if ((rc = finish_sends(w, rg, r, &drain))) return rc;
      if ((rc = adopt_incoming(w, rg, r, &drain))) return rc;
    }
    int hs = held_subepoch(rg, pass, w->setup.passes);
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

int strata__pass_verdict(strata__worker *w, int pass, int *stop, double *ctl) {
  pass_control v;
  memset(&v, 0, sizeof v);
  int rc = w->control ? w->control(w->report_ud, pass, &v) : 0;
  *stop = v.stop;
  memcpy(ctl, v.ctl, sizeof v.ctl);
  return rc;
}

int strata__worker_score(strata__worker *w, int pass, double *partials) {
  int rc = 0;
  for (int s = 0; s < w->sched.n_subepochs && !rc; s++) {
    int n;
    const strata_task *tk = strata_schedule_tasks(&w->sched, s, w->me, &n);
    for (int i = 0; i < n && !rc; i++) {
      strata_block *eb = &w->eval[tk[i].data];
      if (!eb->len) continue;
      strata_task_view tv = {.pass = pass,
                             .subepoch = s,
                             .ids = tk[i],
                             .data = eb,
                             .resident = &w->res[tk[i].resident],
                             .rotating = &w->rot[tk[i].rotating],
                             .global = w->global,
                             .chunk = -1,
                             .row_lo = 0,
                             .row_hi = w->rot[tk[i].rotating].nrows};
      rc = w->app->evaluate(w->state, &tv, partials);
    }
  }
  return rc;
}

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
static int ring_block_objectives(strata__worker *w, int pass, double *partials) {
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

int strata__worker_loop(strata__worker *w) {
  if (strata_engine_is_ps(w->setup.mode)) return strata__worker_loop_ps(w);
  ring rg = {0};
  gsync gs = {0};
  int rc = 0;
  int nrot = w->sched.n_rotating;
  int sync = w->global && w->t && w->sched.n_workers > 1;
  if (sync) {
    int P = w->sched.n_workers;
    gs.n = w->global->len / sizeof(float);
    gs.snap = strata_malloc(gs.n * sizeof(float));
    gs.out = strata_malloc(gs.n * sizeof(float));
    gs.in = strata_malloc(gs.n * (size_t)P * sizeof(float));
    gs.reqs = strata_calloc(2 * (size_t)P, sizeof *gs.reqs);
    if (!gs.snap || !gs.out || !gs.in || !gs.reqs) {
      rc = strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
      goto done;
    }
    memcpy(gs.snap, w->global->buf, gs.n * sizeof(float));
  }
  rg.S = w->sched.n_subepochs;
  rg.P = w->sched.n_workers;
  rg.depth = w->setup.depth;
  rg.holder = strata_malloc((size_t)rg.S * (size_t)nrot * sizeof(int));
  rg.recv = strata_calloc((size_t)nrot * (size_t)rg.depth, sizeof(strata_req));
  rg.send = strata_calloc((size_t)nrot * (size_t)rg.depth, sizeof(strata_req));
  rg.incoming = strata_calloc((size_t)nrot, sizeof(int));
  rg.sending = strata_calloc((size_t)nrot, sizeof(int));
  rg.spare = strata_calloc((size_t)nrot, sizeof(void *));
  rg.in_spare = strata_calloc((size_t)nrot, sizeof(int));
  if (!rg.holder || !rg.recv || !rg.send || !rg.incoming || !rg.sending || !rg.spare ||
      !rg.in_spare) {
    rc = strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
    goto done;
  }
  for (int s = 0; s < rg.S; s++)
    for (int r = 0; r < nrot; r++)
      rg.holder[s * nrot + r] = strata_schedule_rotating_holder(&w->sched, r, s);

  int passes = w->setup.passes;
  int do_eval = w->has_eval && w->app->evaluate;
  double ctl[STRATA_MAX_CONTROLS];
  for (int pass = 0; pass < passes && !rc; pass++) {
    pass_report rep;
    strata__report_begin(&rep, pass, w->me);
    strata_worker_stats *st = &rep.stats;
    double t_pass = strata_now(), cpu0 = strata_cpu_seconds();
    int stop = 0;
    if ((rc = strata__pass_verdict(w, pass, &stop, ctl))) break;
    if (stop) {
      w->stopped = 1;
      break;
    }
    st->wait_s += strata_now() - t_pass;
    /* A straggler here: a clock is a pass of the ring. */
    if (w->opts && w->opts->straggler_ms && pass % rg.P == w->me)
      st->delay_s += strata__straggle_ms(w->opts->straggler_ms, w->opts->straggler_spin);
    for (int s = 0; s < rg.S && !rc; s++) {
      /* Receives for the next sub-epoch go up before this one's compute, so
       * each incoming block lands while this worker is busy. */
      int last = (s == rg.S - 1);
      if (w->t && !(last && pass == passes - 1)) rc = post_receives(w, &rg, (s + 1) % rg.S, st);
      int n;
      const strata_task *tk = strata_schedule_tasks(&w->sched, s, w->me, &n);
      for (int i = 0; i < n && !rc; i++) {
        int r = tk[i].rotating;
        int next = holder(w, &rg, (s + 1) % rg.S, r);
        int send_to = (next != w->me && !(last && pass == passes - 1)) ? next : -1;
        rc = run_task(w, &rg, pass, s, &tk[i], send_to, ctl, rep.partials, st);
      }
      if (!rc && sync) rc = gsync_post(w, &gs, st);
    }
    if (!rc && sync) rc = gsync_finish(w, &gs, st);
    if (rc) break;
    st->time_s = strata_now() - t_pass;
    if (w->app->block_objective) {
      double t0 = strata_now();
      rc = ring_block_objectives(w, pass, rep.partials);
      st->eval_s += strata_now() - t0;
    }
    if (!rc && do_eval) rc = evaluate(w, &rg, pass, rep.partials, st);
    st->cpu_s = strata_cpu_seconds() - cpu0;
    st->span_s = strata_now() - t_pass;
    if (!rc) rc = w->report(w->report_ud, &rep);
  }
  /* Leave no transfer behind: export and free need settled buffers. */
  for (int r = 0; r < nrot && !rc && w->t; r++) {
    for (int c = 0; c < rg.depth && rg.incoming[r]; c++)
      rc = strata_comm_wait(w->t, &rg.recv[r * rg.depth + c]);
    strata_worker_stats dummy = {0};
    if (!rc) rc = finish_sends(w, &rg, r, &dummy);
    if (!rc) rc = adopt_incoming(w, &rg, r, &dummy);
  }
done:
  strata_free(gs.snap);
  strata_free(gs.out);
  strata_free(gs.in);
  strata_free(gs.reqs);
  for (int r = 0; rg.spare && r < nrot; r++) strata_free(rg.spare[r]);
  strata_free(rg.spare);
  strata_free(rg.in_spare);
  strata_free(rg.holder);
  strata_free(rg.recv);
  strata_free(rg.send);
  strata_free(rg.incoming);
  strata_free(rg.sending);
  return rc;
}

void strata__worker_close(strata__worker *w) {
  if (w->state && w->app->worker_free) w->app->worker_free(w->state);
  w->state = NULL;
  int nd = w->sched.n_data, nr = w->sched.n_resident, nt = w->sched.n_rotating;
  for (int i = 0; w->data && i < nd; i++) strata_free(w->data[i].buf);
  for (int i = 0; w->eval && i < nd; i++) strata_free(w->eval[i].buf);
  for (int i = 0; w->res && i < nr; i++) strata_free(w->res[i].buf);
  for (int i = 0; w->rot && i < nt; i++) strata_free(w->rot[i].buf);
  strata_free(w->data);
  strata_free(w->eval);
  strata_free(w->res);
  strata_free(w->rot);
  w->data = w->eval = w->res = w->rot = NULL;
  if (w->global && w->t) { /* in serial mode the problem owns it */
    strata_free(w->global->buf);
    strata_free(w->global);
  }
  w->global = NULL;
  strata_schedule_close(&w->sched);
}
