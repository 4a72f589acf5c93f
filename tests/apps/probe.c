/*
 * strata_probe: a test app that records what the engine tells it, so that
 * tests/mpi/api_probe.sh can check the app API's promises in every mode:
 *   - every mode calls compute for the same task views in the same order,
 *     empty chunks (row_lo == row_hi) included;
 *   - tv->clock follows the clock rule of strata/app.h for the mode and
 *     --wpc, and setup->staleness and setup->wpc are what the flags say;
 *   - MAX and MIN partials combine over workers as maxima and minima, and
 *     one nobody touches stays at its identity without ending the run.
 *
 * The problem: B x B diagonal strata (B = --strata), rotating block j of
 * 1 + 3j float rows [W0..W3, j, k, count, 0] (the worker columns W below,
 * then the row's identity and count), so that with --depth above a block's
 * rows some of its chunks are empty; a global row [calls, empty calls, 0,
 * ...]; an eval block on every diagonal data block. compute adds 1 to the
 * count of every row of its chunk and to the global row, checks its task
 * view against the schedule and the clock rule, and appends the view to a
 * trace kept in the task's resident block, which the engine returns to
 * the coordinator with the model. evaluate checks the model after each
 * pass. Partials (N_PARTIALS below) report every problem.
 *
 * With --model-out DIR the coordinator's export checks the partials of
 * every pass, the final model and the traces, writes DIR/probe_report.json
 * (traces per worker, partials per pass, the set-ups seen) and fails the
 * run (exit 1) when a check fails. --expect-staleness and --expect-wpc give
 * the values setup->staleness and setup->wpc must hold; --fault clock makes
 * worker 0 misreport one clock, which the checks must catch.
 *
 * Reads under a value bound (--expect-value-bound V, with --mode vap): each
 * compute also adds 1 to its worker's own column of every row of its chunk
 * (columns W0..W3: up to 4 workers), and the trace keeps, per call, what the
 * call read of every worker's column and when it ran. An update of worker
 * q is certainly released (in its table) once q's next compute call has
 * started, and a read happened after its worker's previous call ended; so
 * for every read and every other worker q, the updates q had certainly
 * released by then, minus what the read saw of q's column, is an amount the
 * read missed of q's updates in transit. The export fails when one exceeds
 * V (the rule's promise), or with --expect-vap-violations when none does
 * (the enforcement switched off in a test: STRATA_TEST_VAP_OFF=1). Every
 * rank must be on one host: the calls' times are CLOCK_MONOTONIC.
 * --value-len 4 declares only the worker columns model values
 * (strata_problem.value_len), the rest of the row optimiser state: the
 * count column's +1 then rides unbounded, and the model's counts check that
 * it arrives whole.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "strata/app.h"
#include "strata/core.h"
#include "strata/json.h"
#include "strata/main.h"
#include "strata/schedule.h"

#define PROBE_REPORT "probe_report.json"

typedef struct probe_config {
  int expect_staleness; /* -2: not checked */
  double expect_wpc;    /* < 0: not checked */
  double value_bound;   /* > 0: check every read against it */
  int expect_violations; /* 1: the value-bound check must find reads beyond it */
  int value_len;         /* strata_problem.value_len */
  const char *fault;    /* "none" or "clock" */
} probe_config;

enum {
  P_CALLS,       /* SUM: compute calls, empty chunks included */
  P_EMPTY,       /* SUM: compute calls on empty chunks */
  P_ORDER_ERR,   /* SUM: calls whose task view is not the schedule's next */
  P_BAD,         /* SUM: rows or blocks other than the view names */
  P_SETUP_ERR,   /* SUM: compute calls whose set-up differs from the flags */
  P_CLOCK_ERR,   /* MAX: the largest |tv->clock - the rule's clock| */
  P_CLOCK_MIN,   /* MIN: the pass's first clock */
  P_CLOCK_MAX,   /* MAX: the pass's last clock */
  P_WORKER_MAX,  /* MAX: the worker's index: P - 1 over workers, not a sum */
  P_WORKER_MIN,  /* MIN: the worker's index: 0 */
  P_UNTOUCHED,   /* MAX: nobody touches it: stays -inf, and the run goes on */
  P_EVAL_CALLS,  /* SUM: evaluate calls */
  P_EVAL_WMAX,   /* MAX: the evaluating worker's index */
  P_MODEL_ERR,   /* SUM: model rows evaluate found wrong, or an evaluate clock not -1 */
  N_PARTIALS
};

