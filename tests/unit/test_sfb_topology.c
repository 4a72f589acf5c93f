/*
 * Unit tests for worker/sfb_topology.c, the partial-broadcast topology of
 * sufficient factor broadcasting: every graph is well formed (out-degree Q,
 * no self-loop, no repeated edge, strongly connected), its reported tau is
 * what a breadth-first search here finds, tau respects the Moore bound and
 * the construction's bound, and for small P it is the minimum found by
 * enumerating every graph. Its relay routes are breadth-first trees: each
 * worker hears an origin's sets from one in-peer a hop nearer to it (the
 * one of least (q - o) mod P), so every set reaches every worker once, in
 * its distance of hops, and on a circulant every worker relays as many.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "leakcheck.h"

#include "strata/core.h"
#include "strata/error.h"
#include "worker/sfb_topology.h"

/* ---- independent checks ------------------------------------------------ */

/* The diameter by a BFS written here, not the module's; INT_MAX when some
 * worker cannot reach another. */
static int bfs_tau(int P, int Q, const int *peers) {
  int *dist = malloc((size_t)P * sizeof *dist), *queue = malloc((size_t)P * sizeof *queue);
  assert_non_null(dist);
  assert_non_null(queue);
  int worst = 0;
  for (int s = 0; s < P; s++) {
    for (int v = 0; v < P; v++) dist[v] = INT_MAX;
    dist[s] = 0;
    int n = 0, k = 0;
    queue[n++] = s;
    while (k < n) {
      int u = queue[k++];
      for (int j = 0; j < Q; j++) {
        int v = peers[u * Q + j];
        if (dist[v] == INT_MAX) {
          dist[v] = dist[u] + 1;
          queue[n++] = v;
        }
      }
    }
    for (int v = 0; v < P; v++)
      if (dist[v] > worst) worst = dist[v];
  }
  free(dist);
  free(queue);
  return worst;
}

/* Smallest t with Q + Q^2 + ... + Q^t >= P - 1, each sum taken afresh:
 * the module's running sum is what is under test. */
static int moore(int P, int Q) {
  for (int t = 1;; t++) {
    long sum = 0;
    for (int i = 1; i <= t && sum < P; i++) {
      long term = 1;
      for (int k = 0; k < i && term < P; k++) term *= Q;
      sum += term;
    }
    if (sum >= P - 1) return t;
  }
}

/* The constructions' bound: ceil(log_Q P) for Q >= 2. */
static int log_bound(int P, int Q) {
  int k = 0;
  long pow = 1;
  while (pow < P) {
    k++;
    pow *= Q;
  }
  return k;
}

/* Out-degree Q, every peer a worker, no self-loop, no repeat (rows are
 * strictly ascending where the module promises that). */
static void check_shape(int P, int Q, const int *peers, int ascending) {
  for (int p = 0; p < P; p++) {
    const int *row = peers + p * Q;
    for (int j = 0; j < Q; j++) {
      assert_in_range(row[j], 0, P - 1);
      assert_int_not_equal(row[j], p);
      for (int k = 0; k < j; k++) assert_int_not_equal(row[k], row[j]);
      if (ascending && j > 0) assert_true(row[j - 1] < row[j]);
    }
  }
}

/* The in-degrees' spread (largest minus smallest), counted here. */
static int spread_of(int P, int Q, const int *peers) {
  int in[1024] = {0}, lo = INT_MAX, hi = 0;
  for (int e = 0; e < P * Q; e++) in[peers[e]]++;
  for (int v = 0; v < P; v++) {
    lo = in[v] < lo ? in[v] : lo;
    hi = in[v] > hi ? in[v] : hi;
  }
  return hi - lo;
}

/* The least tau of a circulant p -> p + J (every Q-subset J of 1..P-1),
 * by this file's BFS; INT_MAX when none is connected. */
static int brute_circulant_tau(int P, int Q) {
  int *peers = malloc((size_t)P * Q * sizeof *peers), best = INT_MAX;
  assert_non_null(peers);
  for (unsigned m = 0; m < 1u << (P - 1); m++) {
    if (__builtin_popcount(m) != Q) continue;
    for (int p = 0; p < P; p++) {
      int k = 0;
      for (int j = 1; j < P; j++)
        if (m >> (j - 1) & 1) peers[p * Q + k++] = (p + j) % P;
    }
    int tau = bfs_tau(P, Q, peers);
    if (tau < best) best = tau;
  }
  free(peers);
  return best;
}

