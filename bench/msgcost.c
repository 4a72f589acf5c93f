/*
 * bench/msgcost.c - what a message costs through strata's transport: the
 * latency and bandwidth inputs of a performance model of the engine's
 * pipelined ring and parameter-server traffic.
 *
 * Three patterns, each at sizes 0 and 1, 4, 16, ... bytes up to --max-bytes,
 * every message going through strata_transport (isend/irecv/test/poll over
 * MPI in comm/), waits spinning on the transport's test (strata_comm_wait)
 * like the engine's critical path:
 *
 *   pingpong  rank 0 sends n bytes to rank 1, which sends n bytes back;
 *             the time is the round trip / 2 (one way).
 *   ring      every rank posts a receive of n bytes from rank - 1 and a send
 *             of n bytes to rank + 1 at once and waits for both: one shift
 *             of a parameter-block chunk in a sub-epoch of the ring (with 2
 *             ranks, a simultaneous exchange). Ranks meet at a barrier before
 *             each shift; a shift's time is that of the slowest rank.
 *   rr        rank 0 sends a --req-bytes request to rank 1 and waits for the
 *             n-byte reply (a parameter-server row read); the time is the
 *             whole request-reply. Both sides take messages with the
 *             transport's poll, as the tables do (a probe, then a receive
 *             into a freshly allocated buffer); --rr-recv irecv posts
 *             receives into fixed buffers instead, the transport's bare cost.
 *
 * Pairwise patterns run between ranks 0 and 1; other ranks sleep in the
 * meantime (idle waits) so that they leave the cores to the pair. Every rank
 * sends from one buffer and receives into another (64-byte aligned, as the
 * engine's blocks), both touched before timing; the first and last byte of
 * what arrives are checked against the sender.
 *
 * For every size: one calibration repetition, warm-up repetitions (about
 * 10 ms worth unless --warmup), then timed repetitions (enough for
 * --min-time, at least 5, unless --reps). Rank 0 chooses the counts and
 * tells the others. Output on rank 0: one JSON line on stdout with the build,
 * the machine, every parameter, min/median/max per size (ring: also each
 * rank's median) and the latency alpha and bandwidth beta of each pattern
 * fitted to the medians (alpha_s, beta_bytes_per_s) and to the minima
 * (alpha_min_s, beta_min_bytes_per_s); progress on stderr.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strata/core.h"
#include "strata/options.h"
#include "strata/transport.h"
#include "bench/bench_info.h"

#define PROG "msgcost"

/* Sizes used by the fit (see fit()). */
#define ALPHA_MAX_BYTES 1024
#define BETA_MIN_BYTES 65536

enum {
  TAG_BARRIER = 100, /* + round */
  TAG_PLAN = 200,
  TAG_GATHER = 201,
  TAG_PING = 300,
  TAG_PONG = 301,
  TAG_RING = 302,
  TAG_REQ = 303,
  TAG_REPLY = 304
};

typedef struct bench_opts {
  uint64_t max_bytes;
  int reps, warmup, max_reps, req_bytes, quiet;
  double min_time;
  const char *patterns, *rr_recv, *label;
} bench_opts;

