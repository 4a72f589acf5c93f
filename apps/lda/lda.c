/*
 * The "lda" app: topic modelling by collapsed Gibbs sampling on the strata
 * engine (the STRADS schedule for LDA).
 *
 * Coordinator: read or generate the corpus, deal documents and words to B
 * blocks each, balanced by token count, draw every token's initial topic,
 * and build the blocks:
 *  - resident block i (documents stay home): doc-topic counts, document
 *    lengths and the topic of every token of block i's documents;
 *  - rotating block j (rotates on the ring, or rows of a table in
 *    parameter-server modes): word-topic counts of block j's words, float;
 *  - the global block: the K topic totals, merged by deltas (see app.h);
 *  - data block (i, j): the tokens of block i's documents whose words are in
 *    block j, chunk by chunk (the word rows of one pipeline chunk), by
 *    document inside a chunk so the sampler's document bucket is reused.
 * Worker: each chunk is one sweep of the sampler (strata/apps/lda.h: the
 * exact one, or with --sampler warp the Metropolis-Hastings one, which
 * reaches the document's other slots through the resident block's lengths)
 * with a random stream drawn from (seed, pass, data block, chunk), so
 * results do not depend on the number of workers except through the topic
 * totals.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"
#include "strata/apps/corpus.h"
#include "strata/apps/lda.h"
#include "strata/schedule.h"
#include "apps/lda/lda_app.h"

typedef struct lda_config {
  const char *data, *format, *vocab, *sampler;
  int topics, top, mh_steps;
  double alpha, beta;
} lda_config;

/* What every worker gets: this header, then woff[B + 1] (first word row of
 * each rotating block) and wcount[V] (tokens per word row, block by block),
 * which the count checks compare the word-topic rows against. */
typedef struct lda_meta {
  uint32_t K, V, depth, B;
  uint32_t warp, mh_steps; /* --sampler warp, --mh-steps */
  double alpha, beta;
  uint64_t n_tokens;
  uint32_t n_docs, n_vocab_used;
} lda_meta;

static size_t meta_size(uint32_t B, uint32_t V) {
  return sizeof(lda_meta) + ((size_t)B + 1 + V) * sizeof(uint32_t);
}
static const uint32_t *meta_woff(const lda_meta *m) { return (const uint32_t *)(m + 1); }

/* Resident block: header, ndk[n_docs * K] int32, len[n_docs] uint32,
 * z[n_tokens] uint16 (each part 64-byte aligned). */
typedef struct lda_res_hdr {
  uint32_t n_docs, K;
  uint64_t n_tokens;
} lda_res_hdr;

typedef struct lda_res {
  lda_res_hdr *h;
  int32_t *ndk;
  uint32_t *len;
  uint16_t *z;
} lda_res;

/* Data block: header, depth + 1 chunk offsets, tokens. */
typedef struct lda_data_hdr {
  uint32_t n, depth;
} lda_data_hdr;

typedef struct lda_priv {
  uint32_t n_docs, V;
  uint32_t *dblock, *dlocal, *wblock, *wlocal;
  strata_vocab vocab;
  /* With --topics-out, for z.txt: each token's word, by resident block and
   * slot (block b's slots from slot_first[b]); NULL without. */
  uint32_t *slot_word;
  uint64_t *slot_first;
} lda_priv;

static const char *const lda_objective_names[] = {"loglik", "loglik_per_token", "count_errors",
                                                   "count_mismatch"};
/* P_CHK_DW, P_CHK_WT: topic-weighted checksums that cancel when the
 * doc-topic, word-topic and total counts agree (see lda_block_objective). */
enum { P_DOC, P_WORD, P_TOTAL, P_ERR, P_TOKENS, P_CHK_DW, P_CHK_WT, N_PARTIALS };

#define OPT(field) offsetof(lda_config, field)
static const strata_option lda_options[] = {
    {.name = "data",
     .short_name = 'd',
     .type = STRATA_OPT_STRING | STRATA_OPT_RESUMABLE,
     .offset = OPT(data),
     .def = "synth:",
     .metavar = "FILE|synth:...",
     .help = "corpus (UCI docword, lda-c; .gz read too), or the generator: "
             "synth:docs=D,len=L,vocab=V,topics=K,alpha=A,beta=B,seed=X"},
    {.name = "format",
     .type = STRATA_OPT_CHOICE | STRATA_OPT_RESUMABLE,
     .offset = OPT(format),
     .def = "auto",
     .metavar = "FMT",
     .choices = "auto|uci|ldac",
     .help = "corpus format"},
    {.name = "vocab",
     .type = STRATA_OPT_STRING | STRATA_OPT_RESUMABLE,
     .offset = OPT(vocab),
     .metavar = "FILE",
     .help = "vocabulary, one word per line (names the words in --topics-out; sets V)"},
    {.name = "topics",
     .short_name = 'K',
     .type = STRATA_OPT_INT,
     .offset = OPT(topics),
     .def = "100",
     .metavar = "K",
     .min = 1,
     .max = 65535,
     .help = "number of topics"},
    {.name = "alpha",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(alpha),
     .def = "0",
     .metavar = "A",
     .max = 1e6,
     .help = "symmetric document-topic prior; 0 = 50 / K"},
    {.name = "beta",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(beta),
     .def = "0.01",
     .metavar = "B",
     .min = 1e-9,
     .max = 1e6,
     .help = "symmetric topic-word prior"},
    {.name = "sampler",
     .type = STRATA_OPT_CHOICE,
     .offset = OPT(sampler),
     .def = "exact",
     .metavar = "S",
     .choices = "exact|warp",
     .help = "exact: collapsed Gibbs (SparseLDA); warp: Metropolis-Hastings, O(1) per token at "
             "any K, more passes to the same likelihood"},
    {.name = "mh-steps",
     .type = STRATA_OPT_INT,
     .offset = OPT(mh_steps),
     .def = "2",
     .metavar = "N",
     .min = 1,
     .max = 64,
     .help = "with --sampler warp: word and document proposals per token (each)"},
    {.name = "top",
     .type = STRATA_OPT_INT | STRATA_OPT_RESUMABLE,
     .offset = OPT(top),
     .def = "10",
     .metavar = "N",
     .min = 1,
     .max = 1000,
     .help = "words per topic in --topics-out"},
    {.name = NULL},
};

