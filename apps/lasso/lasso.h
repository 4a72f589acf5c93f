/*
 * lasso.h - the inputs of strata-lasso (data.c): a design matrix X kept by
 * columns (CSC, double values) and its targets y, read from a LIBSVM /
 * svmlight regression file, a tab-separated table with a header line (the
 * diabetes file), or generated (synth:...).
 */
#ifndef STRATA_LASSO_H
#define STRATA_LASSO_H

#include <stdint.h>

/* N x P, column f's rows row[colptr[f] .. colptr[f+1]) increasing, with
 * values val[...]; targets y[0..N). Every array strata_malloc'd. */
typedef struct lasso_data {
  uint32_t n, p;
  uint64_t nnz;
  uint64_t *colptr; /* p + 1 */
  uint32_t *row;    /* nnz */
  double *val;      /* nnz */
  double *y;        /* n */
} lasso_data;

/* The generator's spec: "synth:n=500,p=400000,density=0.05,nonzeros=100,
 * noise=0.1,seed=1" (any subset, any order). */
typedef struct lasso_synth {
  uint32_t n, p, nonzeros;
  double density, noise;
  uint64_t seed;
} lasso_synth;

/*
 * Reads or generates `spec` into *d (zeroed first; left zeroed on failure):
 *   "synth[:k=v,...]"          the generator (lasso_synth above);
 *   "tsv:PATH", or a PATH ending in ".tsv" or ".tab.txt"
 *                              a header line, then N lines of P + 1 numbers
 *                              separated by tabs (or blanks), the last the
 *                              target;
 *   any other PATH             LIBSVM/svmlight: "target idx:val ...",
 *                              real-valued target, 1-based increasing
 *                              indices; '#' comments and blank lines skipped.
 * Files are read through strata/apps/lines.h: gzip data is decompressed,
 * whatever the name. Errors carry one line naming the file and line:
 * STRATA_ENOENT (cannot open), STRATA_EPARSE (a malformed or non-finite
 * field, a wrong column count, a gzip stream cut short or without its
 * trailer), STRATA_EEMPTY (no examples), STRATA_EUSAGE (a bad synth spec),
 * STRATA_ENOMEM: at the line that brings it (a feature index sizes the
 * columns), or for a synth spec before generating, the estimate of what
 * reading needs outgrows the memory available (strata_mem_check).
 */
int lasso_data_read(const char *spec, lasso_data *d);

/* Centres and scales every column to unit population standard deviation
 * (divides by N) and centres y. A constant column becomes all zeros (its
 * coefficient then stays 0). The result is dense: N values per column.
 * 0 or STRATA_ENOMEM (d unchanged then), refused before allocating when
 * the dense copy would not fit in the memory available. */
int lasso_data_standardize(lasso_data *d);

/* Frees the arrays and zeroes d; safe on a zeroed one. */
void lasso_data_close(lasso_data *d);

/* ---- the app's parts, shared by lasso.c (options, the ring's schedules)
 * and rounds.c (the dynamic schedule and the logistic loss on rounds) ---- */

#include "strata/app.h"
#include "strata/round.h"

enum { SCHED_STATIC, SCHED_DYNAMIC };
enum { LOSS_SQUARED, LOSS_LOGISTIC };

/* The options (lasso.c's table). */
typedef struct lasso_config {
  const char *data;
  int standardize;
  strata_opt_double lambda, lambda_ratio;
  int path, path_passes;
  int schedule;
  int sweeps;
  double damping;
  /* rounds.c: not given, set_size, rounds and corr_threshold take their
   * defaults from the loss and set_sweeps (lasso_rounds_load) */
  strata_opt_int set_size, rounds;
  strata_opt_double corr_threshold;
  double eta;
  int set_sweeps;
  int loss;
  double bias;
  int line_search;
} lasso_config;

/* What every worker needs from the data. */
typedef struct lasso_meta {
  uint32_t n, p;
  double lambda, lambda_max, yy; /* yy = |y|^2 */
} lasso_meta;

struct lasso_rounds;

/* Coordinator-only: X and y for the exact final objective, and the export;
 * in a round run also the coordinator's working state (rounds.c). */
typedef struct lasso_priv {
  lasso_data d;
  lasso_meta m;
  int workers;
  double final_objective; /* NaN until export_model computed it */
  uint64_t final_nonzeros;
  struct lasso_rounds *rounds; /* NULL unless a round run */
} lasso_priv;

