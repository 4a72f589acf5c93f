/*
 * The sfb back-end: sufficient factor broadcasting (strata/sf.h; the seed's
 * section 3). Every worker holds a replica of the app's matrix W, its one
 * rotating block. A clock is one task (a minibatch): acquire brings the
 * replica up to date under the staleness rule, the app's compute emits the
 * clock's factors, and release sends them, as one message, to each of this
 * worker's out-peers (worker/sfb_topology.h: every other worker, or Q of
 * them) and keeps them for its own replica. Nothing passes through the
 * coordinator or a server.
 *
 * Relays. Under partial broadcast a set must still reach every replica, or
 * each replica would sum the updates of its in-peers only and the replicas
 * would never agree again: their disagreement is a mode that gradient steps
 * need not damp (with P = 4, Q = 2 the matrix of who applies whose updates
 * has eigenvalues +-i/4, a mode that grows at any step size). So each set
 * travels along its origin's tree of strata__topology_routes: a worker that
 * takes in a set passes it on at once, as it came (the same bytes, no
 * copy), to the out-peers the tree hangs below it. Every worker gets every
 * set exactly once, from one fixed neighbour, so one origin's sets come in
 * clock order, as MPI keeps one sender's messages in order. A worker relays
 * what it takes in before it sends its own set of a later clock, so a
 * worker that has an in-peer's set of clock c also has every set that
 * in-peer had taken in before it started clock c.
 *
 * The rule, before clock g: this worker's own sets of clocks <= g - 1 have
 * been applied, and every set of clocks <= g - 1 - s from each in-peer
 * (s = --staleness; the receive waits for it). A set of clock t from an
 * origin d hops away is due at clock t + d: it is applied as the first clock
 * from then on starts at which it has arrived, never sooner, so under s = 0
 * each set is applied at the clock it is due (or at its pass's end, below)
 * whatever the timing, and runs repeat bit for bit. By the relay order above it has arrived before clock
 * t + d (s + 1): a delay of at most tau (s + 1) - 1 clocks (s under full
 * broadcast, where d = 1). None of a clock >= g is applied: a peer up to s
 * clocks ahead does not hand this replica its future (the seed's
 * tau_p^q(c) <= c - 1). Sets are applied clock by clock, within a clock in
 * worker (origin) order, then the app's clock_end step; a set applied
 * after its clock was closed goes in the same sweep. So with s = 0 and full
 * broadcast every replica performs the same float operations in the same
 * order and the replicas are equal bit for bit at every clock end.
 *
 * A pass ends by applying what the next clock's start would (the model it
 * is scored on). Every pass under s = 0, and the last pass and one before a
 * checkpoint under any s, first waits for every set of the pass from every
 * origin and applies them all, due or not, so the replica that is scored,
 * checkpointed or exported holds every factor of the pass (under partial
 * broadcast the replicas then differ only in the order of their float
 * additions).
 */
#include <math.h>
#include <sched.h>
#include <string.h>

#include "core/prom.h"
#include "core/sf.h"
#include "core/wait.h"
#include "strata/core.h"
#include "worker/backend.h"
#include "worker/sfb.h"
#include "worker/sfb_topology.h"

typedef strata__sfb_settings sfb_settings;
typedef strata__sfb_stats sfb_stats;

static sfb_settings settings_of(const strata_engine_opts *o) {
  sfb_settings s;
  memcpy(&s, &o->mode_settings, sizeof s);
  return s;
}

/* A pass's figures (strata_pass_stats.mode_stats[0]): worker 0's drift. */
typedef struct sfb_pass {
  double drift;
  uint32_t drift_rows, measured;
} sfb_pass;
_Static_assert(sizeof(sfb_pass) <= STRATA_MODE_PASS_STATS, "sfb_pass does not fit");

/* One of this worker's own factor sets: sent to every out-peer and
 * applied to the replica at the next clock's start. */
typedef struct own_set {
  strata_sf_factors f;
  strata_req *reqs; /* one send per out-peer */
  int64_t clock;    /* -1: the slot is free */
  int applied;
} own_set;

/* A set received from a peer, waiting to be applied; relayed sets stay
 * (in the queue, then in the relaying list) until their sends complete. */
typedef struct in_set {
  void *buf;
  size_t len;
  int64_t clock;
  strata_req *reqs; /* one send per relay target; NULL: none */
  int n_reqs;
} in_set;

/* A FIFO per origin: each origin's sets come through one neighbour, and
 * MPI keeps one sender's messages of one tag in order, so clocks come in
 * ascending. */
typedef struct in_queue {
  in_set *v;
  size_t head, n, cap;
} in_queue;

typedef struct sfb {
  strata__worker *w;
  strata_block *W;
  uint32_t J, D;
  int P, me, Q, s;
  int *out, *in; /* out-peers (Q), in-peers (n_in) */
  int n_in;
  int *via;   /* via[o]: the in-peer origin o's sets come through (-1: o == me) */
  int *hops;  /* hops[o]: o's distance to this worker; its set of clock t is due
                 at clock t + hops[o] */
  int *kids;  /* kids[o * Q + j], j < n_kids[o]: the out-peers o's sets go on to */
  int *n_kids;
  in_set *relaying; /* applied sets whose relays are still being sent */
  size_t n_relaying, cap_relaying;
  int64_t clock;   /* clocks ended so far: the task under way is this clock */
  int per_pass;    /* clocks (tasks) per pass */
  int64_t next;    /* the lowest clock whose clock_end has not run */
  int64_t *have;   /* have[o]: the latest clock received from origin o (-1 none) */
  in_queue *queue; /* per origin */
  own_set *own;
  int n_own;
  strata_worker_stats *st; /* the pass under way's stats */
  sfb_stats fst;           /* ... and its own figures, handed over at its end */
  int check_replicas;
  uint64_t digest;         /* --check-replicas: this pass's digest */
  int digest_any;
  /* drift: worker 0 gathers an even sample of every replica's rows */
  uint32_t drift_stride, drift_rows;
  float *drift_mine, *drift_all; /* rows x J; worker 0: P of them */
  strata_req *drift_reqs; /* P */
} sfb;

