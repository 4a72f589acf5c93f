/*
 * The "dml" app (strata/apps/dml.h): distance metric learning as a
 * sufficient-factor app (strata/sf.h), so the same source runs in sfb, in
 * the parameter-server modes (full-matrix synchronisation) and serially.
 *
 * Coordinator: read the LIBSVM files (or generate), draw the training and
 * test pairs with the seed, store each as its sparse difference, and cut
 * the training pairs into the minibatches of strata_sf_batch: data block
 * c * P + p holds worker p's pairs of clock c. Test pairs are spread evenly
 * over the eval blocks. The pairs are drawn once, in an order that does not
 * depend on P, so the partition matches a serial run's.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "apps/common/model_files.h"
#include "apps/common/rows.h"
#include "apps/dml/dml_pairs.h"
#include "strata/core.h"
#include "strata/apps/dml.h"
#include "strata/json.h"
#include "strata/apps/libsvm.h"
#include "strata/sf.h"

/* Data and eval blocks: labelled sparse rows (apps/common/rows.h), a pair's
 * difference each, labelled 1 for a similar pair. */

typedef struct dml_meta {
  uint32_t k, D; /* L is k x D, kept as D rows of k */
  uint32_t has_test, pad;
  uint64_t n_train, n_test;
  uint64_t nnz; /* stored entries of the training pairs' differences */
} dml_meta;

static const char *const dml_objective_names[] = {"train_loss", "train_acc", "test_loss",
                                                  "test_acc"};
/* partials: train loss sum, train pairs, train pairs judged right, and the
 * same three for the test pairs */
#define N_PARTIALS 6

