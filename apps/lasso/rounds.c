/*
 * rounds.c - strata-lasso on rounds (strata/round.h): the coordinator's
 * dynamic schedule (STRADS, Kim et al., EuroSys 2016) for the squared loss,
 * and the L1-regularised logistic loss (--loss logistic) in both schedules.
 *
 * Data layout: the rows are cut into B = --strata shards (data block d:
 * rows [N d / B, N (d+1) / B) of every column, CSC with local row
 * indices, and the shard's targets); resident block d holds the shard's
 * residual r_d = y_d - X_d beta (squared loss) or its margins m_d = X_d w
 * and labels (logistic). Every worker gets the same coefficient ids each
 * round and computes its shards' partial sums; the coordinator adds them in
 * shard order, so a run's coefficients are the same bit for bit with any
 * number of workers for a given B.
 *
 * The coordinator keeps beta and each coefficient's priority in its block
 * (prob->coord, checkpointed), and X, the column norms and a sum tree over
 * the priorities in prob->priv (rebuilt by load; the tree is a function of
 * the priorities). A pass is:
 *   round 0, the full round: every worker pushes its shards' whole gradient
 *     X_d^T r_d (logistic: gradient and curvature) and loss sums; pull
 *     computes the duality gap (lasso_gap_*: --tol stops the run here),
 *     sets every coefficient's priority to the square of the step it would
 *     take now (so a zero that violates its KKT condition gets one), and
 *     updates the U largest, filtered;
 *   rounds 1..R, sampled: schedule_round draws U = --set-size coefficients
 *     with probability ~ priority (a floor, --eta, keeps every coefficient
 *     drawable), drops each one whose column correlation with one already
 *     kept exceeds --corr-threshold (STRADS's dependency check), and sends
 *     the kept set; pull steps the set and sets each coefficient's priority
 *     to the square of its change.
 *   A set's steps (the squared loss): with --set-sweeps K (the default)
 *   up to K Gauss-Seidel sweeps over the set from its Gram matrix, formed
 *   from the coordinator's columns (exact coordinate descent on the set,
 *   which needs no filter); with 0 every step from the same gradient
 *   (Jacobi, STRADS), which needs the filter.
 *   The logistic loss's step is a Newton step on the coordinate's quadratic
 *   model (CDN's direction), bounded; with --line-search K each step is
 *   followed by a round in which the workers push the loss change at K step
 *   sizes, and pull takes the largest that decreases enough (Armijo).
 *   --schedule static with the logistic loss takes the next U coefficients
 *   in turn instead of drawing them.
 * With --round-depth D > 1 a round's push misses the changes of the D - 1
 * rounds before it; for the squared loss pull corrects its gradients with
 * them exactly (g_j -= x_j . sum_k x_k step_k), so every depth computes the
 * same steps as depth 1 would from the same draws; for the logistic loss
 * the rounds in flight's coefficients are not drawn again, and the rest of
 * the lag stays.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "lasso.h"
#include "strata/core.h"

#define NEWTON_BOUND 10.0 /* the largest logistic step of one coordinate */
#define ARMIJO 0.01       /* the line search's sufficient decrease */
#define MAX_SEARCH 8      /* --line-search's largest K */

static uint32_t split(uint32_t n, int B, int b) { return (uint32_t)((uint64_t)n * b / B); }

/* ---- blocks ----------------------------------------------------------- */

/* A shard: this header, then colptr[p + 1] (uint64, shard-local), val[nnz]
 * (double), row[nnz] (uint32, shard-local), y[n] (double), each at 64
 * bytes. */
typedef struct shard_head {
  uint32_t n, p, r0, pad;
  uint64_t nnz;
} shard_head;

typedef struct shard {
  uint32_t n, p;
  const uint64_t *cp;
  const double *val;
  const uint32_t *row;
  const double *y;
} shard;

static size_t shard_offsets(uint32_t n, uint32_t p, uint64_t nnz, size_t off[4]) {
  off[0] = 64;
  off[1] = strata_round_up(off[0] + ((size_t)p + 1) * 8, 64);
  off[2] = strata_round_up(off[1] + nnz * 8, 64);
  off[3] = strata_round_up(off[2] + nnz * 4, 64);
  return strata_round_up(off[3] + (size_t)n * 8, 64);
}

static void shard_of(const strata_block *b, shard *s) {
  const shard_head *h = b->buf;
  size_t off[4];
  shard_offsets(h->n, h->p, h->nnz, off);
  const char *base = b->buf;
  *s = (shard){h->n,
               h->p,
               (const uint64_t *)(base + off[0]),
               (const double *)(base + off[1]),
               (const uint32_t *)(base + off[2]),
               (const double *)(base + off[3])};
}

/* A resident block: a head of 64 bytes (uint32 n), then r[n] (squared
 * loss) or m[n] (logistic), then y[n] at 64 bytes (the logistic loss's
 * objective needs the labels with the margins). */
static size_t resident_len(uint32_t n) { return 64 + 2 * strata_round_up((size_t)n * 8, 64); }
static uint32_t resident_n(const strata_block *b) { return *(const uint32_t *)b->buf; }
static double *resident_v(const strata_block *b) { return (double *)((char *)b->buf + 64); }
static double *resident_y(const strata_block *b) {
  return (double *)((char *)b->buf + 64 + strata_round_up((size_t)resident_n(b) * 8, 64));
}

/* The coordinator block: this head, then beta[p] and prio[p] (double). */
typedef struct lr_coord {
  uint32_t p, n;
  uint32_t converged, pad;
  double lambda_now; /* lambda of the pass under way */
  double floor;      /* every drawable coefficient's priority floor */
  /* the last full round's: the gap, relative to the primal; NaN before */
  double gap, rel_gap, primal;
  /* this pass's */
  double maxd;
  uint64_t updates, touched;
  uint64_t cursor; /* --schedule static: the next coefficient */
} lr_coord;

static double *coord_beta(const strata_problem *prob) {
  return (double *)((char *)prob->coord.buf + sizeof(lr_coord));
}
static double *coord_prio(const strata_problem *prob) {
  return coord_beta(prob) + ((const lr_coord *)prob->coord.buf)->p;
}

/* What a round asks of every worker (its payload). */
enum { W_FULL = 1, W_IDS, W_SEARCH };
typedef struct lr_work {
  uint32_t kind;
  uint32_t n_alpha; /* W_SEARCH: n_alpha step sizes (double), then n_dir lr_moves */
  uint32_t n_dir, pad;
} lr_work;

/* A coefficient's change: what apply gets, and a direction to search. */
typedef struct lr_move {
  uint32_t j, pad;
  double d;
} lr_move;

/* ---- the coordinator's state (prob->priv) ----------------------------- */

typedef struct move_list {
  int64_t index; /* the round whose changes these are; -1: none */
  lr_move *mv;
  uint32_t n, cap;
} move_list;

struct lasso_rounds {
  uint32_t p, n, n_live; /* n_live: coefficients with a nonzero column */
  int loss, logistic_static, line_search;
  uint32_t U, R; /* set size, sampled rounds (steps) a pass */
  double eta, corr, tol;
  uint64_t seed;
  double *norm2;  /* p */
  uint64_t *nnzc; /* p: stored values of column j */
  size_t T;       /* the tree's leaves: a power of 2 >= p */
  double *tree;   /* 2 T: node v sums nodes 2v, 2v + 1; leaf j at T + j */
  int tree_ready;
  uint32_t *stamp, stamp_now;
  double *dense;         /* n, zero between uses */
  double *g, *h;         /* p: a full round's sums */
  uint32_t *cand, *kept; /* U + 1 each */
  double *kept_d;        /* U + 1: the kept coefficients' key */
  double *sums;          /* 2 (U + 1): a sampled round's sums */
  double *step;          /* U + 1: the set's steps */
  int sweeps;            /* --set-sweeps */
  double *gram;          /* (U + 1)^2 with --set-sweeps */
  /* the rounds in flight (depth > 1): their changes (squared loss, for the
   * correction) or their ids (logistic, not drawn again) */
  int depth;
  move_list *ring;
  /* --line-search: the direction pull found, searched the next round */
  move_list dir;
  double dir_slope; /* its directional derivative of F, with the L1 change */
  double alpha[MAX_SEARCH];
};

