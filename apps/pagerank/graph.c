/*
 * graph.c - the graphs strata-pagerank reads: SNAP edge lists (plain or
 * gzip), Matrix Market coordinate files, and Graph500's R-MAT generator.
 * Files are read through strata/apps/lines.h, so a gzip stream cut short
 * or without its trailer is an error, never a smaller graph; a plain file
 * by several threads at once. Every size is
 * checked against the memory available before it is allocated: a Matrix
 * Market size line, the edges as they come, an R-MAT spec.
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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

/*
 * Why the reader looks like this: a large edge list (Graph500's scale 22 is
 * 1.2 GB of text) should load at the pace of the disk, not of a line. So
 * the text comes in blocks of whole lines (strata_lines_block), and a
 * scanner made for the common line, digits, blanks, digits, adds its edge
 * without a call per field; every other line (a comment, a blank line,
 * leading blanks, an id of 20 digits or more, anything wrong) takes the
 * general path, which keeps the rules and words the errors. A plain file is
 * cut into byte ranges that threads scan side by side
 * (strata_lines_open_range), each into edge chunks of its own, joined in
 * file order: the graph is the one a single thread reads. When a range
 * fails, one thread reads the file again from the start, so the error is
 * the first bad line's, named by its number, as a line-at-a-time reader
 * names it.
 */

/* A run of edges as read: (a, b) pairs of uint32, or of uint64 once an id
 * does not fit (wide); the pairs follow the header. */
typedef struct edge_chunk {
  struct edge_chunk *next;
  uint32_t n, cap;
  uint32_t wide, pad;
} edge_chunk;

#define CHUNK_FIRST 256u       /* edges: small files stay small */
#define CHUNK_MOST (1u << 20)  /* edges: 8 MB of narrow pairs */
#define PART_BYTES (16u << 20) /* the least text worth a thread of its own */
#define MOST_PARTS 32

static inline uint32_t *chunk32(edge_chunk *c) { return (uint32_t *)(c + 1); }
static inline uint64_t *chunk64(edge_chunk *c) { return (uint64_t *)(c + 1); }

/* An id for renumbering: a slot of the hash table of sparse ids. */
typedef struct id_slot {
  uint64_t id;
  uint32_t v1, pad; /* 0: empty; else 1, then the vertex number + 1 */
} id_slot;

typedef struct read_ctx {
  const char *path;
  int mm, sym, sized;
  uint64_t mm_rows, mm_cols, mm_nnz, mm_n;
  uint64_t room, raw; /* edges the chunks of every range hold room for, and their bytes (atomic) */
  int failed;         /* a range failed: the others stop (atomic) */
  /* Renumbering: dense ids by a bitmap and its running counts, sparse ids
   * by a hash table. */
  uint64_t *bits;
  uint32_t *rank;
  id_slot *slots;
  unsigned slot_bits;
  pr_graph *g;
} read_ctx;

/* One byte range of the file and the edges read from it. */
typedef struct part {
  read_ctx *cx;
  strata_lines rd;
  int open;
  uint64_t start, stop;
  edge_chunk *first, *last;
  uint64_t m, max_id, out; /* out: the index of its first edge in the graph */
  uint64_t *bits;          /* renumbering: the ids it holds */
  int rc;
} part;

static void part_free(part *p) {
  for (edge_chunk *c = p->first, *nx; c; c = nx) {
    nx = c->next;
    strata_free(c);
  }
  p->first = p->last = NULL;
  strata_free(p->bits);
  p->bits = NULL;
  if (p->open) strata_lines_close(&p->rd);
  p->open = 0;
}

/* What reading a graph of n vertices (0: not known yet) holds at its peak
 * with chunks of raw bytes holding room for `room` edges, and what load
 * adds: the chunks, the renumbering's map of a SNAP list (at most 16 bytes
 * an edge), the edges as vertex numbers (two uint32 each), the ids. */
static double graph_need(int mm, uint64_t n, uint64_t room, uint64_t raw) {
  return (double)raw + (mm ? 0 : 16.0 * (double)room) + (8.0 + LOAD_PER_EDGE) * (double)room +
         (8.0 + LOAD_PER_VERTEX) * (double)n;
}

/* A chunk after p's last, checked against the memory available first (with
 * every range's chunks): 0 or STRATA_ENOMEM naming line lineno. */