static double cfg_alpha(const lda_config *c) { return c->alpha > 0 ? c->alpha : 50.0 / c->topics; }

int strata__lda_top(const void *cfg) { return ((const lda_config *)cfg)->top; }

static int lda_check(const void *vcfg, const strata_setup *setup) {
  (void)vcfg;
  if (setup->strata < setup->workers)
    return strata_err_set(STRATA_EUSAGE, "--strata %d is fewer than the %d workers", setup->strata,
                          setup->workers);
  return 0;
}

static size_t al64(size_t x) { return strata_round_up(x, 64); }

static size_t res_size(uint32_t n_docs, uint32_t K, uint64_t n_tokens) {
  return al64(sizeof(lda_res_hdr)) + al64((size_t)n_docs * K * sizeof(int32_t)) +
         al64((size_t)n_docs * sizeof(uint32_t)) + al64((size_t)n_tokens * sizeof(uint16_t));
}

static lda_res res_view(void *buf) {
  lda_res r;
  char *p = buf;
  r.h = buf;
  p += al64(sizeof(lda_res_hdr));
  r.ndk = (int32_t *)p;
  p += al64((size_t)r.h->n_docs * r.h->K * sizeof(int32_t));
  r.len = (uint32_t *)p;
  p += al64((size_t)r.h->n_docs * sizeof(uint32_t));
  r.z = (uint16_t *)p;
  return r;
}

static size_t data_tokens_offset(int depth) {
  return strata_round_up(sizeof(lda_data_hdr) + (size_t)(depth + 1) * sizeof(uint32_t), 16);
}

static void priv_free(void *p) {
  lda_priv *m = p;
  if (!m) return;
  strata_free(m->dblock);
  strata_free(m->dlocal);
  strata_free(m->wblock);
  strata_free(m->wlocal);
  strata_free(m->slot_word);
  strata_free(m->slot_first);
  strata_vocab_close(&m->vocab);
  strata_free(m);
}

/* What lda_load allocates per document, word and token of the corpus
 * beyond the corpus itself, at its peak (the estimate the readers check
 * every size they read against): per document the doc-topic counts (K
 * int32), its length, its count, block and place, its first token slot
 * (8) and its place in the order, and strata_schedule_balance's sort entry
 * (12); per word the word-topic counts (K floats), the meta's count, its
 * count, block and place, spread_over_chunks's row and the sort entry;
 * per token its place in a data block (strata_lda_token) and its topic z
 * (uint16), and with --topics-out its word for z.txt (uint32). */
static strata_corpus_cost lda_cost(int K, int z_out, char *what, size_t what_size) {
  snprintf(what, what_size, "at K=%d topic%s", K, K == 1 ? "" : "s");
  return (strata_corpus_cost){
      .per_doc = 4.0 * K + 4 + 4 + 8 + 8 + 4 + 12,
      .per_word = 4.0 * K + 4 + 4 + 8 + 4 + 12,
      .per_token = sizeof(strata_lda_token) + sizeof(uint16_t) + (z_out ? sizeof(uint32_t) : 0),
      .what = what,
      .hint = strata_app_lda.memory_hint,
  };
}

static int read_corpus(const lda_config *cfg, int z_out, lda_priv *pv, strata_corpus *c) {
  int rc;
  char what[64];
  strata_corpus_cost cost = lda_cost(cfg->topics, z_out, what, sizeof what);
  if (cfg->vocab && (rc = strata_vocab_read(cfg->vocab, &pv->vocab))) return rc;
  if (strncmp(cfg->data, "synth:", 6) == 0) {
    strata_lda_synth s;
    strata_lda_synth_defaults(&s);
    if ((rc = strata_lda_synth_parse(cfg->data, &s))) return rc;
    return strata_lda_synth_generate_with(&s, &cost, c);
  }
  strata_corpus_format fmt;
  if ((rc = strata_corpus_format_parse(cfg->format, &fmt))) return rc;
  return strata_corpus_read_with(cfg->data, fmt, pv->vocab.n, &cost, c);
}

/*
 * Pipeline chunks are equal in rows, and strata_schedule_balance puts a
 * block's heaviest words first, so chunk 0 would hold most of a block's
 * tokens (three quarters on KOS at depth 4): one long chunk to compute
 * before anything travels on the ring, and uneven clocks in the
 * parameter-server modes. This renumbers each block's words so every chunk
 * keeps its row count but gets about the same tokens: heaviest first, each
 * to the chunk with the fewest tokens that still has a free row.
 */
static int spread_over_chunks(uint32_t V, int B, int depth, const uint32_t *wcount,
                              const uint32_t *wblock, uint32_t *wlocal, const uint32_t *wsz) {
  uint32_t *first = strata_calloc((size_t)B + 1, sizeof *first);
  uint32_t *byrow = strata_malloc(((size_t)V + 1) * sizeof *byrow);
  uint64_t *load = strata_malloc((size_t)depth * sizeof *load);
  uint32_t *fill = strata_malloc((size_t)depth * sizeof *fill);
  int rc = 0;
  if (!first || !byrow || !load || !fill) {
    rc = strata_err_set(STRATA_ENOMEM, "lda: out of memory");
    goto done;
  }
  for (int b = 0; b < B; b++) first[b + 1] = first[b] + wsz[b];
  for (uint32_t w = 0; w < V; w++) byrow[first[wblock[w]] + wlocal[w]] = w;
  for (int b = 0; b < B; b++) {
    memset(load, 0, (size_t)depth * sizeof *load);
    memset(fill, 0, (size_t)depth * sizeof *fill);
    for (uint32_t i = 0; i < wsz[b]; i++) { /* heaviest first */
      uint32_t w = byrow[first[b] + i], lo, hi;
      int best = -1;
      for (int c = 0; c < depth; c++) {
        strata_chunk_rows(wsz[b], depth, c, &lo, &hi);
        if (fill[c] < hi - lo && (best < 0 || load[c] < load[best])) best = c;
      }
      strata_chunk_rows(wsz[b], depth, best, &lo, &hi);
      wlocal[w] = lo + fill[best]++;
      load[best] += wcount[w];
    }
  }
done:
  strata_free(first);
  strata_free(byrow);
  strata_free(load);
  strata_free(fill);
  return rc;
}