static void rounds_free(struct lasso_rounds *rs) {
  if (!rs)
    return;
  strata_free(rs->norm2);
  strata_free(rs->nnzc);
  strata_free(rs->tree);
  strata_free(rs->stamp);
  strata_free(rs->dense);
  strata_free(rs->g);
  strata_free(rs->h);
  strata_free(rs->cand);
  strata_free(rs->kept);
  strata_free(rs->kept_d);
  strata_free(rs->sums);
  strata_free(rs->step);
  strata_free(rs->gram);
  for (int i = 0; rs->ring && i < rs->depth; i++)
    strata_free(rs->ring[i].mv);
  strata_free(rs->ring);
  strata_free(rs->dir.mv);
  strata_free(rs);
}

void lasso_rounds_priv_free(struct lasso_rounds *rs) { rounds_free(rs); }

static int oom(void) { return strata_err_set(STRATA_ENOMEM, "lasso: out of memory"); }

static int moves_add(move_list *l, uint32_t j, double d) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * (size_t)l->cap : 64;
    lr_move *mv = strata_realloc(l->mv, cap * sizeof *mv);
    if (!mv)
      return oom();
    l->mv = mv;
    l->cap = (uint32_t)cap;
  }
  l->mv[l->n++] = (lr_move){j, 0, d};
  return 0;
}

/* ---- options ------------------------------------------------------------ */

int lasso_rounds_wanted(const lasso_config *cfg) {
  return cfg->schedule == SCHED_DYNAMIC || cfg->loss == LOSS_LOGISTIC;
}

int lasso_rounds_check(const lasso_config *cfg, const strata_setup *setup) {
  if (cfg->loss == LOSS_LOGISTIC && cfg->standardize)
    return strata_err_set(STRATA_EUSAGE, "--standardize centres y: it is for --loss squared");
  if (cfg->loss != LOSS_LOGISTIC && cfg->bias != 0)
    return strata_err_set(STRATA_EUSAGE, "--bias is for --loss logistic");
  if (cfg->loss != LOSS_LOGISTIC && cfg->line_search)
    return strata_err_set(STRATA_EUSAGE, "--line-search is for --loss logistic");
  if (cfg->loss == LOSS_SQUARED && cfg->set_sweeps && cfg->set_size.given &&
      cfg->set_size.value > 4096)
    return strata_err_set(STRATA_EUSAGE,
                          "--set-size %d with --set-sweeps: at most 4096 (the set's Gram matrix "
                          "has U^2 entries); --set-sweeps 0 takes larger sets",
                          cfg->set_size.value);
  if (!lasso_rounds_wanted(cfg))
    return 0;
  if (strata_mode_is_ps(setup->mode) || setup->mode == STRATA_MODE_SFB)
    return strata_err_set(STRATA_EUSAGE, "%s runs on rounds: --mode serial or scheduled, not %s",
                          cfg->loss == LOSS_LOGISTIC ? "--loss logistic" : "--schedule dynamic",
                          strata_mode_name(setup->mode));
  return 0;
}

/* ---- load ----------------------------------------------------------------- */

/* --bias B: a last column of B in every row (LIBLINEAR's -B). */
static int add_bias(lasso_data *d, double B) {
  uint64_t nnz = d->nnz + d->n;
  uint64_t *cp = strata_realloc(d->colptr, ((size_t)d->p + 2) * sizeof *cp);
  if (!cp)
    return oom();
  d->colptr = cp;
  uint32_t *row = strata_realloc(d->row, nnz * sizeof *row);
  if (!row)
    return oom();
  d->row = row;
  double *val = strata_realloc(d->val, nnz * sizeof *val);
  if (!val)
    return oom();
  d->val = val;
  for (uint32_t i = 0; i < d->n; i++) {
    d->row[d->nnz + i] = i;
    d->val[d->nnz + i] = B;
  }
  d->p++;
  d->nnz = nnz;
  d->colptr[d->p] = nnz;
  return 0;
}

/* The default of --rounds for Jacobi steps: sampled rounds (steps) a pass.
 * A full round reads all of X, a sampled one U columns: p / U sampled
 * rounds read as much, but each costs a round trip, so at most 100. */
static uint32_t default_rounds(uint32_t p, uint32_t U) {
  uint64_t R = ((uint64_t)p + U - 1) / U;
  return R < 1 ? 1 : R > 100 ? 100 : (uint32_t)R;
}

