/*
 * Parameter-server tables (strata/table.h): on every worker, a client (the
 * process cache, the oplog, the batches sent but not yet acknowledged) and
 * the server shard of the rows g with g mod P == me. Both sides run on the
 * worker's one thread; messages go through the transport, to this rank too,
 * so that one worker behaves exactly like many.
 *
 * Read-my-writes: the cache holds the shard's value plus this worker's own
 * deltas the shard has not applied yet. A shard tells each client, in every
 * message, how many of its batches are in (`own`); the client keeps each
 * sent batch until a shard has confirmed it, and re-adds the kept ones and
 * the current oplog to every row it receives.
 *
 * BSP (a rule's exact reads: SSP with staleness 0): a shard adds a batch to its live rows when it
 * arrives, and by then a worker may already have ended the clock the batch
 * belongs to (its shard answered its reads, or it read nothing from some
 * shard), so live rows can hold updates stamped at or after the shard's
 * clock m, which a read at clock m must not see. A BSP shard therefore
 * answers every read from its pure copy (ps_snapshot, also what snapshots
 * are served from), which holds exactly the updates stamped < m, and counts
 * in `own` only the batches in that copy, so that its clients keep and
 * re-add their own batches stamped >= m.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "comm/ps.h"
#include "comm/rule.h"
#include "core/wait.h"
#include "strata/core.h"
#include "strata/table.h"

typedef strata__kept kept;
typedef strata__keptq keptq;
typedef strata__snapwait snapwait;
typedef strata__outmsg outmsg;

static int rank_of(const strata_table *tb, int w) { return tb->c.rank_base + w; }

static int fail(strata_table *tb, int rc) {
  if (!tb->err) tb->err = rc;
  return rc;
}

int strata__table_fail(strata_table *tb, int rc) { return fail(tb, rc); }

/* ---- sending ---- */

/* Takes ownership of buf; counts len into *bytes. */
static int post_counted(strata_table *tb, int to, int tag, void *buf, size_t len, uint64_t *bytes) {
  if (tb->n_out == tb->cap_out) {
    int cap = tb->cap_out ? 2 * tb->cap_out : 16;
    outmsg *o = strata_realloc(tb->out, (size_t)cap * sizeof *o);
    strata_req *r = strata_realloc(tb->reqs_scratch, (size_t)cap * sizeof *r);
    if (o) tb->out = o;
    if (r) tb->reqs_scratch = r;
    if (!o || !r) {
      strata_free(buf);
      return fail(tb, strata_err_set(STRATA_ENOMEM, "table: out of memory for outgoing messages"));
    }
    tb->cap_out = cap;
  }
  outmsg *m = &tb->out[tb->n_out];
  memset(m, 0, sizeof *m);
  int rc = tb->t->isend(tb->t->impl, buf, len, rank_of(tb, to), tag, &m->req);
  if (rc) {
    strata_free(buf);
    return fail(tb, rc);
  }
  m->buf = buf;
  tb->n_out++;
  *bytes += len;
  return 0;
}

static int post(strata_table *tb, int to, int tag, void *buf, size_t len) {
  return post_counted(tb, to, tag, buf, len, &tb->st.bytes_sent);
}

int strata__table_post(strata_table *tb, int to, int side, void *buf, size_t len) {
  return post(tb, to, tb->c.tag + (side ? 1 : 0), buf, len);
}

int strata__table_rule_send(strata_table *tb, int to, int side, int32_t clock, uint32_t flags,
                            const uint32_t *words, uint32_t n) {
  size_t sz = ps_msg_size(n, tb->L, 0);
  void *m = strata_malloc(sz);
  if (!m) return fail(tb, strata_err_set(STRATA_ENOMEM, "table: out of memory for a message"));
  *(ps_hdr *)m =
      (ps_hdr){.type = PS_RULE, .from = tb->me, .clock = clock, .nrows = n, .flags = flags};
  if (n) memcpy(ps_msg_rows(m), words, n * sizeof *words);
  return strata__table_post(tb, to, side, m, sz);
}

static int progress_out(strata_table *tb) {
  if (!tb->n_out) return 0;
  for (int i = 0; i < tb->n_out; i++) tb->reqs_scratch[i] = tb->out[i].req;
  int all = 0;
  int rc = tb->t->test_all(tb->t->impl, tb->reqs_scratch, tb->n_out, &all);
  if (rc) return fail(tb, rc);
  int k = 0;
  for (int i = 0; i < tb->n_out; i++) {
    if (tb->reqs_scratch[i].h == 0) {
      strata_free(tb->out[i].buf);
    } else {
      tb->out[k] = tb->out[i];
      tb->out[k].req = tb->reqs_scratch[i];
      k++;
    }
  }
  tb->n_out = k;
  return 0;
}

/* ---- server shard ---- */

static uint32_t local_of(const strata_table *tb, uint32_t g) { return strata__table_local(tb, g); }

/* Client w's batches in the pure copy: those received and not held. */
static uint32_t copied(const strata_table *tb, int w) {
  uint32_t held = 0;
  for (int i = 0; i < tb->snap.n_held; i++) held += ((const ps_hdr *)tb->snap.held[i])->from == w;
  return tb->seq_in[w] - held;
}

