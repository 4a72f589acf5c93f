/*
 * The exact collapsed Gibbs sampler of strata/apps/lda.h, with the bucket
 * decomposition of SparseLDA (Yao, Mimno & McCallum, KDD 2009).
 *
 * For a token (d, w) whose topic has been taken out of the counts,
 *   p(k) ∝ (ndk+α)(nwk+β)/(nk+Vβ)
 *        = αβ/(nk+Vβ)              s: the smoothing bucket, every topic
 *        + ndk β/(nk+Vβ)           r: the document bucket, ndk > 0 only
 *        + (ndk+α) nwk/(nk+Vβ)     q: the word bucket, nwk > 0 only.
 * Per topic the sampler keeps inv[k] = 1/(nk+Vβ) and, for the current
 * document, coef[k] = (ndk+α) inv[k]; s and r are running sums. A token
 * changes two topics (the one it leaves, the one it joins), so keeping all
 * of these costs O(1) per token; entering a document resets the previous
 * document's coefficients and sets the new one's from its ndk row. A draw
 * takes u uniform in [0, q+r+s) and looks in q first (nearly all the mass),
 * then r, then s.
 *
 * The word bucket is where the time goes: q = Σ coef[k] nwk[k] over the
 * word's topics, afresh for every token. A word row takes one of two forms
 * for the length of a call, chosen when the call first meets the word:
 *  - dense (K <= 128, or half its topics nonzero): the caller's float row,
 *    updated in place; q is a plain SIMD multiply-add over all K topics;
 *  - sparse: (count, topic) pairs of its nonzero topics, in a per-call
 *    pool; q multiplies the counts by coef gathered at the topics. The
 *    caller's row gets the live pairs back at the end of the call (or on an
 *    error) and, as it happens, a zero where a topic leaves the word: that
 *    spares most of the cache misses on the big nwk table.
 * Nothing survives a call but scratch memory: inv, the document state and
 * every word form are rebuilt from the caller's counts, which other workers
 * change between calls.
 *
 * Drawing inside q without a second pass. The multiply-add runs in four
 * independent chains of 8-wide double vectors (block j of 8 entries goes
 * to chain j mod 4: no waiting on one long chain of additions), and after
 * every block the chain's running vector is stored in cum[]. The 32
 * columns (lane, chain) then give an order on the entries (lane, chain,
 * block) in which every running total is at hand: the lane is the number
 * of running lane totals at or below u, the chain likewise among the
 * running chain sums of that lane, and the block among the stored cum of
 * that chain and lane. Counting compares instead of branching, so no draw
 * costs a mispredicted branch, and none costs a scan of the entries.
 *
 * Exactness. Every probability is the expression above in double precision
 * from the current counts, with nothing approximated or stale (no
 * Metropolis-Hastings, no alias tables): inv and coef are recomputed from
 * the counts whenever a count changes, never accumulated; q is summed
 * afresh for every token; the running sums s and r are recomputed from
 * scratch when a document is entered (r) and, when a document is entered
 * and at least max(64, K) tokens have passed, s: between recomputations
 * they drift by a few ulps. The only inexactness is rounding: each entry's
 * share of [0, q) is its product up to a few ulps of q, the ordinary
 * accuracy of a floating-point CDF. The three counts of the q draw add the
 * same values in different orders, so at a boundary they can disagree by
 * an ulp; a pick that then lands on an empty or missing entry is caught and
 * redrawn by a plain scan (draw_scan), and the r and s scans take the last
 * topic of their bucket when rounding leaves u just past their total.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define LDA_AVX512 1
#else
#define LDA_AVX512 0
#endif

#include "strata/core.h"
#include "strata/apps/lda.h"

typedef double v8d __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));

/* Builds without AVX-512 pass v8d in memory; every function here that takes
 * or returns one is static and inlined, so no ABI is involved. */
#pragma GCC diagnostic ignored "-Wpsabi"

/* A word row stays dense (q is a gather-free pass over all K topics) when
 * K <= DENSE_K, or when on first sight in a call at least
 * DENSE_NUM/DENSE_DEN of its topics are nonzero; otherwise it becomes a
 * list of nonzero pairs (a gathered pass over those, plus bookkeeping).
 * Measured on the project's machine (Zen 4): at K = 100 dense rows are
 * faster for every word, at K = 400 they are 2.5 times slower for typical
 * words, and at K = 1000 half full is about where the two break even. */
#define DENSE_K 128
#define DENSE_NUM 1
#define DENSE_DEN 2

/* The smoothing bucket s is recomputed when a document is entered after at
 * least this many tokens, and at least K (its cost is O(K)). */
#define S_REFRESH 64

/* cum has room past kpad: sparse words fill whole groups of 32 entries
 * (up to K rounded to 32), and the block search reads 3 or 7 blocks of a
 * chain whatever its length (those past its end masked out). */
#define CUM_SLACK 256

/* Tokens ahead to prefetch word data (word headers: twice as far). */
#define PF_DIST 3

typedef struct word_ix {
  uint32_t off;   /* sparse: block offset in the pool, in 64-byte units */
  uint32_t stamp; /* the call that built this entry; stale otherwise */
  uint32_t len;   /* sparse: nonzero topics */
  uint32_t cap;   /* sparse: room for pairs (a multiple of 32, the pairs
                   * past len zero); 0: dense */
} word_ix;

