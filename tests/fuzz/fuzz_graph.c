/*
 * strata-pagerank's graph reader (apps/pagerank/graph.c, pr_graph_read):
 * SNAP edge lists and Matrix Market coordinate files, plain and gzip, under
 * the harness's memory limit, so a Matrix Market size line or the edges
 * beyond it are refused by the reader's own check. The header's choice
 * sets how many threads read the file and how small their byte ranges may
 * be (1 to 4 threads, ranges from 1 byte), and, when no allocation failure
 * is injected, one thread reads it again: the same graph, or the same
 * error, word for word.
 */
#include "fuzz.h"

#include <string.h>

#include "apps/pagerank/pr.h"
#include "strata/core.h"
#include "strata/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in;
  if (fuzz_input_begin(&in, data, size))
    return 0;
  int injected = data[1] >= 0xe0;
  pr_graph g;
  int rc = pr_graph_read_opts(fuzz_path(), &g, 1 + (int)(in.choice & 3), 1 + (in.choice >> 2) * 7);
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
  if (!injected) {
    static char msg[1024];
    snprintf(msg, sizeof msg, "%s", rc ? strata_err_msg() : "");
    pr_graph h;
    int rc1 = pr_graph_read_opts(fuzz_path(), &h, 1, 0);
    FUZZ_CHECK(rc1 == rc, "one thread and several end differently");
    if (rc)
      FUZZ_CHECK(!strcmp(msg, strata_err_msg()), "one thread and several word the error apart");
    else
      FUZZ_CHECK(h.n == g.n && h.m == g.m && !memcmp(h.src, g.src, g.m * 4) &&
                     !memcmp(h.dst, g.dst, g.m * 4) && (!h.ids) == (!g.ids) &&
                     (!h.ids || !memcmp(h.ids, g.ids, (size_t)g.n * 8)),
                 "one thread and several read another graph");
    pr_graph_free(&h);
  }
  pr_graph_free(&g);
  fuzz_finish(rc, fuzz_path());
  return 0;
}
