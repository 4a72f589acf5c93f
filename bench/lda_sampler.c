/*
 * bench/lda_sampler.c - tokens per second of an LDA sampler on one core, on
 * a corpus drawn from the LDA model: the exact sampler (strata_lda_sweep),
 * the Metropolis-Hastings one (strata_lda_warp_sweep) or a textbook
 * yardstick.
 *
 * The corpus comes from strata_lda_synth_generate: topics phi_k ~
 * Dirichlet(beta) over the vocabulary, per document theta_d ~
 * Dirichlet(alpha) and a Poisson length, tokens drawn from the model. Every
 * token starts on a uniformly random topic, the counts are built, and each
 * sweep resamples the whole corpus in document order (in calls of --chunk
 * tokens). Speed grows over the first sweeps as the counts get sparser, so
 * the median is taken over the sweeps after --warmup.
 *
 * --impl plain runs a textbook SparseLDA (Yao, Mimno & McCallum 2009, as
 * in MALLET: word topics kept sorted by count, the word bucket's terms
 * stored then scanned, the caller's word rows updated as it goes) on the
 * same corpus, as the yardstick; --impl warp the Metropolis-Hastings
 * sampler with --mh-steps word and document proposals per token.
 *
 * --vs IMPL runs a second sampler on its own copy of the same initial
 * state, sweep for sweep interleaved with the first (so both see the same
 * machine, other load included), and reports the ratio of the medians: on
 * a shared machine, compare samplers only this way.
 *
 * Output: one line per sweep and sampler, then one JSON object with the
 * build, the machine, every parameter, and per sampler the rate of every
 * sweep with the min, median and max after the warm-up, the
 * log-likelihood per token at the end, and whether the counts still match
 * the topics (exit status 1 if not).
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"
#include "strata/apps/corpus.h"
#include "strata/apps/lda.h"
#include "strata/options.h"
#include "bench/bench_info.h"
#include "strata/engine.h"

#define PROG "lda_sampler"

typedef struct bench_opts {
  uint64_t tokens, chunk, seed;
  int topics, vocab, len, gen_topics, sweeps, warmup, mh_steps, word_chunks;
  double alpha, beta;
  const char *impl, *vs;
} bench_opts;

static const strata_option bench_options[] = {
    {"tokens", 0, STRATA_OPT_U64, offsetof(bench_opts, tokens), "10000000", "N", 1, 4e9, NULL,
     "corpus size in tokens (documents = N / len)", NULL},
    {"topics", 'K', STRATA_OPT_INT, offsetof(bench_opts, topics), "100", "K", 1, 65535, NULL,
     "topics of the sampler", NULL},
    {"vocab", 'V', STRATA_OPT_INT, offsetof(bench_opts, vocab), "10000", "V", 1, 1e8, NULL,
     "vocabulary size", NULL},
    {"len", 0, STRATA_OPT_INT, offsetof(bench_opts, len), "100", "L", 1, 1e6, NULL,
     "mean document length (Poisson)", NULL},
    {"gen-topics", 0, STRATA_OPT_INT, offsetof(bench_opts, gen_topics), "0", "K", 0, 65535, NULL,
     "topics of the generating model (0: --topics)", NULL},
    {"alpha", 0, STRATA_OPT_DOUBLE, offsetof(bench_opts, alpha), "0.1", "A", 0, 1e6, NULL,
     "document-topic prior, for generation and sampling (0: 50/K)", NULL},
    {"beta", 0, STRATA_OPT_DOUBLE, offsetof(bench_opts, beta), "0.01", "B", 1e-9, 1e6, NULL,
     "topic-word prior, for generation and sampling", NULL},
    {"sweeps", 0, STRATA_OPT_INT, offsetof(bench_opts, sweeps), "10", "N", 1, 100000, NULL,
     "sweeps over the corpus", NULL},
    {"warmup", 0, STRATA_OPT_INT, offsetof(bench_opts, warmup), "5", "N", 0, 100000, NULL,
     "first sweeps left out of the median (all count when sweeps <= warmup)", NULL},
    {"chunk", 0, STRATA_OPT_U64, offsetof(bench_opts, chunk), "0", "N", 0, 4e9, NULL,
     "tokens per strata_lda_sweep call, cut at document ends (0: the whole corpus)", NULL},
    {"word-chunks", 0, STRATA_OPT_INT, offsetof(bench_opts, word_chunks), "0", "C", 0, 4096, NULL,
     "sweep in C calls, call c holding the tokens of words w with w mod C = c in document order "
     "(as strata lda --mode serial --depth C does; 0: no split, see --chunk)",
     NULL},
    {"seed", 0, STRATA_OPT_U64, offsetof(bench_opts, seed), "1", "X", 0, 0, NULL,
     "seed of the corpus and of the sampler", NULL},
    {"impl", 0, STRATA_OPT_CHOICE, offsetof(bench_opts, impl), "fast", "I", 0, 0, "fast|plain|warp",
     "fast: strata_lda_sweep; plain: the textbook SparseLDA yardstick; warp: "
     "strata_lda_warp_sweep (Metropolis-Hastings)",
     NULL},
    {"vs", 0, STRATA_OPT_CHOICE, offsetof(bench_opts, vs), "none", "I", 0, 0,
     "none|fast|plain|warp",
     "also run this sampler on a copy of the state, sweeps interleaved; report the ratio", NULL},
    {"mh-steps", 0, STRATA_OPT_INT, offsetof(bench_opts, mh_steps), "2", "N", 1, 64, NULL,
     "warp: word and document proposals per token (each)", NULL},
    {NULL},
};

/* ---- the yardstick: textbook SparseLDA ---------------------------------- */

