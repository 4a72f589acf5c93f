/*
 * Unit tests of the sfb back-end (worker/sfb.c, sufficient factor
 * broadcasting) without mpiexec: P worker threads run the worker's pass
 * loop (strata__worker_loop) with a fake sufficient-factor app over
 * endpoints 1..P of a loopback transport with seeded delivery delays and
 * reordering; rank 0, the coordinator, exists and does nothing.
 *
 * Two apps. The logging app's factors carry who made them: u = (sender,
 * clock, index in the set, noise), and its apply (strata_sf_ops.apply)
 * records every factor a replica applies, after checking the factor's
 * bytes are the ones its sender emitted; compute, clock_end and evaluate
 * record themselves in the same per-worker log. check_log then reads each
 * worker's log and reported stats after the run and holds sfb to its
 * contract, with d(o, r) the hops from o to r in the topology of
 * strata__sfb_topology(P, Q) (a breadth-first search here):
 *   (a) every factor reaches every worker exactly once, relayed under
 *       partial broadcast; a set is applied whole, each origin's sets in
 *       clock order;
 *   (b) the staleness rule: when worker r starts clock g, its own factors
 *       of clocks <= g - 1 are applied, and origin o's of every clock
 *       t <= g - d(o, r) (s + 1) (in-peers: t <= g - 1 - s), but none of a
 *       clock t > g - d(o, r), before it is due (none of a clock >= g: a
 *       future clock); at a pass's end the same with g the next clock,
 *       except that with s = 0, after the last pass and in close after a
 *       stop every origin's factors of clocks <= g - 1 are applied;
 *   (c) each batch of applications goes clock by clock, in worker order
 *       within a clock, then clock_end, once per clock, in order; with
 *       s = 0 a replica's applications and clock_ends are exactly those of
 *       a model of the rule (model_batch: each set at the clock it is due,
 *       all of a pass's at its end), whatever the timing (so identical on
 *       every worker under full broadcast);
 *   (d) the stats each pass reports (sets_in, factors_in, the delay
 *       histogram, its sum and max <= tau (s + 1) - 1, from_mask,
 *       factors_out, clocks, bytes_sent and bytes_recv) are what the log
 *       shows, a factor's delay being the clock it is applied at minus 1
 *       minus its own clock; over the run a worker sends each of its sets
 *       to its Q out-peers and relays each set it takes in to its children
 *       in the origin's tree (strata__topology_routes), and receives every
 *       other worker's sets once.
 * The real-valued app uses the engine's apply (sf->apply NULL) on
 * pseudo-random factors that depend on the replica they are computed on,
 * and a decay as clock_end. With s = 0 the test simulates every replica
 * serially (each worker's factors of clock c on its replica as c starts,
 * then model_batch's sets and decays): each replica must equal its
 * simulation bit for bit as every clock starts, at every pass's evaluation
 * and at the end, the digests of --check-replicas and worker 0's drift must
 * be the simulation's, and with full broadcast every replica is the same.
 *
 * Further cases: a stop verdict (every set of the clocks run still gets
 * applied, in close), and 66 workers on a partial broadcast (in-peers
 * numbered 64 and above).
 *
 * test_checker_catches_broken_runs shows that the checks can fail: it
 * takes a real run's log and breaks it the way a broken sfb would (a
 * future clock applied, a wait skipped, a set lost, duplicated, sent to a
 * non-peer or out of worker order, a clock_end missing, stats that
 * disagree) and expects check_log's matching message. Were sfb itself to
 * apply a future clock (bring_up_to calling apply_upto(b, g) instead of
 * g - 1), the first check to fire is on the clock_end or APPLY of clock g
 * logged before COMPUTE g, with "(a future clock)"; were it to wait one
 * clock too little (wait_for(b, g - 2 - s)), the clock_end check (s = 0:
 * "ran clock_end of clock c before worker q's factors of it") or the
 * COMPUTE check (s > 0: "started clock g without worker q's factors of
 * clock c") fires. Both were tried on a locally broken worker/sfb.c.
 *
 * The randomised tests print their seed; STRATA_TEST_SEED=X replays the
 * factors and the loopback's draws (thread timing still varies). A
 * watchdog fails a test that hangs.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "leakcheck.h"

#include "core/sf.h"
#include "strata/core.h"
#include "strata/sf.h"
#include "worker/backend.h"
#include "worker/sfb.h"
#include "worker/sfb_topology.h"
#include "worker/worker.h"

extern const strata__backend strata__sfb_backend; /* the back-end under test */

enum { MAXP = 70, J = 4, D = 7, WATCHDOG_S = 90, HEAD = (int)sizeof(strata__sf_head) };

/* ---- the case and its factors ------------------------------------------ */

/* A pass's figures as a worker reports them: the engine's and sfb's own
 * (worker/sfb.h), side by side; drift -1 when not measured. */
typedef struct sfb_view {
  int32_t clocks;
  uint64_t bytes_sent, bytes_recv;
  uint64_t sets_in, factors_in, factors_out, delay_sum;
  int32_t delay_max, replica_checked;
  uint64_t delay_hist[STRATA_TABLE_HIST];
  uint64_t from_mask, replica_digest;
  double drift;
  uint32_t drift_rows;
} sfb_view;

static sfb_view view_of(const strata_worker_stats *w) {
  strata__sfb_stats f;
  memcpy(&f, w->mode_stats[0], sizeof f);
  sfb_view v = {.clocks = w->clocks,
                .bytes_sent = w->bytes_sent,
                .bytes_recv = w->bytes_recv,
                .sets_in = f.sets_in,
                .factors_in = f.factors_in,
                .factors_out = f.factors_out,
                .delay_sum = f.delay_sum,
                .delay_max = f.delay_max,
                .replica_checked = f.replica_checked,
                .from_mask = f.from_mask,
                .replica_digest = f.replica_digest,
                .drift = f.drift_measured ? f.drift : -1,
                .drift_rows = f.drift_rows};
  memcpy(v.delay_hist, f.delay_hist, sizeof v.delay_hist);
  return v;
}

typedef struct sfb_conf {
  int P, Q, s, C, passes, max_delay, reorder;
  int real;       /* the real-valued app (s = 0 only) */
  int peers_zero; /* full broadcast asked as opts.peers = 0 */
  int stop;       /* 1 + the pass whose verdict stops the run (on every
                     worker); 0: none (log app only) */
} sfb_conf;

typedef struct sfb_case {
  sfb_conf cf;
  int T;      /* clocks in the passes asked for */
  int passes; /* passes run (fewer when stopped) */
  uint64_t seed;
  strata_schedule sched;
  void *packed;
  size_t packed_len;
  strata_loopback *lb;
  strata_engine_opts opts;
  int in[MAXP][MAXP]; /* in[r][q]: q sends to r (q is an in-peer of r) */
  int n_in[MAXP];
  int hops[MAXP][MAXP]; /* hops[r][o]: d(o, r), by a breadth-first search here */
  int kids[MAXP][MAXP]; /* kids[r][o]: the workers r relays o's sets to */
  int tau;
  float w0[D * J];
  /* s = 0, real app: the simulated replicas as each clock starts
   * (T + 1 of them per worker), their digests and worker 0's drift per pass */
  float *sim;
  uint64_t *sim_digest;
  double *sim_drift;
} sfb_case;

static uint64_t fhash(uint64_t seed, int q, int64_t c, int i) {
  return strata_mix64(seed ^ strata_mix64(((uint64_t)q << 48) ^ ((uint64_t)c << 16) ^ (uint64_t)i));
}

/* Factors in worker q's set of clock c: the logging app's sets are never
 * empty (so that the log sees each), the real app's may be. */
static int nf_of(const sfb_case *k, int q, int64_t c) {
  uint64_t h = fhash(k->seed, q, c, 99);
  return k->cf.real ? (int)(h % 4) : 1 + (int)(h % 3);
}

