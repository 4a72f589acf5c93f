/*
 * The LDA sampler tests' shared fixture (test_lda_sampler.c and
 * test_lda_warp.c): a corpus with its counts, built so that every count is
 * reached only through the slots the tokens name, its consistency checks,
 * a token's exact conditional, and Pearson's chi-square test.
 * Everything here is static inline: a test uses what it needs. Include it
 * after <cmocka.h>, whose assertions it uses.
 */
#ifndef STRATA_TESTS_LDA_STATE_H
#define STRATA_TESTS_LDA_STATE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"
#include "strata/apps/lda.h"

typedef struct state {
  uint32_t K, V, D;
  size_t n;
  strata_lda_token *tok;
  uint64_t *doc_off; /* D + 1 */
  int32_t *ndk;
  float *nwk, *nk;
  uint16_t *z;
} state;

static inline void state_alloc(state *s, uint32_t K, uint32_t V, uint32_t D, size_t n) {
  s->K = K;
  s->V = V;
  s->D = D;
  s->n = n;
  s->tok = calloc(n, sizeof *s->tok);
  s->doc_off = calloc((size_t)D + 1, sizeof *s->doc_off);
  s->ndk = calloc((size_t)D * K, sizeof *s->ndk);
  s->nwk = calloc((size_t)V * K, sizeof *s->nwk);
  s->nk = calloc(K, sizeof *s->nk);
  s->z = calloc(n, sizeof *s->z);
  assert_true(s->tok && s->doc_off && s->ndk && s->nwk && s->nk && s->z);
}

static inline void state_free(state *s) {
  free(s->tok);
  free(s->doc_off);
  free(s->ndk);
  free(s->nwk);
  free(s->nk);
  free(s->z);
  memset(s, 0, sizeof *s);
}

/* dst must have been allocated with src's sizes. */
static inline void state_copy(state *dst, const state *src) {
  memcpy(dst->tok, src->tok, src->n * sizeof *src->tok);
  memcpy(dst->doc_off, src->doc_off, ((size_t)src->D + 1) * sizeof *src->doc_off);
  memcpy(dst->ndk, src->ndk, (size_t)src->D * src->K * sizeof *src->ndk);
  memcpy(dst->nwk, src->nwk, (size_t)src->V * src->K * sizeof *src->nwk);
  memcpy(dst->nk, src->nk, src->K * sizeof *src->nk);
  memcpy(dst->z, src->z, src->n * sizeof *src->z);
}

static inline void state_clone(state *dst, const state *src) {
  state_alloc(dst, src->K, src->V, src->D, src->n);
  state_copy(dst, src);
}

static inline void state_count(state *s) {
  memset(s->ndk, 0, (size_t)s->D * s->K * sizeof *s->ndk);
  memset(s->nwk, 0, (size_t)s->V * s->K * sizeof *s->nwk);
  memset(s->nk, 0, s->K * sizeof *s->nk);
  for (size_t i = 0; i < s->n; i++) {
    const strata_lda_token *t = &s->tok[i];
    uint16_t k = s->z[t->slot];
    s->ndk[(size_t)t->doc * s->K + k]++;
    s->nwk[(size_t)t->word * s->K + k] += 1;
    s->nk[k] += 1;
  }
}

/* The counts are exactly those of z: per document they sum to its length,
 * per word to its frequency, and nk is the column sums of nwk. */
static inline void assert_consistent(const state *s) {
  state c;
  state_clone(&c, s);
  state_count(&c);
  for (size_t i = 0; i < s->n; i++) assert_in_range(s->z[s->tok[i].slot], 0, s->K - 1);
  assert_memory_equal(c.ndk, s->ndk, (size_t)s->D * s->K * sizeof *s->ndk);
  assert_memory_equal(c.nwk, s->nwk, (size_t)s->V * s->K * sizeof *s->nwk);
  assert_memory_equal(c.nk, s->nk, s->K * sizeof *s->nk);
  for (uint32_t k = 0; k < s->K; k++) {
    double col = 0;
    for (uint32_t w = 0; w < s->V; w++) col += s->nwk[(size_t)w * s->K + k];
    assert_true(col == s->nk[k]);
  }
  state_free(&c);
}

static inline void assert_same_state(const state *a, const state *b) {
  assert_memory_equal(a->ndk, b->ndk, (size_t)a->D * a->K * sizeof *a->ndk);
  assert_memory_equal(a->nwk, b->nwk, (size_t)a->V * a->K * sizeof *a->nwk);
  assert_memory_equal(a->nk, b->nk, a->K * sizeof *a->nk);
  assert_memory_equal(a->z, b->z, a->n * sizeof *a->z);
}

/*
 * D documents of len tokens over words 1..V-1 (skewed towards small ids),
 * topics drawn from ntop of the K, plus `wide` tokens of word 0 over all K
 * topics, dealt round the documents. Each document's slots are a
 * contiguous range (doc_off), filled backwards, so that z is reached only
 * through them.
 */
