/*
 * strata_failapp: two tiny apps whose callbacks fail on purpose, so that a
 * test can check how a failure on one worker ends the job (strata/main.h:
 * rank 0 prints that worker's message once, every rank exits with one
 * code, in every mode).
 *
 *   sum  an additive app (scheduled, serial, bsp, absp, ssp, essp, async):
 *        float rows on the diagonal schedule; compute adds 1 to each row of
 *        its chunk, evaluate and block_objective add up what they see.
 *   sf   a sufficient-factor app (sfb, serial, the table modes): one factor
 *        per example, a clock_end step that does nothing.
 *
 * --fail-worker W --fail-pass N --fail-in CALLBACK makes worker W fail in
 * CALLBACK during pass N (1-based) with "CALLBACK failed at pass N
 * (injected)", as STRATA_EINVAL (exit code 1) or, with --fail-code
 * diverged, STRATA_EDIVERGED (exit code 3). --fail-in alloc instead makes
 * the next allocation of the engine on that worker fail once compute has
 * run (an engine failure, out of memory, rather than the app's), and
 * --fail-in coordinator the next one on rank 0 once pass N is summed.
 * --fail-in hang makes compute spin forever instead: a worker stuck in its
 * own code, which only the liveness watch (comm/live.h) can end.
 */
#include <stddef.h>
#include <string.h>

#include "strata/core.h"
#include "strata/main.h"
#include "strata/sf.h"

typedef struct fail_config {
  int rows, width, samples, minibatch;
  int fail_worker, fail_pass;
  const char *fail_in, *fail_code;
} fail_config;

#define OPT(f) offsetof(fail_config, f)
static const strata_option fail_options[] = {
    {.name = "rows",
     .type = STRATA_OPT_INT,
     .offset = OPT(rows),
     .def = "64",
     .metavar = "N",
     .min = 1,
     .max = 100000,
     .help = "sum: rows of each side (resident and rotating)"},
    {.name = "width",
     .type = STRATA_OPT_INT,
     .offset = OPT(width),
     .def = "4",
     .metavar = "L",
     .min = 1,
     .max = 1024,
     .help = "floats per parameter row"},
    {.name = "samples",
     .type = STRATA_OPT_INT,
     .offset = OPT(samples),
     .def = "240",
     .metavar = "N",
     .min = 1,
     .max = 1000000,
     .help = "sf: examples"},
    {.name = "minibatch",
     .type = STRATA_OPT_INT,
     .offset = OPT(minibatch),
     .def = "20",
     .metavar = "K",
     .min = 1,
     .max = 100000,
     .help = "sf: examples per worker per clock"},
    {.name = "fail-worker",
     .type = STRATA_OPT_INT,
     .offset = OPT(fail_worker),
     .def = "-1",
     .metavar = "W",
     .min = -2,
     .max = 100000,
     .help = "the worker that fails (-1: none, -2: every worker)"},
    {.name = "fail-pass",
     .type = STRATA_OPT_INT,
     .offset = OPT(fail_pass),
     .def = "1",
     .metavar = "N",
     .min = 1,
     .max = 1000000,
     .help = "the pass it fails in (1-based)"},
    {.name = "fail-in",
     .type = STRATA_OPT_CHOICE,
     .offset = OPT(fail_in),
     .def = "compute",
     .metavar = "CALLBACK",
     .choices = "compute|evaluate|worker_init|block_objective|clock_end|alloc|coordinator|hang",
     .help = "where it fails (alloc: the engine's next allocation after compute; coordinator: "
             "rank 0's next allocation once pass N is summed, whatever --fail-worker says; hang: "
             "compute spins forever)"},
    {.name = "fail-code",
     .type = STRATA_OPT_CHOICE,
     .offset = OPT(fail_code),
     .def = "runtime",
     .metavar = "CODE",
     .choices = "runtime|diverged",
     .help = "runtime: STRATA_EINVAL (exit code 1); diverged: STRATA_EDIVERGED (3)"},
    {.name = NULL},
};

typedef struct fail_worker {
  const fail_config *cfg;
  int me;
  int alloc_armed; /* --fail-in alloc: the allocation failure is set up */
} fail_worker;

/* Whether `where` fails on this worker in pass `pass` (0-based); if so
 * returns the error, with its message. */
static int injected(const fail_config *cfg, int me, const char *where, int pass) {
  if ((me != cfg->fail_worker && cfg->fail_worker != -2) || strcmp(cfg->fail_in, where) != 0 ||
      pass + 1 != cfg->fail_pass)
    return 0;
  int code = strcmp(cfg->fail_code, "diverged") == 0 ? STRATA_EDIVERGED : STRATA_EINVAL;
  return strata_err_set(code, "%s failed at pass %d (injected)", where, pass + 1);
}

static int fail_check(const void *vcfg, const strata_setup *setup) {
  const fail_config *cfg = vcfg;
  if (cfg->fail_worker >= setup->workers)
    return strata_err_set(STRATA_EUSAGE, "--fail-worker %d: there are %d workers", cfg->fail_worker,
                          setup->workers);
  if (cfg->fail_pass > setup->passes)
    return strata_err_set(STRATA_EUSAGE, "--fail-pass %d: the run has %d passes", cfg->fail_pass,
                          setup->passes);
  return 0;
}

