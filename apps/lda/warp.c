/*
 * The Metropolis-Hastings sampler of strata/apps/lda.h ("warp").
 *
 * Target. For a token of document d and word w with topic s0 in the
 * counts, the conditional is
 *   p(k) ∝ (nd¬[k] + α)(nw¬[k] + β) / (nk¬[k] + Vβ),
 * where x¬[k] = x[k] - [k = s0] are the counts of every other token. These
 * do not depend on where the token is while its chain of proposals runs,
 * so the counts keep it at s0 until the chain ends, and move it once.
 *
 * Proposals. Let s be the token's current topic (z[slot] holds it while
 * the chain runs). Both proposals draw a topic from a multiset of "units"
 * that counts the token itself at s:
 *   document: q(k | s) ∝ nd¬[k] + [k = s] + α: with probability
 *     L_d / (L_d + Kα) the topic of a uniformly chosen slot of d (z over
 *     doc_off[d] .. doc_off[d + 1]), else a uniform topic;
 *   word:     q(k | s) ∝ nw¬[k] + [k = s] + β: with probability
 *     n_w / (n_w + Kβ) a uniformly chosen unit of the word's row, else a
 *     uniform topic. A unit is one of the call's own tokens of w (the
 *     sampler keeps their topics, updated as they move, in unit[]) or one
 *     of the counts the row holds beyond them (the "frozen" part: tokens of
 *     other documents or of other calls), drawn from an alias table built
 *     when the call starts and exact for the whole call: nothing in the
 *     call changes those tokens.
 * For t ≠ s, q(t | s) ∝ x¬[t] + prior and q(s | t) ∝ x¬[s] + prior with
 * the same normaliser, so the Metropolis-Hastings ratio
 *   p(t) q(s | t) / (p(s) q(t | s))
 * loses the proposal's own factor: a word proposal is accepted with
 * probability min(1, (nd¬[t]+α)(nk¬[s]+Vβ) / ((nd¬[s]+α)(nk¬[t]+Vβ))), a
 * document proposal with the same in nw¬ and β. Each step leaves p
 * invariant (its proposal depends on the other tokens' current topics and
 * on nothing of the token's past), so a sweep leaves the collapsed
 * posterior invariant. Staleness would break this: an alias table over a
 * row as it was when the call first met the word would remember the
 * earlier topics of tokens resampled since, which is why the call's own
 * tokens are proposed from their live topics instead.
 *
 * Cost. Per call: the tokens are bucketed by word (two passes), and each
 * distinct word's row is read once (O(K), as the exact sampler's word
 * build). Per token: 2 x steps proposals, each a read of a unit or of a
 * slot of the document and of a few counts, and an accept-or-reject; no
 * loop over topics. What a token costs is where those reads land in
 * memory: units, word rows (4 KB each at K = 1000) and document rows are
 * scattered over tens of megabytes. So the sampler works a few tokens
 * ahead of the one it samples (see draw_ahead and the PF_ distances): it
 * draws a token's proposals 10 tokens early and prefetches the units,
 * slots and counts they will read, and streams each document's row in
 * before its first token. Above SPARSE_K topics a bitmap per word says
 * which counts of its row are nonzero: most topics a document proposes
 * are not the word's, and their zero count is then known without reading
 * the row. The accept-or-reject is a branch (a coin toss to the predictor):
 * measured faster than a select, which would make every later step wait
 * for the counts the test reads.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "strata/core.h"
#include "strata/apps/lda.h"

/* Builds without AVX pass 32-byte vectors in memory; every function here
 * that takes or returns one is static and inlined, so no ABI is involved. */
#pragma GCC diagnostic ignored "-Wpsabi"

#define MAX_STEPS 64

/* Above this many topics the sampler keeps, per word of a call, a bitmap of
 * the topics its row holds, and reads a count only where it is nonzero
 * (at K = 1000, 10% faster; at K = 300, 20% slower). The unit tests build
 * a copy with a threshold of 1, so that their small K take this path too. */
