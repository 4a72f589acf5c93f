/*
 * strata-pagerank: PageRank by power iteration, written on strata's public
 * headers as any user's app (strata_main's program; `strata pagerank` runs
 * it).
 *
 * The iteration: r' = (1 - d)/n + d (sum over in-edges u -> v of r_u /
 * out_u + D/n), with D the rank of the dangling vertices (no out-edges),
 * whose mass is spread evenly over all vertices, so the ranks keep summing
 * to 1. A pass is one iteration: after pass p (0-based) the model is
 * r^(p+1), r^(0) = 1/n.
 *
 * Scheduled and serial modes (the ring; exact, in double): vertices are cut
 * into B blocks; data block (i, j) holds the edges from block j into block
 * i (tiles.c); resident block i holds block i's accumulators and ranks; the
 * rotating block j carries block j's contributions r_u / out_u, 8 to a row,
 * and one last row with D_j, block j's dangling rank. With Gemulla's
 * diagonal schedule row i takes column i first in every pass, so that task
 * turns block i's accumulators of the last pass into ranks and
 * contributions, chunk by chunk, before the block travels on: every other
 * row then reads this pass's values, and the ring computes the same
 * iteration as one process.
 *
 * Parameter-server modes (data-parallel, as the bounded-staleness paper's
 * NanTable): the ranks are the global block, float rows of the table; a
 * worker takes the edges into its destination blocks, reads the ranks once
 * per pass (at its first task) under the mode's staleness, and at each
 * row's last task writes that block's new ranks (one writer per row). BSP then computes the same
 * iteration in float; SSP and async read ranks up to s clocks old.
 *
 * Quality per pass, as the paper measures it: the sum of squared errors
 * from a ground truth of --truth-iters exact iterations (computed here with
 * the same kernel, cached by the graph's checksum), the L1 change of the
 * pass, and the ranks' sum.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pr.h"
#include "strata/core.h"
#include "strata/main.h"

typedef struct pr_config {
  const char *graph;
  double damping;
  int top;
  int truth_iters;
  const char *truth_cache;
  int subtile_bits;
  uint64_t min_share;
} pr_config;

#define OPT(f) offsetof(pr_config, f)
static const strata_option pr_options[] = {
    {.name = "graph",
     .short_name = 'g',
     .type = STRATA_OPT_STRING,
     .offset = OPT(graph),
     .metavar = "SPEC",
     .help = "a SNAP edge list (plain or .gz), a Matrix Market file, or "
             "synth:scale=S,edge-factor=E,seed=X[,a=,b=,c=] (Graph500 R-MAT)"},
    {.name = "damping",
     .short_name = 'd',
     .type = STRATA_OPT_DOUBLE | STRATA_OPT_OPEN_MIN,
     .offset = OPT(damping),
     .def = "0.85",
     .metavar = "D",
     .max = 0.999999,
     .help = "damping factor: the probability of following a link"},
    {.name = "top",
     .type = STRATA_OPT_INT | STRATA_OPT_RESUMABLE,
     .offset = OPT(top),
     .def = "10",
     .metavar = "K",
     .max = 1000000,
     .help = "with --model-out: the K highest-ranked vertices go to top.txt and the summary"},
    {.name = "truth-iters",
     .type = STRATA_OPT_INT,
     .offset = OPT(truth_iters),
     .def = "100",
     .metavar = "N",
     .max = 100000,
     .help = "exact iterations of the ground truth the SSE is measured against (0: no SSE)"},
    {.name = "truth-cache",
     .type = STRATA_OPT_STRING | STRATA_OPT_RESUMABLE,
     .offset = OPT(truth_cache),
     .metavar = "DIR",
     .help = "where ground truths are kept by the graph's checksum (default $STRATA_CACHE_DIR, "
             "$XDG_CACHE_HOME/strata or ~/.cache/strata; 'none': never)"},
    {.name = "subtile-bits",
     .type = STRATA_OPT_INT,
     .offset = OPT(subtile_bits),
     .def = "0",
     .metavar = "K",
     .max = 24,
     .help = "destination sub-tiles of 2^K vertices, whose accumulators a group keeps in cache "
             "(0: as many as fill the L2 cache, 14 to 18; at least 8)"},
    {.name = "min-share",
     .type = STRATA_OPT_U64,
     .offset = OPT(min_share),
     .def = "1048576",
     .metavar = "E",
     .help = "scheduled mode: spread the blocks over the workers only when each one's share of the "
             "edges is at least E (0: always); below, worker 0 runs every task, the others idle: "
             "on a small graph handing blocks between workers costs more time than it saves"},
    {.name = NULL},
};

/* R-MAT's keys for --graph synth:... */
static const strata_option rmat_keys[] = {
    {.name = "scale",
     .type = STRATA_OPT_INT,
     .offset = offsetof(pr_rmat, scale),
     .def = "16",
     .metavar = "S",
     .min = 1,
     .max = 31,
     .help = "2^S vertices"},
    {.name = "edge-factor",
     .type = STRATA_OPT_INT,
     .offset = offsetof(pr_rmat, edge_factor),
     .def = "16",
     .metavar = "E",
     .min = 1,
     .max = 1024,
     .help = "E * 2^S edges"},
    {.name = "a",
     .type = STRATA_OPT_DOUBLE,
     .offset = offsetof(pr_rmat, a),
     .def = "0.57",
     .metavar = "A",
     .max = 1,
     .help = ""},
    {.name = "b",
     .type = STRATA_OPT_DOUBLE,
     .offset = offsetof(pr_rmat, b),
     .def = "0.19",
     .metavar = "B",
     .max = 1,
     .help = ""},
    {.name = "c",
     .type = STRATA_OPT_DOUBLE,
     .offset = offsetof(pr_rmat, c),
     .def = "0.19",
     .metavar = "C",
     .max = 1,
     .help = ""},
    {.name = "seed",
     .type = STRATA_OPT_U64,
     .offset = offsetof(pr_rmat, seed),
     .def = "1",
     .metavar = "X",
     .help = ""},
    {.name = NULL},
};

