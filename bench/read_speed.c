/*
 * bench/read_speed.c - how fast the data readers parse a file: the ratings
 * reader (strata_ratings_read), the LIBSVM reader (strata_libsvm_read) and
 * strata-pagerank's edge-list reader (apps/pagerank/graph.c, compiled in),
 * each run --repeat times on the same file after one warm-up read (which
 * brings the file into the page cache). One JSON line: the file's bytes,
 * what was read, and per run the wall and CPU seconds (the process's, every
 * thread's), with MB/s of wall and of CPU per core, medians over the runs.
 *
 *   read_speed --reader ratings --file s10m.tr [--repeat 5]
 *   read_speed --reader graph --file kd22k18.el --threads 1
 *
 * Exit status 2 for a bad flag, 1 for a file the reader refuses.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "apps/pagerank/pr.h"
#include "bench/bench_info.h"
#include "strata/apps/libsvm.h"
#include "strata/apps/ratings.h"
#include "strata/core.h"
#include "strata/options.h"

#define PROG "read_speed"
#define MOST_RUNS 100

typedef struct rs_opts {
  const char *reader, *file;
  int repeat, threads;
} rs_opts;

#define O(field) offsetof(rs_opts, field)
static const strata_option rs_options[] = {
    {"reader", 'r', STRATA_OPT_STRING, O(reader), "ratings", "NAME", 0, 0, NULL,
     "ratings (any format strata_ratings_read takes), libsvm or graph (SNAP or Matrix Market)",
     NULL},
    {"file", 'f', STRATA_OPT_STRING, O(file), NULL, "FILE", 0, 0, NULL, "the file (required)",
     NULL},
    {"repeat", 'n', STRATA_OPT_INT, O(repeat), "5", "R", 1, MOST_RUNS, NULL, "measured runs", NULL},
    {"threads", 't', STRATA_OPT_INT, O(threads), "0", "T", 0, 64, NULL,
     "graph: threads (0: as many as this process may run on)", NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};

/* One read of the file; what it holds, for the JSON line. */
static int read_once(const rs_opts *o, uint64_t *items, const char **unit) {
  if (!strcmp(o->reader, "ratings")) {
    strata_ratings rs;
    int rc = strata_ratings_read(o->file, STRATA_FMT_AUTO, NULL, NULL, &rs);
    *items = rs.n;
    *unit = "ratings";
    strata_ratings_close(&rs);
    return rc;
  }
  if (!strcmp(o->reader, "libsvm")) {
    strata_libsvm d;
    int rc = strata_libsvm_read(o->file, NULL, &d);
    *items = d.nnz;
    *unit = "nonzeros";
    strata_libsvm_close(&d);
    return rc;
  }
  pr_graph g;
  int rc = pr_graph_read_opts(o->file, &g, o->threads, 0);
  *items = g.m;
  *unit = "edges";
  pr_graph_free(&g);
  return rc;
}

int main(int argc, char **argv) {
  rs_opts o;
  strata_optgroup g = {"options", rs_options, &o};
  int help = 0;
  int rc = strata_options_defaults(&g, 1);
  if (!rc) rc = strata_options_parse(&g, 1, argc - 1, argv + 1, &help);
  if (!rc && !help && !o.file) rc = strata_err_set(STRATA_EUSAGE, "--file is required");
  if (!rc && !help && strcmp(o.reader, "ratings") && strcmp(o.reader, "libsvm") &&
      strcmp(o.reader, "graph"))
    rc = strata_err_set(STRATA_EUSAGE, "--reader: expected ratings, libsvm or graph");
  if (rc || help) {
    if (rc)
      fprintf(stderr, PROG ": %s\n", strata_err_msg());
    else {
      printf("usage: " PROG
             " --file FILE [options]\n"
             "How fast the data readers parse a file.\n\n");
      strata_options_help(stdout, &g, 1);
    }
    return rc ? 2 : 0;
  }
  struct stat st;
  if (stat(o.file, &st)) {
    fprintf(stderr, "%s: %s: cannot stat\n", PROG, o.file);
    return 1;
  }
  uint64_t items = 0;
  const char *unit = "";
  double wall[MOST_RUNS], cpu[MOST_RUNS];
  for (int k = -1; k < o.repeat; k++) {
    double w0 = strata_now(), c0 = strata_cpu_seconds();
    if ((rc = read_once(&o, &items, &unit))) {
      fprintf(stderr, "%s: %s\n", PROG, strata_err_msg());
      return 1;
    }
    if (k >= 0) {
      wall[k] = strata_now() - w0;
      cpu[k] = strata_cpu_seconds() - c0;
    }
  }
  double mw = strata_median(wall, o.repeat), mc = strata_median(cpu, o.repeat);
  double mb = (double)st.st_size / 1e6;
  strata_json j;
  bench_json_begin(&j, PROG);
  strata_json_string(&j, "reader", o.reader);
  strata_json_string(&j, "file", o.file);
  strata_json_int(&j, "bytes", (int64_t)st.st_size);
  strata_json_int(&j, unit, (int64_t)items);
  strata_json_int(&j, "threads", o.threads);
  strata_json_int(&j, "repeat", o.repeat);
  strata_json_array_begin(&j, "wall_s");
  for (int k = 0; k < o.repeat; k++) strata_json_double(&j, NULL, wall[k]);
  strata_json_array_end(&j);
  strata_json_array_begin(&j, "cpu_s");
  for (int k = 0; k < o.repeat; k++) strata_json_double(&j, NULL, cpu[k]);
  strata_json_array_end(&j);
  strata_json_double(&j, "median_wall_s", mw);
  strata_json_double(&j, "median_cpu_s", mc);
  strata_json_double(&j, "mb_per_s", mb / mw);
  strata_json_double(&j, "mb_per_cpu_s", mb / mc);
  strata_json_object_end(&j);
  putchar('\n');
  return 0;
}
