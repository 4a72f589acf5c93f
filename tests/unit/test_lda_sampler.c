/*
 * Unit tests for apps/lda/sampler.c (strata/apps/lda.h): the reference
 * conditional by hand, sweeps against it with chi-square tests (a token
 * resampled alone, the last token of a whole sweep, dense and sparse word
 * rows, K from 4 to 1000), count invariants after sweeps, inconsistent
 * counts, bad parameters, allocation failures and determinism.
 *
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

static uint64_t g_seed = 20240611;
/* STRATA_TEST_QUICK=1 (the sanitizer stage of scripts/test.sh) draws a
 * tenth as often: the chi-square tests keep their threshold, with less power. */
static int g_quick = 0;
static int scaled(int draws) { return g_quick ? draws / 10 : draws; }

/* cmocka compares only floats; these are doubles. */
#define assert_close(a, b, eps) assert_true(fabs((a) - (b)) <= (eps))

/* ---- a small corpus and its counts -------------------------------------- */


/* ---- chi-square --------------------------------------------------------- */

/* Q(a, x), the upper regularised incomplete gamma function. */

/* Token i resampled alone, `draws` times from the same state. */
static void chisq_single(const char *what, const strata_lda_params *p, const state *init, size_t i,
                         int draws, uint64_t salt) {
  draws = scaled(draws);
  uint32_t K = init->K;
  state w;
  state_clone(&w, init);
  double *expd = calloc(K, sizeof *expd), *obs = calloc(K, sizeof *obs);
  assert_true(expd && obs);
  conditional_of(p, init, i, expd);
  for (uint32_t k = 0; k < K; k++) expd[k] *= draws;
  strata_lda_sampler *smp = NULL;
  assert_int_equal(strata_lda_sampler_new(p, &smp), 0);
  strata_rng rng;
  strata_rng_seed(&rng, g_seed ^ salt);
  uint32_t slot = init->tok[i].slot;
  for (int r = 0; r < draws; r++) {
    state_copy(&w, init);
    assert_int_equal(strata_lda_sweep(smp, w.tok + i, 1, w.ndk, w.nwk, w.nk, w.z, &rng), 0);
    obs[w.z[slot]] += 1;
  }
  assert_consistent(&w);
  assert_true(chisq_p(what, obs, expd, K) > P_MIN);
  strata_lda_sampler_free(smp);
  free(expd);
  free(obs);
  state_free(&w);
}

/* The last token of a sweep over the last `tail` tokens (0: all of them):
 * its conditional given the rest is read from the final state, so the
 * expected counts sum those of every draw. */
static void chisq_last(const char *what, const strata_lda_params *p, const state *init,
                       size_t tail, int draws, uint64_t salt) {
  draws = scaled(draws);
  uint32_t K = init->K;
  size_t last = init->n - 1;
  state w;
  state_clone(&w, init);
  double *expd = calloc(K, sizeof *expd), *obs = calloc(K, sizeof *obs),
         *prob = calloc(K, sizeof *prob);
  assert_true(expd && obs && prob);
  strata_lda_sampler *smp = NULL;
  assert_int_equal(strata_lda_sampler_new(p, &smp), 0);
  strata_rng rng;
  strata_rng_seed(&rng, g_seed ^ salt);
  for (int r = 0; r < draws; r++) {
    state_copy(&w, init);
    size_t from = tail && tail < w.n ? w.n - tail : 0;
    assert_int_equal(
        strata_lda_sweep(smp, w.tok + from, w.n - from, w.ndk, w.nwk, w.nk, w.z, &rng), 0);
    conditional_of(p, &w, last, prob);
    for (uint32_t k = 0; k < K; k++) expd[k] += prob[k];
    obs[w.z[w.tok[last].slot]] += 1;
  }
  assert_consistent(&w);
  assert_true(chisq_p(what, obs, expd, K) > P_MIN);
  strata_lda_sampler_free(smp);
  free(expd);
  free(obs);
  free(prob);
  state_free(&w);
}


/* Moves a token of word w (any but 0 when w < 0) of the last document to
 * the end of the list. */