struct strata_lda_sampler {
  uint32_t K, kpad, kcap; /* K rounded up to 8, and to 32 */
  double alpha, beta, vbeta, ab;
  double *inv;  /* kpad: 1/(nk+Vβ); 0 beyond K */
  double *coef; /* kpad: (ndk+α) inv for the current document; 0 beyond K */
  double *cum;  /* kpad + CUM_SLACK: running chain sums of the word bucket */
  uint16_t *dtop, *dpos; /* the document's nonzero topics (room for K + 16:
                          * whole vectors are stored), and where each is */
  uint32_t dlen;
  word_ix *wix; /* per word id */
  size_t wix_n;
  unsigned char *pool; /* sparse word blocks: cap floats, then cap uint16 */
  size_t pool_cap, pool_used; /* bytes */
  uint16_t *wtmp;    /* K + 16: a word row's nonzero topics, being built */
  uint32_t *touched; /* sparse words of this call, written back at its end */
  size_t touched_n, touched_cap;
  uint32_t stamp;
};

/* ---- small helpers ------------------------------------------------------ */

static inline v8d load8f(const float *p) {
#if LDA_AVX512
  return (v8d)_mm512_cvtps_pd(_mm256_loadu_ps(p));
#else
  v8f v;
  memcpy(&v, p, sizeof v);
  return __builtin_convertvector(v, v8d);
#endif
}

/* coef at 8 topics. Built from scalar loads: on this machine (Zen 4) that
 * has half the cost of vgatherdpd. */
static inline v8d gather8(const double *coef, const uint16_t *top) {
  return (v8d){coef[top[0]], coef[top[1]], coef[top[2]], coef[top[3]],
               coef[top[4]], coef[top[5]], coef[top[6]], coef[top[7]]};
}

/* The last n < 8 floats of a row, without reading past it. */
static inline v8d load8f_tail(const float *p, uint32_t n) {
#if LDA_AVX512
  return (v8d)_mm512_cvtps_pd(_mm256_maskz_loadu_ps((__mmask8)((1u << n) - 1), p));
#else
  float t[8] = {0};
  memcpy(t, p, n * sizeof *t);
  return load8f(t);
#endif
}

/* Inclusive running sums over the 8 lanes (log-step). */
static inline v8d prefix8(v8d x) {
  const v8d zero = {0};
  x += __builtin_shufflevector(x, zero, 8, 0, 1, 2, 3, 4, 5, 6);
  x += __builtin_shufflevector(x, zero, 8, 9, 0, 1, 2, 3, 4, 5);
  x += __builtin_shufflevector(x, zero, 8, 9, 10, 11, 0, 1, 2, 3);
  return x;
}

/*
 * The column of the word bucket where u falls: W holds the running totals
 * over lanes of the chain totals; c0, c1, c2 the running sums over the
 * first one, two, three chains. Returns the lane l, the chain a, the total
 * of the lanes before l (run) and of the chains before a in lane l (base).
 */
static inline void select_column(v8d W, v8d c0, v8d c1, v8d c2, double u, uint32_t *l_out,
                                 uint32_t *a_out, double *run, double *base) {
  const v8d zero = {0};
  const v8d wx = __builtin_shufflevector(W, zero, 8, 0, 1, 2, 3, 4, 5, 6);
#if LDA_AVX512
  const __m512d vu = _mm512_set1_pd(u);
  const __mmask8 mw = _mm512_cmp_pd_mask((__m512d)W, vu, _CMP_LE_OQ);
  const __mmask8 m0 = _mm512_cmp_pd_mask((__m512d)(wx + c0), vu, _CMP_LE_OQ);
  const __mmask8 m1 = _mm512_cmp_pd_mask((__m512d)(wx + c1), vu, _CMP_LE_OQ);
  const __mmask8 m2 = _mm512_cmp_pd_mask((__m512d)(wx + c2), vu, _CMP_LE_OQ);
  const uint32_t l = (uint32_t)__builtin_popcount(mw);
  *l_out = l;
  *a_out = ((m0 >> l) & 1u) + ((m1 >> l) & 1u) + ((m2 >> l) & 1u);
  __m512d bv = _mm512_mask_blend_pd(m0, _mm512_setzero_pd(), (__m512d)c0);
  bv = _mm512_mask_blend_pd(m1, bv, (__m512d)c1);
  bv = _mm512_mask_blend_pd(m2, bv, (__m512d)c2);
  const __m512i li = _mm512_set1_epi64((long long)l);
  *run = _mm512_cvtsd_f64(_mm512_permutexvar_pd(li, (__m512d)wx));
  *base = _mm512_cvtsd_f64(_mm512_permutexvar_pd(li, bv));
#else
  uint32_t l = 0;
  for (int i = 0; i < 8; i++) l += W[i] <= u;
  *l_out = l;
  const double r = wx[l];
  uint32_t a = (r + c0[l] <= u) + (r + c1[l] <= u) + (r + c2[l] <= u);
  *a_out = a;
  *run = r;
  *base = a == 0 ? 0.0 : a == 1 ? c0[l] : a == 2 ? c1[l] : c2[l];
#endif
}

