/*
 * Unit tests for apps/lda/warp.c (strata_lda_warp_sweep, the
 * Metropolis-Hastings sampler of strata/apps/lda.h):
 *  - stationarity on tiny corpora, against the collapsed posterior p(z | w)
 *    enumerated over every joint assignment: states drawn from p exactly,
 *    then swept (the sweeps must leave p as it is), and one long chain's
 *    visited states, thinned; sweeps cut into calls by document, by word
 *    and not at all, so that both the call's own tokens and the frozen
 *    rest of a word's row serve as proposals;
 *  - one token at K = 100 and 1000, its topic drawn from its conditional,
 *    then resampled (the conditional must stay as it is);
 *  - counts consistent with z after sweeps; STRATA_ERANGE on inconsistent
 *    input with the counts as they were; bad parameters; allocation
 *    failures; the same seed, the same topics.
 *
 * Built twice: as is, and with apps/lda/warp.c compiled in so that every K
 * takes the path the sampler keeps for large K (test_lda_warp_sparse).
 * The randomised tests print their seed; STRATA_TEST_SEED=X replays one.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "leakcheck.h"

#include "strata/core.h"
#include "strata/apps/lda.h"
#include "lda_state.h"

static uint64_t g_seed = 20250301;
/* STRATA_TEST_QUICK=1 (the sanitizer stage of scripts/test.sh) draws a
 * tenth as often: the chi-square tests keep their threshold, with less power. */
static int g_quick = 0;
static int scaled(int draws) { return g_quick ? draws / 10 : draws; }

/* ---- a corpus and its counts -------------------------------------------- */

static int sweep(strata_lda_warp *smp, state *s, const strata_lda_token *tok, size_t n,
                 strata_rng *rng) {
  return strata_lda_warp_sweep(smp, tok, n, s->ndk, s->nwk, s->nk, s->z, s->doc_off, rng);
}

/* ---- chi-square --------------------------------------------------------- */

/* Q(a, x), the upper regularised incomplete gamma function. */

/* ---- tiny corpora: the joint posterior ---------------------------------- */

/* A corpus small enough to enumerate: documents as lists of word ids. */
typedef struct tiny {
  const char *name;
  uint32_t K, V;
  double alpha, beta;
  const char *docs; /* words as digits, documents separated by '|' */
} tiny;

static void tiny_state(const tiny *t, state *s) {
  uint32_t D = 1;
  size_t n = 0;
  for (const char *c = t->docs; *c; c++) {
    if (*c == '|') D++;
    else n++;
  }
  state_alloc(s, t->K, t->V, D, n);
  uint32_t d = 0;
  size_t at = 0;
  s->doc_off[0] = 0;
  for (const char *c = t->docs;; c++) {
    if (*c == '|' || !*c) {
      s->doc_off[++d] = at;
      if (!*c) break;
      continue;
    }
    s->tok[at] = (strata_lda_token){.doc = d, .word = (uint32_t)(*c - '0'), .slot = (uint32_t)at};
    at++;
  }
  /* Slots backwards inside each document. */
  for (d = 0; d < D; d++)
    for (uint64_t i = s->doc_off[d]; i < s->doc_off[d + 1]; i++)
      s->tok[i].slot = (uint32_t)(s->doc_off[d] + s->doc_off[d + 1] - 1 - i);
}

/* State index of z: slot i is digit i in base K. */
static size_t state_index(const state *s) {
  size_t x = 0;
  for (size_t i = s->n; i-- > 0;) x = x * s->K + s->z[i];
  return x;
}

static void set_state(state *s, size_t x) {
  for (size_t i = 0; i < s->n; i++) {
    s->z[i] = (uint16_t)(x % s->K);
    x /= s->K;
  }
  state_count(s);
}

/* p(z | w) over every state: prod_d prod_k Γ(n_dk + α) times
 * prod_k [prod_w Γ(n_wk + β)] / Γ(n_k + Vβ), normalised. */
