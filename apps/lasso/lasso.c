/*
 * strata-lasso: Lasso regression by coordinate descent,
 *   min over beta of F(beta) = (1/2N) |y - X beta|^2 + lambda |beta|_1
 * (scikit-learn's and glmnet's scaling; no intercept: --standardize centres
 * y), in every mode of the engine through one code path.
 *
 * Blocks (B = --strata, default P):
 *  - rotating block j: the coefficients of feature block j (features
 *    [p j / B, p (j+1) / B)), floats, in rows of 16 (64 bytes), so that the
 *    app is STRATA_APP_ADDITIVE and runs on parameter-server tables too;
 *  - data block (i, j) of the diagonal schedule: the columns of feature
 *    block j, whole (CSC, uint32 row, double value, with each column's
 *    squared norm). It does not depend on i: every row block holds all of
 *    X, because coordinate descent on a feature needs the whole residual;
 *  - resident block i: this row block's view of the model, the float
 *    coefficients seen_i it last saw, its residual r_i = y - X seen_i in
 *    double, and each feature's last squared change (prio).
 * Feature f is updated only by row block f mod B, so every coefficient has
 * exactly one writer per pass in every mode: on the ring the writer's
 * float is what the next holder finds, and in the parameter-server modes
 * the table adds exactly one worker's change to it.
 *
 * compute(task (i, j), chunk rows [lo, hi)):
 *  1. sync: for each feature f of the chunk whose coefficient differs from
 *     seen_i[f], r_i -= x_f (beta_f - seen_i[f]) and seen_i[f] = beta_f,
 *     so r_i stays y - X seen_i (in double, for the float seen_i);
 *  2. update the features of the chunk that row block i owns, each in
 *     turn (cyclic, Gauss-Seidel), --sweeps times.
 *     Each new coefficient is rounded to float before its change goes into
 *     the residual. With P > 1 every step is damped (--damping, 1/P): the
 *     workers' concurrent steps act on one residual through stale views.
 *     The damping is a control value (pass_control), which the static
 *     schedule lowers when the objective climbs (damping_cut).
 * With one worker (--mode serial) this is exact cyclic coordinate descent
 * that keeps its residual: the reference of every other mode.
 *
 * The objective of a pass is F at row block 0's view (r_0 is exact for
 * seen_0, a real coefficient vector), through block_objective; nonzeros
 * count the end-of-pass rotating blocks. export_model recomputes F exactly
 * in double from the final coefficients (final_objective in the metrics).
 *
 * --schedule dynamic and --loss logistic run on rounds instead (rounds.c):
 * load, the callbacks and export hand them over.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "lasso.h"
#include "strata/core.h"
#include "strata/main.h"

#define OPT(f) offsetof(lasso_config, f)
static const strata_option lasso_options[] = {
    {.name = "data",
     .short_name = 'd',
     .type = STRATA_OPT_STRING | STRATA_OPT_RESUMABLE,
     .offset = OPT(data),
     .def = "synth:n=500,p=400000,density=0.05,nonzeros=100,noise=0.1,seed=1",
     .metavar = "FILE|tsv:FILE|synth:...",
     .help = "the examples: a LIBSVM/svmlight file with real targets; a table with a header line "
             "and the target last (a name ending in .tsv or .tab.txt, or tsv:FILE); or the "
             "generator synth:n=N,p=P,density=D,nonzeros=K,noise=S,seed=X (unit-norm columns, K "
             "true nonzeros)"},
    {.name = "standardize",
     .type = STRATA_OPT_FLAG,
     .offset = OPT(standardize),
     .help = "centre every column and scale it to unit population sd (over N), and centre y (the "
             "matrix becomes dense)"},
    {.name = "lambda",
     .type = STRATA_OPT_DOUBLE_OPTIONAL,
     .offset = OPT(lambda),
     .metavar = "L",
     .max = 1e300,
     .help = "the L1 weight lambda (excludes --lambda-ratio)"},
    {.name = "lambda-ratio",
     .type = STRATA_OPT_DOUBLE_OPTIONAL,
     .offset = OPT(lambda_ratio),
     .def = "0.1",
     .metavar = "R",
     .max = 1e300,
     .help = "lambda = R lambda_max, lambda_max = |X^T y|_inf / N (the default, 0.1)"},
    {.name = "path",
     .type = STRATA_OPT_INT,
     .offset = OPT(path),
     .def = "1",
     .metavar = "K",
     .min = 1,
     .max = 1000,
     .help = "a warm-started path of K log-spaced lambdas from lambda_max down to lambda"},
    {.name = "path-passes",
     .type = STRATA_OPT_INT,
     .offset = OPT(path_passes),
     .def = "5",
     .metavar = "M",
     .min = 1,
     .max = 1000000,
     .help = "passes per lambda of the path before the next (a fixed count); the last one runs to "
             "the end"},
    {.name = "schedule",
     .type = STRATA_OPT_ENUM,
     .offset = OPT(schedule),
     .def = "static",
     .choices = "static|dynamic",
     .help = "static: cyclic sweeps of each worker's features (logistic: sets in turn, on "
             "rounds); dynamic: the coordinator draws every round's set by priority, on rounds"},
    {.name = "sweeps",
     .type = STRATA_OPT_INT,
     .offset = OPT(sweeps),
     .def = "1",
     .metavar = "S",
     .min = 1,
     .max = 1000,
     .help = "static: sweeps over a chunk's own features per visit (more makes the concurrent "
             "slices of bsp/ssp/async closer to exact block solves, which correlated features "
             "need)"},
    {.name = "damping",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(damping),
     .def = "0",
     .metavar = "A",
     .max = 1,
     .help = "take A of each coordinate step (0: 1 with one worker, else 1/P, which the static "
             "schedule lowers while the objective climbs): the workers' concurrent steps act on "
             "one residual, and undamped they overshoot when features outnumber examples"},
    {.name = "set-size",
     .short_name = 'U',
     .type = STRATA_OPT_INT_OPTIONAL,
     .offset = OPT(set_size),
     .metavar = "U",
     .min = 1,
     .max = 1 << 20,
     .help = "rounds: coefficients drawn (or taken in turn) per round, before the correlation "
             "filter (default: 1024 with --set-sweeps, 16 without; 64 for --loss logistic)"},
    {.name = "rounds",
     .type = STRATA_OPT_INT_OPTIONAL,
     .offset = OPT(rounds),
     .metavar = "R",
     .max = 1 << 30,
     .help = "rounds: sampled steps a pass, after its full round (default: 1 with --set-sweeps; "
             "without, and for --loss logistic, features / U, at most 100)"},
    {.name = "set-sweeps",
     .type = STRATA_OPT_INT,
     .offset = OPT(set_sweeps),
     .def = "50",
     .metavar = "K",
     .max = 1000,
     .help = "rounds, squared loss: up to K Gauss-Seidel sweeps over the kept set with its Gram "
             "matrix (coordinate descent on the set); 0: every kept coefficient steps from the "
             "round's gradient at once (Jacobi, STRADS)"},
    {.name = "corr-threshold",
     .type = STRATA_OPT_DOUBLE_OPTIONAL,
     .offset = OPT(corr_threshold),
     .metavar = "C",
     .max = 1,
     .help = "rounds: drop a drawn coefficient whose column's |correlation| with one kept exceeds "
             "C (1: no filter; default: 1 with --set-sweeps, 0.1 without and for --loss logistic)"},
    {.name = "eta",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(eta),
     .def = "0.1",
     .metavar = "E",
     .max = 1e6,
     .help = "rounds: every coefficient's priority floor, E times the mean priority of the last "
             "full round, so that zero ones are still drawn (0: none)"},
    {.name = "loss",
     .type = STRATA_OPT_ENUM,
     .offset = OPT(loss),
     .def = "squared",
     .choices = "squared|logistic",
     .help = "squared: the Lasso; logistic: L1-regularised logistic regression, labels 1 and -1 "
             "(on rounds)"},
    {.name = "bias",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(bias),
     .def = "0",
     .metavar = "B",
     .min = -1e300,
     .max = 1e300,
     .help = "logistic: a last feature of value B in every example, its weight regularised like "
             "the others (LIBLINEAR's -B; 0: none)"},
    {.name = "line-search",
     .type = STRATA_OPT_INT,
     .offset = OPT(line_search),
     .def = "0",
     .metavar = "K",
     .max = 8,
     .help = "logistic: each Newton step's round is followed by one that tries the step sizes 1, "
             "1/2, ... 2^(1-K) and takes the largest that decreases F enough (0: the bounded "
             "Newton step)"},
    {.name = NULL},
};

static const strata_reduce lasso_reduce[N_PARTIALS] = {
    STRATA_REDUCE_SUM, STRATA_REDUCE_SUM, STRATA_REDUCE_SUM, STRATA_REDUCE_MAX,
    STRATA_REDUCE_SUM, STRATA_REDUCE_SUM, STRATA_REDUCE_MAX};
static const char *const lasso_objective_names[N_OBJECTIVES] = {
    "objective", "nonzeros", "max_delta", "updates", "touched", "rel_gap"};
enum { C_LAMBDA, C_DAMPING, C_DAMPING_SINCE, N_CONTROLS };
static const char *const lasso_control_names[N_CONTROLS] = {"lambda", "damping", "damping_since"};

#define ROW_FLOATS 16

static uint32_t split(uint32_t n, int B, int b) { return (uint32_t)((uint64_t)n * b / B); }

/* ---- blocks ----------------------------------------------------------- */

