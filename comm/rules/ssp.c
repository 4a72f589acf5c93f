/*
 * The clock-bounded rules of the table (comm/rule.h): bsp, absp, ssp and
 * essp. A worker at clock c reads a row once its copy holds every update
 * stamped before c - s (its data age is at least c - s), asking the row's
 * shard when it does not and waiting for the answer; s is 0 in bsp (one
 * clock a pass) and absp (--wpc clocks a pass), --staleness in ssp and
 * essp. ESSP adds eager pushes (Dai et al., "High-performance distributed
 * ML at scale through parameter server consistency models"): a worker's
 * first read of a row subscribes it, and whenever a shard's clock moves it
 * sends every subscriber the rows changed since, and tells it that its
 * other rows are current, so that reads rarely wait.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/rule.h"
#include "strata/core.h"

/* ---- settings ---- */

/* bsp is one clock a pass whatever the app's default work per clock. */
static int bsp_resolve(strata_engine_opts *o, const strata__given *g) {
  if (g->wpc && o->wpc != 1)
    return strata_err_set(STRATA_EUSAGE,
                          "--mode bsp is one clock per pass: use --mode absp --wpc %g", o->wpc);
  if (g->staleness && o->staleness != 0)
    return strata_err_set(
        STRATA_EUSAGE, "--mode bsp has staleness 0: use --mode ssp --staleness %d", o->staleness);
  o->staleness = 0;
  o->wpc = 1;
  return 0;
}

static int absp_resolve(strata_engine_opts *o, const strata__given *g) {
  if (g->staleness && o->staleness != 0)
    return strata_err_set(
        STRATA_EUSAGE, "--mode absp has staleness 0: use --mode ssp --staleness %d", o->staleness);
  o->staleness = 0;
  return 0;
}

static int ssp_resolve(strata_engine_opts *o, const strata__given *g) {
  if (!g->staleness) o->staleness = 1;
  return 0;
}

/* 2 passes, plus the passes that s clocks span (s / K with K clocks per
 * pass, s * W with W >= 1), so that a verdict never holds a worker back
 * more than the staleness bound does. */
static int ssp_control_lag(const strata_engine_opts *o) {
  int K = o->wpc < 1 ? (int)lround(1.0 / o->wpc) : 0;
  int span = K ? (o->staleness + K - 1) / K : o->staleness * (int)o->wpc;
  return 2 + span;
}

static void staleness_echo(char *out, size_t n, const strata_engine_opts *o) {
  snprintf(out, n, "staleness %d", o->staleness);
}

/* ---- BSP's exact reads ---- */

/* With staleness 0 (bsp, absp, ssp --staleness 0) a read at clock c sees
 * exactly every update of clocks <= c - 1 (comm/table.c: the shard answers
 * from its pure copy). ESSP's pushes send live rows, so it keeps them. */
static int ssp_exact(const strata_table *tb) { return tb->c.staleness == 0; }

/* ---- ESSP's pushes ---- */

typedef struct essp {
  uint8_t *dirty;    /* per local row: changed since the last push */
  uint32_t *list, n; /* the changed rows (global indices) */
} essp;

static int essp_open(strata_table *tb) {
  essp *e = strata_calloc(1, sizeof *e);
  size_t nl = tb->n_local ? tb->n_local : 1;
  if (e) {
    e->dirty = strata_calloc(nl, 1);
    e->list = strata_malloc(nl * sizeof *e->list);
  }
  tb->rule_state = e;
  if (!e || !e->dirty || !e->list)
    return strata_err_set(STRATA_ENOMEM, "table: out of memory for %u rows", tb->n_local);
  return 0;
}

static void essp_free(strata_table *tb) {
  essp *e = tb->rule_state;
  if (!e) return;
  strata_free(e->dirty);
  strata_free(e->list);
  strata_free(e);
  tb->rule_state = NULL;
}

/* A worker's first read of a row registers it: a READ with age 0,
 * answered at once, after which the shard pushes the row. */
static int essp_before_read(strata_table *tb, uint32_t lo, uint32_t hi) {
  uint32_t g = lo;
  while (g < hi && (tb->sub[g] || tb->req_age[g] >= 0)) g++;
  if (g == hi) return 0;
  return strata__table_request(tb, NULL, g, hi, INT32_MAX, -1);
}