/* Word topics as (count << 16 | topic), sorted descending, one K-entry list
 * per word built on first sight in a call. */
typedef struct plain {
  uint32_t K, V;
  double alpha, beta, vbeta, ab;
  double *inv, *coef, *qv;
  uint16_t *dtop, *dpos;
  uint32_t dlen;
  uint64_t *wl;
  uint32_t *wlen, *wstamp, stamp;
} plain;

static int plain_init(plain *p, uint32_t K, uint32_t V, double alpha, double beta) {
  memset(p, 0, sizeof *p);
  p->K = K;
  p->V = V;
  p->alpha = alpha;
  p->beta = beta;
  p->vbeta = V * beta;
  p->ab = alpha * beta;
  p->inv = strata_malloc(K * sizeof(double));
  p->coef = strata_malloc(K * sizeof(double));
  p->qv = strata_malloc(K * sizeof(double));
  p->dtop = strata_malloc(K * sizeof(uint16_t));
  p->dpos = strata_malloc(K * sizeof(uint16_t));
  p->wl = strata_malloc((size_t)V * K * sizeof(uint64_t));
  p->wlen = strata_calloc(V, sizeof(uint32_t));
  p->wstamp = strata_calloc(V, sizeof(uint32_t));
  if (!p->inv || !p->coef || !p->qv || !p->dtop || !p->dpos || !p->wl || !p->wlen || !p->wstamp)
    return STRATA_ENOMEM;
  return 0;
}

static void plain_close(plain *p) {
  strata_free(p->inv);
  strata_free(p->coef);
  strata_free(p->qv);
  strata_free(p->dtop);
  strata_free(p->dpos);
  strata_free(p->wl);
  strata_free(p->wlen);
  strata_free(p->wstamp);
}