typedef struct fspec {
  float scale;
  uint32_t nnz;
  int dense;
  uint32_t idx[D];
  float val[D];
  float u[J];
} fspec;

static float frand(strata_rng *r) { return (float)(2 * strata_rng_uniform(r) - 1); }

/* Factor i of worker q's set of clock c; the real app's u depends on the
 * replica W it is computed on (W NULL: shape only). */
static void spec_of(const sfb_case *k, int q, int64_t c, int i, const float *W, fspec *f) {
  strata_rng r;
  strata_rng_seed(&r, fhash(k->seed, q, c, i));
  f->dense = i % 3 == 2;
  f->nnz = f->dense ? 1 + (uint32_t)strata_rng_below(&r, D) : (uint32_t)strata_rng_below(&r, 4);
  uint32_t start = (uint32_t)strata_rng_below(&r, D);
  for (uint32_t n = 0; n < f->nnz; n++) {
    f->idx[n] = (start + 3 * n) % D; /* distinct: 3 is a unit mod 7 */
    f->val[n] = frand(&r);
  }
  float noise[J];
  for (int j = 0; j < J; j++) noise[j] = frand(&r);
  if (k->cf.real) {
    f->scale = 0.01f;
    uint32_t row = (uint32_t)((q + c + i) % D);
    for (int j = 0; j < J; j++) f->u[j] = noise[j] + (W ? 0.01f * W[row * J + j] : 0);
  } else {
    f->scale = 1.0f / 64;
    f->u[0] = (float)q;
    f->u[1] = (float)c;
    f->u[2] = (float)i;
    f->u[3] = noise[3];
  }
}

static size_t set_len(const sfb_case *k, int q, int64_t c) {
  size_t len = HEAD;
  for (int i = 0; i < nf_of(k, q, c); i++) {
    fspec f;
    spec_of(k, q, c, i, NULL, &f);
    len += 12 + 4 * J + (f.dense ? 4 : 8) * (size_t)f.nnz;
  }
  return len;
}

static int emit_set(const sfb_case *k, int q, int64_t c, const float *W, strata_sf_factors *fs) {
  for (int i = 0; i < nf_of(k, q, c); i++) {
    fspec f;
    spec_of(k, q, c, i, W, &f);
    int rc = strata_sf_emit(fs, f.scale, f.u, f.dense ? NULL : f.idx, f.val, f.nnz);
    if (rc) return rc;
  }
  return 0;
}

/* The real app's clock_end: a decay, the same float operations anywhere. */
static void decay(float *W) {
  for (int x = 0; x < D * J; x++) W[x] -= 0.001f * W[x];
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* ---- the log ----------------------------------------------------------- */

typedef enum { EV_COMPUTE, EV_APPLY, EV_END, EV_EVAL } ev_kind;

typedef struct ev {
  int kind;
  int sender; /* APPLY */
  int clock;  /* COMPUTE, APPLY, END: a clock; EVAL: the pass */
  int k;      /* APPLY: the factor's index in its set */
} ev;

typedef struct ev_log {
  ev *v;
  size_t n, cap;
} ev_log;

static void log_push(ev_log *l, ev e) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 256;
    l->v = realloc(l->v, l->cap * sizeof *l->v);
    if (!l->v) abort();
  }
  l->v[l->n++] = e;
}

/* One worker thread's state, also the app's state. */
typedef struct wctx {
  sfb_case *k;
  strata__worker w;
  strata_transport t;
  int computed; /* clocks computed so far */
  int reports, controls;
  ev_log log;
  sfb_view *stats;            /* per pass, as reported */
  float *snap;                /* per pass: W as evaluate saw it */
  int fail;
  char msg[512];
} wctx;

static void failf(wctx *c, const char *fmt, ...) {
  if (c->fail++) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->msg, sizeof c->msg, fmt, ap);
  va_end(ap);
}

/* ---- the apps ------------------------------------------------------------ */

/* Every data block here is empty (len 0): an empty minibatch still reaches
 * compute, once per clock, its view's clock that clock. */
static int sf_compute(void *state, const strata_task_view *tv, double *partials) {
  wctx *c = state;
  const sfb_case *k = c->k;
  int g = c->computed, me = c->w.me, C = k->cf.C;
  if (!tv->factors) failf(c, "worker %d clock %d: compute got no factor set", me, g);
  if (tv->pass != g / C || tv->subepoch != g % C || tv->ids.data != (g % C) * k->cf.P + me ||
      tv->ids.resident != me || tv->ids.rotating != 0 || tv->rotating != &c->w.rot[0] ||
      tv->row_lo != 0 || tv->row_hi != D || tv->chunk != 0 || tv->clock != g)
    failf(c, "worker %d clock %d: task view pass %d sub-epoch %d data %d rows [%u, %u) clock %lld",
          me, g, tv->pass, tv->subepoch, tv->ids.data, tv->row_lo, tv->row_hi,
          (long long)tv->clock);
  log_push(&c->log, (ev){EV_COMPUTE, -1, g, 0});
  const float *W = tv->rotating->buf;
  if (k->sim && memcmp(W, k->sim + ((size_t)me * (k->T + 1) + g) * D * J, sizeof(float) * D * J))
    failf(c, "worker %d starts clock %d on a replica other than the simulation's", me, g);
  int rc = tv->factors ? emit_set(k, me, g, W, tv->factors) : 0;
  if (rc) failf(c, "worker %d clock %d: emit failed: %s", me, g, strata_err_msg());
  c->computed++;
  partials[0] += 1;
  return rc;
}

static int sf_evaluate(void *state, const strata_task_view *tv, double *partials) {
  wctx *c = state;
  log_push(&c->log, (ev){EV_EVAL, -1, tv->pass, 0});
  if (tv->pass < 0 || tv->pass >= c->k->cf.passes || tv->clock != -1)
    failf(c, "worker %d: evaluate of pass %d", c->w.me, tv->pass);
  else
    memcpy(c->snap + (size_t)tv->pass * D * J, tv->rotating->buf, sizeof(float) * D * J);
  partials[1] += 1;
  return 0;
}

/* The logging app's apply: decodes the factor, checks its bytes are what
 * its sender emitted, records it, applies it as the engine would. */
static void log_apply(void *state, strata_block *W, const strata_sf_factor *f) {
  wctx *c = state;
  const sfb_case *k = c->k;
  int q = (int)f->u[0], clock = (int)f->u[1], i = (int)f->u[2];
  if (W != &c->w.rot[0] || q < 0 || q >= k->cf.P || clock < 0 || clock >= k->T || i < 0 ||
      i >= nf_of(k, q, clock) || f->u[0] != (float)q || f->u[1] != (float)clock ||
      f->u[2] != (float)i) {
    failf(c, "worker %d applied a factor that no one emitted (u = %g %g %g)", c->w.me, f->u[0],
          f->u[1], f->u[2]);
    return;
  }
  fspec want;
  spec_of(k, q, clock, i, NULL, &want);
  if (f->scale != want.scale || f->nnz != want.nnz || (f->idx == NULL) != want.dense ||
      memcmp(f->u, want.u, sizeof want.u) ||
      (f->nnz && memcmp(f->val, want.val, f->nnz * sizeof(float))) ||
      (f->idx && f->nnz && memcmp(f->idx, want.idx, f->nnz * sizeof(uint32_t))))
    failf(c, "worker %d: factor %d of worker %d's clock %d arrived changed", c->w.me, i, q, clock);
  log_push(&c->log, (ev){EV_APPLY, q, clock, i});
  strata_sf_apply(W, f);
}