/* A data block: this header, then colptr[nf + 1] (uint64, block-local),
 * norm2[nf], val[nnz] (double), row[nnz] (uint32), each at 64 bytes. */
typedef struct colblock {
  uint32_t nf, f0;
  uint64_t nnz;
} colblock;

typedef struct colview {
  uint32_t nf, f0;
  const uint64_t *cp;
  const double *norm2, *val;
  const uint32_t *row;
} colview;

static size_t colblock_offsets(uint32_t nf, uint64_t nnz, size_t off[4]) {
  off[0] = 64;
  off[1] = strata_round_up(off[0] + ((size_t)nf + 1) * 8, 64);
  off[2] = strata_round_up(off[1] + (size_t)nf * 8, 64);
  off[3] = strata_round_up(off[2] + nnz * 8, 64);
  return strata_round_up(off[3] + nnz * 4, 64);
}

static void colview_of(const strata_block *b, colview *v) {
  const colblock *h = b->buf;
  size_t off[4];
  colblock_offsets(h->nf, h->nnz, off);
  const char *base = b->buf;
  *v = (colview){h->nf,
                 h->f0,
                 (const uint64_t *)(base + off[0]),
                 (const double *)(base + off[1]),
                 (const double *)(base + off[2]),
                 (const uint32_t *)(base + off[3])};
}