/* Sends rows (ascending, all of this shard) to client w: the live values
 * (a BSP shard: its pure copy), or with PS_SNAPSHOT those of the pure
 * snapshot. */
static int send_rows(strata_table *tb, int w, const uint32_t *rows, uint32_t n, uint32_t flags) {
  size_t sz = ps_msg_size(n, tb->L, 1);
  void *m = strata_malloc(sz);
  if (!m) return fail(tb, strata_err_set(STRATA_ENOMEM, "table: out of memory for a reply"));
  int snap = (flags & PS_SNAPSHOT) != 0, from_copy = snap || tb->pure;
  const float *src = from_copy ? tb->snap.vals : tb->vals;
  ps_hdr *h = m;
  *h = (ps_hdr){.type = PS_ROWS,
                .from = tb->me,
                .clock = from_copy ? tb->snap.clock : tb->vc.min,
                .own = (int32_t)(tb->pure ? copied(tb, w) : tb->seq_in[w]),
                .nrows = n,
                .flags = flags};
  uint32_t *r = ps_msg_rows(m);
  float *v = ps_msg_vals(m);
  for (uint32_t i = 0; i < n; i++) {
    r[i] = rows[i];
    memcpy(v + (size_t)i * tb->L, src + (size_t)local_of(tb, rows[i]) * tb->L,
           tb->L * sizeof(float));
  }
  return post_counted(tb, w, tb->c.tag + 1, m, sz,
                      snap ? &tb->st.snapshot_bytes : &tb->st.bytes_sent);
}

int strata__table_send_rows(strata_table *tb, int w, const uint32_t *rows, uint32_t n,
                            uint32_t flags) {
  return send_rows(tb, w, rows, n, flags);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

static int answer_ready(strata_table *tb) {
  ps_read rd;
  int rc = 0;
  /* First the copy, which a BSP shard answers reads from. */
  if (tb->c.snapshots || tb->pure) ps_snapshot_advance(&tb->snap, tb->vc.min);
  while (!rc && ps_pending_take(&tb->pend, tb->vc.min, &rd)) {
    rc = send_rows(tb, rd.client, rd.rows, rd.n, 0);
    strata_free(rd.rows);
  }
  if (rc || !tb->c.snapshots) return rc;
  /* The shard's clock moves one step at a time, and a SNAP for t arrives
   * before its sender's batch stamped t - 1: so every SNAP for the new
   * clock is here, and none for an older one is still to come. */
  while (!rc && ps_pending_take(&tb->snap_reads, tb->vc.min, &rd)) {
    if (rd.min_age != tb->snap.clock)
      rc = fail(tb, strata_err_set(STRATA_ECOMM, "table: worker %d asked for snapshot %d, shard %d is at %d",
                                   rd.client, rd.min_age, tb->me, tb->snap.clock));
    else
      rc = send_rows(tb, rd.client, rd.rows, rd.n, PS_SNAPSHOT);
    strata_free(rd.rows);
  }
  return rc;
}

static int bad_row(strata_table *tb, uint32_t g, int src) {
  return fail(tb, strata_err_set(STRATA_ECOMM, "table: rank %d sent row %u, not on shard %d of %u rows",
                                 src, g, tb->me, tb->c.n_rows));
}

/* May keep the message: then sets *pm to NULL. */
static int on_server_msg(strata_table *tb, void **pm, int src) {
  void *m = *pm;
  ps_hdr *h = m;
  uint32_t *rows = ps_msg_rows(m);
  int w = h->from, rc = 0;
  if (w < 0 || w >= tb->P)
    return fail(tb, strata_err_set(STRATA_ECOMM, "table: message from unknown worker %d", w));
  /* A rule's message carries words of its own, not rows. */
  for (uint32_t i = 0; i < h->nrows && h->type != PS_RULE; i++)
    if (rows[i] >= tb->c.n_rows || (int)(rows[i] % (uint32_t)tb->P) != tb->me)
      return bad_row(tb, rows[i], src);
  switch (h->type) {
    case PS_UPDATE: {
      const float *v = ps_msg_vals(m);
      if (h->seq != tb->seq_in[w])
        return fail(tb, strata_err_set(STRATA_ECOMM, "table: batch %u from worker %d, expected %u",
                                       h->seq, w, tb->seq_in[w]));
      /* A BSP shard sends only its copy: the live rows would go unread. */
      for (uint32_t i = 0; i < h->nrows && !tb->pure; i++) {
        float *dst = tb->vals + (size_t)local_of(tb, rows[i]) * tb->L;
        const float *d = v + (size_t)i * tb->L;
        for (uint32_t j = 0; j < tb->L; j++) dst[j] += d[j];
      }
      tb->seq_in[w]++;
      int advanced = 0;
      if (!(h->flags & PS_EARLY) && (rc = ps_vclock_tick(&tb->vc, w, h->clock, &advanced)))
        return fail(tb, rc);
      if (tb->rule->applied && (rc = tb->rule->applied(tb, w, m))) return fail(tb, rc);
      if (tb->c.snapshots || tb->pure) {
        if ((rc = ps_snapshot_hold(&tb->snap, m))) return fail(tb, rc);
        *pm = NULL;
      }
      /* The acknowledgement lets the client drop its copy of the batch. */
      if ((rc = send_rows(tb, w, NULL, 0, 0))) return rc;
      if (advanced) {
        if (tb->rule->advanced && (rc = tb->rule->advanced(tb))) return fail(tb, rc);
        if ((rc = answer_ready(tb))) return rc;
      }
      return 0;
    }
    case PS_READ:
      qsort(rows, h->nrows, sizeof *rows, cmp_u32);
      if (tb->rule->read_in && (rc = tb->rule->read_in(tb, w, rows, h->nrows))) return fail(tb, rc);
      if (tb->vc.min >= h->clock) return send_rows(tb, w, rows, h->nrows, 0);
      if ((rc = ps_pending_add(&tb->pend, w, h->clock, rows, h->nrows))) return fail(tb, rc);
      return 0;
    case PS_SNAP:
      if (!tb->c.snapshots || h->clock <= tb->vc.min)
        return fail(tb, strata_err_set(STRATA_ECOMM,
                                       "table: worker %d asked for snapshot %d, which shard %d %s",
                                       w, h->clock, tb->me,
                                       tb->c.snapshots ? "has passed" : "does not keep"));
      qsort(rows, h->nrows, sizeof *rows, cmp_u32);
      if ((rc = ps_pending_add(&tb->snap_reads, w, h->clock, rows, h->nrows))) return fail(tb, rc);
      return 0;
    case PS_BYE: tb->byes++; return 0;
    case PS_RULE: return tb->rule->message ? tb->rule->message(tb, 0, m, src) : 0;
    default:
      return fail(tb, strata_err_set(STRATA_ECOMM, "table: unexpected message type %u from rank %d",
                                     h->type, src));
  }
}

/* Once every client has left and the rule waits for nothing more, the
 * shard tells every client that nothing more comes from it. */
static int maybe_fin(strata_table *tb) {
  if (tb->finned || tb->byes < tb->P || (tb->rule->settled && !tb->rule->settled(tb))) return 0;
  tb->finned = 1;
  int rc = 0;
  for (int c = 0; c < tb->P && !rc; c++) {
    ps_hdr *f = strata_malloc(sizeof *f);
    if (!f) return fail(tb, strata_err_set(STRATA_ENOMEM, "table: out of memory"));
    *f = (ps_hdr){.type = PS_FIN, .from = tb->me};
    rc = post(tb, c, tb->c.tag + 1, f, sizeof *f);
  }
  return rc;
}

/* ---- client ---- */

static const float *kept_row(const kept *k, uint32_t g, uint32_t L) {
  ps_hdr *h = k->msg;
  const uint32_t *rows = ps_msg_rows(k->msg);
  uint32_t lo = 0, hi = h->nrows;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (rows[mid] < g) lo = mid + 1;
    else hi = mid;
  }
  if (lo < h->nrows && rows[lo] == g) return ps_msg_vals(k->msg) + (size_t)lo * L;
  return NULL;
}

