/*
 * strata-pagerank's graph reader (apps/pagerank/graph.c, pr_graph_read):
 * SNAP edge lists and Matrix Market coordinate files, plain and gzip, under
 * the harness's memory limit, so a Matrix Market size line or the edges
 * beyond it are refused by the reader's own check. The header's choice is
 * unused: the content decides the format.
 */
#include "fuzz.h"

#include "apps/pagerank/pr.h"
#include "strata/core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in;
  if (fuzz_input_begin(&in, data, size))
    return 0;
  pr_graph g;
  int rc = pr_graph_read(fuzz_path(), &g);
  if (rc == 0) {
    FUZZ_CHECK(g.n > 0 && g.m > 0 && g.src && g.dst, "an empty graph returned");
    for (uint64_t e = 0; e < g.m; e++)
      FUZZ_CHECK(g.src[e] < g.n && g.dst[e] < g.n, "an edge beyond the vertices");
    /* Ids name the vertices in increasing order: SNAP's renumbered, Matrix
     * Market's 1..n. */
    for (uint32_t v = 0; g.ids && v + 1 < g.n; v++)
      FUZZ_CHECK(g.ids[v] < g.ids[v + 1], "vertex ids do not increase");
  } else {
    FUZZ_CHECK(g.src == NULL && g.dst == NULL && g.ids == NULL && g.m == 0,
               "a failed read left data");
  }
  pr_graph_free(&g);
  fuzz_finish(rc, fuzz_path());
  return 0;
}
