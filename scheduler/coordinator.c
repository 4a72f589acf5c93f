/*
 * The coordinator (rank 0): loads the problem once, computes the static
 * schedule, ships each worker its blocks, then only listens: one report per
 * worker per pass, from which it prints progress and builds the metrics. It
 * is never between two sub-epochs of a worker. Every wait also listens for
 * a worker's failure, and a run that fails once workers depend on this
 * rank is called off (comm/protocol.h, "Failure").
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/bell.h"
#include "core/wait.h"
#include "scheduler/aggregate.h"
#include "scheduler/ckpt.h"
#include "scheduler/coordinator.h"
#include "scheduler/memory.h"
#include "scheduler/rounds.h"
#include "strata/core.h"

/* A growing set of outstanding requests the coordinator waits on at once. */
typedef struct reqset {
  strata_req *r;
  int n;
  size_t cap;
} reqset;

/* A verdict on its way to the workers, sent from a copy of its own: the
 * aggregator's array of verdicts moves as it grows with the passes. */
typedef struct verdict_out {
  pass_control msg;
  strata_req rq[]; /* one send per worker */
} verdict_out;

typedef struct coord {
  const strata__run *run;
  const strata_app *app;
  const void *cfg;
  const strata_engine_opts *opts;
  strata_setup setup;
  strata_problem prob;
  strata_schedule sched;
  strata_run_result *res;
  strata__agg agg;
  strata__ckpt_run ck;
  strata_transport *t;
  verdict_out **sent; /* verdicts whose sends may be outstanding */
  int n_sent;
  size_t cap_sent;
  reqset rx; /* receives outstanding: start messages, reports, export blocks */
  /* The failure protocol: which workers' TAG_FAIL is in, the first failure
   * reported, and the notices and verdicts of a call-off (2P). */
  unsigned char *heard;
  int n_heard;
  int fail_rc;
  char fail_msg[STRATA__FAIL_MSG + 32];
  strata_req *off;
  int32_t off_code;
  int called_off;
} coord;

/* A fresh null slot at the end of the set, or NULL when memory runs out. */
static strata_req *reqset_next(reqset *s) {
  strata_req *nr = strata_grow(s->r, (size_t)s->n + 1, &s->cap, SIZE_MAX, sizeof *nr);
  if (!nr) return NULL;
  s->r = nr;
  s->r[s->n] = (strata_req){0};
  return &s->r[s->n++];
}

static int send_all(strata_transport *t, reqset *rs, const void *buf, size_t len, int dst, int tag) {
  strata_req *rq = reqset_next(rs);
  if (!rq) return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  return t->isend(t->impl, buf, len, dst, tag, rq);
}

static int recv_into(strata_transport *t, reqset *rs, strata_block *b, int src, int tag) {
  strata_req *rq = reqset_next(rs);
  if (!rq) return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  return t->irecv(t->impl, b->buf, b->len, src, tag, rq);
}

/* A worker's failure becomes the run's error: "worker W: its message"
 * (unless the message names the worker already). */
static void record_failure(coord *c, int w, fail_report *f) {
  f->msg[sizeof f->msg - 1] = '\0';
  const char *msg = f->msg[0] ? f->msg : strata_strerror(f->code);
  char prefix[32];
  int n = snprintf(prefix, sizeof prefix, "worker %d:", w);
  if (strncmp(msg, prefix, (size_t)n) == 0)
    snprintf(c->fail_msg, sizeof c->fail_msg, "%s", msg);
  else
    snprintf(c->fail_msg, sizeof c->fail_msg, "worker %d: %s", w, msg);
  c->fail_rc = f->code;
}

/* Takes in every message of `tag` that has come from a worker, each of
 * `size` bytes, handing it to take (worker index, message). 0, or the
 * first error: STRATA_ECOMM (naming `what`) for a message that is not one. */