static int essp_read_in(strata_table *tb, int w, const uint32_t *rows, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    tb->subs[(size_t)strata__table_local(tb, rows[i]) * tb->P + w] = 1;
  return 0;
}

static int essp_applied(strata_table *tb, int w, const void *update) {
  (void)w;
  essp *e = tb->rule_state;
  const ps_hdr *h = update;
  const uint32_t *rows = ps_msg_rows((void *)update);
  for (uint32_t i = 0; i < h->nrows; i++) {
    uint32_t l = strata__table_local(tb, rows[i]);
    if (!e->dirty[l]) {
      e->dirty[l] = 1;
      e->list[e->n++] = rows[i];
    }
  }
  return 0;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* After the shard's clock moved, every subscribed client gets the rows
 * changed since the last push it has subscribed to, and learns that its
 * other subscribed rows are current as of the new clock. */
static int essp_advanced(strata_table *tb) {
  essp *e = tb->rule_state;
  qsort(e->list, e->n, sizeof *e->list, cmp_u32);
  uint32_t *rows = strata_malloc((e->n ? e->n : 1) * sizeof *rows);
  if (!rows) return strata_err_set(STRATA_ENOMEM, "table: out of memory for a push");
  int rc = 0;
  for (int w = 0; w < tb->P && !rc; w++) {
    int any = 0;
    for (uint32_t l = 0; l < tb->n_local && !any; l++) any = tb->subs[(size_t)l * tb->P + w];
    if (!any) continue;
    uint32_t n = 0;
    for (uint32_t i = 0; i < e->n; i++)
      if (tb->subs[(size_t)strata__table_local(tb, e->list[i]) * tb->P + w]) rows[n++] = e->list[i];
    rc = strata__table_send_rows(tb, w, rows, n, PS_PUSH);
    tb->st.pushes += n;
  }
  for (uint32_t i = 0; i < e->n; i++) e->dirty[strata__table_local(tb, e->list[i])] = 0;
  e->n = 0;
  strata_free(rows);
  return rc;
}

static int essp_rows_in(strata_table *tb, const ps_hdr *h, const uint32_t *rows) {
  if (!(h->flags & PS_PUSH)) {
    for (uint32_t i = 0; i < h->nrows; i++) tb->sub[rows[i]] = 1;
    return 0;
  }
  /* Unchanged subscribed rows are current as of the new clock too. */
  for (uint32_t g = (uint32_t)h->from; g < tb->c.n_rows; g += (uint32_t)tb->P)
    if (tb->sub[g] && tb->age[g] < h->clock) {
      tb->age[g] = h->clock;
      if (tb->req_age[g] >= 0 && tb->req_age[g] <= h->clock) tb->req_age[g] = -1;
    }
  return 0;
}

const strata__table_rule strata__bsp_rule = {
    .mode = {.name = "bsp",
             .takes = STRATA__TAKES_STALENESS,
             .resolve = bsp_resolve,
             .echo = staleness_echo},
    .exact = ssp_exact,
};

const strata__table_rule strata__absp_rule = {
    .mode = {.name = "absp",
             .takes = STRATA__TAKES_STALENESS,
             .resolve = absp_resolve,
             .echo = staleness_echo},
    .exact = ssp_exact,
};

const strata__table_rule strata__ssp_rule = {
    .mode = {.name = "ssp",
             .takes = STRATA__TAKES_STALENESS,
             .resolve = ssp_resolve,
             .control_lag = ssp_control_lag,
             .echo = staleness_echo},
    .exact = ssp_exact,
};

const strata__table_rule strata__essp_rule = {
    .mode = {.name = "essp",
             .takes = STRATA__TAKES_STALENESS,
             .resolve = ssp_resolve,
             .control_lag = ssp_control_lag,
             .echo = staleness_echo},
    .open = essp_open,
    .free = essp_free,
    .before_read = essp_before_read,
    .read_in = essp_read_in,
    .applied = essp_applied,
    .advanced = essp_advanced,
    .rows_in = essp_rows_in,
};
