/*
 * blocksum: integer row and column sums of a sparse matrix, run as DSGD
 * would run it, so that the final blocks witness how the engine moved them.
 * See blocksum.h for the model and the checks.
 */
#include "blocksum.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "strata/core.h"
#include "strata/json.h"
#include "strata/schedule.h"

/* A trace slot: 0 = not visited, w + 1 = visited once by worker w,
 * TRACE_DUP = visited more than once. */
#define TRACE_DUP (-1)

enum { P_SUM, P_TRIPLES, P_BAD, P_EVAL_ERR, P_EVAL_CHECKS, N_PARTIALS };
static const char *const bs_objective_names[N_PARTIALS] = {"sum", "triples", "bad_rows",
                                                           "eval_errors", "eval_checks"};

enum { FAULT_NONE, FAULT_SUM, FAULT_TRACE };

/* What every worker needs besides the engine settings. */
typedef struct bs_meta {
  int32_t B, subepochs, passes, n_slots;
  int32_t rows, cols, fault, pad;
} bs_meta;

typedef struct bs_triple {
  uint32_t r, c;
  int32_t v;
} bs_triple;

/* Data block (i, j): header, then entries sorted by column (then row), so
 * the entries of one pipeline chunk form one contiguous run. */
typedef struct bs_data_hdr {
  int32_t bi, bj;
  uint32_t n, pad;
} bs_data_hdr;

typedef struct bs_entry {
  uint32_t r, c; /* local row in resident block bi, local column in rotating block bj */
  int64_t v;
} bs_entry;

/* A row of a rotating block; int32_t trace[n_slots] follows, the row padded
 * to 8 bytes. Rows past the block's real columns (there so that every
 * pipeline chunk has rows) have col -1 and must stay at sum 0. */
typedef struct bs_rot_row {
  int64_t sum;
  int32_t col;   /* global column */
  int32_t block; /* rotating block id */
} bs_rot_row;

/* Resident block: header with the block's own trace, then rows. */
typedef struct bs_res_hdr {
  int32_t block;
  uint32_t nrows;
} bs_res_hdr;

typedef struct bs_res_row {
  int64_t sum;
  int32_t row;
  int32_t block;
} bs_res_row;

/* Eval block, only on diagonal data block (i, i): the true sums of resident
 * block i and rotating block i, against which evaluate checks the model
 * after every pass. */
typedef struct bs_eval_hdr {
  int32_t block;
  uint32_t n_res, n_rot, pad;
} bs_eval_hdr;

/* Coordinator-only: objectives of every pass, which export checks. */
typedef struct bs_priv {
  int passes, seen;
  double *per_pass; /* passes * N_PARTIALS */
} bs_priv;

typedef struct bs_worker {
  bs_meta meta;
  int me;
} bs_worker;

/* ---- layout helpers ---------------------------------------------------- */

static size_t rot_row_bytes(int n_slots) {
  return strata_round_up(sizeof(bs_rot_row) + (size_t)n_slots * sizeof(int32_t), 8);
}

static size_t res_hdr_bytes(int n_slots) {
  return strata_round_up(sizeof(bs_res_hdr) + (size_t)n_slots * sizeof(int32_t), 8);
}

/* Rows r with r % B == i, and likewise columns. */
static uint32_t side_count(int n, int B, int i) {
  return n > i ? (uint32_t)((n - 1 - i) / B + 1) : 0;
}

static uint32_t rot_nrows(int cols, int B, int depth, int j) {
  uint32_t n = side_count(cols, B, j);
  return n < (uint32_t)depth ? (uint32_t)depth : n;
}

static bs_rot_row *rot_row(const strata_block *b, uint32_t k) {
  return (bs_rot_row *)((char *)b->buf + (size_t)k * b->row_bytes);
}

static int32_t *rot_trace(bs_rot_row *row) { return (int32_t *)(row + 1); }

static bs_res_hdr *res_hdr(const strata_block *b) { return b->buf; }

static int32_t *res_trace(const strata_block *b) { return (int32_t *)(res_hdr(b) + 1); }

static bs_res_row *res_row(const strata_block *b, int n_slots, uint32_t k) {
  return (bs_res_row *)((char *)b->buf + res_hdr_bytes(n_slots)) + k;
}

static void trace_mark(int32_t *slot, int worker) {
  *slot = *slot == 0 ? worker + 1 : TRACE_DUP;
}

