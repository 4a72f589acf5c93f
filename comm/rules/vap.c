/*
 * VAP, value-bounded asynchronous parallel (comm/rule.h; Dai et al., "High-
 * performance distributed ML at scale through parameter server consistency
 * models", the ideal model their ESSP approximates): whenever a worker
 * computes, the updates of every worker that are in transit, not yet seen
 * by all workers, are at most v_thr in max-norm.
 *
 * What strata enforces. A worker's update of a row is in transit from the
 * moment its table takes it (inc, at the chunk's release, right after the
 * compute that made it) until every worker that reads the row has it in its
 * cache. Per row and worker the table keeps the in-transit sum's bound, the
 * sum over those updates of |delta| in each component (its oplog's pending
 * sum counts as one update): any part of them that some reader misses is at
 * most that, component by component. A worker never lets that bound exceed
 * V (--value-bound; with --value-decay sqrt, V / sqrt(1 + c) at its clock
 * c) in any component: before adding a delta that would, it sends the row's
 * pending sum at once and waits until enough of what it sent has been seen
 * by all; a delta larger than V on its own goes in pieces of at most V, one
 * at a time (whole numbers in whole pieces). So whenever any worker reads a
 * row, it misses at most V of any other worker's released updates to it, in
 * every component.
 *
 * Model values only. The bound covers the first value_len floats of a row
 * (strata_table_conf.value_len; 0: all of them), the model's values; the
 * rest is an optimiser's state (mf's AdaGrad sums of squared gradients),
 * whose deltas may be far larger than any useful V and would otherwise be
 * cut into hundreds of round trips. Those floats ride in the same messages
 * as the values, neither bounded nor measured: a split delta's state part
 * goes whole with its first piece.
 *
 * Seen by all. A worker's first read of a row subscribes it at the row's
 * shard (and waits for the row); the shard then pushes the row to each
 * subscriber, other than the writer, after every batch that changes it, and
 * each subscriber acknowledges every push once the row is in its cache.
 * When every subscriber has acknowledged a batch's pushes, the shard tells
 * the writer the batch is seen by all. A later subscriber gets the row as it
 * then stands, every applied batch in it, and the pushes of every later one.
 *
 * What it does not bound: an update before its release (the compute that
 * makes it, and the wait that holds it back), which the engine cannot
 * observe; and reads never wait on clocks (the app is told staleness -1).
 * The cost is the paper's: the smaller V, the more early sends and round
 * trips a writer waits for.
 *
 * Measured (strata_table_stats.rule; the metrics' "vap" sections): after
 * every delta a worker's table takes, the row's in-transit bound, the most
 * any read anywhere could miss of this worker's updates to the row at that
 * moment (it only shrinks until the next delta): its largest value and its
 * histogram in sixteenths of the bound then, with the early sends, split
 * deltas and waits. A test build switches the holding back off with
 * STRATA_TEST_VAP_OFF=1 in the environment (the measurements go on), so
 * that the probe app can show what the enforcement prevents.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "comm/rule.h"
#include "core/prom.h"
#include "strata/core.h"

/* The mode's own settings (strata_engine_opts.mode_settings). */
typedef struct vap_settings {
  double bound; /* V > 0; 0: not given */
  int decay;    /* 0: none; 1: V / sqrt(1 + clock) */
} vap_settings;
_Static_assert(sizeof(vap_settings) <= STRATA_MODE_SETTINGS, "vap_settings does not fit");

static const char *const decay_names[] = {"none", "sqrt"};

/* Buckets of the in-transit bound in sixteenths of V: 0 (nothing in
 * transit), 1..16 (within the bound), 17..32 (up to twice it), 33 (more). */
#define VAP_HIST 34