static double *posterior(const tiny *t, state *s, size_t *m_out) {
  size_t m = 1;
  for (size_t i = 0; i < s->n; i++) m *= t->K;
  double *p = malloc(m * sizeof *p);
  assert_non_null(p);
  double top = -INFINITY;
  for (size_t x = 0; x < m; x++) {
    set_state(s, x);
    double l = 0;
    for (size_t j = 0; j < (size_t)s->D * t->K; j++) l += lgamma(s->ndk[j] + t->alpha);
    for (size_t j = 0; j < (size_t)s->V * t->K; j++) l += lgamma(s->nwk[j] + t->beta);
    for (uint32_t k = 0; k < t->K; k++) l -= lgamma(s->nk[k] + t->V * t->beta);
    p[x] = l;
    if (l > top) top = l;
  }
  double sum = 0;
  for (size_t x = 0; x < m; x++) sum += p[x] = exp(p[x] - top);
  for (size_t x = 0; x < m; x++) p[x] /= sum;
  *m_out = m;
  return p;
}

/*
 * A sweep in one of four cuts into calls: one call in document order; one
 * call per document; one call per word (its tokens in document order);
 * one call in reverse order. All but the first leave part of a word's
 * tokens outside the call.
 */
static void cut_sweep(strata_lda_warp *smp, state *s, int cut, strata_rng *rng) {
  strata_lda_token buf[64];
  assert_true(s->n <= 64);
  switch (cut & 3) {
  case 0: assert_int_equal(sweep(smp, s, s->tok, s->n, rng), 0); break;
  case 1:
    for (uint32_t d = 0; d < s->D; d++) {
      size_t lo = s->doc_off[d], hi = s->doc_off[d + 1];
      assert_int_equal(sweep(smp, s, s->tok + lo, hi - lo, rng), 0);
    }
    break;
  case 2:
    for (uint32_t w = 0; w < s->V; w++) {
      size_t m = 0;
      for (size_t i = 0; i < s->n; i++)
        if (s->tok[i].word == w) buf[m++] = s->tok[i];
      assert_int_equal(sweep(smp, s, buf, m, rng), 0);
    }
    break;
  default:
    for (size_t i = 0; i < s->n; i++) buf[i] = s->tok[s->n - 1 - i];
    assert_int_equal(sweep(smp, s, buf, s->n, rng), 0);
    break;
  }
}