#ifdef STRATA_LDA_WARP_SPARSE_K
#define SPARSE_K STRATA_LDA_WARP_SPARSE_K
#else
#define SPARSE_K 512
#endif

/* Tokens ahead at which a token's data are fetched: its word's header
 * (PF_W); its own unit, its count in the word row, the word's bitmap and
 * its document's row (PF_A); its proposals drawn, with the units and word
 * counts the document proposals will read (PF_B, see draw_ahead); the word
 * counts of the topics its word proposals hold (PF_C). RING holds the
 * proposals of PF_B + 1 tokens or more. Measured on the project's machine
 * (Zen 3): shorter or longer distances are no faster. */
#define PF_W 24
#define PF_A 16
#define PF_B 10
#define PF_C 5
#define RING 16

/* Per word of the current call. */
typedef struct warp_word {
  uint32_t start; /* its units: unit[start .. start + c) */
  uint32_t c;     /* its tokens in the call */
  uint32_t aoff;  /* its frozen part: alias[aoff .. aoff + na) */
  uint32_t na;
  uint32_t bix; /* its nonzero topics: bits[bix * kw .. (bix + 1) * kw) */
  uint32_t pad;
  double n;     /* c + the frozen total (the row total at the call start) */
  double scale; /* na / the frozen total; 0 without a frozen part */
} warp_word;

/* An alias-table entry: top with probability thr, else alt. */
typedef struct warp_alias {
  double thr;
  uint32_t top, alt;
} warp_alias;

struct strata_lda_warp {
  uint32_t K, steps;
  double alpha, beta, vbeta, kalpha, kbeta, inv_alpha, inv_beta;
  warp_word *words;
  uint32_t *wstamp;
  size_t words_cap;
  uint32_t stamp;
  uint32_t *wlist; /* the call's distinct words */
  uint32_t *tpos;  /* per token of the call: its unit */
  uint16_t *unit;  /* per token of the call, by word: its current topic */
  size_t wlist_cap, tpos_cap, unit_cap;
  warp_alias *alias;
  size_t alias_cap;
  int64_t *ring; /* the proposals drawn ahead (see draw_ahead) */
  uint64_t *bits; /* per word of the call, kw words: which topics its row holds */
  size_t bits_cap;
  uint32_t kw;
  /* K each: a row's nonzero topics and counts, the index of each topic
   * among them, and the work lists of the alias build */
  uint32_t *ktop, *kidx, *small, *large;
  double *kcnt;
};

/* ---- lifecycle ---------------------------------------------------------- */

int strata_lda_warp_new(const strata_lda_params *p, uint32_t steps, strata_lda_warp **out) {
  if (!out) return strata_err_set(STRATA_EINVAL, "lda warp: no output pointer");
  *out = NULL;
  if (!p) return strata_err_set(STRATA_EINVAL, "lda warp: no parameters");
  if (p->K < 1 || p->K > UINT16_MAX)
    return strata_err_set(STRATA_EINVAL, "lda warp: K = %u topics (need 1..%u: z is uint16)", p->K,
                          (unsigned)UINT16_MAX);
  if (p->V < 1) return strata_err_set(STRATA_EINVAL, "lda warp: V = 0 words");
  if (!(p->alpha > 0) || !isfinite(p->alpha))
    return strata_err_set(STRATA_EINVAL, "lda warp: alpha = %g (need a finite value > 0)",
                          p->alpha);
  if (!(p->beta > 0) || !isfinite(p->beta))
    return strata_err_set(STRATA_EINVAL, "lda warp: beta = %g (need a finite value > 0)", p->beta);
  if (steps < 1 || steps > MAX_STEPS)
    return strata_err_set(STRATA_EINVAL, "lda warp: %u steps per token (need 1..%d)", steps,
                          MAX_STEPS);

  strata_lda_warp *s = strata_calloc(1, sizeof *s);
  if (!s) goto fail;
  s->K = p->K;
  s->kw = (p->K + 63) / 64;
  s->steps = steps;
  s->alpha = p->alpha;
  s->beta = p->beta;
  s->vbeta = (double)p->V * p->beta;
  s->kalpha = (double)p->K * p->alpha;
  s->kbeta = (double)p->K * p->beta;
  s->inv_alpha = 1.0 / p->alpha;
  s->inv_beta = 1.0 / p->beta;
  size_t K = p->K;
  s->ktop = strata_malloc(K * sizeof *s->ktop);
  s->kidx = strata_malloc(K * sizeof *s->kidx);
  s->small = strata_malloc(K * sizeof *s->small);
  s->large = strata_malloc(K * sizeof *s->large);
  s->kcnt = strata_malloc(K * sizeof *s->kcnt);
  s->ring = strata_malloc((size_t)RING * 2 * steps * sizeof *s->ring);
  if (!s->ktop || !s->kidx || !s->small || !s->large || !s->kcnt || !s->ring) goto fail;
  *out = s;
  return 0;

fail:
  strata_lda_warp_free(s);
  return strata_err_set(STRATA_ENOMEM, "lda warp: out of memory for K = %u", p->K);
}