/* A worker's figures of a pass (strata_table_stats.rule). */
typedef struct vap_stats {
  double bound;        /* the bound at the pass's last delta (the largest, summed) */
  double max_inflight; /* the largest in-transit bound of a row after a delta */
  double max_ratio;    /* ... relative to the bound then */
  uint64_t deltas;     /* deltas the table took */
  uint64_t flushes;    /* rows sent before their clock ended */
  uint64_t splits;     /* deltas larger than the bound, sent in pieces */
  uint64_t waits;      /* waits for a batch to be seen by all */
  double wait_s;
  uint64_t pushes, acks; /* shard: rows pushed to readers; readers' acknowledgements */
  uint64_t hist[VAP_HIST];
  int32_t enforced, pad;
} vap_stats;
_Static_assert(sizeof(vap_stats) <= STRATA_TABLE_RULE_STATS, "vap_stats does not fit");

/* PS_RULE flags. */
#define VAP_ACK 1u  /* to a shard: words[0] = pushes from it taken in so far */
#define VAP_SEEN 2u /* to a client: words[0] = its batch (seq) seen by all */

/* A batch this client sent that is not yet seen by all. */
typedef struct sent {
  int X;
  uint32_t seq, n;
  uint32_t *rows;
  float *abs; /* |delta| of each row's values */
} sent;

/* A batch a shard applied, waiting for its readers' acknowledgements. */
typedef struct pending {
  int w;
  uint32_t seq;
  int left; /* acknowledgements to come; < 0: done */
} pending;

/* A reader's pushes not acknowledged yet, oldest first (pending ids). */
typedef struct idq {
  uint64_t *v;
  size_t head, n, cap;
} idq;

typedef struct vap {
  vap_settings set;
  int enforce;
  /* client */
  uint32_t Lv;     /* the bounded floats of a row: its first Lv (the model's values) */
  float *abs;      /* n_rows * Lv: per value, sum of |delta| of sent batches not seen by all */
  uint32_t *n_abs; /* per row: such batches */
  sent *sent;
  int n_sent;
  size_t cap_sent;
  uint32_t *taken; /* per shard: its pushes taken in */
  float *piece;    /* L */
  /* shard */
  pending *pend; /* ids base .. base + n_pend - 1 */
  uint64_t base;
  int n_pend;
  size_t cap_pend;
  idq *unacked;      /* per reader */
  uint32_t *acks_in; /* per reader: acknowledgements taken so far */
  uint32_t *list;    /* scratch: rows of one push */
} vap;

static vap_settings settings_of(const strata_mode_settings *s) {
  vap_settings v;
  memset(&v, 0, sizeof v);
  if (s) memcpy(&v, s, sizeof v);
  return v;
}

/* ---- figures ---- */

static vap_stats get_stats(const strata_table *tb) {
  vap_stats s;
  memcpy(&s, tb->st.rule, sizeof s);
  return s;
}

static void put_stats(strata_table *tb, const vap_stats *s) { memcpy(tb->st.rule, s, sizeof *s); }

/* ---- client: the writer's bound ---- */

static double bound_now(const vap *v, const strata_table *tb) {
  double V = v->set.bound;
  return v->set.decay ? V / sqrt(1.0 + (double)(tb->clock > 0 ? tb->clock : 0)) : V;
}

/* The row's in-transit bound if delta (NULL: none) joined it. The pending
 * sum is added in float, as the oplog will hold it, so that the bound this
 * checks is the one measured after the table takes the delta. */
static double inflight(const strata_table *tb, const vap *v, uint32_t row, const float *delta) {
  const float *o = ps_oplog_row(&tb->log, row), *a = v->abs + (size_t)row * v->Lv;
  double worst = 0;
  for (uint32_t j = 0; j < v->Lv; j++) {
    float x = (o ? o[j] : 0.0f) + (delta ? delta[j] : 0.0f);
    double w = fabs(x) + (double)a[j];
    if (w > worst) worst = w;
  }
  return worst;
}

typedef struct room_ctx {
  vap *v;
  uint32_t row;
  const float *delta;
  double V;
} room_ctx;

/* Whether delta fits beside what the row has sent and not seen by all. */
static int has_room(strata_table *tb, void *ctx) {
  room_ctx *r = ctx;
  const float *a = r->v->abs + (size_t)r->row * r->v->Lv;
  (void)tb;
  for (uint32_t j = 0; j < r->v->Lv; j++)
    if (fabs((double)r->delta[j]) + (double)a[j] > r->V) return 0;
  return 1;
}