static int sf_clock_end(void *state, strata_block *W, const strata_sf_clock *ck) {
  wctx *c = state;
  if (ck->share != 1.0 || ck->clock < 0 || ck->pass != (int)(ck->clock / c->k->cf.C) ||
      W != &c->w.rot[0])
    failf(c, "worker %d: clock_end of clock %lld with pass %d share %g", c->w.me,
          (long long)ck->clock, ck->pass, ck->share);
  log_push(&c->log, (ev){EV_END, -1, (int)ck->clock, 0});
  if (c->k->cf.real) decay(W->buf);
  return 0;
}

static const strata_sf_ops log_ops = {.apply = log_apply, .clock_end = sf_clock_end};
static const strata_sf_ops real_ops = {.apply = NULL, .clock_end = sf_clock_end};

static const strata_app log_app = {.name = "sfblog",
                                   .flags = STRATA_APP_ADDITIVE,
                                   .n_partials = 2,
                                   .compute = sf_compute,
                                   .evaluate = sf_evaluate,
                                   .sf = &log_ops};
static const strata_app real_app = {.name = "sfbreal",
                                    .flags = STRATA_APP_ADDITIVE,
                                    .n_partials = 2,
                                    .compute = sf_compute,
                                    .evaluate = sf_evaluate,
                                    .sf = &real_ops};

/* ---- the worker's callbacks and set-up ------------------------------------ */

static int take_report(void *ud, const pass_report *rep) {
  wctx *c = ud;
  if (rep->pass + 1 != ++c->reports || rep->worker != c->w.me || c->reports > c->k->passes) {
    failf(c, "worker %d: report of pass %d (worker %d) out of order", c->w.me, rep->pass,
          rep->worker);
    return 0;
  }
  if (rep->partials[0] != c->k->cf.C || rep->partials[1] != 1)
    failf(c, "worker %d pass %d: %g computes and %g evaluations", c->w.me, rep->pass,
          rep->partials[0], rep->partials[1]);
  c->stats[rep->pass] = view_of(&rep->stats);
  return 0;
}

/* No control values, and no stop unless the case asks for one; the
 * back-end's idle work runs while the verdict "is awaited", as it would on
 * a worker. */
static int give_control(void *ud, int pass, pass_control *out) {
  wctx *c = ud;
  out->stop = c->k->cf.stop && pass == c->k->cf.stop - 1;
  if (pass != c->controls++) failf(c, "worker %d: control of pass %d out of order", c->w.me, pass);
  for (int i = 0; i < 3 && c->w.waiting; i++) {
    int rc = c->w.waiting(c->w.waiting_ctx);
    if (rc) return rc;
  }
  return 0;
}

static int alloc_block(strata_block *b, size_t len, uint32_t nrows, uint32_t row_bytes) {
  *b = (strata_block){.len = len, .nrows = nrows, .row_bytes = row_bytes};
  if (!len) return 0;
  if (!(b->buf = strata_alloc_aligned(len))) return STRATA_ENOMEM;
  memset(b->buf, 0, len);
  return 0;
}

/* The worker as set-up would leave it in sfb mode: its own schedule, its
 * eval block (data block p: one evaluation per pass), W with the initial
 * values (every worker holds every rotating block). */
static int setup_worker(wctx *c, int me) {
  sfb_case *k = c->k;
  strata__worker *w = &c->w;
  w->app = k->cf.real ? &real_app : &log_app;
  w->state = c;
  w->backend = &strata__sfb_backend;
  w->opts = &k->opts;
  w->me = me;
  w->has_eval = 1;
  w->setup = (strata_setup){.workers = k->cf.P,
                            .strata = k->cf.P,
                            .depth = 1,
                            .passes = k->cf.passes,
                            .seed = k->seed,
                            .worker = me,
                            .mode = STRATA_MODE_SFB};
  w->report = take_report;
  w->control = give_control;
  w->report_ud = c;
  int err = strata_loopback_endpoint(k->lb, me + 1, &c->t);
  if (err) return err;
  w->t = &c->t;
  if ((err = strata_schedule_unpack(&w->sched, k->packed, k->packed_len))) return err;
  const strata_schedule *s = &w->sched;
  w->data = strata_calloc((size_t)s->n_data, sizeof *w->data);
  w->eval = strata_calloc((size_t)s->n_data, sizeof *w->eval);
  w->res = strata_calloc((size_t)s->n_resident, sizeof *w->res);
  w->rot = strata_calloc((size_t)s->n_rotating, sizeof *w->rot);
  if (!w->data || !w->eval || !w->res || !w->rot) return STRATA_ENOMEM;
  if ((err = alloc_block(&w->eval[me], 16, 0, 0))) return err;
  if ((err = alloc_block(&w->rot[0], sizeof k->w0, D, J * sizeof(float)))) return err;
  memcpy(w->rot[0].buf, k->w0, sizeof k->w0);
  c->stats = calloc((size_t)k->cf.passes, sizeof *c->stats);
  c->snap = calloc((size_t)k->cf.passes * D * J, sizeof *c->snap);
  return c->stats && c->snap ? 0 : STRATA_ENOMEM;
}

static void *worker_main(void *arg) {
  wctx *c = arg;
  if (strata__worker_loop(&c->w)) failf(c, "worker %d: loop failed: %s", c->w.me, strata_err_msg());
  return NULL;
}

/* ---- the checks ----------------------------------------------------------- */

#define CHECK(cond, ...)               \
  do {                                 \
    if (!(cond)) {                     \
      snprintf(msg, msz, __VA_ARGS__); \
      rc = 1;                          \
      goto out;                        \
    }                                  \
  } while (0)

typedef struct key {
  int clock, end, sender, k;
} key;

static int key_less(key a, key b) {
  if (a.clock != b.clock) return a.clock < b.clock;
  if (a.end != b.end) return a.end < b.end;
  if (a.sender != b.sender) return a.sender < b.sender;
  return a.k < b.k;
}

/* The staleness rule as worker me starts clock g (or a pass ends before
 * g), bound s: its own factors of clocks <= g - 1 applied, origin q's of
 * clocks <= g - d(q, me) (s + 1) (whole: <= g - 1), clock_end run for
 * every clock <= g - 1. */
static int check_rule(const sfb_case *k, int me, int g, int s, int whole, const int *applied,
                      int ends, const char *when, char *msg, size_t msz) {
  int rc = 0, T = k->T;
  if (!k->cf.real)
    for (int q = 0; q < k->cf.P; q++) {
      int upto = q == me || whole ? g - 1 : g - k->hops[me][q] * (s + 1);
      for (int c = 0; c <= upto && c < T; c++)
        CHECK(applied[q * T + c] == nf_of(k, q, c),
              "worker %d %s clock %d without worker %d's factors of clock %d (%d of %d applied; "
              "staleness %d, %d hops)",
              me, when, g, q, c, applied[q * T + c], nf_of(k, q, c), s, k->hops[me][q]);
    }
  CHECK(ends == g, "worker %d %s clock %d after clock_end of %d clocks", me, when, g, ends);
out:
  return rc;
}

/* ---- the rule's model under staleness 0 ----------------------------------- */

typedef void (*model_fn)(void *ctx, int kind, int origin, int clock, int g);

/*
 * What worker me's replica does under s = 0 as clock g starts (1 <= g <= T;
 * at a pass's end, g a multiple of C, the pass's end and the next clock's
 * start are one step), from the rule alone: every set of a clock t <= g - 1
 * not applied yet that is due (t + d(o, me) <= g; its own t + 1 <= g) or, at
 * a pass's end, every one, clock by clock from the oldest, in origin order
 * within a clock, then clock_end of each clock from *ends on. next[o] is
 * the first clock of origin o not applied yet. Each step goes to fn.
 */
