/*
 * graph.c - the graphs strata-pagerank reads: SNAP edge lists (plain or
 * gzip), Matrix Market coordinate files, and Graph500's R-MAT generator.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pr.h"
#include "strata/core.h"

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

typedef struct reader {
  gzFile f;
  const char *path;
  char *buf;
  size_t cap, len, pos;
  size_t line;
  int eof;
} reader;

/* The next line [*s, *e) without its end of line (CR LF or LF); 0 at the
 * end of the file. */
static int next_line(reader *r, const char **s, const char **e) {
  for (;;) {
    char *nl = r->pos < r->len ? memchr(r->buf + r->pos, '\n', r->len - r->pos) : NULL;
    if (nl || (r->eof && r->pos < r->len)) {
      char *b = r->buf + r->pos, *end = nl ? nl : r->buf + r->len;
      r->pos = nl ? (size_t)(nl - r->buf) + 1 : r->len;
      if (end > b && end[-1] == '\r')
        end--;
      *s = b;
      *e = end;
      r->line++;
      return 1;
    }
    if (r->eof)
      return 0;
    memmove(r->buf, r->buf + r->pos, r->len - r->pos);
    r->len -= r->pos;
    r->pos = 0;
    if (r->len == r->cap) {
      size_t cap = r->cap * 2;
      char *nb = strata_realloc(r->buf, cap);
      if (!nb)
        return strata_err_set(STRATA_ENOMEM, "%s: out of memory", r->path);
      r->buf = nb;
      r->cap = cap;
    }
    int k = gzread(r->f, r->buf + r->len, (unsigned)(r->cap - r->len));
    if (k < 0) {
      int zerr;
      const char *msg = gzerror(r->f, &zerr);
      return strata_err_set(STRATA_EIO, "%s: %s", r->path, msg);
    }
    if (k == 0)
      r->eof = 1;
    r->len += (size_t)k;
  }
}

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
  reader r = {.path = path, .cap = 1 << 20};
  uint64_t *raw = NULL;
  size_t cap = 0;
  uint64_t m = 0;
  int rc = 0, mm = 0, sym = 0, sized = 0;
  uint64_t mm_rows = 0, mm_cols = 0, mm_nnz = 0;
  if (!(r.f = gzopen(path, "rb")))
    return strata_err_set(errno == ENOENT ? STRATA_ENOENT : STRATA_EIO, "%s: cannot open: %s", path,
                          strerror(errno ? errno : EIO));
  if (!(r.buf = strata_malloc(r.cap))) {
    rc = strata_err_set(STRATA_ENOMEM, "%s: out of memory", path);
    goto done;
  }
  const char *s = NULL, *e = NULL;
  while ((rc = next_line(&r, &s, &e)) == 1) {
    if (r.line == 1 && e - s >= 14 && !memcmp(s, "%%MatrixMarket", 14)) {
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
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: expected two vertex ids, got '%s'", path, r.line,
                          strata_quote(q, sizeof q, s, (size_t)(e - s)));
      goto done;
    }
    if (mm && !sized) {
      if (!strata_field_next(&p, e, &f3, &e3) || parse_id(f3, e3, &mm_nnz)) {
        rc = strata_err_set(STRATA_EPARSE, "%s:%zu: expected 'rows cols entries'", path, r.line);
        goto done;
      }
      mm_rows = a;
      mm_cols = b;
      sized = 1;
      continue;
    }
    if (mm && (a < 1 || b < 1 || a > mm_rows || b > mm_cols)) {
      rc = strata_err_set(STRATA_ERANGE,
                          "%s:%zu: entry (%llu, %llu) outside the %llu x %llu "
                          "matrix",
                          path, r.line, (unsigned long long)a, (unsigned long long)b,
                          (unsigned long long)mm_rows, (unsigned long long)mm_cols);
      goto done;
    }
    for (int twice = 0; twice <= (mm && sym && a != b); twice++) {
      uint64_t *nr = strata_grow(raw, 2 * m + 2, &cap, SIZE_MAX / 16, 8);
      if (!nr) {
        rc = strata_err_set(STRATA_ENOMEM, "%s: out of memory", path);
        goto done;
      }
      raw = nr;
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
    /* Matrix Market's vertices are 1..max(rows, cols), edges or not. */
    uint64_t n = mm_rows > mm_cols ? mm_rows : mm_cols;
    if (n > UINT32_MAX) {
      rc = strata_err_set(STRATA_ERANGE, "%s: more than 2^32 - 1 vertices", path);
      goto done;
    }
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
  strata_free(r.buf);
  gzclose(r.f);
  return rc;
}