/* A resident block: r[n] (double), seen[p], prio[p] (float). */
static size_t resident_offsets(uint32_t n, uint32_t p, size_t off[2]) {
  off[0] = strata_round_up((size_t)n * 8, 64);
  off[1] = off[0] + strata_round_up((size_t)p * 4, 64);
  return off[1] + strata_round_up((size_t)p * 4, 64);
}

/* ---- the kernels -------------------------------------------------------- */

/* x_f . r with four sums, so the loop is not one chain of dependent adds. */
static inline double col_dot(const colview *X, uint32_t k, const double *restrict r) {
  uint64_t a = X->cp[k], e = X->cp[k + 1];
  const double *restrict v = X->val;
  const uint32_t *restrict ix = X->row;
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (; a + 4 <= e; a += 4) {
    s0 += v[a] * r[ix[a]];
    s1 += v[a + 1] * r[ix[a + 1]];
    s2 += v[a + 2] * r[ix[a + 2]];
    s3 += v[a + 3] * r[ix[a + 3]];
  }
  for (; a < e; a++)
    s0 += v[a] * r[ix[a]];
  return (s0 + s1) + (s2 + s3);
}

static inline void col_axpy(const colview *X, uint32_t k, double d, double *restrict r) {
  const double *restrict v = X->val;
  const uint32_t *restrict ix = X->row;
  for (uint64_t a = X->cp[k], e = X->cp[k + 1]; a < e; a++)
    r[ix[a]] -= d * v[a];
}

/* The coordinate minimiser b = S(g + |x|^2 old, N lambda) / |x|^2 (g =
 * x.r), or with damping alpha < 1 the fraction old + alpha (b - old) of the
 * way to it. A damped coefficient that the minimiser puts at zero would
 * only approach it geometrically, so once it is below 1% of the threshold's
 * scale (N lambda / |x|^2) it is set to zero. (A damped proximal step,
 * S(old + alpha g / |x|^2, alpha N lambda / |x|^2), reaches zero at once
 * but made the concurrent 2-worker runs of bench/lasso.sh diverge.)
 * Rounded to float: the residual follows the rounded value. */
static inline float cd_step(double g, double thr, double norm2, double old, double alpha) {
  double z = g + norm2 * old;
  double b = z > thr ? (z - thr) / norm2 : z < -thr ? (z + thr) / norm2 : 0;
  if (alpha == 1)
    return (float)b;
  if (b == 0 && fabs(old) * norm2 < 0.01 * thr)
    return 0;
  return (float)(old + alpha * (b - old));
}

/* One coordinate step on feature k (block-local) against r, Gauss-Seidel:
 * the change goes into r at once. */
static inline void cd_update(const colview *X, uint32_t k, double *restrict r, float *seen,
                             float *beta, float *prio, double thr, double alpha, uint64_t *touched,
                             double *maxd) {
  double n2 = X->norm2[k];
  if (n2 <= 0)
    return;
  double old = seen[k];
  float b = cd_step(col_dot(X, k, r), thr, n2, old, alpha);
  *touched += X->cp[k + 1] - X->cp[k];
  if (b != seen[k]) {
    double d = (double)b - old;
    col_axpy(X, k, d, r);
    *touched += X->cp[k + 1] - X->cp[k];
    seen[k] = beta[k] = b;
    *maxd = fmax(*maxd, fabs(d));
    prio[k] = (float)(d * d);
  } else {
    prio[k] = 0;
  }
}

/* ---- worker ------------------------------------------------------------- */

typedef struct lasso_worker {
  const lasso_config *cfg;
  lasso_meta m;
  int B;
  /* --tol: row block 0's data blocks (0, j), seen in compute, for the
   * duality gap at the pass's end (NULL without --tol) */
  const strata_block **gap_cols;
  struct lasso_rworker *rw; /* a round run's worker (rounds.c); NULL on the ring */
} lasso_worker;

static void lasso_worker_free(void *state) {
  lasso_worker *w = state;
  if (!w)
    return;
  strata_free(w->gap_cols);
  lasso_rounds_worker_free(w->rw);
  strata_free(w);
}

