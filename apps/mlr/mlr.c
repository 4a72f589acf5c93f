/*
 * The "mlr" app (strata/apps/mlr.h): multiclass logistic regression as a
 * sufficient-factor app (strata/sf.h), so the same source runs in sfb, in
 * the parameter-server modes (full-matrix synchronisation) and serially.
 *
 * Coordinator: read the LIBSVM files (or generate), shuffle the training
 * examples once with the seed, and cut them into the minibatches of
 * strata_sf_batch: data block c * P + p holds worker p's examples of clock
 * c. Test examples are spread evenly over the eval blocks. Every example is
 * stored with its bias feature, so the kernels see plain sparse rows.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "apps/common/rows.h"
#include "strata/core.h"
#include "strata/apps/libsvm.h"
#include "strata/apps/mlr.h"
#include "strata/sf.h"

typedef struct mlr_meta {
  uint32_t J, D;     /* classes; rows of W (features + bias) */
  uint32_t bias;     /* the last row is the bias */
  uint32_t has_test;
  uint64_t n_train, n_test;
  uint64_t nnz; /* stored features of the training examples, bias included */
} mlr_meta;

/* Coordinator-only: the label map, for export. */
typedef struct mlr_priv {
  int64_t *labels;
  uint32_t features;
} mlr_priv;

static const char *const mlr_objective_names[] = {"train_loss", "train_acc", "test_loss",
                                                  "test_acc"};
/* partials: train loss sum, train n, train correct, test loss sum, test n,
 * test correct, |W|^2 of the non-bias rows */
#define N_PARTIALS 7

#define OPT(field) offsetof(strata_mlr_config, field)
static const strata_option mlr_options[] = {
    {.name = "data",
     .short_name = 'd',
     .type = STRATA_OPT_STRING | STRATA_OPT_RESUMABLE,
     .offset = OPT(data),
     .def = "synth:",
     .metavar = "FILE|synth:...",
     .help = "training examples in LIBSVM/SVMlight format (gzip too), or the generator: "
             "synth:classes=J,features=D,nnz=N,samples=M,test=T,support=S,signal=F,seed=X"},
    {.name = "test",
     .type = STRATA_OPT_STRING | STRATA_OPT_RESUMABLE,
     .offset = OPT(test),
     .metavar = "FILE",
     .help = "held-out examples (LIBSVM) scored after every pass, read with --data's labels and "
             "features"},
    {.name = "test-fraction",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(test_fraction),
     .def = "0",
     .metavar = "F",
     .max = 0.99,
     .help = "hold out this fraction of --data as the test set (seeded by --seed)"},
    {.name = "minibatch",
     .short_name = 'K',
     .type = STRATA_OPT_INT,
     .offset = OPT(minibatch),
     .def = "100",
     .metavar = "K",
     .min = 1,
     .max = 1000000,
     .help = "examples per worker per clock; a clock's step averages the P*K examples of all "
             "workers"},
    {.name = "lr",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(lr),
     .def = "1",
     .metavar = "RATE",
     .min = 1e-9,
     .max = 1e6,
     .help = "learning rate of the mean gradient over a clock's minibatch"},
    {.name = "lr-decay",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(lr_decay),
     .def = "0.1",
     .metavar = "D",
     .max = 100,
     .help = "the rate of pass t (from 0) is lr / (1 + D t)"},
    {.name = "lambda",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(lambda),
     .def = "0",
     .metavar = "L",
     .max = 100,
     .help = "L2 regularisation (lambda/2 |W|^2, bias row excluded): every clock scales W by 1 - "
             "lr lambda, a pass over the matrix"},
    {.name = "init-scale",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(init_scale),
     .def = "0",
     .metavar = "S",
     .max = 100,
     .help = "initial weights ~ N(0, S^2) (0: all zero)"},
    {.name = "no-bias",
     .type = STRATA_OPT_FLAG,
     .offset = OPT(no_bias),
     .help = "no constant bias feature"},
    {.name = NULL},
};

