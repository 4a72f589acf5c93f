/*
 * strata/apps/lda.h - the collapsed Gibbs sampler for LDA (symmetric alpha and
 * beta, K topics), as the LDA app runs it on one chunk of tokens.
 *
 * Counts: ndk (per document, int32, dense K per document), nwk (per word,
 * float, dense K per word: float because parameter-server tables hold float
 * rows; exact for counts below 2^24), nk (topic totals, float K). z holds
 * each token's topic. A sweep resamples every token of the list in order,
 * exactly: for each token it removes the token's topic t from ndk, nwk, nk,
 * draws k with probability proportional to
 *     (ndk[d][k] + alpha) * (nwk[w][k] + beta) / (nk[k] + V * beta)
 * and adds k back. The default sampler decomposes this sum into the
 * smoothing, document and word buckets of Yao, Mimno & McCallum (KDD 2009,
 * "SparseLDA"), so a token costs about the number of topics its document and
 * its word use, not K.
 */
#ifndef STRATA_LDA_H
#define STRATA_LDA_H

#include <stddef.h>
#include <stdint.h>

#include "strata/core.h"
#include "strata/error.h"

typedef struct strata_lda_token {
  uint32_t doc;  /* row of ndk */
  uint32_t word; /* row of nwk */
  uint32_t slot; /* index into z */
} strata_lda_token;

typedef struct strata_lda_params {
  uint32_t K;
  uint32_t V;    /* vocabulary size in the prior (V * beta) */
  double alpha, beta;
} strata_lda_params;

typedef struct strata_lda_sampler strata_lda_sampler;

/* STRATA_EINVAL for K < 1, V < 1, alpha <= 0 or beta <= 0; STRATA_ENOMEM. */
STRATA_EXPORT int strata_lda_sampler_new(const strata_lda_params *p, strata_lda_sampler **out);
STRATA_EXPORT void strata_lda_sampler_free(strata_lda_sampler *s);

/*
 * Resamples tokens tok[0..n) in order. Tokens should come grouped by
 * document (the document bucket is rebuilt when the document changes) and
 * may use any word rows; ndk, nwk, nk may have been changed by others
 * between calls (nothing about them is cached across calls). Counts must
 * be consistent with z on entry (every token counted once under z[slot]).
 * Returns 0, or STRATA_ERANGE if a count would go negative (inconsistent
 * input; the counts are then left as they were before that token).
 */
STRATA_EXPORT int strata_lda_sweep(strata_lda_sampler *s, const strata_lda_token *tok, size_t n,
                                   int32_t *ndk, float *nwk, float *nk, uint16_t *z,
                                   strata_rng *rng);

/* The exact conditional of one token (its counts already removed), p[K]
 * summing to 1: the reference the tests compare sweeps against. */
STRATA_EXPORT void strata_lda_conditional(const strata_lda_params *p, const int32_t *ndk_d,
                                          const float *nwk_w, const float *nk, double *prob);

#endif