static void model_batch(const sfb_case *k, int me, int g, int *next, int *ends, model_fn fn,
                        void *ctx) {
  int whole = g % k->cf.C == 0, from = *ends;
  for (int o = 0; o < k->cf.P; o++) from = next[o] < from ? next[o] : from;
  for (int t = from; t <= g - 1; t++) {
    for (int o = 0; o < k->cf.P; o++) {
      int due = t + (o == me ? 1 : k->hops[me][o]);
      if (next[o] == t && (whole || due <= g)) {
        fn(ctx, EV_APPLY, o, t, g);
        next[o]++;
      }
    }
    if (t >= *ends) {
      fn(ctx, EV_END, -1, t, g);
      *ends = t + 1;
    }
  }
}

/* Collects the model's steps as log events, one APPLY per factor. */
static void model_log(void *ctx, int kind, int origin, int clock, int g) {
  void **c = ctx;
  const sfb_case *k = c[0];
  (void)g;
  if (kind == EV_END)
    log_push(c[1], (ev){EV_END, -1, clock, 0});
  else
    for (int i = 0; i < nf_of(k, origin, clock); i++)
      log_push(c[1], (ev){EV_APPLY, origin, clock, i});
}

/* Counts the model's peer sets into the stats of the pass each belongs to
 * (a pass holds the steps of g in (pass C, (pass + 1) C]). */
static void model_stats(void *ctx, int kind, int origin, int clock, int g) {
  void **c = ctx;
  const sfb_case *k = c[0];
  sfb_view *st = (sfb_view *)c[1] + (g - 1) / k->cf.C;
  int me = *(int *)c[2];
  if (kind != EV_APPLY || origin == me) return;
  uint64_t n = (uint64_t)nf_of(k, origin, clock);
  int d = g - 1 - clock;
  st->sets_in++;
  st->factors_in += n;
  st->delay_sum += (uint64_t)d * n;
  st->delay_max = d > st->delay_max ? d : st->delay_max;
  st->delay_hist[d < STRATA_TABLE_HIST - 1 ? d : STRATA_TABLE_HIST - 1] += n;
  st->from_mask |= origin < 64 ? 1ull << origin : 0;
}

/*
 * Holds worker me's log (and, unless NULL, the stats it reported per pass)
 * to sfb's contract (the file's comment). 0, or 1 with a message.
 */