static int listen(coord *c, int tag, size_t size, const char *what,
                  int (*take)(coord *c, int w, void *msg)) {
  strata_transport *t = c->t;
  for (;;) {
    int got = 0, src = 0;
    void *buf = NULL;
    size_t len = 0;
    int rc = t->poll(t->impl, tag, &got, &src, &buf, &len);
    if (rc || !got) return rc;
    int w = src - 1;
    if (len != size || w < 0 || w >= c->setup.workers)
      rc = strata_err_set(STRATA_ECOMM, "coordinator: %s of %zu bytes from rank %d", what, len, src);
    if (!rc) rc = take(c, w, buf);
    strata_free(buf);
    if (rc) return rc;
  }
}

/* A worker's TAG_FAIL: a report of a failure, or an answer to the notice. */
static int take_failure(coord *c, int w, void *msg) {
  fail_report *f = msg;
  if (!c->heard[w]) {
    c->heard[w] = 1;
    c->n_heard++;
  }
  if (f->code && !c->fail_rc) record_failure(c, w, f);
  return 0;
}

/* A worker's checkpoint part is on disk (each checkpoint is published once
 * all its parts are). */
static int take_ckpt_note(coord *c, int w, void *msg) {
  ckpt_note *n = msg;
  if (n->worker != w)
    return strata_err_set(STRATA_ECOMM, "coordinator: worker %d's checkpoint note names worker %d", w,
                          n->worker);
  return strata__ckpt_note(&c->ck, &c->agg, n);
}

typedef struct coord_wait {
  coord *c;
  strata_req *reqs;
  int n;
  int call_off; /* waiting for the workers' answers, not for reqs alone */
} coord_wait;

static int live(const strata_req *reqs, int n) {
  int k = 0;
  for (int i = 0; i < n; i++) k += reqs[i].h != 0;
  return k;
}

static int poll_coord(void *ctx, int *done, int *progressed) {
  coord_wait *cw = ctx;
  coord *c = cw->c;
  if (c->run->view) c->run->view->tick(c->run->view->ud);
  int before = live(cw->reqs, cw->n) - c->n_heard, all = 1;
  int rc = cw->n ? c->t->test_all(c->t->impl, cw->reqs, cw->n, &all) : 0;
  if (!rc) rc = listen(c, TAG_FAIL, sizeof(fail_report), "a failure report", take_failure);
  if (!rc && !cw->call_off && c->opts->checkpoint_dir)
    rc = listen(c, TAG_CKPT, sizeof(ckpt_note), "a checkpoint note", take_ckpt_note);
  *progressed = live(cw->reqs, cw->n) - c->n_heard < before;
  *done = all && (!cw->call_off || c->n_heard == c->setup.workers);
  if (!rc && !cw->call_off && c->fail_rc) rc = strata_err_set(c->fail_rc, "%s", c->fail_msg);
  return rc;
}

/* The coordinator's waits: the back-off wait, ended by a worker's report
 * of a failure (the run's error then). SIGINT and SIGTERM are the liveness
 * watch's (comm/live.h), which ends the run on every rank itself. */
static int wait_all(coord *c, strata_req *reqs, int n) {
  coord_wait cw = {c, reqs, n, 0};
  strata__wait_conf wc = {.ceiling = STRATA__WAIT_IDLE};
  return strata__wait(poll_coord, &cw, &wc);
}

/* A round run's waits (its steps are its critical path): woken by the
 * doorbell when the ranks have one, else polling at the rounds' ceiling.
 * Signals are the liveness watch's, as for wait_all. */
static strata__wait_conf round_conf(void) {
  int fd = strata__bell_fd();
  return (strata__wait_conf){.ceiling = fd > 0 ? STRATA__WAIT_BELL : STRATA__WAIT_ROUND,
                             .wake_fd = fd > 0 ? fd : 0};
}

static int wait_round(coord *c, strata_req *reqs, int n) {
  coord_wait cw = {c, reqs, n, 0};
  strata__wait_conf wc = round_conf();
  return strata__wait(poll_coord, &cw, &wc);
}