static int new_chunk(part *p, int wide, size_t lineno) {
  read_ctx *cx = p->cx;
  uint32_t cap = !p->last                         ? CHUNK_FIRST
                 : p->last->cap >= CHUNK_MOST / 2 ? CHUNK_MOST
                                                  : p->last->cap * 2;
  size_t bytes = sizeof(edge_chunk) + (size_t)cap * (wide ? 16 : 8);
  uint64_t room = __atomic_add_fetch(&cx->room, cap, __ATOMIC_RELAXED);
  uint64_t raw = __atomic_add_fetch(&cx->raw, bytes, __ATOMIC_RELAXED);
  p->rd.lineno = lineno;
  int rc = strata_lines_fits(&p->rd, graph_need(cx->mm, cx->mm_n, room, raw), NULL,
                             "room for %llu edges needs", (unsigned long long)room);
  if (rc) return rc;
  edge_chunk *c = strata_malloc(bytes);
  if (!c)
    return strata_err_set(STRATA_ENOMEM, "%s:%zu: out of memory for %llu edges", cx->path, lineno,
                          (unsigned long long)room);
  *c = (edge_chunk){NULL, 0, cap, (uint32_t)wide, 0};
  if (p->last)
    p->last->next = c;
  else
    p->first = c;
  p->last = c;
  return 0;
}

/* Edge a -> b after p's others. */
static inline int put_edge(part *p, uint64_t a, uint64_t b, size_t lineno) {
  edge_chunk *c = p->last;
  int wide = (a | b) > UINT32_MAX;
  if (!c || c->n == c->cap || (wide && !c->wide)) {
    int rc = new_chunk(p, wide || (c && c->wide), lineno);
    if (rc) return rc;
    c = p->last;
  }
  if (c->wide) {
    uint64_t *d = chunk64(c) + 2 * (size_t)c->n;
    d[0] = a;
    d[1] = b;
  } else {
    uint32_t *d = chunk32(c) + 2 * (size_t)c->n;
    d[0] = (uint32_t)a;
    d[1] = (uint32_t)b;
  }
  c->n++;
  p->m++;
  uint64_t hi = a > b ? a : b;
  if (hi > p->max_id) p->max_id = hi;
  return 0;
}