static size_t draw_state(const double *cdf, size_t m, strata_rng *rng) {
  double u = strata_rng_uniform(rng);
  size_t lo = 0, hi = m - 1;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (u < cdf[mid]) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

static const tiny tinies[] = {
    {"K=2, 3 documents, 8 tokens", 2, 3, 0.7, 0.4, "010|12|201"},
    {"K=3, 2 documents, 6 tokens", 3, 2, 0.5, 0.3, "001|110"},
    {"K=2, steep priors, 7 tokens", 2, 3, 0.1, 0.05, "0012|212"},
};

/* States drawn from p exactly, then `sweeps` sweeps each: if the sampler
 * leaves p invariant, the end states are draws from p, independent. */
static void joint_from_posterior(const tiny *t, uint32_t steps, int reps, int sweeps,
                                 uint64_t salt) {
  reps = scaled(reps);
  state s;
  tiny_state(t, &s);
  size_t m;
  double *p = posterior(t, &s, &m);
  double *cdf = malloc(m * sizeof *cdf), *obs = calloc(m, sizeof *obs),
         *expd = malloc(m * sizeof *expd);
  assert_true(cdf && obs && expd);
  double acc = 0;
  for (size_t x = 0; x < m; x++) {
    cdf[x] = acc += p[x];
    expd[x] = p[x] * reps;
  }
  cdf[m - 1] = 1.0;
  strata_lda_params prm = {.K = t->K, .V = t->V, .alpha = t->alpha, .beta = t->beta};
  strata_lda_warp *smp = NULL;
  assert_int_equal(strata_lda_warp_new(&prm, steps, &smp), 0);
  strata_rng rng, pick;
  strata_rng_seed(&rng, g_seed ^ salt);
  strata_rng_seed(&pick, g_seed ^ salt ^ 0x5157);
  for (int r = 0; r < reps; r++) {
    set_state(&s, draw_state(cdf, m, &pick));
    for (int sw = 0; sw < sweeps; sw++) cut_sweep(smp, &s, r + sw, &rng);
    obs[state_index(&s)] += 1;
  }
  assert_consistent(&s);
  char what[160];
  snprintf(what, sizeof what, "%s, %u steps, from p then %d sweeps", t->name, steps, sweeps);
  assert_true(chisq_p(what, obs, expd, m) > P_MIN);
  strata_lda_warp_free(smp);
  free(p);
  free(cdf);
  free(obs);
  free(expd);
  state_free(&s);
}

/* One chain from a fixed state, its states every `thin` sweeps after a
 * burn-in: visited as often as p says. */
static void joint_long_run(const tiny *t, uint32_t steps, int samples, int thin, uint64_t salt) {
  samples = scaled(samples);
  state s;
  tiny_state(t, &s);
  size_t m;
  double *p = posterior(t, &s, &m);
  double *obs = calloc(m, sizeof *obs), *expd = malloc(m * sizeof *expd);
  assert_true(obs && expd);
  for (size_t x = 0; x < m; x++) expd[x] = p[x] * samples;
  strata_lda_params prm = {.K = t->K, .V = t->V, .alpha = t->alpha, .beta = t->beta};
  strata_lda_warp *smp = NULL;
  assert_int_equal(strata_lda_warp_new(&prm, steps, &smp), 0);
  strata_rng rng;
  strata_rng_seed(&rng, g_seed ^ salt);
  set_state(&s, 0);
  int sw = 0;
  for (; sw < 100; sw++) cut_sweep(smp, &s, sw, &rng);
  for (int r = 0; r < samples; r++) {
    for (int j = 0; j < thin; j++, sw++) cut_sweep(smp, &s, sw, &rng);
    obs[state_index(&s)] += 1;
  }
  assert_consistent(&s);
  char what[160];
  snprintf(what, sizeof what, "%s, %u steps, one chain every %d sweeps", t->name, steps, thin);
  assert_true(chisq_p(what, obs, expd, m) > P_MIN);
  strata_lda_warp_free(smp);
  free(p);
  free(obs);
  free(expd);
  state_free(&s);
}

/* ---- tests -------------------------------------------------------------- */

static void test_joint_from_posterior(void **st) {
  (void)st;
  joint_from_posterior(&tinies[0], 2, 200000, 1, 11);
  joint_from_posterior(&tinies[0], 1, 200000, 2, 12);
  joint_from_posterior(&tinies[1], 2, 200000, 1, 13);
  joint_from_posterior(&tinies[2], 2, 200000, 1, 14);
}

static void test_joint_long_run(void **st) {
  (void)st;
  joint_long_run(&tinies[0], 2, 100000, 5, 21);
  joint_long_run(&tinies[1], 1, 100000, 5, 22);
}

/* Moves token i's topic to k, counts included. */
static void move_token(state *s, size_t i, uint32_t k) {
  const strata_lda_token *t = &s->tok[i];
  uint32_t K = s->K, o = s->z[t->slot];
  s->ndk[(size_t)t->doc * K + o]--;
  s->nwk[(size_t)t->word * K + o] -= 1;
  s->nk[o] -= 1;
  s->ndk[(size_t)t->doc * K + k]++;
  s->nwk[(size_t)t->word * K + k] += 1;
  s->nk[k] += 1;
  s->z[t->slot] = (uint16_t)k;
}

/*
 * Token i, its topic drawn from its conditional, then resampled: alone in
 * its call (every other token of its word is in the frozen part), or first
 * of a call that holds every token of its word (they are proposed from the
 * call's own tokens; the later ones move only after token i is done).
 */
static void single_stationary(const char *what, const strata_lda_params *p, const state *init,
                              size_t i, int with_word, int draws, uint64_t salt) {
  draws = scaled(draws);
  const uint32_t K = init->K;
  state w;
  state_clone(&w, init);
  double *expd = calloc(K, sizeof *expd), *obs = calloc(K, sizeof *obs),
         *cdf = calloc(K, sizeof *cdf);
  assert_true(expd && obs && cdf);
  conditional_of(p, init, i, expd);
  double acc = 0;
  for (uint32_t k = 0; k < K; k++) {
    cdf[k] = acc += expd[k];
    expd[k] *= draws;
  }
  cdf[K - 1] = 1.0;
  strata_lda_token *list = malloc(init->n * sizeof *list);
  assert_non_null(list);
  size_t m = 0;
  list[m++] = init->tok[i];
  for (size_t j = 0; with_word && j < init->n; j++)
    if (j != i && init->tok[j].word == init->tok[i].word) list[m++] = init->tok[j];
  strata_lda_warp *smp = NULL;
  assert_int_equal(strata_lda_warp_new(p, 2, &smp), 0);
  strata_rng rng, pick;
  strata_rng_seed(&rng, g_seed ^ salt);
  strata_rng_seed(&pick, g_seed ^ salt ^ 0x5157);
  const uint32_t slot = init->tok[i].slot;
  for (int r = 0; r < draws; r++) {
    state_copy(&w, init);
    move_token(&w, i, (uint32_t)draw_state(cdf, K, &pick));
    assert_int_equal(sweep(smp, &w, list, m, &rng), 0);
    obs[w.z[slot]] += 1;
  }
  assert_consistent(&w);
  assert_true(chisq_p(what, obs, expd, K) > P_MIN);
  strata_lda_warp_free(smp);
  free(list);
  free(expd);
  free(obs);
  free(cdf);
  state_free(&w);
}


static void test_single_k100(void **st) {
  (void)st;
  strata_lda_params p = {.K = 100, .V = 6, .alpha = 0.1, .beta = 0.01};
  state s;
  make_state(&s, 100, 6, 3, 12, 5, 60, g_seed ^ 2);
  single_stationary("K=100 narrow word, alone", &p, &s, find_token(&s, -1), 0, 100000, 31);
  single_stationary("K=100 wide word, alone", &p, &s, find_token(&s, 0), 0, 100000, 32);
  single_stationary("K=100 wide word, with its word", &p, &s, find_token(&s, 0), 1, 100000, 33);
  state_free(&s);
}

static void test_single_k1000(void **st) {
  (void)st;
  strata_lda_params p = {.K = 1000, .V = 4, .alpha = 0.5, .beta = 0.1};
  state s;
  make_state(&s, 1000, 4, 2, 300, 200, 1200, g_seed ^ 3);
  single_stationary("K=1000 narrow word, with its word", &p, &s, find_token(&s, -1), 1, 50000, 41);
  single_stationary("K=1000 wide word, alone", &p, &s, find_token(&s, 0), 0, 50000, 42);
  state_free(&s);
}

/* Sweeps keep every count consistent with z: whole lists, chunks cut
 * anywhere (mid-document too), tokens out of document order, one to many
 * steps; and the tokens move. */
static void test_invariants(void **st) {
  (void)st;
  const uint32_t Ks[] = {1, 4, 29, 100, 1000};
  for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
    uint32_t K = Ks[c];
    strata_lda_params p = {.K = K, .V = 40, .alpha = 0.1, .beta = 0.01};
    state s, f;
    make_state(&s, K, 40, 20, 50, K < 10 ? K : 10, 400, g_seed ^ (100 + c));
    state_clone(&f, &s);
    strata_lda_warp *smp = NULL;
    assert_int_equal(strata_lda_warp_new(&p, c == 2 ? 1 : (uint32_t)(2 + c), &smp), 0);
    strata_rng rng;
    strata_rng_seed(&rng, g_seed ^ (200 + c));
    for (int sw = 0; sw < 5; sw++) {
      size_t chunk = sw == 0 ? s.n : (size_t)(37 * sw + 1);
      for (size_t lo = 0; lo < s.n; lo += chunk) {
        size_t m = s.n - lo < chunk ? s.n - lo : chunk;
        assert_int_equal(sweep(smp, &s, s.tok + lo, m, &rng), 0);
      }
      assert_consistent(&s);
    }
    strata_rng sh;
    strata_rng_seed(&sh, g_seed ^ 300);
    for (size_t i = s.n - 1; i > 0; i--) {
      size_t j = (size_t)strata_rng_below(&sh, i + 1);
      strata_lda_token t = s.tok[i];
      s.tok[i] = s.tok[j];
      s.tok[j] = t;
    }
    for (int sw = 0; sw < 3; sw++) {
      assert_int_equal(sweep(smp, &s, s.tok, s.n, &rng), 0);
      assert_consistent(&s);
    }
    if (K > 1) assert_memory_not_equal(f.z, s.z, s.n * sizeof *s.z);
    strata_lda_warp_free(smp);
    state_free(&f);
    state_free(&s);
  }
}