static int mlr_check(const void *vcfg, const strata_setup *setup) {
  const strata_mlr_config *cfg = vcfg;
  (void)setup;
  if (cfg->test && cfg->test_fraction > 0)
    return strata_err_set(STRATA_EUSAGE, "--test and --test-fraction exclude each other");
  if (cfg->test && strata__is_synth(cfg->data))
    return strata_err_set(STRATA_EUSAGE,
                          "--test needs --data from a file (synth: makes its own test set: test=T)");
  return 0;
}

static void priv_free(void *p) {
  mlr_priv *m = p;
  if (!m) return;
  strata_free(m->labels);
  strata_free(m);
}

static double lr_of(const strata_mlr_config *cfg, int pass) {
  return cfg->lr / (1.0 + cfg->lr_decay * (double)pass);
}

/* ---- the model's arithmetic ------------------------------------------- */

/* s = W^T a over the stored features of one example (W: rows of J). */
static void scores(const float *W, uint32_t J, const uint32_t *col, const float *val, uint64_t nnz,
                   float *s) {
  memset(s, 0, (size_t)J * sizeof *s);
  for (uint64_t k = 0; k < nnz; k++) {
    const float *row = W + (size_t)col[k] * J;
    float a = val[k];
    for (uint32_t j = 0; j < J; j++) s[j] += a * row[j];
  }
}

/* Softmax of s in place; returns the index of the largest score. */
static uint32_t softmax(float *s, uint32_t J) {
  uint32_t best = 0;
  for (uint32_t j = 1; j < J; j++)
    if (s[j] > s[best]) best = j;
  float mx = s[best], sum = 0;
  for (uint32_t j = 0; j < J; j++) {
    s[j] = expf(s[j] - mx);
    sum += s[j];
  }
  float inv = 1.0f / sum;
  for (uint32_t j = 0; j < J; j++) s[j] *= inv;
  return best;
}

/* -log p, kept finite for a probability that underflowed. */
static double xent(float p) { return -log(p > 1e-30f ? (double)p : 1e-30); }

uint32_t strata_mlr_model_predict(const strata_mlr_model *m, const uint32_t *col, const float *val,
                                  uint64_t nnz, float *p) {
  uint32_t J = m->classes;
  scores(m->W, J, col, val, nnz, p);
  if (m->bias) {
    const float *b = m->W + (size_t)m->features * J;
    for (uint32_t j = 0; j < J; j++) p[j] += b[j];
  }
  return softmax(p, J);
}

/* ---- coordinator ------------------------------------------------------ */

/* Fills b with examples idx[0..n) of d, each with its bias feature (column
 * bias_col) when bias_col is not UINT32_MAX. */
static int fill_block(strata_block *b, const strata_libsvm *d, const uint64_t *idx, uint64_t n,
                      uint32_t bias_col, uint64_t batch) {
  uint64_t nnz = 0;
  int with_bias = bias_col != UINT32_MAX;
  for (uint64_t i = 0; i < n; i++) nnz += d->row_off[idx[i] + 1] - d->row_off[idx[i]] + with_bias;
  strata__rows r;
  int rc = strata__rows_alloc(b, n, nnz, batch, "mlr", &r);
  if (rc) return rc;
  uint32_t at = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t e = idx[i];
    for (uint64_t k = d->row_off[e]; k < d->row_off[e + 1]; k++, at++) {
      r.col[at] = d->col[k];
      r.val[at] = d->val[k];
    }
    if (with_bias) {
      r.col[at] = bias_col;
      r.val[at++] = 1.0f;
    }
    r.off[i + 1] = at;
    r.label[i] = d->label[e];
  }
  return 0;
}