typedef struct rmat_spec {
  pr_rmat r;
  const char *text;
} rmat_spec;

static const strata_option rmat_option[] = {
    {.name = "synth",
     .type = STRATA_OPT_SPEC,
     .offset = offsetof(rmat_spec, text),
     .metavar = "SPEC",
     .help = "",
     .keys = rmat_keys},
    {.name = NULL},
};

static int parse_rmat(const char *text, pr_rmat *out) {
  rmat_spec sp = {0};
  strata_optgroup g = {"synth", rmat_option, &sp};
  char flag[] = "--synth", *argv[] = {flag, (char *)text};
  int help = 0, rc = strata_options_defaults(&g, 1);
  if (!rc)
    rc = strata_options_parse(&g, 1, 2, argv, &help);
  if (rc)
    return strata_err_set(STRATA_EUSAGE, "--graph synth:%s: %s", text, strata_err_msg());
  if (sp.r.a + sp.r.b + sp.r.c > 1)
    return strata_err_set(STRATA_EUSAGE, "--graph synth:%s: a + b + c must be at most 1", text);
  *out = sp.r;
  return 0;
}

/* ---- what travels ----------------------------------------------------- */

#define RING_PER_ROW 8 /* doubles in a rotating row */
#define PS_PER_ROW 16  /* floats in a table row */

/* Meta bytes: this header, first[B + 1], then (parameter-server modes)
 * out-degrees[n]. */
typedef struct pr_meta {
  uint32_t n, B;
  uint32_t ps, has_truth;
  uint32_t whole, pad; /* 1: a tile's edges are one chunk, added at its last (pr_load) */
  double damping;
} pr_meta;

/* Resident block i in the ring: this header, then doubles: acc[2][2n]
 * (this pass's and the last pass's sums, by pass parity, as (hi, lo)
 * pairs: pr_dd_add), rank[n] (the ranks this pass started from), inv[n]
 * (1 / out-degree; 0 for a dangling vertex), truth[n] (has_truth),
 * dsum[2][2B] (the D_j each column carried, (hi, lo), by pass parity). In
 * parameter-server modes: the header, acc[2n], truth[n]. */
typedef struct pr_res {
  uint32_t n, B;
  uint32_t has_truth, ps;
  double dpart[2]; /* the dangling rank of the chunks finalised so far, (hi, lo) */
} pr_res;

typedef struct res_view {
  pr_res *h;
  double *acc[2], *rank, *inv, *truth, *dsum[2];
} res_view;

static size_t res_len(uint32_t n, uint32_t B, int has_truth, int ps) {
  size_t d = ps ? (size_t)n * (2 + !!has_truth) : (size_t)n * (6 + !!has_truth) + 4 * (size_t)B;
  return sizeof(pr_res) + d * 8;
}

static res_view res_open(void *buf) {
  res_view v = {.h = buf};
  double *d = (double *)(v.h + 1);
  size_t n = v.h->n;
  v.acc[0] = d;
  if (v.h->ps) {
    v.truth = v.h->has_truth ? d + 2 * n : NULL;
    return v;
  }
  v.acc[1] = d + 2 * n;
  v.rank = d + 4 * n;
  v.inv = d + 5 * n;
  d += 6 * n;
  if (v.h->has_truth) {
    v.truth = d;
    d += n;
  }
  v.dsum[0] = d;
  v.dsum[1] = d + 2 * (size_t)v.h->B;
  return v;
}

/* D, the dangling rank, from the blocks' (hi, lo) parts in block order. */
static double dsum_total(const double *ds, uint32_t B) {
  double hl[2] = {0, 0};
  for (uint32_t k = 0; k < B; k++) {
    pr_dd_add(hl, ds[2 * k]);
    hl[1] += ds[2 * k + 1];
  }
  return pr_dd_value(hl);
}

/* ---- the coordinator's side ------------------------------------------ */

/* The top K, kept for the summary. */
typedef struct top_entry {
  uint64_t id;
  double rank;
} top_entry;

typedef struct pr_priv {
  uint32_t n;
  uint64_t m;
  int B;
  uint32_t *first;
  uint64_t *ids;    /* by input vertex; NULL: input vertex numbers are the ids */
  uint32_t *number; /* input vertex v is vertex number[v] of the blocks (by_degree) */
  uint64_t checksum;
  uint32_t dangling, self_loops;
  int one;          /* worker 0 runs every task (--min-share) */
  int truth_cached; /* 1 read from the cache, 0 computed, -1 none */
  double truth_s;
  char truth_path[4096];
  /* The export's top K, which the summary prints (r->problem.priv). */
  top_entry *top;
  int ntop;
} pr_priv;

static void priv_free(void *p) {
  pr_priv *v = p;
  if (!v)
    return;
  strata_free(v->first);
  strata_free(v->ids);
  strata_free(v->top);
  strata_free(v->number);
  strata_free(v);
}

static const char *cache_dir(const pr_config *cfg, char *buf, size_t n) {
  const char *e;
  if (cfg->truth_cache)
    return strcmp(cfg->truth_cache, "none") ? cfg->truth_cache : NULL;
  if ((e = getenv("STRATA_CACHE_DIR")) && *e)
    return e;
  if ((e = getenv("XDG_CACHE_HOME")) && *e) {
    snprintf(buf, n, "%s/strata", e);
    return buf;
  }
  if ((e = getenv("HOME")) && *e) {
    snprintf(buf, n, "%s/.cache/strata", e);
    return buf;
  }
  return NULL;
}