static void set_free(in_set *e) {
  strata_free(e->buf);
  strata_free(e->reqs);
}

static void queue_free(in_queue *q) {
  for (size_t i = 0; i < q->n; i++) set_free(&q->v[(q->head + i) % q->cap]);
  strata_free(q->v);
  memset(q, 0, sizeof *q);
}

static int queue_push(in_queue *q, in_set e) {
  if (q->n == q->cap) {
    size_t cap = q->cap ? 2 * q->cap : 8;
    in_set *v = strata_malloc(cap * sizeof *v);
    if (!v) return STRATA_ENOMEM;
    for (size_t i = 0; i < q->n; i++) v[i] = q->v[(q->head + i) % q->cap];
    strata_free(q->v);
    q->v = v;
    q->head = 0;
    q->cap = cap;
  }
  q->v[(q->head + q->n++) % q->cap] = e;
  return 0;
}

static in_set *queue_front(in_queue *q) { return q->n ? &q->v[q->head] : NULL; }

/* The front set, applied, leaves the queue: freed, or kept in the
 * relaying list while its relays are being sent. */
static int queue_pop(sfb *b, in_queue *q) {
  in_set e = q->v[q->head];
  q->head = (q->head + 1) % q->cap;
  q->n--;
  int all = 1;
  if (e.n_reqs) {
    int rc = b->w->t->test_all(b->w->t->impl, e.reqs, e.n_reqs, &all);
    if (rc) {
      set_free(&e);
      return rc;
    }
  }
  if (all) {
    set_free(&e);
    return 0;
  }
  if (b->n_relaying == b->cap_relaying) {
    size_t cap = b->cap_relaying ? 2 * b->cap_relaying : 8;
    in_set *v = strata_realloc(b->relaying, cap * sizeof *v);
    if (!v) {
      /* The sends still read the buffer: wait for them rather than free it
       * under them. */
      int rc = strata_comm_wait_all_idle(b->w->t, e.reqs, e.n_reqs);
      set_free(&e);
      return rc ? rc : strata_err_set(STRATA_ENOMEM, "worker %d: out of memory for relays", b->me);
    }
    b->relaying = v;
    b->cap_relaying = cap;
  }
  b->relaying[b->n_relaying++] = e;
  return 0;
}

/* FNV-1a over bytes, continuing from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* Passes a set just taken in on to the out-peers below this worker in its
 * origin's tree, before anything else is sent. */
static int relay(sfb *b, int o, in_set *e) {
  strata_transport *t = b->w->t;
  int n = b->n_kids[o];
  if (!n) return 0;
  if (!(e->reqs = strata_calloc((size_t)n, sizeof *e->reqs)))
    return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory for relays", b->me);
  e->n_reqs = n;
  int rc = 0;
  for (int j = 0; j < n && !rc; j++) {
    rc = t->isend(t->impl, e->buf, e->len, b->kids[o * b->Q + j] + 1, TAG_SFB, &e->reqs[j]);
    if (!rc) b->st->bytes_sent += e->len;
  }
  return rc;
}

/* Takes in every factor message that has arrived, relaying each. */
static int receive(sfb *b) {
  strata_transport *t = b->w->t;
  for (;;) {
    int got = 0, src = 0;
    void *buf = NULL;
    size_t len = 0;
    int rc = t->poll(t->impl, TAG_SFB, &got, &src, &buf, &len);
    if (rc || !got) return rc;
    rc = strata__sf_check(buf, len, b->J, b->D);
    const strata__sf_head *h = buf;
    int o = rc ? -1 : h->sender;
    /* Origin o's sets come only through via[o], each clock once, in order. */
    if (!rc && (o < 0 || o >= b->P || o == b->me || b->via[o] != src - 1 ||
                h->clock != b->have[o] + 1))
      rc = strata_err_set(STRATA_ECOMM, "worker %d: factors of worker %d from rank %d out of order",
                          b->me, o, src);
    in_set e = {buf, len, rc ? 0 : h->clock, NULL, 0};
    if (!rc) rc = relay(b, o, &e);
    if (!rc && queue_push(&b->queue[o], e))
      rc = strata_err_set(STRATA_ENOMEM, "worker %d: out of memory for factors", b->me);
    if (rc) {
      /* Relays already started read the buffer. */
      if (e.n_reqs) strata_comm_wait_all_idle(t, e.reqs, e.n_reqs);
      set_free(&e);
      return rc;
    }
    b->have[o] = h->clock;
    b->st->bytes_recv += len;
  }
}

/* Frees own sets whose sends are done and that the replica has, and
 * applied sets whose relays are done. */
static int progress_sends(sfb *b) {
  strata_transport *t = b->w->t;
  for (size_t i = 0; i < b->n_relaying;) {
    in_set *e = &b->relaying[i];
    int all = 1;
    int rc = t->test_all(t->impl, e->reqs, e->n_reqs, &all);
    if (rc) return rc;
    if (all) {
      set_free(e);
      *e = b->relaying[--b->n_relaying];
    } else {
      i++;
    }
  }
  for (int i = 0; i < b->n_own; i++) {
    own_set *o = &b->own[i];
    if (o->clock < 0) continue;
    int all = 1;
    if (t && b->Q) {
      int rc = t->test_all(t->impl, o->reqs, b->Q, &all);
      if (rc) return rc;
    }
    if (all && o->applied) o->clock = -1;
  }
  return 0;
}

static own_set *own_of(sfb *b, int64_t clock) {
  for (int i = 0; i < b->n_own; i++)
    if (b->own[i].clock == clock) return &b->own[i];
  return NULL;
}

/* Whether every in-peer's own sets of clocks <= upto are in (every
 * origin's: all). */