static int lasso_worker_init(const void *vcfg, const strata_setup *setup, const void *meta,
                             size_t meta_len, void **state) {
  const lasso_config *cfg = vcfg;
  if (meta_len != sizeof(lasso_meta))
    return strata_err_set(STRATA_EINVAL, "lasso: bad meta");
  lasso_worker *w = strata_calloc(1, sizeof *w);
  if (!w)
    return strata_err_set(STRATA_ENOMEM, "lasso: out of memory");
  memcpy(&w->m, meta, sizeof w->m);
  w->cfg = cfg;
  w->B = setup->strata;
  if (lasso_rounds_wanted(cfg)) {
    int rc = lasso_rounds_worker_init(cfg, setup, &w->m, &w->rw);
    if (rc) {
      lasso_worker_free(w);
      return rc;
    }
  } else if (setup->tol > 0 && !(w->gap_cols = strata_calloc((size_t)w->B, sizeof *w->gap_cols))) {
    lasso_worker_free(w);
    return strata_err_set(STRATA_ENOMEM, "lasso: out of memory");
  }
  *state = w;
  return 0;
}

/* lambda of pass `pass`: the path's stage (a fixed --path-passes each), or
 * the target. The same on the coordinator (pass_control) and the workers
 * (block_objective, which is not handed the pass's controls). */
double lasso_lambda_at(const lasso_config *cfg, const lasso_meta *m, int pass) {
  if (cfg->path < 2 || m->lambda >= m->lambda_max || m->lambda <= 0)
    return m->lambda;
  int s = pass / cfg->path_passes;
  if (s > cfg->path - 1)
    s = cfg->path - 1;
  if (s == cfg->path - 1)
    return m->lambda;
  return m->lambda_max * pow(m->lambda / m->lambda_max, (double)s / (cfg->path - 1));
}

static int lasso_compute(void *state, const strata_task_view *tv, double *partials) {
  lasso_worker *w = state;
  const lasso_config *cfg = w->cfg;
  colview X;
  colview_of(tv->data, &X);
  uint32_t lo = tv->row_lo * ROW_FLOATS, hi = tv->row_hi * ROW_FLOATS;
  if (hi > X.nf)
    hi = X.nf;
  partials[P_MAXD] = fmax(partials[P_MAXD], 0);
  if (w->gap_cols && tv->ids.resident == 0)
    w->gap_cols[tv->ids.rotating] = tv->data;
  if (lo >= hi)
    return 0;
  size_t roff[2];
  resident_offsets(w->m.n, w->m.p, roff);
  char *res = tv->resident->buf;
  double *restrict r = (double *)res;
  float *seen = (float *)(res + roff[0]) + X.f0, *prio = (float *)(res + roff[1]) + X.f0;
  float *beta = tv->rotating->buf;
  double lambda = tv->control[C_LAMBDA], thr = w->m.n * lambda, alpha = tv->control[C_DAMPING];
  uint64_t touched = 0, updates = 0;
  double maxd = 0;

  /* 1. Catch up with the other row blocks' changes. */
  for (uint32_t k = lo; k < hi; k++)
    if (beta[k] != seen[k]) {
      col_axpy(&X, k, (double)beta[k] - (double)seen[k], r);
      touched += X.cp[k + 1] - X.cp[k];
      seen[k] = beta[k];
    }

  /* 2. This row block's features of the chunk: f mod B == i. */
  int B = w->B, i = tv->ids.resident;
  uint32_t first = lo + (uint32_t)(((int64_t)i - (int64_t)((X.f0 + lo) % (uint32_t)B) + B) % B);
  for (int sw = 0; sw < cfg->sweeps; sw++)
    for (uint32_t k = first; k < hi; k += (uint32_t)B) {
      cd_update(&X, k, r, seen, beta, prio, thr, alpha, &touched, &maxd);
      updates += X.norm2[k] > 0;
    }
  partials[P_MAXD] = fmax(partials[P_MAXD], maxd);
  partials[P_UPDATES] += (double)updates;
  partials[P_TOUCHED] += (double)touched;
  return 0;
}

/* --tol: the duality gap of seen_0 relative to F, from g = X^T r_0 over
 * the data blocks (0, j) compute saw (y . r = r . r + seen . g); NaN
 * until it has seen them all. */
static double ring_rel_gap(const lasso_worker *w, const double *r, const float *seen, double rr,
                           double l1) {
  double gmax = 0, sg = 0, primal;
  for (int j = 0; j < w->B; j++) {
    if (!w->gap_cols[j])
      return NAN;
    colview X;
    colview_of(w->gap_cols[j], &X);
    for (uint32_t k = 0; k < X.nf; k++) {
      double g = col_dot(&X, k, r);
      gmax = fmax(gmax, fabs(g));
      sg += (double)seen[X.f0 + k] * g;
    }
  }
  double gap = lasso_gap_squared(rr, rr + sg, l1, gmax, w->m.n * w->m.lambda, &primal);
  return primal > 0 ? gap / primal : 0;
}