/* One exact iteration over the tiles: r <- r' (block by block). */
static int truth_step(const strata_problem *prob, const pr_blocks *bl, int depth, double d,
                      const double *inv, double *r, double *c, double *acc) {
  uint32_t n = bl->first[bl->B];
  double Dhl[2] = {0, 0};
  for (uint32_t u = 0; u < n; u++) {
    c[u] = r[u] * inv[u];
    if (inv[u] == 0)
      pr_dd_add(Dhl, r[u]);
  }
  double D = pr_dd_value(Dhl);
  for (int i = 0; i < bl->B; i++) {
    uint32_t lo = bl->first[i], ni = bl->first[i + 1] - lo;
    memset(acc, 0, (size_t)ni * 16);
    for (int j = 0; j < bl->B; j++)
      for (int k = 0; k < depth; k++)
        pr_tile_scatter(prob->data[(size_t)i * bl->B + j].buf, k, c + bl->first[j], acc);
    for (uint32_t v = 0; v < ni; v++)
      r[lo + v] = (1 - d) / n + d * (pr_dd_value(acc + 2 * v) + D / n);
  }
  return 0;
}

typedef struct truth_file {
  const double *r;
  uint32_t n;
  uint64_t key;
} truth_file;

static int fill_truth(FILE *f, void *ud) {
  truth_file *t = ud;
  uint64_t head[2] = {t->key, t->n};
  if (fwrite(head, 8, 2, f) != 2 || fwrite(t->r, 8, t->n, f) != t->n)
    return strata_err_set(STRATA_EIO, "short write");
  return 0;
}

/* The ground truth, from the cache or computed (and cached). */
static int ground_truth(const pr_config *cfg, strata_problem *prob, pr_priv *pv,
                        const pr_blocks *bl, int depth, const double *inv, double *truth) {
  char dirbuf[4096];
  const char *dir = cache_dir(cfg, dirbuf, sizeof dirbuf);
  uint32_t n = pv->n;
  uint64_t key = strata_mix64(pv->checksum ^ strata_mix64((uint64_t)cfg->truth_iters)) ^
                 strata_hash64(&cfg->damping, sizeof cfg->damping, 7);
  pv->truth_path[0] = 0;
  if (dir) {
    snprintf(pv->truth_path, sizeof pv->truth_path, "%.3000s/pagerank-%016llx.f64", dir,
             (unsigned long long)key);
    FILE *f = fopen(pv->truth_path, "rb");
    uint64_t head[2];
    if (f) {
      int good = fread(head, 8, 2, f) == 2 && head[0] == key && head[1] == n &&
                 fread(truth, 8, n, f) == n && fgetc(f) == EOF;
      fclose(f);
      if (good) {
        pv->truth_cached = 1;
        return 0;
      }
    }
  }
  double t0 = strata_now();
  double *c = strata_malloc((size_t)n * 8), *acc = strata_malloc((size_t)n * 16);
  if (!c || !acc) {
    strata_free(c);
    strata_free(acc);
    return strata_err_set(STRATA_ENOMEM, "pagerank: out of memory for the ground truth");
  }
  for (uint32_t v = 0; v < n; v++)
    truth[v] = 1.0 / n;
  for (int it = 0; it < cfg->truth_iters; it++)
    truth_step(prob, bl, depth, cfg->damping, inv, truth, c, acc);
  strata_free(c);
  strata_free(acc);
  pv->truth_cached = 0;
  pv->truth_s = strata_now() - t0;
  if (dir) {
    /* A cache that cannot be written only costs the next run the time. */
    truth_file tf = {truth, n, key};
    char mk[4096];
    snprintf(mk, sizeof mk, "%.3000s", dir);
    for (char *s = mk + 1; *s; s++)
      if (*s == '/') {
        *s = 0;
        mkdir(mk, 0777);
        *s = '/';
      }
    mkdir(mk, 0777);
    if (strata_write_atomic(pv->truth_path, fill_truth, &tf)) {
      strata_log(STRATA_LOG_WARN, "pagerank: cannot cache the ground truth: %s", strata_err_msg());
      pv->truth_path[0] = 0;
    }
  }
  return 0;
}

static int oom(void) { return strata_err_set(STRATA_ENOMEM, "pagerank: out of memory"); }

/* --subtile-bits 0: sub-tiles whose (hi, lo) accumulators fill this core's
 * L2 cache (2^16 vertices, 1 MB, on a core with 1 MB of L2), within 2^14 to
 * 2^18; 2^16 where the size is not known. With the vertices numbered by
 * degree (by_degree), 2^12 to 2^17 took the same CPU time per pass on a
 * Zen 5 EPYC (1 MB of L2) on R-MAT scale 22, serially, and 2^18, whose
 * accumulators spill into L3, 1.7 times as much; 2 workers ran alike with
 * 2^14 and 2^16. */
static int default_subtile_bits(void) {
  long l2 = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
  l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  if (l2 <= 0) return 16;
  int k = 14;
  while (k < 18 && (16L << (k + 1)) <= l2) k++;
  return k;
}

/* Where block b of B starts when n vertices are dealt to them in turn: the
 * first n % B blocks hold one more. */
static uint32_t deal_first(uint32_t n, int B, int b) {
  uint32_t k = (uint32_t)b, extra = n % (uint32_t)B;
  return k * (n / (uint32_t)B) + (k < extra ? k : extra);
}

/* The input's vertices ranked by out-degree, most first, ties in input
 * order (a stable radix sort on the degree's complement), then dealt to the
 * B blocks in turn, rank k to block k mod B, where they keep their order:
 * number[v] is input vertex v's number, and the edges are renamed to match.
 * Why: a pass reads a source's contribution once per out-edge and adds into
 * a destination's sum once per in-edge, so numbered by degree the vertices
 * that most edges touch share cache lines, and a tile's groups read and
 * write within less memory (on R-MAT scale 22 a pass takes two thirds of
 * the time: Graph500's generator numbers vertices at random, and so do many
 * crawls); dealt in turn, every block, and so every worker's row of tiles,
 * gets as many vertices and about as many edges of every degree. The ranks
 * do not change, beyond the last bit of a sum in another order; they go out
 * in input order (pr_export). */