static void last_token_of(state *s, int w) {
  uint32_t d = s->tok[s->n - 1].doc;
  for (size_t i = s->n; i-- > 0 && s->tok[i].doc == d;) {
    if ((w >= 0 && s->tok[i].word == (uint32_t)w) || (w < 0 && s->tok[i].word != 0)) {
      strata_lda_token t = s->tok[i];
      s->tok[i] = s->tok[s->n - 1];
      s->tok[s->n - 1] = t;
      return;
    }
  }
  fail_msg("no token of word %d in the last document", w);
}

/* ---- tests -------------------------------------------------------------- */

static void test_conditional_by_hand(void **st) {
  (void)st;
  strata_lda_params p = {.K = 3, .V = 5, .alpha = 0.5, .beta = 0.1};
  int32_t nd[3] = {2, 0, 1};
  float nw[3] = {1, 3, 0}, nk[3] = {10, 20, 5};
  double prob[3];
  strata_lda_conditional(&p, nd, nw, nk, prob);
  /* (ndk+α)(nwk+β)/(nk+Vβ) with Vβ = 0.5 */
  double u[3] = {2.5 * 1.1 / 10.5, 0.5 * 3.1 / 20.5, 1.5 * 0.1 / 5.5};
  double tot = u[0] + u[1] + u[2];
  for (int k = 0; k < 3; k++) assert_close(prob[k], u[k] / tot, 1e-15);
  assert_close(prob[0] + prob[1] + prob[2], 1.0, 1e-15);

  /* Larger and sparse: sums to 1, all positive. */
  enum { K = 100 };
  strata_lda_params q = {.K = K, .V = 1000, .alpha = 0.1, .beta = 0.01};
  int32_t nd2[K] = {0};
  float nw2[K] = {0}, nk2[K];
  double pr[K];
  for (int k = 0; k < K; k++) nk2[k] = (float)(k * 3);
  nd2[7] = 4;
  nw2[7] = 2;
  nw2[50] = 9;
  strata_lda_conditional(&q, nd2, nw2, nk2, pr);
  double sum = 0;
  for (int k = 0; k < K; k++) {
    assert_true(pr[k] > 0);
    sum += pr[k];
  }
  assert_close(sum, 1.0, 1e-12);
  assert_true(pr[7] > pr[50] && pr[50] > pr[51]);
}

/* K = 4: every word row is dense. */
static void test_chisq_k4(void **st) {
  (void)st;
  strata_lda_params p = {.K = 4, .V = 5, .alpha = 0.3, .beta = 0.05};
  state s;
  make_state(&s, 4, 5, 3, 6, 4, 4, g_seed ^ 1);
  chisq_single("K=4 single token", &p, &s, 7, 200000, 11);
  chisq_single("K=4 single token, first", &p, &s, 0, 200000, 12);
  last_token_of(&s, -1);
  chisq_last("K=4 last of a sweep", &p, &s, 0, 200000, 13);
  state_free(&s);
}

/* K = 100 with sparse counts: narrow word rows and a wide one (word 0);
 * at this K the sampler keeps every row dense. */
static void test_chisq_k100(void **st) {
  (void)st;
  strata_lda_params p = {.K = 100, .V = 6, .alpha = 0.1, .beta = 0.01};
  state s;
  make_state(&s, 100, 6, 3, 12, 5, 60, g_seed ^ 2);
  chisq_single("K=100 single token, narrow word", &p, &s, find_token(&s, -1), 200000, 21);
  chisq_single("K=100 single token, wide word", &p, &s, find_token(&s, 0), 200000, 22);
  last_token_of(&s, -1);
  chisq_last("K=100 last of a sweep, narrow word", &p, &s, 0, 100000, 23);
  last_token_of(&s, 0);
  chisq_last("K=100 last of a sweep, wide word", &p, &s, 0, 100000, 24);
  state_free(&s);
}

/* K = 1000, alpha 50/K: narrow rows of 100-odd topics (kept as sparse
 * pairs, chains of 4 to 8 blocks) and a wide row of some 700 topics (kept
 * dense, chains of 32 blocks). */
static void test_chisq_k1000(void **st) {
  (void)st;
  strata_lda_params p = {.K = 1000, .V = 4, .alpha = 0.05, .beta = 0.01};
  state s;
  make_state(&s, 1000, 4, 2, 300, 200, 1200, g_seed ^ 3);
  chisq_single("K=1000 single token, narrow word", &p, &s, find_token(&s, -1), 100000, 31);
  chisq_single("K=1000 single token, wide word", &p, &s, find_token(&s, 0), 100000, 32);
  last_token_of(&s, -1);
  chisq_last("K=1000 last of 300 tokens, narrow word", &p, &s, 300, 30000, 33);
  last_token_of(&s, 0);
  chisq_last("K=1000 last of 300 tokens, wide word", &p, &s, 300, 30000, 34);
  state_free(&s);
}