static void drop_confirmed(keptq *q, int32_t own) {
  int k = 0;
  for (int i = 0; i < q->n; i++) {
    if (q->v[i].seq < (uint32_t)own)
      strata_free(q->v[i].msg);
    else q->v[k++] = q->v[i];
  }
  q->n = k;
}

static void set_row(strata_table *tb, uint32_t g, const float *val, int32_t age, const keptq *q) {
  float *dst = tb->cache + (size_t)g * tb->L;
  memcpy(dst, val, tb->L * sizeof(float));
  for (int i = 0; i < q->n; i++) {
    const float *d = kept_row(&q->v[i], g, tb->L);
    if (d)
      for (uint32_t j = 0; j < tb->L; j++) dst[j] += d[j];
  }
  const float *d = ps_oplog_row(&tb->log, g);
  if (d)
    for (uint32_t j = 0; j < tb->L; j++) dst[j] += d[j];
  if (age > tb->age[g]) tb->age[g] = age;
}

static int take_snapshot_rows(strata_table *tb, const ps_hdr *h, const uint32_t *rows,
                              const float *vals, int src) {
  snapwait *sw = NULL;
  for (int i = 0; i < tb->n_snaps && !sw; i++)
    if (tb->snaps[i].id == h->clock) sw = &tb->snaps[i];
  if (!sw || sw->left < h->nrows)
    return fail(tb, strata_err_set(STRATA_ECOMM, "table: unexpected rows of snapshot %d from rank %d",
                                   h->clock, src));
  for (uint32_t i = 0; i < h->nrows; i++) {
    if (rows[i] >= tb->c.n_rows || (int)(rows[i] % (uint32_t)tb->P) != h->from)
      return bad_row(tb, rows[i], src);
    memcpy(sw->out + (size_t)rows[i] * tb->L, vals + (size_t)i * tb->L, tb->L * sizeof(float));
  }
  sw->left -= h->nrows;
  return 0;
}