static int by_degree(pr_graph *g, int B, uint32_t **number) {
  uint32_t n = g->n, *key = strata_calloc(n, 4), *a = strata_malloc((size_t)n * 4),
           *b = strata_malloc((size_t)n * 4), *cnt = strata_malloc(257 * 4);
  if (!key || !a || !b || !cnt) {
    strata_free(key);
    strata_free(a);
    strata_free(b);
    strata_free(cnt);
    return oom();
  }
  for (uint64_t e = 0; e < g->m; e++) key[g->src[e]]++;
  for (uint32_t v = 0; v < n; v++) {
    key[v] = ~key[v];
    a[v] = v;
  }
  for (int shift = 0; shift < 32; shift += 8) {
    memset(cnt, 0, 257 * 4);
    for (uint32_t v = 0; v < n; v++) cnt[((key[a[v]] >> shift) & 255) + 1]++;
    for (int k = 0; k < 256; k++) cnt[k + 1] += cnt[k];
    for (uint32_t v = 0; v < n; v++) b[cnt[(key[a[v]] >> shift) & 255]++] = a[v];
    uint32_t *t = a;
    a = b;
    b = t;
  }
  /* a[k]: the input vertex ranked k; b becomes its number. */
  for (uint32_t k = 0; k < n; k++)
    b[a[k]] = deal_first(n, B, (int)(k % (uint32_t)B)) + k / (uint32_t)B;
  for (uint64_t e = 0; e < g->m; e++) {
    g->src[e] = b[g->src[e]];
    g->dst[e] = b[g->dst[e]];
  }
  strata_free(key);
  strata_free(a);
  strata_free(cnt);
  *number = b;
  return 0;
}