static const strata_option bench_options[] = {
    {"max-bytes", 0, STRATA_OPT_U64, offsetof(bench_opts, max_bytes), "67108864", "N", 0,
     1073741824, NULL, "largest message: sizes are 0 and the powers of 4 up to N", NULL},
    {"reps", 0, STRATA_OPT_INT, offsetof(bench_opts, reps), "0", "N", 0, 10000000, NULL,
     "timed repetitions per size (0: enough for --min-time, at least 5)", NULL},
    {"min-time", 0, STRATA_OPT_DOUBLE, offsetof(bench_opts, min_time), "0.05", "S", 0, 3600, NULL,
     "seconds of timed repetitions per size when --reps is 0", NULL},
    {"max-reps", 0, STRATA_OPT_INT, offsetof(bench_opts, max_reps), "100000", "N", 5, 10000000,
     NULL, "cap on the repetitions chosen from --min-time", NULL},
    {"warmup", 0, STRATA_OPT_INT, offsetof(bench_opts, warmup), "0", "N", 0, 10000000, NULL,
     "untimed repetitions per size (0: about 10 ms worth, at least 2)", NULL},
    {"patterns", 0, STRATA_OPT_STRING, offsetof(bench_opts, patterns), "pingpong,ring,rr", "LIST",
     0, 0, NULL, "comma-separated patterns to run: pingpong, ring, rr", NULL},
    {"req-bytes", 0, STRATA_OPT_INT, offsetof(bench_opts, req_bytes), "16", "N", 0, 1048576, NULL,
     "rr: size of the request", NULL},
    {"rr-recv", 0, STRATA_OPT_CHOICE, offsetof(bench_opts, rr_recv), "poll", "HOW", 0, 0,
     "poll|irecv", "rr: take messages like the PS tables (poll) or into posted receives", NULL},
    {"label", 0, STRATA_OPT_STRING, offsetof(bench_opts, label), "", "TEXT", 0, 0, NULL,
     "free text copied into the JSON (e.g. shm, tcp)", NULL},
    {"quiet", 'q', STRATA_OPT_FLAG, offsetof(bench_opts, quiet), NULL, NULL, 0, 0, NULL,
     "no progress on stderr", NULL},
    {NULL},
};

typedef struct point {
  uint64_t bytes;
  int reps;
  double min, med, max;
  double *rank_med; /* ring: median of each rank's own times */
} point;

/* t(bytes) = alpha + bytes / beta; see fit(). */
typedef struct model {
  double alpha, beta, intercept;
} model;

typedef struct ctx ctx;
/* One repetition on this rank at n bytes: this rank's measured time (s). */
typedef double (*rep_fn)(ctx *c, size_t n);

typedef struct pattern {
  const char *name, *what;
  rep_fn rep;
  int all_ranks; /* else ranks 0 and 1 */
  int on;
  point *pts;
  model fit, fit_min; /* rank 0: of the medians, of the minima */
} pattern;

struct ctx {
  strata_transport t;
  bench_opts o;
  char *sbuf, *rbuf, *req;
  double *times; /* cap per rank, rank 0: every rank's plus one more row */
  int cap;       /* most repetitions of one size, warm-up or timed */
  uint64_t *sizes;
  int n_sizes;
};

/* A rank that fails mid-run would leave its peers blocked: end the job. */
static void must(ctx *c, int rc) {
  if (!rc) return;
  fprintf(stderr, PROG ": rank %d: %s\n", c->t.rank, strata_err_msg());
  fflush(NULL);
  strata_comm_abort(&c->t, 1);
}

static void wait_pair(ctx *c, strata_req *r, int idle) {
  if (idle) {
    must(c, strata_comm_wait_all_idle(&c->t, r, 2));
  } else {
    must(c, strata_comm_wait(&c->t, &r[0]));
    must(c, strata_comm_wait(&c->t, &r[1]));
  }
}

/* Dissemination barrier of empty messages. A tag per round keeps rounds
 * apart; successive barriers match in order (messages between two ranks on
 * one tag do not overtake). idle: sleep between tests instead of spinning. */
static void barrier(ctx *c, int idle) {
  strata_transport *t = &c->t;
  char in = 0, out = 0;
  for (int d = 1, k = 0; d < t->size; d <<= 1, k++) {
    strata_req r[2] = {{0}};
    int to = (t->rank + d) % t->size, from = (t->rank - d + t->size) % t->size;
    must(c, t->irecv(t->impl, &in, 0, from, TAG_BARRIER + k, &r[0]));
    must(c, t->isend(t->impl, &out, 0, to, TAG_BARRIER + k, &r[1]));
    wait_pair(c, r, idle);
  }
}

/* Rank 0's value v, sent to every other participant of the pattern. */
static int plan(ctx *c, int all, int v) {
  strata_transport *t = &c->t;
  int32_t x = v;
  int last = all ? t->size - 1 : 1;
  if (t->rank == 0) {
    for (int r = 1; r <= last; r++) {
      strata_req q = {0};
      must(c, t->isend(t->impl, &x, sizeof x, r, TAG_PLAN, &q));
      must(c, strata_comm_wait(t, &q));
    }
  } else {
    strata_req q = {0};
    must(c, t->irecv(t->impl, &x, sizeof x, 0, TAG_PLAN, &q));
    must(c, strata_comm_wait(t, &q));
  }
  return x;
}