/* A Matrix Market entry (a, b): the edge a -> b, and b -> a when symmetric. */
static inline int put_entry(part *p, uint64_t a, uint64_t b, size_t lineno) {
  int rc = put_edge(p, a, b, lineno);
  if (!rc && p->cx->mm && p->cx->sym && a != b) rc = put_edge(p, b, a, lineno);
  return rc;
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

/* Line lineno, [s, e) without its end of line, by the general rules: the
 * Matrix Market header (first: it is the file's first line), a comment or
 * blank line, the size line, an edge; or the error that names it. */
static int general_line(part *p, size_t lineno, int first, const char *s, const char *e) {
  read_ctx *cx = p->cx;
  const char *path = cx->path;
  char q[STRATA_QUOTE_SIZE];
  if (first && e - s >= 14 && !memcmp(s, "%%MatrixMarket", 14)) {
    cx->mm = 1;
    const char *f, *fe, *r = s;
    int k = 0;
    while (strata_field_next(&r, e, &f, &fe)) {
      k++;
      if ((k == 2 && (fe - f != 6 || strncasecmp(f, "matrix", 6))) ||
          (k == 3 && (fe - f != 10 || strncasecmp(f, "coordinate", 10))))
        return strata_err_set(STRATA_EPARSE,
                              "%s:1: only 'matrix coordinate' Matrix Market files "
                              "hold graphs",
                              path);
      if (k == 5) cx->sym = fe - f == 9 && !strncasecmp(f, "symmetric", 9);
    }
    return 0;
  }
  if (strata_field_blank(s, e) || *s == '#' || (cx->mm && *s == '%')) return 0;
  const char *r = s, *f1, *e1, *f2, *e2, *f3, *e3;
  uint64_t a, b;
  if (!strata_field_next(&r, e, &f1, &e1) || !strata_field_next(&r, e, &f2, &e2) ||
      parse_id(f1, e1, &a) || parse_id(f2, e2, &b))
    return strata_err_set(STRATA_EPARSE, "%s:%zu: expected two vertex ids, got '%s'", path, lineno,
                          strata_quote(q, sizeof q, s, (size_t)(e - s)));
  if (cx->mm && !cx->sized) {
    if (!strata_field_next(&r, e, &f3, &e3) || parse_id(f3, e3, &cx->mm_nnz))
      return strata_err_set(STRATA_EPARSE, "%s:%zu: expected 'rows cols entries'", path, lineno);
    cx->mm_rows = a;
    cx->mm_cols = b;
    cx->mm_n = a > b ? a : b;
    /* The vertices are allocated by the declared size, edges or not, and
     * the entries are promised (twice each, symmetric). */
    if (cx->mm_n > UINT32_MAX)
      return strata_err_set(STRATA_ERANGE,
                            "%s:%zu: a %llu x %llu matrix: more than 2^32 - 1 vertices", path,
                            lineno, (unsigned long long)a, (unsigned long long)b);
    uint64_t nnz = cx->mm_nnz;
    uint64_t promised = nnz > UINT64_MAX / 16 ? UINT64_MAX / 16 : nnz * (cx->sym ? 2 : 1);
    p->rd.lineno = lineno;
    int rc =
        strata_lines_fits(&p->rd, graph_need(1, cx->mm_n, promised, promised * 8), NULL,
                          "a %llu x %llu matrix of %llu entr%s needs", (unsigned long long)a,
                          (unsigned long long)b, (unsigned long long)nnz, nnz == 1 ? "y" : "ies");
    if (rc) return rc;
    cx->sized = 1;
    return 0;
  }
  if (cx->mm && (a < 1 || b < 1 || a > cx->mm_rows || b > cx->mm_cols))
    return strata_err_set(STRATA_ERANGE,
                          "%s:%zu: entry (%llu, %llu) outside the %llu x %llu "
                          "matrix",
                          path, lineno, (unsigned long long)a, (unsigned long long)b,
                          (unsigned long long)cx->mm_rows, (unsigned long long)cx->mm_cols);
  return put_entry(p, a, b, lineno);
}

/* The lines of a block [s, end) (whole lines, the last ending in '\n'),
 * the first being line p->rd.lineno + 1. */
static int scan_block(part *p, const char *s, const char *end) {
  const read_ctx *cx = p->cx;
  const int mm = cx->mm;
  const uint64_t rows = cx->mm_rows, cols = cx->mm_cols;
  size_t lineno = p->rd.lineno;
  int rc;
  while (s < end) {
    const char *ls = s;
    lineno++;
    /* The common line: digits, blanks, digits, then the end of the line,
     * or blanks and whatever follows them. At most 19 digits an id, which
     * cannot overflow; more go the general way. */
    uint64_t a, b;
    unsigned d = (unsigned)(unsigned char)*s - '0';
    int k;
    if (d > 9) goto general;
    for (a = d, k = 1; (d = (unsigned)(unsigned char)*++s - '0') <= 9; k++) a = a * 10 + d;
    if (k > 19 || (*s != ' ' && *s != '\t')) goto general;
    do s++;
    while (*s == ' ' || *s == '\t');
    if ((d = (unsigned)(unsigned char)*s - '0') > 9) goto general;
    for (b = d, k = 1; (d = (unsigned)(unsigned char)*++s - '0') <= 9; k++) b = b * 10 + d;
    if (k > 19) goto general;
    if (*s == '\n')
      s++;
    else if (*s == '\r' && s[1] == '\n')
      s += 2;
    else if (*s == ' ' || *s == '\t')
      s = (const char *)memchr(s, '\n', (size_t)(end - s)) + 1;
    else
      goto general;
    if (mm && (a < 1 || b < 1 || a > rows || b > cols)) goto general; /* which words the error */
    if ((rc = put_entry(p, a, b, lineno))) return rc;
    continue;
  general:;
    const char *nl = memchr(ls, '\n', (size_t)(end - ls)), *e = nl;
    if (e > ls && e[-1] == '\r') e--;
    if ((rc = general_line(p, lineno, 0, ls, e))) return rc;
    s = nl + 1;
  }
  return 0;
}

/* A thread's range: every block of it, until the end or another range's
 * failure. */
static void *scan_part(void *arg) {
  part *p = arg;
  read_ctx *cx = p->cx;
  int rc = 0;
  if (!p->open) {
    if ((rc = strata_lines_open_range(&p->rd, cx->path, p->start, p->stop))) goto done;
    p->open = 1;
  }
  const char *blk;
  size_t len;
  while ((rc = strata_lines_block(&p->rd, &blk, &len)) == 1) {
    if (__atomic_load_n(&cx->failed, __ATOMIC_RELAXED)) {
      rc = STRATA_EINVAL; /* the message is the failed range's */
      break;
    }
    if ((rc = scan_block(p, blk, blk + len))) break;
  }
done:
  p->rc = rc < 0 ? rc : 0;
  if (rc < 0) __atomic_store_n(&cx->failed, 1, __ATOMIC_RELAXED);
  return NULL;
}

/* fn on every part, on threads of their own but the first, on this one. */
static void run_parts(part *parts, int np, void *(*fn)(void *)) {
  pthread_t th[MOST_PARTS];
  int started[MOST_PARTS] = {0};
  for (int k = 1; k < np; k++) started[k] = pthread_create(&th[k], NULL, fn, &parts[k]) == 0;
  fn(&parts[0]);
  for (int k = 1; k < np; k++) {
    if (started[k])
      pthread_join(th[k], NULL);
    else
      fn(&parts[k]); /* no thread to be had: here, in turn */
  }
}

/* Edge e of chunk c. */
static inline void chunk_edge(edge_chunk *c, uint32_t e, uint64_t *a, uint64_t *b) {
  if (c->wide) {
    *a = chunk64(c)[2 * (size_t)e];
    *b = chunk64(c)[2 * (size_t)e + 1];
  } else {
    *a = chunk32(c)[2 * (size_t)e];
    *b = chunk32(c)[2 * (size_t)e + 1];
  }
}

/* Renumbering dense ids, a part's share: the ids it holds, as bits. */
static void *mark_part(void *arg) {
  part *p = arg;
  uint64_t *bits = p->bits;
  for (edge_chunk *c = p->first; c; c = c->next) {
    if (c->wide) {
      for (uint32_t e = 0; e < 2 * c->n; e++)
        bits[chunk64(c)[e] >> 6] |= 1ull << (chunk64(c)[e] & 63);
    } else {
      const uint32_t *d = chunk32(c);
      for (uint32_t e = 0; e < 2 * c->n; e++) bits[d[e] >> 6] |= 1ull << (d[e] & 63);
    }
  }
  return NULL;
}

static inline uint32_t dense_rank(const read_ctx *cx, uint64_t id) {
  uint64_t w = cx->bits[id >> 6] & ((1ull << (id & 63)) - 1);
  return cx->rank[id >> 6] + (uint32_t)__builtin_popcountll(w);
}

static inline id_slot *slot_of(const read_ctx *cx, uint64_t id) {
  size_t mask = ((size_t)1 << cx->slot_bits) - 1;
  size_t h = (size_t)((id * 0x9E3779B97F4A7C15ull) >> (64 - cx->slot_bits));
  while (cx->slots[h].v1 && cx->slots[h].id != id) h = (h + 1) & mask;
  return &cx->slots[h];
}

/* A part's edges as vertex numbers, into the graph at its place. */
static void *map_part(void *arg) {
  part *p = arg;
  const read_ctx *cx = p->cx;
  uint32_t *src = cx->g->src + p->out, *dst = cx->g->dst + p->out;
  uint64_t k = 0;
  for (edge_chunk *c = p->first; c; c = c->next) {
    if (cx->mm) {
      for (uint32_t e = 0; e < c->n; e++, k++) {
        uint64_t a, b;
        chunk_edge(c, e, &a, &b);
        src[k] = (uint32_t)(a - 1);
        dst[k] = (uint32_t)(b - 1);
      }
    } else if (cx->bits) {
      if (!c->wide) {
        const uint32_t *d = chunk32(c);
        for (uint32_t e = 0; e < c->n; e++, k++) {
          src[k] = dense_rank(cx, d[2 * e]);
          dst[k] = dense_rank(cx, d[2 * e + 1]);
        }
      } else {
        for (uint32_t e = 0; e < c->n; e++, k++) {
          uint64_t a, b;
          chunk_edge(c, e, &a, &b);
          src[k] = dense_rank(cx, a);
          dst[k] = dense_rank(cx, b);
        }
      }
    } else {
      for (uint32_t e = 0; e < c->n; e++, k++) {
        uint64_t a, b;
        chunk_edge(c, e, &a, &b);
        src[k] = slot_of(cx, a)->v1 - 1;
        dst[k] = slot_of(cx, b)->v1 - 1;
      }
    }
  }
  return NULL;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The sparse ids: a hash table of those seen, then their vertex numbers
 * in increasing order of id. */
static int hash_ids(read_ctx *cx, part *parts, int np, uint64_t *n_out) {
  uint64_t n = 0;
  cx->slot_bits = 10;
  cx->slots = strata_calloc((size_t)1 << cx->slot_bits, sizeof *cx->slots);
  if (!cx->slots) return -1;
  for (int k = 0; k < np; k++)
    for (edge_chunk *c = parts[k].first; c; c = c->next)
      for (uint32_t e = 0; e < 2 * c->n; e++) {
        uint64_t id = c->wide ? chunk64(c)[e] : chunk32(c)[e];
        id_slot *s = slot_of(cx, id);
        if (s->v1) continue;
        s->id = id;
        s->v1 = 1;
        /* A load of at most one half keeps the probes short. */
        if (++n * 2 > ((uint64_t)1 << cx->slot_bits)) {
          unsigned bits = cx->slot_bits + 1;
          id_slot *old = cx->slots, *nw = strata_calloc((size_t)1 << bits, sizeof *nw);
          if (!nw) return -1;
          size_t olds = (size_t)1 << cx->slot_bits;
          cx->slots = nw;
          cx->slot_bits = bits;
          for (size_t i = 0; i < olds; i++)
            if (old[i].v1) *slot_of(cx, old[i].id) = old[i];
          strata_free(old);
        }
      }
  if (n > UINT32_MAX) return -2;
  uint64_t *ids = strata_malloc(n * 8 + 8);
  if (!ids) return -1;
  size_t k = 0;
  for (size_t i = 0; i < ((size_t)1 << cx->slot_bits); i++)
    if (cx->slots[i].v1) ids[k++] = cx->slots[i].id;
  qsort(ids, n, 8, cmp_u64);
  for (uint64_t v = 0; v < n; v++) slot_of(cx, ids[v])->v1 = (uint32_t)v + 1;
  cx->g->ids = ids;
  *n_out = n;
  return 0;
}

/* The dense ids (below 2^32 - 1, a bitmap no bigger than the edges): each
 * part marks its own (one bitmap for all when a bitmap each would cost more
 * than the edges), the marks are joined, counted and numbered. */
static int dense_ids(read_ctx *cx, part *parts, int np, uint64_t m, uint64_t max_id,
                     uint64_t *n_out) {
  size_t words = (size_t)(max_id >> 6) + 1;
  int own = (uint64_t)(np - 1) * words <= m;
  for (int k = 0; k < (own ? np : 1); k++)
    if (!(parts[k].bits = strata_calloc(words, 8))) return -1;
  if (own) {
    run_parts(parts, np, mark_part);
  } else {
    for (int k = 1; k < np; k++) parts[k].bits = parts[0].bits;
    for (int k = 0; k < np; k++) mark_part(&parts[k]);
    for (int k = 1; k < np; k++) parts[k].bits = NULL;
    np = 1;
  }
  uint64_t *bits = parts[0].bits;
  for (int k = 1; k < np; k++)
    for (size_t w = 0; w < words; w++) bits[w] |= parts[k].bits[w];
  if (!(cx->rank = strata_malloc(words * 4))) return -1;
  uint64_t n = 0;
  for (size_t w = 0; w < words; w++) {
    cx->rank[w] = (uint32_t)n;
    n += (uint64_t)__builtin_popcountll(bits[w]);
  }
  uint64_t *ids = strata_malloc(n * 8 + 8);
  if (!ids) return -1;
  for (size_t w = 0, v = 0; w < words; w++)
    for (uint64_t x = bits[w]; x; x &= x - 1)
      ids[v++] = (uint64_t)w * 64 + (uint64_t)__builtin_ctzll(x);
  cx->bits = bits;
  cx->g->ids = ids;
  *n_out = n;
  return 0;
}

/* The parts' edges as the graph: vertex numbers, ids. */
static int build_graph(read_ctx *cx, part *parts, int np, pr_graph *g) {
  const char *path = cx->path;
  uint64_t m = 0, max_id = 0, n = 0;
  for (int k = 0; k < np; k++) {
    parts[k].out = m;
    m += parts[k].m;
    if (parts[k].max_id > max_id) max_id = parts[k].max_id;
  }
  if (cx->mm && !cx->sized)
    return strata_err_set(STRATA_EPARSE, "%s: a Matrix Market header without its size line", path);
  if (!m) return strata_err_set(STRATA_EEMPTY, "%s: no edges", path);
  cx->g = g;
  g->src = strata_malloc(m * 4);
  g->dst = strata_malloc(m * 4);
  if (!g->src || !g->dst) return strata_err_set(STRATA_ENOMEM, "%s: out of memory", path);
  if (cx->mm) {
    /* Matrix Market's vertices are 1..max(rows, cols), edges or not (the
     * size line checked their number). */
    n = cx->mm_n;
    if (!(g->ids = strata_malloc(n * 8)))
      return strata_err_set(STRATA_ENOMEM, "%s: out of memory", path);
    for (uint64_t v = 0; v < n; v++) g->ids[v] = v + 1;
  } else {
    /* Ids are numbered densely in increasing order: by a bitmap when they
     * are dense enough that it is no bigger than the edges, else through a
     * hash table and a sort of the distinct ids. */
    int rc = max_id < UINT32_MAX && (max_id >> 6) <= m ? dense_ids(cx, parts, np, m, max_id, &n)
                                                       : hash_ids(cx, parts, np, &n);
    if (rc == -2) return strata_err_set(STRATA_ERANGE, "%s: more than 2^32 - 1 vertices", path);
    if (rc) return strata_err_set(STRATA_ENOMEM, "%s: out of memory", path);
  }
  run_parts(parts, np, map_part);
  g->n = (uint32_t)n;
  g->m = m;
  return 0;
}

/* The file read by up to `threads` ranges of at least min_part bytes. */
static int read_graph(const char *path, pr_graph *g, int threads, uint64_t min_part) {
  read_ctx cx = {.path = path};
  part parts[MOST_PARTS];
  memset(parts, 0, sizeof parts);
  int np = 1, rc;
  for (int k = 0; k < MOST_PARTS; k++) parts[k].cx = &cx;
  part *p0 = &parts[0];
  if ((rc = strata_lines_open(&p0->rd, path))) return rc;
  p0->open = 1;
  /* The head, one line at a time: the first line (the Matrix Market header,
   * if it is one) and, in Matrix Market, every line to the size line. */
  const char *s;
  size_t len;
  while ((rc = strata_lines_next(&p0->rd, &s, &len)) == 1) {
    if ((rc = general_line(p0, p0->rd.lineno, p0->rd.lineno == 1, s, s + len))) goto done;
    if (!cx.mm || cx.sized) break;
  }
  if (rc < 0)
    goto done;
  uint64_t at = strata_lines_offset(&p0->rd), size = p0->rd.size, rest = size > at ? size - at : 0;
  if (!p0->rd.gz && threads > 1 && rest / 2 >= min_part) {
    np = (int)(rest / min_part < (uint64_t)threads ? rest / min_part : (uint64_t)threads);
    if (np > MOST_PARTS) np = MOST_PARTS;
    strata_lines_close(&p0->rd);
    p0->open = 0;
    for (int k = 0; k < np; k++) {
      parts[k].start = at + rest * (uint64_t)k / (uint64_t)np;
      parts[k].stop = k + 1 < np ? at + rest * (uint64_t)(k + 1) / (uint64_t)np : UINT64_MAX;
    }
  }
  run_parts(parts, np, scan_part);
  for (int k = 0; k < np && !rc; k++) rc = parts[k].rc;
  if (rc) {
    /* A range's message names its line within the range: read again by one
     * thread, which names the first bad line of the file. */
    if (np > 1) rc = 1;
    goto done;
  }
  rc = build_graph(&cx, parts, np, g);
done:
  for (int k = 0; k < np; k++) part_free(&parts[k]);
  strata_free(cx.rank);
  strata_free(cx.slots);
  if (rc) pr_graph_free(g);
  return rc;
}

static int cpus_here(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  long k = sysconf(_SC_NPROCESSORS_ONLN);
  return k > 0 ? (int)k : 1;
}

int pr_graph_read_opts(const char *path, pr_graph *g, int threads, uint64_t min_part) {
  memset(g, 0, sizeof *g);
  if (threads <= 0) threads = cpus_here();
  int rc = read_graph(path, g, threads, min_part ? min_part : PART_BYTES);
  if (rc == 1) rc = read_graph(path, g, 1, UINT64_MAX);
  return rc;
}

int pr_graph_read(const char *path, pr_graph *g) { return pr_graph_read_opts(path, g, 0, 0); }