int lasso_rounds_load(const lasso_config *cfg, const strata_setup *setup, strata_problem *prob,
                      lasso_priv *pv) {
  lasso_data *d = &pv->d;
  lasso_meta *m = &pv->m;
  int B = setup->strata, rc = 0, logistic = cfg->loss == LOSS_LOGISTIC;
  uint64_t *cur = NULL, *lo = NULL;
  if (logistic) {
    for (uint32_t i = 0; i < d->n; i++)
      if (d->y[i] != 1 && d->y[i] != -1)
        return strata_err_set(STRATA_EPARSE,
                              "%s: example %u has the label %g; --loss logistic takes 1 and -1",
                              cfg->data, i + 1, d->y[i]);
    if (cfg->bias != 0 && (rc = add_bias(d, cfg->bias)))
      return rc;
  }
  if (d->n < (uint32_t)B)
    return strata_err_set(STRATA_EUSAGE, "%s: %u examples, fewer than the %d shards (--strata)",
                          cfg->data, d->n, B);
  m->n = d->n;
  m->p = d->p;
  m->yy = 0;
  m->lambda_max = 0;
  for (uint32_t i = 0; i < d->n; i++)
    m->yy += d->y[i] * d->y[i];
  /* lambda_max: the smallest lambda with 0 optimal, |grad at 0|_inf:
   * |X^T y| / N, halved for the logistic loss (sigma(0) = 1/2). */
  for (uint32_t f = 0; f < d->p; f++) {
    double g = 0;
    for (uint64_t x = d->colptr[f]; x < d->colptr[f + 1]; x++)
      g += d->val[x] * d->y[d->row[x]];
    m->lambda_max = fmax(m->lambda_max, fabs(g) / d->n / (logistic ? 2 : 1));
  }
  m->lambda = cfg->lambda.given ? cfg->lambda.value : cfg->lambda_ratio.value * m->lambda_max;
  if (cfg->path > 1 && !(m->lambda > 0))
    return strata_err_set(STRATA_EUSAGE, "--path needs lambda > 0");
  strata_log(STRATA_LOG_INFO,
             "lasso: %u examples, %u features, %llu stored; %s loss on rounds; lambda_max %.9g, "
             "lambda %.9g",
             d->n, d->p, (unsigned long long)d->nnz, logistic ? "logistic" : "squared",
             m->lambda_max, m->lambda);

  struct lasso_rounds *rs = strata_calloc(1, sizeof *rs);
  if (!rs)
    return oom();
  pv->rounds = rs;
  rs->p = d->p;
  rs->n = d->n;
  rs->loss = cfg->loss;
  rs->logistic_static = logistic && cfg->schedule == SCHED_STATIC;
  rs->line_search = logistic ? cfg->line_search : 0;
  /* The defaults by measurement (docs/lasso.md): exact sweeps over a
   * large set need few rounds and no filter; Jacobi steps need the filter
   * and small sets. */
  int sweeps = logistic ? 0 : cfg->set_sweeps;
  rs->U = cfg->set_size.given ? (uint32_t)cfg->set_size.value : sweeps ? 1024 : logistic ? 64 : 16;
  rs->R = cfg->rounds.given ? (uint32_t)cfg->rounds.value
          : sweeps          ? 1
                            : default_rounds(d->p, rs->U);
  rs->corr = cfg->corr_threshold.given ? cfg->corr_threshold.value : sweeps ? 1 : 0.1;
  rs->eta = cfg->eta;
  rs->tol = setup->tol;
  rs->seed = setup->seed;
  rs->T = 1;
  while (rs->T < d->p)
    rs->T <<= 1;
  double bytes = (double)d->nnz * 12 + (double)B * ((double)d->p + 1) * 8 + (double)d->n * 24 +
                 (double)d->p * 48 + (double)rs->T * 16;
  if ((rc = strata_problem_fits("lasso's shards and the coordinator's state", bytes,
                                "lower --strata")))
    return rc;
  rs->norm2 = strata_malloc((size_t)d->p * 8);
  rs->nnzc = strata_malloc((size_t)d->p * 8);
  rs->tree = strata_calloc(2 * rs->T, 8);
  rs->stamp = strata_calloc(d->p, 4);
  rs->dense = strata_calloc(d->n, 8);
  rs->g = strata_malloc((size_t)d->p * 8);
  rs->h = strata_malloc((size_t)d->p * 8);
  rs->cand = strata_malloc(((size_t)rs->U + 1) * 4);
  rs->kept = strata_malloc(((size_t)rs->U + 1) * 4);
  rs->kept_d = strata_malloc(((size_t)rs->U + 1) * 8);
  rs->sums = strata_malloc(((size_t)rs->U + 1) * 16);
  rs->step = strata_malloc(((size_t)rs->U + 1) * 8);
  rs->sweeps = sweeps;
  if (rs->sweeps)
    rs->gram = strata_malloc(((size_t)rs->U + 1) * ((size_t)rs->U + 1) * 8);
  if (!rs->norm2 || !rs->nnzc || !rs->tree || !rs->stamp || !rs->dense || !rs->g || !rs->h ||
      !rs->cand || !rs->kept || !rs->kept_d || !rs->sums || !rs->step || (rs->sweeps && !rs->gram))
    return oom();
  for (uint32_t f = 0; f < d->p; f++) {
    double s = 0;
    for (uint64_t x = d->colptr[f]; x < d->colptr[f + 1]; x++)
      s += d->val[x] * d->val[x];
    rs->norm2[f] = s;
    rs->nnzc[f] = d->colptr[f + 1] - d->colptr[f];
    rs->n_live += s > 0;
  }
  for (int k = 0; k < MAX_SEARCH; k++)
    rs->alpha[k] = ldexp(1, -k);

  /* The shards: each column's rows are increasing, so its rows in shard s
   * are the run that follows shard s - 1's. */
  if ((rc = strata_problem_alloc(prob, B, B, 0, 0)))
    return rc;
  cur = strata_malloc(((size_t)d->p + 1) * 8);
  lo = strata_malloc(((size_t)d->p + 1) * 8);
  if (!cur || !lo) {
    rc = oom();
    goto done;
  }
  memcpy(cur, d->colptr, (size_t)d->p * 8);
  for (int s = 0; s < B; s++) {
    uint32_t r0 = split(d->n, B, s), r1 = split(d->n, B, s + 1), n = r1 - r0;
    uint64_t nnz = 0;
    memcpy(lo, cur, (size_t)d->p * 8);
    for (uint32_t f = 0; f < d->p; f++) {
      while (cur[f] < d->colptr[f + 1] && d->row[cur[f]] < r1)
        cur[f]++;
      nnz += cur[f] - lo[f];
    }
    size_t off[4], len = shard_offsets(n, d->p, nnz, off);
    char *buf = strata_alloc_aligned(len);
    size_t rlen = resident_len(n);
    char *res = strata_alloc_aligned(rlen);
    prob->data[s] = (strata_block){buf, len, 0, 0};
    prob->resident[s] = (strata_block){res, rlen, 0, 0};
    if (!buf || !res) {
      rc = oom();
      goto done;
    }
    memset(buf, 0, len); /* padding too: the engine checksums the data it loaded */
    *(shard_head *)buf = (shard_head){n, d->p, r0, 0, nnz};
    uint64_t *cp = (uint64_t *)(buf + off[0]);
    double *val = (double *)(buf + off[1]);
    uint32_t *row = (uint32_t *)(buf + off[2]);
    double *y = (double *)(buf + off[3]);
    uint64_t a = 0;
    for (uint32_t f = 0; f < d->p; f++) {
      cp[f] = a;
      for (uint64_t x = lo[f]; x < cur[f]; x++, a++) {
        val[a] = d->val[x];
        row[a] = d->row[x] - r0;
      }
    }
    cp[d->p] = a;
    memcpy(y, d->y + r0, (size_t)n * 8);
    memset(res, 0, rlen);
    *(uint32_t *)res = n;
    /* beta = 0: the residual is y, the margins 0 */
    if (!logistic)
      memcpy(resident_v(&prob->resident[s]), y, (size_t)n * 8);
    memcpy(resident_y(&prob->resident[s]), y, (size_t)n * 8);
  }

  prob->coord.len = sizeof(lr_coord) + 2 * (size_t)d->p * 8;
  if (!(prob->coord.buf = strata_calloc(1, prob->coord.len))) {
    rc = oom();
    goto done;
  }
  lr_coord *c = prob->coord.buf;
  *c = (lr_coord){
      .p = d->p, .n = d->n, .lambda_now = m->lambda, .gap = NAN, .rel_gap = NAN, .primal = NAN};
  /* Until the first full round, every coefficient with a column is as
   * likely as any other. */
  double *prio = coord_prio(prob);
  for (uint32_t f = 0; f < d->p; f++)
    prio[f] = 0;
  c->floor = 1;
  if (!(prob->meta = strata_malloc(sizeof *m))) {
    rc = oom();
    goto done;
  }
  memcpy(prob->meta, m, sizeof *m);
  prob->meta_len = sizeof *m;
  /* A pass: the full round, then R sampled steps (two rounds each with a
   * line search: the direction, then its search). */
  uint64_t steps = rs->line_search ? 2 * ((uint64_t)rs->R + 1) : 1 + (uint64_t)rs->R;
  prob->rounds_per_pass = steps;
  prob->n_examples = d->p + (uint64_t)rs->R * rs->U;
done:
  strata_free(cur);
  strata_free(lo);
  return rc;
}

/* ---- the sum tree ------------------------------------------------------- */

static double leaf_weight(const struct lasso_rounds *rs, const lr_coord *c, const double *prio,
                          uint32_t j) {
  return rs->norm2[j] > 0 ? prio[j] + c->floor : 0;
}

static void tree_build(struct lasso_rounds *rs, const strata_problem *prob) {
  const lr_coord *c = prob->coord.buf;
  const double *prio = coord_prio(prob);
  double *t = rs->tree;
  for (size_t l = 0; l < rs->T; l++)
    t[rs->T + l] = l < rs->p ? leaf_weight(rs, c, prio, (uint32_t)l) : 0;
  for (size_t v = rs->T - 1; v >= 1; v--)
    t[v] = t[2 * v] + t[2 * v + 1];
  rs->tree_ready = 1;
}

/* Leaf j's new weight; each node above is its children's sum again, so the
 * tree is always what tree_build makes of the priorities (a resumed run
 * draws what a straight one does). */