static int arrived(const sfb *b, int64_t upto, int all) {
  if (all) {
    for (int o = 0; o < b->P; o++)
      if (o != b->me && b->have[o] < upto) return 0;
    return 1;
  }
  for (int i = 0; i < b->n_in; i++)
    if (b->have[b->in[i]] < upto) return 0;
  return 1;
}

typedef struct wait_ctx {
  sfb *b;
  int64_t upto;
  int all;
} wait_ctx;

static int64_t have_sum(const sfb *b) {
  int64_t n = 0;
  for (int o = 0; o < b->P; o++) n += b->have[o];
  return n;
}

static int poll_sets(void *ctx, int *done, int *progressed) {
  wait_ctx *c = ctx;
  int64_t before = have_sum(c->b);
  int rc = receive(c->b);
  if (!rc) rc = progress_sends(c->b);
  *progressed = have_sum(c->b) != before;
  *done = arrived(c->b, c->upto, c->all);
  return rc;
}

/* Polls until poll says done. Waits here are on the critical path of a
 * clock (and of a pass's end, which the next clock's peers wait for), and a
 * sleep of the back-off wait lasts a millisecond or more however short it
 * is asked to be, so the wait first polls without sleeping, yielding the
 * core between polls (with more workers than cores, the peer it waits for
 * may need it); only a wait longer than SPIN_S falls back to sleeping.
 * The time goes to *waited. */
#define SPIN_S 2e-3
static int wait_until(strata__poll_fn poll, void *ctx, double *waited) {
  double t0 = strata_now();
  int rc = 0, done = 0, progressed;
  strata__wait_enter();
  while (!rc && !done && strata_now() - t0 < SPIN_S) {
    rc = poll(ctx, &done, &progressed);
    if (!rc && !done) sched_yield();
  }
  if (!rc && !done) {
    strata__wait_conf wc = {.ceiling = STRATA__WAIT_PROMPT};
    rc = strata__wait(poll, ctx, &wc);
  }
  strata__wait_leave();
  *waited += strata_now() - t0;
  return rc;
}

/* Receives until every in-peer's sets up to clock upto are in (every
 * origin's: all). */
static int wait_for(sfb *b, int64_t upto, int all) {
  int rc = receive(b);
  if (rc || upto < 0 || arrived(b, upto, all)) return rc;
  wait_ctx c = {b, upto, all};
  return wait_until(poll_sets, &c, &b->st->wait_s);
}

static void apply_set(sfb *b, const void *buf, size_t len) {
  const strata_sf_ops *sf = b->w->app->sf;
  strata__sf_apply_all(buf, len, b->W, sf->apply, b->w->state);
}

/* A peer's set of clock t applied while clocks <= limit are due: its delay. */
static void count_set(sfb *b, int q, const void *buf, int64_t t, int64_t limit) {
  const strata__sf_head *h = buf;
  sfb_stats *st = &b->fst;
  int64_t d = limit - t;
  st->sets_in++;
  st->factors_in += h->n;
  st->delay_sum += (uint64_t)d * h->n;
  if (d > st->delay_max) st->delay_max = (int32_t)d;
  st->delay_hist[d < STRATA_TABLE_HIST - 1 ? d : STRATA_TABLE_HIST - 1] += h->n;
  st->from_mask |= q < 64 ? 1ull << q : 0;
}

/* Applies every set that has arrived of clocks <= limit and is due by the
 * clock after limit (all: due or not), clock by clock and in worker order
 * within a clock, running clock_end once for each clock from `next` to
 * limit. */
static int apply_upto(sfb *b, int64_t limit, int all) {
  strata__worker *w = b->w;
  const strata_sf_ops *sf = w->app->sf;
  double t0 = strata_now();
  int64_t from = b->next;
  for (int q = 0; q < b->P; q++) {
    in_set *e = q == b->me ? NULL : queue_front(&b->queue[q]);
    if (e && e->clock < from) from = e->clock;
  }
  int rc = 0;
  for (int64_t t = from; t <= limit && !rc; t++) {
    for (int q = 0; q < b->P && !rc; q++) {
      if (q == b->me) {
        own_set *o = t >= b->next ? own_of(b, t) : NULL;
        if (o && !o->applied) {
          apply_set(b, o->f.buf, o->f.len);
          o->applied = 1;
        }
        continue;
      }
      in_set *e = queue_front(&b->queue[q]);
      /* Not before it is due: with staleness 0 every replica then applies
       * each set at one clock, whatever the timing, and runs repeat. */
      if (!e || e->clock != t || (!all && t + b->hops[q] - 1 > limit)) continue;
      apply_set(b, e->buf, e->len);
      count_set(b, q, e->buf, t, limit);
      rc = queue_pop(b, &b->queue[q]);
    }
    if (rc || t < b->next) continue;
    if (sf->clock_end) {
      strata_sf_clock ck = {.pass = (int)(t / b->per_pass), .clock = t, .share = 1.0};
      rc = sf->clock_end(w->state, b->W, &ck);
    }
    if (b->check_replicas) {
      b->digest = fnv(b->digest_any ? b->digest : 0xcbf29ce484222325ull, b->W->buf, b->W->len);
      b->digest_any = 1;
    }
  }
  if (limit >= b->next) b->next = limit + 1;
  double dt = strata_now() - t0;
  b->st->compute_s += dt;
  b->st->apply_s += dt;
  return rc;
}

/* The replica as clock g starts under staleness s: wait, then apply; all:
 * with every origin's sets of clocks <= g - 1 - s, every one applied. */
static int bring_up_to(sfb *b, int64_t g, int s, int all) {
  int rc = wait_for(b, g - 1 - s, all);
  if (!rc) rc = apply_upto(b, g - 1, all);
  if (!rc) rc = progress_sends(b);
  return rc;
}