static int mlr_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const strata_mlr_config *cfg = vcfg;
  strata_libsvm train = {0}, test = {0};
  uint64_t *perm = NULL;
  mlr_meta *meta = NULL;
  mlr_priv *pv = NULL;
  int rc, P = setup->workers, has_test;
  uint32_t K = (uint32_t)cfg->minibatch;
  /* --test-fraction makes the test set of the generator's samples too. */
  if ((rc = strata__read_labelled(cfg->data, cfg->test, cfg->test_fraction == 0, &train, &test,
                                  &has_test)))
    goto fail;
  if (train.n_classes < 2) {
    rc = strata_err_set(STRATA_EINVAL, "%s: one class only (%lld): nothing to classify", cfg->data,
                        (long long)train.class_label[0]);
    goto fail;
  }
  uint32_t J = train.n_classes, bias = !cfg->no_bias;
  uint64_t D = (uint64_t)train.n_features + bias, weights = D * J;
  /* A worker holds the whole matrix, and it travels as one block. */
  if (weights * sizeof(float) > (uint64_t)INT32_MAX) {
    rc = strata_err_set(STRATA_ETOOBIG,
                        "%s: %u classes x %llu features = %llu weights (%.1f GiB) is too large: every "
                        "worker holds the whole matrix, at most 2 GiB",
                        cfg->data, J, (unsigned long long)D, (unsigned long long)weights,
                        (double)weights * 4 / (1 << 30));
    goto fail;
  }
  uint64_t n = train.n_rows;
  if (!(perm = strata_malloc((size_t)n * sizeof *perm))) goto oom;
  for (uint64_t i = 0; i < n; i++) perm[i] = i;
  strata_rng rng;
  strata_rng_seed(&rng, strata_mix64(setup->seed ^ 0x6d6c72));
  for (uint64_t i = n; i > 1; i--) {
    uint64_t j = strata_rng_below(&rng, i), t = perm[i - 1];
    perm[i - 1] = perm[j];
    perm[j] = t;
  }
  /* --test-fraction: the first n_test of the shuffled order are held out. */
  uint64_t n_test = cfg->test_fraction > 0 ? (uint64_t)floor(cfg->test_fraction * (double)n) : 0;
  if (n_test >= n) {
    rc = strata_err_set(STRATA_EEMPTY, "%s: no training examples left after --test-fraction", cfg->data);
    goto fail;
  }
  const uint64_t *order = perm + n_test;
  uint64_t n_train = n - n_test;
  uint64_t C = strata_sf_clocks(n_train, P, K);
  if ((uint64_t)P * C > INT32_MAX / 2) {
    rc = strata_err_set(STRATA_EUSAGE, "--minibatch %u cuts %llu examples into too many blocks", K,
                        (unsigned long long)n_train);
    goto fail;
  }
  int nd = (int)(P * C);
  if ((rc = strata_problem_alloc(prob, nd, P, 1, 1))) goto fail;
  uint32_t bias_col = bias ? train.n_features : UINT32_MAX;
  for (uint64_t c = 0; c < C; c++)
    for (int p = 0; p < P; p++) {
      uint64_t lo, hi;
      strata_sf_batch(n_train, P, K, c, p, &lo, &hi);
      if ((rc = fill_block(&prob->data[c * P + p], &train, order + lo, hi - lo, bias_col,
                           strata_sf_batch_size(n_train, P, K, c))))
        goto fail;
    }
  /* Test examples, an even share per eval block (each block has a header,
   * so evaluate also runs for blocks without test examples: it scores the
   * training data too). */
  const strata_libsvm *ts = cfg->test_fraction > 0 ? &train : &test;
  uint64_t T = cfg->test_fraction > 0 ? n_test : has_test ? test.n_rows : 0;
  uint64_t *tidx = NULL;
  if (T) {
    if (!(tidx = strata_malloc((size_t)T * sizeof *tidx))) goto oom;
    for (uint64_t i = 0; i < T; i++) tidx[i] = cfg->test_fraction > 0 ? perm[i] : i;
  }
  for (int b = 0; b < nd && !rc; b++) {
    uint64_t lo = T * (uint64_t)b / (uint64_t)nd, hi = T * (uint64_t)(b + 1) / (uint64_t)nd;
    rc = fill_block(&prob->eval[b], ts, tidx ? tidx + lo : NULL, hi - lo, bias_col, 0);
  }
  strata_free(tidx);
  if (rc) goto fail;
  /* W: D rows of J floats, seeded by row so that it does not depend on P. */
  strata_block *W = &prob->rotating[0];
  W->nrows = (uint32_t)D;
  W->row_bytes = J * (uint32_t)sizeof(float);
  W->len = (size_t)weights * sizeof(float);
  if (!(W->buf = strata_alloc_aligned(W->len))) goto oom;
  memset(W->buf, 0, W->len);
  for (uint64_t r = 0; r < D && cfg->init_scale > 0; r++) {
    strata_rng_seed(&rng, strata_mix64(setup->seed ^ (0x77ull << 40) ^ r));
    float *row = (float *)W->buf + r * J;
    for (uint32_t j = 0; j < J; j++) row[j] = (float)(cfg->init_scale * strata_rng_normal(&rng));
  }
  if (!(meta = strata_calloc(1, sizeof *meta)) || !(pv = strata_calloc(1, sizeof *pv))) goto oom;
  *meta = (mlr_meta){.J = J, .D = (uint32_t)D, .bias = bias, .has_test = T > 0,
                     .n_train = n_train, .n_test = T};
  for (int d = 0; d < nd; d++) meta->nnz += strata__rows_of(&prob->data[d]).nnz;
  pv->labels = train.class_label;
  pv->features = train.n_features;
  train.class_label = NULL;
  prob->n_examples = n_train;
  prob->meta = meta;
  prob->meta_len = sizeof *meta;
  prob->priv = pv;
  prob->priv_free = priv_free;
  strata_log(STRATA_LOG_DEBUG, "mlr: %llu training examples, %llu test, %u classes, %llu rows of W, "
             "%llu clocks a pass", (unsigned long long)n_train, (unsigned long long)T, J,
             (unsigned long long)D, (unsigned long long)C);
  meta = NULL;
  pv = NULL;
  goto done;
