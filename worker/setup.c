/*
 * Worker start and end over MPI: receive the set-up from the coordinator,
 * run the passes, send the model back when asked to, and on a failure end
 * the run with the coordinator (comm/protocol.h, "Failure").
 */
#include <stdio.h>
#include <string.h>

#include "comm/bell.h"
#include "comm/watch.h"
#include "core/wait.h"
#include "strata/core.h"
#include "worker/backend.h"
#include "worker/worker.h"

/* A worker over MPI: w->t is the watched transport; the failure
 * protocol's own messages go over the transport as given. */
typedef struct mpi_worker {
  strata__worker w;
  const strata_transport *net;
  strata__watch *watch;
  int settled;
  int rc; /* once settled: the code this worker leaves with */
} mpi_worker;

/* This worker's checkpoint part is on disk: the coordinator writes the
 * manifest once every part is. */
static int send_ckpt_note(void *ud, const ckpt_note *n) {
  strata__worker *w = &((mpi_worker *)ud)->w;
  strata_req rq = {0};
  int rc = w->t->isend(w->t->impl, n, sizeof *n, 0, TAG_CKPT, &rq);
  strata__bell_ring(0);
  if (!rc) rc = strata_comm_wait(w->t, &rq);
  return rc;
}

static int send_report(void *ud, const pass_report *rep) {
  strata__worker *w = &((mpi_worker *)ud)->w;
  strata_req rq = {0};
  /* Reports are small and go out eagerly; waiting here costs nothing. */
  int rc = w->t->isend(w->t->impl, rep, sizeof *rep, 0, TAG_REPORT, &rq);
  strata__bell_ring(0);
  if (!rc) rc = strata_comm_wait(w->t, &rq);
  return rc;
}

/* A round run's waits: woken by the doorbell when this rank has one, else
 * polling at the rounds' ceiling. */
static strata__wait_conf round_conf(void) {
  int fd = strata__bell_fd();
  return (strata__wait_conf){.ceiling = fd > 0 ? STRATA__WAIT_BELL : STRATA__WAIT_ROUND,
                             .wake_fd = fd > 0 ? fd : 0};
}

static int test_one(void *ctx, int *done, int *progressed);

/* The coordinator's verdict on a pass, waited for without spinning (or,
 * with w->waiting, while doing what the loop must keep doing). */
static int mpi_control(void *ud, int pass, pass_control *out) {
  strata__worker *w = &((mpi_worker *)ud)->w;
  strata_req rq = {0};
  int rc = w->t->irecv(w->t->impl, out, sizeof *out, 0, TAG_CONTROL, &rq);
  if (rc) return rc;
  if (w->rounds_per_pass) {
    /* A round run's verdict follows its pass at once: its wait is the
     * rounds'. */
    void *ctx[2] = {w->t, &rq};
    strata__wait_conf wc = round_conf();
    rc = strata__wait(test_one, ctx, &wc);
  } else if (!w->waiting) {
    rc = strata_comm_wait_idle(w->t, &rq);
  } else {
    strata__wait_enter();
    for (int done = 0; !rc;) {
      if ((rc = w->t->test(w->t->impl, &rq, &done)) || done) break;
      rc = w->waiting(w->waiting_ctx);
    }
    strata__wait_leave();
  }
  if (!rc && out->pass != pass)
    rc = strata_err_set(STRATA_ECOMM, "worker %d: verdict for pass %d while starting pass %d", w->me,
                        out->pass + 1, pass + 1);
  return rc;
}

/* Round runs: the coordinator's next step, waited for in the back-off
 * wait at the rounds' ceiling (its round trip is the run's critical path). */
typedef struct round_wait {
  strata_transport *t;
  void *msg;
  size_t len;
  int me;
} round_wait;

static int poll_step(void *ctx, int *done, int *progressed) {
  round_wait *c = ctx;
  int got = 0, src = -1;
  int rc = c->t->poll(c->t->impl, TAG_ROUND, &got, &src, &c->msg, &c->len);
  if (!rc && got && src != 0) {
    strata_free(c->msg);
    c->msg = NULL;
    rc = strata_err_set(STRATA_ECOMM, "worker %d: a round step from rank %d", c->me, src);
  }
  *done = *progressed = got;
  return rc;
}

static int mpi_round_recv(void *ud, int pass, void **msg, size_t *len, double *wait_s) {
  strata__worker *w = &((mpi_worker *)ud)->w;
  (void)pass;
  round_wait c = {w->t, NULL, 0, w->me};
  double t0 = strata_now();
  strata__wait_conf wc = round_conf();
  int rc = strata__wait(poll_step, &c, &wc);
  *wait_s = strata_now() - t0;
  if (rc) {
    strata_free(c.msg);
    return rc;
  }
  *msg = c.msg;
  *len = c.len;
  return 0;
}