static void tree_set(struct lasso_rounds *rs, uint32_t j, double w) {
  double *t = rs->tree;
  size_t v = rs->T + j;
  t[v] = w;
  for (v /= 2; v >= 1; v /= 2)
    t[v] = t[2 * v] + t[2 * v + 1];
}

static uint32_t tree_draw(const struct lasso_rounds *rs, strata_rng *rng) {
  const double *t = rs->tree;
  double x = strata_rng_uniform(rng) * t[1];
  size_t v = 1;
  while (v < rs->T) {
    v *= 2;
    if (x >= t[v] && t[v + 1] > 0)
      x -= t[v++];
  }
  return (uint32_t)(v - rs->T);
}

/* ---- the coordinator's kernels ---------------------------------------- */

static double col_dot_dense(const lasso_data *d, uint32_t j, const double *v) {
  double s = 0;
  for (uint64_t x = d->colptr[j]; x < d->colptr[j + 1]; x++)
    s += d->val[x] * v[d->row[x]];
  return s;
}

static void col_scatter(const lasso_data *d, uint32_t j, double a, double *v) {
  for (uint64_t x = d->colptr[j]; x < d->colptr[j + 1]; x++)
    v[d->row[x]] += a * d->val[x];
}

static void col_clear(const lasso_data *d, uint32_t j, double *v) {
  for (uint64_t x = d->colptr[j]; x < d->colptr[j + 1]; x++)
    v[d->row[x]] = 0;
}

/* STRADS's dependency check: keeps cand[0..nc) in order, dropping each one
 * whose |correlation| with one already kept exceeds rs->corr. Returns the
 * count kept into rs->kept. */
static uint32_t filter(struct lasso_rounds *rs, const lasso_data *d, const uint32_t *cand,
                       uint32_t nc) {
  uint32_t nk = 0;
  for (uint32_t c = 0; c < nc; c++) {
    uint32_t a = cand[c];
    int keep = 1;
    if (rs->corr < 1 && nk > 0) {
      col_scatter(d, a, 1, rs->dense);
      for (uint32_t q = 0; q < nk && keep; q++) {
        uint32_t b = rs->kept[q];
        if (fabs(col_dot_dense(d, b, rs->dense)) > rs->corr * sqrt(rs->norm2[a] * rs->norm2[b]))
          keep = 0;
      }
      col_clear(d, a, rs->dense);
    }
    if (keep)
      rs->kept[nk++] = a;
  }
  return nk;
}

/* The squared loss's coordinate minimiser from g = x_j . r at beta_j = b. */
static double cd_target(double g, double n2, double b, double thr) {
  double z = g + n2 * b;
  return z > thr ? (z - thr) / n2 : z < -thr ? (z + thr) / n2 : 0;
}

/* The logistic loss's Newton direction for one coordinate: the minimiser
 * of G d + H d^2 / 2 + lambda |w + d| (G, H: the mean loss's gradient and
 * curvature), bounded. */
static double newton_dir(double G, double H, double w, double lambda) {
  double d;
  if (H < 1e-12)
    H = 1e-12;
  if (G + lambda <= H * w)
    d = -(G + lambda) / H;
  else if (G - lambda >= H * w)
    d = -(G - lambda) / H;
  else
    d = -w;
  return d > NEWTON_BOUND ? NEWTON_BOUND : d < -NEWTON_BOUND ? -NEWTON_BOUND : d;
}

/* log(1 + exp(x)) without overflow. */
static inline double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

/* ---- schedule_round ------------------------------------------------------ */

static int ring_open(struct lasso_rounds *rs, int depth) {
  if (rs->ring)
    return 0;
  rs->ring = strata_calloc((size_t)depth, sizeof *rs->ring);
  if (!rs->ring)
    return oom();
  rs->depth = depth;
  for (int i = 0; i < depth; i++)
    rs->ring[i].index = -1;
  return 0;
}

/* Whether ring entry e holds a round whose changes round t's push missed:
 * one of t - depth + 1 .. t - 1 in t's pass (a pass starts with every
 * earlier round applied). */
static int in_flight(const struct lasso_rounds *rs, const move_list *e, const strata_round *r) {
  int64_t first = r->index - r->in_pass;
  return e->index >= first && e->index > r->index - r->depth && e->index < r->index;
}

/* The next U coefficients with a column from the cursor, in turn. */
static uint32_t next_in_turn(struct lasso_rounds *rs, lr_coord *c) {
  uint32_t nc = 0;
  for (uint32_t seen = 0; seen < rs->p && nc < rs->U; seen++) {
    uint32_t j = (uint32_t)(c->cursor % rs->p);
    c->cursor = (j + 1) % rs->p;
    if (rs->norm2[j] > 0)
      rs->cand[nc++] = j;
  }
  return nc;
}

/* U distinct coefficients drawn by priority from the tree, skipping those
 * stamped already (the rounds in flight's, for the logistic loss). At most
 * 4 U draws. */
static uint32_t draw(struct lasso_rounds *rs, const strata_round *r) {
  strata_rng rng;
  strata_rng_seed(&rng, strata_mix64(rs->seed ^ strata_mix64((uint64_t)r->index)));
  uint32_t nc = 0;
  for (uint32_t k = 0; k < 4 * rs->U && nc < rs->U && rs->tree[1] > 0; k++) {
    uint32_t j = tree_draw(rs, &rng);
    if (j >= rs->p || rs->stamp[j] == rs->stamp_now)
      continue;
    rs->stamp[j] = rs->stamp_now;
    rs->cand[nc++] = j;
  }
  return nc;
}

static void stamp_next(struct lasso_rounds *rs) {
  if (++rs->stamp_now == 0) { /* wrapped: forget every mark */
    memset(rs->stamp, 0, (size_t)rs->p * 4);
    rs->stamp_now = 1;
  }
}

int lasso_rounds_schedule(const void *vcfg, strata_problem *prob, const strata_round *r,
                          strata_round_plan *plan) {
  const lasso_config *cfg = vcfg;
  lasso_priv *pv = prob->priv;
  struct lasso_rounds *rs = pv->rounds;
  lr_coord *c = prob->coord.buf;
  int rc;
  if (rs->line_search && r->depth > 1)
    return strata_err_set(STRATA_EUSAGE, "--line-search needs --round-depth 1");
  if ((rc = ring_open(rs, r->depth)))
    return rc;
  if (r->in_pass == 0) {
    c->lambda_now = lasso_lambda_at(cfg, &pv->m, r->pass);
    c->maxd = 0;
    c->updates = c->touched = 0;
  }
  if (c->converged)
    return STRATA_ROUND_CONVERGED;
  lr_work w = {0, 0, 0, 0};
  if (r->in_pass == 0) {
    w.kind = W_FULL;
    return strata_round_assign(plan, -1, NULL, 0, &w, sizeof w);
  }
  if (rs->dir.n && rs->dir.index == r->index - 1) {
    /* The line search of the direction the last round found. */
    w = (lr_work){W_SEARCH, (uint32_t)rs->line_search, rs->dir.n, 0};
    size_t len = sizeof w + (size_t)w.n_alpha * 8 + (size_t)w.n_dir * sizeof(lr_move);
    char *buf = strata_malloc(len);
    if (!buf)
      return oom();
    memcpy(buf, &w, sizeof w);
    memcpy(buf + sizeof w, rs->alpha, (size_t)w.n_alpha * 8);
    memcpy(buf + sizeof w + (size_t)w.n_alpha * 8, rs->dir.mv, (size_t)w.n_dir * sizeof(lr_move));
    rc = strata_round_assign(plan, -1, NULL, 0, buf, len);
    strata_free(buf);
    return rc;
  }
  rs->dir.n = 0;
  if (!rs->tree_ready && !rs->logistic_static)
    tree_build(rs, prob);
  stamp_next(rs);
  move_list *mine = &rs->ring[r->index % r->depth];
  if (rs->loss == LOSS_LOGISTIC) {
    /* The gradients of the rounds in flight's coefficients will be stale:
     * they are not drawn again until those rounds are pulled. */
    for (int i = 0; i < rs->depth; i++)
      if (in_flight(rs, &rs->ring[i], r))
        for (uint32_t k = 0; k < rs->ring[i].n; k++)
          rs->stamp[rs->ring[i].mv[k].j] = rs->stamp_now;
  }
  uint32_t nc = rs->logistic_static ? next_in_turn(rs, c) : draw(rs, r);
  uint32_t nk = filter(rs, &pv->d, rs->cand, nc);
  if (rs->loss == LOSS_LOGISTIC) {
    mine->index = r->index;
    mine->n = 0;
    for (uint32_t q = 0; q < nk; q++)
      if ((rc = moves_add(mine, rs->kept[q], 0)))
        return rc;
  }
  if (nk == 0)
    return 0; /* nothing to draw: a round without work */
  w.kind = W_IDS;
  return strata_round_assign(plan, -1, rs->kept, nk, &w, sizeof w);
}