static int on_client_msg(strata_table *tb, void *m, int src) {
  ps_hdr *h = m;
  int X = h->from;
  if (X < 0 || X >= tb->P)
    return fail(tb, strata_err_set(STRATA_ECOMM, "table: message from unknown shard %d", X));
  if (h->type == PS_FIN) {
    tb->fins++;
    return 0;
  }
  if (h->type == PS_RULE) return tb->rule->message ? tb->rule->message(tb, 1, m, src) : 0;
  if (h->type != PS_ROWS)
    return fail(tb, strata_err_set(STRATA_ECOMM, "table: unexpected message type %u from rank %d",
                                   h->type, src));
  keptq *q = &tb->kept[X];
  drop_confirmed(q, h->own);
  const uint32_t *rows = ps_msg_rows(m);
  const float *vals = ps_msg_vals(m);
  if (h->flags & PS_SNAPSHOT) return take_snapshot_rows(tb, h, rows, vals, src);
  for (uint32_t i = 0; i < h->nrows; i++) {
    uint32_t g = rows[i];
    if (g >= tb->c.n_rows || (int)(g % (uint32_t)tb->P) != X) return bad_row(tb, g, src);
    set_row(tb, g, vals + (size_t)i * tb->L, h->clock, q);
    if (tb->req_age[g] >= 0 && tb->req_age[g] <= h->clock) tb->req_age[g] = -1;
  }
  if (!(h->flags & PS_PUSH)) tb->st.replies += h->nrows;
  return tb->rule->rows_in ? tb->rule->rows_in(tb, h, rows) : 0;
}

/* Takes in everything that has arrived, until a round over both tags
 * brings nothing (a message to this rank's own shard or client, sent while
 * serving, is taken in too); *progressed when anything came. */
static int serve(strata_table *tb, int *progressed) {
  if (tb->err) return tb->err;
  int rc = progress_out(tb), got = 0, round = 1;
  *progressed = 0;
  while (round && !rc) {
    round = 0;
    for (int side = 0; side < 2 && !rc; side++) {
      for (;;) {
        int src;
        void *buf;
        size_t len;
        rc = tb->t->poll(tb->t->impl, tb->c.tag + side, &got, &src, &buf, &len);
        if (rc) return fail(tb, rc);
        if (!got) break;
        *progressed = round = 1;
        rc = ps_msg_check(buf, len, tb->L, src);
        if (!rc) {
          /* Snapshot traffic is counted once, by its sender (snapshot_bytes),
           * and stays out of the training traffic as on the sending side. */
          const ps_hdr *h = buf;
          if (h->type != PS_SNAP && !(h->type == PS_ROWS && (h->flags & PS_SNAPSHOT)))
            tb->st.bytes_recv += len;
          rc = side == 0 ? on_server_msg(tb, &buf, src) : on_client_msg(tb, buf, src);
        }
        strata_free(buf);
        if (rc) return fail(tb, rc);
      }
      if (side == 0 && (rc = maybe_fin(tb))) return rc;
    }
  }
  return rc;
}

int strata_table_serve(strata_table *tb) {
  int progressed;
  return serve(tb, &progressed);
}

/* ---- waiting without spinning ---- */

typedef struct waiter {
  strata_table *tb;
  int (*ready)(strata_table *, void *);
  void *ctx;
} waiter;

static int serve_poll(void *ctx, int *done, int *progressed) {
  waiter *wt = ctx;
  int rc = serve(wt->tb, progressed);
  *done = !rc && wt->ready(wt->tb, wt->ctx);
  return rc;
}

/* Serves until ready (or, with until > 0, until that time); returns the
 * seconds it took. */
static int run_waiter(strata_table *tb, int (*ready)(strata_table *, void *), void *ctx,
                      double until, double *took) {
  int progressed;
  *took = 0;
  int rc = serve(tb, &progressed);
  if (rc || ready(tb, ctx)) return rc;
  double t0 = strata_now();
  waiter wt = {.tb = tb, .ready = ready, .ctx = ctx};
  strata__wait_conf wc = {
      .ceiling = tb->rule->wait_ceiling > 0 ? tb->rule->wait_ceiling : STRATA__WAIT_PEERS,
      .until = until};
  rc = strata__wait(serve_poll, &wt, &wc);
  *took = strata_now() - t0;
  return rc;
}

static int wait_until(strata_table *tb, int (*ready)(strata_table *, void *), void *ctx) {
  double took;
  int rc = run_waiter(tb, ready, ctx, 0, &took);
  tb->st.wait_s += took;
  return rc;
}

int strata__table_wait(strata_table *tb, int (*ready)(strata_table *tb, void *ctx), void *ctx) {
  return wait_until(tb, ready, ctx);
}

static int never(strata_table *tb, void *ctx) {
  (void)tb;
  (void)ctx;
  return 0;
}

int strata_table_serve_for(strata_table *tb, double seconds, int spin) {
  double until = strata_now() + seconds, took;
  if (!spin) return run_waiter(tb, never, NULL, until, &took);
  int rc;
  do {
    rc = strata_table_serve(tb);
  } while (!rc && strata_now() < until);
  return rc;
}

/* ---- public API ---- */