static int pr_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const pr_config *cfg = vcfg;
  pr_graph g = {0};
  pr_blocks bl = {0};
  uint64_t *off = NULL;
  uint32_t *adj = NULL, *deg = NULL;
  double *inv = NULL, *truth = NULL;
  void **tiles = NULL;
  size_t *lens = NULL;
  pr_priv *pv = NULL;
  int rc, ps = strata_mode_is_ps(setup->mode), B = setup->strata;
  int has_truth = cfg->truth_iters > 0;
  /* Each phase's wall and CPU seconds, for -v. */
  double t0 = strata_now(), c0 = strata_cpu_seconds(), t1, c1;
  if (!strncmp(cfg->graph, "synth:", 6)) { /* pr_check made --graph required */
    pr_rmat r;
    if ((rc = parse_rmat(cfg->graph + 6, &r)) || (rc = pr_graph_rmat(&r, &g)))
      return rc;
  } else if ((rc = pr_graph_read(cfg->graph, &g))) {
    return rc;
  }
  uint32_t n = g.n;
  uint64_t m = g.m;
  /* A graph whose share per worker is below --min-share stays on worker 0
   * (pr_schedule). Serial mode, and so worker 0 then, has no ring to feed
   * chunk by chunk: one chunk per tile (compute_ring adds a tile's edges
   * once its whole source block is there), which spares the accumulators a
   * sweep per chunk. The tables read whole tiles. */
  int one = !ps && setup->workers > 1 && m / (uint64_t)setup->workers < cfg->min_share;
  if (one)
    strata_log(STRATA_LOG_INFO,
               "pagerank: %llu edges, under --min-share %llu a worker: worker 0 runs every "
               "task",
               (unsigned long long)m, (unsigned long long)cfg->min_share);
  int whole = ps || one || setup->mode == STRATA_MODE_SERIAL;
  int depth = whole ? 1 : setup->depth;
  t1 = strata_now();
  c1 = strata_cpu_seconds();
  strata_log(STRATA_LOG_DEBUG, "pagerank: graph read in %.3f s (%.3f s of CPU)", t1 - t0, c1 - c0);
  t0 = t1;
  c0 = c1;
  if ((uint32_t)B > n) {
    rc = strata_err_set(STRATA_EUSAGE, "--strata %d: more blocks than the graph's %u vertices", B,
                        n);
    goto fail;
  }
  if (!(pv = strata_calloc(1, sizeof *pv)))
    goto nomem;
  prob->priv = pv;
  prob->priv_free = priv_free;
  pv->n = n;
  pv->m = m;
  pv->B = B;
  pv->one = one;
  pv->ids = g.ids;
  g.ids = NULL;
  if ((rc = by_degree(&g, B, &pv->number))) goto fail;
  /* CSR by source (counting sort), then the out-degrees. */
  off = strata_calloc((size_t)n + 1, 8);
  adj = strata_malloc(m * 4);
  deg = strata_calloc(n, 4);
  inv = strata_malloc((size_t)n * 8);
  if (!off || !adj || !deg || !inv)
    goto nomem;
  for (uint64_t e = 0; e < m; e++)
    off[g.src[e] + 1]++;
  for (uint32_t v = 0; v < n; v++)
    off[v + 1] += off[v];
  for (uint64_t e = 0; e < m; e++) {
    uint32_t u = g.src[e];
    adj[off[u] + deg[u]++] = g.dst[e];
    pv->self_loops += u == g.dst[e];
  }
  pr_graph_free(&g);
  for (uint32_t v = 0; v < n; v++) {
    inv[v] = deg[v] ? 1.0 / deg[v] : 0;
    pv->dangling += !deg[v];
  }
  strata_hash h;
  strata_hash_init(&h, 0x70616765);
  strata_hash_update(&h, &n, 4);
  strata_hash_update(&h, off, ((size_t)n + 1) * 8);
  strata_hash_update(&h, adj, m * 4);
  pv->checksum = strata_hash_final(&h);
  t1 = strata_now();
  c1 = strata_cpu_seconds();
  strata_log(STRATA_LOG_DEBUG, "pagerank: edges by source and checksum in %.3f s (%.3f s of CPU)",
             t1 - t0, c1 - c0);
  t0 = t1;
  c0 = c1;

  /* Block b holds the vertices by_degree dealt it: as many as every other
   * block, give or take one, of every degree. */
  bl.B = B;
  if (!(bl.first = strata_malloc(((size_t)B + 1) * 4)))
    goto nomem;
  pv->first = bl.first;
  for (int b = 0; b <= B; b++) bl.first[b] = deal_first(n, B, b);
  tiles = strata_calloc((size_t)B * B, sizeof *tiles);
  lens = strata_calloc((size_t)B * B, sizeof *lens);
  if (!tiles || !lens)
    goto nomem;
  if ((rc = strata_problem_fits("pagerank's blocks", (double)m * 8 + (double)n * 64, NULL)))
    goto fail;
  int sub_bits = cfg->subtile_bits ? cfg->subtile_bits : default_subtile_bits();
  if ((rc = pr_tiles_build(&bl, off, adj, ps ? n : RING_PER_ROW, ps ? 0 : 1, depth, sub_bits, tiles,
                           lens)))
    goto fail;
  strata_free(adj);
  adj = NULL;
  t1 = strata_now();
  c1 = strata_cpu_seconds();
  strata_log(STRATA_LOG_DEBUG, "pagerank: blocks and tiles in %.3f s (%.3f s of CPU)", t1 - t0,
             c1 - c0);
  t0 = t1;
  c0 = c1;
  if ((rc = strata_problem_alloc(prob, B * B, B, B, 0)))
    goto fail;
  for (size_t k = 0; k < (size_t)B * B; k++) {
    prob->data[k].buf = tiles[k];
    prob->data[k].len = lens[k];
    tiles[k] = NULL;
  }
  if (has_truth) {
    if (!(truth = strata_malloc((size_t)n * 8)))
      goto nomem;
    if ((rc = ground_truth(cfg, prob, pv, &bl, depth, inv, truth)))
      goto fail;
  } else {
    pv->truth_cached = -1;
  }
  t1 = strata_now();
  c1 = strata_cpu_seconds();
  strata_log(STRATA_LOG_DEBUG, "pagerank: ground truth in %.3f s (%.3f s of CPU)", t1 - t0,
             c1 - c0);
  t0 = t1;
  c0 = c1;

  /* Resident blocks: the destination side. */
  for (int i = 0; i < B; i++) {
    uint32_t lo = bl.first[i], ni = bl.first[i + 1] - lo;
    strata_block *r = &prob->resident[i];
    r->len = res_len(ni, (uint32_t)B, has_truth, ps);
    if (!(r->buf = strata_alloc_aligned(r->len)))
      goto nomem;
    memset(r->buf, 0, r->len);
    pr_res *hd = r->buf;
    *hd = (pr_res){ni, (uint32_t)B, (uint32_t)has_truth, (uint32_t)ps, {0, 0}};
    res_view v = res_open(r->buf);
    if (has_truth)
      memcpy(v.truth, truth + lo, (size_t)ni * 8);
    if (!ps)
      for (uint32_t k = 0; k < ni; k++) {
        v.rank[k] = 1.0 / n;
        v.inv[k] = inv[lo + k];
      }
  }
  /* Rotating blocks: in the ring each source block's contributions r/out
   * and its dangling rank D_j; in the tables unused single rows. */
  for (int j = 0; j < B; j++) {
    uint32_t lo = bl.first[j], nj = bl.first[j + 1] - lo;
    strata_block *r = &prob->rotating[j];
    r->row_bytes = ps ? PS_PER_ROW * 4 : RING_PER_ROW * 8;
    r->nrows = ps ? 1 : (nj + RING_PER_ROW - 1) / RING_PER_ROW + 1;
    r->len = (size_t)r->nrows * r->row_bytes;
    if (!(r->buf = strata_alloc_aligned(r->len)))
      goto nomem;
    memset(r->buf, 0, r->len);
    if (ps)
      continue;
    double *c = r->buf, D[2] = {0, 0};
    for (uint32_t k = 0; k < nj; k++) {
      c[k] = inv[lo + k] / n;
      if (inv[lo + k] == 0)
        pr_dd_add(D, 1.0 / n);
    }
    c[(size_t)(r->nrows - 1) * RING_PER_ROW] = D[0];
    c[(size_t)(r->nrows - 1) * RING_PER_ROW + 1] = D[1];
  }
  if (ps) {
    /* The ranks, as the table's global rows. */
    strata_block *G = &prob->global;
    G->row_bytes = PS_PER_ROW * 4;
    G->nrows = (n + PS_PER_ROW - 1) / PS_PER_ROW;
    G->len = (size_t)G->nrows * G->row_bytes;
    if (!(G->buf = strata_alloc_aligned(G->len)))
      goto nomem;
    memset(G->buf, 0, G->len);
    for (uint32_t v = 0; v < n; v++)
      ((float *)G->buf)[v] = (float)(1.0 / n);
  }
  size_t mlen = sizeof(pr_meta) + ((size_t)B + 1) * 4 + (ps ? (size_t)n * 4 : 0);
  if (!(prob->meta = strata_malloc(mlen)))
    goto nomem;
  prob->meta_len = mlen;
  pr_meta *mt = prob->meta;
  *mt = (pr_meta){n, (uint32_t)B, (uint32_t)ps, (uint32_t)has_truth, (uint32_t)whole,
                  0, cfg->damping};
  memcpy(mt + 1, bl.first, ((size_t)B + 1) * 4);
  if (ps)
    memcpy((uint32_t *)(mt + 1) + B + 1, deg, (size_t)n * 4);
  prob->n_examples = m;
  strata_log(STRATA_LOG_DEBUG, "pagerank: blocks' state in %.3f s (%.3f s of CPU)",
             strata_now() - t0, strata_cpu_seconds() - c0);
  rc = 0;
  goto done;