/* a[i] = x for a 64-byte aligned double array, as a whole-vector
 * read-modify-write: the word bucket's vector loads that follow can then
 * take the value straight from the store. */
static inline void set_d(double *a, uint32_t i, double x) {
#if LDA_AVX512
  double *b = a + (i & ~7u);
  __m512d v = _mm512_load_pd(b);
  v = _mm512_mask_broadcastsd_pd(v, (__mmask8)(1u << (i & 7)), _mm_set_sd(x));
  _mm512_store_pd(b, v);
#else
  a[i] = x;
#endif
}

/* a[i] = x likewise for 8-float blocks, where the block lies below lim. */
static inline void set_f(float *a, uint32_t i, float x, uint32_t lim) {
#if LDA_AVX512
  uint32_t b = i & ~7u;
  if (b + 8 <= lim) {
    __m256 v = _mm256_loadu_ps(a + b);
    v = _mm256_mask_broadcastss_ps(v, (__mmask8)(1u << (i & 7)), _mm_set_ss(x));
    _mm256_storeu_ps(a + b, v);
    return;
  }
#endif
  a[i] = x;
}

/* The word-bucket draw as a plain sequential scan: entry e of n weighs
 * coef[topic] * cnt[e] (topic = top[e], or e when top is NULL); picks the
 * entry where the fraction frac of the total falls, never an empty one. */
static uint32_t draw_scan(const double *coef, const float *cnt, const uint16_t *top, uint32_t n,
                          double frac) {
  double total = 0;
  for (uint32_t e = 0; e < n; e++) total += coef[top ? top[e] : e] * (double)cnt[e];
  double x = frac * total, acc = 0;
  uint32_t last = 0;
  for (uint32_t e = 0; e < n; e++) {
    double pr = coef[top ? top[e] : e] * (double)cnt[e];
    if (!(pr > 0)) continue;
    acc += pr;
    last = e;
    if (x < acc) break;
  }
  return last;
}

/* Position of topic t among top[0..len), or -1. */
static inline long find_topic(const uint16_t *top, uint32_t len, uint32_t t) {
#if LDA_AVX512
  __m512i vt = _mm512_set1_epi16((short)t);
  for (uint32_t i = 0; i < len; i += 32) {
    __mmask32 m = len - i >= 32 ? 0xffffffffu : ((1u << (len - i)) - 1u);
    __m512i v = _mm512_maskz_loadu_epi16(m, top + i);
    __mmask32 hit = _mm512_mask_cmpeq_epi16_mask(m, v, vt);
    if (hit) return (long)(i + (uint32_t)__builtin_ctz(hit));
  }
  return -1;
#else
  for (uint32_t i = 0; i < len; i++)
    if (top[i] == t) return (long)i;
  return -1;
#endif
}

static inline float *word_cnt(const strata_lda_sampler *s, const word_ix *wx) {
  return (float *)(s->pool + (size_t)wx->off * 64);
}

static inline uint16_t *word_top(const strata_lda_sampler *s, const word_ix *wx) {
  return (uint16_t *)(s->pool + (size_t)wx->off * 64 + (size_t)wx->cap * sizeof(float));
}

static double sum_inv(const strata_lda_sampler *s) {
  const v8d *x = (const v8d *)s->inv;
  v8d a0 = {0}, a1 = {0};
  uint32_t nb = s->kpad / 8, j = 0;
  for (; j + 1 < nb; j += 2) {
    a0 += x[j];
    a1 += x[j + 1];
  }
  if (j < nb) a0 += x[j];
  a0 += a1;
  double t = 0;
  for (int l = 0; l < 8; l++) t += a0[l];
  return t;
}

/* The indices of the nonzero entries of x[0..K) into out (room for K + 16
 * entries: whole vectors are stored), in order; -1 if any entry is
 * negative. */
static long nonzero_i(const int32_t *x, uint32_t K, uint16_t *out) {
#if LDA_AVX512
  __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i step = _mm512_set1_epi32(16), zero = _mm512_setzero_si512();
  __mmask16 bad = 0;
  uint32_t n = 0;
  for (uint32_t k = 0; k < K; k += 16) {
    __mmask16 m = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1);
    __m512i v = _mm512_maskz_loadu_epi32(m, x + k);
    __mmask16 nz = _mm512_mask_test_epi32_mask(m, v, v);
    bad |= _mm512_mask_cmplt_epi32_mask(m, v, zero);
    _mm256_storeu_si256((__m256i *)(out + n),
                        _mm512_cvtepi32_epi16(_mm512_maskz_compress_epi32(nz, idx)));
    n += (uint32_t)__builtin_popcount(nz);
    idx = _mm512_add_epi32(idx, step);
  }
  return bad ? -1 : (long)n;
#else
  uint32_t n = 0;
  for (uint32_t k = 0; k < K; k++) {
    if (x[k] < 0) return -1;
    if (x[k]) out[n++] = (uint16_t)k;
  }
  return (long)n;
#endif
}