static int check_log(const sfb_case *k, int me, const ev *log, size_t n, const sfb_view *stats,
                     char *msg, size_t msz) {
  const int P = k->cf.P, T = k->T, C = k->cf.C, s = k->cf.s, passes = k->passes;
  const int ran = passes * C; /* clocks run */
  int rc = 0;
  int *applied = calloc((size_t)P * T, sizeof *applied);
  key *last = malloc((size_t)P * sizeof *last); /* each sender's last factor applied */
  sfb_view *want = calloc((size_t)passes + 1, sizeof *want);
  if (!applied || !last || !want) abort();
  for (int q = 0; q < P; q++) last[q] = (key){-1, 0, q, 0};
  int g = 0, pass = 0, ends = 0;
  /* Whether the batch under way applies every set of clocks <= g - 1: a
   * pass's end under s = 0 or the last pass's, or close after a stop. */
  int whole = 0;
  key batch = {-1, 1, 0, 0}; /* the last key of the batch under way */
  ev prev = {-1, -1, -1, -1};
  for (size_t x = 0; x < n; x++) {
    ev e = log[x];
    switch (e.kind) {
      case EV_APPLY: {
        int q = e.sender, c = e.clock;
        CHECK(q >= 0 && q < P, "worker %d applied a factor of worker %d", me, q);
        CHECK(c >= 0 && c < T && e.k >= 0 && e.k < nf_of(k, q, c),
              "worker %d applied factor %d of worker %d's clock %d, which was never emitted", me,
              e.k, q, c);
        CHECK(c <= g - 1,
              "worker %d applied worker %d's factor of clock %d while starting clock %d: before "
              "its clock ended (a future clock)",
              me, q, c, g);
        CHECK(q == me || whole || c + k->hops[me][q] <= g,
              "worker %d applied worker %d's factor of clock %d while starting clock %d: before it "
              "was due (%d hops away)",
              me, q, c, g, k->hops[me][q]);
        key kk = {c, 0, q, e.k};
        CHECK(key_less(last[q], kk),
              "worker %d applied worker %d's factor %d of clock %d twice or out of order", me, q,
              e.k, c);
        CHECK(e.k == 0 || (prev.kind == EV_APPLY && prev.sender == q && prev.clock == c &&
                           prev.k == e.k - 1),
              "worker %d applied worker %d's set of clock %d in pieces", me, q, c);
        CHECK(applied[q * T + c] == e.k,
              "worker %d applied worker %d's factor %d of clock %d twice or out of order", me, q,
              e.k, c);
        CHECK(key_less(batch, kk),
              "worker %d applied worker %d's clock %d after (clock %d, worker %d%s): not clock by "
              "clock in worker order",
              me, q, c, batch.clock, batch.sender, batch.end ? ", its clock_end" : "");
        CHECK(ends >= c, "worker %d applied worker %d's clock %d before clock_end of clock %d", me,
              q, c, ends);
        last[q] = batch = kk;
        if (q != me) {
          sfb_view *st = &want[pass];
          int d = g - 1 - c;
          if (e.k == 0) st->sets_in++;
          st->factors_in++;
          st->delay_sum += (uint64_t)d;
          st->delay_max = d > st->delay_max ? d : st->delay_max;
          st->delay_hist[d < STRATA_TABLE_HIST - 1 ? d : STRATA_TABLE_HIST - 1]++;
          st->from_mask |= q < 64 ? 1ull << q : 0;
        }
        applied[q * T + c]++;
        break;
      }
      case EV_END: {
        int t = e.clock;
        CHECK(t == ends, "worker %d ran clock_end of clock %d after %d clock_ends", me, t, ends);
        CHECK(t <= g - 1,
              "worker %d ran clock_end of clock %d while starting clock %d (a future clock)", me, t,
              g);
        key kk = {t, 1, 0, 0};
        CHECK(key_less(batch, kk), "worker %d ran clock_end of clock %d after clock %d's factors",
              me, t, batch.clock);
        if (!k->cf.real)
          for (int q = 0; q < P; q++) {
            if (q != me && (s > 0 || !k->in[me][q])) continue;
            CHECK(applied[q * T + t] == nf_of(k, q, t),
                  "worker %d ran clock_end of clock %d before worker %d's factors of it", me, t, q);
          }
        batch = kk;
        ends++;
        break;
      }
      case EV_COMPUTE:
        CHECK(e.clock == g, "worker %d computed clock %d after %d clocks", me, e.clock, g);
        if ((rc = check_rule(k, me, g, s, 0, applied, ends, "started", msg, msz))) goto out;
        g++;
        /* The pass's end comes next. */
        whole = g % C == 0 && (s == 0 || g == k->cf.passes * C);
        batch = (key){-1, 1, 0, 0};
        break;
      case EV_EVAL:
        CHECK(e.clock == pass && g == (pass + 1) * C, "worker %d evaluated pass %d after %d clocks",
              me, e.clock, g);
        if ((rc = check_rule(k, me, g, s, whole, applied, ends, "ended a pass before", msg, msz)))
          goto out;
        pass++;
        /* After the last pass reported: close, after a stop. */
        whole = pass == passes;
        batch = (key){-1, 1, 0, 0};
        break;
      default:
        CHECK(0, "worker %d: event %d", me, e.kind);
    }
    prev = e;
  }
  CHECK(g == ran && pass == passes && ends == ran,
        "worker %d ended after %d clocks, %d passes, %d clock_ends", me, g, pass, ends);
  /* At the end every set of the clocks run is in, stopped or not. */
  if (!k->cf.real)
    for (int q = 0; q < P; q++)
      for (int c = 0; c < ran; c++)
        CHECK(applied[q * T + c] == nf_of(k, q, c),
              "worker %d never applied all of worker %d's factors of clock %d", me, q, c);

  /* s = 0: exactly the model's applications and clock_ends, in its order. */
  if (!k->cf.real && s == 0) {
    ev_log model = {0};
    int next[MAXP] = {0}, mends = 0;
    void *ctx[2] = {(void *)k, &model};
    for (int t = 1; t <= ran; t++) model_batch(k, me, t, next, &mends, model_log, ctx);
    size_t x = 0, y = 0;
    for (;; x++, y++) {
      while (x < n && log[x].kind != EV_APPLY && log[x].kind != EV_END) x++;
      if (x == n || y == model.n) break;
      ev a = log[x], b = model.v[y];
      if (a.kind != b.kind || a.sender != b.sender || a.clock != b.clock || a.k != b.k) {
        snprintf(msg, msz,
                 "worker %d under staleness 0: step %zu is %s of worker %d's clock %d (factor %d), "
                 "the rule's is %s of worker %d's clock %d (factor %d)",
                 me, y, a.kind == EV_END ? "clock_end" : "an application", a.sender, a.clock, a.k,
                 b.kind == EV_END ? "clock_end" : "an application", b.sender, b.clock, b.k);
        rc = 1;
        break;
      }
    }
    if (!rc && (x != n || y != model.n)) {
      snprintf(msg, msz, "worker %d under staleness 0: %zu steps, the rule's model %zu", me, y,
               model.n);
      rc = 1;
    }
    free(model.v);
    if (rc) goto out;
  }

  if (!stats) goto out;
  /* The real app's log has no applications: under s = 0 the model's. */
  if (k->cf.real) {
    memset(want, 0, (size_t)passes * sizeof *want);
    int next[MAXP] = {0}, mends = 0, who = me;
    void *ctx[3] = {(void *)k, want, &who};
    for (int t = 1; t <= ran; t++) model_batch(k, me, t, next, &mends, model_stats, ctx);
  }
  /* Each origin's set once; its own to Q out-peers, each set taken in to
   * its children in the origin's tree. Relays go out as sets come in,
   * counted in the pass under way then: only the run's sum is exact. */
  uint64_t recv = 0, recv_want = 0, sent = 0, sent_want = 0;
  for (int q = 0; q < P; q++)
    for (int c = 0; c < ran; c++) {
      if (q != me) recv_want += set_len(k, q, c);
      sent_want += (uint64_t)(q == me ? (P > 1 ? k->cf.Q : 0) : k->kids[me][q]) * set_len(k, q, c);
    }
  for (int p = 0; p < passes; p++) {
    const sfb_view *st = &stats[p], *w = &want[p];
    uint64_t out_want = 0, own_sent = 0;
    for (int c = p * C; c < (p + 1) * C; c++) {
      out_want += (uint64_t)nf_of(k, me, c);
      own_sent += (uint64_t)(P > 1 ? k->cf.Q : 0) * set_len(k, me, c);
    }
    CHECK(st->sets_in == w->sets_in, "worker %d pass %d: sets_in %llu, the log shows %llu", me, p,
          (unsigned long long)st->sets_in, (unsigned long long)w->sets_in);
    CHECK(st->factors_in == w->factors_in, "worker %d pass %d: factors_in %llu, the log shows %llu",
          me, p, (unsigned long long)st->factors_in, (unsigned long long)w->factors_in);
    CHECK(st->delay_sum == w->delay_sum, "worker %d pass %d: delay_sum %llu, the log shows %llu",
          me, p, (unsigned long long)st->delay_sum, (unsigned long long)w->delay_sum);
    CHECK(st->delay_max == w->delay_max && st->delay_max <= (P > 1 ? k->tau * (s + 1) - 1 : 0),
          "worker %d pass %d: delay_max %d, the log shows %d (staleness %d, tau %d)", me, p,
          st->delay_max, w->delay_max, s, k->tau);
    for (int d = 0; d < STRATA_TABLE_HIST; d++)
      CHECK(st->delay_hist[d] == w->delay_hist[d],
            "worker %d pass %d: delay_hist[%d] %llu, the log shows %llu", me, p, d,
            (unsigned long long)st->delay_hist[d], (unsigned long long)w->delay_hist[d]);
    CHECK(st->from_mask == w->from_mask, "worker %d pass %d: from_mask %#llx, the log shows %#llx",
          me, p, (unsigned long long)st->from_mask, (unsigned long long)w->from_mask);
    CHECK(st->factors_out == out_want, "worker %d pass %d: factors_out %llu, want %llu", me, p,
          (unsigned long long)st->factors_out, (unsigned long long)out_want);
    CHECK(st->clocks == C, "worker %d pass %d: %d clocks, want %d", me, p, st->clocks, C);
    CHECK(st->bytes_sent >= own_sent, "worker %d pass %d: bytes_sent %llu, its own sets' %llu", me,
          p, (unsigned long long)st->bytes_sent, (unsigned long long)own_sent);
    recv += st->bytes_recv;
    sent += st->bytes_sent;
    if (me == 0 && P > 1)
      CHECK(st->drift >= 0 && st->drift_rows == D, "worker 0 pass %d: drift %g over %u rows", p,
            st->drift, st->drift_rows);
    else
      CHECK(st->drift == -1, "worker %d pass %d: drift %g, want -1 (not measured)", me, p,
            st->drift);
  }
  /* A stopped run's last sets may come in (and go on) after its last
   * report. */
  CHECK(k->cf.stop ? recv <= recv_want : recv == recv_want,
        "worker %d: bytes_recv %llu over the run, want %llu", me, (unsigned long long)recv,
        (unsigned long long)recv_want);
  CHECK(k->cf.stop ? sent <= sent_want : sent == sent_want,
        "worker %d: bytes_sent %llu over the run, want %llu", me, (unsigned long long)sent,
        (unsigned long long)sent_want);
out:
  free(applied);
  free(last);
  free(want);
  return rc;
}

/* ---- the simulation (s = 0, real app) ----------------------------------- */

typedef struct sim_ctx {
  sfb_case *k;
  int p;
  float *W;
  strata_sf_factors *sets; /* T per worker: sets[o * T + t] */
} sim_ctx;

static void sim_step(void *ctx, int kind, int origin, int clock, int g) {
  sim_ctx *c = ctx;
  sfb_case *k = c->k;
  (void)g;
  if (kind == EV_APPLY) {
    const strata_sf_factors *f = &c->sets[(size_t)origin * k->T + clock];
    strata_block W = {.buf = c->W, .len = sizeof(float) * D * J, .nrows = D, .row_bytes = J * 4};
    strata__sf_apply_all(f->buf, f->len, &W, NULL, NULL);
    return;
  }
  decay(c->W);
  uint64_t *h = &k->sim_digest[c->p * k->cf.passes + clock / k->cf.C];
  *h = fnv(clock % k->cf.C ? *h : 0xcbf29ce484222325ull, c->W, sizeof(float) * D * J);
}