/* Distances from o by this file's BFS, into d (P entries). */
static void bfs_from(int P, int Q, const int *peers, int o, int *d) {
  int *queue = malloc((size_t)P * sizeof *queue);
  assert_non_null(queue);
  for (int v = 0; v < P; v++) d[v] = -1;
  d[o] = 0;
  int n = 0, k = 0;
  queue[n++] = o;
  while (k < n) {
    int u = queue[k++];
    for (int j = 0; j < Q; j++)
      if (d[peers[u * Q + j]] < 0) {
        d[peers[u * Q + j]] = d[u] + 1;
        queue[n++] = peers[u * Q + j];
      }
  }
  free(queue);
}

static int has_edge(int Q, const int *peers, int u, int v) {
  for (int j = 0; j < Q; j++)
    if (peers[u * Q + j] == v) return 1;
  return 0;
}

/* The routes: distances are the BFS's, each worker's parent for an origin
 * is an in-peer a hop nearer, the one of least (q - o) mod P, so walking
 * parents from any worker reaches the origin in its distance (every set
 * reaches every worker once, along one path); on a circulant every worker
 * relays as many sets. */
static void check_routes(const strata__topology *t) {
  const int P = t->P, Q = t->Q;
  int *parent = malloc(2 * sizeof(int) * (size_t)P * P), *d = malloc((size_t)P * sizeof *d);
  int *relays = calloc((size_t)P, sizeof *relays);
  assert_non_null(parent);
  assert_non_null(d);
  assert_non_null(relays);
  int *dist = parent + P * P;
  assert_int_equal(strata__topology_routes(t, parent, dist), 0);
  for (int o = 0; o < P; o++) {
    bfs_from(P, Q, t->peers, o, d);
    assert_int_equal(parent[o * P + o], -1);
    assert_int_equal(dist[o * P + o], 0);
    for (int r = 0; r < P; r++) {
      if (r == o) continue;
      assert_int_equal(dist[o * P + r], d[r]);
      assert_true(d[r] >= 1 && d[r] <= t->tau);
      int q = parent[o * P + r], best = -1;
      for (int c = 0; c < P; c++)
        if (has_edge(Q, t->peers, c, r) && d[c] == d[r] - 1 &&
            (best < 0 || (c - o + P) % P < (best - o + P) % P))
          best = c;
      assert_int_equal(q, best);
      if (q != o) relays[q]++;
      int hops = 0;
      for (int v = r; v != o && hops <= P; v = parent[o * P + v]) hops++;
      assert_int_equal(hops, d[r]);
    }
  }
  int circulant = 1;
  for (int p = 1; p < P && circulant; p++)
    for (int j = 0; j < Q; j++)
      if (!has_edge(Q, t->peers, p, (t->peers[j] + p) % P)) circulant = 0;
  for (int p = 1; p < P && circulant; p++) assert_int_equal(relays[p], relays[0]);
  free(parent);
  free(d);
  free(relays);
}

static void check_topology(const strata__topology *t, int P, int Q) {
  assert_int_equal(t->in_spread, spread_of(P, Q, t->peers));
  assert_int_equal(t->P, P);
  assert_int_equal(t->Q, Q);
  assert_non_null(t->peers);
  check_shape(P, Q, t->peers, 1);
  int tau = bfs_tau(P, Q, t->peers);
  assert_int_not_equal(tau, INT_MAX);
  assert_int_equal(t->tau, tau);
  assert_true(tau >= moore(P, Q));
  assert_true(t->lower >= moore(P, Q));
  assert_true(tau >= t->lower);
  assert_int_equal(tau == 1, Q == P - 1);
  if (Q == 1) assert_int_equal(tau, P - 1);
  if (Q >= 2) assert_true(tau <= log_bound(P, Q));
  if (P <= 100) {
    int mod_tau = -1;
    assert_int_equal(strata__topology_tau(P, Q, t->peers, &mod_tau), 0);
    assert_int_equal(mod_tau, tau);
    check_routes(t);
  }
}

/* ---- brute force: every graph on P <= 5 workers ------------------------ */

/* The Q-subsets of the P - 1 other workers, as peer rows. */
static int subsets(int P, int Q, int p, int rows[][8]) {
  int n = 0;
  for (unsigned m = 0; m < 1u << P; m++) {
    if (m >> p & 1 || __builtin_popcount(m) != Q) continue;
    int k = 0;
    for (int v = 0; v < P; v++)
      if (m >> v & 1) rows[n][k++] = v;
    n++;
  }
  return n;
}

