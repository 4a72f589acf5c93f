/*
 * strata/apps/mf.h - matrix factorisation by DSGD (apps/mf).
 *
 * Model: r_ui ~ mu + b_u + b_i + <w_u, h_i>, squared loss with L2 (lambda on
 * factors, lambda_bias on biases), float32 factors of rank k. Users are the
 * row side (W, resident blocks), items the column side (H, rotating blocks).
 *
 * Parameter rows are laid out as `stride` floats: k factors padded with
 * zeros to a multiple of 8 (kpad), then an 8-float tail holding the bias
 * (tail[0]) and, with AdaGrad, the squared-gradient accumulators of the
 * factors (tail[1]) and the bias (tail[2]). Padding stays zero under updates.
 *
 * Step sizes (--update): the rate of pass t (0-based) is
 * lr / (1 + lr_decay * t). AdaGrad, the default, gives each row the step
 * rate / sqrt(G), where G starts at 1 and adds the mean squared gradient of
 * that row's factors at every update (biases likewise with their own
 * accumulator); plain SGD uses the rate itself. Unless given, lr_decay is
 * STRATA_MF_DECAY_ADAGRAD under AdaGrad and STRATA_MF_DECAY_SGD under SGD.
 * The defaults (AdaGrad, lr 0.08, decay 0.4, lambda 0.05, lambda_bias
 * 0.05, init_scale 0.1) come from bench/mf_tune.sh: the best of its grid by
 * validation RMSE on a split of MovieLens 100K's ua.base at k = 100,
 * checked on the 10M synthetic set (bench/README.md, "MF per core, time
 * to quality, default settings").
 */
#ifndef STRATA_MF_H
#define STRATA_MF_H

#include <stddef.h>
#include <stdint.h>

#include "strata/app.h"
#include "strata/options.h"

#define STRATA_MF_TAIL 8
#define STRATA_MF_DECAY_ADAGRAD 0.4
#define STRATA_MF_DECAY_SGD 0.1

/* The "mf" app. */
STRATA_EXPORT extern const strata_app strata_app_mf;

typedef struct strata_mf_config {
  const char *data;    /* file path or "synth:..." */
  const char *format;  /* strata_format name */
  const char *test;    /* test file or NULL */
  double test_fraction;
  int rank;
  double lr;
  strata_opt_double lr_decay; /* not given: the rule's default (strata_mf_lr_decay) */
  double lambda, lambda_bias;
  double init_scale;
  int no_bias;
  const char *update; /* "adagrad" or "sgd" */
  const char *lr_schedule; /* sgd: "decay" (lr / (1 + lr_decay t)) or "bold" (the bold
                              driver: x1.05 after a pass whose training loss fell,
                              x0.5 after one whose loss rose) */
  int duplicate;      /* block-diagonal copies of the data (weak scaling), >= 1 */
} strata_mf_config;

/* The decay of the rate that a configuration runs with: lr_decay when
 * given, else its update rule's default. */
STRATA_EXPORT double strata_mf_lr_decay(const strata_mf_config *cfg);

/* One training example inside a data block: indices local to the block's
 * resident (user) and rotating (item) blocks. */
typedef struct strata_mf_entry {
  uint32_t u, i;
  float r;
} strata_mf_entry;

/* Hyper-parameters of one pass, as the kernel sees them. */
typedef struct strata_mf_step {
  int k, kpad, stride;
  float mu;
  float lr;       /* this pass's rate */
  float lambda, lambda_bias;
  int bias;       /* learn biases */
  int adagrad;
} strata_mf_step;

/* Rounds k up to the padded width. */
static inline int strata_mf_kpad(int k) { return (k + 7) / 8 * 8; }

/*
 * Runs SGD over n entries in order, updating rows of W (users) and H (items)
 * in place. Returns the sum of squared errors measured before each update.
 * Up to four neighbouring entries on pairwise disjoint rows (no user and no
 * item twice) are computed together, with the same result, bit for bit, as
 * one after the other; the order of strata_mf_interleave makes most runs of
 * four neighbours so.
 */
STRATA_EXPORT double strata_mf_sgd(const strata_mf_step *st, const strata_mf_entry *e, size_t n,
                                   float *W, float *H);

/*
 * Orders one pipeline chunk's entries for strata_mf_sgd. in[0..n) holds the
 * chunk with each user's entries together (mf.c sorts them by user, or by
 * user in reversed pieces); out (n entries, not overlapping in) receives
 * four runs, cut at the user boundaries at or after each quarter, taken in
 * turn (a run that ends drops out). Neighbours then belong to different users
 * while two runs remain, and mostly to different items, which lets the
 * kernel overlap them. (A chunk whose user at a quarter holds the rest of
 * it has fewer runs: a user of 10 ratings among 12 makes one.)
 * Deterministic: the order depends on in alone.
 */
STRATA_EXPORT void strata_mf_interleave(const strata_mf_entry *in, size_t n, strata_mf_entry *out);

/* Prediction for one user row and item row (either may be NULL: unseen). */
STRATA_EXPORT float strata_mf_predict(const strata_mf_step *st, const float *w, const float *h);

/* Loss of one example as SGD sees it (for gradient checks):
 * 0.5 (r - pred)^2 + 0.5 lambda (|w|^2 + |h|^2) + 0.5 lambda_bias (bu^2 + bi^2). */
STRATA_EXPORT double strata_mf_loss(const strata_mf_step *st, const float *w, const float *h,
                                    float r);

/* Fills a parameter row deterministically from (seed, side, global index):
 * factors ~ N(0, (scale)^2 / k), bias 0, accumulators 1. */
STRATA_EXPORT void strata_mf_init_row(float *row, int k, int stride, double scale, uint64_t seed,
                                      int side, uint64_t index);

/* ---- exported models (--model-out DIR) -------------------------------- */
typedef struct strata_mf_model {
  int k;
  float mu;
  int bias;
  uint32_t n_users, n_items;
  float *W, *H;    /* n x k, row-major, dense index order */
  float *bu, *bi;  /* n */
  int64_t *user_ids, *item_ids; /* original ids of dense indices */
} strata_mf_model;

/* Reads DIR written by --model-out. Errors name the file (and the line of
 * users.txt or items.txt, quoting a bad id as strata_quote does):
 * STRATA_ENOENT (a file missing), STRATA_EPARSE (not a model, a file of the
 * wrong size, a bad or missing id), STRATA_ERANGE (a non-finite value: mu,
 * or a factor or bias, named by file, row and column, rows counting from 1
 * in the order of users.txt or items.txt), STRATA_ENOMEM. On error *m is
 * left zeroed. */
STRATA_EXPORT int strata_mf_model_read(const char *dir, strata_mf_model *m);
STRATA_EXPORT void strata_mf_model_close(strata_mf_model *m);
/* Writes a model into DIR (created if missing), each file atomically. */
STRATA_EXPORT int strata_mf_model_write(const char *dir, const strata_mf_model *m);

/* Score of (user, item) by dense indices. */
STRATA_EXPORT float strata_mf_model_score(const strata_mf_model *m, uint32_t u, uint32_t i);

/* The top n items for user u by score (OpenBLAS sgemv over all items),
 * skipping items with exclude[i] != 0 (exclude may be NULL). Writes up to n
 * indices and scores, best first; returns how many. */
STRATA_EXPORT int strata_mf_model_top(const strata_mf_model *m, uint32_t u, const uint8_t *exclude,
                                      int n, uint32_t *items, float *scores);

#endif