static int32_t need_age(const strata_table *tb, int s) {
  if (tb->rule->need) return tb->rule->need(tb, s);
  if (s < 0) s = tb->c.staleness;
  return tb->clock - s;
}

/* Sends shard X a message of k row ids (a READ or a SNAP) with the given
 * clock field; its bytes count into *bytes. */
static int post_row_list(strata_table *tb, int X, uint32_t type, int32_t clock, const uint32_t *rows,
                         uint32_t k, uint64_t *bytes) {
  size_t sz = ps_msg_size(k, tb->L, 0);
  void *m = strata_malloc(sz);
  if (!m) return fail(tb, strata_err_set(STRATA_ENOMEM, "table: out of memory for a request"));
  *(ps_hdr *)m = (ps_hdr){.type = type, .from = tb->me, .clock = clock, .nrows = k};
  memcpy(ps_msg_rows(m), rows, k * sizeof *rows);
  return post_counted(tb, X, tb->c.tag, m, sz, bytes);
}

/* Sends one READ per shard for the rows in [lo, hi) (of list, if given)
 * older than `need` without an outstanding request that would bring them
 * fresh enough. With force > 0, also rows not from the newest clock
 * (aggressive refresh); with force < 0, every row not yet subscribed to,
 * with age 0 (ESSP registration). */
int strata__table_request(strata_table *tb, const uint32_t *list, uint32_t lo, uint32_t hi,
                          int32_t need, int force) {
  int32_t min_age = need < 0 || force < 0 ? 0 : need;
  uint32_t n = hi - lo;
  uint32_t *rows = strata_malloc((n ? n : 1) * sizeof *rows);
  if (!rows) return fail(tb, strata_err_set(STRATA_ENOMEM, "table: out of memory for a request"));
  int rc = 0;
  for (int X = 0; X < tb->P && !rc; X++) {
    uint32_t k = 0;
    for (uint32_t i = lo; i < hi; i++) {
      uint32_t g = list ? list[i] : i;
      if ((int)(g % (uint32_t)tb->P) != X) continue;
      if (force < 0) {
        /* Subscribing: every row not yet subscribed, nothing waiting. */
        if (tb->sub[g] || tb->req_age[g] >= 0) continue;
      } else {
        int stale = tb->age[g] < need || (force && tb->age[g] < tb->clock);
        if (!stale) continue;
        if (tb->req_age[g] >= min_age) continue; /* on its way */
        if (force && tb->req_age[g] >= 0) continue;
      }
      rows[k++] = g;
      tb->req_age[g] = min_age;
    }
    if (!k) continue;
    tb->st.requests += k;
    rc = post_row_list(tb, X, PS_READ, min_age, rows, k, &tb->st.bytes_sent);
  }
  strata_free(rows);
  return rc;
}

typedef struct range_ctx {
  uint32_t lo, hi;
  int32_t need;
} range_ctx;

static int range_fresh(strata_table *tb, void *ctx) {
  range_ctx *r = ctx;
  for (uint32_t g = r->lo; g < r->hi; g++)
    if (tb->age[g] < r->need) {
      r->lo = g; /* everything before stays fresh: ages only grow */
      return 0;
    }
  return 1;
}

static int check_range(const strata_table *tb, uint32_t lo, uint32_t hi) {
  if (lo > hi || hi > tb->c.n_rows)
    return strata_err_set(STRATA_ERANGE, "table: rows [%u, %u) out of range (table has %u rows)", lo,
                          hi, tb->c.n_rows);
  return 0;
}

int strata_table_get_rows(strata_table *tb, uint32_t lo, uint32_t hi, int s, float *out) {
  int rc = check_range(tb, lo, hi);
  if (rc) return rc;
  if (tb->err) return tb->err;
  int32_t need = need_age(tb, s);
  if (tb->rule->before_read && (rc = tb->rule->before_read(tb, lo, hi))) return fail(tb, rc);
  if (need > 0) {
    if ((rc = strata__table_request(tb, NULL, lo, hi, need, 0))) return rc;
    range_ctx ctx = {lo, hi, need};
    if ((rc = wait_until(tb, range_fresh, &ctx))) return rc;
  } else if ((rc = strata_table_serve(tb))) {
    return rc;
  }
  memcpy(out, tb->cache + (size_t)lo * tb->L, (size_t)(hi - lo) * tb->L * sizeof(float));
  for (uint32_t g = lo; g < hi; g++) {
    int64_t d = (int64_t)tb->age[g] - tb->clock;
    if (d > 0) d = 0;
    uint64_t b = (uint64_t)(-d) < STRATA_TABLE_HIST - 1 ? (uint64_t)(-d) : STRATA_TABLE_HIST - 1;
    tb->st.hist[b]++;
    tb->st.diff_sum += d;
    if (d < tb->st.diff_min) tb->st.diff_min = (int32_t)d;
    int a = tb->clock % tb->period;
    if (!tb->acc[a][g]) {
      tb->acc[a][g] = 1;
      tb->acc_list[a][tb->n_acc[a]++] = g;
    }
  }
  tb->st.reads += hi - lo;
  return 0;
}