/* The minimum tau over every digraph with out-degree Q on P workers. */
static int brute_min_tau(int P, int Q) {
  int rows[8][32][8], count[8], pick[8] = {0}, peers[8 * 8];
  for (int p = 0; p < P; p++) count[p] = subsets(P, Q, p, rows[p]);
  int best = INT_MAX;
  for (;;) {
    for (int p = 0; p < P; p++) memcpy(peers + p * Q, rows[p][pick[p]], (size_t)Q * sizeof(int));
    int tau = bfs_tau(P, Q, peers);
    if (tau < best) best = tau;
    int p = 0;
    while (p < P && ++pick[p] == count[p]) pick[p++] = 0;
    if (p == P) break;
  }
  return best;
}

static void test_brute_force_small(void **state) {
  (void)state;
  for (int P = 2; P <= 5; P++)
    for (int Q = 1; Q < P; Q++) {
      int best = brute_min_tau(P, Q);
      strata__topology t;
      assert_int_equal(strata__sfb_topology(P, Q, &t), 0);
      check_topology(&t, P, Q);
      assert_int_equal(t.tau, best);
      assert_true(t.optimal);
      strata__topology_close(&t);
      /* The search finds a graph exactly when the enumeration says one exists. */
      for (int T = 1; T < P; T++) {
        int peers[5 * 4];
        int r = strata__topology_search(P, Q, T, peers);
        assert_int_equal(r, best <= T);
        if (r) {
          check_shape(P, Q, peers, 1);
          assert_true(bfs_tau(P, Q, peers) <= T);
        }
      }
    }
}

/* ---- every P up to 12 -------------------------------------------------- */

static void test_all_small(void **state) {
  (void)state;
  for (int P = 2; P <= 12; P++)
    for (int Q = 1; Q < P; Q++) {
      strata__topology t;
      double t0 = strata_now();
      assert_int_equal(strata__sfb_topology(P, Q, &t), 0);
      double dt = strata_now() - t0;
      check_topology(&t, P, Q);
      /* In the exact range every answer is settled (its time is printed by
       * test_large; a time limit would fail on a busy machine). */
      assert_true(t.optimal);
      (void)dt;
      /* Every worker hears from Q others whenever a circulant reaches the
       * least tau. */
      if (brute_circulant_tau(P, Q) == t.tau) assert_int_equal(t.in_spread, 0);
      strata__topology_close(&t);
      assert_null(t.peers);
    }
}

/* Below the lower bound the search proves there is nothing, including the
 * Moore graphs that cannot exist (P = 7, Q = 2: 2 + 4 = 6 others in 2 hops). */
static void test_search_below_bound(void **state) {
  (void)state;
  int peers[12 * 11];
  for (int P = 3; P <= 12; P++)
    for (int Q = 1; Q < P - 1; Q++) {
      int lb = strata__topology_lower_bound(P, Q);
      assert_true(lb >= moore(P, Q));
      assert_int_equal(strata__topology_search(P, Q, lb - 1, peers), 0);
    }
  assert_int_equal(strata__topology_lower_bound(7, 2), 3);
  assert_int_equal(strata__topology_lower_bound(13, 3), 3);
  assert_int_equal(strata__topology_lower_bound(6, 2), 2);
}

/* ---- large P: the stated construction ---------------------------------- */

static void test_large(void **state) {
  (void)state;
  const int Ps[] = {64, 100, 1000}, Qs[] = {2, 3, 8};
  for (size_t i = 0; i < sizeof Ps / sizeof *Ps; i++)
    for (size_t k = 0; k < sizeof Qs / sizeof *Qs; k++) {
      int P = Ps[i], Q = Qs[k];
      strata__topology t, again;
      double t0 = strata_now();
      assert_int_equal(strata__sfb_topology(P, Q, &t), 0);
      double dt = strata_now() - t0;
      print_message("P = %d, Q = %d: tau %d (lower bound %d, ceil(log_Q P) %d), %.1f ms\n", P, Q,
                    t.tau, t.lower, log_bound(P, Q), dt * 1e3);
      check_topology(&t, P, Q);
      assert_int_equal(t.optimal, t.tau == t.lower);
      /* Deterministic: the same (P, Q) gives the same graph. */
      if (P <= 100) {
        assert_int_equal(strata__sfb_topology(P, Q, &again), 0);
        assert_memory_equal(t.peers, again.peers, (size_t)P * Q * sizeof *t.peers);
        strata__topology_close(&again);
      }
      strata__topology_close(&t);
    }
}