void strata_lda_warp_free(strata_lda_warp *s) {
  if (!s) return;
  strata_free(s->words);
  strata_free(s->wstamp);
  strata_free(s->wlist);
  strata_free(s->tpos);
  strata_free(s->unit);
  strata_free(s->alias);
  strata_free(s->ktop);
  strata_free(s->kidx);
  strata_free(s->small);
  strata_free(s->large);
  strata_free(s->kcnt);
  strata_free(s->ring);
  strata_free(s->bits);
  strata_free(s);
}

/* ---- per-call scratch --------------------------------------------------- */

static int reserve(void **p, size_t need, size_t *cap, size_t size) {
  void *q = strata_grow(*p, need, cap, SIZE_MAX / size, size);
  if (!q)
    return strata_err_set(STRATA_ENOMEM, "lda warp: out of memory (%zu x %zu bytes)", need, size);
  *p = q;
  return 0;
}

static int ensure_words(strata_lda_warp *s, size_t nw) {
  if (nw <= s->words_cap) return 0;
  size_t n = s->words_cap ? s->words_cap : 1024;
  while (n < nw) n *= 2;
  warp_word *w = strata_realloc(s->words, n * sizeof *w);
  if (!w) return strata_err_set(STRATA_ENOMEM, "lda warp: out of memory for %zu words", n);
  s->words = w;
  uint32_t *st = strata_realloc(s->wstamp, n * sizeof *st);
  if (!st) return strata_err_set(STRATA_ENOMEM, "lda warp: out of memory for %zu words", n);
  memset(st + s->words_cap, 0, (n - s->words_cap) * sizeof *st);
  s->wstamp = st;
  s->words_cap = n;
  return 0;
}

/* Whether x is a count: whole, >= 0 and finite (floats are whole from
 * 2^23 up). */
static inline bool is_count(float x) { return x >= 0 && x < INFINITY && x == floorf(x); }

/*
 * The frozen part of word w: its row less the call's own tokens (their
 * topics in unit[start .. start + c)), as an alias table (Vose) appended to
 * s->alias at *used. Rows that hold the call's tokens alone have none.
 */