/* ---- pull ----------------------------------------------------------------- */

/* The round's partials, added in shard order into out[0..k): each shard
 * pushed k doubles. */
static int sum_parts(const strata_problem *prob, const strata_round_part *parts, size_t k,
                     double *out) {
  for (size_t i = 0; i < k; i++)
    out[i] = 0;
  for (int d = 0; d < prob->n_data; d++) {
    if (parts[d].len != k * 8)
      return strata_err_set(STRATA_EINVAL, "lasso: shard %d pushed %zu bytes, not %zu", d,
                            parts[d].len, k * 8);
    const double *v = parts[d].buf;
    for (size_t i = 0; i < k; i++)
      out[i] += v[i];
  }
  return 0;
}

/* A coefficient's change, everywhere it shows: beta, the pass's figures,
 * the move every worker applies, and the rounds in flight's record. */
static int move(struct lasso_rounds *rs, lr_coord *c, double *beta, uint32_t j, double d,
                strata_bytes *out, move_list *rec) {
  if (d == 0)
    return 0;
  beta[j] += d;
  c->maxd = fmax(c->maxd, fabs(d));
  c->touched += rs->nnzc[j];
  lr_move mv = {j, 0, d};
  int rc = strata_bytes_put(out, &mv, sizeof mv);
  if (!rc && rec)
    rc = moves_add(rec, j, d);
  return rc;
}

/* The U largest priorities > 0, largest first, into rs->cand; returns the
 * count. A min-heap of U over all p. */
static uint32_t top_u(struct lasso_rounds *rs, const double *prio) {
  uint32_t n = 0, U = rs->U;
  uint32_t *id = rs->cand;
  double *key = rs->kept_d;
  for (uint32_t j = 0; j < rs->p; j++) {
    double v = prio[j];
    if (!(v > 0) || (n == U && v <= key[0]))
      continue;
    uint32_t i;
    if (n < U) {
      i = n++;
      while (i > 0 && key[(i - 1) / 2] > v) {
        key[i] = key[(i - 1) / 2];
        id[i] = id[(i - 1) / 2];
        i = (i - 1) / 2;
      }
    } else {
      i = 0;
      for (;;) {
        uint32_t l = 2 * i + 1, s = l;
        if (l >= n)
          break;
        if (l + 1 < n && key[l + 1] < key[l])
          s = l + 1;
        if (key[s] >= v)
          break;
        key[i] = key[s];
        id[i] = id[s];
        i = s;
      }
    }
    key[i] = v;
    id[i] = j;
  }
  /* largest first (ties by id, so the order is the data's alone) */
  for (uint32_t a = 1; a < n; a++)
    for (uint32_t b = a;
         b > 0 && (key[b] > key[b - 1] || (key[b] == key[b - 1] && id[b] < id[b - 1])); b--) {
      double tk = key[b];
      key[b] = key[b - 1];
      key[b - 1] = tk;
      uint32_t ti = id[b];
      id[b] = id[b - 1];
      id[b - 1] = ti;
    }
  return n;
}

/* A coefficient's new priority, in the tree too when there is one. */
static void set_prio(struct lasso_rounds *rs, const lr_coord *c, double *prio, uint32_t j,
                     double v) {
  prio[j] = v;
  if (rs->tree_ready)
    tree_set(rs, j, leaf_weight(rs, c, prio, j));
}

/* --line-search: the Newton directions of ids[0..n) (their sums g[q],
 * h[q]) become the direction the next round searches; nothing moves yet. */
static int take_direction(struct lasso_rounds *rs, lr_coord *c, const double *beta,
                          const strata_round *r, const uint32_t *ids, uint32_t n, const double *g,
                          const double *h) {
  double N = rs->n, lambda = c->lambda_now;
  rs->dir.n = 0;
  rs->dir.index = r->index;
  rs->dir_slope = 0;
  for (uint32_t q = 0; q < n; q++) {
    uint32_t j = ids[q];
    double G = g[q] / N, d = newton_dir(G, h[q] / N, beta[j], lambda);
    if (d == 0)
      continue;
    rs->dir_slope += G * d + lambda * (fabs(beta[j] + d) - fabs(beta[j]));
    int rc = moves_add(&rs->dir, j, d);
    if (rc)
      return rc;
  }
  return 0;
}

/* The set's steps from its sums g[q], h[q] (q: place in ids): Newton
 * directions (logistic; searched the next round with --line-search),
 * Jacobi (every step from the same gradient: STRADS), or --set-sweeps K
 * Gauss-Seidel sweeps over the set with its Gram matrix, each step seeing
 * the earlier ones (the squared loss's exact coordinate descent on the
 * set). */
static int set_steps(strata_problem *prob, const strata_round *r, const uint32_t *ids, uint32_t n,
                     double *g, const double *h, move_list *rec, strata_bytes *out) {
  lasso_priv *pv = prob->priv;
  struct lasso_rounds *rs = pv->rounds;
  lr_coord *c = prob->coord.buf;
  double *beta = coord_beta(prob), *prio = coord_prio(prob);
  double N = rs->n, lambda = c->lambda_now, thr = N * lambda;
  int logistic = rs->loss == LOSS_LOGISTIC, rc;
  for (uint32_t q = 0; q < n; q++)
    if (ids[q] >= rs->p)
      return strata_err_set(STRATA_EINVAL, "lasso: coefficient %u of %u", ids[q], rs->p);
  if (logistic && rs->line_search)
    return take_direction(rs, c, beta, r, ids, n, g, h);
  double *step = rs->step;
  if (logistic || rs->sweeps == 0 || n < 2) {
    for (uint32_t q = 0; q < n; q++) {
      uint32_t j = ids[q];
      step[q] = logistic ? newton_dir(g[q] / N, h[q] / N, beta[j], lambda)
                         : cd_target(g[q], rs->norm2[j], beta[j], thr) - beta[j];
    }
  } else {
    /* G = X_S^T X_S from the coordinator's columns; g follows every step:
     * g -= G[., q] change. */
    const lasso_data *d = &pv->d;
    double *G = rs->gram;
    for (uint32_t a = 0; a < n; a++) {
      col_scatter(d, ids[a], 1, rs->dense);
      for (uint32_t b = a; b < n; b++)
        G[(size_t)a * n + b] = G[(size_t)b * n + a] = col_dot_dense(d, ids[b], rs->dense);
      col_clear(d, ids[a], rs->dense);
      step[a] = 0;
    }
    /* Until a sweep moves no coefficient by more than 1e-3 of the first
     * sweep's largest move (a change of x_j scaled by |x_j|). */
    double first = 0;
    for (int sw = 0; sw < rs->sweeps; sw++) {
      double most = 0;
      for (uint32_t q = 0; q < n; q++) {
        uint32_t j = ids[q];
        double b = beta[j] + step[q], ch = cd_target(g[q], rs->norm2[j], b, thr) - b;
        if (ch == 0)
          continue;
        most = fmax(most, fabs(ch) * sqrt(rs->norm2[j]));
        step[q] += ch;
        for (uint32_t k = 0; k < n; k++)
          g[k] -= G[(size_t)q * n + k] * ch;
      }
      if (sw == 0)
        first = most;
      if (most <= 1e-3 * first)
        break;
    }
  }
  for (uint32_t q = 0; q < n; q++) {
    if ((rc = move(rs, c, beta, ids[q], step[q], out, rec)))
      return rc;
    set_prio(rs, c, prio, ids[q], step[q] * step[q]);
  }
  c->updates += n;
  return 0;
}

