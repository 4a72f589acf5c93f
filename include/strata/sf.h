/*
 * strata/sf.h - sufficient-factor apps: models whose parameter is one
 * matrix W and whose update on a minibatch is a sum of rank-1 products
 * u v^T (multiclass logistic regression, distance metric learning, sparse
 * coding; Xie et al., "Sufficient Factor Broadcasting").
 *
 * Such an app is a strata_app (strata/app.h) that sets `sf` (and
 * STRATA_APP_ADDITIVE). The engine then runs one app source three ways:
 *   --mode sfb       every worker keeps a replica of W and sends the factors
 *                    it computes to its peers (all of them, or Q of them:
 *                    --peers, which relay them to the rest), which rebuild
 *                    the update locally;
 *   bsp, ssp, ...    full-matrix synchronisation (FMS): W's rows live in a
 *                    parameter-server table, each worker reads them under
 *                    the mode's rule and sends the rows the factors changed
 *                    back as deltas;
 *   --mode serial    one process applies every factor itself.
 * In every mode a clock is one minibatch: each worker computes the factors
 * of its minibatch against W as the clock starts, and they are applied
 * after compute returns, never during it. tv->clock counts these clocks
 * and setup->wpc is 0 (strata/app.h, "Clocks").
 *
 * Layout. W is J x D (J: the length of u, D: the range of v's indices) and
 * is the problem's one rotating block, kept by columns: nrows = D rows of
 * row_bytes = 4 J bytes, row k holding the J floats of W's column k, the
 * column that v's entry k scales. A factor with sparse v therefore touches
 * whole rows: applying it adds scale * v_k * u to row k for each stored k,
 * and FMS sends only the rows a clock changed.
 *
 * What the app provides:
 *   load      W as rotating block 0 with its initial values; the data cut
 *             into minibatches with strata_sf_batch, data block c * P + p
 *             holding worker p's minibatch of clock c (empty ones allowed);
 *             one resident block per worker (its own state, may be empty);
 *   schedule  strata_schedule_minibatches (strata/schedule.h), or an app's
 *             own shared schedule with one task per worker per sub-epoch;
 *   compute   reads W (tv->rotating, whole: SF apps run with --depth 1) and
 *             the minibatch (tv->data), and calls strata_sf_emit(tv->factors,
 *             ...) once per rank-1 term. It must not write W.
 *   sf        how one factor is applied (default: strata_sf_apply) and an
 *             optional step at the end of every clock (a proximal operator).
 * Everything else (evaluate, objectives, export) is as for any app; in sfb
 * mode each worker scores its own examples on its own replica, which with
 * full broadcast and --staleness 0 is the same W on every worker.
 *
 * Order and equality. The factors of one clock are applied in a fixed
 * order: by worker, then in the order they were emitted. With --mode sfb,
 * --staleness 0 and full broadcast every replica is therefore the same bit
 * for bit at every clock end, and equals a serial run whose minibatch is P
 * times larger (strata_sf_batch makes its minibatch c the union of the P
 * workers' minibatches c, in worker order).
 */
#ifndef STRATA_SF_H
#define STRATA_SF_H

#include <stdint.h>

#include "strata/app.h"

/* One rank-1 term: W's block gets, for each k < nnz, row idx[k] (row k when
 * idx is NULL: v dense over rows 0..nnz-1) += scale * val[k] * u, u holding
 * J floats. */
typedef struct strata_sf_factor {
  float scale;
  uint32_t nnz;
  const float *u;
  const uint32_t *idx;
  const float *val;
} strata_sf_factor;

/* Where the clock_end step runs. share is the part of the step this call
 * stands for: 1 on a replica that receives every factor (sfb, serial), 1/P
 * in the parameter-server modes, where each of the P workers' changes is
 * added to the table, so that a linear step (an L2 decay W -= share * d W)
 * adds up to the whole step once; a non-linear one (a projection) is then
 * only approximate. */
typedef struct strata_sf_clock {
  int pass;       /* 0-based, as tv->pass */
  int64_t clock;  /* clocks since the start of the run, 0-based: the tv->clock
                     of the compute that made the clock's factors */
  double share;
} strata_sf_clock;

