/*
 * lsq: least squares with J outputs, min over W of the mean of
 * |W^T x - y|^2 / 2, by minibatch SGD as a sufficient-factor app. The
 * gradient of one example is x r^T with r = W^T x - y: the factor u = r
 * (J floats), v = x (sparse). W is kept by columns: D rows of J floats.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "strata/core.h"
#include "strata/main.h"
#include "strata/sf.h"

typedef struct lsq_config {
  int samples, features, outputs, nnz, minibatch;
  double lr;
} lsq_config;

#define OPT(f) offsetof(lsq_config, f)
static const strata_option lsq_options[] = {
    {.name = "samples",
     .type = STRATA_OPT_INT,
     .offset = OPT(samples),
     .def = "4000",
     .metavar = "N",
     .min = 1,
     .max = 10000000,
     .help = "examples"},
    {.name = "features",
     .type = STRATA_OPT_INT,
     .offset = OPT(features),
     .def = "500",
     .metavar = "D",
     .min = 1,
     .max = 1000000,
     .help = "features"},
    {.name = "outputs",
     .type = STRATA_OPT_INT,
     .offset = OPT(outputs),
     .def = "8",
     .metavar = "J",
     .min = 1,
     .max = 4096,
     .help = "outputs"},
    {.name = "nnz",
     .type = STRATA_OPT_INT,
     .offset = OPT(nnz),
     .def = "10",
     .metavar = "Z",
     .min = 1,
     .max = 1000,
     .help = "features per example"},
    {.name = "minibatch",
     .short_name = 'K',
     .type = STRATA_OPT_INT,
     .offset = OPT(minibatch),
     .def = "50",
     .metavar = "K",
     .min = 1,
     .max = 100000,
     .help = "examples per worker per clock"},
    {.name = "lr",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(lr),
     .def = "1",
     .metavar = "RATE",
     .min = 1e-9,
     .max = 100,
     .help = "learning rate"},
    {.name = NULL},
};

/* A data block: header, then per example nnz indices, nnz values, J targets. */
typedef struct lsq_block {
  uint32_t n, nnz, J, batch;
} lsq_block;

static size_t example_floats(uint32_t nnz, uint32_t J) { return 2 * (size_t)nnz + J; }

static int lsq_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const lsq_config *cfg = vcfg;
  uint32_t D = (uint32_t)cfg->features, J = (uint32_t)cfg->outputs, Z = (uint32_t)cfg->nnz;
  uint32_t K = (uint32_t)cfg->minibatch;
  uint64_t n = (uint64_t)cfg->samples, C = strata_sf_clocks(n, setup->workers, K);
  if (Z > D) return strata_err_set(STRATA_EUSAGE, "--nnz %u is more than --features %u", Z, D);
  int P = setup->workers, rc = strata_problem_alloc(prob, (int)(P * C), P, 1, 0);
  float *truth = strata_malloc((size_t)D * J * sizeof(float));
  if (rc || !truth) {
    strata_free(truth);
    return rc ? rc : strata_err_set(STRATA_ENOMEM, "lsq: out of memory");
  }
  strata_rng rng;
  strata_rng_seed(&rng, setup->seed);
  for (size_t i = 0; i < (size_t)D * J; i++) truth[i] = (float)strata_rng_normal(&rng);
  for (uint64_t c = 0; c < C && !rc; c++)
    for (int p = 0; p < P && !rc; p++) {
      uint64_t lo, hi;
      strata_sf_batch(n, P, K, c, p, &lo, &hi);
      strata_block *b = &prob->data[c * P + p];
      b->len = sizeof(lsq_block) + (hi - lo) * example_floats(Z, J) * 4;
      if (!(b->buf = strata_alloc_aligned(b->len))) {
        rc = strata_err_set(STRATA_ENOMEM, "lsq: out of memory");
        break;
      }
      lsq_block *h = b->buf;
      *h = (lsq_block){(uint32_t)(hi - lo), Z, J, (uint32_t)strata_sf_batch_size(n, P, K, c)};
      float *e = (float *)(h + 1);
      for (uint64_t i = lo; i < hi; i++, e += example_floats(Z, J)) {
        /* Example i depends on the seed and i only, whatever P is. */
        strata_rng_seed(&rng, strata_mix64(setup->seed + i));
        uint32_t *idx = (uint32_t *)e;
        float *val = e + Z, *y = e + 2 * Z;
        for (uint32_t k = 0; k < Z; k++) { /* Z distinct increasing indices */
          idx[k] = (uint32_t)((uint64_t)D * k / Z + strata_rng_below(&rng, D / Z ? D / Z : 1));
          val[k] = (float)strata_rng_normal(&rng);
        }
        for (uint32_t j = 0; j < J; j++) {
          double s = 0.1 * strata_rng_normal(&rng);
          for (uint32_t k = 0; k < Z; k++) s += val[k] * truth[(size_t)idx[k] * J + j];
          y[j] = (float)s;
        }
      }
    }
  strata_free(truth);
  if (rc) return rc;
  strata_block *W = &prob->rotating[0]; /* D rows of J floats, zero */
  W->nrows = D;
  W->row_bytes = J * 4;
  W->len = (size_t)D * J * 4;
  if (!(W->buf = strata_alloc_aligned(W->len))) return strata_err_set(STRATA_ENOMEM, "lsq: out of memory");
  memset(W->buf, 0, W->len);
  prob->n_examples = n;
  return 0;
}