typedef enum {
  BAD_NDK,    /* the token's own document count is 0 */
  BAD_NWK,    /* the token's own word count is 0 */
  BAD_Z,      /* its topic >= K */
  BAD_ROW,    /* a negative count elsewhere in its word row */
  BAD_FRAC,   /* a fractional count elsewhere in its word row */
  BAD_NK,     /* its topic total is below 1 */
  BAD_NK_NAN, /* a topic total is NaN */
  BAD_SLOT,   /* its slot is outside its document's range */
  BAD_BELOW,  /* its word row holds fewer tokens of its topic than the call */
  BAD_N
} bad_kind;

static const char *const bad_name[BAD_N] = {"ndk",    "nwk",  "z",    "row",  "frac",
                                            "nk",     "nk-nan", "slot", "below"};

static void corrupt(state *s, size_t i, bad_kind b) {
  strata_lda_token *t = &s->tok[i];
  uint32_t K = s->K, k = s->z[t->slot], other = (k + 1) % K;
  switch (b) {
  case BAD_NDK: s->ndk[(size_t)t->doc * K + k] = 0; break;
  case BAD_NWK: s->nwk[(size_t)t->word * K + k] = 0; break;
  case BAD_Z: s->z[t->slot] = (uint16_t)K; break;
  case BAD_ROW: s->nwk[(size_t)t->word * K + other] = -1; break;
  case BAD_FRAC: s->nwk[(size_t)t->word * K + other] += 0.5f; break;
  case BAD_NK: s->nk[k] = 0; break;
  case BAD_NK_NAN: s->nk[other] = NAN; break;
  case BAD_SLOT: t->slot = (uint32_t)s->doc_off[t->doc + 1]; break;
  case BAD_BELOW: s->nwk[(size_t)t->word * K + k] -= 1; break;
  default: break;
  }
}