static const strata_reduce probe_reduce[N_PARTIALS] = {
    [P_CALLS] = STRATA_REDUCE_SUM,     [P_EMPTY] = STRATA_REDUCE_SUM,
    [P_ORDER_ERR] = STRATA_REDUCE_SUM, [P_BAD] = STRATA_REDUCE_SUM,
    [P_SETUP_ERR] = STRATA_REDUCE_SUM, [P_CLOCK_ERR] = STRATA_REDUCE_MAX,
    [P_CLOCK_MIN] = STRATA_REDUCE_MIN, [P_CLOCK_MAX] = STRATA_REDUCE_MAX,
    [P_WORKER_MAX] = STRATA_REDUCE_MAX, [P_WORKER_MIN] = STRATA_REDUCE_MIN,
    [P_UNTOUCHED] = STRATA_REDUCE_MAX, [P_EVAL_CALLS] = STRATA_REDUCE_SUM,
    [P_EVAL_WMAX] = STRATA_REDUCE_MAX, [P_MODEL_ERR] = STRATA_REDUCE_SUM};

static const char *const partial_names[N_PARTIALS] = {
    "calls",      "empty_calls", "order_errors", "bad_rows",   "setup_errors",
    "clock_error", "clock_min",  "clock_max",    "worker_max", "worker_min",
    "untouched",  "eval_calls",  "eval_worker_max", "model_errors"};

/* The objectives (at most STRATA_MAX_OBJECTIVES): partials by index. */
static const int objective_of[] = {P_CALLS,      P_EMPTY,     P_CLOCK_ERR, P_CLOCK_MIN,
                                   P_CLOCK_MAX,  P_WORKER_MAX, P_WORKER_MIN, P_UNTOUCHED};
#define N_OBJECTIVES ((int)(sizeof objective_of / sizeof objective_of[0]))
static const char *const objective_names[N_OBJECTIVES] = {
    "calls", "empty_calls", "clock_error", "clock_min",
    "clock_max", "worker_max", "worker_min", "untouched"};

/* One compute call as the trace keeps it. */
#define VAP_COLS 4 /* workers whose columns the value-bound check reads */

typedef struct pr_entry {
  int32_t worker, seq, pass, subepoch;
  int32_t data, resident, rotating, chunk;
  uint32_t row_lo, row_hi;
  int64_t clock;
  double t_start, t_prev_end; /* this call's start, the end of the worker's call before */
  float seen[2][VAP_COLS];    /* the first two rows' worker columns as read */
} pr_entry;

/* A resident block: this header, then `cap` entries. */
typedef struct pr_res_hdr {
  int32_t block, cap, n, worker; /* worker: the one that wrote it (-1 none) */
  int32_t staleness, pad;        /* that worker's setup */
  double wpc;
} pr_res_hdr;

typedef struct pr_data_hdr {
  int32_t bi, bj;
} pr_data_hdr;

enum { ROW_W0, ROW_BLOCK = ROW_W0 + VAP_COLS, ROW_INDEX, ROW_COUNT, ROW_PAD, ROW_FLOATS };
enum { G_CALLS, G_EMPTY };

/* Coordinator only: every pass's partials, for export. */
typedef struct pr_priv {
  int passes, seen;
  double *per_pass; /* passes x N_PARTIALS */
} pr_priv;

typedef struct pr_worker {
  const probe_config *cfg;
  strata_setup setup;
  strata_schedule sched;
  int me, P, B, depth;
  int32_t seq;
  int32_t chunks; /* this worker's chunks per pass */
  /* the schedule's next task view: pass, sub-epoch, task index, chunk */
  int cur_pass, cur_s, cur_t, cur_c;
  int pass_seen; /* the pass of the last call; its index within the pass */
  int32_t in_pass;
  int fault_done;
  double t_end; /* when its last compute call ended (0: none yet) */
} pr_worker;

static uint32_t rot_rows(int j) { return 1 + 3 * (uint32_t)j; }

static float *rot_row(const strata_block *b, uint32_t k) {
  return (float *)b->buf + (size_t)k * ROW_FLOATS;
}

static pr_entry *res_entries(const strata_block *b) {
  return (pr_entry *)((pr_res_hdr *)b->buf + 1);
}

/* Empty chunks of rotating block j at this depth. */
static int empty_chunks(int j, int depth) {
  int n = 0;
  for (int c = 0; c < depth; c++) {
    uint32_t lo, hi;
    strata_chunk_rows(rot_rows(j), depth, c, &lo, &hi);
    n += lo == hi;
  }
  return n;
}

/* The clock of the i-th of n chunks of pass `pass` under the rule of
 * strata/app.h (not a sufficient-factor app). */
static int64_t rule_clock(strata_mode mode, double wpc, int pass, int32_t i, int32_t n) {
  if (!strata_mode_is_ps(mode)) return pass;
  if (wpc < 1) {
    int64_t K = lround(1.0 / wpc);
    return pass * K + (int64_t)i * K / n;
  }
  return pass / (int64_t)wpc;
}