/* ---- the generator ----------------------------------------------------- */

static void gen_start(strata_rng *rng, uint64_t seed) {
  strata_rng_seed(rng, strata_mix64(seed ^ 0xb10c5a11ULL));
}

static bs_triple gen_next(strata_rng *rng, const blocksum_config *cfg) {
  bs_triple t;
  t.r = (uint32_t)strata_rng_below(rng, (uint64_t)cfg->rows);
  t.c = (uint32_t)strata_rng_below(rng, (uint64_t)cfg->cols);
  t.v = (int32_t)strata_rng_below(rng, 2 * (uint64_t)cfg->max_value + 1) - cfg->max_value;
  return t;
}

/* ---- options ----------------------------------------------------------- */

#define OPT(field) offsetof(blocksum_config, field)
static const strata_option bs_options[] = {
    {.name = "rows",
     .type = STRATA_OPT_INT,
     .offset = OPT(rows),
     .def = "300",
     .metavar = "N",
     .min = 1,
     .max = 1000000,
     .help = "matrix rows (resident side)"},
    {.name = "cols",
     .type = STRATA_OPT_INT,
     .offset = OPT(cols),
     .def = "200",
     .metavar = "N",
     .min = 1,
     .max = 1000000,
     .help = "matrix columns (rotating side)"},
    {.name = "nnz",
     .type = STRATA_OPT_U64,
     .offset = OPT(nnz),
     .def = "5000",
     .metavar = "N",
     .min = 1,
     .max = 1e8,
     .help = "triples drawn from --seed (duplicates kept)"},
    {.name = "max-value",
     .type = STRATA_OPT_INT,
     .offset = OPT(max_value),
     .def = "1000",
     .metavar = "V",
     .max = 1000000,
     .help = "values are uniform integers in [-V, V]"},
    {.name = "no-eval",
     .type = STRATA_OPT_FLAG,
     .offset = OPT(no_eval),
     .help = "no evaluation after each pass (no model exchange between workers)"},
    {.name = "fault",
     .type = STRATA_OPT_CHOICE,
     .offset = OPT(fault),
     .def = "none",
     .metavar = "F",
     .choices = "none|sum|trace",
     .help = "inject an error the export checks must catch: sum (worker 0 adds 1 once), trace "
             "(worker 0 forgets one visit)"},
    {.name = NULL},
};

static int fault_code(const char *f) {
  return strcmp(f, "sum") == 0 ? FAULT_SUM : strcmp(f, "trace") == 0 ? FAULT_TRACE : FAULT_NONE;
}

static int bs_check(const void *vcfg, const strata_setup *setup) {
  const blocksum_config *cfg = vcfg;
  if (setup->strata < setup->workers)
    return strata_err_set(STRATA_EUSAGE, "--strata %d is fewer than the %d workers", setup->strata,
                          setup->workers);
  /* Each rotating row keeps one slot per (pass, sub-epoch). */
  uint64_t slots = (uint64_t)setup->passes * (uint64_t)setup->strata;
  uint64_t rows = (uint64_t)cfg->cols + (uint64_t)setup->strata * (uint64_t)setup->depth;
  if (slots > (1u << 20) || rows * (16 + 4 * slots) > ((uint64_t)1 << 30))
    return strata_err_set(STRATA_EUSAGE,
                          "--passes %d x --strata %d: the visit traces would exceed 1 GiB",
                          setup->passes, setup->strata);
  return 0;
}

/* ---- coordinator: load ------------------------------------------------- */

static void priv_free(void *p) {
  bs_priv *pv = p;
  if (!pv) return;
  strata_free(pv->per_pass);
  strata_free(pv);
}

static int cmp_entry(const void *a, const void *b) {
  const bs_entry *x = a, *y = b;
  if (x->c != y->c) return x->c < y->c ? -1 : 1;
  if (x->r != y->r) return x->r < y->r ? -1 : 1;
  return (x->v > y->v) - (x->v < y->v);
}

