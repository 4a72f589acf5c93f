/*
 * strata/apps/dml.h - the "dml" app: distance metric learning (Weinberger-style
 * linear projection, as in Xie et al.'s sufficient factor broadcasting) by
 * minibatch SGD over labelled pairs, a sufficient-factor app (strata/sf.h).
 *
 * Model: L of k x d (k = --latent, d the features of the LIBSVM data), and
 * the distance of two examples x, y is dist(x, y) = |L (x - y)|^2. L is
 * kept as the app's matrix, d rows of k floats: row j is column j of L.
 *
 * Pairs. Load draws --pairs training pairs from --data (and --test-pairs
 * from the test set), seeded by --seed: pair i is similar (two distinct
 * examples of one class) when i is even and dissimilar (examples of two
 * classes) when i is odd, so every minibatch is balanced and the list does
 * not depend on the number of workers. A pair is stored as delta = x - y,
 * sparse (the union of both supports, ascending, exact zeros dropped), and
 * its label. Data whose classes are all single examples (no similar pair)
 * or that holds one class (no dissimilar pair) is refused with
 * STRATA_EINVAL.
 *
 * Loss of a pair with u = L delta and dist = |u|^2: dist when similar,
 * max(0, margin - dist) when dissimilar; the objective is its mean over the
 * pairs. Its gradient in L is 2 s u delta^T (s = +1 similar, -1 an active
 * dissimilar pair, dist < margin), so each pair of a clock's global
 * minibatch of B pairs contributes the factor
 *   u = L delta,  v = delta,  scale = -2 s lr_t / B,
 * lr_t = lr / (1 + lr-decay * pass), and an inactive dissimilar pair none.
 * Initial L: entries ~ N(0, S^2 / d), S = --init-scale, seeded per row.
 *
 * Objectives after every pass, on the pass's model: train_loss (the mean
 * pair loss over the training pairs), train_acc, test_loss and test_acc,
 * where a pair is judged similar when dist < margin / 2 and the accuracy is
 * the fraction of pairs judged right (NaN test objectives without test
 * pairs).
 *
 * Exported model (--model-out DIR), a directory of plain files:
 *   meta.json   format "strata-dml-1", latent k, features d, margin
 *   L.f32       float32, d rows of k: row j is column j of L, the column
 *               that feature j + 1 of the LIBSVM files scales
 * A model holding a non-finite value is not written (STRATA_EDIVERGED).
 */
#ifndef STRATA_DML_H
#define STRATA_DML_H

#include <stdint.h>

#include "strata/app.h"

typedef struct strata_dml_config {
  const char *data;     /* LIBSVM file, or "synth:..." (strata/apps/libsvm.h) */
  const char *test;     /* LIBSVM file or NULL */
  uint64_t pairs;       /* M: training pairs */
  uint64_t test_pairs;  /* T: test pairs (0: none) */
  int latent;           /* k */
  double margin;
  int minibatch;        /* K: pairs per worker per clock */
  double lr, lr_decay, init_scale;
} strata_dml_config;

STRATA_EXPORT extern const strata_app strata_app_dml;

#endif