/* The same for a float row; -1 if any entry is negative, infinite or NaN. */
static long nonzero_f(const float *x, uint32_t K, uint16_t *out) {
#if LDA_AVX512
  __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i step = _mm512_set1_epi32(16);
  const __m512 zero = _mm512_setzero_ps(), inf = _mm512_set1_ps(INFINITY);
  __mmask16 bad = 0;
  uint32_t n = 0;
  for (uint32_t k = 0; k < K; k += 16) {
    __mmask16 m = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1);
    __m512 v = _mm512_maskz_loadu_ps(m, x + k);
    __mmask16 ok = _mm512_mask_cmp_ps_mask(m, v, zero, _CMP_GE_OQ) &
                   _mm512_mask_cmp_ps_mask(m, v, inf, _CMP_LT_OQ);
    bad |= m & (__mmask16)~ok;
    __mmask16 nz = _mm512_mask_cmp_ps_mask(m, v, zero, _CMP_NEQ_UQ);
    _mm256_storeu_si256((__m256i *)(out + n),
                        _mm512_cvtepi32_epi16(_mm512_maskz_compress_epi32(nz, idx)));
    n += (uint32_t)__builtin_popcount(nz);
    idx = _mm512_add_epi32(idx, step);
  }
  return bad ? -1 : (long)n;
#else
  uint32_t n = 0;
  for (uint32_t k = 0; k < K; k++) {
    if (!(x[k] >= 0 && x[k] < INFINITY)) return -1;
    if (x[k] != 0) out[n++] = (uint16_t)k;
  }
  return (long)n;
#endif
}

/* The smoothing-bucket draw: the topic k where x falls in the running sums
 * of inv[0..K) (zero up to kpad). Whole groups of 64 are skipped on their
 * sums, then blocks of 8 on running sums. Every topic has mass here, so
 * rounding past the end just means the last one. */
static uint32_t draw_smooth(const double *inv, uint32_t K, uint32_t kpad, double x) {
  const v8d *iv = (const v8d *)inv;
  double acc = 0;
  uint32_t b = 0, nb = kpad / 8;
  for (; b + 8 <= nb; b += 8) {
    v8d g = ((iv[b] + iv[b + 1]) + (iv[b + 2] + iv[b + 3])) +
            ((iv[b + 4] + iv[b + 5]) + (iv[b + 6] + iv[b + 7]));
    double gs = ((g[0] + g[1]) + (g[2] + g[3])) + ((g[4] + g[5]) + (g[6] + g[7]));
    if (x < acc + gs) break;
    acc += gs;
  }
  for (; b < nb; b++) {
    v8d p = prefix8(iv[b]);
    uint32_t c = 0;
    for (int l = 0; l < 8; l++) c += acc + p[l] <= x;
    if (c < 8) {
      uint32_t k = 8 * b + c;
      return k < K ? k : K - 1;
    }
    acc += p[7];
  }
  return K - 1;
}

/* ---- lifecycle ---------------------------------------------------------- */

int strata_lda_sampler_new(const strata_lda_params *p, strata_lda_sampler **out) {
  if (!out) return strata_err_set(STRATA_EINVAL, "lda sampler: no output pointer");
  *out = NULL;
  if (!p) return strata_err_set(STRATA_EINVAL, "lda sampler: no parameters");
  if (p->K < 1 || p->K > UINT16_MAX)
    return strata_err_set(STRATA_EINVAL, "lda sampler: K = %u topics (need 1..%u: z is uint16)",
                          p->K, (unsigned)UINT16_MAX);
  if (p->V < 1) return strata_err_set(STRATA_EINVAL, "lda sampler: V = 0 words");
  if (!(p->alpha > 0) || !isfinite(p->alpha))
    return strata_err_set(STRATA_EINVAL, "lda sampler: alpha = %g (need a finite value > 0)",
                          p->alpha);
  if (!(p->beta > 0) || !isfinite(p->beta))
    return strata_err_set(STRATA_EINVAL, "lda sampler: beta = %g (need a finite value > 0)",
                          p->beta);

  strata_lda_sampler *s = strata_calloc(1, sizeof *s);
  if (!s) goto fail;
  s->K = p->K;
  s->kpad = (uint32_t)strata_round_up(p->K, 8);
  s->kcap = (uint32_t)strata_round_up(p->K, 32);
  s->alpha = p->alpha;
  s->beta = p->beta;
  s->vbeta = (double)p->V * p->beta;
  s->ab = p->alpha * p->beta;
  size_t vb = (size_t)s->kpad * sizeof(double);
  s->inv = strata_alloc_aligned(vb);
  s->coef = strata_alloc_aligned(vb);
  s->cum = strata_alloc_aligned(vb + CUM_SLACK * sizeof(double));
  s->dtop = strata_malloc(((size_t)s->K + 16) * sizeof(uint16_t));
  s->wtmp = strata_malloc(((size_t)s->K + 16) * sizeof(uint16_t));
  s->dpos = strata_malloc((size_t)s->K * sizeof(uint16_t));
  if (!s->inv || !s->coef || !s->cum || !s->dtop || !s->dpos || !s->wtmp) goto fail;
  memset(s->inv, 0, vb);
  memset(s->coef, 0, vb);
  memset(s->cum, 0, vb + CUM_SLACK * sizeof(double));
  *out = s;
  return 0;

fail:
  strata_lda_sampler_free(s);
  return strata_err_set(STRATA_ENOMEM, "lda sampler: out of memory for K = %u", p->K);
}