/* Calls the run off (comm/protocol.h, "Failure"): every worker gets the
 * notice (TAG_ABORT, rc), stops and answers; then this rank's own receives
 * settle, and every worker that answered gets the verdict (TAG_FINAL, rc).
 * Returns 0 when every worker answered in time and all settled, so that
 * the job may end without MPI_Abort. Keeps the run's error message. */
static int call_off(coord *c, int rc) {
  strata_transport *t = c->t;
  int P = c->setup.workers, err = 0;
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", strata_err_msg());
  c->off_code = rc;
  for (int w = 0; w < P && !err; w++)
    err = t->isend(t->impl, &c->off_code, sizeof c->off_code, w + 1, TAG_ABORT, &c->off[w]);
  coord_wait cw = {c, c->off, P, 1};
  strata__wait_conf wc = {.ceiling = STRATA__WAIT_PROMPT, .until = strata_now() + STRATA__CALL_OFF_S};
  if (!err) err = strata__wait(poll_coord, &cw, &wc);
  int answered = !err && c->n_heard == P && !live(c->off, P);
  /* Every worker that answered has stopped posting receives: what this
   * rank still sends will never be read, what it receives must settle. */
  if (strata__comm_cancel(t, c->rx.r, c->rx.n, strata_now() + 1)) answered = 0;
  for (int w = 0; w < P && !err; w++)
    if (c->heard[w])
      err = t->isend(t->impl, &c->off_code, sizeof c->off_code, w + 1, TAG_FINAL, &c->off[P + w]);
  cw = (coord_wait){c, c->off + P, P, 0};
  wc.until = strata_now() + STRATA__CALL_OFF_S;
  c->fail_rc = 0; /* the error is rc's now */
  if (!err) err = strata__wait(poll_coord, &cw, &wc);
  if (err || live(c->off + P, P)) answered = 0;
  strata_err_set(rc, "%s", msg);
  return answered ? 0 : STRATA_ECOMM;
}

/* A failure while workers depend on this rank (from shipping until every
 * worker is through, peers_blocked): the run is called off, once.
 * peers_blocked stays set when the call-off fails: the caller ends the
 * job. */
static void fail_run(coord *c, int rc) {
  if (!rc || c->called_off || !c->res->peers_blocked) return;
  c->called_off = 1;
  if (!call_off(c, rc)) c->res->peers_blocked = 0;
}

/* Frees the verdicts whose every send has completed, so the coordinator
 * keeps only those in flight (a few), not one per pass. */
static int reap_verdicts(coord *c) {
  int rc = 0, k = 0;
  for (int i = 0; i < c->n_sent; i++) {
    int all = 0;
    if (!rc) rc = c->t->test_all(c->t->impl, c->sent[i]->rq, c->setup.workers, &all);
    if (!rc && all)
      strata_free(c->sent[i]);
    else
      c->sent[k++] = c->sent[i];
  }
  c->n_sent = k;
  return rc;
}

/* Sends one verdict to every worker (ringing its doorbell, if it has one). */
static int publish(void *ud, const pass_control *v) {
  coord *c = ud;
  int P = c->setup.workers;
  int rc = reap_verdicts(c);
  if (rc) return rc;
  verdict_out **slots = strata_grow(c->sent, (size_t)c->n_sent + 1, &c->cap_sent, SIZE_MAX, sizeof *slots);
  if (slots) c->sent = slots;
  verdict_out *o = slots ? strata_calloc(1, sizeof *o + (size_t)P * sizeof *o->rq) : NULL;
  if (!o) return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  o->msg = *v;
  c->sent[c->n_sent++] = o;
  for (int w = 0; w < P && !rc; w++) {
    rc = c->t->isend(c->t->impl, &o->msg, sizeof o->msg, w + 1, TAG_CONTROL, &o->rq[w]);
    strata__bell_ring(w + 1);
  }
  return rc;
}