/* ---- options ----------------------------------------------------------- */

#define OPT(field) offsetof(probe_config, field)
static const strata_option probe_options[] = {
    {.name = "expect-staleness",
     .type = STRATA_OPT_INT,
     .offset = OPT(expect_staleness),
     .def = "-2",
     .metavar = "S",
     .min = -2,
     .max = 1000000,
     .help = "setup->staleness must be S (-2: not checked)"},
    {.name = "expect-wpc",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(expect_wpc),
     .def = "-1",
     .metavar = "W",
     .min = -1,
     .max = 1e6,
     .help = "setup->wpc must be W (< 0: not checked)"},
    {.name = "expect-value-bound",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(value_bound),
     .def = "0",
     .metavar = "V",
     .max = 1e9,
     .help = "check that no read misses more than V of another worker's released updates "
             "(0: no check; needs every rank on one host)"},
    {.name = "expect-vap-violations",
     .type = STRATA_OPT_FLAG,
     .offset = OPT(expect_violations),
     .help = "with --expect-value-bound: the check must find reads beyond it (the enforcement "
             "switched off)"},
    {.name = "value-len",
     .type = STRATA_OPT_INT,
     .offset = OPT(value_len),
     .def = "0",
     .metavar = "N",
     .max = ROW_FLOATS,
     .help = "the first N floats of a row are model values, the rest optimiser state "
             "(strata_problem.value_len; 4: the worker columns; 0: all)"},
    {.name = "fault",
     .type = STRATA_OPT_CHOICE,
     .offset = OPT(fault),
     .def = "none",
     .metavar = "F",
     .choices = "none|clock",
     .help = "clock: worker 0 misreports one clock (the checks must catch it)"},
    {.name = NULL},
};

/* Whether setup holds the staleness and wpc the flags expect. */
static int setup_as_expected(const probe_config *cfg, const strata_setup *s) {
  if (cfg->expect_staleness != -2 && s->staleness != cfg->expect_staleness) return 0;
  if (cfg->expect_wpc >= 0 && fabs(s->wpc - cfg->expect_wpc) > 1e-9) return 0;
  return 1;
}

/* The program's set-up (before any rank loads) must already say it. */
static int probe_check(const void *vcfg, const strata_setup *s) {
  const probe_config *cfg = vcfg;
  if (s->strata < s->workers)
    return strata_err_set(STRATA_EUSAGE, "probe: --strata %d is fewer than the %d workers",
                          s->strata, s->workers);
  if (!setup_as_expected(cfg, s))
    return strata_err_set(STRATA_EUSAGE,
                          "probe: app->check's set-up has staleness %d and wpc %g, the flags "
                          "expect %d and %g",
                          s->staleness, s->wpc, cfg->expect_staleness, cfg->expect_wpc);
  return 0;
}

/* ---- coordinator: load ------------------------------------------------- */

static void priv_free(void *p) {
  pr_priv *pv = p;
  if (!pv) return;
  strata_free(pv->per_pass);
  strata_free(pv);
}

static int alloc_block(strata_block *b, size_t len) {
  b->len = len;
  if (!(b->buf = strata_alloc_aligned(len ? len : 1))) return -1;
  memset(b->buf, 0, len ? len : 1);
  return 0;
}

static int probe_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const probe_config *cfg = vcfg;
  int B = setup->strata, depth = setup->depth, rc;
  int32_t cap = setup->passes * B * depth; /* calls per resident block: B tasks a pass */
  pr_priv *pv = strata_calloc(1, sizeof *pv);
  if (!pv) goto oom;
  pv->passes = setup->passes;
  if (!(pv->per_pass = strata_calloc((size_t)setup->passes * N_PARTIALS, sizeof(double)))) goto oom;
  if ((rc = strata_problem_alloc(prob, B * B, B, B, 1))) goto fail;
  for (int i = 0; i < B; i++)
    for (int j = 0; j < B; j++) {
      strata_block *d = &prob->data[i * B + j];
      if (alloc_block(d, sizeof(pr_data_hdr))) goto oom;
      *(pr_data_hdr *)d->buf = (pr_data_hdr){i, j};
      if (i == j) {
        strata_block *e = &prob->eval[i * B + j];
        if (alloc_block(e, sizeof(pr_data_hdr))) goto oom;
        *(pr_data_hdr *)e->buf = (pr_data_hdr){i, j};
      }
    }
  for (int i = 0; i < B; i++) {
    strata_block *r = &prob->resident[i];
    if (alloc_block(r, sizeof(pr_res_hdr) + (size_t)cap * sizeof(pr_entry))) goto oom;
    *(pr_res_hdr *)r->buf = (pr_res_hdr){.block = i, .cap = cap, .worker = -1};
  }
  for (int j = 0; j < B; j++) {
    strata_block *r = &prob->rotating[j];
    r->nrows = rot_rows(j);
    r->row_bytes = ROW_FLOATS * sizeof(float);
    if (alloc_block(r, (size_t)r->nrows * r->row_bytes)) goto oom;
    for (uint32_t k = 0; k < r->nrows; k++) {
      rot_row(r, k)[ROW_BLOCK] = (float)j;
      rot_row(r, k)[ROW_INDEX] = (float)k;
    }
  }
  prob->global.nrows = 1;
  prob->global.row_bytes = ROW_FLOATS * sizeof(float);
  if (alloc_block(&prob->global, ROW_FLOATS * sizeof(float))) goto oom;
  prob->n_examples = (uint64_t)B * (uint64_t)B * (uint64_t)depth;
  prob->value_len = (uint32_t)cfg->value_len;
  prob->priv = pv;
  prob->priv_free = priv_free;
  return 0;