/* lambda of pass `pass`: the path's stage (a fixed --path-passes each), or
 * the target. The same on the coordinator (pass_control) and the workers
 * (block_objective, which is not handed the pass's controls). */
double lasso_lambda_at(const lasso_config *cfg, const lasso_meta *m, int pass);

/* The per-pass partials of every schedule (lasso.c sums them). */
enum { P_LS, P_L1, P_NZ, P_MAXD, P_UPDATES, P_TOUCHED, P_REL_GAP, N_PARTIALS };
/* The objectives, in the order of lasso.c's names. */
enum { O_OBJECTIVE, O_NONZEROS, O_MAXD, O_UPDATES, O_TOUCHED, O_REL_GAP, N_OBJECTIVES };

/* ---- rounds.c: --schedule dynamic and --loss logistic run on rounds
 * (strata/round.h) ------------------------------------------------------ */

/* Whether cfg asks for a round run: the dynamic schedule, or the logistic
 * loss (which runs on rounds in both schedules). */
int lasso_rounds_wanted(const lasso_config *cfg);
/* The options a round run refuses (STRATA_EUSAGE with a message), 0 if none. */
int lasso_rounds_check(const lasso_config *cfg, const strata_setup *setup);
/* load for a round run, after lasso.c read (and standardised) pv->d: fills
 * pv->m, the row shards, the coordinator block and pv->rounds. 0 or a
 * negative code with its message; pv stays the caller's. */
int lasso_rounds_load(const lasso_config *cfg, const strata_setup *setup, strata_problem *prob,
                      lasso_priv *pv);
void lasso_rounds_priv_free(struct lasso_rounds *rs);

/* The workers' side. */
struct lasso_rworker;
int lasso_rounds_worker_init(const lasso_config *cfg, const strata_setup *setup,
                             const lasso_meta *m, struct lasso_rworker **out);
void lasso_rounds_worker_free(struct lasso_rworker *rw);
int lasso_rounds_push(struct lasso_rworker *rw, const strata_round *r, const strata_task_view *tv,
                      const strata_round_work *work, strata_bytes *out);
int lasso_rounds_apply(struct lasso_rworker *rw, const strata_round *r, const strata_task_view *tv,
                       const void *values, size_t len);
int lasso_rounds_block_objective(struct lasso_rworker *rw, int pass, strata_block_kind kind, int id,
                                 const strata_block *b, double *partials);

/* The coordinator's side. */
int lasso_rounds_schedule(const void *cfg, strata_problem *prob, const strata_round *r,
                          strata_round_plan *plan);
int lasso_rounds_pull(const void *cfg, strata_problem *prob, const strata_round *r,
                      const strata_round_plan *plan, const strata_round_part *parts,
                      strata_bytes *apply_out);
void lasso_rounds_objectives(const lasso_config *cfg, const strata_problem *prob,
                             const double *partials, double *values);
void lasso_rounds_describe(const lasso_config *cfg, const strata_problem *prob, strata_json *j);
int lasso_rounds_export(const lasso_config *cfg, const strata_problem *prob, const char *dir);

/* ---- gap.c: the duality gap ---------------------------------------- */

/* scikit-learn's duality gap of the Lasso (enet_coordinate_descent with
 * l2 weight 0), in its scaling: primal (1/2)|r|^2 + alpha |b|_1 with
 * alpha = N lambda, r = y - X b. From rr = |r|^2, ry = r.y, l1 = |b|_1 and
 * gmax = |X^T r|_inf. Returns the gap; *primal gets the primal (N F). */
double lasso_gap_squared(double rr, double ry, double l1, double gmax, double alpha,
                         double *primal);

/* The L1-regularised logistic loss's gap, an upper bound on F - F*:
 *   F(w) = (1/N) sum_i log(1 + exp(-y_i w.x_i)) + lambda |w|_1,
 * dual point theta_i = s sigma(-y_i w.x_i) with s = min(1, lambda /
 * gmax), gmax = |grad of the loss|_inf, scaled into the dual's feasible
 * set; D(theta) = (1/N) sum_i H(theta_i) (H the binary entropy) is
 * concave, and H(s t) >= s H(t), so D >= s (1/N) sum_i H(t_i) = s ent.
 * From loss = the mean log-loss, ent = (1/N) sum H(sigma(-y_i w.x_i)),
 * l1 and gmax. Returns F - s ent; *primal gets F. */
double lasso_gap_logistic(double loss, double ent, double l1, double gmax, double lambda,
                          double *primal);

#endif