static int bs_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const blocksum_config *cfg = vcfg;
  int B = setup->strata, S = B, depth = setup->depth, rc = 0;
  int n_slots = setup->passes * S;
  size_t nd = (size_t)B * (size_t)B;
  bs_triple *tr = strata_malloc((size_t)cfg->nnz * sizeof *tr);
  uint32_t *count = strata_calloc(nd, sizeof *count);
  int64_t *row_true = strata_calloc((size_t)cfg->rows, sizeof *row_true);
  int64_t *col_true = strata_calloc((size_t)cfg->cols, sizeof *col_true);
  bs_meta *meta = strata_calloc(1, sizeof *meta);
  bs_priv *pv = strata_calloc(1, sizeof *pv);
  if (!tr || !count || !row_true || !col_true || !meta || !pv) goto oom;
  pv->passes = setup->passes;
  if (!(pv->per_pass = strata_calloc((size_t)setup->passes * N_PARTIALS, sizeof(double)))) goto oom;

  strata_rng rng;
  gen_start(&rng, setup->seed);
  for (uint64_t k = 0; k < cfg->nnz; k++) {
    tr[k] = gen_next(&rng, cfg);
    count[(size_t)(tr[k].r % (uint32_t)B) * (size_t)B + tr[k].c % (uint32_t)B]++;
    row_true[tr[k].r] += tr[k].v;
    col_true[tr[k].c] += tr[k].v;
  }
  if ((rc = strata_problem_alloc(prob, (int)nd, B, B, !cfg->no_eval))) goto fail;

  for (size_t d = 0; d < nd; d++) {
    strata_block *b = &prob->data[d];
    b->len = sizeof(bs_data_hdr) + (size_t)count[d] * sizeof(bs_entry);
    if (!(b->buf = strata_alloc_aligned(b->len))) goto oom;
    bs_data_hdr *h = b->buf;
    *h = (bs_data_hdr){(int32_t)(d / (size_t)B), (int32_t)(d % (size_t)B), 0, 0};
  }
  for (uint64_t k = 0; k < cfg->nnz; k++) {
    size_t d = (size_t)(tr[k].r % (uint32_t)B) * (size_t)B + tr[k].c % (uint32_t)B;
    bs_data_hdr *h = prob->data[d].buf;
    bs_entry *e = (bs_entry *)(h + 1);
    e[h->n++] = (bs_entry){tr[k].r / (uint32_t)B, tr[k].c / (uint32_t)B, tr[k].v};
  }
  for (size_t d = 0; d < nd; d++) {
    bs_data_hdr *h = prob->data[d].buf;
    qsort(h + 1, h->n, sizeof(bs_entry), cmp_entry);
  }

  for (int i = 0; i < B; i++) {
    strata_block *b = &prob->resident[i];
    b->nrows = side_count(cfg->rows, B, i);
    b->len = res_hdr_bytes(n_slots) + (size_t)b->nrows * sizeof(bs_res_row);
    if (!(b->buf = strata_alloc_aligned(b->len))) goto oom;
    memset(b->buf, 0, b->len);
    *res_hdr(b) = (bs_res_hdr){i, b->nrows};
    for (uint32_t k = 0; k < b->nrows; k++)
      *res_row(b, n_slots, k) = (bs_res_row){0, (int32_t)(k * (uint32_t)B) + i, i};
  }
  for (int j = 0; j < B; j++) {
    strata_block *b = &prob->rotating[j];
    uint32_t real = side_count(cfg->cols, B, j);
    b->nrows = rot_nrows(cfg->cols, B, depth, j);
    b->row_bytes = (uint32_t)rot_row_bytes(n_slots);
    b->len = (size_t)b->nrows * b->row_bytes;
    if (!(b->buf = strata_alloc_aligned(b->len))) goto oom;
    memset(b->buf, 0, b->len);
    for (uint32_t k = 0; k < b->nrows; k++)
      *rot_row(b, k) = (bs_rot_row){0, k < real ? (int32_t)(k * (uint32_t)B) + j : -1, j};
  }

  for (int i = 0; i < B && !cfg->no_eval; i++) {
    const strata_block *rb = &prob->resident[i], *cb = &prob->rotating[i];
    strata_block *e = &prob->eval[(size_t)i * (size_t)B + (size_t)i];
    e->len = sizeof(bs_eval_hdr) + ((size_t)rb->nrows + cb->nrows) * sizeof(int64_t);
    if (!(e->buf = strata_alloc_aligned(e->len))) goto oom;
    bs_eval_hdr *h = e->buf;
    *h = (bs_eval_hdr){i, rb->nrows, cb->nrows, 0};
    int64_t *want = (int64_t *)(h + 1);
    for (uint32_t k = 0; k < rb->nrows; k++) want[k] = row_true[k * (uint32_t)B + (uint32_t)i];
    for (uint32_t k = 0; k < cb->nrows; k++)
      want[rb->nrows + k] = rot_row(cb, k)->col >= 0 ? col_true[rot_row(cb, k)->col] : 0;
  }

  *meta = (bs_meta){.B = B,
                    .subepochs = S,
                    .passes = setup->passes,
                    .n_slots = n_slots,
                    .rows = cfg->rows,
                    .cols = cfg->cols,
                    .fault = fault_code(cfg->fault)};
  prob->meta = meta;
  prob->meta_len = sizeof *meta;
  prob->n_examples = cfg->nnz;
  prob->priv = pv;
  prob->priv_free = priv_free;
  meta = NULL;
  pv = NULL;
  goto done;