oom:
  rc = strata_err_set(STRATA_ENOMEM, "mlr: out of memory");
fail:
  strata_problem_close(prob);
done:
  strata_free(perm);
  strata_free(meta);
  priv_free(pv);
  strata_libsvm_close(&train);
  strata_libsvm_close(&test);
  return rc;
}

/* ---- workers ---------------------------------------------------------- */

typedef struct mlr_worker {
  mlr_meta meta;
  const strata_mlr_config *cfg;
  float *p; /* J scratch floats */
} mlr_worker;

static int mlr_worker_init(const void *vcfg, const strata_setup *setup, const void *meta,
                           size_t meta_len, void **state) {
  (void)setup;
  if (meta_len != sizeof(mlr_meta))
    return strata_err_set(STRATA_ECOMM, "mlr: meta of %zu bytes, expected %zu", meta_len,
                          sizeof(mlr_meta));
  mlr_worker *w = strata_calloc(1, sizeof *w);
  if (!w) return strata_err_set(STRATA_ENOMEM, "mlr: out of memory");
  memcpy(&w->meta, meta, sizeof w->meta);
  w->cfg = vcfg;
  if (!(w->p = strata_alloc_aligned((size_t)w->meta.J * sizeof(float)))) {
    strata_free(w);
    return strata_err_set(STRATA_ENOMEM, "mlr: out of memory");
  }
  *state = w;
  return 0;
}

static void mlr_worker_free(void *state) {
  mlr_worker *w = state;
  if (!w) return;
  strata_free(w->p);
  strata_free(w);
}

/* One factor per example: u = softmax(W^T a) - e_y, v = a, all against W as
 * the clock began (the engine applies them after this returns). */
