/*
 * The async rule of the table (comm/rule.h): reads never wait. A worker
 * reads whatever copy its cache holds; only the prefetcher, which must be
 * the aggressive one, brings it the other workers' updates, asking at every
 * clock end for the rows it read one iteration back that are not of the
 * newest clock.
 */
#include <limits.h>

#include "comm/rule.h"
#include "strata/core.h"

static int async_resolve(strata_engine_opts *o, const strata__given *g) {
  if (g->prefetch && o->prefetch != STRATA_PREFETCH_AGGRESSIVE)
    return strata_err_set(STRATA_EUSAGE,
                          "--mode async needs --prefetch aggressive: its reads never wait, so "
                          "only the prefetcher brings other workers' updates");
  o->staleness = 0;
  return 0;
}

/* The app is told the staleness is unbounded. */
static void async_clock_rule(const strata_engine_opts *o, const strata_app *app, int *staleness,
                             double *wpc) {
  (void)o, (void)app, (void)wpc;
  *staleness = -1;
}

static void async_echo(char *out, size_t n, const strata_engine_opts *o) {
  (void)o;
  snprintf(out, n, "no staleness bound");
}

/* A read takes any copy, unless the caller asks for a staleness. */
static int32_t async_need(const strata_table *tb, int s) {
  return s < 0 ? INT32_MIN : tb->clock - s;
}

const strata__table_rule strata__async_rule = {
    .mode = {.name = "async",
             .resolve = async_resolve,
             .clock_rule = async_clock_rule,
             .echo = async_echo},
    .need = async_need,
    .eager_refresh = 1,
};