static int sfb_acquire(void *be, strata_task_view *tv, strata_worker_stats *st) {
  sfb *b = be;
  b->st = st;
  tv->clock = b->clock;
  return bring_up_to(b, b->clock, b->s, 0);
}

/* A free slot for an own set (one whose sends completed and which the
 * replica has), or a new one. */
static own_set *own_slot(sfb *b) {
  for (int i = 0; i < b->n_own; i++)
    if (b->own[i].clock < 0) return &b->own[i];
  own_set *v = strata_realloc(b->own, ((size_t)b->n_own + 1) * sizeof *v);
  if (!v) return NULL;
  b->own = v;
  own_set *o = &b->own[b->n_own];
  memset(o, 0, sizeof *o);
  o->clock = -1;
  strata__sf_init(&o->f, b->J, b->D);
  if (b->Q && !(o->reqs = strata_calloc((size_t)b->Q, sizeof *o->reqs))) return NULL;
  b->n_own++;
  return o;
}

static int sfb_release(void *be, const strata_task_view *tv, strata_worker_stats *st) {
  sfb *b = be;
  strata__worker *w = b->w;
  b->st = st;
  const strata_engine_opts *o = w->opts;
  /* A straggler's delay ends its clock's work, before the factors go. */
  if (o->straggler_ms && b->clock % b->P == b->me)
    st->delay_s += strata__straggle_ms(o->straggler_ms, o->straggler_spin);
  own_set *slot = own_slot(b);
  if (!slot) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory for factors", b->me);
  /* The loop's set becomes this slot's; the slot's spare memory goes back
   * to the loop for the next clock. */
  strata__sf_swap(&slot->f, tv->factors);
  strata__sf_head *h = (strata__sf_head *)slot->f.buf;
  h->clock = b->clock;
  h->sender = b->me;
  slot->clock = b->clock;
  slot->applied = 0;
  b->fst.factors_out += h->n;
  int rc = 0;
  for (int j = 0; j < b->Q && !rc; j++) {
    rc = w->t->isend(w->t->impl, slot->f.buf, slot->f.len, b->out[j] + 1, TAG_SFB, &slot->reqs[j]);
    st->bytes_sent += slot->f.len;
  }
  st->clocks++;
  b->clock++;
  if (!rc) rc = receive(b);
  if (!rc) rc = progress_sends(b);
  return rc;
}

static int sfb_begin_pass(void *be, int pass, strata_worker_stats *st) {
  sfb *b = be;
  (void)pass;
  b->st = st;
  b->digest_any = 0;
  memset(&b->fst, 0, sizeof b->fst);
  return 0;
}

static int sfb_nop_subepoch(void *be, int pass, int s, strata_worker_stats *st) {
  (void)be, (void)pass, (void)s, (void)st;
  return 0;
}

/* The pass's end: under staleness 0, after the last pass and before a
 * checkpoint, the replica holds exactly the factors of every clock before
 * the next, from every origin, none later (a later set stays queued); else
 * what the next clock would start on. So a checkpoint leaves no set half
 * delivered, and under staleness 0 a run that writes one computes what a
 * run that does not (every pass's end applies the relayed sets not yet
 * due), so that a resumed run repeats it bit for bit. */
static int sfb_end_pass(void *be, int pass, strata_worker_stats *st) {
  sfb *b = be;
  b->st = st;
  int whole = b->s == 0 || pass == b->w->last_pass || strata__ckpt_due(b->w, pass);
  return bring_up_to(b, b->clock, whole ? 0 : b->s, whole);
}

/* Full broadcast: every replica holds the same factors at the pass's end
 * (the same bits under staleness 0), so worker 0's stands for all; under
 * partial broadcast each replica is its own and each worker keeps it. */
static int sfb_ckpt_add(void *ctx, strata__part_writer *pw) {
  sfb *b = ctx;
  int rc = strata__ckpt_add_residents(b->w, pw, NULL);
  if (!rc && (b->me == 0 || b->Q < b->P - 1))
    rc = strata__part_add(pw, STRATA__CK_ROTATING, 0, 0, b->W->buf, b->W->len);
  return rc;
}

static int sfb_checkpoint(void *be, int pass) {
  return strata__worker_ckpt(((sfb *)be)->w, pass, sfb_ckpt_add, be);
}

static void sfb_take_stats(void *be, strata_worker_stats *st) {
  sfb *b = be;
  if (b->check_replicas) {
    b->fst.replica_checked = 1;
    b->fst.replica_digest = b->digest;
  }
  STRATA__MODE_STATS_PUT(st->mode_stats[0], b->fst);
}

/* A wait for the drift exchange's requests; factor sets that come
 * meanwhile are taken in. */
static int poll_drift(void *ctx, int *done, int *progressed) {
  sfb *b = ctx;
  int rc = b->w->t->test_all(b->w->t->impl, b->drift_reqs, b->P, done);
  if (!rc) rc = receive(b);
  *progressed = *done;
  return rc;
}

/* Worker 0 gathers an even sample of rows from every replica, reports the
 * largest difference between any two, and sends it back to every worker,
 * which waits for it: every worker leaves the pass's evaluation together,
 * as on the ring, so that no worker's next pass starts by waiting for
 * worker 0's evaluation (that wait would count as training time). */
