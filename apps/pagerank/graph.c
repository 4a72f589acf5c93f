/*
 * graph.c - the graphs strata-pagerank reads: SNAP edge lists (plain or
 * gzip), Matrix Market coordinate files, and Graph500's R-MAT generator.
 * Files are read through strata/apps/lines.h, so a gzip stream cut short
 * or without its trailer is an error, never a smaller graph. Every size is
 * checked against the memory available before it is allocated: a Matrix
 * Market size line, the edges as they come, an R-MAT spec.
 */
#include <stdlib.h>
#include <string.h>

#include "pr.h"
#include "strata/apps/lines.h"
#include "strata/core.h"

/* What pr_load (pagerank.c) adds per vertex and per edge once the graph
 * is read: its own strata_problem_fits estimate. The readers count it too,
 * so a graph is refused while it is read, not after. */
#define LOAD_PER_VERTEX 64.0
#define LOAD_PER_EDGE 8.0

void pr_graph_free(pr_graph *g) {
  strata_free(g->src);
  strata_free(g->dst);
  strata_free(g->ids);
  memset(g, 0, sizeof *g);
}

int pr_graph_rmat(const pr_rmat *r, pr_graph *g) {
  memset(g, 0, sizeof *g);
  if (r->scale < 1 || r->scale > 31 || r->edge_factor < 1)
    return strata_err_set(STRATA_EUSAGE, "synth: scale must be in [1, 31] and edge-factor >= 1");
  uint32_t n = (uint32_t)1 << r->scale;
  uint64_t m = (uint64_t)r->edge_factor << r->scale;
  uint32_t *perm = NULL;
  /* The edges (two uint32 each), the permutation, and what load adds. */
  strata_mem_budget budget;
  strata_mem_budget_init(&budget);
  int rc =
      strata_mem_check(&budget, (8.0 + LOAD_PER_EDGE) * (double)m + (4.0 + LOAD_PER_VERTEX) * n,
                       "lower scale or edge-factor",
                       "--graph synth:scale=%d,edge-factor=%d: %u vertices and %llu edges need",
                       r->scale, r->edge_factor, n, (unsigned long long)m);
  if (rc)
    return rc;
  g->src = strata_malloc(m * 4);
  g->dst = strata_malloc(m * 4);
  perm = strata_malloc((size_t)n * 4);
  if (!g->src || !g->dst || !perm)
    goto oom;
  /* Each level picks a quadrant with probabilities a, b, c, d from 21
   * bits of a counter-based stream, so edge e depends on the seed and e
   * only. */
  const uint32_t ta = (uint32_t)(r->a * (1 << 21)), tb = (uint32_t)((r->a + r->b) * (1 << 21)),
                 tc = (uint32_t)((r->a + r->b + r->c) * (1 << 21));
  uint64_t key = strata_mix64(r->seed ^ 0x9e3779b97f4a7c15ull);
  for (uint64_t e = 0; e < m; e++) {
    uint32_t u = 0, v = 0;
    uint64_t bits = 0;
    int left = 0;
    for (int l = 0; l < r->scale; l++) {
      if (!left) {
        bits = strata_mix64(key + e * 16 + (uint64_t)l);
        left = 3;
      }
      uint32_t x = (uint32_t)(bits & ((1u << 21) - 1));
      bits >>= 21;
      left--;
      uint32_t row = x >= tb, col = (x >= ta && x < tb) || x >= tc;
      u = u << 1 | row;
      v = v << 1 | col;
    }
    g->src[e] = u;
    g->dst[e] = v;
  }
  /* Graph500 relabels the vertices by a random permutation, so that a
   * vertex's number says nothing of its degree. */
  strata_rng rng;
  strata_rng_seed(&rng, r->seed ^ 0x5851f42d4c957f2dull);
  for (uint32_t i = 0; i < n; i++)
    perm[i] = i;
  for (uint32_t i = n - 1; i > 0; i--) {
    uint32_t k = (uint32_t)strata_rng_below(&rng, (uint64_t)i + 1), t = perm[i];
    perm[i] = perm[k];
    perm[k] = t;
  }
  for (uint64_t e = 0; e < m; e++) {
    g->src[e] = perm[g->src[e]];
    g->dst[e] = perm[g->dst[e]];
  }
  strata_free(perm);
  g->n = n;
  g->m = m;
  return 0;
oom:
  strata_free(perm);
  pr_graph_free(g);
  return strata_err_set(STRATA_ENOMEM, "synth: out of memory for %llu edges",
                        (unsigned long long)m);
}

