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
 * its word use, not K. strata_lda_warp_sweep, below, samples the same
 * posterior by Metropolis-Hastings at a cost per token that does not grow
 * with K.
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

/*
 * The Metropolis-Hastings sampler ("warp"): the same stationary
 * distribution as strata_lda_sweep at a cost per token that does not grow
 * with K, but each token moves less per sweep, so it takes more sweeps to
 * the same likelihood. For each token, `steps` times: a word proposal
 * q(k) ∝ nwk[w][k] + beta, then a document proposal q(k) ∝ ndk[d][k] +
 * alpha, each accepted or rejected against the exact conditional above
 * (the token's own counts removed, every count as it is at that moment).
 * Both proposals are drawn in O(1) from the topics of the other tokens and
 * of the token itself: a document's from z over its slots (a uniformly
 * chosen slot, or a uniform topic with probability K alpha / (L_d +
 * K alpha)); a word's from the live topics of the call's own tokens of
 * that word, or from an alias table over the rest of its row (tokens the
 * call cannot move), or a uniform topic. The proposals are those of Chen
 * et al., "WarpLDA" (VLDB 2016) and Yuan et al., "LightLDA" (WWW 2015),
 * without WarpLDA's delayed counts: the target is always current, so the
 * chain leaves the collapsed posterior invariant, as the exact sampler's.
 */
typedef struct strata_lda_warp strata_lda_warp;

/* STRATA_EINVAL as strata_lda_sampler_new, and for steps outside 1..64
 * (word and document proposals per token, each; 2 is a good default);
 * STRATA_ENOMEM. */
STRATA_EXPORT int strata_lda_warp_new(const strata_lda_params *p, uint32_t steps,
                                      strata_lda_warp **out);
STRATA_EXPORT void strata_lda_warp_free(strata_lda_warp *s);

/*
 * Resamples tokens tok[0..n) in order, like strata_lda_sweep; they may
 * come in any order (grouped by document is fastest). The caller
 * guarantees: every token's slot indexes z and appears at most once in
 * the call; document d's tokens are the slots [doc_off[d], doc_off[d + 1])
 * of z, all of them (not only this call's), and ndk[d] counts exactly
 * their topics; word rows and topic totals hold whole counts that agree
 * with z. Nothing is cached across calls: ndk, nwk, nk and z may change
 * between them. Within a call the sampler keeps, per word it meets, the
 * topics of the call's tokens of that word and an alias table over the
 * rest of its row, built from the caller's counts when the call starts
 * (O(K) per distinct word, O(n) in all). The counts and z are updated in
 * place; rng advances by 4 draws per call (the sampler draws from streams
 * seeded by them). Not thread-safe on one sampler.
 * Returns 0; STRATA_EINVAL for a NULL argument with n > 0; STRATA_ENOMEM
 * (nothing changed); STRATA_ERANGE for inconsistent input: a topic >= K
 * in z, a count that is negative, fractional or not finite, a word row
 * holding fewer tokens of a topic than the call, a slot outside its
 * document's range, or a count that would go negative. An error found
 * while sampling leaves the counts and z as they were before that token.
 */
STRATA_EXPORT int strata_lda_warp_sweep(strata_lda_warp *s, const strata_lda_token *tok, size_t n,
                                        int32_t *ndk, float *nwk, float *nk, uint16_t *z,
                                        const uint64_t *doc_off, strata_rng *rng);

/* The exact conditional of one token (its counts already removed), p[K]
 * summing to 1: the reference the tests compare sweeps against. */
STRATA_EXPORT void strata_lda_conditional(const strata_lda_params *p, const int32_t *ndk_d,
                                          const float *nwk_w, const float *nk, double *prob);

#endif
