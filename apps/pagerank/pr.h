/*
 * pr.h - strata-pagerank's own parts: the graph readers and generator
 * (graph.c), the tiled edge layout and its kernel (tiles.c). The app
 * (pagerank.c) is written on strata's public headers only.
 */
#ifndef STRATA_PAGERANK_PR_H
#define STRATA_PAGERANK_PR_H

#include <stddef.h>
#include <stdint.h>

/* A directed graph as its edge list, vertices 0..n-1. ids[v] is vertex
 * v's id in the input (SNAP's FromNodeId, Matrix Market's 1-based index,
 * the generator's vertex number), for output; NULL: v itself. */
typedef struct pr_graph {
  uint32_t n;
  uint64_t m;
  uint32_t *src, *dst; /* m each */
  uint64_t *ids;       /* n, or NULL */
} pr_graph;

void pr_graph_free(pr_graph *g);

/* R-MAT / Kronecker generator with Graph500's parameters (a, b, c; d =
 * 1 - a - b - c), 2^scale vertices, edge_factor * 2^scale directed edges,
 * vertex numbers randomly permuted as Graph500 does. Deterministic for the
 * seed. */
typedef struct pr_rmat {
  int scale, edge_factor;
  double a, b, c;
  uint64_t seed;
} pr_rmat;
int pr_graph_rmat(const pr_rmat *r, pr_graph *g);

/* Reads a SNAP edge list (plain or gzip; '#' comments; two ids per line,
 * blanks between, CRLF allowed) or, when the file starts with
 * "%%MatrixMarket", a Matrix Market coordinate matrix (entry i j is the
 * edge i -> j; "symmetric" adds j -> i). Ids are renumbered densely in
 * increasing order. A plain file is read by as many threads as this
 * process may run on, each scanning a byte range of at least 16 MB; the
 * graph and the errors are those of one thread. STRATA_ENOENT,
 * STRATA_EPARSE (FILE:LINE: why), STRATA_EEMPTY or STRATA_ENOMEM. */
int pr_graph_read(const char *path, pr_graph *g);

/* The same with up to `threads` threads (0: as many as this process may run
 * on) and ranges of at least min_part bytes (0: 16 MB). */
int pr_graph_read_opts(const char *path, pr_graph *g, int threads, uint64_t min_part);

/* ---- tiles ----------------------------------------------------------- */

/* The edges from source block j into destination block i, grouped for the
 * cache: by pipeline chunk of the source block (chunk c holds the sources
 * whose ranks arrive in chunk c), then by destination sub-tile of 2^sub_bits
 * vertices (whose accumulators then stay in cache), then by a window of
 * 2^(32 - sub_bits) sources; inside a group sorted by source. An edge is
 * one uint32: (source - group's src_base) << sub_bits | (destination -
 * group's dst_base). Data block layout: pr_tile, then depth + 1 group
 * offsets (uint32), the groups, the edges. */
typedef struct pr_tile {
  uint32_t n_dst, n_src; /* vertices of the destination and source blocks */
  uint32_t depth, n_groups;
  uint64_t n_edges;
  uint32_t sub_bits, pad;
} pr_tile;

typedef struct pr_group {
  uint32_t src_base, dst_base; /* block-local vertex numbers */
  uint64_t off;                /* first edge */
  uint32_t count, pad;
} pr_group;

static inline const uint32_t *pr_tile_chunks(const pr_tile *t) { return (const uint32_t *)(t + 1); }
static inline const pr_group *pr_tile_groups(const pr_tile *t) {
  size_t o = sizeof(pr_tile) + ((size_t)t->depth + 1) * 4;
  return (const pr_group *)((const char *)t + (o + 7) / 8 * 8);
}
static inline const uint32_t *pr_tile_edges(const pr_tile *t) {
  return (const uint32_t *)(pr_tile_groups(t) + t->n_groups);
}

/* A vertex blocking: block b holds vertices [first[b], first[b + 1]). */
typedef struct pr_blocks {
  int B;
  uint32_t *first; /* B + 1 */
} pr_blocks;

/* Builds the B x B tiles (tiles[i * B + j]: sources in block j,
 * destinations in block i; each a strata_alloc_aligned buffer of
 * *lens[i * B + j] bytes) of the graph given as CSR by source (off: n + 1,
 * adj: destinations), chunked as the ring cuts a block of nv vertices kept in rows of per_row
 * vertices (plus rows_extra trailing rows) into depth chunks, with destination sub-tiles of 2^sub_bits vertices (8 to 24).
 * 0 or STRATA_ENOMEM. */
int pr_tiles_build(const pr_blocks *bl, const uint64_t *off, const uint32_t *adj, uint32_t per_row,
                   uint32_t rows_extra, int depth, int sub_bits, void **tiles, size_t *lens);

/* Compensated accumulation: hl = (hi, lo) holds hi + lo, and adding c
 * keeps the rounding error of hi + c in lo (Knuth's TwoSum). A sum of many
 * terms is then correct to about one rounding of its value whatever their
 * order, so the ranks do not depend on the blocking or the number of
 * workers beyond the last bit. */
static inline void pr_dd_add(double *hl, double c) {
  double h = hl[0], s = h + c, bb = s - h;
  hl[1] += (h - (s - bb)) + (c - bb);
  hl[0] = s;
}
static inline double pr_dd_value(const double *hl) { return hl[0] + hl[1]; }

/* acc[dst] += c[src] over the edges of chunk `chunk` of tile t (c: the
 * source block's values, block-local; acc: the destination block's
 * accumulators, (hi, lo) pairs as pr_dd_add keeps them). */
void pr_tile_scatter(const pr_tile *t, int chunk, const double *c, double *acc);

#endif