/* K = 300: narrow rows of a few topics (chains of 1 block) next to words
 * of 40 to 200 topics (up to 7 blocks), all sparse. */
static void test_chisq_k300(void **st) {
  (void)st;
  strata_lda_params p = {.K = 300, .V = 12, .alpha = 0.2, .beta = 0.05};
  state s;
  make_state(&s, 300, 12, 4, 150, 150, 200, g_seed ^ 6);
  char what[64];
  for (int w = 0; w < 3; w++) {
    snprintf(what, sizeof what, "K=300 single token, word %d", w);
    chisq_single(what, &p, &s, find_token(&s, w), 100000, 61 + (uint64_t)w);
  }
  /* The rarest word there is: words are the smaller of two uniform draws
   * from 1..11, so the highest id present (11 has no token in about 1 draw
   * of 150). */
  int rare = 0;
  for (size_t i = 0; i < s.n; i++)
    if ((int)s.tok[i].word > rare) rare = (int)s.tok[i].word;
  assert_true(rare >= 8);
  snprintf(what, sizeof what, "K=300 single token, rare word %d", rare);
  chisq_single(what, &p, &s, find_token(&s, rare), 100000, 64);
  last_token_of(&s, -1);
  chisq_last("K=300 last of 300 tokens", &p, &s, 300, 30000, 65);
  state_free(&s);
}

/* K = 61 (7 full blocks of 8 and a tail), with alpha and beta large
 * enough that the document and smoothing buckets carry real mass. */
static void test_chisq_k61_buckets(void **st) {
  (void)st;
  strata_lda_params p = {.K = 61, .V = 50, .alpha = 2.0, .beta = 0.5};
  state s;
  make_state(&s, 61, 5, 2, 10, 3, 3, g_seed ^ 4);
  chisq_single("K=61 heavy priors", &p, &s, find_token(&s, -1), 200000, 41);
  last_token_of(&s, -1);
  chisq_last("K=61 heavy priors, last of a sweep", &p, &s, 0, 100000, 42);
  state_free(&s);
}

/* Every token of a word on one topic, then priors that spread them: the
 * word's pairs outgrow the room they were given when the call met it. */
static void collapse_word(state *s, uint32_t w, uint16_t k) {
  for (size_t i = 0; i < s->n; i++)
    if (s->tok[i].word == w) s->z[s->tok[i].slot] = k;
  state_count(s);
}

static void test_chisq_growing_word(void **st) {
  (void)st;
  strata_lda_params p = {.K = 500, .V = 3, .alpha = 5, .beta = 1};
  state s;
  make_state(&s, 500, 3, 4, 60, 4, 200, g_seed ^ 7);
  collapse_word(&s, 0, 17);
  last_token_of(&s, 0);
  chisq_last("K=500 last of 300 tokens, word spreading", &p, &s, 300, 20000, 71);
  state_free(&s);
}

/* One sampler alternating between two different states of the same
 * corpus: nothing of one call may leak into the next. */