static void plain_sweep(plain *p, const strata_lda_token *tok, size_t n, int32_t *ndk, float *nwk,
                        float *nk, uint16_t *z, strata_rng *rng) {
  const uint32_t K = p->K;
  const double alpha = p->alpha, beta = p->beta, vbeta = p->vbeta, ab = p->ab;
  double *inv = p->inv, *coef = p->coef, *qv = p->qv;
  p->stamp++;
  double s = 0, r = 0;
  for (uint32_t k = 0; k < K; k++) {
    inv[k] = 1.0 / (nk[k] + vbeta);
    coef[k] = alpha * inv[k];
    s += ab * inv[k];
  }
  p->dlen = 0;
  uint32_t cur = UINT32_MAX;
  int32_t *nd = NULL;
  for (size_t i = 0; i < n; i++) {
    uint32_t d = tok[i].doc, w = tok[i].word;
    if (d != cur) {
      for (uint32_t j = 0; j < p->dlen; j++) coef[p->dtop[j]] = alpha * inv[p->dtop[j]];
      nd = ndk + (size_t)d * K;
      p->dlen = 0;
      r = 0;
      for (uint32_t k = 0; k < K; k++) {
        if (!nd[k]) continue;
        p->dpos[k] = (uint16_t)p->dlen;
        p->dtop[p->dlen++] = (uint16_t)k;
        coef[k] = (nd[k] + alpha) * inv[k];
        r += beta * nd[k] * inv[k];
      }
      cur = d;
    }
    float *row = nwk + (size_t)w * K;
    uint64_t *wl = p->wl + (size_t)w * K;
    if (p->wstamp[w] != p->stamp) {
      uint32_t l = 0;
      for (uint32_t k = 0; k < K; k++)
        if (row[k] != 0) wl[l++] = (uint64_t)row[k] << 16 | k;
      for (uint32_t a = 1; a < l; a++) { /* insertion sort, descending */
        uint64_t x = wl[a];
        uint32_t b = a;
        for (; b > 0 && wl[b - 1] < x; b--) wl[b] = wl[b - 1];
        wl[b] = x;
      }
      p->wlen[w] = l;
      p->wstamp[w] = p->stamp;
    }
    uint32_t len = p->wlen[w];
    uint32_t t = z[tok[i].slot];

    /* remove */
    uint32_t at = 0;
    while ((wl[at] & 0xffff) != t) at++;
    wl[at] -= (uint64_t)1 << 16;
    while (at + 1 < len && wl[at] < wl[at + 1]) {
      uint64_t x = wl[at];
      wl[at] = wl[at + 1];
      wl[at + 1] = x;
      at++;
    }
    if ((wl[at] >> 16) == 0) len--;
    row[t] -= 1;
    s -= ab * inv[t];
    r -= beta * nd[t] * inv[t];
    nd[t]--;
    nk[t] -= 1;
    inv[t] = 1.0 / (nk[t] + vbeta);
    s += ab * inv[t];
    r += beta * nd[t] * inv[t];
    coef[t] = (nd[t] + alpha) * inv[t];
    if (!nd[t]) {
      uint32_t pos = p->dpos[t], last = p->dtop[--p->dlen];
      p->dtop[pos] = (uint16_t)last;
      p->dpos[last] = (uint16_t)pos;
    }

    /* word bucket */
    double q = 0;
    for (uint32_t j = 0; j < len; j++) {
      qv[j] = coef[wl[j] & 0xffff] * (double)(wl[j] >> 16);
      q += qv[j];
    }
    double u = strata_rng_uniform(rng) * (s + r + q);
    uint32_t k;
    long kat = -1;
    if (u < q) {
      uint32_t j = 0;
      while (j + 1 < len && u >= qv[j]) u -= qv[j++];
      k = wl[j] & 0xffff;
      kat = j;
    } else {
      u -= q;
      if (u < r && p->dlen) {
        uint32_t j = 0;
        for (; j + 1 < p->dlen; j++) {
          double x = beta * nd[p->dtop[j]] * inv[p->dtop[j]];
          if (u < x) break;
          u -= x;
        }
        k = p->dtop[j];
      } else {
        u -= r;
        k = 0;
        for (; k + 1 < K; k++) {
          double x = ab * inv[k];
          if (u < x) break;
          u -= x;
        }
      }
      for (uint32_t j = 0; j < len; j++)
        if ((wl[j] & 0xffff) == k) kat = j;
    }

    /* add */
    if (kat < 0) {
      kat = len;
      wl[len++] = k;
    }
    at = (uint32_t)kat;
    wl[at] += (uint64_t)1 << 16;
    while (at > 0 && wl[at] > wl[at - 1]) {
      uint64_t x = wl[at];
      wl[at] = wl[at - 1];
      wl[at - 1] = x;
      at--;
    }
    p->wlen[w] = len;
    row[k] += 1;
    s -= ab * inv[k];
    r -= beta * nd[k] * inv[k];
    if (!nd[k]) {
      p->dpos[k] = (uint16_t)p->dlen;
      p->dtop[p->dlen++] = (uint16_t)k;
    }
    nd[k]++;
    nk[k] += 1;
    inv[k] = 1.0 / (nk[k] + vbeta);
    s += ab * inv[k];
    r += beta * nd[k] * inv[k];
    coef[k] = (nd[k] + alpha) * inv[k];
    z[tok[i].slot] = (uint16_t)k;
  }
}

/* ---- driver ------------------------------------------------------------- */

/* Token-weighted mean number of nonzero topics of the tokens' words and
 * documents: what a token costs the sparse buckets. */