typedef struct strata_sf_ops {
  /* Applies one factor to W (the task's rotating block). NULL: the engine
   * calls strata_sf_apply. Must not depend on anything but its arguments
   * and the state, so that every replica computes the same floats. */
  void (*apply)(void *state, strata_block *W, const strata_sf_factor *f);
  /* Optional: runs on W after each clock's factors are applied. 0 or a
   * negative code with a message (ends the run). */
  int (*clock_end)(void *state, strata_block *W, const strata_sf_clock *ck);
} strata_sf_ops;

/*
 * Adds one factor to the clock's set (compute's tv->factors): copies u (J
 * floats, J = the rotating block's row length), and nnz indices and values
 * of v (idx NULL: v is dense and nnz is at most D). Factors are applied in
 * the order they are emitted, after compute returns.
 * @return 0; STRATA_ERANGE when an index is not below D (nnz > D for a
 *         dense v), with a message naming it; STRATA_EINVAL for a NULL
 *         sink, u or val (with nnz > 0); STRATA_ENOMEM.
 */
STRATA_EXPORT int strata_sf_emit(strata_sf_factors *out, float scale, const float *u,
                                 const uint32_t *idx, const float *val, uint32_t nnz);

/* The engine's apply: row idx[k] (or k) of W += (scale * val[k]) * u. The
 * indices must be below W->nrows (strata_sf_emit checked them). */
STRATA_EXPORT void strata_sf_apply(strata_block *W, const strata_sf_factor *f);

/*
 * A factor set of one's own, for testing an app's compute outside the
 * engine: create one for a J x D matrix, put it in a task view's
 * `factors`, call compute, then walk what it emitted. Returns NULL when out
 * of memory; free(NULL) is a no-op; clear empties it.
 */
STRATA_EXPORT strata_sf_factors *strata_sf_factors_create(uint32_t J, uint32_t D);
STRATA_EXPORT void strata_sf_factors_free(strata_sf_factors *f);
STRATA_EXPORT void strata_sf_factors_clear(strata_sf_factors *f);
/* The factors in emission order: *pos starts at 0; each call fills *out
 * (pointing into the set, valid until it changes) and returns 1, then 0
 * after the last. */
STRATA_EXPORT int strata_sf_factors_next(const strata_sf_factors *f, size_t *pos,
                                         strata_sf_factor *out);

/*
 * The schedule callback of an SF app whose data blocks follow
 * strata_sf_batch (block c * P + p: worker p's minibatch of clock c):
 * strata_schedule_minibatches(sched, P, n_data / P). Use it as the app's
 * `schedule`.
 */
STRATA_EXPORT int strata_sf_schedule(const void *cfg, const strata_setup *setup,
                                     const strata_problem *prob, strata_schedule *sched);

/*
 * The minibatch partition: n examples in a fixed order, P workers, K
 * examples per worker per clock. Global minibatch c is examples
 * [c P K, min((c + 1) P K, n)), cut into P consecutive runs of K; worker p
 * gets the p-th run, [*lo, *hi) (empty for a short last minibatch).
 * Clocks per pass: strata_sf_clocks(n, P, K) = ceil(n / (P K)).
 */
static inline uint64_t strata_sf_clocks(uint64_t n, int P, uint32_t K) {
  uint64_t B = (uint64_t)P * K;
  return (n + B - 1) / B;
}

static inline void strata_sf_batch(uint64_t n, int P, uint32_t K, uint64_t c, int p, uint64_t *lo,
                                   uint64_t *hi) {
  uint64_t a = c * (uint64_t)P * K + (uint64_t)p * K, b = a + K;
  *lo = a < n ? a : n;
  *hi = b < n ? b : n;
}

/* The size of global minibatch c (what a step size is divided by, so that
 * every mode takes the same step): min(P K, n - c P K). */
static inline uint64_t strata_sf_batch_size(uint64_t n, int P, uint32_t K, uint64_t c) {
  uint64_t lo = c * (uint64_t)P * K, B = (uint64_t)P * K;
  return lo >= n ? 0 : (n - lo < B ? n - lo : B);
}

#endif