oom:
  rc = strata_err_set(STRATA_ENOMEM, "probe: out of memory");
fail:
  priv_free(pv);
  strata_problem_close(prob);
  return rc;
}

static int probe_schedule(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                          strata_schedule *sched) {
  (void)cfg, (void)prob;
  return strata_schedule_diagonal(sched, setup->workers, setup->strata);
}

/* ---- workers ----------------------------------------------------------- */

static void probe_worker_free(void *state) {
  pr_worker *w = state;
  if (!w) return;
  strata_schedule_close(&w->sched);
  strata_free(w);
}

static int probe_worker_init(const void *vcfg, const strata_setup *setup, const void *meta,
                             size_t meta_len, void **state) {
  (void)meta, (void)meta_len;
  pr_worker *w = strata_calloc(1, sizeof *w);
  if (!w) return strata_err_set(STRATA_ENOMEM, "probe: out of memory");
  w->cfg = vcfg;
  w->setup = *setup;
  w->me = setup->worker;
  w->P = setup->workers;
  w->B = setup->strata;
  w->depth = setup->depth;
  w->pass_seen = -1;
  /* The schedule again, as load built it: what compute must be handed. */
  int rc = strata_schedule_diagonal(&w->sched, w->P, w->B);
  if (rc) {
    probe_worker_free(w);
    return rc;
  }
  for (int s = 0; s < w->sched.n_subepochs; s++) {
    int n;
    strata_schedule_tasks(&w->sched, s, w->me, &n);
    w->chunks += n * w->depth;
  }
  *state = w;
  return 0;
}

/* Moves the cursor to the schedule's next task view of this worker. */
static void advance(pr_worker *w) {
  if (++w->cur_c < w->depth) return;
  w->cur_c = 0;
  w->cur_t++;
  for (;;) {
    int n;
    strata_schedule_tasks(&w->sched, w->cur_s, w->me, &n);
    if (w->cur_t < n) return;
    w->cur_t = 0;
    if (++w->cur_s == w->sched.n_subepochs) {
      w->cur_s = 0;
      w->cur_pass++;
    }
  }
}

/* Puts the cursor on the worker's first task view of pass 0. */
static void advance_to_start(pr_worker *w) {
  w->cur_c = w->depth - 1;
  w->cur_t = -1;
  advance(w);
}

/* Whether tv is the view under the cursor. */
static int is_next(pr_worker *w, const strata_task_view *tv) {
  int n;
  const strata_task *tk = strata_schedule_tasks(&w->sched, w->cur_s, w->me, &n);
  if (w->cur_t >= n) return 0;
  const strata_task *t = &tk[w->cur_t];
  uint32_t lo, hi;
  strata_chunk_rows(rot_rows(t->rotating), w->depth, w->cur_c, &lo, &hi);
  return tv->pass == w->cur_pass && tv->subepoch == w->cur_s && tv->chunk == w->cur_c &&
         tv->ids.data == t->data && tv->ids.resident == t->resident &&
         tv->ids.rotating == t->rotating && tv->row_lo == lo && tv->row_hi == hi;
}