nomem:
  rc = oom();
fail:
  if (!pv)
    strata_free(bl.first);
done:
  for (size_t k = 0; tiles && k < (size_t)B * B; k++)
    strata_free(tiles[k]);
  strata_free(tiles);
  strata_free(lens);
  strata_free(off);
  strata_free(adj);
  strata_free(deg);
  strata_free(inv);
  strata_free(truth);
  pr_graph_free(&g);
  return rc;
}

/* Gemulla's diagonal schedule; with a graph too small to share
 * (--min-share), the same tasks in the same order on worker 0 alone, whose
 * blocks then never travel. */
static int pr_schedule(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                       strata_schedule *sched) {
  const pr_priv *pv = prob->priv;
  int B = pv->B, rc;
  if (!pv->one) return strata_schedule_diagonal(sched, setup->workers, B);
  if ((rc = strata_schedule_init(sched, setup->workers, B, B * B, B, B))) return rc;
  for (int t = 0; t < B; t++)
    for (int i = 0; i < B; i++) {
      int j = (i + t) % B;
      if ((rc = strata_schedule_add(sched, t, 0, (strata_task){i * B + j, i, j}))) return rc;
    }
  return strata_schedule_finish(sched);
}

/* ---- the workers' side ----------------------------------------------- */

typedef struct pr_state {
  pr_meta meta;
  uint32_t *first; /* B + 1 */
  double *inv;     /* parameter-server modes: 1 / out-degree of every vertex (0: dangling) */
  double *c;     /* parameter-server modes: every vertex's contribution, read at the pass's start */
  double D;      /* parameter-server modes: the dangling rank read then */
  int pass_read; /* the pass c and D were read for (-1: none) */
  strata_mode mode;
  int depth; /* the engine's chunks per rotating block */
} pr_state;

static void pr_worker_free(void *vs) {
  pr_state *s = vs;
  if (!s)
    return;
  strata_free(s->first);
  strata_free(s->inv);
  strata_free(s->c);
  strata_free(s);
}

static int pr_worker_init(const void *cfg, const strata_setup *setup, const void *meta,
                          size_t meta_len, void **out) {
  const pr_meta *mt = meta;
  pr_state *s = strata_calloc(1, sizeof *s);
  if (!s)
    return oom();
  /* The meta bytes are the engine's only during this call. */
  s->meta = *mt;
  s->mode = setup->mode;
  s->depth = setup->depth;
  s->pass_read = -1;
  if (!(s->first = strata_malloc(((size_t)mt->B + 1) * 4))) {
    pr_worker_free(s);
    return oom();
  }
  memcpy(s->first, mt + 1, ((size_t)mt->B + 1) * 4);
  if (mt->ps) {
    const uint32_t *deg = (const uint32_t *)(mt + 1) + mt->B + 1;
    s->inv = strata_malloc((size_t)mt->n * 8 + 8);
    s->c = strata_malloc((size_t)mt->n * 8 + 8);
    if (!s->inv || !s->c) {
      pr_worker_free(s);
      return oom();
    }
    for (uint32_t v = 0; v < mt->n; v++)
      s->inv[v] = deg[v] ? 1.0 / deg[v] : 0;
  }
  *out = s;
  return 0;
}

enum { P_SSE, P_L1, P_SUM, N_PARTIALS };

/* The ring: row i finalises block i when it first holds it, then every row
 * adds the chunk's sources into its accumulators. */
static int compute_ring(pr_state *s, const strata_task_view *tv) {
  res_view v = res_open(tv->resident->buf);
  double *c = tv->rotating->buf, d = s->meta.damping;
  uint32_t n = s->meta.n, nj = s->first[tv->ids.rotating + 1] - s->first[tv->ids.rotating];
  uint32_t drow = (nj + RING_PER_ROW - 1) / RING_PER_ROW;
  uint32_t vlo = tv->row_lo * RING_PER_ROW, vhi = tv->row_hi * RING_PER_ROW;
  int cur = tv->pass & 1, prev = cur ^ 1;
  if (vlo > nj)
    vlo = nj;
  if (vhi > nj)
    vhi = nj;
  if (tv->ids.rotating == tv->ids.resident) {
    if (tv->chunk == 0) {
      memset(v.acc[cur], 0, (size_t)v.h->n * 16);
      v.h->dpart[0] = v.h->dpart[1] = 0;
    }
    if (tv->pass > 0) {
      double D = dsum_total(v.dsum[prev], v.h->B), base = (1 - d) / n;
      for (uint32_t u = vlo; u < vhi; u++) {
        double r = base + d * (pr_dd_value(v.acc[prev] + 2 * (size_t)u) + D / n);
        v.rank[u] = r;
        c[u] = r * v.inv[u];
        if (v.inv[u] == 0)
          pr_dd_add(v.h->dpart, r);
      }
      if (drow >= tv->row_lo && drow < tv->row_hi) {
        c[(size_t)drow * RING_PER_ROW] = v.h->dpart[0];
        c[(size_t)drow * RING_PER_ROW + 1] = v.h->dpart[1];
      }
    }
  }
  if (drow >= tv->row_lo && drow < tv->row_hi) {
    v.dsum[cur][2 * tv->ids.rotating] = c[(size_t)drow * RING_PER_ROW];
    v.dsum[cur][2 * tv->ids.rotating + 1] = c[(size_t)drow * RING_PER_ROW + 1];
  }
  if (!s->meta.whole)
    pr_tile_scatter(tv->data->buf, tv->chunk, c, v.acc[cur]);
  else if (tv->chunk == s->depth - 1) /* every row is in this process, and final */
    pr_tile_scatter(tv->data->buf, 0, c, v.acc[cur]);
  return 0;
}

/* The tables: sources' contributions from this worker's view of the ranks;
 * the row's last task writes its block's new ranks. */