static int wait_room(strata_table *tb, vap *v, uint32_t row, const float *delta, double V) {
  room_ctx c = {v, row, delta, V};
  if (has_room(tb, &c)) return 0;
  double t0 = strata_now();
  int rc = strata__table_wait(tb, has_room, &c);
  vap_stats s = get_stats(tb); /* read after the wait, which counts acknowledgements */
  s.waits++;
  s.wait_s += strata_now() - t0;
  put_stats(tb, &s);
  return rc;
}

/* Records the row's in-transit bound after a delta. */
static void measure(strata_table *tb, vap *v, uint32_t row, double V) {
  double w = inflight(tb, v, row, NULL), ratio = V > 0 ? w / V : 0;
  vap_stats s = get_stats(tb);
  s.deltas++;
  s.bound = V;
  s.enforced = v->enforce;
  if (w > s.max_inflight) s.max_inflight = w;
  if (ratio > s.max_ratio) s.max_ratio = ratio;
  double b = ceil(ratio * 16 - 1e-9);
  s.hist[w <= 0 ? 0 : b < 1 ? 1 : b >= VAP_HIST - 1 ? VAP_HIST - 1 : (int)b]++;
  put_stats(tb, &s);
}

static int vap_before_inc(strata_table *tb, uint32_t row, const float *delta, int *taken) {
  vap *v = tb->rule_state;
  double V = bound_now(v, tb), dmax = 0;
  for (uint32_t j = 0; j < v->Lv; j++)
    if (!(fabs((double)delta[j]) <= dmax)) dmax = fabs((double)delta[j]);
  *taken = 1;
  int rc = 0;
  /* Within the bound, or not enforced, or not finite (the run diverges;
   * the engine's checks end it): as any table takes a delta. */
  if (!v->enforce || !isfinite(dmax) || inflight(tb, v, row, delta) <= V) {
    strata__table_add(tb, row, delta);
    measure(tb, v, row, V);
    return 0;
  }
  vap_stats s = get_stats(tb);
  if (ps_oplog_row(&tb->log, row)) {
    /* What is pending goes now, and waits to be seen with the rest. */
    if ((rc = strata__table_flush(tb, &row, 1))) return rc;
    s = get_stats(tb);
    s.flushes++;
    put_stats(tb, &s);
  }
  if (dmax <= V) {
    if ((rc = wait_room(tb, v, row, delta, V))) return rc;
    strata__table_add(tb, row, delta);
    measure(tb, v, row, V);
    return 0;
  }
  /* Too large on its own: k pieces of at most V, each seen by all before
   * the next goes. A delta of whole numbers (counts, as LDA's) goes in
   * whole pieces that add up to it exactly, so that no reader sees a
   * fraction of a count; that needs V >= 1. The optimiser's state goes
   * whole with the first piece. */
  int whole = V >= 1;
  for (uint32_t j = 0; j < v->Lv && whole; j++) whole = delta[j] == rintf(delta[j]);
  for (uint32_t j = v->Lv; j < tb->L; j++) v->piece[j] = delta[j];
  double k = ceil(dmax / (whole ? floor(V) : V));
  s = get_stats(tb);
  s.splits++;
  put_stats(tb, &s);
  for (double i = 0; i < k && !rc; i++) {
    if (i == 1)
      for (uint32_t j = v->Lv; j < tb->L; j++) v->piece[j] = 0.0f;
    for (uint32_t j = 0; j < v->Lv; j++) {
      if (!whole) {
        v->piece[j] = (float)((double)delta[j] / k);
        continue;
      }
      /* q in every piece, and the remainder r one unit at a time */
      double q = trunc((double)delta[j] / k), r = (double)delta[j] - q * k;
      v->piece[j] = (float)(q + (i < fabs(r) ? (r > 0 ? 1 : -1) : 0));
    }
    if ((rc = wait_room(tb, v, row, v->piece, V))) break;
    strata__table_add(tb, row, v->piece);
    measure(tb, v, row, V);
    if (i + 1 < k) {
      rc = strata__table_flush(tb, &row, 1);
      s = get_stats(tb);
      s.flushes++;
      put_stats(tb, &s);
    }
  }
  return rc;
}