/* Builds the B x B data blocks: each block's tokens grouped by the chunk of
 * their word row, then by document in the resident block's order; a
 * document's tokens keep corpus order (a counting sort on that key). */
static int build_data(const strata_corpus *c, const lda_priv *pv, int B, int depth,
                      const uint32_t *dsz, const uint32_t *wsz, const uint64_t *slot0,
                      strata_problem *prob) {
  size_t nd = (size_t)B * (size_t)B;
  uint64_t *count = strata_calloc(nd, sizeof *count);
  int rc = 0;
  if (!count) return strata_err_set(STRATA_ENOMEM, "lda: out of memory");
  for (uint32_t d = 0; d < c->n_docs; d++)
    for (uint64_t t = c->doc_off[d]; t < c->doc_off[d + 1]; t++)
      count[(size_t)pv->dblock[d] * B + pv->wblock[c->word[t]]]++;
  size_t eoff = data_tokens_offset(depth);
  for (size_t b = 0; b < nd; b++) {
    if (count[b] > UINT32_MAX) {
      strata_free(count);
      return strata_err_set(STRATA_ERANGE, "lda: a data block has over 2^32 tokens: use more --strata");
    }
    strata_block *blk = &prob->data[b];
    blk->len = eoff + count[b] * sizeof(strata_lda_token);
    if (!(blk->buf = strata_alloc_aligned(blk->len))) {
      strata_free(count);
      return strata_err_set(STRATA_ENOMEM, "lda: out of memory for data blocks");
    }
    memset(blk->buf, 0, eoff);
    lda_data_hdr *h = blk->buf;
    h->n = (uint32_t)count[b];
    h->depth = (uint32_t)depth;
  }
  /* Chunk offsets by counting; then each token's place: documents arrive in
   * ascending local order per block, so one pass over the corpus fills each
   * chunk by document. */
  uint32_t *fill = strata_calloc(nd * (size_t)(depth + 1), sizeof *fill);
  if (!fill) {
    strata_free(count);
    return strata_err_set(STRATA_ENOMEM, "lda: out of memory");
  }
  for (uint32_t d = 0; d < c->n_docs; d++)
    for (uint64_t t = c->doc_off[d]; t < c->doc_off[d + 1]; t++) {
      uint32_t w = c->word[t], bj = pv->wblock[w];
      uint32_t ch = (uint32_t)(((uint64_t)(pv->wlocal[w] + 1) * (uint64_t)depth - 1) / wsz[bj]);
      fill[((size_t)pv->dblock[d] * B + bj) * (depth + 1) + ch + 1]++;
    }
  for (size_t b = 0; b < nd; b++) {
    uint32_t *f = fill + b * (depth + 1);
    uint32_t *off = (uint32_t *)((lda_data_hdr *)prob->data[b].buf + 1);
    for (int ch = 0; ch < depth; ch++) f[ch + 1] += f[ch];
    memcpy(off, f, (size_t)(depth + 1) * sizeof *off);
  }
  /* Documents in local order within each block: visit them by block. */
  uint32_t *order = strata_malloc(((size_t)c->n_docs + 1) * sizeof *order);
  uint32_t *pos = strata_calloc((size_t)B + 1, sizeof *pos);
  if (!order || !pos) {
    rc = strata_err_set(STRATA_ENOMEM, "lda: out of memory");
    goto done;
  }
  for (int b = 0; b < B; b++) pos[b + 1] = pos[b] + dsz[b];
  for (uint32_t d = 0; d < c->n_docs; d++) order[pos[pv->dblock[d]] + pv->dlocal[d]] = d;
  for (uint32_t k = 0; k < c->n_docs; k++) {
    uint32_t d = order[k], bi = pv->dblock[d];
    uint64_t slot = slot0[d];
    for (uint64_t t = c->doc_off[d]; t < c->doc_off[d + 1]; t++, slot++) {
      uint32_t w = c->word[t], bj = pv->wblock[w];
      size_t b = (size_t)bi * B + bj;
      uint32_t ch = (uint32_t)(((uint64_t)(pv->wlocal[w] + 1) * (uint64_t)depth - 1) / wsz[bj]);
      strata_lda_token *tok = (strata_lda_token *)((char *)prob->data[b].buf + eoff);
      uint32_t at = fill[b * (depth + 1) + ch]++;
      tok[at] = (strata_lda_token){.doc = pv->dlocal[d], .word = pv->wlocal[w], .slot = (uint32_t)slot};
    }
  }
done:
  strata_free(order);
  strata_free(pos);
  strata_free(fill);
  strata_free(count);
  return rc;
}