static int mpi_round_send(void *ud, const void *msg, size_t len) {
  strata__worker *w = &((mpi_worker *)ud)->w;
  strata_req rq = {0};
  int rc = w->t->isend(w->t->impl, msg, len, 0, TAG_PUSH, &rq);
  strata__bell_ring(0);
  void *ctx[2] = {w->t, &rq};
  strata__wait_conf wc = {.ceiling = STRATA__WAIT_ROUND};
  if (!rc) rc = strata__wait(test_one, ctx, &wc);
  return rc;
}

static int recv_idle(strata_transport *t, void *buf, size_t len, int tag) {
  strata_req rq = {0};
  int rc = t->irecv(t->impl, buf, len, 0, tag, &rq);
  if (!rc) rc = strata_comm_wait_idle(t, &rq);
  return rc;
}

/* Receives the bundle of this worker's blocks and gives each block its own
 * aligned buffer (blocks are freed one by one later). */
static int receive_blocks(strata__worker *w) {
  strata_transport *t = w->t;
  strata_schedule *s = &w->sched;
  size_t cap = 2 * (size_t)s->n_data + (size_t)s->n_resident + (size_t)s->n_rotating;
  strata_block **list = strata_malloc(cap * sizeof *list);
  char *bundle = NULL;
  strata_req *reqs = NULL;
  int rc = 0;
  if (!list) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
  size_t total;
  int n = strata__setup_blocks(s, w->me, w->backend->mode.all_rotating, w->data,
                               w->has_eval ? w->eval : NULL, w->res, w->rot, list, &total);
  int pieces = (int)((total + STRATA__PIECE - 1) / STRATA__PIECE);
  bundle = strata_malloc(total ? total : 1);
  reqs = strata_calloc((size_t)(pieces ? pieces : 1), sizeof *reqs);
  if (!bundle || !reqs) {
    rc = strata_err_set(STRATA_ENOMEM, "worker %d: out of memory for %zu bytes of blocks", w->me,
                        total);
    goto done;
  }
  for (int i = 0; i < pieces && !rc; i++) {
    size_t off = (size_t)i * STRATA__PIECE;
    size_t len = total - off < STRATA__PIECE ? total - off : STRATA__PIECE;
    rc = t->irecv(t->impl, bundle + off, len, 0, TAG_BLOCK, &reqs[i]);
  }
  if (!rc) rc = strata_comm_wait_all_idle(t, reqs, pieces);
  size_t off = 0;
  for (int i = 0; i < n && !rc; i++) {
    strata_block *b = list[i];
    if (!(b->buf = strata_alloc_aligned(b->len))) {
      rc = strata_err_set(STRATA_ENOMEM, "worker %d: out of memory (%zu bytes)", w->me, b->len);
      break;
    }
    memcpy(b->buf, bundle + off, b->len);
    off += b->len;
  }
done:
  strata_free(list);
  strata_free(bundle);
  strata_free(reqs);
  return rc;
}