static int word_build(strata_lda_warp *s, uint32_t w, const float *row, warp_word *ww,
                      size_t *used) {
  const uint32_t K = s->K;
  double total = 0;
  bool bad = false;
  for (uint32_t k = 0; k < K; k++) {
    bad |= !is_count(row[k]);
    total += row[k];
  }
  if (K > SPARSE_K) {
    uint64_t *wb = s->bits + (size_t)ww->bix * s->kw;
    memset(wb, 0, s->kw * sizeof *wb);
    for (uint32_t k = 0; k < K; k++) wb[k >> 6] |= (uint64_t)(row[k] != 0) << (k & 63);
  }
  if (bad) {
    for (uint32_t k = 0; k < K; k++)
      if (!is_count(row[k]))
        return strata_err_set(STRATA_ERANGE, "lda warp: nwk[%u][%u] = %g is not a count", w, k,
                              (double)row[k]);
  }
  ww->n = total;
  ww->na = 0;
  ww->aoff = 0;
  ww->scale = 0;
  const double frozen = total - ww->c;
  if (frozen < 0)
    return strata_err_set(STRATA_ERANGE,
                          "lda warp: word %u has %u tokens in the call but its row sums to %.0f", w,
                          ww->c, total);
  if (frozen == 0) return 0;

  uint32_t *ktop = s->ktop, *kidx = s->kidx;
  double *kcnt = s->kcnt;
  uint32_t nnz = 0;
  for (uint32_t k = 0; k < K; k++) {
    ktop[nnz] = k;
    kcnt[nnz] = row[k];
    kidx[k] = nnz;
    nnz += row[k] != 0;
  }
  const uint16_t *u = s->unit + ww->start;
  for (uint32_t i = 0; i < ww->c; i++) {
    uint32_t t = u[i], j = kidx[t];
    if (j >= nnz || ktop[j] != t || kcnt[j] < 1)
      return strata_err_set(STRATA_ERANGE,
                            "lda warp: nwk[%u][%u] = %g is below the call's tokens of that topic",
                            w, t, (double)row[t]);
    kcnt[j] -= 1;
  }
  uint32_t m = 0;
  for (uint32_t j = 0; j < nnz; j++) {
    ktop[m] = ktop[j];
    kcnt[m] = kcnt[j];
    m += kcnt[j] > 0;
  }
  int rc = reserve((void **)&s->alias, *used + m, &s->alias_cap, sizeof *s->alias);
  if (rc) return rc;
  warp_alias *a = s->alias + *used;
  uint32_t *small = s->small, *large = s->large;
  uint32_t ns = 0, nl = 0;
  const double scale = (double)m / frozen;
  for (uint32_t j = 0; j < m; j++) {
    kcnt[j] *= scale;
    a[j].top = ktop[j];
    a[j].alt = ktop[j];
    a[j].thr = 1.0;
    if (kcnt[j] < 1.0) small[ns++] = j;
    else large[nl++] = j;
  }
  while (ns && nl) {
    uint32_t sj = small[--ns], lj = large[nl - 1];
    a[sj].thr = kcnt[sj];
    a[sj].alt = ktop[lj];
    kcnt[lj] = (kcnt[lj] + kcnt[sj]) - 1.0;
    if (kcnt[lj] < 1.0) {
      nl--;
      small[ns++] = lj;
    }
  }
  /* What is left holds (up to rounding) a full share each: thr stays 1. */
  ww->aoff = (uint32_t)*used;
  ww->na = m;
  ww->scale = scale;
  *used += m;
  return 0;
}

/* Buckets the call's tokens by word (unit[], tpos[]) and builds every
 * word's frozen part. */
static int call_setup(strata_lda_warp *s, const strata_lda_token *tok, size_t n, const float *nwk,
                      const uint16_t *z) {
  const uint32_t K = s->K;
  uint32_t maxw = 0;
  for (size_t i = 0; i < n; i++)
    if (tok[i].word > maxw) maxw = tok[i].word;
  if (n > UINT32_MAX)
    return strata_err_set(STRATA_EINVAL, "lda warp: %zu tokens in one call (at most 2^32 - 1)", n);
  int rc = ensure_words(s, (size_t)maxw + 1);
  if (!rc) rc = reserve((void **)&s->wlist, n, &s->wlist_cap, sizeof *s->wlist);
  if (!rc) rc = reserve((void **)&s->tpos, n, &s->tpos_cap, sizeof *s->tpos);
  if (!rc) rc = reserve((void **)&s->unit, n, &s->unit_cap, sizeof *s->unit);
  if (rc) return rc;
  if (++s->stamp == 0) {
    memset(s->wstamp, 0, s->words_cap * sizeof *s->wstamp);
    s->stamp = 1;
  }
  const uint32_t stamp = s->stamp;
  warp_word *words = s->words;
  uint32_t *wstamp = s->wstamp, *wlist = s->wlist, nw = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t w = tok[i].word;
    if (wstamp[w] != stamp) {
      wstamp[w] = stamp;
      words[w].c = 0;
      wlist[nw++] = w;
    }
    words[w].c++;
  }
  uint32_t run = 0;
  for (uint32_t j = 0; j < nw; j++) {
    warp_word *ww = &words[wlist[j]];
    ww->start = run;
    ww->aoff = run; /* the fill position until word_build */
    run += ww->c;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t t = z[tok[i].slot];
    if (t >= K)
      return strata_err_set(STRATA_ERANGE, "lda warp: token %zu has topic %u of K = %u", i, t, K);
    uint32_t p = words[tok[i].word].aoff++;
    s->tpos[i] = p;
    s->unit[p] = (uint16_t)t;
  }
  if (K > SPARSE_K) {
    rc = reserve((void **)&s->bits, (size_t)nw * s->kw, &s->bits_cap, sizeof *s->bits);
    if (rc) return rc;
  }
  size_t used = 0;
  for (uint32_t j = 0; j < nw; j++) {
    uint32_t w = wlist[j];
    words[w].bix = j;
    rc = word_build(s, w, nwk + (size_t)w * K, &words[w], &used);
    if (rc) return rc;
  }
  return 0;
}