int strata_table_peek_rows(const strata_table *tb, uint32_t lo, uint32_t hi, float *out) {
  int rc = check_range(tb, lo, hi);
  if (!rc) memcpy(out, tb->cache + (size_t)lo * tb->L, (size_t)(hi - lo) * tb->L * sizeof(float));
  return rc;
}

int strata_table_get(strata_table *tb, uint32_t row, int s, float *out) {
  if (row >= tb->c.n_rows)
    return strata_err_set(STRATA_ERANGE, "table: row %u out of range (table has %u rows)", row,
                          tb->c.n_rows);
  return strata_table_get_rows(tb, row, row + 1, s, out);
}

void strata__table_add(strata_table *tb, uint32_t row, const float *delta) {
  float *c = tb->cache + (size_t)row * tb->L;
  for (uint32_t j = 0; j < tb->L; j++) c[j] += delta[j];
  ps_oplog_add(&tb->log, row, delta);
}

int strata_table_inc(strata_table *tb, uint32_t row, const float *delta) {
  if (row >= tb->c.n_rows)
    return strata_err_set(STRATA_ERANGE, "table: row %u out of range (table has %u rows)", row,
                          tb->c.n_rows);
  if (tb->err) return tb->err;
  int taken = 0, rc;
  if (tb->rule->before_inc && (rc = tb->rule->before_inc(tb, row, delta, &taken)))
    return fail(tb, rc);
  if (!taken) strata__table_add(tb, row, delta);
  return 0;
}

int strata_table_refresh(strata_table *tb, uint32_t row, int s) {
  if (row >= tb->c.n_rows)
    return strata_err_set(STRATA_ERANGE, "table: row %u out of range (table has %u rows)", row,
                          tb->c.n_rows);
  int32_t need = need_age(tb, s);
  return strata__table_request(tb, NULL, row, row + 1, need < 0 ? 0 : need,
                               tb->rule->eager_refresh);
}

/* Packs shard X's pending rows (of only[0..n), if given) into a batch,
 * keeps a copy until the shard has applied it (read-my-writes) and sends
 * it. An early batch with no rows is not sent. */
static int send_batch(strata_table *tb, int X, uint32_t flags, const uint32_t *only, uint32_t n) {
  void *m;
  size_t len;
  int rc = ps_oplog_pack(&tb->log, X, tb->P, tb->me, tb->clock, tb->seq_out[X], flags, only, n, &m,
                         &len);
  if (rc) return fail(tb, rc);
  if (!((ps_hdr *)m)->nrows && (flags & PS_EARLY)) {
    strata_free(m);
    return 0;
  }
  if (((ps_hdr *)m)->nrows) {
    keptq *q = &tb->kept[X];
    void *copy = strata_malloc(len);
    kept *v = strata_grow(q->v, (size_t)q->n + 1, &q->cap, SIZE_MAX, sizeof *v);
    if (v) q->v = v;
    if (!copy || (size_t)q->n == q->cap) {
      strata_free(copy);
      strata_free(m);
      return fail(tb, strata_err_set(STRATA_ENOMEM, "table: out of memory keeping a batch"));
    }
    memcpy(copy, m, len);
    q->v[q->n++] = (kept){.seq = tb->seq_out[X], .msg = copy};
  }
  tb->seq_out[X]++;
  if (tb->rule->batch_sent) tb->rule->batch_sent(tb, X, m);
  return post(tb, X, tb->c.tag, m, len);
}

int strata__table_flush(strata_table *tb, const uint32_t *rows, uint32_t n) {
  if (tb->err) return tb->err;
  int rc = 0;
  for (int X = 0; X < tb->P && !rc; X++) {
    int any = 0;
    for (uint32_t i = 0; i < n && !any; i++)
      any = (int)(rows[i] % (uint32_t)tb->P) == X && ps_oplog_row(&tb->log, rows[i]);
    if (any) rc = send_batch(tb, X, PS_EARLY, rows, n);
  }
  for (uint32_t i = 0; i < n; i++) ps_oplog_forget(&tb->log, rows[i]);
  return rc;
}

int strata_table_clock(strata_table *tb) {
  if (tb->err) return tb->err;
  int rc = 0;
  /* One batch per shard, empty ones too: it ends the clock there. */
  for (int X = 0; X < tb->P && !rc; X++) rc = send_batch(tb, X, 0, NULL, 0);
  ps_oplog_clear(&tb->log);
  tb->clock++;
  /* The prefetcher replays the reads of the clock one period back, which
   * iterative apps repeat (LazyTables 3.3); then that slot starts over. */
  int a = tb->clock % tb->period;
  if (!rc && tb->c.prefetch != STRATA_PREFETCH_NONE && tb->n_acc[a]) {
    int32_t need = need_age(tb, -1);
    rc = strata__table_request(tb, tb->acc_list[a], 0, tb->n_acc[a], need < 0 ? 0 : need,
                               tb->c.prefetch == STRATA_PREFETCH_AGGRESSIVE);
  }
  for (uint32_t i = 0; i < tb->n_acc[a]; i++) tb->acc[a][tb->acc_list[a][i]] = 0;
  tb->n_acc[a] = 0;
  if (!rc) rc = strata_table_serve(tb);
  return rc;
}