/* ---- the patterns ------------------------------------------------------ */

static double rep_pingpong(ctx *c, size_t n) {
  strata_transport *t = &c->t;
  strata_req s = {0}, r = {0};
  if (t->rank == 0) {
    double t0 = strata_now();
    must(c, t->irecv(t->impl, c->rbuf, n, 1, TAG_PONG, &r));
    must(c, t->isend(t->impl, c->sbuf, n, 1, TAG_PING, &s));
    must(c, strata_comm_wait(t, &s));
    must(c, strata_comm_wait(t, &r));
    return (strata_now() - t0) / 2;
  }
  must(c, t->irecv(t->impl, c->rbuf, n, 0, TAG_PING, &r));
  must(c, strata_comm_wait(t, &r));
  must(c, t->isend(t->impl, c->sbuf, n, 0, TAG_PONG, &s));
  must(c, strata_comm_wait(t, &s));
  return 0;
}

static double rep_ring(ctx *c, size_t n) {
  strata_transport *t = &c->t;
  int left = (t->rank + t->size - 1) % t->size, right = (t->rank + 1) % t->size;
  strata_req r[2] = {{0}};
  barrier(c, 0);
  double t0 = strata_now();
  must(c, t->irecv(t->impl, c->rbuf, n, left, TAG_RING, &r[0]));
  must(c, t->isend(t->impl, c->sbuf, n, right, TAG_RING, &r[1]));
  wait_pair(c, r, 0);
  return strata_now() - t0;
}

/* Spins on poll until a message with this tag arrives from src; checks its
 * length (poll takes any length) and keeps its first and last byte in rbuf
 * for the data check. */
static void poll_one(ctx *c, int tag, int src, size_t n) {
  int got = 0, from = -1;
  void *buf = NULL;
  size_t len = 0;
  while (!got) must(c, c->t.poll(c->t.impl, tag, &got, &from, &buf, &len));
  if (from != src || len != n)
    must(c, strata_err_set(STRATA_ECOMM, "tag %d: %zu bytes from rank %d, expected %zu from %d",
                           tag, len, from, n, src));
  if (n) {
    c->rbuf[0] = ((char *)buf)[0];
    c->rbuf[n - 1] = ((char *)buf)[n - 1];
  }
  strata_free(buf);
}

static double rep_rr(ctx *c, size_t n) {
  strata_transport *t = &c->t;
  const size_t q = (size_t)c->o.req_bytes;
  const int poll = !strcmp(c->o.rr_recv, "poll");
  strata_req s = {0}, r = {0};
  if (t->rank == 0) {
    double t0 = strata_now();
    if (!poll) must(c, t->irecv(t->impl, c->rbuf, n, 1, TAG_REPLY, &r));
    must(c, t->isend(t->impl, c->req, q, 1, TAG_REQ, &s));
    must(c, strata_comm_wait(t, &s));
    if (poll)
      poll_one(c, TAG_REPLY, 1, n);
    else
      must(c, strata_comm_wait(t, &r));
    return strata_now() - t0;
  }
  if (poll) {
    poll_one(c, TAG_REQ, 0, q);
  } else {
    must(c, t->irecv(t->impl, c->req, q, 0, TAG_REQ, &r));
    must(c, strata_comm_wait(t, &r));
  }
  must(c, t->isend(t->impl, c->sbuf, n, 0, TAG_REPLY, &s));
  must(c, strata_comm_wait(t, &s));
  return 0;
}

/* ---- measuring --------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts v in place. */
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int clamp_reps(double want, int lo, int hi) {
  if (!(want < hi)) return hi; /* also NaN */
  return want < lo ? lo : (int)ceil(want);
}

/* count repetitions; this rank's measured times into times and the wall
 * time of each repetition (barrier included) into walls, when not NULL. */