/* ---- random numbers ----------------------------------------------------- */

/*
 * A token takes 4 uniforms per step, so the sampler draws them 4 at a time:
 * four xoshiro256** streams side by side in vectors (one AVX2 register
 * each; two SSE2 registers without AVX), seeded from 4 draws of the
 * caller's generator at the start of every call, into a buffer of UBUF.
 * Doubles come from the top 52 bits (exponent set, minus 1): uniform in
 * [0, 1) on a grid of 2^-52. Against strata_rng_uniform per draw: 90 fewer
 * instructions a token, 3% faster on a corpus that fits in cache, no
 * difference measured where memory sets the pace.
 */
typedef uint64_t v4u __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));

#define UBUF 64

typedef struct warp_rng {
  v4u s0, s1, s2, s3;
  double buf[UBUF];
  uint32_t at;
} warp_rng;

static void urng_seed(warp_rng *r, strata_rng *from) {
  uint64_t x[4][4];
  for (int lane = 0; lane < 4; lane++) {
    strata_rng l;
    strata_rng_seed(&l, strata_rng_next(from));
    memcpy(x[lane], l.s, sizeof l.s);
  }
  r->s0 = (v4u){x[0][0], x[1][0], x[2][0], x[3][0]};
  r->s1 = (v4u){x[0][1], x[1][1], x[2][1], x[3][1]};
  r->s2 = (v4u){x[0][2], x[1][2], x[2][2], x[3][2]};
  r->s3 = (v4u){x[0][3], x[1][3], x[2][3], x[3][3]};
  r->at = UBUF;
}

static void urng_fill(warp_rng *r) {
  v4u s0 = r->s0, s1 = r->s1, s2 = r->s2, s3 = r->s3;
  const v4u one = {0x3ff0000000000000ull, 0x3ff0000000000000ull, 0x3ff0000000000000ull,
                   0x3ff0000000000000ull};
  for (int i = 0; i < UBUF; i += 4) {
    v4u x = (s1 << 2) + s1; /* s1 * 5, rotated by 7, times 9 */
    x = (x << 7) | (x >> 57);
    x = (x << 3) + x;
    const v4u t = s1 << 17;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= t;
    s3 = (s3 << 45) | (s3 >> 19);
    v4d u = (v4d)((x >> 12) | one) - 1.0;
    memcpy(r->buf + i, &u, sizeof u);
  }
  r->s0 = s0;
  r->s1 = s1;
  r->s2 = s2;
  r->s3 = s3;
  r->at = 0;
}

static inline double urng_next(warp_rng *r) {
  if (r->at == UBUF) urng_fill(r);
  return r->buf[r->at++];
}

/* ---- the sweep ---------------------------------------------------------- */