static void test_chisq_no_cache_across_calls(void **st) {
  (void)st;
  strata_lda_params p = {.K = 50, .V = 6, .alpha = 0.1, .beta = 0.01};
  state a, b, w;
  make_state(&a, 50, 6, 3, 10, 4, 30, g_seed ^ 5);
  state_clone(&b, &a);
  /* Another worker moved word 0's tokens and changed the totals. */
  for (size_t i = 0; i < b.n; i++)
    if (b.tok[i].word == 0) b.z[b.tok[i].slot] = (uint16_t)((b.z[b.tok[i].slot] * 7 + 1) % 50);
  state_count(&b);
  for (uint32_t k = 0; k < 50; k += 3) b.nk[k] += 40; /* tokens elsewhere */
  size_t i = find_token(&a, 0);
  double *ea = calloc(50, sizeof *ea), *eb = calloc(50, sizeof *eb);
  double *oa = calloc(50, sizeof *oa), *ob = calloc(50, sizeof *ob);
  assert_true(ea && eb && oa && ob);
  conditional_of(&p, &a, i, ea);
  conditional_of(&p, &b, i, eb);
  state_clone(&w, &a);
  strata_lda_sampler *smp = NULL;
  assert_int_equal(strata_lda_sampler_new(&p, &smp), 0);
  strata_rng rng;
  strata_rng_seed(&rng, g_seed ^ 51);
  const int draws = scaled(100000);
  for (int r = 0; r < 2 * draws; r++) {
    const state *from = r & 1 ? &b : &a;
    state_copy(&w, from);
    assert_int_equal(strata_lda_sweep(smp, w.tok + i, 1, w.ndk, w.nwk, w.nk, w.z, &rng), 0);
    (r & 1 ? ob : oa)[w.z[w.tok[i].slot]] += 1;
  }
  for (int k = 0; k < 50; k++) {
    ea[k] *= draws;
    eb[k] *= draws;
  }
  assert_true(chisq_p("alternating states, A", oa, ea, 50) > P_MIN);
  assert_true(chisq_p("alternating states, B", ob, eb, 50) > P_MIN);
  strata_lda_sampler_free(smp);
  free(ea);
  free(eb);
  free(oa);
  free(ob);
  state_free(&a);
  state_free(&b);
  state_free(&w);
}

/* Sweeps keep every count consistent with z: whole lists, chunks cut
 * anywhere (mid-document too), and tokens out of document order. */
static void test_invariants(void **st) {
  (void)st;
  const uint32_t Ks[] = {1, 4, 29, 100, 300, 1000};
  for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
    uint32_t K = Ks[c];
    strata_lda_params p = {.K = K, .V = 40, .alpha = 0.1, .beta = 0.01};
    if (K == 300) {
      p.alpha = 3; /* the collapsed word 0 spreads over many topics */
      p.beta = 1;
    }
    state s;
    make_state(&s, K, 40, 20, 50, K < 10 ? K : 10, 400, g_seed ^ (100 + c));
    if (K == 300) collapse_word(&s, 0, 5);
    strata_lda_sampler *smp = NULL;
    assert_int_equal(strata_lda_sampler_new(&p, &smp), 0);
    strata_rng rng;
    strata_rng_seed(&rng, g_seed ^ (200 + c));
    for (int sw = 0; sw < 5; sw++) {
      size_t chunk = sw == 0 ? s.n : (size_t)(37 * sw + 1);
      for (size_t lo = 0; lo < s.n; lo += chunk) {
        size_t m = s.n - lo < chunk ? s.n - lo : chunk;
        assert_int_equal(strata_lda_sweep(smp, s.tok + lo, m, s.ndk, s.nwk, s.nk, s.z, &rng), 0);
      }
      assert_consistent(&s);
    }
    /* out of document order */
    strata_rng sh;
    strata_rng_seed(&sh, g_seed ^ 300);
    for (size_t i = s.n - 1; i > 0; i--) {
      size_t j = (size_t)strata_rng_below(&sh, i + 1);
      strata_lda_token t = s.tok[i];
      s.tok[i] = s.tok[j];
      s.tok[j] = t;
    }
    for (int sw = 0; sw < 3; sw++) {
      assert_int_equal(strata_lda_sweep(smp, s.tok, s.n, s.ndk, s.nwk, s.nk, s.z, &rng), 0);
      assert_consistent(&s);
    }
    /* the tokens did move */
    state f;
    make_state(&f, K, 40, 20, 50, K < 10 ? K : 10, 400, g_seed ^ (100 + c));
    if (K == 300) collapse_word(&f, 0, 5);
    if (K > 1) assert_memory_not_equal(f.z, s.z, s.n * sizeof *s.z);
    state_free(&f);
    strata_lda_sampler_free(smp);
    state_free(&s);
  }
}

typedef enum {
  BAD_NDK,    /* the token's own document count is 0 */
  BAD_NWK,    /* the token's own word count is 0 */
  BAD_Z,      /* topic >= K */
  BAD_ROW,    /* a negative count elsewhere in its word row */
  BAD_DOC,    /* a negative count elsewhere in its document row */
  BAD_NK,     /* its topic total is below 1 (only as the first token: any
                 token before it could move into that topic) */
  BAD_NK_NAN, /* a topic total is NaN: the call fails on entry */
  BAD_N
} bad_kind;