static int mlr_compute(void *state, const strata_task_view *tv, double *partials) {
  mlr_worker *w = state;
  (void)partials;
  strata__rows b = strata__rows_of(tv->data);
  if (!b.n) return 0;
  uint32_t J = w->meta.J;
  const float *W = tv->rotating->buf;
  float scale = (float)(-lr_of(w->cfg, tv->pass) / (double)b.batch);
  for (uint32_t i = 0; i < b.n; i++) {
    const uint32_t *col = b.col + b.off[i];
    const float *val = b.val + b.off[i];
    uint32_t nnz = b.off[i + 1] - b.off[i];
    scores(W, J, col, val, nnz, w->p);
    softmax(w->p, J);
    w->p[b.label[i]] -= 1.0f;
    int rc = strata_sf_emit(tv->factors, scale, w->p, col, val, nnz);
    if (rc) return rc;
  }
  return 0;
}

/* Loss and hits of a block's examples on W, into partials[at..at+2]. */
static void score_block(mlr_worker *w, const float *W, const strata_block *blk, double *partials,
                        int at) {
  strata__rows b = strata__rows_of(blk);
  uint32_t J = w->meta.J;
  double loss = 0, hits = 0;
  for (uint32_t i = 0; i < b.n; i++) {
    const uint32_t *col = b.col + b.off[i];
    scores(W, J, col, b.val + b.off[i], b.off[i + 1] - b.off[i], w->p);
    uint32_t best = softmax(w->p, J);
    loss += xent(w->p[b.label[i]]);
    hits += best == b.label[i];
  }
  partials[at] += loss;
  partials[at + 1] += b.n;
  partials[at + 2] += hits;
}

/* The pass's model on this task's training examples and its share of the
 * test set. */
static int mlr_evaluate(void *state, const strata_task_view *tv, double *partials) {
  mlr_worker *w = state;
  const float *W = tv->rotating->buf;
  if (tv->train) score_block(w, W, tv->train, partials, 0);
  score_block(w, W, tv->data, partials, 3);
  return 0;
}

/* |W|^2 over the non-bias rows, for the L2 term of the objective. */
static int mlr_block_objective(void *state, int pass, strata_block_kind kind, int id,
                               const strata_block *b, double *partials) {
  mlr_worker *w = state;
  (void)pass, (void)id;
  if (kind != STRATA_BLOCK_ROTATING || w->cfg->lambda == 0) return 0;
  size_t n = (size_t)(w->meta.D - w->meta.bias) * w->meta.J;
  const float *v = b->buf;
  double sq = 0;
  for (size_t x = 0; x < n; x++) sq += (double)v[x] * v[x];
  partials[6] += sq;
  return 0;
}

/* L2: W -= share * lr_t * lambda * W on the non-bias rows. */
static int mlr_clock_end(void *state, strata_block *W, const strata_sf_clock *ck) {
  mlr_worker *w = state;
  if (w->cfg->lambda == 0) return 0;
  float f = (float)(1.0 - ck->share * lr_of(w->cfg, ck->pass) * w->cfg->lambda);
  size_t n = (size_t)(w->meta.D - w->meta.bias) * w->meta.J;
  float *v = W->buf;
  for (size_t x = 0; x < n; x++) v[x] *= f;
  return 0;
}

static void mlr_objectives(const void *vcfg, const strata_problem *prob, const double *p,
                           double *values) {
  const strata_mlr_config *cfg = vcfg;
  const mlr_meta *m = prob->meta;
  double nan = 0.0 / 0.0;
  values[0] = p[1] > 0 ? p[0] / p[1] + 0.5 * cfg->lambda * p[6] : nan;
  values[1] = p[1] > 0 ? p[2] / p[1] : nan;
  values[2] = m->has_test && p[4] > 0 ? p[3] / p[4] : nan;
  values[3] = m->has_test && p[4] > 0 ? p[5] / p[4] : nan;
}