static int pull_full(const lasso_config *cfg, strata_problem *prob, const strata_round *r,
                     const strata_round_part *parts, strata_bytes *out) {
  lasso_priv *pv = prob->priv;
  struct lasso_rounds *rs = pv->rounds;
  lr_coord *c = prob->coord.buf;
  double *beta = coord_beta(prob), *prio = coord_prio(prob);
  uint32_t p = rs->p;
  int logistic = rs->loss == LOSS_LOGISTIC;
  double N = rs->n, lambda = c->lambda_now, extra[2];
  size_t k = logistic ? 2 * (size_t)p + 2 : (size_t)p + 2;
  (void)cfg;
  for (int d = 0; d < prob->n_data; d++)
    if (parts[d].len != k * 8)
      return strata_err_set(STRATA_EINVAL, "lasso: shard %d pushed %zu bytes, not %zu", d,
                            parts[d].len, k * 8);
  /* g (and h) straight into their arrays, the sums after them; each added
   * in shard order */
  for (size_t i = 0; i < k; i++) {
    double s = 0;
    for (int d = 0; d < prob->n_data; d++)
      s += ((const double *)parts[d].buf)[i];
    if (i < p)
      rs->g[i] = s;
    else if (logistic && i < 2 * (size_t)p)
      rs->h[i - p] = s;
    else
      extra[i - (logistic ? 2 * (size_t)p : p)] = s;
  }
  double l1 = 0, gmax = 0;
  for (uint32_t j = 0; j < p; j++) {
    l1 += fabs(beta[j]);
    gmax = fmax(gmax, fabs(rs->g[j]));
  }
  double primal, gap;
  if (logistic) {
    gap = lasso_gap_logistic(extra[0] / N, extra[1] / N, l1, gmax / N, lambda, &primal);
  } else {
    gap = lasso_gap_squared(extra[0], extra[1], l1, gmax, N * lambda, &primal);
    gap /= N;
    primal /= N;
  }
  c->gap = gap;
  c->primal = primal;
  c->rel_gap = primal > 0 ? gap / primal : gap > 0 ? INFINITY : 0;
  c->touched += pv->d.nnz;
  if (rs->tol > 0 && c->rel_gap <= rs->tol && lambda == pv->m.lambda) {
    /* Converged: beta stays the one the gap was measured at. */
    c->converged = 1;
    return 0;
  }
  /* Every coefficient's priority: the square of the step it would take. */
  double sum = 0;
  for (uint32_t j = 0; j < p; j++) {
    double d = 0;
    if (rs->norm2[j] > 0)
      d = logistic ? newton_dir(rs->g[j] / N, rs->h[j] / N, beta[j], lambda)
                   : cd_target(rs->g[j], rs->norm2[j], beta[j], N * lambda) - beta[j];
    prio[j] = d * d;
    sum += prio[j];
  }
  c->floor = rs->n_live ? rs->eta * sum / rs->n_live : 0;
  if (!rs->logistic_static)
    tree_build(rs, prob);
  /* The largest steps, filtered, taken now (Gauss-Southwell). */
  uint32_t nc = top_u(rs, prio);
  uint32_t nk = filter(rs, &pv->d, rs->cand, nc);
  move_list *rec = NULL;
  if (!logistic && r->depth > 1) {
    rec = &rs->ring[r->index % r->depth];
    rec->index = r->index;
    rec->n = 0;
  }
  for (uint32_t q = 0; q < nk; q++) {
    rs->sums[q] = rs->g[rs->kept[q]];
    rs->sums[nk + q] = rs->h[rs->kept[q]];
  }
  return set_steps(prob, r, rs->kept, nk, rs->sums, rs->sums + nk, rec, out);
}

static int pull_ids(strata_problem *prob, const strata_round *r, const strata_round_work *work,
                    const strata_round_part *parts, strata_bytes *out) {
  lasso_priv *pv = prob->priv;
  struct lasso_rounds *rs = pv->rounds;
  lr_coord *c = prob->coord.buf;
  const uint32_t *ids = work->ids;
  uint32_t n = work->n_ids;
  int logistic = rs->loss == LOSS_LOGISTIC, rc;
  if (n > rs->U + 1)
    return strata_err_set(STRATA_EINVAL, "lasso: a round of %u coefficients", n);
  double *g = rs->sums, *h = rs->sums + n;
  if ((rc = sum_parts(prob, parts, logistic ? 2 * (size_t)n : n, g)))
    return rc;
  for (uint32_t q = 0; q < n; q++)
    c->touched += rs->nnzc[ids[q]];
  move_list *rec = NULL;
  if (!logistic && r->depth > 1) {
    /* The push missed the changes of the rounds in flight: with their
     * residual change v = sum x_k d_k, x_j . r is g_j - x_j . v. */
    const lasso_data *d = &pv->d;
    int any = 0;
    for (int i = 0; i < rs->depth; i++)
      if (in_flight(rs, &rs->ring[i], r))
        for (uint32_t k = 0; k < rs->ring[i].n; k++, any = 1)
          col_scatter(d, rs->ring[i].mv[k].j, rs->ring[i].mv[k].d, rs->dense);
    if (any) {
      for (uint32_t q = 0; q < n; q++)
        g[q] -= col_dot_dense(d, ids[q], rs->dense);
      for (int i = 0; i < rs->depth; i++)
        if (in_flight(rs, &rs->ring[i], r))
          for (uint32_t k = 0; k < rs->ring[i].n; k++)
            col_clear(d, rs->ring[i].mv[k].j, rs->dense);
    }
    rec = &rs->ring[r->index % r->depth];
    rec->index = r->index;
    rec->n = 0;
  }
  return set_steps(prob, r, ids, n, g, h, rec, out);
}

/* The line search: the loss's change at each step size (pushed), the L1
 * term's (here); the largest step that decreases F by ARMIJO of the
 * directional derivative is taken, else none. */
static int pull_search(strata_problem *prob, const lr_work *w, const strata_round_part *parts,
                       strata_bytes *out) {
  lasso_priv *pv = prob->priv;
  struct lasso_rounds *rs = pv->rounds;
  lr_coord *c = prob->coord.buf;
  double *beta = coord_beta(prob), *prio = coord_prio(prob), dl[MAX_SEARCH];
  int rc;
  if (w->n_alpha > MAX_SEARCH || w->n_dir != rs->dir.n)
    return strata_err_set(STRATA_EINVAL, "lasso: a line search of %u steps, %u coefficients",
                          w->n_alpha, w->n_dir);
  if ((rc = sum_parts(prob, parts, w->n_alpha, dl)))
    return rc;
  double alpha = 0, lambda = c->lambda_now;
  for (uint32_t k = 0; k < w->n_alpha && alpha == 0; k++) {
    double a = rs->alpha[k], l1 = 0;
    for (uint32_t q = 0; q < rs->dir.n; q++) {
      const lr_move *mv = &rs->dir.mv[q];
      l1 += fabs(beta[mv->j] + a * mv->d) - fabs(beta[mv->j]);
    }
    if (dl[k] / rs->n + lambda * l1 <= ARMIJO * a * rs->dir_slope)
      alpha = a;
  }
  for (uint32_t q = 0; q < rs->dir.n; q++) {
    const lr_move *mv = &rs->dir.mv[q];
    c->touched += rs->nnzc[mv->j];
    if ((rc = move(rs, c, beta, mv->j, alpha * mv->d, out, NULL)))
      return rc;
    set_prio(rs, c, prio, mv->j, alpha * mv->d * alpha * mv->d);
  }
  c->updates += rs->dir.n;
  rs->dir.n = 0;
  return 0;
}