/* Waits until every worker is set up, then lets them all begin (protocol.h). */
static int start_together(coord *c, int P) {
  static char none[1];
  strata_transport *t = c->t;
  reqset rs = {0};
  int rc = 0;
  c->rx.n = 0;
  for (int w = 0; w < P && !rc; w++) {
    strata_req *rq = reqset_next(&c->rx);
    rc = rq ? t->irecv(t->impl, none, 0, w + 1, TAG_START, rq)
            : strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  }
  if (!rc) rc = wait_all(c, c->rx.r, c->rx.n);
  for (int w = 0; w < P && !rc; w++) rc = send_all(t, &rs, none, 0, w + 1, TAG_START);
  if (!rc) rc = wait_all(c, rs.r, rs.n);
  strata_free(rs.r);
  return rc;
}

/* Tells every worker the run failed before it began, so all ranks end. */
void strata__coordinator_fail(strata_transport *t, int code) {
  setup_header h;
  memset(&h, 0, sizeof h);
  h.status = code;
  int P = t->size - 1;
  strata_req reqs[P > 0 ? P : 1];
  for (int w = 0; w < P; w++) {
    reqs[w] = (strata_req){0};
    t->isend(t->impl, &h, sizeof h, w + 1, TAG_HEADER, &reqs[w]);
  }
  strata_comm_wait_all_idle(t, reqs, P);
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
    int n = strata__setup_blocks(&c->sched, w, c->run->facts->all_rotating, p->data, p->eval,
                                 p->resident, p->rotating, list, &total);
    char *bundle = strata_malloc(total ? total : 1);
    if (!bundle) {
      rc = strata_err_set(STRATA_ENOMEM, "coordinator: out of memory for worker %d's blocks", w);
      break;
    }
    bundles[w] = bundle;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
      /* A resumed worker gets back its own copy where it kept one. */
      const void *src = list[i]->buf;
      if (c->ck.rot_of && list[i] >= p->rotating && list[i] < p->rotating + p->n_rotating) {
        void *own = c->ck.rot_of[(size_t)w * (size_t)p->n_rotating + (size_t)(list[i] - p->rotating)];
        if (own) src = own;
      }
      memcpy(bundle + off, src, list[i]->len);
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
    const void *g = c->ck.global_of && c->ck.global_of[w] ? c->ck.global_of[w] : p->global.buf;
    if (!rc && p->global.len) rc = send_all(t, &rs, g, p->global.len, dst, TAG_GLOBAL);
  }
  if (!rc) rc = wait_all(c, rs.r, rs.n);
  /* Workers may still be reading the bundles: they stop first. */
  fail_run(c, rc);
  if (rc && c->res->peers_blocked) {
    strata_free(rs.r);
    strata_free(list);
    return rc; /* the job ends at once: keep what may still be read */
  }
  strata_free(rs.r);
  for (int w = 0; bundles && w < P; w++) strata_free(bundles[w]);
  strata_free(bundles);
  strata_free(list);
  return rc;
}

static int load_checked(coord *c) {
  int rc = c->app->load(c->cfg, &c->setup, &c->prob);
  if (rc) return rc;
  if (c->prob.n_examples == 0) return strata_err_set(STRATA_EEMPTY, "no training examples");
  rc = c->app->schedule(c->cfg, &c->setup, &c->prob, &c->sched);
  if (rc) return rc;
  if (c->sched.n_workers != c->setup.workers || c->sched.n_data != c->prob.n_data ||
      c->sched.n_resident != c->prob.n_resident || c->sched.n_rotating != c->prob.n_rotating)
    return strata_err_set(STRATA_ESCHED, "%s: schedule does not match the problem's blocks",
                          c->app->name);
  /* A worker with no task only waits: say so, once. */
  for (int w = 0; w < c->sched.n_workers; w++) {
    int n = 0, k;
    for (int s = 0; s < c->sched.n_subepochs; s++) {
      strata_schedule_tasks(&c->sched, s, w, &k);
      n += k;
    }
    if (!n)
      strata_log(STRATA_LOG_WARN,
                 "%s: the schedule gives worker %d no task: it will only wait (fewer workers, or "
                 "more blocks, would use it)",
                 c->app->name, w);
  }
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
  return c->run->check ? c->run->check(c->opts, c->app, &c->setup, p, &c->sched) : 0;
}

