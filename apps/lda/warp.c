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
 * Proposals. Let s be the token's current topic (z and unit[] keep s0
 * until the chain ends; a proposal that lands on the token itself reads
 * s). Both proposals draw a topic from a multiset of "units" that counts
 * the token itself at s:
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
 * Cost. Per call: the tokens are bucketed by word (a counting pass and a
 * filling pass, which also copies to each token what its draws need of
 * its word, so that they read it in order rather than wherever the word
 * is), and each distinct word's row is read once (O(K), as the exact
 * sampler's word build). Per token: 2 x steps proposals, each a read of a
 * unit or of a slot of the document and of a few counts, and an
 * accept-or-reject; no loop over topics; writes only if the token moves
 * (most do not, once the chain has mixed). What a token costs is where
 * those reads land in memory: units, word rows (4 KB each at K = 1000) and
 * document rows are scattered over tens of megabytes. So the sampler works
 * a block of BLK tokens ahead (draw_block): it draws the next block's
 * proposals before it samples this one, and prefetches the units, slots
 * and counts they will read: of a document's row only the entries its
 * tokens' topics and word proposals name (a few lines of 4 KB at K = 1000;
 * streaming whole rows in measured 3% slower at K = 100 and 8% at K =
 * 1000). Above SPARSE_K topics a bitmap per word says which
 * counts of its row are nonzero: most topics a document proposes are not
 * the word's, and their zero count is then known without reading the row.
 * The accept-or-reject is a branch (a coin toss to the predictor):
 * measured faster than a select, and than testing the document proposal
 * against both outcomes of the word proposal's test, either of which makes
 * the next token wait for the counts the tests read.
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

/* The pipeline (sweep_run): tokens go in blocks of BLK, a block's
 * proposals drawn while the block before it is sampled, with the document
 * count of each token's current topic; PF_C tokens ahead, the document
 * counts of a token's word proposals (and above SPARSE_K their word
 * counts). RING (tokens) holds the proposals of two blocks. When a
 * document comes in sight, up to PF_ZLINES lines of its slots in z are
 * fetched. */
#define BLK 32
#define RING (2 * BLK)
#define PF_C 8
#define PF_ZLINES 32

/* Per word of the current call, by its index in the call (the order the
 * call first meets it, wlist). */
typedef struct warp_word {
  double n;       /* c + the frozen total (the row total at the call start) */
  double scale;   /* na / the frozen total; 0 without a frozen part */
  uint32_t start; /* its units: unit[start .. start + c) */
  uint32_t c;     /* its tokens in the call */
  uint32_t aoff;  /* its frozen part: alias[aoff .. aoff + na) */
  uint32_t na;
} warp_word;

/* What a token's draws need of its word, copied to the token as the call
 * sets up, so that the draws read it in order (a word's own record is
 * wherever the word is): its unit, its word's units, and the word's index
 * in the call. FROZEN in c: the word has a frozen part (look at its
 * warp_word). While the call sets up, the same record per word id says
 * where the word's next unit goes (pos = unit). */
typedef struct warp_tok {
  uint32_t unit, start, c, j;
} warp_tok;
#define FROZEN 0x80000000u

/* An alias-table entry: top with probability thr, else alt. */
typedef struct warp_alias {
  double thr;
  uint32_t top, alt;
} warp_alias;

struct strata_lda_warp {
  uint32_t K, steps;
  double alpha, beta, vbeta, kalpha, kbeta, inv_alpha, inv_beta;
  /* by word id: tokens in the call while counting (0 otherwise), then
   * where the word's next unit goes */
  uint32_t *wcount;
  warp_tok *wfill;
  size_t wid_cap;
  warp_word *words; /* by index in the call */
  uint32_t *wlist;  /* the call's distinct words, in the order it meets them */
  warp_tok *ttok;   /* per token of the call */
  uint16_t *unit;   /* per token of the call, by word: its current topic */
  size_t words_cap, wlist_cap, ttok_cap, unit_cap;
  warp_alias *alias;
  size_t alias_cap;
  int64_t *ring;  /* the proposals drawn ahead (see draw_block) */
  double *ubuf;   /* the uniforms of two blocks */
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
  s->ubuf = strata_malloc((size_t)2 * BLK * 4 * steps * sizeof *s->ubuf);
  if (!s->ktop || !s->kidx || !s->small || !s->large || !s->kcnt || !s->ring || !s->ubuf) goto fail;
  *out = s;
  return 0;

fail:
  strata_lda_warp_free(s);
  return strata_err_set(STRATA_ENOMEM, "lda warp: out of memory for K = %u", p->K);
}