int lasso_rounds_pull(const void *vcfg, strata_problem *prob, const strata_round *r,
                      const strata_round_plan *plan, const strata_round_part *parts,
                      strata_bytes *apply_out) {
  strata_round_work work = strata_round_work_of(plan, 0);
  lr_work w;
  if (work.payload_len < sizeof w)
    return 0; /* a round without work */
  memcpy(&w, work.payload, sizeof w);
  switch (w.kind) {
  case W_FULL:
    return pull_full(vcfg, prob, r, parts, apply_out);
  case W_IDS:
    return pull_ids(prob, r, &work, parts, apply_out);
  case W_SEARCH:
    return pull_search(prob, &w, parts, apply_out);
  default:
    return strata_err_set(STRATA_EINVAL, "lasso: a round of kind %u", w.kind);
  }
}

/* ---- the workers -------------------------------------------------------- */

struct lasso_rworker {
  int loss;
  double N, yy;
  size_t cap;          /* rows of the scratch below */
  double *a, *b;       /* per row: the gradient's and the curvature's weights */
  double *delta;       /* per row: a search's change of the margin, 0 between uses */
  uint32_t *rows;      /* a search's changed rows */
  unsigned char *mark; /* 1 on those rows */
};

int lasso_rounds_worker_init(const lasso_config *cfg, const strata_setup *setup,
                             const lasso_meta *m, struct lasso_rworker **out) {
  (void)setup;
  struct lasso_rworker *rw = strata_calloc(1, sizeof *rw);
  if (!rw)
    return oom();
  rw->loss = cfg->loss;
  rw->N = m->n;
  rw->yy = m->yy;
  *out = rw;
  return 0;
}

void lasso_rounds_worker_free(struct lasso_rworker *rw) {
  if (!rw)
    return;
  strata_free(rw->a);
  strata_free(rw->b);
  strata_free(rw->delta);
  strata_free(rw->rows);
  strata_free(rw->mark);
  strata_free(rw);
}

static int scratch(struct lasso_rworker *rw, uint32_t n) {
  if (rw->cap >= n)
    return 0;
  strata_free(rw->a);
  strata_free(rw->b);
  strata_free(rw->delta);
  strata_free(rw->rows);
  strata_free(rw->mark);
  rw->a = strata_calloc(n, 8);
  rw->b = strata_calloc(n, 8);
  rw->delta = strata_calloc(n, 8);
  rw->rows = strata_malloc((size_t)n * 4);
  rw->mark = strata_calloc(n, 1);
  rw->cap = n;
  if (!rw->a || !rw->b || !rw->delta || !rw->rows || !rw->mark) {
    rw->cap = 0;
    return oom();
  }
  return 0;
}

/* x_j . v over the shard, with four sums so that the loop is not one chain
 * of dependent adds. */
static inline double shard_dot(const shard *s, uint32_t j, const double *restrict v) {
  uint64_t a = s->cp[j], e = s->cp[j + 1];
  const double *restrict x = s->val;
  const uint32_t *restrict ix = s->row;
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (; a + 4 <= e; a += 4) {
    s0 += x[a] * v[ix[a]];
    s1 += x[a + 1] * v[ix[a + 1]];
    s2 += x[a + 2] * v[ix[a + 2]];
    s3 += x[a + 3] * v[ix[a + 3]];
  }
  for (; a < e; a++)
    s0 += x[a] * v[ix[a]];
  return (s0 + s1) + (s2 + s3);
}

static inline double shard_dot2(const shard *s, uint32_t j, const double *restrict v) {
  double t = 0;
  for (uint64_t a = s->cp[j]; a < s->cp[j + 1]; a++)
    t += s->val[a] * s->val[a] * v[s->row[a]];
  return t;
}

/* The logistic loss's per-row weights at margins m: a_i = -y_i t_i (the
 * gradient's), b_i = t_i (1 - t_i) (the curvature's), t_i = sigma(-y_i m_i). */
static void logistic_weights(struct lasso_rworker *rw, const shard *s, const double *m) {
  for (uint32_t i = 0; i < s->n; i++) {
    double t = 1 / (1 + exp(s->y[i] * m[i]));
    rw->a[i] = -s->y[i] * t;
    rw->b[i] = t * (1 - t);
  }
}

int lasso_rounds_push(struct lasso_rworker *rw, const strata_round *r, const strata_task_view *tv,
                      const strata_round_work *work, strata_bytes *out) {
  (void)r;
  shard s;
  shard_of(tv->data, &s);
  lr_work w;
  if (work->payload_len < sizeof w)
    return strata_err_set(STRATA_EINVAL, "lasso: a round's work of %zu bytes", work->payload_len);
  memcpy(&w, work->payload, sizeof w);
  const double *v = resident_v(tv->resident);
  int logistic = rw->loss == LOSS_LOGISTIC, rc;
  if ((rc = scratch(rw, s.n)))
    return rc;
  if (w.kind == W_FULL) {
    size_t k = logistic ? 2 * (size_t)s.p + 2 : (size_t)s.p + 2;
    double *o = strata_bytes_add(out, k * 8);
    if (!o)
      return STRATA_ENOMEM;
    if (!logistic) {
      double rr = 0, ry = 0;
      for (uint32_t j = 0; j < s.p; j++)
        o[j] = shard_dot(&s, j, v);
      for (uint32_t i = 0; i < s.n; i++) {
        rr += v[i] * v[i];
        ry += v[i] * s.y[i];
      }
      o[s.p] = rr;
      o[s.p + 1] = ry;
      return 0;
    }
    logistic_weights(rw, &s, v);
    for (uint32_t j = 0; j < s.p; j++) {
      o[j] = shard_dot(&s, j, rw->a);
      o[s.p + j] = shard_dot2(&s, j, rw->b);
    }
    double loss = 0, ent = 0;
    for (uint32_t i = 0; i < s.n; i++) {
      double z = s.y[i] * v[i], t = 1 / (1 + exp(z));
      loss += softplus(-z);
      ent += t * softplus(z) + (1 - t) * softplus(-z);
    }
    o[2 * (size_t)s.p] = loss;
    o[2 * (size_t)s.p + 1] = ent;
    return 0;
  }
  if (w.kind == W_IDS) {
    uint32_t n = work->n_ids;
    double *o = strata_bytes_add(out, (logistic ? 2 : 1) * (size_t)n * 8);
    if (!o)
      return STRATA_ENOMEM;
    for (uint32_t q = 0; q < n; q++)
      if (work->ids[q] >= s.p)
        return strata_err_set(STRATA_EINVAL, "lasso: coefficient %u of %u", work->ids[q], s.p);
    if (!logistic) {
      for (uint32_t q = 0; q < n; q++)
        o[q] = shard_dot(&s, work->ids[q], v);
      return 0;
    }
    logistic_weights(rw, &s, v);
    for (uint32_t q = 0; q < n; q++) {
      o[q] = shard_dot(&s, work->ids[q], rw->a);
      o[n + q] = shard_dot2(&s, work->ids[q], rw->b);
    }
    return 0;
  }
  if (w.kind == W_SEARCH && logistic) {
    size_t need = sizeof w + (size_t)w.n_alpha * 8 + (size_t)w.n_dir * sizeof(lr_move);
    if (w.n_alpha > MAX_SEARCH || work->payload_len != need)
      return strata_err_set(STRATA_EINVAL, "lasso: a line search of %zu bytes", work->payload_len);
    const char *pl = work->payload;
    double alpha[MAX_SEARCH];
    memcpy(alpha, pl + sizeof w, (size_t)w.n_alpha * 8);
    const lr_move *dir = (const lr_move *)(const void *)(pl + sizeof w + (size_t)w.n_alpha * 8);
    /* the direction's change of each row's margin */
    uint32_t nr = 0;
    for (uint32_t q = 0; q < w.n_dir; q++) {
      uint32_t j = dir[q].j;
      if (j >= s.p)
        return strata_err_set(STRATA_EINVAL, "lasso: coefficient %u of %u", j, s.p);
      for (uint64_t a = s.cp[j]; a < s.cp[j + 1]; a++) {
        uint32_t i = s.row[a];
        if (!rw->mark[i]) {
          rw->mark[i] = 1;
          rw->rows[nr++] = i;
        }
        rw->delta[i] += s.val[a] * dir[q].d;
      }
    }
    double *o = strata_bytes_add(out, (size_t)w.n_alpha * 8);
    if (!o)
      return STRATA_ENOMEM;
    for (uint32_t k = 0; k < w.n_alpha; k++) {
      double dl = 0;
      for (uint32_t q = 0; q < nr; q++) {
        uint32_t i = rw->rows[q];
        dl += softplus(-s.y[i] * (v[i] + alpha[k] * rw->delta[i])) - softplus(-s.y[i] * v[i]);
      }
      o[k] = dl;
    }
    for (uint32_t q = 0; q < nr; q++) {
      rw->delta[rw->rows[q]] = 0;
      rw->mark[rw->rows[q]] = 0;
    }
    return 0;
  }
  return strata_err_set(STRATA_EINVAL, "lasso: a round of kind %u", w.kind);
}