static void run(ctx *c, const pattern *p, size_t n, int count, double *times, double *walls) {
  for (int i = 0; i < count; i++) {
    double t0 = strata_now(), x = p->rep(c, n);
    if (times) times[i] = x;
    if (walls) walls[i] = strata_now() - t0;
  }
}

/* The rank whose bytes this rank receives in pattern p (-1: none). */
static int source_of(const ctx *c, const pattern *p) {
  int me = c->t.rank, P = c->t.size;
  if (p->all_ranks) return (me + P - 1) % P;
  if (p->rep == rep_rr) return me == 0 ? 1 : -1;
  return me == 0 ? 1 : 0;
}

static void human(char *buf, size_t len, uint64_t n) {
  if (n >= (1u << 20) && n % (1u << 20) == 0)
    snprintf(buf, len, "%llu MiB", (unsigned long long)(n >> 20));
  else if (n >= 1024 && n % 1024 == 0)
    snprintf(buf, len, "%llu KiB", (unsigned long long)(n >> 10));
  else
    snprintf(buf, len, "%llu B", (unsigned long long)n);
}

static void measure(ctx *c, pattern *p, int si) {
  strata_transport *t = &c->t;
  const int all = p->all_ranks, me = t->rank;
  const size_t n = (size_t)c->sizes[si];
  if (!all && me > 1) return;

  /* Counts from rank 0's wall time per repetition, barrier included: the
   * median over the warm-up, as one slow repetition is common here. */
  double w;
  run(c, p, n, 1, NULL, &w);
  int W = c->o.warmup ? c->o.warmup : clamp_reps(0.01 / w, 2, c->cap);
  W = plan(c, all, W);
  run(c, p, n, W, NULL, c->times);
  w = median(c->times, W);
  int R = c->o.reps ? c->o.reps : clamp_reps(c->o.min_time / w, 5, c->o.max_reps);
  R = plan(c, all, R);

  int src = source_of(c, p);
  if (n && src >= 0) c->rbuf[0] = c->rbuf[n - 1] = 0;
  run(c, p, n, R, c->times, NULL);
  if (n && src >= 0 && (c->rbuf[0] != (char)(src + 1) || c->rbuf[n - 1] != (char)(src + 1)))
    must(c, strata_err_set(STRATA_ECOMM, "%s: %zu bytes from rank %d arrived with wrong contents",
                           p->name, n, src));

  point *pt = &p->pts[si];
  if (all) {
    /* Every rank's times to rank 0; a shift takes as long as its slowest rank. */
    strata_req q = {0};
    if (me) {
      must(c, t->isend(t->impl, c->times, (size_t)R * sizeof(double), 0, TAG_GATHER, &q));
      must(c, strata_comm_wait(t, &q));
      return;
    }
    for (int r = 1; r < t->size; r++) {
      must(c, t->irecv(t->impl, c->times + (size_t)r * R, (size_t)R * sizeof(double), r,
                       TAG_GATHER, &q));
      must(c, strata_comm_wait(t, &q));
    }
    pt->rank_med = strata_malloc((size_t)t->size * sizeof(double));
    double *slow = c->times + (size_t)t->size * R; /* room after the ranks' rows */
    for (int i = 0; i < R; i++) {
      slow[i] = c->times[i];
      for (int r = 1; r < t->size; r++)
        if (c->times[(size_t)r * R + i] > slow[i]) slow[i] = c->times[(size_t)r * R + i];
    }
    for (int r = 0; r < t->size; r++) {
      double m = median(c->times + (size_t)r * R, R);
      if (pt->rank_med) pt->rank_med[r] = m;
    }
    memmove(c->times, slow, (size_t)R * sizeof(double));
  } else if (me) {
    return;
  }
  pt->bytes = n;
  pt->reps = R;
  pt->med = median(c->times, R);
  pt->min = c->times[0];
  pt->max = c->times[R - 1];
  if (!c->o.quiet) {
    char h[32];
    human(h, sizeof h, n);
    fprintf(stderr, PROG ": %-8s %8s: median %10.2f us (min %.2f, max %.2f), %d reps\n", p->name,
            h, pt->med * 1e6, pt->min * 1e6, pt->max * 1e6, R);
  }
}