static int drift(sfb *b, strata_worker_stats *st) {
  strata__worker *w = b->w;
  strata_transport *t = w->t;
  if (b->P < 2) return 0;
  size_t row = (size_t)b->J * sizeof(float), n = (size_t)b->drift_rows * b->J;
  float *mine = b->me ? b->drift_mine : b->drift_all;
  for (uint32_t i = 0; i < b->drift_rows; i++)
    memcpy(mine + (size_t)i * b->J, (char *)b->W->buf + (size_t)i * b->drift_stride * row, row);
  double worst = 0, waited = 0;
  int rc = 0;
  if (b->me) {
    rc = t->isend(t->impl, mine, n * sizeof(float), 1, TAG_SFB_DRIFT, &b->drift_reqs[0]);
    if (!rc) rc = t->irecv(t->impl, &worst, sizeof worst, 1, TAG_SFB_DRIFT, &b->drift_reqs[1]);
    if (!rc) rc = wait_until(poll_drift, b, &waited);
    st->eval_bytes += n * sizeof(float);
    return rc;
  }
  for (int q = 1; q < b->P && !rc; q++)
    rc = t->irecv(t->impl, b->drift_all + (size_t)q * n, n * sizeof(float), q + 1, TAG_SFB_DRIFT,
                  &b->drift_reqs[q]);
  if (!rc) rc = wait_until(poll_drift, b, &waited);
  if (rc) return rc;
  for (size_t x = 0; x < n; x++) {
    float lo = b->drift_all[x], hi = lo;
    for (int q = 1; q < b->P; q++) {
      float v = b->drift_all[(size_t)q * n + x];
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    double d = (double)hi - (double)lo;
    if (!(d <= worst)) worst = d; /* a NaN replica shows as NaN */
  }
  for (int q = 1; q < b->P && !rc; q++)
    rc = t->isend(t->impl, &worst, sizeof worst, q + 1, TAG_SFB_DRIFT, &b->drift_reqs[q]);
  if (!rc) rc = wait_until(poll_drift, b, &waited);
  STRATA__MODE_STATS_GET(sfb_stats, fs, st->mode_stats[0]);
  fs.drift = worst;
  fs.drift_rows = b->drift_rows;
  fs.drift_measured = 1;
  STRATA__MODE_STATS_PUT(st->mode_stats[0], fs);
  return rc;
}

/* block_objective of this worker's resident blocks and, on worker 0, of W:
 * every block once across workers. */
static int block_objectives(sfb *b, int pass, double *partials) {
  strata__worker *w = b->w;
  int rc = 0;
  for (int i = 0; i < w->sched.n_resident && !rc; i++)
    if (strata_schedule_resident_owner(&w->sched, i) == w->me)
      rc = w->app->block_objective(w->state, pass, STRATA_BLOCK_RESIDENT, i, &w->res[i], partials);
  if (!rc && w->me == 0) rc = w->app->block_objective(w->state, pass, STRATA_BLOCK_ROTATING, 0, b->W, partials);
  return rc;
}

static int sfb_evaluate(void *be, int pass, pass_report *rep) {
  sfb *b = be;
  strata__worker *w = b->w;
  strata_worker_stats *st = &rep->stats;
  double t0 = strata_now();
  int rc = w->app->block_objective ? block_objectives(b, pass, rep->partials) : 0;
  if (!rc && w->has_eval && w->app->evaluate) rc = strata__worker_score(w, pass, rep->partials);
  if (!rc && w->t) rc = drift(b, st);
  st->eval_s += strata_now() - t0;
  strata__worker_stamp(w, st);
  if (!rc) rc = w->report(w->report_ud, rep);
  return rc;
}

/* While a verdict is on its way (begin_pass has run): take in factors,
 * let sends finish, and give the core up between polls (the loop calls
 * this back to back). */
static int sfb_idle(void *be) {
  sfb *b = be;
  int rc = receive(b);
  if (!rc) rc = progress_sends(b);
  sched_yield();
  return rc;
}

/* Every set this worker is owed is in and applied (a stopped run ends at
 * the same pass everywhere), every send complete. */
static int sfb_close(void *be, int stopped) {
  sfb *b = be;
  strata_worker_stats scratch = {0};
  b->st = &scratch;
  int rc = stopped ? bring_up_to(b, b->clock, 0, 1) : 0;
  for (int i = 0; i < b->n_own && !rc; i++)
    if (b->own[i].clock >= 0 && b->Q) rc = strata_comm_wait_all_idle(b->w->t, b->own[i].reqs, b->Q);
  for (size_t i = 0; i < b->n_relaying && !rc; i++)
    rc = strata_comm_wait_all_idle(b->w->t, b->relaying[i].reqs, b->relaying[i].n_reqs);
  b->st = NULL;
  return rc;
}

static void sfb_free(void *be) {
  sfb *b = be;
  if (!b) return;
  for (int q = 0; b->queue && q < b->P; q++) queue_free(&b->queue[q]);
  for (int i = 0; i < b->n_own; i++) {
    strata__sf_close(&b->own[i].f);
    strata_free(b->own[i].reqs);
  }
  strata_free(b->own);
  strata_free(b->queue);
  strata_free(b->have);
  for (size_t i = 0; i < b->n_relaying; i++) set_free(&b->relaying[i]);
  strata_free(b->relaying);
  strata_free(b->out);
  strata_free(b->in);
  strata_free(b->via);
  strata_free(b->hops);
  strata_free(b->kids);
  strata_free(b->n_kids);
  strata_free(b->drift_mine);
  strata_free(b->drift_all);
  strata_free(b->drift_reqs);
  strata_free(b);
}

/* Q out-peers: the option, or every other worker. */
static int peers_of(const strata_engine_opts *o, int P) {
  sfb_settings set = settings_of(o);
  return set.peers ? set.peers : P - 1;
}

static int sfb_open(strata__worker *w, void **out) {
  sfb *b = strata_calloc(1, sizeof *b);
  *out = b;
  if (!b) return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
  b->w = w;
  b->W = &w->rot[0];
  b->J = b->W->row_bytes / sizeof(float);
  b->D = b->W->nrows;
  b->P = w->sched.n_workers;
  b->me = w->me;
  b->s = w->opts->staleness;
  b->check_replicas = settings_of(w->opts).check_replicas;
  b->Q = b->P > 1 ? peers_of(w->opts, b->P) : 0;
  b->have = strata_malloc((size_t)b->P * sizeof *b->have);
  b->queue = strata_calloc((size_t)b->P, sizeof *b->queue);
  b->out = strata_malloc(((size_t)b->Q + 1) * sizeof *b->out);
  b->in = strata_malloc((size_t)b->P * sizeof *b->in);
  b->via = strata_malloc((size_t)b->P * sizeof *b->via);
  b->hops = strata_calloc((size_t)b->P, sizeof *b->hops);
  b->kids = strata_malloc(((size_t)b->P * b->Q + 1) * sizeof *b->kids);
  b->n_kids = strata_calloc((size_t)b->P, sizeof *b->n_kids);
  b->drift_reqs = strata_calloc((size_t)b->P, sizeof *b->drift_reqs);
  if (!b->have || !b->queue || !b->out || !b->in || !b->via || !b->hops || !b->kids ||
      !b->n_kids || !b->drift_reqs)
    return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
  for (int o = 0; o < b->P; o++) b->via[o] = -1;
  b->per_pass = strata__tasks_per_pass(w);
  /* A resumed run starts at its checkpoint's clock, every earlier factor
   * in the replica. */
  b->clock = b->next = (int64_t)w->start_pass * b->per_pass;
  for (int q = 0; q < b->P; q++) b->have[q] = b->clock - 1;
  if (b->Q) {
    strata__topology topo;
    int rc = strata__sfb_topology(b->P, b->Q, &topo);
    if (rc) return rc;
    memcpy(b->out, topo.peers + (size_t)b->me * b->Q, (size_t)b->Q * sizeof *b->out);
    for (int p = 0; p < b->P; p++)
      for (int j = 0; j < b->Q; j++)
        if (topo.peers[p * b->Q + j] == b->me) b->in[b->n_in++] = p;
    /* This worker's part of every origin's relay tree. */
    int *parent = strata_malloc(2 * (size_t)b->P * b->P * sizeof *parent);
    if (!parent) rc = strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
    if (!rc) rc = strata__topology_routes(&topo, parent, parent + (size_t)b->P * b->P);
    for (int o = 0; o < b->P && !rc; o++) {
      const int *par = parent + (size_t)o * b->P, *dist = par + (size_t)b->P * b->P;
      b->via[o] = par[b->me];
      b->hops[o] = dist[b->me];
      for (int j = 0; j < b->Q; j++)
        if (par[b->out[j]] == b->me) b->kids[o * b->Q + b->n_kids[o]++] = b->out[j];
    }
    strata_free(parent);
    strata__topology_close(&topo);
    if (rc) return rc;
    /* Rows of the drift sample: every stride-th, about 2^16 floats. A
     * sample of 2^20 (4 MB a worker) slowed the next pass by up to half on
     * a 2e6-weight set, its transfer lingering into the first clocks. */
    uint64_t floats = (uint64_t)b->D * b->J, cap = 1u << 16;
    b->drift_stride = (uint32_t)(floats > cap ? (floats + cap - 1) / cap : 1);
    b->drift_rows = (b->D + b->drift_stride - 1) / b->drift_stride;
    size_t n = (size_t)b->drift_rows * b->J;
    b->drift_mine = strata_malloc(n * sizeof(float));
    b->drift_all = b->me ? NULL : strata_malloc((size_t)b->P * n * sizeof(float));
    if (!b->drift_mine || (!b->me && !b->drift_all))
      return strata_err_set(STRATA_ENOMEM, "worker %d: out of memory", w->me);
    /* Touched now: page faults belong to the set-up, not to pass 1. */
    memset(b->drift_mine, 0, n * sizeof(float));
    if (!b->me) memset(b->drift_all, 0, (size_t)b->P * n * sizeof(float));
  }
  return 0;
}

/* sfb needs a sufficient-factor app and the same number of clocks per pass
 * on every worker (the engine checked --peers against P already). */
static int sfb_check(const strata_engine_opts *o, const strata_app *app, const strata_setup *setup,
                     const strata_problem *p, const strata_schedule *s) {
  (void)p;
  (void)o, (void)setup;
  if (!app->sf)
    return strata_err_set(STRATA_EUSAGE,
                          "%s: --mode sfb needs a sufficient-factor app (strata/sf.h: mlr, dml, ...)",
                          app->name);
  if (!s) return 0;
  int clocks = -1;
  for (int q = 0; q < s->n_workers; q++) {
    int c = 0;
    for (int e = 0; e < s->n_subepochs; e++) {
      int n;
      strata_schedule_tasks(s, e, q, &n);
      c += n;
    }
    if (clocks >= 0 && c != clocks)
      return strata_err_set(STRATA_ESCHED,
                            "%s: --mode sfb needs as many clocks (tasks) per pass on every worker; "
                            "worker %d has %d, worker 0 %d",
                            app->name, q, c, clocks);
    clocks = c;
  }
  return 0;
}

/* ---- what sfb answers (core/mode.h) ---- */

static const strata_option sfb_options[] = {
    {.name = "peers",
     .type = STRATA_OPT_INT,
     .offset = offsetof(sfb_settings, peers),
     .metavar = "Q",
     .min = 1,
     .max = 1000000,
     .help = "each worker sends its factors to Q peers (partial broadcast; default P-1, all)"},
    {.name = "check-replicas",
     .type = STRATA_OPT_FLAG | STRATA_OPT_RESUMABLE,
     .offset = offsetof(sfb_settings, check_replicas),
     .help = "digest every replica at every clock end (metrics replica_digest; a pass over the "
             "matrix per clock)"},
    {.name = NULL},
};

/* The staleness bound (default 0: BSP); a clock is a minibatch, and
 * factors go straight to peers (no work per clock, no prefetch). */
static int sfb_resolve(strata_engine_opts *o, const strata__given *g) {
  if (!g->staleness) o->staleness = 0;
  o->wpc = 0;
  o->prefetch = STRATA_PREFETCH_NONE;
  return 0;
}

/* The staleness bound of the factors applied; a clock is a minibatch. */
static void sfb_clock_rule(const strata_engine_opts *o, const strata_app *app, int *staleness,
                           double *wpc) {
  (void)app;
  *staleness = o->staleness;
  *wpc = 0;
}

/* Workers run up to s clocks apart, a pass being at least one clock. */
static int sfb_control_lag(const strata_engine_opts *o) { return 2 + o->staleness; }

/* Full broadcast: worker 0's replica stands for all; partial: each
 * worker's is its own. */
static unsigned sfb_ckpt_parts(const strata_engine_opts *o, int P) {
  int Q = peers_of(o, P);
  return Q && Q < P - 1 ? STRATA__CKP_REPLICAS : STRATA__CKP_ROTATING;
}

/* The replica, this worker's factor sets and the sets in flight. */
static double sfb_memory(const strata__mem_view *v) { return v->resident + 3 * v->rot_all; }

/* The partial-broadcast topology (rank 0, before any work), for the log
 * and the metrics: every worker computes it alike; a --peers that fits no
 * topology ends the run here. */
typedef struct sfb_run {
  int Q, tau, lower, optimal;
  int *peers; /* peers[p * Q + j]: worker p's out-peers */
} sfb_run;

static int sfb_prepare(const strata_engine_opts *o, int P, void **data) {
  sfb_settings set = settings_of(o);
  if (P < 2 && !set.peers) return 0;
  strata__topology topo;
  int rc = strata__sfb_topology(P, set.peers ? set.peers : P - 1, &topo);
  if (rc) return rc;
  sfb_run *r = strata_calloc(1, sizeof *r);
  if (!r) {
    strata__topology_close(&topo);
    return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  }
  *r = (sfb_run){topo.Q, topo.tau, topo.lower, topo.optimal, topo.peers};
  *data = r;
  strata_log(
      STRATA_LOG_INFO,
      "sfb: %d workers, %d out-peer%s each (%s broadcast): tau %d clock%s (%s; lower bound %d)", P,
      topo.Q, topo.Q == 1 ? "" : "s", topo.Q == P - 1 ? "full" : "partial", topo.tau,
      topo.tau == 1 ? "" : "s", topo.optimal ? "optimal" : "not proven optimal", topo.lower);
  return 0;
}

static void sfb_release_run(void *data) {
  sfb_run *r = data;
  if (!r) return;
  strata_free(r->peers);
  strata_free(r);
}

static void add_stats(sfb_stats *a, const sfb_stats *b) {
  a->sets_in += b->sets_in;
  a->factors_in += b->factors_in;
  a->factors_out += b->factors_out;
  a->delay_sum += b->delay_sum;
  if (b->delay_max > a->delay_max) a->delay_max = b->delay_max;
  for (int i = 0; i < STRATA_TABLE_HIST; i++) a->delay_hist[i] += b->delay_hist[i];
  a->from_mask |= b->from_mask;
}

static void sfb_stats_add(unsigned char *total, const unsigned char *in) {
  STRATA__MODE_STATS_GET(sfb_stats, a, total);
  STRATA__MODE_STATS_GET(sfb_stats, b, in);
  add_stats(&a, &b);
  STRATA__MODE_STATS_PUT(total, a);
}

/* The pass's drift: worker 0's, when measured (a NaN replica included). */
static void sfb_pass_add(unsigned char *pass, const unsigned char *in) {
  STRATA__MODE_STATS_GET(sfb_stats, b, in);
  if (!b.drift_measured) return;
  sfb_pass ps = {b.drift, b.drift_rows, 1};
  STRATA__MODE_STATS_PUT(pass, ps);
}

/* The factors applied from peers and their delays in clocks. */
static void write_delays(strata_json *j, const sfb_stats *s) {
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
  for (int b = 0; b <= last && s->factors_in; b++)
    strata_json_int(j, NULL, (int64_t)s->delay_hist[b]);
  strata_json_array_end(j);
  strata_json_object_end(j);
}

/* The workers' figures summed: over the run (pass < 0) or of one pass. */
static sfb_stats sum_workers(const strata_run_result *r, int pass) {
  sfb_stats sum;
  memset(&sum, 0, sizeof sum);
  for (int w = 0; w < r->workers; w++) {
    const strata_worker_stats *s =
        pass < 0 ? (r->worker_total ? &r->worker_total[w] : NULL)
                 : &r->per_pass_worker[(size_t)pass * (size_t)r->workers + (size_t)w];
    if (!s) continue;
    STRATA__MODE_STATS_GET(sfb_stats, b, s->mode_stats[0]);
    add_stats(&sum, &b);
  }
  return sum;
}

static void sfb_metrics(strata_json *j, const strata_run_result *r, int slot) {
  (void)slot;
  const strata_engine_opts *o = r->opts;
  const sfb_run *run = r->mode_data;
  if (o) {
    int Q = run ? run->Q : 0;
    strata_json_object_begin(j, "sfb");
    strata_json_int(j, "staleness", o->staleness);
    strata_json_int(j, "peers", Q);
    strata_json_bool(j, "full_broadcast", Q == r->workers - 1);
    strata_json_int(j, "tau", run ? run->tau : 0);
    strata_json_int(j, "tau_lower_bound", run ? run->lower : 0);
    strata_json_bool(j, "tau_optimal", run ? run->optimal : 0);
    /* topology[p]: worker p's out-peers */
    strata_json_array_begin(j, "topology");
    for (int p = 0; run && run->peers && p < r->workers; p++) {
      strata_json_array_begin(j, NULL);
      for (int q = 0; q < Q; q++) strata_json_int(j, NULL, run->peers[p * Q + q]);
      strata_json_array_end(j);
    }
    strata_json_array_end(j);
    strata_json_bool(j, "check_replicas", settings_of(o).check_replicas);
    strata_json_object_end(j);
  }
  sfb_stats sum = sum_workers(r, -1);
  write_delays(j, &sum);
}

static void sfb_metrics_pass(strata_json *j, const strata_run_result *r, int pass, int slot) {
  STRATA__MODE_STATS_GET(sfb_pass, ps, r->per_pass[pass].mode_stats[slot]);
  /* drift: the largest |W_p - W_q| over every pair of replicas at the
   * pass's end, over drift_rows rows of W; null when not measured (one
   * worker) or not finite. */
  strata_json_number(j, "drift", ps.measured ? ps.drift : 0.0 / 0.0);
  strata_json_int(j, "drift_rows", ps.drift_rows);
  sfb_stats sum = sum_workers(r, pass);
  write_delays(j, &sum);
}

/* One worker's figures: clocks, traffic per clock, factors. */
static void sfb_metrics_worker(strata_json *j, const strata_worker_stats *s, int slot) {
  STRATA__MODE_STATS_GET(sfb_stats, f, s->mode_stats[slot]);
  strata_json_int(j, "clocks", s->clocks);
  strata_json_number(j, "bytes_sent_per_clock",
                     s->clocks ? (double)s->bytes_sent / s->clocks : 0.0);
  strata_json_number(j, "bytes_recv_per_clock",
                     s->clocks ? (double)s->bytes_recv / s->clocks : 0.0);
  strata_json_number(j, "apply_s", s->apply_s);
  strata_json_int(j, "factors_out", (int64_t)f.factors_out);
  strata_json_array_begin(j, "from");
  for (int q = 0; q < 64; q++)
    if (f.from_mask >> q & 1) strata_json_int(j, NULL, q);
  strata_json_array_end(j);
  write_delays(j, &f);
  if (f.replica_checked) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)f.replica_digest);
    strata_json_string(j, "replica_digest", hex);
  }
}