static int probe_compute(void *state, const strata_task_view *tv, double *partials) {
  pr_worker *w = state;
  double t_start = strata_now();
  if (w->seq == 0) advance_to_start(w);
  if (tv->pass != w->pass_seen) {
    w->pass_seen = tv->pass;
    w->in_pass = 0;
  }
  int32_t i = w->in_pass++;
  int empty = tv->row_lo == tv->row_hi;
  partials[P_CALLS] += 1;
  partials[P_EMPTY] += empty;
  partials[P_ORDER_ERR] += !is_next(w, tv);
  advance(w);
  partials[P_SETUP_ERR] += !setup_as_expected(w->cfg, &w->setup);

  int64_t clock = tv->clock;
  if (strcmp(w->cfg->fault, "clock") == 0 && w->me == 0 && tv->pass == 1 && !w->fault_done) {
    clock++;
    w->fault_done = 1;
  }
  double wpc = w->cfg->expect_wpc >= 0 ? w->cfg->expect_wpc : w->setup.wpc;
  int64_t want = rule_clock(w->setup.mode, wpc, tv->pass, i, w->chunks);
  partials[P_CLOCK_ERR] = fmax(partials[P_CLOCK_ERR], (double)llabs(clock - want));
  partials[P_CLOCK_MIN] = fmin(partials[P_CLOCK_MIN], (double)clock);
  partials[P_CLOCK_MAX] = fmax(partials[P_CLOCK_MAX], (double)clock);
  partials[P_WORKER_MAX] = fmax(partials[P_WORKER_MAX], w->me);
  partials[P_WORKER_MIN] = fmin(partials[P_WORKER_MIN], w->me);

  const pr_data_hdr *d = tv->data->buf;
  int B = w->B;
  double bad = d->bi != tv->ids.resident || d->bj != tv->ids.rotating ||
               tv->ids.data != d->bi * B + d->bj;
  float seen[2][VAP_COLS] = {{0}};
  for (uint32_t k = tv->row_lo; k < tv->row_hi; k++) {
    float *row = rot_row(tv->rotating, k);
    bad += row[ROW_BLOCK] != (float)tv->ids.rotating || row[ROW_INDEX] != (float)k;
    if (k - tv->row_lo < 2) memcpy(seen[k - tv->row_lo], row + ROW_W0, sizeof seen[0]);
    row[ROW_COUNT] += 1;
    if (w->me < VAP_COLS) row[ROW_W0 + w->me] += 1;
  }
  float *g = tv->global->buf;
  g[G_CALLS] += 1;
  g[G_EMPTY] += (float)empty;

  pr_res_hdr *h = tv->resident->buf;
  bad += h->block != tv->ids.resident;
  if (h->n < h->cap) {
    h->worker = w->me;
    h->staleness = w->setup.staleness;
    h->wpc = w->setup.wpc;
    pr_entry *e = &res_entries(tv->resident)[h->n++];
    *e = (pr_entry){w->me,
                    w->seq,
                    tv->pass,
                    tv->subepoch,
                    tv->ids.data,
                    tv->ids.resident,
                    tv->ids.rotating,
                    tv->chunk,
                    tv->row_lo,
                    tv->row_hi,
                    clock,
                    t_start,
                    w->t_end,
                    {{0}}};
    memcpy(e->seen, seen, sizeof seen);
  } else {
    bad += 1;
  }
  partials[P_BAD] += bad;
  w->seq++;
  w->t_end = strata_now();
  return 0;
}

/* After pass p every row has been counted B (p + 1) times, and the global
 * row holds every call of passes 0..p. */
static int probe_evaluate(void *state, const strata_task_view *tv, double *partials) {
  pr_worker *w = state;
  int B = w->B, depth = w->depth;
  double err = tv->clock != -1;
  float want = (float)(B * (tv->pass + 1));
  for (uint32_t k = 0; k < tv->rotating->nrows; k++) {
    const float *row = rot_row(tv->rotating, k);
    float cols = 0;
    for (int c = 0; c < VAP_COLS; c++) cols += row[ROW_W0 + c];
    err += row[ROW_COUNT] != want || (w->P <= VAP_COLS && cols != want);
  }
  int empty = 0;
  for (int j = 0; j < B; j++) empty += empty_chunks(j, depth);
  const float *g = tv->global->buf;
  err += g[G_CALLS] != (float)(B * B * depth * (tv->pass + 1));
  err += g[G_EMPTY] != (float)(B * empty * (tv->pass + 1));
  partials[P_EVAL_CALLS] += 1;
  partials[P_EVAL_WMAX] = fmax(partials[P_EVAL_WMAX], w->me);
  partials[P_MODEL_ERR] += err;
  return 0;
}

/* ---- coordinator: objectives and export ------------------------------- */

static void probe_objectives(const void *cfg, const strata_problem *prob, const double *partials,
                             double *values) {
  (void)cfg;
  for (int i = 0; i < N_OBJECTIVES; i++) values[i] = partials[objective_of[i]];
  pr_priv *pv = prob->priv;
  if (pv && pv->seen < pv->passes)
    memcpy(pv->per_pass + (size_t)pv->seen++ * N_PARTIALS, partials, N_PARTIALS * sizeof(double));
}

typedef struct report {
  const probe_config *cfg;
  const strata_setup *setup;
  const strata_problem *prob;
  pr_entry **by_worker; /* P lists, in seq order */
  int *n_by_worker;
  int failures;
  char first[512];
  /* the value-bound check: reads checked, reads beyond the bound, the most
   * a read missed of one worker's released updates to a row */
  long vap_reads, vap_violations;
  double vap_max_missed;
} report;