static int lda_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const lda_config *cfg = vcfg;
  strata_corpus c = {0};
  lda_priv *pv = strata_calloc(1, sizeof *pv);
  lda_meta *meta = NULL;
  uint32_t *dsz = NULL, *wsz = NULL, *dcount = NULL, *wcount = NULL;
  uint64_t *slot0 = NULL, *ntok = NULL;
  int B = setup->strata, depth = setup->depth, rc = 0;
  uint32_t K = (uint32_t)cfg->topics;
  if (!pv) goto oom;
  if ((rc = read_corpus(cfg, setup->model_out != NULL, pv, &c))) goto fail;
  if (pv->vocab.n && c.n_vocab > pv->vocab.n) {
    rc = strata_err_set(STRATA_EPARSE, "%s: word id %u is beyond the %u words of %s", cfg->data,
                        c.n_vocab - 1, pv->vocab.n, cfg->vocab);
    goto fail;
  }
  pv->n_docs = c.n_docs;
  pv->V = pv->vocab.n ? pv->vocab.n : c.n_vocab;
  if (!(meta = strata_calloc(1, meta_size((uint32_t)B, pv->V)))) goto oom;
  dsz = strata_malloc((size_t)B * sizeof *dsz);
  wsz = strata_malloc((size_t)B * sizeof *wsz);
  dcount = strata_calloc((size_t)c.n_docs + 1, sizeof *dcount);
  wcount = strata_calloc((size_t)pv->V + 1, sizeof *wcount);
  pv->dblock = strata_malloc(((size_t)c.n_docs + 1) * sizeof(uint32_t));
  pv->dlocal = strata_malloc(((size_t)c.n_docs + 1) * sizeof(uint32_t));
  pv->wblock = strata_malloc(((size_t)pv->V + 1) * sizeof(uint32_t));
  pv->wlocal = strata_malloc(((size_t)pv->V + 1) * sizeof(uint32_t));
  slot0 = strata_malloc(((size_t)c.n_docs + 1) * sizeof *slot0);
  ntok = strata_calloc((size_t)B, sizeof *ntok);
  if (!dsz || !wsz || !dcount || !wcount || !pv->dblock || !pv->dlocal || !pv->wblock ||
      !pv->wlocal || !slot0 || !ntok)
    goto oom;
  for (uint32_t d = 0; d < c.n_docs; d++) {
    uint64_t n = c.doc_off[d + 1] - c.doc_off[d];
    dcount[d] = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
  }
  for (uint64_t t = 0; t < c.n_tokens; t++) wcount[c.word[t]]++;
  if ((rc = strata_schedule_balance(c.n_docs, B, strata_mix64(setup->seed ^ 0xd0c), dcount,
                                    pv->dblock, pv->dlocal, dsz)))
    goto fail;
  if ((rc = strata_schedule_balance(pv->V, B, strata_mix64(setup->seed ^ 0x3e7d), wcount,
                                    pv->wblock, pv->wlocal, wsz)))
    goto fail;
  if ((rc = spread_over_chunks(pv->V, B, depth, wcount, pv->wblock, pv->wlocal, wsz))) goto fail;
  /* Token slots: block i's documents in local order, tokens in file order. */
  {
    uint32_t *first = strata_malloc(((size_t)c.n_docs + 1) * sizeof *first);
    if (!first) goto oom;
    uint32_t *pos = strata_calloc((size_t)B + 1, sizeof *pos);
    if (!pos) {
      strata_free(first);
      goto oom;
    }
    for (int b = 0; b < B; b++) pos[b + 1] = pos[b] + dsz[b];
    for (uint32_t d = 0; d < c.n_docs; d++) first[pos[pv->dblock[d]] + pv->dlocal[d]] = d;
    for (uint32_t k = 0; k < c.n_docs; k++) {
      uint32_t d = first[k], b = pv->dblock[d];
      slot0[d] = ntok[b];
      ntok[b] += c.doc_off[d + 1] - c.doc_off[d];
    }
    strata_free(first);
    strata_free(pos);
  }
  if (setup->model_out) {
    pv->slot_word = strata_malloc(((size_t)c.n_tokens + 1) * sizeof *pv->slot_word);
    pv->slot_first = strata_malloc(((size_t)B + 1) * sizeof *pv->slot_first);
    if (!pv->slot_word || !pv->slot_first) goto oom;
    pv->slot_first[0] = 0;
    for (int b = 0; b < B; b++) pv->slot_first[b + 1] = pv->slot_first[b] + ntok[b];
    for (uint32_t d = 0; d < c.n_docs; d++) {
      uint64_t at = pv->slot_first[pv->dblock[d]] + slot0[d];
      for (uint64_t t = c.doc_off[d]; t < c.doc_off[d + 1]; t++) pv->slot_word[at++] = c.word[t];
    }
  }
  char what[160];
  snprintf(what, sizeof what, "lda: the counts of %u documents and %u words at %d topics", c.n_docs,
           pv->V, K);
  if ((rc = strata_problem_fits(what, ((double)c.n_docs + pv->V) * K * 4.0, strata_app_lda.memory_hint)))
    goto fail;
  if ((rc = strata_problem_alloc(prob, B * B, B, B, 0))) goto fail;
  if ((rc = build_data(&c, pv, B, depth, dsz, wsz, slot0, prob))) goto fail;
  size_t row_bytes = (size_t)K * sizeof(float);
  for (int b = 0; b < B; b++) {
    strata_block *r = &prob->resident[b], *h = &prob->rotating[b];
    r->len = res_size(dsz[b], K, ntok[b]);
    h->nrows = wsz[b];
    h->row_bytes = (uint32_t)row_bytes;
    h->len = (size_t)wsz[b] * row_bytes;
    if (!(r->buf = strata_alloc_aligned(r->len)) || (h->len && !(h->buf = strata_alloc_aligned(h->len))))
      goto oom;
    memset(r->buf, 0, r->len);
    if (h->len) memset(h->buf, 0, h->len);
    *(lda_res_hdr *)r->buf = (lda_res_hdr){.n_docs = dsz[b], .K = K, .n_tokens = ntok[b]};
  }
  prob->global.nrows = 1;
  prob->global.row_bytes = (uint32_t)row_bytes;
  prob->global.len = row_bytes;
  if (!(prob->global.buf = strata_alloc_aligned(row_bytes))) goto oom;
  memset(prob->global.buf, 0, row_bytes);
  /* Initial topics: uniform, seeded by the token's place in the corpus. */
  float *nk = prob->global.buf;
  for (uint32_t d = 0; d < c.n_docs; d++) {
    lda_res r = res_view(prob->resident[pv->dblock[d]].buf);
    uint32_t dl = pv->dlocal[d];
    r.len[dl] = dcount[d];
    uint64_t slot = slot0[d];
    for (uint64_t t = c.doc_off[d]; t < c.doc_off[d + 1]; t++, slot++) {
      uint32_t w = c.word[t];
      uint16_t z = (uint16_t)(strata_mix64(setup->seed * 0x9e3779b97f4a7c15ull + t) % K);
      r.z[slot] = z;
      r.ndk[(size_t)dl * K + z]++;
      ((float *)prob->rotating[pv->wblock[w]].buf)[(size_t)pv->wlocal[w] * K + z] += 1.0f;
      nk[z] += 1.0f;
    }
  }
  uint32_t used = 0;
  for (uint32_t w = 0; w < pv->V; w++) used += wcount[w] > 0;
  *meta = (lda_meta){.K = K,
                     .V = pv->V,
                     .depth = (uint32_t)depth,
                     .B = (uint32_t)B,
                     .warp = strcmp(cfg->sampler, "warp") == 0,
                     .mh_steps = (uint32_t)cfg->mh_steps,
                     .alpha = cfg_alpha(cfg),
                     .beta = cfg->beta,
                     .n_tokens = c.n_tokens,
                     .n_docs = c.n_docs,
                     .n_vocab_used = used};
  {
    uint32_t *woff = (uint32_t *)(meta + 1), *wc = woff + B + 1;
    for (int b = 0; b < B; b++) woff[b + 1] = woff[b] + wsz[b];
    for (uint32_t w = 0; w < pv->V; w++) wc[woff[pv->wblock[w]] + pv->wlocal[w]] = wcount[w];
  }
  prob->n_examples = c.n_tokens;
  prob->meta = meta;
  prob->meta_len = meta_size((uint32_t)B, pv->V);
  prob->priv = pv;
  prob->priv_free = priv_free;
  meta = NULL;
  pv = NULL;
  goto done;