static int lasso_block_objective(void *state, int pass, strata_block_kind kind, int id,
                                 const strata_block *b, double *partials) {
  lasso_worker *w = state;
  if (w->rw)
    return lasso_rounds_block_objective(w->rw, pass, kind, id, b, partials);
  if (kind == STRATA_BLOCK_ROTATING) {
    const float *beta = b->buf;
    double nz = 0;
    for (size_t k = 0; k < b->len / 4; k++)
      nz += beta[k] != 0;
    partials[P_NZ] += nz;
    return 0;
  }
  if (kind != STRATA_BLOCK_RESIDENT || id != 0)
    return 0;
  size_t roff[2];
  resident_offsets(w->m.n, w->m.p, roff);
  const double *r = b->buf;
  const float *seen = (const float *)((const char *)b->buf + roff[0]);
  double rr = 0, l1 = 0;
  for (uint32_t i = 0; i < w->m.n; i++)
    rr += r[i] * r[i];
  for (uint32_t f = 0; f < w->m.p; f++)
    l1 += fabs(seen[f]);
  /* A residual this far beyond |y| is a diverging run: the NaN makes the
   * engine stop it (exit 3) with the hint. */
  if (!isfinite(rr) || !isfinite(l1) || rr > 1e6 * (w->m.yy > 0 ? w->m.yy : 1)) {
    partials[P_LS] = NAN;
    return 0;
  }
  partials[P_LS] += rr / (2.0 * w->m.n);
  partials[P_L1] += lasso_lambda_at(w->cfg, &w->m, pass) * l1;
  /* Only at the target lambda: a path's stage does not stop the run. */
  if (w->gap_cols && lasso_lambda_at(w->cfg, &w->m, pass) == w->m.lambda)
    partials[P_REL_GAP] = ring_rel_gap(w, r, seen, rr, l1);
  return 0;
}

static void lasso_objectives(const void *cfg, const strata_problem *prob, const double *p,
                             double *v) {
  if (prob->rounds_per_pass) {
    lasso_rounds_objectives(cfg, prob, p, v);
    return;
  }
  v[O_OBJECTIVE] = p[P_LS] + p[P_L1];
  v[O_NONZEROS] = p[P_NZ];
  v[O_MAXD] = p[P_MAXD];
  v[O_UPDATES] = p[P_UPDATES];
  v[O_TOUCHED] = p[P_TOUCHED];
  /* -INFINITY, its identity: not measured (no --tol) */
  v[O_REL_GAP] = isinf(p[P_REL_GAP]) ? NAN : p[P_REL_GAP];
}

/* The static schedule's damping: lowered by DAMP_CUT when the objective,
 * DAMP_SETTLE passes or more after the damping last changed, has stayed
 * above its best for DAMP_STREAK passes in a row and is still climbing.
 *
 * Why: with P > 1 the row blocks step concurrently on one residual through
 * stale views and overshoot together, and a damping of 1/P is not always
 * enough: on a 500 x 400,000 set (docs/lasso.md) the 2-worker static run
 * fell to 0.146 by pass 18, then climbed, every value finite, to 10,799 by
 * pass 300, where 0.3 converges. A rise of the objective is the sign, but
 * single rises are not: the first passes overshoot from zero (pass 2 is
 * above pass 1 in every 2-worker run measured), and bsp on the correlated
 * diabetes columns rises every other pass while it converges; neither
 * stays above its best for DAMP_STREAK passes, and no converging run of the
 * lasso tests did (DAMP_TOL leaves out the last bits' noise near the
 * optimum), so those runs keep 1/P throughout. A lowered damping takes a
 * pass or two to show (the objective of a diverging run went on rising for
 * two passes after it), hence the settling passes before another cut. */
#define DAMP_STREAK 3
#define DAMP_SETTLE 2
#define DAMP_CUT 0.6
#define DAMP_TOL 1e-6
#define DAMP_WINDOW 1000 /* the best is taken over at most this many passes */

/* Whether pass q, the newest summed, ends DAMP_STREAK or more passes from
 * pass `from` on that are above the best of q's lambda stage (over the last
 * DAMP_WINDOW passes), and is the highest of them. Unscored passes (NaN)
 * are skipped. */
static int damping_cut(const lasso_config *cfg, const double *obj, int q, int from) {
  int s = 0; /* the first pass of q's lambda stage */
  if (cfg->path >= 2) {
    int stage = q / cfg->path_passes;
    s = (stage < cfg->path - 1 ? stage : cfg->path - 1) * cfg->path_passes;
  }
  if (q - DAMP_WINDOW + 1 > s)
    s = q - DAMP_WINDOW + 1;
  double best = INFINITY, newest = obj[(size_t)q * STRATA_MAX_OBJECTIVES];
  for (int t = s; t <= q; t++) {
    double v = obj[(size_t)t * STRATA_MAX_OBJECTIVES];
    if (v < best)
      best = v;
  }
  if (isnan(newest) || !(best < INFINITY))
    return 0;
  int streak = 0, highest = 1;
  for (int t = q; t >= s && t >= from; t--) {
    double v = obj[(size_t)t * STRATA_MAX_OBJECTIVES];
    if (isnan(v))
      continue;
    if (!(v > best * (1 + DAMP_TOL)))
      break;
    streak++;
    highest &= v <= newest;
  }
  return streak >= DAMP_STREAK && highest;
}