#define OPT(field) offsetof(strata_dml_config, field)
static const strata_option dml_options[] = {
    {.name = "data",
     .short_name = 'd',
     .type = STRATA_OPT_STRING | STRATA_OPT_RESUMABLE,
     .offset = OPT(data),
     .def = "synth:",
     .metavar = "FILE|synth:...",
     .help = "labelled examples in LIBSVM/SVMlight format (gzip too), or the generator: "
             "synth:classes=J,features=D,nnz=N,samples=M,test=T,support=S,signal=F,seed=X"},
    {.name = "test",
     .type = STRATA_OPT_STRING | STRATA_OPT_RESUMABLE,
     .offset = OPT(test),
     .metavar = "FILE",
     .help = "held-out examples (LIBSVM) to draw the test pairs from, read with --data's labels "
             "and features"},
    {.name = "pairs",
     .type = STRATA_OPT_U64,
     .offset = OPT(pairs),
     .def = "10000",
     .metavar = "M",
     .min = 1,
     .max = 1e9,
     .help = "training pairs drawn from --data (seeded by --seed): half similar, half dissimilar"},
    {.name = "test-pairs",
     .type = STRATA_OPT_U64,
     .offset = OPT(test_pairs),
     .def = "2000",
     .metavar = "T",
     .max = 1e9,
     .help = "test pairs drawn from --test or synth's test set, scored after every pass (0: none)"},
    {.name = "latent",
     .short_name = 'k',
     .type = STRATA_OPT_INT,
     .offset = OPT(latent),
     .def = "32",
     .metavar = "k",
     .min = 1,
     .max = 65536,
     .help = "rows of the projection L (k x features); distances are |L(x - y)|^2"},
    {.name = "margin",
     .type = STRATA_OPT_DOUBLE | STRATA_OPT_OPEN_MIN,
     .offset = OPT(margin),
     .def = "1",
     .metavar = "M",
     .max = 1e6,
     .help =
         "dissimilar pairs are pushed beyond this distance; a pair is judged similar below M/2"},
    {.name = "minibatch",
     .short_name = 'K',
     .type = STRATA_OPT_INT,
     .offset = OPT(minibatch),
     .def = "100",
     .metavar = "K",
     .min = 1,
     .max = 1000000,
     .help = "pairs per worker per clock; a clock's step averages the P*K pairs of all workers"},
    {.name = "lr",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(lr),
     .def = "0.1",
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
    {.name = "init-scale",
     .type = STRATA_OPT_DOUBLE | STRATA_OPT_OPEN_MIN,
     .offset = OPT(init_scale),
     .def = "1",
     .metavar = "S",
     .max = 100,
     .help = "initial L ~ N(0, S^2 / features)"},
    {.name = NULL},
};

static int dml_check(const void *vcfg, const strata_setup *setup) {
  const strata_dml_config *cfg = vcfg;
  (void)setup;
  if (cfg->test && strata__is_synth(cfg->data))
    return strata_err_set(STRATA_EUSAGE,
                          "--test needs --data from a file (synth: makes its own test set: "
                          "test=T)");
  return 0;
}

static double lr_of(const strata_dml_config *cfg, int pass) {
  return cfg->lr / (1.0 + cfg->lr_decay * (double)pass);
}

/* ---- pairs ------------------------------------------------------------ */

int strata__dml_pairs(const strata_libsvm *d, const char *what, uint64_t m, uint64_t seed,
                      uint64_t *a, uint64_t *b, uint8_t *sim) {
  uint32_t J = d->n_classes;
  uint64_t n = d->n_rows;
  int rc = 0;
  /* Examples grouped by class (by[start[c] .. start[c + 1])), and the
   * positions in `by` of those whose class has another example. */
  uint64_t *start = strata_calloc((size_t)J + 1, sizeof *start);
  uint64_t *by = strata_malloc((size_t)n * sizeof *by + 1);
  uint64_t *elig = strata_malloc((size_t)n * sizeof *elig + 1);
  uint64_t *cur = strata_malloc((size_t)J * sizeof *cur + 1);
  if (!start || !by || !elig || !cur) {
    rc = strata_err_set(STRATA_ENOMEM, "%s: out of memory for pairs", what);
    goto done;
  }
  for (uint64_t i = 0; i < n; i++) start[d->label[i] + 1]++;
  for (uint32_t c = 0; c < J; c++) start[c + 1] += start[c];
  memcpy(cur, start, (size_t)J * sizeof *cur);
  for (uint64_t i = 0; i < n; i++) by[cur[d->label[i]]++] = i;
  uint32_t present = 0, one = 0;
  uint64_t n_elig = 0;
  for (uint32_t c = 0; c < J; c++) {
    uint64_t cnt = start[c + 1] - start[c];
    if (cnt) present++, one = c;
    for (uint64_t q = start[c]; cnt >= 2 && q < start[c + 1]; q++) elig[n_elig++] = q;
  }
  if (present < 2) {
    rc = strata_err_set(STRATA_EINVAL,
                        "%s: every example has label %lld: no dissimilar pairs (DML needs two "
                        "classes)",
                        what, (long long)d->class_label[one]);
    goto done;
  }
  if (!n_elig) {
    rc = strata_err_set(STRATA_EINVAL,
                        "%s: every class has a single example: no similar pairs (DML needs a "
                        "class with two examples)",
                        what);
    goto done;
  }
  strata_rng rng;
  strata_rng_seed(&rng, strata_mix64(seed ^ 0x646d6c70ull));
  for (uint64_t i = 0; i < m; i++) {
    uint64_t q, q2;
    if (i % 2 == 0) {
      q = elig[strata_rng_below(&rng, n_elig)];
      uint32_t c = d->label[by[q]];
      q2 = start[c] + strata_rng_below(&rng, start[c + 1] - start[c] - 1);
      if (q2 >= q) q2++;
    } else {
      q = strata_rng_below(&rng, n);
      uint32_t c = d->label[by[q]];
      uint64_t cnt = start[c + 1] - start[c], r = strata_rng_below(&rng, n - cnt);
      q2 = r < start[c] ? r : r + cnt;
    }
    a[i] = by[q];
    b[i] = by[q2];
    sim[i] = i % 2 == 0;
  }
done:
  strata_free(start);
  strata_free(by);
  strata_free(elig);
  strata_free(cur);
  return rc;
}

uint32_t strata__dml_delta(const strata_libsvm *d, uint64_t a, uint64_t b, uint32_t *idx,
                           float *val) {
  uint64_t i = d->row_off[a], ie = d->row_off[a + 1], j = d->row_off[b], je = d->row_off[b + 1];
  uint32_t n = 0;
  while (i < ie || j < je) {
    uint32_t c;
    float v;
    if (j >= je || (i < ie && d->col[i] < d->col[j])) {
      c = d->col[i];
      v = d->val[i++];
    } else if (i >= ie || d->col[j] < d->col[i]) {
      c = d->col[j];
      v = -d->val[j++];
    } else {
      c = d->col[i];
      v = d->val[i++] - d->val[j++];
    }
    if (v == 0) continue;
    if (idx) {
      idx[n] = c;
      val[n] = v;
    }
    n++;
  }
  return n;
}

/* ---- the model's arithmetic ------------------------------------------- */

/* u = L delta over delta's stored entries (L: rows of k); returns |u|^2. */
static double project(const float *L, uint32_t k, const uint32_t *col, const float *val,
                      uint32_t nnz, float *u) {
  memset(u, 0, (size_t)k * sizeof *u);
  for (uint32_t e = 0; e < nnz; e++) {
    const float *row = L + (size_t)col[e] * k;
    float a = val[e];
    for (uint32_t r = 0; r < k; r++) u[r] += a * row[r];
  }
  double dist = 0;
  for (uint32_t r = 0; r < k; r++) dist += (double)u[r] * u[r];
  return dist;
}

static double pair_loss(int similar, double dist, double margin) {
  if (similar) return dist;
  return dist < margin ? margin - dist : 0;
}

/* ---- coordinator ------------------------------------------------------ */

typedef struct pair_list {
  uint64_t *a, *b;
  uint8_t *sim;
} pair_list;

static int pairs_alloc(pair_list *p, uint64_t m) {
  p->a = strata_malloc((size_t)m * sizeof *p->a + 1);
  p->b = strata_malloc((size_t)m * sizeof *p->b + 1);
  p->sim = strata_malloc((size_t)m + 1);
  if (p->a && p->b && p->sim) return 0;
  return strata_err_set(STRATA_ENOMEM, "dml: out of memory for %llu pairs", (unsigned long long)m);
}

static void pairs_close(pair_list *p) {
  strata_free(p->a);
  strata_free(p->b);
  strata_free(p->sim);
  memset(p, 0, sizeof *p);
}

/* Reads the training set and, where there is one, the test set (*has_test). */
/* Fills b with pairs pl[lo, hi) of d as their differences, labelled 1
 * (similar) or 0. */
static int fill_block(strata_block *b, const strata_libsvm *d, const pair_list *pl, uint64_t lo,
                      uint64_t hi, uint64_t batch) {
  uint64_t n = hi - lo, nnz = 0;
  for (uint64_t i = lo; i < hi; i++) nnz += strata__dml_delta(d, pl->a[i], pl->b[i], NULL, NULL);
  strata__rows r;
  int rc = strata__rows_alloc(b, n, nnz, batch, "dml", &r);
  if (rc) return rc;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t p = lo + i;
    r.off[i + 1] = r.off[i] + strata__dml_delta(d, pl->a[p], pl->b[p], r.col + r.off[i], r.val + r.off[i]);
    r.label[i] = pl->sim[p];
  }
  return 0;
}