int strata__coordinator_load(const strata__run *run, strata_problem *prob, strata_schedule *sched) {
  coord cc = {.run = run, .app = run->app, .cfg = run->cfg, .opts = run->opts, .setup = run->setup};
  coord *c = &cc;
  int rc = run->check ? run->check(run->opts, run->app, &run->setup, NULL, NULL) : 0;
  if (!rc) rc = load_checked(c);
  if (!rc && run->check_keys) rc = run->check_keys(run->app, run->cfg, &c->prob);
  *prob = c->prob;
  *sched = c->sched;
  return rc;
}

static int export_model(coord *c) {
  if (!c->setup.model_out || !c->app->export_model) return 0;
  return c->app->export_model(c->cfg, &c->setup, &c->prob, c->setup.model_out);
}

/* Every rank's host and its memory (rank 0's measured before loading),
 * then the estimate of what each host's ranks will hold. */
static int check_memory(coord *c, host_info *hosts) {
  strata_transport *t = c->t;
  int P = c->setup.workers, rc = 0;
  strata_req *rq = strata_calloc((size_t)P, sizeof *rq);
  if (!rq) return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  for (int w = 0; w < P && !rc; w++)
    rc = t->irecv(t->impl, &hosts[w + 1], sizeof *hosts, w + 1, TAG_HOST, &rq[w]);
  if (!rc) rc = wait_all(c, rq, P);
  strata_free(rq);
  /* What rank 0 holds now, the problem loaded. */
  host_info now;
  strata__host_info(&now);
  hosts[0].rss = now.rss;
  if (!rc)
    rc = strata__mem_check(c->app, c->opts, c->run->facts, &c->prob, &c->sched, hosts,
                           c->opts->mem_limit);
  return rc;
}

/* Round runs: the pushes that have come, taken into the rounds' state. A
 * wait on the pushes of round `awaited` (awaited -1: on the step's sends,
 * reqs[0..n), the pushes taken meanwhile). */
typedef struct push_wait {
  coord *c;
  strata__rounds *R;
  int64_t awaited;
  strata_req *reqs;
  int n;
} push_wait;

static int poll_pushes(void *ctx, int *done, int *progressed) {
  push_wait *pw = ctx;
  coord *c = pw->c;
  strata_transport *t = c->t;
  int rc = 0, sent = 1, sends_progressed = 0;
  *progressed = 0;
  for (;;) {
    int got = 0, src = 0;
    void *buf = NULL;
    size_t len = 0;
    if ((rc = t->poll(t->impl, TAG_PUSH, &got, &src, &buf, &len)) || !got) break;
    int w = src - 1;
    rc = w >= 0 && w < c->setup.workers
             ? strata__rounds_take(pw->R, w, buf, len)
             : strata_err_set(STRATA_ECOMM, "coordinator: a push from rank %d", src);
    strata_free(buf);
    *progressed = 1;
    if (rc) break;
  }
  /* Failure reports and checkpoint notes, as in every wait; the step's
   * sends when they are what is awaited. */
  coord_wait cw = {c, pw->reqs, pw->n, 0};
  if (!rc) rc = poll_coord(&cw, &sent, &sends_progressed);
  *progressed |= sends_progressed;
  *done = !rc && (pw->awaited < 0 ? sent : strata__rounds_complete(pw->R, pw->awaited));
  return rc;
}

/* One pass of a round run: the state machine's steps go out, its pushes
 * come in, until the pass's last step; the reports follow as in every run. */