oom:
  rc = strata_err_set(STRATA_ENOMEM, "lda: out of memory");
fail:
  strata_problem_close(prob);
done:
  priv_free(pv);
  strata_free(meta);
  strata_free(dsz);
  strata_free(wsz);
  strata_free(dcount);
  strata_free(wcount);
  strata_free(slot0);
  strata_free(ntok);
  strata_corpus_close(&c);
  return rc;
}

static int lda_schedule(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                        strata_schedule *sched) {
  (void)cfg;
  (void)prob;
  return strata_schedule_diagonal(sched, setup->workers, setup->strata);
}

/* A small weight per topic for the count checksums: sums of count x weight
 * stay far below 2^53 (and 2^63), so they are exact in double and in
 * int64_t, and cancel exactly. */
static int64_t topic_weight(uint32_t k) { return 1 + (k * 2654435761u >> 7) % 1021; }

/* Entries of the objective's lgamma tables (lda_worker). */
#define LG_TABLE 65536u

typedef struct lda_worker {
  lda_meta meta;
  uint32_t *woff, *wcount; /* see lda_meta */
  int32_t *recount;        /* K: a document's topics recounted from z (zero between uses) */
  int64_t *tweight;        /* K: topic_weight */
  /* lgamma(n + alpha) - lgamma(alpha) and the same in beta for whole n
   * below n_lg: the objective's terms for counts, looked up rather than
   * computed (the same values: each entry is that expression) */
  double *lg_alpha, *lg_beta;
  uint32_t n_lg;
  strata_lda_sampler *sampler;
  strata_lda_warp *warp;
  uint64_t *doc_off; /* warp: first slot of each document of resident block doc_off_of */
  size_t doc_off_cap;
  int32_t doc_off_of; /* INT32_MIN: none yet */
  uint64_t seed;
} lda_worker;

static void lda_worker_free(void *state) {
  lda_worker *w = state;
  if (!w) return;
  strata_lda_sampler_free(w->sampler);
  strata_lda_warp_free(w->warp);
  strata_free(w->doc_off);
  strata_free(w->woff);
  strata_free(w->recount);
  strata_free(w->tweight);
  strata_free(w->lg_alpha);
  strata_free(w->lg_beta);
  strata_free(w);
}

static int lda_worker_init(const void *vcfg, const strata_setup *setup, const void *meta,
                           size_t meta_len, void **state) {
  (void)vcfg;
  const lda_meta *m = meta;
  if (meta_len < sizeof(lda_meta) || meta_len != meta_size(m->B, m->V))
    return strata_err_set(STRATA_ECOMM, "lda: meta of %zu bytes does not match its header",
                          meta_len);
  lda_worker *w = strata_calloc(1, sizeof *w);
  if (!w) return strata_err_set(STRATA_ENOMEM, "lda: out of memory");
  memcpy(&w->meta, m, sizeof w->meta);
  size_t nw = (size_t)m->B + 1 + m->V;
  w->woff = strata_malloc(nw * sizeof(uint32_t));
  w->recount = strata_calloc(m->K, sizeof(int32_t));
  w->tweight = strata_malloc((size_t)m->K * sizeof *w->tweight);
  /* Counts are at most the corpus's tokens; past 2^16 lgamma is called. */
  w->n_lg = m->n_tokens < LG_TABLE ? (uint32_t)m->n_tokens + 1 : LG_TABLE;
  w->lg_alpha = strata_malloc((size_t)w->n_lg * sizeof *w->lg_alpha);
  w->lg_beta = strata_malloc((size_t)w->n_lg * sizeof *w->lg_beta);
  int rc = 0;
  if (!w->woff || !w->recount || !w->tweight || !w->lg_alpha || !w->lg_beta) {
    rc = strata_err_set(STRATA_ENOMEM, "lda: out of memory");
    goto fail;
  }
  for (uint32_t k = 0; k < m->K; k++) w->tweight[k] = topic_weight(k);
  {
    const double la = lgamma(m->alpha), lb = lgamma(m->beta);
    for (uint32_t n = 0; n < w->n_lg; n++) {
      w->lg_alpha[n] = n ? lgamma(n + m->alpha) - la : 0;
      w->lg_beta[n] = n ? lgamma(n + m->beta) - lb : 0;
    }
  }
  memcpy(w->woff, meta_woff(m), nw * sizeof(uint32_t));
  w->wcount = w->woff + m->B + 1;
  w->seed = setup->seed;
  strata_lda_params p = {.K = m->K, .V = m->V, .alpha = m->alpha, .beta = m->beta};
  w->doc_off_of = INT32_MIN;
  if (m->warp) rc = strata_lda_warp_new(&p, m->mh_steps, &w->warp);
  else rc = strata_lda_sampler_new(&p, &w->sampler);
  if (rc) goto fail;
  *state = w;
  return 0;
fail:
  lda_worker_free(w);
  return rc;
}