static int fail_worker_init(const void *vcfg, const strata_setup *setup, const void *meta,
                            size_t meta_len, void **state) {
  (void)meta, (void)meta_len;
  const fail_config *cfg = vcfg;
  /* worker_init runs before pass 1. */
  int rc = injected(cfg, setup->worker, "worker_init", 0);
  if (rc) return rc;
  fail_worker *w = strata_calloc(1, sizeof *w);
  if (!w) return strata_err_set(STRATA_ENOMEM, "failapp: out of memory");
  w->cfg = cfg;
  w->me = setup->worker;
  *state = w;
  return 0;
}

static void fail_worker_free(void *state) { strata_free(state); }

/* compute's injections: its own failure, or the engine's next allocation. */
static int compute_fails(fail_worker *w, int pass) {
  const fail_config *cfg = w->cfg;
  if ((w->me == cfg->fail_worker || cfg->fail_worker == -2) && pass + 1 == cfg->fail_pass &&
      !w->alloc_armed &&
      strcmp(cfg->fail_in, "alloc") == 0) {
    w->alloc_armed = 1;
    strata_alloc_fail_after(1);
  }
  if (w->me == cfg->fail_worker && pass + 1 == cfg->fail_pass && strcmp(cfg->fail_in, "hang") == 0)
    for (volatile int spin = 1; spin;) {
    }
  return injected(cfg, w->me, "compute", pass);
}

static int fail_block_objective(void *state, int pass, strata_block_kind kind, int id,
                                const strata_block *b, double *partials) {
  fail_worker *w = state;
  (void)kind, (void)id;
  int rc = injected(w->cfg, w->me, "block_objective", pass);
  if (rc) return rc;
  const float *v = b->buf;
  for (size_t i = 0; i < b->len / sizeof(float); i++) partials[2] += v[i];
  return 0;
}

static const char *const fail_objective_names[] = {"total"};

/* Rank 0 sums every pass in order, calling this once per pass. */
static void fail_objectives(const void *vcfg, const strata_problem *prob, const double *p,
                            double *values) {
  const fail_config *cfg = vcfg;
  static int passes_summed;
  (void)prob;
  values[0] = p[0];
  if (++passes_summed == cfg->fail_pass && strcmp(cfg->fail_in, "coordinator") == 0)
    strata_alloc_fail_after(1);
}

/* ---- sum ---------------------------------------------------------------- */

/* The block of rows r with r % B == i, padded to at least `depth` rows so
 * that every pipeline chunk has some. */
static int sum_block(strata_block *b, int rows, int B, int i, int depth, int width) {
  uint32_t n = rows > i ? (uint32_t)((rows - 1 - i) / B + 1) : 0;
  if (n < (uint32_t)depth) n = (uint32_t)depth;
  b->nrows = n;
  b->row_bytes = (uint32_t)width * sizeof(float);
  b->len = (size_t)n * b->row_bytes;
  if (!(b->buf = strata_alloc_aligned(b->len)))
    return strata_err_set(STRATA_ENOMEM, "failapp: out of memory");
  memset(b->buf, 0, b->len);
  return 0;
}

static int sum_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const fail_config *cfg = vcfg;
  int B = setup->strata, rc = strata_problem_alloc(prob, B * B, B, B, 1);
  for (int i = 0; i < B * B && !rc; i++) {
    /* Data and eval blocks name their task: (resident, rotating). */
    strata_block *blocks[2] = {&prob->data[i], &prob->eval[i]};
    for (int k = 0; k < 2 && !rc; k++) {
      blocks[k]->len = 2 * sizeof(int32_t);
      if (!(blocks[k]->buf = strata_alloc_aligned(blocks[k]->len))) {
        rc = strata_err_set(STRATA_ENOMEM, "failapp: out of memory");
        break;
      }
      int32_t *ids = blocks[k]->buf;
      ids[0] = i / B;
      ids[1] = i % B;
    }
  }
  for (int i = 0; i < B && !rc; i++) {
    rc = sum_block(&prob->resident[i], cfg->rows, B, i, 1, cfg->width);
    prob->resident[i].row_bytes = 0; /* rows are the rotating blocks' notion */
    if (!rc) rc = sum_block(&prob->rotating[i], cfg->rows, B, i, setup->depth, cfg->width);
  }
  if (rc) {
    strata_problem_close(prob);
    return rc;
  }
  prob->n_examples = (uint64_t)cfg->rows;
  return 0;
}

static int sum_schedule(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                        strata_schedule *sched) {
  (void)cfg, (void)prob;
  return strata_schedule_diagonal(sched, setup->workers, setup->strata);
}

