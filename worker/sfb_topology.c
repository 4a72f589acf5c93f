/*
 * The partial-broadcast topology (worker/sfb_topology.h): the Moore lower
 * bound, two digraph constructions on residues mod P, a breadth-first
 * diameter, and an exact backtracking search for small P.
 */
#include "worker/sfb_topology.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "strata/core.h"
#include "strata/error.h"

void strata__topology_close(strata__topology *t) {
  if (!t) return;
  strata_free(t->peers);
  memset(t, 0, sizeof *t);
}

int strata__topology_lower_bound(int P, int Q) {
  if (Q <= 1) return P - 1;
  int t = 0;
  long reach = 0, level = 1;
  while (reach < P - 1) {
    t++;
    level *= Q;
    reach += level;
  }
  /* No Moore digraph of degree >= 2 and diameter >= 2 exists. */
  if (reach == P - 1 && t >= 2) t++;
  return t;
}

int strata__topology_tau(int P, int Q, const int *peers, int *tau) {
  int *dist = strata_malloc(2 * (size_t)P * sizeof *dist);
  if (!dist) return strata_err_set(STRATA_ENOMEM, "out of memory for a %d-worker topology", P);
  int *queue = dist + P;
  int worst = 0;
  for (int s = 0; s < P && worst != INT_MAX; s++) {
    for (int v = 0; v < P; v++) dist[v] = -1;
    dist[s] = 0;
    queue[0] = s;
    int head = 0, tail = 1;
    while (head < tail) {
      int u = queue[head++];
      for (int j = 0; j < Q; j++) {
        int v = peers[(size_t)u * Q + j];
        if (dist[v] < 0) {
          dist[v] = dist[u] + 1;
          queue[tail++] = v;
        }
      }
    }
    /* BFS visits in order of distance: the last one dequeued is farthest. */
    if (tail < P) worst = INT_MAX;
    else if (dist[queue[P - 1]] > worst) worst = dist[queue[P - 1]];
  }
  strata_free(dist);
  *tau = worst;
  return 0;
}

/* ---- constructions ---------------------------------------------------- */

static void sort_row(int *row, int n) {
  for (int i = 1; i < n; i++) {
    int x = row[i], k = i;
    for (; k > 0 && row[k - 1] > x; k--) row[k] = row[k - 1];
    row[k] = x;
  }
}

static int in_row(const int *row, int n, int v) {
  for (int i = 0; i < n; i++)
    if (row[i] == v) return 1;
  return 0;
}

/* Worker p's out-peers are Q consecutive residues starting at first(p)
 * (distinct, as Q < P); a self-loop among them gives way to the nearest
 * worker after p that is not yet an out-peer. */
static void residue_graph(int P, int Q, int kautz, int *peers) {
  for (int p = 0; p < P; p++) {
    int *row = peers + (size_t)p * Q;
    int n = 0, loop = 0;
    for (int j = 0; j < Q; j++) {
      long v = kautz ? -((long)p * Q + j + 1) : (long)p * Q + j;
      int w = (int)(((v % P) + P) % P);
      if (w == p) loop = 1;
      else row[n++] = w;
    }
    for (int k = 1; loop && n < Q; k++) {
      int w = (p + k) % P;
      if (!in_row(row, n, w)) row[n++] = w;
    }
    sort_row(row, Q);
  }
}

int strata__topology_in_spread(int P, int Q, const int *peers) {
  int lo = INT_MAX, hi = 0;
  for (int v = 0; v < P; v++) {
    int in = 0;
    for (size_t e = 0; e < (size_t)P * Q; e++) in += peers[e] == v;
    lo = in < lo ? in : lo;
    hi = in > hi ? in : hi;
  }
  return hi - lo;
}

/* The circulant with jumps J[0..Q) (distinct, in 1..P-1): p -> p + J_j. */
static void circulant_graph(int P, int Q, const int *J, int *peers) {
  for (int p = 0; p < P; p++) {
    for (int j = 0; j < Q; j++) peers[(size_t)p * Q + j] = (p + J[j]) % P;
    sort_row(peers + (size_t)p * Q, Q);
  }
}

/* A circulant's tau: every worker sees the same graph, so one
 * breadth-first search from worker 0 gives it (INT_MAX: not connected).
 * dist and queue hold P entries each. */
static int circulant_tau(int P, int Q, const int *J, int *dist, int *queue) {
  for (int v = 0; v < P; v++) dist[v] = -1;
  dist[0] = 0;
  queue[0] = 0;
  int head = 0, tail = 1;
  while (head < tail) {
    int u = queue[head++];
    for (int j = 0; j < Q; j++) {
      int v = (u + J[j]) % P;
      if (dist[v] < 0) {
        dist[v] = dist[u] + 1;
        queue[tail++] = v;
      }
    }
  }
  return tail < P ? INT_MAX : dist[queue[P - 1]];
}