/* The path's lambda of the pass, from lambda_max as load found it, and
 * the damping: --damping when given; else 1 with one worker and 1/P with
 * P, which the static schedule lowers when the objective climbs
 * (damping_cut), recording the pass it applies from (damping_since). Each
 * pass's controls follow from the previous pass's (prev) and the
 * objectives, so a resumed run decides what a straight one would. */
static void lasso_pass_control(const void *vcfg, const strata_problem *prob, int pass,
                               const double *objectives, int known, const double *prev,
                               double *ctl) {
  const lasso_config *cfg = vcfg;
  const lasso_priv *pv = prob->priv;
  ctl[C_LAMBDA] = lasso_lambda_at(cfg, &pv->m, pass);
  if (cfg->damping > 0) {
    ctl[C_DAMPING] = cfg->damping;
    ctl[C_DAMPING_SINCE] = 0;
  } else if (!prev) {
    ctl[C_DAMPING] = 1.0 / pv->workers;
    ctl[C_DAMPING_SINCE] = 0;
  } else {
    ctl[C_DAMPING] = prev[C_DAMPING];
    ctl[C_DAMPING_SINCE] = prev[C_DAMPING_SINCE];
    if (cfg->schedule == SCHED_STATIC && known > 0 &&
        damping_cut(cfg, objectives, known - 1, (int)prev[C_DAMPING_SINCE] + DAMP_SETTLE)) {
      ctl[C_DAMPING] *= DAMP_CUT;
      ctl[C_DAMPING_SINCE] = pass;
    }
  }
}

/* ---- coordinator ----------------------------------------------------------
 */

static int lasso_check(const void *vcfg, const strata_setup *setup) {
  const lasso_config *cfg = vcfg;
  if (cfg->lambda.given && cfg->lambda_ratio.given)
    return strata_err_set(STRATA_EUSAGE, "--lambda and --lambda-ratio exclude each other");
  if (setup->workers > setup->strata)
    return strata_err_set(STRATA_EUSAGE, "--strata %d is below the %d workers", setup->strata,
                          setup->workers);
  return lasso_rounds_check(cfg, setup);
}

static void priv_free(void *p) {
  lasso_priv *pv = p;
  if (!pv)
    return;
  lasso_data_close(&pv->d);
  lasso_rounds_priv_free(pv->rounds);
  strata_free(pv);
}

/* Data block bytes for feature block [f0, f0 + nf) of d. */
static void *build_colblock(const lasso_data *d, uint32_t f0, uint32_t nf, size_t *len) {
  uint64_t a = d->colptr[f0], nnz = d->colptr[f0 + nf] - a;
  size_t off[4];
  *len = colblock_offsets(nf, nnz, off);
  char *buf = strata_alloc_aligned(*len);
  if (!buf)
    return NULL;
  memset(buf, 0, *len); /* padding too: the engine checksums the data it loaded */
  *(colblock *)buf = (colblock){nf, f0, nnz};
  uint64_t *cp = (uint64_t *)(buf + off[0]);
  double *n2 = (double *)(buf + off[1]);
  for (uint32_t k = 0; k <= nf; k++)
    cp[k] = d->colptr[f0 + k] - a;
  for (uint32_t k = 0; k < nf; k++) {
    double s = 0;
    for (uint64_t x = d->colptr[f0 + k]; x < d->colptr[f0 + k + 1]; x++)
      s += d->val[x] * d->val[x];
    n2[k] = s;
  }
  memcpy(buf + off[2], d->val + a, nnz * 8);
  memcpy(buf + off[3], d->row + a, nnz * 4);
  return buf;
}