static void sfb_echo(char *out, size_t n, const strata_engine_opts *o) {
  snprintf(out, n, "staleness %d, %s", o->staleness,
           settings_of(o).peers ? "partial broadcast" : "full broadcast");
}

static void sfb_summary(FILE *f, const strata_run_result *r, int slot) {
  double bytes = 0, clocks = 0;
  for (int w = 0; w < r->workers; w++) {
    bytes += (double)r->worker_total[w].bytes_sent;
    clocks += r->worker_total[w].clocks;
  }
  sfb_stats sum = sum_workers(r, -1);
  const sfb_run *run = r->mode_data;
  char dtext[32] = "n/a";
  if (r->passes) {
    STRATA__MODE_STATS_GET(sfb_pass, ps, r->per_pass[r->passes - 1].mode_stats[slot]);
    if (ps.measured) snprintf(dtext, sizeof dtext, "%.3g", ps.drift);
  }
  int Q = run ? run->Q : 0;
  fprintf(f,
          "  sfb: %d peer%s each, tau %d; %.1f KB sent per worker per clock; factor delay mean "
          "%.2f, max %d clocks; replica drift after the last pass %s\n",
          Q, Q == 1 ? "" : "s", run ? run->tau : 0, clocks > 0 ? bytes / clocks / 1e3 : 0.0,
          sum.factors_in ? (double)sum.delay_sum / (double)sum.factors_in : 0.0, sum.delay_max,
          dtext);
}