/*
 * Inconsistent input: STRATA_ERANGE with a message, and the counts and z as
 * they were (the bad token comes first in its call: documents 1 to 3, with
 * document 0 outside; or, for a row below the call's tokens, the whole
 * corpus, so that the call holds every token of the word). The sampler
 * works on good counts afterwards.
 */
static void test_erange(void **st) {
  (void)st;
  const uint32_t Ks[] = {4, 100, 1000};
  for (size_t c = 0; c < 3; c++) {
    uint32_t K = Ks[c];
    strata_lda_params p = {.K = K, .V = 8, .alpha = 0.1, .beta = 0.01};
    for (int b = 0; b < BAD_N; b++) {
      state s, ref, w;
      make_state(&s, K, 8, 4, 20, 3, 40, g_seed ^ 400);
      const size_t i = s.doc_off[1], lo = b == BAD_BELOW ? 0 : i;
      state_clone(&ref, &s);
      corrupt(&ref, i, (bad_kind)b);
      state_clone(&w, &ref);
      strata_lda_warp *smp = NULL;
      assert_int_equal(strata_lda_warp_new(&p, 2, &smp), 0);
      strata_rng rng;
      strata_rng_seed(&rng, g_seed ^ 401);
      strata_err_clear();
      int rc = sweep(smp, &w, w.tok + lo, w.n - lo, &rng);
      print_message("  K=%u %s: %s\n", K, bad_name[b], strata_err_msg());
      assert_int_equal(rc, STRATA_ERANGE);
      assert_true(strlen(strata_err_msg()) > 0);
      assert_same_state(&w, &ref);
      assert_int_equal(sweep(smp, &s, s.tok, s.n, &rng), 0);
      assert_consistent(&s);
      strata_lda_warp_free(smp);
      state_free(&w);
      state_free(&ref);
      state_free(&s);
    }
  }
}

