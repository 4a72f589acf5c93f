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
 * build). Per token: 2 x steps draws, each one random read (a unit or a
 * slot of the document) and at most one count of the word row.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "strata/core.h"
#include "strata/apps/lda.h"

#define MAX_STEPS 64

/* Per word of the current call. */
typedef struct warp_word {
  uint32_t start; /* its units: unit[start .. start + c) */
  uint32_t c;     /* its tokens in the call */
  uint32_t aoff;  /* its frozen part: alias[aoff .. aoff + na) */
  uint32_t na;
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
  if (!s->ktop || !s->kidx || !s->small || !s->large || !s->kcnt) goto fail;
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
  strata_free(s);
}

/* ---- per-call scratch --------------------------------------------------- */

static int reserve(void **p, size_t need, size_t *cap, size_t size) {
  void *q = strata_grow(*p, need, cap, SIZE_MAX / size, size);
  if (!q) return strata_err_set(STRATA_ENOMEM, "lda warp: out of memory (%zu x %zu bytes)", need, size);
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
  size_t used = 0;
  for (uint32_t j = 0; j < nw; j++) {
    uint32_t w = wlist[j];
    rc = word_build(s, w, nwk + (size_t)w * K, &words[w], &used);
    if (rc) return rc;
  }
  return 0;
}

/* ---- the sweep ---------------------------------------------------------- */

static inline double uniform(strata_rng *st) { return strata_rng_uniform(st); }

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

  const double alpha = s->alpha, beta = s->beta, vbeta = s->vbeta, kalpha = s->kalpha,
               kbeta = s->kbeta, inv_alpha = s->inv_alpha, inv_beta = s->inv_beta;
  const uint32_t steps = s->steps;
  const warp_word *words = s->words;
  const warp_alias *alias = s->alias;
  const uint32_t *tpos = s->tpos;
  uint16_t *unit = s->unit;
  strata_rng st = *rng;

  uint32_t cur = 0;
  bool in_doc = false;
  uint64_t off = 0, len = 0;
  double lk = 0; /* L_d + Kα */
  int32_t *nd = NULL;

  size_t i = 0;
  for (; i < n; i++) {
    const uint32_t d = tok[i].doc, w = tok[i].word, slot = tok[i].slot;
    if (!in_doc || d != cur) {
      off = doc_off[d];
      len = doc_off[d + 1] - off;
      if (doc_off[d + 1] < off) len = 0;
      lk = (double)len + kalpha;
      nd = ndk + (size_t)d * K;
      cur = d;
      in_doc = true;
    }
    if ((uint64_t)slot - off >= len) {
      rc = strata_err_set(STRATA_ERANGE,
                          "lda warp: token %zu has slot %u, outside its document %u's slots "
                          "[%llu, %llu)",
                          i, slot, d, (unsigned long long)off, (unsigned long long)(off + len));
      break;
    }
    const warp_word *ww = &words[w];
    float *row = nwk + (size_t)w * K;
    const uint32_t up = tpos[i], s0 = unit[up];
    if (nd[s0] < 1 || !(row[s0] >= 1.0f) || !(nk[s0] >= 1.0f)) {
      rc = strata_err_set(STRATA_ERANGE,
                          "lda warp: token %zu (doc %u, word %u, topic %u): a count would go "
                          "negative (ndk %d, nwk %g, nk %g)",
                          i, d, w, s0, nd[s0], (double)row[s0], (double)nk[s0]);
      break;
    }
    /* The current topic's factors, its own count out. */
    uint32_t sc = s0;
    double fd = (double)nd[s0] - 1.0 + alpha, fw = (double)row[s0] - 1.0 + beta,
           fk = (double)nk[s0] - 1.0 + vbeta;
    const double wn = ww->n, wtot = wn + kbeta, wc = ww->c;
    const uint16_t *wu = unit + ww->start;
    const warp_alias *wa = alias + ww->aoff;
    bool bad = false;
    for (uint32_t step = 0; step < steps; step++) {
      /* word proposal */
      {
        double x = uniform(&st) * wtot;
        uint32_t t;
        if (x < wc) {
          t = wu[(uint32_t)x];
        } else if (x < wn) {
          double y = (x - wc) * ww->scale;
          uint32_t j = (uint32_t)y;
          if (j >= ww->na) j = ww->na - 1;
          t = y - j < wa[j].thr ? wa[j].top : wa[j].alt;
        } else {
          t = (uint32_t)((x - wn) * inv_beta);
          if (t >= K) t = K - 1;
        }
        if (t != sc) {
          const double own = t == s0;
          const double td = (double)nd[t] - own + alpha, tk = (double)nk[t] - own + vbeta;
          if (uniform(&st) * fd * tk < td * fk) {
            sc = t;
            fd = td;
            fk = tk;
            fw = (double)row[t] - own + beta;
            unit[up] = (uint16_t)t;
            z[slot] = (uint16_t)t;
          }
        }
      }
      /* document proposal */
      {
        double x = uniform(&st) * lk;
        uint32_t t;
        if (x < (double)len) {
          t = z[off + (uint64_t)x];
          if (t >= K) {
            bad = true;
            break;
          }
        } else {
          t = (uint32_t)((x - (double)len) * inv_alpha);
          if (t >= K) t = K - 1;
        }
        if (t != sc) {
          const double own = t == s0;
          const double tw = (double)row[t] - own + beta, tk = (double)nk[t] - own + vbeta;
          if (uniform(&st) * fw * tk < tw * fk) {
            sc = t;
            fw = tw;
            fk = tk;
            fd = (double)nd[t] - own + alpha;
            unit[up] = (uint16_t)t;
            z[slot] = (uint16_t)t;
          }
        }
      }
    }
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
      nk[s0] -= 1.0f;
      nk[sc] += 1.0f;
    }
  }
  *rng = st;
  return rc;
}