static void sparsity(const strata_corpus *c, uint32_t K, const int32_t *ndk, const float *nwk,
                     double *word_nnz, double *doc_nnz) {
  double wsum = 0, dsum = 0;
  for (uint32_t w = 0; w < c->n_vocab; w++) {
    const float *row = nwk + (size_t)w * K;
    double tot = 0, nz = 0;
    for (uint32_t k = 0; k < K; k++) {
      tot += row[k];
      nz += row[k] != 0;
    }
    wsum += tot * nz;
  }
  for (uint32_t d = 0; d < c->n_docs; d++) {
    const int32_t *row = ndk + (size_t)d * K;
    double nz = 0;
    for (uint32_t k = 0; k < K; k++) nz += row[k] != 0;
    dsum += nz * (double)(c->doc_off[d + 1] - c->doc_off[d]);
  }
  *word_nnz = wsum / (double)c->n_tokens;
  *doc_nnz = dsum / (double)c->n_tokens;
}

/* log p(w, z) per token (Griffiths & Steyvers), as the lda app reports it. */
static double loglik_per_token(const strata_corpus *c, uint32_t K, double alpha, double beta,
                               const int32_t *ndk, const float *nwk, const float *nk) {
  const double V = c->n_vocab, la = lgamma(alpha), lb = lgamma(beta);
  double s = 0;
  for (uint32_t d = 0; d < c->n_docs; d++) {
    const int32_t *row = ndk + (size_t)d * K;
    for (uint32_t k = 0; k < K; k++)
      if (row[k] > 0) s += lgamma(row[k] + alpha) - la;
    s += lgamma(K * alpha) - lgamma((double)(c->doc_off[d + 1] - c->doc_off[d]) + K * alpha);
  }
  for (size_t x = 0; x < (size_t)c->n_vocab * K; x++)
    if (nwk[x] > 0) s += lgamma(nwk[x] + beta) - lb;
  for (uint32_t k = 0; k < K; k++) s += lgamma(V * beta) - lgamma(nk[k] + V * beta);
  return s / (double)c->n_tokens;
}

/* Whether the counts are exactly those of z (a check on every sampler). */
static int consistent(const strata_corpus *c, uint32_t K, const int32_t *ndk, const float *nwk,
                      const float *nk, const uint16_t *z) {
  const size_t D = c->n_docs, V = c->n_vocab;
  int32_t *nd = calloc(D * K, sizeof *nd);
  float *nw = calloc(V * K, sizeof *nw), *nt = calloc(K, sizeof *nt);
  int ok = nd && nw && nt;
  for (uint32_t d = 0; ok && d < D; d++) {
    for (uint64_t i = c->doc_off[d]; i < c->doc_off[d + 1]; i++) {
      if (z[i] >= K) {
        ok = 0;
        break;
      }
      nd[(size_t)d * K + z[i]]++;
      nw[(size_t)c->word[i] * K + z[i]] += 1;
      nt[z[i]] += 1;
    }
  }
  ok = ok && !memcmp(nd, ndk, D * K * sizeof *nd) && !memcmp(nw, nwk, V * K * sizeof *nw) &&
       !memcmp(nt, nk, K * sizeof *nt);
  free(nd);
  free(nw);
  free(nt);
  return ok;
}

/* One sampler and its own copy of the state. */
typedef struct chain {
  const char *impl;
  int32_t *ndk;
  float *nwk, *nk;
  uint16_t *z;
  strata_rng rng;
  strata_lda_sampler *fast;
  strata_lda_warp *warp;
  plain pl;
  double *rate;
  double med, lo, hi, loglik;
  int ok;
} chain;

static void chain_close(chain *ch) {
  strata_lda_sampler_free(ch->fast);
  strata_lda_warp_free(ch->warp);
  plain_close(&ch->pl);
  strata_free(ch->rate);
  strata_free(ch->z);
  strata_free(ch->nk);
  strata_free(ch->nwk);
  strata_free(ch->ndk);
}