/* The circulant of least tau among the jump sets tried, into J: every
 * Q-subset of 1..P-1 in lexicographic order (the first of least tau; it
 * stops at the lower bound) when there are at most
 * STRATA__TOPOLOGY_CIRCULANT_SETS of them, else 1..Q. Returns its tau, or
 * STRATA_ENOMEM. */
static int best_circulant(int P, int Q, int lower, int *J) {
  int *dist = strata_malloc(2 * (size_t)P * sizeof *dist), *cur = strata_malloc((size_t)Q * sizeof *cur);
  if (!dist || !cur) {
    strata_free(dist);
    strata_free(cur);
    return strata_err_set(STRATA_ENOMEM, "out of memory for a %d-worker topology", P);
  }
  double sets = 1;
  for (int k = 0; k < Q && sets <= STRATA__TOPOLOGY_CIRCULANT_SETS; k++)
    sets = sets * (P - 1 - k) / (k + 1);
  for (int j = 0; j < Q; j++) cur[j] = J[j] = j + 1;
  int best = circulant_tau(P, Q, cur, dist, dist + P);
  while (sets <= STRATA__TOPOLOGY_CIRCULANT_SETS && best > lower) {
    int i = Q - 1; /* the next subset in lexicographic order */
    while (i >= 0 && cur[i] == P - Q + i) i--;
    if (i < 0) break;
    cur[i]++;
    for (int j = i + 1; j < Q; j++) cur[j] = cur[j - 1] + 1;
    int tau = circulant_tau(P, Q, cur, dist, dist + P);
    if (tau < best) {
      best = tau;
      memcpy(J, cur, (size_t)Q * sizeof *J);
    }
  }
  strata_free(dist);
  strata_free(cur);
  return best;
}

/* ---- exact search ----------------------------------------------------- */

typedef struct search {
  int P, Q, T;
  uint64_t out[STRATA__TOPOLOGY_SEARCH_MAX_P]; /* out-peers of workers < u */
  /* twin[v]: the largest w in (u, v) that no chosen out-set tells apart from
   * v (the same in-edges from every worker < u), or -1. */
  int twin[STRATA__TOPOLOGY_SEARCH_MAX_P];
} search;

/* Whether worker s can still reach the P - 1 others in T hops, given that
 * workers < n have their out-peers and every other may reach Q new ones per
 * hop. Exact once every worker it meets within T - 1 hops is placed. */
static int can_reach(const search *c, int s, int n) {
  uint64_t seen = 1ull << s, front = seen;
  long open = 0, open_total = 0;
  for (int l = 0; l < c->T; l++) {
    uint64_t next = 0;
    long next_open = open * c->Q;
    for (uint64_t f = front; f; f &= f - 1) {
      int v = __builtin_ctzll(f);
      if (v < n) next |= c->out[v];
      else next_open += c->Q;
    }
    if (next_open > c->P) next_open = c->P;
    next &= ~seen;
    seen |= next;
    front = next;
    open = next_open;
    open_total += open;
    if (__builtin_popcountll(seen) - 1 + open_total >= c->P - 1) return 1;
  }
  return 0;
}

static int place(search *c, int u);

/* Chooses worker u's out-peers from v upward, k still to choose, set so far. */
static int choose(search *c, int u, int v, int k, uint64_t set) {
  if (k == 0) {
    c->out[u] = set;
    for (int s = 0; s <= u; s++)
      if (!can_reach(c, s, u + 1)) return 0;
    return place(c, u + 1);
  }
  for (; v <= c->P - k; v++) {
    if (v == u) continue;
    /* Among twins only a prefix (in index order) is tried: any other
     * arrangement is the same graph with twins renamed. */
    if (v > u && c->twin[v] >= 0 && !(set >> c->twin[v] & 1)) continue;
    int r = choose(c, u, v + 1, k - 1, set | 1ull << v);
    if (r) return r;
  }
  return 0;
}

static int place(search *c, int u) {
  if (u == c->P) return 1;
  int saved[STRATA__TOPOLOGY_SEARCH_MAX_P];
  memcpy(saved, c->twin, sizeof saved);
  /* Workers > u stay twins while every out-set chosen so far holds both
   * or neither: the newest choice, worker u - 1's, may split a class, whose
   * members the saved chain lists in decreasing order. */
  for (int v = u + 1; v < c->P; v++) {
    int w = saved[v];
    if (u > 0) {
      uint64_t o = c->out[u - 1];
      while (w > u && (o >> w & 1) != (o >> v & 1)) w = saved[w];
    }
    c->twin[v] = w > u ? w : -1;
  }
  int r = choose(c, u, 0, c->Q, 0);
  memcpy(c->twin, saved, sizeof saved);
  return r;
}

int strata__topology_search(int P, int Q, int T, int *peers) {
  if (P < 2 || P > STRATA__TOPOLOGY_SEARCH_MAX_P || Q < 1 || Q >= P || T < 1)
    return strata_err_set(STRATA_EINVAL, "topology search: P = %d, Q = %d, tau = %d out of range", P,
                          Q, T);
  search c;
  memset(&c, 0, sizeof c);
  c.P = P;
  c.Q = Q;
  c.T = T;
  for (int v = 0; v < P; v++) c.twin[v] = v - 1;
  if (!place(&c, 0)) return 0;
  for (int p = 0; p < P; p++) {
    int n = 0;
    for (uint64_t o = c.out[p]; o; o &= o - 1) peers[(size_t)p * Q + n++] = __builtin_ctzll(o);
  }
  return 1;
}