void strata_lda_sampler_free(strata_lda_sampler *s) {
  if (!s) return;
  strata_free(s->inv);
  strata_free(s->coef);
  strata_free(s->cum);
  strata_free(s->dtop);
  strata_free(s->dpos);
  strata_free(s->wtmp);
  strata_free(s->wix);
  strata_free(s->pool);
  strata_free(s->touched);
  strata_free(s);
}

/* ---- per-call scratch --------------------------------------------------- */

static int ensure_words(strata_lda_sampler *s, size_t nw) {
  if (nw > s->wix_n) {
    size_t n = s->wix_n ? s->wix_n : 1024;
    while (n < nw) n *= 2;
    word_ix *x = strata_realloc(s->wix, n * sizeof *x);
    if (!x) return strata_err_set(STRATA_ENOMEM, "lda sampler: out of memory for %zu words", n);
    memset(x + s->wix_n, 0, (n - s->wix_n) * sizeof *x);
    s->wix = x;
    s->wix_n = n;
  }
  if (s->wix_n > s->touched_cap) {
    uint32_t *t = strata_realloc(s->touched, s->wix_n * sizeof *t);
    if (!t) return strata_err_set(STRATA_ENOMEM, "lda sampler: out of memory for %zu words", nw);
    s->touched = t;
    s->touched_cap = s->wix_n;
  }
  return 0;
}

/* Takes room for cap pairs from the pool; returns the block offset in
 * 64-byte units, or a negative error. The pool may move. */
static long long pool_take(strata_lda_sampler *s, uint32_t cap) {
  size_t bytes = strata_round_up((size_t)cap * (sizeof(float) + sizeof(uint16_t)), 64);
  if (s->pool_used + bytes > s->pool_cap) {
    size_t n = s->pool_cap ? s->pool_cap : (size_t)1 << 20;
    while (n < s->pool_used + bytes) n *= 2;
    if (n / 64 > UINT32_MAX) return strata_err_set(STRATA_ENOMEM, "lda sampler: word pool too big");
    unsigned char *p = strata_alloc_aligned(n);
    if (!p) return strata_err_set(STRATA_ENOMEM, "lda sampler: out of memory (%zu bytes)", n);
    if (s->pool_used) memcpy(p, s->pool, s->pool_used);
    strata_free(s->pool);
    s->pool = p;
    s->pool_cap = n;
  }
  size_t off = s->pool_used;
  s->pool_used += bytes;
  return (long long)(off / 64);
}

/* First sight of word w in this call: dense, or its nonzero pairs. */
static int word_build(strata_lda_sampler *s, uint32_t w, const float *row) {
  const uint32_t K = s->K;
  long n = nonzero_f(row, K, s->wtmp);
  if (n < 0) {
    for (uint32_t k = 0; k < K; k++) {
      if (!(row[k] >= 0 && row[k] < INFINITY))
        return strata_err_set(STRATA_ERANGE, "lda sampler: nwk[%u][%u] = %g is not a count", w,
                              k, (double)row[k]);
    }
    return STRATA_ERANGE;
  }
  const uint32_t nnz = (uint32_t)n;
  word_ix *wx = &s->wix[w];
  if (K <= DENSE_K || (uint64_t)nnz * DENSE_DEN >= (uint64_t)K * DENSE_NUM) {
    wx->cap = 0;
    wx->stamp = s->stamp;
    return 0;
  }
  uint32_t cap = (uint32_t)strata_round_up((size_t)nnz + nnz / 2 + 8, 32);
  if (cap > s->kcap) cap = s->kcap;
  long long off = pool_take(s, cap);
  if (off < 0) return (int)off;
  wx->off = (uint32_t)off;
  wx->cap = cap;
  wx->len = nnz;
  wx->stamp = s->stamp;
  float *cnt = word_cnt(s, wx);
  uint16_t *top = word_top(s, wx);
  memcpy(top, s->wtmp, nnz * sizeof *top);
  for (uint32_t e = 0; e < nnz; e++) cnt[e] = row[top[e]];
  memset(cnt + nnz, 0, (cap - nnz) * sizeof *cnt);
  memset(top + nnz, 0, (cap - nnz) * sizeof *top);
  s->touched[s->touched_n++] = w;
  return 0;
}

/* A sparse word outgrew its block: move it to one twice the size. */
static int word_grow(strata_lda_sampler *s, word_ix *wx) {
  uint32_t cap = wx->cap * 2 > s->kcap ? s->kcap : wx->cap * 2;
  long long off = pool_take(s, cap);
  if (off < 0) return (int)off;
  const float *oc = word_cnt(s, wx);
  const uint16_t *ot = word_top(s, wx);
  word_ix nx = {.off = (uint32_t)off, .stamp = wx->stamp, .len = wx->len, .cap = cap};
  float *nc = word_cnt(s, &nx);
  uint16_t *nt = word_top(s, &nx);
  memcpy(nc, oc, wx->len * sizeof *nc);
  memcpy(nt, ot, wx->len * sizeof *nt);
  memset(nc + wx->len, 0, (cap - wx->len) * sizeof *nc);
  memset(nt + wx->len, 0, (cap - wx->len) * sizeof *nt);
  *wx = nx;
  return 0;
}

/* Sparse words go back into the caller's rows: topics that left a word
 * were zeroed there as they left, so the live pairs are all there is. */