static void sfb_status(FILE *f, const strata_run_result *r, int done, int slot) {
  sfb_stats sum = sum_workers(r, -1);
  /* delays 0, 1, ...: the last bucket is "that or later", so +Inf only */
  double le[STRATA_TABLE_HIST];
  for (int b = 0; b < STRATA_TABLE_HIST; b++) le[b] = b;
  strata__prom_histogram(f, "strata_factor_delay_clocks",
                         "sufficient factors applied, by delay in clocks (0: in time for "
                         "the next clock)",
                         STRATA_TABLE_HIST - 1, sum.delay_hist, le, (double)sum.delay_sum,
                         sum.factors_in);
  strata__prom_family(f, "strata_replica_drift", "gauge",
                      "largest difference between two workers' replicas after the last "
                      "summed pass (NaN: not measured)");
  double drift = 0.0 / 0.0;
  if (done) {
    STRATA__MODE_STATS_GET(sfb_pass, ps, r->per_pass[done - 1].mode_stats[slot]);
    if (ps.measured) drift = ps.drift;
  }
  strata__prom_sample(f, "strata_replica_drift", NULL, drift);
}

static const char *const sfb_keys[] = {"sfb", "factor_delay", NULL};
static const char *const sfb_pass_keys[] = {"drift", "drift_rows", "factor_delay", NULL};