static int receive_setup(strata__worker *w, setup_header *h) {
  strata_transport *t = w->t;
  int rc = recv_idle(t, h, sizeof *h, TAG_HEADER);
  if (rc) return rc;
  if (h->status) {
    /* The coordinator has already said why; end with its code, quietly. */
    strata_err_clear();
    return h->status;
  }
  w->has_eval = h->has_eval;
  w->start_pass = h->start_pass;
  w->rounds_per_pass = h->rounds_per_pass;
  /* A round run on one host: this rank's doorbell (comm/bell.h). */
  if (h->rounds_per_pass && h->bell_id) strata__bell_open(h->bell_id, w->me + 1);
  if (h->rounds_per_pass && !w->app->round)
    return strata_err_set(STRATA_ECOMM, "worker %d: a round run of an app without rounds", w->me);
  if (h->start_pass < 0 || h->start_pass > w->setup.passes)
    return strata_err_set(STRATA_ECOMM, "worker %d: set-up starts at pass %d of %d", w->me,
                          h->start_pass, w->setup.passes);
  void *meta = NULL, *sched = NULL;
  block_desc *desc = NULL;
  if (h->meta_len) {
    if (!(meta = strata_malloc(h->meta_len))) goto oom;
    if ((rc = recv_idle(t, meta, h->meta_len, TAG_META))) goto fail;
  }
  if (!(sched = strata_malloc(h->sched_len))) goto oom;
  if ((rc = recv_idle(t, sched, h->sched_len, TAG_SCHED))) goto fail;
  if ((rc = strata_schedule_unpack(&w->sched, sched, h->sched_len))) goto fail;
  int nd = h->n_data, nr = h->n_resident, nt = h->n_rotating;
  w->value_len = h->value_len;
  size_t ndesc = (size_t)nd * (h->has_eval ? 2 : 1) + (size_t)nr + (size_t)nt;
  if (!(desc = strata_malloc(ndesc * sizeof *desc))) goto oom;
  if ((rc = recv_idle(t, desc, ndesc * sizeof *desc, TAG_DESC))) goto fail;
  w->data = strata_calloc((size_t)nd, sizeof(strata_block));
  w->eval = strata_calloc((size_t)nd, sizeof(strata_block));
  w->res = strata_calloc((size_t)nr, sizeof(strata_block));
  w->rot = strata_calloc((size_t)nt, sizeof(strata_block));
  if (!w->data || !w->eval || !w->res || !w->rot) goto oom;
  const block_desc *dd = desc, *de = desc + nd, *dr = de + (h->has_eval ? nd : 0), *dt = dr + nr;
  for (int i = 0; i < nd; i++) {
    w->data[i] = (strata_block){NULL, dd[i].len, dd[i].nrows, dd[i].row_bytes};
    if (h->has_eval) w->eval[i] = (strata_block){NULL, de[i].len, de[i].nrows, de[i].row_bytes};
  }
  for (int i = 0; i < nr; i++) w->res[i] = (strata_block){NULL, dr[i].len, dr[i].nrows, dr[i].row_bytes};
  for (int i = 0; i < nt; i++) w->rot[i] = (strata_block){NULL, dt[i].len, dt[i].nrows, dt[i].row_bytes};
  rc = receive_blocks(w);
  if (!rc && h->global.len) {
    if (!(w->global = strata_calloc(1, sizeof *w->global)) ||
        !(w->global->buf = strata_alloc_aligned(h->global.len)))
      goto oom;
    w->global->len = h->global.len;
    w->global->nrows = h->global.nrows;
    w->global->row_bytes = h->global.row_bytes;
    rc = recv_idle(t, w->global->buf, w->global->len, TAG_GLOBAL);
  }
  if (!rc) rc = w->app->worker_init(w->cfg, &w->setup, meta, h->meta_len, &w->state);
  goto fail;
oom:
  rc = strata_err_set(STRATA_ENOMEM, "worker %d: out of memory during set-up", w->me);
fail:
  strata_free(meta);
  strata_free(sched);
  strata_free(desc);
  return rc;
}

static int send_model(strata__worker *w) {
  strata_transport *t = w->t;
  int S = w->sched.n_subepochs, rc = 0;
  for (int i = 0; i < w->sched.n_resident && !rc; i++)
    if (strata_schedule_resident_owner(&w->sched, i) == w->me && w->res[i].len) {
      strata_req rq = {0};
      rc = t->isend(t->impl, w->res[i].buf, w->res[i].len, 0, TAG_EXPORT, &rq);
      if (!rc) rc = strata_comm_wait_idle(t, &rq);
    }
  for (int i = 0; i < w->sched.n_rotating && !rc; i++)
    if (strata_schedule_rotating_holder(&w->sched, i, S - 1) == w->me && w->rot[i].len) {
      strata_req rq = {0};
      rc = t->isend(t->impl, w->rot[i].buf, w->rot[i].len, 0, TAG_EXPORT, &rq);
      if (!rc) rc = strata_comm_wait_idle(t, &rq);
    }
  if (!rc && w->me == 0 && w->global) {
    strata_req rq = {0};
    rc = t->isend(t->impl, w->global->buf, w->global->len, 0, TAG_GLOBAL, &rq);
    if (!rc) rc = strata_comm_wait_idle(t, &rq);
  }
  return rc;
}

/* The worker is through: nothing it does from here can fail the run. */
static int send_done(strata_transport *t) {
  static char none[1];
  strata_req rq = {0};
  int rc = t->isend(t->impl, none, 0, 0, TAG_DONE, &rq);
  if (!rc) rc = strata_comm_wait_idle(t, &rq);
  return rc;
}

static int test_one(void *ctx, int *done, int *progressed) {
  void **c = ctx; /* {transport, request} */
  strata_transport *t = c[0];
  int rc = t->test(t->impl, c[1], done);
  *progressed = *done;
  return rc;
}

/* Ready, then waits for every other worker to be (comm/protocol.h). The
 * wait polls at least every STRATA__WAIT_PROMPT: workers must leave it
 * within about 0.1 ms of each other, or the first one out spends pass 1
 * waiting (a whole pass on a small problem). */