static int round_pass(coord *c, strata__rounds *R, int pass, reqset *sends) {
  strata_transport *t = c->t;
  int P = c->setup.workers, rc = 0;
  strata__rounds_begin_pass(R, pass);
  for (;;) {
    int a = strata__rounds_next(R);
    if (a < 0) return a;
    if (a == STRATA__ROUNDS_DONE) return 0;
    strata__wait_conf wc = round_conf();
    if (a == STRATA__ROUNDS_SEND) {
      /* The step's buffers are reused for the next one: its sends must be
       * done first (an eager send of a small step is done at once). The
       * pushes of the rounds in flight are taken meanwhile: a worker whose
       * push is too large to go eagerly (MPI's rendezvous) is done sending
       * it only once this rank receives it, and receives no step before,
       * so with rounds in flight (--round-depth > 1) a send of the step
       * that waited for that worker alone would wait for ever. */
      sends->n = 0;
      for (int w = 0; w < P && !rc; w++) {
        rc = send_all(t, sends, R->msg[w].buf, R->msg[w].len, w + 1, TAG_ROUND);
        strata__bell_ring(w + 1);
      }
      push_wait pw = {c, R, -1, sends->r, sends->n};
      if (!rc) rc = strata__wait(poll_pushes, &pw, &wc);
      if (rc) return rc;
      continue;
    }
    push_wait pw = {c, R, R->awaited, NULL, 0};
    if ((rc = strata__wait(poll_pushes, &pw, &wc))) return rc;
  }
}

/* Whether every rank runs on rank 0's host. */
static int one_host(const host_info *hosts, int P) {
  for (int w = 1; w <= P; w++)
    if (strncmp(hosts[w].name, hosts[0].name, sizeof hosts[0].name)) return 0;
  return 1;
}