int strata_table_current_clock(const strata_table *tb) { return tb->clock; }

int strata_table_snapshot_request(strata_table *tb, const uint32_t *rows, uint32_t n, float *out) {
  if (!tb->c.snapshots)
    return strata_err_set(STRATA_EINVAL, "table: opened without snapshots");
  if (tb->err) return tb->err;
  for (uint32_t i = 0; i < n; i++)
    if (rows[i] >= tb->c.n_rows)
      return strata_err_set(STRATA_ERANGE, "table: row %u out of range (table has %u rows)", rows[i],
                            tb->c.n_rows);
  snapwait *v = strata_grow(tb->snaps, (size_t)tb->n_snaps + 1, &tb->cap_snaps, SIZE_MAX, sizeof *v);
  if (!v) return fail(tb, strata_err_set(STRATA_ENOMEM, "table: out of memory for a snapshot"));
  tb->snaps = v;
  int32_t id = tb->clock + 1;
  tb->snaps[tb->n_snaps++] = (snapwait){.id = id, .out = out, .left = n};
  uint32_t *list = strata_malloc((n ? n : 1) * sizeof *list);
  if (!list) return fail(tb, strata_err_set(STRATA_ENOMEM, "table: out of memory for a snapshot"));
  int rc = 0;
  for (int X = 0; X < tb->P && !rc; X++) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
      if ((int)(rows[i] % (uint32_t)tb->P) == X) list[k++] = rows[i];
    if (!k) continue;
    rc = post_row_list(tb, X, PS_SNAP, id, list, k, &tb->st.snapshot_bytes);
  }
  strata_free(list);
  return rc;
}

static snapwait *find_snap(strata_table *tb, int32_t id) {
  for (int i = 0; i < tb->n_snaps; i++)
    if (tb->snaps[i].id == id) return &tb->snaps[i];
  return NULL;
}

static int snap_arrived(strata_table *tb, void *ctx) {
  snapwait *sw = find_snap(tb, *(int32_t *)ctx);
  return !sw || sw->left == 0;
}

int strata_table_snapshot_test(strata_table *tb, int32_t id, int wait, int *done) {
  *done = 0;
  if (!find_snap(tb, id))
    return strata_err_set(STRATA_EINVAL, "table: no snapshot %d was asked for", id);
  int rc;
  if (wait) {
    double took;
    rc = run_waiter(tb, snap_arrived, &id, 0, &took);
  } else {
    rc = strata_table_serve(tb);
  }
  if (rc) return rc;
  snapwait *sw = find_snap(tb, id);
  if (sw->left) return 0;
  *sw = tb->snaps[--tb->n_snaps];
  *done = 1;
  return 0;
}

void strata_table_get_stats(const strata_table *tb, strata_table_stats *st) { *st = tb->st; }

void strata_table_reset_stats(strata_table *tb) { memset(&tb->st, 0, sizeof tb->st); }

void strata_table_free(strata_table *tb) {
  if (!tb) return;
  if (tb->rule && tb->rule->free) tb->rule->free(tb);
  /* Requests still in flight are left to MPI (the job is ending). */
  for (int i = 0; i < tb->n_out; i++)
    if (tb->out[i].req.h == 0) strata_free(tb->out[i].buf);
  strata_free(tb->out);
  strata_free(tb->reqs_scratch);
  for (int X = 0; tb->kept && X < tb->P; X++) {
    for (int i = 0; i < tb->kept[X].n; i++) strata_free(tb->kept[X].v[i].msg);
    strata_free(tb->kept[X].v);
  }
  strata_free(tb->kept);
  strata_free(tb->cache);
  strata_free(tb->age);
  strata_free(tb->req_age);
  strata_free(tb->sub);
  for (int a = 0; a < tb->period; a++) {
    if (tb->acc) strata_free(tb->acc[a]);
    if (tb->acc_list) strata_free(tb->acc_list[a]);
  }
  strata_free(tb->acc);
  strata_free(tb->acc_list);
  strata_free(tb->n_acc);
  ps_oplog_free(&tb->log);
  strata_free(tb->vals);
  ps_vclock_free(&tb->vc);
  ps_pending_free(&tb->pend);
  ps_snapshot_free(&tb->snap);
  ps_pending_free(&tb->snap_reads);
  strata_free(tb->snaps);
  strata_free(tb->subs);
  strata_free(tb->seq_out);
  strata_free(tb->seq_in);
  strata_free(tb);
}