oom:
  rc = strata_err_set(STRATA_ENOMEM, "blocksum: out of memory");
fail:
  strata_problem_close(prob);
done:
  strata_free(tr);
  strata_free(count);
  strata_free(row_true);
  strata_free(col_true);
  strata_free(meta);
  priv_free(pv);
  return rc;
}

static int bs_schedule(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                       strata_schedule *sched) {
  return strata_schedule_diagonal(sched, setup->workers, setup->strata);
}

/* ---- workers ----------------------------------------------------------- */

static int bs_worker_init(const void *cfg, const strata_setup *setup, const void *meta,
                          size_t meta_len, void **state) {
  if (meta_len != sizeof(bs_meta))
    return strata_err_set(STRATA_ECOMM, "blocksum: meta of %zu bytes, expected %zu", meta_len,
                          sizeof(bs_meta));
  bs_worker *w = strata_calloc(1, sizeof *w);
  if (!w) return strata_err_set(STRATA_ENOMEM, "blocksum: out of memory");
  memcpy(&w->meta, meta, sizeof w->meta);
  w->me = setup->worker;
  *state = w;
  return 0;
}

static void bs_worker_free(void *state) { strata_free(state); }

static uint32_t lower_col(const bs_entry *e, uint32_t n, uint32_t c) {
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (e[mid].c < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static int bs_compute(void *state, const strata_task_view *tv, double *partials) {
  const bs_worker *w = state;
  const bs_meta *m = &w->meta;
  int slot = tv->pass * m->subepochs + tv->subepoch;
  int B = m->B, i = tv->ids.resident, j = tv->ids.rotating;
  strata_block *res = tv->resident, *rot = tv->rotating;
  double bad = 0;
  if (tv->pass >= m->passes || tv->subepoch >= m->subepochs)
    return strata_err_set(STRATA_EINVAL, "blocksum: task of pass %d sub-epoch %d is out of range",
                          tv->pass, tv->subepoch);

  /* The blocks handed over must be the ones the task names, and each row
   * of the chunk must belong where it landed: a chunk delivered into the
   * wrong block or at the wrong offset shows up here. */
  const bs_data_hdr *h = tv->data->buf;
  if (!h || h->bi != i || h->bj != j || tv->ids.data != i * B + j) {
    partials[P_BAD] += 1;
    return 0;
  }
  uint32_t real = side_count(m->cols, B, j);
  int skip_trace = m->fault == FAULT_TRACE && w->me == 0 && tv->pass == 0 && tv->chunk == 0 &&
                   slot == 0;
  for (uint32_t k = tv->row_lo; k < tv->row_hi; k++) {
    bs_rot_row *row = rot_row(rot, k);
    int32_t want = k < real ? (int32_t)(k * (uint32_t)B) + j : -1;
    if (row->block != j || row->col != want) bad++;
    if (!skip_trace) trace_mark(&rot_trace(row)[slot], w->me);
  }
  if (tv->chunk == 0) {
    if (res_hdr(res)->block != i || res_hdr(res)->nrows != res->nrows) bad++;
    trace_mark(&res_trace(res)[slot], w->me);
  }

  const bs_entry *e = (const bs_entry *)(h + 1);
  uint32_t lo = lower_col(e, h->n, tv->row_lo), hi = lower_col(e, h->n, tv->row_hi);
  int64_t sum = 0;
  for (uint32_t x = lo; x < hi; x++) {
    if (e[x].r >= res->nrows) {
      bad++;
      continue;
    }
    res_row(res, m->n_slots, e[x].r)->sum += e[x].v;
    rot_row(rot, e[x].c)->sum += e[x].v;
    sum += e[x].v;
  }
  if (m->fault == FAULT_SUM && w->me == 0 && tv->pass == 0 && tv->chunk == 0 && slot == 0)
    rot_row(rot, tv->row_lo)->sum += 1;
  partials[P_SUM] += (double)sum;
  partials[P_TRIPLES] += (double)(hi - lo);
  partials[P_BAD] += bad;
  return 0;
}

/* After pass p the whole model must hold (p + 1) x the true sums, and the
 * traces must show every slot of passes 0..p visited once and none later. */
static int bs_evaluate(void *state, const strata_task_view *tv, double *partials) {
  const bs_worker *w = state;
  const bs_meta *m = &w->meta;
  const bs_eval_hdr *h = tv->data->buf;
  const strata_block *res = tv->resident, *rot = tv->rotating;
  double errors = 0;
  int64_t times = tv->pass + 1;
  int done_slots = (tv->pass + 1) * m->subepochs;
  if (h->block != tv->ids.resident || h->block != tv->ids.rotating || h->n_res != res->nrows ||
      h->n_rot != rot->nrows) {
    partials[P_EVAL_ERR] += 1;
    partials[P_EVAL_CHECKS] += 1;
    return 0;
  }
  const int64_t *want = (const int64_t *)(h + 1);
  for (uint32_t k = 0; k < h->n_res; k++)
    errors += res_row(res, m->n_slots, k)->sum != times * want[k];
  for (uint32_t k = 0; k < h->n_rot; k++) {
    bs_rot_row *row = rot_row(rot, k);
    errors += row->sum != times * want[h->n_res + k];
    const int32_t *t = rot_trace(row);
    for (int s = 0; s < m->n_slots; s++) errors += s < done_slots ? t[s] <= 0 : t[s] != 0;
  }
  const int32_t *t = res_trace(res);
  for (int s = 0; s < m->n_slots; s++) errors += s < done_slots ? t[s] <= 0 : t[s] != 0;
  partials[P_EVAL_ERR] += errors;
  partials[P_EVAL_CHECKS] += 1;
  return 0;
}

/* ---- coordinator: objectives, describe --------------------------------- */

/* Besides deriving the values, keeps each pass's for export's checks: the
 * coordinator-only priv is the app's own state (prob is const, its priv is
 * not). */
static void bs_objectives(const void *cfg, const strata_problem *prob, const double *partials,
                          double *values) {
  for (int i = 0; i < N_PARTIALS; i++) values[i] = partials[i];
  bs_priv *pv = prob->priv;
  if (pv && pv->seen < pv->passes)
    memcpy(pv->per_pass + (size_t)pv->seen++ * N_PARTIALS, partials, N_PARTIALS * sizeof(double));
}

static void bs_describe(const void *vcfg, const strata_problem *prob, strata_json *j) {
  const blocksum_config *cfg = vcfg;
  strata_json_int(j, "rows", cfg->rows);
  strata_json_int(j, "cols", cfg->cols);
  strata_json_int(j, "nnz", (int64_t)cfg->nnz);
  strata_json_int(j, "max_value", cfg->max_value);
  strata_json_bool(j, "eval", !cfg->no_eval);
  strata_json_string(j, "fault", cfg->fault);
}

/* ---- coordinator: export and its checks -------------------------------- */

#define MAX_CHECKS 16

typedef struct check {
  const char *name;
  const char *what;
  int applicable;
  uint64_t tested, failed;
  char first[256];
} check;

typedef struct report {
  const blocksum_config *cfg;
  const strata_setup *setup;
  const strata_problem *prob;
  const bs_meta *meta;
  check checks[MAX_CHECKS];
  int n_checks, n_failed;
} report;

static check *check_new(report *rp, const char *name, const char *what, int applicable) {
  check *c = &rp->checks[rp->n_checks++];
  memset(c, 0, sizeof *c);
  c->name = name;
  c->what = what;
  c->applicable = applicable;
  return c;
}

/* Counts one test of c; on a failure keeps the first message. */
static void check_that(check *c, int ok, const char *fmt, ...) STRATA_PRINTF(3, 4);
static void check_that(check *c, int ok, const char *fmt, ...) {
  c->tested++;
  if (ok) return;
  if (c->failed++ == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->first, sizeof c->first, fmt, ap);
    va_end(ap);
  }
}

/* Worker recorded in a trace slot, -1 when unvisited, -2 when visited twice. */
static int slot_worker(int32_t v) { return v > 0 ? v - 1 : v == 0 ? -1 : -2; }

static void check_sums(report *rp, const int64_t *row_true, const int64_t *col_true) {
  const bs_meta *m = rp->meta;
  const strata_problem *p = rp->prob;
  int B = m->B;
  int64_t N = m->passes;
  check *c = check_new(rp, "row_sums", "every row accumulator = passes x its true sum", 1);
  for (int i = 0; i < B; i++)
    check_that(c, res_hdr(&p->resident[i])->block == i, "resident block %d carries id %d", i,
               res_hdr(&p->resident[i])->block);
  for (int r = 0; r < m->rows; r++) {
    const bs_res_row *row = res_row(&p->resident[r % B], m->n_slots, (uint32_t)(r / B));
    check_that(c, row->row == r && row->sum == N * row_true[r],
               "row %d: accumulator %" PRId64 " (row id %d), expected %" PRId64 " = %" PRId64
               " x %" PRId64,
               r, row->sum, row->row, N * row_true[r], N, row_true[r]);
  }
  c = check_new(rp, "col_sums", "every column accumulator = passes x its true sum", 1);
  for (int j = 0; j < B; j++) {
    const strata_block *b = &p->rotating[j];
    uint32_t real = side_count(m->cols, B, j);
    for (uint32_t k = 0; k < b->nrows; k++) {
      const bs_rot_row *row = rot_row(b, k);
      int32_t col = k < real ? (int32_t)(k * (uint32_t)B) + j : -1;
      int64_t want = col >= 0 ? N * col_true[col] : 0;
      check_that(c, row->block == j && row->col == col && row->sum == want,
                 "rotating block %d row %u (column %d): accumulator %" PRId64
                 " (ids %d/%d), expected %" PRId64,
                 j, k, col, row->sum, row->block, row->col, want);
    }
  }
}

static void check_passes(report *rp, int64_t total) {
  const bs_meta *m = rp->meta;
  const bs_priv *pv = rp->prob->priv;
  check *c = check_new(rp, "pass_totals",
                       "each pass processed every triple once (sum and count over workers)", 1);
  check_that(c, pv->seen == m->passes, "objectives seen for %d passes, expected %d", pv->seen,
             m->passes);
  for (int p = 0; p < pv->seen; p++) {
    const double *o = pv->per_pass + (size_t)p * N_PARTIALS;
    check_that(c, o[P_SUM] == (double)total && o[P_TRIPLES] == (double)rp->cfg->nnz,
               "pass %d: sum %.0f over %.0f triples, expected %" PRId64 " over %" PRIu64, p + 1,
               o[P_SUM], o[P_TRIPLES], total, rp->cfg->nnz);
  }
  c = check_new(rp, "block_integrity",
                "compute always got the blocks its task named, rows at their offsets", 1);
  for (int p = 0; p < pv->seen; p++) {
    const double *o = pv->per_pass + (size_t)p * N_PARTIALS;
    check_that(c, o[P_BAD] == 0, "pass %d: %.0f misplaced rows or mismatched blocks", p + 1,
               o[P_BAD]);
  }
  c = check_new(rp, "evaluation",
                "after each pass every worker's copy of the model held the exact sums and traces",
                !rp->cfg->no_eval);
  for (int p = 0; p < pv->seen && c->applicable; p++) {
    const double *o = pv->per_pass + (size_t)p * N_PARTIALS;
    check_that(c, o[P_EVAL_ERR] == 0 && o[P_EVAL_CHECKS] == m->B,
               "pass %d: %.0f errors in %.0f evaluated blocks (expected 0 in %d)", p + 1,
               o[P_EVAL_ERR], o[P_EVAL_CHECKS], m->B);
  }
}

static void check_traces(report *rp, const strata_schedule *sched) {
  const bs_meta *m = rp->meta;
  const strata_problem *p = rp->prob;
  int B = m->B, S = m->subepochs, P = rp->setup->workers;
  check *once = check_new(rp, "visits_once",
                          "(b) in every pass every rotating block (each of its rows) was held "
                          "exactly once in every sub-epoch, by the worker the schedule names",
                          1);
  check *perm = check_new(rp, "every_worker_once",
                          "(c) B == P: in every pass each block visited every worker exactly once",
                          B == P);
  check *home = check_new(rp, "returns_home",
                          "(d) each block is held by the same worker at sub-epoch 0 of every pass",
                          1);
  check *cover = check_new(rp, "every_worker_visited",
                           "(e) B > P: in every pass each block visited every worker", B > P);
  check *res = check_new(rp, "resident_stays",
                         "each resident block was used once per sub-epoch, always by its owner", 1);
  int *seen = strata_calloc((size_t)P, sizeof *seen);
  if (!seen) {
    check_that(once, 0, "out of memory");
    return;
  }
  for (int j = 0; j < B; j++) {
    const strata_block *b = &p->rotating[j];
    for (uint32_t k = 0; k < b->nrows; k++) {
      const int32_t *t = rot_trace(rot_row(b, k));
      for (int pass = 0; pass < m->passes; pass++)
        for (int s = 0; s < S; s++) {
          int got = slot_worker(t[pass * S + s]);
          int want = strata_schedule_rotating_holder(sched, j, s);
          check_that(once, got == want && got >= 0,
                     "block %d row %u, pass %d sub-epoch %d: held by %s%d, expected worker %d", j,
                     k, pass + 1, s, got == -1 ? "nobody " : got == -2 ? "more than one " : "worker ",
                     got, want);
        }
    }
    /* (c)-(e) read the trace of row 0, which travels in chunk 0. */
    const int32_t *t = rot_trace(rot_row(b, 0));
    int home0 = slot_worker(t[0]);
    for (int pass = 0; pass < m->passes; pass++) {
      memset(seen, 0, (size_t)P * sizeof *seen);
      for (int s = 0; s < S; s++) {
        int w = slot_worker(t[pass * S + s]);
        if (w >= 0 && w < P) seen[w]++;
      }
      for (int w = 0; w < P; w++) {
        if (perm->applicable)
          check_that(perm, seen[w] == 1, "block %d, pass %d: worker %d held it %d times", j,
                     pass + 1, w, seen[w]);
        if (cover->applicable)
          check_that(cover, seen[w] >= 1, "block %d, pass %d: never visited worker %d", j,
                     pass + 1, w);
      }
      int h = slot_worker(t[pass * S]);
      check_that(home, h >= 0 && h == home0,
                 "block %d: at sub-epoch 0 of pass %d held by %d, of pass 1 by %d", j, pass + 1, h,
                 home0);
    }
  }
  for (int i = 0; i < B; i++) {
    const int32_t *t = res_trace(&p->resident[i]);
    int owner = strata_schedule_resident_owner(sched, i);
    for (int s = 0; s < m->n_slots; s++)
      check_that(res, slot_worker(t[s]) == owner,
                 "resident block %d, pass %d sub-epoch %d: used by %d, owner %d", i, s / S + 1,
                 s % S, slot_worker(t[s]), owner);
  }
  strata_free(seen);
}

static int fill_report(FILE *f, void *ud) {
  const report *rp = ud;
  const bs_meta *m = rp->meta;
  const strata_problem *p = rp->prob;
  int S = m->subepochs;
  strata_json j;
  strata_json_init(&j, f);
  strata_json_object_begin(&j, NULL);
  strata_json_string(&j, "app", "blocksum");
  strata_json_string(&j, "mode", strata_mode_name(rp->setup->mode));
  strata_json_int(&j, "workers", rp->setup->workers);
  strata_json_int(&j, "strata", m->B);
  strata_json_int(&j, "depth", rp->setup->depth);
  strata_json_int(&j, "passes", m->passes);
  strata_json_int(&j, "seed", (int64_t)rp->setup->seed);
  strata_json_bool(&j, "ok", rp->n_failed == 0);
  strata_json_int(&j, "checks_failed", rp->n_failed);
  strata_json_array_begin(&j, "checks");
  for (int i = 0; i < rp->n_checks; i++) {
    const check *c = &rp->checks[i];
    strata_json_object_begin(&j, NULL);
    strata_json_string(&j, "name", c->name);
    strata_json_string(&j, "what", c->what);
    strata_json_bool(&j, "applicable", c->applicable);
    strata_json_bool(&j, "ok", c->failed == 0);
    strata_json_int(&j, "tested", (int64_t)c->tested);
    strata_json_int(&j, "failed", (int64_t)c->failed);
    if (c->failed) strata_json_string(&j, "first_failure", c->first);
    strata_json_object_end(&j);
  }
  strata_json_array_end(&j);
  /* visits[block][pass][sub-epoch] = worker, from the trace of row 0. */
  strata_json_array_begin(&j, "visits");
  for (int b = 0; b < m->B; b++) {
    const int32_t *t = rot_trace(rot_row(&p->rotating[b], 0));
    strata_json_array_begin(&j, NULL);
    for (int pass = 0; pass < m->passes; pass++) {
      strata_json_array_begin(&j, NULL);
      for (int s = 0; s < S; s++) strata_json_int(&j, NULL, slot_worker(t[pass * S + s]));
      strata_json_array_end(&j);
    }
    strata_json_array_end(&j);
  }
  strata_json_array_end(&j);
  strata_json_object_end(&j);
  fputc('\n', f);
  return 0;
}

static int bs_export(const void *vcfg, const strata_setup *setup, const strata_problem *prob,
                     const char *dir) {
  const blocksum_config *cfg = vcfg;
  const bs_meta *m = prob->meta;
  report rp = {.cfg = cfg, .setup = setup, .prob = prob, .meta = m};
  strata_schedule sched;
  memset(&sched, 0, sizeof sched);
  int64_t *row_true = strata_calloc((size_t)cfg->rows, sizeof *row_true);
  int64_t *col_true = strata_calloc((size_t)cfg->cols, sizeof *col_true);
  int rc = 0;
  if (!row_true || !col_true) {
    rc = strata_err_set(STRATA_ENOMEM, "blocksum: out of memory");
    goto done;
  }
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    rc = strata_err_set(STRATA_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
    goto done;
  }
  /* The truth comes from the generator again, not from the blocks. */
  strata_rng rng;
  gen_start(&rng, setup->seed);
  int64_t total = 0;
  for (uint64_t k = 0; k < cfg->nnz; k++) {
    bs_triple t = gen_next(&rng, cfg);
    row_true[t.r] += t.v;
    col_true[t.c] += t.v;
    total += t.v;
  }
  if ((rc = strata_schedule_diagonal(&sched, setup->workers, m->B))) goto done;

  check_sums(&rp, row_true, col_true);
  check_passes(&rp, total);
  check_traces(&rp, &sched);
  const check *first = NULL;
  for (int i = 0; i < rp.n_checks; i++)
    if (rp.checks[i].failed && !rp.n_failed++) first = &rp.checks[i];

  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, BLOCKSUM_REPORT) >= (int)sizeof path) {
    rc = strata_err_set(STRATA_EINVAL, "%s: path too long", dir);
    goto done;
  }
  if ((rc = strata_write_atomic(path, fill_report, &rp))) goto done;
  if (first)
    rc = strata_err_set(STRATA_EINVAL,
                        "blocksum: %d of %d checks failed, first %s: %s (%llu of %llu); see %s",
                        rp.n_failed, rp.n_checks, first->name, first->first,
                        (unsigned long long)first->failed, (unsigned long long)first->tested, path);
done:
  strata_schedule_close(&sched);
  strata_free(row_true);
  strata_free(col_true);
  return rc;
}

const strata_app blocksum_app = {
    .name = "blocksum",
    .summary = "integer row and column sums of a sparse matrix, checking how blocks travel",
    .examples = "  mpirun -np 4 strata_blocksum --passes 3 --depth 2 --model-out out/\n"
                "  mpirun -np 3 strata_blocksum --strata 5 --depth 3 --passes 3 --model-out out/\n"
                "  strata_blocksum --mode serial --strata 3 --model-out out/\n",
    .options = bs_options,
    .defaults = {.passes = 3,
                 .depth = 2,
                 .model_out_help = "check the final blocks and write " BLOCKSUM_REPORT
                                   " into this directory"},
    .config_size = sizeof(blocksum_config),
    .check = bs_check,
    .n_partials = N_PARTIALS,
    .n_objectives = N_PARTIALS,
    .objective_names = bs_objective_names,
    .load = bs_load,
    .schedule = bs_schedule,
    .worker_init = bs_worker_init,
    .worker_free = bs_worker_free,
    .compute = bs_compute,
    .evaluate = bs_evaluate,
    .objectives = bs_objectives,
    .describe = bs_describe,
    .export_model = bs_export,
};
