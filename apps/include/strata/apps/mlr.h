/*
 * strata/apps/mlr.h - the "mlr" app: multiclass logistic regression by minibatch
 * SGD, a sufficient-factor app (strata/sf.h), and its exported models.
 *
 * Model: p(y = j | a) = softmax(W^T a)_j with W of D x J (D features, plus
 * one constant bias feature unless --no-bias; J classes), kept as D rows of
 * J floats. Loss: the mean cross-entropy over the training set, plus
 * (lambda / 2) |W|^2 over the non-bias rows. Each example i of a clock's
 * global minibatch of B examples contributes the factor
 *   u = softmax(W^T a_i) - e_{y_i},  v = a_i,  scale = -lr_t / B,
 * lr_t = lr / (1 + lr-decay * pass); with lambda > 0 every clock also
 * scales the non-bias rows by 1 - lr_t lambda (the app's clock_end step).
 * Objectives after every pass, on the pass's model: train_loss (the loss
 * above), train_acc, test_loss (mean cross-entropy) and test_acc.
 */
#ifndef STRATA_MLR_H
#define STRATA_MLR_H

#include <stdint.h>

#include "strata/app.h"
#include "strata/apps/libsvm.h"

typedef struct strata_mlr_config {
  const char *data;     /* LIBSVM file, or "synth:..." (strata/apps/libsvm.h) */
  const char *test;     /* LIBSVM file or NULL */
  double test_fraction; /* hold out of --data */
  int minibatch;        /* K: examples per worker per clock */
  double lr, lr_decay, lambda, init_scale;
  int no_bias;
} strata_mlr_config;

STRATA_EXPORT extern const strata_app strata_app_mlr;

/* ---- exported models (--model-out DIR) -------------------------------- */
/*
 * A directory of plain files:
 *   meta.json   format "strata-mlr-1", classes J, features D (without the
 *               bias), bias (true/false)
 *   W.f32       float32 weights, (D + bias) rows of J: row k for feature
 *               k + 1 of the LIBSVM files, the last row the bias
 *   labels.txt  the label of class j on line j + 1 (the files' labels)
 */
typedef struct strata_mlr_model {
  uint32_t classes, features; /* J, D */
  int bias;
  float *W;                   /* (D + bias) x J */
  int64_t *labels;            /* J, ascending */
} strata_mlr_model;

/* Writes DIR (created if missing), each file atomically, meta.json last. */
STRATA_EXPORT int strata_mlr_model_write(const char *dir, const strata_mlr_model *m);
/* Reads DIR. STRATA_ENOENT (a file missing), STRATA_EPARSE (not an MLR
 * model, a file of the wrong size, labels not ascending integers),
 * STRATA_ERANGE (a non-finite weight, named by row and column),
 * STRATA_ENOMEM; each naming the file. On error *m is left zeroed. */
STRATA_EXPORT int strata_mlr_model_read(const char *dir, strata_mlr_model *m);
STRATA_EXPORT void strata_mlr_model_close(strata_mlr_model *m);

/* The class probabilities of one example (nnz features, 0-based columns
 * below m->features) into p (J floats); returns the most likely class. */
STRATA_EXPORT uint32_t strata_mlr_model_predict(const strata_mlr_model *m, const uint32_t *col,
                                                const float *val, uint64_t nnz, float *p);

#endif