/* ---- reading ---------------------------------------------------------- */

/* An unsigned decimal id in [s, e); 0 or -1 when it is none. */
static int parse_id(const char *s, const char *e, uint64_t *out) {
  if (s == e)
    return -1;
  uint64_t v = 0;
  for (const char *c = s; c < e; c++) {
    if (*c < '0' || *c > '9')
      return -1;
    if (v > (UINT64_MAX - 9) / 10)
      return -1;
    v = v * 10 + (uint64_t)(*c - '0');
  }
  *out = v;
  return 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* What reading a graph of n vertices (0: not known yet) and room for cap
 * edges holds at its peak, and what load adds: the raw edges (two uint64
 * each, growing by doubling: cap), their copy that renumber sorts (a SNAP
 * list), the edges as vertex numbers (two uint32 each), the ids. */
static double graph_need(int mm, uint64_t n, uint64_t m, uint64_t cap) {
  return 16.0 * (double)cap + (mm ? 0 : 16.0 * (double)m) + (8.0 + LOAD_PER_EDGE) * (double)m +
         (8.0 + LOAD_PER_VERTEX) * (double)n;
}

/* Dense vertex numbers for the ids of the edges (raw[2e], raw[2e + 1]), in
 * increasing order of id. */
static int renumber(const char *path, uint64_t *raw, uint64_t m, pr_graph *g) {
  uint64_t *ids = strata_malloc(2 * m * 8);
  if (!ids)
    return strata_err_set(STRATA_ENOMEM, "%s: out of memory", path);
  memcpy(ids, raw, 2 * m * 8);
  qsort(ids, 2 * m, 8, cmp_u64);
  uint64_t n = 0;
  for (uint64_t i = 0; i < 2 * m; i++)
    if (!n || ids[i] != ids[n - 1])
      ids[n++] = ids[i];
  if (n > UINT32_MAX) {
    strata_free(ids);
    return strata_err_set(STRATA_ERANGE, "%s: more than 2^32 - 1 vertices", path);
  }
  g->src = strata_malloc(m * 4);
  g->dst = strata_malloc(m * 4);
  if (!g->src || !g->dst) {
    strata_free(ids);
    return strata_err_set(STRATA_ENOMEM, "%s: out of memory", path);
  }
  for (uint64_t e = 0; e < 2 * m; e++) {
    uint64_t lo = 0, hi = n, x = raw[e];
    while (hi - lo > 1) {
      uint64_t mid = (lo + hi) / 2;
      if (ids[mid] <= x)
        lo = mid;
      else
        hi = mid;
    }
    (e & 1 ? g->dst : g->src)[e / 2] = (uint32_t)lo;
  }
  uint64_t *shrunk = strata_realloc(ids, n * 8);
  g->ids = shrunk ? shrunk : ids;
  g->n = (uint32_t)n;
  g->m = m;
  return 0;
}

int pr_graph_read(const char *path, pr_graph *g) {
  memset(g, 0, sizeof *g);
  char q[STRATA_QUOTE_SIZE];
  strata_lines rd;
  uint64_t *raw = NULL;
  size_t cap = 0;
  uint64_t m = 0;
  int rc = 0, mm = 0, sym = 0, sized = 0;
  uint64_t mm_rows = 0, mm_cols = 0, mm_nnz = 0, mm_n = 0;
  if ((rc = strata_lines_open(&rd, path)))
    return rc;
  const char *s = NULL, *e = NULL;
  size_t len;
  while ((rc = strata_lines_next(&rd, &s, &len)) == 1) {
    e = s + len;
    if (rd.lineno == 1 && e - s >= 14 && !memcmp(s, "%%MatrixMarket", 14)) {
      mm = 1;
      const char *f, *fe, *p = s;
      int k = 0;
      while (strata_field_next(&p, e, &f, &fe)) {
        k++;
        if ((k == 2 && (fe - f != 6 || strncasecmp(f, "matrix", 6))) ||
            (k == 3 && (fe - f != 10 || strncasecmp(f, "coordinate", 10)))) {
          rc = strata_err_set(STRATA_EPARSE,
                              "%s:1: only 'matrix coordinate' Matrix Market files "
                              "hold graphs",
                              path);
          goto done;
        }
        if (k == 5)
          sym = fe - f == 9 && !strncasecmp(f, "symmetric", 9);
      }
      continue;
    }
    if (strata_field_blank(s, e) || *s == '#' || (mm && *s == '%'))
      continue;
    const char *p = s, *f1, *e1, *f2, *e2, *f3, *e3;
    uint64_t a, b;
    if (!strata_field_next(&p, e, &f1, &e1) || !strata_field_next(&p, e, &f2, &e2) ||
        parse_id(f1, e1, &a) || parse_id(f2, e2, &b)) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: expected two vertex ids, got '%s'", path,
                          rd.lineno, strata_quote(q, sizeof q, s, (size_t)(e - s)));
      goto done;
    }
    if (mm && !sized) {
      if (!strata_field_next(&p, e, &f3, &e3) || parse_id(f3, e3, &mm_nnz)) {
        rc = strata_err_set(STRATA_EPARSE, "%s:%zu: expected 'rows cols entries'", path, rd.lineno);
        goto done;
      }
      mm_rows = a;
      mm_cols = b;
      mm_n = a > b ? a : b;
      /* The vertices are allocated by the declared size, edges or not, and
       * the entries are promised (twice each, symmetric). */
      if (mm_n > UINT32_MAX) {
        rc = strata_err_set(STRATA_ERANGE,
                            "%s:%zu: a %llu x %llu matrix: more than 2^32 - 1 vertices", path,
                            rd.lineno, (unsigned long long)a, (unsigned long long)b);
        goto done;
      }
      uint64_t promised = mm_nnz > UINT64_MAX / 2 ? UINT64_MAX : mm_nnz * (sym ? 2 : 1);
      if ((rc = strata_lines_fits(&rd, graph_need(1, mm_n, promised, promised), NULL,
                                  "a %llu x %llu matrix of %llu entr%s needs",
                                  (unsigned long long)a, (unsigned long long)b,
                                  (unsigned long long)mm_nnz, mm_nnz == 1 ? "y" : "ies")))
        goto done;
      sized = 1;
      continue;
    }
    if (mm && (a < 1 || b < 1 || a > mm_rows || b > mm_cols)) {
      rc = strata_err_set(STRATA_ERANGE,
                          "%s:%zu: entry (%llu, %llu) outside the %llu x %llu "
                          "matrix",
                          path, rd.lineno, (unsigned long long)a, (unsigned long long)b,
                          (unsigned long long)mm_rows, (unsigned long long)mm_cols);
      goto done;
    }
    for (int twice = 0; twice <= (mm && sym && a != b); twice++) {
      if (2 * m + 2 > cap) {
        /* The array doubles (strata_grow): checked before it does. */
        uint64_t edges = cap ? (uint64_t)cap : 8;
        if ((rc = strata_lines_fits(&rd, graph_need(mm, mm_n, m + 1, edges), NULL,
                                    "%llu edges need", (unsigned long long)(m + 1))))
          goto done;
        uint64_t *nr = strata_grow(raw, 2 * m + 2, &cap, SIZE_MAX / 16, 8);
        if (!nr) {
          rc = strata_err_set(STRATA_ENOMEM, "%s:%zu: out of memory for %llu edges", path,
                              rd.lineno, (unsigned long long)(m + 1));
          goto done;
        }
        raw = nr;
      }
      raw[2 * m] = twice ? b : a;
      raw[2 * m + 1] = twice ? a : b;
      m++;
    }
  }
  if (rc < 0)
    goto done;
  rc = 0;
  if (mm && !sized) {
    rc = strata_err_set(STRATA_EPARSE, "%s: a Matrix Market header without its size line", path);
    goto done;
  }
  if (!m) {
    rc = strata_err_set(STRATA_EEMPTY, "%s: no edges", path);
    goto done;
  }
  if (mm) {
    /* Matrix Market's vertices are 1..max(rows, cols), edges or not (the
     * size line checked their number). */
    uint64_t n = mm_n;
    g->src = strata_malloc(m * 4);
    g->dst = strata_malloc(m * 4);
    g->ids = strata_malloc(n * 8);
    if (!g->src || !g->dst || !g->ids) {
      rc = strata_err_set(STRATA_ENOMEM, "%s: out of memory", path);
      goto done;
    }
    for (uint64_t k = 0; k < m; k++) {
      g->src[k] = (uint32_t)(raw[2 * k] - 1);
      g->dst[k] = (uint32_t)(raw[2 * k + 1] - 1);
    }
    for (uint64_t v = 0; v < n; v++)
      g->ids[v] = v + 1;
    g->n = (uint32_t)n;
    g->m = m;
  } else {
    rc = renumber(path, raw, m, g);
  }
done:
  if (rc)
    pr_graph_free(g);
  strata_free(raw);
  strata_lines_close(&rd);
  return rc;
}