const strata__backend strata__sfb_backend = {
    .mode = {.name = "sfb",
             .options = sfb_options,
             .takes = STRATA__TAKES_STALENESS,
             .resolve = sfb_resolve,
             .clock_rule = sfb_clock_rule,
             .control_lag = sfb_control_lag,
             .check = sfb_check,
             .all_rotating = 1,
             .takes_factors = 1,
             .counts_clocks = 1,
             .ckpt_parts = sfb_ckpt_parts,
             .memory = sfb_memory,
             .prepare = sfb_prepare,
             .release = sfb_release_run,
             .stats_add = sfb_stats_add,
             .pass_add = sfb_pass_add,
             .keys = sfb_keys,
             .pass_keys = sfb_pass_keys,
             .metrics = sfb_metrics,
             .metrics_pass = sfb_metrics_pass,
             .metrics_worker = sfb_metrics_worker,
             .echo = sfb_echo,
             .summary = sfb_summary,
             .status = sfb_status},
    .open = sfb_open,
    .begin_pass = sfb_begin_pass,
    .begin_subepoch = sfb_nop_subepoch,
    .acquire = sfb_acquire,
    .release = sfb_release,
    .end_subepoch = sfb_nop_subepoch,
    .end_pass = sfb_end_pass,
    .stats = sfb_take_stats,
    .evaluate = sfb_evaluate,
    .checkpoint = sfb_checkpoint,
    .idle = sfb_idle,
    .close = sfb_close,
    .free = sfb_free,
};