static int lsq_worker_init(const void *cfg, const strata_setup *setup, const void *meta,
                           size_t meta_len, void **state) {
  *state = (void *)cfg;
  return 0;
}

/* One factor per example, all computed on W as the clock began. */
static int lsq_compute(void *state, const strata_task_view *tv, double *partials) {
  const lsq_config *cfg = state;
  const lsq_block *h = tv->data->buf;
  const float *W = tv->rotating->buf, *e = (const float *)(h + 1);
  float r[4096];
  for (uint32_t i = 0; i < h->n; i++, e += example_floats(h->nnz, h->J)) {
    const uint32_t *idx = (const uint32_t *)e;
    const float *val = e + h->nnz, *y = e + 2 * h->nnz;
    for (uint32_t j = 0; j < h->J; j++) r[j] = -y[j];
    for (uint32_t k = 0; k < h->nnz; k++)
      for (uint32_t j = 0; j < h->J; j++) r[j] += val[k] * W[(size_t)idx[k] * h->J + j];
    for (uint32_t j = 0; j < h->J; j++) partials[0] += 0.5 * r[j] * r[j];
    partials[1] += 1;
    int rc = strata_sf_emit(tv->factors, (float)(-cfg->lr / h->batch), r, idx, val, h->nnz);
    if (rc) return rc;
  }
  return 0;
}

static const char *const lsq_objective_names[] = {"loss"};

/* The mean loss the examples had as their clocks began (progressive). */
static void lsq_objectives(const void *cfg, const strata_problem *prob, const double *p, double *v) {
  v[0] = p[1] > 0 ? p[0] / p[1] : NAN;
}

static int fill_w(FILE *f, void *ud) {
  const strata_block *W = ud;
  return fwrite(W->buf, 1, W->len, f) == W->len ? 0 : strata_err_set(STRATA_EIO, "short write");
}

/* DIR/W.f32: W as it is kept, D rows of J float32. */
static int lsq_export(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                      const char *dir) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return strata_err_set(STRATA_EIO, "%s: cannot create directory", dir);
  return strata_write_atomic_in(dir, "W.f32", fill_w, &prob->rotating[0]);
}

static const strata_sf_ops lsq_sf = {.apply = NULL, .clock_end = NULL};

static const strata_app lsq_app = {
    .name = "lsq",
    .flags = STRATA_APP_ADDITIVE,
    .summary = "least squares with J outputs, by sufficient factors",
    .examples = "  mpirun -np 3 lsq --outputs 16\n"
                "  lsq --mode serial --minibatch 100\n",
    .options = lsq_options,
    .config_size = sizeof(lsq_config),
    .defaults = {.depth = 1, .mode = STRATA_MODE_SFB},
    .n_partials = 2,
    .n_objectives = 1,
    .objective_names = lsq_objective_names,
    .load = lsq_load,
    .schedule = strata_sf_schedule,
    .worker_init = lsq_worker_init,
    .compute = lsq_compute,
    .objectives = lsq_objectives,
    .sf = &lsq_sf,
    .export_model = lsq_export,
};

int main(int argc, char **argv) {
  const strata_app *apps[] = {&lsq_app};
  return strata_main(argc, argv, apps, 1);
}
