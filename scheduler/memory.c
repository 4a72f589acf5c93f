/*
 * Memory before work (scheduler/memory.h). A worker receives its blocks as
 * one bundle and copies each out (twice the shipped bytes at set-up); what
 * it holds for the parameters after that is its mode's answer (core/mode.h,
 * memory: each back-end and rule counts what its code allocates). The
 * coordinator keeps the problem and builds every worker's bundle before
 * the sends complete.
 */
#include "scheduler/memory.h"

#include <stdio.h>
#include <string.h>

#include "strata/core.h"

typedef struct need {
  double total, params, data;
  double bundled; /* parameter bytes in its set-up bundle */
} need;

static double block_sum(const strata_block *b, int n) {
  double s = 0;
  for (int i = 0; b && i < n; i++) s += (double)b[i].len;
  return s;
}

/* What worker w holds at its peak. */
typedef struct run_facts {
  const strata_app *app;
  const strata_engine_opts *opts;
  const strata__facts *mode;
} run_facts;

static need worker_need(const run_facts *run, const strata_problem *p, const strata_schedule *s,
                        int w) {
  need n = {0, 0, 0, 0};
  int nrot = p->n_rotating;
  double shipped = 0, res = 0, rot_held = 0;
  for (int d = 0; d < p->n_data; d++)
    if (strata_schedule_data_owner(s, d) == w)
      n.data += (double)p->data[d].len + (p->eval ? (double)p->eval[d].len : 0);
  for (int i = 0; i < p->n_resident; i++)
    if (strata_schedule_resident_owner(s, i) == w) res += (double)p->resident[i].len;
  for (int r = 0; r < nrot; r++) {
    int held = 0;
    for (int e = 0; e < s->n_subepochs && !held; e++) held = strata_schedule_rotating_holder(s, r, e) == w;
    if (held) rot_held += (double)p->rotating[r].len;
    if (run->mode->all_rotating || strata_schedule_rotating_holder(s, r, 0) == w)
      shipped += (double)p->rotating[r].len;
  }
  n.bundled = shipped + res;
  shipped += n.data + res;
  strata__mem_view v = {.opts = run->opts,
                        .P = s->n_workers,
                        .resident = res,
                        .rot_held = rot_held,
                        .rot_all = block_sum(p->rotating, nrot),
                        .global = (double)p->global.len,
                        .eval = p->eval && run->app->evaluate};
  n.params = strata__facts_memory(run->mode, &v);
  n.total = n.data + n.params;
  if (2 * shipped > n.total) n.total = 2 * shipped;
  return n;
}

static void human(char *out, size_t n, double bytes) {
  if (bytes >= 1e9)
    snprintf(out, n, "%.1f GB", bytes / 1e9);
  else if (bytes >= 1e6)
    snprintf(out, n, "%.1f MB", bytes / 1e6);
  else
    snprintf(out, n, "%.0f KB", bytes / 1e3);
}

int strata__mem_check(const strata_app *app, const strata_engine_opts *opts,
                      const strata__facts *mode, const strata_problem *p, const strata_schedule *s,
                      const host_info *hosts, uint64_t limit) {
  run_facts facts = {app, opts, mode}, *run = &facts;
  int P = s->n_workers;
  /* The coordinator: what it holds now, and the parameter blocks every
   * bundle copies while the sends go. */
  double coord = (double)hosts[0].rss;
  for (int w = 0; w < P; w++) coord += worker_need(run, p, s, w).bundled;
  for (int h = 0; h <= P; h++) {
    /* Each host once: at the first rank on it. */
    int first = 1;
    for (int g = 0; g < h && first; g++) first = strcmp(hosts[g].name, hosts[h].name) != 0;
    if (!first) continue;
    double avail = limit ? (double)limit : 0, sum = 0, wmax = 0;
    need big = {0, 0, 0, 0};
    int n_workers = 0;
    for (int r = h; r <= P; r++) {
      if (strcmp(hosts[r].name, hosts[h].name) != 0) continue;
      if (!limit && (double)hosts[r].avail > avail) avail = (double)hosts[r].avail;
      if (r == 0) {
        sum += coord;
        continue;
      }
      need n = worker_need(run, p, s, r - 1);
      n.total += (double)hosts[r].rss;
      sum += n.total;
      n_workers++;
      if (n.total > wmax) {
        wmax = n.total;
        big = n;
      }
    }
    strata_log(STRATA_LOG_DEBUG,
               "memory: host %s: about %.1f MB (coordinator %.1f MB%s, %d worker%s of up to %.1f MB), "
               "%.1f MB available", hosts[h].name, sum / 1e6, h == 0 ? coord / 1e6 : 0.0,
               h == 0 ? "" : ", elsewhere", n_workers, n_workers == 1 ? "" : "s", wmax / 1e6,
               avail / 1e6);
    if (avail <= 0 || sum <= avail) continue;
    char a[32], b[32], c[32], d[32], e[32], f[32];
    human(a, sizeof a, sum);
    human(b, sizeof b, avail);
    human(c, sizeof c, coord);
    human(d, sizeof d, wmax);
    human(e, sizeof e, big.params);
    human(f, sizeof f, big.data);
    const char *hint = run->app->memory_hint;
    char parts[256] = "";
    size_t u = 0;
    if (h == 0) u += (size_t)snprintf(parts, sizeof parts, "the coordinator %s", c);
    if (n_workers)
      snprintf(parts + u, sizeof parts - u, "%s%d worker%s of up to %s each (parameters %s, data %s)",
               u ? ", " : "", n_workers, n_workers == 1 ? "" : "s", d, e, f);
    return strata_err_set(STRATA_ENOMEM,
                          "the run needs about %s of memory on host %s, which has %s available%s: "
                          "%s; %s%sor spread the workers over more hosts",
                          a, hosts[h].name, b, limit ? " (--mem-limit)" : "", parts,
                          hint ? hint : "", hint ? ", " : "");
  }
  return 0;
}