static void words_write_back(strata_lda_sampler *s, float *nwk) {
  uint32_t K = s->K;
  for (size_t i = 0; i < s->touched_n; i++) {
    uint32_t w = s->touched[i];
    const word_ix *wx = &s->wix[w];
    float *row = nwk + (size_t)w * K;
    const float *cnt = word_cnt(s, wx);
    const uint16_t *top = word_top(s, wx);
    for (uint32_t e = 0; e < wx->len; e++) row[top[e]] = cnt[e];
  }
  s->touched_n = 0;
}

/* Leaves the previous document (its coefficients back to α inv) and enters
 * the one whose counts are nd; returns its r. */
static int doc_enter(strata_lda_sampler *s, const int32_t *nd, uint32_t d, double *r_out) {
  const double alpha = s->alpha;
  double *inv = s->inv, *coef = s->coef;
  uint16_t *dtop = s->dtop, *dpos = s->dpos;
  for (uint32_t i = 0; i < s->dlen; i++) {
    uint32_t k = dtop[i];
    coef[k] = alpha * inv[k];
  }
  s->dlen = 0;
  const uint32_t K = s->K;
  long n = nonzero_i(nd, K, dtop);
  if (n < 0) {
    uint32_t k = 0;
    while (k + 1 < K && nd[k] >= 0) k++;
    return strata_err_set(STRATA_ERANGE, "lda sampler: ndk[%u][%u] = %d is negative", d, k, nd[k]);
  }
  double r = 0;
  for (uint32_t i = 0; i < (uint32_t)n; i++) {
    uint32_t k = dtop[i];
    int32_t v = nd[k];
    dpos[k] = (uint16_t)i;
    coef[k] = ((double)v + alpha) * inv[k];
    r += (double)v * inv[k];
  }
  s->dlen = (uint32_t)n;
  *r_out = r * s->beta;
  return 0;
}

/* ---- the sweep ---------------------------------------------------------- */