static const char *const bad_name[BAD_N] = {"ndk", "nwk", "z", "row", "doc", "nk", "nk-nan"};

static void corrupt(state *s, size_t i, bad_kind b) {
  const strata_lda_token *t = &s->tok[i];
  uint32_t K = s->K, k = s->z[t->slot], other = (k + 1) % K;
  switch (b) {
  case BAD_NDK: s->ndk[(size_t)t->doc * K + k] = 0; break;
  case BAD_NWK: s->nwk[(size_t)t->word * K + k] = 0; break;
  case BAD_Z: s->z[t->slot] = (uint16_t)K; break;
  case BAD_ROW: s->nwk[(size_t)t->word * K + other] = -1; break;
  case BAD_DOC: s->ndk[(size_t)t->doc * K + other] = -2; break;
  case BAD_NK: s->nk[k] = 0.5f; break;
  case BAD_NK_NAN: s->nk[other] = NAN; break;
  default: break;
  }
}

static void assert_same_counts(const state *a, const state *b) {
  assert_memory_equal(a->ndk, b->ndk, (size_t)a->D * a->K * sizeof *a->ndk);
  assert_memory_equal(a->nwk, b->nwk, (size_t)a->V * a->K * sizeof *a->nwk);
  assert_memory_equal(a->nk, b->nk, a->K * sizeof *a->nk);
  assert_memory_equal(a->z, b->z, a->n * sizeof *a->z);
}

/* Puts token i first (mid = 0), or after every token that shares neither
 * its document nor its word (mid = 1): those cannot repair its counts. */
static size_t reorder(state *s, size_t i, int mid) {
  strata_lda_token *t = malloc(s->n * sizeof *t);
  assert_non_null(t);
  strata_lda_token bad = s->tok[i];
  size_t at = 0;
  if (mid) {
    for (size_t j = 0; j < s->n; j++)
      if (s->tok[j].doc != bad.doc && s->tok[j].word != bad.word) t[at++] = s->tok[j];
  }
  size_t pos = at;
  t[at++] = bad;
  for (size_t j = 0; j < s->n; j++) {
    if (j == i) continue;
    if (mid && s->tok[j].doc != bad.doc && s->tok[j].word != bad.word) continue;
    t[at++] = s->tok[j];
  }
  assert_int_equal(at, s->n);
  memcpy(s->tok, t, s->n * sizeof *t);
  free(t);
  return pos;
}

/* A count that would go negative: STRATA_ERANGE, and the counts as they
 * were before that token (untouched when it comes first). */
static void test_erange(void **st) {
  (void)st;
  const uint32_t Ks[] = {4, 100, 1000};
  for (size_t c = 0; c < 3; c++) {
    uint32_t K = Ks[c];
    strata_lda_params p = {.K = K, .V = 8, .alpha = 0.1, .beta = 0.01};
    for (int b = 0; b < BAD_N; b++) {
      for (int mid = 0; mid < 2; mid++) {
        if (mid && (b == BAD_NK || b == BAD_NK_NAN)) continue;
        for (int wide = 0; wide < 2; wide++) {
          print_message("  K=%u %s, %s word, %s\n", K, bad_name[b], wide ? "wide" : "narrow",
                        mid ? "mid-sweep" : "first token");
          state s, ref, w;
          make_state(&s, K, 8, 4, 20, 3, K < 1000 ? 40 : 1200, g_seed ^ 400);
          size_t i = reorder(&s, find_token(&s, wide ? 0 : -1), mid);
          assert_true(!mid || i > 0);
          state_clone(&ref, &s);
          corrupt(&ref, i, (bad_kind)b);
          state_clone(&w, &ref);
          strata_lda_sampler *smp = NULL;
          assert_int_equal(strata_lda_sampler_new(&p, &smp), 0);
          strata_rng rng;
          strata_rng_seed(&rng, g_seed ^ 401);
          strata_err_clear();
          assert_int_equal(strata_lda_sweep(smp, w.tok, w.n, w.ndk, w.nwk, w.nk, w.z, &rng),
                           STRATA_ERANGE);
          assert_true(strlen(strata_err_msg()) > 0);
          if (!mid) {
            assert_same_counts(&w, &ref);
          } else {
            /* w without the corruption is consistent with its z ... */
            state fix;
            state_clone(&fix, &w);
            for (size_t x = 0; x < (size_t)s.D * K; x++) fix.ndk[x] += s.ndk[x] - ref.ndk[x];
            for (size_t x = 0; x < (size_t)s.V * K; x++) fix.nwk[x] += s.nwk[x] - ref.nwk[x];
            for (uint32_t k = 0; k < K; k++) fix.nk[k] += s.nk[k] - ref.nk[k];
            fix.z[s.tok[i].slot] = s.z[s.tok[i].slot];
            assert_consistent(&fix);
            state_free(&fix);
            /* ... the tokens before it moved, and from it on nothing did */
            assert_memory_not_equal(w.z, ref.z, s.n * sizeof *w.z);
            for (size_t j = i; j < s.n; j++)
              assert_int_equal(w.z[s.tok[j].slot], ref.z[s.tok[j].slot]);
          }
          /* the sampler still works on good counts */
          assert_int_equal(strata_lda_sweep(smp, s.tok, s.n, s.ndk, s.nwk, s.nk, s.z, &rng), 0);
          assert_consistent(&s);
          strata_lda_sampler_free(smp);
          state_free(&w);
          state_free(&ref);
          state_free(&s);
        }
      }
    }
  }
}