int strata__table_open_rule(strata_transport *t, const strata_table_conf *conf,
                            const strata__table_rule *rule, const float *init, strata_table **out) {
  *out = NULL;
  if (!conf->n_rows || !conf->row_len || conf->value_len > conf->row_len || conf->workers < 1 ||
      conf->me < 0 || conf->me >= conf->workers || conf->staleness < 0 || conf->tag < 0 ||
      conf->start_clock < 0 || !t || !t->poll)
    return strata_err_set(STRATA_EINVAL, "table: invalid configuration (%u rows of %u, worker %d of %d, staleness %d)",
                          conf->n_rows, conf->row_len, conf->me, conf->workers, conf->staleness);
  if (conf->rank_base < 0 || conf->rank_base + conf->workers > t->size || conf->tag >= t->tag_ub)
    return strata_err_set(STRATA_EINVAL,
                          "table: workers at ranks %d..%d and tags %d, %d do not fit %d ranks and "
                          "tag bound %d",
                          conf->rank_base, conf->rank_base + conf->workers - 1, conf->tag,
                          conf->tag + 1, t->size, t->tag_ub);
  strata_table *tb = strata_calloc(1, sizeof *tb);
  if (!tb) return strata_err_set(STRATA_ENOMEM, "table: out of memory");
  tb->t = t;
  tb->c = *conf;
  tb->rule = rule;
  tb->P = conf->workers;
  tb->me = conf->me;
  tb->L = conf->row_len;
  size_t n = conf->n_rows, L = conf->row_len;
  tb->n_local = (uint32_t)(n > (size_t)tb->me ? (n - (size_t)tb->me + (size_t)tb->P - 1) / (size_t)tb->P : 0);
  int rc = 0;
  tb->cache = strata_malloc(n * L * sizeof(float));
  tb->age = strata_calloc(n, sizeof *tb->age);
  tb->req_age = strata_malloc(n * sizeof *tb->req_age);
  tb->sub = strata_calloc(n, 1);
  tb->period = conf->prefetch_period > 0 ? conf->prefetch_period : 1;
  tb->acc = strata_calloc((size_t)tb->period, sizeof *tb->acc);
  tb->acc_list = strata_calloc((size_t)tb->period, sizeof *tb->acc_list);
  tb->n_acc = strata_calloc((size_t)tb->period, sizeof *tb->n_acc);
  int acc_ok = tb->acc && tb->acc_list && tb->n_acc;
  for (int a = 0; acc_ok && a < tb->period; a++) {
    tb->acc[a] = strata_calloc(n, 1);
    tb->acc_list[a] = strata_malloc(n * sizeof **tb->acc_list);
    acc_ok = tb->acc[a] && tb->acc_list[a];
  }
  tb->kept = strata_calloc((size_t)tb->P, sizeof *tb->kept);
  size_t nl = tb->n_local ? tb->n_local : 1;
  tb->vals = strata_malloc(nl * L * sizeof(float));
  tb->subs = strata_calloc(nl * (size_t)tb->P, 1);
  tb->seq_out = strata_calloc((size_t)tb->P, sizeof *tb->seq_out);
  tb->seq_in = strata_calloc((size_t)tb->P, sizeof *tb->seq_in);
  if (!tb->cache || !tb->age || !tb->req_age || !tb->sub || !acc_ok || !tb->kept || !tb->vals ||
      !tb->subs || !tb->seq_out || !tb->seq_in) {
    rc = strata_err_set(STRATA_ENOMEM, "table: out of memory for %zu rows of %zu floats", n, L);
    goto fail;
  }
  if ((rc = ps_oplog_init(&tb->log, conf->n_rows, conf->row_len))) goto fail;
  if ((rc = ps_vclock_init(&tb->vc, tb->P))) goto fail;
  /* Every worker starts at the same clock; init holds every update before it. */
  tb->clock = conf->start_clock;
  tb->vc.min = conf->start_clock;
  for (int w = 0; w < tb->P; w++) tb->vc.c[w] = conf->start_clock;
  for (size_t g = 0; g < n; g++) tb->age[g] = conf->start_clock;
  memcpy(tb->cache, init, n * L * sizeof(float));
  for (size_t g = 0; g < n; g++) tb->req_age[g] = -1;
  for (uint32_t l = 0; l < tb->n_local; l++)
    memcpy(tb->vals + (size_t)l * L, init + ((size_t)tb->me + (size_t)l * (size_t)tb->P) * L,
           L * sizeof(float));
  tb->pure = rule->exact && rule->exact(tb);
  if ((conf->snapshots || tb->pure) &&
      (rc = ps_snapshot_init(&tb->snap, tb->P, tb->n_local, tb->L, tb->vals)))
    goto fail;
  tb->snap.clock = conf->start_clock;
  if (rule->open && (rc = rule->open(tb))) goto fail;
  *out = tb;
  return 0;
fail:
  strata_table_free(tb);
  return rc;
}

static int all_left(strata_table *tb, void *ctx) {
  (void)ctx;
  if (tb->byes < tb->P || tb->fins < tb->P) return 0;
  progress_out(tb);
  return tb->n_out == 0;
}

int strata_table_close(strata_table *tb) {
  if (!tb) return 0;
  int rc = tb->err;
  for (int X = 0; X < tb->P && !rc; X++) {
    ps_hdr *h = strata_malloc(sizeof *h);
    if (!h) {
      rc = strata_err_set(STRATA_ENOMEM, "table: out of memory");
      break;
    }
    *h = (ps_hdr){.type = PS_BYE, .from = tb->me};
    rc = post(tb, X, tb->c.tag, h, sizeof *h);
  }
  if (!rc) rc = wait_until(tb, all_left, NULL);
  if (rc) {
    strata_table_free(tb);
    return rc;
  }
  strata_table_free(tb);
  return 0;
}