/* A slot of the token's document, outside the call, holding a topic >= K:
 * when a document proposal lands on it, STRATA_ERANGE, and z and the
 * counts as they were before that call (the token is the call's only one). */
static void test_erange_doc_z(void **st) {
  (void)st;
  const uint32_t K = 10;
  strata_lda_params p = {.K = K, .V = 8, .alpha = 0.01, .beta = 0.01};
  state s, ref;
  make_state(&s, K, 8, 4, 20, 3, 0, g_seed ^ 420);
  const size_t i = s.doc_off[1];
  s.z[s.tok[i + 1].slot] = (uint16_t)(K + 3);
  state_clone(&ref, &s);
  strata_lda_warp *smp = NULL;
  assert_int_equal(strata_lda_warp_new(&p, 2, &smp), 0);
  strata_rng rng;
  strata_rng_seed(&rng, g_seed ^ 421);
  int rc = 0, calls = 0;
  for (; calls < 10000 && !rc; calls++) {
    state_copy(&ref, &s);
    rc = sweep(smp, &s, s.tok + i, 1, &rng);
  }
  print_message("  after %d calls: %s\n", calls, strata_err_msg());
  assert_int_equal(rc, STRATA_ERANGE);
  assert_same_state(&s, &ref);
  strata_lda_warp_free(smp);
  state_free(&ref);
  state_free(&s);
}

/* An error found mid-call: the tokens before it moved, from it on none
 * did, and the counts agree with z but for the corruption. */
static void test_erange_mid_call(void **st) {
  (void)st;
  const uint32_t K = 50;
  strata_lda_params p = {.K = K, .V = 8, .alpha = 0.5, .beta = 0.1};
  state s, w;
  make_state(&s, K, 8, 6, 30, 6, 40, g_seed ^ 410);
  state_clone(&w, &s);
  size_t i = w.doc_off[4]; /* first token of document 4 */
  w.tok[i].slot = (uint32_t)w.doc_off[0];
  strata_lda_warp *smp = NULL;
  assert_int_equal(strata_lda_warp_new(&p, 2, &smp), 0);
  strata_rng rng;
  strata_rng_seed(&rng, g_seed ^ 411);
  assert_int_equal(sweep(smp, &w, w.tok, w.n, &rng), STRATA_ERANGE);
  print_message("  %s\n", strata_err_msg());
  w.tok[i].slot = s.tok[i].slot;
  assert_consistent(&w);
  assert_memory_not_equal(w.z, s.z, (size_t)w.doc_off[4] * sizeof *w.z);
  for (size_t j = i; j < w.n; j++) assert_int_equal(w.z[w.tok[j].slot], s.z[s.tok[j].slot]);
  strata_lda_warp_free(smp);
  state_free(&w);
  state_free(&s);
}

