/*
 * The partial-broadcast topology of sufficient factor broadcasting
 * (internal to libstrata; issue 13, the seed's section on partial
 * broadcasting).
 *
 * P workers each send their sufficient factors to Q out-peers, which relay
 * them on along the routes of strata__topology_routes, so that every set
 * reaches every worker exactly once, a worker d hops away after d - 1
 * relays. The topology is a directed graph with out-degree exactly Q at
 * every worker, no self-loops and no repeated edges, chosen to minimise
 * tau: the longest shortest directed path between any ordered pair of
 * workers (its diameter), the hops after which a set has reached everyone
 * (worker/sfb.c turns hops into clocks).
 * (The seed's program sums the shortest paths instead; its text, and issue
 * 13, ask for the longest, which is what is minimised here.)
 *
 * Lower bound (Moore): a worker reaches at most Q + Q^2 + ... + Q^t others
 * in t hops, so tau >= the smallest t with that sum >= P - 1. Where the sum
 * equals P - 1 exactly with Q >= 2 and t >= 2 the bound is t + 1: such a
 * "Moore digraph" does not exist (Plesnik and Znam 1974; Bridges and Toueg
 * 1980). For Q = 1 the only strongly connected choice is a ring, tau = P - 1;
 * for Q = P - 1 it is full broadcast, tau = 1.
 *
 * Second, among graphs of that tau, one where every worker also hears from
 * exactly Q others (in-degree Q), as far as the constructions below find
 * one: on a circulant the relay trees are rotations of one another, so
 * every worker relays as many sets, where a worker with one in-peer gets
 * every set through that one peer and waits on it alone.
 *
 * Construction, deterministic in (P, Q):
 *   - Q = 1: the ring p -> p + 1; Q = P - 1: every other worker.
 *   - otherwise the best (smaller tau, then smaller spread of in-degrees,
 *     ties to the first) of three digraphs on residues mod P:
 *     the generalized Kautz digraph of Imase and Itoh (1983),
 *       p -> -(p Q + j) mod P, j = 1..Q,
 *     the generalized de Bruijn digraph of Reddy, Pradhan and Kuhl
 *     (1980), p -> (p Q + j) mod P, j = 0..Q-1, both with tau <=
 *     ceil(log_Q P), and a circulant p -> p + J_1, ..., p + J_Q, whose
 *     in-degrees are all Q: the jump set of least tau among all Q-subsets
 *     of 1..P-1 when there are at most STRATA__TOPOLOGY_CIRCULANT_SETS,
 *     else 1..Q (tau = ceil((P - 1) / Q)).
 *     In the first two a self-loop (p among its own Q consecutive residues)
 *     is replaced by the first worker p + 1, p + 2, ... (mod P) not already
 *     an out-peer; no shortest path uses a loop and an added edge lengthens
 *     none, so the bound holds after the repair (the in-degrees may then
 *     differ). The out-peers are distinct since Q < P.
 *   - when that tau is above the lower bound and P <= STRATA__TOPOLOGY_EXACT_P,
 *     an exact search (strata__topology_search) for each tau from the lower
 *     bound up replaces the graph with the first it finds, or proves the
 *     construction optimal.
 * out->optimal says whether tau is proven to be the minimum over all such
 * graphs: it equals the lower bound, or the exact search settled it.
 */
#ifndef STRATA_WORKER_SFB_TOPOLOGY_H
#define STRATA_WORKER_SFB_TOPOLOGY_H

/* Largest P for which the exact search runs: it settles every Q for such P
 * in under a millisecond (tests/unit/test_sfb_topology.c holds it to 50 ms),
 * while P = 13, Q = 2 already takes a quarter of a second to prove that
 * tau 3 is out of reach. */
#define STRATA__TOPOLOGY_EXACT_P 12

/* Most circulant jump sets tried (C(P - 1, Q) of them): 65536 breadth-first
 * searches of P Q steps, milliseconds up to P = 64. */