/* Every batch with rows waits to be seen by all: its |delta| joins the
 * rows' bounds. */
static void vap_batch_sent(strata_table *tb, int X, const void *msg) {
  vap *v = tb->rule_state;
  const ps_hdr *h = msg;
  if (!h->nrows) return;
  sent *e = strata_grow(v->sent, (size_t)v->n_sent + 1, &v->cap_sent, SIZE_MAX, sizeof *e);
  uint32_t *rows = strata_malloc(h->nrows * sizeof *rows);
  float *abs = strata_malloc((size_t)h->nrows * v->Lv * sizeof *abs);
  if (e) v->sent = e;
  if (!e || !rows || !abs) {
    strata_free(rows);
    strata_free(abs);
    strata__table_fail(tb, strata_err_set(STRATA_ENOMEM, "table: out of memory (vap)"));
    return;
  }
  const uint32_t *r = ps_msg_rows((void *)msg);
  const float *d = ps_msg_vals((void *)msg);
  for (uint32_t i = 0; i < h->nrows; i++) {
    rows[i] = r[i];
    float *a = v->abs + (size_t)r[i] * v->Lv;
    for (uint32_t j = 0; j < v->Lv; j++) {
      abs[(size_t)i * v->Lv + j] = fabsf(d[(size_t)i * tb->L + j]);
      a[j] += abs[(size_t)i * v->Lv + j];
    }
    v->n_abs[r[i]]++;
  }
  v->sent[v->n_sent++] = (sent){X, h->seq, h->nrows, rows, abs};
}

/* Batch seq to shard X is seen by all: it leaves the rows' bounds. */
static int seen(strata_table *tb, int X, uint32_t seq) {
  vap *v = tb->rule_state;
  int i = 0;
  while (i < v->n_sent && !(v->sent[i].X == X && v->sent[i].seq == seq)) i++;
  if (i == v->n_sent)
    return strata_err_set(STRATA_ECOMM, "table: shard %d saw batch %u, which is not in transit", X,
                          seq);
  sent e = v->sent[i];
  for (uint32_t k = 0; k < e.n; k++) {
    float *a = v->abs + (size_t)e.rows[k] * v->Lv;
    /* The last one out leaves an exact zero, whatever the rounding. */
    int last = --v->n_abs[e.rows[k]] == 0;
    for (uint32_t j = 0; j < v->Lv; j++) {
      a[j] = last ? 0.0f : a[j] - e.abs[(size_t)k * v->Lv + j];
      if (a[j] < 0) a[j] = 0;
    }
  }
  strata_free(e.rows);
  strata_free(e.abs);
  memmove(&v->sent[i], &v->sent[i + 1], (size_t)(v->n_sent - i - 1) * sizeof *v->sent);
  v->n_sent--;
  return 0;
}

/* ---- client: reads ---- */

/* Reads never wait on clocks (a caller's explicit staleness aside). */
static int32_t vap_need(const strata_table *tb, int s) { return s < 0 ? INT32_MIN : tb->clock - s; }

typedef struct sub_ctx {
  uint32_t lo, hi;
} sub_ctx;

static int subscribed(strata_table *tb, void *ctx) {
  sub_ctx *c = ctx;
  while (c->lo < c->hi && tb->sub[c->lo]) c->lo++;
  return c->lo == c->hi;
}

/* A first read of a row subscribes it and waits for the row as it stands
 * at its shard. */
static int vap_before_read(strata_table *tb, uint32_t lo, uint32_t hi) {
  sub_ctx c = {lo, hi};
  if (subscribed(tb, &c)) return 0;
  int rc = strata__table_request(tb, NULL, c.lo, hi, INT32_MAX, -1);
  return rc ? rc : strata__table_wait(tb, subscribed, &c);
}