static void failure(report *rp, const char *fmt, ...) STRATA_PRINTF(2, 3);
static void failure(report *rp, const char *fmt, ...) {
  if (rp->failures++ == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rp->first, sizeof rp->first, fmt, ap);
    va_end(ap);
  }
}

static int cmp_seq(const void *a, const void *b) {
  const pr_entry *x = a, *y = b;
  return (x->seq > y->seq) - (x->seq < y->seq);
}

/* What every pass's partials must be, then the final model. */
static void check_run(report *rp) {
  const strata_setup *s = rp->setup;
  const strata_problem *p = rp->prob;
  const pr_priv *pv = p->priv;
  int B = s->strata, depth = s->depth, P = s->workers;
  double wpc = rp->cfg->expect_wpc >= 0 ? rp->cfg->expect_wpc : s->wpc;
  int empty = 0;
  for (int j = 0; j < B; j++) empty += empty_chunks(j, depth);
  if (!setup_as_expected(rp->cfg, s))
    failure(rp, "coordinator's set-up: staleness %d, wpc %g", s->staleness, s->wpc);
  if (pv->seen != s->passes) failure(rp, "partials of %d passes, expected %d", pv->seen, s->passes);
  for (int q = 0; q < pv->seen; q++) {
    const double *v = pv->per_pass + (size_t)q * N_PARTIALS;
    int64_t first = rule_clock(s->mode, wpc, q, 0, 1), last = first;
    if (strata_mode_is_ps(s->mode) && wpc < 1) last = first + lround(1.0 / wpc) - 1;
    const double want[N_PARTIALS] = {
        [P_CALLS] = B * B * depth, [P_EMPTY] = B * empty, [P_ORDER_ERR] = 0, [P_BAD] = 0,
        [P_SETUP_ERR] = 0, [P_CLOCK_ERR] = 0, [P_CLOCK_MIN] = (double)first,
        [P_CLOCK_MAX] = (double)last, [P_WORKER_MAX] = P - 1, [P_WORKER_MIN] = 0,
        [P_UNTOUCHED] = -INFINITY, [P_EVAL_CALLS] = B, [P_EVAL_WMAX] = P - 1,
        [P_MODEL_ERR] = 0};
    /* A pass that ends inside a clock (--wpc above 1) is not scored: no
     * evaluate, its eval partials at their identities. */
    int unscored = strata_mode_is_ps(s->mode) && wpc > 1 && (q + 1) % (int)wpc != 0 &&
                   q != s->passes - 1;
    for (int i = 0; i < N_PARTIALS; i++) {
      double w = want[i];
      if (unscored && (i == P_EVAL_CALLS || i == P_EVAL_WMAX || i == P_MODEL_ERR))
        w = strata_reduce_identity(probe_reduce[i]);
      if (!(v[i] == w))
        failure(rp, "pass index %d: partial %s is %g, expected %g", q, partial_names[i], v[i], w);
    }
  }
  for (int j = 0; j < B; j++)
    for (uint32_t k = 0; k < p->rotating[j].nrows; k++)
      if (rot_row(&p->rotating[j], k)[ROW_COUNT] != (float)(B * s->passes))
        failure(rp, "rotating block %d row %u: count %g, expected %d", j, k,
                rot_row(&p->rotating[j], k)[ROW_COUNT], B * s->passes);
  const float *g = p->global.buf;
  if (g[G_CALLS] != (float)(B * B * depth * s->passes) || g[G_EMPTY] != (float)(B * empty * s->passes))
    failure(rp, "global row [%g, %g], expected [%d, %d]", g[G_CALLS], g[G_EMPTY],
            B * B * depth * s->passes, B * empty * s->passes);
}

/* Each worker's trace: as many calls as its tasks make, numbered 0.. */
static void check_traces(report *rp, const strata_schedule *sched) {
  const strata_setup *s = rp->setup;
  for (int w = 0; w < s->workers; w++) {
    int n = 0;
    for (int e = 0; e < sched->n_subepochs; e++) {
      int k;
      strata_schedule_tasks(sched, e, w, &k);
      n += k;
    }
    int want = n * s->depth * s->passes;
    if (rp->n_by_worker[w] != want)
      failure(rp, "worker %d: %d compute calls traced, expected %d", w, rp->n_by_worker[w], want);
    for (int i = 0; i < rp->n_by_worker[w]; i++)
      if (rp->by_worker[w][i].seq != i) {
        failure(rp, "worker %d: call %d of its trace has number %d", w, i, rp->by_worker[w][i].seq);
        break;
      }
  }
}