static void simulate(sfb_case *k) {
  const int P = k->cf.P, T = k->T, C = k->cf.C;
  const size_t cells = (size_t)D * J;
  k->sim = calloc((size_t)P * (T + 1) * cells, sizeof *k->sim);
  k->sim_digest = calloc((size_t)P * k->cf.passes, sizeof *k->sim_digest);
  k->sim_drift = calloc((size_t)k->cf.passes, sizeof *k->sim_drift);
  assert_non_null(k->sim);
  assert_non_null(k->sim_digest);
  assert_non_null(k->sim_drift);
  float *cur = malloc((size_t)P * cells * sizeof *cur);
  strata_sf_factors *sets = calloc((size_t)P * T, sizeof *sets);
  int *next = calloc((size_t)P * P, sizeof *next), *ends = calloc((size_t)P, sizeof *ends);
  assert_non_null(cur);
  assert_non_null(sets);
  assert_non_null(next);
  assert_non_null(ends);
  for (int p = 0; p < P; p++) memcpy(cur + p * cells, k->w0, sizeof k->w0);
  for (int c = 0; c < T; c++) {
    for (int p = 0; p < P; p++) {
      strata_sf_factors *f = &sets[(size_t)p * T + c];
      memcpy(k->sim + ((size_t)p * (T + 1) + c) * cells, cur + p * cells, cells * sizeof *cur);
      strata__sf_init(f, J, D);
      assert_int_equal(strata__sf_reset(f, c, p), 0);
      assert_int_equal(emit_set(k, p, c, cur + p * cells, f), 0);
    }
    for (int p = 0; p < P; p++) {
      sim_ctx sc = {k, p, cur + p * cells, sets};
      model_batch(k, p, c + 1, next + (size_t)p * P, &ends[p], sim_step, &sc);
    }
    if ((c + 1) % C == 0) {
      double worst = 0;
      for (size_t x = 0; x < cells; x++) {
        float lo = cur[x], hi = lo;
        for (int p = 1; p < P; p++) {
          float v = cur[p * cells + x];
          lo = v < lo ? v : lo;
          hi = v > hi ? v : hi;
        }
        if ((double)hi - (double)lo > worst) worst = (double)hi - (double)lo;
      }
      k->sim_drift[c / C] = worst;
    }
  }
  for (int p = 0; p < P; p++)
    memcpy(k->sim + ((size_t)p * (T + 1) + T) * cells, cur + p * cells, cells * sizeof *cur);
  for (size_t i = 0; i < (size_t)P * T; i++) strata__sf_close(&sets[i]);
  free(cur);
  free(sets);
  free(next);
  free(ends);
}

/* ---- running a case ----------------------------------------------------- */

static uint64_t test_seed(const char *name) {
  const char *e = getenv("STRATA_TEST_SEED");
  uint64_t seed =
      e && *e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
  print_message("%s: STRATA_TEST_SEED=%llu\n", name, (unsigned long long)seed);
  return seed;
}

typedef void (*inspect_fn)(sfb_case *k, wctx *ctx);

static void run_case(const sfb_conf *cf, uint64_t seed, inspect_fn inspect) {
  sfb_case k;
  memset(&k, 0, sizeof k);
  k.cf = *cf;
  k.seed = seed;
  k.T = cf->C * cf->passes;
  k.passes = cf->stop ? cf->stop - 1 : cf->passes;
  const int P = cf->P;
  char what[160];
  snprintf(what, sizeof what,
           "P=%d Q=%d s=%d C=%d passes=%d delay=%d reorder=%d %s stop=%d seed %llu", P, cf->Q,
           cf->s, cf->C, cf->passes, cf->max_delay, cf->reorder, cf->real ? "real" : "log",
           cf->stop, (unsigned long long)seed);
  assert_int_equal(strata_schedule_minibatches(&k.sched, P, cf->C), 0);
  assert_int_equal(strata_schedule_pack(&k.sched, &k.packed, &k.packed_len), 0);
  if (P > 1) {
    strata__topology topo;
    assert_int_equal(strata__sfb_topology(P, cf->Q, &topo), 0);
    for (int p = 0; p < P; p++)
      for (int j = 0; j < cf->Q; j++) {
        int r = topo.peers[p * cf->Q + j];
        assert_int_not_equal(r, p);
        k.in[r][p] = 1;
        k.n_in[r]++;
      }
    /* Hops by a breadth-first search of this file's, tau their largest. */
    for (int o = 0; o < P; o++) {
      int queue[MAXP], head = 0, tail = 0;
      for (int r = 0; r < P; r++) k.hops[r][o] = -1;
      k.hops[o][o] = 0;
      queue[tail++] = o;
      while (head < tail) {
        int u = queue[head++];
        for (int r = 0; r < P; r++)
          if (k.in[r][u] && k.hops[r][o] < 0) {
            k.hops[r][o] = k.hops[u][o] + 1;
            queue[tail++] = r;
            k.tau = k.hops[r][o] > k.tau ? k.hops[r][o] : k.tau;
          }
      }
      assert_int_equal(tail, P);
    }
    assert_int_equal(k.tau, topo.tau);
    /* Who relays to whom: the module's routes, whose trees
     * test_sfb_topology checks. */
    int *parent = malloc(2 * sizeof(int) * (size_t)P * P);
    assert_non_null(parent);
    assert_int_equal(strata__topology_routes(&topo, parent, parent + P * P), 0);
    for (int o = 0; o < P; o++)
      for (int r = 0; r < P; r++)
        if (r != o) k.kids[parent[o * P + r]][o]++;
    free(parent);
    strata__topology_close(&topo);
  }
  strata_rng r;
  strata_rng_seed(&r, seed);
  for (int x = 0; x < D * J; x++) k.w0[x] = frand(&r);
  if (cf->real) simulate(&k);
  strata_loopback_conf lc = {.size = P + 1,
                             .seed = seed,
                             .max_delay = cf->max_delay,
                             .reorder = cf->reorder,
                             .tag_ub = INT32_MAX};
  assert_int_equal(strata_loopback_open(&lc, &k.lb), 0);
  k.opts.mode = STRATA_MODE_SFB;
  k.opts.depth = 1;
  k.opts.passes = cf->passes;
  k.opts.staleness = cf->s;
  strata__sfb_settings set = {.peers = cf->peers_zero ? 0 : cf->Q, .check_replicas = cf->real};
  memcpy(&k.opts.mode_settings, &set, sizeof set);
  wctx ctx[MAXP];
  pthread_t th[MAXP];
  memset(ctx, 0, sizeof ctx);
  for (int i = 0; i < P; i++) {
    ctx[i].k = &k;
    assert_int_equal(setup_worker(&ctx[i], i), 0);
  }
  for (int i = 0; i < P; i++)
    assert_int_equal(pthread_create(&th[i], NULL, worker_main, &ctx[i]), 0);
  for (int i = 0; i < P; i++) pthread_join(th[i], NULL);

  char msg[512];
  for (int i = 0; i < P; i++) {
    if (ctx[i].fail) fail_msg("%s: %s", what, ctx[i].msg);
    assert_int_equal(ctx[i].reports, k.passes);
    assert_int_equal(ctx[i].w.stopped, cf->stop != 0);
    if (check_log(&k, i, ctx[i].log.v, ctx[i].log.n, ctx[i].stats, msg, sizeof msg))
      fail_msg("%s: %s", what, msg);
  }
  const size_t cells = (size_t)D * J, bytes = cells * sizeof(float);
  int full = P > 1 && cf->Q == P - 1;
  for (int i = 0; i < P; i++) {
    const float *W = ctx[i].w.rot[0].buf;
    if (cf->real) {
      /* Every pass's model and the final one are the simulation's. */
      for (int p = 0; p < cf->passes; p++) {
        if (memcmp(ctx[i].snap + p * cells,
                   k.sim + ((size_t)i * (k.T + 1) + (p + 1) * cf->C) * cells, bytes))
          fail_msg("%s: worker %d's replica after pass %d is not the simulation's", what, i, p);
        const sfb_view *st = &ctx[i].stats[p];
        if (!st->replica_checked || st->replica_digest != k.sim_digest[i * cf->passes + p])
          fail_msg("%s: worker %d's replica digest of pass %d is %016llx, the simulation's %016llx",
                   what, i, p, (unsigned long long)st->replica_digest,
                   (unsigned long long)k.sim_digest[i * cf->passes + p]);
        if (i == 0 && P > 1 && st->drift != k.sim_drift[p])
          fail_msg("%s: drift of pass %d is %g, the simulation's %g", what, p, st->drift,
                   k.sim_drift[p]);
      }
      if (memcmp(W, k.sim + ((size_t)i * (k.T + 1) + k.T) * cells, bytes))
        fail_msg("%s: worker %d's final replica is not the simulation's", what, i);
    }
    /* Full broadcast, staleness 0: every replica is the same bit for bit
     * after every pass and at the end. */
    if (full && cf->s == 0 && i > 0) {
      if (memcmp(ctx[i].snap, ctx[0].snap, bytes * (size_t)k.passes))
        fail_msg("%s: worker %d's replica differs from worker 0's after a pass", what, i);
      if (memcmp(W, ctx[0].w.rot[0].buf, bytes))
        fail_msg("%s: worker %d's final replica differs from worker 0's", what, i);
      for (int p = 0; p < cf->passes && cf->real; p++)
        if (ctx[i].stats[p].replica_digest != ctx[0].stats[p].replica_digest)
          fail_msg("%s: replica digests of pass %d differ between workers 0 and %d", what, p, i);
    }
  }
  /* ... having applied the same factors in the same order. */
  for (int i = 1; i < P && full && cf->s == 0 && !cf->real; i++) {
    const ev_log *a = &ctx[0].log, *b = &ctx[i].log;
    size_t x = 0, y = 0;
    for (;;) {
      while (x < a->n && a->v[x].kind != EV_APPLY) x++;
      while (y < b->n && b->v[y].kind != EV_APPLY) y++;
      if (x == a->n || y == b->n) break;
      if (a->v[x].sender != b->v[y].sender || a->v[x].clock != b->v[y].clock ||
          a->v[x].k != b->v[y].k)
        fail_msg("%s: workers 0 and %d applied factors in different orders", what, i);
      x++, y++;
    }
    if (x != a->n || y != b->n) fail_msg("%s: workers 0 and %d applied different factors", what, i);
  }
  if (full && cf->s == 0 && P > 1)
    for (int p = 0; p < k.passes; p++)
      if (ctx[0].stats[p].drift != 0)
        fail_msg("%s: drift %g after pass %d under full broadcast and staleness 0", what,
                 ctx[0].stats[p].drift, p);
  if (inspect) inspect(&k, ctx);

  for (int i = 0; i < P; i++) {
    strata__worker_close(&ctx[i].w);
    free(ctx[i].log.v);
    free(ctx[i].stats);
    free(ctx[i].snap);
  }
  strata_loopback_close(k.lb);
  strata_free(k.packed);
  strata_schedule_close(&k.sched);
  free(k.sim);
  free(k.sim_digest);
  free(k.sim_drift);
}