/* A reply subscribes its rows; a push is acknowledged once in the cache. */
static int vap_rows_in(strata_table *tb, const ps_hdr *h, const uint32_t *rows) {
  vap *v = tb->rule_state;
  if (!(h->flags & PS_PUSH)) {
    for (uint32_t i = 0; i < h->nrows; i++) tb->sub[rows[i]] = 1;
    return 0;
  }
  uint32_t n = ++v->taken[h->from];
  return strata__table_rule_send(tb, h->from, 0, 0, VAP_ACK, &n, 1);
}

/* ---- shard ---- */

static int vap_read_in(strata_table *tb, int w, const uint32_t *rows, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    tb->subs[(size_t)strata__table_local(tb, rows[i]) * tb->P + w] = 1;
  return 0;
}

static int idq_push(idq *q, uint64_t id) {
  if (q->n == q->cap) {
    size_t cap = q->cap ? 2 * q->cap : 16;
    uint64_t *v = strata_malloc(cap * sizeof *v);
    if (!v) return strata_err_set(STRATA_ENOMEM, "table: out of memory (vap)");
    for (size_t i = 0; i < q->n; i++) v[i] = q->v[(q->head + i) % q->cap];
    strata_free(q->v);
    q->v = v;
    q->head = 0;
    q->cap = cap;
  }
  q->v[(q->head + q->n++) % q->cap] = id;
  return 0;
}

/* Drops the batches at the front that are done. */
static void trim(vap *v) {
  int k = 0;
  while (k < v->n_pend && v->pend[k].left < 0) k++;
  if (!k) return;
  memmove(v->pend, v->pend + k, (size_t)(v->n_pend - k) * sizeof *v->pend);
  v->n_pend -= k;
  v->base += (uint64_t)k;
}

static int tell_seen(strata_table *tb, pending *p) {
  p->left = -1;
  return strata__table_rule_send(tb, p->w, 1, 0, VAP_SEEN, &p->seq, 1);
}

/* After writer w's batch: its rows go to every other reader of them, and
 * the batch is seen by all once each has acknowledged. */
static int vap_applied(strata_table *tb, int w, const void *update) {
  vap *v = tb->rule_state;
  const ps_hdr *h = update;
  if (!h->nrows) return 0;
  const uint32_t *rows = ps_msg_rows((void *)update);
  pending *pv = strata_grow(v->pend, (size_t)v->n_pend + 1, &v->cap_pend, SIZE_MAX, sizeof *pv);
  if (!pv) return strata_err_set(STRATA_ENOMEM, "table: out of memory (vap)");
  v->pend = pv;
  uint64_t id = v->base + (uint64_t)v->n_pend;
  pending *p = &v->pend[v->n_pend++];
  *p = (pending){w, h->seq, 0};
  int rc = 0;
  for (int r = 0; r < tb->P && !rc; r++) {
    if (r == w) continue;
    uint32_t n = 0;
    for (uint32_t i = 0; i < h->nrows; i++)
      if (tb->subs[(size_t)strata__table_local(tb, rows[i]) * tb->P + r]) v->list[n++] = rows[i];
    if (!n) continue;
    if (!(rc = strata__table_send_rows(tb, r, v->list, n, PS_PUSH)))
      rc = idq_push(&v->unacked[r], id);
    p->left++;
    tb->st.pushes += n;
  }
  if (!rc && !p->left) rc = tell_seen(tb, p);
  trim(v);
  return rc;
}