void strata_lda_warp_free(strata_lda_warp *s) {
  if (!s) return;
  strata_free(s->wcount);
  strata_free(s->wfill);
  strata_free(s->words);
  strata_free(s->wlist);
  strata_free(s->ttok);
  strata_free(s->unit);
  strata_free(s->alias);
  strata_free(s->ktop);
  strata_free(s->kidx);
  strata_free(s->small);
  strata_free(s->large);
  strata_free(s->kcnt);
  strata_free(s->ring);
  strata_free(s->ubuf);
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

/* Room for word ids below nw in wcount (new entries 0) and wfill. */
static int ensure_wid(strata_lda_warp *s, size_t nw) {
  if (nw <= s->wid_cap) return 0;
  size_t n = s->wid_cap ? s->wid_cap : 1024;
  while (n < nw) n *= 2;
  uint32_t *c = strata_realloc(s->wcount, n * sizeof *c);
  if (!c) return strata_err_set(STRATA_ENOMEM, "lda warp: out of memory for %zu words", n);
  memset(c + s->wid_cap, 0, (n - s->wid_cap) * sizeof *c);
  s->wcount = c;
  warp_tok *f = strata_realloc(s->wfill, n * sizeof *f);
  if (!f) return strata_err_set(STRATA_ENOMEM, "lda warp: out of memory for %zu words", n);
  s->wfill = f;
  s->wid_cap = n;
  return 0;
}

/* Whether x is a count: whole, >= 0 and finite (floats are whole from
 * 2^23 up). */
static inline bool is_count(float x) { return x >= 0 && x < INFINITY && x == floorf(x); }

/*
 * Word w's row at the call start (the j-th word of the call): its total,
 * which must cover the call's own tokens (the rest, its frozen part, is
 * what other tokens hold), and above SPARSE_K its bitmap of nonzero topics.
 */
static int word_scan(strata_lda_warp *s, uint32_t w, const float *row, uint32_t j) {
  const uint32_t K = s->K;
  warp_word *ww = &s->words[j];
  /* Counts below 2^24: summed as integers, exactly (vectorised). A row
   * with anything else is summed again in doubles, and refused if it holds
   * what is not a count. */
  int64_t isum = 0;
  int32_t big = 0;
  for (uint32_t k = 0; k < K; k++) {
    const float v = row[k] >= 0 && row[k] < 16777216.0f ? row[k] : -1.0f;
    const int32_t c = (int32_t)v;
    big |= (v != (float)c) | (c < 0);
    isum += c;
  }
  double total = (double)isum;
  if (big) {
    total = 0;
    for (uint32_t k = 0; k < K; k++) {
      if (!is_count(row[k]))
        return strata_err_set(STRATA_ERANGE, "lda warp: nwk[%u][%u] = %g is not a count", w, k,
                              (double)row[k]);
      total += row[k];
    }
  }
  if (K > SPARSE_K) {
    uint64_t *wb = s->bits + (size_t)j * s->kw;
    memset(wb, 0, s->kw * sizeof *wb);
    for (uint32_t k = 0; k < K; k++) wb[k >> 6] |= (uint64_t)(row[k] != 0) << (k & 63);
  }
  ww->n = total;
  ww->na = 0;
  ww->aoff = 0;
  ww->scale = 0;
  if (total < ww->c)
    return strata_err_set(STRATA_ERANGE,
                          "lda warp: word %u has %u tokens in the call but its row sums to %.0f", w,
                          ww->c, total);
  return 0;
}

/*
 * The frozen part of the j-th word of the call (id w, with one): its row
 * less the call's own tokens (their topics in unit[start .. start + c)),
 * as an alias table (Vose) appended to s->alias at *used.
 */
static int word_alias(strata_lda_warp *s, uint32_t w, const float *row, uint32_t wj, size_t *used) {
  const uint32_t K = s->K;
  warp_word *ww = &s->words[wj];
  const double frozen = ww->n - ww->c;
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

/* Buckets the call's tokens by word (unit[], ttok[]) and builds every
 * word's frozen part. */
static int call_setup(strata_lda_warp *s, const strata_lda_token *tok, size_t n, const float *nwk,
                      const uint16_t *z) {
  const uint32_t K = s->K;
  if (n > UINT32_MAX)
    return strata_err_set(STRATA_EINVAL, "lda warp: %zu tokens in one call (at most 2^32 - 1)", n);
  int rc = reserve((void **)&s->wlist, n, &s->wlist_cap, sizeof *s->wlist);
  if (!rc) rc = reserve((void **)&s->ttok, n, &s->ttok_cap, sizeof *s->ttok);
  if (!rc) rc = reserve((void **)&s->unit, n, &s->unit_cap, sizeof *s->unit);
  if (rc) return rc;
  uint32_t *wcount = s->wcount, *wlist = s->wlist, nw = 0;
  size_t cap = s->wid_cap;
  for (size_t i = 0; i < n; i++) {
    const uint32_t w = tok[i].word;
    if (w >= cap) {
      if ((rc = ensure_wid(s, (size_t)w + 1))) break;
      wcount = s->wcount;
      cap = s->wid_cap;
    }
    if (wcount[w]++ == 0) wlist[nw++] = w;
  }
  if (!rc) rc = reserve((void **)&s->words, nw, &s->words_cap, sizeof *s->words);
  if (!rc && K > SPARSE_K)
    rc = reserve((void **)&s->bits, (size_t)nw * s->kw, &s->bits_cap, sizeof *s->bits);
  /* every count back to 0 for the next call, whatever happens here */
  uint32_t run = 0;
  for (uint32_t j = 0; j < nw; j++) {
    const uint32_t w = wlist[j], c = wcount[w];
    wcount[w] = 0;
    if (rc) continue;
    if (c & FROZEN) {
      rc =
          strata_err_set(STRATA_EINVAL, "lda warp: word %u has 2^31 tokens or more in one call", w);
      continue;
    }
    s->words[j].start = run;
    s->words[j].c = c;
    s->wfill[w] = (warp_tok){.unit = run, .start = run, .c = c, .j = j};
    run += c;
  }
  if (rc) return rc;
  warp_word *words = s->words;
  for (uint32_t j = 0; j < nw; j++) {
    const uint32_t w = wlist[j];
    if ((rc = word_scan(s, w, nwk + (size_t)w * K, j))) return rc;
    if (words[j].n > words[j].c) s->wfill[w].c |= FROZEN;
  }
  warp_tok *ttok = s->ttok, *wfill = s->wfill;
  uint16_t *unit = s->unit;
  for (size_t i = 0; i < n; i++) {
    const uint32_t t = z[tok[i].slot];
    if (t >= K)
      return strata_err_set(STRATA_ERANGE, "lda warp: token %zu has topic %u of K = %u", i, t, K);
    warp_tok *f = &wfill[tok[i].word];
    ttok[i] = *f;
    unit[f->unit++] = (uint16_t)t;
  }
  size_t used = 0;
  for (uint32_t j = 0; j < nw; j++) {
    const uint32_t w = wlist[j];
    if (words[j].n > words[j].c && (rc = word_alias(s, w, nwk + (size_t)w * K, j, &used)))
      return rc;
  }
  return 0;
}

/* ---- random numbers ----------------------------------------------------- */

/*
 * A token takes 4 uniforms per step, so the sampler draws them 4 at a time:
 * four xoshiro256** streams side by side in vectors (one AVX2 register
 * each; two SSE2 registers without AVX), seeded from 4 draws of the
 * caller's generator at the start of every call, a block of tokens' worth
 * at a time.
 * Doubles come from the top 52 bits (exponent set, minus 1): uniform in
 * [0, 1) on a grid of 2^-52. Against strata_rng_uniform per draw: 90 fewer
 * instructions a token, 3% faster on a corpus that fits in cache, no
 * difference measured where memory sets the pace.
 */
typedef uint64_t v4u __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));

