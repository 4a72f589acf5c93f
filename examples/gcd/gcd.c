/*
 * gcd: greedy coordinate descent on least squares, the smallest round app
 * (strata/round.h). min over beta of F = |y - X beta|^2 / (2N), X dense.
 *
 * The rows of X are cut into shards (data blocks); each shard keeps its
 * residual r = y - X beta (its resident block). The coordinator keeps beta
 * and each column's squared norm (its coordinator block). Every round:
 *   schedule_round: every worker is asked for the gradient (all ids);
 *   push:           a shard's X_d^T r_d;
 *   pull:           g = X^T r, summed over the shards in block order; the
 *                   coordinate j with the largest |g_j| / |x_j| (the
 *                   Gauss-Southwell rule) moves to its exact minimum,
 *                   beta_j += g_j / |x_j|^2, and (j, step) goes out;
 *   apply:          each shard's r_d -= x_j(d) step.
 * One round reads every row once: a round is a pass. With --tol X the run
 * ends once the largest |g_j| / (|x_j| sqrt(N)) is at most X.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "strata/core.h"
#include "strata/main.h"
#include "strata/round.h"

typedef struct gcd_config {
  int rows, cols, nonzeros;
  double noise;
} gcd_config;

#define OPT(f) offsetof(gcd_config, f)
static const strata_option gcd_options[] = {
    {.name = "rows",
     .type = STRATA_OPT_INT,
     .offset = OPT(rows),
     .def = "2000",
     .metavar = "N",
     .min = 1,
     .max = 1e7,
     .help = "examples (rows of X)"},
    {.name = "cols",
     .type = STRATA_OPT_INT,
     .offset = OPT(cols),
     .def = "40",
     .metavar = "P",
     .min = 1,
     .max = 1e5,
     .help = "coefficients (columns)"},
    {.name = "nonzeros",
     .type = STRATA_OPT_INT,
     .offset = OPT(nonzeros),
     .def = "5",
     .metavar = "K",
     .max = 1e5,
     .help = "nonzero true coefficients"},
    {.name = "noise",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(noise),
     .def = "0.1",
     .metavar = "S",
     .max = 1e6,
     .help = "standard deviation of the noise in y"},
    {.name = NULL},
};

/* A shard (data block): its rows of X, row-major, then its targets. */
typedef struct shard_head {
  uint32_t n, p;
} shard_head;

static const double *shard_x(const strata_block *b) {
  return (const double *)((const char *)b->buf + sizeof(shard_head) + 8);
}

/* The coordinator block: the model and what the rule needs. */
typedef struct coord_head {
  uint32_t p, pad;
  double n;      /* examples */
  double tol;    /* --tol */
  double score;  /* the last round's largest |g_j| / (|x_j| sqrt(N)); INFINITY before */
} coord_head;

static double *coord_beta(strata_block *c) { return (double *)((char *)c->buf + sizeof(coord_head)); }

/* ---- load: the data, drawn from the seed ----------------------------- */
static int gcd_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const gcd_config *cfg = vcfg;
  int B = setup->strata, N = cfg->rows, p = cfg->cols, rc;
  if (B > N) return strata_err_set(STRATA_EUSAGE, "gcd: --strata %d exceeds --rows %d", B, N);
  if ((rc = strata_problem_alloc(prob, B, B, 0, 0))) return rc;
  strata_rng rng;
  strata_rng_seed(&rng, setup->seed);
  double *truth = strata_calloc((size_t)p, sizeof *truth);
  prob->coord.len = sizeof(coord_head) + 2 * (size_t)p * sizeof(double);
  prob->coord.buf = strata_calloc(1, prob->coord.len);
  if (!truth || !prob->coord.buf) {
    rc = strata_err_set(STRATA_ENOMEM, "gcd: out of memory");
    goto done;
  }
  for (int k = 0; k < cfg->nonzeros && k < p; k++)
    truth[strata_rng_below(&rng, (uint64_t)p)] = strata_rng_normal(&rng);
  coord_head *ch = prob->coord.buf;
  *ch = (coord_head){.p = (uint32_t)p, .n = N, .tol = setup->tol, .score = INFINITY};
  double *colsq = coord_beta(&prob->coord) + p;
  for (int d = 0; d < B; d++) {
    uint32_t lo = (uint32_t)((int64_t)N * d / B), hi = (uint32_t)((int64_t)N * (d + 1) / B);
    uint32_t n = hi - lo;
    strata_block *b = &prob->data[d];
    b->len = sizeof(shard_head) + 8 + ((size_t)n * p + n) * sizeof(double);
    prob->resident[d].len = (size_t)n * sizeof(double);
    if (!(b->buf = strata_alloc_aligned(b->len)) ||
        !(prob->resident[d].buf = strata_alloc_aligned(prob->resident[d].len))) {
      rc = strata_err_set(STRATA_ENOMEM, "gcd: out of memory");
      goto done;
    }
    memset(b->buf, 0, sizeof(shard_head) + 8);
    *(shard_head *)b->buf = (shard_head){n, (uint32_t)p};
    double *x = (double *)shard_x(b), *y = x + (size_t)n * p, *r = prob->resident[d].buf;
    for (uint32_t i = 0; i < n; i++) {
      double yi = cfg->noise * strata_rng_normal(&rng);
      for (int j = 0; j < p; j++) {
        double v = 2 * strata_rng_uniform(&rng) - 1;
        x[(size_t)i * p + j] = v;
        colsq[j] += v * v;
        yi += v * truth[j];
      }
      y[i] = r[i] = yi; /* beta starts at 0: r = y */
    }
  }
  prob->n_examples = (uint64_t)N;
  prob->rounds_per_pass = 1;