/* ---- relay routes ----------------------------------------------------- */

int strata__topology_routes(const strata__topology *t, int *parent, int *dist) {
  const int P = t->P, Q = t->Q;
  int *queue = strata_malloc((size_t)P * sizeof *queue);
  if (!queue) return strata_err_set(STRATA_ENOMEM, "out of memory for the routes of %d workers", P);
  int rc = 0;
  for (int o = 0; o < P && !rc; o++) {
    int *d = dist + (size_t)o * P, *par = parent + (size_t)o * P;
    for (int v = 0; v < P; v++) d[v] = par[v] = -1;
    d[o] = 0;
    queue[0] = o;
    int head = 0, tail = 1;
    while (head < tail) {
      int u = queue[head++];
      for (int j = 0; j < Q; j++) {
        int v = t->peers[(size_t)u * Q + j];
        if (d[v] < 0) {
          d[v] = d[u] + 1;
          queue[tail++] = v;
        }
        /* Every in-peer one hop nearer is a candidate; the least (u - o)
         * mod P wins, whatever order the search met them in. */
        if (d[v] == d[u] + 1 &&
            (par[v] < 0 || (u - o + P) % P < (par[v] - o + P) % P))
          par[v] = u;
      }
    }
    if (tail < P)
      rc = strata_err_set(STRATA_EINVAL, "the topology of %d workers, %d out-peers each, is not "
                          "strongly connected", P, Q);
  }
  strata_free(queue);
  return rc;
}

/* ---- the topology ----------------------------------------------------- */

int strata__sfb_topology(int P, int Q, strata__topology *out) {
  memset(out, 0, sizeof *out);
  if (P < 2)
    return strata_err_set(STRATA_EUSAGE, "--peers %d: partial broadcast needs P >= 2 workers (P = %d)",
                          Q, P);
  if (Q < 1 || Q >= P)
    return strata_err_set(STRATA_EUSAGE, "--peers %d: must be 1 to P - 1 = %d (P = %d workers)", Q,
                          P - 1, P);
  int rc = 0;
  int *alt = NULL, *J = NULL;
  out->P = P;
  out->Q = Q;
  out->lower = strata__topology_lower_bound(P, Q);
  out->peers = strata_malloc((size_t)P * Q * sizeof *out->peers);
  if (!out->peers) goto nomem;

  if (Q == 1 || Q == P - 1) {
    /* The ring, and full broadcast: both meet the lower bound. */
    for (int p = 0; p < P; p++)
      for (int j = 0; j < Q; j++) out->peers[(size_t)p * Q + j] = (p + 1 + j) % P;
    for (int p = 0; p < P; p++) sort_row(out->peers + (size_t)p * Q, Q);
    out->tau = out->lower;
    out->optimal = 1;
    return 0;
  }

  alt = strata_malloc((size_t)P * Q * sizeof *alt);
  J = strata_malloc((size_t)Q * sizeof *J);
  if (!alt || !J) goto nomem;
  /* Three constructions; the least tau wins, then the least spread of
   * in-degrees, then the first. */
  for (int k = 0; k < 3; k++) {
    int tau, *g = k ? alt : out->peers;
    if (k < 2) {
      residue_graph(P, Q, k == 0, g);
      if ((rc = strata__topology_tau(P, Q, g, &tau))) goto fail;
    } else {
      if ((tau = best_circulant(P, Q, out->lower, J)) < 0) {
        rc = tau;
        goto fail;
      }
      circulant_graph(P, Q, J, g);
    }
    int spread = strata__topology_in_spread(P, Q, g);
    if (k == 0 || tau < out->tau || (tau == out->tau && spread < out->in_spread)) {
      if (k) {
        int *t = out->peers;
        out->peers = alt;
        alt = t;
      }
      out->tau = tau;
      out->in_spread = spread;
    }
  }
  out->optimal = out->tau == out->lower;
  if (!out->optimal && P <= STRATA__TOPOLOGY_EXACT_P) {
    for (int T = out->lower; T < out->tau; T++) {
      rc = strata__topology_search(P, Q, T, alt);
      if (rc < 0) goto fail;
      if (rc == 1) {
        int *t = out->peers;
        out->peers = alt;
        alt = t;
        out->tau = T;
        out->in_spread = strata__topology_in_spread(P, Q, out->peers);
        break;
      }
    }
    rc = 0;
    out->optimal = 1;
  }
  strata_free(alt);
  strata_free(J);
  return 0;

nomem:
  rc = strata_err_set(STRATA_ENOMEM, "out of memory for the topology of %d workers", P);
fail:
  strata_free(alt);
  strata_free(J);
  strata__topology_close(out);
  return rc;
}