static int lda_compute(void *state, const strata_task_view *tv, double *partials) {
  lda_worker *w = state;
  const lda_data_hdr *h = tv->data->buf;
  if (!h || !h->n) return 0;
  const uint32_t *off = (const uint32_t *)(h + 1);
  const strata_lda_token *tok =
      (const strata_lda_token *)((const char *)tv->data->buf + data_tokens_offset((int)h->depth));
  uint32_t lo = off[tv->chunk], hi = off[tv->chunk + 1];
  if (hi == lo) return 0;
  lda_res r = res_view(tv->resident->buf);
  /* One stream per (pass, data block, chunk): the draws do not depend on
   * which worker runs the chunk. */
  strata_rng rng;
  strata_rng_seed(&rng, strata_mix64(w->seed ^ strata_mix64(((uint64_t)tv->pass << 40) ^
                                                           ((uint64_t)tv->ids.data << 12) ^
                                                           (uint64_t)tv->chunk)));
  int rc;
  if (w->warp) {
    /* A document's slots follow the previous one's (see lda_load); the
     * lengths never change, so the offsets are built when the worker moves
     * to another resident block, not for every chunk. */
    if (w->doc_off_of != tv->ids.resident) {
      const uint32_t nd = r.h->n_docs;
      uint64_t *doff = strata_grow(w->doc_off, (size_t)nd + 1, &w->doc_off_cap, SIZE_MAX / 8,
                                   sizeof *doff);
      if (!doff) return strata_err_set(STRATA_ENOMEM, "lda: out of memory");
      w->doc_off = doff;
      doff[0] = 0;
      for (uint32_t d = 0; d < nd; d++) doff[d + 1] = doff[d] + r.len[d];
      w->doc_off_of = tv->ids.resident;
    }
    rc = strata_lda_warp_sweep(w->warp, tok + lo, hi - lo, r.ndk, tv->rotating->buf,
                               tv->global->buf, r.z, w->doc_off, &rng);
  } else {
    rc = strata_lda_sweep(w->sampler, tok + lo, hi - lo, r.ndk, tv->rotating->buf,
                          tv->global->buf, r.z, &rng);
  }
  if (rc) return rc;
  partials[P_TOKENS] += (double)(hi - lo);
  return 0;
}

/*
 * The joint log-likelihood log p(w, z) (Griffiths & Steyvers), as sums over
 * blocks (zero counts add nothing), and the count checks:
 *  - count_errors, invariants of each block alone, which hold in every mode
 *    even when a parameter-server read is stale (every delta a sweep sends
 *    moves counts between topics of one row): a document's topic counts
 *    equal its tokens' topics recounted from z; word-topic counts are
 *    whole, >= 0 and sum to the word's token count; totals are >= 0 and sum
 *    to the corpus's tokens;
 *  - count_mismatch, across blocks: per topic, documents, words and totals
 *    hold the same counts (checked through topic-weighted sums). Exact at
 *    every pass end in serial and scheduled modes, and after the last pass
 *    in every mode; between passes the parameter-server modes read rows that
 *    may miss other workers' latest clocks, or (a table read returns rows at
 *    least as new as asked) already hold some of their next clock's updates,
 *    even under bsp.
 */