static int dml_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const strata_dml_config *cfg = vcfg;
  strata_libsvm train = {0}, test = {0};
  pair_list tr = {0}, ts = {0};
  dml_meta *meta = NULL;
  int rc, P = setup->workers, has_test;
  uint32_t K = (uint32_t)cfg->minibatch, k = (uint32_t)cfg->latent;
  if ((rc = strata__read_labelled(cfg->data, cfg->test, 1, &train, &test, &has_test))) goto fail;
  uint64_t D = train.n_features, weights = D * k;
  if (!D) {
    rc = strata_err_set(STRATA_EEMPTY, "%s: no features: nothing to project", cfg->data);
    goto fail;
  }
  /* A worker holds the whole matrix, and it travels as one block. */
  if (weights * sizeof(float) > (uint64_t)INT32_MAX) {
    rc = strata_err_set(STRATA_ETOOBIG,
                        "%s: --latent %u x %llu features = %llu weights (%.1f GiB) is too large: "
                        "every worker holds the whole matrix, at most 2 GiB",
                        cfg->data, k, (unsigned long long)D, (unsigned long long)weights,
                        (double)weights * 4 / (1 << 30));
    goto fail;
  }
  uint64_t M = cfg->pairs, T = has_test ? cfg->test_pairs : 0;
  /* --pairs sizes the pair lists (17 bytes a pair) and the blocks of the
   * pairs' differences (an offset and a label, and up to the stored
   * features of both rows, 8 bytes each): refused before either is made. */
  {
    double per_pair = 17 + 8 + 16.0 * (double)train.nnz / (double)train.n_rows;
    char what[128];
    snprintf(what, sizeof what, "dml: %llu training and %llu test pairs", (unsigned long long)M,
             (unsigned long long)T);
    if ((rc = strata_problem_fits(what, (double)(M + T) * per_pair, "lower --pairs or --test-pairs")))
      goto fail;
  }
  if ((rc = pairs_alloc(&tr, M)) ||
      (rc = strata__dml_pairs(&train, cfg->data, M, setup->seed, tr.a, tr.b, tr.sim)))
    goto fail;
  if (T && ((rc = pairs_alloc(&ts, T)) ||
            (rc = strata__dml_pairs(&test, cfg->test ? cfg->test : "synth: test set", T,
                                    strata_mix64(setup->seed) ^ 0x74657374ull, ts.a, ts.b,
                                    ts.sim))))
    goto fail;
  uint64_t C = strata_sf_clocks(M, P, K);
  if ((uint64_t)P * C > INT32_MAX / 2) {
    rc = strata_err_set(STRATA_EUSAGE, "--minibatch %u cuts %llu pairs into too many blocks", K,
                        (unsigned long long)M);
    goto fail;
  }
  int nd = (int)(P * C);
  if ((rc = strata_problem_alloc(prob, nd, P, 1, 1))) goto fail;
  for (uint64_t c = 0; c < C; c++)
    for (int p = 0; p < P; p++) {
      uint64_t lo, hi;
      strata_sf_batch(M, P, K, c, p, &lo, &hi);
      if ((rc = fill_block(&prob->data[c * P + p], &train, &tr, lo, hi,
                           strata_sf_batch_size(M, P, K, c))))
        goto fail;
    }
  /* Test pairs, an even share per eval block; each block has a header, so
   * evaluate also runs for blocks without test pairs: it scores the
   * training pairs too. */
  for (int b = 0; b < nd; b++) {
    uint64_t lo = T * (uint64_t)b / (uint64_t)nd, hi = T * (uint64_t)(b + 1) / (uint64_t)nd;
    if ((rc = fill_block(&prob->eval[b], &test, &ts, lo, hi, 0))) goto fail;
  }
  /* L: D rows of k floats, seeded by row so that it does not depend on P. */
  strata_block *L = &prob->rotating[0];
  L->nrows = (uint32_t)D;
  L->row_bytes = k * (uint32_t)sizeof(float);
  L->len = (size_t)weights * sizeof(float);
  if (!(L->buf = strata_alloc_aligned(L->len))) goto oom;
  double sd = cfg->init_scale / sqrt((double)D);
  for (uint64_t r = 0; r < D; r++) {
    strata_rng rng;
    strata_rng_seed(&rng, strata_mix64(setup->seed ^ (0x4cull << 40) ^ r));
    float *row = (float *)L->buf + r * k;
    for (uint32_t j = 0; j < k; j++) row[j] = (float)(sd * strata_rng_normal(&rng));
  }
  if (!(meta = strata_calloc(1, sizeof *meta))) goto oom;
  *meta = (dml_meta){.k = k, .D = (uint32_t)D, .has_test = T > 0, .n_train = M, .n_test = T};
  for (int d = 0; d < nd; d++) meta->nnz += strata__rows_of(&prob->data[d]).nnz;
  prob->n_examples = M;
  prob->meta = meta;
  prob->meta_len = sizeof *meta;
  strata_log(STRATA_LOG_DEBUG,
             "dml: %llu training pairs, %llu test, %llu features, latent %u, %llu clocks a pass",
             (unsigned long long)M, (unsigned long long)T, (unsigned long long)D, k,
             (unsigned long long)C);
  meta = NULL;
  goto done;