typedef struct warp_rng {
  v4u s0, s1, s2, s3;
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
}

/* The next n uniforms (n a multiple of 4) into out. */
static void urng_fill(warp_rng *r, double *out, size_t n) {
  v4u s0 = r->s0, s1 = r->s1, s2 = r->s2, s3 = r->s3;
  const v4u one = {0x3ff0000000000000ull, 0x3ff0000000000000ull, 0x3ff0000000000000ull,
                   0x3ff0000000000000ull};
  for (size_t i = 0; i < n; i += 4) {
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
    memcpy(out + i, &u, sizeof u);
  }
  r->s0 = s0;
  r->s1 = s1;
  r->s2 = s2;
  r->s3 = s3;
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

/*
 * Stage one of the pipeline, for tokens [j0, j1) (a block): their
 * proposals drawn, as codes: a position in unit[] (word) or z (document),
 * whose topic is read when the token's turn comes (it may change
 * meanwhile), or ~topic for a topic that does not depend on the state
 * (uniform, or the frozen part of a word); and what they will read
 * fetched: the units, the word counts of the token's topic and of the
 * topics its document proposals hold now, its document's row and slots.
 * Which random numbers a token gets does not depend on the state, so
 * drawing them a block early changes nothing but the order of the stream.
 * u holds 4 x steps uniforms per token of the block: for each step the
 * word and document draws, then the two acceptance tests (read in stage
 * two).
 */
/* The document of the token drawn last, and its slots. */
typedef struct draw_doc {
  uint32_t doc;
  uint64_t off, len;
  double lk;
} draw_doc;

static inline __attribute__((always_inline)) void draw_block(
    const strata_lda_warp *s, const strata_lda_token *tok, size_t j0, size_t j1,
    const uint64_t *doc_off, const int32_t *ndk, const uint16_t *z, const float *nwk,
    int64_t *codes, const double *u, draw_doc *dd, const uint32_t steps) {
  const uint32_t K = s->K;
  const bool sparse = K > SPARSE_K;
  const double kbeta = s->kbeta, kalpha = s->kalpha, inv_alpha = s->inv_alpha,
               inv_beta = s->inv_beta;
  const warp_tok *ttok = s->ttok;
  uint32_t ddoc = dd->doc;
  uint64_t off = dd->off, len = dd->len;
  double lk = dd->lk;
  for (size_t j = j0; j < j1; j++, u += 4 * steps) {
    const strata_lda_token tk = tok[j];
    int64_t *code = codes + (j % RING) * 2 * steps;
    if (tk.doc != ddoc) {
      ddoc = tk.doc;
      off = doc_off[tk.doc];
      const uint64_t end = doc_off[tk.doc + 1];
      len = end > off ? end - off : 0;
      lk = (double)len + kalpha;
      /* the document's slots, which its proposals draw from */
      const char *zp = (const char *)(z + off);
      for (size_t l = 0; l < len * sizeof *z && l < PF_ZLINES * 64; l += 64)
        __builtin_prefetch(zp + l);
    }
    const warp_tok tt = ttok[j];
    const uint32_t wc = tt.c & ~FROZEN;
    const warp_word *ww = tt.c & FROZEN ? &s->words[tt.j] : NULL;
    const double wn = ww ? ww->n : (double)wc, wtot = wn + kbeta;
    const float *row = nwk + (size_t)tk.word * K;
    const uint64_t *wb = sparse ? s->bits + (size_t)tt.j * s->kw : NULL;
    if (sparse) __builtin_prefetch(wb);
    const uint32_t s0 = z[tk.slot];
    if (s0 < K) {
      __builtin_prefetch(row + s0);
      __builtin_prefetch(ndk + (size_t)tk.doc * K + s0);
    }
    for (uint32_t step = 0; step < steps; step++) {
      double x = u[4 * step] * wtot;
      if (x < (double)wc) {
        /* c >= 1: the token is a unit of its word */
        const uint32_t i = (uint32_t)x;
        const uint32_t p = tt.start + (i < wc ? i : wc - 1);
        code[2 * step] = p;
        __builtin_prefetch(s->unit + p);
      } else if (x < wn) {
        const warp_alias *wa = s->alias + ww->aoff;
        const double y = (x - (double)wc) * ww->scale;
        uint32_t i = (uint32_t)y;
        if (i >= ww->na) i = ww->na - 1;
        code[2 * step] = ~(int64_t)(y - i < wa[i].thr ? wa[i].top : wa[i].alt);
      } else {
        const uint32_t t = (uint32_t)((x - wn) * inv_beta);
        code[2 * step] = ~(int64_t)(t < K ? t : K - 1);
      }
      x = u[4 * step + 1] * lk;
      if (x < (double)len) {
        const uint64_t i = (uint64_t)x;
        const uint64_t p = off + (i < len ? i : len - 1);
        code[2 * step + 1] = (int64_t)p;
        const uint32_t t = z[p];
        if (t < K && (!sparse || has_topic(wb, t))) __builtin_prefetch(row + t);
      } else {
        const uint32_t t = (uint32_t)((x - (double)len) * inv_alpha);
        code[2 * step + 1] = ~(int64_t)(t < K ? t : K - 1);
      }
    }
  }
  *dd = (draw_doc){ddoc, off, len, lk};
}

/*
 * The sweep after its checks; inlined for steps = 1 and 2 (constants, the
 * loops unrolled) and for any. Tokens go through in blocks of BLK: the
 * next block's proposals are drawn (draw_block), then this block's tokens
 * sampled, each from the counts as they are at its turn.
 *
 * During a token's chain of proposals its topic in z and unit[] stays s0
 * (the counts keep it there too): a proposal that lands on the token
 * itself reads its current topic instead, and z, unit[] and the counts
 * change once, when the chain ends away from s0. A token that stays
 * writes nothing.
 */
static inline __attribute__((always_inline)) int sweep_run(
    strata_lda_warp *s, const strata_lda_token *tok, size_t n, int32_t *ndk, float *nwk, float *nk,
    uint16_t *z, const uint64_t *doc_off, strata_rng *rng, const uint32_t steps) {
  const uint32_t K = s->K;
  const double alpha = s->alpha, beta = s->beta, vbeta = s->vbeta;
  const uint32_t ncode = 2 * steps, nu = 4 * steps;
  int rc = 0;
  const bool sparse = K > SPARSE_K;
  const warp_tok *ttok = s->ttok;
  uint16_t *unit = s->unit;
  int64_t *ring = s->ring;
  double *ubuf = s->ubuf; /* two blocks of uniforms: this one's and the next's */
  const size_t ublk = (size_t)nu * BLK;
  warp_rng st;
  urng_seed(&st, rng);

  draw_doc dd = {UINT32_MAX, 0, 0, 0};
  urng_fill(&st, ubuf, ublk);
  draw_block(s, tok, 0, n < BLK ? n : BLK, doc_off, ndk, z, nwk, ring, ubuf, &dd, steps);

  uint32_t cur_doc = 0;
  bool in_doc = false;
  uint64_t off = 0, len = 0;
  int32_t *nd = NULL;

  for (size_t i0 = 0, b = 0; i0 < n && !rc; i0 += BLK, b ^= 1) {
    const size_t i1 = n - i0 < BLK ? n : i0 + BLK;
    if (i1 < n) {
      double *un = ubuf + (b ^ 1) * ublk;
      urng_fill(&st, un, ublk);
      draw_block(s, tok, i1, n - i1 < BLK ? n : i1 + BLK, doc_off, ndk, z, nwk, ring, un, &dd,
                 steps);
    }
    const double *u = ubuf + b * ublk;
    for (size_t i = i0; i < i1; i++, u += nu) {
      if (i + PF_C < n) {
        /* the counts its word proposals hold, read at their acceptance
         * (the word's only above SPARSE_K: below, its row is in cache) */
        const int64_t *c = ring + ((i + PF_C) % RING) * ncode;
        const float *prow = nwk + (size_t)tok[i + PF_C].word * K;
        const int32_t *pnd = ndk + (size_t)tok[i + PF_C].doc * K;
        for (uint32_t step = 0; step < steps; step++) {
          int64_t c0 = c[2 * step];
          uint32_t t = c0 >= 0 ? unit[c0] : (uint32_t)~c0;
          if (t < K) {
            __builtin_prefetch(pnd + t);
            if (sparse) __builtin_prefetch(prow + t);
          }
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
      const uint32_t up = ttok[i].unit;
      uint64_t *wb = sparse ? s->bits + (size_t)ttok[i].j * s->kw : NULL;
      const uint32_t s0 = z[slot];
      /* The current topic and its factors in the conditional, the token's
       * own count out of each: document, word and total. */
      const int32_t nds = nd[s0];
      const float nws = row[s0], nks = nk[s0];
      if ((nds < 1) | !(nws >= 1.0f) | !(nks >= 1.0f)) {
        rc = strata_err_set(STRATA_ERANGE,
                            "lda warp: token %zu (doc %u, word %u, topic %u): a count would go "
                            "negative (ndk %d, nwk %g, nk %g)",
                            i, d, w, s0, nds, (double)nws, (double)nks);
        break;
      }
      uint32_t ct = s0;
      double fd = (double)nds - 1.0 + alpha, fw = (double)nws - 1.0 + beta,
             fk = (double)nks - 1.0 + vbeta;
      const int64_t *code = ring + (i % RING) * ncode;
      bool bad = false;
      for (uint32_t step = 0; step < steps; step++) {
        /* Word proposal: its acceptance takes the document and total
         * factors; the word factor only once accepted, for the document
         * proposal that follows. A proposal of the current topic is
         * accepted, changing nothing. */
        int64_t c = code[2 * step];
        uint32_t t = c >= 0 ? (c == (int64_t)up ? ct : unit[c]) : (uint32_t)~c;
        double own = t == s0;
        double pd = (double)nd[t] - own + alpha, pk = (double)nk[t] - own + vbeta;
        if (u[4 * step + 2] * fd * pk < pd * fk) {
          ct = t;
          fd = pd;
          fk = pk;
          fw = (double)row_count(sparse, row, wb, t, s0) - own + beta;
        }
        /* Document proposal: the word and total factors. */
        c = code[2 * step + 1];
        t = c >= 0 ? (c == (int64_t)slot ? ct : z[c]) : (uint32_t)~c;
        if (t >= K) {
          bad = true;
          break;
        }
        own = t == s0;
        double pw = (double)row_count(sparse, row, wb, t, s0) - own + beta;
        pk = (double)nk[t] - own + vbeta;
        if (u[4 * step + 3] * fw * pk < pw * fk) {
          ct = t;
          fw = pw;
          fk = pk;
          if (step + 1 < steps) fd = (double)nd[t] - own + alpha;
        }
      }
      if (bad) {
        rc = strata_err_set(STRATA_ERANGE,
                            "lda warp: document %u (slots [%llu, %llu)) has a topic >= K = %u in z",
                            d, (unsigned long long)off, (unsigned long long)(off + len), K);
        break;
      }
      if (ct != s0) {
        unit[up] = (uint16_t)ct;
        z[slot] = (uint16_t)ct;
        nd[s0]--;
        nd[ct]++;
        row[s0] -= 1.0f;
        row[ct] += 1.0f;
        if (sparse) {
          wb[s0 >> 6] &= ~((uint64_t)(row[s0] == 0) << (s0 & 63));
          wb[ct >> 6] |= (uint64_t)1 << (ct & 63);
        }
        nk[s0] -= 1.0f;
        nk[ct] += 1.0f;
      }
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
  if (s->steps == 1) return sweep_run(s, tok, n, ndk, nwk, nk, z, doc_off, rng, 1);
  if (s->steps == 2) return sweep_run(s, tok, n, ndk, nwk, nk, z, doc_off, rng, 2);
  return sweep_run(s, tok, n, ndk, nwk, nk, z, doc_off, rng, s->steps);
}