done:
  strata_free(truth);
  if (rc) strata_problem_close(prob);
  return rc;
}

static int gcd_schedule(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                        strata_schedule *sched) {
  (void)cfg;
  return strata_schedule_shards(sched, setup->workers, prob->n_data);
}

/* ---- the rounds -------------------------------------------------------- */
static int gcd_schedule_round(const void *cfg, strata_problem *prob, const strata_round *r,
                              strata_round_plan *plan) {
  (void)cfg, (void)r;
  const coord_head *ch = prob->coord.buf;
  if (ch->tol > 0 && ch->score <= ch->tol) return STRATA_ROUND_CONVERGED;
  /* Every worker pushes its shards' whole gradient. */
  uint32_t ids[1] = {0};
  int rc = 0;
  uint32_t *all = strata_malloc((size_t)ch->p * sizeof *all);
  if (!all) return strata_err_set(STRATA_ENOMEM, "gcd: out of memory");
  for (uint32_t j = 0; j < ch->p; j++) all[j] = j;
  rc = strata_round_assign(plan, -1, ch->p ? all : ids, ch->p, NULL, 0);
  strata_free(all);
  return rc;
}

/* A shard's X_d^T r_d at the round's ids. */
static int gcd_push(void *state, const strata_round *r, const strata_task_view *tv,
                    const strata_round_work *work, strata_bytes *out) {
  (void)state, (void)r;
  const shard_head *h = tv->data->buf;
  const double *x = shard_x(tv->data), *res = tv->resident->buf;
  double *g = strata_bytes_add(out, work->n_ids * sizeof *g);
  if (!g) return STRATA_ENOMEM;
  for (uint32_t k = 0; k < work->n_ids; k++) {
    uint32_t j = work->ids[k];
    if (j >= h->p) return strata_err_set(STRATA_EINVAL, "gcd: coefficient %u of %u", j, h->p);
    double s = 0;
    for (uint32_t i = 0; i < h->n; i++) s += x[(size_t)i * h->p + j] * res[i];
    g[k] = s;
  }
  return 0;
}

/* What every shard applies: coefficient j moved by step. */
typedef struct gcd_move {
  uint32_t j, pad;
  double step;
} gcd_move;