static void test_bad_params(void **st) {
  (void)st;
  strata_lda_warp *smp = (strata_lda_warp *)&smp;
  for (size_t i = 0; i < sizeof lda_bad_params / sizeof *lda_bad_params; i++) {
    strata_err_clear();
    assert_int_equal(strata_lda_warp_new(&lda_bad_params[i], 2, &smp), STRATA_EINVAL);
    assert_null(smp);
    assert_true(strlen(strata_err_msg()) > 0);
    smp = (strata_lda_warp *)&smp;
  }
  strata_lda_params ok = {.K = 65535, .V = 1, .alpha = 1e-3, .beta = 1e-3};
  assert_int_equal(strata_lda_warp_new(NULL, 2, &smp), STRATA_EINVAL);
  assert_int_equal(strata_lda_warp_new(&ok, 2, NULL), STRATA_EINVAL);
  assert_int_equal(strata_lda_warp_new(&ok, 0, &smp), STRATA_EINVAL);
  assert_int_equal(strata_lda_warp_new(&ok, 65, &smp), STRATA_EINVAL);
  assert_int_equal(strata_lda_warp_new(&ok, 64, &smp), 0);
  strata_lda_warp_free(smp);
  strata_lda_warp_free(NULL);

  ok.K = 4;
  assert_int_equal(strata_lda_warp_new(&ok, 1, &smp), 0);
  state s;
  make_state(&s, 4, 5, 2, 5, 4, 0, 1);
  strata_rng rng;
  strata_rng_seed(&rng, 1);
#define SW(...) strata_lda_warp_sweep(__VA_ARGS__)
  assert_int_equal(SW(NULL, s.tok, s.n, s.ndk, s.nwk, s.nk, s.z, s.doc_off, &rng), STRATA_EINVAL);
  assert_int_equal(SW(smp, NULL, s.n, s.ndk, s.nwk, s.nk, s.z, s.doc_off, &rng), STRATA_EINVAL);
  assert_int_equal(SW(smp, s.tok, s.n, NULL, s.nwk, s.nk, s.z, s.doc_off, &rng), STRATA_EINVAL);
  assert_int_equal(SW(smp, s.tok, s.n, s.ndk, NULL, s.nk, s.z, s.doc_off, &rng), STRATA_EINVAL);
  assert_int_equal(SW(smp, s.tok, s.n, s.ndk, s.nwk, NULL, s.z, s.doc_off, &rng), STRATA_EINVAL);
  assert_int_equal(SW(smp, s.tok, s.n, s.ndk, s.nwk, s.nk, NULL, s.doc_off, &rng), STRATA_EINVAL);
  assert_int_equal(SW(smp, s.tok, s.n, s.ndk, s.nwk, s.nk, s.z, NULL, &rng), STRATA_EINVAL);
  assert_int_equal(SW(smp, s.tok, s.n, s.ndk, s.nwk, s.nk, s.z, s.doc_off, NULL), STRATA_EINVAL);
  /* nothing to do is fine, whatever the arrays */
  assert_int_equal(SW(smp, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL), 0);
#undef SW
  strata_lda_warp_free(smp);
  state_free(&s);
}

/* Every allocation may fail: creation fails cleanly, and a sweep fails
 * with STRATA_ENOMEM having changed nothing. */
static void test_alloc_failures(void **st) {
  (void)st;
  strata_lda_params p = {.K = 100, .V = 300, .alpha = 0.1, .beta = 0.01};
  strata_lda_warp *smp;
  int ok = 0;
  for (long f = 1; f < 100 && !ok; f++) {
    strata_alloc_fail_after(f);
    int rc = strata_lda_warp_new(&p, 2, &smp);
    strata_alloc_fail_after(0);
    if (rc == 0) {
      ok = 1;
      strata_lda_warp_free(smp);
    } else {
      assert_int_equal(rc, STRATA_ENOMEM);
      assert_int_equal(strata_alloc_live(), live0);
    }
  }
  assert_true(ok);

  state s;
  make_state(&s, 100, 300, 50, 100, 20, 500, g_seed ^ 500);
  int failed = 0;
  ok = 0;
  for (long f = 1; f < 100 && !ok; f++) {
    state w;
    state_clone(&w, &s);
    assert_int_equal(strata_lda_warp_new(&p, 2, &smp), 0);
    strata_rng rng;
    strata_rng_seed(&rng, 5);
    /* a first call on a few tokens, so the second one grows the scratch */
    assert_int_equal(sweep(smp, &w, w.tok, 10, &rng), 0);
    state ref;
    state_clone(&ref, &w);
    strata_alloc_fail_after(f);
    int rc = sweep(smp, &w, w.tok, w.n, &rng);
    strata_alloc_fail_after(0);
    if (rc == 0) {
      ok = 1;
    } else {
      assert_int_equal(rc, STRATA_ENOMEM);
      assert_same_state(&w, &ref);
      failed++;
    }
    assert_consistent(&w);
    strata_lda_warp_free(smp);
    state_free(&ref);
    state_free(&w);
  }
  print_message("  sweep: %d allocation failures survived\n", failed);
  assert_true(ok);
  assert_true(failed >= 3);
  state_free(&s);
}