int strata_lda_sweep(strata_lda_sampler *s, const strata_lda_token *tok, size_t n, int32_t *ndk,
                     float *nwk, float *nk, uint16_t *z, strata_rng *rng) {
  if (!s) return strata_err_set(STRATA_EINVAL, "lda sweep: no sampler");
  if (n == 0) return 0;
  if (!tok || !ndk || !nwk || !nk || !z || !rng)
    return strata_err_set(STRATA_EINVAL, "lda sweep: a NULL array with %zu tokens", n);

  const uint32_t K = s->K;
  const double alpha = s->alpha, beta = s->beta, vbeta = s->vbeta, ab = s->ab;
  double *restrict inv = s->inv, *restrict coef = s->coef, *restrict cum = s->cum;
  uint16_t *restrict dtop = s->dtop, *restrict dpos = s->dpos;
  int rc = 0;

  uint32_t maxw = 0;
  for (size_t i = 0; i < n; i++)
    if (tok[i].word > maxw) maxw = tok[i].word;
  rc = ensure_words(s, (size_t)maxw + 1);
  if (rc) return rc;
  if (++s->stamp == 0) {
    for (size_t i = 0; i < s->wix_n; i++) s->wix[i].stamp = 0;
    s->stamp = 1;
  }
  const uint32_t stamp = s->stamp;
  s->pool_used = 0;
  s->touched_n = 0;
  s->dlen = 0;

  for (uint32_t k = 0; k < K; k++) {
    if (!(nk[k] >= 0) || !isfinite(nk[k]))
      return strata_err_set(STRATA_ERANGE, "lda sweep: nk[%u] = %g is not a count", k,
                            (double)nk[k]);
    inv[k] = 1.0 / ((double)nk[k] + vbeta);
    coef[k] = alpha * inv[k];
  }
  double sab = ab * sum_inv(s), r = 0;
  size_t since_s = 0;

  strata_rng st = *rng; /* a local copy stays in registers */
  word_ix *restrict wix = s->wix;
  bool in_doc = false;
  uint32_t cur_doc = 0, dlen = 0;
  int32_t *nd = NULL;

  for (size_t i = 0; i < n; i++) {
    const uint32_t d = tok[i].doc, w = tok[i].word, slot = tok[i].slot;

    /* The word data of the next tokens come from all over memory. A fixed
     * number of lines: a loop here costs mispredicted exits. Addresses are
     * integers until the prefetch: they may run past the row. */
    if (i + 2 * PF_DIST < n) __builtin_prefetch(&wix[tok[i + 2 * PF_DIST].word]);
    if (i + PF_DIST < n) {
      const uint32_t pw = tok[i + PF_DIST].word;
      const word_ix *px = &wix[pw];
      if (px->stamp == stamp) {
        uintptr_t b = px->cap ? (uintptr_t)s->pool + (uintptr_t)px->off * 64
                              : (uintptr_t)(nwk + (size_t)pw * K);
        uintptr_t b2 = px->cap ? b + (uintptr_t)px->cap * sizeof(float) : b + 256;
        __builtin_prefetch((const void *)b);
        __builtin_prefetch((const void *)(b + 64));
        __builtin_prefetch((const void *)(b + 128));
        __builtin_prefetch((const void *)(b + 192));
        __builtin_prefetch((const void *)b2);
        __builtin_prefetch((const void *)(b2 + 64));
        __builtin_prefetch((const void *)(b2 + 128));
        __builtin_prefetch((const void *)(b2 + 192));
      }
    }

    if (!in_doc || d != cur_doc) {
      if (since_s >= S_REFRESH && since_s >= K) {
        sab = ab * sum_inv(s);
        since_s = 0;
      }
      nd = ndk + (size_t)d * K;
      s->dlen = dlen;
      rc = doc_enter(s, nd, d, &r);
      dlen = s->dlen;
      if (rc) {
        in_doc = false;
        goto out;
      }
      in_doc = true;
      cur_doc = d;
    }
    since_s++;

    word_ix *wx = &wix[w];
    if (wx->stamp != stamp) {
      rc = word_build(s, w, nwk + (size_t)w * K);
      if (rc) goto out;
    }
    const uint32_t t = z[slot];
    if (t >= K) {
      rc = strata_err_set(STRATA_ERANGE, "lda sweep: token %zu has topic %u of K = %u", i, t, K);
      goto out;
    }
    const bool dense = wx->cap == 0;
    /* Room for one more pair before anything changes, so that running out
     * of memory leaves this token's counts as they were. */
    if (!dense && wx->len == wx->cap && wx->cap < s->kcap) {
      rc = word_grow(s, wx);
      if (rc) goto out;
    }
    float *row = NULL, *cnt = NULL;
    uint16_t *top = NULL;
    long pt = -1;
    float ct;
    if (dense) {
      row = nwk + (size_t)w * K;
      ct = row[t];
    } else {
      cnt = word_cnt(s, wx);
      top = word_top(s, wx);
      pt = find_topic(top, wx->len, t);
      ct = pt >= 0 ? cnt[pt] : 0.0f;
    }
    if (nd[t] < 1 || !(ct >= 1.0f) || !(nk[t] >= 1.0f)) {
      rc = strata_err_set(STRATA_ERANGE,
                          "lda sweep: token %zu (doc %u, word %u, topic %u): a count would go "
                          "negative (ndk %d, nwk %g, nk %g)",
                          i, d, w, t, nd[t], (double)ct, (double)nk[t]);
      goto out;
    }

    /* Take the token out. */
    {
      int32_t ndo = nd[t], ndn = ndo - 1;
      nd[t] = ndn;
      float nkn = nk[t] - 1.0f;
      nk[t] = nkn;
      double io = inv[t], in = 1.0 / ((double)nkn + vbeta);
      inv[t] = in;
      sab += ab * (in - io);
      r += beta * ((double)ndn * in - (double)ndo * io);
      set_d(coef, t, ((double)ndn + alpha) * in);
      {
        /* Branch-free: whether t leaves the document is a coin toss. */
        const uint32_t gone = ndn == 0, p = dpos[t], last = dtop[dlen - 1];
        dtop[p] = (uint16_t)(gone ? last : dtop[p]);
        dpos[last] = (uint16_t)(gone ? p : dpos[last]);
        dlen -= gone;
        r = dlen ? r : 0.0;
      }
      if (dense) {
        set_f(row, t, ct - 1.0f, K);
      } else if (ct - 1.0f != 0) {
        set_f(cnt, (uint32_t)pt, ct - 1.0f, wx->cap);
      } else {
        /* The pair goes; its zero goes to the caller's row at once, so
         * that the write-back at the end of the call is the live pairs
         * alone, not a sweep over K. */
        nwk[(size_t)w * K + t] = 0;
        uint32_t last = --wx->len;
        cnt[pt] = cnt[last];
        top[pt] = top[last];
        cnt[last] = 0;
        top[last] = 0;
      }
    }

    /* The word bucket: four chains of 8-wide running sums, stored. */
    v8d a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    uint32_t nb;
    if (dense) {
      const uint32_t nfull = K / 8;
      uint32_t j = 0;
      for (; j + 4 <= nfull; j += 4) {
        const double *c = coef + 8 * j;
        const float *x = row + 8 * j;
        a0 += *(const v8d *)c * load8f(x);
        *(v8d *)(cum + 8 * j) = a0;
        a1 += *(const v8d *)(c + 8) * load8f(x + 8);
        *(v8d *)(cum + 8 * j + 8) = a1;
        a2 += *(const v8d *)(c + 16) * load8f(x + 16);
        *(v8d *)(cum + 8 * j + 16) = a2;
        a3 += *(const v8d *)(c + 24) * load8f(x + 24);
        *(v8d *)(cum + 8 * j + 24) = a3;
      }
      nb = (K + 7) / 8;
      for (; j < nb; j++) {
        v8d x = j < nfull ? load8f(row + 8 * j) : load8f_tail(row + 8 * j, K - 8 * j);
        v8d pr = *(const v8d *)(coef + 8 * j) * x;
        switch (j & 3) {
        case 0: a0 += pr; *(v8d *)(cum + 8 * j) = a0; break;
        case 1: a1 += pr; *(v8d *)(cum + 8 * j) = a1; break;
        case 2: a2 += pr; *(v8d *)(cum + 8 * j) = a2; break;
        default: a3 += pr; *(v8d *)(cum + 8 * j) = a3; break;
        }
      }
    } else {
      /* Whole groups of 4 blocks: the zero pairs past len make up the
       * last group, and no remainder loop costs a mispredicted exit. */
      nb = (wx->len + 31) / 32 * 4;
      for (uint32_t j = 0; j < nb; j += 4) {
        const float *x = cnt + 8 * j;
        const uint16_t *tp = top + 8 * j;
        a0 += gather8(coef, tp) * load8f(x);
        *(v8d *)(cum + 8 * j) = a0;
        a1 += gather8(coef, tp + 8) * load8f(x + 8);
        *(v8d *)(cum + 8 * j + 8) = a1;
        a2 += gather8(coef, tp + 16) * load8f(x + 16);
        *(v8d *)(cum + 8 * j + 16) = a2;
        a3 += gather8(coef, tp + 24) * load8f(x + 24);
        *(v8d *)(cum + 8 * j + 24) = a3;
      }
    }
    /* Column totals: lane l of chain a is column (l, a); W holds the
     * running totals over lanes. */
    const v8d p1 = a0 + a1, p2 = p1 + a2, tl = p2 + a3;
    const v8d W = prefix8(tl);
    const double q = W[7];

    const double u = strata_rng_uniform(&st) * (q + r + sab);
    uint32_t k;
    long pk = -1; /* sparse: position of k among the pairs, when known */
    if (u < q) {
      /* Lane, chain and block by counting running totals at or below u;
       * chains hold at most 4 blocks for K <= 128 or words of <= 128
       * topics, at most 8 up to 256. */
      uint32_t l, a;
      double run, base;
      select_column(W, a0, p1, p2, u, &l, &a, &run, &base);
      const uint32_t m_n = nb > a ? (nb - a + 3) / 4 : 0;
      const double *cb = cum + 8 * a + l; /* block m of the chain at cb[32 m] */
      uint32_t lo = 0;
      if (m_n <= 4) {
        for (uint32_t m = 0; m < 3; m++)
          lo += (m + 1 < m_n) & (run + (base + cb[32 * m]) <= u);
      } else if (m_n <= 8) {
        for (uint32_t m = 0; m < 7; m++)
          lo += (m + 1 < m_n) & (run + (base + cb[32 * m]) <= u);
      } else {
        for (uint32_t len = m_n; len > 1;) {
          uint32_t half = len / 2;
          lo = run + (base + cb[32 * (lo + half - 1)]) <= u ? lo + half : lo;
          len -= half;
        }
      }
      uint32_t e = 8 * (a + 4 * lo) + l;
      /* Rounding can mislead the counts only at a boundary, by an ulp;
       * should that land on an empty or missing entry, scan instead. */
      if (dense) {
        if (m_n == 0 || e >= K || !(row[e] > 0)) e = draw_scan(coef, row, NULL, K, u / q);
        k = e;
      } else {
        if (m_n == 0 || e >= wx->len) e = draw_scan(coef, cnt, top, wx->len, u / q);
        k = top[e];
        pk = (long)e;
      }
    } else {
      double v = u - q;
      if (v < r && dlen) {
        double acc = 0;
        uint32_t i2 = 0, last = dlen - 1;
        for (; i2 < last; i2++) {
          uint32_t kk = dtop[i2];
          acc += beta * (double)nd[kk] * inv[kk];
          if (v < acc) break;
        }
        k = dtop[i2];
      } else {
        k = draw_smooth(inv, K, s->kpad, (v - r) / ab);
      }
      if (!dense) pk = find_topic(top, wx->len, k);
    }

    /* Put the token back under k. */
    {
      int32_t ndo = nd[k], ndn = ndo + 1;
      nd[k] = ndn;
      float nkn = nk[k] + 1.0f;
      nk[k] = nkn;
      double io = inv[k], in = 1.0 / ((double)nkn + vbeta);
      inv[k] = in;
      sab += ab * (in - io);
      r += beta * ((double)ndn * in - (double)ndo * io);
      set_d(coef, k, ((double)ndn + alpha) * in);
      {
        const uint32_t fresh = ndo == 0;
        dtop[dlen] = (uint16_t)(fresh ? k : dtop[dlen]);
        dpos[k] = (uint16_t)(fresh ? dlen : dpos[k]);
        dlen += fresh;
      }
      if (dense) {
        set_f(row, k, row[k] + 1.0f, K);
      } else if (pk >= 0) {
        set_f(cnt, (uint32_t)pk, cnt[pk] + 1.0f, wx->cap);
      } else {
        cnt[wx->len] = 1.0f;
        top[wx->len] = (uint16_t)k;
        wx->len++;
      }
      z[slot] = (uint16_t)k;
    }
  }

out:
  words_write_back(s, nwk);
  *rng = st;
  return rc;
}

/* ---- the reference ------------------------------------------------------ */

void strata_lda_conditional(const strata_lda_params *p, const int32_t *ndk_d, const float *nwk_w,
                            const float *nk, double *prob) {
  double vbeta = (double)p->V * p->beta, total = 0;
  for (uint32_t k = 0; k < p->K; k++) {
    prob[k] = ((double)ndk_d[k] + p->alpha) * ((double)nwk_w[k] + p->beta) /
              ((double)nk[k] + vbeta);
    total += prob[k];
  }
  for (uint32_t k = 0; k < p->K; k++) prob[k] /= total;
}