oom:
  rc = strata_err_set(STRATA_ENOMEM, "dml: out of memory");
fail:
  strata_problem_close(prob);
done:
  strata_free(meta);
  pairs_close(&tr);
  pairs_close(&ts);
  strata_libsvm_close(&train);
  strata_libsvm_close(&test);
  return rc;
}

/* ---- workers ---------------------------------------------------------- */

typedef struct dml_worker {
  dml_meta meta;
  const strata_dml_config *cfg;
  float *u; /* k scratch floats */
} dml_worker;

static int dml_worker_init(const void *vcfg, const strata_setup *setup, const void *meta,
                           size_t meta_len, void **state) {
  (void)setup;
  if (meta_len != sizeof(dml_meta))
    return strata_err_set(STRATA_ECOMM, "dml: meta of %zu bytes, expected %zu", meta_len,
                          sizeof(dml_meta));
  dml_worker *w = strata_calloc(1, sizeof *w);
  if (!w) return strata_err_set(STRATA_ENOMEM, "dml: out of memory");
  memcpy(&w->meta, meta, sizeof w->meta);
  w->cfg = vcfg;
  if (!(w->u = strata_alloc_aligned((size_t)w->meta.k * sizeof(float)))) {
    strata_free(w);
    return strata_err_set(STRATA_ENOMEM, "dml: out of memory");
  }
  *state = w;
  return 0;
}

