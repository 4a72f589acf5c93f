/*
 * tiles.c - the (source block, destination block) edge layout and the
 * scatter kernel over it (pr.h).
 *
 * Why this layout: a pass reads every edge once and adds its source's
 * contribution into its destination's accumulator. Read in source order,
 * the contributions stream but the accumulators are hit at random over the
 * whole graph; so the edges of a tile are grouped by destination sub-tile
 * (2^sub_bits accumulators, sized by the app to stay in cache while the
 * group runs) and, inside a group, sorted by source, so the contributions
 * are read in increasing order, which the prefetchers follow. An edge is
 * then 4 bytes, two offsets in one word. This is propagation blocking's
 * idea (Beamer, Asanovic and Patterson, IPDPS 2017) in the form the ring
 * needs: the ring already moves source blocks, chunk by chunk, past the
 * worker holding a destination block's accumulators.
 */
#include <string.h>

#include "pr.h"
#include "strata/core.h"
#include "strata/schedule.h"

/* Source vertices [*lo, *hi) of chunk c of a block of nv vertices kept in
 * rows of per_row vertices plus rows_extra trailing rows, cut into depth
 * chunks as the ring cuts it (strata_chunk_rows). */
static void chunk_verts(uint32_t nv, uint32_t per_row, uint32_t rows_extra, int depth, int c,
                        uint32_t *lo, uint32_t *hi) {
  uint32_t rows = (nv + per_row - 1) / per_row + rows_extra, rlo, rhi;
  strata_chunk_rows(rows, depth, c, &rlo, &rhi);
  uint64_t l = (uint64_t)rlo * per_row, h = (uint64_t)rhi * per_row;
  *lo = (uint32_t)(l < nv ? l : nv);
  *hi = (uint32_t)(h < nv ? h : nv);
}

typedef struct tile_plan {
  uint32_t nsub, nwin; /* destination sub-tiles; source windows per chunk (the most) */
  uint64_t *count;     /* depth * nsub * nwin: edges per key, then the next slot */
  uint64_t edges;
} tile_plan;