/* ---- the tests ----------------------------------------------------------- */

/* Delivery, the staleness rule, the order and the stats, over P = 2..6,
 * full and partial broadcast (Q = 1 a ring), staleness 0..3. */
static void test_sfb_log(void **state) {
  (void)state;
  uint64_t seed = test_seed("test_sfb_log");
  static const sfb_conf cases[] = {
      /* P, Q, s, C, passes, max_delay, reorder, real, peers_zero, stop */
      {2, 1, 0, 4, 3, 2, 1, 0, 0, 0}, {2, 1, 2, 3, 3, 4, 0, 0, 0, 0},
      {3, 2, 0, 4, 3, 3, 1, 0, 0, 0}, {3, 1, 1, 4, 2, 4, 1, 0, 0, 0},
      {4, 3, 0, 3, 3, 0, 0, 0, 0, 0}, {4, 2, 1, 4, 3, 3, 1, 0, 0, 0},
      {4, 1, 3, 2, 4, 4, 1, 0, 0, 0}, {5, 2, 2, 4, 2, 2, 1, 0, 0, 0},
      {5, 4, 1, 1, 4, 3, 0, 0, 0, 0}, {6, 5, 0, 2, 3, 2, 1, 0, 0, 0},
      {6, 2, 0, 3, 2, 3, 1, 0, 0, 0}, {6, 3, 3, 4, 2, 4, 1, 0, 0, 0},
      {6, 1, 1, 3, 2, 1, 0, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], seed + i, NULL);
}

/* Real-valued replicas under staleness 0 against their simulation; full
 * broadcast makes them one (asked both as peers = P - 1 and peers = 0). */
static void test_sfb_replicas(void **state) {
  (void)state;
  uint64_t seed = test_seed("test_sfb_replicas");
  static const sfb_conf cases[] = {
      /* P, Q, s, C, passes, max_delay, reorder, real, peers_zero, stop */
      {1, 0, 0, 3, 2, 0, 0, 1, 0, 0}, {2, 1, 0, 4, 3, 3, 1, 1, 0, 0},
      {3, 2, 0, 3, 3, 2, 1, 1, 1, 0}, {4, 2, 0, 3, 2, 4, 1, 1, 0, 0},
      {5, 4, 0, 2, 3, 3, 0, 1, 0, 0}, {6, 5, 0, 3, 2, 2, 1, 1, 1, 0},
      {6, 2, 0, 2, 2, 3, 1, 1, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], seed + i, NULL);
}

/* ---- the checks can fail --------------------------------------------------- */

/* The first set of worker me's log of a clock >= min_clock: from a peer
 * (from_peer; hops away at least, when hops > 0) or its own. */
static size_t find_apply_hops(const sfb_case *k, const ev *v, size_t n, int me, int from_peer,
                              int min_clock, int hops) {
  for (size_t x = 0; x < n; x++)
    if (v[x].kind == EV_APPLY && (from_peer ? v[x].sender != me : v[x].sender == me) &&
        v[x].clock >= min_clock && v[x].k == 0 && (!from_peer || k->hops[me][v[x].sender] >= hops))
      return x;
  fail_msg("no application to break");
  return 0;
}

static size_t find_apply(const sfb_case *k, const ev *v, size_t n, int me, int from_peer,
                         int min_clock) {
  return find_apply_hops(k, v, n, me, from_peer, min_clock, 0);
}

static size_t find_kind(const ev *v, size_t n, int kind, int clock) {
  for (size_t x = 0; x < n; x++)
    if (v[x].kind == kind && v[x].clock == clock) return x;
  fail_msg("no event %d of clock %d", kind, clock);
  return 0;
}

/* Moves events [from, from + len) to stand before index `to` (to <= from)
 * or after it (to > from). */
static void move_events(ev *v, size_t from, size_t len, size_t to) {
  ev tmp[8];
  assert_true(len <= 8);
  memcpy(tmp, v + from, len * sizeof *v);
  if (to < from) {
    memmove(v + to + len, v + to, (from - to) * sizeof *v);
    memcpy(v + to, tmp, len * sizeof *v);
  } else {
    memmove(v + from, v + from + len, (to - from - len + 1) * sizeof *v);
    memcpy(v + to - len + 1, tmp, len * sizeof *v);
  }
}

static void expect_caught(const sfb_case *k, int me, const ev *v, size_t n, const sfb_view *st,
                          const char *words) {
  char msg[512] = "";
  if (!check_log(k, me, v, n, st, msg, sizeof msg))
    fail_msg("a broken run passed the checks (expected \"%s\")", words);
  if (!strstr(msg, words)) fail_msg("expected \"%s\", got: %s", words, msg);
}