static void test_full_and_ring(void **state) {
  (void)state;
  strata__topology t;
  assert_int_equal(strata__sfb_topology(2, 1, &t), 0);
  assert_int_equal(t.tau, 1);
  assert_int_equal(t.peers[0], 1);
  assert_int_equal(t.peers[1], 0);
  strata__topology_close(&t);
  assert_int_equal(strata__sfb_topology(200, 1, &t), 0);
  check_topology(&t, 200, 1);
  assert_true(t.optimal);
  strata__topology_close(&t);
  assert_int_equal(strata__sfb_topology(200, 199, &t), 0);
  check_topology(&t, 200, 199);
  assert_true(t.optimal);
  strata__topology_close(&t);
}

/* ---- tau on graphs that are not strongly connected ---------------------- */

static void test_tau_disconnected(void **state) {
  (void)state;
  /* Two 2-cycles: 0 <-> 1, 2 <-> 3. */
  const int two[] = {1, 0, 3, 2};
  int tau = 0;
  assert_int_equal(strata__topology_tau(4, 1, two, &tau), 0);
  assert_int_equal(tau, INT_MAX);
  /* A sink: 2 reaches only itself through its self-loop. */
  const int sink[] = {1, 2, 2, 2, 2, 2};
  assert_int_equal(strata__topology_tau(3, 2, sink, &tau), 0);
  assert_int_equal(tau, INT_MAX);
  const int ring[] = {1, 2, 0};
  assert_int_equal(strata__topology_tau(3, 1, ring, &tau), 0);
  assert_int_equal(tau, 2);
  /* No routes where a worker cannot reach another. */
  int parent[2 * 4 * 4];
  strata__topology t = {.P = 4, .Q = 1, .peers = (int *)two, .tau = INT_MAX};
  assert_int_equal(strata__topology_routes(&t, parent, parent + 16), STRATA_EINVAL);
  assert_non_null(strstr(strata_err_msg(), "not strongly connected"));
}

/* ---- errors --------------------------------------------------------------- */

static void usage_error(int P, int Q) {
  strata__topology t;
  memset(&t, 0xab, sizeof t);
  assert_int_equal(strata__sfb_topology(P, Q, &t), STRATA_EUSAGE);
  assert_null(t.peers);
  const char *msg = strata_err_msg();
  assert_non_null(strstr(msg, "--peers"));
  assert_non_null(strstr(msg, "P = "));
  strata__topology_close(&t);
}

static void test_errors(void **state) {
  (void)state;
  usage_error(4, 0);
  usage_error(4, -1);
  usage_error(4, 4);
  usage_error(4, 5);
  usage_error(1, 1);
  usage_error(0, 1);
  usage_error(1, 0);
  int peers[4];
  assert_int_equal(strata__topology_search(1, 1, 1, peers), STRATA_EINVAL);
  assert_int_equal(strata__topology_search(65, 2, 3, peers), STRATA_EINVAL);
  assert_int_equal(strata__topology_search(4, 0, 3, peers), STRATA_EINVAL);
  assert_int_equal(strata__topology_search(4, 1, 0, peers), STRATA_EINVAL);
  strata__topology_close(NULL);
}

static void test_out_of_memory(void **state) {
  (void)state;
  /* P = 10, Q = 2 takes each allocation: the peers, the second
   * construction, and the BFS's scratch for either tau. */
  for (long n = 1;; n++) {
    strata__topology t;
    strata_alloc_fail_after(n);
    int rc = strata__sfb_topology(10, 2, &t);
    strata_alloc_fail_after(0);
    if (rc == 0) {
      assert_true(n > 4);
      check_topology(&t, 10, 2);
      strata__topology_close(&t);
      break;
    }
    assert_int_equal(rc, STRATA_ENOMEM);
    assert_null(t.peers);
    assert_non_null(strstr(strata_err_msg(), "out of memory"));
  }
  int tau = 0;
  const int ring[] = {1, 2, 0};
  strata_alloc_fail_after(1);
  assert_int_equal(strata__topology_tau(3, 1, ring, &tau), STRATA_ENOMEM);
  int parent[2 * 3 * 3];
  strata__topology t = {.P = 3, .Q = 1, .peers = (int *)ring, .tau = 2};
  strata_alloc_fail_after(1);
  assert_int_equal(strata__topology_routes(&t, parent, parent + 9), STRATA_ENOMEM);
  strata_alloc_fail_after(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_brute_force_small, setup, teardown),
      cmocka_unit_test_setup_teardown(test_all_small, setup, teardown),
      cmocka_unit_test_setup_teardown(test_search_below_bound, setup, teardown),
      cmocka_unit_test_setup_teardown(test_large, setup, teardown),
      cmocka_unit_test_setup_teardown(test_full_and_ring, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tau_disconnected, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_out_of_memory, setup, teardown),
  };
  return cmocka_run_group_tests_name("sfb_topology", tests, NULL, NULL);
}