static int on_ack(strata_table *tb, int r, uint32_t upto) {
  vap *v = tb->rule_state;
  if (r < 0 || r >= tb->P || upto < v->acks_in[r] || upto - v->acks_in[r] > v->unacked[r].n)
    return strata_err_set(STRATA_ECOMM,
                          "table: worker %d acknowledged %u pushes, %u of %zu expected", r, upto,
                          v->acks_in[r], v->unacked[r].n);
  int rc = 0;
  idq *q = &v->unacked[r];
  for (; v->acks_in[r] < upto && !rc; v->acks_in[r]++) {
    uint64_t id = q->v[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    pending *p = &v->pend[id - v->base];
    if (--p->left == 0) rc = tell_seen(tb, p);
  }
  vap_stats s = get_stats(tb);
  s.acks++;
  put_stats(tb, &s);
  trim(v);
  return rc;
}

static int vap_message(strata_table *tb, int side, const void *msg, int src) {
  const ps_hdr *h = msg;
  const uint32_t *words = ps_msg_rows((void *)msg);
  if (h->nrows != 1 || (h->flags != VAP_ACK && h->flags != VAP_SEEN) ||
      (side == 0) != (h->flags == VAP_ACK) || h->from < 0 || h->from >= tb->P)
    return strata_err_set(STRATA_ECOMM, "table: unexpected vap message (flags %u) from rank %d",
                          h->flags, src);
  return side == 0 ? on_ack(tb, h->from, words[0]) : seen(tb, h->from, words[0]);
}

/* The shard ends once every batch is seen (the readers acknowledge before
 * they leave). */
static int vap_settled(const strata_table *tb) {
  const vap *v = tb->rule_state;
  return v->n_pend == 0;
}

/* ---- the table's life ---- */

static void vap_free(strata_table *tb) {
  vap *v = tb->rule_state;
  if (!v) return;
  for (int i = 0; i < v->n_sent; i++) {
    strata_free(v->sent[i].rows);
    strata_free(v->sent[i].abs);
  }
  strata_free(v->sent);
  for (int r = 0; v->unacked && r < tb->P; r++) strata_free(v->unacked[r].v);
  strata_free(v->unacked);
  strata_free(v->abs);
  strata_free(v->n_abs);
  strata_free(v->taken);
  strata_free(v->piece);
  strata_free(v->pend);
  strata_free(v->acks_in);
  strata_free(v->list);
  strata_free(v);
  tb->rule_state = NULL;
}

static int vap_open(strata_table *tb) {
  vap *v = strata_calloc(1, sizeof *v);
  tb->rule_state = v;
  if (!v) return strata_err_set(STRATA_ENOMEM, "table: out of memory (vap)");
  v->set = settings_of(tb->c.settings);
  if (!(v->set.bound > 0))
    return strata_err_set(STRATA_EUSAGE, "table: --mode vap needs --value-bound V > 0");
  const char *off = getenv("STRATA_TEST_VAP_OFF");
  v->enforce = !(off && off[0] == '1');
  size_t n = tb->c.n_rows, nl = tb->n_local ? tb->n_local : 1;
  v->Lv = tb->c.value_len ? tb->c.value_len : tb->L;
  v->abs = strata_calloc(n * v->Lv, sizeof *v->abs);
  v->n_abs = strata_calloc(n, sizeof *v->n_abs);
  v->taken = strata_calloc((size_t)tb->P, sizeof *v->taken);
  v->piece = strata_malloc(tb->L * sizeof *v->piece);
  v->unacked = strata_calloc((size_t)tb->P, sizeof *v->unacked);
  v->acks_in = strata_calloc((size_t)tb->P, sizeof *v->acks_in);
  v->list = strata_malloc(nl * sizeof *v->list);
  if (!v->abs || !v->n_abs || !v->taken || !v->piece || !v->unacked || !v->acks_in || !v->list)
    return strata_err_set(STRATA_ENOMEM, "table: out of memory (vap, %zu rows)", n);
  return 0;
}

/* ---- what the mode answers (core/mode.h) ---- */

static const strata_option vap_options[] = {
    {.name = "value-bound",
     .type = STRATA_OPT_DOUBLE | STRATA_OPT_OPEN_MIN,
     .offset = offsetof(vap_settings, bound),
     .metavar = "V",
     .max = 1e30,
     .help = "the most, in every component, that a worker's updates of a row still in transit "
             "(not yet seen by every reader) may sum to; required"},
    {.name = "value-decay",
     .type = STRATA_OPT_ENUM,
     .offset = offsetof(vap_settings, decay),
     .def = "none",
     .metavar = "RULE",
     .choices = "none|sqrt",
     .help = "sqrt: the bound at clock c is V / sqrt(1 + c), as the paper's theorems take it"},
    {.name = NULL},
};

/* A value bound, no staleness; the shards' pushes keep read rows current,
 * so no prefetcher. */
static int vap_resolve(strata_engine_opts *o, const strata__given *g) {
  vap_settings s = settings_of(&o->mode_settings);
  if (!(s.bound > 0))
    return strata_err_set(STRATA_EUSAGE, "--mode vap needs --value-bound V (V > 0)");
  if (g->prefetch && o->prefetch != STRATA_PREFETCH_NONE)
    return strata_err_set(STRATA_EUSAGE,
                          "--mode vap keeps the rows a worker reads current by pushes: --prefetch "
                          "does not apply");
  o->prefetch = STRATA_PREFETCH_NONE;
  o->staleness = 0;
  return 0;
}

/* The app is told no clock bounds its reads. */
static void vap_clock_rule(const strata_engine_opts *o, const strata_app *app, int *staleness,
                           double *wpc) {
  (void)o, (void)app, (void)wpc;
  *staleness = -1;
}

/* Per worker: the rows' in-transit bounds (a float per table float) and
 * the batches kept until seen. */
static double vap_memory(const strata__mem_view *v) { return 2 * (v->rot_all + v->global); }

static void add_stats(vap_stats *a, const vap_stats *b) {
  if (b->bound > a->bound) a->bound = b->bound;
  if (b->max_inflight > a->max_inflight) a->max_inflight = b->max_inflight;
  if (b->max_ratio > a->max_ratio) a->max_ratio = b->max_ratio;
  a->deltas += b->deltas;
  a->flushes += b->flushes;
  a->splits += b->splits;
  a->waits += b->waits;
  a->wait_s += b->wait_s;
  a->pushes += b->pushes;
  a->acks += b->acks;
  a->enforced |= b->enforced;
  for (int i = 0; i < VAP_HIST; i++) a->hist[i] += b->hist[i];
}

static void vap_stats_add(unsigned char *total, const unsigned char *in) {
  vap_stats a, b;
  memcpy(&a, total, sizeof a);
  memcpy(&b, in, sizeof b);
  add_stats(&a, &b);
  memcpy(total, &a, sizeof a);
}

/* The workers' figures summed: over the run (pass < 0) or of one pass. */
static vap_stats sum_workers(const strata_run_result *r, int pass, int slot) {
  vap_stats sum;
  memset(&sum, 0, sizeof sum);
  for (int w = 0; w < r->workers; w++) {
    const strata_worker_stats *s =
        pass < 0 ? (r->worker_total ? &r->worker_total[w] : NULL)
                 : &r->per_pass_worker[(size_t)pass * (size_t)r->workers + (size_t)w];
    if (!s) continue;
    vap_stats b;
    memcpy(&b, s->mode_stats[slot], sizeof b);
    add_stats(&sum, &b);
  }
  return sum;
}

static void write_figures(strata_json *j, const vap_stats *s) {
  strata_json_number(j, "max_inflight", s->max_inflight);
  strata_json_number(j, "max_ratio", s->max_ratio);
  strata_json_int(j, "deltas", (int64_t)s->deltas);
  strata_json_int(j, "flushes", (int64_t)s->flushes);
  strata_json_int(j, "splits", (int64_t)s->splits);
  strata_json_int(j, "waits", (int64_t)s->waits);
  strata_json_number(j, "wait_s", s->wait_s);
  int last = 0;
  for (int b = 0; b < VAP_HIST; b++)
    if (s->hist[b]) last = b;
  /* hist[b]: deltas after which the row's in-transit bound was in
   * ((b - 1) / 16, b / 16] of the bound (hist[0]: nothing in transit); the
   * last bucket everything beyond twice the bound. */
  strata_json_array_begin(j, "hist");
  for (int b = 0; b <= last && s->deltas; b++) strata_json_int(j, NULL, (int64_t)s->hist[b]);
  strata_json_array_end(j);
}

static void vap_metrics(strata_json *j, const strata_run_result *r, int slot) {
  vap_stats sum = sum_workers(r, -1, slot);
  vap_settings set = settings_of(r->opts ? &r->opts->mode_settings : NULL);
  strata_json_object_begin(j, "vap");
  strata_json_number(j, "bound", set.bound);
  strata_json_string(j, "decay", decay_names[set.decay ? 1 : 0]);
  strata_json_bool(j, "enforced", sum.enforced || !sum.deltas);
  write_figures(j, &sum);
  strata_json_object_end(j);
}

static void vap_metrics_pass(strata_json *j, const strata_run_result *r, int pass, int slot) {
  vap_stats sum = sum_workers(r, pass, slot);
  strata_json_object_begin(j, "vap");
  strata_json_number(j, "bound", sum.bound);
  write_figures(j, &sum);
  strata_json_object_end(j);
}

static void vap_metrics_worker(strata_json *j, const strata_worker_stats *s, int slot) {
  vap_stats v;
  memcpy(&v, s->mode_stats[slot], sizeof v);
  strata_json_object_begin(j, "vap");
  write_figures(j, &v);
  strata_json_object_end(j);
}

static void vap_echo(char *out, size_t n, const strata_engine_opts *o) {
  vap_settings s = settings_of(&o->mode_settings);
  snprintf(out, n, "value bound %g%s", s.bound, s.decay ? " / sqrt(1 + clock)" : "");
}

static void vap_summary(FILE *f, const strata_run_result *r, int slot) {
  vap_stats s = sum_workers(r, -1, slot);
  vap_settings set = settings_of(r->opts ? &r->opts->mode_settings : NULL);
  fprintf(f,
          "  vap: bound %g%s; largest in transit %.4g (%.2f of the bound); %llu early sends, "
          "%llu deltas split; writers waited %.3f s in %llu waits\n",
          set.bound, set.decay ? " / sqrt(1 + clock)" : "", s.max_inflight, s.max_ratio,
          (unsigned long long)s.flushes, (unsigned long long)s.splits, s.wait_s,
          (unsigned long long)s.waits);
}

static void vap_status(FILE *f, const strata_run_result *r, int done, int slot) {
  (void)done;
  vap_stats s = sum_workers(r, -1, slot);
  double le[VAP_HIST - 1];
  for (int b = 0; b < VAP_HIST - 1; b++) le[b] = b / 16.0;
  double sum = 0;
  for (int b = 1; b < VAP_HIST; b++) sum += (double)s.hist[b] * b / 16.0;
  strata__prom_histogram(f, "strata_vap_inflight_ratio",
                         "deltas by the in-transit bound of their row right after, relative to "
                         "the value bound (1: at the bound)",
                         VAP_HIST - 1, s.hist, le, sum, s.deltas);
}

static const char *const vap_keys[] = {"vap", NULL};

const strata__table_rule strata__vap_rule = {
    .mode = {.name = "vap",
             .options = vap_options,
             .resolve = vap_resolve,
             .clock_rule = vap_clock_rule,
             .memory = vap_memory,
             .stats_add = vap_stats_add,
             .keys = vap_keys,
             .pass_keys = vap_keys,
             .metrics = vap_metrics,
             .metrics_pass = vap_metrics_pass,
             .metrics_worker = vap_metrics_worker,
             .echo = vap_echo,
             .summary = vap_summary,
             .status = vap_status},
    .open = vap_open,
    .free = vap_free,
    .need = vap_need,
    .before_read = vap_before_read,
    .before_inc = vap_before_inc,
    .batch_sent = vap_batch_sent,
    .rows_in = vap_rows_in,
    .read_in = vap_read_in,
    .applied = vap_applied,
    .settled = vap_settled,
    .message = vap_message,
    /* A writer held back waits for a round trip through two workers: poll
     * as a round run's steps do. */
    .wait_ceiling = 50e-6,
};