static inline void make_state(state *s, uint32_t K, uint32_t V, uint32_t D, uint32_t len, uint32_t ntop,
                       uint32_t wide, uint64_t seed) {
  strata_rng rng;
  strata_rng_seed(&rng, seed);
  size_t n = (size_t)D * len + wide;
  state_alloc(s, K, V, D, n);
  size_t at = 0;
  for (uint32_t d = 0; d < D; d++) {
    uint32_t nw = wide / D + (d < wide % D);
    s->doc_off[d] = at;
    s->doc_off[d + 1] = at + len + nw;
    for (uint32_t i = 0; i < len + nw; i++) {
      uint32_t w, k;
      if (i < len) {
        uint32_t a = 1 + (uint32_t)strata_rng_below(&rng, V - 1);
        uint32_t b = 1 + (uint32_t)strata_rng_below(&rng, V - 1);
        w = a < b ? a : b;
        k = (uint32_t)((strata_rng_below(&rng, ntop) * 7919 + 3 * w + d) % K);
      } else {
        w = 0;
        k = (uint32_t)strata_rng_below(&rng, K);
      }
      uint32_t slot = (uint32_t)(s->doc_off[d + 1] - 1 - i);
      s->tok[at] = (strata_lda_token){.doc = d, .word = w, .slot = slot};
      s->z[slot] = (uint16_t)k;
      at++;
    }
  }
  assert_int_equal(at, n);
  state_count(s);
}

/* The conditional of token i with its own counts taken out of s. */
static inline void conditional_of(const strata_lda_params *p, const state *s, size_t i, double *prob) {
  const strata_lda_token *t = &s->tok[i];
  uint32_t K = s->K, k = s->z[t->slot];
  int32_t *nd = malloc(K * sizeof *nd);
  float *nw = malloc(K * sizeof *nw), *nk = malloc(K * sizeof *nk);
  assert_true(nd && nw && nk);
  memcpy(nd, s->ndk + (size_t)t->doc * K, K * sizeof *nd);
  memcpy(nw, s->nwk + (size_t)t->word * K, K * sizeof *nw);
  memcpy(nk, s->nk, K * sizeof *nk);
  nd[k]--;
  nw[k] -= 1;
  nk[k] -= 1;
  strata_lda_conditional(p, nd, nw, nk, prob);
  free(nd);
  free(nw);
  free(nk);
}

static inline double gamma_q(double a, double x) {
  if (x <= 0) return 1;
  double lead = exp(-x + a * log(x) - lgamma(a));
  if (x < a + 1) {
    double ap = a, del = 1 / a, sum = del;
    for (int i = 0; i < 10000; i++) {
      ap += 1;
      del *= x / ap;
      sum += del;
      if (fabs(del) < fabs(sum) * 1e-16) break;
    }
    return 1 - sum * lead;
  }
  double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
  for (int i = 1; i < 10000; i++) {
    double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (fabs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (fabs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    double del = d * c;
    h *= del;
    if (fabs(del - 1) < 1e-16) break;
  }
  return lead * h;
}

/* Pearson's test of observed counts against expected ones (same total);
 * categories expected fewer than 5 times are pooled. Returns the p-value. */
static inline double chisq_p(const char *what, const double *obs, const double *expd, size_t m) {
  double stat = 0, ro = 0, re = 0, total = 0;
  int bins = 0;
  for (size_t k = 0; k < m; k++) {
    total += obs[k];
    if (expd[k] >= 5) {
      stat += (obs[k] - expd[k]) * (obs[k] - expd[k]) / expd[k];
      bins++;
    } else {
      ro += obs[k];
      re += expd[k];
    }
  }
  if (re >= 5 || (re > 0 && bins == 0)) {
    stat += (ro - re) * (ro - re) / re;
    bins++;
  } else {
    /* Too little mass to stand alone: it must not have been drawn much. */
    assert_true(ro <= 5 + 10 * re);
  }
  int df = bins - 1;
  double p = df > 0 ? gamma_q(df / 2.0, stat / 2.0) : 1.0;
  print_message("  %s: %.0f draws, chi2 = %.2f, df = %d, p = %.4g\n", what, total, stat, df, p);
  return p;
}

/* A suite run makes 43 such checks (unit_lda_sampler, unit_lda_warp and its
 * sparse build), each on a fresh seed: at 1e-4 a correct sampler would fail
 * one run in about 230; at 1e-6, one in 23,000. A sampler wrong by what the
 * tests' draw counts can see scores far below either. */
#define P_MIN 1e-6

static inline size_t find_token(const state *s, int w) {
  for (size_t i = 0; i < s->n; i++)
    if ((w >= 0 && s->tok[i].word == (uint32_t)w) || (w < 0 && s->tok[i].word != 0)) return i;
  fail_msg("no token of word %d", w);
  return 0;
}

/* Parameters every sampler must refuse with STRATA_EINVAL. */
static const strata_lda_params lda_bad_params[] = {
    {.K = 0, .V = 10, .alpha = 0.1, .beta = 0.01},
    {.K = 65536, .V = 10, .alpha = 0.1, .beta = 0.01},
    {.K = 10, .V = 0, .alpha = 0.1, .beta = 0.01},
    {.K = 10, .V = 10, .alpha = 0, .beta = 0.01},
    {.K = 10, .V = 10, .alpha = -1, .beta = 0.01},
    {.K = 10, .V = 10, .alpha = NAN, .beta = 0.01},
    {.K = 10, .V = 10, .alpha = INFINITY, .beta = 0.01},
    {.K = 10, .V = 10, .alpha = 0.1, .beta = 0},
    {.K = 10, .V = 10, .alpha = 0.1, .beta = -0.5},
    {.K = 10, .V = 10, .alpha = 0.1, .beta = NAN},
};

#endif