static int compute_ps(pr_state *s, const strata_task_view *tv, double *partials) {
  if (tv->row_hi == tv->row_lo)
    return 0;
  res_view v = res_open(tv->resident->buf);
  float *G = tv->global->buf;
  double d = s->meta.damping;
  uint32_t n = s->meta.n, B = s->meta.B;
  uint32_t jlo = s->first[tv->ids.rotating];
  uint32_t ilo = s->first[tv->ids.resident];
  /* The pass reads the ranks once, at the worker's first task: a worker
   * holding several rows writes one row's new ranks before its other rows
   * are done, and those must not read them in the same pass. */
  if (s->pass_read != tv->pass) {
    double D[2] = {0, 0};
    for (uint32_t u = 0; u < n; u++) {
      s->c[u] = G[u] * s->inv[u];
      if (s->inv[u] == 0)
        pr_dd_add(D, G[u]);
    }
    s->D = pr_dd_value(D);
    s->pass_read = tv->pass;
  }
  if (tv->subepoch == 0)
    memset(v.acc[0], 0, (size_t)v.h->n * 16);
  pr_tile_scatter(tv->data->buf, 0, s->c + jlo, v.acc[0]);
  if (tv->subepoch == (int)B - 1) {
    double base = (1 - d) / n, D = s->D;
    for (uint32_t k = 0; k < v.h->n; k++) {
      float r = (float)(base + d * (pr_dd_value(v.acc[0] + 2 * (size_t)k) + D / n));
      partials[P_L1] += fabs((double)r - G[ilo + k]);
      partials[P_SUM] += r;
      if (v.truth)
        partials[P_SSE] += ((double)r - v.truth[k]) * ((double)r - v.truth[k]);
      G[ilo + k] = r;
    }
  }
  return 0;
}

static int pr_compute(void *vs, const strata_task_view *tv, double *partials) {
  pr_state *s = vs;
  return s->meta.ps ? compute_ps(s, tv, partials) : compute_ring(s, tv);
}

/* The ring's pass-end scores: the ranks this pass computed, against the
 * truth and the ranks it started from. */
static int pr_block_objective(void *vs, int pass, strata_block_kind kind, int id,
                              const strata_block *b, double *partials) {
  pr_state *s = vs;
  if (s->meta.ps || kind != STRATA_BLOCK_RESIDENT)
    return 0;
  res_view v = res_open(b->buf);
  int cur = pass & 1;
  double d = s->meta.damping, D = dsum_total(v.dsum[cur], v.h->B), base = (1 - d) / s->meta.n;
  for (uint32_t u = 0; u < v.h->n; u++) {
    double r = base + d * (pr_dd_value(v.acc[cur] + 2 * (size_t)u) + D / s->meta.n);
    partials[P_L1] += fabs(r - v.rank[u]);
    partials[P_SUM] += r;
    if (v.truth)
      partials[P_SSE] += (r - v.truth[u]) * (r - v.truth[u]);
  }
  return 0;
}

static const char *const pr_objective_names[] = {"sse", "l1_change", "rank_sum"};

static void pr_objectives(const void *vcfg, const strata_problem *prob, const double *p,
                          double *out) {
  const pr_config *cfg = vcfg;
  out[0] = cfg->truth_iters > 0 ? p[P_SSE] : NAN;
  out[1] = p[P_L1];
  out[2] = p[P_SUM];
}

/* ---- export ---------------------------------------------------------- */

typedef struct export_ctx {
  const pr_priv *pv;
  const double *r;
  const uint32_t *order;
  int k;
} export_ctx;

static uint64_t vid(const pr_priv *pv, uint32_t v) { return pv->ids ? pv->ids[v] : v; }

static int fill_ranks(FILE *f, void *ud) {
  export_ctx *x = ud;
  for (uint32_t v = 0; v < x->pv->n; v++)
    if (fprintf(f, "%llu %.17g\n", (unsigned long long)vid(x->pv, v), x->r[v]) < 0)
      return strata_err_set(STRATA_EIO, "write failed");
  return 0;
}

static int fill_top(FILE *f, void *ud) {
  export_ctx *x = ud;
  for (int i = 0; i < x->k; i++)
    if (fprintf(f, "%d %llu %.17g\n", i + 1, (unsigned long long)vid(x->pv, x->order[i]),
                x->r[x->order[i]]) < 0)
      return strata_err_set(STRATA_EIO, "write failed");
  return 0;
}

/* The final ranks of every vertex from the final blocks. */
static int final_ranks(const pr_config *cfg, const strata_setup *setup, const strata_problem *prob,
                       double *r) {
  const pr_priv *pv = prob->priv;
  uint32_t n = pv->n;
  if (prob->global.len) {
    for (uint32_t v = 0; v < n; v++)
      r[v] = ((const float *)prob->global.buf)[v];
    return 0;
  }
  int cur = (setup->passes - 1) & 1;
  double d = cfg->damping;
  res_view v0 = res_open(prob->resident[0].buf);
  double D = dsum_total(v0.dsum[cur], v0.h->B);
  for (int i = 0; i < pv->B; i++) {
    res_view v = res_open(prob->resident[i].buf);
    for (uint32_t u = 0; u < v.h->n; u++)
      r[pv->first[i] + u] = (1 - d) / n + d * (pr_dd_value(v.acc[cur] + 2 * (size_t)u) + D / n);
  }
  return 0;
}

static const double *g_rank_order;
static int by_rank(const void *a, const void *b) {
  double x = g_rank_order[*(const uint32_t *)a], y = g_rank_order[*(const uint32_t *)b];
  return x > y   ? -1
         : x < y ? 1
                 : (*(const uint32_t *)a > *(const uint32_t *)b) -
                       (*(const uint32_t *)a < *(const uint32_t *)b);
}