static int run_coordinator(coord *c, strata_transport *t) {
  strata_problem *p = &c->prob;
  void *sched_buf = NULL;
  size_t sched_len = 0;
  block_desc *desc = NULL;
  pass_report *reps = NULL;
  int P = c->setup.workers;
  double t0 = strata_now();
  strata__rounds R; /* a round run's state (strata/round.h) */
  memset(&R, 0, sizeof R);
  reqset steps = {0};
  host_info *hosts = strata_calloc((size_t)P + 1, sizeof *hosts);
  if (hosts) strata__host_info(&hosts[0]);
  /* A resume refused for its settings costs no loading. */
  int rc = hosts ? 0 : strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  if (!rc) rc = strata__ckpt_open(&c->ck, c->app, c->opts, &c->setup, c->run->facts);
  if (!rc) rc = strata__coordinator_load(c->run, &c->prob, &c->sched);
  if (!rc) rc = strata__ckpt_loaded(&c->ck, &c->prob, &c->sched, &c->agg);
  if (!rc) rc = check_memory(c, hosts);
  /* A round run on one host: every rank gets a doorbell (comm/bell.h). */
  uint64_t bell_id = 0;
  if (!rc && c->prob.rounds_per_pass && one_host(hosts, P)) {
    bell_id = strata__bell_new_id();
    if (strata__bell_open(bell_id, 0) < 0) bell_id = 0;
  }
  strata_free(hosts);
  if (!rc) rc = strata_schedule_pack(&c->sched, &sched_buf, &sched_len);
  if (rc) {
    strata__coordinator_fail(t, rc);
    goto done;
  }
  c->res->load_s = strata_now() - t0;
  /* A round run's coordinator sums every pass before the next one's first
   * round: pass k's verdict follows pass k - 1. */
  if (p->rounds_per_pass) c->agg.lag = 1;
  c->res->rounds_per_pass = p->rounds_per_pass;
  if (c->ck.start_pass == c->setup.passes) {
    /* Resumed with nothing left to run: the checkpoint's model and
     * metrics are the run's; the workers end at once. */
    strata__coordinator_fail(t, STRATA__SETUP_NOTHING);
    c->res->workers_done = 1;
    strata__agg_start(&c->agg);
    rc = strata__agg_finish(&c->agg);
    if (!rc) rc = export_model(c);
    goto done;
  }

  setup_header h;
  memset(&h, 0, sizeof h);
  h.has_eval = p->eval != NULL;
  h.start_pass = c->ck.start_pass;
  h.n_data = p->n_data;
  h.n_resident = p->n_resident;
  h.n_rotating = p->n_rotating;
  h.meta_len = p->meta_len;
  h.sched_len = sched_len;
  h.n_examples = p->n_examples;
  h.global = (block_desc){p->global.len, p->global.nrows, p->global.row_bytes};
  h.rounds_per_pass = p->rounds_per_pass;
  h.bell_id = bell_id;
  h.value_len = p->value_len;
  size_t nd = (size_t)p->n_data, ndesc = nd * (h.has_eval ? 2 : 1) + (size_t)p->n_resident +
                                         (size_t)p->n_rotating;
  desc = strata_malloc(ndesc * sizeof *desc);
  /* What a call-off needs is there before any worker depends on this
   * rank: calling a run off allocates nothing (it may be out of memory). */
  c->heard = strata_calloc((size_t)P, 1);
  c->off = strata_calloc(2 * (size_t)P, sizeof *c->off);
  reps = strata_malloc((size_t)P * sizeof *reps);
  int room = 1;
  for (int w = 0; w < P && room; w++) room = reqset_next(&c->rx) != NULL;
  c->rx.n = 0;
  if (!desc || !c->heard || !c->off || !reps || !room) {
    rc = strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
    strata__coordinator_fail(t, rc);
    goto done;
  }
  size_t k = 0;
  for (size_t i = 0; i < nd; i++) desc[k++] = (block_desc){p->data[i].len, p->data[i].nrows, p->data[i].row_bytes};
  for (size_t i = 0; i < nd && h.has_eval; i++) desc[k++] = (block_desc){p->eval[i].len, p->eval[i].nrows, p->eval[i].row_bytes};
  for (int i = 0; i < p->n_resident; i++) desc[k++] = (block_desc){p->resident[i].len, p->resident[i].nrows, p->resident[i].row_bytes};
  for (int i = 0; i < p->n_rotating; i++) desc[k++] = (block_desc){p->rotating[i].len, p->rotating[i].nrows, p->rotating[i].row_bytes};

  double t1 = strata_now();
  if (c->run->view) c->run->view->phase(c->run->view->ud, STRATA__PHASE_SHIPPING, &c->agg);
  /* From here until every worker is through, workers depend on this rank. */
  c->res->peers_blocked = 1;
  if ((rc = ship(c, t, sched_buf, sched_len, desc, &h))) goto done;
  if ((rc = start_together(c, P))) goto done;
  if ((rc = strata__agg_decide_first(&c->agg))) goto done;
  c->res->setup_s = strata_now() - t1;
  R = (strata__rounds){.app = c->app, .cfg = c->cfg, .prob = p, .sched = &c->sched,
                       .depth = c->opts->round_depth, .stats = &c->res->rounds};
  if (p->rounds_per_pass && ((rc = strata__rounds_open(&R, c->agg.start_pass)) ||
                             (rc = strata__rounds_trace_open(&R, c->opts->round_trace))))
    goto done;
  strata__agg_start(&c->agg);
  if (c->run->view) c->run->view->phase(c->run->view->ud, STRATA__PHASE_RUNNING, &c->agg);
  for (int pass = c->agg.start_pass; pass < c->agg.run_passes && !rc; pass++) {
    if (p->rounds_per_pass) {
      if ((rc = round_pass(c, &R, pass, &steps))) break;
      if ((rc = strata__agg_reserve(&c->agg, pass + 1))) break;
      strata__rounds_pass_stats(&R, &c->res->per_pass[pass].rounds,
                                &c->res->per_pass[pass].round_latency_s);
      if (R.converged) strata__agg_end(&c->agg, pass, "tolerance");
    }
    c->rx.n = 0;
    for (int w = 0; w < P && !rc; w++)
      rc = t->irecv(t->impl, &reps[w], sizeof reps[w], w + 1, TAG_REPORT, reqset_next(&c->rx));
    if (!rc) rc = p->rounds_per_pass ? wait_round(c, c->rx.r, c->rx.n) : wait_all(c, c->rx.r, c->rx.n);
    for (int w = 0; w < P && !rc; w++) rc = strata__agg_report(&c->agg, &reps[w]);
  }
  /* Every verdict has been taken: a worker takes each before its pass. */
  for (int i = 0; i < c->n_sent && !rc; i++) rc = wait_all(c, c->sent[i]->rq, P);
  if (rc) goto done;
  /* A stopped run (it diverged) exports nothing; its workers end alike. */
  int verdict = strata__agg_finish(&c->agg);
  c->rx.n = 0;
  if (!verdict && c->setup.model_out) {
    int S = c->sched.n_subepochs;
    for (int w = 0; w < P && !rc; w++) {
      for (int i = 0; i < p->n_resident && !rc; i++)
        if (strata_schedule_resident_owner(&c->sched, i) == w && p->resident[i].len)
          rc = recv_into(t, &c->rx, &p->resident[i], w + 1, TAG_EXPORT);
      for (int i = 0; i < p->n_rotating && !rc; i++)
        if (strata_schedule_rotating_holder(&c->sched, i, S - 1) == w && p->rotating[i].len)
          rc = recv_into(t, &c->rx, &p->rotating[i], w + 1, TAG_EXPORT);
    }
    if (!rc && p->global.len) rc = recv_into(t, &c->rx, &p->global, 1, TAG_GLOBAL);
  }
  /* Each worker's last message: until then it may still fail (leaving the
   * tables, say), and its peers may wait for it. */
  static char none[1];
  for (int w = 0; w < P && !rc; w++) {
    strata_req *rq = reqset_next(&c->rx);
    rc = rq ? t->irecv(t->impl, none, 0, w + 1, TAG_DONE, rq)
            : strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  }
  if (!rc) rc = wait_all(c, c->rx.r, c->rx.n);
  if (rc) goto done;
  c->res->peers_blocked = 0;
  c->res->workers_done = 1;
  rc = verdict ? verdict : strata__ckpt_finish(&c->ck);
  if (!rc) rc = export_model(c);
done:
  fail_run(c, rc);
  strata_free(sched_buf);
  strata_free(desc);
  /* Reports may still land there, and steps still be read, when the job
   * could not be ended cleanly (the caller ends it at once). */
  if (!(rc && c->res->peers_blocked)) {
    strata_free(reps);
    if (R.app) {
      strata__rounds_trace_close(&R, !rc);
      strata__rounds_close(&R);
    }
    strata_free(steps.r);
  }
  strata__bell_close();
  return rc;
}