static int sum_compute(void *state, const strata_task_view *tv, double *partials) {
  fail_worker *w = state;
  int rc = compute_fails(w, tv->pass);
  if (rc) return rc;
  size_t L = tv->rotating->row_bytes / sizeof(float);
  float *rows = (float *)tv->rotating->buf + (size_t)tv->row_lo * L;
  for (size_t x = 0; x < (size_t)(tv->row_hi - tv->row_lo) * L; x++) rows[x] += 1;
  partials[0] += tv->row_hi - tv->row_lo;
  return 0;
}

static int sum_evaluate(void *state, const strata_task_view *tv, double *partials) {
  fail_worker *w = state;
  int rc = injected(w->cfg, w->me, "evaluate", tv->pass);
  if (rc) return rc;
  const float *v = tv->rotating->buf;
  partials[1] += v[0];
  return 0;
}

static const strata_app sum_app = {
    .name = "sum",
    .flags = STRATA_APP_ADDITIVE,
    .summary = "adds 1 to float rows; fails where told (--fail-*)",
    .examples = "  mpirun -np 4 strata_failapp sum --mode ssp --fail-worker 2 --fail-pass 2\n",
    .options = fail_options,
    .config_size = sizeof(fail_config),
    .check = fail_check,
    .defaults = {.passes = 3, .depth = 2},
    .n_partials = 3,
    .n_objectives = 1,
    .objective_names = fail_objective_names,
    .load = sum_load,
    .schedule = sum_schedule,
    .worker_init = fail_worker_init,
    .worker_free = fail_worker_free,
    .compute = sum_compute,
    .evaluate = sum_evaluate,
    .block_objective = fail_block_objective,
    .objectives = fail_objectives,
};

/* ---- sf ----------------------------------------------------------------- */

/* A data block: the number of examples; example i's factor is u = 1/(i+1)
 * on every output, v = e_(i mod D). */
typedef struct sf_block {
  uint32_t first, n;
} sf_block;

static int sf_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const fail_config *cfg = vcfg;
  int P = setup->workers;
  uint32_t K = (uint32_t)cfg->minibatch;
  uint64_t n = (uint64_t)cfg->samples, C = strata_sf_clocks(n, P, K);
  int rc = strata_problem_alloc(prob, (int)(P * C), P, 1, 0);
  for (uint64_t c = 0; c < C && !rc; c++)
    for (int p = 0; p < P && !rc; p++) {
      uint64_t lo, hi;
      strata_sf_batch(n, P, K, c, p, &lo, &hi);
      strata_block *b = &prob->data[c * (uint64_t)P + (uint64_t)p];
      b->len = sizeof(sf_block);
      if (!(b->buf = strata_alloc_aligned(b->len))) {
        rc = strata_err_set(STRATA_ENOMEM, "failapp: out of memory");
        break;
      }
      *(sf_block *)b->buf = (sf_block){(uint32_t)lo, (uint32_t)(hi - lo)};
    }
  if (!rc) rc = sum_block(&prob->rotating[0], cfg->rows, 1, 0, 1, cfg->width);
  if (rc) {
    strata_problem_close(prob);
    return rc;
  }
  prob->n_examples = n;
  return 0;
}

static int sf_compute(void *state, const strata_task_view *tv, double *partials) {
  fail_worker *w = state;
  int rc = compute_fails(w, tv->pass);
  if (rc) return rc;
  const sf_block *h = tv->data->buf;
  uint32_t J = tv->rotating->row_bytes / sizeof(float), D = tv->rotating->nrows;
  float u[1024];
  for (uint32_t i = h->first; i < h->first + h->n && !rc; i++) {
    for (uint32_t j = 0; j < J; j++) u[j] = 1.0f / (float)(i + 1);
    uint32_t idx = i % D;
    float one = 1;
    rc = strata_sf_emit(tv->factors, 1e-3f, u, &idx, &one, 1);
    partials[0] += 1;
  }
  return rc;
}

static int sf_clock_end(void *state, strata_block *W, const strata_sf_clock *ck) {
  fail_worker *w = state;
  (void)W;
  return injected(w->cfg, w->me, "clock_end", ck->pass);
}

static const strata_sf_ops sf_ops = {.apply = NULL, .clock_end = sf_clock_end};

static const strata_app sf_app = {
    .name = "sf",
    .flags = STRATA_APP_ADDITIVE,
    .summary = "a sufficient-factor app; fails where told (--fail-*)",
    .examples = "  mpirun -np 4 strata_failapp sf --mode sfb --fail-worker 2 --fail-pass 2\n",
    .options = fail_options,
    .config_size = sizeof(fail_config),
    .check = fail_check,
    .defaults = {.passes = 3, .depth = 1},
    .n_partials = 3,
    .n_objectives = 1,
    .objective_names = fail_objective_names,
    .load = sf_load,
    .schedule = strata_sf_schedule,
    .worker_init = fail_worker_init,
    .worker_free = fail_worker_free,
    .compute = sf_compute,
    .block_objective = fail_block_objective,
    .objectives = fail_objectives,
    .sf = &sf_ops,
};

int main(int argc, char **argv) {
  const strata_app *apps[] = {&sum_app, &sf_app};
  strata_program p = {.name = "strata_failapp", .apps = apps, .n_apps = 2};
  return strata_program_main(&p, argc, argv);
}