static void dml_worker_free(void *state) {
  dml_worker *w = state;
  if (!w) return;
  strata_free(w->u);
  strata_free(w);
}

/* One factor per pair whose loss has a gradient: u = L delta, v = delta,
 * against L as the clock began (the engine applies them after this
 * returns). */
static int dml_compute(void *state, const strata_task_view *tv, double *partials) {
  dml_worker *w = state;
  (void)partials;
  strata__rows b = strata__rows_of(tv->data);
  if (!b.n) return 0;
  const float *L = tv->rotating->buf;
  double step = -2.0 * lr_of(w->cfg, tv->pass) / (double)b.batch;
  for (uint32_t i = 0; i < b.n; i++) {
    const uint32_t *col = b.col + b.off[i];
    const float *val = b.val + b.off[i];
    uint32_t nnz = b.off[i + 1] - b.off[i];
    /* delta = 0 (two examples with the same features): no gradient */
    if (!nnz) continue;
    double dist = project(L, w->meta.k, col, val, nnz, w->u);
    double s = b.label[i] ? 1 : dist < w->cfg->margin ? -1 : 0;
    if (s == 0) continue;
    int rc = strata_sf_emit(tv->factors, (float)(step * s), w->u, col, val, nnz);
    if (rc) return rc;
  }
  return 0;
}

/* Loss and correct judgments of a block's pairs on L, into
 * partials[at..at+2]. */
static void score_block(dml_worker *w, const float *L, const strata_block *blk, double *partials,
                        int at) {
  strata__rows b = strata__rows_of(blk);
  double margin = w->cfg->margin, loss = 0, hits = 0;
  for (uint32_t i = 0; i < b.n; i++) {
    double dist = project(L, w->meta.k, b.col + b.off[i], b.val + b.off[i],
                          b.off[i + 1] - b.off[i], w->u);
    loss += pair_loss((int)b.label[i], dist, margin);
    hits += (dist < margin / 2) == (b.label[i] != 0);
  }
  partials[at] += loss;
  partials[at + 1] += b.n;
  partials[at + 2] += hits;
}

/* The pass's model on this task's training pairs and its share of the
 * test pairs. */
static int dml_evaluate(void *state, const strata_task_view *tv, double *partials) {
  dml_worker *w = state;
  const float *L = tv->rotating->buf;
  if (tv->train) score_block(w, L, tv->train, partials, 0);
  score_block(w, L, tv->data, partials, 3);
  return 0;
}

static void dml_objectives(const void *vcfg, const strata_problem *prob, const double *p,
                           double *values) {
  (void)vcfg;
  const dml_meta *m = prob->meta;
  double nan = 0.0 / 0.0;
  values[0] = p[1] > 0 ? p[0] / p[1] : nan;
  values[1] = p[1] > 0 ? p[2] / p[1] : nan;
  values[2] = m->has_test && p[4] > 0 ? p[3] / p[4] : nan;
  values[3] = m->has_test && p[4] > 0 ? p[5] / p[4] : nan;
}