int strata__coordinator_run(const strata__run *run, strata_transport *t, strata_run_result *result) {
  coord c = {.run = run, .app = run->app, .cfg = run->cfg, .opts = run->opts,
             .setup = run->setup, .res = result, .t = t};
  c.agg = (strata__agg){.app = run->app,
                        .cfg = run->cfg,
                        .opts = run->opts,
                        .setup = run->setup,
                        .prob = &c.prob,
                        .res = result,
                        .facts = run->facts,
                        .lag = run->facts->lag,
                        .publish = publish,
                        .publish_ud = &c,
                        .summed = strata__ckpt_summed,
                        .summed_ud = &c.ck,
                        .view = run->view};
  int rc = strata__agg_open(&c.agg);
  if (rc) strata__coordinator_fail(t, rc);
  else rc = run_coordinator(&c, t);
  strata_schedule_close(&c.sched);
  strata__agg_close(&c.agg);
  strata__ckpt_close(&c.ck);
  /* MPI may still read a verdict when the job could not be ended cleanly
   * (the caller ends it at once). */
  if (!(rc && result->peers_blocked))
    for (int i = 0; i < c.n_sent; i++) strata_free(c.sent[i]);
  strata_free(c.sent);
  strata_free(c.rx.r);
  strata_free(c.heard);
  strata_free(c.off);
  result->problem = c.prob;
  return rc;
}