/*
 * The model t(n) = alpha + n / beta, fitted in two steps because one line
 * does not fit both ends: small messages go eagerly through a copy, large
 * ones through a rendezvous whose handshake makes the large-size intercept
 * several times the small-message latency.
 *
 *  beta: weighted least squares of median t on n over the sizes >=
 *        BETA_MIN_BYTES, weights 1/t^2 (relative residuals). Sizes grow by
 *        4x, so plain least squares would be fixed by the two largest sizes
 *        alone; relative residuals let each size count, which suits the
 *        chunk sizes in between that the ring sends. beta = 1 / slope (null
 *        when there are fewer than two such sizes or the slope is not
 *        positive); the fitted intercept is reported as intercept_large_s.
 *  alpha: least squares of t - n / beta = alpha over the sizes <=
 *        ALPHA_MAX_BYTES, with beta from above (n / beta dropped without
 *        one): the mean of those residuals.
 *
 * The fit of the medians is the model; the same fit of the minima (the
 * *_min fields) shows what the transport does when nothing else runs: on a
 * shared, oversubscribed machine the medians of the large sizes carry
 * time slices lost to other processes.
 */
static double pick(const point *q, int use_min) { return use_min ? q->min : q->med; }

static model fit(const point *pts, int n_sizes, int use_min) {
  model m = {NAN, NAN, NAN};
  double S = 0, Sx = 0, Sy = 0;
  int k = 0;
  for (int i = 0; i < n_sizes; i++) {
    double t = pick(&pts[i], use_min);
    if (pts[i].bytes < BETA_MIN_BYTES || !(t > 0)) continue;
    double w = 1 / (t * t);
    S += w;
    Sx += w * (double)pts[i].bytes;
    Sy += w * t;
    k++;
  }
  if (k >= 2) {
    double mx = Sx / S, my = Sy / S, Sxx = 0, Sxy = 0;
    for (int i = 0; i < n_sizes; i++) {
      double t = pick(&pts[i], use_min);
      if (pts[i].bytes < BETA_MIN_BYTES || !(t > 0)) continue;
      double w = 1 / (t * t), dx = (double)pts[i].bytes - mx;
      Sxx += w * dx * dx;
      Sxy += w * dx * (t - my);
    }
    double slope = Sxy / Sxx;
    if (slope > 0) {
      m.beta = 1 / slope;
      m.intercept = my - slope * mx;
    }
  }
  double sum = 0;
  k = 0;
  for (int i = 0; i < n_sizes; i++) {
    if (pts[i].bytes > ALPHA_MAX_BYTES) continue;
    sum += pick(&pts[i], use_min) - (isfinite(m.beta) ? (double)pts[i].bytes / m.beta : 0);
    k++;
  }
  if (k) m.alpha = sum / k;
  return m;
}

/* ---- output ------------------------------------------------------------ */