static inline bool has_topic(const uint64_t *wb, uint32_t t) {
  return (wb[t >> 6] >> (t & 63)) & 1;
}

/* row[t], reading the row only where the bitmap says it holds t: at large
 * K most topics a document proposes are not the word's, and their counts
 * would each cost a cache miss. The line of s0 is read instead, and known. */
static inline float row_count(bool sparse, const float *row, const uint64_t *wb, uint32_t t,
                              uint32_t s0) {
  if (!sparse) return row[t];
  const uint32_t has = (uint32_t)has_topic(wb, t);
  const float v = row[has ? t : s0];
  return has ? v : 0.0f;
}

/* A topic and its factors in a token's conditional: document, word and
 * total counts plus their priors, the token's own count left out. */
typedef struct mh_state {
  uint32_t t;
  double fd, fw, fk;
} mh_state;

static inline __attribute__((always_inline)) mh_state
mh_factors(uint32_t t, uint32_t s0, const int32_t *nd, const float *row, const uint64_t *wb,
           const float *nk, bool sparse, double alpha, double beta, double vbeta) {
  double own = t == s0;
  return (mh_state){t, (double)nd[t] - own + alpha, (double)row_count(sparse, row, wb, t, s0) - own + beta,
                    (double)nk[t] - own + vbeta};
}

/* A Metropolis-Hastings move: the proposal becomes the state when accepted
 * (selects, not branches: acceptance is a coin flip the predictor loses). */
static inline __attribute__((always_inline)) void mh_take(mh_state *cur, const mh_state *p, bool acc) {
  cur->t = acc ? p->t : cur->t;
  cur->fd = acc ? p->fd : cur->fd;
  cur->fw = acc ? p->fw : cur->fw;
  cur->fk = acc ? p->fk : cur->fk;
}

/*
 * A token's proposals are drawn PF_B tokens ahead of its turn, as codes: a
 * position in unit[] (word) or z (document), whose topic is read when the
 * token's turn comes (it may change meanwhile), or ~topic for a topic that
 * does not depend on the state (uniform, or the frozen part of a word).
 * Which random numbers a token gets does not depend on the state either,
 * so drawing them early changes nothing but the order of the stream; it
 * lets the sampler fetch what they will read while earlier tokens run.
 */
static inline void draw_ahead(const strata_lda_warp *s, const strata_lda_token *tk,
                              const uint64_t *doc_off, const uint16_t *z, const float *nwk,
                              int64_t *code, warp_rng *st, const uint32_t steps) {
  const uint32_t K = s->K;
  const warp_word *ww = &s->words[tk->word];
  const warp_alias *wa = s->alias + ww->aoff;
  const uint64_t off = doc_off[tk->doc], end = doc_off[tk->doc + 1];
  const double len = end > off ? (double)(end - off) : 0.0;
  const double wtot = ww->n + s->kbeta, wc = ww->c, lk = len + s->kalpha;
  const float *row = nwk + (size_t)tk->word * K;
  const uint64_t *wb = K > SPARSE_K ? s->bits + (size_t)ww->bix * s->kw : NULL;
  for (uint32_t step = 0; step < steps; step++) {
    double x = urng_next(st) * wtot;
    if (x < wc) {
      uint32_t p = ww->start + (uint32_t)x;
      code[2 * step] = p;
      __builtin_prefetch(s->unit + p);
    } else if (x < ww->n) {
      double y = (x - wc) * ww->scale;
      uint32_t j = (uint32_t)y;
      if (j >= ww->na) j = ww->na - 1;
      code[2 * step] = ~(int64_t)(y - j < wa[j].thr ? wa[j].top : wa[j].alt);
    } else {
      uint32_t t = (uint32_t)((x - ww->n) * s->inv_beta);
      code[2 * step] = ~(int64_t)(t < K ? t : K - 1);
    }
    x = urng_next(st) * lk;
    if (x < len) {
      uint64_t p = off + (uint64_t)x;
      code[2 * step + 1] = (int64_t)p;
      uint32_t t = z[p];
      if (t < K && (K <= SPARSE_K || has_topic(wb, t))) __builtin_prefetch(row + t);
    } else {
      uint32_t t = (uint32_t)((x - len) * s->inv_alpha);
      code[2 * step + 1] = ~(int64_t)(t < K ? t : K - 1);
    }
  }
}