/* Every read against the value bound (see the top of the file). */
static void check_value_bound(report *rp) {
  const strata_setup *s = rp->setup;
  int P = s->workers < VAP_COLS ? s->workers : VAP_COLS;
  double V = rp->cfg->value_bound;
  for (int r = 0; r < P; r++)
    for (int i = 1; i < rp->n_by_worker[r]; i++) {
      const pr_entry *e = &rp->by_worker[r][i];
      for (uint32_t k = e->row_lo; k < e->row_hi && k - e->row_lo < 2; k++)
        for (int q = 0; q < P; q++) {
          if (q == r) continue;
          /* q's calls on this row whose next call started before the read */
          double released = 0;
          for (int m = 0; m + 1 < rp->n_by_worker[q]; m++) {
            const pr_entry *f = &rp->by_worker[q][m];
            if (f->rotating == e->rotating && f->row_lo <= k && k < f->row_hi &&
                rp->by_worker[q][m + 1].t_start <= e->t_prev_end)
              released += 1;
          }
          double missed = released - e->seen[k - e->row_lo][q];
          rp->vap_reads++;
          if (missed > rp->vap_max_missed) rp->vap_max_missed = missed;
          if (missed > V + 1e-4) rp->vap_violations++;
        }
    }
  if (rp->cfg->expect_violations && !rp->vap_violations)
    failure(rp,
            "no read missed more than %g of another worker's updates, with the bound's "
            "enforcement off (%ld reads checked)",
            V, rp->vap_reads);
  if (!rp->cfg->expect_violations && rp->vap_violations)
    failure(rp,
            "%ld of %ld reads missed more than the value bound %g of another worker's "
            "updates (up to %g)",
            rp->vap_violations, rp->vap_reads, V, rp->vap_max_missed);
}

static int fill_report(FILE *f, void *ud) {
  const report *rp = ud;
  const strata_setup *s = rp->setup;
  const strata_problem *p = rp->prob;
  const pr_priv *pv = p->priv;
  strata_json j;
  strata_json_init(&j, f);
  strata_json_object_begin(&j, NULL);
  strata_json_string(&j, "mode", strata_mode_name(s->mode));
  strata_json_int(&j, "workers", s->workers);
  strata_json_int(&j, "strata", s->strata);
  strata_json_int(&j, "depth", s->depth);
  strata_json_int(&j, "passes", s->passes);
  strata_json_bool(&j, "ok", rp->failures == 0);
  strata_json_int(&j, "failures", rp->failures);
  if (rp->failures) strata_json_string(&j, "first_failure", rp->first);
  if (rp->cfg->value_bound > 0) {
    strata_json_object_begin(&j, "value_bound");
    strata_json_number(&j, "bound", rp->cfg->value_bound);
    strata_json_int(&j, "reads", rp->vap_reads);
    strata_json_int(&j, "violations", rp->vap_violations);
    strata_json_number(&j, "max_missed", rp->vap_max_missed);
    strata_json_object_end(&j);
  }
  strata_json_object_begin(&j, "setup");
  strata_json_int(&j, "staleness", s->staleness);
  strata_json_number(&j, "wpc", s->wpc);
  strata_json_object_end(&j);
  /* worker_setup[w]: [staleness, wpc] as worker w's set-up said */
  strata_json_array_begin(&j, "worker_setup");
  for (int w = 0; w < s->workers; w++) {
    const pr_res_hdr *h = NULL;
    for (int i = 0; i < p->n_resident && !h; i++)
      if (((const pr_res_hdr *)p->resident[i].buf)->worker == w) h = p->resident[i].buf;
    strata_json_array_begin(&j, NULL);
    if (h) {
      strata_json_int(&j, NULL, h->staleness);
      strata_json_number(&j, NULL, h->wpc);
    }
    strata_json_array_end(&j);
  }
  strata_json_array_end(&j);
  strata_json_array_begin(&j, "partial_names");
  for (int i = 0; i < N_PARTIALS; i++) strata_json_string(&j, NULL, partial_names[i]);
  strata_json_array_end(&j);
  /* partials[pass][i]; infinities are null */
  strata_json_array_begin(&j, "partials");
  for (int q = 0; q < pv->seen; q++) {
    strata_json_array_begin(&j, NULL);
    for (int i = 0; i < N_PARTIALS; i++)
      strata_json_number(&j, NULL, pv->per_pass[(size_t)q * N_PARTIALS + i]);
    strata_json_array_end(&j);
  }
  strata_json_array_end(&j);
  /* trace[w]: worker w's compute calls in order, each [pass, subepoch,
   * data, resident, rotating, chunk, row_lo, row_hi, clock] */
  strata_json_array_begin(&j, "trace");
  for (int w = 0; w < s->workers; w++) {
    strata_json_array_begin(&j, NULL);
    for (int i = 0; i < rp->n_by_worker[w]; i++) {
      const pr_entry *e = &rp->by_worker[w][i];
      strata_json_array_begin(&j, NULL);
      j.one_line = 1; /* a call per line */
      const int64_t v[] = {e->pass, e->subepoch, e->data, e->resident, e->rotating,
                           e->chunk, e->row_lo, e->row_hi, e->clock};
      for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) strata_json_int(&j, NULL, v[k]);
      strata_json_array_end(&j);
      j.one_line = 0;
    }
    strata_json_array_end(&j);
  }
  strata_json_array_end(&j);
  strata_json_object_end(&j);
  fputc('\n', f);
  return 0;
}