static int lasso_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const lasso_config *cfg = vcfg;
  int B = setup->strata, rc;
  lasso_priv *pv = strata_calloc(1, sizeof *pv);
  if (!pv)
    return strata_err_set(STRATA_ENOMEM, "lasso: out of memory");
  pv->final_objective = NAN;
  pv->workers = setup->workers;
  lasso_data *d = &pv->d;
  if ((rc = lasso_data_read(cfg->data, d)))
    goto fail;
  if (cfg->standardize && (rc = lasso_data_standardize(d)))
    goto fail;
  if (lasso_rounds_wanted(cfg)) {
    if ((rc = lasso_rounds_load(cfg, setup, prob, pv)))
      goto fail;
    prob->priv = pv;
    prob->priv_free = priv_free;
    return 0;
  }
  if (d->p < (uint32_t)B) {
    rc = strata_err_set(STRATA_EUSAGE, "%s: %u features, fewer than the %d strata", cfg->data, d->p,
                        B);
    goto fail;
  }
  lasso_meta *m = &pv->m;
  m->n = d->n;
  m->p = d->p;
  for (uint32_t i = 0; i < d->n; i++)
    m->yy += d->y[i] * d->y[i];
  for (uint32_t f = 0; f < d->p; f++) {
    double g = 0;
    for (uint64_t x = d->colptr[f]; x < d->colptr[f + 1]; x++)
      g += d->val[x] * d->y[d->row[x]];
    m->lambda_max = fmax(m->lambda_max, fabs(g) / d->n);
  }
  m->lambda = cfg->lambda.given ? cfg->lambda.value : cfg->lambda_ratio.value * m->lambda_max;
  if (cfg->path > 1 && !(m->lambda > 0)) {
    rc = strata_err_set(STRATA_EUSAGE, "--path needs lambda > 0");
    goto fail;
  }
  strata_log(STRATA_LOG_INFO,
             "lasso: %u examples, %u features, %llu stored; lambda_max %.9g, lambda %.9g", d->n,
             d->p, (unsigned long long)d->nnz, m->lambda_max, m->lambda);

  size_t rlen_off[2], rlen = resident_offsets(d->n, d->p, rlen_off);
  double bytes = (double)B * B * (double)d->nnz * 12 + (double)B * rlen;
  if ((rc = strata_problem_fits("lasso's blocks (X once per stratum pair)", bytes,
                                "lower --strata")))
    goto fail;
  if ((rc = strata_problem_alloc(prob, B * B, B, B, 0)))
    goto fail;
  for (int j = 0; j < B && !rc; j++) {
    uint32_t f0 = split(d->p, B, j), nf = split(d->p, B, j + 1) - f0;
    size_t len;
    void *blk = build_colblock(d, f0, nf, &len);
    if (!blk)
      rc = strata_err_set(STRATA_ENOMEM, "lasso: out of memory");
    for (int i = 0; i < B && !rc; i++) {
      void *c = i == B - 1 ? blk : strata_alloc_aligned(len);
      if (!c) {
        strata_free(blk);
        rc = strata_err_set(STRATA_ENOMEM, "lasso: out of memory");
        break;
      }
      if (c != blk)
        memcpy(c, blk, len);
      prob->data[i * B + j] = (strata_block){c, len, 0, 0};
    }
    uint32_t nrows = (nf + ROW_FLOATS - 1) / ROW_FLOATS;
    size_t rb = ROW_FLOATS * 4;
    prob->rotating[j] =
        (strata_block){strata_alloc_aligned(nrows * rb), nrows * rb, nrows, (uint32_t)rb};
    if (!rc && !prob->rotating[j].buf)
      rc = strata_err_set(STRATA_ENOMEM, "lasso: out of memory");
    if (!rc)
      memset(prob->rotating[j].buf, 0, nrows * rb);
  }
  for (int i = 0; i < B && !rc; i++) {
    char *buf = strata_alloc_aligned(rlen);
    if (!buf) {
      rc = strata_err_set(STRATA_ENOMEM, "lasso: out of memory");
      break;
    }
    memset(buf, 0, rlen);
    memcpy(buf, d->y, (size_t)d->n * 8);
    float *prio = (float *)(buf + rlen_off[1]);
    for (uint32_t f = 0; f < d->p; f++)
      prio[f] = 1;
    prob->resident[i] = (strata_block){buf, rlen, 0, 0};
  }
  if (rc)
    goto fail;
  if (!(prob->meta = strata_malloc(sizeof *m))) {
    rc = strata_err_set(STRATA_ENOMEM, "lasso: out of memory");
    goto fail;
  }
  memcpy(prob->meta, m, sizeof *m);
  prob->meta_len = sizeof *m;
  prob->n_examples = d->p;
  prob->priv = pv;
  prob->priv_free = priv_free;
  return 0;
fail:
  priv_free(pv);
  return rc;
}

static int lasso_schedule(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                          strata_schedule *sched) {
  if (prob->rounds_per_pass)
    return strata_schedule_shards(sched, setup->workers, prob->n_data);
  return strata_schedule_diagonal(sched, setup->workers, setup->strata);
}

static void lasso_describe(const void *vcfg, const strata_problem *prob, strata_json *j) {
  const lasso_config *cfg = vcfg;
  const lasso_priv *pv = prob->priv;
  if (!pv)
    return;
  strata_json_int(j, "n", pv->m.n);
  strata_json_int(j, "p", pv->m.p);
  strata_json_int(j, "nnz", (int64_t)pv->d.nnz);
  strata_json_double(j, "lambda", pv->m.lambda);
  strata_json_double(j, "lambda_max", pv->m.lambda_max);
  strata_json_string(j, "schedule", cfg->schedule == SCHED_DYNAMIC ? "dynamic" : "static");
  lasso_rounds_describe(cfg, prob, j);
  /* Known only when the final blocks came back (--model-out). */
  strata_json_double(j, "final_objective", pv->final_objective);
  if (isfinite(pv->final_objective))
    strata_json_int(j, "final_nonzeros", (int64_t)pv->final_nonzeros);
}

typedef struct coef_out {
  const strata_problem *prob;
  uint32_t p;
  int B;
} coef_out;

static int fill_coef(FILE *f, void *ud) {
  const coef_out *c = ud;
  for (int j = 0; j < c->B; j++) {
    const float *beta = c->prob->rotating[j].buf;
    uint32_t f0 = split(c->p, c->B, j), nf = split(c->p, c->B, j + 1) - f0;
    for (uint32_t k = 0; k < nf; k++)
      if (beta[k] != 0)
        fprintf(f, "%u %.9g\n", f0 + k, (double)beta[k]);
  }
  return ferror(f) ? strata_err_set(STRATA_EIO, "coef.txt: write error") : 0;
}