static void test_bad_params(void **st) {
  (void)st;
  strata_lda_sampler *smp = (strata_lda_sampler *)&smp;
  for (size_t i = 0; i < sizeof lda_bad_params / sizeof *lda_bad_params; i++) {
    strata_err_clear();
    assert_int_equal(strata_lda_sampler_new(&lda_bad_params[i], &smp), STRATA_EINVAL);
    assert_null(smp);
    assert_true(strlen(strata_err_msg()) > 0);
    smp = (strata_lda_sampler *)&smp;
  }
  assert_int_equal(strata_lda_sampler_new(NULL, &smp), STRATA_EINVAL);
  strata_lda_params ok = {.K = 65535, .V = 1, .alpha = 1e-3, .beta = 1e-3};
  assert_int_equal(strata_lda_sampler_new(&ok, NULL), STRATA_EINVAL);
  assert_int_equal(strata_lda_sampler_new(&ok, &smp), 0);
  strata_lda_sampler_free(smp);
  strata_lda_sampler_free(NULL);

  ok.K = 4;
  assert_int_equal(strata_lda_sampler_new(&ok, &smp), 0);
  state s;
  make_state(&s, 4, 5, 2, 5, 4, 0, 1);
  strata_rng rng;
  strata_rng_seed(&rng, 1);
  assert_int_equal(strata_lda_sweep(NULL, s.tok, s.n, s.ndk, s.nwk, s.nk, s.z, &rng),
                   STRATA_EINVAL);
  assert_int_equal(strata_lda_sweep(smp, NULL, s.n, s.ndk, s.nwk, s.nk, s.z, &rng), STRATA_EINVAL);
  assert_int_equal(strata_lda_sweep(smp, s.tok, s.n, NULL, s.nwk, s.nk, s.z, &rng), STRATA_EINVAL);
  assert_int_equal(strata_lda_sweep(smp, s.tok, s.n, s.ndk, NULL, s.nk, s.z, &rng), STRATA_EINVAL);
  assert_int_equal(strata_lda_sweep(smp, s.tok, s.n, s.ndk, s.nwk, NULL, s.z, &rng), STRATA_EINVAL);
  assert_int_equal(strata_lda_sweep(smp, s.tok, s.n, s.ndk, s.nwk, s.nk, NULL, &rng), STRATA_EINVAL);
  assert_int_equal(strata_lda_sweep(smp, s.tok, s.n, s.ndk, s.nwk, s.nk, s.z, NULL), STRATA_EINVAL);
  /* nothing to do is fine, whatever the arrays */
  assert_int_equal(strata_lda_sweep(smp, NULL, 0, NULL, NULL, NULL, NULL, NULL), 0);
  strata_lda_sampler_free(smp);
  state_free(&s);
}

/* Every allocation may fail: creation fails cleanly, and a sweep fails
 * with STRATA_ENOMEM leaving counts consistent with z. */