static void mlr_describe(const void *vcfg, const strata_problem *prob, strata_json *j) {
  const strata_mlr_config *cfg = vcfg;
  const mlr_meta *m = prob->meta;
  strata_json_string(j, "data", cfg->data);
  strata_json_int(j, "minibatch", cfg->minibatch);
  strata_json_int(j, "classes", m ? m->J : 0);
  strata_json_int(j, "rows", m ? m->D : 0); /* features + bias: W is rows x classes */
  strata_json_int(j, "samples", m ? (int64_t)m->n_train : 0);
  strata_json_int(j, "test_samples", m ? (int64_t)m->n_test : 0);
  /* stored features per sample, bias included: the nnz of a factor's v */
  strata_json_number(j, "nnz_per_sample", m && m->n_train ? (double)m->nnz / (double)m->n_train : 0);
  strata_json_number(j, "lr", cfg->lr);
  strata_json_number(j, "lr_decay", cfg->lr_decay);
  strata_json_number(j, "lambda", cfg->lambda);
  strata_json_bool(j, "bias", !cfg->no_bias);
}

static int mlr_export(const void *vcfg, const strata_setup *setup, const strata_problem *prob,
                      const char *dir) {
  (void)vcfg, (void)setup;
  const mlr_meta *m = prob->meta;
  const mlr_priv *pv = prob->priv;
  const float *W = prob->rotating[0].buf;
  size_t n = (size_t)m->D * m->J;
  for (size_t x = 0; x < n; x++)
    if (!isfinite(W[x]))
      return strata_err_set(STRATA_EDIVERGED,
                            "the run diverged: weight (row %zu, class %zu) is not finite; the model "
                            "is not written; try a smaller --lr",
                            x / m->J + 1, x % m->J + 1);
  strata_mlr_model model = {.classes = m->J, .features = pv->features, .bias = (int)m->bias,
                            .W = (float *)W, .labels = pv->labels};
  return strata_mlr_model_write(dir, &model);
}

static const strata_sf_ops mlr_sf = {.apply = NULL, .clock_end = mlr_clock_end};

const strata_app strata_app_mlr = {
    .name = "mlr",
    .flags = STRATA_APP_ADDITIVE,
    .summary = "multiclass logistic regression by minibatch SGD (softmax, L2): sufficient factors",
    .examples =
        "  mpirun -np 3 strata mlr --mode sfb --data ../shared/data/libsvm-dna/dna.scale \\\n"
        "      --test ../shared/data/libsvm-dna/dna.scale.t\n"
        "  mpirun -np 5 strata mlr --mode sfb --peers 2 --staleness 1 \\\n"
        "      --data synth:classes=1000,features=20000,nnz=50,samples=20000 --passes 5\n"
        "  mpirun -np 3 strata mlr --mode bsp --data synth: --metrics-out fms.json\n"
        "  strata mlr --mode serial --data train.svm --test-fraction 0.2 --minibatch 200\n",
    .unit = "samples",
    .options = mlr_options,
    .config_size = sizeof(strata_mlr_config),
    .check = mlr_check,
    .defaults = {.passes = 20, .depth = 1},
    .n_partials = N_PARTIALS,
    .n_objectives = 4,
    .objective_names = mlr_objective_names,
    .falling = 1u << 0, /* train_loss */
    .load = mlr_load,
    .schedule = strata_sf_schedule,
    .worker_init = mlr_worker_init,
    .worker_free = mlr_worker_free,
    .compute = mlr_compute,
    .evaluate = mlr_evaluate,
    .block_objective = mlr_block_objective,
    .objectives = mlr_objectives,
    .tol = {STRATA_TOL_REL_CHANGE, 0, "the relative change of the training loss over a pass"},
    .diverged_hint = "try a smaller --lr",
    .describe = mlr_describe,
    .sf = &mlr_sf,
    .export_model = mlr_export,
};