/* DIR/coef.txt: "index value" for every nonzero coefficient, index 0-based
 * (the file's column order; LIBSVM index - 1), value as the float kept.
 * Also computes the exact F of the final coefficients (final_objective). */
static int lasso_export(const void *vcfg, const strata_setup *setup, const strata_problem *prob,
                        const char *dir) {
  lasso_priv *pv = prob->priv;
  if (prob->rounds_per_pass)
    return lasso_rounds_export(vcfg, prob, dir);
  const lasso_data *d = &pv->d;
  int B = prob->n_rotating;
  double *r = strata_malloc((size_t)d->n * 8);
  if (!r)
    return strata_err_set(STRATA_ENOMEM, "lasso: out of memory");
  memcpy(r, d->y, (size_t)d->n * 8);
  double l1 = 0;
  uint64_t nz = 0;
  for (int j = 0; j < B; j++) {
    const float *beta = prob->rotating[j].buf;
    uint32_t f0 = split(d->p, B, j), nf = split(d->p, B, j + 1) - f0;
    for (uint32_t k = 0; k < nf; k++) {
      double b = beta[k];
      if (b == 0)
        continue;
      nz++;
      l1 += fabs(b);
      for (uint64_t x = d->colptr[f0 + k]; x < d->colptr[f0 + k + 1]; x++)
        r[d->row[x]] -= d->val[x] * b;
    }
  }
  double rr = 0;
  for (uint32_t i = 0; i < d->n; i++)
    rr += r[i] * r[i];
  strata_free(r);
  double F = rr / (2.0 * d->n) + pv->m.lambda * l1;
  if (!isfinite(F))
    return strata_err_set(STRATA_EDIVERGED, "lasso: the final coefficients are not finite");
  pv->final_objective = F;
  pv->final_nonzeros = nz;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return strata_err_set(STRATA_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
  coef_out c = {prob, d->p, B};
  return strata_write_atomic_in(dir, "coef.txt", fill_coef, &c);
}

/* Round runs (rounds.c): the workers' callbacks reach its worker state. */
static int lasso_push(void *state, const strata_round *r, const strata_task_view *tv,
                      const strata_round_work *work, strata_bytes *out) {
  return lasso_rounds_push(((lasso_worker *)state)->rw, r, tv, work, out);
}

static int lasso_apply(void *state, const strata_round *r, const strata_task_view *tv,
                       const void *values, size_t len) {
  return lasso_rounds_apply(((lasso_worker *)state)->rw, r, tv, values, len);
}

static const strata_round_ops lasso_round_ops = {.schedule_round = lasso_rounds_schedule,
                                                 .push = lasso_push,
                                                 .pull = lasso_rounds_pull,
                                                 .apply = lasso_apply};

static const strata_app lasso_app = {
    .name = "lasso",
    .flags = STRATA_APP_ADDITIVE,
    .summary = "Lasso regression by coordinate descent, cyclic or scheduled by the coordinator "
               "from the model (STRADS); L1-regularised logistic regression",
    .examples = "  strata-lasso --mode serial --data synth:n=500,p=400000 "
                "--lambda-ratio 0.1\n"
                "  mpirun -np 3 strata-lasso --data diabetes.tab.txt "
                "--standardize --lambda 1 "
                "--model-out out\n"
                "  mpirun -np 3 strata-lasso --schedule dynamic --tol 1e-4 --passes 1000\n"
                "  mpirun -np 3 strata-lasso --schedule dynamic --set-sweeps 0 --set-size 64 "
                "--corr-threshold 0.1\n"
                "  strata-lasso --mode serial --loss logistic --schedule dynamic --data dna.svm "
                "--lambda 5e-3 --tol 1e-9 --passes 5000\n"
                "  mpirun -np 3 strata-lasso --mode ssp --path 10 "
                "--path-passes 5 --passes 60\n",
    .unit = "coordinates",
    .options = lasso_options,
    .config_size = sizeof(lasso_config),
    .check = lasso_check,
    .n_partials = N_PARTIALS,
    .partial_reduce = lasso_reduce,
    .n_objectives = N_OBJECTIVES,
    .objective_names = lasso_objective_names,
    .falling = 1u << 0, /* objective */
    .load = lasso_load,
    .schedule = lasso_schedule,
    .worker_init = lasso_worker_init,
    .worker_free = lasso_worker_free,
    .compute = lasso_compute,
    .block_objective = lasso_block_objective,
    .objectives = lasso_objectives,
    .diverged_hint = "lower --damping, or with --schedule dynamic lower --set-size or "
                     "--corr-threshold (filter more correlated features)",
    .n_controls = N_CONTROLS,
    .control_names = lasso_control_names,
    .pass_control = lasso_pass_control,
    .describe = lasso_describe,
    .tol = {STRATA_TOL_VALUE, O_REL_GAP, "the duality gap relative to the objective (rel_gap)"},
    .round = &lasso_round_ops,
    .export_model = lasso_export,
};

int main(int argc, char **argv) {
  const strata_app *apps[] = {&lasso_app};
  return strata_main(argc, argv, apps, 1);
}