static int chain_init(chain *ch, const char *impl, const strata_lda_params *prm, int steps,
                      uint64_t seed, int sweeps, size_t D, size_t V, size_t N) {
  const uint32_t K = prm->K;
  memset(ch, 0, sizeof *ch);
  ch->impl = impl;
  ch->ndk = strata_alloc_aligned(D * K * sizeof *ch->ndk);
  ch->nwk = strata_alloc_aligned(V * K * sizeof *ch->nwk);
  ch->nk = strata_alloc_aligned(K * sizeof *ch->nk);
  ch->z = strata_malloc(N * sizeof *ch->z);
  ch->rate = strata_malloc((size_t)sweeps * sizeof *ch->rate);
  if (!ch->ndk || !ch->nwk || !ch->nk || !ch->z || !ch->rate)
    return strata_err_set(STRATA_ENOMEM, "out of memory");
  strata_rng_seed(&ch->rng, strata_mix64(seed ^ 0x737765ULL));
  if (!strcmp(impl, "plain")) {
    if (plain_init(&ch->pl, K, (uint32_t)V, prm->alpha, prm->beta))
      return strata_err_set(STRATA_ENOMEM, "out of memory");
    return 0;
  }
  if (!strcmp(impl, "warp")) return strata_lda_warp_new(prm, (uint32_t)steps, &ch->warp);
  return strata_lda_sampler_new(prm, &ch->fast);
}

static int chain_sweep(chain *ch, const strata_lda_token *tok, size_t N, uint64_t chunk,
                       const uint64_t *doc_off, const size_t *wc_off) {
  if (wc_off) {
    /* tok holds the word chunks one after another, wc_off their bounds
     * (wc_off[C] = N ends the list) */
    for (size_t c = 0; wc_off[c] < N; c++) {
      size_t lo = wc_off[c], hi = wc_off[c + 1];
      int rc = 0;
      if (ch->warp)
        rc = strata_lda_warp_sweep(ch->warp, tok + lo, hi - lo, ch->ndk, ch->nwk, ch->nk, ch->z,
                                   doc_off, &ch->rng);
      else if (ch->fast)
        rc = strata_lda_sweep(ch->fast, tok + lo, hi - lo, ch->ndk, ch->nwk, ch->nk, ch->z,
                              &ch->rng);
      else
        plain_sweep(&ch->pl, tok + lo, hi - lo, ch->ndk, ch->nwk, ch->nk, ch->z, &ch->rng);
      if (rc) return rc;
    }
    return 0;
  }
  size_t lo = 0;
  while (lo < N) {
    size_t hi = chunk && lo + chunk < N ? lo + chunk : N;
    while (hi < N && tok[hi].doc == tok[hi - 1].doc) hi++;
    int rc = 0;
    if (ch->warp)
      rc = strata_lda_warp_sweep(ch->warp, tok + lo, hi - lo, ch->ndk, ch->nwk, ch->nk, ch->z,
                                 doc_off, &ch->rng);
    else if (ch->fast)
      rc = strata_lda_sweep(ch->fast, tok + lo, hi - lo, ch->ndk, ch->nwk, ch->nk, ch->z, &ch->rng);
    else
      plain_sweep(&ch->pl, tok + lo, hi - lo, ch->ndk, ch->nwk, ch->nk, ch->z, &ch->rng);
    if (rc) return rc;
    lo = hi;
  }
  return 0;
}

static void chain_json(strata_json *j, const chain *ch, int sweeps, int from) {
  strata_json_string(j, "impl", ch->impl);
  strata_json_array_begin(j, "tokens_per_s");
  for (int sw = 0; sw < sweeps; sw++) strata_json_number(j, NULL, ch->rate[sw]);
  strata_json_array_end(j);
  strata_json_int(j, "measured_sweeps", sweeps - from);
  strata_json_number(j, "min_tokens_per_s", ch->lo);
  strata_json_number(j, "median_tokens_per_s", ch->med);
  strata_json_number(j, "max_tokens_per_s", ch->hi);
  strata_json_number(j, "loglik_per_token", ch->loglik);
  strata_json_bool(j, "counts_consistent", ch->ok);
}

static void usage(FILE *f, const strata_optgroup *g) {
  fprintf(f, "usage: " PROG " [options]\n"
             "Tokens per second of an LDA sampler on a corpus drawn from LDA.\n\n");
  strata_options_help(f, g, 1);
  fprintf(f, "\nExamples:\n"
             "  " PROG " --topics 100\n"
             "  " PROG " --topics 1000 --sweeps 12 --warmup 6\n"
             "  " PROG " --topics 1000 --impl plain\n"
             "  " PROG " --topics 1000 --impl warp --vs fast\n"
             "  " PROG " --tokens 1000000 --topics 100 --chunk 20000\n");
}