static int start_together(strata_transport *t) {
  char none = 0;
  strata_req rq = {0};
  int rc = t->isend(t->impl, &none, 0, 0, TAG_START, &rq);
  if (!rc) rc = strata_comm_wait_idle(t, &rq);
  if (!rc) rc = t->irecv(t->impl, &none, 0, 0, TAG_START, &rq);
  void *ctx[2] = {t, &rq};
  strata__wait_conf wc = {.ceiling = STRATA__WAIT_PROMPT};
  if (!rc) rc = strata__wait(test_one, ctx, &wc);
  return rc;
}

/* The failure protocol, on this worker's side: tells rank 0 of its own
 * failure (rc) or answers the notice that the run was called off (rc is
 * STRATA_EPEER then), and waits for the verdict. Every outstanding receive
 * has settled first, so once this returns the worker may free anything.
 * Returns the verdict's code with an empty message (rank 0 reports), or rc
 * with this worker's own message when rank 0 had ended the run without it
 * (verdict 0) or could not be reached (then w.blocked is set). */
static int settle(void *ud, int rc) {
  mpi_worker *m = ud;
  if (m->settled) return m->rc;
  m->settled = 1;
  int code = strata__watch_check(m->watch);
  int called_off = code && rc == STRATA_EPEER;
  char own[STRATA__FAIL_MSG];
  snprintf(own, sizeof own, "%s", called_off ? "" : strata_err_msg());
  int err = strata__watch_settle(m->watch);
  double until = strata_now() + STRATA__VERDICT_S;
  if (!err) err = strata__fail_send(m->net, m->w.me, called_off ? 0 : rc, own, until);
  int32_t verdict = 0;
  if (!err) err = strata__verdict_wait(m->net, until, &verdict);
  if (err) {
    /* Rank 0 is out of reach: report here, and let the caller end the job. */
    m->w.blocked = 1;
    if (called_off) {
      m->rc = err;
    } else {
      m->rc = rc;
      strata_err_set(rc, "%s", own);
    }
  } else if (verdict) {
    m->rc = verdict;
    strata_err_clear();
  } else {
    m->rc = rc;
    strata_err_set(rc, "%s", own);
  }
  return m->rc;
}

int strata__worker_main(const strata_app *app, void *cfg, const strata_engine_opts *opts,
                        const strata__backend *backend, const strata_setup *setup,
                        strata_transport *t, int *own_failure) {
  mpi_worker m;
  memset(&m, 0, sizeof m);
  strata__worker *w = &m.w;
  w->backend = backend;
  w->app = app;
  w->cfg = cfg;
  w->opts = opts;
  w->me = t->rank - 1;
  w->setup = *setup;
  w->report = send_report;
  w->ckpt_done = send_ckpt_note;
  w->report_ud = &m;
  w->control = mpi_control;
  w->settle = settle;
  w->round_recv = mpi_round_recv;
  w->round_send = mpi_round_send;
  w->round_ud = &m;
  m.net = t;
  *own_failure = 0;
  int rc = strata__watch_open(t, 0, TAG_ABORT, &m.watch);
  if (rc) {
    /* Without a watch this worker cannot follow a call-off. */
    *own_failure = 1;
    return rc;
  }
  w->t = strata__watch_transport(m.watch);
  /* The coordinator's memory estimate adds up the ranks of each host. */
  host_info hi;
  strata__host_info(&hi);
  strata_req hrq = {0};
  rc = w->t->isend(w->t->impl, &hi, sizeof hi, 0, TAG_HOST, &hrq);
  if (!rc) rc = strata_comm_wait_idle(w->t, &hrq);
  setup_header h;
  memset(&h, 0, sizeof h);
  if (!rc) rc = receive_setup(w, &h);
  if (rc && h.status && rc == h.status) {
    /* The coordinator called the run off before it began (or has no pass
     * to run): nothing is in flight but the notice's receive. */
    strata__watch_free(m.watch);
    strata__worker_close(w);
    return h.status == STRATA__SETUP_NOTHING ? 0 : rc;
  }
  if (!rc) rc = start_together(w->t);
  strata__disrupt *dis = NULL;
  if (!rc && opts->disrupt_prob > 0)
    rc = strata__disrupt_start(opts->disrupt_prob, opts->disrupt_slot_ms,
                               opts->seed * 1000003u + (uint64_t)w->me, &dis);
  if (!rc) rc = strata__worker_loop(w);
  strata__disrupt_stop(dis);
  /* Stopped by the coordinator (the run diverged): nothing to export. */
  if (!rc && opts->model_out && !w->stopped) rc = send_model(w);
  if (!rc) rc = send_done(w->t);
  /* The notice may have come as this worker finished: then it answers. */
  if (!rc) rc = strata__watch_finish(m.watch);
  if (rc) rc = settle(&m, rc);
  strata__bell_close();
  if (w->blocked) {
    *own_failure = 1;
    return rc;
  }
  strata__watch_free(m.watch);
  strata__worker_close(w);
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