static void test_alloc_failures(void **st) {
  (void)st;
  strata_lda_params p = {.K = 100, .V = 300, .alpha = 0.1, .beta = 0.01};
  strata_lda_sampler *smp;
  int ok = 0;
  for (long f = 1; f < 100 && !ok; f++) {
    strata_alloc_fail_after(f);
    int rc = strata_lda_sampler_new(&p, &smp);
    strata_alloc_fail_after(0);
    if (rc == 0) {
      ok = 1;
      strata_lda_sampler_free(smp);
    } else {
      assert_int_equal(rc, STRATA_ENOMEM);
      assert_int_equal(strata_alloc_live(), live0);
    }
  }
  assert_true(ok);

  /* K = 1000 and thousands of sparse words: the word pool grows mid-call,
   * and word 0, collapsed on one topic under heavy priors, outgrows its
   * room. */
  p.K = 1000;
  p.V = 3000;
  p.alpha = 2;
  p.beta = 0.5;
  state s;
  make_state(&s, 1000, 3000, 300, 1000, 100, 3000, g_seed ^ 500);
  collapse_word(&s, 0, 9);
  int failed = 0;
  ok = 0;
  for (long f = 1; f < 100 && !ok; f++) {
    state w;
    state_clone(&w, &s);
    assert_int_equal(strata_lda_sampler_new(&p, &smp), 0);
    strata_rng rng;
    strata_rng_seed(&rng, 5);
    strata_alloc_fail_after(f);
    int rc = strata_lda_sweep(smp, w.tok, w.n, w.ndk, w.nwk, w.nk, w.z, &rng);
    strata_alloc_fail_after(0);
    if (rc == 0) {
      ok = 1;
    } else {
      assert_int_equal(rc, STRATA_ENOMEM);
      failed++;
    }
    assert_consistent(&w);
    strata_lda_sampler_free(smp);
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
    strata_lda_sampler *sa = NULL, *sb = NULL;
    assert_int_equal(strata_lda_sampler_new(&p, &sa), 0);
    assert_int_equal(strata_lda_sampler_new(&p, &sb), 0);
    strata_rng ra, rb;
    strata_rng_seed(&ra, g_seed ^ 601);
    strata_rng_seed(&rb, g_seed ^ 601);
    for (int sw = 0; sw < 4; sw++) {
      assert_int_equal(strata_lda_sweep(sa, a.tok, a.n, a.ndk, a.nwk, a.nk, a.z, &ra), 0);
      assert_int_equal(strata_lda_sweep(sb, b.tok, b.n, b.ndk, b.nwk, b.nk, b.z, &rb), 0);
    }
    assert_memory_equal(a.z, b.z, a.n * sizeof *a.z);
    assert_memory_equal(a.nwk, b.nwk, (size_t)a.V * K * sizeof *a.nwk);
    assert_memory_equal(&ra, &rb, sizeof ra);
    /* a different seed goes elsewhere */
    strata_rng_seed(&rb, g_seed ^ 602);
    assert_int_equal(strata_lda_sweep(sb, b.tok, b.n, b.ndk, b.nwk, b.nk, b.z, &rb), 0);
    assert_int_equal(strata_lda_sweep(sa, a.tok, a.n, a.ndk, a.nwk, a.nk, a.z, &ra), 0);
    assert_memory_not_equal(a.z, b.z, a.n * sizeof *a.z);
    strata_lda_sampler_free(sa);
    strata_lda_sampler_free(sb);
    state_free(&a);
    state_free(&b);
  }
}

int main(void) {
  const char *env = getenv("STRATA_TEST_SEED");
  if (env && *env) g_seed = strtoull(env, NULL, 0);
  const char *quick = getenv("STRATA_TEST_QUICK");
  g_quick = quick && *quick && strcmp(quick, "0") != 0;
  printf("test_lda_sampler: seed %llu (STRATA_TEST_SEED=X replays one)%s\n",
         (unsigned long long)g_seed, g_quick ? ", quick: a tenth of the draws" : "");
  fflush(stdout);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_conditional_by_hand, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chisq_k4, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chisq_k100, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chisq_k1000, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chisq_k300, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chisq_k61_buckets, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chisq_growing_word, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chisq_no_cache_across_calls, setup, teardown),
      cmocka_unit_test_setup_teardown(test_invariants, setup, teardown),
      cmocka_unit_test_setup_teardown(test_erange, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_params, setup, teardown),
      cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
      cmocka_unit_test_setup_teardown(test_same_seed_same_z, setup, teardown),
  };
  return cmocka_run_group_tests_name("lda_sampler", tests, NULL, NULL);
}