int main(int argc, char **argv) {
  bench_opts o;
  strata_optgroup g = {"options", bench_options, &o};
  int help = 0;
  int rc = strata_options_defaults(&g, 1);
  if (!rc) rc = strata_options_parse(&g, 1, argc - 1, argv + 1, &help);
  if (rc || help) {
    if (rc) fprintf(stderr, PROG ": %s\n", strata_err_msg());
    else usage(stdout, &g);
    return rc ? 2 : 0;
  }
  const uint32_t K = (uint32_t)o.topics;
  if (o.alpha == 0) o.alpha = 50.0 / K;
  if (!o.gen_topics) o.gen_topics = o.topics;
  strata_options_echo(stdout, PROG ": ", &g, 1);

  int code = 1;
  strata_corpus c;
  memset(&c, 0, sizeof c);
  strata_lda_token *tok = NULL, *wtok = NULL;
  size_t *wc_off = NULL;
  chain ch[2];
  memset(ch, 0, sizeof ch);
  const int n_ch = strcmp(o.vs, "none") ? 2 : 1;

  strata_lda_synth spec;
  strata_lda_synth_defaults(&spec);
  spec.len = (uint32_t)o.len;
  spec.docs = (uint32_t)((o.tokens + (uint64_t)o.len - 1) / (uint64_t)o.len);
  spec.vocab = (uint32_t)o.vocab;
  spec.topics = (uint32_t)o.gen_topics;
  spec.alpha = o.alpha;
  spec.beta = o.beta;
  spec.seed = o.seed;
  double t0 = strata_now();
  if ((rc = strata_lda_synth_generate(&spec, &c))) {
    fprintf(stderr, PROG ": generating the corpus: %s\n", strata_err_msg());
    goto done;
  }
  printf(PROG ": corpus: %u docs, %" PRIu64 " tokens, vocab %u (%.1f s)\n", c.n_docs, c.n_tokens,
         c.n_vocab, strata_now() - t0);

  const size_t N = (size_t)c.n_tokens, D = c.n_docs, V = c.n_vocab;
  strata_lda_params prm = {.K = K, .V = (uint32_t)V, .alpha = o.alpha, .beta = o.beta};
  tok = strata_malloc(N * sizeof *tok);
  if (!tok) {
    fprintf(stderr, PROG ": out of memory\n");
    goto done;
  }
  for (int x = 0; x < n_ch; x++) {
    if ((rc = chain_init(&ch[x], x ? o.vs : o.impl, &prm, o.mh_steps, o.seed, o.sweeps, D, V, N))) {
      fprintf(stderr, PROG ": %s\n", strata_err_msg());
      goto done;
    }
  }
  /* Every sampler starts from the same state: uniformly random topics. */
  memset(ch[0].ndk, 0, D * K * sizeof *ch[0].ndk);
  memset(ch[0].nwk, 0, V * K * sizeof *ch[0].nwk);
  memset(ch[0].nk, 0, K * sizeof *ch[0].nk);
  strata_rng rng;
  strata_rng_seed(&rng, strata_mix64(o.seed ^ 0x6c6461ULL));
  for (uint32_t d = 0; d < D; d++) {
    for (uint64_t i = c.doc_off[d]; i < c.doc_off[d + 1]; i++) {
      uint16_t t = (uint16_t)strata_rng_below(&rng, K);
      uint32_t w = c.word[i];
      tok[i] = (strata_lda_token){.doc = d, .word = w, .slot = (uint32_t)i};
      ch[0].z[i] = t;
      ch[0].ndk[(size_t)d * K + t]++;
      ch[0].nwk[(size_t)w * K + t] += 1;
      ch[0].nk[t] += 1;
    }
  }
  if (o.word_chunks) {
    /* the tokens again, by word chunk, each chunk in document order */
    const size_t C = (size_t)o.word_chunks;
    wtok = strata_malloc((N ? N : 1) * sizeof *wtok);
    wc_off = strata_calloc(C + 1, sizeof *wc_off);
    if (!wtok || !wc_off) {
      fprintf(stderr, PROG ": out of memory\n");
      goto done;
    }
    for (size_t i = 0; i < N; i++) wc_off[tok[i].word % C + 1]++;
    for (size_t k = 0; k < C; k++) wc_off[k + 1] += wc_off[k];
    size_t *fill = strata_malloc(C * sizeof *fill);
    if (!fill) {
      fprintf(stderr, PROG ": out of memory\n");
      goto done;
    }
    memcpy(fill, wc_off, C * sizeof *fill);
    for (size_t i = 0; i < N; i++) wtok[fill[tok[i].word % C]++] = tok[i];
    strata_free(fill);
  }
  if (n_ch == 2) {
    memcpy(ch[1].ndk, ch[0].ndk, D * K * sizeof *ch[0].ndk);
    memcpy(ch[1].nwk, ch[0].nwk, V * K * sizeof *ch[0].nwk);
    memcpy(ch[1].nk, ch[0].nk, K * sizeof *ch[0].nk);
    memcpy(ch[1].z, ch[0].z, N * sizeof *ch[0].z);
  }

  for (int sw = 0; sw < o.sweeps; sw++) {
    for (int x = 0; x < n_ch; x++) {
      double w0 = strata_now(), c0 = strata_cpu_seconds();
      if ((rc = chain_sweep(&ch[x], wtok ? wtok : tok, N, o.chunk, c.doc_off, wc_off))) {
        fprintf(stderr, PROG ": %s sweep %d: %s\n", ch[x].impl, sw + 1, strata_err_msg());
        goto done;
      }
      double wall = strata_now() - w0, cpu = strata_cpu_seconds() - c0;
      ch[x].rate[sw] = (double)N / wall;
      double wn, dn;
      sparsity(&c, K, ch[x].ndk, ch[x].nwk, &wn, &dn);
      printf(PROG ": sweep %d %s: %.3f M tokens/s (%.3f s wall, %.3f s cpu), word nnz %.1f, doc "
             "nnz %.1f\n",
             sw + 1, ch[x].impl, ch[x].rate[sw] / 1e6, wall, cpu, wn, dn);
      fflush(stdout);
    }
  }
  int from = o.sweeps > o.warmup ? o.warmup : 0;
  code = 0;
  for (int x = 0; x < n_ch; x++) {
    chain *h = &ch[x];
    h->med = strata_median(h->rate + from, o.sweeps - from);
    h->lo = h->hi = h->rate[from];
    for (int sw = from; sw < o.sweeps; sw++) {
      if (h->rate[sw] < h->lo) h->lo = h->rate[sw];
      if (h->rate[sw] > h->hi) h->hi = h->rate[sw];
    }
    h->loglik = loglik_per_token(&c, K, o.alpha, o.beta, h->ndk, h->nwk, h->nk);
    h->ok = consistent(&c, K, h->ndk, h->nwk, h->nk, h->z);
    if (!h->ok) {
      fprintf(stderr, PROG ": %s: the counts do not match the topics after the sweeps\n", h->impl);
      code = 1;
    }
    printf(PROG ": %s: median %.3f M tokens/s (min %.3f, max %.3f), loglik/token %.4f\n", h->impl,
           h->med / 1e6, h->lo / 1e6, h->hi / 1e6, h->loglik);
  }
  if (n_ch == 2) printf(PROG ": %s / %s = %.3f\n", ch[0].impl, ch[1].impl, ch[0].med / ch[1].med);
  strata_json j;
  bench_json_begin(&j, "lda_sampler");
  strata_json_int(&j, "tokens", (int64_t)N);
  strata_json_int(&j, "docs", (int64_t)D);
  strata_json_int(&j, "vocab", (int64_t)V);
  strata_json_int(&j, "topics", K);
  strata_json_int(&j, "gen_topics", o.gen_topics);
  strata_json_int(&j, "len", o.len);
  strata_json_number(&j, "alpha", o.alpha);
  strata_json_number(&j, "beta", o.beta);
  strata_json_int(&j, "sweeps", o.sweeps);
  strata_json_int(&j, "warmup", o.warmup);
  strata_json_int(&j, "chunk", (int64_t)o.chunk);
  strata_json_int(&j, "seed", (int64_t)o.seed);
  strata_json_int(&j, "mh_steps", o.mh_steps);
  strata_json_int(&j, "word_chunks", o.word_chunks);
  chain_json(&j, &ch[0], o.sweeps, from);
  if (n_ch == 2) {
    strata_json_object_begin(&j, "vs");
    chain_json(&j, &ch[1], o.sweeps, from);
    strata_json_object_end(&j);
    strata_json_number(&j, "ratio", ch[0].med / ch[1].med);
  }
  strata_json_object_end(&j);

done:
  for (int x = 0; x < 2; x++) chain_close(&ch[x]);
  strata_free(tok);
  strata_free(wtok);
  strata_free(wc_off);
  strata_corpus_close(&c);
  return code;
}