int pr_tiles_build(const pr_blocks *bl, const uint64_t *off, const uint32_t *adj, uint32_t per_row,
                   uint32_t rows_extra, int depth, int sub_bits, void **tiles, size_t *lens) {
  int B = bl->B, rc = 0;
  const uint32_t SB = (uint32_t)sub_bits, WB = 32 - SB, SUBV = 1u << SB, WINV = 1u << WB;
  uint32_t n = bl->first[B];
  uint16_t *blk = strata_malloc((size_t)n * 2);
  tile_plan *pl = strata_calloc((size_t)B, sizeof *pl);
  uint32_t *clo = strata_malloc(((size_t)depth + 1) * 4);
  if (!blk || !pl || !clo)
    goto oom;
  for (int b = 0; b < B; b++)
    for (uint32_t v = bl->first[b]; v < bl->first[b + 1]; v++)
      blk[v] = (uint16_t)b;
  for (int j = 0; j < B; j++) {
    uint32_t jlo = bl->first[j], nj = bl->first[j + 1] - jlo, widest = 0;
    for (int c = 0; c < depth; c++) {
      uint32_t lo, hi;
      chunk_verts(nj, per_row, rows_extra, depth, c, &lo, &hi);
      clo[c] = lo;
      if (hi - lo > widest)
        widest = hi - lo;
    }
    clo[depth] = nj;
    uint32_t nwin = widest ? (widest + WINV - 1) / WINV : 1;
    for (int i = 0; i < B; i++) {
      uint32_t ni = bl->first[i + 1] - bl->first[i];
      pl[i].nsub = ni ? (ni + SUBV - 1) / SUBV : 1;
      pl[i].nwin = nwin;
      pl[i].edges = 0;
      if (!(pl[i].count = strata_calloc((size_t)depth * pl[i].nsub * nwin, 8)))
        goto oom;
    }
    /* Pass 1: edges per (chunk, sub-tile, window) key of each tile. */
    int c = 0;
    for (uint32_t u = 0; u < nj; u++) {
      while (u >= clo[c + 1])
        c++;
      uint32_t w = (u - clo[c]) >> WB;
      for (uint64_t k = off[jlo + u]; k < off[jlo + u + 1]; k++) {
        uint32_t v = adj[k];
        tile_plan *t = &pl[blk[v]];
        uint32_t s = (v - bl->first[blk[v]]) >> SB;
        t->count[((size_t)c * t->nsub + s) * t->nwin + w]++;
        t->edges++;
      }
    }
    /* The tiles, their groups in key order, and each key's first slot. */
    for (int i = 0; i < B; i++) {
      tile_plan *t = &pl[i];
      size_t keys = (size_t)depth * t->nsub * t->nwin, ng = 0;
      for (size_t k = 0; k < keys; k++)
        ng += t->count[k] > 0;
      size_t head = (sizeof(pr_tile) + ((size_t)depth + 1) * 4 + 7) / 8 * 8;
      size_t len = head + ng * sizeof(pr_group) + t->edges * 4;
      pr_tile *h = strata_alloc_aligned(len);
      if (!h)
        goto oom;
      tiles[(size_t)i * B + j] = h;
      lens[(size_t)i * B + j] = len;
      /* The engine hashes a data block's every byte (strata/problem.h):
       * the gap that aligns the groups after the chunk offsets must hold
       * zeros, not whatever the allocator left there. */
      memset(h, 0, head);
      *h = (pr_tile){
          bl->first[i + 1] - bl->first[i], nj, (uint32_t)depth, (uint32_t)ng, t->edges, SB, 0};
      uint32_t *co = (uint32_t *)(h + 1);
      pr_group *g = (pr_group *)pr_tile_groups(h);
      uint64_t at = 0;
      size_t gi = 0;
      for (int cc = 0; cc < depth; cc++) {
        co[cc] = (uint32_t)gi;
        for (uint32_t s = 0; s < t->nsub; s++)
          for (uint32_t w = 0; w < t->nwin; w++) {
            uint64_t *cnt = &t->count[((size_t)cc * t->nsub + s) * t->nwin + w];
            if (!*cnt)
              continue;
            g[gi++] = (pr_group){clo[cc] + w * WINV, s * SUBV, at, (uint32_t)*cnt, 0};
            uint64_t k = *cnt;
            *cnt = at;
            at += k;
          }
      }
      co[depth] = (uint32_t)gi;
    }
    /* Pass 2: the edges, in source order inside each group. */
    c = 0;
    for (uint32_t u = 0; u < nj; u++) {
      while (u >= clo[c + 1])
        c++;
      uint32_t w = (u - clo[c]) >> WB, su = (u - clo[c] - w * WINV);
      for (uint64_t k = off[jlo + u]; k < off[jlo + u + 1]; k++) {
        uint32_t v = adj[k], i = blk[v], dv = v - bl->first[i];
        tile_plan *t = &pl[i];
        uint32_t s = dv >> SB;
        uint64_t *slot = &t->count[((size_t)c * t->nsub + s) * t->nwin + w];
        uint32_t *E = (uint32_t *)pr_tile_edges(tiles[(size_t)i * B + j]);
        E[(*slot)++] = su << SB | (dv & (SUBV - 1));
      }
    }
    for (int i = 0; i < B; i++) {
      strata_free(pl[i].count);
      pl[i].count = NULL;
    }
  }
  goto done;
oom:
  rc = strata_err_set(STRATA_ENOMEM, "pagerank: out of memory for the edge tiles");
done:
  for (int i = 0; pl && i < B; i++)
    strata_free(pl[i].count);
  strata_free(pl);
  strata_free(blk);
  strata_free(clo);
  return rc;
}

void pr_tile_scatter(const pr_tile *t, int chunk, const double *c, double *acc) {
  const uint32_t *co = pr_tile_chunks(t);
  const pr_group *g = pr_tile_groups(t);
  const uint32_t *E = pr_tile_edges(t);
  const uint32_t sb = t->sub_bits, mask = (1u << sb) - 1;
  for (uint32_t k = co[chunk]; k < co[chunk + 1]; k++) {
    const uint32_t *e = E + g[k].off;
    const double *cs = c + g[k].src_base;
    double *a = acc + 2 * (size_t)g[k].dst_base;
    uint32_t cnt = g[k].count, x = 0;
    for (; x + 4 <= cnt; x += 4) {
      uint32_t e0 = e[x], e1 = e[x + 1], e2 = e[x + 2], e3 = e[x + 3];
      double c0 = cs[e0 >> sb], c1 = cs[e1 >> sb], c2 = cs[e2 >> sb], c3 = cs[e3 >> sb];
      pr_dd_add(a + 2 * (e0 & mask), c0);
      pr_dd_add(a + 2 * (e1 & mask), c1);
      pr_dd_add(a + 2 * (e2 & mask), c2);
      pr_dd_add(a + 2 * (e3 & mask), c3);
    }
    for (; x < cnt; x++)
      pr_dd_add(a + 2 * (e[x] & mask), cs[e[x] >> sb]);
  }
}