static void print_json(const ctx *c, const pattern *pats, int n_pats) {
  const bench_opts *o = &c->o;
  strata_json j;
  bench_json_begin(&j, "msgcost");
  strata_json_string(&j, "label", o->label);
  strata_json_int(&j, "ranks", c->t.size);
  strata_json_int(&j, "max_bytes", (int64_t)o->max_bytes);
  strata_json_int(&j, "reps", o->reps);
  strata_json_number(&j, "min_time_s", o->min_time);
  strata_json_int(&j, "max_reps", o->max_reps);
  strata_json_int(&j, "warmup", o->warmup);
  strata_json_int(&j, "req_bytes", o->req_bytes);
  strata_json_string(&j, "rr_recv", o->rr_recv);
  strata_json_object_begin(&j, "fit");
  strata_json_string(&j, "model", "t = alpha + bytes / beta");
  strata_json_int(&j, "alpha_max_bytes", ALPHA_MAX_BYTES);
  strata_json_int(&j, "beta_min_bytes", BETA_MIN_BYTES);
  strata_json_string(&j, "beta_weights", "1/t^2");
  strata_json_object_end(&j);
  strata_json_object_begin(&j, "patterns");
  for (int i = 0; i < n_pats; i++) {
    const pattern *p = &pats[i];
    if (!p->on) continue;
    strata_json_object_begin(&j, p->name);
    strata_json_string(&j, "what", p->what);
    strata_json_array_begin(&j, "sizes");
    for (int s = 0; s < c->n_sizes; s++) {
      const point *q = &p->pts[s];
      strata_json_object_begin(&j, NULL);
      strata_json_int(&j, "bytes", (int64_t)q->bytes);
      strata_json_int(&j, "reps", q->reps);
      strata_json_number(&j, "min_s", q->min);
      strata_json_number(&j, "median_s", q->med);
      strata_json_number(&j, "max_s", q->max);
      if (q->rank_med) {
        strata_json_array_begin(&j, "rank_median_s");
        for (int r = 0; r < c->t.size; r++) strata_json_number(&j, NULL, q->rank_med[r]);
        strata_json_array_end(&j);
      }
      strata_json_object_end(&j);
    }
    strata_json_array_end(&j);
    strata_json_number(&j, "alpha_s", p->fit.alpha);
    strata_json_number(&j, "beta_bytes_per_s", p->fit.beta);
    strata_json_number(&j, "intercept_large_s", p->fit.intercept);
    strata_json_number(&j, "alpha_min_s", p->fit_min.alpha);
    strata_json_number(&j, "beta_min_bytes_per_s", p->fit_min.beta);
    strata_json_number(&j, "intercept_large_min_s", p->fit_min.intercept);
    strata_json_object_end(&j);
  }
  strata_json_object_end(&j);
  strata_json_object_end(&j);
  fflush(stdout);
}

/* ---- driver ------------------------------------------------------------ */

static void usage(FILE *f, const strata_optgroup *g) {
  fprintf(f, "usage: mpirun -np P " PROG " [options]   (P >= 2)\n"
             "Latency and bandwidth of the engine's message patterns through strata's "
             "transport.\n");
  strata_options_help(f, g, 1);
  fprintf(f, "\nExamples:\n"
             "  mpirun --oversubscribe -np 2 " PROG " --label shm\n"
             "  mpirun --oversubscribe -np 2 --mca btl tcp,self --mca btl_tcp_if_include lo "
             PROG " --label tcp\n"
             "  mpirun --oversubscribe -np 4 " PROG " --patterns ring --max-bytes 1048576\n");
}

/* Marks the patterns named in list; STRATA_EUSAGE naming the flag. */
static int select_patterns(const char *list, pattern *pats, int n_pats) {
  const char *s = list;
  int any = 0;
  while (*s) {
    size_t len = strcspn(s, ",");
    int hit = 0;
    for (int i = 0; i < n_pats; i++)
      if (strlen(pats[i].name) == len && !strncmp(pats[i].name, s, len)) hit = pats[i].on = 1;
    if (!hit) {
      char q[STRATA_QUOTE_SIZE];
      return strata_err_set(STRATA_EUSAGE, "--patterns: unknown pattern '%s' (pingpong, ring, rr)",
                            strata_quote(q, sizeof q, s, len));
    }
    any = 1;
    s += len;
    if (*s) s++;
  }
  return any ? 0 : strata_err_set(STRATA_EUSAGE, "--patterns: no pattern given");
}