#define STRATA__TOPOLOGY_CIRCULANT_SETS 65536

/* Largest P strata__topology_search accepts (one machine word per worker). */
#define STRATA__TOPOLOGY_SEARCH_MAX_P 64

typedef struct strata__topology {
  int P, Q;
  /* P * Q entries, strata_malloc'd: peers[p * Q + j] for j < Q are worker
   * p's out-peers, ascending. */
  int *peers;
  int tau;     /* the graph's diameter in hops */
  int in_spread; /* largest minus smallest in-degree (0: every worker hears from Q) */
  int lower;   /* the Moore lower bound on tau over every such graph */
  int optimal; /* 1: tau is proven minimal (tau == lower, or exact search) */
} strata__topology;

/*
 * Computes the topology for P workers with Q out-peers each into *out
 * (caller-allocated; nothing needs to be in it on entry). On success the
 * caller owns out->peers and releases it with strata__topology_close; on
 * failure *out holds nothing to release.
 * @return 0; STRATA_EUSAGE (message naming --peers and P) when P < 2 or Q is
 *         not in 1..P-1; STRATA_ENOMEM.
 */
int strata__sfb_topology(int P, int Q, strata__topology *out);

/* Releases out->peers and zeroes *t; t NULL or already closed is fine. */
void strata__topology_close(strata__topology *t);

/*
 * The diameter of the digraph peers (P * Q entries as in strata__topology,
 * each in 0..P-1), by a breadth-first search from every worker: O(P^2 Q).
 * *tau = INT_MAX when some worker cannot reach another (the graph is not
 * strongly connected). Self-loops and repeated edges are allowed here.
 * @return 0 or STRATA_ENOMEM.
 */
int strata__topology_tau(int P, int Q, const int *peers, int *tau);

/* The Moore lower bound above; P >= 2 and 1 <= Q <= P - 1. */
int strata__topology_lower_bound(int P, int Q);

/*
 * Exact search: is there a digraph on P workers with out-degree Q, no
 * self-loops or repeated edges, and tau <= T? Backtracking over each
 * worker's out-peers in turn, with two prunings: workers not yet told apart
 * by the out-peers chosen so far are interchangeable, so only one
 * arrangement among them is tried; and a worker whose out-peers' choices
 * already cap what it can reach in T hops (counting Q^k for every worker
 * still open) below P - 1 ends the branch. Exponential: meant for
 * P <= STRATA__TOPOLOGY_EXACT_P; 2 <= P <= STRATA__TOPOLOGY_SEARCH_MAX_P,
 * 1 <= Q <= P - 1, T >= 1.
 * On 1 the graph found is in peers (P * Q entries, caller-allocated).
 * @return 1 found, 0 none exists, STRATA_EINVAL for arguments out of range.
 */
int strata__topology_search(int P, int Q, int T, int *peers);

/* The largest minus the smallest in-degree of the digraph peers (P * Q
 * entries). */
int strata__topology_in_spread(int P, int Q, const int *peers);

/*
 * The relay routes of a topology (the sfb back-end's partial broadcast):
 * for every origin o a breadth-first tree over the topology's edges, along
 * which o's factor sets reach every other worker exactly once, each in
 * dist(o, r) <= t->tau hops. parent[o * P + r] is the worker r receives o's
 * sets from (-1 for r == o): of r's in-peers at distance dist(o, r) - 1 from
 * o, the one that follows o most closely, (q - o) mod P least, so that on a
 * circulant the trees are rotations of one another and every worker relays
 * as many sets. dist[o * P + r] is that distance (0 for r == o). Both arrays
 * hold P * P ints, caller-allocated; deterministic in t->peers, so every
 * worker computes the same routes.
 * @return 0, STRATA_EINVAL when the graph is not strongly connected, or
 *         STRATA_ENOMEM.
 */
int strata__topology_routes(const strata__topology *t, int *parent, int *dist);

#endif