static int lda_block_objective(void *state, int pass, strata_block_kind kind, int id,
                               const strata_block *b, double *partials) {
  (void)pass;
  lda_worker *w = state;
  uint32_t K = w->meta.K;
  double alpha = w->meta.alpha, beta = w->meta.beta, V = w->meta.V;
  const uint32_t n_lg = w->n_lg;
  const int64_t *tw = w->tweight;
  double s = 0, err = 0;
  int64_t chk = 0;
  if (kind == STRATA_BLOCK_RESIDENT) {
    lda_res r = res_view(b->buf);
    const double *lg = w->lg_alpha;
    double la = lgamma(alpha), lka = lgamma(K * alpha);
    int32_t *rc = w->recount;
    uint64_t slot = 0;
    for (uint32_t d = 0; d < r.h->n_docs; d++) {
      const int32_t *row = r.ndk + (size_t)d * K;
      const uint64_t s0 = slot;
      for (uint32_t t = 0; t < r.len[d] && slot < r.h->n_tokens; t++, slot++)
        if (r.z[slot] < K) rc[r.z[slot]]++;
      if (memcmp(row, rc, (size_t)K * sizeof *row) == 0) {
        /* The row is its tokens' topics recounted: its nonzero counts are
         * the topics of its slots, each taken once (clearing rc). Without
         * a branch on whether a topic was seen (a slot's repeat adds count
         * 0, whose term lg[0] is 0), in two sums: a document's repeats
         * are as unpredictable as its topics. */
        double s2[2] = {0, 0};
        for (uint64_t t = s0; t < slot; t++) {
          const uint32_t k = r.z[t];
          if (k >= K) continue;
          const int32_t c = rc[k]; /* row[k], or 0 once taken */
          rc[k] = 0;
          chk += (int64_t)c * tw[k];
          s2[t & 1] += (uint32_t)c < n_lg ? lg[c] : lgamma(c + alpha) - la;
        }
        s += s2[0] + s2[1];
      } else {
        for (uint32_t k = 0; k < K; k++) {
          err += row[k] != rc[k];
          chk += (int64_t)row[k] * tw[k];
          if (row[k] > 0) s += (uint32_t)row[k] < n_lg ? lg[row[k]] : lgamma(row[k] + alpha) - la;
        }
        memset(rc, 0, (size_t)K * sizeof *rc);
      }
      s += lka - lgamma(r.len[d] + K * alpha);
    }
    err += slot != r.h->n_tokens;
    partials[P_DOC] += s;
    partials[P_CHK_DW] += (double)chk;
  } else if (kind == STRATA_BLOCK_ROTATING) {
    const float *n = b->buf;
    const double *lg = w->lg_beta;
    double lb = lgamma(beta);
    const uint32_t *wc = w->wcount + w->woff[id];
    if (id < 0 || (uint32_t)id >= w->meta.B || w->woff[id + 1] - w->woff[id] != b->nrows)
      return strata_err_set(STRATA_EINVAL, "lda: rotating block %d does not match the corpus", id);
    double slow_chk = 0;
    for (uint32_t row = 0; row < b->nrows; row++) {
      const float *x = n + (size_t)row * K;
      /* Whole counts below 2^24 (where floats stop being exact) is what a
       * row holds: its nonzero entries found 2 at a time (most of a row is
       * zeros), checked, and their lgamma terms looked up. A row with
       * anything else takes the definition's path. */
      int32_t bad = 0;
      int64_t sum = 0, rchk = 0;
      double rs = 0;
      for (uint32_t k = 0; k < K && !bad; k += 8) {
        const uint32_t m = K - k >= 8 ? 8 : K - k;
        uint64_t g[4] = {0, 0, 0, 0};
        memcpy(g, x + k, m * sizeof *x);
        if (!(g[0] | g[1] | g[2] | g[3])) continue; /* eight +0.0 */
        /* Each entry without a branch on its value (whether a word holds a
         * topic is unpredictable): a zero adds count 0, whose term lg[0]
         * is 0; anything but a whole count below 2^24 sets bad. */
        double r2[2] = {0, 0};
        for (uint32_t q = k; q < k + m; q++) {
          const float v = x[q];
          const int32_t ok = v >= 0.0f && v < 16777216.0f;
          const int32_t c = ok ? (int32_t)v : 0;
          bad |= !ok | ((float)c != v);
          sum += c;
          rchk += (int64_t)c * tw[q];
          r2[q & 1] += (uint32_t)c < n_lg ? lg[c] : lgamma(c + beta) - lb;
        }
        rs += r2[0] + r2[1];
      }
      if (!bad) {
        chk += rchk;
        s += rs;
        err += (double)sum != (double)wc[row];
        continue;
      }
      double dsum = 0;
      for (uint32_t k = 0; k < K; k++) {
        const float v = x[k];
        if (v == 0.0f) continue;
        s += lgamma(v + beta) - lb;
        err += v < 0 || v != floorf(v);
        dsum += v;
        slow_chk += v * (double)tw[k];
      }
      err += dsum != (double)wc[row];
    }
    partials[P_WORD] += s;
    partials[P_CHK_DW] -= (double)chk + slow_chk;
    partials[P_CHK_WT] += (double)chk + slow_chk;
  } else {
    const float *nk = b->buf;
    double total = 0, dchk = 0;
    for (uint32_t k = 0; k < K; k++) {
      s += lgamma(V * beta) - lgamma(nk[k] + V * beta);
      total += nk[k];
      err += nk[k] < 0 || nk[k] != floorf(nk[k]);
      dchk += nk[k] * (double)tw[k];
    }
    err += total != (double)w->meta.n_tokens;
    partials[P_TOTAL] += s;
    partials[P_CHK_WT] -= dchk;
  }
  partials[P_ERR] += err;
  return 0;
}

static void lda_objectives(const void *cfg, const strata_problem *prob, const double *p,
                           double *values) {
  (void)cfg;
  const lda_meta *m = prob->meta;
  double ll = p[P_DOC] + p[P_WORD] + p[P_TOTAL];
  values[0] = ll;
  values[1] = m && m->n_tokens ? ll / (double)m->n_tokens : 0.0 / 0.0;
  values[2] = p[P_ERR];
  values[3] = (p[P_CHK_DW] != 0) + (p[P_CHK_WT] != 0);
}

static void lda_describe(const void *vcfg, const strata_problem *prob, strata_json *j) {
  const lda_config *cfg = vcfg;
  const lda_meta *m = prob->meta;
  strata_json_string(j, "data", cfg->data);
  strata_json_int(j, "topics", cfg->topics);
  strata_json_number(j, "alpha", cfg_alpha(cfg));
  strata_json_number(j, "beta", cfg->beta);
  strata_json_string(j, "sampler", cfg->sampler);
  if (!strcmp(cfg->sampler, "warp")) strata_json_int(j, "mh_steps", cfg->mh_steps);
  strata_json_int(j, "docs", m ? m->n_docs : 0);
  strata_json_int(j, "vocab", m ? m->V : 0);
  strata_json_int(j, "tokens", (int64_t)prob->n_examples);
}