static void break_runs(sfb_case *k, wctx *ctx) {
  const int me = 1, s = k->cf.s;
  const ev *orig = ctx[me].log.v;
  size_t n = ctx[me].log.n, set;
  char msg[512];
  assert_int_equal(check_log(k, me, orig, n, ctx[me].stats, msg, sizeof msg), 0);
  ev *v = malloc((n + 1) * sizeof *v);
  sfb_view *st = malloc((size_t)k->cf.passes * sizeof *st);
  assert_non_null(v);
  assert_non_null(st);
#define FRESH() \
  (memcpy(v, orig, n * sizeof *v), memcpy(st, ctx[me].stats, (size_t)k->cf.passes * sizeof *st))

  /* sfb applying a future clock: a peer's set of clock c applied before
   * this worker computed c. */
  FRESH();
  set = find_apply(k, v, n, me, 1, 1);
  int c = v[set].clock, len = nf_of(k, v[set].sender, c);
  move_events(v, set, (size_t)len, find_kind(v, n, EV_COMPUTE, c));
  expect_caught(k, me, v, n, NULL, "(a future clock)");

  /* sfb not waiting: an in-peer's set of clock 0 applied only after the
   * worker started clock 1 + s. */
  FRESH();
  set = 0;
  while (v[set].kind != EV_APPLY || v[set].sender == me || !k->in[me][v[set].sender]) set++;
  assert_int_equal(v[set].clock, 0);
  len = nf_of(k, v[set].sender, 0);
  move_events(v, set, (size_t)len, find_kind(v, n, EV_COMPUTE, 1 + s));
  expect_caught(k, me, v, n, NULL, "started clock");

  /* A lost set. */
  FRESH();
  set = find_apply(k, v, n, me, 1, k->T - 1);
  len = nf_of(k, v[set].sender, v[set].clock);
  memmove(v + set, v + set + len, (n - set - (size_t)len) * sizeof *v);
  expect_caught(k, me, v, n - (size_t)len, NULL, "without");

  /* A factor applied twice. */
  FRESH();
  set = find_apply(k, v, n, me, 1, 2);
  memmove(v + set + 1, v + set, (n - set) * sizeof *v);
  expect_caught(k, me, v, n + 1, NULL, "twice");

  /* Another worker's own set applied late: its own factors of a clock must
   * be in before the next clock. */
  FRESH();
  set = find_apply(k, v, n, me, 0, 0);
  len = nf_of(k, me, 0);
  move_events(v, set, (size_t)len, find_kind(v, n, EV_COMPUTE, 1));
  expect_caught(k, me, v, n, NULL, "worker 1's factors of");

  /* A relayed set applied before it is due: a set from 2 hops away or
   * more, of a clock c in the pass's middle, applied as clock c + 1
   * starts. */
  FRESH();
  set = find_apply_hops(k, v, n, me, 1, 0, 2);
  while (v[set].kind != EV_APPLY || v[set].k || k->hops[me][v[set].sender] < 2 ||
         (v[set].clock + 1) % k->cf.C == 0)
    set++;
  c = v[set].clock;
  len = nf_of(k, v[set].sender, c);
  move_events(v, set, (size_t)len, find_kind(v, n, EV_COMPUTE, c) + 1);
  expect_caught(k, me, v, n, NULL, "before it was due");

  /* Within a clock, not in worker order: two sets of one batch swapped. */
  FRESH();
  size_t a = 0;
  for (; a + 1 < n; a++)
    if (v[a].kind == EV_APPLY && v[a + 1].kind == EV_APPLY && v[a].clock == v[a + 1].clock &&
        v[a].sender != v[a + 1].sender && nf_of(k, v[a].sender, v[a].clock) == 1 &&
        nf_of(k, v[a + 1].sender, v[a + 1].clock) == 1)
      break;
  if (a + 1 < n) {
    ev t = v[a];
    v[a] = v[a + 1];
    v[a + 1] = t;
    expect_caught(k, me, v, n, NULL, "not clock by clock in worker order");
  }

  /* A missing clock_end. */
  FRESH();
  set = find_kind(v, n, EV_END, 2);
  memmove(v + set, v + set + 1, (n - set - 1) * sizeof *v);
  expect_caught(k, me, v, n - 1, NULL, "clock_end");

  /* Stats that disagree with the log. */
  FRESH();
  st[1].factors_in++;
  expect_caught(k, me, v, n, st, "factors_in");
  FRESH();
  st[0].sets_in--;
  expect_caught(k, me, v, n, st, "sets_in");
  FRESH();
  st[0].delay_hist[0]--;
  st[0].delay_hist[1]++;
  expect_caught(k, me, v, n, st, "delay_hist[0]");
  FRESH();
  st[1].from_mask ^= 1ull << me;
  expect_caught(k, me, v, n, st, "from_mask");
  FRESH();
  st[0].bytes_recv += 24;
  expect_caught(k, me, v, n, st, "bytes_recv");
#undef FRESH
  free(v);
  free(st);
}

/* Staleness 0 on a partial broadcast: sets applied out of order are
 * caught. */
static void break_order(sfb_case *k, wctx *ctx) {
  const int me = 2;
  size_t n = ctx[me].log.n;
  ev *v = malloc(n * sizeof *v);
  assert_non_null(v);
  memcpy(v, ctx[me].log.v, n * sizeof *v);
  /* The sets applied after the worker computed clock 5 (the middle of
   * pass 1: its in-peers' and its own of clock 5, the far worker's of
   * clock 4), in reverse order (each set whole). */
  size_t a = find_kind(v, n, EV_COMPUTE, 5) + 1, b = a;
  while (b < n && v[b].kind == EV_APPLY) b++;
  ev *sets = malloc((b - a) * sizeof *sets);
  assert_non_null(sets);
  size_t out = 0, end = b;
  while (end > a) {
    size_t start = end - 1;
    while (start > a && v[start].k > 0) start--;
    memcpy(sets + out, v + start, (end - start) * sizeof *v);
    out += end - start;
    end = start;
  }
  assert_true(sets[0].sender != v[a].sender); /* at least two sets */
  memcpy(v + a, sets, (b - a) * sizeof *v);
  free(sets);
  expect_caught(k, me, v, n, NULL, "not clock by clock in worker order");
  free(v);
}

/* A stop verdict at the start of a pass, the same on every worker: the
 * run ends there, every set of the clocks run is applied (close), and the
 * passes run reported. Stop at pass 0 runs no clock at all. */
static void test_sfb_stop(void **state) {
  (void)state;
  uint64_t seed = test_seed("test_sfb_stop");
  static const sfb_conf cases[] = {
      /* P, Q, s, C, passes, max_delay, reorder, real, peers_zero, stop */
      {4, 2, 1, 3, 4, 3, 1, 0, 0, 3},
      {3, 2, 2, 2, 3, 2, 1, 0, 0, 2},
      {5, 4, 3, 2, 3, 4, 1, 0, 0, 2},
      {2, 1, 0, 2, 2, 0, 0, 0, 0, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], seed + i, NULL);
}

/* More workers than a 64-bit mask has bits, partial broadcast: in-peers
 * numbered 64 and above are in-peers too. */
static void test_sfb_many(void **state) {
  (void)state;
  uint64_t seed = test_seed("test_sfb_many");
  const sfb_conf many = {66, 2, 1, 2, 2, 1, 1, 0, 0, 0};
  run_case(&many, seed, NULL);
}

static void test_checker_catches_broken_runs(void **state) {
  (void)state;
  uint64_t seed = test_seed("test_checker_catches_broken_runs");
  const sfb_conf partial = {5, 2, 1, 4, 2, 3, 1, 0, 0, 0};
  run_case(&partial, seed, break_runs);
  const sfb_conf ordered = {4, 2, 0, 4, 2, 2, 1, 0, 0, 0};
  run_case(&ordered, seed + 1, break_order);
}

int main(void) {
  alarm(WATCHDOG_S * STRATA_TEST_TIME_SCALE);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_sfb_log, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sfb_replicas, setup, teardown),
      cmocka_unit_test_setup_teardown(test_checker_catches_broken_runs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sfb_stop, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sfb_many, setup, teardown),
  };
  return cmocka_run_group_tests_name("sfb_loopback", tests, NULL, NULL);
}