static int gcd_pull(const void *cfg, strata_problem *prob, const strata_round *r,
                    const strata_round_plan *plan, const strata_round_part *parts,
                    strata_bytes *apply_out) {
  (void)cfg, (void)r, (void)plan;
  coord_head *ch = prob->coord.buf;
  double *beta = coord_beta(&prob->coord), *colsq = beta + ch->p;
  uint32_t p = ch->p;
  /* g = X^T r over every shard, in block order: the same sum with any
   * number of workers. */
  double *g = strata_calloc(p ? p : 1, sizeof *g);
  if (!g) return strata_err_set(STRATA_ENOMEM, "gcd: out of memory");
  for (int d = 0; d < prob->n_data; d++) {
    if (parts[d].len != p * sizeof(double)) {
      strata_free(g);
      return strata_err_set(STRATA_EINVAL, "gcd: shard %d pushed %zu bytes", d, parts[d].len);
    }
    const double *gd = parts[d].buf;
    for (uint32_t j = 0; j < p; j++) g[j] += gd[j];
  }
  gcd_move mv = {0, 0, 0};
  double best = -1;
  for (uint32_t j = 0; j < p; j++)
    if (colsq[j] > 0 && fabs(g[j]) / sqrt(colsq[j]) > best) {
      best = fabs(g[j]) / sqrt(colsq[j]);
      mv.j = j;
    }
  ch->score = best < 0 ? 0 : best / sqrt(ch->n);
  if (best > 0) {
    mv.step = g[mv.j] / colsq[mv.j];
    beta[mv.j] += mv.step;
  }
  strata_free(g);
  return strata_bytes_put(apply_out, &mv, sizeof mv);
}

static int gcd_apply(void *state, const strata_round *r, const strata_task_view *tv,
                     const void *values, size_t len) {
  (void)state, (void)r;
  gcd_move mv;
  if (len != sizeof mv) return strata_err_set(STRATA_EINVAL, "gcd: %zu bytes to apply", len);
  memcpy(&mv, values, sizeof mv);
  const shard_head *h = tv->data->buf;
  const double *x = shard_x(tv->data);
  double *res = tv->resident->buf;
  for (uint32_t i = 0; i < h->n; i++) res[i] -= x[(size_t)i * h->p + mv.j] * mv.step;
  return 0;
}

static const strata_round_ops gcd_rounds = {
    .schedule_round = gcd_schedule_round, .push = gcd_push, .pull = gcd_pull, .apply = gcd_apply};

/* ---- objectives and export -------------------------------------------- */
static int gcd_worker_init(const void *cfg, const strata_setup *setup, const void *meta,
                           size_t meta_len, void **state) {
  (void)cfg, (void)setup, (void)meta, (void)meta_len;
  *state = NULL;
  return 0;
}

/* A shard's squared residual. */
static int gcd_block_objective(void *state, int pass, strata_block_kind kind, int id,
                               const strata_block *b, double *partials) {
  (void)state, (void)pass, (void)id;
  if (kind != STRATA_BLOCK_RESIDENT) return 0;
  const double *res = b->buf;
  for (size_t i = 0; i < b->len / sizeof(double); i++) partials[0] += res[i] * res[i];
  return 0;
}

static const char *const gcd_objective_names[] = {"loss", "score"};

static void gcd_objectives(const void *cfg, const strata_problem *prob, const double *partials,
                           double *values) {
  (void)cfg;
  const coord_head *ch = prob->coord.buf;
  values[0] = partials[0] / (2 * ch->n);
  values[1] = ch->score;
}

static int write_coef(FILE *f, void *ud) {
  strata_block *c = ud;
  const coord_head *ch = c->buf;
  for (uint32_t j = 0; j < ch->p; j++) fprintf(f, "%.17g\n", coord_beta(c)[j]);
  return 0;
}

/* --model-out DIR: the coefficients, one per line. */
static int gcd_export(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                      const char *dir) {
  (void)cfg, (void)setup;
  char path[4096];
  mkdir(dir, 0777); /* may exist; strata_write_atomic reports real failures */
  snprintf(path, sizeof path, "%s/coef.txt", dir);
  return strata_write_atomic(path, write_coef, (void *)&prob->coord);
}

static const strata_app gcd_app = {
    .name = "gcd",
    .summary = "greedy coordinate descent on least squares: the coordinator picks every round's "
               "coordinate from the model",
    .examples = "  mpirun -np 3 gcd --rows 2000 --cols 40 --passes 200 --tol 1e-6\n"
                "  gcd --mode serial --passes 200 --model-out coef\n",
    .unit = "rows",
    .options = gcd_options,
    .config_size = sizeof(gcd_config),
    .n_partials = 1,
    .n_objectives = 2,
    .objective_names = gcd_objective_names,
    .load = gcd_load,
    .schedule = gcd_schedule,
    .worker_init = gcd_worker_init,
    .block_objective = gcd_block_objective,
    .objectives = gcd_objectives,
    .round = &gcd_rounds,
    .export_model = gcd_export,
};

int main(int argc, char **argv) {
  const strata_app *apps[] = {&gcd_app};
  return strata_main(argc, argv, apps, 1);
}