/* DIR/ranks.txt: "id rank" for every vertex; DIR/top.txt: "position id
 * rank" for the --top highest. Refuses non-finite ranks. */
static int pr_export(const void *vcfg, const strata_setup *setup, const strata_problem *prob,
                     const char *dir) {
  const pr_config *cfg = vcfg;
  pr_priv *pv = prob->priv;
  uint32_t n = pv->n;
  int rc = 0, k = cfg->top < (int)n ? cfg->top : (int)n;
  double *r = strata_malloc((size_t)n * 8), *rb = strata_malloc((size_t)n * 8);
  uint32_t *order = strata_malloc((size_t)n * 4);
  if (!r || !rb || !order) {
    rc = oom();
    goto done;
  }
  final_ranks(cfg, setup, prob, rb);
  /* From the blocks' numbering back to the input's (by_degree). */
  for (uint32_t v = 0; v < n; v++) r[v] = rb[pv->number[v]];
  for (uint32_t v = 0; v < n; v++) {
    if (!isfinite(r[v])) {
      rc = strata_err_set(STRATA_EDIVERGED, "pagerank: vertex %llu's rank is not finite",
                          (unsigned long long)vid(pv, v));
      goto done;
    }
    order[v] = v;
  }
  /* The top K by a partial selection, then sorted. */
  g_rank_order = r;
  qsort(order, n, 4, by_rank);
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    rc = strata_err_set(STRATA_EIO, "%s: cannot create directory", dir);
    goto done;
  }
  export_ctx x = {pv, r, order, k};
  if ((rc = strata_write_atomic_in(dir, "ranks.txt", fill_ranks, &x)))
    goto done;
  if ((rc = strata_write_atomic_in(dir, "top.txt", fill_top, &x)))
    goto done;
  strata_free(pv->top);
  pv->ntop = 0;
  if (!(pv->top = strata_malloc((size_t)(k ? k : 1) * sizeof *pv->top))) {
    rc = oom();
    goto done;
  }
  for (int i = 0; i < k; i++) pv->top[i] = (top_entry){vid(pv, order[i]), r[order[i]]};
  pv->ntop = k;
done:
  strata_free(r);
  strata_free(rb);
  strata_free(order);
  return rc;
}

static void pr_describe(const void *vcfg, const strata_problem *prob, strata_json *j) {
  const pr_config *cfg = vcfg;
  const pr_priv *pv = prob->priv;
  if (!pv)
    return;
  char hex[20];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)pv->checksum);
  strata_json_int(j, "vertices", pv->n);
  strata_json_int(j, "edges", (int64_t)pv->m);
  strata_json_int(j, "dangling", pv->dangling);
  strata_json_int(j, "self_loops", pv->self_loops);
  strata_json_string(j, "graph_checksum", hex);
  strata_json_double(j, "damping", cfg->damping);
  strata_json_int(j, "truth_iters", cfg->truth_iters);
  strata_json_string(j, "truth",
                     pv->truth_cached < 0 ? "none"
                     : pv->truth_cached   ? "cached"
                                          : "computed");
  if (pv->truth_cached == 0)
    strata_json_double(j, "truth_s", pv->truth_s);
}

static int pr_check(const void *vcfg, const strata_setup *setup) {
  const pr_config *cfg = vcfg;
  if (!cfg->graph)
    return strata_err_set(STRATA_EUSAGE, "--graph is required");
  if (cfg->subtile_bits && cfg->subtile_bits < 8)
    return strata_err_set(STRATA_EUSAGE, "--subtile-bits %d: must be 0 or at least 8",
                          cfg->subtile_bits);
  return 0;
}

static const strata_app pr_app = {
    .name = "pagerank",
    .flags = STRATA_APP_ADDITIVE,
    .summary = "PageRank by power iteration, edges tiled by (source, destination) block",
    .examples = "  mpirun -np 3 strata pagerank --graph soc-Slashdot0902.txt.gz --passes 20\n"
                "  strata pagerank --mode serial --graph synth:scale=22,edge-factor=18 --passes 5\n"
                "  mpirun -np 3 strata pagerank --mode ssp --staleness 1 --graph web.mtx\n",
    .unit = "edges",
    /* Two chunks: enough to hide a source block's trip behind the edges of
     * the other chunk, and each chunk costs the accumulators a sweep
     * (measured: 2 workers on R-MAT scale 22, depth 2 to 8). */
    .defaults = {.depth = 2},
    .options = pr_options,
    .config_size = sizeof(pr_config),
    .check = pr_check,
    .n_partials = N_PARTIALS,
    .n_objectives = 3,
    .objective_names = pr_objective_names,
    .load = pr_load,
    .schedule = pr_schedule,
    .worker_init = pr_worker_init,
    .worker_free = pr_worker_free,
    .compute = pr_compute,
    .block_objective = pr_block_objective,
    .objectives = pr_objectives,
    .tol = {STRATA_TOL_VALUE, 1, "the L1 change of the ranks over a pass"},
    .describe = pr_describe,
    .export_model = pr_export,
};

/* The engine's summary, then the top vertices when the model was exported
 * (the export keeps them in the coordinator's state), on the stream the
 * program names. */
static void pr_summary(const strata_run_result *r, void *ud) {
  FILE *out = ud;
  const pr_priv *pv = r->problem.priv;
  strata_print_summary(r);
  fflush(stdout);
  if (!pv || !pv->ntop) return;
  fprintf(out, "top %d:", pv->ntop);
  for (int i = 0; i < pv->ntop; i++)
    fprintf(out, " %llu (%.6g)", (unsigned long long)pv->top[i].id, pv->top[i].rank);
  fprintf(out, "\n");
}

int main(int argc, char **argv) {
  const strata_app *apps[] = {&pr_app};
  strata_program p = {.apps = apps, .n_apps = 1, .summary_fn = pr_summary, .summary_ud = stdout};
  return strata_program_main(&p, argc, argv);
}