int lasso_rounds_apply(struct lasso_rworker *rw, const strata_round *r, const strata_task_view *tv,
                       const void *values, size_t len) {
  (void)r;
  if (len % sizeof(lr_move))
    return strata_err_set(STRATA_EINVAL, "lasso: %zu bytes to apply", len);
  shard s;
  shard_of(tv->data, &s);
  double *v = resident_v(tv->resident);
  /* the residual falls by x_j d, the margins rise by it */
  double sign = rw->loss == LOSS_LOGISTIC ? 1 : -1;
  const char *p = values;
  for (size_t k = 0; k < len / sizeof(lr_move); k++) {
    lr_move mv;
    memcpy(&mv, p + k * sizeof mv, sizeof mv);
    if (mv.j >= s.p)
      return strata_err_set(STRATA_EINVAL, "lasso: coefficient %u of %u", mv.j, s.p);
    double d = sign * mv.d;
    for (uint64_t a = s.cp[mv.j]; a < s.cp[mv.j + 1]; a++)
      v[s.row[a]] += s.val[a] * d;
  }
  return 0;
}

int lasso_rounds_block_objective(struct lasso_rworker *rw, int pass, strata_block_kind kind, int id,
                                 const strata_block *b, double *partials) {
  (void)pass, (void)id;
  if (kind != STRATA_BLOCK_RESIDENT)
    return 0;
  uint32_t n = resident_n(b);
  const double *v = resident_v(b), *y = resident_y(b);
  double s = 0;
  if (rw->loss == LOSS_LOGISTIC) {
    for (uint32_t i = 0; i < n; i++)
      s += softplus(-y[i] * v[i]);
    s /= rw->N;
  } else {
    for (uint32_t i = 0; i < n; i++)
      s += v[i] * v[i];
    /* A residual this far beyond |y| is a diverging run: the NaN makes
     * the engine stop it (exit 3) with the hint. */
    if (s > 1e6 * (rw->yy > 0 ? rw->yy : 1))
      s = NAN;
    s /= 2 * rw->N;
  }
  partials[P_LS] += isfinite(s) ? s : NAN;
  return 0;
}

/* ---- the pass's objectives, the summary, the model -------------------- */

void lasso_rounds_objectives(const lasso_config *cfg, const strata_problem *prob,
                             const double *partials, double *values) {
  (void)cfg;
  const lr_coord *c = prob->coord.buf;
  const double *beta = coord_beta(prob);
  double l1 = 0, nz = 0;
  for (uint32_t j = 0; j < c->p; j++) {
    l1 += fabs(beta[j]);
    nz += beta[j] != 0;
  }
  values[O_OBJECTIVE] = partials[P_LS] + c->lambda_now * l1;
  values[O_NONZEROS] = nz;
  values[O_MAXD] = c->maxd;
  values[O_UPDATES] = (double)c->updates;
  values[O_TOUCHED] = (double)c->touched;
  values[O_REL_GAP] = c->rel_gap;
}

void lasso_rounds_describe(const lasso_config *cfg, const strata_problem *prob, strata_json *j) {
  const lasso_priv *pv = prob->priv;
  const struct lasso_rounds *rs = pv->rounds;
  strata_json_string(j, "loss", cfg->loss == LOSS_LOGISTIC ? "logistic" : "squared");
  if (!rs)
    return;
  strata_json_int(j, "set_size", rs->U);
  strata_json_int(j, "sampled_steps_per_pass", rs->R);
  strata_json_int(j, "line_search", rs->line_search);
  if (cfg->loss == LOSS_LOGISTIC)
    strata_json_double(j, "bias", cfg->bias);
}

typedef struct coef_out {
  const double *beta;
  uint32_t p;
} coef_out;

static int fill_coef(FILE *f, void *ud) {
  const coef_out *c = ud;
  for (uint32_t j = 0; j < c->p; j++)
    if (c->beta[j] != 0)
      fprintf(f, "%u %.17g\n", j, c->beta[j]);
  return ferror(f) ? strata_err_set(STRATA_EIO, "coef.txt: write error") : 0;
}

int lasso_rounds_export(const lasso_config *cfg, const strata_problem *prob, const char *dir) {
  lasso_priv *pv = prob->priv;
  const lasso_data *d = &pv->d;
  const double *beta = coord_beta(prob);
  double *v = strata_calloc(d->n ? d->n : 1, 8);
  if (!v)
    return oom();
  int logistic = cfg->loss == LOSS_LOGISTIC;
  if (!logistic)
    memcpy(v, d->y, (size_t)d->n * 8);
  double l1 = 0, s = 0;
  uint64_t nz = 0;
  for (uint32_t j = 0; j < d->p; j++) {
    if (beta[j] == 0)
      continue;
    nz++;
    l1 += fabs(beta[j]);
    col_scatter(d, j, logistic ? beta[j] : -beta[j], v);
  }
  for (uint32_t i = 0; i < d->n; i++)
    s += logistic ? softplus(-d->y[i] * v[i]) : v[i] * v[i];
  strata_free(v);
  double F = s / (logistic ? d->n : 2.0 * d->n) + pv->m.lambda * l1;
  if (!isfinite(F))
    return strata_err_set(STRATA_EDIVERGED, "lasso: the final coefficients are not finite");
  pv->final_objective = F;
  pv->final_nonzeros = nz;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return strata_err_set(STRATA_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
  coef_out c = {beta, d->p};
  return strata_write_atomic_in(dir, "coef.txt", fill_coef, &c);
}