static void dml_describe(const void *vcfg, const strata_problem *prob, strata_json *j) {
  const strata_dml_config *cfg = vcfg;
  const dml_meta *m = prob->meta;
  strata_json_string(j, "data", cfg->data);
  strata_json_int(j, "minibatch", cfg->minibatch);
  strata_json_int(j, "latent", cfg->latent);
  strata_json_int(j, "features", m ? m->D : 0);
  strata_json_int(j, "pairs", m ? (int64_t)m->n_train : 0);
  strata_json_int(j, "test_pairs", m ? (int64_t)m->n_test : 0);
  /* stored entries per training pair: the nnz of a factor's v */
  strata_json_number(j, "nnz_per_pair", m && m->n_train ? (double)m->nnz / (double)m->n_train : 0);
  strata_json_number(j, "margin", cfg->margin);
  strata_json_number(j, "lr", cfg->lr);
  strata_json_number(j, "lr_decay", cfg->lr_decay);
  strata_json_number(j, "init_scale", cfg->init_scale);
}

typedef struct meta_fill {
  const dml_meta *m;
  double margin;
} meta_fill;

static int fill_meta(FILE *f, void *ud) {
  const meta_fill *mf = ud;
  strata_json j;
  strata_json_init(&j, f);
  strata_json_object_begin(&j, NULL);
  strata_json_string(&j, "format", "strata-dml-1");
  strata_json_int(&j, "latent", mf->m->k);
  strata_json_int(&j, "features", mf->m->D);
  strata_json_number(&j, "margin", mf->margin);
  strata_json_object_end(&j);
  return 0;
}

static int dml_export(const void *vcfg, const strata_setup *setup, const strata_problem *prob,
                      const char *dir) {
  const strata_dml_config *cfg = vcfg;
  (void)setup;
  const dml_meta *m = prob->meta;
  const float *L = prob->rotating[0].buf;
  size_t n = (size_t)m->D * m->k;
  for (size_t x = 0; x < n; x++)
    if (!isfinite(L[x]))
      return strata_err_set(STRATA_EDIVERGED,
                            "the run diverged: L (row %zu, column %zu) is not finite; the model "
                            "is not written; try a smaller --lr",
                            x % m->k + 1, x / m->k + 1);
  meta_fill mf = {.m = m, .margin = cfg->margin};
  int rc = strata__model_dir(dir);
  if (!rc) rc = strata__model_write_blob(dir, "L.f32", L, n * sizeof(float));
  /* meta.json last: a directory with it is complete. */
  if (!rc) rc = strata_write_atomic_in(dir, "meta.json", fill_meta, &mf);
  return rc;
}

static const strata_sf_ops dml_sf = {.apply = NULL, .clock_end = NULL};

const strata_app strata_app_dml = {
    .name = "dml",
    .flags = STRATA_APP_ADDITIVE,
    .summary = "distance metric learning (|L(x - y)|^2 over labelled pairs): sufficient factors",
    .examples =
        "  mpirun -np 3 strata dml --mode sfb --data ../shared/data/libsvm-dna/dna.scale \\\n"
        "      --test ../shared/data/libsvm-dna/dna.scale.t\n"
        "  mpirun -np 3 strata dml --mode bsp --data synth:classes=5,features=200 --latent 16\n"
        "  strata dml --mode serial --data train.svm --pairs 50000 --model-out dml-model\n",
    .unit = "pairs",
    .options = dml_options,
    .config_size = sizeof(strata_dml_config),
    .check = dml_check,
    .defaults = {.passes = 20, .depth = 1},
    .n_partials = N_PARTIALS,
    .n_objectives = 4,
    .objective_names = dml_objective_names,
    .falling = 1u << 0, /* train_loss */
    .load = dml_load,
    .schedule = strata_sf_schedule,
    .worker_init = dml_worker_init,
    .worker_free = dml_worker_free,
    .compute = dml_compute,
    .evaluate = dml_evaluate,
    .objectives = dml_objectives,
    .tol = {STRATA_TOL_REL_CHANGE, 0, "the relative change of the training loss over a pass"},
    .diverged_hint = "try a smaller --lr",
    .describe = dml_describe,
    .sf = &dml_sf,
    .export_model = dml_export,
};