static int probe_export(const void *vcfg, const strata_setup *setup, const strata_problem *prob,
                        const char *dir) {
  report rp = {.cfg = vcfg, .setup = setup, .prob = prob};
  strata_schedule sched;
  memset(&sched, 0, sizeof sched);
  int P = setup->workers, rc = 0;
  rp.by_worker = strata_calloc((size_t)P, sizeof *rp.by_worker);
  rp.n_by_worker = strata_calloc((size_t)P, sizeof *rp.n_by_worker);
  if (!rp.by_worker || !rp.n_by_worker) goto oom;
  for (int w = 0; w < P; w++) {
    size_t n = 0;
    for (int i = 0; i < prob->n_resident; i++) {
      const pr_res_hdr *h = prob->resident[i].buf;
      for (int k = 0; k < h->n; k++) n += res_entries(&prob->resident[i])[k].worker == w;
    }
    if (!(rp.by_worker[w] = strata_malloc((n + 1) * sizeof(pr_entry)))) goto oom;
    for (int i = 0; i < prob->n_resident; i++) {
      const pr_res_hdr *h = prob->resident[i].buf;
      for (int k = 0; k < h->n; k++)
        if (res_entries(&prob->resident[i])[k].worker == w)
          rp.by_worker[w][rp.n_by_worker[w]++] = res_entries(&prob->resident[i])[k];
    }
    qsort(rp.by_worker[w], (size_t)rp.n_by_worker[w], sizeof(pr_entry), cmp_seq);
  }
  if ((rc = strata_schedule_diagonal(&sched, P, setup->strata))) goto done;
  check_run(&rp);
  check_traces(&rp, &sched);
  if (vcfg && ((const probe_config *)vcfg)->value_bound > 0) check_value_bound(&rp);
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    rc = strata_err_set(STRATA_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
    goto done;
  }
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, PROBE_REPORT) >= (int)sizeof path) {
    rc = strata_err_set(STRATA_EINVAL, "%s: path too long", dir);
    goto done;
  }
  if ((rc = strata_write_atomic(path, fill_report, &rp))) goto done;
  if (rp.failures)
    rc = strata_err_set(STRATA_EINVAL, "probe: %d checks failed, first: %s; see %s", rp.failures,
                        rp.first, path);
  goto done;
oom:
  rc = strata_err_set(STRATA_ENOMEM, "probe: out of memory");
done:
  for (int w = 0; rp.by_worker && w < P; w++) strata_free(rp.by_worker[w]);
  strata_free(rp.by_worker);
  strata_free(rp.n_by_worker);
  strata_schedule_close(&sched);
  return rc;
}

static const strata_app probe_app = {
    .name = "probe",
    .flags = STRATA_APP_ADDITIVE,
    .summary = "records the task views, clocks and set-up the engine hands an app, and checks them",
    .examples = "  strata_probe --mode serial --strata 3 --depth 4 --model-out out/\n"
                "  mpirun -np 3 strata_probe --mode ssp --staleness 2 --wpc 0.5 --strata 3 "
                "--depth 4 --expect-staleness 2 --expect-wpc 0.5 --model-out out/\n",
    .options = probe_options,
    .config_size = sizeof(probe_config),
    .check = probe_check,
    .defaults = {.passes = 3,
                 .depth = 4,
                 .model_out_help = "check the run and write " PROBE_REPORT " into this directory"},
    .n_partials = N_PARTIALS,
    .partial_reduce = probe_reduce,
    .n_objectives = N_OBJECTIVES,
    .objective_names = objective_names,
    .load = probe_load,
    .schedule = probe_schedule,
    .worker_init = probe_worker_init,
    .worker_free = probe_worker_free,
    .compute = probe_compute,
    .evaluate = probe_evaluate,
    .objectives = probe_objectives,
    .export_model = probe_export,
};

int main(int argc, char **argv) {
  const strata_app *apps[] = {&probe_app};
  strata_program p = {.name = "strata_probe", .apps = apps, .n_apps = 1};
  return strata_program_main(&p, argc, argv);
}