/* The sweep after its checks; inlined twice, for steps = 2 (the default,
 * its loops unrolled: 5% faster) and for any. */
static inline __attribute__((always_inline)) int sweep_run(
    strata_lda_warp *s, const strata_lda_token *tok, size_t n, int32_t *ndk, float *nwk, float *nk,
    uint16_t *z, const uint64_t *doc_off, strata_rng *rng, const uint32_t steps) {
  const uint32_t K = s->K;
  const double alpha = s->alpha, beta = s->beta, vbeta = s->vbeta;
  const uint32_t ncode = 2 * steps;
  int rc = 0;
  const bool sparse = K > SPARSE_K;
  const warp_word *words = s->words;
  const uint32_t *tpos = s->tpos;
  uint16_t *unit = s->unit;
  int64_t *ring = s->ring;
  warp_rng st;
  urng_seed(&st, rng);

  for (size_t j = 0; j < n && j < PF_B; j++)
    draw_ahead(s, &tok[j], doc_off, z, nwk, ring + (j % RING) * ncode, &st, steps);

  /* The document rows ahead, streamed a few lines a token. */
  const char *dpf = NULL, *dpf_end = NULL;
  uint32_t dpf_doc = UINT32_MAX;

  uint32_t cur_doc = 0;
  bool in_doc = false;
  uint64_t off = 0, len = 0;
  int32_t *nd = NULL;

  size_t i = 0;
  for (; i < n; i++) {
    if (i + PF_W < n) __builtin_prefetch(&words[tok[i + PF_W].word]);
    if (i + PF_A < n) {
      const strata_lda_token *a = &tok[i + PF_A];
      if (a->doc != dpf_doc) {
        dpf_doc = a->doc;
        dpf = (const char *)(ndk + (size_t)a->doc * K);
        dpf_end = dpf + (size_t)K * sizeof *ndk;
      }
      for (int l = 0; l < 4 && dpf < dpf_end; l++, dpf += 64) __builtin_prefetch(dpf);
      if (sparse) __builtin_prefetch(s->bits + (size_t)words[a->word].bix * s->kw);
      __builtin_prefetch(unit + tpos[i + PF_A]);
      uint32_t t = z[a->slot];
      if (t < K) __builtin_prefetch(nwk + (size_t)a->word * K + t);
    }
    if (i + PF_B < n)
      draw_ahead(s, &tok[i + PF_B], doc_off, z, nwk, ring + ((i + PF_B) % RING) * ncode,
                 &st, steps);
    if (i + PF_C < n) {
      const int64_t *c = ring + ((i + PF_C) % RING) * ncode;
      const float *prow = nwk + (size_t)tok[i + PF_C].word * K;
      for (uint32_t step = 0; step < steps; step++) {
        int64_t c0 = c[2 * step];
        uint32_t t = c0 >= 0 ? unit[c0] : (uint32_t)~c0;
        if (t < K) __builtin_prefetch(prow + t);
      }
    }

    const uint32_t d = tok[i].doc, w = tok[i].word, slot = tok[i].slot;
    if (!in_doc || d != cur_doc) {
      off = doc_off[d];
      len = doc_off[d + 1] > off ? doc_off[d + 1] - off : 0;
      nd = ndk + (size_t)d * K;
      cur_doc = d;
      in_doc = true;
    }
    if ((uint64_t)slot - off >= len) {
      rc = strata_err_set(STRATA_ERANGE,
                          "lda warp: token %zu has slot %u, outside its document %u's slots "
                          "[%llu, %llu)",
                          i, slot, d, (unsigned long long)off, (unsigned long long)(off + len));
      break;
    }
    float *row = nwk + (size_t)w * K;
    uint64_t *wb = sparse ? s->bits + (size_t)words[w].bix * s->kw : NULL;
    const uint32_t up = tpos[i], s0 = z[slot];
    if (nd[s0] < 1 || !(row[s0] >= 1.0f) || !(nk[s0] >= 1.0f)) {
      rc = strata_err_set(STRATA_ERANGE,
                          "lda warp: token %zu (doc %u, word %u, topic %u): a count would go "
                          "negative (ndk %d, nwk %g, nk %g)",
                          i, d, w, s0, nd[s0], (double)row[s0], (double)nk[s0]);
      break;
    }
    /* The current topic's factors, the token's own count out of each. */
    mh_state cur = {s0, (double)nd[s0] - 1.0 + alpha, (double)row[s0] - 1.0 + beta,
                    (double)nk[s0] - 1.0 + vbeta};
    const int64_t *code = ring + (i % RING) * ncode;
    bool bad = false;
    for (uint32_t step = 0; step < steps; step++) {
      /* Word proposal: the acceptance needs the document and total
       * factors. A proposal of the current topic is accepted, changing
       * nothing. */
      int64_t c = code[2 * step];
      uint32_t t = c >= 0 ? unit[c] : (uint32_t)~c;
      mh_state p = mh_factors(t, s0, nd, row, wb, nk, sparse, alpha, beta, vbeta);
      mh_take(&cur, &p, urng_next(&st) * cur.fd * p.fk < p.fd * cur.fk);
      unit[up] = (uint16_t)cur.t;
      z[slot] = (uint16_t)cur.t;
      /* Document proposal: the word and total factors. */
      c = code[2 * step + 1];
      t = c >= 0 ? z[c] : (uint32_t)~c;
      if (t >= K) {
        bad = true;
        break;
      }
      p = mh_factors(t, s0, nd, row, wb, nk, sparse, alpha, beta, vbeta);
      mh_take(&cur, &p, urng_next(&st) * cur.fw * p.fk < p.fw * cur.fk);
      unit[up] = (uint16_t)cur.t;
      z[slot] = (uint16_t)cur.t;
    }
    const uint32_t sc = cur.t;
    if (bad) {
      unit[up] = (uint16_t)s0;
      z[slot] = (uint16_t)s0;
      rc = strata_err_set(STRATA_ERANGE,
                          "lda warp: document %u (slots [%llu, %llu)) has a topic >= K = %u in z",
                          d, (unsigned long long)off, (unsigned long long)(off + len), K);
      break;
    }
    if (sc != s0) {
      nd[s0]--;
      nd[sc]++;
      row[s0] -= 1.0f;
      row[sc] += 1.0f;
      if (sparse) {
        wb[s0 >> 6] &= ~((uint64_t)(row[s0] == 0) << (s0 & 63));
        wb[sc >> 6] |= (uint64_t)1 << (sc & 63);
      }
      nk[s0] -= 1.0f;
      nk[sc] += 1.0f;
    }
  }
  return rc;
}

int strata_lda_warp_sweep(strata_lda_warp *s, const strata_lda_token *tok, size_t n, int32_t *ndk,
                          float *nwk, float *nk, uint16_t *z, const uint64_t *doc_off,
                          strata_rng *rng) {
  if (!s) return strata_err_set(STRATA_EINVAL, "lda warp: no sampler");
  if (n == 0) return 0;
  if (!tok || !ndk || !nwk || !nk || !z || !doc_off || !rng)
    return strata_err_set(STRATA_EINVAL, "lda warp: a NULL array with %zu tokens", n);
  const uint32_t K = s->K;
  for (uint32_t k = 0; k < K; k++)
    if (!is_count(nk[k]))
      return strata_err_set(STRATA_ERANGE, "lda warp: nk[%u] = %g is not a count", k,
                            (double)nk[k]);
  int rc = call_setup(s, tok, n, nwk, z);
  if (rc) return rc;
  if (s->steps == 2) return sweep_run(s, tok, n, ndk, nwk, nk, z, doc_off, rng, 2);
  return sweep_run(s, tok, n, ndk, nwk, nk, z, doc_off, rng, s->steps);
}