/* The same seed gives the same topics, bit for bit. */
static void test_same_seed_same_z(void **st) {
  (void)st;
  const uint32_t Ks[] = {4, 100, 1000};
  for (size_t c = 0; c < 3; c++) {
    uint32_t K = Ks[c];
    strata_lda_params p = {.K = K, .V = 30, .alpha = 0.1, .beta = 0.01};
    state a, b;
    make_state(&a, K, 30, 10, 40, 8, 300, g_seed ^ 600);
    state_clone(&b, &a);
    strata_lda_warp *sa = NULL, *sb = NULL;
    assert_int_equal(strata_lda_warp_new(&p, 2, &sa), 0);
    assert_int_equal(strata_lda_warp_new(&p, 2, &sb), 0);
    strata_rng ra, rb;
    strata_rng_seed(&ra, g_seed ^ 601);
    strata_rng_seed(&rb, g_seed ^ 601);
    for (int sw = 0; sw < 4; sw++) {
      assert_int_equal(sweep(sa, &a, a.tok, a.n, &ra), 0);
      assert_int_equal(sweep(sb, &b, b.tok, b.n, &rb), 0);
    }
    assert_same_state(&a, &b);
    assert_memory_equal(&ra, &rb, sizeof ra);
    strata_rng_seed(&rb, g_seed ^ 602);
    assert_int_equal(sweep(sb, &b, b.tok, b.n, &rb), 0);
    assert_int_equal(sweep(sa, &a, a.tok, a.n, &ra), 0);
    assert_memory_not_equal(a.z, b.z, a.n * sizeof *a.z);
    strata_lda_warp_free(sa);
    strata_lda_warp_free(sb);
    state_free(&a);
    state_free(&b);
  }
}

int main(void) {
  const char *env = getenv("STRATA_TEST_SEED");
  if (env && *env) g_seed = strtoull(env, NULL, 0);
  const char *quick = getenv("STRATA_TEST_QUICK");
  g_quick = quick && *quick && strcmp(quick, "0") != 0;
#ifdef STRATA_LDA_WARP_SPARSE_K
  const char *variant = ", warp.c built with the large-K path for every K";
#else
  const char *variant = "";
#endif
  printf("test_lda_warp: seed %llu (STRATA_TEST_SEED=X replays one)%s%s\n",
         (unsigned long long)g_seed, g_quick ? ", quick: a tenth of the draws" : "", variant);
  fflush(stdout);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_joint_from_posterior, setup, teardown),
      cmocka_unit_test_setup_teardown(test_joint_long_run, setup, teardown),
      cmocka_unit_test_setup_teardown(test_single_k100, setup, teardown),
      cmocka_unit_test_setup_teardown(test_single_k1000, setup, teardown),
      cmocka_unit_test_setup_teardown(test_invariants, setup, teardown),
      cmocka_unit_test_setup_teardown(test_erange, setup, teardown),
      cmocka_unit_test_setup_teardown(test_erange_doc_z, setup, teardown),
      cmocka_unit_test_setup_teardown(test_erange_mid_call, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_params, setup, teardown),
      cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
      cmocka_unit_test_setup_teardown(test_same_seed_same_z, setup, teardown),
  };
  return cmocka_run_group_tests_name("lda_warp", tests, NULL, NULL);
}