int main(int argc, char **argv) {
  ctx c;
  memset(&c, 0, sizeof c);
  pattern pats[] = {
      {.name = "pingpong",
       .what = "one-way time (round trip / 2) between ranks 0 and 1",
       .rep = rep_pingpong},
      {.name = "ring",
       .what = "one shift: every rank receives from rank-1 and sends to rank+1 at once, after a "
               "barrier; per repetition the slowest rank's time",
       .rep = rep_ring,
       .all_ranks = 1},
      {.name = "rr",
       .what = "request from rank 0 to rank 1 until rank 0 holds the reply of that many bytes",
       .rep = rep_rr},
  };
  const int n_pats = (int)(sizeof pats / sizeof pats[0]);
  if (strata_comm_init(&argc, &argv, &c.t)) {
    fprintf(stderr, PROG ": %s\n", strata_err_msg());
    return 1;
  }
  strata_transport *t = &c.t;
  strata_optgroup g = {"options", bench_options, &c.o};
  int help = 0;
  /* Every rank parses the same argv and so reaches the same verdict: all
   * leave with it, rank 0 alone says why. */
  int rc = strata_options_defaults(&g, 1);
  if (!rc) rc = strata_options_parse(&g, 1, argc - 1, argv + 1, &help);
  if (!rc && !help) rc = select_patterns(c.o.patterns, pats, n_pats);
  if (!rc && !help && t->size < 2)
    rc = strata_err_set(STRATA_EUSAGE, "needs at least 2 MPI ranks (mpirun -np 2 " PROG " ...)");
  if (rc || help) {
    if (t->rank == 0) {
      if (rc)
        fprintf(stderr, PROG ": %s\n", strata_err_msg());
      else
        usage(stdout, &g);
    }
    strata_comm_finalize(t);
    return rc ? 2 : 0;
  }
  bench_opts *o = &c.o;
  if (t->rank == 0 && !o->quiet) {
    fprintf(stderr, PROG ": strata %s (git %s; %s; %s), %d ranks\n", STRATA_VERSION,
            STRATA_GIT_REV, STRATA_BUILD_FLAGS, STRATA_COMPILER, t->size);
    strata_options_echo(stderr, PROG ": ", &g, 1);
  }

  c.n_sizes = 1;
  for (uint64_t n = 1; n <= o->max_bytes; n *= 4) c.n_sizes++;
  c.sizes = strata_malloc((size_t)c.n_sizes * sizeof *c.sizes);
  c.cap = o->reps > o->max_reps ? o->reps : o->max_reps;
  if (o->warmup > c.cap) c.cap = o->warmup;
  /* rank 0: every rank's row plus the per-repetition maxima */
  size_t rows = t->rank == 0 ? (size_t)t->size + 1 : 1;
  c.times = strata_malloc(rows * (size_t)c.cap * sizeof(double));
  size_t buf = o->max_bytes ? (size_t)o->max_bytes : 1;
  c.sbuf = strata_alloc_aligned(buf);
  c.rbuf = strata_alloc_aligned(buf);
  c.req = strata_calloc(1, o->req_bytes ? (size_t)o->req_bytes : 1);
  for (int i = 0; i < n_pats; i++)
    pats[i].pts = strata_calloc((size_t)c.n_sizes, sizeof(point));
  int oom = !c.sizes || !c.times || !c.sbuf || !c.rbuf || !c.req;
  for (int i = 0; i < n_pats; i++) oom |= !pats[i].pts;
  if (oom) must(&c, strata_err_set(STRATA_ENOMEM, "out of memory for %llu-byte buffers",
                                   (unsigned long long)buf));
  c.sizes[0] = 0;
  for (int i = 1; i < c.n_sizes; i++) c.sizes[i] = (uint64_t)1 << (2 * (i - 1));
  /* Touch every page before timing; the byte tells receivers who sent it. */
  memset(c.sbuf, t->rank + 1, buf);
  memset(c.rbuf, 0, buf);

  for (int i = 0; i < n_pats; i++) {
    if (!pats[i].on) continue;
    barrier(&c, 1);
    for (int s = 0; s < c.n_sizes; s++) measure(&c, &pats[i], s);
    if (t->rank == 0) {
      pats[i].fit = fit(pats[i].pts, c.n_sizes, 0);
      pats[i].fit_min = fit(pats[i].pts, c.n_sizes, 1);
    }
  }
  barrier(&c, 1);
  if (t->rank == 0) print_json(&c, pats, n_pats);

  for (int i = 0; i < n_pats; i++) {
    for (int s = 0; pats[i].pts && s < c.n_sizes; s++) strata_free(pats[i].pts[s].rank_med);
    strata_free(pats[i].pts);
  }
  strata_free(c.req);
  strata_free(c.rbuf);
  strata_free(c.sbuf);
  strata_free(c.times);
  strata_free(c.sizes);
  strata_comm_finalize(t);
  return 0;
}