const strata_app strata_app_lda = {
    .name = "lda",
    .memory_hint = "lower --topics",
    .flags = STRATA_APP_ADDITIVE,
    .summary = "topic modelling on the collapsed posterior (exact sparse Gibbs sampler, or "
               "Metropolis-Hastings with --sampler warp)",
    .unit = "tokens",
    .examples =
        "  mpirun -np 3 strata lda --data ../shared/data/uci-bow-kos/docword.kos.txt.gz \\\n"
        "      --vocab ../shared/data/uci-bow-kos/vocab.kos.txt --topics 100 --passes 50\n"
        "  mpirun -np 3 strata lda --data ../shared/data/lda-c-ap/ap.dat \\\n"
        "      --vocab ../shared/data/lda-c-ap/vocab.txt --topics-out ap-topics\n"
        "  strata lda --mode serial --data synth:docs=2000,len=100,vocab=5000,topics=20\n"
        "  mpirun -np 3 strata lda --data ../shared/data/uci-bow-kos/docword.kos.txt.gz \\\n"
        "      --topics 1000 --sampler warp --passes 100\n",
    .options = lda_options,
    /* Gibbs sampling loses more to counts a pass old than SGD does: clocks
     * of a quarter pass keep ssp's s = 1 within half a pass. */
    .defaults = {.depth = 4,
                 .wpc = 0.25,
                 .model_out_flag = "topics-out",
                 .model_out_help = "write top words per topic, doc-topic proportions and the "
                                   "model into this directory"},
    .config_size = sizeof(lda_config),
    .check = lda_check,
    .n_partials = N_PARTIALS,
    .n_objectives = 4,
    .objective_names = lda_objective_names,
    .load = lda_load,
    .schedule = lda_schedule,
    .worker_init = lda_worker_init,
    .worker_free = lda_worker_free,
    .compute = lda_compute,
    .block_objective = lda_block_objective,
    .objectives = lda_objectives,
    .tol = {STRATA_TOL_REL_CHANGE, 0, "the relative change of the training log-likelihood over a pass"},
    .describe = lda_describe,
    .export_model = strata__lda_export,
};

/* ---- export: what strata__lda_export needs of this file's layouts ---- */

int strata__lda_layout(const strata_problem *prob, strata__lda_view *v) {
  const lda_meta *m = prob->meta;
  const lda_priv *pv = prob->priv;
  if (!m || !pv) return strata_err_set(STRATA_EINVAL, "lda: no model to export");
  v->K = m->K;
  v->V = pv->V;
  v->n_docs = pv->n_docs;
  v->alpha = m->alpha;
  v->beta = m->beta;
  v->vocab = pv->vocab.n ? (const char *const *)pv->vocab.words : NULL;
  v->prob = prob;
  v->wblock = pv->wblock;
  v->wlocal = pv->wlocal;
  v->dblock = pv->dblock;
  v->dlocal = pv->dlocal;
  v->slot_word = pv->slot_word;
  v->slot_first = pv->slot_first;
  return 0;
}

const int32_t *strata__lda_doc_row(const strata__lda_view *v, uint32_t d, uint32_t *len) {
  lda_res r = res_view(v->prob->resident[v->dblock[d]].buf);
  *len = r.len[v->dlocal[d]];
  return r.ndk + (size_t)v->dlocal[d] * v->K;
}

/* Decimal digits of x into p, returning the end. */
static char *put_u32(char *p, uint32_t x) {
  char tmp[10];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + x % 10);
    x /= 10;
  } while (x);
  while (n) *p++ = tmp[--n];
  return p;
}

/*
 * z.txt: documents in corpus order, each as its token count and then
 * word:topic per token (the format of WarpLDA's -dumpz, which strata
 * lda-eval reads), the words kept at load for it (lda_priv.slot_word).
 */
int strata__lda_write_z(FILE *f, void *ud) {
  const strata__lda_view *v = ud;
  const strata_problem *prob = v->prob;
  const uint32_t K = v->K, B = (uint32_t)prob->n_resident;
  if (!v->slot_word) return strata_err_set(STRATA_EINVAL, "lda: no words kept for z.txt");
  enum { BUF = 64 * 1024 };
  char *buf = strata_malloc(BUF);
  /* each document's first slot, by block and place: first[dfirst[b] + dl] */
  uint64_t *dfirst = strata_malloc(((size_t)B + 1) * sizeof *dfirst);
  uint64_t *first = strata_malloc(((size_t)v->n_docs + 1) * sizeof *first);
  int rc = 0;
  if (!buf || !dfirst || !first) {
    rc = strata_err_set(STRATA_ENOMEM, "lda: out of memory writing z");
    goto done;
  }
  dfirst[0] = 0;
  for (uint32_t b = 0; b < B; b++) {
    lda_res r = res_view(prob->resident[b].buf);
    uint64_t slot = 0;
    for (uint32_t dl = 0; dl < r.h->n_docs; dl++) {
      first[dfirst[b] + dl] = slot;
      slot += r.len[dl];
    }
    dfirst[b + 1] = dfirst[b] + r.h->n_docs;
  }
  for (uint32_t d = 0; d < v->n_docs && !rc; d++) {
    const uint32_t bi = v->dblock[d], dl = v->dlocal[d];
    lda_res r = res_view(prob->resident[bi].buf);
    const uint32_t *word = v->slot_word + v->slot_first[bi];
    const uint64_t slot = first[dfirst[bi] + dl];
    char *p = put_u32(buf, r.len[dl]);
    for (uint64_t s = slot, e = slot + r.len[dl]; s < e; s++) {
      if (p - buf > BUF - 32) {
        if (fwrite(buf, 1, (size_t)(p - buf), f) != (size_t)(p - buf)) rc = STRATA_EIO;
        p = buf;
      }
      *p++ = ' ';
      p = put_u32(p, word[s]);
      *p++ = ':';
      p = put_u32(p, r.z[s] < K ? r.z[s] : K);
    }
    *p++ = '\n';
    if (!rc && fwrite(buf, 1, (size_t)(p - buf), f) != (size_t)(p - buf)) rc = STRATA_EIO;
  }
  if (rc) rc = strata_err_set(STRATA_EIO, "write failed");
done:
  strata_free(buf);
  strata_free(dfirst);
  strata_free(first);
  return rc;
}
